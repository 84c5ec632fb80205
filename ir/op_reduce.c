/* ir/op_reduce.c: reduce_sum reduce_mean reduce_max argmax topk. (stubs: being written) */
#include "ops.h"

const AttrSpec reduce_attrs[] = {
    {"axes", AT_INTS, 1, 0, 0, NULL, 0},
    {"keepdims", AT_BOOL, 0, 0, 0, NULL, 0},
    {0},
};
const AttrSpec argmax_attrs[] = {{"axis", AT_INT, 0, -1, 0, NULL, 0}, {0}};
/* result is internal: the frontend makes one topk node per declared
 * output, 0 for the values (f32) and 1 for the indices (i32). */
const AttrSpec topk_attrs[] = {
    {"k", AT_INT, 1, 0, 0, NULL, 0},
    {"axis", AT_INT, 0, -1, 0, NULL, 0},
    {"result", AT_ENUM, 0, 0, 0, "values|indices", 1},
    {0},
};

int infer_reduce(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_reduce: %d", n->id); }
int ref_reduce(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_reduce: %d", n->id); }
void lower_reduce(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_reduce: %d", n->id); }
int infer_argmax(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_argmax: %d", n->id); }
int ref_argmax(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_argmax: %d", n->id); }
void lower_argmax(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_argmax: %d", n->id); }
int infer_topk(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_topk: %d", n->id); }
int ref_topk(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_topk: %d", n->id); }
void lower_topk(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_topk: %d", n->id); }
