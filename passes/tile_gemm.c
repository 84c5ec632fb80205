/* passes/tile_gemm.c: matmul nests become register-blocked calls of the
 * gemm micro-kernel (runtime/core/rt_kernels.c), their weights packed at load
 * into the panels the kernel streams.
 *
 * Contract: every output still adds its K products in k order, as the
 * untiled loop does (rt_gemm's contract: one fused multiply-add each), so
 * the numbers are those of the loop up to that fusing, and the same for
 * any thread count. A weight is packed only when every load of it in the
 * program is an operand rewritten here.
 *
 * A gemm nest:
 *     for i in rows                      (optional: without it, one row)
 *       for j in outputs                 (constant bounds, no marks)
 *         let v = init; for k reduce: v += A[.., i, k] * B[..]   (1 to 8 of
 *                                         them, in any number of k loops)
 *         epilogue: lets and stores (bias, activation, residual, ...)
 * where A's last dim is k (contiguous), the one before it i (A has no
 * row dim without i), B is [.., k, j] (KN: j contiguous, read as it is)
 * or a weight [.., j, k] (NK: packed at load into panels [.., N/P, K, P],
 * so that per k the P outputs' weights are one contiguous vector), the
 * other dims of A and B are fixed during the nest, and the iterations of
 * i and of j are independent (ir_loop_independent): outputs may be
 * computed in any order. It becomes
 *     for jo in 0..N/NR                        panels of outputs
 *       [for mo in 0..M/MB]                    blocks of rows
 *         local T[MB, NR]; T[r, c] = init      per accumulator
 *         [for ko in 0..K/KC]                  blocks of the reduction
 *           [for io in 0..MB/MR]               register tiles
 *             call gemm(T[io*MR +: MR, 0 +: NR], A[rows +: MR, ko*KC +: KC],
 *                       B[panel jo, ko*KC +: KC, 0 +: NR])
 *           call gemm(...) for the last MB % MR rows
 *         for r in 0..MB: for c in 0..NR vector: the epilogue, v = T[r, c]
 *
 * Sizes (from the machine; measured on the 2-core AVX-512 EPYC, x[40,K]
 * by w[N,K]^T, 2 threads: 8 x 32 tiles 400-470 GFLOP/s, 3-4x OpenBLAS;
 * 5 x 64 as fast, 4 x 64 and 12 x 32 slower):
 *   NR  outputs per call: 32 (16 when N is not a multiple of 32; with one
 *       row, the widest of 64, 32, 16 that divides N: four independent
 *       vector chains where a row has nothing else in flight);
 *   MR  rows per call: accs x V / NR, so that a call keeps `accs` vector
 *       accumulators in registers (16 of AVX-512's 32: 8 x 32; rows of 4
 *       vectors 24: 6 x 64, where a 256 x 768 x 768 gemm ran at 438 GFLOP/s
 *       against 4 x 64's 401 on the Intel host, and a stories110M f32
 *       pp256 1.02-1.10x faster; 12 x 32 three times and 4 x 32 made
 *       deepseek-r1-block's 40 rows 7 % slower than 8 x 32 five times);
 *   MB  rows per local tile: M, unless a tile passes L1/2 (one
 *       accumulator's: a fused nest's three tiles of 64 x 64, not 16 x
 *       64, make a stories110M-shaped f32 pp256's q, k and v gemm 7 %
 *       faster on the Zen 4 host); or, for qgemm, which packs its panel of
 *       weights once a call for all its rows, unless the tiles pass L2/2
 *       (64 rows rather than 16 make a stories110M-shaped pp256 1.1-1.4x
 *       faster in q8_0, q4_0 and q4_k_m);
 *   KC  reduction per call: K, unless a block of A (MB x K) and a panel
 *       slice (K x NR) pass L2/2: then the largest divisor of K that fits
 *       (K 8960 with 40 rows: 1792, 1.3x faster than K whole).
 *
 * Algorithm, over the whole program (a weight's layout serves every
 * kernel that reads it):
 * 1. Find the gemm nests, noting why one that looks like it is not.
 * 2. Pick panel widths and decide packing, to a fixed point: a weight is
 *    packed when every load of it is the NK operand of a nest and nothing
 *    views it, in the panel width of the first nest that reads it; a nest
 *    with an NK operand that cannot be packed stays loops, for tile.c.
 * 3. Pack: each packed weight's buffer becomes its panels (Buf.packed),
 *    noted in the program; codegen packs it at open (rt_pack_panels).
 * 4. Rewrite every nest left, as above.
 *
 * A weight held quantized (--weight-dtype q8_0 ...) is never packed: its
 * blocks are read as stored (a GGUF file's, later), or through a view
 * whose rows start at whole blocks (an MXFP4 gpt-oss's gate, every other
 * row of gate_up_proj: ir_whole_blocks), by calls of qgemm
 * (ir.h) over rows [col0 +: NR] of the weight, one call for the block's
 * MB rows (the kernel quantizes its rows of A once a call), K whole or
 * in blocks that are multiples of the weight's block. Such an operand
 * makes the nest's numbers those of qgemm's contract, not of the loop. */
#include "tile.h"

#include <string.h>

