/* ir/infer.c: helpers shared by the ops' infer_* functions. Messages name
 * the operand's JSON path and, when shapes disagree, both shapes. */
#include "ops.h"

#include <string.h>

const char *in_where(InferCx *cx, const Node *n, int i)
{
    return arena_printf(cx->m->a, "%s.inputs[%d]", n->where ? n->where : "?", i);
}

const char *attr_where(InferCx *cx, const Node *n, const char *attr)
{
    return arena_printf(cx->m->a, "%s.attrs.%s", n->where ? n->where : "?", attr);
}

const char *shp(InferCx *cx, const Node *x)
{
    return arena_printf(cx->m->a, "%s%s", dtype_name(x->dtype),
                        shape_str(cx->m->a, x->rank, x->dims));
}

int need_dtype(InferCx *cx, Node *n, int i, DType t)
{
    Node *x = n->in[i];
    if (x->dtype == t)
        return 0;
    diag(cx->d, in_where(cx, n, i), "%s needs %s here, got %s",
         op_table[n->op].name, dtype_name(t), shp(cx, x));
    return -1;
}

int need_rank(InferCx *cx, Node *n, int i, int rank)
{
    Node *x = n->in[i];
    if (x->rank == rank)
        return 0;
    diag(cx->d, in_where(cx, n, i), "%s needs rank %d here, got %s",
         op_table[n->op].name, rank, shp(cx, x));
    return -1;
}

int need_rank_min(InferCx *cx, Node *n, int i, int rank)
{
    Node *x = n->in[i];
    if (x->rank >= rank)
        return 0;
    diag(cx->d, in_where(cx, n, i), "%s needs rank %d or more here, got %s",
         op_table[n->op].name, rank, shp(cx, x));
    return -1;
}

int need_vector(InferCx *cx, Node *n, int i, int64_t dim, const char *what)
{
    Node *x = n->in[i];
    if (x->rank == 1 && x->dims[0] == dim && x->dtype == DT_F32)
        return 0;
    diag(cx->d, in_where(cx, n, i), "%s: %s must be f32[%lld], got %s",
         op_table[n->op].name, what, (long long)dim, shp(cx, x));
    return -1;
}

void set_shape(Node *n, DType t, int rank, const int64_t *dims)
{
    n->dtype = t;
    n->rank = rank;
    memset(n->dims, 0, sizeof n->dims);
    if (rank)
        memcpy(n->dims, dims, sizeof *dims * (size_t)rank);
}

void set_like(Node *n, const Node *x) { set_shape(n, x->dtype, x->rank, x->dims); }
