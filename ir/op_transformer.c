/* ir/op_transformer.c: embedding, rope, attention (grouped-query, causal,
 * at a run-time position, with learned sinks) and cache_write (in place
 * into a state).
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
    {"theta", AT_FLOAT, 0, 0, 10000.0, NULL, 0, 0},
    {"style", AT_ENUM, 0, 0, 0, "half|interleaved", 0, 0},
    {"rotary_dim", AT_INT, 0, 0, 0, NULL, 0, 0},      /* 0: D */
    /* Llama 3.1's and YaRN's frequency scaling (rope_freq, rope_mscale);
     * dumps show it when set */
    {"scaling", AT_ENUM, 0, 0, 0, "none|llama3|yarn", 0, 1},
    {"factor", AT_FLOAT, 0, 0, 8.0, NULL, 0, 1},
    {"low_freq_factor", AT_FLOAT, 0, 0, 1.0, NULL, 0, 1},
    {"high_freq_factor", AT_FLOAT, 0, 0, 4.0, NULL, 0, 1},
    {"original_max_position_embeddings", AT_INT, 0, 8192, 0, NULL, 0, 1},
    {"beta_fast", AT_FLOAT, 0, 0, 32.0, NULL, 0, 1},
    {"beta_slow", AT_FLOAT, 0, 0, 1.0, NULL, 0, 1},
    {"truncate", AT_BOOL, 0, 1, 0, NULL, 0, 1},
    {"attention_factor", AT_FLOAT, 0, 0, 0.0, NULL, 0, 1},   /* 0: 0.1 ln(factor) + 1 */
    {0},
};
const AttrSpec attention_attrs[] = {
    {"causal", AT_BOOL, 0, 1, 0, NULL, 0, 0},
    {"scale", AT_FLOAT, 0, 0, 0.0, NULL, 0, 0},        /* 0: 1/sqrt(D) */
    /* Gemma 2's soft cap of the scores (attn_softcap) and a sliding window
     * (Mistral's, Gemma 2's); dumps show them when one is set */
    {"softcap", AT_FLOAT, 0, 0, 0.0, NULL, 0, 1},      /* 0: none */
    {"window", AT_INT, 0, 0, 0.0, NULL, 0, 1},         /* 0: none */
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
 * Pair i (0 <= i < rd/2) turns by angle pos * f_i, f_i = theta^(-2i/rd)
 * (scaled with `scaling` "llama3" or "yarn": rope_freq). The pair is
 * (i, i + rd/2) for style "half" (rotate_half, Hugging Face Llama/Qwen) and
 * (2i, 2i + 1) for "interleaved" (Meta Llama, llama2.c):
 *   out[a] = x[a] cos - x[b] sin,  out[b] = x[b] cos + x[a] sin,
 * cos and sin times YaRN's attention factor (rope_mscale; 1 otherwise).
 * Dims from rd on pass through. */

static int64_t rope_dim(const Node *n)
{
    int64_t rd = attr_i(n, "rotary_dim");
    return rd ? rd : n->in[0]->dims[2];
}

static int rope_interleaved(const Node *n) { return attr_i(n, "style") == 1; }

/* YaRN's blend of pair i (transformers' _compute_yarn_parameters): the
 * dimension where a pair turns r times over the original context L is
 * d(r) = rd ln(L / (2pi r)) / (2 ln theta); lo = d(beta_fast), hi =
 * d(beta_slow) (floor and ceil when truncate), clamped to [0, rd - 1]
 * (hi = lo + 0.001 when equal); the ramp clamp((i - lo) / (hi - lo), 0,
 * 1) is the share of f / factor, the rest f. */
static double yarn_freq(const Node *n, int64_t i, double f)
{
    double rd = (double)rope_dim(n), lt = 2.0 * log(attr_f(n, "theta"));
    double L = (double)attr_i(n, "original_max_position_embeddings");
    double lo = rd * log(L / (2.0 * M_PI * attr_f(n, "beta_fast"))) / lt;
    double hi = rd * log(L / (2.0 * M_PI * attr_f(n, "beta_slow"))) / lt;
    if (attr_i(n, "truncate"))
        lo = floor(lo), hi = ceil(hi);
    lo = lo > 0 ? lo : 0;
    hi = hi < rd - 1 ? hi : rd - 1;
    if (lo == hi)
        hi += 0.001;
    double ramp = ((double)i - lo) / (hi - lo);
    ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
    return f / attr_f(n, "factor") * ramp + f * (1.0 - ramp);
}

/* YaRN's attention factor, which scales cos and sin: attention_factor
 * when given, else 0.1 ln(factor) + 1 (1 for factor <= 1); 1 without
 * YaRN. */
static double rope_mscale(const Node *n)
{
    if (attr_i(n, "scaling") != 2)
        return 1.0;
    double given = attr_f(n, "attention_factor"), factor = attr_f(n, "factor");
    return given > 0 ? given : factor <= 1 ? 1.0 : 0.1 * log(factor) + 1.0;
}

/* f_i, radians a position. With "llama3" (Llama 3.1, transformers'
 * _compute_llama3_parameters), from wavelength w = 2pi / f and the
 * original context L: w < L / high_freq_factor keeps f; w > L /
 * low_freq_factor is f / factor; between, with s = (L / w - low) / (high -
 * low), (1 - s) f / factor + s f. With "yarn", yarn_freq. */
static double rope_freq(const Node *n, int64_t i)
{
    double f = pow(attr_f(n, "theta"), -2.0 * (double)i / (double)rope_dim(n));
    if (attr_i(n, "scaling") == 2)
        return yarn_freq(n, i, f);
    if (attr_i(n, "scaling") != 1)
        return f;
    double factor = attr_f(n, "factor"), lo = attr_f(n, "low_freq_factor"),
           hi = attr_f(n, "high_freq_factor");
    double L = (double)attr_i(n, "original_max_position_embeddings"), w = 2.0 * M_PI / f;
    if (w < L / hi)
        return f;
    if (w > L / lo)
        return f / factor;
    double sm = (L / w - lo) / (hi - lo);
    return (1.0 - sm) * f / factor + sm * f;
}

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
    if (attr_i(n, "scaling")) {
        double factor = attr_f(n, "factor"), lo = attr_f(n, "low_freq_factor"),
               hi = attr_f(n, "high_freq_factor");
        int yarn = attr_i(n, "scaling") == 2;
        if (yarn) {
            lo = attr_f(n, "beta_slow"), hi = attr_f(n, "beta_fast");
            double af = attr_f(n, "attention_factor");
            if (!(af >= 0) || isinf(af)) {
                diag(cx->d, attr_where(cx, n, "attention_factor"),
                     "rope: attention_factor must be >= 0 (0: 0.1 ln(factor) + 1), got %g", af);
                bad = -1;
            }
        }
        if (!(factor >= 1) || isinf(factor)) {
            diag(cx->d, attr_where(cx, n, "factor"),
                 "rope: factor must be a number >= 1, got %g", factor);
            bad = -1;
        }
        if (yarn && (!(lo > 0) || !(hi > lo) || isinf(hi))) {
            diag(cx->d, attr_where(cx, n, "beta_fast"),
                 "rope: beta_slow %g and beta_fast %g must be 0 < beta_slow < beta_fast", lo, hi);
            bad = -1;
        } else if (!yarn && (!(lo > 0) || !(hi > lo) || isinf(hi))) {
            diag(cx->d, attr_where(cx, n, "high_freq_factor"),
                 "rope: low_freq_factor %g and high_freq_factor %g must be 0 < low < high", lo,
                 hi);
            bad = -1;
        }
        if (attr_i(n, "original_max_position_embeddings") < 1) {
            diag(cx->d, attr_where(cx, n, "original_max_position_embeddings"),
                 "rope: original_max_position_embeddings must be >= 1, got %lld",
                 (long long)attr_i(n, "original_max_position_embeddings"));
            bad = -1;
        }
    }
    set_like(n, x);
    return bad;
}

