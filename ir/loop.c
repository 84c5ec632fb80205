/* ir/loop.c: the loop IR: builders that fold constants, and the printer. */
#include "ir.h"

#include <math.h>
#include <string.h>

Prog *ir_prog_new(Arena *a) { return arena_alloc(a, sizeof(Prog)); }

void ir_buf_contiguous(Buf *b)
{
    int64_t s = 1;
    for (int i = b->rank - 1; i >= 0; i--) {
        b->strides[i] = s;
        s *= b->dims[i];
    }
    b->offset = 0;
}

Buf *ir_buf_new(Arena *a, Prog *p, BufKind kind, DType t, int rank,
                const int64_t *dims)
{
    Buf *b = arena_alloc(a, sizeof *b);
    b->id = p->nbufs;
    b->kind = kind;
    b->dtype = t;
    b->rank = rank;
    memcpy(b->dims, dims, sizeof *dims * (size_t)rank);
    ir_buf_contiguous(b);
    b->index = -1;
    b->arena_off = -1;
    ARR_PUSH(a, p->bufs, p->nbufs, p->capbufs, b);
    return b;
}

Kernel *ir_kernel_new(Arena *a, Prog *p, const char *name)
{
    Kernel *k = arena_alloc(a, sizeof *k);
    k->id = p->nkernels;
    k->name = name;
    ARR_PUSH(a, p->kernels, p->nkernels, p->capkernels, k);
    return k;
}

Var *ir_var(Arena *a, Kernel *k, VarKind kind, EType t)
{
    Var *v = arena_alloc(a, sizeof *v);
    v->id = k->nvars++;
    v->kind = kind;
    v->type = t;
    return v;
}

void ir_push(Arena *a, Block *blk, Stmt *s) { ARR_PUSH(a, blk->s, blk->n, blk->cap, s); }

/* ---- expressions ------------------------------------------------------ */

static Expr *new_expr(Arena *a, ExprKind kind, EType t)
{
    Expr *e = arena_alloc(a, sizeof *e);
    e->kind = kind;
    e->type = t;
    return e;
}

Expr *e_int(Arena *a, int64_t i)
{
    Expr *e = new_expr(a, E_INT, T_I64);
    e->i = i;
    return e;
}

Expr *e_flt(Arena *a, double f)
{
    Expr *e = new_expr(a, E_FLT, T_F32);
    e->f = (float)f;
    return e;
}

Expr *e_var(Arena *a, Var *v)
{
    Expr *e = new_expr(a, E_VAR, v->type);
    e->v = v;
    return e;
}

Expr *e_load(Arena *a, Buf *b, Expr **idx)
{
    Expr *e = new_expr(a, E_LOAD, b->dtype == DT_I32 ? T_I32 : T_F32);
    e->buf = b;
    e->idx = b->rank ? arena_dup(a, idx, sizeof *idx * (size_t)b->rank) : NULL;
    return e;
}

static int is_int(const Expr *e, int64_t v) { return e->kind == E_INT && e->i == v; }

static int64_t fold_int(BinOp op, int64_t x, int64_t y)
{
    switch (op) {
    case B_ADD: return x + y;
    case B_SUB: return x - y;
    case B_MUL: return x * y;
    case B_DIV: return x / y;
    case B_MOD: return x % y;
    case B_MAX: return x > y ? x : y;
    case B_MIN: return x < y ? x : y;
    case B_LT: return x < y;
    case B_LE: return x <= y;
    case B_GT: return x > y;
    case B_GE: return x >= y;
    case B_EQ: return x == y;
    case B_NE: return x != y;
    case B_AND: return x && y;
    case B_OR: return x || y;
    case B_COUNT: break;
    }
    KILN_BUG("bad binop %d", op);
}

static int is_cmp(BinOp op) { return op >= B_LT; }

