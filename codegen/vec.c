/* codegen/vec.c: innermost loop nests as rt_vec programs (JIT flavour).
 *
 * libtcc compiles scalar code only, so the JIT flavour hands the nests
 * that do the element-wise work to the runtime's vector programs
 * (runtime/jit/rt_vec.c, compiled by cc into kiln): the nest becomes
 *
 *     { static const int64_t vc[] = {program};
 *       int64_t i2 = LO2, i3 = LO3;          the first iteration
 *       void *const vp[] = {&b0[...], ...};  each access there, &v1 for a sum
 *       const float vs[] = {...};            the loop-invariant values
 *       const int64_t vn[] = {HI2 - LO2, HI3 - LO3};
 *       rt_vec(vc, vp, vs, vn); }
 *
 * A nest qualifies when:
 *  1. it is loops, each the last statement of the one outside it (but the
 *     outermost) after f32 lets only, none parallel, at most RT_VEC_LEVELS
 *     deep, whose bounds use none of the nest's variables and lets; the
 *     innermost holds only f32 lets, assignments and stores. An outer let
 *     is computed where it is used, so it must read no storage the nest
 *     stores to and never be assigned;
 *  2. every index is affine in every nest variable (constant strides);
 *  3. every value is f32 arithmetic on loads, lets and loop-invariant
 *     subexpressions (which glue computes once, as floats): no integer
 *     arithmetic on the nest's variables;
 *  4. a scalar assigned in the nest from outside it is a sum (+=) or a
 *     max (max=), folded element by element in loop order;
 *  5. storage the nest stores to is stored and read through one access
 *     only (the same buffer, the same indices); read at all, the store
 *     moves along the last level, and blocks hold one row, so a block never
 *     reads an element it stores but at that element.
 * Anything else stays scalar C, as does a nest of fewer than VEC_MIN
 * iterations known at compile time. */
#include "codegen.h"

#include <string.h>

enum { VEC_MIN = 16, VEC_INSNS = RT_VEC_INSNS, VEC_SCALARS = 64 };

typedef struct {
    Buf *buf;                     /* NULL: a scalar's address (var) */
    Expr **idx;
    const Var *var;
    int64_t s[RT_VEC_LEVELS];
} VecPtr;

typedef struct {
    const Stmt *lv[RT_VEC_LEVELS];
    int nlev;
    VecPtr ptr[16];
    int nptr;
    const Expr *scal[VEC_SCALARS];
    int nscal;
    const Var *let[RT_VEC_REGS];
    int nlet;
    const Stmt *olet[16];         /* lets of the outer levels, inlined */
    int nolet;
    int64_t insn[VEC_INSNS][5];
    int ninsn;
    int top;                      /* temporaries count up from it, scalars down */
    int onerow;
    const Expr *cse[32];          /* values in live temporaries, this statement */
    int cser[32], ncse;
    Buf *wrote[16];               /* storage stored to, and its one access */
    const Stmt *wstore[16];
    int nwrote;
} Vec;

static int is_nest_var(const Vec *v, const Var *x)
{
    for (int l = 0; l < v->nlev; l++)
        if (v->lv[l]->v == x)
            return 1;
    return 0;
}

static int is_let(const Vec *v, const Var *x)
{
    for (int i = 0; i < v->nlet; i++)
        if (v->let[i] == x)
            return i + 1;
    return 0;
}

static const Stmt *inner(const Vec *v) { return v->lv[v->nlev - 1]; }

static const Stmt *outer_let(const Vec *v, const Var *x)
{
    for (int i = 0; i < v->nolet; i++)
        if (v->olet[i]->v == x)
            return v->olet[i];
    return NULL;
}

/* Whether the innermost body assigns x (a scalar from outside). */
static int assigned(const Vec *v, const Var *x)
{
    const Block *b = &inner(v)->body;
    for (int i = 0; i < b->n; i++)
        if ((b->s[i]->kind == S_SET || b->s[i]->kind == S_LET) && b->s[i]->v == x)
            return 1;
    return 0;
}

static int written(const Vec *v, Buf *b)
{
    Buf *r = ir_storage(b);
    for (int i = 0; i < v->nwrote; i++)
        if (v->wrote[i] == r)
            return i + 1;
    return 0;
}

