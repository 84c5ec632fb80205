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
#include <stdlib.h>
#include <string.h>

/* Infers n, makes it the only output, runs the reference; the result is
 * malloc'd. */
static float *run_ref(Module *m, Node *n, void **in, void **w)
{
    tl_infer_ok(m, n, NULL);
    tl_outputs(m, 1, n);
    void *out[1];
    tl_ref_ok(m, in, w, NULL, out);
    return out[0];
}

/* Pseudo-random data for leaf x in [-2, 2); a leaf named "var"
 * (batchnorm's variance) gets values in [0.5, 2.5). */
static float *fill(const Node *x, unsigned *seed)
{
    float *f = tl_fill(node_count(x), seed, 0);
    if (x->name && strcmp(x->name, "var") == 0)
        for (int64_t i = 0; i < node_count(x); i++)
            f[i] = fabsf(f[i]) + 0.5f;
    return f;
}

/* y (the only output) on pseudo-random inputs and weights: the JIT build
 * agrees with the reference. Frees m. */
static void check_case(Module *m, Node *y)
{
    tl_infer_ok(m, y, NULL);
    tl_outputs(m, 1, y);
    void *in[8], *w[8];
    unsigned seed = 7;
    for (int i = 0; i < m->ninputs; i++)
        in[i] = fill(m->inputs[i], &seed);
    for (int i = 0; i < m->nweights; i++)
        w[i] = fill(m->weights[i], &seed);
    tl_check(m, in, w, 1e-5);
    for (int i = 0; i < m->ninputs; i++)
        free(in[i]);
    for (int i = 0; i < m->nweights; i++)
        free(w[i]);
    tl_free(m);
}

/* ---- rmsnorm ----------------------------------------------------------- */

static void rmsnorm_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 5, 3)), *w = tl_weight(m, "w", TL_DIMS(3));
    tl_infer_ok(m, tl_op(m, OP_RMSNORM, "y", 2, x, w), "f32[2,5,3]");
    Node *v = tl_input(m, "v", DT_F32, TL_DIMS(3));
    tl_infer_ok(m, tl_op(m, OP_RMSNORM, "y1", 2, v, w), "f32[3]");
    tl_free(m);
}

static void rmsnorm_refusals(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3)), *w4 = tl_weight(m, "w4", TL_DIMS(4));
    tl_infer_err(m, tl_op(m, OP_RMSNORM, "y", 2, x, w4), 1,
                 "nodes[2].inputs[1]: rmsnorm: w must be f32[3] to match x f32[2,3], got f32[4]");
    Node *w2 = tl_weight(m, "w2", TL_DIMS(1, 3));
    tl_infer_err(m, tl_op(m, OP_RMSNORM, "y", 2, x, w2), 1,
                 "nodes[4].inputs[1]: rmsnorm: w must be f32[3] to match x f32[2,3], got f32[1,3]");
    Node *xi = tl_input(m, "xi", DT_I32, TL_DIMS(2, 4));
    tl_infer_err(m, tl_op(m, OP_RMSNORM, "y", 2, xi, w4), 1,
                 "nodes[6].inputs[0]: rmsnorm needs f32 here, got i32[2,4]");
    Node *s = tl_input(m, "s", DT_F32, 0, NULL);
    tl_infer_err(m, tl_op(m, OP_RMSNORM, "y", 2, s, w4), 1,
                 "nodes[8].inputs[0]: rmsnorm needs rank 1 or more here, got f32[]");
    tl_free(m);
}

static void rmsnorm_values(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3)), *w = tl_weight(m, "w", TL_DIMS(3));
    Node *y = tl_op(m, OP_RMSNORM, "y", 2, x, w);
    tl_attr_f(y, "eps", 1.0);
    float xv[] = {1, 2, 2, -2, 2, 4}, wv[] = {1, 2, 0.5f};
    float *got = run_ref(m, y, (void *[]){xv}, (void *[]){wv});
    tl_check(m, (void *[]){xv}, (void *[]){wv}, 1e-5);
    /* row 0: mean(1, 4, 4) = 3, sqrt(3 + 1) = 2: (1, 2, 2) / 2 * w
     * row 1: mean(4, 4, 16) = 8, sqrt(8 + 1) = 3: (-2, 2, 4) / 3 * w */
    float want[] = {0.5f, 2.0f, 0.5f, -0.666666667f, 1.33333333f, 0.666666667f};
    tl_assert_near(got, want, 6);
    free(got);
    tl_free(m);
}

