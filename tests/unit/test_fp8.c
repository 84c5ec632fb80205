/* tests/unit/test_fp8.c: FP8 weights (docs/fp8.md): e4m3 bytes decoded
 * and encoded on hand-computed values, every byte round trip; f8_e4m3
 * blocks quantized, widened and read an element at a time;
 * rt_gemm_f8_e4m3 bit for bit against its contract replayed here in
 * scalar C (the Makefile builds this test against the kernel's AVX-512
 * path and again its portable C, test_fp8_c) and near the f32 product. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/kiln_rt.h"
#include "runtime/rt_quant.h"
#include "tests/unit/testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* e4m3: s eeee mmm; exponent bias 7; e = 0 subnormal (m/8 * 2^-6);
 * no infinities; s 1111 111 (0x7f, 0xff) NaN; largest 0 1111 110 = 448. */
static void e4m3_decode(void **state)
{
    (void)state;
    assert_true(rt_e4m3_f32(0x00) == 0.0f);                     /* +0 */
    assert_true(rt_e4m3_f32(0x80) == 0.0f && signbit(rt_e4m3_f32(0x80)));  /* -0 */
    assert_true(rt_e4m3_f32(0x38) == 1.0f);                     /* 0 0111 000: 2^(7-7) */
    assert_true(rt_e4m3_f32(0xb8) == -1.0f);                    /* sign set */
    assert_true(rt_e4m3_f32(0x3c) == 1.5f);                     /* 0 0111 100: 1 + 4/8 */
    assert_true(rt_e4m3_f32(0x40) == 2.0f);                     /* 0 1000 000: 2^1 */
    assert_true(rt_e4m3_f32(0x7e) == 448.0f);                   /* 0 1111 110: 2^8 * 1.75 */
    assert_true(rt_e4m3_f32(0xfe) == -448.0f);
    assert_true(isnan(rt_e4m3_f32(0x7f)));                      /* 0 1111 111: NaN */
    assert_true(isnan(rt_e4m3_f32(0xff)));
    assert_true(rt_e4m3_f32(0x78) == 256.0f);                   /* 0 1111 000: no inf */
    assert_true(rt_e4m3_f32(0x08) == 0x1p-6f);                  /* 0 0001 000: least normal */
    assert_true(rt_e4m3_f32(0x01) == 0x1p-9f);                  /* 0 0000 001: 1/8 * 2^-6 */
    assert_true(rt_e4m3_f32(0x07) == 7 * 0x1p-9f);              /* 0 0000 111: largest subnormal */
    assert_true(rt_e4m3_f32(0x85) == -5 * 0x1p-9f);
    assert_true(rt_e4m3_f32(0x2b) == 0.34375f);                 /* 0 0101 011: 2^-2 * 11/8 */
}

static void e4m3_encode(void **state)
{
    (void)state;
    assert_int_equal(rt_f32_e4m3(1.0f), 0x38);
    assert_int_equal(rt_f32_e4m3(-2.0f), 0xc0);
    assert_int_equal(rt_f32_e4m3(448.0f), 0x7e);
    /* 1 + 1/16 is halfway between 1 (mantissa 000, even) and 1 + 1/8: down */
    assert_int_equal(rt_f32_e4m3(1.0625f), 0x38);
    /* 1 + 3/16 is halfway between 1 + 1/8 (odd) and 1 + 2/8: up to 010 */
    assert_int_equal(rt_f32_e4m3(1.1875f), 0x3a);
    /* 464 is halfway between 448 (110, even) and 480 (the NaN code): 448 */
    assert_int_equal(rt_f32_e4m3(464.0f), 0x7e);
    /* past it: NaN, of the value's sign (no infinities to saturate to) */
    assert_int_equal(rt_f32_e4m3(465.0f), 0x7f);
    assert_int_equal(rt_f32_e4m3(-1e9f), 0xff);
    assert_int_equal(rt_f32_e4m3(INFINITY), 0x7f);
    assert_int_equal(rt_f32_e4m3(NAN), 0x7f);
    /* subnormals: multiples of 2^-9; 3 * 2^-10 is a tie between 1 and 2
     * (times 2^-9): to even, 2 */
    assert_int_equal(rt_f32_e4m3(3 * 0x1p-10f), 0x02);
    assert_int_equal(rt_f32_e4m3(5 * 0x1p-10f), 0x02);          /* 2.5: tie, to 2 */
    assert_int_equal(rt_f32_e4m3(0x1p-10f), 0x00);              /* 0.5: tie, to 0 */
    assert_int_equal(rt_f32_e4m3(0x1.2p-10f), 0x01);            /* above the tie */
    assert_int_equal(rt_f32_e4m3(-7 * 0x1p-9f), 0x87);
    /* 7.5 * 2^-9 rounds up into the least normal, 0 0001 000 */
    assert_int_equal(rt_f32_e4m3(7.5f * 0x1p-9f), 0x08);
    assert_int_equal(rt_f32_e4m3(1e-30f), 0x00);
    assert_int_equal(rt_f32_e4m3(-0.0f), 0x80);
    /* every byte but the NaNs round trips */
    for (int b = 0; b < 256; b++)
        if ((b & 0x7f) != 0x7f)
            assert_int_equal(rt_f32_e4m3(rt_e4m3_f32((uint8_t)b)), b);
}

