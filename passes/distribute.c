/* passes/distribute.c: a graph split over cx->ranks MPI ranks, tensor
 * parallel as Megatron-LM splits a transformer.
 *
 * Contract: with cx->ranks N <= 1 nothing changes. With N > 1 every rank
 * runs the graph this pass leaves, rank r holding part r of each sharded
 * weight (Node.shard), and every output equals the one-rank graph's on
 * every rank (up to the order of the sums an allreduce adds: in rank
 * order, the same for every run). Weights, states and inputs keep their
 * names (the per-expert weights other ranks hold are dropped: 4b); a
 * sharded leaf's dims become its part's; an output keeps its
 * name (a collective that completes a value takes the value's name, the
 * part it completes becomes NAME.part). The shards are even: a dimension
 * that N does not divide is refused (one line per place, naming it and the
 * rank counts that divide every dimension the pass splits).
 *
 * Each value is whole on every rank or split along one axis (part r of N
 * on rank r). First, the vocabulary tables: a weight that embeddings read
 * as their table and bias-less linears (a tied classifier) as their
 * weight, and nothing else, is split by rows when N divides them (else it
 * stays whole, noted). Then in node order:
 * 0. embedding(table, ids) of such a table: vocabulary parallel, each
 *    rank's rows of its own ids and zeros for the others', completed by
 *    an allreduce (exact: one rank alone adds a nonzero).
 * 1. linear(x, W[, b]) with x whole and W (and b) a weight only it reads,
 *    or W a vocabulary table: column parallel, W and b split by rows, the
 *    result split along its last axis (q, k, v, gate, up, the classifier,
 *    tied or not); N must divide W's rows.
 * 2. linear(x, W[, b]) with x split along its last axis (the sum's) and W
 *    a weight only it reads: row parallel, W split by columns, each rank's
 *    result a partial sum completed by an allreduce (o, down); a bias is
 *    added after it, once. W held in blocks as the file stores them
 *    (GGUF's, FP8's, MXFP4's) needs N to divide a row's blocks (32, 128
 *    or 256 values: storage_block): refused otherwise. An FP8 weight's
 *    part may begin inside one of the file's 128 x 128 scale blocks: each rank reads the scales of its
 *    values' places, exact.
 * 3. Element-wise ops of operands split alike, rope and norms over another
 *    axis than the split one keep the split; a reshape keeps it where the
 *    part stays one contiguous run of the row (a head axis of D-wide heads
 *    in and out of [T, H * D]) and N divides the new axis.
 * 4. attention with q, k and v split along the head axis is split alike:
 *    whole KV-head groups per rank (N must divide the KV heads), and its
 *    sinks (gpt-oss: a weight of one logit a query head) with them; a
 *    cache_write of a split value into a state only it writes shards the
 *    state (each rank caches its own heads).
 * 4b. moe(x, router, gate, up, down[, biases]) whose stacked experts
 *    (gate, up, down and their biases: weights only it reads, experts
 *    along axis 0) N divides: expert parallel, those split by experts,
 *    the router (and its bias) and x whole, `ranks`
 *    set; each rank's result sums its experts' part, completed by an
 *    allreduce (as a row-parallel linear's). Experts that are a stack of
 *    one weight per expert (a Hugging Face folder's: a concat, of concats
 *    of 64, of [1, ...] reshapes of weights, all read only there) are
 *    split alike without cutting a tensor: of the E parts the first k =
 *    E / N stay, part j's weight reading on rank r the file's tensor of
 *    expert r k + j (Shard.tensors; it keeps rank 0's name), stacked
 *    again for the moe; the other parts, their weights and the old
 *    concats are dropped (cx->weight_stores follows: keep_stores).
 *    Experts read through views of stacked weights (gpt-oss: transposes
 *    keeping axis 0, reshapes keeping [E, ..], slices of another axis)
 *    that only the moe reads are split alike: their weights along axis 0
 *    (MXFP4 experts too: whole experts are whole blocks), their reshapes'
 *    first dimension E / N.
 * 5. Anything else needing a split operand gets it whole first (an
 *    allgather, made once per value); outputs are gathered too (the
 *    logits, split by vocabulary rows, are whole where sampling reads
 *    them). Norms' weights and rope stay whole on every rank.
 * 6. The sharded leaves take their parts' dims, every node is inferred
 *    again, and the notes give the distribution: each sharded weight's
 *    part per rank (a weight of a tensor per rank: which rank reads
 *    which), each rank's bytes, the collectives and their bytes per
 *    call. */
#include "passes.h"

#include <stdio.h>
#include <string.h>

/* One problem: what is wrong (the same words at every place it is),
 * the first place, and how many places after it. */
typedef struct {
    const char *what;
    const Node *at;
    int more;
} Refusal;

