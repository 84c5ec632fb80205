/* passes/fuse.c: producer-consumer loop fusion.
 *
 * Contract: takes the loop IR (after canonicalize-memrefs) and returns one
 * that computes every output and state bit for bit as before, in fewer
 * kernels: a consumer's loop nest runs inside its producer's, right after
 * the producer's work for the same element or row, and an intermediate
 * no other kernel reads is no longer stored (a register, or a local row).
 * Each side keeps its operations in their order and no reduction is
 * split, so results do not change. Every producer/consumer pair of input
 * kernels gets a program note with the decision on it, and why (kernel
 * and buffer ids are the input's); fused kernels list all their nodes,
 * are named after their parts, and note what they hold.
 *
 * Terms. A kernel's *chain* is its perfect outer nest (fuse.h). A kernel
 * accesses a storage *by rows at depth d* when every load and store of it
 * goes through one Buf whose first d indices are the chain's first d loop
 * variables: iteration x of those loops touches row x only; at d equal to
 * the rank, *by points*. A pair (P writes what C reads) can fuse at the
 * shallower of the depths P and C access those storages by. Fusing C into
 * P at depth d (their first d loops alike) appends C's body below its
 * d-th loop to P's: C's work moves up to P's place and, for each x, runs
 * right after P's work for x.
 *
 * 1. Note why the writer of each storage cannot fuse, if so: several
 *    writers; a state, written in place by cache_write; run-time checks;
 *    no single loop nest; not written by rows.
 * 2. By points (element-wise chains, epilogues): for each consumer C in
 *    program order, its producers whose pairs fuse at full rank are
 *    candidates. When several qualify and two are siblings (same loops, an
 *    input in common: gate and up), the later merges into the earlier: one
 *    nest, loops of equal bounds zipped, so the two gemms share one
 *    reduction loop with two accumulators. C fuses into the last candidate
 *    and reads what the others wrote from memory.
 * 3. By rows (a norm into its consumer): for each consumer in program
 *    order, a pair at a depth d below the rank fuses when only C reads
 *    the rows and they are not an output (else they are stored anyway:
 *    only recomputing them per reader would save the pass over memory), a
 *    row fits in L1d, and it costs less than it saves. It pins C's first
 *    d loops outermost around a local row, so (a) only they can run in
 *    parallel (a parallel loop cannot read a local declared outside it):
 *    refused with fewer rows than cores; (b) what C reads in every row (a
 *    linear's weights) is read once per row, where tile would reuse it
 *    across a block of rows: refused when that exceeds L2/2, tile's block
 *    budget.
 *    Legality, in 2 and 3: no kernel between P and C writes what C reads
 *    or touches what C writes; P touches nothing C writes; whatever P
 *    writes and C reads, both access by rows at the fusion depth through
 *    the same Buf (a view, or another index, would need recomputation).
 * 4. Sibling matmuls with no consumer in common (q, k and v, read by
 *    rope and the cache writes, which cannot fuse): kernels computing a
 *    linear or matmul node, with the same chain, that read one storage
 *    that is not a weight merge into the first of them as in step 2,
 *    zipped, when they are independent, nothing between is in the way of
 *    the later one moving up, and the zipped reduction keeps at most
 *    FUSE_MAX_ZIP accumulators (what tile blocks as one gemm nest). One
 *    kernel instead of three: one fork and join, and one run of weight
 *    streams the prefetchers follow, where each small gemm paid its own.
 *    Other kernels reading one input (norms, attention, top-k) keep
 *    their own nests, which tile and the JIT's kernels know by shape.
 * 5. Steps 2 to 4 repeat until a round fuses nothing: a fusion can clear
 *    the way for another (a kernel in between, or another reader, joins
 *    the consumer). A pair's note is its last decision.
 * 6. Intermediates of the fusions that only one kernel now touches (temps,
 *    not views) are contracted: one store read afterwards in its block at
 *    the same index becomes a `let` (or its value, a variable or a
 *    constant); else its rows become a local (S_LOCAL) below the d-th
 *    loop. Outputs, and buffers read elsewhere, keep their stores.
 * 7. Fused kernels get their names and sorted nodes; the notes are
 *    written, ordered by consumer; buffers no kernel uses are dropped, and
 *    the arena is laid out again. */
#include "fuse.h"

#include <stdlib.h>
#include <string.h>

enum { CL_NONE, CL_POINT, CL_ROW };        /* how a pair can fuse */

typedef enum { D_FUSE, D_MERGE } DecKind;

/* The last decision on one pair of input kernels. */
typedef struct {
    int c, p;                     /* consumer, producer (input ids) */
    DecKind kind;
    const char *text;
} Decision;

