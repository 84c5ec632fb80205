/* runtime/quant/rt_quant.c: the quantized types' blocks (rt_quant.h):
 * sizes and names. (Being written: quantizing, widening, elements.) */
#include "runtime/rt_quant.h"

int rt_q_block(int store)
{
    return store == RT_Q8_0 || store == RT_Q4_0 ? 32 : store == RT_Q4_K || store == RT_Q6_K ? 256 : 0;
}

int rt_q_block_bytes(int store)
{
    return rt_q_block(store) ? (int)rt_store_bytes(store, rt_q_block(store)) : 0;
}

const char *rt_q_name(int store)
{
    static const char *const names[] = {"q8_0", "q4_0", "q4_k", "q6_k"};
    return store >= RT_Q8_0 && store <= RT_Q6_K ? names[store - RT_Q8_0] : NULL;
}