typedef struct {
    Module *m;
    PassCtx *cx;
    Arena *a;
    int N;
    int *ax;              /* by node id: the split axis, -1 whole */
    int *uses;            /* by node id of the input graph */
    char *table;          /* by node id: a vocabulary table, split by rows */
    char *dead;           /* by node id: dropped (experts other ranks hold) */
    Node **rep;           /* by node id: the node later users read instead */
    Node **whole;         /* by node id: its allgather, once made */
    Node **out;           /* the new node order */
    int nout, cap;
    int64_t *dims;        /* the dimensions split, for the refusals' advice */
    int ndims, capdims;
    Refusal *refused;
    int nrefused, caprefused;
} Dist;

static void push(Dist *ds, Node *n) { ARR_PUSH(ds->a, ds->out, ds->nout, ds->cap, n); }

static const char *name_of(Dist *ds, const Node *n)
{
    return n->name ? n->name : arena_printf(ds->a, "%%%d", n->id);
}

/* A refusal at n; the same problem again counts toward the first's
 * "and K more places". */
static void refuse(Dist *ds, const Node *n, const char *what)
{
    for (int i = 0; i < ds->nrefused; i++)
        if (strcmp(ds->refused[i].what, what) == 0) {
            ds->refused[i].more++;
            return;
        }
    Refusal r = {what, n, 0};
    ARR_PUSH(ds->a, ds->refused, ds->nrefused, ds->caprefused, r);
}

/* A dimension the pass splits by N: refused when N does not divide it. */
static int splits(Dist *ds, const Node *n, int64_t dim, const char *what)
{
    ARR_PUSH(ds->a, ds->dims, ds->ndims, ds->capdims, dim);
    if (dim % ds->N == 0)
        return 1;
    refuse(ds, n, arena_printf(ds->a, "the %lld %s do not split evenly over %d ranks",
                               (long long)dim, what, ds->N));
    return 0;
}

/* A new collective over x, named `name`, on x's JSON path. */
static Node *collective(Dist *ds, OpKind op, Node *x, int axis, const char *name)
{
    Node *c = ir_node_new(ds->m, op, &x, 1);
    c->name = name;
    c->where = x->where;
    ((AttrVal *)attr_v(c, "ranks"))->i = ds->N;
    ((AttrVal *)attr_v(c, "ranks"))->given = 1;
    if (op == OP_ALLGATHER) {
        ((AttrVal *)attr_v(c, "axis"))->i = axis;
        ((AttrVal *)attr_v(c, "axis"))->given = 1;
    }
    ds->ax[c->id] = -1;
    push(ds, c);
    return c;
}

/* x whole: itself, or its allgather (made once, before its first user). */
static Node *whole(Dist *ds, Node *x)
{
    if (ds->ax[x->id] < 0)
        return x;
    if (!ds->whole[x->id])
        ds->whole[x->id] = collective(ds, OP_ALLGATHER, x, ds->ax[x->id],
                                      arena_printf(ds->a, "%s.whole", name_of(ds, x)));
    return ds->whole[x->id];
}

static void gather_operands(Dist *ds, Node *n)
{
    for (int i = 0; i < n->nin; i++)
        n->in[i] = whole(ds, n->in[i]);
    ds->ax[n->id] = -1;
}

/* w, a weight only its one user reads. */
static int own_weight(Dist *ds, const Node *w)
{
    return w->op == OP_WEIGHT && ds->uses[w->id] == 1;
}

/* How weight w is held as the file stores it (--weight-dtype auto's
 * stores); f32 for anything else, or without those stores. */
static Storage held(Dist *ds, const Node *w)
{
    return w->op == OP_WEIGHT && ds->cx->weight_stores && w->index >= 0
               ? ds->cx->weight_stores[w->index] : ST_F32;
}

/* w split along axis: its part on each rank (the loader reads that part
 * of any tensor; an FP8 one's scales where it lies in the whole). */
static void shard(Dist *ds, Node *w, int axis)
{
    w->shard = (Shard){ds->N, axis, w->dims[axis], NULL};
    ds->ax[w->id] = axis;
}

/* Whether linear n's weight w splits by columns as the weights file
 * holds it in blocks (GGUF's q8_0 ...; FP8 re-blocked by 128 values of a
 * row; MXFP4: --weight-dtype auto): each rank holds whole blocks of
 * every row or none, so N must divide a row's blocks (refused otherwise:
 * held f32 instead, an FP8 part would take 4 bytes a weight on every
 * rank). (Blocks quantized from an f32 file are made of each rank's
 * part.) */
static int whole_blocks(Dist *ds, const Node *n, const Node *w)
{
    Storage st = held(ds, w);
    int b = storage_block(st);
    return !b || w->dims[1] % b ||
           splits(ds, n, w->dims[1] / b, arena_printf(ds->a, "blocks of %d in a row of its %s "
                                                      "weight", b, storage_name(st)));
}