int ref_rope(RefCx *cx, Node *n)
{
    Tensor *x = ref_in(cx, n, 0), *pos = ref_in(cx, n, 1), *o = ref_out(cx, n);
    int64_t T = x->dims[0], H = x->dims[1], D = x->dims[2], rd = rope_dim(n);
    int il = rope_interleaved(n);
    double ms = rope_mscale(n);
    memcpy(o->f, x->f, sizeof(float) * (size_t)x->count);     /* dims past rd */
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            const float *xr = x->f + (t * H + h) * D;
            float *orow = o->f + (t * H + h) * D;
            for (int64_t i = 0; i < rd / 2; i++) {
                double ang = pos->i[t] * rope_freq(n, i);
                int64_t ia = il ? 2 * i : i, ib = il ? 2 * i + 1 : i + rd / 2;
                double c = ms * cos(ang), s = ms * sin(ang);
                orow[ia] = (float)(xr[ia] * c - xr[ib] * s);
                orow[ib] = (float)(xr[ib] * c + xr[ia] * s);
            }
        }
    return 0;
}

/* Angles in fixed point: pair i turns by pos * g_i turns, g_i = f_i / 2pi.
 * Only the fraction of a turn matters, and pos is an integer, so with
 * turns[i] = round(frac(g_i) * 2^31) (an i32)
 *   angle = f32((pos * turns[i]) mod 2^31) * (2pi / 2^31)
 * in i64 arithmetic, then f32. Its error is pos * 1.5e-9 rad from the
 * rounding of turns[i] plus 4e-7 rad from the f32: 3e-6 at position
 * 2000. The plain f32(pos) * f32(inv_freq) is off by up to pos * 1e-7
 * rad, 2e-4 at position 2000: past kiln's 1e-4 tolerance. For a negative
 * pos, C's % gives a negative remainder: still the angle mod 2pi. */
