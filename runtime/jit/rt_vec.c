/* runtime/jit/rt_vec.c: vector programs, the JIT's innermost loop nests.
 *
 * The nest's iteration space is rows (every level but the last, in loop
 * order) by columns (the last level). A block is several whole rows when a
 * row is short (code[4] limits them), or a run of one row's columns; its
 * elements sit in each register in loop order, row after row. Every
 * instruction runs over the whole block before the next one starts (but
 * two that vec_fusable pairs up, done in one loop); each is a plain
 * loop, vectorised by cc (this file is built -O3 -mtune=native
 * -fno-math-errno, the loops for three instruction sets, without
 * contraction: a multiply-add is fused where the program says so, and
 * nowhere else). */
#include "runtime/rt_jit.h"

#include <math.h>
#include <string.h>

#define RT_VEC_PTRS 16
#define RT_VEC_ROWS 64            /* rows a block at most */

/* The loops, each built three times, the one this CPU runs picked at load
 * (gcc's target_clones: AVX-512, AVX2 with FMA, SSE2), so that kiln runs
 * where the CPU, or valgrind's model of it, lacks AVX-512. Out of line:
 * inlined into rt_vec, the loops' pointers were spilled and reloaded. The
 * drivers (vec_blocks, vec_block) are clones too: called from default-ISA
 * code, every loop cost a quarter more on layernorm's last nest. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(KILN_NO_CLONES)
#define VEC_KERNEL                                                            \
    __attribute__((noinline, target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VEC_KERNEL __attribute__((noinline))
#endif

/* Instructions done together, two loops becoming one (vec_fusable):
 * VEC_FUSE_LANES: d = a op one value (add, subtract, multiply), done in
 *     the lanes of the store after it, the only instruction to read d;
 * VEC_FUSE_LATER: a pair of ops on a and two values, done by the one
 *     instruction that reads its d, a multiply-add (VEC_FUSE_PAIR). */
enum { VEC_FUSE_NONE, VEC_FUSE_LANES, VEC_FUSE_LATER, VEC_FUSE_PAIR };

typedef struct {
    const int64_t *code, *insn;   /* the program, its first instruction */
    void *const *ptr;
    int nlev, nptr;
    int64_t rows, cols;
    /* the block: rows r0.., nr of them, columns c0.., nc of them */
    int64_t nr, nc, c0;
    const int64_t *pd[RT_VEC_PTRS];   /* each pointer's storage, then strides */
    /* element offset of row r of pointer p: with one row level (lin),
     * rowoff[p][0] + r * step[p]; else rowoff[p][r] */
    int lin;
    int64_t step[RT_VEC_PTRS];
    int64_t rowoff[RT_VEC_PTRS][RT_VEC_ROWS];
    char flat[RT_VEC_PTRS];       /* the block's rows follow one another */
    char same[RT_VEC_PTRS];       /* the block's rows are one place */
    char stored[RT_VEC_PTRS];     /* a store goes through the pointer */
    char scalar[RT_VEC_REGS];     /* the register holds one value throughout */
    float *rp[RT_VEC_REGS];       /* where each register's block is */
    char fuse[RT_VEC_INSNS];      /* VEC_FUSE_*: how instruction i is done */
    const int64_t *pend[RT_VEC_REGS]; /* the pair a VEC_FUSE_PAIR reads, by register */
} VecBlock;

static int64_t vec_off(const VecBlock *b, int p, int64_t r)
{
    return b->lin ? b->rowoff[p][0] + r * b->step[p] : b->rowoff[p][r];
}

/* Pointer p's elements of the block as one contiguous run of floats, or
 * NULL when they are not (16-bit, strided, or rows apart). */
static float *vec_span(const VecBlock *b, int p)
{
    const int64_t *pd = b->pd[p];
    if (pd[0] != RT_F32 || pd[b->nlev] != 1 || !b->flat[p])
        return NULL;
    return (float *)b->ptr[p] + b->rowoff[p][0] + b->c0;
}

