/* ir/op_transformer.c: embedding, rope, attention (grouped-query, causal,
 * at a run-time position) and cache_write (in place into a state).
 *
 * Run-time errors: an id outside the table, a position that does not fit
 * the rows of k/v or of the cache. The reference returns ref_fail(); the
 * lowered kernels check with S_CHECK before any access the value guards,
 * so a bad input is one clear error, never a read or write out of bounds. */
#include "ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const AttrSpec rope_attrs[] = {
    {"theta", AT_FLOAT, 0, 0, 10000.0, NULL, 0},
    {"style", AT_ENUM, 0, 0, 0, "half|interleaved", 0},
    {"rotary_dim", AT_INT, 0, 0, 0, NULL, 0},      /* 0: D */
    {0},
};
const AttrSpec attention_attrs[] = {
    {"causal", AT_BOOL, 0, 1, 0, NULL, 0},
    {"scale", AT_FLOAT, 0, 0, 0.0, NULL, 0},        /* 0: 1/sqrt(D) */
    {0},
};

static double dot(const float *x, const float *y, int64_t n)
{
    double acc = 0;
    for (int64_t i = 0; i < n; i++)
        acc += (double)x[i] * y[i];
    return acc;
}

/* Operand i must be an i32 scalar (a position such as pos). */
static int need_i32_scalar(InferCx *cx, Node *n, int i)
{
    return need_dtype(cx, n, i, DT_I32) | need_rank(cx, n, i, 0);
}

/* A loop over [0, len) appended to blk. */
static Stmt *loop(LowerCx *cx, Kernel *k, Block *blk, int64_t len, int marks)
{
    return s_loop(cx->a, k, blk, e_int(cx->a, 0), e_int(cx->a, len), marks);
}

/* The message of a position that does not fit, after "pos %lld " (the
 * reference's and the generated code's): T rows at pos in S rows. */
static const char *pos_range(Arena *a, const Node *n, int64_t T, int64_t S)
{
    int att = n->op == OP_ATTENTION;
    return arena_printf(a, "is out of range [0, %lld] (%s T = %lld, %s S = %lld)",
                        (long long)(S - T), att ? "queries" : "new rows", (long long)T,
                        att ? "keys" : "cache rows", (long long)S);
}

/* `let p: i64 = pos` and `check 0 <= p <= S - T` at the top of kernel k:
 * T rows at row p must fit in S rows. */
static Expr *pos_checked(LowerCx *cx, Kernel *k, Node *n, Node *pos, int64_t T, int64_t S)
{
    Arena *a = cx->a;
    Expr *p = e_var(a, s_let(a, k, &k->body, T_I64, lw_scalar(cx, pos))->v);
    Expr *ok = e_bin(a, B_AND, e_bin(a, B_GE, p, e_int(a, 0)),
                     e_bin(a, B_LE, p, e_int(a, S - T)));
    const char *msg = arena_printf(a, "%s %s: pos %%lld %s", op_table[n->op].name,
                                   lw_name(cx, n), pos_range(a, n, T, S));
    s_check(a, &k->body, ok, msg, &p, 1);
    return p;
}

/* ---- embedding: out[..., d] = table[ids[...], d] ---------------------------- */

int infer_embedding(InferCx *cx, Node *n)
{
    Node *table = n->in[0], *ids = n->in[1];
    int bad = need_dtype(cx, n, 0, DT_F32) | need_rank(cx, n, 0, 2);
    bad |= need_dtype(cx, n, 1, DT_I32);
    if (ids->rank + 1 > KILN_MAX_RANK) {
        diag(cx->d, in_where(cx, n, 1),
             "embedding: ids %s would give a result of rank %d, more than %d",
             shp(cx, ids), ids->rank + 1, KILN_MAX_RANK);
        bad = -1;
    }
    if (bad)
        return -1;
    int64_t dims[KILN_MAX_RANK];
    memcpy(dims, ids->dims, sizeof *dims * (size_t)ids->rank);
    dims[ids->rank] = table->dims[1];
    set_shape(n, DT_F32, ids->rank + 1, dims);
    return 0;
}