#define ROPE_ONE_TURN (INT64_C(1) << 31)

static int64_t rope_turns(const Node *n, int64_t i)
{
    double f = rope_freq(n, i) / (2.0 * M_PI);
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
                e_int(cx->a, rope_turns(n, i)));
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
    Expr *cs = e_un(a, U_COS, ang), *sn = e_un(a, U_SIN, ang);
    double ms = rope_mscale(n);
    if (ms != 1.0)                  /* YaRN's attention factor */
        cs = e_mul(a, cs, e_flt(a, ms)), sn = e_mul(a, sn, e_flt(a, ms));
    Expr *c = e_var(a, s_let(a, k, b, T_F32, cs)->v);
    Expr *s = e_var(a, s_let(a, k, b, T_F32, sn)->v);
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
 * out[t, h] = softmax_j(cap(scale * q[t, h] . k[j, g])) @ v[j, g] over the
 * keys j that query t sees: 0 .. pos + t when causal, 0 .. pos + T - 1
 * otherwise, and with a window W none before pos + t - W + 1; g = h / (Hq /
 * Hkv) is the kv head of query head h; cap(s) is s, or softcap * tanh(s /
 * softcap) with a soft cap (Gemma 2). With sinks (gpt-oss), head h's
 * sink logit sinks[h] joins the softmax's denominator and nothing else:
 * weights exp(s_j) / (sum_j exp(s_j) + exp(sinks[h])). */

static double attn_scale(const Node *n)
{
    double s = attr_f(n, "scale");
    return s > 0 ? s : 1.0 / sqrt((double)n->in[0]->dims[2]);
}

static double attn_softcap(const Node *n) { return attr_f(n, "softcap"); }

