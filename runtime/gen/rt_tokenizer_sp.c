/* runtime/gen/rt_tokenizer_sp.c: a tokenizer.json of SentencePiece-style BPE,
 * as Llama 2, TinyLlama, Mistral and Mixtral ship: spaces are U+2581
 * ("_" below), tokens are characters' UTF-8 (not ByteLevel's alphabet),
 * and a character with no token falls back to its bytes' tokens
 * <0x00>..<0xFF>. rt_tokenizer_hf.c reads the file and hands the parts
 * around the model here; rt_tokenizer_vocab.c reads the model.
 *
 * Contract (kiln_rt.h; every key known, a value kiln cannot honour
 * refused by name):
 *   normalizer: Sequence of Prepend "_" and Replace " " by "_" (Llama 2's),
 *       or Replace " " by "_" alone (Gemma's), with pre_tokenizer null or a
 *       Split by the String " " (which finds no space left: nothing), or
 *       null with
 *   pre_tokenizer: Metaspace { replacement: "_", prepend_scheme: always,
 *       first or never (or the older add_prefix_space), split, str_rep }
 *   decoder: Metaspace, or a Sequence of Replace "_" by " ", ByteFallback,
 *       Metaspace, Fuse and Strip " " (start 0 or 1, stop 0), each at most
 *       once, Fuse after the others but Strip, which must follow it, and
 *       Replace and Metaspace before ByteFallback
 * Encoding, as Hugging Face's tokenizers does: added tokens are taken out
 * first (rt_tokenizer_bpe.c); in each stretch of text between them
 * spaces become "_" and one "_" goes first (the normalizer: whenever the
 * stretch is not empty; Metaspace: unless it starts with "_", and with
 * "first" only in the stretch at the text's start); Metaspace's split
 * starts a piece at each "_". A piece's characters become their tokens,
 * or their bytes' tokens (byte_fallback, when all are tokens), or unk
 * (a run of them one unk with fuse_unk); then merges by rank.
 * What differs: where a character takes unk and a later one in the same
 * piece its bytes' tokens, HF puts the bytes first; kiln keeps the text's
 * order. Decoding as the decoder says: "_" a space (Replace; dropped in
 * the first token with Metaspace), a byte token its byte (ByteFallback),
 * one space dropped at the start (Strip). "First" is after BOS or at the
 * start, as HF decodes with skip_special_tokens. Bytes that make no
 * character pass through as they are, where HF prints U+FFFD. */
#include "runtime/gen/rt_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SP_META "\xE2\x96\x81"     /* U+2581, in UTF-8 */

/* The string at `at` (absent: bad) is exactly want. */
static int sp_is(const rt_json *J, const unsigned char *at, const char *where, const char *key,
                 const char *want)
{
    char *s = NULL;
    int rc = at ? rt_json_string_at(J, at, &s) : rt_json_bad(J, where, "no %s", key);
    if (!rc && strcmp(s, want))
        rc = rt_json_bad(J, where, "%s: '%.40s' is not supported (kiln takes '%s')", key, s,
                         want);
    free(s);
    return rc;
}

/* Replace = { type, pattern: { String: from }, content: to } */
static int sp_replace(const rt_json *J, const unsigned char *at, const char *where,
                      const char *from, const char *to)
{
    static const char *const keys[] = {"type", "pattern", "content"};
    static const char *const pkeys[] = {"String", "Regex"};
    const unsigned char *val[3], *pat[2] = {NULL, NULL};
    char pw[96];
    snprintf(pw, sizeof pw, "%s.pattern", where);
    int rc = rt_json_object_at(J, at, where, keys, 3, val);
    if (!rc)
        rc = val[1] ? rt_json_object_at(J, val[1], pw, pkeys, 2, pat)
                    : rt_json_bad(J, where, "no pattern");
    if (!rc && !pat[0])
        rc = rt_json_bad(J, pw, "not a String (kiln replaces '%s' by '%s')", from, to);
    if (!rc)
        rc = sp_is(J, pat[0], pw, "String", from);
    if (!rc)
        rc = sp_is(J, val[2], where, "content", to);
    return rc;
}

