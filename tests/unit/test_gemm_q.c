/* tests/unit/test_gemm_q.c: the gemm kernels over quantized weights
 * (runtime/quant/rt_gemm_q.c) against a double-precision reference: the
 * weight decoded by this file's own reading of rt_quant.h's layouts,
 * times the activations as rt_q_act_round gives them. Every type; 1, 3,
 * 7, 14, 17 and 64 rows of A against 1, 5 and 32 rows of W; one block of
 * k and more than a panel (1024 values); decode's spread rows (150 and
 * 213 rows of 4096 values); a sub-matrix of a bigger weight; C
 * accumulated onto, its other columns untouched. A replay of the
 * arithmetic rt_gemm_q.c promises (exact integer sums, then the f32
 * scalings block after block) gives the very bits, so every build does;
 * splitting a call by rows, columns or k changes no bit. Extreme blocks (q8 weights of -128
 * and -127, all-max and all-zero nibbles, 6-bit 0 and 63 with scales of
 * -128, negative activations; mxfp4's nibbles 7 and 15, +6 and -6) that
 * a wrong sign or offset convention fails; rt_q_act_round on
 * hand-computed blocks.
 *
 * The Makefile builds this file three times, each with its own build of
 * rt_gemm_q.c: for this CPU (-march=native: AVX-512 VNNI where it has
 * it), AVX2 (-mavx2 -mfma -mno-avx512f) and plain x86-64 (portable C):
 * test_gemm_q, test_gemm_q_avx2, test_gemm_q_c. Calls of 16 rows or more
 * would take AMX tiles where the machine has them (rt_gemm_q_amx.c, not
 * this contract): main turns AMX off (test_qamx has it). */
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

typedef struct {
    int store, block, bytes;
} QType;

static const QType qtypes[] = {{RT_Q8_0, 32, 34},   {RT_Q4_0, 32, 18}, {RT_Q4_K, 256, 144},
                                {RT_Q6_K, 256, 210}, {RT_MXFP4, 32, 17}};
enum { NQTYPES = sizeof qtypes / sizeof qtypes[0] };

static const QType *qtype(int store)
{
    for (int i = 0; i < NQTYPES; i++)
        if (qtypes[i].store == store)
            return &qtypes[i];
    return NULL;
}

static void gemm_q(int store, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                   const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc)
{
    switch (store) {
    case RT_Q8_0: rt_gemm_q8_0(m, n, k, a, lda, w, woff, ldw, c, ldc); break;
    case RT_Q4_0: rt_gemm_q4_0(m, n, k, a, lda, w, woff, ldw, c, ldc); break;
    case RT_Q4_K: rt_gemm_q4_k(m, n, k, a, lda, w, woff, ldw, c, ldc); break;
    case RT_MXFP4: rt_gemm_mxfp4(m, n, k, a, lda, w, woff, ldw, c, ldc); break;
    default: rt_gemm_q6_k(m, n, k, a, lda, w, woff, ldw, c, ldc); break;
    }
}

/* ---- this file's decoding of the blocks (rt_quant.h's layouts) ---------- */

static double half_at(const uint8_t *p)
{
    return rt_f16_f32((uint16_t)(p[0] | p[1] << 8));
}

/* q4_k's 6-bit scale and min of sub-block j from its 12 bytes s: for j <
 * 4 the low 6 bits of s[j] and s[j + 4]; for j >= 4 the nibbles of s[j +
 * 4] (low: scale, high: min) below the top 2 bits of s[j - 4] (scale) and
 * s[j] (min). */