typedef struct {
    Arena *a;
    Prog *p;
    int64_t row_limit;            /* bytes in a local row: L1d */
    int64_t reuse_limit;          /* bytes a row-fused C may read per row: L2/2 */
    int cores;
    int nk, nb;                   /* kernels and buffers of the input */
    Kernel **home;                /* input kernel i's work is now in home[i] */
    char **touched;               /* by kernel id: touch(), NULL once it changed */
    const char **oname;           /* input kernel names, FLOPs, reductions */
    double *oflops;
    char *oreduce;
    char **oflags;                /* oflags[i][b]: FUSE_RD|FUSE_WR of b by kernel i */
    int *writer;                  /* storage b's one writer; -1 none, -2 several */
    const char **why;             /* why its writer cannot fuse, or NULL */
    Decision *dec;
    int ndec, capdec;
    Buf **mids;                   /* intermediates of fusions, in order */
    int nmids, capmids;
    int changed;
} Fuse;

/* What one producer writes that one consumer reads. */
typedef struct {
    Kernel *p;
    int at;                       /* p's position */
    int w, c;                     /* writer and reader, input ids (notes) */
    int *s, ns, caps;             /* storages (buffer ids) */
    int d;                        /* fusion depth: the shallowest row depth */
    int cls;                      /* CL_POINT when d is every storage's rank */
    const char *why;              /* CL_NONE: why not */
} Pair;

/* k's position in the program; -1 once it joined another kernel. */
static int find(const Fuse *f, const Kernel *k)
{
    for (int i = 0; i < f->p->nkernels; i++)
        if (f->p->kernels[i] == k)
            return i;
    return -1;
}

static int pos(const Fuse *f, const Kernel *k)
{
    int i = find(f, k);
    if (i < 0)
        KILN_BUG("k%d is not in the program", k->id);
    return i;
}

/* What k touches, cached by kernel id until k changes (fuse, contract):
 * the analyses ask for every kernel often, and walking each again would
 * make a long chain fuse in quadratic time. */
static char *touch(Fuse *f, Kernel *k)
{
    if (!f->touched[k->id])
        f->touched[k->id] = fuse_touch(f->a, f->p, k);
    return f->touched[k->id];
}

/* ---- notes --------------------------------------------------------------- */

/* Records the decision on pair (c, p), replacing an earlier one: a later
 * round sees the program as it ends up. */
static void decide(Fuse *f, DecKind kind, int c, int p, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void decide(Fuse *f, DecKind kind, int c, int p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = arena_alloc(f->a, (size_t)len + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)len + 1, fmt, ap);
    va_end(ap);
    for (int i = 0; i < f->ndec; i++)
        if (f->dec[i].c == c && f->dec[i].p == p && f->dec[i].kind == kind) {
            f->dec[i].text = s;
            return;
        }
    Decision dc = {c, p, kind, s};
    ARR_PUSH(f->a, f->dec, f->ndec, f->capdec, dc);
}

/* The first input kernel now in k that touches storage b as `how`. */
static int member(const Fuse *f, const Kernel *k, int b, int how)
{
    for (int i = 0; i < f->nk; i++)
        if (f->home[i] == k && b < f->nb && (f->oflags[i][b] & how))
            return i;
    return k->id;
}

/* "k3 gemm_n8960_k1536": an input kernel. */
static const char *kname(Fuse *f, int i) { return arena_printf(f->a, "k%d %s", i, f->oname[i]); }

/* ---- 1. why a writer cannot fuse ----------------------------------------- */

/* Storage b's one writing kernel, and why it cannot fuse, if so. */
static void find_writer(Fuse *f, int b)
{
    int w = -1, nw = 0, second = -1;
    for (int i = 0; i < f->nk; i++)
        if (f->oflags[i][b] & FUSE_WR) {
            if (nw++ == 0)
                w = i;
            else if (nw == 2)
                second = i;
        }
    f->writer[b] = nw > 1 ? -2 : w;
    if (nw == 0)
        return;
    if (nw > 1) {
        f->why[b] = arena_printf(f->a, "b%d is written by k%d and k%d", b, w, second);
        return;
    }
    Kernel *k = f->p->kernels[w];
    Stmt *L[FUSE_MAXD];
    Buf *via;
    if (f->p->bufs[b]->kind == BK_STATE)
        f->why[b] = arena_printf(f->a, "b%d is a state, written in place by %s", b, kname(f, w));
    else if (fuse_traits(k).check)
        f->why[b] = arena_printf(f->a, "%s has run-time checks", kname(f, w));
    else if (fuse_traits(k).call)
        f->why[b] = arena_printf(f->a, "%s calls micro-kernels (tiled already)", kname(f, w));
    else if (fuse_chain(k, L) == 0)
        f->why[b] = arena_printf(f->a, "%s is not a single loop nest", kname(f, w));
    else if (fuse_row_depth(k, f->p->bufs[b], &via) == 0)
        f->why[b] = arena_printf(f->a, "%s does not write b%d by rows of its loops", kname(f, w),
                                 b);
}

