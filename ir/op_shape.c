/* ir/op_shape.c: reshape (row-major, one -1 allowed), transpose
 * (torch.permute), concat (torch.cat) and slice (step 1, Python's bounds).
 * Any dtype: the references move 4-byte elements without reading them.
 * Each lowers to a copy kernel for now; canonicalize-memrefs turns them
 * into index maps later (docs/design.md). */
#include "ops.h"

#include <string.h>

const AttrSpec reshape_attrs[] = {{"shape", AT_INTS, 1, 0, 0, NULL, 0, 0}, {0}};
const AttrSpec transpose_attrs[] = {{"perm", AT_INTS, 1, 0, 0, NULL, 0, 0}, {0}};
const AttrSpec concat_attrs[] = {{"axis", AT_INT, 0, 0, 0, NULL, 0, 0}, {0}};
/* end defaults to the whole axis (INT64_MAX, clamped like Python). */
const AttrSpec slice_attrs[] = {
    {"axis", AT_INT, 1, 0, 0, NULL, 0, 0},
    {"start", AT_INT, 0, 0, 0, NULL, 0, 0},
    {"end", AT_INT, 0, INT64_MAX, 0, NULL, 0, 0},
    {0},
};

/* A tensor's storage as bytes; every element is 4 of them. */
static char *bytes(const Tensor *t) { return t->f ? (char *)t->f : (char *)t->i; }

/* Copies count elements from x at element offset xo to y at yo. */
static void copy(Tensor *y, int64_t yo, const Tensor *x, int64_t xo, int64_t count)
{
    memcpy(bytes(y) + yo * 4, bytes(x) + xo * 4, (size_t)count * 4);
}

/* n's attribute `attr`, an axis, resolved against x; reports it when
 * out of range and returns -1. */
static int need_axis(InferCx *cx, Node *n, const Node *x, const char *attr)
{
    int64_t axis = attr_i(n, attr);
    int ax = axis_norm(axis, x->rank);
    if (ax < 0)
        diag(cx->d, attr_where(cx, n, attr), "%s: axis %lld is out of range for %s",
             op_table[n->op].name, (long long)axis, shp(cx, x));
    return ax;
}

/* n's kernel and a loop nest over n's shape; v gets the loop variables.
 * Returns the innermost block, where the caller stores n's element. */
static Block *copy_nest(LowerCx *cx, Node *n, const char *name, Var **v)
{
    Kernel *k = lw_kernel(cx, n, name);
    return lw_nest(cx, k, &k->body, n->rank, n->dims, v);
}

/* ---- reshape ----------------------------------------------------------------- */

/* The result's dims from `shape`: entries >= 1 and at most one -1, which
 * takes what the others leave of x's elements. */
int infer_reshape(InferCx *cx, Node *n)
{
    Node *x = n->in[0];
    const AttrVal *sh = attr_v(n, "shape");
    const char *where = attr_where(cx, n, "shape");
    const char *want = shape_str(cx->m->a, sh->nints, sh->ints);
    if (sh->nints > KILN_MAX_RANK) {
        diag(cx->d, where, "reshape: shape %s has rank %d, more than %d", want, sh->nints,
             KILN_MAX_RANK);
        return -1;
    }
    int64_t dims[KILN_MAX_RANK], count = node_count(x), known = 1;
    int hole = -1, over = 0;
    for (int i = 0; i < sh->nints; i++) {
        int64_t v = sh->ints[i];
        if (v == -1 && hole >= 0) {
            diag(cx->d, where, "reshape: shape %s has more than one -1", want);
            return -1;
        }
        if (v == -1) {
            hole = i;
            continue;
        }
        if (v < 1) {
            diag(cx->d, where, "reshape: shape %s has entry %lld; entries must be >= 1 or -1",
                 want, (long long)v);
            return -1;
        }
        dims[i] = v;
        over |= v > KILN_MAX_ELEMS / known;   /* known * v > 2^40 >= count */
        if (!over)
            known *= v;
    }
    if (hole >= 0 && !over && count % known == 0) {
        dims[hole] = count / known;
        known = count;
    }
    if (hole >= 0 && known != count)
        diag(cx->d, n->where, "reshape: cannot reshape %s (%lld elements) to %s", shp(cx, x),
             (long long)count, want);
    else if (over)
        diag(cx->d, n->where,
             "reshape: cannot reshape %s (%lld elements) to %s (more than %lld elements)",
             shp(cx, x), (long long)count, want, (long long)KILN_MAX_ELEMS);
    else if (known != count)
        diag(cx->d, n->where, "reshape: cannot reshape %s (%lld elements) to %s (%lld elements)",
             shp(cx, x), (long long)count, want, (long long)known);
    if (over || known != count)
        return -1;
    set_shape(n, x->dtype, sh->nints, dims);
    return 0;
}

