/* runtime/gen/rt_tokenizer.c: tokenizers, llama2.c's tokenizer.bin, and what
 * the formats share: the tokens' table, the API, decoding.
 *
 * Contract (rt_gen.h). rt_tok_open tells the format by content: a file
 * that starts with "GGUF" is a GGUF, mapped, whose metadata holds the
 * tokenizer (rt_tokenizer_gguf.c); any other is read whole (at most
 * TOK_MAX_FILE bytes): a JSON object (first non-space byte '{', no NUL in
 * the first four bytes, which a tokenizer.bin's max_token_length would
 * hold) is a Hugging Face tokenizer.json (rt_tokenizer_hf.c: byte-level
 * BPE, or SentencePiece-style in rt_tokenizer_sp.c); anything else is
 * read as
 *   tokenizer.bin = i32 max_token_length, then until the end of the
 *                   file: f32 score, i32 len, len bytes   (little-endian)
 * which must hold: max_token_length >= 1; every token whole, of 1 to
 * max_token_length bytes, no NUL (run.c keeps tokens as C strings), a
 * finite score, no two alike; at least 259 tokens, ids 3 + b being the
 * byte tokens "<0xBB>" (two upper-case hex digits) of the byte
 * fallback. Messages: "PATH: token I (byte B): what is wrong".
 *
 * Encoding a tokenizer.bin is run.c's encode(), step for step, so that
 * the ids are run.c's: BOS (1) when asked; the dummy prefix " " when the
 * text is not empty; each unit of the text (a byte and the up to three
 * continuation bytes after it) as its token, or else its bytes as byte
 * tokens (byte + 3); then, while some adjacent pair's concatenated text
 * is a token scoring above -1e10, the pair whose token scores highest
 * (the leftmost of equals) becomes that token. run.c would crash where
 * the vocabulary has no " "; here " " then falls back to its byte. Like
 * run.c, encoding takes time quadratic in the text's length.
 *
 * Decoding gives a token's bytes (a byte token's byte; after BOS, without
 * a leading space, as run.c's decode(); a GGUF's by token type); UTF-8 characters split across
 * tokens are held back until whole, so every piece printed is whole
 * characters (bytes that cannot become one pass through as they are). */
#include "runtime/gen/rt_tok.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOK_MAX_FILE (UINT64_C(1) << 30)
#define TOK_BIN_BOS 1
#define TOK_BIN_EOS 2
#define TOK_BIN_BYTES 3            /* ids of the byte tokens <0x00>.. */

/* ---- the tokens' table: bytes to id ----------------------------------- */

/* FNV-1a of a then b. */
static uint32_t tok_hash(const char *a, size_t na, const char *b, size_t nb)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < na; i++)
        h = (h ^ (unsigned char)a[i]) * 16777619u;
    for (size_t i = 0; i < nb; i++)
        h = (h ^ (unsigned char)b[i]) * 16777619u;
    return h;
}

int rt_tok_lookup(const rt_tok *t, const char *a, size_t na, const char *b, size_t nb)
{
    if (!t->slot)
        return -1;
    for (uint32_t h = tok_hash(a, na, b, nb) & t->mask;; h = (h + 1) & t->mask) {
        int id = t->slot[h];
        if (id < 0)
            return -1;
        const char *s = t->bytes + t->off[id];
        if (t->len[id] == na + nb && !memcmp(s, a, na) && !memcmp(s + na, b, nb))
            return id;
    }
}

/* The slots of a table of n entries: a power of two, at least twice n. */
static uint32_t tok_slots(int n)
{
    uint32_t size = 16;
    while (size < 2 * (uint32_t)n)
        size *= 2;
    return size;
}

int rt_tok_index(rt_tok *t, const unsigned char *late, int dup[2])
{
    uint32_t size = tok_slots(t->n);
    free(t->slot);
    if (!(t->slot = malloc(sizeof *t->slot * size)))
        return -1;
    memset(t->slot, 0xFF, sizeof *t->slot * size);
    t->mask = size - 1;
    for (int pass = 0; pass < (late ? 2 : 1); pass++)
        for (int i = 0; i < t->n; i++) {
            if (late && !late[i] != !pass)
                continue;
            const char *s = t->bytes + t->off[i];
            int was = rt_tok_lookup(t, s, t->len[i], "", 0);
            if (was >= 0 && (!pass || late[was])) {
                dup[0] = was, dup[1] = i;
                return 1;
            }
            if (was >= 0)
                continue;                   /* late, beside an unmarked token */
            uint32_t h = tok_hash(s, t->len[i], "", 0) & t->mask;
            while (t->slot[h] >= 0)
                h = (h + 1) & t->mask;
            t->slot[h] = i;
        }
    return 0;
}

