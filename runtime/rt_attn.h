/* runtime/rt_attn.h: the runtime's attention part (attn/): the kernel of
 * the loop IR's `call attn` statements. A generated program carries it
 * when one of its kernels calls it (codegen's cg_rt_uses). */
#ifndef KILN_RT_ATTN_H
#define KILN_RT_ATTN_H

#include "runtime/kiln_rt.h"

/* attn(O, Q, K, V[, SK]; p0, hi, window, scale, softcap) of the loop IR
 * (ir/ir.h): for the nt query rows of nh heads of d (head r of row i at q
 * + i * ldq + r * d, its output at o + i * ldo + r * d) against keys j at
 * k + j * ldk, values at v + j * ldv: row i, at position p0 + i, sees
 * keys lo_i .. hi_i - 1, hi_i = hi (p0 + i + 1 when hi is 0: causal), lo_i
 * = 0 or, with window > 0, max(0, p0 + i - window + 1); a score is scale
 * q.k, then softcap tanh(score / softcap) when softcap > 0. With sinks
 * (not NULL; gpt-oss), head r's softmax has sinks[r] as one more logit in
 * its denominator only: exp(s_j - m) / (sum_j exp(s_j - m) + exp(sinks[r]
 * - m)), m the max over the scores and the sink. Online softmax over
 * blocks of 64 keys; every sum's order depends on these arguments only. */
RT_API void rt_attn(int64_t nt, int64_t nh, int64_t d, const float *q, int64_t ldq,
                    const float *k, int64_t ldk, const float *v, int64_t ldv, float *o,
                    int64_t ldo, const float *sinks, int64_t p0, int64_t hi, int64_t window,
                    float scale, float softcap);

/* Every symbol of this part that generated code may call (for libtcc). */
#define RT_ATTN_SYMBOLS(X) X(rt_attn)

#endif
