/* passes/canonicalize.c: canonicalize-memrefs: the copies that reshape,
 * transpose, slice and concat lower to become views.
 *
 * Every access is already an access to a memref (Buf: dims, strides and
 * offset into the storage of its base). A shape op's result that can be
 * read straight from its operand's storage becomes a VIEW of it (b->base =
 * that storage, strides and offset in its elements), and its copy kernel
 * goes; a concat's operand that can be written straight into its slice of
 * the result becomes a view of that slice, and its copy loop goes.
 *
 * Contract: the program is as lowered: a kernel that lists a shape op
 * alone is that op's copy (checked: it stores one buffer, the op's, and
 * loads one of another node; the copy of an output that lowering adds
 * loads the op's own and is left alone). Every kernel that stays reads
 * the same values as before: a view never observes a write it would not
 * have seen as a copy. A view's base is never a view (views of views are
 * composed: strides are always in the storage's elements). Views take no
 * arena space. Notes, one per decision in node order, name buffers by
 * their ids in the new program.
 *
 * 1. Concats, last first (so that a concat placed into a later one is a
 *    view already when its own operands are placed into it): the result
 *    must be written by the concat alone, or be a slice placed by this
 *    step. Operand i becomes a view of its slice of the result's storage
 *    when it is an intermediate (TEMP), not a view nor the storage of
 *    one, written by exactly one kernel and read by none before that;
 *    its copy loop goes. Inputs, weights, states, outputs, views and a
 *    repeated operand's later uses keep their loop.
 * 2. Reshape, transpose and slice, in program order (so an operand's own
 *    view is final when its users come): the result becomes a view of the
 *    operand's storage when
 *    a. it is a TEMP, not a view (step 1 may have placed it) nor the
 *       storage of one, written by the copy alone;
 *    b. the map is a strided view: always for transpose (strides
 *       permuted) and slice (offset moved); for reshape when every group
 *       of dims that it merges or splits is contiguous in the operand;
 *    c. no kernel after the copy, up to the result's last reader, writes
 *       the operand's storage (a state that cache_write updates, say):
 *       the copy would not have seen that write.
 *    A result that is an OUTPUT (caller memory) must be written, so the
 *    view is inverted instead: for reshape and transpose whose operand is
 *    a TEMP written by one kernel, not a view nor the storage of one, the
 *    operand becomes a view of the output, and its producer writes there.
 * 3. Kernels left without work are removed; buffers and kernels are
 *    renumbered, the arena laid out again, and the notes written. */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

/* What became of one shape op (or one concat operand), for its note. */
typedef struct {
    const Node *n;
    int operand;        /* concat operand; -1 for the op as a whole */
    const char *what;   /* a view's subject, or the whole note for a copy kept */
    const Buf *view;    /* the buffer that became a view; NULL: copy kept */
} Decision;

/* Kernel indices, or buffers, in a growable list. */
typedef struct {
    int *v;
    int n, cap;
} Ints;

typedef struct {
    Module *m;
    Arena *a;
    Prog *p;
    char *dead;         /* by kernel index: removed at the end */
    char *placed;       /* by buffer id: made a view by step 1 */
    Decision *d;
    int nd, capd;
    /* Who touches what, kept as the bodies and views change (so each
     * question is about the few kernels involved, not every kernel's
     * body: a model with thousands of expert copies has thousands of
     * kernels). By buffer id: the kernels that load (rd) or store (wr)
     * that very buffer, and for a storage the ids of its views. */
    Ints *rd, *wr, *views;
    int *stamp, now;    /* by kernel index: counted in query `now` */
} Canon;

/* ---- notes ---------------------------------------------------------------- */

/* "%5 'name'", or "%5" for a nameless node; control bytes as \xNN so
 * that a note stays on its line. */
