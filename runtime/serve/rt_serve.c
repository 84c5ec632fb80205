/* runtime/serve/rt_serve.c: `PROG serve`, an OpenAI-compatible server
 * over a slotted decoder (docs/serving.md).
 *
 * Threads: libmicrohttpd runs a thread per connection, which reads the
 * request, answers what needs no model (health, models, errors) and
 * queues a job for the rest; the main thread is the scheduler, the only
 * one that touches the model and the tokenizers. One mutex guards the
 * queue and every job; one condition wakes the scheduler (work), another
 * the connections (progress).
 *
 * Scheduling (continuous batching): B = --parallel slots (at most the
 * program's batch rows). A request is refused with 503 and Retry-After
 * when B jobs run and Q (--queue) wait. Each turn the scheduler
 *   1. retires jobs whose client has gone (their slot is free at once)
 *      and drops such jobs from the queue;
 *   2. admits waiting jobs into free slots: encodes the prompt with the
 *      slot's own tokenizer (decoding keeps per-text state), refuses one
 *      that leaves no room in the context (400), prefills it in its slot
 *      (rt_dec_prefill, the prefill variant);
 *   3. samples each running job's next token from its slot's logits; a
 *      job ends at an end token (finish "stop"), at its max_tokens or the
 *      context's end ("length"); its text grows piece by piece;
 *   4. runs one batch call (rt_model.run_batch) of the next token of
 *      every job still running, rows past them repeating the last, and
 *      keeps each row's logits for its slot.
 * A streamed response (server-sent events) sends each piece as the
 * scheduler adds it; a response that is not streamed waits for the whole
 * text. A client that disconnects is seen when a write fails (streamed)
 * or, while its request waits in the queue or for its whole text, by
 * looking at its socket every SV_POLL_MS; its job leaves the queue or is
 * retired, so its slot is free for the next. Bodies past SV_MAX_BODY bytes get 413, max_tokens past
 * --max-tokens 400, malformed requests 400 (rt_serve_req.c), unknown
 * paths 404, a missing or wrong bearer key 401 (with --api-key; /health
 * is open). Errors are OpenAI's object: {"error": {"message", "type",
 * "param", "code"}}. SIGINT or SIGTERM stops the server. */
#include "runtime/serve/rt_srv.h"
#include "runtime/gen/rt_tok.h"

#include <arpa/inet.h>
#include <math.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define SV_MAX_BODY (1 << 20)           /* bytes of a request's body */
#define SV_POLL_MS 100                  /* how often a waiting request looks at its client */

enum { SV_QUEUED, SV_RUNNING, SV_DONE, SV_FAILED };

typedef struct sv_job sv_job;
struct sv_job {
    rt_serve_req req;
    int chat, refs, state, gone, final_sent, slot;
    int64_t max_tokens, n_prompt, n_gen, pos;
    int prev;                           /* the last token fed */
    uint64_t rng;
    char *text;                         /* what was generated: len bytes */
    size_t len, cap, sent;
    size_t safe;                        /* text past it may begin a stop string: held back */
    int32_t *ids;                       /* the prompt and the tokens drawn (penalties) */
    int64_t nids;
    const char *finish;                 /* "stop" or "length" */
    int status;                         /* a failed job's HTTP status */
    char err[512];
    char id[40];
    long long created;
    void *srv;                          /* the server (a stream's callbacks) */
    sv_job *next;                       /* the queue */
};

typedef struct {
    const rt_model *md;
    rt_dec d;
    rt_tok **tok;                       /* [B]: each slot's */
    const char *tok_path, *api_key, *model_name;
    int B, Q, family;                   /* slots, queue, chat template (0: none) */
    int64_t max_tokens;
    char bos[64], eos[64];
    float *lg;                          /* [B, V]: each slot's last logits */
    sv_job **slot;                      /* [B] */
    sv_job *head, *tail;
    int nqueued, nrunning;
    uint64_t serial;
    pthread_mutex_t mu;
    pthread_cond_t work, progress;
} sv_server;

static volatile sig_atomic_t sv_stop;
static void sv_on_signal(int sig) { (void)sig; sv_stop = 1; }

/* ---- JSON out -------------------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} sv_buf;

static void sv_put(sv_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void sv_printf(sv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sv_printf(sv_buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sv_put(b, tmp, n < 0 ? 0 : (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* The length of the maximal ill-formed part at s[0, n) (s[0] starts no
 * well-formed character): the lead byte and the continuation bytes that
 * could follow it (Unicode's "maximal subpart"), at least 1. */