/* Whether e loads from storage the nest stores to. */
static int reads_stored(const Vec *v, const Expr *e)
{
    if (!e)
        return 0;
    if (e->kind == E_LOAD && written(v, e->buf))
        return 1;
    if (e->kind == E_LOAD)
        for (int d = 0; d < e->buf->rank; d++)
            if (reads_stored(v, e->idx[d]))
                return 1;
    return reads_stored(v, e->a) || reads_stored(v, e->b) || reads_stored(v, e->c);
}

/* The same value wherever the nest is: it reads no nest variable, let,
 * assigned scalar or stored storage. */
static int invariant(const Vec *v, const Expr *e)
{
    if (!e)
        return 1;
    if (e->kind == E_VAR && (is_nest_var(v, e->v) || assigned(v, e->v) || outer_let(v, e->v)))
        return 0;
    if (e->kind == E_LOAD) {
        if (written(v, e->buf))
            return 0;
        for (int d = 0; d < e->buf->rank; d++)
            if (!invariant(v, e->idx[d]))
                return 0;
    }
    return invariant(v, e->a) && invariant(v, e->b) && invariant(v, e->c);
}

static int emit(Vec *v, int op, int d, int a, int b, int c)
{
    if (v->ninsn == VEC_INSNS)
        return 0;
    int64_t *in = v->insn[v->ninsn++];
    in[0] = op, in[1] = d, in[2] = a, in[3] = b, in[4] = c;
    return 1;
}

/* A temporary register, below the scalars'; -1 when none is left. */
static int temp(Vec *v)
{
    if (v->top >= RT_VEC_REGS - v->nscal)
        return -1;
    for (int i = 0; i < v->ncse; i++)     /* its old value is gone */
        if (v->cser[i] == v->top)
            v->cse[i] = v->cse[--v->ncse], v->cser[i] = v->cser[v->ncse], i--;
    return v->top++;
}

/* The strides of an access at each level; 0 when an index is not affine
 * in a nest variable. */
static int strides(const Vec *v, const Buf *b, Expr *const *idx, int64_t *s)
{
    for (int l = 0; l < v->nlev; l++) {
        s[l] = 0;
        for (int d = 0; d < b->rank; d++) {
            int affine = 1;
            int64_t c = ir_expr_coef(idx[d], v->lv[l]->v, &affine);
            if (!affine)
                return 0;
            s[l] += c * b->strides[d];
        }
    }
    return 1;
}

static int same_access(const Buf *b, Expr *const *idx, const Buf *c, Expr *const *jdx)
{
    if (b != c)
        return 0;
    for (int d = 0; d < b->rank; d++)
        if (!ir_expr_equal(idx[d], jdx[d]))
            return 0;
    return 1;
}

static int pointer(Vec *v, Buf *b, Expr **idx, const Var *x)
{
    for (int i = 0; i < v->nptr; i++)
        if (x ? v->ptr[i].var == x : v->ptr[i].buf && same_access(v->ptr[i].buf, v->ptr[i].idx, b, idx))
            return i;
    if (v->nptr == (int)(sizeof v->ptr / sizeof v->ptr[0]))
        return -1;
    VecPtr *p = &v->ptr[v->nptr];
    *p = (VecPtr){b, idx, x, {0}};
    if (b && !strides(v, b, idx, p->s))
        return -1;
    return v->nptr++;
}

static int scalar(Vec *v, const Expr *e)
{
    for (int i = 0; i < v->nscal; i++)
        if (ir_expr_equal(v->scal[i], e))
            return RT_VEC_REGS - 1 - i;
    if (v->nscal == VEC_SCALARS || RT_VEC_REGS - 1 - v->nscal < v->top)
        return -1;
    v->scal[v->nscal] = e;
    int r = RT_VEC_REGS - 1 - v->nscal;
    if (!emit(v, RT_V_SCAL, r, v->nscal, 0, 0))
        return -1;
    v->nscal++;
    return r;
}

static int load(Vec *v, const Expr *e)
{
    Buf *b = e->buf;
    if (b->dtype != DT_F32 || storage_block(ir_storage(b)->store))   /* blocks: C reads them */
        return -1;
    int w = written(v, b);
    if (w) {                      /* 5: the one access, never skipped over */
        const Stmt *st = v->wstore[w - 1];
        if (!same_access(st->buf, st->idx, b, e->idx))
            return -1;
        v->onerow = 1;
    }
    int p = pointer(v, b, e->idx, NULL), d = temp(v);
    if (p < 0 || d < 0 || (w && v->ptr[p].s[v->nlev - 1] == 0))
        return -1;
    return emit(v, RT_V_LD, d, p, 0, 0) ? d : -1;
}

