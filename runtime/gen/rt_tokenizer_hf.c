/* runtime/gen/rt_tokenizer_hf.c: a Hugging Face tokenizer.json whose model is
 * BPE, byte-level (GPT-2, Qwen2 and DeepSeek-R1-Distill-Qwen, Llama 3) or
 * SentencePiece-style (Llama 2, Mistral: rt_tokenizer_sp.c): the file,
 * and the parts around the model that say how text is cut and put back
 * (rt_tokenizer_vocab.c reads the tokens).
 *
 * Contract (kiln_rt.h, rt_tok_read_hf). Every key is known, and a value
 * kiln cannot honour is refused by name, never ignored (HF's defaults
 * where a key is absent):
 *   tokenizer.json = { version, truncation: null, padding: null,
 *       added_tokens, normalizer, pre_tokenizer, post_processor, decoder,
 *       model }
 *   normalizer: null, NFC (taken as already true of the text:
 *       rt_tokenizer_bpe.c), or Llama 2's (rt_tokenizer_sp.c)
 *   pre_tokenizer: ByteLevel with use_regex (GPT-2's split), or a Sequence
 *       of a Split by GPT-2's, Qwen2's or Llama 3's pattern (Isolated, not
 *       inverted) and a ByteLevel without, or of Digits and a ByteLevel
 *       with (SmolLM's, StarCoder's); add_prefix_space false. Or
 *       Metaspace, or null after Llama 2's normalizer (rt_tokenizer_sp.c)
 *   post_processor: null, ByteLevel, TemplateProcessing whose single is
 *       [SpecialToken X]? Sequence A (X is then BOS), or a Sequence of these
 *   decoder: ByteLevel (there, and as a post-processor, add_prefix_space
 *       only moves offsets, so either value is taken); with spaces as
 *       U+2581, rt_tokenizer_sp.c's
 *   model, added_tokens: rt_tokenizer_vocab.c
 * EOS is the first of hf_eos's ends of a text that is a token; the
 * tokens that end generation are all of hf_eos that are. Messages: "PATH: WHERE:
 * what is wrong", WHERE a path in the file ("pre_tokenizer.pattern"). */
#include "runtime/gen/rt_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HF_N(a) ((int)(sizeof a / sizeof a[0]))

typedef struct {
    rt_json J;                  /* the whole text: values are read at places */
    rt_tok *t;
} hf_reader;

/* The Split patterns kiln knows, by RT_TOK_SPLIT_* (as JSON decodes them). */
static const char *const hf_patterns[] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

static const char *const hf_bytelevel_keys[] = {"type", "add_prefix_space", "trim_offsets",
                                                "use_regex"};

/* ByteLevel = { type, add_prefix_space, trim_offsets, use_regex }:
 * whether it splits (use_regex, true when absent). add_prefix_space must
 * be false in the pre-tokenizer, where it would change the ids; as a
 * decoder or post-processor (GPT-2's say true) it only moves offsets. */
static int hf_bytelevel(hf_reader *H, const unsigned char *at, const char *where, int pre,
                        int *use_regex)
{
    const unsigned char *val[HF_N(hf_bytelevel_keys)];
    int flag = 0, rc = rt_json_object_at(&H->J, at, where, hf_bytelevel_keys,
                                         HF_N(hf_bytelevel_keys), val);
    *use_regex = 1;
    if (!rc)
        rc = pre ? rt_json_false_at(&H->J, val[1], where, "add_prefix_space")
                 : rt_json_bool_at(&H->J, val[1], where, "add_prefix_space", &flag);
    if (!rc)
        rc = rt_json_bool_at(&H->J, val[2], where, "trim_offsets", &flag);
    if (!rc)
        rc = rt_json_bool_at(&H->J, val[3], where, "use_regex", use_regex);
    return rc;
}

/* Split = { type, pattern: { Regex: P }, behavior: "Isolated", invert: false },
 * P one of hf_patterns. */
