/* ir/ops.h: what the op families define for the op table (ops.def), and
 * helpers they share. Included by ir/op_*.c and ir/optable.c only. */
#ifndef KILN_OPS_H
#define KILN_OPS_H

#include "ir.h"

extern const AttrSpec no_attrs[], gelu_attrs[], matmul_attrs[],
    rmsnorm_attrs[], layernorm_attrs[], batchnorm_attrs[], softmax_attrs[],
    reduce_attrs[], argmax_attrs[], topk_attrs[], reshape_attrs[],
    transpose_attrs[], concat_attrs[], slice_attrs[], rope_attrs[],
    attention_attrs[], embedding_attrs[], moe_attrs[], allreduce_attrs[], allgather_attrs[];

#define OP_FNS(x)                                                           \
    int infer_##x(InferCx *cx, Node *n);                                    \
    int ref_##x(RefCx *cx, Node *n);                                        \
    void lower_##x(LowerCx *cx, Node *n);
OP_FNS(binary) OP_FNS(unary)
OP_FNS(matmul) OP_FNS(linear)
OP_FNS(rmsnorm) OP_FNS(layernorm) OP_FNS(batchnorm) OP_FNS(softmax)
OP_FNS(reduce) OP_FNS(argmax) OP_FNS(topk)
OP_FNS(reshape) OP_FNS(transpose) OP_FNS(concat) OP_FNS(slice)
OP_FNS(embedding) OP_FNS(rope) OP_FNS(attention) OP_FNS(cache_write)
OP_FNS(moe) OP_FNS(allreduce) OP_FNS(allgather)
#undef OP_FNS

/* infer helpers (infer.c). Each reports with diag() at the operand's
 * JSON path and returns 0 when the operand is acceptable. */
const char *in_where(InferCx *cx, const Node *n, int i); /* "nodes[3].inputs[1]" */
const char *attr_where(InferCx *cx, const Node *n, const char *attr);
const char *shp(InferCx *cx, const Node *x);             /* "f32[40,1536]" */
int need_dtype(InferCx *cx, Node *n, int i, DType t);
int need_rank(InferCx *cx, Node *n, int i, int rank);    /* exactly */
int need_rank_min(InferCx *cx, Node *n, int i, int rank);
/* Operand i must be [dim] (a vector of length dim, e.g. a norm weight). */
int need_vector(InferCx *cx, Node *n, int i, int64_t dim, const char *what);
void set_shape(Node *n, DType t, int rank, const int64_t *dims);
void set_like(Node *n, const Node *x);

/* reference helpers (ref.c) */
/* Flat offset of broadcast operand x (shape xr/xd) for output index
 * out[] of rank r. */
int64_t bcast_offset(int r, const int64_t *out, int xr, const int64_t *xd);
/* Advances a row-major multi-index; returns 0 after the last. */
int index_next(int r, const int64_t *dims, int64_t *idx);
/* Element of a tensor as double (f32 or i32). */
double tget(const Tensor *t, int64_t i);

#endif