/* The first key query t at position p + t sees (p = pos). */
static int64_t attn_first(const Node *n, int64_t p, int64_t t)
{
    int64_t w = attr_i(n, "window"), lo = p + t - w + 1;
    return w > 0 && lo > 0 ? lo : 0;
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
    int64_t scores[3] = {q->dims[0], q->dims[1], k->dims[0]};   /* a limit the README states */
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
    if (n->nin >= 4)
        bad |= need_i32_scalar(cx, n, 3);
    if (n->nin == 5) {
        Node *q = n->in[0], *sk = n->in[4];
        bad |= need_dtype(cx, n, 4, DT_F32);
        if (!bad && (sk->rank != 1 || sk->dims[0] != q->dims[1])) {
            diag(cx->d, in_where(cx, n, 4), "attention: sinks must be [%lld] (one a query "
                 "head) to match q %s, got %s", (long long)q->dims[1], shp(cx, q), shp(cx, sk));
            bad = -1;
        }
    }
    const AttrVal *scale = attr_v(n, "scale"), *cap = attr_v(n, "softcap");
    if (scale->given && (!(scale->f > 0) || isinf(scale->f))) {
        diag(cx->d, attr_where(cx, n, "scale"), "attention: scale must be > 0, got %g", scale->f);
        bad = -1;
    }
    if (cap->given && (!(cap->f >= 0) || isinf(cap->f))) {
        diag(cx->d, attr_where(cx, n, "softcap"), "attention: softcap must be >= 0 (0: none), "
             "got %g", cap->f);
        bad = -1;
    }
    if (attr_i(n, "window") < 0) {
        diag(cx->d, attr_where(cx, n, "window"), "attention: window must be >= 0 (0: none), "
             "got %lld", (long long)attr_i(n, "window"));
        bad = -1;
    }
    if (bad || attn_shapes(cx, n))
        return -1;
    set_like(n, n->in[0]);
    return 0;
}

/* One query row: o[d] = sum_j softmax(cap(scale * q . k_j)) v_j[d] over
 * keys first..last, the sink's logit *sink (NULL: none) in the softmax's
 * denominator; k and v point at kv head g of row 0, rows `stride` apart;
 * w holds last + 1 doubles. */
static void attend_row(const float *q, const float *k, const float *v, int64_t stride,
                       int64_t D, int64_t first, int64_t last, double scale, double cap,
                       const float *sink, double *w, float *o)
{
    double mx = sink ? *sink : -INFINITY, sum = sink ? 1 : 0;
    for (int64_t j = first; j <= last; j++) {
        w[j] = scale * dot(q, k + j * stride, D);
        if (cap > 0)
            w[j] = cap * tanh(w[j] / cap);
        mx = w[j] > mx ? w[j] : mx;
    }
    if (sink)                       /* exp(sink - mx), not 1, now that mx is known */
        sum = exp(*sink - mx);
    for (int64_t j = first; j <= last; j++) {
        w[j] = exp(w[j] - mx);
        sum += w[j];
    }
    for (int64_t d = 0; d < D; d++) {
        double acc = 0;
        for (int64_t j = first; j <= last; j++)
            acc += w[j] * v[j * stride + d];
        o[d] = (float)(acc / sum);
    }
}

int ref_attention(RefCx *cx, Node *n)
{
    Tensor *q = ref_in(cx, n, 0), *k = ref_in(cx, n, 1), *v = ref_in(cx, n, 2);
    Tensor *o = ref_out(cx, n);
    int64_t T = q->dims[0], Hq = q->dims[1], D = q->dims[2], S = k->dims[0], Hkv = k->dims[1];
    int64_t pos = n->nin >= 4 ? ref_in(cx, n, 3)->i[0] : 0;
    const float *sinks = n->nin == 5 ? ref_in(cx, n, 4)->f : NULL;
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
                       attn_first(n, pos, t), last, attn_scale(n), attn_softcap(n),
                       sinks ? sinks + h : NULL, w, o->f + (t * Hq + h) * D);
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

