/* tests/unit/test_amx.c: rt_gemm_bf16's pair products, on AMX tiles
 * (runtime/core/rt_amx.c) and by vdpbf16ps (runtime/core/rt_bf16dp.c),
 * each to the same contract: the rows of A rounded to bf16 to nearest even
 * (hand-computed ties), then
 * every element of C against the products of the rounded rows and B
 * summed in double, for shapes that pad rows, columns and k (partial
 * blocks of 32 and chunks of 256); refused below 16 rows and for columns
 * not a multiple of 16; rt_gemm_bf16 dispatching to them. Each path is
 * skipped, and said so, where the CPU, the kernel or the build lacks it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/kiln_rt.h"
#include "runtime/core/rt_core.h"
#include "runtime/rt_pairs.h"
#include "tests/unit/testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*gemm_fn)(uint64_t scope, int64_t m, int64_t n, int64_t k, const float *a,
                       int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc);

/* Whether this machine runs path f: a 16 x 16 call of k = 1 works. */
static int here(gemm_fn f)
{
    float a[16] = {0}, c[256] = {0};
    uint16_t b[16] = {0};
    return f(0, 16, 16, 1, a, 1, b, 16, c, 16);
}

/* The path a test runs: each test runs once per path (main). */
static gemm_fn path;

#define NEED_PATH()                                                          \
    TL_NEED(here(path), path == rt_gemm_bf16_amx                             \
                            ? "no AMX tiles on this machine (or KILN_AMX=off)" \
                            : "no AVX512-BF16 in this build (or KILN_AMX=off)")

static float bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Ties of the rounding: 1 + 2^-8 (a tie, to 1: even) and 1 + 3 * 2^-8 (a
 * tie, to 1 + 2^-6) times 1, summed: 2.015625 exactly; and 1 + 2^-9 (below
 * the tie: 1) times 3 plus 1.0078125 (exact in bf16) times -1. */
static void rounds_rows_to_nearest_even(void **state)
{
    (void)state;
    NEED_PATH();
    enum { M = 16, N = 16, K = 2 };
    float a[M * K], c[M * N];
    uint16_t b[K * N];
    for (int r = 0; r < M; r++) {
        a[r * K] = r % 2 ? bits(0x3f808000) : 1.00390625f;          /* 1 + 2^-9 : 1 + 2^-8 */
        a[r * K + 1] = r % 2 ? 1.0078125f : 1.01171875f;
    }
    for (int j = 0; j < N; j++) {
        b[j] = j % 2 ? 0x4040 : 0x3f80;                              /* 3 : 1 */
        b[N + j] = j % 2 ? 0xbf80 : 0x3f80;                          /* -1 : 1 */
    }
    memset(c, 0, sizeof c);
    assert_int_equal(path(0, M, N, K, a, K, b, N, c, N), 1);
    for (int r = 0; r < M; r++)
        for (int j = 0; j < N; j++) {
            double x0 = r % 2 ? 1.0 : 1.0, x1 = r % 2 ? 1.0078125 : 1.015625;
            double want = x0 * (j % 2 ? 3 : 1) + x1 * (j % 2 ? -1 : 1);
            assert_true(c[r * N + j] == (float)want);
        }
}

static uint32_t seed = 12345;

static float rnd(void)
{
    seed = seed * 1664525u + 1013904223u;
    return (float)(seed >> 8) / (float)(1 << 24) - 0.5f;
}

/* C0 + A B against the rounded A's products in double: within 2^-20 of
 * the sum of the products' magnitudes (f32 accumulation, nothing more). */
static void shape(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc)
{
    float *a = malloc(sizeof *a * (size_t)(m * lda)), *c = malloc(sizeof *c * (size_t)(m * ldc));
    float *c0 = malloc(sizeof *c0 * (size_t)(m * ldc));
    uint16_t *b = malloc(sizeof *b * (size_t)(k * ldb));
    assert_non_null(a), assert_non_null(b), assert_non_null(c), assert_non_null(c0);
    for (int64_t i = 0; i < m * lda; i++)
        a[i] = rnd();
    for (int64_t i = 0; i < k * ldb; i++)
        b[i] = rt_f32_bf16(rnd());
    for (int64_t i = 0; i < m * ldc; i++)
        c0[i] = c[i] = rnd();
    assert_int_equal(path(0, m, n, k, a, lda, b, ldb, c, ldc), 1);
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < ldc; j++) {
            if (j >= n) {                               /* past the call's columns: untouched */
                assert_true(c[r * ldc + j] == c0[r * ldc + j]);
                continue;
            }
            double s = c0[r * ldc + j], mag = fabs(s);
            for (int64_t kk = 0; kk < k; kk++) {
                double p = (double)rt_bf16_f32(rt_f32_bf16(a[r * lda + kk])) *
                           rt_bf16_f32(b[kk * ldb + j]);
                s += p;
                mag += fabs(p);
            }
            if (fabs(c[r * ldc + j] - s) > mag * 0x1p-20) {
                fail_msg("m %lld n %lld k %lld: C[%lld][%lld] = %.9g, want %.9g", (long long)m,
                         (long long)n, (long long)k, (long long)r, (long long)j,
                         (double)c[r * ldc + j], s);
            }
        }
    free(a), free(b), free(c), free(c0);
}

static void matches_rounded_products(void **state)
{
    (void)state;
    NEED_PATH();
    static const int64_t shapes[][3] = {
        {16, 16, 1}, {16, 16, 32}, {17, 48, 33}, {32, 32, 256}, {33, 80, 257},
        {64, 64, 768}, {100, 144, 600}, {65, 16, 31}, {128, 64, 2048},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
        shape(m, n, k, k, n, n);
        shape(m, n, k, k + 3, n + 16, n + 5);           /* strided rows, columns left alone */
    }
}

