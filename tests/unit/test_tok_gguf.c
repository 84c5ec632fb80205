/* tests/unit/test_tok_gguf.c: tokenizers read from a GGUF file's metadata
 * (runtime/gen/rt_tokenizer_gguf.c), the files written here with the test
 * tools' GGUF writer (tests/import/gguf_write.h):
 *   - a small SentencePiece vocabulary (tokenizer.ggml.model llama): <unk>,
 *     <s>, </s>, the 256 byte tokens, U+2581 ("_" in comments), a few
 *     letters and merged pieces whose scores are chosen so that the order
 *     of the merges shows, and special tokens of each type. Expected ids
 *     are worked out by hand with llama.cpp's rule (comments beside each
 *     case): the text's characters are symbols; while some adjacent pair
 *     makes a token, the pair whose token scores highest (the leftmost of
 *     equals) joins; a symbol that is no token becomes its bytes' tokens;
 *   - byte-level BPE (gpt2) with test_tokenizer.c's merges, under each
 *     pre-tokenizer kiln has, its hand-worked ids again;
 *   - the same vocabularies as a llama2.c tokenizer.bin and as Hugging
 *     Face tokenizer.json files (tests/gen/hftok.h) encode to the same ids
 *     and decode to the same text through both paths;
 *   - bad metadata refused in one line naming the file and the key.
 * With KILN_TOK_SEEDS=DIR the good files are also written into DIR, named
 * gguf-*.gguf (tests/fuzz/seeds.sh makes fuzz_tokenizer's GGUF seeds so). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/gen/rt_tok.h"
#include "tests/gen/hftok.h"
#include "tests/import/gguf_write.h"
#include "tests/unit/testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N(a) ((int)(sizeof a / sizeof a[0]))
#define META "\xE2\x96\x81"         /* U+2581, SentencePiece's space */
#define MAXV 640

/* ---- vocabularies and their files ------------------------------------------ */

typedef struct {
    const char *model, *pre;        /* pre: NULL for none */
    int n, nm;
    char *tok[MAXV];
    float score[MAXV];
    int32_t type[MAXV];
    char *merge[MAXV];
} Voc;

static void add(Voc *v, const char *text, float score, int type)
{
    assert_true(v->n < MAXV);
    v->tok[v->n] = strdup(text);
    v->score[v->n] = score;
    v->type[v->n++] = type;
}

static void voc_free(Voc *v)
{
    for (int i = 0; i < v->n; i++)
        free(v->tok[i]);
    for (int i = 0; i < v->nm; i++)
        free(v->merge[i]);
    v->n = v->nm = 0;
}

/* Token i's text replaced. */
static void retext(Voc *v, int i, const char *text)
{
    free(v->tok[i]);
    v->tok[i] = strdup(text);
}

/* The keys a file leaves out, to write them otherwise. */
enum { K_MODEL = 1, K_TOKENS = 2, K_SCORES = 4, K_TYPES = 8, K_MERGES = 16, K_PRE = 32 };

/* A writer holding v's keys but those in skip. */
static GgufWriter *voc_kv(const Voc *v, unsigned skip)
{
    GgufWriter *w = gw_new(3);
    gw_str(w, "general.architecture", "llama");
    if (!(skip & K_MODEL))
        gw_str(w, "tokenizer.ggml.model", v->model);
    if (v->pre && !(skip & K_PRE))
        gw_str(w, "tokenizer.ggml.pre", v->pre);
    if (!(skip & K_TOKENS))
        gw_arr_str(w, "tokenizer.ggml.tokens", (uint64_t)v->n, (const char *const *)v->tok);
    if (!strcmp(v->model, "llama") && !(skip & K_SCORES))
        gw_arr(w, "tokenizer.ggml.scores", GW_F32, (uint64_t)v->n, v->score);
    if (!(skip & K_TYPES))
        gw_arr(w, "tokenizer.ggml.token_type", GW_I32, (uint64_t)v->n, v->type);
    if (v->nm && !(skip & K_MERGES))
        gw_arr_str(w, "tokenizer.ggml.merges", (uint64_t)v->nm, (const char *const *)v->merge);
    return w;
}

/* w's file (w is freed) under name; its path. With KILN_TOK_SEEDS, a
 * copy as DIR/gguf-NAME when seed. */
static const char *put_w(GgufWriter *w, const char *name, int seed)
{
    const char *p = tl_tmp_path(name), *dir = getenv("KILN_TOK_SEEDS");
    assert_int_equal(gw_write(w, p), 0);
    if (seed && dir) {
        char out[512];
        snprintf(out, sizeof out, "%s/gguf-%s", dir, name);
        assert_int_equal(gw_write(w, out), 0);
    }
    gw_free(w);
    return p;
}

/* GPT-2's bytes_to_unicode: the printable Latin-1 bytes stand for
 * themselves, the other 68 for U+0100.. in byte order. s's bytes so,
 * appended at o (NUL-terminated); the end. */
static char *bl(char *o, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned b = *p, k = 0;
        int self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        for (unsigned c = 0; c < b; c++)
            k += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE);
        unsigned cp = self ? b : 0x100 + k;
        if (cp < 0x80)
            *o++ = (char)cp;
        else
            *o++ = (char)(0xC0 | cp >> 6), *o++ = (char)(0x80 | (cp & 0x3F));
    }
    *o = 0;
    return o;
}

/* s with each space as U+2581, into o (room for 3 strlen(s) + 1). */
static const char *meta(char *o, const char *s)
{
    char *p = o;
    for (; *s; s++)
        if (*s == ' ')
            memcpy(p, META, 3), p += 3;
        else
            *p++ = *s;
    *p = 0;
    return o;
}

