/* tests/unit/test_parallelize.c: ir_loop_independent, the legality test
 * parallelize and tile share, on kernels written as .kir text: which loops
 * may run their iterations at once, and the reason given when not; and
 * the work parallelize weighs, counted as ir/cost.c counts it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "passes/passes.h"
#include "tests/unit/testlib.h"

#include <stdio.h>
#include <stdlib.h>

/* Whether the kernel's first top-level loop is independent; the reason
 * (or "") goes to why. */
static int independent(const char *body, char *why, size_t len)
{
    Arena *a = arena_new();
    char text[4096];
    snprintf(text, sizeof text, "%s%s", tl_exp_kir_head, body);
    Diags d;
    diag_init(&d, a, "t.kir");
    Module *m = ir_parse(a, "t.kir", text, &d);
    if (!m) {
        diag_print(&d, stderr);
        fail_msg("the test's kernel does not parse");
    }
    Block *blk = &m->prog->kernels[0]->body;
    int at = 0;
    while (at < blk->n - 1 && blk->s[at]->kind != S_LOOP)
        at++;
    const char *reason = NULL;
    int ok = ir_loop_independent(a, blk->s[at], &reason);
    snprintf(why, len, "%s", reason ? reason : "");
    arena_free(a);
    return ok;
}

static void yes(const char *body)
{
    char why[256];
    if (!independent(body, why, sizeof why))
        fail_msg("refused (%s):\n%s", why, body);
}

static void no(const char *body, const char *want)
{
    char why[256];
    if (independent(body, why, sizeof why))
        fail_msg("accepted:\n%s", body);
    assert_string_equal(why, want);
}

/* Rows of an element-wise op, the row loop and the element loop. */
static void rows_and_elements(void **state)
{
    (void)state;
    const char *body = "    for i0 in 0..8\n"
                       "      for i1 in 0..64\n"
                       "        b1[i0, i1] = exp(b0[i0, i1])\n";
    yes(body);
}

/* A reduction into one element: every iteration writes it. */
static void reduction_into_one_element(void **state)
{
    (void)state;
    no("    for i0 in 0..8\n"
       "      for i1 in 0..64\n"
       "        b1[0, i1] += b0[i0, i1]\n",
       "its iterations may touch the same elements of b1");
}

/* Blocks of 64 columns written through jo * 64 + ji, ji in 0..64: the
 * windows of two blocks are disjoint; with ji in 0..65 they overlap. */
static void blocks_disjoint_or_overlapping(void **state)
{
    (void)state;
    yes("    for i0 in 0..9\n"
        "      for i1 in 0..64\n"
        "        b2[i0 * 64 + i1] = 1.0\n");
    no("    for i0 in 0..9\n"
       "      for i1 in 0..65\n"
       "        b2[i0 * 64 + i1] = 1.0\n",
       "its iterations may touch the same elements of b2");
}

/* Reading what the iteration wrote is fine; reading the next row, which
 * another iteration writes, is not. */
static void read_after_write(void **state)
{
    (void)state;
    yes("    for i0 in 0..8\n"
        "      for i1 in 0..64\n"
        "        b1[i0, i1] = b0[i0, i1]\n"
        "        b1[i0, i1] = b1[i0, i1] * 2.0\n");
    no("    for i0 in 0..7\n"
       "      for i1 in 0..64\n"
       "        b1[i0, i1] = b1[i0 + 1, i1]\n",
       "its iterations may touch the same elements of b1");
}

/* A data-dependent index in a dim other than the one the loop owns is
 * fine (topk's scatter); in that dim it is not. */
static void data_dependent_indices(void **state)
{
    (void)state;
    yes("    for i0 in 0..8\n"
        "      let v1: i64 = b0[i0, 0] > 0.0\n"
        "      b1[i0, v1] = 1.0\n");
    no("    for i0 in 0..8\n"
       "      let v1: i64 = b0[i0, 0] > 0.0\n"
       "      b1[v1, i0] = 1.0\n"
       "      b1[v1, 0] = 2.0\n",
       "its iterations may touch the same elements of b1");
}

