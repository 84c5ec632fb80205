/* frontend/import.h: checkpoints people already have (a Hugging Face
 * folder, a GGUF file, a llama2.c .bin) to kiln/1 model text, a section
 * per file.
 *
 * Every import writes the same decoder graph (docs/importing.md):
 *   inputs   tokens     i32[T]     token ids
 *            positions  i32[T]     absolute positions, consecutive: the
 *                                  KV cache rows written are positions[0]
 *                                  .. positions[0] + T - 1
 *   state    layers.L.k_cache, layers.L.v_cache  f32[S, kv_heads, head_dim]
 *   output   logits     f32[T, vocab]
 * with the checkpoint's own tensor names for the weights, so its file
 * loads as it is. Problems are reported in d (d->file is the file at
 * fault: DIR/config.json, model.bin), one line each, never ignored. */
#ifndef KILN_IMPORT_H
#define KILN_IMPORT_H

#include "ir/ir.h"
#include "runtime/kiln_rt.h"
#include "runtime/rt_gguf.h"

typedef struct {
    int64_t tokens;             /* T: tokens per call; 0: 1 (a decode step) */
    int64_t max_seq;            /* S: KV cache rows; 0: the checkpoint's
                                   (capped at IMP_DEFAULT_SEQ for HF) */
    int64_t slots;              /* N: caches of N sequences (pos and slots
                                   i32[T]); 0: one sequence's */
} ImportOpts;

#define IMP_DEFAULT_SEQ 2048    /* HF default S: max_position_embeddings, capped */

/* ---- import_hf.c: a Hugging Face folder -------------------------------- */
/* The graph for DIR/config.json (model_type llama, mistral, mixtral, qwen2, qwen3,
 * qwen3_moe, gemma, gemma2, gemma3_text, phi3, gpt_oss, gpt2).
 * NULL when refused (problems in d, which the caller set to name
 * DIR/config.json; *io = 1 when a file could not be read). */
char *imp_hf(Arena *a, const char *dir, const ImportOpts *o, Diags *d, int *io);
/* The weights of DIR as kiln loads them: DIR/model.safetensors.index.json
 * when it exists (the shards it names), else DIR/model.safetensors. */
char *imp_hf_weights(Arena *a, const char *dir);

/* T and S from the options and the model's default S (dflt, capped at
 * IMP_DEFAULT_SEQ); S at most limit when the model has learned positions
 * (limit > 0); problems in d. */
void imp_seq_opts(Diags *d, const ImportOpts *o, int64_t dflt, int64_t limit, int64_t *T,
                  int64_t *S);

/* ---- import_gguf.c: a GGUF file ----------------------------------------- */
/* The graph for a GGUF file of general.architecture llama, qwen2, qwen3,
 * qwen3moe, gemma, gemma2, gemma3 or phi3, read from its keys and tensors
 * as llama.cpp reads them; its weights are the file's tensors by their
 * names (the file itself is the weights file). NULL when refused (d names
 * the file; *io = 1 when it could not be read). */
char *imp_gguf(Arena *a, const char *path, const ImportOpts *o, Diags *d, int *io);

/* ---- import_llama2c.c: a llama2.c checkpoint --------------------------- */
/* The graph for a version-0 or version-1 (fp32) llama2.c checkpoint; with
 * weights_out, its weights converted to a safetensors file there (written
 * beside it, then renamed into place). NULL when refused (d names bin;
 * *io = 1 for a file that cannot be read or written). */
char *imp_llama2c(Arena *a, const char *bin, const ImportOpts *o, const char *weights_out,
                  Diags *d, int *io);

/* ---- import_st.c: safetensors written, and opened ------------------------ */
typedef struct {
    const char *name;
    const char *dtype;          /* "F32", "F16", "BF16", "F8_E4M3" or "U8" */
    int rank;
    int64_t dims[KILN_MAX_RANK];
    const void *data;           /* the bytes as they go in the file (little-endian) */
} ImpTensor;
/* Writes the tensors, in this order, to a temporary file beside path, then
 * renames it over path (a symbolic link's target is replaced, not the
 * link). Returns 0, or -1 with a one-line reason in why. */
int imp_st_write(const char *path, const ImpTensor *t, int n, char *why, size_t whylen);

/* A weights file (a safetensors file, or an index and every shard it
 * names) opened by the runtime's reader, rt_st_open, which checks the
 * whole of it (one reader, one set of limits, for kiln and its programs);
 * held by the arena, closed by imp_st_close or when the arena is freed.
 * NULL after reporting its one line in d, as the runtime words it (*io = 1
 * when unreadable). */
const rt_safetensors *imp_st_open(Arena *a, const char *path, Diags *d, int *io);
void imp_st_close(Arena *a, const rt_safetensors *st);

/* ---- import_graph.c: kiln/1 text, one declaration or node per line ----- */
/* s as a JSON string: quotes, backslashes and control bytes escaped
 * (also what import_st.c writes safetensors headers with). */
void ig_put_string(FILE *f, const char *s);
typedef struct ImpGraph ImpGraph;
ImpGraph *ig_new(Arena *a, const char *model_name);
/* Declarations; each returns its name. */
const char *ig_input(ImpGraph *g, const char *name, const char *dtype, int rank,
                     const int64_t *dims);
const char *ig_weight(ImpGraph *g, const char *name, int rank, const int64_t *dims);
const char *ig_state(ImpGraph *g, const char *name, int rank, const int64_t *dims);
/* A node `op` over nin operand names (at most 8 for ig_node); attrs is
 * the text of a JSON object or NULL. Returns name. */
const char *ig_node(ImpGraph *g, const char *name, const char *op, const char *attrs, int nin,
                    ...);
