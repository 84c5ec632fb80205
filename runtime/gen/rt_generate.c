/* runtime/gen/rt_generate.c: `PROG generate`, text from a decoder
 * (docs/generating.md).
 *
 *   PROG generate --tokens 1,2,3 | [--tokenizer FILE] (--prompt TEXT | --prompt-file FILE)
 *        [-n N] [--temperature T] [--topp P] [--seed S]
 *        [--weights W.safetensors|DIR] [--threads N] [--profile FILE]
 *
 * --profile FILE times every kernel call of the prefill and the decode
 * steps (the prefill variant's kernels named NAME@C) and writes
 * rt_profile_write's lines; the team is then fixed (every core, or
 * --threads), so that the percentages of peak are of one team size.
 *
 * --weights and --tokenizer default to the model folder's files the
 * program was built from (rt_model.weights_file, .tokenizer_file),
 * refused with one line when they have gone. --prompt-file reads the prompt from a file
 * ("-": stdin), less one final line break.
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
 *    cache's S rows (said on stderr), or (with a tokenizer) its EOS or BOS
 *    token.
 * 3. Without --threads, the decode steps' team size follows their times
 *    (rt_gov.c); the numbers never depend on it.
 * 4. Of several MPI ranks (rt_ranks_now), every rank runs the same calls;
 *    each drawn token is rank 0's (broadcast), and rank 0 alone prints
 *    (the MPI part sends the others' stdout to /dev/null) and reports the
 *    rates. Each rank reads the prompt from its own arguments or file.
 * Output: --tokens prints the drawn ids on one line, space-separated;
 * --tokenizer prints the prompt's text, then each token's text. Last, on
 * stderr: prefill and decode tokens per second. Every write to stdout is
 * checked: an error (a full disk) is one line and RT_EIO; a reader that
 * has gone (EPIPE, where SIGPIPE is ignored; else SIGPIPE ends the
 * process, as it does cat) ends generation quietly, status 0. */
#include "runtime/gen/rt_tok.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const rt_model *md;
    const char *prog;
    const char *tokens, *tokenizer, *prompt, *weights, *prompt_file;
    const char *src;                    /* --prompt-file's name, for messages; NULL: --prompt */
    const char *profile;                /* --profile FILE; NULL: none */
    rt_profile *prof;
    char *text;                         /* --prompt-file's text */
    char *wpath;                        /* the weights opened (rt_pick_weights) */
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
    int full;                           /* stopped by the KV cache's end */
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
                                      "topp", "seed", "weights", "threads", "prompt-file",
                                      "profile"};

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
    const rt_model *md = g->md;
    printf("usage: %s generate (--tokens ID,ID,... | [--tokenizer FILE] --prompt TEXT\n"
           "       | [--tokenizer FILE] --prompt-file FILE) [-n N] [--temperature T] [--topp P]\n"
           "       [--seed S] [--weights W.safetensors|DIR] [--threads N] [--profile FILE]\n"
           "Generates text: the prompt prefilled, then one decode step a token drawn.\n"
           "  --tokens IDS        the prompt as token ids; prints the drawn ids\n"
           "  --tokenizer FILE    llama2.c tokenizer.bin, Hugging Face tokenizer.json, or a\n"
           "                      GGUF (its tokenizer); default: %s\n"
           "  --prompt TEXT       the prompt as text, BOS first when the tokenizer adds it;\n"
           "                      prints the text as it comes\n"
           "  --prompt-file FILE  the prompt's text from FILE (-: stdin), less one final\n"
           "                      line break\n"
           "  -n N                tokens to draw (default 32; fewer when the KV cache is\n"
           "                      full, said on stderr, or with a tokenizer EOS or BOS is drawn)\n"
           "  --temperature T     0: greedy; else softmax of logits / T (default 1)\n"
           "  --topp P            sample from the nucleus of mass P (default 0.9; 0 or 1: all)\n"
           "  --seed S            the sampler's seed (default 1)\n"
           "  --weights FILE|DIR  weights from safetensors, or a model folder's;\n"
           "                      default: %s\n"
           "  --threads N         a fixed team (default: every core, fewer while busy)\n"
           "  --profile FILE      time every kernel call of the prefill (NAME@%lld) and the\n"
           "                      decode steps; write one JSON line per kernel name to FILE\n"
           "                      (calls, times, FLOPs, bytes, rates); the team is fixed\n"
           "  -h, --help          print this and exit\n"
           "On stderr at the end: prefill and decode tokens per second. A closed stdout\n"
           "(a reader that has gone) ends generation quietly.\n",
           md->usage ? md->usage : g->prog,
           md->tokenizer_file ? md->tokenizer_file : "none (needed for a text prompt)",
           md->weights_file ? md->weights_file : "each weight's init", (long long)md->chunk);
}

