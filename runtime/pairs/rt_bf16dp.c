/* runtime/pairs/rt_bf16dp.c: rt_gemm_bf16's calls of 16 rows or more by
 * AVX512-BF16's vdpbf16ps, on CPUs that have it but no AMX tiles.
 *
 * Contract (rt_gemm_bf16_vdp): rt_gemm_bf16_amx's (rt_amx.c). C[m][n] +=
 * A[m][k] B[k][n], A f32, B bf16, for m >= 16 and n a multiple of 16;
 * returns 1 when done, 0 when this build has no AVX512-BF16 or KILN_AMX
 * is "off" in the environment (the caller then computes the call
 * itself). Lossy: A is rounded to bf16 (to nearest even) as it is read,
 * and each lane adds its products in pairs of k (vdpbf16ps), not
 * rt_gemm's one fused multiply-add at a time. The numbers depend only on
 * the call's operands, never on threads.
 *
 * Algorithm: the tiles' driver (rt_pairs_drive: columns in blocks of 64,
 * the reduction in chunks of RT_AMX_K, rows in blocks of 64; per chunk
 * its columns of B paired once for all rows, per block of rows the
 * chunk's rows of A rounded to bf16), with registers for tiles: each block
 * of C (vd_blocks) in register tiles of up to 6 rows x
 * 64 columns: 24 accumulators, 4 vectors of B pairs a pair of k, each
 * row's pair broadcast. Measured on the Zen 4 machine (AVX512-BF16, no
 * AMX), docs/16-bit-weights.md. */
#include "runtime/core/rt_core.h"
#include "runtime/rt_pairs.h"

#ifdef RT_BF16DP
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

enum { VD_R = 6, VD_T = RT_AMX_K * 16 };

/* C rows [0, mr) x tiles [0, nt) of 16 columns += the chunk's kp values
 * of k: a bf16 rows RT_AMX_K apart, b the tiles of pairs. */
static inline __attribute__((always_inline)) void vd_tile(int mr, int nt, float *c, int64_t ldc,
                                                          const uint16_t *a, const uint16_t *b,
                                                          int64_t kp)
{
    __m512 acc[VD_R][4];
    for (int r = 0; r < mr; r++)
        for (int t = 0; t < nt; t++)
            acc[r][t] = _mm512_loadu_ps(c + r * ldc + 16 * t);
    for (int64_t p = 0; p < kp / 2; p++) {
        __m512bh v[4];
        for (int t = 0; t < nt; t++)
            v[t] = (__m512bh)_mm512_loadu_si512(b + t * VD_T + p * 32);
        for (int r = 0; r < mr; r++) {
            int32_t pair;
            memcpy(&pair, a + r * RT_AMX_K + 2 * p, sizeof pair);
            __m512bh u = (__m512bh)_mm512_set1_epi32(pair);
            for (int t = 0; t < nt; t++)
                acc[r][t] = _mm512_dpbf16_ps(acc[r][t], u, v[t]);
        }
    }
    for (int r = 0; r < mr; r++)
        for (int t = 0; t < nt; t++)
            _mm512_storeu_ps(c + r * ldc + 16 * t, acc[r][t]);
}

#define VD_CASE(R, T)                                                        \
    case (R) * 8 + (T):                                                      \
        vd_tile(R, T, c, ldc, a, b, kp);                                     \
        break

/* One register tile of mr <= 6 rows and nt <= 4 tiles of columns. */
static void vd_rows(int mr, int nt, float *c, int64_t ldc, const uint16_t *a, const uint16_t *b,
                    int64_t kp)
{
    switch (mr * 8 + nt) {
    VD_CASE(1, 1); VD_CASE(1, 2); VD_CASE(1, 3); VD_CASE(1, 4);
    VD_CASE(2, 1); VD_CASE(2, 2); VD_CASE(2, 3); VD_CASE(2, 4);
    VD_CASE(3, 1); VD_CASE(3, 2); VD_CASE(3, 3); VD_CASE(3, 4);
    VD_CASE(4, 1); VD_CASE(4, 2); VD_CASE(4, 3); VD_CASE(4, 4);
    VD_CASE(5, 1); VD_CASE(5, 2); VD_CASE(5, 3); VD_CASE(5, 4);
    VD_CASE(6, 1); VD_CASE(6, 2); VD_CASE(6, 3); VD_CASE(6, 4);
    default: break;
    }
}

#undef VD_CASE

/* A block of rt_pairs_drive, register tile by register tile. */
static void vd_blocks(int64_t mb, int64_t nb, int64_t kp, const uint16_t *a, const uint16_t *b,
                      float *c, int64_t ldc)
{
    for (int64_t r = 0; r < mb; r += VD_R)
        vd_rows(mb - r < VD_R ? (int)(mb - r) : VD_R, (int)(nb / 16), c + r * ldc, ldc,
                a + r * RT_AMX_K, b, kp);
}

/* 1 unless KILN_AMX is "off", which turns the pair products off, the
 * tiles' and these alike. Decided once; two threads deciding agree. */
static int vd_usable(void)
{
    static int state;                   /* 0 unknown, 1 yes, -1 no */
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == 0) {
        const char *env = getenv("KILN_AMX");
        s = env && strcmp(env, "off") == 0 ? -1 : 1;
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    return s == 1;
}

int rt_gemm_bf16_vdp(uint64_t scope, int64_t m, int64_t n, int64_t k, const float *a,
                     int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc)
{
    if (m < 16 || n % 16 || k < 1 || !vd_usable())
        return 0;
    rt_pairs_drive(scope, m, n, k, a, lda, b, ldb, c, ldc, vd_blocks);
    return 1;
}

#else

int rt_gemm_bf16_vdp(uint64_t scope, int64_t m, int64_t n, int64_t k, const float *a,
                     int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc)
{
    (void)scope, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc;
    return 0;
}

#endif

/* The part's gemm, installed in the core before main (rt_pairs_use): the
 * tiles where the program can use them, else vdpbf16ps. */
static int vd_pairs(uint64_t scope, int64_t m, int64_t n, int64_t k, const float *a,
                    int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc)
{
    return rt_gemm_bf16_amx(scope, m, n, k, a, lda, b, ldb, c, ldc) ||
           rt_gemm_bf16_vdp(scope, m, n, k, a, lda, b, ldb, c, ldc);
}

__attribute__((constructor)) static void vd_install(void) { rt_pairs_use(vd_pairs); }
