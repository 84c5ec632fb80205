/* runtime/core/rt_parallel.c: parallel-for, thread count, clock.
 *
 * rt_parallel_for runs every parallel loop of generated code, the cc
 * build's and the JIT's, on a pool of threads that outlive the call. The
 * caller publishes the loop and takes part. Each thread of the team gets
 * the contiguous share a static split would give it (thread t of nt:
 * [n*t/nt, n*(t+1)/nt)) and claims it a quarter of what is left at a
 * time; a thread with nothing left steals the upper half of what another
 * has not claimed, and makes it its own. So a thread the system has
 * descheduled holds the call up by the chunk it holds at most, not by
 * its whole share, and a worker that comes late finds its share taken
 * and waits for the next loop. Claims and steals compare-and-swap a
 * share's [lo, hi) as one word; each share sits on its own cache line,
 * so claims cost no more than an uncontended atomic. The call returns
 * once every iteration is done. passes/parallelize.c never marks a loop
 * that carries a reduction, so which thread runs an iteration changes no
 * number.
 *
 * Between loops the workers spin for PL_SPIN_S (a decode step runs
 * dozens of loops back to back), then sleep on a condition variable. One
 * loop at a time: a call made while another runs (a second model of the
 * same process, a call from inside a loop) runs on the calling thread, as
 * does one inside an OpenMP parallel region. The team is OpenMP's thread
 * count (OMP_NUM_THREADS, else every core; rt_set_threads sets it), never
 * more threads than iterations. Without OpenMP, rt_parallel_for is one
 * call fn(ctx, 0, n). */
#include "runtime/core/rt_core.h"

#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>

#define PL_SPIN_S 2e-4                  /* a worker's spin before it sleeps */
enum { PL_MAX = 255 };                  /* workers at most */

/* A thread's share of the loop, alone on its cache line: the loop's
 * generation (16 bits, wrapping) above hi and lo (PL_BITS each). Every
 * write but the publishing one is a compare-and-swap of the whole word,
 * so it acts on the share as it is now: a thread that read the word in an
 * earlier loop fails instead of writing into this one. (Where 65536 loops
 * later the word is the same again, so is the share's state: the swap is
 * right for the loop of now.) */
typedef struct {
    _Alignas(64) _Atomic uint64_t r;
} pl_share;

#define PL_BITS 24
#define PL_N ((int64_t)1 << PL_BITS)    /* iterations a loop at most: more are grouped */
#define PL_LO(w) ((int64_t)((w) & (PL_N - 1)))
#define PL_HI(w) ((int64_t)((w) >> PL_BITS & (PL_N - 1)))
#define PL_TAG(w) ((w) >> (2 * PL_BITS))

typedef struct {
    pthread_mutex_t run;                /* held by the thread running a loop */
    pthread_mutex_t lock;               /* for sleeping workers */
    pthread_cond_t wake;
    _Atomic uint32_t gen;               /* loops published (wrapping) */
    _Atomic int64_t left;               /* iterations not yet done */
    _Atomic int sleepers;
    _Atomic int nt;                     /* the loop's team, caller included */
    _Atomic int workers;                /* started (under run): shares 0 .. workers */
    /* the loop: written under run before the shares are (release), read
     * after a successful claim (the loop cannot end before that chunk) */
    void (*fn)(void *, int64_t, int64_t);
    void *ctx;
} pl_pool;

static pl_pool pl = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                     PTHREAD_COND_INITIALIZER, 0, 0, 0, 1, 0, NULL, NULL};
static pl_share pl_shares[PL_MAX + 1];  /* 0: the caller's */

static inline void pl_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static uint64_t pl_pack(uint64_t tag, int64_t lo, int64_t hi)
{
    return tag << (2 * PL_BITS) | (uint64_t)hi << PL_BITS | (uint64_t)lo;
}

static int pl_cas(pl_share *s, uint64_t *w, uint64_t v)
{
    return atomic_compare_exchange_weak_explicit(&s->r, w, v, memory_order_acquire,
                                                 memory_order_acquire);
}

/* Takes the first quarter (rounded up) of what is left of share s; *w:
 * the word it left, or the empty one it found. */
