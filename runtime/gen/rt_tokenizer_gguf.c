/* runtime/gen/rt_tokenizer_gguf.c: the tokenizer in a GGUF file's metadata,
 * read as llama.cpp's vocabulary loader reads it, and its SentencePiece
 * merges by score.
 *
 * Contract (rt_gen.h, rt_tok_read_gguf). rt_tok_open hands over a file
 * that starts with "GGUF"; rt_gguf_open maps and checks it (its messages
 * for the file's structure), then these keys are read, each of the type
 * and size given or refused:
 *   tokenizer.ggml.model     string: llama (SentencePiece: scores, byte
 *                            tokens) or gpt2 (byte-level BPE with merges)
 *   tokenizer.ggml.tokens    array of N strings, ids 0 .. N-1: none empty,
 *                            none with a NUL, no two alike; gpt2's in
 *                            ByteLevel's alphabet (valid UTF-8, kept as
 *                            bytes) but control, user-defined and unknown
 *                            ones, which are text as it is
 *   tokenizer.ggml.token_type  N integers 0..6 (undefined, normal,
 *                            unknown, control, user-defined, unused,
 *                            byte); absent: all normal. A llama byte
 *                            token's text is <0xBB>
 *   tokenizer.ggml.scores    llama: N numbers, no NaN; absent: all 0
 *   tokenizer.ggml.merges    gpt2: strings "A B", cut at the first space
 *                            after A's first byte; A, B and AB tokens, no
 *                            pair twice; a merge's rank is its place
 *   tokenizer.ggml.pre       gpt2: the pre-tokenizer by llama.cpp's name
 *                            (tg_pres); another name, or none (llama.cpp
 *                            then splits by its "default", punctuation
 *                            runs before GPT-2's pattern), is refused
 *   tokenizer.ggml.{bos,eos,eot,eom,unknown,padding}_token_id  integers
 *                            below N, or none: -1 or 0xFFFFFFFF (what
 *                            llama.cpp's converters write for none);
 *                            absent: llama's BOS 1 and EOS 2 (llama.cpp's
 *                            defaults, when below N), else none
 *   tokenizer.ggml.{add_bos_token,add_eos_token,add_space_prefix}  bools;
 *                            absent: llama adds BOS and the space, gpt2
 *                            BOS only with Llama 3's pre-tokenizers; EOS
 *                            never. An added BOS or EOS must exist; gpt2
 *                            adds no space, whatever the key says (as
 *                            llama.cpp)
 *   tokenizer.chat_template  string, kept (rt_tok_chat_template)
 *   general.name             "phi3" or "phi-3" in it (any case): Phi-3's
 *                            special tokens take the spaces after them, as
 *                            llama.cpp sets (not <unk>, <s>, <|endoftext|>)
 * Other keys change nothing llama.cpp does for these two models, or are
 * not the tokenizer's. Messages: "PATH: key 'KEY': what is wrong".
 *
 * Encoding is llama.cpp's llama_tokenize with add_special and
 * parse_special (as llama-simple calls it): BOS first when added; tokens
 * of type control, user-defined and unknown are taken out of the text
 * whole (rt_tokenizer_bpe.c: the longest at the leftmost place), then
 * each stretch between them is encoded on its own:
 *   llama: spaces become U+2581, and with add_space_prefix one more goes
 *     first (rt_tokenizer_sp.c); the characters are symbols; while some
 *     adjacent pair of symbols makes a token's text, the pair whose token
 *     scores highest (the leftmost of equals) becomes one symbol; each
 *     symbol is then its token, or its bytes' tokens (<0xBB>, else the
 *     byte's own token; neither: the text is refused naming it);
 *   gpt2: byte-level BPE, the pre-tokenizer's split then merges by rank
 *     (rt_tokenizer_bpe.c);
 * and EOS last when added. Decoding goes by type: a normal token's text
 * (llama: U+2581 a space, and with add_space_prefix one space dropped
 * first after BOS or at the start, as run.c and Hugging Face decode;
 * llama-simple prints it), a llama byte token's byte, a control,
 * user-defined or unknown token's text as it is, unused and undefined
 * tokens nothing. Generation ends at EOS, EOT, EOM and the tokens
 * llama.cpp ends at by their text (tg_ends).
 * What differs from llama.cpp: the text must be valid UTF-8, and one
 * that needs a byte without a token is refused (llama.cpp drops the byte,
 * or fails); special tokens are taken out leftmost first (llama.cpp takes
 * each out everywhere, the longest first: they differ where two overlap
 * in the text); the byte-level patterns' \p{L} and \p{N} are Unicode
 * 14's and their contractions fold U+017F, as Hugging Face's
 * (rt_tokenizer_bpe.c); a merge whose parts or result are no tokens, and
 * an id past the vocabulary, are refused where llama.cpp goes on. */