static int hf_split(hf_reader *H, const unsigned char *at, const char *where)
{
    static const char *const keys[] = {"type", "pattern", "behavior", "invert"};
    static const char *const pkeys[] = {"Regex", "String"};
    const unsigned char *val[4], *pat[2] = {NULL, NULL};
    char *re = NULL, *behavior = NULL, pw[64];
    snprintf(pw, sizeof pw, "%s.pattern", where);
    int rc = rt_json_object_at(&H->J, at, where, keys, 4, val);
    if (!rc && (!val[1] || !val[2]))
        rc = rt_json_bad(&H->J, where, "needs a pattern and a behavior");
    if (!rc)
        rc = rt_json_object_at(&H->J, val[1], pw, pkeys, 2, pat);
    if (!rc)
        rc = pat[0] ? rt_json_string_at(&H->J, pat[0], &re) : rt_json_bad(&H->J, pw, "not a Regex");
    H->t->split = -1;
    for (int i = 0; !rc && i < HF_N(hf_patterns); i++)
        if (!strcmp(re, hf_patterns[i]))
            H->t->split = i;
    if (!rc && H->t->split < 0)
        rc = rt_json_bad(&H->J, pw,
                         "a regex kiln does not know (it splits as GPT-2's, Qwen2's or "
                         "Llama 3's)");
    if (!rc)
        rc = rt_json_string_at(&H->J, val[2], &behavior);
    if (!rc && strcmp(behavior, "Isolated"))
        rc = rt_json_bad(&H->J, where, "behavior: '%.40s' is not supported (kiln: Isolated)",
                         behavior);
    if (!rc)
        rc = rt_json_false_at(&H->J, val[3], where, "invert");
    free(re);
    free(behavior);
    return rc;
}

/* Digits = { type, individual_digits }: t->digits. */
static int hf_digits(hf_reader *H, const unsigned char *at, const char *where)
{
    static const char *const keys[] = {"type", "individual_digits"};
    const unsigned char *val[2];
    int each = 0, rc = rt_json_object_at(&H->J, at, where, keys, 2, val);
    if (!rc)
        rc = rt_json_bool_at(&H->J, val[1], where, "individual_digits", &each);
    H->t->digits = each ? RT_TOK_DIGITS_EACH : RT_TOK_DIGITS_RUNS;
    return rc;
}

/* pretokenizers = '[' Split ',' ByteLevel (without use_regex) ']'
 *               | '[' Digits ',' ByteLevel (with use_regex) ']' (SmolLM,
 *                 StarCoder: the numbers cut out first, then GPT-2's split) */
static int hf_pre_sequence(hf_reader *H, const unsigned char *at)
{
    static const char *const keys[] = {"type", "pretokenizers"};
    const char *w = "pre_tokenizer.pretokenizers";
    const unsigned char *val[2], *item[2] = {NULL, NULL};
    char *type[2] = {NULL, NULL};
    int n = 0, split = 1, rc = rt_json_object_at(&H->J, at, "pre_tokenizer", keys, 2, val);
    if (!rc)
        rc = rt_json_items(&H->J, val[1], w, 2, item, &n);
    if (!rc && n == 2)
        rc = rt_json_types(&H->J, item, 2, w, type);
    int digits = !rc && n == 2 && !strcmp(type[0], "Digits");
    if (!rc && (n != 2 || (strcmp(type[0], "Split") && !digits) || strcmp(type[1], "ByteLevel")))
        rc = rt_json_bad(&H->J, w, "kiln takes a Split or Digits, then a ByteLevel");
    if (!rc)
        rc = digits ? hf_digits(H, item[0], "pre_tokenizer.pretokenizers[0]")
                    : hf_split(H, item[0], "pre_tokenizer.pretokenizers[0]");
    if (!rc)
        rc = hf_bytelevel(H, item[1], "pre_tokenizer.pretokenizers[1]", 1, &split);
    if (!rc && split && !digits)
        rc = rt_json_bad(&H->J, "pre_tokenizer.pretokenizers[1]",
                         "use_regex: true is not supported after a Split");
    if (!rc && !split && digits)
        rc = rt_json_bad(&H->J, "pre_tokenizer.pretokenizers[1]",
                         "use_regex: false is not supported after Digits (kiln splits the text)");
    if (digits)
        H->t->split = RT_TOK_SPLIT_GPT2;
    free(type[0]);
    free(type[1]);
    return rc;
}

/* pre_tokenizer = ByteLevel (use_regex: GPT-2's split) | Sequence |
 * Metaspace (rt_tokenizer_sp.c) | null after the normalizer that puts
 * U+2581 for spaces */
