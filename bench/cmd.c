/* bench/cmd.c: `kiln machine` and `kiln bench`, the command line over
 * the other files of bench/ (which generate, build, run and time).
 *
 * kiln machine [--refresh]: this machine's fp32 FMA peak (every core, one
 * core) and read bandwidth, measured once (machine.c) and cached as
 * JSON with the CPU model, the core count and the date; measured again
 * when the CPU or the core count changed, or with --refresh.
 *
 * kiln bench [MODEL ...] (default: every .json of examples/):
 * 1. per model: the passes, then bench_model (model.c): the
 *    reference interpreter, the cc build and the JIT timed, kiln check;
 * 2. every distinct linear shape of the models at T = 40 and T = 1 (and
 *    at T = 1 again with kiln's weights held bf16, --weight-dtype): a
 *    one-node model per case through the passes into a library, and one
 *    driver that times them beside OpenBLAS (kernels.c);
 * 3. tables on stdout, with --json the same for scripts (with the git
 *    revision, the compiler, the CPU, threads, date and load average).
 * Progress on stderr. Percentages are of `kiln machine`'s figures. */
#include "bench/bench.h"
#include "frontend/frontend.h"
#include "passes/passes.h"

#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define BENCH_SEED 1              /* inputs, as `kiln check` and executables seed them */
#define BENCH_TOLERANCE 1e-4      /* docs/design.md's, relative to the reference's max |x| */
#define BENCH_BUDGET 2.0          /* seconds of runs per build of a model */
#define KERNEL_BUDGET 1.0         /* seconds of rounds per linear case */
#define MAX_SHAPES 64

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "kiln: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see kiln bench --help)\n");
    return RT_EUSAGE;
}

/* "2025-11-21T01:23:45Z" */
static void utc_now(char *buf, size_t size)
{
    time_t t = time(NULL);
    struct tm tm;
    strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
}

/* The first line a shell command prints, or `fallback`. */
static void first_line_of(const char *cmd, char *out, size_t size, const char *fallback)
{
    FILE *p = popen(cmd, "r");
    int ok = p && fgets(out, (int)size, p);
    if (p)
        ok &= pclose(p) == 0;
    if (ok)
        out[strcspn(out, "\n")] = 0;
    if (!ok || !out[0])
        snprintf(out, size, "%s", fallback);
}

/* ==== kiln machine ========================================================= */

typedef struct {
    char cpu[256];                /* /proc/cpuinfo's model name */
    int cores;
    char date[32];                /* when measured (UTC) */
    BenchMachine m;
} Host;

static void host_detect(Host *h)
{
    memset(h, 0, sizeof *h);
    char *info = cg_read_file("/proc/cpuinfo", NULL);
    bench_cpu_model(info ? info : "", h->cpu, sizeof h->cpu);
    free(info);
    Machine mc;
    machine_detect(&mc);
    h->cores = mc.cores;
}

/* $XDG_CACHE_HOME/kiln/machine.json, else ~/.cache/kiln/machine.json;
 * NULL when neither variable is set. malloc'd. */
static char *cache_path(void)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char buf[4096];
    if (xdg && xdg[0] == '/')
        snprintf(buf, sizeof buf, "%s/kiln/machine.json", xdg);
    else if (home && *home)
        snprintf(buf, sizeof buf, "%s/.cache/kiln/machine.json", home);
    else
        return NULL;
    return strdup(buf);
}

/* mkdir -p of the directory holding path. */
static int make_parents(const char *path, rt_err *err)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; (p = strchr(p, '/')); p++) {
        *p = 0;
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return rt_errf(err, RT_EIO, "%s: %s", dir, strerror(errno));
        *p = '/';
    }
    return 0;
}

/* The cache when it is well-formed, describes this CPU and was measured
 * the way this kiln measures (its "method"); -1 when not. */
static int cache_load(const char *path, const Host *now, Host *h)
{
    json_t *j = path ? json_load_file(path, 0, NULL) : NULL;
    const char *cpu = NULL, *date = NULL;
    json_int_t bytes = 0;
    Host c = *now;
    int method = 0;
    int ok = j && json_unpack(j, "{s:s, s:i, s:s, s:F, s:F, s:F, s:I, s?i}", "cpu", &cpu,
                              "cores", &c.cores, "date", &date, "fma_peak_gflops", &c.m.peak,
                              "fma_peak_1core_gflops", &c.m.peak1, "read_gbs", &c.m.read,
                              "read_bytes", &bytes, "method", &method) == 0;
    ok = ok && strcmp(cpu, now->cpu) == 0 && c.cores == now->cores && c.m.peak > 0 &&
         c.m.peak1 > 0 && c.m.read > 0 && method == BENCH_MACHINE_METHOD;
    if (ok) {
        snprintf(c.date, sizeof c.date, "%s", date);
        c.m.read_bytes = bytes;
        *h = c;
    }
    json_decref(j);
    return ok ? 0 : -1;
}

