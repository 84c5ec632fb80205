/* runtime/kiln_rt.h: what generated code calls, a table of contents.
 *
 * The runtime is compiled into kiln (for the reference interpreter's data,
 * `kiln check`, and as symbols handed to libtcc for JIT runs) and pasted as
 * text into every generated C file, which must build with nothing but
 * `cc -O3 -march=native -fopenmp model.c -lm`. So: libc, POSIX and OpenMP
 * (under #ifdef _OPENMP) only; every file compiles in one translation unit
 * with the others (static names unique across files); RT_API is `static`
 * when pasted, so two models link into one program without clashes. A
 * model named P declares P_model, P_open, P_status, P_error, P_run,
 * P_reset, P_close, P_input_names and P_output_names beside this code, so
 * no name here may end that way unless it starts with rt_ or kiln_ (model
 * names the frontend reserves).
 *
 * Status codes are the exit codes of kiln and of generated executables:
 * 0 ok, 1 invalid model/weights/inputs, 2 usage, 3 I/O, 4 internal. */
#ifndef KILN_RT_H
#define KILN_RT_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE 1       /* glibc's madvise and MADV_HUGEPAGE (rt_mem.c) */
#endif
#include <stddef.h>
#include <stdint.h>

#ifndef RT_API
#define RT_API
#endif

enum { RT_OK = 0, RT_EINVAL = 1, RT_EUSAGE = 2, RT_EIO = 3, RT_EINTERNAL = 4 };
enum { RT_F32 = 0, RT_I32 = 1 };                 /* equal to DT_F32, DT_I32 */
enum { RT_BF16 = 2, RT_F16 = 3 };                /* 16-bit storage: ST_BF16, ST_F16 */
enum { RT_INIT_NONE, RT_INIT_FILL, RT_INIT_RANDOM, RT_INIT_DATA };
#define RT_MAX_RANK 6