/* ---- attention, lowered: online softmax over blocks of keys ------------------
 * For each kv head g and query row t, the G = Hq / Hkv query heads of g
 * go together over the keys 0 .. hi - 1 that row t sees (hi = p + t + 1
 * when causal, p + T otherwise), ATT_KEYS keys at a time, keeping per head
 * r a running max mx[r], a running sum sum[r] and an accumulator acc[r, :D]
 * in kernel-local arrays (the online softmax of Milakov and Gimelshein, as
 * FlashAttention uses it). Per block of keys j0 .. j0 + nk - 1:
 *   sc[r, j] = scale * q[t, gG + r] . k[j0 + j, g]
 *   m        = max(mx[r], sc[r, :nk])
 *   sc[r, j] = exp(sc[r, j] - m);  a = exp(mx[r] - m)    (0 for the first block)
 *   sum[r]   = a sum[r] + sum_j sc[r, j];  acc[r] = a acc[r];  mx[r] = m
 *   acc[r]  += sum_j sc[r, j] v[j0 + j, g]
 * then out[t, gG + r] = acc[r] / sum[r] (with sinks, mx[r] starts at the
 * head's sink and sum[r] at 1: a key of value 0). Each k and v row a block reads
 * serves the G heads at once (decode reads the cache once per kv head).
 * No row past hi - 1 is read; with a window W, none before lo = max(0, p +
 * t - W + 1): blocks before it are skipped, the first starts at lo. The loop over blocks spans every key a row
 * may see (S with pos, T without) and skips the blocks past hi, so that
 * its extent is a constant, which the kernel's cost and parallelize's
 * work count.
 *
 * Scratch: G (D + ATT_KEYS + 2) + ATT_LANES floats per row, on the stack,
 * whatever S. Past ATT_STATE, the heads of a kv head go in passes of
 * fewer; past it for one head (D near 16k), acc lives in the output row
 * instead: slower for short rows, which gcc keeps in registers when they
 * are local arrays (llama2.c's decode: 13 us against 10).
 *
 * Dot products run in L = ATT_LANES lanes (fewer when D is no multiple of
 * it: the largest power of two dividing D), the lanes summed by halving,
 * all in vector loops. A plain dot left to tile becomes its lane split,
 * whose lanes are added one by one; measured at T = S = 512, 12 heads over
 * 2, D = 128, one thread: 23 ms against 14 (and below 2 x L = 64, tile
 * keeps the dot scalar: llama2.c's decode, D = 48, 23 us against 10). The
 * D-wide updates of acc carry nothing across d and vectorise as written.
 *
 * Kv heads are the outermost loop, the one parallelize picks: each thread
 * streams its own heads' k and v rows; rows of a causal mask, whose work
 * grows with t, would split unevenly in static chunks. */

#define ATT_KEYS 64                   /* keys per block */
#define ATT_LANES 32                  /* f32 lanes of a dot product: two 64-byte vectors */
#define ATT_STATE 16384               /* floats of state per row, at most (64 KiB of stack) */

typedef struct {
    LowerCx *cx;
    Kernel *k;
    Node *n;
    int64_t H, D, L;                  /* query heads per pass, head dim, dot lanes */
    Expr *g, *h0, *t;                 /* kv head, the pass's first query head, query row */
    Expr *j0, *nk;                    /* the block's first key, its number of keys */
    Buf *mx, *sum, *acc;              /* per row: [H], [H], [H, D] (or NULL: the output's) */
    Buf *sc;                          /* per block: scores, then weights [H, keys] */
} Att;

/* The largest power of two that divides D, ATT_LANES at most. */
static int64_t dot_lanes(int64_t D)
{
    int64_t L = ATT_LANES;
    while (D % L)
        L /= 2;
    return L;
}

/* Query heads per pass: the largest divisor of G whose state per row,
 * `each` floats a head, fits ATT_STATE. */
static int64_t heads_per_pass(int64_t G, int64_t each)
{
    int64_t H = ATT_STATE / each;
    for (H = H < G ? H : G; G % H; H--)
        ;
    return H;
}

/* A loop over [0, len) in blk; *v gets its variable and the loop's body
 * is returned. A span of one is no loop: *v is 0, blk returned. */
static Block *att_span(Att *at, Block *blk, int64_t len, int marks, Expr **v)
{
    if (len == 1) {
        *v = e_int(at->cx->a, 0);
        return blk;
    }
    Stmt *s = loop(at->cx, at->k, blk, len, marks);
    *v = e_var(at->cx->a, s->v);
    return &s->body;
}

/* A loop over the block's keys, [0, nk). */
static Stmt *att_keys(Att *at, Block *blk, int marks)
{
    return s_loop(at->cx->a, at->k, blk, e_int(at->cx->a, 0), at->nk, marks);
}

static Buf *att_local(Att *at, Block *blk, int rank, int64_t d0, int64_t d1)
{
    int64_t dims[2] = {d0, d1};
    return s_local(at->cx->a, at->cx->p, blk, DT_F32, rank, dims)->buf;
}

static Expr **ix1(Att *at, Expr *i) { return lw_idx(at->cx, 1, i); }
static Expr **ix2(Att *at, Expr *i, Expr *j) { return lw_idx(at->cx, 2, i, j); }

