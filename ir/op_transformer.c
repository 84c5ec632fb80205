/* ir/op_transformer.c: embedding rope attention cache_write. (stubs: being written) */
#include "ops.h"

const AttrSpec rope_attrs[] = {
    {"theta", AT_FLOAT, 0, 0, 10000.0, NULL, 0},
    {"style", AT_ENUM, 0, 0, 0, "half|interleaved", 0},
    {"rotary_dim", AT_INT, 0, 0, 0, NULL, 0},      /* 0: D */
    {0},
};
const AttrSpec attention_attrs[] = {
    {"causal", AT_BOOL, 0, 1, 0, NULL, 0},
    {"scale", AT_FLOAT, 0, 0, 0.0, NULL, 0},        /* 0: 1/sqrt(D) */
    {0},
};

int infer_embedding(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_embedding: %d", n->id); }
int ref_embedding(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_embedding: %d", n->id); }
void lower_embedding(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_embedding: %d", n->id); }
int infer_rope(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_rope: %d", n->id); }
int ref_rope(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_rope: %d", n->id); }
void lower_rope(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_rope: %d", n->id); }
int infer_attention(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_attention: %d", n->id); }
int ref_attention(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_attention: %d", n->id); }
void lower_attention(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_attention: %d", n->id); }
int infer_cache_write(InferCx *cx, Node *n) { (void)cx; KILN_BUG("infer_cache_write: %d", n->id); }
int ref_cache_write(RefCx *cx, Node *n) { (void)cx; KILN_BUG("ref_cache_write: %d", n->id); }
void lower_cache_write(LowerCx *cx, Node *n) { (void)cx; KILN_BUG("lower_cache_write: %d", n->id); }