/* ---- errors (rt_err.c) ------------------------------------------------- */
typedef struct {
    int code;                   /* RT_* status; RT_OK when clear */
    char msg[512];              /* one line, no trailing newline */
} rt_err;
/* Sets e (first error wins: a set error is kept) and returns code. */
RT_API int rt_errf(rt_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Writes a shape as messages show it, "[8960,1536]" ("[]" for rank 0),
 * into buf (160 bytes hold any rank <= 6); returns buf. */
RT_API const char *rt_fmt_shape(char *buf, size_t size, int rank, const int64_t *dims);

/* ---- tensors as a model declares them ---------------------------------- */
typedef struct {
    const char *name;           /* the user's name */
    int dtype;                  /* RT_F32 or RT_I32 */
    int rank;
    int64_t dims[RT_MAX_RANK];
    int64_t count;              /* elements */
    /* weights: how to make it without a weights file */
    int init;                   /* RT_INIT_* */
    double fill;
    uint64_t seed;
    double scale;
    const float *data;          /* RT_INIT_DATA: count elements */
    /* i32 inputs: a seeded value is drawn from [0, hi) (hi >= 1) */
    int64_t hi;
    /* weights: how held in memory: RT_F32, or RT_BF16 / RT_F16 (16 bits
     * a value, rounded once at load, widened exactly where read) */
    int store;
    /* weights: packed at load in panels of this many rows, as
     * rt_pack_panels(nr = panel) lays out [..., N, K]; 0: as the file
     * holds them */
    int64_t panel;
} rt_tensor_info;

/* ---- memory (rt_mem.c) -------------------------------------------------- */
RT_API void *rt_alloc(size_t bytes);           /* 64-byte aligned, zeroed */
RT_API void rt_free(void *p);

/* ---- the documented generator (rt_random.c) ---------------------------- */
/* SplitMix64: state += 0x9E3779B97F4A7C15; z = state; z = (z ^ z>>30) *
 * 0xBF58476D1CE4E5B9; z = (z ^ z>>27) * 0x94D049BB133111EB; z ^ z>>31. */
RT_API uint64_t rt_splitmix64(uint64_t *state);
/* Element i of a random init: u = (x >> 40) * 2^-24, x the (i+1)-th
 * output from state = seed; value = (float)((2u - 1) * scale), uniform in
 * [-scale, scale). */
RT_API void rt_fill_random(float *dst, int64_t n, uint64_t seed, double scale);
/* Seeded input data for benchmarking and `kiln check`: f32 from
 * rt_fill_random(seed', 1.0); i32 element i is x % t->hi, x the (i+1)-th
 * output of the same generator from state = seed';
 * seed' = seed + 1000003 * (index + 1). */
RT_API void rt_seed_input(const rt_tensor_info *t, int index, uint64_t seed, void *dst);

/* ---- safetensors (rt_safetensors.c) ------------------------------------ */
enum { RT_ST_F32, RT_ST_F16, RT_ST_BF16 };
typedef struct {
    char *name;
    int dtype;                  /* RT_ST_* */
    int rank;
    int64_t dims[RT_MAX_RANK];
    int64_t count;
    const unsigned char *data;  /* inside the mapping */
    size_t nbytes;
} rt_st_tensor;
typedef struct rt_safetensors rt_safetensors;
struct rt_safetensors {
    void *map;
    size_t size;
    int n;
    rt_st_tensor *t;
    const char *path;
    rt_safetensors *shards;     /* an index: its shards, open; t lists all
                                   their tensors (map is NULL) */
    int nshards;
};
/* Maps and validates the whole file: header length bounded and within the
 * file, strict JSON, duplicate names refused, known dtypes, offsets inside
 * the data section, no overlaps, bytes = shape x dtype size. Messages are
 * "PATH: TENSOR-OR-FIELD: what is wrong". A path ending in ".json" is an
 * index of shards (model.safetensors.index.json): every shard its
 * weight_map names (files in the index's folder) is opened so, and each
 * must hold exactly the tensors the weight_map gives it; st then lists
 * the tensors of all of them. */
RT_API int rt_st_open(rt_safetensors *st, const char *path, rt_err *e);
RT_API void rt_st_close(rt_safetensors *st);
RT_API const rt_st_tensor *rt_st_find(const rt_safetensors *st, const char *name);
/* Widens F32/F16/BF16 exactly into f32. */
RT_API void rt_st_to_f32(const rt_st_tensor *t, float *dst);
/* Loads every weight: from the file at path when given (every tensor of
 * the file must be a declared weight and every declared weight without an
 * init must be in the file; shapes must agree, naming both), else from its
 * init. dst[i] receives an rt_alloc'd buffer of w[i].count elements held
 * as w[i].store: floats, or 16-bit values (a tensor the file holds in
 * that very type is copied as it is; any other value rounded from its
 * exact f32 value by rt_f32_bf16 / rt_f32_f16). On error nothing stays
 * allocated. */
RT_API int rt_load_weights(const char *path, const rt_tensor_info *w, int nw,
                           void **dst, rt_err *e);

/* ---- 16-bit floats (rt_half.c) ------------------------------------------ */
/* bf16 (the top half of an f32) and IEEE half to f32, exactly: inline,
 * where generated code reads a 16-bit weight. */
static inline float rt_bf16_f32(uint16_t h)
{
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}
static inline float rt_f16_f32(uint16_t h)
{
    union { uint32_t u; float f; } v;
    uint32_t e = h & 0x7c00u;
    v.u = (uint32_t)(h & 0x7fffu) << 13;
    if (e == 0x7c00u)                  /* inf, nan: exponent 255, payload kept */
        v.u += 0x70000000u;
    else if (e)                        /* normal: rebias 15 to 127 */
        v.u += 0x38000000u;
    else {                             /* zero, subnormal: man * 2^-24 */
        v.u += 0x38800000u;
        v.f -= 6.103515625e-05f;       /* 2^-14 */
    }
    v.u |= (uint32_t)(h & 0x8000u) << 16;
    return v.f;
}
/* f32 to bf16 and to IEEE half: to nearest, ties to even; overflow gives
 * inf, a NaN stays a NaN (made quiet, sign kept), subnormals round as
 * any value. */
RT_API uint16_t rt_f32_bf16(float f);
RT_API uint16_t rt_f32_f16(float f);
/* n floats rounded into 16-bit store (RT_BF16, RT_F16). */
RT_API void rt_round_half(uint16_t *dst, const float *src, int64_t n, int store);

/* ---- .npy (rt_npy.c) ---------------------------------------------------- */
typedef struct {
    int dtype;                  /* RT_F32 ('<f4') or RT_I32 ('<i4') */
    int rank;
    int64_t dims[RT_MAX_RANK];
    int64_t count;
    void *data;                 /* malloc'd */
} rt_array;
/* Reads a version 1/2/3 .npy file: '<f4' or '<i4', C order, any rank up
 * to 6; a malformed header or short data is refused. */
RT_API int rt_npy_load(const char *path, rt_array *out, rt_err *e);
/* Reads into dst, which is what t declares (dtype and shape must agree,
 * the message naming both). */
RT_API int rt_npy_read(const char *path, const rt_tensor_info *t, void *dst, rt_err *e);
/* Writes atomically: a temporary file beside path, then rename. */
RT_API int rt_npy_write(const char *path, int dtype, int rank, const int64_t *dims,
                        const void *data, rt_err *e);
/* Writes n bytes to path as rt_npy_write writes a file. */
RT_API int rt_write_file(const char *path, const void *data, size_t n, rt_err *e);

/* ---- threads and time (rt_parallel.c) ---------------------------------- */
/* Calls fn(ctx, lo, hi) on disjoint ranges covering [0, n), on a pool of
 * threads that share the ranges out dynamically (a thread that is late
 * has its share taken by the others), when built with OpenMP; else one
 * call fn(ctx, 0, n). Only for loops whose iterations are independent:
 * which thread runs one must change nothing. */
RT_API void rt_parallel_for(void (*fn)(void *ctx, int64_t lo, int64_t hi),
                            void *ctx, int64_t n);
RT_API void rt_set_threads(int n);
RT_API int rt_get_threads(void);
RT_API double rt_now(void);                    /* seconds, monotonic */

/* ---- per-kernel profiles (rt_profile.c) -------------------------------- */
/* A kernel of a generated program, as kiln named and costed it. */
typedef struct {
    const char *name;           /* from its ops and shapes: gemm_n8960_k1536 */
    double flops, bytes;        /* per call, as the dumps count them */
} rt_kernel_info;
/* The machine's ceilings as `kiln machine` measured them where kiln built
 * the program; zeros when it had none (a profile then has no percentages). */
typedef struct {
    double peak, peak1;         /* fp32 FMA GFLOP/s: every core, one core */
    double read;                /* read bandwidth, GB/s, every core */
    int cores;
} rt_machine;
/* Timers of a profiled run: per kernel its calls, their total time and
 * the last RT_PROFILE_SAMPLES of them (for the median). */
typedef struct rt_profile rt_profile;
#define RT_PROFILE_SAMPLES 1024
/* NULL when out of memory. */
RT_API rt_profile *rt_profile_new(int nkernels, const rt_kernel_info *kernels);
RT_API void rt_profile_free(rt_profile *p);
/* One call of kernel k took `seconds`. */
RT_API void rt_profile_add(rt_profile *p, int k, double seconds);
/* Writes one JSON line per kernel name (kernels that share a name are
 * summed: calls, times, FLOPs, bytes), in program order, to path as
 * rt_write_file does; percentages of mc's figures on `threads` threads,
 * null when mc has none. */
RT_API int rt_profile_write(const rt_profile *p, const rt_machine *mc, int threads,
                            const char *path, rt_err *e);

/* ---- micro-kernels (rt_kernels.c) -------------------------------------- */
/* C[m][n] += A[m][k] B[k][n]: row-major, row strides lda, ldb, ldc in
 * elements, columns contiguous. Each element of C adds its k products in
 * k order, whatever the shape: callers may split rows, columns and k
 * ranges into calls without changing a bit. Fast for n a multiple of 16
 * and m * n <= 256. What `call gemm(...)` statements print as. */
RT_API void rt_gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float *c, int64_t ldc);
/* dot(P, A, B) of the loop IR (ir/ir.h): p[l] = the sum of a[c*lanes + l]
 * b[c*lanes + l] over c in order (fused multiply-adds, from 0), then p[l]
 * += p[l + w] for l < w, w = lanes/2, .., 2; the dot product is p[0] +
 * p[1] (p[0] for one lane). lanes: a power of two dividing n. */
