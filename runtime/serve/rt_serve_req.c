/* runtime/serve/rt_serve_req.c: a request's JSON body, read strictly
 * (rt_json.c) into rt_serve_req: an object whose known fields must have
 * their types, the others skipped; null leaves a default. The message
 * names the field: "request: 'top_p' must be a number in (0, 1]".
 *   prompt (completions): a string; messages (chat): an array of {role,
 *   content} strings; stream: a boolean; seed: an integer >= 0;
 *   ignore_eos (llama-server's): a boolean, the end tokens never drawn;
 *   max_tokens or max_completion_tokens: an integer >= 0;
 *   stop: a string or an array of at most 4, each of 1 to 256 bytes;
 *   the samplers (rt_sample.c): temperature in [0, 2], top_p in (0, 1],
 *   presence_penalty and frequency_penalty in [-2, 2] (OpenAI's), and
 *   llama-server's top_k (an integer >= 0), min_p in [0, 1],
 *   repeat_penalty in (0, 10], repeat_last_n (an integer >= -1; default
 *   64). */
#include "runtime/serve/rt_srv.h"
#include "runtime/core/rt_core.h"

#include <stdlib.h>
#include <string.h>

static int sq_bad(rt_json *J, const char *key, const char *what)
{
    return rt_errf(J->e, RT_EINVAL, "request: '%s' must be %s", key, what);
}

static int sq_peek(rt_json *J)
{
    rt_json_ws(J);
    return J->p < J->end ? *J->p : -1;
}

/* A JSON number (its grammar checked by rt_json_skip) as a double. */
static int sq_number(rt_json *J, const char *key, double *v)
{
    *v = 0;                             /* defined on every path */
    int c = sq_peek(J);
    if (c != '-' && (c < '0' || c > '9'))
        return sq_bad(J, key, "a number");
    const unsigned char *at = J->p;
    if (rt_json_skip(J))
        return J->e->code;
    char buf[64];
    size_t n = (size_t)(J->p - at);
    if (n >= sizeof buf)
        return sq_bad(J, key, "a number of fewer than 64 characters");
    memcpy(buf, at, n);
    buf[n] = 0;
    *v = strtod(buf, NULL);
    return 0;
}

/* A number in [lo, hi] (lo excluded when open) into *v. */
static int sq_range(rt_json *J, const char *key, double lo, int open, double hi, double *v,
                    const char *what)
{
    double x;
    if (sq_number(J, key, &x))
        return J->e->code;
    if (!(open ? x > lo : x >= lo) || !(x <= hi))
        return sq_bad(J, key, what);
    *v = x;
    return 0;
}

/* An integer in [lo, 2^30] into *v. */
static int sq_int(rt_json *J, const char *key, int lo, int *v, const char *what)
{
    double x;
    if (sq_number(J, key, &x))
        return J->e->code;
    if (!(x >= lo && x <= (1 << 30)) || x != (double)(int64_t)x)      /* range first: */
        return sq_bad(J, key, what);            /* then the cast is defined */
    *v = (int)x;
    return 0;
}

static int sq_string(rt_json *J, const char *key, char **out)
{
    if (sq_peek(J) != '"')
        return sq_bad(J, key, "a string");
    return rt_json_string(J, out);
}

static int sq_bool(rt_json *J, const char *key, int *v)
{
    if (!rt_json_literal(J, "true"))
        *v = 1;
    else if (!rt_json_literal(J, "false"))
        *v = 0;
    else
        return sq_bad(J, key, "a boolean");
    return 0;
}

/* stop: "text" or ["text", ...] */
static int sq_stop(rt_json *J, rt_serve_req *r)
{
    static const char what[] = "a string or an array of at most 4, each of 1 to 256 bytes";
    int array = sq_peek(J) == '[';
    if (r->nstop || (array && rt_json_eat(J, '[')))
        return sq_bad(J, "stop", r->nstop ? "given once" : what);
    for (int first = 1, more = 1; more; first = 0) {
        if (array && (more = rt_json_next(J, ']', first)) <= 0)
            return more < 0 ? J->e->code : 0;
        char *s = NULL;
        if (sq_peek(J) != '"' || r->nstop == RT_SERVE_MAX_STOP)
            return sq_bad(J, "stop", what);
        if (rt_json_string(J, &s))
            return J->e->code;
        r->stop[r->nstop++] = s;
        if (!*s || strlen(s) > 256)
            return sq_bad(J, "stop", what);
        more = array;
    }
    return 0;
}

/* messages: [{"role": "...", "content": "..."}, ...] */
static int sq_messages(rt_json *J, rt_serve_req *r)
{
    if (sq_peek(J) != '[' || rt_json_eat(J, '['))
        return sq_bad(J, "messages", "an array of messages");
    for (int first = 1, more; (more = rt_json_next(J, ']', first)) != 0; first = 0) {
        if (more < 0)
            return J->e->code;
        if (r->nmsgs >= 4096)
            return sq_bad(J, "messages", "at most 4096 messages");
        rt_chat_msg *m = realloc(r->msgs, sizeof *m * (size_t)(r->nmsgs + 1));
        if (!m)
            return rt_json_oom(J);
        r->msgs = m;
        m = &r->msgs[r->nmsgs++];
        m->role = m->content = NULL;
        if (sq_peek(J) != '{' || rt_json_eat(J, '{'))
            return sq_bad(J, "messages", "an array of objects");
        for (int f = 1, in; (in = rt_json_next(J, '}', f)) != 0; f = 0) {
            char *key = NULL, *val = NULL;
            if (in < 0 || rt_json_string(J, &key) || rt_json_eat(J, ':')) {
                free(key);
                return in < 0 || J->e->code ? J->e->code : rt_json_syntax(J, "':' expected");
            }
            int rc = 0;
            if (!strcmp(key, "role") || !strcmp(key, "content")) {
                rc = sq_peek(J) == 'n' ? rt_json_literal(J, "null")
                                       : sq_string(J, "messages[].content", &val);
                char **dst = (char **)(key[0] == 'r' ? &m->role : &m->content);
                free(*dst);
                *dst = val;
            } else {
                rc = rt_json_skip(J);
            }
            free(key);
            if (rc)
                return J->e->code ? J->e->code : sq_bad(J, "messages[].content", "a string");
        }
        if (!m->role || !m->content)
            return sq_bad(J, "messages", "objects with a role and a string content");
    }
    if (!r->nmsgs)
        return sq_bad(J, "messages", "a non-empty array");
    return 0;
}

