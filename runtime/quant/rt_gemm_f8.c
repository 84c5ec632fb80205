/* runtime/quant/rt_gemm_f8.c: the gemm kernel over f8_e4m3 blocks
 * (rt_quant.h's rt_gemm_f8_e4m3): C[m][n] += A[m][k] W^T, W(j, kk)
 * element woff + j * ldw + kk of a weight held as blocks of 128 e4m3
 * bytes with an f32 scale (132 bytes), activations kept in f32 (an FP8
 * checkpoint's input_scale, or dynamic FP8 activations, are not emulated:
 * docs/fp8.md).
 *
 * 1. Widening, through IEEE half: 32 bytes of a block, sign-extended to
 *    16-bit lanes and shifted up by 7 with bit 14 cleared, are the halves
 *    w' = w / 2^8 (e4m3's exponent field is half's less its top bit, and
 *    half's bias is e4m3's + 8; subnormals map to subnormals), and
 *    vcvtph2ps widens them exactly: 6 vector operations for 32 weights, a
 *    block's 128 in 4 such pairs of 16-lane vectors. A NaN byte would read
 *    as 480: rt_load_weights refuses them, so none is held. One byte a
 *    weight is read, and the block's scale (1.03 bytes a weight).
 * 2. Arithmetic, per element of C (rt_quant.h): 16 lanes; per block
 *    t = w'[0:16] a[0:16], then t = fma(w'[16i:16i+16], a[16i:16i+16], t)
 *    for i = 1 ... 7, and L = fma(t, d, L): 9 vector operations and one
 *    scale for 128 weights; at the end the lanes summed by halves (8, 4,
 *    2, 1), times 2^8 (exact), and added to C. The portable C does the
 *    same operations lane by lane (fmaf, w' as rt_e4m3_f32(b) / 2^8), so
 *    both paths give the same bits.
 * 3. Shapes. A tile is up to QF_MR rows of A by QF_NR rows of W: each
 *    block's 8 widened vectors of a row of W serve every row of A of the
 *    tile (prefill; 16 accumulators, 8 weights, the scale and t fit
 *    AVX-512's 32 registers), and decode (one row of A) streams QF_NR rows
 *    of W at once, whose latency chains interleave. Tiles go over the rows
 *    of W, and within them over the rows of A, so a tile's rows of W stay
 *    in cache while A's rows pass. The first rows of A to pass prefetch
 *    the rows of W two tiles on (the last tiles: the next one's), 3
 *    lines a block (qf_tile): the hardware prefetcher alone runs too
 *    short a way ahead of QF_NR streams, and one tile on was too short
 *    too (a stories110M-shaped decode 233-244 tokens/s against 272-276
 *    two tiles on, quiet, alternating).
 *
 * The path is chosen where this file is compiled (-march): AVX-512F and
 * BW, else portable C; the Makefile's unit tests build both. */
#include "runtime/rt_quant.h"

#include <math.h>
#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define QF_PATH 1
#include <immintrin.h>
#else
#define QF_PATH 0
#endif

#define QF_I static inline __attribute__((always_inline))
#define QF_MR 4                     /* rows of A a tile */
#define QF_NR 4                     /* rows of W a tile */

#if QF_PATH
typedef __m512 qf_v;
QF_I qf_v qf_zero(void) { return _mm512_setzero_ps(); }
QF_I qf_v qf_load(const float *p) { return _mm512_loadu_ps(p); }
QF_I qf_v qf_set(float x) { return _mm512_set1_ps(x); }
QF_I qf_v qf_mul(qf_v x, qf_v y) { return _mm512_mul_ps(x, y); }
QF_I qf_v qf_fma(qf_v x, qf_v y, qf_v z) { return _mm512_fmadd_ps(x, y, z); }
QF_I void qf_widen(const uint8_t *p, qf_v *lo, qf_v *hi)
{
    __m512i x = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)p));
    __m512i h = _mm512_and_si512(_mm512_slli_epi16(x, 7), _mm512_set1_epi16((short)0xbfff));
    *lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    *hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
}
QF_I float qf_sum(qf_v v)
{
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v),
                              _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}
#else
typedef struct {
    float l[16];
} qf_v;
QF_I qf_v qf_zero(void) { return (qf_v){{0}}; }
QF_I qf_v qf_load(const float *p)
{
    qf_v v;
    memcpy(v.l, p, sizeof v.l);
    return v;
}
QF_I qf_v qf_set(float x)
{
    qf_v v;
    for (int l = 0; l < 16; l++)
        v.l[l] = x;
    return v;
}
QF_I qf_v qf_mul(qf_v x, qf_v y)
{
    for (int l = 0; l < 16; l++)
        x.l[l] *= y.l[l];
    return x;
}
QF_I qf_v qf_fma(qf_v x, qf_v y, qf_v z)
{
    for (int l = 0; l < 16; l++)
        z.l[l] = fmaf(x.l[l], y.l[l], z.l[l]);
    return z;
}
QF_I void qf_widen(const uint8_t *p, qf_v *lo, qf_v *hi)
{
    for (int l = 0; l < 16; l++) {
        lo->l[l] = rt_e4m3_f32(p[l]) * 0x1p-8f;
        hi->l[l] = rt_e4m3_f32(p[l + 16]) * 0x1p-8f;
    }
}
QF_I float qf_sum(qf_v v)
{
    for (int h = 8; h; h >>= 1)
        for (int l = 0; l < h; l++)
            v.l[l] += v.l[l + h];
    return v.l[0];
}
#endif

