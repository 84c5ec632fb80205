/* runtime/core/rt_main.c: rt_main, the thin main of every generated executable
 * and of `kiln run`.
 *
 * Contract (kiln_rt.h): the whole command line is parsed before anything
 * is opened; then the thread count is set, the model opened (which loads
 * its weights: --weights, a file or a model folder; else the folder's
 * the program was built from, md->weights_file, refused with one line when it
 * has gone; else each weight's init), each input read from its .npy file
 * or seeded, the model run --repeat times with each call timed, each
 * requested output written atomically to its .npy file (and the profile
 * to its file), and the others summarised on stdout. Only then come the
 * notes on stderr (which inputs were seeded, the times), so
 * that a failure is one line alone: "PROG: message" on stderr, with its
 * RT_* status returned (2 usage, 1 invalid inputs or weights, 3 I/O,
 * 4 internal or out of memory; 3 too, before main, on a CPU that lacks
 * an instruction set the program was compiled for). Options take `--opt value` or
 * `--opt=value`. NAME=FILE is split after the longest declared name the
 * argument starts with, so names may themselves hold '='. The model is
 * closed and everything freed on every path. */
#include "runtime/core/rt_core.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RM_MAX_REPEAT 1000000 /* keeps the times array small */
#define RM_MAX_THREADS 4096

enum {
    RM_WEIGHTS, RM_INPUT, RM_OUTPUT, RM_REPEAT, RM_THREADS, RM_SEED, RM_PROFILE, RM_HELP,
    RM_VERSION, RM_PREPARE, RM_NOPTS
};
static const char *const rm_opt_names[RM_NOPTS] = {"weights", "input",   "output", "repeat",
                                                   "threads", "seed",    "profile", "help",
                                                   "version", "prepare-weights"};

typedef struct {
    const rt_model *md;
    const char *prog;                 /* message prefix: argv[0] */
    const char *weights;              /* --weights; NULL: not given */
    char *wpath;                      /* what is opened (rt_pick_weights); NULL: inits */
    const char *profile;              /* --profile FILE; NULL: no timers */
    const char **in_file, **out_file; /* [ninputs], [noutputs]; NULL: not given */
    uint64_t repeat, seed;
    int threads;    /* 0: OpenMP's default */
    unsigned given; /* bit per single-valued option seen */
    int help, version;
    int prepare;      /* --prepare-weights: open (making the weights' image), no run */
    void *h;          /* the open model */
    void **in, **out; /* rt_alloc'd, as the model declares */
    double *ms;       /* [repeat] milliseconds per run */
    rt_profile *prof; /* the kernels' timers, with --profile */
} rm_ctx;

/* ---- the CPU -------------------------------------------------------- */

/* A program compiled for instructions this CPU lacks (-march=native on
 * another machine, or kiln build --target x86-64-v4 here) would die of
 * SIGILL at the first of them. Before main, this constructor, itself
 * compiled for plain x86-64, asks the CPU for each extension the
 * compiler was allowed to use and ends the process with one line and
 * status 3 naming the first one missing. Not in a library (KILN_NO_MAIN):
 * a library never ends the program that loads it. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(KILN_NO_MAIN)
#define RM_NEED(feature)                                                                   \
    if (!lack && !__builtin_cpu_supports(feature))                                         \
    lack = feature
extern char *program_invocation_short_name;        /* glibc's, as errno.h declares it */
__attribute__((constructor, target("arch=x86-64"))) static void rm_cpu_check(void)
{
    const char *lack = NULL;
    __builtin_cpu_init();
#ifdef __SSE4_2__
    RM_NEED("sse4.2");
#endif
#ifdef __AVX__
    RM_NEED("avx");
#endif
#ifdef __AVX2__
    RM_NEED("avx2");
#endif
#ifdef __FMA__
    RM_NEED("fma");
#endif
#ifdef __AVX512F__
    RM_NEED("avx512f");
#endif
#ifdef __AVX512BW__
    RM_NEED("avx512bw");
#endif
#ifdef __AVX512VL__
    RM_NEED("avx512vl");
#endif
#ifdef __AVX512VNNI__
    RM_NEED("avx512vnni");
#endif
#ifdef __AVX512BF16__
    RM_NEED("avx512bf16");
#endif
    if (!lack)
        return;
    fprintf(stderr, "%s: this CPU lacks %s, which the program was compiled to use: build it "
            "on this machine, or with kiln build --target x86-64-v3 (or v2) to run on more "
            "CPUs\n", program_invocation_short_name, lack);
    exit(RT_EIO);
}
#undef RM_NEED
#endif