RT_API void rt_dot(int64_t n, int64_t lanes, const float *a, const float *b, float *p);
/* Packs a weight of [batch][n][k] into panels [batch][n/nr][k][nr] (nr
 * divides n), elements of esize bytes (4, or 2 held 16-bit): *w is
 * replaced by a new rt_alloc'd buffer and the old one freed; on failure
 * (out of memory) *w is kept and e set. */
RT_API int rt_pack_panels(void **w, int64_t batch, int64_t n, int64_t k, int64_t nr,
                          int esize, rt_err *e);
/* rt_gemm with B a 16-bit weight (bf16, IEEE half), each element widened
 * exactly as it is read: the same sums as rt_gemm on the widened B. */
RT_API void rt_gemm_bf16(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const uint16_t *b, int64_t ldb, float *c, int64_t ldc);
RT_API void rt_gemm_f16(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                        const uint16_t *b, int64_t ldb, float *c, int64_t ldc);

/* ---- exp and tanh that vectorise ---------------------------------------- */
/* What generated code computes exp, tanh and sigmoid with (libm's expf
 * and tanhf are calls cc cannot vectorise, and tanhf is slow): branch-free
 * inline C that cc vectorises, within 1.2 ulp (exp) and 2.1 ulp (tanh) of
 * the exact values (tests/unit/test_math.c sweeps them against libm's
 * double exp and tanh); inf, NaN, overflow, underflow to subnormals and 0,
 * and the sign of zero as libm gives them.
 * exp: e^x = 2^n e^r, n = x / ln 2 rounded (in the low bits of x log2 e +
 * 1.5 * 2^23), r = x - n ln 2 with ln 2 in two parts (Cody and Waite; the
 * first holds 9 bits, so n times it is exact), e^r by Taylor to r^7 (|r|
 * <= ln 2 / 2; each 1/k! rounded to f32), times 2^(n/2) and 2^(n - n/2),
 * each a normal float, so a subnormal result is rounded once more at
 * most. x is clamped to [-104, 88.8] first, past which the result is 0 or
 * inf anyway.
 * tanh: of |x| < 0.5, Taylor to x^17 (coefficients rounded to f32); else
 * 1 - 2 / (e^2|x| + 1), |x|
 * clamped to 10 (tanh 10 is 1 in f32); the sign of x put back last. */