/* One tile: mr rows of A (rows lda apart) by nr rows of W (rowbytes
 * apart), nb blocks of k; QF_NR rows of W further on (next, unless
 * NULL) prefetched into L2 as block b passes: the lines of their bytes
 * b * 132, 64 and 128 on (a block's 132 bytes reach into a fourth line
 * where the next block's first prefetch falls). */
QF_I void qf_tile(int mr, int nr, int64_t nb, const float *a, int64_t lda, const uint8_t *w,
                  size_t rowbytes, const uint8_t *next, float *c, int64_t ldc)
{
    qf_v acc[QF_MR][QF_NR];
    for (int r = 0; r < mr; r++)
        for (int o = 0; o < nr; o++)
            acc[r][o] = qf_zero();
    for (int64_t b = 0; b < nb; b++) {
        const float *ab = a + b * 128;
        for (int o = 0; next && o < QF_NR; o++) {
            const uint8_t *p = next + o * rowbytes + (size_t)b * 132;
            __builtin_prefetch(p, 0, 2);
            __builtin_prefetch(p + 64, 0, 2);
            __builtin_prefetch(p + 128, 0, 2);
        }
        for (int o = 0; o < nr; o++) {
            const uint8_t *p = w + o * rowbytes + (size_t)b * 132;
            qf_v x[8];
            float s;
            memcpy(&s, p, 4);
            qf_v d = qf_set(s);
            for (int i = 0; i < 4; i++)
                qf_widen(p + 4 + 32 * i, &x[2 * i], &x[2 * i + 1]);
            for (int r = 0; r < mr; r++) {
                const float *ar = ab + r * lda;
                qf_v t = qf_mul(x[0], qf_load(ar));
                for (int i = 1; i < 8; i++)
                    t = qf_fma(x[i], qf_load(ar + 16 * i), t);
                acc[r][o] = qf_fma(t, d, acc[r][o]);
            }
        }
    }
    for (int r = 0; r < mr; r++)
        for (int o = 0; o < nr; o++)
            c[r * ldc + o] += qf_sum(acc[r][o]) * 0x1p8f;
}

typedef void (*qf_tile_fn)(int64_t, const float *, int64_t, const uint8_t *, size_t,
                           const uint8_t *, float *, int64_t);
#define QF_TILE(MR, NR)                                                                      \
    static void qf_tile_##MR##_##NR(int64_t nb, const float *a, int64_t lda, const uint8_t *w, \
                                    size_t rowbytes, const uint8_t *next, float *c,           \
                                    int64_t ldc)                                             \
    {                                                                                        \
        qf_tile(MR, NR, nb, a, lda, w, rowbytes, next, c, ldc);                              \
    }
QF_TILE(1, 1) QF_TILE(2, 1) QF_TILE(3, 1) QF_TILE(4, 1)
QF_TILE(1, 4) QF_TILE(2, 4) QF_TILE(3, 4) QF_TILE(4, 4)

void rt_gemm_f8_e4m3(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                     const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc)
{
    static const qf_tile_fn tiles[2][QF_MR] = {
        {qf_tile_1_1, qf_tile_2_1, qf_tile_3_1, qf_tile_4_1},
        {qf_tile_1_4, qf_tile_2_4, qf_tile_3_4, qf_tile_4_4}};
    if (m <= 0 || n <= 0 || k <= 0)
        return;
    const size_t rowbytes = (size_t)(ldw / 128) * 132;
    const uint8_t *wb = (const uint8_t *)w + (size_t)(woff / 128) * 132;
    for (int64_t j = 0; j < n;) {
        int nr = n - j >= QF_NR ? QF_NR : 1;
        const uint8_t *w = wb + (size_t)j * rowbytes;
        int64_t left = n - j - nr;      /* rows of W after this tile */
        const uint8_t *next = left >= 2 * QF_NR ? w + 2 * nr * rowbytes
                              : left >= QF_NR   ? w + nr * rowbytes
                                                : NULL;
        for (int64_t i = 0; i < m; i += QF_MR) {
            int mr = m - i < QF_MR ? (int)(m - i) : QF_MR;
            tiles[nr == QF_NR][mr - 1](k / 128, a + i * lda, lda, w, rowbytes, i ? NULL : next,
                                       c + i * ldc + j, ldc);
        }
        j += nr;
    }
}