static size_t sv_bad_run(const unsigned char *s, size_t n)
{
    unsigned c = s[0], need = c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2
                            : c >= 0xF0 && c <= 0xF4 ? 3 : 0;
    size_t i = 1;
    for (; i <= need && i < n; i++) {
        unsigned lo = 0x80, hi = 0xBF;
        if (i == 1)
            lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80,
            hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        if (s[i] < lo || s[i] > hi)
            break;
    }
    return i;
}

/* s[0, n) as a JSON string, quotes included; bytes that are no UTF-8 (a
 * model may draw any byte token) become U+FFFD, one a maximal part. */
static void sv_str(sv_buf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    sv_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        size_t ok = rt_utf8_bad(u + i, n - i);
        for (size_t k = i; k < i + ok; k++) {
            unsigned char c = u[k];
            char esc[8];
            if (c == '"' || c == '\\') {
                esc[0] = '\\';
                esc[1] = (char)c;
                sv_put(b, esc, 2);
            } else if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                sv_put(b, esc, 6);
            } else {
                sv_put(b, (const char *)&c, 1);
            }
        }
        i += ok;
        if (i < n) {
            sv_put(b, "\\ufffd", 6);
            i += sv_bad_run(u + i, n - i);
        }
    }
    sv_put(b, "\"", 1);
}

/* ---- responses ------------------------------------------------------- */

static enum MHD_Result sv_send(struct MHD_Connection *c, unsigned status, sv_buf *b,
                               const char *retry)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(b->oom ? 0 : b->len, b->p,
                                                             MHD_RESPMEM_MUST_COPY);
    free(b->p);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (retry)
        MHD_add_response_header(r, "Retry-After", retry);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result sv_error(struct MHD_Connection *c, unsigned status, const char *type,
                                const char *msg, const char *retry)
{
    sv_buf b = {0};
    sv_printf(&b, "{\"error\": {\"message\": ");
    sv_str(&b, msg, strlen(msg));
    sv_printf(&b, ", \"type\": \"%s\", \"param\": null, \"code\": null}}\n", type);
    return sv_send(c, status, &b, retry);
}

/* The head of a completion object, up to the choice's own fields. */
static void sv_head(sv_buf *b, const sv_server *s, const sv_job *j, int chunk)
{
    const char *obj = j->chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                              : "text_completion";
    sv_printf(b, "{\"id\": \"%s\", \"object\": \"%s\", \"created\": %lld, \"model\": ", j->id, obj,
              j->created);
    sv_str(b, s->model_name, strlen(s->model_name));
    sv_printf(b, ", \"choices\": [{\"index\": 0, ");
}

static void sv_usage(sv_buf *b, const sv_job *j)
{
    sv_printf(b, ", \"usage\": {\"prompt_tokens\": %lld, \"completion_tokens\": %lld, "
              "\"total_tokens\": %lld}", (long long)j->n_prompt, (long long)j->n_gen,
              (long long)(j->n_prompt + j->n_gen));
}

static void sv_whole(sv_buf *b, const sv_server *s, const sv_job *j)
{
    sv_head(b, s, j, 0);
    if (j->chat) {
        sv_printf(b, "\"message\": {\"role\": \"assistant\", \"content\": ");
        sv_str(b, j->text ? j->text : "", j->len);
        sv_printf(b, "}, ");
    } else {
        sv_printf(b, "\"text\": ");
        sv_str(b, j->text ? j->text : "", j->len);
        sv_printf(b, ", \"logprobs\": null, ");
    }
    sv_printf(b, "\"finish_reason\": \"%s\"}]", j->finish ? j->finish : "stop");
    sv_usage(b, j);
    sv_printf(b, "}\n");
}

/* One event: text[0, n) and the finish reason (NULL: none yet). */
static void sv_event(sv_buf *b, const sv_server *s, const sv_job *j, const char *text, size_t n,
                     const char *finish)
{
    sv_printf(b, "data: ");
    sv_head(b, s, j, 1);
    if (j->chat) {
        sv_printf(b, "\"delta\": {");
        if (!finish) {
            sv_printf(b, "\"role\": \"assistant\", \"content\": ");
            sv_str(b, text, n);
        }
        sv_printf(b, "}, ");
    } else {
        sv_printf(b, "\"text\": ");
        sv_str(b, text, n);
        sv_printf(b, ", \"logprobs\": null, ");
    }
    if (finish)
        sv_printf(b, "\"finish_reason\": \"%s\"}]", finish);
    else
        sv_printf(b, "\"finish_reason\": null}]");
    sv_printf(b, "}\n\n");
}

/* ---- jobs ------------------------------------------------------------ */

/* Drops a reference (the connection's or the scheduler's); mu held. */
static void sv_release(sv_job *j)
{
    if (--j->refs)
        return;
    rt_serve_req_free(&j->req);
    free(j->text);
    free(j->ids);
    free(j);
}