/* The prompt is given one way: ids, or text with a tokenizer (given or
 * the folder's). */
static int rg_check(rg_ctx *g)
{
    const char *text = g->prompt ? "--prompt" : g->prompt_file ? "--prompt-file" : NULL;
    if (g->prompt && g->prompt_file)
        return rg_fail(g, RT_EUSAGE, "give --prompt TEXT or --prompt-file FILE, not both");
    if (g->tokens && text)
        return rg_fail(g, RT_EUSAGE, "give --tokens IDS or %s, not both (--tokens are ids)", text);
    if (g->tokens && g->tokenizer)
        return rg_fail(g, RT_EUSAGE, "--tokenizer is for a text prompt; --tokens are ids");
    if (!g->tokens && !text)
        return rg_fail(g, RT_EUSAGE, g->tokenizer ? "--tokenizer needs --prompt TEXT or "
                       "--prompt-file FILE" : "give --tokens IDS, or --prompt TEXT or "
                       "--prompt-file FILE (with --tokenizer FILE)");
    if (text && !g->tokenizer && !g->md->tokenizer_file)
        return rg_fail(g, RT_EUSAGE, "%s needs --tokenizer FILE", text);
    return 0;
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
        case 9: g->prompt_file = v; ok = *v != 0; break;
        case 10: g->profile = v; ok = *v != 0; break;
        }
        if (!ok)
            return rg_fail(g, RT_EUSAGE, "--%s: bad value '%s'", rg_opts[k], v);
    }
    return rg_check(g);
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

/* "FILE: " of --prompt-file, before a message about its text; "" for --prompt. */
static const char *rg_src(const rg_ctx *g, char *buf, size_t size)
{
    if (!g->src)
        return "";
    snprintf(buf, size, "%s: ", g->src);
    return buf;
}

/* All of f, NUL-terminated, its length in *n; NULL when out of memory
 * (*oom set) or on a read error (errno kept). */
static char *rg_slurp(FILE *f, size_t *n, int *oom)
{
    size_t cap = 0, k;
    char *buf = NULL;
    *n = 0;
    do {
        if (*n + 1 >= cap) {
            char *p = realloc(buf, cap = cap ? 2 * cap : 4096);
            if (!p) {
                free(buf);
                *oom = 1;
                return NULL;
            }
            buf = p;
        }
        *n += k = fread(buf + *n, 1, cap - *n - 1, f);
    } while (k);
    if (ferror(f)) {
        int e = errno;
        free(buf);
        errno = e;
        return NULL;
    }
    buf[*n] = 0;
    return buf;
}

/* --prompt-file: the whole file (stdin for "-") is the prompt, less one
 * final line break ("\n" or "\r\n"); a NUL byte is refused. */
static int rg_read_prompt(rg_ctx *g)
{
    int in = !strcmp(g->prompt_file, "-"), oom = 0;
    g->src = in ? "standard input" : g->prompt_file;
    FILE *f = in ? stdin : fopen(g->prompt_file, "rb");
    if (!f)
        return rg_fail(g, RT_EIO, "%s: cannot open: %s", g->src, strerror(errno));
    size_t n;
    g->text = rg_slurp(f, &n, &oom);
    int err = errno;
    if (!in)
        fclose(f);
    if (!g->text)
        return oom ? rg_fail(g, RT_EINTERNAL, "%s: out of memory", g->src)
                   : rg_fail(g, RT_EIO, "%s: cannot read: %s", g->src, strerror(err));
    const char *nul = memchr(g->text, 0, n);
    if (nul)
        return rg_fail(g, RT_EINVAL, "%s: byte %zu is NUL: a prompt is text", g->src,
                       (size_t)(nul - g->text));
    if (n && g->text[n - 1] == '\n') {
        g->text[--n] = 0;
        if (n && g->text[n - 1] == '\r')
            g->text[--n] = 0;
    }
    g->prompt = g->text;
    return 0;
}

