/* tests/unit/test_ops_shape.c: reshape transpose concat slice: shape
 * inference and its refusals, the reference against numbers worked out by
 * hand, the loop nests they lower to, and the JIT build against the
 * reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testlib.h"

#include <stdlib.h>
#include <string.h>

/* Infers y, makes it the only output, runs the reference on the inputs'
 * data and checks the JIT build (exact for moved elements: tolerance 0);
 * the result is malloc'd. */
static void *run1(Module *m, Node *y, void **in)
{
    tl_infer_ok(m, y, NULL);
    tl_outputs(m, 1, y);
    void *out[1];
    tl_ref_ok(m, in, NULL, NULL, out);
    tl_check(m, in, NULL, 0.0);
    return out[0];
}

/* Shape ops move elements: results are exact. */
static void assert_same(const void *got, const void *want, int count)
{
    if (memcmp(got, want, (size_t)count * 4) != 0)
        for (int i = 0; i < count; i++)
            if (((const int32_t *)got)[i] != ((const int32_t *)want)[i])
                fail_msg("element %d differs (bits %08x, want %08x)", i,
                         (unsigned)((const int32_t *)got)[i], (unsigned)((const int32_t *)want)[i]);
}

/* Distinct data for leaf x: f32 i + 0.5, or i32 1000 + i, shifted by
 * `base` so that operands differ. */
static void *fill(const Node *x, int base)
{
    int64_t count = node_count(x);
    void *p = malloc((size_t)count * 4 + 4);
    for (int64_t i = 0; i < count; i++) {
        if (x->dtype == DT_I32)
            ((int32_t *)p)[i] = (int32_t)(1000 * (base + 1) + i);
        else
            ((float *)p)[i] = (float)(base * 1000 + i) + 0.5f;
    }
    return p;
}

/* y (the only output) on distinct data: the JIT build moves every element
 * where the reference does. Frees m. */
static void check_case(Module *m, Node *y)
{
    void *in[8];
    for (int i = 0; i < m->ninputs; i++)
        in[i] = fill(m->inputs[i], i);
    free(run1(m, y, in));
    for (int i = 0; i < m->ninputs; i++)
        free(in[i]);
    tl_free(m);
}

/* ---- reshape ----------------------------------------------------------- */

static Node *reshape(Module *m, Node *x, int rank, const int64_t *shape)
{
    Node *y = tl_op(m, OP_RESHAPE, "y", 1, x);
    tl_attr_ints(m, y, "shape", rank, shape);
    return y;
}

static void reshape_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
    tl_infer_ok(m, reshape(m, x, TL_DIMS(3, -1)), "f32[3,2]");
    tl_infer_ok(m, reshape(m, x, TL_DIMS(-1)), "f32[6]");
    tl_infer_ok(m, reshape(m, x, TL_DIMS(1, -1, 3, 1)), "f32[1,2,3,1]");
    Node *xi = tl_input(m, "xi", DT_I32, TL_DIMS(4));
    tl_infer_ok(m, reshape(m, xi, TL_DIMS(2, 2)), "i32[2,2]");
    Node *one = tl_input(m, "one", DT_F32, TL_DIMS(1, 1));
    tl_infer_ok(m, reshape(m, one, 0, (int64_t[]){0}), "f32[]");
    Node *s = tl_input(m, "s", DT_F32, 0, NULL);
    tl_infer_ok(m, reshape(m, s, TL_DIMS(1, -1)), "f32[1,1]");
    tl_free(m);
}

