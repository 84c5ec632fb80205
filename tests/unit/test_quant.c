/* tests/unit/test_quant.c: the quantized blocks (runtime/rt_quant.h): a
 * block of each type worked out by hand from the layouts and GGML's
 * reference quantizers, byte for byte and value for value; round trips
 * (every value the nearest point of its block's grid, and a small error
 * overall); element reads equal to rt_dequantize on any bytes;
 * rt_q_check on NaN and inf scales; and mutations (a wrong scale, swapped
 * nibbles, a block read one byte off, a wrong sub-block scale) shown to
 * change exactly the values they should, so the hand values catch them;
 * and digests of 576 rows' bytes equal to those llama.cpp's libggml-base
 * makes of them (computed outside the repository, where many more rows
 * were compared byte for byte). MXFP4's block by hand (E2M1 nibbles,
 * the E8M0 scale, its subnormal and NaN ends) and its round trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/rt_quant.h"
#include "tests/unit/testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int stores[4] = {RT_Q8_0, RT_Q4_0, RT_Q4_K, RT_Q6_K};

/* The element reads by store. */
static float at(int store, const void *w, int64_t i)
{
    switch (store) {
    case RT_Q8_0: return rt_q8_0_at(w, i);
    case RT_Q4_0: return rt_q4_0_at(w, i);
    case RT_Q4_K: return rt_q4_k_at(w, i);
    default: return rt_q6_k_at(w, i);
    }
}

static int same_bits(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Equal values (a hand value 0 may be widened as -0). */
static int same(float a, float b)
{
    return a == b || (isnan(a) && isnan(b));
}

/* n normal values times sigma into x (Box-Muller over splitmix64). */
static void normal(float *x, int64_t n, uint64_t seed, double sigma)
{
    for (int64_t i = 0; i < n; i++) {
        double u = ((rt_splitmix64(&seed) >> 11) + 1) * 0x1p-53;
        double v = (rt_splitmix64(&seed) >> 11) * 0x1p-53;
        x[i] = (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v) * sigma);
    }
}

/* ---- the hand blocks ------------------------------------------------------- */

/* q8_0: the largest |x| is 63.5, so d = 63.5 / 127 = 0.5 (half 0x3800,
 * bytes 00 38) and id = 2; q = roundf(2 x), halves away from zero. */
static void hand_q8_0(float *x, unsigned char *want, float *val)
{
    static const float head[7] = {63.5f, -63.5f, 0.25f, -0.25f, 0.75f, 1.25f, -1.25f};
    static const unsigned char qh[7] = {
        0x7f, /* 63.5 * 2 = 127 */
        0x81, /* -127 as int8 */
        0x01, /* 0.5 rounds away from 0: 1 */
        0xff, /* -0.5: -1 */
        0x02, /* 1.5: 2 */
        0x03, /* 2.5: 3 (away from zero, not to even) */
        0xfd, /* -2.5: -3 */
    };
    want[0] = 0x00;
    want[1] = 0x38;
    for (int j = 0; j < 32; j++) {
        /* from 7 on, x = (j - 20) / 2: q = j - 20 exactly, -13 .. 11 */
        x[j] = j < 7 ? head[j] : (float)(j - 20) * 0.5f;
        want[2 + j] = j < 7 ? qh[j] : (unsigned char)(j - 20);
        val[j] = (float)(int8_t)want[2 + j] * 0.5f;
    }
}

/* q4_0: the first x of largest |x| is x0 = 4 (x16 = -4 comes later), so
 * d = 4 / -8 = -0.5 (half 0xb800, bytes 00 b8), id = -2, q = min(15,
 * trunc(8.5 - 2 x)): x0 -> 0; x16 -> 16.5, clamped to 15; x19 = 0.3 ->
 * 7.9 -> 7; x20.. (quarters) truncate, 11.5 -> 11. Byte 2 + j holds q_j
 * low and q_(j+16) high; a value is -0.5 (q - 8). */
static void hand_q4_0(float *x, unsigned char *want, float *val)
{
    static const float xs[32] = {
        4, -3.5f, 0.25f, 1, -3, -2.5f, -2, -1.5f, -1, -0.5f, 0, 0.5f, 1, 1.5f, 2, 2.5f,
        -4, 0, -0.25f, 0.3f, -1.5f, -1.25f, -1, -0.75f, -0.5f, -0.25f, 0, 0.25f, 0.5f, 0.75f,
        1, 1.25f};
    static const int q[32] = {
        0, 15, 8, 6, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, /* 8.5 - 2x, truncated */
        15, 8, 9, 7, 11, 11, 10, 10, 9, 9, 8, 8, 7, 7, 6, 6};
    static const unsigned char bytes[16] = {
        0xf0, /* q0 = 0 low, q16 = 15 high */
        0x8f, /* q1 = 15, q17 = 8 */
        0x98, 0x76, 0xbe, 0xbd, 0xac, 0xab, 0x9a, 0x99, 0x88, 0x87, 0x76, 0x75, 0x64,
        0x63, /* q15 = 3, q31 = 6 */
    };
    memcpy(x, xs, sizeof xs);
    want[0] = 0x00;
    want[1] = 0xb8;
    memcpy(want + 2, bytes, 16);
    for (int j = 0; j < 32; j++) {
        assert_int_equal(j < 16 ? bytes[j] & 15 : bytes[j - 16] >> 4, q[j]);
        val[j] = -0.5f * (float)(q[j] - 8);
    }
}

