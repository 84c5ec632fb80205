/* tests/unit/test_ops_collective.c: allreduce and allgather: shape
 * inference and its refusals, the reference simulating 1, 2 and 3 ranks
 * (ref_run_ranks) against numbers worked out by hand, the identity at one
 * rank against the JIT build, and the MPI part's calls they lower to over
 * more ranks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "passes/passes.h"
#include "tests/unit/testlib.h"

#include <stdlib.h>
#include <string.h>

/* A collective of `ranks` over input x (f32 or i32 of the given shape). */
static Node *collective(Module *m, OpKind op, int64_t ranks, int64_t axis, DType t, int rank,
                        const int64_t *dims)
{
    Node *x = tl_input(m, "x", t, rank, dims);
    Node *y = tl_op(m, op, "y", 1, x);
    tl_attr_i(y, "ranks", ranks);
    if (op == OP_ALLGATHER)
        tl_attr_i(y, "axis", axis);
    return y;
}

/* m's only output on nranks ranks, rank r's weight w[r] (m has one
 * weight, or none when w is NULL) and the same input in; returns
 * ref_run_ranks's status, the output malloc'd in *out. */
static int run_ranks(Module *m, int nranks, void *in, void **w, void **out, char *err)
{
    Tensor *ti = tensor_wrap(m->inputs[0], in), *tw[4] = {0}, *to;
    Tensor *const *wr[4], *const *sr[4];
    for (int r = 0; r < nranks; r++) {
        if (w)
            tw[r] = tensor_wrap(m->weights[0], w[r]);
        wr[r] = &tw[r];
        sr[r] = NULL;
    }
    *out = calloc((size_t)node_count(m->outputs[0]) + 1, 4);
    to = tensor_wrap(m->outputs[0], *out);
    int rc = ref_run_ranks(m, nranks, &ti, wr, sr, &to, err, 512);
    free(ti);
    free(to);
    for (int r = 0; r < nranks; r++)
        free(tw[r]);
    return rc;
}

/* ---- inference -------------------------------------------------------- */

static void infer_shapes(void **state)
{
    (void)state;
    Module *m = tl_module();
    tl_infer_ok(m, collective(m, OP_ALLREDUCE, 4, 0, DT_F32, TL_DIMS(2, 3)), "f32[2,3]");
    tl_free(m);
    m = tl_module();
    tl_infer_ok(m, collective(m, OP_ALLGATHER, 3, -1, DT_F32, TL_DIMS(2, 5)), "f32[2,15]");
    tl_free(m);
    m = tl_module();
    tl_infer_ok(m, collective(m, OP_ALLGATHER, 2, 0, DT_I32, TL_DIMS(4)), "i32[8]");
    tl_free(m);
    m = tl_module();                        /* ranks defaults to 1: the identity */
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3));
    Node *y = tl_op(m, OP_ALLGATHER, "y", 1, x);
    tl_attr_i(y, "axis", 1);
    tl_infer_ok(m, y, "f32[2,3]");
    tl_free(m);
}

static void infer_refusals(void **state)
{
    (void)state;
    Module *m = tl_module();
    tl_infer_err(m, collective(m, OP_ALLREDUCE, 2, 0, DT_I32, TL_DIMS(2)), 1,
                 "nodes[1].inputs[0]: allreduce needs f32 here, got i32[2]");
    tl_free(m);
    m = tl_module();
    tl_infer_err(m, collective(m, OP_ALLREDUCE, 0, 0, DT_F32, TL_DIMS(2)), 1,
                 "nodes[1].attrs.ranks: allreduce: ranks 0 is not in [1, 1048576]");
    tl_free(m);
    m = tl_module();
    tl_infer_err(m, collective(m, OP_ALLGATHER, 2, 2, DT_F32, TL_DIMS(2, 3)), 1,
                 "nodes[1].attrs.axis: allgather: axis 2 is out of range for f32[2,3]");
    tl_free(m);
}

/* ---- the reference over ranks ---------------------------------------- */

/* y = allreduce(x * w_r) on 3 ranks: x = [1, 2], w_0 = [1, 10], w_1 =
 * [2, 20], w_2 = [4, 40]: y = [1+2+4, 2*(10+20+40)] = [7, 140]. */
static void allreduce_three_ranks(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2));
    Node *w = tl_weight(m, "w", TL_DIMS(2));
    Node *p = tl_op(m, OP_MUL, "p", 2, x, w);
    Node *y = tl_op(m, OP_ALLREDUCE, "y", 1, p);
    tl_attr_i(y, "ranks", 3);
    tl_infer_ok(m, p, "f32[2]");
    tl_infer_ok(m, y, "f32[2]");
    tl_outputs(m, 1, y);
    float xs[] = {1, 2}, w0[] = {1, 10}, w1[] = {2, 20}, w2[] = {4, 40}, want[] = {7, 140};
    void *ws[] = {w0, w1, w2}, *out;
    char err[512] = "";
    if (run_ranks(m, 3, xs, ws, &out, err) != 0)
        fail_msg("reference failed: %s", err);
    tl_assert_near(out, want, 2);
    free(out);
    tl_free(m);
}

