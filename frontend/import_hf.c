/* frontend/import_hf.c: a Hugging Face folder (config.json, and the
 * safetensors it ships) to the decoder graph of import_decoder.c.
 *
 * Contract: every key of config.json is accounted for. A key is read
 * (and its value checked), or known to be harmless at inference (names,
 * token ids, dropout rates, generation defaults: `ignored` below), or
 * refused by name when it asks for something kiln does not do
 * ("config.json: rope_scaling: not supported"). A key kiln does not know
 * is refused too: it might change the arithmetic. Sizes are required;
 * behaviour fields missing from the file take transformers' defaults for
 * the model_type. A quantization_config (FP8 checkpoints, gpt_oss's
 * MXFP4) is read in import_hf_quant.c. */
#include "fe.h"
#include "import.h"
#include "import_hf.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- reading keys ---------------------------------------------------------- */

/* The value of key (NULL when absent or null), which is now accounted for. */
json_t *hf_take(Cfg *c, const char *key)
{
    ARR_PUSH(c->fx.a, c->taken, c->ntaken, c->cap, key);
    json_t *j = json_object_get(c->root, key);
    return json_is_null(j) ? NULL : j;
}

void hf_bad(Cfg *c, const char *key, json_t *j, const char *want)
{
    fe_want(&c->fx, key, j, want);
}

/* An integer in [lo, 2^31); dflt when absent (dflt < 0: required). */
static int64_t get_int(Cfg *c, const char *key, int64_t dflt, int64_t lo)
{
    json_t *j = hf_take(c, key);
    if (!j && dflt < 0)
        diag(c->fx.d, key, "missing");
    if (!j)
        return dflt < 0 ? 1 : dflt;
    int64_t v = json_integer_value(j);
    if (json_is_integer(j) && v >= lo && v <= INT32_MAX)
        return v;
    hf_bad(c, key, j, arena_printf(c->fx.a, "must be an integer in [%lld, 2^31)", (long long)lo));
    return lo > 0 ? lo : 1;
}

static int64_t need(Cfg *c, const char *key) { return get_int(c, key, -1, 1); }

/* The most layers, and expert matrices (layers x experts), that an
 * imported graph may have: a config past them is refused by name rather
 * than built into a graph that cannot fit in memory. Published models
 * stay well below (126 layers; 94 layers of 128 experts). */
#define IMP_MAX_LAYERS 1024
#define IMP_MAX_EXPERTS 65536

static int64_t need_layers(Cfg *c, const char *key)
{
    int64_t n = need(c, key);
    if (n <= IMP_MAX_LAYERS)
        return n;
    diag(c->fx.d, key, "%lld is more than kiln's %d layers", (long long)n, IMP_MAX_LAYERS);
    return 1;
}

/* A finite number > 0; dflt when absent. */
static double get_num(Cfg *c, const char *key, double dflt)
{
    json_t *j = hf_take(c, key);
    if (!j)
        return dflt;
    if (json_is_number(j) && json_number_value(j) > 0 && isfinite(json_number_value(j)))
        return json_number_value(j);
    hf_bad(c, key, j, "must be a number > 0");
    return dflt;
}

static int get_bool(Cfg *c, const char *key, int dflt)
{
    json_t *j = hf_take(c, key);
    if (!j)
        return dflt;
    if (json_is_boolean(j))
        return json_is_true(j);
    hf_bad(c, key, j, "must be true or false");
    return dflt;
}

/* A boolean kiln supports only one value of (absent: that value). */
static void only_bool(Cfg *c, const char *key, int want)
{
    json_t *j = hf_take(c, key);
    if (j && json_is_boolean(j) && json_is_true(j) != want)
        diag(c->fx.d, key, "%s not supported", want ? "false" : "true");
    else if (j && !json_is_boolean(j))
        hf_bad(c, key, j, "must be true or false");
}

/* A string among `allowed` (NULL-terminated; absent: allowed[0]); its
 * index. */
static int one_of(Cfg *c, const char *key, const char *const *allowed)
{
    json_t *j = hf_take(c, key);
    const char *s = j ? json_string_value(j) : allowed[0];
    for (int i = 0; s && allowed[i]; i++)
        if (!strcmp(s, allowed[i]))
            return i;
    FILE *f = arena_stream(c->fx.a);
    for (int i = 0; allowed[i]; i++)
        fprintf(f, "%s%s", i ? ", " : "", allowed[i]);
    const char *list = arena_stream_text(c->fx.a, f);
    if (s)
        diag(c->fx.d, key, "\"%s\" not supported (kiln: %s)", fe_quote(&c->fx, s), list);
    else
        hf_bad(c, key, j, "must be a string");
    return 0;
}

/* A feature kiln does not have: the key must be absent or null (or an
 * empty object or list, which asks for nothing). */
static void refuse(Cfg *c, const char *key)
{
    json_t *j = hf_take(c, key);
    int empty = (json_is_object(j) && !json_object_size(j)) ||
                (json_is_array(j) && !json_array_size(j));
    if (j && !empty)
        diag(c->fx.d, key, "not supported");
}

