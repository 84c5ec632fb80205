/* passes/tile.c: split and reorder the loops of matmul-like and reduction
 * kernels for vector lanes, registers and caches.
 *
 * Contract: the same values, summed in an order fixed here at compile
 * time (so bit-identical for any thread count; within rounding of the
 * untiled order). Generated C is built without -ffast-math, so gcc never
 * vectorises `acc += x[k] * w[k]` itself: that would reassociate the sum.
 * Splitting the sum into L independent lanes, acc[l] += x[ko*L + l] *
 * w[ko*L + l], each lane summed in order and the lanes summed in order at
 * the end, is a fixed order gcc can vectorise: the lane loop is marked
 * vector (`#pragma omp simd`). Loops the pass cannot split stay as they
 * were, with a note saying why.
 *
 * Sizes, from cx->machine (machine_default in golden tests):
 *   V  = vector_bytes / 4 f32 lanes per vector register;
 *   L  = max(2V, 16) lanes per accumulator: two vectors, or one 64-byte
 *        cache line, whichever is more (at trip counts <= 16 gcc unrolls the
 *        lane loop completely before it vectorises, and then it does not);
 *   R  = 8V / L rows of x per weight load (at least 1), so R * L/V = 8
 *        vector accumulations are in flight: 2 FMA pipes x 4 cycles;
 *   NB = output features per cache block, the largest divisor of N whose
 *        weight rows fit in half of L2 (the other half holds the rows of x),
 *        a multiple of L if one is, and leaving a block for every core.
 * Measured on a 2-core AMD EPYC (AVX-512, 1 MiB L2) for x[40,1536] times
 * w[8960,1536]^T, one thread: 259 ms as lowered; 34 ms with lanes
 * (L = 32); 17 ms with lanes and N blocks of 64; 9.7 ms with lanes, N
 * blocks and R = 4 rows; without the vector mark, gcc gives 131 ms at
 * L = 16, R = 4. Blocking N over all M rows (order jo, i, j, k) reads each
 * weight from memory once instead of M times; the rows of x (240 KiB)
 * stay in L2.
 *
 * Algorithm (matmul nests into gemm calls first, tile_gemm.c), per kernel:
 * 1. Find matmul-like nests: a loop i (M rows, constant bounds) whose body
 *    is one loop j (N features, constant bounds) whose body holds
 *    reduction loops of constant bounds that load a weight, something
 *    indexed by j but not by i, so each weight element is used M times;
 *    and i's iterations are independent (ir_loop_independent).
 * 2. Cache blocking, when M > 1 and the N weight rows exceed L2/2: split
 *    j into jo, ji (ji in 0..NB) and move jo outermost: for jo: for i:
 *    for ji. Legal because i's iterations are independent.
 * 3. Register blocking, when the largest divisor R of M that is at most
 *    R above is >= 2: unroll i by R and jam: the R copies of j's body are
 *    zipped statement by statement, loops of equal bounds merged into one
 *    loop with zipped bodies, so each weight load feeds R accumulators.
 * 4. Lane split every reduction loop that has a constant trip T >= 2L, a
 *    body of lets, stores and accumulations (acc += e or acc max= e of f32
 *    scalars declared outside it, never read in it), loads and stores
 *    that walk the reduced axis contiguously (index k + c in a dim of
 *    stride 1) and stores to one place per iteration:
 *        local A[L]; for l vector: A[l] = 0 (or -inf)
 *        for ko in 0..T/L reduce: for l in 0..L vector: body(k = ko*L + l),
 *            its accumulations going to A[l]
 *        for l in 0..L reduce: acc += A[l]          (fixed order)
 *        for k in T/L*L..T reduce: body             (the tail, if any)
 * 5. Lanes across outputs, for reductions that walk their axis with a
 *    stride (b[k, j] of a matmul, v[k, h, j] of attention) or are too
 *    short to split: when the loop j around them is independent and
 *    walks its outputs contiguously, split j into jo and L lanes and give
 *    each statement of j's body its own lane loop (inside the reduction
 *    loops, for those), j's scalars becoming local arrays:
 *        for jo: local A[L]; for l vector: A[l] = init
 *                for k reduce: for l vector: A[l] += f(jo*L + l, k)
 *                for l vector: out[jo*L + l] = A[l]
 *    Every sum keeps its order; L outputs advance together. When the body
 *    has fewer accumulators than R, the lanes widen (up to R times) so as
 *    many vector accumulations are in flight.
 * 6. Renumber the kernel's variables and write the notes, which name
 *    loops by their variables after renumbering. */
