/* runtime/quant/rt_gemm_q_amx.c: qgemm's calls of 16 rows or more on the
 * CPU's AMX tiles (tdpbf16ps), where it has them: q8_0, q4_0, q4_k, q6_k.
 *
 * Contract (rt_gemm_q_amx, rt_qk.h): C[m][n] += A[m][k] W^T as qgemm takes
 * them (rt_quant.h), with A rounded to bf16 and each weight the value
 * rt_dequantize gives it (the block's scale times its integer, q4_k's min
 * subtracted, q6_k's sub-block scale times d first, in f32) rounded to bf16, both to nearest even (subnormals
 * to zero), the products added in pairs of k in f32 by the tiles, in the
 * hardware's order and rounding. The numbers depend only on the call's
 * operands, never on threads, but the split of k into calls changes them
 * (the tiles' order). Not qgemm's int8 contract: rt_gemm_q.c calls this
 * first for m >= 16 and keeps its own path for fewer rows (decode), other
 * stores, and where the tiles cannot be used (KILN_AMX=off: its numbers
 * exactly).
 *
 * Algorithm: the reduction in chunks of RT_AMX_K values (a multiple of
 * every block), all rows at once (their bf16 rows in a per-thread scratch
 * past QA_M rows; without one, blocks of QA_M rows on the stack, the same
 * sums). Per chunk and block of rows, the rows become bf16 rows
 * (rt_amx_rows: once a call); then
 * per 32 outputs, their 32 rows of W over the chunk are dequantized into
 * the tiles' layout (qa_cols): 16 rows x 32 values at a time, each row's
 * 32 values scaled in f32 and rounded to bf16 (vcvtne2ps2bf16), one vector
 * of 16 pairs of k; the 16 vectors transposed as 16 x 16 32-bit words
 * (qa_t16) are the 16 rows of the layout (per pair of k, the 16 outputs'
 * two values side by side); then rt_amx_blocks runs the tiles over the
 * block, meanwhile the next 32 rows' (or the next chunk's) bytes of W are
 * prefetched: read cold, 16 rows at a time, they stalled the dequantizing
 * (a stories110M-shaped q8_0 prefill, 2 threads: calls ran at half the
 * rate they had with the weights in cache). Up to QA_M rows all in the
 * thread's stack (48 KiB); so the weights are dequantized once a call. */
#include "runtime/core/rt_core.h"
#include "runtime/rt_pairs.h"
#include "runtime/quant/rt_qk.h"

#ifdef RT_AMX
#include <immintrin.h>
#include <stdlib.h>

#define QA_I static inline __attribute__((always_inline))

enum { QA_M = 64 };

/* 32 f32 values (lo 0-15, hi 16-31) as 32 bf16, to nearest even */
QA_I __m512i qa_bf16(__m512 lo, __m512 hi)
{
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* Values [kk, kk + 32) (kk a multiple of 32) of one row of W as bf16:
 * row at the row's chunk, whose first block starts it. */
QA_I __m512i qa_q8_0(const uint8_t *row, int64_t kk)
{
    const uint8_t *b = row + kk / 32 * 34;
    __m512 d = _mm512_set1_ps(rt_qk_half(b));
    __m512i lo = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 2)));
    __m512i hi = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 18)));
    return qa_bf16(_mm512_mul_ps(_mm512_cvtepi32_ps(lo), d),
                   _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d));
}

QA_I __m512i qa_q4_0(const uint8_t *row, int64_t kk)
{
    const uint8_t *b = row + kk / 32 * 18;
    __m512 d = _mm512_set1_ps(rt_qk_half(b));
    __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b + 2)));
    __m512i eight = _mm512_set1_epi32(8);
    __m512i lo = _mm512_sub_epi32(_mm512_and_si512(v, _mm512_set1_epi32(15)), eight);
    __m512i hi = _mm512_sub_epi32(_mm512_srli_epi32(v, 4), eight);
    return qa_bf16(_mm512_mul_ps(_mm512_cvtepi32_ps(lo), d),
                   _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d));
}

