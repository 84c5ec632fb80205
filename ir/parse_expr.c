/* ir/parse_expr.c: the expressions of a .kir kernel (KIR.md,
 * "Expressions"), and the variables and buffers they name.
 *
 * Contract: an expression is built with the IR's builders, so its type
 * and constant folding are theirs; what they would take for a kiln bug
 * (f32 mixed with integers) or would overflow on (folding integer
 * literals) is an error here. A variable is one in scope, a local buffer
 * one declared around the use, an index an integer, one per dimension.
 * Nesting and size are bounded, so that no input can exhaust the stack
 * of the parser or of the printers and passes that walk the tree. The
 * operators, their spellings and levels are scalar.def's rows. */
#include "parse.h"

#include <string.h>

#define MAX_NESTING 256           /* parentheses and calls in an expression */
#define MAX_EXPR 10000            /* expression nodes in one statement */

/* ---- variables and buffers -------------------------------------------- */

/* A variable in scope here. */
Var *kir_lookup(Parser *ps, VarKind kind, int id)
{
    for (int i = ps->nscope - 1; i >= 0; i--)
        if (ps->scope[i]->id == id && ps->scope[i]->kind == kind)
            return ps->scope[i];
    kir_fail(ps, "%c%d is not in scope here", kir_var_char(kind), id);
}

/* A buffer of the program; a local one only where it is declared. */
Buf *kir_buf(Parser *ps, int id)
{
    Prog *p = ps->prog;
    if (id >= p->nbufs)
        kir_fail(ps, "b%d is not a buffer of the program", id);
    Buf *b = p->bufs[id];
    if (b->kind != BK_LOCAL)
        return b;
    for (int i = 0; i < ps->nlocals; i++)
        if (ps->locals[i] == b)
            return b;
    kir_fail(ps, "local b%d is used outside the block that declares it", id);
}

/* ---- expressions ------------------------------------------------------- */

static void count(Parser *ps)
{
    if (++ps->nexpr > MAX_EXPR)
        kir_fail(ps, "a statement has more than %d expression nodes", MAX_EXPR);
}

static int fold_overflows(BinOp op, int64_t x, int64_t y)
{
    int64_t r;
    switch (op) {
    case B_ADD: return __builtin_add_overflow(x, y, &r);
    case B_SUB: return __builtin_sub_overflow(x, y, &r);
    case B_MUL: return __builtin_mul_overflow(x, y, &r);
    case B_DIV:
    case B_MOD: return x == INT64_MIN && y == -1;
    default: return 0;
    }
}

static Expr *bin(Parser *ps, BinOp op, Expr *x, Expr *y)
{
    if ((x->type == T_F32) != (y->type == T_F32))
        kir_fail(ps, "'%s' mixes f32 and integer operands", binop_name(op));
    if (x->kind == E_INT && y->kind == E_INT && fold_overflows(op, x->i, y->i))
        kir_fail(ps, "%lld %s %lld overflows", (long long)x->i, binop_name(op), (long long)y->i);
    count(ps);
    return e_bin(ps->a, op, x, y);
}

static Expr *un(Parser *ps, UnOp op, Expr *x)
{
    if (op == U_NEG && x->kind == E_INT && x->i == INT64_MIN)
        kir_fail(ps, "neg(%lld) overflows", (long long)x->i);
    count(ps);
    return e_un(ps->a, op, x);
}

/* "[" [expr {"," expr}] "]": one integer index per dimension of b */
Expr **kir_indices(Parser *ps, Buf *b)
{
    Expr **idx = NULL;
    int n = 0, cap = 0;
    kir_expect(ps, "[");
    if (!kir_accept(ps, "]")) {
        do {
            Expr *e = kir_expr(ps);
            if (e->type == T_F32)
                kir_fail(ps, "index %d of b%d is f32, not an integer", n, b->id);
            ARR_PUSH(ps->a, idx, n, cap, e);
        } while (kir_accept(ps, ","));
        kir_expect(ps, "]");
    }
    if (n != b->rank)
        kir_fail(ps, "b%d has rank %d; %d ind%s given", b->id, b->rank, n, n == 1 ? "ex" : "ices");
    return idx;
}

/* The binary operators (scalar.def): an infix operator's level, loosest
 * first (1 ||, .., 6 * / %), or FUNCTION for max and min. */
enum { FUNCTION = 9 };
static const struct {
    const char *tok;
    int prec;
} binops[B_COUNT] = {
#define BIN(e, kir, c, c_int, vec, flops, prec) [B_##e] = {kir, prec},
#define UN(e, ...)
#include "scalar.def"
#undef BIN
#undef UN
};

