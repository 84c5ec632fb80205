/* tests/unit/test_ops_moe.c: the Qwen3-MoE block: shape inference (every
 * refusal word for word), routing and expert MLPs against values worked
 * out by hand, key lines of the lowered loop IR, and the lowered program
 * compiled by libtcc against the reference (tl_check). Expert parallel
 * (`ranks` 2): each simulated rank on its half of the experts, summed by
 * an allreduce, gives the one-rank block's values; the lowering reads the
 * rank (`call rank`) and skips the other rank's experts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testlib.h"

#include <stdlib.h>
#include <string.h>

#define LN2 0.6931471805599453f     /* exp(LN2) = 2 */
#define SILU2 1.7615941559557646    /* silu(2) = 2 / (1 + e^-2) */

/* x [T, Hd], router [E, Hd], gate and up [E, I, Hd], down [E, Hd, I]. */
static Node *moe_node(Module *m, int64_t T, int64_t Hd, int64_t E, int64_t I, int64_t top_k)
{
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(T, Hd));
    Node *router = tl_weight(m, "router", TL_DIMS(E, Hd));
    Node *gate = tl_weight(m, "gate", TL_DIMS(E, I, Hd));
    Node *up = tl_weight(m, "up", TL_DIMS(E, I, Hd));
    Node *down = tl_weight(m, "down", TL_DIMS(E, Hd, I));
    Node *n = tl_op(m, OP_MOE, "moe", 5, x, router, gate, up, down);
    tl_attr_i(n, "top_k", top_k);
    return n;
}

/* ---- inference -------------------------------------------------------------- */

static void moe_infers(void **state)
{
    (void)state;
    Module *m = tl_module();
    tl_infer_ok(m, moe_node(m, 2, 4, 3, 5, 2), "f32[2,4]");
    tl_free(m);
}

static void moe_refusals(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 4));  /* %0 */
    Node *x1 = tl_input(m, "x1", DT_F32, TL_DIMS(4));
    Node *xi = tl_input(m, "xi", DT_I32, TL_DIMS(2, 4));
    Node *r = tl_weight(m, "r", TL_DIMS(3, 4));
    Node *r5 = tl_weight(m, "r5", TL_DIMS(3, 5));
    Node *g = tl_weight(m, "g", TL_DIMS(3, 5, 4));
    Node *g2 = tl_weight(m, "g2", TL_DIMS(2, 5, 4));
    Node *u6 = tl_weight(m, "u6", TL_DIMS(3, 6, 4));
    Node *d = tl_weight(m, "d", TL_DIMS(3, 4, 5));  /* %8 */
    Node *n = tl_op(m, OP_MOE, "moe", 5, x1, r, g, g, d);
    tl_infer_err(m, n, 1, "nodes[9].inputs[0]: moe needs rank 2 here, got f32[4]");
    n = tl_op(m, OP_MOE, "moe", 5, xi, r, g, g, d);
    tl_infer_err(m, n, 1, "nodes[10].inputs[0]: moe needs f32 here, got i32[2,4]");
    n = tl_op(m, OP_MOE, "moe", 5, x, r5, g, g, d);
    tl_infer_err(m, n, 1,
                 "nodes[11].inputs[1]: moe: router must be [3,4] to match x f32[2,4], "
                 "got f32[3,5]");
    n = tl_op(m, OP_MOE, "moe", 5, x, r, g2, g2, d);
    tl_infer_err(m, n, 1,
                 "nodes[12].inputs[2]: moe: gate must be [3,5,4] to match router f32[3,4] "
                 "and x f32[2,4], got f32[2,5,4]");
    n = tl_op(m, OP_MOE, "moe", 5, x, r, g, u6, d);
    tl_infer_err(m, n, 1,
                 "nodes[13].inputs[3]: moe: up must be [3,5,4] to match gate f32[3,5,4], "
                 "got f32[3,6,4]");
    n = tl_op(m, OP_MOE, "moe", 5, x, r, g, g, g);
    tl_infer_err(m, n, 1,
                 "nodes[14].inputs[4]: moe: down must be [3,4,5] to match gate f32[3,5,4], "
                 "got f32[3,5,4]");
    static const int64_t bad_k[] = {0, 4};
    for (int i = 0; i < 2; i++) {
        n = tl_op(m, OP_MOE, "moe", 5, x, r, g, g, d);
        tl_attr_i(n, "top_k", bad_k[i]);
        char want[200];
        snprintf(want, sizeof want, "nodes[%d].attrs.top_k: moe: top_k must be in [1, 3] for 3 "
                 "experts, got %lld", n->id, (long long)bad_k[i]);
        tl_infer_err(m, n, 1, want);
    }
    tl_free(m);
}

