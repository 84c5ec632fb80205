/* tests/unit/test_ops_reduce.c: reduce_sum reduce_mean reduce_max argmax
 * topk: shape inference and its refusals, the reference against numbers
 * worked out by hand, the loop nests they lower to, and the JIT build
 * against the reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testlib.h"

#include <stdlib.h>

/* Infers the nodes of outs, makes them the outputs, runs the reference
 * on x and checks the JIT build on it too; out[i] is malloc'd. */
static void run(Module *m, int nout, Node **outs, float *x, void **out)
{
    for (int i = 0; i < nout; i++)
        tl_infer_ok(m, outs[i], NULL);
    m->outputs = arena_dup(m->a, outs, sizeof *outs * (size_t)nout);
    m->noutputs = nout;
    ir_module_renumber(m);
    tl_ref_ok(m, (void *[]){x}, NULL, NULL, out);
    tl_check(m, (void *[]){x}, NULL, 1e-5);
}

/* One output: its malloc'd values. */
static void *run1(Module *m, Node *y, float *x)
{
    void *out[1];
    run(m, 1, &y, x, out);
    return out[0];
}

static void assert_ints(const int32_t *got, const int32_t *want, int count)
{
    for (int i = 0; i < count; i++)
        if (got[i] != want[i])
            fail_msg("element %d: got %d, want %d", i, got[i], want[i]);
}

/* y (the only output, over input x) on pseudo-random data in [-2, 2),
 * rounded to integers when `ties`: the JIT build agrees with the
 * reference. Frees m. */
static void check_case(Module *m, Node *x, Node *y, int ties)
{
    unsigned seed = 7;
    float *xv = tl_fill(node_count(x), &seed, ties);
    free(run1(m, y, xv));
    free(xv);
    tl_free(m);
}

/* ---- reduce_sum reduce_mean reduce_max --------------------------------- */

/* A reduction of x: op over axes, keepdims. */
static Node *reduce(Module *m, OpKind op, Node *x, int naxes, const int64_t *axes, int keep)
{
    Node *y = tl_op(m, op, "y", 1, x);
    tl_attr_ints(m, y, "axes", naxes, axes);
    tl_attr_i(y, "keepdims", keep);
    return y;
}

static void reduce_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 4));
    tl_infer_ok(m, reduce(m, OP_REDUCE_SUM, x, TL_DIMS(0, 2), 0), "f32[3]");
    tl_infer_ok(m, reduce(m, OP_REDUCE_SUM, x, TL_DIMS(0, 2), 1), "f32[1,3,1]");
    tl_infer_ok(m, reduce(m, OP_REDUCE_MEAN, x, TL_DIMS(-1), 0), "f32[2,3]");
    tl_infer_ok(m, reduce(m, OP_REDUCE_MAX, x, TL_DIMS(-3, 1), 0), "f32[4]");
    tl_infer_ok(m, reduce(m, OP_REDUCE_MAX, x, TL_DIMS(2, 0, 1), 0), "f32[]");
    tl_infer_ok(m, reduce(m, OP_REDUCE_MEAN, x, TL_DIMS(0, 1, 2), 1), "f32[1,1,1]");
    tl_free(m);
}

static void reduce_refusals(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
    tl_infer_err(m, reduce(m, OP_REDUCE_SUM, x, 0, (int64_t[]){0}, 0), 1,
                 "nodes[1].attrs.axes: reduce_sum: axes must name at least one axis");
    tl_infer_err(m, reduce(m, OP_REDUCE_SUM, x, TL_DIMS(0, 3), 0), 1,
                 "nodes[2].attrs.axes: reduce_sum: axis 3 is out of range for f32[2,3]");
    tl_infer_err(m, reduce(m, OP_REDUCE_MEAN, x, TL_DIMS(-3), 1), 1,
                 "nodes[3].attrs.axes: reduce_mean: axis -3 is out of range for f32[2,3]");
    tl_infer_err(m, reduce(m, OP_REDUCE_MAX, x, TL_DIMS(1, -1), 0), 1,
                 "nodes[4].attrs.axes: reduce_max: axes [1,-1] name axis 1 twice");
    tl_infer_err(m, reduce(m, OP_REDUCE_SUM, x, TL_DIMS(0, 0), 0), 1,
                 "nodes[5].attrs.axes: reduce_sum: axes [0,0] name axis 0 twice");
    Node *xi = tl_input(m, "xi", DT_I32, TL_DIMS(2, 3));
    tl_infer_err(m, reduce(m, OP_REDUCE_SUM, xi, TL_DIMS(0), 0), 1,
                 "nodes[7].inputs[0]: reduce_sum needs f32 here, got i32[2,3]");
    tl_free(m);
}