static int pl_claim(pl_share *s, uint64_t *w, int64_t *lo, int64_t *hi)
{
    *w = atomic_load_explicit(&s->r, memory_order_acquire);
    for (;;) {
        int64_t a = PL_LO(*w), b = PL_HI(*w);
        if (a >= b)
            return 0;
        int64_t c = a + (b - a + 3) / 4;
        if (pl_cas(s, w, pl_pack(PL_TAG(*w), c, b))) {
            *lo = a, *hi = c;
            return 1;
        }
    }
}

/* Takes the upper half (rounded up) of what another share has left;
 * *tag: that share's. */
static int pl_steal(int self, uint64_t *tag, int64_t *lo, int64_t *hi)
{
    int ns = atomic_load_explicit(&pl.workers, memory_order_acquire) + 1;
    for (int k = 1; k < ns; k++) {
        pl_share *s = &pl_shares[(self + k) % ns];
        uint64_t w = atomic_load_explicit(&s->r, memory_order_acquire);
        for (;;) {
            int64_t a = PL_LO(w), b = PL_HI(w);
            if (a >= b)
                break;
            int64_t m = a + (b - a) / 2;
            if (pl_cas(s, &w, pl_pack(PL_TAG(w), a, m))) {
                *tag = PL_TAG(w), *lo = m, *hi = b;
                return 1;
            }
        }
    }
    return 0;
}

static void pl_do(int64_t lo, int64_t hi)
{
    pl.fn(pl.ctx, lo, hi);
    atomic_fetch_sub_explicit(&pl.left, hi - lo, memory_order_release);
}

/* Runs chunks of the loop until none is left unclaimed: its own share,
 * then what it steals, which becomes its share where that is still the
 * empty word it found, else runs there and then. Not before the loop's
 * generation is out, though: the caller stores the shares one by one,
 * then the generation, and a share not yet stored would be overwritten.
 * (The loop of the stolen chunk is live until that chunk is done, so the
 * generation is it or the one before, whose tag differs.) */
static void pl_work(int self)
{
    if (self >= atomic_load_explicit(&pl.nt, memory_order_relaxed))
        return;
    pl_share *mine = &pl_shares[self];
    for (;;) {
        uint64_t w, tag;
        int64_t lo, hi;
        if (pl_claim(mine, &w, &lo, &hi))
            pl_do(lo, hi);
        else if (!pl_steal(self, &tag, &lo, &hi))
            return;
        else if ((atomic_load_explicit(&pl.gen, memory_order_acquire) & 0xffff) != tag ||
                 !atomic_compare_exchange_strong_explicit(&mine->r, &w, pl_pack(tag, lo, hi),
                                                          memory_order_release,
                                                          memory_order_relaxed))
            pl_do(lo, hi);
    }
}

/* Waits for a loop after generation `seen`: spins, then sleeps. The
 * caller's store of gen and its load of sleepers, like the sleeper's
 * increment and its load of gen, are sequentially consistent: one of the
 * two sees the other. */
static void pl_next(uint32_t seen)
{
    double t0 = 0;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(&pl.gen, memory_order_acquire) != seen)
            return;
        pl_pause();
        if (i % 256 == 0) {
            double t = rt_now();
            if (t0 == 0)
                t0 = t;
            else if (t - t0 > PL_SPIN_S)
                break;
        }
    }
    atomic_fetch_add(&pl.sleepers, 1);
    pthread_mutex_lock(&pl.lock);
    while (atomic_load(&pl.gen) == seen)
        pthread_cond_wait(&pl.wake, &pl.lock);
    pthread_mutex_unlock(&pl.lock);
    atomic_fetch_sub(&pl.sleepers, 1);
}

static void *pl_worker(void *arg)
{
    int self = (int)(intptr_t)arg;      /* 1, 2, ..: the caller is 0 */
    uint32_t seen = atomic_load(&pl.gen);
    for (;;) {
        pl_next(seen);
        seen = atomic_load_explicit(&pl.gen, memory_order_acquire);
        pl_work(self);
    }
    return NULL;
}

/* Starts workers up to nt-1 (PL_MAX at most), as many as it can. They
 * block the signals a user or a supervisor sends (Ctrl-C, SIGTERM,
 * SIGHUP, SIGQUIT; a thread inherits the mask it is created with), so
 * that these reach the thread that waits for them: taken by a worker, a
 * handler would run there while chat's pselect, on the main thread,
 * slept on (a Ctrl-C at chat's prompt was lost so, now and then). */