/* [t, h0 + r, d]: element d of head r's row in q and in the output. */
static Expr **att_row(Att *at, Expr *r, Expr *d)
{
    return lw_idx(at->cx, 3, at->t, e_add(at->cx->a, at->h0, r), d);
}

/* [j0 + j, g, d]: element d of key j of the block in k and v. */
static Expr **att_key(Att *at, Expr *j, Expr *d)
{
    return lw_idx(at->cx, 3, e_add(at->cx->a, at->j0, j), at->g, d);
}

/* acc[r, d]: a local array, or head r's output row. */
static Buf *acc_buf(Att *at) { return at->acc ? at->acc : lw_buf(at->cx, at->n); }
static Expr **acc_idx(Att *at, Expr *r, Expr *d)
{
    return at->acc ? ix2(at, r, d) : att_row(at, r, d);
}
static Expr *acc(Att *at, Expr *r, Expr *d)
{
    return e_load(at->cx->a, acc_buf(at), acc_idx(at, r, d));
}
static void acc_set(Att *at, Block *blk, Expr *r, Expr *d, AsgOp op, Expr *e)
{
    s_store(at->cx->a, blk, acc_buf(at), acc_idx(at, r, d), op, e);
}

/* mx = -inf, sum = 0, acc = 0 for each head; with sinks, mx = sinks[h0 +
 * r] and sum = 1: the sink is a key of weight exp(sink - mx) and value 0,
 * rescaled with the others. */
static void att_init(Att *at, Block *row)
{
    Arena *a = at->cx->a;
    Expr *r;
    Block *b = att_span(at, row, at->H, 0, &r);
    Node *sinks = at->n->nin == 5 ? at->n->in[4] : NULL;
    s_store(a, b, at->mx, ix1(at, r), A_SET,
            sinks ? lw_load(at->cx, sinks, ix1(at, e_add(a, at->h0, r))) : e_flt(a, -INFINITY));
    s_store(a, b, at->sum, ix1(at, r), A_SET, e_flt(a, sinks ? 1 : 0));
    Stmt *ld = loop(at->cx, at->k, b, at->D, 0);
    acc_set(at, &ld->body, r, e_var(a, ld->v), A_SET, e_flt(a, 0));
}

/* For key j, then head r: sc[r, j] = cap(scale * q[t, h0 + r] . k[j0 + j,
 * g]), the dot product in L lanes, the lanes summed by halving. */
static void att_scores(Att *at, Block *blk)
{
    LowerCx *cx = at->cx;
    Arena *a = cx->a;
    Stmt *lj = att_keys(at, blk, 0);
    Expr *j = e_var(a, lj->v), *r, *l, *c;
    Block *b = att_span(at, &lj->body, at->H, 0, &r);
    Buf *part = att_local(at, b, 1, at->L, 0);
    s_store(a, att_span(at, b, at->L, MARK_VECTOR, &l), part, &l, A_SET, e_flt(a, 0));
    Block *cb = att_span(at, b, at->D / at->L, MARK_REDUCE, &c);   /* chunks of L */
    Block *lb = att_span(at, cb, at->L, MARK_VECTOR, &l);
    Expr *d = e_add(a, e_mul(a, c, e_int(a, at->L)), l);
    Expr *qd = lw_load(cx, at->n->in[0], att_row(at, r, d));
    Expr *kd = lw_load(cx, at->n->in[1], att_key(at, j, d));
    s_store(a, lb, part, &l, A_ADD, e_mul(a, qd, kd));
    for (int64_t w = at->L / 2; w >= 2; w /= 2) {
        Block *hb = att_span(at, b, w, MARK_VECTOR, &l);
        s_store(a, hb, part, &l, A_ADD, e_load(a, part, ix1(at, e_add(a, l, e_int(a, w)))));
    }
    Expr *dot = e_load(a, part, ix1(at, e_int(a, 0)));
    if (at->L > 1)
        dot = e_add(a, dot, e_load(a, part, ix1(at, e_int(a, 1))));
    Expr *score = e_mul(a, dot, e_flt(a, attn_scale(at->n)));
    double cap = attn_softcap(at->n);
    if (cap > 0)                    /* cap tanh(score / cap) */
        score = e_mul(a, e_flt(a, cap), e_un(a, U_TANH, e_mul(a, score, e_flt(a, 1 / cap))));
    s_store(a, b, at->sc, ix2(at, r, j), A_SET, score);
}

