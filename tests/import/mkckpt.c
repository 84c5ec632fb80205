/* tests/import/mkckpt.c: writes the import tests' checkpoints (ckpt.h),
 * random weights from a seed; built by the Makefile as $(B)/tests/mkckpt.
 *
 *   mkckpt llama2c OUT.bin [--shape tiny|stories15M|stories110M|tinyllama]
 *          [--version 0|1] [--unshared] [--seed N]
 *   mkckpt hf llama|gemma|gemma2|gemma3_text|mistral|mixtral|phi3|qwen2|gpt2|qwen3|qwen3_moe|
 *          gpt_oss DIR [--bf16] [--shards N]
 *          [--untied] [--transformers-names] [--config 'JSON MEMBERS'] [--seed N]
 *          [--shape tiny|small|blocks|blocks384|tinyllama|llama3-8b|qwen2-0.5b]
 *          [--stream]
 *          [--no-weights] [--fp8 block|channel|tensor] [--mxfp4 blocks|values]
 *   mkckpt gguf TYPE FILE.gguf [--type f32|f16|bf16|q8_0|q4_0|q4_k|q6_k]
 *          [--bf16] [--untied] [--seed N] [--shape tiny|small|blocks]
 *          [--drop-key KEY] [--arch NAME] [--reshape TENSOR=D0,D1...]
 *   (hf and gguf also: [--qpas N] [--llama3-rope])
 *   mkckpt --help             this usage, on stdout
 *
 * DIR is made when missing. --config adds members to config.json, e.g.
 * '"rope_scaling": {"type": "linear", "factor": 2.0}'; --transformers-names
 * writes GPT-2 as transformers saves it ("transformer.h.0...", no
 * buffers) instead of as the Hub has it. Shapes: small is qwen3_moe's and gpt_oss's,
 * for timing; tinyllama and llama3-8b are llama's, TinyLlama-1.1B's and
 * Llama-3.1-8B's with their published config.json (4.4 GB of f32, 16 GB
 * of bf16), to measure at real sizes; qwen2-0.5b is qwen2's, Qwen2-0.5B's
 * dimensions (2 GB of f32, in memory), for make bench. Those are written tensor by tensor
 * (tinyllama and llama3-8b: ckpt_stream.c), as --stream writes any llama: the same bytes, never
 * the model in memory; their shards default to the Hub's (files of at
 * most 5 GB). --no-weights writes config.json and tokenizer.json only,
 * and lists the tensors the weights would hold (llama), then the
 * tokenizer as kiln's reader takes it (exit 1 when it refuses it). Every
 * folder gets a tokenizer.json of the model's vocab too (tests/gen/hftok.h), as Hub
 * folders have: byte-level BPE for gpt2 (GPT-2's) and qwen2, qwen3 and
 * qwen3_moe and gpt_oss (Qwen2's), llama3-8b (Llama 3's); SentencePiece-style for
 * llama, mixtral and phi3 (Llama 2's normalizer), mistral (a Metaspace),
 * and the gemmas (Gemma's). `gguf` writes the GGUF file llama.cpp's
 * converter makes of the folder `hf` writes with the same options
 * (ckpt_gguf.c: the same weights, llama.cpp's layouts), its matrices in
 * --type (default f32; quantized by rt_quantize). --qpas gives gemma2's
 * and gemma3_text's query_pre_attn_scalar (llama.cpp's GGUFs scale by
 * head_dim: give 32 for files to compare); --llama3-rope gives llama
 * Llama 3.1's rope_scaling (a rope_freqs.weight in the GGUF). --drop-key,
 * --arch and --reshape make a bad file of the good one (ck_gguf_rewrite):
 * without KEY, with general.architecture NAME, with TENSOR of that shape.
 * --fp8 stores the linear layers' weights as FP8 e4m3 with scales
 * (ckpt.h's fp8): block is Qwen3-FP8's layout (quant_method fp8,
 * weight_block_size [128, 128], weight_scale_inv), channel and tensor
 * compressed-tensors' (float-quantized, weight_scale per row or one, a
 * static input_scale); config.json gets the quantization_config.
 * --mxfp4 (gpt_oss) rounds the experts to MXFP4 (ckpt.h's mxfp4) and
 * writes them as the Hub's openai/gpt-oss-20b does (blocks: U8
 * NAME_blocks and NAME_scales, rows the outputs, its quantization_config)
 * or their values as its bf16 conversions do (values), the same model. */
