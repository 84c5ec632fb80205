/* runtime/core/rt_mem.c: buffers for tensors.
 *
 * Contract: rt_alloc returns a zeroed block aligned to 64 bytes (a cache
 * line, and the widest vector load), or NULL when out of memory or when
 * the size is beyond PTRDIFF_MAX (differences of pointers into an object
 * must fit). The block is rounded up to whole 64-byte lines, so a kernel
 * may load a full vector at the tail of a buffer; a size of 0 still gives
 * a valid, distinct pointer. What rt_alloc returns goes back by rt_free,
 * never free().
 *
 * Blocks of RT_HUGE bytes or more (weights, mostly) are mapped afresh,
 * aligned to RT_HUGE, and asked to be backed by huge pages where the
 * system does that on request (Linux with transparent huge pages in
 * "madvise" mode): a decode step streams every weight once, and with 4 KB
 * pages that costs a TLB miss every 64 lines. stories110M's decode step:
 * 6.64-6.86 ms -> 6.40-6.52 ms (best of 150, 8 alternating pairs). A
 * fresh mapping is zero without being touched, so such a block costs
 * memory as it is written. rt_alloc_lazy's blocks are mapped whatever
 * their size, without huge pages, so that state costs memory as it fills:
 * a TinyLlama-shaped KV cache (2 MB a layer, 2048 rows) was 88 MB resident
 * after the first token when its first row took a huge page a layer (and
 * 92 MB when every block was zeroed here). The mapped blocks are listed,
 * so that rt_free unmaps them; every other block is posix_memalign's,
 * zeroed, and free()d. */
#include "runtime/core/rt_core.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define RT_HUGE ((size_t)2 << 20)

/* The mapped blocks: their addresses and lengths, unordered. */
static struct rm_block {
    void *p;
    size_t len;
} *rm_blocks;
static size_t rm_n, rm_cap;
static pthread_mutex_t rm_lock = PTHREAD_MUTEX_INITIALIZER;

/* A fresh mapping of len bytes (a multiple of the page) at an address
 * aligned to RT_HUGE, listed, asked for huge pages when huge; NULL when
 * it cannot be made. */
static void *rm_map(size_t len, int huge)
{
    if (len > SIZE_MAX - RT_HUGE)
        return NULL;
    unsigned char *r = mmap(NULL, len + RT_HUGE, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        return NULL;
    unsigned char *p = (unsigned char *)(((uintptr_t)r + RT_HUGE - 1) & ~(uintptr_t)(RT_HUGE - 1));
    if (p > r)
        munmap(r, (size_t)(p - r));
    if (r + len + RT_HUGE > p + len)
        munmap(p + len, (size_t)(r + len + RT_HUGE - (p + len)));
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    madvise(p, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);  /* hints: failure is harmless */
#endif
    pthread_mutex_lock(&rm_lock);
    if (rm_n == rm_cap) {
        size_t cap = rm_cap ? 2 * rm_cap : 64;
        struct rm_block *b = realloc(rm_blocks, cap * sizeof *b);
        if (!b) {
            pthread_mutex_unlock(&rm_lock);
            munmap(p, len);
            return NULL;
        }
        rm_blocks = b;
        rm_cap = cap;
    }
    rm_blocks[rm_n++] = (struct rm_block){p, len};
    pthread_mutex_unlock(&rm_lock);
    return p;
}

void *rt_alloc(size_t bytes)
{
    if (bytes > (size_t)PTRDIFF_MAX - 63)
        return NULL;
    size_t rounded = bytes ? (bytes + 63) & ~(size_t)63 : 64;
    if (rounded >= RT_HUGE)
        return rm_map((rounded + 4095) & ~(size_t)4095, 1);
    void *p = NULL;
    if (posix_memalign(&p, 64, rounded) != 0)
        return NULL;
    memset(p, 0, rounded);
    return p;
}

void *rt_alloc_lazy(size_t bytes)
{
    if (bytes > (size_t)PTRDIFF_MAX - 4095)
        return NULL;
    return rm_map(bytes ? (bytes + 4095) & ~(size_t)4095 : 4096, 0);
}

void rt_free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&rm_lock);
    for (size_t i = rm_n; i-- > 0;)       /* the newest first: freed soonest */
        if (rm_blocks[i].p == p) {
            size_t len = rm_blocks[i].len;
            rm_blocks[i] = rm_blocks[--rm_n];
            pthread_mutex_unlock(&rm_lock);
            munmap(p, len);
            return;
        }
    pthread_mutex_unlock(&rm_lock);
    free(p);
}