/* ---- merges (byte-level BPE): (a, b) to rank and id -------------------- */

static uint32_t tok_pair_hash(int32_t a, int32_t b)
{
    uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) * UINT64_C(0x9E3779B97F4A7C15);
    return (uint32_t)(k >> 32);
}

const rt_tok_merge *rt_tok_merge_find(const rt_tok *t, int32_t a, int32_t b)
{
    if (!t->merge)
        return NULL;
    for (uint32_t h = tok_pair_hash(a, b) & t->mmask;; h = (h + 1) & t->mmask) {
        const rt_tok_merge *m = &t->merge[h];
        if (m->a < 0)
            return NULL;
        if (m->a == a && m->b == b)
            return m;
    }
}

int rt_tok_set_merges(rt_tok *t, const rt_tok_merge *list, int n, int dup[2])
{
    uint32_t size = tok_slots(n);
    free(t->merge);
    if (!(t->merge = malloc(sizeof *t->merge * size)))
        return -1;
    for (uint32_t i = 0; i < size; i++)
        t->merge[i].a = -1;
    t->mmask = size - 1;
    for (int i = 0; i < n; i++) {
        const rt_tok_merge *was = rt_tok_merge_find(t, list[i].a, list[i].b);
        if (was) {
            dup[0] = was->rank, dup[1] = i;
            return 1;
        }
        uint32_t h = tok_pair_hash(list[i].a, list[i].b) & t->mmask;
        while (t->merge[h].a >= 0)
            h = (h + 1) & t->mmask;
        t->merge[h] = list[i];
        t->merge[h].rank = i;
    }
    return 0;
}

/* ---- llama2.c's tokenizer.bin -------------------------------------------- */