/* <unk>, <s>, </s> (unknown, control, control) and the 256 byte tokens. */
static void sp_base(Voc *v)
{
    char s[8];
    add(v, "<unk>", 0, RT_TOK_T_UNKNOWN);
    add(v, "<s>", 0, RT_TOK_T_CONTROL);
    add(v, "</s>", 0, RT_TOK_T_CONTROL);
    for (int b = 0; b < 256; b++) {
        snprintf(s, sizeof s, "<0x%02X>", b);
        add(v, s, 0, RT_TOK_T_BYTE);
    }
}

/* The hand cases' SentencePiece vocabulary: sp_base, then these. */
enum {
    S_UNK, S_BOS, S_EOS, S_BYTE, S_META = 259, S_H, S_E, S_L, S_O, S_MH, S_EL, S_LL, S_LO,
    S_MHE, S_LLO, S_MHELLO, S_EACUTE, S_USER, S_PAD, S_MM, S_IMEND, S_N
};
static const struct {
    const char *text;
    float score;
    int type;
} spm_words[] = {
    {META, 0, RT_TOK_T_NORMAL},        {"h", 0, RT_TOK_T_NORMAL},
    {"e", 0, RT_TOK_T_NORMAL},         {"l", 0, RT_TOK_T_NORMAL},
    {"o", 0, RT_TOK_T_NORMAL},         {META "h", -4, RT_TOK_T_NORMAL},
    {"el", -3, RT_TOK_T_NORMAL},       {"ll", -1, RT_TOK_T_NORMAL},
    {"lo", -2, RT_TOK_T_NORMAL},       {META "he", -5, RT_TOK_T_NORMAL},
    {"llo", -0.5f, RT_TOK_T_NORMAL},   {META "hello", -6, RT_TOK_T_NORMAL},
    {"\xC3\xA9", 0, RT_TOK_T_NORMAL},  {"<|user|>", 0, RT_TOK_T_USER},
    {"[PAD273]", 0, RT_TOK_T_UNUSED},  {META META, -7, RT_TOK_T_NORMAL},
    {"<|im_end|>", 0, RT_TOK_T_CONTROL},
};

static void spm_voc(Voc *v)
{
    *v = (Voc){.model = "llama"};
    sp_base(v);
    for (int i = 0; i < N(spm_words); i++)
        add(v, spm_words[i].text, spm_words[i].score, spm_words[i].type);
    assert_int_equal(v->n, S_N);
}

/* A byte-level vocabulary of merges m (test_tokenizer.c's way): the 256
 * bytes (id = byte), one token per merge, then "<|endoftext|>" and
 * "<|bos|>", both control; pre-tokenizer pre. */
static void bpe_voc(Voc *v, const char *pre, const HfPair *m, int nm)
{
    char a[64], *e;
    *v = (Voc){.model = "gpt2", .pre = pre};
    for (int i = 0; i < 256; i++) {
        char c[2] = {(char)i, 0};
        if (!i)
            strcpy(a, "\xC4\x80");                  /* byte 0: U+0100 */
        else
            bl(a, c);
        add(v, a, 0, RT_TOK_T_NORMAL);
    }
    for (int i = 0; i < nm; i++) {
        e = bl(a, m[i].a);
        bl(e, m[i].b);
        add(v, a, 0, RT_TOK_T_NORMAL);
        e = bl(a, m[i].a);
        *e++ = ' ';
        bl(e, m[i].b);
        v->merge[v->nm++] = strdup(a);
    }
    add(v, "<|endoftext|>", 0, RT_TOK_T_CONTROL);
    add(v, "<|bos|>", 0, RT_TOK_T_CONTROL);
}

/* A SentencePiece vocabulary as hftok.h's SentencePiece-style
 * tokenizer.json's (sp_base, U+2581, a to z, one token per merge, spaces
 * as U+2581), merge i scoring -1 - i: the first merges first, as ranks. */
static void sp_hf_voc(Voc *v, const HfPair *m, int nm)
{
    char a[64], b[200];
    *v = (Voc){.model = "llama"};
    sp_base(v);
    add(v, META, 0, RT_TOK_T_NORMAL);
    for (char c = 'a'; c <= 'z'; c++) {
        char s[2] = {c, 0};
        add(v, s, 0, RT_TOK_T_NORMAL);
    }
    for (int i = 0; i < nm; i++) {
        snprintf(a, sizeof a, "%s%s", m[i].a, m[i].b);
        add(v, meta(b, a), -1.0f - (float)i, RT_TOK_T_NORMAL);
    }
}

/* ---- checking ------------------------------------------------------------------ */

static rt_tok *open_ok(const char *path)
{
    rt_tok *t;
    rt_err e = {0};
    if (rt_tok_open(path, &t, &e))
        fail_msg("%s", e.msg);
    return t;
}

/* path is refused with RT_EINVAL and one line: exactly `want` after
 * "PATH: " (any line when want is NULL). */
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

/* w's file refused with exactly want (w is freed). */
static void bad_w(GgufWriter *w, const char *want) { open_bad(put_w(w, "bad.gguf", 0), want); }

/* v's file refused with exactly want. */
static void bad_voc(const Voc *v, const char *want) { bad_w(voc_kv(v, 0), want); }

static void encodes(const rt_tok *t, const char *text, int bos, const int32_t *want, int n)
{
    int32_t ids[256];
    int got;
    rt_err e = {0};
    if (rt_tok_encode(t, text, bos, ids, N(ids), &got, &e))
        fail_msg("'%s': %s", text, e.msg);
    if (got != n)
        fail_msg("'%s': %d ids, want %d", text, got, n);
    for (int i = 0; i < n; i++)
        if (ids[i] != want[i])
            fail_msg("'%s': ids[%d] = %d, want %d", text, i, ids[i], want[i]);
}
#define ENCODES(t, text, bos, ...) \
    encodes(t, text, bos, (int32_t[]){__VA_ARGS__}, N(((int32_t[]){__VA_ARGS__})))