static int hf_pre_tokenizer(hf_reader *H, const unsigned char *at)
{
    const char *w = "pre_tokenizer";
    char *type = NULL;
    int split = 0, sp = H->t->space != RT_TOK_BYTES;
    if (rt_json_null_at(&H->J, at))
        return sp ? 0 : rt_json_bad(&H->J, w, "none: kiln reads byte-level BPE split first, or "
                                    "spaces made U+2581 (a Metaspace, or Llama 2's normalizer)");
    int rc = rt_json_type_at(&H->J, at, w, &type);
    if (!rc && sp && !strcmp(type, "Split")) {
        free(type);
        return rt_tok_sp_split(&H->J, at);
    }
    if (!rc && sp)
        rc = rt_json_bad(&H->J, w, "type '%.40s' after a normalizer that makes spaces U+2581 is "
                         "not supported (kiln takes none, or a Split by \" \")", type);
    if (!rc && !strcmp(type, "Metaspace")) {
        rc = rt_tok_sp_pre(H->t, &H->J, at);
    } else if (!rc && !strcmp(type, "ByteLevel")) {
        rc = hf_bytelevel(H, at, w, 1, &split);
        if (!rc && !split)
            rc = rt_json_bad(&H->J, w, "use_regex: false is not supported (kiln splits the text)");
        H->t->split = RT_TOK_SPLIT_GPT2;
    } else if (!rc && !strcmp(type, "Sequence")) {
        rc = hf_pre_sequence(H, at);
    } else if (!rc) {
        rc = rt_json_bad(&H->J, w,
                         "type '%.40s' is not supported (kiln takes ByteLevel, a Sequence "
                         "of a Split or Digits and a ByteLevel, or Metaspace)",
                         type);
    }
    free(type);
    return rc;
}

/* normalizer = null | { type: "NFC" } | Llama 2's Sequence | Gemma's
 * Replace (rt_tokenizer_sp.c) */
static int hf_normalizer(hf_reader *H, const unsigned char *at)
{
    static const char *const keys[] = {"type"};
    const unsigned char *val[1];
    char *type = NULL;
    int rc = rt_json_null_at(&H->J, at) ? 0 : rt_json_type_at(&H->J, at, "normalizer", &type);
    if (!rc && type && (!strcmp(type, "Sequence") || !strcmp(type, "Replace"))) {
        free(type);
        return rt_tok_sp_normalizer(H->t, &H->J, at);
    }
    if (!rc && type && strcmp(type, "NFC"))
        rc = rt_json_bad(&H->J, "normalizer",
                         "type '%.40s' is not supported (kiln takes null, NFC, Llama 2's "
                         "Sequence or Gemma's Replace)", type);
    if (!rc && type)
        rc = rt_json_object_at(&H->J, at, "normalizer", keys, 1, val);
    free(type);
    return rc;
}

/* decoder = ByteLevel, or with spaces as U+2581 rt_tokenizer_sp.c's */
static int hf_decoder(hf_reader *H, const unsigned char *at)
{
    char *type = NULL;
    if (!rt_json_null_at(&H->J, at) && H->t->space != RT_TOK_BYTES)
        return rt_tok_sp_decoder(H->t, &H->J, at);
    int split, rc = rt_json_null_at(&H->J, at)
                        ? rt_json_bad(&H->J, "decoder", "none: kiln needs one to print text")
                        : rt_json_type_at(&H->J, at, "decoder", &type);
    if (!rc && strcmp(type, "ByteLevel"))
        rc = rt_json_bad(&H->J, "decoder", "type '%.40s' is not supported (kiln decodes with "
                         "ByteLevel)", type);
    if (!rc)
        rc = hf_bytelevel(H, at, "decoder", 0, &split);
    free(type);
    return rc;
}

/* ---- post_processor: the BOS a template puts first -------------------------------- */

/* piece = { SpecialToken: { id, type_id } } | { Sequence: { id, type_id } }:
 * *special whether it is a special token, its id malloc'd into *name. */
static int hf_piece(hf_reader *H, rt_json *c, const char *where, int *special, char **name)
{
    static const char *const keys[] = {"SpecialToken", "Sequence"};
    static const char *const inner[] = {"id", "type_id"};
    const unsigned char *val[2], *in[2] = {NULL, NULL};
    int64_t type_id;
    int rc = rt_json_object(c, where, keys, 2, val);
    if (!rc && !val[0] == !val[1])
        rc = rt_json_bad(&H->J, where, "needs one of SpecialToken and Sequence");
    *special = !rc && val[0];
    if (!rc)
        rc = rt_json_object_at(&H->J, val[0] ? val[0] : val[1], where, inner, 2, in);
    if (!rc && (!in[0] || !in[1]))
        rc = rt_json_bad(&H->J, where, "needs an id and a type_id");
    if (!rc)
        rc = rt_json_string_at(&H->J, in[0], name);
    rt_json v = rt_json_at(&H->J, in[1]);
    if (!rc)
        rc = rt_json_uint(&v, "type_id", &type_id);
    return rc;
}

/* single = '[' piece* ']', which must be [SpecialToken X]? Sequence A:
 * X malloc'd into *bos (NULL when none). */
