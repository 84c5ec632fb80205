/* runtime/rt_quant.h: the runtime's quantized part (quant/), for programs
 * that hold a weight in blocks of int8 or 4- or 6-bit values with their
 * scales (--weight-dtype q8_0, q4_0, q4_k, q6_k, q4_k_m, mxfp4): the block
 * layouts, quantizing and widening them, reading one element, and the
 * gemm kernels over them. A generated program carries it only when it
 * holds such a weight (codegen's cg_rt_uses); the core's loader calls
 * rt_quantize through rt_tensor_info.quantize.
 *
 * The layouts are GGML's, byte for byte (little-endian; a scale `d` is an
 * IEEE half), so that a GGUF tensor of these types is used as stored, and
 * quantizing gives the bytes llama.cpp's llama-quantize gives for the same
 * f32 values (its reference quantizers, no importance matrix):
 *   q8_0  32 values in 34 bytes: d, then 32 int8 q; x = d * q.
 *   q4_0  32 values in 18 bytes: d, then 16 bytes; value j < 16 is the low
 *         nibble of byte j, value j + 16 its high nibble; x = d * (q - 8).
 *   q4_k  256 values in 144 bytes: d, dmin, 12 bytes of 8 6-bit scales and
 *         8 6-bit mins, 128 bytes of nibbles; sub-block s (32 values) is
 *         x = d * sc[s] * q - dmin * mn[s]; the nibbles of values 64 i + l
 *         (l < 32) are the low halves of bytes 32 i + l, of values
 *         64 i + 32 + l their high halves.
 *   q6_k  256 values in 210 bytes: 128 bytes ql (low 4 bits), 64 bytes qh
 *         (high 2 bits), 16 int8 scales, d; sub-block s (16 values) is
 *         x = d * scales[s] * (q - 32).
 *   f8_e4m3  128 values in 132 bytes: an f32 scale d, then 128 FP8 e4m3
 *         bytes q (kiln_rt.h's rt_e4m3_f32); x = d * e4m3(q). An FP8
 *         checkpoint's bytes as stored, its scales spread per 128 values
 *         of a row (rt_load_weights; docs/fp8.md: a checkpoint's scale
 *         blocks are 128 x 128, rows or the tensor, so one scale covers
 *         them); kiln's own layout.
 *   mxfp4 32 values in 17 bytes (OCP Microscaling's MXFP4, GGML's
 *         block_mxfp4, GGUF type 39): e, an E8M0 scale (8 exponent bits,
 *         2^(e - 127); e = 255 is NaN, as the OCP format has it), then 16
 *         bytes of E2M1 nibbles in q4_0's order (value j < 16 the low
 *         nibble of byte j, j + 16 its high one); a nibble is 1 sign bit
 *         (bit 3), 2 exponent bits and 1 mantissa bit: 0, 0.5, 1, 1.5, 2,
 *         3, 4, 6, negated with the sign; x = v * 2^(e - 127). Quantizing
 *         (kiln's own; not claimed to be llama-quantize's bytes) takes e =
 *         floor(log2(amax)) - 2 + 127, clamped to [0, 254] (0 for a block of
 *         zeros), and each value's nearest E2M1 times 2^(e - 127), a tie to
 *         the smaller magnitude, above 6 times it 6.
 * A weight so held is a sequence of blocks over its elements in row-major
 * order; its last dim (a row) is a multiple of the block, so no block
 * spans two rows (kiln holds any other weight wider, with a note). */
#ifndef KILN_RT_QUANT_H
#define KILN_RT_QUANT_H

#include "kiln_rt.h"

/* ---- the types (rt_quant.c) --------------------------------------------- */
/* The values of RT_Q8_0 ... RT_Q6_K (a weight's store) are kiln_rt.h's. */
/* Values a block holds (32, 128 or 256: kiln_rt.h's rt_store_block) and
 * its bytes, by store (RT_Q8_0 ... RT_Q6_K, RT_F8_E4M3, RT_MXFP4); 0 for a
 * store that is not quantized. */
RT_API int rt_q_block(int store);
RT_API int rt_q_block_bytes(int store);
/* "q8_0", "q4_0", "q4_k", "q6_k", "f8_e4m3", "mxfp4"; NULL for another store. */
RT_API const char *rt_q_name(int store);

/* n values (a multiple of the block) of src into blocks of store at dst,
 * as GGML's reference quantizer makes them (quantize_row_*_ref): the
 * same bytes for the same floats (f8_e4m3: d = amax / 448 in f32, q the
 * e4m3 nearest x / d, rt_f32_e4m3; d 0: q 0). A NaN or infinite value makes the
 * block's scale so (d, and q4_k's dmin; the rest zeros); callers check
 * their floats first. The blocks are shared among the core's threads
 * (rt_parallel_for), which changes no byte. */
RT_API void rt_quantize(int store, const float *src, void *dst, int64_t n);
/* n values (a multiple of the block) of the blocks at src as f32, exactly
 * as the formulas above give them (dequantize_row_*). */
RT_API void rt_dequantize(int store, const void *src, float *dst, int64_t n);
/* Whether the n values' blocks at src have finite scales: 0, else the
 * index of the first bad block plus 1. */
RT_API int64_t rt_q_check(int store, const void *src, int64_t n);