/* Loads the block into reg, or, when it is contiguous f32 nothing in the
 * nest stores to, points the register at it. */
static VEC_KERNEL void vec_load(VecBlock *b, int p, int d, float *restrict reg)
{
    const int64_t *pd = b->pd[p];
    int64_t s = pd[b->nlev];                     /* stride along the columns */
    float *run = vec_span(b, p);
    if (run && !b->stored[p]) {
        b->rp[d] = run;
        return;
    }
    b->rp[d] = reg;
    for (int64_t r = 0; r < b->nr; r++, reg += b->nc) {
        int64_t at = vec_off(b, p, r) + b->c0 * s;
        if (pd[0] == RT_F32) {
            const float *restrict src = (const float *)b->ptr[p] + at;
            if (s == 1)
                for (int64_t c = 0; c < b->nc; c++)
                    reg[c] = src[c];
            else
                for (int64_t c = 0; c < b->nc; c++)
                    reg[c] = src[c * s];
        } else {
            const uint16_t *restrict src = (const uint16_t *)b->ptr[p] + at;
            if (pd[0] == RT_BF16)
                for (int64_t c = 0; c < b->nc; c++)
                    reg[c] = rt_bf16_f32(src[c * s]);
            else
                for (int64_t c = 0; c < b->nc; c++)
                    reg[c] = rt_f16_f32(src[c * s]);
        }
    }
}

/* dst[c ..] += each row's t in turn (T: the element), W lanes at once
 * (two 16-lane chains in flight when W is 32). */
#define VEC_LANES(W, T, ACC)                                                  \
    for (; c + W <= nc; c += W) {                                             \
        float acc[W];                                                         \
        for (int j = 0; j < W; j++)                                           \
            acc[j] = dst[c + j];                                              \
        for (int64_t r = 0; r < nr; r++)                                      \
            for (int j = 0; j < W; j++) {                                     \
                const int64_t k = r * nc + c + j;                             \
                const float t = (T);                                          \
                acc[j] = (ACC);                                               \
            }                                                                 \
        for (int j = 0; j < W; j++)                                           \
            dst[c + j] = acc[j];                                              \
    }
#define VEC_LANES_BOTH(T, ACC) VEC_LANES(32, T, ACC) VEC_LANES(16, T, ACC) break

/* The lanes of a store += (op 1) or += t * w (op 3) whose rows are one
 * place: summed over the rows in registers. pre: t is v's element as it
 * is (0) or v op y (RT_V_ADD, RT_V_SUB, RT_V_MUL: the instruction before
 * the store, computed here), and then w is t. */
static VEC_KERNEL void vec_lanes(float *restrict dst, const float *v, const float *w, int64_t nr,
                                 int64_t nc, int op, int pre, float y)
{
    int64_t c = 0;
    switch (op == 1 ? pre : RT_V_COUNT + pre) {
    case 0: VEC_LANES_BOTH(v[k], acc[j] + t);
    case RT_V_ADD: VEC_LANES_BOTH(v[k] + y, acc[j] + t);
    case RT_V_SUB: VEC_LANES_BOTH(v[k] - y, acc[j] + t);
    case RT_V_MUL: VEC_LANES_BOTH(v[k] * y, acc[j] + t);
    case RT_V_COUNT: VEC_LANES_BOTH(v[k], fmaf(t, w[k], acc[j]));
    case RT_V_COUNT + RT_V_ADD: VEC_LANES_BOTH(v[k] + y, fmaf(t, t, acc[j]));
    case RT_V_COUNT + RT_V_SUB: VEC_LANES_BOTH(v[k] - y, fmaf(t, t, acc[j]));
    case RT_V_COUNT + RT_V_MUL: VEC_LANES_BOTH(v[k] * y, fmaf(t, t, acc[j]));
    default: break;
    }
}

