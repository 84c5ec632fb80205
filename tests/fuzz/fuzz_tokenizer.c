/* tests/fuzz/fuzz_tokenizer.c: the tokenizer readers (llama2.c's
 * tokenizer.bin, Hugging Face's BPE tokenizer.json, byte-level or
 * SentencePiece-style, and a GGUF's metadata, llama or gpt2).
 *
 * Input: a tokenizer file. rt_tok_open must refuse it with one line, or
 * accept it; then a few texts (fixed ones, one cut from the input, one
 * made of the tokenizer's own tokens) are encoded, with and without BOS,
 * and their ids decoded back. What must hold (rt_gen.h):
 *   - every id is in [0, size), at most strlen(text) + 2 of them (6 *
 *     strlen(text) + 2 SentencePiece-style), BOS first when asked and
 *     the tokenizer puts one there, a GGUF's EOS last when it adds one; a
 *     cap one short of the count is refused;
 *   - a tokenizer.json or GGUF refuses a text that is not valid UTF-8,
 *     and a valid one only when SentencePiece-style or a GGUF, for a
 *     character or byte with no token, byte fallback or unk; a
 *     tokenizer.bin takes any text;
 *   - decode(encode(text)) == text (pieces after BOS, then the flush).
 *     A byte-level tokenizer.json has a token for every byte and its
 *     merges join bytes, so this always holds; a byte-level GGUF when no
 *     id is of a type that decodes as nothing (unused, undefined). A
 *     tokenizer.bin puts the dummy prefix
 *     " " first, which decoding drops after BOS when " " is a token
 *     (else it is the byte token <0x20>, always printed): the text comes
 *     back with a space first where it is not dropped. This holds under
 *     two conditions that real tokenizer.bins (llama2.c's) meet, and the
 *     harness checks it only then: (1) BOS is only first: after BOS a
 *     leading space is dropped, as run.c does; (2) merges join tokens'
 *     texts, where a byte token is "<0xBB>" but decodes as its byte: so
 *     no token but the byte tokens may hold "<0x" (a token "<0x41>b"
 *     made from <0x41> and "b" decodes as those six bytes and "b"), and
 *     no two tokens may make a byte token ("<" and "0x41>" merge into
 *     <0x41>, which decodes as "A");
 *   - SentencePiece-style, decode(encode(text)) is the text with its
 *     spaces and U+2581 as the decoder prints U+2581, after the U+2581
 *     the normalizer or Metaspace put first, less one space first when
 *     the decoder strips it. Checked where the text is one stretch (no
 *     added token's text in it), holds no "<0x" (a byte token's look),
 *     encodes without unk and without BOS after the first id, U+2581 is
 *     a token (its bytes' tokens decode as U+2581, not as the decoder
 *     prints U+2581), and the decoder turns byte tokens into bytes but is
 *     not a Metaspace (which drops U+2581 in the first token, wherever
 *     that ends); a GGUF's (which turns byte tokens into bytes by their
 *     type) where every id is a normal or byte token;
 *   - every token decodes without trouble, and rt_tok_find finds each
 *     token whose text has no NUL (a GGUF's special token may give way to
 *     a byte-level token of the same bytes); a GGUF's chat template is a
 *     string or NULL. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/gen/rt_tok.h"

#define MAX_TEXT 512

typedef struct {
    char *s;
    size_t n, cap;
} Str;

static void str_put(Str *b, const char *p, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1);
        b->s = realloc(b->s, b->cap);
        FUZZ_CHECK(b->s != NULL);
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void check_err(const rt_err *e, int rc)
{
    FUZZ_CHECK(rc == e->code && (rc == RT_EINVAL || rc == RT_EINTERNAL || rc == RT_EIO));
    FUZZ_CHECK(e->msg[0] && !strchr(e->msg, '\n'));
}

static const char *const texts[] = {
    "",
    "hello",
    "Hello world's 123 12345",
    "  two  spaces  \t tab ",
    "line\nnext\n\n\r\nend\n",
    "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80! \xC5\xBF IT'S it'll",
    "\x01\x7F \xC2\xA0\xE2\x80\x83 nbsp",
    "hi<|endoftext|>there<|bos|><|end_of_text|>\n<s>\n",
    "<0x41><0x20>",
    /* not valid UTF-8: a lone continuation byte, a cut character, an
     * overlong one, a surrogate */
    "a\x80z \xE6\x97 \xC0\xAF \xED\xA0\x80 \xFF",
};

/* Whether s[0, n) holds "<0x". */
static int has_byte_text(const char *s, size_t n)
{
    for (size_t i = 0; i + 3 <= n; i++)
        if (!memcmp(s + i, "<0x", 3))
            return 1;
    return 0;
}

