/* codegen/cprint.c: loop-IR expressions, buffer elements and literals as
 * C text, what emit.c, kernel.c and vec.c print with.
 *
 * It calls none of them, so the C printers depend on one another as a
 * tree: emit.c prints the file and calls kernel.c for each kernel;
 * kernel.c prints statements and calls vec.c for the nests it takes;
 * all three print their expressions and literals here.
 *
 * An operator is printed as its row of ir/scalar.def spells it, with
 * parentheses exactly where C needs them (ir_expr_prec), and around
 * comparisons and logic inside comparisons and logic too. Integer
 * arithmetic is in 64 bits: an i32 operand (a load from an i32 buffer)
 * is widened first, as the loop IR's types say; C would compute
 * `ids[t] * 4096` in int. A 16-bit weight's element is widened to f32
 * exactly where it is loaded. */
#include "codegen.h"

#include <math.h>
#include <string.h>

/* ---- literals ------------------------------------------------------------ */

void cg_print_cstring(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\' || *p == '?')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(f, "\\%03o", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

void cg_print_float(FILE *f, double v)
{
    if (isinf(v)) {
        fputs(v < 0 ? "-INFINITY" : "INFINITY", f);
        return;
    }
    char buf[40];
    snprintf(buf, sizeof buf, "%.9g", v);
    fprintf(f, "%s%sf", buf, strpbrk(buf, ".e") ? "" : ".0");
}

/* ---- names and buffer elements ----------------------------------------- */

void cg_var(CgCx *cx, const Var *v)
{
    fprintf(cx->f, "%c%d", v->kind == VAR_LOOP ? 'i' : 'v', v->id);
}

int cg_bname(CgCx *cx, const Buf *b)
{
    CgNames *t = cx->names;
    if (!t)
        return b->id;
    for (int i = 0; i < t->n; i++)
        if (t->v[i] == b)
            return i;
    ARR_PUSH(cx->m->a, t->v, t->n, t->cap, b);
    return t->n - 1;
}

Storage cg_store(const Buf *b) { return (b->base ? b->base : b)->store; }

/* An integer operand of 64-bit arithmetic (an index above all): an i32
 * value widened before the arithmetic. */
static void wide(CgCx *cx, const Expr *e, int p, int right)
{
    if (e->type != T_I32) {
        cg_operand(cx, e, p, right);
        return;
    }
    fputs("(int64_t)", cx->f);
    cg_operand(cx, e, 9, 0);
}

/* The element offset of an access: sum of index * stride, plus offset. */
void cg_offset(CgCx *cx, const Buf *b, Expr *const *idx)
{
    int terms = 0;
    for (int i = 0; i < b->rank; i++) {
        if (idx[i]->kind == E_INT && idx[i]->i == 0)
            continue;
        if (terms++)
            fputs(" + ", cx->f);
        if (b->strides[i] == 1) {
            wide(cx, idx[i], 5, 0);
        } else {
            wide(cx, idx[i], 6, 0);
            fprintf(cx->f, " * %lld", (long long)b->strides[i]);
        }
    }
    if (b->offset || !terms)
        fprintf(cx->f, "%s%lld", terms ? " + " : "", (long long)b->offset);
}

void cg_access(CgCx *cx, const Buf *b, Expr *const *idx)
{
    fprintf(cx->f, "b%d[", cg_bname(cx, b->base ? b->base : b));
    cg_offset(cx, b, idx);
    fputc(']', cx->f);
}

/* A load: a 16-bit weight's element widened exactly where it is read, a
 * quantized one's read from its block (rt_quant.h: rt_q8_0_at ...). */
static void load(CgCx *cx, const Buf *b, Expr *const *idx)
{
    Storage st = cg_store(b);
    if (storage_block(st)) {
        fprintf(cx->f, "rt_%s_at(b%d, ", storage_name(st), cg_bname(cx, b->base ? b->base : b));
        cg_offset(cx, b, idx);
        fputc(')', cx->f);
        return;
    }
    if (st != ST_F32)
        fputs(st == ST_BF16 ? "rt_bf16_f32(" : "rt_f16_f32(", cx->f);
    cg_access(cx, b, idx);
    if (st != ST_F32)
        fputc(')', cx->f);
}

/* ---- operators ----------------------------------------------------------- */

/* The operators' C for f32 values and for integers (ir/scalar.def). */
static const char *const c_binop[B_COUNT][2] = {
#define BIN(e, kir, c, c_int, ...) [B_##e] = {c, c_int},
#define UN(e, ...)
#include "ir/scalar.def"
#undef BIN
#undef UN
};
static const char *const c_unop[U_COUNT][2] = {
#define BIN(e, ...)
#define UN(e, kir, c, c_int, ...) [U_##e] = {c, c_int},
#include "ir/scalar.def"
#undef BIN
#undef UN
};

/* The binding strength of each unary operator's C text (scalar.def). */
static const int c_unprec[U_COUNT] = {
#define BIN(e, ...)
#define UN(e, kir, c, c_int, vec, flops, cprec) [U_##e] = cprec,
#include "ir/scalar.def"
#undef BIN
#undef UN
};

/* How tightly e's C binds as an operand: ir_expr_prec, but a unary
 * operator's text as its row says, and a negative constant as a prefix
 * (so that -(-2.0f) never prints as --2.0f). */
static int c_prec(const Expr *e)
{
    if (e->kind == E_UN && e->op >= 0 && e->op < U_COUNT)
        return c_unprec[e->op];
    if ((e->kind == E_FLT && signbit(e->f)) || (e->kind == E_INT && e->i < 0))
        return 8;
    return ir_expr_prec(e);
}

/* Row t's spelling for e's type. */
static const char *spelling(const char *const t[2], const Expr *e)
{
    return e->type != T_F32 && t[1] ? t[1] : t[0];
}

void cg_operand(CgCx *cx, const Expr *e, int p, int right)
{
    int q = c_prec(e);
    int paren = q < p || (right && q == p && q < 9) || (p <= 4 && q <= 4);
    if (paren)
        fputc('(', cx->f);
    cg_expr(cx, e);
    if (paren)
        fputc(')', cx->f);
}

/* A unary operator: its text, the operand at the @ (scalar.def). */
static void unop(CgCx *cx, const Expr *e)
{
    if (e->op < 0 || e->op >= U_COUNT)
        KILN_BUG("bad unop %d", e->op);
    const char *t = spelling(c_unop[e->op], e), *at = strchr(t, '@');
    fwrite(t, 1, (size_t)(at - t), cx->f);
    if (at > t && at[-1] == '(' && at[1] == ')')
        cg_expr(cx, e->a);                /* a call's whole argument */
    else
        cg_operand(cx, e->a, 9, 0);
    fputs(at + 1, cx->f);
}

static void binop(CgCx *cx, const Expr *e)
{
    FILE *f = cx->f;
    const char *c = spelling(c_binop[e->op], e);
    int p = ir_expr_prec(e);
    if (p == 9) {                         /* a function: kiln_maxf(a, b) */
        fprintf(f, "%s(", c);
        cg_expr(cx, e->a);
        fputs(", ", f);
        cg_expr(cx, e->b);
        fputc(')', f);
        return;
    }
    if (e->type == T_I64 && e->op <= B_MOD) {   /* arithmetic in 64 bits */
        wide(cx, e->a, p, 0);
        fprintf(f, " %s ", c);
        wide(cx, e->b, p, 1);
        return;
    }
    cg_operand(cx, e->a, p, 0);
    fprintf(f, " %s ", c);
    cg_operand(cx, e->b, p, 1);
}

void cg_expr(CgCx *cx, const Expr *e)
{
    FILE *f = cx->f;
    switch (e->kind) {
    case E_INT: fprintf(f, "%lld", (long long)e->i); return;
    case E_FLT: cg_print_float(f, e->f); return;
    case E_VAR: cg_var(cx, e->v); return;
    case E_LOAD: load(cx, e->buf, e->idx); return;
    case E_UN: unop(cx, e); return;
    case E_BIN: binop(cx, e); return;
    case E_SEL:
        cg_operand(cx, e->a, 1, 0);
        fputs(" ? ", f);
        cg_operand(cx, e->b, 1, 0);
        fputs(" : ", f);
        cg_operand(cx, e->c, 0, 0);
        return;
    }
}