static json_t *host_json(const Host *h)
{
    return json_pack("{s:s, s:i, s:s, s:f, s:f, s:f, s:I, s:i}", "cpu", h->cpu, "cores",
                     h->cores, "date", h->date, "fma_peak_gflops", h->m.peak,
                     "fma_peak_1core_gflops", h->m.peak1, "read_gbs", h->m.read, "read_bytes",
                     (json_int_t)h->m.read_bytes, "method", BENCH_MACHINE_METHOD);
}

/* Writes j (and drops it) to path atomically, two-space indented, 6
 * significant digits. The text goes through a memstream: jansson's own
 * allocations are the frontend's (frontend/jansson.c), which also assumes
 * that no other tree is alive while it parses: bench.c builds its trees
 * only before the first model is loaded or after the last. */
static int write_json(const char *path, json_t *j, rt_err *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = j ? open_memstream(&text, &len) : NULL;
    int bad = !f || json_dumpf(j, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
                                         JSON_REAL_PRECISION(6)) != 0;
    if (f) {
        fputc('\n', f);
        bad |= fclose(f) != 0;
    }
    json_decref(j);
    int rc = bad ? rt_errf(err, RT_EINTERNAL, "out of memory") : cg_write_file(path, text, err);
    free(text);
    return rc;
}

/* Streams a buffer 8 times the last-level cache, and at least 256 MiB. */
static int host_measure(Host *h, rt_err *err)
{
    Machine mc;
    machine_detect(&mc);
    int64_t bytes = 8 * mc.l3 > (256 << 20) ? 8 * mc.l3 : (256 << 20);
    char dir[4096];
    if (bench_dir_open(dir, err))
        return err->code;
    int rc = bench_machine(dir, h->cores, bytes, &h->m, err);
    bench_dir_remove(dir);
    utc_now(h->date, sizeof h->date);
    return rc;
}

/* The cached figures, measured (and cached) when missing, stale or
 * refresh; *fresh says which, *where (malloc'd; NULL: not cached) where
 * they are kept. Failing to cache is only a note. */
static int host_get(int refresh, Host *h, int *fresh, char **where, rt_err *err)
{
    Host now;
    host_detect(&now);
    char *path = cache_path();
    *fresh = refresh || cache_load(path, &now, h) != 0;
    int rc = 0;
    if (*fresh) {
        *h = now;
        rc = host_measure(h, err);
        rt_err cache = {0, ""};
        if (!rc && path && (make_parents(path, &cache) || write_json(path, host_json(h), &cache))) {
            fprintf(stderr, "kiln: machine: not cached: %s\n", cache.msg);
            free(path);
            path = NULL;
        }
    }
    *where = path;
    return rc;
}

int bench_machine_figures(rt_machine *mc)
{
    Host now, h;
    host_detect(&now);
    char *path = cache_path();
    int rc = cache_load(path, &now, &h);
    free(path);
    if (!rc)
        *mc = (rt_machine){h.m.peak, h.m.peak1, h.m.read, h.cores};
    return rc;
}

/* Peak GFLOP/s on `threads` threads: one core's times the threads, at
 * most every core's. */
static double host_peak(const Host *h, int threads)
{
    double p = h->m.peak1 * threads;
    return threads >= h->cores || p > h->m.peak ? h->m.peak : p;
}

static void host_print(const Host *h, int fresh, const char *where)
{
    printf("machine: %s, %d cores (%s %s%s%s)\n", h->cpu, h->cores, fresh ? "measured" : "cached,",
           h->date, where ? "; " : "", where ? where : "");
    printf("  fp32 FMA peak, %d threads   %8.1f GFLOP/s\n", h->cores, h->m.peak);
    printf("  fp32 FMA peak, 1 thread    %8.1f GFLOP/s\n", h->m.peak1);
    printf("  read bandwidth, %d threads  %8.1f GB/s  (%lld MiB buffer, median of 10 passes)\n",
           h->cores, h->m.read, (long long)(h->m.read_bytes >> 20));
}

