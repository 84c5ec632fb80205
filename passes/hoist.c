/* passes/hoist.c: hoist-weights: kernels that read only weights run once,
 * when the model is opened, instead of at every call.
 *
 * What such a kernel computes is the same at every call: an imported
 * qwen3_moe's stacking of each layer's experts (every expert's matrix
 * reshaped and concatenated into the [experts, rows, cols] tensor that
 * moe takes) copied every expert's weights at every decode step. The
 * kernel moves to the open program (Module.open), which NAME_open runs
 * once the weights are loaded, before any is packed; the intermediate it
 * wrote becomes a derived weight (BK_DERIVED), held from open to close
 * beside the weights, which the kernels left read as they read a weight
 * (so tile packs it for gemm calls as it packs a weight). A weight only
 * the open program reads is freed once it has run (codegen/emit.c).
 *
 * Contract: the kernels left compute the same values from the same
 * weights: the open program runs the moved loops unchanged, once, in
 * program order. It reads only weights (as loaded) and derived weights,
 * and writes only derived weights, which nothing else writes. Runs before
 * tile (which packs what it may) and plan-memory (derived weights are not
 * in the arena).
 *
 * 1. Candidates, to a fixed point: a kernel that loads only weights and
 *    derived weights (not packed: the open program runs before packing),
 *    intermediates and locals, and stores only to intermediates and
 *    locals; then, until nothing changes, a candidate is dropped when an
 *    intermediate it loads or stores is written by a kernel that is not a
 *    candidate (or, loaded, by none).
 * 2. Every intermediate the candidates store to becomes derived weight j,
 *    numbered on after those the open program makes already, in order of
 *    its first writer. It is held in 16 bits (bf16, f16) when every store
 *    to it is `=` of an element of storage held so (a copy, which rounds
 *    nothing), else as f32.
 * 3. The candidates move, in program order, to the open program, with
 *    buffers of their own there: each weight as loaded, each derived
 *    weight, view and local they touch (tile may pack prog's weights
 *    later, and rewrites only prog's kernels).
 * 4. Both programs are renumbered (prog's intermediates laid out again),
 *    and notes say what moved, each derived weight and the bytes held. */
#include "passes.h"

#include <string.h>

typedef struct {
    int *v;
    int n, cap;
} Ids;

typedef struct {
    Module *m;
    Arena *a;
    Prog *p;
    Ids *loads, *stores;          /* by kernel index: storage ids, once each */
    char *hoist;                  /* by kernel index: a candidate */
    char *mark;                   /* scratch, by storage id */
    int *writers;                 /* by storage id: candidate kernels writing it */
    char *other;                  /* by storage id: written by a kernel that is not one */
    int *derived;                 /* by storage id: derived number, -1 */
    Buf **to;                     /* by prog buffer id: its buffer in the open program */
    Buf **held;                   /* by ir_held_index: the open program's weight or
                                     derived weight (not a view); NULL: none yet */
} Hoist;

/* ---- 1. candidates ------------------------------------------------------- */

typedef struct {
    Hoist *h;
    int k;
} Scan;

static void add(Hoist *h, Ids *ids, Buf *b, char bit)
{
    Buf *st = ir_storage(b);
    if (st->kind == BK_LOCAL || (h->mark[st->id] & bit))
        return;
    h->mark[st->id] |= bit;
    ARR_PUSH(h->a, ids->v, ids->n, ids->cap, st->id);
}

/* A tile a call updates counts as stored, not as read. */
static void scan_buf(Buf *b, int how, void *ctx)
{
    Scan *sc = ctx;
    Hoist *h = sc->h;
    if (how & IR_WR)
        add(h, &h->stores[sc->k], b, 2);
    else
        add(h, &h->loads[sc->k], b, 1);
}

/* Whether kernel k's own accesses allow it: loads of weights, derived
 * weights (as loaded) and intermediates; stores to intermediates. */