#include "tile.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#define MAX_R 8                          /* rows jammed at most */
#define MAX_ACC 16                       /* accumulators of one loop */

/* ---- notes -------------------------------------------------------------- */

void tile_note(Tiler *t, const Var *v0, const Var *v1, const Var *v2, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    Pending n = {arena_strdup(t->a, buf), {v0, v1, v2}};
    KernelNotes *kn = &t->kn[t->k->id];
    ARR_PUSH(t->a, kn->v, kn->n, kn->cap, n);
}

#define note tile_note

static void flush_notes(Tiler *t)
{
    const KernelNotes *kn = &t->kn[t->k->id];
    for (int i = 0; i < kn->n; i++) {
        const Pending *n = &kn->v[i];
        char buf[640];
        size_t len = 0;
        int nv = 0;
        for (const char *c = n->text; *c && len + 24 < sizeof buf; c++) {
            const Var *v = *c == '@' && nv < TILE_NOTE_VARS ? n->vars[nv++] : NULL;
            if (v)
                len += (size_t)snprintf(buf + len, sizeof buf - len, "%c%d",
                                        v->kind == VAR_LOOP ? 'i' : 'v', v->id);
            else
                buf[len++] = *c;
        }
        buf[len] = 0;
        ir_note(t->a, &t->k->notes, "tile: %s", buf);
    }
}

/* ---- small helpers ------------------------------------------------------- */


/* A new loop statement not yet in any block. */
static Stmt *new_loop(Tiler *t, int64_t lo, int64_t hi, int marks)
{
    Block tmp = {NULL, 0, 0};
    return s_loop(t->a, t->k, &tmp, e_int(t->a, lo), e_int(t->a, hi), marks);
}

static int64_t largest_divisor(int64_t n, int64_t most)
{
    for (int64_t d = most < n ? most : n; d > 1; d--)
        if (n % d == 0)
            return d;
    return 1;
}

/* The largest divisor of n that is at most `most`, a multiple of `lanes`
 * if one is (whole vector groups per block). */
static int64_t block_size(int64_t n, int64_t most, int64_t lanes)
{
    for (int64_t d = most / lanes * lanes; d >= lanes; d -= lanes)
        if (n % d == 0)
            return d;
    return largest_divisor(n, most);
}

const char *tile_kib(Tiler *t, int64_t bytes)
{
    if (bytes % (1024 * 1024) == 0)
        return arena_printf(t->a, "%lld MiB", (long long)(bytes >> 20));
    return arena_printf(t->a, "%lld KiB", (long long)((bytes + 1023) >> 10));
}

/* ---- 1. matmul-like nests ------------------------------------------------ */

typedef struct {
    Stmt *i, *j;                         /* rows, features */
    int64_t row_bytes;                   /* weight bytes one j iteration reads */
} Nest;

typedef struct {
    const Var *i, *j;
    Buf *seen[16];
    int nseen;
} WeightScan;

static void weight_loads(Expr *e, void *ctx)
{
    WeightScan *w = ctx;
    if (e->kind == E_LOAD) {
        int uses_j = 0, uses_i = 0;
        for (int d = 0; d < e->buf->rank; d++) {
            uses_j |= ir_expr_uses(e->idx[d], w->j);
            uses_i |= ir_expr_uses(e->idx[d], w->i);
            weight_loads(e->idx[d], ctx);
        }
        Buf *b = ir_storage(e->buf);
        int known = 0;
        for (int n = 0; n < w->nseen; n++)
            known |= w->seen[n] == b;
        if (uses_j && !uses_i && !known && w->nseen < 16)
            w->seen[w->nseen++] = b;
    }
    if (e->a) weight_loads(e->a, ctx);
    if (e->b) weight_loads(e->b, ctx);
    if (e->c) weight_loads(e->c, ctx);
}

static void weight_stmt(Stmt *s, void *ctx) { ir_stmt_exprs(s, weight_loads, ctx); }