/* The operators' rt_vec instructions (ir/scalar.def); -1: none. */
static const int vbin[B_COUNT] = {
#define BIN(e, kir, c, c_int, vec, flops, prec) [B_##e] = vec,
#define UN(e, ...)
#include "ir/scalar.def"
#undef BIN
#undef UN
};
static const int vun[U_COUNT] = {
#define BIN(e, ...)
#define UN(e, kir, c, c_int, vec, flops, ...) [U_##e] = vec,
#include "ir/scalar.def"
#undef BIN
#undef UN
};

static int compute(Vec *v, const Expr *e);

/* e is (x op1 y) op2 z, both of + - * / on f32, x op1 y computed in the
 * nest with a block first (x, or y when op1 commutes), and not x * y +- z
 * (a multiply-add, or a multiply-subtract cc would contract). */
static int pair(const Vec *v, const Expr *e)
{
    const Expr *in = e->a;
    if (e->type != T_F32 || e->op > B_DIV || in->kind != E_BIN || in->type != T_F32 ||
        in->op > B_DIV || invariant(v, in) || (in->op == B_MUL && e->op <= B_SUB))
        return 0;
    return !invariant(v, in->a) || in->op == B_ADD || in->op == B_MUL;
}

/* e is an f32 product computed in the nest (a multiply-add's half). */
static int product(const Vec *v, const Expr *e)
{
    return e->kind == E_BIN && e->op == B_MUL && e->type == T_F32 && !invariant(v, e);
}

/* e into a register (its number), or -1: not a vector value. An f32 value
 * or a comparison of them; integers only where loop-invariant. */
static int value(Vec *v, const Expr *e)
{
    if (invariant(v, e))
        return scalar(v, e);
    for (int i = 0; i < v->ncse; i++)    /* computed already, still held */
        if (v->cser[i] < v->top && ir_expr_equal(v->cse[i], e))
            return v->cser[i];
    int d = compute(v, e);
    if (d >= v->nlet && d == v->top - 1 && v->ncse < 32) {
        v->cse[v->ncse] = e;
        v->cser[v->ncse++] = d;
    }
    return d;
}

static int compute(Vec *v, const Expr *e)
{
    int mark = v->top, a, b, c = 0, op;
    switch (e->kind) {
    case E_LOAD: return load(v, e);
    case E_VAR:
        if (outer_let(v, e->v))   /* its value, computed where it is used */
            return value(v, outer_let(v, e->v)->e);
        return e->v->type == T_F32 && is_let(v, e->v) ? is_let(v, e->v) - 1 : -1;
    case E_BIN:
        op = vbin[e->op];
        if (op < 0 || (e->a->type != T_F32 && e->op < B_AND))
            return -1;
        if (e->op == B_ADD && (product(v, e->a) || product(v, e->b))) {
            const Expr *m = product(v, e->a) ? e->a : e->b, *z = m == e->a ? e->b : e->a;
            const Expr *x = invariant(v, m->a) ? m->b : m->a, *y = x == m->a ? m->b : m->a;
            if ((a = value(v, x)) < 0 || (b = value(v, y)) < 0 || (c = value(v, z)) < 0)
                return -1;
            op = RT_V_FMA;        /* x * y + z, contracted as cc contracts it */
            break;
        }
        if (pair(v, e)) {         /* (x op1 y) op2 z in one pass */
            const Expr *in = e->a, *x = in->a, *y = in->b;
            if (invariant(v, x))
                x = in->b, y = in->a;  /* + and *: the block first */
            if ((a = value(v, x)) < 0 || (b = value(v, y)) < 0 || (c = value(v, e->b)) < 0)
                return -1;
            op = RT_V_PAIR + 4 * in->op + e->op;
            break;
        }
        if ((a = value(v, e->a)) < 0 || (b = value(v, e->b)) < 0)
            return -1;
        break;
    case E_UN:
        op = vun[e->op];
        if (op < 0 || (a = value(v, e->a)) < 0)
            return -1;
        b = a;
        break;
    case E_SEL:
        op = RT_V_SEL;
        if ((a = value(v, e->a)) < 0 || (b = value(v, e->b)) < 0 || (c = value(v, e->c)) < 0)
            return -1;
        break;
    default: return -1;
    }
    v->top = mark;                /* operands' temporaries are free again */
    int d = temp(v);
    return d >= 0 && emit(v, op, d, a, b, c) ? d : -1;
}

static int asg(AsgOp op) { return op == A_SET ? 0 : op == A_ADD ? 1 : 2; }

