/* tests/unit/test_vec.c: the JIT's vector programs (codegen/vec.c,
 * runtime/jit/rt_vec.c). Each case is a kernel written as .kir text that
 * computes its graph's op (y = reduce_sum(x) over rows, or y = exp(x)):
 * the JIT build must agree with the reference, and the nests that qualify
 * go through rt_vec while those a block could get wrong (an element
 * stored by one iteration and read by a later one) stay scalar C. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kiln_rt.h"

/* x f32[8,64] in; y f32[8] = row sums (y = exp(x): tl_exp_kir_head); b2 a temp of
 * 600 floats, b3 a local f32[64], b4 a weight f32[64] held as bf16. */
static const char sum_head[] =
    "graph t\n"
    "  input  %0 \"x\" : f32[8,64]\n"
    "  %1 \"y\" = reduce_sum %0 {axes=[-1], keepdims=false} : f32[8]\n"
    "  output %1\n"
    "prog t\n"
    "  buf b0 input 0 %0 : f32[8,64]\n"
    "  buf b1 output 0 %1 : f32[8]\n"
    "  buf b2 temp : f32[600] @0\n"
    "  buf b3 local : f32[64]\n"
    "  arena 2432\n"
    "  kernel k0 t (%1)\n";

static int count(const char *text, const char *part)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, part)); p++)
        n++;
    return n;
}

/* The kernel body under head: the JIT's C calls rt_vec `calls` times, and
 * its outputs agree with the reference on random x (to 1e-6). */
static void kernel(const char *head, const char *body, int calls)
{
    Arena *a = arena_new();
    char text[8192];
    snprintf(text, sizeof text, "%s%s", head, body);
    Diags d;
    diag_init(&d, a, "t.kir");
    Module *m = ir_parse(a, "t.kir", text, &d);
    if (!m) {
        diag_print(&d, stderr);
        fail_msg("the test's kernel does not parse:\n%s", body);
    }
    const char *c = cg_emit_string(m, CG_JIT);
    if (count(c, "rt_vec(vc") != calls)
        fail_msg("%d rt_vec calls, not %d, in\n%s", count(c, "rt_vec(vc"), calls, c);
    float *x = tl_random(8 * 64, 7);
    void *in[] = {x};
    tl_check(m, in, NULL, 1e-6);
    free(x);
    arena_free(a);
}

/* A sum into a scalar from outside: folded in loop order. */
static void sum_into_scalar(void **state)
{
    (void)state;
    kernel(sum_head,
           "    for i0 in 0..8\n"
           "      let v1: f32 = 0.0\n"
           "      for i2 in 0..64 reduce\n"
           "        v1 += b0[i0, i2]\n"
           "      b1[i0] = v1\n",
           1);
}

/* The whole nest at once: rows and columns, a sum stored in place (a
 * store that does not move along the last level). */
static void sum_stored_in_place(void **state)
{
    (void)state;
    kernel(sum_head,
           "    for i0 in 0..8\n"
           "      b1[i0] = 0.0\n"
           "    for i1 in 0..8\n"
           "      for i2 in 0..64\n"
           "        b1[i1] += b0[i1, i2]\n",
           1);
}

/* Lanes: a 2-level reduction into a local, summed in order after. */
static void sum_by_lanes(void **state)
{
    (void)state;
    kernel(sum_head,
           "    for i0 in 0..8\n"
           "      let v1: f32 = 0.0\n"
           "      local b3\n"
           "      for i2 in 0..32 vector\n"
           "        b3[i2] = 0.0\n"
           "      for i3 in 0..2 reduce\n"
           "        for i4 in 0..32 vector\n"
           "          b3[i4] += b0[i0, i3 * 32 + i4]\n"
           "      for i5 in 0..32 reduce\n"
           "        v1 += b3[i5]\n"
           "      b1[i0] = v1\n",
           3);
}

/* A running sum through a temp: iteration i2 reads what i2 - 1 stored,
 * which a block would read before it is stored. Stays scalar. */
static void prefix_stays_scalar(void **state)
{
    (void)state;
    kernel(sum_head,
           "    for i0 in 0..8\n"
           "      b2[0] = 0.0\n"
           "      for i2 in 0..64\n"
           "        b2[i2 + 1] = b2[i2] + b0[i0, i2]\n"
           "      b1[i0] = b2[64]\n",
           0);
}

/* A read of what the same iteration stored, through the same access, is
 * allowed (blocks of one row); through another access it is not. */
