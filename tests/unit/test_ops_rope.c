/* tests/unit/test_ops_rope.c: rope, plain (half and interleaved pairs,
 * partial rotary_dim) and with Llama 3.1's and YaRN's scaling: shape inference
 * (every refusal word for word), the reference against values worked out
 * by hand, far positions within tolerance, key lines of the lowered loop
 * IR, and the lowered program compiled by libtcc against the reference
 * (tl_check). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testlib.h"

#include <math.h>
#include <stdlib.h>

static void rope_infers(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 8));
    Node *pos = tl_input(m, "pos", DT_I32, TL_DIMS(2));
    tl_infer_ok(m, tl_op(m, OP_ROPE, "r", 2, x, pos), "f32[2,3,8]");
    Node *r = tl_op(m, OP_ROPE, "r", 2, x, pos);
    tl_attr_i(r, "rotary_dim", 2);
    tl_attr_i(r, "style", 1);
    tl_infer_ok(m, r, "f32[2,3,8]");
    tl_free(m);
}

static void rope_refusals(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 8));
    Node *x2 = tl_input(m, "x2", DT_F32, TL_DIMS(2, 8));
    Node *odd = tl_input(m, "odd", DT_F32, TL_DIMS(2, 3, 5));
    Node *pos = tl_input(m, "pos", DT_I32, TL_DIMS(2));
    Node *fpos = tl_input(m, "fpos", DT_F32, TL_DIMS(2));
    Node *pos3 = tl_input(m, "pos3", DT_I32, TL_DIMS(3));
    tl_infer_err(m, tl_op(m, OP_ROPE, "r", 2, x2, pos), 1,
                 "nodes[6].inputs[0]: rope needs rank 3 here, got f32[2,8]");
    tl_infer_err(m, tl_op(m, OP_ROPE, "r", 2, x, fpos), 1,
                 "nodes[7].inputs[1]: rope needs i32 here, got f32[2]");
    tl_infer_err(m, tl_op(m, OP_ROPE, "r", 2, x, pos3), 1,
                 "nodes[8].inputs[1]: rope: positions must be i32[2] to match x f32[2,3,8], "
                 "got i32[3]");
    tl_infer_err(m, tl_op(m, OP_ROPE, "r", 2, odd, pos), 1,
                 "nodes[9].inputs[0]: rope: x f32[2,3,5] has an odd last dimension; give an even "
                 "rotary_dim below it");
    Node *r = tl_op(m, OP_ROPE, "r", 2, x, pos);
    tl_attr_f(r, "theta", 0);
    tl_infer_err(m, r, 1, "nodes[10].attrs.theta: rope: theta must be a positive number, got 0");
    r = tl_op(m, OP_ROPE, "r", 2, x, pos);
    tl_attr_i(r, "scaling", 1);
    tl_attr_f(r, "factor", 0.5);
    tl_infer_err(m, r, 1, "nodes[11].attrs.factor: rope: factor must be a number >= 1, got 0.5");
    r = tl_op(m, OP_ROPE, "r", 2, x, pos);
    tl_attr_i(r, "scaling", 1);
    tl_attr_f(r, "high_freq_factor", 1);
    tl_infer_err(m, r, 1, "nodes[12].attrs.high_freq_factor: rope: low_freq_factor 1 and "
                          "high_freq_factor 1 must be 0 < low < high");
    r = tl_op(m, OP_ROPE, "r", 2, x, pos);
    tl_attr_i(r, "scaling", 2);
    tl_attr_f(r, "beta_fast", 0.5);
    tl_infer_err(m, r, 1, "nodes[13].attrs.beta_fast: rope: beta_slow 1 and beta_fast 0.5 "
                          "must be 0 < beta_slow < beta_fast");
    r = tl_op(m, OP_ROPE, "r", 2, x, pos);
    tl_attr_i(r, "scaling", 2);
    tl_attr_f(r, "attention_factor", -1);
    tl_infer_err(m, r, 1, "nodes[14].attrs.attention_factor: rope: attention_factor must be >= 0 "
                          "(0: 0.1 ln(factor) + 1), got -1");
    static const int64_t bad_dims[] = {3, 10, -2};
    for (int i = 0; i < 3; i++) {
        r = tl_op(m, OP_ROPE, "r", 2, x, pos);
        tl_attr_i(r, "rotary_dim", bad_dims[i]);
        char want[200];
        snprintf(want, sizeof want, "nodes[%d].attrs.rotary_dim: rope: rotary_dim must be even "
                 "and in [2, 8] for x f32[2,3,8], got %lld", r->id, (long long)bad_dims[i]);
        tl_infer_err(m, r, 1, want);
    }
    tl_free(m);
}

/* x [2, 1, 6] = token 0: anything, token 1: 1..6; positions {0, 2};
 * theta = 100, rotary_dim = 4: pair 0 turns by pos * 1, pair 1 by
 * pos * 100^(-2/4) = pos * 0.1. At position 2 (token 1):
 *   c0 = cos 2 = -0.41614684, s0 = sin 2 = 0.90929743,
 *   c1 = cos 0.2 = 0.98006658, s1 = sin 0.2 = 0.19866933. */
