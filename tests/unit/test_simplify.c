/* tests/unit/test_simplify.c: simplify keeps every output's values (the
 * reference on the graph before and after agrees bit for bit, and so does
 * the JIT build of the result) and every output's name, and makes the
 * rewrites its contract lists, and no others. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "passes/passes.h"
#include "tests/unit/testlib.h"

#include <stdlib.h>
#include <string.h>

/* Runs simplify on m, whose outputs must keep their values and names
 * (the JIT build agrees within 1e-6: it sums in f32); returns the number
 * of nodes left. Frees m. */
static int simplify(Module *m)
{
    void *in[8], *before[8], *after[8];
    const char *names[8];
    for (int i = 0; i < m->ninputs; i++)
        in[i] = tl_random(node_count(m->inputs[i]), (uint64_t)i + 1);
    for (int i = 0; i < m->noutputs; i++)
        names[i] = m->outputs[i]->name;
    tl_ref_ok(m, in, NULL, NULL, before);
    PassCtx cx = {0};
    assert_true(pass_simplify(m, &cx) >= 0);
    ir_verify_graph(m);
    tl_ref_ok(m, in, NULL, NULL, after);
    for (int i = 0; i < m->noutputs; i++) {
        assert_ptr_equal(m->outputs[i]->name, names[i]);
        assert_memory_equal(after[i], before[i], node_bytes(m->outputs[i]));
        free(before[i]);
        free(after[i]);
    }
    tl_check(m, in, NULL, 1e-6);
    for (int i = 0; i < m->ninputs; i++)
        free(in[i]);
    int left = m->nnodes;
    tl_free(m);
    return left;
}

static Node *op2(Module *m, OpKind op, const char *name, Node *a, Node *b)
{
    Node *n = tl_op(m, op, name, 2, a, b);
    tl_infer_ok(m, n, NULL);
    return n;
}

static Node *op1(Module *m, OpKind op, const char *name, Node *a)
{
    Node *n = tl_op(m, op, name, 1, a);
    tl_infer_ok(m, n, NULL);
    return n;
}

static Node *transpose(Module *m, Node *x, int rank, const int64_t *perm)
{
    Node *n = tl_op(m, OP_TRANSPOSE, NULL, 1, x);
    tl_attr_ints(m, n, "perm", rank, perm);
    tl_infer_ok(m, n, NULL);
    return n;
}

/* Scalars of constants fold (with the reference's own kernels, inf
 * included); the folded nodes keep their names. */
static void folds(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(3));
    Node *half = op2(m, OP_MUL, "half", tl_const(m, 2), tl_const(m, 0.25));
    Node *root = op1(m, OP_SQRT, "root", half);
    Node *inf = op2(m, OP_DIV, "inf", tl_const(m, 1), tl_const(m, 0));
    Node *y = op2(m, OP_MINIMUM, "y", op2(m, OP_MUL, "s", x, root), inf);
    tl_outputs(m, 2, y, half);
    /* x, 0.5, 0.707, inf, s, y */
    assert_int_equal(simplify(m), 6);
}

/* x * 1, 1 * x, 0 + x, x - 0, x / 1 are x; 0 - x, 1 / x, x * 2 are not. */
static void identities(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
    Node *v = op2(m, OP_MUL, NULL, x, tl_const(m, 1));
    v = op2(m, OP_MUL, NULL, tl_const(m, 1), v);
    v = op2(m, OP_ADD, NULL, tl_const(m, 0), v);
    v = op2(m, OP_SUB, NULL, v, tl_const(m, 0));
    v = op2(m, OP_DIV, NULL, v, tl_const(m, 1));
    v = op1(m, OP_NEG, "y", v);
    tl_outputs(m, 1, v);
    assert_int_equal(simplify(m), 2);

    m = tl_module();
    x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
    v = op2(m, OP_SUB, NULL, tl_const(m, 0), x);
    v = op2(m, OP_DIV, NULL, tl_const(m, 1), v);
    v = op2(m, OP_MUL, "y", v, tl_const(m, 2));
    tl_outputs(m, 1, v);
    assert_int_equal(simplify(m), 7);
}

/* matmul(a, transpose(b)) over batch ranks 0 to 2, either transpose_b:
 * the transpose goes when it swaps the last two axes, and stays when it
 * moves a batch axis. */
