/* runtime/kiln_rt.h: the runtime's core, what every generated program
 * calls, a table of contents.
 *
 * The runtime is in parts, a folder each (docs/design.md, "The runtime"):
 *   core/  this header's: errors, memory, weights (safetensors; GGUF through
 *          the gguf part), .npy, threads, profiles, gemm micro-kernels,
 *          the main of every program;
 *   gguf/  rt_gguf.h's: GGUF files (decoders, programs built from a GGUF);
 *   attn/  rt_attn.h's: attention's kernel (programs that call it);
 *   gen/   rt_gen.h's: tokenizers, sampling, `PROG generate` (decoders);
 *   quant/ rt_quant.h's: weights held in quantized blocks (q8_0 ... q6_k,
 *          f8_e4m3);
 *   jit/   rt_jit.h's: vector programs, which only JIT code calls;
 *   serve/ rt_serve.h's: `PROG serve`, an OpenAI-compatible server (slotted
 *          decoders; it links a library, libmicrohttpd, and pthreads).
 *   mpi/   rt_mpi.h's: the main and collectives of a program of several
 *          MPI ranks (Open MPI, and only in such programs).
 * Each part's internal header (core/rt_core.h, gen/rt_tok.h,
 * serve/rt_srv.h) is for its own files, never for generated code.
 * The runtime is compiled into kiln (for the reference interpreter's data,
 * `kiln check`, and as symbols handed to libtcc for JIT runs) and pasted as
 * text into every generated C file, which must build with nothing but
 * `cc -O3 -march=native -fopenmp model.c -lm`, or as objects of its
 * own that such files link (kiln build's cache, codegen/cc.c). So: libc, POSIX and OpenMP
 * (under #ifdef _OPENMP) only (serve/ adds -lmicrohttpd -lpthread); every file compiles in one translation unit
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
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifndef RT_API
#define RT_API
#endif

enum { RT_OK = 0, RT_EINVAL = 1, RT_EUSAGE = 2, RT_EIO = 3, RT_EINTERNAL = 4 };
enum { RT_F32 = 0, RT_I32 = 1 };                 /* equal to DT_F32, DT_I32 */
enum { RT_BF16 = 2, RT_F16 = 3 };                /* 16-bit storage: ST_BF16, ST_F16 */
/* Quantized storage (rt_quant.h): ST_Q8_0 ... ST_Q6_K (8 is ST_Q4_K_M, a
 * mix of q4_k and q6_k, no storage) */
enum { RT_Q8_0 = 4, RT_Q4_0 = 5, RT_Q4_K = 6, RT_Q6_K = 7 };
/* FP8 e4m3 blocks with an f32 scale (rt_quant.h): ST_F8_E4M3 */
enum { RT_F8_E4M3 = 9 };
/* OCP MXFP4 blocks, E2M1 values with an E8M0 scale (rt_quant.h): ST_MXFP4 */
enum { RT_MXFP4 = 10 };
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
/* "PROG: CMD: message" on stderr (no "CMD: " when cmd is NULL), one line
 * whatever the text holds: how a program's commands report. */
RT_API void rt_vsay(const char *prog, const char *cmd, const char *fmt, va_list ap);
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
     * a value, rounded once at load, widened exactly where read), or
     * RT_Q8_0 ... RT_Q6_K (blocks, rt_quant.h; quantized once at load by
     * `quantize`, rt_quantize, which the core has only so) */
    int store;
    void (*quantize)(int store, const float *src, void *dst, int64_t n);
    /* weights: packed at load in panels of this many rows, as
     * rt_pack_panels(nr = panel) lays out [..., N, K]; 0: as the file
     * holds them */
    int64_t panel;
    /* weights: how a quantized tensor of a GGUF file is widened to f32
     * when it is held otherwise (rt_dequantize, of the quantized part;
     * NULL in a program without it: such a tensor is refused by name) */
    void (*dequantize)(int store, const void *src, float *dst, int64_t n);
    /* weights of a program of several MPI ranks (kiln build --ranks N):
     * this rank holds part rt_ranks_now()->rank of axis shard_axis of the
     * file's tensor, which is shard_of long there (dims[shard_axis] each);
     * shard_of 0: the whole tensor */
    int shard_axis;
    int64_t shard_of;
    /* weights of a program of several MPI ranks read as one whole tensor
     * of the file per rank (one expert of a moe's, each rank another):
     * rank r reads tensors[r], of the weight's shape; NULL-terminated, one
     * name per rank. NULL: the tensor `name` */
    const char *const *tensors;
} rt_tensor_info;

/* ---- ranks (rt_ranks.c) --------------------------------------------------- */
/* The collectives this rank has run so far, counted by the MPI part as
 * they run (rt_mpi.c): calls of each, the bytes of their results (what
 * the rank holds after each: an allreduce's n floats, an allgather's
 * whole), the bytes it received from the other ranks, the seconds spent
 * in them (waiting for the slowest rank included). */
