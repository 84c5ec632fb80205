/* tests/unit/test_qamx.c: qgemm's AMX path (runtime/quant/rt_gemm_q_amx.c)
 * for q8_0, q4_0, q4_k and q6_k: hand-computed blocks whose weights and
 * activations round to bf16 on ties (to even), then every element of C
 * against the bf16-rounded dequantized weights (rt_dequantize's values)
 * times the bf16-rounded rows of A, summed in double, on shapes that pad
 * rows (not multiples of 32, more than a block of 64), outputs (1 to 70)
 * and k (chunks of 256 and a part), with strided A, C and a sub-matrix of
 * a wider weight; refused below 16 rows and for other types; the gemm
 * entry points dispatching to it from 16 rows. Skipped, and said so,
 * where the CPU, the kernel or the build has no AMX. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/quant/rt_qk.h"
#include "tests/unit/testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Whether this machine runs the tiles: a 16-row call of one block works. */
static int amx_here(void)
{
    float a[16 * 32] = {0}, c[16] = {0};
    unsigned char w[34] = {0};
    return rt_gemm_q_amx(RT_Q8_0, 16, 1, 32, a, 32, w, 0, 32, c, 1);
}

#define NEED_AMX() TL_NEED(amx_here(), "no AMX tiles on this machine (or KILN_AMX=off)")

/* q8_0: d = 1 + 2^-8 (half 0x3c04), q 1 and 3: weights 1.00390625 (a tie:
 * bf16 1) and 3.01171875 (bf16 3.015625); a row 2.0078125 (a tie: 2) and
 * 1: C = 0.5 + 2 + 3.015625, exactly (5.52737427 unrounded). q4_0: d =
 * 0.25, value 0's nibble 9 (0.25) and value 16's 0 (-2), the rest 8 (0);
 * a row 4 at 0 and 1 at 16: C = 0.5 + 1 - 2. One output (31 of padding). */
static void hand_computed(void **state)
{
    (void)state;
    NEED_AMX();
    enum { M = 16, K = 32 };
    float a[M * K], c[M];
    unsigned char q8[34] = {0x04, 0x3c, 1, 3}, q4[18] = {0x00, 0x34, 0x09};
    memset(q4 + 3, 0x88, 15);
    memset(a, 0, sizeof a);
    for (int r = 0; r < M; r++) {
        a[r * K] = 2.0078125f;
        a[r * K + 1] = 1;
        c[r] = 0.5f;
    }
    assert_int_equal(rt_gemm_q_amx(RT_Q8_0, M, 1, K, a, K, q8, 0, K, c, 1), 1);
    for (int r = 0; r < M; r++)
        assert_true(c[r] == 5.515625f);
    memset(a, 0, sizeof a);
    for (int r = 0; r < M; r++) {
        a[r * K] = 4;
        a[r * K + 16] = 1;
        c[r] = 0.5f;
    }
    assert_int_equal(rt_gemm_q_amx(RT_Q4_0, M, 1, K, a, K, q4, 0, K, c, 1), 1);
    for (int r = 0; r < M; r++)
        assert_true(c[r] == -0.5f);
}

static uint32_t seed = 777;

static float rnd(void)
{
    seed = seed * 1664525u + 1013904223u;
    return (float)(seed >> 8) / (float)(1 << 24) - 0.5f;
}

static double bf(float x)
{
    return rt_bf16_f32(rt_f32_bf16(x));
}

/* C0 + A W^T for W(j, kk) at woff + j * ldw + kk, woff one block in, ldw
 * two blocks wider than k; A rows k + 3 apart, C's n + 5 (the 5 left
 * alone). Within 2^-20 of the sum of the products' magnitudes: f32
 * accumulation, nothing more. */