/* ---- 1, 2. linear ----------------------------------------------------------- */

static void linear(Dist *ds, Node *n)
{
    Node *x = n->in[0], *w = n->in[1], *b = n->nin > 2 ? n->in[2] : NULL;
    if (ds->table[w->id]) {                           /* a tied classifier */
        if (ds->ax[w->id] < 0)
            shard(ds, w, 0);
        if (ds->ax[x->id] >= 0) {
            gather_operands(ds, n);
            push(ds, n);
            return;
        }
        ds->ax[n->id] = n->rank - 1;
        push(ds, n);
        return;
    }
    int own = own_weight(ds, w) && w->rank == 2 && (!b || own_weight(ds, b));
    if (own && ds->ax[x->id] < 0) {                   /* column parallel */
        if (!splits(ds, n, w->dims[0], "rows of its weight")) {
            gather_operands(ds, n);
            push(ds, n);
            return;
        }
        shard(ds, w, 0);
        if (b)
            shard(ds, b, 0);
        ds->ax[n->id] = n->rank - 1;
        push(ds, n);
        return;
    }
    if (own && ds->ax[x->id] == x->rank - 1) {         /* row parallel */
        if (!whole_blocks(ds, n, w)) {
            gather_operands(ds, n);
            push(ds, n);
            return;
        }
        shard(ds, w, 1);
        n->nin = 2;
        const char *name = name_of(ds, n);
        n->name = arena_printf(ds->a, "%s.part", name);
        ds->ax[n->id] = -1;
        push(ds, n);
        Node *sum = collective(ds, OP_ALLREDUCE, n, 0, b ? n->name : name);
        if (b) {
            sum->name = arena_printf(ds->a, "%s.sum", name);
            Node *in[2] = {sum, b};
            Node *add = ir_node_new(ds->m, OP_ADD, in, 2);
            add->name = name;
            add->where = n->where;
            ds->ax[add->id] = -1;
            push(ds, add);
            sum = add;
        }
        ds->rep[n->id] = sum;
        return;
    }
    gather_operands(ds, n);
    push(ds, n);
}

/* n, given `ranks` N, computes each rank's part of a sum (NAME.part); an
 * allreduce named NAME completes it, and later users read that. */
static void partial_sum(Dist *ds, Node *n)
{
    ((AttrVal *)attr_v(n, "ranks"))->i = ds->N;
    ((AttrVal *)attr_v(n, "ranks"))->given = 1;
    const char *name = name_of(ds, n);
    n->name = arena_printf(ds->a, "%s.part", name);
    ds->ax[n->id] = -1;
    push(ds, n);
    ds->rep[n->id] = collective(ds, OP_ALLREDUCE, n, 0, name);
}

/* ---- 0. embedding: vocabulary parallel ------------------------------------ */

/* The weights embeddings read as their table and nothing reads otherwise
 * than as a bias-less linear's weight; split when N divides their rows. */
static void vocab_tables(Dist *ds, int n0)
{
    Module *m = ds->m;
    int *fit = arena_alloc(ds->a, sizeof *fit * (size_t)n0);
    char *embeds = arena_alloc(ds->a, (size_t)n0);
    for (int i = 0; i < n0; i++) {
        Node *n = m->nodes[i];
        for (int j = 0; j < n->nin; j++) {
            Node *w = n->in[j];
            int emb = n->op == OP_EMBEDDING && j == 0;
            if (w->op == OP_WEIGHT && (emb || (n->op == OP_LINEAR && j == 1 && n->nin == 2)))
                fit[w->id]++;
            embeds[w->id] |= emb;
        }
    }
    for (int i = 0; i < m->nweights; i++) {
        Node *w = m->weights[i];
        if (w->id >= n0 || !embeds[w->id] || fit[w->id] != ds->uses[w->id] || w->rank != 2)
            continue;
        ds->table[w->id] = w->dims[0] % ds->N == 0;
        if (!ds->table[w->id])
            ir_note(ds->a, &m->notes, "weight '%s' whole on every rank: its %lld rows do not "
                    "split evenly over %d ranks", name_of(ds, w), (long long)w->dims[0], ds->N);
    }
}

static void embedding(Dist *ds, Node *n)
{
    Node *t = n->in[0];
    if (!ds->table[t->id] || ds->ax[n->in[1]->id] >= 0) {
        gather_operands(ds, n);
        push(ds, n);
        return;
    }
    if (ds->ax[t->id] < 0)
        shard(ds, t, 0);
    partial_sum(ds, n);
}

/* ---- 3. reshape ---------------------------------------------------------- */

/* x split along a: the output axis b where the same part lies (the
 * dims before it hold as many elements as x's before a), N dividing it;
 * -1 when there is none. */
