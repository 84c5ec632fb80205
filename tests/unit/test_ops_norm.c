/* tests/unit/test_ops_norm.c: rmsnorm layernorm batchnorm softmax: shape
 * inference and its refusals, the reference against numbers worked out
 * by hand, and the loop nests they lower to. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A shape (or int list) as a count and an array: DIMS(2, 3). */
#define DIMS(...)                                                         \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

static Node *shaped(Node *x, int rank, const int64_t *dims)
{
    x->rank = rank;
    memcpy(x->dims, dims, sizeof *dims * (size_t)rank);
    return x;
}

static Node *input(Module *m, const char *name, DType t, int rank, const int64_t *dims)
{
    return shaped(tl_input(m, name, t, 0), rank, dims);
}

static Node *weight(Module *m, const char *name, int rank, const int64_t *dims)
{
    return shaped(tl_weight(m, name, 0), rank, dims);
}

/* n infers without a problem to the type `want`, e.g. "f32[2,3]". */
static void infer_ok(Module *m, Node *n, const char *want)
{
    char msg[512], got[128];
    int errs = tl_infer(m, n, msg, sizeof msg);
    if (errs)
        fail_msg("unexpected refusal: %s", msg);
    snprintf(got, sizeof got, "%s%s", dtype_name(n->dtype), shape_str(m->a, n->rank, n->dims));
    assert_string_equal(got, want);
}

/* n is refused with exactly `count` problems, the first being `want`. */
static void infer_err(Module *m, Node *n, int count, const char *want)
{
    char msg[512];
    assert_int_equal(tl_infer(m, n, msg, sizeof msg), count);
    assert_string_equal(msg, want);
}

/* Infers n, makes it the only output, runs the reference; the result is
 * malloc'd. */
static float *run_ref(Module *m, Node *n, void **in, void **w)
{
    char msg[512];
    if (tl_infer(m, n, msg, sizeof msg))
        fail_msg("unexpected refusal: %s", msg);
    tl_outputs(m, 1, n);
    void *out[1];
    char err[256];
    if (tl_ref(m, in, w, NULL, out, err, sizeof err) != 0)
        fail_msg("reference failed: %s", err);
    return out[0];
}

/* Relative tolerance 1e-6 (plus 1e-7 absolute for values near 0). */
static void assert_near(const float *got, const float *want, int count)
{
    for (int i = 0; i < count; i++)
        if (!(fabs((double)got[i] - want[i]) <= 1e-6 * fabs(want[i]) + 1e-7))
            fail_msg("element %d: got %.9g, want %.9g", i, got[i], want[i]);
}

/* The lowered program, compiled by libtcc, agrees with the reference
 * (tl_check: relative to the reference's largest magnitude). */
static void jit_agrees(Module *m, void **in, void **w)
{
    assert_int_equal(tl_check(m, in, w, 1e-5), 0);
}

/* Pseudo-random data in [-2, 2), rounded to integers when `ties` (so that
 * equal values are common); a leaf named "var" (batchnorm's variance) gets
 * values in [0.5, 2.5). */
static void *fill(const Node *x, unsigned *seed, int ties)
{
    int64_t count = node_count(x);
    float *f = malloc((size_t)count * 4 + 4);
    for (int64_t i = 0; i < count; i++) {
        *seed = *seed * 1103515245u + 12345u;
        float v = (float)((*seed >> 8) & 0xffff) / 65536.0f * 4 - 2;
        f[i] = ties ? roundf(v) : v;
        if (x->name && strcmp(x->name, "var") == 0)
            f[i] = fabsf(v) + 0.5f;
    }
    return f;
}

/* y (the only output) on pseudo-random inputs and weights: the JIT build
 * agrees with the reference. Frees m. */