/* q4_k: sub-block s (32 values) lies exactly on the grid
 *   x = d sc[s] L - dmin mn[s],  d = 2^-10, dmin = 2^-8,
 * L = t % 16 for even s and 15 - t % 16 for odd s (t = index in s, so
 * every sub-block holds L 0 and 15 and no byte has equal nibbles). The
 * fit of step 1 finds min x = -dmin mn[s] and the step d sc[s] (to an ulp,
 * which step 2's rounding absorbs); the largest are sc 63 and mn 63, so
 * d = 63 d / 63 = 2^-10 (half 0x1400, bytes 00 14), dmin = 2^-8 (0x1c00,
 * bytes 00 1c), the 6-bit scales and mins are sc[] and mn[], and step 3
 * gives L back. The 12 scale bytes:
 *   s < 4: byte s = sc[s] | (sc[s+4] >> 4) << 6, byte s+4 = mn[s] | (mn[s+4] >> 4) << 6
 *     0x7f = 63 | 1 << 6 (18 >> 4)    0x40 = 0 | 1 << 6 (19 >> 4)
 *     0x81 = 1 | 2 << 6 (33 >> 4)     0xbf = 63 | 2 << 6 (47 >> 4)
 *     0xd1 = 17 | 3 << 6 (50 >> 4)    0x02 = 2 | 0 << 6 (0 >> 4)
 *     0x28 = 40 | 0 << 6 (5 >> 4)     0x5f = 31 | 1 << 6 (20 >> 4)
 *   byte s+8 = (sc[s+4] & 15) | (mn[s+4] & 15) << 4:
 *     0x32 = 2 | 3 << 4,  0xf1 = 1 | 15 << 4,  0x02 = 2 | 0,  0x45 = 5 | 4 << 4
 * Nibble byte 32 i + l (of 128) = L(64 i + l) | L(64 i + 32 + l) << 4: an
 * even sub-block low, the odd one after it high, so (l % 16) | (15 - l %
 * 16) << 4: 0xf0, 0xe1, ..., 0x0f. Every value is a sum of multiples of
 * 2^-10 below 2^6: exact in f32, and widening gives x back exactly. */
static const int k4_sc[8] = {63, 1, 17, 40, 18, 33, 50, 5};
static const int k4_mn[8] = {0, 63, 2, 31, 19, 47, 0, 20};

static int k4_L(int j)
{
    return j / 32 % 2 ? 15 - j % 16 : j % 16;
}

static void hand_q4_k(float *x, unsigned char *want, float *val)
{
    static const unsigned char head[16] = {0x00, 0x14, 0x00, 0x1c, 0x7f, 0x81, 0xd1, 0x28,
                                           0x40, 0xbf, 0x02, 0x5f, 0x32, 0xf1, 0x02, 0x45};
    memcpy(want, head, 16);
    for (int i = 0; i < 128; i++)
        want[16 + i] = (unsigned char)(k4_L(i / 32 * 64 + i % 32) | k4_L(i / 32 * 64 + 32 + i % 32) << 4);
    for (int j = 0; j < 256; j++) {
        x[j] = (float)(k4_sc[j / 32] * k4_L(j) - 4 * k4_mn[j / 32]) / 1024;
        val[j] = x[j];
    }
    assert_int_equal(want[16], 0xf0);
    assert_int_equal(want[16 + 1], 0xe1);
    assert_int_equal(want[16 + 15], 0x0f);
    assert_int_equal(want[16 + 32 + 16], 0xf0);
}

/* q6_k: sub-block s (16 values) is x = d sc[s] (q - 32) with d = -2^-10
 * and q(j) = 0 at each sub-block's first value, else (7 j + j / 16) % 64,
 * so that value is the first of largest |x| (|q - 32| = 32). Step 1 then
 * rounds x * (-32 / x_first) = q - 32 exactly, and that grid, exactly
 * proportional to x, has the largest sum(w x l)^2 / sum(w l^2) of all
 * tries: s's scale is d sc[s]. The largest |.| is s 0's, d * -128 = 1/8,
 * so iscale = -128 / (1/8) = -1024, d = 1 / iscale = -2^-10 (half 0x9400,
 * bytes 208, 209 = 00 94), and scale_s = round(-1024 d sc[s]) = sc[s]
 * (bytes 192 ..: 0x80 = -128, 0x01, 0xff = -1, ...). Step 3 gives q back.
 * Packing, j = 128 h + 32 g + l: ql[64 h + 32 (g % 2) + l] holds q's low 4
 * bits (high nibble for g >= 2), qh[32 h + l] its top 2 at bits 2g:
 *   l = 1, h = 0: q(1) = 7, q(33) = 41, q(65) = 11, q(97) = 45:
 *     byte 1 = 7 | 11 << 4 = 0xb7, byte 33 = 9 | 13 << 4 = 0xd9,
 *     byte 128 + 1 = 0 | 2 << 2 | 0 << 4 | 2 << 6 = 0x88;
 *   l = 1, h = 1: q(129) = 15, q(161) = 49, q(193) = 19, q(225) = 53:
 *     byte 65 = 15 | 3 << 4 = 0x3f, byte 97 = 1 | 5 << 4 = 0x51,
 *     byte 128 + 33 = 0 | 3 << 2 | 1 << 4 | 3 << 6 = 0xdc.
 * x = -sc (q - 32) / 1024 is exact, and so is its widening. */
