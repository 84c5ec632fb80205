/* passes/parallelize.c: parallel loops with enough work, one per kernel
 * or siblings inside a reduction.
 *
 * Contract: marks one loop of each kernel (of the program, and of the
 * open program when there is one) MARK_PARALLEL, or, failing that,
 * sibling loops inside a reduction loop (step 4); never one inside
 * another; and notes in every kernel the loops chosen and their work, or
 * why the kernel stays serial. Codegen outlines the marked loop's body
 * and calls it through rt_parallel_for, whose pool shares the iterations
 * out among threads dynamically. Numbers do not change with the thread
 * count, nor with which thread runs an iteration: a parallel loop's
 * iterations touch disjoint elements
 * (ir_loop_independent), and a reduction loop is never split, so every
 * sum adds the same terms in the same order on 1 thread or 64.
 *
 * Work: the f32 operations, loads and stores of one run of the loop (a
 * copy does no FLOP yet moves memory), loops with a run-time bound
 * counted at their largest extent; FLOPs by ir/cost.c's rule, as the
 * kernel costs in dumps and profiles count them. A run costs a fork and a join, about
 * 0.3 us with spinning threads on 2 cores and more on bigger machines;
 * below MIN_WORK = 64k operations (2 us of vectorised code, 20 us of
 * scalar code) the threads would spend about as long meeting as working.
 *
 * Algorithm, per kernel:
 * 1. Candidates by depth: the kernel's top-level loops first, then the
 *    loops directly in their bodies (through loops that are neither
 *    reductions nor vector lanes), and so on.
 * 2. A candidate qualifies when it is not a reduction or vector loop, has
 *    constant bounds and at least 2 iterations, its iterations are
 *    independent, and its work reaches MIN_WORK. At the shallowest depth
 *    with a qualifier, the one with the most work wins: decode's T = 1 row
 *    loop has one iteration, so the output-feature loop inside it wins.
 * 3. Mark it and note "parallel over i1 (288 iterations, ...)".
 * 4. Else, inside a reduction: the reduction loops met in step 1 (not
 *    vector lanes), shallowest first; in the first whose body holds
 *    qualifiers (directly, or in an `if` directly in it), every one of
 *    them is marked: a fork and join per iteration of the reduction,
 *    whose iterations still run in order, so each sum keeps its order.
 *    moe's experts kernel is the case: its loop over the kept experts
 *    adds each expert's part into the output, and the gemms of one expert
 *    (gate and up over the intermediate rows, then down over the output
 *    rows) are what splits. Noted "parallel over i4, i8 inside reduction
 *    i2 (4 iterations, a fork and join each; 789k FLOP, ... an iteration)".
 * 5. Otherwise note why not: too little work in all, or the reason of the
 *    shallowest candidate with the most work. */
#include "passes.h"

#define MIN_WORK 64e3

typedef struct {
    double flops, mem;                   /* f32 operations; loads + stores */
} Work;

static void expr_work(const Expr *e, Work *w)
{
    if (!e)
        return;
    if (e->kind == E_LOAD) {
        w->mem += 1;
        for (int i = 0; i < e->buf->rank; i++)
            expr_work(e->idx[i], w);
    }
    w->flops += ir_expr_op_flops(e);
    expr_work(e->a, w);
    expr_work(e->b, w);
    expr_work(e->c, w);
}

static Work block_work(const Block *blk)
{
    Work w = {0, 0};
    for (int i = 0; i < blk->n; i++) {
        const Stmt *s = blk->s[i];
        if (s->kind == S_LOOP) {
            Work b = block_work(&s->body);
            double n = ir_loop_trips(s);
            w.flops += n * b.flops;
            w.mem += n * b.mem;
            continue;
        }
        expr_work(s->e, &w);
        if (s->kind == S_STORE) {
            w.mem += 1;
            for (int d = 0; d < s->buf->rank; d++)
                expr_work(s->idx[d], &w);
        }
        w.flops += ir_stmt_op_flops(s);
        if (s->kind == S_CALL)            /* each operand element once */
            for (int t = 0; t < s->ntiles; t++)
                w.mem += (double)shape_count(s->tiles[t].buf->rank, s->tiles[t].ext);
        if (s->kind == S_IF) {
            Work b = block_work(&s->body), e = block_work(&s->els);
            w.flops += b.flops + e.flops;
            w.mem += b.mem + e.mem;
        }
    }
    return w;
}

static Work loop_work(Stmt *s)
{
    Block one = {&s, 1, 1};
    return block_work(&one);
}

/* 1.1G, 166k, 288: three significant digits and an SI prefix. */
static const char *si(Arena *a, double x)
{
    const char *unit[] = {"", "k", "M", "G", "T"};
    int u = 0;
    while (x >= 1000 && u < 4)
        x /= 1000, u++;
    return arena_printf(a, "%.3g%s", x, unit[u]);
}

static const char *work_str(Arena *a, Work w)
{
    return arena_printf(a, "%s FLOP, %s loads/stores", si(a, w.flops),
                        si(a, w.mem));
}

/* Why s cannot be the parallel loop, or NULL when it can. */
static const char *refusal(Arena *a, Stmt *s, Work w)
{
    const char *why;
    if (s->marks & MARK_REDUCE)
        return arena_printf(a, "i%d carries a reduction", s->v->id);
    if (s->marks & MARK_VECTOR)
        return arena_printf(a, "i%d is vector lanes", s->v->id);
    if (s->lo->kind != E_INT || s->hi->kind != E_INT)
        return arena_printf(a, "i%d has a run-time bound", s->v->id);
    if (s->hi->i - s->lo->i < 2)
        return arena_printf(a, "i%d has %lld iteration%s", s->v->id,
                            (long long)(s->hi->i - s->lo->i), s->hi->i - s->lo->i == 1 ? "" : "s");
    if (!ir_loop_independent(a, s, &why))
        return arena_printf(a, "i%d cannot be split: %s", s->v->id, why);
    if (w.flops + w.mem < MIN_WORK)
        return arena_printf(a, "i%d does %s, below the %s operations a fork and join pay for",
                            s->v->id, work_str(a, w), si(a, MIN_WORK));
    return NULL;
}