#define MAX_ACC 8                       /* accumulators of one nest */
#define GRANULE 16                      /* rt_gemm's vector: NR is a multiple */

typedef struct {
    Var *v;                             /* the accumulator */
    Expr *init;                         /* its let's value */
    Stmt *red;                          /* the reduction loop adding to it */
    Expr *a, *b;                        /* A's load, B's load */
    int nk;                             /* B is [.., j, k]: packed */
    int q;                              /* B is a weight held quantized: qgemm */
} Acc;

typedef struct {
    Kernel *k;
    Block *blk;                         /* holds top at index at */
    int at;
    Stmt *i, *j;                        /* rows (NULL: one row), outputs */
    Acc acc[MAX_ACC];
    int nacc, nprefix;                  /* j's statements up to the last reduction */
    int64_t M, N, nr;
    int ok, q;                          /* q: every operand quantized (qgemm) */
} Nest;

typedef struct {
    Tiler *t;
    Nest *v;
    int n, cap;
    char *called;                       /* by storage id: read by a call already */
    int64_t *nr;                        /* by storage id: panel width, 0: not packed */
} Gm;

static const char NOT_GEMM[] = "";      /* match(): no gemm nest here at all */

/* ---- 1. gemm nests -------------------------------------------------------- */

/* v += x * y with x and y loads, f32. */
static int mul_acc(const Stmt *s)
{
    return s->kind == S_SET && s->op == A_ADD && s->v->type == T_F32 && s->e->kind == E_BIN &&
           s->e->op == B_MUL && s->e->a->kind == E_LOAD && s->e->b->kind == E_LOAD;
}

/* Whether loop j's body holds a reduction loop of products only, one
 * factor depending on j, the other not (an output's weights times a row:
 * not a norm's x * x). */
static int gemm_like(const Stmt *j)
{
    for (int q = 0; q < j->body.n; q++) {
        const Stmt *r = j->body.s[q];
        int all = r->kind == S_LOOP && (r->marks & MARK_REDUCE) && r->body.n > 0;
        for (int x = 0; all && x < r->body.n; x++) {
            const Stmt *s = r->body.s[x];
            all = mul_acc(s) && ir_expr_uses(s->e->a, j->v) != ir_expr_uses(s->e->b, j->v);
        }
        if (all)
            return 1;
    }
    return 0;
}

/* Whether e uses any of the lets of j's body (values that live in j). */
static int uses_inner(const Stmt *j, const Expr *e)
{
    for (int q = 0; q < j->body.n; q++)
        if (j->body.s[q]->kind == S_LET && ir_expr_uses(e, j->body.s[q]->v))
            return 1;
    return 0;
}

/* The one dim of load e whose index uses v (-1: none, -2: several), with
 * coefficient 1 (else -3). */
static int dim_of(const Expr *e, const Var *v)
{
    int dim = -1;
    for (int d = 0; d < e->buf->rank; d++) {
        if (!ir_expr_uses(e->idx[d], v))
            continue;
        int affine;
        if (ir_expr_coef(e->idx[d], v, &affine) != 1 || !affine)
            return -3;
        dim = dim == -1 ? d : -2;
    }
    return dim;
}

/* Whether the dims of load e other than those given are fixed in the nest. */
static int rest_fixed(const Nest *n, const Stmt *red, const Expr *e, int d0, int d1)
{
    for (int d = 0; d < e->buf->rank; d++)
        if (d != d0 && d != d1 &&
            ((n->i && ir_expr_uses(e->idx[d], n->i->v)) || ir_expr_uses(e->idx[d], n->j->v) ||
             ir_expr_uses(e->idx[d], red->v) || uses_inner(n->j, e->idx[d])))
            return 0;
    return 1;
}

/* A[.., i, k]: k the last dim, contiguous; i the one before, or none. */
static const char *check_a(Tiler *t, const Nest *n, const Stmt *red, const Expr *e)
{
    int r = e->buf->rank, dk = dim_of(e, red->v), di = n->i ? dim_of(e, n->i->v) : -1;
    if (dk != r - 1 || e->buf->strides[r - 1] != 1)
        return arena_printf(t->a, "b%d is not read along k, contiguous, in its last dim",
                            ir_storage(e->buf)->id);
    if (n->i && (di < 0 || di != r - 2))
        return arena_printf(t->a, "b%d is not read by rows i in its next-to-last dim",
                            ir_storage(e->buf)->id);
    if (!rest_fixed(n, red, e, dk, di))
        return arena_printf(t->a, "b%d's other indices change in the nest",
                            ir_storage(e->buf)->id);
    return NULL;
}