static void check_case(Module *m, Node *y, int ties)
{
    char msg[512];
    if (tl_infer(m, y, msg, sizeof msg))
        fail_msg("unexpected refusal: %s", msg);
    tl_outputs(m, 1, y);
    void *in[8], *w[8];
    unsigned seed = 7;
    for (int i = 0; i < m->ninputs; i++)
        in[i] = fill(m->inputs[i], &seed, ties);
    for (int i = 0; i < m->nweights; i++)
        w[i] = fill(m->weights[i], &seed, ties);
    jit_agrees(m, in, w);
    for (int i = 0; i < m->ninputs; i++)
        free(in[i]);
    for (int i = 0; i < m->nweights; i++)
        free(w[i]);
    tl_free(m);
}

/* n lowered alone into a fresh loop program, printed as .kir text
 * (malloc'd). */
static char *lowered(Module *m, Node *n)
{
    m->prog = ir_prog_new(m->a);
    LowerCx cx = {m, m->a, m->prog};
    op_table[n->op].lower(&cx, n);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ir_print_prog(f, m);
    fclose(f);
    return text;
}

static void assert_has(const char *text, const char *part)
{
    if (!strstr(text, part))
        fail_msg("lowered program lacks:\n%s\n--- in:\n%s", part, text);
}

/* ---- rmsnorm ----------------------------------------------------------- */

static void rmsnorm_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = input(m, "x", DT_F32, DIMS(2, 5, 3)), *w = weight(m, "w", DIMS(3));
    infer_ok(m, tl_op(m, OP_RMSNORM, "y", 2, x, w), "f32[2,5,3]");
    Node *v = input(m, "v", DT_F32, DIMS(3));
    infer_ok(m, tl_op(m, OP_RMSNORM, "y1", 2, v, w), "f32[3]");
    tl_free(m);
}

static void rmsnorm_refusals(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = input(m, "x", DT_F32, DIMS(2, 3)), *w4 = weight(m, "w4", DIMS(4));
    infer_err(m, tl_op(m, OP_RMSNORM, "y", 2, x, w4), 1,
              "nodes[2].inputs[1]: rmsnorm: w must be f32[3] to match x f32[2,3], got f32[4]");
    Node *w2 = weight(m, "w2", DIMS(1, 3));
    infer_err(m, tl_op(m, OP_RMSNORM, "y", 2, x, w2), 1,
              "nodes[4].inputs[1]: rmsnorm: w must be f32[3] to match x f32[2,3], got f32[1,3]");
    Node *xi = input(m, "xi", DT_I32, DIMS(2, 4));
    infer_err(m, tl_op(m, OP_RMSNORM, "y", 2, xi, w4), 1,
              "nodes[6].inputs[0]: rmsnorm needs f32 here, got i32[2,4]");
    Node *s = input(m, "s", DT_F32, 0, NULL);
    infer_err(m, tl_op(m, OP_RMSNORM, "y", 2, s, w4), 1,
              "nodes[8].inputs[0]: rmsnorm needs rank 1 or more here, got f32[]");
    tl_free(m);
}

static void rmsnorm_values(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = input(m, "x", DT_F32, DIMS(2, 3)), *w = weight(m, "w", DIMS(3));
    Node *y = tl_op(m, OP_RMSNORM, "y", 2, x, w);
    tl_attr_f(y, "eps", 1.0);
    float xv[] = {1, 2, 2, -2, 2, 4}, wv[] = {1, 2, 0.5f};
    float *got = run_ref(m, y, (void *[]){xv}, (void *[]){wv});
    jit_agrees(m, (void *[]){xv}, (void *[]){wv});
    /* row 0: mean(1, 4, 4) = 3, sqrt(3 + 1) = 2: (1, 2, 2) / 2 * w
     * row 1: mean(4, 4, 16) = 8, sqrt(8 + 1) = 3: (-2, 2, 4) / 3 * w */
    float want[] = {0.5f, 2.0f, 0.5f, -0.666666667f, 1.33333333f, 0.666666667f};
    assert_near(got, want, 6);
    free(got);
    tl_free(m);
}