/* ids[from, n) decoded piece by piece, then the flush (malloc'd). */
static char *decode(rt_tok *t, const int32_t *ids, int n, int from)
{
    size_t cap = 64, len = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    s[0] = 0;
    for (int i = from; i <= n; i++) {
        const char *p = i < n ? rt_tok_decode_piece(t, i ? ids[i - 1] : -1, ids[i])
                              : rt_tok_decode_flush(t);
        size_t m = strlen(p);
        while (len + m + 1 > cap)
            s = realloc(s, cap *= 2);
        assert_non_null(s);
        memcpy(s + len, p, m + 1);
        len += m;
    }
    return s;
}

/* text encodes to the same ids with a and b, which decode (after BOS) to
 * the same text when back. */
static void same(rt_tok *a, rt_tok *b, const char *text, int bos, int back)
{
    int32_t x[512], y[512];
    int nx, ny;
    rt_err e = {0};
    assert_int_equal(rt_tok_encode(a, text, bos, x, N(x), &nx, &e), 0);
    assert_int_equal(rt_tok_encode(b, text, bos, y, N(y), &ny, &e), 0);
    if (nx != ny || memcmp(x, y, sizeof *x * (size_t)nx))
        fail_msg("'%s': %d and %d ids, or different ones", text, nx, ny);
    int from = bos && nx && x[0] == rt_tok_bos(a);
    if (!back)
        return;
    char *sx = decode(a, x, nx, from), *sy = decode(b, y, ny, from);
    assert_string_equal(sx, sy);
    free(sx);
    free(sy);
}

/* decode(encode(text)) == text, after BOS. */
static void round_trip(rt_tok *t, const char *text)
{
    int32_t ids[512];
    int n;
    rt_err e = {0};
    assert_int_equal(rt_tok_encode(t, text, 1, ids, N(ids), &n, &e), 0);
    char *s = decode(t, ids, n, n && ids[0] == rt_tok_bos(t) && t->add_bos);
    assert_string_equal(s, text);
    free(s);
}

static const char *const texts[] = {
    "hello", "hello world's 123", "  two  spaces  ", "line\nnext\n\n\r\nend\n",
    "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80!", "\x01\x7F tab\there", " ",
    "hi<|endoftext|>there", "Hello world's 123", "x   y", "a\n\nb", "IT'S", "x12y",
    "o o", "a  b", "hello</s>world", "the cat sat on the mat",
};

/* ---- SentencePiece (tokenizer.ggml.model llama) ------------------------------------ */

static void test_spm_encode(void **state)
{
    (void)state;
    Voc v;
    spm_voc(&v);
    GgufWriter *w = voc_kv(&v, 0);
    gw_u32(w, "tokenizer.ggml.bos_token_id", S_BOS);
    gw_u32(w, "tokenizer.ggml.eos_token_id", S_EOS);
    gw_u32(w, "tokenizer.ggml.padding_token_id", UINT32_MAX);     /* none */
    gw_str(w, "tokenizer.chat_template", "{{ bos_token }}\n{{ messages }}");
    rt_tok *t = open_ok(put_w(w, "spm.gguf", 1));
    assert_int_equal(rt_tok_size(t), S_N);
    assert_int_equal(rt_tok_bos(t), S_BOS);
    assert_int_equal(rt_tok_eos(t), S_EOS);
    assert_string_equal(rt_tok_chat_template(t), "{{ bos_token }}\n{{ messages }}");
    /* ends: EOS, and <|im_end|> by its text (llama.cpp's end of generation) */
    assert_true(rt_tok_is_end(t, S_EOS) && rt_tok_is_end(t, S_IMEND));
    assert_false(rt_tok_is_end(t, S_BOS) || rt_tok_is_end(t, S_USER));
    /* _hell: _h -4, el -3, ll -1: ll joins first; then e+ll and ll+o are no
     * tokens, el is gone; _h, then _h+e = _he (-5); _he+ll is none */
    ENCODES(t, "hell", 1, S_BOS, S_MHE, S_LL);
    /* _hello: ll; llo (-0.5); _h; _he; _hello (-6) */
    ENCODES(t, "hello", 1, S_BOS, S_MHELLO);
    ENCODES(t, "hello", 0, S_MHELLO);
    /* _lll: the two ll tie at -1; the left one joins, lll is no token */
    ENCODES(t, "lll", 0, S_META, S_LL, S_L);
    /* _Hello: H is no token, so no pair with it: _ H e llo; H as its byte */
    ENCODES(t, "Hello", 0, S_META, S_BYTE + 'H', S_E, S_LLO);
    ENCODES(t, "\xC3\xA9", 0, S_META, S_EACUTE);
    /* 日 (E6 97 A5) is no token: its three bytes' */
    ENCODES(t, "\xE6\x97\xA5", 0, S_META, S_BYTE + 0xE6, S_BYTE + 0x97, S_BYTE + 0xA5);
    /* _o__o: __ (-7) is the only pair that is a token */
    ENCODES(t, "o  o", 0, S_META, S_O, S_MM, S_O);
    /* special tokens whole, user-defined and control alike; each stretch
     * after one gets its own _: he, <|user|>, _lo (_l is no token: _ lo) */
    ENCODES(t, "he<|user|>lo", 0, S_MHE, S_USER, S_META, S_LO);
    ENCODES(t, "hello</s>", 1, S_BOS, S_MHELLO, S_EOS);
    ENCODES(t, "<s>hello", 1, S_BOS, S_BOS, S_MHELLO);
    /* without strip, the space after <|user|> is text: __lo: lo (-2)
     * before __ (-7) */
    ENCODES(t, "he<|user|> lo", 0, S_MHE, S_USER, S_MM, S_LO);
    ENCODES(t, "", 1, S_BOS);
    encodes(t, "", 0, NULL, 0);
    /* U+2581 in the text is a space, as llama.cpp takes it */
    ENCODES(t, META "hello", 0, S_META, S_MHELLO);
    /* a text that is not UTF-8 is refused */
    int32_t ids[8];
    int n;
    rt_err e = {0};
    assert_int_equal(rt_tok_encode(t, "a\xFF", 0, ids, N(ids), &n, &e), RT_EINVAL);
    assert_string_equal(e.msg, "the text is not valid UTF-8 at byte 1");
    rt_tok_close(t);
    voc_free(&v);
}