/* B[.., k, j] (KN) or a weight B[.., j, k] (NK, j exactly the variable). */
static const char *check_b(Tiler *t, const Nest *n, const Stmt *red, const Expr *e, int *nk)
{
    Buf *b = e->buf;
    int r = b->rank, dk = dim_of(e, red->v), dj = dim_of(e, n->j->v);
    if ((n->i && dim_of(e, n->i->v) != -1) || r < 2 || !rest_fixed(n, red, e, dk, dj))
        return arena_printf(t->a, "b%d's indices other than j and k change in the nest",
                            ir_storage(b)->id);
    if (dk == r - 2 && dj == r - 1 && b->strides[r - 1] == 1) {
        *nk = 0;
        return storage_block(ir_storage(b)->store)
                   ? arena_printf(t->a, "b%d is held as %s and read as [.., k, j]: blocks run "
                                  "along j", ir_storage(b)->id,
                                  storage_name(ir_storage(b)->store))
                   : NULL;
    }
    if (dj != r - 2 || dk != r - 1 || b->strides[r - 1] != 1)
        return arena_printf(t->a, "b%d is read neither as [.., k, j] nor as [.., j, k], "
                            "contiguous in its last dim", ir_storage(b)->id);
    *nk = 1;
    if (storage_block(ir_storage(b)->store) && ir_whole_blocks(b))
        return NULL;                    /* quantized: qgemm reads it as stored */
    if ((b->kind != BK_WEIGHT && b->kind != BK_DERIVED) || b->base || b->packed)
        return arena_printf(t->a, "b%d is [.., j, k] and not a weight (which could be "
                            "packed at load)", ir_storage(b)->id);
    if (e->idx[r - 2]->kind != E_VAR || n->j->lo->i != 0 || tile_trip(n->j) != b->dims[r - 2])
        return arena_printf(t->a, "j covers part of weight b%d's rows", b->id);
    return NULL;
}

/* Whether loop's trip count fits the dim of load e it walks (calls take
 * tiles no larger than their buffers). */
static const char *fits(Tiler *t, const Expr *e, const Stmt *loop)
{
    int d = loop ? dim_of(e, loop->v) : -1;
    if (d < 0 || tile_trip(loop) <= e->buf->dims[d])
        return NULL;
    return arena_printf(t->a, "i%d runs %lld times over dim %d of b%d, which has %lld",
                        loop->v->id, (long long)tile_trip(loop), d, ir_storage(e->buf)->id,
                        (long long)e->buf->dims[d]);
}

/* One statement `v += x * y` of reduction red: its accumulator. */
static const char *add_acc(Tiler *t, Nest *n, Stmt *red, Stmt *s)
{
    Acc *c = NULL;
    for (int q = 0; q < n->nacc; q++)
        if (n->acc[q].v == s->v)
            c = &n->acc[q];
    if (!c)
        return "it accumulates into a scalar not declared just before";
    if (c->red)
        return arena_printf(t->a, "v%d accumulates twice", s->v->id);
    int jx = ir_expr_uses(s->e->a, n->j->v), jy = ir_expr_uses(s->e->b, n->j->v);
    if (jx == jy)
        return "a product is not a row's value times an output's";
    c->red = red;
    c->a = jx ? s->e->b : s->e->a;
    c->b = jx ? s->e->a : s->e->b;
    const char *why = check_a(t, n, red, c->a);
    if (!why && ir_storage(c->a->buf)->store != ST_F32)     /* the kernel widens only B */
        why = arena_printf(t->a, "b%d, the rows' operand, is held as %s",
                           ir_storage(c->a->buf)->id, storage_name(ir_storage(c->a->buf)->store));
    why = why ? why : check_b(t, n, red, c->b, &c->nk);
    c->q = !why && c->nk && storage_block(ir_storage(c->b->buf)->store);
    if (c->q && (red->lo->i % storage_block(ir_storage(c->b->buf)->store) ||
                 tile_trip(red) % storage_block(ir_storage(c->b->buf)->store)))
        why = arena_printf(t->a, "k covers part of a block of b%d, held as %s",
                           ir_storage(c->b->buf)->id,
                           storage_name(ir_storage(c->b->buf)->store));
    why = why ? why : fits(t, c->a, red);
    why = why ? why : fits(t, c->a, n->i);
    why = why ? why : fits(t, c->b, red);
    return why ? why : fits(t, c->b, n->j);
}

/* j's body: accumulator lets and their reductions, then lets and stores. */
static const char *check_body(Tiler *t, Nest *n)
{
    Stmt *j = n->j;
    for (int q = 0; q < j->body.n; q++)
        if (j->body.s[q]->kind == S_LOOP)
            n->nprefix = q + 1;
    for (int q = 0; q < j->body.n; q++) {
        Stmt *s = j->body.s[q];
        if (q >= n->nprefix) {
            if (s->kind != S_LET && s->kind != S_STORE)
                return "its epilogue holds more than lets and stores";
        } else if (s->kind == S_LET) {
            if (s->v->type != T_F32 || n->nacc == MAX_ACC || uses_inner(j, s->e))
                return "it declares scalars other than up to 8 f32 accumulators";
            n->acc[n->nacc++] = (Acc){s->v, s->e, NULL, NULL, NULL, 0, 0};
        } else if (s->kind != S_LOOP || s->marks != MARK_REDUCE) {
            return "a statement before its epilogue is neither a let nor a reduction";
        } else if (!tile_const_loop(s)) {
            return "a reduction's bounds are known only at run time";
        } else {
            for (int x = 0; x < s->body.n; x++) {
                const char *why = mul_acc(s->body.s[x]) ? add_acc(t, n, s, s->body.s[x])
                                                         : "a reduction holds more than v += x * y";
                if (why)
                    return why;
            }
        }
    }
    for (int q = 0; q < n->nacc; q++)
        if (!n->acc[q].red)
            return arena_printf(t->a, "v%d accumulates nothing", n->acc[q].v->id);
    return NULL;
}

