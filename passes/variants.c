/* passes/variants.c: the pipeline over the shape variants of one program.
 *
 * The variants of a decoder (a decode step at T = 1, a prefill chunk at
 * T = 64) are compiled into one program that holds one set of weight
 * buffers, so they must agree on every weight's layout; the tile pass
 * chooses layouts per module (panels of 64 outputs for one row, 32 for
 * many). Contract: v[0..n) are variants of one model with the same
 * weights and state in the same order; afterwards every packed weight is
 * packed alike in all of them. Derived weights (hoist-weights) count as
 * weights: the variants make the same ones (they come of the weights
 * alone, whatever T), and the program makes them once, as the leader's
 * open program does. Algorithm:
 * 1. The leader v[0] (the decode step, bound by streaming the weights in
 *    the layout chosen for it) goes through the passes as they choose.
 * 2. The others go through them with its layout imposed (PassCtx.panels:
 *    a weight's panel width, or -1 where the leader keeps it as it is).
 * 3. A weight the leader packed and some other variant could not is then
 *    kept as it is by all: the variants are made afresh (fresh(user, i))
 *    and compiled again with that imposed too. Every round unpacks at
 *    least one more weight, so the rounds end. */
#include "passes.h"

#include <string.h>

/* Each weight's and derived weight's panel width in lowered m, by
 * ir_held_index (n of them): -1 for one kept as it is. */
static void layouts(const Module *m, int64_t *panels, int n)
{
    for (int i = 0; i < n; i++)
        panels[i] = -1;
    for (int i = 0; m->prog && i < m->prog->nbufs; i++) {
        const Buf *b = m->prog->bufs[i];
        int h = ir_held_index(m, b);
        if (h >= 0 && h < n && b->packed)
            panels[h] = b->dims[b->rank - 1];
    }
}

/* v[i] makes the leader's derived weights: the same nodes (by name),
 * shapes and storage. */
static void same_derived(const Module *lead, const Module *m, int i)
{
    int n = ir_nderived(lead);
    if (ir_nderived(m) != n)
        KILN_BUG("shape variant %d makes %d derived weights, variant 0 %d", i, ir_nderived(m), n);
    for (int j = 0; j < n; j++) {
        const Buf *x = ir_derived_made(lead, j), *y = ir_derived_made(m, j);
        if (!x || !y || x->store != y->store || x->rank != y->rank ||
            memcmp(x->dims, y->dims, sizeof x->dims[0] * (size_t)x->rank) ||
            !x->node != !y->node || (x->node && strcmp(x->node->name ? x->node->name : "",
                                                       y->node->name ? y->node->name : "")))
            KILN_BUG("shape variant %d's derived weight %d is not variant 0's", i, j);
    }
}

static int same_leaves(Node *const *x, Node *const *y, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(x[i]->name, y[i]->name) || x[i]->rank != y[i]->rank ||
            memcmp(x[i]->dims, y[i]->dims, sizeof x[i]->dims[0] * (size_t)x[i]->rank) ||
            x[i]->shard.ranks != y[i]->shard.ranks || x[i]->shard.axis != y[i]->shard.axis)
            return 0;
    return 1;
}

/* v[i] declares the leader's weights and state, both compiled (the
 * distribute pass changes them alike: each its parts, the experts other
 * ranks hold dropped). */
static int shares(const Module *lead, const Module *m, Diags *d, int i)
{
    if (m->nweights == lead->nweights && m->nstates == lead->nstates &&
        same_leaves(m->weights, lead->weights, m->nweights) &&
        same_leaves(m->states, lead->states, m->nstates))
        return 1;
    diag(d, NULL, "shape variant %d does not declare the weights and state of variant 0", i);
    return 0;
}

/* Variants from i on compiled with the nw layouts `want` (NULL: free). */
static int compile(Module **v, int from, int n, PassCtx *cx, const int64_t *want, int nw)
{
    for (int i = from; i < n; i++) {
        PassCtx c = *cx;           /* each from the module's weight_stores */
        c.panels = want;
        c.npanels = nw;
        if (pass_pipeline(v[i], &c) != 0 || !shares(v[0], v[i], cx->d, i))
            return -1;
    }
    return 0;
}

int pass_pipeline_variants(Module **v, int n, PassCtx *cx, Module *(*fresh)(void *user, int i),
                           void *user)
{
    Arena *a = v[0]->a;
    if (compile(v, 0, 1, cx, NULL, 0) != 0)
        return -1;
    int nw = v[0]->nweights + ir_nderived(v[0]);
    int64_t *want = arena_alloc(a, sizeof *want * (size_t)(nw + 1));
    int64_t *got = arena_alloc(a, sizeof *got * (size_t)(nw + 1));
    layouts(v[0], want, nw);
    if (compile(v, 1, n, cx, want, nw) != 0)
        return -1;
    for (int round = 1;; round++) {
        int agree = 1;
        for (int i = 0; i < n; i++) {
            same_derived(v[0], v[i], i);
            layouts(v[i], got, nw);
            for (int w = 0; w < nw; w++)
                if (got[w] != want[w]) {
                    want[w] = -1;
                    agree = 0;
                }
        }
        if (agree)
            return 0;
        if (round > nw)
            KILN_BUG("shape variants disagree on weight layouts after %d rounds", round);
        for (int i = 0; i < n; i++)
            if (!(v[i] = fresh(user, i)))
                return -1;
        if (compile(v, 0, n, cx, want, nw) != 0)
            return -1;
    }
}