int ref_embedding(RefCx *cx, Node *n)
{
    Tensor *table = ref_in(cx, n, 0), *ids = ref_in(cx, n, 1), *o = ref_out(cx, n);
    int64_t V = table->dims[0], D = table->dims[1];
    for (int64_t p = 0; p < ids->count; p++) {
        int64_t id = ids->i[p];
        if (id < 0 || id >= V)
            return ref_fail(cx, n, "embedding: id %lld at position %lld is out of range [0, %lld)",
                            (long long)id, (long long)p, (long long)V);
        memcpy(o->f + p * D, table->f + id * D, sizeof(float) * (size_t)D);
    }
    return 0;
}

/* Every id is checked (0 <= id < V) before any row is read, in a loop of
 * its own: a check returns from the kernel, which it cannot do from the
 * parallel loop the gather nest may become. Then out[..., d] = table[id, d]. */
void lower_embedding(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *table = n->in[0], *ids = n->in[1];
    int64_t V = table->dims[0], D = table->dims[1];
    Kernel *k = lw_kernel(cx, n, arena_printf(a, "embedding_v%lld_d%lld",
                                              (long long)V, (long long)D));
    Var *v[KILN_MAX_RANK];
    Block *body = lw_nest(cx, k, &k->body, ids->rank, ids->dims, v);
    Expr *id = e_var(a, s_let(a, k, body, T_I64, lw_load(cx, ids, lw_vars(cx, ids->rank, v)))->v);
    Expr *flat = e_int(a, 0);                 /* row-major position in ids */
    for (int i = 0; i < ids->rank; i++)
        flat = e_add(a, flat, e_mul(a, e_var(a, v[i]),
                                    e_int(a, shape_count(ids->rank - i - 1, ids->dims + i + 1))));
    Expr *ok = e_bin(a, B_AND, e_bin(a, B_GE, id, e_int(a, 0)), e_bin(a, B_LT, id, e_int(a, V)));
    const char *msg = arena_printf(
        a, "embedding %s: id %%lld at position %%lld is out of range [0, %lld)",
        lw_name(cx, n), (long long)V);
    s_check(a, body, ok, msg, lw_idx(cx, 2, id, flat), 2);

    body = lw_nest(cx, k, &k->body, ids->rank, ids->dims, v);
    id = e_var(a, s_let(a, k, body, T_I64, lw_load(cx, ids, lw_vars(cx, ids->rank, v)))->v);
    Stmt *ld = loop(cx, k, body, D, 0);
    v[ids->rank] = ld->v;
    s_store(a, &ld->body, lw_buf(cx, n), lw_vars(cx, n->rank, v), A_SET,
            lw_load(cx, table, lw_idx(cx, 2, id, e_var(a, ld->v))));
}

/* ---- rope ------------------------------------------------------------------
 * Pair i (0 <= i < rd/2) turns by angle pos * theta^(-2i/rd). The pair is
 * (i, i + rd/2) for style "half" (rotate_half, Hugging Face Llama/Qwen) and
 * (2i, 2i + 1) for "interleaved" (Meta Llama, llama2.c):
 *   out[a] = x[a] cos - x[b] sin,  out[b] = x[b] cos + x[a] sin.
 * Dims from rd on pass through. */

static int64_t rope_dim(const Node *n)
{
    int64_t rd = attr_i(n, "rotary_dim");
    return rd ? rd : n->in[0]->dims[2];
}

static int rope_interleaved(const Node *n) { return attr_i(n, "style") == 1; }