/* ---- the reference by hand -------------------------------------------------- */

/* Routing: 3 experts, top 2, Hd = 3, I = 1, two tokens x = e0 and e1.
 * Every expert computes gate . x = 2 and up . x = 1, so h = silu(2) = c,
 * and expert e's down writes c to output coordinate e alone: out[t, e]
 * is expert e's routing weight times c.
 * Router logits: token 0 [0, ln2, 0] -> p = [1/4, 1/2, 1/4]: expert 1,
 * then the tie between 0 and 2 goes to 0. Token 1 [0, 0, 0] -> p = 1/3
 * each: a three-way tie, experts 0 and 1 kept. */
static float route_x[6] = {1, 0, 0, 0, 1, 0};
static float route_router[9] = {0, 0, 0, LN2, 0, 0, 0, 0, 0};
static float route_gate[9] = {2, 2, 0, 2, 2, 0, 2, 2, 0};
static float route_up[9] = {1, 1, 0, 1, 1, 0, 1, 1, 0};
static float route_down[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};    /* [e][d][0] = (d == e) */

static Module *route_model(int norm, Node **n)
{
    Module *m = tl_module();
    *n = moe_node(m, 2, 3, 3, 1, 2);
    tl_attr_i(*n, "norm_topk_prob", norm);
    assert_int_equal(tl_infer(m, *n, NULL, 0), 0);
    tl_outputs(m, 1, *n);
    return m;
}

static void moe_routing_by_hand(void **state)
{
    (void)state;
    const float c = (float)SILU2;
    const float want[2][6] = {
        /* norm_topk_prob false: the kept p as they are */
        {c / 4, c / 2, 0,            /* token 0: 0.44039854, 0.88079708, 0 */
         c / 3, c / 3, 0},           /* token 1: 0.58719805 twice */
        /* true: renormalised over the kept: 1/4 : 1/2 -> 1/3 : 2/3, 1/3 : 1/3 -> 1/2 : 1/2 */
        {c / 3, 2 * c / 3, 0,        /* 0.58719805, 1.1743961, 0 */
         c / 2, c / 2, 0},           /* 0.88079708 twice */
    };
    for (int norm = 0; norm < 2; norm++) {
        Node *n;
        Module *m = route_model(norm, &n);
        void *in[] = {route_x}, *w[] = {route_router, route_gate, route_up, route_down}, *out[1];
        tl_ref_ok(m, in, w, NULL, out);
        tl_assert_close(out[0], want[norm], 6);
        free(out[0]);
        tl_check(m, in, w, 1e-5);
        tl_free(m);
    }
}

/* The expert MLP and its matrix orientations: E = 2, top 1, Hd = I = 2,
 * x = [1, 2]. Router logits [0, 1]: expert 1 alone, weight 1 after
 * renormalisation. Expert 0 is all 100s and must not show. Expert 1:
 *   gate [[1, 0], [0, 1]] x = [1, 2];  up [[1, 1], [0, 1]] x = [3, 2]
 *   h = [silu(1) * 3, silu(2) * 2] = [0.73105858 * 3, 1.76159416 * 2]
 *     = [2.19317574, 3.52318831]
 *   down [[1, 0], [1, -1]] h = [2.19317574, 2.19317574 - 3.52318831]. */