static void reshape_refusals(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
    tl_infer_err(m, reshape(m, x, TL_DIMS(4, 2)), 1,
                 "nodes[1]: reshape: cannot reshape f32[2,3] (6 elements) to [4,2] (8 elements)");
    tl_infer_err(m, reshape(m, x, TL_DIMS(4, -1)), 1,
                 "nodes[2]: reshape: cannot reshape f32[2,3] (6 elements) to [4,-1]");
    tl_infer_err(m, reshape(m, x, TL_DIMS(12, -1)), 1,
                 "nodes[3]: reshape: cannot reshape f32[2,3] (6 elements) to [12,-1]");
    tl_infer_err(m, reshape(m, x, TL_DIMS(-1, 3, -1)), 1,
                 "nodes[4].attrs.shape: reshape: shape [-1,3,-1] has more than one -1");
    tl_infer_err(m, reshape(m, x, TL_DIMS(2, 0, 3)), 1,
                 "nodes[5].attrs.shape: reshape: shape [2,0,3] has entry 0; "
                 "entries must be >= 1 or -1");
    tl_infer_err(m, reshape(m, x, TL_DIMS(-2, -3)), 1,
                 "nodes[6].attrs.shape: reshape: shape [-2,-3] has entry -2; "
                 "entries must be >= 1 or -1");
    tl_infer_err(m, reshape(m, x, TL_DIMS(1, 1, 1, 1, 1, 1, 6)), 1,
                 "nodes[7].attrs.shape: reshape: shape [1,1,1,1,1,1,6] has rank 7, more than 6");
    tl_infer_err(m, reshape(m, x, TL_DIMS(INT64_MAX, INT64_MAX, -1)), 1,
                 "nodes[8]: reshape: cannot reshape f32[2,3] (6 elements) to "
                 "[9223372036854775807,9223372036854775807,-1]");
    tl_infer_err(m, reshape(m, x, TL_DIMS(1099511627776, 1099511627776)), 1,
                 "nodes[9]: reshape: cannot reshape f32[2,3] (6 elements) to "
                 "[1099511627776,1099511627776] (more than 1099511627776 elements)");
    tl_free(m);
}

static void reshape_values(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
    float xv[] = {0, 1, 2, 3, 4, 5};
    float *got = run1(m, reshape(m, x, TL_DIMS(3, -1)), (void *[]){xv});
    /* row-major both ways: [[0, 1, 2], [3, 4, 5]] -> [[0, 1], [2, 3], [4, 5]] */
    assert_same(got, (float[]){0, 1, 2, 3, 4, 5}, 6);
    free(got);
    tl_free(m);

    m = tl_module();
    x = tl_input(m, "x", DT_I32, TL_DIMS(2, 2));
    int32_t *gi = run1(m, reshape(m, x, TL_DIMS(-1)), (void *[]){(int32_t[]){7, -8, 9, -10}});
    assert_same(gi, (int32_t[]){7, -8, 9, -10}, 4);
    free(gi);
    tl_free(m);
}

static void reshape_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 4));
    Node *y = reshape(m, x, TL_DIMS(4, -1));
    tl_infer_ok(m, y, "f32[4,6]");
    char *text = tl_lowered(m, y);
    /* the output's flat position, split into the input's indices */
    tl_assert_has(text, "  kernel k0 reshape_n24 (%1)\n"
                        "    for i0 in 0..4\n"
                        "      for i1 in 0..6\n"
                        "        b1[i0, i1] = b0[(i0 * 6 + i1) / 12, (i0 * 6 + i1) / 4 % 3, "
                        "(i0 * 6 + i1) % 4]\n");
    free(text);
    tl_free(m);
}

/* ---- transpose ----------------------------------------------------------- */

static Node *transpose(Module *m, Node *x, int rank, const int64_t *perm)
{
    Node *y = tl_op(m, OP_TRANSPOSE, "y", 1, x);
    tl_attr_ints(m, y, "perm", rank, perm);
    return y;
}