int infer_rope(InferCx *cx, Node *n)
{
    int bad = need_dtype(cx, n, 0, DT_F32) | need_rank(cx, n, 0, 3);
    bad |= need_dtype(cx, n, 1, DT_I32) | need_rank(cx, n, 1, 1);
    if (bad)
        return -1;
    Node *x = n->in[0], *pos = n->in[1];
    int64_t D = x->dims[2], rd = attr_i(n, "rotary_dim");
    double theta = attr_f(n, "theta");
    if (pos->dims[0] != x->dims[0]) {
        diag(cx->d, in_where(cx, n, 1), "rope: positions must be i32[%lld] to match x %s, got %s",
             (long long)x->dims[0], shp(cx, x), shp(cx, pos));
        bad = -1;
    }
    if (!(theta > 0) || isinf(theta)) {
        diag(cx->d, attr_where(cx, n, "theta"), "rope: theta must be a positive number, got %g",
             theta);
        bad = -1;
    }
    if (rd == 0 && D % 2) {
        diag(cx->d, in_where(cx, n, 0),
             "rope: x %s has an odd last dimension; give an even rotary_dim below it",
             shp(cx, x));
        bad = -1;
    } else if (rd != 0 && (rd < 2 || rd > D || rd % 2)) {
        diag(cx->d, attr_where(cx, n, "rotary_dim"),
             "rope: rotary_dim must be even and in [2, %lld] for x %s, got %lld",
             (long long)D, shp(cx, x), (long long)rd);
        bad = -1;
    }
    set_like(n, x);
    return bad;
}

int ref_rope(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *pos = ref_in(cx, n, 1), *o = ref_out(cx, n);
    int64_t T = x->dims[0], H = x->dims[1], D = x->dims[2], rd = rope_dim(n);
    double theta = attr_f(n, "theta");
    int il = rope_interleaved(n);
    memcpy(o->f, x->f, sizeof(float) * (size_t)x->count);     /* dims past rd */
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            const float *xr = x->f + (t * H + h) * D;
            float *orow = o->f + (t * H + h) * D;
            for (int64_t i = 0; i < rd / 2; i++) {
                double ang = pos->i[t] * pow(theta, -2.0 * (double)i / (double)rd);
                int64_t ia = il ? 2 * i : i, ib = il ? 2 * i + 1 : i + rd / 2;
                orow[ia] = (float)(xr[ia] * cos(ang) - xr[ib] * sin(ang));
                orow[ib] = (float)(xr[ib] * cos(ang) + xr[ia] * sin(ang));
            }
        }
    return 0;
}

/* Angles in fixed point: pair i turns by pos * f_i turns, f_i =
 * theta^(-2i/rd) / 2pi. Only the fraction of a turn matters, and pos is an
 * integer, so with turns[i] = round(frac(f_i) * 2^31) (an i32)
 *   angle = f32((pos * turns[i]) mod 2^31) * (2pi / 2^31)
 * in i64 arithmetic, then f32. Its error is pos * 1.5e-9 rad from the
 * rounding of turns[i] plus 4e-7 rad from the f32: 3e-6 at position
 * 2000. The plain f32(pos) * f32(inv_freq) is off by up to pos * 1e-7
 * rad, 2e-4 at position 2000: past kiln's 1e-4 tolerance. For a negative
 * pos, C's % gives a negative remainder: still the angle mod 2pi. */
#define ROPE_ONE_TURN (INT64_C(1) << 31)

static int64_t rope_turns(double theta, int64_t i, int64_t rd)
{
    double f = pow(theta, -2.0 * (double)i / (double)rd) / (2.0 * M_PI);
    int64_t q = llround((f - floor(f)) * (double)ROPE_ONE_TURN);
    return q % ROPE_ONE_TURN;
}

/* The i32 table turns[rd/2], filled with constants at the kernel's top. */
static Buf *rope_table(LowerCx *cx, Kernel *k, Node *n)
{
    int64_t half = rope_dim(n) / 2;
    Buf *turns = lw_temp(cx, DT_I32, 1, &half);
    for (int64_t i = 0; i < half; i++)
        s_store(cx->a, &k->body, turns, lw_idx(cx, 1, e_int(cx->a, i)), A_SET,
                e_int(cx->a, rope_turns(attr_f(n, "theta"), i, rope_dim(n))));
    return turns;
}

