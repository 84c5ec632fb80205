/* bench/bench.h: what `kiln bench` and `kiln machine` measure with, a
 * table of contents, a section per file. Small C programs are generated
 * here, built by the system cc and run as children; their output is parsed
 * back. Options, tables and the JSON files are the command line's
 * (cmd.c). Nothing here prints but the progress lines said below. */
#ifndef KILN_BENCH_H
#define KILN_BENCH_H

#include "codegen/codegen.h"

/* ---- cmd.c: the commands ------------------------------------------------ */
/* kiln bench [MODEL ...] [options] and kiln machine [--refresh]: exit
 * statuses (RT_*), with their tables on stdout and messages on stderr. */
int bench_cmd_bench(int argc, char **argv);
int bench_cmd_machine(int argc, char **argv);
/* kiln bench MODEL -p P -n N, once the command line has built MODEL's
 * program (o->exe): bench_tokens, then a table on stdout (the machine,
 * threads and weights, described by `weights`, in its header) and with
 * json (not NULL) the same as a JSON file. An exit status. */
typedef struct BenchTokensOpts BenchTokensOpts;
int bench_cmd_tokens(const BenchTokensOpts *o, const char *model, const char *weights,
                     const char *json);
/* The figures `kiln machine` cached for this CPU, without measuring:
 * 0, or -1 when there are none. */
int bench_machine_figures(rt_machine *mc);

/* ---- util.c: statistics, scratch directories, children ---------- */

/* Seconds per call over some runs. */
typedef struct {
    double median, min, max;
    int runs;
} BenchTime;
/* Median, min and max of v[0..n) (sorted in place); n >= 1. */
BenchTime bench_stats(double *v, int n);
/* The line a generated program prints for --repeat N (rt_main):
 * "PROG: N runs: median X ms, min Y ms, max Z ms", found anywhere in
 * text. Returns 0, or -1 when there is none. */
int bench_parse_repeat(const char *text, BenchTime *t);
/* The first "model name" of /proc/cpuinfo's text, spaces squeezed, into
 * out; "unknown" when there is none. */
void bench_cpu_model(const char *cpuinfo, char *out, size_t size);
/* "kiln: bench: ...\n" on stderr. */
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A private directory (mkdtemp under $TMPDIR, else /tmp); removed with
 * everything in it. dir holds at least 4096 bytes. */
int bench_dir_open(char *dir, rt_err *err);
void bench_dir_remove(const char *dir);
/* Runs argv (argv[0] searched in PATH), stdin from /dev/null, stdout and
 * stderr to the files out and errf (NULL: kiln's own; the same path: one
 * file, in the order written), with the "NAME=VALUE" settings of env
 * (NULL-terminated; NULL: none) that kiln's environment does not set
 * already. Returns the exit status, or -1 when it could not start or
 * died of a signal. */
int bench_spawn(char *const *argv, const char *const *env, const char *out, const char *errf);
/* Compiles the C file src into the executable exe with $CC and
 * CG_CFLAGS, then the words of extra (libraries), then -lm. On failure
 * err holds the compiler's first line of complaint. */
int bench_compile(const char *src, const char *exe, const char *const *extra, int nextra,
                     rt_err *err);

/* ---- tokens.c: a decoder's tokens per second, as llama-bench's ------ */

struct BenchTokensOpts {
    const char *exe;             /* the decoder's built program */
    const char *weights;         /* its --weights; NULL: the program's default */
    int64_t vocab;               /* the prompt's ids are 1 + i % (vocab - 1) */
    int64_t prompt, gen;         /* P and N: 0 leaves that test out */
    int reps;                    /* runs of each test, at most BENCH_TOKENS_RUNS */
    int threads;
};
#define BENCH_TOKENS_RUNS 100
typedef struct {
    char name[32];               /* "pp256", "tg64" */
    int64_t tokens;
    int runs;
    double rate[BENCH_TOKENS_RUNS]; /* tokens/s of each run */
    double mean, stddev;
} BenchTokensTest;
typedef struct {
    BenchTokensTest test[3];     /* ppP, tgN, ppP-cold (runs 0: left out) */
    int ntests;
} BenchTokens;
/* A warm-up run, then o->reps rounds of ppP and tgN, alternating, each
 * the second generation of a process, ppP-cold its first (top comment of
 * tokens.c). Progress on stderr. 0, or the status with err
 * set (the program's own first line when it failed). */
int bench_tokens(const BenchTokensOpts *o, BenchTokens *r, rt_err *err);

/* ---- model.c: one compiled model, timed -------------------------- */

