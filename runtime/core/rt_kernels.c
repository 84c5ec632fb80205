/* runtime/core/rt_kernels.c: the gemm micro-kernels of `call` statements, and
 * the packing of weights into the layout they stream best (attention's is
 * the attn part's, runtime/attn/rt_attn.c).
 *
 * Compiled into kiln with -O3 -march=native -ffp-contract=fast (the
 * Makefile), where JIT code calls them: tcc neither vectorises nor fuses
 * a multiply and an add. Pasted with the rest of the runtime into every
 * generated file, which cc builds with the same flags (gnu17 contracts
 * by default), so the cc build computes the same numbers. Portable C:
 * GCC vector extensions of 16 floats (one AVX-512 register, two AVX2
 * ones), nothing of a particular instruction set but one: halves widen
 * with vcvtph2ps where AVX-512 is there (KR_F16C).
 *
 * rt_gemm: C[m][n] += A[m][k] B[k][n], row-major with row strides lda,
 * ldb, ldc (elements; columns contiguous). Every element of C adds its k
 * products to itself one after the other, in k order, each a fused
 * multiply-add where the compiler contracts: the order, so the numbers,
 * never depend on how the caller blocks rows, columns or the reduction
 * around the call (a reduction split into calls over k ranges continues
 * the same sum), nor on threads. Fast when n is a multiple of 16 and
 * m * n <= 256 (16 vector accumulators: MR x NR = 16 x 16, 8 x 32, 4 x
 * 64; with AVX-512's 32 registers 6 x 64: what the tile pass asks for);
 * any other shape is computed right, in pieces of those or, for the last
 * n % 16 columns, one element at a time.
 *
 * rt_gemm_bf16, rt_gemm_f16: the same with B held 16-bit (a weight of
 * --weight-dtype), each element widened exactly as it is read: bf16 by a
 * 16-bit shift (32 at a time as 16 words, a shift for the even columns
 * and a mask for the odd ones, the accumulators split alike: see
 * KR_EVEN), IEEE half by scaling its bits (kr_half: subnormals, inf and
 * NaN as rt_f16_f32 gives them), so the sums are rt_gemm's on the widened B;
 * except that bf16 calls of 16 rows or more go to AMX tiles, or else to
 * vdpbf16ps, where the program can use them (rt_amx.c, rt_bf16dp.c: A
 * rounded to bf16, lossy).
 * Decode (m = 1) streams B once: half the bytes, about twice as fast
 * where memory bandwidth bounds it.
 *
 * Decode's B stream is prefetched KR_AHEAD rows ahead (m = 1, where
 * memory bounds the kernel), and so is that of a tile of up to 8 rows over
 * up to 32 columns: the gemms of a few rows (a block of 40 tokens) whose
 * weights stream from memory once a call (deepseek-r1-block, gpt2-block
 * and mlp 10-12 % faster with it); a prefill chunk's 6 x 64 tiles reuse
 * each row of B for 256 rows of A, and ran 2-10 % slower with it. The
 * hardware prefetcher alone keeps fewer lines in flight: on the AMD EPYC,
 * when other programs shared the memory bandwidth, the step of a
 * stories110M-shaped decoder took 10.2-11.0 ms (medians of 150) with
 * the prefetch and 11.6-11.9 ms without; distances of 8, 16 and 32 rows
 * were alike, 8 a little ahead. The hint is locality 1 (prefetcht2), not
 * 0 (prefetchnta): on the Intel Xeon (Sapphire Rapids class) VM, the
 * non-temporal hint halved the stream, f32 decode of that model 35-36
 * tokens/s against 66-67 with locality 1 and 65-71 with no prefetch
 * (2 threads, alternating rounds).
 *
 * rt_pack_panels: a weight [batch][n][k] (rows of k) becomes panels
 * [batch][n / nr][k][nr]: per k, the nr weights of nr consecutive rows
 * side by side, so that the kernel reads B = one panel with ldb = nr, a
 * contiguous stream: one vector load per k feeds every row of A. */
#include "runtime/core/rt_core.h"

#include <math.h>

/* With AVX-512 (-march=native on such a CPU), halves widen in hardware
 * (vcvtph2ps: exact; a signalling NaN comes out quiet, the only bits
 * that differ from rt_f16_f32's); elsewhere kr_half does it in C. */
