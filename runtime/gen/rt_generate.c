/* runtime/gen/rt_generate.c: `PROG generate`, text from a decoder (README
 * "Generating text").
 *
 *   PROG generate --tokens 1,2,3 | --tokenizer FILE --prompt TEXT
 *        [-n N] [--temperature T] [--topp P] [--seed S]
 *        [--weights W.safetensors] [--threads N]
 *
 * The model must keep the decoder contract (ir/decoder.c): inputs tokens
 * i32[1] and positions i32[1], output logits f32[1, V], state of S rows.
 * Algorithm:
 * 1. The prompt (ids, or the tokenizer's encoding of the text with BOS)
 *    is prefilled from position 0: in chunks of C tokens through the
 *    prefill variant (rt_model.run_chunk) while a whole chunk fits in the
 *    cache, the last chunk padded: its rows past the prompt repeat the
 *    last token at the next positions, and their logits are ignored. The
 *    cache rows they write lie past the prompt's end, and each is written
 *    again by the decode step at its position before any attention reads
 *    it (attention reads rows 0 .. its own position), so they never
 *    count. A prompt's last token, or tokens where no whole chunk fits,
 *    go through the decode step one by one.
 * 2. Then N tokens are drawn (rt_sample: temperature 0 is greedy), each
 *    printed as it comes and fed back at the next position, until N, the
 *    cache's S rows, or (with a tokenizer) its EOS or BOS token.
 * 3. Without --threads, the decode steps' team size follows their times
 *    (rt_gov.c); the numbers never depend on it.
 * Output: --tokens prints the drawn ids on one line, space-separated;
 * --tokenizer prints the prompt's text, then each token's text. Last, on
 * stderr: prefill and decode tokens per second. */
#include "runtime/gen/rt_tok.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const rt_model *md;
    const char *prog;
    const char *tokens, *tokenizer, *prompt, *weights;
    uint64_t n, seed, threads;
    double temperature, topp;
    void *h;
    rt_tok *tok;
    int32_t *ids;                       /* the prompt: nids */
    int nids;
    int64_t V, S, C;                    /* vocabulary, cache rows, chunk */
    float *logits;                      /* [C, V]: the last call's */
    int32_t *tk, *ps;                   /* [C]: a call's tokens, positions */
    void *scratch;                      /* rt_sample's */
    double t_prefill, t_decode;
    int64_t n_decode, calls;            /* tokens drawn; decode steps run */
    rt_gov gov;
} rg_ctx;