/* The panel width for M rows of N outputs: 0 when N is not a multiple of
 * GRANULE. */
static int64_t pick_nr(Tiler *t, int64_t M, int64_t N)
{
    for (int64_t nr = 4 * GRANULE; nr >= GRANULE; nr /= 2) {
        int64_t regs = nr > t->V ? nr / t->V : 1;      /* vector registers per row */
        int fits = M == 1 ? regs <= t->accs / 2 : t->accs / regs >= 4 && nr <= 2 * GRANULE;
        if (N % nr == 0 && fits)
            return nr;
    }
    return N % GRANULE == 0 ? GRANULE : 0;
}

/* The panel width of a nest whose every operand is quantized: qgemm
 * quantizes its rows of A at every call, which costs about what a
 * 64-wide panel's int8 products do, so the widest panel that still leaves
 * 2 panels a core (4 a core: pp256 of a stories110M shape 6-8 % slower in
 * q8_0 and q4_0; 1 a core: 3 panels of 768 outputs on 2 cores, decode
 * 5-15 % and pp256 3-12 % slower). */
static int64_t pick_q_nr(Tiler *t, int64_t N)
{
    int64_t best = 0;
    for (int64_t nr = 256; nr >= GRANULE; nr /= 2)
        if (N % nr == 0) {
            if (N / nr >= 2 * t->cores)
                return nr;
            best = nr;
        }
    return best;
}

/* Whether blk->s[at] starts a gemm nest: NULL, NOT_GEMM, or why not. */
static const char *match(Tiler *t, Block *blk, int at, Nest *n)
{
    Stmt *s = blk->s[at];
    memset(n, 0, sizeof *n);
    n->k = t->k, n->blk = blk, n->at = at;
    int plain = tile_const_loop(s) && !s->marks;
    if (plain && s->body.n == 1 && tile_const_loop(s->body.s[0]) && !s->body.s[0]->marks &&
        gemm_like(s->body.s[0]))
        n->i = s, n->j = s->body.s[0];
    else if (plain && gemm_like(s))
        n->j = s;
    else
        return NOT_GEMM;
    n->M = n->i ? tile_trip(n->i) : 1;
    n->N = tile_trip(n->j);
    const char *why = check_body(t, n);
    if (why)
        return why;
    int allq = 1;
    for (int q = 0; q < n->nacc; q++)
        allq &= n->acc[q].q;
    n->q = allq;
    if (!(n->nr = allq ? pick_q_nr(t, n->N) : pick_nr(t, n->M, n->N)))
        return arena_printf(t->a, "%lld outputs are not a multiple of %d", (long long)n->N,
                            GRANULE);
    if ((n->i && !ir_loop_independent(t->a, n->i, &why)) ||
        !ir_loop_independent(t->a, n->j, &why))
        return arena_printf(t->a, "its outputs depend on one another: %s", why);
    return NULL;
}

static void find(Gm *g, Block *blk)
{
    for (int q = 0; q < blk->n; q++) {
        Nest n;
        const char *why = match(g->t, blk, q, &n);
        if (!why) {
            n.ok = 1;
            ARR_PUSH(g->t->a, g->v, g->n, g->cap, n);
        } else if (why != NOT_GEMM) {
            tile_note(g->t, n.j->v, NULL, NULL, "gemm @ kept as loops: %s", why);
        }
        if (why == NOT_GEMM) {
            find(g, &blk->s[q]->body);
            find(g, &blk->s[q]->els);
        }
    }
}

/* ---- 2. packing --------------------------------------------------------- */

/* Why weight b cannot be packed: another buffer views it, or a call
 * (tiled already) reads it as it is. */
static const char *unpackable(Gm *g, Buf *b)
{
    Prog *p = g->t->p;
    for (int i = 0; i < p->nbufs; i++)
        if (p->bufs[i]->base == b)
            return "is viewed by another buffer";
    return g->called[b->id] ? "is read by a call already" : NULL;
}

static void called_stmt(Stmt *s, void *ctx)
{
    Gm *g = ctx;
    for (int i = 0; i < s->ntiles; i++)
        g->called[ir_storage(s->tiles[i].buf)->id] = 1;
}

static void refuse(Gm *g, Nest *n, const char *fmt, int id, const char *why)
{
    g->t->k = n->k;
    tile_note(g->t, n->j->v, NULL, NULL, fmt, id, why);
    n->ok = 0;
}

/* A weight's layout imposed by another shape variant of the program
 * (Tiler.panels, passes/variants.c): the nest takes its panel width, or
 * why it cannot. */
static const char *imposed(Gm *g, Nest *n, const Buf *b)
{
    int h = ir_held_index(g->t->m, b);
    if (!g->t->panels || h < 0)
        return NULL;
    if (h >= g->t->npanels)
        KILN_BUG("b%d is held as %d, past the %d imposed layouts", b->id, h, g->t->npanels);
    int64_t want = g->t->panels[h];
    if (want < 0)
        return "is kept as it is by another shape variant of the program";
    if (want % GRANULE || n->N % want)
        return arena_printf(g->t->a, "is packed in panels of %lld by another shape variant",
                            (long long)want);
    n->nr = want;
    return NULL;
}