static void q4k_scale_min(const uint8_t *s, int j, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        *mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* An E2M1 nibble's value times 2, from its bits: sign bit 3, exponent
 * bits 1-2, mantissa bit 0; exponent 0 is m / 2, else (1 + m / 2)
 * 2^(exponent - 1). */
static int e2m1_x2(int nib)
{
    int e = nib >> 1 & 3, m = nib & 1, v2 = e ? (2 + m) << (e - 1) : m;
    return nib & 8 ? -v2 : v2;
}

/* Value i of the block at p as integers: x = dw * sc * q - dmin * mn,
 * dw and dmin its block's halves (dmin 0 but for q4_k), sc and mn its
 * sub-block's scale and min (1 and 0 for q8_0, q4_0), q its integer
 * less the type's offset (q4_0 8, q6_k 32); mxfp4: q = 2 v (v its E2M1
 * value), dw = 2^(e - 128). */
typedef struct {
    double dw, dmin;
    int sc, mn, q;
} Ints;

static Ints ints(int store, const uint8_t *p, int i)
{
    Ints v = {half_at(p), 0, 1, 0, 0};
    if (store == RT_MXFP4) {
        v.dw = ldexp(1, p[0] - 128);
        v.q = e2m1_x2(i < 16 ? p[1 + i] & 15 : p[1 + i - 16] >> 4);
    } else if (store == RT_Q8_0) {
        v.q = (int8_t)p[2 + i];
    } else if (store == RT_Q4_0) {
        v.q = (i < 16 ? p[2 + i] & 15 : p[2 + i - 16] >> 4) - 8;
    } else if (store == RT_Q4_K) {
        q4k_scale_min(p + 4, i / 32, &v.sc, &v.mn);
        uint8_t byte = p[16 + 32 * (i / 64) + i % 32];
        v.q = i % 64 < 32 ? byte & 15 : byte >> 4;
        v.dmin = half_at(p + 2);
    } else {
        /* 128 values per half h: quarter u = (i % 128) / 32 takes the low
         * (u < 2) or high nibble of ql[64 h + l + 32 (u % 2)] and bits 2u,
         * 2u + 1 of qh[32 h + l] (l = i % 32) */
        int h = i / 128, u = i % 128 / 32, l = i % 32;
        uint8_t ql = p[64 * h + l + 32 * (u % 2)], qh = p[128 + 32 * h + l];
        v.q = ((u < 2 ? ql & 15 : ql >> 4) | (qh >> (2 * u) & 3) << 4) - 32;
        v.dw = half_at(p + 208);
        v.sc = (int8_t)p[192 + i / 16];
    }
    return v;
}

/* The block's scale dw (q6_k's at its end). */
static double v_dw(const QType *t, const uint8_t *p)
{
    return t->store == RT_MXFP4 ? ldexp(1, p[0] - 128) : half_at(t->store == RT_Q6_K ? p + 208 : p);
}

/* Value i of the block at p, and a bound of its magnitude that its
 * products with activations add up to in the kernels (q4_k: its two
 * terms, each rounded apart). */
static double decode(int store, const uint8_t *p, int i, double *mag)
{
    Ints v = ints(store, p, i);
    double a = v.dw * v.sc * v.q, b = v.dmin * v.mn;
    *mag = fabs(a) + fabs(b);
    return a - b;
}

/* ---- random weights and activations ------------------------------------- */

static uint32_t next(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return (uint32_t)(*s >> 32);
}

/* A finite half, sign random, magnitude 2^-8 .. 2^-2. */
static void random_scale(uint8_t *p, uint64_t *s)
{
    float f = ldexpf(1.0f + (float)(next(s) % 1024) / 1024, -8 + (int)(next(s) % 6));
    uint16_t h = rt_f32_f16(next(s) & 1 ? -f : f);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* nb blocks of random bytes with random finite scales. */
static uint8_t *random_blocks(const QType *t, int64_t nb, uint64_t seed)
{
    uint8_t *w = malloc((size_t)(nb * t->bytes));
    for (int64_t i = 0; i < nb * t->bytes; i++)
        w[i] = (uint8_t)(next(&seed) >> 24);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = w + b * t->bytes;
        if (t->store == RT_MXFP4) {               /* e: 2^-15 .. 2^0 */
            p[0] = (uint8_t)(112 + next(&seed) % 16);
            continue;
        }
        random_scale(t->store == RT_Q6_K ? p + 208 : p, &seed);
        if (t->store == RT_Q4_K)
            random_scale(p + 2, &seed);           /* dmin */
    }
    return w;
}

/* ---- the check ------------------------------------------------------------ */

/* The call on m rows of A (lda = k + 5, each row its own scale) and the
 * n rows of W that start at row 2, block 1 of a weight of n + 3 rows of
 * ldw = k + 2 blocks, onto C (ldc = n + 3) of random values: every
 * element within 1e-5 of the sum of its terms' magnitudes from the
 * reference, the spare columns of C untouched. */
static void check_against_ref(const QType *t, const uint8_t *w, int64_t ldw, int64_t woff,
                              int64_t m, int64_t n, int64_t k, const float *a, int64_t lda)
{
    int64_t ldc = n + 3;
    float *c = tl_random(m * ldc, 7 + (uint64_t)(m * n));
    float *c0 = malloc(sizeof *c0 * (size_t)(m * ldc)), *ar = malloc(sizeof *ar * (size_t)k);
    double *v = malloc(sizeof *v * (size_t)(n * k)), *mg = malloc(sizeof *mg * (size_t)(n * k));
    memcpy(c0, c, sizeof *c * (size_t)(m * ldc));
    for (int64_t j = 0; j < n; j++)
        for (int64_t kk = 0; kk < k; kk++) {
            int64_t e = woff + j * ldw + kk;
            v[j * k + kk] = decode(t->store, w + e / t->block * t->bytes, (int)(e % t->block),
                                   &mg[j * k + kk]);
        }
    gemm_q(t->store, m, n, k, a, lda, w, woff, ldw, c, ldc);
    for (int64_t r = 0; r < m; r++) {
        rt_q_act_round(t->block, a + r * lda, ar, k);
        for (int64_t j = 0; j < n; j++) {
            double want = c0[r * ldc + j], mag = fabs(want);
            for (int64_t kk = 0; kk < k; kk++) {
                want += v[j * k + kk] * ar[kk];
                mag += mg[j * k + kk] * fabs(ar[kk]);
            }
            double got = c[r * ldc + j];
            if (!(fabs(got - want) <= 1e-5 * mag))
                fail_msg("%s m=%lld n=%lld k=%lld: C[%lld][%lld] = %.9g, want %.9g (terms %.3g)",
                         rt_q_name(t->store), (long long)m, (long long)n, (long long)k,
                         (long long)r, (long long)j, got, want, mag);
        }
        for (int64_t j = n; j < ldc; j++)
            assert_true(c[r * ldc + j] == c0[r * ldc + j]);
    }
    free(c), free(c0), free(ar), free(v), free(mg);
}

static void check_shape(const QType *t, int64_t m, int64_t n, int64_t k, uint64_t seed)
{
    int64_t ldw = k + 2 * t->block, woff = 2 * ldw + t->block, lda = k + 5;
    uint8_t *w = random_blocks(t, (n + 3) * ldw / t->block, seed);
    float *a = tl_random(m * lda, seed + 1);
    for (int64_t r = 0; r < m; r++)                 /* rows of different sizes */
        for (int64_t kk = 0; kk < lda; kk++)
            a[r * lda + kk] *= ldexpf(1.0f, (int)(r % 7) - 3);
    check_against_ref(t, w, ldw, woff, m, n, k, a, lda);
    free(w);
    free(a);
}

static void each_shape(int store)
{
    static const int64_t ms[] = {1, 3, 7, 14, 17, 64}, ns[] = {1, 5, 32};
    const QType *t = qtype(store);
    /* one block, a few, and more than a panel's 1024 values */
    int64_t ks[] = {t->block, 3 * t->block, 1024 + t->block};
    uint64_t seed = 1;
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 3; j++)
            for (int l = 0; l < 3; l++)
                if (l < 2 || ms[i] * ns[j] <= 17 * 32)
                    check_shape(t, ms[i], ns[j], ks[l], seed++);
    /* decode's rows of W 12 KB apart (rows of 4096 values: 2.3 to 4.4 KB,
     * so every 3rd to 6th row side by side), fewer apart in the rows left
     * over, and a last group over rows done already */
    check_shape(t, 1, 213, 4096, seed++);
    check_shape(t, 3, 150, 4096, seed++);
}