#include "runtime/gen/rt_tok.h"
#include "runtime/rt_gguf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TG_N(a) ((int)(sizeof a / sizeof a[0]))
#define TG_MAX_TOKENS (1 << 24)
#define TG_NONE UINT32_MAX              /* an id llama.cpp's converters write for none */

typedef struct {
    rt_gguf g;
    rt_tok *t;
    const char *path;
    rt_err *e;
    int gpt2;                           /* tokenizer.ggml.model gpt2, else llama */
    int llama3;                         /* Llama 3's pre-tokenizer: BOS by default */
} tg_reader;

/* The pre-tokenizers kiln has, by the names llama.cpp gives them
 * (llama-vocab.cpp): GPT-2's split; Llama 3's (which llama.cpp also
 * encodes with ignore_merges and a BOS); Qwen2's; each number character
 * cut out before GPT-2's split (SmolLM's). */
static const struct {
    const char *name;
    int split, digits, llama3;
} tg_pres[] = {
    {"gpt-2", RT_TOK_SPLIT_GPT2, 0, 0},       {"phi-2", RT_TOK_SPLIT_GPT2, 0, 0},
    {"mpt", RT_TOK_SPLIT_GPT2, 0, 0},         {"olmo", RT_TOK_SPLIT_GPT2, 0, 0},
    {"jais", RT_TOK_SPLIT_GPT2, 0, 0},        {"roberta-bpe", RT_TOK_SPLIT_GPT2, 0, 0},
    {"gigachat", RT_TOK_SPLIT_GPT2, 0, 0},    {"llama3", RT_TOK_SPLIT_LLAMA3, 0, 1},
    {"llama-v3", RT_TOK_SPLIT_LLAMA3, 0, 1},  {"llama-bpe", RT_TOK_SPLIT_LLAMA3, 0, 1},
    {"falcon3", RT_TOK_SPLIT_LLAMA3, 0, 1},   {"dbrx", RT_TOK_SPLIT_LLAMA3, 0, 0},
    {"smaug-bpe", RT_TOK_SPLIT_LLAMA3, 0, 0}, {"qwen2", RT_TOK_SPLIT_QWEN2, 0, 0},
    {"deepseek-r1-qwen", RT_TOK_SPLIT_QWEN2, 0, 0}, {"megrez", RT_TOK_SPLIT_QWEN2, 0, 0},
    {"stablelm2", RT_TOK_SPLIT_QWEN2, 0, 0},  {"smollm", RT_TOK_SPLIT_GPT2, 1, 0},
    {"starcoder", RT_TOK_SPLIT_GPT2, 1, 0},   {"refact", RT_TOK_SPLIT_GPT2, 1, 0},
    {"command-r", RT_TOK_SPLIT_GPT2, 1, 0},   {"codeshell", RT_TOK_SPLIT_GPT2, 1, 0},
    {"exaone", RT_TOK_SPLIT_GPT2, 1, 0},      {"minerva-7b", RT_TOK_SPLIT_GPT2, 1, 0},
};

/* Texts of tokens llama.cpp ends generation at (its end-of-generation set). */
static const char *const tg_ends[] = {"<|eot_id|>", "<|im_end|>",  "<|end|>", "<end_of_turn>",
                                      "<|endoftext|>", "<|eom_id|>", "<EOT>"};

__attribute__((format(printf, 3, 4))) static int tg_bad(const tg_reader *R, const char *key,
                                                        const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return rt_errf(R->e, RT_EINVAL, "%s: key '%s': %s", R->path, key, what);
}

static int tg_oom(const tg_reader *R)
{
    return rt_errf(R->e, RT_EINTERNAL, "%s: out of memory", R->path);
}

