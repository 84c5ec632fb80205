/* ir/op_linalg.c: matmul (torch.matmul, batch dims broadcast, 1-d operands
 * as torch treats them) and linear (x @ w^T + bias). */
#include "ops.h"

#include <string.h>

const AttrSpec matmul_attrs[] = {
    {"transpose_b", AT_BOOL, 0, 0, 0, NULL, 0, 0},
    {0},
};

/* A matmul's operands seen as [batch..., M, K] @ [batch..., K, N]. */
typedef struct {
    int64_t m, k, n;
    int bat;                           /* output batch rank */
    int64_t bdims[KILN_MAX_RANK];      /* output batch dims */
    int abat, bbat;                    /* operand batch ranks */
    int a1, b1;                        /* operand was 1-d */
    int tb;                            /* b is [..., N, K] */
} MM;

static void mm_shape(const Node *n, MM *s)
{
    const Node *a = n->in[0], *b = n->in[1];
    memset(s, 0, sizeof *s);
    s->tb = (int)attr_i(n, "transpose_b");
    s->a1 = a->rank == 1;
    s->b1 = b->rank == 1;
    s->m = s->a1 ? 1 : a->dims[a->rank - 2];
    s->k = a->dims[a->rank - 1];
    s->abat = s->a1 ? 0 : a->rank - 2;
    s->bbat = s->b1 ? 0 : b->rank - 2;
    if (s->b1)
        s->n = 1;
    else
        s->n = s->tb ? b->dims[b->rank - 2] : b->dims[b->rank - 1];
}

static int64_t mm_bk(const Node *n, const MM *s)
{
    const Node *b = n->in[1];
    if (s->b1)
        return b->dims[0];
    return s->tb ? b->dims[b->rank - 1] : b->dims[b->rank - 2];
}

int infer_matmul(InferCx *cx, Node *n)
{
    int bad = need_dtype(cx, n, 0, DT_F32) | need_dtype(cx, n, 1, DT_F32);
    bad |= need_rank_min(cx, n, 0, 1) | need_rank_min(cx, n, 1, attr_i(n, "transpose_b") ? 2 : 1);
    if (bad)
        return -1;
    Node *a = n->in[0], *b = n->in[1];
    MM s;
    mm_shape(n, &s);
    if (s.k != mm_bk(n, &s)) {
        diag(cx->d, n->where, "matmul: inner dimensions differ: a is %s, b is %s%s",
             shp(cx, a), shp(cx, b), s.tb ? " (transpose_b)" : "");
        return -1;
    }
    int64_t dims[KILN_MAX_RANK];
    int r = shape_broadcast(s.abat, a->dims, s.bbat, b->dims, dims);
    if (r < 0) {
        diag(cx->d, n->where, "matmul: batch dimensions of %s and %s do not broadcast",
             shp(cx, a), shp(cx, b));
        return -1;
    }
    if (!s.a1)
        dims[r++] = s.m;
    if (!s.b1)
        dims[r++] = s.n;
    if (r > KILN_MAX_RANK) {
        diag(cx->d, n->where, "matmul: result would have rank %d, more than %d",
             r, KILN_MAX_RANK);
        return -1;
    }
    set_shape(n, DT_F32, r, dims);
    return 0;
}

int ref_matmul(RefCx *cx, Node *n)
{
    Tensor *a = ref_in(cx, n, 0), *b = ref_in(cx, n, 1), *o = ref_out(cx, n);
    MM s;
    mm_shape(n, &s);
    int bat = o->rank - !s.a1 - !s.b1;
    int64_t bidx[KILN_MAX_RANK] = {0};
    int64_t nb = shape_count(bat, o->dims);
    for (int64_t bi = 0; bi < nb; bi++, index_next(bat, o->dims, bidx)) {
        const float *pa = a->f + bcast_offset(bat, bidx, s.abat, a->dims) * s.m * s.k;
        const float *pb = b->f + bcast_offset(bat, bidx, s.bbat, b->dims) * s.k * s.n;
        float *po = o->f + bi * s.m * s.n;
        for (int64_t i = 0; i < s.m; i++)
            for (int64_t j = 0; j < s.n; j++) {
                double acc = 0;
                for (int64_t q = 0; q < s.k; q++)
                    acc += (double)pa[i * s.k + q] *
                           pb[s.tb ? j * s.k + q : q * s.n + j];
                po[i * s.n + j] = (float)acc;
            }
    }
    return 0;
}

/* Indices of operand x (batch rank xb of the output's bat) followed by
 * the two matrix indices r, c (absent when x was 1-d: then only `one`). */