/* --tokenizer, else the model folder's when it can still be read. */
static int rg_open_tokenizer(rg_ctx *g)
{
    rt_err e = {0};
    const char *path = g->tokenizer ? g->tokenizer : g->md->tokenizer_file;
    if (!g->tokenizer && access(path, R_OK) != 0)
        return rg_fail(g, RT_EIO, "%s: cannot read the tokenizer this program was built with "
                       "(%s): was its folder moved or deleted? pass --tokenizer FILE", path,
                       strerror(errno));
    g->tokenizer = path;
    if (rt_tok_open(path, &g->tok, &e))
        return rg_fail(g, e.code, "%s", e.msg);
    if (rt_tok_size(g->tok) > g->V)
        return rg_fail(g, RT_EINVAL, "%s: %d tokens, but the model's vocabulary is %lld",
                       path, rt_tok_size(g->tok), (long long)g->V);
    return 0;
}

static int rg_encode(rg_ctx *g)
{
    rt_err e = {0};
    char src[512];
    int rc = g->prompt_file ? rg_read_prompt(g) : 0;
    if (!rc)
        rc = rg_open_tokenizer(g);
    if (rc)
        return rc;
    int cap = (int)strlen(g->prompt) + 3;
    g->ids = malloc(sizeof *g->ids * (size_t)cap);
    if (!g->ids)
        return rg_fail(g, RT_EINTERNAL, "out of memory");
    if (rt_tok_encode(g->tok, g->prompt, 1, g->ids, cap, &g->nids, &e))
        return rg_fail(g, e.code, "%s%s", rg_src(g, src, sizeof src), e.msg);
    if (!g->nids)
        return rg_fail(g, RT_EINVAL, "%sthe prompt is empty and the tokenizer has no BOS",
                       rg_src(g, src, sizeof src));
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
        return rg_fail(g, RT_EINVAL, RT_NOT_A_DECODER, md->name);
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

/* s on stdout at once: 0, RG_GONE when the reader has gone (EPIPE:
 * nothing said, and kiln's own check of stdout finds it clear), or
 * RT_EIO said. */
#define RG_GONE (-2)
static int rg_put(const rg_ctx *g, const char *s)
{
    if ((*s && fputs(s, stdout) == EOF) || fflush(stdout) != 0) {
        int e = errno;
        clearerr(stdout);               /* glibc has dropped what it held */
        if (e == EPIPE)
            return RG_GONE;
        return rg_fail(g, RT_EIO, "cannot write to stdout: %s", strerror(e));
    }
    return 0;
}

static int rg_print(rg_ctx *g, int prev, int id)
{
    char num[24];
    if (g->tok)
        return rg_put(g, rt_tok_decode_piece(g->tok, prev, id));
    snprintf(num, sizeof num, "%s%d", g->n_decode ? " " : "", id);
    return rg_put(g, num);
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
        const rt_ranks *rk = rt_ranks_now();     /* of several ranks, rank 0's token */
        if (rk->bcast && rk->bcast(&next, sizeof next))
            return rg_fail(g, RT_EIO, "cannot share the drawn token between ranks");
        if (g->tok && (rt_tok_is_end(g->tok, next) || next == bos))
            break;
        int rc = rg_print(g, prev, next);
        if (rc)
            return rc;
        g->n_decode++;
        prev = next;
        if (i + 1 == g->n)
            break;
        if (pos >= g->S) {
            g->full = 1;
            break;
        }
        g->tk[0] = next;
        g->ps[0] = (int32_t)pos++;
        int size = rt_gov_next(&g->gov);
        if (size != team)
            rt_set_threads(team = size);
        double t = rt_now();
        rc = rg_call(g, 0);
        if (rc)
            return rc;
        rt_gov_took(&g->gov, rt_now() - t);
        g->calls++;
    }
    g->t_decode = rt_now() - t0;
    int rc = g->tok ? rg_put(g, rt_tok_decode_flush(g->tok)) : 0;
    return rc ? rc : rg_put(g, "\n");
}

