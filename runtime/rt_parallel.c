/* runtime/rt_parallel.c: parallel-for, thread count, clock.
 *
 * rt_parallel_for is what JIT-compiled code (tcc ignores OpenMP pragmas)
 * calls for its parallel loops: thread t of nt gets the contiguous range
 * [n*t/nt, n*(t+1)/nt), so the split is deterministic and each thread
 * streams one block of memory. Never more threads than iterations, and
 * no nested teams: inside a parallel region the loop runs on the calling
 * thread. Without OpenMP it is one call fn(ctx, 0, n). */
#include "kiln_rt.h"

#include <time.h>

#ifdef _OPENMP
#include <omp.h>

/* n*t/nt without overflowing n*t: n = q*nt + r, so n*t/nt = q*t + r*t/nt. */
static int64_t par_split(int64_t n, int64_t t, int64_t nt)
{
    return (n / nt) * t + (n % nt) * t / nt;
}

static void par_team(void (*fn)(void *, int64_t, int64_t), void *ctx, int64_t n)
{
    int want = omp_get_max_threads();
    if (want > n)
        want = (int)n;
#pragma omp parallel num_threads(want)
    {
        int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        int64_t lo = par_split(n, t, nt), hi = par_split(n, t + 1, nt);
        if (lo < hi)
            fn(ctx, lo, hi);
    }
}
#endif

void rt_parallel_for(void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx, int64_t n)
{
    if (n <= 0)
        return;
#ifdef _OPENMP
    if (n >= 2 && !omp_in_parallel() && omp_get_max_threads() > 1) {
        par_team(fn, ctx, n);
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