Expr *e_bin(Arena *a, BinOp op, Expr *x, Expr *y)
{
    int fx = x->type == T_F32, fy = y->type == T_F32;
    if (fx != fy && !is_cmp(op))
        KILN_BUG("%s mixes f32 and integer operands", binop_name(op));
    if (fx != fy)
        KILN_BUG("comparison mixes f32 and integer operands");
    if (!fx) {
        if (x->kind == E_INT && y->kind == E_INT && !((op == B_DIV || op == B_MOD) && y->i == 0))
            return e_int(a, fold_int(op, x->i, y->i));
        if ((op == B_ADD && is_int(x, 0)) || (op == B_MUL && is_int(x, 1)))
            return y;
        if (((op == B_ADD || op == B_SUB) && is_int(y, 0)) ||
            ((op == B_MUL || op == B_DIV) && is_int(y, 1)))
            return x;
        if (op == B_MUL && (is_int(x, 0) || is_int(y, 0)))
            return e_int(a, 0);
    }
    EType t = is_cmp(op) ? T_I64 : fx ? T_F32
              : (x->type == T_I64 || y->type == T_I64) ? T_I64 : T_I32;
    Expr *e = new_expr(a, E_BIN, t);
    e->op = op;
    e->a = x;
    e->b = y;
    return e;
}

Expr *e_un(Arena *a, UnOp op, Expr *x)
{
    EType t = op == U_TOF32 ? T_F32 : op == U_TOI64 ? T_I64
              : op == U_NOT ? T_I64 : x->type;
    if (op == U_TOF32 && x->type == T_F32)
        return x;
    if (op == U_NEG && x->kind == E_INT)
        return e_int(a, -x->i);
    if (op == U_TOF32 && x->kind == E_INT)
        return e_flt(a, (double)x->i);
    Expr *e = new_expr(a, E_UN, t);
    e->op = op;
    e->a = x;
    return e;
}

Expr *e_sel(Arena *a, Expr *c, Expr *x, Expr *y)
{
    if (c->kind == E_INT)
        return c->i ? x : y;
    if ((x->type == T_F32) != (y->type == T_F32))
        KILN_BUG("select mixes f32 and integer arms");
    Expr *e = new_expr(a, E_SEL, x->type);
    e->a = c;
    e->b = x;
    e->c = y;
    return e;
}

Expr *e_add(Arena *a, Expr *x, Expr *y) { return e_bin(a, B_ADD, x, y); }
Expr *e_mul(Arena *a, Expr *x, Expr *y) { return e_bin(a, B_MUL, x, y); }

/* ---- statements ------------------------------------------------------- */

static Stmt *new_stmt(Arena *a, Block *blk, StmtKind kind)
{
    Stmt *s = arena_alloc(a, sizeof *s);
    s->kind = kind;
    ir_push(a, blk, s);
    return s;
}

Stmt *s_loop(Arena *a, Kernel *k, Block *blk, Expr *lo, Expr *hi, int marks)
{
    Stmt *s = new_stmt(a, blk, S_LOOP);
    s->v = ir_var(a, k, VAR_LOOP, T_I64);
    s->lo = lo;
    s->hi = hi;
    s->marks = marks;
    return s;
}

Stmt *s_let(Arena *a, Kernel *k, Block *blk, EType t, Expr *init)
{
    Stmt *s = new_stmt(a, blk, S_LET);
    s->v = ir_var(a, k, VAR_LOCAL, t);
    s->e = init;
    return s;
}

Stmt *s_set(Arena *a, Block *blk, Var *v, AsgOp op, Expr *e)
{
    Stmt *s = new_stmt(a, blk, S_SET);
    s->v = v;
    s->op = op;
    s->e = e;
    return s;
}

Stmt *s_store(Arena *a, Block *blk, Buf *b, Expr **idx, AsgOp op, Expr *e)
{
    Stmt *s = new_stmt(a, blk, S_STORE);
    s->buf = b;
    s->idx = b->rank ? arena_dup(a, idx, sizeof *idx * (size_t)b->rank) : NULL;
    s->op = op;
    s->e = e;
    return s;
}

Stmt *s_if(Arena *a, Block *blk, Expr *cond)
{
    Stmt *s = new_stmt(a, blk, S_IF);
    s->e = cond;
    return s;
}

Stmt *s_local(Arena *a, Prog *p, Block *blk, DType t, int rank, const int64_t *dims)
{
    Stmt *s = new_stmt(a, blk, S_LOCAL);
    s->buf = ir_buf_new(a, p, BK_LOCAL, t, rank, dims);
    return s;
}

void ir_note(Arena *a, Notes *ns, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = arena_alloc(a, (size_t)len + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)len + 1, fmt, ap);
    va_end(ap);
    ARR_PUSH(a, ns->v, ns->n, ns->cap, (const char *)s);
}

/* ---- calls ------------------------------------------------------------ */

