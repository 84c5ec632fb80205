/* runtime/gen/rt_tokenizer_vocab.c: the tokens of a tokenizer.json: its model
 * (BPE, byte-level or with spaces as U+2581) and its added tokens.
 *
 * Contract (kiln_rt.h, rt_tok_read_vocab). What is read, every key known
 * and a value kiln cannot honour refused by name:
 *   model = { type: "BPE" (or absent), vocab, merges, dropout: null,
 *       continuing_subword_prefix, end_of_word_suffix: "" or null,
 *       unk_token, fuse_unk, byte_fallback, ignore_merges }
 *   vocab: byte-level text (ByteLevel's alphabet, one character a byte)
 *       to ids 0 .. V-1, each once; every byte's token is there, so any
 *       text has an encoding and unk_token and byte_fallback never act.
 *       With spaces as U+2581 (rt_tokenizer_sp.c): text as it is, where
 *       <0x00>..<0xFF> are the byte fallback's tokens (those there), and
 *       unk_token, when given, must be a token
 *   merges: "A B" or ["A", "B"]: A, B and AB in vocab, no pair twice; a
 *       merge's rank is its place in the list
 *   added_tokens = [{ id, content, single_word: false, lstrip, rstrip,
 *       normalized, special }]: each the vocab token of the same text, or
 *       one of the ids after the vocab's (V, V+1, ... each once); not
 *       normalized (absent: not special) under Llama 2's normalizer
 * then no two tokens alike. Tokens are kept as bytes (ByteLevel's
 * characters mapped back), so encoding and decoding never see ByteLevel's
 * alphabet; with spaces as U+2581, as they are. Messages: "PATH:
 * model.merges[12]: what is wrong". */
#include "runtime/gen/rt_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VC_N(a) ((int)(sizeof a / sizeof a[0]))

typedef struct {
    rt_json J;                  /* the whole text: values are read at places */
    rt_tok *t;
    char *unk;                  /* model.unk_token, or NULL */
    size_t used, cap;           /* of t->bytes */
    int nvocab;                 /* model.vocab's tokens: ids [0, nvocab) */
    const unsigned char *merges;            /* model.merges, read last */
} vc_reader;

/* ---- ByteLevel's alphabet, and the tokens' bytes ------------------------- */

/* The byte that ByteLevel writes as code point cp, or -1: '!'..'~',
 * 0xA1..0xAC and 0xAE..0xFF as themselves, the other 68 bytes (0x00..0x20,
 * 0x7F..0xA0, 0xAD) as U+0100.. in order. */
static int vc_byte(unsigned cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 0x100 || cp >= 0x100 + 68)
        return -1;
    unsigned k = cp - 0x100;
    return k <= 0x20 ? (int)k : k <= 0x20 + 34 ? (int)(0x7F + k - 0x21) : 0xAD;
}

unsigned rt_tok_unbyte(const char *s, char *out, size_t *n)
{
    const unsigned char *p = (const unsigned char *)s;
    *n = 0;
    while (*p) {
        unsigned cp = *p, extra = cp >= 0xF0 ? 3 : cp >= 0xE0 ? 2 : cp >= 0xC0 ? 1 : 0;
        cp &= extra ? 0x3F >> extra : 0x7F;
        for (p++; extra; extra--)
            cp = cp << 6 | (*p++ & 0x3F);
        int b = vc_byte(cp);
        if (b < 0)
            return cp;
        out[(*n)++] = (char)b;
    }
    return 0;
}

/* A token's text s into its bytes at out (out may be s), *n of them:
 * ByteLevel's characters mapped back (rt_tok_unbyte), or raw, as it is. */
static unsigned vc_text_bytes(const char *s, int raw, char *out, size_t *n)
{
    if (!raw)
        return rt_tok_unbyte(s, out, n);
    *n = strlen(s);
    memmove(out, s, *n);
    return 0;
}

/* Room for n more bytes in t->bytes; -1 when out of memory. Offsets are
 * 32-bit: the file is smaller than 4 GB. */
