/* passes/fuse_nest.c: the loop-nest side of fuse: chains, what kernels
 * touch, access by rows, appending (or zipping) one nest into another,
 * and contracting an intermediate to a register or a local row. fuse.c
 * decides when; nothing here checks legality beyond its own contract. */
#include "fuse.h"

#include <string.h>

/* ---- chains -------------------------------------------------------------- */

int fuse_chain(Kernel *k, Stmt **L)
{
    int n = 0;
    Block *blk = &k->body;
    while (n < FUSE_MAXD && blk->n == 1 && blk->s[0]->kind == S_LOOP) {
        L[n] = blk->s[0];
        blk = &L[n++]->body;
    }
    return n;
}

Block *fuse_below(Kernel *k, Stmt **L, int d) { return d ? &L[d - 1]->body : &k->body; }

int fuse_same_expr(const Expr *x, const Expr *y, Var **vx, Var **vy, int n)
{
    if (x->kind != y->kind || x->type != y->type)
        return 0;
    switch (x->kind) {
    case E_INT: return x->i == y->i;
    case E_FLT: return x->f == y->f;
    case E_VAR:
        for (int i = 0; i < n; i++)
            if (vx[i] == x->v && vy[i] == y->v)
                return 1;
        return x->v == y->v;
    case E_LOAD:
        if (x->buf != y->buf)
            return 0;
        for (int i = 0; i < x->buf->rank; i++)
            if (!fuse_same_expr(x->idx[i], y->idx[i], vx, vy, n))
                return 0;
        return 1;
    case E_UN: return x->op == y->op && fuse_same_expr(x->a, y->a, vx, vy, n);
    case E_BIN:
        return x->op == y->op && fuse_same_expr(x->a, y->a, vx, vy, n) &&
               fuse_same_expr(x->b, y->b, vx, vy, n);
    case E_SEL:
        return fuse_same_expr(x->a, y->a, vx, vy, n) && fuse_same_expr(x->b, y->b, vx, vy, n) &&
               fuse_same_expr(x->c, y->c, vx, vy, n);
    }
    return 0;
}

int fuse_same_rows(Kernel *p, Kernel *c, int d)
{
    Stmt *lp[FUSE_MAXD], *lc[FUSE_MAXD];
    if (fuse_chain(p, lp) < d || fuse_chain(c, lc) < d)
        return 0;
    Var *vp[FUSE_MAXD], *vc[FUSE_MAXD];
    for (int j = 0; j < d; j++) {
        if (lp[j]->marks != lc[j]->marks || !fuse_same_expr(lp[j]->lo, lc[j]->lo, vp, vc, j) ||
            !fuse_same_expr(lp[j]->hi, lc[j]->hi, vp, vc, j))
            return 0;
        vp[j] = lp[j]->v;
        vc[j] = lc[j]->v;
    }
    return 1;
}

/* ---- what kernels touch -------------------------------------------------- */

static void touch_buf(Buf *b, int how, void *ctx)
{
    char *t = ctx;
    if (b->kind != BK_LOCAL)
        t[ir_storage(b)->id] |= (how & IR_RD ? FUSE_RD : 0) | (how & IR_WR ? FUSE_WR : 0);
}

char *fuse_touch(Arena *a, Prog *p, Kernel *k)
{
    char *t = arena_alloc(a, (size_t)p->nbufs + 1);
    ir_block_bufs(&k->body, touch_buf, t);
    return t;
}

static void trait_stmt(Stmt *s, void *ctx)
{
    FuseTraits *t = ctx;
    t->check |= s->kind == S_CHECK;
    t->call |= s->kind == S_CALL;
    t->reduce |= s->kind == S_LOOP && (s->marks & MARK_REDUCE);
    if (s->kind == S_STORE && ir_storage(s->buf)->kind == BK_STATE)
        t->state = ir_storage(s->buf);
}

FuseTraits fuse_traits(Kernel *k)
{
    FuseTraits t = {0, 0, 0, NULL};
    ir_block_walk(&k->body, trait_stmt, &t);
    return t;
}

/* ---- rows ---------------------------------------------------------------- */

/* Whether index e always equals the loop's variable: it is the variable,
 * or the loop runs once and e is its one value (lowering indexes a dim of
 * size 1 by 0). */
static int is_loop_index(const Expr *e, const Stmt *loop)
{
    if (e->kind == E_VAR)
        return e->v == loop->v;
    return e->kind == E_INT && loop->lo->kind == E_INT && loop->hi->kind == E_INT &&
           loop->lo->i == e->i && loop->hi->i == e->i + 1;
}

