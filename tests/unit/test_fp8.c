/* tests/unit/test_fp8.c: FP8 weights (docs/fp8.md): e4m3 bytes decoded
 * and encoded on hand-computed values, every byte round trip; f8_e4m3
 * blocks quantized, widened and read an element at a time;
 * rt_gemm_f8_e4m3 bit for bit against its contract replayed here in
 * scalar C (the Makefile builds this test against the kernel's AVX-512
 * path and again its portable C, test_fp8_c) and near the f32 product;
 * rt_load_weights of an FP8 safetensors tensor with each kind of scale,
 * held as f8_e4m3 (re-blocked) and as f32 (widened), and its faults;
 * a rank's part of one, by rows or by columns, scaled as in the whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "frontend/import.h"
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

/* f8_e4m3's block: 128 values of a row in 132 bytes, an f32 d (amax /
 * 448), then the 128 e4m3 bytes of x / d. */
static void blocks(void **state)
{
    (void)state;
    assert_int_equal(rt_q_block(RT_F8_E4M3), 128);
    assert_int_equal(rt_q_block_bytes(RT_F8_E4M3), 132);
    assert_int_equal(rt_store_bytes(RT_F8_E4M3, 512), 4 * 132);
    assert_string_equal(rt_q_name(RT_F8_E4M3), "f8_e4m3");
    float x[256], y[256];
    for (int i = 0; i < 256; i++)
        x[i] = (float)((i * 37 % 29) - 14) * (i < 128 ? 0.25f : 3.0f);
    x[100] = 7.0f;                       /* the first block's largest: d = 7 / 448 = 2^-6 */
    x[5] = 3.5f;                         /* 224 = 2^7 * 1.75: 0 1110 110 */
    unsigned char q[264];
    rt_quantize(RT_F8_E4M3, x, q, 256);
    float d;
    memcpy(&d, q, 4);
    assert_true(d == 0x1p-6f);
    assert_int_equal(q[4 + 100], 0x7e);  /* 448 */
    assert_int_equal(q[4 + 5], 0x76);
    /* the second block, bytes 132 on: x = 3 * ((37 i mod 29) - 14), amax
     * 42 (residue 0 among any 29 i), d = 42 / 448 = 3 / 32; x[128] =
     * 3 * (4736 mod 29 - 14) = -15, / d = -160 = -2^7 * 1.25: 1 1110 010 */
    memcpy(&d, q + 132, 4);
    assert_true(d == 0.09375f);
    assert_int_equal(q[132 + 4], 0xf2);
    rt_dequantize(RT_F8_E4M3, q, y, 256);
    for (int i = 0; i < 256; i++) {
        assert_true(fabsf(y[i] - x[i]) <= fabsf(x[i]) / 16 + 1e-6f);
        assert_true(rt_f8_e4m3_at(q, i) == y[i]);
    }
    assert_true(y[5] == 3.5f && y[100] == 7.0f && y[128] == -15.0f);
    assert_int_equal(rt_q_check(RT_F8_E4M3, q, 256), 0);
    float inf = INFINITY;
    memcpy(q + 132, &inf, 4);
    assert_int_equal(rt_q_check(RT_F8_E4M3, q, 256), 2);
}

/* The kernel's contract (rt_quant.h) in scalar C, over blocks of 132
 * bytes: d, then 128 bytes. */
static float replay(const float *a, const unsigned char *w, int64_t k, float c)
{
    float L[16] = {0};
    for (int64_t b = 0; b < k / 128; b++) {
        const unsigned char *p = w + b * 132;
        const float *x = a + b * 128;
        float d;
        memcpy(&d, p, 4);
        for (int l = 0; l < 16; l++) {
            float t = rt_e4m3_f32(p[4 + l]) * 0x1p-8f * x[l];
            for (int i = 1; i < 8; i++)
                t = fmaf(rt_e4m3_f32(p[4 + 16 * i + l]) * 0x1p-8f, x[16 * i + l], t);
            L[l] = fmaf(t, d, L[l]);
        }
    }
    for (int h = 8; h; h >>= 1)
        for (int l = 0; l < h; l++)
            L[l] += L[l + h];
    return c + L[0] * 0x1p8f;
}