static int vc_reserve(vc_reader *H, size_t n)
{
    if (H->cap - H->used >= n)
        return 0;
    size_t cap = H->cap ? H->cap : 4096;
    while (cap - H->used < n)
        cap *= 2;
    char *b = cap <= UINT32_MAX ? realloc(H->t->bytes, cap) : NULL;
    if (!b)
        return -1;
    H->t->bytes = b;
    H->cap = cap;
    return 0;
}

/* A token's text appended to t->bytes as bytes (ByteLevel's characters
 * mapped back, unless raw), NUL-terminated: its offset and length. */
static int vc_token(vc_reader *H, const char *s, int raw, const char *where, uint32_t *off,
                    uint32_t *len)
{
    size_t n = strlen(s);
    if (!n)
        return rt_json_bad(&H->J, where, "an empty token");
    if (vc_reserve(H, n + 1))
        return rt_json_oom(&H->J);
    char *o = H->t->bytes + H->used;
    unsigned cp = vc_text_bytes(s, raw, o, &n);
    if (cp)
        return rt_json_bad(&H->J, where,
                           "'%.80s' is not in ByteLevel's alphabet (U+%04X is no byte's "
                           "character)",
                           s, cp);
    o[n] = 0;
    *off = (uint32_t)H->used;
    *len = (uint32_t)n;
    H->used += n + 1;
    return 0;
}

/* The bytes of token id, for messages. */
static const char *vc_text(const vc_reader *H, int id) { return H->t->bytes + H->t->off[id]; }

/* ---- model.vocab and added_tokens: the tokens ------------------------------ */

typedef struct {
    int64_t id;
    uint32_t off, len;
} vc_entry;

/* One member of model.vocab: "text": id. */
static int vc_vocab_entry(vc_reader *H, rt_json *c, vc_entry *x)
{
    char *key = NULL, what[120];
    int rc = rt_json_string(c, &key);
    if (!rc)
        rc = vc_token(H, key, H->t->space != RT_TOK_BYTES, "model.vocab", &x->off, &x->len);
    if (!rc && rt_json_eat(c, ':'))
        rc = rt_json_syntax(c, "expected ':'");
    if (!rc) {
        snprintf(what, sizeof what, "model.vocab: '%.80s'", key);
        rc = rt_json_uint(c, what, &x->id);
    }
    free(key);
    return rc;
}

/* The vocab's tokens at their ids, which are 0 .. n-1, each once. */
static int vc_place(vc_reader *H, const vc_entry *v, int n)
{
    rt_tok *t = H->t;
    t->off = malloc(sizeof *t->off * (size_t)(n + 1));
    t->len = malloc(sizeof *t->len * (size_t)(n + 1));
    if (!t->off || !t->len)
        return rt_json_oom(&H->J);
    memset(t->len, 0xFF, sizeof *t->len * (size_t)n);
    for (int i = 0; i < n; i++) {
        int64_t id = v[i].id;
        if (id >= n)
            return rt_json_bad(&H->J, "model.vocab",
                               "'%.80s' has id %lld, but its %d tokens take ids 0 "
                               "to %d",
                               H->t->bytes + v[i].off, (long long)id, n, n - 1);
        if (t->len[id] != UINT32_MAX)
            return rt_json_bad(&H->J, "model.vocab", "id %lld is given to '%.80s' and to '%.80s'",
                               (long long)id, vc_text(H, (int)id), H->t->bytes + v[i].off);
        t->off[id] = v[i].off;
        t->len[id] = v[i].len;
    }
    t->n = H->nvocab = n;
    return 0;
}

/* v, an array of *cap items of `size` bytes, with room for item n:
 * realloc'd when full; NULL (v kept) when out of memory. */
static void *vc_grow(void *v, int *cap, int n, size_t size)
{
    if (n < *cap)
        return v;
    int more = *cap ? 2 * *cap : 64;
    void *nv = *cap < INT32_MAX / 4 ? realloc(v, size * (size_t)more) : NULL;
    if (nv)
        *cap = more;
    return nv;
}