/* The prompt's text as it would have been generated. */
static int rg_echo(rg_ctx *g)
{
    int rc = 0;
    for (int i = 0; g->tok && !rc && i < g->nids; i++)
        if (g->ids[i] != rt_tok_bos(g->tok))
            rc = rg_put(g, rt_tok_decode_piece(g->tok, i ? g->ids[i - 1] : -1, g->ids[i]));
    return rc;
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

/* The prompt, the buffers, the model opened with its weights. */
static int rg_setup(rg_ctx *g)
{
    char src[512];
    rt_err e = {0};
    int rc = rg_contract(g);
    if (!rc)
        rc = g->tokens ? rg_ids(g) : rg_encode(g);
    if (!rc && g->nids > g->S)
        rc = rg_fail(g, RT_EINVAL, "%sthe prompt is %d tokens, more than the cache's %lld rows",
                     rg_src(g, src, sizeof src), g->nids, (long long)g->S);
    if (!rc)
        rc = rg_buffers(g);
    if (!rc && rt_pick_weights(g->md, g->weights, &g->wpath, &e))
        rc = rg_fail(g, e.code, "%s", e.msg);
    if (rc)
        return rc;
    if (g->threads)
        rt_set_threads((int)g->threads);
    if (g->profile && !g->threads)       /* one team size for the profile */
        g->threads = (uint64_t)rt_get_threads();
    rt_gov_init(&g->gov, rt_get_threads(), g->threads != 0);
    g->h = g->md->open(g->wpath);
    if (!g->h)
        return rg_fail(g, RT_EINTERNAL, "out of memory");
    if (g->md->status(g->h))
        return rg_fail(g, g->md->status(g->h), "%s", g->md->error(g->h));
    if (g->profile && !g->md->profile)
        return rg_fail(g, RT_EUSAGE, "--profile: this program has no kernel timers");
    if (g->profile && !(g->prof = rt_profile_new(g->md->nkernels, g->md->kernels)))
        return rg_fail(g, RT_EINTERNAL, "out of memory");
    if (g->prof)
        g->md->profile(g->h, g->prof);
    return 0;
}

static int rg_main(rg_ctx *g)
{
    int rc = rg_setup(g);
    if (!rc)
        rc = rg_echo(g);
    if (!rc)
        rc = rg_prefill(g);
    if (!rc)
        rc = rg_decode(g);
    if (!rc && g->full)
        fprintf(stderr, "%s: generate: stopped after %lld of %llu tokens: the KV cache holds "
                "%lld positions (--max-seq at import)\n", g->prog, (long long)g->n_decode,
                (unsigned long long)g->n, (long long)g->S);
    char note[96];
    if (!rc && rt_ranks_now()->rank == 0)
        fprintf(stderr, "%s: prefill: %d tokens in %.1f ms, %.1f tokens/s (chunks of %lld); "
                "decode: %lld tokens in %.1f ms, %.1f tokens/s%s\n", g->prog, g->nids,
                g->t_prefill * 1e3, rg_rate(g->nids, g->t_prefill), (long long)g->C,
                (long long)g->n_decode, g->t_decode * 1e3,
                rg_rate(g->calls, g->t_decode), rg_fewer(g, note, sizeof note));
    rt_err e = {0};
    if (!rc && g->prof &&
        rt_profile_write(g->prof, &g->md->machine, rt_get_threads(), g->profile, &e))
        rc = rg_fail(g, e.code, "%s", e.msg);
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
    if (rc < 0)                         /* --help, or stdout's reader gone */
        rc = 0;
    if (g.h)
        md->close(g.h);
    rt_profile_free(g.prof);
    if (g.tok)
        rt_tok_close(g.tok);
    free(g.ids);
    free(g.logits);
    free(g.tk);
    free(g.ps);
    free(g.scratch);
    free(g.text);
    free(g.wpath);
    return rc;
}
