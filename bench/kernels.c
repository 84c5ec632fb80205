/* bench/kernels.c: kiln's linear kernels beside OpenBLAS on the
 * same shapes.
 *
 * Each case is a one-node model (bench_linear_model) that the command
 * line compiles and builds into lib<name>.a; one generated driver links
 * them all with -lopenblas and, per case:
 * 1. fills x (seeded) and w with kiln's random init, so that OpenBLAS
 *    multiplies the same numbers as the kiln library holds (rounded to
 *    bf16 when kiln holds them so: a _bf16 case);
 * 2. runs rounds until the budget is spent: in each, kiln, OpenBLAS (and
 *    for T = 1 a plain read of w's bytes) take a turn in that order. This
 *    host's bandwidth swings with other tenants' load, so the contenders
 *    alternate and neighbours in time see the same machine;
 * 3. a turn calls untimed for a window, then timed for a window, and
 *    gives the time per call of the timed ones. The untimed window lets
 *    the contender's threads wake and the previous one's go to sleep:
 *    idle libgomp workers spin for milliseconds, idle OpenBLAS workers
 *    for about 0.1 s unless told otherwise (driver_env);
 * 4. prints the median over rounds of each one's time per call and of the
 *    ratio OpenBLAS time / kiln time, and how far the results differ.
 * OpenBLAS's functions are declared in the driver, so that no other BLAS's
 * cblas.h (Debian ships the reference one too) can be picked up. */
#include "bench/bench.h"

#include <stdlib.h>
#include <string.h>

void bench_linear_shapes(const Module *m, int64_t (*nk)[2], int *n, int max)
{
    for (int i = 0; i < m->nnodes; i++) {
        const Node *x = m->nodes[i];
        if (x->op != OP_LINEAR || x->in[1]->op != OP_WEIGHT || x->in[1]->rank != 2)
            continue;
        int64_t N = x->in[1]->dims[0], K = x->in[1]->dims[1];
        int seen = 0;
        for (int j = 0; j < *n; j++)
            seen |= nk[j][0] == N && nk[j][1] == K;
        if (!seen && *n < max) {
            nk[*n][0] = N;
            nk[*n][1] = K;
            ++*n;
        }
    }
}

void bench_linear_case(BenchLinear *c, int64_t n, int64_t k, int64_t t)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    c->k = k;
    c->t = t;
    snprintf(c->name, sizeof c->name, "lin_n%lld_k%lld_t%lld", (long long)n, (long long)k,
             (long long)t);
}

void bench_linear_bf16(BenchLinear *c)
{
    c->store = RT_BF16;
    snprintf(c->name, sizeof c->name, "lin_n%lld_k%lld_t%lld_bf16", (long long)c->n,
             (long long)c->k, (long long)c->t);
}

char *bench_linear_model(Arena *a, const BenchLinear *c)
{
    return arena_printf(
        a,
        "{\"format\": \"kiln/1\", \"name\": \"%s\",\n"
        " \"inputs\": [{\"name\": \"x\", \"shape\": [%lld, %lld], \"dtype\": \"f32\"}],\n"
        " \"weights\": [{\"name\": \"w\", \"shape\": [%lld, %lld],\n"
        "              \"init\": {\"random\": {\"seed\": %d, \"scale\": %g}}}],\n"
        " \"state\": [],\n"
        " \"nodes\": [{\"name\": \"y\", \"op\": \"linear\", \"inputs\": [\"x\", \"w\"]}],\n"
        " \"outputs\": [\"y\"]}\n",
        c->name, (long long)c->t, (long long)c->k, (long long)c->n, (long long)c->k, BENCH_LINEAR_SEED,
        BENCH_SCALE);
}

/* ---- OpenBLAS ----------------------------------------------------------- */

static const char openblas_decls[] =
    "/* OpenBLAS (CBLAS enum values of the standard). */\n"
    "enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };\n"
    "void cblas_sgemm(int, int, int, int, int, int, float, const float *, int, const float *,\n"
    "                 int, float, float *, int);\n"
    "void cblas_sgemv(int, int, int, int, float, const float *, int, const float *, int, float,\n"
    "                 float *, int);\n"
    "void openblas_set_num_threads(int);\n"
    "char *openblas_get_config(void);\n";