static const int k6_sc[16] = {-128, 1, -1, 127, 64, -64, 5, 100, -7, 33, 2, -100, 16, 3, -2, 50};

static int k6_q(int j)
{
    return j % 16 ? (7 * j + j / 16) % 64 : 0;
}

static void hand_q6_k(float *x, unsigned char *want, float *val)
{
    memset(want, 0, 210);
    for (int j = 0; j < 256; j++) {
        int h = j / 128, g = j / 32 % 4, l = j % 32, q = k6_q(j);
        want[64 * h + 32 * (g % 2) + l] |= (unsigned char)((q & 15) << (g < 2 ? 0 : 4));
        want[128 + 32 * h + l] |= (unsigned char)((q >> 4) << 2 * g);
        x[j] = (float)(-k6_sc[j / 16] * (q - 32)) / 1024;
        val[j] = x[j];
    }
    for (int s = 0; s < 16; s++)
        want[192 + s] = (unsigned char)k6_sc[s];
    want[208] = 0x00;
    want[209] = 0x94;
    assert_int_equal(want[1], 0xb7);
    assert_int_equal(want[33], 0xd9);
    assert_int_equal(want[129], 0x88);
    assert_int_equal(want[65], 0x3f);
    assert_int_equal(want[97], 0x51);
    assert_int_equal(want[161], 0xdc);
    assert_int_equal(want[192], 0x80);
    assert_int_equal(want[194], 0xff);
}

/* The hand block of store: its values x, bytes and widened values. */
static int hand(int store, float *x, unsigned char *want, float *val)
{
    switch (store) {
    case RT_Q8_0: hand_q8_0(x, want, val); break;
    case RT_Q4_0: hand_q4_0(x, want, val); break;
    case RT_Q4_K: hand_q4_k(x, want, val); break;
    default: hand_q6_k(x, want, val); break;
    }
    return rt_q_block(store);
}

static void sizes(void **state)
{
    (void)state;
    static const int block[4] = {32, 32, 256, 256}, bytes[4] = {34, 18, 144, 210};
    static const char *const names[4] = {"q8_0", "q4_0", "q4_k", "q6_k"};
    for (int t = 0; t < 4; t++) {
        assert_int_equal(rt_q_block(stores[t]), block[t]);
        assert_int_equal(rt_q_block_bytes(stores[t]), bytes[t]);
        assert_string_equal(rt_q_name(stores[t]), names[t]);
    }
    assert_int_equal(rt_q_block(RT_F32), 0);
    assert_int_equal(rt_q_block_bytes(RT_BF16), 0);
    assert_null(rt_q_name(RT_F16));
}

/* Each hand block quantizes to its bytes and widens to its values, by
 * rt_dequantize and by every element read, also as block 1 of 2. */
static void hand_blocks(void **state)
{
    (void)state;
    for (int t = 0; t < 4; t++) {
        float x[512], val[256], y[512];
        unsigned char want[210], got[420];
        int n = hand(stores[t], x, want, val), bytes = rt_q_block_bytes(stores[t]);
        rt_quantize(stores[t], x, got, n);
        assert_memory_equal(got, want, (size_t)bytes);
        rt_dequantize(stores[t], want, y, n);
        for (int j = 0; j < n; j++) {
            assert_true(y[j] == val[j]);
            assert_true(same_bits(at(stores[t], want, j), y[j]));
        }
        /* behind a block of zeros */
        memmove(x + n, x, (size_t)n * sizeof *x);
        memset(x, 0, (size_t)n * sizeof *x);
        rt_quantize(stores[t], x, got, 2 * n);
        assert_memory_equal(got + bytes, want, (size_t)bytes);
        rt_dequantize(stores[t], got, y, 2 * n);
        for (int j = 0; j < n; j++) {
            assert_true(y[j] == 0 && y[n + j] == val[j]);
            assert_true(same_bits(at(stores[t], got, n + j), y[n + j]));
        }
    }
}

/* GGML's q4_0 of all zeros has d = 0 / -8 = -0 (half 0x8000, bytes
 * 00 80) and every q 8 (0x88); of values below 2^-125, 1 / d is inf and
 * x * id inf or NaN, which its cast makes q 0 (d here is 2e-39 / 8, half
 * 0). Both widen to zeros. q8_0 likewise: q 0. */
static void tiny_blocks(void **state)
{
    (void)state;
    float x[32] = {0}, y[32];
    unsigned char b[34];
    rt_quantize(RT_Q4_0, x, b, 32);
    for (int j = 0; j < 18; j++)
        assert_int_equal(b[j], j == 0 ? 0 : j == 1 ? 0x80 : 0x88);
    for (int j = 0; j < 32; j++)
        x[j] = j % 2 ? 1e-39f : -2e-39f;
    rt_quantize(RT_Q4_0, x, b, 32);
    for (int j = 0; j < 18; j++)
        assert_int_equal(b[j], 0);
    rt_dequantize(RT_Q4_0, b, y, 32);
    for (int j = 0; j < 32; j++)
        assert_true(y[j] == 0);
    rt_quantize(RT_Q8_0, x, b, 32);
    for (int j = 0; j < 34; j++)
        assert_int_equal(b[j], 0);
}

/* ---- round trips -------------------------------------------------------------- */

