/* tests/unit/test_attn.c: rt_attn, attention's kernel (`call attn`),
 * against softmax(scale Q K^T) V computed here in double, row by row over
 * the keys each query sees: causal and not, a sliding window, a soft cap,
 * grouped query heads (one call per kv head, as lowering makes them), a
 * head dim with a tail past its 16-lane chunks, a last block of keys
 * partly filled, more heads than one group of query vectors, groups
 * whose scores come from k transposed (16 vectors and more) and not, 4
 * vectors updated together (head dims of 64 and 128; on the causal
 * diagonal too),
 * sinks (a per-head logit in the denominator) above, among and below the
 * scores, and a hand-worked sink. Keys no query of a call may see hold
 * NaN: reading one would show. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/kiln_rt.h"
#include "runtime/rt_attn.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    int64_t T, Hq, Hkv, D, S, pos, window;
    int causal;
    double scale, cap;
    int sinks;                        /* 1: sinks[h] = centre + a number in [-1, 1) */
    double centre;
} Case;

static float rnd(uint64_t *s) { return (float)((double)(rt_splitmix64(s) >> 11) * 0x1p-53 * 2 - 1); }

/* The keys query row t sees: [*lo, *hi). */
static void seen(const Case *c, int64_t t, int64_t *lo, int64_t *hi)
{
    int64_t p = c->pos + t;
    *hi = c->causal ? p + 1 : c->pos + c->T;
    *lo = c->window > 0 && p - c->window + 1 > 0 ? p - c->window + 1 : 0;
}

static void check_case(const Case *c)
{
    int64_t G = c->Hq / c->Hkv, D = c->D, nq = c->T * c->Hq * D, nk = c->S * c->Hkv * D;
    float *q = malloc(sizeof *q * (size_t)nq), *o = malloc(sizeof *o * (size_t)nq);
    float *k = malloc(sizeof *k * (size_t)nk), *v = malloc(sizeof *v * (size_t)nk);
    assert_true(q && o && k && v);
    uint64_t s = 7;
    for (int64_t i = 0; i < nq; i++)
        q[i] = rnd(&s) * 2;
    float sinks[128];
    assert_true(c->Hq <= 128);
    for (int64_t h = 0; h < c->Hq; h++)
        sinks[h] = (float)(c->centre + rnd(&s));
    int64_t first, last, lo, hi;
    seen(c, 0, &first, &hi);
    seen(c, c->T - 1, &lo, &last);
    for (int64_t j = 0; j < c->S; j++)
        for (int64_t i = 0; i < c->Hkv * D; i++) {
            int in = j >= first && j < last;
            k[j * c->Hkv * D + i] = in ? rnd(&s) * 2 : NAN;
            v[j * c->Hkv * D + i] = in ? rnd(&s) : NAN;
        }
    for (int64_t g = 0; g < c->Hkv; g++)
        rt_attn(c->T, G, D, q + g * G * D, c->Hq * D, k + g * D, c->Hkv * D, v + g * D,
                c->Hkv * D, o + g * G * D, c->Hq * D, c->sinks ? sinks + g * G : NULL, c->pos,
                c->causal ? 0 : c->pos + c->T, c->window, (float)c->scale, (float)c->cap);
    double *w = malloc(sizeof *w * (size_t)c->S);
    assert_non_null(w);
    for (int64_t t = 0; t < c->T; t++)
        for (int64_t h = 0; h < c->Hq; h++) {
            const float *qv = q + (t * c->Hq + h) * D;
            int64_t g = h / G;
            double mx = c->sinks ? sinks[h] : -INFINITY, sum = 0;
            seen(c, t, &lo, &hi);
            for (int64_t j = lo; j < hi; j++) {
                double x = 0;
                for (int64_t d = 0; d < D; d++)
                    x += (double)qv[d] * k[(j * c->Hkv + g) * D + d];
                x *= c->scale;
                w[j] = c->cap > 0 ? c->cap * tanh(x / c->cap) : x;
                mx = w[j] > mx ? w[j] : mx;
            }
            if (c->sinks)
                sum = exp(sinks[h] - mx);
            for (int64_t j = lo; j < hi; j++)
                sum += w[j] = exp(w[j] - mx);
            for (int64_t d = 0; d < D; d++) {
                double want = 0;
                for (int64_t j = lo; j < hi; j++)
                    want += w[j] * v[(j * c->Hkv + g) * D + d];
                want /= sum;
                float got = o[(t * c->Hq + h) * D + d];
                if (!(fabs(got - want) <= 2e-6 + 2e-5 * fabs(want)))
                    fail_msg("row %lld head %lld d %lld: got %.9g, want %.9g", (long long)t,
                             (long long)h, (long long)d, got, want);
            }
        }
    free(w);
    free(q);
    free(o);
    free(k);
    free(v);
}

static void causal_prefill(void **state)
{
    (void)state;
    /* MHA, one block of keys, then rows past 64 keys at a position */
    check_case(&(Case){.T = 5, .Hq = 2, .Hkv = 2, .D = 16, .S = 5, .causal = 1, .scale = 0.25});
    check_case(&(Case){.T = 40, .Hq = 1, .Hkv = 1, .D = 32, .S = 200, .pos = 90, .causal = 1,
                       .scale = 0.2});
}