typedef struct {
    int64_t allreduce, allgather;
    int64_t bytes, received;
    double seconds;
} rt_comm;

/* Which MPI rank this process is: rank 0 of 1 unless the MPI part
 * (rt_mpi.h: rt_mpi_main) says otherwise before anything loads. The
 * loader reads a sharded weight's part by it, the weights' image is kept
 * per rank, only rank 0 writes outputs and prints generated text, and
 * generation takes rank 0's tokens (bcast; NULL with one rank) and
 * reports the collectives per token (comm; NULL with one rank). */
typedef struct {
    int rank, size;
    /* rank 0's `bytes` at buf into every rank's buf: 0, or an RT_* status */
    int (*bcast)(void *buf, int64_t bytes);
    const rt_comm *comm;
} rt_ranks;
RT_API void rt_ranks_set(const rt_ranks *r);
RT_API const rt_ranks *rt_ranks_now(void);

/* ---- memory (rt_mem.c) -------------------------------------------------- */
RT_API void *rt_alloc(size_t bytes);           /* 64-byte aligned, zeroed */
/* rt_alloc's block, committed a 4 KB page at a time as it is written, for
 * state that fills as it runs (a KV cache): never in huge pages. */
RT_API void *rt_alloc_lazy(size_t bytes);
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
enum { RT_ST_F32, RT_ST_F16, RT_ST_BF16, RT_ST_F8_E4M3, RT_ST_U8 };
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
/* Loads every weight: from the file at path when given (a safetensors
 * file, an index of shards, or a GGUF file, rt_is_gguf; every tensor of
 * the file must be a declared weight and every declared weight without an
 * init must be in the file; shapes must agree, naming both), else from its
 * init. dst[i] receives an rt_alloc'd buffer of w[i].count elements held
 * as w[i].store: a tensor the file holds in that very type is copied as
 * it is (16-bit values, quantized blocks byte for byte); any other is
 * made exact f32 first (widened; a GGUF's quantized blocks by
 * w[i].dequantize), then rounded by rt_f32_bf16 / rt_f32_f16 or
 * quantized by w[i].quantize. On error nothing stays allocated. */
RT_API int rt_load_weights(const char *path, const rt_tensor_info *w, int nw,
                           void **dst, rt_err *e);
/* rt_load_weights' checks of the file at path against the weights,
 * without loading (kiln checks a model's weights so before compiling):
 * the file sound, every tensor a weight, every weight in the file of its
 * shape (and, quantized and held otherwise, widenable) or with an init.
 * 0, or the status with the message a load would give. */
RT_API int rt_check_weights(const char *path, const rt_tensor_info *w, int nw, rt_err *e);

/* ---- GGUF weights, read by the GGUF part (rt_weights.c) ----------------- */
/* A tensor of a GGUF file (the GGUF part reads the file, rt_gguf.h). */
typedef struct {
    const char *name;
    int type;                   /* GGML's type number: 0 F32, 1 F16, 2 Q4_0,
                                   8 Q8_0, 12 Q4_K, 14 Q6_K, 30 BF16 */
    int store;                  /* the same as kiln holds it: RT_F32 ... */
    int rank;                   /* 1 to 4 */
    int64_t dims[RT_MAX_RANK];  /* outermost first: the file's ne reversed */
    int64_t count;
    uint64_t offset;            /* in the data section */
    const unsigned char *data;  /* inside the mapping, at a multiple of the
                                   alignment from its (page-aligned) start */
    size_t nbytes;              /* rt_store_bytes(store, count) */
} rt_gguf_tensor;
/* A GGUF file open for the weights loader: the GGUF part's reader,
 * which a program carrying that part installs before main (rt_gguf_use);
 * the loader and the weights' image (rt_image.c) read GGUF only so. */
typedef struct {
    void *g;                    /* the part's open file */
    int nt;
    const rt_gguf_tensor *t;    /* its tensors, in the file's order */
    uint64_t data_start;        /* its data section's first byte */
    const rt_gguf_tensor *(*find)(const void *g, const char *name);  /* NULL: none */
    void (*close)(void *g);
} rt_gguf_file;
/* 1 when the file at path begins with GGUF's magic (then weights are read
 * from it as a GGUF, whatever its name), else 0 (also when unreadable). */
RT_API int rt_is_gguf(const char *path);
/* Installs the GGUF part's opener (its constructor calls this). */
RT_API void rt_gguf_use(int (*open)(const char *path, rt_gguf_file *f, rt_err *e));
/* Opens the GGUF file at path through the installed opener; without one
 * (a program without the GGUF part): "PATH: a GGUF file, which this
 * program cannot read (it has no GGUF part): rebuild it from a GGUF
 * (kiln build FILE.gguf) or pass safetensors weights", RT_EUSAGE. */
