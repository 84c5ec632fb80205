/* ir/arena.c: one region per compilation (QBE util.c alloc/freeall).
 * Memory comes in chunks that double in size; nothing is freed alone.
 * What a compilation holds outside the arena is recorded in it, so that
 * arena_free releases it too (APR's pool cleanups). */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct Chunk Chunk;
struct Chunk {
    Chunk *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
};

typedef struct Hold Hold;
struct Hold {
    Hold *next;
    void *p;
    void (*release)(void *);
};

struct Arena {
    Chunk *head;
    Hold *held;                   /* newest first */
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

_Noreturn void arena_oom(Arena *a)
{
    if (a->oom)
        longjmp(*a->oom, 1);
    fprintf(stderr, "kiln: out of memory\n");
    exit(4);
}

Arena *arena_new(void)
{
    Arena *a = ir_malloc(sizeof *a);
    if (a)
        *a = (Arena){0};
    return a;
}

void arena_set_oom(Arena *a, jmp_buf *oom) { a->oom = oom; }

void arena_free(Arena *a)
{
    if (!a)
        return;
    while (a->held)
        arena_release(a, a->held->p);
    for (Chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        ir_free(c);
    }
    ir_free(a);
}

void arena_hold(Arena *a, void *p, void (*release)(void *))
{
    Hold *h = ir_malloc(sizeof *h);
    if (!h) {
        release(p);
        arena_oom(a);
    }
    *h = (Hold){a->held, p, release};
    a->held = h;
}

void arena_release(Arena *a, void *p)
{
    for (Hold **hp = &a->held, *h; (h = *hp); hp = &h->next)
        if (h->p == p) {
            *hp = h->next;
            h->release(p);
            ir_free(h);
            return;
        }
    KILN_BUG("arena_release: %p is not held", p);
}

/* ---- memory streams ------------------------------------------------ */

typedef struct {
    FILE *f;                      /* NULL once closed */
    char *buf;                    /* open_memstream's, from libc's malloc */
    size_t len;
} Stream;

static void stream_release(void *p)
{
    Stream *s = p;
    if (s->f)
        fclose(s->f);
    free(s->buf);
    ir_free(s);
}

FILE *arena_stream(Arena *a)
{
    Stream *s = ir_malloc(sizeof *s);
    if (!s)
        arena_oom(a);
    *s = (Stream){0};
    arena_hold(a, s, stream_release);
    s->f = open_memstream(&s->buf, &s->len);
    if (!s->f)
        arena_oom(a);
    return s->f;
}

char *arena_stream_text(Arena *a, FILE *f)
{
    Hold *h = a->held;
    while (h && !(h->release == stream_release && ((Stream *)h->p)->f == f))
        h = h->next;
    if (!h)
        KILN_BUG("arena_stream_text: not a stream of this arena");
    Stream *s = h->p;
    int bad = ferror(f);
    s->f = NULL;
    if (fclose(f) != 0 || bad)   /* a write or the final flush failed */
        arena_oom(a);
    char *text = arena_dup(a, s->buf, s->len + 1);
    arena_release(a, s);
    return text;
}

/* ---- allocation ------------------------------------------------------ */

#define ARENA_MAX ((size_t)1 << 40)    /* no single compilation needs more */

void *arena_alloc(Arena *a, size_t size)
{
    if (size > ARENA_MAX)                 /* before rounding: no wrap-around */
        arena_oom(a);
    size = (size + 15) & ~(size_t)15;
    Chunk *c = a->head;
    if (!c || c->size - c->used < size) {
        size_t want = c ? c->size * 2 : 64 * 1024;
        while (want < size)
            want *= 2;                    /* size <= 2^40: cannot wrap */
        if (want > ARENA_MAX)
            arena_oom(a);
        Chunk *nc = ir_malloc(sizeof *nc + want);
        if (!nc)
            arena_oom(a);
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