/* Keys with no effect on a forward pass in f32. */
static void ignore(Cfg *c, const char *const *keys)
{
    for (int i = 0; keys[i]; i++)
        hf_take(c, keys[i]);
}

/* Every key not taken: refused by name. */
static void leftovers(Cfg *c)
{
    const char *key;
    json_t *v;
    json_object_foreach(c->root, key, v) {
        int known = 0;
        for (int i = 0; !known && i < c->ntaken; i++)
            known = !strcmp(c->taken[i], key);
        if (!known)
            diag(c->fx.d, fe_quote(&c->fx, key),
                 "unknown to kiln's %s import; refused rather than ignored", c->type);
    }
}

/* ---- what every model_type shares ------------------------------------------ */

/* Names, token ids, the dtype of the saved weights (kiln reads what the
 * safetensors hold), dropout (training only), generation defaults,
 * classification heads, and flags of encoder-decoder models that a
 * decoder-only model does not read. */
static const char *const ignored[] = {
    "architectures", "transformers_version", "torch_dtype", "dtype", "_name_or_path",
    "_commit_hash", "_attn_implementation_autoset", "auto_map", "bos_token_id", "eos_token_id",
    "pad_token_id", "sep_token_id", "decoder_start_token_id", "forced_bos_token_id",
    "forced_eos_token_id", "use_cache", "initializer_range", "tokenizer_class",
    "output_attentions", "output_hidden_states", "return_dict", "torchscript", "use_bfloat16",
    "tf_legacy_loss", "chunk_size_feed_forward", "id2label", "label2id", "problem_type",
    "finetuning_task", "task_specific_params", "prefix", "is_decoder", "tie_encoder_decoder",
    "cross_attention_hidden_size", "attention_dropout", "max_length", "min_length",
    "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty",
    "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty",
    "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "remove_invalid_values",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens", NULL,
};

static void common(Cfg *c)
{
    ignore(c, ignored);
    only_bool(c, "is_encoder_decoder", 0);
    only_bool(c, "add_cross_attention", 0);
    refuse(c, "pruned_heads");
    hf_quantization(c);
}

/* ---- the llama family ---------------------------------------------------------- */

static void rope_yarn(Cfg *c, const char *name, const double *v, int truncate, ImpLlama *L);

/* The rope of transformers' RoPE parameters: rope_scaling (transformers
 * 4) or rope_parameters (5: rope_theta inside). rope_type (or its old
 * name type) "default" is plain; "llama3" (Llama 3.1, 3.2) needs its four
 * numbers, which become the rope op's attributes; "yarn" (gpt-oss) its
 * factor, and beta_fast, beta_slow, truncate, attention_factor and
 * original_max_position_embeddings when given (rope_yarn); any other
 * type (linear, dynamic, ...) and any other key are refused by name. */
static void rope_object(Cfg *c, const char *name, json_t *o, ImpLlama *L)
{
    static const char *const nums[] = {"factor", "low_freq_factor", "high_freq_factor",
                                       "original_max_position_embeddings", "beta_fast",
                                       "beta_slow", "attention_factor"};
    double v[7] = {0};
    int llama3 = 0, yarn = 0, truncate = 1;
    const char *key;
    json_t *j;
    if (o && !json_is_object(o))
        hf_bad(c, name, o, "must be an object");
    json_object_foreach(o, key, j) {
        const char *at = arena_printf(c->fx.a, "%s.%s", name, fe_quote(&c->fx, key));
        int num = -1;
        for (int i = 0; i < 7; i++)
            num = strcmp(key, nums[i]) ? num : i;
        if (!strcmp(key, "rope_type") || !strcmp(key, "type")) {
            const char *t = json_string_value(j);
            if (t && !strcmp(t, "llama3"))
                llama3 = 1;
            else if (t && !strcmp(t, "yarn"))
                yarn = 1;
            else if (!t || strcmp(t, "default"))
                hf_bad(c, at, j, "only \"default\", \"llama3\" and \"yarn\" are supported");
        } else if (!strcmp(key, "truncate")) {
            if (json_is_boolean(j))
                truncate = json_is_true(j);
            else
                hf_bad(c, at, j, "must be true or false");
        } else if (!strcmp(key, "rope_theta") && !strcmp(name, "rope_parameters")) {
            if (json_is_number(j) && json_number_value(j) > 0 && isfinite(json_number_value(j)))
                L->theta = json_number_value(j);
            else
                hf_bad(c, at, j, "must be a number > 0");
        } else if (num >= 0) {
            if (json_is_number(j) && json_number_value(j) > 0 && isfinite(json_number_value(j)))
                v[num] = json_number_value(j);
            else
                hf_bad(c, at, j, "must be a number > 0");
        } else {
            diag(c->fx.d, at, "not supported");
        }
    }
    if (yarn) {
        rope_yarn(c, name, v, truncate, L);
        return;
    }
    for (int i = 4; i < 7; i++)
        if (v[i])
            diag(c->fx.d, arena_printf(c->fx.a, "%s.%s", name, nums[i]),
                 "not supported without rope_type \"yarn\"");
    if (!llama3)
        return;
    for (int i = 0; i < 4; i++)
        if (!v[i])
            diag(c->fx.d, arena_printf(c->fx.a, "%s.%s", name, nums[i]),
                 "missing (rope_type \"llama3\" needs it)");
    if (v[0] && v[0] < 1)
        diag(c->fx.d, arena_printf(c->fx.a, "%s.factor", name), "%g is below 1", v[0]);
    if (v[1] && v[2] && v[2] <= v[1])
        diag(c->fx.d, arena_printf(c->fx.a, "%s.high_freq_factor", name),
             "%g is not above low_freq_factor %g", v[2], v[1]);
    if (v[3] != floor(v[3]) || v[3] > INT32_MAX)
        diag(c->fx.d, arena_printf(c->fx.a, "%s.%s", name, nums[3]),
             "%g is not a whole number of positions below 2^31", v[3]);
    L->rope_llama3 = 1;
    L->rope_factor = v[0], L->rope_low = v[1], L->rope_high = v[2];
    L->rope_original = (int64_t)v[3];
}

