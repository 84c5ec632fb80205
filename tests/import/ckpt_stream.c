/* tests/import/ckpt_stream.c: Hugging Face llama folders written tensor
 * by tensor (ckpt.h, ck_stream_hf), for shapes too big to hold: a
 * TinyLlama's 4.4 GB of f32, a Llama-3.1-8B's 16 GB of bf16.
 *
 * The values are those ck_new draws. Its stream is a counter (ckpt_model.h
 * ck_mix), so a tensor's element i is draw `from + i`, `from` being where
 * ck_new's order puts the tensor: a pure function of the seed, the
 * tensor's place and the element's. Each tensor is drawn a slice of rows
 * at a time (at most ST_SLICE values, 4 MB) into one buffer and written
 * out, so memory stays that buffer whatever the model's size; one core
 * draws faster than the disk takes them (1.5 ns a value). A llama small enough for ck_new comes out
 * byte for byte as ck_write_hf writes it (tests/import.sh compares them).
 *
 * The files: safetensors as imp_st_write writes them (the header's text
 * alike, written to a temporary beside the file, then renamed), the
 * tensors in ck_write_hf's order, split across files as it splits them,
 * or as transformers does (files of at most 5 GB); the index names each
 * tensor's file and the total size, as the Hub's. */
#include "ckpt_model.h"

#include "frontend/import.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ST_SLICE = 1 << 20 };             /* values drawn at a time */
#define ST_HUB_BYTES 5000000000ll        /* transformers' max_shard_size, "5GB" */

typedef struct {
    char name[64];
    int rank;
    int64_t rows, cols;         /* rank 1: one row */
    int64_t from;               /* its first value's draw in ck_new's stream */
    float center, scale;
    int hd;                     /* wq, wk of an interleaved shape: rows permuted
                                   within heads of hd, as ck_write_hf's; else 0 */
    int file;
} StTensor;

typedef struct {
    StTensor *t;
    int n, files;
    int bf16;
    uint64_t seed;
} StPlan;

static int64_t st_bytes(const StPlan *p, const StTensor *t)
{
    return t->rows * t->cols * (p->bf16 ? 2 : 4);
}

static void st_add(StPlan *p, int rank, int64_t rows, int64_t cols, int64_t from, float center,
                   float scale, int hd)
{
    StTensor *t = &p->t[p->n++];
    t->rank = rank, t->rows = rows, t->cols = cols, t->from = from;
    t->center = center, t->scale = scale, t->hd = hd;
}

#define NAMED(p, ...) snprintf((p)->t[(p)->n - 1].name, sizeof (p)->t[0].name, __VA_ARGS__)

/* One layer's tensors in hf_llama's order, from draw `at` on, where
 * ck_new draws attn_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3. */
static void st_layer(StPlan *p, const CkShape *s, int l, int64_t at)
{
    int64_t D = s->dim, H = s->hidden, hd = s->head_dim ? s->head_dim : D / s->heads;
    int64_t qd = s->heads * hd, kvd = s->kv_heads * hd, ffn = at + 2 * qd * D + 2 * kvd * D + D;
    float rD = 1.0f / sqrtf((float)D);
    int perm = s->interleaved ? (int)hd : 0;
    st_add(p, 1, 1, D, at, 1, 0.1f, 0);
    NAMED(p, "model.layers.%d.input_layernorm.weight", l);
    st_add(p, 2, qd, D, at + D, 0, rD, perm);
    NAMED(p, "model.layers.%d.self_attn.q_proj.weight", l);
    st_add(p, 2, kvd, D, at + D + qd * D, 0, rD, perm);
    NAMED(p, "model.layers.%d.self_attn.k_proj.weight", l);
    st_add(p, 2, kvd, D, at + D + qd * D + kvd * D, 0, rD, 0);
    NAMED(p, "model.layers.%d.self_attn.v_proj.weight", l);
    st_add(p, 2, D, qd, at + D + qd * D + 2 * kvd * D, 0, 1.0f / sqrtf((float)qd), 0);
    NAMED(p, "model.layers.%d.self_attn.o_proj.weight", l);
    st_add(p, 1, 1, D, ffn, 1, 0.1f, 0);
    NAMED(p, "model.layers.%d.post_attention_layernorm.weight", l);
    st_add(p, 2, H, D, ffn + D, 0, rD, 0);
    NAMED(p, "model.layers.%d.mlp.gate_proj.weight", l);
    st_add(p, 2, H, D, ffn + D + 2 * H * D, 0, rD, 0);
    NAMED(p, "model.layers.%d.mlp.up_proj.weight", l);
    st_add(p, 2, D, H, ffn + D + H * D, 0, 1.0f / sqrtf((float)H), 0);
    NAMED(p, "model.layers.%d.mlp.down_proj.weight", l);
}

