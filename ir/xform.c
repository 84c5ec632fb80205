/* ir/xform.c: what passes rewrite the loop IR with: walking, substituting
 * variables, cloning blocks between kernels, read/write queries,
 * renumbering, and where weights and derived weights are held. The
 * verifier run after every pass is ir/verify.c. */
#include "ir.h"

#include <string.h>

Buf *ir_storage(Buf *b) { return b->base ? b->base : b; }

/* ---- walking ------------------------------------------------------------ */

void ir_stmt_exprs(Stmt *s, ExprFn fn, void *ctx)
{
    if (s->lo) fn(s->lo, ctx);
    if (s->hi) fn(s->hi, ctx);
    if (s->e) fn(s->e, ctx);
    if (s->kind == S_STORE)
        for (int i = 0; i < s->buf->rank; i++)
            fn(s->idx[i], ctx);
    for (int i = 0; i < s->nargs; i++)
        fn(s->args[i], ctx);
    for (int i = 0; i < s->ntiles; i++)
        for (int d = 0; d < s->tiles[i].buf->rank; d++)
            fn(s->tiles[i].idx[d], ctx);
}

void ir_expr_loads(Expr *e, ExprFn fn, void *ctx)
{
    if (e->kind == E_LOAD) {
        fn(e, ctx);
        for (int d = 0; d < e->buf->rank; d++)
            ir_expr_loads(e->idx[d], fn, ctx);
    }
    if (e->a) ir_expr_loads(e->a, fn, ctx);
    if (e->b) ir_expr_loads(e->b, fn, ctx);
    if (e->c) ir_expr_loads(e->c, fn, ctx);
}

typedef struct {
    ExprFn fn;
    void *ctx;
} LoadsFn;

static void stmt_loads(Expr *e, void *ctx)
{
    const LoadsFn *l = ctx;
    ir_expr_loads(e, l->fn, l->ctx);
}

void ir_stmt_loads(Stmt *s, ExprFn fn, void *ctx)
{
    LoadsFn l = {fn, ctx};
    ir_stmt_exprs(s, stmt_loads, &l);
}

typedef struct {
    BufFn fn;
    void *ctx;
} BufsFn;

static void load_buf(Expr *e, void *ctx)
{
    const BufsFn *b = ctx;
    b->fn(e->buf, IR_RD, b->ctx);
}

static void stmt_bufs(Stmt *s, void *ctx)
{
    const BufsFn *b = ctx;
    if (s->kind == S_STORE)
        b->fn(s->buf, IR_WR, b->ctx);
    for (int i = 0; i < s->ntiles; i++)
        b->fn(s->tiles[i].buf, i == call_table[s->call].written ? IR_RD | IR_WR : IR_RD, b->ctx);
    ir_stmt_loads(s, load_buf, ctx);
}

void ir_block_bufs(Block *blk, BufFn fn, void *ctx)
{
    BufsFn b = {fn, ctx};
    ir_block_walk(blk, stmt_bufs, &b);
}

void ir_stmt_map(Stmt *s, ExprMap fn, void *ctx)
{
    if (s->lo) s->lo = fn(s->lo, ctx);
    if (s->hi) s->hi = fn(s->hi, ctx);
    if (s->e) s->e = fn(s->e, ctx);
    if (s->kind == S_STORE)
        for (int i = 0; i < s->buf->rank; i++)
            s->idx[i] = fn(s->idx[i], ctx);
    for (int i = 0; i < s->nargs; i++)
        s->args[i] = fn(s->args[i], ctx);
    for (int i = 0; i < s->ntiles; i++)
        for (int d = 0; d < s->tiles[i].buf->rank; d++)
            s->tiles[i].idx[d] = fn(s->tiles[i].idx[d], ctx);
}