/* YaRN (transformers' _compute_yarn_parameters) from the numbers of
 * rope_object (v: factor, -, -, original_max_position_embeddings,
 * beta_fast, beta_slow, attention_factor; 0 when absent): the original
 * context defaults to max_position_embeddings (L->max_seq, read before);
 * given, transformers takes factor as max_position_embeddings over it,
 * so a factor that says otherwise is refused. mscale and mscale_all_dim
 * (DeepSeek's) are refused as unknown keys. */
static void rope_yarn(Cfg *c, const char *name, const double *v, int truncate, ImpLlama *L)
{
    const char *at = arena_printf(c->fx.a, "%s.factor", name);
    if (!v[0])
        diag(c->fx.d, at, "missing (rope_type \"yarn\" needs it)");
    else if (v[0] < 1)
        diag(c->fx.d, at, "%g is below 1", v[0]);
    double orig = v[3] ? v[3] : (double)L->max_seq;
    if (orig != floor(orig) || orig > INT32_MAX)
        diag(c->fx.d, arena_printf(c->fx.a, "%s.original_max_position_embeddings", name),
             "%g is not a whole number of positions below 2^31", orig);
    else if (v[3] && v[0] && v[0] != (double)L->max_seq / orig)
        diag(c->fx.d, at, "%g is not max_position_embeddings / original_max_position_embeddings "
             "(%g), which transformers uses", v[0], (double)L->max_seq / orig);
    double fast = v[4] ? v[4] : 32, slow = v[5] ? v[5] : 1;
    if (!(slow < fast))
        diag(c->fx.d, arena_printf(c->fx.a, "%s.beta_fast", name),
             "%g is not above beta_slow %g", fast, slow);
    L->rope_yarn = 1;
    L->rope_factor = v[0] >= 1 ? v[0] : 1;
    L->rope_original = (int64_t)orig;
    L->rope_beta_fast = fast, L->rope_beta_slow = slow;
    L->rope_truncate = truncate;
    L->rope_mscale = v[6];
}

/* rope_theta, and rope_scaling or rope_parameters (rope_object). */
static void rope(Cfg *c, ImpLlama *L)
{
    L->theta = get_num(c, "rope_theta", 10000.0);
    json_t *scaling = hf_take(c, "rope_scaling"), *params = hf_take(c, "rope_parameters");
    rope_object(c, "rope_scaling", scaling, L);
    rope_object(c, "rope_parameters", params, L);
    json_t *partial = hf_take(c, "partial_rotary_factor");
    if (partial && !(json_is_number(partial) && json_number_value(partial) == 1.0))
        diag(c->fx.d, "partial_rotary_factor", "%s not supported", fe_got(&c->fx, partial));
}

/* L->experts from key, the experts a layer (required, at least lo),
 * within IMP_MAX_EXPERTS matrices over the layers; L->top_k from
 * num_experts_per_tok, at most the experts (when there are any). */
static void moe_sizes(Cfg *c, ImpLlama *L, const char *key, int64_t lo)
{
    int before = c->fx.d->n;
    L->experts = get_int(c, key, -1, lo);
    if (c->fx.d->n == before && L->experts * L->layers > IMP_MAX_EXPERTS)
        diag(c->fx.d, key, "%lld experts in each of %lld layers: more than kiln's %d expert "
             "matrices", (long long)L->experts, (long long)L->layers, IMP_MAX_EXPERTS);
    int refused = c->fx.d->n > before;      /* then no count to compare top_k with */
    if (refused)
        L->experts = 1;
    L->top_k = need(c, "num_experts_per_tok");
    if (!refused && L->experts && L->top_k > L->experts)
        diag(c->fx.d, "num_experts_per_tok", "%lld is more than %s %lld", (long long)L->top_k,
             key, (long long)L->experts);
}

