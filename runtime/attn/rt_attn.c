/* runtime/attn/rt_attn.c: rt_attn, the kernel of `call attn` statements
 * (rt_attn.h): attention of a block of query rows of one kv head's query
 * heads: groups of up to 64 query vectors go over
 * blocks of 64 keys (their k and v rows stay in L1 across the group),
 * each vector with a running max and sum (online softmax) and its output
 * row as accumulator; a block a vector cannot see is skipped. Scores are
 * 16-lane dot products summed by halving; their max and sum go by 16
 * lanes, their exps through rt_expf (branch-free: vectorised); the
 * weighted values are added four keys a pass over the output row, or,
 * for 4 vectors at once, every key that one of them sees into 16
 * accumulators, a row of v read once for the 4, a key a vector does not
 * see (the causal diagonal's) weighing 0 for it; each element's terms in
 * key order either way. A sink (gpt-oss) starts its vector's running max at the sink's
 * logit and its sum at 1, a term the rescaling carries like any other.
 * k rows AT_AHEAD keys ahead and the block's v rows are
 * prefetched (a decode step reads the whole cache once). Every order
 * depends on the arguments only. Each call tells a profile the FLOPs it
 * computed (rt_profile_count: 4 d a key a vector sees), where the
 * kernel's static count has every row against the whole cache.
 *
 * Compiled into kiln with -O3 -march=native -ffp-contract=fast, as
 * rt_kernels.c (the Makefile), where JIT code calls it; pasted into the
 * generated files of programs that call it, which cc builds with the same
 * flags. Portable C: GCC vector extensions of 16 floats. */
#include "runtime/kiln_rt.h"
#include "runtime/rt_attn.h"

#include <math.h>
#include <string.h>

typedef float at_vec __attribute__((vector_size(64), aligned(4)));  /* any address */
typedef float at_acc __attribute__((vector_size(64)));
/* Loops of 16 lanes run while c < n - n % AT_LANES: written c +
 * AT_LANES <= n, gcc 12 (-O2 and -O3, the generated program's one file)
 * warns that the scalar loop after them "invokes undefined behavior". */
enum { AT_LANES = 16 };

/* rt_attn: per group of query vectors (rows x heads, at most AT_QVECS),
 * over blocks of AT_KEYS keys from the group's first key: each vector
 * whose keys meet the block takes its scores (16-lane dot products, the
 * lanes summed by halving), their max, weights and sum, rescales its
 * output row and adds the weighted values into it, four keys a pass
 * over the row (one sum per element, in key order), or with 3 more
 * vectors (at_pv4: over the keys that one of them sees, weighing 0
 * where a vector does not). The block's k and v
 * rows stay in L1 across the group's vectors. Rows wholly masked for a
 * block skip it. The output rows hold the accumulators; the end divides
 * them by the sums. */
/* keys a block; query vectors a group; rows ahead a prefetch; vectors
 * from which a group's scores come from the block's k transposed (kt),
 * for a head dim of at most AT_TDIM (kt: 32 kB): from 4, a GQA decode
 * step's 4 or 8 query heads a kv head took 0.45x the time of one vector
 * at a time (2048 keys, d 64); 2 or 1 vector gained nothing or lost */
enum { AT_KEYS = 64, AT_QVECS = 64, AT_AHEAD = 8, AT_TILED = 4, AT_TDIM = 128 };

/* x held in a register: an empty asm that gcc must see it in. Without
 * it gcc folds a row of v (or of kt) into each of the 4 multiply-adds
 * that use it, 4 loads where 1 would do, and on Zen 4 (one 64-byte load
 * a cycle) the loads, not the multiply-adds, set the pace: prefill
 * attention took 1.33x the time. */
#if defined(__AVX512F__) && (defined(__x86_64__) || defined(__i386__))
#define AT_REG(x) __asm__("" : "+v"(x))
#else
#define AT_REG(x) ((void)0)
#endif