Expr *ir_expr_map_loads(Arena *a, Expr *e, LoadMap fn, void *ctx)
{
    Expr *x, *y, *z;
    switch (e->kind) {
    case E_INT:
    case E_FLT:
    case E_VAR: return e;
    case E_LOAD: {
        Expr *idx[KILN_MAX_RANK], *r;
        int changed = 0;
        for (int d = 0; d < e->buf->rank; d++) {
            idx[d] = ir_expr_map_loads(a, e->idx[d], fn, ctx);
            changed |= idx[d] != e->idx[d];
        }
        if ((r = fn(e, idx, ctx)))
            return r;
        return changed ? e_load(a, e->buf, idx) : e;
    }
    case E_UN:
        x = ir_expr_map_loads(a, e->a, fn, ctx);
        return x == e->a ? e : e_un(a, (UnOp)e->op, x);
    case E_BIN:
        x = ir_expr_map_loads(a, e->a, fn, ctx);
        y = ir_expr_map_loads(a, e->b, fn, ctx);
        return x == e->a && y == e->b ? e : e_bin(a, (BinOp)e->op, x, y);
    case E_SEL:
        x = ir_expr_map_loads(a, e->a, fn, ctx);
        y = ir_expr_map_loads(a, e->b, fn, ctx);
        z = ir_expr_map_loads(a, e->c, fn, ctx);
        return x == e->a && y == e->b && z == e->c ? e : e_sel(a, x, y, z);
    }
    KILN_BUG("bad expr kind %d", e->kind);
}

void ir_block_walk(Block *blk, StmtFn fn, void *ctx)
{
    for (int i = 0; i < blk->n; i++) {
        Stmt *s = blk->s[i];
        fn(s, ctx);
        ir_block_walk(&s->body, fn, ctx);
        ir_block_walk(&s->els, fn, ctx);
    }
}

/* ---- substitution -------------------------------------------------------- */

/* A variable map for cloning and substitution. */
typedef struct {
    Arena *a;
    const Var **from;
    Expr **to;
    int n, capf, capt;
    Buf **bfrom, **bto;          /* local buffers re-declared by a clone */
    int nb, capbf, capbt;
} Map;

static Expr *lookup(const Map *mp, const Var *v)
{
    for (int i = mp->n - 1; i >= 0; i--)
        if (mp->from[i] == v)
            return mp->to[i];
    return NULL;
}

static Buf *lookup_buf(const Map *mp, Buf *b)
{
    for (int i = 0; i < mp->nb; i++)
        if (mp->bfrom[i] == b)
            return mp->bto[i];
    return b;
}

static Expr *map_expr(const Map *mp, Expr *e)
{
    Arena *a = mp->a;
    switch (e->kind) {
    case E_INT:
    case E_FLT: return e;
    case E_VAR: {
        Expr *r = lookup(mp, e->v);
        return r ? r : e;
    }
    case E_LOAD: {
        Expr *idx[KILN_MAX_RANK];
        for (int i = 0; i < e->buf->rank; i++)
            idx[i] = map_expr(mp, e->idx[i]);
        return e_load(a, lookup_buf(mp, e->buf), idx);
    }
    case E_BIN: return e_bin(a, (BinOp)e->op, map_expr(mp, e->a), map_expr(mp, e->b));
    case E_UN: return e_un(a, (UnOp)e->op, map_expr(mp, e->a));
    case E_SEL: return e_sel(a, map_expr(mp, e->a), map_expr(mp, e->b), map_expr(mp, e->c));
    }
    KILN_BUG("bad expr kind %d", e->kind);
}

Expr *ir_subst(Arena *a, Expr *e, const Var *v, Expr *r)
{
    Map mp = {a, &v, &r, 1, 1, 1, NULL, NULL, 0, 0, 0};
    return map_expr(&mp, e);
}

static void map_stmt_exprs(const Map *mp, Stmt *s)
{
    if (s->lo) s->lo = map_expr(mp, s->lo);
    if (s->hi) s->hi = map_expr(mp, s->hi);
    if (s->e) s->e = map_expr(mp, s->e);
    if (s->kind == S_STORE) {
        s->buf = lookup_buf(mp, s->buf);
        for (int i = 0; i < s->buf->rank; i++)
            s->idx[i] = map_expr(mp, s->idx[i]);
    }
    for (int i = 0; i < s->nargs; i++)
        s->args[i] = map_expr(mp, s->args[i]);
    for (int i = 0; i < s->ntiles; i++) {
        Tile *t = &s->tiles[i];
        t->buf = lookup_buf(mp, t->buf);
        for (int d = 0; d < t->buf->rank; d++)
            t->idx[d] = map_expr(mp, t->idx[d]);
    }
}

static void map_block(const Map *mp, Block *blk)
{
    for (int i = 0; i < blk->n; i++) {
        map_stmt_exprs(mp, blk->s[i]);
        map_block(mp, &blk->s[i]->body);
        map_block(mp, &blk->s[i]->els);
    }
}

void ir_block_subst(Arena *a, Block *blk, const Var *v, Expr *r)
{
    Map mp = {a, &v, &r, 1, 1, 1, NULL, NULL, 0, 0, 0};
    map_block(&mp, blk);
}