/* ---- messages ------------------------------------------------------- */

static void rm_note(const rm_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rm_note(const rm_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rt_vsay(c->prog, NULL, fmt, ap);
    va_end(ap);
}

static int rm_fail(const rm_ctx *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int rm_fail(const rm_ctx *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rt_vsay(c->prog, NULL, fmt, ap);
    va_end(ap);
    return code;
}

/* The model's own message; a status outside 1..4 counts as internal. */
static int rm_model_fail(const rm_ctx *c, int status)
{
    const char *msg = c->md->error(c->h);
    if (status < RT_EINVAL || status > RT_EINTERNAL)
        status = RT_EINTERNAL;
    return rm_fail(c, status, "%s", msg && *msg ? msg : "the model failed without a message");
}

/* ---- the command line ------------------------------------------------ */

/* Digits only (no sign, no spaces), no overflow: 1 when v is a number. */
static int rm_u64(const char *v, uint64_t *out)
{
    uint64_t x = 0;
    if (!*v)
        return 0;
    for (; *v; v++) {
        if (*v < '0' || *v > '9' || x > (UINT64_MAX - (uint64_t)(*v - '0')) / 10)
            return 0;
        x = x * 10 + (uint64_t)(*v - '0');
    }
    *out = x;
    return 1;
}

/* "'x', 'ids'": the names of t, for messages. */
static const char *rm_names(char *buf, size_t size, const rt_tensor_info *t, int n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k < size; i++) {
        int w = snprintf(buf + k, size - k, "%s'%s'", i ? ", " : "", t[i].name);
        if (w < 0)
            break;
        k += (size_t)w;
    }
    return buf;
}

static int rm_unbound(const rm_ctx *c, const char *kind, const char *arg, const rt_tensor_info *t,
                      int n)
{
    char names[1024];
    const char *eq = strchr(arg, '=');
    if (!eq)
        return rm_fail(c, RT_EUSAGE, "--%s: '%s' is not NAME=FILE", kind, arg);
    if (!n)
        return rm_fail(c, RT_EUSAGE, "--%s: no %s named '%.*s' (the model has no %ss)", kind, kind,
                       (int)(eq - arg), arg, kind);
    return rm_fail(c, RT_EUSAGE, "--%s: no %s named '%.*s' (%ss: %s)", kind, kind, (int)(eq - arg),
                   arg, kind, rm_names(names, sizeof names, t, n));
}

/* NAME=FILE for --input or --output: split after the longest declared
 * name followed by '=', so a name holding '=' still works. */
static int rm_bind(rm_ctx *c, const char *kind, const char *arg, const rt_tensor_info *t, int n,
                   const char **file)
{
    int best = -1;
    size_t blen = 0;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(t[i].name);
        if (!strncmp(arg, t[i].name, l) && arg[l] == '=' && (best < 0 || l > blen))
            best = i, blen = l;
    }
    if (best < 0)
        return rm_unbound(c, kind, arg, t, n);
    if (file[best])
        return rm_fail(c, RT_EUSAGE, "--%s: %s '%s' given twice", kind, kind, t[best].name);
    if (!arg[blen + 1])
        return rm_fail(c, RT_EUSAGE, "--%s: no file name after '%s='", kind, t[best].name);
    file[best] = arg + blen + 1;
    return 0;
}

static int rm_apply(rm_ctx *c, int opt, const char *v)
{
    const rt_model *md = c->md;
    uint64_t n;
    if (opt == RM_INPUT)
        return rm_bind(c, "input", v, md->inputs, md->ninputs, c->in_file);
    if (opt == RM_OUTPUT)
        return rm_bind(c, "output", v, md->outputs, md->noutputs, c->out_file);
    if (c->given & 1u << opt)
        return rm_fail(c, RT_EUSAGE, "option '--%s' given twice", rm_opt_names[opt]);
    c->given |= 1u << opt;
    if (opt == RM_WEIGHTS) {
        c->weights = v;
        return 0;
    }
    if (opt == RM_PROFILE && !md->profile)
        return rm_fail(c, RT_EUSAGE, "--profile: this program has no kernel timers");
    if (opt == RM_PROFILE) {
        c->profile = v;
        return 0;
    }
    if (opt == RM_SEED && !rm_u64(v, &c->seed))
        return rm_fail(c, RT_EUSAGE, "--seed: '%s' is not a whole number from 0 to %llu", v,
                       (unsigned long long)UINT64_MAX);
    if (opt == RM_SEED)
        return 0;
    uint64_t hi = opt == RM_REPEAT ? RM_MAX_REPEAT : RM_MAX_THREADS;
    if (!rm_u64(v, &n) || n < 1 || n > hi)
        return rm_fail(c, RT_EUSAGE, "--%s: '%s' is not a whole number from 1 to %llu",
                       rm_opt_names[opt], v, (unsigned long long)hi);
    if (opt == RM_REPEAT)
        c->repeat = n;
    else
        c->threads = (int)n;
    return 0;
}