/* for t: p = positions[t]; for h: for pairs i: rotate; for d >= rd: copy. */
void lower_rope(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *x = n->in[0];
    int64_t T = x->dims[0], H = x->dims[1], D = x->dims[2], rd = rope_dim(n);
    Kernel *k = lw_kernel(cx, n, arena_printf(a, "rope_h%lld_d%lld", (long long)H, (long long)D));
    ir_note(cx->a, &k->notes, "angle = (pos * turns[i] mod 2^31) * 2pi / 2^31: exact range reduction");
    Buf *turns = rope_table(cx, k, n), *out = lw_buf(cx, n);
    Stmt *lt = loop(cx, k, &k->body, T, 0);
    Expr *t = e_var(a, lt->v);
    Expr *p = e_var(a, s_let(a, k, &lt->body, T_I64, lw_load(cx, n->in[1], &t))->v);
    Stmt *lh = loop(cx, k, &lt->body, H, 0);
    Expr *h = e_var(a, lh->v);
    Stmt *li = loop(cx, k, &lh->body, rd / 2, 0);
    Block *b = &li->body;
    Expr *i = e_var(a, li->v);
    Expr *q = e_bin(a, B_MOD, e_mul(a, p, e_load(a, turns, &i)), e_int(a, ROPE_ONE_TURN));
    Expr *rad = e_mul(a, e_un(a, U_TOF32, q), e_flt(a, 2.0 * M_PI / (double)ROPE_ONE_TURN));
    Expr *ang = e_var(a, s_let(a, k, b, T_F32, rad)->v);
    Expr *c = e_var(a, s_let(a, k, b, T_F32, e_un(a, U_COS, ang))->v);
    Expr *s = e_var(a, s_let(a, k, b, T_F32, e_un(a, U_SIN, ang))->v);
    int il = rope_interleaved(n);
    Expr **ia = lw_idx(cx, 3, t, h, il ? e_mul(a, e_int(a, 2), i) : i);
    Expr **ib = lw_idx(cx, 3, t, h, e_add(a, il ? e_mul(a, e_int(a, 2), i) : i,
                                          e_int(a, il ? 1 : rd / 2)));
    Expr *xa = e_var(a, s_let(a, k, b, T_F32, lw_load(cx, x, ia))->v);
    Expr *xb = e_var(a, s_let(a, k, b, T_F32, lw_load(cx, x, ib))->v);
    s_store(a, b, out, ia, A_SET, e_bin(a, B_SUB, e_mul(a, xa, c), e_mul(a, xb, s)));
    s_store(a, b, out, ib, A_SET, e_add(a, e_mul(a, xb, c), e_mul(a, xa, s)));
    if (rd < D) {
        Stmt *ld = s_loop(a, k, &lh->body, e_int(a, rd), e_int(a, D), 0);
        Expr **id = lw_idx(cx, 3, t, h, e_var(a, ld->v));
        s_store(a, &ld->body, out, id, A_SET, lw_load(cx, x, id));
    }
}

/* ---- attention ---------------------------------------------------------------
 * out[t, h] = softmax_j(scale * q[t, h] . k[j, g]) @ v[j, g] over the keys j
 * that query t sees: 0 .. pos + t when causal, 0 .. pos + T - 1 otherwise;
 * g = h / (Hq / Hkv) is the kv head of query head h. */

static double attn_scale(const Node *n)
{
    double s = attr_f(n, "scale");
    return s > 0 ? s : 1.0 / sqrt((double)n->in[0]->dims[2]);
}

