/* ir/op_moe.c: the Qwen3-MoE sparse block (HF Qwen3MoeSparseMoeBlock), and
 * gpt-oss's (GptOssMLP) with biases and the clamped SwiGLU.
 *
 * Per token x[t]: p = softmax(router @ x[t] + rb) over the E experts; keep
 * the top_k by p, ties to the lower index; renormalise the kept p to sum
 * 1 when norm_topk_prob; y[t] = sum over kept e of
 *   p_e * (down[e] @ act(gate[e] @ x[t] + gb[e], up[e] @ x[t] + ub[e]) + db[e])
 * with act(g, u) = silu(g) u, or with activation "clamped_swiglu"
 * (gpt-oss) g' sigmoid(alpha g') (u' + 1), g' = min(g, limit), u' =
 * clamp(u, -limit, limit). The biases rb, gb, ub, db are the optional
 * inputs 5..8 (all four or none; zero without). gpt-oss takes the top_k
 * of the logits and softmaxes them alone: with norm_topk_prob the same
 * weights, exp(l_e) / sum over kept exp(l_e').
 *
 * Selection by rank, the same in the reference and the lowering: expert
 * e's rank is #{e' : p[e'] > p[e] or (p[e'] == p[e] and e' < e)}; ranks
 * are a permutation of 0..E-1 and e is kept when its rank < top_k.
 *
 * Expert parallel (`ranks` N > 1, made by the distribute pass): the
 * router is whole ([E, Hd]), gate, up and down hold this MPI rank's E/N
 * experts, r·E/N .. (r+1)·E/N − 1 on rank r; routing is over all E, and y
 * sums the kept experts that this rank holds (an allreduce after it adds
 * the ranks' parts). The lowering reads r by `call rank`. */
#include "ops.h"

#include <math.h>
#include <stdlib.h>

const AttrSpec moe_attrs[] = {
    {"top_k", AT_INT, 1, 0, 0, NULL, 0, 0},
    {"norm_topk_prob", AT_BOOL, 0, 1, 0, NULL, 0, 0},
    {"ranks", AT_INT, 0, 1, 0, NULL, 0, 1},     /* quiet: dumped when > 1 */
    /* gpt-oss's activation (moe_act); dumps show it when set */
    {"activation", AT_ENUM, 0, 0, 0, "silu|clamped_swiglu", 0, 1},
    {"alpha", AT_FLOAT, 0, 0, 1.702, NULL, 0, 1},
    {"limit", AT_FLOAT, 0, 0, 7.0, NULL, 0, 1},
    {0},
};

/* Operand i must be f32[d0, d1, d2] (rank 3, or rank 2 without d2). */
static int need_dims(InferCx *cx, Node *n, int i, const char *what, int rank,
                     int64_t d0, int64_t d1, int64_t d2, const char *against)
{
    Node *y = n->in[i];
    int64_t want[3] = {d0, d1, d2};
    int ok = y->rank == rank;
    for (int j = 0; ok && j < rank; j++)
        ok = y->dims[j] == want[j];
    if (ok)
        return 0;
    diag(cx->d, in_where(cx, n, i), "moe: %s must be %s to match %s, got %s", what,
         shape_str(cx->m->a, rank, want), against, shp(cx, y));
    return -1;
}