static void transpose_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 4));
    tl_infer_ok(m, transpose(m, x, TL_DIMS(2, 0, 1)), "f32[4,2,3]");
    tl_infer_ok(m, transpose(m, x, TL_DIMS(-1, 0, -2)), "f32[4,2,3]");
    tl_infer_ok(m, transpose(m, x, TL_DIMS(0, 1, 2)), "f32[2,3,4]");
    Node *xi = tl_input(m, "xi", DT_I32, TL_DIMS(5, 6));
    tl_infer_ok(m, transpose(m, xi, TL_DIMS(1, 0)), "i32[6,5]");
    Node *s = tl_input(m, "s", DT_F32, 0, NULL);
    tl_infer_ok(m, transpose(m, s, 0, (int64_t[]){0}), "f32[]");
    tl_infer_err(m, transpose(m, x, TL_DIMS(0, 1)), 1,
                 "nodes[8].attrs.perm: transpose: perm [0,1] has 2 entries for f32[2,3,4]");
    tl_infer_err(m, transpose(m, x, TL_DIMS(0, 1, 3)), 1,
                 "nodes[9].attrs.perm: transpose: axis 3 is out of range for f32[2,3,4]");
    tl_infer_err(m, transpose(m, x, TL_DIMS(0, -4, 1)), 1,
                 "nodes[10].attrs.perm: transpose: axis -4 is out of range for f32[2,3,4]");
    tl_infer_err(m, transpose(m, x, TL_DIMS(0, 2, -1)), 1,
                 "nodes[11].attrs.perm: transpose: perm [0,2,-1] names axis 2 twice");
    tl_free(m);
}

static void transpose_values(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 4));
    float xv[24];                                /* x[i][j][k] = 100i + 10j + k */
    for (int i = 0; i < 24; i++)
        xv[i] = (float)(100 * (i / 12) + 10 * (i / 4 % 3) + i % 4);
    float *got = run1(m, transpose(m, x, TL_DIMS(-1, 0, 1)), (void *[]){xv});
    /* y[a][b][c] = x[b][c][a] = 100b + 10c + a, y is [4,2,3] */
    float want[] = {0, 10, 20, 100, 110, 120,
                    1, 11, 21, 101, 111, 121,
                    2, 12, 22, 102, 112, 122,
                    3, 13, 23, 103, 113, 123};
    assert_same(got, want, 24);
    free(got);
    tl_free(m);
}

static void transpose_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_I32, TL_DIMS(2, 3, 4));
    Node *y = transpose(m, x, TL_DIMS(2, 0, 1));
    tl_infer_ok(m, y, "i32[4,2,3]");
    char *text = tl_lowered(m, y);
    tl_assert_has(text, "  buf b1 temp %1 : i32[4,2,3]\n"
                        "  kernel k0 transpose_p201_n24 (%1)\n"
                        "    for i0 in 0..4\n"
                        "      for i1 in 0..2\n"
                        "        for i2 in 0..3\n"
                        "          b1[i0, i1, i2] = b0[i1, i2, i0]\n");
    free(text);
    tl_free(m);
}

/* ---- concat ------------------------------------------------------------------ */

