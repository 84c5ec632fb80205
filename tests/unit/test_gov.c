/* tests/unit/test_gov.c: rt_gov, the team size of generate's decode steps
 * (runtime/gen/rt_gov.c), on synthetic step times: a machine whose steps take
 * a given time at each team size, phase by phase. With the size fixed it
 * never changes; alone, no trial runs; when another process takes a core
 * (steps on 2 threads turn slow) it moves to 1 thread and probes 2 again
 * after 8, 16, .. 256 steps; when 2 threads are faster again it goes back
 * to 2; a trial that does not pay is given up and tried again later. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/rt_gen.h"

#include <string.h>

enum { MAXSTEPS = 4000 };

/* A phase: steps of `steps` calls where a step on 1 thread takes t1 ms and
 * on 2 threads t2 ms (a small wobble added, never reordering the two). */
typedef struct {
    int steps;
    double t1, t2;
} Phase;

/* Runs the phases through gv; size[i] gets step i's team size. Returns the
 * number of steps. */
static int run(rt_gov *gv, const Phase *ph, int nph, int *size)
{
    int n = 0;
    for (int p = 0; p < nph; p++)
        for (int i = 0; i < ph[p].steps; i++, n++) {
            assert_true(n < MAXSTEPS);
            size[n] = rt_gov_next(gv);
            assert_true(size[n] >= 1 && size[n] <= gv->most);
            double wobble = 0.01 * (double)(n % 3);
            rt_gov_took(gv, (size[n] == 1 ? ph[p].t1 : ph[p].t2) + wobble);
        }
    return n;
}

/* Runs of one size in size[from, to): their lengths in len[] and sizes in
 * of[]; returns how many. */
static int runs(const int *size, int from, int to, int *len, int *of)
{
    int n = 0;
    for (int i = from; i < to; i++)
        if (i == from || size[i] != size[i - 1]) {
            of[n] = size[i];
            len[n++] = 1;
        } else {
            len[n - 1]++;
        }
    return n;
}

/* --threads: whatever the times, every step runs on the size given. */
static void fixed_never_changes(void **state)
{
    (void)state;
    rt_gov gv;
    rt_gov_init(&gv, 2, 1);
    static int size[MAXSTEPS];
    Phase ph[] = {{50, 1.0, 1.0}, {300, 1.0, 5.0}, {300, 5.0, 1.0}};
    int n = run(&gv, ph, 3, size);
    for (int i = 0; i < n; i++)
        assert_int_equal(size[i], 2);
    assert_int_equal(gv.fewer, 0);
    rt_gov_init(&gv, 1, 0);                   /* one thread: nothing to decide */
    n = run(&gv, ph, 3, size);
    for (int i = 0; i < n; i++)
        assert_int_equal(size[i], 1);
    assert_false(gv.on);
}

/* Alone: steps stay near the fastest, and no trial ever runs. */
static void alone_no_trial(void **state)
{
    (void)state;
    rt_gov gv;
    rt_gov_init(&gv, 2, 0);
    static int size[MAXSTEPS];
    Phase ph[] = {{1000, 1.8, 1.0}};
    int n = run(&gv, ph, 1, size);
    for (int i = 0; i < n; i++)
        assert_int_equal(size[i], 2);
    assert_int_equal(gv.fewer, 0);
    assert_int_equal(gv.cur, 2);
}

/* The next wait after a trial that lost. */
static int64_t doubled(int64_t wait)
{
    return wait * 2 < RT_GOV_WAIT_MAX ? wait * 2 : RT_GOV_WAIT_MAX;
}

/* A busy process takes a core 20 steps in: 2-thread steps take 3 ms,
 * 1-thread steps 1.6. Two slow steps put the median of the last four over
 * 1.5 x the fastest, so step 22 starts a trial of 1 thread, which wins
 * (1.6 < 0.9 x 2.0) and is kept. Then 2 threads are probed, RT_GOV_TRIAL
 * steps at a time, after 8 steps on 1, then after 16, 32, .. 256, 256:
 * each probe loses and doubles the wait. Every other step runs on 1. */