/* A store through p takes vec_lanes. */
static int vec_is_lanes(const VecBlock *b, int p, int op)
{
    int64_t s = b->pd[p][b->nlev];
    return (op == 1 || op == 3) && s == 1 && b->nr > 1 && !b->flat[p] && b->same[p] &&
           b->nc % 16 == 0;
}

/* Elements stored in loop order: a later one to the same place wins, as in
 * the loop. op: 0 =, 1 +=, 2 max=, 3 += v * w (fused). */
static VEC_KERNEL void vec_store(const VecBlock *b, int p, const float *v, int op,
                                 const float *w)
{
    const int64_t *pd = b->pd[p];
    int64_t s = pd[b->nlev], nr = b->nr, nc = b->nc;
    if (vec_is_lanes(b, p, op)) {
        vec_lanes((float *)b->ptr[p] + b->rowoff[p][0] + b->c0, v, w, nr, nc, op, 0, 0);
        return;
    }
    if (b->flat[p] && s == 1)     /* one run */
        nc *= nr, nr = 1;
    for (int64_t r = 0; r < nr; r++, v += nc) {
        float *dst = (float *)b->ptr[p] + vec_off(b, p, r) + b->c0 * s;
        if (s == 0 && op) {       /* the row folded into one place: in a register */
            float acc = *dst;
            if (op == 3)
                for (int64_t c = 0; c < nc; c++)
                    acc = fmaf(v[c], w[r * nc + c], acc);
            else if (op == 1)
                for (int64_t c = 0; c < nc; c++)
                    acc += v[c];
            else
                for (int64_t c = 0; c < nc; c++)
                    acc = acc > v[c] ? acc : v[c];
            *dst = acc;
        } else if (op == 3 && s == 1)
            for (int64_t c = 0; c < nc; c++)
                dst[c] = fmaf(v[c], w[r * nc + c], dst[c]);
        else if (op == 3)
            for (int64_t c = 0; c < nc; c++)
                dst[c * s] = fmaf(v[c], w[r * nc + c], dst[c * s]);
        else if (op == 0 && s == 1)
            for (int64_t c = 0; c < nc; c++)
                dst[c] = v[c];
        else if (op == 0)
            for (int64_t c = 0; c < nc; c++)
                dst[c * s] = v[c];
        else if (op == 1 && s == 1)
            for (int64_t c = 0; c < nc; c++)
                dst[c] += v[c];
        else if (op == 1)
            for (int64_t c = 0; c < nc; c++)
                dst[c * s] += v[c];
        else
            for (int64_t c = 0; c < nc; c++)
                dst[c * s] = dst[c * s] > v[c] ? dst[c * s] : v[c];
    }
}

/* A scalar register's block, in this instruction set's stores: the
 * loads that read it then take the value from the store in flight. */
static VEC_KERNEL void vec_fill(float *d, float v, int64_t m)
{
    for (int64_t k = 0; k < m; k++)
        d[k] = v;
}

static VEC_KERNEL void vec_reduce(float *acc, const float *v, int64_t m, int op)
{
    float s = *acc;
    if (op == 1)
        for (int64_t k = 0; k < m; k++)
            s += v[k];
    else
        for (int64_t k = 0; k < m; k++)
            s = s > v[k] ? s : v[k];
    *acc = s;
}

static VEC_KERNEL void vec_mov(float *d, const float *a, int64_t m, int op)
{
    if (op == 0)
        for (int64_t k = 0; k < m; k++)
            d[k] = a[k];
    else if (op == 1)
        for (int64_t k = 0; k < m; k++)
            d[k] += a[k];
    else
        for (int64_t k = 0; k < m; k++)
            d[k] = d[k] > a[k] ? d[k] : a[k];
}