typedef float at_v8 __attribute__((vector_size(32)));
typedef int32_t at_i32 __attribute__((vector_size(64)));
typedef float at_v4 __attribute__((vector_size(16)));

/* The 16 lanes of *a summed by halving (through a pointer: a vector
 * argument changes the ABI where the file is built without AVX-512, as
 * -Wpsabi says). */
static inline float at_lanes(const at_acc *a)
{
    at_acc acc = *a;
    at_v8 h8 = __builtin_shufflevector(acc, acc, 0, 1, 2, 3, 4, 5, 6, 7) +
               __builtin_shufflevector(acc, acc, 8, 9, 10, 11, 12, 13, 14, 15);
    at_v4 h4 = __builtin_shufflevector(h8, h8, 0, 1, 2, 3) +
               __builtin_shufflevector(h8, h8, 4, 5, 6, 7);
    return (h4[0] + h4[2]) + (h4[1] + h4[3]);
}

/* a . b over n: 16 lanes (fused multiply-adds, in order), summed by
 * halving, then the last n % 16 products one by one. */
static inline float at_dot(const float *a, const float *b, int64_t n)
{
    at_acc acc = {0};
    int64_t c = 0;
    for (; c < n - n % AT_LANES; c += AT_LANES)
        acc += *(const at_vec *)(a + c) * *(const at_vec *)(b + c);
    float s = at_lanes(&acc);
    for (; c < n; c++)
        s += a[c] * b[c];
    return s;
}

/* o[:n] = o[:n] * alpha + w[0] v0 + w[1] v1 + ... (nk <= 4 rows of v,
 * ldv apart), each element's terms added in that order. */
static inline void at_axpy(float *o, int64_t n, float alpha, const float *w, int nk,
                                const float *v, int64_t ldv)
{
    int64_t c = 0;
    for (; c < n - n % AT_LANES; c += AT_LANES) {
        at_acc t = *(at_vec *)(o + c) * alpha;
        for (int j = 0; j < nk; j++)
            t += w[j] * *(const at_vec *)(v + j * ldv + c);
        *(at_vec *)(o + c) = t;
    }
    for (; c < n; c++) {
        float t = o[c] * alpha;
        for (int j = 0; j < nk; j++)
            t += w[j] * v[j * ldv + c];
        o[c] = t;
    }
}

static inline float at_cap(float x, float cap) { return cap > 0 ? cap * tanhf(x * (1 / cap)) : x; }

/* sc[0 .. n) = at_cap(sc * scale, cap): without a cap, 16 lanes a step. */
static inline void at_scale(float *sc, int64_t n, float scale, float cap)
{
    int64_t j = 0;
    if (!(cap > 0))
        for (; j < n - n % AT_LANES; j += AT_LANES)
            *(at_vec *)(sc + j) = *(const at_vec *)(sc + j) * scale;
    for (; j < n; j++)
        sc[j] = at_cap(sc[j] * scale, cap);
}

/* The largest of m and x[0 .. n): 16 lanes, then halving; NaNs lost, as
 * the scalar comparison loses them. */