#include "ckpt.h"
#include "gguf_write.h"
#include "runtime/rt_gen.h"
#include "tests/gen/hftok.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void put_usage(FILE *f)
{
    fprintf(f, "usage: mkckpt llama2c OUT.bin [--shape tiny|stories15M|stories110M|tinyllama]\n"
            "                      [--version 0|1] [--unshared] [--seed N]\n"
            "       mkckpt hf llama|gemma|gemma2|gemma3_text|mistral|mixtral|phi3|qwen2|gpt2|qwen3|\n"
            "                      qwen3_moe|gpt_oss DIR\n"
            "                      [--bf16]\n"
            "                      [--shards N] [--untied]\n"
            "                      [--transformers-names] [--config 'JSON MEMBERS'] [--seed N]\n"
            "                      [--shape tiny|small|blocks|blocks384|tinyllama|llama3-8b|\n"
            "                      qwen2-0.5b]\n"
            "                      [--stream] [--no-weights]\n"
            "       mkckpt gguf TYPE FILE.gguf [--type f32|f16|bf16|q8_0|q4_0|q4_k|q6_k]\n"
            "                      [--bf16] [--untied] [--seed N] [--shape tiny|small|blocks]\n"
            "                      [--drop-key KEY] [--arch NAME] [--reshape TENSOR=D0,D1...]\n"
            "hf, gguf: [--qpas N] (gemma2, gemma3_text) [--llama3-rope] (llama)\n"
            "shapes: small (qwen3_moe, gpt_oss) to time a decode step; blocks (llama): rows of 256\n"
            "        and 512, 8 layers, for quantized types (qwen3: 2 layers); blocks384 (llama):\n"
            "        down_proj's rows of 384 (3 blocks of 128); tinyllama, llama3-8b (llama):\n"
            "        TinyLlama-1.1B's and Llama-3.1-8B's, their published config.json, random\n"
            "        weights (4.4 GB of f32, 16 GB of bf16) written tensor by tensor;\n"
            "        qwen2-0.5b (qwen2): Qwen2-0.5B's dimensions (2 GB of f32)\n"
            "--stream: write a llama tensor by tensor, never holding the model (the same bytes)\n"
            "--no-weights: config.json and tokenizer.json only; list the tensors (llama)\n"
            "--fp8 block|channel|tensor (hf): linear weights as FP8 e4m3 with scales, as\n"
            "        Qwen3-FP8 (block) or compressed-tensors (channel, tensor) store them\n"
            "--mxfp4 blocks|values (hf gpt_oss): experts rounded to MXFP4, written as the\n"
            "        Hub's gpt-oss holds them (blocks) or as f32/bf16 values (values)\n");
}

static int usage(const char *why)
{
    fprintf(stderr, "mkckpt: %s\n", why);
    put_usage(stderr);
    return 2;
}

typedef struct {
    const char *kind, *what, *out, *shape, *config, *type;
    CkGgufEdit edit;                /* gguf: a bad file's edits */
    int edited;
    int version, unshared, bf16, shards, untied, tf_names, stream, list, qpas, llama3, fp8, mx;
    uint64_t seed;
} Args;

/* --reshape TENSOR=D0,D1...: 1 when it reads so (TENSOR is left in v). */
static int parse_reshape(CkGgufEdit *e, char *v)
{
    char *eq = strchr(v, '='), *at;
    if (!eq)
        return 0;
    *eq = 0;
    e->tensor = v;
    e->rank = 0;
    for (at = eq + 1; e->rank < 4; at++) {
        e->dims[e->rank++] = strtoll(at, &at, 10);
        if (*at != ',')
            break;
    }
    return !*at && e->rank >= 1;
}