static int may_hoist(const Hoist *h, int k)
{
    for (int i = 0; i < h->loads[k].n; i++) {
        const Buf *b = h->p->bufs[h->loads[k].v[i]];
        int ok = b->kind == BK_TEMP || ((b->kind == BK_WEIGHT || b->kind == BK_DERIVED) &&
                                        !b->packed);
        if (!ok)
            return 0;
    }
    for (int i = 0; i < h->stores[k].n; i++)
        if (h->p->bufs[h->stores[k].v[i]]->kind != BK_TEMP)
            return 0;
    return h->stores[k].n > 0;
}

/* Drops candidates whose intermediates other kernels write; 1 when one
 * was dropped. */
static int drop(Hoist *h)
{
    Prog *p = h->p;
    memset(h->writers, 0, sizeof *h->writers * (size_t)p->nbufs);
    memset(h->other, 0, (size_t)p->nbufs);
    for (int k = 0; k < p->nkernels; k++)
        for (int i = 0; i < h->stores[k].n; i++) {
            if (h->hoist[k])
                h->writers[h->stores[k].v[i]]++;
            else
                h->other[h->stores[k].v[i]] = 1;
        }
    int dropped = 0;
    for (int k = 0; k < p->nkernels; k++) {
        if (!h->hoist[k])
            continue;
        for (int i = 0; h->hoist[k] && i < h->loads[k].n; i++) {
            int b = h->loads[k].v[i];
            if (p->bufs[b]->kind == BK_TEMP && (h->other[b] || !h->writers[b]))
                h->hoist[k] = 0;
        }
        for (int i = 0; h->hoist[k] && i < h->stores[k].n; i++)
            if (h->other[h->stores[k].v[i]])
                h->hoist[k] = 0;
        dropped |= !h->hoist[k];
    }
    return dropped;
}

static int candidates(Hoist *h)
{
    Prog *p = h->p;
    int n = 0;
    for (int k = 0; k < p->nkernels; k++) {
        Scan sc = {h, k};
        ir_block_bufs(&p->kernels[k]->body, scan_buf, &sc);
        for (int i = 0; i < h->loads[k].n; i++)
            h->mark[h->loads[k].v[i]] = 0;
        for (int i = 0; i < h->stores[k].n; i++)
            h->mark[h->stores[k].v[i]] = 0;
        h->hoist[k] = (char)may_hoist(h, k);
    }
    while (drop(h))
        ;
    for (int k = 0; k < p->nkernels; k++)
        n += h->hoist[k];
    return n;
}

/* ---- 2. derived weights -------------------------------------------------- */

typedef struct {
    Buf *st;                      /* the storage stored to */
    int store;                    /* the Storage every store to it copies; -1: not a copy */
    int seen;                     /* a store to it was seen */
} Copy;

/* What statement s stores to c->st: a copy of an element of storage held
 * as X (`=` of a load) gives X; anything else -1. */
static void copy_stmt(Stmt *s, void *ctx)
{
    Copy *c = ctx;
    int from;
    if (s->kind == S_CALL && ir_storage(s->tiles[call_table[s->call].written].buf) == c->st)
        from = -1;
    else if (s->kind == S_STORE && ir_storage(s->buf) == c->st)
        from = s->op == A_SET && s->e->kind == E_LOAD && s->e->type == T_F32
                   ? (int)ir_storage(s->e->buf)->store
                   : -1;
    else
        return;
    c->store = !c->seen || c->store == from ? from : -1;
    c->seen = 1;
}

static int has_id(const Ids *ids, int id)
{
    for (int i = 0; i < ids->n; i++)
        if (ids->v[i] == id)
            return 1;
    return 0;
}

/* How derived storage st is held: as the storage every store to it copies
 * when that is 16-bit, else f32. */
static Storage held_as(Hoist *h, Buf *st)
{
    Copy c = {st, ST_F32, 0};
    for (int k = 0; k < h->p->nkernels; k++)
        if (h->hoist[k] && has_id(&h->stores[k], st->id))
            ir_block_walk(&h->p->kernels[k]->body, copy_stmt, &c);
    return c.store == ST_BF16 || c.store == ST_F16 ? (Storage)c.store : ST_F32;
}

/* Numbers the candidates' intermediates from `first`, in order of their
 * first writer, and makes them derived weights of prog. */
