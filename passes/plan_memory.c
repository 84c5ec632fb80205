/* passes/plan_memory.c: one arena for every intermediate, places reused.
 *
 * Contract: every BK_TEMP storage (a temp that is not a view) gets an
 * arena offset such that two storages whose lifetimes overlap never share
 * bytes; m->prog->arena_bytes becomes the peak. Numbers never change: a
 * place is reused only after its last reader ran. Fails (-1) when the peak
 * is above --max-memory.
 *
 * 1. Lifetimes: the first and last kernel that touch each storage (through
 *    any view of it), in program order.
 * 2. In place: a kernel that writes storage B element by element from a
 *    storage A of the same shape that dies in that kernel (every load of A
 *    there is at exactly the index the kernel stores B at) writes B over
 *    A: B becomes a view of A, and A lives as long as B did.
 * 3. Slots: storages in order of first use each take a free slot (whose
 *    last tenant died before it is born): the smallest that is big enough,
 *    else the largest free one, grown; else a new slot.
 * 4. Slots are laid out one after the other, 64-byte aligned; the notes
 *    print the plan (slot, size, tenants with lifetimes), the peak, and
 *    the sum of all intermediates it replaced.
 * 5. With an open program (hoist-weights), a note says what is held
 *    outside the arena from open to close: the derived weights it makes,
 *    and the weights (and derived weights) that no kernel here reads,
 *    which the program frees once the open program has run. */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    Buf *b;
    int first, last;             /* kernel indices; first = -1: untouched */
    int64_t bytes;
    int slot;
} Life;

typedef struct {
    int64_t size, off;
    int free_after;               /* last kernel of the current tenant */
} Slot;

typedef struct {
    Module *m;
    Life *life;                   /* by buf id */
    int k;                        /* kernel being scanned */
} Scan;

static int64_t round64(int64_t n) { return (n + 63) / 64 * 64; }

static int is_storage(const Buf *b) { return b->kind == BK_TEMP && !b->base; }

/* ---- 1. lifetimes ---------------------------------------------------------- */

static void touch(Scan *sc, Buf *b)
{
    Life *l = &sc->life[ir_storage(b)->id];
    if (l->first < 0)
        l->first = sc->k;
    l->last = sc->k;
}

static void touch_buf(Buf *b, int how, void *ctx)
{
    (void)how;
    touch(ctx, b);
}

static Life *lifetimes(Module *m)
{
    Prog *p = m->prog;
    Life *life = arena_alloc(m->a, sizeof *life * (size_t)(p->nbufs + 1));
    for (int i = 0; i < p->nbufs; i++) {
        life[i] = (Life){p->bufs[i], -1, -1, 0, -1};
        life[i].bytes = round64(shape_count(p->bufs[i]->rank, p->bufs[i]->dims) * 4);
    }
    Scan sc = {m, life, 0};
    for (sc.k = 0; sc.k < p->nkernels; sc.k++)
        ir_block_bufs(&p->kernels[sc.k]->body, touch_buf, &sc);
    return life;
}

/* ---- 2. in place ------------------------------------------------------------ */

static int same_expr(const Expr *x, const Expr *y)
{
    if (x == y)
        return 1;
    if (!x || !y || x->kind != y->kind || x->op != y->op || x->i != y->i || x->v != y->v ||
        x->buf != y->buf || (x->kind == E_FLT && x->f != y->f))
        return 0;
    if (x->kind == E_LOAD)
        for (int i = 0; i < x->buf->rank; i++)
            if (!same_expr(x->idx[i], y->idx[i]))
                return 0;
    return same_expr(x->a, y->a) && same_expr(x->b, y->b) && same_expr(x->c, y->c);
}

/* Whether every access to A and B in a kernel is at one index list. */
typedef struct {
    Buf *a, *b;
    Expr **idx;                   /* the index of the first access seen */
    int ok;
} Match;

static void match_idx(Match *mt, Expr **idx, int rank)
{
    if (!mt->idx) {
        mt->idx = idx;
        return;
    }
    for (int i = 0; i < rank; i++)
        mt->ok &= same_expr(mt->idx[i], idx[i]);
}

/* A view that is the storage itself under another name (an earlier
 * in-place result): same dims, strides and offset. */
static int alias_of(const Buf *v, const Buf *a)
{
    return v == a || (v->base == a && v->rank == a->rank && v->offset == 0 &&
                      !memcmp(v->dims, a->dims, sizeof v->dims[0] * (size_t)v->rank) &&
                      !memcmp(v->strides, a->strides, sizeof v->strides[0] * (size_t)v->rank));
}

