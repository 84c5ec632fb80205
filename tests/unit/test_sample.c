/* tests/unit/test_sample.c: how `generate` draws the next token
 * (runtime/gen/rt_sample.c): greedy ties, the coin, softmax with a
 * temperature, and the top-p nucleus. Frequencies are checked over 20000
 * draws against the probabilities worked out by hand (within 0.02). */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argmax_ties_lowest), cmocka_unit_test(test_coin),
        cmocka_unit_test(test_softmax),            cmocka_unit_test(test_topp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