/* The grid of value j's block (k-quants: sub-block) at b: its points
 * g(q), q < count (returned), as widening computes them. */
static int grid(int store, const unsigned char *b, int j, float *g)
{
    float d;
    if (store == RT_Q8_0 || store == RT_Q4_0) {
        d = rt_f16_f32((uint16_t)(b[0] | b[1] << 8));
        for (int q = 0; q < (store == RT_Q8_0 ? 255 : 16); q++)
            g[q] = store == RT_Q8_0 ? (float)(q - 127) * d : (float)(q - 8) * d;
        return store == RT_Q8_0 ? 255 : 16;
    }
    if (store == RT_Q4_K) {
        /* the unpacking of the hand block's comment */
        const unsigned char *p = b + 4;
        int s = j / 32, sc, mn;
        sc = s < 4 ? p[s] & 63 : (p[s + 4] & 15) | (p[s - 4] >> 6) << 4;
        mn = s < 4 ? p[s + 4] & 63 : (p[s + 4] >> 4) | (p[s] >> 6) << 4;
        float ds = rt_f16_f32((uint16_t)(b[0] | b[1] << 8)) * sc;
        float dm = rt_f16_f32((uint16_t)(b[2] | b[3] << 8)) * mn;
        for (int q = 0; q < 16; q++)
            g[q] = ds * q - dm;
        return 16;
    }
    d = rt_f16_f32((uint16_t)(b[208] | b[209] << 8));
    for (int q = 0; q < 64; q++)
        g[q] = d * (int8_t)b[192 + j / 16] * (q - 32);
    return 64;
}

/* q8_0's and q4_0's d before it is rounded to a half: amax / 127, or
 * the first x of largest |x| over -8. */
static float d_f32(int store, const float *x)
{
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return store == RT_Q8_0 ? amax / 127 : max / -8;
}

/* Normal values at four scales: every widened value is a point of its
 * block's grid and the nearest to x, but for the rounding of q8_0's and
 * q4_0's d to a half (q is the nearest point of the grid of the f32 d,
 * (q - z) d, so at most z |d - half| farther, z = 127 or 8); and the rms
 * error of the sigma-1 rows is below the type's bound (measured 0.0053,
 * 0.086, 0.071, 0.018 sigma). */
static void round_trips(void **state)
{
    (void)state;
    static const double sigma[4] = {1, 1e-3, 40, 3e-6};
    static const double rms_bound[4] = {0.0065, 0.1, 0.08, 0.021};
    enum { N = 8192 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    unsigned char *b = malloc(2 * N);
    for (int t = 0; t < 4; t++) {
        int bn = rt_q_block(stores[t]), bytes = rt_q_block_bytes(stores[t]);
        for (int s = 0; s < 4; s++) {
            normal(x, N, 100 + s, sigma[s]);
            rt_quantize(stores[t], x, b, N);
            assert_int_equal(rt_q_check(stores[t], b, N), 0);
            rt_dequantize(stores[t], b, y, N);
            double se = 0;
            for (int i = 0; i < N; i++) {
                const unsigned char *blk = b + i / bn * bytes;
                float g[255], err = fabsf(x[i] - y[i]), best = INFINITY, slack = 0;
                int on = 0, count = grid(stores[t], blk, i % bn, g);
                for (int q = 0; q < count; q++)
                    on |= same(g[q], y[i]);
                if (bn == 32) {
                    int z = stores[t] == RT_Q8_0 ? 127 : 8;
                    float d = d_f32(stores[t], x + i / 32 * 32);
                    for (int q = 0; q < count; q++)
                        best = fminf(best, fabsf(x[i] - (float)(q - z) * d));
                    slack = (float)z * fabsf(d - rt_f16_f32((uint16_t)(blk[0] | blk[1] << 8)));
                } else
                    for (int q = 0; q < count; q++)
                        best = fminf(best, fabsf(x[i] - g[q]));
                float span = fmaxf(fabsf(g[0]), fabsf(g[count - 1]));
                assert_true(on);
                assert_true(err <= best + slack + 1e-6f * (fabsf(x[i]) + span) + 1e-30f);
                se += (double)err * err;
            }
            if (s == 0)
                assert_true(sqrt(se / N) < rms_bound[t]);
        }
    }
    free(x);
    free(y);
    free(b);
}

/* Rows of 256 values for the golden digests, without libm (the same
 * floats on any machine): row r is of kind r % 9. */
static void golden_rows(float *x, int rows)
{
    uint64_t seed = 2026;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < 256; j++) {
            double u = 0;           /* about normal: 4 uniforms in [-1, 1), exact */
            for (int k = 0; k < 4; k++)
                u += (double)(rt_splitmix64(&seed) >> 40) * 0x1p-23 - 1;
            int64_t k = (int64_t)(rt_splitmix64(&seed) >> 59) - 16;   /* -16 .. 15 */
            double v;
            switch (r % 9) {
            case 0: v = u; break;
            case 1: v = u * 1e-3; break;
            case 2: v = 3 + u * 0.1; break;                   /* q4_k's min */
            case 3: v = j == r % 256 ? -1e4 : u * 0.02; break; /* an outlier */
            case 4: v = k * 0.5; break;                       /* halves: ties */
            case 5: v = u * 1e-6; break;                      /* half-subnormal scales */
            case 6: v = k > 12 ? u : 0; break;                /* sparse */
            case 7: v = (double)(k % 3); break;               /* -2 .. 2 */
            default: v = u * 1e-39; break;                    /* 1 / d is inf */
            }
            x[r * 256 + j] = (float)v;
        }
}