int rt_tok_sp_normalizer(rt_tok *t, const rt_json *J, const unsigned char *at)
{
    static const char *const keys[] = {"type", "normalizers"};
    char *top = NULL;
    int gemma = !rt_json_type_at(J, at, "normalizer", &top) && !strcmp(top, "Replace");
    free(top);
    if (gemma) {                            /* Gemma's: spaces made "_", none first */
        t->space = RT_TOK_SP_NEVER;
        return sp_replace(J, at, "normalizer", " ", SP_META);
    }
    static const char *const pkeys[] = {"type", "prepend"};
    const char *w = "normalizer.normalizers";
    const unsigned char *val[2], *item[2];
    char *type[2] = {NULL, NULL};
    int n = 0, rc = rt_json_object_at(J, at, "normalizer", keys, 2, val);
    if (!rc)
        rc = rt_json_items(J, val[1], w, 2, item, &n);
    if (!rc && n == 2)
        rc = rt_json_types(J, item, 2, w, type);
    if (!rc && (n != 2 || strcmp(type[0], "Prepend") || strcmp(type[1], "Replace")))
        rc = rt_json_bad(J, w, "kiln takes a Prepend of '" SP_META "', then a Replace of ' ' by '"
                         SP_META "' (Llama 2's)");
    if (!rc)
        rc = rt_json_object_at(J, item[0], "normalizer.normalizers[0]", pkeys, 2, val);
    if (!rc)
        rc = sp_is(J, val[1], "normalizer.normalizers[0]", "prepend", SP_META);
    if (!rc)
        rc = sp_replace(J, item[1], "normalizer.normalizers[1]", " ", SP_META);
    t->space = RT_TOK_SP_PREPEND;
    free(type[0]);
    free(type[1]);
    return rc;
}

/* Metaspace = { type, replacement: "_", prepend_scheme, add_prefix_space,
 * split, str_rep }: its scheme (RT_TOK_SP_*; absent: add_prefix_space,
 * itself true when absent) and split (true when absent). */
static int sp_metaspace(const rt_json *J, const unsigned char *at, const char *where,
                        int *scheme, int *split)
{
    static const char *const keys[] = {"type", "replacement", "prepend_scheme",
                                       "add_prefix_space", "split", "str_rep"};
    static const char *const schemes[] = {"always", "first", "never"};
    const unsigned char *val[6];
    char *s = NULL;
    int prefix = 1, rc = rt_json_object_at(J, at, where, keys, 6, val);
    *split = 1;
    if (!rc)
        rc = sp_is(J, val[1], where, "replacement", SP_META);
    if (!rc && val[5])
        rc = sp_is(J, val[5], where, "str_rep", SP_META);
    if (!rc)
        rc = rt_json_bool_at(J, val[3], where, "add_prefix_space", &prefix);
    if (!rc)
        rc = rt_json_bool_at(J, val[4], where, "split", split);
    *scheme = prefix ? RT_TOK_SP_ALWAYS : RT_TOK_SP_NEVER;
    if (!rc && val[2] && !(rc = rt_json_string_at(J, val[2], &s))) {
        *scheme = -1;
        for (int i = 0; i < 3; i++)
            if (!strcmp(s, schemes[i]))
                *scheme = RT_TOK_SP_ALWAYS + i;
        if (*scheme < 0)
            rc = rt_json_bad(J, where, "prepend_scheme: '%.40s' is not always, first or never",
                             s);
    }
    free(s);
    return rc;
}

int rt_tok_sp_pre(rt_tok *t, const rt_json *J, const unsigned char *at)
{
    return sp_metaspace(J, at, "pre_tokenizer", &t->space, &t->sp_split);
}

int rt_tok_sp_split(const rt_json *J, const unsigned char *at)
{
    static const char *const keys[] = {"type", "pattern", "behavior", "invert"};
    static const char *const pkeys[] = {"String", "Regex"};
    static const char *const behaviors[] = {"Removed", "Isolated", "MergedWithPrevious",
                                            "MergedWithNext", "Contiguous"};
    const char *w = "pre_tokenizer";
    const unsigned char *val[4], *pat[2] = {NULL, NULL};
    char *b = NULL;
    int rc = rt_json_object_at(J, at, w, keys, 4, val), known = 0;
    if (!rc)
        rc = val[1] ? rt_json_object_at(J, val[1], "pre_tokenizer.pattern", pkeys, 2, pat)
                    : rt_json_bad(J, w, "no pattern");
    if (!rc && !pat[0])
        rc = rt_json_bad(J, "pre_tokenizer.pattern", "not the String \" \" (the normalizer "
                         "took the spaces: kiln takes only that split, which does nothing)");
    if (!rc)
        rc = sp_is(J, pat[0], "pre_tokenizer.pattern", "String", " ");
    if (!rc)
        rc = val[2] ? rt_json_string_at(J, val[2], &b) : rt_json_bad(J, w, "no behavior");
    for (int i = 0; !rc && i < 5; i++)
        known |= !strcmp(b, behaviors[i]);
    if (!rc && !known)
        rc = rt_json_bad(J, w, "behavior: '%.40s' is not one of tokenizers'", b);
    if (!rc)
        rc = rt_json_false_at(J, val[3], w, "invert");
    free(b);
    return rc;
}

/* One decoder of a Sequence (or the decoder itself, where "decoder"):
 * its flag into t->dec, after Fuse when *fused. */
