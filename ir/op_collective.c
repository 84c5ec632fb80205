/* ir/op_collective.c: the collectives of a program run as `ranks` MPI
 * ranks (docs/model-format.md, "Collectives"). Every rank runs the same
 * graph over its own slice of the weights; a collective combines one
 * operand's values from every rank and gives each rank the same result:
 *   allreduce  y = x_0 + x_1 + ... + x_{N-1}, summed in rank order (f32)
 *   allgather  y = concat(x_0, ..., x_{N-1}) along `axis` (any dtype)
 * At ranks = 1 both are the identity. The reference reads the other ranks'
 * operands from its peers (ref_run_ranks runs the N ranks' graphs in
 * lockstep, node by node, so a peer's operand is computed before the
 * collective reads it). Lowering: a copy at ranks = 1, else a call of the
 * MPI runtime part's collective (call allreduce / allgather). */
#include "ops.h"

#include <string.h>

const AttrSpec allreduce_attrs[] = {{"ranks", AT_INT, 0, 1, 0, NULL, 0, 0}, {0}};
const AttrSpec allgather_attrs[] = {
    {"axis", AT_INT, 1, 0, 0, NULL, 0, 0},
    {"ranks", AT_INT, 0, 1, 0, NULL, 0, 0},
    {0},
};

/* n's `ranks`, at least 1; reports it otherwise and returns -1. */
static int need_ranks(InferCx *cx, Node *n)
{
    int64_t r = attr_i(n, "ranks");
    if (r >= 1 && r <= 1 << 20)
        return 0;
    diag(cx->d, attr_where(cx, n, "ranks"), "%s: ranks %lld is not in [1, %d]",
         op_table[n->op].name, (long long)r, 1 << 20);
    return -1;
}

/* The reference runs as many ranks as the node says it spans. */
static int ranks_agree(RefCx *cx, Node *n)
{
    int64_t r = attr_i(n, "ranks");
    if (r == cx->nranks)
        return 0;
    return ref_fail(cx, n, "%s over %lld ranks, run on %d", op_table[n->op].name,
                    (long long)r, cx->nranks);
}

/* Operand 0's value on rank r. */
static Tensor *peer_in(RefCx *cx, Node *n, int r) { return &cx->peers[r].t[n->in[0]->id]; }

/* y = x, element by element, at ranks = 1; a call of the MPI runtime's
 * collective over more. */
static void lower_identity(LowerCx *cx, Node *n, const char *name)
{
    Kernel *k = lw_kernel(cx, n, arena_printf(cx->a, "%s_n%lld", name, (long long)node_count(n)));
    if (attr_i(n, "ranks") > 1) {
        Tile t[2] = {{lw_buf(cx, n), NULL, {0}}, {lw_buf(cx, n->in[0]), NULL, {0}}};
        for (int i = 0; i < 2; i++) {
            t[i].idx = arena_alloc(cx->a, sizeof *t[i].idx * (size_t)(n->rank ? n->rank : 1));
            for (int d = 0; d < n->rank; d++) {
                t[i].idx[d] = e_int(cx->a, 0);
                t[i].ext[d] = t[i].buf->dims[d];
            }
        }
        s_call(cx->a, &k->body, n->op == OP_ALLREDUCE ? CALL_ALLREDUCE : CALL_ALLGATHER, t, 2);
        return;
    }
    Var *v[KILN_MAX_RANK];
    Block *body = lw_nest(cx, k, &k->body, n->rank, n->dims, v);
    Expr **ix = lw_vars(cx, n->rank, v);
    s_store(cx->a, body, lw_buf(cx, n), ix, A_SET, lw_load(cx, n->in[0], ix));
}

/* ---- allreduce: the sum over ranks ------------------------------------- */

int infer_allreduce(InferCx *cx, Node *n)
{
    int bad = need_ranks(cx, n) | need_dtype(cx, n, 0, DT_F32);
    set_like(n, n->in[0]);
    return bad;
}

/* Each element summed in double over ranks 0, 1, ..., N-1, stored f32. */
int ref_allreduce(RefCx *cx, Node *n)
{
    if (ranks_agree(cx, n) != 0)
        return -1;
    Tensor *y = ref_out(cx, n);
    for (int64_t i = 0; i < y->count; i++) {
        double s = 0;
        for (int r = 0; r < cx->nranks; r++)
            s += peer_in(cx, n, r)->f[i];
        y->f[i] = (float)s;
    }
    return 0;
}

void lower_allreduce(LowerCx *cx, Node *n) { lower_identity(cx, n, "allreduce"); }

/* ---- allgather: the concatenation over ranks along axis ----------------- */

int infer_allgather(InferCx *cx, Node *n)
{
    Node *x = n->in[0];
    int bad = need_ranks(cx, n);
    int ax = axis_norm(attr_i(n, "axis"), x->rank);
    if (ax < 0) {
        diag(cx->d, attr_where(cx, n, "axis"), "allgather: axis %lld is out of range for %s",
             (long long)attr_i(n, "axis"), shp(cx, x));
        return -1;
    }
    set_like(n, x);
    if (!bad)
        n->dims[ax] = x->dims[ax] * attr_i(n, "ranks");
    return bad;
}

/* For each outer index, rank 0's rows along axis, then rank 1's, ... */
int ref_allgather(RefCx *cx, Node *n)
{
    if (ranks_agree(cx, n) != 0)
        return -1;
    Tensor *y = ref_out(cx, n);
    Node *x = n->in[0];
    int ax = axis_norm(attr_i(n, "axis"), x->rank);
    int64_t row = shape_count(x->rank - ax, x->dims + ax);
    char *at = y->f ? (char *)y->f : (char *)y->i;
    for (int64_t o = 0; o < shape_count(ax, x->dims); o++)
        for (int r = 0; r < cx->nranks; r++) {
            Tensor *xr = peer_in(cx, n, r);
            const char *src = xr->f ? (const char *)xr->f : (const char *)xr->i;
            memcpy(at, src + o * row * 4, (size_t)row * 4);
            at += row * 4;
        }
    return 0;
}

void lower_allgather(LowerCx *cx, Node *n) { lower_identity(cx, n, "allgather"); }