int bench_cmd_machine(int argc, char **argv)
{
    int refresh = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--refresh") == 0) {
            refresh = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: kiln machine [--refresh]\n"
                   "Measures this machine's fp32 FMA peak (every core, one core) and read\n"
                   "bandwidth once with small kernels built by cc, and caches them in\n"
                   "$XDG_CACHE_HOME/kiln/machine.json (else ~/.cache/kiln/machine.json);\n"
                   "kiln bench reports percentages of these. --refresh measures again.\n");
            return 0;
        } else {
            fprintf(stderr, "kiln: unknown option '%s' (see kiln machine --help)\n", argv[i]);
            return RT_EUSAGE;
        }
    }
    Host h;
    int fresh;
    char *where;
    rt_err err = {0, ""};
    int rc = host_get(refresh, &h, &fresh, &where, &err);
    if (rc)
        fprintf(stderr, "kiln: machine: %s\n", err.msg);
    else
        host_print(&h, fresh, where);
    free(where);
    return rc;
}

/* ==== kiln bench: options ================================================== */

typedef struct {
    char **models;
    int nmodels;
    glob_t g;                     /* the default models */
    int repeat;                   /* 0: sized by BENCH_BUDGET */
    int threads;
    const char *json;
    int kernels;
} Opts;

static const char bench_usage[] =
    "usage: kiln bench [MODEL.json ...] [--repeat N] [--threads N] [--json FILE] [--no-kernels]\n"
    "Benchmarks each model (default: every examples/*.json): cc build time, JIT compile\n"
    "time, run times of the reference interpreter, the cc build and the JIT (median, min,\n"
    "max), whether they agree with the reference (kiln check's tolerance), speedup over\n"
    "the reference, GFLOP/s, GB/s and percent of this machine's peaks (kiln machine);\n"
    "then kiln's linear kernels beside OpenBLAS (cblas_sgemm at T = 40, cblas_sgemv at\n"
    "T = 1) on every linear shape of the models, timed alternately in one process.\n"
    "  --repeat N     runs of each build (default: as many as fit in 2 s, 3 to 30)\n"
    "  --threads N    threads of the builds and of OpenBLAS (default: OMP_NUM_THREADS,\n"
    "                 else every core)\n"
    "  --json FILE    also write the results as JSON\n"
    "  --no-kernels   skip the kernels beside OpenBLAS\n"
    "\n"
    "usage: kiln bench MODEL [-p P] [-n N] [-r R] [--threads N] [--json FILE]\n"
    "                  [--weight-dtype T] [--weights FILE] [--no-cache] [build options]\n"
    "A decoder's tokens per second, as llama-bench measures them (the form taken when\n"
    "-p, -n or -r is given or MODEL is a model folder or GGUF file): its program built,\n"
    "then R rounds of ppP (a prompt of P tokens prefilled) and tgN (N tokens drawn\n"
    "one decode step each from an empty cache), after one warm-up; each the second\n"
    "generation of its process, as llama-bench's repetitions find buffers ready;\n"
    "ppP-cold the first, a fresh process's first prompt. Mean and standard\n"
    "deviation of each test's tokens/s, with the machine, threads and weights.\n"
    "  -p P           prompt tokens (default 256; 0: no pp test)\n"
    "  -n N           tokens generated (default 64; 0: no tg test)\n"
    "  -r R           rounds (default 5, at most 100)\n"
    "  --threads N    the program's team (default: every core)\n"
    "  --json FILE    also write the results as JSON\n";

static int positive(const char *opt, const char *v, int *out)
{
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || n < 1 || n > 100000)
        return usage_error("%s takes a whole number from 1 to 100000", opt);
    *out = (int)n;
    return 0;
}

static int parse_bench(Opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->threads = rt_get_threads();
    o->kernels = 1;
    o->models = calloc((size_t)argc, sizeof *o->models);
    if (!o->models)
        return RT_EINTERNAL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--repeat") == 0 || strcmp(a, "--threads") == 0) {
            if (positive(a, v, a[2] == 'r' ? &o->repeat : &o->threads))
                return RT_EUSAGE;
            i++;
        } else if (strcmp(a, "--json") == 0) {
            if (!v)
                return usage_error("%s needs a file", a);
            o->json = argv[++i];
        } else if (strcmp(a, "--no-kernels") == 0) {
            o->kernels = 0;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(bench_usage, stdout);
            return -1;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option '%s'", a);
        } else {
            o->models[o->nmodels++] = argv[i];
        }
    }
    if (!o->nmodels) {
        if (glob("examples/*.json", 0, NULL, &o->g) != 0)
            return usage_error("%s", "no models given and no examples/*.json here");
        free(o->models);
        o->models = o->g.gl_pathv;
        o->nmodels = (int)o->g.gl_pathc;
    }
    return 0;
}