static void test_spm_decode(void **state)
{
    (void)state;
    Voc v;
    spm_voc(&v);
    rt_tok *t = open_ok(put_w(voc_kv(&v, 0), "spm.gguf", 0));
    /* no bos_token_id: llama.cpp's 1, and EOS 2 */
    assert_int_equal(rt_tok_bos(t), S_BOS);
    assert_int_equal(rt_tok_eos(t), S_EOS);
    assert_null(rt_tok_chat_template(t));
    /* a normal token: _ a space, the first one dropped after BOS or at
     * the start (add_space_prefix) */
    assert_string_equal(rt_tok_decode_piece(t, S_BOS, S_MHELLO), "hello");
    assert_string_equal(rt_tok_decode_piece(t, -1, S_MHELLO), "hello");
    assert_string_equal(rt_tok_decode_piece(t, S_O, S_MHELLO), " hello");
    assert_string_equal(rt_tok_decode_piece(t, S_O, S_MM), "  ");
    /* a byte token its byte, held back until its character is whole */
    assert_string_equal(rt_tok_decode_piece(t, S_O, S_BYTE + 'H'), "H");
    assert_string_equal(rt_tok_decode_piece(t, S_O, S_BYTE + 0xE6), "");
    assert_string_equal(rt_tok_decode_piece(t, S_BYTE + 0xE6, S_BYTE + 0x97), "");
    assert_string_equal(rt_tok_decode_piece(t, S_BYTE + 0x97, S_BYTE + 0xA5), "\xE6\x97\xA5");
    /* control, user-defined and unknown tokens: their text as it is;
     * unused ones nothing */
    assert_string_equal(rt_tok_decode_piece(t, S_O, S_EOS), "</s>");
    assert_string_equal(rt_tok_decode_piece(t, S_O, S_USER), "<|user|>");
    assert_string_equal(rt_tok_decode_piece(t, S_O, S_UNK), "<unk>");
    assert_string_equal(rt_tok_decode_piece(t, S_O, S_PAD), "");
    static const char *const back[] = {"hello", "hell lll", "Hello \xE6\x97\xA5 \xC3\xA9!",
                                       "o  o", "  he  "};
    for (int i = 0; i < N(back); i++)
        round_trip(t, back[i]);
    rt_tok_close(t);
    voc_free(&v);
}

/* add_bos_token, add_eos_token, add_space_prefix; eot and eom ids; Phi-3's
 * special tokens that take the spaces after them. */
static void test_spm_flags(void **state)
{
    (void)state;
    Voc v;
    spm_voc(&v);
    GgufWriter *w = voc_kv(&v, 0);
    gw_bool(w, "tokenizer.ggml.add_bos_token", 0);
    gw_bool(w, "tokenizer.ggml.add_eos_token", 1);
    gw_bool(w, "tokenizer.ggml.add_space_prefix", 0);
    gw_i32(w, "tokenizer.ggml.eot_token_id", S_USER);
    gw_u64(w, "tokenizer.ggml.eom_token_id", S_PAD);
    rt_tok *t = open_ok(put_w(w, "spm-flags.gguf", 1));
    /* no _ first: h e l l o: ll, llo; h+e and e+llo are no tokens */
    ENCODES(t, "hello", 1, S_H, S_E, S_LLO, S_EOS);
    ENCODES(t, "hello", 0, S_H, S_E, S_LLO);
    ENCODES(t, " hello", 0, S_MHELLO);
    /* no space dropped first */
    assert_string_equal(rt_tok_decode_piece(t, S_BOS, S_MHELLO), " hello");
    assert_true(rt_tok_is_end(t, S_EOS) && rt_tok_is_end(t, S_USER) && rt_tok_is_end(t, S_PAD));
    rt_tok_close(t);

    w = voc_kv(&v, 0);
    gw_str(w, "general.name", "Phi-3 mini 4k instruct");
    t = open_ok(put_w(w, "spm-phi3.gguf", 1));
    /* Phi-3: <|user|> takes the spaces after it (ASCII's, as llama.cpp),
     * <s> does not: _lo, then __lo (lo before __) */
    ENCODES(t, "he<|user|>  \tlo", 0, S_MHE, S_USER, S_META, S_LO);
    ENCODES(t, "<s> lo", 0, S_BOS, S_MM, S_LO);
    /* U+3000 is no ASCII space: it stays, as its bytes (no token) */
    ENCODES(t, "<|user|>\xE3\x80\x80", 0, S_USER, S_META, S_BYTE + 0xE3, S_BYTE + 0x80,
            S_BYTE + 0x80);
    rt_tok_close(t);
    voc_free(&v);
}

/* llama2.c's tokenizer.bin and the GGUF that llama.cpp's
 * convert-llama2c-to-ggml makes of it (<unk>, <s>, </s> by those names
 * and types, spaces as U+2581, byte tokens typed byte, its ids; none as
 * 0xFFFFFFFF): the same ids and the same text back. */