const CallDesc call_table[CALL_COUNT] = {
    [CALL_GEMM] = {"gemm", 3, 0, 0, 0},
    [CALL_QGEMM] = {"qgemm", 3, 0, 0, 0},
    [CALL_ATTN] = {"attn", 5, 1, 5, 0},
    [CALL_ALLREDUCE] = {"allreduce", 2, 0, 0, 0},
    [CALL_ALLGATHER] = {"allgather", 2, 0, 0, 0},
    [CALL_RANK] = {"rank", 1, 0, 0, 0},
};

Stmt *s_call_args(Arena *a, Block *blk, CallKind call, const Tile *tiles, int ntiles,
                  Expr **args, int nargs)
{
    Stmt *s = s_call(a, blk, call, tiles, ntiles);
    s->args = nargs ? arena_dup(a, args, sizeof *args * (size_t)nargs) : NULL;
    s->nargs = nargs;
    return s;
}

Stmt *s_call(Arena *a, Block *blk, CallKind call, const Tile *tiles, int ntiles)
{
    Stmt *s = new_stmt(a, blk, S_CALL);
    s->call = call;
    s->ntiles = ntiles;
    s->tiles = arena_dup(a, tiles, sizeof *tiles * (size_t)ntiles);
    for (int i = 0; i < ntiles; i++)
        s->tiles[i].idx = tiles[i].buf->rank
                              ? arena_dup(a, tiles[i].idx, sizeof *tiles[i].idx * (size_t)tiles[i].buf->rank)
                              : NULL;
    return s;
}

int ir_whole_blocks(const Buf *b)
{
    int block = b->base ? storage_block(b->base->store) : 0;    /* a base is no view */
    if (!block)
        return 1;
    if (b->offset % block || !b->rank || b->strides[b->rank - 1] != 1)
        return 0;
    for (int d = 0; d < b->rank - 1; d++)
        if (b->strides[d] % block)
            return 0;
    return 1;
}

int ir_tile_matrix(const Tile *t, int64_t *rows, int64_t *cols, int64_t *ld)
{
    const Buf *b = t->buf;
    int r = b->rank;
    if (r < 1 || b->strides[r - 1] != 1)
        return 0;
    for (int d = 0; d < r - 2; d++)
        if (t->ext[d] != 1)
            return 0;
    *cols = t->ext[r - 1];
    *rows = r >= 2 ? t->ext[r - 2] : 1;
    *ld = r >= 2 ? b->strides[r - 2] : *cols;
    return 1;
}

/* ctx: int[2], the calls and the qgemm calls among them */
static void amx_call(Stmt *s, void *ctx)
{
    int64_t rows, cols, ld;
    if (s->kind != S_CALL || s->ntiles != 3 || !ir_tile_matrix(&s->tiles[0], &rows, &cols, &ld) ||
        rows < 16)
        return;
    Storage st = ir_storage(s->tiles[2].buf)->store;
    int q = s->call == CALL_QGEMM && st >= ST_Q8_0 && st <= ST_Q6_K;
    if (q || (s->call == CALL_GEMM && st == ST_BF16)) {
        ((int *)ctx)[0]++;
        ((int *)ctx)[1] += q;
    }
}

int ir_prog_amx_calls(Prog *p, int *quantized)
{
    int n[2] = {0, 0};
    for (int i = 0; p && i < p->nkernels; i++)
        ir_block_walk(&p->kernels[i]->body, amx_call, n);
    if (quantized)
        *quantized = n[1];
    return n[0];
}

/* gemm(C, A, B): C [m,n], A [m,k], B [k,n]. */
static const char *gemm_refusal(Arena *a, const Tile *t)
{
    int64_t r[3], c[3], ld;
    for (int i = 0; i < 3; i++)
        if (!ir_tile_matrix(&t[i], &r[i], &c[i], &ld))
            return arena_printf(a, "tile %d of gemm (b%d) is not a matrix with contiguous rows",
                                i, t[i].buf->id);
    if (r[1] != r[0] || c[2] != c[0] || r[2] != c[1])
        return arena_printf(a, "gemm of [%lld,%lld] += [%lld,%lld] x [%lld,%lld]: the shapes "
                            "do not agree", (long long)r[0], (long long)c[0], (long long)r[1],
                            (long long)c[1], (long long)r[2], (long long)c[2]);
    return NULL;
}