static void match_load(Expr *e, void *ctx)
{
    Match *mt = ctx;
    if (e->buf == mt->b || (ir_storage(e->buf) == mt->a && !alias_of(e->buf, mt->a)))
        mt->ok = 0;               /* B read back, or A read through a reshaping view */
    if (alias_of(e->buf, mt->a))
        match_idx(mt, e->idx, e->buf->rank);
}

static void match_stmt(Stmt *s, void *ctx)
{
    Match *mt = ctx;
    if (s->kind == S_STORE && ir_storage(s->buf) == mt->b) {
        if (s->buf != mt->b || s->op != A_SET)
            mt->ok = 0;
        else
            match_idx(mt, s->idx, s->buf->rank);
    }
    if (s->kind == S_STORE && ir_storage(s->buf) == mt->a)
        mt->ok = 0;
    for (int i = 0; i < s->ntiles; i++)   /* a call reads or writes a whole tile */
        if (ir_storage(s->tiles[i].buf) == mt->a || ir_storage(s->tiles[i].buf) == mt->b)
            mt->ok = 0;
    ir_stmt_loads(s, match_load, ctx);
}

static int same_shape(const Buf *a, const Buf *b)
{
    return a->rank == b->rank && !memcmp(a->dims, b->dims, sizeof a->dims[0] * (size_t)a->rank);
}

static int in_place_ok(Kernel *k, Buf *a, Buf *b)
{
    Match mt = {a, b, NULL, 1};
    ir_block_walk(&k->body, match_stmt, &mt);
    return mt.ok && mt.idx;
}

/* B (born in kernel k) over A (dying in k): B and its views now view A. */
static void overwrite(Prog *p, Life *life, Buf *a, Buf *b)
{
    for (int i = 0; i < p->nbufs; i++)
        if (p->bufs[i]->base == b)
            p->bufs[i]->base = a;
    b->base = a;
    b->offset = 0;
    b->arena_off = -1;
    life[a->id].last = life[b->id].last;
    life[b->id].first = -1;
}

static int in_place(Module *m, Life *life)
{
    Prog *p = m->prog;
    int count = 0;
    for (int i = 0; i < p->nbufs; i++) {
        Buf *b = p->bufs[i];
        if (!is_storage(b) || life[i].first < 0)
            continue;
        int k = life[i].first;
        for (int j = 0; j < p->nbufs; j++) {
            Buf *a = p->bufs[j];
            if (j == i || !is_storage(a) || life[j].first < 0 || life[j].first == k ||
                life[j].last != k || !same_shape(a, b) || a->dtype != b->dtype ||
                !in_place_ok(p->kernels[k], a, b))
                continue;
            ir_note(m->a, &p->notes, "in place: b%d %%%d written over b%d %%%d in k%d "
                    "(element-wise, b%d dies there)", b->id, b->node ? b->node->id : -1,
                    a->id, a->node ? a->node->id : -1, k, a->id);
            overwrite(p, life, a, b);
            count++;
            break;
        }
    }
    return count;
}

/* ---- 3-4. slots ---------------------------------------------------------- */

static int pick_slot(const Slot *slot, int nslots, const Life *l)
{
    int best = -1, largest = -1;
    for (int s = 0; s < nslots; s++) {
        if (slot[s].free_after >= l->first)
            continue;
        if (slot[s].size >= l->bytes && (best < 0 || slot[s].size < slot[best].size))
            best = s;
        if (largest < 0 || slot[s].size > slot[largest].size)
            largest = s;
    }
    return best >= 0 ? best : largest;
}

static int by_birth(const void *x, const void *y)
{
    const Life *a = *(const Life *const *)x, *b = *(const Life *const *)y;
    return a->first != b->first ? a->first - b->first : a->b->id - b->b->id;
}

static void print_tenant(Module *m, const Life *l, char **line)
{
    const Node *n = l->b->node;
    *line = arena_printf(m->a, "%s b%d", *line, l->b->id);
    if (n)
        *line = arena_printf(m->a, "%s %%%d", *line, n->id);
    *line = arena_printf(m->a, "%s k%d-k%d,", *line, l->first, l->last);
}