/* Whether a tokenizer.bin meets condition (2) of the round trip. */
static int bin_round_trips(const rt_tok *t)
{
    for (int i = 0; i < t->n; i++)
        if ((i < 3 || i >= 3 + 256) && has_byte_text(t->bytes + t->off[i], t->len[i]))
            return 0;
    /* two tokens that make a byte token's text ("<" and "0x41>") */
    for (int b = 0; b < 256; b++) {
        const char *s = t->bytes + t->off[3 + b];
        for (size_t k = 1; k < 6; k++)
            if (rt_tok_lookup(t, s, k, "", 0) >= 0 && rt_tok_lookup(t, s + k, 6 - k, "", 0) >= 0)
                return 0;
    }
    return 1;
}

/* ids[0, n) decoded piece by piece, as generation prints them. */
static char *decode_all(rt_tok *t, const int32_t *ids, int n, int from)
{
    Str b = {0};
    str_put(&b, "", 0);
    for (int i = from; i < n; i++) {
        const char *p = rt_tok_decode_piece(t, i ? ids[i - 1] : -1, ids[i]);
        str_put(&b, p, strlen(p));
    }
    const char *p = rt_tok_decode_flush(t);
    str_put(&b, p, strlen(p));
    return b.s;
}

/* Whether ids[0, n) decode as their text: with a GGUF, none is of a type
 * that decodes as nothing, and SentencePiece-style each is a byte token
 * or a normal one that does not look like one (the byte fallback takes
 * <0xBB> whatever its type, as llama.cpp, and a normal one decodes as
 * its text). */
static int gguf_plain(const rt_tok *t, const int32_t *ids, int n)
{
    for (int i = 0; t->format == RT_TOK_GGUF && i < n; i++) {
        int ty = t->type[ids[i]], sp = t->space != RT_TOK_BYTES;
        if (ty == RT_TOK_T_UNUSED || ty == RT_TOK_T_UNDEFINED ||
            (sp && ty != RT_TOK_T_NORMAL && ty != RT_TOK_T_BYTE) ||
            (sp && ty == RT_TOK_T_NORMAL &&
             has_byte_text(t->bytes + t->off[ids[i]], t->len[ids[i]])))
            return 0;
    }
    return 1;
}

/* What a SentencePiece-style tokenizer decodes text's ids to (the
 * harness's comment), malloc'd; NULL where that is not checked. */
static char *sp_expect(const rt_tok *t, const char *text)
{
    static const char meta[] = "\xE2\x96\x81";
    if ((!(t->dec & RT_TOK_DEC_BYTES) && t->format != RT_TOK_GGUF) ||
        (t->dec & RT_TOK_DEC_FIRST) || strstr(text, "<0x") || rt_tok_find(t, meta) < 0)
        return NULL;
    for (int a = 0; a < t->nadded; a++)
        if (strstr(text, t->bytes + t->off[t->added[a]]))
            return NULL;
    int lead = text[0] == ' ' || !strncmp(text, meta, 3);
    int scheme = t->space == RT_TOK_SP_ALWAYS || t->space == RT_TOK_SP_FIRST;
    int first = text[0] && (t->space == RT_TOK_SP_PREPEND || (scheme && !lead));
    const char *space = t->dec & RT_TOK_DEC_SPACE ? " " : meta;
    Str b = {0};
    str_put(&b, "", 0);
    if (first)
        str_put(&b, space, strlen(space));
    for (const char *p = text; *p; p++)
        if (*p == ' ' || !strncmp(p, meta, 3))
            str_put(&b, space, strlen(space)), p += *p == ' ' ? 0 : 2;
        else
            str_put(&b, p, 1);
    if ((t->dec & RT_TOK_DEC_STRIP) && b.s[0] == ' ')
        memmove(b.s, b.s + 1, b.n--);
    return b.s;
}