static int sp_decoder_one(rt_tok *t, const rt_json *J, const unsigned char *at,
                          const char *where, const char *type, int *fused)
{
    static const char *const tkeys[] = {"type"};
    static const char *const skeys[] = {"type", "content", "start", "stop"};
    const unsigned char *val[4];
    int rc = 0, flag = 0, scheme, split;
    if (!strcmp(type, "Replace")) {
        rc = sp_replace(J, at, where, SP_META, " ");
        flag = RT_TOK_DEC_SPACE;
    } else if (!strcmp(type, "ByteFallback") || !strcmp(type, "Fuse")) {
        rc = rt_json_object_at(J, at, where, tkeys, 1, val);
        flag = type[0] == 'B' ? RT_TOK_DEC_BYTES : 0;
    } else if (!strcmp(type, "Metaspace")) {
        rc = sp_metaspace(J, at, where, &scheme, &split);
        flag = RT_TOK_DEC_SPACE | (scheme != RT_TOK_SP_NEVER ? RT_TOK_DEC_FIRST : 0);
    } else if (!strcmp(type, "Strip")) {
        int64_t start = -1, stop = -1;
        rc = rt_json_object_at(J, at, where, skeys, 4, val);
        if (!rc)
            rc = sp_is(J, val[1], where, "content", " ");
        rt_json a = rt_json_at(J, val[2]), b = rt_json_at(J, val[3]);
        if (!rc && (!val[2] || !val[3]))
            rc = rt_json_bad(J, where, "needs a start and a stop");
        if (!rc)
            rc = rt_json_uint(&a, "start", &start);
        if (!rc)
            rc = rt_json_uint(&b, "stop", &stop);
        if (!rc && (start > 1 || stop))
            rc = rt_json_bad(J, where, "start %lld, stop %lld: kiln strips at most one space "
                             "at the start", (long long)start, (long long)stop);
        if (!rc && !*fused)
            rc = rt_json_bad(J, where, "a Strip before Fuse strips every token: not supported");
        flag = start ? RT_TOK_DEC_STRIP : 0;
    } else {
        rc = rt_json_bad(J, where, "type '%.40s' is not supported (kiln takes Replace, "
                         "ByteFallback, Metaspace, Fuse and Strip)", type);
    }
    if (!rc && *fused && strcmp(type, "Strip"))
        rc = rt_json_bad(J, where, "a %s after Fuse is not supported", type);
    if (!rc && (flag & RT_TOK_DEC_SPACE) && (t->dec & RT_TOK_DEC_BYTES))
        rc = rt_json_bad(J, where, "a %s after ByteFallback is not supported (kiln puts spaces "
                         "in the tokens' text, not in their bytes)", type);
    *fused |= !strcmp(type, "Fuse");
    t->dec |= flag;
    return rc;
}

int rt_tok_sp_decoder(rt_tok *t, const rt_json *J, const unsigned char *at)
{
    static const char *const keys[] = {"type", "decoders"};
    enum { SP_MAX_DECODERS = 5 };
    const char *w = "decoder.decoders";
    const unsigned char *val[2], *item[SP_MAX_DECODERS];
    char *type[SP_MAX_DECODERS] = {NULL}, *top = NULL, where[48];
    int n = 0, fused = 0, rc = rt_json_type_at(J, at, "decoder", &top);
    if (!rc && !strcmp(top, "Metaspace")) {
        rc = sp_decoder_one(t, J, at, "decoder", top, &fused);
        free(top);
        return rc;
    }
    if (!rc && strcmp(top, "Sequence"))
        rc = rt_json_bad(J, "decoder", "type '%.40s' is not supported (kiln takes Metaspace, or "
                         "a Sequence as Llama 2's)", top);
    if (!rc)
        rc = rt_json_object_at(J, at, "decoder", keys, 2, val);
    if (!rc)
        rc = rt_json_items(J, val[1], w, SP_MAX_DECODERS, item, &n);
    if (!rc && n > SP_MAX_DECODERS)
        rc = rt_json_bad(J, w, "%d decoders: kiln takes each of five at most once", n);
    if (!rc)
        rc = rt_json_types(J, item, n, w, type);
    for (int i = 0; !rc && i < n; i++)
        for (int j = 0; !rc && j < i; j++)
            if (!strcmp(type[i], type[j]))
                rc = rt_json_bad(J, w, "%.40s given twice", type[i]);
    for (int i = 0; !rc && i < n; i++) {
        snprintf(where, sizeof where, "%s[%d]", w, i);
        rc = sp_decoder_one(t, J, item[i], where, type[i], &fused);
    }
    for (int i = 0; i < n && i < SP_MAX_DECODERS; i++)
        free(type[i]);
    free(top);
    return rc;
}

