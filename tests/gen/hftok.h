/* tests/gen/hftok.h: Hugging Face BPE tokenizer.json files, as the tests
 * write them: test_tokenizer's cases and mkckpt's Hub folders.
 *   byte-level (GPT-2's, Qwen2's, SmolLM's, Llama 3's): the vocab is the
 *       256 bytes (id = byte), then one token per merge in merge order,
 *       then the added tokens "<|endoftext|>" and "<|bos|>" (Llama 3's:
 *       its 256, "<|begin_of_text|>", "<|end_of_text|>", ...,
 *       "<|eot_id|>", ..., "<|reserved_special_token_247|>");
 *   SentencePiece-style (Llama 2's, or with a Metaspace as Mistral's
 *       newer files): <unk>, <s>, </s> (ids 0 to 2, also added tokens),
 *       the byte fallback's <0x00>..<0xFF> (ids 3 to 258), U+2581 (259)
 *       and a to z (260 to 285), then one token per merge; a space in a
 *       merge's text is U+2581. Byte fallback, unk <unk> fused, and the
 *       decoder Replace, ByteFallback, Fuse, Strip. */
#ifndef KILN_TESTS_HFTOK_H
#define KILN_TESTS_HFTOK_H

#include <stddef.h>

typedef struct {
    const char *a, *b;          /* raw bytes: a + b becomes a token */
} HfPair;

/* GPT-2's ByteLevel, merges "A B"; Qwen2's Split, merges as arrays;
 * Llama 2's normalizer, merges "A B"; a Metaspace pre-tokenizer
 * (prepend_scheme first, no split), merges as arrays; SmolLM's Digits
 * (individual_digits) then ByteLevel, merges "A B"; Gemma's normalizer
 * (spaces as U+2581, none first), Split by " " and decoder (no Strip),
 * merges "A B"; Llama 3's Split then ByteLevel, ignore_merges, merges
 * "A B". */
enum {
    HF_TOK_GPT2, HF_TOK_QWEN2, HF_TOK_LLAMA, HF_TOK_METASPACE, HF_TOK_DIGITS, HF_TOK_GEMMA,
    HF_TOK_LLAMA3
};

/* The text of a tokenizer.json of style HF_TOK_* (malloc'd,
 * NUL-terminated, its length in *len; NULL when out of memory). post: the
 * post_processor's JSON, or NULL. */
char *hf_tokenizer_json(int style, const HfPair *m, int nm, const char *post, size_t *len);

/* A tokenizer.json of exactly `vocab` tokens at path, for a model of that
 * vocab: a few English merges (" the", " cat", " sat", ...), then letter
 * pairs, triples and quadruples until it is full; SentencePiece-style
 * ones put <s> first, Llama 3's <|begin_of_text|>. 0, or -1 (vocab below
 * 290, 318 SentencePiece-style or 544 Llama 3's, or needing more than
 * the 475,248 merges there are, or not written). */
int hf_tokenizer_write(const char *path, int style, int vocab);

#endif
