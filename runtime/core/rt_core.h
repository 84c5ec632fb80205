/* runtime/core/rt_core.h: what the core's files share, and the
 * generation part's with them (not for generated code): strict JSON read
 * in place, whole files, UTF-8, and rt_st_open's two halves. */
#ifndef KILN_RT_CORE_H
#define KILN_RT_CORE_H

#include "runtime/kiln_rt.h"

/* Strict JSON read in place (rt_json.c): each reader walks its own
 * grammar with these, so its messages name things in its terms. The text
 * must be valid UTF-8 (rt_utf8_bad). Every function skips whitespace
 * first, consumes what it reads and returns 0, or sets e and returns the
 * status: syntax is "PATH: PART: invalid JSON at byte N: what" (PART
 * left out when NULL), RT_EINVAL; out of memory, RT_EINTERNAL. */
typedef struct {
    const unsigned char *p, *start, *end; /* next byte; the text */
    const char *path;                     /* the file, first in messages */
    const char *part;                     /* which text: "header"; or NULL */
    rt_err *e;
} rt_json;
RT_API int rt_json_syntax(rt_json *J, const char *what);
RT_API int rt_json_oom(rt_json *J);
RT_API void rt_json_ws(rt_json *J);
/* Consumes c, or the word (true, false, null); 0 when it was there,
 * 1 (nothing set) when not. */
RT_API int rt_json_eat(rt_json *J, int c);
RT_API int rt_json_literal(rt_json *J, const char *word);
/* A string, malloc'd into *out (NULL on error); "\u0000" is refused. */
RT_API int rt_json_string(rt_json *J, char **out);
/* A number that must be an integer in [0, 2^63): otherwise
 * "PATH: WHAT: TEXT is not a non-negative integer" (or "is too large"). */
RT_API int rt_json_uint(rt_json *J, const char *what, int64_t *v);
/* Inside an object or array after its bracket: 1 when an item follows
 * (the comma consumed), 0 at the closing bracket `close`, -1 with e set
 * on anything else. Loop: for (first = 1; (more = next(..)) != 0; first = 0). */
RT_API int rt_json_next(rt_json *J, int close, int first);
/* Any value, checked and skipped; nesting deeper than 32 is refused. */
RT_API int rt_json_skip(rt_json *J);
/* Offset of the first byte of s[0, n) that is not well-formed UTF-8, or n. */
RT_API size_t rt_utf8_bad(const unsigned char *s, size_t n);
/* Writes code point cp (< 0x110000) as UTF-8 at o; returns the end. */
RT_API char *rt_utf8_put(char *o, unsigned cp);
/* A regular file of at most max bytes, read whole into *data (malloc'd,
 * NUL-terminated, *len bytes). Messages: "PATH: cannot read: why" (RT_EIO),
 * "PATH: larger than the limit of MAX bytes" (RT_EINVAL). */
RT_API int rt_read_file(const char *path, uint64_t max, char **data, size_t *len, rt_err *e);
/* A regular file mapped read-only and private into *map (NULL for an
 * empty file; munmap(*map, *size) frees it), its size in *size.
 * Messages: "PATH: cannot open: why", "PATH: cannot read: not a regular
 * file", "PATH: cannot map: why" (RT_EIO). */
RT_API int rt_map_file(const char *path, void **map, size_t *size, rt_err *e);

/* A call of rt_gemm_bf16 on pair products: 1 when done, 0 when this
 * program cannot, and the caller computes it; scope: rt_gemm_bf16_kept's
 * (0 for rt_gemm_bf16's calls). */
typedef int rt_pairs_gemm(uint64_t scope, int64_t m, int64_t n, int64_t k, const float *a,
                          int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc);
/* Installs the pairs part's gemm (runtime/rt_pairs.h: its constructor
 * does, so a program without the part runs rt_gemm_bf16 by widening):
 * rt_gemm_bf16 hands it every call of 16 rows or more. */
RT_API void rt_pairs_use(rt_pairs_gemm *gemm);

/* rt_st_open's two halves: one safetensors file (rt_safetensors.c), and an
 * index of shards, a path ending in .json (rt_safetensors_index.c). */
RT_API int rt_st_open_file(rt_safetensors *st, const char *path, rt_err *e);
RT_API int rt_st_open_index(rt_safetensors *st, const char *path, rt_err *e);

/* rt_image.c's file, for its fuzzer: the header of an image of w[0, n)
 * (bytes[i] each; 0 or w[i] NULL: none) for key, malloc'd (NULL: out of
 * memory), its bytes in *head and the whole file's in *size; and the
 * checks every open makes of a mapped image p[0, size): NULL when it is
 * sound for key and the program's sizes bytes[0, n), else what is wrong. */
RT_API unsigned char *rt_image_header(const char *key, int n, void *const *w,
                                      const size_t *bytes, uint64_t *head, uint64_t *size);
RT_API const char *rt_image_check(const unsigned char *p, uint64_t size, const char *key, int n,
                                  const size_t *bytes);

#endif
