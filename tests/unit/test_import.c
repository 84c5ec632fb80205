/* tests/unit/test_import.c: importers (frontend/import*.c) against the
 * hand-written forward passes of tests/import/ckpt.c.
 *
 * Each case writes a checkpoint with random weights, imports it, builds
 * the graph with the whole pipeline under libtcc, loads the checkpoint's
 * own weights file (or the converted one for llama2.c), and runs token
 * after token, comparing every step's logits with the reference's: the
 * KV caches, positions and GQA are all exercised. Then what must be
 * refused: unsupported config fields by name, malformed llama2.c files,
 * shard indexes that disagree with their shards, and a GPT-2 folder
 * whose weights the runtime's reader refuses. GGUF files:
 * test_import_gguf.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "frontend/frontend.h"
#include "import_run.h"
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- llama2.c ---------------------------------------------------------------- */

static char *llama2c(Arena *a, const char *bin, int64_t T, const char *out)
{
    Diags d;
    diag_init(&d, a, bin);
    int io;
    ImportOpts o = {T, 0, 0};
    char *text = imp_llama2c(a, bin, &o, out, &d, &io);
    if (!text) {
        diag_print(&d, stderr);
        fail_msg("llama2.c import refused %s", bin);
    }
    return text;
}

/* A version-0 or version-1 checkpoint of a shape, shared classifier or
 * not, one token or four a call. */
static void llama2c_case(const char *shape, int version, int shared, int64_t T, int steps)
{
    CkShape s;
    assert_int_equal(ck_llama2c_shape(shape, &s), 0);
    s.tied = shared;
    CkModel *m = ti_model(&s);
    char bin[600], st[600];
    snprintf(bin, sizeof bin, "%s", tl_tmp_path("model.bin"));
    snprintf(st, sizeof st, "%s", tl_tmp_path("model.safetensors"));
    assert_int_equal(ck_write_llama2c(m, bin, version), 0);
    TiRun r;
    Arena *a = arena_new();
    ti_open(&r, a, llama2c(a, bin, T, st), st);
    ti_agree(&r, m, steps);
    ti_close(&r);
    ck_free(m);
}

static void test_llama2c_v0(void **state)
{
    (void)state;
    llama2c_case("tiny", 0, 1, 1, 12);
    llama2c_case("tiny", 0, 0, 1, 12);
}

static void test_llama2c_v1(void **state)
{
    (void)state;
    llama2c_case("tiny", 1, 1, 1, 12);
    llama2c_case("tiny", 1, 0, 4, 12);
}

/* The shape: llama2.c's stories15M (dim 288, 6 layers, 6 heads,
 * vocab 32000, seq_len 256). */
static void test_llama2c_stories15M(void **state)
{
    (void)state;
    llama2c_case("stories15M", 0, 1, 1, 4);
}

/* The graph as the examples lay it out; no weights written without
 * --weights-out. */
static void test_llama2c_graph(void **state)
{
    (void)state;
    CkShape s;
    ck_llama2c_shape("tiny", &s);
    CkModel *m = ti_model(&s);
    const char *bin = tl_tmp_path("g.bin");
    assert_int_equal(ck_write_llama2c(m, bin, 0), 0);
    Arena *a = arena_new();
    char *text = llama2c(a, bin, 1, NULL);
    tl_assert_has(text, "\"name\": \"llama2c\"");
    tl_assert_has(text, "{\"name\": \"tokens\", \"shape\": [1], \"dtype\": \"i32\"}");
    tl_assert_has(text, "{\"name\": \"layers.1.v_cache\", \"shape\": [32, 2, 16]}");
    tl_assert_has(text, "{\"name\": \"layers.0.attention.wk.weight\", \"shape\": [32, 64]}");
    tl_assert_has(text, "\"attrs\": {\"theta\": 10000, \"style\": \"interleaved\"}");
    tl_assert_has(text, "{\"name\": \"logits\", \"op\": \"linear\", \"inputs\": [\"x_final\", "
                        "\"tok_embeddings.weight\"]}");
    assert_null(strstr(text, "output.weight"));
    arena_free(a);
    ck_free(m);
}

/* One line, exactly `want` after "FILE: ", for an import of bin. */
static void llama2c_refused(const char *bin, const ImportOpts *o, const char *want)
{
    Arena *a = arena_new();
    Diags d;
    diag_init(&d, a, "model.bin");
    int io;
    const char *out = tl_tmp_path("never.safetensors");
    assert_null(imp_llama2c(a, bin, o, out, &d, &io));
    assert_int_equal(d.n, 1);
    assert_string_equal(d.lines[0], want);
    struct stat st;
    assert_int_not_equal(stat(out, &st), 0);
    arena_free(a);
}