#define MAP1(expr) for (int64_t k = 0; k < m; k++) { float x = a[k]; d[k] = (expr); } break
/* y one value (a scalar register) or one an element: loops of their own */
#define MAP2(expr)                                                            \
    if (xs && ys) {                                                           \
        float x = *a, y = *b, r_ = (expr);                                    \
        for (int64_t k = 0; k < m; k++)                                       \
            d[k] = r_;                                                        \
    } else if (ys) {          /* the one value read once: d may be where it is */ \
        const float y1 = *b;                                                  \
        for (int64_t k = 0; k < m; k++) { float x = a[k], y = y1; d[k] = (expr); } \
    } else if (xs) {                                                          \
        const float x1 = *a;                                                  \
        for (int64_t k = 0; k < m; k++) { float x = x1, y = b[k]; d[k] = (expr); } \
    } else                                                                    \
        for (int64_t k = 0; k < m; k++) { float x = a[k], y = b[k]; d[k] = (expr); } \
    break

/* The pairs, RT_V_PAIR + i: (x OPi/4 y) OPi%4 z, each op one of + - * /
 * (x * y + z is RT_V_FMA, so i is never 8 or 9). */
#define VEC_PAIRS(X)                                                          \
    X(0, (x + y) + z) X(1, (x + y) - z) X(2, (x + y) * z) X(3, (x + y) / z)   \
    X(4, (x - y) + z) X(5, (x - y) - z) X(6, (x - y) * z) X(7, (x - y) / z)   \
    X(10, (x * y) * z) X(11, (x * y) / z)                                     \
    X(12, (x / y) + z) X(13, (x / y) - z) X(14, (x / y) * z) X(15, (x / y) / z)

/* Two operations in one pass (RT_V_PAIR): x from a block, y and z each one
 * value or a block; every intermediate rounded to f32, as in the loop. */
#define PAIR(expr)                                                            \
    if (ys && zs) {                                                           \
        const float y1 = *b, z1 = *c;                                         \
        for (int64_t k = 0; k < m; k++) { float x = a[k], y = y1, z = z1; d[k] = (expr); } \
    } else if (ys) {                                                          \
        const float y1 = *b;                                                  \
        for (int64_t k = 0; k < m; k++) { float x = a[k], y = y1, z = c[k]; d[k] = (expr); } \
    } else if (zs) {                                                          \
        const float z1 = *c;                                                  \
        for (int64_t k = 0; k < m; k++) { float x = a[k], y = b[k], z = z1; d[k] = (expr); } \
    } else                                                                    \
        for (int64_t k = 0; k < m; k++) { float x = a[k], y = b[k], z = c[k]; d[k] = (expr); } \
    break

/* One arithmetic instruction over m elements (d may be a, b or c); xs, ys,
 * zs: a, b, c hold one value. */
static VEC_KERNEL void vec_op(int op, float *d, const float *a, const float *b, const float *c,
                              int xs, int ys, int zs, int64_t m)
{
    switch (op) {
    case RT_V_ADD: MAP2(x + y);
    case RT_V_SUB: MAP2(x - y);
    case RT_V_MUL: MAP2(x * y);
    case RT_V_DIV: MAP2(x / y);
    case RT_V_MAX: MAP2(x > y ? x : y);
    case RT_V_MIN: MAP2(x < y ? x : y);
    case RT_V_LT: MAP2(x < y ? 1.0f : 0.0f);
    case RT_V_LE: MAP2(x <= y ? 1.0f : 0.0f);
    case RT_V_GT: MAP2(x > y ? 1.0f : 0.0f);
    case RT_V_GE: MAP2(x >= y ? 1.0f : 0.0f);
    case RT_V_EQ: MAP2(x == y ? 1.0f : 0.0f);
    case RT_V_NE: MAP2(x != y ? 1.0f : 0.0f);
    case RT_V_AND: MAP2(x != 0 && y != 0 ? 1.0f : 0.0f);
    case RT_V_OR: MAP2(x != 0 || y != 0 ? 1.0f : 0.0f);
    case RT_V_NEG: MAP1(-x);
    case RT_V_ABS: MAP1(fabsf(x));
    case RT_V_EXP: MAP1(rt_expf(x));
    case RT_V_LOG: MAP1(logf(x));
    case RT_V_SQRT: MAP1(sqrtf(x));
    case RT_V_RSQRT: MAP1(1.0f / sqrtf(x));
    case RT_V_TANH: MAP1(rt_tanhf(x));
    case RT_V_ERF: MAP1(erff(x));
    case RT_V_SIGMOID: MAP1(1.0f / (1.0f + rt_expf(-x)));
    case RT_V_COS: MAP1(cosf(x));
    case RT_V_SIN: MAP1(sinf(x));
    case RT_V_NOT: MAP1(x != 0 ? 0.0f : 1.0f);
    case RT_V_SEL:
        for (int64_t k = 0; k < m; k++)
            d[k] = a[k] != 0 ? b[k] : c[k];
        break;
#define PAIR_CASE(i, expr) case RT_V_PAIR + i: PAIR(expr);
    VEC_PAIRS(PAIR_CASE)
    case RT_V_FMA:
        if (ys) {
            const float y1 = *b;
            for (int64_t k = 0; k < m; k++)
                d[k] = fmaf(a[k], y1, c[k]);
        }
        else
            for (int64_t k = 0; k < m; k++)
                d[k] = fmaf(a[k], b[k], c[k]);
        break;
    default: break;
    }
}