/* The byte of a byte token's text "<0xBB>" (hex digits of either case), or -1. */
static int tg_hex(const char *p, size_t n)
{
    int v = 0;
    if (n != 6 || memcmp(p, "<0x", 3) || p[5] != '>')
        return -1;
    for (int i = 3; i < 5; i++) {
        int c = p[i] | 32;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* ---- keys ------------------------------------------------------------------ */

enum { TG_STR, TG_INT, TG_FLOAT };

static int tg_is(int etype, int kind)
{
    return kind == TG_STR   ? etype == RT_GGUF_STR
           : kind == TG_INT ? etype <= RT_GGUF_I32 || etype == RT_GGUF_U64 || etype == RT_GGUF_I64
                            : etype == RT_GGUF_F32 || etype == RT_GGUF_F64;
}

/* The array at key into *kv (NULL when absent): of `kind`'s elements and,
 * when n >= 0, n of them (tokenizer.ggml.tokens'). */
static int tg_array(const tg_reader *R, const char *key, int kind, int64_t n,
                    const rt_gguf_kv **kv)
{
    static const char *const kinds[] = {"strings", "integers", "numbers (f32)"};
    *kv = rt_gguf_find_key(&R->g, key);
    if (*kv && ((*kv)->type != RT_GGUF_ARR || !tg_is((*kv)->etype, kind)))
        return tg_bad(R, key, "not an array of %s", kinds[kind]);
    if (*kv && n >= 0 && (*kv)->n != (uint64_t)n)
        return tg_bad(R, key, "%llu elements, but tokenizer.ggml.tokens has %lld",
                      (unsigned long long)(*kv)->n, (long long)n);
    return 0;
}

/* The string at key, or NULL when absent; refused when not a string. */
static int tg_str(const tg_reader *R, const char *key, const char **s, size_t *len)
{
    const rt_gguf_kv *kv = rt_gguf_find_key(&R->g, key);
    *s = kv ? rt_gguf_str(kv, len) : NULL;
    return kv && !*s ? tg_bad(R, key, "not a string") : 0;
}

/* The bool at key into *v, kept when absent. */
static int tg_bool(const tg_reader *R, const char *key, int *v)
{
    const rt_gguf_kv *kv = rt_gguf_find_key(&R->g, key);
    return kv && rt_gguf_bool(kv, v) ? tg_bad(R, key, "not a bool") : 0;
}

/* The token id at key into *id: def when absent, -1 for none. */
static int tg_id(const tg_reader *R, const char *key, int def, int *id)
{
    const rt_gguf_kv *kv = rt_gguf_find_key(&R->g, key);
    int64_t v;
    uint64_t u = 0;
    *id = def;
    if (!kv)
        return 0;
    if (rt_gguf_i64(kv, &v) && rt_gguf_u64(kv, &u))
        return tg_bad(R, key, "not an integer");
    if (rt_gguf_i64(kv, &v))                    /* past INT64_MAX */
        return tg_bad(R, key, "%llu is not a token id", (unsigned long long)u);
    if (v != -1 && v != TG_NONE && (v < 0 || v >= R->t->n))
        return tg_bad(R, key, "%lld is not a token id (the vocabulary has %d tokens)",
                      (long long)v, R->t->n);
    *id = v == -1 || v == TG_NONE ? -1 : (int)v;
    return 0;
}

/* ---- the tokens -------------------------------------------------------------- */

/* The tokens' types (absent: normal) into t->type. */
static int tg_types(tg_reader *R, int n)
{
    const char *key = "tokenizer.ggml.token_type";
    const rt_gguf_kv *kv;
    int rc = tg_array(R, key, TG_INT, n, &kv);
    if (!rc && !(R->t->type = malloc((size_t)n)))
        rc = tg_oom(R);
    for (int i = 0; !rc && i < n; i++) {
        int64_t ty = RT_TOK_T_NORMAL;
        if (kv && (rt_gguf_arr_i64(kv, (uint64_t)i, &ty) || ty < 0 || ty > RT_TOK_T_BYTE))
            rc = tg_bad(R, key, "element %d: not a token type (0 to 6: undefined, normal, "
                        "unknown, control, user-defined, unused, byte)", i);
        R->t->type[i] = (unsigned char)ty;
    }
    return rc;
}

/* Whether a token of type ty is taken out of the text whole. */
static int tg_special(int ty)
{
    return ty == RT_TOK_T_CONTROL || ty == RT_TOK_T_USER || ty == RT_TOK_T_UNKNOWN;
}

/* Token i's text s[0, len) checked and kept at t->bytes + *at: gpt2's
 * in ByteLevel's alphabet as bytes, unless special, which are text. */
static int tg_token(tg_reader *R, int i, const char *s, size_t len, size_t *at)
{
    const char *key = "tokenizer.ggml.tokens";
    rt_tok *t = R->t;
    int ty = t->type[i], raw = !R->gpt2 || tg_special(ty);
    char *o = t->bytes + *at;
    size_t m = len;
    if (!len)
        return tg_bad(R, key, "element %d: an empty token", i);
    if (memchr(s, 0, len))
        return tg_bad(R, key, "element %d: holds a NUL byte", i);
    if (!raw && rt_utf8_bad((const unsigned char *)s, len) < len)
        return tg_bad(R, key, "element %d: not valid UTF-8", i);
    unsigned cp = raw ? 0 : rt_tok_unbyte(s, o, &m);
    if (cp)
        return tg_bad(R, key, "element %d: '%.40s' is not in ByteLevel's alphabet (U+%04X is no "
                      "byte's character)", i, s, cp);
    if (raw)
        memcpy(o, s, len);
    if (!R->gpt2 && ty == RT_TOK_T_BYTE && tg_hex(s, len) < 0)
        return tg_bad(R, key, "element %d: '%.40s' is a byte token (tokenizer.ggml.token_type), "
                      "but not <0xBB>", i, s);
    o[m] = 0;
    t->off[i] = (uint32_t)*at;
    t->len[i] = (uint32_t)m;
    if (m > t->maxlen)
        t->maxlen = (uint32_t)m;
    *at += m + 1;
    return 0;
}

/* tokenizer.ggml.tokens and their types into t, indexed: gpt2's special
 * tokens after the others (as llama.cpp looks up byte-level text, which
 * may be a special token's bytes). */
static int tg_tokens(tg_reader *R)
{
    const char *key = "tokenizer.ggml.tokens";
    const rt_gguf_kv *kv;
    rt_tok *t = R->t;
    int rc = tg_array(R, key, TG_STR, -1, &kv), dup[2];
    if (!rc && !kv)
        rc = tg_bad(R, key, "missing: the file holds no vocabulary");
    if (!rc && (kv->n < 1 || kv->n > TG_MAX_TOKENS))
        rc = tg_bad(R, key, "%llu tokens: kiln takes 1 to %d", (unsigned long long)kv->n,
                    TG_MAX_TOKENS);
    if (rc)
        return rc;
    int n = (int)kv->n;
    size_t total = 0, len, at = 0;
    for (int i = 0; i < n && rt_gguf_arr_str(kv, (uint64_t)i, &len); i++)
        total += len + 1;
    if (total > UINT32_MAX)
        return tg_bad(R, key, "%zu bytes of text: kiln takes less than 4 GB", total);
    t->n = n;
    if (!(t->bytes = malloc(total)) || !(t->off = malloc(sizeof *t->off * (size_t)n)) ||
        !(t->len = malloc(sizeof *t->len * (size_t)n)))
        return tg_oom(R);
    rc = tg_types(R, n);
    for (int i = 0; !rc && i < n; i++) {
        const char *s = rt_gguf_arr_str(kv, (uint64_t)i, &len);
        rc = tg_token(R, i, s, len, &at);
    }
    unsigned char *late = !rc && R->gpt2 ? malloc((size_t)n) : NULL;
    for (int i = 0; late && i < n; i++)
        late[i] = (unsigned char)tg_special(t->type[i]);
    if (!rc && R->gpt2 && !late)
        rc = tg_oom(R);
    if (!rc && (rc = rt_tok_index(t, late, dup)) != 0)
        rc = rc < 0 ? tg_oom(R)
                    : tg_bad(R, key, "elements %d and %d are both '%.40s'", dup[0], dup[1],
                             t->bytes + t->off[dup[0]]);
    free(late);
    return rc;
}

/* llama: the scores (absent: all 0), and each byte's token: <0xBB>, else
 * the byte's own, else none (-1). */
static int tg_llama(tg_reader *R)
{
    const char *key = "tokenizer.ggml.scores";
    const rt_gguf_kv *kv;
    rt_tok *t = R->t;
    int rc = tg_array(R, key, TG_FLOAT, t->n, &kv);
    if (!rc && !(t->score = calloc((size_t)t->n, sizeof *t->score)))
        rc = tg_oom(R);
    for (int i = 0; !rc && kv && i < t->n; i++) {
        double v;
        rt_gguf_arr_f64(kv, (uint64_t)i, &v);
        if (isnan(v))
            rc = tg_bad(R, key, "element %d: NaN", i);
        t->score[i] = (float)v;
    }
    for (int b = 0; b < 256; b++) {
        char name[8], c = (char)b;
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_id[b] = rt_tok_lookup(t, name, 6, "", 0);
        if (t->byte_id[b] < 0)
            t->byte_id[b] = rt_tok_lookup(t, &c, 1, "", 0);
    }
    return rc;
}

/* ---- gpt2: the pre-tokenizer, the bytes, the merges -------------------------- */

static int tg_pre(tg_reader *R)
{
    const char *key = "tokenizer.ggml.pre", *s;
    size_t len;
    int rc = tg_str(R, key, &s, &len);
    if (!rc && !s)
        return tg_bad(R, key, "missing: llama.cpp then splits as its 'default' (punctuation "
                      "runs cut before GPT-2's split), which kiln does not have; pass the "
                      "prompt as ids (--tokens)");
    for (int i = 0; !rc && i < TG_N(tg_pres); i++)
        if (!strcmp(s, tg_pres[i].name)) {
            R->t->split = tg_pres[i].split;
            R->t->digits = tg_pres[i].digits ? RT_TOK_DIGITS_EACH : RT_TOK_DIGITS_NONE;
            R->t->ignore_merges = R->llama3 = tg_pres[i].llama3;
            return 0;
        }
    return rc ? rc : tg_bad(R, key, "'%.40s' is not a pre-tokenizer kiln has (gpt-2, llama-bpe, "
                            "qwen2, smollm and their llama.cpp aliases); pass the prompt as ids "
                            "(--tokens)", s);
}

/* Each byte's token, or none (-1: a text that needs it is refused;
 * StarCoder's vocabulary has none for bytes C0, C1 and F1 to FF). */
static void tg_bytes(tg_reader *R)
{
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        R->t->byte_id[b] = rt_tok_lookup(R->t, &c, 1, "", 0);
    }
}

/* Merge i, "A B" (s[0, len)), into *m: A, B and AB are tokens. buf holds
 * len + 2 bytes. */
static int tg_merge(tg_reader *R, int i, const char *s, size_t len, char *buf, rt_tok_merge *m)
{
    const char *key = "tokenizer.ggml.merges", *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
    if (memchr(s, 0, len) || rt_utf8_bad((const unsigned char *)s, len) < len)
        return tg_bad(R, key, "element %d: not valid UTF-8 without NUL", i);
    if (!sp || sp + 1 == s + len)
        return tg_bad(R, key, "element %d: '%.40s' is not two tokens with a space between", i, s);
    size_t na = (size_t)(sp - s), nb = len - na - 1;
    char *a = buf, *b = buf + na + 1;
    memcpy(a, s, na), a[na] = 0;
    memcpy(b, sp + 1, nb), b[nb] = 0;
    unsigned cp = rt_tok_unbyte(a, a, &na);
    if (!cp)
        cp = rt_tok_unbyte(b, b, &nb);
    if (cp)
        return tg_bad(R, key, "element %d: U+%04X is not in ByteLevel's alphabet", i, cp);
    m->a = rt_tok_lookup(R->t, a, na, "", 0);
    m->b = rt_tok_lookup(R->t, b, nb, "", 0);
    m->id = rt_tok_lookup(R->t, a, na, b, nb);
    m->rank = i;
    const char *what = m->a < 0    ? "the first"
                       : m->b < 0  ? "the second"
                       : m->id < 0 ? "what they make"
                                   : NULL;
    return what ? tg_bad(R, key, "element %d: '%.40s': %s is not a token", i, s, what) : 0;
}

static int tg_merges(tg_reader *R)
{
    const char *key = "tokenizer.ggml.merges";
    const rt_gguf_kv *kv;
    int rc = tg_array(R, key, TG_STR, -1, &kv), dup[2];
    if (!rc && !kv)
        rc = tg_bad(R, key, "missing (gpt2's BPE needs its merges)");
    if (!rc && kv->n > TG_MAX_TOKENS)
        rc = tg_bad(R, key, "%llu merges: kiln takes %d at most", (unsigned long long)kv->n,
                    TG_MAX_TOKENS);
    if (rc)
        return rc;
    int n = (int)kv->n;
    size_t cap = 0, len;
    char *buf = NULL;
    rt_tok_merge *list = malloc(sizeof *list * (size_t)(n + 1));
    if (!list)
        rc = tg_oom(R);
    for (int i = 0; !rc && i < n; i++) {
        const char *s = rt_gguf_arr_str(kv, (uint64_t)i, &len);
        if (len + 2 > cap) {
            char *nb = realloc(buf, cap = 2 * len + 2);
            if (!nb)
                rc = tg_oom(R);
            else
                buf = nb;
        }
        if (!rc)
            rc = tg_merge(R, i, s, len, buf, &list[i]);
    }
    if (!rc && (rc = rt_tok_set_merges(R->t, list, n, dup)) != 0)
        rc = rc < 0 ? tg_oom(R) : tg_bad(R, key, "element %d repeats element %d", dup[1], dup[0]);
    free(buf);
    free(list);
    return rc;
}

/* ---- special tokens ---------------------------------------------------------- */

/* Whether general.name names Phi-3 ("phi3" or "phi-3", any case). */
static int tg_phi3(const tg_reader *R)
{
    size_t len;
    char low[256];
    const rt_gguf_kv *kv = rt_gguf_find_key(&R->g, "general.name");
    const char *s = kv ? rt_gguf_str(kv, &len) : NULL;
    if (!s)
        return 0;
    size_t n = len < sizeof low - 1 ? len : sizeof low - 1;
    for (size_t i = 0; i < n; i++)
        low[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] | 32 : s[i]);
    low[n] = 0;
    return strstr(low, "phi3") || strstr(low, "phi-3");
}