static void plan_notes(Module *m, Life **order, int n, Slot *slot, int nslots, int64_t sum)
{
    Prog *p = m->prog;
    ir_note(m->a, &p->notes, "plan-memory: peak %lld bytes in %d slots for %d storages; "
            "%lld bytes without sharing", (long long)p->arena_bytes, nslots, n, (long long)sum);
    for (int s = 0; s < nslots; s++) {
        char *line = arena_printf(m->a, "slot %d @%lld %lld bytes:", s,
                                  (long long)slot[s].off, (long long)slot[s].size);
        for (int i = 0; i < n; i++)
            if (order[i]->slot == s)
                print_tenant(m, order[i], &line);
        line[strlen(line) - 1] = 0;
        ir_note(m->a, &p->notes, "%s", line);
    }
}

/* The bytes every intermediate would take in a place of its own. */
static int64_t unshared(const Prog *p, const Life *life)
{
    int64_t sum = 0;
    for (int i = 0; i < p->nbufs; i++)
        if (is_storage(p->bufs[i]) && life[i].first >= 0)
            sum += life[i].bytes;
    return sum;
}

static void assign(Module *m, Life *life, int64_t sum)
{
    Prog *p = m->prog;
    Life **order = arena_alloc(m->a, sizeof *order * (size_t)(p->nbufs + 1));
    Slot *slot = arena_alloc(m->a, sizeof *slot * (size_t)(p->nbufs + 1));
    int n = 0, nslots = 0;
    for (int i = 0; i < p->nbufs; i++)
        if (is_storage(p->bufs[i]) && life[i].first >= 0)
            order[n++] = &life[i];
    qsort(order, (size_t)n, sizeof *order, by_birth);
    for (int i = 0; i < n; i++) {
        Life *l = order[i];
        int s = pick_slot(slot, nslots, l);
        if (s < 0)
            slot[s = nslots++] = (Slot){0, 0, -1};
        if (slot[s].size < l->bytes)
            slot[s].size = l->bytes;
        slot[s].free_after = l->last;
        l->slot = s;
    }
    int64_t off = 0;
    for (int s = 0; s < nslots; s++) {
        slot[s].off = off;
        off += slot[s].size;
    }
    for (int i = 0; i < n; i++)
        order[i]->b->arena_off = slot[order[i]->slot].off;
    p->arena_bytes = off;
    plan_notes(m, order, n, slot, nslots, sum);
}

/* Bytes of held buffer b: 2 an element held 16-bit, else 4. */
static int64_t held_bytes(const Buf *b) { return storage_bytes(b->store, shape_count(b->rank, b->dims)); }

static void held_notes(Module *m)
{
    int n = m->nweights + ir_nderived(m), made = 0, freed = 0;
    int64_t made_bytes = 0, freed_bytes = 0;
    char *read = arena_alloc(m->a, (size_t)n + 1);
    ir_held_reads(m, m->prog, read);
    for (int i = 0; i < m->open->nbufs; i++) {
        const Buf *b = m->open->bufs[i];
        int h = ir_held_index(m, b);
        if (b->kind == BK_DERIVED)
            made++, made_bytes += held_bytes(b);
        if (h >= 0 && !read[h])
            freed++, freed_bytes += held_bytes(b);
    }
    ir_note(m->a, &m->prog->notes, "plan-memory: beside the arena, the open program makes %d "
            "derived weights (%lld bytes); %d weights and derived weights (%lld bytes) are read "
            "only by it, and freed once it has run", made, (long long)made_bytes, freed,
            (long long)freed_bytes);
}

int pass_plan_memory(Module *m, PassCtx *cx)
{
    Prog *p = m->prog;
    int64_t *before = arena_alloc(m->a, sizeof *before * (size_t)(p->nbufs + 1));
    for (int i = 0; i < p->nbufs; i++)
        before[i] = p->bufs[i]->arena_off;
    Life *life = lifetimes(m);
    int64_t sum = unshared(p, life);
    int changed = in_place(m, life) > 0;
    for (int i = 0; i < p->nbufs; i++)
        if (is_storage(p->bufs[i]) && life[i].first < 0)
            p->bufs[i]->arena_off = -1;          /* never touched: no place */
    assign(m, life, sum);
    if (m->open)
        held_notes(m);
    if (cx->max_memory && p->arena_bytes > cx->max_memory) {
        diag(cx->d, NULL, "plan-memory: the intermediates need %lld bytes at the peak, "
             "more than --max-memory %lld", (long long)p->arena_bytes,
             (long long)cx->max_memory);
        return -1;
    }
    for (int i = 0; i < p->nbufs; i++)
        changed |= p->bufs[i]->arena_off != before[i];
    return changed;
}