static void window_layers(Cfg *c, ImpLlama *L, int64_t pattern);

/* Qwen's sliding window (transformers' Qwen2Config): with
 * use_sliding_window, layers from max_window_layers on (or layer_types'
 * "sliding_attention" ones) attend in a window of sliding_window rows;
 * without it, the window's size, its layer count and the layer kinds mean
 * nothing. */
static void qwen_sliding(Cfg *c, ImpLlama *L)
{
    static const char *const off[] = {"sliding_window", "max_window_layers", "layer_types",
                                      NULL};
    if (!get_bool(c, "use_sliding_window", 0)) {
        ignore(c, off);
        return;
    }
    L->window = need(c, "sliding_window");
    int64_t from = get_int(c, "max_window_layers", 28, 0);
    if (json_object_get(c->root, "layer_types")) {
        window_layers(c, L, 1);
        return;
    }
    unsigned char *on = arena_alloc(c->fx.a, (size_t)L->layers + 1);
    for (int64_t l = 0; l < L->layers; l++)
        on[l] = l >= from;
    L->windowed = on;
}

/* The fields the llama family (llama, gemma, gemma2, gemma3_text,
 * mistral, mixtral, phi3, qwen2, qwen3, qwen3_moe) share. L->max_seq holds
 * max_position_embeddings until the options set S. */
static void llama_common(Cfg *c, ImpLlama *L, int64_t max_pos)
{
    static const char *const silu[] = {"silu", NULL};
    L->vocab = need(c, "vocab_size");
    L->dim = need(c, "hidden_size");
    L->layers = need_layers(c, "num_hidden_layers");
    L->heads = need(c, "num_attention_heads");
    L->kv_heads = get_int(c, "num_key_value_heads", L->heads, 1);
    L->head_dim = get_int(c, "head_dim", 0, 1);
    L->max_seq = get_int(c, "max_position_embeddings", max_pos, 1);
    L->eps = get_num(c, "rms_norm_eps", 1e-6);
    rope(c, L);
    L->tied = get_bool(c, "tie_word_embeddings", 0);
    if (!L->gelu)                       /* gemma's gate is read before */
        one_of(c, "hidden_act", silu);
    L->rope_style = "half";
    L->hf_names = 1;
}

/* Llama 2, 3, 3.1, 3.2, TinyLlama, SmolLM. pretraining_tp splits the
 * matmuls into the same sums. SmolLM's configs carry nanotron's
 * is_llama_config (a marker) and rope_interleaved, which transformers
 * never reads (it rotates halves): false is taken, true refused. */
static void read_llama(Cfg *c, ImpLlama *L)
{
    static const char *const same[] = {"pretraining_tp", NULL};
    llama_common(c, L, 2048);
    L->hidden = need(c, "intermediate_size");
    only_bool(c, "attention_bias", 0);
    only_bool(c, "mlp_bias", 0);
    ignore(c, same);
    only_bool(c, "is_llama_config", 1);
    only_bool(c, "rope_interleaved", 0);
}

static void read_qwen2(Cfg *c, ImpLlama *L)
{
    llama_common(c, L, 32768);
    L->hidden = need(c, "intermediate_size");
    L->qkv_bias = 1;
    qwen_sliding(c, L);
    only_bool(c, "use_mrope", 0);
}

/* Mistral (7B v0.1 ... v0.3, Nemo): llama's layers and names. Its
 * sliding window (transformers' default 4096; null: none) lets a query
 * see the `sliding_window` rows up to its own (attention's window); over a
 * KV cache of no more rows than that, every query sees every row, and the
 * graph has no window (imp_hf decides once S is known). */
static void read_mistral(Cfg *c, ImpLlama *L)
{
    llama_common(c, L, 131072);
    L->hidden = need(c, "intermediate_size");
    int given = json_object_get(c->root, "sliding_window") != NULL;
    L->window = get_int(c, "sliding_window", given ? 0 : 4096, 1);
}

/* Mixtral (8x7B, 8x22B): Mistral's attention, and in every layer a moe
 * of num_local_experts SwiGLU experts of intermediate_size, the top
 * num_experts_per_tok of the router's softmax renormalised (transformers'
 * MixtralSparseMoeBlock: norm_topk_prob true). router_jitter_noise acts in
 * training only. */
static void read_mixtral(Cfg *c, ImpLlama *L)
{
    static const char *const training[] = {"output_router_logits", "router_aux_loss_coef",
                                           "router_jitter_noise", NULL};
    llama_common(c, L, 131072);
    L->window = get_int(c, "sliding_window", 0, 1);
    ignore(c, training);
    moe_sizes(c, L, "num_local_experts", 1);
    L->moe_hidden = need(c, "intermediate_size");
    L->norm_topk = 1;
    unsigned char *moe = arena_alloc(c->fx.a, (size_t)L->layers);
    memset(moe, 1, (size_t)L->layers);
    L->moe = moe;
    L->hf_names = 2;
}

