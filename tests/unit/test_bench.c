/* tests/unit/test_bench.c: the benchmark runner's pure parts
 * (bench/util.c, bench/kernels.c): statistics, what it
 * reads back from rt_main, /proc/cpuinfo and its driver, the linear
 * shapes it collects, the one-node models it writes, and its children.
 * Nothing here times anything: benchmarks are never tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "bench/bench.h"
#include "frontend/frontend.h"
#include "tests/unit/testlib.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- statistics ----------------------------------------------------------- */

static void test_stats(void **state)
{
    (void)state;
    double odd[] = {3, 1, 2}, even[] = {4, 1, 3, 2}, one[] = {5};
    BenchTime t = bench_stats(odd, 3);
    assert_true(t.median == 2 && t.min == 1 && t.max == 3 && t.runs == 3);
    t = bench_stats(even, 4);
    assert_true(t.median == 2.5 && t.min == 1 && t.max == 4 && t.runs == 4);
    t = bench_stats(one, 1);
    assert_true(t.median == 5 && t.min == 5 && t.max == 5 && t.runs == 1);
}

/* ---- reading what others print ------------------------------------------------ */

static void test_parse_repeat(void **state)
{
    (void)state;
    BenchTime t;
    const char *log = "/tmp/kiln-bench-1/model2: input 'x' not given: seeded (seed 1)\n"
                      "/tmp/kiln-bench-1/model2: 20 runs: median 1.500 ms, min 1.250 ms, "
                      "max 3.000 ms\n";
    assert_int_equal(bench_parse_repeat(log, &t), 0);
    assert_int_equal(t.runs, 20);
    assert_true(t.median == 1.5e-3 && t.min == 1.25e-3 && t.max == 3e-3);
    assert_int_equal(bench_parse_repeat("prog: input 'x' not given\n", &t), -1);
    assert_int_equal(bench_parse_repeat(" runs: median 1 ms, min 1 ms, max 1 ms", &t), -1);
    assert_int_equal(bench_parse_repeat("p: 3 runs: median 1 ms\n", &t), -1);
}

static void test_cpu_model(void **state)
{
    (void)state;
    char out[64];
    bench_cpu_model("processor\t: 0\nvendor_id\t: AuthenticAMD\n"
                       "model name\t: AMD  EPYC   9R45 \nmodel name\t: other\n", out, sizeof out);
    assert_string_equal(out, "AMD EPYC 9R45");
    bench_cpu_model("processor\t: 0\nmodel\t\t: 2\n", out, sizeof out);
    assert_string_equal(out, "unknown");
    bench_cpu_model("model name\t:\n", out, sizeof out);
    assert_string_equal(out, "unknown");
    bench_cpu_model("", out, sizeof out);
    assert_string_equal(out, "unknown");
    bench_cpu_model("model name\t: Intel(R) Xeon(R) Platinum 8488C", out, 12);
    assert_string_equal(out, "Intel(R) Xe");
}

static void test_parse_driver(void **state)
{
    (void)state;
    BenchLinear c[2];
    bench_linear_case(&c[0], 1536, 256, 40);
    bench_linear_case(&c[1], 1536, 256, 1);
    const char *out = "case 1 rounds 9 kiln 0.002 blas 0.004 read 0.0018 ratio 2.5 diff 1e-07\n"
                      "noise\n"
                      "case 0 rounds 7 kiln 0.01 blas 0.02 read 0 ratio 1.9 diff 2e-07\n";
    assert_int_equal(bench_parse_driver(out, c, 2), 0);
    assert_int_equal(c[0].rounds, 7);
    assert_true(c[0].kiln == 0.01 && c[0].blas == 0.02 && c[0].ratio == 1.9);
    assert_int_equal(c[1].rounds, 9);
    assert_true(c[1].read == 0.0018 && c[1].diff == 1e-7);
    bench_linear_case(&c[0], 1536, 256, 40);
    bench_linear_case(&c[1], 1536, 256, 1);
    assert_int_equal(bench_parse_driver("case 1 rounds 9 kiln 1 blas 1 read 1 ratio 1 diff 0\n"
                                           "case 7 rounds 9 kiln 1 blas 1 read 1 ratio 1 diff 0\n",
                                           c, 2), -1);
}

/* ---- linear shapes and their one-node models ------------------------------ */

static Module *parse(Arena *a, const char *text)
{
    Diags d;
    diag_init(&d, a, "model.json");
    Module *m = fe_parse(a, "model.json", text, strlen(text), &d);
    if (!m)
        diag_print(&d, stderr);
    assert_non_null(m);
    return m;
}

