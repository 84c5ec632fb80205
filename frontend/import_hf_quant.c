/* frontend/import_hf_quant.c: a Hugging Face config's quantization_config.
 *
 * Read for FP8 checkpoints: quant_method "fp8" with e4m3 and blocks of
 * 128 x 128, or "compressed-tensors" float-quantized 8-bit weights per
 * tensor, row or block; their activation quantization is not applied
 * (kiln keeps activations in f32: docs/fp8.md), and which weights are FP8
 * is what the safetensors hold. gpt_oss's "mxfp4" (the Hub's gpt-oss-20b,
 * -120b) turns its experts' declared shapes to the blocks' [E, out, in];
 * the loader reads them from NAME_blocks and NAME_scales (rt_weights.c).
 * Anything else is refused by name. */
#include "import_hf.h"

#include <string.h>

/* Every key of object o (at path) is among keys; 0 when o is no object. */
static int qc_keys(Cfg *c, const char *path, json_t *o, const char *const *keys)
{
    const char *why = !strcmp(keys[0], "quant_method") && keys[1] &&
                              !strcmp(keys[1], "modules_to_not_convert")
                          ? "kiln reads gpt_oss's MXFP4 experts only"
                          : "kiln reads FP8 e4m3 weights only";
    const char *key;
    json_t *v;
    if (!json_is_object(o))
        return hf_bad(c, path, o, "must be an object"), 0;
    json_object_foreach(o, key, v) {
        int known = 0;
        for (int i = 0; !known && keys[i]; i++)
            known = !strcmp(keys[i], key);
        if (!known)
            diag(c->fx.d, arena_printf(c->fx.a, "%s.%s", path, fe_quote(&c->fx, key)),
                 "not supported (%s)", why);
    }
    return 1;
}

/* v as a message shows it: a list of integers as [a, b], else fe_got's. */
static const char *qc_text(Cfg *c, json_t *v)
{
    size_t i;
    json_t *x;
    int ints = json_is_array(v) && json_array_size(v) <= 8;
    json_array_foreach(v, i, x)
        ints = ints && json_is_integer(x);
    if (!ints)
        return fe_got(&c->fx, v);
    FILE *f = arena_stream(c->fx.a);
    json_array_foreach(v, i, x)
        fprintf(f, "%s%lld", i ? ", " : "[", (long long)json_integer_value(x));
    fputs(json_array_size(v) ? "]" : "[]", f);
    return arena_stream_text(c->fx.a, f);
}

/* Member key of o is absent (when may_miss) or equal to the JSON text
 * want; else one line naming it. */
static void qc_is(Cfg *c, const char *path, json_t *o, const char *key, const char *want,
                  int may_miss, const char *why)
{
    json_t *v = json_object_get(o, key), *w = json_loads(want, JSON_DECODE_ANY, NULL);
    int ok = v ? json_equal(v, w) : may_miss;
    json_decref(w);
    if (!ok)
        diag(c->fx.d, arena_printf(c->fx.a, "%s.%s", path, key), "%s%s (%s)",
             v ? qc_text(c, v) : "missing", v ? " not supported" : "", why);
}

/* A compressed-tensors config group: 8-bit float weights, symmetric,
 * static, per tensor, row or block of [128, 128]; input activations 8-bit
 * float or none (not applied); no output activations. */
static void qc_group(Cfg *c, const char *path, json_t *g)
{
    static const char *const keys[] = {"targets", "weights", "input_activations",
                                       "output_activations", "format", NULL};
    static const char *const args[] = {"num_bits", "type", "symmetric", "strategy", "dynamic",
                                       "group_size", "block_structure", "actorder", "observer",
                                       "observer_kwargs", NULL};
    if (!qc_keys(c, path, g, keys))
        return;
    const char *wp = arena_printf(c->fx.a, "%s.weights", path);
    json_t *w = json_object_get(g, "weights"), *in = json_object_get(g, "input_activations");
    if (qc_keys(c, wp, w, args)) {
        const char *why = "kiln reads 8-bit float (e4m3) weights";
        qc_is(c, wp, w, "num_bits", "8", 0, why);
        qc_is(c, wp, w, "type", "\"float\"", 0, why);
        qc_is(c, wp, w, "symmetric", "true", 1, why);
        qc_is(c, wp, w, "dynamic", "false", 1, why);
        qc_is(c, wp, w, "group_size", "null", 1, "kiln reads scales per tensor, row or block");
        qc_is(c, wp, w, "actorder", "null", 1, why);
        const char *s = json_string_value(json_object_get(w, "strategy"));
        if (s && !strcmp(s, "block"))
            qc_is(c, wp, w, "block_structure", "[128,128]", 0, "kiln reads blocks of 128 x 128");
        else if (!s || (strcmp(s, "tensor") && strcmp(s, "channel")))
            qc_is(c, wp, w, "strategy", "\"channel\"", 0,
                  "kiln reads scales per tensor, channel or block");
    }
    const char *ip = arena_printf(c->fx.a, "%s.input_activations", path);
    if (in && !json_is_null(in) && qc_keys(c, ip, in, args)) {
        qc_is(c, ip, in, "num_bits", "8", 0, "kiln keeps activations in f32");
        qc_is(c, ip, in, "type", "\"float\"", 0, "kiln keeps activations in f32");
    }
    qc_is(c, path, g, "output_activations", "null", 1, "kiln keeps activations in f32");
}