typedef struct {
    Buf *s;                       /* the storage */
    Stmt **L;                     /* the chain */
    int depth;                    /* shallowest over its accesses so far */
    Buf *via;                     /* the Buf they go through */
    int mixed;                    /* through more than one */
} Rows;

static void rows_at(Rows *r, Buf *b, Expr **idx)
{
    if (b->kind == BK_LOCAL || ir_storage(b) != r->s)
        return;
    r->mixed |= r->via && r->via != b;
    r->via = b;
    int d = 0;
    while (d < r->depth && d < b->rank && is_loop_index(idx[d], r->L[d]))
        d++;
    r->depth = d;
}

static void rows_expr(Expr *e, void *ctx)
{
    if (e->kind == E_LOAD) {
        rows_at(ctx, e->buf, e->idx);
        for (int i = 0; i < e->buf->rank; i++)
            rows_expr(e->idx[i], ctx);
    }
    if (e->a) rows_expr(e->a, ctx);
    if (e->b) rows_expr(e->b, ctx);
    if (e->c) rows_expr(e->c, ctx);
}

static void rows_stmt(Stmt *s, void *ctx)
{
    ir_stmt_exprs(s, rows_expr, ctx);
    if (s->kind == S_STORE)
        rows_at(ctx, s->buf, s->idx);
}

int fuse_row_depth(Kernel *k, Buf *s, Buf **via)
{
    Stmt *L[FUSE_MAXD];
    Rows r = {s, L, fuse_chain(k, L), NULL, 0};
    ir_block_walk(&k->body, rows_stmt, &r);
    *via = r.via;
    return r.mixed || !r.via ? 0 : r.depth;
}

typedef struct {
    Stmt **L;
    int d;
    char *seen;                   /* per storage id */
} Invariant;

static void invariant_expr(Expr *e, void *ctx)
{
    Invariant *iv = ctx;
    if (e->kind == E_LOAD) {
        int uses = 0;
        for (int i = 0; i < e->buf->rank; i++) {
            for (int j = 0; j < iv->d; j++)
                uses |= ir_expr_uses(e->idx[i], iv->L[j]->v);
            invariant_expr(e->idx[i], ctx);
        }
        if (!uses && e->buf->kind != BK_LOCAL)
            iv->seen[ir_storage(e->buf)->id] = 1;
    }
    if (e->a) invariant_expr(e->a, ctx);
    if (e->b) invariant_expr(e->b, ctx);
    if (e->c) invariant_expr(e->c, ctx);
}

static void invariant_stmt(Stmt *s, void *ctx) { ir_stmt_exprs(s, invariant_expr, ctx); }

int64_t fuse_row_invariant(Arena *a, Prog *p, Kernel *c, int d, const char **which)
{
    Stmt *L[FUSE_MAXD];
    fuse_chain(c, L);
    Invariant iv = {L, d, arena_alloc(a, (size_t)p->nbufs + 1)};
    ir_block_walk(&c->body, invariant_stmt, &iv);
    int64_t bytes = 0;
    *which = "";
    for (int b = 0; b < p->nbufs; b++)
        if (iv.seen[b]) {
            bytes += shape_count(p->bufs[b]->rank, p->bufs[b]->dims) * 4;
            *which = arena_printf(a, "%s%sb%d", *which, **which ? ", " : "", b);
        }
    return bytes;
}

/* ---- appending one nest to another --------------------------------------- */

static int same_loop(const Stmt *x, const Stmt *y)
{
    return x->kind == S_LOOP && y->kind == S_LOOP && x->marks == y->marks &&
           fuse_same_expr(x->lo, y->lo, NULL, NULL, 0) &&
           fuse_same_expr(x->hi, y->hi, NULL, NULL, 0);
}

/* x's statements and y's, interleaved: each side's statements up to its
 * next loop, then the two loops as one when their bounds agree (zipped
 * in turn), and at the first disagreement the rest of x, then of y. */