/* Every tensor, in ck_write_hf's order, each at its place in ck_new's
 * draws: the embedding, the layers', the norm, the head when untied. */
static int st_plan(StPlan *p, const CkShape *s)
{
    int64_t V = s->vocab, D = s->dim, H = s->hidden, hd = s->head_dim ? s->head_dim : D / s->heads;
    int64_t qd = s->heads * hd, kvd = s->kv_heads * hd;
    int64_t layer = 2 * D + 2 * qd * D + 2 * kvd * D + 3 * H * D, end = V * D + s->layers * layer;
    p->t = calloc((size_t)(9 * s->layers + 3), sizeof *p->t);
    if (!p->t)
        return -1;
    st_add(p, 2, V, D, 0, 0, 1.0f, 0);
    NAMED(p, "model.embed_tokens.weight");
    for (int l = 0; l < s->layers; l++)
        st_layer(p, s, l, V * D + l * layer);
    st_add(p, 1, 1, D, end, 1, 0.1f, 0);
    NAMED(p, "model.norm.weight");
    if (!s->tied) {
        st_add(p, 2, V, D, end + D, 0, 1.0f / sqrtf((float)D), 0);
        NAMED(p, "lm_head.weight");
    }
    return 0;
}

/* Each tensor's file: tensor i of n in file i * shards / n, as
 * ck_write_hf; shards 0: as transformers splits, a new file when the
 * tensor would take this one past 5 GB. */
static void st_files(StPlan *p, int shards)
{
    int64_t size = 0;
    p->files = shards ? shards : 1;
    for (int i = 0; i < p->n; i++) {
        int64_t b = st_bytes(p, &p->t[i]);
        if (!shards && size && size + b > ST_HUB_BYTES)
            p->files++, size = 0;
        size += b;
        p->t[i].file = shards ? (int)((int64_t)i * shards / p->n) : p->files - 1;
    }
}

static void st_path(char *path, size_t n, const char *dir, int file, int files)
{
    if (files == 1)
        snprintf(path, n, "%s/model.safetensors", dir);
    else
        snprintf(path, n, "%s/model-%05d-of-%05d.safetensors", dir, file + 1, files);
}

/* ---- the values ------------------------------------------------------------ */

/* Rows [r0, r0 + nr) of t into out as the file holds them, f32 or bf16
 * (ck_write_hf's BF16: the upper halves of values rounded so): row r is
 * drawn row r, or with t->hd the row that permuted() moves to r: within
 * each head, row j * hd/2 + i is drawn row 2i + j. */
static void st_draw(const StPlan *p, const StTensor *t, int64_t r0, int64_t nr, void *out)
{
    for (int64_t r = r0; r < r0 + nr; r++) {
        int64_t src = r;
        if (t->hd) {                    /* r = head * hd + j * hd/2 + i */
            int64_t in = r % t->hd, half = t->hd / 2;
            src = r - in + 2 * (in % half) + in / half;
        }
        uint64_t z = p->seed + (uint64_t)(t->from + src * t->cols) * CK_GAMMA;
        float c = t->center, sc = t->scale;
        if (p->bf16) {
            uint16_t *o = (uint16_t *)out + (r - r0) * t->cols;
            for (int64_t i = 0; i < t->cols; i++)
                o[i] = ck_bf16_bits(c + sc * ck_mix(z += CK_GAMMA));
        } else {
            float *o = (float *)out + (r - r0) * t->cols;
            for (int64_t i = 0; i < t->cols; i++)
                o[i] = c + sc * ck_mix(z += CK_GAMMA);
        }
    }
}

/* t's bytes to f, a slice of rows at a time. */
static int st_put(FILE *f, const StPlan *p, const StTensor *t, float *buf)
{
    int64_t step = t->cols >= ST_SLICE ? 1 : ST_SLICE / t->cols;
    for (int64_t r = 0; r < t->rows; r += step) {
        int64_t nr = t->rows - r < step ? t->rows - r : step;
        size_t bytes = (size_t)(nr * t->cols) * (p->bf16 ? 2 : 4);
        st_draw(p, t, r, nr, buf);
        if (fwrite(buf, 1, bytes, f) != bytes)
            return -1;
    }
    return 0;
}

/* ---- the files ---------------------------------------------------------------- */

/* File `file`'s header as imp_st_write's: its tensors with their data
 * offsets, padded with spaces to a multiple of 8 bytes; malloc'd. */