/* ---- pairs --------------------------------------------------------------- */

/* Why kernel k can take no part in a fusion; NULL when it can. */
static const char *unfit(Fuse *f, Kernel *k)
{
    FuseTraits t = fuse_traits(k);
    Stmt *L[FUSE_MAXD];
    if (t.state)
        return arena_printf(f->a, "%s writes state b%d in place", kname(f, k->id), t.state->id);
    if (t.check)
        return arena_printf(f->a, "%s has run-time checks", kname(f, k->id));
    if (t.call)
        return arena_printf(f->a, "%s calls micro-kernels (tiled already)", kname(f, k->id));
    if (fuse_chain(k, L) == 0)
        return arena_printf(f->a, "%s is not a single loop nest", kname(f, k->id));
    return NULL;
}

/* The last kernel before position `at` that writes storage b, or NULL. */
static Kernel *last_writer(Fuse *f, int b, int at)
{
    for (int i = at - 1; i >= 0; i--)
        if (touch(f, f->p->kernels[i])[b] & FUSE_WR)
            return f->p->kernels[i];
    return NULL;
}

/* Takes storage b into pair q's depth and kind: the rows both kernels
 * access it by, through the same Buf. */
static void classify_pair(Fuse *f, Pair *q, Kernel *c, const char *unfit_c, int b)
{
    Buf *vp, *vc, *s = f->p->bufs[b];
    int dp = fuse_row_depth(q->p, s, &vp), dc = fuse_row_depth(c, s, &vc);
    int d = dp < dc ? dp : dc;
    int w = member(f, q->p, b, FUSE_WR), r = member(f, c, b, FUSE_RD);
    if (f->why[b])
        q->why = f->why[b];
    else if (unfit_c)
        q->why = unfit_c;
    else if (vp != vc)
        q->why = arena_printf(f->a, "k%d reads b%d through b%d, k%d writes it through b%d "
                              "(another index)", r, b, vc->id, w, vp->id);
    else if (d == 0)
        q->why = arena_printf(f->a, "k%d reads b%d at another index than k%d writes it "
                              "(would recompute)", r, b, w);
    if (q->why) {
        q->cls = CL_NONE;
        return;
    }
    if (d < vp->rank)
        q->cls = CL_ROW;
    if (d < q->d)
        q->d = d;
}

static int by_pos(const void *x, const void *y)
{
    return ((const Pair *)x)->at - ((const Pair *)y)->at;
}

/* c's producers in program order, each with what it wrote that c reads. */
static int find_pairs(Fuse *f, Kernel *c, Pair **out)
{
    char *t = touch(f, c);
    int at = pos(f, c), n = 0, cap = 0;
    Pair *pr = NULL;
    for (int b = 0; b < f->nb; b++) {
        if (!(t[b] & FUSE_RD) || f->writer[b] == -1)
            continue;
        Kernel *p = f->writer[b] >= 0 ? f->home[f->writer[b]] : last_writer(f, b, at);
        if (!p || p == c || pos(f, p) > at)
            continue;
        int i = 0;
        while (i < n && pr[i].p != p)
            i++;
        if (i == n) {
            Pair z = {p, pos(f, p), f->writer[b] >= 0 ? f->writer[b] : member(f, p, b, FUSE_WR),
                      member(f, c, b, FUSE_RD), NULL, 0, 0, FUSE_MAXD, CL_POINT, NULL};
            ARR_PUSH(f->a, pr, n, cap, z);
        }
        ARR_PUSH(f->a, pr[i].s, pr[i].ns, pr[i].caps, b);
    }
    if (n > 1)
        qsort(pr, (size_t)n, sizeof *pr, by_pos);
    const char *unf = n ? unfit(f, c) : NULL;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < pr[i].ns && pr[i].cls != CL_NONE; j++)
            classify_pair(f, &pr[i], c, unf, pr[i].s[j]);
    *out = pr;
    return n;
}

/* "b3, b5": a pair's storages. */
static const char *bufs_str(Fuse *f, const Pair *q)
{
    const char *s = "";
    for (int j = 0; j < q->ns; j++)
        s = arena_printf(f->a, "%s%sb%d", s, j ? ", " : "", q->s[j]);
    return s;
}

