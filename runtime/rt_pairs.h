/* runtime/rt_pairs.h: the runtime's pairs part (pairs/): bf16 gemms of
 * 16 rows or more on products of bf16 pairs in hardware, AMX tiles
 * (rt_amx.c) or AVX512-BF16's vdpbf16ps (rt_bf16dp.c), where the CPU has
 * them and KILN_AMX is not "off". A generated program carries it when it
 * holds a bf16 weight (rt_gemm_bf16's calls) or a quantized one (whose
 * AMX path shares the tiles' machinery, and whose gemms keep their
 * operands through rt_kept): codegen's cg_rt_uses. The core reaches it
 * through rt_pairs_use, which the part's constructor calls. */
#ifndef KILN_RT_PAIRS_H
#define KILN_RT_PAIRS_H

#include "runtime/kiln_rt.h"

/* rt_gemm_bf16 on AMX tiles (runtime/pairs/rt_amx.c): m >= 16 rows, n a multiple of 16,
 * A rounded to bf16 (lossy); 1 when done, 0 when this machine cannot.
 * scope: rt_gemm_bf16_kept's, 0 for none (kiln_rt.h). */
RT_API int rt_gemm_bf16_amx(uint64_t scope, int64_t m, int64_t n, int64_t k, const float *a,
                            int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc);

/* rt_gemm_bf16 by AVX512-BF16's vdpbf16ps (runtime/pairs/rt_bf16dp.c), for machines
 * without AMX tiles: the same contract as rt_gemm_bf16_amx (m >= 16, n a
 * multiple of 16, A rounded to bf16); 1 when done, 0 when this build
 * cannot (no AVX512-BF16 in it) or KILN_AMX=off. */
RT_API int rt_gemm_bf16_vdp(uint64_t scope, int64_t m, int64_t n, int64_t k, const float *a,
                            int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc);

/* An operand kept for a scope (kiln_rt.h: rt_keep_scope; rt_kept.c, on
 * every CPU, for this part's gemms and the quantized part's, which a
 * program carries only with this one): A of a gemm call (its pointer,
 * lda, m, k) in the form the part computes from it (form: the part's,
 * e.g. the weight type whose blocks it is quantized for). */
typedef struct {
    uint64_t scope;
    const float *a;
    int64_t lda, m, k;
    int form;
} rt_kept_key;
/* The calling thread's bytes for key: those an earlier call with the same
 * key filled (*fill 0), or others for the caller to fill now (*fill 1);
 * NULL when the scope is 0, bytes pass 64 MB or the memory cannot be
 * had. A thread keeps RT_KEPT operands, the oldest replaced, freed when
 * it ends. */
enum { RT_KEPT = 4 };
RT_API void *rt_kept(const rt_kept_key *key, size_t bytes, int *fill);
/* The calling thread's scratch of at least bytes (64-byte aligned), kept
 * for its next calls and freed when it ends (rt_kept.c); NULL when out of
 * memory. One a thread: a call uses it for one thing at a time (qgemm's
 * int8 rows when they are not kept, or its AMX path's bf16 rows). */
RT_API void *rt_scratch(size_t bytes);

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
/* A block's products: C[m][n] (row stride ldc) += a chunk's kp (a
 * multiple of 32) values of k, a rows of rt_amx_rows, b tiles of columns
 * of rt_amx_cols; m, n <= 64. */
typedef void rt_pairs_block(int64_t m, int64_t n, int64_t kp, const uint16_t *a,
                            const uint16_t *b, float *c, int64_t ldc);
/* rt_gemm_bf16's call by blocks of 64 columns, chunks of RT_AMX_K values
 * of k and blocks of 64 rows: per chunk its columns of B paired once for
 * all rows, per block of rows the chunk's rows of A rounded, both in the
 * thread's stack, then block (rt_amx_blocks, or vdpbf16ps's). With a
 * scope (rt_gemm_bf16_kept), A's rows are rounded whole, once for the
 * scope, and kept in the thread's memory (rt_kept; in the stack as
 * without a scope when that memory cannot be had). */
RT_API void rt_pairs_drive(uint64_t scope, int64_t m, int64_t n, int64_t k, const float *a,
                           int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc,
                           rt_pairs_block *block);
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

#endif
