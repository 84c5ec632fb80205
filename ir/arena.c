/* ir/arena.c: one region per compilation (QBE util.c alloc/freeall).
 * Memory comes in chunks that double in size; nothing is freed alone. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct Chunk Chunk;
struct Chunk {
    Chunk *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
};

struct Arena {
    Chunk *head;
    jmp_buf *oom;
};

_Noreturn void ir_bug(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "kiln: internal error at %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

static _Noreturn void out_of_memory(Arena *a)
{
    if (a->oom)
        longjmp(*a->oom, 1);
    fprintf(stderr, "kiln: out of memory\n");
    exit(4);
}

Arena *arena_new(void)
{
    Arena *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    return a;
}

void arena_set_oom(Arena *a, jmp_buf *oom) { a->oom = oom; }

void arena_free(Arena *a)
{
    if (!a)
        return;
    for (Chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

#define ARENA_MAX ((size_t)1 << 40)    /* no single compilation needs more */

void *arena_alloc(Arena *a, size_t size)
{
    if (size > ARENA_MAX)                 /* before rounding: no wrap-around */
        out_of_memory(a);
    size = (size + 15) & ~(size_t)15;
    Chunk *c = a->head;
    if (!c || c->size - c->used < size) {
        size_t want = c ? c->size * 2 : 64 * 1024;
        while (want < size)
            want *= 2;                    /* size <= 2^40: cannot wrap */
        if (want > ARENA_MAX)
            out_of_memory(a);
        Chunk *nc = malloc(sizeof *nc + want);
        if (!nc)
            out_of_memory(a);
        nc->next = c;
        nc->used = 0;
        nc->size = want;
        a->head = c = nc;
    }
    void *p = c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

void *arena_dup(Arena *a, const void *p, size_t size)
{
    void *q = arena_alloc(a, size);
    if (size)
        memcpy(q, p, size);
    return q;
}

char *arena_strdup(Arena *a, const char *s)
{
    return arena_dup(a, s, strlen(s) + 1);
}

char *arena_printf(Arena *a, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = arena_alloc(a, (size_t)len + 1);
    vsnprintf(s, (size_t)len + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

void *arena_grow(Arena *a, void *arr, int n, int *cap, size_t elem)
{
    int ncap = *cap ? *cap * 2 : 8;
    void *q = arena_alloc(a, (size_t)ncap * elem);
    if (n)
        memcpy(q, arr, (size_t)n * elem);
    *cap = ncap;
    return q;
}
