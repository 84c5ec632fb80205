/* tests/gen/hftok.c: Hugging Face byte-level BPE tokenizer.json files
 * (hftok.h), written byte by byte: tokenizers.json's layout as
 * transformers saves it, trimmed to what kiln reads. */
#include "tests/gen/hftok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} HtBuf;

static void put(HtBuf *b, const char *s)
{
    size_t n = strlen(s);
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = 2 * (b->n + n + 1);
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p, b->cap = cap;
    }
    memcpy(b->s + b->n, s, n + 1);
    b->n += n;
}

/* GPT-2's bytes_to_unicode: the printable Latin-1 bytes stand for
 * themselves, the other 68 for U+0100.. in byte order. */
static unsigned byte_char(unsigned b)
{
    unsigned n = 0;
    for (unsigned c = 0; c < b; c++)
        n += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE));
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE ? b : 0x100 + n;
}

#define SP_META "\xE2\x96\x81"     /* U+2581, SentencePiece's space */

/* How a token's bytes are written: as they are (UTF-8 passes through
 * byte by byte), as ByteLevel's characters, or with spaces as U+2581. */
enum { RAW, LEVEL, META };

/* A byte inside a JSON string, written as `how` says. */
static void put_char(HtBuf *b, unsigned char byte, int how)
{
    unsigned c = how == LEVEL ? byte_char(byte) : byte;
    char u[8];
    if (how == META && c == ' ')
        snprintf(u, sizeof u, "%s", SP_META);
    else if (c == '"' || c == '\\')
        snprintf(u, sizeof u, "\\%c", c);
    else if (c < 0x80 || how != LEVEL)
        snprintf(u, sizeof u, "%c", c);
    else
        snprintf(u, sizeof u, "%c%c", 0xC0 | c >> 6, 0x80 | (c & 0x3F));
    put(b, u);
}

static void put_chars(HtBuf *b, const char *s, int how)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        put_char(b, *p, how);
}

static const char *qwen2_re =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *llama3_re =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* SentencePiece-style (hftok.h). */
#define SP(style) ((style) == HF_TOK_LLAMA || (style) == HF_TOK_METASPACE || (style) == HF_TOK_GEMMA)

/* The vocab's tokens before the merges', and the added tokens after them
 * (hftok.h). */
static int base_tokens(int style) { return SP(style) ? 3 + 256 + 27 : 256; }
static int added_after(int style) { return SP(style) ? 0 : style == HF_TOK_LLAMA3 ? 256 : 2; }

/* Llama 3.1's added token k, as its tokenizer.json names it. */
static void llama3_special(int k, char *out, size_t n)
{
    static const char *const named[] = {
        "<|begin_of_text|>",           "<|end_of_text|>",    "<|reserved_special_token_0|>",
        "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>",
        "<|reserved_special_token_2|>", "<|start_header_id|>", "<|end_header_id|>",
        "<|eom_id|>",                  "<|eot_id|>",         "<|python_tag|>"};
    if (k < (int)(sizeof named / sizeof named[0]))
        snprintf(out, n, "%s", named[k]);
    else
        snprintf(out, n, "<|reserved_special_token_%d|>", k - 8);
}

/* Base token i's text, written as `how` says. */
static void put_base(HtBuf *b, int style, int i)
{
    static const char *const special[] = {"<unk>", "<s>", "</s>"};
    char t[8];
    if (!SP(style))
        put_char(b, (unsigned char)i, LEVEL);
    else if (i < 3)
        put(b, special[i]);
    else if (i < 3 + 256)
        snprintf(t, sizeof t, "<0x%02X>", i - 3), put(b, t);
    else
        put_char(b, i == 259 ? ' ' : (unsigned char)('a' + i - 260), META);
}

/* model = { type: "BPE", ..., vocab, merges }: the base tokens, then each
 * merge's. */
static void put_model(HtBuf *b, int style, const HfPair *m, int nm)
{
    char num[64];
    int how = SP(style) ? META : LEVEL, nb = base_tokens(style);
    put(b, how == META ? "{\"type\": \"BPE\", \"dropout\": null, \"unk_token\": \"<unk>\", "
                         "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, "
                         "\"fuse_unk\": true, \"byte_fallback\": true, \"ignore_merges\": false"
           : style == HF_TOK_LLAMA3
               ? "{\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
                 "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, "
                 "\"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": true"
               : "{\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
                 "\"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\", "
                 "\"fuse_unk\": false, \"byte_fallback\": false");
    put(b, ",\n\"vocab\": {");
    for (int i = 0; i < nb + nm; i++) {
        put(b, "\"");
        if (i < nb)
            put_base(b, style, i);
        else {
            put_chars(b, m[i - nb].a, how);
            put_chars(b, m[i - nb].b, how);
        }
        snprintf(num, sizeof num, "\": %d%s", i, i + 1 < nb + nm ? ", " : "},\n\"merges\": [");
        put(b, num);
    }
    int arrays = style == HF_TOK_QWEN2 || style == HF_TOK_METASPACE;
    for (int i = 0; i < nm; i++) {
        put(b, arrays ? "[\"" : "\"");       /* ["A", "B"] or "A B" */
        put_chars(b, m[i].a, how);
        put(b, arrays ? "\", \"" : " ");
        put_chars(b, m[i].b, how);
        put(b, arrays ? "\"]" : "\"");
        put(b, i + 1 < nm ? ", " : "");
    }
    put(b, "]}");
}