static void check_text(rt_tok *t, const char *text, int add_bos, int clean_bin)
{
    size_t len = strlen(text), most = t->space != RT_TOK_BYTES ? 6 * len + 2 : len + 2;
    int32_t *ids = malloc(sizeof *ids * (most + 1));
    FUZZ_CHECK(ids != NULL);
    int n = -1;
    rt_err e = {0, ""};
    int rc = rt_tok_encode(t, text, add_bos, ids, (int)most, &n, &e);
    int valid = rt_utf8_bad((const unsigned char *)text, len) == len;
    if (rc) {
        check_err(&e, rc);
        FUZZ_CHECK(n == 0 && rc == RT_EINVAL && t->format != RT_TOK_LLAMA2C);
        FUZZ_CHECK(!valid || ((t->space != RT_TOK_BYTES || t->format == RT_TOK_GGUF) &&
                              t->unk < 0 && strstr(e.msg, "no token")));
        free(ids);
        return;
    }
    FUZZ_CHECK(t->format == RT_TOK_LLAMA2C || valid);
    FUZZ_CHECK(n >= 0 && (size_t)n <= most);
    int bos = add_bos && t->add_bos && rt_tok_bos(t) >= 0, eos = add_bos && t->add_eos;
    int bos_later = 0, unk = 0;
    FUZZ_CHECK(!bos || (n > 0 && ids[0] == rt_tok_bos(t)));
    FUZZ_CHECK(!eos || (n > bos && ids[n - 1] == rt_tok_eos(t)));
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(ids[i] >= 0 && ids[i] < rt_tok_size(t));
        bos_later |= i >= bos && ids[i] == rt_tok_bos(t);
        unk |= ids[i] == t->unk;
    }
    if (n > 0) {
        int32_t small[1];
        int m = -1;
        rt_err se = {0, ""};
        int src = rt_tok_encode(t, text, add_bos, n > 1 ? ids : small, n - 1, &m, &se);
        FUZZ_CHECK(src == RT_EINVAL && m == 0);
        check_err(&se, src);
        rc = rt_tok_encode(t, text, add_bos, ids, n, &m, &e);
        FUZZ_CHECK(rc == 0 && m == n);
    }
    char *back = decode_all(t, ids, n - eos, bos);
    /* a tokenizer.bin's dummy prefix comes back unless BOS drops it */
    int space = t->format == RT_TOK_LLAMA2C && len &&
                !(add_bos && rt_tok_find(t, " ") >= 0);
    int plain = gguf_plain(t, ids + bos, n - eos - bos);
    if ((t->format != RT_TOK_LLAMA2C && t->space == RT_TOK_BYTES && plain) ||
        (clean_bin && !bos_later))
        FUZZ_CHECK((!space || back[0] == ' ') && strcmp(back + space, text) == 0);
    char *want = t->space != RT_TOK_BYTES && !unk && !bos_later && plain ? sp_expect(t, text)
                                                                        : NULL;
    FUZZ_CHECK(!want || strcmp(back, want) == 0);
    free(want);
    free(back);
    free(ids);
}

/* A text from the input's bytes (from its end, up to MAX_TEXT of them,
 * NUL-free), and one of tokens chosen by the input's hash. */
static void derived_texts(rt_tok *t, const uint8_t *data, size_t size, int clean_bin)
{
    size_t k = size < MAX_TEXT ? size : MAX_TEXT;
    char *s = fuzz_text(data + size - k, k);
    check_text(t, s, 1, clean_bin);
    free(s);

    uint64_t h = fuzz_hash(data, size);
    Str b = {0};
    str_put(&b, "", 0);
    for (int i = 0; i < 24 && b.n < MAX_TEXT; i++) {
        h = h * UINT64_C(6364136223846793005) + 1442695040888963407u;
        int id = (int)((h >> 33) % (uint64_t)t->n);
        const char *p = t->bytes + t->off[id];
        str_put(&b, p, strlen(p));
        if (h >> 62 == 0)
            str_put(&b, " ", 1);
    }
    check_text(t, b.s, (int)(h >> 32 & 1), clean_bin);
    free(b.s);
}

static void check_tokens(rt_tok *t)
{
    int n = rt_tok_size(t);
    FUZZ_CHECK(n > 0);
    FUZZ_CHECK(rt_tok_bos(t) >= -1 && rt_tok_bos(t) < n);
    FUZZ_CHECK(rt_tok_eos(t) >= -1 && rt_tok_eos(t) < n);
    FUZZ_CHECK(rt_tok_eos(t) < 0 || rt_tok_is_end(t, rt_tok_eos(t)));
    FUZZ_CHECK(!rt_tok_is_end(t, -1) && !rt_tok_is_end(t, n));
    const char *chat = rt_tok_chat_template(t);
    FUZZ_CHECK(!chat || t->format == RT_TOK_GGUF);
    for (int i = 0; i < n; i++) {
        const char *s = t->bytes + t->off[i];
        FUZZ_CHECK(t->len[i] >= 1 && t->len[i] <= t->maxlen);
        int f = strlen(s) == t->len[i] ? rt_tok_find(t, s) : i;
        FUZZ_CHECK(f == i || (t->format == RT_TOK_GGUF && f >= 0 && t->len[f] == t->len[i] &&
                              !memcmp(t->bytes + t->off[f], s, t->len[i])));
        const char *p = rt_tok_decode_piece(t, i ? i - 1 : -1, i);
        FUZZ_CHECK(strlen(p) <= t->maxlen + 3);
    }
    rt_tok_decode_flush(t);
    FUZZ_CHECK(*rt_tok_decode_piece(t, -1, -1) == 0 && *rt_tok_decode_piece(t, 0, n) == 0);
    FUZZ_CHECK(*rt_tok_decode_flush(t) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    rt_tok *t = (rt_tok *)1;
    rt_err e = {0, ""};
    int rc = rt_tok_open(path, &t, &e);
    if (rc) {
        check_err(&e, rc);
        FUZZ_CHECK(t == NULL);
        return 0;
    }
    FUZZ_CHECK(t != NULL);
    check_tokens(t);
    int clean = t->format == RT_TOK_LLAMA2C && bin_round_trips(t);
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        for (int bos = 0; bos < 2; bos++)
            check_text(t, texts[i], bos, clean);
    derived_texts(t, data, size, clean);
    rt_tok_close(t);
    return 0;
}