static void free_opts(Opts *o)
{
    if (o->g.gl_pathv)
        globfree(&o->g);
    else
        free(o->models);
}

/* ==== kiln bench: one model ================================================ */

typedef struct {
    const char *file;
    char name[80];                /* the model's; its file's until loaded */
    double passes;                /* seconds through the pipeline */
    BenchModel b;
} Result;

/* The model through every pass, as `kiln build` compiles it (weights of
 * rank >= 2 held as store says). */
static Module *compile_model(Arena *a, const char *file, const char *text, int store,
                             rt_err *err)
{
    Diags d;
    diag_init(&d, a, file);
    int io = 0;
    Module *m = text ? fe_parse(a, file, text, strlen(text), &d) : fe_load(a, file, &d, &io);
    PassCtx cx = {.d = &d, .verify = 0, .weight_store = (Storage)store};
    machine_detect(&cx.machine);
    if (m && pass_pipeline(m, &cx) == 0)
        return m;
    diag_print(&d, stderr);
    rt_errf(err, io ? RT_EIO : RT_EINVAL, "%s", d.n ? d.lines[0] : "the passes failed");
    return NULL;
}

static void time_model(const Opts *o, const char *file, Result *r)
{
    BenchModelOpts mo = {.repeat = o->repeat, .budget = BENCH_BUDGET, .threads = o->threads,
                         .seed = BENCH_SEED, .tol = BENCH_TOLERANCE};
    memset(r, 0, sizeof *r);
    r->file = file;
    r->b.check = -1;
    snprintf(r->name, sizeof r->name, "%s", file);
    Arena *a = arena_new();
    jmp_buf oom;
    if (!a) {
        rt_errf(&r->b.err, RT_EINTERNAL, "out of memory");
        return;
    }
    if (setjmp(oom)) {
        rt_errf(&r->b.err, RT_EINTERNAL, "out of memory");
    } else {
        arena_set_oom(a, &oom);
        bench_progress("compiling %s (passes)...", file);
        double t0 = rt_now();
        Module *m = compile_model(a, file, NULL, RT_F32, &r->b.err);
        r->passes = rt_now() - t0;
        if (m) {
            snprintf(r->name, sizeof r->name, "%s", m->name);
            bench_model(m, &mo, &r->b);
        }
    }
    arena_free(a);
    if (r->b.err.code)
        fprintf(stderr, "kiln: bench: %s: %s\n", r->name, r->b.err.msg);
}

/* ==== kiln bench: the linear kernels beside OpenBLAS ========================= */

typedef struct {
    BenchLinear *c;
    int n;
    char openblas[256];           /* its build string */
    const char *skipped;          /* why the section did not run; NULL: it ran */
    rt_err err;                   /* a failure (not a skip) */
} Kernels;

/* Every distinct (N, K) of the models' linear nodes. */
static int linear_shapes(const Opts *o, int64_t (*nk)[2])
{
    int n = 0;
    for (int i = 0; i < o->nmodels; i++) {
        Arena *a = arena_new();
        Diags d;
        diag_init(&d, a, o->models[i]);
        Module *m = a ? fe_load(a, o->models[i], &d, NULL) : NULL;
        if (m)
            bench_linear_shapes(m, nk, &n, MAX_SHAPES);
        arena_free(a);
    }
    return n;
}

/* The case's model through the passes into dir/lib<name>.a. */
static int build_case(const BenchLinear *c, const char *dir, rt_err *err)
{
    Arena *a = arena_new();
    jmp_buf oom;
    int rc;
    if (!a)
        return rt_errf(err, RT_EINTERNAL, "out of memory");
    if (setjmp(oom)) {
        rc = rt_errf(err, RT_EINTERNAL, "out of memory");
    } else {
        arena_set_oom(a, &oom);
        Module *m = compile_model(a, c->name, bench_linear_model(a, c), c->store, err);
        rc = m ? cg_build_lib(m, dir, &(CgBuild){.quiet = 1}, err) : err->code;
    }
    arena_free(a);
    return rc;
}

static int build_cases(Kernels *ks, const char *dir)
{
    for (int i = 0; i < ks->n; i++) {
        bench_progress("building %s (cc, library; %d/%d)...", ks->c[i].name, i + 1, ks->n);
        if (build_case(&ks->c[i], dir, &ks->err))
            return ks->err.code;
    }
    return 0;
}