static int rg_fail(const rg_ctx *g, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int rg_fail(const rg_ctx *g, int code, const char *fmt, ...)
{
    char buf[1024];
    rt_err e = {0};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    rt_errf(&e, code, "%s", buf);       /* one line whatever buf holds */
    fprintf(stderr, "%s: generate: %s\n", g->prog, e.msg);
    return code;
}

/* ---- the command line ------------------------------------------------ */

static int rg_u64(const char *v, uint64_t *out)
{
    char *end;
    if (!*v || *v < '0' || *v > '9')
        return 0;
    unsigned long long x = strtoull(v, &end, 10);
    *out = x;
    return !*end;
}

static int rg_num(const char *v, double *out)
{
    char *end;
    *out = strtod(v, &end);
    return *v && !*end && *out == *out;
}

static const char *const rg_opts[] = {"tokens", "tokenizer", "prompt", "n", "temperature",
                                      "topp", "seed", "weights", "threads"};

/* --opt value or --opt=value (-n N too); the option's index, or -1. */
static int rg_opt(int argc, char **argv, int *i, const char **val)
{
    const char *a = argv[*i];
    if (!strcmp(a, "-n"))
        a = "--n";
    if (strncmp(a, "--", 2))
        return -1;
    for (int k = 0; k < (int)(sizeof rg_opts / sizeof rg_opts[0]); k++) {
        size_t len = strlen(rg_opts[k]);
        if (strncmp(a + 2, rg_opts[k], len))
            continue;
        if (a[2 + len] == '=') {
            *val = a + 3 + len;
            return k;
        }
        if (!a[2 + len] && *i + 1 < argc) {
            *val = argv[++*i];
            return k;
        }
        if (!a[2 + len])
            return -2;
    }
    return -1;
}

static void rg_help(const rg_ctx *g)
{
    printf("usage: %s generate (--tokens ID,ID,... | --tokenizer FILE --prompt TEXT) [-n N]\n"
           "       [--temperature T] [--topp P] [--seed S] [--weights W.safetensors] [--threads N]\n"
           "Generates text: the prompt prefilled, then one decode step a token drawn.\n"
           "  --tokens IDS        the prompt as token ids; prints the drawn ids\n"
           "  --tokenizer FILE    llama2.c tokenizer.bin or Hugging Face tokenizer.json;\n"
           "  --prompt TEXT       the prompt as text, BOS first; prints the text as it comes\n"
           "  -n N                tokens to draw (default 32; fewer when the KV cache is\n"
           "                      full or, with a tokenizer, EOS or BOS is drawn)\n"
           "  --temperature T     0: greedy; else softmax of logits / T (default 1)\n"
           "  --topp P            sample from the nucleus of mass P (default 0.9; 0 or 1: all)\n"
           "  --seed S            the sampler's seed (default 1)\n"
           "  --weights FILE      weights from safetensors (default: each weight's init)\n"
           "  --threads N         a fixed team (default: every core, fewer while busy)\n"
           "  -h, --help          print this and exit\n"
           "On stderr at the end: prefill and decode tokens per second.\n",
           g->md->usage ? g->md->usage : g->prog);
}

/* 0, or an exit status: -1 when --help was printed (exit 0). */
static int rg_parse(rg_ctx *g, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            rg_help(g);
            return -1;
        }
        const char *v = NULL;
        int k = rg_opt(argc, argv, &i, &v), ok = 1;
        if (k == -2)
            return rg_fail(g, RT_EUSAGE, "option '%s' needs a value", argv[i]);
        if (k < 0)
            return rg_fail(g, RT_EUSAGE, "unknown argument '%s'", argv[i]);
        switch (k) {
        case 0: g->tokens = v; break;
        case 1: g->tokenizer = v; break;
        case 2: g->prompt = v; break;
        case 3: ok = rg_u64(v, &g->n); break;
        case 4: ok = rg_num(v, &g->temperature) && g->temperature >= 0; break;
        case 5: ok = rg_num(v, &g->topp) && g->topp >= 0 && g->topp <= 1; break;
        case 6: ok = rg_u64(v, &g->seed); break;
        case 7: g->weights = v; break;
        case 8: ok = rg_u64(v, &g->threads) && g->threads >= 1 && g->threads <= 4096; break;
        }
        if (!ok)
            return rg_fail(g, RT_EUSAGE, "--%s: bad value '%s'", rg_opts[k], v);
    }
    if (!g->tokens == !g->tokenizer)
        return rg_fail(g, RT_EUSAGE, "give --tokens IDS, or --tokenizer FILE with --prompt TEXT");
    if (g->tokenizer && !g->prompt)
        return rg_fail(g, RT_EUSAGE, "--tokenizer needs --prompt TEXT");
    if (g->tokens && g->prompt)
        return rg_fail(g, RT_EUSAGE, "--prompt needs --tokenizer FILE (--tokens are ids)");
    return 0;
}

/* "1,2,3": ids in [0, V). */
static int rg_ids(rg_ctx *g)
{
    size_t cap = strlen(g->tokens) / 2 + 1;
    g->ids = malloc(sizeof *g->ids * cap);
    if (!g->ids)
        return rg_fail(g, RT_EINTERNAL, "out of memory");
    const char *p = g->tokens;
    for (;;) {
        char *end;
        long long x = strtoll(p, &end, 10);
        if (end == p || *p < '0' || *p > '9' || (*end && *end != ',') || x >= g->V)
            return rg_fail(g, RT_EINVAL, "--tokens: '%s' is not a list of ids in [0, %lld)",
                           g->tokens, (long long)g->V);
        g->ids[g->nids++] = (int32_t)x;
        if (!*end)
            return 0;
        p = end + 1;
    }
}