static void rmsnorm_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = input(m, "x", DT_F32, DIMS(4, 8)), *w = weight(m, "w", DIMS(8));
    Node *y = tl_op(m, OP_RMSNORM, "y", 2, x, w);
    tl_attr_f(y, "eps", 0.5);
    infer_ok(m, y, "f32[4,8]");
    char *text = lowered(m, y);
    assert_has(text, "  kernel k0 rmsnorm_h8 (%2)\n"
                     "    for i0 in 0..4\n"
                     "      let v1: f32 = 0.0\n"
                     "      for i2 in 0..8 reduce\n"
                     "        v1 += b0[i0, i2] * b0[i0, i2]\n"
                     "      let v3: f32 = rsqrt(v1 / 8.0 + 0.5)\n"
                     "      for i4 in 0..8\n"
                     "        b2[i0, i4] = b0[i0, i4] * v3 * b1[i4]\n");
    free(text);
    tl_free(m);
}

/* ---- layernorm ----------------------------------------------------------- */

static void layernorm_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = input(m, "x", DT_F32, DIMS(7, 4)), *w = weight(m, "w", DIMS(4));
    Node *b = weight(m, "b", DIMS(4)), *b5 = weight(m, "b5", DIMS(5));
    infer_ok(m, tl_op(m, OP_LAYERNORM, "y", 3, x, w, b), "f32[7,4]");
    /* both parameters wrong: two problems */
    infer_err(m, tl_op(m, OP_LAYERNORM, "y", 3, x, b5, b5), 2,
              "nodes[5].inputs[1]: layernorm: w must be f32[4] to match x f32[7,4], got f32[5]");
    infer_err(m, tl_op(m, OP_LAYERNORM, "y", 3, x, w, b5), 1,
              "nodes[6].inputs[2]: layernorm: b must be f32[4] to match x f32[7,4], got f32[5]");
    Node *xi = input(m, "xi", DT_I32, DIMS(7, 4));
    infer_err(m, tl_op(m, OP_LAYERNORM, "y", 3, xi, w, b), 1,
              "nodes[8].inputs[0]: layernorm needs f32 here, got i32[7,4]");
    tl_free(m);
}

static void layernorm_values(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = input(m, "x", DT_F32, DIMS(2, 3)), *w = weight(m, "w", DIMS(3));
    Node *b = weight(m, "b", DIMS(3));
    Node *y = tl_op(m, OP_LAYERNORM, "y", 3, x, w, b);
    tl_attr_f(y, "eps", 1.0 / 3.0);
    float xv[] = {1, 2, 3, 6, 8, 1}, wv[] = {2, 3, 4}, bv[] = {0.5f, 0.5f, -1};
    float *got = run_ref(m, y, (void *[]){xv}, (void *[]){wv, bv});
    jit_agrees(m, (void *[]){xv}, (void *[]){wv, bv});
    /* row 0: mean 2, x - mean = (-1, 0, 1), var = 2/3, sqrt(2/3 + 1/3) = 1:
     *        (-1*2 + 0.5, 0*3 + 0.5, 1*4 - 1)
     * row 1: mean 5, x - mean = (1, 3, -4), var = 26/3, sqrt(26/3 + 1/3) = 3:
     *        (1/3*2 + 0.5, 3/3*3 + 0.5, -4/3*4 - 1) */
    float want[] = {-1.5f, 0.5f, 3.0f, 1.16666667f, 3.5f, -6.33333333f};
    assert_near(got, want, 6);
    free(got);
    tl_free(m);
}

static void layernorm_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = input(m, "x", DT_F32, DIMS(2, 3, 16)), *w = weight(m, "w", DIMS(16));
    Node *b = weight(m, "b", DIMS(16));
    Node *y = tl_op(m, OP_LAYERNORM, "y", 3, x, w, b);
    infer_ok(m, y, "f32[2,3,16]");
    char *text = lowered(m, y);
    assert_has(text, "kernel k0 layernorm_h16 (%3)\n"
                     "    for i0 in 0..2\n"
                     "      for i1 in 0..3\n"
                     "        let v2: f32 = 0.0\n"
                     "        for i3 in 0..16 reduce\n"
                     "          v2 += b0[i0, i1, i3]\n"
                     "        let v4: f32 = v2 / 16.0\n"
                     "        let v5: f32 = 0.0\n"
                     "        for i6 in 0..16 reduce\n"
                     "          v5 += (b0[i0, i1, i6] - v4) * (b0[i0, i1, i6] - v4)\n"
                     "        let v7: f32 = rsqrt(v5 / 16.0 + 9.99999975e-06)\n"
                     "        for i8 in 0..16\n"
                     "          b3[i0, i1, i8] = (b0[i0, i1, i8] - v4) * v7 * b1[i8] + b2[i8]\n");
    free(text);
    tl_free(m);
}