/* For head r: m = max(mx[r], the block's scores); the scores become
 * weights exp(sc - m), summed; sum and acc are rescaled by exp(mx - m),
 * which is 0 on the first block (mx = -inf) and 1 while the max holds. */
static void att_softmax(Att *at, Block *blk)
{
    Arena *a = at->cx->a;
    Kernel *k = at->k;
    Expr *r;
    Block *b = att_span(at, blk, at->H, 0, &r);
    Expr *m = e_var(a, s_let(a, k, b, T_F32, e_load(a, at->mx, ix1(at, r)))->v);
    Stmt *l1 = att_keys(at, b, MARK_REDUCE);
    s_set(a, &l1->body, m->v, A_MAX, e_load(a, at->sc, ix2(at, r, e_var(a, l1->v))));
    Expr *rescale = e_var(a, s_let(a, k, b, T_F32, e_un(a, U_EXP, e_bin(a, B_SUB,
                                   e_load(a, at->mx, ix1(at, r)), m)))->v);
    Expr *sum = e_var(a, s_let(a, k, b, T_F32, e_flt(a, 0))->v);
    Stmt *l2 = att_keys(at, b, MARK_REDUCE);
    Expr **sj = ix2(at, r, e_var(a, l2->v));
    Expr *w = e_var(a, s_let(a, k, &l2->body, T_F32,
                             e_un(a, U_EXP, e_bin(a, B_SUB, e_load(a, at->sc, sj), m)))->v);
    s_store(a, &l2->body, at->sc, sj, A_SET, w);
    s_set(a, &l2->body, sum->v, A_ADD, w);
    s_store(a, b, at->sum, ix1(at, r), A_SET,
            e_add(a, e_mul(a, e_load(a, at->sum, ix1(at, r)), rescale), sum));
    s_store(a, b, at->mx, ix1(at, r), A_SET, m);
    Stmt *ld = loop(at->cx, k, b, at->D, 0);
    Expr *d = e_var(a, ld->v);
    acc_set(at, &ld->body, r, d, A_SET, e_mul(a, acc(at, r, d), rescale));
}

/* For key j, then head r: acc[r] += sc[r, j] v[j0 + j, g]. */
static void att_values(Att *at, Block *blk)
{
    Arena *a = at->cx->a;
    Stmt *lj = att_keys(at, blk, MARK_REDUCE);
    Expr *j = e_var(a, lj->v), *r;
    Block *b = att_span(at, &lj->body, at->H, 0, &r);
    Expr *w = e_var(a, s_let(a, at->k, b, T_F32, e_load(a, at->sc, ix2(at, r, j)))->v);
    Stmt *ld = loop(at->cx, at->k, b, at->D, 0);
    Expr *d = e_var(a, ld->v);
    Expr *vd = lw_load(at->cx, at->n->in[2], att_key(at, j, d));
    acc_set(at, &ld->body, r, d, A_ADD, e_mul(a, w, vd));
}

/* out[t, h0 + r] = acc[r] / sum[r]. */
static void att_finish(Att *at, Block *row)
{
    Arena *a = at->cx->a;
    Expr *r;
    Block *b = att_span(at, row, at->H, 0, &r);
    Stmt *ld = loop(at->cx, at->k, b, at->D, 0);
    Expr *d = e_var(a, ld->v);
    s_store(a, &ld->body, lw_buf(at->cx, at->n), att_row(at, r, d), A_SET,
            e_bin(a, B_DIV, acc(at, r, d), e_load(a, at->sum, ix1(at, r))));
}

/* What the kernel keeps, for dumps. */
static void att_note(Att *at, int64_t B, int64_t G, int local)
{
    Arena *a = at->cx->a;
    ir_note(a, &at->k->notes, "online softmax over blocks of %lld keys; per query head a running "
            "max%s%s%s", (long long)B,
            local ? arena_printf(a, ", sum and accumulator [%lld]", (long long)at->D)
                  : " and sum, the weighted values summed in its output row",
            G > 1 ? arena_printf(a, "; the %lld query heads of a kv head share each k and v row "
                                 "read", (long long)G) : "",
            at->H < G ? arena_printf(a, " in passes of %lld", (long long)at->H) : "");
}