typedef union { float f; uint32_t u; } rt_bits;
static inline float rt_expf(float x)
{
    float c = x > 88.8f ? 88.8f : x < -104.0f ? -104.0f : x;   /* a NaN stays */
    rt_bits t = {c * 1.44269504f + 12582912.0f}, s1, s2;
    float n = t.f - 12582912.0f;
    int32_t k = (int32_t)(t.u - 0x4b400000u), k1 = k / 2, k2 = k - k1;
    float r = c - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666679f +
              r * (0.00833333377f + r * (0.00138888892f + r * 0.000198412701f))))));
    s1.u = (uint32_t)(k1 + 127) << 23;
    s2.u = (uint32_t)(k2 + 127) << 23;
    return p * s1.f * s2.f;
}
static inline float rt_tanhf(float x)
{
    rt_bits v = {x}, a;
    a.u = v.u & 0x7fffffffu;
    float z = a.f * a.f;
    float p = a.f + a.f * z * (-0.333333343f + z * (0.13333334f + z * (-0.0539682545f +
              z * (0.0218694881f + z * (-0.00886323582f + z * (0.00359212793f +
              z * (-0.00145583437f + z * 0.000590027426f)))))));   /* -1/3, 2/15, -17/315, .. */
    float e = rt_expf(2.0f * (a.f > 10.0f ? 10.0f : a.f));
    rt_bits y = {a.f < 0.5f ? p : 1.0f - 2.0f / (e + 1.0f)};
    y.u |= v.u & 0x80000000u;
    return y.f;
}

/* ---- vector programs (rt_vec.c) ----------------------------------------- */
/* libtcc does not vectorise, so JIT code hands each innermost loop nest
 * of f32 arithmetic to rt_vec: a program over the nest's iteration space,
 * evaluated in blocks of RT_VEC_B elements, one instruction over a whole
 * block at a time, by loops cc vectorised. The numbers are those of the
 * scalar loops as the cc build computes them: every element goes through
 * the same operations in the same order (x * y + z fused, as cc contracts
 * it; rt_expf, rt_tanhf as the C calls them, libm the other functions);
 * reductions into a scalar (RT_V_RED) add element by element in loop
 * order; a store's elements are written in loop order. codegen/vec.c says
 * which nests qualify (a block must read no element the block stores but
 * at that element) and writes the program:
 *   code[0..4]  levels L (1..RT_VEC_LEVELS), pointers P, registers R,
 *               insns I, rows a block at most (0: as many as fit)
 *   then per pointer: its storage (RT_F32, RT_BF16, RT_F16), then its
 *               stride in elements at each level, outermost first
 *   then I instructions of 5: op, d, a, b, c
 * Registers are blocks of floats; a bool is 1.0f or 0.0f. ptr[p] is the
 * pointer's element at the nest's first iteration; n[l] the trip count of
 * level l; scal[j] the loop-invariant values. */
#define RT_VEC_B 2048
#define RT_VEC_LEVELS 4
#define RT_VEC_REGS 16
#define RT_VEC_INSNS 256         /* instructions a program at most */
enum {
    RT_V_SCAL,      /* d = scal[a] (run once, before the first block) */
    RT_V_LD,        /* d = *ptr[a] */
    RT_V_ST,        /* *ptr[a] op= reg b, op c: 0 =, 1 +=, 2 max=, 3 += b * d (fused) */
    RT_V_RED,       /* the float at ptr[a] op= each element of b in turn (c: 1 +, 2 max) */
    RT_V_MOV,       /* d op= a, op b as RT_V_ST's */
    RT_V_ADD, RT_V_SUB, RT_V_MUL, RT_V_DIV, RT_V_MAX, RT_V_MIN,   /* d = a op b */
    RT_V_LT, RT_V_LE, RT_V_GT, RT_V_GE, RT_V_EQ, RT_V_NE, RT_V_AND, RT_V_OR,
    RT_V_NEG, RT_V_ABS, RT_V_EXP, RT_V_LOG, RT_V_SQRT, RT_V_RSQRT,   /* d = op a */
    RT_V_TANH, RT_V_ERF, RT_V_SIGMOID, RT_V_COS, RT_V_SIN, RT_V_NOT,
    RT_V_SEL,       /* d = a != 0 ? b : c */
    RT_V_FMA,       /* d = a * b + c, fused (as cc contracts it) */
    RT_V_PAIR,      /* RT_V_PAIR + 4 i + j: d = (a OPi b) OPj c, OP0..3 + - * /,
                       rounded after each, never with i = 2 and j < 2 */
    RT_V_PAIR_LAST = RT_V_PAIR + 15,
    RT_V_OUT,       /* the next instruction's d is pointer a's block where that
                       is one contiguous f32 run (a store of d there then
                       moves nothing) */
    RT_V_COUNT
};
RT_API void rt_vec(const int64_t *code, void *const *ptr, const float *scal, const int64_t *n);

/* ---- a model, as generated code describes it (rt_main.c) --------------- */
typedef struct {
    const char *name;
    int ninputs, noutputs, nweights, nstates;
    const rt_tensor_info *inputs, *outputs, *weights, *states;
    /* open never returns NULL but when out of memory; check status */
    void *(*open)(const char *weights_path);
    int (*status)(const void *h);              /* RT_* code of last error */
    const char *(*error)(const void *h);       /* its message, or NULL */
    int (*run)(void *h, const void *const *in, void *const *out);
    void (*close)(void *h);
    /* profiles: the kernels in the order run calls them; profile attaches
     * timers to an open model (NULL detaches them), which run then fills;
     * machine: the figures the percentages are of */
    int nkernels;
    const rt_kernel_info *kernels;
    void (*profile)(void *h, rt_profile *p);
    rt_machine machine;
    /* a decoder (tokens, positions -> logits) built with its prefill
     * variant: run_chunk runs `chunk` tokens a call over the same weights
     * and state (chunk 0, run_chunk NULL: none; rt_generate.c) */
    int chunk;
    int (*run_chunk)(void *h, const void *const *in, void *const *out);
    void (*reset)(void *h);                    /* zeroes the state */
    const char *usage;  /* the command --help names (NULL: argv[0]) */
} rt_model;