/* 576 rows of every kind quantize to GGML's bytes: the digests (64-bit
 * FNV-1a) are of the bytes llama.cpp's libggml-base (c392e509,
 * ggml_quantize_chunk without an importance matrix, which runs
 * quantize_row_*_ref) makes of the same floats, computed outside the
 * repository. These rows tell fit details apart that no hand block does
 * (the 21st try of q4_k's fit, ties of its error, nearest_int's halves to
 * even, GGML's cast of an infinite x * id). */
static void ggml_digests(void **state)
{
    (void)state;
    enum { R = 576, N = R * 256 };
    static const uint64_t want[4] = {0xc63525d2d8033b32ull, 0x6781dbc2318ac373ull,
                                     0x5b97729e6794a15cull, 0x6f2c14bdbd1f6f5dull};
    float *x = malloc(N * sizeof *x);
    unsigned char *b = malloc(2 * N);
    golden_rows(x, R);
    for (int t = 0; t < 4; t++) {
        rt_quantize(stores[t], x, b, N);
        uint64_t h = 0xcbf29ce484222325ull;
        for (int64_t i = 0; i < rt_store_bytes(stores[t], N); i++)
            h = (h ^ b[i]) * 0x100000001b3ull;
        assert_true(h == want[t]);
    }
    free(x);
    free(b);
}

/* Any bytes at all: every element read is rt_dequantize's value, bit for
 * bit (NaN scales included), at every index of several blocks. */
static void element_reads(void **state)
{
    (void)state;
    enum { NB = 6 };
    static unsigned char b[NB * 210];
    static float y[NB * 256];
    uint64_t seed = 7;
    for (int round = 0; round < 20; round++)
        for (int t = 0; t < 4; t++) {
            int n = NB * rt_q_block(stores[t]);
            for (size_t i = 0; i < sizeof b; i++)
                b[i] = (unsigned char)(rt_splitmix64(&seed) >> 56);
            rt_dequantize(stores[t], b, y, n);
            for (int i = 0; i < n; i++) {
                float v = at(stores[t], b, i);
                assert_true(same_bits(v, y[i]) || (isnan(v) && isnan(y[i])));
            }
        }
}

/* rt_q_check: the first block whose scale (q4_k: d or dmin) is NaN or
 * inf, plus 1; rt_quantize makes one from a NaN or inf among its values. */
static void checks(void **state)
{
    (void)state;
    static const int at_d[4] = {0, 0, 0, 208};
    for (int t = 0; t < 4; t++) {
        int n = rt_q_block(stores[t]), bytes = rt_q_block_bytes(stores[t]);
        float *x = calloc(3 * (size_t)n, sizeof *x), y[256];
        unsigned char *b = malloc(3 * (size_t)bytes);
        normal(x, 3 * n, 9, 1);
        rt_quantize(stores[t], x, b, 3 * n);
        assert_int_equal(rt_q_check(stores[t], b, 3 * n), 0);
        b[bytes + at_d[t] + 1] = 0x7c;          /* block 1: d = inf */
        assert_int_equal(rt_q_check(stores[t], b, 3 * n), 2);
        b[bytes + at_d[t] + 1] = 0x7e;          /* NaN */
        assert_int_equal(rt_q_check(stores[t], b, 3 * n), 2);
        assert_int_equal(rt_q_check(stores[t], b, n), 0);    /* block 0 only */
        b[bytes + at_d[t] + 1] = 0x7b;          /* 65504: finite */
        assert_int_equal(rt_q_check(stores[t], b, 3 * n), 0);
        if (stores[t] == RT_Q4_K) {
            b[2 * bytes + 3] = 0xfc;            /* block 2: dmin = -inf */
            assert_int_equal(rt_q_check(stores[t], b, 3 * n), 3);
        }
        /* a NaN value in block 2, an inf in block 1 */
        x[2 * n + 5] = NAN;
        rt_quantize(stores[t], x, b, 3 * n);
        assert_int_equal(rt_q_check(stores[t], b, 3 * n), 3);
        rt_dequantize(stores[t], b + 2 * bytes, y, n);
        assert_true(isnan(y[0]));
        x[n + 7] = -INFINITY;
        rt_quantize(stores[t], x, b, 3 * n);
        assert_int_equal(rt_q_check(stores[t], b, 3 * n), 2);
        assert_true(isinf(rt_f16_f32((uint16_t)(b[bytes + at_d[t]] | b[bytes + at_d[t] + 1] << 8))));
        free(x);
        free(b);
    }
}

/* The bytes are the same whatever the thread count. */
static void threads(void **state)
{
    (void)state;
    enum { N = 64 * 256 };
    float *x = malloc(N * sizeof *x);
    unsigned char *b1 = malloc(2 * N), *b2 = malloc(2 * N);
    int keep = rt_get_threads();
    normal(x, N, 3, 0.5);
    for (int t = 0; t < 4; t++) {
        rt_set_threads(1);
        rt_quantize(stores[t], x, b1, N);
        rt_set_threads(4);
        rt_quantize(stores[t], x, b2, N);
        assert_memory_equal(b1, b2, (size_t)rt_store_bytes(stores[t], N));
    }
    rt_set_threads(keep);
    free(x);
    free(b1);
    free(b2);
}

