/* ir/indep.c: affine index analysis and loop independence: structural
 * equality of expressions, an index's coefficient of a loop variable,
 * and whether a loop's iterations touch disjoint elements (what
 * parallelize and fuse ask before they split or merge loops). */
#include "ir.h"

#include <string.h>

int ir_expr_equal(const Expr *x, const Expr *y)
{
    if (x == y)
        return 1;
    if (!x || !y || x->kind != y->kind || x->type != y->type)
        return 0;
    switch (x->kind) {
    case E_INT: return x->i == y->i;
    case E_FLT: return x->f == y->f;
    case E_VAR: return x->v == y->v;
    case E_LOAD:
        if (x->buf != y->buf)
            return 0;
        for (int i = 0; i < x->buf->rank; i++)
            if (!ir_expr_equal(x->idx[i], y->idx[i]))
                return 0;
        return 1;
    case E_BIN:
    case E_UN:
    case E_SEL:
        return x->op == y->op && ir_expr_equal(x->a, y->a) && ir_expr_equal(x->b, y->b) &&
               ir_expr_equal(x->c, y->c);
    }
    return 0;
}

/* An integer expression as c + sum coef[i] * atom[i]; an atom is a
 * variable or a part that is not affine (a load, a division, ...). */
#define LIN_MAX 12
typedef struct {
    int64_t c;
    const Expr *atom[LIN_MAX];
    int64_t coef[LIN_MAX];
    int n;
    int ok;                       /* 0: more atoms than LIN_MAX */
} Lin;

static void lin_atom(Lin *l, const Expr *atom, int64_t coef)
{
    for (int i = 0; i < l->n; i++)
        if (ir_expr_equal(l->atom[i], atom)) {
            l->coef[i] += coef;
            return;
        }
    if (l->n == LIN_MAX) {
        l->ok = 0;
        return;
    }
    l->atom[l->n] = atom;
    l->coef[l->n++] = coef;
}

static void lin_add(Lin *l, const Expr *e, int64_t scale)
{
    if (e->kind == E_INT)
        l->c += scale * e->i;
    else if (e->kind == E_BIN && e->op == B_ADD) {
        lin_add(l, e->a, scale);
        lin_add(l, e->b, scale);
    } else if (e->kind == E_BIN && e->op == B_SUB) {
        lin_add(l, e->a, scale);
        lin_add(l, e->b, -scale);
    } else if (e->kind == E_BIN && e->op == B_MUL && e->b->kind == E_INT)
        lin_add(l, e->a, scale * e->b->i);
    else if (e->kind == E_BIN && e->op == B_MUL && e->a->kind == E_INT)
        lin_add(l, e->b, scale * e->a->i);
    else
        lin_atom(l, e, scale);
}

static Lin lin_of(const Expr *e)
{
    Lin l;
    memset(&l, 0, sizeof l);
    l.ok = 1;
    lin_add(&l, e, 1);
    return l;
}

int64_t ir_expr_coef(const Expr *e, const Var *v, int *affine)
{
    Lin l = lin_of(e);
    int64_t coef = 0;
    *affine = l.ok;
    for (int i = 0; i < l.n; i++) {
        if (l.atom[i]->kind == E_VAR && l.atom[i]->v == v)
            coef += l.coef[i];
        else if (ir_expr_uses(l.atom[i], v))
            *affine = 0;
    }
    return coef;
}

/* What ir_loop_independent learns about a loop's body in one walk. */
typedef struct {
    Buf *buf;
    Expr **idx;
    int store;
    const int64_t *ext;           /* a call's tile: elements per dim from idx */
} Access;

typedef struct {
    Arena *a;
    const Stmt *loop;
    const Stmt **decl;            /* loops and lets inside: inner variables */
    int ndecl, capdecl;
    Buf **locals;                 /* local arrays declared inside */
    int nlocals, caplocals;
    Access *acc;                  /* every load and store */
    int nacc, capacc;
    const char *why;
} Indep;

static const Stmt *inner_decl(const Indep *in, const Var *v)
{
    for (int i = 0; i < in->ndecl; i++)
        if (in->decl[i]->v == v)
            return in->decl[i];
    return NULL;
}

static void indep_access(Indep *in, Buf *b, Expr **idx, int store, const int64_t *ext)
{
    Access x = {b, idx, store, ext};
    ARR_PUSH(in->a, in->acc, in->nacc, in->capacc, x);
}

static void indep_load(Expr *e, void *ctx) { indep_access(ctx, e->buf, e->idx, 0, NULL); }

static void indep_stmt(Stmt *s, void *ctx)
{
    Indep *in = ctx;
    ir_stmt_loads(s, indep_load, ctx);
    if (s->kind == S_LOOP || s->kind == S_LET)
        ARR_PUSH(in->a, in->decl, in->ndecl, in->capdecl, (const Stmt *)s);
    if (s->kind == S_LOCAL)
        ARR_PUSH(in->a, in->locals, in->nlocals, in->caplocals, s->buf);
    if (s->kind == S_STORE)
        indep_access(in, s->buf, s->idx, 1, NULL);
    for (int i = 0; i < s->ntiles; i++)
        indep_access(in, s->tiles[i].buf, s->tiles[i].idx, i == call_table[s->call].written,
                     s->tiles[i].ext);
    if (s->kind == S_CHECK && !in->why)
        in->why = "it holds a run-time check";
    if (s->kind == S_SET && !inner_decl(in, s->v) && !in->why)
        in->why = arena_printf(in->a, "it assigns v%d, declared outside it", s->v->id);
}