static void rmsnorm_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(4, 8)), *w = tl_weight(m, "w", TL_DIMS(8));
    Node *y = tl_op(m, OP_RMSNORM, "y", 2, x, w);
    tl_attr_f(y, "eps", 0.5);
    tl_infer_ok(m, y, "f32[4,8]");
    char *text = tl_lowered(m, y);
    tl_assert_has(text, "  kernel k0 rmsnorm_h8 (%2)\n"
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
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(7, 4)), *w = tl_weight(m, "w", TL_DIMS(4));
    Node *b = tl_weight(m, "b", TL_DIMS(4)), *b5 = tl_weight(m, "b5", TL_DIMS(5));
    tl_infer_ok(m, tl_op(m, OP_LAYERNORM, "y", 3, x, w, b), "f32[7,4]");
    /* both parameters wrong: two problems */
    tl_infer_err(m, tl_op(m, OP_LAYERNORM, "y", 3, x, b5, b5), 2,
                 "nodes[5].inputs[1]: layernorm: w must be f32[4] to match x f32[7,4], got f32[5]");
    tl_infer_err(m, tl_op(m, OP_LAYERNORM, "y", 3, x, w, b5), 1,
                 "nodes[6].inputs[2]: layernorm: b must be f32[4] to match x f32[7,4], got f32[5]");
    Node *xi = tl_input(m, "xi", DT_I32, TL_DIMS(7, 4));
    tl_infer_err(m, tl_op(m, OP_LAYERNORM, "y", 3, xi, w, b), 1,
                 "nodes[8].inputs[0]: layernorm needs f32 here, got i32[7,4]");
    tl_free(m);
}

static void layernorm_values(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3)), *w = tl_weight(m, "w", TL_DIMS(3));
    Node *b = tl_weight(m, "b", TL_DIMS(3));
    Node *y = tl_op(m, OP_LAYERNORM, "y", 3, x, w, b);
    tl_attr_f(y, "eps", 1.0 / 3.0);
    float xv[] = {1, 2, 3, 6, 8, 1}, wv[] = {2, 3, 4}, bv[] = {0.5f, 0.5f, -1};
    float *got = run_ref(m, y, (void *[]){xv}, (void *[]){wv, bv});
    tl_check(m, (void *[]){xv}, (void *[]){wv, bv}, 1e-5);
    /* row 0: mean 2, x - mean = (-1, 0, 1), var = 2/3, sqrt(2/3 + 1/3) = 1:
     *        (-1*2 + 0.5, 0*3 + 0.5, 1*4 - 1)
     * row 1: mean 5, x - mean = (1, 3, -4), var = 26/3, sqrt(26/3 + 1/3) = 3:
     *        (1/3*2 + 0.5, 3/3*3 + 0.5, -4/3*4 - 1) */
    float want[] = {-1.5f, 0.5f, 3.0f, 1.16666667f, 3.5f, -6.33333333f};
    tl_assert_near(got, want, 6);
    free(got);
    tl_free(m);
}

static void layernorm_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 16)), *w = tl_weight(m, "w", TL_DIMS(16));
    Node *b = tl_weight(m, "b", TL_DIMS(16));
    Node *y = tl_op(m, OP_LAYERNORM, "y", 3, x, w, b);
    tl_infer_ok(m, y, "f32[2,3,16]");
    char *text = tl_lowered(m, y);
    tl_assert_has(text, "kernel k0 layernorm_h16 (%3)\n"
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
                        "          b3[i0, i1, i8] = (b0[i0, i1, i8] - v4) * v7 * b1[i8] + "
                        "b2[i8]\n");
    free(text);
    tl_free(m);
}

/* ---- batchnorm ------------------------------------------------------------- */

