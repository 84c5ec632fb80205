/* runtime/gen/rt_chat.c: `PROG chat`, a conversation on a terminal with
 * a decoder and its tokenizer's chat template (docs/generating.md).
 *
 *   PROG chat [--tokenizer FILE] [--chat-template NAME] [--system TEXT]
 *        [-n N] [--seed S] [SAMPLERS] [--weights W.safetensors|DIR] [--threads N]
 *        [--verbose]
 *
 * The template is the model's (rt_chat_template_load: a GGUF's, else
 * tokenizer_config.json's beside the tokenizer) recognised as a family,
 * or --chat-template NAME's; rt_chat_tmpl.c renders it.
 * Algorithm, per line read from stdin (a prompt "> " when it is a
 * terminal):
 * 1. The line is the user's message. The conversation (the system
 *    message, the turns so far, this one) is rendered with the
 *    assistant's header after it. The KV cache holds the tokens of the
 *    text rendered before and of the answers drawn since (`fed`, as text
 *    and ids): when the rendering starts with that text, only the rest
 *    is encoded and prefilled at the next position; otherwise (a
 *    template that trims answers) the whole rendering is encoded and the
 *    ids it shares at its start with those in the cache are kept.
 * 2. When the rendering leaves fewer than S / 4 of the cache's S rows for
 *    the answer, the oldest turns (a user's message and its answer; the
 *    system message stays) are dropped until it does, and the rest is
 *    encoded again and prefilled from where it differs; this is said on
 *    stderr. A message too long even alone is refused, and the chat goes on.
 * 3. The answer is drawn one decode step a token (rt_sampler_draw, with
 *    generate's SAMPLERS, the penalties over the tokens in the cache) and printed
 *    as it comes, until the tokenizer's end of a turn (rt_tok_is_end) or
 *    BOS, -n N tokens, Ctrl-C (SIGINT, which stops the answer, not the
 *    program), or the cache's last row (said; the next message then drops
 *    turns). What was printed becomes the assistant's message.
 * Ctrl-C at the prompt drops the line typed; end of input (Ctrl-D) ends
 * the chat, status 0. A message that is not valid UTF-8 is refused (said)
 * and the chat goes on. Errors are one line "PROG: chat: what" and an
 * RT_* status. */
#include "runtime/gen/rt_tok.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

typedef struct {
    const rt_model *md;
    const char *prog, *tokenizer, *template_name, *system, *weights;
    uint64_t n, seed, threads;
    rt_sampler sm;
    rt_dec d;
    rt_tok *tok;
    char *wpath;
    int family;
    const char *bos, *eos;              /* the tokenizer's texts of them ("": none) */
    rt_chat_msg *msg;                   /* the conversation: nmsg, contents malloc'd */
    int nmsg, first;                    /* first: the first turn's message (after a system one) */
    char *fed;                          /* the text whose tokens are in the cache */
    int32_t *hist;                      /* their ids: nhist <= S */
    int64_t nhist;
    uint64_t state;                     /* the sampler's */
    int tty, verbose;
    int64_t prefilled, at;              /* the last turn's: tokens prefilled, from position */
} rch_ctx;

static volatile sig_atomic_t rch_stop;

static void rch_sigint(int sig)
{
    (void)sig;
    rch_stop = 1;
}