static int attn_shapes(InferCx *cx, Node *n)
{
    Node *q = n->in[0], *k = n->in[1], *v = n->in[2];
    if (k->dims[2] != q->dims[2]) {
        diag(cx->d, in_where(cx, n, 1), "attention: k must be [S, Hkv, %lld] to match q %s, got %s",
             (long long)q->dims[2], shp(cx, q), shp(cx, k));
        return -1;
    }
    if (memcmp(v->dims, k->dims, sizeof *k->dims * 3)) {
        diag(cx->d, in_where(cx, n, 2), "attention: v must have k's shape %s, got %s",
             shp(cx, k), shp(cx, v));
        return -1;
    }
    if (q->dims[1] % k->dims[1]) {
        diag(cx->d, n->where,
             "attention: the %lld query heads are not a multiple of the %lld kv heads: q %s, k %s",
             (long long)q->dims[1], (long long)k->dims[1], shp(cx, q), shp(cx, k));
        return -1;
    }
    if (q->dims[0] > k->dims[0]) {
        diag(cx->d, n->where,
             "attention: q has %lld rows, more than the %lld rows of k: q %s, k %s",
             (long long)q->dims[0], (long long)k->dims[0], shp(cx, q), shp(cx, k));
        return -1;
    }
    int64_t scores[3] = {q->dims[0], q->dims[1], k->dims[0]};   /* the lowering's scratch */
    if (!shape_fits(3, scores)) {
        diag(cx->d, n->where, "attention: the scores %s of q %s and k %s would have more "
             "than 2^40 elements", shape_str(cx->m->a, 3, scores), shp(cx, q), shp(cx, k));
        return -1;
    }
    return 0;
}

int infer_attention(InferCx *cx, Node *n)
{
    int bad = 0;
    for (int i = 0; i < 3; i++)
        bad |= need_dtype(cx, n, i, DT_F32) | need_rank(cx, n, i, 3);
    if (n->nin == 4)
        bad |= need_i32_scalar(cx, n, 3);
    const AttrVal *scale = attr_v(n, "scale");
    if (scale->given && (!(scale->f > 0) || isinf(scale->f))) {
        diag(cx->d, attr_where(cx, n, "scale"), "attention: scale must be > 0, got %g", scale->f);
        bad = -1;
    }
    if (bad || attn_shapes(cx, n))
        return -1;
    set_like(n, n->in[0]);
    return 0;
}

/* One query row: o[d] = sum_j softmax(scale * q . k_j) v_j[d] over keys
 * 0..last; k and v point at kv head g of row 0, rows `stride` apart; w
 * holds last + 1 doubles. */
static void attend_row(const float *q, const float *k, const float *v, int64_t stride,
                       int64_t D, int64_t last, double scale, double *w, float *o)
{
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j <= last; j++) {
        w[j] = scale * dot(q, k + j * stride, D);
        mx = w[j] > mx ? w[j] : mx;
    }
    for (int64_t j = 0; j <= last; j++) {
        w[j] = exp(w[j] - mx);
        sum += w[j];
    }
    for (int64_t d = 0; d < D; d++) {
        double acc = 0;
        for (int64_t j = 0; j <= last; j++)
            acc += w[j] * v[j * stride + d];
        o[d] = (float)(acc / sum);
    }
}

int ref_attention(RefCx *cx, Node *n)
{
    Tensor *q = ref_in(cx, n, 0), *k = ref_in(cx, n, 1), *v = ref_in(cx, n, 2);
    Tensor *o = ref_out(cx, n);
    int64_t T = q->dims[0], Hq = q->dims[1], D = q->dims[2], S = k->dims[0], Hkv = k->dims[1];
    int64_t pos = n->nin == 4 ? ref_in(cx, n, 3)->i[0] : 0;
    if (pos < 0 || pos + T > S)
        return ref_fail(cx, n, "attention: pos %lld %s", (long long)pos,
                        pos_range(cx->m->a, n, T, S));
    int causal = (int)attr_i(n, "causal");
    double *w = malloc(sizeof *w * (size_t)S);
    if (!w)
        return ref_fail(cx, n, "out of memory");
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < Hq; h++) {
            int64_t g = h / (Hq / Hkv), last = causal ? pos + t : pos + T - 1;
            attend_row(q->f + (t * Hq + h) * D, k->f + g * D, v->f + g * D, Hkv * D, D,
                       last, attn_scale(n), w, o->f + (t * Hq + h) * D);
        }
    free(w);
    return 0;
}