static void sv_append(sv_job *j, const char *s)
{
    size_t n = strlen(s);
    if (j->len + n + 1 > j->cap) {
        size_t cap = (j->len + n + 1) * 2;
        char *p = realloc(j->text, cap);
        if (!p)
            return;                     /* the text stays short; the job goes on */
        j->text = p;
        j->cap = cap;
    }
    memcpy(j->text + j->len, s, n + 1);
    j->len += n;
}

/* Appends drawn text through the job's stop strings: 1 when one occurred
 * (the text then ends before it), else 0 (j->safe moved on). */
static int sv_add(sv_job *j, const char *s)
{
    sv_append(j, s);
    if (!j->text)
        return 0;
    size_t end = j->len - j->safe;
    int hit = rt_stop_scan(j->text + j->safe, j->len - j->safe, j->req.stop, j->req.nstop, &end);
    j->safe += end;
    if (hit)
        j->text[j->len = j->safe] = 0;
    return hit;
}

/* The bytes of the text a stream may send: all once the job has ended. */
static size_t sv_ready(const sv_job *j)
{
    return j->state == SV_RUNNING ? j->safe : j->len;
}

/* Streams a job: each call waits for text not yet sent, or the end. */
static ssize_t sv_stream(void *cls, uint64_t at, char *buf, size_t max)
{
    sv_job *j = cls;
    sv_server *s = j->srv;
    (void)at;
    pthread_mutex_lock(&s->mu);
    while (j->sent == sv_ready(j) && j->state == SV_RUNNING && !sv_stop)
        pthread_cond_wait(&s->progress, &s->mu);
    sv_buf b = {0};
    ssize_t n = 0;
    if (j->sent < sv_ready(j)) {
        size_t take = sv_ready(j) - j->sent, room = max > 1200 ? (max - 1000) / 6 : 1;
        if (take > room) {
            take = room;
            while (take > 1 && ((unsigned char)j->text[j->sent + take] & 0xC0) == 0x80)
                take--;                 /* never split a character */
        }
        sv_event(&b, s, j, j->text + j->sent, take, NULL);
        if (!b.oom && b.len <= max)
            j->sent += take;
    } else if (!j->final_sent) {
        sv_event(&b, s, j, "", 0, j->finish ? j->finish : "stop");
        sv_printf(&b, "data: [DONE]\n\n");
        j->final_sent = 1;
    } else {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    }
    pthread_mutex_unlock(&s->mu);
    if (!n) {
        if (b.oom || b.len > max)
            n = MHD_CONTENT_READER_END_WITH_ERROR;
        else
            memcpy(buf, b.p, (size_t)(n = (ssize_t)b.len));
    }
    free(b.p);
    return n;
}

/* The stream's end, or its client gone: the job is retired. */
static void sv_stream_free(void *cls)
{
    sv_job *j = cls;
    sv_server *s = j->srv;
    pthread_mutex_lock(&s->mu);
    j->gone = 1;
    sv_release(j);
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->mu);
}

/* ---- requests -------------------------------------------------------- */

typedef struct {
    char *body;
    size_t len;
    int too_big;
} sv_conn;

static int sv_authorized(const sv_server *s, struct MHD_Connection *c)
{
    if (!s->api_key)
        return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, s->api_key);
}

/* Whether connection c's client has closed its end: the socket hangs up,
 * or a read would see the end of the stream (bytes of a next request do
 * not count). */
static int sv_client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN};
    char byte;
    return poll(&p, 1, 0) == 1 &&
           ((p.revents & (POLLHUP | POLLERR)) ||
            recv(ci->connect_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0);
}

/* Waits (mu held) while job j is queued, or runs and is not streamed;
 * 0, or -1 when the client has gone (the job marked so, this
 * connection's reference dropped). */
static int sv_wait(sv_server *s, struct MHD_Connection *c, sv_job *j)
{
    while ((j->state == SV_QUEUED || (!j->req.stream && j->state == SV_RUNNING)) && !sv_stop) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += SV_POLL_MS * 1000000L;
        if (t.tv_nsec >= 1000000000)
            t.tv_sec++, t.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&s->progress, &s->mu, &t);
        if (sv_client_gone(c)) {
            j->gone = 1;
            sv_release(j);
            pthread_cond_broadcast(&s->work);
            return -1;
        }
    }
    return 0;
}