static int rch_fail(const rch_ctx *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int rch_fail(const rch_ctx *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rt_vsay(c->prog, "chat", fmt, ap);
    va_end(ap);
    return code;
}

/* ---- the command line ------------------------------------------------ */

static const char *const rch_opts[] = {"tokenizer", "chat-template", "system", "n",
                                       "seed", "weights", "threads", "verbose"};

static int rch_u64(const char *v, uint64_t *out)
{
    char *end;
    if (*v < '0' || *v > '9')
        return 0;
    *out = strtoull(v, &end, 10);
    return !*end;
}

static void rch_help(const rch_ctx *c)
{
    const rt_model *md = c->md;
    printf("usage: %s chat [--tokenizer FILE] [--chat-template NAME] [--system TEXT] [-n N]\n"
           "       [--seed S] [SAMPLERS] [--weights W] [--threads N] [--verbose]\n"
           "A conversation: each line read is the user's message; the answer is printed as\n"
           "it is drawn. Ctrl-C stops an answer; Ctrl-D (end of input) ends the chat.\n"
           "  --tokenizer FILE      tokenizer.json (its folder's tokenizer_config.json has\n"
           "                        the chat template) or a GGUF; default: %s\n"
           "  --chat-template NAME  chatml, llama3, llama2, mistral, gemma, phi3 or harmony\n"
           "                        (default: the family of the model's own template)\n"
           "  --system TEXT         the system message\n"
           "  -n N                  tokens an answer may have at most (default: no limit\n"
           "                        but the end of the turn and the KV cache)\n"
           "  --seed S              the sampler's seed (default 1)\n"
           "  SAMPLERS              generate's: --temperature, --top-k, --top-p, --min-p,\n"
           "                        --repeat-penalty, --presence-penalty, --frequency-penalty,\n"
           "                        --repeat-last-n (see generate --help)\n"
           "  --weights FILE|DIR    weights from safetensors, or a model folder's\n"
           "  --threads N           threads to use (default: every core)\n"
           "  --verbose             after each answer, on stderr: the tokens prefilled and\n"
           "                        where, the answer's tokens and what ended it\n"
           "When the KV cache (%s) is full, the oldest turns are dropped and the rest\n"
           "prefilled again; this is said on stderr.\n",
           md->usage ? md->usage : c->prog,
           md->tokenizer_file ? md->tokenizer_file : "none", "--max-seq at import");
}

/* 0, or an exit status: -1 when --help was printed (exit 0). */
static int rch_parse(rch_ctx *c, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            rch_help(c);
            return -1;
        }
        const char *a = !strcmp(argv[i], "-n") ? "--n" : argv[i], *v = NULL;
        int k = 0, n = (int)(sizeof rch_opts / sizeof rch_opts[0]), ok = 1;
        while (k < n && (strncmp(a, "--", 2) || strcmp(a + 2, rch_opts[k])))
            k++;
        rt_sampler probe = c->sm;       /* is it a sampler's option? */
        int sampler = k == n && !strncmp(a, "--", 2) && rt_sampler_opt(&probe, a + 2, "0") != 0;
        if (k == n && !sampler)
            return rch_fail(c, RT_EUSAGE, "unknown argument '%s'", argv[i]);
        if (k == 7) {
            c->verbose = 1;
            continue;
        }
        if (i + 1 >= argc)
            return rch_fail(c, RT_EUSAGE, "option '%s' needs a value", argv[i]);
        v = argv[++i];
        switch (k) {
        case 0: c->tokenizer = v; break;
        case 1: c->template_name = v; break;
        case 2: c->system = v; break;
        case 3: ok = rch_u64(v, &c->n); break;
        case 4: ok = rch_u64(v, &c->seed); break;
        case 5: c->weights = v; break;
        case 6: ok = rch_u64(v, &c->threads) && c->threads >= 1 && c->threads <= 4096; break;
        default: ok = rt_sampler_opt(&c->sm, a + 2, v) == 1;
        }
        if (!ok)
            return rch_fail(c, RT_EUSAGE, "%s: bad value '%s'", a, v);
    }
    return 0;
}

/* ---- setting up -------------------------------------------------------- */

static const char *rch_text(const rt_tok *t, int id)
{
    return id >= 0 ? t->bytes + t->off[id] : "";
}

