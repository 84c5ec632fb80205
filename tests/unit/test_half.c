/* tests/unit/test_half.c: 16-bit weights (--weight-dtype): rounding to
 * bf16 and IEEE half on hand-computed values (ties to even, NaN, inf,
 * subnormals) and every 16-bit pattern round trip; rt_gemm_bf16 and
 * rt_gemm_f16 bit for bit against rt_gemm on the widened B, and every
 * kind of half through rt_gemm_f16's vector paths; packing
 * 16-bit panels; rt_load_weights holding 16 bits an element, a BF16
 * file's tensor copied bit for bit, an F32 one rounded. */
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

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void bf16_rounding(void **state)
{
    (void)state;
    assert_int_equal(rt_f32_bf16(1.0f), 0x3f80);
    assert_int_equal(rt_f32_bf16(-2.0f), 0xc000);
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even, down */
    assert_int_equal(rt_f32_bf16(1.00390625f), 0x3f80);
    /* 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up */
    assert_int_equal(rt_f32_bf16(1.01171875f), 0x3f82);
    /* just above the tie: up */
    assert_int_equal(rt_f32_bf16(from_bits(0x3f808001)), 0x3f81);
    assert_int_equal(rt_f32_bf16(INFINITY), 0x7f80);
    assert_int_equal(rt_f32_bf16(-INFINITY), 0xff80);
    assert_int_equal(rt_f32_bf16(from_bits(0x7f7fffff)), 0x7f80);   /* FLT_MAX: inf */
    /* NaN stays NaN, even with only the low payload bits set */
    uint16_t n = rt_f32_bf16(from_bits(0x7f800001));
    assert_true(isnan(rt_bf16_f32(n)));
    assert_true(isnan(rt_bf16_f32(rt_f32_bf16(NAN))));
    assert_int_equal(rt_f32_bf16(from_bits(0xffc00000)) & 0x8000, 0x8000);
    /* subnormals round as any value: 2^-133 (bits 0x8000) is a tie to 0 */
    assert_int_equal(rt_f32_bf16(from_bits(0x00008000)), 0x0000);
    assert_int_equal(rt_f32_bf16(from_bits(0x00018000)), 0x0002);
    assert_int_equal(rt_f32_bf16(from_bits(0x00010000)), 0x0001);
    assert_int_equal(rt_f32_bf16(from_bits(0x80008001)), 0x8001);
    assert_true(rt_bf16_f32(0x0001) == from_bits(0x00010000));
}

static void f16_rounding(void **state)
{
    (void)state;
    assert_int_equal(rt_f32_f16(1.0f), 0x3c00);
    assert_int_equal(rt_f32_f16(-2.0f), 0xc000);
    assert_int_equal(rt_f32_f16(65504.0f), 0x7bff);                 /* largest half */
    assert_int_equal(rt_f32_f16(65519.99f), 0x7bff);
    assert_int_equal(rt_f32_f16(65520.0f), 0x7c00);                 /* the tie: inf */
    assert_int_equal(rt_f32_f16(1e9f), 0x7c00);
    assert_int_equal(rt_f32_f16(-INFINITY), 0xfc00);
    /* 1 + 2^-11: a tie between 1 and 1 + 2^-10: down; 1 + 3 * 2^-11: up */
    assert_int_equal(rt_f32_f16(1.00048828125f), 0x3c00);
    assert_int_equal(rt_f32_f16(1.00146484375f), 0x3c02);
    assert_int_equal(rt_f32_f16(6.103515625e-05f), 0x0400);         /* 2^-14 */
    assert_int_equal(rt_f32_f16(5.9604644775390625e-08f), 0x0001);  /* 2^-24 */
    assert_int_equal(rt_f32_f16(2.98023223876953125e-08f), 0x0000); /* 2^-25: tie to 0 */
    assert_int_equal(rt_f32_f16(4.4703483581542969e-08f), 0x0001);  /* 1.5 * 2^-25 */
    assert_int_equal(rt_f32_f16(8.9406967163085938e-08f), 0x0002);  /* 1.5 * 2^-24: tie up */
    assert_int_equal(rt_f32_f16(-1e-30f), 0x8000);
    assert_int_equal(rt_f32_f16(from_bits(0x00000001)), 0x0000);    /* f32 subnormal */
    /* largest subnormal rounding into the smallest normal */
    assert_int_equal(rt_f32_f16(6.1e-05f), 0x03ff);
    assert_int_equal(rt_f32_f16(from_bits(0x387ff000)), 0x0400);
    assert_true(isnan(rt_f16_f32(rt_f32_f16(NAN))));
    assert_true(isnan(rt_f16_f32(rt_f32_f16(from_bits(0x7f800001)))));
    assert_true(rt_f16_f32(0x0001) == 5.9604644775390625e-08f);
    assert_true(rt_f16_f32(0x8400) == -6.103515625e-05f);
    assert_true(rt_f16_f32(0x7c00) == INFINITY);
}