static void concat_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *a = tl_input(m, "a", DT_F32, TL_DIMS(2, 1, 2));
    Node *b = tl_input(m, "b", DT_F32, TL_DIMS(2, 2, 2));
    Node *d = tl_input(m, "d", DT_F32, TL_DIMS(3, 1, 2));
    Node *ai = tl_input(m, "ai", DT_I32, TL_DIMS(2, 1, 2));
    Node *r2 = tl_input(m, "r2", DT_F32, TL_DIMS(2, 1)), *s = tl_input(m, "s", DT_F32, 0, NULL);
    Node *y = tl_op(m, OP_CONCAT, "y", 3, a, b, a);
    tl_attr_i(y, "axis", 1);
    tl_infer_ok(m, y, "f32[2,4,2]");
    y = tl_op(m, OP_CONCAT, "y", 2, b, a);
    tl_attr_i(y, "axis", -2);
    tl_infer_ok(m, y, "f32[2,3,2]");
    tl_infer_ok(m, tl_op(m, OP_CONCAT, "y", 2, a, d), "f32[5,1,2]");     /* axis 0 */
    tl_infer_ok(m, tl_op(m, OP_CONCAT, "y", 1, a), "f32[2,1,2]");
    tl_infer_ok(m, tl_op(m, OP_CONCAT, "y", 2, ai, ai), "i32[4,1,2]");

    y = tl_op(m, OP_CONCAT, "y", 3, a, b, d);
    tl_attr_i(y, "axis", 1);
    tl_infer_err(m, y, 1, "nodes[11].inputs[2]: concat: f32[3,1,2] and inputs[0] f32[2,1,2] "
                 "differ outside axis 1");
    tl_infer_err(m, tl_op(m, OP_CONCAT, "y", 2, a, ai), 1,
                 "nodes[12].inputs[1]: concat: i32[2,1,2] and inputs[0] f32[2,1,2] "
                 "differ in dtype");
    tl_infer_err(m, tl_op(m, OP_CONCAT, "y", 3, a, r2, b), 2,
                 "nodes[13].inputs[1]: concat: f32[2,1] and inputs[0] f32[2,1,2] differ in rank");
    y = tl_op(m, OP_CONCAT, "y", 2, a, a);
    tl_attr_i(y, "axis", 3);
    tl_infer_err(m, y, 1, "nodes[14].attrs.axis: concat: axis 3 is out of range for f32[2,1,2]");
    tl_infer_err(m, tl_op(m, OP_CONCAT, "y", 2, s, s), 1,
                 "nodes[15].attrs.axis: concat: axis 0 is out of range for f32[]");
    tl_free(m);
}

static void concat_values(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *a = tl_input(m, "a", DT_F32, TL_DIMS(2, 1, 2));
    Node *b = tl_input(m, "b", DT_F32, TL_DIMS(2, 2, 2));
    Node *c = tl_input(m, "c", DT_F32, TL_DIMS(2, 1, 2));
    Node *y = tl_op(m, OP_CONCAT, "y", 3, a, b, c);
    tl_attr_i(y, "axis", -2);
    float av[] = {1, 2, 3, 4}, bv[] = {5, 6, 7, 8, 9, 10, 11, 12}, cv[] = {13, 14, 15, 16};
    float *got = run1(m, y, (void *[]){av, bv, cv});
    /* a = [[[1, 2]], [[3, 4]]], b = [[[5, 6], [7, 8]], [[9, 10], [11, 12]]],
     * c = [[[13, 14]], [[15, 16]]]; along axis 1, per i: a's row, b's two, c's */
    float want[] = {1, 2, 5, 6, 7, 8, 13, 14,
                    3, 4, 9, 10, 11, 12, 15, 16};
    assert_same(got, want, 16);
    free(got);
    tl_free(m);
}

static void concat_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *a = tl_input(m, "a", DT_F32, TL_DIMS(2, 1, 4));
    Node *b = tl_input(m, "b", DT_F32, TL_DIMS(2, 3, 4));
    Node *y = tl_op(m, OP_CONCAT, "y", 3, a, b, a);
    tl_attr_i(y, "axis", 1);
    tl_infer_ok(m, y, "f32[2,5,4]");
    char *text = tl_lowered(m, y);
    /* one nest per operand, each at its offset along the axis */
    tl_assert_has(text, "  kernel k0 concat_a1_n40 (%2)\n"
                        "    for i0 in 0..2\n"
                        "      for i1 in 0..1\n"
                        "        for i2 in 0..4\n"
                        "          b0[i0, i1, i2] = b1[i0, i1, i2]\n"
                        "    for i3 in 0..2\n"
                        "      for i4 in 0..3\n"
                        "        for i5 in 0..4\n"
                        "          b0[i3, i4 + 1, i5] = b2[i3, i4, i5]\n"
                        "    for i6 in 0..2\n"
                        "      for i7 in 0..1\n"
                        "        for i8 in 0..4\n"
                        "          b0[i6, i7 + 4, i8] = b1[i6, i7, i8]\n");
    free(text);
    tl_free(m);
}

