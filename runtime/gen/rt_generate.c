/* runtime/gen/rt_generate.c: `PROG generate`, text from a decoder
 * (docs/generating.md).
 *
 *   PROG generate --tokens 1,2,3 | [--tokenizer FILE] (--prompt TEXT | --prompt-file FILE)
 *        [-n N] [--seed S] [SAMPLERS] [--stop TEXT]... [--json]
 *        [--weights W.safetensors|DIR] [--threads N] [--profile FILE]
 *        [--prefill-min N] [--sequences K] [--repeat R]
 *
 * SAMPLERS are rt_sampler_opt's options (--temperature, --top-k, --top-p
 * or --topp, --min-p, --repeat-penalty, --presence-penalty,
 * --frequency-penalty, --repeat-last-n); the penalties look at the prompt
 * and what was drawn. --stop TEXT (up to 8; a text prompt only) ends the
 * output before the first place where TEXT appears in what is drawn: the
 * drawn text that could still begin a stop string is held back until it
 * cannot. --json prints the statistics on stderr as one JSON object.
 *
 * --repeat R generates R times in the one process, each time from an
 * empty cache (position 0) with the same seed, printing each time's
 * output and rates: a benchmark's repetitions (kiln bench), the second
 * and later finding the process's buffers, its KV cache's pages and its
 * threads ready, as llama-bench's repetitions find them.
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
 * i32[1] and positions i32[1] (a slotted decoder: and slots i32[1]),
 * output logits f32[1, V], state of S rows (slotted: [N, S, ...]). A
 * slotted decoder's calls all name slot 0 but with --sequences K: K
 * sequences, sequence k from the prompt less its last k tokens (so that
 * they sit at different positions) in slot k, each prefilled alone, then
 * decoded together, one batch call (rt_model.run_batch) a step for the
 * token of each sequence still going, rows past them repeating the last
 * (the same values written to the same cache row); each sequence samples
 * from seed S + k, and is printed whole, a line each, at the end.
 * Algorithm:
 * 1. The prompt (ids, or the tokenizer's encoding of the text with BOS)
 *    is prefilled from position 0 (rt_decode.c: whole chunks of the
 *    prefill variant ending at its last token, the tokens before them as
 *    a padded chunk when there are --prefill-min of them, else one decode
 *    step a token).
 * 2. Then N tokens are drawn (rt_sampler_draw: temperature 0 is greedy), each
 *    printed as it comes and fed back at the next position, until N, the
 *    cache's S rows (said on stderr), or (with a tokenizer) its EOS or BOS
 *    token.
 * 3. Without --threads, the decode steps' team size follows their times
 *    (rt_gov.c); the numbers never depend on it.
 * 4. Of several MPI ranks (rt_ranks_now), every rank runs the same calls;
 *    each drawn token is rank 0's (broadcast), and rank 0 alone prints
 *    (the MPI part sends the others' stdout to /dev/null) and reports the
 *    rates. Each rank reads the prompt from its own arguments or file;
 *    standard input (--prompt-file -) is rank 0's, its bytes broadcast.
 * Output: --tokens prints the drawn ids on one line, space-separated;
 * --tokenizer prints the prompt's text, then each token's text. Last, on
 * stderr: prefill and decode tokens per second; of several ranks, the
 * collectives per decode step (counted by the MPI part as they ran:
 * rt_ranks.comm). Every write to stdout is
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

#define RG_MAX_STOP 8

typedef struct {
    const rt_model *md;
    const char *prog;
    const char *tokens, *tokenizer, *prompt, *weights, *prompt_file;
    const char *src;                    /* --prompt-file's name, for messages; NULL: --prompt */
    const char *profile;                /* --profile FILE; NULL: none */
    uint64_t prefill_min;               /* --prefill-min N; 0: rt_dec_chunk_min's */
    rt_profile *prof;
    char *text;                         /* --prompt-file's text */
    char *wpath;                        /* the weights opened (rt_pick_weights) */
    uint64_t n, seed, threads;
    rt_sampler sm;
    const char *stop[RG_MAX_STOP];      /* --stop */
    int nstop, json;
    char *pend;                         /* drawn text held back: it may begin a stop string */
    size_t npend;
    int32_t *hist;                      /* the prompt, then what is drawn: nhist (<= S) */
    int64_t nhist;
    const char *finish;                 /* what ended it: "eos", "length", "stop", "cache" */
    rt_dec d;                           /* the model, its buffers */
    rt_tok *tok;
    int32_t *ids;                       /* the prompt: nids */
    int nids;
    double t_prefill, t_decode;
    int64_t n_decode, calls;            /* tokens drawn; decode steps run */
    rt_comm comm;                       /* the decode steps' collectives (several ranks) */
    uint64_t K;                         /* --sequences: 0 or 1, one */
    uint64_t repeat;                    /* --repeat: 0 or 1, once */
    rt_gov gov;
} rg_ctx;

