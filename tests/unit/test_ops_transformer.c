/* tests/unit/test_ops_transformer.c: attention and cache_write (rope:
 * test_ops_rope.c; embedding: test_ops_embedding.c): shape inference (every refusal word for word), the
 * reference against values worked out by hand, key lines of the lowered
 * loop IR, and the lowered program compiled by libtcc against the
 * reference (tl_check), run-time errors and states included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LN3 1.0986122886681098f     /* exp(LN3) = 3 */

/* ---- attention -------------------------------------------------------------- */

static void attention_infers(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *q = tl_input(m, "q", DT_F32, TL_DIMS(2, 4, 8));
    Node *k = tl_input(m, "k", DT_F32, TL_DIMS(5, 2, 8));
    Node *v = tl_input(m, "v", DT_F32, TL_DIMS(5, 2, 8));
    Node *pos = tl_input(m, "pos", DT_I32, 0, NULL);
    tl_infer_ok(m, tl_op(m, OP_ATTENTION, "a", 3, q, k, v), "f32[2,4,8]");
    Node *a = tl_op(m, OP_ATTENTION, "a", 4, q, k, v, pos);
    tl_attr_i(a, "causal", 0);
    tl_attr_f(a, "scale", 0.25);
    tl_infer_ok(m, a, "f32[2,4,8]");
    tl_free(m);
}

static void attention_refusals(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *q = tl_input(m, "q", DT_F32, TL_DIMS(2, 4, 8));  /* %0 */
    Node *q2 = tl_input(m, "q2", DT_F32, TL_DIMS(2, 8));
    Node *q3 = tl_input(m, "q3", DT_F32, TL_DIMS(2, 3, 8));
    Node *q9 = tl_input(m, "q9", DT_F32, TL_DIMS(9, 4, 8));
    Node *k = tl_input(m, "k", DT_F32, TL_DIMS(5, 2, 8));
    Node *k4 = tl_input(m, "k4", DT_F32, TL_DIMS(5, 2, 4));
    Node *v6 = tl_input(m, "v6", DT_F32, TL_DIMS(6, 2, 8));
    Node *pos = tl_input(m, "pos", DT_I32, 0, NULL);
    Node *fpos = tl_input(m, "fpos", DT_F32, 0, NULL);
    Node *vpos = tl_input(m, "vpos", DT_I32, TL_DIMS(1));  /* %9 */
    tl_infer_err(m, tl_op(m, OP_ATTENTION, "a", 3, q2, k, k), 1,
                 "nodes[10].inputs[0]: attention needs rank 3 here, got f32[2,8]");
    tl_infer_err(m, tl_op(m, OP_ATTENTION, "a", 3, q, k4, k4), 1,
                 "nodes[11].inputs[1]: attention: k must be [S, Hkv, 8] to match q f32[2,4,8], "
                 "got f32[5,2,4]");
    tl_infer_err(m, tl_op(m, OP_ATTENTION, "a", 3, q, k, v6), 1,
                 "nodes[12].inputs[2]: attention: v must have k's shape f32[5,2,8], "
                 "got f32[6,2,8]");
    tl_infer_err(m, tl_op(m, OP_ATTENTION, "a", 3, q3, k, k), 1,
                 "nodes[13]: attention: the 3 query heads are not a multiple of the 2 kv heads: "
                 "q f32[2,3,8], k f32[5,2,8]");
    tl_infer_err(m, tl_op(m, OP_ATTENTION, "a", 3, q9, k, k), 1,
                 "nodes[14]: attention: q has 9 rows, more than the 5 rows of k: q f32[9,4,8], "
                 "k f32[5,2,8]");
    tl_infer_err(m, tl_op(m, OP_ATTENTION, "a", 4, q9, k, k, pos), 1,
                 "nodes[15]: attention: q has 9 rows, more than the 5 rows of k: q f32[9,4,8], "
                 "k f32[5,2,8]");
    tl_infer_err(m, tl_op(m, OP_ATTENTION, "a", 4, q, k, k, fpos), 1,
                 "nodes[16].inputs[3]: attention needs i32 here, got f32[]");
    tl_infer_err(m, tl_op(m, OP_ATTENTION, "a", 4, q, k, k, vpos), 1,
                 "nodes[17].inputs[3]: attention needs rank 0 here, got i32[1]");
    Node *a = tl_op(m, OP_ATTENTION, "a", 3, q, k, k);
    tl_attr_f(a, "scale", -1);
    tl_infer_err(m, a, 1, "nodes[18].attrs.scale: attention: scale must be > 0, got -1");
    a = tl_op(m, OP_ATTENTION, "a", 3, q, k, k);
    tl_attr_f(a, "scale", 0);                    /* 0 given is not the default */
    tl_infer_err(m, a, 1, "nodes[19].attrs.scale: attention: scale must be > 0, got 0");
    a = tl_op(m, OP_ATTENTION, "a", 3, q, k, k);
    tl_attr_f(a, "softcap", -1);
    tl_infer_err(m, a, 1, "nodes[20].attrs.softcap: attention: softcap must be >= 0 (0: none), "
                          "got -1");
    /* six operands: pos, slots and the sinks, which are f32 */
    tl_infer_err(m, tl_op(m, OP_ATTENTION, "a", 6, q, k, k, pos, vpos, vpos), 1,
                 "nodes[21].inputs[5]: attention needs f32 here, got i32[1]");
    Node *s3 = tl_weight(m, "s3", TL_DIMS(3));    /* %22 */
    tl_infer_err(m, tl_op(m, OP_ATTENTION, "a", 5, q, k, k, pos, s3), 1,
                 "nodes[23].inputs[4]: attention: sinks must be [4] (one a query head) to match "
                 "q f32[2,4,8], got f32[3]");
    Node *kn = tl_input(m, "kn", DT_F32, TL_DIMS(3, 5, 2, 8));    /* %24: 3 slots */
    Node *rows = tl_input(m, "rows", DT_I32, TL_DIMS(2));
    tl_infer_err(m, tl_op(m, OP_ATTENTION, "a", 6, q, kn, kn, rows, rows, s3), 1,
                 "nodes[26].inputs[5]: attention: sinks must be [4] (one a query head) to match "
                 "q f32[2,4,8], got f32[3]");
    tl_free(m);
}

