/* ir/op_reduce.c: reduce_sum reduce_mean reduce_max (over a list of axes,
 * keepdims as torch), argmax (first index of the maximum, i32, the axis
 * removed) and topk (largest first, ties to the lower index). f32 input. */
#include "ops.h"

#include <math.h>
#include <string.h>

const AttrSpec reduce_attrs[] = {
    {"axes", AT_INTS, 1, 0, 0, NULL, 0, 0},
    {"keepdims", AT_BOOL, 0, 0, 0, NULL, 0, 0},
    {0},
};
const AttrSpec argmax_attrs[] = {{"axis", AT_INT, 0, -1, 0, NULL, 0, 0}, {0}};
/* result is internal: the frontend makes one topk node per declared
 * output, 0 for the values (f32) and 1 for the indices (i32). */
const AttrSpec topk_attrs[] = {
    {"k", AT_INT, 1, 0, 0, NULL, 0, 0},
    {"axis", AT_INT, 0, -1, 0, NULL, 0, 0},
    {"result", AT_ENUM, 0, 0, 0, "values|indices", 1, 0},
    {0},
};

/* n's attribute `axis` resolved against x; reports it when out of range. */
static int need_axis(InferCx *cx, Node *n, int64_t axis)
{
    Node *x = n->in[0];
    int ax = axis_norm(axis, x->rank);
    if (ax < 0)
        diag(cx->d, attr_where(cx, n, "axis"), "%s: axis %lld is out of range for %s",
             op_table[n->op].name, (long long)axis, shp(cx, x));
    return ax;
}

/* argmax and topk give i32 indices along the axis: they must fit. */
static int need_i32_axis(InferCx *cx, Node *n, int ax)
{
    Node *x = n->in[0];
    if (x->dims[ax] <= INT32_MAX)
        return 0;
    diag(cx->d, attr_where(cx, n, "axis"), "%s: axis %d of %s has more elements than i32 "
         "indices can count", op_table[n->op].name, ax, shp(cx, x));
    return -1;
}

static Stmt *loop(LowerCx *cx, Kernel *k, Block *blk, int64_t len, int marks)
{
    return s_loop(cx->a, k, blk, e_int(cx->a, 0), e_int(cx->a, len), marks);
}

/* ---- reduce_sum reduce_mean reduce_max ----------------------------------- */

/* red[d] = 1 for each axis d of x that n reduces (axes already checked). */
static void reduced_axes(const Node *n, int *red)
{
    const AttrVal *axes = attr_v(n, "axes");
    memset(red, 0, sizeof *red * KILN_MAX_RANK);
    for (int i = 0; i < axes->nints; i++)
        red[axis_norm(axes->ints[i], n->in[0]->rank)] = 1;
}

/* Every entry of `axes` in range and none repeated. */
static int check_axes(InferCx *cx, Node *n)
{
    Node *x = n->in[0];
    const AttrVal *axes = attr_v(n, "axes");
    const char *where = attr_where(cx, n, "axes"), *op = op_table[n->op].name;
    if (axes->nints == 0) {
        diag(cx->d, where, "%s: axes must name at least one axis", op);
        return -1;
    }
    int seen[KILN_MAX_RANK] = {0};
    for (int i = 0; i < axes->nints; i++) {
        int ax = axis_norm(axes->ints[i], x->rank);
        if (ax < 0) {
            diag(cx->d, where, "%s: axis %lld is out of range for %s", op,
                 (long long)axes->ints[i], shp(cx, x));
            return -1;
        }
        if (seen[ax]++) {
            diag(cx->d, where, "%s: axes %s name axis %d twice", op,
                 shape_str(cx->m->a, axes->nints, axes->ints), ax);
            return -1;
        }
    }
    return 0;
}

int infer_reduce(InferCx *cx, Node *n)
{
    Node *x = n->in[0];
    if (need_dtype(cx, n, 0, DT_F32) | check_axes(cx, n))
        return -1;
    int red[KILN_MAX_RANK], keep = (int)attr_i(n, "keepdims"), r = 0;
    int64_t dims[KILN_MAX_RANK];
    reduced_axes(n, red);
    for (int d = 0; d < x->rank; d++)
        if (!red[d] || keep)
            dims[r++] = red[d] ? 1 : x->dims[d];
    set_shape(n, DT_F32, r, dims);
    return 0;
}

/* Each result element is computed from the sub-box of x that it reduces:
 * x's index is kept[d] + sub[d], where kept walks x's shape with reduced
 * axes set to 1 (the keepdims shape; its row-major order is the result's
 * with or without keepdims) and sub walks the reduced axes only. */