int ref_reshape(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *y = ref_out(cx, n);
    copy(y, 0, x, 0, y->count);
    return 0;
}

/* x's index along a dim of `inner` elements' stride whose next stride out
 * is `outer`, when both are strides of y too (or y's count): then only y's
 * dims between them move it, and it is their own row-major position,
 * y's index scaled by its stride / inner; NULL when they are not. So
 * [1,256,512] from [256,512] reads x[i1, i2], not x[flat / 512, flat %
 * 512]. */
static Expr *direct_index(Arena *a, const Node *y, Var **v, int64_t inner, int64_t outer)
{
    Expr *e = e_int(a, 0);
    int64_t s = 1;
    int in = 0, out = 0;
    for (int i = y->rank - 1; i >= -1; i--) {
        in |= s == inner;
        out |= s == outer;
        if (i < 0 || s >= outer)
            continue;
        if (s >= inner && y->dims[i] > 1)
            e = e_add(a, e_mul(a, e_var(a, v[i]), e_int(a, s / inner)), e);
        s *= y->dims[i];
    }
    return in && out ? e : NULL;
}

/* for y's indices: flat = row-major position in y;
 *   y[...] = x[flat / stride_j % dim_j for x's axes j], or the direct
 * index where y's dims line up with x's. */
void lower_reshape(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *x = n->in[0];
    Var *v[KILN_MAX_RANK];
    Block *body = copy_nest(cx, n, arena_printf(a, "reshape_n%lld", (long long)node_count(n)), v);
    Expr *flat = e_int(a, 0);
    for (int i = 0; i < n->rank; i++)
        flat = e_add(a, e_mul(a, flat, e_int(a, n->dims[i])), e_var(a, v[i]));
    Expr *xi[KILN_MAX_RANK];
    int64_t stride = 1;
    for (int j = x->rank - 1; j >= 0; j--) {
        int64_t next = stride * x->dims[j];
        if (x->dims[j] == 1) {
            xi[j] = e_int(a, 0);
        } else if (!(xi[j] = direct_index(a, n, v, stride, next))) {
            Expr *q = e_bin(a, B_DIV, flat, e_int(a, stride));
            xi[j] = j == 0 ? q : e_bin(a, B_MOD, q, e_int(a, x->dims[j]));
        }
        stride = next;
    }
    Expr *xv = lw_load(cx, x, xi);
    s_store(a, body, lw_buf(cx, n), lw_vars(cx, n->rank, v), A_SET, xv);
}

/* ---- transpose: y[i_0, ..., i_r-1] = x[j] with j[perm[d]] = i_d ------------- */

/* perm resolved to axes of x (already checked). */
static void perm_of(const Node *n, int *p)
{
    const AttrVal *perm = attr_v(n, "perm");
    for (int d = 0; d < perm->nints; d++)
        p[d] = axis_norm(perm->ints[d], n->in[0]->rank);
}