/* d = fma((x op1 y) op2 z, w, v) (RT_V_PAIR + pair, then RT_V_FMA): y
 * and z one value each, the pair's result rounded to f32 as when it is
 * a register of its own. */
#define PAIR_FMA(expr)                                                        \
    for (int64_t k = 0; k < m; k++) {                                         \
        const float x = a[k];                                                 \
        d[k] = fmaf((expr), w[k], v[k]);                                      \
    }                                                                         \
    break
static VEC_KERNEL void vec_pair_fma(int pair, float *d, const float *a, float y, float z,
                                    const float *w, const float *v, int64_t m)
{
    switch (pair) {
#define PAIR_FMA_CASE(i, expr) case i: PAIR_FMA(expr);
    VEC_PAIRS(PAIR_FMA_CASE)
    default: break;
    }
}

/* The offsets of the block's rows, from the level indices of its first
 * row (idx, advanced past its last row on return). Within a run of the
 * innermost row level a row is the one before plus that level's stride. */
static VEC_KERNEL void vec_rows(VecBlock *b, int64_t *idx, const int64_t *n)
{
    int outer = b->nlev - 1;
    if (outer <= 1) {             /* one row level (or none): row r at (i + r) * stride */
        for (int p = 0; p < b->nptr; p++) {
            int64_t s = outer ? b->pd[p][1] : 0;
            b->rowoff[p][0] = outer ? idx[0] * s : 0;
            b->step[p] = s;
            b->flat[p] = s == b->cols * b->pd[p][b->nlev] || b->nr == 1;
            b->same[p] = s == 0 || b->nr == 1;
        }
        if (outer)
            idx[0] += b->nr;
        return;
    }
    for (int64_t r = 0; r < b->nr; r++) {
        if (r && idx[outer - 1]) {
            for (int p = 0; p < b->nptr; p++)
                b->rowoff[p][r] = b->rowoff[p][r - 1] + b->pd[p][outer];
        } else {
            for (int p = 0; p < b->nptr; p++) {
                const int64_t *pd = b->pd[p];
                int64_t off = 0;
                for (int l = 0; l < outer; l++)
                    off += idx[l] * pd[1 + l];
                b->rowoff[p][r] = off;
            }
        }
        for (int l = outer - 1; l >= 0; l--) {  /* the next row, in loop order */
            if (++idx[l] < n[l])
                break;
            idx[l] = 0;
        }
    }
    for (int p = 0; p < b->nptr; p++) {
        const int64_t *pd = b->pd[p];
        int64_t step = b->cols * pd[b->nlev], r = 1;
        while (r < b->nr && b->rowoff[p][r] == b->rowoff[p][0] + r * step)
            r++;
        b->flat[p] = r == b->nr;
        for (r = 1; r < b->nr && b->rowoff[p][r] == b->rowoff[p][0]; r++)
            ;
        b->same[p] = r == b->nr;
    }
}