/* The parts of a SentencePiece-style tokenizer.json before its model. */
static void put_sp_parts(HtBuf *b, int style, const char *post)
{
    static const char *const names[] = {"<unk>", "<s>", "</s>"};
    char item[200];
    put(b, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n\"added_tokens\": [");
    for (int i = 0; i < 3; i++) {
        snprintf(item, sizeof item, "{\"id\": %d, \"content\": \"%s\", \"single_word\": false, "
                 "\"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": "
                 "true}%s", i, names[i], i < 2 ? ",\n" : "],\n");
        put(b, item);
    }
    put(b, style == HF_TOK_GEMMA
               ? "\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, "
                 "\"content\": \"" SP_META "\"},\n\"pre_tokenizer\": {\"type\": \"Split\", "
                 "\"pattern\": {\"String\": \" \"}, \"behavior\": \"MergedWithPrevious\", "
                 "\"invert\": false},\n"
           : style == HF_TOK_LLAMA
               ? "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": "
                 "\"Prepend\", \"prepend\": \"" SP_META "\"}, {\"type\": \"Replace\", "
                 "\"pattern\": {\"String\": \" \"}, \"content\": \"" SP_META "\"}]},\n"
                 "\"pre_tokenizer\": null,\n"
               : "\"normalizer\": null,\n\"pre_tokenizer\": {\"type\": \"Metaspace\", "
                 "\"replacement\": \"" SP_META "\", \"prepend_scheme\": \"first\", "
                 "\"split\": false},\n");
    put(b, "\"post_processor\": ");
    put(b, post ? post : "null");
    put(b, ",\n\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", "
           "\"pattern\": {\"String\": \"" SP_META "\"}, \"content\": \" \"}, {\"type\": "
           "\"ByteFallback\"}, {\"type\": \"Fuse\"}");
    put(b, style == HF_TOK_GEMMA ? "]},\n\"model\": "
                                 : ", {\"type\": \"Strip\", \"content\": \" \", \"start\": 1, "
                                   "\"stop\": 0}]},\n\"model\": ");
}

/* A byte-level tokenizer.json's added tokens, ids after the nm merges':
 * Llama 3's 256, or GPT-2's "<|endoftext|>" and "<|bos|>". */
static void put_byte_added(HtBuf *b, int style, int nm)
{
    char num[160], name[64];
    put(b, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n\"added_tokens\": [");
    for (int k = 0; style == HF_TOK_LLAMA3 && k < 256; k++) {
        llama3_special(k, name, sizeof name);
        snprintf(num, sizeof num, "{\"id\": %d, \"content\": \"%s\", ", 256 + nm + k, name);
        put(b, num);
        put(b, "\"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": "
                "false, \"special\": true}");
        put(b, k < 255 ? ",\n" : "],\n");
    }
    if (style == HF_TOK_LLAMA3)
        return;
    snprintf(num, sizeof num, "{\"id\": %d, \"content\": \"<|endoftext|>\", ", 256 + nm);
    put(b, num);
    put(b, "\"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": "
            "false, \"special\": true},\n");
    snprintf(num, sizeof num, "{\"id\": %d, \"content\": \"<|bos|>\", \"special\": true}],\n",
             257 + nm);
    put(b, num);
}

/* The parts of a byte-level tokenizer.json before its model. */
static void put_byte_parts(HtBuf *b, int style, int nm, const char *post)
{
    const char *re = style == HF_TOK_QWEN2 ? qwen2_re : style == HF_TOK_LLAMA3 ? llama3_re : NULL;
    put_byte_added(b, style, nm);
    put(b, style == HF_TOK_QWEN2 ? "\"normalizer\": {\"type\": \"NFC\"},\n"
                                 : "\"normalizer\": null,\n");
    put(b, re ? "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
                "\"Split\", \"pattern\": {\"Regex\": \""
           : style == HF_TOK_DIGITS
               ? "\"pre_tokenizer\": {\"type\": \"Sequence\", "
                 "\"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\": true}, "
                 "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
                 "\"use_regex\": true}]},\n"
               : "\"pre_tokenizer\": {\"type\": \"ByteLevel\", "
                 "\"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true},\n");
    if (re) {               /* Qwen2's ByteLevel trims no offsets, Llama 3's does */
        put_chars(b, re, RAW);
        put(b, "\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
                "\"add_prefix_space\": false, \"trim_offsets\": ");
        put(b, style == HF_TOK_QWEN2 ? "false" : "true");
        put(b, ", \"use_regex\": false}]},\n");
    }
    put(b, "\"post_processor\": ");
    put(b, post ? post : "null");
    put(b, ",\n\"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, "
            "\"trim_offsets\": true, \"use_regex\": true},\n\"model\": ");
}

