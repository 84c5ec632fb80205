/* ir/verify.c: the loop IR's invariants, which every pass keeps and
 * every program ir_parse returns satisfies; the pipeline checks them
 * after each pass when asked to (PassCtx.verify: kiln's commands and
 * the tests ask).
 *
 * Per kernel: every var used in its scope, every local array inside the
 * block that declares it, every buffer the program's; nothing stored to
 * inputs, weights or derived weights (the open program stores to derived
 * weights and locals only), nor added to a 16-bit weight; calls well formed (ir_call_refusal); no
 * parallel loop inside another, no check inside a parallel one. Per
 * program: dense ids, views of real buffers, 16-bit storage and panels
 * only on weights; the derived weights the program reads are what the
 * open program makes, which makes each once and holds only weights,
 * derived weights and locals. A violation is a kiln bug: KILN_BUG. */
#include "ir.h"

#include <string.h>

/* ---- kernels ------------------------------------------------------------ */

typedef struct {
    const Prog *p;
    const Kernel *k;
    const Var **scope;
    int nscope, cap;
    Buf **locals;
    int nlocals, caplocals;
    int parallel;
    int open;                     /* the open program's */
    Arena *a;
} Verify;

static int in_scope(const Verify *vf, const Var *v)
{
    for (int i = 0; i < vf->nscope; i++)
        if (vf->scope[i] == v)
            return 1;
    return 0;
}

static void verify_buf(const Verify *vf, const Buf *b)
{
    if (b->id < 0 || b->id >= vf->p->nbufs || vf->p->bufs[b->id] != b)
        KILN_BUG("k%d uses b%d, which is not a buffer of the program", vf->k->id, b->id);
    if (b->kind == BK_LOCAL) {
        for (int i = 0; i < vf->nlocals; i++)
            if (vf->locals[i] == b)
                return;
        KILN_BUG("k%d uses local b%d outside its declaration's block", vf->k->id, b->id);
    }
}

static void verify_expr(Verify *vf, const Expr *e)
{
    if (!e)
        return;
    if (e->kind == E_VAR && !in_scope(vf, e->v))
        KILN_BUG("k%d uses %c%d out of its scope", vf->k->id,
                 e->v->kind == VAR_LOOP ? 'i' : 'v', e->v->id);
    if (e->kind == E_LOAD) {
        verify_buf(vf, e->buf);
        for (int i = 0; i < e->buf->rank; i++)
            verify_expr(vf, e->idx[i]);
    }
    verify_expr(vf, e->a);
    verify_expr(vf, e->b);
    verify_expr(vf, e->c);
}

static void verify_block(Verify *vf, const Block *blk);

static void verify_stmt(Verify *vf, const Stmt *s)
{
    verify_expr(vf, s->lo);
    verify_expr(vf, s->hi);
    verify_expr(vf, s->e);
    for (int i = 0; i < s->nargs; i++)
        verify_expr(vf, s->args[i]);
    if (s->kind == S_STORE) {
        verify_buf(vf, s->buf);
        const Buf *st = ir_storage(s->buf);
        int ok = vf->open ? st->kind == BK_DERIVED || st->kind == BK_LOCAL
                          : st->kind != BK_INPUT && st->kind != BK_WEIGHT && st->kind != BK_DERIVED;
        if (!ok)
            KILN_BUG("k%d stores to read-only b%d", vf->k->id, s->buf->id);
        if (storage_block(st->store))
            KILN_BUG("k%d stores to b%d, held as %s", vf->k->id, s->buf->id,
                     storage_name(st->store));
        if (st->store != ST_F32 && s->op != A_SET)
            KILN_BUG("k%d adds to b%d, held as %s", vf->k->id, s->buf->id,
                     storage_name(st->store));
        for (int i = 0; i < s->buf->rank; i++)
            verify_expr(vf, s->idx[i]);
    }
    if (s->kind == S_SET && !in_scope(vf, s->v))
        KILN_BUG("k%d assigns v%d out of its scope", vf->k->id, s->v->id);
    if (s->kind == S_CALL) {
        const char *why = s->call < CALL_COUNT ? ir_call_refusal(vf->a, s) : "unknown kernel";
        if (why)
            KILN_BUG("k%d: call: %s", vf->k->id, why);
        for (int i = 0; i < s->ntiles; i++) {
            verify_buf(vf, s->tiles[i].buf);
            for (int d = 0; d < s->tiles[i].buf->rank; d++)
                verify_expr(vf, s->tiles[i].idx[d]);
        }
    }
    if (s->kind == S_CHECK && vf->parallel)
        KILN_BUG("k%d has a check inside a parallel loop", vf->k->id);
    if (s->kind == S_LOCAL)
        ARR_PUSH(vf->a, vf->locals, vf->nlocals, vf->caplocals, s->buf);
    if (s->kind == S_LET)
        ARR_PUSH(vf->a, vf->scope, vf->nscope, vf->cap, s->v);
    if (s->kind == S_LOOP) {
        int par = s->marks & MARK_PARALLEL;
        if (par && vf->parallel)
            KILN_BUG("k%d has nested parallel loops", vf->k->id);
        int saved = vf->parallel;
        vf->parallel |= par;
        ARR_PUSH(vf->a, vf->scope, vf->nscope, vf->cap, s->v);
        verify_block(vf, &s->body);
        vf->nscope--;
        vf->parallel = saved;
    } else {
        verify_block(vf, &s->body);
        verify_block(vf, &s->els);
    }
}