static const char *label(Arena *a, const Node *n)
{
    if (!n)
        return "a scratch buffer";
    if (!n->name)
        return arena_printf(a, "%%%d", n->id);
    size_t len = strlen(n->name);
    char *s = arena_alloc(a, 4 * len + 1), *q = s;
    for (const unsigned char *p = (const unsigned char *)n->name; *p; p++)
        q += *p < 0x20 || *p == 0x7f ? sprintf(q, "\\x%02x", *p) : sprintf(q, "%c", *p);
    return arena_printf(a, "%%%d '%s'", n->id, s);
}

/* "reshape %18 'q_heads'" */
static const char *op_label(Arena *a, const Node *n)
{
    return arena_printf(a, "%s %s", op_table[n->op].name, label(a, n));
}

static void decide(Canon *c, const Node *n, int operand, const char *what, const Buf *view)
{
    Decision d = {n, operand, what, view};
    ARR_PUSH(c->a, c->d, c->nd, c->capd, d);
}

static void keep(Canon *c, const Node *n, const char *why)
{
    decide(c, n, -1, arena_printf(c->a, "kept copy for %s: %s", op_label(c->a, n), why), NULL);
}

static int by_node(const void *x, const void *y)
{
    const Decision *a = x, *b = y;
    return a->n->id != b->n->id ? a->n->id - b->n->id : a->operand - b->operand;
}

static void write_notes(Canon *c)
{
    if (c->nd)                    /* qsort(NULL, 0) is undefined */
        qsort(c->d, (size_t)c->nd, sizeof *c->d, by_node);
    for (int i = 0; i < c->nd; i++) {
        const Decision *d = &c->d[i];
        const Buf *b = d->view;
        if (!b) {
            ir_note(c->a, &c->p->notes, "%s", d->what);
            continue;
        }
        char st[KILN_MAX_RANK * 21 + 3], *q = st;
        for (int j = 0; j < b->rank; j++)
            q += sprintf(q, "%s%lld", j ? "," : "", (long long)b->strides[j]);
        const char *off = b->offset ? arena_printf(c->a, ", offset %lld", (long long)b->offset) : "";
        ir_note(c->a, &c->p->notes, "%s: view of b%d, strides [%s]%s", d->what, b->base->id, st, off);
    }
}

/* ---- what kernels touch ------------------------------------------------------ */

/* The buffers a block loads and stores: the first of each, and how many
 * distinct ones (2 standing for more than one). */
typedef struct {
    Buf *load, *store;
    int nload, nstore;
} Access;

static void add(Buf **first, int *n, Buf *b)
{
    if (!*first) {
        *first = b;
        *n = 1;
    } else if (*first != b) {
        *n = 2;
    }
}

static void load(Expr *e, void *ctx)
{
    Access *ac = ctx;
    add(&ac->load, &ac->nload, e->buf);
}

static void stmt_access(Stmt *s, void *ctx)
{
    Access *ac = ctx;
    if (s->kind == S_STORE)
        add(&ac->store, &ac->nstore, s->buf);
    ir_stmt_loads(s, load, ctx);
}

static Access access_of(Block *blk)
{
    Access ac = {NULL, NULL, 0, 0};
    ir_block_walk(blk, stmt_access, &ac);
    return ac;
}

/* ---- who touches what ------------------------------------------------------ */

static void ints_del(Ints *l, int x)
{
    int n = 0;
    for (int i = 0; i < l->n; i++)
        if (l->v[i] != x)
            l->v[n++] = l->v[i];
    l->n = n;
}

typedef struct {
    Canon *c;
    int k, add;
} Indexing;

static void index_buf(Buf *b, int how, void *ctx)
{
    Indexing *ix = ctx;
    Canon *c = ix->c;
    for (int w = 0; w < 2; w++) {
        Ints *l = &(w ? c->wr : c->rd)[b->id];
        if (!(how & (w ? IR_WR : IR_RD)))
            continue;
        if (!ix->add)
            ints_del(l, ix->k);
        else if (!l->n || l->v[l->n - 1] != ix->k)
            ARR_PUSH(c->a, l->v, l->n, l->cap, ix->k);
    }
}

/* Kernel k's loads and stores into the index (add), or out of it. */
static void index_kernel(Canon *c, int k, int add)
{
    Indexing ix = {c, k, add};
    ir_block_bufs(&c->p->kernels[k]->body, index_buf, &ix);
}