static void read_back(void **state)
{
    (void)state;
    kernel(tl_exp_kir_head,
           "    for i0 in 0..8\n"
           "      for i1 in 0..64\n"
           "        b1[i0, i1] = b0[i0, i1]\n"
           "        b1[i0, i1] = exp(b1[i0, i1])\n",
           1);
    kernel(tl_exp_kir_head,
           "    for i0 in 0..8\n"
           "      for i1 in 0..64\n"
           "        b1[i0, i1] = exp(b0[i0, i1])\n"
           "    for i2 in 0..8\n"
           "      for i3 in 1..64\n"
           "        b1[i2, i3] = exp(b0[i2, i3]) + (b1[i2, i3 - 1] - b1[i2, i3 - 1])\n",
           1);
}

/* Lets, invariants, selects and comparisons: exp(x) built the long way,
 * with a row's invariant scalar (v1 = 1.0) hoisted by the glue. */
static void lets_and_selects(void **state)
{
    (void)state;
    kernel(tl_exp_kir_head,
           "    for i0 in 0..8\n"
           "      let v1: f32 = 1.0\n"
           "      for i2 in 0..64\n"
           "        let v3: f32 = b0[i0, i2] * v1\n"
           "        let v4: f32 = v3 < 0.0 ? exp(v3) : exp(max(v3, 0.0))\n"
           "        v4 += 0.0\n"
           "        b1[i0, i2] = v4\n",
           1);
}

/* Integer arithmetic on a nest variable stays scalar. */
static void integers_stay_scalar(void **state)
{
    (void)state;
    kernel(tl_exp_kir_head,
           "    for i0 in 0..8\n"
           "      for i1 in 0..64\n"
           "        b1[i0, i1] = exp(b0[i0, i1] + (f32(i1) - f32(i1)))\n",
           0);
}

/* Transposed and strided reads: any constant stride. */
static void strided_reads(void **state)
{
    (void)state;
    kernel(tl_exp_kir_head,
           "    for i0 in 0..64\n"
           "      for i1 in 0..8\n"
           "        b2[i0 * 8 + i1] = b0[i1, i0]\n"
           "    for i2 in 0..8\n"
           "      for i3 in 0..64\n"
           "        b1[i2, i3] = exp(b2[i3 * 8 + i2])\n",
           2);
}

/* Nests too small to pay for a call stay scalar. */
static void small_nests_stay_scalar(void **state)
{
    (void)state;
    kernel(tl_exp_kir_head,
           "    for i0 in 0..8\n"
           "      for i1 in 0..8\n"
           "        for i2 in 0..8\n"
           "          b1[i0, i1 * 8 + i2] = exp(b0[i0, i1 * 8 + i2])\n",
           1);
    kernel(tl_exp_kir_head,
           "    for i0 in 0..8\n"
           "      for i1 in 0..8\n"
           "        b1[i0, i1 * 8] = 0.0\n"
           "        for i3 in 0..8\n"
           "          b1[i0, i1 * 8 + i3] = exp(b0[i0, i1 * 8 + i3])\n",
           0);
}

/* Lets before an inner loop are computed where they are used (per
 * element) unless they read storage the nest stores to. */
static void outer_lets(void **state)
{
    (void)state;
    kernel(tl_exp_kir_head,
           "    for i0 in 0..8\n"
           "      for i1 in 0..64\n"
           "        let v2: f32 = b0[i0, i1]\n"
           "        let v3: f32 = exp(v2)\n"
           "        for i4 in 0..1\n"
           "          b1[i0, i1 + i4] = v3\n",
           1);
    kernel(tl_exp_kir_head,
           "    for i0 in 0..8\n"
           "      for i1 in 0..64\n"
           "        b1[i0, i1] = exp(b0[i0, i1])\n"
           "    for i2 in 0..8\n"
           "      for i3 in 0..64\n"
           "        let v4: f32 = b1[i2, 0]\n"
           "        for i5 in 0..1\n"
           "          b1[i2, i3 + i5] = exp(b0[i2, i3]) + (v4 - v4)\n",
           1);
    /* an outer let of one value: v2 * 0.5 has two one-value operands */
    kernel(tl_exp_kir_head,
           "    for i0 in 0..8\n"
           "      for i1 in 0..64\n"
           "        let v2: f32 = 2.0\n"
           "        for i3 in 0..1\n"
           "          b1[i0, i1 + i3] = exp(b0[i0, i1]) + (v2 * 0.5 - 1.0)\n",
           1);
}

/* ---- two instructions done in one loop (rt_vec.c's vec_fusable) ------- */
/* Programs written by hand (kiln_rt.h documents the layout), run on rows
 * of 32 and compared bit for bit with the loops they stand for: fused or
 * not, every element goes through the same operations. */