static void test_spm_as_bin(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        float score;
    } words[] = {{" ", -1}, {"h", 0},   {"e", 0},     {"l", 0},    {"o", 0},       {"he", 5},
                 {"el", 4.5f}, {"ll", 4}, {"llo", 3}, {"hello", 1}, {"\xC3\xA9", 0}, {" t", 2},
                 {"t", 0},   {"a", 0},   {"c", 0},    {" c", 1.5f}, {"at", 2.5f},   {" cat", 6}};
    char buf[64];
    size_t size = 4;
    Voc v = {.model = "llama"};
    sp_base(&v);
    retext(&v, S_BOS, "\n<s>\n");
    retext(&v, S_EOS, "\n</s>\n");
    for (int i = 0; i < N(words); i++)
        add(&v, words[i].text, words[i].score, RT_TOK_T_NORMAL);
    /* tokenizer.bin: i32 max_token_length, then f32 score, i32 length, bytes */
    for (int i = 0; i < v.n; i++)
        size += 8 + strlen(v.tok[i]);
    unsigned char *bin = malloc(size), *p = bin;
    int32_t maxlen = 16;
    memcpy(p, &maxlen, 4), p += 4;
    for (int i = 0; i < v.n; i++) {
        int32_t len = (int32_t)strlen(v.tok[i]);
        memcpy(p, &v.score[i], 4), memcpy(p + 4, &len, 4), memcpy(p + 8, v.tok[i], (size_t)len);
        p += 8 + len;
    }
    const char *bp = tl_tmp_path("t.bin");
    tl_put_file(bp, bin, size);
    free(bin);
    rt_tok *a = open_ok(bp);
    retext(&v, S_BOS, "<s>");
    retext(&v, S_EOS, "</s>");
    for (int i = S_META; i < v.n; i++)
        retext(&v, i, meta(buf, v.tok[i]));
    GgufWriter *w = voc_kv(&v, 0);
    gw_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gw_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gw_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gw_u32(w, "tokenizer.ggml.seperator_token_id", UINT32_MAX);
    gw_u32(w, "tokenizer.ggml.padding_token_id", UINT32_MAX);
    rt_tok *b = open_ok(put_w(w, "llama2c.gguf", 1));
    assert_int_equal(rt_tok_size(a), rt_tok_size(b));
    assert_int_equal(rt_tok_bos(b), 1);
    assert_int_equal(rt_tok_eos(b), 2);
    /* </s> is text in a tokenizer.bin; run.c drops the first space only
     * after BOS, the GGUF's decoding at the start too */
    for (int i = 0; i < N(texts); i++)
        for (int bos = 0; bos < 2 && !strstr(texts[i], "</s>"); bos++)
            same(a, b, texts[i], bos, bos);
    /* _cat: at (2.5) joins before _c (1.5); c+at is no token; then _c,
     * and _c + at = _cat (6) */
    ENCODES(a, "cat", 0, S_META + 17);
    ENCODES(b, "cat", 0, S_META + 17);
    rt_tok_close(a);
    rt_tok_close(b);
    voc_free(&v);
}

/* Llama 2's tokenizer.json (hftok.h) and a GGUF of the same tokens whose
 * scores put the merges in their order: the same ids and text back. */
static void test_spm_as_json(void **state)
{
    (void)state;
    static const HfPair m[] = {
        {" ", "h"}, {"e", "l"}, {"l", "o"},   {" h", "el"}, {" hel", "lo"}, {" ", "w"},
        {"o", "r"}, {" w", "or"}, {"l", "d"}, {" wor", "ld"}, {" ", " "},   {"o", " "},
        {" ", "t"}, {"h", "e"}, {" t", "he"}, {"a", "t"},   {" ", "c"},   {" c", "at"},
    };
    static const char *sp_bos =
        "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", "
        "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], "
        "\"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}}";
    size_t n;
    char *json = hf_tokenizer_json(HF_TOK_LLAMA, m, N(m), sp_bos, &n);
    assert_non_null(json);
    const char *jp = tl_tmp_path("llama.json");
    tl_put_file(jp, json, n);
    free(json);
    rt_tok *a = open_ok(jp);
    Voc v;
    sp_hf_voc(&v, m, N(m));
    rt_tok *b = open_ok(put_w(voc_kv(&v, 0), "llama-hf.gguf", 1));
    for (int i = 0; i < N(texts); i++)
        for (int bos = 0; bos < 2; bos++)
            same(a, b, texts[i], bos, 1);
    rt_tok_close(a);
    rt_tok_close(b);
    voc_free(&v);
}

/* ---- byte-level BPE (tokenizer.ggml.model gpt2) ----------------------------------- */

/* test_tokenizer.c's merges: merge i makes token 256 + i; the first three
 * would join across the pre-tokenizer's pieces and must never act. */
static const HfPair merges[] = {
    {"o", " "},  {"d", "'"},     {"s", " "},    {"H", "e"},   {"l", "l"},   {"He", "ll"},
    {"Hell", "o"}, {" ", "w"},   {"o", "r"},    {" w", "or"}, {"l", "d"},   {" wor", "ld"},
    {"'", "s"},  {" ", "1"},     {" 1", "2"},   {" 12", "3"}, {"1", "2"},   {" ", " "},
    {" ", "y"},  {"\n", "\n"},   {"'", "S"},
};
enum { HELLO = 262, WORLD = 267, APOS_S = 268, SP123 = 271, TWELVE = 272, SP2 = 273,
       SPY = 274, NLNL = 275, APOS_BIG_S = 276, EOT = 277, BOS = 278 };

/* gpt2 with pre-tokenizer pre; BOS and EOS <|bos|> and <|endoftext|>. */
static rt_tok *bpe_open(const char *pre, const char *name)
{
    Voc v;
    bpe_voc(&v, pre, merges, N(merges));
    GgufWriter *w = voc_kv(&v, 0);
    gw_u32(w, "tokenizer.ggml.bos_token_id", BOS);
    gw_u32(w, "tokenizer.ggml.eos_token_id", EOT);
    rt_tok *t = open_ok(put_w(w, name, 1));
    voc_free(&v);
    return t;
}