/* vocab = '{' (string ':' uint (',' string ':' uint)*)? '}' */
static int vc_vocab(vc_reader *H, const unsigned char *at)
{
    rt_json c = rt_json_at(&H->J, at);
    vc_entry *v = NULL, *nv;
    int n = 0, cap = 0,
        rc = rt_json_eat(&c, '{') ? rt_json_bad(&H->J, "model.vocab", "not an object") : 0;
    for (int first = 1, more; !rc && (more = rt_json_next(&c, '}', first)) != 0; first = 0) {
        if (!(nv = vc_grow(v, &cap, n, sizeof *v)))
            rc = rt_json_oom(&H->J);
        else
            v = nv, rc = more < 0 ? RT_EINVAL : vc_vocab_entry(H, &c, &v[n]);
        n += !rc;
    }
    if (!rc)
        rc = vc_place(H, v, n);
    free(v);
    return rc;
}

typedef struct {
    int64_t id;
    char *content;
    unsigned char strip;        /* RT_TOK_LSTRIP | RT_TOK_RSTRIP */
} vc_added;

static const char *const vc_added_keys[] = {"id",     "content",    "single_word", "lstrip",
                                            "rstrip", "normalized", "special"};

/* added_tokens[i] = { id, content, single_word: false, lstrip, rstrip,
 *                     normalized, special } */
static int vc_added_item(vc_reader *H, rt_json *c, const char *where, vc_added *a)
{
    const unsigned char *val[VC_N(vc_added_keys)];
    char what[80];
    int rc = rt_json_object(c, where, vc_added_keys, VC_N(vc_added_keys), val), special = 0,
        normalized;
    a->content = NULL;
    if (!rc && (!val[0] || !val[1]))
        rc = rt_json_bad(&H->J, where, "needs an id and a content");
    if (!rc) {
        rt_json v = rt_json_at(&H->J, val[0]);
        snprintf(what, sizeof what, "%s: id", where);
        rc = rt_json_uint(&v, what, &a->id);
    }
    if (!rc)
        rc = rt_json_string_at(&H->J, val[1], &a->content);
    int lstrip = 0, rstrip = 0;
    if (!rc)
        rc = rt_json_false_at(&H->J, val[2], where, "single_word");
    if (!rc)
        rc = rt_json_bool_at(&H->J, val[3], where, "lstrip", &lstrip);
    if (!rc)
        rc = rt_json_bool_at(&H->J, val[4], where, "rstrip", &rstrip);
    a->strip = (unsigned char)((lstrip ? RT_TOK_LSTRIP : 0) | (rstrip ? RT_TOK_RSTRIP : 0));
    if (!rc)
        rc = rt_json_bool_at(&H->J, val[6], where, "special", &special);
    normalized = !special;                      /* HF's default */
    if (!rc)
        rc = rt_json_bool_at(&H->J, val[5], where, "normalized", &normalized);
    if (!rc && normalized && H->t->space == RT_TOK_SP_PREPEND)
        rc = rt_json_bad(&H->J, where, "normalized: true with a normalizer is not supported "
                         "(kiln takes added tokens out before normalizing)");
    if (rc) {
        free(a->content);
        a->content = NULL;
    }
    return rc;
}

/* Each added token is the vocab's token of the same text, or takes one
 * of the ids after the vocab's; t->added lists them all. */