static void decode_gqa(void **state)
{
    (void)state;
    /* one row of 4 query heads a kv head (4 vectors: scores from k
     * transposed); 150 keys: a last block of 22 */
    check_case(&(Case){.T = 1, .Hq = 8, .Hkv = 2, .D = 64, .S = 160, .pos = 149, .causal = 1,
                       .scale = 0.125});
    /* 2 query heads a kv head: one vector at a time */
    check_case(&(Case){.T = 1, .Hq = 4, .Hkv = 2, .D = 64, .S = 160, .pos = 149, .causal = 1,
                       .scale = 0.125});
    /* D = 20: a 16-lane chunk and 4 products one by one */
    check_case(&(Case){.T = 3, .Hq = 6, .Hkv = 3, .D = 20, .S = 77, .pos = 70, .causal = 1,
                       .scale = 0.3});
}

static void tiled(void **state)
{
    (void)state;
    /* 40 vectors (20 rows x 2 heads): scores from k transposed; D = 20 */
    check_case(&(Case){.T = 20, .Hq = 2, .Hkv = 1, .D = 20, .S = 200, .pos = 150, .causal = 1,
                       .scale = 0.3});
    /* D = 160, past the transposed block's 128: one vector at a time */
    check_case(&(Case){.T = 16, .Hq = 2, .Hkv = 2, .D = 160, .S = 100, .pos = 70, .causal = 1,
                       .scale = 0.1});
    /* D = 64 and 128: 4 vectors update together (at_pv4), on the causal
     * diagonal over the keys one of them sees, zero weights past each
     * one's own; a window, a sink */
    check_case(&(Case){.T = 40, .Hq = 4, .Hkv = 2, .D = 64, .S = 300, .pos = 200, .causal = 1,
                       .scale = 0.125});
    check_case(&(Case){.T = 33, .Hq = 2, .Hkv = 1, .D = 128, .S = 200, .pos = 150,
                       .window = 70, .causal = 1, .scale = 0.09, .sinks = 1, .centre = 1});
    /* a prefill from position 0 (every group's last block a diagonal
     * one, its score chunks cut at the quads' last keys), 100 rows: a
     * group of 64, one of 36 */
    check_case(&(Case){.T = 100, .Hq = 1, .Hkv = 1, .D = 64, .S = 100, .causal = 1,
                       .scale = 0.125});
}

static void window_softcap(void **state)
{
    (void)state;
    /* a window of 50 at positions 100..111: the first blocks skipped */
    check_case(&(Case){.T = 12, .Hq = 4, .Hkv = 1, .D = 16, .S = 140, .pos = 100,
                       .window = 50, .causal = 1, .scale = 0.5, .cap = 2.0});
    /* not causal: every row sees keys 0 .. pos + T - 1 */
    check_case(&(Case){.T = 7, .Hq = 2, .Hkv = 1, .D = 48, .S = 200, .pos = 130,
                       .scale = 0.4, .cap = 1.5});
}

static void many_heads(void **state)
{
    (void)state;
    /* 70 query heads on one kv head: groups of 64 vectors split the heads */
    check_case(&(Case){.T = 2, .Hq = 70, .Hkv = 1, .D = 16, .S = 90, .pos = 80, .causal = 1,
                       .scale = 0.25});
    /* 3 heads: groups of 21 rows (63 vectors), the last one of 9 */
    check_case(&(Case){.T = 30, .Hq = 3, .Hkv = 1, .D = 16, .S = 30, .causal = 1, .scale = 0.25});
}

/* One row, one head, D = 1, q = 1, keys 0 and ln 3 (scale 1), values 4
 * and 8, the sink's logit ln 3: (1 * 4 + 3 * 8) / (1 + 3 + 3) = 4; with
 * key 0 alone (causal, position 0) 4 / (1 + 3) = 1. Then random cases:
 * the sink far above the scores (no block's max passes it), among them,
 * far below (no effect), with a window, GQA and the transposed tiles. */
static void sinks(void **state)
{
    (void)state;
    float q = 1, k[2] = {0, logf(3)}, v[2] = {4, 8}, sink = logf(3), o;
    rt_attn(1, 1, 1, &q, 1, k, 1, v, 1, &o, 1, &sink, 0, 2, 0, 1, 0);
    assert_float_equal(o, 4, 1e-6);
    rt_attn(1, 1, 1, &q, 1, k, 1, v, 1, &o, 1, &sink, 0, 0, 0, 1, 0);
    assert_float_equal(o, 1, 1e-6);
    check_case(&(Case){.T = 1, .Hq = 8, .Hkv = 2, .D = 64, .S = 160, .pos = 149, .causal = 1,
                       .scale = 0.125, .sinks = 1, .centre = 30});
    check_case(&(Case){.T = 20, .Hq = 2, .Hkv = 1, .D = 20, .S = 200, .pos = 150, .causal = 1,
                       .scale = 0.3, .sinks = 1});
    check_case(&(Case){.T = 12, .Hq = 4, .Hkv = 1, .D = 16, .S = 140, .pos = 100,
                       .window = 50, .causal = 1, .scale = 0.5, .sinks = 1, .centre = 1});
    check_case(&(Case){.T = 7, .Hq = 2, .Hkv = 1, .D = 48, .S = 200, .pos = 130,
                       .scale = 0.4, .sinks = 1, .centre = -40});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(causal_prefill),
        cmocka_unit_test(decode_gqa),
        cmocka_unit_test(tiled),
        cmocka_unit_test(window_softcap),
        cmocka_unit_test(many_heads),
        cmocka_unit_test(sinks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