/* Whether s is the i loop of a matmul-like nest (step 1). */
static int matmul_nest(Tiler *t, Stmt *s, Nest *n)
{
    if (!tile_const_loop(s) || (s->marks & (MARK_REDUCE | MARK_VECTOR | MARK_PARALLEL)) ||
        s->body.n != 1)
        return 0;
    Stmt *j = s->body.s[0];
    if (!tile_const_loop(j) || (j->marks & (MARK_REDUCE | MARK_VECTOR | MARK_PARALLEL)))
        return 0;
    n->i = s, n->j = j, n->row_bytes = 0;
    for (int q = 0; q < j->body.n; q++) {
        Stmt *r = j->body.s[q];
        if (r->kind != S_LOOP || !(r->marks & MARK_REDUCE))
            continue;
        if (!tile_const_loop(r))
            return 0;
        WeightScan w = {s->v, j->v, {0}, 0};
        ir_block_walk(&r->body, weight_stmt, &w);
        n->row_bytes += tile_trip(r) * 4 * w.nseen;
    }
    return n->row_bytes > 0 && ir_loop_independent(t->a, s, NULL);
}

/* ---- 2. cache blocking ------------------------------------------------------ */

/* for i: for j in lo..hi  ->  for jo: for i: for ji in 0..NB, j = lo + jo*NB + ji.
 * Returns the jo loop, which replaces i in its block. */
static Stmt *block_features(Tiler *t, Nest *n, int64_t nb)
{
    Arena *a = t->a;
    Stmt *i = n->i, *j = n->j;
    int64_t lo = j->lo->i, N = tile_trip(j);
    Stmt *jo = new_loop(t, 0, N / nb, 0);
    Var *old = j->v;
    j->v = ir_var(a, t->k, VAR_LOOP, T_I64);
    j->lo = e_int(a, 0);
    j->hi = e_int(a, nb);
    Expr *col = e_add(a, e_add(a, e_mul(a, e_var(a, jo->v), e_int(a, nb)), e_var(a, j->v)),
                      e_int(a, lo));
    ir_block_subst(a, &j->body, old, col);
    ir_push(a, &jo->body, i);
    return jo;
}

/* ---- 3. register blocking: unroll and jam ---------------------------------- */

static int same_bounds(Block *c, int r, int q)
{
    const Stmt *s = c[0].s[q];
    for (int x = 1; x < r; x++) {
        const Stmt *y = c[x].s[q];
        if (y->marks != s->marks || !ir_expr_equal(y->lo, s->lo) || !ir_expr_equal(y->hi, s->hi))
            return 0;
    }
    return 1;
}

/* Zips r copies of a block: statement q of every copy in turn; loops of
 * equal bounds become one loop whose body is their zipped bodies. */
static Block zip(Tiler *t, Block *c, int r)
{
    Block out = {NULL, 0, 0};
    for (int q = 0; q < c[0].n; q++) {
        Stmt *s = c[0].s[q];
        if (s->kind != S_LOOP || !same_bounds(c, r, q)) {
            for (int x = 0; x < r; x++)
                ir_push(t->a, &out, c[x].s[q]);
            continue;
        }
        Block bodies[MAX_R];
        bodies[0] = s->body;
        for (int x = 1; x < r; x++) {
            Stmt *y = c[x].s[q];
            ir_block_subst(t->a, &y->body, y->v, e_var(t->a, s->v));
            bodies[x] = y->body;
        }
        s->body = zip(t, bodies, r);
        ir_push(t->a, &out, s);
    }
    return out;
}

/* for i in lo..hi: B(i)  ->  for io in 0..M/r: zip(B(lo + io*r + x), x < r). */
static void jam_rows(Tiler *t, Stmt *i, int r)
{
    Arena *a = t->a;
    int64_t lo = i->lo->i, M = tile_trip(i);
    Block copies[MAX_R];
    for (int x = 0; x < r; x++) {
        Expr *row = e_add(a, e_mul(a, e_var(a, i->v), e_int(a, r)), e_int(a, lo + x));
        copies[x] = ir_block_clone(a, t->p, t->k, &i->body, &i->v, &row, 1);
    }
    i->lo = e_int(a, 0);
    i->hi = e_int(a, M / r);
    i->body = zip(t, copies, r);
}