static void test_llama2c_refused(void **state)
{
    (void)state;
    CkShape s;
    ck_llama2c_shape("tiny", &s);
    CkModel *m = ti_model(&s);
    char bin[600];
    snprintf(bin, sizeof bin, "%s", tl_tmp_path("bad.bin"));
    ImportOpts o = {0, 0, 0};
    assert_int_equal(ck_write_llama2c(m, bin, 0), 0);
    size_t n;
    char *good = tl_get_file(bin, &n), want[300];
    assert_int_equal(n, 331036);    /* 28 + 4 x 82752 floats */
    tl_put_file(bin, good, n - 4);
    snprintf(want, sizeof want, "model.bin: 331032 bytes, but a version 0 checkpoint with dim 64, "
             "hidden_dim 96, 2 layers, 4 heads, 2 kv heads, vocab 320, seq_len 32 has 331036");
    llama2c_refused(bin, &o, want);
    int32_t bad_heads[7] = {64, 96, 2, 5, 5, 320, 32};
    memcpy(good, bad_heads, sizeof bad_heads);
    tl_put_file(bin, good, n);
    llama2c_refused(bin, &o, "model.bin: header: n_heads 5 does not divide dim 64");
    int32_t v2[2] = {0x616b3432, 2};
    memcpy(good, v2, sizeof v2);
    tl_put_file(bin, good, n);
    llama2c_refused(bin, &o, "model.bin: header: version 2 not supported (kiln reads version 0 "
                    "and the fp32 version 1)");
    free(good);
    assert_int_equal(ck_write_llama2c(m, bin, 1), 0);
    o.tokens = 33;
    llama2c_refused(bin, &o, "model.bin: --tokens 33 is more than the 32 rows of the KV cache "
                    "(--max-seq)");
    ck_free(m);
}

/* ---- Hugging Face folders ---------------------------------------------------- */

/* The folder's graph with its own weights agrees with the reference. */
static void hf_case(const CkShape *s, int shards, int64_t T, int steps)
{
    CkModel *m = ti_model(s);
    const char *dir = ti_write_hf("hf", m, shards, NULL);
    TiRun r;
    Arena *a = arena_new();
    ti_open(&r, a, ti_hf(a, dir, T, 0), imp_hf_weights(a, dir));
    ti_agree(&r, m, steps);
    ti_close(&r);
    ck_free(m);
}

/* llama, BF16 in 3 shards with an index; the same weights as a llama2.c
 * file give the same logits (wq, wk permuted to rotate_half's order). */
static void test_hf_llama(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("llama");
    s.bf16 = 1;
    hf_case(&s, 3, 1, 10);
    s.bf16 = 0;
    hf_case(&s, 1, 3, 9);
}

static void test_hf_qwen2(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("qwen2");
    hf_case(&s, 1, 1, 10);
    s.bf16 = 1;
    s.tied = 0;
    hf_case(&s, 2, 4, 8);
    s.window = 4;                   /* use_sliding_window: layer 1 in a window of 4 rows */
    hf_case(&s, 1, 3, 12);
}

/* The Hub's GPT-2 (bare names, attn.bias buffers) and transformers'
 * ("transformer." names, untied here). */
static void test_hf_gpt2(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("gpt2");
    hf_case(&s, 1, 1, 10);
    s.gpt2_hub = 0;
    s.tied = 0;
    hf_case(&s, 2, 2, 8);
}

/* Mistral: llama's layers with one kv head, its sliding window (4096)
 * wider than the KV cache; then BF16 with a window of 5 rows, 5 tokens a
 * call over 12 positions (each call's queries see different first keys),
 * and one at a time. */
static void test_hf_mistral(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("mistral");
    hf_case(&s, 1, 1, 10);
    s.bf16 = 1;
    s.window = 5;
    hf_case(&s, 2, 5, 12);
    hf_case(&s, 1, 1, 12);
}

/* Phi-3: q, k and v in one qkv_proj, gate and up in one gate_up_proj,
 * sliced apart; then BF16 in 3 shards, 4 tokens a call. */
static void test_hf_phi3(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("phi3");
    hf_case(&s, 1, 1, 10);
    s.bf16 = 1;
    hf_case(&s, 3, 4, 8);
}

