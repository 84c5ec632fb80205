/* tests/unit/test_ops_elementwise.c: add sub mul div maximum minimum with
 * NumPy broadcasting, and every unary op: shape inference and its
 * refusals, the reference against values worked out by hand (or with
 * python3's math module, to 10 digits), key lines of the lowered loop IR,
 * and the JIT build against the reference on the same cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testlib.h"

#include <stdlib.h>

static const OpKind binary_ops[] = {OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MAXIMUM, OP_MINIMUM};

/* ---- binary: inference ------------------------------------------------- */

static void binary_infer(void **state)
{
    (void)state;
    for (int i = 0; i < 6; i++) {
        OpKind op = binary_ops[i];
        Module *m = tl_module();
        Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
        Node *v = tl_input(m, "v", DT_F32, TL_DIMS(3));
        Node *col = tl_input(m, "col", DT_F32, TL_DIMS(2, 1));
        Node *row = tl_input(m, "row", DT_F32, TL_DIMS(1, 3));
        Node *t = tl_input(m, "t", DT_F32, TL_DIMS(4, 1, 3));
        Node *s = tl_input(m, "s", DT_F32, 0, NULL), *c = tl_const(m, 2);
        tl_infer_ok(m, tl_op(m, op, "y", 2, x, x), "f32[2,3]");
        tl_infer_ok(m, tl_op(m, op, "y", 2, x, v), "f32[2,3]");
        tl_infer_ok(m, tl_op(m, op, "y", 2, v, x), "f32[2,3]");
        tl_infer_ok(m, tl_op(m, op, "y", 2, col, row), "f32[2,3]");
        tl_infer_ok(m, tl_op(m, op, "y", 2, t, col), "f32[4,2,3]");  /* [4,1,3] with [2,1] */
        tl_infer_ok(m, tl_op(m, op, "y", 2, x, c), "f32[2,3]");
        tl_infer_ok(m, tl_op(m, op, "y", 2, c, t), "f32[4,1,3]");
        tl_infer_ok(m, tl_op(m, op, "y", 2, s, c), "f32[]");
        tl_free(m);
    }
}

static void binary_refusals(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3)), *v2 = tl_input(m, "v2", DT_F32, TL_DIMS(2));
    Node *t = tl_input(m, "t", DT_F32, TL_DIMS(3, 4, 3));
    Node *xi = tl_input(m, "xi", DT_I32, TL_DIMS(2, 3));
    Node *vi = tl_input(m, "vi", DT_I32, TL_DIMS(2));
    /* trailing dims 3 and 2 */
    tl_infer_err(m, tl_op(m, OP_ADD, "y", 2, x, v2), 1,
                 "nodes[5]: add: shapes f32[2,3] and f32[2] do not broadcast");
    /* trailing dims agree, then 2 and 4 */
    tl_infer_err(m, tl_op(m, OP_MAXIMUM, "y", 2, t, x), 1,
                 "nodes[6]: maximum: shapes f32[3,4,3] and f32[2,3] do not broadcast");
    tl_infer_err(m, tl_op(m, OP_MUL, "y", 2, xi, x), 1,
                 "nodes[7].inputs[0]: mul needs f32 here, got i32[2,3]");
    tl_infer_err(m, tl_op(m, OP_SUB, "y", 2, x, xi), 1,
                 "nodes[8].inputs[1]: sub needs f32 here, got i32[2,3]");
    /* both operands i32 and the shapes apart: every problem is reported */
    tl_infer_err(m, tl_op(m, OP_MINIMUM, "y", 2, xi, vi), 3,
                 "nodes[9].inputs[0]: minimum needs f32 here, got i32[2,3]");
    tl_free(m);
}

/* ---- binary: values ---------------------------------------------------- */

/* x [2,3] = [[1, -2, 3], [4, 5, -6]] op v [3] = [2, 4, -3], v repeated
 * along the rows. */
static void binary_row_broadcast(void **state)
{
    (void)state;
    static const float want[6][6] = {
        {3, 2, 0, 6, 9, -9},                       /* 1+2, -2+4, 3-3, 4+2, 5+4, -6-3 */
        {-1, -6, 6, 2, 1, -3},                     /* 1-2, -2-4, 3+3, 4-2, 5-4, -6+3 */
        {2, -8, -9, 8, 20, 18},                    /* 1*2, -2*4, 3*-3, 4*2, 5*4, -6*-3 */
        {0.5f, -0.5f, -1, 2, 1.25f, 2},            /* 1/2, -2/4, 3/-3, 4/2, 5/4, -6/-3 */
        {2, 4, 3, 4, 5, -3},
        {1, -2, -3, 2, 4, -6},
    };
    float xv[] = {1, -2, 3, 4, 5, -6}, vv[] = {2, 4, -3};
    for (int i = 0; i < 6; i++) {
        Module *m = tl_module();
        Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
        Node *v = tl_input(m, "v", DT_F32, TL_DIMS(3));
        Node *y = tl_op(m, binary_ops[i], "y", 2, x, v);
        tl_values(m, y, "f32[2,3]", (void *[]){xv, vv}, NULL, want[i], 6);
    }
}