int infer_moe(InferCx *cx, Node *n)
{
    static const int ranks[5] = {2, 2, 3, 3, 3};
    int bad = 0;
    for (int i = 0; i < 5; i++)
        bad |= need_dtype(cx, n, i, DT_F32) | need_rank(cx, n, i, ranks[i]);
    if (bad)
        return -1;
    Node *x = n->in[0], *router = n->in[1], *gate = n->in[2];
    int64_t Hd = x->dims[1], E = router->dims[0], I = gate->dims[1], N = attr_i(n, "ranks");
    if (N < 1 || N > 1 << 20 || E % N) {
        diag(cx->d, attr_where(cx, n, "ranks"), "moe: ranks %lld does not split the %lld experts "
             "evenly (ranks in [1, %d])", (long long)N, (long long)E, 1 << 20);
        return -1;
    }
    const char *xs = arena_printf(cx->m->a, "x %s", shp(cx, x));
    const char *rs = arena_printf(cx->m->a, "router %s and x %s", shp(cx, router), shp(cx, x));
    const char *gs = arena_printf(cx->m->a, "gate %s", shp(cx, gate));
    if (need_dims(cx, n, 1, "router", 2, router->dims[0], Hd, 0, xs) ||
        need_dims(cx, n, 2, "gate", 3, E / N, I, Hd, rs) ||
        need_dims(cx, n, 3, "up", 3, E / N, I, Hd, gs) ||
        need_dims(cx, n, 4, "down", 3, E / N, Hd, I, gs))
        return -1;
    if (n->nin != 5 && n->nin != 9) {
        diag(cx->d, n->where, "moe: takes 5 inputs, or 9 with the biases of the router, gate, "
             "up and down; got %d", n->nin);
        return -1;
    }
    for (int i = 5; i < n->nin; i++)
        if (need_dtype(cx, n, i, DT_F32) ||
            need_dims(cx, n, i, (const char *[]){"router_bias", "gate_bias", "up_bias",
                                                 "down_bias"}[i - 5],
                      i == 5 ? 1 : 2, i == 5 ? E : E / N, i == 5 ? 0 : i == 8 ? Hd : I, 0, gs))
            return -1;
    double alpha = attr_f(n, "alpha"), limit = attr_f(n, "limit");
    if (!isfinite(alpha) || !(limit > 0) || isinf(limit)) {
        diag(cx->d, attr_where(cx, n, "limit"),
             "moe: alpha must be a number and limit > 0, got alpha %g, limit %g", alpha, limit);
        return -1;
    }
    int64_t top_k = attr_i(n, "top_k");
    if (top_k < 1 || top_k > E) {
        diag(cx->d, attr_where(cx, n, "top_k"),
             "moe: top_k must be in [1, %lld] for %lld experts, got %lld", (long long)E,
             (long long)E, (long long)top_k);
        return -1;
    }
    /* The lowering keeps the chosen experts as i32 and scratch rows of
     * probabilities [T, E] and hidden activations [T, I]. */
    int64_t te[2] = {x->dims[0], E}, ti[2] = {x->dims[0], I};
    if (E > INT32_MAX) {
        diag(cx->d, n->where, "moe: %lld experts are more than i32 expert indices can count",
             (long long)E);
        return -1;
    }
    if (!shape_fits(2, te) || !shape_fits(2, ti)) {
        diag(cx->d, n->where, "moe: the scratch %s (router) or %s (experts) would have more "
             "than 2^40 elements", shape_str(cx->m->a, 2, te), shape_str(cx->m->a, 2, ti));
        return -1;
    }
    set_like(n, x);
    return 0;
}

static double dot(const float *x, const float *y, int64_t n)
{
    double acc = 0;
    for (int64_t i = 0; i < n; i++)
        acc += (double)x[i] * y[i];
    return acc;
}

/* Routing of one token: w[e] = p_e (renormalised over the kept experts
 * when norm), kept[e] = 1 for the top_k experts. */
static void moe_route(const float *x, const float *router, const float *rb, int64_t E,
                      int64_t Hd, int64_t top_k, int norm, double *w, int *kept)
{
    double mx = -INFINITY, sum = 0, ksum = 0;
    for (int64_t e = 0; e < E; e++) {
        w[e] = dot(router + e * Hd, x, Hd) + (rb ? rb[e] : 0);
        mx = w[e] > mx ? w[e] : mx;
    }
    for (int64_t e = 0; e < E; e++) {
        w[e] = exp(w[e] - mx);
        sum += w[e];
    }
    for (int64_t e = 0; e < E; e++)
        w[e] /= sum;
    for (int64_t e = 0; e < E; e++) {
        int64_t rank = 0;
        for (int64_t f = 0; f < E; f++)
            rank += w[f] > w[e] || (w[f] == w[e] && f < e);
        kept[e] = rank < top_k;
        ksum += kept[e] ? w[e] : 0;
    }
    for (int64_t e = 0; norm && e < E; e++)
        w[e] /= ksum;
}

/* One expert's matrices, gate, up [I, Hd] and down [Hd, I], and biases
 * [I], [I], [Hd] (NULL: none). */
typedef struct {
    const float *gate, *up, *down, *gb, *ub, *db;
} MoeExpert;