/* Gemma: norms by 1 + w, embeddings times sqrt(64), a gelu (tanh) gate,
 * one kv head of 32 where hidden/heads is 16, tied; then BF16, untied, in
 * 2 shards, 3 tokens a call. */
static void test_hf_gemma(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("gemma");
    hf_case(&s, 1, 1, 10);
    s.bf16 = 1;
    s.tied = 0;
    hf_case(&s, 2, 3, 8);
}

/* Gemma 2: gemma's with norms after attention and around the MLP, scores
 * scaled by query_pre_attn_scalar 24 (not head_dim 32) and capped at 0.5,
 * logits at 3; then BF16, untied, in 3 shards, 4 tokens a call; then a
 * sliding window on every other layer. */
static void test_hf_gemma2(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("gemma2");
    hf_case(&s, 1, 1, 10);
    s.bf16 = 1;
    s.tied = 0;
    hf_case(&s, 3, 4, 8);
    s.window = 3;                   /* layer 0 in a window of 3 rows, layer 1 not */
    hf_case(&s, 1, 3, 12);
}

/* Gemma 3's text model: Gemma 2's layers with q/k norms by 1 + w, no caps;
 * layers 0 and 2 sliding (rope at 10000, layer 1 at 1e6), first with a
 * window spanning the cache, then one of 3 rows, BF16 in 2 shards, 3
 * tokens a call. */
static void test_hf_gemma3(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("gemma3_text");
    hf_case(&s, 1, 1, 10);
    s.bf16 = 1;
    s.window = 3;
    hf_case(&s, 2, 3, 12);
}

static void refused(const char *type, const char *extra, const char *want);

/* gpt-oss against the reference (transformers' modeling_gpt_oss by hand):
 * sinks, YaRN's rope, layer 0 in a window of 4 rows, biased experts with
 * the clamped SwiGLU, topk-then-softmax routing; 12 decode steps and
 * prefill chunks of 5, f32 and BF16. Then refusals: an MXFP4
 * quantization_config's unknown key or bad modules_to_not_convert (and
 * MXFP4 of another model_type), attention without biases, a bad layer kind, a YaRN factor
 * transformers would replace, experts_per_token disagreeing. */
static void test_hf_gpt_oss(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("gpt_oss");
    hf_case(&s, 1, 1, 12);
    s.bf16 = 1;
    hf_case(&s, 1, 5, 12);
    refused("gpt_oss", "\"quantization_config\": {\"quant_method\": \"mxfp4\", \"group_size\": 16}",
            "config.json: quantization_config.group_size: not supported (kiln reads gpt_oss's "
            "MXFP4 experts only)");
    refused("gpt_oss", "\"quantization_config\": {\"quant_method\": \"mxfp4\", "
            "\"modules_to_not_convert\": [\"lm_head\", 3]}",
            "config.json: quantization_config.modules_to_not_convert: must be a list of names, "
            "got an array");
    refused("llama", "\"quantization_config\": {\"quant_method\": \"mxfp4\"}",
            "config.json: quantization_config.quant_method: \"mxfp4\" not supported for llama "
            "(kiln reads gpt_oss's MXFP4 experts)");
    refused("gpt_oss", "\"attention_bias\": false",
            "config.json: attention_bias: false not supported");
    refused("gpt_oss", "\"layer_types\": [\"chunked_attention\"]",
            "config.json: layer_types[0]: must be \"full_attention\" or \"sliding_attention\", "
            "got \"chunked_attention\"");
    refused("gpt_oss", "\"layer_types\": [\"sliding_attention\", \"full_attention\"]",
            "config.json: layer_types: must be a list of 1 layer kinds, got an array");
    refused("gpt_oss", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 8.0, "
            "\"original_max_position_embeddings\": 4}",
            "config.json: rope_scaling.factor: 8 is not max_position_embeddings / "
            "original_max_position_embeddings (16), which transformers uses");
    refused("gpt_oss", "\"experts_per_token\": 3",
            "config.json: experts_per_token: 3 is not num_experts_per_tok 2");
}

/* Mixtral: 4 experts in both layers, top 2 renormalised, with
 * block_sparse_moe's names; then BF16 in 2 shards, 3 tokens a call. */
static void test_hf_mixtral(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("mixtral");
    hf_case(&s, 1, 1, 10);
    s.bf16 = 1;
    hf_case(&s, 2, 3, 8);
}