int bench_openblas(const char *dir, char *config, size_t size, rt_err *err)
{
    char src[4200], exe[4200], out[4200];
    snprintf(src, sizeof src, "%s/openblas.c", dir);
    snprintf(exe, sizeof exe, "%s/openblas", dir);
    snprintf(out, sizeof out, "%s/openblas.out", dir);
    char text[sizeof openblas_decls + 200];
    snprintf(text, sizeof text, "#include <stdio.h>\n%s\nint main(void)\n{\n"
             "    puts(openblas_get_config());\n    return 0;\n}\n", openblas_decls);
    const char *lib[] = {"-lopenblas"};
    rt_err quiet = {0, ""};
    if (cg_write_file(src, text, err))
        return err->code;
    if (bench_compile(src, exe, lib, 1, &quiet))
        return rt_errf(err, RT_EIO, "OpenBLAS not found (-lopenblas does not link): "
                       "install libopenblas-dev (make deps-bench, as root)");
    char *argv[] = {exe, NULL};
    char *got = bench_spawn(argv, NULL, out, NULL) == 0 ? cg_read_file(out, NULL) : NULL;
    if (!got)
        return rt_errf(err, RT_EINTERNAL, "the OpenBLAS probe failed to run");
    snprintf(config, size, "%.*s", (int)strcspn(got, "\n"), got);
    free(got);
    return 0;
}

/* ---- the driver ------------------------------------------------------------ */