static int reshape_axis(Dist *ds, const Node *n, const Node *x, int a)
{
    int64_t before = shape_count(a, x->dims), p = 1;
    for (int b = 0; b < n->rank; b++) {
        if (p == before && n->dims[b] % ds->N == 0)
            return b;
        p *= n->dims[b];
    }
    return -1;
}

static void reshape(Dist *ds, Node *n)
{
    Node *x = n->in[0];
    int a = ds->ax[x->id], b = a < 0 ? -1 : reshape_axis(ds, n, x, a);
    if (b < 0) {
        gather_operands(ds, n);
        push(ds, n);
        return;
    }
    AttrVal *sh = (AttrVal *)attr_v(n, "shape");
    int64_t *ints = arena_alloc(ds->a, sizeof *ints * (size_t)sh->nints);
    memcpy(ints, sh->ints, sizeof *ints * (size_t)sh->nints);
    if (ints[b] != -1)
        ints[b] /= ds->N;
    sh->ints = ints;
    ds->ax[n->id] = b;
    push(ds, n);
}

/* ---- 3, 4. ops that keep a split ------------------------------------------- */

/* Every split operand split along axis `a` of the same shape as n. */
static int split_alike(Dist *ds, const Node *n, int a)
{
    for (int i = 0; i < n->nin; i++) {
        const Node *x = n->in[i];
        if (ds->ax[x->id] >= 0 && (ds->ax[x->id] != a || x->rank != n->rank ||
                                    memcmp(x->dims, n->dims, sizeof *x->dims * (size_t)n->rank)))
            return 0;
    }
    return 1;
}

/* Operand i's split axis, when it is not the last (norms, rope work
 * along the last). */
static int split_not_last(Dist *ds, const Node *n, int i)
{
    const Node *x = n->in[i];
    int a = ds->ax[x->id];
    return a >= 0 && a < x->rank - 1 ? a : -1;
}

static void attention(Dist *ds, Node *n)
{
    Node *q = n->in[0], *k = n->in[1], *v = n->in[2];
    Node *sinks = n->nin >= 5 && n->in[n->nin - 1]->dtype == DT_F32 ? n->in[n->nin - 1] : NULL;
    ARR_PUSH(ds->a, ds->dims, ds->ndims, ds->capdims, k->dims[1]);
    if (ds->ax[q->id] == 1 && ds->ax[k->id] == 1 && ds->ax[v->id] == 1 &&
        (n->nin < 4 || ds->ax[n->in[3]->id] < 0) && (!sinks || own_weight(ds, sinks))) {
        if (sinks)
            shard(ds, sinks, 0);                    /* one a query head: split alike */
        ds->ax[n->id] = 1;
        push(ds, n);
        return;
    }
    if (ds->ax[q->id] >= 0 || ds->ax[k->id] >= 0 || ds->ax[v->id] >= 0)
        refuse(ds, n, arena_printf(ds->a, "the KV heads (%lld of them, for %lld query heads) do not "
                                   "split evenly over %d ranks", (long long)k->dims[1],
                                   (long long)q->dims[1], ds->N));
    gather_operands(ds, n);
    push(ds, n);
}

/* cache_write(state, new, pos): a split new shards a state only it
 * writes. */
static void cache_write(Dist *ds, Node *n)
{
    Node *st = n->in[0], *x = n->in[1];
    int a = ds->ax[x->id];
    if (a > 0 && st->op == OP_STATE && ds->uses[st->id] == 1 && ds->ax[n->in[2]->id] < 0) {
        shard(ds, st, a);
        ds->ax[n->id] = a;
        push(ds, n);
        return;
    }
    gather_operands(ds, n);
    push(ds, n);
}

/* ---- 4b. moe: expert parallel ---------------------------------------------- */

/* A part p of a stack of per-expert weights: its weight. */
static Node *part_weight(Node *p) { return p->op == OP_RESHAPE ? p->in[0] : p; }

/* s, a moe's operand, as a stack of one weight per expert (a Hugging Face
 * folder's: frontend/import_decoder.c stack()): a concat along axis 0
 * (of such concats, 64 at a time) only its user reads, of parts each a
 * weight [1, ...] or a reshape of a weight to [1, its dims], each read
 * only there. Its parts in expert order appended to parts; 0 when s is
 * no such stack. */
static int stack_parts(Dist *ds, Node *s, Node ***parts, int *n, int *cap)
{
    if (s->op != OP_CONCAT || ds->uses[s->id] != 1 || attr_i(s, "axis") != 0)
        return 0;
    for (int i = 0; i < s->nin; i++) {
        Node *p = s->in[i], *w = part_weight(p);
        if (p->op == OP_CONCAT) {
            if (!stack_parts(ds, p, parts, n, cap))
                return 0;
            continue;
        }
        if (!own_weight(ds, w) || p->dims[0] != 1 ||
            (p != w && (ds->uses[p->id] != 1 || p->rank != w->rank + 1 ||
                        memcmp(p->dims + 1, w->dims, sizeof *w->dims * (size_t)w->rank))))
            return 0;
        ARR_PUSH(ds->a, *parts, *n, *cap, p);
    }
    return 1;
}