static void test_bpe_encode(void **state)
{
    (void)state;
    rt_tok *t = bpe_open("gpt-2", "gpt2.gguf");
    assert_int_equal(rt_tok_size(t), 279);
    assert_int_equal(rt_tok_bos(t), BOS);
    assert_int_equal(rt_tok_eos(t), EOT);
    assert_int_equal(rt_tok_find(t, " world"), WORLD);     /* tokens as bytes */
    /* "Hello" " world" "'s" " 123"; no BOS: gpt2 adds none by default */
    ENCODES(t, "Hello world's 123", 1, HELLO, WORLD, APOS_S, SP123);
    /* "x" "  " " y": \s+(?!\S) leaves the last space to the word */
    ENCODES(t, "x   y", 0, 'x', SP2, SPY);
    ENCODES(t, "a\n\nb", 0, 'a', '\n', '\n', 'b');
    ENCODES(t, "IT'S", 0, 'I', 'T', '\'', 'S');          /* contractions: lower case */
    ENCODES(t, "hi<|endoftext|>there", 0, 'h', 'i', EOT, 't', 'h', 'e', 'r', 'e');
    assert_true(rt_tok_is_end(t, EOT) && !rt_tok_is_end(t, BOS));
    assert_string_equal(rt_tok_decode_piece(t, -1, WORLD), " world");
    assert_string_equal(rt_tok_decode_piece(t, WORLD, EOT), "<|endoftext|>");
    for (int i = 0; i < N(texts); i++)
        round_trip(t, texts[i]);
    rt_tok_close(t);

    t = bpe_open("qwen2", "qwen2.gguf");
    /* digits one by one; a space before a digit stands alone */
    ENCODES(t, "Hello world's 123", 1, HELLO, WORLD, APOS_S, ' ', '1', '2', '3');
    ENCODES(t, "a\n\nb", 0, 'a', NLNL, 'b');                 /* \s*[\r\n]+ */
    ENCODES(t, "IT'S", 0, 'I', 'T', APOS_BIG_S);             /* (?i:'s) */
    rt_tok_close(t);

    t = bpe_open("llama-bpe", "llama3.gguf");
    /* BOS by default; \p{N}{1,3}: " " then "123", which is 12 and 3 */
    ENCODES(t, "Hello world's 123", 1, BOS, HELLO, WORLD, APOS_S, ' ', TWELVE, '3');
    ENCODES(t, "Hello world's 123", 0, HELLO, WORLD, APOS_S, ' ', TWELVE, '3');
    rt_tok_close(t);

    t = bpe_open("smollm", "smollm.gguf");
    /* each number character cut out before GPT-2's split */
    ENCODES(t, "Hello world's 123", 0, HELLO, WORLD, APOS_S, ' ', '1', '2', '3');
    ENCODES(t, "x12y", 0, 'x', '1', '2', 'y');
    rt_tok_close(t);
}

/* A special token beside a byte-level token of the same bytes (GPT-NeoX's
 * runs of spaces): lookups find the byte-level one; the special one is
 * taken out of the text whole. A byte without a token refuses a text
 * that holds it. */
static void test_bpe_specials(void **state)
{
    (void)state;
    Voc v;
    bpe_voc(&v, "gpt-2", merges, N(merges));
    add(&v, "  ", 0, RT_TOK_T_USER);                          /* id 279: SP2's bytes */
    add(&v, "[PAD280]", 0, RT_TOK_T_UNUSED);
    retext(&v, 'z', "[z]");                                   /* no token for z */
    rt_tok *t = open_ok(put_w(voc_kv(&v, 0), "gpt2-specials.gguf", 1));
    assert_int_equal(rt_tok_find(t, "  "), SP2);
    ENCODES(t, "x  y", 0, 'x', 279, 'y');
    ENCODES(t, "a [PAD280]", 0, 'a', ' ', '[', 'P', 'A', 'D', '2', '8', '0', ']');
    assert_string_equal(rt_tok_decode_piece(t, 'a', 280), "");      /* unused: nothing */
    assert_string_equal(rt_tok_decode_piece(t, 'a', 279), "  ");
    int32_t ids[8];
    int n;
    rt_err e = {0};
    assert_int_equal(rt_tok_encode(t, "a z", 0, ids, N(ids), &n, &e), RT_EINVAL);
    assert_string_equal(e.msg, "the text's byte 0x7A has no token");
    rt_tok_close(t);
    voc_free(&v);
}

/* GPT-2's, Qwen2's, SmolLM's and Llama 3's tokenizer.json (hftok.h) and
 * GGUFs of the same tokens: the same ids and text back. */
static void test_bpe_as_json(void **state)
{
    (void)state;
    static const struct {
        int style;
        const char *pre;
    } kinds[] = {{HF_TOK_GPT2, "gpt-2"},
                 {HF_TOK_QWEN2, "qwen2"},
                 {HF_TOK_DIGITS, "smollm"},
                 {HF_TOK_LLAMA3, "llama-bpe"}};
    for (int k = 0; k < N(kinds); k++) {
        size_t n;
        char *json = hf_tokenizer_json(kinds[k].style, merges, N(merges), NULL, &n);
        assert_non_null(json);
        const char *jp = tl_tmp_path("bpe.json");
        tl_put_file(jp, json, n);
        free(json);
        rt_tok *a = open_ok(jp);
        Voc v;
        bpe_voc(&v, kinds[k].pre, merges, N(merges));
        GgufWriter *w = voc_kv(&v, 0);
        gw_bool(w, "tokenizer.ggml.add_bos_token", 0);
        rt_tok *b = open_ok(put_w(w, "bpe.gguf", 0));
        for (int i = 0; i < N(texts); i++)
            /* Llama 3's file has no <|endoftext|>: its ids differ there */
            if (kinds[k].style != HF_TOK_LLAMA3 || !strstr(texts[i], "<|"))
                same(a, b, texts[i], 0, 1);
        rt_tok_close(a);
        rt_tok_close(b);
        voc_free(&v);
    }
}