/* Every 16-bit pattern widens exactly and rounds back to itself (a NaN
 * to a NaN). */
static void round_trips(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float b = rt_bf16_f32((uint16_t)h), f = rt_f16_f32((uint16_t)h);
        if (isnan(b))
            assert_true(isnan(rt_bf16_f32(rt_f32_bf16(b))));
        else if (rt_f32_bf16(b) != h)
            fail_msg("bf16 %04x does not round trip", h);
        if (isnan(f))
            assert_true(isnan(rt_f16_f32(rt_f32_f16(f))));
        else if (rt_f32_f16(f) != h)
            fail_msg("f16 %04x does not round trip (%g)", h, f);
        /* rt_round_half agrees with the scalar functions */
        uint16_t o;
        rt_round_half(&o, &b, 1, RT_BF16);
        assert_true(isnan(b) || o == h);
    }
}

/* rt_gemm_X(B16) == rt_gemm(widened B16), bit for bit, on shapes with
 * leftover columns and strided operands; f16's B holds subnormals. The
 * exact path even at 16 rows: main turns AMX off (test_amx has it). */
static void gemm16(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{1, 64, 37}, {1, 32, 5}, {4, 64, 9}, {8, 32, 17},
                                        {3, 50, 11}, {16, 16, 3}, {1, 7, 4}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int bt = RT_BF16; bt <= RT_F16; bt++) {
            int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ld = n + 3;
            float *a = tl_random(m * k, 1), *bf = tl_random(k * ld, 2);
            float *c = tl_random(m * ld, 3), *want = malloc(sizeof *want * (size_t)(m * ld));
            uint16_t *b = malloc(sizeof *b * (size_t)(k * ld));
            for (int64_t i = 0; i < k * ld; i++) {
                float x = i % 7 == 3 ? bf[i] * 1e-6f : bf[i];    /* f16 subnormals */
                b[i] = bt == RT_BF16 ? rt_f32_bf16(x) : rt_f32_f16(x);
                bf[i] = bt == RT_BF16 ? rt_bf16_f32(b[i]) : rt_f16_f32(b[i]);
            }
            memcpy(want, c, sizeof *c * (size_t)(m * ld));
            rt_gemm(m, n, k, a, k, bf, ld, want, ld);
            if (bt == RT_BF16)
                rt_gemm_bf16(m, n, k, a, k, b, ld, c, ld);
            else
                rt_gemm_f16(m, n, k, a, k, b, ld, c, ld);
            if (memcmp(c, want, sizeof *c * (size_t)(m * ld)))
                fail_msg("rt_gemm_%s m=%lld n=%lld k=%lld differs from rt_gemm",
                         bt == RT_BF16 ? "bf16" : "f16", (long long)m, (long long)n, (long long)k);
            free(a), free(bf), free(c), free(want), free(b);
        }
}

/* The vector paths widen every kind of half as rt_f16_f32 does (C = 1 x
 * B[0, :] with C zero): zeros, subnormals, normals, inf, NaN, both signs;
 * 64 columns (pairs of vectors), 16 (one), 35 (and a tail). */
static void f16_specials(void **state)
{
    (void)state;
    static const uint16_t kinds[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00,
                                     0xbc00, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7d01,
                                     0x1234, 0x83ff};
    for (int n = 16; n <= 64; n += n == 16 ? 19 : 29) {
        uint16_t b[64];
        float a = 1.0f, c[64];
        for (int j = 0; j < n; j++) {
            b[j] = kinds[(j * 7) % 16];
            c[j] = 0.0f;
        }
        rt_gemm_f16(1, n, 1, &a, 1, b, n, c, n);
        for (int j = 0; j < n; j++) {
            float want = 0.0f + rt_f16_f32(b[j]);
            if (isnan(want) ? !isnan(c[j]) : memcmp(&c[j], &want, sizeof want))
                fail_msg("n=%d: half %04x widened to %g, want %g", n, b[j], c[j], want);
        }
    }
}