/* The panel width of every weight some nest reads as NK (the first such
 * nest's), and each nest's own: that of its NK weights, which must agree. */
static void decide(Gm *g)
{
    for (int x = 0; x < g->n; x++)
        for (int q = 0; g->v[x].ok && q < g->v[x].nacc; q++) {
            Buf *b = g->v[x].acc[q].b->buf;
            int nk = g->v[x].acc[q].nk && !g->v[x].acc[q].q;
            const char *why = nk ? unpackable(g, b) : NULL;
            if (!why && nk)
                why = imposed(g, &g->v[x], b);
            if (why)
                refuse(g, &g->v[x], "gemm @ kept as loops: weight b%d %s", b->id, why);
        }
    for (int x = 0; x < g->n; x++)
        for (int q = 0; g->v[x].ok && q < g->v[x].nacc; q++)
            if (g->v[x].acc[q].nk && !g->v[x].acc[q].q && !g->nr[g->v[x].acc[q].b->buf->id])
                g->nr[g->v[x].acc[q].b->buf->id] = g->v[x].nr;
    /* An operand packed for another nest, read here as rows (A) or as
     * [k, j]: this nest stays loops, whose loads then read the panels. */
    for (int x = 0; x < g->n; x++)
        for (int q = 0; g->v[x].ok && q < g->v[x].nacc; q++) {
            const Acc *c = &g->v[x].acc[q];
            Buf *ab = ir_storage(c->a->buf), *bb = ir_storage(c->b->buf);
            if (g->nr[ab->id])
                refuse(g, &g->v[x], "gemm @ kept as loops: b%d %s", ab->id,
                       "is packed for another gemm, and read by rows here");
            else if (!c->nk && g->nr[bb->id])
                refuse(g, &g->v[x], "gemm @ kept as loops: b%d %s", bb->id,
                       "is packed for another gemm, and read as [k, j] here");
        }
    for (int x = 0; x < g->n; x++) {
        Nest *n = &g->v[x];
        int64_t nr = 0;
        for (int q = 0; n->ok && q < n->nacc; q++) {
            Buf *b = n->acc[q].b->buf;
            if (!n->acc[q].nk || n->acc[q].q)
                continue;
            if (nr && g->nr[b->id] != nr)
                refuse(g, n, "gemm @ kept as loops: weight b%d is packed in panels of %s",
                       b->id, arena_printf(g->t->a, "%lld, another operand's in %lld",
                                           (long long)g->nr[b->id], (long long)nr));
            nr = g->nr[b->id];
        }
        if (nr)
            n->nr = nr;
    }
}

/* A weight [.., N, K] becomes panels [.., N/P, K, P]. */
static void pack(Tiler *t, Buf *b, int64_t nr)
{
    int r = b->rank;
    int64_t n = b->dims[r - 2], k = b->dims[r - 1];
    b->dims[r - 2] = n / nr;
    b->dims[r - 1] = k;
    b->dims[r] = nr;
    b->rank = r + 1;
    b->packed = 1;
    ir_buf_contiguous(b);
    ir_note(t->a, &t->p->notes, "tile: %sweight b%d %%%d packed at %s in panels of %lld outputs: "
            "[%lld, %lld] as [%lld, %lld, %lld], per k the %lld outputs' weights side by side, so "
            "that a gemm call streams one panel with one vector load per k",
            b->kind == BK_DERIVED ? "derived " : "", b->id,
            b->node ? b->node->id : -1, b->kind == BK_DERIVED ? "open" : "load", (long long)nr,
            (long long)n, (long long)k,
            (long long)(n / nr), (long long)k, (long long)nr, (long long)nr);
}

/* e with every load of a weight packed just now ([.., n, k], its rank
 * before packing) reading the same element of the panels:
 * [.., n / P, k, n % P] (an embedding table that is also a classifier's
 * weight gathers its rows that way). */
static Expr *repack(Expr *e, void *ctx)
{
    Gm *g = ctx;
    Arena *a = g->t->a;
    switch (e->kind) {
    case E_INT:
    case E_FLT:
    case E_VAR: return e;
    case E_LOAD: {
        Buf *b = e->buf;
        int64_t nr = g->nr[b->id];
        int r = nr ? b->rank - 1 : b->rank;
        Expr *idx[KILN_MAX_RANK];
        for (int d = 0; d < r; d++)
            idx[d] = repack(e->idx[d], ctx);
        if (nr) {
            Expr *n = idx[r - 2];
            idx[r - 2] = e_bin(a, B_DIV, n, e_int(a, nr));
            idx[r] = e_bin(a, B_MOD, n, e_int(a, nr));
        }
        return e_load(a, b, idx);
    }
    case E_BIN: return e_bin(a, (BinOp)e->op, repack(e->a, ctx), repack(e->b, ctx));
    case E_UN: return e_un(a, (UnOp)e->op, repack(e->a, ctx));
    case E_SEL: return e_sel(a, repack(e->a, ctx), repack(e->b, ctx), repack(e->c, ctx));
    }
    KILN_BUG("bad expr kind %d", e->kind);
}

