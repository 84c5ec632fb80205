/* tests/unit/test_profile.c: per-kernel profiles. rt_profile_write's lines
 * on times chosen to be exact in binary (kernels of one name summed, the
 * median of the last RT_PROFILE_SAMPLES calls, percentages of the peak
 * on the run's threads, nulls for what is unknown, names escaped; counted
 * FLOPs in place of a kernel's bound); the
 * generated run function (a JIT build) timing its kernels only while a
 * profile is attached; rt_main's --profile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codegen/codegen.h"
#include "tests/unit/testlib.h"

#include <stdlib.h>
#include <string.h>

/* What rt_profile_write wrote, malloc'd. */
static char *written(const rt_profile *p, const rt_machine *mc, int threads)
{
    const char *path = tl_tmp_path("profile.jsonl");
    rt_err e = {0, ""};
    assert_int_equal(rt_profile_write(p, mc, threads, path, &e), 0);
    size_t n;
    return tl_get_file(path, &n);
}

static void test_lines(void **state)
{
    (void)state;
    static const rt_kernel_info k[] = {
        {"gemm", 3e9, 2e9, 0}, {"norm", 0, 1e9, 0}, {"gemm", 3e9, 2e9, 0}};
    rt_profile *p = rt_profile_new(3, k);
    assert_non_null(p);
    rt_profile_add(p, 0, 0.5);
    rt_profile_add(p, 1, 0.25);
    rt_profile_add(p, 2, 1.0);
    rt_profile_add(p, 0, 1.5);
    /* peak on 2 of 4 cores: 2 x 4 = 8 GFLOP/s; gemm: 9e9 FLOPs in 3 s */
    rt_machine mc = {12, 4, 4, 4};
    char *t = written(p, &mc, 2);
    assert_string_equal(t,
        "{\"name\": \"gemm\", \"kernels\": [\"k0\", \"k2\"], \"calls\": 3, \"total_ms\": 3000, "
        "\"median_ms\": 1000, \"flops\": 3000000000, \"bytes\": 2000000000, \"gflops\": 3, "
        "\"gbs\": 2, \"peak_percent\": 37.5, \"bandwidth_percent\": 50, \"threads\": 2}\n"
        "{\"name\": \"norm\", \"kernels\": [\"k1\"], \"calls\": 1, \"total_ms\": 250, "
        "\"median_ms\": 250, \"flops\": 0, \"bytes\": 1000000000, \"gflops\": 0, \"gbs\": 4, "
        "\"peak_percent\": 0, \"bandwidth_percent\": 100, \"threads\": 2}\n");
    free(t);
    t = written(p, &mc, 4);                  /* every core: the all-core peak, 12 */
    tl_assert_has(t, "\"peak_percent\": 25,");
    free(t);
    t = written(p, &(rt_machine){0, 0, 0, 0}, 2);     /* no figures: null */
    tl_assert_has(t, "\"gflops\": 3, \"gbs\": 2, \"peak_percent\": null, "
                     "\"bandwidth_percent\": null");
    free(t);
    rt_profile_free(p);
}

/* A kernel's attention calls count what they computed: its bound comes
 * off its FLOPs, and what rt_profile_count was given between two adds is
 * the second's; what came before the profile is no kernel's. */
static void test_counted(void **state)
{
    (void)state;
    static const rt_kernel_info k[] = {{"attn", 100, 8, 60}, {"gemm", 50, 8, 0}};
    rt_profile_count(1000);
    rt_profile *p = rt_profile_new(2, k);
    assert_non_null(p);
    rt_profile_count(20);
    rt_profile_count(5);
    rt_profile_add(p, 0, 0.5);              /* 40 + 25 */
    rt_profile_add(p, 1, 0.5);              /* 50 */
    rt_profile_add(p, 0, 0.5);              /* 40 + 0 */
    char *t = written(p, &(rt_machine){12, 4, 4, 4}, 2);
    tl_assert_has(t, "\"name\": \"attn\", \"kernels\": [\"k0\"], \"calls\": 2, \"total_ms\": 1000, "
                     "\"median_ms\": 500, \"flops\": 52.5,");
    tl_assert_has(t, "\"name\": \"gemm\", \"kernels\": [\"k1\"], \"calls\": 1, \"total_ms\": 500, "
                     "\"median_ms\": 500, \"flops\": 50,");
    free(t);
    rt_profile_free(p);
}