static void pl_spawn(int nt)
{
    sigset_t quiet, old;
    sigemptyset(&quiet);
    sigaddset(&quiet, SIGINT);
    sigaddset(&quiet, SIGTERM);
    sigaddset(&quiet, SIGHUP);
    sigaddset(&quiet, SIGQUIT);
    pthread_sigmask(SIG_BLOCK, &quiet, &old);
    while (pl.workers < nt - 1 && pl.workers < PL_MAX) {
        pthread_t t;
        pthread_attr_t at;
        if (pthread_attr_init(&at))
            break;
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &at, pl_worker, (void *)(intptr_t)(pl.workers + 1));
        pthread_attr_destroy(&at);
        if (rc)
            break;
        atomic_fetch_add_explicit(&pl.workers, 1, memory_order_release);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Workers 1 .. nt-1, those not yet started (pl_spawn: every loop asks,
 * so the common case, all started, makes no system call); the team the
 * pool can give. A worker's share is scanned by thieves once it is
 * counted. */
static int pl_start(int nt)
{
    if (pl.workers < nt - 1 && pl.workers < PL_MAX)
        pl_spawn(nt);
    return nt < pl.workers + 1 ? nt : pl.workers + 1;
}

/* Under pl.run: publishes the loop, works on it, waits for its end. */
static void pl_loop(void (*fn)(void *, int64_t, int64_t), void *ctx, int64_t n, int nt)
{
    pl.fn = fn;
    pl.ctx = ctx;
    atomic_store_explicit(&pl.nt, nt, memory_order_relaxed);
    atomic_store_explicit(&pl.left, n, memory_order_relaxed);
    uint32_t gen = atomic_load_explicit(&pl.gen, memory_order_relaxed) + 1;
    for (int t = 0; t < nt; t++)          /* every share, then the generation */
        atomic_store_explicit(&pl_shares[t].r,
                              pl_pack(gen & 0xffff, n * t / nt, n * (t + 1) / nt),
                              memory_order_release);
    atomic_store(&pl.gen, gen);
    if (atomic_load(&pl.sleepers)) {
        pthread_mutex_lock(&pl.lock);
        pthread_cond_broadcast(&pl.wake);
        pthread_mutex_unlock(&pl.lock);
    }
    pl_work(0);
    /* Nothing is unclaimed; a worker may still run a chunk. */
    for (unsigned i = 1; atomic_load_explicit(&pl.left, memory_order_acquire); i++) {
        pl_pause();
        if (i % 1024 == 0)
            sched_yield();              /* the worker may be waiting for a core */
    }
}

/* A loop of more than PL_N - 1 iterations runs as one of groups of g. */
typedef struct {
    void (*fn)(void *, int64_t, int64_t);
    void *ctx;
    int64_t g, n;
} pl_group;

static void pl_grouped(void *ctx, int64_t lo, int64_t hi)
{
    const pl_group *p = ctx;
    p->fn(p->ctx, lo * p->g, hi <= p->n / p->g ? hi * p->g : p->n);
}
#endif

void rt_parallel_for(void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx, int64_t n)
{
    if (n <= 0)
        return;
#ifdef _OPENMP
    if (n >= PL_N) {
        pl_group p = {fn, ctx, n / (PL_N - 1) + 1, n};
        rt_parallel_for(pl_grouped, &p, (n + p.g - 1) / p.g);
        return;
    }
    int nt = omp_get_max_threads();
    if (nt > n)
        nt = (int)n;
    if (nt > 1 && !omp_in_parallel() && pthread_mutex_trylock(&pl.run) == 0) {
        nt = pl_start(nt);
        if (nt > 1)
            pl_loop(fn, ctx, n, nt);
        else
            fn(ctx, 0, n);
        pthread_mutex_unlock(&pl.run);
        return;
    }
#endif
    fn(ctx, 0, n);
}

void rt_set_threads(int n)
{
#ifdef _OPENMP
    if (n >= 1)
        omp_set_num_threads(n);
#else
    (void)n;
#endif
}

int rt_get_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

double rt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