static void repack_stmt(Stmt *s, void *ctx) { ir_stmt_map(s, repack, ctx); }

/* ---- 4. the rewrite ------------------------------------------------------- */

typedef struct {
    Tiler *t;
    Nest *n;
    Stmt *jo;
    Expr *row0, *col0;                  /* the block's first row, the panel's first output */
    int64_t mb, mr;
    Buf *tile[MAX_ACC];                 /* T, per accumulator */
} Rw;

/* `for v in 0..n` appended to blk with its body returned, v in *v; no
 * loop when n is 1 (*v is 0). */
static Block *loop_or_one(Tiler *t, Block *blk, int64_t n, int marks, Expr **v)
{
    if (n == 1) {
        *v = e_int(t->a, 0);
        return blk;
    }
    Stmt *s = s_loop(t->a, t->k, blk, e_int(t->a, 0), e_int(t->a, n), marks);
    *v = e_var(t->a, s->v);
    return &s->body;
}

/* for r in 0..MB: for c in 0..NR vector, appended to blk: the body, with
 * i and j's values in the block (*at holds 2 maps, 1 without rows). */
static Block *each_output(Rw *w, Block *blk, Expr **r, Expr **c, Var **from, Expr **to,
                          int *nmap)
{
    Arena *a = w->t->a;
    Block *in = loop_or_one(w->t, blk, w->mb, 0, r);
    in = loop_or_one(w->t, in, w->n->nr, MARK_VECTOR, c);
    *nmap = 0;
    from[*nmap] = w->n->j->v, to[(*nmap)++] = e_add(a, w->col0, *c);
    if (w->n->i)
        from[*nmap] = w->n->i->v, to[(*nmap)++] = e_add(a, w->row0, *r);
    return in;
}

/* T[r, c] = init, i and j those of the element. */
static void init_tiles(Rw *w, Block *blk)
{
    Arena *a = w->t->a;
    Var *from[2];
    Expr *to[2], *r, *c;
    int nmap;
    Block *in = each_output(w, blk, &r, &c, from, to, &nmap);
    for (int q = 0; q < w->n->nacc; q++) {
        Expr *e = w->n->acc[q].init, *ix[2] = {r, c};
        for (int x = 0; x < nmap; x++)
            e = ir_subst(a, e, from[x], to[x]);
        s_store(a, in, w->tile[q], ix, A_SET, e);
    }
}

/* j's epilogue per element, each accumulator read from T[r, c]. */
static void epilogue(Rw *w, Block *blk)
{
    Arena *a = w->t->a;
    Nest *n = w->n;
    Var *from[MAX_ACC + 2];
    Expr *to[MAX_ACC + 2], *r, *c;
    int nmap;
    Block *in = each_output(w, blk, &r, &c, from, to, &nmap);
    for (int q = 0; q < n->nacc; q++) {
        Expr *ix[2] = {r, c};
        from[nmap] = n->acc[q].v, to[nmap++] = e_load(a, w->tile[q], ix);
    }
    Block tail = {n->j->body.s + n->nprefix, n->j->body.n - n->nprefix, 0};
    Block out = ir_block_clone(a, w->t->p, w->t->k, &tail, from, to, nmap);
    for (int q = 0; q < out.n; q++)
        ir_push(a, in, out.s[q]);
}

/* A's tile: rows from row (m of them, or its one row), k from k0 (kc). */
static Tile tile_a(Rw *w, const Acc *c, Expr *row, int64_t m, Expr *k0, int64_t kc)
{
    Arena *a = w->t->a;
    const Expr *e = c->a;
    int r = e->buf->rank;
    Tile t = {e->buf, arena_alloc(a, sizeof(Expr *) * (size_t)r), {0}};
    for (int d = 0; d < r; d++) {
        Expr *x = ir_subst(a, e->idx[d], c->red->v, k0);
        t.idx[d] = w->n->i ? ir_subst(a, x, w->n->i->v, row) : x;
        t.ext[d] = d == r - 1 ? kc : d == r - 2 && w->n->i ? m : 1;
    }
    return t;
}

/* B's tile: [.., k0 +: kc, col0 +: NR] as it is, or a packed weight's
 * [.., jo, k0 +: kc, 0 +: NR] (its buffer has the panels' rank already). */
static Tile tile_b(Rw *w, const Acc *c, Expr *k0, int64_t kc)
{
    Arena *a = w->t->a;
    const Expr *e = c->b;
    Buf *b = e->buf;
    int r = c->nk && !c->q ? b->rank - 1 : b->rank;  /* the load's indices */
    Tile t = {b, arena_alloc(a, sizeof(Expr *) * (size_t)b->rank), {0}};
    for (int d = 0; d < b->rank; d++)
        t.ext[d] = 1;
    for (int d = 0; d < r - 2; d++)
        t.idx[d] = e->idx[d];
    if (c->q) {                                      /* W [.., col0 +: NR, k0 +: kc] */
        t.idx[r - 2] = ir_subst(a, e->idx[r - 2], w->n->j->v, w->col0);
        t.idx[r - 1] = ir_subst(a, e->idx[r - 1], c->red->v, k0);
        t.ext[r - 2] = w->n->nr;
        t.ext[r - 1] = kc;
    } else if (c->nk) {
        t.idx[r - 2] = e_var(a, w->jo->v);
        t.idx[r - 1] = ir_subst(a, e->idx[r - 1], c->red->v, k0);
        t.idx[r] = e_int(a, 0);
        t.ext[r - 1] = kc;
        t.ext[r] = w->n->nr;
    } else {
        t.idx[r - 2] = ir_subst(a, e->idx[r - 2], c->red->v, k0);
        t.idx[r - 1] = ir_subst(a, e->idx[r - 1], w->n->j->v, w->col0);
        t.ext[r - 2] = kc;
        t.ext[r - 1] = w->n->nr;
    }
    return t;
}