/* lanes[j] += t * t (op 3) or t (op 1) over R rows, t = x op s (SUB,
 * ADD, MUL); `later`: a sum of t into *red after the store, which reads
 * t's register, so that the op cannot be left to the store. */
static void lanes_case(int op, int st, int later)
{
    enum { R = 40, C = 32 };
    float x[R * C], lanes[C], want[C], red = 0.0f, want_red = 0.0f, s = 0.375f;
    float *xr = tl_random(R * C, 11);
    memcpy(x, xr, sizeof x);
    free(xr);
    for (int j = 0; j < C; j++)
        lanes[j] = want[j] = 0.25f * (float)j;
    int64_t code[] = {2, 3, RT_VEC_REGS, later ? 5 : 4, 0,
                      RT_F32, C, 1,           /* x */
                      RT_F32, 0, 1,           /* lanes: every row the same place */
                      RT_F32, 0, 0,           /* red */
                      RT_V_LD, 0, 0, 0, 0,
                      RT_V_SCAL, 15, 0, 0, 0,
                      op, 0, 0, 15, 0,
                      RT_V_ST, 0, 1, 0, st,
                      RT_V_RED, 0, 2, 0, 1};
    void *const ptr[] = {x, lanes, &red};
    const float scal[] = {s};
    const int64_t n[] = {R, C};
    rt_vec(code, ptr, scal, n);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < C; j++) {
            float v = x[r * C + j];
            float t = op == RT_V_SUB ? v - s : op == RT_V_ADD ? v + s : v * s;
            want[j] = st == 3 ? fmaf(t, t, want[j]) : want[j] + t;
            if (later)
                want_red += t;
        }
    assert_memory_equal(lanes, want, sizeof want);
    assert_true(red == want_red);
}

static void fused_into_lanes(void **state)
{
    (void)state;
    const int ops[] = {RT_V_SUB, RT_V_ADD, RT_V_MUL};
    for (int i = 0; i < 3; i++)
        for (int later = 0; later < 2; later++) {
            lanes_case(ops[i], 3, later);
            lanes_case(ops[i], 1, later);
        }
}

/* y = fma((x - s0) * s1, g, b) over N elements: the pair's register is
 * x's (as codegen writes a norm's last nest), the result goes straight to
 * y (RT_V_OUT); `keep`: the pair is also stored to z after the
 * multiply-add, which reads its register, so it must be computed. */
static void pair_case(int64_t N, int keep)
{
    float *x = tl_random(N, 12), *g = tl_random(N, 13), *b = tl_random(N, 14);
    float *y = calloc((size_t)N, sizeof *y), *z = calloc((size_t)N, sizeof *z);
    float s0 = 0.125f, s1 = 1.75f;
    assert_non_null(y);
    assert_non_null(z);
    int r = keep ? 3 : 0;         /* the multiply-add's register */
    int64_t code[] = {1, 5, RT_VEC_REGS, keep ? 10 : 9, 0,
                      RT_F32, 1, RT_F32, 1, RT_F32, 1, RT_F32, 1, RT_F32, 1,
                      RT_V_LD, 0, 0, 0, 0,
                      RT_V_SCAL, 15, 0, 0, 0,
                      RT_V_SCAL, 14, 1, 0, 0,
                      RT_V_PAIR + 6, 0, 0, 15, 14,
                      RT_V_LD, 1, 1, 0, 0,
                      RT_V_LD, 2, 2, 0, 0,
                      RT_V_OUT, 0, 3, 0, 0,
                      RT_V_FMA, r, 0, 1, 2,
                      RT_V_ST, 0, 3, r, 0,
                      RT_V_ST, 0, 4, 0, 0};
    void *const ptr[] = {x, g, b, y, z};
    const float scal[] = {s0, s1};
    const int64_t n[] = {N};
    rt_vec(code, ptr, scal, n);
    for (int64_t k = 0; k < N; k++) {
        float t = (x[k] - s0) * s1;
        float want = fmaf(t, g[k], b[k]);
        if (memcmp(&y[k], &want, sizeof want) != 0)
            fail_msg("y[%lld] = %.9g, not %.9g", (long long)k, y[k], want);
        if (keep && memcmp(&z[k], &t, sizeof t) != 0)
            fail_msg("z[%lld] = %.9g, not %.9g", (long long)k, z[k], t);
    }
    free(x), free(g), free(b), free(y), free(z);
}

/* A fill and a fold of one run (rt_vec.c's vec_short), each beside the
 * same program with a second pointer, which takes the blocks: the same
 * floats, in loop order. */