static void gemm(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{1, 1, 128}, {1, 9, 384}, {3, 5, 256}, {5, 8, 640},
                                        {8, 4, 128}, {7, 13, 1024}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], lda = k + 3, ldc = n + 2;
        float *a = malloc(sizeof *a * (size_t)(m * lda)), *wf = malloc(sizeof *wf * (size_t)(n * k));
        float *c = malloc(sizeof *c * (size_t)(m * ldc)), *wd = malloc(sizeof *wd * (size_t)(n * k));
        const int64_t rowbytes = k / 128 * 132;
        unsigned char *w = malloc((size_t)(n * rowbytes));
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
                float r = replay(a + i * lda, w + j * rowbytes, k, want[i * ldc + j]);
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
            float r = replay(a, w + j * rowbytes, k, want[0]);
            assert_memory_equal(&c2, &r, sizeof r);
        }
        /* k the second block of each row only: woff 128, rows ldw = k apart */
        if (k >= 256) {
            memcpy(c, want, sizeof *c * (size_t)(m * ldc));
            rt_gemm_f8_e4m3(m, n, 128, a + 128, lda, w, 128, k, c, ldc);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    float r = replay(a + i * lda + 128, w + j * rowbytes + 132, 128,
                                     want[i * ldc + j]);
                    assert_memory_equal(&c[i * ldc + j], &r, sizeof r);
                }
        }
        free(a), free(wf), free(c), free(wd), free(w), free(want);
    }
}

/* A file of weight "w.weight" [rows, 256], byte (r, c) = codes[(r + c) % 8],
 * with scale tensor `sname` of shape sdims and values s (f32), and the
 * weight's declaration; loads it held as store into *out. */
static const unsigned char codes[8] = {0x38, 0xb8, 0x40, 0x01, 0x7e, 0x00, 0x85, 0x2b};

static int load_fp8(int64_t rows, const char *sname, int srank, const int64_t *sdims,
                    const float *s, int store, void **out, rt_err *e)
{
    unsigned char *w = malloc((size_t)(rows * 256));
    for (int64_t r = 0; r < rows; r++)
        for (int c = 0; c < 256; c++)
            w[r * 256 + c] = codes[(r + c) % 8];
    ImpTensor t[2] = {{"w.weight", "F8_E4M3", 2, {rows, 256}, w},
                      {sname, "F32", srank, {0}, s}};
    memcpy(t[1].dims, sdims, sizeof *sdims * (size_t)srank);
    char why[256];
    const char *path = tl_tmp_path("fp8.safetensors");
    assert_int_equal(imp_st_write(path, t, 2, why, sizeof why), 0);
    free(w);
    rt_tensor_info info = {.name = "w.weight", .dtype = RT_F32, .rank = 2, .dims = {rows, 256},
                           .count = rows * 256, .store = store, .quantize = rt_quantize};
    return rt_load_weights(path, &info, 1, out, e);
}

