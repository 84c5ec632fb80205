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

/* A byte inside a JSON string: as ByteLevel's character when level, else
 * as it is (UTF-8 passes through byte by byte). */
static void put_char(HtBuf *b, unsigned char byte, int level)
{
    unsigned c = level ? byte_char(byte) : byte;
    char u[8];
    if (c == '"' || c == '\\')
        snprintf(u, sizeof u, "\\%c", c);
    else if (c < 0x80 || !level)
        snprintf(u, sizeof u, "%c", c);
    else
        snprintf(u, sizeof u, "%c%c", 0xC0 | c >> 6, 0x80 | (c & 0x3F));
    put(b, u);
}

static void put_chars(HtBuf *b, const char *s, int level)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        put_char(b, *p, level);
}

static const char *qwen2_re =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* model = { type: "BPE", ..., vocab, merges }: the bytes, then each
 * merge's token. */
static void put_model(HtBuf *b, int qwen2, const HfPair *m, int nm)
{
    char num[64];
    put(b, "{\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
           "\"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\", "
           "\"fuse_unk\": false, \"byte_fallback\": false,\n\"vocab\": {");
    for (int i = 0; i < 256 + nm; i++) {
        put(b, "\"");
        if (i < 256)
            put_char(b, (unsigned char)i, 1);
        else {
            put_chars(b, m[i - 256].a, 1);
            put_chars(b, m[i - 256].b, 1);
        }
        snprintf(num, sizeof num, "\": %d%s", i, i + 1 < 256 + nm ? ", " : "},\n\"merges\": [");
        put(b, num);
    }
    for (int i = 0; i < nm; i++) {
        put(b, qwen2 ? "[\"" : "\"");       /* ["A", "B"] or "A B" */
        put_chars(b, m[i].a, 1);
        put(b, qwen2 ? "\", \"" : " ");
        put_chars(b, m[i].b, 1);
        put(b, qwen2 ? "\"]" : "\"");
        put(b, i + 1 < nm ? ", " : "");
    }
    put(b, "]}");
}

char *hf_tokenizer_json(int qwen2, const HfPair *m, int nm, const char *post, size_t *len)
{
    HtBuf b = {0};
    char num[160];
    snprintf(num, sizeof num, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n"
             "\"added_tokens\": [{\"id\": %d, \"content\": \"<|endoftext|>\", ", 256 + nm);
    put(&b, num);
    put(&b, "\"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": "
            "false, \"special\": true},\n");
    snprintf(num, sizeof num, "{\"id\": %d, \"content\": \"<|bos|>\", \"special\": true}],\n",
             257 + nm);
    put(&b, num);
    put(&b, qwen2 ? "\"normalizer\": {\"type\": \"NFC\"},\n\"pre_tokenizer\": {\"type\": "
                    "\"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
                    "{\"Regex\": \""
                  : "\"normalizer\": null,\n\"pre_tokenizer\": {\"type\": \"ByteLevel\", "
                    "\"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true},\n");
    if (qwen2) {
        put_chars(&b, qwen2_re, 0);
        put(&b, "\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
                "\"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false}]},\n");
    }
    put(&b, "\"post_processor\": ");
    put(&b, post ? post : "null");
    put(&b, ",\n\"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, "
            "\"trim_offsets\": true, \"use_regex\": true},\n\"model\": ");
    put_model(&b, qwen2, m, nm);
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
 * "aa" "b", ... (the two-letter tokens all made by then). */
static HfPair letters(int k)
{
    static char one[26][2], two[26 * 26][3];     /* filled on the first call */
    if (!one[0][0])
        for (int i = 0; i < 26 * 26; i++) {
            one[i % 26][0] = (char)('a' + i % 26);
            two[i][0] = (char)('a' + i / 26), two[i][1] = (char)('a' + i % 26);
        }
    return k < 26 * 26 ? (HfPair){one[k / 26], one[k % 26]} : (HfPair){two[k / 26 - 26], one[k % 26]};
}

int hf_tokenizer_write(const char *path, int qwen2, int vocab)
{
    int ne = (int)(sizeof english / sizeof english[0]), nm = vocab - 258, i = ne;
    HfPair *m = nm >= ne ? malloc((size_t)nm * sizeof *m) : NULL;
    if (!m)
        return -1;
    memcpy(m, english, sizeof english);
    for (int k = 0; i < nm && k < 27 * 26 * 26; k++) {
        HfPair p = letters(k);
        int made = 0;
        for (int j = 0; j < ne; j++)
            made |= !strcmp(english[j].a, p.a) && !strcmp(english[j].b, p.b);
        if (!made)
            m[i++] = p;
    }
    size_t len;
    char *text = i == nm ? hf_tokenizer_json(qwen2, m, nm, NULL, &len) : NULL;
    free(m);
    FILE *f = text ? fopen(path, "wb") : NULL;
    int rc = f && fwrite(text, 1, len, f) == len ? 0 : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    free(text);
    return rc;
}