/* What every driver holds whatever its cases. */
static const char driver_body[] =
    "static double now(void)\n"
    "{\n"
    "    struct timespec ts;\n"
    "    clock_gettime(CLOCK_MONOTONIC, &ts);\n"
    "    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;\n"
    "}\n"
    "\n"
    "/* kiln's random init (SplitMix64; README, \"The random init\"). */\n"
    "static void fill(float *d, long n, uint64_t state, double scale)\n"
    "{\n"
    "    for (long i = 0; i < n; i++) {\n"
    "        uint64_t z = (state += 0x9E3779B97F4A7C15ull);\n"
    "        z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9ull;\n"
    "        z = (z ^ z >> 27) * 0x94D049BB133111EBull;\n"
    "        z ^= z >> 31;\n"
    "        d[i] = (float)((2.0 * (double)(z >> 40) * 0x1p-24 - 1.0) * scale);\n"
    "    }\n"
    "}\n"
    "\n"
    "/* kiln's bf16 rounding (to nearest even) of finite values, kept as f32. */\n"
    "static void round_bf16(float *d, long n)\n"
    "{\n"
    "    for (long i = 0; i < n; i++) {\n"
    "        uint32_t u;\n"
    "        memcpy(&u, &d[i], sizeof u);\n"
    "        u = (u + 0x7fffu + (u >> 16 & 1)) & 0xffff0000u;\n"
    "        memcpy(&d[i], &u, sizeof u);\n"
    "    }\n"
    "}\n"
    "\n"
    "static int cmp(const void *a, const void *b)\n"
    "{\n"
    "    double x = *(const double *)a, y = *(const double *)b;\n"
    "    return (x > y) - (x < y);\n"
    "}\n"
    "\n"
    "static double median(double *v, int n)\n"
    "{\n"
    "    qsort(v, (size_t)n, sizeof *v, cmp);\n"
    "    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;\n"
    "}\n"
    "\n"
    "static volatile float sink;\n"
    "\n"
    "/* One call of contender `who`: 0 kiln, 1 OpenBLAS, 2 a plain read of w's bytes. */\n"
    "static void call(const Case *c, int who, void *m, const float *x, const float *w,\n"
    "                 const vf *r, float *yk, float *yb)\n"
    "{\n"
    "    if (who == 0 && c->run(m, x, yk))\n"
    "        fprintf(stderr, \"%s: %s\\n\", c->name, c->error(m));\n"
    "    if (who == 1 && c->t == 1)\n"
    "        cblas_sgemv(ROW_MAJOR, NO_TRANS, c->n, c->k, 1.0f, w, c->k, x, 1, 0.0f, yb, 1);\n"
    "    if (who == 1 && c->t > 1)\n"
    "        cblas_sgemm(ROW_MAJOR, NO_TRANS, TRANS, c->t, c->n, c->k, 1.0f, x, c->k, w, c->k,\n"
    "                    0.0f, yb, c->n);\n"
    "    if (who == 2)\n"
    "        sink = read_all(r, (long)c->n * c->k / VW);\n"
    "}\n"
    "\n"
    "/* A turn: calls for WINDOW seconds untimed (the contender's threads wake,\n"
    " * the other's stop spinning), then for WINDOW seconds timed. Seconds per\n"
    " * call. */\n"
    "static double turn(const Case *c, int who, void *m, const float *x, const float *w,\n"
    "                   const vf *r, float *yk, float *yb)\n"
    "{\n"
    "    double t0 = now();\n"
    "    do\n"
    "        call(c, who, m, x, w, r, yk, yb);\n"
    "    while (now() - t0 < WINDOW);\n"
    "    long n = 0;\n"
    "    t0 = now();\n"
    "    do\n"
    "        call(c, who, m, x, w, r, yk, yb), n++;\n"
    "    while (now() - t0 < WINDOW);\n"
    "    return (now() - t0) / (double)n;\n"
    "}\n"
    "\n"
    "/* max |kiln - blas| / max |blas| */\n"
    "static double differ(const float *yk, const float *yb, long n)\n"
    "{\n"
    "    double d = 0, big = 0;\n"
    "    for (long i = 0; i < n; i++) {\n"
    "        double e = fabs((double)yk[i] - yb[i]);\n"
    "        d = e > d || e != e ? e : d;\n"
    "        big = fabs(yb[i]) > big ? fabs(yb[i]) : big;\n"
    "    }\n"
    "    return big > 0 ? d / big : d;\n"
    "}\n"
    "\n"
    "enum { MIN_ROUNDS = 5, MAX_ROUNDS = 1000 };\n"
    "\n"
    "static float *floats(long n)\n"
    "{\n"
    "    return aligned_alloc(64, (size_t)(n / 16 + 1) * 64);\n"
    "}\n"
    "\n"
    "/* Case i: rounds of turns until the budget is spent; one line on stdout. */\n"
    "static int bench(int i, const Case *c, double budget)\n"
    "{\n"
    "    static double t[3][MAX_ROUNDS], ratio[MAX_ROUNDS];\n"
    "    long nx = (long)c->t * c->k, nw = (long)c->n * c->k, ny = (long)c->t * c->n;\n"
    "    int nc = c->t == 1 ? 3 : 2, n = 0;\n"
    "    float *x = floats(nx), *w = floats(nw), *yk = floats(ny), *yb = floats(ny);\n"
    "    vf *r = c->t == 1 ? read_buffer(nw / VW) : NULL;\n"
    "    void *m = c->open();\n"
    "    int bad = m && c->status(m);\n"
    "    if (!x || !w || !yk || !yb || (c->t == 1 && !r) || !m || bad) {\n"
    "        fprintf(stderr, \"%s: %s\\n\", c->name, bad ? c->error(m) : \"out of memory\");\n"
    "        return 1;\n"
    "    }\n"
    "    fill(x, nx, 1, 1.0);\n"
    "    fill(w, nw, SEED, SCALE);\n"
    "    if (c->bf16)\n"
    "        round_bf16(w, nw);\n"
    "    double t0 = now();\n"
    "    for (; n < MAX_ROUNDS && (n < MIN_ROUNDS || now() - t0 < budget); n++) {\n"
    "        for (int who = 0; who < nc; who++)\n"
    "            t[who][n] = turn(c, who, m, x, w, r, yk, yb);\n"
    "        ratio[n] = t[1][n] / t[0][n];\n"
    "    }\n"
    "    double d = differ(yk, yb, ny), read = nc > 2 ? median(t[2], n) : 0.0;\n"
    "    printf(\"case %d rounds %d kiln %.9g blas %.9g read %.9g ratio %.9g diff %.9g\\n\",\n"
    "           i, n, median(t[0], n), median(t[1], n), read, median(ratio, n), d);\n"
    "    fflush(stdout);\n"
    "    c->close(m);\n"
    "    free(x), free(w), free(yk), free(yb), free(r);\n"
    "    return 0;\n"
    "}\n"
    "\n"
    "int main(void)\n"
    "{\n"
    "    int ncases = (int)(sizeof cases / sizeof cases[0]), bad = 0;\n"
    "    omp_set_num_threads(THREADS);\n"
    "    openblas_set_num_threads(THREADS);\n"
    "    for (int i = 0; i < ncases; i++) {\n"
    "        fprintf(stderr, \"kiln: bench: linear n=%d k=%d T=%d%s, kiln vs OpenBLAS \"\n"
    "                \"(%d/%d)...\\n\", cases[i].n, cases[i].k, cases[i].t,\n"
    "                cases[i].bf16 ? \" (bf16 weights)\" : \"\", i + 1, ncases);\n"
    "        bad |= bench(i, &cases[i], BUDGET);\n"
    "    }\n"
    "    return bad;\n"
    "}\n";

/* A case's adapters: its library's typed functions behind the Case
 * table's untyped ones. */
static void adapters(FILE *f, const BenchLinear *c, int i)
{
    const char *s = c->name;
    fprintf(f, "static void *open%d(void) { return %s_open(NULL); }\n", i, s);
    fprintf(f, "static int status%d(void *m) { return %s_status(m); }\n", i, s);
    fprintf(f, "static const char *error%d(void *m) { return %s_error(m); }\n", i, s);
    fprintf(f, "static void close%d(void *m) { %s_close(m); }\n", i, s);
    fprintf(f, "static int run%d(void *m, const float *x, float *y)\n"
               "{\n"
               "    const void *in[] = {x};\n"
               "    void *out[] = {y};\n"
               "    return %s_run(m, in, out);\n"
               "}\n\n", i, s);
}