RT_API int rt_gguf_weights(const char *path, rt_gguf_file *f, rt_err *e);

/* ---- prepared weights, mapped (rt_image.c) ------------------------------ */
/* A program's held weights (m->w) as its kernels read them, prepared at
 * the first open of a weights file and kept in an image file that later
 * opens map read-only ($KILN_WEIGHTS_CACHE: a directory, or "off"; else
 * the user's cache): rt_image.c gives the key, the file and its checks. */
typedef struct {
    void *map;                  /* NULL: not mapped */
    size_t size;
} rt_image;
/* The image of the weights at path (NULL: none) for layout: 1 when one
 * is found sound and mapped, w[0, n) then pointing into it (NULL where
 * bytes[i] is 0); else 0, nothing mapped (an unsound image is removed,
 * said on stderr). bytes[i]: held buffer i's size. */
RT_API int rt_image_open(const char *layout, const char *path, int n, void **w,
                         const size_t *bytes, rt_image *im);
/* Keeps w[0, n) (bytes[i] each; 0: none), which took `seconds` to
 * prepare, as the image of path for layout: 0, or 1 when not kept (no
 * cache, or a write failed: said on stderr; the caller goes on with w). */
RT_API int rt_image_save(const char *layout, const char *path, int n, void *const *w,
                         const size_t *bytes, double seconds);
RT_API void rt_image_close(rt_image *im);   /* unmaps; a NULL map is nothing */

/* ---- 16-bit floats and FP8 e4m3 (rt_half.c) ----------------------------- */
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
/* An FP8 e4m3 byte's value (sign, 4 exponent bits biased by 7, 3 mantissa
 * bits; no infinities; 0x7f and 0xff are NaN; largest 448), and f32 to
 * the nearest e4m3 (ties to even; past 464, the tie between 448 and 512,
 * or NaN: the NaN byte of its sign; no infinities). */
RT_API float rt_e4m3_f32(uint8_t b);
RT_API uint8_t rt_f32_e4m3(float f);
/* The values a block of store holds (32; f8_e4m3 128; q4_k, q6_k 256; 0 for
 * a store that is not in blocks), and the bytes count elements take held
 * as store (RT_F32, RT_BF16, RT_F16, RT_Q8_0 ... RT_Q6_K, RT_F8_E4M3,
 * RT_MXFP4; a quantized count is a multiple of its block). */
RT_API int rt_store_block(int store);
RT_API int64_t rt_store_bytes(int store, int64_t count);
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
    double bound;               /* of flops, its attention calls' bound (every
                                   row against the whole cache), which a
                                   profile replaces by what they computed */
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
/* One call of kernel k took `seconds`; the FLOPs rt_profile_count was
 * given since the last call of this (of any profile) were that call's. */
RT_API void rt_profile_add(rt_profile *p, int k, double seconds);
/* A kernel's work counted as it ran (rt_attn: each row against the keys
 * it saw), for the profile's FLOPs in place of the kernel's bound. Safe
 * from every thread; costs one atomic add. */
RT_API void rt_profile_count(uint64_t flops);
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
 * and m * n <= 256 (6 x 64 with AVX-512). What `call gemm(...)`
 * statements print as. */
RT_API void rt_gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float *c, int64_t ldc);
/* Packs a weight of [batch][n][k] into panels [batch][n/nr][k][nr] (nr
 * divides n), elements of esize bytes (4, or 2 held 16-bit): *w is
 * replaced by a new rt_alloc'd buffer and the old one freed; on failure
 * (out of memory) *w is kept and e set. */
RT_API int rt_pack_panels(void **w, int64_t batch, int64_t n, int64_t k, int64_t nr,
                          int esize, rt_err *e);
/* rt_gemm with B a 16-bit weight (bf16, IEEE half), each element widened
 * exactly as it is read: the same sums as rt_gemm on the widened B. But
 * bf16 of m >= 16 rows runs on AMX tiles, or else by AVX512-BF16's
 * vdpbf16ps, where the CPU can and the program carries the pairs part
 * (runtime/rt_pairs.h: A rounded to bf16, products added in pairs). */
RT_API void rt_gemm_bf16(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const uint16_t *b, int64_t ldb, float *c, int64_t ldc);
/* rt_gemm_bf16 for callers whose A does not change between their calls
 * of one scope: a scope from rt_keep_scope (never 0, never given twice),
 * used by any threads, for as long as the A of every call made with it
 * keeps its values (generated code: one run of a kernel, A an operand
 * the kernel never writes). The pairs part then rounds each A (its
 * pointer, lda, m and k) once for the scope and thread, not once a call;
 * the same numbers as rt_gemm_bf16's. */