static void index_all(Canon *c)
{
    size_t nb = (size_t)c->p->nbufs + 1;
    c->rd = arena_alloc(c->a, sizeof *c->rd * nb);
    c->wr = arena_alloc(c->a, sizeof *c->wr * nb);
    c->views = arena_alloc(c->a, sizeof *c->views * nb);
    c->stamp = arena_alloc(c->a, sizeof *c->stamp * ((size_t)c->p->nkernels + 1));
    for (int k = 0; k < c->p->nkernels; k++)
        index_kernel(c, k, 1);
    for (int i = 0; i < c->p->nbufs; i++) {
        Buf *b = c->p->bufs[i];
        if (b->base)
            ARR_PUSH(c->a, c->views[b->base->id].v, c->views[b->base->id].n,
                     c->views[b->base->id].cap, b->id);
    }
}

/* The live kernels after kernel `after` that load (write = 0) or store
 * (1) b's storage, through it or any view of it: how many, and the
 * lowest and highest index (-1 when none). */
static int touching(Canon *c, Buf *b, int write, int after, int *lo, int *hi)
{
    Buf *s = ir_storage(b);
    const Ints *views = &c->views[s->id];
    int count = 0;
    *lo = *hi = -1;
    c->now++;
    for (int m = -1; m < views->n; m++) {
        const Ints *l = &(write ? c->wr : c->rd)[m < 0 ? s->id : views->v[m]];
        for (int i = 0; i < l->n; i++) {
            int k = l->v[i];
            if (k <= after || c->dead[k] || c->stamp[k] == c->now)
                continue;
            c->stamp[k] = c->now;
            count++;
            *lo = *lo < 0 || k < *lo ? k : *lo;
            *hi = k > *hi ? k : *hi;
        }
    }
    return count;
}

/* How many live kernels write b's storage; *first gets the first's index. */
static int writers(Canon *c, Buf *b, int *first)
{
    int lo, hi, n = touching(c, b, 1, -1, &lo, &hi);
    if (n)
        *first = lo;
    return n;
}

/* Index of the first (or last) live kernel that reads b's storage; -1. */
static int reader(Canon *c, Buf *b, int last)
{
    int lo, hi;
    touching(c, b, 0, -1, &lo, &hi);
    return last ? hi : lo;
}

static int is_storage(const Canon *c, const Buf *b) { return c->views[b->id].n > 0; }

/* b becomes a view of storage s (at strides and offset set by the caller). */
static void view_into(Canon *c, Buf *b, Buf *s)
{
    b->base = ir_storage(s);
    b->arena_off = -1;
    ARR_PUSH(c->a, c->views[b->base->id].v, c->views[b->base->id].n,
             c->views[b->base->id].cap, b->id);
}

static const char *kind_name(BufKind k)
{
    switch (k) {
    case BK_INPUT: return "an input";
    case BK_OUTPUT: return "an output";
    case BK_WEIGHT: return "a weight";
    case BK_STATE: return "a state";
    case BK_DERIVED: return "a derived weight";
    case BK_TEMP: return "an intermediate";
    case BK_LOCAL: return "a kernel's local";
    }
    return "?";
}

/* Why x, node xn's value, cannot move to other storage before kernel ki
 * uses it: it must be an intermediate written by exactly one kernel
 * before ki and read by none before that, and neither a view nor the
 * storage of one. NULL when it can. */
static const char *movable(Canon *c, Buf *x, const Node *xn, int ki)
{
    Arena *a = c->a;
    const char *who = label(a, xn);
    int w = -1, nw;
    if (x->kind != BK_TEMP)
        return arena_printf(a, "%s is %s", who, kind_name(x->kind));
    if (x->base)
        return arena_printf(a, "%s is a view already", who);
    if (is_storage(c, x))
        return arena_printf(a, "%s is the storage of views", who);
    if ((nw = writers(c, x, &w)) != 1)
        return arena_printf(a, "%s is written by %d kernels", who, nw);
    if (w >= ki)
        return arena_printf(a, "%s is written after it is used", who);
    int r = reader(c, x, 0);
    if (r >= 0 && r < w)
        return arena_printf(a, "%s is read before it is written", who);
    return NULL;
}