static int make_derived(Hoist *h, int first)
{
    Prog *p = h->p;
    int j = first;
    for (int k = 0; k < p->nkernels; k++)
        for (int i = 0; h->hoist[k] && i < h->stores[k].n; i++) {
            Buf *b = p->bufs[h->stores[k].v[i]];
            if (h->derived[b->id] >= 0)
                continue;
            h->derived[b->id] = j;
            b->store = held_as(h, b);      /* before b changes kind: a copy of a copy */
            b->kind = BK_DERIVED;
            b->index = j++;
            b->arena_off = -1;
        }
    return j - first;
}

/* ---- 3. the open program ------------------------------------------------- */

/* The open program's buffer for prog's b, made on first use. */
static Buf *open_buf(Hoist *h, Prog *o, Buf *b)
{
    if (h->to[b->id])
        return h->to[b->id];
    Buf *base = b->base ? open_buf(h, o, b->base) : NULL, *x = NULL;
    int held = base ? -1 : ir_held_index(h->m, b);    /* one there already? */
    if (held >= 0)
        x = h->held[held];
    if (!x) {
        x = ir_buf_new(h->a, o, b->kind, b->dtype, b->rank, b->dims);
        x->index = b->index;
        x->node = b->node;
        x->store = b->store;
        x->base = base;
        memcpy(x->strides, b->strides, sizeof b->strides[0] * (size_t)b->rank);
        x->offset = b->offset;
        x->arena_off = -1;
        if (held >= 0)
            h->held[held] = x;
    }
    return h->to[b->id] = x;
}

typedef struct {
    Hoist *h;
    Prog *o;
} Move;

/* The open program's buffer of a load, made where a reader first meets
 * it (ir_stmt_loads: a load before the loads in its indices). */
static void open_load(Expr *e, void *ctx)
{
    Move *mv = ctx;
    open_buf(mv->h, mv->o, e->buf);
}

/* The load over the open program's buffer (made already). */
static Expr *move_load(Expr *e, Expr **idx, void *ctx)
{
    Move *mv = ctx;
    return e_load(mv->h->a, open_buf(mv->h, mv->o, e->buf), idx);
}

static Expr *move_expr(Expr *e, void *ctx)
{
    Move *mv = ctx;
    return ir_expr_map_loads(mv->h->a, e, move_load, ctx);
}

static void move_stmt(Stmt *s, void *ctx)
{
    Move *mv = ctx;
    if (s->buf)                   /* what a store or local names first */
        s->buf = open_buf(mv->h, mv->o, s->buf);
    ir_stmt_loads(s, open_load, ctx);
    ir_stmt_map(s, move_expr, ctx);
    for (int i = 0; i < s->ntiles; i++)
        s->tiles[i].buf = open_buf(mv->h, mv->o, s->tiles[i].buf);
}

/* The candidates leave prog for the open program, in order (nderived:
 * the derived weights there will be, made before or now). */
static void move(Hoist *h, Prog *o, int nderived)
{
    Prog *p = h->p;
    Move mv = {h, o};
    int n = 0;
    h->held = arena_alloc(h->a, sizeof *h->held * ((size_t)(h->m->nweights + nderived) + 1));
    for (int i = 0; i < o->nbufs; i++) {           /* an open program there already */
        int held = o->bufs[i]->base ? -1 : ir_held_index(h->m, o->bufs[i]);
        if (held >= 0)
            h->held[held] = o->bufs[i];
    }
    for (int k = 0; k < p->nkernels; k++) {
        Kernel *kn = p->kernels[k];
        if (!h->hoist[k]) {
            p->kernels[n++] = kn;
            continue;
        }
        ir_block_walk(&kn->body, move_stmt, &mv);
        ARR_PUSH(h->a, o->kernels, o->nkernels, o->capkernels, kn);
    }
    p->nkernels = n;
}

/* ---- 4. notes ------------------------------------------------------------ */

/* The open kernels that write each storage of o (by buffer id): how
 * many, the first and the last. */
typedef struct {
    int n, first, last;
} Makers;

typedef struct {
    Makers *mk;
    int k;
} MakersScan;