/* The tokens taken out of the text whole: control, user-defined, unknown. */
static int tg_added(tg_reader *R)
{
    rt_tok *t = R->t;
    int phi3 = tg_phi3(R);
    if (!(t->added = malloc(sizeof *t->added * (size_t)t->n)) || !(t->strip = malloc((size_t)t->n)))
        return tg_oom(R);
    for (int i = 0; i < t->n; i++) {
        if (!tg_special(t->type[i]))
            continue;
        const char *s = t->bytes + t->off[i];
        int keep = !strcmp(s, "<unk>") || !strcmp(s, "<s>") || !strcmp(s, "<|endoftext|>");
        t->strip[t->nadded] = phi3 && !keep ? RT_TOK_RSTRIP : 0;
        t->added[t->nadded++] = i;
    }
    return 0;
}

static void tg_end(rt_tok *t, int id)
{
    for (int i = 0; i < t->nends; i++)
        if (t->ends[i] == id)
            return;
    if (id >= 0 && t->nends < RT_TOK_ENDS)
        t->ends[t->nends++] = id;
}

/* BOS, EOS and the ends; the other ids checked. */
static int tg_ids(tg_reader *R)
{
    rt_tok *t = R->t;
    int llama = !R->gpt2, eot, eom, other;
    int rc = tg_id(R, "tokenizer.ggml.bos_token_id", llama && t->n > 1 ? 1 : -1, &t->bos);
    if (!rc)
        rc = tg_id(R, "tokenizer.ggml.eos_token_id", llama && t->n > 2 ? 2 : -1, &t->eos);
    if (!rc)
        rc = tg_id(R, "tokenizer.ggml.eot_token_id", -1, &eot);
    if (!rc)
        rc = tg_id(R, "tokenizer.ggml.eom_token_id", -1, &eom);
    if (!rc)
        rc = tg_id(R, "tokenizer.ggml.unknown_token_id", -1, &other);
    if (!rc)
        rc = tg_id(R, "tokenizer.ggml.padding_token_id", -1, &other);
    if (rc)
        return rc;
    tg_end(t, t->eos);
    tg_end(t, eot);
    tg_end(t, eom);
    for (int i = 0; i < TG_N(tg_ends); i++)
        tg_end(t, rt_tok_find(t, tg_ends[i]));
    return 0;
}

