/* tests/import/mkckpt.c: writes the import tests' checkpoints (ckpt.h),
 * random weights from a seed; built by the Makefile as $(B)/tests/mkckpt.
 *
 *   mkckpt llama2c OUT.bin [--shape tiny|stories15M|stories110M]
 *          [--version 0|1] [--unshared] [--seed N]
 *   mkckpt hf llama|gemma|gemma2|gemma3_text|mistral|mixtral|phi3|qwen2|gpt2|qwen3|qwen3_moe
 *          DIR [--bf16] [--shards N]
 *          [--untied] [--transformers-names] [--config 'JSON MEMBERS'] [--seed N]
 *          [--shape tiny|small]   (small: qwen3_moe only, for timing)
 *   mkckpt --help             this usage, on stdout
 *
 * DIR is made when missing. --config adds members to config.json, e.g.
 * '"rope_scaling": {"type": "linear", "factor": 2.0}'; --transformers-names
 * writes GPT-2 as transformers saves it ("transformer.h.0...", no
 * buffers) instead of as the Hub has it. Every folder gets a
 * tokenizer.json of the model's vocab too (tests/gen/hftok.h), as Hub
 * folders have: byte-level BPE for gpt2 (GPT-2's) and qwen2, qwen3 and
 * qwen3_moe (Qwen2's); SentencePiece-style for llama, mixtral and phi3 (Llama
 * 2's normalizer), mistral (a Metaspace), and the gemmas (Gemma's). */
#include "ckpt.h"
#include "tests/gen/hftok.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char usage_text[] =
    "usage: mkckpt llama2c OUT.bin [--shape tiny|stories15M|stories110M] [--version 0|1]\n"
    "                      [--unshared] [--seed N]\n"
    "       mkckpt hf llama|gemma|gemma2|gemma3_text|mistral|mixtral|phi3|qwen2|gpt2|qwen3|\n"
    "                      qwen3_moe DIR\n"
    "                      [--bf16]\n"
    "                      [--shards N] [--untied]\n"
    "                      [--transformers-names] [--config 'JSON MEMBERS'] [--seed N]\n"
    "                      [--shape tiny|small]\n";

static int usage(const char *why)
{
    fprintf(stderr, "mkckpt: %s\n%s", why, usage_text);
    return 2;
}

typedef struct {
    const char *kind, *what, *out, *shape, *config;
    int version, unshared, bf16, shards, untied, tf_names;
    uint64_t seed;
} Args;

static int parse(Args *a, int argc, char **argv)
{
    *a = (Args){.shape = "tiny", .shards = 1, .seed = 1};
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            return -1;
        }
    if (argc < 3)
        return usage("missing arguments");
    a->kind = argv[1];
    int i = 2;
    if (!strcmp(a->kind, "hf"))
        a->what = argv[i++];
    else if (strcmp(a->kind, "llama2c"))
        return usage("the first argument is llama2c or hf");
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
        else if (!v)
            return usage("an option needs a value");
        else if (!strcmp(o, "--shape"))
            a->shape = v, i++;
        else if (!strcmp(o, "--version"))
            a->version = atoi(v), i++;
        else if (!strcmp(o, "--shards"))
            a->shards = atoi(v), i++;
        else if (!strcmp(o, "--config"))
            a->config = v, i++;
        else if (!strcmp(o, "--seed"))
            a->seed = strtoull(v, NULL, 10), i++;
        else
            return usage("unknown option");
    }
    return a->shards < 1 || (a->version != 0 && a->version != 1) ? usage("bad --shards or --version")
                                                                 : 0;
}

int main(int argc, char **argv)
{
    Args a;
    CkShape s;
    int rc = parse(&a, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;         /* -1: --help */
    if (!strcmp(a.kind, "llama2c") ? ck_llama2c_shape(a.shape, &s)
                                   : ck_hf_shape_named(a.what, a.shape, &s))
        return usage("unknown shape or model type");
    if (a.untied)
        s.tied = 0;
    s.bf16 = a.bf16;
    s.gpt2_hub = s.gpt2_hub && !a.tf_names;
    CkModel *m = ck_new(&s, a.seed);
    if (!m) {
        fprintf(stderr, "mkckpt: out of memory\n");
        return 4;
    }
    char why[600];
    if (!strcmp(a.kind, "llama2c")) {
        rc = ck_write_llama2c(m, a.out, a.version);
        if (rc)
            snprintf(why, sizeof why, "%s: %s", a.out, strerror(errno));
    } else {
        if (mkdir(a.out, 0777) && errno != EEXIST)
            snprintf(why, sizeof why, "%s: %s", a.out, strerror(errno)), rc = -1;
        else
            rc = ck_write_hf(m, a.out, a.shards, a.config, why, sizeof why);
        char path[4096];
        snprintf(path, sizeof path, "%s/tokenizer.json", a.out);
        int style = s.type == CK_GPT2                               ? HF_TOK_GPT2
                    : s.type == CK_LLAMA || s.type == CK_MIXTRAL || s.type == CK_PHI3
                        ? HF_TOK_LLAMA
                    : s.type == CK_MISTRAL                       ? HF_TOK_METASPACE
                    : s.type == CK_GEMMA || s.type == CK_GEMMA2 || s.type == CK_GEMMA3
                        ? HF_TOK_GEMMA
                                                                 : HF_TOK_QWEN2;
        if (!rc && hf_tokenizer_write(path, style, s.vocab))
            snprintf(why, sizeof why, "%.500s: cannot write", path), rc = -1;
    }
    ck_free(m);
    if (rc)
        fprintf(stderr, "mkckpt: %s\n", why);
    return rc ? 3 : 0;
}