/* act(g, u): silu(g) u, or gpt-oss's clamped SwiGLU (activation 1). */
static double moe_act(const Node *n, double g, double u)
{
    if (attr_i(n, "activation") != 1)
        return g / (1.0 + exp(-g)) * u;
    double lim = attr_f(n, "limit");
    g = g < lim ? g : lim;
    u = u < -lim ? -lim : u > lim ? lim : u;
    return g / (1.0 + exp(-attr_f(n, "alpha") * g)) * (u + 1.0);
}

/* y[d] += w * (down @ act(gate @ x + gb, up @ x + ub) + db)[d] for one
 * expert; h holds I. */
static void moe_expert(const Node *n, const float *x, const MoeExpert *ex, int64_t I, int64_t Hd,
                       double w, double *h, double *y)
{
    for (int64_t i = 0; i < I; i++) {
        double g = dot(ex->gate + i * Hd, x, Hd) + (ex->gb ? ex->gb[i] : 0);
        double u = dot(ex->up + i * Hd, x, Hd) + (ex->ub ? ex->ub[i] : 0);
        h[i] = moe_act(n, g, u);
    }
    for (int64_t d = 0; d < Hd; d++) {
        double acc = ex->db ? ex->db[d] : 0;
        for (int64_t i = 0; i < I; i++)
            acc += ex->down[d * I + i] * h[i];
        y[d] += w * acc;
    }
}

int ref_moe(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *router = ref_in(cx, n, 1), *gate = ref_in(cx, n, 2);
    Tensor *up = ref_in(cx, n, 3), *down = ref_in(cx, n, 4), *o = ref_out(cx, n);
    int64_t T = x->dims[0], Hd = x->dims[1], E = ref_in(cx, n, 1)->dims[0], I = gate->dims[1];
    int64_t El = gate->dims[0], N = attr_i(n, "ranks"), lo = N > 1 ? cx->rank * El : 0;
    if (N > 1 && N != cx->nranks)
        return ref_fail(cx, n, "moe over %lld ranks, run on %d", (long long)N, cx->nranks);
    double *w = malloc(sizeof(double) * (size_t)(E + I + Hd));
    int *kept = malloc(sizeof(int) * (size_t)E);
    if (!w || !kept) {
        free(w);
        free(kept);
        return ref_fail(cx, n, "out of memory");
    }
    double *h = w + E, *y = h + I;              /* w[E], h[I], y[Hd] */
    const float *b[4] = {0};                    /* the biases, or none */
    for (int i = 5; i < n->nin; i++)
        b[i - 5] = ref_in(cx, n, i)->f;
    for (int64_t t = 0; t < T; t++) {
        const float *xt = x->f + t * Hd;
        moe_route(xt, router->f, b[0], E, Hd, attr_i(n, "top_k"),
                  (int)attr_i(n, "norm_topk_prob"), w, kept);
        for (int64_t d = 0; d < Hd; d++)
            y[d] = 0;
        for (int64_t e = lo; e < lo + El; e++) {     /* this rank's experts */
            int64_t l = e - lo;
            MoeExpert ex = {gate->f + l * I * Hd, up->f + l * I * Hd, down->f + l * Hd * I,
                            b[1] ? b[1] + l * I : NULL, b[2] ? b[2] + l * I : NULL,
                            b[3] ? b[3] + l * Hd : NULL};
            if (kept[e])
                moe_expert(n, xt, &ex, I, Hd, w[e], h, y);
        }
        for (int64_t d = 0; d < Hd; d++)
            o->f[t * Hd + d] = (float)y[d];
    }
    free(w);
    free(kept);
    return 0;
}

/* ---- lowering: two kernels over scratch buffers ------------------------------
 *   router:  pr[T, E] = softmax(x @ router^T); sel[T, K] (i32) and wt[T, K]
 *            = the kept experts by rank and their (renormalised) p
 *   experts: out[t] = sum over r < K of wt[t, r] * MLP of expert sel[t, r],
 *            h[T, I] holding silu(gate x) * (up x)
 * sel and wt are written by the first kernel and read by the second.
 * Expert parallel: a kernel first has `call rank(rk)`, and the experts
 * kernel skips a slot whose expert e is not this rank's:
 *   l = e - rk[0] * El; if 0 <= l < El: the MLP of local expert l. */