static void gemm_q8_0(void **state) { (void)state; each_shape(RT_Q8_0); }
static void gemm_q4_0(void **state) { (void)state; each_shape(RT_Q4_0); }
static void gemm_q4_k(void **state) { (void)state; each_shape(RT_Q4_K); }
static void gemm_q6_k(void **state) { (void)state; each_shape(RT_Q6_K); }
static void gemm_mxfp4(void **state) { (void)state; each_shape(RT_MXFP4); }

/* One call on the whole, and the same as calls on pieces of rows, of
 * columns and of k (at a block): the same bits. */
static void splits(void **state)
{
    (void)state;
    for (int i = 0; i < NQTYPES; i++) {
        const QType *t = &qtypes[i];
        int64_t m = 9, n = 37, k = 5 * t->block, ldw = k, lda = k, ldc = n;
        uint8_t *w = random_blocks(t, n * k / t->block, 40 + (uint64_t)i);
        float *a = tl_random(m * lda, 50 + (uint64_t)i);
        float *whole = tl_random(m * ldc, 60), *parts = tl_random(m * ldc, 60);
        gemm_q(t->store, m, n, k, a, lda, w, 0, ldw, whole, ldc);
        int64_t m1 = 5, n1 = 19, k1 = 2 * t->block;
        for (int64_t r = 0; r < m; r += m1)
            for (int64_t j = 0; j < n; j += n1)
                for (int64_t kk = 0; kk < k; kk += k1) {
                    int64_t rm = m - r < m1 ? m - r : m1, jn = n - j < n1 ? n - j : n1;
                    int64_t kn = k - kk < k1 ? k - kk : k1;
                    gemm_q(t->store, rm, jn, kn, a + r * lda + kk, lda, w, j * ldw + kk, ldw,
                           parts + r * ldc + j, ldc);
                }
        if (memcmp(whole, parts, sizeof *whole * (size_t)(m * ldc)) != 0)
            fail_msg("%s: split calls differ from one call", rt_q_name(t->store));
        free(w), free(a), free(whole), free(parts);
    }
}