/* ---- batchnorm ------------------------------------------------------------- */

static void batchnorm_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = input(m, "x", DT_F32, DIMS(2, 3, 4)), *c3 = weight(m, "c3", DIMS(3));
    Node *c4 = weight(m, "c4", DIMS(4));
    infer_ok(m, tl_op(m, OP_BATCHNORM, "y", 5, x, c3, c3, c3, c3), "f32[2,3,4]");
    infer_err(m, tl_op(m, OP_BATCHNORM, "y", 5, x, c4, c3, c3, c3), 1,
              "nodes[4].inputs[1]: batchnorm: mean must be f32[3] to match x f32[2,3,4], "
              "got f32[4]");
    infer_err(m, tl_op(m, OP_BATCHNORM, "y", 5, x, c3, c3, c3, c4), 1,
              "nodes[5].inputs[4]: batchnorm: b must be f32[3] to match x f32[2,3,4], got f32[4]");
    infer_err(m, tl_op(m, OP_BATCHNORM, "y", 5, x, c3, c4, c4, c3), 2,
              "nodes[6].inputs[2]: batchnorm: var must be f32[3] to match x f32[2,3,4], "
              "got f32[4]");
    Node *x1 = input(m, "x1", DT_F32, DIMS(3));
    infer_err(m, tl_op(m, OP_BATCHNORM, "y", 5, x1, c3, c3, c3, c3), 1,
              "nodes[8].inputs[0]: batchnorm needs rank 2 or more here, got f32[3]");
    Node *x2 = input(m, "x2", DT_F32, DIMS(5, 3));
    infer_ok(m, tl_op(m, OP_BATCHNORM, "y", 5, x2, c3, c3, c3, c3), "f32[5,3]");
    tl_free(m);
}

static void batchnorm_values(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = input(m, "x", DT_F32, DIMS(2, 2, 2));
    Node *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = weight(m, (const char *[]){"mean", "var", "w", "b"}[i], DIMS(2));
    Node *y = tl_op(m, OP_BATCHNORM, "y", 5, x, p[0], p[1], p[2], p[3]);
    tl_attr_f(y, "eps", 1.0);
    /* x[n, c, s]; channel c on axis 1 (the last axis has 2 too, so using
     * the wrong axis gives other numbers) */
    float xv[] = {1, 5, 2, -4, -3, 2, 8, -1};
    float mean[] = {1, -1}, var[] = {3, 8}, w[] = {2, 1}, b[] = {0, 1};
    float *got = run_ref(m, y, (void *[]){xv}, (void *[]){mean, var, w, b});
    jit_agrees(m, (void *[]){xv}, (void *[]){mean, var, w, b});
    /* c = 0: sqrt(3 + 1) = 2, y = (x - 1) / 2 * 2 + 0
     * c = 1: sqrt(8 + 1) = 3, y = (x + 1) / 3 * 1 + 1
     * n = 0: c0 (1, 5) -> (0, 4); c1 (2, -4) -> (2, 0)
     * n = 1: c0 (-3, 2) -> (-4, 1); c1 (8, -1) -> (4, 1) */
    float want[] = {0, 4, 2, 0, -4, 1, 4, 1};
    assert_near(got, want, 8);
    free(got);
    tl_free(m);
}