/* add_bos_token, add_eos_token, add_space_prefix: what encoding adds. */
static int tg_flags(tg_reader *R)
{
    rt_tok *t = R->t;
    int prefix = !R->gpt2;
    t->add_bos = !R->gpt2 || R->llama3;
    t->add_eos = 0;
    int rc = tg_bool(R, "tokenizer.ggml.add_bos_token", &t->add_bos);
    if (!rc)
        rc = tg_bool(R, "tokenizer.ggml.add_eos_token", &t->add_eos);
    if (!rc)
        rc = tg_bool(R, "tokenizer.ggml.add_space_prefix", &prefix);
    if (!rc && t->add_bos && t->bos < 0)
        rc = tg_bad(R, "tokenizer.ggml.bos_token_id", "none, but BOS is to be added "
                    "(tokenizer.ggml.add_bos_token)");
    if (!rc && t->add_eos && t->eos < 0)
        rc = tg_bad(R, "tokenizer.ggml.eos_token_id", "none, but EOS is to be added "
                    "(tokenizer.ggml.add_eos_token)");
    if (!R->gpt2) {                     /* llama.cpp adds no space to byte-level BPE */
        t->space = prefix ? RT_TOK_SP_PREPEND : RT_TOK_SP_NEVER;
        t->dec = RT_TOK_DEC_SPACE | (prefix ? RT_TOK_DEC_STRIP : 0);
    }
    return rc;
}