/* The tokenizer, its chat template's family, BOS and EOS texts. */
static int rch_tokenizer(rch_ctx *c)
{
    rt_err e = {0};
    const char *path = c->tokenizer ? c->tokenizer : c->md->tokenizer_file;
    if (!path)
        return rch_fail(c, RT_EUSAGE, "chat needs --tokenizer FILE");
    if (!c->tokenizer && access(path, R_OK) != 0)
        return rch_fail(c, RT_EIO, "%s: cannot read the tokenizer this program was built with "
                        "(%s): was its folder moved or deleted? pass --tokenizer FILE", path,
                        strerror(errno));
    char *text = NULL;
    int rc = rt_tok_open(path, &c->tok, &e);
    if (!rc && rt_tok_size(c->tok) > c->d.V)
        rc = rt_errf(&e, RT_EINVAL, "%s: %d tokens, but the model's vocabulary is %lld", path,
                     rt_tok_size(c->tok), (long long)c->d.V);
    if (!rc && !c->template_name)
        rc = rt_chat_template_load(c->tok, path, &text, &e);
    if (!rc && rt_chat_template_find(text, c->template_name, &c->family, &e))
        rc = e.code;
    free(text);
    if (rc)
        return rch_fail(c, rc, "%s", e.msg);
    c->bos = rch_text(c->tok, rt_tok_bos(c->tok));
    c->eos = rch_text(c->tok, rt_tok_eos(c->tok));
    return 0;
}

static int rch_setup(rch_ctx *c)
{
    rt_err e = {0};
    if (rt_dec_contract(&c->d, c->md, &e))
        return rch_fail(c, e.code, "%s", e.msg);
    int rc = rch_tokenizer(c);
    if (rc)
        return rc;
    c->hist = malloc(sizeof *c->hist * (size_t)c->d.S);
    c->msg = malloc(sizeof *c->msg);
    c->fed = strdup("");
    if (!c->hist || !c->msg || !c->fed || rt_dec_buffers(&c->d, &e))
        return rch_fail(c, RT_EINTERNAL, "out of memory");
    if (rt_pick_weights(c->md, c->weights, &c->wpath, &e))
        return rch_fail(c, e.code, "%s", e.msg);
    if (c->threads)
        rt_set_threads((int)c->threads);
    c->d.h = c->md->open(c->wpath);
    if (!c->d.h)
        return rch_fail(c, RT_EINTERNAL, "out of memory");
    if (c->md->status(c->d.h))
        return rch_fail(c, c->md->status(c->d.h), "%s", c->md->error(c->d.h));
    if (c->system) {
        c->msg[0] = (rt_chat_msg){"system", strdup(c->system)};
        c->nmsg = c->first = 1;
        if (!c->msg[0].content)
            return rch_fail(c, RT_EINTERNAL, "out of memory");
    }
    return 0;
}

/* ---- a turn ----------------------------------------------------------- */

static int rch_add(rch_ctx *c, const char *role, const char *text)
{
    rt_chat_msg *m = realloc(c->msg, sizeof *m * (size_t)(c->nmsg + 1));
    char *s = strdup(text);
    if (m)
        c->msg = m;
    if (!m || !s) {
        free(s);
        return rch_fail(c, RT_EINTERNAL, "out of memory");
    }
    c->msg[c->nmsg++] = (rt_chat_msg){role, s};
    return 0;
}

/* Messages [i, i + k) out of the conversation. */
static void rch_drop(rch_ctx *c, int i, int k)
{
    for (int j = i; j < i + k; j++)
        free((char *)c->msg[j].content);
    memmove(c->msg + i, c->msg + i + k, sizeof *c->msg * (size_t)(c->nmsg - i - k));
    c->nmsg -= k;
}

/* text encoded, without the tokenizer's own BOS (templates write it),
 * into a malloc'd *ids, *n of them. */
