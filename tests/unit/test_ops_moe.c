/* tests/unit/test_ops_moe.c: the Qwen3-MoE block, and gpt-oss's (biases,
 * the clamped SwiGLU): shape inference (every
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

/* gpt-oss's block: biases on the router and experts, the clamped SwiGLU
 * (alpha 1.702, limit 7). E = 3, top 2 renormalised, Hd = I = 1, x = 1.
 * Router weights 0, biases [ln3, 0, -5]: p ~ 3, 1, e^-5; experts 0 and 1
 * kept with weights 3/4, 1/4.
 *   expert 0: g = 10 -> min(g, 7) = 7; u = -10 -> clamp -7; h = 7
 *             sigmoid(1.702 * 7) (-7 + 1) = -41.99971877; down 1, bias
 *             0.5: -41.49971877
 *   expert 1: g = 1 + 0 = 1; u = 0 + 2 = 2; h = sigmoid(1.702) (2 + 1) =
 *             2.53738730; down 2, bias -1: 4.07477460
 *   y = 3/4 (-41.49971877) + 1/4 4.07477460 = -30.10609543.
 * Expert 2 is all 100s and must not show. */
static void moe_gptoss_by_hand(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(1, 1));
    Node *in[9] = {x, tl_weight(m, "router", TL_DIMS(3, 1)),
                   tl_weight(m, "gate", TL_DIMS(3, 1, 1)), tl_weight(m, "up", TL_DIMS(3, 1, 1)),
                   tl_weight(m, "down", TL_DIMS(3, 1, 1)), tl_weight(m, "rb", TL_DIMS(3)),
                   tl_weight(m, "gb", TL_DIMS(3, 1)), tl_weight(m, "ub", TL_DIMS(3, 1)),
                   tl_weight(m, "db", TL_DIMS(3, 1))};
    Node *n = tl_op(m, OP_MOE, "moe", 9, in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7],
                    in[8]);
    tl_attr_i(n, "top_k", 2);
    tl_attr_i(n, "activation", 1);
    assert_int_equal(tl_infer(m, n, NULL, 0), 0);
    tl_outputs(m, 1, n);
    float xd[1] = {1}, router[3] = {0, 0, 0}, gate[3] = {10, 1, 100}, up[3] = {-10, 0, 100};
    float down[3] = {1, 2, 100}, rb[3] = {1.0986122886681098f, 0, -5}, gb[3] = {0, 0, 100};
    float ub[3] = {0, 2, 100}, db[3] = {0.5f, -1, 100};
    void *ins[] = {xd}, *w[] = {router, gate, up, down, rb, gb, ub, db}, *out[1];
    tl_ref_ok(m, ins, w, NULL, out);
    float want[1] = {-30.10609543f};
    tl_assert_close(out[0], want, 1);
    free(out[0]);
    tl_check(m, ins, w, 1e-5);
    char *ir = tl_lowered(m, n);
    tl_assert_has(ir, "min(");                  /* the clamps */
    tl_assert_has(ir, "* 1.70200002");
    free(ir);
    tl_free(m);
}

/* With biases and the clamped SwiGLU on pseudo-random data, the gates
 * and ups scaled by 8 so that the clamps bite: 5 tokens, 6 experts, I =
 * 12, Hd = 16, top 2. Then refusals: a bias of the wrong shape, 6 inputs,
 * a limit of 0. */
static void moe_gptoss_random(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(5, 16));
    Node *w[8] = {tl_weight(m, "router", TL_DIMS(6, 16)), tl_weight(m, "gate", TL_DIMS(6, 12, 16)),
                  tl_weight(m, "up", TL_DIMS(6, 12, 16)), tl_weight(m, "down", TL_DIMS(6, 16, 12)),
                  tl_weight(m, "rb", TL_DIMS(6)), tl_weight(m, "gb", TL_DIMS(6, 12)),
                  tl_weight(m, "ub", TL_DIMS(6, 12)), tl_weight(m, "db", TL_DIMS(6, 16))};
    Node *n = tl_op(m, OP_MOE, "moe", 9, x, w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]);
    tl_attr_i(n, "top_k", 2);
    tl_attr_i(n, "activation", 1);
    assert_int_equal(tl_infer(m, n, NULL, 0), 0);
    tl_outputs(m, 1, n);
    void *in[1], *wd[8];
    in[0] = tl_random(5 * 16, 1);
    for (int i = 0; i < 8; i++) {
        int64_t c = node_count(w[i]);
        wd[i] = tl_random(c, (uint64_t)i + 2);
        for (int64_t j = 0; (i == 1 || i == 2) && j < c; j++)
            ((float *)wd[i])[j] *= 8;
    }
    tl_check(m, in, wd, 1e-5);
    free(in[0]);
    for (int i = 0; i < 8; i++)
        free(wd[i]);
    n = tl_op(m, OP_MOE, "moe", 9, x, w[0], w[1], w[2], w[3], w[6], w[5], w[6], w[7]);
    tl_attr_i(n, "top_k", 2);
    tl_infer_err(m, n, 1, "nodes[10].inputs[5]: moe: router_bias must be [6] to match gate "
                          "f32[6,12,16], got f32[6,12]");
    n = tl_op(m, OP_MOE, "moe", 6, x, w[0], w[1], w[2], w[3], w[4]);
    tl_attr_i(n, "top_k", 2);
    tl_infer_err(m, n, 1, "nodes[11]: moe: takes 5 inputs, or 9 with the biases of the router, "
                          "gate, up and down; got 6");
    n = tl_op(m, OP_MOE, "moe", 5, x, w[0], w[1], w[2], w[3]);
    tl_attr_i(n, "top_k", 2);
    tl_attr_f(n, "limit", 0);
    tl_infer_err(m, n, 1, "nodes[12].attrs.limit: moe: alpha must be a number and limit > 0, "
                          "got alpha 1.702, limit 0");
    tl_free(m);
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