static Module *rope_model(int style, Node **r)
{
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 1, 6));
    Node *pos = tl_input(m, "pos", DT_I32, TL_DIMS(2));
    *r = tl_op(m, OP_ROPE, "r", 2, x, pos);
    tl_attr_f(*r, "theta", 100);
    tl_attr_i(*r, "rotary_dim", 4);
    tl_attr_i(*r, "style", style);
    assert_int_equal(tl_infer(m, *r, NULL, 0), 0);
    tl_outputs(m, 1, *r);
    return m;
}

static float rope_x[12] = {7, -8, 9, -1, 2, 3, 1, 2, 3, 4, 5, 6};
static int32_t rope_pos[2] = {0, 2};

static void rope_half_by_hand(void **state)
{
    (void)state;
    Node *r;
    Module *m = rope_model(0, &r);
    void *in[] = {rope_x, rope_pos}, *out[1];
    tl_ref_ok(m, in, NULL, NULL, out);
    float want[12] = {
        7, -8, 9, -1, 2, 3,          /* position 0: no turn */
        -3.14403912f,                /* x0 c0 - x2 s0 = -0.41614684 - 3 * 0.90929743 */
        1.16545583f,                 /* x1 c1 - x3 s1 = 2 * 0.98006658 - 4 * 0.19866933 */
        -0.339143083f,               /* x2 c0 + x0 s0 = 3 * -0.41614684 + 0.90929743 */
        4.31760497f,                 /* x3 c1 + x1 s1 = 4 * 0.98006658 + 2 * 0.19866933 */
        5, 6,                        /* past rotary_dim: unchanged */
    };
    tl_assert_close(out[0], want, 12);
    free(out[0]);
    tl_check(m, in, NULL, 1e-5);
    tl_free(m);
}

static void rope_interleaved_by_hand(void **state)
{
    (void)state;
    Node *r;
    Module *m = rope_model(1, &r);
    void *in[] = {rope_x, rope_pos}, *out[1];
    tl_ref_ok(m, in, NULL, NULL, out);
    float want[12] = {
        7, -8, 9, -1, 2, 3,
        -2.23474169f,                /* x0 c0 - x1 s0 = -0.41614684 - 2 * 0.90929743 */
        0.0770037537f,               /* x1 c0 + x0 s0 = 2 * -0.41614684 + 0.90929743 */
        2.14552241f,                 /* x2 c1 - x3 s1 = 3 * 0.98006658 - 4 * 0.19866933 */
        4.5162743f,                  /* x3 c1 + x2 s1 = 4 * 0.98006658 + 3 * 0.19866933 */
        5, 6,
    };
    tl_assert_close(out[0], want, 12);
    free(out[0]);
    tl_check(m, in, NULL, 1e-5);
    tl_free(m);
}

/* Llama 3.1's scaling: rotary_dim 8, theta 10000, so f_i = 1, 0.1, 0.01,
 * 0.001 and wavelengths 2pi / f_i = 6.28, 62.8, 628.3, 6283.2; original
 * context 1024, low_freq_factor 1, high_freq_factor 4, factor 8, so
 * wavelengths under 1024 / 4 = 256 keep f (pairs 0, 1), over 1024 / 1
 * divide it by 8 (pair 3: 0.000125), and pair 2 blends: s = (1024 /
 * 628.3185 - 1) / 3 = 0.2099155, f = (1 - s) 0.01 / 8 + s 0.01 =
 * 0.00308676. x = 1 in the first half, 0 in the second, at position 100:
 * out = cos, then sin, of 100, 10, 0.308676, 0.0125. */
static void rope_llama3_by_hand(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(1, 1, 8));
    Node *pos = tl_input(m, "pos", DT_I32, TL_DIMS(1));
    Node *r = tl_op(m, OP_ROPE, "r", 2, x, pos);
    tl_attr_i(r, "scaling", 1);
    tl_attr_i(r, "original_max_position_embeddings", 1024);
    assert_int_equal(tl_infer(m, r, NULL, 0), 0);
    tl_outputs(m, 1, r);
    float xd[8] = {1, 1, 1, 1, 0, 0, 0, 0};
    int32_t pd[1] = {100};
    void *in[] = {xd, pd}, *out[1];
    tl_ref_ok(m, in, NULL, NULL, out);
    float want[8] = {0.862318872f,  -0.839071529f, 0.952736603f, 0.999921876f,
                     -0.506365641f, -0.544021111f, 0.303797572f, 0.0124996745f};
    tl_assert_close(out[0], want, 8);
    free(out[0]);
    tl_check(m, in, NULL, 1e-5);
    tl_free(m);
}

