/* tests/unit/test_ops_linalg.c: matmul (torch.matmul: batch dims
 * broadcast, 1-d operands, transpose_b) and linear (x @ w^T + bias): shape
 * inference and its refusals, the reference against values worked out by
 * hand, key lines of the lowered loop IR, and the JIT build against the
 * reference on the same cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testlib.h"

#include <stdlib.h>

static Node *matmul(Module *m, Node *a, Node *b, int transpose_b)
{
    Node *y = tl_op(m, OP_MATMUL, "y", 2, a, b);
    if (transpose_b)
        tl_attr_i(y, "transpose_b", 1);
    return y;
}

/* ---- matmul ------------------------------------------------------------ */

static void matmul_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *a = tl_input(m, "a", DT_F32, TL_DIMS(2, 3)), *b = tl_input(m, "b", DT_F32, TL_DIMS(3, 4));
    Node *bt = tl_input(m, "bt", DT_F32, TL_DIMS(4, 3));
    Node *a4 = tl_input(m, "a4", DT_F32, TL_DIMS(2, 1, 2, 3));
    Node *b3 = tl_input(m, "b3", DT_F32, TL_DIMS(3, 3, 4));
    Node *v = tl_input(m, "v", DT_F32, TL_DIMS(3));
    Node *u = tl_input(m, "u", DT_F32, TL_DIMS(4));
    tl_infer_ok(m, matmul(m, a, b, 0), "f32[2,4]");
    tl_infer_ok(m, matmul(m, a, bt, 1), "f32[2,4]");
    tl_infer_ok(m, matmul(m, a4, b3, 0), "f32[2,3,2,4]");   /* batch [2,1] with [3] */
    tl_infer_ok(m, matmul(m, a4, bt, 1), "f32[2,1,2,4]");   /* [2,3] @ [4,3]^T per batch */
    /* 1-d a: a row vector, its dim removed; 1-d b: a column vector, likewise */
    tl_infer_ok(m, matmul(m, v, b, 0), "f32[4]");
    tl_infer_ok(m, matmul(m, v, b3, 0), "f32[3,4]");
    tl_infer_ok(m, matmul(m, a, v, 0), "f32[2]");
    tl_infer_ok(m, matmul(m, a4, v, 0), "f32[2,1,2]");
    tl_infer_ok(m, matmul(m, u, u, 0), "f32[]");
    tl_infer_ok(m, matmul(m, u, bt, 0), "f32[3]");
    tl_free(m);
}

static void matmul_refusals(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *a = tl_input(m, "a", DT_F32, TL_DIMS(2, 3)), *b = tl_input(m, "b", DT_F32, TL_DIMS(4, 2));
    Node *a3 = tl_input(m, "a3", DT_F32, TL_DIMS(2, 2, 3));
    Node *b3 = tl_input(m, "b3", DT_F32, TL_DIMS(3, 3, 2));
    Node *v = tl_input(m, "v", DT_F32, TL_DIMS(3)), *u = tl_input(m, "u", DT_F32, TL_DIMS(4));
    Node *s = tl_input(m, "s", DT_F32, 0, NULL), *ai = tl_input(m, "ai", DT_I32, TL_DIMS(2, 3));
    tl_infer_err(m, matmul(m, a, b, 0), 1,
                 "nodes[8]: matmul: inner dimensions differ: a is f32[2,3], b is f32[4,2]");
    /* b [4,2] transposed is [2,4]: K = 2 against 3 */
    tl_infer_err(m, matmul(m, a, b, 1), 1,
                 "nodes[9]: matmul: inner dimensions differ: a is f32[2,3], b is f32[4,2] "
                 "(transpose_b)");
    tl_infer_err(m, matmul(m, v, u, 0), 1,
                 "nodes[10]: matmul: inner dimensions differ: a is f32[3], b is f32[4]");
    tl_infer_err(m, matmul(m, u, a, 0), 1,
                 "nodes[11]: matmul: inner dimensions differ: a is f32[4], b is f32[2,3]");
    /* batch [2] against [3] */
    tl_infer_err(m, matmul(m, a3, b3, 0), 1,
                 "nodes[12]: matmul: batch dimensions of f32[2,2,3] and f32[3,3,2] do not "
                 "broadcast");
    tl_infer_err(m, matmul(m, a, v, 1), 1,
                 "nodes[13].inputs[1]: matmul needs rank 2 or more here, got f32[3]");
    tl_infer_err(m, matmul(m, s, v, 0), 1,
                 "nodes[14].inputs[0]: matmul needs rank 1 or more here, got f32[]");
    tl_infer_err(m, matmul(m, ai, b3, 0), 1,
                 "nodes[15].inputs[0]: matmul needs f32 here, got i32[2,3]");
    tl_free(m);
}

