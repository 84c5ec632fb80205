/* tests/unit/test_pool.c: the pool of runtime/core/rt_parallel.c from inside,
 * one interleaving at a time, on one thread.
 *
 * The file is included here, its four external functions renamed, so the
 * pool's statics are this test's own and its steps can be called in the
 * order a race would run them. test_runtime.c drives the pool from
 * outside with real threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#define rt_parallel_for pool_parallel_for
#define rt_set_threads pool_set_threads
#define rt_get_threads pool_get_threads
#define rt_now pool_now
#include "runtime/core/rt_parallel.c"

enum { N = 16 };
static int hits[N], calls;
static uint32_t next_gen;

/* The loop's body. Its first call stores share 1 and the generation, as
 * a caller that was descheduled while publishing would, late. */
static void body(void *ctx, int64_t lo, int64_t hi)
{
    (void)ctx;
    if (calls++ == 0) {
        atomic_store(&pl_shares[1].r, pl_pack(next_gen & 0xffff, N / 2, N));
        atomic_store(&pl.gen, next_gen);
    }
    for (int64_t i = lo; i < hi; i++)
        hits[i]++;
}

/* Worker 1 runs while the caller has stored share 0 of a new loop but not
 * yet its own share: worker 1 finds its share empty (the last loop's),
 * steals half of share 0, and must not make it its share, which the
 * caller is about to overwrite. Then the caller works too; every
 * iteration runs once. */
static void test_steal_before_publish(void **state)
{
    (void)state;
    next_gen = atomic_load(&pl.gen) + 1;
    pl.fn = body;
    pl.ctx = NULL;
    atomic_store(&pl.nt, 2);
    atomic_store(&pl.workers, 1);
    atomic_store(&pl.left, N);
    atomic_store(&pl_shares[1].r, pl_pack((next_gen - 1) & 0xffff, N, N));
    atomic_store(&pl_shares[0].r, pl_pack(next_gen & 0xffff, 0, N / 2));
    pl_work(1);
    pl_work(0);
    for (int i = 0; i < N; i++)
        assert_int_equal(hits[i], 1);
    assert_int_equal(atomic_load(&pl.left), 0);
}

/* Claims take a quarter of the rest (rounded up) from the front; steals
 * the upper half (rounded up) from the back; both keep the tag. */
static void test_claim_and_steal(void **state)
{
    (void)state;
    pl_share s;
    uint64_t w;
    int64_t lo, hi;
    atomic_init(&s.r, pl_pack(7, 10, 20));
    assert_true(pl_claim(&s, &w, &lo, &hi));
    assert_true(lo == 10 && hi == 13);
    assert_true(atomic_load(&s.r) == pl_pack(7, 13, 20));
    atomic_store(&pl_shares[1].r, pl_pack(7, 13, 20));
    atomic_store(&pl.workers, 1);
    uint64_t tag;
    assert_true(pl_steal(0, &tag, &lo, &hi));
    assert_true(tag == 7 && lo == 16 && hi == 20);
    assert_true(atomic_load(&pl_shares[1].r) == pl_pack(7, 13, 16));
    atomic_store(&pl_shares[1].r, pl_pack(7, 5, 5));
    assert_false(pl_steal(0, &tag, &lo, &hi));
    assert_false(pl_claim(&pl_shares[1], &w, &lo, &hi));
    assert_true(w == pl_pack(7, 5, 5));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steal_before_publish),
        cmocka_unit_test(test_claim_and_steal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