/* The calls of reduction red for m rows from rel (of the block): of
 * gemm, or (quant) of qgemm. */
static void calls(Rw *w, Block *blk, const Stmt *red, Expr *rel, int64_t m, Expr *k0,
                  int64_t kc, int quant)
{
    Arena *a = w->t->a;
    Expr *row = e_add(a, w->row0, rel);
    for (int q = 0; q < w->n->nacc; q++) {
        const Acc *c = &w->n->acc[q];
        if (c->red != red || c->q != quant)
            continue;
        Tile tiles[3] = {{w->tile[q], (Expr *[]){rel, e_int(a, 0)}, {m, w->n->nr}},
                         tile_a(w, c, row, m, k0, kc), tile_b(w, c, k0, kc)};
        s_call(a, blk, quant ? CALL_QGEMM : CALL_GEMM, tiles, 3);
    }
}

/* The block of the quantized weights reduction red reads (the largest;
 * 0: none); *plain: whether it reads others. */
static int quant_block(const Rw *w, const Stmt *red, int *plain)
{
    int block = 0;
    *plain = 0;
    for (int q = 0; q < w->n->nacc; q++) {
        const Acc *c = &w->n->acc[q];
        int b = c->red == red && c->q ? storage_block(ir_storage(c->b->buf)->store) : 0;
        block = b > block ? b : block;
        *plain |= c->red == red && !c->q;
    }
    return block;
}

/* The reduction's block: K whole, unless the block of A and the panel
 * slice it streams per call pass L2/2: the largest divisor that fits, if
 * it is not much smaller than that. */
static int64_t pick_kc(Rw *w, int64_t K)
{
    int64_t fit = w->t->l2 / 2 / ((w->mb + w->n->nr) * 4);
    if (K <= fit)
        return K;
    for (int64_t kc = fit; kc >= fit / 2 && kc >= 64; kc--)
        if (K % kc == 0)
            return kc;
    return K;
}

/* Reduction red's calls, blocked: returns its KC. */
static int64_t reduction(Rw *w, Block *blk, const Stmt *red)
{
    Arena *a = w->t->a;
    int64_t K = tile_trip(red), kc = pick_kc(w, K), full = w->mb / w->mr, rest = w->mb % w->mr;
    int plain, block = quant_block(w, red, &plain);
    if (block && kc % block)
        kc = K;
    Expr *ko, *io;
    Block *kb = loop_or_one(w->t, blk, K / kc, 0, &ko);
    Expr *k0 = e_add(a, e_mul(a, ko, e_int(a, kc)), e_int(a, red->lo->i));
    if (!plain)
        full = rest = 0;
    if (full) {
        Block *ib = loop_or_one(w->t, kb, full, 0, &io);
        calls(w, ib, red, e_mul(a, io, e_int(a, w->mr)), w->mr, k0, kc, 0);
    }
    if (rest)
        calls(w, kb, red, e_int(a, full * w->mr), rest, k0, kc, 0);
    if (block)                          /* qgemm: the block's rows in one call */
        calls(w, kb, red, e_int(a, 0), w->mb, k0, kc, 1);
    return kc;
}

/* Rows per local tile: M, unless a tile passes L1/2 (a call of rt_gemm
 * walks one accumulator's rows once, so the others' tiles need not stay
 * there), or the tiles of all the accumulators pass L2/2 for a kernel
 * that prepares its operands once a call (qgemm, AMX); then the largest
 * divisor of M that fits, a multiple of MR if one is. */
static int64_t pick_mb(Tiler *t, const Nest *n, int64_t mr, int l2)
{
    int64_t fit = (l2 ? t->l2 : t->l1) / 2 / (n->nr * 4 * (l2 ? n->nacc : 1)), best = 1;
    if (n->M <= fit)
        return n->M;
    for (int64_t mb = fit; mb > 1; mb--) {
        if (n->M % mb)
            continue;
        if (mb % mr == 0)
            return mb;
        if (best == 1)
            best = mb;
    }
    return best;
}

/* Whether the nest's calls go to bf16 pair products (AMX tiles or
 * vdpbf16ps): the machine has them, every B is bf16 and a call would have
 * the 16 rows or more they take. */
static int amx_nest(const Tiler *t, const Nest *n)
{
    int all = t->amx && !n->q && n->M >= 16;
    for (int q = 0; all && q < n->nacc; q++)
        all = ir_storage(n->acc[q].b->buf)->store == ST_BF16;
    return all;
}