int infer_transpose(InferCx *cx, Node *n)
{
    Node *x = n->in[0];
    const AttrVal *perm = attr_v(n, "perm");
    const char *where = attr_where(cx, n, "perm");
    const char *ps = shape_str(cx->m->a, perm->nints, perm->ints);
    if (perm->nints != x->rank) {
        diag(cx->d, where, "transpose: perm %s has %d entries for %s", ps, perm->nints,
             shp(cx, x));
        return -1;
    }
    int seen[KILN_MAX_RANK] = {0};
    for (int d = 0; d < perm->nints; d++) {
        int ax = axis_norm(perm->ints[d], x->rank);
        if (ax < 0) {
            diag(cx->d, where, "transpose: axis %lld is out of range for %s",
                 (long long)perm->ints[d], shp(cx, x));
            return -1;
        }
        if (seen[ax]++) {
            diag(cx->d, where, "transpose: perm %s names axis %d twice", ps, ax);
            return -1;
        }
    }
    int p[KILN_MAX_RANK];
    int64_t dims[KILN_MAX_RANK];
    perm_of(n, p);
    for (int d = 0; d < x->rank; d++)
        dims[d] = x->dims[p[d]];
    set_shape(n, x->dtype, x->rank, dims);
    return 0;
}

int ref_transpose(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *y = ref_out(cx, n);
    int p[KILN_MAX_RANK], r = x->rank;
    perm_of(n, p);
    int64_t xstride[KILN_MAX_RANK], s = 1;
    for (int j = r - 1; j >= 0; j--) {
        xstride[j] = s;
        s *= x->dims[j];
    }
    int64_t idx[KILN_MAX_RANK] = {0};        /* y's index */
    for (int64_t i = 0; i < y->count; i++, index_next(r, y->dims, idx)) {
        int64_t off = 0;
        for (int d = 0; d < r; d++)
            off += idx[d] * xstride[p[d]];
        copy(y, i, x, off, 1);
    }
    return 0;
}

void lower_transpose(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    int p[KILN_MAX_RANK];
    perm_of(n, p);
    char digits[KILN_MAX_RANK + 1];
    for (int d = 0; d < n->rank; d++)
        digits[d] = (char)('0' + p[d]);
    digits[n->rank] = 0;
    Var *v[KILN_MAX_RANK];
    Block *body = copy_nest(cx, n, arena_printf(a, "transpose_p%s_n%lld", digits,
                                                (long long)node_count(n)), v);
    Expr *xi[KILN_MAX_RANK];
    for (int d = 0; d < n->rank; d++)
        xi[p[d]] = e_var(a, v[d]);
    Expr *xv = lw_load(cx, n->in[0], xi);
    s_store(a, body, lw_buf(cx, n), lw_vars(cx, n->rank, v), A_SET, xv);
}

/* ---- concat: operands side by side along axis ------------------------------ */

/* Operand i agrees with operand 0 in dtype, rank and every dim but ax. */
static int concat_fits(InferCx *cx, Node *n, int i, int ax)
{
    Node *x0 = n->in[0], *x = n->in[i];
    const char *what = NULL;
    if (x->dtype != x0->dtype)
        what = "in dtype";
    else if (x->rank != x0->rank)
        what = "in rank";
    else
        for (int d = 0; d < x->rank; d++)
            if (d != ax && x->dims[d] != x0->dims[d])
                what = arena_printf(cx->m->a, "outside axis %d", ax);
    if (!what)
        return 0;
    diag(cx->d, in_where(cx, n, i), "concat: %s and inputs[0] %s differ %s", shp(cx, x),
         shp(cx, x0), what);
    return -1;
}

int infer_concat(InferCx *cx, Node *n)
{
    int ax = need_axis(cx, n, n->in[0], "axis"), bad = 0;
    if (ax < 0)
        return -1;
    int64_t len = 0;
    for (int i = 0; i < n->nin; i++) {
        bad |= concat_fits(cx, n, i, ax);
        len += n->in[i]->dims[ax];
    }
    set_like(n, n->in[0]);
    n->dims[ax] = len;
    return bad;
}

/* For each outer index, the operands' rows (dim ax times inner elements
 * each) one after another. */