static void moe_expert_mlp_by_hand(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *n = moe_node(m, 1, 2, 2, 2, 1);
    assert_int_equal(tl_infer(m, n, NULL, 0), 0);
    tl_outputs(m, 1, n);
    float x[2] = {1, 2}, router[4] = {0, 0, 1, 0};
    float gate[8] = {100, 100, 100, 100, 1, 0, 0, 1};
    float up[8] = {100, 100, 100, 100, 1, 1, 0, 1};
    float down[8] = {100, 100, 100, 100, 1, 0, 1, -1};
    void *in[] = {x}, *w[] = {router, gate, up, down}, *out[1];
    tl_ref_ok(m, in, w, NULL, out);
    float want[2] = {2.19317574f, -1.33001258f};
    tl_assert_close(out[0], want, 2);
    free(out[0]);
    tl_check(m, in, w, 1e-5);
    tl_free(m);
}

/* Larger shapes on pseudo-random data: 5 tokens, 6 experts, I = 12,
 * Hd = 16; top 1, 2 and all 6, with and without renormalisation. */
static void moe_random(void **state)
{
    (void)state;
    for (int64_t top_k = 1; top_k <= 6; top_k += top_k == 1 ? 1 : 4)
        for (int norm = 0; norm < 2; norm++) {
            Module *m = tl_module();
            Node *n = moe_node(m, 5, 16, 6, 12, top_k);
            tl_attr_i(n, "norm_topk_prob", norm);
            assert_int_equal(tl_infer(m, n, NULL, 0), 0);
            tl_outputs(m, 1, n);
            void *in[1], *w[4];
            in[0] = tl_random(node_count(m->inputs[0]), 1);
            for (int i = 0; i < 4; i++)
                w[i] = tl_random(node_count(m->weights[i]), (uint64_t)i + 2);
            tl_check(m, in, w, 1e-5);
            free(in[0]);
            for (int i = 0; i < 4; i++)
                free(w[i]);
            tl_free(m);
        }
}

/* ---- lowering --------------------------------------------------------------- */

static void moe_lowers(void **state)
{
    (void)state;
    Node *n;
    Module *m = route_model(1, &n);
    char *ir = tl_lowered(m, n);
    tl_has_line(ir, "buf b0 temp : f32[2,3]");                     /* p */
    tl_has_line(ir, "buf b1 temp : i32[2,2]");                     /* selected experts */
    tl_has_line(ir, "buf b2 temp : f32[2,2]");                     /* their weights */
    tl_has_line(ir, "buf b3 temp : f32[2,1]");                     /* h */
    tl_has_line(ir, "kernel k0 moe_router_e3_k2_h3 (%5)");
    tl_has_line(ir, "v3 += b5[i0, i4] * b4[i2, i4]");              /* router logits */
    tl_has_line(ir, "b0[i0, i6] = exp(b0[i0, i6] - v1)");
    tl_has_line(ir, "b0[i0, i7] = b0[i0, i7] / v5");
    tl_has_line(ir, "b1[i0, i8] = 0");                             /* no slot left unset */
    tl_has_line(ir, "v10 += b0[i0, i11] > b0[i0, i9] || b0[i0, i11] == b0[i0, i9] && i11 < i9");
    tl_has_line(ir, "if v10 < 2");
    tl_has_line(ir, "b1[i0, v10] = i9");
    tl_has_line(ir, "b2[i0, v10] = b0[i0, i9]");
    tl_has_line(ir, "b2[i0, i14] = b2[i0, i14] / v12");            /* norm_topk_prob */
    tl_has_line(ir, "kernel k1 moe_experts_e3_k2_i1_h3 (%5)");
    tl_has_line(ir, "let v3: i64 = b1[i0, i2]");                   /* the expert of slot i2 */
    tl_has_line(ir, "v5 += b7[v3, i4, i6] * b5[i0, i6]");
    tl_has_line(ir, "v7 += b8[v3, i4, i8] * b5[i0, i8]");
    tl_has_line(ir, "b3[i0, i4] = v5 * sigmoid(v5) * v7");
    tl_has_line(ir, "v11 += b9[v3, i10, i12] * b3[i0, i12]");
    tl_has_line(ir, "b6[i0, i10] += v9 * v11");
    free(ir);
    tl_free(m);

    /* without norm_topk_prob the kept p are used as they are */
    m = route_model(0, &n);
    ir = tl_lowered(m, n);
    if (strstr(ir, "/ v12"))
        fail_msg("renormalised without norm_topk_prob:\n%s", ir);
    tl_has_line(ir, "b2[i0, v10] = b0[i0, i9]");
    free(ir);
    tl_free(m);
}

