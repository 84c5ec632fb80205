/* ir/op_norm.c: rmsnorm layernorm batchnorm softmax. (stubs: being written) */
#include "ops.h"

const AttrSpec rmsnorm_attrs[] = {{"eps", AT_FLOAT, 0, 0, 1e-6, NULL, 0}, {0}};
const AttrSpec layernorm_attrs[] = {{"eps", AT_FLOAT, 0, 0, 1e-5, NULL, 0}, {0}};
const AttrSpec batchnorm_attrs[] = {{"eps", AT_FLOAT, 0, 0, 1e-5, NULL, 0}, {0}};
const AttrSpec softmax_attrs[] = {{"axis", AT_INT, 0, -1, 0, NULL, 0}, {0}};

int infer_rmsnorm(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_rmsnorm: %d", n->id); }
int ref_rmsnorm(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_rmsnorm: %d", n->id); }
void lower_rmsnorm(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_rmsnorm: %d", n->id); }
int infer_layernorm(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_layernorm: %d", n->id); }
int ref_layernorm(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_layernorm: %d", n->id); }
void lower_layernorm(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_layernorm: %d", n->id); }
int infer_batchnorm(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_batchnorm: %d", n->id); }
int ref_batchnorm(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_batchnorm: %d", n->id); }
void lower_batchnorm(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_batchnorm: %d", n->id); }
int infer_softmax(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_softmax: %d", n->id); }
int ref_softmax(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_softmax: %d", n->id); }
void lower_softmax(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_softmax: %d", n->id); }