/* Qwen3's dense models: q/k rmsnorm per head, head_dim 32 where
 * hidden/heads is 16; then BF16, untied, in 2 shards. */
static void test_hf_qwen3(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("qwen3");
    hf_case(&s, 1, 1, 10);
    s.bf16 = 1;
    s.tied = 0;
    hf_case(&s, 2, 3, 8);
}

/* A dense layer among sparse ones; then 70 experts, so that the experts'
 * weights stack in two rounds of concat. */
static void test_hf_qwen3_moe(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("qwen3_moe");
    hf_case(&s, 1, 1, 8);
    s.bf16 = 1;
    s.experts = 70;
    s.top_k = 3;
    s.moe_hidden = 8;
    s.norm_topk = 0;
    s.dense_layers = 0;
    s.layers = 1;
    hf_case(&s, 2, 2, 6);
}

/* `extra` in llama's (or type's) config.json is refused with exactly
 * `want` (after "config.json: "), and nothing else. */
static void refused(const char *type, const char *extra, const char *want)
{
    CkShape s = ti_hf_shape(type);
    s.layers = 1;
    CkModel *m = ti_model(&s);
    const char *dir = ti_write_hf("refused", m, 1, extra);
    ck_free(m);
    Arena *a = arena_new();
    Diags d;
    diag_init(&d, a, "config.json");
    int io;
    ImportOpts o = {0, 0, 0};
    assert_null(imp_hf(a, dir, &o, &d, &io));
    if (d.n != 1 || strcmp(d.lines[0], want)) {
        diag_print(&d, stderr);
        fail_msg("wanted the one line: %s", want);
    }
    arena_free(a);
}

static void test_hf_refused(void **state)
{
    (void)state;
    refused("llama", "\"x\": 0",
            "config.json: x: unknown to kiln's llama import; refused rather than ignored");
    refused("llama", "\"attention_bias\": true", "config.json: attention_bias: true not supported");
    refused("llama", "\"mlp_bias\": true", "config.json: mlp_bias: true not supported");
    refused("llama", "\"rope_interleaved\": true", "config.json: rope_interleaved: true not supported");
    refused("llama", "\"hidden_act\": \"gelu\"",
            "config.json: hidden_act: \"gelu\" not supported (kiln: silu)");
    refused("llama", "\"rope_parameters\": {\"rope_type\": \"yarn\"}",
            "config.json: rope_parameters.factor: missing (rope_type \"yarn\" needs it)");
    refused("llama", "\"quantization_config\": {\"quant_method\": \"gptq\"}",
            "config.json: quantization_config.quant_method: \"gptq\" not supported (kiln reads "
            "FP8 checkpoints: \"fp8\", \"compressed-tensors\"; gpt_oss's \"mxfp4\"; or a GGUF "
            "file)");
    refused("llama", "\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e5m2\"}",
            "config.json: quantization_config.fmt: \"e5m2\" not supported (kiln reads e4m3)");
    refused("llama", "\"quantization_config\": {\"quant_method\": \"compressed-tensors\", "
            "\"format\": \"float-quantized\", \"config_groups\": {\"g\": {\"weights\": "
            "{\"num_bits\": 4, \"type\": \"float\", \"strategy\": \"channel\"}}}}",
            "config.json: quantization_config.config_groups.g.weights.num_bits: 4 not supported "
            "(kiln reads 8-bit float (e4m3) weights)");
    refused("llama", "\"num_key_value_heads\": 3",
            "config.json: num_key_value_heads: 3 does not divide num_attention_heads 4");
    refused("qwen2", "\"use_sliding_window\": true, \"layer_types\": [\"local\"]",
            "config.json: layer_types[0]: must be \"full_attention\" or \"sliding_attention\", "
            "got \"local\"");
    refused("qwen2", "\"model_type\": \"phi\"",
            "config.json: model_type: kiln imports llama, gemma, gemma2, gemma3_text, mistral, "
            "mixtral, phi3, qwen2, qwen3, qwen3_moe, gpt_oss and gpt2, got \"phi\"");
    refused("phi3", "\"partial_rotary_factor\": 0.75",
            "config.json: partial_rotary_factor: 0.75 not supported");

    refused("gpt2", "\"activation_function\": \"relu\"",
            "config.json: activation_function: \"relu\" not supported (kiln: gelu_new, "
            "gelu_pytorch_tanh, gelu)");
    refused("gpt2", "\"scale_attn_by_inverse_layer_idx\": true",
            "config.json: scale_attn_by_inverse_layer_idx: true not supported");
    refused("gpt2", "\"add_cross_attention\": true",
            "config.json: add_cross_attention: true not supported");
    refused("qwen3_moe", "\"partial_rotary_factor\": 0.5",
            "config.json: partial_rotary_factor: 0.5 not supported");
}