/* YaRN (gpt-oss's rope_scaling): rd = D = 4, theta = e, factor 4, L = 64,
 * pos 1, x = 1 in the first half. d(r) = rd ln(L / (2pi r)) / (2 ln
 * theta) = 2 ln(64 / (2pi r)): beta_fast = 64 / 2pi gives lo = d = 0,
 * beta_slow = 64 / (2pi e^0.75) gives hi = 1.5. Pair 0 keeps f = 1 (ramp
 * 0); pair 1, ramp 1 / 1.5 = 2/3, is f = e^-0.5 (2/3 / 4 + 1/3) =
 * 0.30326533; truncated, hi = ceil(1.5) = 2, ramp 1/2: e^-0.5 (1/8 + 1/2)
 * = 0.37908166. cos and sin times 0.1 ln 4 + 1 = 1.13862944:
 *   out = ms [cos 1, cos f1, sin 1, sin f1]. */
static void rope_yarn_by_hand(void **state)
{
    (void)state;
    float want[2][4] = {{0.61520411f, 1.08666971f, 0.95812363f, 0.34003815f},
                        {0.61520411f, 1.05779230f, 0.95812363f, 0.42136973f}};
    for (int trunc = 0; trunc < 2; trunc++) {
        Module *m = tl_module();
        Node *x = tl_input(m, "x", DT_F32, TL_DIMS(1, 1, 4));
        Node *pos = tl_input(m, "pos", DT_I32, TL_DIMS(1));
        Node *r = tl_op(m, OP_ROPE, "r", 2, x, pos);
        tl_attr_f(r, "theta", M_E);
        tl_attr_i(r, "scaling", 2);
        tl_attr_f(r, "factor", 4);
        tl_attr_i(r, "original_max_position_embeddings", 64);
        tl_attr_f(r, "beta_fast", 64 / (2 * M_PI));
        tl_attr_f(r, "beta_slow", 64 / (2 * M_PI * exp(0.75)));
        tl_attr_i(r, "truncate", trunc);
        assert_int_equal(tl_infer(m, r, NULL, 0), 0);
        tl_outputs(m, 1, r);
        float xd[4] = {1, 1, 0, 0};
        int32_t pd[1] = {1};
        void *in[] = {xd, pd}, *out[1];
        tl_ref_ok(m, in, NULL, NULL, out);
        tl_assert_close(out[0], want[trunc], 4);
        free(out[0]);
        tl_check(m, in, NULL, 1e-5);
        tl_free(m);
    }
    /* attention_factor given replaces 0.1 ln(factor) + 1 */
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(1, 1, 2));
    Node *pos = tl_input(m, "pos", DT_I32, TL_DIMS(1));
    Node *r = tl_op(m, OP_ROPE, "r", 2, x, pos);
    tl_attr_i(r, "scaling", 2);
    tl_attr_f(r, "attention_factor", 2);
    assert_int_equal(tl_infer(m, r, NULL, 0), 0);
    tl_outputs(m, 1, r);
    float xd[2] = {1, 0}, want2[2] = {2 * 0.54030231f, 2 * 0.84147098f};
    int32_t pd[1] = {1};
    void *in[] = {xd, pd}, *out[1];
    tl_ref_ok(m, in, NULL, NULL, out);          /* pair 0: f = 1 whatever the ramp */
    tl_assert_close(out[0], want2, 2);
    free(out[0]);
    tl_free(m);
}

/* gpt-oss's shape on pseudo-random data: head dim 64, theta 150000,
 * factor 32, L 4096, positions up to 3000: lowered against the
 * reference. */
static void rope_yarn_random(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(16, 2, 64));
    Node *pos = tl_input(m, "pos", DT_I32, TL_DIMS(16));
    Node *r = tl_op(m, OP_ROPE, "r", 2, x, pos);
    tl_attr_f(r, "theta", 150000);
    tl_attr_i(r, "scaling", 2);
    tl_attr_f(r, "factor", 32);
    tl_attr_i(r, "original_max_position_embeddings", 4096);
    tl_attr_i(r, "truncate", 0);
    assert_int_equal(tl_infer(m, r, NULL, 0), 0);
    tl_outputs(m, 1, r);
    float *xd = tl_random(16 * 2 * 64, 5);
    int32_t pd[16];
    for (int t = 0; t < 16; t++)
        pd[t] = 187 * t;
    void *in[] = {xd, pd};
    tl_check(m, in, NULL, 1e-4);
    free(xd);
    tl_free(m);
}

