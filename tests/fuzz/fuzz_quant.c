/* tests/fuzz/fuzz_quant.c: the quantized blocks (runtime/rt_quant.h), as
 * a GGUF file's tensor or a prepared image hands them to a program, and
 * rt_quantize on any floats.
 *
 * Input: a first byte choosing the type (% 4: q8_0, q4_0, q4_k, q6_k),
 * then the rest twice: as that type's blocks (whole ones, at most 16),
 * and as f32 values (zero-padded to whole blocks, at most 16). Whatever
 * the bytes:
 * - rt_q_check names the first block whose scale (d; q4_k: d or dmin) is
 *   a NaN or inf, by the layout read here, and a block it passes widens
 *   to finite values only;
 * - every element read is rt_dequantize's value, bit for bit (any NaN
 *   for a NaN);
 * - quantizing the floats makes blocks whose first bad one, for
 *   rt_q_check, is the first holding a NaN or inf, when no value is
 *   beyond 2^16 (larger ones may overflow a scale), and the blocks made
 *   keep the element-read contract. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/rt_quant.h"

enum { MAX_BLOCKS = 16 };
static const int stores[4] = {RT_Q8_0, RT_Q4_0, RT_Q4_K, RT_Q6_K};

static float elem(int store, const void *w, int64_t i)
{
    switch (store) {
    case RT_Q8_0: return rt_q8_0_at(w, i);
    case RT_Q4_0: return rt_q4_0_at(w, i);
    case RT_Q4_K: return rt_q4_k_at(w, i);
    default: return rt_q6_k_at(w, i);
    }
}

/* Whether the half at p is finite, from its bits. */
static int finite_half(const unsigned char *p)
{
    return ((p[0] | p[1] << 8) & 0x7c00) != 0x7c00;
}

static int block_ok(int store, const unsigned char *b)
{
    if (store == RT_Q6_K)
        return finite_half(b + 208);
    return finite_half(b) && (store != RT_Q4_K || finite_half(b + 2));
}

/* The blocks' contract on nb blocks at b; returns rt_q_check's answer. */
static int64_t check_blocks(int store, const unsigned char *b, int64_t nb)
{
    int bn = rt_q_block(store), bytes = rt_q_block_bytes(store);
    float *y = malloc((size_t)(nb * bn + 1) * sizeof *y);
    int64_t bad = rt_q_check(store, b, nb * bn), first = 0;
    for (int64_t i = nb - 1; i >= 0; i--)
        if (!block_ok(store, b + i * bytes))
            first = i + 1;
    FUZZ_CHECK(bad == first);
    rt_dequantize(store, b, y, nb * bn);
    for (int64_t i = 0; i < nb * bn; i++) {
        float v = elem(store, b, i);
        FUZZ_CHECK(memcmp(&v, &y[i], sizeof v) == 0 || (isnan(v) && isnan(y[i])));
        if (block_ok(store, b + i / bn * bytes))
            FUZZ_CHECK(isfinite(y[i]));
    }
    free(y);
    return bad;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int store = stores[data[0] % 4], bn = rt_q_block(store), bytes = rt_q_block_bytes(store);
    size_t rest = size - 1;
    int64_t nb = (int64_t)(rest / (size_t)bytes);
    check_blocks(store, data + 1, nb < MAX_BLOCKS ? nb : MAX_BLOCKS);

    int64_t nv = (int64_t)(rest / 4), fb = (nv + bn - 1) / bn;
    if (fb > MAX_BLOCKS)
        fb = MAX_BLOCKS;
    float *x = calloc((size_t)(fb * bn + 1), sizeof *x);
    unsigned char *q = malloc((size_t)(fb * bytes + 1));
    memcpy(x, data + 1, (size_t)(nv < fb * bn ? nv : fb * bn) * sizeof *x);
    rt_quantize(store, x, q, fb * bn);
    int64_t first = 0, big = 0;
    for (int64_t i = fb * bn - 1; i >= 0; i--) {
        if (!isfinite(x[i]))
            first = i / bn + 1;
        else if (fabsf(x[i]) > 65536)
            big = 1;
    }
    int64_t bad = check_blocks(store, q, fb);
    if (!big)
        FUZZ_CHECK(bad == first);
    free(x);
    free(q);
    return 0;
}