static int vc_add(vc_reader *H, const vc_added *v, int n)
{
    rt_tok *t = H->t;
    int V = H->nvocab, total = V, rc = 0;
    for (int i = 0; i < n; i++)
        total += v[i].id >= V;
    uint32_t *off = realloc(t->off, sizeof *off * (size_t)(total + 1));
    if (off)
        t->off = off;
    uint32_t *len = off ? realloc(t->len, sizeof *len * (size_t)(total + 1)) : NULL;
    if (len)
        t->len = len;
    char *taken = calloc((size_t)total + 1, 1);
    if (!off || !len || !taken || !(t->added = malloc(sizeof *t->added * (size_t)(n + 1))) ||
        !(t->strip = malloc((size_t)n + 1)))
        rc = rt_json_oom(&H->J);
    for (int i = 0; !rc && i < n; i++) {
        char where[48];
        int64_t id = v[i].id;
        snprintf(where, sizeof where, "added_tokens[%d]", i);
        if (id >= total)
            rc = rt_json_bad(&H->J, where,
                             "id %lld is not in [0, %d): added tokens not in model.vocab "
                             "take the ids after its %d",
                             (long long)id, total, V);
        else if (taken[id])
            rc = rt_json_bad(&H->J, where, "id %lld given twice", (long long)id);
        else if (id < V && (strlen(v[i].content) != t->len[id] ||
                            memcmp(v[i].content, vc_text(H, (int)id), t->len[id])))
            rc = rt_json_bad(&H->J, where, "id %lld is '%.80s' in model.vocab, not '%.80s'",
                             (long long)id, vc_text(H, (int)id), v[i].content);
        else if (id >= V)
            rc = vc_token(H, v[i].content, 1, where, &t->off[id], &t->len[id]);
        if (!rc)
            taken[id] = 1, t->strip[t->nadded] = v[i].strip, t->added[t->nadded++] = (int32_t)id;
    }
    if (!rc)
        t->n = total;
    free(taken);
    return rc;
}

/* added_tokens = '[' (item (',' item)*)? ']', or null */
static int vc_added_tokens(vc_reader *H, const unsigned char *at)
{
    if (rt_json_null_at(&H->J, at))
        return 0;
    rt_json c = rt_json_at(&H->J, at);
    vc_added *v = NULL, *nv;
    int n = 0, cap = 0,
        rc = rt_json_eat(&c, '[') ? rt_json_bad(&H->J, "added_tokens", "not an array") : 0;
    for (int first = 1, more; !rc && (more = rt_json_next(&c, ']', first)) != 0; first = 0) {
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%d]", n);
        if (!(nv = vc_grow(v, &cap, n, sizeof *v)))
            rc = rt_json_oom(&H->J);
        else
            v = nv, rc = more < 0 ? RT_EINVAL : vc_added_item(H, &c, where, &v[n]);
        n += !rc;
    }
    if (!rc)
        rc = vc_add(H, v, n);
    for (int i = 0; i < n; i++)
        free(v[i].content);
    free(v);
    return rc;
}

/* Every byte's token is in the vocab; with spaces as U+2581, the byte
 * fallback's tokens <0xBB> that are (-1 for the others). */
static int vc_bytes(vc_reader *H)
{
    rt_tok *t = H->t;
    for (int b = 0; b < 256 && t->space != RT_TOK_BYTES; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_id[b] = rt_tok_lookup(t, name, 6, "", 0);
    }
    for (int b = 0; b < 256 && t->space == RT_TOK_BYTES; b++) {
        char c = (char)b;
        t->byte_id[b] = rt_tok_lookup(t, &c, 1, "", 0);
        if (t->byte_id[b] < 0 || t->byte_id[b] >= H->nvocab)
            return rt_json_bad(&H->J, "model.vocab",
                               "no token for byte 0x%02X (byte-level BPE needs all "
                               "256)",
                               b);
    }
    return 0;
}

/* ---- model.merges ---------------------------------------------------------- */