static enum MHD_Result sv_completion(sv_server *s, struct MHD_Connection *c, sv_conn *rc,
                                     int chat)
{
    rt_err e = {0};
    sv_job *j = calloc(1, sizeof *j);
    if (!j)
        return sv_error(c, 500, "server_error", "out of memory", NULL);
    if (rt_serve_parse(rc->body ? rc->body : "", rc->len, chat, &j->req, &e)) {
        free(j);
        return sv_error(c, 400, "invalid_request_error", e.msg, NULL);
    }
    j->chat = chat;
    j->max_tokens = j->req.max_tokens < 0 ? (chat ? s->max_tokens : 16) : j->req.max_tokens;
    if (j->max_tokens > s->max_tokens) {
        char msg[160];
        snprintf(msg, sizeof msg, "request: 'max_tokens' %lld is more than this server's %lld "
                 "(--max-tokens)", (long long)j->max_tokens, (long long)s->max_tokens);
        rt_serve_req_free(&j->req);
        free(j);
        return sv_error(c, 400, "invalid_request_error", msg, NULL);
    }
    if (chat && !s->family) {
        rt_serve_req_free(&j->req);
        free(j);
        return sv_error(c, 400, "invalid_request_error", "this server has no chat template "
                        "(the tokenizer has none; serve --chat-template NAME)", NULL);
    }
    j->refs = 2;                        /* this connection's, the scheduler's */
    j->srv = s;
    j->created = (long long)time(NULL);
    j->slot = -1;
    pthread_mutex_lock(&s->mu);
    if (s->nrunning + s->nqueued >= s->B + s->Q) {
        pthread_mutex_unlock(&s->mu);
        rt_serve_req_free(&j->req);
        free(j);
        return sv_error(c, 503, "server_busy", "every slot is busy and the queue is full; "
                        "try again", "1");
    }
    snprintf(j->id, sizeof j->id, "%s-%llu", chat ? "chatcmpl" : "cmpl",
             (unsigned long long)++s->serial);
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    s->nqueued++;
    pthread_cond_broadcast(&s->work);
    if (sv_wait(s, c, j)) {
        pthread_mutex_unlock(&s->mu);
        return MHD_NO;                  /* nobody to answer */
    }
    if (j->state == SV_FAILED || sv_stop) {
        char msg[512];
        unsigned status = sv_stop ? 503 : (unsigned)j->status;
        snprintf(msg, sizeof msg, "%s", sv_stop ? "the server is stopping" : j->err);
        sv_release(j);
        pthread_mutex_unlock(&s->mu);
        return sv_error(c, status, status == 400 ? "invalid_request_error" : "server_error", msg,
                        NULL);
    }
    if (!j->req.stream) {
        sv_buf b = {0};
        sv_whole(&b, s, j);
        sv_release(j);
        pthread_mutex_unlock(&s->mu);
        return sv_send(c, 200, &b, NULL);
    }
    pthread_mutex_unlock(&s->mu);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
                                                               sv_stream, j, sv_stream_free);
    if (!r) {
        sv_stream_free(j);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ok = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result sv_route(sv_server *s, struct MHD_Connection *c, const char *url,
                                const char *method, sv_conn *rc)
{
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (get && !strcmp(url, "/health")) {
        sv_buf b = {0};
        sv_printf(&b, "{\"status\": \"ok\"}\n");
        return sv_send(c, 200, &b, NULL);
    }
    if (!sv_authorized(s, c))
        return sv_error(c, 401, "invalid_request_error", "a valid API key is required "
                        "(Authorization: Bearer KEY)", NULL);
    if (get && !strcmp(url, "/v1/models")) {
        sv_buf b = {0};
        sv_printf(&b, "{\"object\": \"list\", \"data\": [{\"id\": ");
        sv_str(&b, s->model_name, strlen(s->model_name));
        sv_printf(&b, ", \"object\": \"model\", \"created\": 0, \"owned_by\": \"kiln\"}]}\n");
        return sv_send(c, 200, &b, NULL);
    }
    int chat = !strcmp(url, "/v1/chat/completions");
    if (post && (chat || !strcmp(url, "/v1/completions"))) {
        if (rc->too_big) {
            char msg[96];
            snprintf(msg, sizeof msg, "request: the body is more than %d bytes", SV_MAX_BODY);
            return sv_error(c, 413, "invalid_request_error", msg, NULL);
        }
        return sv_completion(s, c, rc, chat);
    }
    char msg[300];
    snprintf(msg, sizeof msg, "no such endpoint: %.20s %.200s", method, url);
    return sv_error(c, 404, "invalid_request_error", msg, NULL);
}

static enum MHD_Result sv_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls)
{
    (void)version;
    sv_conn *rc = *con_cls;
    if (!rc) {
        if (!(rc = calloc(1, sizeof *rc)))
            return MHD_NO;
        *con_cls = rc;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!rc->too_big && rc->len + *upload_size <= SV_MAX_BODY) {
            char *p = realloc(rc->body, rc->len + *upload_size + 1);
            if (!p)
                return MHD_NO;
            memcpy(p + rc->len, upload, *upload_size);
            rc->body = p;
            rc->len += *upload_size;
            rc->body[rc->len] = 0;
        } else {
            rc->too_big = 1;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    return sv_route(cls, c, url, method, rc);
}

static void sv_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
    (void)cls, (void)c, (void)why;
    sv_conn *rc = *con_cls;
    if (rc)
        free(rc->body);
    free(rc);
    *con_cls = NULL;
}

