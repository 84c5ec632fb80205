/* ir/ref.c: the reference interpreter. Runs the graph op by op with each
 * op's ref_* kernel: naive and clear, accumulating in double, storing f32.
 * It is the oracle every generated program is checked against. */
#include "ops.h"

#include <stdlib.h>
#include <string.h>

Tensor *tensor_new(const Node *n)
{
    void *data = calloc((size_t)node_count(n) ? (size_t)node_count(n) : 1, 4);
    Tensor *t = data ? tensor_wrap(n, data) : NULL;
    if (!t)
        free(data);
    return t;
}

Tensor *tensor_wrap(const Node *n, void *data)
{
    Tensor *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->dtype = n->dtype;
    t->rank = n->rank;
    memcpy(t->dims, n->dims, sizeof n->dims);
    t->count = node_count(n);
    if (n->dtype == DT_I32)
        t->i = data;
    else
        t->f = data;
    return t;
}

void tensor_free(Tensor *t)
{
    if (!t)
        return;
    free(t->f ? (void *)t->f : (void *)t->i);
    free(t);
}

Tensor *ref_in(RefCx *cx, const Node *n, int i) { return &cx->t[n->in[i]->id]; }
Tensor *ref_out(RefCx *cx, const Node *n) { return &cx->t[n->id]; }

int ref_fail(RefCx *cx, const Node *n, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(cx->err, sizeof cx->err, "node '%s': %s", n->name ? n->name : "?", msg);
    return -1;
}

int64_t bcast_offset(int r, const int64_t *out, int xr, const int64_t *xd)
{
    int64_t off = 0;
    for (int j = 0; j < xr; j++) {
        int64_t i = xd[j] == 1 ? 0 : out[r - xr + j];
        off = off * xd[j] + i;
    }
    return off;
}

int index_next(int r, const int64_t *dims, int64_t *idx)
{
    for (int i = r - 1; i >= 0; i--) {
        if (++idx[i] < dims[i])
            return 1;
        idx[i] = 0;
    }
    return 0;
}

double tget(const Tensor *t, int64_t i) { return t->f ? t->f[i] : t->i[i]; }

/* Shares a caller's tensor (no copy) as node n's value. */
static void share(Tensor *dst, const Tensor *src) { *dst = *src; }

static int alloc_value(RefCx *cx, Node *n, char **owned)
{
    Tensor *t = tensor_new(n);
    if (!t)
        return -1;
    cx->t[n->id] = *t;
    *owned = (char *)(t->f ? (void *)t->f : (void *)t->i);
    free(t);
    return 0;
}

/* Node i of rank cx->rank: a leaf shares the caller's tensor, a value is
 * allocated (owned[i]) and computed. */
static int run_node(RefCx *cx, Node *n, Tensor *const *inputs, Tensor *const *weights,
                    Tensor *const *states, char **owned)
{
    int i = n->id;
    switch (n->op) {
    case OP_INPUT: share(&cx->t[i], inputs[n->index]); return 0;
    case OP_WEIGHT: share(&cx->t[i], weights[n->index]); return 0;
    case OP_STATE: share(&cx->t[i], states[n->index]); return 0;
    case OP_CACHE_WRITE:           /* writes the state in place, yields it */
        share(&cx->t[i], &cx->t[n->in[0]->id]);
        return op_table[n->op].ref(cx, n);
    default:
        if (alloc_value(cx, n, &owned[i]) != 0) {
            snprintf(cx->err, sizeof cx->err, "out of memory");
            return -1;
        }
        if (n->op == OP_CONST) {
            cx->t[i].f[0] = (float)n->value;
            return 0;
        }
        return op_table[n->op].ref(cx, n);
    }
}

int ref_run(Module *m, Tensor *const *inputs, Tensor *const *weights,
            Tensor *const *states, Tensor *const *outputs, char *err,
            size_t errlen)
{
    return ref_run_ranks(m, 1, inputs, &weights, &states, outputs, err, errlen);
}

/* The ranks run node 0 each, then node 1 each, ...: a collective at node
 * i finds its operand computed on every rank. */
int ref_run_ranks(Module *m, int nranks, Tensor *const *inputs,
                  Tensor *const *const *weights, Tensor *const *const *states,
                  Tensor *const *outputs, char *err, size_t errlen)
{
    RefCx *cx = calloc((size_t)nranks, sizeof *cx);
    char **owned = calloc((size_t)nranks * ((size_t)m->nnodes + 1), sizeof *owned);
    int rc = cx && owned ? 0 : -1;
    for (int r = 0; r < nranks && rc == 0; r++) {
        cx[r] = (RefCx){m, calloc((size_t)m->nnodes + 1, sizeof(Tensor)), "", r, nranks, cx};
        if (!cx[r].t)
            rc = -1;
    }
    if (rc != 0)
        snprintf(err, errlen, "out of memory");
    for (int i = 0; i < m->nnodes && rc == 0; i++)
        for (int r = 0; r < nranks && rc == 0; r++)
            if (run_node(&cx[r], m->nodes[i], inputs, weights[r], states[r],
                         owned + (size_t)r * ((size_t)m->nnodes + 1)) != 0) {
                rc = -1;
                if (nranks > 1)
                    snprintf(err, errlen, "rank %d: %s", r, cx[r].err);
                else
                    snprintf(err, errlen, "%s", cx[r].err);
            }
    for (int i = 0; i < m->noutputs && rc == 0; i++) {
        const Tensor *src = &cx[0].t[m->outputs[i]->id];
        Tensor *dst = outputs[i];
        if (dst->f)
            memcpy(dst->f, src->f, (size_t)src->count * 4);
        else
            memcpy(dst->i, src->i, (size_t)src->count * 4);
    }
    for (int i = 0; owned && cx && i < nranks * (m->nnodes + 1); i++)
        free(owned[i]);
    for (int r = 0; cx && r < nranks; r++)
        free(cx[r].t);
    free(owned);
    free(cx);
    return rc;
}