/* Storage stored to, each through one access (5). */
static int stores(Vec *v)
{
    const Block *blk = &inner(v)->body;
    for (int i = 0; i < blk->n; i++) {
        const Stmt *s = blk->s[i];
        if (s->kind != S_STORE)
            continue;
        if (s->buf->dtype != DT_F32 || ir_storage(s->buf)->store != ST_F32)
            return 0;
        int w = written(v, s->buf);
        if (w) {                  /* stored twice an iteration: as if read */
            const Stmt *t = v->wstore[w - 1];
            if (!same_access(t->buf, t->idx, s->buf, s->idx))
                return 0;
            int64_t st[RT_VEC_LEVELS];
            if (!strides(v, s->buf, s->idx, st) || st[v->nlev - 1] == 0)
                return 0;
            v->onerow = 1;
            continue;
        }
        if (v->nwrote == 16)
            return 0;
        v->wrote[v->nwrote] = ir_storage(s->buf);
        v->wstore[v->nwrote++] = s;
    }
    return 1;
}

static int statement(Vec *v, const Stmt *s)
{
    int r, p;
    v->ncse = 0;
    switch (s->kind) {
    case S_LET:
        if (s->v->type != T_F32 || v->nlet == RT_VEC_REGS || (r = value(v, s->e)) < 0)
            return 0;
        if (r != v->top - 1) {    /* a scalar's or another let's: copy it */
            int d = temp(v);
            if (d < 0 || !emit(v, RT_V_MOV, d, r, 0, 0))
                return 0;
            r = d;
        }
        v->let[v->nlet++] = s->v;
        return r == v->nlet - 1;  /* lets hold the bottom registers */
    case S_SET:
        if (s->v->type != T_F32 || (r = value(v, s->e)) < 0)
            return 0;
        if (is_let(v, s->v)) {
            v->top = v->nlet;
            return emit(v, RT_V_MOV, is_let(v, s->v) - 1, r, asg(s->op), 0);
        }
        v->top = v->nlet;
        for (int i = 0; i < v->nptr; i++)
            if (v->ptr[i].var == s->v)
                return 0;         /* folded twice an iteration: not in loop order */
        if (s->op == A_SET || (p = pointer(v, NULL, NULL, s->v)) < 0)
            return 0;             /* 4 */
        return emit(v, RT_V_RED, 0, p, r, asg(s->op));
    case S_STORE:
        if (s->op == A_ADD && product(v, s->e)) {   /* += x * y, fused as cc fuses it */
            int x, y;
            if ((x = value(v, s->e->a)) < 0 || (y = value(v, s->e->b)) < 0 ||
                (p = pointer(v, s->buf, s->idx, NULL)) < 0)
                return 0;
            v->top = v->nlet;
            return emit(v, RT_V_ST, y, p, x, 3);
        }
        if ((r = value(v, s->e)) < 0 || (p = pointer(v, s->buf, s->idx, NULL)) < 0)
            return 0;
        v->top = v->nlet;
        int64_t *last = v->insn[v->ninsn - 1];
        if (s->op == A_SET && r >= v->nlet && last[1] == r && last[0] >= RT_V_ADD &&
            last[0] <= RT_V_PAIR_LAST && v->ninsn < VEC_INSNS) {   /* computed in place */
            memcpy(v->insn[v->ninsn], last, sizeof v->insn[0]);
            last[0] = RT_V_OUT, last[1] = r, last[2] = p, last[3] = last[4] = 0;
            v->ninsn++;
        }
        return emit(v, RT_V_ST, 0, p, r, asg(s->op));
    default: return 0;
    }
}