static void batchnorm_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = input(m, "x", DT_F32, DIMS(2, 3, 5));
    Node *mean = weight(m, "mean", DIMS(3)), *var = weight(m, "var", DIMS(3));
    Node *w = weight(m, "w", DIMS(3)), *b = weight(m, "b", DIMS(3));
    Node *y = tl_op(m, OP_BATCHNORM, "y", 5, x, mean, var, w, b);
    infer_ok(m, y, "f32[2,3,5]");
    char *text = lowered(m, y);
    assert_has(text, "kernel k0 batchnorm_c3_n30 (%5)\n"
                     "    for i0 in 0..2\n"
                     "      for i1 in 0..3\n"
                     "        for i2 in 0..5\n"
                     "          b5[i0, i1, i2] = (b0[i0, i1, i2] - b1[i1]) * "
                     "rsqrt(b2[i1] + 9.99999975e-06) * b3[i1] + b4[i1]\n");
    assert_has(text, "buf b0 input 0 \"x\" : f32[2,3,5]\n"
                     "  buf b1 weight 0 \"mean\" : f32[3]\n");
    free(text);
    tl_free(m);
}

/* ---- softmax ------------------------------------------------------------------ */

static void softmax_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = input(m, "x", DT_F32, DIMS(2, 3));
    infer_ok(m, tl_op(m, OP_SOFTMAX, "y", 1, x), "f32[2,3]");
    Node *y = tl_op(m, OP_SOFTMAX, "y", 1, x);
    tl_attr_i(y, "axis", -2);
    infer_ok(m, y, "f32[2,3]");
    y = tl_op(m, OP_SOFTMAX, "y", 1, x);
    tl_attr_i(y, "axis", 2);
    infer_err(m, y, 1, "nodes[3].attrs.axis: softmax: axis 2 is out of range for f32[2,3]");
    y = tl_op(m, OP_SOFTMAX, "y", 1, x);
    tl_attr_i(y, "axis", -3);
    infer_err(m, y, 1, "nodes[4].attrs.axis: softmax: axis -3 is out of range for f32[2,3]");
    Node *s = input(m, "s", DT_F32, 0, NULL);
    infer_err(m, tl_op(m, OP_SOFTMAX, "y", 1, s), 1,
              "nodes[6].attrs.axis: softmax: axis -1 is out of range for f32[]");
    Node *xi = input(m, "xi", DT_I32, DIMS(4));
    infer_err(m, tl_op(m, OP_SOFTMAX, "y", 1, xi), 1,
              "nodes[8].inputs[0]: softmax needs f32 here, got i32[4]");
    tl_free(m);
}

/* Along axis 0 of a [2,3]: each column is a row of the softmax. */
static void softmax_values_axis0(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = input(m, "x", DT_F32, DIMS(2, 3));
    Node *y = tl_op(m, OP_SOFTMAX, "y", 1, x);
    tl_attr_i(y, "axis", 0);
    float xv[] = {1000, 2, 3,
                  1000, 0, 5};
    float *got = run_ref(m, y, (void *[]){xv}, NULL);
    jit_agrees(m, (void *[]){xv}, NULL);
    /* column 0: (1000, 1000) -> (1/2, 1/2); exp(1000) would overflow
     *   without subtracting the maximum
     * column 1: (2, 0) -> (e^2, 1) / (e^2 + 1) = 7.3890561 / 8.3890561 = 0.880797078,
     *   1 / 8.3890561 = 0.119202922
     * column 2: (3, 5) -> (1, e^2) / (1 + e^2) after subtracting 5 */
    float want[] = {0.5f, 0.880797078f, 0.119202922f,
                    0.5f, 0.119202922f, 0.880797078f};
    assert_near(got, want, 6);
    free(got);
    tl_free(m);
}

static void softmax_values_last(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = input(m, "x", DT_F32, DIMS(2, 4));
    Node *y = tl_op(m, OP_SOFTMAX, "y", 1, x);
    float xv[] = {0, 0, 0, 0.693147181f,
                  0, 1000, 0, 0};
    float *got = run_ref(m, y, (void *[]){xv}, NULL);
    jit_agrees(m, (void *[]){xv}, NULL);
    /* row 0: (1, 1, 1, e^ln2 = 2) / 5
     * row 1: the maximum 1000 is subtracted first: (e^-1000, 1, e^-1000,
     *        e^-1000) / (1 + 3e^-1000), and e^-1000 is 0 in f32 and f64 */
    float want[] = {0.2f, 0.2f, 0.2f, 0.4f,
                    0, 1, 0, 0};
    assert_near(got, want, 8);
    free(got);
    tl_free(m);
}

