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

/* rt_gemm_bf16 on AMX tiles (rt_amx.c): m >= 16 rows, n a multiple of 16,
 * A rounded to bf16 (lossy); 1 when done, 0 when this machine cannot. */
RT_API int rt_gemm_bf16_amx(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                            const uint16_t *b, int64_t ldb, float *c, int64_t ldc);

/* rt_gemm_bf16 by AVX512-BF16's vdpbf16ps (rt_bf16dp.c), for machines
 * without AMX tiles: the same contract as rt_gemm_bf16_amx (m >= 16, n a
 * multiple of 16, A rounded to bf16); 1 when done, 0 when this build
 * cannot (no AVX512-BF16 in it) or KILN_AMX=off. */
RT_API int rt_gemm_bf16_vdp(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                            const uint16_t *b, int64_t ldb, float *c, int64_t ldc);

/* The pairs' machinery (rt_amx.c), for rt_gemm_bf16_amx, rt_gemm_bf16_vdp
 * and qgemm's AMX path (runtime/quant/rt_gemm_q_amx.c): only in a build
 * for a CPU with AVX512-BF16 (RT_BF16DP defined), the tiles' part only
 * with AMX-BF16 too (RT_AMX; callers test them). The reduction goes in
 * chunks of RT_AMX_K; operands are prepared per chunk in the thread's
 * stack: rows of A as bf16 rows of RT_AMX_K values (rt_amx_rows), columns
 * of B as tiles of 16 columns, each RT_AMX_K / 2 pairs of k of 16 columns
 * x 2 bf16 (the layout tdpbf16ps and vdpbf16ps read: value B[2p + h][16t
 * + c] at t * RT_AMX_K * 16 + p * 32 + 2c + h), zero past the chunk (up
 * to 32 k) and the columns (up to 32). */
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__x86_64__)
#define RT_BF16DP 1
enum { RT_AMX_K = 256 };
/* Rows [0, m) of a chunk of kc values (row stride lda) as bf16 rows at dst,
 * to nearest even (subnormals to zero), zero past kc and past m (up to
 * the multiples of 32 the tiles read). */
RT_API void rt_amx_rows(uint16_t *dst, int64_t m, int64_t kc, const float *a, int64_t lda);
/* Columns [0, nb) of B's chunk of kc rows (row stride ldb) as tiles of 16
 * columns, as above. */
RT_API void rt_amx_cols(uint16_t *dst, int64_t nb, int64_t kc, const uint16_t *b, int64_t ldb);
#endif
#if defined(RT_BF16DP) && (defined(__AMX_TILE__) || defined(__AMXTILE__)) && \
    (defined(__AMX_BF16__) || defined(__AMXBF16__)) && defined(__linux__)
#define RT_AMX 1
/* 1 and the thread's tiles configured when they may be used (the CPU has
 * AMX-TILE and AMX-BF16, the kernel grants them, KILN_AMX is not "off");
 * else 0. Every 1 is followed by rt_amx_end, which releases them. */
RT_API int rt_amx_begin(void);
RT_API void rt_amx_end(void);
/* C[m][n] (row stride ldc) += the chunk's A B over kp (a multiple of 32)
 * values of k: a rows of rt_amx_rows, b tiles of columns as above; 32 x
 * 32 blocks of C in four tiles, fed 32 k at a time by tdpbf16ps. */
RT_API void rt_amx_blocks(int64_t m, int64_t n, int64_t kp, const uint16_t *a, const uint16_t *b,
                          float *c, int64_t ldc);
#endif

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