/* ---- the scheduler --------------------------------------------------- */

static void sv_fail(sv_server *s, sv_job *j, int status, const char *msg)
{
    pthread_mutex_lock(&s->mu);
    j->state = SV_FAILED;
    j->status = status;
    snprintf(j->err, sizeof j->err, "%s", msg);
    pthread_cond_broadcast(&s->progress);
    pthread_mutex_unlock(&s->mu);
}

/* Ends job j in its slot (mu held): done, the scheduler's reference
 * dropped, the slot free. */
static void sv_retire(sv_server *s, sv_job *j)
{
    if (j->state == SV_RUNNING)
        j->state = SV_DONE;
    s->slot[j->slot] = NULL;
    s->nrunning--;
    pthread_cond_broadcast(&s->progress);
    sv_release(j);
}

/* The job's prompt as ids, prefilled in its slot; 0, or -1 when it
 * failed (said to its connection). */
static int sv_admit(sv_server *s, sv_job *j)
{
    rt_err e = {0};
    rt_tok *tok = s->tok[j->slot];
    char *text = j->req.prompt;
    if (j->chat && !(text = rt_chat_render(s->family, j->req.msgs, j->req.nmsgs, 1, s->bos,
                                           s->eos, &e))) {
        sv_fail(s, j, 400, e.msg);
        return -1;
    }
    size_t len = strlen(text);
    int cap = (int)(len * 6 + 3 < (size_t)s->d.S + 1 ? len * 6 + 3 : (size_t)s->d.S + 1), n = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)cap);
    int rc = !ids ? rt_errf(&e, RT_EINTERNAL, "out of memory")
                  : rt_tok_encode(tok, text, !j->chat, ids, cap, &n, &e);
    if (text != j->req.prompt)
        free(text);
    if (!rc && !n)
        rc = rt_errf(&e, RT_EINVAL, "the prompt is empty and the tokenizer has no BOS");
    if (!rc && n >= s->d.S)
        rc = rt_errf(&e, RT_EINVAL, "the prompt is %d tokens; the context holds %lld", n,
                     (long long)s->d.S);
    if (rc && strstr(e.msg, "more than"))
        snprintf(e.msg, sizeof e.msg, "the prompt is more tokens than the context's %lld",
                 (long long)s->d.S);
    s->d.slot = j->slot;
    if (!rc)
        rc = rt_dec_prefill(&s->d, ids, 0, n, &e);
    int32_t *all = rc ? NULL : realloc(ids, sizeof *ids * (size_t)(s->d.S + 1));
    if (all)
        ids = all;
    else if (!rc)
        rc = rt_errf(&e, RT_EINTERNAL, "out of memory");
    if (!rc) {
        memcpy(s->lg + j->slot * s->d.V, s->d.logits, sizeof *s->lg * (size_t)s->d.V);
        j->prev = ids[n - 1];
        j->pos = n;
        j->n_prompt = n;
        j->rng = j->req.seed;
        j->ids = ids;                   /* the penalties' text, drawn tokens to come */
        j->nids = n;
    } else {
        free(ids);
    }
    if (rc) {
        sv_fail(s, j, rc == RT_EINVAL ? 400 : 500, e.msg);
        return -1;
    }
    return 0;
}

/* Step 3 for the job in slot k (mu held): its next token, or its end.
 * 1 when it goes on (a row of the batch), else 0. */
