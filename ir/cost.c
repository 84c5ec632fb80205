/* ir/cost.c: what a kernel costs, for dumps and profiles, and the rule
 * of FLOPs that passes/parallelize.c sizes work by.
 *
 * FLOPs: every f32 operator in a statement counts its scalar.def row's
 * figure (one, sigmoid three; conversions none), an f32 accumulation's
 * + or max one, a call what its kernel does (gemm: 2mnk), times the trip
 * counts of the loops around it.
 * A loop whose bounds are known only at run time (attention's keys up to
 * pos + t) counts at its largest extent: the size of the buffer dimension
 * its variable indexes. Bytes: every storage the kernel loads from or
 * stores to, counted once at its full size (a lower bound on traffic,
 * and the figure a roofline needs). */
#include "ir.h"

#include <string.h>

static const int binop_flops[B_COUNT] = {
#define BIN(e, kir, c, c_int, vec, flops, prec) [B_##e] = flops,
#define UN(e, ...)
#include "scalar.def"
#undef BIN
#undef UN
};
static const int unop_flops[U_COUNT] = {
#define BIN(e, ...)
#define UN(e, kir, c, c_int, vec, flops, ...) [U_##e] = flops,
#include "scalar.def"
#undef BIN
#undef UN
};

double ir_expr_op_flops(const Expr *e)
{
    if (e->type != T_F32)
        return 0;
    return e->kind == E_BIN ? binop_flops[e->op] : e->kind == E_UN ? unop_flops[e->op] : 0;
}

double ir_stmt_op_flops(const Stmt *s)
{
    if (s->kind == S_CALL)
        return ir_call_flops(s);
    return (s->kind == S_SET || s->kind == S_STORE) && s->op != A_SET && s->e->type == T_F32;
}

static double expr_flops(const Expr *e)
{
    if (!e)
        return 0;
    return expr_flops(e->a) + expr_flops(e->b) + expr_flops(e->c) + ir_expr_op_flops(e);
}

/* The extent v takes in blk: a constant, or the size of a dimension it
 * indexes directly. */
typedef struct {
    const Var *v;
    int64_t size;
} Extent;

static void dim_of(const Expr *e, Extent *x)
{
    if (!e)
        return;
    if (e->kind == E_LOAD)
        for (int i = 0; i < e->buf->rank; i++) {
            if (e->idx[i]->kind == E_VAR && e->idx[i]->v == x->v && e->buf->dims[i] > x->size)
                x->size = e->buf->dims[i];
            dim_of(e->idx[i], x);
        }
    dim_of(e->a, x);
    dim_of(e->b, x);
    dim_of(e->c, x);
}

static void dim_in(Expr *e, void *ctx) { dim_of(e, ctx); }

static void stmt_dims(Stmt *s, void *ctx)
{
    Extent *x = ctx;
    ir_stmt_exprs(s, dim_in, ctx);
    if (s->kind == S_STORE)
        for (int i = 0; i < s->buf->rank; i++)
            if (s->idx[i]->kind == E_VAR && s->idx[i]->v == x->v && s->buf->dims[i] > x->size)
                x->size = s->buf->dims[i];
}

double ir_loop_trips(const Stmt *loop)
{
    if (loop->lo->kind == E_INT && loop->hi->kind == E_INT)
        return (double)(loop->hi->i > loop->lo->i ? loop->hi->i - loop->lo->i : 0);
    Extent x = {loop->v, 1};
    ir_block_walk((Block *)&loop->body, stmt_dims, &x);
    return (double)x.size;
}

/* FLOPs of blk; attn: of its attention calls alone. */
static double block_flops(const Block *blk, int attn)
{
    double f = 0;
    for (int i = 0; i < blk->n; i++) {
        const Stmt *s = blk->s[i];
        switch (s->kind) {
        case S_LOOP: f += ir_loop_trips(s) * block_flops(&s->body, attn); break;
        case S_IF:
            f += (attn ? 0 : expr_flops(s->e)) + block_flops(&s->body, attn) +
                 block_flops(&s->els, attn);
            break;
        case S_LET:
        case S_SET:
        case S_STORE:
        case S_CALL:
            if (!attn)
                f += expr_flops(s->e) + ir_stmt_op_flops(s);
            else if (s->kind == S_CALL && s->call == CALL_ATTN)
                f += ir_stmt_op_flops(s);
            break;
        case S_CHECK:
        case S_LOCAL: break;
        }
    }
    return f;
}

typedef struct {
    const Buf *seen[256];
    int n;
    double bytes;
} Touch;

static void touch(Touch *t, const Buf *b)
{
    if (b->kind == BK_LOCAL)
        return;
    for (int i = 0; i < t->n; i++)
        if (t->seen[i] == b)
            return;
    if (t->n < 256)
        t->seen[t->n++] = b;
    t->bytes += (double)storage_bytes((b->base ? b->base : b)->store, shape_count(b->rank, b->dims));
}

static void touch_buf(Buf *b, int how, void *ctx)
{
    (void)how;
    touch(ctx, b);
}

void ir_kernel_cost(const Kernel *k, double *flops, double *bytes)
{
    Touch t;
    memset(&t, 0, sizeof t);
    ir_block_bufs((Block *)&k->body, touch_buf, &t);
    *flops = block_flops(&k->body, 0);
    *bytes = t.bytes;
}

double ir_kernel_attn_flops(const Kernel *k)
{
    return block_flops(&k->body, 1);
}