/* ---- mutations ------------------------------------------------------------ */

/* Which of n values differ between a and b, as a bit mask over 256. */
static int changed(const float *a, const float *b, int n, unsigned char *mask)
{
    int count = 0;
    for (int j = 0; j < n; j++)
        count += mask[j] = !same(a[j], b[j]);
    return count;
}

/* The hand block with byte k xor'd with bits, widened into y; returns how
 * many values changed, marking them in mask. */
static int mutate(int store, int k, int bits, float *y, unsigned char *mask)
{
    float x[256], val[256];
    unsigned char b[210];
    int n = hand(store, x, b, val);
    b[k] ^= (unsigned char)bits;
    rt_dequantize(store, b, y, n);
    return changed(val, y, n, mask);
}

/* A wrong scale: d's (or dmin's) bits changed change exactly the values
 * whose q (or min) is not 0. */
static void mutation_scale(void **state)
{
    (void)state;
    float x[256], val[256], y[256];
    unsigned char b[210], m[256];
    /* q8_0: 0x3800 -> 0x3801; x20 = 0 is q 0 */
    assert_int_equal(mutate(RT_Q8_0, 0, 1, y, m), 31);
    assert_false(m[20]);
    /* q4_0: values 2, 10, 17, 26, 27 are q 8, so 0 */
    hand(RT_Q4_0, x, b, val);
    assert_int_equal(mutate(RT_Q4_0, 0, 1, y, m), 27);
    for (int j = 0; j < 32; j++)
        assert_int_equal(m[j], val[j] != 0);
    /* q4_k: d 2^-10 -> 2^-11 (high byte 0x14 -> 0x10) changes every value
     * but the L = 0 ones (2 a sub-block); dmin (0x1c -> 0x18) every value
     * of the sub-blocks whose mn is not 0 (all but 0 and 6) */
    assert_int_equal(mutate(RT_Q4_K, 1, 0x04, y, m), 256 - 16);
    for (int j = 0; j < 256; j++)
        assert_int_equal(m[j], k4_L(j) != 0);
    assert_int_equal(mutate(RT_Q4_K, 3, 0x04, y, m), 256 - 64);
    for (int j = 0; j < 256; j++)
        assert_int_equal(m[j], k4_mn[j / 32] != 0);
    /* q6_k: d (bytes 208, 209) changes every value whose q is not 32 */
    int want = 0;
    for (int j = 0; j < 256; j++)
        want += k6_q(j) != 32;
    assert_int_equal(mutate(RT_Q6_K, 208, 1, y, m), want);
    for (int j = 0; j < 256; j++)
        assert_int_equal(m[j], k6_q(j) != 32);
}

/* Nibble order: swapping byte 3's nibbles in the q4_0 block changes
 * exactly values 1 and 17; a decoder that took value j < 16 from the high
 * nibble would miss the hand values wherever a byte's nibbles differ (all
 * but 0x99 and 0x88: 28 of 32); the same for q4_k (every byte differs)
 * and q6_k's ql. */
static float q4_0_swapped(const unsigned char *b, int j)
{
    int q = j < 16 ? b[2 + j] >> 4 : b[2 + j - 16] & 15;
    return (float)(q - 8) * rt_f16_f32((uint16_t)(b[0] | b[1] << 8));
}

static void mutation_nibbles(void **state)
{
    (void)state;
    float x[256], val[256], y[256];
    unsigned char b[210], m[256];
    assert_int_equal(mutate(RT_Q4_0, 3, 0x8f ^ 0xf8, y, m), 2);   /* 0x8f -> 0xf8 */
    assert_true(m[1] && m[17]);
    hand(RT_Q4_0, x, b, val);
    int miss = 0;
    for (int j = 0; j < 32; j++)
        miss += q4_0_swapped(b, j) != val[j];
    assert_int_equal(miss, 28);
    /* q4_k: byte 16 + 32 i + l swapped is values 64 i + l and 64 i + 32 + l */
    assert_int_equal(mutate(RT_Q4_K, 16 + 32 + 5, 0xff, y, m), 2);
    assert_true(m[64 + 5] && m[64 + 32 + 5]);
    /* q6_k: ql byte 33 (0xd9) holds values 33 (low) and 97 (high); qh byte
     * 129's bits 2g belong to values 1, 33, 65, 97 */
    assert_int_equal(mutate(RT_Q6_K, 33, 0xd9 ^ 0x9d, y, m), 2);
    assert_true(m[33] && m[97]);
    assert_int_equal(mutate(RT_Q6_K, 129, 0x0c, y, m), 1);        /* bits 2, 3: value 33 */
    assert_true(m[33]);
}

/* A block read one byte off: block 1 of two hand blocks read from one
 * byte early or late is not the hand values (while rt_*_at at 1 block in
 * is), for every type. */
static void mutation_offset(void **state)
{
    (void)state;
    for (int t = 0; t < 4; t++) {
        float x[256], val[256], y[256];
        unsigned char want[210], w[3 * 210];
        int n = hand(stores[t], x, want, val), bytes = rt_q_block_bytes(stores[t]);
        memcpy(w, want, (size_t)bytes);
        memcpy(w + bytes, want, (size_t)bytes);
        memcpy(w + 2 * bytes, want, (size_t)bytes);
        for (int j = 0; j < n; j++)
            assert_true(same(at(stores[t], w, n + j), val[j]));
        for (int off = -1; off <= 1; off += 2) {
            rt_dequantize(stores[t], w + bytes + off, y, n);
            int miss = 0;
            for (int j = 0; j < n; j++)
                miss += !same(y[j], val[j]);
            assert_true(miss > n / 2);
        }
    }
}