/* ---- 1. concat operands written in place ----------------------------------- */

/* Why concat kernel ki's result y cannot take its operands in place. */
static const char *concat_result(Canon *c, Buf *y, int ki)
{
    int w = -1;
    if (y->kind != BK_TEMP && y->kind != BK_OUTPUT)
        return arena_printf(c->a, "its result is %s", kind_name(y->kind));
    if (y->base && !c->placed[y->id])
        return "its result is a view";
    if (!y->base && (writers(c, y, &w) != 1 || w != ki))
        return "its result is written by other kernels too";
    return NULL;
}

/* x becomes a view of the slice of y at `at` along ax. */
static void place(Canon *c, Buf *x, Buf *y, int ax, int64_t at)
{
    view_into(c, x, y);
    memcpy(x->strides, y->strides, sizeof y->strides[0] * (size_t)y->rank);
    x->offset = y->offset + at * y->strides[ax];
    c->placed[x->id] = 1;
}

/* Operand i of concat n is an earlier operand too: the earlier one may
 * take its place, this one keeps its copy. */
static const char *repeated(Arena *a, const Node *n, int i)
{
    for (int j = 0; j < i; j++)
        if (n->in[j] == n->in[i])
            return arena_printf(a, "%s is operand %d too", label(a, n->in[i]), j);
    return NULL;
}

static void place_concat(Canon *c, int ki)
{
    Arena *a = c->a;
    Kernel *k = c->p->kernels[ki];
    Node *n = k->nodes[0];
    Access ac = access_of(&k->body);
    const char *why = ac.nstore != 1 || ac.store->node != n || k->body.n != n->nin
                          ? "its kernel does not copy each operand in turn"
                          : concat_result(c, ac.store, ki);
    if (why) {
        keep(c, n, why);
        return;
    }
    Buf *y = ac.store;
    int ax = axis_norm(attr_i(n, "axis"), n->rank), kept = 0;
    index_kernel(c, ki, 0);             /* its body changes: indexed again below */
    int64_t at = 0;
    for (int i = 0; i < n->nin; i++) {
        Stmt *s = k->body.s[i];
        Block one = {&s, 1, 1};
        Access ai = access_of(&one);
        const Node *xn = n->in[i];
        why = ai.nload != 1 || ai.store != y || ai.load->node == n || ai.load->rank != y->rank
                  ? "its loop is not a plain copy"
                  : repeated(a, n, i);
        if (!why)
            why = movable(c, ai.load, xn, ki);
        if (why) {
            decide(c, n, i, arena_printf(a, "kept copy of operand %d for %s: %s", i,
                                         op_label(a, n), why), NULL);
            k->body.s[kept++] = s;
        } else {
            place(c, ai.load, y, ax, at);
            decide(c, n, i, arena_printf(a, "%s: operand %d %s written in place", op_label(a, n),
                                         i, label(a, xn)), ai.load);
        }
        at += xn->dims[ax];
    }
    k->body.n = kept;
    c->dead[ki] = kept == 0;
    index_kernel(c, ki, 1);
}

/* ---- 2. reshape, transpose, slice as views -------------------------------- */

/* Strides that view x's elements, in row-major order, as dims[0..r).
 * From the innermost dim out, x's dims fall into groups contiguous in
 * its storage; each group must hold whole dims of the result, which get
 * strides within it. 0 when some group does not (a merge of dims that a
 * transpose separated). As PyTorch's computeStride does. */
