/* tests/unit/test_math.c: rt_expf and rt_tanhf (runtime/kiln_rt.h), what
 * generated code computes exp, tanh and sigmoid with: their error in
 * ulps against libm's double exp and tanh over dense sweeps, and the
 * special values (zeros, infinities, NaN, overflow, underflow). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/kiln_rt.h"

#include <math.h>
#include <stdio.h>

/* The spacing of floats at |want| (the smallest subnormal below FLT_MIN). */
static double ulp(float want)
{
    float w = fabsf(want);
    return w < 1.17549435e-38f ? 1.40129846e-45 : (double)(nextafterf(w, INFINITY) - w);
}

/* The largest error in ulps of f against g over n + 1 points of [lo, hi];
 * where g's value rounds to 0 or inf in f32, f must give that (to an ulp
 * of the smallest subnormal). */
static double worst(float (*f)(float), double (*g)(double), float lo, float hi, int n)
{
    double w = 0;
    for (int i = 0; i <= n; i++) {
        float x = lo + (hi - lo) * (float)i / (float)n;
        double want = g(x);
        float got = f(x), wf = (float)want;
        double e = isinf(wf) ? (got == wf ? 0 : 1e9) : fabs(got - want) / ulp(wf);
        if (e > w)
            w = e;
    }
    return w;
}

static float expf_(float x) { return rt_expf(x); }
static float tanhf_(float x) { return rt_tanhf(x); }

static void exp_within_an_ulp_and_a_fifth(void **state)
{
    (void)state;
    double e1 = worst(expf_, exp, -110, 90, 4000000);
    double e2 = worst(expf_, exp, -1, 1, 1000000);
    double e3 = worst(expf_, exp, -105, -86, 1000000);   /* subnormal results */
    printf("exp: %.3f, %.3f, %.3f ulp\n", e1, e2, e3);
    assert_true(e1 <= 1.25 && e2 <= 1.25);
    assert_true(e3 <= 1.25);
}

static void tanh_within_two_ulps_and_a_tenth(void **state)
{
    (void)state;
    double e1 = worst(tanhf_, tanh, -12, 12, 4000000);
    double e2 = worst(tanhf_, tanh, -0.6f, 0.6f, 1000000);
    double e3 = worst(tanhf_, tanh, -1e-3f, 1e-3f, 100000);
    printf("tanh: %.3f, %.3f, %.3f ulp\n", e1, e2, e3);
    assert_true(e1 <= 2.1 && e2 <= 2.1 && e3 <= 2.1);
}

static void special_values(void **state)
{
    (void)state;
    assert_true(rt_expf(0.0f) == 1.0f && rt_expf(-0.0f) == 1.0f);
    assert_true(isinf(rt_expf(INFINITY)) && rt_expf(INFINITY) > 0);
    assert_true(rt_expf(-INFINITY) == 0.0f);
    assert_true(isnan(rt_expf(NAN)));
    assert_true(isinf(rt_expf(88.7229f)));             /* past FLT_MAX */
    assert_true(rt_expf(88.7228f) == expf(88.7228f));  /* just below: 3.4027e38 */
    assert_true(rt_expf(-104.5f) == 0.0f);
    assert_true(rt_expf(-103.9f) == 1.40129846e-45f);  /* the smallest subnormal */
    assert_true(rt_tanhf(0.0f) == 0.0f && !signbit(rt_tanhf(0.0f)));
    assert_true(rt_tanhf(-0.0f) == 0.0f && signbit(rt_tanhf(-0.0f)));
    assert_true(rt_tanhf(INFINITY) == 1.0f && rt_tanhf(-INFINITY) == -1.0f);
    assert_true(rt_tanhf(100.0f) == 1.0f && rt_tanhf(-9.5f) == -1.0f);
    assert_true(isnan(rt_tanhf(NAN)));
    assert_true(rt_tanhf(1e-30f) == 1e-30f && rt_tanhf(-1.4e-45f) == -1.4e-45f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exp_within_an_ulp_and_a_fifth),
        cmocka_unit_test(tanh_within_two_ulps_and_a_tenth),
        cmocka_unit_test(special_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