/* Phi-3 (mini, medium; Phi-3.5-mini with its long rope refused by rope):
 * llama's layers with q, k and v in one qkv_proj and gate and up in one
 * gate_up_proj (transformers' modeling_phi3). Its sliding window (none
 * when absent) is mistral's; original_max_position_embeddings matters to
 * the long rope only; the dropouts act in training. A partial rotary
 * factor (Phi-4-mini's 0.75) is refused by rope(). */
static void read_phi3(Cfg *c, ImpLlama *L)
{
    static const char *const unused[] = {"embd_pdrop", "resid_pdrop",
                                         "original_max_position_embeddings", NULL};
    llama_common(c, L, 4096);
    L->hidden = need(c, "intermediate_size");
    L->window = get_int(c, "sliding_window", 0, 1);
    only_bool(c, "attention_bias", 0);
    ignore(c, unused);
    L->hf_names = 3;
}

/* Gemma (2B, 7B; CodeGemma): llama's layers (transformers'
 * modeling_gemma) with norms that scale by 1 + w, the embeddings times
 * sqrt(hidden_size) (an f32, as transformers computes in float32; in
 * bfloat16 it rounds that to 8 bits), a GELU gate and tied embeddings by
 * default. The gate's activation is hidden_activation: gelu_pytorch_tanh
 * (also when absent or null, transformers' default) or gelu (erf);
 * transformers ignores hidden_act, so does kiln. */
static void read_gemma(Cfg *c, ImpLlama *L)
{
    static const char *const gelus[] = {"gelu_pytorch_tanh", "gelu", NULL};
    static const char *const unused[] = {"hidden_act", NULL};
    int tied_given = json_object_get(c->root, "tie_word_embeddings") != NULL;
    ignore(c, unused);
    json_t *act = json_object_get(c->root, "hidden_activation");
    if (json_is_null(act))
        hf_take(c, "hidden_activation");
    L->gelu = one_of(c, "hidden_activation", gelus) == 1 ? "none" : "tanh";
    llama_common(c, L, 8192);
    L->hidden = need(c, "intermediate_size");
    only_bool(c, "attention_bias", 0);
    L->tied = tied_given ? L->tied : 1;
    L->norm_one = 1;
    L->embed_scale = (float)sqrt((double)L->dim);
}

/* A soft cap: dflt when absent, none (0) when null, else > 0. */
static double softcap(Cfg *c, const char *key, double dflt)
{
    if (json_is_null(json_object_get(c->root, key))) {
        hf_take(c, key);
        return 0;
    }
    double v = get_num(c, key, dflt);
    if (!(v > 0) && json_object_get(c->root, key))
        diag(c->fx.d, key, "%g is not a soft cap (> 0, or null for none)", v);
    return v;
}

/* Gemma 2 (2B, 9B, 27B): gemma's layers (transformers' modeling_gemma2)
 * with a norm after attention and one around the MLP, the attention
 * scores scaled by query_pre_attn_scalar^-1/2 and capped at
 * attn_logit_softcapping, the logits at final_logit_softcapping (c
 * tanh(x / c); null: none). Every other layer (0, 2, ...) attends in a
 * window of sliding_window rows, as mistral's; cache_implementation is how
 * transformers keeps the cache. */
/* The layers in the sliding window: layer_types' "sliding_attention"
 * entries when given (transformers 4.53 on), else those where (l + 1) %
 * pattern is not 0 (pattern 2 from layer 0: every other layer). */
static void window_layers(Cfg *c, ImpLlama *L, int64_t pattern)
{
    static const char *const kinds[] = {"full_attention", "sliding_attention"};
    unsigned char *on = arena_alloc(c->fx.a, (size_t)L->layers + 1);
    json_t *types = hf_take(c, "layer_types");
    if (types && (!json_is_array(types) || (int64_t)json_array_size(types) != L->layers)) {
        hf_bad(c, "layer_types", types, arena_printf(c->fx.a, "must be a list of %lld layer kinds",
                                                  (long long)L->layers));
        types = NULL;                 /* its entries are not read */
    }
    for (int64_t l = 0; l < L->layers; l++) {
        json_t *k = json_array_get(types, (size_t)l);
        const char *s = json_string_value(k);
        on[l] = types ? s && !strcmp(s, kinds[1]) : (l + 1) % pattern != 0;
        if (types && !(s && (!strcmp(s, kinds[0]) || on[l])))
            hf_bad(c, fe_at(&c->fx, "layer_types", (size_t)l), k,
                "must be \"full_attention\" or \"sliding_attention\"");
    }
    L->windowed = on;
}

/* Gemma 2's and 3's scale of the scores, query_pre_attn_scalar^-1/2. */
static void pre_attn_scalar(Cfg *c, ImpLlama *L)
{
    double qs = get_num(c, "query_pre_attn_scalar", 256);
    if (!(qs > 0))
        diag(c->fx.d, "query_pre_attn_scalar", "%g is not > 0", qs);
    L->attn_scale = qs > 0 ? 1 / sqrt(qs) : 0;
}

