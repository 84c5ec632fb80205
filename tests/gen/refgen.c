/* tests/gen/refgen.c: greedy generation through the reference
 * interpreter (ir/ref.c), one token a call, for tests/generate.sh to hold
 * generated programs against. Built by the Makefile as $(B)/tests/refgen.
 *
 *   refgen MODEL.json WEIGHTS.safetensors --tokens 1,2,3 -n N [--weight-dtype T]
 *
 * With --weight-dtype, each weight of rank >= 2 is first rounded as a
 * program built so holds it (lower_weight_store's type: rounded to 16
 * bits, or quantized and widened back), as `kiln check` does.
 *
 * MODEL is a decoder (ir/decoder.c), re-inferred at one token a call when
 * it was written for more. The prompt is fed token by token from position
 * 0, then N tokens are drawn by argmax (the lowest id among equals) and
 * fed back; their ids are printed on one line, space-separated, as
 * `EXE generate --tokens ... --temperature 0` prints them.
 *
 *   refgen tokenizer OUT.bin V
 *
 * writes a llama2.c tokenizer.bin of V (>= 290) tokens: <unk>, <s>, </s>,
 * the 256 byte tokens <0x00>..<0xFF>, space and a..z, then merges of two
 * tokens before them (" t", "th", "the", ...; later ones score higher)
 * and, to fill V, "xN" tokens that no text forms. refgen --help prints
 * these usages on stdout. */
#include "frontend/frontend.h"
#include "passes/passes.h"
#include "runtime/rt_gen.h"
#include "runtime/rt_quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what)
{
    fprintf(stderr, "refgen: %s\n", what);
    return 1;
}

/* Every weight from the file, widened to f32 as the runtime's loader
 * widens it (an FP8 tensor times its scales). */
static int load_weights(Module *m, const char *path, Tensor **w)
{
    rt_err e = {0};
    rt_tensor_info *info = calloc((size_t)m->nweights + 1, sizeof *info);
    void **f = calloc((size_t)m->nweights + 1, sizeof *f);
    if (!info || !f) {
        free(info), free(f);
        return fail("out of memory");
    }
    for (int i = 0; i < m->nweights; i++) {
        const Node *n = m->weights[i];
        info[i] = (rt_tensor_info){.name = n->name, .dtype = RT_F32, .rank = n->rank,
                                   .count = shape_count(n->rank, n->dims), .store = RT_F32};
        memcpy(info[i].dims, n->dims, sizeof *n->dims * (size_t)n->rank);
    }
    int rc = rt_load_weights(path, info, m->nweights, f, &e);
    for (int i = 0; !rc && i < m->nweights; i++) {
        w[i] = tensor_new(m->weights[i]);
        memcpy(w[i]->f, f[i], sizeof(float) * (size_t)info[i].count);
    }
    for (int i = 0; i < m->nweights; i++)
        rt_free(f[i]);
    free(info), free(f);
    return rc ? fail(e.msg) : 0;
}

/* Each weight of rank >= 2 rounded to what a program holds for --weight-dtype st. */
static int round_weights(Module *m, Storage st, Tensor **w)
{
    for (int i = 0; i < m->nweights; i++) {
        Storage want, s = m->weights[i]->rank >= 2 ? lower_weight_store(m, m->weights[i], st, &want)
                                                  : ST_F32;
        float *f = w[i]->f;
        int64_t n = w[i]->count;
        if (storage_block(s)) {
            void *q = malloc((size_t)storage_bytes(s, n));
            if (!q)
                return fail("out of memory");
            rt_quantize((int)s, f, q, n);
            rt_dequantize((int)s, q, f, n);
            free(q);
        } else if (s == ST_BF16 || s == ST_F16) {
            for (int64_t j = 0; j < n; j++)
                f[j] = s == ST_BF16 ? rt_bf16_f32(rt_f32_bf16(f[j])) : rt_f16_f32(rt_f32_f16(f[j]));
        }
    }
    return 0;
}

/* One call at token tok, position pos; the argmax of its logits. */
static int step(Module *m, Tensor **in, Tensor **w, Tensor **s, Tensor *out, int tok, int pos)
{
    char err[512];
    in[0]->i[0] = tok;
    in[1]->i[0] = pos;
    if (ref_run(m, in, w, s, &out, err, sizeof err) != 0) {
        fprintf(stderr, "refgen: %s\n", err);
        exit(1);
    }
    return rt_sample_argmax(out->f, (int)out->count);
}