/* ---- legality and cost --------------------------------------------------- */

/* Why x's work cannot move up to right after kernel `to`, past the
 * kernels between; NULL when it can. */
static const char *blocked(Fuse *f, Kernel *to, Kernel *x)
{
    char *tx = touch(f, x);
    for (int i = pos(f, to) + 1; i < pos(f, x); i++) {
        Kernel *k = f->p->kernels[i];
        char *tk = touch(f, k);
        for (int b = 0; b < f->nb; b++) {
            if ((tk[b] & FUSE_WR) && (tx[b] & FUSE_RD))
                return arena_printf(f->a, "k%d writes b%d, which k%d reads",
                                    member(f, k, b, FUSE_WR), b, member(f, x, b, FUSE_RD));
            if ((tk[b] & FUSE_WR) && (tx[b] & FUSE_WR))
                return arena_printf(f->a, "k%d also writes b%d", member(f, k, b, FUSE_WR), b);
            if ((tk[b] & FUSE_RD) && (tx[b] & FUSE_WR))
                return arena_printf(f->a, "k%d reads b%d, which k%d writes",
                                    member(f, k, b, FUSE_RD), b, member(f, x, b, FUSE_WR));
        }
    }
    return NULL;
}

static void count_stmt(Stmt *s, void *ctx)
{
    (void)s;
    ++*(int *)ctx;
}

static int stmts(Kernel *k)
{
    int n = 0;
    ir_block_walk(&k->body, count_stmt, &n);
    return n;
}

/* Why c's work cannot run inside p's nest at depth d; NULL when it can.
 * A fused body is bounded (FUSE_MAX_STMTS): past that, a kernel only
 * spills registers and compiles slowly, and each fusion's analysis walks
 * the whole body, so a long chain would fuse in quadratic time. */
static const char *clash(Fuse *f, Kernel *p, Kernel *c, int d)
{
    int size = stmts(p) + stmts(c);
    if (size > FUSE_MAX_STMTS)
        return arena_printf(f->a, "together k%d and k%d would hold %d statements, more than "
                            "%d", p->id, c->id, size, FUSE_MAX_STMTS);
    char *tp = touch(f, p), *tc = touch(f, c);
    for (int b = 0; b < f->nb; b++) {
        if ((tc[b] & FUSE_WR) && tp[b])
            return arena_printf(f->a, "k%d writes b%d, which k%d %s", member(f, c, b, FUSE_WR),
                                b, member(f, p, b, tp[b]), tp[b] & FUSE_WR ? "writes" : "reads");
        if (!((tp[b] & FUSE_WR) && (tc[b] & FUSE_RD)))
            continue;
        Buf *vp, *vc, *s = f->p->bufs[b];
        int dp = fuse_row_depth(p, s, &vp), dc = fuse_row_depth(c, s, &vc);
        int w = member(f, p, b, FUSE_WR), r = member(f, c, b, FUSE_RD);
        if (vp != vc)
            return arena_printf(f->a, "k%d reads b%d through b%d, k%d writes it through b%d "
                                "(another index)", r, b, vc->id, w, vp->id);
        if (dp < d || dc < d)
            return arena_printf(f->a, "k%d reads b%d at another index than k%d writes it "
                                "(would recompute)", r, b, w);
    }
    if (!fuse_same_rows(p, c, d))
        return arena_printf(f->a, "k%d and k%d do not share their outer %d loop%s", p->id,
                            c->id, d, d > 1 ? "s" : "");
    return NULL;
}

/* Why the rows (at depth d) of storage b, written by p, should not
 * become c's. */
static const char *rows_policy(Fuse *f, Kernel *p, Kernel *c, int b, int d)
{
    Buf *s = f->p->bufs[b];
    if (s->kind == BK_OUTPUT)
        return arena_printf(f->a, "b%d is an output, stored anyway", b);
    const char *others = NULL;
    for (int i = 0; i < f->p->nkernels; i++) {
        Kernel *k = f->p->kernels[i];
        if (k != p && k != c && (touch(f, k)[b] & FUSE_RD))
            others = arena_printf(f->a, "%s%sk%d", others ? others : "", others ? ", " : "",
                                  member(f, k, b, FUSE_RD));
    }
    if (others)
        return arena_printf(f->a, "b%d is also read by %s (would recompute)", b, others);
    int64_t bytes = shape_count(s->rank - d, s->dims + d) * 4;
    if (bytes > f->row_limit)
        return arena_printf(f->a, "a row of b%d is %lld bytes, more than L1d (%lld)", b,
                            (long long)bytes, (long long)f->row_limit);
    return NULL;
}