/* Scalars: one declared inside is private; one declared outside is
 * shared. */
static void scalars(void **state)
{
    (void)state;
    yes("    for i0 in 0..8\n"
        "      let v1: f32 = 0.0\n"
        "      for i2 in 0..64 reduce\n"
        "        v1 += b0[i0, i2]\n"
        "      b1[i0, 0] = v1\n");
    no("    let v0: f32 = 0.0\n"
       "    for i1 in 0..8\n"
       "      v0 += b0[i1, 0]\n"
       "    b1[0, 0] = v0\n",
       "it assigns v0, declared outside it");
}

/* A check anywhere inside refuses the loop: it returns from the kernel. */
static void check_inside(void **state)
{
    (void)state;
    no("    for i0 in 0..8\n"
       "      check b0[i0, 0] > 0.0 else \"negative\"\n"
       "      b1[i0, 0] = 1.0\n",
       "it holds a run-time check");
}

/* A local array declared inside is private to the iteration; one
 * declared outside and written by every iteration at the same elements is
 * shared. */
static void local_arrays(void **state)
{
    (void)state;
    yes("    for i0 in 0..8\n"
        "      local b3\n"
        "      for i1 in 0..64\n"
        "        b3[i1] = b0[i0, i1]\n"
        "      for i2 in 0..64\n"
        "        b1[i0, i2] = b3[i2]\n");
    no("    local b3\n"
       "    for i0 in 0..8\n"
       "      for i1 in 0..64\n"
       "        b3[i1] = b0[i0, i1]\n",
       "its iterations may touch the same elements of b3");
}

/* A call writes a whole tile: rows i0 * 2 +: 2 are disjoint across
 * iterations, rows i0 +: 2 overlap the next iteration's. */
static void call_tiles(void **state)
{
    (void)state;
    yes("    for i0 in 0..4\n"
        "      call gemm(b1[i0 * 2 +: 2, 0 +: 64], b0[i0 * 2 +: 2, 0 +: 8], b0[0 +: 8, 0 +: 64])\n");
    no("    for i0 in 0..7\n"
       "      call gemm(b1[i0 +: 2, 0 +: 64], b0[i0 +: 2, 0 +: 8], b0[0 +: 8, 0 +: 64])\n",
       "its iterations may touch the same elements of b1");
}

/* The work parallelize notes is counted as ir/cost.c counts a kernel's
 * FLOPs: a loop with a run-time bound at the largest extent its variable
 * indexes, here i0 through the bound of the loop inside it (b0's 8
 * rows), i1 through its store (b2's 600 elements). */
static void work_counted_as_cost(void **state)
{
    (void)state;
    Arena *a = arena_new();
    char text[4096];
    snprintf(text, sizeof text, "%s%s", tl_exp_kir_head,
             "    for i0 in 0..i64(b0[0, 0])\n"
             "      for i1 in 0..i64(b0[i0, 0])\n"
             "        b2[i1] = exp(b0[0, 1])\n");
    Diags d;
    diag_init(&d, a, "t.kir");
    Module *m = ir_parse(a, "t.kir", text, &d);
    assert_non_null(m);
    pass_parallelize(m, NULL);
    double flops, bytes;
    ir_kernel_cost(m->prog->kernels[0], &flops, &bytes);
    assert_true(flops == 8 * 600);
    char *printed = tl_prog_text(m);
    tl_has_line(printed, "# parallelize: serial: 4.8k FLOP, 9.6k loads/stores in all, below "
                         "the 64k operations a fork and join pay for");
    free(printed);
    arena_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rows_and_elements),
        cmocka_unit_test(reduction_into_one_element),
        cmocka_unit_test(blocks_disjoint_or_overlapping),
        cmocka_unit_test(read_after_write),
        cmocka_unit_test(data_dependent_indices),
        cmocka_unit_test(scalars),
        cmocka_unit_test(check_inside),
        cmocka_unit_test(local_arrays),
        cmocka_unit_test(call_tiles),
        cmocka_unit_test(work_counted_as_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