static void slower_on_two_settles_on_one(void **state)
{
    (void)state;
    rt_gov gv;
    rt_gov_init(&gv, 2, 0);
    static int size[MAXSTEPS];
    Phase ph[] = {{20, 1.8, 1.0}, {1200, 1.6, 3.0}};
    int n = run(&gv, ph, 2, size), first = 22;
    for (int i = 0; i < first; i++)
        assert_int_equal(size[i], 2);
    int len[64], of[64];
    int k = runs(size, first, n, len, of);
    assert_int_equal(of[0], 1);
    assert_int_equal(len[0], RT_GOV_TRIAL + RT_GOV_WAIT);    /* the trial kept, then 8 on 1 */
    int64_t wait = RT_GOV_WAIT;
    for (int r = 1; r + 1 < k; r += 2) {
        assert_int_equal(of[r], 2);                    /* a probe of 2, lost ... */
        assert_int_equal(len[r], RT_GOV_TRIAL);
        assert_int_equal(of[r + 1], 1);
        wait = doubled(wait);
        if (r + 2 < k)                                 /* ... then twice the wait on 1 */
            assert_int_equal(len[r + 1], wait);
    }
    assert_int_equal(k, 17);                           /* 8 probes in 1198 steps */
    assert_int_equal(wait, RT_GOV_WAIT_MAX);
    assert_int_equal(gv.cur, 1);
    int on2 = 0;
    for (int i = first; i < n; i++)
        on2 += size[i] == 2;
    assert_int_equal(on2, (k - 1) / 2 * RT_GOV_TRIAL);
    assert_int_equal(gv.fewer, n - first - on2);
}

/* The busy process leaves: at the next probe, 2 threads are faster again
 * (1 ms against 1.6) and the governor goes back to 2 for good. */
static void faster_on_two_back_to_two(void **state)
{
    (void)state;
    rt_gov gv;
    rt_gov_init(&gv, 2, 0);
    static int size[MAXSTEPS];
    Phase ph[] = {{20, 1.8, 1.0}, {100, 1.6, 3.0}, {600, 1.6, 1.0}};
    int n = run(&gv, ph, 3, size);
    int last1 = -1;
    for (int i = 0; i < n; i++)
        if (size[i] == 1)
            last1 = i;
    assert_true(last1 > 120);                        /* on 1 until the next probe after 120 */
    assert_true(last1 < 120 + 2 * RT_GOV_WAIT_MAX);
    for (int i = last1 + 1; i < n; i++)              /* then 2, with no trial at all */
        assert_int_equal(size[i], 2);
    assert_int_equal(gv.cur, 2);
    assert_int_equal(gv.wait, RT_GOV_WAIT);          /* a won trial resets the wait */
}

/* Slow steps that one thread fewer does not cure (both 3 ms: the machine
 * is slow, not the team): each trial of 1 loses and the next comes after
 * twice the wait, so the steps stay on 2. */
static void losing_trials_back_off(void **state)
{
    (void)state;
    rt_gov gv;
    rt_gov_init(&gv, 2, 0);
    static int size[MAXSTEPS];
    Phase ph[] = {{20, 1.8, 1.0}, {1400, 3.0, 3.0}};
    int n = run(&gv, ph, 2, size);
    int len[64], of[64];
    int k = runs(size, 0, n, len, of);
    assert_int_equal(len[0], 22);                      /* the first trial as above */
    int64_t wait = RT_GOV_WAIT;
    for (int r = 1; r < k; r += 2) {
        assert_int_equal(of[r], 1);                    /* a trial of 1, lost ... */
        assert_int_equal(len[r], RT_GOV_TRIAL);
        wait = doubled(wait);
        if (r + 2 < k) {                               /* ... then twice the wait on 2 */
            assert_int_equal(of[r + 1], 2);
            assert_int_equal(len[r + 1], wait);
        }
    }
    assert_int_equal(k, 19);                           /* 9 trials in 1420 steps */
    assert_int_equal(gv.cur, 2);
    assert_int_equal(gv.fewer, (k / 2) * RT_GOV_TRIAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fixed_never_changes),
        cmocka_unit_test(alone_no_trial),
        cmocka_unit_test(slower_on_two_settles_on_one),
        cmocka_unit_test(faster_on_two_back_to_two),
        cmocka_unit_test(losing_trials_back_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