static int reshape_strides(const Buf *x, int r, const int64_t *dims, int64_t *st)
{
    int j = r - 1;
    int64_t base = x->rank ? x->strides[x->rank - 1] : 1, xn = 1, yn = 1;
    for (int i = x->rank - 1; i >= 0; i--) {
        xn *= x->dims[i];
        if (i > 0 && (x->dims[i - 1] == 1 || x->strides[i - 1] == xn * base))
            continue;                         /* dim i-1 extends the group */
        while (j >= 0 && (yn < xn || dims[j] == 1)) {
            st[j] = yn * base;
            yn *= dims[j--];
        }
        if (yn != xn)
            return 0;
        if (i > 0) {
            base = x->strides[i - 1];
            xn = yn = 1;
        }
    }
    for (; j >= 0; j--)                       /* x a scalar: dims of 1 */
        st[j] = 1;
    return 1;
}

/* The perm of transpose n as axes of its operand. */
static void perm_of(const Node *n, int *p)
{
    const AttrVal *perm = attr_v(n, "perm");
    for (int d = 0; d < perm->nints; d++)
        p[d] = axis_norm(perm->ints[d], n->rank);
}

/* Where slice n starts along its axis, resolved as Python does. */
static int64_t slice_start(const Node *n, int ax)
{
    int64_t v = attr_i(n, "start"), dim = n->in[0]->dims[ax];
    if (v < 0)
        v += dim;
    return v < 0 ? 0 : v > dim ? dim : v;
}

/* The result of n as a view of its operand's buffer x: strides and
 * offset into x's storage; 0 when no strided view is n. */
static int view_of(const Node *n, const Buf *x, int64_t *st, int64_t *off)
{
    int p[KILN_MAX_RANK];
    *off = x->offset;
    switch (n->op) {
    case OP_RESHAPE: return reshape_strides(x, n->rank, n->dims, st);
    case OP_TRANSPOSE:
        perm_of(n, p);
        for (int d = 0; d < n->rank; d++)
            st[d] = x->strides[p[d]];
        return 1;
    case OP_SLICE: {
        int ax = axis_norm(attr_i(n, "axis"), n->rank);
        memcpy(st, x->strides, sizeof *st * (size_t)n->rank);
        *off += slice_start(n, ax) * x->strides[ax];
        return 1;
    }
    default: return 0;
    }
}

/* The operand of n as a view of n's result y (reshape, transpose). */
static int inverse_of(const Node *n, const Buf *y, const Buf *x, int64_t *st)
{
    int p[KILN_MAX_RANK];
    switch (n->op) {
    case OP_RESHAPE: return reshape_strides(y, x->rank, x->dims, st);
    case OP_TRANSPOSE:
        perm_of(n, p);
        for (int d = 0; d < n->rank; d++)
            st[p[d]] = y->strides[d];
        return 1;
    default: return 0;
    }
}

static void make_view(Canon *c, Buf *b, Buf *storage, const int64_t *st, int64_t off)
{
    view_into(c, b, storage);
    memcpy(b->strides, st, sizeof *st * (size_t)b->rank);
    b->offset = off;
}

/* Why a view y of x's storage, replacing copy kernel ki, could see a
 * write the copy would not have: a kernel after ki, up to y's last
 * reader, writes that storage. NULL when none does. */
static const char *later_write(Canon *c, int ki, Buf *x, Buf *y)
{
    Buf *s = ir_storage(x);
    int last = reader(c, y, 1), j, hi;
    if (!touching(c, s, 1, ki, &j, &hi) || j > last)
        return NULL;
    const Kernel *k = c->p->kernels[j];
    return arena_printf(c->a, "%s is written by %s after the copy, before the last read "
                              "of the result", label(c->a, s->node),
                        k->nnodes ? op_label(c->a, k->nodes[0]) : "another kernel");
}

/* Result y of kernel ki is an output: its operand x is written there. */
static void invert(Canon *c, int ki, Node *n, Buf *x, Buf *y)
{
    Arena *a = c->a;
    int w = -1;
    int64_t st[KILN_MAX_RANK];
    const char *why = n->op == OP_SLICE ? NULL : movable(c, x, n->in[0], ki);
    if (n->op == OP_SLICE)
        why = "its result is an output, which a slice fills only in part";
    else if (why)
        why = arena_printf(a, "its result is an output and %s", why);
    else if (writers(c, y, &w) != 1)
        why = "its result is an output written by other kernels too";
    else if (!inverse_of(n, y, x, st))
        why = "its result is an output not viewable as its operand";
    if (why) {
        keep(c, n, why);
        return;
    }
    make_view(c, x, y, st, y->offset);
    c->dead[ki] = 1;
    decide(c, n, -1, arena_printf(a, "%s (an output): %s written in place", op_label(a, n),
                                  label(a, n->in[0])), x);
}

