/* ir/alloc.c: the allocator under the memory kiln owns: arena chunks,
 * jansson's trees, a model file's text.
 *
 * It is here so that tests can make it fail, as SQLite's fault injection
 * does: ir_alloc_fail_at(n) fails the n-th allocation from then on, once,
 * and ir_alloc_live tells whether every block was given back after.
 * Compiling is single-threaded; so is this. */
#include "ir.h"

#include <stdlib.h>

static unsigned long count;     /* allocations since ir_alloc_fail_at */
static unsigned long fail_at;   /* the one to fail; 0: none */
static long live;               /* blocks allocated here, not yet freed */

void *ir_malloc(size_t size)
{
    void *p = ++count == fail_at ? NULL : malloc(size ? size : 1);
    if (p)
        live++;
    return p;
}

void *ir_realloc(void *p, size_t size)
{
    if (!p)
        return ir_malloc(size);
    return ++count == fail_at ? NULL : realloc(p, size ? size : 1);
}

void ir_free(void *p)
{
    if (p)
        live--;
    free(p);
}

void ir_alloc_fail_at(unsigned long n)
{
    count = 0;
    fail_at = n;
}

unsigned long ir_alloc_count(void) { return count; }

long ir_alloc_live(void) { return live; }