static void verify_block(Verify *vf, const Block *blk)
{
    int nscope = vf->nscope, nlocals = vf->nlocals;
    for (int i = 0; i < blk->n; i++)
        verify_stmt(vf, blk->s[i]);
    vf->nscope = nscope;
    vf->nlocals = nlocals;
}

/* ---- buffers and programs ----------------------------------------------- */

int ir_packed_ok(const Prog *p, const Buf *b)
{
    const Node *n = b->node;
    int r = b->rank;
    if ((b->kind != BK_WEIGHT && b->kind != BK_DERIVED) || b->base || !n || n->rank < 2 ||
        r != n->rank + 1 ||
        b->dims[r - 1] < 1 || b->dims[r - 3] * b->dims[r - 1] != n->dims[r - 3] ||
        b->dims[r - 2] != n->dims[r - 2] || b->offset)
        return 0;
    for (int d = 0; d < r - 3; d++)
        if (b->dims[d] != n->dims[d])
            return 0;
    for (int i = 0; i < p->nbufs; i++)
        if (p->bufs[i]->base == b)
            return 0;
    int64_t stride = 1;
    for (int d = r - 1; d >= 0; d--) {
        if (b->strides[d] != stride)
            return 0;
        stride *= b->dims[d];
    }
    return 1;
}

int ir_derived_agree(const Module *m, const Buf *b)
{
    const Buf *o = ir_derived_made(m, b->index);
    if (!o || b->base || o->dtype != b->dtype || o->store != b->store || o->node != b->node)
        return 0;
    if (b->packed)
        return shape_count(b->rank, b->dims) == shape_count(o->rank, o->dims);
    return b->rank == o->rank &&
           !memcmp(b->dims, o->dims, sizeof b->dims[0] * (size_t)b->rank);
}

/* What the open program may hold: weights (as loaded, never packed),
 * the derived weights it makes (each index once, densely), views of
 * those, and locals. */
static void verify_open_buf(const Module *m, const Buf *b, char *made)
{
    const Buf *st = b->base ? b->base : b;
    if (st->kind != BK_WEIGHT && st->kind != BK_DERIVED && b->kind != BK_LOCAL)
        KILN_BUG("open b%d is %s storage", b->id, bufkind_name(st->kind));
    if (b->packed)
        KILN_BUG("open b%d is packed: the open program runs before packing", b->id);
    if (b->kind == BK_DERIVED && !b->base) {
        int n = ir_nderived(m);
        if (b->index < 0 || b->index >= n || made[b->index])
            KILN_BUG("open b%d is derived %d: not one of 0..%d once", b->id, b->index, n - 1);
        made[b->index] = 1;
    }
}

static void verify_one(const Module *m, const Prog *p, int open)
{
    char made[ir_nderived(m) + 1];
    memset(made, 0, sizeof made);
    for (int i = 0; i < p->nbufs; i++) {
        const Buf *b = p->bufs[i];
        if (b->id != i)
            KILN_BUG("buffer %d has id %d", i, b->id);
        if (b->base && (b->base->base || b->base->id >= p->nbufs || p->bufs[b->base->id] != b->base))
            KILN_BUG("b%d is a view of something that is not a buffer", i);
        if (b->packed && !ir_packed_ok(p, b))
            KILN_BUG("b%d is packed, but not a weight's panels", i);
        if (b->store != ST_F32 && ((b->kind != BK_WEIGHT && b->kind != BK_DERIVED) || b->base ||
                                   b->dtype != DT_F32))
            KILN_BUG("b%d is stored as %s, but is not an f32 weight", i, storage_name(b->store));
        if (b->kind == BK_DERIVED && !open && !ir_derived_agree(m, b))
            KILN_BUG("b%d is derived %d, which the open program does not make so", i, b->index);
        if (open)
            verify_open_buf(m, b, made);
    }
    for (int i = 0; i < p->nkernels; i++) {
        Verify vf = {p, p->kernels[i], NULL, 0, 0, NULL, 0, 0, 0, open, m->a};
        if (vf.k->id != i)
            KILN_BUG("kernel %d has id %d", i, vf.k->id);
        verify_block(&vf, &vf.k->body);
    }
}

void ir_verify_prog(const Module *m)
{
    verify_one(m, m->prog, 0);
    if (m->open)
        verify_one(m, m->open, 1);
}