/* The thin main of every generated executable, and of `kiln run`:
 *   PROG [--weights W.safetensors] [--input NAME=F.npy]... [--output NAME=F.npy]...
 *        [--repeat N] [--threads N] [--seed S] [--profile FILE] [--help]
 * Inputs not given are seeded (said on stderr). Outputs not written to a
 * file are summarised on stdout. --profile times every kernel call and
 * writes rt_profile_write's lines. Returns an RT_* status. */
RT_API int rt_main(int argc, char **argv, const rt_model *md);

/* ---- generation (rt_generate.c, rt_sample.c) --------------------------- */
/* `PROG generate ...` (argv[1] is "generate"; rt_main hands it over): a
 * decoder model prefills a prompt in chunks and draws tokens one by one,
 * printing them; rt_generate.c's comment gives the options and the
 * algorithm. Returns an RT_* status. */
RT_API int rt_generate(int argc, char **argv, const rt_model *md);
/* A coin in [0, 1): (x >> 11) * 2^-53, x the next rt_splitmix64 output. */
RT_API double rt_sample_coin(uint64_t *state);
/* The index of the largest of n logits; the lowest among equals. */
RT_API int rt_sample_argmax(const float *logits, int n);
/* The next token: the argmax when temperature is 0, else drawn from
 * softmax(logits / temperature) cut to its top-p nucleus (topp in (0, 1);
 * 0 or 1: all), one rt_sample_coin from state; rt_sample.c says how.
 * logits is overwritten with the probabilities; scratch holds 8 n bytes. */
RT_API int rt_sample(float *logits, int n, double temperature, double topp, uint64_t *state,
                     void *scratch);

/* ---- the decode steps' team size (rt_gov.c) ----------------------------- */
/* How many threads generate's decode steps run on, decided from their
 * times (without --threads): rt_gov.c gives the rules. The caller sets
 * the team (rt_set_threads) to what rt_gov_next says. */
#define RT_GOV_TRIAL 4                  /* steps a trial runs; steps a median takes */
#define RT_GOV_SLOW 1.5                 /* median / best past this: something took a core */
#define RT_GOV_GAIN 0.9                 /* a trial wins below this share of the steps before */
#define RT_GOV_WAIT 8                   /* steps between trials, doubled by each lost one */
#define RT_GOV_WAIT_MAX 256
typedef struct {
    int on;                             /* 0: fixed (--threads, or one thread) */
    int most, cur, trial;               /* sizes: all threads, current, on trial (0: none) */
    double best;                        /* fastest step at cur */
    double last[RT_GOV_TRIAL], tried[RT_GOV_TRIAL];   /* the last steps at cur; the trial's */
    int nlast, ntried;
    int64_t since, wait;                /* steps since the last trial; before the next */
    int64_t fewer;                      /* steps run with fewer threads than the most */
} rt_gov;
/* most: the threads a step may use; fixed: the size may not change. */
RT_API void rt_gov_init(rt_gov *gv, int most, int fixed);
/* The team size the next step runs at: the current one, or a trial's. */
RT_API int rt_gov_next(rt_gov *gv);
/* Takes the time t (seconds, or any one unit) of the step just run at the
 * size rt_gov_next gave. */
RT_API void rt_gov_took(rt_gov *gv, double t);

/* ---- tokenizers (rt_tokenizer.c, _hf.c, _vocab.c, _bpe.c, _sp.c) -------- */
/* Text to token ids and back, for generation. The format is told by the
 * file's content: llama2.c's tokenizer.bin, encoded as its run.c does
 * (byte fallback, then merges by score), or a Hugging Face tokenizer.json
 * with a BPE model: byte-level as GPT-2's and Qwen2's (added tokens, the
 * pre-tokenizer's split, then merges by rank), or SentencePiece-style as
 * Llama 2's and Mistral's (added tokens, spaces as U+2581, characters
 * with byte fallback, then merges by rank). rt_tokenizer.c's comment
 * gives the formats and what is checked; rt_tokenizer_bpe.c's and
 * rt_tokenizer_sp.c's what is approximated. */
typedef struct rt_tok rt_tok;
/* Reads and checks the whole file; *tok is NULL on error. A malformed
 * file is refused with one line "PATH: what is wrong". */
RT_API int rt_tok_open(const char *path, rt_tok **tok, rt_err *e);
RT_API void rt_tok_close(rt_tok *t);
/* Ids are [0, rt_tok_size). BOS and EOS: -1 when the tokenizer has none
 * (llama2.c: 1 and 2; tokenizer.json: BOS is the token its post-processor
 * puts before the text, EOS the added token <|endoftext|> (GPT-2, Qwen2),
 * DeepSeek-R1-Distill's end of sentence, Llama 3's <|end_of_text|>, or
 * Llama 2's and Mistral's </s>). */