static int rg_fail(const rg_ctx *g, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int rg_fail(const rg_ctx *g, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rt_vsay(g->prog, "generate", fmt, ap);
    va_end(ap);
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

#define RG_MAX_SEQUENCES 4096            /* --sequences, at most */
#define RG_MAX_REPEAT 1000               /* --repeat, at most */

static const char *const rg_opts[] = {"tokens", "tokenizer", "prompt", "n", "stop",
                                      "seed", "weights", "threads", "prompt-file", "profile",
                                      "prefill-min", "sequences", "repeat", "temperature",
                                      "top-k", "top-p", "topp", "min-p", "repeat-penalty",
                                      "presence-penalty", "frequency-penalty", "repeat-last-n"};

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
           "       | [--tokenizer FILE] --prompt-file FILE) [-n N] [--seed S] [SAMPLERS]\n"
           "       [--stop TEXT]... [--json] [--weights W.safetensors|DIR] [--threads N]\n"
           "       [--profile FILE] [--prefill-min N] [--sequences K] [--repeat R]\n"
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
           "  --seed S            the sampler's seed (default 1)\n"
           "SAMPLERS, applied in this order:\n"
           "  --repeat-penalty R  divide a recent token's logit by R (> 0), times R when\n"
           "                      negative (default 1: none)\n"
           "  --presence-penalty P, --frequency-penalty F\n"
           "                      lower a recent token's logit by P, and F per occurrence\n"
           "                      (each in [-2, 2]; default 0)\n"
           "  --repeat-last-n N   the tokens the penalties look at: the last N of the prompt\n"
           "                      and what is drawn (default 64; -1: all)\n"
           "  --temperature T     0: greedy; else softmax of logits / T (default 1)\n"
           "  --top-k K           the K likeliest tokens only (default 0: all)\n"
           "  --top-p P, --topp P the nucleus of mass P (default 0.9; 0 or 1: all)\n"
           "  --min-p M           tokens at least M times as likely as the likeliest (default 0)\n"
           "  --stop TEXT         end the output before TEXT (repeatable, up to 8; a text prompt)\n"
           "  --json              the statistics on stderr as one JSON object\n"
           "  --weights FILE|DIR  weights from safetensors, or a model folder's;\n"
           "                      default: %s\n"
           "  --threads N         a fixed team (default: every core, fewer while busy)\n"
           "  --sequences K       a slotted decoder's batch: K sequences at once, sequence k\n"
           "                      from the prompt less its last k tokens; each printed whole\n"
           "                      at the end, a line each (docs/serving.md)\n"
           "  --repeat R          all of it R times in this process, each from an empty\n"
           "                      cache, its output and rates printed each time (a\n"
           "                      benchmark's repetitions: later ones find buffers warm)\n"
           "  --profile FILE      time every kernel call of the prefill (NAME@%lld) and the\n"
           "                      decode steps; write one JSON line per kernel name to FILE\n"
           "                      (calls, times, FLOPs, bytes, rates); the team is fixed\n"
           "  --prefill-min N     fewer than N tokens before the prompt's whole chunks go\n"
           "                      through decode steps, not a padded chunk (default %lld:\n"
           "                      a chunk's cost against a decode step's, by the kernels')\n"
           "  -h, --help          print this and exit\n"
           "On stderr at the end: prefill and decode tokens per second. A closed stdout\n"
           "(a reader that has gone) ends generation quietly.\n",
           md->usage ? md->usage : g->prog,
           md->tokenizer_file ? md->tokenizer_file : "none (needed for a text prompt)",
           md->weights_file ? md->weights_file : "each weight's init", (long long)md->chunk,
           (long long)rt_dec_chunk_min(md, md->run_rest && md->rest > 1 ? md->rest
                                           : md->run_chunk && md->chunk > 1 ? md->chunk : 1));
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
    if (g->nstop && g->tokens)
        return rg_fail(g, RT_EUSAGE, "--stop is for a text prompt; --tokens are ids");
    if (g->repeat > 1 && g->K > 1)
        return rg_fail(g, RT_EUSAGE, "--repeat is for one sequence, not --sequences");
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
        if (!strcmp(argv[i], "--json")) {
            g->json = 1;
            continue;
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
        case 4:
            if (g->nstop == RG_MAX_STOP)
                return rg_fail(g, RT_EUSAGE, "--stop: more than %d stop strings", RG_MAX_STOP);
            g->stop[g->nstop++] = v;
            ok = *v != 0;
            break;
        case 5: ok = rg_u64(v, &g->seed); break;
        case 6: g->weights = v; break;
        case 7: ok = rg_u64(v, &g->threads) && g->threads >= 1 && g->threads <= 4096; break;
        case 8: g->prompt_file = v; ok = *v != 0; break;
        case 9: g->profile = v; ok = *v != 0; break;
        case 10: ok = rg_u64(v, &g->prefill_min) && g->prefill_min >= 1; break;
        case 11: ok = rg_u64(v, &g->K) && g->K >= 1 && g->K <= RG_MAX_SEQUENCES; break;
        case 12: ok = rg_u64(v, &g->repeat) && g->repeat >= 1 && g->repeat <= RG_MAX_REPEAT; break;
        default: ok = rt_sampler_opt(&g->sm, rg_opts[k], v) == 1;
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
        if (end == p || *p < '0' || *p > '9' || (*end && *end != ',') || x >= g->d.V)
            return rg_fail(g, RT_EINVAL, "--tokens: '%s' is not a list of ids in [0, %lld)",
                           g->tokens, (long long)g->d.V);
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

/* Of several ranks, standard input (which mpirun gives rank 0 alone):
 * rank 0's text, n bytes (its length first), into every rank's g->text. */
static int rg_share_prompt(rg_ctx *g, size_t *n)
{
    const rt_ranks *rk = rt_ranks_now();
    int64_t len = (int64_t)*n;
    if (rk->bcast(&len, sizeof len))
        return rg_fail(g, RT_EIO, "cannot share the prompt between ranks");
    if (len > INT32_MAX)
        return rg_fail(g, RT_EINVAL, "%s: %lld bytes: a prompt shared between ranks is under "
                       "2 GiB", g->src, (long long)len);
    if (rk->rank != 0 && !(g->text = malloc((size_t)len + 1)))
        return rg_fail(g, RT_EINTERNAL, "%s: out of memory", g->src);
    if (rk->bcast(g->text, len))
        return rg_fail(g, RT_EIO, "cannot share the prompt between ranks");
    g->text[len] = 0;
    *n = (size_t)len;
    return 0;
}

/* --prompt-file: the whole file (stdin for "-") is the prompt, less one
 * final line break ("\n" or "\r\n"); a NUL byte is refused. Of several
 * ranks, standard input is rank 0's, shared (rg_share_prompt). */
static int rg_read_prompt(rg_ctx *g)
{
    const rt_ranks *rk = rt_ranks_now();
    int in = !strcmp(g->prompt_file, "-"), oom = 0;
    int shared = in && rk->bcast && rk->size > 1;
    g->src = in ? "standard input" : g->prompt_file;
    size_t n = 0;
    if (!shared || rk->rank == 0) {
        FILE *f = in ? stdin : fopen(g->prompt_file, "rb");
        if (!f)
            return rg_fail(g, RT_EIO, "%s: cannot open: %s", g->src, strerror(errno));
        g->text = rg_slurp(f, &n, &oom);
        int err = errno;
        if (!in)
            fclose(f);
        if (!g->text)
            return oom ? rg_fail(g, RT_EINTERNAL, "%s: out of memory", g->src)
                       : rg_fail(g, RT_EIO, "%s: cannot read: %s", g->src, strerror(err));
    }
    int rc = shared ? rg_share_prompt(g, &n) : 0;
    if (rc)
        return rc;
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
    if (rt_tok_size(g->tok) > g->d.V)
        return rg_fail(g, RT_EINVAL, "%s: %d tokens, but the model's vocabulary is %lld",
                       path, rt_tok_size(g->tok), (long long)g->d.V);
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

/* ---- running ---------------------------------------------------------- */

/* " and R" into buf: the rest's chunk beside the chunk's size. */
static const char *rg_and(char *buf, size_t size, int64_t R)
{
    snprintf(buf, size, " and %lld", (long long)R);
    return buf;
}

static int rg_call(rg_ctx *g, int chunk)
{
    rt_err e = {0};
    return rt_dec_call(&g->d, chunk, &e) ? rg_fail(g, e.code, "%s", e.msg) : 0;
}

/* The prompt from position 0; the logits of its last token left in
 * g->d.logits[0, V). */
static int rg_prefill(rg_ctx *g)
{
    rt_err e = {0};
    double t0 = rt_now();
    if (rt_dec_prefill(&g->d, g->ids, 0, g->nids, &e))
        return rg_fail(g, e.code, "%s", e.msg);
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

/* Drawn text s, through the stop strings: printed up to the first stop
 * string (then g->finish is "stop"), less what may begin one. */
static int rg_emit(rg_ctx *g, const char *s)
{
    if (!g->nstop)
        return rg_put(g, s);
    size_t k = strlen(s);
    char *p = realloc(g->pend, g->npend + k + 1);
    if (!p)
        return rg_fail(g, RT_EINTERNAL, "out of memory");
    g->pend = p;
    memcpy(p + g->npend, s, k + 1);
    g->npend += k;
    size_t out;
    int hit = rt_stop_scan(p, g->npend, g->stop, g->nstop, &out);
    char keep = p[out];
    p[out] = 0;
    int rc = rg_put(g, p);
    p[out] = keep;
    if (hit)
        g->finish = "stop";
    memmove(p, p + out, g->npend - out + 1);
    g->npend -= out;
    return rc;
}

static int rg_print(rg_ctx *g, int prev, int id)
{
    char num[24];
    if (g->tok)
        return rg_emit(g, rt_tok_decode_piece(g->tok, prev, id));
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
    const rt_comm *comm = rt_ranks_now()->comm;
    rt_comm c0 = comm ? *comm : (rt_comm){0};
    double t0 = rt_now();
    g->finish = "length";
    for (uint64_t i = 0; i < g->n; i++) {
        int next = rt_sampler_draw(g->d.logits, (int)g->d.V, &g->sm, g->hist, (int)g->nhist,
                                   &state, g->d.scratch);
        const rt_ranks *rk = rt_ranks_now();     /* of several ranks, rank 0's token */
        if (rk->bcast && rk->bcast(&next, sizeof next))
            return rg_fail(g, RT_EIO, "cannot share the drawn token between ranks");
        if (g->tok && (rt_tok_is_end(g->tok, next) || next == bos)) {
            g->finish = "eos";
            break;
        }
        int rc = rg_print(g, prev, next);
        if (rc)
            return rc;
        g->n_decode++;
        if (!strcmp(g->finish, "stop"))
            break;
        prev = next;
        if (i + 1 == g->n)
            break;
        if (pos >= g->d.S) {
            g->finish = "cache";
            break;
        }
        g->hist[g->nhist++] = next;
        g->d.tk[0] = next;
        g->d.ps[0] = (int32_t)pos++;
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
    if (comm)
        g->comm = (rt_comm){comm->allreduce - c0.allreduce, comm->allgather - c0.allgather,
                            comm->bytes - c0.bytes, comm->received - c0.received,
                            comm->seconds - c0.seconds};
    int stopped = !strcmp(g->finish, "stop");
    int rc = g->tok && !stopped ? rg_emit(g, rt_tok_decode_flush(g->tok)) : 0;
    if (!rc && g->npend && !stopped)    /* what could have begun a stop string, but did not */
        rc = rg_put(g, g->pend);
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
/* Of several ranks, the collectives per decode step, on stderr: a line
 * after the rates, or the --json object's member "collectives_per_token". */
static void rg_comm(const rg_ctx *g, int json)
{
    const rt_comm *c = &g->comm;
    double n = g->calls ? (double)g->calls : 1;
    if (json)
        fprintf(stderr, ", \"collectives_per_token\": {\"allreduce\": %.4g, \"allgather\": %.4g, "
                "\"bytes\": %.10g, \"received_bytes\": %.10g, \"ms\": %.4f}",
                (double)c->allreduce / n, (double)c->allgather / n, (double)c->bytes / n,
                (double)c->received / n, c->seconds * 1e3 / n);
    else
        fprintf(stderr, "%s: collectives per decode token: %.4g allreduce, %.4g allgather, %.10g "
                "bytes of results (%.10g received from the other ranks), %.4f ms in them\n",
                g->prog, (double)c->allreduce / n, (double)c->allgather / n, (double)c->bytes / n,
                (double)c->received / n, c->seconds * 1e3 / n);
}

static const char *rg_fewer(const rg_ctx *g, char *buf, size_t size)
{
    if (!g->gov.fewer)
        return "";
    snprintf(buf, size, "; %lld of %lld steps on fewer than %d threads (the machine was busy)",
             (long long)g->gov.fewer, (long long)g->calls, g->gov.most);
    return buf;
}

/* --sequences K: sequence k's prompt is the first nids - k ids, prefilled
 * in slot k; then every step samples each sequence still going from its
 * own logits (lg[k]) and feeds the tokens drawn in one batch call. */
typedef struct {
    float *lg;                          /* [K, V]: each sequence's last logits */
    int32_t *out;                       /* [K, n]: the tokens drawn */
    int64_t *count, *pos;               /* [K]; pos -1: the sequence has ended */
    uint64_t *state;                    /* [K]: the samplers' */
} rg_batch;

static int rg_batch_step(rg_ctx *g, rg_batch *b, int64_t *rows)
{
    rt_dec *d = &g->d;
    int bos = g->tok ? rt_tok_bos(g->tok) : -1;
    int32_t row_of[RG_MAX_SEQUENCES];
    *rows = 0;
    for (int64_t k = 0; k < (int64_t)g->K; k++) {
        if (b->pos[k] < 0)
            continue;
        int next = rt_sampler_draw(b->lg + k * d->V, (int)d->V, &g->sm, b->out + k * (int64_t)g->n,
                                   (int)b->count[k], &b->state[k], d->scratch);
        if (g->tok && (rt_tok_is_end(g->tok, next) || next == bos)) {
            b->pos[k] = -1;
            continue;
        }
        b->out[k * (int64_t)g->n + b->count[k]++] = next;
        g->n_decode++;
        if ((uint64_t)b->count[k] == g->n || b->pos[k] >= d->S) {
            if (b->pos[k] >= d->S && (uint64_t)b->count[k] < g->n)
                g->finish = "cache";
            b->pos[k] = -1;
            continue;
        }
        d->tk[*rows] = next;
        d->ps[*rows] = (int32_t)b->pos[k]++;
        d->sl[*rows] = (int32_t)k;
        row_of[k] = (int32_t)(*rows)++;
    }
    if (!*rows)
        return 0;
    for (int64_t r = *rows; r < g->md->batch; r++) {
        d->tk[r] = d->tk[*rows - 1];
        d->ps[r] = d->ps[*rows - 1];
        d->sl[r] = d->sl[*rows - 1];
    }
    int rc = rg_call(g, 2);
    for (int64_t k = 0; !rc && k < (int64_t)g->K; k++)
        if (b->pos[k] >= 0)
            memcpy(b->lg + k * d->V, d->logits + row_of[k] * d->V, sizeof *b->lg * (size_t)d->V);
    return rc;
}

/* Each sequence a line: its prompt's text and its tokens' (a tokenizer),
 * or the ids drawn. */
static int rg_batch_print(rg_ctx *g, const rg_batch *b)
{
    int rc = 0;
    for (int64_t k = 0; !rc && k < (int64_t)g->K; k++) {
        int prev = -1;
        for (int64_t i = 0; g->tok && !rc && i < g->nids - k; i++) {
            if (g->ids[i] != rt_tok_bos(g->tok))
                rc = rg_put(g, rt_tok_decode_piece(g->tok, prev, g->ids[i]));
            prev = g->ids[i];
        }
        for (int64_t i = 0; !rc && i < b->count[k]; i++) {
            int id = b->out[k * (int64_t)g->n + i];
            char num[24];
            snprintf(num, sizeof num, "%s%d", i ? " " : "", id);
            rc = rg_put(g, g->tok ? rt_tok_decode_piece(g->tok, prev, id) : num);
            prev = id;
        }
        if (!rc && g->tok)
            rc = rg_put(g, rt_tok_decode_flush(g->tok));
        if (!rc)
            rc = rg_put(g, "\n");
    }
    return rc;
}

static int rg_sequences(rg_ctx *g)
{
    rt_dec *d = &g->d;
    int64_t K = (int64_t)g->K;
    if (K > g->nids)
        return rg_fail(g, RT_EUSAGE, "--sequences %lld: the prompt has %d tokens, one for each "
                       "sequence at least", (long long)K, g->nids);
    if (g->n > (uint64_t)d->S)
        g->n = (uint64_t)d->S;
    rg_batch b = {malloc(sizeof *b.lg * (size_t)(K * d->V)),
                  malloc(sizeof *b.out * (size_t)K * (g->n ? g->n : 1)),
                  calloc((size_t)K, sizeof *b.count), calloc((size_t)K, sizeof *b.pos),
                  calloc((size_t)K, sizeof *b.state)};
    int rc = !b.lg || !b.out || !b.count || !b.pos || !b.state
                 ? rg_fail(g, RT_EINTERNAL, "out of memory") : 0;
    rt_err e = {0};
    double t0 = rt_now();
    for (int64_t k = 0; !rc && k < K; k++) {
        d->slot = (int32_t)k;
        if (rt_dec_prefill(d, g->ids, 0, g->nids - k, &e))
            rc = rg_fail(g, e.code, "%s", e.msg);
        if (!rc)
            memcpy(b.lg + k * d->V, d->logits, sizeof *b.lg * (size_t)d->V);
        b.pos[k] = g->n ? g->nids - k : -1;
        b.state[k] = g->seed + (uint64_t)k;
    }
    g->t_prefill = rt_now() - t0;
    t0 = rt_now();
    for (int64_t rows = 1; !rc && rows;) {
        rc = rg_batch_step(g, &b, &rows);
        g->calls += rows > 0;
    }
    g->t_decode = rt_now() - t0;
    if (!rc)
        rc = rg_batch_print(g, &b);
    free(b.lg);
    free(b.out);
    free(b.count);
    free(b.pos);
    free(b.state);
    return rc;
}

/* The prompt, the buffers, the model opened with its weights. */
static int rg_setup(rg_ctx *g)
{
    char src[512];
    rt_err e = {0};
    int rc = rt_dec_contract(&g->d, g->md, &e) ? rg_fail(g, e.code, "%s", e.msg) : 0;
    if (!rc && g->prefill_min)
        g->d.prefill_min = (int64_t)g->prefill_min;
    int64_t most = g->d.slotted && g->md->run_batch ? g->md->batch : 1;
    if (!rc && (int64_t)g->K > most)
        rc = rg_fail(g, RT_EUSAGE, "--sequences %llu: this program decodes %lld at once (kiln "
                     "build --slots N)", (unsigned long long)g->K, (long long)most);
    if (!rc)
        rc = g->tokens ? rg_ids(g) : rg_encode(g);
    if (!rc && g->nids > g->d.S)
        rc = rg_fail(g, RT_EINVAL, "%sthe prompt is %d tokens, more than the cache's %lld rows",
                     rg_src(g, src, sizeof src), g->nids, (long long)g->d.S);
    if (!rc)
        rc = rt_dec_buffers(&g->d, &e) ? rg_fail(g, e.code, "%s", e.msg) : 0;
    if (!rc && !(g->hist = malloc(sizeof *g->hist * (size_t)g->d.S)))
        rc = rg_fail(g, RT_EINTERNAL, "out of memory");
    if (!rc) {
        memcpy(g->hist, g->ids, sizeof *g->ids * (size_t)g->nids);
        g->nhist = g->nids;
    }
    if (!rc && rt_pick_weights(g->md, g->weights, &g->wpath, &e))
        rc = rg_fail(g, e.code, "%s", e.msg);
    if (rc)
        return rc;
    if (g->threads)
        rt_set_threads((int)g->threads);
    if (g->profile && !g->threads)       /* one team size for the profile */
        g->threads = (uint64_t)rt_get_threads();
    rt_gov_init(&g->gov, rt_get_threads(), g->threads != 0);
    g->d.h = g->md->open(g->wpath);
    if (!g->d.h)
        return rg_fail(g, RT_EINTERNAL, "out of memory");
    if (g->md->status(g->d.h))
        return rg_fail(g, g->md->status(g->d.h), "%s", g->md->error(g->d.h));
    if (g->profile && !g->md->profile)
        return rg_fail(g, RT_EUSAGE, "--profile: this program has no kernel timers");
    if (g->profile && !(g->prof = rt_profile_new(g->md->nkernels, g->md->kernels)))
        return rg_fail(g, RT_EINTERNAL, "out of memory");
    if (g->prof)
        g->md->profile(g->d.h, g->prof);
    return 0;
}

/* One generation from position 0: the prompt echoed, prefilled, tokens
 * drawn, the rates reported; what a generation counts starts afresh. */
static int rg_once(rg_ctx *g)
{
    g->nhist = g->nids;
    g->n_decode = g->calls = 0;
    g->npend = 0;
    g->finish = "length";
    g->comm = (rt_comm){0};
    int rc = rg_echo(g);
    if (!rc)
        rc = rg_prefill(g);
    if (!rc)
        rc = rg_decode(g);
    if (!rc && !strcmp(g->finish, "cache"))
        fprintf(stderr, "%s: generate: stopped after %lld of %llu tokens: the KV cache holds "
                "%lld positions (--max-seq at import)\n", g->prog, (long long)g->n_decode,
                (unsigned long long)g->n, (long long)g->d.S);
    char note[96], and[32];
    int report = !rc && rt_ranks_now()->rank == 0;      /* rank 0 alone reports */
    if (report && g->json)
        fprintf(stderr, "{\"prompt_tokens\": %d, \"tokens\": %lld, \"finish\": \"%s\", "
                "\"prefill_ms\": %.3f, \"prefill_tokens_per_s\": %.1f, \"chunk\": %lld, "
                "\"rest_chunk\": %lld, "
                "\"decode_ms\": %.3f, \"decode_tokens_per_s\": %.1f, \"decode_steps\": %lld, "
                "\"threads\": %d, \"steps_on_fewer_threads\": %lld, \"seed\": %llu",
                g->nids, (long long)g->n_decode, g->finish, g->t_prefill * 1e3,
                rg_rate(g->nids, g->t_prefill), (long long)g->d.C, (long long)g->d.R,
                g->t_decode * 1e3, rg_rate(g->calls, g->t_decode), (long long)g->calls, g->gov.most,
                (long long)g->gov.fewer, (unsigned long long)g->seed);
    else if (report)
        fprintf(stderr, "%s: prefill: %d tokens in %.1f ms, %.1f tokens/s (chunks of %lld%s); "
                "decode: %lld tokens in %.1f ms, %.1f tokens/s%s\n", g->prog, g->nids,
                g->t_prefill * 1e3, rg_rate(g->nids, g->t_prefill), (long long)g->d.C,
                g->d.R > 1 ? rg_and(and, sizeof and, g->d.R) : "",
                (long long)g->n_decode, g->t_decode * 1e3,
                rg_rate(g->calls, g->t_decode), rg_fewer(g, note, sizeof note));
    if (report && rt_ranks_now()->comm)
        rg_comm(g, g->json);
    if (report && g->json)
        fputs("}\n", stderr);
    return rc;
}

static int rg_main(rg_ctx *g)
{
    int rc = rg_setup(g);
    if (!rc && g->K > 1) {
        rc = rg_sequences(g);
        if (!rc)
            fprintf(stderr, "%s: %llu sequences: prefill %.1f ms; decode: %lld tokens in %lld "
                    "batch steps of %d rows, %.1f ms, %.1f tokens/s\n", g->prog,
                    (unsigned long long)g->K, g->t_prefill * 1e3, (long long)g->n_decode,
                    (long long)g->calls, g->md->batch, g->t_decode * 1e3,
                    rg_rate(g->n_decode, g->t_decode));
        return rc;
    }
    for (uint64_t r = 0; !rc && r < (g->repeat > 1 ? g->repeat : 1); r++)
        rc = rg_once(g);
    rt_err e = {0};
    if (!rc && g->prof &&
        rt_profile_write(g->prof, &g->md->machine, rt_get_threads(), g->profile, &e))
        rc = rg_fail(g, e.code, "%s", e.msg);
    return rc;
}

int rt_generate(int argc, char **argv, const rt_model *md)
{
    if (argc > 1 && !strcmp(argv[1], "chat"))
        return rt_chat(argc, argv, md);
    rg_ctx g = {0};
    g.md = md;
    g.prog = argv[0] ? argv[0] : "generate";
    g.n = 32;
    g.seed = 1;                         /* as --help says (it was 0, unset) */
    g.finish = "length";
    rt_sampler_init(&g.sm);
    int rc = rg_parse(&g, argc - 1, argv + 1);
    if (!rc)
        rc = rg_main(&g);
    if (rc < 0)                         /* --help, or stdout's reader gone */
        rc = 0;
    rt_dec_free(&g.d);
    rt_profile_free(g.prof);
    if (g.tok)
        rt_tok_close(g.tok);
    free(g.ids);
    free(g.text);
    free(g.hist);
    free(g.pend);
    free(g.wpath);
    return rc;
}
