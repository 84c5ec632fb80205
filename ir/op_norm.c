/* ir/op_norm.c: rmsnorm layernorm (over the last axis), batchnorm
 * (inference mode, axis 1), softmax (any axis). f32 only.
 *
 * The references work on rows: a row is the H (or L) elements along the
 * normalised axis, at flat offset (o * L + j) * inner + i for outer index
 * o, position j and inner index i. The lowerings loop over every other
 * axis and run the row's passes as sequential loops inside that nest. */
#include "ops.h"

#include <math.h>

const AttrSpec rmsnorm_attrs[] = {{"eps", AT_FLOAT, 0, 0, 1e-6, NULL, 0, 0}, {0}};
const AttrSpec layernorm_attrs[] = {{"eps", AT_FLOAT, 0, 0, 1e-5, NULL, 0, 0}, {0}};
const AttrSpec batchnorm_attrs[] = {{"eps", AT_FLOAT, 0, 0, 1e-5, NULL, 0, 0}, {0}};
const AttrSpec softmax_attrs[] = {{"axis", AT_INT, 0, -1, 0, NULL, 0, 0}, {0}};

/* Operand i (a per-channel parameter such as w) must be f32[dim], dim
 * being dim `axis` of x. */
static int need_param(InferCx *cx, Node *n, int i, int axis, const char *what)
{
    Node *x = n->in[0], *p = n->in[i];
    int64_t dim = x->dims[axis];
    if (p->dtype == DT_F32 && p->rank == 1 && p->dims[0] == dim)
        return 0;
    diag(cx->d, in_where(cx, n, i), "%s: %s must be f32[%lld] to match x %s, got %s",
         op_table[n->op].name, what, (long long)dim, shp(cx, x), shp(cx, p));
    return -1;
}

/* x: f32, rank at least `rank`. */
static int need_x(InferCx *cx, Node *n, int rank)
{
    int bad = need_dtype(cx, n, 0, DT_F32);
    return bad | need_rank_min(cx, n, 0, rank);
}

/* A loop over [0, len) appended to blk. */
static Stmt *loop(LowerCx *cx, Kernel *k, Block *blk, int64_t len, int marks)
{
    return s_loop(cx->a, k, blk, e_int(cx->a, 0), e_int(cx->a, len), marks);
}

/* Indices of a rank r operand: the row nest's r - 1 variables v, then j. */
static Expr **row_idx(LowerCx *cx, int r, Var **v, Var *j)
{
    Expr **ix = arena_alloc(cx->a, sizeof *ix * (size_t)r);
    for (int d = 0; d < r - 1; d++)
        ix[d] = e_var(cx->a, v[d]);
    ix[r - 1] = e_var(cx->a, j);
    return ix;
}

/* ---- rmsnorm: x / sqrt(mean(x^2) + eps) * w ------------------------------ */

int infer_rmsnorm(InferCx *cx, Node *n)
{
    if (need_x(cx, n, 1))
        return -1;
    set_like(n, n->in[0]);
    return need_param(cx, n, 1, n->rank - 1, "w");
}

int ref_rmsnorm(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *w = ref_in(cx, n, 1), *y = ref_out(cx, n);
    double eps = attr_f(n, "eps");
    int64_t H = w->dims[0];
    for (int64_t row = 0; row < x->count / H; row++) {
        const float *xr = x->f + row * H;
        double ss = 0;
        for (int64_t h = 0; h < H; h++)
            ss += (double)xr[h] * xr[h];
        double r = 1.0 / sqrt(ss / (double)H + eps);
        for (int64_t h = 0; h < H; h++)
            y->f[row * H + h] = (float)(xr[h] * r * w->f[h]);
    }
    return 0;
}

/* for rows: ss = sum x^2; r = rsqrt(ss / H + eps); y = x * r * w. */
void lower_rmsnorm(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *x = n->in[0], *w = n->in[1];
    int r = n->rank;
    int64_t H = n->dims[r - 1];
    Kernel *k = lw_kernel(cx, n, arena_printf(a, "rmsnorm_h%lld", (long long)H));
    Var *v[KILN_MAX_RANK];
    Block *row = lw_nest(cx, k, &k->body, r - 1, n->dims, v);
    Stmt *ss = s_let(a, k, row, T_F32, e_flt(a, 0));
    Stmt *l1 = loop(cx, k, row, H, MARK_REDUCE);
    Expr *x1 = lw_load(cx, x, row_idx(cx, r, v, l1->v));
    s_set(a, &l1->body, ss->v, A_ADD, e_mul(a, x1, x1));
    Expr *mean = e_bin(a, B_DIV, e_var(a, ss->v), e_flt(a, (double)H));
    Stmt *rs = s_let(a, k, row, T_F32,
                     e_un(a, U_RSQRT, e_add(a, mean, e_flt(a, attr_f(n, "eps")))));
    Stmt *l2 = loop(cx, k, row, H, 0);
    Expr **ix = row_idx(cx, r, v, l2->v);
    Expr *xv = lw_load(cx, x, ix);
    Expr *wv = lw_load(cx, w, lw_idx(cx, 1, e_var(a, l2->v)));
    s_store(a, &l2->body, lw_buf(cx, n), ix, A_SET, e_mul(a, e_mul(a, xv, e_var(a, rs->v)), wv));
}