static void rewrite(Tiler *t, Nest *n)
{
    Arena *a = t->a;
    Rw w = {t, n, NULL, NULL, NULL, 0, 0, {0}};
    int64_t regs = n->nr > t->V ? n->nr / t->V : 1, mr = (regs == 4 ? t->accs4 : t->accs) / regs;
    int amx = amx_nest(t, n);
    w.mr = mr < 1 ? 1 : mr < n->M ? mr : n->M;     /* < 1: panels of qgemm alone */
    w.mb = pick_mb(t, n, w.mr, n->q || amx);
    if (amx)                            /* one call a block: its rows prepared once */
        w.mr = w.mb;
    Block none = {NULL, 0, 0};
    w.jo = s_loop(a, t->k, &none, e_int(a, 0), e_int(a, n->N / n->nr), 0);
    w.col0 = e_add(a, e_mul(a, e_var(a, w.jo->v), e_int(a, n->nr)), e_int(a, n->j->lo->i));
    Expr *mo;
    Block *body = loop_or_one(t, &w.jo->body, n->M / w.mb, 0, &mo);
    w.row0 = e_add(a, e_mul(a, mo, e_int(a, w.mb)), e_int(a, n->i ? n->i->lo->i : 0));
    int64_t dims[2] = {w.mb, n->nr};
    for (int q = 0; q < n->nacc; q++)
        w.tile[q] = s_local(a, t->p, body, DT_F32, 2, dims)->buf;
    init_tiles(&w, body);
    const char *kcs = "";
    for (int q = 0; q < n->nprefix; q++) {
        Stmt *red = n->j->body.s[q];
        if (red->kind != S_LOOP)
            continue;
        int64_t K = tile_trip(red), kc = reduction(&w, body, red);
        if (kc < K)
            kcs = arena_printf(a, "%s; K %lld in blocks of %lld (A %lld x %lld and a panel slice "
                               "pass L2/2 = %s)", kcs, (long long)K, (long long)kc,
                               (long long)w.mb, (long long)K, tile_kib(t, t->l2 / 2));
    }
    epilogue(&w, body);
    n->blk->s[n->at] = w.jo;
    t->kn[t->k->id].changed = 1;
    int nq = 0;
    for (int q = 0; q < n->nacc; q++)
        nq += n->acc[q].q;
    const char *rows = w.mb < n->M ? arena_printf(a, ", rows in blocks of %lld (tiles within "
                                                  "L%d/2)", (long long)w.mb, n->q || amx ? 2 : 1) : "";
    if (n->q)
        tile_note(t, w.jo->v, NULL, NULL,
                  "gemm %lld x %lld: calls of qgemm on weights held quantized, as stored, "
                  "outputs in panels of %lld (@)%s%s; every output adds its blocks' products "
                  "in order (qgemm's contract)", (long long)n->M, (long long)n->N,
                  (long long)n->nr, rows, kcs);
    else if (amx)
        tile_note(t, w.jo->v, NULL, NULL,
                  "gemm %lld x %lld: calls of gemm on %lld x %lld blocks, AMX tiles or "
                  "AVX512-BF16 where the program runs on them (rows rounded to bf16, products "
                  "added in pairs: "
                  "docs/16-bit-weights.md), outputs in panels of %lld (@)%s%s",
                  (long long)n->M, (long long)n->N, (long long)w.mb, (long long)n->nr,
                  (long long)n->nr, rows, kcs);
    else
        tile_note(t, w.jo->v, NULL, NULL,
                  "gemm %lld x %lld: calls of gemm on %lld x %lld register tiles (%lld vector "
                  "accumulators), outputs in panels of %lld (@)%s%s; every output adds its k "
                  "products in order%s", (long long)n->M, (long long)n->N, (long long)w.mr,
                  (long long)n->nr, (long long)(w.mr * regs), (long long)n->nr, rows, kcs,
                  nq ? arena_printf(a, " (%d operand%s held quantized: qgemm)", nq,
                                    nq == 1 ? "" : "s") : "");
}

/* ---- the whole program --------------------------------------------------- */

void tile_gemms(Tiler *t)
{
    Prog *p = t->p;
    Gm g = {t, NULL, 0, 0, NULL, NULL};
    size_t nb = (size_t)p->nbufs + 1;
    g.called = arena_alloc(t->a, nb);
    g.nr = arena_alloc(t->a, sizeof *g.nr * nb);
    for (int i = 0; i < p->nkernels; i++) {
        t->k = p->kernels[i];
        find(&g, &t->k->body);
        ir_block_walk(&t->k->body, called_stmt, &g);
    }
    decide(&g);
    int nbufs = p->nbufs, packed = 0;
    for (int i = 0; i < nbufs; i++)
        if (g.nr[i]) {
            pack(t, p->bufs[i], g.nr[i]);
            packed = 1;
        }
    for (int i = 0; packed && i < p->nkernels; i++)
        ir_block_walk(&p->kernels[i]->body, repack_stmt, &g);
    for (int x = 0; x < g.n; x++)
        if (g.v[x].ok) {
            t->k = g.v[x].k;
            rewrite(t, &g.v[x]);
        }
}
