/* runtime/core/rt_mem.c: buffers for tensors.
 *
 * Contract: rt_alloc returns a zeroed block aligned to 64 bytes (a cache
 * line, and the widest vector load), or NULL when out of memory or when
 * the size is beyond PTRDIFF_MAX (differences of pointers into an object
 * must fit). The block is rounded up to whole 64-byte lines, so a kernel
 * may load a full vector at the tail of a buffer; a size of 0 still gives
 * a valid, distinct pointer. rt_free is free(): posix_memalign blocks are
 * free()able.
 *
 * Blocks of RT_HUGE bytes or more (weights, mostly) are aligned to it and
 * asked to be backed by huge pages where the system does that on request
 * (Linux with transparent huge pages in "madvise" mode): a decode step
 * streams every weight once, and with 4 KB pages that costs a TLB miss
 * every 64 lines. stories110M's decode step: 6.64-6.86 ms -> 6.40-6.52
 * ms (best of 150, 8 alternating pairs). */
#include "runtime/core/rt_core.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define RT_HUGE ((size_t)2 << 20)

void *rt_alloc(size_t bytes)
{
    if (bytes > (size_t)PTRDIFF_MAX - 63)
        return NULL;
    size_t rounded = bytes ? (bytes + 63) & ~(size_t)63 : 64;
    void *p = NULL;
    if (posix_memalign(&p, rounded >= RT_HUGE ? RT_HUGE : 64, rounded) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (rounded >= RT_HUGE)
        madvise(p, rounded, MADV_HUGEPAGE);         /* a hint: failure is harmless */
#endif
    memset(p, 0, rounded);
    return p;
}

void rt_free(void *p)
{
    free(p);
}
