/* runtime/rt_jit.h: the runtime's JIT part (jit/), what only JIT code
 * calls: vector programs. kiln itself holds it; no generated C file
 * carries it. */
#ifndef KILN_RT_JIT_H
#define KILN_RT_JIT_H

#include "kiln_rt.h"

/* ---- vector programs (rt_vec.c) ----------------------------------------- */
/* libtcc does not vectorise, so JIT code hands each innermost loop nest
 * of f32 arithmetic to rt_vec: a program over the nest's iteration space,
 * evaluated in blocks of RT_VEC_B elements, one instruction over a whole
 * block at a time, by loops cc vectorised. The numbers are those of the
 * scalar loops as the cc build computes them: every element goes through
 * the same operations in the same order (x * y + z fused, as cc contracts
 * it; rt_expf, rt_tanhf as the C calls them, libm the other functions);
 * reductions into a scalar (RT_V_RED) add element by element in loop
 * order; a store's elements are written in loop order. codegen/vec.c says
 * which nests qualify (a block must read no element the block stores but
 * at that element) and writes the program:
 *   code[0..4]  levels L (1..RT_VEC_LEVELS), pointers P, registers R,
 *               insns I, rows a block at most (0: as many as fit)
 *   then per pointer: its storage (RT_F32, RT_BF16, RT_F16), then its
 *               stride in elements at each level, outermost first
 *   then I instructions of 5: op, d, a, b, c
 * Registers are blocks of floats; a bool is 1.0f or 0.0f. ptr[p] is the
 * pointer's element at the nest's first iteration; n[l] the trip count of
 * level l; scal[j] the loop-invariant values. */
#define RT_VEC_B 2048
#define RT_VEC_LEVELS 4
#define RT_VEC_REGS 16
#define RT_VEC_INSNS 256         /* instructions a program at most */
enum {
    RT_V_SCAL,      /* d = scal[a] (run once, before the first block) */
    RT_V_LD,        /* d = *ptr[a] */
    RT_V_ST,        /* *ptr[a] op= reg b, op c: 0 =, 1 +=, 2 max=, 3 += b * d (fused) */
    RT_V_RED,       /* the float at ptr[a] op= each element of b in turn (c: 1 +, 2 max) */
    RT_V_MOV,       /* d op= a, op b as RT_V_ST's */
    RT_V_ADD, RT_V_SUB, RT_V_MUL, RT_V_DIV, RT_V_MAX, RT_V_MIN,   /* d = a op b */
    RT_V_LT, RT_V_LE, RT_V_GT, RT_V_GE, RT_V_EQ, RT_V_NE, RT_V_AND, RT_V_OR,
    RT_V_NEG, RT_V_ABS, RT_V_EXP, RT_V_LOG, RT_V_SQRT, RT_V_RSQRT,   /* d = op a */
    RT_V_TANH, RT_V_ERF, RT_V_SIGMOID, RT_V_COS, RT_V_SIN, RT_V_NOT,
    RT_V_SEL,       /* d = a != 0 ? b : c */
    RT_V_FMA,       /* d = a * b + c, fused (as cc contracts it) */
    RT_V_PAIR,      /* RT_V_PAIR + 4 i + j: d = (a OPi b) OPj c, OP0..3 + - * /,
                       rounded after each, never with i = 2 and j < 2 */
    RT_V_PAIR_LAST = RT_V_PAIR + 15,
    RT_V_OUT,       /* the next instruction's d is pointer a's block where that
                       is one contiguous f32 run (a store of d there then
                       moves nothing) */
    RT_V_COUNT
};
RT_API void rt_vec(const int64_t *code, void *const *ptr, const float *scal, const int64_t *n);

/* The symbols of this part that JIT code calls (kiln_rt.h's
 * RT_CORE_SYMBOLS). */
#define RT_JIT_SYMBOLS(X) X(rt_vec)

#endif