/* quantization_config: absent, an FP8 checkpoint's, or gpt_oss's MXFP4
 * (see the top): modules_to_not_convert is the bf16 weights' names, and
 * which weights are MXFP4 is what the safetensors hold. */
void hf_quantization(Cfg *c)
{
    static const char *const fp8[] = {"quant_method", "fmt", "activation_scheme",
                                      "weight_block_size", "modules_to_not_convert",
                                      "ignored_layers", NULL};
    static const char *const ct[] = {"quant_method", "format", "config_groups", "ignore",
                                     "kv_cache_scheme", "quantization_status",
                                     "global_compression_ratio", "sparsity_config", "version",
                                     NULL};
    static const char *const mx[] = {"quant_method", "modules_to_not_convert", NULL};
    const char *p = "quantization_config";
    json_t *q = hf_take(c, p);
    if (!q)
        return;
    const char *m = json_string_value(json_object_get(q, "quant_method"));
    if (!json_is_object(q) || !m) {
        hf_bad(c, p, q, "must be an object with a quant_method");
    } else if (!strcmp(m, "fp8") && qc_keys(c, p, q, fp8)) {
        qc_is(c, p, q, "fmt", "\"e4m3\"", 1, "kiln reads e4m3");
        json_t *act = json_object_get(q, "activation_scheme");
        if (act && !json_is_null(act) && !json_is_string(act))
            hf_bad(c, "quantization_config.activation_scheme", act, "must be a string");
        qc_is(c, p, q, "weight_block_size", "[128,128]", 1, "kiln reads blocks of [128, 128]");
    } else if (!strcmp(m, "compressed-tensors") && qc_keys(c, p, q, ct)) {
        qc_is(c, p, q, "format", "\"float-quantized\"", 0, "kiln reads FP8 e4m3 weights");
        qc_is(c, p, q, "quantization_status", "\"compressed\"", 1, "kiln reads stored FP8");
        qc_is(c, p, q, "kv_cache_scheme", "null", 1, "kiln's KV cache is f32");
        json_t *sp = json_object_get(q, "sparsity_config");
        if (sp && !json_is_null(sp) && !(json_is_object(sp) && !json_object_size(sp)))
            diag(c->fx.d, "quantization_config.sparsity_config", "not supported");
        json_t *groups = json_object_get(q, "config_groups"), *g;
        const char *name;
        if (!json_is_object(groups) || !json_object_size(groups))
            hf_bad(c, "quantization_config.config_groups", groups, "must be an object of groups");
        json_object_foreach(groups, name, g)
            qc_group(c, arena_printf(c->fx.a, "%s.config_groups.%s", p, fe_quote(&c->fx, name)),
                     g);
    } else if (!strcmp(m, "mxfp4") && !strcmp(c->type, "gpt_oss") && qc_keys(c, p, q, mx)) {
        json_t *keep = json_object_get(q, "modules_to_not_convert"), *x;
        size_t i;
        int names = !keep || json_is_null(keep) || json_is_array(keep);
        json_array_foreach(keep, i, x)
            names = names && json_is_string(x);
        if (!names)
            hf_bad(c, "quantization_config.modules_to_not_convert", keep, "must be a list of names");
        c->mxfp4 = 1;
    } else if (strcmp(m, "fp8") && strcmp(m, "compressed-tensors") && strcmp(m, "mxfp4")) {
        diag(c->fx.d, "quantization_config.quant_method",
             "\"%s\" not supported (kiln reads FP8 checkpoints: \"fp8\", \"compressed-tensors\"; "
             "gpt_oss's \"mxfp4\"; or a GGUF file)", fe_quote(&c->fx, m));
    } else if (!strcmp(m, "mxfp4") && strcmp(c->type, "gpt_oss")) {
        diag(c->fx.d, "quantization_config.quant_method",
             "\"mxfp4\" not supported for %s (kiln reads gpt_oss's MXFP4 experts)", c->type);
    }
}