static void read_gemma2(Cfg *c, ImpLlama *L)
{
    static const char *const unused[] = {"cache_implementation", NULL};
    read_gemma(c, L);
    ignore(c, unused);
    L->window = get_int(c, "sliding_window", 4096, 1);
    int64_t older = get_int(c, "sliding_window_size", L->window, 1);  /* 4.42's name */
    L->window = older < L->window ? older : L->window;
    pre_attn_scalar(c, L);
    L->softcap = softcap(c, "attn_logit_softcapping", 50);
    L->final_softcap = softcap(c, "final_logit_softcapping", 30);
    window_layers(c, L, 2);
    L->hf_names = 4;
}

/* Gemma 3's text model (gemma3_text: Gemma 3 1B; transformers'
 * modeling_gemma3): Gemma 2's layers with a q and k norm per head (1 + w,
 * as its others) and no soft caps by default; the sliding layers (all but
 * every sliding_window_pattern-th, or layer_types') attend in a window of
 * sliding_window rows and turn rope at rope_local_base_freq, the others at
 * rope_theta. */
static void read_gemma3_text(Cfg *c, ImpLlama *L)
{
    static const char *const unused[] = {"cache_implementation", NULL};
    read_gemma(c, L);
    ignore(c, unused);
    L->window = get_int(c, "sliding_window", 4096, 1);
    L->local_theta = get_num(c, "rope_local_base_freq", 10000.0);
    if (!(L->local_theta > 0))
        diag(c->fx.d, "rope_local_base_freq", "%g is not > 0", L->local_theta);
    pre_attn_scalar(c, L);
    L->softcap = softcap(c, "attn_logit_softcapping", 0);
    L->final_softcap = softcap(c, "final_logit_softcapping", 0);
    window_layers(c, L, get_int(c, "sliding_window_pattern", 6, 1));
    L->qk_norm = 1;
    L->hf_names = 5;
}

/* Qwen3's dense models: qwen2's layers without the q/k/v biases, with
 * an rmsnorm of each q and k head (transformers' modeling_qwen3). */
static void read_qwen3(Cfg *c, ImpLlama *L)
{
    llama_common(c, L, 40960);
    L->hidden = need(c, "intermediate_size");
    only_bool(c, "attention_bias", 0);
    qwen_sliding(c, L);
    L->qk_norm = 1;
}

/* Layer l is sparse unless listed in mlp_only_layers or off the
 * decoder_sparse_step (transformers' Qwen3MoeDecoderLayer). */
static void moe_layers(Cfg *c, ImpLlama *L, int64_t step)
{
    unsigned char *moe = arena_alloc(c->fx.a, (size_t)L->layers);
    for (int64_t l = 0; l < L->layers; l++)
        moe[l] = L->experts > 0 && (l + 1) % step == 0;
    json_t *dense = hf_take(c, "mlp_only_layers");
    if (dense && !json_is_array(dense))
        hf_bad(c, "mlp_only_layers", dense, "must be a list of layer numbers");
    for (size_t i = 0; i < json_array_size(dense); i++) {
        json_t *j = json_array_get(dense, i);
        if (json_is_integer(j) && json_integer_value(j) >= 0 && json_integer_value(j) < L->layers)
            moe[json_integer_value(j)] = 0;
        else
            hf_bad(c, fe_at(&c->fx, "mlp_only_layers", i), j,
                arena_printf(c->fx.a, "must be a layer number below %lld", (long long)L->layers));
    }
    L->moe = moe;
}

static void read_qwen3_moe(Cfg *c, ImpLlama *L)
{
    static const char *const training[] = {"output_router_logits", "router_aux_loss_coef", NULL};
    llama_common(c, L, 32768);
    only_bool(c, "attention_bias", 0);
    qwen_sliding(c, L);
    ignore(c, training);
    L->qk_norm = 1;
    moe_sizes(c, L, "num_experts", 0);
    L->moe_hidden = need(c, "moe_intermediate_size");
    L->norm_topk = get_bool(c, "norm_topk_prob", 0);
    moe_layers(c, L, get_int(c, "decoder_sparse_step", 1, 1));
    L->hidden = get_int(c, "intermediate_size", 0, 1);   /* dense layers' */
}

/* gpt-oss (20b, 120b; transformers' modeling_gpt_oss): llama's layers
 * with biases on q, k, v and o (attention_bias, true), a learned sink
 * per head, YaRN's rope, the layers in layer_types' "sliding_attention"
 * (default every other from 0) attending in a window of sliding_window
 * (128) rows; in every layer a moe of num_local_experts experts of
 * intermediate_size with biases, the top num_experts_per_tok of the
 * router's logits softmaxed (moe's norm_topk_prob), and the clamped
 * SwiGLU at swiglu_limit (7). experts_per_token is the reference code's
 * name of num_experts_per_tok and must agree; initial_context_length
 * is the reference code's (transformers reads rope_scaling's). MXFP4
 * experts: quantization(). */