/* qgemm(C, A, W): C [m,n], A [m,k] f32, W [n,k] a weight held quantized
 * (or a view of one with whole blocks), k and W's row stride multiples of
 * its block. */
static const char *qgemm_refusal(Arena *a, const Tile *t)
{
    int64_t r[3], c[3], ld[3];
    for (int i = 0; i < 3; i++)
        if (!ir_tile_matrix(&t[i], &r[i], &c[i], &ld[i]))
            return arena_printf(a, "tile %d of qgemm (b%d) is not a matrix with contiguous rows",
                                i, t[i].buf->id);
    Storage st = ir_storage(t[2].buf)->store;
    int block = storage_block(st);
    if (!block || ir_storage(t[1].buf)->store != ST_F32)
        return arena_printf(a, "qgemm of b%d by b%d: the weight is not held quantized (%s), or "
                            "the rows are not f32", t[1].buf->id, t[2].buf->id, storage_name(st));
    if (!ir_whole_blocks(t[2].buf))
        return arena_printf(a, "qgemm by b%d, a view of %s blocks whose rows start inside a "
                            "block", t[2].buf->id, storage_name(st));
    if (r[1] != r[0] || r[2] != c[0] || c[2] != c[1] || c[1] % block || ld[2] % block)
        return arena_printf(a, "qgemm of [%lld,%lld] += [%lld,%lld] x [%lld,%lld]^T: the shapes "
                            "do not agree, or k is no multiple of %s's block of %d",
                            (long long)r[0], (long long)c[0], (long long)r[1], (long long)c[1],
                            (long long)r[2], (long long)c[2], storage_name(st), block);
    return NULL;
}

/* attn(O, Q, K, V[, SK]; p0, hi, window, scale, softcap): O and Q [nt, H,
 * D] with heads of D contiguous, K and V [S, 1, D] (or one slot, [1, S,
 * 1, D]) with D contiguous; every tile whole along D, f32 storage; SK [H]
 * contiguous f32; p0 and hi integers, window an INT >= 0, scale a FLT >
 * 0, softcap a FLT >= 0. */
static const char *attn_refusal(Arena *a, const Tile *t, int ntiles, Expr **args)
{
    for (int i = 0; i < 4; i++) {
        Buf *b = t[i].buf;
        int o = b->rank - 3;           /* K and V: 1 for one slot */
        if (o < 0 || o > (i >= 2) || b->rank != t[i & 2].buf->rank || (o && t[i].ext[0] != 1) ||
            b->strides[o + 2] != 1 || t[i].ext[o + 2] != b->dims[o + 2] ||
            t[i].ext[o + 2] != t[0].ext[2] || (i < 2 && b->strides[1] != b->dims[2]) ||
            (i >= 2 && t[i].ext[o + 1] != 1) || ir_storage(b)->store != ST_F32)
            return arena_printf(a, "tile %d of attn (b%d) is not [rows, heads, D] with whole "
                                "contiguous heads of f32 (D %lld)", i, b->id,
                                (long long)t[0].ext[2]);
    }
    int o = t[2].buf->rank - 3;
    if (t[1].ext[0] != t[0].ext[0] || t[1].ext[1] != t[0].ext[1] ||
        t[3].ext[o] != t[2].ext[o])
        return arena_printf(a, "attn: O [%lld, %lld] and Q [%lld, %lld], or K [%lld] and V "
                            "[%lld] rows: the shapes do not agree", (long long)t[0].ext[0],
                            (long long)t[0].ext[1], (long long)t[1].ext[0],
                            (long long)t[1].ext[1], (long long)t[2].ext[o], (long long)t[3].ext[o]);
    if (ntiles == 5 && (t[4].buf->rank != 1 || t[4].buf->strides[0] != 1 ||
                        t[4].ext[0] != t[0].ext[1] || ir_storage(t[4].buf)->store != ST_F32))
        return arena_printf(a, "tile 4 of attn (b%d), the sinks, is not [heads] of contiguous "
                            "f32 (heads %lld)", t[4].buf->id, (long long)t[0].ext[1]);
    if (args[0]->type == T_F32 || args[1]->type == T_F32 || args[2]->kind != E_INT ||
        args[2]->i < 0 || args[3]->kind != E_FLT || !(args[3]->f > 0) ||
        args[4]->kind != E_FLT || !(args[4]->f >= 0))
        return "attn's arguments are p0, hi (integers), window (an INT >= 0), scale (a FLT > "
               "0), softcap (a FLT >= 0)";
    return NULL;
}