/* a = [[1, 2, 3], [4, 5, 6]], b = [[7, 8], [9, 10], [11, 12]]:
 * a @ b = [[1*7 + 2*9 + 3*11, 1*8 + 2*10 + 3*12],
 *          [4*7 + 5*9 + 6*11, 4*8 + 5*10 + 6*12]] = [[58, 64], [139, 154]] */
static float mm_a[] = {1, 2, 3, 4, 5, 6}, mm_b[] = {7, 8, 9, 10, 11, 12};
static float mm_bt[] = {7, 9, 11, 8, 10, 12};   /* b transposed, [2,3] */
static const float mm_want[] = {58, 64, 139, 154};

static void matmul_values_2d(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *a = tl_input(m, "a", DT_F32, TL_DIMS(2, 3)), *b = tl_input(m, "b", DT_F32, TL_DIMS(3, 2));
    tl_values(m, matmul(m, a, b, 0), "f32[2,2]", (void *[]){mm_a, mm_b}, NULL, mm_want, 4);
    /* transpose_b reads b [N, K] = [2,3]: the same product */
    m = tl_module();
    a = tl_input(m, "a", DT_F32, TL_DIMS(2, 3));
    b = tl_input(m, "b", DT_F32, TL_DIMS(2, 3));
    tl_values(m, matmul(m, a, b, 1), "f32[2,2]", (void *[]){mm_a, mm_bt}, NULL, mm_want, 4);
    /* b a weight, a the same way */
    m = tl_module();
    a = tl_input(m, "a", DT_F32, TL_DIMS(2, 3));
    b = tl_weight(m, "b", TL_DIMS(3, 2));
    tl_values(m, matmul(m, a, b, 0), "f32[2,2]", (void *[]){mm_a}, (void *[]){mm_b}, mm_want, 4);
}

/* a [2,1,2,3] @ b [3,3,2] -> [2,3,2,2]: batch [2,1] with [3] gives [2,3],
 * out[i][j] = a[i][0] @ b[j]. b[j][r][c] = 100j + 10r + c;
 * a[0] = [[1, 0, 0], [0, 1, 0]] picks rows 0 and 1 of b[j];
 * a[1] = [[0, 0, 1], [1, 1, 1]] picks row 2 and sums the three rows:
 * (300j + 30, 300j + 33). */
static void matmul_batch_broadcast(void **state)
{
    (void)state;
    float a[] = {1, 0, 0, 0, 1, 0,
                 0, 0, 1, 1, 1, 1};
    float b[18];
    for (int j = 0; j < 3; j++)
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 2; c++)
                b[6 * j + 2 * r + c] = (float)(100 * j + 10 * r + c);
    static const float want[] = {
        0, 1, 10, 11,          /* i 0, j 0 */
        100, 101, 110, 111,    /* i 0, j 1 */
        200, 201, 210, 211,    /* i 0, j 2 */
        20, 21, 30, 33,        /* i 1, j 0 */
        120, 121, 330, 333,    /* i 1, j 1 */
        220, 221, 630, 633,    /* i 1, j 2 */
    };
    Module *m = tl_module();
    Node *an = tl_input(m, "a", DT_F32, TL_DIMS(2, 1, 2, 3));
    Node *bn = tl_input(m, "b", DT_F32, TL_DIMS(3, 3, 2));
    tl_values(m, matmul(m, an, bn, 0), "f32[2,3,2,2]", (void *[]){a, b}, NULL, want, 24);
}

/* torch.matmul's 1-d operands: a 1-d a is a row [1,K] whose dim is then
 * removed, a 1-d b a column [K,1] likewise. */
