/* tests/unit/test_tokenizer.c: the tokenizers (rt_tokenizer*.c): llama2.c's
 * tokenizer.bin and Hugging Face's BPE tokenizer.json, byte-level and
 * SentencePiece-style.
 *
 * The tokenizers are tiny (a few hundred tokens), written here byte by
 * byte into a mkdtemp directory: bin_file writes a tokenizer.bin as
 * llama2.c's tokenizer.py exports one (<unk>, BOS, EOS, the 256 byte
 * tokens, then the words given); hf_file a tokenizer.json whose vocab is
 * the 256 bytes (id = byte) then one token per merge, in merge order, or
 * SentencePiece-style the specials, byte tokens, U+2581 and a-z, then one
 * per merge (tests/gen/hftok.h). Expected ids were worked out by hand from
 * run.c's encode(), from the pre-tokenizer patterns and from the merges'
 * ranks (comments beside each case). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/gen/rt_tok.h"
#include "tests/gen/hftok.h"
#include "tests/unit/testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N(a) ((int)(sizeof a / sizeof a[0]))

/* ---- writing tokenizers ------------------------------------------------- */

typedef struct {
    char *s;
    size_t n, cap;
} TkBuf;

static void put(TkBuf *b, const void *p, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1);
        b->s = realloc(b->s, b->cap);
        assert_non_null(b->s);
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void puts_(TkBuf *b, const char *s) { put(b, s, strlen(s)); }