/* Tile t covers its whole buffer, laid out row-major without gaps. */
static int whole_dense(const Tile *t)
{
    const Buf *b = t->buf;
    int64_t stride = 1;
    for (int d = b->rank - 1; d >= 0; d--) {
        if (t->ext[d] != b->dims[d] || b->strides[d] != stride || t->idx[d]->kind != E_INT ||
            t->idx[d]->i != 0)
            return 0;
        stride *= b->dims[d];
    }
    return 1;
}

/* allreduce(Y, X): one shape, f32; allgather(Y, X): one dtype, Y N >= 2
 * times X along exactly one axis. */
static const char *collective_refusal(Arena *a, const Stmt *s)
{
    const Tile *t = s->tiles;
    const char *name = call_table[s->call].name;
    for (int i = 0; i < 2; i++)
        if (!whole_dense(&t[i]))
            return arena_printf(a, "tile %d of %s (b%d) is not its whole dense buffer", i, name,
                                t[i].buf->id);
    if (ir_storage(t[0].buf) == ir_storage(t[1].buf))
        return arena_printf(a, "%s writes b%d, which it reads", name, t[0].buf->id);
    if (t[0].buf->dtype != t[1].buf->dtype || t[0].buf->rank != t[1].buf->rank ||
        (s->call == CALL_ALLREDUCE && t[0].buf->dtype != DT_F32))
        return arena_printf(a, "%s of b%d into b%d: the types do not agree", name, t[1].buf->id,
                            t[0].buf->id);
    int differ = 0;
    for (int d = 0; d < t[0].buf->rank; d++)
        if (t[0].buf->dims[d] != t[1].buf->dims[d])
            differ += t[0].buf->dims[d] % t[1].buf->dims[d] ? 2 : 1;
    if (s->call == CALL_ALLREDUCE ? differ != 0 : differ != 1)
        return arena_printf(a, "%s of b%d into b%d: the shapes do not agree", name, t[1].buf->id,
                            t[0].buf->id);
    return NULL;
}

/* rank(Y): Y one i32, whole and dense, in storage a program may write (a
 * derived weight too: hoist-weights makes it one at open, per rank). */
static const char *rank_refusal(Arena *a, const Stmt *s)
{
    const Buf *y = s->tiles[0].buf, *w = ir_storage(s->tiles[0].buf);
    if (!whole_dense(&s->tiles[0]) || y->dtype != DT_I32 || shape_count(y->rank, y->dims) != 1)
        return arena_printf(a, "rank writes b%d, which is not one whole i32", y->id);
    if (w->kind == BK_INPUT || w->kind == BK_WEIGHT)
        return arena_printf(a, "rank writes b%d, %s storage", y->id, bufkind_name(w->kind));
    return NULL;
}

const char *ir_call_refusal(Arena *a, const Stmt *s)
{
    const CallDesc *d = &call_table[s->call];
    if (s->ntiles > d->ntiles || s->ntiles < d->ntiles - d->optional)
        return d->optional ? arena_printf(a, "%s takes %d to %d tiles, not %d", d->name,
                                          d->ntiles - d->optional, d->ntiles, s->ntiles)
                           : arena_printf(a, "%s takes %d tiles, not %d", d->name, d->ntiles,
                                          s->ntiles);
    if (s->nargs != d->nargs)
        return arena_printf(a, "%s takes %d arguments, not %d", d->name, d->nargs, s->nargs);
    if (s->call == CALL_ALLREDUCE || s->call == CALL_ALLGATHER)
        return collective_refusal(a, s);
    if (s->call == CALL_RANK)
        return rank_refusal(a, s);
    for (int i = 0; i < s->ntiles; i++) {
        const Tile *t = &s->tiles[i];
        if (t->buf->dtype != DT_F32)
            return arena_printf(a, "b%d is not f32", t->buf->id);
        for (int j = 0; j < t->buf->rank; j++)
            if (t->ext[j] < 1 || t->ext[j] > t->buf->dims[j])
                return arena_printf(a, "extent %lld of b%d is not in 1..%lld", (long long)t->ext[j],
                                    t->buf->id, (long long)t->buf->dims[j]);
    }
    Buf *w = ir_storage(s->tiles[d->written].buf);
    if (w->kind == BK_INPUT || w->kind == BK_WEIGHT || w->kind == BK_DERIVED)
        return arena_printf(a, "%s writes b%d, %s storage", d->name,
                            s->tiles[d->written].buf->id, bufkind_name(w->kind));
    for (int i = 0; i < s->ntiles; i++)
        if (i != d->written && ir_storage(s->tiles[i].buf) == w)
            return arena_printf(a, "%s writes b%d, which tile %d reads", d->name,
                                s->tiles[d->written].buf->id, i);
    return s->call == CALL_QGEMM   ? qgemm_refusal(a, s->tiles)
           : s->call == CALL_ATTN  ? attn_refusal(a, s->tiles, s->ntiles, s->args)
                                   : gemm_refusal(a, s->tiles);
}