/* Calls of one scope (rt_gemm_q_kept), each A quantized once for it, give
 * the bits of rt_gemm_TYPE's calls: six operands of A in turn, twice
 * round (pieces of k as generated code slices them, one with another m,
 * one with another lda), so that the RT_KEPT a thread keeps are replaced
 * and found again. A new scope quantizes an A whose values have changed
 * anew; a type it does not know does nothing. */
static void kept(void **state)
{
    (void)state;
    enum { CALLS = 6 };
    for (int i = 0; i < NQTYPES; i++) {
        const QType *t = &qtypes[i];
        int64_t m = 20, n = 48, k = 4 * t->block, ldw = k, B = t->block;
        const int64_t op[CALLS][4] = {                  /* offset into a, m, k, lda */
            {0, m, B, k}, {B, m, B, k}, {2 * B, m, 2 * B, k}, {0, m, k, k}, {0, 16, k, k},
            {B, 17, 2 * B, k - 1},
        };
        uint8_t *w = random_blocks(t, n * k / B, 70 + (uint64_t)i);
        float *a = tl_random(m * k, 80 + (uint64_t)i);
        float *want = calloc((size_t)(CALLS * m * n), sizeof *want);
        float *got = calloc((size_t)(m * n), sizeof *got);
        assert_non_null(want), assert_non_null(got);
        for (int c = 0; c < CALLS; c++)
            gemm_q(t->store, op[c][1], n, op[c][2], a + op[c][0], op[c][3], w, op[c][0] % k, ldw,
                   want + c * m * n, n);
        uint64_t scope = rt_keep_scope();
        for (int round = 0; round < 2; round++)
            for (int c = 0; c < CALLS; c++) {
                memset(got, 0, sizeof *got * (size_t)(m * n));
                rt_gemm_q_kept(scope, t->store, op[c][1], n, op[c][2], a + op[c][0], op[c][3], w,
                               op[c][0] % k, ldw, got, n);
                if (memcmp(got, want + c * m * n, sizeof *got * (size_t)(op[c][1] * n)) != 0)
                    fail_msg("%s: call %d of round %d differs from rt_gemm_%s's",
                             rt_q_name(t->store), c, round, rt_q_name(t->store));
            }
        for (int64_t j = 0; j < m * k; j++)
            a[j] = -a[j];
        memset(got, 0, sizeof *got * (size_t)(m * n));
        rt_gemm_q_kept(rt_keep_scope(), t->store, m, n, k, a, k, w, 0, ldw, got, n);
        for (int64_t j = 0; j < m * n; j++)
            assert_true(got[j] == -want[3 * m * n + j]);
        rt_gemm_q_kept(scope, RT_F32, m, n, k, a, k, w, 0, ldw, got, n);
        for (int64_t j = 0; j < m * n; j++)
            assert_true(got[j] == -want[3 * m * n + j]);
        free(w), free(a), free(want), free(got);
    }
    /* One A under one scope for two types, as q4_k_m's q4_k and q6_k
     * weights take it in one kernel: each type's own quantization. */
    static const int pair[2] = {RT_Q4_K, RT_Q6_K};
    int64_t m = 16, n = 16, k = 512;
    float *a = tl_random(m * k, 90), *want = calloc((size_t)(2 * m * n), sizeof *want);
    float *got = calloc((size_t)(m * n), sizeof *got);
    uint8_t *w[2];
    assert_non_null(want), assert_non_null(got);
    for (int i = 0; i < 2; i++) {
        w[i] = random_blocks(qtype(pair[i]), n * k / 256, 95 + (uint64_t)i);
        gemm_q(pair[i], m, n, k, a, k, w[i], 0, k, want + i * m * n, n);
    }
    uint64_t scope = rt_keep_scope();
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 2; i++) {
            memset(got, 0, sizeof *got * (size_t)(m * n));
            rt_gemm_q_kept(scope, pair[i], m, n, k, a, k, w[i], 0, k, got, n);
            assert_memory_equal(got, want + i * m * n, sizeof *got * (size_t)(m * n));
        }
    free(w[0]), free(w[1]), free(a), free(want), free(got);
}