static void loader(void **state)
{
    (void)state;
    /* [256, 256]: blocks of 128 x 128 are [2, 2]; per row [256, 1]; one [1] */
    float sb[4] = {0.5f, 3.0f, 0.25f, 7.0f}, sr[256], st = 0.25f;
    for (int r = 0; r < 256; r++)
        sr[r] = (float)(r + 1) / 64;
    struct {
        const char *name;
        int rank;
        int64_t dims[2];
        const float *s;
    } kinds[] = {{"w.weight_scale_inv", 2, {2, 2}, sb}, {"w.weight_scale", 2, {256, 1}, sr},
                 {"w.weight_scale", 1, {1}, &st}};
    for (int k = 0; k < 3; k++) {
        void *q = NULL, *f = NULL;
        rt_err e = {0, ""};
        assert_int_equal(load_fp8(256, kinds[k].name, kinds[k].rank, kinds[k].dims, kinds[k].s,
                                  RT_F8_E4M3, &q, &e), 0);
        assert_int_equal(load_fp8(256, kinds[k].name, kinds[k].rank, kinds[k].dims, kinds[k].s,
                                  RT_F32, &f, &e), 0);
        const unsigned char *b = q;
        for (int r = 0; r < 256; r++) {
            for (int h = 0; h < 2; h++) {        /* a row's two blocks: scale, 128 bytes */
                float want = k == 0 ? sb[r / 128 * 2 + h] : k == 1 ? sr[r] : st;
                const unsigned char *blk = b + (r * 2 + h) * 132;
                float d;
                memcpy(&d, blk, 4);
                assert_true(d == want);
                for (int j = 0; j < 128; j++)
                    assert_int_equal(blk[4 + j], codes[(r + h * 128 + j) % 8]);
            }
            for (int c = 0; c < 256; c++) {
                float want = k == 0 ? sb[r / 128 * 2 + c / 128] : k == 1 ? sr[r] : st;
                float v = ((float *)f)[r * 256 + c];
                assert_true(v == rt_e4m3_f32(codes[(r + c) % 8]) * want);
                assert_true(v == rt_f8_e4m3_at(q, r * 256 + c));
            }
        }
        rt_free(q);
        rt_free(f);
    }
    /* faults: the scale missing, of a wrong shape; a NaN byte */
    void *q = NULL;
    rt_err e = {0, ""};
    assert_int_equal(load_fp8(256, "w.bias", 1, (int64_t[]){1}, &st, RT_F8_E4M3, &q, &e),
                     RT_EINVAL);
    assert_non_null(strstr(e.msg, "'w.bias': not a weight of the model"));
    e = (rt_err){0, ""};
    assert_int_equal(load_fp8(256, "w.weight_scale_inv", 2, (int64_t[]){1, 2}, sb, RT_F8_E4M3,
                              &q, &e), RT_EINVAL);
    assert_non_null(strstr(e.msg, "'w.weight_scale_inv': shape [1,2], for 'w.weight' [256,256] "
                                  "kiln reads [2,2] (blocks of 128 x 128), [256,1] (per row) or [1]"));
    e = (rt_err){0, ""};
    float nan_scale[2] = {1, 1};
    unsigned char *w = calloc(64, 128);
    w[77] = 0xff;
    ImpTensor t[2] = {{"w.weight", "F8_E4M3", 2, {64, 128}, w},
                      {"w.weight_scale_inv", "F32", 2, {1, 1}, nan_scale}};
    char why[256];
    assert_int_equal(imp_st_write(tl_tmp_path("nan.safetensors"), t, 2, why, sizeof why), 0);
    free(w);
    rt_tensor_info info = {.name = "w.weight", .dtype = RT_F32, .rank = 2, .dims = {64, 128},
                           .count = 64 * 128, .store = RT_F8_E4M3};
    assert_int_equal(rt_load_weights(tl_tmp_path("nan.safetensors"), &info, 1, &q, &e), RT_EINVAL);
    assert_non_null(strstr(e.msg, "'w.weight': element 77 is NaN (0xff)"));
    assert_null(q);
}

/* Rank `rank` of n's part of "w.weight" [256, 512] in the file at path,
 * split along axis, held as store, into *out. */
static int load_part(const char *path, int rank, int n, int axis, int store, void **out,
                     rt_err *e)
{
    int64_t whole = axis ? 512 : 256, len = whole / n, rows = axis ? 256 : len;
    rt_tensor_info info = {.name = "w.weight", .dtype = RT_F32, .rank = 2,
                           .dims = {rows, axis ? len : 512}, .count = rows * (axis ? len : 512),
                           .store = store, .quantize = rt_quantize, .shard_axis = axis,
                           .shard_of = whole};
    rt_ranks_set(&(rt_ranks){rank, n, NULL, NULL});
    int rc = rt_load_weights(path, &info, 1, out, e);
    rt_ranks_set(&(rt_ranks){0, 1, NULL, NULL});
    return rc;
}

/* A [256, 512] FP8 tensor split over 2 and 4 ranks, by rows and by
 * columns, with each kind of scale (blocks of 128 x 128 of eight scales:
 * parts of 64 rows begin inside them), held as f8_e4m3 and as f32: rank
 * r's part holds the whole tensor's values at its places, each scaled by
 * the scale of its place in the whole; parts of 64 columns are held f32
 * only (a row's f8_e4m3 blocks are 128); a NaN byte is named by its place
 * in the whole. */