/* x[i][j][k] of shape [2,3,2]:
 *   i = 0: j0 (3, -1)  j1 (4, 1)   j2 (-5, 9)
 *   i = 1: j0 (2, 6)   j1 (-5, 3)  j2 (5, -8) */
static float rx[] = {3, -1, 4, 1, -5, 9, 2, 6, -5, 3, 5, -8};

/* One reduction of rx against want (count values) and the JIT build. */
static void reduce_case(OpKind op, int naxes, const int64_t *axes, int keep, const char *type,
                        const float *want, int count)
{
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 2));
    Node *y = reduce(m, op, x, naxes, axes, keep);
    float *got = run1(m, y, rx);
    tl_infer_ok(m, y, type);
    tl_assert_near(got, want, count);
    free(got);
    tl_free(m);
}

static void reduce_values(void **state)
{
    (void)state;
    /* over i and k, per j: j0 3 - 1 + 2 + 6 = 10, j1 4 + 1 - 5 + 3 = 3,
     * j2 -5 + 9 + 5 - 8 = 1; the mean divides by 4; the max per j is
     * max(3, -1, 2, 6) = 6, max(4, 1, -5, 3) = 4, max(-5, 9, 5, -8) = 9 */
    reduce_case(OP_REDUCE_SUM, TL_DIMS(0, 2), 0, "f32[3]", (float[]){10, 3, 1}, 3);
    reduce_case(OP_REDUCE_SUM, TL_DIMS(0, 2), 1, "f32[1,3,1]", (float[]){10, 3, 1}, 3);
    reduce_case(OP_REDUCE_MEAN, TL_DIMS(0, -1), 0, "f32[3]", (float[]){2.5f, 0.75f, 0.25f}, 3);
    reduce_case(OP_REDUCE_MEAN, TL_DIMS(-1, 0), 1, "f32[1,3,1]", (float[]){2.5f, 0.75f, 0.25f}, 3);
    reduce_case(OP_REDUCE_MAX, TL_DIMS(2, 0), 0, "f32[3]", (float[]){6, 4, 9}, 3);
    reduce_case(OP_REDUCE_MAX, TL_DIMS(2, 0), 1, "f32[1,3,1]", (float[]){6, 4, 9}, 3);
    /* over j, per (i, k): i0 k0 3 + 4 - 5 = 2, i0 k1 -1 + 1 + 9 = 9,
     * i1 k0 2 - 5 + 5 = 2, i1 k1 6 + 3 - 8 = 1 */
    reduce_case(OP_REDUCE_SUM, TL_DIMS(1), 1, "f32[2,1,2]", (float[]){2, 9, 2, 1}, 4);
    reduce_case(OP_REDUCE_SUM, TL_DIMS(-2), 0, "f32[2,2]", (float[]){2, 9, 2, 1}, 4);
    /* everything: 10 + 3 + 1 = 14, mean 14 / 12 = 1.16666667, max 9 */
    reduce_case(OP_REDUCE_SUM, TL_DIMS(0, 1, 2), 0, "f32[]", (float[]){14}, 1);
    reduce_case(OP_REDUCE_MEAN, TL_DIMS(0, 1, 2), 0, "f32[]", (float[]){1.16666667f}, 1);
    reduce_case(OP_REDUCE_MAX, TL_DIMS(0, 1, 2), 1, "f32[1,1,1]", (float[]){9}, 1);
}