/* a [2,1] = [[1], [2]] op b [1,3] = [[10, 20, 30]]: an outer product of
 * the two, result [2,3]; y[i][j] = a[i] op b[j]. */
static void binary_outer_broadcast(void **state)
{
    (void)state;
    static const float want[6][6] = {
        {11, 21, 31, 12, 22, 32},
        {-9, -19, -29, -8, -18, -28},
        {10, 20, 30, 20, 40, 60},
        /* 1/10, 1/20, 1/30, 2/10, 2/20, 2/30 */
        {0.1f, 0.05f, 0.0333333333f, 0.2f, 0.1f, 0.0666666667f},
        {10, 20, 30, 10, 20, 30},
        {1, 1, 1, 2, 2, 2},
    };
    float av[] = {1, 2}, bv[] = {10, 20, 30};
    for (int i = 0; i < 6; i++) {
        Module *m = tl_module();
        Node *a = tl_input(m, "a", DT_F32, TL_DIMS(2, 1));
        Node *b = tl_input(m, "b", DT_F32, TL_DIMS(1, 3));
        Node *y = tl_op(m, binary_ops[i], "y", 2, a, b);
        tl_values(m, y, "f32[2,3]", (void *[]){av, bv}, NULL, want[i], 6);
    }
}

/* A JSON number among the inputs is a rank-0 constant, on either side. */
static void binary_const_operand(void **state)
{
    (void)state;
    float xv[] = {1, 2, 3, 4};
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 2));
    Node *y = tl_op(m, OP_SUB, "y", 2, x, tl_const(m, 0.5));
    tl_values(m, y, "f32[2,2]", (void *[]){xv}, NULL, (float[]){0.5f, 1.5f, 2.5f, 3.5f}, 4);
    m = tl_module();
    x = tl_input(m, "x", DT_F32, TL_DIMS(2, 2));
    /* 1/1, 1/2, 1/3, 1/4 */
    y = tl_op(m, OP_DIV, "y", 2, tl_const(m, 1), x);
    tl_values(m, y, "f32[2,2]", (void *[]){xv}, NULL, (float[]){1, 0.5f, 0.333333333f, 0.25f}, 4);
    m = tl_module();
    x = tl_input(m, "x", DT_F32, TL_DIMS(2, 2));
    y = tl_op(m, OP_MAXIMUM, "y", 2, x, tl_const(m, 2.5));
    tl_values(m, y, "f32[2,2]", (void *[]){xv}, NULL, (float[]){2.5f, 2.5f, 3, 4}, 4);
}

/* A rank-0 input against a [2,2] one, and two rank-0 operands. */
static void binary_scalar_input(void **state)
{
    (void)state;
    float xv[] = {1, 2, 3, 4}, sv[] = {-3};
    Module *m = tl_module();
    Node *s = tl_input(m, "s", DT_F32, 0, NULL), *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 2));
    Node *y = tl_op(m, OP_MUL, "y", 2, s, x);
    tl_values(m, y, "f32[2,2]", (void *[]){sv, xv}, NULL, (float[]){-3, -6, -9, -12}, 4);
    m = tl_module();
    s = tl_input(m, "s", DT_F32, 0, NULL);
    y = tl_op(m, OP_MINIMUM, "y", 2, s, tl_const(m, -7));
    tl_values(m, y, "f32[]", (void *[]){sv}, NULL, (float[]){-7}, 1);
}