static void time_kernels(const Opts *o, Kernels *ks)
{
    static const int64_t ts[] = {40, 1};
    int64_t nk[MAX_SHAPES][2];
    int nshapes = linear_shapes(o, nk);
    char dir[4096] = "";
    memset(ks, 0, sizeof *ks);
    if (!nshapes) {
        ks->skipped = "the models have no linear layers";
        return;
    }
    if (bench_dir_open(dir, &ks->err))
        return;
    bench_progress("looking for OpenBLAS...");
    if (bench_openblas(dir, ks->openblas, sizeof ks->openblas, &ks->err)) {
        ks->skipped = ks->err.msg;
        ks->err.code = 0;
    } else if ((ks->c = calloc(3 * (size_t)nshapes, sizeof *ks->c))) {
        for (int t = 0; t < 3; t++)            /* T = 40, T = 1, T = 1 bf16 weights */
            for (int i = 0; i < nshapes; i++) {
                bench_linear_case(&ks->c[ks->n], nk[i][0], nk[i][1], ts[t > 0]);
                if (t == 2)
                    bench_linear_bf16(&ks->c[ks->n]);
                ks->n++;
            }
        if (!build_cases(ks, dir))
            bench_kernels_run(dir, ks->c, ks->n, o->threads, KERNEL_BUDGET, &ks->err);
    } else {
        rt_errf(&ks->err, RT_EINTERNAL, "out of memory");
    }
    bench_dir_remove(dir);
    if (ks->skipped)
        fprintf(stderr, "kiln: bench: kernels skipped: %s\n", ks->skipped);
    if (ks->err.code)
        fprintf(stderr, "kiln: bench: kernels: %s\n", ks->err.msg);
}

/* ==== kiln bench: tables ======================================================= */

typedef struct {
    char revision[64], cc[256], date[32];
    int dirty;                    /* the checkout has uncommitted changes */
    int threads;
    double load[2];               /* 1-minute load average at the start, at the end */
    Host host;
} Run;

/* The 1-minute load average: other processes on the cores make every
 * figure of a run unreliable, so runs record it. -1 when unknown. */
static double load_average(void)
{
    char *text = cg_read_file("/proc/loadavg", NULL);
    double v = -1;
    if (!text || sscanf(text, "%lf", &v) != 1)
        v = -1;
    free(text);
    return v;
}

/* Seconds as milliseconds to about 4 significant digits. */
static const char *ms(char *buf, double s)
{
    double v = s * 1e3;
    snprintf(buf, 24, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : v >= 1 ? "%.2f" : "%.3f", v);
    return buf;
}

static void model_row(const Run *run, const Result *r, const char *what, const BenchTime *t,
                      const char *build, const char *check)
{
    char a[24], b[24], c[24];
    double gflops = r->b.flops / t->median / 1e9, gbs = r->b.bytes / t->median / 1e9;
    printf("%-20.20s %-9s %9s %9s %9s %9s %4d %7.1fx %8.2f %5.1f %7.2f %5.1f%s%s\n",
           strcmp(what, "reference") ? "" : r->name, what, build, ms(a, t->median), ms(b, t->min),
           ms(c, t->max), t->runs, r->b.ref.median / t->median, gflops,
           100 * gflops / host_peak(&run->host, run->threads), gbs, 100 * gbs / run->host.m.read,
           *check ? "  " : "", check);
}

static void print_models(const Run *run, const Result *r, int n)
{
    printf("%-20s %-9s %9s %9s %9s %9s %4s %8s %8s %5s %7s %5s  %s\n", "model", "run", "build",
           "median ms", "min ms", "max ms", "runs", "speedup", "GFLOP/s", "%peak", "GB/s", "%bw",
           "check");
    for (int i = 0; i < n; i++) {
        if (r[i].b.err.code && !r[i].b.cc.runs) {
            printf("%-20.20s error: %s\n", r[i].name, r[i].b.err.msg);
            continue;
        }
        char b[32], c[32];
        const char *check = r[i].b.check > 0 ? "ok" : r[i].b.check == 0 ? "OFF" : "-";
        snprintf(b, sizeof b, "%.2f s", r[i].b.build);
        snprintf(c, sizeof c, "%.1f ms", r[i].b.compile * 1e3);
        model_row(run, &r[i], "reference", &r[i].b.ref, "-", check);
        model_row(run, &r[i], "cc", &r[i].b.cc, b, "");
        if (r[i].b.jit.runs)
            model_row(run, &r[i], "jit", &r[i].b.jit, c, "");
        if (r[i].b.err.code)
            printf("%-20s error: %s\n", "", r[i].b.err.msg);
    }
    double rt = 0;
    for (int i = 0; i < n; i++)
        rt = r[i].b.build_rt > rt ? r[i].b.build_rt : rt;
    printf("build: the model's own cold cc build (cc: its runtime parts already built, which took "
           "up to %.2f s once; jit: libtcc's compile)\n", rt);
}