static VEC_KERNEL void vec_block(VecBlock *b, float (*reg)[RT_VEC_B])
{
    const int64_t *in = b->insn;
    int64_t m = b->nr * b->nc;
    float *out = NULL;            /* RT_V_OUT: where the next result goes */
    for (int64_t i = 0; i < b->code[3]; i++, in += 5) {
        int op = (int)in[0], d = (int)in[1];
        switch (op) {
        case RT_V_SCAL: break;
        case RT_V_LD: vec_load(b, (int)in[2], d, reg[d]); break;
        case RT_V_OUT: out = vec_span(b, (int)in[2]); break;
        case RT_V_ST:             /* nothing to move when computed in place (RT_V_OUT) */
            if (in[4] || !b->rp[in[3]] || b->rp[in[3]] != vec_span(b, (int)in[2]))
                vec_store(b, (int)in[2], b->rp[in[3]], (int)in[4], in[4] == 3 ? b->rp[d] : NULL);
            break;
        case RT_V_RED: vec_reduce(b->ptr[in[2]], b->rp[in[3]], m, (int)in[4]); break;
        case RT_V_MOV:
            vec_mov(reg[d], b->rp[in[2]], m, (int)in[3]);
            b->rp[d] = reg[d];
            break;
        default: {
            const int64_t *st = in + 5;
            if (b->fuse[i] == VEC_FUSE_LANES && !out && vec_is_lanes(b, (int)st[2], (int)st[4])) {
                vec_lanes((float *)b->ptr[st[2]] + b->rowoff[st[2]][0] + b->c0, b->rp[in[2]],
                          NULL, b->nr, b->nc, (int)st[4], op, *b->rp[in[3]]);
                i++, in += 5;     /* the store is done */
                break;
            }
            if (b->fuse[i] == VEC_FUSE_LATER && !out) {
                b->pend[d] = in;
                break;
            }
            float *x = b->rp[in[2]], *y = b->rp[in[3]], *z = b->rp[in[4]];
            const int64_t *pr = b->pend[in[2]];
            float *px = pr ? b->rp[pr[2]] : NULL;     /* read before d is set: it may be d */
            b->rp[d] = out ? out : reg[d];
            if (b->fuse[i] == VEC_FUSE_PAIR && pr) {
                vec_pair_fma((int)(pr[0] - RT_V_PAIR), b->rp[d], px, *b->rp[pr[3]], *b->rp[pr[4]],
                             y, z, m);
                b->pend[in[2]] = NULL;
                out = NULL;
                break;
            }
            vec_op(op, b->rp[d], x, y, z, b->scalar[in[2]], b->scalar[in[3]], b->scalar[in[4]], m);
            out = NULL;
            break;
        }
        }
    }
}

/* Whether instruction in reads register r. */
static int vec_reads(const int64_t *in, int64_t r)
{
    switch (in[0]) {
    case RT_V_SCAL: case RT_V_LD: case RT_V_OUT: return 0;
    case RT_V_ST: return in[3] == r || (in[4] == 3 && in[1] == r);
    case RT_V_RED: return in[3] == r;
    case RT_V_MOV: return in[2] == r || (in[3] && in[1] == r);
    default:
        if (in[0] >= RT_V_NEG && in[0] <= RT_V_NOT)
            return in[2] == r;
        if (in[0] >= RT_V_ADD && in[0] <= RT_V_OR)
            return in[2] == r || in[3] == r;
        return in[2] == r || in[3] == r || in[4] == r;
    }
}

/* Whether instruction in writes register r. */
static int vec_writes(const int64_t *in, int64_t r)
{
    return in[0] != RT_V_ST && in[0] != RT_V_RED && in[0] != RT_V_OUT && in[1] == r;
}