static void shape(int store, int64_t m, int64_t n, int64_t k)
{
    int64_t blk = rt_q_block(store), ldw = k + 2 * blk, woff = blk, lda = k + 3, ldc = n + 5;
    int64_t nw = n * ldw;
    float *wf = malloc(sizeof *wf * (size_t)nw), *a = malloc(sizeof *a * (size_t)(m * lda));
    float *c = malloc(sizeof *c * (size_t)(m * ldc)), *c0 = malloc(sizeof *c0 * (size_t)(m * ldc));
    void *w = malloc((size_t)(nw / blk * rt_q_block_bytes(store)));
    assert_non_null(wf), assert_non_null(a), assert_non_null(c), assert_non_null(c0);
    assert_non_null(w);
    for (int64_t i = 0; i < nw; i++)
        wf[i] = rnd();
    rt_quantize(store, wf, w, nw);
    rt_dequantize(store, w, wf, nw);
    for (int64_t i = 0; i < m * lda; i++)
        a[i] = rnd();
    for (int64_t i = 0; i < m * ldc; i++)
        c0[i] = c[i] = rnd();
    assert_int_equal(rt_gemm_q_amx(store, m, n, k, a, lda, w, woff, ldw, c, ldc), 1);
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < ldc; j++) {
            if (j >= n) {
                assert_true(c[r * ldc + j] == c0[r * ldc + j]);
                continue;
            }
            double s = c0[r * ldc + j], mag = fabs(s);
            for (int64_t kk = 0; kk < k; kk++) {
                double p = bf(a[r * lda + kk]) * bf(wf[woff + j * ldw + kk]);
                s += p;
                mag += fabs(p);
            }
            if (fabs(c[r * ldc + j] - s) > mag * 0x1p-20)
                fail_msg("%s m %lld n %lld k %lld: C[%lld][%lld] = %.9g, want %.9g",
                         rt_q_name(store), (long long)m, (long long)n, (long long)k, (long long)r,
                         (long long)j, (double)c[r * ldc + j], s);
        }
    free(wf), free(a), free(c), free(c0), free(w);
}

static void matches_rounded_products(void **state)
{
    (void)state;
    NEED_AMX();
    static const int64_t shapes[][3] = {
        {16, 1, 32}, {17, 5, 64}, {33, 48, 288}, {64, 32, 256}, {65, 70, 800}, {100, 16, 96},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        shape(RT_Q8_0, shapes[i][0], shapes[i][1], shapes[i][2]);
        shape(RT_Q4_0, shapes[i][0], shapes[i][1], shapes[i][2]);
    }
    static const int64_t kshapes[][3] = {{16, 1, 256}, {33, 48, 512}, {65, 70, 768}};
    for (size_t i = 0; i < sizeof kshapes / sizeof kshapes[0]; i++) {
        shape(RT_Q4_K, kshapes[i][0], kshapes[i][1], kshapes[i][2]);
        shape(RT_Q6_K, kshapes[i][0], kshapes[i][1], kshapes[i][2]);
    }
}

static void refuses_what_it_cannot(void **state)
{
    (void)state;
    float a[16 * 256] = {0}, c[16] = {0};
    static unsigned char w[256];
    assert_int_equal(rt_gemm_q_amx(RT_Q8_0, 15, 1, 32, a, 32, w, 0, 32, c, 1), 0);
    assert_int_equal(rt_gemm_q_amx(RT_F8_E4M3, 16, 1, 32, a, 32, w, 0, 32, c, 1), 0);
    assert_int_equal(rt_gemm_q_amx(RT_MXFP4, 16, 1, 32, a, 32, w, 0, 32, c, 1), 0);
}

/* rt_gemm_q8_0 of 16 rows is the tiles' bits; of 15, its int8 path's
 * (1 becomes 63 d, d = 2.0078125 / 127: C 5.5152...), not the tiles'. */
static void gemm_q_dispatches(void **state)
{
    (void)state;
    NEED_AMX();
    enum { M = 16, K = 32 };
    float a[M * K], c[M], t[M];
    unsigned char q8[34] = {0x04, 0x3c, 1, 3};
    memset(a, 0, sizeof a);
    for (int r = 0; r < M; r++) {
        a[r * K] = 2.0078125f;
        a[r * K + 1] = 1;
        c[r] = t[r] = 0.5f;
    }
    rt_gemm_q8_0(M, 1, K, a, K, q8, 0, K, c, 1);
    assert_int_equal(rt_gemm_q_amx(RT_Q8_0, M, 1, K, a, K, q8, 0, K, t, 1), 1);
    for (int r = 0; r < M; r++)
        assert_true(c[r] == t[r]);
    for (int r = 0; r < M; r++)
        c[r] = 0.5f;
    rt_gemm_q8_0(M - 1, 1, K, a, K, q8, 0, K, c, 1);
    for (int r = 0; r < M - 1; r++)
        assert_true(c[r] != t[r] && fabsf(c[r] - 5.52737427f) < 0.05f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hand_computed),
        cmocka_unit_test(matches_rounded_products),
        cmocka_unit_test(refuses_what_it_cannot),
        cmocka_unit_test(gemm_q_dispatches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