/* Grouped-query heads: Hq = 4 over Hkv = 2, S = 2, D = 2, scale 1, one
 * query at pos 1 (sees both keys). Query heads 0, 1 must use kv head 0
 * and heads 2, 3 kv head 1, whose values are 100 times larger. */
static void attention_gqa_heads(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *q = tl_input(m, "q", DT_F32, TL_DIMS(1, 4, 2));
    Node *k = tl_input(m, "k", DT_F32, TL_DIMS(2, 2, 2));
    Node *v = tl_input(m, "v", DT_F32, TL_DIMS(2, 2, 2));
    Node *pos = tl_input(m, "pos", DT_I32, 0, NULL);
    Node *a = tl_op(m, OP_ATTENTION, "a", 4, q, k, v, pos);
    tl_attr_f(a, "scale", 1);
    assert_int_equal(tl_infer(m, a, NULL, 0), 0);
    tl_outputs(m, 1, a);
    float qd[8] = {1, 0, 2, 0, 1, 0, 2, 0};      /* heads: [1,0] [2,0] [1,0] [2,0] */
    float kd[8] = {0, 0, LN3, 0,                 /* row 0: kv head 0, kv head 1 */
                   LN3, 0, 0, 0};                /* row 1 */
    float vd[8] = {4, 8, 1000, 0,
                   8, 4, 0, 1000};
    int32_t p = 1;
    void *in[] = {qd, kd, vd, &p}, *out[1];
    tl_ref_ok(m, in, NULL, NULL, out);
    float want[8] = {
        7, 5,          /* h0, kv 0: scores 0, ln3 -> 1/4, 3/4: [4,8]/4 + 3[8,4]/4 */
        7.6f, 4.4f,    /* h1, kv 0: scores 0, 2ln3 -> 1/10, 9/10: [0.4+7.2, 0.8+3.6] */
        750, 250,      /* h2, kv 1: scores ln3, 0 -> 3/4, 1/4 */
        900, 100,      /* h3, kv 1: scores 2ln3, 0 -> 9/10, 1/10 */
    };
    tl_assert_close(out[0], want, 8);
    free(out[0]);
    tl_check(m, in, NULL, 1e-5);
    tl_free(m);
}

/* T = S = n keys, one head, D = 1 (default scale 1/sqrt(1) = 1), q = 1:
 * keys kd, values vd, causal or not, the scores capped at cap, a window
 * (0: none); the reference gives want (worked by hand), and the lowered
 * kernel agrees. */
static void attention_tiny(int n, const float *kd, const float *vd, int causal, double cap,
                           int64_t window, const float *want)
{
    Module *m = tl_module();
    Node *q = tl_input(m, "q", DT_F32, TL_DIMS(n, 1, 1));
    Node *k = tl_input(m, "k", DT_F32, TL_DIMS(n, 1, 1));
    Node *v = tl_input(m, "v", DT_F32, TL_DIMS(n, 1, 1));
    Node *a = tl_op(m, OP_ATTENTION, "a", 3, q, k, v);
    tl_attr_i(a, "causal", causal);
    if (cap)
        tl_attr_f(a, "softcap", cap);
    if (window)
        tl_attr_i(a, "window", window);
    assert_int_equal(tl_infer(m, a, NULL, 0), 0);
    tl_outputs(m, 1, a);
    float qd[3] = {1, 1, 1};
    void *in[] = {qd, (void *)kd, (void *)vd}, *out[1];
    tl_ref_ok(m, in, NULL, NULL, out);
    tl_assert_close(out[0], want, n);
    free(out[0]);
    tl_check(m, in, NULL, 1e-5);
    tl_free(m);
}

/* Two keys, 0 and k1, values 4 and 8. When k1 scores ln3, both rows see
 * both keys unless causal, when row 0 sees key 0 only: both keys give 4/4
 * + 3 * 8/4 = 7; key 0 alone, 4. */
static void attention_two_keys(float k1, double cap)
{
    float kd[2] = {0, k1}, vd[2] = {4, 8}, want[2][2] = {{7, 7}, {4, 7}};
    for (int causal = 0; causal < 2; causal++)
        attention_tiny(2, kd, vd, causal, cap, 0, want[causal]);
}

static void attention_causal_or_not(void **state)
{
    (void)state;
    attention_two_keys(LN3, 0);
}

/* Gemma 2's soft cap: k1 = ln((1 + c) / (1 - c)), c = ln3 / 2, scores
 * ln3 once capped at 2 (2 tanh(k1 / 2) = 2 c): the same outputs. Uncapped,
 * k1 = 1.2348 would give (4 + 8 e^k1) / (1 + e^k1) = 7.098. */
static void attention_softcap(void **state)
{
    (void)state;
    double c = LN3 / 2;
    attention_two_keys((float)log((1 + c) / (1 - c)), 2);
}

/* S = 5, one head, D = 4 (default scale 1/2): T query rows at pos; keys 0
 * and 2 score 0, key 1 scores 0.5 * 2 ln3 = ln3; rows 3 and 4 hold huge
 * keys and values that must never be read by a query at position 2. */
static Module *attention_at_pos(int64_t T, int causal, Node **a)
{
    Module *m = tl_module();
    Node *q = tl_input(m, "q", DT_F32, TL_DIMS(T, 1, 4));
    Node *k = tl_input(m, "k", DT_F32, TL_DIMS(5, 1, 4));
    Node *v = tl_input(m, "v", DT_F32, TL_DIMS(5, 1, 4));
    Node *pos = tl_input(m, "pos", DT_I32, 0, NULL);
    *a = tl_op(m, OP_ATTENTION, "attn", 4, q, k, v, pos);
    tl_attr_i(*a, "causal", causal);
    assert_int_equal(tl_infer(m, *a, NULL, 0), 0);
    tl_outputs(m, 1, *a);
    return m;
}