static void matmul_vectors(void **state)
{
    (void)state;
    float v[] = {1, 2, 3}, w[] = {1, 2, -1}, u[] = {4, 5, 6};
    /* v @ b: row 0 of a @ b above, [58, 64] */
    Module *m = tl_module();
    Node *x = tl_input(m, "v", DT_F32, TL_DIMS(3)), *y = tl_input(m, "b", DT_F32, TL_DIMS(3, 2));
    tl_values(m, matmul(m, x, y, 0), "f32[2]", (void *[]){v, mm_b}, NULL, (float[]){58, 64}, 2);
    /* a @ w: [1 + 4 - 3, 4 + 10 - 6] = [2, 8] */
    m = tl_module();
    x = tl_input(m, "a", DT_F32, TL_DIMS(2, 3));
    y = tl_input(m, "w", DT_F32, TL_DIMS(3));
    tl_values(m, matmul(m, x, y, 0), "f32[2]", (void *[]){mm_a, w}, NULL, (float[]){2, 8}, 2);
    /* v . u = 4 + 10 + 18 = 32 */
    m = tl_module();
    x = tl_input(m, "v", DT_F32, TL_DIMS(3));
    y = tl_input(m, "u", DT_F32, TL_DIMS(3));
    tl_values(m, matmul(m, x, y, 0), "f32[]", (void *[]){v, u}, NULL, (float[]){32}, 1);
    /* v @ b3 with b3[j][r][c] = 100j + 10r + c: sum_r v_r (100j + 10r + c)
     * = 600j + 10 (0 + 2 + 6) + 6c: [[80, 86], [680, 686]] */
    float b3[12];
    for (int i = 0; i < 12; i++)
        b3[i] = (float)(100 * (i / 6) + 10 * (i / 2 % 3) + i % 2);
    m = tl_module();
    x = tl_input(m, "v", DT_F32, TL_DIMS(3));
    y = tl_input(m, "b3", DT_F32, TL_DIMS(2, 3, 2));
    tl_values(m, matmul(m, x, y, 0), "f32[2,2]", (void *[]){v, b3}, NULL,
              (float[]){80, 86, 680, 686}, 4);
    /* a3 @ w, a3 = [a, -a]: [[2, 8], [-2, -8]] */
    float a3[12];
    for (int i = 0; i < 12; i++)
        a3[i] = i < 6 ? mm_a[i] : -mm_a[i - 6];
    m = tl_module();
    x = tl_input(m, "a3", DT_F32, TL_DIMS(2, 2, 3));
    y = tl_input(m, "w", DT_F32, TL_DIMS(3));
    tl_values(m, matmul(m, x, y, 0), "f32[2,2]", (void *[]){a3, w}, NULL,
              (float[]){2, 8, -2, -8}, 4);
}

static void matmul_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *a = tl_input(m, "a", DT_F32, TL_DIMS(2, 1, 2, 3));
    Node *b = tl_input(m, "b", DT_F32, TL_DIMS(3, 3, 2));
    Node *y = matmul(m, a, b, 0);
    tl_infer_ok(m, y, "f32[2,3,2,2]");
    char *ir = tl_lowered(m, y);
    /* i0, i1 the batch, i2 the row, i3 the column; a's batch dim of 1
     * reads index 0, b's batch is the output's last batch dim */
    tl_has_line(ir, "for i3 in 0..2");
    tl_has_line(ir, "let v4: f32 = 0.0");
    tl_has_line(ir, "for i5 in 0..3 reduce");
    tl_has_line(ir, "v4 += b0[i0, 0, i2, i5] * b1[i1, i5, i3]");
    tl_has_line(ir, "b2[i0, i1, i2, i3] = v4");
    free(ir);
    tl_free(m);

    m = tl_module();
    a = tl_input(m, "a", DT_F32, TL_DIMS(2, 3));
    b = tl_input(m, "b", DT_F32, TL_DIMS(4, 3));
    y = matmul(m, a, b, 1);
    tl_infer_ok(m, y, "f32[2,4]");
    ir = tl_lowered(m, y);
    tl_has_line(ir, "v2 += b0[i0, i3] * b1[i1, i3]");          /* b[j][k] */
    free(ir);
    tl_free(m);

    m = tl_module();
    a = tl_input(m, "v", DT_F32, TL_DIMS(3));
    b = tl_input(m, "b", DT_F32, TL_DIMS(2, 3, 4));
    y = matmul(m, a, b, 0);
    tl_infer_ok(m, y, "f32[2,4]");
    ir = tl_lowered(m, y);
    tl_has_line(ir, "v2 += b0[i3] * b1[i0, i3, i1]");
    free(ir);
    tl_free(m);
}

/* ---- linear ------------------------------------------------------------ */