/* Why pinning c's first d loops outermost would cost more than rows
 * fused into c save (step 3, a and b). */
static const char *pinned(Fuse *f, Kernel *c, int d)
{
    Stmt *L[FUSE_MAXD];
    fuse_chain(c, L);
    int64_t rows = 1;
    for (int j = 0; j < d; j++) {
        if (L[j]->lo->kind != E_INT || L[j]->hi->kind != E_INT)
            return arena_printf(f->a, "k%d's row loops have run-time bounds", c->id);
        rows *= L[j]->hi->i - L[j]->lo->i;
    }
    if (rows < f->cores)
        return arena_printf(f->a, "%lld row%s for %d cores: a local row would leave k%d only "
                            "its row loop to run in parallel", (long long)rows,
                            rows == 1 ? "" : "s", f->cores, c->id);
    const char *which;
    int64_t bytes = fuse_row_invariant(f->a, f->p, c, d, &which);
    if (rows > 1 && bytes > f->reuse_limit)
        return arena_printf(f->a, "k%d reads %lld KiB (%s) in every row, more than L2/2 "
                            "(%lld KiB): by rows it would stream that once per row, not once "
                            "per block of rows", c->id, (long long)(bytes >> 10), which,
                            (long long)(f->reuse_limit >> 10));
    return NULL;
}

/* ---- fusing -------------------------------------------------------------- */

/* c's work into p's at depth d (zipped with it: siblings); c goes away. */
static int fuse(Fuse *f, Kernel *p, Kernel *c, int d, int zipping)
{
    int zipped = fuse_append(f->a, f->p, p, c, d, zipping);
    f->touched[p->id] = f->touched[c->id] = NULL;
    for (int i = 0; i < f->nk; i++)
        if (f->home[i] == c)
            f->home[i] = p;
    int at = pos(f, c);
    memmove(f->p->kernels + at, f->p->kernels + at + 1,
            sizeof *f->p->kernels * (size_t)(f->p->nkernels - at - 1));
    f->p->nkernels--;
    f->changed = 1;
    return zipped;
}

/* Notes the decision on pair q for every input kernel of c reading what
 * q's writers wrote (c may hold kernels fused before): fused, and how,
 * or not, and why. */
static void note_pair(Fuse *f, const Pair *q, Kernel *c, int done, const char *text)
{
    for (int j = 0; j < q->ns; j++) {
        int b = q->s[j], w = f->writer[b] >= 0 ? f->writer[b] : q->w;
        for (int r = 0; r < f->nk; r++) {
            if (f->home[r] != c || !(f->oflags[r][b] & FUSE_RD))
                continue;
            if (done)
                decide(f, D_FUSE, r, w, "fused %s -> %s: %s", kname(f, w), kname(f, r), text);
            else
                decide(f, D_FUSE, r, w, "not fused: k%d -> k%d: %s", w, r, text);
        }
    }
}

static void add_mids(Fuse *f, const Pair *q)
{
    for (int j = 0; j < q->ns; j++)
        ARR_PUSH(f->a, f->mids, f->nmids, f->capmids, f->p->bufs[q->s[j]]);
}

/* ---- 2. by points: element-wise chains and epilogues --------------------- */

/* Whether p1 and p2 (p1 first) are siblings that can become one nest at
 * depth d: same loops, an input in common, independent, and nothing
 * between them in the way of p2 moving up. *why: siblings that cannot. */
static int siblings(Fuse *f, Kernel *p1, Kernel *p2, int d, const char **why)
{
    if (!fuse_same_rows(p1, p2, d))
        return 0;
    char *t1 = touch(f, p1), *t2 = touch(f, p2);
    int shared = 0, both = -1;
    for (int b = 0; b < f->nb; b++) {
        shared |= (t1[b] & FUSE_RD) && (t2[b] & FUSE_RD);
        if (both < 0 && (((t1[b] & FUSE_WR) && t2[b]) || ((t2[b] & FUSE_WR) && t1[b])))
            both = b;
    }
    if (!shared)
        return 0;
    if (both >= 0)
        *why = arena_printf(f->a, "k%d and k%d both touch b%d, one writing it", p1->id, p2->id,
                            both);
    else
        *why = blocked(f, p1, p2);
    return *why == NULL;
}

