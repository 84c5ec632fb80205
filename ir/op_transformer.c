/* ir/op_transformer.c: embedding, rope, attention (grouped-query, causal,
 * at a run-time position, with learned sinks) and cache_write (in place
 * into a state).
 *
 * Both take a cache of one sequence, [S, H, D] at the scalar pos, or
 * (slotted) of N sequences, [N, S, H, D], with pos and slots i32[T]: row t
 * is its own sequence's token, at position pos[t] of slot slots[t], so one
 * call advances up to T sequences (a server's batched decode).
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

/* Operand i must be an i32 vector of T values (pos or slots, slotted). */
static int need_i32_rows(InferCx *cx, Node *n, int i, int64_t T)
{
    if (need_dtype(cx, n, i, DT_I32) | need_rank(cx, n, i, 1))
        return -1;
    if (n->in[i]->dims[0] != T) {
        diag(cx->d, in_where(cx, n, i), "%s: operand %d must be i32[%lld], one value a row, "
             "got %s", op_table[n->op].name, i, (long long)T, shp(cx, n->in[i]));
        return -1;
    }
    return 0;
}

/* Attention's sinks (gpt-oss): its last operand when that is f32, after
 * pos (and slots); else NULL. */
static Node *attn_sinks(const Node *n)
{
    Node *l = n->in[n->nin - 1];
    return n->op == OP_ATTENTION && n->nin >= 5 && l->dtype == DT_F32 ? l : NULL;
}

/* Slotted: the cache [N, S, H, D] of N sequences, pos and slots i32[T]
 * (attention's operands 3 and 4, cache_write's 2 and 3). */
