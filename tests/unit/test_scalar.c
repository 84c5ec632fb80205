/* tests/unit/test_scalar.c: the scalar operators of the loop IR, one row
 * each of ir/scalar.def, as every reader of that table takes them: each
 * operator's .kir text parses to it and prints back the same
 * (ir/parse_expr.c, ir/loop.c), prints as the C written here
 * (codegen/cprint.c), and costs the FLOPs written here (ir/cost.c). The
 * cases together use every operator, so a row added without a case
 * fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testlib.h"

#include <stdio.h>
#include <stdlib.h>

/* b1[i0, i1] = kir over i0 in 0..8, i1 in 0..64; b0 is f32[8,64]. */
typedef struct {
    const char *kir;          /* as it prints */
    const char *c;
    double flops;             /* of one element */
} Case;

static const Case cases[] = {
    {"b0[i0, i1] + b0[0, i1]", "b0[i0 * 64 + i1] + b0[i1]", 1},
    {"b0[i0, i1] - b0[0, i1]", "b0[i0 * 64 + i1] - b0[i1]", 1},
    {"b0[i0, i1] * b0[0, i1]", "b0[i0 * 64 + i1] * b0[i1]", 1},
    {"b0[i0, i1] / (b0[0, i1] + 1.0)", "b0[i0 * 64 + i1] / (b0[i1] + 1.0f)", 2},
    {"f32(i0 % 3)", "(float)(i0 % 3)", 0},
    {"max(b0[i0, i1], b0[0, i1])", "kiln_maxf(b0[i0 * 64 + i1], b0[i1])", 1},
    {"f32(min(i0, i1))", "(float)(kiln_mini(i0, i1))", 0},
    {"f32(i0 < i1)", "(float)(i0 < i1)", 0},
    {"f32(i0 <= i1)", "(float)(i0 <= i1)", 0},
    {"f32(i0 > i1)", "(float)(i0 > i1)", 0},
    {"f32(i0 >= i1)", "(float)(i0 >= i1)", 0},
    {"f32(i0 == i1)", "(float)(i0 == i1)", 0},
    {"f32(i0 != i1)", "(float)(i0 != i1)", 0},
    {"f32(i0 < 2 && i1 >= 2)", "(float)((i0 < 2) && (i1 >= 2))", 0},
    {"f32(i0 < 2 || i1 >= 2)", "(float)((i0 < 2) || (i1 >= 2))", 0},
    {"neg(b0[i0, i1])", "-b0[i0 * 64 + i1]", 1},
    {"f32(neg(i1))", "(float)(-i1)", 0},
    {"neg(b0[i0, i1] - 1.0)", "-(b0[i0 * 64 + i1] - 1.0f)", 2},
    {"abs(b0[i0, i1])", "fabsf(b0[i0 * 64 + i1])", 1},
    {"f32(abs(i0 - i1))", "(float)(llabs(i0 - i1))", 0},
    {"exp(b0[i0, i1])", "rt_expf(b0[i0 * 64 + i1])", 1},
    {"log(b0[i0, i1])", "logf(b0[i0 * 64 + i1])", 1},
    {"sqrt(b0[i0, i1])", "sqrtf(b0[i0 * 64 + i1])", 1},
    {"rsqrt(b0[i0, i1])", "1.0f / sqrtf(b0[i0 * 64 + i1])", 1},
    /* a quotient's text as an operand keeps its value: x / (1 / sqrt y) */
    {"b0[0, i1] / rsqrt(b0[i0, i1])", "b0[i1] / (1.0f / sqrtf(b0[i0 * 64 + i1]))", 2},
    {"b0[0, i1] * rsqrt(b0[i0, i1])", "b0[i1] * (1.0f / sqrtf(b0[i0 * 64 + i1]))", 2},
    {"rsqrt(b0[i0, i1]) * b0[0, i1]", "1.0f / sqrtf(b0[i0 * 64 + i1]) * b0[i1]", 2},
    {"b0[0, i1] / sigmoid(b0[i0, i1])",
     "b0[i1] / (1.0f / (1.0f + rt_expf(-b0[i0 * 64 + i1])))", 4},
    {"neg(-2.0) + b0[i0, i1]", "-(-2.0f) + b0[i0 * 64 + i1]", 2},
    {"tanh(b0[i0, i1])", "rt_tanhf(b0[i0 * 64 + i1])", 1},
    {"erf(b0[i0, i1])", "erff(b0[i0 * 64 + i1])", 1},
    {"sigmoid(b0[i0, i1])", "1.0f / (1.0f + rt_expf(-b0[i0 * 64 + i1]))", 3},
    {"sigmoid(b0[i0, i1] + 1.0)", "1.0f / (1.0f + rt_expf(-(b0[i0 * 64 + i1] + 1.0f)))", 4},
    {"cos(b0[i0, i1])", "cosf(b0[i0 * 64 + i1])", 1},
    {"sin(b0[i0, i1])", "sinf(b0[i0 * 64 + i1])", 1},
    {"f32(not(i0 < i1))", "(float)(!(i0 < i1))", 0},
    {"f32(i1)", "(float)(i1)", 0},
    {"f32(i64(b0[i0, i1]))", "(float)((int64_t)(b0[i0 * 64 + i1]))", 0},
};