static Stmt *tile_nest(Tiler *t, Nest *n)
{
    int64_t M = tile_trip(n->i), N = tile_trip(n->j), K4 = n->row_bytes, half = t->l2 / 2;
    int64_t most = half / K4 < N / t->cores ? half / K4 : N / t->cores;
    int64_t nb = M > 1 && N * K4 > half ? block_size(N, most, t->L) : 1;
    int64_t r = largest_divisor(M, t->R);
    Stmt *top = nb >= 2 ? block_features(t, n, nb) : n->i;
    if (r >= 2)
        jam_rows(t, n->i, (int)r);
    const Var *j = n->i->body.s[0]->v;
    if (nb >= 2)
        note(t, top->v, n->i->v, j,
             "N %lld blocked by %lld: %lld rows x %lld B = %s <= L2/2 = %s; loop order "
             "@, @, @, then the reduction: each weight block comes from memory once "
             "and serves all %lld rows",
             (long long)N, (long long)nb, (long long)nb, (long long)K4, tile_kib(t, nb * K4),
             tile_kib(t, half), (long long)M);
    else if (M > 1 && N * K4 > half)
        note(t, j, NULL, NULL, "@ not blocked: one row of weights (%s) exceeds L2/2 = %s",
             tile_kib(t, K4), tile_kib(t, half));
    if (r >= 2)
        note(t, n->i->v, NULL, NULL,
             "rows @ unrolled by %lld and jammed: each weight vector loaded feeds %lld "
             "accumulators (%lld x %d = %lld vector chains in flight)",
             (long long)r, (long long)r, (long long)r, t->L / t->V,
             (long long)(r * t->L / t->V));
    t->kn[t->k->id].changed |= nb >= 2 || r >= 2;
    return top;
}

static void tile_nests(Tiler *t, Block *blk)
{
    for (int q = 0; q < blk->n; q++) {
        Stmt *s = blk->s[q];
        Nest n;
        if (matmul_nest(t, s, &n)) {
            blk->s[q] = tile_nest(t, &n);
            continue;
        }
        tile_nests(t, &s->body);
        tile_nests(t, &s->els);
    }
}

/* ---- 4. lane split ----------------------------------------------------------- */

typedef struct {
    Var *v;
    AsgOp op;
    Buf *lanes;
} Acc;

typedef struct {
    Tiler *t;
    Stmt *loop;
    Acc acc[MAX_ACC];
    int nacc;
    Var *inner[64];                      /* lets of the body */
    int ninner;
    const char *why;
} Split;

static int is_inner(const Split *sp, const Var *v)
{
    for (int i = 0; i < sp->ninner; i++)
        if (sp->inner[i] == v)
            return 1;
    return 0;
}

static void refuse(Split *sp, const char *why)
{
    if (!sp->why)
        sp->why = why;
}

/* k must appear in one index of an access, as k + c in a dim of stride 1. */
static void check_access(Split *sp, Buf *b, Expr **idx)
{
    const Var *k = sp->loop->v;
    int dims = 0;
    for (int d = 0; d < b->rank; d++) {
        if (!ir_expr_uses(idx[d], k))
            continue;
        int affine;
        int64_t coef = ir_expr_coef(idx[d], k, &affine);
        if (!affine)
            refuse(sp, arena_printf(sp->t->a, "data-dependent index into b%d", ir_storage(b)->id));
        else if (coef != 1 || b->strides[d] != 1 || dims++)
            refuse(sp, arena_printf(sp->t->a, "the reduced axis is not contiguous in b%d",
                                    ir_storage(b)->id));
    }
}

static void check_loads(Expr *e, void *ctx)
{
    Split *sp = ctx;
    if (e->kind == E_LOAD) {
        check_access(sp, e->buf, e->idx);
        for (int d = 0; d < e->buf->rank; d++)
            check_loads(e->idx[d], ctx);
    }
    for (int i = 0; i < sp->nacc; i++)
        if (e->kind == E_VAR && e->v == sp->acc[i].v)
            refuse(sp, "its body reads an accumulator");
    if (e->a) check_loads(e->a, ctx);
    if (e->b) check_loads(e->b, ctx);
    if (e->c) check_loads(e->c, ctx);
}

static void add_acc(Split *sp, Stmt *s)
{
    for (int i = 0; i < sp->nacc; i++)
        if (sp->acc[i].v == s->v) {
            if (sp->acc[i].op != s->op)
                refuse(sp, "it mixes += and max= on one accumulator");
            return;
        }
    if (s->op == A_SET || s->v->type != T_F32)
        refuse(sp, s->op == A_SET ? "it assigns a scalar declared outside it"
                                  : "its accumulator is not f32");
    else if (sp->nacc == MAX_ACC)
        refuse(sp, "too many accumulators");
    else
        sp->acc[sp->nacc++] = (Acc){s->v, s->op, NULL};
}

typedef struct {
    Buf *b;
    Buf *view;
    Expr **idx;
    int ok;
} Place;