static int tg_chat(tg_reader *R)
{
    const char *s;
    size_t len;
    int rc = tg_str(R, "tokenizer.chat_template", &s, &len);
    if (!rc && s && !(R->t->chat = malloc(len + 1)))
        rc = tg_oom(R);
    if (!rc && s) {
        memcpy(R->t->chat, s, len);
        R->t->chat[len] = 0;
    }
    return rc;
}

static int tg_read(tg_reader *R)
{
    const char *key = "tokenizer.ggml.model", *model;
    size_t len;
    int rc = tg_str(R, key, &model, &len);
    if (!rc && !model)
        rc = tg_bad(R, key, "missing: the file holds no tokenizer");
    if (!rc && strcmp(model, "llama") && strcmp(model, "gpt2"))
        rc = tg_bad(R, key, "'%.40s' is not supported (kiln reads llama, SentencePiece's "
                    "tokens and scores, and gpt2, byte-level BPE)", model);
    R->gpt2 = !rc && !strcmp(model, "gpt2");
    if (!rc && R->gpt2)
        rc = tg_pre(R);
    if (!rc)
        rc = tg_tokens(R);
    if (!rc && R->gpt2)
        tg_bytes(R);
    if (!rc && !R->gpt2)
        rc = tg_llama(R);
    if (!rc && R->gpt2)
        rc = tg_merges(R);
    if (!rc)
        rc = tg_ids(R);
    if (!rc)
        rc = tg_flags(R);
    if (!rc)
        rc = tg_added(R);
    if (!rc)
        rc = tg_chat(R);
    return rc;
}