static int rch_encode(rch_ctx *c, const char *text, int32_t **ids, int *n)
{
    rt_err e = {0};
    int cap = 6 * (int)strlen(text) + 3;
    *ids = malloc(sizeof **ids * (size_t)cap);
    if (!*ids)
        return rch_fail(c, RT_EINTERNAL, "out of memory");
    if (rt_tok_encode(c->tok, text, 0, *ids, cap, n, &e))
        return rch_fail(c, e.code, "%s", e.msg);
    return 0;
}

/* The rendering's ids: all of them at *ids (and *keep those of the cache
 * still good), or only what follows c->fed (*whole 0). */
static int rch_tokens(rch_ctx *c, const char *full, int32_t **ids, int *n, int *whole)
{
    size_t nf = c->fed ? strlen(c->fed) : 0;
    *whole = !c->fed || strncmp(full, c->fed, nf) != 0;
    return rch_encode(c, *whole ? full : full + nf, ids, n);
}

/* The conversation rendered, encoded and prefilled, turns dropped while
 * it leaves too little room; the logits of its last token are left for
 * the answer. 1 when the message was refused (said), else 0 or status. */
static int rch_prefill(rch_ctx *c)
{
    rt_err e = {0};
    int dropped = 0;
    for (;;) {
        char *full = rt_chat_render(c->family, c->msg, c->nmsg, 1, c->bos, c->eos, &e);
        if (!full)
            return rch_fail(c, e.code, "%s", e.msg);
        int32_t *ids = NULL;
        int n = 0, whole = 0;
        int rc = rch_tokens(c, full, &ids, &n, &whole);
        int64_t total = (whole ? 0 : c->nhist) + n;
        if (!rc && total + c->d.S / 4 > c->d.S && c->nmsg - c->first > 1) {
            rch_drop(c, c->first, c->nmsg - c->first > 2 ? 2 : 1);
            dropped++;
            free(c->fed);
            c->fed = NULL;                  /* the rest is encoded whole, compared by ids */
            free(full);
            free(ids);
            continue;
        }
        if (!rc && total + c->d.S / 4 > c->d.S) {
            rch_fail(c, RT_EINVAL, "the message makes %lld tokens with the template, more than "
                     "the KV cache's %lld rows leave room for (an answer needs %lld): not sent%s",
                     (long long)total, (long long)c->d.S, (long long)(c->d.S / 4),
                     dropped ? " (the earlier turns were dropped)" : "");
            rch_drop(c, c->nmsg - 1, 1);
            free(full);
            free(ids);
            return 1;
        }
        int64_t keep = whole ? 0 : c->nhist;    /* the cache's ids still good */
        if (!rc && whole)
            while (keep < c->nhist && keep < n && c->hist[keep] == ids[keep])
                keep++;
        int64_t from = whole ? keep : 0;        /* the first of ids not in the cache */
        if (!rc && dropped)
            fprintf(stderr, "%s: chat: the KV cache is full (%lld rows): dropped the oldest "
                    "%d turn%s; prefilling %lld tokens again\n", c->prog, (long long)c->d.S,
                    dropped, dropped > 1 ? "s" : "", (long long)(n - from));
        if (!rc) {
            memcpy(c->hist + keep, ids + from, sizeof *ids * (size_t)(n - from));
            c->nhist = keep + (n - from);
            if (keep == c->nhist && keep > 0)   /* nothing new: the last again, for logits */
                keep--;
            if (!c->nhist)
                rc = rch_fail(c, RT_EINVAL, "the conversation renders to no tokens");
        }
        if (!rc && rt_dec_prefill(&c->d, c->hist + keep, keep, c->nhist - keep, &e))
            rc = rch_fail(c, e.code, "%s", e.msg);
        c->prefilled = c->nhist - keep;
        c->at = keep;
        free(c->fed);
        c->fed = full;
        free(ids);
        return rc;
    }
}

/* s on stdout at once; RT_EIO said when it cannot be written. A write
 * that Ctrl-C interrupted is not an error (what glibc held is dropped). */