/* ---- cloning --------------------------------------------------------------- */

static void map_add(Map *mp, const Var *from, Expr *to)
{
    int n = mp->n;
    ARR_PUSH(mp->a, mp->from, n, mp->capf, from);
    ARR_PUSH(mp->a, mp->to, mp->n, mp->capt, to);
}

static Block clone_block(Map *mp, Prog *p, Kernel *k, const Block *blk);

static Stmt *clone_stmt(Map *mp, Prog *p, Kernel *k, const Stmt *s)
{
    Arena *a = mp->a;
    Stmt *c = arena_dup(a, s, sizeof *s);
    if (s->kind == S_STORE || s->kind == S_CHECK)
        c->idx = s->kind == S_STORE && s->buf->rank
                     ? arena_dup(a, s->idx, sizeof *s->idx * (size_t)s->buf->rank) : NULL;
    if (s->nargs)
        c->args = arena_dup(a, s->args, sizeof *s->args * (size_t)s->nargs);
    if (s->ntiles) {
        c->tiles = arena_dup(a, s->tiles, sizeof *s->tiles * (size_t)s->ntiles);
        for (int i = 0; i < s->ntiles; i++)
            if (s->tiles[i].buf->rank)
                c->tiles[i].idx = arena_dup(a, s->tiles[i].idx,
                                            sizeof *s->tiles[i].idx * (size_t)s->tiles[i].buf->rank);
    }
    map_stmt_exprs(mp, c);
    if (s->kind == S_LOCAL) {
        Buf *b = ir_buf_new(a, p, BK_LOCAL, s->buf->dtype, s->buf->rank, s->buf->dims);
        int nb = mp->nb;
        ARR_PUSH(a, mp->bfrom, nb, mp->capbf, s->buf);
        ARR_PUSH(a, mp->bto, mp->nb, mp->capbt, b);
        c->buf = b;
    }
    if (s->kind == S_SET) {
        Expr *r = lookup(mp, s->v);
        if (r && r->kind != E_VAR)
            KILN_BUG("clone maps an assigned local to an expression");
        if (r)
            c->v = r->v;
    }
    if (s->kind == S_LOOP || s->kind == S_LET) {
        c->v = ir_var(a, k, s->v->kind, s->v->type);
        map_add(mp, s->v, e_var(a, c->v));
    }
    c->body = clone_block(mp, p, k, &s->body);
    c->els = clone_block(mp, p, k, &s->els);
    return c;
}

static Block clone_block(Map *mp, Prog *p, Kernel *k, const Block *blk)
{
    Block c = {NULL, 0, 0};
    for (int i = 0; i < blk->n; i++)
        ir_push(mp->a, &c, clone_stmt(mp, p, k, blk->s[i]));
    return c;
}

Block ir_block_clone(Arena *a, Prog *p, Kernel *k, const Block *blk, Var **from,
                     Expr **to, int nmap)
{
    Map mp = {a, NULL, NULL, 0, 0, 0, NULL, NULL, 0, 0, 0};
    for (int i = 0; i < nmap; i++)
        map_add(&mp, from[i], to[i]);
    return clone_block(&mp, p, k, blk);
}

/* ---- queries ----------------------------------------------------------------- */

int ir_expr_uses(const Expr *e, const Var *v)
{
    if (!e)
        return 0;
    if (e->kind == E_VAR)
        return e->v == v;
    if (e->kind == E_LOAD) {
        for (int i = 0; i < e->buf->rank; i++)
            if (ir_expr_uses(e->idx[i], v))
                return 1;
        return 0;
    }
    return ir_expr_uses(e->a, v) || ir_expr_uses(e->b, v) || ir_expr_uses(e->c, v);
}

typedef struct {
    const Var *v;
    int found;
} Query;

static void uses_var(Expr *e, void *ctx)
{
    Query *q = ctx;
    q->found |= ir_expr_uses(e, q->v);
}

static void stmt_uses_var(Stmt *s, void *ctx)
{
    Query *q = ctx;
    ir_stmt_exprs(s, uses_var, ctx);
    q->found |= s->kind == S_SET && s->v == q->v;
}

int ir_block_uses(const Block *blk, const Var *v)
{
    Query q = {v, 0};
    ir_block_walk((Block *)blk, stmt_uses_var, &q);
    return q.found;
}