static int slotted(const Node *n)
{
    return n->op == OP_ATTENTION ? n->nin - (attn_sinks(n) != NULL) == 5 : n->nin == 4;
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

/* Slotted: `let v: i64 = x[t]` and `check 0 <= v < hi` in blk, for pos
 * (hi = S) or slots (hi = N) of node n. */
static Expr *row_checked(LowerCx *cx, Kernel *k, Block *blk, Node *n, int i, Expr *t, int64_t hi)
{
    Arena *a = cx->a;
    Expr *v = e_var(a, s_let(a, k, blk, T_I64, lw_load(cx, n->in[i], lw_idx(cx, 1, t)))->v);
    Expr *ok = e_bin(a, B_AND, e_bin(a, B_GE, v, e_int(a, 0)), e_bin(a, B_LT, v, e_int(a, hi)));
    const char *msg = arena_printf(a, "%s %s: %s %%lld is out of range [0, %lld)",
                                   op_table[n->op].name, lw_name(cx, n),
                                   i == (n->op == OP_ATTENTION ? 4 : 3) ? "slot" : "pos",
                                   (long long)hi);
    s_check(a, blk, ok, msg, &v, 1);
    return v;
}

/* ---- embedding: out[..., d] = table[ids[...], d] ----------------------------
 * Vocabulary parallel (`ranks` N > 1, made by the distribute pass): the
 * table holds rank r's V/N rows, r·V/N .. (r+1)·V/N − 1 of the whole
 * table's V; ids index the whole table (0 <= id < V), and the row of an
 * id this rank does not hold is zeros (an allreduce after it gives every
 * rank the whole rows, exactly: one rank alone adds a nonzero). The
 * lowering reads r by `call rank`. */

const AttrSpec embedding_attrs[] = {
    {"ranks", AT_INT, 0, 1, 0, NULL, 0, 1},     /* quiet: dumped when > 1 */
    {0},
};

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
    int64_t N = attr_i(n, "ranks");
    if (N < 1 || N > 1 << 20) {
        diag(cx->d, attr_where(cx, n, "ranks"), "embedding: ranks %lld is not in [1, %d]",
             (long long)N, 1 << 20);
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
    int64_t Vl = table->dims[0], D = table->dims[1], N = attr_i(n, "ranks"), V = Vl * N;
    int64_t lo = N > 1 ? cx->rank * Vl : 0;
    if (N > 1 && N != cx->nranks)
        return ref_fail(cx, n, "embedding over %lld ranks, run on %d", (long long)N, cx->nranks);
    for (int64_t p = 0; p < ids->count; p++) {
        int64_t id = ids->i[p];
        if (id < 0 || id >= V)
            return ref_fail(cx, n, "embedding: id %lld at position %lld is out of range [0, %lld)",
                            (long long)id, (long long)p, (long long)V);
        if (id >= lo && id < lo + Vl)
            memcpy(o->f + p * D, table->f + (id - lo) * D, sizeof(float) * (size_t)D);
        else
            memset(o->f + p * D, 0, sizeof(float) * (size_t)D);
    }
    return 0;
}

/* Every id is checked (0 <= id < V) before any row is read, in a loop of
 * its own: a check returns from the kernel, which it cannot do from the
 * parallel loop the gather nest may become. Then out[..., d] = table[id, d].
 * Vocabulary parallel, a kernel first has `call rank(rk)`, and the row is
 * zeroed, then l = id - rk[0] * Vl; if 0 <= l < Vl: out[..., d] = table[l, d]. */
void lower_embedding(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *table = n->in[0], *ids = n->in[1];
    int64_t Vl = table->dims[0], D = table->dims[1], N = attr_i(n, "ranks"), V = Vl * N, one = 1;
    Buf *rk = NULL;
    if (N > 1) {
        rk = lw_temp(cx, DT_I32, 1, &one);
        Kernel *k = lw_kernel(cx, n, "embedding_rank");
        Tile t = {rk, lw_idx(cx, 1, e_int(a, 0)), {1}};
        s_call(a, &k->body, CALL_RANK, &t, 1);
    }
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
    if (rk) {
        Stmt *lz = loop(cx, k, body, D, 0);
        v[ids->rank] = lz->v;
        s_store(a, &lz->body, lw_buf(cx, n), lw_vars(cx, n->rank, v), A_SET, e_flt(a, 0));
        Expr *first = e_mul(a, e_load(a, rk, lw_idx(cx, 1, e_int(a, 0))), e_int(a, Vl));
        id = e_var(a, s_let(a, k, body, T_I64, e_bin(a, B_SUB, id, first))->v);
        body = &s_if(a, body, e_bin(a, B_AND, e_bin(a, B_GE, id, e_int(a, 0)),
                                    e_bin(a, B_LT, id, e_int(a, Vl))))->body;
    }
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

/* for t: p = positions[t]; the position's cos and sin for pairs i, into
 * locals (once, not once a head); for h: for pairs i: rotate; for d >=
 * rd: copy. */
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
    int64_t half = rd / 2;                  /* a position's angles, for every head */
    Buf *cb = s_local(a, cx->p, &lt->body, DT_F32, 1, &half)->buf;
    Buf *sb = s_local(a, cx->p, &lt->body, DT_F32, 1, &half)->buf;
    Stmt *lj = loop(cx, k, &lt->body, half, 0);
    Expr *j = e_var(a, lj->v);
    Expr *q = e_bin(a, B_MOD, e_mul(a, p, e_load(a, turns, &j)), e_int(a, ROPE_ONE_TURN));
    Expr *rad = e_mul(a, e_un(a, U_TOF32, q), e_flt(a, 2.0 * M_PI / (double)ROPE_ONE_TURN));
    Expr *ang = e_var(a, s_let(a, k, &lj->body, T_F32, rad)->v);
    Expr *cs = e_un(a, U_COS, ang), *sn = e_un(a, U_SIN, ang);
    double ms = rope_mscale(n);
    if (ms != 1.0)                  /* YaRN's attention factor */
        cs = e_mul(a, cs, e_flt(a, ms)), sn = e_mul(a, sn, e_flt(a, ms));
    s_store(a, &lj->body, cb, &j, A_SET, cs);
    s_store(a, &lj->body, sb, &j, A_SET, sn);
    Stmt *lh = loop(cx, k, &lt->body, H, 0);
    Expr *h = e_var(a, lh->v);
    Stmt *li = loop(cx, k, &lh->body, half, 0);
    Block *b = &li->body;
    Expr *i = e_var(a, li->v);
    Expr *c = e_var(a, s_let(a, k, b, T_F32, e_load(a, cb, &i))->v);
    Expr *s = e_var(a, s_let(a, k, b, T_F32, e_load(a, sb, &i))->v);
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

/* k's and v's rank: [S, Hkv, D], or [N, S, Hkv, D] slotted; o = rank - 3
 * is where S sits. */
static int attn_shapes(InferCx *cx, Node *n)
{
    Node *q = n->in[0], *k = n->in[1], *v = n->in[2];
    int o = k->rank - 3;
    if (k->dims[o + 2] != q->dims[2]) {
        diag(cx->d, in_where(cx, n, 1), "attention: k must be [%sS, Hkv, %lld] to match q %s, "
             "got %s", o ? "N, " : "", (long long)q->dims[2], shp(cx, q), shp(cx, k));
        return -1;
    }
    if (memcmp(v->dims, k->dims, sizeof *k->dims * (size_t)k->rank)) {
        diag(cx->d, in_where(cx, n, 2), "attention: v must have k's shape %s, got %s",
             shp(cx, k), shp(cx, v));
        return -1;
    }
    if (q->dims[1] % k->dims[o + 1]) {
        diag(cx->d, n->where,
             "attention: the %lld query heads are not a multiple of the %lld kv heads: q %s, k %s",
             (long long)q->dims[1], (long long)k->dims[o + 1], shp(cx, q), shp(cx, k));
        return -1;
    }
    if (!o && q->dims[0] > k->dims[0]) {
        diag(cx->d, n->where,
             "attention: q has %lld rows, more than the %lld rows of k: q %s, k %s",
             (long long)q->dims[0], (long long)k->dims[0], shp(cx, q), shp(cx, k));
        return -1;
    }
    int64_t scores[3] = {q->dims[0], q->dims[1], k->dims[o]};   /* a limit the README states */
    if (!shape_fits(3, scores)) {
        diag(cx->d, n->where, "attention: the scores %s of q %s and k %s would have more "
             "than 2^40 elements", shape_str(cx->m->a, 3, scores), shp(cx, q), shp(cx, k));
        return -1;
    }
    return 0;
}

int infer_attention(InferCx *cx, Node *n)
{
    int bad = 0, slots = slotted(n);
    Node *q = n->in[0], *sk = attn_sinks(n);
    for (int i = 0; i < 3; i++)
        bad |= need_dtype(cx, n, i, DT_F32) | need_rank(cx, n, i, i && slots ? 4 : 3);
    if (n->nin >= 4 && !slots)
        bad |= need_i32_scalar(cx, n, 3);
    if (n->nin == 6 && !sk)
        bad |= need_dtype(cx, n, 5, DT_F32);
    if (slots && !bad)
        bad |= need_i32_rows(cx, n, 3, q->dims[0]) | need_i32_rows(cx, n, 4, q->dims[0]);
    if (slots && !attr_i(n, "causal")) {
        diag(cx->d, attr_where(cx, n, "causal"), "attention: with slots (pos and slots i32[T]) "
             "attention must be causal");
        bad = -1;
    }
    if (sk && !bad && (sk->rank != 1 || sk->dims[0] != q->dims[1])) {
        diag(cx->d, in_where(cx, n, n->nin - 1), "attention: sinks must be [%lld] (one a query "
             "head) to match q %s, got %s", (long long)q->dims[1], shp(cx, q), shp(cx, sk));
        bad = -1;
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
    double mx = sink ? *sink : -INFINITY, sum = 0;
    for (int64_t j = first; j <= last; j++) {
        w[j] = scale * dot(q, k + j * stride, D);
        if (cap > 0)
            w[j] = cap * tanh(w[j] / cap);
        mx = w[j] > mx ? w[j] : mx;
    }
    if (sink)
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

/* Slotted: row t at position pos[t] of slot slots[t] sees keys 0 .. pos[t]
 * of that slot (from pos[t] - W + 1 with a window W). */
static int ref_attention_slots(RefCx *cx, Node *n, const float *sinks, double *w)
{
    Tensor *q = ref_in(cx, n, 0), *k = ref_in(cx, n, 1), *v = ref_in(cx, n, 2);
    Tensor *pos = ref_in(cx, n, 3), *sl = ref_in(cx, n, 4), *o = ref_out(cx, n);
    int64_t T = q->dims[0], Hq = q->dims[1], D = q->dims[2];
    int64_t N = k->dims[0], S = k->dims[1], Hkv = k->dims[2];
    for (int64_t t = 0; t < T; t++) {
        int64_t p = pos->i[t], s = sl->i[t];
        if (s < 0 || s >= N)
            return ref_fail(cx, n, "attention: slot %lld is out of range [0, %lld)",
                            (long long)s, (long long)N);
        if (p < 0 || p >= S)
            return ref_fail(cx, n, "attention: pos %lld is out of range [0, %lld)",
                            (long long)p, (long long)S);
        for (int64_t h = 0; h < Hq; h++) {
            int64_t g = h / (Hq / Hkv), at = (s * S * Hkv + g) * D;
            attend_row(q->f + (t * Hq + h) * D, k->f + at, v->f + at, Hkv * D, D,
                       attn_first(n, p, 0), p, attn_scale(n), attn_softcap(n),
                       sinks ? sinks + h : NULL, w, o->f + (t * Hq + h) * D);
        }
    }
    return 0;
}

int ref_attention(RefCx *cx, Node *n)
{
    Tensor *q = ref_in(cx, n, 0), *k = ref_in(cx, n, 1), *v = ref_in(cx, n, 2);
    Tensor *o = ref_out(cx, n);
    int64_t T = q->dims[0], Hq = q->dims[1], D = q->dims[2], S = k->dims[k->rank - 3];
    int64_t Hkv = k->dims[k->rank - 2];
    const float *sinks = attn_sinks(n) ? ref_in(cx, n, n->nin - 1)->f : NULL;
    double *w = malloc(sizeof *w * (size_t)S);
    if (!w)
        return ref_fail(cx, n, "out of memory");
    if (slotted(n)) {
        int rc = ref_attention_slots(cx, n, sinks, w);
        free(w);
        return rc;
    }
    int64_t pos = n->nin >= 4 ? ref_in(cx, n, 3)->i[0] : 0;
    if (pos < 0 || pos + T > S) {
        free(w);
        return ref_fail(cx, n, "attention: pos %lld %s", (long long)pos,
                        pos_range(cx->m->a, n, T, S));
    }
    int causal = (int)attr_i(n, "causal");
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
    return arena_printf(cx->a, "gqa_%s%s_h%lld_kv%lld_d%lld",
                        slotted(n) ? "slots" : decode ? "decode" : "prefill",
                        !decode && !slotted(n) && attr_i(n, "causal") ? "_causal" : "",
                        (long long)q->dims[1], (long long)k->dims[k->rank - 2],
                        (long long)q->dims[2]);
}

/* ---- attention, lowered: calls of attn ----------------------------------------
 * For each kv head g, the G = Hq / Hkv query heads of g go together,
 * R = ATT_QVECS / G rows of them a call (the last call the rows left):
 *     call attn(out[t0 +: n, gG +: G, 0 +: D], q[t0 +: n, gG +: G, 0 +: D],
 *               k[0 +: S, g +: 1, 0 +: D], v[0 +: S, g +: 1, 0 +: D]
 *               [, sinks[gG +: G]]; p + t0, hi, window, scale, softcap)
 * with hi = p + T (every row sees the same keys) or 0 (causal). Slotted,
 * every row is its own sequence: one call a row t, its position p_t =
 * pos[t] and slot s = slots[t] loaded and checked first, against its
 * slot's cache, k[s +: 1, 0 +: S, g +: 1, 0 +: D], with p0 = p_t and hi 0.
 * rt_attn (runtime/core/rt_kernels.c) runs an online softmax over blocks
 * of keys held in L1 for every query of the call: each k and v row a
 * block reads serves the G heads and the call's rows at once; blocks a
 * row cannot see (past its position, before its window) are skipped.
 * With sinks, each query head's running max starts at its sink's logit
 * and its sum at 1: the sink is one more term of the denominator,
 * rescaled with the others, and adds nothing to the values. Kv heads are
 * the outermost loop, the one parallelize picks: every head's work is
 * the same, where blocks of rows under a causal mask are not. */

#define ATT_QVECS 64                  /* query vectors a call: rt_attn's AT_QVECS */

static int is_state(const Node *c);

/* A KV cache (k or v a state, through its cache_writes) is held [Hkv, S,
 * D] ([N, Hkv, S, D] slotted): strides [D, S D, 1], each kv head's rows
 * of a sequence one contiguous run. Decode reads a head's rows in order;
 * D floats S rows apart (1 kB-3 kB) are no stream the hardware prefetcher
 * follows, and the whole cache is read every step. Every kernel indexes
 * the state through its strides, so the layout is the program's own (both
 * variants lower the same attention). */
static void kv_heads_first(LowerCx *cx, Node *c)
{
    if (!is_state(c))
        return;
    Buf *b = lw_buf(cx, c);
    int o = b->rank - 3;
    b->strides[o] = b->dims[o + 2];
    b->strides[o + 1] = b->dims[o] * b->dims[o + 2];
    b->strides[o + 2] = 1;
    if (o)
        b->strides[0] = b->dims[1] * b->dims[2] * b->dims[3];
}

/* p = pos (checked first); for kv head g, blocks of rows (slotted: each
 * row, its position and slot checked): calls of attn. */
void lower_attention(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *q = n->in[0], *sk = attn_sinks(n);
    int slots = slotted(n);
    int64_t T = q->dims[0], Hkv = n->in[1]->dims[1 + slots], S = n->in[1]->dims[slots];
    int64_t G = q->dims[1] / Hkv, D = q->dims[2];
    int64_t R = slots || ATT_QVECS / G < 1 ? 1 : ATT_QVECS / G;
    R = R < T ? R : T;
    Kernel *k = lw_kernel(cx, n, attn_name(cx, n));
    ir_note(a, &k->notes, "calls of attn: %lld row%s of %lld query head%s against blocks of "
            "keys, online softmax%s%s", (long long)R, R == 1 ? "" : "s", (long long)G,
            G == 1 ? "" : "s", slots ? "; each row its own slot's cache" : "",
            sk ? "; each head's sink in the denominator" : "");
    Expr *p = n->nin >= 4 && !slots ? pos_checked(cx, k, n, n->in[3], T, S) : e_int(a, 0);
    Block *body = &k->body;           /* per kv head (no loop for one) */
    Expr *g = e_int(a, 0);
    if (Hkv > 1) {
        Stmt *lg = loop(cx, k, body, Hkv, 0);
        g = e_var(a, lg->v);
        body = &lg->body;
    }
    Expr *h0 = e_mul(a, g, e_int(a, G));
    Expr *hi = slots || attr_i(n, "causal") ? e_int(a, 0) : e_add(a, p, e_int(a, T));
    Buf *kv[2];
    for (int i = 0; i < 2; i++) {
        kv_heads_first(cx, n->in[1 + i]);
        kv[i] = lw_buf(cx, n->in[1 + i]);
    }
    for (int64_t t0 = 0; t0 < T; t0 += R * (T / R)) {   /* the whole blocks, then the rest */
        int64_t rows = t0 ? T - t0 : R, nblk = t0 ? 1 : T / R;
        Block *blk = body;
        Expr *row = e_int(a, t0);
        if (nblk > 1) {
            Stmt *lb = loop(cx, k, blk, nblk, 0);
            blk = &lb->body;
            row = e_mul(a, e_var(a, lb->v), e_int(a, R));
        }
        Expr *p0 = slots ? row_checked(cx, k, blk, n, 3, row, S) : e_add(a, p, row);
        Expr *s = slots ? row_checked(cx, k, blk, n, 4, row, n->in[1]->dims[0]) : NULL;
        Tile t[5] = {{lw_buf(cx, n), lw_idx(cx, 3, row, h0, e_int(a, 0)), {rows, G, D}},
                     {lw_buf(cx, q), lw_idx(cx, 3, row, h0, e_int(a, 0)), {rows, G, D}}};
        for (int i = 0; i < 2; i++)
            t[2 + i] = slots ? (Tile){kv[i], lw_idx(cx, 4, s, e_int(a, 0), g, e_int(a, 0)),
                                      {1, S, 1, D}}
                             : (Tile){kv[i], lw_idx(cx, 3, e_int(a, 0), g, e_int(a, 0)), {S, 1, D}};
        if (sk)
            t[4] = (Tile){lw_buf(cx, sk), lw_idx(cx, 1, h0), {G}};
        Expr *args[5] = {p0, hi, e_int(a, attr_i(n, "window")), e_flt(a, attn_scale(n)),
                         e_flt(a, attn_softcap(n))};
        s_call_args(a, blk, CALL_ATTN, t, sk ? 5 : 4, args, 5);
    }
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
    int o = slotted(n);                       /* where S sits in the cache's dims */
    int bad = need_dtype(cx, n, 0, DT_F32) | need_rank(cx, n, 0, 3 + o);
    bad |= need_dtype(cx, n, 1, DT_F32) | need_rank(cx, n, 1, 3);
    bad |= o ? 0 : need_i32_scalar(cx, n, 2);
    if (bad)
        return -1;
    if (o && (need_i32_rows(cx, n, 2, nw->dims[0]) | need_i32_rows(cx, n, 3, nw->dims[0])))
        return -1;
    if (nw->dims[1] != c->dims[o + 1] || nw->dims[2] != c->dims[o + 2]) {
        diag(cx->d, in_where(cx, n, 1),
             "cache_write: new must be [T, %lld, %lld] to match cache %s, got %s",
             (long long)c->dims[o + 1], (long long)c->dims[o + 2], shp(cx, c), shp(cx, nw));
        return -1;
    }
    if (!o && nw->dims[0] > c->dims[0]) {
        diag(cx->d, in_where(cx, n, 1),
             "cache_write: new has %lld rows, more than the %lld rows of cache: new %s, cache %s",
             (long long)nw->dims[0], (long long)c->dims[0], shp(cx, nw), shp(cx, c));
        return -1;
    }
    set_like(n, c);
    return 0;
}

/* ref.c hands this node the state's own tensor: the write is in place.
 * Slotted, row t goes to [slots[t], pos[t]], in order of t. */
int ref_cache_write(RefCx *cx, Node *n)
{
    Tensor *nw = ref_in(cx, n, 1), *o = ref_out(cx, n);
    int64_t T = nw->dims[0], row = nw->dims[1] * nw->dims[2];
    if (slotted(n)) {
        Tensor *pos = ref_in(cx, n, 2), *sl = ref_in(cx, n, 3);
        int64_t N = o->dims[0], S = o->dims[1];
        for (int64_t t = 0; t < T; t++) {
            int64_t p = pos->i[t], s = sl->i[t];
            if (s < 0 || s >= N)
                return ref_fail(cx, n, "cache_write: slot %lld is out of range [0, %lld)",
                                (long long)s, (long long)N);
            if (p < 0 || p >= S)
                return ref_fail(cx, n, "cache_write: pos %lld is out of range [0, %lld)",
                                (long long)p, (long long)S);
            memcpy(o->f + (s * S + p) * row, nw->f + t * row, sizeof(float) * (size_t)row);
        }
        return 0;
    }
    int64_t S = o->dims[0], pos = ref_in(cx, n, 2)->i[0];
    if (pos < 0 || pos + T > S)
        return ref_fail(cx, n, "cache_write: pos %lld %s", (long long)pos,
                        pos_range(cx->m->a, n, T, S));
    memcpy(o->f + pos * row, nw->f, sizeof(float) * (size_t)(T * row));
    return 0;
}

/* p = pos (checked); for t, h, d: cache[p + t, h, d] = new[t, h, d]. The
 * node's buffer is the state's (lw_buf). Slotted: for t, p = pos[t] and s =
 * slots[t] (checked); for h, d: cache[s, p, h, d] = new[t, h, d]. */
void lower_cache_write(LowerCx *cx, Node *n)
{
    Arena *a = cx->a;
    Node *nw = n->in[1];
    int o = slotted(n);
    int64_t S = n->dims[o], T = nw->dims[0];
    Kernel *k = lw_kernel(cx, n, arena_printf(a, "cache_write_%ss%lld_h%lld_d%lld",
                                              o ? "slots_" : "", (long long)S,
                                              (long long)n->dims[o + 1], (long long)n->dims[o + 2]));
    if (o) {
        Stmt *lt = loop(cx, k, &k->body, T, 0);
        Expr *t = e_var(a, lt->v);
        Expr *p = row_checked(cx, k, &lt->body, n, 2, t, S);
        Expr *s = row_checked(cx, k, &lt->body, n, 3, t, n->dims[0]);
        Var *v[2];
        Block *body = lw_nest(cx, k, &lt->body, 2, nw->dims + 1, v);
        Expr **hd = lw_vars(cx, 2, v);
        s_store(a, body, lw_buf(cx, n), lw_idx(cx, 4, s, p, hd[0], hd[1]), A_SET,
                lw_load(cx, nw, lw_idx(cx, 3, t, hd[0], hd[1])));
        return;
    }
    Expr *p = pos_checked(cx, k, n, n->in[2], T, S);
    Var *v[3];
    Block *body = lw_nest(cx, k, &k->body, 3, nw->dims, v);
    Expr **ci = lw_vars(cx, 3, v);
    ci[0] = e_add(a, p, ci[0]);
    s_store(a, body, lw_buf(cx, n), ci, A_SET, lw_load(cx, nw, lw_vars(cx, 3, v)));
}