static int sq_field(rt_json *J, const char *key, int chat, rt_serve_req *r)
{
    if (sq_peek(J) == 'n' && strcmp(key, "messages") && strcmp(key, "prompt"))
        return rt_json_literal(J, "null") ? rt_json_syntax(J, "a value expected") : 0;
    if (!chat && !strcmp(key, "prompt"))
        return r->prompt ? sq_bad(J, key, "given once") : sq_string(J, key, &r->prompt);
    if (chat && !strcmp(key, "messages"))
        return r->msgs ? sq_bad(J, key, "given once") : sq_messages(J, r);
    if (!strcmp(key, "max_tokens") || !strcmp(key, "max_completion_tokens")) {
        if (sq_peek(J) == '-' || sq_peek(J) < '0' || sq_peek(J) > '9')
            return sq_bad(J, key, "a non-negative integer");
        return rt_json_uint(J, key, &r->max_tokens);
    }
    rt_sampler *sp = &r->samp;
    if (!strcmp(key, "temperature"))
        return sq_range(J, key, 0, 0, 2, &sp->temperature, "a number in [0, 2]");
    if (!strcmp(key, "top_p"))
        return sq_range(J, key, 0, 1, 1, &sp->top_p, "a number in (0, 1]");
    if (!strcmp(key, "min_p"))
        return sq_range(J, key, 0, 0, 1, &sp->min_p, "a number in [0, 1]");
    if (!strcmp(key, "presence_penalty"))
        return sq_range(J, key, -2, 0, 2, &sp->presence_penalty, "a number in [-2, 2]");
    if (!strcmp(key, "frequency_penalty"))
        return sq_range(J, key, -2, 0, 2, &sp->frequency_penalty, "a number in [-2, 2]");
    if (!strcmp(key, "repeat_penalty"))
        return sq_range(J, key, 0, 1, 10, &sp->repeat_penalty, "a number in (0, 10]");
    if (!strcmp(key, "top_k"))
        return sq_int(J, key, 0, &sp->top_k, "an integer >= 0");
    if (!strcmp(key, "repeat_last_n"))
        return sq_int(J, key, -1, &sp->repeat_last_n, "an integer >= -1");
    if (!strcmp(key, "stop"))
        return sq_stop(J, r);
    if (!strcmp(key, "seed")) {
        int64_t s;
        if (sq_peek(J) == '-' || sq_peek(J) < '0' || sq_peek(J) > '9')
            return sq_bad(J, key, "a non-negative integer");
        if (rt_json_uint(J, key, &s))
            return J->e->code;
        r->seed = (uint64_t)s;
        return 0;
    }
    if (!strcmp(key, "stream"))
        return sq_bool(J, key, &r->stream);
    if (!strcmp(key, "ignore_eos"))
        return sq_bool(J, key, &r->ignore_eos);
    return rt_json_skip(J);
}

int rt_serve_parse(const char *body, size_t len, int chat, rt_serve_req *r, rt_err *e)
{
    memset(r, 0, sizeof *r);
    r->max_tokens = -1;
    rt_sampler_init(&r->samp);
    r->samp.top_p = 1;                  /* OpenAI's default, not generate's 0.9 */
    r->seed = 1;
    const unsigned char *s = (const unsigned char *)body;
    rt_json J = {s, s, s + len, "request", NULL, e};
    if (rt_utf8_bad(s, len) != len)
        return rt_errf(e, RT_EINVAL, "request: the body is not valid UTF-8");
    if (memchr(body, 0, len))
        return rt_errf(e, RT_EINVAL, "request: the body holds a NUL byte");
    if (sq_peek(&J) != '{' || rt_json_eat(&J, '{'))
        return rt_json_syntax(&J, "an object expected");
    for (int first = 1, more; (more = rt_json_next(&J, '}', first)) != 0; first = 0) {
        char *key = NULL;
        if (more < 0 || rt_json_string(&J, &key))
            return e->code;
        int rc = rt_json_eat(&J, ':') ? rt_json_syntax(&J, "':' expected")
                                      : sq_field(&J, key, chat, r);
        free(key);
        if (rc)
            return e->code ? e->code : RT_EINVAL;
    }
    rt_json_ws(&J);
    if (J.p != J.end)
        return rt_json_syntax(&J, "text after the object");
    if (!chat && !r->prompt)
        return rt_errf(e, RT_EINVAL, "request: 'prompt' (a string) is required");
    if (chat && !r->msgs)
        return rt_errf(e, RT_EINVAL, "request: 'messages' (an array) is required");
    return 0;
}

void rt_serve_req_free(rt_serve_req *r)
{
    free(r->prompt);
    for (int i = 0; i < r->nmsgs; i++) {
        free((char *)r->msgs[i].role);
        free((char *)r->msgs[i].content);
    }
    free(r->msgs);
    for (int i = 0; i < r->nstop; i++)
        free((char *)r->stop[i]);
    memset(r, 0, sizeof *r);
}