static double gflops(const BenchLinear *c, double s) { return 2.0 * c->t * c->n * c->k / s / 1e9; }
/* The weights' bytes a second: 4 an element, 2 held bf16. */
static double wbytes(const BenchLinear *c) { return (c->store == RT_BF16 ? 2.0 : 4.0) * c->n * c->k; }
static double wgbs(const BenchLinear *c, double s) { return wbytes(c) / s / 1e9; }
/* A read of the f32 weights' bytes (the driver's, whatever kiln holds). */
static double rgbs(const BenchLinear *c, double s) { return 4.0 * c->n * c->k / s / 1e9; }
static const char *agree(const BenchLinear *c)
{
    return c->diff <= BENCH_TOLERANCE ? "" : "  (results differ!)";
}

static void print_kernels(const Run *run, const Kernels *ks)
{
    printf("\nlinear kernels y[T,N] = x[T,K] w[N,K]^T: kiln vs %s, %d threads;\n"
           "medians over rounds of alternating turns (%.0f ms of calls untimed, then %.0f ms "
           "timed)\n", ks->openblas, run->threads, BENCH_WINDOW * 1e3, BENCH_WINDOW * 1e3);
    printf("\nprefill, T = 40 (cblas_sgemm)\n%6s %6s %13s %17s %14s %7s\n", "N", "K",
           "kiln GFLOP/s", "OpenBLAS GFLOP/s", "kiln/OpenBLAS", "rounds");
    for (int i = 0; i < ks->n; i++) {
        const BenchLinear *c = &ks->c[i];
        if (c->t > 1)
            printf("%6lld %6lld %13.1f %17.1f %13.2fx %7d%s\n", (long long)c->n, (long long)c->k,
                   gflops(c, c->kiln), gflops(c, c->blas), c->ratio, c->rounds, agree(c));
    }
    printf("\ndecode, T = 1 (cblas_sgemv on f32 weights; read: a plain read of the f32 weights'\n"
           "bytes alongside; bf16: kiln's weights held bf16, OpenBLAS's the same values as f32)\n"
           "%6s %6s %5s %8s %10s %14s %10s %14s %10s %7s\n", "N", "K", "kiln", "weights",
           "kiln GB/s", "OpenBLAS GB/s", "read GB/s", "kiln/OpenBLAS", "kiln/read", "rounds");
    for (int i = 0; i < ks->n; i++) {
        const BenchLinear *c = &ks->c[i];
        char mb[16];
        snprintf(mb, sizeof mb, "%.1f MB", wbytes(c) / 1e6);
        if (c->t == 1)
            printf("%6lld %6lld %5s %8s %10.1f %14.1f %10.1f %13.2fx %9.0f%% %7d%s\n",
                   (long long)c->n, (long long)c->k, c->store == RT_BF16 ? "bf16" : "f32", mb,
                   wgbs(c, c->kiln), rgbs(c, c->blas), rgbs(c, c->read), c->ratio,
                   100 * c->read / c->kiln, c->rounds, agree(c));
    }
}

static void print_all(const Run *run, const Result *r, int n, const Kernels *ks, const Opts *o)
{
    const Host *h = &run->host;
    printf("kiln bench: kiln %s, revision %s%s, %s, %s\n", KILN_VERSION, run->revision,
           run->dirty ? " (with uncommitted changes)" : "", run->cc, run->date);
    printf("machine: %s, %d cores; %d threads; fp32 FMA peak %.1f GFLOP/s (%.1f on 1 core), "
           "read %.1f GB/s (kiln machine, %s)\n", h->cpu, h->cores, run->threads, h->m.peak,
           h->m.peak1, h->m.read, h->date);
    printf("load average %.2f at the start, %.2f at the end\n\n", run->load[0], run->load[1]);
    print_models(run, r, n);
    if (!o->kernels)
        return;
    if (ks->skipped)
        printf("\nlinear kernels vs OpenBLAS: skipped: %s\n", ks->skipped);
    else if (ks->err.code)
        printf("\nlinear kernels vs OpenBLAS: failed: %s\n", ks->err.msg);
    else
        print_kernels(run, ks);
}

/* ==== kiln bench: JSON ========================================================== */

