/* ir/bounds.c: the range an i32 input's values must lie in, read off its
 * uses: embedding ids index a table of V rows (its part's rows times
 * `ranks`); a pos scalar leaves room for T rows in a cache of S;
 * slotted, pos rows are < S and slots < N of a cache [N, S, H, D].
 * Shape ops pass the bound through. Used to seed i32 inputs with values
 * a run accepts. */
#include "ir.h"

#define DEFAULT_HI 1024      /* positions used only by rope: any value works */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static int is_shape_op(OpKind op)
{
    return op == OP_RESHAPE || op == OP_TRANSPOSE || op == OP_SLICE || op == OP_CONCAT;
}

/* Bound imposed on value v by its uses (recursing through shape ops). */
static int64_t use_bound(const Module *m, const Node *v, int depth)
{
    int64_t hi = INT64_MAX;
    for (int i = v->id + 1; i < m->nnodes && depth < 64; i++) {
        const Node *u = m->nodes[i];
        for (int j = 0; j < u->nin; j++) {
            if (u->in[j] != v)
                continue;
            if (u->op == OP_EMBEDDING && j == 1)
                hi = min64(hi, u->in[0]->dims[0] * attr_i(u, "ranks"));
            else if (u->op == OP_ATTENTION && u->nin == 5 && j >= 3)
                hi = min64(hi, u->in[1]->dims[j == 3]);
            else if (u->op == OP_ATTENTION && j == 3)
                hi = min64(hi, u->in[1]->dims[0] - u->in[0]->dims[0] + 1);
            else if (u->op == OP_CACHE_WRITE && u->nin == 4 && j >= 2)
                hi = min64(hi, u->in[0]->dims[j == 2]);
            else if (u->op == OP_CACHE_WRITE && j == 2)
                hi = min64(hi, u->in[0]->dims[0] - u->in[1]->dims[0] + 1);
            else if (is_shape_op(u->op))
                hi = min64(hi, use_bound(m, u, depth + 1));
        }
    }
    return hi;
}

int64_t ir_input_hi(const Module *m, const Node *in)
{
    int64_t hi = use_bound(m, in, 0);
    if (hi == INT64_MAX)
        hi = DEFAULT_HI;
    return hi < 1 ? 1 : hi;
}