/* q4_k: sub-block s = kk % 256 / 32, x = (d sc) q - dmin mn */
QA_I __m512i qa_q4_k(const uint8_t *row, int64_t kk)
{
    const uint8_t *b = row + kk / 256 * 144;
    int s = (int)(kk % 256 / 32), sc, mn;
    rt_qk_scale_min(b + 4, s, &sc, &mn);
    __m512 ds = _mm512_set1_ps(rt_qk_half(b) * sc), dm = _mm512_set1_ps(rt_qk_half(b + 2) * mn);
    const uint8_t *q = b + 16 + 32 * (s / 2);
    __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)q));
    __m512i hi = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q + 16)));
    if (s % 2) {
        lo = _mm512_srli_epi32(lo, 4);
        hi = _mm512_srli_epi32(hi, 4);
    } else {
        lo = _mm512_and_si512(lo, _mm512_set1_epi32(15));
        hi = _mm512_and_si512(hi, _mm512_set1_epi32(15));
    }
    return qa_bf16(_mm512_sub_ps(_mm512_mul_ps(ds, _mm512_cvtepi32_ps(lo)), dm),
                   _mm512_sub_ps(_mm512_mul_ps(ds, _mm512_cvtepi32_ps(hi)), dm));
}

/* q6_k: j = kk % 256 = 128 h + 32 g, values j + l (l < 32): low 4 bits in
 * byte 64 h + 32 (g % 2) + l (low nibble for g < 2), high 2 bits 2 g up in
 * byte 128 + 32 h + l; x = (d sc) (q - 32), sc sub-block (j + l) / 16's. */
QA_I __m512i qa_q6_k(const uint8_t *row, int64_t kk)
{
    const uint8_t *b = row + kk / 256 * 210;
    int j = (int)(kk % 256), h = j / 128, g = j / 32 % 4;
    const uint8_t *ql = b + 64 * h + 32 * (g % 2), *qh = b + 128 + 32 * h;
    float d = rt_qk_half(b + 208);
    __m512 x[2];
    for (int s = 0; s < 2; s++) {
        __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ql + 16 * s)));
        __m512i hi = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qh + 16 * s)));
        lo = g < 2 ? _mm512_and_si512(lo, _mm512_set1_epi32(15)) : _mm512_srli_epi32(lo, 4);
        hi = _mm512_and_si512(_mm512_srli_epi32(hi, (unsigned)(2 * g)), _mm512_set1_epi32(3));
        __m512i q = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)),
                                     _mm512_set1_epi32(32));
        x[s] = _mm512_mul_ps(_mm512_set1_ps(d * (int8_t)b[192 + j / 16 + s]), _mm512_cvtepi32_ps(q));
    }
    return qa_bf16(x[0], x[1]);
}

/* The 16 x 16 32-bit words of v transposed in place: word c of v[r]
 * becomes word r of v[c]. */