static float pos_q[8] = {1, 1, 0, 0, 1, 1, 0, 0};
static float pos_k[20] = {0, 0, 0, 0, LN3, LN3, 0, 0, 0, 0, 0, 0,
                          1e4f, 1e4f, 1e4f, 1e4f, 1e4f, 1e4f, 1e4f, 1e4f};
static float pos_v[20] = {10, 0, 0, 1, 20, 0, 0, 1, 30, 0, 0, 1,
                          1e6f, 1e6f, 1e6f, 1e6f, 1e6f, 1e6f, 1e6f, 1e6f};

static void attention_decode_at_pos(void **state)
{
    (void)state;
    Node *a;
    Module *m = attention_at_pos(1, 1, &a);
    int32_t pos = 2;
    void *in[] = {pos_q, pos_k, pos_v, &pos}, *out[1];
    tl_ref_ok(m, in, NULL, NULL, out);
    /* keys 0..2: weights 1/5, 3/5, 1/5: 10/5 + 60/5 + 30/5 = 20 */
    float want[4] = {20, 0, 0, 1};
    tl_assert_close(out[0], want, 4);
    free(out[0]);
    tl_check(m, in, NULL, 1e-5);
    tl_free(m);
}

static void attention_prefill_at_pos(void **state)
{
    (void)state;
    for (int causal = 0; causal < 2; causal++) {
        Node *a;
        Module *m = attention_at_pos(2, causal, &a);
        int32_t pos = 1;
        void *in[] = {pos_q, pos_k, pos_v, &pos}, *out[1];
        tl_ref_ok(m, in, NULL, NULL, out);
        /* rows at positions 1 and 2; causal: row 0 sees keys 0..1, weights
         * 1/4, 3/4: 10/4 + 60/4 = 17.5; otherwise keys 0..2 as in decode */
        float want[2][8] = {{20, 0, 0, 1, 20, 0, 0, 1}, {17.5f, 0, 0, 1, 20, 0, 0, 1}};
        tl_assert_close(out[0], want[causal], 8);
        free(out[0]);
        tl_check(m, in, NULL, 1e-5);
        tl_free(m);
    }
}

/* Larger shapes on pseudo-random data: GQA (6 query heads over 2 kv
 * heads), D = 16, prefill at an offset, causal or not, and decode. */
static void attention_random(void **state)
{
    (void)state;
    static const int64_t T[3] = {5, 5, 1};
    for (int c = 0; c < 3; c++) {
        Module *m = tl_module();
        Node *q = tl_input(m, "q", DT_F32, TL_DIMS(T[c], 6, 16));
        Node *k = tl_input(m, "k", DT_F32, TL_DIMS(9, 2, 16));
        Node *v = tl_input(m, "v", DT_F32, TL_DIMS(9, 2, 16));
        Node *pos = tl_input(m, "pos", DT_I32, 0, NULL);
        Node *a = tl_op(m, OP_ATTENTION, "a", 4, q, k, v, pos);
        tl_attr_i(a, "causal", c != 0);
        assert_int_equal(tl_infer(m, a, NULL, 0), 0);
        tl_outputs(m, 1, a);
        float *qd = tl_random(T[c] * 6 * 16, 1), *kd = tl_random(9 * 2 * 16, 2);
        float *vd = tl_random(9 * 2 * 16, 3);
        int32_t p = 3;
        void *in[] = {qd, kd, vd, &p};
        tl_check(m, in, NULL, 1e-5);
        free(qd);
        free(kd);
        free(vd);
        tl_free(m);
    }
}

static void attention_pos_out_of_range(void **state)
{
    (void)state;
    Node *a;
    Module *m = attention_at_pos(2, 1, &a);
    int32_t pos = 4;
    void *in[] = {pos_q, pos_k, pos_v, &pos};
    tl_ref_fails(m, in, NULL, NULL,
              "node 'attn': attention: pos 4 is out of range [0, 3] (queries T = 2, keys S = 5)");
    TlJit jt;
    tl_jit_open(&jt, m);
    tl_jit_fails(&jt, in,
                 "attention 'attn': pos 4 is out of range [0, 3] (queries T = 2, keys S = 5)");
    pos = -1;
    tl_ref_fails(m, in, NULL, NULL,
              "node 'attn': attention: pos -1 is out of range [0, 3] (queries T = 2, keys S = 5)");
    tl_jit_fails(&jt, in,
                 "attention 'attn': pos -1 is out of range [0, 3] (queries T = 2, keys S = 5)");
    tl_jit_close(&jt);
    tl_free(m);
}

/* q [3, 4, 2] over k = v [3, 2, 2], no pos. */
static Module *gqa_prefill(int causal, Node **a)
{
    Module *m = tl_module();
    Node *q = tl_input(m, "q", DT_F32, TL_DIMS(3, 4, 2));
    Node *k = tl_input(m, "k", DT_F32, TL_DIMS(3, 2, 2));
    *a = tl_op(m, OP_ATTENTION, "a", 3, q, k, k);
    tl_attr_i(*a, "causal", causal);
    assert_int_equal(tl_infer(m, *a, NULL, 0), 0);
    tl_outputs(m, 1, *a);
    return m;
}

/* q [T, Hq, D], k and v [S, Hkv, D], and pos: one attention, causal or
 * not. */