/* ---- encoding ------------------------------------------------------------ */

/* The tokens of piece w[0, m) appended at ids[*k]: each character's token,
 * else its bytes', else unk; then merged. */
static int sp_piece(const rt_tok *t, const char *w, size_t m, int32_t *ids, int *k,
                    const rt_tok_merge **pair, rt_err *e)
{
    int id = t->ignore_merges ? rt_tok_lookup(t, w, m, "", 0) : -1, k0 = *k, unk_run = 0;
    if (id >= 0) {
        ids[(*k)++] = id;
        return 0;
    }
    for (size_t i = 0, u; i < m; i += u) {
        unsigned char c = (unsigned char)w[i];
        u = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        id = rt_tok_lookup(t, w + i, u, "", 0);
        int bytes = id < 0 && t->byte_fallback;
        for (size_t j = 0; bytes && j < u; j++)
            bytes = t->byte_id[(unsigned char)w[i + j]] >= 0;
        if (id >= 0)
            ids[(*k)++] = id;
        for (size_t j = 0; bytes && j < u; j++)
            ids[(*k)++] = t->byte_id[(unsigned char)w[i + j]];
        if (id < 0 && !bytes && t->unk < 0)
            return rt_errf(e, RT_EINVAL, "the text's character '%.*s' has no token, and the "
                           "tokenizer no byte fallback or unk_token for it", (int)u, w + i);
        if (id < 0 && !bytes && !(t->fuse_unk && unk_run))
            ids[(*k)++] = t->unk;
        unk_run = id < 0 && !bytes;
    }
    *k = k0 + rt_tok_merge_ids(t, ids + k0, *k - k0, pair);
    return 0;
}

int rt_tok_sp_encode(const rt_tok *t, const char *s, size_t n, int at_start, int32_t *ids, int *k,
                     char *norm, const rt_tok_merge **pair, rt_err *e)
{
    size_t m = 0;
    if (!n)                                 /* nothing, not even "_" */
        return 0;
    int lead = s[0] == ' ' || (n >= 3 && !memcmp(s, SP_META, 3));
    int first = t->space == RT_TOK_SP_PREPEND ? 1
                : t->space == RT_TOK_SP_ALWAYS ? !lead
                : t->space == RT_TOK_SP_FIRST  ? !lead && at_start
                                               : 0;
    if (first)
        memcpy(norm, SP_META, 3), m = 3;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ' ')
            memcpy(norm + m, SP_META, 3), m += 3;
        else
            norm[m++] = s[i];
    int rc = 0;
    for (size_t i = 0, end; !rc && i < m; i = end) {
        end = t->sp_split ? i + 1 : m;      /* a piece starts at each "_" */
        while (end < m && !(end + 3 <= m && !memcmp(norm + end, SP_META, 3)))
            end++;
        rc = t->format == RT_TOK_GGUF ? rt_tok_spm_piece(t, norm + i, end - i, ids, k, e)
                                      : sp_piece(t, norm + i, end - i, ids, k, pair, e);
    }
    return rc;
}

/* ---- decoding ------------------------------------------------------------ */

/* The byte of a byte token's text "<0xBB>" (either case), or -1. */
static int sp_byte(const char *p, size_t n)
{
    unsigned v = 0;
    if (n != 6 || memcmp(p, "<0x", 3) || p[5] != '>')
        return -1;
    for (int i = 3; i < 5; i++) {
        char c = p[i];
        int lower = c | 32;
        int d = c >= '0' && c <= '9'             ? c - '0'
                : lower >= 'a' && lower <= 'f' ? lower - 'a' + 10
                                               : -1;
        if (d < 0)
            return -1;
        v = v * 16 + (unsigned)d;
    }
    return (int)v;
}

size_t rt_tok_sp_decode(rt_tok *t, int prev_id, int id)
{
    const char *p = t->bytes + t->off[id];
    size_t n = t->len[id], k = 0;
    int first = prev_id < 0 || prev_id == t->bos, b = sp_byte(p, n);
    if ((t->dec & RT_TOK_DEC_BYTES) && b >= 0) {
        t->piece[k++] = (char)b;
    } else {
        for (size_t i = 0; i < n; i++)
            if (i + 3 <= n && !memcmp(p + i, SP_META, 3) && (t->dec & RT_TOK_DEC_SPACE)) {
                if (!(first && (t->dec & RT_TOK_DEC_FIRST)))
                    t->piece[k++] = ' ';
                i += 2;
            } else {
                t->piece[k++] = p[i];
            }
    }
    if (first && (t->dec & RT_TOK_DEC_STRIP) && k && t->piece[0] == ' ')
        memmove(t->piece, t->piece + 1, --k);
    t->piece[k] = 0;
    return k;
}