static void blocks(void **state)
{
    (void)state;
    assert_int_equal(rt_q_block(RT_F8_E4M3), 32);
    assert_int_equal(rt_q_block_bytes(RT_F8_E4M3), 36);
    assert_string_equal(rt_q_name(RT_F8_E4M3), "f8_e4m3");
    float x[64], y[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)((i * 37 % 29) - 14) * (i < 32 ? 0.25f : 3.0f);
    x[5] = 3.5f;                         /* the first block's largest: 448 */
    unsigned char q[72];
    rt_quantize(RT_F8_E4M3, x, q, 64);
    float d;
    memcpy(&d, q, 4);
    assert_true(d == 3.5f / 448);
    assert_int_equal(q[4 + 5], 0x7e);
    rt_dequantize(RT_F8_E4M3, q, y, 64);
    for (int i = 0; i < 64; i++) {
        assert_true(fabsf(y[i] - x[i]) <= fabsf(x[i]) / 16 + 1e-6f);
        assert_true(rt_f8_e4m3_at(q, i) == y[i]);
    }
    assert_int_equal(rt_q_check(RT_F8_E4M3, q, 64), 0);
    float inf = INFINITY;
    memcpy(q + 36, &inf, 4);
    assert_int_equal(rt_q_check(RT_F8_E4M3, q, 64), 2);
}

/* The kernel's contract (rt_quant.h) in scalar C. */
static float replay(const float *a, const unsigned char *w, int64_t k, float c)
{
    float L[16] = {0};
    for (int64_t b = 0; b < k / 32; b++) {
        const unsigned char *p = w + b * 36;
        float d;
        memcpy(&d, p, 4);
        for (int l = 0; l < 16; l++) {
            float t = rt_e4m3_f32(p[4 + l]) * a[b * 32 + l];
            t = fmaf(rt_e4m3_f32(p[20 + l]), a[b * 32 + 16 + l], t);
            L[l] = fmaf(t, d, L[l]);
        }
    }
    for (int h = 8; h; h >>= 1)
        for (int l = 0; l < h; l++)
            L[l] += L[l + h];
    return c + L[0];
}

static void gemm(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{1, 1, 32}, {1, 9, 96}, {3, 5, 64}, {5, 8, 160},
                                        {8, 4, 32}, {7, 13, 256}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], lda = k + 3, ldc = n + 2;
        float *a = malloc(sizeof *a * (size_t)(m * lda)), *wf = malloc(sizeof *wf * (size_t)(n * k));
        float *c = malloc(sizeof *c * (size_t)(m * ldc)), *wd = malloc(sizeof *wd * (size_t)(n * k));
        unsigned char *w = malloc((size_t)(n * k / 32 * 36));
        rt_fill_random(a, m * lda, 11 + s, 2.0);
        rt_fill_random(wf, n * k, 23 + s, 0.05);
        wf[0] = 1e-5f;                   /* subnormal bytes in the block */
        wf[1] = -3e-5f;
        rt_fill_random(c, m * ldc, 5, 1.0);
        rt_quantize(RT_F8_E4M3, wf, w, n * k);
        rt_dequantize(RT_F8_E4M3, w, wd, n * k);
        float *want = malloc(sizeof *want * (size_t)(m * ldc));
        memcpy(want, c, sizeof *c * (size_t)(m * ldc));
        rt_gemm_f8_e4m3(m, n, k, a, lda, w, 0, k, c, ldc);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                float r = replay(a + i * lda, w + j * (k / 32 * 36), k, want[i * ldc + j]);
                double exact = want[i * ldc + j];
                for (int64_t kk = 0; kk < k; kk++)
                    exact += (double)a[i * lda + kk] * wd[j * k + kk];
                assert_memory_equal(&c[i * ldc + j], &r, sizeof r);
                assert_true(fabs(c[i * ldc + j] - exact) < 1e-4);
            }
        /* the second half of W's rows, from a row offset (woff) */
        if (n > 1) {
            float c2 = want[0];
            int64_t j = n / 2;
            rt_gemm_f8_e4m3(1, 1, k, a, lda, w, j * k, k, &c2, 1);
            float r = replay(a, w + j * (k / 32 * 36), k, want[0]);
            assert_memory_equal(&c2, &r, sizeof r);
        }
        free(a), free(wf), free(c), free(wd), free(w), free(want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(e4m3_decode),
        cmocka_unit_test(e4m3_encode),
        cmocka_unit_test(blocks),
        cmocka_unit_test(gemm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