/* ---- layernorm: (x - mean) / sqrt(var + eps) * w + b, biased var --------- */

int infer_layernorm(InferCx *cx, Node *n)
{
    if (need_x(cx, n, 1))
        return -1;
    set_like(n, n->in[0]);
    return need_param(cx, n, 1, n->rank - 1, "w") | need_param(cx, n, 2, n->rank - 1, "b");
}

int ref_layernorm(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *w = ref_in(cx, n, 1), *b = ref_in(cx, n, 2);
    Tensor *y = ref_out(cx, n);
    double eps = attr_f(n, "eps");
    int64_t H = w->dims[0];
    for (int64_t row = 0; row < x->count / H; row++) {
        const float *xr = x->f + row * H;
        double sum = 0, sq = 0;
        for (int64_t h = 0; h < H; h++)
            sum += xr[h];
        double mean = sum / (double)H;
        for (int64_t h = 0; h < H; h++)
            sq += (xr[h] - mean) * (xr[h] - mean);
        double r = 1.0 / sqrt(sq / (double)H + eps);
        for (int64_t h = 0; h < H; h++)
            y->f[row * H + h] = (float)((xr[h] - mean) * r * w->f[h] + b->f[h]);
    }
    return 0;
}

/* for rows: mean = sum x / H; var = sum (x - mean)^2 / H;
 * r = rsqrt(var + eps); y = (x - mean) * r * w + b. */
void lower_layernorm(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *x = n->in[0];
    int r = n->rank;
    int64_t H = n->dims[r - 1];
    Kernel *k = lw_kernel(cx, n, arena_printf(a, "layernorm_h%lld", (long long)H));
    Var *v[KILN_MAX_RANK];
    Block *row = lw_nest(cx, k, &k->body, r - 1, n->dims, v);
    Expr *fh = e_flt(a, (double)H);

    Stmt *sum = s_let(a, k, row, T_F32, e_flt(a, 0));
    Stmt *l1 = loop(cx, k, row, H, MARK_REDUCE);
    s_set(a, &l1->body, sum->v, A_ADD, lw_load(cx, x, row_idx(cx, r, v, l1->v)));
    Stmt *mean = s_let(a, k, row, T_F32, e_bin(a, B_DIV, e_var(a, sum->v), fh));

    Stmt *sq = s_let(a, k, row, T_F32, e_flt(a, 0));
    Stmt *l2 = loop(cx, k, row, H, MARK_REDUCE);
    Expr *d2 = e_bin(a, B_SUB, lw_load(cx, x, row_idx(cx, r, v, l2->v)), e_var(a, mean->v));
    s_set(a, &l2->body, sq->v, A_ADD, e_mul(a, d2, d2));
    Expr *var = e_bin(a, B_DIV, e_var(a, sq->v), fh);
    Stmt *rs = s_let(a, k, row, T_F32,
                     e_un(a, U_RSQRT, e_add(a, var, e_flt(a, attr_f(n, "eps")))));

    Stmt *l3 = loop(cx, k, row, H, 0);
    Expr **ix = row_idx(cx, r, v, l3->v);
    Expr **ih = lw_idx(cx, 1, e_var(a, l3->v));
    Expr *d3 = e_bin(a, B_SUB, lw_load(cx, x, ix), e_var(a, mean->v));
    Expr *wv = lw_load(cx, n->in[1], ih);
    Expr *bv = lw_load(cx, n->in[2], ih);
    Expr *y = e_add(a, e_mul(a, e_mul(a, d3, e_var(a, rs->v)), wv), bv);
    s_store(a, &l3->body, lw_buf(cx, n), ix, A_SET, y);
}

/* ---- batchnorm: (x - mean[c]) / sqrt(var[c] + eps) * w[c] + b[c] --------- */

static const char *bn_params[] = {NULL, "mean", "var", "w", "b"};

int infer_batchnorm(InferCx *cx, Node *n)
{
    if (need_x(cx, n, 2))
        return -1;
    set_like(n, n->in[0]);
    int bad = 0;
    for (int i = 1; i < 5; i++)
        bad |= need_param(cx, n, i, 1, bn_params[i]);
    return bad;
}

int ref_batchnorm(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *y = ref_out(cx, n);
    const float *mean = ref_in(cx, n, 1)->f, *var = ref_in(cx, n, 2)->f;
    const float *w = ref_in(cx, n, 3)->f, *b = ref_in(cx, n, 4)->f;
    double eps = attr_f(n, "eps");
    int64_t C = x->dims[1], inner = shape_count(x->rank - 2, x->dims + 2);
    for (int64_t i = 0; i < x->count; i++) {
        int64_t c = i / inner % C;
        double r = 1.0 / sqrt((double)var[c] + eps);
        y->f[i] = (float)((x->f[i] - (double)mean[c]) * r * w[c] + b[c]);
    }
    return 0;
}