static void binary_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3)), *v = tl_input(m, "v", DT_F32, TL_DIMS(3));
    Node *y = tl_op(m, OP_ADD, "y", 2, x, v);
    tl_infer_ok(m, y, "f32[2,3]");
    char *ir = tl_lowered(m, y);
    tl_has_line(ir, "for i0 in 0..2");
    tl_has_line(ir, "for i1 in 0..3");
    tl_has_line(ir, "b2[i0, i1] = b0[i0, i1] + b1[i1]");
    free(ir);
    tl_free(m);

    /* a dim of 1 reads index 0; a constant is its literal */
    m = tl_module();
    Node *col = tl_input(m, "col", DT_F32, TL_DIMS(2, 1));
    Node *row = tl_input(m, "row", DT_F32, TL_DIMS(1, 3));
    y = tl_op(m, OP_MAXIMUM, "y", 2, col, row);
    tl_infer_ok(m, y, "f32[2,3]");
    ir = tl_lowered(m, y);
    tl_has_line(ir, "b2[i0, i1] = max(b0[i0, 0], b1[0, i1])");
    free(ir);
    tl_free(m);
    m = tl_module();
    x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
    y = tl_op(m, OP_DIV, "y", 2, tl_const(m, 0.5), x);
    tl_infer_ok(m, y, "f32[2,3]");
    ir = tl_lowered(m, y);
    tl_has_line(ir, "b1[i0, i1] = 0.5 / b0[i0, i1]");
    free(ir);
    tl_free(m);
}

/* ---- unary ------------------------------------------------------------- */

static void unary_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 1, 3)), *s = tl_input(m, "s", DT_F32, 0, NULL);
    Node *xi = tl_input(m, "xi", DT_I32, TL_DIMS(4));
    tl_infer_ok(m, tl_op(m, OP_RELU, "y", 1, x), "f32[2,1,3]");
    tl_infer_ok(m, tl_op(m, OP_EXP, "y", 1, s), "f32[]");
    Node *g = tl_op(m, OP_GELU, "y", 1, x);
    tl_attr_i(g, "approximate", 1);
    tl_infer_ok(m, g, "f32[2,1,3]");
    tl_infer_err(m, tl_op(m, OP_RELU, "y", 1, xi), 1,
                 "nodes[6].inputs[0]: relu needs f32 here, got i32[4]");
    tl_infer_err(m, tl_op(m, OP_SQRT, "y", 1, xi), 1,
                 "nodes[7].inputs[0]: sqrt needs f32 here, got i32[4]");
    tl_free(m);
}

/* One unary op (gelu: `approximate` = tanh_approx) on six values. */
static void unary_case(OpKind op, int tanh_approx, float *x, const float *want)
{
    Module *m = tl_module();
    Node *in = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
    Node *y = tl_op(m, op, "y", 1, in);
    if (op == OP_GELU)
        tl_attr_i(y, "approximate", tanh_approx);
    tl_values(m, y, "f32[2,3]", (void *[]){x}, NULL, want, 6);
}

static float ux[6] = {-2, -0.5f, 0, 0.5f, 1, 3};
static float upos[6] = {0.25f, 1, 2, 4, 9, 100};

/* By hand. */
static void unary_exact(void **state)
{
    (void)state;
    unary_case(OP_RELU, 0, ux, (float[]){0, 0, 0, 0.5f, 1, 3});
    unary_case(OP_NEG, 0, ux, (float[]){2, 0.5f, 0, -0.5f, -1, -3});
    unary_case(OP_ABS, 0, ux, (float[]){2, 0.5f, 0, 0.5f, 1, 3});
    /* sqrt 1/4 = 1/2, sqrt 2 = 1.41421356; rsqrt its inverse */
    unary_case(OP_SQRT, 0, upos, (float[]){0.5f, 1, 1.41421356f, 2, 3, 10});
    unary_case(OP_RSQRT, 0, upos, (float[]){2, 1, 0.707106781f, 0.5f, 0.333333333f, 0.1f});
}

/* With python3's math module, to 10 digits. */
static void unary_transcendental(void **state)
{
    (void)state;
    /* 1 / (1 + exp(-x)) */
    unary_case(OP_SIGMOID, 0, ux,
               (float[]){0.119202922f, 0.3775406688f, 0.5f, 0.6224593312f, 0.7310585786f,
                         0.9525741268f});
    unary_case(OP_TANH, 0, ux,
               (float[]){-0.9640275801f, -0.4621171573f, 0, 0.4621171573f, 0.761594156f,
                         0.9950547537f});
    unary_case(OP_EXP, 0, ux,
               (float[]){0.1353352832f, 0.6065306597f, 1, 1.648721271f, 2.718281828f,
                         20.08553692f});
    /* log 1/4 = -2 log 2, log 1 = 0, log 2, log 4 = 2 log 2, log 9, log 100 */
    unary_case(OP_LOG, 0, upos,
               (float[]){-1.386294361f, 0, 0.6931471806f, 1.386294361f, 2.197224577f,
                         4.605170186f});
    /* x * sigmoid(x) */
    unary_case(OP_SILU, 0, ux,
               (float[]){-0.238405844f, -0.1887703344f, 0, 0.3112296656f, 0.7310585786f,
                         2.85772238f});
    /* 0.5 x (1 + erf(x / sqrt 2)) */
    unary_case(OP_GELU, 0, ux,
               (float[]){-0.0455002639f, -0.1542687694f, 0, 0.3457312306f, 0.8413447461f,
                         2.995950306f});
    /* 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) */
    unary_case(OP_GELU, 1, ux,
               (float[]){-0.04540230591f, -0.1542859902f, 0, 0.3457140098f, 0.8411919906f,
                         2.996362608f});
}