/* The E parts' weights are held alike (--weight-dtype auto: as the file
 * holds each). */
static int same_store(Dist *ds, Node **parts, int E)
{
    const Storage *st = ds->cx->weight_stores;
    for (int e = 1; st && e < E; e++)
        if (st[part_weight(parts[e])->index] != st[part_weight(parts[0])->index])
            return 0;
    return 1;
}

static void drop_stack(Dist *ds, Node *s)
{
    ds->dead[s->id] = 1;
    for (int i = 0; i < s->nin; i++)
        if (s->in[i]->op == OP_CONCAT)
            drop_stack(ds, s->in[i]);
}

/* Stack s of E parts, expert parallel: rank r holds experts r k .. r k +
 * k - 1 (k = E / N), part j's weight reading on rank r the tensor of part
 * r k + j's (Shard.tensors); the other parts, their weights and s's
 * concats are dropped, and a stack of the first k parts (named as s)
 * replaces s: what a stacked weight split by experts gives the moe. */
static Node *split_stack(Dist *ds, Node *s, Node **parts, int E)
{
    int k = E / ds->N;
    drop_stack(ds, s);
    for (int j = 0; j < E; j++) {
        Node *w = part_weight(parts[j]);
        if (j >= k) {
            ds->dead[parts[j]->id] = ds->dead[w->id] = 1;
            continue;
        }
        const char **t = arena_alloc(ds->a, sizeof *t * (size_t)ds->N);
        for (int r = 0; r < ds->N; r++)
            t[r] = part_weight(parts[r * k + j])->name;
        w->shard = (Shard){ds->N, -1, 0, t};
    }
    for (int level = 0; k > 1; level++) {       /* concats of 64 at most, as the frontend's */
        int groups = (k + 63) / 64;
        for (int g = 0; g < groups; g++) {
            Node *c = ir_node_new(ds->m, OP_CONCAT, parts + g * 64, k - g * 64 < 64 ? k - g * 64 : 64);
            c->name = groups == 1 ? s->name : arena_printf(ds->a, "%s.%d.%d", name_of(ds, s), level, g);
            c->where = s->where;
            ds->ax[c->id] = -1;
            push(ds, c);
            parts[g] = c;
        }
        k = groups;
    }
    return parts[0];
}

/* Operands 2.. of moe n but the router's bias (5): gate, up, down and
 * their biases, each a weight only n reads, stacked along axis 0, or a
 * stack of one weight per expert (parts[i], nparts[i]); N must divide the
 * experts. */
/* x, a moe's operand, as a view of weights along the experts' axis
 * (gpt-oss's: transposes keeping axis 0 first, reshapes keeping [E, ..],
 * slices of another axis, down to weights [E, ..]); its nodes, each once,
 * appended to v. 0 when x is no such view. */
static int expert_view(Dist *ds, Node *x, int64_t E, Node ***v, int *n, int *cap)
{
    for (int i = 0; i < *n; i++)
        if ((*v)[i] == x)                   /* gate and up: one tensor's views */
            return 1;
    const AttrVal *at = x->op == OP_TRANSPOSE ? attr_v(x, "perm")
                        : x->op == OP_RESHAPE ? attr_v(x, "shape") : NULL;
    int64_t axis = x->op == OP_SLICE ? attr_i(x, "axis") : 0;
    int ok = x->rank >= 1 && x->dims[0] == E &&
             (x->op == OP_WEIGHT || (at && at->nints && at->ints[0] == (x->op == OP_RESHAPE ? E : 0)) ||
              (x->op == OP_SLICE && axis != 0 && axis != -x->rank));
    if (!ok)
        return 0;
    ARR_PUSH(ds->a, *v, *n, *cap, x);
    return x->op == OP_WEIGHT || expert_view(ds, x->in[0], E, v, n, cap);
}

/* The view nodes v read only by each other and by moe n. */
static int views_own(Dist *ds, const Node *n, Node **v, int nv)
{
    for (int i = 0; i < nv; i++) {
        int users = 0;
        for (int j = 0; j < nv; j++)
            users += v[j]->op != OP_WEIGHT && v[j]->in[0] == v[i];
        for (int j = 0; j < n->nin; j++)
            users += n->in[j] == v[i];
        if (users != ds->uses[v[i]->id])
            return 0;
    }
    return 1;
}

/* Views v split by experts: their weights along axis 0, their reshapes'
 * first dimension E / N. */