static void place_expr(Expr *e, void *ctx)
{
    Place *pl = ctx;
    if (e->kind == E_LOAD) {
        if (ir_storage(e->buf) == pl->b) {
            if (e->buf != pl->view)
                pl->ok = 0;
            for (int d = 0; d < e->buf->rank && pl->ok; d++)
                pl->ok = ir_expr_equal(e->idx[d], pl->idx[d]);
        }
        for (int d = 0; d < e->buf->rank; d++)
            place_expr(e->idx[d], ctx);
    }
    if (e->a) place_expr(e->a, ctx);
    if (e->b) place_expr(e->b, ctx);
    if (e->c) place_expr(e->c, ctx);
}

/* A store's storage must be accessed at the store's element only, so the
 * lanes of the vector loop never touch one another's elements. */
static int stores_one_place(Split *sp, const Stmt *st)
{
    Place pl = {ir_storage(st->buf), st->buf, st->idx, 1};
    for (int q = 0; q < sp->loop->body.n && pl.ok; q++) {
        Stmt *s = sp->loop->body.s[q];
        ir_stmt_exprs(s, place_expr, &pl);
        if (s->kind == S_STORE && s != st && ir_storage(s->buf) == pl.b) {
            pl.ok &= s->buf == st->buf;
            for (int d = 0; d < s->buf->rank && pl.ok; d++)
                pl.ok = ir_expr_equal(s->idx[d], st->idx[d]);
        }
    }
    return pl.ok;
}

/* Why the reduction loop s cannot be lane split, or NULL (filling sp). */
static const char *split_refusal(Split *sp)
{
    Stmt *s = sp->loop;
    if (s->lo->kind != E_INT || s->hi->kind != E_INT)
        return "its bound is known only at run time";
    if (tile_trip(s) < 2 * sp->t->L)
        return arena_printf(sp->t->a, "%lld iterations, fewer than 2 x %d lanes",
                            (long long)tile_trip(s), sp->t->L);
    for (int q = 0; q < s->body.n; q++) {
        Stmt *b = s->body.s[q];
        if (b->kind == S_LET && sp->ninner == 64)
            return "its body declares too many scalars";
        if (b->kind == S_LET)
            sp->inner[sp->ninner++] = b->v;
        else if (b->kind == S_SET && !is_inner(sp, b->v))
            add_acc(sp, b);
        else if (b->kind != S_STORE && b->kind != S_SET)
            return b->kind == S_LOOP ? "its body holds a loop"
                   : b->kind == S_IF ? "its body holds a branch"
                   : b->kind == S_CHECK ? "its body holds a check"
                                        : "its body declares a local array";
    }
    if (!sp->nacc)
        refuse(sp, "it accumulates nothing");
    for (int q = 0; q < s->body.n; q++) {
        Stmt *b = s->body.s[q];
        ir_stmt_exprs(b, check_loads, sp);
        if (b->kind == S_STORE) {
            int uses = 0;
            for (int d = 0; d < b->buf->rank; d++)
                uses |= ir_expr_uses(b->idx[d], s->v);
            if (!uses)
                refuse(sp, arena_printf(sp->t->a, "it stores to one element of b%d every "
                                        "iteration", ir_storage(b->buf)->id));
            check_access(sp, b->buf, b->idx);
            if (!stores_one_place(sp, b))
                refuse(sp, arena_printf(sp->t->a, "it touches b%d at two places",
                                        ir_storage(b->buf)->id));
        }
    }
    return sp->why;
}

static Expr **idx1(Arena *a, Expr *e)
{
    Expr **ix = arena_alloc(a, sizeof *ix);
    ix[0] = e;
    return ix;
}