static Module *gqa_model(int64_t T, int64_t S, int64_t Hq, int64_t Hkv, int64_t D, int causal,
                         int64_t window, Node **a)
{
    Module *m = tl_module();
    Node *q = tl_input(m, "q", DT_F32, TL_DIMS(T, Hq, D));
    Node *k = tl_input(m, "k", DT_F32, TL_DIMS(S, Hkv, D));
    Node *v = tl_input(m, "v", DT_F32, TL_DIMS(S, Hkv, D));
    Node *pos = tl_input(m, "pos", DT_I32, 0, NULL);
    *a = tl_op(m, OP_ATTENTION, "a", 4, q, k, v, pos);
    tl_attr_i(*a, "causal", causal);
    if (window)
        tl_attr_i(*a, "window", window);
    assert_int_equal(tl_infer(m, *a, NULL, 0), 0);
    tl_outputs(m, 1, *a);
    return m;
}

/* The lowered attention (libtcc) against the reference at pos, on
 * pseudo-random q, k and v whose rows past the last key any query sees
 * (pos + T - 1), and with a window before the first (pos - window + 1),
 * are NaN: reading one would poison the output. */
static void gqa_check_window(int64_t T, int64_t S, int64_t Hq, int64_t Hkv, int64_t D,
                             int causal, int32_t pos, int64_t window)
{
    Node *a;
    Module *m = gqa_model(T, S, Hq, Hkv, D, causal, window, &a);
    float *qd = tl_random(T * Hq * D, 1), *kd = tl_random(S * Hkv * D, 2);
    float *vd = tl_random(S * Hkv * D, 3);
    for (int64_t i = (pos + T) * Hkv * D; i < S * Hkv * D; i++)
        kd[i] = vd[i] = NAN;
    for (int64_t i = 0; window && i < (pos - window + 1) * Hkv * D; i++)
        kd[i] = vd[i] = NAN;
    void *in[] = {qd, kd, vd, &pos};
    tl_check(m, in, NULL, 1e-5);
    free(qd);
    free(kd);
    free(vd);
    tl_free(m);
}

static void gqa_check(int64_t T, int64_t S, int64_t Hq, int64_t Hkv, int64_t D, int causal,
                      int32_t pos)
{
    gqa_check_window(T, S, Hq, Hkv, D, causal, pos, 0);
}

/* A sliding window of W keys: T = S = 3, one head, D = 1, q = 1, keys 0,
 * ln3, 0, values 4, 8, 16. W = 1: each row its own value; W = 2: row 0
 * key 0 (4), row 1 keys 0, 1 ((4 + 3 * 8) / 4 = 7), row 2 keys 1, 2
 * ((3 * 8 + 16) / 4 = 10). Then the lowered kernel on bigger shapes, rows
 * outside every query's window NaN: decode at 299 seeing 100 rows (the
 * first cut inside a block of keys, blocks before it skipped), 70 rows,
 * and a 300-row prefill over 5 blocks seeing 70 rows each. */
static void attention_window(void **state)
{
    (void)state;
    float kd[3] = {0, LN3, 0}, vd[3] = {4, 8, 16}, want[2][3] = {{4, 8, 16}, {4, 7, 10}};
    for (int64_t w = 1; w <= 2; w++)
        attention_tiny(3, kd, vd, 1, 0, w, want[w - 1]);
    gqa_check_window(1, 300, 8, 2, 64, 1, 299, 100);
    gqa_check_window(1, 300, 8, 2, 64, 1, 299, 70);
    gqa_check_window(300, 300, 8, 2, 64, 1, 0, 70);
}

/* gpt-oss's sinks: T = S = 2, one head, D = 1, q = 1, keys 0 and ln3,
 * values 4 and 8, pos 0, the sink's logit ln3. The sink adds e^ln3 = 3 to
 * the softmax's denominator and nothing to the sum of values: both keys
 * give (4 + 3 * 8) / (1 + 3 + 3) = 4; key 0 alone (causal, row 0) 4 / (1
 * + 3) = 1. Sink -1e30 is none: 7 and 4 as attention_two_keys. Then the
 * lowered kernel against the reference on bigger shapes, with a window,
 * the sink far above the scores (a block's max never passes it) and
 * below them. */
static void attention_sinks(void **state)
{
    (void)state;
    float sink_v[2] = {LN3, -1e30f};
    float want[2][2][2] = {{{4, 4}, {1, 4}}, {{7, 7}, {4, 7}}};
    for (int si = 0; si < 2; si++)
        for (int causal = 0; causal < 2; causal++) {
            Module *m = tl_module();
            Node *q = tl_input(m, "q", DT_F32, TL_DIMS(2, 1, 1));
            Node *k = tl_input(m, "k", DT_F32, TL_DIMS(2, 1, 1));
            Node *v = tl_input(m, "v", DT_F32, TL_DIMS(2, 1, 1));
            Node *pos = tl_input(m, "pos", DT_I32, 0, NULL);
            Node *sk = tl_weight(m, "sinks", TL_DIMS(1));
            Node *a = tl_op(m, OP_ATTENTION, "a", 5, q, k, v, pos, sk);
            tl_attr_i(a, "causal", causal);
            assert_int_equal(tl_infer(m, a, NULL, 0), 0);
            tl_outputs(m, 1, a);
            float qd[2] = {1, 1}, kd[2] = {0, LN3}, vd[2] = {4, 8};
            int32_t p0 = 0;
            void *in[] = {qd, kd, vd, &p0}, *w[] = {&sink_v[si]}, *out[1];
            tl_ref_ok(m, in, w, NULL, out);
            tl_assert_close(out[0], want[si][causal], 2);
            free(out[0]);
            tl_check(m, in, w, 1e-5);
            tl_free(m);
        }
    static const struct {
        int64_t T, S, W;
        int32_t pos;
        float centre;
    } big[] = {{1, 300, 100, 299, 0}, {1, 300, 0, 150, 20}, {300, 300, 70, 0, -20},
               {5, 130, 0, 64, 0}};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        Node *a;
        Module *m = gqa_model(big[i].T, big[i].S, 8, 2, 64, 1, big[i].W, &a);
        Node *sk = tl_weight(m, "sinks", TL_DIMS(8));
        Node *s = tl_op(m, OP_ATTENTION, "s", 5, a->in[0], a->in[1], a->in[2], a->in[3], sk);
        if (big[i].W)
            tl_attr_i(s, "window", big[i].W);
        assert_int_equal(tl_infer(m, s, NULL, 0), 0);
        tl_outputs(m, 1, s);
        float *qd = tl_random(big[i].T * 8 * 64, 1), *kd = tl_random(big[i].S * 2 * 64, 2);
        float *vd = tl_random(big[i].S * 2 * 64, 3), *sd = tl_random(8, 4);
        for (int h = 0; h < 8; h++)
            sd[h] += big[i].centre;
        void *in[] = {qd, kd, vd, (void *)&big[i].pos}, *w[] = {sd};
        tl_check(m, in, w, 1e-5);
        free(qd);
        free(kd);
        free(vd);
        free(sd);
        tl_free(m);
    }
}