static const char *attn_name(LowerCx *cx, const Node *n)
{
    const Node *q = n->in[0], *k = n->in[1];
    int decode = q->dims[0] == 1;
    return arena_printf(cx->a, "gqa_%s%s_h%lld_kv%lld_d%lld", decode ? "decode" : "prefill",
                        !decode && attr_i(n, "causal") ? "_causal" : "",
                        (long long)q->dims[1], (long long)k->dims[1], (long long)q->dims[2]);
}

/* The loops of one (t, h) row: keys j in [0, hi) (hi a run-time bound),
 * scores sc[t, h, j] = scale * q . k, softmax in place, out = sc @ v. */
static void attn_row(LowerCx *cx, Kernel *k, Block *row, Node *n, Buf *sc, Expr *t,
                     Expr *h, Expr *hi)
{
    Arena *a = cx->a;
    Node *q = n->in[0];
    int64_t D = q->dims[2];
    Expr *g = e_bin(a, B_DIV, h, e_int(a, q->dims[1] / n->in[1]->dims[1]));
    Expr *mx = e_var(a, s_let(a, k, row, T_F32, e_flt(a, -INFINITY))->v);
    Stmt *l1 = s_loop(a, k, row, e_int(a, 0), hi, MARK_REDUCE);
    Expr *j = e_var(a, l1->v), **sj = lw_idx(cx, 3, t, h, j);
    Expr *dt = e_var(a, s_let(a, k, &l1->body, T_F32, e_flt(a, 0))->v);
    Stmt *ld = loop(cx, k, &l1->body, D, MARK_REDUCE);
    Expr *d = e_var(a, ld->v);
    s_set(a, &ld->body, dt->v, A_ADD, e_mul(a, lw_load(cx, q, lw_idx(cx, 3, t, h, d)),
                                            lw_load(cx, n->in[1], lw_idx(cx, 3, j, g, d))));
    s_store(a, &l1->body, sc, sj, A_SET, e_mul(a, dt, e_flt(a, attn_scale(n))));
    s_set(a, &l1->body, mx->v, A_MAX, e_load(a, sc, sj));

    Expr *sum = e_var(a, s_let(a, k, row, T_F32, e_flt(a, 0))->v);
    Stmt *l2 = s_loop(a, k, row, e_int(a, 0), hi, MARK_REDUCE);
    sj = lw_idx(cx, 3, t, h, e_var(a, l2->v));
    s_store(a, &l2->body, sc, sj, A_SET, e_un(a, U_EXP, e_bin(a, B_SUB, e_load(a, sc, sj), mx)));
    s_set(a, &l2->body, sum->v, A_ADD, e_load(a, sc, sj));

    Stmt *l3 = loop(cx, k, row, D, 0);
    d = e_var(a, l3->v);
    Expr *acc = e_var(a, s_let(a, k, &l3->body, T_F32, e_flt(a, 0))->v);
    Stmt *l4 = s_loop(a, k, &l3->body, e_int(a, 0), hi, MARK_REDUCE);
    j = e_var(a, l4->v);
    s_set(a, &l4->body, acc->v, A_ADD, e_mul(a, e_load(a, sc, lw_idx(cx, 3, t, h, j)),
                                             lw_load(cx, n->in[2], lw_idx(cx, 3, j, g, d))));
    s_store(a, &l3->body, lw_buf(cx, n), lw_idx(cx, 3, t, h, d), A_SET, e_bin(a, B_DIV, acc, sum));
}

/* p = pos (checked); for t, h: row t sees keys [0, p + t + 1) when causal,
 * [0, p + T) otherwise. Scores live in a scratch sc[T, Hq, S]. */