static inline float at_max(const float *x, int64_t n, float m)
{
    at_acc acc = {0};
    acc += m;
    int64_t j = 0;
    for (; j < n - n % AT_LANES; j += AT_LANES) {
        at_acc y = *(const at_vec *)(x + j);
        at_i32 gt = y > acc;
        acc = (at_acc)(((at_i32)y & gt) | ((at_i32)acc & ~gt));
    }
    for (int h = 0; h < AT_LANES; h++)
        m = acc[h] > m ? acc[h] : m;
    for (; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

/* x[0 .. n) summed: 16 lanes, in order within each, then halving, then
 * the last n % 16 one by one. */
static inline float at_sum(const float *x, int64_t n)
{
    at_acc acc = {0};
    int64_t j = 0;
    for (; j < n - n % AT_LANES; j += AT_LANES)
        acc += *(const at_vec *)(x + j);
    float s = at_lanes(&acc);
    for (; j < n; j++)
        s += x[j];
    return s;
}

/* One vector's state (*mx, *sum) by its scores sc[0 .. n): the max, the
 * weights (into sc) and their sum; returns alpha = exp(old max - max),
 * by which its earlier terms are rescaled. */
static float at_weights(float *sc, int64_t n, float *mx, float *sum)
{
    float m = at_max(sc, n, *mx);
    float alpha = rt_expf(*mx - m);    /* 0 on the first block (*mx = -inf) without a sink */
    for (int64_t j = 0; j < n; j++)    /* vectorised: rt_expf is branch-free */
        sc[j] = rt_expf(sc[j] - m);
    *sum = *sum * alpha + at_sum(sc, n);
    *mx = m;
    return alpha;
}

/* One vector's update (output ov, state *mx, *sum) by its scores sc[0 ..
 * n) of keys a .. a + n - 1: ov = ov * alpha + the weighted values. */
static void at_update(float *sc, int64_t n, float *ov, float *mx, float *sum, int64_t d,
                      const float *v, int64_t ldv, int64_t a)
{
    float alpha = at_weights(sc, n, mx, sum);
    for (int64_t j = 0; j < n; j += 4) {
        int nk = n - j < 4 ? (int)(n - j) : 4;
        at_axpy(ov, d, j ? 1.0f : alpha, sc + j, nk, v + (a + j) * ldv, ldv);
    }
}

/* 4 vectors' updates by the same keys a .. a + n - 1 (their weights
 * w[x][0 .. n), their rescaling al[x]), d a multiple of 64: per 64
 * columns, the 4 output rows in 16 accumulators, each row of v read once
 * for the 4; each element scaled, then its terms added in key order, as
 * at_axpy adds them. */
static void at_pv4(float *const ov[4], const float al[4], float *const w[4], int64_t n,
                   int64_t d, const float *v, int64_t ldv)
{
    for (int64_t c = 0; c < d; c += 4 * AT_LANES) {
        at_acc acc[4][4];
        for (int x = 0; x < 4; x++)
            for (int u = 0; u < 4; u++)
                acc[x][u] = *(const at_vec *)(ov[x] + c + u * AT_LANES) * al[x];
        for (int64_t j = 0; j < n; j++) {
            const float *vr = v + j * ldv + c;
            at_acc vv[4];
            for (int u = 0; u < 4; u++) {
                vv[u] = *(const at_vec *)(vr + u * AT_LANES);
                AT_REG(vv[u]);
            }
            for (int x = 0; x < 4; x++)
                for (int u = 0; u < 4; u++)
                    acc[x][u] += w[x][j] * vv[u];
        }
        for (int x = 0; x < 4; x++)
            for (int u = 0; u < 4; u++)
                *(at_vec *)(ov[x] + c + u * AT_LANES) = acc[x][u];
    }
}

/* One vector (query qv) against keys a .. b - 1: 16-lane dot products. */
static void at_block(const float *qv, float *ov, float *mx, float *sum, int64_t d,
                          const float *k, int64_t ldk, const float *v, int64_t ldv, int64_t a,
                          int64_t b, float scale, float cap)
{
    float sc[AT_KEYS];
    for (int64_t j = 0; j < b - a; j++) {
        for (int64_t c = 0; c < d; c += AT_LANES) {   /* rows apart: no stream to follow */
            __builtin_prefetch(k + (a + j + AT_AHEAD) * ldk + c, 0, 1);
            __builtin_prefetch(v + (a + j) * ldv + c, 0, 1);
        }
        sc[j] = at_cap(at_dot(qv, k + (a + j) * ldk, d) * scale, cap);
    }
    at_update(sc, b - a, ov, mx, sum, d, v, ldv, a);
}

/* The scores of 4 vectors (queries qp[]) against the block's first 16 nu
 * keys, kt their transpose [d][AT_KEYS]: sc[x][j] = the products summed
 * in d order, 4 nu accumulators (4 vectors x 16 nu keys). */
static inline __attribute__((always_inline)) void at_tile_n(const float *const *qp,
                                                            const float *kt, int64_t d,
                                                            float sc[4][AT_KEYS], int nu)
{
    at_acc acc[4][AT_KEYS / AT_LANES];
    for (int x = 0; x < 4; x++)
        for (int u = 0; u < nu; u++)
            acc[x][u] = (at_acc){0};
    for (int64_t c = 0; c < d; c++) {
        at_acc kr[AT_KEYS / AT_LANES];
        for (int u = 0; u < nu; u++) {
            kr[u] = *(const at_acc *)(kt + c * AT_KEYS + u * AT_LANES);
            AT_REG(kr[u]);
        }
        for (int x = 0; x < 4; x++) {
            float qc = qp[x][c];
            for (int u = 0; u < nu; u++)
                acc[x][u] += qc * kr[u];
        }
    }
    for (int x = 0; x < 4; x++)
        for (int u = 0; u < nu; u++)
            *(at_vec *)(sc[x] + u * AT_LANES) = acc[x][u];
}

/* at_tile_n for the keys before the block's key `end` (1 .. AT_KEYS): on
 * the causal diagonal, the 16-key chunks past every vector's last key
 * are not computed. */
static void at_tile(const float *const *qp, const float *kt, int64_t d, float sc[4][AT_KEYS],
                    int64_t end)
{
    switch ((end + AT_LANES - 1) / AT_LANES) {
    case 1: at_tile_n(qp, kt, d, sc, 1); break;
    case 2: at_tile_n(qp, kt, d, sc, 2); break;
    case 3: at_tile_n(qp, kt, d, sc, 3); break;
    default: at_tile_n(qp, kt, d, sc, 4); break;
    }
}

/* Lane l of the pair (x, y) swap at distance h (the lanes with bit h
 * set): lo takes x's lane l where l has no bit h, else y's lane l - h;
 * hi takes x's lane l + h where l has no bit h, else y's lane l. Over h =
 * 8, 4, 2, 1, rows i and i + h so paired, 16 rows become their
 * transpose. */
#define AT_LO(h) AT_IDX(h, 0)
#define AT_HI(h) AT_IDX(h, 1)
#define AT_I(h, l, hi) ((l) & (h) ? 16 + (l) - ((hi) ? 0 : (h)) : (l) + ((hi) ? (h) : 0))
#define AT_IDX(h, hi)                                                                      \
    AT_I(h, 0, hi), AT_I(h, 1, hi), AT_I(h, 2, hi), AT_I(h, 3, hi), AT_I(h, 4, hi),        \
        AT_I(h, 5, hi), AT_I(h, 6, hi), AT_I(h, 7, hi), AT_I(h, 8, hi), AT_I(h, 9, hi),    \
        AT_I(h, 10, hi), AT_I(h, 11, hi), AT_I(h, 12, hi), AT_I(h, 13, hi),               \
        AT_I(h, 14, hi), AT_I(h, 15, hi)
#define AT_SWAP(r, h)                                                                      \
    for (int i = 0; i < 16; i++)                                                           \
        if (!(i & (h))) {                                                                  \
            at_acc x = r[i], y = r[i + (h)];                                               \
            r[i] = __builtin_shufflevector(x, y, AT_LO(h));                                \
            r[i + (h)] = __builtin_shufflevector(x, y, AT_HI(h));                          \
        }

/* kt[c][j] (AT_KEYS columns) = k's row j, column c, for the block's nb
 * keys; zeros past nb. d a multiple of 16: 16 x 16 squares transposed in
 * registers (a scalar copy took a tenth of prefill attention). */
static void at_transpose(float *kt, const float *k, int64_t ldk, int64_t nb, int64_t d)
{
    if (d % AT_LANES) {
        for (int64_t j = 0; j < AT_KEYS; j++)
            for (int64_t c = 0; c < d; c++)
                kt[c * AT_KEYS + j] = j < nb ? k[j * ldk + c] : 0;
        return;
    }
    for (int64_t j0 = 0; j0 < AT_KEYS; j0 += AT_LANES)
        for (int64_t c0 = 0; c0 < d; c0 += AT_LANES) {
            at_acc r[16];
            for (int i = 0; i < 16; i++)
                r[i] = j0 + i < nb ? *(const at_vec *)(k + (j0 + i) * ldk + c0) : (at_acc){0};
            AT_SWAP(r, 8)
            AT_SWAP(r, 4)
            AT_SWAP(r, 2)
            AT_SWAP(r, 1)
            for (int i = 0; i < 16; i++)
                *(at_acc *)(kt + (c0 + i) * AT_KEYS + j0) = r[i];
        }
}

#undef AT_SWAP
#undef AT_IDX
#undef AT_I
#undef AT_HI
#undef AT_LO

/* The keys [*a, *b) of the block (j0, nb keys from it) that vector x,
 * which sees [lo[x], up[x]), sees. */
static inline void at_seen(const int64_t *lo, const int64_t *up, int64_t x, int64_t j0,
                           int64_t nb, int64_t *a, int64_t *b)
{
    *a = lo[x] > j0 ? lo[x] : j0;
    *b = up[x] < j0 + nb ? up[x] : j0 + nb;
}

/* Whether the 4 vectors from x0 update together (at_pv4): their rows are
 * whole 64-column chunks and one of them sees a key of the block; then
 * [*a, *b) is the union of the keys they see, over which the others'
 * weights are zero (on the causal diagonal, the keys after each one's
 * own). */
static int at_shared(int64_t x0, int64_t nv, int64_t j0, int64_t nb, const int64_t *lo,
                     const int64_t *up, int64_t d, int64_t *a, int64_t *b)
{
    if (x0 + 4 > nv || d % (4 * AT_LANES))
        return 0;
    *a = j0 + nb;
    *b = j0;
    for (int u = 0; u < 4; u++) {
        int64_t au, bu;
        at_seen(lo, up, x0 + u, j0, nb, &au, &bu);
        if (au < bu) {
            *a = au < *a ? au : *a;
            *b = bu > *b ? bu : *b;
        }
    }
    return *a < *b;
}

void rt_attn(int64_t nt, int64_t nh, int64_t d, const float *q, int64_t ldq, const float *k,
             int64_t ldk, const float *v, int64_t ldv, float *o, int64_t ldo, const float *sinks,
             int64_t p0, int64_t hi, int64_t window, float scale, float softcap)
{
    int64_t hs = nh < AT_QVECS ? nh : AT_QVECS, rs = AT_QVECS / hs;
    float mx[AT_QVECS], sum[AT_QVECS];
    int64_t lo[AT_QVECS], up[AT_QVECS];
    _Alignas(64) float kt[AT_TDIM * AT_KEYS], sc[4][AT_KEYS];
    uint64_t seen = 0;                  /* keys the vectors see, for the profile */
    for (int64_t i0 = 0; i0 < nt; i0 += rs)
        for (int64_t h0 = 0; h0 < nh; h0 += hs) {
            int64_t ni = nt - i0 < rs ? nt - i0 : rs, nr = nh - h0 < hs ? nh - h0 : hs;
            int64_t nv = ni * nr;
            int tiled = nv >= AT_TILED && d <= AT_TDIM;
            for (int64_t x = 0; x < nv; x++) {
                int64_t p = p0 + i0 + x / nr;
                mx[x] = sinks ? sinks[h0 + x % nr] : -INFINITY;
                sum[x] = mx[x] > -INFINITY ? 1 : 0;   /* the sink's exp(mx - mx) */
                lo[x] = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
                up[x] = hi > 0 ? hi : p + 1;
                seen += up[x] > lo[x] ? (uint64_t)(up[x] - lo[x]) : 0;
                memset(o + (i0 + x / nr) * ldo + (h0 + x % nr) * d, 0, sizeof *o * (size_t)d);
            }
            for (int64_t j0 = lo[0]; j0 < up[nv - 1]; j0 += AT_KEYS) {
                int64_t nb = up[nv - 1] - j0 < AT_KEYS ? up[nv - 1] - j0 : AT_KEYS;
                if (tiled)
                    at_transpose(kt, k + j0 * ldk, ldk, nb, d);
                for (int64_t x0 = 0; x0 < nv; x0 += tiled ? 4 : 1) {
                    const float *qp[4];
                    for (int u = 0; u < 4; u++) {
                        int64_t x = x0 + u < nv ? x0 + u : nv - 1;
                        qp[u] = q + (i0 + x / nr) * ldq + (h0 + x % nr) * d;
                    }
                    if (tiled) {
                        int64_t end = 0;   /* past the last key of the block the 4 see */
                        for (int u = 0; u < 4 && x0 + u < nv; u++)
                            end = up[x0 + u] - j0 > end ? up[x0 + u] - j0 : end;
                        if (end <= 0)      /* the block wholly past the 4 vectors' keys */
                            continue;
                        at_tile(qp, kt, d, sc, end < nb ? end : nb);
                    }
                    int64_t a, b;
                    if (tiled && at_shared(x0, nv, j0, nb, lo, up, d, &a, &b)) {
                        float *ov[4], al[4], *w[4];
                        for (int u = 0; u < 4; u++) {
                            int64_t x = x0 + u, au, bu;
                            at_seen(lo, up, x, j0, nb, &au, &bu);
                            ov[u] = o + (i0 + x / nr) * ldo + (h0 + x % nr) * d;
                            w[u] = sc[u] + (a - j0);
                            al[u] = 1;  /* a vector that sees none of the block: unchanged */
                            if (au < bu) {
                                at_scale(w[u] + (au - a), bu - au, scale, softcap);
                                al[u] = at_weights(w[u] + (au - a), bu - au, &mx[x], &sum[x]);
                            }
                            if (au >= bu)
                                au = bu = b;
                            for (int64_t j = a; j < au; j++)   /* the keys it does not see */
                                w[u][j - a] = 0;
                            for (int64_t j = bu; j < b; j++)
                                w[u][j - a] = 0;
                        }
                        at_pv4(ov, al, w, b - a, d, v + a * ldv, ldv);
                        continue;
                    }
                    for (int64_t x = x0; x < nv && x < x0 + (tiled ? 4 : 1); x++) {
                        at_seen(lo, up, x, j0, nb, &a, &b);
                        float *ov = o + (i0 + x / nr) * ldo + (h0 + x % nr) * d;
                        if (a >= b)   /* the block wholly masked for this vector */
                            continue;
                        if (!tiled) {
                            at_block(qp[0], ov, &mx[x], &sum[x], d, k, ldk, v, ldv, a, b,
                                          scale, softcap);
                            continue;
                        }
                        float *sx = sc[x - x0] + (a - j0);
                        at_scale(sx, b - a, scale, softcap);
                        at_update(sx, b - a, ov, &mx[x], &sum[x], d, v, ldv, a);
                    }
                }
            }
            for (int64_t x = 0; x < nv; x++) {
                float *ov = o + (i0 + x / nr) * ldo + (h0 + x % nr) * d;
                for (int64_t c = 0; c < d; c++)
                    ov[c] /= sum[x];
            }
        }
    rt_profile_count(4 * (uint64_t)d * seen);       /* a score and a weighted value a key */
}