static char *st_header(const StPlan *p, int file, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f)
        return NULL;
    uint64_t off = 0;
    int first = 1;
    fputc('{', f);
    for (int i = 0; i < p->n; i++) {
        const StTensor *t = &p->t[i];
        if (t->file != file)
            continue;
        fputs(first ? "" : ",", f), first = 0;
        ig_put_string(f, t->name);
        fprintf(f, ":{\"dtype\":\"%s\",\"shape\":[", p->bf16 ? "BF16" : "F32");
        if (t->rank == 2)
            fprintf(f, "%lld,", (long long)t->rows);
        fprintf(f, "%lld],\"data_offsets\":[%llu,%llu]}", (long long)t->cols,
                (unsigned long long)off, (unsigned long long)(off + st_bytes(p, t)));
        off += st_bytes(p, t);
    }
    fputc('}', f);
    while (ftell(f) % 8)
        fputc(' ', f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static int st_put_file(FILE *f, const StPlan *p, int file, float *buf)
{
    size_t hlen;
    char *hdr = st_header(p, file, &hlen);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    int rc = hdr && fwrite(len8, 1, 8, f) == 8 && fwrite(hdr, 1, hlen, f) == hlen ? 0 : -1;
    free(hdr);
    for (int i = 0; !rc && i < p->n; i++)
        if (p->t[i].file == file)
            rc = st_put(f, p, &p->t[i], buf);
    return rc;
}

/* File `file` to a temporary beside path, renamed over path when whole. */
static int st_write_file(const StPlan *p, int file, const char *path, float *buf, char *why,
                         size_t whylen)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.mkckpt-tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int rc = f ? st_put_file(f, p, file, buf) : -1, e = errno;
    if (f && fclose(f) != 0 && !rc)
        rc = -1, e = errno;
    if (!rc && rename(tmp, path) != 0)
        rc = -1, e = errno;
    if (rc) {
        unlink(tmp);
        snprintf(why, whylen, "%s: %s", path, strerror(e));
    }
    return rc;
}

static int st_index(const StPlan *p, const char *dir, char *why, size_t whylen)
{
    char path[4096];
    int64_t total = 0;
    for (int i = 0; i < p->n; i++)
        total += st_bytes(p, &p->t[i]);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return snprintf(why, whylen, "%s: %s", path, strerror(errno)), -1;
    fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %lld\n  },\n  \"weight_map\": {\n",
            (long long)total);
    for (int i = 0; i < p->n; i++)
        fprintf(f, "    \"%s\": \"model-%05d-of-%05d.safetensors\"%s\n", p->t[i].name,
                p->t[i].file + 1, p->files, i + 1 < p->n ? "," : "");
    fprintf(f, "  }\n}\n");
    if (fclose(f) != 0)
        return snprintf(why, whylen, "%s: cannot write", path), -1;
    return 0;
}

/* The plan to f: a line a tensor, then the count, bytes and files. */
static void st_list(FILE *f, const StPlan *p, const char *dir)
{
    char path[4096];
    int64_t total = 0;
    for (int i = 0; i < p->n; i++) {
        const StTensor *t = &p->t[i];
        st_path(path, sizeof path, dir, t->file, p->files);
        fprintf(f, "%s %s [", t->name, p->bf16 ? "BF16" : "F32");
        if (t->rank == 2)
            fprintf(f, "%lld, ", (long long)t->rows);
        fprintf(f, "%lld] %s\n", (long long)t->cols, strrchr(path, '/') + 1);
        total += st_bytes(p, t);
    }
    fprintf(f, "%d tensors, %lld bytes in %d file%s\n", p->n, (long long)total, p->files,
            p->files > 1 ? "s" : "");
}

int ck_streams(const CkShape *s) { return s->type == CK_LLAMA && !s->experts; }

int ck_stream_hf(const CkShape *s, uint64_t seed, const char *dir, int shards, const char *extra,
                 FILE *list, char *why, size_t whylen)
{
    const uint32_t one = 1;
    CkModel m = {.s = *s, .hd = s->head_dim ? s->head_dim : s->dim / s->heads};
    StPlan p = {.bf16 = s->bf16, .seed = seed};
    if (!ck_streams(s) || *(const unsigned char *)&one != 1)
        return snprintf(why, whylen, "%s: cannot be written tensor by tensor",
                        ck_type_names[s->type]), -1;
    if (ck_write_config(&m, dir, extra, why, whylen))
        return -1;
    if (st_plan(&p, s))
        return snprintf(why, whylen, "out of memory"), -1;
    st_files(&p, shards);
    int64_t most = ST_SLICE;            /* st_put's slices: a row at least */
    for (int i = 0; i < p.n; i++)
        most = p.t[i].cols > most ? p.t[i].cols : most;
    float *buf = list ? NULL : malloc(sizeof *buf * (size_t)most);
    char path[4096];
    int rc = list || buf ? 0 : (snprintf(why, whylen, "out of memory"), -1);
    if (list)
        st_list(list, &p, dir);
    for (int i = 0; !list && !rc && i < p.files; i++) {
        st_path(path, sizeof path, dir, i, p.files);
        rc = st_write_file(&p, i, path, buf, why, whylen);
    }
    if (!list && !rc && p.files > 1)
        rc = st_index(&p, dir, why, whylen);
    free(buf);
    free(p.t);
    return rc;
}