/* The maximum of negative numbers is not 0. */
static void reduce_max_negative(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 2));
    Node *y = reduce(m, OP_REDUCE_MAX, x, TL_DIMS(1), 0);
    float *got = run1(m, y, (float[]){-3, -1, -2, -7});
    tl_assert_near(got, (float[]){-1, -2}, 2);   /* max(-3, -1), max(-2, -7) */
    free(got);
    tl_free(m);
}

static void reduce_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 4));
    Node *y = reduce(m, OP_REDUCE_MAX, x, TL_DIMS(0, -1), 1);
    tl_infer_ok(m, y, "f32[1,3,1]");
    char *text = tl_lowered(m, y);
    /* kept axes outside, reduced axes inside; max starts at the box's
     * first element */
    tl_assert_has(text, "  kernel k0 reduce_max_n3_r8 (%1)\n"
                        "    for i0 in 0..3\n"
                        "      let v1: f32 = b0[0, i0, 0]\n"
                        "      for i2 in 0..2 reduce\n"
                        "        for i3 in 0..4 reduce\n"
                        "          v1 max= b0[i2, i0, i3]\n"
                        "      b1[0, i0, 0] = v1\n");
    free(text);
    tl_free(m);

    m = tl_module();
    x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
    y = reduce(m, OP_REDUCE_MEAN, x, TL_DIMS(1, 0), 0);
    tl_infer_ok(m, y, "f32[]");
    text = tl_lowered(m, y);
    tl_assert_has(text, "  buf b1 temp %1 : f32[]\n"
                        "  kernel k0 reduce_mean_n1_r6 (%1)\n"
                        "    let v0: f32 = 0.0\n"
                        "    for i1 in 0..2 reduce\n"
                        "      for i2 in 0..3 reduce\n"
                        "        v0 += b0[i1, i2]\n"
                        "    b1[] = v0 / 6.0\n");
    free(text);
    tl_free(m);
}

/* ---- argmax ----------------------------------------------------------- */

static Node *argmax(Module *m, Node *x, int64_t axis)
{
    Node *y = tl_op(m, OP_ARGMAX, "y", 1, x);
    tl_attr_i(y, "axis", axis);
    return y;
}

static void argmax_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 4));
    tl_infer_ok(m, tl_op(m, OP_ARGMAX, "y", 1, x), "i32[2,3]");
    tl_infer_ok(m, argmax(m, x, 1), "i32[2,4]");
    tl_infer_ok(m, argmax(m, x, -3), "i32[3,4]");
    tl_infer_err(m, argmax(m, x, 3), 1,
                 "nodes[4].attrs.axis: argmax: axis 3 is out of range for f32[2,3,4]");
    Node *v = tl_input(m, "v", DT_F32, TL_DIMS(5));
    tl_infer_ok(m, argmax(m, v, 0), "i32[]");
    Node *s = tl_input(m, "s", DT_F32, 0, NULL);
    tl_infer_err(m, tl_op(m, OP_ARGMAX, "y", 1, s), 1,
                 "nodes[8].attrs.axis: argmax: axis -1 is out of range for f32[]");
    Node *xi = tl_input(m, "xi", DT_I32, TL_DIMS(3));
    tl_infer_err(m, tl_op(m, OP_ARGMAX, "y", 1, xi), 1,
                 "nodes[10].inputs[0]: argmax needs f32 here, got i32[3]");
    tl_free(m);
}

static void argmax_values(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 4));
    /* row 0: 5 at 1 and 2, the first wins: 1; row 1: -1 at 0 and 2: 0 */
    int32_t *got = run1(m, argmax(m, x, -1), (float[]){1, 5, 5, 2, -1, -3, -1, -2});
    assert_ints(got, (int32_t[]){1, 0}, 2);
    free(got);
    tl_free(m);

    m = tl_module();
    x = tl_input(m, "x", DT_F32, TL_DIMS(2, 2));
    /* columns (1, 3) -> 1; (5, 5) -> 0, the first */
    got = run1(m, argmax(m, x, 0), (float[]){1, 5, 3, 5});
    assert_ints(got, (int32_t[]){1, 0}, 2);
    free(got);
    tl_free(m);
}