static void split_views(Dist *ds, Node **v, int nv)
{
    for (int i = 0; i < nv; i++)
        if (v[i]->op == OP_WEIGHT) {
            shard(ds, v[i], 0);
        } else if (v[i]->op == OP_RESHAPE) {
            AttrVal *sh = (AttrVal *)attr_v(v[i], "shape");
            int64_t *ints = arena_alloc(ds->a, sizeof *ints * (size_t)sh->nints);
            memcpy(ints, sh->ints, sizeof *ints * (size_t)sh->nints);
            ints[0] /= ds->N;
            sh->ints = ints;
        }
}

static void moe(Dist *ds, Node *n)
{
    Node **parts[9] = {0}, **views = NULL;
    int nparts[9] = {0}, own = 1, nviews = 0, capviews = 0;
    int64_t E = n->in[2]->dims[0];
    for (int i = 2; i < n->nin; i++) {
        int cap = 0;
        if (i == 5 || own_weight(ds, n->in[i]))
            continue;
        if (stack_parts(ds, n->in[i], &parts[i], &nparts[i], &cap) && nparts[i] == E &&
            same_store(ds, parts[i], nparts[i]))
            continue;
        parts[i] = NULL;
        own &= expert_view(ds, n->in[i], E, &views, &nviews, &capviews);
    }
    own = own && views_own(ds, n, views, nviews);
    if (!own || !splits(ds, n, E, "experts")) {
        gather_operands(ds, n);
        push(ds, n);
        return;
    }
    n->in[0] = whole(ds, n->in[0]);
    n->in[1] = whole(ds, n->in[1]);
    split_views(ds, views, nviews);
    for (int i = 2; i < n->nin; i++)
        if (i == 5)
            n->in[5] = whole(ds, n->in[5]);     /* the router's bias */
        else if (parts[i])
            n->in[i] = split_stack(ds, n->in[i], parts[i], nparts[i]);
        else if (n->in[i]->op == OP_WEIGHT)
            shard(ds, n->in[i], 0);
    partial_sum(ds, n);
}

static void node(Dist *ds, Node *n)
{
    int a;
    for (int i = 0; i < n->nin; i++)
        if (ds->rep[n->in[i]->id])
            n->in[i] = ds->rep[n->in[i]->id];
    ds->ax[n->id] = -1;
    if (OP_IS_LEAF(n->op)) {
        push(ds, n);
        return;
    }
    switch (n->op) {
    case OP_EMBEDDING: embedding(ds, n); return;
    case OP_LINEAR: linear(ds, n); return;
    case OP_RESHAPE: reshape(ds, n); return;
    case OP_ATTENTION: attention(ds, n); return;
    case OP_CACHE_WRITE: cache_write(ds, n); return;
    case OP_MOE: moe(ds, n); return;
    case OP_ROPE:
    case OP_RMSNORM:
    case OP_LAYERNORM:
        a = split_not_last(ds, n, 0);
        for (int i = 1; i < n->nin; i++)
            n->in[i] = whole(ds, n->in[i]);
        if (a < 0)
            n->in[0] = whole(ds, n->in[0]);
        ds->ax[n->id] = a;
        push(ds, n);
        return;
    case OP_ALLREDUCE:
    case OP_ALLGATHER:
        if (attr_i(n, "ranks") > 1)
            refuse(ds, n, "the graph is distributed already");
        break;
    default:
        if (n->op >= OP_ADD && n->op <= OP_GELU) {   /* element-wise (ops.def) */
            a = -1;
            for (int i = 0; i < n->nin; i++)
                if (ds->ax[n->in[i]->id] >= 0)
                    a = ds->ax[n->in[i]->id];
            if (a >= 0 && split_alike(ds, n, a)) {
                for (int i = 0; i < n->nin; i++)
                    if (ds->ax[n->in[i]->id] < 0 && n->in[i]->op != OP_CONST)
                        a = -1;               /* a whole tensor beside a part */
                if (a >= 0) {
                    ds->ax[n->id] = a;
                    push(ds, n);
                    return;
                }
            }
        }
        break;
    }
    gather_operands(ds, n);
    push(ds, n);
}

/* ---- 6. the parts' shapes, the notes -------------------------------------- */

static int64_t gcd(int64_t x, int64_t y) { return y ? gcd(y, x % y) : x; }

/* "1, 2, 4, 8": the rank counts that split every dimension split. */
static const char *advice(Dist *ds)
{
    int64_t g = 0;
    for (int i = 0; i < ds->ndims; i++)
        g = gcd(ds->dims[i], g);
    const char *s = "1";
    for (int64_t d = 2; d <= g && d <= 4096; d++)
        if (g % d == 0)
            s = arena_printf(ds->a, "%s, %lld", s, (long long)d);
    return s;
}

/* "weight 'W' split by rows (64 of them): rank 0 holds 0..31, rank 1
 * holds 32..63 (8192 bytes each)"; a formula past 8 ranks. */