/* merge = "A B" | '[' "A" ',' "B" ']': A and B malloc'd. */
static int vc_merge_texts(vc_reader *H, rt_json *c, const char *where, char **a, char **b)
{
    *a = *b = NULL;
    rt_json_ws(c);
    if (c->p < c->end && *c->p == '[') {
        c->p++;
        int rc = rt_json_string(c, a);
        if (!rc && rt_json_eat(c, ','))
            rc = rt_json_syntax(c, "expected ','");
        if (!rc)
            rc = rt_json_string(c, b);
        if (!rc && rt_json_eat(c, ']'))
            rc = rt_json_syntax(c, "expected ']'");
        return rc;
    }
    int rc = rt_json_string(c, a);
    char *sp = rc ? NULL : strchr(*a, ' ');
    if (!rc && (!sp || sp == *a || !sp[1] || strchr(sp + 1, ' ')))
        return rt_json_bad(&H->J, where, "'%.80s' is not two tokens with a space between", *a);
    if (!rc && !(*b = malloc(strlen(sp + 1) + 1)))
        return rt_json_oom(&H->J);
    if (!rc) {
        strcpy(*b, sp + 1);
        *sp = 0;
    }
    return rc;
}

/* One merge: both tokens and the token they make are in the vocab. */
static int vc_merge(vc_reader *H, rt_json *c, int i, rt_tok_merge *m)
{
    char where[48], *a, *b;
    size_t na = 0, nb = 0;
    snprintf(where, sizeof where, "model.merges[%d]", i);
    int rc = vc_merge_texts(H, c, where, &a, &b), raw = H->t->space != RT_TOK_BYTES;
    unsigned cp = rc ? 0 : vc_text_bytes(a, raw, a, &na);
    cp = rc || cp ? cp : vc_text_bytes(b, raw, b, &nb);
    if (cp)
        rc = rt_json_bad(&H->J, where, "U+%04X is not in ByteLevel's alphabet", cp);
    if (!rc) {
        m->a = rt_tok_lookup(H->t, a, na, "", 0);
        m->b = rt_tok_lookup(H->t, b, nb, "", 0);
        m->id = rt_tok_lookup(H->t, a, na, b, nb);
        m->rank = i;
        const char *what = m->a < 0 || m->a >= H->nvocab     ? "the first token"
                           : m->b < 0 || m->b >= H->nvocab   ? "the second token"
                           : m->id < 0 || m->id >= H->nvocab ? "the token they make"
                                                             : NULL;
        if (what)
            rc = rt_json_bad(&H->J, where, "%s is not in model.vocab", what);
    }
    free(a);
    free(b);
    return rc;
}

/* merges = '[' (merge (',' merge)*)? ']'; a merge's rank is its place. */
static int vc_merges(vc_reader *H, const unsigned char *at)
{
    rt_json c = rt_json_at(&H->J, at);
    rt_tok_merge *v = NULL, *nv;
    int n = 0, cap = 0, dup[2] = {0, 0};
    int rc = rt_json_eat(&c, '[') ? rt_json_bad(&H->J, "model.merges", "not an array") : 0;
    for (int first = 1, more; !rc && (more = rt_json_next(&c, ']', first)) != 0; first = 0) {
        if (!(nv = vc_grow(v, &cap, n, sizeof *v)))
            rc = rt_json_oom(&H->J);
        else
            v = nv, rc = more < 0 ? RT_EINVAL : vc_merge(H, &c, n, &v[n]);
        n += !rc;
    }
    if (!rc && (rc = rt_tok_set_merges(H->t, v, n, dup)) != 0) {
        char where[48];
        snprintf(where, sizeof where, "model.merges[%d]", dup[1]);
        rc = rc < 0 ? rt_json_oom(&H->J)
                    : rt_json_bad(&H->J, where, "repeats model.merges[%d]", dup[0]);
    }
    free(v);
    return rc;
}

/* ---- model --------------------------------------------------------------------- */

static const char *const vc_model_keys[] = {
    "type",     "dropout",       "unk_token",     "continuing_subword_prefix", "end_of_word_suffix",
    "fuse_unk", "byte_fallback", "ignore_merges", "vocab",                     "merges"};

/* A key that must be null or "" when given. */
static int vc_no_text(vc_reader *H, const unsigned char *at, const char *key)
{
    char *s = NULL;
    int rc = rt_json_null_at(&H->J, at) ? 0 : rt_json_string_at(&H->J, at, &s);
    if (!rc && s && *s)
        rc =
            rt_json_bad(&H->J, "model", "%s: '%.40s' is not supported (only \"\" or null)", key, s);
    free(s);
    return rc;
}

