/* ir/op_shape.c: reshape transpose concat slice. (stubs: being written) */
#include "ops.h"

const AttrSpec reshape_attrs[] = {{"shape", AT_INTS, 1, 0, 0, NULL, 0}, {0}};
const AttrSpec transpose_attrs[] = {{"perm", AT_INTS, 1, 0, 0, NULL, 0}, {0}};
const AttrSpec concat_attrs[] = {{"axis", AT_INT, 0, 0, 0, NULL, 0}, {0}};
/* end defaults to the whole axis (INT64_MAX, clamped like Python). */
const AttrSpec slice_attrs[] = {
    {"axis", AT_INT, 1, 0, 0, NULL, 0},
    {"start", AT_INT, 0, 0, 0, NULL, 0},
    {"end", AT_INT, 0, INT64_MAX, 0, NULL, 0},
    {0},
};

int infer_reshape(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_reshape: %d", n->id); }
int ref_reshape(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_reshape: %d", n->id); }
void lower_reshape(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_reshape: %d", n->id); }
int infer_transpose(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_transpose: %d", n->id); }
int ref_transpose(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_transpose: %d", n->id); }
void lower_transpose(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_transpose: %d", n->id); }
int infer_concat(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_concat: %d", n->id); }
int ref_concat(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_concat: %d", n->id); }
void lower_concat(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_concat: %d", n->id); }
int infer_slice(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_slice: %d", n->id); }
int ref_slice(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_slice: %d", n->id); }
void lower_slice(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_slice: %d", n->id); }