static int rch_put(const rch_ctx *c, const char *s)
{
    if ((*s && fputs(s, stdout) == EOF) || fflush(stdout) != 0) {
        int e = errno;
        clearerr(stdout);
        if (e == EINTR && rch_stop)
            return 0;
        return rch_fail(c, RT_EIO, "cannot write to stdout: %s", strerror(e));
    }
    return 0;
}

/* Appends s to the growing text *a (*na bytes). */
static int rch_grow(rch_ctx *c, char **a, size_t *na, const char *s)
{
    size_t k = strlen(s);
    char *p = realloc(*a, *na + k + 1);
    if (!p)
        return rch_fail(c, RT_EINTERNAL, "out of memory");
    memcpy(p + *na, s, k + 1);
    *a = p;
    *na += k;
    return 0;
}

/* s with each byte that is not well-formed UTF-8 as U+FFFD (a random
 * model's stray byte tokens), malloc'd; NULL when out of memory. */
static char *rch_clean(const char *s)
{
    size_t n = strlen(s), k = 0;
    char *o = malloc(3 * n + 1);
    while (o && n) {
        size_t ok = rt_utf8_bad((const unsigned char *)s, n);
        memcpy(o + k, s, ok);
        k += ok;
        if (ok == n)
            break;
        memcpy(o + k, "\xEF\xBF\xBD", 3);
        k += 3;
        s += ok + 1;
        n -= ok + 1;
    }
    if (o)
        o[k] = 0;
    return o;
}

/* The answer drawn and printed; what was printed, as valid UTF-8, is the
 * assistant's message. */
static int rch_answer(rch_ctx *c)
{
    rt_err e = {0};
    char *ans = strdup("");
    size_t na = 0;
    int bos = rt_tok_bos(c->tok), rc = ans ? 0 : rch_fail(c, RT_EINTERNAL, "out of memory");
    int prev = c->hist[c->nhist - 1], full = 0, end = 0;
    uint64_t i = 0;
    for (; !rc && !rch_stop && (!c->n || i < c->n); i++) {
        int next = rt_sampler_draw(c->d.logits, (int)c->d.V, &c->sm, c->hist, (int)c->nhist,
                                   &c->state, c->d.scratch);
        if ((end = rt_tok_is_end(c->tok, next) || next == bos))
            break;
        const char *piece = rt_tok_decode_piece(c->tok, prev, next);
        rc = rch_put(c, piece);
        if (!rc)
            rc = rch_grow(c, &ans, &na, piece);
        prev = next;
        if (rc || (full = c->nhist >= c->d.S)) {
            i++;
            break;
        }
        c->hist[c->nhist] = next;
        c->d.tk[0] = next;
        c->d.ps[0] = (int32_t)c->nhist++;
        if (rt_dec_call(&c->d, 0, &e))
            rc = rch_fail(c, e.code, "%s", e.msg);
    }
    const char *tail = rc ? "" : rt_tok_decode_flush(c->tok);
    if (!rc)
        rc = rch_put(c, tail);
    if (!rc)
        rc = rch_grow(c, &ans, &na, tail);
    if (!rc)
        rc = rch_put(c, "\n");
    if (!rc && c->verbose)
        fprintf(stderr, "%s: chat: prefilled %lld tokens at position %lld; answered %llu "
                "tokens, ended by %s\n", c->prog, (long long)c->prefilled, (long long)c->at,
                (unsigned long long)i, end ? "the end of the turn" : full ? "the KV cache"
                : rch_stop ? "Ctrl-C" : "-n");
    if (!rc && full)
        fprintf(stderr, "%s: chat: the KV cache is full (%lld rows): the answer stops here; "
                "the oldest turns are dropped at the next message\n", c->prog,
                (long long)c->d.S);
    /* the text in the cache: the rendering, then the answer; when the cache
     * was full its last token is not, and the next turn compares ids */
    char *text = rc ? NULL : rch_clean(ans);
    if (!rc && !text)
        rc = rch_fail(c, RT_EINTERNAL, "out of memory");
    if (!rc && !full)
        rc = rch_grow(c, &c->fed, (size_t[]){strlen(c->fed)}, text);
    if (full) {
        free(c->fed);
        c->fed = NULL;
    }
    if (!rc)
        rc = rch_add(c, "assistant", text);
    free(text);
    free(ans);
    return rc;
}