int rt_tok_read_gguf(rt_tok *t, const char *path, rt_err *e)
{
    tg_reader R = {.t = t, .path = path, .e = e};
    t->format = RT_TOK_GGUF;
    int rc = rt_gguf_open(&R.g, path, e);
    if (rc)
        return rc;
    rc = tg_read(&R);
    rt_gguf_close(&R.g);
    return rc;
}

/* ---- llama: merges by score --------------------------------------------------- */

/* A candidate merge of symbols l and r, whose token scores `score`;
 * stale once either is merged away or has grown (their bytes are no
 * longer size). */
typedef struct {
    float score;
    int l, r;
    uint32_t size;
} tg_pair;

typedef struct {
    const rt_tok *t;
    const char *w;
    uint32_t *at, *n;           /* symbol i: w + at[i], n[i] bytes (0: merged away) */
    int *prev, *next;           /* the symbols left, in order (-1: none) */
    tg_pair *heap;              /* the best candidate first */
    int nheap;
} tg_spm;

/* Whether candidate a goes before b: the higher score, then the leftmost. */
static int tg_before(const tg_pair *a, const tg_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->l < b->l);
}

/* Symbols l and r as a candidate, when together they are a token. */
static void tg_push(tg_spm *S, int l, int r)
{
    if (l < 0 || r < 0)
        return;
    int id = rt_tok_lookup(S->t, S->w + S->at[l], S->n[l], S->w + S->at[r], S->n[r]);
    if (id < 0)
        return;
    tg_pair p = {S->t->score[id], l, r, S->n[l] + S->n[r]};
    int i = S->nheap++;
    for (; i > 0 && tg_before(&p, &S->heap[(i - 1) / 2]); i = (i - 1) / 2)
        S->heap[i] = S->heap[(i - 1) / 2];
    S->heap[i] = p;
}