/* ---- refused ------------------------------------------------------------------------ */

static void test_bad_keys(void **state)
{
    (void)state;
    Voc v;
    spm_voc(&v);
    GgufWriter *w;
    bad_w(voc_kv(&v, K_MODEL), "key 'tokenizer.ggml.model': missing: the file holds no tokenizer");
    w = voc_kv(&v, K_MODEL);
    gw_str(w, "tokenizer.ggml.model", "bert");
    bad_w(w, "key 'tokenizer.ggml.model': 'bert' is not supported (kiln reads llama, "
             "SentencePiece's tokens and scores, and gpt2, byte-level BPE)");
    w = voc_kv(&v, K_MODEL);
    gw_u32(w, "tokenizer.ggml.model", 1);
    bad_w(w, "key 'tokenizer.ggml.model': not a string");
    bad_w(voc_kv(&v, K_TOKENS),
          "key 'tokenizer.ggml.tokens': missing: the file holds no vocabulary");
    w = voc_kv(&v, K_TOKENS);
    gw_arr(w, "tokenizer.ggml.tokens", GW_I32, 3, (int32_t[]){1, 2, 3});
    bad_w(w, "key 'tokenizer.ggml.tokens': not an array of strings");
    /* scores and types: of the tokens' count, numbers and integers */
    w = voc_kv(&v, K_SCORES);
    gw_arr(w, "tokenizer.ggml.scores", GW_F32, 5, v.score);
    bad_w(w, "key 'tokenizer.ggml.scores': 5 elements, but tokenizer.ggml.tokens has 276");
    w = voc_kv(&v, K_SCORES);
    gw_arr_str(w, "tokenizer.ggml.scores", (uint64_t)v.n, (const char *const *)v.tok);
    bad_w(w, "key 'tokenizer.ggml.scores': not an array of numbers (f32)");
    v.score[7] = NAN;
    bad_voc(&v, "key 'tokenizer.ggml.scores': element 7: NaN");
    v.score[7] = 0;
    w = voc_kv(&v, K_TYPES);
    gw_arr(w, "tokenizer.ggml.token_type", GW_F32, (uint64_t)v.n, v.score);
    bad_w(w, "key 'tokenizer.ggml.token_type': not an array of integers");
    w = voc_kv(&v, K_TYPES);
    gw_arr(w, "tokenizer.ggml.token_type", GW_I32, 9, v.type);
    bad_w(w, "key 'tokenizer.ggml.token_type': 9 elements, but tokenizer.ggml.tokens has 276");
    v.type[4] = 9;
    bad_voc(&v, "key 'tokenizer.ggml.token_type': element 4: not a token type (0 to 6: "
                "undefined, normal, unknown, control, user-defined, unused, byte)");
    v.type[4] = RT_TOK_T_BYTE;
    v.type[S_H] = RT_TOK_T_BYTE;
    bad_voc(&v, "key 'tokenizer.ggml.tokens': element 260: 'h' is a byte token "
                "(tokenizer.ggml.token_type), but not <0xBB>");
    v.type[S_H] = RT_TOK_T_NORMAL;
    /* the tokens: none empty, none twice */
    retext(&v, S_E, "h");
    bad_voc(&v, "key 'tokenizer.ggml.tokens': elements 260 and 261 are both 'h'");
    retext(&v, S_E, "");
    bad_voc(&v, "key 'tokenizer.ggml.tokens': element 261: an empty token");
    retext(&v, S_E, "e");
    /* ids: integers below the vocabulary's size, or none */
    static const struct {
        const char *key;
        int type;
        int64_t v;
        const char *want;
    } ids[] = {
        {"tokenizer.ggml.bos_token_id", GW_U32, 276,
         "276 is not a token id (the vocabulary has 276 tokens)"},
        {"tokenizer.ggml.eot_token_id", GW_I32, -5,
         "-5 is not a token id (the vocabulary has 276 tokens)"},
        {"tokenizer.ggml.padding_token_id", GW_U64, -1, "18446744073709551615 is not a token id"},
        {"tokenizer.ggml.eos_token_id", GW_STR, 0, "not an integer"},
        {"tokenizer.ggml.unknown_token_id", GW_F32, 0, "not an integer"},
        {"tokenizer.ggml.add_bos_token", GW_U8, 1, "not a bool"},
        {"tokenizer.chat_template", GW_U32, 0, "not a string"},
    };
    for (int i = 0; i < N(ids); i++) {
        char want[200];
        w = voc_kv(&v, 0);
        if (ids[i].type == GW_U32)
            gw_u32(w, ids[i].key, (uint32_t)ids[i].v);
        else if (ids[i].type == GW_I32)
            gw_i32(w, ids[i].key, (int32_t)ids[i].v);
        else if (ids[i].type == GW_U64)
            gw_u64(w, ids[i].key, (uint64_t)ids[i].v);
        else if (ids[i].type == GW_STR)
            gw_str(w, ids[i].key, "2");
        else if (ids[i].type == GW_F32)
            gw_f32(w, ids[i].key, 0);
        else
            gw_u8(w, ids[i].key, 1);
        snprintf(want, sizeof want, "key '%s': %s", ids[i].key, ids[i].want);
        bad_w(w, want);
    }
    w = voc_kv(&v, 0);
    gw_u32(w, "tokenizer.ggml.bos_token_id", UINT32_MAX);
    bad_w(w, "key 'tokenizer.ggml.bos_token_id': none, but BOS is to be added "
             "(tokenizer.ggml.add_bos_token)");
    w = voc_kv(&v, 0);
    gw_i32(w, "tokenizer.ggml.eos_token_id", -1);
    gw_bool(w, "tokenizer.ggml.add_eos_token", 1);
    bad_w(w, "key 'tokenizer.ggml.eos_token_id': none, but EOS is to be added "
             "(tokenizer.ggml.add_eos_token)");
    voc_free(&v);
}

