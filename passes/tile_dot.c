/* passes/tile_dot.c: dot products summed in lanes become calls of dot.
 *
 * A dot product written in L lanes, the lanes then summed by halving (the
 * shape attention's lowering wrote per score before it became calls of
 * attn; loop IR may still hold it):
 *
 *     for l in 0..L vector:            P[l] = 0.0
 *     for c in 0..C reduce:            (no loop when C = 1)
 *       for l in 0..L vector:          P[l] += A[.., c*L + l] * B[.., c*L + l]
 *     for l in 0..L/2 vector:          P[l] += P[l + L/2]
 *     ...
 *     for l in 0..2 vector:            P[l] += P[l + 2]
 *
 * which is, statement for statement, `call dot(P[0 +: L], A[.., x +: C*L],
 * B[.., y +: C*L])` (ir/ir.h: the same sums in the same order, so the same
 * bits): one call of a micro-kernel cc built, where libtcc would compile
 * the loops as scalar code. The sequence must match exactly: P a local
 * [L], L a power of two; A and B read at their last index c*L + l + a
 * loop-invariant start, their other indices invariant, in f32 storage
 * whose last dim is contiguous; every halving step present. Anything else
 * stays loops. */
#include "tile.h"

#include <math.h>

/* s is `for v in 0..n` with one statement in its body; that statement. */
static Stmt *only(const Stmt *s, int64_t n)
{
    if (!tile_const_loop(s) || s->lo->i != 0 || tile_trip(s) != n || s->body.n != 1)
        return NULL;
    return s->body.s[0];
}

/* st is `P[v + off] op= ...` for P a local [L]. */
static int lane_store(const Stmt *st, const Buf *P, const Var *v, AsgOp op)
{
    int affine = 1;
    return st && st->kind == S_STORE && st->buf == P && st->op == op &&
           ir_expr_coef(st->idx[0], v, &affine) == 1 && affine &&
           st->idx[0]->kind == E_VAR;
}

/* e loads a row of f32 storage along its contiguous last dim at c*L + l
 * (c NULL: at l) plus an invariant start; the tile from that start. */
static int row_tile(Tiler *t, const Expr *e, const Var *c, const Var *l, int64_t L, int64_t n,
                    Tile *tile)
{
    if (e->kind != E_LOAD || e->buf->dtype != DT_F32 || ir_storage(e->buf)->store != ST_F32)
        return 0;
    Buf *b = e->buf;
    int r = b->rank, affine = 1;
    if (r < 1 || b->strides[r - 1] != 1)
        return 0;
    for (int d = 0; d < r; d++) {
        int64_t cl = ir_expr_coef(e->idx[d], l, &affine);
        int64_t cc = c ? ir_expr_coef(e->idx[d], c, &affine) : 0;
        if (!affine || cl != (d == r - 1) || cc != (c && d == r - 1 ? L : 0))
            return 0;
    }
    tile->buf = b;
    tile->idx = arena_alloc(t->a, sizeof *tile->idx * (size_t)r);
    for (int d = 0; d < r; d++) {
        Expr *x = ir_subst(t->a, e->idx[d], l, e_int(t->a, 0));
        tile->idx[d] = c ? ir_subst(t->a, x, c, e_int(t->a, 0)) : x;
        tile->ext[d] = d == r - 1 ? n : 1;
    }
    return 1;
}

/* The statements blk->s[at..] as one dot; how many, or 0. */
static int match(Tiler *t, Block *blk, int at, Stmt **call)
{
    Stmt *s = blk->s[at];
    if (s->kind != S_LOOP || s->hi->kind != E_INT)
        return 0;
    int64_t L = s->hi->i;
    Stmt *fill = only(s, L);
    if (L < 1 || (L & (L - 1)) || !fill || fill->kind != S_STORE || fill->buf->kind != BK_LOCAL ||
        fill->buf->rank != 1 || fill->buf->dims[0] != L || fill->e->kind != E_FLT ||
        fill->e->f != 0 || signbit(fill->e->f) || !lane_store(fill, fill->buf, s->v, A_SET) || at + 1 >= blk->n)
        return 0;
    Buf *P = fill->buf;
    Stmt *lanes = blk->s[at + 1], *c = NULL, *acc;
    int64_t C = 1;
    if ((acc = only(lanes, L)) == NULL || acc->kind != S_STORE) {
        c = lanes;                /* for c in 0..C: for l in 0..L */
        if (c->kind != S_LOOP || c->hi->kind != E_INT || !(lanes = only(c, c->hi->i)) ||
            !(acc = only(lanes, L)))
            return 0;
        C = c->hi->i;
    }
    if (C < 1 || !lane_store(acc, P, lanes->v, A_ADD) || acc->e->kind != E_BIN ||
        acc->e->op != B_MUL)
        return 0;
    Tile tiles[3] = {{P, NULL, {L}}};
    tiles[0].idx = arena_alloc(t->a, sizeof *tiles[0].idx);
    tiles[0].idx[0] = e_int(t->a, 0);
    const Var *cv = c ? c->v : NULL;
    if (!row_tile(t, acc->e->a, cv, lanes->v, L, C * L, &tiles[1]) ||
        !row_tile(t, acc->e->b, cv, lanes->v, L, C * L, &tiles[2]))
        return 0;
    int n = 2;
    for (int64_t w = L / 2; w >= 2; w /= 2, n++) {   /* halving: P[l] += P[l + w] */
        if (at + n >= blk->n)
            return 0;
        Stmt *h = blk->s[at + n], *st = only(h, w);
        int affine = 1;
        if (!lane_store(st, P, h->v, A_ADD) || st->e->kind != E_LOAD || st->e->buf != P ||
            ir_expr_coef(st->e->idx[0], h->v, &affine) != 1 || !affine)
            return 0;
        Expr *off = ir_subst(t->a, st->e->idx[0], h->v, e_int(t->a, 0));
        if (off->kind != E_INT || off->i != w)
            return 0;
    }
    Block scratch = {0};
    *call = s_call(t->a, &scratch, CALL_DOT, tiles, 3);
    return ir_call_refusal(t->a, *call) ? 0 : n;
}

void tile_dots(Tiler *t, Block *blk)
{
    for (int i = 0; i < blk->n; i++) {
        Stmt *s = blk->s[i], *call;
        int n = match(t, blk, i, &call);
        if (n) {
            blk->s[i] = call;
            for (int j = i + 1; j + n - 1 < blk->n; j++)
                blk->s[j] = blk->s[j + n - 1];
            blk->n -= n - 1;
            t->kn[t->k->id].changed = 1;
            if (!t->kn[t->k->id].dots++) {
                int64_t m, cols, ld;
                ir_tile_matrix(&call->tiles[1], &m, &cols, &ld);
                tile_note(t, NULL, NULL, NULL, "dot products of %lld in %lld lanes summed by "
                          "halving: calls of dot", (long long)cols,
                          (long long)call->tiles[0].ext[0]);
            }
            continue;
        }
        if (s->kind == S_LOOP || s->kind == S_IF) {
            tile_dots(t, &s->body);
            tile_dots(t, &s->els);
        }
    }
}
