/* tests/import/ckpt.h: the import tests' checkpoints and their references.
 *
 * A CkModel is a small decoder with random weights, made by this code
 * (nothing is downloaded). It is written as the files people have
 * (a llama2.c .bin, version 0 or 1; a Hugging Face folder: config.json
 * and model.safetensors, or shards and their index) and run by a forward
 * pass written here by hand from the models' own definitions (llama2.c's
 * run.c; transformers' modeling_llama, _gemma, _gemma2, _gemma3, _mistral, _mixtral,
 * _phi3, _qwen2, _gpt2, _qwen3, _qwen3_moe, _gpt_oss), one
 * token at a time with its own KV cache. That pass knows nothing of kiln's
 * graphs: it is the reference an imported model must agree with. */
#ifndef KILN_CKPT_H
#define KILN_CKPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    CK_LLAMA, CK_QWEN2, CK_GPT2, CK_QWEN3_MOE, CK_QWEN3, CK_MISTRAL, CK_MIXTRAL, CK_PHI3, CK_GEMMA,
    CK_GEMMA2, CK_GEMMA3, CK_GPTOSS
} CkType;

enum { CK_FP8_BLOCK = 1, CK_FP8_CHANNEL, CK_FP8_TENSOR };

typedef struct {
    CkType type;
    int vocab, dim, hidden, layers, heads, kv_heads;
    int head_dim;               /* 0: dim / heads */
    int seq;                    /* llama2.c seq_len; max_position_embeddings
                                   (GPT-2: n_positions) */
    int tied;                   /* logits use the embedding table */
    int interleaved;            /* llama: rope pairs (2i, 2i+1) as llama2.c;
                                   the HF folder then holds wq, wk permuted
                                   as transformers' conversion script does */
    int bf16;                   /* weights rounded to bf16 (HF: stored BF16) */
    /* HF: the linear layers' weights (NAME_proj.weight) stored as FP8
     * e4m3 with scales (ckpt_files.c): CK_FP8_BLOCK as Qwen3's FP8 (a
     * weight_scale_inv per 128 x 128 block), CK_FP8_CHANNEL and
     * CK_FP8_TENSOR as compressed-tensors' (a weight_scale per row or one,
     * bf16 with --bf16, and an input_scale); 0: none */
    int fp8;
    int llama3_rope;            /* rope_scaling of rope_type llama3: factor 8,
                                   low_freq_factor 1, high_freq_factor 4,
                                   original_max_position_embeddings 32 */
    /* qwen3_moe, mixtral: experts in every layer but those in dense_layers
     * (a bit mask), top_k of them, renormalised when norm_topk */
    int experts, top_k, moe_hidden, norm_topk;
    unsigned dense_layers;
    /* a sliding window of this many rows (mistral, mixtral, phi3: every
     * layer; gemma2, gemma3_text: layers 0, 2, ...; the qwens: from layer
     * 1, use_sliding_window), or 0: the config's window is the KV cache's
     * rows or more, or off */
    int window;
    /* gemma2, gemma3_text: query_pre_attn_scalar; 0: CK_G2_QPAS (24, not
     * head_dim 32, so that the scale shows; llama.cpp's GGUFs scale by
     * head_dim^-1/2: their tests give 32) */
    int qpas;
    /* gpt2: the Hub's names ("h.0...", with the attn.bias buffers), else
     * transformers' ("transformer.h.0...") */
    int gpt2_hub;
    /* the big shapes (ck_hf_shape_named): the published config.json of
     * the model they have the shape of, a printf format whose one %s is
     * torch_dtype, written instead of what this file's passes assume
     * (rms_norm_eps, rope_theta, rope_scaling: not for ck_step); a
     * tokenizer as big as Llama 3's (byte-level, 256 added tokens) when
     * llama3_tok, else llama's */
    const char *published;
    int llama3_tok;
    /* gpt_oss: the experts' values rounded to MXFP4 (ck_mx_block: blocks
     * of 32 along their inputs), then written as the Hub's checkpoints
     * hold them (CK_MX_BLOCKS: NAME_blocks, NAME_scales, rows the outputs)
     * or as the bf16 checkpoints do (CK_MX_VALUES); 0: not rounded */
    int mxfp4;
} CkShape;

enum { CK_MX_BLOCKS = 1, CK_MX_VALUES };

/* MXFP4 of 32 values x (OCP MX, from its definition, not kiln's runtime):
 * the E8M0 scale byte e = floor(log2(amax)) - 2 + 127 (127 when amax is
 * 0), so that amax / 2^(e - 127) is in [4, 8); code[k] the E2M1 nibble
 * nearest x[k] / 2^(e - 127) (at most 6; a tie to the smaller), and x[k]
 * becomes its value when round. */
void ck_mx_block(float *x, unsigned char *e, unsigned char code[32], int round);

typedef struct CkModel CkModel;

/* Random weights from seed; NULL when out of memory. */
CkModel *ck_new(const CkShape *s, uint64_t seed);
void ck_free(CkModel *m);
const CkShape *ck_shape(const CkModel *m);

/* The llama2.c checkpoint (a CK_LLAMA model with interleaved rope, no
 * biases); version 0 or 1. 0, or -1 with errno set. */