/* y = allgather(x * w_r, axis 1) on 2 ranks of [2, 2]: x = [[1, 2], [3,
 * 4]], w_0 = 1, w_1 = -1: rows [1, 2, -1, -2] and [3, 4, -3, -4]. */
static void allgather_two_ranks(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 2));
    Node *w = tl_weight(m, "w", TL_DIMS(1));
    Node *p = tl_op(m, OP_MUL, "p", 2, x, w);
    Node *y = tl_op(m, OP_ALLGATHER, "y", 1, p);
    tl_attr_i(y, "ranks", 2);
    tl_attr_i(y, "axis", 1);
    tl_infer_ok(m, p, "f32[2,2]");
    tl_infer_ok(m, y, "f32[2,4]");
    tl_outputs(m, 1, y);
    float xs[] = {1, 2, 3, 4}, w0[] = {1}, w1[] = {-1}, want[] = {1, 2, -1, -2, 3, 4, -3, -4};
    void *ws[] = {w0, w1}, *out;
    char err[512] = "";
    if (run_ranks(m, 2, xs, ws, &out, err) != 0)
        fail_msg("reference failed: %s", err);
    tl_assert_near(out, want, 8);
    free(out);
    tl_free(m);
}

/* Along axis 0 every rank's whole value follows the previous one's; i32
 * moves exactly. */
static void allgather_axis0_i32(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *y = collective(m, OP_ALLGATHER, 2, 0, DT_I32, TL_DIMS(3));
    tl_infer_ok(m, y, "i32[6]");
    tl_outputs(m, 1, y);
    int32_t xs[] = {5, -6, 7}, want[] = {5, -6, 7, 5, -6, 7};
    void *out;
    char err[512] = "";
    if (run_ranks(m, 2, xs, NULL, &out, err) != 0)
        fail_msg("reference failed: %s", err);
    assert_memory_equal(out, want, sizeof want);
    free(out);
    tl_free(m);
}

/* A graph over 2 ranks run on 1 (ref_run) is an error naming the node. */
static void ranks_disagree(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *y = collective(m, OP_ALLREDUCE, 2, 0, DT_F32, TL_DIMS(2));
    tl_infer_ok(m, y, NULL);
    tl_outputs(m, 1, y);
    float xs[] = {1, 2};
    void *in[] = {xs}, *out[1];
    char err[512] = "";
    assert_int_equal(tl_ref(m, in, NULL, NULL, out, err, sizeof err), -1);
    assert_string_equal(err, "node 'y': allreduce over 2 ranks, run on 1");
    free(out[0]);
    tl_free(m);
}

/* ---- one rank: the identity, built -------------------------------------- */

static void one_rank_identity(void **state)
{
    (void)state;
    float xs[] = {1.5f, -2, 3, 4.25f, 5, 6};
    void *in[] = {xs};
    Module *m = tl_module();
    tl_values(m, collective(m, OP_ALLREDUCE, 1, 0, DT_F32, TL_DIMS(2, 3)), "f32[2,3]", in, NULL,
              xs, 6);
    m = tl_module();
    tl_values(m, collective(m, OP_ALLGATHER, 1, 1, DT_F32, TL_DIMS(2, 3)), "f32[2,3]", in, NULL,
              xs, 6);
}

/* Over 2 ranks each collective lowers to a call of the MPI part's, the
 * loop IR checks its tiles, and the JIT refuses the program. */
static void lowered_to_calls(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(3, 4));
    Node *s = tl_op(m, OP_ALLREDUCE, "s", 1, x);
    tl_attr_i(s, "ranks", 2);
    Node *g = tl_op(m, OP_ALLGATHER, "g", 1, x);
    tl_attr_i(g, "ranks", 2);
    tl_attr_i(g, "axis", 1);
    tl_infer_ok(m, s, "f32[3,4]");
    tl_infer_ok(m, g, "f32[3,8]");
    tl_outputs(m, 2, s, g);
    Diags d;
    diag_init(&d, m->a, "m.json");
    PassCtx cx = {.d = &d, .verify = 1};
    assert_int_equal(pass_lower(m, &cx), 1);
    ir_verify_prog(m);
    char *text = tl_prog_text(m);
    tl_assert_has(text, "call allreduce(b1[0 +: 3, 0 +: 4], b0[0 +: 3, 0 +: 4])");
    tl_assert_has(text, "call allgather(b2[0 +: 3, 0 +: 8], b0[0 +: 3, 0 +: 4])");
    free(text);
    assert_int_equal(cg_ranks(m), 2);
    assert_true(cg_rt_uses(m, CG_CC) >> CG_RT_MPI & 1);
    rt_err e = {0, ""};
    assert_null(cg_jit_new(m, &e));
    assert_int_equal(e.code, RT_EUSAGE);
    tl_assert_has(e.msg, "a program of 2 ranks runs under MPI, not in the JIT");
    tl_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(infer_shapes),
        cmocka_unit_test(infer_refusals),
        cmocka_unit_test(allreduce_three_ranks),
        cmocka_unit_test(allgather_two_ranks),
        cmocka_unit_test(allgather_axis0_i32),
        cmocka_unit_test(ranks_disagree),
        cmocka_unit_test(one_rank_identity),
        cmocka_unit_test(lowered_to_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