/* ---- the exact sums -------------------------------------------------------- */

/* What rt_gemm_q.c's top comment promises, replayed: per block, d = amax
 * / 127 and q = rintf(x * (127 / amax)) of the activations, the exact
 * integer sums, then acc = fmaf((float)i, dw * d, acc) (and, q4_k,
 * fmaf(-(float)i2, dmin * d, acc)), block after block from C's value: the
 * same bits in every build of the kernels. */
static float replay(const QType *t, const uint8_t *w, int64_t row0, int64_t k, const float *x,
                    float c)
{
    for (int64_t b = 0; b < k / t->block; b++) {
        const float *xb = x + b * t->block;
        const uint8_t *p = w + (row0 / t->block + b) * t->bytes;
        float amax = 0;
        for (int l = 0; l < t->block; l++)
            amax = fmaxf(amax, fabsf(xb[l]));
        float d = amax / 127, id = amax > 0 ? 127 / amax : 0;
        int64_t i1 = 0, i2 = 0;
        for (int l = 0; l < t->block; l++) {
            int q = (int)rintf(xb[l] * id);
            Ints v = ints(t->store, p, l);
            i1 += (int64_t)v.sc * v.q * q;
            i2 += (int64_t)v.mn * q;
        }
        c = fmaf((float)i1, (float)v_dw(t, p) * d, c);
        if (t->store == RT_Q4_K)
            c = fmaf(-(float)i2, (float)half_at(p + 2) * d, c);
    }
    return c;
}