static Expr **mm_index(LowerCx *cx, const Node *x, int xb, int bat, Var **bv,
                       Expr *r, Expr *c, Expr *one)
{
    Expr **ix = arena_alloc(cx->a, sizeof *ix * KILN_MAX_RANK);
    for (int j = 0; j < xb; j++)
        ix[j] = x->dims[j] == 1 ? e_int(cx->a, 0) : e_var(cx->a, bv[bat - xb + j]);
    if (x->rank == 1)
        ix[0] = one;
    else {
        ix[xb] = r;
        ix[xb + 1] = c;
    }
    return ix;
}

void lower_matmul(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    MM s;
    mm_shape(n, &s);
    int bat = n->rank - !s.a1 - !s.b1;
    const char *name = arena_printf(a, "matmul_b%lld_m%lld_n%lld_k%lld",
                                    (long long)shape_count(bat, n->dims), (long long)s.m,
                                    (long long)s.n, (long long)s.k);
    Kernel *k = lw_kernel(cx, n, name);
    Var *v[KILN_MAX_RANK];
    Block *body = lw_nest(cx, k, &k->body, n->rank, n->dims, v);
    Expr *ei = s.a1 ? e_int(a, 0) : e_var(a, v[bat]);
    Expr *ej = s.b1 ? e_int(a, 0) : e_var(a, v[n->rank - 1]);
    Stmt *acc = s_let(a, k, body, T_F32, e_flt(a, 0));
    Stmt *lk = s_loop(a, k, body, e_int(a, 0), e_int(a, s.k), MARK_REDUCE);
    Expr *eq = e_var(a, lk->v);
    Expr *x = lw_load(cx, n->in[0], mm_index(cx, n->in[0], s.abat, bat, v, ei, eq, eq));
    Expr *y = lw_load(cx, n->in[1], s.tb ? mm_index(cx, n->in[1], s.bbat, bat, v, ej, eq, eq)
                                         : mm_index(cx, n->in[1], s.bbat, bat, v, eq, ej, eq));
    s_set(a, &lk->body, acc->v, A_ADD, e_mul(a, x, y));
    s_store(a, body, lw_buf(cx, n), lw_vars(cx, n->rank, v), A_SET, e_var(a, acc->v));
}

/* ---- linear -------------------------------------------------------------- */

int infer_linear(InferCx *cx, Node *n)
{
    int bad = 0;
    for (int i = 0; i < n->nin; i++)
        bad |= need_dtype(cx, n, i, DT_F32);
    bad |= need_rank_min(cx, n, 0, 1) | need_rank(cx, n, 1, 2);
    if (bad)
        return -1;
    Node *x = n->in[0], *w = n->in[1];
    int64_t kdim = x->dims[x->rank - 1];
    if (w->dims[1] != kdim) {
        diag(cx->d, in_where(cx, n, 1), "linear: w must be [N, %lld] to match x %s, got %s",
             (long long)kdim, shp(cx, x), shp(cx, w));
        return -1;
    }
    if (n->nin == 3 && need_vector(cx, n, 2, w->dims[0], "bias"))
        return -1;
    set_like(n, x);
    n->dims[n->rank - 1] = w->dims[0];
    return 0;
}

int ref_linear(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *w = ref_in(cx, n, 1), *o = ref_out(cx, n);
    Tensor *bias = n->nin == 3 ? ref_in(cx, n, 2) : NULL;
    int64_t K = w->dims[1], N = w->dims[0], rows = x->count / K;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < N; j++) {
            double acc = bias ? bias->f[j] : 0.0;
            for (int64_t q = 0; q < K; q++)
                acc += (double)x->f[r * K + q] * w->f[j * K + q];
            o->f[r * N + j] = (float)acc;
        }
    return 0;
}

void lower_linear(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *x = n->in[0], *w = n->in[1];
    int64_t N = w->dims[0], K = w->dims[1];
    Kernel *k = lw_kernel(cx, n, arena_printf(a, "gemm_n%lld_k%lld", (long long)N, (long long)K));
    Var *v[KILN_MAX_RANK];
    Block *body = lw_nest(cx, k, &k->body, n->rank, n->dims, v);
    Var *vj = v[n->rank - 1];
    Stmt *acc = s_let(a, k, body, T_F32, e_flt(a, 0));
    Stmt *lk = s_loop(a, k, body, e_int(a, 0), e_int(a, K), MARK_REDUCE);
    Expr **xi = lw_vars(cx, x->rank, v);
    xi[x->rank - 1] = e_var(a, lk->v);
    Expr *wv = lw_load(cx, w, lw_idx(cx, 2, e_var(a, vj), e_var(a, lk->v)));
    s_set(a, &lk->body, acc->v, A_ADD, e_mul(a, lw_load(cx, x, xi), wv));
    Expr *out = e_var(a, acc->v);
    if (n->nin == 3)
        out = e_add(a, out, lw_load(cx, n->in[2], lw_idx(cx, 1, e_var(a, vj))));
    s_store(a, body, lw_buf(cx, n), lw_vars(cx, n->rank, v), A_SET, out);
}