static Block zip(Arena *a, Block *x, Block *y, int *zipped)
{
    Block out = {NULL, 0, 0};
    int i = 0, j = 0;
    for (;;) {
        while (i < x->n && x->s[i]->kind != S_LOOP)
            ir_push(a, &out, x->s[i++]);
        while (j < y->n && y->s[j]->kind != S_LOOP)
            ir_push(a, &out, y->s[j++]);
        if (i == x->n || j == y->n || !same_loop(x->s[i], y->s[j]))
            break;
        Stmt *lx = x->s[i++], *ly = y->s[j++];
        ir_block_subst(a, &ly->body, ly->v, e_var(a, lx->v));
        lx->body = zip(a, &lx->body, &ly->body, zipped);
        ir_push(a, &out, lx);
        (*zipped)++;
    }
    while (i < x->n)
        ir_push(a, &out, x->s[i++]);
    while (j < y->n)
        ir_push(a, &out, y->s[j++]);
    return out;
}

int fuse_append(Arena *a, Prog *p, Kernel *dst, Kernel *c, int d, int zipping)
{
    Stmt *ld[FUSE_MAXD], *lc[FUSE_MAXD];
    fuse_chain(dst, ld);
    fuse_chain(c, lc);
    Var *from[FUSE_MAXD];
    Expr *to[FUSE_MAXD];
    for (int j = 0; j < d; j++) {
        from[j] = lc[j]->v;
        to[j] = e_var(a, ld[j]->v);
    }
    Block src = ir_block_clone(a, p, dst, fuse_below(c, lc, d), from, to, d);
    Block *blk = fuse_below(dst, ld, d);
    int zipped = 0;
    if (zipping)
        *blk = zip(a, blk, &src, &zipped);
    else
        for (int i = 0; i < src.n; i++)
            ir_push(a, blk, src.s[i]);
    for (int i = 0; i < c->nnodes; i++) {
        int j = 0;
        while (j < dst->nnodes && dst->nodes[j] != c->nodes[i])
            j++;
        if (j == dst->nnodes)         /* moe's router and experts share a node */
            ARR_PUSH(a, dst->nodes, dst->nnodes, dst->capnodes, c->nodes[i]);
    }
    for (int i = 0; i < c->notes.n; i++)
        ARR_PUSH(a, dst->notes.v, dst->notes.n, dst->notes.cap, c->notes.v[i]);
    return zipped;
}

/* ---- contraction --------------------------------------------------------- */

/* Rewrites the accesses to storage s: loads to `rep`, or loads and stores
 * to the local row `row` without their first d indices. */
typedef struct {
    Arena *a;
    Buf *s, *row;
    Expr *rep;
    int d;
} Rw;

static int is_s(const Rw *r, Buf *b) { return b->kind != BK_LOCAL && ir_storage(b) == r->s; }

static Expr *rw_load(Expr *e, Expr **idx, void *ctx)
{
    const Rw *r = ctx;
    if (!is_s(r, e->buf))
        return NULL;
    return r->rep ? r->rep : e_load(r->a, r->row, idx + r->d);
}

static Expr *rw_expr(Rw *r, Expr *e) { return ir_expr_map_loads(r->a, e, rw_load, r); }

/* Rewrites blk's statements from `from` on, and the blocks in them. */
static void rw_block(Rw *r, Block *blk, int from)
{
    for (int i = from; i < blk->n; i++) {
        Stmt *s = blk->s[i];
        if (s->lo) s->lo = rw_expr(r, s->lo);
        if (s->hi) s->hi = rw_expr(r, s->hi);
        if (s->e) s->e = rw_expr(r, s->e);
        for (int j = 0; j < s->nargs; j++)
            s->args[j] = rw_expr(r, s->args[j]);
        if (s->kind == S_STORE) {
            for (int j = 0; j < s->buf->rank; j++)
                s->idx[j] = rw_expr(r, s->idx[j]);
            if (is_s(r, s->buf)) {
                s->idx += r->d;
                s->buf = r->row;
            }
        }
        rw_block(r, &s->body, 0);
        rw_block(r, &s->els, 0);
    }
}

/* Stores of s in blk and the blocks in it: how many, and the last one. */
typedef struct {
    Buf *s;
    Block *blk;
    int at, n;
} Site;

static void find_stores(Site *st, Block *blk)
{
    for (int i = 0; i < blk->n; i++) {
        Stmt *s = blk->s[i];
        if (s->kind == S_STORE && s->buf->kind != BK_LOCAL && ir_storage(s->buf) == st->s) {
            st->blk = blk;
            st->at = i;
            st->n++;
        }
        find_stores(st, &s->body);
        find_stores(st, &s->els);
    }
}