/* y[n, c, ...] = (x - mean[c]) * rsqrt(var[c] + eps) * w[c] + b[c] */
void lower_batchnorm(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    const char *name = arena_printf(a, "batchnorm_c%lld_n%lld", (long long)n->dims[1],
                                    (long long)node_count(n));
    Kernel *k = lw_kernel(cx, n, name);
    Var *v[KILN_MAX_RANK];
    Block *body = lw_nest(cx, k, &k->body, n->rank, n->dims, v);
    Expr **ix = lw_vars(cx, n->rank, v), **ic = lw_idx(cx, 1, e_var(a, v[1]));
    Expr *p[5];                       /* x[n, c, ...], mean[c], var[c], w[c], b[c] */
    p[0] = lw_load(cx, n->in[0], ix);
    for (int i = 1; i < 5; i++)
        p[i] = lw_load(cx, n->in[i], ic);
    Expr *rs = e_un(a, U_RSQRT, e_add(a, p[2], e_flt(a, attr_f(n, "eps"))));
    Expr *d = e_bin(a, B_SUB, p[0], p[1]);
    s_store(a, body, lw_buf(cx, n), ix, A_SET, e_add(a, e_mul(a, e_mul(a, d, rs), p[3]), p[4]));
}

/* ---- softmax: exp(x - max) / sum exp(x - max) along axis ----------------- */

int infer_softmax(InferCx *cx, Node *n)
{
    Node *x = n->in[0];
    int bad = need_dtype(cx, n, 0, DT_F32);
    int64_t axis = attr_i(n, "axis");
    if (axis_norm(axis, x->rank) < 0) {
        diag(cx->d, attr_where(cx, n, "axis"), "softmax: axis %lld is out of range for %s",
             (long long)axis, shp(cx, x));
        return -1;
    }
    set_like(n, x);
    return bad;
}

int ref_softmax(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *y = ref_out(cx, n);
    int ax = axis_norm(attr_i(n, "axis"), x->rank);
    int64_t L = x->dims[ax], inner = shape_count(x->rank - ax - 1, x->dims + ax + 1);
    int64_t outer = shape_count(ax, x->dims);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xr = x->f + o * L * inner + i;   /* row: xr[j * inner] */
            float *yr = y->f + o * L * inner + i;
            double mx = xr[0], sum = 0;
            for (int64_t j = 1; j < L; j++)
                mx = xr[j * inner] > mx ? xr[j * inner] : mx;
            for (int64_t j = 0; j < L; j++)
                sum += exp(xr[j * inner] - mx);
            for (int64_t j = 0; j < L; j++)
                yr[j * inner] = (float)(exp(xr[j * inner] - mx) / sum);
        }
    return 0;
}

/* for rows along axis: mx = max x; y = exp(x - mx) and sum += y;
 * y *= 1 / sum. Intermediate values live in y itself. */
void lower_softmax(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *x = n->in[0];
    int ax = axis_norm(attr_i(n, "axis"), n->rank);
    int64_t L = n->dims[ax];
    Kernel *k = lw_kernel(cx, n, arena_printf(a, "softmax_n%lld", (long long)L));
    Expr *ix[KILN_MAX_RANK];
    Block *row = lw_nest_but(cx, k, &k->body, n->rank, n->dims, ax, ix);

    ix[ax] = e_int(a, 0);
    Stmt *mx = s_let(a, k, row, T_F32, lw_load(cx, x, ix));
    Buf *y = lw_buf(cx, n);
    Stmt *l1 = loop(cx, k, row, L, MARK_REDUCE);
    ix[ax] = e_var(a, l1->v);
    s_set(a, &l1->body, mx->v, A_MAX, lw_load(cx, x, ix));

    Stmt *sum = s_let(a, k, row, T_F32, e_flt(a, 0));
    Stmt *l2 = loop(cx, k, row, L, MARK_REDUCE);
    ix[ax] = e_var(a, l2->v);
    Stmt *ex = s_let(a, k, &l2->body, T_F32,
                     e_un(a, U_EXP, e_bin(a, B_SUB, lw_load(cx, x, ix), e_var(a, mx->v))));
    s_store(a, &l2->body, y, ix, A_SET, e_var(a, ex->v));
    s_set(a, &l2->body, sum->v, A_ADD, e_var(a, ex->v));

    Stmt *inv = s_let(a, k, row, T_F32, e_bin(a, B_DIV, e_flt(a, 1.0), e_var(a, sum->v)));
    Stmt *l3 = loop(cx, k, row, L, 0);
    ix[ax] = e_var(a, l3->v);
    s_store(a, &l3->body, y, ix, A_SET, e_mul(a, e_load(a, y, ix), e_var(a, inv->v)));
}