static void test_linear_shapes(void **state)
{
    (void)state;
    Arena *a = arena_new();
    Module *m = parse(a, "{\"format\": \"kiln/1\", \"name\": \"t\",\n"
                         " \"inputs\": [{\"name\": \"x\", \"shape\": [4, 8], \"dtype\": \"f32\"}],\n"
                         " \"weights\": [{\"name\": \"a\", \"shape\": [16, 8]},\n"
                         "   {\"name\": \"b\", \"shape\": [16, 8]}, {\"name\": \"c\", \"shape\": [8, 16]},\n"
                         "   {\"name\": \"d\", \"shape\": [16, 8]}], \"state\": [],\n"
                         " \"nodes\": [{\"name\": \"p\", \"op\": \"linear\", \"inputs\": [\"x\", \"a\"]},\n"
                         "   {\"name\": \"q\", \"op\": \"linear\", \"inputs\": [\"x\", \"b\"]},\n"
                         "   {\"name\": \"r\", \"op\": \"linear\", \"inputs\": [\"p\", \"c\"]},\n"
                         "   {\"name\": \"s\", \"op\": \"matmul\", \"inputs\": [\"r\", \"c\"]},\n"
                         "   {\"name\": \"u\", \"op\": \"linear\", \"inputs\": [\"x\", \"x\"]}],\n"
                         " \"outputs\": [\"q\", \"s\", \"u\"]}\n");
    int64_t nk[4][2];
    int n = 0;
    bench_linear_shapes(m, nk, &n, 4);
    assert_int_equal(n, 2);
    assert_true(nk[0][0] == 16 && nk[0][1] == 8);
    assert_true(nk[1][0] == 8 && nk[1][1] == 16);
    bench_linear_shapes(m, nk, &n, 4);           /* already there: nothing added */
    assert_int_equal(n, 2);
    n = 1;
    bench_linear_shapes(m, nk, &n, 1);           /* full */
    assert_int_equal(n, 1);
    arena_free(a);
}

static void test_linear_model(void **state)
{
    (void)state;
    BenchLinear c;
    bench_linear_case(&c, 8960, 1536, 40);
    assert_string_equal(c.name, "lin_n8960_k1536_t40");
    Arena *a = arena_new();
    Module *m = parse(a, bench_linear_model(a, &c));
    assert_string_equal(m->name, c.name);
    assert_int_equal(m->ninputs, 1);
    assert_true(m->inputs[0]->dims[0] == 40 && m->inputs[0]->dims[1] == 1536);
    assert_int_equal(m->nweights, 1);
    assert_int_equal(m->weights[0]->init.kind, INIT_RANDOM);
    assert_int_equal(m->weights[0]->init.seed, BENCH_LINEAR_SEED);
    int64_t nk[1][2];
    int n = 0;
    bench_linear_shapes(m, nk, &n, 1);
    assert_true(n == 1 && nk[0][0] == 8960 && nk[0][1] == 1536);
    BenchLinear two[2] = {c, c};
    bench_linear_bf16(&two[1]);                   /* kiln's weights held bf16 */
    assert_string_equal(two[1].name, "lin_n8960_k1536_t40_bf16");
    assert_int_equal(two[1].store, RT_BF16);
    char *d = bench_driver(a, two, 2, 2, 0.5);
    tl_assert_has(d, "#include \"lin_n8960_k1536_t40.h\"");
    tl_assert_has(d, "{\"lin_n8960_k1536_t40\", 8960, 1536, 40, 0, open0,");
    tl_assert_has(d, "{\"lin_n8960_k1536_t40_bf16\", 8960, 1536, 40, 1, open1,");
    tl_assert_has(d, "        round_bf16(w, nw);\n");
    tl_assert_has(d, "#define THREADS 2\n");
    arena_free(a);
}

/* ---- scratch directories and children ------------------------------------- */

static void test_dir_and_spawn(void **state)
{
    (void)state;
    char dir[4096], path[4200], out[4200];
    rt_err err = {0, ""};
    assert_int_equal(bench_dir_open(dir, &err), 0);
    snprintf(path, sizeof path, "%s/sub", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(out, sizeof out, "%s/sub/out", dir);
    char *ok[] = {"sh", "-c", "echo hello; echo oops >&2; exit 3", NULL};
    assert_int_equal(bench_spawn(ok, NULL, out, out), 3);
    char *text = cg_read_file(out, NULL);
    assert_non_null(text);
    assert_string_equal(text, "hello\noops\n");
    free(text);
    char *echo[] = {"sh", "-c", "echo $KILN_BENCH_A $KILN_BENCH_B", NULL};
    const char *env[] = {"KILN_BENCH_A=new", "KILN_BENCH_B=new", NULL};
    setenv("KILN_BENCH_B", "mine", 1);              /* the user's setting stands */
    assert_int_equal(bench_spawn(echo, env, out, NULL), 0);
    text = cg_read_file(out, NULL);
    assert_string_equal(text, "new mine\n");
    free(text);
    assert_null(getenv("KILN_BENCH_A"));              /* set in the child only */
    char *missing[] = {"/nonexistent/kiln-bench-program", NULL};
    assert_int_equal(bench_spawn(missing, NULL, out, NULL), 127);
    assert_null(cg_read_file("/nonexistent/kiln-bench-file", NULL));
    bench_dir_remove(dir);
    assert_int_equal(access(dir, F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats),         cmocka_unit_test(test_parse_repeat),
        cmocka_unit_test(test_cpu_model),     cmocka_unit_test(test_parse_driver),
        cmocka_unit_test(test_linear_shapes), cmocka_unit_test(test_linear_model),
        cmocka_unit_test(test_dir_and_spawn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