/* Merges into the first candidate the later ones that are its siblings. */
static void merge_siblings(Fuse *f, Pair *pr, int m)
{
    Kernel *p1 = pr[0].p;
    for (int i = 1; i < m; i++) {
        const char *why = NULL;
        Kernel *p2 = pr[i].p;
        if (pr[i].d != pr[0].d || !siblings(f, p1, p2, pr[0].d, &why)) {
            if (why)
                decide(f, D_MERGE, pr[i].c, pr[i].w, "not merged: k%d into k%d: %s", pr[i].w,
                       p1->id, why);
            continue;
        }
        int zipped = fuse(f, p1, p2, pr[0].d, 1);
        decide(f, D_MERGE, pr[i].c, pr[i].w, "merged %s into %s: siblings feeding k%d",
               kname(f, pr[i].w), kname(f, p1->id), pr[i].c);
        ir_note(f->a, &p1->notes, "merged %s: sibling, %d loop%s zipped", kname(f, pr[i].w),
                zipped, zipped == 1 ? "" : "s");
        pr[i].p = p1;
    }
}

static void points(Fuse *f, Kernel *c)
{
    Pair *pr;
    int n = find_pairs(f, c, &pr), m = 0;
    for (int i = 0; i < n; i++) {
        if (pr[i].cls != CL_POINT)
            continue;                  /* rows, and what cannot fuse: step 3 */
        const char *why = clash(f, pr[i].p, c, pr[i].d);
        if (why)
            note_pair(f, &pr[i], c, 0, why);
        else
            pr[m++] = pr[i];          /* candidates, in program order */
    }
    if (m == 0)
        return;
    merge_siblings(f, pr, m);
    Kernel *t = pr[m - 1].p;
    int d = pr[m - 1].d;
    const char *why = blocked(f, t, c);
    if (!why)
        why = clash(f, t, c, d);
    for (int i = 0; i < m; i++) {
        Pair *q = &pr[i];
        if (why)
            note_pair(f, q, c, 0, why);
        else if (q->p != t)
            note_pair(f, q, c, 0, arena_printf(f->a, "fused into k%d instead, which runs later "
                                               "(%s read from memory)", pr[m - 1].w,
                                               bufs_str(f, q)));
        else {
            note_pair(f, q, c, 1, f->oreduce[q->w] ? "epilogue" : "element-wise");
            add_mids(f, q);
        }
    }
    if (why)
        return;
    ir_note(f->a, &t->notes, "fused %s: %s, per element", kname(f, c->id),
            fuse_traits(t).reduce ? "epilogue" : "element-wise");
    fuse(f, t, c, d, 0);
}

/* ---- 3. by rows ---------------------------------------------------------- */

static void rows(Fuse *f, Kernel *c)
{
    Pair *pr;
    int n = find_pairs(f, c, &pr);
    for (int i = 0; i < n; i++) {
        Pair *q = &pr[i];
        if (q->cls == CL_POINT)
            continue;                  /* decided in step 2 */
        const char *why = q->why;
        for (int j = 0; j < q->ns && !why; j++)
            why = rows_policy(f, q->p, c, q->s[j], q->d);
        if (!why)
            why = blocked(f, q->p, c);
        if (!why)
            why = clash(f, q->p, c, q->d);
        if (!why)
            why = pinned(f, c, q->d);
        if (why) {
            note_pair(f, q, c, 0, why);
            continue;
        }
        note_pair(f, q, c, 1, arena_printf(f->a, "by rows (%s per row, in the row loop)",
                                           bufs_str(f, q)));
        ir_note(f->a, &q->p->notes, "fused %s: per row of %s", kname(f, c->id), kname(f, q->w));
        add_mids(f, q);
        fuse(f, q->p, c, q->d, 0);
        return;                        /* the other pairs are stale: next round */
    }
}

/* ---- 4. siblings with no consumer in common ------------------------------ */

/* Whether k computes a linear or matmul node. */
static int matmul(const Kernel *k)
{
    for (int i = 0; i < k->nnodes; i++)
        if (k->nodes[i]->op == OP_LINEAR || k->nodes[i]->op == OP_MATMUL)
            return 1;
    return 0;
}

/* The first storage, not a weight, that p1 and p2 both read; -1 if none. */
static int shared_input(Fuse *f, Kernel *p1, Kernel *p2)
{
    char *t1 = touch(f, p1), *t2 = touch(f, p2);
    for (int b = 0; b < f->nb; b++)
        if ((t1[b] & FUSE_RD) && (t2[b] & FUSE_RD) && f->p->bufs[b]->kind != BK_WEIGHT)
            return b;
    return -1;
}

/* The lets ahead of the first loop below k's chain of depth d: a gemm's
 * accumulators, which a zip keeps ahead of the one reduction loop. */
static int lets_ahead(Kernel *k, int d)
{
    Stmt *L[FUSE_MAXD];
    fuse_chain(k, L);
    Block *blk = fuse_below(k, L, d);
    int n = 0;
    for (int i = 0; i < blk->n && blk->s[i]->kind != S_LOOP; i++)
        n += blk->s[i]->kind == S_LET;
    return n;
}

