/* ir/lowerlib.c: helpers the ops' lower_* functions build loop nests with. */
#include "ir.h"

#include <string.h>

Kernel *lw_kernel(LowerCx *cx, Node *n, const char *name)
{
    Kernel *k = ir_kernel_new(cx->a, cx->p, name);
    ARR_PUSH(cx->a, k->nodes, k->nnodes, k->capnodes, n);
    return k;
}

static BufKind leaf_kind(OpKind op)
{
    switch (op) {
    case OP_INPUT: return BK_INPUT;
    case OP_WEIGHT: return BK_WEIGHT;
    case OP_STATE: return BK_STATE;
    default: return BK_TEMP;
    }
}

Buf *lw_buf(LowerCx *cx, Node *n)
{
    if (n->buf)
        return n->buf;
    if (n->op == OP_CONST)
        KILN_BUG("constant %%%d has no buffer", n->id);
    if (n->op == OP_CACHE_WRITE)      /* writes its state in place */
        return n->buf = lw_buf(cx, n->in[0]);
    Buf *b = ir_buf_new(cx->a, cx->p, leaf_kind(n->op), n->dtype, n->rank, n->dims);
    b->node = n;
    if (b->kind != BK_TEMP)
        b->index = n->index;
    return n->buf = b;
}

Block *lw_nest(LowerCx *cx, Kernel *k, Block *blk, int rank,
               const int64_t *dims, Var **vars)
{
    for (int i = 0; i < rank; i++) {
        Stmt *s = s_loop(cx->a, k, blk, e_int(cx->a, 0), e_int(cx->a, dims[i]), 0);
        vars[i] = s->v;
        blk = &s->body;
    }
    return blk;
}

Block *lw_nest_but(LowerCx *cx, Kernel *k, Block *blk, int rank,
                   const int64_t *dims, int axis, Expr **ix)
{
    for (int i = 0; i < rank; i++) {
        ix[i] = NULL;
        if (i == axis)
            continue;
        Stmt *s = s_loop(cx->a, k, blk, e_int(cx->a, 0), e_int(cx->a, dims[i]), 0);
        ix[i] = e_var(cx->a, s->v);
        blk = &s->body;
    }
    return blk;
}

Expr *lw_load(LowerCx *cx, Node *x, Expr **idx)
{
    if (x->op == OP_CONST)
        return e_flt(cx->a, x->value);
    return e_load(cx->a, lw_buf(cx, x), idx);
}

Expr *lw_bcast_load(LowerCx *cx, Node *x, int r, Var **idx)
{
    Expr *ix[KILN_MAX_RANK];
    for (int j = 0; j < x->rank; j++) {
        int o = r - x->rank + j;
        ix[j] = x->dims[j] == 1 ? e_int(cx->a, 0) : e_var(cx->a, idx[o]);
    }
    return lw_load(cx, x, ix);
}

Expr *lw_scalar(LowerCx *cx, Node *x)
{
    if (x->rank != 0)
        KILN_BUG("%%%d is not a scalar", x->id);
    return lw_load(cx, x, NULL);
}

Expr **lw_idx(LowerCx *cx, int n, ...)
{
    Expr **v = arena_alloc(cx->a, sizeof *v * (size_t)(n ? n : 1));
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        v[i] = va_arg(ap, Expr *);
    va_end(ap);
    return v;
}

Expr **lw_vars(LowerCx *cx, int n, Var **vars)
{
    Expr **v = arena_alloc(cx->a, sizeof *v * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++)
        v[i] = e_var(cx->a, vars[i]);
    return v;
}

Buf *lw_temp(LowerCx *cx, DType t, int rank, const int64_t *dims)
{
    return ir_buf_new(cx->a, cx->p, BK_TEMP, t, rank, dims);
}

const char *lw_name(LowerCx *cx, const Node *n)
{
    if (!n->name)
        return arena_printf(cx->a, "node %%%%%d", n->id);
    size_t len = strlen(n->name), extra = 0;
    for (size_t i = 0; i < len; i++)
        extra += n->name[i] == '%';
    char *s = arena_alloc(cx->a, len + extra + 3);
    char *q = s;
    *q++ = '\'';
    for (size_t i = 0; i < len; i++) {
        if (n->name[i] == '%')
            *q++ = '%';
        *q++ = n->name[i];
    }
    *q++ = '\'';
    return s;
}