static uint32_t tok_u32(const unsigned char *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float tok_f32(const unsigned char *p)
{
    uint32_t u = tok_u32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Walks the tokens after the header: checks each one, and counts them
 * and their bytes. */
static int tok_bin_walk(const char *path, const unsigned char *d, size_t size, int *n,
                        size_t *bytes, rt_err *e)
{
    int32_t maxlen = (int32_t)tok_u32(d);
    if (maxlen < 1)
        return rt_errf(e, RT_EINVAL, "%s: max_token_length %d is not positive", path, maxlen);
    *n = 0, *bytes = 0;
    for (size_t at = 4; at < size; (*n)++) {
        uint32_t len = size - at >= 8 ? tok_u32(d + at + 4) : 0;
        if (size - at < 8 || (len <= (uint32_t)maxlen && size - at - 8 < len))
            return rt_errf(e, RT_EINVAL, "%s: token %d (byte %zu): the file ends inside it",
                           path, *n, at);
        if (len < 1 || len > (uint32_t)maxlen)
            return rt_errf(e, RT_EINVAL, "%s: token %d (byte %zu): length %u is not in [1, %d] "
                           "(max_token_length)", path, *n, at, len, maxlen);
        if (!isfinite(tok_f32(d + at)))
            return rt_errf(e, RT_EINVAL, "%s: token %d (byte %zu): its score is not a finite "
                           "number", path, *n, at);
        if (memchr(d + at + 8, 0, len))
            return rt_errf(e, RT_EINVAL, "%s: token %d (byte %zu): holds a NUL byte", path, *n,
                           at);
        at += 8 + len;
        *bytes += len + 1;
    }
    return 0;
}

/* Ids 3 + b are the byte tokens <0xBB>, which the byte fallback uses. */
static int tok_bin_bytes(const rt_tok *t, const char *path, rt_err *e)
{
    if (t->n < TOK_BIN_BYTES + 256)
        return rt_errf(e, RT_EINVAL, "%s: %d tokens; llama2.c's tokenizer has at least 259: "
                       "<unk>, <s>, </s> and 256 byte tokens", path, t->n);
    for (int b = 0; b < 256; b++) {
        int id = TOK_BIN_BYTES + b;
        char want[8];
        snprintf(want, sizeof want, "<0x%02X>", b);
        if (t->len[id] != 6 || memcmp(t->bytes + t->off[id], want, 6))
            return rt_errf(e, RT_EINVAL, "%s: token %d is '%.40s', not the byte token %s (the "
                           "byte fallback needs <0x00>..<0xFF> at ids 3..258)", path, id,
                           t->bytes + t->off[id], want);
    }
    return 0;
}

static int tok_read_bin(rt_tok *t, const char *path, const unsigned char *d, size_t size,
                        rt_err *e)
{
    int n = 0, dup[2];
    size_t bytes = 0;
    if (size < 4)
        return rt_errf(e, RT_EINVAL, "%s: %zu bytes: neither a tokenizer.json nor llama2.c's "
                       "tokenizer.bin", path, size);
    int rc = tok_bin_walk(path, d, size, &n, &bytes, e);
    if (rc)
        return rc;
    t->format = RT_TOK_LLAMA2C;
    t->n = n;
    t->bytes = malloc(bytes + 1);
    t->off = malloc(sizeof *t->off * (size_t)(n + 1));
    t->len = malloc(sizeof *t->len * (size_t)(n + 1));
    t->score = malloc(sizeof *t->score * (size_t)(n + 1));
    if (!t->bytes || !t->off || !t->len || !t->score)
        return rt_errf(e, RT_EINTERNAL, "%s: out of memory", path);
    size_t at = 4, o = 0;
    for (int i = 0; i < n; i++) {
        t->score[i] = tok_f32(d + at);
        t->len[i] = tok_u32(d + at + 4);
        t->off[i] = (uint32_t)o;
        memcpy(t->bytes + o, d + at + 8, t->len[i]);
        t->bytes[o + t->len[i]] = 0;
        o += t->len[i] + 1;
        at += 8 + t->len[i];
        if (t->len[i] > t->maxlen)
            t->maxlen = t->len[i];
    }
    rc = tok_bin_bytes(t, path, e);
    if (!rc && (rc = rt_tok_index(t, NULL, dup)) != 0)
        return rc < 0 ? rt_errf(e, RT_EINTERNAL, "%s: out of memory", path)
                      : rt_errf(e, RT_EINVAL, "%s: token %d '%.40s' repeats token %d", path,
                                dup[1], t->bytes + t->off[dup[1]], dup[0]);
    t->bos = TOK_BIN_BOS;
    t->eos = t->ends[t->nends++] = TOK_BIN_EOS;
    return rc;
}

/* Appends the token of text unit s[0, u), or its bytes' byte tokens. */
static int tok_bin_unit(const rt_tok *t, const char *s, size_t u, int32_t *ids, int k)
{
    int id = rt_tok_lookup(t, s, u, "", 0);
    if (id >= 0)
        ids[k++] = id;
    else
        for (size_t i = 0; i < u; i++)
            ids[k++] = TOK_BIN_BYTES + (unsigned char)s[i];
    return k;
}

/* The token that ids[i] and ids[i + 1] make when their texts are put
 * together, or -1. */
static int tok_bin_pair(const rt_tok *t, const int32_t *ids, int i)
{
    int a = ids[i], b = ids[i + 1];
    return rt_tok_lookup(t, t->bytes + t->off[a], t->len[a], t->bytes + t->off[b], t->len[b]);
}

/* run.c's merges: pair[i] caches ids[i] + ids[i + 1]'s token. */
static void tok_bin_merge(const rt_tok *t, int32_t *ids, int *n, int32_t *pair)
{
    for (int i = 0; i + 1 < *n; i++)
        pair[i] = tok_bin_pair(t, ids, i);
    for (;;) {
        float best = -1e10f;
        int at = -1;
        for (int i = 0; i + 1 < *n; i++)
            if (pair[i] >= 0 && t->score[pair[i]] > best)
                best = t->score[pair[i]], at = i;
        if (at < 0)
            return;
        ids[at] = pair[at];
        memmove(ids + at + 1, ids + at + 2, sizeof *ids * (size_t)(*n - at - 2));
        memmove(pair + at + 1, pair + at + 2, sizeof *pair * (size_t)(*n - at - 2));
        --*n;
        if (at > 0)
            pair[at - 1] = tok_bin_pair(t, ids, at - 1);
        if (at + 1 < *n)
            pair[at] = tok_bin_pair(t, ids, at);
    }
}

/* ids: room for strlen(text) + 2. */
static int tok_encode_bin(const rt_tok *t, const char *text, int add_bos, int32_t *ids, int *n,
                          rt_err *e)
{
    int k = 0;
    if (add_bos)
        ids[k++] = TOK_BIN_BOS;
    if (*text)
        k = tok_bin_unit(t, " ", 1, ids, k);   /* the dummy prefix */
    for (const char *s = text; *s;) {
        size_t u = 1;
        while (u < 4 && ((unsigned char)s[u] & 0xC0) == 0x80)
            u++;
        k = tok_bin_unit(t, s, u, ids, k);
        s += u;
    }
    int32_t *pair = malloc(sizeof *pair * (size_t)(k + 1));
    if (!pair)
        return rt_errf(e, RT_EINTERNAL, "out of memory encoding the text");
    tok_bin_merge(t, ids, &k, pair);
    free(pair);
    *n = k;
    return 0;
}

/* ---- the API -------------------------------------------------------------- */

/* A JSON object, not a tokenizer.bin (whose first four bytes hold a
 * small max_token_length, so a NUL). */
static int tok_is_json(const unsigned char *d, size_t size)
{
    size_t i = 0;
    while (i < size && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r'))
        i++;
    return i < size && d[i] == '{' && !memchr(d, 0, size < 4 ? size : 4);
}

static int tok_read(rt_tok *t, const char *path, const char *d, size_t size, rt_err *e)
{
    const unsigned char *u = (const unsigned char *)d;
    if (!tok_is_json(u, size))
        return tok_read_bin(t, path, u, size, e);
    size_t bad = rt_utf8_bad(u, size);
    if (bad < size)
        return rt_errf(e, RT_EINVAL, "%s: not valid UTF-8 at byte %zu", path, bad);
    return rt_tok_read_hf(t, path, d, size, e);
}

/* Whether the file at path starts with GGUF's magic (a GGUF is mapped
 * by rt_gguf_open, not read whole). */
static int tok_is_gguf(const char *path)
{
    char m[4];
    FILE *f = fopen(path, "rb");
    int yes = f && fread(m, 1, 4, f) == 4 && !memcmp(m, "GGUF", 4);
    if (f)
        fclose(f);
    return yes;
}

/* The file read whole, then tok_read. */
static int tok_read_file(rt_tok *t, const char *path, rt_err *e)
{
    char *d;
    size_t size;
    int rc = rt_read_file(path, TOK_MAX_FILE, &d, &size, e);
    if (rc)
        return rc;
    rc = tok_read(t, path, d, size, e);
    free(d);
    return rc;
}

int rt_tok_open(const char *path, rt_tok **tok, rt_err *e)
{
    *tok = NULL;
    int rc = 0;
    rt_tok *t = calloc(1, sizeof *t);
    if (!t)
        return rt_errf(e, RT_EINTERNAL, "%s: out of memory", path);
    t->bos = t->eos = t->unk = -1;
    t->add_bos = 1;
    rc = tok_is_gguf(path) ? rt_tok_read_gguf(t, path, e) : tok_read_file(t, path, e);
    if (!rc && (!(t->out = malloc(t->maxlen + sizeof t->held + 1)) ||
                !(t->piece = malloc(t->maxlen + 1))))
        rc = rt_errf(e, RT_EINTERNAL, "%s: out of memory", path);
    if (rc)
        rt_tok_close(t);
    else
        *tok = t;
    return rc;
}

void rt_tok_close(rt_tok *t)
{
    if (!t)
        return;
    free(t->bytes);
    free(t->off);
    free(t->len);
    free(t->slot);
    free(t->score);
    free(t->merge);
    free(t->added);
    free(t->strip);
    free(t->type);
    free(t->chat);
    free(t->out);
    free(t->piece);
    free(t);
}

int rt_tok_size(const rt_tok *t) { return t->n; }
int rt_tok_bos(const rt_tok *t) { return t->bos; }
int rt_tok_eos(const rt_tok *t) { return t->eos; }

int rt_tok_is_end(const rt_tok *t, int id)
{
    for (int i = 0; i < t->nends; i++)
        if (id == t->ends[i])
            return 1;
    return 0;
}

const char *rt_tok_chat_template(const rt_tok *t) { return t->chat; }

int rt_tok_find(const rt_tok *t, const char *text)
{
    return rt_tok_lookup(t, text, strlen(text), "", 0);
}

int rt_tok_encode(const rt_tok *t, const char *text, int add_bos, int32_t *ids, int cap, int *n,
                  rt_err *e)
{
    size_t len = strlen(text), per = t->space != RT_TOK_BYTES ? 6 : 1;
    *n = 0;
    /* every token holds at most maxlen bytes of the text (but a run of
     * unk): a text that cannot fit is refused before the quadratic merges */
    if (cap < 0 || (t->unk < 0 && len / t->maxlen > (size_t)cap))
        return rt_errf(e, RT_EINVAL, "the text (%zu bytes) is more than %d tokens", len, cap);
    int32_t *v = len < ((size_t)INT32_MAX - 2) / per ? malloc(sizeof *v * (per * len + 2)) : NULL;
    if (!v)
        return rt_errf(e, RT_EINTERNAL, "out of memory encoding the text");
    int bos = add_bos && t->add_bos, k = 0;
    int rc = t->format == RT_TOK_LLAMA2C ? tok_encode_bin(t, text, bos, v, &k, e)
                                         : rt_tok_encode_bpe(t, text, bos, v, &k, e);
    if (!rc && add_bos && t->add_eos)
        v[k++] = t->eos;
    if (!rc && k > cap)
        rc = rt_errf(e, RT_EINVAL, "the text is %d tokens, more than %d", k, cap);
    if (!rc) {
        memcpy(ids, v, sizeof *v * (size_t)k);
        *n = k;
    }
    free(v);
    return rc;
}

/* ---- decoding ------------------------------------------------------------- */

/* The held bytes and p[0, np) into t->out, less NULs; an incomplete
 * UTF-8 character at the end (a lead byte with fewer continuation bytes
 * after it than it announces) is held back. */
static const char *tok_stream(rt_tok *t, const char *p, size_t np)
{
    size_t k = (size_t)t->nheld;
    memcpy(t->out, t->held, k);
    for (size_t i = 0; i < np; i++)
        if (p[i])
            t->out[k++] = p[i];
    size_t q = k;
    while (q > 0 && k - q < 3 && ((unsigned char)t->out[q - 1] & 0xC0) == 0x80)
        q--;
    unsigned c = q > 0 ? (unsigned char)t->out[q - 1] : 0;
    size_t want = c >= 0xF0 && c <= 0xF4   ? 4
                  : c >= 0xE0 && c <= 0xEF ? 3
                  : c >= 0xC2 && c <= 0xDF ? 2
                                           : 0;
    t->nheld = 0;
    if (want > k - (q - 1)) {
        t->nheld = (int)(k - (q - 1));
        memcpy(t->held, t->out + q - 1, (size_t)t->nheld);
        k = q - 1;
    }
    t->out[k] = 0;
    return t->out;
}

const char *rt_tok_decode_piece(rt_tok *t, int prev_id, int id)
{
    if (id < 0 || id >= t->n)
        return tok_stream(t, "", 0);
    const char *p = t->bytes + t->off[id];
    size_t np = t->len[id];
    char byte;
    if (t->format == RT_TOK_GGUF) {
        np = rt_tok_gguf_decode(t, prev_id, id);
        p = t->piece;
    } else if (t->format == RT_TOK_LLAMA2C && id >= TOK_BIN_BYTES && id < TOK_BIN_BYTES + 256) {
        byte = (char)(id - TOK_BIN_BYTES);
        p = &byte, np = 1;
    } else if (t->format == RT_TOK_LLAMA2C && prev_id == TOK_BIN_BOS && p[0] == ' ') {
        p++, np--;
    } else if (t->space != RT_TOK_BYTES) {
        np = rt_tok_sp_decode(t, prev_id, id);
        p = t->piece;
    }
    return tok_stream(t, p, np);
}

const char *rt_tok_decode_flush(rt_tok *t)
{
    memcpy(t->out, t->held, (size_t)t->nheld);
    t->out[t->nheld] = 0;
    t->nheld = 0;
    return t->out;
}
