/* frontend/import_llama2c.c: a llama2.c checkpoint (karpathy/llama2.c,
 * run.c and export.py) to the decoder graph, and its weights to
 * safetensors under the names the graph uses (llama2.c's own, as in
 * examples/llama2-step.json: layers.L.attention.wq.weight, ...).
 *
 * Two layouts, both little-endian fp32 after a header:
 *   version 0 (export.py legacy_export, what run.c reads): 7 int32
 *     (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
 *     seq_len), vocab_size negative when the classifier is not the
 *     embedding table; then token embeddings, every layer's attention
 *     norm, wq, wk, wv, wo, ffn norm, w1, w2, w3 (each kind for all
 *     layers in turn), the final norm, two unused RoPE tables of
 *     seq_len x head_size/2, and the classifier when not shared;
 *   version 1 (version1_export): a 256-byte header: uint32 magic
 *     0x616b3432 ("ak42"), int32 version 1, the 7 int32, a byte that is 1
 *     when the classifier is shared; then every attention norm, every ffn
 *     norm, the final norm, the token embeddings, wq, wk, wv, wo, w1, w2,
 *     w3 for all layers, and the classifier when not shared.
 * Weights are matrices [out, in] as linear takes them; rope is the
 * interleaved style with theta 10000; rmsnorm's eps is 1e-5.
 * The file must hold exactly what its header says: no more, no less. */
#include "import.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC 0x616b3432u       /* "ak42" as a uint32; bytes "24ka" on disk */

typedef struct {
    int64_t dim, hidden, layers, heads, kv_heads, vocab, seq_len;
    int shared, version;
    int64_t data;               /* bytes before the first weight */
} Header;

/* One kind of weight: for every layer (a "layers.L." name) or once;
 * [rows, cols], or [rows] when cols is 0; no name: skipped (RoPE tables). */
typedef struct {
    const char *name;
    int per_layer;
    int64_t rows, cols;
} Part;

static int32_t le32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/* The header at p (size bytes); 0, or -1 after reporting. */
static int read_header(const unsigned char *p, size_t size, Header *h, Diags *d)
{
    memset(h, 0, sizeof *h);
    if (size >= 8 && (uint32_t)le32(p) == MAGIC) {
        h->version = le32(p + 4);
        if (h->version != 1) {
            diag(d, "header", "version %d not supported (kiln reads version 0 and the fp32 "
                 "version 1)", h->version);
            return -1;
        }
        h->data = 256;
        p += 8;
    } else {
        h->data = 28;
    }
    if (size < (size_t)h->data) {
        diag(d, NULL, "%zu bytes, too few for a llama2.c header", size);
        return -1;
    }
    int64_t *f[] = {&h->dim, &h->hidden, &h->layers, &h->heads,
                    &h->kv_heads, &h->vocab, &h->seq_len};
    for (int i = 0; i < 7; i++)
        *f[i] = le32(p + 4 * i);
    h->shared = h->version ? p[28] == 1 : h->vocab > 0;
    if (!h->version && h->vocab < 0)
        h->vocab = -h->vocab;
    return 0;
}

static int check_header(const Header *h, Diags *d)
{
    static const char *const names[] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads",
                                        "vocab_size", "seq_len"};
    const int64_t v[] = {h->dim, h->hidden, h->layers, h->heads, h->kv_heads, h->vocab, h->seq_len};
    int before = d->n;
    for (int i = 0; i < 7; i++)
        if (v[i] < 1)
            diag(d, "header", "%s is %lld; it must be at least 1", names[i], (long long)v[i]);
    if (d->n > before)
        return -1;
    if (h->dim % h->heads)
        diag(d, "header", "n_heads %lld does not divide dim %lld", (long long)h->heads,
             (long long)h->dim);
    else if (h->dim / h->heads % 2)
        diag(d, "header", "head size %lld is odd; rotary embeddings rotate pairs",
             (long long)(h->dim / h->heads));
    if (h->heads % h->kv_heads)
        diag(d, "header", "n_kv_heads %lld does not divide n_heads %lld", (long long)h->kv_heads,
             (long long)h->heads);
    return d->n > before ? -1 : 0;
}

/* The parts in file order; returns how many. */
static int parts(const Header *h, Part *p)
{
    int64_t D = h->dim, H = h->hidden, V = h->vocab, kv = D / h->heads * h->kv_heads;
    const Part norm_att = {"attention_norm.weight", 1, D, 0},
               norm_ffn = {"ffn_norm.weight", 1, D, 0},
               norm = {"norm.weight", 0, D, 0},
               embed = {"tok_embeddings.weight", 0, V, D},
               wq = {"attention.wq.weight", 1, D, D},
               wk = {"attention.wk.weight", 1, kv, D},
               wv = {"attention.wv.weight", 1, kv, D},
               wo = {"attention.wo.weight", 1, D, D},
               w1 = {"feed_forward.w1.weight", 1, H, D},
               w2 = {"feed_forward.w2.weight", 1, D, H},
               w3 = {"feed_forward.w3.weight", 1, H, D},
               rope = {NULL, 0, h->seq_len, D / h->heads},   /* cos and sin, seq_len x hs/2 each */
               out = {"output.weight", 0, V, D};
    int n = 0;
    if (h->version == 0) {
        const Part v0[] = {embed, norm_att, wq, wk, wv, wo, norm_ffn, w1, w2, w3, norm, rope};
        memcpy(p, v0, sizeof v0);
        n = 12;
    } else {
        const Part v1[] = {norm_att, norm_ffn, norm, embed, wq, wk, wv, wo, w1, w2, w3};
        memcpy(p, v1, sizeof v1);
        n = 11;
    }
    if (!h->shared)
        p[n++] = out;
    return n;
}

