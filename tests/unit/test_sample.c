/* tests/unit/test_sample.c: how `generate` draws the next token
 * (runtime/gen/rt_sample.c): greedy ties, the coin, softmax with a
 * temperature, the top-p nucleus, top-k (1 is greedy), min-p, the
 * penalties on fixed logits (exact values worked out by hand), and the
 * options' names and ranges. Frequencies are checked over 20000 draws
 * against the probabilities worked out by hand (within 0.02). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/rt_gen.h"

#include <math.h>
#include <string.h>

static void test_argmax_ties_lowest(void **state)
{
    (void)state;
    float l[5] = {1, 3, -2, 3, 0};
    assert_int_equal(rt_sample_argmax(l, 5), 1);
    float s[8];
    uint64_t st = 9;
    assert_int_equal(rt_sample(l, 5, 0, 0.9, &st, s), 1);     /* temperature 0: greedy */
    assert_int_equal(st, 9);                                  /* ...drawing no coin */
}

static void test_coin(void **state)
{
    (void)state;
    uint64_t a = 7, b = 7;
    for (int i = 0; i < 1000; i++) {
        double u = rt_sample_coin(&a);
        assert_true(u >= 0 && u < 1);
        assert_true(u == rt_sample_coin(&b));                  /* the seed decides */
    }
    uint64_t z = 0, x = 0;                                     /* SplitMix64's first output */
    assert_true(rt_sample_coin(&z) == (double)(rt_splitmix64(&x) >> 11) * 0x1.0p-53);
}

/* Frequencies of 20000 draws of logits l (n <= 4) into f. */
static void draws(const float *l, int n, double temp, double topp, double *f)
{
    uint64_t st = 1;
    float w[4], s[64];
    memset(f, 0, sizeof *f * (size_t)n);
    for (int i = 0; i < 20000; i++) {
        memcpy(w, l, sizeof *l * (size_t)n);
        f[rt_sample(w, n, temp, topp, &st, s)] += 1.0 / 20000;
    }
}

static void test_softmax(void **state)
{
    (void)state;
    float l[3] = {0, logf(3), logf(6)};                        /* p = 0.1, 0.3, 0.6 */
    double f[3];
    draws(l, 3, 1, 0, f);
    assert_true(fabs(f[0] - 0.1) < 0.02 && fabs(f[1] - 0.3) < 0.02 && fabs(f[2] - 0.6) < 0.02);
    float h[3] = {0, 2 * logf(3), 2 * logf(6)};                /* temperature 2: the same */
    draws(h, 3, 2, 1, f);
    assert_true(fabs(f[0] - 0.1) < 0.02 && fabs(f[1] - 0.3) < 0.02 && fabs(f[2] - 0.6) < 0.02);
}

static void test_topp(void **state)
{
    (void)state;
    float l[4] = {logf(1), logf(3), logf(6), logf(10)};        /* p = .05 .15 .3 .5 */
    double f[4];
    draws(l, 4, 1, 0.7, f);                                    /* .5 + .3 passes .7: those two */
    assert_true(f[0] == 0 && f[1] == 0);
    assert_true(fabs(f[2] - 0.375) < 0.02 && fabs(f[3] - 0.625) < 0.02);
    draws(l, 4, 1, 0.4, f);                                    /* .5 alone passes .4 */
    assert_true(f[0] == 0 && f[1] == 0 && f[2] == 0);
    float t[4] = {0, 0, 0, 0};                                 /* ties: lower id first */
    draws(t, 4, 1, 0.3, f);                                    /* .25 + .25 passes .3 */
    assert_true(f[2] == 0 && f[3] == 0 && fabs(f[0] - 0.5) < 0.02);
}

/* Frequencies of 20000 draws of logits l (n <= 4) by sampler sm into f. */
static void draws_with(const float *l, int n, const rt_sampler *sm, double *f)
{
    uint64_t st = 1;
    float w[4], s[64];
    memset(f, 0, sizeof *f * (size_t)n);
    for (int i = 0; i < 20000; i++) {
        memcpy(w, l, sizeof *l * (size_t)n);
        f[rt_sampler_draw(w, n, sm, NULL, 0, &st, s)] += 1.0 / 20000;
    }
}

static void test_top_k(void **state)
{
    (void)state;
    rt_sampler sm;
    rt_sampler_init(&sm);
    float l[4] = {logf(1), logf(3), logf(6), logf(10)};        /* p = .05 .15 .3 .5 */
    double f[4];
    sm.top_k = 2;
    sm.top_p = 1;                                              /* .5 and .3, as .625 .375 */
    draws_with(l, 4, &sm, f);
    assert_true(f[0] == 0 && f[1] == 0);
    assert_true(fabs(f[2] - 0.375) < 0.02 && fabs(f[3] - 0.625) < 0.02);
    sm.top_k = 3;
    sm.top_p = 0.6;                                            /* of .95: .5 + .3 passes .57 */
    draws_with(l, 4, &sm, f);
    assert_true(f[0] == 0 && f[1] == 0 && fabs(f[3] - 0.625) < 0.02);
    /* top-k 1 is greedy, whatever the coin */
    uint64_t x = 5;
    float big[50], w[50], scratch[100];
    for (int i = 0; i < 50; i++)
        big[i] = (float)(rt_sample_coin(&x) * 4);
    sm.top_k = 1;
    sm.top_p = 0.9;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        memcpy(w, big, sizeof w);
        uint64_t st = seed;
        assert_int_equal(rt_sampler_draw(w, 50, &sm, NULL, 0, &st, scratch),
                         rt_sample_argmax(big, 50));
    }
}