/* Pair i, on a block and two values, done later by the multiply-add that
 * reads its d as the multiplicand, when nothing else reads d and nothing
 * in between writes the pair's operands. */
static void vec_fusable_pair(VecBlock *b, int64_t i)
{
    int64_t ni = b->code[3];
    const int64_t *in = b->insn + 5 * i;
    int64_t d = in[1];
    if (!b->scalar[in[3]] || !b->scalar[in[4]] || b->scalar[in[2]])
        return;
    int64_t j = i + 1;
    for (; j < ni && !vec_reads(b->insn + 5 * j, d); j++)
        if (vec_writes(b->insn + 5 * j, d) || vec_writes(b->insn + 5 * j, in[2]))
            return;
    if (j == ni)
        return;
    const int64_t *f = b->insn + 5 * j;
    if (f[0] != RT_V_FMA || f[2] != d || f[3] == d || f[4] == d || b->scalar[f[3]] ||
        b->scalar[f[4]])
        return;
    int64_t k = j + 1;            /* d's later reads: none before it is written */
    if (f[1] != d)
        for (; k < ni && !vec_reads(b->insn + 5 * k, d) && !vec_writes(b->insn + 5 * k, d); k++)
            ;
    if (f[1] == d || k == ni || !vec_reads(b->insn + 5 * k, d))
        b->fuse[i] = VEC_FUSE_LATER, b->fuse[j] = VEC_FUSE_PAIR;
}

/* b->fuse: an add, subtract or multiply by one value whose result only
 * the store after it reads, a += or fused += of it times itself (a
 * register is written before it is read in a block). */
static void vec_fusable(VecBlock *b)
{
    int64_t ni = b->code[3];
    memset(b->fuse, VEC_FUSE_NONE, (size_t)ni);
    for (int64_t i = 0; i < ni; i++) {
        const int64_t *in = b->insn + 5 * i, *st = in + 5;
        int op = (int)in[0];
        int64_t d = in[1];
        if (op >= RT_V_PAIR && op <= RT_V_PAIR_LAST)
            vec_fusable_pair(b, i);
        if (op < RT_V_ADD || op > RT_V_MUL || i + 1 >= ni || !b->scalar[in[3]] ||
            b->scalar[in[2]] || st[0] != RT_V_ST || st[3] != d ||
            (st[4] != 1 && (st[4] != 3 || st[1] != d)))
            continue;
        int64_t k = i + 2;        /* until d is written again */
        for (; k < ni && !vec_reads(b->insn + 5 * k, d); k++)
            if (vec_writes(b->insn + 5 * k, d))
                break;
        if (k == ni || !vec_reads(b->insn + 5 * k, d))
            b->fuse[i] = VEC_FUSE_LANES;
    }
}

/* The blocks of one call, per rows a block (in this instruction set, as
 * the loops it calls, so that the scalar registers' stores are the width
 * of the loads that read them). */