/* "--name", "--name=value" or "-h": the option and its inline value. */
static int rm_option(const char *a, const char **val)
{
    *val = NULL;
    if (!strcmp(a, "-h"))
        return RM_HELP;
    if (strncmp(a, "--", 2))
        return -1;
    a += 2;
    size_t len = strcspn(a, "=");
    for (int i = 0; i < RM_NOPTS; i++)
        if (strlen(rm_opt_names[i]) == len && !strncmp(a, rm_opt_names[i], len)) {
            *val = a[len] == '=' ? a + len + 1 : NULL;
            return i;
        }
    return -1;
}

/* Stops at --help or --version: what follows is not looked at. */
static int rm_parse(rm_ctx *c, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *val;
        int opt = rm_option(argv[i], &val);
        if (opt < 0)
            return rm_fail(c, RT_EUSAGE,
                           argv[i][0] == '-' ? "unknown option '%s' (see --help)"
                                             : "unexpected argument '%s' (see --help)",
                           argv[i]);
        if (opt == RM_PREPARE) {
            c->prepare = 1;
            if (val)
                return rm_fail(c, RT_EUSAGE, "option '--%s' takes no value", rm_opt_names[opt]);
            continue;
        }
        if (opt == RM_HELP || opt == RM_VERSION) {
            *(opt == RM_HELP ? &c->help : &c->version) = 1;
            return val ? rm_fail(c, RT_EUSAGE, "option '--%s' takes no value", rm_opt_names[opt])
                       : 0;
        }
        if (!val && i + 1 >= argc)
            return rm_fail(c, RT_EUSAGE, "option '--%s' needs a value", rm_opt_names[opt]);
        int rc = rm_apply(c, opt, val ? val : argv[++i]);
        if (rc)
            return rc;
    }
    return 0;
}

/* "  --weights ..." of --help: what the option takes, and its default. */
static void rm_help_weights(const rt_model *md)
{
    printf("  --weights FILE|DIR  weights from safetensors (F32, F16, BF16), or a model folder's\n"
           "                      (its model.safetensors, or the index of its shards); a weight\n"
           "                      with an init may be absent; default: ");
    if (md->weights_file)
        printf("those it was built\n"
               "                      with, %s\n", md->weights_file);
    else
        printf("each weight's init\n");
}

static void rm_help(const rm_ctx *c)
{
    const rt_model *md = c->md;
    const char *usage = md->usage ? md->usage : c->prog;
    char sh[160];
    printf("usage: %s [--weights W.safetensors] [--input NAME=F.npy]... [--output NAME=F.npy]...\n"
           "       [--repeat N] [--threads N] [--seed S] [--profile FILE]\n"
           "Runs model '%s'.\n", usage, md->name ? md->name : "");
    rm_help_weights(md);
    printf("  --input NAME=FILE   an input from .npy ('<f4' or '<i4', C order); an input not\n"
           "                      given is seeded, and this is said on stderr\n"
           "  --output NAME=FILE  write an output to .npy; the others are summarised on stdout\n"
           "  --repeat N          run N times and print the median, min and max time (default 1)\n"
           "  --threads N         threads to use (default: OMP_NUM_THREADS, else every core)\n"
           "  --seed S            seed for inputs not given (default 1)\n"
           "  --profile FILE      time every kernel call; write one JSON line per kernel\n"
           "                      name to FILE (calls, times, FLOPs, bytes, rates)\n"
           "  --version           print the model's name, kiln's version and how this was built\n"
           "  --prepare-weights   open the weights and keep their prepared image (the weights\n"
           "                      cache, KILN_WEIGHTS_CACHE), so the next open maps it; no run\n"
           "  -h, --help          print this and exit\n");
    if (md->generate)
        printf("or:    %s generate --tokens 1,2,3 | [--tokenizer FILE] --prompt TEXT | --prompt-file F\n"
               "       [-n N] [--temperature T] [--topp P] [--seed S] [--weights W] [--threads N]\n"
               "  generates text from a prompt%s (see generate --help)\n", usage,
               md->run_chunk ? ", prefilled in chunks of the prefill variant" : "");
    if (md->generate)
        printf("or:    %s chat [--tokenizer FILE] [--chat-template NAME] [--system TEXT] [-n N]\n"
               "  a conversation with the model's chat template (see chat --help)\n", usage);
    if (md->serve)
        printf("or:    %s serve [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--parallel B]\n"
               "  an OpenAI-compatible server (see serve --help)\n", usage);
    printf("inputs:\n");
    for (int i = 0; i < md->ninputs; i++)
        printf("  %s %s%s\n", md->inputs[i].name, md->inputs[i].dtype == RT_I32 ? "i32" : "f32",
               rt_fmt_shape(sh, sizeof sh, md->inputs[i].rank, md->inputs[i].dims));
    printf("outputs:\n");
    for (int i = 0; i < md->noutputs; i++)
        printf("  %s %s%s\n", md->outputs[i].name, md->outputs[i].dtype == RT_I32 ? "i32" : "f32",
               rt_fmt_shape(sh, sizeof sh, md->outputs[i].rank, md->outputs[i].dims));
    fflush(stdout);
}