/* ---- slice ------------------------------------------------------------------- */

/* slice of x along axis from start to end; end INT64_MAX: not given. */
static Node *slice(Module *m, Node *x, int64_t axis, int64_t start, int64_t end)
{
    Node *y = tl_op(m, OP_SLICE, "y", 1, x);
    tl_attr_i(y, "axis", axis);
    tl_attr_i(y, "start", start);
    if (end != INT64_MAX)
        tl_attr_i(y, "end", end);
    return y;
}

static void slice_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 8));
    tl_infer_ok(m, slice(m, x, 1, 2, 5), "f32[2,3]");
    tl_infer_ok(m, slice(m, x, 1, -3, INT64_MAX), "f32[2,3]");
    tl_infer_ok(m, slice(m, x, -1, 2, 100), "f32[2,6]");
    tl_infer_ok(m, slice(m, x, 1, 0, -1), "f32[2,7]");
    tl_infer_ok(m, slice(m, x, 1, -100, INT64_MAX), "f32[2,8]");
    tl_infer_ok(m, slice(m, x, -2, 1, INT64_MAX), "f32[1,8]");
    Node *xi = tl_input(m, "xi", DT_I32, TL_DIMS(4));
    tl_infer_ok(m, slice(m, xi, 0, 1, 3), "i32[2]");
    tl_infer_err(m, slice(m, x, 1, 5, 3), 1,
                 "nodes[9]: slice selects no elements (start 5, end 3 on a dim of 8)");
    tl_infer_err(m, slice(m, x, 1, 8, INT64_MAX), 1,
                 "nodes[10]: slice selects no elements (start 8, end 8 on a dim of 8)");
    tl_infer_err(m, slice(m, x, 1, -1, -1), 1,
                 "nodes[11]: slice selects no elements (start 7, end 7 on a dim of 8)");
    tl_infer_err(m, slice(m, x, 1, 100, 200), 1,
                 "nodes[12]: slice selects no elements (start 8, end 8 on a dim of 8)");
    tl_infer_err(m, slice(m, x, 0, 0, -100), 1,
                 "nodes[13]: slice selects no elements (start 0, end 0 on a dim of 2)");
    tl_infer_err(m, slice(m, x, 2, 0, 1), 1,
                 "nodes[14].attrs.axis: slice: axis 2 is out of range for f32[2,8]");
    tl_free(m);
}

static void slice_values(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 5));
    float xv[] = {0, 1, 2, 3, 4,
                  5, 6, 7, 8, 9};
    /* start -3 + 5 = 2, end 100 clamped to 5: columns 2, 3, 4 */
    float *got = run1(m, slice(m, x, 1, -3, 100), (void *[]){xv});
    assert_same(got, (float[]){2, 3, 4, 7, 8, 9}, 6);
    free(got);
    tl_free(m);

    m = tl_module();
    x = tl_input(m, "x", DT_F32, TL_DIMS(2, 5));
    /* start -1 + 2 = 1, to the end: row 1 */
    got = run1(m, slice(m, x, 0, -1, INT64_MAX), (void *[]){xv});
    assert_same(got, (float[]){5, 6, 7, 8, 9}, 5);
    free(got);
    tl_free(m);
}

static void slice_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 8));
    Node *y = slice(m, x, 2, -5, -1);
    tl_infer_ok(m, y, "f32[2,3,4]");
    char *text = tl_lowered(m, y);
    tl_assert_has(text, "  kernel k0 slice_a2_3_7 (%1)\n"
                        "    for i0 in 0..2\n"
                        "      for i1 in 0..3\n"
                        "        for i2 in 0..4\n"
                        "          b1[i0, i1, i2] = b0[i0, i1, i2 + 3]\n");
    free(text);
    tl_free(m);
}

/* ---- the JIT build against the reference, over shapes and axes ------------ */