/* Slotted attention, a call of attn per row against its slot's cache.
 * By hand: 2 slots of 2 rows, one head, D = 1, q = 1; row 0 in slot 1 at
 * position 1 (keys 0 and ln3, values 4 and 8), row 1 in slot 0 at
 * position 0 (key 0, value 5). Without sinks (4 + 3 * 8) / 4 = 7 and 5;
 * with the sink ln3, (4 + 24) / 7 = 4 and 5 / 4 = 1.25. Then the lowered
 * kernel against the reference: 3 slots of 40 rows, 8 query heads over
 * 2, rows at the ends of their caches and a slot twice, with and
 * without sinks and a window; a slot out of range refused at run time. */
static void attention_slotted(void **state)
{
    (void)state;
    float want[2][2] = {{7, 5}, {4, 1.25f}}, sink = LN3;
    for (int si = 0; si < 2; si++) {
        Module *m = tl_module();
        Node *q = tl_input(m, "q", DT_F32, TL_DIMS(2, 1, 1));
        Node *k = tl_input(m, "k", DT_F32, TL_DIMS(2, 2, 1, 1));
        Node *v = tl_input(m, "v", DT_F32, TL_DIMS(2, 2, 1, 1));
        Node *pos = tl_input(m, "pos", DT_I32, TL_DIMS(2));
        Node *sl = tl_input(m, "slots", DT_I32, TL_DIMS(2));
        Node *sk = tl_weight(m, "sinks", TL_DIMS(1));
        Node *a = si ? tl_op(m, OP_ATTENTION, "a", 6, q, k, v, pos, sl, sk)
                     : tl_op(m, OP_ATTENTION, "a", 5, q, k, v, pos, sl);
        assert_int_equal(tl_infer(m, a, NULL, 0), 0);
        tl_outputs(m, 1, a);
        float qd[2] = {1, 1}, kd[4] = {0, NAN, 0, LN3}, vd[4] = {5, NAN, 4, 8};
        int32_t pd[2] = {1, 0}, sd[2] = {1, 0};
        void *in[] = {qd, kd, vd, pd, sd}, *w[] = {&sink}, *out[1];
        tl_ref_ok(m, in, w, NULL, out);
        tl_assert_close(out[0], want[si], 2);
        free(out[0]);
        tl_check(m, in, w, 1e-6);
        tl_free(m);
    }
    for (int c = 0; c < 3; c++) {
        Module *m = tl_module();
        Node *q = tl_input(m, "q", DT_F32, TL_DIMS(4, 8, 16));
        Node *k = tl_input(m, "k", DT_F32, TL_DIMS(3, 40, 2, 16));
        Node *v = tl_input(m, "v", DT_F32, TL_DIMS(3, 40, 2, 16));
        Node *pos = tl_input(m, "pos", DT_I32, TL_DIMS(4));
        Node *sl = tl_input(m, "slots", DT_I32, TL_DIMS(4));
        Node *sk = tl_weight(m, "sinks", TL_DIMS(8));
        Node *a = c ? tl_op(m, OP_ATTENTION, "a", 6, q, k, v, pos, sl, sk)
                    : tl_op(m, OP_ATTENTION, "a", 5, q, k, v, pos, sl);
        if (c == 2)
            tl_attr_i(a, "window", 8);
        assert_int_equal(tl_infer(m, a, NULL, 0), 0);
        tl_outputs(m, 1, a);
        float *qd = tl_random(4 * 8 * 16, 1), *kd = tl_random(3 * 40 * 2 * 16, 2);
        float *vd = tl_random(3 * 40 * 2 * 16, 3), *skd = tl_random(8, 4);
        int32_t pd[4] = {39, 0, 17, 5}, sd[4] = {2, 0, 1, 2};
        void *in[] = {qd, kd, vd, pd, sd}, *w[] = {skd};
        tl_check(m, in, w, 1e-5);
        if (c == 1) {
            TlJit jt;
            tl_jit_open(&jt, m);
            sd[2] = 3;
            tl_jit_fails(&jt, in, "attention 'a': slot 3 is out of range [0, 3)");
            tl_jit_close(&jt);
        }
        free(qd);
        free(kd);
        free(vd);
        free(skd);
        tl_free(m);
    }
}

/* A long causal prefill: 300 rows over 300 keys, 5 blocks of keys (the
 * last of 44), 8 query heads over 2 kv heads, D = 64. */
static void attention_long_causal_prefill(void **state)
{
    (void)state;
    gqa_check(300, 300, 8, 2, 64, 1, 0);
}

/* Decode at the cache's last position: the query sees every row. GQA 8
 * over 2, and llama2.c's shape (6 heads, one per kv head, D = 48). */
static void attention_decode_last_position(void **state)
{
    (void)state;
    gqa_check(1, 300, 8, 2, 64, 1, 299);
    gqa_check(1, 256, 6, 6, 48, 1, 255);
}

/* Rows at an offset: 5 queries at pos 125 see keys 0..129 (not causal),
 * or 0..125+t (causal: the first three end in the second block of keys,
 * the last two in the third); rows from 130 on are NaN. */