/* The model's type, read before its keys so that another model (WordPiece,
 * Unigram) is refused by its type rather than by a key BPE lacks. Absent
 * is BPE: HF then tells the model by its keys. Other problems (not an
 * object) are left to the strict read that follows. */
static int vc_model_type(vc_reader *H, const unsigned char *at)
{
    rt_err quiet = {0};
    rt_json Q = H->J;
    char *type = NULL;
    Q.e = &quiet;
    rt_json_type_at(&Q, at, "model", &type);
    int rc = quiet.code == RT_EINTERNAL ? rt_json_oom(&H->J) : 0;
    if (!rc && type && strcmp(type, "BPE"))
        rc = rt_json_bad(&H->J, "model", "type '%.40s' is not supported (kiln reads BPE)", type);
    free(type);
    return rc;
}

/* model = { type: "BPE", ... }: the vocab now, the merges once the added
 * tokens are known. */
static int vc_read_bpe(vc_reader *H, const unsigned char *at)
{
    const unsigned char *val[VC_N(vc_model_keys)];
    char *type = NULL;
    int rc = at ? vc_model_type(H, at) : rt_json_bad(&H->J, "", "no model");
    if (!rc)
        rc = rt_json_object_at(&H->J, at, "model", vc_model_keys, VC_N(vc_model_keys), val);
    if (!rc && val[0])
        rc = rt_json_string_at(&H->J, val[0], &type);   /* a string: BPE, checked above */
    if (!rc && !rt_json_null_at(&H->J, val[1]))
        rc = rt_json_bad(&H->J, "model", "dropout: not supported (only null)");
    if (!rc && !rt_json_null_at(&H->J, val[2]))
        rc = rt_json_string_at(&H->J, val[2], &H->unk);
    for (int k = 3; !rc && k < 5; k++)
        rc = vc_no_text(H, val[k], vc_model_keys[k]);
    if (!rc)
        rc = rt_json_bool_at(&H->J, val[5], "model", "fuse_unk", &H->t->fuse_unk);
    if (!rc)
        rc = rt_json_bool_at(&H->J, val[6], "model", "byte_fallback", &H->t->byte_fallback);
    if (!rc)
        rc = rt_json_bool_at(&H->J, val[7], "model", "ignore_merges", &H->t->ignore_merges);
    if (!rc && (!val[8] || !val[9]))
        rc = rt_json_bad(&H->J, "model", "needs vocab and merges");
    if (!rc)
        rc = vc_vocab(H, val[8]);
    if (!rc)
        H->merges = val[9];
    free(type);
    return rc;
}

/* ---- the tokens ---------------------------------------------------------------- */

int rt_tok_read_vocab(rt_tok *t, const rt_json *J, const unsigned char *model,
                      const unsigned char *added)
{
    vc_reader H = {.J = *J, .t = t};
    int dup[2] = {0, 0}, rc = vc_read_bpe(&H, model);
    if (!rc)
        rc = vc_added_tokens(&H, added);
    if (!rc && (rc = rt_tok_index(t, NULL, dup)) != 0)
        rc = rc < 0 ? rt_json_oom(&H.J)
                    : rt_json_bad(&H.J, "", "tokens %d and %d are both '%.80s'", dup[0], dup[1],
                                  vc_text(&H, dup[0]));
    if (!rc)
        rc = vc_bytes(&H);
    if (!rc)
        rc = vc_merges(&H, H.merges);
    /* byte-level BPE never needs unk: every byte is a token */
    if (!rc && H.unk && t->space != RT_TOK_BYTES &&
        (t->unk = rt_tok_lookup(t, H.unk, strlen(H.unk), "", 0)) < 0)
        rc = rt_json_bad(&H.J, "model", "unk_token: '%.80s' is not a token", H.unk);
    free(H.unk);
    return rc;
}