static int sv_draw(sv_server *s, sv_job *j, int *next)
{
    rt_tok *tok = s->tok[j->slot];
    if (j->n_gen >= j->max_tokens || j->pos >= s->d.S) {
        j->finish = "length";
        return 0;
    }
    float *lg = s->lg + j->slot * s->d.V;
    for (int i = 0; j->req.ignore_eos && i <= tok->nends; i++) {
        int end = i < tok->nends ? tok->ends[i] : tok->bos;
        if (end >= 0 && end < s->d.V)
            lg[end] = -INFINITY;        /* never drawn */
    }
    int id = rt_sampler_draw(lg, (int)s->d.V, &j->req.samp, j->ids, (int)j->nids, &j->rng,
                             s->d.scratch);
    if (rt_tok_is_end(tok, id) || id == rt_tok_bos(tok)) {
        j->finish = "stop";
        return 0;
    }
    const char *piece = rt_tok_decode_piece(tok, j->prev, id);
    j->ids[j->nids++] = id;
    j->prev = id;
    j->n_gen++;
    if (sv_add(j, piece)) {
        rt_tok_decode_flush(tok);       /* what it held is past the stop string */
        j->finish = "stop";
        return 0;
    }
    *next = id;
    return 1;
}

static int sv_schedule(sv_server *s)
{
    rt_err e = {0};
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!sv_stop && !s->nrunning && !s->head) {
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            t.tv_nsec += 100000000;
            if (t.tv_nsec >= 1000000000)
                t.tv_sec++, t.tv_nsec -= 1000000000;
            pthread_cond_timedwait(&s->work, &s->mu, &t);
        }
        if (sv_stop) {
            pthread_cond_broadcast(&s->progress);
            pthread_mutex_unlock(&s->mu);
            return 0;
        }
        for (int k = 0; k < s->B; k++)          /* 1: clients gone */
            if (s->slot[k] && s->slot[k]->gone)
                sv_retire(s, s->slot[k]);
        s->tail = NULL;
        for (sv_job **p = &s->head; *p;) {
            sv_job *j = *p;
            if (j->gone) {
                *p = j->next;
                s->nqueued--;
                sv_release(j);
            } else {
                s->tail = j;
                p = &j->next;
            }
        }
        sv_job *admit[4096];
        int na = 0;
        for (int k = 0; k < s->B && s->head; k++) {     /* 2: waiting jobs into free slots */
            if (s->slot[k])
                continue;
            sv_job *j = s->head;
            s->head = j->next;
            if (!s->head)
                s->tail = NULL;
            j->next = NULL;
            s->nqueued--;
            s->nrunning++;
            s->slot[k] = j;
            j->slot = k;
            admit[na++] = j;
        }
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < na; i++) {
            rt_tok_decode_flush(s->tok[admit[i]->slot]);
            int bad = sv_admit(s, admit[i]);
            pthread_mutex_lock(&s->mu);
            if (bad)
                sv_retire(s, admit[i]);
            else
                admit[i]->state = SV_RUNNING;
            pthread_cond_broadcast(&s->progress);
            pthread_mutex_unlock(&s->mu);
        }
        int rows = 0, row_of[4096];
        pthread_mutex_lock(&s->mu);             /* 3: each job's next token */
        for (int k = 0; k < s->B; k++) {
            sv_job *j = s->slot[k];
            int next;
            if (!j || j->state != SV_RUNNING)
                continue;
            if (j->gone || !sv_draw(s, j, &next)) {
                if (sv_add(j, rt_tok_decode_flush(s->tok[k])))
                    j->finish = "stop";
                sv_retire(s, j);
                continue;
            }
            s->d.tk[rows] = next;
            s->d.ps[rows] = (int32_t)j->pos++;
            s->d.sl[rows] = k;
            row_of[k] = rows++;
        }
        pthread_cond_broadcast(&s->progress);
        pthread_mutex_unlock(&s->mu);
        if (!rows)
            continue;
        for (int r = rows; r < s->md->batch; r++) {     /* 4: one batch call */
            s->d.tk[r] = s->d.tk[rows - 1];
            s->d.ps[r] = s->d.ps[rows - 1];
            s->d.sl[r] = s->d.sl[rows - 1];
        }
        if (rt_dec_call(&s->d, 2, &e)) {
            fprintf(stderr, "serve: %s\n", e.msg);
            sv_stop = 1;
            return e.code;
        }
        for (int k = 0; k < s->B; k++)
            if (s->slot[k] && s->slot[k]->state == SV_RUNNING && s->d.sl[row_of[k]] == k)
                memcpy(s->lg + k * s->d.V, s->d.logits + row_of[k] * s->d.V,
                       sizeof *s->lg * (size_t)s->d.V);
    }
}

/* ---- the command line ------------------------------------------------ */