/* The binary function named name; -1 when none is. */
static int binary_function(const char *name)
{
    for (int op = 0; op < B_COUNT; op++)
        if (binops[op].prec == FUNCTION && strcmp(name, binops[op].tok) == 0)
            return op;
    return -1;
}

/* ("max" | "min") "(" expr "," expr ")" | UNARY "(" expr ")", the
 * names scalar.def's; NULL when no NAME "(" comes next */
static Expr *call(Parser *ps)
{
    const char *save = ps->p, *name = kir_name(ps);
    if (!name || !kir_accept(ps, "(")) {
        ps->p = save;
        return NULL;
    }
    Expr *x = kir_expr(ps);
    for (int op = 0; op < U_COUNT; op++)
        if (strcmp(name, unop_name((UnOp)op)) == 0) {
            kir_expect(ps, ")");
            return un(ps, (UnOp)op, x);
        }
    int op = binary_function(name);
    if (op < 0)
        kir_fail(ps, "unknown function '%s'", name);
    kir_expect(ps, ",");
    Expr *y = kir_expr(ps);
    kir_expect(ps, ")");
    return bin(ps, (BinOp)op, x, y);
}

/* primary = INT | FLOAT | iN | vN | load | call | "(" expr ")"
 * load    = bN "[" [expr {"," expr}] "]" */
static Expr *primary(Parser *ps)
{
    int64_t i;
    double f;
    int is_float, id;
    Expr *e;
    count(ps);
    if (kir_number(ps, &i, &f, &is_float))
        return is_float ? e_flt(ps->a, f) : e_int(ps->a, i);
    if (kir_accept(ps, "(")) {
        e = kir_expr(ps);
        kir_expect(ps, ")");
        return e;
    }
    if ((e = call(ps)))
        return e;
    if ((id = kir_ref(ps, 'i')) >= 0)
        return e_var(ps->a, kir_lookup(ps, VAR_LOOP, id));
    if ((id = kir_ref(ps, 'v')) >= 0)
        return e_var(ps->a, kir_lookup(ps, VAR_LOCAL, id));
    if ((id = kir_ref(ps, 'b')) < 0)
        kir_fail(ps, "expected an expression, found %s", kir_found(ps));
    Buf *b = kir_buf(ps, id);
    return e_load(ps->a, b, kir_indices(ps, b));
}

/* Takes an operator of level prec, the longest that comes next ("<=",
 * not "<"): its BinOp, or -1. A "+:" (a tile's extent, after its index)
 * is not a "+". */
static int binop(Parser *ps, int prec)
{
    const char *save = ps->p;
    if (kir_accept(ps, "+:")) {
        ps->p = save;
        return -1;
    }
    int best = -1;
    const char *end = save;
    for (int op = 0; op < B_COUNT; op++) {
        if (binops[op].prec != prec)
            continue;
        ps->p = save;
        if (kir_accept(ps, binops[op].tok) && ps->p > end)
            best = op, end = ps->p;
    }
    if (best >= 0)
        ps->p = end;
    return best;
}

/* or  = and {"||" and}              and = eq {"&&" eq}
 * eq  = rel {("==" | "!=") rel}     rel = add {("<" | "<=" | ">" | ">=") add}
 * add = mul {("+" | "-") mul}       mul = primary {("*" | "/" | "%") primary}
 * One function for the six levels: prec 1 is `or`, 6 is `mul`. */
static Expr *binary(Parser *ps, int prec)
{
    Expr *x = prec == 6 ? primary(ps) : binary(ps, prec + 1);
    for (int i; (i = binop(ps, prec)) >= 0;) {
        Expr *y = prec == 6 ? primary(ps) : binary(ps, prec + 1);
        x = bin(ps, (BinOp)i, x, y);
    }
    return x;
}

/* expr = or ["?" or ":" expr] */
Expr *kir_expr(Parser *ps)
{
    if (++ps->depth > MAX_NESTING)
        kir_fail(ps, "an expression nests more than %d deep", MAX_NESTING);
    Expr *c = binary(ps, 1);
    if (kir_accept(ps, "?")) {
        Expr *x = binary(ps, 1);
        kir_expect(ps, ":");
        Expr *y = kir_expr(ps);
        if ((x->type == T_F32) != (y->type == T_F32))
            kir_fail(ps, "the arms of '?' mix f32 and integer");
        count(ps);
        c = e_sel(ps->a, c, x, y);
    }
    ps->depth--;
    return c;
}

Expr *kir_integer(Parser *ps, const char *what)
{
    Expr *e = kir_expr(ps);
    if (e->type == T_F32)
        kir_fail(ps, "%s is f32, not an integer", what);
    return e;
}