/* Why sibling p2 should not merge into p1 at depth d (past the limits of
 * one nest); NULL when it may. */
static const char *too_big(Fuse *f, Kernel *p1, Kernel *p2, int d)
{
    int accs = lets_ahead(p1, d) + lets_ahead(p2, d), size = stmts(p1) + stmts(p2);
    if (accs > FUSE_MAX_ZIP)
        return arena_printf(f->a, "together k%d and k%d would zip %d accumulators, more than "
                            "%d", p1->id, p2->id, accs, FUSE_MAX_ZIP);
    if (size > FUSE_MAX_STMTS)
        return arena_printf(f->a, "together k%d and k%d would hold %d statements, more than "
                            "%d", p1->id, p2->id, size, FUSE_MAX_STMTS);
    return NULL;
}

/* Merges into matmul p1 the later matmuls that are its siblings by a
 * shared input, whatever reads what they write. */
static void horizontal(Fuse *f, Kernel *p1)
{
    Stmt *L[FUSE_MAXD];
    int d = fuse_chain(p1, L);
    if (d == 0 || !matmul(p1) || unfit(f, p1))
        return;
    for (int at = pos(f, p1) + 1; at < f->p->nkernels; at++) {
        Kernel *p2 = f->p->kernels[at];
        int b = matmul(p2) ? shared_input(f, p1, p2) : -1;
        const char *why = NULL;
        if (b < 0 || fuse_chain(p2, L) != d || unfit(f, p2))
            continue;
        if (!siblings(f, p1, p2, d, &why) || (why = too_big(f, p1, p2, d))) {
            if (why)
                decide(f, D_MERGE, p2->id, p1->id, "not merged: k%d into k%d: %s", p2->id,
                       p1->id, why);
            continue;
        }
        const char *name = kname(f, p2->id);
        int zipped = fuse(f, p1, p2, d, 1);
        decide(f, D_MERGE, p2->id, p1->id, "merged %s into %s: siblings reading b%d, no "
               "consumer in common", name, kname(f, p1->id), b);
        ir_note(f->a, &p1->notes, "merged %s: sibling reading b%d, %d loop%s zipped", name, b,
                zipped, zipped == 1 ? "" : "s");
        at--;                          /* p2's place holds the next kernel now */
    }
}

/* ---- 6. contraction ------------------------------------------------------ */

static void contract(Fuse *f, Buf *s)
{
    if (s->kind != BK_TEMP || s->base)
        return;
    for (int i = 0; i < f->p->nbufs; i++)
        if (f->p->bufs[i]->base == s)
            return;
    Kernel *k = NULL;
    for (int i = 0; i < f->p->nkernels; i++)
        if (touch(f, f->p->kernels[i])[s->id]) {
            if (k)
                return;                /* read elsewhere: keeps its store */
            k = f->p->kernels[i];
        }
    int64_t bytes;
    if (!k)
        return;                        /* contracted already */
    /* buffer ids change when unused ones are dropped; node ids do not */
    const char *what = s->node ? arena_printf(f->a, "%%%d", s->node->id) : "a temporary";
    f->touched[k->id] = NULL;
    if (fuse_to_register(f->a, k, s))
        ir_note(f->a, &k->notes, "%s held in a register, never stored", what);
    else if ((bytes = fuse_to_local_row(f->a, f->p, k, s, f->row_limit)))
        ir_note(f->a, &k->notes, "%s held in a local row of %lld bytes, never stored", what,
                (long long)bytes);
}

/* ---- 7. names and notes -------------------------------------------------- */

/* A kernel name without its sizes: "gemm_n8960_k1536" -> "gemm". */
static const char *stem(Fuse *f, const char *name)
{
    for (const char *q = name; *q; q++) {
        if (*q != '_')
            continue;
        const char *r = q + 1;
        while (*r >= 'a' && *r <= 'z')
            r++;
        if (r > q + 1 && *r >= '0' && *r <= '9')
            return arena_printf(f->a, "%.*s", (int)(q - name), name);
    }
    return name;
}

/* Parts before the costliest, its name (times its twins), parts after:
 * "rmsnorm_gemm_n8960_k1536_x2_silu_mul". */
