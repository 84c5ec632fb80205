/* runtime/rt_mem.c: buffers for tensors.
 *
 * Contract: rt_alloc returns a zeroed block aligned to 64 bytes (a cache
 * line, and the widest vector load), or NULL when out of memory or when
 * the size is beyond PTRDIFF_MAX (differences of pointers into an object
 * must fit). The block is rounded up to whole 64-byte lines, so a kernel
 * may load a full vector at the tail of a buffer; a size of 0 still gives
 * a valid, distinct pointer. rt_free is free(): posix_memalign blocks are
 * free()able. */
#include "kiln_rt.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *rt_alloc(size_t bytes)
{
    if (bytes > (size_t)PTRDIFF_MAX - 63)
        return NULL;
    size_t rounded = bytes ? (bytes + 63) & ~(size_t)63 : 64;
    void *p = NULL;
    if (posix_memalign(&p, 64, rounded) != 0)
        return NULL;
    memset(p, 0, rounded);
    return p;
}

void rt_free(void *p)
{
    free(p);
}