/* Whether a statement of blk touches b's storage as `how` asks (IR_RD:
 * loads, and every tile of a call, which accumulates into the one it
 * updates; IR_WR: stores, and that tile). */
typedef struct {
    Buf *b;
    int how, found;
} Touch;

static void touch_buf(Buf *b, int how, void *ctx)
{
    Touch *t = ctx;
    t->found |= (how & t->how) && ir_storage(b) == t->b;
}

static int touches(const Block *blk, Buf *b, int how)
{
    Touch t = {ir_storage(b), how, 0};
    ir_block_bufs((Block *)blk, touch_buf, &t);
    return t.found;
}

int ir_block_reads(const Block *blk, Buf *b) { return touches(blk, b, IR_RD); }
int ir_block_writes(const Block *blk, Buf *b) { return touches(blk, b, IR_WR); }

/* ---- renumbering ------------------------------------------------------------- */

static void number_var(Stmt *s, void *ctx)
{
    int *next = ctx;
    if (s->kind == S_LOOP || s->kind == S_LET)
        s->v->id = (*next)++;
}

void ir_kernel_renumber(Kernel *k)
{
    int next = 0;
    ir_block_walk(&k->body, number_var, &next);
    k->nvars = next;
}

static void mark_load(Expr *e, void *ctx)
{
    char *used = ctx;
    used[e->buf->id] = 1;
    used[ir_storage(e->buf)->id] = 1;
}

static void mark_stmt(Stmt *s, void *ctx)
{
    char *used = ctx;
    if (s->buf) {
        used[s->buf->id] = 1;
        used[ir_storage(s->buf)->id] = 1;
    }
    for (int i = 0; i < s->ntiles; i++) {
        used[s->tiles[i].buf->id] = 1;
        used[ir_storage(s->tiles[i].buf)->id] = 1;
    }
    ir_stmt_loads(s, mark_load, ctx);
}

void ir_prog_renumber(Prog *p)
{
    for (int i = 0; i < p->nkernels; i++) {
        p->kernels[i]->id = i;
        ir_kernel_renumber(p->kernels[i]);
    }
    char used[p->nbufs + 1];
    memset(used, 0, sizeof used);
    for (int i = 0; i < p->nbufs; i++)
        p->bufs[i]->id = i;
    for (int i = 0; i < p->nkernels; i++)
        ir_block_walk(&p->kernels[i]->body, mark_stmt, used);
    int n = 0;
    for (int i = 0; i < p->nbufs; i++) {
        Buf *b = p->bufs[i];
        if (used[i] || (b->kind != BK_TEMP && b->kind != BK_LOCAL))
            p->bufs[n++] = b;
    }
    p->nbufs = n;
    for (int i = 0; i < n; i++)
        p->bufs[i]->id = i;
}

void ir_prog_layout(Prog *p)
{
    int64_t off = 0;
    for (int i = 0; i < p->nbufs; i++) {
        Buf *b = p->bufs[i];
        if (b->kind != BK_TEMP || b->base)
            continue;
        b->arena_off = off;
        off += (shape_count(b->rank, b->dims) * 4 + 63) / 64 * 64;
    }
    p->arena_bytes = off;
}

/* ---- weights and derived weights ---------------------------------------- */

int ir_nderived(const Module *m)
{
    int n = 0;
    for (int i = 0; m->open && i < m->open->nbufs; i++)
        n += m->open->bufs[i]->kind == BK_DERIVED;
    return n;
}

int ir_held_index(const Module *m, const Buf *b)
{
    return b->kind == BK_WEIGHT ? b->index : b->kind == BK_DERIVED ? m->nweights + b->index : -1;
}

const Buf *ir_derived_made(const Module *m, int index)
{
    for (int i = 0; m->open && i < m->open->nbufs; i++)
        if (m->open->bufs[i]->kind == BK_DERIVED && m->open->bufs[i]->index == index)
            return m->open->bufs[i];
    return NULL;
}

typedef struct {
    const Module *m;
    char *read;
} Held;

static void held_buf(Buf *b, int how, void *ctx)
{
    Held *h = ctx;
    int i = ir_held_index(h->m, ir_storage(b));
    if (i >= 0 && (how & IR_RD))
        h->read[i] = 1;
}

void ir_held_reads(const Module *m, const Prog *p, char *read)
{
    Held h = {m, read};
    for (int i = 0; i < p->nkernels; i++)
        ir_block_bufs(&p->kernels[i]->body, held_buf, &h);
}