static int rg_encode(rg_ctx *g)
{
    rt_err e = {0};
    if (rt_tok_open(g->tokenizer, &g->tok, &e))
        return rg_fail(g, e.code, "%s", e.msg);
    if (rt_tok_size(g->tok) > g->V)
        return rg_fail(g, RT_EINVAL, "%s: %d tokens, but the model's vocabulary is %lld",
                       g->tokenizer, rt_tok_size(g->tok), (long long)g->V);
    int cap = (int)strlen(g->prompt) + 3;
    g->ids = malloc(sizeof *g->ids * (size_t)cap);
    if (!g->ids)
        return rg_fail(g, RT_EINTERNAL, "out of memory");
    if (rt_tok_encode(g->tok, g->prompt, 1, g->ids, cap, &g->nids, &e))
        return rg_fail(g, e.code, "%s", e.msg);
    if (!g->nids)
        return rg_fail(g, RT_EINVAL, "the prompt is empty and the tokenizer has no BOS");
    return 0;
}

/* The model keeps the decoder contract; V, S, C from its tables. */
static int rg_contract(rg_ctx *g)
{
    const rt_model *md = g->md;
    const rt_tensor_info *in = md->inputs, *out = md->outputs;
    if (md->ninputs != 2 || md->noutputs != 1 || md->nstates < 1 || strcmp(in[0].name, "tokens") ||
        strcmp(in[1].name, "positions") || in[0].dtype != RT_I32 || in[1].dtype != RT_I32 ||
        in[0].rank != 1 || in[0].dims[0] != 1 || strcmp(out[0].name, "logits") ||
        out[0].rank != 2 || out[0].dims[0] != 1 || md->states[0].rank < 1)
        return rg_fail(g, RT_EINVAL, "model '%s' is not a decoder of one token a call (inputs "
                       "tokens i32[1], positions i32[1]; output logits f32[1, V]; KV caches)",
                       md->name);
    g->V = out[0].dims[1];
    g->S = md->states[0].dims[0];
    g->C = md->run_chunk && md->chunk > 1 ? md->chunk : 1;
    return 0;
}

static int rg_buffers(rg_ctx *g)
{
    g->logits = malloc(sizeof *g->logits * (size_t)(g->C * g->V));
    g->tk = malloc(sizeof *g->tk * (size_t)g->C);
    g->ps = malloc(sizeof *g->ps * (size_t)g->C);
    g->scratch = malloc(8 * (size_t)g->V);
    if (!g->logits || !g->tk || !g->ps || !g->scratch)
        return rg_fail(g, RT_EINTERNAL, "out of memory");
    return 0;
}

/* ---- running ---------------------------------------------------------- */

static int rg_call(rg_ctx *g, int chunk)
{
    const void *in[2] = {g->tk, g->ps};
    void *out[1] = {g->logits};
    int rc = chunk ? g->md->run_chunk(g->h, in, out) : g->md->run(g->h, in, out);
    if (rc) {
        const char *msg = g->md->error(g->h);
        return rg_fail(g, rc >= RT_EINVAL && rc <= RT_EINTERNAL ? rc : RT_EINTERNAL, "%s",
                       msg ? msg : "the model failed without a message");
    }
    return 0;
}

/* The prompt from position 0; the logits of its last token left in
 * g->logits[0, V). */
static int rg_prefill(rg_ctx *g)
{
    double t0 = rt_now();
    int64_t pos = 0, n = g->nids;
    while (pos < n) {
        int64_t left = n - pos, k = left < g->C ? left : g->C;
        int chunk = k > 1 && pos + g->C <= g->S;
        if (!chunk)
            k = 1;
        for (int64_t i = 0; i < (chunk ? g->C : 1); i++) {
            g->tk[i] = g->ids[pos + (i < k ? i : k - 1)];
            g->ps[i] = (int32_t)(pos + i);
        }
        int rc = rg_call(g, chunk);
        if (rc)
            return rc;
        if (chunk && k > 1)
            memmove(g->logits, g->logits + (k - 1) * g->V, sizeof *g->logits * (size_t)g->V);
        pos += k;
    }
    g->t_prefill = rt_now() - t0;
    return 0;
}

static void rg_print(rg_ctx *g, int prev, int id)
{
    if (!g->tok) {
        printf("%s%d", g->n_decode ? " " : "", id);
    } else {
        const char *s = rt_tok_decode_piece(g->tok, prev, id);
        fputs(s, stdout);
    }
    fflush(stdout);
}

