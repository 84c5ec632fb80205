/* runtime/gen/rt_tok.h: the tokenizer as its files share it (rt_gen.h
 * has its API; not for generated code). */
#ifndef KILN_RT_TOK_H
#define KILN_RT_TOK_H

#include "runtime/core/rt_core.h"
#include "runtime/rt_gen.h"

/* ---- JSON values kept in place (rt_json_at.c), over rt_core.h's
 * cursor, for tokenizer.json ---- */
/* Values kept in place: a reader may note where a value starts (at) and
 * read it later through a cursor rt_json_at(J, at) of the same text, so
 * that an object's keys can come in any order. Messages of meaning are
 * "PATH: WHERE: what" (rt_json_bad; "PATH: what" when WHERE is ""). */
RT_API rt_json rt_json_at(const rt_json *J, const unsigned char *at);
RT_API int rt_json_bad(const rt_json *J, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An object whose keys are among keys[nkeys], each at most once: where
 * each value starts into val[] (NULL when absent). Another key is refused:
 * "WHERE: unknown key 'K' (refused rather than ignored)". */
RT_API int rt_json_object(rt_json *J, const char *where, const char *const *keys, int nkeys,
                          const unsigned char **val);
RT_API int rt_json_object_at(const rt_json *J, const unsigned char *at, const char *where,
                             const char *const *keys, int nkeys, const unsigned char **val);
/* 1 when the value at `at` is null, or at is NULL (absent). */
RT_API int rt_json_null_at(const rt_json *J, const unsigned char *at);
RT_API int rt_json_string_at(const rt_json *J, const unsigned char *at, char **s);
/* true or false into *v (kept when at is NULL); rt_json_false_at refuses
 * true: "WHERE: KEY: true is not supported". */
RT_API int rt_json_bool_at(const rt_json *J, const unsigned char *at, const char *where,
                           const char *key, int *v);
RT_API int rt_json_false_at(const rt_json *J, const unsigned char *at, const char *where,
                            const char *key);
/* The array at `at` (NULL: "WHERE: not an array"): where each of its first
 * max items starts into item[], how many it holds in *n (more than max
 * are counted, not noted); and the "type" of each of item[0, n) into
 * type[] (malloc'd; messages at WHERE[i]). */
RT_API int rt_json_items(const rt_json *J, const unsigned char *at, const char *where, int max,
                         const unsigned char **item, int *n);
RT_API int rt_json_types(const rt_json *J, const unsigned char **item, int n, const char *where,
                         char **type);
/* The string member "type" of the object at `at` (malloc'd into *type). */
RT_API int rt_json_type_at(const rt_json *J, const unsigned char *at, const char *where,
                           char **type);

/* A tokenizer as its files share it (the API above). Tokens are byte
 * strings; a hash table finds them by their bytes. */
enum { RT_TOK_LLAMA2C, RT_TOK_BPE, RT_TOK_GGUF };   /* formats: tokenizer.bin,
                                                       tokenizer.json, GGUF */
/* A GGUF token's type (tokenizer.ggml.token_type, llama.cpp's numbers). */
enum {
    RT_TOK_T_UNDEFINED, RT_TOK_T_NORMAL, RT_TOK_T_UNKNOWN, RT_TOK_T_CONTROL, RT_TOK_T_USER,
    RT_TOK_T_UNUSED, RT_TOK_T_BYTE
};
enum { RT_TOK_ENDS = 16 };
enum { RT_TOK_SPLIT_GPT2, RT_TOK_SPLIT_QWEN2, RT_TOK_SPLIT_LLAMA3 }; /* pre-tokenizers */
/* A Digits pre-tokenizer before the split: none, each number character
 * a piece of its own (individual_digits), or each run of them. */
enum { RT_TOK_DIGITS_NONE, RT_TOK_DIGITS_EACH, RT_TOK_DIGITS_RUNS };
/* How a tokenizer.json's text meets its tokens: as bytes (ByteLevel), or
 * with spaces as U+2581, which goes first in each stretch of text between
 * added tokens: always (a Prepend normalizer), unless the stretch starts
 * with one (Metaspace's "always"), only in the stretch at the text's
 * start (its "first"), or never. */
enum { RT_TOK_BYTES, RT_TOK_SP_PREPEND, RT_TOK_SP_ALWAYS, RT_TOK_SP_FIRST, RT_TOK_SP_NEVER };
/* What a SentencePiece-style decoder does: U+2581 becomes a space; a byte
 * token <0xBB> its byte; the text's first space is dropped (Strip after
 * Fuse); the first token's U+2581 are dropped (Metaspace). */
enum { RT_TOK_DEC_SPACE = 1, RT_TOK_DEC_BYTES = 2, RT_TOK_DEC_STRIP = 4, RT_TOK_DEC_FIRST = 8 };
/* An added token takes the spaces before it (lstrip) or after it (rstrip)
 * with it: they are not encoded. */
enum { RT_TOK_LSTRIP = 1, RT_TOK_RSTRIP = 2 };
typedef struct {
    int32_t a, b, rank, id;     /* tokens a, b merge into id; a = -1: empty slot */
} rt_tok_merge;
struct rt_tok {
    int format;                 /* RT_TOK_* */
    int n;                      /* tokens: ids [0, n) */
    char *bytes;                /* their bytes, each NUL-terminated */
    uint32_t *off, *len;        /* token i: bytes + off[i], len[i] bytes */
    uint32_t maxlen;            /* the longest */
    int32_t *slot;              /* hash of the tokens' bytes: ids, -1 empty */
    uint32_t mask;              /* slots - 1 */
    int bos, eos;               /* -1: none */
    int add_bos, add_eos;       /* encoding puts BOS first (when asked, and
                                   there is one); EOS last (GGUF's
                                   add_eos_token) */
    int32_t ends[RT_TOK_ENDS];  /* the tokens generation ends at (rt_tok_is_end):
                                   EOS among them */
    int nends;
    float *score;               /* llama2.c, GGUF llama: merges by score,
                                   highest first */
    /* GGUF (rt_tokenizer_gguf.c): llama is SentencePiece-style (space
       RT_TOK_SP_PREPEND or _NEVER), gpt2 byte-level */
    unsigned char *type;        /* each token's RT_TOK_T_*; NULL but GGUF */
    char *chat;                 /* tokenizer.chat_template, or NULL */
    /* byte-level BPE (tokenizer.json, GGUF gpt2) */
    int split;                  /* RT_TOK_SPLIT_* */
    int digits;                 /* RT_TOK_DIGITS_*: numbers cut out first */
    int ignore_merges;          /* a piece that is a token is taken whole */
    int32_t byte_id[256];       /* the token of each byte */
    rt_tok_merge *merge;        /* hash of (a, b); mmask + 1 slots */
    uint32_t mmask;
    int32_t *added;             /* added tokens, matched whole first */
    unsigned char *strip;       /* each one's RT_TOK_LSTRIP | RT_TOK_RSTRIP */
    int nadded;
    /* SentencePiece-style BPE (tokenizer.json, rt_tokenizer_sp.c) */
    int space;                  /* RT_TOK_BYTES or RT_TOK_SP_* */
    int sp_split;               /* a piece starts at each U+2581 (Metaspace's split) */
    int byte_fallback;          /* a character with no token: its bytes' <0xBB> tokens */
    int unk, fuse_unk;          /* else unk (-1: none, the text is refused), a run once */
    int dec;                    /* RT_TOK_DEC_* */
    char *piece;                /* a token's decoded text, maxlen + 1 bytes */
    /* decoding */
    unsigned char held[4];      /* the start of an incomplete character */
    int nheld;
    char *out;                  /* what rt_tok_decode_* returns */
};
/* rt_tokenizer.c: the id of the token whose bytes are a then b, or -1.
 * rt_tok_index hashes the tokens, rt_tok_set_merges the n merges (copied;
 * a = -1 never); each returns 0, -1 when out of memory, or 1 when two
 * are the same (tokens' bytes; merges' a and b), which are dup[0] < dup[1]
 * (ids; indexes into the list). Tokens marked in late (NULL: none) are
 * hashed after the others, and one with the bytes of an unmarked token is
 * left out (a GGUF's special token as text beside a byte-level token:
 * lookups find the latter). */
RT_API int rt_tok_lookup(const rt_tok *t, const char *a, size_t na, const char *b, size_t nb);
RT_API int rt_tok_index(rt_tok *t, const unsigned char *late, int dup[2]);
RT_API int rt_tok_set_merges(rt_tok *t, const rt_tok_merge *list, int n, int dup[2]);
/* The merge of tokens a and b, or NULL. */
RT_API const rt_tok_merge *rt_tok_merge_find(const rt_tok *t, int32_t a, int32_t b);
/* rt_tokenizer_hf.c: fills t from tokenizer.json's text (valid UTF-8);
 * rt_tokenizer_vocab.c: its tokens, from the model (at model) and the
 * added tokens (at added, or NULL), then t->slot, byte_id and merge. */
RT_API int rt_tok_read_hf(rt_tok *t, const char *path, const char *text, size_t len, rt_err *e);
RT_API int rt_tok_read_vocab(rt_tok *t, const rt_json *J, const unsigned char *model,
                             const unsigned char *added);
/* s (valid UTF-8, NUL-terminated) in ByteLevel's alphabet into its bytes
 * at out (strlen(s) bytes at most; out may be s), *n of them: 0, or the
 * first code point that is no byte's. */
RT_API unsigned rt_tok_unbyte(const char *s, char *out, size_t *n);
/* rt_tokenizer_bpe.c: rt_tok_encode of a tokenizer.json or a GGUF:
 * ids[0, *n) of text (room for as many ids as rt_tok_encode promises at
 * most); and ids[0, n) merged by rank (pair: room for n), the new n. */
RT_API int rt_tok_encode_bpe(const rt_tok *t, const char *text, int add_bos, int32_t *ids,
                             int *n, rt_err *e);
RT_API int rt_tok_merge_ids(const rt_tok *t, int32_t *ids, int n, const rt_tok_merge **pair);
/* rt_tokenizer_sp.c: a SentencePiece-style tokenizer.json's normalizer
 * (a Sequence), pre-tokenizer (Metaspace) and decoder, read into t; the
 * tokens of the stretch s[0, n) between added tokens appended at
 * ids[*k] (at_start: it starts the text; norm and pair: room for
 * 3 * n + 3); and token id's decoded text, in t->piece: its length. */
RT_API int rt_tok_sp_normalizer(rt_tok *t, const rt_json *J, const unsigned char *at);
RT_API int rt_tok_sp_pre(rt_tok *t, const rt_json *J, const unsigned char *at);
/* A Split by " " after the normalizer made every space U+2581: checked,
 * and it does nothing (Gemma's). */
RT_API int rt_tok_sp_split(const rt_json *J, const unsigned char *at);
RT_API int rt_tok_sp_decoder(rt_tok *t, const rt_json *J, const unsigned char *at);
RT_API int rt_tok_sp_encode(const rt_tok *t, const char *s, size_t n, int at_start, int32_t *ids,
                            int *k, char *norm, const rt_tok_merge **pair, rt_err *e);
RT_API size_t rt_tok_sp_decode(rt_tok *t, int prev_id, int id);
/* rt_tokenizer_gguf.c: fills t from the GGUF file at path (which starts
 * with its magic); the tokens of piece w[0, m) (a stretch of text with
 * spaces as U+2581) appended at ids[*k] by a GGUF llama tokenizer's
 * merges by score (room for m ids); and token id's decoded text, in
 * t->piece: its length. */
RT_API int rt_tok_read_gguf(rt_tok *t, const char *path, rt_err *e);
RT_API int rt_tok_spm_piece(const rt_tok *t, const char *w, size_t m, int32_t *ids, int *k,
                            rt_err *e);
RT_API size_t rt_tok_gguf_decode(rt_tok *t, int prev_id, int id);

/* ---- chat templates (rt_chat_tmpl.c) ---- */
/* A tokenizer_config.json's chat_template into *text (malloc'd; NULL when
 * it has none): rt_chat_template_load's reader, and its fuzzer's. */
RT_API int rt_chat_config_read(const char *path, char **text, rt_err *e);

/* ---- decoding (rt_decode.c), what generate and chat share ---- */
/* A decoder model (ir/decoder.c's contract: inputs tokens i32[1] and
 * positions i32[1], output logits f32[1, V], state of S rows; a slotted
 * one's input slots i32[1] too, its state [N, S, ...]) and the buffers of
 * one call; h is the model opened (md->open), the caller's. */
typedef struct {
    const rt_model *md;
    void *h;
    int64_t V, S, C;                    /* vocabulary, cache rows, chunk (1: none) */
    int64_t R;                          /* the rest's chunk (rt_model.rest; 1: none) */
    int64_t prefill_min;                /* fewest tokens the first chunk takes (rt_dec_chunk_min) */
    int64_t B;                          /* rows of the buffers: C, or the batch's if more */
    int slotted;                        /* the model takes slots */
    int32_t slot;                       /* the slot prefill and steps write (slotted) */
    float *logits;                      /* [B, V]: the last call's */
    int32_t *tk, *ps, *sl;              /* [B]: a call's tokens, positions, slots */
    void *scratch;                      /* rt_sample's */
} rt_dec;
/* md keeps the contract (else RT_NOT_A_DECODER); V, S, C, R from its
 * tables, prefill_min rt_dec_chunk_min's of the smaller chunk. */
RT_API int rt_dec_contract(rt_dec *d, const rt_model *md, rt_err *e);
RT_API int rt_dec_buffers(rt_dec *d, rt_err *e);
/* One call of d->tk, d->ps (d->sl): the prefill variant when chunk is 1,
 * the batch (rt_model.run_batch, a slotted program's) when 2, the rest's
 * chunk (rt_model.run_rest) when 3, else a step. */
RT_API int rt_dec_call(rt_dec *d, int chunk, rt_err *e);
/* ids[0, n) at positions pos .. pos + n - 1 (pos + n <= S) in slot
 * d->slot: whole chunks ending at the last token (of C, and of R before
 * them), the tokens before those as a padded chunk of the smaller size
 * when at least prefill_min and it fits, else decode steps (rt_decode.c);
 * the logits of the last left in logits[0, V). */
RT_API int rt_dec_prefill(rt_dec *d, const int32_t *ids, int64_t pos, int64_t n, rt_err *e);
/* The fewest tokens worth md's prefill chunk of C: a chunk's cost over a
 * decode step's, by the kernels' costs (rt_decode.c), from 2 to C. */
RT_API int64_t rt_dec_chunk_min(const rt_model *md, int64_t C);
/* Closes the model (when open) and frees the buffers. */
RT_API void rt_dec_free(rt_dec *d);
/* Text s[0, n) against the non-empty stop strings stop[0, nstop): 1 with
 * *end the offset of the first that occurs; else 0 with *end = n less the
 * longest end of s that begins one (text to hold back: it may still
 * become a stop string). generate's --stop and serve's "stop". */
RT_API int rt_stop_scan(const char *s, size_t n, const char *const *stop, int nstop,
                        size_t *end);

#endif