static VEC_KERNEL void vec_blocks(VecBlock *b, const float *scal, const int64_t *n, int64_t per)
{
    int64_t most = per * (b->cols < RT_VEC_B ? b->cols : RT_VEC_B);
    _Alignas(64) float reg[RT_VEC_REGS][RT_VEC_B];
    char whole[RT_VEC_REGS] = {0};    /* read as a block, not as one value */
    memset(b->stored, 0, sizeof b->stored);
    memset(b->scalar, 0, sizeof b->scalar);
    memset(b->rp, 0, sizeof b->rp);   /* an operand field an op does not use reads NULL */
    memset(b->pend, 0, sizeof b->pend);
    const int64_t *in = b->insn;
    for (int64_t i = 0; i < b->code[3]; i++, in += 5) {
        int op = (int)in[0];
        if (op == RT_V_ST)
            b->stored[in[2]] = 1;
        if (op == RT_V_ST || op == RT_V_RED)
            whole[in[3]] = 1;
        if (op == RT_V_ST && in[4] == 3)
            whole[in[1]] = 1;
        else if (op == RT_V_MOV || (op >= RT_V_NEG && op <= RT_V_PAIR_LAST))
            whole[in[2]] = 1;
        if (op == RT_V_SEL || op == RT_V_FMA)
            whole[in[4]] = 1;
        if (op == RT_V_SEL)
            whole[in[3]] = 1;
    }
    in = b->insn;
    for (int64_t i = 0; i < b->code[3]; i++, in += 5)
        if (in[0] == RT_V_SCAL) {
            vec_fill(reg[in[1]], scal[in[2]], whole[in[1]] ? most : 1);
            b->rp[in[1]] = reg[in[1]];
            b->scalar[in[1]] = 1;
        }
    vec_fusable(b);
    int64_t idx[RT_VEC_LEVELS] = {0};
    for (int64_t r = 0; r < b->rows; r += b->nr) {
        b->nr = b->rows - r < per ? b->rows - r : per;
        vec_rows(b, idx, n);
        for (b->c0 = 0; b->c0 < b->cols; b->c0 += b->nc) {
            b->nc = b->cols - b->c0 < RT_VEC_B ? b->cols - b->c0 : RT_VEC_B;
            vec_block(b, reg);
        }
    }
}

/* A program of one level and two instructions on one contiguous f32 run:
 * a fill (d = one value; store d =) or a fold (load; reduce into a
 * float), done without the blocks' machinery, which costs more than these
 * loops when they are short (an accumulator's lanes, then their sum).
 * Returns 0 for any other program. */
static VEC_KERNEL int vec_short(const int64_t *code, void *const *ptr, const float *scal, int64_t n)
{
    if (code[0] != 1 || code[3] != 2)
        return 0;
    const int64_t *in = code + 5 + 2 * code[1], *at = in + 5;
    if (at[3] != in[1])
        return 0;
    if (in[0] == RT_V_SCAL && at[0] == RT_V_ST && at[4] == 0) {
        const int64_t *pd = code + 5 + 2 * at[2];
        if (pd[0] != RT_F32 || pd[1] != 1)
            return 0;
        vec_fill(ptr[at[2]], scal[in[2]], n);
        return 1;
    }
    if (in[0] == RT_V_LD && at[0] == RT_V_RED) {
        const int64_t *pd = code + 5 + 2 * in[2];
        if (pd[0] != RT_F32 || pd[1] != 1)
            return 0;
        vec_reduce(ptr[at[2]], ptr[in[2]], n, (int)at[4]);
        return 1;
    }
    return 0;
}

RT_API void rt_vec(const int64_t *code, void *const *ptr, const float *scal, const int64_t *n)
{
    int nlev = (int)code[0];
    if (n[nlev - 1] <= 0 || vec_short(code, ptr, scal, n[nlev - 1]))
        return;
    VecBlock b;                   /* rowoff is written before it is read */
    b.code = code, b.ptr = ptr, b.nlev = nlev, b.nptr = (int)code[1];
    b.rows = 1, b.cols = n[nlev - 1], b.nr = b.nc = b.c0 = 0;
    b.lin = nlev <= 2;
    for (int p = 0; p < b.nptr; p++)
        b.pd[p] = code + 5 + (int64_t)p * (1 + nlev);
    b.insn = code + 5 + (int64_t)b.nptr * (1 + nlev);
    for (int l = 0; l < nlev - 1; l++)
        b.rows *= n[l] > 0 ? n[l] : 0;
    if (b.rows <= 0 || b.cols <= 0)
        return;
    int64_t per = 1;              /* rows a block (a 32-bit divide: a 64-bit one
                                     cost a third of a short nest's call) */
    if (b.cols <= RT_VEC_B)
        per = (uint32_t)RT_VEC_B / (uint32_t)b.cols;
    if (per > RT_VEC_ROWS)
        per = RT_VEC_ROWS;
    if (b.code[4] && per > b.code[4])
        per = b.code[4];
    if (per > b.rows)
        per = b.rows;
    vec_blocks(&b, scal, n, per);
}