static tg_pair tg_pop(tg_spm *S)
{
    tg_pair top = S->heap[0], last = S->heap[--S->nheap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= S->nheap)
            break;
        if (c + 1 < S->nheap && tg_before(&S->heap[c + 1], &S->heap[c]))
            c++;
        if (!tg_before(&S->heap[c], &last))
            break;
        S->heap[i] = S->heap[c];
        i = c;
    }
    if (S->nheap)
        S->heap[i] = last;
    return top;
}

/* While a candidate is left, the best that is not stale merges. */
static void tg_merge_all(tg_spm *S)
{
    while (S->nheap) {
        tg_pair p = tg_pop(S);
        if (!S->n[p.l] || !S->n[p.r] || S->n[p.l] + S->n[p.r] != p.size)
            continue;
        S->n[p.l] += S->n[p.r];
        S->n[p.r] = 0;
        S->next[p.l] = S->next[p.r];
        if (S->next[p.l] >= 0)
            S->prev[S->next[p.l]] = p.l;
        tg_push(S, S->prev[p.l], p.l);
        tg_push(S, p.l, S->next[p.l]);
    }
}

/* Each symbol's token, or its bytes' tokens, appended at ids[*k]. */
static int tg_emit(const tg_spm *S, int32_t *ids, int *k, rt_err *e)
{
    for (int i = 0; i >= 0; i = S->next[i]) {
        const char *s = S->w + S->at[i];
        int id = rt_tok_lookup(S->t, s, S->n[i], "", 0);
        if (id >= 0) {
            ids[(*k)++] = id;
            continue;
        }
        for (uint32_t j = 0; j < S->n[i]; j++) {
            int b = S->t->byte_id[(unsigned char)s[j]];
            if (b < 0)
                return rt_errf(e, RT_EINVAL, "the text's character '%.*s' has no token, and its "
                               "byte 0x%02X no byte token", (int)S->n[i], s,
                               (unsigned char)s[j]);
            ids[(*k)++] = b;
        }
    }
    return 0;
}

int rt_tok_spm_piece(const rt_tok *t, const char *w, size_t m, int32_t *ids, int *k, rt_err *e)
{
    tg_spm S = {.t = t, .w = w};
    int ns = 0, rc = 0;
    if (!m)
        return 0;
    S.at = malloc(sizeof *S.at * m);
    S.n = malloc(sizeof *S.n * m);
    S.prev = malloc(sizeof *S.prev * m);
    S.next = malloc(sizeof *S.next * m);
    S.heap = malloc(sizeof *S.heap * 3 * m);
    if (!S.at || !S.n || !S.prev || !S.next || !S.heap)
        rc = rt_errf(e, RT_EINTERNAL, "out of memory encoding the text");
    for (size_t i = 0, u; !rc && i < m; i += u, ns++) {
        unsigned char c = (unsigned char)w[i];
        u = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        u = u < m - i ? u : m - i;
        S.at[ns] = (uint32_t)i, S.n[ns] = (uint32_t)u;
        S.prev[ns] = ns - 1, S.next[ns] = i + u < m ? ns + 1 : -1;
    }
    for (int i = 1; !rc && i < ns; i++)
        tg_push(&S, i - 1, i);
    if (!rc) {
        tg_merge_all(&S);
        rc = tg_emit(&S, ids, k, e);
    }
    free(S.at);
    free(S.n);
    free(S.prev);
    free(S.next);
    free(S.heap);
    return rc;
}

/* ---- decoding ------------------------------------------------------------------- */

size_t rt_tok_gguf_decode(rt_tok *t, int prev_id, int id)
{
    int ty = t->type[id], sp = t->space != RT_TOK_BYTES;
    const char *p = t->bytes + t->off[id];
    size_t n = t->len[id];
    if (sp && ty == RT_TOK_T_NORMAL)
        return rt_tok_sp_decode(t, prev_id, id);
    if (ty == RT_TOK_T_UNUSED || ty == RT_TOK_T_UNDEFINED)
        n = 0;
    else if (sp && ty == RT_TOK_T_BYTE)
        t->piece[0] = (char)tg_hex(p, n), n = 1;
    else
        memcpy(t->piece, p, n);
    t->piece[n] = 0;
    return n;
}