static void name_kernel(Fuse *f, Kernel *k)
{
    int top = -1, nparts = 0, twins = 0;
    for (int i = 0; i < f->nk; i++)
        if (f->home[i] == k) {
            nparts++;
            if (top < 0 || f->oflops[i] > f->oflops[top])
                top = i;
        }
    if (nparts < 2)
        return;
    const char *pre = "", *post = "";
    for (int i = 0; i < f->nk; i++) {
        if (f->home[i] != k || i == top)
            continue;
        const char *st = stem(f, f->oname[i]);
        if (i > top && strcmp(f->oname[i], f->oname[top]) == 0)
            twins++;
        else if (i < top)
            pre = arena_printf(f->a, "%s%s_", pre, st);
        else
            post = arena_printf(f->a, "%s_%s", post, st);
    }
    k->name = twins ? arena_printf(f->a, "%s%s_x%d%s", pre, f->oname[top], twins + 1, post)
                    : arena_printf(f->a, "%s%s%s", pre, f->oname[top], post);
}

static int by_node(const void *x, const void *y)
{
    return (*(Node *const *)x)->id - (*(Node *const *)y)->id;
}

static int by_consumer(const void *x, const void *y)
{
    const Decision *a = x, *b = y;
    if (a->c != b->c)
        return a->c - b->c;
    if (a->p != b->p)
        return a->p - b->p;
    return (int)b->kind - (int)a->kind;     /* a merge before its fusion */
}

static void write_notes(Fuse *f)
{
    if (f->ndec == 0)
        return;
    if (f->ndec > 1)
        qsort(f->dec, (size_t)f->ndec, sizeof *f->dec, by_consumer);
    ir_note(f->a, &f->p->notes, "fuse: kernel and buffer ids are the input's");
    for (int i = 0; i < f->ndec; i++)
        ir_note(f->a, &f->p->notes, "%s", f->dec[i].text);
}

/* ---- the pass ------------------------------------------------------------ */

/* step(c) for every kernel in program order that is still one. */
static void sweep(Fuse *f, void (*step)(Fuse *, Kernel *))
{
    int n = f->p->nkernels;
    Kernel **ks = arena_dup(f->a, f->p->kernels, sizeof *ks * (size_t)n);
    for (int i = 0; i < n; i++)
        if (find(f, ks[i]) >= 0)
            step(f, ks[i]);
}

static void setup(Fuse *f, Module *m, PassCtx *cx)
{
    Prog *p = m->prog;
    Arena *a = m->a;
    memset(f, 0, sizeof *f);
    f->a = a;
    f->p = p;
    f->row_limit = cx->machine.l1d;
    f->reuse_limit = cx->machine.l2 / 2;
    f->cores = cx->machine.cores;
    f->nk = p->nkernels;
    f->nb = p->nbufs;
    f->home = arena_alloc(a, sizeof *f->home * (size_t)(f->nk + 1));
    f->touched = arena_alloc(a, sizeof *f->touched * (size_t)(f->nk + 1));
    f->oname = arena_alloc(a, sizeof *f->oname * (size_t)(f->nk + 1));
    f->oflops = arena_alloc(a, sizeof *f->oflops * (size_t)(f->nk + 1));
    f->oreduce = arena_alloc(a, (size_t)f->nk + 1);
    f->oflags = arena_alloc(a, sizeof *f->oflags * (size_t)(f->nk + 1));
    for (int i = 0; i < f->nk; i++) {
        Kernel *k = p->kernels[i];
        double bytes;
        if (k->id != i)
            KILN_BUG("kernel %d has id %d", i, k->id);
        f->home[i] = k;
        f->oname[i] = k->name;
        ir_kernel_cost(k, &f->oflops[i], &bytes);
        f->oreduce[i] = (char)fuse_traits(k).reduce;
        f->oflags[i] = touch(f, k);
    }
    f->writer = arena_alloc(a, sizeof *f->writer * (size_t)(f->nb + 1));
    f->why = arena_alloc(a, sizeof *f->why * (size_t)(f->nb + 1));
}

int pass_fuse(Module *m, PassCtx *cx)
{
    Fuse f;
    setup(&f, m, cx);
    Prog *p = f.p;
    for (int b = 0; b < f.nb; b++)
        find_writer(&f, b);
    int before;
    do {                              /* step 5: until a round fuses nothing */
        before = p->nkernels;
        sweep(&f, points);
        sweep(&f, rows);
        sweep(&f, horizontal);
    } while (p->nkernels < before);
    for (int i = 0; i < f.nmids; i++)
        contract(&f, f.mids[i]);
    for (int i = 0; i < p->nkernels; i++) {
        Kernel *k = p->kernels[i];
        name_kernel(&f, k);
        if (k->nnodes > 1)
            qsort(k->nodes, (size_t)k->nnodes, sizeof *k->nodes, by_node);
    }
    write_notes(&f);
    if (!f.changed)
        return 0;
    ir_prog_renumber(p);
    ir_prog_layout(p);
    return 1;
}