int ref_concat(RefCx *cx, Node *n)
{
    Tensor *y = ref_out(cx, n);
    int ax = axis_norm(attr_i(n, "axis"), y->rank);
    int64_t inner = shape_count(y->rank - ax - 1, y->dims + ax + 1), at = 0;
    for (int64_t o = 0; o < shape_count(ax, y->dims); o++)
        for (int i = 0; i < n->nin; i++) {
            Tensor *x = ref_in(cx, n, i);
            int64_t row = x->dims[ax] * inner;
            copy(y, at, x, o * row, row);
            at += row;
        }
    return 0;
}

/* for operand t: for t's indices: y[..., i_ax + offset_t, ...] = t[...] */
void lower_concat(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    int ax = axis_norm(attr_i(n, "axis"), n->rank);
    const char *name = arena_printf(a, "concat_a%d_n%lld", ax, (long long)node_count(n));
    Kernel *k = lw_kernel(cx, n, name);
    Buf *y = lw_buf(cx, n);
    int64_t off = 0;
    for (int i = 0; i < n->nin; i++) {
        Node *x = n->in[i];
        Var *v[KILN_MAX_RANK];
        Block *body = lw_nest(cx, k, &k->body, x->rank, x->dims, v);
        Expr **yi = lw_vars(cx, n->rank, v);
        yi[ax] = e_add(a, yi[ax], e_int(a, off));
        s_store(a, body, y, yi, A_SET, lw_load(cx, x, lw_vars(cx, x->rank, v)));
        off += x->dims[ax];
    }
}

/* ---- slice: [start, end) of one axis ------------------------------------- */

/* A bound as Python resolves it: negative counts from the end, then
 * clamped to [0, dim]. */
static int64_t slice_bound(int64_t v, int64_t dim)
{
    if (v < 0)
        v += dim;
    return v < 0 ? 0 : v > dim ? dim : v;
}

/* The slice's resolved axis and bounds (the axis is in range). */
static int slice_of(const Node *n, int64_t *start, int64_t *end)
{
    const Node *x = n->in[0];
    int ax = axis_norm(attr_i(n, "axis"), x->rank);
    *start = slice_bound(attr_i(n, "start"), x->dims[ax]);
    *end = slice_bound(attr_i(n, "end"), x->dims[ax]);
    return ax;
}

int infer_slice(InferCx *cx, Node *n)
{
    Node *x = n->in[0];
    if (need_axis(cx, n, x, "axis") < 0)
        return -1;
    int64_t start, end;
    int ax = slice_of(n, &start, &end);
    if (start >= end) {
        diag(cx->d, n->where, "slice selects no elements (start %lld, end %lld on a dim of %lld)",
             (long long)start, (long long)end, (long long)x->dims[ax]);
        return -1;
    }
    set_like(n, x);
    n->dims[ax] = end - start;
    return 0;
}

int ref_slice(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *y = ref_out(cx, n);
    int64_t start, end;
    int ax = slice_of(n, &start, &end);
    int64_t inner = shape_count(x->rank - ax - 1, x->dims + ax + 1), L = x->dims[ax];
    int64_t row = (end - start) * inner;
    for (int64_t o = 0; o < shape_count(ax, x->dims); o++)
        copy(y, o * row, x, (o * L + start) * inner, row);
    return 0;
}

/* for y's indices: y[...] = x[..., i_ax + start, ...] */
void lower_slice(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    int64_t start, end;
    int ax = slice_of(n, &start, &end);
    Var *v[KILN_MAX_RANK];
    Block *body = copy_nest(cx, n, arena_printf(a, "slice_a%d_%lld_%lld", ax, (long long)start,
                                                (long long)end), v);
    Expr **xi = lw_vars(cx, n->rank, v);
    xi[ax] = e_add(a, xi[ax], e_int(a, start));
    Expr *xv = lw_load(cx, n->in[0], xi);
    s_store(a, body, lw_buf(cx, n), lw_vars(cx, n->rank, v), A_SET, xv);
}