#if defined(__AVX512F__)
#include <immintrin.h>
#define KR_F16C 1
#else
#define KR_F16C 0
#endif

typedef float kr_vec __attribute__((vector_size(64), aligned(4)));  /* any address */
typedef float kr_acc __attribute__((vector_size(64)));
typedef uint16_t kr_h16 __attribute__((vector_size(32), aligned(2)));
typedef uint32_t kr_u32 __attribute__((vector_size(64)));
typedef int32_t kr_i32 __attribute__((vector_size(64)));
/* 32 bf16 as 16 words (any address, any type's storage) */
typedef uint32_t kr_w32 __attribute__((vector_size(64), aligned(2), may_alias));

/* accumulators a tile keeps: 16; of rows of 4 vectors, 24 of AVX-512's
 * 32 registers (KR_F16C: 6 x 64), else 16 */
enum { KR_LANES = 16, KR_ACCS = 16, KR_ACCS4 = KR_F16C ? 24 : 16 };

/* 16 IEEE halves (the low 16 bits of each word of h) as floats, exactly:
 * the half's exponent and mantissa moved into an f32's low bits and
 * scaled by 2^112 rebias a normal and make a subnormal (an f32 subnormal
 * then) normal, both exact; an exponent of 31 (inf, NaN) becomes 255,
 * the payload kept; then the sign. */
static inline __attribute__((always_inline)) void kr_half(const kr_u32 *hp, kr_acc *w)
{
    kr_u32 h = *hp, o = (h & 0x7fffu) << 13;
    kr_u32 f = (kr_u32)((kr_acc)o * 0x1p112f);
    kr_u32 special = (kr_u32)((h & 0x7c00u) == 0x7c00u);
    f = (f & ~special) | ((o | 0x7f800000u) & special);
    *w = (kr_acc)(f | (h & 0x8000u) << 16);
}

/* 16 elements of B from b + i, B of type bt (RT_F32, RT_BF16, RT_F16),
 * as floats into *w (through a pointer: a vector return value changes
 * the ABI where the file is built without AVX-512, as -Wpsabi says). */
static inline __attribute__((always_inline)) void kr_load(int bt, const void *b, int64_t i,
                                                          kr_acc *w)
{
    if (bt == RT_F32) {
        *w = *(const kr_vec *)((const float *)b + i);
        return;
    }
#if KR_F16C
    if (bt == RT_F16) {
        *w = (kr_acc)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)b + i)));
        return;
    }
#endif
    kr_u32 u = __builtin_convertvector(*(const kr_h16 *)((const uint16_t *)b + i), kr_u32);
    if (bt == RT_BF16)
        *w = (kr_acc)(u << 16);
    else
        kr_half(&u, w);
}

static inline float kr_one(int bt, const void *b, int64_t i)
{
    if (bt == RT_F32)
        return ((const float *)b)[i];
    uint16_t h = ((const uint16_t *)b)[i];
    return bt == RT_BF16 ? rt_bf16_f32(h) : rt_f16_f32(h);
}

/* 16-bit pairs: 32 consecutive bf16 (or halves) of B are 16 words; a
 * word's low half is the even column, its high half the odd one, so a
 * shift and a mask (no widening shuffle) give two vectors: columns 0, 2,
 * .., 30 and 1, 3, .., 31. The accumulators of C hold the same even and odd
 * columns; C is split so when loaded and merged back when stored, once a
 * call. Each column still adds its own products in k order.
 * (__builtin_shufflevector: gcc >= 12 and clang both have it.) */
#define KR_EVEN 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#define KR_ODD 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31
#define KR_AHEAD 8                      /* rows of B decode prefetches ahead */
#define KR_LO 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23
#define KR_HI 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31

/* One register tile: m rows of nv vectors, m <= kr_mr(nv). Inlined
 * with constant m, nv and bt, the accumulators live in registers. */