static json_t *time_json(const Result *r, const BenchTime *t, const Run *run)
{
    if (!t->runs)
        return json_null();
    double gf = r->b.flops / t->median / 1e9, gb = r->b.bytes / t->median / 1e9;
    return json_pack("{s:f, s:f, s:f, s:i, s:f, s:f, s:f, s:f, s:f}", "median_ms", t->median * 1e3,
                     "min_ms", t->min * 1e3, "max_ms", t->max * 1e3, "runs", t->runs, "speedup",
                     r->b.ref.median / t->median, "gflops", gf, "gbs", gb, "peak_percent",
                     100 * gf / host_peak(&run->host, run->threads), "bandwidth_percent",
                     100 * gb / run->host.m.read);
}

static json_t *model_json(const Result *r, const Run *run)
{
    static const char *checks[] = {"unknown", "off", "ok"};
    json_t *j = json_pack("{s:s, s:s, s:i, s:f, s:f, s:f, s:f, s:f, s:s}", "file", r->file, "name",
                          r->name, "kernels", r->b.kernels, "flops", r->b.flops, "bytes",
                          r->b.bytes,
                          "passes_ms", r->passes * 1e3, "cc_build_ms", r->b.build * 1e3,
                          "jit_compile_ms", r->b.compile * 1e3, "check", checks[r->b.check + 1]);
    json_object_set_new(j, "cc_runtime_build_ms", json_real(r->b.build_rt * 1e3));
    json_object_set_new(j, "reference", time_json(r, &r->b.ref, run));
    json_object_set_new(j, "cc", time_json(r, &r->b.cc, run));
    json_object_set_new(j, "jit", time_json(r, &r->b.jit, run));
    json_object_set_new(j, "error", r->b.err.code ? json_string(r->b.err.msg) : json_null());
    return j;
}

static json_t *case_json(const BenchLinear *c)
{
    return json_pack("{s:I, s:I, s:I, s:s, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
                     "n", (json_int_t)c->n, "k", (json_int_t)c->k, "t", (json_int_t)c->t,
                     "kiln_weights", c->store == RT_BF16 ? "bf16" : "f32", "rounds",
                     c->rounds, "kiln_ms", c->kiln * 1e3, "openblas_ms", c->blas * 1e3,
                     "kiln_gflops", gflops(c, c->kiln), "openblas_gflops", gflops(c, c->blas),
                     "kiln_weights_gbs", wgbs(c, c->kiln), "openblas_weights_gbs",
                     rgbs(c, c->blas), "read_gbs", c->t == 1 ? rgbs(c, c->read) : 0.0,
                     "ratio", c->ratio, "max_rel_diff", c->diff);
}

static json_t *kernels_json(const Kernels *ks, const Opts *o)
{
    if (!o->kernels)
        return json_null();
    json_t *cases = json_array();
    for (int i = 0; !ks->skipped && !ks->err.code && i < ks->n; i++)
        json_array_append_new(cases, case_json(&ks->c[i]));
    const char *why = ks->skipped ? ks->skipped : ks->err.code ? ks->err.msg : NULL;
    return json_pack("{s:s, s:o, s:o}", "openblas", ks->openblas, "skipped",
                     why ? json_string(why) : json_null(), "cases", cases);
}

static int write_results(const char *path, const Run *run, const Result *r, int n,
                         const Kernels *ks, const Opts *o)
{
    json_t *models = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(models, model_json(&r[i], run));
    json_t *j = json_pack("{s:s, s:s, s:b, s:s, s:s, s:i, s:i, s:s, s:[f, f], s:o, s:f, s:o, s:o}",
                          "kiln", KILN_VERSION, "revision", run->revision, "uncommitted_changes",
                          run->dirty, "cc", run->cc, "cpu", run->host.cpu, "cores",
                          run->host.cores, "threads", run->threads, "date", run->date,
                          "load_average", run->load[0], run->load[1], "machine",
                          host_json(&run->host), "tolerance", BENCH_TOLERANCE, "models", models,
                          "kernels", kernels_json(ks, o));
    rt_err err = {0, ""};
    int rc = write_json(path, j, &err);
    if (rc)
        fprintf(stderr, "kiln: bench: %s\n", err.msg);
    return rc;
}

/* ==== kiln bench MODEL -p P -n N ============================================= */