/* Why result y of copy kernel ki cannot become a view: it must be an
 * intermediate that kernel alone writes, neither a view nor the storage
 * of one. NULL when it can. */
static const char *own_result(Canon *c, Buf *y, int ki)
{
    int w = -1;
    if (c->placed[y->id])
        return "its result is written in place into a concat";
    if (y->kind != BK_TEMP)
        return arena_printf(c->a, "its result is %s", kind_name(y->kind));
    if (y->base)
        return "its result is a view already";
    if (is_storage(c, y))
        return "its result is the storage of views";
    if (writers(c, y, &w) != 1 || w != ki)
        return "its result is written by other kernels too";
    return NULL;
}

/* A copy kernel stores n's buffer and loads another node's (none for a
 * constant); the copy of an output that lowering adds (copy_out) loads
 * n's own, and is left alone. */
static void view_shape_op(Canon *c, int ki)
{
    Kernel *k = c->p->kernels[ki];
    Node *n = k->nodes[0];
    Access ac = access_of(&k->body);
    if (ac.nstore != 1 || ac.nload > 1 || ac.store->node != n || (ac.load && ac.load->node == n))
        return;
    if (!ac.load) {
        keep(c, n, "its operand is a constant");
        return;
    }
    Buf *x = ac.load, *y = ac.store;
    if (y->kind == BK_OUTPUT && !y->base) {
        invert(c, ki, n, x, y);
        return;
    }
    int64_t st[KILN_MAX_RANK], off;
    const char *why = own_result(c, y, ki);
    if (!why && !view_of(n, x, st, &off))
        why = arena_printf(c->a, "%s%s cannot be viewed as %s: dims it merges are not "
                                 "contiguous", label(c->a, n->in[0]), x->base ? " (a view)" : "",
                           shape_str(c->a, n->rank, n->dims));
    if (!why)
        why = later_write(c, ki, x, y);
    if (why) {
        keep(c, n, why);
        return;
    }
    make_view(c, y, x, st, off);
    c->dead[ki] = 1;
    decide(c, n, -1, op_label(c->a, n), y);
}

/* ---- 3. removing kernels ------------------------------------------------------ */

static void remove_dead(Canon *c)
{
    Prog *p = c->p;
    int n = 0;
    for (int i = 0; i < p->nkernels; i++)
        if (!c->dead[i])
            p->kernels[n++] = p->kernels[i];
    p->nkernels = n;
}

static int shape_op(const Kernel *k, OpKind op)
{
    return k->nnodes == 1 && k->nodes[0]->op == op;
}

int pass_canonicalize_memrefs(Module *m, PassCtx *cx)
{
    (void)cx;
    Prog *p = m->prog;
    Canon c = {m, m->a, p, arena_alloc(m->a, (size_t)p->nkernels + 1),
               arena_alloc(m->a, (size_t)p->nbufs + 1), NULL, 0, 0, NULL, NULL, NULL, NULL, 0};
    index_all(&c);
    for (int i = p->nkernels - 1; i >= 0; i--)
        if (shape_op(p->kernels[i], OP_CONCAT))
            place_concat(&c, i);
    for (int i = 0; i < p->nkernels; i++)
        if (shape_op(p->kernels[i], OP_RESHAPE) || shape_op(p->kernels[i], OP_TRANSPOSE) ||
            shape_op(p->kernels[i], OP_SLICE))
            view_shape_op(&c, i);
    int changed = 0;
    for (int i = 0; i < c.nd; i++)
        changed |= c.d[i].view != NULL;
    remove_dead(&c);
    ir_prog_renumber(p);
    ir_prog_layout(p);
    write_notes(&c);
    return changed;
}