char *bench_driver(Arena *a, const BenchLinear *c, int n, int threads, double budget)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fprintf(f, "/* kiln bench: kiln's linear kernels beside OpenBLAS on the same shapes,\n"
               " * timed alternately in one process (generated by kiln %s). */\n", KILN_VERSION);
    fprintf(f, "#include <math.h>\n#include <omp.h>\n#include <stdint.h>\n#include <stdio.h>\n"
               "#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "#include \"%s.h\"\n", c[i].name);
    fprintf(f, "\n%s\n%s\n", openblas_decls, bench_read_c);
    fprintf(f, "#define THREADS %d\n#define BUDGET %.9g\n#define WINDOW %.9g\n#define SEED %d\n"
               "#define SCALE %.9g\n\n", threads, budget, BENCH_WINDOW, BENCH_LINEAR_SEED,
            BENCH_SCALE);
    fprintf(f, "typedef struct {\n"
               "    const char *name;\n"
               "    int n, k, t, bf16;\n"
               "    void *(*open)(void);\n"
               "    int (*status)(void *m);\n"
               "    const char *(*error)(void *m);\n"
               "    void (*close)(void *m);\n"
               "    int (*run)(void *m, const float *x, float *y);\n"
               "} Case;\n\n");
    for (int i = 0; i < n; i++)
        adapters(f, &c[i], i);
    fprintf(f, "static const Case cases[] = {\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "    {\"%s\", %lld, %lld, %lld, %d, open%d, status%d, error%d, close%d, run%d},\n",
                c[i].name, (long long)c[i].n, (long long)c[i].k, (long long)c[i].t,
                c[i].store == RT_BF16, i, i, i, i, i);
    fprintf(f, "};\n\n%s", driver_body);
    fclose(f);
    char *text = arena_strdup(a, buf);
    free(buf);
    return text;
}

int bench_parse_driver(const char *text, BenchLinear *c, int n)
{
    int got = 0;
    for (const char *p = text; p && *p;) {
        int i, rounds;
        double kiln, blas, read, ratio, diff;
        if (sscanf(p, "case %d rounds %d kiln %lf blas %lf read %lf ratio %lf diff %lf", &i,
                   &rounds, &kiln, &blas, &read, &ratio, &diff) == 7 && i >= 0 && i < n) {
            got += c[i].rounds == 0;
            c[i].rounds = rounds;
            c[i].kiln = kiln;
            c[i].blas = blas;
            c[i].read = read;
            c[i].ratio = ratio;
            c[i].diff = diff;
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return got == n ? 0 : -1;
}

/* OpenBLAS's idle workers spin for 2^28 TSC ticks (about 0.1 s) before
 * they sleep, longer than a turn's untimed window, and slow the libgomp
 * threads that kiln and the read use (kiln's prefill by 3x at times).
 * 2^21 ticks is under a millisecond: far less than the window, and still
 * far more than the gap between OpenBLAS's back-to-back calls in its own
 * turn, so its timed calls keep their threads awake. */
static const char *const driver_env[] = {"OPENBLAS_THREAD_TIMEOUT=21", NULL};

int bench_kernels_run(const char *dir, BenchLinear *c, int n, int threads, double budget,
                         rt_err *err)
{
    Arena *a = arena_new();
    if (!a)
        return rt_errf(err, RT_EINTERNAL, "out of memory");
    const char *src = arena_printf(a, "%s/driver.c", dir), *exe = arena_printf(a, "%s/driver", dir);
    const char *out = arena_printf(a, "%s/driver.out", dir);
    const char **extra = arena_alloc(a, sizeof *extra * (size_t)(n + 3));
    int nx = 0;
    extra[nx++] = arena_printf(a, "-I%s", dir);
    for (int i = 0; i < n; i++)
        extra[nx++] = arena_printf(a, "%s/lib%s.a", dir, c[i].name);
    extra[nx++] = "-lopenblas";
    char *text = bench_driver(a, c, n, threads, budget);
    int rc = text ? 0 : rt_errf(err, RT_EINTERNAL, "out of memory");
    if (!rc)
        bench_progress("compiling the driver (kiln's %d libraries and -lopenblas)...", n);
    if (!rc)
        rc = cg_write_file(src, text, err);
    if (!rc)
        rc = bench_compile(src, exe, extra, nx, err);
    if (!rc) {
        char *argv[] = {(char *)exe, NULL};
        int st = bench_spawn(argv, driver_env, out, NULL);
        char *got = cg_read_file(out, NULL);
        if (st != 0 || !got || bench_parse_driver(got, c, n))
            rc = rt_errf(err, RT_EINTERNAL, "the kernel driver failed (status %d)", st);
        free(got);
    }
    arena_free(a);
    return rc;
}