int ck_write_llama2c(const CkModel *m, const char *path, int version);
/* The Hugging Face folder dir (which must exist): config.json with
 * `extra` (JSON members, e.g. "\"rope_scaling\": null", or NULL) added,
 * and model.safetensors, or with shards > 1 that many shard files and
 * model.safetensors.index.json. 0, or -1 with a reason in why. */
int ck_write_hf(const CkModel *m, const char *dir, int shards, const char *extra, char *why,
                size_t whylen);

/* The GGUF file path (tests/import/ckpt_gguf.c) as llama.cpp's
 * convert_hf_to_gguf.py writes the Hugging Face folder of m (q's and k's
 * rows of llama, mistral and mixtral permuted for its rope; Gemma's norms
 * stored as 1 + w; the experts stacked), every matrix (rank >= 2) in
 * GGML type `type` (gguf_write.h's GW_T_*: F32, F16, BF16, or Q8_0, Q4_0,
 * Q4_K, Q6_K made by rt_quantize; a row no multiple of the block falls
 * back as kiln's --weight-dtype does: q4_k to q4_0, q6_k to q8_0, then
 * f16), vectors in F32. 0, or -1 with a reason in why. */
int ck_write_gguf(const CkModel *m, const char *path, int type, char *why, size_t whylen);
/* The GGUF file src (no arrays among its keys) written again to dst with
 * edits, to make bad files of good ones: a key left out, the architecture
 * renamed, keys or tensors added, a tensor's shape changed (its data then
 * F32 zeros). 0, or -1 with a reason in why. */
typedef struct GgufWriter GgufWriter;
typedef struct {
    const char *drop;               /* this key left out, or NULL */
    const char *arch;               /* general.architecture's new value, or NULL */
    void (*add)(GgufWriter *w);     /* more keys or tensors, or NULL */
    const char *tensor;             /* this tensor of rank, dims: */
    int rank;
    int64_t dims[4];
} CkGgufEdit;
int ck_gguf_rewrite(const char *src, const char *dst, const CkGgufEdit *e, char *why,
                    size_t whylen);

/* The reference: the logits (vocab floats, valid until the next call) of
 * token at position pos, after the tokens given before it at positions
 * 0 .. pos-1 since ck_reset. */
const float *ck_step(CkModel *m, int token, int pos);
void ck_reset(CkModel *m);

/* The tests' Hugging Face shapes by model_type: llama (vocab 320, dim 64,
 * 2 layers, 4 heads, 2 kv heads, untied, interleaved so that it also
 * writes as llama2.c), qwen2 (tied, q/k/v biases), gpt2 (the Hub's names
 * and buffers), qwen3_moe (head_dim 32 != dim/heads, 4 experts, top 2,
 * renormalised, layer 1 of 3 dense), qwen3 (tied, head_dim 32 as qwen3_moe,
 * its layers all dense), mistral (llama's layers, rotate_half, a sliding
 * window of 4096), mixtral (mistral's attention, 4 experts in every layer,
 * top 2 renormalised), gpt_oss (biases on q, k, v, o, sinks, YaRN's rope
 * of factor 32 over the 64 positions, a window of 4 rows on layer 0, 4
 * experts with biases in every layer, top 2, the clamped SwiGLU). 0, or
 * -1 for another name. */
int ck_hf_shape(const char *type, CkShape *s);
/* By name as well: "tiny" is ck_hf_shape's; "small" (qwen3_moe only) is
 * big enough to time a decode step: vocab 1024, dim 512, 4 sparse layers
 * of 32 experts [256, 512], top 4, 8 heads, 4 kv heads (202 MB of f32
 * experts). Llama only, with published configs, to measure at real sizes
 * (ck_stream_hf writes them): "tinyllama" (TinyLlama-1.1B-Chat-v1.0's:
 * dim 2048, hidden 5632, 22 layers, 32 heads, 4 kv heads, vocab 32000,
 * untied; 4.4 GB of f32) and "llama3-8b" (Llama-3.1-8B's: dim 4096,
 * hidden 14336, 32 layers, 32 heads, 8 kv heads, vocab 128256, untied;
 * 16 GB of bf16). 0, or -1 for another name or type. */
int ck_hf_shape_named(const char *type, const char *name, CkShape *s);
/* ---- ckpt_stream.c: folders too big to hold -------------------------- */

/* Whether ck_stream_hf writes shape s: llama's, without experts. */
int ck_streams(const CkShape *s);
/* The Hugging Face folder dir (which must exist) of shape s, the weights
 * ck_new would draw from seed, written tensor by tensor: never more than
 * a slice of one tensor in memory. Byte for byte ck_write_hf's files but
 * the index, whose total_size is the weights' bytes. shards: as
 * ck_write_hf; 0: as the Hub splits (transformers' files of at most
 * 5 GB; one: model.safetensors). With list, config.json only, and the
 * tensors listed to it (name, dtype, shape, file), then their count,
 * bytes and files. 0, or -1 with a reason in why. */
int ck_stream_hf(const CkShape *s, uint64_t seed, const char *dir, int shards, const char *extra,
                 FILE *list, char *why, size_t whylen);

/* Shapes by name: "tiny" (vocab 320, dim 64, 2 layers, 4 heads, 2 kv
 * heads), "stories15M", "stories110M" (llama2.c's, shared classifier). */
int ck_llama2c_shape(const char *name, CkShape *s);

#endif