/* Emits the lane split of sp->loop into out (step 4). */
static void lane_split(Split *sp, Block *out)
{
    Tiler *t = sp->t;
    Arena *a = t->a;
    Stmt *s = sp->loop;
    int64_t lo = s->lo->i, T = tile_trip(s), L = t->L, nko = T / L;
    for (int q = 0; q < sp->nacc; q++)
        sp->acc[q].lanes = s_local(a, t->p, out, DT_F32, 1, &L)->buf;
    Stmt *init = s_loop(a, t->k, out, e_int(a, 0), e_int(a, L), MARK_VECTOR);
    for (int q = 0; q < sp->nacc; q++)
        s_store(a, &init->body, sp->acc[q].lanes, idx1(a, e_var(a, init->v)), A_SET,
                e_flt(a, sp->acc[q].op == A_MAX ? -INFINITY : 0.0));

    Stmt *ko = s_loop(a, t->k, out, e_int(a, 0), e_int(a, nko), MARK_REDUCE);
    Stmt *l = s_loop(a, t->k, &ko->body, e_int(a, 0), e_int(a, L), MARK_VECTOR);
    Expr *k = e_add(a, e_add(a, e_mul(a, e_var(a, ko->v), e_int(a, L)), e_var(a, l->v)),
                    e_int(a, lo));
    l->body = ir_block_clone(a, t->p, t->k, &s->body, &s->v, &k, 1);
    for (int q = 0; q < l->body.n; q++) {
        Stmt *b = l->body.s[q];
        for (int x = 0; x < sp->nacc && b->kind == S_SET; x++)
            if (b->v == sp->acc[x].v) {
                b->kind = S_STORE;
                b->buf = sp->acc[x].lanes;
                b->idx = idx1(a, e_var(a, l->v));
                b->v = NULL;
            }
    }

    Stmt *sum = s_loop(a, t->k, out, e_int(a, 0), e_int(a, L), MARK_REDUCE);
    for (int q = 0; q < sp->nacc; q++)
        s_set(a, &sum->body, sp->acc[q].v, sp->acc[q].op,
              e_load(a, sp->acc[q].lanes, idx1(a, e_var(a, sum->v))));
    if (T % L) {
        s->lo = e_int(a, lo + nko * L);
        ir_push(a, out, s);
    }
    note(t, ko->v, l->v, T % L ? s->v : NULL,
         "reduction over %lld = %lld x %lld lanes%s (@ x @, %d B vectors: %lld per "
         "accumulator), lanes summed in order%s",
         (long long)T, (long long)nko, (long long)L,
         T % L ? arena_printf(a, " + %lld", (long long)(T % L)) : "", t->V * 4,
         (long long)(L / t->V), T % L ? ", then the tail @" : "");
    t->kn[t->k->id].changed = 1;
}

/* ---- 5. lanes across outputs -------------------------------------------------- */

typedef struct {
    const Var *j;
    const char *why;
    Arena *a;
} Cols;

/* j must appear in at most one index of an access, as j + c in a dim of
 * stride 1, so the lanes load whole vectors. */
static void cols_access(Cols *c, Buf *b, Expr **idx)
{
    int dims = 0;
    for (int d = 0; d < b->rank; d++) {
        int affine;
        if (!ir_expr_uses(idx[d], c->j))
            continue;
        if (ir_expr_coef(idx[d], c->j, &affine) != 1 || !affine || b->strides[d] != 1 || dims++)
            c->why = c->why ? c->why
                            : arena_printf(c->a, "b%d is not contiguous along the outputs",
                                           ir_storage(b)->id);
    }
}

static void cols_load(Expr *e, void *ctx) { cols_access(ctx, e->buf, e->idx); }

static void cols_stmt(Stmt *s, void *ctx)
{
    ir_stmt_loads(s, cols_load, ctx);
    if (s->kind == S_STORE)
        cols_access(ctx, s->buf, s->idx);
}

static int declared_in(const Block *blk, const Var *v)
{
    for (int q = 0; q < blk->n; q++)
        if (blk->s[q]->kind == S_LET && blk->s[q]->v == v)
            return 1;
    return 0;
}

static int uses_lets(const Block *blk, const Expr *e)
{
    for (int q = 0; q < blk->n; q++)
        if (blk->s[q]->kind == S_LET && ir_expr_uses(e, blk->s[q]->v))
            return 1;
    return 0;
}

/* Whether step 5 is for j: an outputs loop whose reductions cannot be
 * lane split themselves (strided, or short). */
static int cols_wanted(Tiler *t, Stmt *j)
{
    if (!tile_const_loop(j) || (j->marks & (MARK_REDUCE | MARK_VECTOR | MARK_PARALLEL)))
        return 0;
    int strided = 0;
    for (int q = 0; q < j->body.n; q++) {
        Stmt *b = j->body.s[q];
        if (b->kind != S_LOOP)
            continue;
        if (!(b->marks & MARK_REDUCE))
            return 0;
        Split sp;
        memset(&sp, 0, sizeof sp);
        sp.t = t;
        sp.loop = b;
        strided += split_refusal(&sp) != NULL;
    }
    return strided > 0;
}