/* Marks the operators of e's tree in bin[] and un[]. */
static void mark(const Expr *e, char *bin, char *un)
{
    if (!e)
        return;
    if (e->kind == E_BIN)
        bin[e->op] = 1;
    if (e->kind == E_UN)
        un[e->op] = 1;
    mark(e->a, bin, un);
    mark(e->b, bin, un);
    mark(e->c, bin, un);
}

static char *c_text(const Module *m, const Expr *e)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    CgCx cx = {.f = f, .m = m, .fl = CG_CC};
    cg_expr(&cx, e);
    fclose(f);
    return text;
}

static void one_case(const Case *t, char *bin, char *un)
{
    Arena *a = arena_new();
    char text[4096], line[512];
    snprintf(text, sizeof text, "%s    for i0 in 0..8\n      for i1 in 0..64\n"
             "        b1[i0, i1] = %s\n", tl_exp_kir_head, t->kir);
    Diags d;
    diag_init(&d, a, "t.kir");
    Module *m = ir_parse(a, "t.kir", text, &d);
    if (!m) {
        diag_print(&d, stderr);
        fail_msg("'%s' does not parse", t->kir);
    }
    char *printed = tl_prog_text(m);
    snprintf(line, sizeof line, "b1[i0, i1] = %s", t->kir);
    tl_has_line(printed, line);
    free(printed);
    const Kernel *k = m->prog->kernels[0];
    const Stmt *s = k->body.s[0]->body.s[0]->body.s[0];
    char *c = c_text(m, s->e);
    assert_string_equal(c, t->c);
    free(c);
    double flops, bytes;
    ir_kernel_cost(k, &flops, &bytes);
    if (flops != 8 * 64 * t->flops)
        fail_msg("'%s' costs %g FLOP an element, not %g", t->kir, flops / (8 * 64), t->flops);
    mark(s->e, bin, un);
    arena_free(a);
}

/* Every operator: .kir read and printed back, its C, its FLOPs. */
static void every_operator(void **state)
{
    (void)state;
    char bin[B_COUNT] = {0}, un[U_COUNT] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        one_case(&cases[i], bin, un);
    for (int op = 0; op < B_COUNT; op++)
        if (!bin[op])
            fail_msg("no case uses binary '%s'", binop_name((BinOp)op));
    for (int op = 0; op < U_COUNT; op++)
        if (!un[op])
            fail_msg("no case uses unary '%s'", unop_name((UnOp)op));
}

/* An operator's own FLOPs count on f32 values only (integer arithmetic
 * is index arithmetic), and so does an accumulation's. */
static void flops_on_f32_only(void **state)
{
    (void)state;
    Arena *a = arena_new();
    Kernel k = {0};
    Expr *x = e_flt(a, 2.0), *i = e_var(a, ir_var(a, &k, VAR_LOOP, T_I64));
    assert_true(ir_expr_op_flops(e_bin(a, B_MUL, x, x)) == 1);
    assert_true(ir_expr_op_flops(e_bin(a, B_MUL, i, i)) == 0);
    assert_true(ir_expr_op_flops(e_un(a, U_SIGMOID, x)) == 3);
    assert_true(ir_expr_op_flops(e_un(a, U_TOF32, i)) == 0);
    assert_true(ir_expr_op_flops(x) == 0);
    Stmt acc = {.kind = S_SET, .op = A_ADD, .e = x}, set = acc, int_acc = acc;
    set.op = A_SET;
    int_acc.e = i;
    assert_true(ir_stmt_op_flops(&acc) == 1);
    assert_true(ir_stmt_op_flops(&set) == 0);
    assert_true(ir_stmt_op_flops(&int_acc) == 0);
    arena_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_operator),
        cmocka_unit_test(flops_on_f32_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