static const int64_t shapes[][5] = {{1, 6}, {2, 3, 4}, {3, 2, 1, 3}, {4, 2, 3, 1, 2}};
#define SHAPE(i) (int)shapes[i][0], &shapes[i][1]

static void reshape_transpose_jit(void **state)
{
    (void)state;
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < 2; t++) {
            DType dt = t ? DT_I32 : DT_F32;
            int r = (int)shapes[i][0];
            Module *m = tl_module();
            check_case(m, reshape(m, tl_input(m, "x", dt, SHAPE(i)), TL_DIMS(-1)));
            m = tl_module();
            check_case(m, reshape(m, tl_input(m, "x", dt, SHAPE(i)), TL_DIMS(2, -1, 1)));
            m = tl_module();
            check_case(m, reshape(m, tl_input(m, "x", dt, SHAPE(i)), TL_DIMS(1, 3, -1)));
            /* every rotation and its reverse */
            for (int s = 0; s < r; s++)
                for (int rev = 0; rev < 2; rev++) {
                    int64_t perm[KILN_MAX_RANK];
                    for (int d = 0; d < r; d++)
                        perm[d] = rev ? (r - 1 - d + s) % r : (d + s) % r - (d % 2 ? r : 0);
                    m = tl_module();
                    check_case(m, transpose(m, tl_input(m, "x", dt, SHAPE(i)), r, perm));
                }
        }
}

/* Scalars in and out. */
static void rank0_jit(void **state)
{
    (void)state;
    Module *m = tl_module();
    check_case(m, reshape(m, tl_input(m, "x", DT_F32, 0, NULL), TL_DIMS(1, -1, 1)));
    m = tl_module();
    check_case(m, reshape(m, tl_input(m, "x", DT_I32, TL_DIMS(1, 1)), 0, (int64_t[]){0}));
    m = tl_module();
    check_case(m, transpose(m, tl_input(m, "x", DT_F32, 0, NULL), 0, (int64_t[]){0}));
}

static void concat_slice_jit(void **state)
{
    (void)state;
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < 2; t++) {
            DType dt = t ? DT_I32 : DT_F32;
            int r = (int)shapes[i][0];
            for (int axis = -r; axis < r; axis++) {
                int ax = axis < 0 ? axis + r : axis;
                int64_t wide[KILN_MAX_RANK], len = shapes[i][1 + ax];
                memcpy(wide, &shapes[i][1], (size_t)r * sizeof *wide);
                wide[ax] += 2;
                Module *m = tl_module();
                Node *a = tl_input(m, "a", dt, SHAPE(i)), *b = tl_input(m, "b", dt, r, wide);
                Node *y = tl_op(m, OP_CONCAT, "y", 3, a, b, a);
                tl_attr_i(y, "axis", axis);
                check_case(m, y);
                for (int64_t start = -len - 1; start <= len; start++)
                    for (int64_t end = -len; end <= len + 1; end += 2) {
                        m = tl_module();
                        y = slice(m, tl_input(m, "x", dt, SHAPE(i)), axis, start, end);
                        char msg[256];
                        if (tl_infer(m, y, msg, sizeof msg) == 0)
                            check_case(m, y);
                        else
                            tl_free(m);
                    }
            }
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reshape_infer),
        cmocka_unit_test(reshape_refusals),
        cmocka_unit_test(reshape_values),
        cmocka_unit_test(reshape_lowering),
        cmocka_unit_test(transpose_infer),
        cmocka_unit_test(transpose_values),
        cmocka_unit_test(transpose_lowering),
        cmocka_unit_test(concat_infer),
        cmocka_unit_test(concat_values),
        cmocka_unit_test(concat_lowering),
        cmocka_unit_test(slice_infer),
        cmocka_unit_test(slice_values),
        cmocka_unit_test(slice_lowering),
        cmocka_unit_test(reshape_transpose_jit),
        cmocka_unit_test(rank0_jit),
        cmocka_unit_test(concat_slice_jit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