static void note_weight(Dist *ds, const Node *w)
{
    static const char *const what[] = {"rows", "columns"};
    const char *axis = w->shard.axis < 2 && w->rank <= 2 ? what[w->shard.axis]
                       : w->rank == 3 && w->shard.axis == 0 ? "experts"   /* moe's stacks */
                                                            : arena_printf(ds->a, "axis %d", w->shard.axis);
    int64_t len = w->dims[w->shard.axis];
    const char *parts = "";
    for (int r = 0; r < ds->N && ds->N <= 8; r++)
        parts = arena_printf(ds->a, "%s%s rank %d holds %lld..%lld", parts, r ? "," : "", r,
                             (long long)(r * len), (long long)((r + 1) * len - 1));
    if (ds->N > 8)
        parts = arena_printf(ds->a, " rank r holds %lld r..%lld r + %lld", (long long)len, (long long)len,
                             (long long)(len - 1));
    ir_note(ds->a, &ds->m->notes, "weight '%s' split by %s (%lld of them):%s (%zu bytes each)",
            w->name, axis, (long long)w->shard.of, parts, node_bytes(w));
}

/* Tokens a call: a decoder's T, else 1. */
static int64_t calls_tokens(const Module *m)
{
    IrDecoder dec;
    return ir_decoder(m, &dec) ? dec.tokens : 1;
}

/* "weight 'W' one tensor of the file per rank: rank 0 reads 'A', rank 1
 * reads 'B' (8192 bytes each)"; the first and last past 8 ranks. */
static void note_tensors(Dist *ds, const Node *w)
{
    const char *parts = "";
    for (int r = 0; r < ds->N; r++)
        if (ds->N <= 8 || r == 0 || r == ds->N - 1)
            parts = arena_printf(ds->a, "%s%s rank %d reads '%s'", parts,
                                 r == 0 ? "" : r == ds->N - 1 && ds->N > 8 ? ", ...," : ",", r,
                                 w->shard.tensors[r]);
    ir_note(ds->a, &ds->m->notes, "weight '%s' one tensor of the file per rank:%s (%zu bytes each)",
            w->name, parts, node_bytes(w));
}

/* The split weights under x (a moe's expert operand: a weight, or the
 * concats and views of weights over them), each marked in `in` by id,
 * counted with their bytes. */
static void expert_weights(const Node *x, char *in, int *count, int64_t *bytes)
{
    if (x->op == OP_WEIGHT && x->shard.ranks && !in[x->id]) {
        in[x->id] = 1;
        (*count)++;
        *bytes += (int64_t)node_bytes(x);
    }
    for (int i = 0; x->op != OP_WEIGHT && i < x->nin; i++)
        expert_weights(x->in[i], in, count, bytes);
}

/* "moe 'M': 4 experts over the ranks, 2 each: rank 0 holds experts 0..1,
 * rank 1 holds 2..3 (6 weight tensors, 49152 bytes a rank)", one line for
 * its experts' weights, marked in `in` (their lines would be one per
 * expert and projection); a formula past 8 ranks. */
static void note_moe(Dist *ds, const Node *n, char *in)
{
    int count = 0;
    int64_t bytes = 0, k = n->in[2]->dims[0];
    for (int i = 2; i < n->nin; i++)
        if (i != 5)                     /* the router's bias, whole */
            expert_weights(n->in[i], in, &count, &bytes);
    const char *parts = "";
    for (int r = 0; r < ds->N && ds->N <= 8; r++)
        parts = arena_printf(ds->a, "%s%s rank %d holds %s%lld..%lld", parts, r ? "," : "", r,
                             r ? "" : "experts ", (long long)(r * k), (long long)((r + 1) * k - 1));
    if (ds->N > 8)
        parts = arena_printf(ds->a, " rank r holds experts %lld r..%lld r + %lld", (long long)k,
                             (long long)k, (long long)(k - 1));
    ir_note(ds->a, &ds->m->notes, "moe '%s': %lld experts over the ranks, %lld each:%s (%d weight "
            "tensors, %lld bytes a rank)", n->name ? n->name : "", (long long)(k * ds->N),
            (long long)k, parts, count, (long long)bytes);
}

