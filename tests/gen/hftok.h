/* tests/gen/hftok.h: Hugging Face byte-level BPE tokenizer.json files, as
 * the tests write them: test_tokenizer's cases and mkckpt's Hub folders.
 * The vocab is the 256 bytes (id = byte), then one token per merge in
 * merge order, then the added tokens "<|endoftext|>" and "<|bos|>". */
#ifndef KILN_TESTS_HFTOK_H
#define KILN_TESTS_HFTOK_H

#include <stddef.h>

typedef struct {
    const char *a, *b;          /* raw bytes: a + b becomes a token */
} HfPair;

/* The text of a tokenizer.json (malloc'd, NUL-terminated, its length in
 * *len; NULL when out of memory). qwen2: Qwen2's Split pre-tokenizer and
 * merges as arrays, else GPT-2's ByteLevel and merges as "A B". post: the
 * post_processor's JSON, or NULL. */
char *hf_tokenizer_json(int qwen2, const HfPair *m, int nm, const char *post, size_t *len);

/* A tokenizer.json of exactly `vocab` tokens at path, for a model of that
 * vocab: a few English merges (" the", " cat", " sat", ...), then letter
 * pairs and triples until it is full. 0, or -1 (vocab below 290,
 * above 18531, or not written). */
int hf_tokenizer_write(const char *path, int qwen2, int vocab);

#endif