static void read_gpt_oss(Cfg *c, ImpLlama *L)
{
    static const char *const unused[] = {"output_router_logits", "router_aux_loss_coef",
                                         "initial_context_length", NULL};
    llama_common(c, L, 131072);
    only_bool(c, "attention_bias", 1);
    ignore(c, unused);
    moe_sizes(c, L, "num_local_experts", 1);
    int64_t per = get_int(c, "experts_per_token", L->top_k, 1);
    if (per != L->top_k)
        diag(c->fx.d, "experts_per_token", "%lld is not num_experts_per_tok %lld",
             (long long)per, (long long)L->top_k);
    L->moe_hidden = need(c, "intermediate_size");
    L->swiglu_limit = get_num(c, "swiglu_limit", 7.0);
    L->window = get_int(c, "sliding_window", 128, 1);
    window_layers(c, L, 2);
    L->qkv_bias = 1;
    L->norm_topk = 1;
    unsigned char *moe = arena_alloc(c->fx.a, (size_t)L->layers);
    memset(moe, 1, (size_t)L->layers);
    L->moe = moe;
    L->hf_names = IMP_HF_GPTOSS;
    L->mxfp4 = c->mxfp4;
}

/* Shapes that must fit together; head_dim defaults to hidden/heads. */
static void llama_shapes(Cfg *c, ImpLlama *L)
{
    Diags *d = c->fx.d;
    if (!L->head_dim && L->dim % L->heads)
        diag(d, "num_attention_heads", "%lld does not divide hidden_size %lld (and no head_dim)",
             (long long)L->heads, (long long)L->dim);
    if (!L->head_dim)
        L->head_dim = L->dim / L->heads;
    if (L->head_dim % 2)
        diag(d, "head_dim", "%lld is odd; rotary embeddings rotate pairs", (long long)L->head_dim);
    if (L->heads % L->kv_heads)
        diag(d, "num_key_value_heads", "%lld does not divide num_attention_heads %lld",
             (long long)L->kv_heads, (long long)L->heads);
    for (int64_t l = 0; l < L->layers && !L->hidden; l++)
        if (!L->moe || !L->moe[l]) {
            diag(d, "intermediate_size", "missing; layer %lld is dense", (long long)l);
            break;
        }
}

/* ---- GPT-2 ------------------------------------------------------------------- */

static void read_gpt2(Cfg *c, ImpGpt2 *G)
{
    /* dropout, the sequence-summary head, and n_ctx (an old name of
     * n_positions); reorder_and_upcast_attn only changes when fp16 is
     * upcast, and kiln computes in f32 */
    static const char *const none[] = {"attn_pdrop", "embd_pdrop", "resid_pdrop", "summary_type",
                                       "summary_use_proj", "summary_activation",
                                       "summary_proj_to_labels", "summary_first_dropout", "n_ctx",
                                       "reorder_and_upcast_attn", NULL};
    static const char *const acts[] = {"gelu_new", "gelu_pytorch_tanh", "gelu", NULL};
    G->vocab = need(c, "vocab_size");
    G->dim = need(c, "n_embd");
    G->layers = need_layers(c, "n_layer");
    G->heads = need(c, "n_head");
    G->n_positions = need(c, "n_positions");
    G->hidden = get_int(c, "n_inner", 4 * G->dim, 1);
    G->gelu = one_of(c, "activation_function", acts) < 2 ? "tanh" : "none";
    G->eps = get_num(c, "layer_norm_epsilon", 1e-5);
    G->tied = get_bool(c, "tie_word_embeddings", 1);
    only_bool(c, "scale_attn_weights", 1);
    only_bool(c, "scale_attn_by_inverse_layer_idx", 0);
    ignore(c, none);
    if (G->dim % G->heads)
        diag(c->fx.d, "n_head", "%lld does not divide n_embd %lld", (long long)G->heads,
             (long long)G->dim);
}

/* ---- the folder -------------------------------------------------------------- */

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

char *imp_hf_weights(Arena *a, const char *dir)
{
    char *index = arena_printf(a, "%s/model.safetensors.index.json", dir);
    return exists(index) ? index : arena_printf(a, "%s/model.safetensors", dir);
}

/* T and S from the options and the model's default S; *S <= limit when
 * the model has learned positions (limit > 0). */
void imp_seq_opts(Diags *d, const ImportOpts *o, int64_t dflt, int64_t limit, int64_t *T,
                  int64_t *S)
{
    *T = o->tokens ? o->tokens : 1;
    *S = o->max_seq ? o->max_seq : dflt < IMP_DEFAULT_SEQ ? dflt : IMP_DEFAULT_SEQ;
    if (limit && *S > limit)
        diag(d, NULL, "--max-seq %lld is more than the model's %lld learned positions",
             (long long)*S, (long long)limit);
    if (*T > *S)
        diag(d, NULL, "--tokens %lld is more than the %lld rows of the KV cache (--max-seq)",
             (long long)*T, (long long)*S);
}