/* --version: the model, the kiln that wrote it and how it was compiled,
 * then the model folder's files it remembers. */
static void rm_version(const rm_ctx *c)
{
    const rt_model *md = c->md;
    printf("model '%s', generated by kiln %s\n", md->name ? md->name : "",
           md->kiln_version ? md->kiln_version : "(version not known)");
    printf("built with: %s\n", md->build ? md->build : "(not known)");
    if (md->weights_file)
        printf("weights: %s\n", md->weights_file);
    if (md->tokenizer_file)
        printf("tokenizer: %s\n", md->tokenizer_file);
    fflush(stdout);
}

/* ---- running ------------------------------------------------------------ */

static int rm_load(rm_ctx *c)
{
    rt_err e = {0};
    if (rt_pick_weights(c->md, c->weights, &c->wpath, &e))
        return rm_fail(c, e.code, "%s", e.msg);
    if (c->threads)
        rt_set_threads(c->threads);
    c->h = c->md->open(c->wpath);
    if (!c->h)
        return rm_fail(c, RT_EINTERNAL, "out of memory opening the model");
    int status = c->md->status(c->h);
    if (status)
        return rm_model_fail(c, status);
    if (c->profile) {
        if (!(c->prof = rt_profile_new(c->md->nkernels, c->md->kernels)))
            return rm_fail(c, RT_EINTERNAL, "out of memory");
        c->md->profile(c->h, c->prof);
    }
    return 0;
}

/* Every input and output buffer (both dtypes are 4 bytes), and the times. */
static int rm_buffers(rm_ctx *c)
{
    const rt_model *md = c->md;
    if (!(c->ms = malloc(c->repeat * sizeof *c->ms)))
        return rm_fail(c, RT_EINTERNAL, "out of memory");
    for (int i = 0; i < md->ninputs; i++)
        if (!(c->in[i] = rt_alloc((size_t)md->inputs[i].count * 4)))
            return rm_fail(c, RT_EINTERNAL, "out of memory for input '%s'", md->inputs[i].name);
    for (int i = 0; i < md->noutputs; i++)
        if (!(c->out[i] = rt_alloc((size_t)md->outputs[i].count * 4)))
            return rm_fail(c, RT_EINTERNAL, "out of memory for output '%s'", md->outputs[i].name);
    return 0;
}

static int rm_inputs(rm_ctx *c)
{
    for (int i = 0; i < c->md->ninputs; i++) {
        const rt_tensor_info *t = &c->md->inputs[i];
        rt_err e = {0};
        if (!c->in_file[i])
            rt_seed_input(t, i, c->seed, c->in[i]);
        else if (rt_npy_read(c->in_file[i], t, c->in[i], &e))
            return rm_fail(c, e.code, "%s", e.msg);
    }
    return 0;
}