/* A wrong sub-block scale: q4_k's 6-bit scales and mins share bytes, each
 * corruption changes its own sub-block only; q6_k's scale s is values 16 s
 * .. 16 s + 15; and decoders that took q6_k's scale as sub-block (j % 128)
 * / 16 or q4_k's s >= 4 from the high nibble would miss the hand values. */
static void mutation_subblock(void **state)
{
    (void)state;
    float x[256], val[256], y[256];
    unsigned char b[210], m[256];
    /* byte 4 + 1 = 0x81: bit 0 is sc[1] (values 32 ..), bit 7 sc[5]'s top (160 ..) */
    assert_int_equal(mutate(RT_Q4_K, 5, 0x01, y, m), 30);   /* L = 0 values keep -dmin mn */
    assert_true(m[33] && !m[160 + 1]);
    assert_int_equal(mutate(RT_Q4_K, 5, 0x80, y, m), 30);
    assert_true(m[161] && !m[33]);
    /* byte 4 + 9 = 0xf1: low nibble sc[5] low, high nibble mn[5] low */
    assert_int_equal(mutate(RT_Q4_K, 13, 0x01, y, m), 30);
    for (int j = 0; j < 256; j++)
        assert_int_equal(m[j], j / 32 == 5 && k4_L(j) != 0);
    assert_int_equal(mutate(RT_Q4_K, 13, 0x10, y, m), 32);  /* mn[5]: every value */
    for (int j = 0; j < 256; j++)
        assert_int_equal(m[j], j / 32 == 5);
    /* q6_k scale 5 (-64 -> -63): values 80 .. 95 whose q is not 32 */
    int want = 0;
    for (int j = 80; j < 96; j++)
        want += k6_q(j) != 32;
    assert_int_equal(mutate(RT_Q6_K, 192 + 5, 0x01, y, m), want);
    for (int j = 0; j < 256; j++)
        assert_int_equal(m[j], j / 16 == 5 && k6_q(j) != 32);
    hand(RT_Q6_K, x, b, val);
    int miss = 0;
    for (int j = 128; j < 256; j++) {
        int g = j / 32 % 4, l = j % 32, lo = b[64 + 32 * (g % 2) + l];
        int q = (g < 2 ? lo & 15 : lo >> 4) | (b[128 + 32 + l] >> 2 * g & 3) << 4;
        float d = rt_f16_f32((uint16_t)(b[208] | b[209] << 8));
        miss += !same(d * (int8_t)b[192 + j % 128 / 16] * (q - 32), val[j]);
    }
    assert_true(miss > 100);
    hand(RT_Q4_K, x, b, val);
    miss = 0;
    for (int j = 128; j < 256; j++) {
        int s = j / 32, sc = (b[4 + s + 4] >> 4) | (b[4 + s - 4] >> 6) << 4;
        int mn = (b[4 + s + 4] & 15) | (b[4 + s] >> 6) << 4;
        int byte = b[16 + 32 * (j / 64) + j % 32], q = s % 2 ? byte >> 4 : byte & 15;
        float v = rt_f16_f32((uint16_t)(b[0] | b[1] << 8)) * sc * q -
                  rt_f16_f32((uint16_t)(b[2] | b[3] << 8)) * mn;
        miss += !same(v, val[j]);
    }
    assert_true(miss > 100);
}

/* ---- mxfp4 ------------------------------------------------------------------- */

/* MXFP4 by hand. A block is e (E8M0: the scale 2^(e - 127)), then 16
 * bytes whose low nibbles are values 0..15 and high nibbles 16..31; a
 * nibble is E2M1: bit 3 the sign, bits 2-1 the exponent, bit 0 the
 * mantissa: 0000 0, 0001 0.5 (subnormal), 0010 1, 0011 1.5, 0100 2, 0101
 * 3, 0110 4, 0111 6, and 1xxx the same negated.
 * Quantizing: amax 3 -> e = floor(log2 3) - 2 + 127 = 126, scale 0.5;
 * each x / 0.5 to its nearest E2M1, a tie to the smaller:
 *   x[0] 3 -> 6: 0111 = 7        x[16] -0.25 -> -0.5: 1001 = 9
 *   x[1] -3 -> -6: 1111 = 15     x[17] 1.5 -> 3: 0101 = 5
 *   x[2] 0.25 -> 0.5: 1          x[3] -0.75 -> -1.5: 1011 = 11
 *   x[4] 1 -> 2: 0100 = 4        x[5] 0.1 -> 0.2: nearer 0 than 0.5: 0
 *   x[6] 0.5 -> 1: 2             x[7] 1.25 -> 2.5: a tie of 2 and 3: 4
 *   x[8] 2.9 -> 5.8: 6: 7        x[9] -1.5 -> -3: 1101 = 13
 *   x[10] 2 -> 4: 0110 = 6       x[11] 0.375 -> 0.75: a tie of 0.5 and 1: 1
 * so bytes 0x7e, then 7 | 9 << 4 = 0x97, 15 | 5 << 4 = 0x5f, 0x01, 0x0b,
 * 0x04, 0x00, 0x02, 0x04, 0x07, 0x0d, 0x06, 0x01, and zeros; widened:
 * 3, -3, 0.25, -0.75, 1, 0, 0.5, 1, 3, -1.5, 2, 0.25, ..., -0.25, 1.5.
 * Then blocks read as written: e = 130 (scale 8), byte 0xf1: value 0 is
 * 0.5 * 8 = 4, value 16 -6 * 8 = -48; e = 0, nibble 1: 0.5 * 2^-127 =
 * 2^-128 (an f32 subnormal, exact); e = 255 is NaN, which rt_q_check
 * finds and a block holding an inf quantizes to; zeros are e = 0 and
 * nibbles 0. */