static int put_token(FILE *f, float score, const char *s)
{
    int32_t len = (int32_t)strlen(s);
    return fwrite(&score, 4, 1, f) == 1 && fwrite(&len, 4, 1, f) == 1 &&
           fwrite(s, 1, (size_t)len, f) == (size_t)len;
}

static int tokenizer(const char *path, int V)
{
    static const char *const merges[] = {
        " t", "th", "he", " th", "the", " the", "at", " c", " ca", " cat", " s", " sa", " sat",
        " o", " on", " m", " ma", " mat", "in", "an", " a", " an", " and", "er", "re", "on",
        "es", "or", "is", " i", " is", "it", " it"};
    int nm = (int)(sizeof merges / sizeof merges[0]);
    if (V < 3 + 256 + 27 + nm)
        return fail("tokenizer: V too small");
    FILE *f = fopen(path, "wb");
    int32_t maxlen = 8;
    int ok = f && fwrite(&maxlen, 4, 1, f) == 1 && put_token(f, 0, "<unk>") &&
             put_token(f, 0, "\n<s>\n") && put_token(f, 0, "\n</s>\n");
    char s[16];
    for (int i = 0; ok && i < 256; i++) {
        snprintf(s, sizeof s, "<0x%02X>", i);
        ok = put_token(f, 0, s);
    }
    ok = ok && put_token(f, 0, " ");
    for (int c = 'a'; ok && c <= 'z'; c++) {
        s[0] = (char)c, s[1] = 0;
        ok = put_token(f, 0, s);
    }
    for (int i = 0; ok && i < nm; i++)
        ok = put_token(f, (float)(i + 1), merges[i]);
    for (int i = 3 + 256 + 27 + nm; ok && i < V; i++) {
        snprintf(s, sizeof s, "x%d", i);
        ok = put_token(f, -1, s);
    }
    if (!f || fclose(f) != 0 || !ok)
        return fail("tokenizer: cannot write the file");
    return 0;
}

static const char usage_text[] = "usage: refgen MODEL.json WEIGHTS.safetensors --tokens 1,2,3 -n N "
                                 "[--weight-dtype T]\n"
                                 "       refgen tokenizer OUT.bin V\n";

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "tokenizer") == 0)
        return tokenizer(argv[2], atoi(argv[3]));
    Storage st = ST_F32;
    if ((argc != 7 && argc != 9) || strcmp(argv[3], "--tokens") || strcmp(argv[5], "-n") ||
        (argc == 9 && (strcmp(argv[7], "--weight-dtype") || !storage_parse(argv[8], &st)))) {
        fprintf(stderr, "refgen: %s", usage_text);
        return 1;
    }
    Arena *a = arena_new();
    Diags d;
    diag_init(&d, a, argv[1]);
    int io = 0;
    Module *m = fe_load(a, argv[1], &d, &io);
    IrDecoder dec;
    if (!m || !ir_decoder(m, &dec) || (dec.tokens != 1 && ir_decoder_tokens(m, 1, &d) != 0)) {
        diag_print(&d, stderr);
        return fail("not a decoder");
    }
    Tensor *w[m->nweights + 1], *s[m->nstates + 1], *in[2];
    if (load_weights(m, argv[2], w) || (st != ST_F32 && round_weights(m, st, w)))
        return 1;
    for (int i = 0; i < m->nstates; i++)
        s[i] = tensor_new(m->states[i]);
    in[0] = tensor_new(m->inputs[0]);
    in[1] = tensor_new(m->inputs[1]);
    Tensor *out = tensor_new(m->outputs[0]);
    int pos = 0, next = 0, n = atoi(argv[6]);
    for (char *p = argv[4]; *p; p += *p == ',') {
        int tok = (int)strtol(p, &p, 10);
        next = step(m, in, w, s, out, tok, pos++);
    }
    for (int i = 0; i < n; i++) {
        printf("%s%d", i ? " " : "", next);
        if (i + 1 < n && pos < dec.max_seq)
            next = step(m, in, w, s, out, next, pos++);
        else if (i + 1 < n)
            break;
    }
    putchar('\n');
    return 0;
}