/* The block over N = 2 simulated ranks, each with its half of the
 * experts (and of their biases, with biases), summed by an allreduce,
 * equals the one-rank block; the lowered kernel reads its rank; ranks
 * that do not divide the experts are refused. */
static void expert_parallel(int biases)
{
    enum { T = 3, Hd = 4, E = 4, I = 5, K = 2, N = 2, El = E / N };
    int nw = biases ? 8 : 4;
    /* each weight's elements, and an expert's (0: whole on every rank) */
    const int64_t count[8] = {E * Hd, E * I * Hd, E * I * Hd, E * Hd * I, E, E * I, E * I, E * Hd};
    const int64_t per[8] = {0, I * Hd, I * Hd, Hd * I, 0, I, I, Hd};
    float *w[8];
    for (int i = 0; i < nw; i++)
        w[i] = tl_random(count[i], 2 + (unsigned)i);

    Module *one = tl_module();
    Node *n1 = moe_node(one, T, Hd, E, I, K);
    assert_int_equal(tl_infer(one, n1, NULL, 0), 0);
    if (biases) {
        Node *b1[4] = {tl_weight(one, "rb", TL_DIMS(E)), tl_weight(one, "gb", TL_DIMS(E, I)),
                       tl_weight(one, "ub", TL_DIMS(E, I)), tl_weight(one, "db", TL_DIMS(E, Hd))};
        Node *m9 = tl_op(one, OP_MOE, "moe9", 9, n1->in[0], n1->in[1], n1->in[2], n1->in[3],
                         n1->in[4], b1[0], b1[1], b1[2], b1[3]);
        tl_attr_i(m9, "top_k", K);
        assert_int_equal(tl_infer(one, m9, NULL, 0), 0);
        n1 = m9;
    }
    tl_outputs(one, 1, n1);
    float *x = tl_random(T * Hd, 1);
    float got[T * Hd];
    void *ref[1];                      /* the one-rank block's values (allocated) */
    tl_ref_ok(one, (void *[]){x}, (void **)w, NULL, ref);

    Module *m = tl_module();
    Node *xi = tl_input(m, "x", DT_F32, TL_DIMS(T, Hd));
    Node *wn[8] = {tl_weight(m, "router", TL_DIMS(E, Hd)), tl_weight(m, "gate", TL_DIMS(El, I, Hd)),
                   tl_weight(m, "up", TL_DIMS(El, I, Hd)), tl_weight(m, "down", TL_DIMS(El, Hd, I))};
    if (biases) {
        wn[4] = tl_weight(m, "rb", TL_DIMS(E));
        wn[5] = tl_weight(m, "gb", TL_DIMS(El, I));
        wn[6] = tl_weight(m, "ub", TL_DIMS(El, I));
        wn[7] = tl_weight(m, "db", TL_DIMS(El, Hd));
    }
    Node *n = biases ? tl_op(m, OP_MOE, "moe", 9, xi, wn[0], wn[1], wn[2], wn[3], wn[4], wn[5],
                             wn[6], wn[7])
                     : tl_op(m, OP_MOE, "moe", 5, xi, wn[0], wn[1], wn[2], wn[3]);
    tl_attr_i(n, "top_k", K);
    tl_attr_i(n, "ranks", N);
    assert_int_equal(tl_infer(m, n, NULL, 0), 0);
    Node *sum = tl_op(m, OP_ALLREDUCE, "sum", 1, n);
    tl_attr_i(sum, "ranks", N);
    assert_int_equal(tl_infer(m, sum, NULL, 0), 0);
    tl_outputs(m, 1, sum);
    Tensor *tw[N][8], *const *wr[N], *none[1] = {NULL}, *const *sr[N] = {none, none};
    for (int r = 0; r < N; r++) {      /* rank r: the router, its experts' slices */
        for (int i = 0; i < nw; i++)
            tw[r][i] = tensor_wrap(wn[i], w[i] + (int64_t)r * El * per[i]);
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
        for (int i = 0; i < nw; i++)
            free(tw[r][i]);
    free(x);
    for (int i = 0; i < nw; i++)
        free(w[i]);
    tl_free(m);
    tl_free(one);
}

static void moe_expert_parallel(void **state)
{
    (void)state;
    expert_parallel(0);
}

static void moe_expert_parallel_biases(void **state)
{
    (void)state;
    expert_parallel(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(moe_infers),
        cmocka_unit_test(moe_refusals),
        cmocka_unit_test(moe_routing_by_hand),
        cmocka_unit_test(moe_expert_mlp_by_hand),
        cmocka_unit_test(moe_random),
        cmocka_unit_test(moe_gptoss_by_hand),
        cmocka_unit_test(moe_gptoss_random),
        cmocka_unit_test(moe_lowers),
        cmocka_unit_test(moe_expert_parallel),
        cmocka_unit_test(moe_expert_parallel_biases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