static void mxfp4_blocks(void **state)
{
    (void)state;
    float x[64] = {3, -3, 0.25f, -0.75f, 1, 0.1f, 0.5f, 1.25f, 2.9f, -1.5f, 2, 0.375f};
    x[16] = -0.25f;
    x[17] = 1.5f;
    static const unsigned char want[17] = {0x7e, 0x97, 0x5f, 0x01, 0x0b, 0x04, 0x00,
                                           0x02, 0x04, 0x07, 0x0d, 0x06, 0x01};
    float val[32] = {3, -3, 0.25f, -0.75f, 1, 0, 0.5f, 1, 3, -1.5f, 2, 0.25f};
    val[16] = -0.25f;
    val[17] = 1.5f;
    unsigned char b[34];
    float y[64];
    assert_int_equal(rt_q_block(RT_MXFP4), 32);
    assert_int_equal(rt_q_block_bytes(RT_MXFP4), 17);
    assert_string_equal(rt_q_name(RT_MXFP4), "mxfp4");
    rt_quantize(RT_MXFP4, x, b, 32);
    assert_memory_equal(b, want, 17);
    rt_dequantize(RT_MXFP4, b, y, 32);
    for (int j = 0; j < 32; j++) {
        assert_true(same(y[j], val[j]));
        assert_true(same_bits(rt_mxfp4_at(b, j), y[j]));
    }
    unsigned char r[17] = {130, 0xf1};
    rt_dequantize(RT_MXFP4, r, y, 32);
    assert_true(y[0] == 4 && y[16] == -48 && y[1] == 0);
    r[0] = 0;
    r[1] = 0x01;
    assert_true(rt_mxfp4_at(r, 0) == 0x1p-128f && rt_mxfp4_at(r, 16) == 0);
    assert_true(rt_e8m0_half(0) == 0x1p-128f && rt_e8m0_half(1) == 0x1p-127f &&
                rt_e8m0_half(127) == 0.5f && rt_e8m0_half(254) == 0x1p126f);
    assert_int_equal(rt_q_check(RT_MXFP4, r, 32), 0);
    r[0] = 255;
    assert_true(isnan(rt_mxfp4_at(r, 0)) && isnan(rt_e8m0_half(255)));
    memcpy(b + 17, r, 17);
    assert_int_equal(rt_q_check(RT_MXFP4, b, 64), 2);
    x[40] = INFINITY;                               /* block 1 */
    rt_quantize(RT_MXFP4, x, b, 64);
    assert_int_equal(b[17], 255);
    assert_int_equal(rt_q_check(RT_MXFP4, b, 64), 2);
    memset(x, 0, sizeof x);
    rt_quantize(RT_MXFP4, x, b, 32);
    for (int j = 0; j < 17; j++)
        assert_int_equal(b[j], 0);
}

/* Round trips of normal values at scales 1e-3 to 1e3: each value widens
 * to the nearest point of its block's grid (the E2M1 values times the
 * block's scale), and a block's largest value stays within 1/3 of it (6
 * covers amax / scale in [4, 8)). */
static void mxfp4_round_trips(void **state)
{
    (void)state;
    static const float mag[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    enum { N = 32 * 64 };
    float x[N], y[N];
    unsigned char b[N / 32 * 17];
    for (int s = -3; s <= 3; s++) {
        normal(x, N, 7 + (uint64_t)s, pow(10, s));
        rt_quantize(RT_MXFP4, x, b, N);
        rt_dequantize(RT_MXFP4, b, y, N);
        for (int i = 0; i < N; i++) {
            float scale = 2 * rt_e8m0_half(b[i / 32 * 17]), best = INFINITY;
            for (int q = 0; q < 8; q++)
                best = fminf(best, fabsf(fabsf(x[i]) - mag[q] * scale));
            if (!(fabsf(x[i] - y[i]) == best) || (y[i] != 0 && (y[i] < 0) != (x[i] < 0)))
                fail_msg("scale 1e%d: x[%d] = %g widened to %g, not its nearest point", s, i,
                         x[i], y[i]);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sizes),          cmocka_unit_test(hand_blocks),
        cmocka_unit_test(tiny_blocks),    cmocka_unit_test(ggml_digests),
        cmocka_unit_test(round_trips),
        cmocka_unit_test(element_reads),  cmocka_unit_test(checks),
        cmocka_unit_test(threads),        cmocka_unit_test(mutation_scale),
        cmocka_unit_test(mutation_nibbles), cmocka_unit_test(mutation_offset),
        cmocka_unit_test(mutation_subblock), cmocka_unit_test(mxfp4_blocks),
        cmocka_unit_test(mxfp4_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