static void attention_offset_not_causal(void **state)
{
    (void)state;
    gqa_check(5, 200, 6, 2, 48, 0, 125);
    gqa_check(5, 200, 6, 2, 48, 1, 125);
}

/* Scores far beyond what exp takes in f32 (exp(89) is inf): q holds
 * multiples of 64 and k integers, so every dot product is exact and
 * scores reach +-2048 (D = 64, scale 1/8); softmax must subtract the
 * running max, and rescale as it grows over the 3 blocks of keys. */
static void attention_large_scores(void **state)
{
    (void)state;
    Node *a;
    Module *m = gqa_model(150, 150, 4, 2, 64, 1, 0, &a);
    unsigned seed = 7;
    float *qd = tl_fill(150 * 4 * 64, &seed, 1), *kd = tl_fill(150 * 2 * 64, &seed, 1);
    float *vd = tl_random(150 * 2 * 64, 3);
    for (int i = 0; i < 150 * 4 * 64; i++)
        qd[i] *= 64;
    int32_t pos = 0;
    void *in[] = {qd, kd, vd, &pos};
    tl_check(m, in, NULL, 1e-5);
    free(qd);
    free(kd);
    free(vd);
    tl_free(m);
}

/* The running max across blocks, by hand: one query (q = 1, D = 1,
 * scale 1) at pos 129 over keys k_j = j or -j, values v_j = j, 130 keys in
 * blocks of 64, 64, 2. Weights go as e^(j - 129) or e^-j: out = 129 - c
 * or c, c = sum i e^-i / sum e^-i = 1 / (e - 1) = 0.5819767. With k_j = j
 * the max grows in every block and each rescales what came before. */
static void attention_online_rescale(void **state)
{
    (void)state;
    for (int up = 0; up < 2; up++) {
        Node *a;
        Module *m = gqa_model(1, 130, 1, 1, 1, 1, 0, &a);
        tl_attr_f(a, "scale", 1);
        float q = 1, kd[130], vd[130];
        for (int j = 0; j < 130; j++) {
            kd[j] = up ? (float)j : (float)-j;
            vd[j] = (float)j;
        }
        int32_t pos = 129;
        void *in[] = {&q, kd, vd, &pos}, *out[1];
        tl_ref_ok(m, in, NULL, NULL, out);
        float want = up ? 128.418023f : 0.581976707f;
        tl_assert_near(out[0], &want, 1);
        free(out[0]);
        tl_check(m, in, NULL, 1e-6);
        tl_free(m);
    }
}

/* No state grows with the heads or D: 300 query heads over one kv head
 * are one call (rt_attn takes them 64 at a time), and D = 16384 sums its
 * weighted values in the output rows. */
static void attention_state_bounds(void **state)
{
    (void)state;
    gqa_check(1, 64, 300, 1, 64, 1, 63);
    gqa_check(2, 3, 2, 1, 16384, 1, 1);
    Node *a;
    Module *m = gqa_model(1, 64, 300, 1, 64, 1, 0, &a);
    char *ir = tl_lowered(m, a);           /* one kv head: no loop; 300 heads, one call */
    tl_has_line(ir, "call attn(b3[0 +: 1, 0 +: 300, 0 +: 64], b4[0 +: 1, 0 +: 300, 0 +: 64], "
                    "b1[0 +: 64, 0 +: 1, 0 +: 64], b2[0 +: 64, 0 +: 1, 0 +: 64]; v0, 0, 0, "
                    "0.125, 0.0)");
    assert_null(strstr(ir, "local"));     /* no scratch of S, D or heads in the kernel */
    free(ir);
    tl_free(m);
}

/* Decode, one head: pos checked first, then one call of attn over the
 * 5 keys (hi 0: causal, keys 0 .. pos); no scratch buffer. */
static void attention_lowers(void **state)
{
    (void)state;
    Node *a;
    Module *m = attention_at_pos(1, 1, &a);
    char *ir = tl_lowered(m, a);
    tl_has_line(ir, "kernel k0 gqa_decode_h1_kv1_d4 (%4)");
    tl_has_line(ir, "# calls of attn: 1 row of 1 query head against blocks of keys, online "
                    "softmax");
    assert_null(strstr(ir, "temp :"));                             /* no scratch buffer */
    tl_has_line(ir, "let v0: i64 = b0[]");
    int check = tl_has_line(ir, "check v0 >= 0 && v0 <= 4 else \"attention 'attn': pos %lld is "
                                "out of range [0, 4] (queries T = 1, keys S = 5)\", v0");
    assert_true(check < tl_has_line(ir, "call attn(b3[0 +: 1, 0 +: 1, 0 +: 4], b4[0 +: 1, 0 +: "
                                        "1, 0 +: 4], b1[0 +: 5, 0 +: 1, 0 +: 4], b2[0 +: 5, 0 "
                                        "+: 1, 0 +: 4]; v0, 0, 0, 0.5, 0.0)"));
    free(ir);
    tl_free(m);

    /* GQA prefill without pos: per kv head g, its query heads 2g, 2g + 1
     * and all 3 rows in one call; keys below each row's own + 1 when
     * causal (hi 0), below T = 3 otherwise */
    m = gqa_prefill(1, &a);
    ir = tl_lowered(m, a);
    tl_has_line(ir, "kernel k0 gqa_prefill_causal_h4_kv2_d2 (%2)");
    tl_has_line(ir, "# calls of attn: 3 rows of 2 query heads against blocks of keys, online "
                    "softmax");
    tl_has_line(ir, "for i0 in 0..2");
    tl_has_line(ir, "call attn(b1[0 +: 3, i0 * 2 +: 2, 0 +: 2], b2[0 +: 3, i0 * 2 +: 2, 0 +: 2], "
                    "b0[0 +: 3, i0 +: 1, 0 +: 2], b0[0 +: 3, i0 +: 1, 0 +: 2]; 0, 0, 0, "
                    "0.707106769, 0.0)");                          /* 1/sqrt(2) */
    free(ir);
    tl_free(m);
    m = gqa_prefill(0, &a);
    ir = tl_lowered(m, a);
    tl_has_line(ir, "kernel k0 gqa_prefill_h4_kv2_d2 (%2)");
    tl_has_line(ir, "call attn(b1[0 +: 3, i0 * 2 +: 2, 0 +: 2], b2[0 +: 3, i0 * 2 +: 2, 0 +: 2], "
                    "b0[0 +: 3, i0 +: 1, 0 +: 2], b0[0 +: 3, i0 +: 1, 0 +: 2]; 0, 3, 0, "
                    "0.707106769, 0.0)");
    free(ir);
    tl_free(m);

    /* 70 rows of 2 heads at pos: blocks of 32 rows (64 query vectors a
     * call), two in a loop, then the 6 left */
    m = gqa_model(70, 200, 2, 1, 8, 1, 0, &a);
    ir = tl_lowered(m, a);
    tl_has_line(ir, "for i1 in 0..2");
    tl_has_line(ir, "call attn(b3[i1 * 32 +: 32, 0 +: 2, 0 +: 8], b4[i1 * 32 +: 32, 0 +: 2, 0 +: "
                    "8], b1[0 +: 200, 0 +: 1, 0 +: 8], b2[0 +: 200, 0 +: 1, 0 +: 8]; v0 + i1 * "
                    "32, 0, 0, 0.353553385, 0.0)");
    tl_has_line(ir, "call attn(b3[64 +: 6, 0 +: 2, 0 +: 8], b4[64 +: 6, 0 +: 2, 0 +: 8], b1[0 +: "
                    "200, 0 +: 1, 0 +: 8], b2[0 +: 200, 0 +: 1, 0 +: 8]; v0 + 64, 0, 0, "
                    "0.353553385, 0.0)");
    free(ir);
    tl_free(m);
    gqa_check(70, 200, 2, 1, 8, 1, 100);
}