/* p = pos (checked first); for kv head g (and pass of heads), query row
 * t: the row's keys in blocks (see above). */
void lower_attention(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *q = n->in[0];
    int64_t T = q->dims[0], Hkv = n->in[1]->dims[1], S = n->in[1]->dims[0];
    int64_t G = q->dims[1] / Hkv, D = q->dims[2], seen = n->nin >= 4 ? S : T;
    int64_t B = seen < ATT_KEYS ? seen : ATT_KEYS, nb = (seen + B - 1) / B;
    int local = B + 2 + D <= ATT_STATE;       /* acc in a local array, else in out */
    Att at = {.cx = cx, .n = n, .H = heads_per_pass(G, B + 2 + (local ? D : 0)), .D = D,
              .L = dot_lanes(D)};
    at.k = lw_kernel(cx, n, attn_name(cx, n));
    att_note(&at, B, G, local);
    Expr *p = n->nin >= 4 ? pos_checked(cx, at.k, n, n->in[3], T, S) : e_int(a, 0), *pass;
    Block *heads = att_span(&at, att_span(&at, &at.k->body, Hkv, 0, &at.g), G / at.H, 0, &pass);
    at.h0 = e_add(a, e_mul(a, at.g, e_int(a, G)), e_mul(a, pass, e_int(a, at.H)));
    Block *row = att_span(&at, heads, T, 0, &at.t);
    Expr *hi = attr_i(n, "causal") ? e_add(a, e_add(a, p, at.t), e_int(a, 1))
                                   : e_add(a, p, e_int(a, T));
    if (hi->kind != E_INT)
        hi = e_var(a, s_let(a, at.k, row, T_I64, hi)->v);
    int64_t W = attr_i(n, "window");
    Expr *lo = NULL;                /* with a window, the first key: max(0, p + t - W + 1) */
    if (W > 0)
        lo = e_var(a, s_let(a, at.k, row, T_I64,
                            e_bin(a, B_MAX, e_int(a, 0),
                                  e_add(a, e_add(a, p, at.t), e_int(a, 1 - W))))->v);
    at.mx = att_local(&at, row, 1, at.H, 0);
    at.sum = att_local(&at, row, 1, at.H, 0);
    at.acc = local ? att_local(&at, row, 2, at.H, D) : NULL;
    att_init(&at, row);
    Block *blk = row;
    at.j0 = lo ? lo : e_int(a, 0);
    at.nk = lo ? e_var(a, s_let(a, at.k, row, T_I64, e_bin(a, B_SUB, hi, lo))->v) : hi;
    if (nb > 1) {
        Stmt *lb = loop(cx, at.k, row, nb, MARK_REDUCE);
        Expr *b0 = e_mul(a, e_var(a, lb->v), e_int(a, B));     /* the block's first key */
        at.j0 = b0;
        blk = &lb->body;
        if (hi->kind != E_INT)
            blk = &s_if(a, blk, e_bin(a, B_LT, b0, hi))->body;
        if (lo) {                   /* blocks before the window skipped, its first cut */
            blk = &s_if(a, blk, e_bin(a, B_LT, lo, e_add(a, b0, e_int(a, B))))->body;
            at.j0 = e_var(a, s_let(a, at.k, blk, T_I64, e_bin(a, B_MAX, b0, lo))->v);
            at.nk = e_var(a, s_let(a, at.k, blk, T_I64,
                                   e_bin(a, B_SUB, e_bin(a, B_MIN, e_add(a, b0, e_int(a, B)), hi),
                                         at.j0))->v);
        } else {
            at.nk = e_var(a, s_let(a, at.k, blk, T_I64,
                                   e_bin(a, B_MIN, e_int(a, B), e_bin(a, B_SUB, hi, at.j0)))->v);
        }
    }
    at.sc = att_local(&at, blk, 2, at.H, B);
    att_scores(&at, blk);
    att_softmax(&at, blk);
    att_values(&at, blk);
    att_finish(&at, row);
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