static void batchnorm_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 4)), *c3 = tl_weight(m, "c3", TL_DIMS(3));
    Node *c4 = tl_weight(m, "c4", TL_DIMS(4));
    tl_infer_ok(m, tl_op(m, OP_BATCHNORM, "y", 5, x, c3, c3, c3, c3), "f32[2,3,4]");
    tl_infer_err(m, tl_op(m, OP_BATCHNORM, "y", 5, x, c4, c3, c3, c3), 1,
                 "nodes[4].inputs[1]: batchnorm: mean must be f32[3] to match x f32[2,3,4], "
                 "got f32[4]");
    tl_infer_err(m, tl_op(m, OP_BATCHNORM, "y", 5, x, c3, c3, c3, c4), 1,
                 "nodes[5].inputs[4]: batchnorm: b must be f32[3] to match x f32[2,3,4], "
                 "got f32[4]");
    tl_infer_err(m, tl_op(m, OP_BATCHNORM, "y", 5, x, c3, c4, c4, c3), 2,
                 "nodes[6].inputs[2]: batchnorm: var must be f32[3] to match x f32[2,3,4], "
                 "got f32[4]");
    Node *x1 = tl_input(m, "x1", DT_F32, TL_DIMS(3));
    tl_infer_err(m, tl_op(m, OP_BATCHNORM, "y", 5, x1, c3, c3, c3, c3), 1,
                 "nodes[8].inputs[0]: batchnorm needs rank 2 or more here, got f32[3]");
    Node *x2 = tl_input(m, "x2", DT_F32, TL_DIMS(5, 3));
    tl_infer_ok(m, tl_op(m, OP_BATCHNORM, "y", 5, x2, c3, c3, c3, c3), "f32[5,3]");
    tl_free(m);
}

static void batchnorm_values(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 2, 2));
    Node *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = tl_weight(m, (const char *[]){"mean", "var", "w", "b"}[i], TL_DIMS(2));
    Node *y = tl_op(m, OP_BATCHNORM, "y", 5, x, p[0], p[1], p[2], p[3]);
    tl_attr_f(y, "eps", 1.0);
    /* x[n, c, s]; channel c on axis 1 (the last axis has 2 too, so using
     * the wrong axis gives other numbers) */
    float xv[] = {1, 5, 2, -4, -3, 2, 8, -1};
    float mean[] = {1, -1}, var[] = {3, 8}, w[] = {2, 1}, b[] = {0, 1};
    float *got = run_ref(m, y, (void *[]){xv}, (void *[]){mean, var, w, b});
    tl_check(m, (void *[]){xv}, (void *[]){mean, var, w, b}, 1e-5);
    /* c = 0: sqrt(3 + 1) = 2, y = (x - 1) / 2 * 2 + 0
     * c = 1: sqrt(8 + 1) = 3, y = (x + 1) / 3 * 1 + 1
     * n = 0: c0 (1, 5) -> (0, 4); c1 (2, -4) -> (2, 0)
     * n = 1: c0 (-3, 2) -> (-4, 1); c1 (8, -1) -> (4, 1) */
    float want[] = {0, 4, 2, 0, -4, 1, 4, 1};
    tl_assert_near(got, want, 8);
    free(got);
    tl_free(m);
}

static void batchnorm_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 5));
    Node *mean = tl_weight(m, "mean", TL_DIMS(3)), *var = tl_weight(m, "var", TL_DIMS(3));
    Node *w = tl_weight(m, "w", TL_DIMS(3)), *b = tl_weight(m, "b", TL_DIMS(3));
    Node *y = tl_op(m, OP_BATCHNORM, "y", 5, x, mean, var, w, b);
    tl_infer_ok(m, y, "f32[2,3,5]");
    char *text = tl_lowered(m, y);
    tl_assert_has(text, "kernel k0 batchnorm_c3_n30 (%5)\n"
                        "    for i0 in 0..2\n"
                        "      for i1 in 0..3\n"
                        "        for i2 in 0..5\n"
                        "          b5[i0, i1, i2] = (b0[i0, i1, i2] - b1[i1]) * "
                        "rsqrt(b2[i1] + 9.99999975e-06) * b3[i1] + b4[i1]\n");
    tl_assert_has(text, "buf b0 input 0 %0 : f32[2,3,5]\n"
                        "  buf b1 weight 0 %1 : f32[3]\n");
    free(text);
    tl_free(m);
}

/* ---- softmax ------------------------------------------------------------------ */

static void softmax_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
    tl_infer_ok(m, tl_op(m, OP_SOFTMAX, "y", 1, x), "f32[2,3]");
    Node *y = tl_op(m, OP_SOFTMAX, "y", 1, x);
    tl_attr_i(y, "axis", -2);
    tl_infer_ok(m, y, "f32[2,3]");
    y = tl_op(m, OP_SOFTMAX, "y", 1, x);
    tl_attr_i(y, "axis", 2);
    tl_infer_err(m, y, 1, "nodes[3].attrs.axis: softmax: axis 2 is out of range for f32[2,3]");
    y = tl_op(m, OP_SOFTMAX, "y", 1, x);
    tl_attr_i(y, "axis", -3);
    tl_infer_err(m, y, 1, "nodes[4].attrs.axis: softmax: axis -3 is out of range for f32[2,3]");
    Node *s = tl_input(m, "s", DT_F32, 0, NULL);
    tl_infer_err(m, tl_op(m, OP_SOFTMAX, "y", 1, s), 1,
                 "nodes[6].attrs.axis: softmax: axis -1 is out of range for f32[]");
    Node *xi = tl_input(m, "xi", DT_I32, TL_DIMS(4));
    tl_infer_err(m, tl_op(m, OP_SOFTMAX, "y", 1, xi), 1,
                 "nodes[8].inputs[0]: softmax needs f32 here, got i32[4]");
    tl_free(m);
}