/* GPT-2 checkpoints come with the names of GPT2LMHeadModel
 * ("transformer.h.0...", as transformers saves them) or of GPT2Model
 * ("h.0...", as on the Hub); the folder's weights say which. */
static char *gpt2(Arena *a, const char *dir, ImpGpt2 *G, Diags *d, int *io)
{
    const char *w = imp_hf_weights(a, dir);
    const rt_safetensors *st = NULL;
    if (exists(w) && !(st = imp_st_open(a, w, d, io)))
        return NULL;
    G->prefix = st && rt_st_find(st, "wte.weight") ? "" : "transformer.";
    G->weights = st;
    char *text = imp_gpt2_graph(a, G);
    imp_st_close(a, st);
    return text;
}

static void release_json(void *root) { json_decref(root); }

#define MAX_CONFIG (16 << 20)

/* config.json parsed, held by the arena; NULL after reporting. */
static json_t *load_config(Arena *a, const char *path, Diags *d, int *io)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    char *text = NULL;
    if (!f || fstat(fileno(f), &st) != 0) {
        diag(d, NULL, "cannot read: %s", strerror(errno));
        *io = 1;
    } else if (st.st_size > MAX_CONFIG) {
        diag(d, NULL, "larger than 16 MiB");
    } else if (!(text = ir_malloc((size_t)st.st_size + 1))) {
        fclose(f);
        arena_oom(a);
    } else if (fread(text, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        diag(d, NULL, "cannot read: %s", strerror(errno));
        *io = 1;
        ir_free(text);
        text = NULL;
    }
    if (f)
        fclose(f);
    if (!text)
        return NULL;
    arena_hold(a, text, ir_free);
    json_error_t err;
    json_t *root = fe_json_load(a, text, (size_t)st.st_size, &err);
    arena_release(a, text);
    if (!root) {
        diag(d, NULL, "line %d, column %d: %s", err.line, err.column, err.text);
        return NULL;
    }
    arena_hold(a, root, release_json);
    if (!json_is_object(root))
        diag(d, NULL, "not a JSON object");
    return root;
}

char *imp_hf(Arena *a, const char *dir, const ImportOpts *o, Diags *d, int *io)
{
    static const char *const types[] = {"llama",   "qwen2",   "gpt2", "qwen3", "qwen3_moe",
                                        "mistral", "mixtral", "phi3", "gemma", "gemma2",
                                        "gemma3_text", "gpt_oss", NULL};
    static void (*const read[])(Cfg *, ImpLlama *) = {
        read_llama,   read_qwen2,   NULL,      read_qwen3, read_qwen3_moe,
        read_mistral, read_mixtral, read_phi3, read_gemma, read_gemma2,
        read_gemma3_text, read_gpt_oss};
    int before = d->n;
    *io = 0;
    json_t *root = load_config(a, arena_printf(a, "%s/config.json", dir), d, io);
    if (!root || !json_is_object(root)) {
        if (root)
            arena_release(a, root);
        return NULL;
    }
    Cfg c = {{.a = a, .d = d}, root, NULL, NULL, 0, 0, 0};
    json_t *type = hf_take(&c, "model_type");
    int t = -1;
    for (int i = 0; json_is_string(type) && types[i]; i++)
        if (!strcmp(json_string_value(type), types[i]))
            t = i;
    if (t < 0) {
        if (type)
            hf_bad(&c, "model_type", type,
                "kiln imports llama, gemma, gemma2, gemma3_text, mistral, mixtral, phi3, qwen2, "
                "qwen3, qwen3_moe, gpt_oss and gpt2");
        else
            diag(d, "model_type", "missing (kiln imports llama, gemma, gemma2, gemma3_text, "
                                  "mistral, mixtral, phi3, qwen2, qwen3, qwen3_moe, gpt_oss "
                                  "and gpt2)");
        arena_release(a, root);
        return NULL;
    }
    c.type = types[t];
    ImpLlama L = {.model_name = c.type};
    ImpGpt2 G = {0};
    common(&c);
    if (t == 2)
        read_gpt2(&c, &G);
    else
        read[t](&c, &L);
    leftovers(&c);
    arena_release(a, root);
    if (d->n > before)
        return NULL;
    if (t == 2) {
        imp_seq_opts(d, o, G.n_positions, G.n_positions, &G.tokens, &G.max_seq);
        G.slots = o->slots;
        return d->n > before ? NULL : gpt2(a, dir, &G, d, io);
    }
    llama_shapes(&c, &L);
    imp_seq_opts(d, o, L.max_seq, 0, &L.tokens, &L.max_seq);
    L.slots = o->slots;
    if (L.window >= L.max_seq)      /* a window over the whole cache: none */
        L.window = 0;
    return d->n > before ? NULL : imp_llama_graph(a, &L);
}
