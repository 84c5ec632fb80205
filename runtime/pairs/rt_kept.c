/* runtime/pairs/rt_kept.c: a thread's operands kept for a scope
 * (rt_pairs.h: rt_kept), for the gemms that round or quantize their A:
 * the pairs part's (rt_amx.c: rp_rows) and the quantized part's
 * (rt_gemm_q.c), which every program carrying the quantized part carries
 * with it.
 *
 * Contract: rt_kept gives the calling thread's bytes for a key (scope, A's
 * pointer, lda, m, k, form), filled by an earlier call of the same thread
 * with the same key or to be filled now; the scope is the caller's promise
 * that A keeps its values (kiln_rt.h: rt_keep_scope). A thread holds
 * RT_KEPT of them, the oldest replaced, hanging from a pthread key whose
 * destructor frees them when the thread ends; none of more than
 * PK_MAX bytes. The same thread memory holds its scratch (rt_scratch). */
#include "runtime/core/rt_core.h"
#include "runtime/rt_pairs.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define PK_MAX ((size_t)64 << 20)

typedef struct {
    rt_kept_key key;
    void *bytes;
    size_t cap;
} pk_kept;

typedef struct {
    pk_kept slot[RT_KEPT];
    int next;                         /* the slot to replace next */
    pk_kept scratch;                  /* rt_scratch's (its key unused) */
} pk_thread;

static pthread_key_t pk_key;
static pthread_once_t pk_once = PTHREAD_ONCE_INIT;

static void pk_thread_free(void *p)
{
    pk_thread *t = p;
    for (int i = 0; i < RT_KEPT; i++)
        free(t->slot[i].bytes);
    free(t->scratch.bytes);
    free(t);
}

static void pk_key_make(void) { pthread_key_create(&pk_key, pk_thread_free); }

static pk_thread *pk_mine(void)
{
    pthread_once(&pk_once, pk_key_make);
    pk_thread *t = pthread_getspecific(pk_key);
    if (!t && (t = calloc(1, sizeof *t)) != NULL && pthread_setspecific(pk_key, t) != 0) {
        free(t);
        t = NULL;
    }
    return t;
}

static int pk_same(const rt_kept_key *x, const rt_kept_key *y)
{
    return x->scope == y->scope && x->a == y->a && x->lda == y->lda && x->m == y->m &&
           x->k == y->k && x->form == y->form;
}

/* s's bytes, grown to at least bytes (64-byte aligned); 0 when the memory
 * cannot be had (s then holds none). */
static int pk_grow(pk_kept *s, size_t bytes)
{
    if (s->cap >= bytes)
        return 1;
    free(s->bytes);
    s->cap = 0;
    if (bytes > SIZE_MAX - 63 || !(s->bytes = aligned_alloc(64, (bytes + 63) & ~(size_t)63)))
        return 0;
    s->cap = bytes;
    return 1;
}

void *rt_kept(const rt_kept_key *key, size_t bytes, int *fill)
{
    pk_thread *t = key->scope && bytes <= PK_MAX ? pk_mine() : NULL;
    if (!t)
        return NULL;
    for (int i = 0; i < RT_KEPT; i++)
        if (t->slot[i].key.scope && pk_same(&t->slot[i].key, key)) {
            *fill = 0;
            return t->slot[i].bytes;
        }
    pk_kept *s = &t->slot[t->next];
    t->next = (t->next + 1) % RT_KEPT;
    s->key.scope = 0;
    if (!pk_grow(s, bytes))
        return NULL;
    s->key = *key;
    *fill = 1;
    return s->bytes;
}

void *rt_scratch(size_t bytes)
{
    pk_thread *t = pk_mine();
    return t && pk_grow(&t->scratch, bytes) ? t->scratch.bytes : NULL;
}