void lower_attention(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *q = n->in[0];
    int64_t T = q->dims[0], S = n->in[1]->dims[0];
    Kernel *k = lw_kernel(cx, n, attn_name(cx, n));
    Expr *p = n->nin == 4 ? pos_checked(cx, k, n, n->in[3], T, S) : e_int(a, 0);
    int64_t sdims[3] = {T, q->dims[1], S};
    Buf *sc = lw_temp(cx, DT_F32, 3, sdims);
    Stmt *lt = loop(cx, k, &k->body, T, 0);
    Stmt *lh = loop(cx, k, &lt->body, q->dims[1], 0);
    Expr *t = e_var(a, lt->v);
    Expr *hi = attr_i(n, "causal") ? e_add(a, e_add(a, p, t), e_int(a, 1))
                                   : e_add(a, p, e_int(a, T));
    attn_row(cx, k, &lh->body, n, sc, t, e_var(a, lh->v), hi);
}

/* ---- cache_write: cache[pos + t] = new[t], in place -------------------------- */

/* A state, or a cache_write of one (which is the same storage). */
static int is_state(const Node *c)
{
    while (c->op == OP_CACHE_WRITE)
        c = c->in[0];
    return c->op == OP_STATE;
}

int infer_cache_write(InferCx *cx, Node *n)
{
    Node *c = n->in[0], *nw = n->in[1];
    if (!is_state(c)) {
        diag(cx->d, in_where(cx, n, 0), "cache_write: cache must be a state tensor, got %s",
             c->name ? arena_printf(cx->m->a, "'%s'", c->name) : "a constant");
        return -1;
    }
    int bad = need_dtype(cx, n, 0, DT_F32) | need_rank(cx, n, 0, 3);
    bad |= need_dtype(cx, n, 1, DT_F32) | need_rank(cx, n, 1, 3) | need_i32_scalar(cx, n, 2);
    if (bad)
        return -1;
    if (nw->dims[1] != c->dims[1] || nw->dims[2] != c->dims[2]) {
        diag(cx->d, in_where(cx, n, 1),
             "cache_write: new must be [T, %lld, %lld] to match cache %s, got %s",
             (long long)c->dims[1], (long long)c->dims[2], shp(cx, c), shp(cx, nw));
        return -1;
    }
    if (nw->dims[0] > c->dims[0]) {
        diag(cx->d, in_where(cx, n, 1),
             "cache_write: new has %lld rows, more than the %lld rows of cache: new %s, cache %s",
             (long long)nw->dims[0], (long long)c->dims[0], shp(cx, nw), shp(cx, c));
        return -1;
    }
    set_like(n, c);
    return 0;
}

/* ref.c hands this node the state's own tensor: the write is in place. */
int ref_cache_write(RefCx *cx, Node *n)
{
    Tensor *nw = ref_in(cx, n, 1), *o = ref_out(cx, n);
    int64_t T = nw->dims[0], S = o->dims[0], row = o->dims[1] * o->dims[2];
    int64_t pos = ref_in(cx, n, 2)->i[0];
    if (pos < 0 || pos + T > S)
        return ref_fail(cx, n, "cache_write: pos %lld %s", (long long)pos,
                        pos_range(cx->m->a, n, T, S));
    memcpy(o->f + pos * row, nw->f, sizeof(float) * (size_t)(T * row));
    return 0;
}

/* p = pos (checked); for t, h, d: cache[p + t, h, d] = new[t, h, d]. The
 * node's buffer is the state's (lw_buf). */
void lower_cache_write(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *nw = n->in[1];
    int64_t S = n->dims[0], T = nw->dims[0];
    Kernel *k = lw_kernel(cx, n, arena_printf(a, "cache_write_s%lld_h%lld_d%lld", (long long)S,
                                              (long long)n->dims[1], (long long)n->dims[2]));
    Expr *p = pos_checked(cx, k, n, n->in[2], T, S);
    Var *v[3];
    Block *body = lw_nest(cx, k, &k->body, 3, nw->dims, v);
    Expr **ci = lw_vars(cx, 3, v);
    ci[0] = e_add(a, p, ci[0]);
    s_store(a, body, lw_buf(cx, n), ci, A_SET, lw_load(cx, nw, lw_vars(cx, 3, v)));
}