/* The arguments: 0, 2 (usage), or -1 when --help was answered. */
static int parse(Args *a, int argc, char **argv)
{
    *a = (Args){.shape = "tiny", .seed = 1};
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return put_usage(stdout), -1;
    if (argc < 3)
        return usage("missing arguments");
    a->kind = argv[1];
    int i = 2;
    if (!strcmp(a->kind, "hf") || !strcmp(a->kind, "gguf"))
        a->what = argv[i++];
    else if (strcmp(a->kind, "llama2c"))
        return usage("the first argument is llama2c, hf or gguf");
    if (i >= argc)
        return usage("missing the output");
    a->out = argv[i++];
    for (; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--unshared") || !strcmp(o, "--untied"))
            a->unshared = a->untied = 1;
        else if (!strcmp(o, "--bf16"))
            a->bf16 = 1;
        else if (!strcmp(o, "--transformers-names"))
            a->tf_names = 1;
        else if (!strcmp(o, "--stream"))
            a->stream = 1;
        else if (!strcmp(o, "--no-weights"))
            a->list = 1;
        else if (!strcmp(o, "--llama3-rope"))
            a->llama3 = 1;
        else if (!v)
            return usage("an option needs a value");
        else if (!strcmp(o, "--shape"))
            a->shape = v, i++;
        else if (!strcmp(o, "--version"))
            a->version = atoi(v), i++;
        else if (!strcmp(o, "--shards"))
            a->shards = atoi(v) > 0 ? atoi(v) : -1, i++;
        else if (!strcmp(o, "--config"))
            a->config = v, i++;
        else if (!strcmp(o, "--seed"))
            a->seed = strtoull(v, NULL, 10), i++;
        else if (!strcmp(o, "--type"))
            a->type = v, i++;
        else if (!strcmp(o, "--fp8"))
            a->fp8 = !strcmp(v, "block") ? CK_FP8_BLOCK : !strcmp(v, "channel") ? CK_FP8_CHANNEL
                     : !strcmp(v, "tensor") ? CK_FP8_TENSOR : -1, i++;
        else if (!strcmp(o, "--mxfp4"))
            a->mx = !strcmp(v, "blocks") ? CK_MX_BLOCKS : !strcmp(v, "values") ? CK_MX_VALUES : -1,
            i++;
        else if (!strcmp(o, "--qpas"))
            a->qpas = atoi(v), i++;
        else if (!strcmp(o, "--drop-key"))
            a->edit.drop = v, a->edited = 1, i++;
        else if (!strcmp(o, "--arch"))
            a->edit.arch = v, a->edited = 1, i++;
        else if (!strcmp(o, "--reshape") && parse_reshape(&a->edit, argv[i + 1]))
            a->edited = 1, i++;
        else
            return usage("unknown option");
    }
    return a->shards < 0 || (a->version != 0 && a->version != 1) ? usage("bad --shards or --version")
                                                                 : 0;
}

/* The writers return the exit status, 0, or 1 (a tokenizer kiln's
 * reader refuses), 3 (I/O), 4 (out of memory) with a reason in why. */
static int write_llama2c(const Args *a, const CkShape *s, char *why, size_t whylen)
{
    CkModel *m = ck_new(s, a->seed);
    if (!m)
        return snprintf(why, whylen, "out of memory"), 4;
    int rc = ck_write_llama2c(m, a->out, a->version) ? 3 : 0;
    if (rc)
        snprintf(why, whylen, "%s: %s", a->out, strerror(errno));
    ck_free(m);
    return rc;
}

/* The tokenizer a Hub folder of shape s has (mkckpt.c's top comment). */
static int tokenizer_style(const CkShape *s)
{
    return s->llama3_tok                                                ? HF_TOK_LLAMA3
           : s->type == CK_GPT2                                         ? HF_TOK_GPT2
           : s->type == CK_LLAMA || s->type == CK_MIXTRAL || s->type == CK_PHI3 ? HF_TOK_LLAMA
           : s->type == CK_MISTRAL                                      ? HF_TOK_METASPACE
           : s->type == CK_GEMMA || s->type == CK_GEMMA2 || s->type == CK_GEMMA3 ? HF_TOK_GEMMA
                                                                        : HF_TOK_QWEN2;
}