typedef struct {
    int64_t T, Hd, E, I, K, El;     /* El: the experts this rank holds */
    Buf *pr, *sel, *wt, *h, *rk;    /* rk: this rank (expert parallel), else NULL */
} MoeLw;

static Stmt *loop(LowerCx *cx, Kernel *k, Block *blk, int64_t len, int marks)
{
    return s_loop(cx->a, k, blk, e_int(cx->a, 0), e_int(cx->a, len), marks);
}

/* In an index list of dot_loop: the position of the summed index j. */
#define SUMMED ((Expr *)NULL)

/* `let acc = 0; for j < len: acc += x[xi] * y[yi]`, j standing in for the
 * SUMMED entry of each index list; returns acc. */
static Expr *dot_loop(LowerCx *cx, Kernel *k, Block *blk, int64_t len, Buf *x, Expr **xi,
                      Buf *y, Expr **yi)
{
    Arena *a = cx->a;
    Stmt *acc = s_let(a, k, blk, T_F32, e_flt(a, 0));
    Stmt *l = loop(cx, k, blk, len, MARK_REDUCE);
    Expr *j = e_var(a, l->v), *ix[KILN_MAX_RANK], *iy[KILN_MAX_RANK];
    for (int i = 0; i < x->rank; i++)
        ix[i] = xi[i] == SUMMED ? j : xi[i];
    for (int i = 0; i < y->rank; i++)
        iy[i] = yi[i] == SUMMED ? j : yi[i];
    s_set(a, &l->body, acc->v, A_ADD, e_mul(a, e_load(a, x, ix), e_load(a, y, iy)));
    return e_var(a, acc->v);
}

/* for e: pr[t, e] = x[t] . router[e] (+ rb[e]); then softmax over e in
 * place. */
static void router_softmax(LowerCx *cx, Kernel *k, Block *row, Node *n, MoeLw *s, Expr *t)
{
    Arena *a = cx->a;
    Expr *mx = e_var(a, s_let(a, k, row, T_F32, e_flt(a, -INFINITY))->v);
    Stmt *l1 = loop(cx, k, row, s->E, MARK_REDUCE);
    Expr *e = e_var(a, l1->v), **pe = lw_idx(cx, 2, t, e);
    Expr *lg = dot_loop(cx, k, &l1->body, s->Hd, lw_buf(cx, n->in[0]), lw_idx(cx, 2, t, SUMMED),
                        lw_buf(cx, n->in[1]), lw_idx(cx, 2, e, SUMMED));
    if (n->nin == 9)
        lg = e_add(a, lg, lw_load(cx, n->in[5], lw_idx(cx, 1, e)));
    s_store(a, &l1->body, s->pr, pe, A_SET, lg);
    s_set(a, &l1->body, mx->v, A_MAX, lg);

    Expr *sum = e_var(a, s_let(a, k, row, T_F32, e_flt(a, 0))->v);
    Stmt *l2 = loop(cx, k, row, s->E, MARK_REDUCE);
    pe = lw_idx(cx, 2, t, e_var(a, l2->v));
    Expr *ex = e_un(a, U_EXP, e_bin(a, B_SUB, e_load(a, s->pr, pe), mx));
    s_store(a, &l2->body, s->pr, pe, A_SET, ex);
    s_set(a, &l2->body, sum->v, A_ADD, e_load(a, s->pr, pe));

    Stmt *l3 = loop(cx, k, row, s->E, 0);
    pe = lw_idx(cx, 2, t, e_var(a, l3->v));
    s_store(a, &l3->body, s->pr, pe, A_SET, e_bin(a, B_DIV, e_load(a, s->pr, pe), sum));
}

/* Slots start as expert 0 with weight 0, so that even a NaN router (no
 * rank below top_k is then unique) never leaves an index unset. Then for
 * e: r = rank of e; if r < K: sel[t, r] = e, wt[t, r] = pr[t, e]. */