static int rm_cmp_ms(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int rm_runs(rm_ctx *c)
{
    uint64_t n = c->repeat;
    for (uint64_t r = 0; r < n; r++) {
        double t0 = rt_now();
        int rc = c->md->run(c->h, (const void *const *)c->in, (void *const *)c->out);
        c->ms[r] = (rt_now() - t0) * 1e3;
        if (rc)
            return rm_model_fail(c, rc);
    }
    return 0;
}

/* " min=... max=... mean=... first=[a, b, c, d]": min and max skip NaNs,
 * which are counted; the mean includes them, so it shows they exist. */
static void rm_stats_f32(const float *x, int64_t n)
{
    double mn = 0, mx = 0, sum = 0;
    int64_t k = 0, nans = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        sum += v;
        if (v != v) {
            nans++;
            continue;
        }
        if (!k || v < mn)
            mn = v;
        if (!k || v > mx)
            mx = v;
        k++;
    }
    if (k)
        printf(" min=%.6g max=%.6g", mn, mx);
    else
        printf(" min=nan max=nan");
    printf(" mean=%.6g first=[", sum / (double)n);
    for (int64_t i = 0; i < n && i < 4; i++)
        printf("%s%.6g", i ? ", " : "", (double)x[i]);
    printf("]");
    if (nans)
        printf(" nan=%lld", (long long)nans);
    printf("\n");
}

static void rm_stats_i32(const int32_t *x, int64_t n)
{
    int32_t mn = x[0], mx = x[0];
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
        sum += x[i];
    }
    printf(" min=%ld max=%ld mean=%.6g first=[", (long)mn, (long)mx, sum / (double)n);
    for (int64_t i = 0; i < n && i < 4; i++)
        printf("%s%ld", i ? ", " : "", (long)x[i]);
    printf("]\n");
}

/* `NAME f32[1,32000] min=... max=... mean=... first=[a, b, c, d]` */
static void rm_summary(const rt_tensor_info *t, const void *buf)
{
    char sh[160];
    printf("%s %s%s", t->name, t->dtype == RT_I32 ? "i32" : "f32",
           rt_fmt_shape(sh, sizeof sh, t->rank, t->dims));
    if (t->count <= 0)
        printf(" (empty)\n");
    else if (t->dtype == RT_I32)
        rm_stats_i32(buf, t->count);
    else
        rm_stats_f32(buf, t->count);
}

/* Files first: a failure to write one is then the only thing said. Of
 * several ranks, rank 0 writes (the others' outputs are the same). */
static int rm_outputs(rm_ctx *c)
{
    for (int i = 0; i < c->md->noutputs && rt_ranks_now()->rank == 0; i++) {
        const rt_tensor_info *t = &c->md->outputs[i];
        rt_err e = {0};
        if (c->out_file[i] &&
            rt_npy_write(c->out_file[i], t->dtype, t->rank, t->dims, c->out[i], &e))
            return rm_fail(c, e.code, "%s", e.msg);
    }
    rt_err e = {0};
    if (c->prof && rt_profile_write(c->prof, &c->md->machine, rt_get_threads(), c->profile, &e))
        return rm_fail(c, e.code, "%s", e.msg);
    for (int i = 0; i < c->md->noutputs; i++)
        if (!c->out_file[i])
            rm_summary(&c->md->outputs[i], c->out[i]);
    if (fflush(stdout) != 0)
        return rm_fail(c, RT_EIO, "cannot write to stdout: %s", strerror(errno));
    return 0;
}

/* After a successful run: which inputs were seeded, and the times. */
static void rm_notes(rm_ctx *c)
{
    uint64_t n = c->repeat;
    for (int i = 0; i < c->md->ninputs; i++)
        if (!c->in_file[i])
            rm_note(c, "input '%s' not given: seeded (seed %llu)", c->md->inputs[i].name,
                    (unsigned long long)c->seed);
    if (n > 1) {
        qsort(c->ms, n, sizeof *c->ms, rm_cmp_ms);
        double med = n % 2 ? c->ms[n / 2] : (c->ms[n / 2 - 1] + c->ms[n / 2]) / 2;
        rm_note(c, "%llu runs: median %.3f ms, min %.3f ms, max %.3f ms", (unsigned long long)n,
                med, c->ms[0], c->ms[n - 1]);
    }
    if (c->prof && c->md->machine.peak <= 0)
        rm_note(c, "--profile: percentages of peak are null: kiln knew no machine figures "
                   "when it built this (`kiln machine` measures them once)");
}

/* ---- the weights ------------------------------------------------------ */

static int rm_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* dir/name, malloc'd (NULL: out of memory). */
static char *rm_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* A folder's weights as kiln takes them (frontend imp_hf_weights): the
 * index of its shards when there, else its model.safetensors. */