RT_API int rt_tok_size(const rt_tok *t);
RT_API int rt_tok_bos(const rt_tok *t);
RT_API int rt_tok_eos(const rt_tok *t);
/* Whether generation ends at token id: EOS, or with a tokenizer.json any
 * other end of a text or of a chat turn it has (<|im_end|>, Llama 3's
 * <|eot_id|> and <|eom_id|>, Phi-3's <|end|>, Gemma's <end_of_turn>), as
 * these models' generation configs list them. */
RT_API int rt_tok_is_end(const rt_tok *t, int id);
/* The id of the token whose text is exactly `text` (e.g. "<|im_end|>"),
 * or -1. */
RT_API int rt_tok_find(const rt_tok *t, const char *text);
/* Encodes text (tokenizer.json: valid UTF-8) into ids[0, *n), with BOS
 * first when add_bos and the tokenizer has one. At most cap ids: a text
 * of more tokens is refused ("the text is N tokens, more than CAP", or
 * before encoding when its length alone says so); it never has more than
 * strlen(text) + 2, or with a SentencePiece-style tokenizer.json (where a
 * space is the three bytes of U+2581, each of which may fall back to a
 * byte token, and each stretch of text between added tokens may get one
 * more U+2581 first) 6 * strlen(text) + 1. */
RT_API int rt_tok_encode(const rt_tok *t, const char *text, int add_bos, int32_t *ids, int cap,
                         int *n, rt_err *e);
/* The text to print for token id, generated after prev_id (-1 for none):
 * its bytes (llama2.c: a byte token's byte; after BOS without its leading
 * space, as run.c; SentencePiece-style tokenizer.json: as its decoder
 * says, rt_tokenizer_sp.c), less the end of a UTF-8 character that the next
 * tokens complete, which is held back and printed with them. NUL bytes
 * and ids outside [0, size) give nothing. Valid until the next call. */
RT_API const char *rt_tok_decode_piece(rt_tok *t, int prev_id, int id);
/* What is held back at the end of a text (an incomplete character, as
 * bytes); decoding then starts afresh. Valid until the next call. */
RT_API const char *rt_tok_decode_flush(rt_tok *t);

/* ---- internal: what runtime files share (not for generated code) ---- */

/* Strict JSON read in place (rt_json.c): each reader walks its own
 * grammar with these, so its messages name things in its terms. The text
 * must be valid UTF-8 (rt_utf8_bad). Every function skips whitespace
 * first, consumes what it reads and returns 0, or sets e and returns the
 * status: syntax is "PATH: PART: invalid JSON at byte N: what" (PART
 * left out when NULL), RT_EINVAL; out of memory, RT_EINTERNAL. */
typedef struct {
    const unsigned char *p, *start, *end; /* next byte; the text */
    const char *path;                     /* the file, first in messages */
    const char *part;                     /* which text: "header"; or NULL */
    rt_err *e;
} rt_json;
RT_API int rt_json_syntax(rt_json *J, const char *what);
RT_API int rt_json_oom(rt_json *J);
RT_API void rt_json_ws(rt_json *J);
/* Consumes c, or the word (true, false, null); 0 when it was there,
 * 1 (nothing set) when not. */
RT_API int rt_json_eat(rt_json *J, int c);
RT_API int rt_json_literal(rt_json *J, const char *word);
/* A string, malloc'd into *out (NULL on error); "\u0000" is refused. */
RT_API int rt_json_string(rt_json *J, char **out);
/* A number that must be an integer in [0, 2^63): otherwise
 * "PATH: WHAT: TEXT is not a non-negative integer" (or "is too large"). */
RT_API int rt_json_uint(rt_json *J, const char *what, int64_t *v);
/* Inside an object or array after its bracket: 1 when an item follows
 * (the comma consumed), 0 at the closing bracket `close`, -1 with e set
 * on anything else. Loop: for (first = 1; (more = next(..)) != 0; first = 0). */
RT_API int rt_json_next(rt_json *J, int close, int first);
/* Any value, checked and skipped; nesting deeper than 32 is refused. */
RT_API int rt_json_skip(rt_json *J);
/* Values kept in place: a reader may note where a value starts (at) and
 * read it later through a cursor rt_json_at(J, at) of the same text, so
 * that an object's keys can come in any order. Messages of meaning are
 * "PATH: WHERE: what" (rt_json_bad; "PATH: what" when WHERE is ""). */
