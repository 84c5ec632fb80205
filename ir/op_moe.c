/* ir/op_moe.c: the Qwen3-MoE sparse block. (stubs: being written) */
#include "ops.h"

const AttrSpec moe_attrs[] = {
    {"top_k", AT_INT, 1, 0, 0, NULL, 0},
    {"norm_topk_prob", AT_BOOL, 0, 1, 0, NULL, 0},
    {0},
};

int infer_moe(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_moe: %d", n->id); }
int ref_moe(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_moe: %d", n->id); }
void lower_moe(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_moe: %d", n->id); }