/* On a terminal, waits for input with SIGINT blocked until pselect
 * unblocks it: a Ctrl-C that comes between the prompt and the wait is not
 * lost (a plain read would block on past it). -1 when Ctrl-C came. A
 * terminal's read gives one line at a time, so nothing waits in stdin's
 * buffer when this is called. */
static int rch_wait(void)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &old);
    int intr = rch_stop;
    if (!intr) {
        fd_set in;
        FD_ZERO(&in);
        FD_SET(STDIN_FILENO, &in);
        intr = pselect(STDIN_FILENO + 1, &in, NULL, NULL, NULL, &old) < 0 && errno == EINTR;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return intr ? -1 : 0;
}

/* One line of input, less its line break, malloc'd into *line: 1 at the
 * end of input, -1 when Ctrl-C interrupted it. */
static int rch_read(rch_ctx *c, char **line)
{
    size_t cap = 0;
    if (c->tty && rch_put(c, "> "))
        return 1;
    if (c->tty && rch_wait() < 0)
        return -1;
    errno = 0;
    ssize_t k = getline(line, &cap, stdin);
    if (k < 0) {
        int intr = errno == EINTR;
        clearerr(stdin);
        return intr ? -1 : 1;
    }
    if (k && (*line)[k - 1] == '\n')
        (*line)[--k] = 0;
    if (k && (*line)[k - 1] == '\r')
        (*line)[--k] = 0;
    return 0;
}

static int rch_loop(rch_ctx *c)
{
    int rc = 0;
    while (!rc) {
        char *line = NULL;
        rch_stop = 0;
        int got = rch_read(c, &line);
        if (got > 0) {
            free(line);
            if (c->tty)
                rc = rch_put(c, "\n");
            break;
        }
        if (got < 0 || !*line) {
            if (got < 0)
                rc = rch_put(c, "\n");
            free(line);
            continue;
        }
        size_t len = strlen(line);
        if (rt_utf8_bad((const unsigned char *)line, len) < len) {
            rch_fail(c, RT_EINVAL, "the message is not valid UTF-8: not sent");
            free(line);
            continue;
        }
        rc = rch_add(c, "user", line);
        free(line);
        int refused = rc ? 0 : rch_prefill(c);
        if (refused == 1)
            continue;
        rc = refused ? refused : rch_answer(c);
    }
    return rc;
}

int rt_chat(int argc, char **argv, const rt_model *md)
{
    rch_ctx c = {0};
    c.md = md;
    c.prog = argv[0] ? argv[0] : "chat";
    c.seed = 1;
    rt_sampler_init(&c.sm);
    int rc = rch_parse(&c, argc - 1, argv + 1);
    if (!rc)
        rc = rch_setup(&c);
    struct sigaction sa = {0}, old;
    sa.sa_handler = rch_sigint;             /* no SA_RESTART: Ctrl-C ends a read */
    sigemptyset(&sa.sa_mask);
    if (!rc) {
        c.state = c.seed;
        c.tty = isatty(0);
        sigaction(SIGINT, &sa, &old);
        rc = rch_loop(&c);
        sigaction(SIGINT, &old, NULL);
    }
    if (rc < 0)
        rc = 0;
    rt_dec_free(&c.d);
    if (c.tok)
        rt_tok_close(c.tok);
    for (int i = 0; i < c.nmsg; i++)
        free((char *)c.msg[i].content);
    free(c.msg);
    free(c.fed);
    free(c.hist);
    free(c.wpath);
    return rc;
}