static void argmax_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 4));
    Node *y = argmax(m, x, 1);
    tl_infer_ok(m, y, "i32[2,4]");
    char *text = tl_lowered(m, y);
    tl_assert_has(text, "  kernel k0 argmax_n3 (%1)\n"
                        "    for i0 in 0..2\n"
                        "      for i1 in 0..4\n"
                        "        let v2: f32 = b0[i0, 0, i1]\n"
                        "        let v3: i64 = 0\n"
                        "        for i4 in 0..3 reduce\n"
                        "          if b0[i0, i4, i1] > v2\n"
                        "            v2 = b0[i0, i4, i1]\n"
                        "            v3 = i4\n"
                        "        b1[i0, i1] = v3\n");
    free(text);
    tl_free(m);
}

/* ---- topk ------------------------------------------------------------------ */

/* The values (result 0) or indices (result 1) of topk k along axis. */
static Node *topk(Module *m, Node *x, int64_t k, int64_t axis, int result)
{
    Node *y = tl_op(m, OP_TOPK, result ? "idx" : "val", 1, x);
    tl_attr_i(y, "k", k);
    tl_attr_i(y, "axis", axis);
    tl_attr_i(y, "result", result);
    return y;
}

static void topk_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 5));
    tl_infer_ok(m, topk(m, x, 3, -1, 0), "f32[2,3]");
    tl_infer_ok(m, topk(m, x, 3, -1, 1), "i32[2,3]");
    tl_infer_ok(m, topk(m, x, 2, 0, 0), "f32[2,5]");
    tl_infer_ok(m, topk(m, x, 1, -2, 1), "i32[1,5]");
    tl_infer_err(m, topk(m, x, 0, -1, 0), 1,
                 "nodes[5].attrs.k: topk: k 0 is not in 1..5 (axis 1 of f32[2,5])");
    tl_infer_err(m, topk(m, x, 3, 0, 1), 1,
                 "nodes[6].attrs.k: topk: k 3 is not in 1..2 (axis 0 of f32[2,5])");
    tl_infer_err(m, topk(m, x, 1, 2, 0), 1,
                 "nodes[7].attrs.axis: topk: axis 2 is out of range for f32[2,5]");
    Node *xi = tl_input(m, "xi", DT_I32, TL_DIMS(3));
    tl_infer_err(m, topk(m, xi, 1, 0, 0), 1,
                 "nodes[9].inputs[0]: topk needs f32 here, got i32[3]");
    tl_free(m);
}

/* Values and indices of topk over x (shape given), both checked. */
static void topk_case(int rank, const int64_t *dims, int64_t k, int64_t axis, float *x,
                      const float *want_v, const int32_t *want_i, int count)
{
    Module *m = tl_module();
    Node *in = tl_input(m, "x", DT_F32, rank, dims);
    Node *outs[2] = {topk(m, in, k, axis, 0), topk(m, in, k, axis, 1)};
    void *got[2];
    run(m, 2, outs, x, got);
    tl_assert_near(got[0], want_v, count);
    assert_ints(got[1], want_i, count);
    free(got[0]);
    free(got[1]);
    tl_free(m);
}

static void topk_values(void **state)
{
    (void)state;
    /* row 0 (1, 3, 2, 3, 0): 3 at 1 and 3 (lower index first), then 2 at 2
     * row 1 (-1, -1, -1, 4, -1): 4 at 3, then -1 at 0 and 1 of four */
    topk_case(TL_DIMS(2, 5), 3, -1, (float[]){1, 3, 2, 3, 0, -1, -1, -1, 4, -1},
              (float[]){3, 3, 2, 4, -1, -1}, (int32_t[]){1, 3, 2, 3, 0, 1}, 6);
    /* along axis 0 of [[2, 5], [7, 1], [7, 5]]: column 0 (2, 7, 7) -> 7 at 1, 7 at 2;
     * column 1 (5, 1, 5) -> 5 at 0, 5 at 2; result [[7, 5], [7, 5]] */
    topk_case(TL_DIMS(3, 2), 2, 0, (float[]){2, 5, 7, 1, 7, 5},
              (float[]){7, 5, 7, 5}, (int32_t[]){1, 0, 2, 2}, 4);
    /* all equal, k = the whole axis: indices in order */
    topk_case(TL_DIMS(4), 4, 0, (float[]){0.5f, 0.5f, 0.5f, 0.5f},
              (float[]){0.5f, 0.5f, 0.5f, 0.5f}, (int32_t[]){0, 1, 2, 3}, 4);
}