RT_API rt_json rt_json_at(const rt_json *J, const unsigned char *at);
RT_API int rt_json_bad(const rt_json *J, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An object whose keys are among keys[nkeys], each at most once: where
 * each value starts into val[] (NULL when absent). Another key is refused:
 * "WHERE: unknown key 'K' (refused rather than ignored)". */
RT_API int rt_json_object(rt_json *J, const char *where, const char *const *keys, int nkeys,
                          const unsigned char **val);
RT_API int rt_json_object_at(const rt_json *J, const unsigned char *at, const char *where,
                             const char *const *keys, int nkeys, const unsigned char **val);
/* 1 when the value at `at` is null, or at is NULL (absent). */
RT_API int rt_json_null_at(const rt_json *J, const unsigned char *at);
RT_API int rt_json_string_at(const rt_json *J, const unsigned char *at, char **s);
/* true or false into *v (kept when at is NULL); rt_json_false_at refuses
 * true: "WHERE: KEY: true is not supported". */
RT_API int rt_json_bool_at(const rt_json *J, const unsigned char *at, const char *where,
                           const char *key, int *v);
RT_API int rt_json_false_at(const rt_json *J, const unsigned char *at, const char *where,
                            const char *key);
/* The string member "type" of the object at `at` (malloc'd into *type). */
/* The array at `at` (NULL: "WHERE: not an array"): where each of its first
 * max items starts into item[], how many it holds in *n (more than max
 * are counted, not noted); and the "type" of each of item[0, n) into
 * type[] (malloc'd; messages at WHERE[i]). */
RT_API int rt_json_items(const rt_json *J, const unsigned char *at, const char *where, int max,
                         const unsigned char **item, int *n);
RT_API int rt_json_types(const rt_json *J, const unsigned char **item, int n, const char *where,
                         char **type);
RT_API int rt_json_type_at(const rt_json *J, const unsigned char *at, const char *where,
                           char **type);
/* Offset of the first byte of s[0, n) that is not well-formed UTF-8, or n. */
RT_API size_t rt_utf8_bad(const unsigned char *s, size_t n);
/* Writes code point cp (< 0x110000) as UTF-8 at o; returns the end. */
RT_API char *rt_utf8_put(char *o, unsigned cp);
/* A regular file of at most max bytes, read whole into *data (malloc'd,
 * NUL-terminated, *len bytes). Messages: "PATH: cannot read: why" (RT_EIO),
 * "PATH: larger than the limit of MAX bytes" (RT_EINVAL). */
RT_API int rt_read_file(const char *path, uint64_t max, char **data, size_t *len, rt_err *e);

/* rt_st_open's two halves: one safetensors file (rt_safetensors.c), and an
 * index of shards, a path ending in .json (rt_safetensors_index.c). */
RT_API int rt_st_open_file(rt_safetensors *st, const char *path, rt_err *e);
RT_API int rt_st_open_index(rt_safetensors *st, const char *path, rt_err *e);

/* A tokenizer as its three files share it (the API above). Tokens are
 * byte strings; a hash table finds them by their bytes. */
enum { RT_TOK_LLAMA2C, RT_TOK_BPE };             /* formats */
enum { RT_TOK_ENDS = 16 };
enum { RT_TOK_SPLIT_GPT2, RT_TOK_SPLIT_QWEN2, RT_TOK_SPLIT_LLAMA3 }; /* pre-tokenizers */
/* A Digits pre-tokenizer before the split: none, each number character
 * a piece of its own (individual_digits), or each run of them. */
enum { RT_TOK_DIGITS_NONE, RT_TOK_DIGITS_EACH, RT_TOK_DIGITS_RUNS };
/* How a tokenizer.json's text meets its tokens: as bytes (ByteLevel), or
 * with spaces as U+2581, which goes first in each stretch of text between
 * added tokens: always (a Prepend normalizer), unless the stretch starts
 * with one (Metaspace's "always"), only in the stretch at the text's
 * start (its "first"), or never. */
enum { RT_TOK_BYTES, RT_TOK_SP_PREPEND, RT_TOK_SP_ALWAYS, RT_TOK_SP_FIRST, RT_TOK_SP_NEVER };
/* What a SentencePiece-style decoder does: U+2581 becomes a space; a byte
 * token <0xBB> its byte; the text's first space is dropped (Strip after
 * Fuse); the first token's U+2581 are dropped (Metaspace). */
enum { RT_TOK_DEC_SPACE = 1, RT_TOK_DEC_BYTES = 2, RT_TOK_DEC_STRIP = 4, RT_TOK_DEC_FIRST = 8 };
/* An added token takes the spaces before it (lstrip) or after it (rstrip)
 * with it: they are not encoded. */
enum { RT_TOK_LSTRIP = 1, RT_TOK_RSTRIP = 2 };
typedef struct {
    int32_t a, b, rank, id;     /* tokens a, b merge into id; a = -1: empty slot */
} rt_tok_merge;
struct rt_tok {
    int format;                 /* RT_TOK_* */
    int n;                      /* tokens: ids [0, n) */
    char *bytes;                /* their bytes, each NUL-terminated */
    uint32_t *off, *len;        /* token i: bytes + off[i], len[i] bytes */
    uint32_t maxlen;            /* the longest */
    int32_t *slot;              /* hash of the tokens' bytes: ids, -1 empty */
    uint32_t mask;              /* slots - 1 */
    int bos, eos;               /* -1: none */
    int32_t ends[RT_TOK_ENDS];  /* the tokens generation ends at (rt_tok_is_end):
                                   EOS among them */
    int nends;
    float *score;               /* llama2.c: merges by score, highest first */
    /* byte-level BPE (tokenizer.json) */
    int split;                  /* RT_TOK_SPLIT_* */
    int digits;                 /* RT_TOK_DIGITS_*: numbers cut out first */
    int ignore_merges;          /* a piece that is a token is taken whole */
    int32_t byte_id[256];       /* the token of each byte */
    rt_tok_merge *merge;        /* hash of (a, b); mmask + 1 slots */
    uint32_t mmask;
    int32_t *added;             /* added tokens, matched whole first */
    unsigned char *strip;       /* each one's RT_TOK_LSTRIP | RT_TOK_RSTRIP */
    int nadded;
    /* SentencePiece-style BPE (tokenizer.json, rt_tokenizer_sp.c) */
    int space;                  /* RT_TOK_BYTES or RT_TOK_SP_* */
    int sp_split;               /* a piece starts at each U+2581 (Metaspace's split) */
    int byte_fallback;          /* a character with no token: its bytes' <0xBB> tokens */
    int unk, fuse_unk;          /* else unk (-1: none, the text is refused), a run once */
    int dec;                    /* RT_TOK_DEC_* */
    char *piece;                /* a token's decoded text, maxlen + 1 bytes */
    /* decoding */
    unsigned char held[4];      /* the start of an incomplete character */
    int nheld;
    char *out;                  /* what rt_tok_decode_* returns */
};
/* rt_tokenizer.c: the id of the token whose bytes are a then b, or -1.
 * rt_tok_index hashes the tokens, rt_tok_set_merges the n merges (copied;
 * a = -1 never); each returns 0, -1 when out of memory, or 1 when two
 * are the same (tokens' bytes; merges' a and b), which are dup[0] < dup[1]
 * (ids; indexes into the list). */
RT_API int rt_tok_lookup(const rt_tok *t, const char *a, size_t na, const char *b, size_t nb);
RT_API int rt_tok_index(rt_tok *t, int dup[2]);
RT_API int rt_tok_set_merges(rt_tok *t, const rt_tok_merge *list, int n, int dup[2]);
/* The merge of tokens a and b, or NULL. */
RT_API const rt_tok_merge *rt_tok_merge_find(const rt_tok *t, int32_t a, int32_t b);
/* rt_tokenizer_hf.c: fills t from tokenizer.json's text (valid UTF-8);
 * rt_tokenizer_vocab.c: its tokens, from the model (at model) and the
 * added tokens (at added, or NULL), then t->slot, byte_id and merge. */
RT_API int rt_tok_read_hf(rt_tok *t, const char *path, const char *text, size_t len, rt_err *e);
RT_API int rt_tok_read_vocab(rt_tok *t, const rt_json *J, const unsigned char *model,
                             const unsigned char *added);
/* rt_tokenizer_bpe.c: rt_tok_encode of a tokenizer.json: ids[0, *n) of
 * text (room for as many ids as rt_tok_encode promises at most); and
 * ids[0, n) merged by rank (pair: room for n), the new n. */
RT_API int rt_tok_encode_bpe(const rt_tok *t, const char *text, int add_bos, int32_t *ids,
                             int *n, rt_err *e);
RT_API int rt_tok_merge_ids(const rt_tok *t, int32_t *ids, int n, const rt_tok_merge **pair);
/* rt_tokenizer_sp.c: a SentencePiece-style tokenizer.json's normalizer
 * (a Sequence), pre-tokenizer (Metaspace) and decoder, read into t; the
 * tokens of the stretch s[0, n) between added tokens appended at
 * ids[*k] (at_start: it starts the text; norm and pair: room for
 * 3 * n + 3); and token id's decoded text, in t->piece: its length. */
RT_API int rt_tok_sp_normalizer(rt_tok *t, const rt_json *J, const unsigned char *at);
RT_API int rt_tok_sp_pre(rt_tok *t, const rt_json *J, const unsigned char *at);
/* A Split by " " after the normalizer made every space U+2581: checked,
 * and it does nothing (Gemma's). */
RT_API int rt_tok_sp_split(const rt_json *J, const unsigned char *at);
RT_API int rt_tok_sp_decoder(rt_tok *t, const rt_json *J, const unsigned char *at);
RT_API int rt_tok_sp_encode(const rt_tok *t, const char *s, size_t n, int at_start, int32_t *ids,
                            int *k, char *norm, const rt_tok_merge **pair, rt_err *e);
RT_API size_t rt_tok_sp_decode(rt_tok *t, int prev_id, int id);

/* Every runtime symbol generated code may call: the JIT hands these to
 * libtcc (X(name) per function). */
#define RT_SYMBOLS(X)                                                       \
    X(rt_errf) X(rt_alloc) X(rt_free) X(rt_splitmix64) X(rt_fill_random)    \
    X(rt_seed_input) X(rt_st_open) X(rt_st_close) X(rt_st_find)             \
    X(rt_st_to_f32) X(rt_load_weights) X(rt_npy_load) X(rt_npy_read)        \
    X(rt_npy_write) X(rt_parallel_for) X(rt_set_threads) X(rt_get_threads)  \
    X(rt_now) X(rt_main) X(rt_gemm) X(rt_gemm_bf16) X(rt_gemm_f16) X(rt_vec) X(rt_dot) \
    X(rt_pack_panels) X(rt_f32_bf16) X(rt_f32_f16) X(rt_round_half)         \
    X(rt_profile_add)                                                       \
    X(rt_tok_open) X(rt_tok_close) X(rt_tok_size) X(rt_tok_bos)             \
    X(rt_tok_eos) X(rt_tok_is_end) X(rt_tok_find) X(rt_tok_encode)          \
    X(rt_tok_decode_piece) X(rt_tok_decode_flush)

#endif