static void linear_infer(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x1 = tl_input(m, "x1", DT_F32, TL_DIMS(3));
    Node *x3 = tl_input(m, "x3", DT_F32, TL_DIMS(2, 5, 3));
    Node *w = tl_weight(m, "w", TL_DIMS(4, 3)), *bias = tl_weight(m, "bias", TL_DIMS(4));
    tl_infer_ok(m, tl_op(m, OP_LINEAR, "y", 2, x1, w), "f32[4]");
    tl_infer_ok(m, tl_op(m, OP_LINEAR, "y", 3, x1, w, bias), "f32[4]");
    tl_infer_ok(m, tl_op(m, OP_LINEAR, "y", 2, x3, w), "f32[2,5,4]");
    tl_infer_ok(m, tl_op(m, OP_LINEAR, "y", 3, x3, w, bias), "f32[2,5,4]");
    tl_free(m);
}

static void linear_refusals(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3)), *w = tl_weight(m, "w", TL_DIMS(4, 3));
    Node *w2 = tl_weight(m, "w2", TL_DIMS(4, 2)), *w1 = tl_weight(m, "w1", TL_DIMS(3));
    Node *b3 = tl_weight(m, "b3", TL_DIMS(3)), *b14 = tl_weight(m, "b14", TL_DIMS(1, 4));
    Node *s = tl_input(m, "s", DT_F32, 0, NULL), *xi = tl_input(m, "xi", DT_I32, TL_DIMS(2, 3));
    tl_infer_err(m, tl_op(m, OP_LINEAR, "y", 2, x, w2), 1,
                 "nodes[8].inputs[1]: linear: w must be [N, 3] to match x f32[2,3], got f32[4,2]");
    tl_infer_err(m, tl_op(m, OP_LINEAR, "y", 3, x, w, b3), 1,
                 "nodes[9].inputs[2]: linear: bias must be f32[4], got f32[3]");
    tl_infer_err(m, tl_op(m, OP_LINEAR, "y", 3, x, w, b14), 1,
                 "nodes[10].inputs[2]: linear: bias must be f32[4], got f32[1,4]");
    tl_infer_err(m, tl_op(m, OP_LINEAR, "y", 2, x, w1), 1,
                 "nodes[11].inputs[1]: linear needs rank 2 here, got f32[3]");
    tl_infer_err(m, tl_op(m, OP_LINEAR, "y", 2, s, w), 1,
                 "nodes[12].inputs[0]: linear needs rank 1 or more here, got f32[]");
    tl_infer_err(m, tl_op(m, OP_LINEAR, "y", 2, xi, w), 1,
                 "nodes[13].inputs[0]: linear needs f32 here, got i32[2,3]");
    tl_free(m);
}

/* w = [[1, 0, -1], [2, 1, 0]], bias = [0.5, -1]:
 * x [1, 2, 3] -> [1 - 3, 2 + 2] = [-2, 4], with bias [-1.5, 3];
 * x [-1, 0, 4] -> [-1 - 4, -2 + 0] = [-5, -2], with bias [-4.5, -3]. */
static float lin_w[] = {1, 0, -1, 2, 1, 0}, lin_bias[] = {0.5f, -1};

static void linear_values(void **state)
{
    (void)state;
    float x1[] = {1, 2, 3}, x3[] = {1, 2, 3, -1, 0, 4};
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        Module *m = tl_module();
        Node *x = tl_input(m, "x", DT_F32, TL_DIMS(3)), *w = tl_weight(m, "w", TL_DIMS(2, 3));
        Node *y = with_bias ? tl_op(m, OP_LINEAR, "y", 3, x, w, tl_weight(m, "b", TL_DIMS(2)))
                            : tl_op(m, OP_LINEAR, "y", 2, x, w);
        tl_values(m, y, "f32[2]", (void *[]){x1}, (void *[]){lin_w, lin_bias},
                  with_bias ? (float[]){-1.5f, 3} : (float[]){-2, 4}, 2);

        m = tl_module();
        x = tl_input(m, "x", DT_F32, TL_DIMS(2, 1, 3));
        w = tl_weight(m, "w", TL_DIMS(2, 3));
        y = with_bias ? tl_op(m, OP_LINEAR, "y", 3, x, w, tl_weight(m, "b", TL_DIMS(2)))
                      : tl_op(m, OP_LINEAR, "y", 2, x, w);
        tl_values(m, y, "f32[2,1,2]", (void *[]){x3}, (void *[]){lin_w, lin_bias},
                  with_bias ? (float[]){-1.5f, 3, -4.5f, -3} : (float[]){-2, 4, -5, -2}, 4);
    }
}

