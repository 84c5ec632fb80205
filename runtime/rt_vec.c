/* runtime/rt_vec.c: vector programs, the JIT's innermost loop nests.
 *
 * The nest's iteration space is rows (every level but the last, in loop
 * order) by columns (the last level). A block is several whole rows when a
 * row is short (code[4] limits them), or a run of one row's columns; its
 * elements sit in each register in loop order, row after row. Every
 * instruction runs over the whole block before the next one starts; each
 * is a plain loop, vectorised by cc (this file is built -O3 -mtune=native
 * -fno-math-errno, the loops for three instruction sets, without
 * contraction: a multiply-add is fused where the program says so, and
 * nowhere else). */
#include "kiln_rt.h"

#include <math.h>
#include <string.h>

#define RT_VEC_PTRS 16
#define RT_VEC_ROWS 64            /* rows a block at most */

/* The loops, each built three times, the one this CPU runs picked at load
 * (gcc's target_clones: AVX-512, AVX2 with FMA, SSE2), so that kiln runs
 * where the CPU, or valgrind's model of it, lacks AVX-512. Out of line:
 * inlined into rt_vec, the loops' pointers were spilled and reloaded. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(KILN_NO_CLONES)
#define VEC_KERNEL                                                            \
    __attribute__((noinline, target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VEC_KERNEL __attribute__((noinline))
#endif

typedef struct {
    const int64_t *code;
    void *const *ptr;
    int nlev, nptr;
    int64_t rows, cols;
    /* the block: rows r0.., nr of them, columns c0.., nc of them */
    int64_t nr, nc, c0;
    int64_t rowoff[RT_VEC_PTRS][RT_VEC_ROWS];   /* element offset of each row */
    char flat[RT_VEC_PTRS];       /* the block's rows follow one another */
    char same[RT_VEC_PTRS];       /* the block's rows are one place */
    char stored[RT_VEC_PTRS];     /* a store goes through the pointer */
    char scalar[RT_VEC_REGS];     /* the register holds one value throughout */
    float *rp[RT_VEC_REGS];       /* where each register's block is */
} VecBlock;

static const int64_t *vec_pointer(const VecBlock *b, int p)
{
    return b->code + 5 + (int64_t)p * (1 + b->nlev);
}

/* Pointer p's elements of the block as one contiguous run of floats, or
 * NULL when they are not (16-bit, strided, or rows apart). */
static float *vec_span(const VecBlock *b, int p)
{
    const int64_t *pd = vec_pointer(b, p);
    if (pd[0] != RT_F32 || pd[b->nlev] != 1 || !b->flat[p])
        return NULL;
    return (float *)b->ptr[p] + b->rowoff[p][0] + b->c0;
}

/* Loads the block into reg, or, when it is contiguous f32 nothing in the
 * nest stores to, points the register at it. */