static void unary_lowering(void **state)
{
    (void)state;
    static const struct {
        OpKind op;
        int tanh_approx;
        const char *line;
    } c[] = {
        {OP_RELU, 0, "b1[i0, i1] = max(b0[i0, i1], 0.0)"},
        {OP_SIGMOID, 0, "b1[i0, i1] = sigmoid(b0[i0, i1])"},
        {OP_RSQRT, 0, "b1[i0, i1] = rsqrt(b0[i0, i1])"},
        {OP_NEG, 0, "b1[i0, i1] = neg(b0[i0, i1])"},
        {OP_SILU, 0, "b1[i0, i1] = b0[i0, i1] * sigmoid(b0[i0, i1])"},
        /* constants print as f32: sqrt(1/2) = 0.70710678 is 0.707106769 */
        {OP_GELU, 0, "b1[i0, i1] = 0.5 * b0[i0, i1] * (1.0 + erf(b0[i0, i1] * 0.707106769))"},
        /* sqrt(2/pi) = 0.79788456 is 0.797884583, 0.044715 is 0.0447149985 */
        {OP_GELU, 1, "b1[i0, i1] = 0.5 * b0[i0, i1] * (1.0 + tanh(0.797884583 * (b0[i0, i1] + "
                     "0.0447149985 * (b0[i0, i1] * b0[i0, i1] * b0[i0, i1]))))"},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        Module *m = tl_module();
        Node *y = tl_op(m, c[i].op, "y", 1, tl_input(m, "x", DT_F32, TL_DIMS(2, 3)));
        if (c[i].op == OP_GELU)
            tl_attr_i(y, "approximate", c[i].tanh_approx);
        tl_infer_ok(m, y, "f32[2,3]");
        char *ir = tl_lowered(m, y);
        tl_has_line(ir, c[i].line);
        free(ir);
        tl_free(m);
    }
}

/* ---- the JIT build against the reference, over shapes -------------------- */

/* Every binary op over pairs of shapes that broadcast, on pseudo-random
 * data (division by values near 0 is avoided: b in [0.5, 1.5)). */
static void binary_jit(void **state)
{
    (void)state;
    static const int64_t pairs[][2][5] = {
        /* rank, then the dims */
        {{1, 7}, {1, 7}},
        {{3, 2, 3, 4}, {1, 4}},
        {{3, 2, 3, 1}, {2, 1, 5}},
        {{4, 2, 1, 3, 1}, {4, 1, 4, 1, 5}},
        {{0}, {2, 2, 3}},
    };
    for (size_t p = 0; p < sizeof pairs / sizeof *pairs; p++)
        for (int i = 0; i < 6; i++) {
            Module *m = tl_module();
            Node *a = tl_input(m, "a", DT_F32, (int)pairs[p][0][0], &pairs[p][0][1]);
            Node *b = tl_input(m, "b", DT_F32, (int)pairs[p][1][0], &pairs[p][1][1]);
            Node *y = tl_op(m, binary_ops[i], "y", 2, a, b);
            tl_infer_ok(m, y, NULL);
            tl_outputs(m, 1, y);
            float *av = tl_random(node_count(a), 1), *bv = tl_random(node_count(b), 2);
            for (int64_t k = 0; k < node_count(b); k++)
                bv[k] = bv[k] / 2 + 1;
            tl_check(m, (void *[]){av, bv}, NULL, 1e-6);
            free(av);
            free(bv);
            tl_free(m);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(binary_infer),
        cmocka_unit_test(binary_refusals),
        cmocka_unit_test(binary_row_broadcast),
        cmocka_unit_test(binary_outer_broadcast),
        cmocka_unit_test(binary_const_operand),
        cmocka_unit_test(binary_scalar_input),
        cmocka_unit_test(binary_lowering),
        cmocka_unit_test(unary_infer),
        cmocka_unit_test(unary_exact),
        cmocka_unit_test(unary_transcendental),
        cmocka_unit_test(unary_lowering),
        cmocka_unit_test(binary_jit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