/* Why j's body cannot be distributed over lane loops, or NULL. */
static const char *cols_refusal(Tiler *t, Stmt *j)
{
    if (tile_trip(j) < t->L)
        return arena_printf(t->a, "%lld outputs, fewer than %d lanes", (long long)tile_trip(j), t->L);
    for (int q = 0; q < j->body.n; q++) {
        Stmt *b = j->body.s[q];
        if (b->kind == S_LET && b->v->type != T_F32)
            return "a scalar of its body is not f32";
        if (b->kind == S_SET && !declared_in(&j->body, b->v))
            return "it assigns a scalar declared outside it";
        if (b->kind == S_IF || b->kind == S_CHECK || b->kind == S_LOCAL)
            return "its body holds a branch, a check or a local array";
        if (b->kind != S_LOOP)
            continue;
        if (ir_expr_uses(b->lo, j->v) || ir_expr_uses(b->hi, j->v) ||
            uses_lets(&j->body, b->lo) || uses_lets(&j->body, b->hi))
            return "a reduction's bounds depend on the output";
        for (int x = 0; x < b->body.n; x++)
            if (b->body.s[x]->kind != S_LET && b->body.s[x]->kind != S_SET &&
                b->body.s[x]->kind != S_STORE)
                return "a reduction holds a loop, a branch or a check";
    }
    Cols c = {j->v, NULL, t->a};
    ir_block_walk(&j->body, cols_stmt, &c);
    const char *why = c.why;
    if (!why)
        ir_loop_independent(t->a, j, &why);
    return why;
}

/* Lanes for j: L, doubled while the body's accumulators times the
 * doubling stay within R (as many vector accumulations in flight as R
 * jammed rows give) and whole lane groups still cover j. */
static int64_t cols_lanes(Tiler *t, Stmt *j)
{
    int64_t accs = 0, m = 1;
    for (int q = 0; q < j->body.n; q++)
        accs += j->body.s[q]->kind == S_LET;
    while (2 * m * (accs ? accs : 1) <= t->R && tile_trip(j) % (2 * m * t->L) == 0)
        m *= 2;
    return m * t->L;
}

typedef struct {
    const Var *x;
    Buf *lanes;
    Expr *lane;
    Arena *a;
} ToLanes;

static void set_to_store(Stmt *s, void *ctx)
{
    ToLanes *tl = ctx;
    if (s->kind == S_SET && s->v == tl->x) {
        s->kind = S_STORE;
        s->buf = tl->lanes;
        s->idx = idx1(tl->a, tl->lane);
        s->v = NULL;
    }
}

/* Each let x of j's body becomes a local array of L declared in jo's
 * body: `let x = e` a store to x[lane], uses of x loads of x[lane]. */
static void scalars_to_lanes(Tiler *t, Stmt *j, Stmt *jo, Var *lane, int64_t L)
{
    Arena *a = t->a;
    for (int q = 0; q < j->body.n; q++) {
        Stmt *b = j->body.s[q];
        if (b->kind != S_LET)
            continue;
        ToLanes tl = {b->v, s_local(a, t->p, &jo->body, DT_F32, 1, &L)->buf,
                      e_var(a, lane), a};
        b->kind = S_STORE;
        b->buf = tl.lanes;
        b->idx = idx1(a, tl.lane);
        b->op = A_SET;
        b->v = NULL;
        ir_block_subst(a, &j->body, tl.x, e_load(a, tl.lanes, b->idx));
        ir_block_walk(&j->body, set_to_store, &tl);
    }
}

/* for j in lo..hi: B  ->  for jo in 0..N/L: locals for B's scalars; B's
 * statements distributed over loops `for jl in 0..L vector` (inside each
 * reduction loop, for those), j = jo*L + jl + lo; then the tail j loop. */