/* ---- cache_write ------------------------------------------------------------ */

static void cache_write_infers(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *kc = tl_state(m, "kc", TL_DIMS(8, 2, 4));
    Node *nw = tl_input(m, "new", DT_F32, TL_DIMS(3, 2, 4));
    Node *pos = tl_input(m, "pos", DT_I32, 0, NULL);
    Node *w1 = tl_op(m, OP_CACHE_WRITE, "w1", 3, kc, nw, pos);
    tl_infer_ok(m, w1, "f32[8,2,4]");
    tl_infer_ok(m, tl_op(m, OP_CACHE_WRITE, "w2", 3, w1, nw, pos), "f32[8,2,4]");
    tl_free(m);
}

static void cache_write_refusals(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *kc = tl_state(m, "kc", TL_DIMS(8, 2, 4));
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(8, 2, 4));
    Node *nw = tl_input(m, "new", DT_F32, TL_DIMS(3, 2, 4));
    Node *n5 = tl_input(m, "n5", DT_F32, TL_DIMS(3, 2, 5));
    Node *n9 = tl_input(m, "n9", DT_F32, TL_DIMS(9, 2, 4));
    Node *pos = tl_input(m, "pos", DT_I32, 0, NULL);
    Node *fpos = tl_input(m, "fpos", DT_F32, 0, NULL);  /* %6 */
    tl_infer_err(m, tl_op(m, OP_CACHE_WRITE, "w", 3, x, nw, pos), 1,
                 "nodes[7].inputs[0]: cache_write: cache must be a state tensor, got 'x'");
    Node *sum = tl_op(m, OP_ADD, "sum", 2, kc, kc);
    assert_int_equal(tl_infer(m, sum, NULL, 0), 0);
    tl_infer_err(m, tl_op(m, OP_CACHE_WRITE, "w", 3, sum, nw, pos), 1,
                 "nodes[9].inputs[0]: cache_write: cache must be a state tensor, got 'sum'");
    tl_infer_err(m, tl_op(m, OP_CACHE_WRITE, "w", 3, kc, n5, pos), 1,
                 "nodes[10].inputs[1]: cache_write: new must be [T, 2, 4] to match cache "
                 "f32[8,2,4], got f32[3,2,5]");
    tl_infer_err(m, tl_op(m, OP_CACHE_WRITE, "w", 3, kc, n9, pos), 1,
                 "nodes[11].inputs[1]: cache_write: new has 9 rows, more than the 8 rows of "
                 "cache: new f32[9,2,4], cache f32[8,2,4]");
    tl_infer_err(m, tl_op(m, OP_CACHE_WRITE, "w", 3, kc, nw, fpos), 1,
                 "nodes[12].inputs[2]: cache_write needs i32 here, got f32[]");
    tl_free(m);
}

/* A decode step: k and v rows written at pos into caches kc, vc [4, 1, 2]
 * (states), then attention over the written caches ("a", through the
 * cache_write results) and over the states by name, after the writes
 * ("b", which must see them too). scale 1, causal. */
static Module *decode_model(void)
{
    Module *m = tl_module();
    Node *q = tl_input(m, "q", DT_F32, TL_DIMS(1, 1, 2));
    Node *kn = tl_input(m, "k", DT_F32, TL_DIMS(1, 1, 2));
    Node *vn = tl_input(m, "v", DT_F32, TL_DIMS(1, 1, 2));
    Node *pos = tl_input(m, "pos", DT_I32, 0, NULL);
    Node *kc = tl_state(m, "kc", TL_DIMS(4, 1, 2));
    Node *vc = tl_state(m, "vc", TL_DIMS(4, 1, 2));
    Node *kw = tl_op(m, OP_CACHE_WRITE, "kw", 3, kc, kn, pos);
    Node *vw = tl_op(m, OP_CACHE_WRITE, "vw", 3, vc, vn, pos);
    Node *a = tl_op(m, OP_ATTENTION, "a", 4, q, kw, vw, pos);
    Node *b = tl_op(m, OP_ATTENTION, "b", 4, q, kc, vc, pos);
    tl_attr_f(a, "scale", 1);
    tl_attr_f(b, "scale", 1);
    Node *ops[] = {kw, vw, a, b};
    for (int i = 0; i < 4; i++)
        assert_int_equal(tl_infer(m, ops[i], NULL, 0), 0);
    tl_outputs(m, 2, a, b);
    return m;
}