RT_API uint64_t rt_keep_scope(void);
RT_API void rt_gemm_bf16_kept(uint64_t scope, int64_t m, int64_t n, int64_t k, const float *a,
                              int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc);
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
static inline __attribute__((unused)) float rt_expf(float x)
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
static inline __attribute__((unused)) float rt_tanhf(float x)
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

/* ---- a model, as generated code describes it (rt_main.c) --------------- */
typedef struct rt_model rt_model;
struct rt_model {
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
    /* `PROG generate` (rt_gen.h: rt_generate) for a decoder; NULL: the
     * program has no generation part and says so */
    int (*generate)(int argc, char **argv, const rt_model *md);
    /* --version: the kiln that generated the program, and how it was
     * compiled (kiln build's cc flags, KILN_BUILD_FLAGS; or the JIT's
     * name); NULL: not known */
    const char *kiln_version, *build;
    /* the model folder it was built from: its weights and tokenizer as
     * absolute paths, what --weights and generate's --tokenizer default
     * to (rt_pick_weights); NULL: none */
    const char *weights_file, *tokenizer_file;
    /* a slotted decoder (inputs tokens, positions, slots; KV caches of
     * several sequences, docs/serving.md) built with its batch variant:
     * run_batch runs `batch` rows a call, each its own sequence's token
     * (batch 0, run_batch NULL: none) */
    int batch;
    int (*run_batch)(void *h, const void *const *in, void *const *out);
    /* `PROG serve` (rt_serve.h: rt_serve) for a slotted decoder built
     * for serving; NULL: the program has no serving part and says so */
    int (*serve)(int argc, char **argv, const rt_model *md);
    /* a decoder with a second, smaller prefill variant for the rest of a
     * prompt: run_rest runs `rest` tokens a call (rest 0, run_rest NULL:
     * none; rt_decode.c) */
    int rest;
    int (*run_rest)(void *h, const void *const *in, void *const *out);
};
/* What `PROG generate` says of a model that is no decoder (%s: its name),
 * with or without the generation part. */
#define RT_NOT_A_DECODER "model '%s' is not a decoder of one token a call (inputs tokens " \
                         "i32[1], positions i32[1]; output logits f32[1, V]; KV caches)"

/* The thin main of every generated executable, and of `kiln run`:
 *   PROG [--weights W.safetensors] [--input NAME=F.npy]... [--output NAME=F.npy]...
 *        [--repeat N] [--threads N] [--seed S] [--profile FILE] [--help] [--version]
 * Inputs not given are seeded (said on stderr). Outputs not written to a
 * file are summarised on stdout. --profile times every kernel call and
 * writes rt_profile_write's lines. --version prints the model's name,
 * md->kiln_version and md->build. `PROG generate ...` is handed to
 * md->generate. Returns an RT_* status. */
RT_API int rt_main(int argc, char **argv, const rt_model *md);
/* The weights file a run of md opens, malloc'd into *path: `given`
 * (--weights; a folder: its model.safetensors.index.json when there,
 * else its model.safetensors, as kiln takes a model folder's), else
 * md->weights_file when it can still be read (else RT_EIO: "PATH: the
 * weights this program was built with ...: pass --weights"), else NULL
 * (each weight's init). Returns an RT_* status with e set. */
RT_API int rt_pick_weights(const rt_model *md, const char *given, char **path, rt_err *e);

/* Every symbol of the core that generated code may call: the JIT hands
 * these to libtcc (X(name) per function; rt_gen.h and rt_jit.h list
 * their parts'). */
#define RT_CORE_SYMBOLS(X)                                                  \
    X(rt_errf) X(rt_alloc) X(rt_alloc_lazy) X(rt_free) X(rt_splitmix64)     \
    X(rt_fill_random)                                                       \
    X(rt_seed_input) X(rt_st_open) X(rt_st_close) X(rt_st_find)             \
    X(rt_load_weights) X(rt_npy_load) X(rt_npy_read)        \
    X(rt_npy_write) X(rt_parallel_for) X(rt_set_threads) X(rt_get_threads)  \
    X(rt_now) X(rt_main) X(rt_gemm) X(rt_gemm_bf16) X(rt_gemm_f16) \
    X(rt_keep_scope) X(rt_gemm_bf16_kept) \
    X(rt_pack_panels) X(rt_f32_bf16) X(rt_f32_f16) X(rt_round_half) X(rt_store_bytes) \
    X(rt_store_block) X(rt_e4m3_f32) X(rt_f32_e4m3)                          \
    X(rt_profile_add) X(rt_image_open) X(rt_image_save) X(rt_image_close)    \
    X(rt_is_gguf) X(rt_gguf_weights)

#endif