static int sv_usage_text(const char *prog)
{
    printf("usage: %s serve [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--parallel B]\n"
           "       [--queue Q] [--max-tokens M] [--weights W] [--tokenizer F]\n"
           "       [--chat-template NAME] [--threads N]\n"
           "An OpenAI-compatible server: POST /v1/completions, /v1/chat/completions\n"
           "(\"stream\": true for server-sent events), GET /v1/models, /health.\n"
           "  --host ADDR         the IPv4 or IPv6 address to listen on (default\n"
           "                      127.0.0.1; ::1 IPv6's loopback, :: every IPv6 address)\n"
           "  --port N            the port (default 8080; 0: any, said on stderr)\n"
           "  --api-key KEY       requests need Authorization: Bearer KEY (else 401)\n"
           "  --parallel B        sequences decoded together (default and at most: the\n"
           "                      program's slots, kiln build --slots N)\n"
           "  --queue Q           requests that may wait for a slot (default 16; past it: 503)\n"
           "  --max-tokens M      the most a request may ask for (default 4096)\n"
           "  --chat-template NAME  chatml, llama3, llama2, mistral, gemma, phi3, harmony\n"
           "docs/serving.md has a session.\n", prog);
    return -1;
}

static int sv_fail_usage(const char *prog, const char *fmt, const char *v)
{
    fprintf(stderr, "%s: serve: ", prog);
    fprintf(stderr, fmt, v);
    fputc('\n', stderr);
    return RT_EUSAGE;
}

static int sv_count(const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    long long x = strtoll(v, &end, 10);
    *out = x;
    return *v >= '0' && *v <= '9' && !*end && x >= lo && x <= hi;
}

typedef struct {
    const char *host, *api_key, *weights, *tokenizer, *chat;
    int64_t port, parallel, queue, max_tokens, threads;
} sv_opts;

static int sv_parse(const char *prog, int argc, char **argv, sv_opts *o)
{
    static const char *const names[] = {"--host", "--port", "--api-key", "--parallel", "--queue",
                                        "--max-tokens", "--weights", "--tokenizer",
                                        "--chat-template", "--threads"};
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return sv_usage_text(prog);
        int k = 0;
        while (k < 10 && strcmp(argv[i], names[k]))
            k++;
        if (k == 10)
            return sv_fail_usage(prog, "unknown argument '%s'", argv[i]);
        if (i + 1 >= argc)
            return sv_fail_usage(prog, "option '%s' needs a value", argv[i]);
        const char *v = argv[++i];
        int ok = 1;
        switch (k) {
        case 0: o->host = v; break;
        case 1: ok = sv_count(v, 0, 65535, &o->port); break;
        case 2: o->api_key = v; ok = *v != 0; break;
        case 3: ok = sv_count(v, 1, 4096, &o->parallel); break;
        case 4: ok = sv_count(v, 0, 1 << 20, &o->queue); break;
        case 5: ok = sv_count(v, 1, 1 << 30, &o->max_tokens); break;
        case 6: o->weights = v; break;
        case 7: o->tokenizer = v; break;
        case 8: o->chat = v; break;
        case 9: ok = sv_count(v, 1, 4096, &o->threads); break;
        }
        if (!ok)
            return sv_fail_usage(prog, "bad value '%s'", v);
    }
    return 0;
}

/* The model, its slots' tokenizers and the chat template. */
static int sv_open(sv_server *s, const sv_opts *o, const char *prog)
{
    rt_err e = {0};
    char *wpath = NULL, *tmpl = NULL;
    const rt_model *md = s->md;
    if (rt_dec_contract(&s->d, md, &e) || (!s->d.slotted || !md->run_batch) ||
        (o->parallel > md->batch)) {
        if (!e.code && !s->d.slotted)
            rt_errf(&e, RT_EUSAGE, "this program decodes one sequence; build it with kiln "
                    "build --slots N to serve");
        else if (!e.code)
            rt_errf(&e, RT_EUSAGE, "--parallel %lld: this program decodes %d at once (kiln "
                    "build --slots N)", (long long)o->parallel, md->batch);
        fprintf(stderr, "%s: serve: %s\n", prog, e.msg);
        return e.code;
    }
    s->B = o->parallel ? (int)o->parallel : md->batch;
    s->tok_path = o->tokenizer ? o->tokenizer : md->tokenizer_file;
    if (!s->tok_path) {
        fprintf(stderr, "%s: serve: give --tokenizer FILE\n", prog);
        return RT_EUSAGE;
    }
    s->tok = calloc((size_t)s->B, sizeof *s->tok);
    s->slot = calloc((size_t)s->B, sizeof *s->slot);
    int rc = !s->tok || !s->slot ? rt_errf(&e, RT_EINTERNAL, "out of memory") : 0;
    for (int k = 0; !rc && k < s->B; k++)
        rc = rt_tok_open(s->tok_path, &s->tok[k], &e);
    if (!rc && rt_tok_size(s->tok[0]) > s->d.V)
        rc = rt_errf(&e, RT_EINVAL, "%s: %d tokens, but the model's vocabulary is %lld",
                     s->tok_path, rt_tok_size(s->tok[0]), (long long)s->d.V);
    if (!rc)
        rc = rt_chat_template_load(s->tok[0], s->tok_path, &tmpl, &e);
    if (!rc && (tmpl || o->chat)) {
        rc = rt_chat_template_find(tmpl, o->chat, &s->family, &e);
        int bos = rt_tok_bos(s->tok[0]), eos = rt_tok_eos(s->tok[0]);
        const rt_tok *t = s->tok[0];   /* the tokens' own texts, as chat writes them */
        snprintf(s->bos, sizeof s->bos, "%s", bos >= 0 ? t->bytes + t->off[bos] : "");
        snprintf(s->eos, sizeof s->eos, "%s", eos >= 0 ? t->bytes + t->off[eos] : "");
    }
    free(tmpl);
    if (!rc && !(s->lg = malloc(sizeof *s->lg * (size_t)(s->B * s->d.V))))
        rc = rt_errf(&e, RT_EINTERNAL, "out of memory");
    if (!rc)
        rc = rt_dec_buffers(&s->d, &e);
    if (!rc)
        rc = rt_pick_weights(md, o->weights, &wpath, &e);
    if (!rc && o->threads)
        rt_set_threads((int)o->threads);
    if (!rc && !(s->d.h = md->open(wpath)))
        rc = rt_errf(&e, RT_EINTERNAL, "out of memory");
    if (!rc && md->status(s->d.h))
        rc = rt_errf(&e, md->status(s->d.h), "%s", md->error(s->d.h));
    free(wpath);
    if (rc)
        fprintf(stderr, "%s: serve: %s\n", prog, e.msg);
    return rc;
}