static void refuses_what_it_cannot(void **state)
{
    (void)state;
    float a[32 * 8] = {0}, c[32 * 24] = {0};
    uint16_t b[8 * 24] = {0};
    assert_int_equal(path(0, 15, 16, 8, a, 8, b, 24, c, 24), 0);     /* rows */
    assert_int_equal(path(0, 32, 24, 8, a, 8, b, 24, c, 24), 0);     /* columns */
    assert_int_equal(path(0, 32, 16, 0, a, 8, b, 24, c, 24), 0);     /* no k */
    assert_int_equal(path(rt_keep_scope(), 15, 16, 8, a, 8, b, 24, c, 24), 0);
}

/* rt_gemm_bf16 (and rt_gemm_bf16_kept) of 16 rows or more is the pair
 * products' (rows rounded: not rt_gemm's exact sums) where either path
 * runs; of fewer, exact. */
static void gemm_bf16_dispatches(void **state)
{
    (void)state;
    TL_NEED(here(rt_gemm_bf16_amx) || here(rt_gemm_bf16_vdp),
            "no AMX tiles or AVX512-BF16 here (or KILN_AMX=off)");
    enum { M = 16, N = 16, K = 1 };
    float a[M * K], c[M * N], e[M * N];
    uint16_t b[K * N];
    for (int r = 0; r < M; r++)
        a[r] = 1.00390625f;                             /* rounds to 1 on the tiles */
    for (int j = 0; j < N; j++)
        b[j] = 0x3f80;
    memset(c, 0, sizeof c);
    memset(e, 0, sizeof e);
    rt_gemm_bf16(M, N, K, a, K, b, N, c, N);
    rt_gemm_bf16(M - 1, N, K, a, K, b, N, e, N);
    assert_true(c[0] == 1.0f);
    assert_true(e[0] == 1.00390625f);
    uint64_t scope = rt_keep_scope();                   /* rt_gemm_bf16_kept: likewise */
    rt_gemm_bf16_kept(scope, M, N, K, a, K, b, N, c, N);
    rt_gemm_bf16_kept(scope, M - 1, N, K, a, K, b, N, e, N);
    assert_true(c[0] == 2.0f);
    assert_true(e[0] == 2 * 1.00390625f);
}

/* Calls of one scope (rt_gemm_bf16_kept) give each C exactly what calls
 * without a scope give: five operands of A (two of them halves of one
 * matrix's k, as generated code slices it, two the same pointer with
 * another m or lda) in turn, twice round, so that the four a thread keeps
 * are replaced and found again; padded rows, columns and k. A new scope
 * rounds an A whose values have changed anew. */
static void scope_keeps_the_same_numbers(void **state)
{
    (void)state;
    NEED_PATH();
    enum { M = 100, K = 600, N = 80, CALLS = 5 };
    static const int64_t op[CALLS][4] = {      /* offset into a, m, k, lda */
        {0, M, 300, K}, {300, M, 300, K}, {0, M, K, K}, {0, 64, K, K}, {1, 33, 257, K - 1},
    };
    float *a = malloc(sizeof *a * M * K), *want = malloc(sizeof *want * CALLS * M * N);
    float *got = malloc(sizeof *got * M * N);
    uint16_t *b = malloc(sizeof *b * K * N);
    assert_non_null(a), assert_non_null(want), assert_non_null(got), assert_non_null(b);
    for (int64_t i = 0; i < M * K; i++)
        a[i] = rnd();
    for (int64_t i = 0; i < K * N; i++)
        b[i] = rt_f32_bf16(rnd());
    for (int i = 0; i < CALLS; i++) {
        memset(want + i * M * N, 0, sizeof *want * M * N);
        assert_int_equal(path(0, op[i][1], N, op[i][2], a + op[i][0], op[i][3], b, N,
                              want + i * M * N, N), 1);
    }
    uint64_t scope = rt_keep_scope();
    assert_true(scope != 0 && rt_keep_scope() != scope);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < CALLS; i++) {
            memset(got, 0, sizeof *got * M * N);
            assert_int_equal(path(scope, op[i][1], N, op[i][2], a + op[i][0], op[i][3], b, N,
                                  got, N), 1);
            assert_memory_equal(got, want + i * M * N, sizeof *got * (size_t)(op[i][1] * N));
        }
    for (int64_t i = 0; i < M * K; i++)
        a[i] = -a[i];
    memset(got, 0, sizeof *got * M * N);
    assert_int_equal(path(rt_keep_scope(), M, N, K, a, K, b, N, got, N), 1);
    for (int64_t i = 0; i < M * N; i++)
        assert_true(got[i] == -want[2 * M * N + i]);
    free(a), free(want), free(got), free(b);
}

static int on_tiles(void **state)
{
    (void)state;
    path = rt_gemm_bf16_amx;
    return 0;
}

static int on_vectors(void **state)
{
    (void)state;
    path = rt_gemm_bf16_vdp;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(rounds_rows_to_nearest_even, on_tiles),
        cmocka_unit_test_setup(matches_rounded_products, on_tiles),
        cmocka_unit_test_setup(refuses_what_it_cannot, on_tiles),
        cmocka_unit_test_setup(scope_keeps_the_same_numbers, on_tiles),
        cmocka_unit_test_setup(rounds_rows_to_nearest_even, on_vectors),
        cmocka_unit_test_setup(matches_rounded_products, on_vectors),
        cmocka_unit_test_setup(refuses_what_it_cannot, on_vectors),
        cmocka_unit_test_setup(scope_keeps_the_same_numbers, on_vectors),
        cmocka_unit_test(gemm_bf16_dispatches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