/* ---- expert parallel ------------------------------------------------------- */

static void moe_expert_parallel(void **state)
{
    (void)state;
    enum { T = 3, Hd = 4, E = 4, I = 5, K = 2, N = 2, El = E / N };
    Module *one = tl_module();
    Node *n1 = moe_node(one, T, Hd, E, I, K);
    assert_int_equal(tl_infer(one, n1, NULL, 0), 0);
    tl_outputs(one, 1, n1);
    float *x = tl_random(T * Hd, 1), *w[4] = {tl_random(E * Hd, 2), tl_random(E * I * Hd, 3),
                                              tl_random(E * I * Hd, 4), tl_random(E * Hd * I, 5)};
    float got[T * Hd];
    void *ref[1];                      /* the one-rank block's values (allocated) */
    tl_ref_ok(one, (void *[]){x}, (void **)w, NULL, ref);

    Module *m = tl_module();
    Node *xi = tl_input(m, "x", DT_F32, TL_DIMS(T, Hd));
    Node *wn[4] = {tl_weight(m, "router", TL_DIMS(E, Hd)), tl_weight(m, "gate", TL_DIMS(El, I, Hd)),
                   tl_weight(m, "up", TL_DIMS(El, I, Hd)), tl_weight(m, "down", TL_DIMS(El, Hd, I))};
    Node *n = tl_op(m, OP_MOE, "moe", 5, xi, wn[0], wn[1], wn[2], wn[3]);
    tl_attr_i(n, "top_k", K);
    tl_attr_i(n, "ranks", N);
    assert_int_equal(tl_infer(m, n, NULL, 0), 0);
    Node *sum = tl_op(m, OP_ALLREDUCE, "sum", 1, n);
    tl_attr_i(sum, "ranks", N);
    assert_int_equal(tl_infer(m, sum, NULL, 0), 0);
    tl_outputs(m, 1, sum);
    Tensor *tw[N][4], *const *wr[N], *none[1] = {NULL}, *const *sr[N] = {none, none};
    for (int r = 0; r < N; r++) {      /* rank r: the router, its experts' slices */
        tw[r][0] = tensor_wrap(wn[0], w[0]);
        for (int i = 1; i < 4; i++)
            tw[r][i] = tensor_wrap(wn[i], w[i] + (int64_t)r * El * I * Hd);
        wr[r] = tw[r];
    }
    Tensor *in = tensor_wrap(xi, x), *out = tensor_wrap(sum, got);
    char err[256] = "";
    if (ref_run_ranks(m, N, &in, wr, sr, &out, err, sizeof err) != 0)
        fail_msg("reference on %d ranks: %s", N, err);
    tl_assert_close(got, ref[0], T * Hd);
    free(ref[0]);

    char *ir = tl_lowered(m, n);
    tl_assert_has(ir, "call rank(");
    tl_assert_has(ir, "if ");
    free(ir);

    char msg[256] = "";
    Node *bad = tl_op(m, OP_MOE, "bad", 5, xi, wn[0], wn[1], wn[2], wn[3]);
    tl_attr_i(bad, "top_k", K);
    tl_attr_i(bad, "ranks", 3);
    assert_int_equal(tl_infer(m, bad, msg, sizeof msg), 1);
    tl_assert_has(msg, "moe: ranks 3 does not split the 4 experts evenly");

    free(in);
    free(out);
    for (int r = 0; r < N; r++)
        for (int i = 0; i < 4; i++)
            free(tw[r][i]);
    free(x);
    for (int i = 0; i < 4; i++)
        free(w[i]);
    tl_free(m);
    tl_free(one);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(moe_infers),
        cmocka_unit_test(moe_refusals),
        cmocka_unit_test(moe_routing_by_hand),
        cmocka_unit_test(moe_expert_mlp_by_hand),
        cmocka_unit_test(moe_random),
        cmocka_unit_test(moe_lowers),
        cmocka_unit_test(moe_expert_parallel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