/* Appends the loops directly in blk to the next depth's candidates. */
static void loops_in(Arena *a, const Block *blk, Stmt ***v, int *n, int *cap)
{
    for (int i = 0; i < blk->n; i++)
        if (blk->s[i]->kind == S_LOOP)
            ARR_PUSH(a, *v, *n, *cap, blk->s[i]);
}

static int has_parallel(const Block *blk)
{
    for (int i = 0; i < blk->n; i++) {
        const Stmt *s = blk->s[i];
        if ((s->kind == S_LOOP && (s->marks & MARK_PARALLEL)) || has_parallel(&s->body) ||
            has_parallel(&s->els))
            return 1;
    }
    return 0;
}

/* Among the candidates of one depth, the one that qualifies with the most
 * work (NULL if none, *why then the reason of the one with the most work
 * refused); the loops one level deeper go to *next. */
static Stmt *pick(Arena *a, Stmt **cur, int n, Work *best_work, const char **why,
                  Stmt ***next, int *nnext)
{
    Stmt *best = NULL;
    double most = -1;
    int cap = 0;
    *nnext = 0;
    for (int i = 0; i < n; i++) {
        Stmt *s = cur[i];
        Work w = loop_work(s);
        const char *no = refusal(a, s, w);
        if (!no && (!best || w.flops + w.mem > best_work->flops + best_work->mem))
            best = s, *best_work = w;
        if (no && w.flops + w.mem > most)
            *why = no, most = w.flops + w.mem;
        if (!(s->marks & (MARK_REDUCE | MARK_VECTOR)))
            loops_in(a, &s->body, next, nnext, &cap);
    }
    return best;
}

/* Step 4 in reduction loop r: its qualifying loops, directly in its body
 * or in an `if` there, marked and noted; 0 when none qualifies. */
static int inside_reduction(Arena *a, Kernel *k, Stmt *r)
{
    Stmt **in = NULL;
    int n = 0, cap = 0, marked = 0;
    loops_in(a, &r->body, &in, &n, &cap);
    for (int i = 0; i < r->body.n; i++)
        if (r->body.s[i]->kind == S_IF) {
            loops_in(a, &r->body.s[i]->body, &in, &n, &cap);
            loops_in(a, &r->body.s[i]->els, &in, &n, &cap);
        }
    FILE *f = arena_stream(a);
    Work all = {0, 0};
    for (int i = 0; i < n; i++) {
        Work w = loop_work(in[i]);
        if (refusal(a, in[i], w))
            continue;
        in[i]->marks |= MARK_PARALLEL;
        fprintf(f, "%si%d", marked++ ? ", " : "", in[i]->v->id);
        all.flops += w.flops, all.mem += w.mem;
    }
    const char *loops = arena_stream_text(a, f);
    if (marked)
        ir_note(a, &k->notes, "parallelize: parallel over %s inside reduction i%d (%lld "
                "iterations, a fork and join each; %s an iteration)", loops, r->v->id,
                (long long)ir_loop_trips(r), work_str(a, all));
    return marked > 0;
}

static int parallelize_kernel(Arena *a, Kernel *k)
{
    if (has_parallel(&k->body))
        return 0;
    Work all = block_work(&k->body);
    if (all.flops + all.mem < MIN_WORK) {
        ir_note(a, &k->notes, "parallelize: serial: %s in all, below the %s operations a "
                "fork and join pay for", work_str(a, all), si(a, MIN_WORK));
        return 0;
    }
    Stmt **cur = NULL, **red = NULL;
    int n = 0, cap = 0, nred = 0, capred = 0;
    loops_in(a, &k->body, &cur, &n, &cap);
    const char *reason = NULL;
    while (n) {
        for (int i = 0; i < n; i++)
            if ((cur[i]->marks & (MARK_REDUCE | MARK_VECTOR)) == MARK_REDUCE)
                ARR_PUSH(a, red, nred, capred, cur[i]);
        Stmt **next = NULL;
        const char *why = NULL;
        Work w = {0, 0};
        int nnext;
        Stmt *s = pick(a, cur, n, &w, &why, &next, &nnext);
        if (s) {
            s->marks |= MARK_PARALLEL;
            ir_note(a, &k->notes, "parallelize: parallel over i%d (%lld iterations, %s)",
                    s->v->id, (long long)(s->hi->i - s->lo->i), work_str(a, w));
            return 1;
        }
        reason = reason ? reason : why;
        cur = next, n = nnext;
    }
    for (int i = 0; i < nred; i++)
        if (inside_reduction(a, k, red[i]))
            return 1;
    ir_note(a, &k->notes, "parallelize: serial: %s", reason ? reason : "it has no loop");
    return 0;
}

int pass_parallelize(Module *m, PassCtx *cx)
{
    (void)cx;
    if (!m->prog)
        return 0;
    int changed = 0;
    for (int i = 0; i < m->prog->nkernels; i++)
        changed |= parallelize_kernel(m->a, m->prog->kernels[i]);
    for (int i = 0; m->open && i < m->open->nkernels; i++)
        changed |= parallelize_kernel(m->a, m->open->kernels[i]);
    return changed;
}