static int rg_decode(rg_ctx *g)
{
    uint64_t state = g->seed;
    int prev = g->ids[g->nids - 1];
    int64_t pos = g->nids;
    int team = rt_get_threads();        /* what the steps run on now */
    int bos = g->tok ? rt_tok_bos(g->tok) : -1;
    double t0 = rt_now();
    for (uint64_t i = 0; i < g->n; i++) {
        int next = rt_sample(g->logits, (int)g->V, g->temperature, g->topp, &state, g->scratch);
        if (g->tok && (rt_tok_is_end(g->tok, next) || next == bos))
            break;
        rg_print(g, prev, next);
        g->n_decode++;
        prev = next;
        if (i + 1 == g->n || pos >= g->S)
            break;
        g->tk[0] = next;
        g->ps[0] = (int32_t)pos++;
        int size = rt_gov_next(&g->gov);
        if (size != team)
            rt_set_threads(team = size);
        double t = rt_now();
        int rc = rg_call(g, 0);
        if (rc)
            return rc;
        rt_gov_took(&g->gov, rt_now() - t);
        g->calls++;
    }
    g->t_decode = rt_now() - t0;
    if (g->tok)
        fputs(rt_tok_decode_flush(g->tok), stdout);
    putchar('\n');
    return 0;
}

/* The prompt's text as it would have been generated. */
static void rg_echo(rg_ctx *g)
{
    if (!g->tok)
        return;
    for (int i = 0; i < g->nids; i++)
        if (g->ids[i] != rt_tok_bos(g->tok))
            fputs(rt_tok_decode_piece(g->tok, i ? g->ids[i - 1] : -1, g->ids[i]), stdout);
    fflush(stdout);
}

static double rg_rate(int64_t n, double s) { return s > 0 ? (double)n / s : 0; }

/* "; 37 of 249 steps on fewer than 2 threads (the machine was busy)", or "". */
static const char *rg_fewer(const rg_ctx *g, char *buf, size_t size)
{
    if (!g->gov.fewer)
        return "";
    snprintf(buf, size, "; %lld of %lld steps on fewer than %d threads (the machine was busy)",
             (long long)g->gov.fewer, (long long)g->calls, g->gov.most);
    return buf;
}

static int rg_main(rg_ctx *g)
{
    int rc = rg_contract(g);
    if (!rc)
        rc = g->tokenizer ? rg_encode(g) : rg_ids(g);
    if (!rc && g->nids > g->S)
        rc = rg_fail(g, RT_EINVAL, "the prompt is %d tokens, more than the cache's %lld rows",
                     g->nids, (long long)g->S);
    if (!rc)
        rc = rg_buffers(g);
    if (rc)
        return rc;
    if (g->threads)
        rt_set_threads((int)g->threads);
    rt_gov_init(&g->gov, rt_get_threads(), g->threads != 0);
    g->h = g->md->open(g->weights);
    if (!g->h)
        return rg_fail(g, RT_EINTERNAL, "out of memory");
    if (g->md->status(g->h))
        return rg_fail(g, g->md->status(g->h), "%s", g->md->error(g->h));
    rg_echo(g);
    rc = rg_prefill(g);
    if (!rc)
        rc = rg_decode(g);
    char note[96];
    if (!rc)
        fprintf(stderr, "%s: prefill: %d tokens in %.1f ms, %.1f tokens/s (chunks of %lld); "
                "decode: %lld tokens in %.1f ms, %.1f tokens/s%s\n", g->prog, g->nids,
                g->t_prefill * 1e3, rg_rate(g->nids, g->t_prefill), (long long)g->C,
                (long long)g->n_decode, g->t_decode * 1e3,
                rg_rate(g->calls, g->t_decode), rg_fewer(g, note, sizeof note));
    return rc;
}

int rt_generate(int argc, char **argv, const rt_model *md)
{
    rg_ctx g = {0};
    g.md = md;
    g.prog = argv[0] ? argv[0] : "generate";
    g.n = 32;
    g.temperature = 1.0;
    g.topp = 0.9;
    int rc = rg_parse(&g, argc - 1, argv + 1);
    if (!rc)
        rc = rg_main(&g);
    if (rc < 0)                         /* --help */
        rc = 0;
    if (g.h)
        md->close(g.h);
    if (g.tok)
        rt_tok_close(g.tok);
    free(g.ids);
    free(g.logits);
    free(g.tk);
    free(g.ps);
    free(g.scratch);
    return rc;
}