static VEC_KERNEL void vec_load(VecBlock *b, int p, int d, float *restrict reg)
{
    const int64_t *pd = vec_pointer(b, p);
    int64_t s = pd[b->nlev];                     /* stride along the columns */
    float *run = vec_span(b, p);
    if (run && !b->stored[p]) {
        b->rp[d] = run;
        return;
    }
    b->rp[d] = reg;
    for (int64_t r = 0; r < b->nr; r++, reg += b->nc) {
        int64_t at = b->rowoff[p][r] + b->c0 * s;
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

/* dst[c ..] += each row of v in turn, W lanes at once (two 16-lane chains
 * in flight when W is 32). */
#define VEC_LANES(W, X)                                                       \
    do {                                                                      \
        float acc[W];                                                         \
        for (int j = 0; j < W; j++)                                           \
            acc[j] = dst[c + j];                                              \
        for (int64_t r = 0; r < nr; r++)                                      \
            for (int j = 0; j < W; j++)                                       \
                acc[j] X;                                                     \
        for (int j = 0; j < W; j++)                                           \
            dst[c + j] = acc[j];                                              \
    } while (0)
#define VEC_SUM += v[r * nc + c + j]
#define VEC_FMA = fmaf(v[r * nc + c + j], w[r * nc + c + j], acc[j])

/* Elements stored in loop order: a later one to the same place wins, as in
 * the loop. op: 0 =, 1 +=, 2 max=, 3 += v * w (fused). */
static VEC_KERNEL void vec_store(const VecBlock *b, int p, const float *v, int op,
                                 const float *w)
{
    const int64_t *pd = vec_pointer(b, p);
    int64_t s = pd[b->nlev], nr = b->nr, nc = b->nc;
    if (b->flat[p] && s == 1)     /* one run */
        nc *= nr, nr = 1;
    if ((op == 1 || op == 3) && s == 1 && nr > 1 && b->same[p] && nc % 16 == 0) {
        float *dst = (float *)b->ptr[p] + b->rowoff[p][0] + b->c0;
        int64_t c = 0;
        for (; c + 32 <= nc; c += 32) {           /* lanes summed over rows in registers */
            if (op == 1)
                VEC_LANES(32, VEC_SUM);
            else
                VEC_LANES(32, VEC_FMA);
        }
        for (; c < nc; c += 16) {
            if (op == 1)
                VEC_LANES(16, VEC_SUM);
            else
                VEC_LANES(16, VEC_FMA);
        }
        return;
    }
    for (int64_t r = 0; r < nr; r++, v += nc) {
        float *dst = (float *)b->ptr[p] + b->rowoff[p][r] + b->c0 * s;
        if (op == 3)
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
    case RT_V_PAIR + 0: PAIR((x + y) + z);
    case RT_V_PAIR + 1: PAIR((x + y) - z);
    case RT_V_PAIR + 2: PAIR((x + y) * z);
    case RT_V_PAIR + 3: PAIR((x + y) / z);
    case RT_V_PAIR + 4: PAIR((x - y) + z);
    case RT_V_PAIR + 5: PAIR((x - y) - z);
    case RT_V_PAIR + 6: PAIR((x - y) * z);
    case RT_V_PAIR + 7: PAIR((x - y) / z);
    case RT_V_PAIR + 10: PAIR((x * y) * z);
    case RT_V_PAIR + 11: PAIR((x * y) / z);
    case RT_V_PAIR + 12: PAIR((x / y) + z);
    case RT_V_PAIR + 13: PAIR((x / y) - z);
    case RT_V_PAIR + 14: PAIR((x / y) * z);
    case RT_V_PAIR + 15: PAIR((x / y) / z);
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

/* The offsets of the block's rows, from the level indices of its first
 * row (idx, advanced past its last row on return). Within a run of the
 * innermost row level a row is the one before plus that level's stride. */
static void vec_rows(VecBlock *b, int64_t *idx, const int64_t *n)
{
    int outer = b->nlev - 1;
    if (outer <= 1) {             /* one row level (or none): row r at (i + r) * stride */
        for (int p = 0; p < b->nptr; p++) {
            const int64_t *pd = vec_pointer(b, p);
            int64_t s = outer ? pd[1] : 0, at = outer ? idx[0] * s : 0;
            for (int64_t r = 0; r < b->nr; r++)
                b->rowoff[p][r] = at + r * s;
            b->flat[p] = s == b->cols * pd[b->nlev] || b->nr == 1;
            b->same[p] = s == 0 || b->nr == 1;
        }
        if (outer)
            idx[0] += b->nr;
        return;
    }
    for (int64_t r = 0; r < b->nr; r++) {
        if (r && idx[outer - 1]) {
            for (int p = 0; p < b->nptr; p++)
                b->rowoff[p][r] = b->rowoff[p][r - 1] + vec_pointer(b, p)[outer];
        } else {
            for (int p = 0; p < b->nptr; p++) {
                const int64_t *pd = vec_pointer(b, p);
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
        const int64_t *pd = vec_pointer(b, p);
        int64_t step = b->cols * pd[b->nlev], r = 1;
        while (r < b->nr && b->rowoff[p][r] == b->rowoff[p][0] + r * step)
            r++;
        b->flat[p] = r == b->nr;
        for (r = 1; r < b->nr && b->rowoff[p][r] == b->rowoff[p][0]; r++)
            ;
        b->same[p] = r == b->nr;
    }
}

static void vec_block(VecBlock *b, float (*reg)[RT_VEC_B])
{
    const int64_t *in = vec_pointer(b, b->nptr);
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
            float *x = b->rp[in[2]], *y = b->rp[in[3]], *z = b->rp[in[4]];
            b->rp[d] = out ? out : reg[d];
            vec_op(op, b->rp[d], x, y, z, b->scalar[in[2]], b->scalar[in[3]], b->scalar[in[4]], m);
            out = NULL;
            break;
        }
        }
    }
}

RT_API void rt_vec(const int64_t *code, void *const *ptr, const float *scal, const int64_t *n)
{
    int nlev = (int)code[0];
    VecBlock b;                   /* rowoff is written before it is read */
    b.code = code, b.ptr = ptr, b.nlev = nlev, b.nptr = (int)code[1];
    b.rows = 1, b.cols = n[nlev - 1], b.nr = b.nc = b.c0 = 0;
    for (int l = 0; l < nlev - 1; l++)
        b.rows *= n[l] > 0 ? n[l] : 0;
    if (b.rows <= 0 || b.cols <= 0)
        return;
    int64_t per = b.cols <= RT_VEC_B ? RT_VEC_B / b.cols : 1;   /* rows a block */
    if (per > RT_VEC_ROWS)
        per = RT_VEC_ROWS;
    if (code[4] && per > code[4])
        per = code[4];
    if (per > b.rows)
        per = b.rows;
    int64_t most = per * (b.cols < RT_VEC_B ? b.cols : RT_VEC_B);
    _Alignas(64) float reg[RT_VEC_REGS][RT_VEC_B];
    memset(b.stored, 0, sizeof b.stored);
    memset(b.scalar, 0, sizeof b.scalar);
    memset(b.rp, 0, sizeof b.rp);     /* an operand field an op does not use reads NULL */
    const int64_t *in = vec_pointer(&b, b.nptr);
    char whole[RT_VEC_REGS] = {0};    /* read as a block, not as one value */
    for (int64_t i = 0; i < code[3]; i++, in += 5) {
        int op = (int)in[0];
        if (op == RT_V_ST)
            b.stored[in[2]] = 1;
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
    in = vec_pointer(&b, b.nptr);
    for (int64_t i = 0; i < code[3]; i++, in += 5)
        if (in[0] == RT_V_SCAL) {
            int64_t fill = whole[in[1]] ? most : 1;
            for (int64_t k = 0; k < fill; k++)
                reg[in[1]][k] = scal[in[2]];
            b.rp[in[1]] = reg[in[1]];
            b.scalar[in[1]] = 1;
        }
    int64_t idx[RT_VEC_LEVELS] = {0};
    for (int64_t r = 0; r < b.rows; r += b.nr) {
        b.nr = b.rows - r < per ? b.rows - r : per;
        vec_rows(&b, idx, n);
        for (b.c0 = 0; b.c0 < b.cols; b.c0 += b.nc) {
            b.nc = b.cols - b.c0 < RT_VEC_B ? b.cols - b.c0 : RT_VEC_B;
            vec_block(&b, reg);
        }
    }
}