static void put_i32(TkBuf *b, int32_t v)
{
    unsigned char c[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put(b, c, 4);
}

typedef struct {
    const char *text;
    float score;
} Word;

/* ids 259.. are words[]; bytes cut short (truncation tests) when cut > 0. */
static const char *bin_file(const char *name, const Word *words, int n, size_t cut)
{
    TkBuf b = {0};
    put_i32(&b, 16);
    for (int i = 0; i < 259 + n; i++) {
        char tmp[8];
        const char *s = i == 0 ? "<unk>" : i == 1 ? "\n<s>\n" : i == 2 ? "\n</s>\n" : tmp;
        float score = i >= 259 ? words[i - 259].score : 0;
        if (i >= 259)
            s = words[i - 259].text;
        else if (i >= 3)
            snprintf(tmp, sizeof tmp, "<0x%02X>", i - 3);
        uint32_t u;
        memcpy(&u, &score, 4);
        put_i32(&b, (int32_t)u);
        put_i32(&b, (int32_t)strlen(s));
        puts_(&b, s);
    }
    const char *p = tl_tmp_path(name);
    tl_put_file(p, b.s, cut ? cut : b.n);
    free(b.s);
    return p;
}

/* A tokenizer.json (tests/gen/hftok.h) in the test's directory. */
static const char *hf_file(const char *name, int style, const HfPair *m, int nm, const char *post)
{
    size_t n;
    char *text = hf_tokenizer_json(style, m, nm, post, &n);
    assert_non_null(text);
    const char *p = tl_tmp_path(name);
    tl_put_file(p, text, n);
    free(text);
    return p;
}

/* A copy of the file at path, named name, with its first `from` made `to`. */
static const char *edit(const char *path, const char *name, const char *from, const char *to)
{
    size_t n;
    char *s = tl_get_file(path, &n), *at = strstr(s, from);
    assert_non_null(at);
    TkBuf b = {0};
    put(&b, s, (size_t)(at - s));
    puts_(&b, to);
    puts_(&b, at + strlen(from));
    const char *p = tl_tmp_path(name);
    tl_put_file(p, b.s, b.n);
    free(b.s);
    free(s);
    return p;
}

/* ---- checking --------------------------------------------------------------- */

static rt_tok *open_ok(const char *path)
{
    rt_tok *t;
    rt_err e = {0};
    int rc = rt_tok_open(path, &t, &e);
    if (rc)
        fail_msg("%s", e.msg);
    return t;
}

/* path is refused with RT_EINVAL and one line: exactly `want` after
 * "PATH: " when want is given. */
static void open_bad(const char *path, const char *want)
{
    rt_tok *t = (rt_tok *)1;
    rt_err e = {0};
    assert_int_equal(rt_tok_open(path, &t, &e), RT_EINVAL);
    assert_null(t);
    assert_null(strchr(e.msg, '\n'));
    assert_int_equal(strncmp(e.msg, path, strlen(path)), 0);
    assert_int_equal(strncmp(e.msg + strlen(path), ": ", 2), 0);
    if (want)
        assert_string_equal(e.msg + strlen(path) + 2, want);
}

/* text encodes to exactly want[0, n). */
static void encodes(const rt_tok *t, const char *text, int bos, const int32_t *want, int n)
{
    int32_t ids[256];
    int got;
    rt_err e = {0};
    assert_int_equal(rt_tok_encode(t, text, bos, ids, N(ids), &got, &e), 0);
    if (got != n)
        fail_msg("'%s': %d ids, want %d", text, got, n);
    for (int i = 0; i < n; i++)
        if (ids[i] != want[i])
            fail_msg("'%s': ids[%d] = %d, want %d", text, i, ids[i], want[i]);
}
#define ENCODES(t, text, bos, ...) \
    encodes(t, text, bos, (int32_t[]){__VA_ARGS__}, N(((int32_t[]){__VA_ARGS__})))

/* decode(encode(text)) == want, piece by piece after BOS. */
static void round_trip_to(rt_tok *t, const char *text, const char *want)
{
    int32_t ids[512];
    int n, i = 0;
    rt_err e = {0};
    assert_int_equal(rt_tok_encode(t, text, 1, ids, N(ids), &n, &e), 0);
    TkBuf b = {0};
    puts_(&b, "");
    if (rt_tok_bos(t) >= 0) {
        assert_true(n > 0 && ids[0] == rt_tok_bos(t));
        i = 1;
    }
    for (; i < n; i++)
        puts_(&b, rt_tok_decode_piece(t, i ? ids[i - 1] : -1, ids[i]));
    puts_(&b, rt_tok_decode_flush(t));
    assert_string_equal(b.s, want);
    free(b.s);
}

static void round_trip(rt_tok *t, const char *text) { round_trip_to(t, text, text); }

static const char *const texts[] = {
    "hello", "hello world's 123", "  two  spaces  ", "line\nnext\n\n\r\nend\n",
    "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80!", "\x01\x7F tab\there", " ",
    "hi<|endoftext|>there",
};

/* ---- llama2.c's tokenizer.bin ------------------------------------------------ */

/* 259 " ", 260 "h", 261 "e", 262 "l", 263 "o", 264 "he", 265 "el", 266 "ll",
 * 267 "llo", 268 "hello", 269 "é" */
static const Word words[] = {{" ", -1},  {"h", 0},     {"e", 0},       {"l", 0},
                             {"o", 0},   {"he", 5},    {"el", 4.5f},   {"ll", 4},
                             {"llo", 3}, {"hello", 1}, {"\xC3\xA9", 0}};

static void test_bin_encode(void **state)
{
    (void)state;
    rt_tok *t = open_ok(bin_file("t.bin", words, N(words), 0));
    assert_int_equal(rt_tok_size(t), 270);
    assert_int_equal(rt_tok_bos(t), 1);
    assert_int_equal(rt_tok_eos(t), 2);
    assert_int_equal(rt_tok_find(t, "llo"), 267);
    assert_int_equal(rt_tok_find(t, "lo"), -1);
    /* " " h e l l o: he (5) beats el (4.5) and ll (4); then ll, llo, he+llo */
    ENCODES(t, "hello", 1, 1, 259, 268);
    ENCODES(t, "hello", 0, 259, 268);
    ENCODES(t, "e", 0, 259, 261);               /* the dummy prefix */
    encodes(t, "", 0, NULL, 0);                 /* none for no text */
    ENCODES(t, "", 1, 1);
    ENCODES(t, "hello\xC3\xA9", 0, 259, 268, 269);
    /* 日 = E6 97 A5 and 😀 = F0 9F 98 80 are no tokens: bytes + 3 */
    ENCODES(t, "h\xE6\x97\xA5", 0, 259, 260, 0xE6 + 3, 0x97 + 3, 0xA5 + 3);
    ENCODES(t, "\xF0\x9F\x98\x80", 0, 259, 0xF0 + 3, 0x9F + 3, 0x98 + 3, 0x80 + 3);
    ENCODES(t, "\n", 0, 259, 0x0A + 3);
    rt_tok_close(t);
}

static void test_bin_decode(void **state)
{
    (void)state;
    rt_tok *t = open_ok(bin_file("t.bin", words, N(words), 0));
    assert_string_equal(rt_tok_decode_piece(t, 1, 259), "");      /* after BOS: no space */
    assert_string_equal(rt_tok_decode_piece(t, 259, 259), " ");
    assert_string_equal(rt_tok_decode_piece(t, 259, 268), "hello");
    assert_string_equal(rt_tok_decode_piece(t, 1, 'A' + 3), "A"); /* <0x41> */
    /* 日 split over three byte tokens is held back until whole */
    assert_string_equal(rt_tok_decode_piece(t, 259, 0xE6 + 3), "");
    assert_string_equal(rt_tok_decode_piece(t, 0xE6 + 3, 0x97 + 3), "");
    assert_string_equal(rt_tok_decode_piece(t, 0x97 + 3, 0xA5 + 3), "\xE6\x97\xA5");
    /* an incomplete character at the end comes out on flush; bytes that
     * can never make one pass through */
    assert_string_equal(rt_tok_decode_piece(t, 259, 0xF0 + 3), "");
    assert_string_equal(rt_tok_decode_piece(t, 259, 0x9F + 3), "");
    assert_string_equal(rt_tok_decode_flush(t), "\xF0\x9F");
    assert_string_equal(rt_tok_decode_flush(t), "");
    assert_string_equal(rt_tok_decode_piece(t, 259, 0xE6 + 3), "");
    assert_string_equal(rt_tok_decode_piece(t, 0xE6 + 3, 260), "\xE6h");
    assert_string_equal(rt_tok_decode_piece(t, 259, 0 + 3), "");   /* NUL: nothing */
    assert_string_equal(rt_tok_decode_piece(t, 259, -1), "");
    assert_string_equal(rt_tok_decode_piece(t, 259, 270), "");
    for (int i = 0; i < N(texts); i++)
        round_trip(t, texts[i]);
    rt_tok_close(t);
}

static void test_bin_malformed(void **state)
{
    (void)state;
    char p[256];
    strcpy(p, bin_file("t.bin", words, N(words), 0));
    size_t size, last = 8 + strlen(words[N(words) - 1].text);
    free(tl_get_file(p, &size));
    char want[160];
    snprintf(want, sizeof want, "token 269 (byte %zu): the file ends inside it", size - last);
    open_bad(bin_file("cut.bin", words, N(words), size - 1), want);
    open_bad(bin_file("cut.bin", words, N(words), 3),
             "3 bytes: neither a tokenizer.json nor llama2.c's tokenizer.bin");
    open_bad(bin_file("cut.bin", words, N(words), 4 + 3 * 8 + 5 + 5 + 6),
             "3 tokens; llama2.c's tokenizer has at least 259: <unk>, <s>, </s> and 256 byte "
             "tokens");
    /* every cut: refused in one line, or whole tokens (259 at least) */
    for (size_t cut = 1; cut < size; cut++) {
        rt_tok *t;
        rt_err e = {0};
        int rc = rt_tok_open(bin_file("cut.bin", words, N(words), cut), &t, &e);
        assert_true(rc == 0 || (rc == RT_EINVAL && !t && !strchr(e.msg, '\n')));
        rt_tok_close(t);
    }
    const Word twice[] = {{"h", 0}, {"h", 1}};
    open_bad(bin_file("dup.bin", twice, 2, 0), "token 260 'h' repeats token 259");
    const Word inf[] = {{"h", 1.0f / 0.0f}};
    open_bad(bin_file("inf.bin", inf, 1, 0), NULL);
    rt_err e = {0};
    rt_tok *t = (rt_tok *)1;
    assert_int_equal(rt_tok_open(tl_tmp_path("none.bin"), &t, &e), RT_EIO);
    assert_null(t);
}

/* ---- Hugging Face tokenizer.json, SentencePiece-style BPE ---------------------- */

/* Merge i makes token 286 + i (hftok.h: 259 is U+2581, written " " in a
 * merge, and 260 + k the letter 'a' + k; 3 + b the byte b's token). */
static const HfPair sp_merges[] = {
    {" ", "h"}, {"e", "l"}, {"l", "o"},   {" h", "el"}, {" hel", "lo"}, {" ", "w"},
    {"o", "r"}, {" w", "or"}, {"l", "d"}, {" wor", "ld"}, {" ", " "},   {"o", " "},
};
enum { SP_UNK, SP_BOS, SP_EOS, SP_BYTE = 3, SP_META = 259, SP_A = 260, SP_EL = 287,
       SP_LO = 288, SP_HELLO = 290, SP_OR = 292, SP_LD = 294, SP_WORLD = 295, SP_MM = 296,
       SP_OM = 297 };

static const char *sp_decoder =
    "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "
    "\"\xE2\x96\x81\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, "
    "{\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]}";

static const char *sp_template =
    "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", "
    "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], "
    "\"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}}";

/* Llama 2's: every stretch of text gets U+2581 first, even one that starts
 * with a space, and a stretch after an added token. */
static void test_sp_llama(void **state)
{
    (void)state;
    rt_tok *t = open_ok(hf_file("llama.json", HF_TOK_LLAMA, sp_merges, N(sp_merges), sp_template));
    assert_int_equal(rt_tok_size(t), 298);
    assert_int_equal(rt_tok_bos(t), SP_BOS);
    assert_int_equal(rt_tok_eos(t), SP_EOS);
    assert_int_equal(rt_tok_find(t, "\xE2\x96\x81world"), SP_WORLD);
    /* _ h e l l o _ w o r l d: _h, el, lo, _hel, _hello; _w, or, _wor, ld, _world */
    ENCODES(t, "hello world", 1, SP_BOS, SP_HELLO, SP_WORLD);
    /* H has no token: its byte's; then el, lo (el + lo is no merge) */
    ENCODES(t, "Hello", 0, SP_META, SP_BYTE + 'H', SP_EL, SP_LO);
    ENCODES(t, " hello", 0, SP_META, SP_HELLO);                 /* _ _hello */
    ENCODES(t, "a  b", 0, SP_META, SP_A, SP_MM, SP_A + 1);       /* _ a __ b */
    /* o_ (rank 11) joins across the space: no split */
    ENCODES(t, "o o", 0, SP_META, SP_OM, SP_A + 14);
    ENCODES(t, "hello</s>world", 0, SP_HELLO, SP_EOS, SP_WORLD);
    ENCODES(t, "\xC3\xA9", 0, SP_META, SP_BYTE + 0xC3, SP_BYTE + 0xA9);
    encodes(t, "", 0, NULL, 0);
    /* decoding: U+2581 a space, one space dropped after BOS, a byte
     * token its byte */
    assert_string_equal(rt_tok_decode_piece(t, SP_BOS, SP_HELLO), "hello");
    assert_string_equal(rt_tok_decode_piece(t, SP_HELLO, SP_WORLD), " world");
    assert_string_equal(rt_tok_decode_piece(t, SP_BOS, SP_META), "");
    assert_string_equal(rt_tok_decode_piece(t, SP_A, SP_MM), "  ");
    assert_string_equal(rt_tok_decode_piece(t, SP_A, SP_BYTE + 'H'), "H");
    assert_string_equal(rt_tok_decode_piece(t, SP_A, SP_BYTE + 0xC3), "");
    assert_string_equal(rt_tok_decode_piece(t, SP_BYTE + 0xC3, SP_BYTE + 0xA9), "\xC3\xA9");
    assert_string_equal(rt_tok_decode_piece(t, SP_A, SP_EOS), "</s>");
    for (int i = 0; i < N(texts); i++)
        round_trip(t, texts[i]);
    /* a space after an added token comes back doubled, as from HF */
    round_trip_to(t, "a</s> b", "a</s>  b");
    rt_tok_close(t);
    /* at most 6 ids a byte: without a token U+2581 is three byte tokens */
    t = open_ok(edit(hf_file("nomerge.json", HF_TOK_LLAMA, NULL, 0, NULL), "nometa.json",
                     "\"\xE2\x96\x81\": 259", "\"\xE2\x96\x82\": 259"));
    int32_t ids[8];
    int n;
    rt_err e = {0};
    assert_int_equal(rt_tok_encode(t, " ", 0, ids, N(ids), &n, &e), 0);
    assert_int_equal(n, 6);
    assert_int_equal(ids[0], SP_BYTE + 0xE2);
    rt_tok_close(t);
}

/* A Metaspace, prepend_scheme first: only the text's first stretch gets
 * U+2581 first, and only when it does not start with a space. */
static void test_sp_metaspace(void **state)
{
    (void)state;
    char p[256];
    strcpy(p, hf_file("meta.json", HF_TOK_METASPACE, sp_merges, N(sp_merges), sp_template));
    rt_tok *t = open_ok(p);
    ENCODES(t, "hello world", 1, SP_BOS, SP_HELLO, SP_WORLD);
    ENCODES(t, " hello", 0, SP_HELLO);
    /* after </s>: w, or, ld without U+2581 */
    ENCODES(t, "hello</s>world", 0, SP_HELLO, SP_EOS, SP_A + 22, SP_OR, SP_LD);
    for (int i = 0; i < N(texts); i++)
        if (texts[i][0] != ' ')
            round_trip(t, texts[i]);
    round_trip_to(t, "  two", " two");       /* the first space is lost, as from HF */
    rt_tok_close(t);
    /* split: a piece starts at each U+2581, so o_ never merges */
    t = open_ok(edit(p, "split.json", "\"split\": false", "\"split\": true"));
    ENCODES(t, "o o", 0, SP_META, SP_A + 14, SP_META, SP_A + 14);
    rt_tok_close(t);
    /* </s> with lstrip and rstrip takes all the text: no U+2581 for the
     * empty stretch before it */
    t = open_ok(edit(edit(p, "l.json", "\"lstrip\": false", "\"lstrip\": true"), "lr.json",
                     "\"rstrip\": false", "\"rstrip\": true"));
    ENCODES(t, "  <unk>  ", 0, SP_UNK);
    rt_tok_close(t);
    /* prepend_scheme always: after an added token too */
    t = open_ok(edit(p, "always.json", "\"first\"", "\"always\""));
    ENCODES(t, "hello</s>world", 0, SP_HELLO, SP_EOS, SP_WORLD);
    rt_tok_close(t);
    /* the Metaspace decoder: every U+2581 of the first token dropped; a
     * byte token printed as it is (no ByteFallback) */
    t = open_ok(edit(p, "mdec.json", sp_decoder,
                     "{\"type\": \"Metaspace\", \"replacement\": \"\xE2\x96\x81\", "
                     "\"prepend_scheme\": \"first\", \"split\": false}"));
    assert_string_equal(rt_tok_decode_piece(t, SP_BOS, SP_HELLO), "hello");
    assert_string_equal(rt_tok_decode_piece(t, -1, SP_MM), "");
    assert_string_equal(rt_tok_decode_piece(t, SP_A, SP_MM), "  ");
    assert_string_equal(rt_tok_decode_piece(t, SP_A, SP_BYTE + 'H'), "<0x48>");
    rt_tok_close(t);
}

/* Gemma's: spaces made U+2581, none first, a Split by " " that finds none,
 * and no Strip: every text comes back as it was. */
static void test_sp_gemma(void **state)
{
    (void)state;
    rt_tok *t = open_ok(hf_file("gemma.json", HF_TOK_GEMMA, sp_merges, N(sp_merges), sp_template));
    /* h e l l o _ w o r l d: no "_h" to merge; el, lo; _world */
    ENCODES(t, "hello world", 1, SP_BOS, SP_A + 7, SP_EL, SP_LO, SP_WORLD);
    ENCODES(t, " hello", 0, SP_HELLO);
    assert_string_equal(rt_tok_decode_piece(t, SP_BOS, SP_HELLO), " hello");
    for (int i = 0; i < N(texts); i++)
        round_trip(t, texts[i]);
    rt_tok_close(t);
}

/* Without byte fallback, a character with no token is unk, a run of them
 * one unk (fuse_unk); without unk either, the text is refused. */
static void test_sp_unk(void **state)
{
    (void)state;
    char p[256];
    strcpy(p, edit(hf_file("unk.json", HF_TOK_LLAMA, sp_merges, N(sp_merges), NULL), "unk1.json",
                   "\"byte_fallback\": true", "\"byte_fallback\": false"));
    rt_tok *t = open_ok(p);
    /* _ H E l l o: H and E one unk; l o merge */
    ENCODES(t, "HEllo", 0, SP_META, SP_UNK, SP_A + 11, SP_LO);
    rt_tok_close(t);
    t = open_ok(edit(p, "unk2.json", "\"fuse_unk\": true", "\"fuse_unk\": false"));
    ENCODES(t, "HEllo", 0, SP_META, SP_UNK, SP_UNK, SP_A + 11, SP_LO);
    rt_tok_close(t);
    t = open_ok(edit(p, "unk3.json", "\"unk_token\": \"<unk>\"", "\"unk_token\": null"));
    int32_t ids[8];
    int n;
    rt_err e = {0};
    assert_int_equal(rt_tok_encode(t, "aHa", 0, ids, N(ids), &n, &e), RT_EINVAL);
    assert_string_equal(e.msg, "the text's character 'H' has no token, and the tokenizer no "
                               "byte fallback or unk_token for it");
    rt_tok_close(t);
}

static void test_sp_malformed(void **state)
{
    (void)state;
    char llama[256], meta[256], p[256];
    strcpy(llama, hf_file("l.json", HF_TOK_LLAMA, sp_merges, N(sp_merges), sp_template));
    strcpy(meta, hf_file("m.json", HF_TOK_METASPACE, sp_merges, N(sp_merges), NULL));
    open_bad(edit(llama, "s1.json", "\"prepend\": \"\xE2\x96\x81\"", "\"prepend\": \"_\""),
             "normalizer.normalizers[0]: prepend: '_' is not supported (kiln takes "
             "'\xE2\x96\x81')");
    open_bad(edit(llama, "s2.json", "{\"type\": \"Fuse\"}, {\"type\": \"Strip\", \"content\": "
                  "\" \", \"start\": 1, \"stop\": 0}", "{\"type\": \"Strip\", \"content\": "
                  "\" \", \"start\": 1, \"stop\": 0}, {\"type\": \"Fuse\"}"),
             "decoder.decoders[2]: a Strip before Fuse strips every token: not supported");
    open_bad(edit(llama, "s9.json", "{\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}",
                  "{\"type\": \"Fuse\"}, {\"type\": \"ByteFallback\"}"),
             "decoder.decoders[2]: a ByteFallback after Fuse is not supported");
    open_bad(edit(edit(llama, "s10.json", "{\"type\": \"ByteFallback\"}, ", ""), "s11.json",
                  "{\"type\": \"Fuse\"}", "{\"type\": \"ByteFallback\"}, {\"type\": \"Metaspace\", "
                  "\"replacement\": \"\xE2\x96\x81\"}, {\"type\": \"Fuse\"}"),
             "decoder.decoders[2]: a Metaspace after ByteFallback is not supported (kiln puts "
             "spaces in the tokens' text, not in their bytes)");
    open_bad(edit(llama, "s3.json", "\"unk_token\": \"<unk>\"", "\"unk_token\": \"<nope>\""),
             "model: unk_token: '<nope>' is not a token");
    open_bad(edit(meta, "s4.json", "\"first\"", "\"sometimes\""),
             "pre_tokenizer: prepend_scheme: 'sometimes' is not always, first or never");
    open_bad(edit(llama, "s5.json", "\"pre_tokenizer\": null",
                  "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}"),
             "pre_tokenizer: type 'ByteLevel' after a normalizer that makes spaces U+2581 is not "
             "supported (kiln takes none, or a Split by \" \")");
    open_bad(edit(llama, "s6.json", "\"normalized\": false", "\"normalized\": true"),
             "added_tokens[0]: normalized: true with a normalizer is not supported (kiln takes "
             "added tokens out before normalizing)");
    open_bad(edit(meta, "s7.json", sp_decoder, "{\"type\": \"ByteLevel\"}"),
             "decoder: type 'ByteLevel' is not supported (kiln takes Metaspace, or a Sequence as "
             "Llama 2's)");
    open_bad(edit(meta, "s8.json", "{\"type\": \"Metaspace\", \"replacement\": \"\xE2\x96\x81\", "
                  "\"prepend_scheme\": \"first\", \"split\": false}", "null"),
             "pre_tokenizer: none: kiln reads byte-level BPE split first, or spaces made U+2581 "
             "(a Metaspace, or Llama 2's normalizer)");
    /* every cut of a good file: refused in one line, never a crash */
    size_t size;
    char *s = tl_get_file(llama, &size);
    strcpy(p, tl_tmp_path("cut.json"));
    for (size_t cut = 0; cut < size - 1; cut++) {
        tl_put_file(p, s, cut);
        open_bad(p, NULL);
    }
    free(s);
}

/* ---- Hugging Face tokenizer.json, byte-level BPE ------------------------------- */

/* Merge i makes token 256 + i. The first three would join across the
 * pre-tokenizer's pieces: they must never act. */
static const HfPair merges[] = {
    {"o", " "},  {"d", "'"},     {"s", " "},    {"H", "e"},   {"l", "l"},   {"He", "ll"},
    {"Hell", "o"}, {" ", "w"},   {"o", "r"},    {" w", "or"}, {"l", "d"},   {" wor", "ld"},
    {"'", "s"},  {" ", "1"},     {" 1", "2"},   {" 12", "3"}, {"1", "2"},   {" ", " "},
    {" ", "y"},  {"\n", "\n"},   {"'", "S"},
};
enum { HELLO = 262, WORLD = 267, APOS_S = 268, SP123 = 271, SP2 = 273, SPY = 274, NLNL = 275,
       APOS_BIG_S = 276, EOT = 277, BOS = 278 };

static const char *template_bos =
    "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<|bos|>\", "
    "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], "
    "\"special_tokens\": {\"<|bos|>\": {\"id\": \"<|bos|>\", \"ids\": [278], \"tokens\": "
    "[\"<|bos|>\"]}}}";

static void test_hf_gpt2(void **state)
{
    (void)state;
    rt_tok *t = open_ok(hf_file("gpt2.json", 0, merges, N(merges), NULL));
    assert_int_equal(rt_tok_size(t), 279);
    assert_int_equal(rt_tok_bos(t), -1);
    assert_int_equal(rt_tok_eos(t), EOT);
    assert_int_equal(rt_tok_find(t, "<|bos|>"), BOS);
    assert_int_equal(rt_tok_find(t, " world"), WORLD);
    /* "Hello" " world" "'s" " 123" */
    ENCODES(t, "Hello world's 123", 1, HELLO, WORLD, APOS_S, SP123);
    /* "x" "  " " y": \s+(?!\S) leaves the last space to the word */
    ENCODES(t, "x   y", 0, 'x', SP2, SPY);
    ENCODES(t, "a\n\nb", 0, 'a', '\n', '\n', 'b');
    ENCODES(t, "IT'S", 0, 'I', 'T', '\'', 'S');         /* contractions: lower case */
    ENCODES(t, "hi<|endoftext|>there", 0, 'h', 'i', EOT, 't', 'h', 'e', 'r', 'e');
    ENCODES(t, "\xC3\xA9", 0, 0xC3, 0xA9);
    for (int i = 0; i < N(texts); i++)
        round_trip(t, texts[i]);
    assert_string_equal(rt_tok_decode_piece(t, -1, 0xC3), "");
    assert_string_equal(rt_tok_decode_piece(t, 0xC3, 0xA9), "\xC3\xA9");
    int32_t ids[4];
    int n;
    rt_err e = {0};
    assert_int_equal(rt_tok_encode(t, "hello world", 0, ids, 2, &n, &e), RT_EINVAL);
    assert_string_equal(e.msg, "the text is 5 tokens, more than 2");
    e = (rt_err){0};
    assert_int_equal(rt_tok_encode(t, "a\xFF" "b", 0, ids, 4, &n, &e), RT_EINVAL);
    assert_string_equal(e.msg, "the text is not valid UTF-8 at byte 1");
    rt_tok_close(t);
    /* an added token with rstrip takes the spaces after it (U+3000 too),
     * one with lstrip those before it; without, they are text */
    char p[256];
    strcpy(p, tl_tmp_path("gpt2.json"));
    t = open_ok(edit(p, "rstrip.json", "\"rstrip\": false", "\"rstrip\": true"));
    ENCODES(t, "hi<|endoftext|> \xE3\x80\x80 x", 0, 'h', 'i', EOT, 'x');
    ENCODES(t, "hi <|endoftext|>", 0, 'h', 'i', ' ', EOT);
    rt_tok_close(t);
    t = open_ok(edit(p, "lstrip.json", "\"lstrip\": false", "\"lstrip\": true"));
    ENCODES(t, "hi \n<|endoftext|> x", 0, 'h', 'i', EOT, ' ', 'x');
    ENCODES(t, "  <|endoftext|>", 0, EOT);
    rt_tok_close(t);
}

static void test_hf_qwen2(void **state)
{
    (void)state;
    rt_tok *t = open_ok(hf_file("qwen2.json", 1, merges, N(merges), template_bos));
    assert_int_equal(rt_tok_bos(t), BOS);
    assert_int_equal(rt_tok_eos(t), EOT);
    assert_true(rt_tok_is_end(t, EOT) && !rt_tok_is_end(t, BOS) && !rt_tok_is_end(t, -1));
    /* digits one by one; a space before a digit stands alone */
    ENCODES(t, "Hello world's 123", 1, BOS, HELLO, WORLD, APOS_S, ' ', '1', '2', '3');
    ENCODES(t, "x   y", 0, 'x', SP2, SPY);
    ENCODES(t, "a\n\nb", 0, 'a', NLNL, 'b');            /* \s*[\r\n]+ */
    ENCODES(t, "IT'S", 0, 'I', 'T', APOS_BIG_S);         /* (?i:'s) */
    for (int i = 0; i < N(texts); i++)
        round_trip(t, texts[i]);
    rt_tok_close(t);
    /* a chat model's end of turn ends generation too; EOS stays the end
     * of a text */
    t = open_ok(edit(tl_tmp_path("qwen2.json"), "chat.json", "<|bos|>\", \"special",
                     "<|im_end|>\", \"special"));
    assert_int_equal(rt_tok_find(t, "<|im_end|>"), BOS);
    assert_int_equal(rt_tok_eos(t), EOT);
    assert_true(rt_tok_is_end(t, EOT) && rt_tok_is_end(t, BOS) && !rt_tok_is_end(t, 'a'));
    rt_tok_close(t);
}

/* SmolLM's Digits (individual_digits) before GPT-2's split: every number
 * character a piece; as runs without individual_digits. */
static void test_hf_digits(void **state)
{
    (void)state;
    char p[256];
    strcpy(p, hf_file("digits.json", HF_TOK_DIGITS, merges, N(merges), NULL));
    rt_tok *t = open_ok(p);
    /* " 123" is " " "1" "2" "3", not GPT-2's " 123" */
    ENCODES(t, "Hello world's 123", 0, HELLO, WORLD, APOS_S, ' ', '1', '2', '3');
    ENCODES(t, "x12y", 0, 'x', '1', '2', 'y');
    ENCODES(t, "\xD9\xA1\xD9\xA2", 0, 0xD9, 0xA1, 0xD9, 0xA2);   /* Arabic-Indic 1 2 */
    for (int i = 0; i < N(texts); i++)
        round_trip(t, texts[i]);
    rt_tok_close(t);
    t = open_ok(edit(p, "runs.json", "\"individual_digits\": true", "\"individual_digits\": false"));
    ENCODES(t, "x12y", 0, 'x', 256 + 16, 'y');                   /* "12", merge 16 */
    ENCODES(t, "Hello world's 123", 0, HELLO, WORLD, APOS_S, ' ', 256 + 16, '3');
    rt_tok_close(t);
    open_bad(edit(p, "d1.json", "\"use_regex\": true}]", "\"use_regex\": false}]"),
             "pre_tokenizer.pretokenizers[1]: use_regex: false is not supported after Digits "
             "(kiln splits the text)");
}

static void test_hf_malformed(void **state)
{
    (void)state;
    char good[256], qwen[256], p[256];      /* tl_tmp_path's buffers are reused */
    strcpy(good, hf_file("good.json", 0, merges, N(merges), NULL));
    strcpy(qwen, hf_file("qwen.json", 1, merges, N(merges), NULL));
    strcpy(p, tl_tmp_path("bad.json"));
    tl_put_file(p, "{\"version\": \"1.0\",}", 19);
    open_bad(p, "invalid JSON at byte 18: expected a string");
    tl_put_file(p, "{\"version\": \"\xFF\"}", 16);
    open_bad(p, "not valid UTF-8 at byte 13");
    open_bad(edit(good, "b1.json", "\"BPE\"", "\"WordPiece\""),
             "model: type 'WordPiece' is not supported (kiln reads BPE)");
    open_bad(edit(good, "b2.json", "\"merges\": [", "\"merges\": [\"a zz\", "),
             "model.merges[0]: the second token is not in model.vocab");
    open_bad(edit(good, "b3.json", "\"merges\": [", "\"merges\": [\"a b\", "),
             "model.merges[0]: the token they make is not in model.vocab");
    open_bad(edit(good, "b4.json", "\"merges\": [", "\"merges\": [\"H e\", "),
             "model.merges[4]: repeats model.merges[0]");
    open_bad(edit(good, "b5.json", "\"version\"", "\"versio\""),
             "unknown key 'versio' (refused rather than ignored)");
    open_bad(edit(good, "b6.json", "\"add_prefix_space\": false", "\"add_prefix_space\": true"),
             "pre_tokenizer: add_prefix_space: true is not supported");
    open_bad(edit(qwen, "b7.json", "\\\\p{N}|", "\\\\p{N}{1,2}|"),
             "pre_tokenizer.pretokenizers[0].pattern: a regex kiln does not know (it splits as "
             "GPT-2's, Qwen2's or Llama 3's)");
    open_bad(edit(good, "b8.json", "\"id\": 278", "\"id\": 279"),
             "added_tokens[1]: id 279 is not in [0, 279): added tokens not in model.vocab take "
             "the ids after its 277");
    /* every cut of a good file: refused in one line, never a crash */
    size_t size;
    char *s = tl_get_file(qwen, &size);
    for (size_t cut = 0; cut < size - 1; cut++) {
        tl_put_file(p, s, cut);
        open_bad(p, NULL);
    }
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bin_encode),    cmocka_unit_test(test_bin_decode),
        cmocka_unit_test(test_bin_malformed), cmocka_unit_test(test_hf_gpt2),
        cmocka_unit_test(test_hf_qwen2),      cmocka_unit_test(test_hf_malformed),
        cmocka_unit_test(test_hf_digits),
        cmocka_unit_test(test_sp_llama),      cmocka_unit_test(test_sp_metaspace),
        cmocka_unit_test(test_sp_unk),        cmocka_unit_test(test_sp_malformed),
        cmocka_unit_test(test_sp_gemma),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