static void linear_lowering(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 5, 3)), *w = tl_weight(m, "w", TL_DIMS(4, 3));
    Node *bias = tl_weight(m, "bias", TL_DIMS(4));
    Node *y = tl_op(m, OP_LINEAR, "y", 3, x, w, bias);
    tl_infer_ok(m, y, "f32[2,5,4]");
    char *ir = tl_lowered(m, y);
    tl_has_line(ir, "for i2 in 0..4");
    tl_has_line(ir, "let v3: f32 = 0.0");
    tl_has_line(ir, "for i4 in 0..3 reduce");
    /* x[.., k] w[j, k]; w, loaded first, is b0 */
    tl_has_line(ir, "v3 += b1[i0, i1, i4] * b0[i2, i4]");
    tl_has_line(ir, "b3[i0, i1, i2] = v3 + b2[i2]");
    free(ir);
    tl_free(m);
}

/* ---- the JIT build against the reference, over shapes -------------------- */

/* Pseudo-random operands: matmul over batch broadcasts and vector
 * operands, with and without transpose_b; linear with and without bias. */
static void linalg_jit(void **state)
{
    (void)state;
    static const int64_t mm[][2][5] = {
        /* rank, then the dims, of a and of b (b as stored) */
        {{2, 5, 7}, {2, 7, 3}},
        {{3, 2, 5, 7}, {2, 7, 3}},
        {{4, 2, 1, 5, 7}, {3, 3, 7, 4}},
        {{1, 7}, {3, 2, 7, 4}},
        {{3, 2, 5, 7}, {1, 7}},
    };
    for (size_t i = 0; i < sizeof mm / sizeof *mm; i++)
        for (int tb = 0; tb < 2; tb++) {
            int rb = (int)mm[i][1][0];
            if (tb && rb < 2)
                continue;
            int64_t bd[KILN_MAX_RANK];
            for (int d = 0; d < rb; d++)
                bd[d] = mm[i][1][1 + d];
            if (tb) {                 /* store b [.., N, K] */
                bd[rb - 2] = mm[i][1][rb];
                bd[rb - 1] = mm[i][1][rb - 1];
            }
            Module *m = tl_module();
            Node *a = tl_input(m, "a", DT_F32, (int)mm[i][0][0], &mm[i][0][1]);
            Node *b = tl_input(m, "b", DT_F32, rb, bd);
            Node *y = matmul(m, a, b, tb);
            tl_infer_ok(m, y, NULL);
            tl_outputs(m, 1, y);
            float *av = tl_random(node_count(a), 1), *bv = tl_random(node_count(b), 2);
            tl_check(m, (void *[]){av, bv}, NULL, 1e-5);
            free(av);
            free(bv);
            tl_free(m);
        }
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        Module *m = tl_module();
        Node *x = tl_input(m, "x", DT_F32, TL_DIMS(3, 4, 9)), *w = tl_weight(m, "w", TL_DIMS(6, 9));
        Node *y = with_bias ? tl_op(m, OP_LINEAR, "y", 3, x, w, tl_weight(m, "b", TL_DIMS(6)))
                            : tl_op(m, OP_LINEAR, "y", 2, x, w);
        tl_infer_ok(m, y, "f32[3,4,6]");
        tl_outputs(m, 1, y);
        float *xv = tl_random(3 * 4 * 9, 3), *wv = tl_random(6 * 9, 4), *bv = tl_random(6, 5);
        tl_check(m, (void *[]){xv}, (void *[]){wv, bv}, 1e-5);
        free(xv);
        free(wv);
        free(bv);
        tl_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matmul_infer),
        cmocka_unit_test(matmul_refusals),
        cmocka_unit_test(matmul_values_2d),
        cmocka_unit_test(matmul_batch_broadcast),
        cmocka_unit_test(matmul_vectors),
        cmocka_unit_test(matmul_lowering),
        cmocka_unit_test(linear_infer),
        cmocka_unit_test(linear_refusals),
        cmocka_unit_test(linear_values),
        cmocka_unit_test(linear_lowering),
        cmocka_unit_test(linalg_jit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