/* The tokenizer at path as kiln's reader takes it, to stdout: its size,
 * BOS, EOS and a text's ids (--no-weights). 0, or -1 with the reader's
 * reason in why. */
static int list_tokenizer(const char *path, char *why, size_t whylen)
{
    rt_tok *t = NULL;
    rt_err e = {0};
    int32_t ids[16];
    int n = 0;
    if (rt_tok_open(path, &t, &e) || rt_tok_encode(t, "the cat sat", 1, ids, 16, &n, &e)) {
        rt_tok_close(t);
        return snprintf(why, whylen, "%s", e.msg), -1;
    }
    printf("tokenizer.json: %d tokens, BOS %d, EOS %d; \"the cat sat\" is", rt_tok_size(t),
           rt_tok_bos(t), rt_tok_eos(t));
    for (int i = 0; i < n; i++)
        printf(" %d", (int)ids[i]);
    printf("\n");
    rt_tok_close(t);
    return 0;
}

/* The folder: the big shapes, --stream and --no-weights tensor by tensor
 * (ckpt_stream.c), the others from a model in memory; then its
 * tokenizer. */
static int write_hf(const Args *a, const CkShape *s, char *why, size_t whylen)
{
    int rc;
    CkModel *m = NULL;
    int big = s->published || a->stream || a->list;
    if (!big && !(m = ck_new(s, a->seed)))
        return snprintf(why, whylen, "out of memory"), 4;
    if (mkdir(a->out, 0777) && errno != EEXIST)
        snprintf(why, whylen, "%s: %s", a->out, strerror(errno)), rc = -1;
    else if (big)
        rc = ck_stream_hf(s, a->seed, a->out, a->shards, a->config, a->list ? stdout : NULL, why,
                          whylen);
    else
        rc = ck_write_hf(m, a->out, a->shards ? a->shards : 1, a->config, why, whylen);
    ck_free(m);
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", a->out);
    if (!rc && hf_tokenizer_write(path, tokenizer_style(s), s->vocab))
        snprintf(why, whylen, "%.500s: cannot write", path), rc = -1;
    if (!rc && a->list && list_tokenizer(path, why, whylen))
        return 1;
    return rc ? 3 : 0;
}

/* The GGUF file of the folder `hf` would write (ckpt_gguf.c). */
static int write_gguf(const Args *a, const CkShape *s, char *why, size_t whylen)
{
    static const struct {
        const char *name;
        int type;
    } types[] = {{"f32", GW_T_F32},   {"f16", GW_T_F16},   {"bf16", GW_T_BF16},
                 {"q8_0", GW_T_Q8_0}, {"q4_0", GW_T_Q4_0}, {"q4_k", GW_T_Q4_K},
                 {"q6_k", GW_T_Q6_K}};
    int type = -1;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(a->type ? a->type : "f32", types[i].name))
            type = types[i].type;
    if (type < 0)
        return snprintf(why, whylen, "--type %s: not one of f32, f16, bf16, q8_0, q4_0, q4_k, "
                        "q6_k", a->type), 2;
    CkModel *m = ck_new(s, a->seed);
    if (!m)
        return snprintf(why, whylen, "out of memory"), 4;
    char good[4096];
    snprintf(good, sizeof good, "%s.good", a->out);
    int rc = ck_write_gguf(m, a->edited ? good : a->out, type, why, whylen) ? 3 : 0;
    ck_free(m);
    if (!rc && a->edited) {
        rc = ck_gguf_rewrite(good, a->out, &a->edit, why, whylen) ? 3 : 0;
        remove(good);
    }
    return rc;
}

