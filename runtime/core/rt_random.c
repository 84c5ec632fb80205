/* runtime/core/rt_random.c: the documented generator.
 *
 * Users rely on these numbers being the same on every machine and in
 * every kiln version (a weight's "random" init, seeded inputs), so the
 * arithmetic is exactly the one kiln_rt.h spells out: SplitMix64, the top
 * 24 bits of each output as u in [0, 1), value (2u - 1) * scale rounded
 * once to float. The 24 bits are exact in a float, so scale 1 gives
 * exactly the grid k * 2^-23 - 1. i32 inputs take x % hi. */
#include "runtime/core/rt_core.h"

uint64_t rt_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

void rt_fill_random(float *dst, int64_t n, uint64_t seed, double scale)
{
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(rt_splitmix64(&s) >> 40) * 0x1p-24;
        dst[i] = (float)((2.0 * u - 1.0) * scale);
    }
}

void rt_seed_input(const rt_tensor_info *t, int index, uint64_t seed, void *dst)
{
    uint64_t s = seed + UINT64_C(1000003) * ((uint64_t)(int64_t)index + 1);
    if (t->dtype == RT_F32) {
        rt_fill_random(dst, t->count, s, 1.0);
        return;
    }
    /* hi outside [1, 2^31] cannot be meant: clamp so values fit int32. */
    uint64_t hi = t->hi < 1 ? 1 : (uint64_t)t->hi;
    if (hi > UINT64_C(0x80000000))
        hi = UINT64_C(0x80000000);
    int32_t *d = dst;
    for (int64_t i = 0; i < t->count; i++)
        d[i] = (int32_t)(rt_splitmix64(&s) % hi);
}