/* Far positions stay within kiln's tolerance (1e-4 of the largest output):
 * 16 tokens at positions around 2000 and 4000, head dim 128 rotated in
 * full, Llama's theta. An angle computed as f32(pos) * f32(inv_freq) is off
 * by up to 2e-4 rad here; lower_rope's fixed-point turns by 1e-5. */
static void rope_far_positions(void **state)
{
    (void)state;
    for (int style = 0; style < 2; style++) {
        Module *m = tl_module();
        Node *x = tl_input(m, "x", DT_F32, TL_DIMS(16, 2, 128));
        Node *pos = tl_input(m, "pos", DT_I32, TL_DIMS(16));
        Node *r = tl_op(m, OP_ROPE, "r", 2, x, pos);
        tl_attr_i(r, "style", style);
        assert_int_equal(tl_infer(m, r, NULL, 0), 0);
        tl_outputs(m, 1, r);
        float *xd = tl_random(16 * 2 * 128, 11);
        int32_t pd[16];
        for (int t = 0; t < 16; t++)
            pd[t] = (t < 8 ? 2000 : 4000) + 13 * t;
        void *in[] = {xd, pd};
        tl_check(m, in, NULL, 1e-4);
        free(xd);
        tl_free(m);
    }
}

/* The angle of pair i is (pos * turns[i] mod 2^31) * 2pi / 2^31, turns[i]
 * = round(frac(theta^(-2i/rd) / 2pi) * 2^31): with theta = 100, rd = 4,
 * turns[0] = round(0.15915494 * 2^31) = 341782638 and turns[1] =
 * round(0.015915494 * 2^31) = 34178264. */
static void rope_lowers(void **state)
{
    (void)state;
    Node *r;
    Module *m = rope_model(0, &r);
    char *ir = tl_lowered(m, r);
    tl_has_line(ir, "kernel k0 rope_h1_d6 (%2)");
    tl_has_line(ir, "buf b0 temp : i32[2]");                       /* turns */
    tl_has_line(ir, "b0[0] = 341782638");
    tl_has_line(ir, "b0[1] = 34178264");
    tl_has_line(ir, "let v1: i64 = b2[i0]");
    tl_has_line(ir, "local b3");                                   /* a position's cos */
    tl_has_line(ir, "for i2 in 0..2");
    /* 2pi / 2^31 as f32 */
    tl_has_line(ir, "let v3: f32 = f32(v1 * b0[i2] % 2147483648) * 2.92583624e-09");
    tl_has_line(ir, "b3[i2] = cos(v3)");
    tl_has_line(ir, "b4[i2] = sin(v3)");
    tl_has_line(ir, "for i4 in 0..1");                             /* then every head */
    tl_has_line(ir, "let v6: f32 = b3[i5]");
    tl_has_line(ir, "let v7: f32 = b4[i5]");
    tl_has_line(ir, "let v8: f32 = b5[i0, i4, i5]");
    tl_has_line(ir, "let v9: f32 = b5[i0, i4, i5 + 2]");
    tl_has_line(ir, "b1[i0, i4, i5] = v8 * v6 - v9 * v7");
    tl_has_line(ir, "b1[i0, i4, i5 + 2] = v9 * v6 + v8 * v7");
    tl_has_line(ir, "for i10 in 4..6");
    tl_has_line(ir, "b1[i0, i4, i10] = b5[i0, i4, i10]");
    free(ir);
    tl_free(m);

    m = rope_model(1, &r);
    ir = tl_lowered(m, r);
    tl_has_line(ir, "let v8: f32 = b5[i0, i4, 2 * i5]");
    tl_has_line(ir, "let v9: f32 = b5[i0, i4, 2 * i5 + 1]");
    tl_has_line(ir, "b1[i0, i4, 2 * i5] = v8 * v6 - v9 * v7");
    tl_has_line(ir, "b1[i0, i4, 2 * i5 + 1] = v9 * v6 + v8 * v7");
    free(ir);
    tl_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rope_infers),
        cmocka_unit_test(rope_refusals),
        cmocka_unit_test(rope_half_by_hand),
        cmocka_unit_test(rope_interleaved_by_hand),
        cmocka_unit_test(rope_llama3_by_hand),
        cmocka_unit_test(rope_yarn_by_hand),
        cmocka_unit_test(rope_yarn_random),
        cmocka_unit_test(rope_far_positions),
        cmocka_unit_test(rope_lowers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