int ref_reduce(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *y = ref_out(cx, n);
    int red[KILN_MAX_RANK], r = x->rank;
    reduced_axes(n, red);
    int64_t kdims[KILN_MAX_RANK], sdims[KILN_MAX_RANK], kept[KILN_MAX_RANK] = {0};
    for (int d = 0; d < r; d++) {
        kdims[d] = red[d] ? 1 : x->dims[d];
        sdims[d] = red[d] ? x->dims[d] : 1;
    }
    int64_t nsub = shape_count(r, sdims);
    for (int64_t o = 0; o < y->count; o++, index_next(r, kdims, kept)) {
        int64_t sub[KILN_MAX_RANK] = {0};
        double acc = n->op == OP_REDUCE_MAX ? -INFINITY : 0.0;
        do {
            int64_t off = 0;
            for (int d = 0; d < r; d++)
                off = off * x->dims[d] + kept[d] + sub[d];
            double v = x->f[off];
            acc = n->op == OP_REDUCE_MAX ? (v > acc ? v : acc) : acc + v;
        } while (index_next(r, sdims, sub));
        y->f[o] = (float)(n->op == OP_REDUCE_MEAN ? acc / (double)nsub : acc);
    }
    return 0;
}

/* for kept axes: acc = 0 (max: the box's first element);
 *   for reduced axes: acc += x (max: acc max= x);
 *   y = acc (mean: acc / count). */
void lower_reduce(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *x = n->in[0];
    int red[KILN_MAX_RANK], keep = (int)attr_i(n, "keepdims"), is_max = n->op == OP_REDUCE_MAX;
    reduced_axes(n, red);
    int64_t nsub = node_count(x) / node_count(n);
    const char *name = arena_printf(a, "%s_n%lld_r%lld", op_table[n->op].name,
                                    (long long)node_count(n), (long long)nsub);
    Kernel *k = lw_kernel(cx, n, name);
    Block *blk = &k->body;
    Expr *xi[KILN_MAX_RANK], *yi[KILN_MAX_RANK];
    int ny = 0;
    for (int d = 0; d < x->rank; d++) {
        xi[d] = e_int(a, 0);
        if (!red[d]) {
            Stmt *s = loop(cx, k, blk, x->dims[d], 0);
            xi[d] = e_var(a, s->v);
            blk = &s->body;
        }
        if (!red[d] || keep)
            yi[ny++] = xi[d];
    }
    Stmt *acc = s_let(a, k, blk, T_F32, is_max ? lw_load(cx, x, xi) : e_flt(a, 0));
    Block *in = blk;
    for (int d = 0; d < x->rank; d++)
        if (red[d]) {
            Stmt *s = loop(cx, k, in, x->dims[d], MARK_REDUCE);
            xi[d] = e_var(a, s->v);
            in = &s->body;
        }
    s_set(a, in, acc->v, is_max ? A_MAX : A_ADD, lw_load(cx, x, xi));
    Expr *y = e_var(a, acc->v);
    if (n->op == OP_REDUCE_MEAN)
        y = e_bin(a, B_DIV, y, e_flt(a, (double)nsub));
    s_store(a, blk, lw_buf(cx, n), yi, A_SET, y);
}

/* ---- argmax ---------------------------------------------------------------- */

int infer_argmax(InferCx *cx, Node *n)
{
    Node *x = n->in[0];
    int bad = need_dtype(cx, n, 0, DT_F32);
    int ax = need_axis(cx, n, attr_i(n, "axis"));
    if (ax < 0 || need_i32_axis(cx, n, ax))
        return -1;
    int64_t dims[KILN_MAX_RANK];
    for (int d = 0, r = 0; d < x->rank; d++)
        if (d != ax)
            dims[r++] = x->dims[d];
    set_shape(n, DT_I32, x->rank - 1, dims);
    return bad;
}

int ref_argmax(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *y = ref_out(cx, n);
    int ax = axis_norm(attr_i(n, "axis"), x->rank);
    int64_t L = x->dims[ax], inner = shape_count(x->rank - ax - 1, x->dims + ax + 1);
    for (int64_t o = 0; o < shape_count(ax, x->dims); o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xr = x->f + o * L * inner + i;   /* row: xr[j * inner] */
            int64_t best = 0;
            for (int64_t j = 1; j < L; j++)
                if (xr[j * inner] > xr[best * inner])
                    best = j;
            y->i[o * inner + i] = (int32_t)best;
        }
    return 0;
}

/* for rows along axis: mx = x[0], at = 0;
 *   for j: if x[j] > mx: mx = x[j], at = j;   (strictly: the first wins)
 *   y = at */
void lower_argmax(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *x = n->in[0];
    int ax = axis_norm(attr_i(n, "axis"), x->rank);
    int64_t L = x->dims[ax];
    Kernel *k = lw_kernel(cx, n, arena_printf(a, "argmax_n%lld", (long long)L));
    Expr *ix[KILN_MAX_RANK];
    Block *row = lw_nest_but(cx, k, &k->body, x->rank, x->dims, ax, ix);
    Expr *yi[KILN_MAX_RANK];
    for (int d = 0, r = 0; d < x->rank; d++)
        if (d != ax)
            yi[r++] = ix[d];

    ix[ax] = e_int(a, 0);
    Stmt *mx = s_let(a, k, row, T_F32, lw_load(cx, x, ix));
    Stmt *at = s_let(a, k, row, T_I64, e_int(a, 0));
    Stmt *l = loop(cx, k, row, L, MARK_REDUCE);
    ix[ax] = e_var(a, l->v);
    Expr *v = lw_load(cx, x, ix);
    Stmt *s = s_if(a, &l->body, e_bin(a, B_GT, v, e_var(a, mx->v)));
    s_set(a, &s->body, mx->v, A_SET, v);
    s_set(a, &s->body, at->v, A_SET, e_var(a, l->v));
    s_store(a, row, lw_buf(cx, n), yi, A_SET, e_var(a, at->v));
}