static void pack16(void **state)
{
    (void)state;
    int64_t n = 64, k = 3, nr = 32;
    uint16_t *w = rt_alloc(sizeof *w * (size_t)(n * k));
    for (int64_t i = 0; i < n * k; i++)
        w[i] = (uint16_t)i;
    rt_err e = {0, ""};
    assert_int_equal(rt_pack_panels((void **)&w, 1, n, k, nr, 2, &e), 0);
    for (int64_t p = 0; p < n / nr; p++)
        for (int64_t kk = 0; kk < k; kk++)
            for (int64_t c = 0; c < nr; c++)
                assert_int_equal(w[(p * k + kk) * nr + c], (p * nr + c) * k + kk);
    rt_free(w);
}

/* A file with a BF16 tensor "a" [2,2] and an F32 tensor "b" [3]. */
static const char *half_file(void)
{
    static const char h[] = "{\"a\": {\"dtype\": \"BF16\", \"shape\": [2,2], \"data_offsets\": [0, 8]},"
                            " \"b\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [8, 20]}}";
    unsigned char d[20] = {0x80, 0x3f, 0x00, 0xc0, 0x81, 0x3f, 0x01, 0x7f};  /* 1, -2, ... */
    float b[3] = {1.00390625f, 1.01171875f, -3.0f};
    memcpy(d + 8, b, sizeof b);
    size_t hl = sizeof h - 1;
    unsigned char *f = calloc(1, 8 + hl + sizeof d);
    assert_non_null(f);
    f[0] = (unsigned char)hl;
    memcpy(f + 8, h, hl);
    memcpy(f + 8 + hl, d, sizeof d);
    const char *p = tl_tmp_path("half.safetensors");
    tl_put_file(p, f, 8 + hl + sizeof d);
    free(f);
    return p;
}

static void load16(void **state)
{
    (void)state;
    const char *p = half_file();
    rt_tensor_info w[3] = {
        {.name = "a", .rank = 2, .dims = {2, 2}, .count = 4, .store = RT_BF16},
        {.name = "b", .rank = 1, .dims = {3}, .count = 3, .store = RT_BF16},
        {.name = "c", .rank = 1, .dims = {2}, .count = 2, .init = RT_INIT_FILL, .fill = 1.00390625,
         .store = RT_F16},
    };
    void *d[3];
    rt_err e = {0, ""};
    if (rt_load_weights(p, w, 3, d, &e))
        fail_msg("%s", e.msg);
    /* a: the file's bf16 bits as they are, 2 bytes an element */
    const uint16_t want_a[4] = {0x3f80, 0xc000, 0x3f81, 0x7f01};
    assert_memory_equal(d[0], want_a, sizeof want_a);
    /* b: f32 rounded to nearest even */
    const uint16_t want_b[3] = {0x3f80, 0x3f82, 0xc040};
    assert_memory_equal(d[1], want_b, sizeof want_b);
    /* c: its init rounded to half: 1 + 2^-8 is exact in f16 */
    const uint16_t want_c[2] = {0x3c04, 0x3c04};
    assert_memory_equal(d[2], want_c, sizeof want_c);
    for (int i = 0; i < 3; i++)
        rt_free(d[i]);
    /* the same file widened: f32, 4 bytes an element */
    w[0].store = w[1].store = RT_F32;
    assert_int_equal(rt_load_weights(p, w, 2, d, &e), 0);
    const float want_f[4] = {1.0f, -2.0f, 1.0078125f, rt_bf16_f32(0x7f01)};
    assert_memory_equal(d[0], want_f, sizeof want_f);
    rt_free(d[0]);
    rt_free(d[1]);
}

/* A weight packed as it loads (rt_tensor_info.panel) is laid out as
 * rt_pack_panels lays it out, whichever way it was made: packed straight
 * from the file (f32 as f32, bf16 as bf16, on the thread pool), or made
 * first (widened, rounded, from its init) and packed after. */
static void packed_like(const void *src, int64_t batch, int64_t n, int64_t k, int64_t nr,
                        size_t esize, void *out)
{
    for (int64_t q = 0; q < batch; q++)
        for (int64_t p = 0; p < n / nr; p++)
            for (int64_t kk = 0; kk < k; kk++)
                for (int64_t i = 0; i < nr; i++)
                    memcpy((char *)out + (size_t)((q * n + p * nr) * k + kk * nr + i) * esize,
                           (const char *)src + (size_t)((q * n + p * nr + i) * k + kk) * esize,
                           esize);
}