/* Two decode steps. Step 0 at pos 0: key [0, 0], value [4, 8]; one key:
 * out = value. Step 1 at pos 1: key [ln3, 0], value [8, 4]; q . k = 0
 * and ln3 give weights 1/4, 3/4: [4, 8] / 4 + 3 [8, 4] / 4 = [7, 5]. */
static float step_q[2] = {1, 0};
static float step_k[2][2] = {{0, 0}, {LN3, 0}}, step_v[2][2] = {{4, 8}, {8, 4}};
static int32_t step_pos[2] = {0, 1};
static float step_want[2][2] = {{4, 8}, {7, 5}};

static void cache_write_then_attention(void **state)
{
    (void)state;
    Module *m = decode_model();
    float kcache[8] = {0}, vcache[8] = {0};
    void *st[] = {kcache, vcache}, *out[2];
    for (int i = 0; i < 2; i++) {
        void *in[] = {step_q, step_k[i], step_v[i], &step_pos[i]};
        tl_ref_ok(m, in, NULL, st, out);
        tl_assert_close(out[0], step_want[i], 2);
        tl_assert_close(out[1], step_want[i], 2);
        free(out[0]);
        free(out[1]);
    }
    /* the states hold both rows, written in place */
    float kwant[8] = {0, 0, LN3, 0, 0, 0, 0, 0}, vwant[8] = {4, 8, 8, 4, 0, 0, 0, 0};
    assert_memory_equal(kcache, kwant, sizeof kwant);
    assert_memory_equal(vcache, vwant, sizeof vwant);

    /* the JIT build, whose states live across runs too */
    TlJit jt;
    tl_jit_open(&jt, m);
    for (int i = 0; i < 2; i++) {
        void *in[] = {step_q, step_k[i], step_v[i], &step_pos[i]};
        float a[2], b[2];
        void *outs[] = {a, b};
        assert_int_equal(jt.md->run(jt.h, (const void *const *)in, outs), RT_OK);
        tl_assert_close(a, step_want[i], 2);
        tl_assert_close(b, step_want[i], 2);
    }
    tl_jit_close(&jt);
    tl_free(m);
}

/* Step 1 alone, from zero states (what tl_check runs). */
static void cache_write_agrees(void **state)
{
    (void)state;
    Module *m = decode_model();
    void *in[] = {step_q, step_k[1], step_v[1], &step_pos[1]};
    tl_check(m, in, NULL, 1e-5);
    tl_free(m);
}

static void cache_write_pos_out_of_range(void **state)
{
    (void)state;
    Module *m = decode_model();
    float kcache[8] = {0}, vcache[8] = {0}, x[2] = {1, 2};
    int32_t pos = 4;
    void *st[] = {kcache, vcache}, *in[] = {x, x, x, &pos};
    tl_ref_fails(m, in, NULL, st,
              "node 'kw': cache_write: pos 4 is out of range [0, 3] (new rows T = 1, "
              "cache rows S = 4)");
    TlJit jt;
    tl_jit_open(&jt, m);
    tl_jit_fails(&jt, in, "cache_write 'kw': pos 4 is out of range [0, 3] "
                 "(new rows T = 1, cache rows S = 4)");
    tl_jit_close(&jt);
    tl_free(m);
}

static void cache_write_lowers(void **state)
{
    (void)state;
    Module *m = decode_model();
    Node *kw = m->nodes[6];
    char *ir = tl_lowered(m, kw);
    tl_has_line(ir, "buf b2 state 0 %4 : f32[4,1,2]");
    tl_has_line(ir, "kernel k0 cache_write_s4_h1_d2 (%6)");
    tl_has_line(ir, "let v0: i64 = b0[]");
    tl_has_line(ir, "check v0 >= 0 && v0 <= 3 else \"cache_write 'kw': pos %lld is out of range "
                    "[0, 3] (new rows T = 1, cache rows S = 4)\", v0");
    tl_has_line(ir, "b2[v0 + i1, i2, i3] = b1[i1, i2, i3]");
    assert_ptr_equal(kw->buf, m->nodes[4]->buf);          /* the state's own buffer */
    free(ir);
    tl_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(attention_infers),
        cmocka_unit_test(attention_refusals),
        cmocka_unit_test(attention_gqa_heads),
        cmocka_unit_test(attention_causal_or_not),
        cmocka_unit_test(attention_decode_at_pos),
        cmocka_unit_test(attention_prefill_at_pos),
        cmocka_unit_test(attention_random),
        cmocka_unit_test(attention_pos_out_of_range),
        cmocka_unit_test(attention_long_causal_prefill),
        cmocka_unit_test(attention_decode_last_position),
        cmocka_unit_test(attention_offset_not_causal),
        cmocka_unit_test(attention_large_scores),
        cmocka_unit_test(attention_online_rescale),
        cmocka_unit_test(attention_softcap),
        cmocka_unit_test(attention_window),
        cmocka_unit_test(attention_sinks),
        cmocka_unit_test(attention_slotted),
        cmocka_unit_test(attention_state_bounds),
        cmocka_unit_test(attention_lowers),
        cmocka_unit_test(cache_write_infers),
        cmocka_unit_test(cache_write_refusals),
        cmocka_unit_test(cache_write_then_attention),
        cmocka_unit_test(cache_write_agrees),
        cmocka_unit_test(cache_write_pos_out_of_range),
        cmocka_unit_test(cache_write_lowers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