/* ---- topk -------------------------------------------------------------------- */

int infer_topk(InferCx *cx, Node *n)
{
    Node *x = n->in[0];
    int bad = need_dtype(cx, n, 0, DT_F32);
    int ax = need_axis(cx, n, attr_i(n, "axis"));
    if (ax < 0 || need_i32_axis(cx, n, ax))
        return -1;
    int64_t kk = attr_i(n, "k");
    if (kk < 1 || kk > x->dims[ax]) {
        diag(cx->d, attr_where(cx, n, "k"), "topk: k %lld is not in 1..%lld (axis %d of %s)",
             (long long)kk, (long long)x->dims[ax], ax, shp(cx, x));
        return -1;
    }
    set_like(n, x);
    n->dims[ax] = kk;
    n->dtype = attr_i(n, "result") == 1 ? DT_I32 : DT_F32;
    return bad;
}

/* Does element (u at i) come before (v at j) in topk's order? */
static int before(double u, int64_t i, double v, int64_t j)
{
    return u > v || (u == v && i < j);
}

/* Selection: the r-th pick is the first in topk's order among the
 * elements after the (r-1)-th pick. */
int ref_topk(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *y = ref_out(cx, n);
    int ax = axis_norm(attr_i(n, "axis"), x->rank), idx = attr_i(n, "result") == 1;
    int64_t L = x->dims[ax], K = y->dims[ax];
    int64_t inner = shape_count(x->rank - ax - 1, x->dims + ax + 1);
    for (int64_t o = 0; o < shape_count(ax, x->dims); o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xr = x->f + o * L * inner + i;   /* row: xr[j * inner] */
            int64_t prev = -1;
            for (int64_t r = 0; r < K; r++) {
                int64_t best = -1;
                for (int64_t j = 0; j < L; j++) {
                    if (prev >= 0 && !before(xr[prev * inner], prev, xr[j * inner], j))
                        continue;
                    if (best < 0 || before(xr[j * inner], j, xr[best * inner], best))
                        best = j;
                }
                if (best < 0)           /* only NaN leaves no candidate */
                    break;
                int64_t at = (o * K + r) * inner + i;
                if (idx)
                    y->i[at] = (int32_t)best;
                else
                    y->f[at] = xr[best * inner];
                prev = best;
            }
        }
    return 0;
}

/* By rank: element e goes to position r = #{e' before e in topk's order}
 * when r < k.
 *   for rows along axis: for e: r = 0;
 *     for e2: r += x[e2] > x[e] || x[e2] == x[e] && e2 < e;
 *     if r < k: y[r] = x[e] (indices: e) */
void lower_topk(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *x = n->in[0];
    int ax = axis_norm(attr_i(n, "axis"), x->rank), idx = attr_i(n, "result") == 1;
    int64_t L = x->dims[ax], K = n->dims[ax];
    const char *name = arena_printf(a, "topk_%s_n%lld_k%lld", idx ? "indices" : "values",
                                    (long long)L, (long long)K);
    Kernel *k = lw_kernel(cx, n, name);
    Expr *ix[KILN_MAX_RANK];
    Block *row = lw_nest_but(cx, k, &k->body, x->rank, x->dims, ax, ix);
    Stmt *le = loop(cx, k, row, L, 0);
    ix[ax] = e_var(a, le->v);
    Expr *xe = lw_load(cx, x, ix);
    Stmt *rk = s_let(a, k, &le->body, T_I64, e_int(a, 0));
    Stmt *l2 = loop(cx, k, &le->body, L, MARK_REDUCE);
    ix[ax] = e_var(a, l2->v);
    Expr *x2 = lw_load(cx, x, ix);
    Expr *tie = e_bin(a, B_AND, e_bin(a, B_EQ, x2, xe),
                      e_bin(a, B_LT, e_var(a, l2->v), e_var(a, le->v)));
    s_set(a, &l2->body, rk->v, A_ADD, e_bin(a, B_OR, e_bin(a, B_GT, x2, xe), tie));
    Stmt *s = s_if(a, &le->body, e_bin(a, B_LT, e_var(a, rk->v), e_int(a, K)));
    ix[ax] = e_var(a, rk->v);
    s_store(a, &s->body, lw_buf(cx, n), ix, A_SET, idx ? e_var(a, le->v) : xe);
}