/* The rope_scaling line of the first case above: its own message. */
/* Llama 3.1's rope_scaling (rope_type llama3) against the reference's own
 * scaled frequencies; other types, and llama3 without its numbers,
 * refused by name. */
static void test_hf_rope_scaling(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("llama");
    s.llama3_rope = 1;
    hf_case(&s, 1, 1, 12);
    hf_case(&s, 1, 4, 10);
    refused("llama", "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}",
            "config.json: rope_scaling.type: only \"default\", \"llama3\" and \"yarn\" are "
            "supported, got \"linear\"");
    refused("llama", "\"rope_scaling\": {\"rope_type\": \"llama3\", \"low_freq_factor\": 1, "
            "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}",
            "config.json: rope_scaling.factor: missing (rope_type \"llama3\" needs it)");
    refused("llama", "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, "
            "\"low_freq_factor\": 1, \"high_freq_factor\": 4, "
            "\"original_max_position_embeddings\": 8192, \"beta_fast\": 32}",
            "config.json: rope_scaling.beta_fast: not supported without rope_type \"yarn\"");
}

/* The graph of an imported decoder, and the options' shapes. */
static void test_hf_graph(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("qwen2");
    CkModel *m = ti_model(&s);
    const char *dir = ti_write_hf("graph", m, 1, NULL);
    ck_free(m);
    Arena *a = arena_new();
    char *text = ti_hf(a, dir, 8, 100);
    tl_assert_has(text, "{\"name\": \"tokens\", \"shape\": [8], \"dtype\": \"i32\"}");
    tl_assert_has(text, "{\"name\": \"positions\", \"shape\": [8], \"dtype\": \"i32\"}");
    tl_assert_has(text, "{\"name\": \"layers.0.k_cache\", \"shape\": [100, 2, 16]}");
    tl_assert_has(text, "{\"name\": \"first_position\", \"op\": \"slice\"");
    tl_assert_has(text, "\"model.layers.1.self_attn.k_proj.bias\"");
    tl_assert_has(text, "{\"name\": \"logits\", \"op\": \"linear\", \"inputs\": [\"x_final\", "
                        "\"model.embed_tokens.weight\"]}");
    tl_assert_has(text, "\"outputs\": [\"logits\"]");
    /* S defaults to max_position_embeddings (128 here) */
    text = ti_hf(a, dir, 1, 0);
    tl_assert_has(text, "{\"name\": \"layers.1.v_cache\", \"shape\": [128, 2, 16]}");
    arena_free(a);
}

/* ---- shards -------------------------------------------------------------------- */

static void st_fails(const char *path, const char *want)
{
    rt_safetensors st;
    rt_err e = {0, ""};
    assert_int_equal(rt_st_open(&st, path, &e), RT_EINVAL);
    assert_string_equal(e.msg, want);
}

static void put_text(const char *path, const char *text) { tl_put_file(path, text, strlen(text)); }