static int hf_single(hf_reader *H, const unsigned char *at, const char *where, char **bos)
{
    rt_json c = rt_json_at(&H->J, at);
    char pw[128], *name = NULL;
    int seq = 0, special, n = 0,
        rc = rt_json_eat(&c, '[') ? rt_json_bad(&H->J, where, "not an array") : 0;
    *bos = NULL;
    for (int first = 1, more; !rc && (more = rt_json_next(&c, ']', first)) != 0; first = 0) {
        snprintf(pw, sizeof pw, "%s[%d]", where, n++);
        rc = more < 0 ? RT_EINVAL : hf_piece(H, &c, pw, &special, &name);
        if (!rc && (seq || (special && *bos) || (!special && strcmp(name, "A"))))
            rc = rt_json_bad(&H->J, where,
                             "kiln takes one special token at most, then the text (A)");
        if (!rc && special)
            *bos = name, name = NULL;
        seq |= !rc && !special;
        free(name);
        name = NULL;
    }
    if (!rc && !seq)
        rc = rt_json_bad(&H->J, where, "no Sequence A: where does the text go?");
    return rc;
}

/* special_tokens = '{' (name ':' { id, ids, tokens })* '}': the one id of
 * the entry `name`. */
static int hf_special_id(hf_reader *H, const unsigned char *at, const char *where,
                         const char *name, int *id)
{
    static const char *const keys[] = {"id", "ids", "tokens"};
    rt_json c = rt_json_at(&H->J, at);
    int rc = !at || rt_json_eat(&c, '{') ? rt_json_bad(&H->J, where, "not an object") : 0,
        found = 0;
    for (int first = 1, more; !rc && (more = rt_json_next(&c, '}', first)) != 0; first = 0) {
        char *k = NULL;
        const unsigned char *val[3];
        rc = more < 0 ? RT_EINVAL : rt_json_string(&c, &k);
        if (!rc && rt_json_eat(&c, ':'))
            rc = rt_json_syntax(&c, "expected ':'");
        int mine = !rc && !strcmp(k, name);
        free(k);
        if (!rc)
            rc = mine ? rt_json_object(&c, where, keys, 3, val) : rt_json_skip(&c);
        if (!rc && mine) {
            rt_json v = rt_json_at(&H->J, val[1]);
            int64_t x = -1;
            if (val[1] && !rt_json_eat(&v, '[') && !rt_json_uint(&v, "ids", &x) &&
                !rt_json_eat(&v, ']') && x < H->t->n)
                *id = (int)x, found = 1;
            else
                rc = rt_json_bad(&H->J, where, "'%.40s': ids must be one id below %d", name,
                                 H->t->n);
        }
    }
    if (!rc && !found)
        rc = rt_json_bad(&H->J, where, "no '%.40s'", name);
    return rc;
}

/* TemplateProcessing = { type, single, pair, special_tokens }: BOS. */
static int hf_template(hf_reader *H, const unsigned char *at, const char *where)
{
    static const char *const keys[] = {"type", "single", "pair", "special_tokens"};
    const unsigned char *val[4];
    char w[96], *bos = NULL;
    int id = -1, rc = rt_json_object_at(&H->J, at, where, keys, 4, val);
    snprintf(w, sizeof w, "%s.single", where);
    if (!rc)
        rc = val[1] ? hf_single(H, val[1], w, &bos) : rt_json_bad(&H->J, where, "no single");
    snprintf(w, sizeof w, "%s.special_tokens", where);
    if (!rc && bos && H->t->bos >= 0)
        rc = rt_json_bad(&H->J, where, "a second template with a special token");
    if (!rc && bos && !(rc = hf_special_id(H, val[3], w, bos, &id)))
        H->t->bos = id;
    free(bos);
    return rc;
}

/* post_processor = null | ByteLevel | TemplateProcessing | Sequence of
 * them (depth 0 only) */