/* A token holding a NUL: an array of strings written byte by byte (u32
 * element type 8, u64 count, each u64 length and bytes). */
static void test_bad_nul(void **state)
{
    (void)state;
    Voc v;
    spm_voc(&v);
    size_t size = 12;
    for (int i = 0; i < v.n; i++)
        size += 8 + strlen(v.tok[i]) + (i == S_E);
    unsigned char *raw = malloc(size), *p = raw;
    uint32_t str = GW_STR;
    uint64_t count = (uint64_t)v.n;
    memcpy(p, &str, 4), memcpy(p + 4, &count, 8), p += 12;
    for (int i = 0; i < v.n; i++) {
        uint64_t len = strlen(v.tok[i]) + (i == S_E);
        memcpy(p, &len, 8), memcpy(p + 8, i == S_E ? "e\0" : v.tok[i], len), p += 8 + len;
    }
    GgufWriter *w = voc_kv(&v, K_TOKENS);
    gw_kv_raw(w, "tokenizer.ggml.tokens", GW_ARR, raw, size);
    free(raw);
    bad_w(w, "key 'tokenizer.ggml.tokens': element 261: holds a NUL byte");
    voc_free(&v);
}

static void test_bad_bpe(void **state)
{
    (void)state;
    Voc v;
    bpe_voc(&v, "deepseek-llm", merges, N(merges));
    GgufWriter *w;
    bad_voc(&v, "key 'tokenizer.ggml.pre': 'deepseek-llm' is not a pre-tokenizer kiln has "
                "(gpt-2, llama-bpe, qwen2, smollm and their llama.cpp aliases); pass the prompt "
                "as ids (--tokens)");
    bad_w(voc_kv(&v, K_PRE), "key 'tokenizer.ggml.pre': missing: llama.cpp then splits as its "
                             "'default' (punctuation runs cut before GPT-2's split), which kiln "
                             "does not have; pass the prompt as ids (--tokens)");
    v.pre = "gpt-2";
    w = voc_kv(&v, 0);
    gw_bool(w, "tokenizer.ggml.add_bos_token", 1);
    bad_w(w, "key 'tokenizer.ggml.bos_token_id': none, but BOS is to be added "
             "(tokenizer.ggml.add_bos_token)");
    bad_w(voc_kv(&v, K_MERGES),
          "key 'tokenizer.ggml.merges': missing (gpt2's BPE needs its merges)");
    static const struct {
        const char *merge, *want;
    } bad[] = {
        {"Hello", "element 0: 'Hello' is not two tokens with a space between"},
        {"H ", "element 0: 'H ' is not two tokens with a space between"},
        {"H zz", "element 0: 'H zz': the second is not a token"},
        {"zz H", "element 0: 'zz H': the first is not a token"},
        {"a b", "element 0: 'a b': what they make is not a token"},
        {"H e \xC4\xA0", "element 0: U+0020 is not in ByteLevel's alphabet"},
    };
    for (int i = 0; i < N(bad); i++) {
        char *was = v.merge[0], want[200];
        v.merge[0] = (char *)bad[i].merge;
        snprintf(want, sizeof want, "key 'tokenizer.ggml.merges': %s", bad[i].want);
        bad_voc(&v, want);
        v.merge[0] = was;
    }
    v.merge[v.nm++] = strdup("H e");
    bad_voc(&v, "key 'tokenizer.ggml.merges': element 21 repeats element 3");
    free(v.merge[--v.nm]);
    /* a normal token is in ByteLevel's alphabet: no raw space, valid UTF-8 */
    retext(&v, 'x', "a b");
    bad_voc(&v, "key 'tokenizer.ggml.tokens': element 120: 'a b' is not in ByteLevel's "
                "alphabet (U+0020 is no byte's character)");
    retext(&v, 'x', "\xFF");
    bad_voc(&v, "key 'tokenizer.ggml.tokens': element 120: not valid UTF-8");
    voc_free(&v);
}

/* Every cut of a good file: refused in one line (by the GGUF reader or
 * the tokenizer's keys), or accepted (a cut in the padding at its end),
 * never a crash. */
static void test_bad_cuts(void **state)
{
    (void)state;
    Voc v;
    bpe_voc(&v, "qwen2", merges, N(merges));
    char good[256], p[256];
    strcpy(good, put_w(voc_kv(&v, 0), "good.gguf", 0));
    strcpy(p, tl_tmp_path("cut.gguf"));
    size_t size;
    char *s = tl_get_file(good, &size);
    for (size_t cut = 0; cut < size; cut++) {
        rt_tok *t = (rt_tok *)1;
        rt_err e = {0};
        tl_put_file(p, s, cut);
        int rc = rt_tok_open(p, &t, &e);
        assert_true(rc == 0 || (rc == RT_EINVAL && !t && !strchr(e.msg, '\n')));
        rt_tok_close(t);
    }
    free(s);
    voc_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spm_encode),   cmocka_unit_test(test_spm_decode),
        cmocka_unit_test(test_spm_flags),    cmocka_unit_test(test_spm_as_bin),
        cmocka_unit_test(test_spm_as_json),  cmocka_unit_test(test_bpe_encode),
        cmocka_unit_test(test_bpe_specials), cmocka_unit_test(test_bpe_as_json),
        cmocka_unit_test(test_bad_keys),     cmocka_unit_test(test_bad_nul),
        cmocka_unit_test(test_bad_bpe),      cmocka_unit_test(test_bad_cuts),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