static void test_shards(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("gpt2");
    s.layers = 1;
    s.gpt2_hub = 0;
    CkModel *m = ti_model(&s);
    const char *dir = ti_write_hf("shards", m, 2, NULL);
    ck_free(m);
    char index[1024], path[4096];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    rt_safetensors st;
    rt_err e = {0, ""};
    assert_int_equal(rt_st_open(&st, index, &e), 0);
    assert_int_equal(st.n, 16);
    assert_non_null(rt_st_find(&st, "transformer.wte.weight"));
    assert_non_null(rt_st_find(&st, "transformer.ln_f.bias"));
    rt_st_close(&st);
    size_t n;
    char *good = tl_get_file(index, &n);
    /* a tensor moved in the map: found in the other shard */
    char *moved = strdup(good), *at = strstr(moved, "\"transformer.wte.weight\": \"model-00001");
    assert_non_null(at);
    memcpy(at + strlen("\"transformer.wte.weight\": \"model-0000"), "2", 1);
    put_text(index, moved);
    snprintf(path, sizeof path, "%s: 'transformer.wte.weight': in model-00001-of-00002.safetensors, "
             "but the weight_map puts it in model-00002-of-00002.safetensors", index);
    st_fails(index, path);
    /* a tensor the map does not list */
    free(moved);
    moved = strdup(good);
    at = strstr(moved, "\"transformer.wpe.weight\"");
    memcpy(at, "\"transformer.wpX.weight\"", 24);
    put_text(index, moved);
    snprintf(path, sizeof path, "%s: 'transformer.wpe.weight': in model-00001-of-00002.safetensors, "
             "but the weight_map does not list it", index);
    st_fails(index, path);
    /* a shard outside the folder; metadata of any shape; no weight_map */
    put_text(index, "{\"metadata\": {\"a\": [1, -2.5e3, {\"b\": null}], \"c\": true},"
                    " \"weight_map\": {\"x\": \"../model.safetensors\"}}");
    snprintf(path, sizeof path, "%s: weight_map: '../model.safetensors' is not a file name in "
             "the index's folder", index);
    st_fails(index, path);
    put_text(index, "{\"metadata\": {}}");
    snprintf(path, sizeof path, "%s: no weight_map", index);
    st_fails(index, path);
    put_text(index, "{\"weight_map\": {\"x\": \"a\", \"x\": \"b\"}}");
    snprintf(path, sizeof path, "%s: weight_map: 'x' given twice", index);
    st_fails(index, path);
    put_text(index, "{\"weight_map\": {\"x\": 1}}");
    snprintf(path, sizeof path, "%s: index: invalid JSON at byte 21: expected a string", index);
    st_fails(index, path);
    free(moved);
    free(good);
}

/* ---- a GPT-2 folder's weights, opened by the runtime's reader ------------------- */

/* imp_hf on dir refused with one line, the runtime's for its weights. */
static void gpt2_weights_refused(const char *dir, int want_io)
{
    Arena *a = arena_new();
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    rt_safetensors st;
    rt_err e = {0, ""};
    assert_int_not_equal(rt_st_open(&st, path, &e), 0);
    Diags d;
    diag_init(&d, a, "config.json");
    int io = 0;
    ImportOpts o = {0, 0, 0};
    assert_null(imp_hf(a, dir, &o, &d, &io));
    assert_int_equal(d.n, 1);
    assert_string_equal(d.lines[0], e.msg);
    assert_int_equal(io, want_io);
    arena_free(a);
}

/* The import reads which names a GPT-2 checkpoint uses from its weights,
 * through rt_st_open: a file cut short is refused as the program would
 * refuse it, naming the tensor past the end; a file that cannot be read
 * is an I/O problem. */
static void test_hf_gpt2_weights(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("gpt2");
    s.layers = 1;
    CkModel *m = ti_model(&s);
    const char *dir = ti_write_hf("gpt2w", m, 1, NULL);
    ck_free(m);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    size_t n;
    char *good = tl_get_file(path, &n);
    tl_put_file(path, good, n - 4);
    gpt2_weights_refused(dir, 0);
    rt_safetensors st;
    rt_err e = {0, ""};
    assert_int_not_equal(rt_st_open(&st, path, &e), 0);
    assert_non_null(strstr(e.msg, "': data_offsets ["));
    assert_non_null(strstr(e.msg, "] are not inside the data section of "));
    tl_put_file(path, good, 4);
    gpt2_weights_refused(dir, 0);
    free(good);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0700), 0);
    gpt2_weights_refused(dir, 1);
    assert_int_equal(rmdir(path), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama2c_v0),     cmocka_unit_test(test_llama2c_v1),
        cmocka_unit_test(test_llama2c_stories15M),
        cmocka_unit_test(test_llama2c_graph),  cmocka_unit_test(test_llama2c_refused),
        cmocka_unit_test(test_hf_llama),       cmocka_unit_test(test_hf_qwen2),
        cmocka_unit_test(test_hf_gpt2),        cmocka_unit_test(test_hf_mistral),
        cmocka_unit_test(test_hf_phi3),        cmocka_unit_test(test_hf_gemma),
        cmocka_unit_test(test_hf_gemma2),      cmocka_unit_test(test_hf_gemma3),
        cmocka_unit_test(test_hf_mixtral),      cmocka_unit_test(test_hf_gpt_oss),
        cmocka_unit_test(test_hf_qwen3),
        cmocka_unit_test(test_hf_qwen3_moe),
        cmocka_unit_test(test_hf_refused),     cmocka_unit_test(test_hf_rope_scaling),
        cmocka_unit_test(test_hf_graph),       cmocka_unit_test(test_shards),
        cmocka_unit_test(test_hf_gpt2_weights),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