int main(int argc, char **argv)
{
    Args a;
    CkShape s;
    int rc = parse(&a, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;         /* -1: --help */
    if (!strcmp(a.kind, "llama2c") ? ck_llama2c_shape(a.shape, &s)
                                   : ck_hf_shape_named(a.what, a.shape, &s) ||
                                         (!strcmp(a.kind, "gguf") && s.published))
        return usage("unknown shape or model type");
    if (a.untied)
        s.tied = 0;
    s.bf16 = a.bf16;
    s.gpt2_hub = s.gpt2_hub && !a.tf_names;
    s.qpas = a.qpas;
    s.llama3_rope = s.llama3_rope || a.llama3;
    s.fp8 = a.fp8;
    if (a.fp8 < 0 || (a.fp8 && (strcmp(a.kind, "hf") || s.published || a.stream || a.list)))
        return usage("--fp8 takes block, channel or tensor, for hf folders of the small shapes");
    s.mxfp4 = a.mx;
    if (a.mx < 0 || (a.mx && (strcmp(a.kind, "hf") || s.type != CK_GPTOSS || s.published || a.fp8)))
        return usage("--mxfp4 takes blocks or values, for hf gpt_oss folders of the small shapes");
    char *config = NULL;
    if (a.mx == CK_MX_BLOCKS) {         /* openai/gpt-oss-20b's, after --config's members */
        static const char mx[] =
            "\"quantization_config\": {\"modules_to_not_convert\": [\"model.layers.*.self_attn\", "
            "\"model.layers.*.mlp.router\", \"model.embed_tokens\", \"lm_head\"], "
            "\"quant_method\": \"mxfp4\"}";
        size_t n = (a.config ? strlen(a.config) : 0) + sizeof mx + 4;
        if (!(config = malloc(n)))
            return 4;
        snprintf(config, n, "%s%s%s", a.config ? a.config : "", a.config ? ", " : "", mx);
        a.config = config;
    }
    if (a.fp8) {                        /* the quantization_config, after --config's members */
        static const char block[] =
            "\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", "
            "\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}";
        static const char ct[] =
            "\"quantization_config\": {\"config_groups\": {\"group_0\": {\"input_activations\": "
            "{\"actorder\": null, \"block_structure\": null, \"dynamic\": false, \"group_size\": "
            "null, \"num_bits\": 8, \"observer\": \"minmax\", \"observer_kwargs\": {}, "
            "\"strategy\": \"tensor\", \"symmetric\": true, \"type\": \"float\"}, "
            "\"output_activations\": null, \"targets\": [\"Linear\"], \"weights\": {\"actorder\": "
            "null, \"block_structure\": null, \"dynamic\": false, \"group_size\": null, "
            "\"num_bits\": 8, \"observer\": \"minmax\", \"observer_kwargs\": {}, \"strategy\": "
            "\"%s\", \"symmetric\": true, \"type\": \"float\"}}}, \"format\": "
            "\"float-quantized\", \"global_compression_ratio\": 1.463, \"ignore\": "
            "[\"lm_head\"], \"kv_cache_scheme\": null, \"quant_method\": "
            "\"compressed-tensors\", \"quantization_status\": \"compressed\"}";
        size_t n = (a.config ? strlen(a.config) : 0) + sizeof ct + 16;
        if (!(config = malloc(n)))
            return 4;
        int at = a.config ? snprintf(config, n, "%s, ", a.config) : 0;
        snprintf(config + at, n - (size_t)at, a.fp8 == CK_FP8_BLOCK ? block : ct,
                 a.fp8 == CK_FP8_CHANNEL ? "channel" : "tensor");
        a.config = config;
    }
    if ((a.stream || a.list) && (strcmp(a.kind, "hf") || !ck_streams(&s)))
        return usage("--stream and --no-weights write llama folders only");
    char why[600];
    rc = !strcmp(a.kind, "llama2c") ? write_llama2c(&a, &s, why, sizeof why)
         : !strcmp(a.kind, "gguf")  ? write_gguf(&a, &s, why, sizeof why)
                                    : write_hf(&a, &s, why, sizeof why);
    if (rc)
        fprintf(stderr, "mkckpt: %s\n", why);
    free(config);
    return rc;
}