double ir_call_flops(const Stmt *s)
{
    int64_t m, n, k, ld;
    if (s->call == CALL_ATTN)     /* every row against every key: an upper bound */
        return 4.0 * (double)s->tiles[1].ext[0] * (double)s->tiles[1].ext[1] *
               (double)s->tiles[2].ext[s->tiles[2].buf->rank - 3] * (double)s->tiles[1].ext[2];
    if (s->call == CALL_ALLREDUCE || s->call == CALL_ALLGATHER || s->call == CALL_RANK)
        return 0;                 /* communication: the other ranks' adds are theirs */
    if (!ir_tile_matrix(&s->tiles[1], &m, &k, &ld) || !ir_tile_matrix(&s->tiles[0], &m, &n, &ld))
        return 0;
    return 2.0 * (double)m * (double)n * (double)k;
}

Stmt *s_check(Arena *a, Block *blk, Expr *cond, const char *msg,
              Expr **args, int nargs)
{
    Stmt *s = new_stmt(a, blk, S_CHECK);
    s->e = cond;
    s->msg = msg;
    s->args = nargs ? arena_dup(a, args, sizeof *args * (size_t)nargs) : NULL;
    s->nargs = nargs;
    return s;
}

/* ---- printing (.kir, KIR.md) ------------------------------------------ */

/* The operators' .kir spellings and binding strengths (scalar.def). */
static const char *const binop_names[B_COUNT] = {
#define BIN(e, kir, ...) [B_##e] = kir,
#define UN(e, ...)
#include "scalar.def"
#undef BIN
#undef UN
};
static const char *const unop_names[U_COUNT] = {
#define BIN(e, ...)
#define UN(e, kir, ...) [U_##e] = kir,
#include "scalar.def"
#undef BIN
#undef UN
};
static const int binop_prec[B_COUNT] = {
#define BIN(e, kir, c, c_int, vec, flops, prec) [B_##e] = prec,
#define UN(e, ...)
#include "scalar.def"
#undef BIN
#undef UN
};
static const char *bufkind_names[] = {"input", "output", "weight", "state", "derived", "temp",
                                      "local"};
static const char *etype_names[] = {"f32", "i32", "i64"};

const char *binop_name(BinOp op) { return binop_names[op]; }
const char *unop_name(UnOp op) { return unop_names[op]; }
const char *bufkind_name(BufKind k) { return bufkind_names[k]; }

int ir_expr_prec(const Expr *e)
{
    return e->kind == E_SEL ? 0 : e->kind == E_BIN ? binop_prec[e->op] : 9;
}