const char *ig_nodev(ImpGraph *g, const char *name, const char *op, const char *attrs, int nin,
                     const char *const *in);
/* name = op(in, k): an element-wise op with the scalar constant k. */
const char *ig_scalar(ImpGraph *g, const char *name, const char *op, const char *in, double k);
/* A number as JSON: the shortest text that reads back as the same double. */
const char *ig_num(ImpGraph *g, double v);
/* The whole model text, with `output` as its one output. */
char *ig_text(ImpGraph *g, const char *output);
/* An int list as count, array: IG_DIMS(2, 3) is 2, (int64_t[]){2, 3}. */
#define IG_DIMS(...) \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

/* ---- import_decoder.c: the decoder graphs -------------------------------- */
/* A llama-family decoder (llama2.c, llama, gemma, gemma2, gemma3_text, mistral, mixtral,
 * phi3, qwen2, qwen3, qwen3_moe, gpt_oss, and GGUF's of these):
 * pre-norm
 * blocks of rmsnorm, rotary attention with a KV cache, SwiGLU or a
 * mixture of experts, and the weight names of its checkpoint. */
typedef struct {
    const char *model_name;     /* the kiln/1 name */
    int64_t vocab, dim, hidden, layers, heads, kv_heads, head_dim;
    int64_t tokens, max_seq;    /* T, S */
    int64_t slots;              /* ImportOpts.slots */
    double eps, theta;
    const char *rope_style;     /* "half" or "interleaved" */
    int rope_llama3;            /* Llama 3.1's scaling of the frequencies, */
    double rope_factor, rope_low, rope_high;    /* with its factor, low and */
    int64_t rope_original;      /* high_freq_factor, original_max_position_embeddings */
    int rope_yarn;              /* YaRN's scaling (gpt-oss): rope_factor and
                                   rope_original, with */
    double rope_beta_fast, rope_beta_slow, rope_mscale; /* (0: 0.1 ln(factor) + 1) */
    int rope_truncate;
    int hf_names;               /* model.layers.L.self_attn.q_proj.weight (2:
                                   with Mixtral's block_sparse_moe experts; 3:
                                   Phi-3's fused qkv_proj and gate_up_proj; 4:
                                   Gemma 2's norms after attention and around
                                   the MLP; 5: Gemma 3's, with q/k norms), or
                                   llama.cpp's blk.L.attn_q.weight (IMP_GGUF,
                                   experts stacked; IMP_GGUF_PHI3: fused
                                   attn_qkv and ffn_up; IMP_GGUF_GEMMA2: norms
                                   after attention and the MLP), or
                                   IMP_HF_GPTOSS's (gpt-oss: biases on q, k,
                                   v, o, the router and the experts, sinks,
                                   the experts stacked, gate and up
                                   interleaved in gate_up_proj [E, dim,
                                   2 moe_hidden]), else llama2.c's
                                   layers.L.attention.wq.weight */
    int tied;                   /* logits use the embedding table */
    int qkv_bias;               /* q, k, v projections have biases (qwen2) */
    int qk_norm;                /* rmsnorm of each q and k head (qwen3, qwen3_moe) */
    int norm_one;               /* norms scale by 1 + w, not w (gemma) */
    double embed_scale;         /* the embeddings times this (gemma), or 0 */
    const char *gelu;           /* the gate's activation: NULL silu, else gelu
                                   with this approximate (gemma) */
    double attn_scale;          /* attention's scale, or 0: 1/sqrt(head_dim) */
    double softcap, final_softcap;  /* Gemma 2's caps of the scores and the
                                   logits (c tanh(x / c)), or 0: none */
    int64_t window;             /* a sliding window of this many rows (mistral,
                                   mixtral, phi3, gemma2, gemma3), or 0: none */
    const unsigned char *windowed;  /* the sliding layers, where it is (NULL:
                                   every one) */
    double local_theta;         /* rope's theta on the sliding layers (gemma3),
                                   or 0: theta, even when the window spans
                                   the whole cache */
    /* mixture of experts (qwen3_moe, mixtral): a layer is sparse when moe[L] */
    const unsigned char *moe;
    int64_t experts, top_k, moe_hidden;
    int norm_topk;
    int64_t rope_freqs;         /* GGUF: rope_freqs.weight [this], declared
                                   and unused (its factors are rope's llama3
                                   attributes); 0: none */
    double swiglu_limit;        /* gpt-oss's experts: the clamped SwiGLU's limit */
    int mxfp4;                  /* gpt-oss's experts as MXFP4 (quant_method
                                   mxfp4): [E, out, in], not transformers'
                                   [E, in, out] of the bf16 checkpoints */
} ImpLlama;
enum { IMP_GGUF = 6, IMP_GGUF_PHI3, IMP_GGUF_GEMMA2, IMP_HF_GPTOSS };   /* ImpLlama.hf_names */
char *imp_llama_graph(Arena *a, const ImpLlama *c);

/* GPT-2: learned positions, pre-layernorm blocks, Conv1D weights ([in,
 * out]) with biases, one fused qkv projection, gelu. */
typedef struct {
    int64_t vocab, dim, hidden, layers, heads, n_positions;
    int64_t tokens, max_seq, slots;
    double eps;
    const char *gelu;           /* the gelu op's approximate: "tanh" or "none" */
    const char *prefix;         /* "" or "transformer." */
    int tied;
    const rt_safetensors *weights;  /* the folder's, or NULL: attn.bias and
                                   attn.masked_bias buffers found there are
                                   declared (and unused) so the file loads */
} ImpGpt2;
char *imp_gpt2_graph(Arena *a, const ImpGpt2 *c);

#endif