static void note_distribution(Dist *ds)
{
    Module *m = ds->m;
    int64_t held = 0, all = 0, sum = 0, gathered = 0;
    char *in = arena_alloc(ds->a, (size_t)m->nnodes + 1);     /* by id: a moe's, noted so */
    for (int i = 0; i < m->nnodes; i++)
        if (m->nodes[i]->op == OP_MOE && attr_i(m->nodes[i], "ranks") > 1)
            note_moe(ds, m->nodes[i], in);
    for (int i = 0; i < m->nweights; i++) {
        Node *w = m->weights[i];
        all += (int64_t)node_bytes(w) * (w->shard.ranks ? ds->N : 1);
        held += (int64_t)node_bytes(w);
        if (in[w->id])
            continue;
        if (w->shard.tensors)
            note_tensors(ds, w);
        else if (w->shard.ranks)
            note_weight(ds, w);
    }
    int nsum = 0, ngather = 0;
    for (int i = 0; i < m->nnodes; i++) {
        Node *n = m->nodes[i];
        if (n->op == OP_ALLREDUCE) {
            nsum++;
            sum += (int64_t)node_bytes(n);
        }
        if (n->op == OP_ALLGATHER) {
            ngather++;
            gathered += (int64_t)node_bytes(n);
        }
    }
    ir_note(ds->a, &m->notes, "%d ranks: each holds %lld weight bytes of %lld (as f32: the sharded "
            "weights' 1/%d and the whole ones)", ds->N, (long long)held, (long long)all, ds->N);
    ir_note(ds->a, &m->notes, "a call of %lld token(s) runs allreduce %d times (%lld bytes of "
            "results in all) and allgather %d times (%lld bytes)", (long long)calls_tokens(m), nsum,
            (long long)sum, ngather, (long long)gathered);
}

/* cx->weight_stores, by weight index, for the weights left (in the same
 * order; m->nodes is the new order, their indices still the old). */
static void keep_stores(Dist *ds)
{
    Module *m = ds->m;
    if (!ds->cx->weight_stores)
        return;
    Storage *st = arena_alloc(ds->a, sizeof *st * (size_t)(m->nweights + 1));
    int k = 0;
    for (int i = 0; i < m->nnodes; i++)
        if (m->nodes[i]->op == OP_WEIGHT)
            st[k++] = ds->cx->weight_stores[m->nodes[i]->index];
    ds->cx->weight_stores = st;
}

/* The leaves take their parts' dims; every node is inferred again. */
static int reshape_parts(Dist *ds)
{
    Module *m = ds->m;
    for (int i = 0; i < m->nnodes; i++) {
        Node *n = m->nodes[i];
        if (n->shard.ranks && n->shard.axis >= 0 && n->dims[n->shard.axis] == n->shard.of)
            n->dims[n->shard.axis] /= ds->N;
    }
    InferCx ic = {m, ds->cx->d};
    for (int i = 0; i < m->nnodes; i++)
        if (!OP_IS_LEAF(m->nodes[i]->op) && op_table[m->nodes[i]->op].infer(&ic, m->nodes[i]))
            return -1;
    return 0;
}

int pass_distribute(Module *m, PassCtx *cx)
{
    if (cx->ranks <= 1)
        return 0;
    int n0 = m->nnodes, cap = 4 * n0 + 2 * m->noutputs + 4;
    Dist ds = {.m = m, .cx = cx, .a = m->a, .N = cx->ranks};
    ds.ax = arena_alloc(m->a, sizeof *ds.ax * (size_t)cap);
    ds.uses = arena_alloc(m->a, sizeof *ds.uses * (size_t)cap);
    ds.rep = arena_alloc(m->a, sizeof *ds.rep * (size_t)cap);
    ds.whole = arena_alloc(m->a, sizeof *ds.whole * (size_t)cap);
    ds.table = arena_alloc(m->a, (size_t)cap);
    ds.dead = arena_alloc(m->a, (size_t)cap);
    for (int i = 0; i < n0; i++)
        for (int j = 0; j < m->nodes[i]->nin; j++)
            ds.uses[m->nodes[i]->in[j]->id]++;
    for (int i = 0; i < m->noutputs; i++)
        ds.uses[m->outputs[i]->id]++;
    vocab_tables(&ds, n0);
    for (int i = 0; i < n0; i++)
        node(&ds, m->nodes[i]);
    for (int i = 0; i < m->noutputs; i++) {
        Node *o = m->outputs[i];
        if (ds.rep[o->id])
            o = ds.rep[o->id];
        if (ds.ax[o->id] >= 0) {
            Node *w = whole(&ds, o);
            w->name = o->name;
            o->name = arena_printf(m->a, "%s.part", o->name);
            o = w;
        }
        m->outputs[i] = o;
    }
    if (ds.nrefused) {
        const char *ok = advice(&ds);
        for (int i = 0; i < ds.nrefused; i++) {
            const Refusal *r = &ds.refused[i];
            diag(cx->d, r->at->where, "%s: %s%s; --ranks that split every sharded dimension: %s",
                 name_of(&ds, r->at), r->what,
                 r->more ? arena_printf(m->a, " (and %d more places)", r->more) : "", ok);
        }
        return -1;
    }
    m->nnodes = 0;
    for (int i = 0; i < ds.nout; i++)
        if (!ds.dead[ds.out[i]->id])
            ds.out[m->nnodes++] = ds.out[i];
    m->nodes = ds.out;
    m->capnodes = ds.cap;
    keep_stores(&ds);
    ir_module_renumber(m);
    if (reshape_parts(&ds) != 0)
        return -1;
    note_distribution(&ds);
    return 1;
}