static inline __attribute__((always_inline)) void kr_tile(int bt, int m, int nv, int64_t k,
                                                          const float *a, int64_t lda,
                                                          const void *b, int64_t ldb,
                                                          float *c, int64_t ldc)
{
    kr_acc acc[KR_ACCS][4];
    int pairs = (bt == RT_BF16 || (bt == RT_F16 && !KR_F16C)) && nv % 2 == 0;
    for (int r = 0; r < m; r++)
        for (int v = 0; v < nv; v++)
            acc[r][v] = *(const kr_vec *)(c + r * ldc + KR_LANES * v);
    for (int r = 0; pairs && r < m; r++)
        for (int v = 0; v < nv; v += 2) {
            kr_acc lo = acc[r][v], hi = acc[r][v + 1];
            acc[r][v] = __builtin_shufflevector(lo, hi, KR_EVEN);
            acc[r][v + 1] = __builtin_shufflevector(lo, hi, KR_ODD);
        }
    size_t row = (size_t)nv * KR_LANES * (bt == RT_F32 ? 4 : 2);   /* bytes of B a k reads */
    for (int64_t kk = 0; kk < k; kk++) {
        kr_acc w[4];
        if ((m == 1 || (m <= 8 && nv <= 2)) && kk + KR_AHEAD < k) {
            const char *ahead = (const char *)b + (size_t)(kk + KR_AHEAD) * (size_t)ldb *
                                                      (bt == RT_F32 ? 4 : 2);
            for (size_t at = 0; at < row; at += 64)
                __builtin_prefetch(ahead + at, 0, 1);
        }
        for (int v = 0; v < nv; v++)
            if (!pairs)
                kr_load(bt, b, kk * ldb + KR_LANES * v, &w[v]);
        for (int v = 0; pairs && v < nv; v += 2) {
            kr_w32 u = *(const kr_w32 *)((const uint16_t *)b + kk * ldb + KR_LANES * v);
            if (bt == RT_BF16) {
                w[v] = (kr_acc)(u << 16);
                w[v + 1] = (kr_acc)(u & 0xffff0000u);
            } else {
                kr_u32 lo = (kr_u32)(u & 0xffffu), hi = (kr_u32)(u >> 16);
                kr_half(&lo, &w[v]);
                kr_half(&hi, &w[v + 1]);
            }
        }
        for (int r = 0; r < m; r++) {
            float x = a[r * lda + kk];
            for (int v = 0; v < nv; v++)
                acc[r][v] += x * w[v];
        }
    }
    for (int r = 0; pairs && r < m; r++)
        for (int v = 0; v < nv; v += 2) {
            kr_acc even = acc[r][v], odd = acc[r][v + 1];
            acc[r][v] = __builtin_shufflevector(even, odd, KR_LO);
            acc[r][v + 1] = __builtin_shufflevector(even, odd, KR_HI);
        }
    for (int r = 0; r < m; r++)
        for (int v = 0; v < nv; v++)
            *(kr_vec *)(c + r * ldc + KR_LANES * v) = acc[r][v];
}

#define KR_CASE(M, NV)                                                       \
    case M:                                                                  \
        kr_tile(bt, M, NV, k, a, lda, b, ldb, c, ldc);                       \
        return;

/* m rows (1 <= m <= kr_mr(nv)) of nv vectors. */
static inline int kr_mr(int nv) { return (nv == 4 ? KR_ACCS4 : KR_ACCS) / nv; }

static inline __attribute__((always_inline)) void kr_rows(int bt, int64_t m, int nv, int64_t k,
                                                          const float *a, int64_t lda,
                                                          const void *b, int64_t ldb,
                                                          float *c, int64_t ldc)
{
    if (nv == 4)
        switch (m) {
            KR_CASE(1, 4) KR_CASE(2, 4) KR_CASE(3, 4) KR_CASE(4, 4)
            KR_CASE(5, 4) KR_CASE(6, 4)
        }
    if (nv == 2)
        switch (m) {
            KR_CASE(1, 2) KR_CASE(2, 2) KR_CASE(3, 2) KR_CASE(4, 2)
            KR_CASE(5, 2) KR_CASE(6, 2) KR_CASE(7, 2) KR_CASE(8, 2)
        }
    if (nv == 1)
        switch (m) {
            KR_CASE(1, 1) KR_CASE(2, 1) KR_CASE(3, 1) KR_CASE(4, 1)
            KR_CASE(5, 1) KR_CASE(6, 1) KR_CASE(7, 1) KR_CASE(8, 1)
            KR_CASE(9, 1) KR_CASE(10, 1) KR_CASE(11, 1) KR_CASE(12, 1)
            KR_CASE(13, 1) KR_CASE(14, 1) KR_CASE(15, 1) KR_CASE(16, 1)
        }
}

#undef KR_CASE