static void topk_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(3, 6));
    Node *y = topk(m, x, 2, 1, 1);
    tl_infer_ok(m, y, "i32[3,2]");
    char *text = tl_lowered(m, y);
    /* element i2 goes to its rank v3 when the rank is below k */
    tl_assert_has(text, "  kernel k0 topk_indices_n6_k2 (%1)\n"
                        "    for i0 in 0..3\n"
                        "      for i1 in 0..6\n"
                        "        let v2: i64 = 0\n"
                        "        for i3 in 0..6 reduce\n"
                        "          v2 += b0[i0, i3] > b0[i0, i1] || "
                        "b0[i0, i3] == b0[i0, i1] && i3 < i1\n"
                        "        if v2 < 2\n"
                        "          b1[i0, v2] = i1\n");
    free(text);
    tl_free(m);

    m = tl_module();
    x = tl_input(m, "x", DT_F32, TL_DIMS(3, 6));
    y = topk(m, x, 2, 0, 0);
    tl_infer_ok(m, y, "f32[2,6]");
    text = tl_lowered(m, y);
    tl_assert_has(text, "  kernel k0 topk_values_n3_k2 (%1)\n");
    tl_assert_has(text, "          b1[v2, i0] = b0[i1, i0]\n");
    free(text);
    tl_free(m);
}

/* ---- the JIT build against the reference, over shapes and axes ------------ */

static const int64_t shapes[][5] = {{1, 5}, {2, 3, 7}, {3, 2, 3, 4}, {4, 2, 1, 3, 2}};
#define SHAPE(i) (int)shapes[i][0], &shapes[i][1]

/* Every non-empty set of axes, each op, keepdims both ways; odd axes
 * written negative. */
static void reduce_jit(void **state)
{
    (void)state;
    for (int i = 0; i < 4; i++) {
        int r = (int)shapes[i][0];
        for (int mask = 1; mask < 1 << r; mask++)
            for (int op = OP_REDUCE_SUM; op <= OP_REDUCE_MAX; op++) {
                int64_t axes[KILN_MAX_RANK];
                int n = 0;
                for (int d = 0; d < r; d++)
                    if (mask >> d & 1)
                        axes[n++] = d % 2 ? d - r : d;
                Module *m = tl_module();
                Node *x = tl_input(m, "x", DT_F32, SHAPE(i));
                check_case(m, x, reduce(m, (OpKind)op, x, n, axes, mask % 2), 0);
            }
    }
}

/* Every axis, on data with many ties. */
static void argmax_topk_jit(void **state)
{
    (void)state;
    for (int i = 0; i < 4; i++) {
        int r = (int)shapes[i][0];
        for (int axis = -r; axis < r; axis++) {
            Module *m = tl_module();
            Node *x = tl_input(m, "x", DT_F32, SHAPE(i));
            check_case(m, x, argmax(m, x, axis), 1);
            int64_t len = shapes[i][1 + (axis + r) % r];
            for (int64_t k = 1; k <= len; k += len > 2 ? len / 2 : 1)
                for (int result = 0; result < 2; result++) {
                    m = tl_module();
                    x = tl_input(m, "x", DT_F32, SHAPE(i));
                    check_case(m, x, topk(m, x, k, axis, result), 1);
                }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reduce_infer),
        cmocka_unit_test(reduce_refusals),
        cmocka_unit_test(reduce_values),
        cmocka_unit_test(reduce_max_negative),
        cmocka_unit_test(reduce_lowering),
        cmocka_unit_test(argmax_infer),
        cmocka_unit_test(argmax_values),
        cmocka_unit_test(argmax_lowering),
        cmocka_unit_test(topk_infer),
        cmocka_unit_test(topk_values),
        cmocka_unit_test(topk_lowering),
        cmocka_unit_test(reduce_jit),
        cmocka_unit_test(argmax_topk_jit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