static int hf_post(hf_reader *H, const unsigned char *at, const char *where, int depth)
{
    static const char *const keys[] = {"type", "processors"};
    const unsigned char *val[2];
    char *type = NULL;
    int split, rc = rt_json_null_at(&H->J, at) ? 0 : rt_json_type_at(&H->J, at, where, &type);
    if (!rc && type && !strcmp(type, "ByteLevel"))
        rc = hf_bytelevel(H, at, where, 0, &split);
    else if (!rc && type && !strcmp(type, "TemplateProcessing"))
        rc = hf_template(H, at, where);
    else if (!rc && type && !strcmp(type, "Sequence") && !depth)
        rc = rt_json_object_at(&H->J, at, where, keys, 2, val);
    else if (!rc && type)
        rc = rt_json_bad(&H->J, where,
                         "type '%.40s' is not supported (kiln takes ByteLevel, "
                         "TemplateProcessing, or a Sequence of them)",
                         type);
    if (!rc && type && !strcmp(type, "Sequence")) {
        rt_json c = rt_json_at(&H->J, val[1]);
        char w[64];
        if (!val[1] || rt_json_eat(&c, '['))
            rc = rt_json_bad(&H->J, where, "processors: not an array");
        for (int first = 1, more, i = 0; !rc && (more = rt_json_next(&c, ']', first)) != 0;
             first = 0, i++) {
            rt_json_ws(&c);
            snprintf(w, sizeof w, "post_processor.processors[%d]", i);
            rc = more < 0 ? RT_EINVAL : hf_post(H, c.p, w, 1);
            if (!rc)
                rc = rt_json_skip(&c);
        }
    }
    free(type);
    return rc;
}

/* ---- the file ------------------------------------------------------------------- */

static const char *const hf_top_keys[] = {
    "version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
    "post_processor", "decoder", "model"};

/* EOS: the first of these that is a token; generation ends at any of
 * them, and at the ends of a turn after them (chat models' generation
 * configs list those as EOS too). gpt-oss's harmony format ends a reply
 * at <|return|> or a tool call at <|call|>; its <|end|> ends a message
 * (the analysis before the answer), not the reply, so with <|return|> in
 * the vocabulary <|end|> is no end. */
static const char *const hf_eos[] = {
    "<|endoftext|>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
    "<|end_of_text|>",
    "</s>",
    "<eos>",                        /* Gemma's */
    "<|im_end|>",                   /* Qwen's chat */
    "<|eot_id|>", "<|eom_id|>",     /* Llama 3's */
    "<|end|>",                      /* Phi-3's */
    "<end_of_turn>",                /* Gemma's */
    "<|return|>", "<|call|>",       /* gpt-oss's */
};
enum { HF_EOS_TEXT = 5 };           /* hf_eos[0, 5): ends of a text, EOS */

/* The parts that say how text is cut and put back, then the tokens and
 * the BOS a template puts first (which must be a token). */
static int hf_parts(hf_reader *H, const unsigned char **val)
{
    int rc = 0;
    if (!rt_json_null_at(&H->J, val[1]))
        rc = rt_json_bad(&H->J, "truncation", "not supported (kiln encodes the whole text)");
    if (!rc && !rt_json_null_at(&H->J, val[2]))
        rc = rt_json_bad(&H->J, "padding", "not supported (kiln encodes one text)");
    if (!rc)
        rc = hf_normalizer(H, val[4]);
    if (!rc)
        rc = hf_pre_tokenizer(H, val[5]);
    if (!rc)
        rc = hf_decoder(H, val[7]);
    if (!rc)
        rc = val[8] ? rt_tok_read_vocab(H->t, &H->J, val[8], val[3])
                    : rt_json_bad(&H->J, "", "no model");
    if (!rc)
        rc = hf_post(H, val[6], "post_processor", 0);
    return rc;
}

int rt_tok_read_hf(rt_tok *t, const char *path, const char *text, size_t len, rt_err *e)
{
    const unsigned char *s = (const unsigned char *)text, *val[HF_N(hf_top_keys)];
    hf_reader H = {.J = {.p = s, .start = s, .end = s + len, .path = path, .e = e}, .t = t};
    rt_json c = H.J;
    t->format = RT_TOK_BPE;
    int rc = rt_json_object(&c, "", hf_top_keys, HF_N(hf_top_keys), val);
    rt_json_ws(&c);
    if (!rc && c.p != c.end)
        rc = rt_json_syntax(&c, "unexpected text after the object");
    if (!rc)
        rc = hf_parts(&H, val);
    for (int i = 0; !rc && t->eos < 0 && i < HF_EOS_TEXT; i++)
        t->eos = rt_tok_find(t, hf_eos[i]);
    int harmony = !rc && rt_tok_find(t, "<|return|>") >= 0;
    for (int i = 0, id; !rc && i < HF_N(hf_eos); i++)
        if ((id = rt_tok_find(t, hf_eos[i])) >= 0 && t->nends < RT_TOK_ENDS &&
            !(harmony && !strcmp(hf_eos[i], "<|end|>")))
            t->ends[t->nends++] = id;
    for (int i = 0; !rc && i < t->n; i++)
        if (t->len[i] > t->maxlen)
            t->maxlen = t->len[i];
    return rc;
}