static void router_select(LowerCx *cx, Kernel *k, Block *row, MoeLw *s, Expr *t)
{
    Arena *a = cx->a;
    Stmt *l0 = loop(cx, k, row, s->K, 0);
    Expr **ri = lw_idx(cx, 2, t, e_var(a, l0->v));
    s_store(a, &l0->body, s->sel, ri, A_SET, e_int(a, 0));
    s_store(a, &l0->body, s->wt, ri, A_SET, e_flt(a, 0));

    Stmt *le = loop(cx, k, row, s->E, 0);
    Expr *e = e_var(a, le->v), *pe = e_load(a, s->pr, lw_idx(cx, 2, t, e));
    Expr *r = e_var(a, s_let(a, k, &le->body, T_I64, e_int(a, 0))->v);
    Stmt *lf = loop(cx, k, &le->body, s->E, MARK_REDUCE);
    Expr *f = e_var(a, lf->v), *pf = e_load(a, s->pr, lw_idx(cx, 2, t, f));
    Expr *before = e_bin(a, B_OR, e_bin(a, B_GT, pf, pe),
                         e_bin(a, B_AND, e_bin(a, B_EQ, pf, pe), e_bin(a, B_LT, f, e)));
    s_set(a, &lf->body, r->v, A_ADD, before);
    Stmt *kept = s_if(a, &le->body, e_bin(a, B_LT, r, e_int(a, s->K)));
    s_store(a, &kept->body, s->sel, lw_idx(cx, 2, t, r), A_SET, e);
    s_store(a, &kept->body, s->wt, lw_idx(cx, 2, t, r), A_SET, pe);
}

/* wt[t, r] /= sum over r of wt[t, r]. */
static void router_renorm(LowerCx *cx, Kernel *k, Block *row, MoeLw *s, Expr *t)
{
    Arena *a = cx->a;
    Expr *sum = e_var(a, s_let(a, k, row, T_F32, e_flt(a, 0))->v);
    Stmt *l1 = loop(cx, k, row, s->K, MARK_REDUCE);
    s_set(a, &l1->body, sum->v, A_ADD, e_load(a, s->wt, lw_idx(cx, 2, t, e_var(a, l1->v))));
    Stmt *l2 = loop(cx, k, row, s->K, 0);
    Expr **ri = lw_idx(cx, 2, t, e_var(a, l2->v));
    s_store(a, &l2->body, s->wt, ri, A_SET, e_bin(a, B_DIV, e_load(a, s->wt, ri), sum));
}

static void lower_router(LowerCx *cx, Node *n, MoeLw *s)
{
    Kernel *k = lw_kernel(cx, n, arena_printf(cx->a, "moe_router_e%lld_k%lld_h%lld",
                                              (long long)s->E, (long long)s->K, (long long)s->Hd));
    Stmt *lt = loop(cx, k, &k->body, s->T, 0);
    Expr *t = e_var(cx->a, lt->v);
    router_softmax(cx, k, &lt->body, n, s, t);
    router_select(cx, k, &lt->body, s, t);
    if (attr_i(n, "norm_topk_prob"))
        router_renorm(cx, k, &lt->body, s, t);
}

/* act(g, u) (moe_act) in loop IR: silu(g) u, or the clamped SwiGLU. */
static Expr *act_expr(LowerCx *cx, Kernel *k, Block *blk, Node *n, Expr *g, Expr *u)
{
    Arena *a = cx->a;
    if (attr_i(n, "activation") != 1)
        return e_mul(a, e_mul(a, g, e_un(a, U_SIGMOID, g)), u);
    double lim = attr_f(n, "limit");
    g = e_var(a, s_let(a, k, blk, T_F32, e_bin(a, B_MIN, g, e_flt(a, lim)))->v);
    u = e_bin(a, B_MAX, e_bin(a, B_MIN, u, e_flt(a, lim)), e_flt(a, -lim));
    Expr *glu = e_mul(a, g, e_un(a, U_SIGMOID, e_mul(a, g, e_flt(a, attr_f(n, "alpha")))));
    return e_mul(a, glu, e_add(a, u, e_flt(a, 1)));
}

/* for t: out[t] = 0; for r < K: e = sel[t, r] (less this rank's first
 * expert; only this rank's, expert parallel);
 *   h[t, i] = act(gate[e, i] . x[t] (+ gb[e, i]), up[e, i] . x[t] (+ ub[e, i]));
 *   out[t, d] += wt[t, r] * (down[e, d] . h[t] (+ db[e, d])). */