/* Along axis 0 of a [2,3]: each column is a row of the softmax. */
static void softmax_values_axis0(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
    Node *y = tl_op(m, OP_SOFTMAX, "y", 1, x);
    tl_attr_i(y, "axis", 0);
    float xv[] = {1000, 2, 3,
                  1000, 0, 5};
    float *got = run_ref(m, y, (void *[]){xv}, NULL);
    tl_check(m, (void *[]){xv}, NULL, 1e-5);
    /* column 0: (1000, 1000) -> (1/2, 1/2); exp(1000) would overflow
     *   without subtracting the maximum
     * column 1: (2, 0) -> (e^2, 1) / (e^2 + 1) = 7.3890561 / 8.3890561 = 0.880797078,
     *   1 / 8.3890561 = 0.119202922
     * column 2: (3, 5) -> (1, e^2) / (1 + e^2) after subtracting 5 */
    float want[] = {0.5f, 0.880797078f, 0.119202922f,
                    0.5f, 0.119202922f, 0.880797078f};
    tl_assert_near(got, want, 6);
    free(got);
    tl_free(m);
}

static void softmax_values_last(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 4));
    Node *y = tl_op(m, OP_SOFTMAX, "y", 1, x);
    float xv[] = {0, 0, 0, 0.693147181f,
                  0, 1000, 0, 0};
    float *got = run_ref(m, y, (void *[]){xv}, NULL);
    tl_check(m, (void *[]){xv}, NULL, 1e-5);
    /* row 0: (1, 1, 1, e^ln2 = 2) / 5
     * row 1: the maximum 1000 is subtracted first: (e^-1000, 1, e^-1000,
     *        e^-1000) / (1 + 3e^-1000), and e^-1000 is 0 in f32 and f64 */
    float want[] = {0.2f, 0.2f, 0.2f, 0.4f,
                    0, 1, 0, 0};
    tl_assert_near(got, want, 8);
    free(got);
    tl_free(m);
}

static void softmax_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 10, 3));
    Node *y = tl_op(m, OP_SOFTMAX, "y", 1, x);
    tl_attr_i(y, "axis", 1);
    tl_infer_ok(m, y, "f32[2,10,3]");
    char *text = tl_lowered(m, y);
    /* max, then exp and sum (kept in y), then normalise; axis 1 inner */
    tl_assert_has(text, "kernel k0 softmax_n10 (%1)\n"
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
        Node *x = tl_input(m, "x", DT_F32, SHAPE(i)), *w = tl_weight(m, "w", TL_DIMS(h));
        check_case(m, tl_op(m, OP_RMSNORM, "y", 2, x, w));
        m = tl_module();
        x = tl_input(m, "x", DT_F32, SHAPE(i));
        w = tl_weight(m, "w", TL_DIMS(h));
        Node *b = tl_weight(m, "b", TL_DIMS(h));
        check_case(m, tl_op(m, OP_LAYERNORM, "y", 3, x, w, b));
        if (r < 2)
            continue;
        m = tl_module();
        x = tl_input(m, "x", DT_F32, SHAPE(i));
        Node *p[4];
        const char *names[] = {"mean", "var", "w", "b"};
        for (int j = 0; j < 4; j++)
            p[j] = tl_weight(m, names[j], TL_DIMS(shapes[i][2]));
        check_case(m, tl_op(m, OP_BATCHNORM, "y", 5, x, p[0], p[1], p[2], p[3]));
    }
}

static void softmax_jit(void **state)
{
    (void)state;
    for (int i = 0; i < 4; i++)
        for (int axis = -(int)shapes[i][0]; axis < shapes[i][0]; axis++) {
            Module *m = tl_module();
            Node *y = tl_op(m, OP_SOFTMAX, "y", 1, tl_input(m, "x", DT_F32, SHAPE(i)));
            tl_attr_i(y, "axis", axis);
            check_case(m, y);
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