int rt_serve(int argc, char **argv, const rt_model *md)
{
    const char *prog = argv[0] ? argv[0] : "serve";
    sv_opts o = {"127.0.0.1", NULL, NULL, NULL, NULL, 8080, 0, 16, 4096, 0};
    int rc = sv_parse(prog, argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    struct sockaddr_in v4 = {0};
    struct sockaddr_in6 v6 = {0};
    v4.sin_family = AF_INET;
    v4.sin_port = htons((uint16_t)o.port);
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons((uint16_t)o.port);
    int ip6 = inet_pton(AF_INET, o.host, &v4.sin_addr) != 1;
    if (ip6 && inet_pton(AF_INET6, o.host, &v6.sin6_addr) != 1)
        return sv_fail_usage(prog, "--host '%s' is not an IPv4 or IPv6 address", o.host);
    sv_server s = {0};
    s.md = md;
    s.api_key = o.api_key;
    s.Q = (int)o.queue;
    s.max_tokens = o.max_tokens;
    s.model_name = md->name ? md->name : "model";
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.work, NULL);
    pthread_cond_init(&s.progress, NULL);
    rc = sv_open(&s, &o, prog);
    struct MHD_Daemon *dm = NULL;
    if (!rc) {
        signal(SIGPIPE, SIG_IGN);
        signal(SIGINT, sv_on_signal);
        signal(SIGTERM, sv_on_signal);
        dm = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                              MHD_USE_ERROR_LOG | (ip6 ? MHD_USE_IPv6 : 0), 0, NULL, NULL,
                              sv_access, &s, MHD_OPTION_SOCK_ADDR,
                              ip6 ? (struct sockaddr *)&v6 : (struct sockaddr *)&v4,
                              MHD_OPTION_NOTIFY_COMPLETED, sv_completed, NULL,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)(s.B + s.Q + 64),
                              MHD_OPTION_CONNECTION_TIMEOUT, 600u, MHD_OPTION_END);
        if (!dm) {
            fprintf(stderr, "%s: serve: cannot listen on %s%s%s:%lld\n", prog, ip6 ? "[" : "",
                    o.host, ip6 ? "]" : "", (long long)o.port);
            rc = RT_EIO;
        }
    }
    if (!rc) {
        const union MHD_DaemonInfo *in = MHD_get_daemon_info(dm, MHD_DAEMON_INFO_BIND_PORT);
        fprintf(stderr, "%s: serve: listening on http://%s%s%s:%u (%d slots, queue %d)\n",
                prog, ip6 ? "[" : "", o.host, ip6 ? "]" : "", in ? in->port : (unsigned)o.port,
                s.B, s.Q);
        rc = sv_schedule(&s);
        MHD_stop_daemon(dm);
    }
    for (int k = 0; s.tok && k < s.B; k++)
        if (s.tok[k])
            rt_tok_close(s.tok[k]);
    free(s.tok);
    free(s.slot);
    free(s.lg);
    rt_dec_free(&s.d);
    return rc;
}