typedef struct {
    int repeat;                  /* runs of each build; 0: as many as fit in
                                    `budget` seconds, from 3 to 30 */
    double budget;
    int threads;                 /* of the builds */
    uint64_t seed;               /* of the inputs, as executables seed them */
    double tol;                  /* of cg_check */
} BenchModelOpts;
typedef struct {
    rt_err err;                  /* what failed; code 0: nothing */
    int kernels;
    double flops, bytes;         /* per call */
    double build, compile;       /* seconds: cc (the model, its runtime parts
                                    already built); libtcc (median of 3) */
    double build_rt;             /* seconds cc took on the runtime parts
                                    first (0 when the cache had them) */
    BenchTime ref, cc, jit;      /* per call */
    int check;                   /* 1 within tolerance, 0 not, -1 unknown */
} BenchModel;
/* Times m, compiled through its passes, as the reference interpreter, a
 * cc build and the JIT, and checks the builds (see bench_model.c);
 * progress lines "kiln: bench: ..." on stderr. Returns r->err.code. */
int bench_model(Module *m, const BenchModelOpts *o, BenchModel *r);

/* ---- machine.c: this machine's ceilings ------------------------- */

typedef struct {
    double peak, peak1;          /* fp32 FMA GFLOP/s: every core, one core */
    double read;                 /* GB/s streaming a buffer, every core */
    int64_t read_bytes;          /* ...of this size */
} BenchMachine;
/* Builds the measuring kernels in dir and runs them: independent FMA
 * chains on full vector registers (the best of 10 timed runs of 50 ms or
 * more) and a vector sum over read_bytes in huge pages (the median of 10
 * passes after one to warm up; make it far larger than the last-level
 * cache). Progress lines "kiln: machine: ..." on stderr. */
/* How the figures are measured, kept beside them in kiln machine's cache:
 * a cache of another method is measured again (2: the read in huge pages). */
#define BENCH_MACHINE_METHOD 2
int bench_machine(const char *dir, int cores, int64_t read_bytes, BenchMachine *mc,
                     rt_err *err);
/* The C text both generated programs use for a streaming read: VW, the
 * vector type vf, and `float read_all(const vf *p, long nv)`. */
extern const char bench_read_c[];

/* ---- kernels.c: kiln's linear kernels beside OpenBLAS ----------- */

/* One case: y[t,n] = x[t,k] w[n,k]^T, as a one-node model. */
typedef struct {
    int64_t n, k, t;
    int store;                   /* kiln's weights: RT_F32, or RT_BF16 (--weight-dtype) */
    char name[64];               /* its model's name, lin_n1536_k1536_t40[_bf16] */
    /* measured: seconds per call, medians over the rounds */
    int rounds;
    double kiln, blas;
    double read;                 /* t = 1: a plain read of w's bytes */
    double ratio;                /* median over rounds of blas / kiln time */
    double diff;                 /* max |kiln - blas| / max |blas| */
} BenchLinear;
/* The seed and scale of the cases' random weights; the seconds of each
 * untimed and timed window of a turn (see bench_kernels.c). */
#define BENCH_LINEAR_SEED 7
#define BENCH_SCALE 0.02
#define BENCH_WINDOW 0.02
/* Appends to nk[0..*n) each (N, K) of m's linear nodes whose weight
 * operand is a model weight of rank 2, unless already there (at most
 * max in all). */
void bench_linear_shapes(const Module *m, int64_t (*nk)[2], int *n, int max);
/* Sets c's shape and name. */
void bench_linear_case(BenchLinear *c, int64_t n, int64_t k, int64_t t);
/* Makes c the same case with kiln's weights held bf16 (name + "_bf16"):
 * OpenBLAS multiplies the same values, rounded to bf16, held as f32. */
void bench_linear_bf16(BenchLinear *c);
/* The case as a kiln/1 model file: input x f32[t,k], weight w f32[n,k]
 * (random init, BENCH_LINEAR_SEED and BENCH_SCALE), node y = linear(x, w). */
char *bench_linear_model(Arena *a, const BenchLinear *c);
/* OpenBLAS's build string (openblas_get_config) from a probe linked with
 * -lopenblas in dir; 0, or an RT_* status with err saying it is absent. */
int bench_openblas(const char *dir, char *config, size_t size, rt_err *err);
/* The driver: links every case's lib<name>.a (built by cg_build_lib) and
 * -lopenblas; per case, on `threads` threads, times kiln's call and
 * OpenBLAS's (cblas_sgemm, cblas_sgemv when t = 1; and for t = 1 a plain
 * read of the weights' bytes) in alternating turns, for `budget` seconds
 * (at least 5 rounds, at most 1000); prints one line per case on stdout
 * and one progress line per case on stderr. */
char *bench_driver(Arena *a, const BenchLinear *c, int n, int threads, double budget);
/* Reads the driver's output into c[0..n); 0 when every case has its
 * line, else -1. */
int bench_parse_driver(const char *text, BenchLinear *c, int n);
/* Writes the driver into dir (where cg_build_lib put every case's
 * library), builds it, runs it and reads its output into c[0..n). */
int bench_kernels_run(const char *dir, BenchLinear *c, int n, int threads, double budget,
                         rt_err *err);

#endif