static void test_ring_and_nulls(void **state)
{
    (void)state;
    static const rt_kernel_info k[] = {{"a\"b\\c\n", 1, 4, 0}, {"idle", 1, 4, 0}};
    rt_profile *p = rt_profile_new(2, k);
    for (int i = 0; i < 3000; i++)          /* only the last 1024 count for the median */
        rt_profile_add(p, 0, i < 3000 - RT_PROFILE_SAMPLES ? 8.0 : 0.5);
    rt_profile_add(p, 1, 0);
    char *t = written(p, &(rt_machine){12, 4, 4, 4}, 2);
    tl_assert_has(t, "{\"name\": \"a\\\"b\\\\c\\u000a\", \"kernels\": [\"k0\"], \"calls\": 3000, "
                     "\"total_ms\": 1.632e+07, \"median_ms\": 500,");
    /* a total of 0 s has no rate, and so no percentage */
    tl_assert_has(t, "\"calls\": 1, \"total_ms\": 0, \"median_ms\": 0, \"flops\": 1, \"bytes\": 4, "
                     "\"gflops\": null, \"gbs\": null, \"peak_percent\": null, "
                     "\"bandwidth_percent\": null");
    free(t);
    rt_profile_free(p);
}

/* ---- generated code ------------------------------------------------------ */

/* y = relu(x), z = y * y: two kernels once lowered. */
static Module *two_kernels(void)
{
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
    Node *y = tl_op(m, OP_RELU, "y", 1, x);
    tl_infer_ok(m, y, "f32[2,3]");
    Node *z = tl_op(m, OP_MUL, "z", 2, y, y);
    tl_infer_ok(m, z, "f32[2,3]");
    tl_outputs(m, 2, y, z);
    return m;
}

/* The calls of the line of kernel `name`. */
static long calls_of(const char *text, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "{\"name\": \"%s\"", name);
    const char *line = strstr(text, key), *c = line ? strstr(line, "\"calls\": ") : NULL;
    assert_non_null(c);
    return strtol(c + 9, NULL, 10);
}

static void test_generated(void **state)
{
    (void)state;
    Module *m = two_kernels();
    TlJit jt;
    tl_jit_open(&jt, m);
    const rt_model *md = jt.md;
    assert_int_equal(md->nkernels, m->prog->nkernels);
    assert_int_equal(md->nkernels, 2);
    for (int i = 0; i < md->nkernels; i++) {
        double flops, bytes;
        ir_kernel_cost(m->prog->kernels[i], &flops, &bytes);
        assert_string_equal(md->kernels[i].name, m->prog->kernels[i]->name);
        assert_true(md->kernels[i].flops == flops && md->kernels[i].bytes == bytes);
    }
    assert_true(md->machine.peak == 0);      /* kiln passed no figures */
    float x[6] = {1, -2, 3, -4, 5, -6}, y[6], z[6];
    const void *in[] = {x};
    void *out[] = {y, z};
    rt_profile *p = rt_profile_new(md->nkernels, md->kernels);
    assert_int_equal(md->run(jt.h, in, out), 0);  /* not attached: not counted */
    md->profile(jt.h, p);
    for (int i = 0; i < 3; i++)
        assert_int_equal(md->run(jt.h, in, out), 0);
    md->profile(jt.h, NULL);
    assert_int_equal(md->run(jt.h, in, out), 0);
    assert_true(z[2] == 9.0f && z[1] == 0.0f);    /* the timed run computes as the other */
    char *t = written(p, &md->machine, 1);
    assert_int_equal(calls_of(t, md->kernels[0].name), 3);
    assert_int_equal(calls_of(t, md->kernels[1].name), 3);
    free(t);
    rt_profile_free(p);
    tl_jit_close(&jt);
    tl_free(m);
}

static void test_main_option(void **state)
{
    (void)state;
    Module *m = two_kernels();
    TlJit jt;
    tl_jit_open(&jt, m);
    rt_model md = *jt.md;
    md.machine = (rt_machine){100, 50, 10, 2};
    char path[300];
    snprintf(path, sizeof path, "%s", tl_tmp_path("main.jsonl"));
    char *argv[] = {"prog", "--repeat", "4", "--threads", "1", "--profile", path, NULL};
    assert_int_equal(rt_main(7, argv, &md), 0);
    size_t n;
    char *t = tl_get_file(path, &n);
    assert_int_equal(calls_of(t, md.kernels[0].name), 4);
    tl_assert_has(t, "\"threads\": 1}");
    assert_null(strstr(t, "null"));           /* every figure known */
    free(t);
    md.profile = NULL;                        /* a program without timers */
    assert_int_equal(rt_main(7, argv, &md), RT_EUSAGE);
    tl_jit_close(&jt);
    tl_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines), cmocka_unit_test(test_counted),
        cmocka_unit_test(test_ring_and_nulls),
        cmocka_unit_test(test_generated), cmocka_unit_test(test_main_option),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
