/* tests/unit/test_kernels.c: the runtime's micro-kernels (rt_kernels.c):
 * rt_gemm against a plain loop of fused multiply-adds, bit for bit, on
 * every kind of shape (register tiles, row and column leftovers, strided
 * operands); a reduction split into calls continues the same sums; and
 * rt_pack_panels' layout and refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/kiln_rt.h"
#include "tests/unit/testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* C[m][n] += A[m][k] B[k][n], one fmaf per product in k order: what
 * rt_gemm promises, written the plain way. */
static void gemm_ref(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float s = c[i * ldc + j];
            for (int64_t q = 0; q < k; q++)
                s = fmaf(a[i * lda + q], b[q * ldb + j], s);
            c[i * ldc + j] = s;
        }
}

/* rt_gemm on operands with `pad` spare columns per row equals gemm_ref,
 * and leaves the spare columns alone. */
static void same_as_ref(int64_t m, int64_t n, int64_t k, int64_t pad)
{
    int64_t lda = k + pad, ldb = n + pad, ldc = n + pad;
    float *a = tl_random(m * lda, 1), *b = tl_random(k * ldb, 2);
    float *c = tl_random(m * ldc, 3), *want = malloc(sizeof *want * (size_t)(m * ldc));
    memcpy(want, c, sizeof *want * (size_t)(m * ldc));
    rt_gemm(m, n, k, a, lda, b, ldb, c, ldc);
    gemm_ref(m, n, k, a, lda, b, ldb, want, ldc);
    if (memcmp(c, want, sizeof *c * (size_t)(m * ldc)) != 0)
        fail_msg("rt_gemm m=%lld n=%lld k=%lld pad=%lld differs from the plain loop",
                 (long long)m, (long long)n, (long long)k, (long long)pad);
    free(a), free(b), free(c), free(want);
}

static void gemm_tiles(void **state)
{
    (void)state;
    /* every register tile the tile pass asks for */
    for (int64_t nr = 16; nr <= 64; nr *= 2)
        for (int64_t m = 1; m <= 256 / nr; m++)
            same_as_ref(m, nr, 37, 0);
}

static void gemm_any_shape(void **state)
{
    (void)state;
    /* rows past a tile, 48 columns (32 + 16), column leftovers, k of 1 */
    int64_t ms[] = {1, 3, 6, 9, 17, 24, 40}, ns[] = {1, 5, 16, 17, 48, 80, 100}, ks[] = {1, 2, 31, 300};
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
        for (size_t j = 0; j < sizeof ns / sizeof *ns; j++)
            for (size_t q = 0; q < sizeof ks / sizeof *ks; q++)
                same_as_ref(ms[i], ns[j], ks[q], (int64_t)(i + j) % 3);
}

/* Calls over k ranges continue the sums: bit for bit one call. */
static void gemm_split_k(void **state)
{
    (void)state;
    int64_t m = 8, n = 32, k = 1000;
    float *a = tl_random(m * k, 4), *b = tl_random(k * n, 5);
    float *one = calloc((size_t)(m * n), sizeof *one), *parts = calloc((size_t)(m * n), sizeof *parts);
    rt_gemm(m, n, k, a, k, b, n, one, n);
    for (int64_t k0 = 0; k0 < k; k0 += 250)
        rt_gemm(m, n, 250, a + k0, k, b + k0 * n, n, parts, n);
    assert_memory_equal(one, parts, sizeof *one * (size_t)(m * n));
    free(a), free(b), free(one), free(parts);
}

static void pack_layout(void **state)
{
    (void)state;
    int64_t batch = 2, n = 64, k = 3, nr = 32;
    float *w = rt_alloc(sizeof *w * (size_t)(batch * n * k));
    for (int64_t i = 0; i < batch * n * k; i++)
        w[i] = (float)i;
    rt_err e = {0, ""};
    assert_int_equal(rt_pack_panels((void **)&w, batch, n, k, nr, 4, &e), 0);
    /* panel p of batch q: [k][nr], element [kk][c] is row p*nr + c, column kk */
    for (int64_t q = 0; q < batch; q++)
        for (int64_t p = 0; p < n / nr; p++)
            for (int64_t kk = 0; kk < k; kk++)
                for (int64_t c = 0; c < nr; c++)
                    assert_true(w[((q * (n / nr) + p) * k + kk) * nr + c] ==
                                (float)((q * n + p * nr + c) * k + kk));
    rt_free(w);
}

static void pack_refused(void **state)
{
    (void)state;
    float *w = rt_alloc(sizeof *w * 48), *kept = w;
    rt_err e = {0, ""};
    assert_int_equal(rt_pack_panels((void **)&w, 1, 48, 1, 32, 4, &e), RT_EINTERNAL);
    assert_ptr_equal(w, kept);
    assert_string_equal(e.msg, "cannot pack [1][48][1] in panels of 32");
    rt_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_tiles),   cmocka_unit_test(gemm_any_shape),
        cmocka_unit_test(gemm_split_k), cmocka_unit_test(pack_layout),
        cmocka_unit_test(pack_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