/* The loop in blk (or the blocks in it) whose variable is v, or NULL. */
static Stmt *loop_of(Block *blk, const Var *v)
{
    for (int i = 0; i < blk->n; i++) {
        Stmt *s = blk->s[i], *l;
        if (s->kind == S_LOOP && s->v == v)
            return s;
        if ((l = loop_of(&s->body, v)) || (l = loop_of(&s->els, v)))
            return l;
    }
    return NULL;
}

/* Loads of s: how many, and whether any is not at the store's index
 * (loops[i]: the loop of index i's variable); whether local v is set. */
typedef struct {
    Buf *s;
    Expr **idx;
    Stmt **loops;
    const Var *v;
    int loads, other, assigned;
} Uses;

static void uses_load(Expr *e, void *ctx)
{
    Uses *u = ctx;
    if (e->buf->kind == BK_LOCAL || ir_storage(e->buf) != u->s)
        return;
    u->loads++;
    u->other |= e->buf != u->s;
    for (int i = 0; i < e->buf->rank && e->buf == u->s; i++)
        u->other |= !fuse_same_expr(e->idx[i], u->idx[i], NULL, NULL, 0) &&
                    !(u->loops[i] && is_loop_index(e->idx[i], u->loops[i]));
}

static void uses_stmt(Stmt *s, void *ctx)
{
    Uses *u = ctx;
    ir_stmt_loads(s, uses_load, ctx);
    u->assigned |= s->kind == S_SET && s->v == u->v;
}

static Uses uses(Block *blk, int from, Buf *s, Expr **idx, Stmt **loops, const Var *v)
{
    Uses u = {s, idx, loops, v, 0, 0, 0};
    Block tail = {blk->s + from, blk->n - from, 0};
    ir_block_walk(&tail, uses_stmt, &u);
    return u;
}

static void drop_stmt(Block *blk, int at)
{
    memmove(blk->s + at, blk->s + at + 1, sizeof *blk->s * (size_t)(blk->n - at - 1));
    blk->n--;
}

int fuse_to_register(Arena *a, Kernel *k, Buf *s)
{
    Site st = {s, NULL, 0, 0};
    find_stores(&st, &k->body);
    if (st.n != 1)
        return 0;
    Stmt *store = st.blk->s[st.at];
    if (store->buf != s || store->op != A_SET || store->e->type != T_F32 || s->dtype != DT_F32)
        return 0;
    Stmt *loops[KILN_MAX_RANK];
    for (int i = 0; i < s->rank; i++) {
        Expr *x = store->idx[i];
        loops[i] = x->kind == E_VAR ? loop_of(&k->body, x->v) : NULL;
        if (x->kind != E_INT && !loops[i])
            return 0;                 /* an index that is not a loop's */
    }
    Expr *e = store->e;
    Uses all = uses(&k->body, 0, s, store->idx, loops, NULL);
    Uses after = uses(st.blk, st.at + 1, s, store->idx, loops, e->kind == E_VAR ? e->v : NULL);
    if (after.loads != all.loads || after.other)
        return 0;
    Rw r = {a, s, NULL, e, 0};
    if (e->kind == E_FLT || (e->kind == E_VAR && !after.assigned)) {
        drop_stmt(st.blk, st.at);     /* the value itself stands in */
        rw_block(&r, st.blk, st.at);
    } else {
        store->kind = S_LET;
        store->v = ir_var(a, k, VAR_LOCAL, T_F32);
        store->buf = NULL;
        store->idx = NULL;
        r.rep = e_var(a, store->v);
        rw_block(&r, st.blk, st.at + 1);
    }
    return 1;
}

int64_t fuse_to_local_row(Arena *a, Prog *p, Kernel *k, Buf *s, int64_t limit)
{
    Stmt *L[FUSE_MAXD];
    Buf *via;
    fuse_chain(k, L);
    int d = fuse_row_depth(k, s, &via);
    int64_t bytes = d ? shape_count(s->rank - d, s->dims + d) * 4 : 0;
    if (d < 1 || d >= s->rank || via != s || bytes > limit)
        return 0;
    Block *blk = fuse_below(k, L, d), decl = {NULL, 0, 0};
    Stmt *local = s_local(a, p, &decl, s->dtype, s->rank - d, s->dims + d);
    ir_push(a, blk, local);
    memmove(blk->s + 1, blk->s, sizeof *blk->s * (size_t)(blk->n - 1));
    blk->s[0] = local;
    Rw r = {a, s, local->buf, NULL, d};
    rw_block(&r, blk, 1);
    return bytes;
}