/* Byte counts that saturate at UINT64_MAX rather than wrap. */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static uint64_t part_bytes(const Part *p)
{
    return mul_sat(mul_sat((uint64_t)p->rows, (uint64_t)(p->cols ? p->cols : 1)), 4);
}

/* The weights as tensors inside the mapping at base (size bytes), in file
 * order; -1 after reporting when the file is not exactly as long as its
 * header says. */
static int tensors(Arena *a, const Header *h, const unsigned char *base, size_t size,
                   ImpTensor **out, int *n, Diags *d)
{
    Part p[13];
    int np = parts(h, p), cap = 0;
    uint64_t need = (uint64_t)h->data;
    for (int i = 0; i < np; i++)
        need = add_sat(need, mul_sat(p[i].per_layer ? (uint64_t)h->layers : 1, part_bytes(&p[i])));
    if (need != size) {
        diag(d, NULL, "%zu bytes, but a version %d checkpoint with dim %lld, hidden_dim %lld, "
             "%lld layers, %lld heads, %lld kv heads, vocab %lld, seq_len %lld%s has %s",
             size, h->version, (long long)h->dim, (long long)h->hidden, (long long)h->layers,
             (long long)h->heads, (long long)h->kv_heads, (long long)h->vocab,
             (long long)h->seq_len, h->shared ? "" : " and its own classifier",
             need == UINT64_MAX ? "more than 2^64"
                                : arena_printf(a, "%llu", (unsigned long long)need));
        return -1;
    }
    *out = NULL;
    *n = 0;
    uint64_t off = (uint64_t)h->data;
    for (int i = 0; i < np; i++)
        for (int64_t l = 0; l < (p[i].per_layer ? h->layers : 1); l++, off += part_bytes(&p[i])) {
            if (!p[i].name)
                continue;
            const char *name = p[i].per_layer
                                   ? arena_printf(a, "layers.%lld.%s", (long long)l, p[i].name)
                                   : p[i].name;
            ImpTensor t = {name, "F32", p[i].cols ? 2 : 1, {p[i].rows, p[i].cols}, base + off};
            ARR_PUSH(a, *out, *n, cap, t);
        }
    return 0;
}

static char *graph(Arena *a, const Header *h, const ImportOpts *o, Diags *d)
{
    ImpLlama L = {
        .model_name = "llama2c", .vocab = h->vocab, .dim = h->dim, .hidden = h->hidden,
        .layers = h->layers, .heads = h->heads, .kv_heads = h->kv_heads,
        .head_dim = h->dim / h->heads, .tokens = o->tokens ? o->tokens : 1,
        .max_seq = o->max_seq ? o->max_seq : h->seq_len, .slots = o->slots, .eps = 1e-5,
        .theta = 10000.0, .rope_style = "interleaved", .tied = h->shared,
    };
    if (L.tokens > L.max_seq) {
        diag(d, NULL, "--tokens %lld is more than the %lld rows of the KV cache (--max-seq)",
             (long long)L.tokens, (long long)L.max_seq);
        return NULL;
    }
    return imp_llama_graph(a, &L);
}

/* The file mapped read-only; NULL after reporting. */
static unsigned char *map(const char *path, size_t *size, Diags *d, int *io)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    const char *why = NULL;
    void *m = MAP_FAILED;
    if (fd < 0 || fstat(fd, &st) != 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (st.st_size == 0)
        diag(d, NULL, "the file is empty");
    else if ((m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
        why = strerror(errno);
    if (fd >= 0)
        close(fd);
    if (why)
        diag(d, NULL, "cannot read: %s", why), *io = 1;
    if (m == MAP_FAILED)
        return NULL;
    *size = (size_t)st.st_size;
    return m;
}

/* The mapping, held by the arena while it is used, so that running out
 * of memory does not leak it. */
typedef struct {
    void *p;
    size_t size;
} Mapping;

static void unmap(void *m) { munmap(((Mapping *)m)->p, ((Mapping *)m)->size); }

char *imp_llama2c(Arena *a, const char *bin, const ImportOpts *o, const char *weights_out,
                  Diags *d, int *io)
{
    Mapping *mp = arena_alloc(a, sizeof *mp);
    *io = 0;
    if (!(mp->p = map(bin, &mp->size, d, io)))
        return NULL;
    arena_hold(a, mp, unmap);
    const unsigned char *m = mp->p;
    Header h;
    ImpTensor *t = NULL;
    int n = 0;
    char *text = NULL, why[600];
    if (!read_header(m, mp->size, &h, d) && !check_header(&h, d) &&
        !tensors(a, &h, m, mp->size, &t, &n, d))
        text = graph(a, &h, o, d);
    if (text && weights_out && imp_st_write(weights_out, t, n, why, sizeof why)) {
        diag(d, NULL, "cannot write the weights: %s", why);
        *io = 1;
        text = NULL;
    }
    arena_release(a, mp);
    return text;
}