static void load_packed(void **state)
{
    (void)state;
    /* f: F32 [2][4][3] = 0.5 * i; h: BF16 [4][3], bits 0x3f80 + i */
    static const char hd[] = "{\"f\": {\"dtype\": \"F32\", \"shape\": [2,4,3], \"data_offsets\": [0, 96]},"
                             " \"h\": {\"dtype\": \"BF16\", \"shape\": [4,3], \"data_offsets\": [96, 120]}}";
    float f[24];
    uint16_t h[12];
    for (int i = 0; i < 24; i++)
        f[i] = 0.5f * (float)i + 0.001f;
    for (int i = 0; i < 12; i++)
        h[i] = (uint16_t)(0x3f80 + i);
    size_t hl = sizeof hd - 1, size = 8 + hl + sizeof f + sizeof h;
    unsigned char *file = calloc(1, size);
    assert_non_null(file);
    file[0] = (unsigned char)hl;
    memcpy(file + 8, hd, hl);
    memcpy(file + 8 + hl, f, sizeof f);
    memcpy(file + 8 + hl + sizeof f, h, sizeof h);
    const char *path = tl_tmp_path("packed.safetensors");
    tl_put_file(path, file, size);
    free(file);

    /* in pairs (a file's every tensor is a weight), then an init alone */
    rt_tensor_info w[7] = {
        {.name = "f", .rank = 3, .dims = {2, 4, 3}, .count = 24, .store = RT_F32, .panel = 2},
        {.name = "h", .rank = 2, .dims = {4, 3}, .count = 12, .store = RT_BF16, .panel = 2},
        {.name = "f", .rank = 3, .dims = {2, 4, 3}, .count = 24, .store = RT_BF16, .panel = 4},
        {.name = "h", .rank = 2, .dims = {4, 3}, .count = 12, .store = RT_F32, .panel = 4},
        {.name = "f", .rank = 3, .dims = {2, 4, 3}, .count = 24, .store = RT_F16, .panel = 2},
        {.name = "h", .rank = 2, .dims = {4, 3}, .count = 12, .store = RT_F16, .panel = 2},
        {.name = "g", .rank = 2, .dims = {2, 3}, .count = 6, .init = RT_INIT_RANDOM, .seed = 3,
         .scale = 1, .store = RT_F32, .panel = 2},
    }, as_is[7];
    memcpy(as_is, w, sizeof w);
    for (int i = 0; i < 7; i++)
        as_is[i].panel = 0;
    void *d[7], *flat[7];
    rt_err e = {0, ""};
    for (int i = 0; i < 7; i += 2) {
        const char *from = i < 6 ? path : NULL;
        int nw = i < 6 ? 2 : 1;
        if (rt_load_weights(from, w + i, nw, d + i, &e) ||
            rt_load_weights(from, as_is + i, nw, flat + i, &e))
            fail_msg("%s", e.msg);
    }
    /* the paths: as held (0, 1) or rounded from f32 (2, 4) as they pack;
     * widened (3) or converted (5) first, then packed; an init's (6) */
    size_t es[7] = {4, 2, 2, 4, 2, 2, 4};
    int64_t batch[7] = {2, 1, 2, 1, 2, 1, 1}, n[7] = {4, 4, 4, 4, 4, 4, 2},
            nr[7] = {2, 2, 4, 4, 2, 2, 2};
    for (int i = 0; i < 7; i++) {
        unsigned char want[96];
        packed_like(flat[i], batch[i], n[i], 3, nr[i], es[i], want);
        assert_memory_equal(d[i], want, (size_t)w[i].count * es[i]);
        rt_free(d[i]);
        rt_free(flat[i]);
    }
    /* f packed straight from the file: its first panel's first row holds
     * rows 0 and 1 of column 0 */
    assert_int_equal(rt_load_weights(path, w, 2, d, &e), 0);
    assert_true(((float *)d[0])[0] == f[0] && ((float *)d[0])[1] == f[3]);
    rt_free(d[0]);
    rt_free(d[1]);
    /* rows that panels do not divide: refused, nothing left allocated */
    w[0].panel = 3;
    assert_int_equal(rt_load_weights(path, w, 2, d, &e), RT_EINTERNAL);
    assert_non_null(strstr(e.msg, "cannot pack in panels of 3"));
    assert_null(d[0]);
    assert_null(d[1]);
}

int main(void)
{
    setenv("KILN_AMX", "off", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bf16_rounding), cmocka_unit_test(f16_rounding),
        cmocka_unit_test(round_trips),   cmocka_unit_test(gemm16),
        cmocka_unit_test(f16_specials),  cmocka_unit_test(pack16),
        cmocka_unit_test(load16),        cmocka_unit_test(load_packed),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