static void softmax_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = input(m, "x", DT_F32, DIMS(2, 10, 3));
    Node *y = tl_op(m, OP_SOFTMAX, "y", 1, x);
    tl_attr_i(y, "axis", 1);
    infer_ok(m, y, "f32[2,10,3]");
    char *text = lowered(m, y);
    /* max, then exp and sum (kept in y), then normalise; axis 1 inner */
    assert_has(text, "kernel k0 softmax_n10 (%1)\n"
                     "    for i0 in 0..2\n"
                     "      for i1 in 0..3\n"
                     "        let v2: f32 = b0[i0, 0, i1]\n"
                     "        for i3 in 0..10 reduce\n"
                     "          v2 max= b0[i0, i3, i1]\n"
                     "        let v4: f32 = 0.0\n"
                     "        for i5 in 0..10 reduce\n"
                     "          let v6: f32 = exp(b0[i0, i5, i1] - v2)\n"
                     "          b1[i0, i5, i1] = v6\n"
                     "          v4 += v6\n"
                     "        let v7: f32 = 1.0 / v4\n"
                     "        for i8 in 0..10\n"
                     "          b1[i0, i8, i1] = b1[i0, i8, i1] * v7\n");
    free(text);
    tl_free(m);
}

/* ---- the JIT build against the reference, over shapes and axes ------------ */

static const int64_t shapes[][4] = {{1, 5}, {2, 3, 7}, {3, 2, 3, 4}, {3, 4, 1, 3}};
#define SHAPE(i) (int)shapes[i][0], &shapes[i][1]

static void norms_jit(void **state)
{
    (void)state;
    for (int i = 0; i < 4; i++) {
        int r = (int)shapes[i][0];
        int64_t h = shapes[i][r];
        Module *m = tl_module();
        Node *x = input(m, "x", DT_F32, SHAPE(i)), *w = weight(m, "w", DIMS(h));
        check_case(m, tl_op(m, OP_RMSNORM, "y", 2, x, w), 0);
        m = tl_module();
        x = input(m, "x", DT_F32, SHAPE(i));
        w = weight(m, "w", DIMS(h));
        Node *b = weight(m, "b", DIMS(h));
        check_case(m, tl_op(m, OP_LAYERNORM, "y", 3, x, w, b), 0);
        if (r < 2)
            continue;
        m = tl_module();
        x = input(m, "x", DT_F32, SHAPE(i));
        Node *p[4];
        for (int j = 0; j < 4; j++)
            p[j] = weight(m, (const char *[]){"mean", "var", "w", "b"}[j], DIMS(shapes[i][2]));
        check_case(m, tl_op(m, OP_BATCHNORM, "y", 5, x, p[0], p[1], p[2], p[3]), 0);
    }
}

static void softmax_jit(void **state)
{
    (void)state;
    for (int i = 0; i < 4; i++)
        for (int axis = -(int)shapes[i][0]; axis < shapes[i][0]; axis++) {
            Module *m = tl_module();
            Node *y = tl_op(m, OP_SOFTMAX, "y", 1, input(m, "x", DT_F32, SHAPE(i)));
            tl_attr_i(y, "axis", axis);
            check_case(m, y, 0);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rmsnorm_infer),
        cmocka_unit_test(rmsnorm_refusals),
        cmocka_unit_test(rmsnorm_values),
        cmocka_unit_test(rmsnorm_lowering),
        cmocka_unit_test(layernorm_infer),
        cmocka_unit_test(layernorm_values),
        cmocka_unit_test(layernorm_lowering),
        cmocka_unit_test(batchnorm_infer),
        cmocka_unit_test(batchnorm_values),
        cmocka_unit_test(batchnorm_lowering),
        cmocka_unit_test(softmax_infer),
        cmocka_unit_test(softmax_values_axis0),
        cmocka_unit_test(softmax_values_last),
        cmocka_unit_test(softmax_lowering),
        cmocka_unit_test(norms_jit),
        cmocka_unit_test(softmax_jit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