void ir_print_float(FILE *f, double v)
{
    if (isinf(v)) {
        fputs(v < 0 ? "-inf" : "inf", f);
        return;
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%.9g", v);
    fputs(buf, f);
    if (!strpbrk(buf, ".en"))
        fputs(".0", f);
}

static void print_expr(FILE *f, const Expr *e);

static void print_operand(FILE *f, const Expr *e, int p, int right)
{
    int q = ir_expr_prec(e);
    int paren = q < p || (right && q == p && q < 9);
    if (paren)
        fputc('(', f);
    print_expr(f, e);
    if (paren)
        fputc(')', f);
}

static void print_index(FILE *f, const Buf *b, Expr *const *idx)
{
    fprintf(f, "b%d[", b->id);
    for (int i = 0; i < b->rank; i++) {
        if (i)
            fputs(", ", f);
        print_expr(f, idx[i]);
    }
    fputc(']', f);
}

/* bN[i0 * 8 +: 8, 0 +: 32]: a tile's first element and extents */
static void print_tile(FILE *f, const Tile *t)
{
    fprintf(f, "b%d[", t->buf->id);
    for (int i = 0; i < t->buf->rank; i++) {
        if (i)
            fputs(", ", f);
        print_expr(f, t->idx[i]);
        fprintf(f, " +: %lld", (long long)t->ext[i]);
    }
    fputc(']', f);
}

static void print_var(FILE *f, const Var *v)
{
    fprintf(f, "%c%d", v->kind == VAR_LOOP ? 'i' : 'v', v->id);
}

static void print_expr(FILE *f, const Expr *e)
{
    switch (e->kind) {
    case E_INT: fprintf(f, "%lld", (long long)e->i); return;
    case E_FLT: ir_print_float(f, e->f); return;
    case E_VAR: print_var(f, e->v); return;
    case E_LOAD: print_index(f, e->buf, e->idx); return;
    case E_BIN:
        if (ir_expr_prec(e) == 9) {               /* a function: max(a, b) */
            fprintf(f, "%s(", binop_names[e->op]);
            print_expr(f, e->a);
            fputs(", ", f);
            print_expr(f, e->b);
            fputc(')', f);
            return;
        }
        print_operand(f, e->a, ir_expr_prec(e), 0);
        fprintf(f, " %s ", binop_names[e->op]);
        print_operand(f, e->b, ir_expr_prec(e), 1);
        return;
    case E_UN:
        fprintf(f, "%s(", unop_names[e->op]);
        print_expr(f, e->a);
        fputc(')', f);
        return;
    case E_SEL:
        print_operand(f, e->a, 1, 0);
        fputs(" ? ", f);
        print_operand(f, e->b, 1, 0);
        fputs(" : ", f);
        print_operand(f, e->c, 0, 0);
        return;
    }
}

static const char *asg[] = {"=", "+=", "max="};

static void print_block(FILE *f, const Block *blk, int depth);

static void print_stmt(FILE *f, const Stmt *s, int depth)
{
    fprintf(f, "%*s", depth * 2, "");
    switch (s->kind) {
    case S_LOOP:
        fputs("for ", f);
        print_var(f, s->v);
        fputs(" in ", f);
        print_expr(f, s->lo);
        fputs("..", f);
        print_operand(f, s->hi, 9, 0);
        if (s->marks & MARK_PARALLEL) fputs(" parallel", f);
        if (s->marks & MARK_REDUCE) fputs(" reduce", f);
        if (s->marks & MARK_VECTOR) fputs(" vector", f);
        fputc('\n', f);
        print_block(f, &s->body, depth + 1);
        return;
    case S_LET:
        fputs("let ", f);
        print_var(f, s->v);
        fprintf(f, ": %s = ", etype_names[s->v->type]);
        print_expr(f, s->e);
        fputc('\n', f);
        return;
    case S_SET:
        print_var(f, s->v);
        fprintf(f, " %s ", asg[s->op]);
        print_expr(f, s->e);
        fputc('\n', f);
        return;
    case S_STORE:
        print_index(f, s->buf, s->idx);
        fprintf(f, " %s ", asg[s->op]);
        print_expr(f, s->e);
        fputc('\n', f);
        return;
    case S_IF:
        fputs("if ", f);
        print_expr(f, s->e);
        fputc('\n', f);
        print_block(f, &s->body, depth + 1);
        if (s->els.n) {
            fprintf(f, "%*selse\n", depth * 2, "");
            print_block(f, &s->els, depth + 1);
        }
        return;
    case S_LOCAL:
        fprintf(f, "local b%d\n", s->buf->id);
        return;
    case S_CALL:
        fprintf(f, "call %s(", call_table[s->call].name);
        for (int i = 0; i < s->ntiles; i++) {
            fputs(i ? ", " : "", f);
            print_tile(f, &s->tiles[i]);
        }
        for (int i = 0; i < s->nargs; i++) {
            fputs(i ? ", " : "; ", f);
            print_expr(f, s->args[i]);
        }
        fputs(")\n", f);
        return;
    case S_CHECK:
        fputs("check ", f);
        print_expr(f, s->e);
        fputs(" else ", f);
        ir_print_quoted(f, s->msg);
        for (int i = 0; i < s->nargs; i++) {
            fputs(", ", f);
            print_expr(f, s->args[i]);
        }
        fputc('\n', f);
        return;
    }
}

static void print_block(FILE *f, const Block *blk, int depth)
{
    for (int i = 0; i < blk->n; i++)
        print_stmt(f, blk->s[i], depth);
}

static int is_contiguous(const Buf *b)
{
    int64_t s = 1;
    for (int i = b->rank - 1; i >= 0; i--) {
        if (b->strides[i] != s)
            return 0;
        s *= b->dims[i];
    }
    return b->offset == 0 && !b->base;
}

static void print_buf(FILE *f, const Buf *b)
{
    fprintf(f, "  buf b%d %s", b->id, bufkind_names[b->kind]);
    if (b->index >= 0)
        fprintf(f, " %d", b->index);
    if (b->node)
        fprintf(f, " %%%d", b->node->id);
    fprintf(f, " : %s[", dtype_name(b->dtype));
    for (int i = 0; i < b->rank; i++)
        fprintf(f, "%s%lld", i ? "," : "", (long long)b->dims[i]);
    fputc(']', f);
    if (b->store != ST_F32)
        fprintf(f, " %s", storage_name(b->store));
    if (b->packed)
        fputs(" packed", f);
    if (!is_contiguous(b)) {
        fputs(" strides [", f);
        for (int i = 0; i < b->rank; i++)
            fprintf(f, "%s%lld", i ? "," : "", (long long)b->strides[i]);
        fprintf(f, "] offset %lld", (long long)b->offset);
        if (b->base)
            fprintf(f, " of b%d", b->base->id);
    }
    if (b->arena_off >= 0)
        fprintf(f, " @%lld", (long long)b->arena_off);
    fputc('\n', f);
}

/* 1.23 G, 45.6 M, 789 k: three significant digits. */
static void print_si(FILE *f, double x, const char *unit)
{
    static const char *prefix[] = {"", "k", "M", "G", "T"};
    int p = 0;
    while (x >= 999.5 && p < 4) {
        x /= 1000;
        p++;
    }
    fprintf(f, "%.3g %s%s", x, prefix[p], unit);
}

static void print_kernel(FILE *f, const Kernel *k)
{
    double flops, bytes;
    ir_kernel_cost(k, &flops, &bytes);
    fprintf(f, "  kernel k%d %s (", k->id, k->name);
    for (int i = 0; i < k->nnodes; i++)
        fprintf(f, "%s%%%d", i ? ", " : "", k->nodes[i]->id);
    fputs(")  # ", f);
    print_si(f, flops, "FLOP, ");
    print_si(f, bytes, "B, ");
    fprintf(f, "%.3g FLOP/B\n", bytes > 0 ? flops / bytes : 0.0);
    ir_print_notes(f, &k->notes, 4);
    print_block(f, &k->body, 2);
}

void ir_print_notes(FILE *f, const Notes *ns, int indent)
{
    for (int i = 0; i < ns->n; i++)
        for (const char *p = ns->v[i]; *p;) {
            size_t len = strcspn(p, "\n");
            fprintf(f, "%*s# %.*s\n", indent, "", (int)len, p);
            p += len + (p[len] == '\n');
        }
}

void ir_print_module(FILE *f, const Module *m)
{
    ir_print_graph(f, m);
    if (m->prog)
        ir_print_prog(f, m);
}

char *ir_module_text(const Module *m)
{
    FILE *f = arena_stream(m->a);
    ir_print_module(f, m);
    return arena_stream_text(m->a, f);
}

/* "prog NAME" or "open NAME", then the program's notes, buffers, arena
 * and kernels. */
static void print_section(FILE *f, const char *what, const Module *m, const Prog *p)
{
    fprintf(f, "%s %s\n", what, m->name);
    ir_print_notes(f, &p->notes, 2);
    for (int i = 0; i < p->nbufs; i++)
        print_buf(f, p->bufs[i]);
    if (p->arena_bytes)
        fprintf(f, "  arena %lld\n", (long long)p->arena_bytes);
    for (int i = 0; i < p->nkernels; i++)
        print_kernel(f, p->kernels[i]);
}

void ir_print_prog(FILE *f, const Module *m)
{
    print_section(f, "prog", m, m->prog);
    if (m->open)
        print_section(f, "open", m, m->open);
}