static void lower_experts(LowerCx *cx, Node *n, MoeLw *s)
{
    Arena *a = cx->a;
    Kernel *k = lw_kernel(cx, n, arena_printf(a, "moe_experts_e%lld_k%lld_i%lld_h%lld",
                                              (long long)s->E, (long long)s->K, (long long)s->I,
                                              (long long)s->Hd));
    Buf *out = lw_buf(cx, n);
    Stmt *lt = loop(cx, k, &k->body, s->T, 0);
    Expr *t = e_var(a, lt->v);
    Stmt *l0 = loop(cx, k, &lt->body, s->Hd, 0);
    s_store(a, &l0->body, out, lw_idx(cx, 2, t, e_var(a, l0->v)), A_SET, e_flt(a, 0));

    Stmt *lr = loop(cx, k, &lt->body, s->K, MARK_REDUCE);
    Expr **ri = lw_idx(cx, 2, t, e_var(a, lr->v));
    Block *slot = &lr->body;
    Expr *e = e_var(a, s_let(a, k, slot, T_I64, e_load(a, s->sel, ri))->v);
    if (s->rk) {
        Expr *first = e_mul(a, e_load(a, s->rk, lw_idx(cx, 1, e_int(a, 0))), e_int(a, s->El));
        e = e_var(a, s_let(a, k, slot, T_I64, e_bin(a, B_SUB, e, first))->v);
        slot = &s_if(a, slot, e_bin(a, B_AND, e_bin(a, B_GE, e, e_int(a, 0)),
                                    e_bin(a, B_LT, e, e_int(a, s->El))))->body;
    }
    Stmt *li = loop(cx, k, slot, s->I, 0);
    Expr *i = e_var(a, li->v), **ei = lw_idx(cx, 3, e, i, SUMMED), **xt = lw_idx(cx, 2, t, SUMMED);
    Buf *x = lw_buf(cx, n->in[0]);
    Expr *g = dot_loop(cx, k, &li->body, s->Hd, lw_buf(cx, n->in[2]), ei, x, xt);
    Expr *u = dot_loop(cx, k, &li->body, s->Hd, lw_buf(cx, n->in[3]), ei, x, xt);
    if (n->nin == 9) {
        g = e_add(a, g, lw_load(cx, n->in[6], lw_idx(cx, 2, e, i)));
        u = e_add(a, u, lw_load(cx, n->in[7], lw_idx(cx, 2, e, i)));
    }
    s_store(a, &li->body, s->h, lw_idx(cx, 2, t, i), A_SET, act_expr(cx, k, &li->body, n, g, u));

    Expr *w = e_var(a, s_let(a, k, slot, T_F32, e_load(a, s->wt, ri))->v);
    Stmt *ld = loop(cx, k, slot, s->Hd, 0);
    Expr *d = e_var(a, ld->v);
    Expr *y = dot_loop(cx, k, &ld->body, s->I, lw_buf(cx, n->in[4]), lw_idx(cx, 3, e, d, SUMMED),
                       s->h, lw_idx(cx, 2, t, SUMMED));
    if (n->nin == 9)
        y = e_add(a, y, lw_load(cx, n->in[8], lw_idx(cx, 2, e, d)));
    s_store(a, &ld->body, out, lw_idx(cx, 2, t, d), A_ADD, e_mul(a, w, y));
}

void lower_moe(LowerCx *cx, Node *n)
{
    MoeLw s = {n->dims[0], n->dims[1], n->in[1]->dims[0], n->in[2]->dims[1],
               attr_i(n, "top_k"), n->in[2]->dims[0], NULL, NULL, NULL, NULL, NULL};
    int64_t te[2] = {s.T, s.E}, tk[2] = {s.T, s.K}, ti[2] = {s.T, s.I}, one = 1;
    s.pr = lw_temp(cx, DT_F32, 2, te);
    s.sel = lw_temp(cx, DT_I32, 2, tk);
    s.wt = lw_temp(cx, DT_F32, 2, tk);
    s.h = lw_temp(cx, DT_F32, 2, ti);
    if (attr_i(n, "ranks") > 1) {
        s.rk = lw_temp(cx, DT_I32, 1, &one);
        Kernel *k = lw_kernel(cx, n, "moe_rank");
        Tile t = {s.rk, lw_idx(cx, 1, e_int(cx->a, 0)), {1}};
        s_call(cx->a, &k->body, CALL_RANK, &t, 1);
    }
    lower_router(cx, n, &s);
    lower_experts(cx, n, &s);
}