static int uses_inner(const Indep *in, const Expr *e)
{
    if (ir_expr_uses(e, in->loop->v))
        return 1;
    for (int i = 0; i < in->ndecl; i++)
        if (ir_expr_uses(e, in->decl[i]->v))
            return 1;
    return 0;
}

/* Index d of access x as a*v + c + inner + outer: a is v's coefficient,
 * c + inner lies in [*lo, *hi] (inner: loop variables of constant range
 * declared inside; a tile's extent widens it), outer the terms fixed
 * during the loop, left in *out.
 * 0 when d's index is not of that form. */
static int window(const Indep *in, const Access *x, int d, int64_t *a, int64_t *lo,
                  int64_t *hi, Lin *out)
{
    Lin l = lin_of(x->idx[d]);
    if (!l.ok)
        return 0;
    *a = 0;
    *lo = l.c;
    *hi = l.c + (x->ext ? x->ext[d] - 1 : 0);
    memset(out, 0, sizeof *out);
    out->ok = 1;
    for (int i = 0; i < l.n; i++) {
        const Expr *t = l.atom[i];
        const Stmt *s = t->kind == E_VAR ? inner_decl(in, t->v) : NULL;
        if (l.coef[i] == 0)
            continue;
        if (t->kind == E_VAR && t->v == in->loop->v) {
            *a += l.coef[i];
        } else if (s) {
            if (s->kind != S_LOOP || s->lo->kind != E_INT || s->hi->kind != E_INT ||
                s->hi->i <= s->lo->i)
                return 0;
            int64_t p = l.coef[i] * s->lo->i, q = l.coef[i] * (s->hi->i - 1);
            *lo += p < q ? p : q;
            *hi += p < q ? q : p;
        } else if (uses_inner(in, t)) {
            return 0;
        } else {
            lin_atom(out, t, l.coef[i]);
        }
    }
    return *a != 0;
}

static int same_outer(const Lin *x, const Lin *y)
{
    if (x->n != y->n)
        return 0;
    for (int i = 0; i < x->n; i++) {
        int found = 0;
        for (int j = 0; j < y->n && !found; j++)
            found = x->coef[i] == y->coef[j] && ir_expr_equal(x->atom[i], y->atom[j]);
        if (!found)
            return 0;
    }
    return 1;
}

static int same_layout(const Buf *x, const Buf *y)
{
    if (x == y)
        return 1;
    if (x->rank != y->rank || x->offset != y->offset)
        return 0;
    for (int i = 0; i < x->rank; i++)
        if (x->strides[i] != y->strides[i])
            return 0;
    return 1;
}

/* Whether, along dim d, every access to storage b of the loop lies in a
 * window a*v + outer + [lo, hi] with hi - lo < |a|: then two iterations
 * never touch the same element. */
static int disjoint_along(const Indep *in, Buf *b, Buf *view, int d)
{
    int64_t a0 = 0, lo = 0, hi = 0;
    Lin out0 = {0};
    int first = 1;
    for (int i = 0; i < in->nacc; i++) {
        const Access *x = &in->acc[i];
        if (ir_storage(x->buf) != b)
            continue;
        int64_t a, l, h;
        Lin out;
        if (!window(in, x, d, &a, &l, &h, &out))
            return 0;
        if (first) {
            a0 = a, lo = l, hi = h, out0 = out, first = 0;
            continue;
        }
        if (a != a0 || !same_outer(&out, &out0))
            return 0;
        lo = l < lo ? l : lo;
        hi = h > hi ? h : hi;
    }
    return view->strides[d] != 0 && hi - lo < (a0 < 0 ? -a0 : a0);
}

static int declared_inside(const Indep *in, const Buf *b)
{
    for (int i = 0; i < in->nlocals; i++)
        if (in->locals[i] == b)
            return 1;
    return 0;
}

/* Checks one storage b the loop writes. */
static int storage_ok(Indep *in, Buf *b)
{
    Buf *view = NULL;
    for (int i = 0; i < in->nacc; i++) {
        Buf *x = in->acc[i].buf;
        if (ir_storage(x) != b)
            continue;
        if (view && !same_layout(view, x)) {
            in->why = arena_printf(in->a, "it accesses b%d through two layouts", b->id);
            return 0;
        }
        view = x;
    }
    for (int d = 0; d < view->rank; d++)
        if (disjoint_along(in, b, view, d))
            return 1;
    in->why = arena_printf(in->a, "its iterations may touch the same elements of b%d", b->id);
    return 0;
}

int ir_loop_independent(Arena *a, Stmt *s, const char **why)
{
    Indep in;
    memset(&in, 0, sizeof in);
    in.a = a;
    in.loop = s;
    ir_block_walk(&s->body, indep_stmt, &in);
    for (int i = 0; i < in.nacc && !in.why; i++) {
        Buf *b = ir_storage(in.acc[i].buf);
        if (in.acc[i].store && !declared_inside(&in, b))
            storage_ok(&in, b);
    }
    if (why)
        *why = in.why;
    return in.why == NULL;
}