static void test_min_p(void **state)
{
    (void)state;
    rt_sampler sm;
    rt_sampler_init(&sm);
    sm.top_p = 1;
    sm.min_p = 0.2;                                            /* p >= .1: .15 .3 .5 of .95 */
    float l[4] = {logf(1), logf(3), logf(6), logf(10)};
    double f[4];
    draws_with(l, 4, &sm, f);
    assert_true(f[0] == 0);
    assert_true(fabs(f[1] - 0.15 / 0.95) < 0.02 && fabs(f[2] - 0.3 / 0.95) < 0.02 &&
                fabs(f[3] - 0.5 / 0.95) < 0.02);
}

static void test_penalties(void **state)
{
    (void)state;
    rt_sampler sm;
    rt_sampler_init(&sm);
    sm.repeat_penalty = 2;
    sm.frequency_penalty = 0.5;
    sm.presence_penalty = 0.25;
    sm.repeat_last_n = 3;
    const int32_t text[4] = {0, 2, 0, 4};                      /* the window: 2, 0, 4 */
    float l[5] = {2, 1, -1, 0, 3}, s[10];
    rt_sampler_penalize(l, 5, &sm, text, 4, s);
    /* 0: 2/2 - .5 - .25; 2: -1*2 - .75; 4: 3/2 - .75; 1, 3 not in the window */
    const float want[5] = {0.25f, 1, -2.75f, 0, 0.75f};
    for (int i = 0; i < 5; i++)
        assert_true(l[i] == want[i]);
    sm.repeat_last_n = -1;                                     /* all: 0 twice */
    float m[5] = {2, 1, -1, 0, 3};
    rt_sampler_penalize(m, 5, &sm, text, 4, s);
    assert_true(m[0] == -0.25f && m[2] == -2.75f && m[4] == 0.75f);
    /* greedy after a penalty: 3 / 1.1 < 2.9, so 1 rather than 0 */
    rt_sampler g;
    rt_sampler_init(&g);
    g.temperature = 0;
    g.repeat_penalty = 1.1;
    float t[2] = {3, 2.9f};
    uint64_t st = 1;
    assert_int_equal(rt_sampler_draw(t, 2, &g, text, 1, &st, s), 1);
    float t2[2] = {3, 2.9f};
    assert_int_equal(rt_sampler_draw(t2, 2, &g, NULL, 0, &st, s), 0);
}

static void test_options(void **state)
{
    (void)state;
    rt_sampler sm;
    rt_sampler_init(&sm);
    assert_true(sm.temperature == 1 && sm.top_p == 0.9 && sm.repeat_penalty == 1 &&
                sm.repeat_last_n == 64 && !sm.top_k && !sm.min_p);
    assert_int_equal(rt_sampler_opt(&sm, "top-k", "40"), 1);
    assert_int_equal(rt_sampler_opt(&sm, "min-p", "0.05"), 1);
    assert_int_equal(rt_sampler_opt(&sm, "top-p", "0.95"), 1);
    assert_int_equal(rt_sampler_opt(&sm, "repeat-penalty", "1.1"), 1);
    assert_int_equal(rt_sampler_opt(&sm, "presence-penalty", "-0.5"), 1);
    assert_int_equal(rt_sampler_opt(&sm, "frequency-penalty", "1"), 1);
    assert_int_equal(rt_sampler_opt(&sm, "repeat-last-n", "-1"), 1);
    assert_true(sm.top_k == 40 && sm.min_p == 0.05 && sm.top_p == 0.95 &&
                sm.repeat_penalty == 1.1 && sm.presence_penalty == -0.5 &&
                sm.frequency_penalty == 1 && sm.repeat_last_n == -1);
    assert_int_equal(rt_sampler_opt(&sm, "top-k", "1.5"), -1);
    assert_int_equal(rt_sampler_opt(&sm, "top-p", "1.5"), -1);
    assert_int_equal(rt_sampler_opt(&sm, "temperature", "-1"), -1);
    assert_int_equal(rt_sampler_opt(&sm, "presence-penalty", "3"), -1);
    assert_int_equal(rt_sampler_opt(&sm, "repeat-penalty", "0"), -1);
    assert_int_equal(rt_sampler_opt(&sm, "min-p", "nan"), -1);
    assert_int_equal(rt_sampler_opt(&sm, "seed", "1"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argmax_ties_lowest), cmocka_unit_test(test_coin),
        cmocka_unit_test(test_softmax),            cmocka_unit_test(test_topp),
        cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_min_p),
        cmocka_unit_test(test_penalties),
        cmocka_unit_test(test_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