/* Element i (row-major over the weight) of a weight held so, as
 * rt_dequantize gives it: what generated code calls where it reads one
 * element (a gathered embedding row, a loop tile left as loops). */
RT_API float rt_q8_0_at(const void *w, int64_t i);
RT_API float rt_q4_0_at(const void *w, int64_t i);
RT_API float rt_q4_k_at(const void *w, int64_t i);
RT_API float rt_q6_k_at(const void *w, int64_t i);
RT_API float rt_f8_e4m3_at(const void *w, int64_t i);
RT_API float rt_mxfp4_at(const void *w, int64_t i);
/* An E8M0 byte's 2^(e - 128) (half the block's scale, as the kernels
 * take it: their E2M1 integers are 2v), or NaN for 255. */
RT_API float rt_e8m0_half(int e);

/* ---- gemm over quantized weights (rt_gemm_q.c) -------------------------- */
/* C[m][n] += sum over kk < k of A[m][kk] * W(n, kk), row-major A and C
 * with row strides lda, ldc (elements), W(j, kk) element woff + j * ldw +
 * kk of the quantized weight w (k, woff and ldw multiples of the block):
 * a linear's x W^T over rows of the weight as stored. Each row of A is
 * quantized per block of the weight (32 or 256 values) to int8: d = amax
 * / 127, q = rintf(x * (127 / amax)). Then per element of C, from its
 * value, block after block in k order: the block's integer dot product i,
 * exact (sub-block scales applied), and acc = fmaf((float)i, dw * d, acc)
 * (q4_k then subtracts its mins' integer sum likewise, times dmin * d).
 * So the result is the dot product of the dequantized weight with A
 * quantized so (rt_q_act_round), up to the rounding of those f32
 * scalings; the same bits for any path (AVX-512 VNNI, AVX2 or portable C,
 * as the compiler targets: -march), thread count and split of rows,
 * columns or k (at a block) into calls. rt_gemm_q.c's top comment has
 * the details. Except on AMX tiles: a call of m >= 16 rows on q8_0, q4_0,
 * q4_k or q6_k runs there where the program can (rt_gemm_q_amx.c: the CPU and
 * kernel allow it, this build targets it, KILN_AMX is not "off"), with A
 * rounded to bf16 instead and the weights' dequantized values rounded to
 * bf16 (to nearest even), their products added in pairs in f32 by
 * tdpbf16ps; the same for any thread count, not for any split of k. */
RT_API void rt_gemm_q8_0(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc);
RT_API void rt_gemm_q4_0(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc);
RT_API void rt_gemm_q4_k(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc);
RT_API void rt_gemm_q6_k(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc);
RT_API void rt_gemm_mxfp4(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                          const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc);
/* rt_gemm_TYPE of type (RT_Q8_0, RT_Q4_0, RT_Q4_K, RT_Q6_K or RT_MXFP4;
 * another does nothing) for callers whose A does not change between
 * their calls of one scope (kiln_rt.h: rt_keep_scope): A is quantized
 * once for the scope, not once a call; the same numbers. */
RT_API void rt_gemm_q_kept(uint64_t scope, int type, int64_t m, int64_t n, int64_t k,
                           const float *a, int64_t lda, const void *w, int64_t woff, int64_t ldw,
                           float *c, int64_t ldc);
/* The same over f8_e4m3 blocks, activations kept in f32 (rt_gemm_f8.c):
 * per element of C, 16 f32 lanes L from 0; per block of k in k order,
 * lane l's t = w_l a_l, then t = fmaf(w_{l+16i}, a_{l+16i}, t) for i = 1
 * ... 7 (w the block's 128 e4m3 values / 2^8, exact in f32; a the row of
 * A there), L_l = fmaf(t, d, L_l); then L_l += L_{l+h} for h = 8, 4, 2,
 * 1, and C += L_0 * 2^8
 * (the same as with w unscaled, but for underflow). The same
 * bits on every path (AVX-512, portable C), thread count and split of
 * rows or columns into calls; k split into calls changes the order. */
RT_API void rt_gemm_f8_e4m3(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                            const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc);
/* n values (a multiple of block, 32 or 256; another block does nothing)
 * of x as the gemm kernels quantize activations, widened back into y (d *
 * q; a block whose amax is below 2^-100 gives zeros, one holding an inf
 * or NaN NaNs): what the reference runs on to agree with the kernels up
 * to the f32 scalings (kiln check --exact-activations). */
RT_API void rt_q_act_round(int block, const float *x, float *y, int64_t n);

/* Every symbol of this part that generated code may call (for libtcc). */
#define RT_QUANT_SYMBOLS(X)                                                   \
    X(rt_q_block) X(rt_q_block_bytes) X(rt_q_name) X(rt_quantize) X(rt_dequantize) \
    X(rt_q_check) X(rt_q8_0_at) X(rt_q4_0_at) X(rt_q4_k_at) X(rt_q6_k_at)      \
    X(rt_gemm_q8_0) X(rt_gemm_q4_0) X(rt_gemm_q4_k) X(rt_gemm_q6_k) X(rt_q_act_round) \
    X(rt_gemm_q_kept) \
    X(rt_f8_e4m3_at) X(rt_gemm_f8_e4m3) X(rt_mxfp4_at) X(rt_e8m0_half) X(rt_gemm_mxfp4)

#endif