static void transpose_into_matmul(void **state)
{
    (void)state;
    for (int rank = 2; rank <= 4; rank++)
        for (int tb = 0; tb < 2; tb++)
            for (int batch_perm = 0; batch_perm < (rank > 3 ? 2 : 1); batch_perm++) {
                int64_t adims[4], bdims[4], perm[4];
                for (int d = 0; d < rank - 2; d++)
                    adims[d] = bdims[d] = 2, perm[d] = d;
                if (batch_perm)
                    perm[0] = 1, perm[1] = 0;
                perm[rank - 2] = rank - 1, perm[rank - 1] = rank - 2;
                adims[rank - 2] = 3, adims[rank - 1] = 4;   /* [.., M, K] */
                bdims[rank - 2] = tb ? 4 : 5;               /* transposed: [.., K, N] */
                bdims[rank - 1] = tb ? 5 : 4;               /* or [.., N, K] */
                Module *m = tl_module();
                Node *a = tl_input(m, "a", DT_F32, rank, adims);
                Node *b = tl_input(m, "b", DT_F32, rank, bdims);
                Node *y = tl_op(m, OP_MATMUL, "y", 2, a, transpose(m, b, rank, perm));
                tl_attr_i(y, "transpose_b", tb);
                tl_infer_ok(m, y, NULL);
                tl_outputs(m, 1, y);
                assert_int_equal(simplify(m), batch_perm ? 4 : 3);
            }
}

/* Reshape chains collapse; what is back to x's own shape is x; but an
 * output never gives way to another node, so its name stays. */
static void reshapes_and_outputs(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(4, 6));
    Node *r = tl_op(m, OP_RESHAPE, "r1", 1, x);
    tl_attr_ints(m, r, "shape", TL_DIMS(24));
    tl_infer_ok(m, r, NULL);
    Node *r2 = tl_op(m, OP_RESHAPE, "r2", 1, r);
    tl_attr_ints(m, r2, "shape", TL_DIMS(2, 3, 4));
    tl_infer_ok(m, r2, NULL);
    Node *back = tl_op(m, OP_RESHAPE, "back", 1, r2);
    tl_attr_ints(m, back, "shape", TL_DIMS(4, -1));
    tl_infer_ok(m, back, NULL);
    Node *y = op1(m, OP_EXP, "y", back);
    Node *same = transpose(m, y, TL_DIMS(0, 1));
    same->name = "same";
    tl_outputs(m, 3, r2, same, same);
    /* x, r2 (of x), y (of x), same */
    assert_int_equal(simplify(m), 4);
}

/* What no output needs goes, but a cache_write (and what it reads) stays,
 * as do unused inputs. */
static void dead_nodes(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(1, 2, 2));
    tl_input(m, "unused", DT_F32, TL_DIMS(3));
    Node *pos = tl_input(m, "pos", DT_I32, 0, NULL);
    Node *cache = tl_state(m, "cache", TL_DIMS(4, 2, 2));
    Node *k = op1(m, OP_NEG, "k", x);
    Node *cw = tl_op(m, OP_CACHE_WRITE, "cw", 3, cache, k, pos);
    tl_infer_ok(m, cw, NULL);
    op1(m, OP_EXP, "dead", op1(m, OP_ABS, "dead_too", x));
    tl_outputs(m, 1, op1(m, OP_TANH, "y", x));
    PassCtx cx = {0};
    assert_int_equal(pass_simplify(m, &cx), 1);
    ir_verify_graph(m);
    char *text = tl_graph_text(m);
    tl_has_line(text, "# removed %6 'dead_too': no output needs it");
    tl_has_line(text, "%4 \"k\" = neg %0 : f32[1,2,2]");
    tl_has_line(text, "%5 \"cw\" = cache_write %3, %4, %2 : f32[4,2,2]");
    free(text);
    assert_int_equal(m->ninputs, 3);
    assert_int_equal(m->nstates, 1);
    assert_int_equal(m->nnodes, 7);
    tl_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(folds),
        cmocka_unit_test(identities),
        cmocka_unit_test(transpose_into_matmul),
        cmocka_unit_test(reshapes_and_outputs),
        cmocka_unit_test(dead_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