/* 1: the loops of the nest at s, its body simple. */
static int nest(Vec *v, const Stmt *s)
{
    for (;;) {
        if (s->kind != S_LOOP || (s->marks & MARK_PARALLEL) || v->nlev == RT_VEC_LEVELS)
            return 0;
        v->lv[v->nlev++] = s;
        const Block *b = &s->body;
        int lets = 0;
        while (lets < b->n - 1 && b->s[lets]->kind == S_LET && b->s[lets]->v->type == T_F32)
            lets++;
        if (b->n && lets == b->n - 1 && b->s[lets]->kind == S_LOOP) {
            for (int i = 0; i < lets; i++) {     /* f32 lets, then the loop */
                if (v->nolet == 16)
                    return 0;
                v->olet[v->nolet++] = b->s[i];
            }
            s = b->s[lets];
            continue;
        }
        for (int i = 0; i < s->body.n; i++) {
            StmtKind k = s->body.s[i]->kind;
            if (k != S_LET && k != S_SET && k != S_STORE)
                return 0;
        }
        break;
    }
    int64_t count = 1;
    for (int l = 0; l < v->nlev; l++) {
        const Stmt *lp = v->lv[l];
        for (int j = 0; j < v->nlev; j++)
            if (ir_expr_uses(lp->lo, v->lv[j]->v) || ir_expr_uses(lp->hi, v->lv[j]->v))
                return 0;
        for (int j = 0; j < v->nolet; j++)
            if (ir_expr_uses(lp->lo, v->olet[j]->v) || ir_expr_uses(lp->hi, v->olet[j]->v))
                return 0;
        if (count && lp->lo->kind == E_INT && lp->hi->kind == E_INT)
            count *= lp->hi->i - lp->lo->i;
        else
            count = 0;            /* known at run time only */
    }
    return count == 0 || count >= VEC_MIN;
}

static void print(CgCx *cx, const Vec *v, int depth)
{
    FILE *f = cx->f;
    int ind = depth * 4;
    fprintf(f, "%*s{\n%*sstatic const int64_t vc[] = {%d, %d, %d, %d, %d", ind, "", ind + 4, "",
            v->nlev, v->nptr, RT_VEC_REGS, v->ninsn, v->onerow);
    for (int i = 0; i < v->nptr; i++) {
        const VecPtr *p = &v->ptr[i];
        fprintf(f, ",\n%*s%d", ind + 8, "", p->buf ? (int)ir_storage(p->buf)->store : RT_F32);
        for (int l = 0; l < v->nlev; l++)
            fprintf(f, ", %lld", (long long)p->s[l]);
    }
    for (int i = 0; i < v->ninsn; i++)
        fprintf(f, ",\n%*s%lld, %lld, %lld, %lld, %lld", ind + 8, "", (long long)v->insn[i][0],
                (long long)v->insn[i][1], (long long)v->insn[i][2], (long long)v->insn[i][3],
                (long long)v->insn[i][4]);
    fprintf(f, "};\n");
    for (int l = 0; l < v->nlev; l++) {
        fprintf(f, "%*sint64_t i%d = ", ind + 4, "", v->lv[l]->v->id);
        cg_expr(cx, v->lv[l]->lo);
        fprintf(f, ";\n");
    }
    fprintf(f, "%*svoid *const vp[] = {", ind + 4, "");
    for (int i = 0; i < v->nptr; i++) {
        fputs(i ? ", (void *)" : "(void *)", f);
        if (v->ptr[i].buf) {
            fputc('&', f);
            cg_access(cx, v->ptr[i].buf, v->ptr[i].idx);
        } else {
            fprintf(f, "&v%d", v->ptr[i].var->id);
        }
    }
    fprintf(f, "};\n%*sconst float vs[] = {", ind + 4, "");
    for (int i = 0; i < v->nscal; i++) {
        fputs(i ? ", (float)(" : "(float)(", f);
        cg_expr(cx, v->scal[i]);
        fputc(')', f);
    }
    fprintf(f, "%s};\n%*sconst int64_t vn[] = {", v->nscal ? "" : "0", ind + 4, "");
    for (int l = 0; l < v->nlev; l++) {
        fputs(l ? ", (" : "(", f);
        cg_expr(cx, v->lv[l]->hi);
        fputs(") - (", f);
        cg_expr(cx, v->lv[l]->lo);
        fputc(')', f);
    }
    fprintf(f, "};\n%*srt_vec(vc, vp, vs, vn);\n", ind + 4, "");
    for (int l = 0; l < v->nlev; l++)
        fprintf(f, "%*s(void)i%d;\n", ind + 4, "", v->lv[l]->v->id);
    fprintf(f, "%*s}\n", ind, "");
}

int cg_vec_nest(CgCx *cx, const Stmt *s, int depth)
{
    Vec v;
    memset(&v, 0, sizeof v);
    if (!nest(&v, s) || !stores(&v))
        return 0;
    for (int i = 0; i < v.nolet; i++)      /* inlined, they must not change */
        if (reads_stored(&v, v.olet[i]->e) || assigned(&v, v.olet[i]->v))
            return 0;
    const Block *blk = &inner(&v)->body;
    for (int i = 0; i < blk->n; i++)
        if (!statement(&v, blk->s[i]))
            return 0;
    print(cx, &v, depth);
    return 1;
}