static void maker_buf(Buf *b, int how, void *ctx)
{
    MakersScan *ms = ctx;
    Makers *m = &ms->mk[ir_storage(b)->id];
    if (!(how & IR_WR) || m->last == ms->k)
        return;
    m->first = m->n++ ? m->first : ms->k;
    m->last = ms->k;
}

/* "k3", "k3-k7" or "5 kernels from k3 to k9": the open kernels that write st. */
static const char *makers(Arena *a, const Makers *m)
{
    if (m->n == 1)
        return arena_printf(a, "k%d", m->first);
    if (m->n == m->last - m->first + 1)
        return arena_printf(a, "k%d-k%d", m->first, m->last);
    return arena_printf(a, "%d kernels from k%d to k%d", m->n, m->first, m->last);
}

/* The derived buffer of prog numbered index. */
static const Buf *prog_derived(const Prog *p, int index)
{
    for (int j = 0; j < p->nbufs; j++)
        if (p->bufs[j]->kind == BK_DERIVED && p->bufs[j]->index == index)
            return p->bufs[j];
    return NULL;
}

static void notes(Hoist *h, Prog *o, int moved, int first, int made)
{
    Prog *p = h->p;
    Arena *a = h->a;
    int64_t bytes = 0;
    for (int i = 0; i < o->nbufs; i++) {
        const Buf *b = o->bufs[i];
        if (b->kind == BK_DERIVED && b->index >= first)
            bytes += storage_bytes(b->store, shape_count(b->rank, b->dims));
    }
    ir_note(a, &p->notes, "hoist-weights: %d kernel%s read only weights: moved to the open "
            "program, run once when the model is opened, not at every call; %d derived "
            "weight%s, %lld bytes, held beside the weights", moved, moved == 1 ? "" : "s", made,
            made == 1 ? "" : "s", (long long)bytes);
    Makers *mk = arena_alloc(a, sizeof *mk * ((size_t)o->nbufs + 1));
    for (int i = 0; i < o->nbufs; i++)
        mk[i].last = -1;
    for (int k = 0; k < o->nkernels; k++) {
        MakersScan ms = {mk, k};
        ir_block_bufs(&o->kernels[k]->body, maker_buf, &ms);
    }
    for (int i = 0; i < o->nbufs; i++) {
        const Buf *b = o->bufs[i];
        if (b->kind != BK_DERIVED || b->index < first)
            continue;
        const Buf *r = prog_derived(p, b->index);
        ir_note(a, &p->notes, "hoist-weights: derived %d: b%d%s %s%s%s, %lld bytes, made once at "
                "open by open %s", b->index, r ? r->id : -1,
                b->node ? arena_printf(a, " %%%d", b->node->id) : "", dtype_name(b->dtype),
                shape_str(a, b->rank, b->dims), b->store ? arena_printf(a, " %s",
                storage_name(b->store)) : "",
                (long long)storage_bytes(b->store, shape_count(b->rank, b->dims)),
                makers(a, &mk[b->id]));
    }
}

int pass_hoist_weights(Module *m, PassCtx *cx)
{
    (void)cx;
    Prog *p = m->prog;
    Arena *a = m->a;
    size_t nb = (size_t)p->nbufs + 1, nk = (size_t)p->nkernels + 1;
    Hoist h = {m, a, p, arena_alloc(a, sizeof(Ids) * nk), arena_alloc(a, sizeof(Ids) * nk),
               arena_alloc(a, nk), arena_alloc(a, nb), arena_alloc(a, sizeof(int) * nb),
               arena_alloc(a, nb), arena_alloc(a, sizeof(int) * nb),
               arena_alloc(a, sizeof(Buf *) * nb), NULL};
    int moved = candidates(&h);
    if (!moved)
        return 0;
    for (size_t i = 0; i < nb; i++)
        h.derived[i] = -1;
    int first = ir_nderived(m), made = make_derived(&h, first);
    Prog *o = m->open ? m->open : ir_prog_new(a);
    move(&h, o, first + made);
    m->open = o;
    ir_prog_renumber(p);
    ir_prog_layout(p);
    ir_prog_renumber(o);
    notes(&h, o, moved, first, made);
    return 1;
}