static void exact(void **state)
{
    (void)state;
    for (int i = 0; i < NQTYPES; i++) {
        const QType *t = &qtypes[i];
        int64_t m = 5, n = 19, k = 3 * t->block;
        uint8_t *w = random_blocks(t, n * k / t->block, 80 + (uint64_t)i);
        float *a = tl_random(m * k, 90 + (uint64_t)i), *c = tl_random(m * n, 100);
        float *want = malloc(sizeof *want * (size_t)(m * n));
        for (int64_t r = 0; r < m; r++)
            for (int64_t j = 0; j < n; j++)
                want[r * n + j] = replay(t, w, j * k, k, a + r * k, c[r * n + j]);
        gemm_q(t->store, m, n, k, a, k, w, 0, k, c, n);
        for (int64_t e = 0; e < m * n; e++)
            if (memcmp(&c[e], &want[e], sizeof *c) != 0)
                fail_msg("%s: C[%lld] = %a, the replay %a", rt_q_name(t->store), (long long)e,
                         c[e], want[e]);
        free(w), free(a), free(c), free(want);
    }
}

/* ---- extremes ------------------------------------------------------------- */

/* A block of type t with every integer byte `fill` and scales of 1
 * (q6_k: its int8 scales `sc`; mxfp4: e = 127). */
static void fill_block(const QType *t, uint8_t *p, int fill, int sc)
{
    memset(p, fill, (size_t)t->bytes);
    if (t->store == RT_MXFP4) {
        p[0] = 127;
        return;
    }
    int at = t->store == RT_Q6_K ? 208 : 0;
    p[at] = 0x00;                                   /* half 1.0 = 0x3c00 */
    p[at + 1] = 0x3c;
    if (t->store == RT_Q4_K) {
        p[2] = 0x00;                                /* dmin 1.0 */
        p[3] = 0x3c;
    }
    if (t->store == RT_Q6_K)
        memset(p + 192, sc, 16);
}

/* 1 x 1 x (one block) products of extreme blocks with activations of one
 * sign; expected values computed by hand below. */
static float one_block(const QType *t, const uint8_t *p, float x)
{
    float a[256], c = 0;
    for (int i = 0; i < t->block; i++)
        a[i] = x;
    gemm_q(t->store, 1, 1, t->block, a, t->block, p, 0, t->block, &c, 1);
    return c;
}