static json_t *tokens_json(const Host *h, const char *model, const char *weights,
                           const BenchTokensOpts *o, const BenchTokens *r)
{
    char date[32];
    utc_now(date, sizeof date);
    json_t *tests = json_array();
    for (int i = 0; i < r->ntests; i++) {
        const BenchTokensTest *t = &r->test[i];
        if (!t->runs)
            continue;
        json_t *rates = json_array();
        for (int k = 0; k < t->runs; k++)
            json_array_append_new(rates, json_real(t->rate[k]));
        json_array_append_new(tests, json_pack("{s:s, s:I, s:i, s:f, s:f, s:o}", "test", t->name,
                                               "tokens", (json_int_t)t->tokens, "runs", t->runs,
                                               "tokens_per_s", t->mean, "stddev", t->stddev,
                                               "samples", rates));
    }
    return json_pack("{s:s, s:s, s:i, s:s, s:i, s:s, s:o}", "model", model, "weights", weights,
                     "threads", o->threads, "cpu", h->cpu, "cores", h->cores, "date", date,
                     "tests", tests);
}

int bench_cmd_tokens(const BenchTokensOpts *o, const char *model, const char *weights,
                     const char *json)
{
    Host h;
    host_detect(&h);
    rt_machine mc;
    int figures = bench_machine_figures(&mc) == 0;
    BenchTokens r;
    rt_err err = {0, ""};
    int rc = bench_tokens(o, &r, &err);
    if (rc) {
        fprintf(stderr, "kiln: bench: %s\n", err.msg);
        return rc;
    }
    printf("kiln bench: %s, weights %s, %d threads\n", model, weights, o->threads);
    printf("machine: %s, %d cores", h.cpu, h.cores);
    if (figures)
        printf(" (kiln machine: %.1f GFLOP/s fp32 FMA, %.1f GB/s read)", mc.peak, mc.read);
    printf("\n\n%-12s %22s %6s\n", "test", "tokens/s", "runs");
    for (int i = 0; i < r.ntests; i++)
        if (r.test[i].runs)
            printf("%-12s %12.2f ± %7.2f %6d\n", r.test[i].name, r.test[i].mean, r.test[i].stddev,
                   r.test[i].runs);
    if (json && write_json(json, tokens_json(&h, model, weights, o, &r), &err)) {
        fprintf(stderr, "kiln: bench: %s\n", err.msg);
        rc = RT_EIO;
    }
    return rc;
}

/* ==== kiln bench ================================================================ */

static void describe_run(Run *run, const Opts *o)
{
    char cmd[600];
    char changed[8];
    first_line_of("git rev-parse --short HEAD 2>/dev/null", run->revision, sizeof run->revision,
                  "unknown");
    first_line_of("git rev-parse --git-dir >/dev/null 2>&1 && "
                  "{ git diff --quiet HEAD -- 2>/dev/null || echo yes; }",
                  changed, sizeof changed, "");
    run->dirty = strcmp(changed, "yes") == 0;
    snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", cg_cc());
    first_line_of(cmd, run->cc, sizeof run->cc, cg_cc());
    utc_now(run->date, sizeof run->date);
    run->threads = o->threads;
    run->load[0] = load_average();
}

/* 0 when everything ran and every model agrees with the reference. */
static int exit_status(const Result *r, int n, const Kernels *ks)
{
    int rc = ks->err.code;
    for (int i = 0; i < n; i++) {
        int s = r[i].b.err.code ? r[i].b.err.code : r[i].b.check == 0 ? RT_EINVAL : 0;
        rc = s > rc ? s : rc;
    }
    return rc;
}

int bench_cmd_bench(int argc, char **argv)
{
    Opts o;
    int rc = parse_bench(&o, argc, argv);
    if (rc)
        return rc < 0 ? (free_opts(&o), 0) : rc;
    Run run;
    memset(&run, 0, sizeof run);
    describe_run(&run, &o);
    int fresh;
    char *where;
    rt_err err = {0, ""};
    rc = host_get(0, &run.host, &fresh, &where, &err);
    free(where);
    if (rc) {
        fprintf(stderr, "kiln: machine: %s\n", err.msg);
        free_opts(&o);
        return rc;
    }
    Result *r = calloc((size_t)o.nmodels, sizeof *r);
    Kernels ks;
    memset(&ks, 0, sizeof ks);
    if (!r) {
        free_opts(&o);
        return RT_EINTERNAL;
    }
    for (int i = 0; i < o.nmodels; i++)
        time_model(&o, o.models[i], &r[i]);
    if (o.kernels)
        time_kernels(&o, &ks);
    run.load[1] = load_average();
    print_all(&run, r, o.nmodels, &ks, &o);
    rc = exit_status(r, o.nmodels, &ks);
    if (o.json && write_results(o.json, &run, r, o.nmodels, &ks, &o))
        rc = rc ? rc : RT_EIO;
    free(ks.c);
    free(r);
    free_opts(&o);
    return rc;
}