static void col_lanes(Tiler *t, Stmt *j, int64_t L, Block *out)
{
    Arena *a = t->a;
    int64_t lo = j->lo->i, N = tile_trip(j), nb = N / L;
    Stmt *tail = NULL;
    if (N % L) {
        Block one = {&j, 1, 1};
        tail = ir_block_clone(a, t->p, t->k, &one, NULL, NULL, 0).s[0];
        tail->lo = e_int(a, lo + nb * L);
    }
    Var *lane = ir_var(a, t->k, VAR_LOOP, T_I64);    /* stands for each group's lane */
    Stmt *jo = new_loop(t, 0, nb, 0);
    jo->v = j->v;                        /* the loop over outputs keeps its name */
    scalars_to_lanes(t, j, jo, lane, L);
    for (int q = 0; q < j->body.n;) {
        Stmt *b = j->body.s[q], *l;
        Block src = {NULL, 0, 0};
        Var *from[3] = {j->v, lane, b->v};
        Expr *to[3];
        if (b->kind == S_LOOP) {
            Stmt *r = s_loop(a, t->k, &jo->body, b->lo, b->hi, b->marks);
            l = s_loop(a, t->k, &r->body, e_int(a, 0), e_int(a, L), MARK_VECTOR);
            to[2] = e_var(a, r->v);
            src = b->body;
            q++;
        } else {
            l = s_loop(a, t->k, &jo->body, e_int(a, 0), e_int(a, L), MARK_VECTOR);
            while (q < j->body.n && j->body.s[q]->kind != S_LOOP)
                ir_push(a, &src, j->body.s[q++]);
        }
        to[0] = e_add(a, e_add(a, e_mul(a, e_var(a, jo->v), e_int(a, L)), e_var(a, l->v)),
                      e_int(a, lo));
        to[1] = e_var(a, l->v);
        l->body = ir_block_clone(a, t->p, t->k, &src, from, to, b->kind == S_LOOP ? 3 : 2);
    }
    ir_push(a, out, jo);
    if (tail)
        ir_push(a, out, tail);
    note(t, jo->v, tail ? tail->v : NULL, NULL,
         "outputs over %lld = %lld x %lld lanes%s (@ x vector loops of %lld): every sum "
         "keeps its order, %lld outputs advancing together%s",
         (long long)N, (long long)nb, (long long)L,
         tail ? arena_printf(a, " + %lld", (long long)(N % L)) : "", (long long)L,
         (long long)L, tail ? "; then the tail @" : "");
    t->kn[t->k->id].changed = 1;
}

/* Step 4 for a reduction loop s: appends its lane split to out, or notes
 * why not and returns 0. */
static int try_lane_split(Tiler *t, Stmt *s, Block *out)
{
    Split sp;
    memset(&sp, 0, sizeof sp);
    sp.t = t;
    sp.loop = s;
    const char *why = split_refusal(&sp);
    if (why) {
        note(t, s->v, NULL, NULL, "reduction @ kept: %s", why);
        return 0;
    }
    lane_split(&sp, out);
    return 1;
}

/* Steps 4 and 5 over a block, outermost loops first. */
static void split_block(Tiler *t, Block *blk)
{
    Block out = {NULL, 0, 0};
    for (int q = 0; q < blk->n; q++) {
        Stmt *s = blk->s[q];
        if (s->kind == S_LOOP && cols_wanted(t, s)) {
            const char *why = cols_refusal(t, s);
            if (!why) {
                col_lanes(t, s, cols_lanes(t, s), &out);
                continue;
            }
            note(t, s->v, NULL, NULL, "outputs @ not in lanes: %s", why);
        }
        if (s->kind == S_LOOP && (s->marks & MARK_REDUCE) && try_lane_split(t, s, &out))
            continue;
        ir_push(t->a, &out, s);
        split_block(t, &s->body);
        split_block(t, &s->els);
    }
    *blk = out;
}

/* ---- the pass ------------------------------------------------------------------ */

int pass_tile(Module *m, PassCtx *cx)
{
    if (!m->prog)
        return 0;
    Tiler t;
    memset(&t, 0, sizeof t);
    t.a = m->a;
    t.m = m;
    t.p = m->prog;
    t.V = cx->machine.vector_bytes >= 8 ? cx->machine.vector_bytes / 4 : 2;
    t.L = 2 * t.V > 16 ? 2 * t.V : 16;
    t.R = 8 * t.V / t.L > 1 ? 8 * t.V / t.L : 1;
    if (t.R > MAX_R)
        t.R = MAX_R;
    t.accs = cx->machine.vector_bytes >= 64 ? 16 : 8;     /* of 32 registers, of 16 */
    t.accs4 = cx->machine.vector_bytes >= 64 ? 24 : t.accs;
    t.l1 = cx->machine.l1d;
    t.l2 = cx->machine.l2;
    t.cores = cx->machine.cores > 1 ? cx->machine.cores : 1;
    t.amx = cx->machine.amx;
    t.kn = arena_alloc(m->a, sizeof *t.kn * (size_t)(m->prog->nkernels + 1));
    t.panels = cx->panels;
    t.npanels = cx->npanels;
    tile_gemms(&t);
    int changed = 0;
    for (int i = 0; i < m->prog->nkernels; i++) {
        t.k = m->prog->kernels[i];
        tile_nests(&t, &t.k->body);
        split_block(&t, &t.k->body);
        if (t.kn[i].changed)
            ir_kernel_renumber(t.k);
        flush_notes(&t);
        changed |= t.kn[i].changed;
    }
    return changed;
}