static inline __attribute__((always_inline)) void kr_gemm(int bt, int64_t m, int64_t n,
                                                          int64_t k, const float *a,
                                                          int64_t lda, const void *b,
                                                          int64_t ldb, float *c, int64_t ldc)
{
    int64_t j = 0;
    size_t bsize = bt == RT_F32 ? 4 : 2;
    for (; j + KR_LANES <= n;) {
        int nv = n - j >= 4 * KR_LANES ? 4 : n - j >= 2 * KR_LANES ? 2 : 1;
        int64_t mr = kr_mr(nv);
        for (int64_t r = 0; r < m; r += mr)
            kr_rows(bt, m - r < mr ? m - r : mr, nv, k, a + r * lda, lda,
                    (const char *)b + j * bsize, ldb, c + r * ldc + j, ldc);
        j += (int64_t)nv * KR_LANES;
    }
    for (; j < n; j++)                   /* the last n % 16 columns */
        for (int64_t r = 0; r < m; r++) {
            float s = c[r * ldc + j];
            for (int64_t kk = 0; kk < k; kk++)      /* fused, as the vectors' */
                s = fmaf(a[r * lda + kk], kr_one(bt, b, kk * ldb + j), s);
            c[r * ldc + j] = s;
        }
}

void rt_gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
             int64_t ldb, float *c, int64_t ldc)
{
    kr_gemm(RT_F32, m, n, k, a, lda, b, ldb, c, ldc);
}

/* The pairs part's gemm (rt_pairs_use); NULL in a program without it. */
static rt_pairs_gemm *kr_pairs;

void rt_pairs_use(rt_pairs_gemm *gemm) { kr_pairs = gemm; }

void rt_gemm_bf16(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                  const uint16_t *b, int64_t ldb, float *c, int64_t ldc)
{
    rt_gemm_bf16_kept(0, m, n, k, a, lda, b, ldb, c, ldc);
}

uint64_t rt_keep_scope(void)
{
    static uint64_t last;
    return __atomic_add_fetch(&last, 1, __ATOMIC_RELAXED);
}

void rt_gemm_bf16_kept(uint64_t scope, int64_t m, int64_t n, int64_t k, const float *a,
                       int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc)
{
    if (m >= 16 && kr_pairs && kr_pairs(scope, m, n, k, a, lda, b, ldb, c, ldc))
        return;
    kr_gemm(RT_BF16, m, n, k, a, lda, b, ldb, c, ldc);
}

void rt_gemm_f16(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                 const uint16_t *b, int64_t ldb, float *c, int64_t ldc)
{
    kr_gemm(RT_F16, m, n, k, a, lda, b, ldb, c, ldc);
}

/* One matrix [n][k] into panels, elements of type T. */
#define KR_PACK(T, src, dst)                                                 \
    do {                                                                     \
        const T *s_ = (const T *)(src);                                      \
        T *d_ = (T *)(dst);                                                  \
        for (int64_t p = 0; p < n / nr; p++)                                 \
            for (int64_t kk = 0; kk < k; kk++)                               \
                for (int64_t i = 0; i < nr; i++)                             \
                    d_[(p * k + kk) * nr + i] = s_[(p * nr + i) * k + kk];   \
    } while (0)

int rt_pack_panels(void **w, int64_t batch, int64_t n, int64_t k, int64_t nr, int esize,
                   rt_err *e)
{
    if (batch < 1 || n < 1 || k < 1 || nr < 1 || n % nr || (esize != 4 && esize != 2))
        return rt_errf(e, RT_EINTERNAL, "cannot pack [%lld][%lld][%lld] in panels of %lld",
                       (long long)batch, (long long)n, (long long)k, (long long)nr);
    size_t count = (size_t)batch * (size_t)n * (size_t)k;
    char *src = *w, *dst = rt_alloc(count * (size_t)esize);
    if (!dst)
        return rt_errf(e, RT_EINTERNAL, "out of memory packing a weight (%lld bytes)",
                       (long long)(count * (size_t)esize));
    for (int64_t q = 0; q < batch; q++) {
        size_t at = (size_t)(q * n * k) * (size_t)esize;
        if (esize == 4)
            KR_PACK(float, src + at, dst + at);
        else
            KR_PACK(uint16_t, src + at, dst + at);
    }
    rt_free(src);
    *w = dst;
    return 0;
}

#undef KR_PACK