static void fill_and_fold(void **state)
{
    (void)state;
    enum { N = 3001 };
    float *x = tl_random(N, 15), a[N], b[N], unused = 0.0f;
    for (int op = 1; op <= 2; op++) {
        int64_t fill1[] = {1, 1, RT_VEC_REGS, 2, 0, RT_F32, 1,
                           RT_V_SCAL, 15, 0, 0, 0, RT_V_ST, 0, 0, 15, 0};
        int64_t fill2[] = {1, 2, RT_VEC_REGS, 2, 0, RT_F32, 1, RT_F32, 0,
                           RT_V_SCAL, 15, 0, 0, 0, RT_V_ST, 0, 0, 15, 0};
        int64_t fold1[] = {1, 2, RT_VEC_REGS, 2, 0, RT_F32, 1, RT_F32, 0,
                           RT_V_LD, 0, 0, 0, 0, RT_V_RED, 0, 1, 0, op};
        int64_t fold2[] = {1, 3, RT_VEC_REGS, 2, 0, RT_F32, 1, RT_F32, 0, RT_F32, 0,
                           RT_V_LD, 0, 0, 0, 0, RT_V_RED, 0, 1, 0, op};
        const float scal[] = {0.625f};
        const int64_t n[] = {N};
        rt_vec(fill1, (void *const[]){a}, scal, n);
        rt_vec(fill2, (void *const[]){b, &unused}, scal, n);
        for (int k = 0; k < N; k++)
            assert_true(a[k] == 0.625f && b[k] == 0.625f);
        float s1 = 0.5f, s2 = 0.5f, want = 0.5f;
        rt_vec(fold1, (void *const[]){x, &s1}, scal, n);
        rt_vec(fold2, (void *const[]){x, &s2, &unused}, scal, n);
        for (int k = 0; k < N; k++)
            want = op == 1 ? want + x[k] : (want > x[k] ? want : x[k]);
        assert_memory_equal(&s1, &want, sizeof want);
        assert_memory_equal(&s2, &want, sizeof want);
    }
    free(x);
}

/* Stores row by row (no lanes): y[r] op= x[r, c] (* w[r, c]) folded over a
 * row (the store's column stride 0), and z[c] += x[r, c] * w[r, c] with
 * every row at one place but rows of 20, not lanes of 16: bit for bit
 * the loops' order. */
static void stores_by_rows(void **state)
{
    (void)state;
    enum { R = 70, C = 20 };
    float *x = tl_random(R * C, 16), *w = tl_random(R * C, 17);
    for (int op = 1; op <= 3; op++) {
        float y[R], z[C], wy[R], wz[C];
        for (int r = 0; r < R; r++)
            y[r] = wy[r] = 0.5f;
        for (int c = 0; c < C; c++)
            z[c] = wz[c] = 0.25f;
        int64_t code[] = {2, 4, RT_VEC_REGS, 4, 0,
                          RT_F32, C, 1, RT_F32, C, 1, RT_F32, 1, 0, RT_F32, 0, 1,
                          RT_V_LD, 0, 0, 0, 0,
                          RT_V_LD, 1, 1, 0, 0,
                          RT_V_ST, 1, 2, 0, op,
                          RT_V_ST, 1, 3, 0, op == 2 ? 2 : 3};
        const int64_t n[] = {R, C};
        rt_vec(code, (void *const[]){x, w, y, z}, NULL, n);
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                float v = x[r * C + c], u = w[r * C + c];
                wy[r] = op == 1 ? wy[r] + v : op == 2 ? (wy[r] > v ? wy[r] : v) : fmaf(v, u, wy[r]);
                wz[c] = op == 2 ? (wz[c] > v ? wz[c] : v) : fmaf(v, u, wz[c]);
            }
        assert_memory_equal(y, wy, sizeof y);
        assert_memory_equal(z, wz, sizeof z);
    }
    free(x), free(w);
}

static void pair_into_fma(void **state)
{
    (void)state;
    for (int keep = 0; keep < 2; keep++) {
        pair_case(4096, keep);
        pair_case(RT_VEC_B + 37, keep);   /* a last block of its own */
        pair_case(40, keep);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sum_into_scalar),
        cmocka_unit_test(sum_stored_in_place),
        cmocka_unit_test(sum_by_lanes),
        cmocka_unit_test(prefix_stays_scalar),
        cmocka_unit_test(read_back),
        cmocka_unit_test(lets_and_selects),
        cmocka_unit_test(integers_stay_scalar),
        cmocka_unit_test(strided_reads),
        cmocka_unit_test(small_nests_stay_scalar),
        cmocka_unit_test(outer_lets),
        cmocka_unit_test(fused_into_lanes),
        cmocka_unit_test(pair_into_fma),
        cmocka_unit_test(fill_and_fold),
        cmocka_unit_test(stores_by_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