char *hf_tokenizer_json(int style, const HfPair *m, int nm, const char *post, size_t *len)
{
    HtBuf b = {0};
    if (SP(style))
        put_sp_parts(&b, style, post);
    else
        put_byte_parts(&b, style, nm, post);
    put_model(&b, style, m, nm);
    put(&b, "}\n");
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    *len = b.n;
    return b.s;
}

/* Each builds on tokens before it, so that text made of these words
 * encodes to few tokens. */
static const HfPair english[] = {
    {" ", "t"},  {"t", "h"},  {"h", "e"},  {" t", "h"}, {"th", "e"},  {" th", "e"},
    {"a", "t"},  {" ", "c"},  {" c", "a"}, {" ca", "t"}, {" ", "s"},  {" s", "a"},
    {" sa", "t"}, {" ", "o"}, {" o", "n"}, {" ", "m"},  {" m", "a"},  {" ma", "t"},
    {"i", "n"},  {"a", "n"},  {" ", "a"},  {" a", "n"}, {" an", "d"}, {"e", "r"},
    {"r", "e"},  {"o", "n"},  {"e", "s"},  {"o", "r"},  {"i", "s"},   {" ", "i"},
    {" i", "s"}, {" i", "t"},
};

/* Merge k of the letters: "a" "a", "a" "b", ... "z" "z", then "aa" "a",
 * "aa" "b", ..., then "aaa" "a", ... (the shorter tokens all made by
 * then); 26^2 + 26^3 + 26^4 of them. */
static HfPair letters(int k)
{
    enum { L2 = 26 * 26, L3 = 26 * 26 * 26 };
    static char one[26][2], two[L2][3], three[L3][4];     /* filled on the first call */
    if (!one[0][0])
        for (int i = 0; i < L3; i++) {
            for (int c = 0; c < 3; c++)
                three[i][c] = (char)('a' + i / (c == 0 ? L2 : c == 1 ? 26 : 1) % 26);
            if (i < L2)
                two[i][0] = (char)('a' + i / 26), two[i][1] = (char)('a' + i % 26);
            if (i < 26)
                one[i][0] = (char)('a' + i);
        }
    return k < L2        ? (HfPair){one[k / 26], one[k % 26]}
           : k < L2 + L3 ? (HfPair){two[k / 26 - 26], one[k % 26]}
                         : (HfPair){three[k / 26 - 26 - L2], one[k % 26]};
}

/* Llama 3's template: <|begin_of_text|> (id 128000 in a vocab of
 * 128256) first; its ByteLevel first, as Llama 3's file has it. */
static char *llama3_post(int bos)
{
    static char t[600];
    snprintf(t, sizeof t,
             "{\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\", "
             "\"add_prefix_space\": true, \"trim_offsets\": false, \"use_regex\": true}, "
             "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": "
             "\"<|begin_of_text|>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": "
             "0}}], \"pair\": [], \"special_tokens\": {\"<|begin_of_text|>\": {\"id\": "
             "\"<|begin_of_text|>\", \"ids\": [%d], \"tokens\": [\"<|begin_of_text|>\"]}}}]}",
             bos);
    return t;
}

/* The template that puts <s> (id 1) first. */
static const char *sp_bos =
    "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", "
    "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], "
    "\"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}}";

int hf_tokenizer_write(const char *path, int style, int vocab)
{
    int ne = (int)(sizeof english / sizeof english[0]), i = ne,
        nm = vocab - base_tokens(style) - added_after(style);
    HfPair *m = nm >= ne ? malloc((size_t)nm * sizeof *m) : NULL;
    if (!m)
        return -1;
    memcpy(m, english, sizeof english);
    for (int k = 0; i < nm && k < 26 * 26 + 26 * 26 * 26 + 26 * 26 * 26 * 26; k++) {
        HfPair p = letters(k);
        int made = 0;
        for (int j = 0; j < ne; j++)
            made |= !strcmp(english[j].a, p.a) && !strcmp(english[j].b, p.b);
        if (!made)
            m[i++] = p;
    }
    size_t len;
    char *text =
        i < nm ? NULL
               : hf_tokenizer_json(style, m, nm,
                                   SP(style)                 ? sp_bos
                                   : style == HF_TOK_LLAMA3 ? llama3_post(256 + nm)
                                                             : NULL,
                                   &len);
    free(m);
    FILE *f = text ? fopen(path, "wb") : NULL;
    int rc = f && fwrite(text, 1, len, f) == len ? 0 : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    free(text);
    return rc;
}
