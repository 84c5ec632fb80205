/* passes/pipeline.c: the pass registry, in docs/design.md order. `frontend` and
 * `codegen` are stages without a run function here: the frontend builds
 * the module before the pipeline, codegen prints C after it. */
#include "passes.h"

#include <string.h>

const PassDesc pass_table[] = {
    {"frontend", LEVEL_GRAPH, 1, NULL, "parse, validate, infer shapes"},
    {"simplify", LEVEL_GRAPH, 0, pass_simplify,
     "fold constants, remove dead nodes, fold transposes into matmul, merge reshapes"},
    {"distribute", LEVEL_GRAPH, 1, pass_distribute,
     "split the graph over --ranks MPI ranks, Megatron-style, with collectives"},
    {"lower", LEVEL_LOWER, 1, pass_lower, "one loop nest per op"},
    {"canonicalize-memrefs", LEVEL_LOOP, 0, pass_canonicalize_memrefs,
     "reshape, transpose, slice, concat as index maps over strided memrefs, not copies"},
    {"hoist-weights", LEVEL_LOOP, 0, pass_hoist_weights,
     "kernels that read only weights run once at open, into derived weights"},
    {"fuse", LEVEL_LOOP, 0, pass_fuse, "merge producer and consumer loop nests where legal"},
    {"tile", LEVEL_LOOP, 0, pass_tile, "split and reorder loops for registers and caches"},
    {"parallelize", LEVEL_LOOP, 0, pass_parallelize,
     "parallel loops with enough work, one per kernel or siblings in a reduction"},
    {"plan-memory", LEVEL_LOOP, 0, pass_plan_memory,
     "liveness of intermediates; one arena, slots reused"},
    {"codegen", LEVEL_C, 1, NULL, "the C program"},
};
const int pass_count = sizeof pass_table / sizeof pass_table[0];

int pass_index(const char *name)
{
    for (int i = 0; i < pass_count; i++)
        if (strcmp(pass_table[i].name, name) == 0)
            return i;
    return -1;
}

static int is_disabled(const PassCtx *cx, const char *name)
{
    for (int i = 0; i < cx->ndisabled; i++)
        if (strcmp(cx->disabled[i], name) == 0)
            return 1;
    return 0;
}

static void verify(Module *m)
{
    ir_verify_graph(m);
    if (m->prog)
        ir_verify_prog(m);
}

int pass_pipeline(Module *m, PassCtx *cx)
{
    if (cx->after)
        cx->after(cx, m, 0, 1);
    if (cx->stop_after && strcmp(cx->stop_after, "frontend") == 0)
        return 0;
    for (int i = 1; i < pass_count && pass_table[i].run; i++) {
        const PassDesc *p = &pass_table[i];
        int changed = -1;
        if (p->required || !is_disabled(cx, p->name)) {
            m->notes.n = 0;
            if (m->prog)
                m->prog->notes.n = 0;
            changed = p->run(m, cx);
            if (changed < 0)
                return -1;
            if (cx->verify)
                verify(m);
        }
        if (cx->after)
            cx->after(cx, m, i, changed);
        if (cx->stop_after && strcmp(cx->stop_after, p->name) == 0)
            break;
    }
    return 0;
}