QA_I void qa_t16(__m512i v[16])
{
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
    }
    /* v[4g + c], 128-bit lane L: word 4L + c of rows 4g .. 4g + 3 */
    for (int g = 0; g < 16; g += 4) {
        v[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
        v[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
        v[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
        v[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
    }
    /* per c, the 4 x 4 transpose of lanes of v[c], v[4 + c], v[8 + c], v[12 + c] */
    for (int c = 0; c < 4; c++) {
        __m512i a = _mm512_shuffle_i32x4(v[c], v[4 + c], 0x44);
        __m512i b = _mm512_shuffle_i32x4(v[c], v[4 + c], 0xee);
        __m512i x = _mm512_shuffle_i32x4(v[8 + c], v[12 + c], 0x44);
        __m512i y = _mm512_shuffle_i32x4(v[8 + c], v[12 + c], 0xee);
        t[c] = _mm512_shuffle_i32x4(a, x, 0x88);
        t[4 + c] = _mm512_shuffle_i32x4(a, x, 0xdd);
        t[8 + c] = _mm512_shuffle_i32x4(b, y, 0x88);
        t[12 + c] = _mm512_shuffle_i32x4(b, y, 0xdd);
    }
    for (int i = 0; i < 16; i++)
        v[i] = t[i];
}

/* Rows [0, nb) (nb <= 32) of W over a chunk of kc values (a multiple of
 * 32), the first at w, rows rb bytes apart, into tiles of 16 outputs at
 * dst (rt_core.h's layout), zero past nb up to 32. */
QA_I void qa_cols_t(int store, uint16_t *dst, int64_t nb, int64_t kc, const uint8_t *w, size_t rb)
{
    for (int64_t j = 0; j < 32; j += 16) {
        uint16_t *t = dst + j * RT_AMX_K;
        for (int64_t kk = 0; kk < kc; kk += 32) {
            __m512i v[16];
            for (int64_t r = 0; r < 16; r++) {
                const uint8_t *row = w + (size_t)(j + r) * rb;
                v[r] = j + r >= nb           ? _mm512_setzero_si512()
                       : store == RT_Q8_0 ? qa_q8_0(row, kk)
                       : store == RT_Q4_0 ? qa_q4_0(row, kk)
                       : store == RT_Q4_K ? qa_q4_k(row, kk)
                                          : qa_q6_k(row, kk);
            }
            qa_t16(v);
            for (int p = 0; p < 16; p++)
                _mm512_store_si512(t + (kk / 2 + p) * 32, v[p]);
        }
    }
}

static void qa_cols(int store, uint16_t *dst, int64_t nb, int64_t kc, const uint8_t *w, size_t rb)
{
    if (store == RT_Q8_0)
        qa_cols_t(RT_Q8_0, dst, nb, kc, w, rb);
    else if (store == RT_Q4_0)
        qa_cols_t(RT_Q4_0, dst, nb, kc, w, rb);
    else if (store == RT_Q4_K)
        qa_cols_t(RT_Q4_K, dst, nb, kc, w, rb);
    else
        qa_cols_t(RT_Q6_K, dst, nb, kc, w, rb);
}

/* Prefetch of rows [0, rows) of W's chunk, its bytes at w, rb apart. */
static void qa_prefetch(const uint8_t *w, size_t rb, int64_t rows, size_t bytes)
{
    for (int64_t r = 0; r < rows; r++)
        for (size_t o = 0; o < bytes; o += 64)
            _mm_prefetch((const char *)(w + (size_t)r * rb + o), _MM_HINT_T0);
}

int rt_gemm_q_amx(int store, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                  const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc)
{
    if (m < 16 || store < RT_Q8_0 || store > RT_Q6_K || !rt_amx_begin())
        return 0;
    const int64_t B = rt_q_block(store);
    const size_t bytes = (size_t)rt_q_block_bytes(store), rb = (size_t)(ldw / B) * bytes;
    const uint8_t *wb = (const uint8_t *)w + (size_t)(woff / B) * bytes;
    _Alignas(64) uint16_t small[QA_M * RT_AMX_K], bb[32 * RT_AMX_K];
    uint16_t *ab = m > QA_M && (size_t)m < SIZE_MAX / (4 * RT_AMX_K)
                       ? rt_scratch((size_t)((m + 31) & ~(int64_t)31) * RT_AMX_K * 2)
                       : NULL;
    int64_t rows = ab ? m : QA_M;
    if (!ab)
        ab = small;
    for (int64_t k0 = 0; k0 < k; k0 += RT_AMX_K) {
        int64_t kc = k - k0 < RT_AMX_K ? k - k0 : RT_AMX_K;
        for (int64_t i0 = 0; i0 < m; i0 += rows) {
            int64_t mb = m - i0 < rows ? m - i0 : rows;
            rt_amx_rows(ab, mb, kc, a + i0 * lda + k0, lda);
            for (int64_t j0 = 0; j0 < n; j0 += 32) {
                int64_t nb = n - j0 < 32 ? n - j0 : 32;
                qa_cols(store, bb, nb, kc, wb + (size_t)j0 * rb + (size_t)(k0 / B) * bytes, rb);
                int64_t nj = j0 + 32 < n ? j0 + 32 : 0, nk = nj ? k0 : k0 + RT_AMX_K;
                if (nk < k)
                    qa_prefetch(wb + (size_t)nj * rb + (size_t)(nk / B) * bytes, rb,
                                n - nj < 32 ? n - nj : 32,
                                (size_t)((k - nk < RT_AMX_K ? k - nk : RT_AMX_K) / B) * bytes);
                rt_amx_blocks(mb, nb, kc, ab, bb, c + i0 * ldc + j0, ldc);
            }
        }
    }
    rt_amx_end();
    return 1;
}

#else

int rt_gemm_q_amx(int store, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                  const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc)
{
    (void)store, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)w, (void)woff, (void)ldw;
    (void)c, (void)ldc;
    return 0;
}

#endif
