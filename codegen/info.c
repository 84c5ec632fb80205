/* codegen/info.c: a module's tensors as rt_tensor_info tables, for the
 * generated program (printed as C) and for kiln itself (loading weights
 * and seeding inputs exactly as the generated program does). */
#include "codegen.h"

#include <string.h>

static void fill(rt_tensor_info *t, const Node *n)
{
    memset(t, 0, sizeof *t);
    t->name = n->name;
    t->dtype = n->dtype == DT_I32 ? RT_I32 : RT_F32;
    t->rank = n->rank;
    memcpy(t->dims, n->dims, sizeof t->dims[0] * (size_t)n->rank);
    t->count = node_count(n);
    t->hi = 1;
    if (n->shard.ranks && !n->shard.tensors) {
        t->shard_axis = n->shard.axis;
        t->shard_of = n->shard.of;
    }
}

static rt_tensor_info *table(const Module *m, Node *const *v, int n)
{
    rt_tensor_info *t = arena_alloc(m->a, sizeof *t * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        fill(&t[i], v[i]);
        if (v[i]->shard.tensors) {            /* NULL-terminated, as the runtime reads it */
            const char **names = arena_alloc(m->a, sizeof *names * (size_t)(v[i]->shard.ranks + 1));
            memcpy(names, v[i]->shard.tensors, sizeof *names * (size_t)v[i]->shard.ranks);
            t[i].tensors = names;
        }
    }
    return t;
}

static void weight_init(rt_tensor_info *t, const Node *w)
{
    static const int kinds[] = {[INIT_NONE] = RT_INIT_NONE, [INIT_FILL] = RT_INIT_FILL,
                                [INIT_RANDOM] = RT_INIT_RANDOM, [INIT_DATA] = RT_INIT_DATA};
    t->init = kinds[w->init.kind];
    t->fill = w->init.fill;
    t->seed = w->init.seed;
    t->scale = w->init.scale;
    t->data = w->init.data;
    t->dequantize = rt_dequantize;          /* kiln has the quantized part */
}

void cg_infos(const Module *m, CgInfos *t)
{
    t->inputs = table(m, m->inputs, m->ninputs);
    t->outputs = table(m, m->outputs, m->noutputs);
    t->weights = table(m, m->weights, m->nweights);
    t->states = table(m, m->states, m->nstates);
    for (int i = 0; i < m->ninputs; i++)
        if (m->inputs[i]->dtype == DT_I32)
            t->inputs[i].hi = ir_input_hi(m, m->inputs[i]);
    for (int i = 0; i < m->nweights; i++)
        weight_init(&t->weights[i], m->weights[i]);
    /* A packed weight is packed as it loads (panel: its panels' width),
     * but for one the open program reads as loaded: NAME_open packs that
     * after the open program has run (emit.c). */
    char *open_reads = arena_alloc(m->a, (size_t)(m->nweights + ir_nderived(m)) + 1);
    if (m->open)
        ir_held_reads(m, m->open, open_reads);
    for (int i = 0; m->prog && i < m->prog->nbufs; i++) {
        const Buf *b = m->prog->bufs[i];           /* a weight's storage */
        if (b->kind == BK_WEIGHT && !b->base && b->index >= 0 && b->index < m->nweights) {
            t->weights[b->index].store = (int)b->store;
            if (b->packed && !open_reads[b->index])
                t->weights[b->index].panel = b->dims[b->rank - 1];
        }
    }
}