static void extremes(void **state)
{
    (void)state;
    uint8_t p[256];
    /* activations all x = -1: amax 1, d = 1/127 (f32), every q = -127;
     * each result is i * (dw * d) with the exact integer i below, so
     * within 2^-22 relative of i / 127 (one rounding of 1/127, one of
     * the product). A sign or offset convention gone wrong changes i. */
    const QType *q8 = &qtypes[0], *q4 = &qtypes[1], *q4k = &qtypes[2], *q6k = &qtypes[3];
    const QType *mx = &qtypes[4];
    struct {
        const QType *t;
        int fill, sc;
        double want;                                /* i / 127 */
    } cases[] = {
        /* q8_0 bytes 0x80: w = -128; i = 32 * -128 * -127 */
        {q8, 0x80, 0, 32 * 128.0},
        /* 0x81: -127 */
        {q8, 0x81, 0, 32 * 127.0},
        /* 0x7f: 127 */
        {q8, 0x7f, 0, -32 * 127.0},
        /* q4_0 nibbles 15: 15 - 8 = 7; nibbles 0: -8 */
        {q4, 0xff, 0, -32 * 7.0},
        {q4, 0x00, 0, 32 * 8.0},
        /* q4_k all bytes 0xff: every 6-bit scale and min is 63, every
         * nibble 15: x = 63 * 15 - 63 per value, times -1 * 256 */
        {q4k, 0xff, 0, -256 * (63.0 * 15 - 63)},
        /* q6_k bytes 0xff: q = 63 (31 after the offset), scales -128;
         * bytes 0x00: q = 0 (-32), scales 127 */
        {q6k, 0xff, -128, 256 * 128.0 * 31},
        {q6k, 0x00, 127, 256 * 127.0 * 32},
        /* mxfp4 nibbles 7 (0111: +6) and 15 (1111: -6), scale 2^0: the
         * kernel's i = 32 * (2 * 6) * -127 times dw = 2^-1 */
        {mx, 0x77, 0, -32 * 6.0},
        {mx, 0xff, 0, 32 * 6.0},
        /* 0x21: low nibble 1 (+0.5), high 2 (+1.0) */
        {mx, 0x21, 0, -16 * 1.5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fill_block(cases[i].t, p, cases[i].fill, cases[i].sc);
        double got = one_block(cases[i].t, p, -1.0f);
        if (!(fabs(got - cases[i].want) <= fabs(cases[i].want) * 0x1p-22))
            fail_msg("%s block of 0x%02x: %.9g, want %.9g", rt_q_name(cases[i].t->store),
                     cases[i].fill, got, cases[i].want);
    }
    /* the same extremes in bigger shapes, against the reference */
    for (int i = 0; i < NQTYPES; i++) {
        const QType *t = &qtypes[i];
        int64_t m = 5, n = 19, k = 2 * t->block;
        uint8_t *w = malloc((size_t)(n * k / t->block * t->bytes));
        for (int64_t b = 0; b < n * k / t->block; b++)
            fill_block(t, w + b * t->bytes, b % 3 == 0 ? 0x80 : b % 3 == 1 ? 0xff : 0x00,
                       b % 2 ? -128 : 127);
        float *a = tl_random(m * k, 70);
        for (int64_t e = 0; e < m * k; e++)
            a[e] = e % 5 == 0 ? -1.0f : -fabsf(a[e]);
        check_against_ref(t, w, k, 0, m, n, k, a, k);
        free(w);
        free(a);
    }
}

/* ---- rt_q_act_round ------------------------------------------------------- */

static void act_round(void **state)
{
    (void)state;
    float x[256], y[256];
    /* amax 127: d = 1, q = x rounded to nearest, ties to even */
    memset(x, 0, sizeof x);
    float in1[] = {127, -63.5f, 0.5f, 1.5f, 2.5f, -2.5f, 1e-3f, 64.25f, -127};
    float out1[] = {127, -64, 0, 2, 2, -2, 0, 64, -127};
    memcpy(x, in1, sizeof in1);
    rt_q_act_round(32, x, y, 32);
    for (int i = 0; i < 32; i++)
        assert_true(y[i] == (i < 9 ? out1[i] : 0));
    /* amax 254 (second block): d = 2, x / 2 rounded, times 2: 3 -> 1.5 ->
     * 2 -> 4; 5 -> 2.5 -> 2 -> 4; -1 -> -0.5 -> 0; 100.9 -> 50.45 -> 50 */
    float in2[] = {254, 3, 5, -1, 100.9f};
    float out2[] = {254, 4, 4, 0, 100};
    memset(x, 0, sizeof x);
    memcpy(x + 32, in2, sizeof in2);
    rt_q_act_round(32, x, y, 64);
    for (int i = 0; i < 64; i++)
        assert_true(y[i] == (i >= 32 && i < 37 ? out2[i - 32] : 0));
    /* a block of 256 scales by its largest value anywhere in it: amax
     * 12.7 at index 200, d = 12.7f / 127; 6.35 is half of it: q = 64
     * (6.35f * (127 / 12.7f) rounds to 63.5 or just above in f32 and
     * both go to 64), so y = d * 64 */
    memset(x, 0, sizeof x);
    x[200] = 12.7f;
    x[3] = 6.35f;
    rt_q_act_round(256, x, y, 256);
    float d = 12.7f / 127;
    assert_true(y[200] == d * 127);
    assert_true(y[3] == d * 64);
    /* an inf makes its block NaN (and no other); a block below 2^-100 is
     * zeros */
    for (int i = 0; i < 64; i++)
        x[i] = 1e-31f;
    x[40] = INFINITY;
    rt_q_act_round(32, x, y, 64);
    for (int i = 0; i < 32; i++)
        assert_true(y[i] == 0);
    for (int i = 32; i < 64; i++)
        assert_true(isnan(y[i]));
}

int main(void)
{
    setenv("KILN_AMX", "off", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(act_round), cmocka_unit_test(gemm_q8_0), cmocka_unit_test(gemm_q4_0),
        cmocka_unit_test(gemm_q4_k), cmocka_unit_test(gemm_q6_k), cmocka_unit_test(gemm_mxfp4),
        cmocka_unit_test(splits),      cmocka_unit_test(kept),
        cmocka_unit_test(exact),     cmocka_unit_test(extremes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