static char *rm_folder_weights(const char *dir)
{
    struct stat st;
    char *index = rm_join(dir, "model.safetensors.index.json");
    if (!index || stat(index, &st) == 0)
        return index;
    free(index);
    return rm_join(dir, "model.safetensors");
}

int rt_pick_weights(const rt_model *md, const char *given, char **path, rt_err *e)
{
    *path = NULL;
    if (!given && md->weights_file && access(md->weights_file, R_OK) != 0)
        return rt_errf(e, RT_EIO, "%s: cannot read the weights this program was built with "
                       "(%s): was it moved or deleted? pass --weights FILE or DIR",
                       md->weights_file, strerror(errno));
    if (!given)
        given = md->weights_file;
    if (!given)
        return 0;
    *path = rm_is_dir(given) ? rm_folder_weights(given) : strdup(given);
    return *path ? 0 : rt_errf(e, RT_EINTERNAL, "out of memory");
}

/* ---- the whole run ----------------------------------------------------- */

static int rm_setup(rm_ctx *c, int argc, char **argv, const rt_model *md)
{
    memset(c, 0, sizeof *c);
    c->md = md;
    c->prog = argc > 0 && argv[0] && *argv[0] ? argv[0] : md->name ? md->name : "model";
    c->repeat = 1;
    c->seed = 1;
    c->in_file = calloc((size_t)md->ninputs + 1, sizeof *c->in_file);
    c->out_file = calloc((size_t)md->noutputs + 1, sizeof *c->out_file);
    c->in = calloc((size_t)md->ninputs + 1, sizeof *c->in);
    c->out = calloc((size_t)md->noutputs + 1, sizeof *c->out);
    if (!c->in_file || !c->out_file || !c->in || !c->out)
        return rm_fail(c, RT_EINTERNAL, "out of memory");
    return 0;
}

static void rm_cleanup(rm_ctx *c)
{
    if (c->h)
        c->md->close(c->h);
    rt_profile_free(c->prof);
    for (int i = 0; c->in && i < c->md->ninputs; i++)
        rt_free(c->in[i]);
    for (int i = 0; c->out && i < c->md->noutputs; i++)
        rt_free(c->out[i]);
    free(c->in);
    free(c->out);
    free(c->in_file);
    free(c->out_file);
    free(c->ms);
    free(c->wpath);
}

/* `PROG generate` or `PROG chat` of a program built without the
 * generation part (its model is no decoder): the message rt_generate
 * would give. */
static int rm_no_generate(int argc, char **argv, const rt_model *md)
{
    const char *prog = argc > 0 && argv[0] && *argv[0] ? argv[0] : md->name;
    fprintf(stderr, "%s: %s: " RT_NOT_A_DECODER "\n", prog, argv[1], md->name);
    return RT_EINVAL;
}

/* `PROG serve` of a program built without the serving part. */
static int rm_no_serve(int argc, char **argv, const rt_model *md)
{
    const char *prog = argc > 0 && argv[0] && *argv[0] ? argv[0] : md->name;
    fprintf(stderr, "%s: serve: model '%s' was not built for serving: build a decoder with "
            "kiln build --slots N (N > 1)\n", prog, md->name);
    return RT_EUSAGE;
}

int rt_main(int argc, char **argv, const rt_model *md)
{
    if (argc > 1 && !strcmp(argv[1], "serve"))
        return md->serve ? md->serve(argc, argv, md) : rm_no_serve(argc, argv, md);
    int gen = argc > 1 && (!strcmp(argv[1], "generate") || !strcmp(argv[1], "chat"));
    if (gen && md->generate)
        return md->generate(argc, argv, md);
    if (gen)
        return rm_no_generate(argc, argv, md);
    rm_ctx c;
    int rc = rm_setup(&c, argc, argv, md);
    if (!rc)
        rc = rm_parse(&c, argc, argv);
    if (!rc && c.help) {
        rm_help(&c);
    } else if (!rc && c.version) {
        rm_version(&c);
    } else if (!rc && c.prepare) {
        rc = rm_load(&c);
    } else if (!rc) {
        rc = rm_load(&c);
        if (!rc)
            rc = rm_buffers(&c);
        if (!rc)
            rc = rm_inputs(&c);
        if (!rc)
            rc = rm_runs(&c);
        if (!rc)
            rc = rm_outputs(&c);
        if (!rc)
            rm_notes(&c);
    }
    rm_cleanup(&c);
    return rc;
}