static void parts(void **state)
{
    (void)state;
    enum { R = 256, C = 512 };
    static unsigned char w[R * C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            w[r * C + c] = codes[(3 * r + c) % 8];
    float sb[8] = {0.5f, 3.0f, 0.25f, 7.0f, 1.5f, 0.75f, 5.0f, 0.375f}, sr[R], st = 0.125f;
    for (int r = 0; r < R; r++)
        sr[r] = (float)(r + 1) / 32;
    struct {
        const char *name;
        int rank;
        int64_t dims[2];
        const float *s;
    } kinds[] = {{"w.weight_scale_inv", 2, {2, 4}, sb}, {"w.weight_scale", 2, {R, 1}, sr},
                 {"w.weight_scale", 1, {1}, &st}};
    const char *path = tl_tmp_path("parts.safetensors");
    char why[256];
    for (int k = 0; k < 3; k++) {
        ImpTensor t[2] = {{"w.weight", "F8_E4M3", 2, {R, C}, w},
                          {kinds[k].name, "F32", kinds[k].rank, {kinds[k].dims[0], kinds[k].dims[1]},
                           kinds[k].s}};
        assert_int_equal(imp_st_write(path, t, 2, why, sizeof why), 0);
        for (int n = 2; n <= 8; n *= 2)
            for (int axis = 0; axis < 2; axis++)
                for (int held = 0; held < 2; held++)
                    for (int rank = 0; rank < n; rank++) {
                        void *q = NULL;
                        rt_err e = {0, ""};
                        int64_t len = (axis ? C : R) / n, rows = axis ? R : len, cols = axis ? len : C;
                        int rc = load_part(path, rank, n, axis, held ? RT_F32 : RT_F8_E4M3, &q, &e);
                        if (!held && cols % 128) {
                            assert_int_equal(rc, RT_EINTERNAL);
                            assert_non_null(strstr(e.msg, "cannot hold it as f8_e4m3: rows of 64"));
                            continue;
                        }
                        assert_int_equal(rc, 0);
                        for (int64_t i = 0; i < rows; i++)
                            for (int64_t j = 0; j < cols; j++) {
                                int64_t r = axis ? i : rank * len + i, c = axis ? rank * len + j : j;
                                float s = k == 0 ? sb[r / 128 * 4 + c / 128] : k == 1 ? sr[r] : st;
                                float v = held ? ((float *)q)[i * cols + j]
                                               : rt_f8_e4m3_at(q, i * cols + j);
                                assert_true(v == rt_e4m3_f32(w[r * C + c]) * s);
                            }
                        rt_free(q);
                    }
    }
    w[200 * C + 300] = 0xff;
    ImpTensor t[2] = {{"w.weight", "F8_E4M3", 2, {R, C}, w}, {"w.weight_scale", "F32", 1, {1}, &st}};
    assert_int_equal(imp_st_write(path, t, 2, why, sizeof why), 0);
    for (int axis = 0; axis < 2; axis++) {
        void *q = NULL;
        rt_err e = {0, ""};
        assert_int_equal(load_part(path, 1, 2, axis, RT_F8_E4M3, &q, &e), RT_EINVAL);
        assert_non_null(strstr(e.msg, "'w.weight': element 102700 is NaN (0xff)"));
        assert_null(q);
    }
}

/* A scale missing: the weight's own message (the file has no companion). */
static void scale_missing(void **state)
{
    (void)state;
    unsigned char w[64 * 32] = {0};
    ImpTensor t[1] = {{"w.weight", "F8_E4M3", 2, {32, 64}, w}};
    char why[256];
    assert_int_equal(imp_st_write(tl_tmp_path("noscale.safetensors"), t, 1, why, sizeof why), 0);
    rt_tensor_info info = {.name = "w.weight", .dtype = RT_F32, .rank = 2, .dims = {32, 64},
                           .count = 32 * 64, .store = RT_F32};
    void *q = NULL;
    rt_err e = {0, ""};
    assert_int_equal(rt_load_weights(tl_tmp_path("noscale.safetensors"), &info, 1, &q, &e),
                     RT_EINVAL);
    assert_non_null(strstr(e.msg, "'w.weight' is F8_E4M3 but its scale 'w.weight_scale_inv' "
                                  "(or 'w.weight_scale') is not in the file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(e4m3_decode),
        cmocka_unit_test(e4m3_encode),
        cmocka_unit_test(blocks),
        cmocka_unit_test(gemm),
        cmocka_unit_test(loader),
        cmocka_unit_test(scale_missing),
        cmocka_unit_test(parts),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
