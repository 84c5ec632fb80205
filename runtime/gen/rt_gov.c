/* runtime/gen/rt_gov.c: rt_gov, the team size of `generate`'s decode steps,
 * by measurement (kiln_rt.h; rt_generate.c runs the steps).
 *
 * On a machine shared with other work, a team as large as the cores waits
 * at each of a step's joins for whichever of its threads the scheduler has
 * paused: stories110M on 2 cores with one busy process beside it decodes
 * 34 tokens/s on 2 threads and 60 on 1 (115 on 2 when alone). Rules, per
 * decode step:
 * 1. Steps are timed. `best` is the fastest step at the current size.
 * 2. A trial runs RT_GOV_TRIAL steps at one thread fewer, when the median
 *    of the last RT_GOV_TRIAL steps passes RT_GOV_SLOW x best (something
 *    took a core), or at one thread more (up to the most), when fewer run;
 *    either only `wait` steps after the last trial.
 * 3. A trial wins when its median is under RT_GOV_GAIN x the median of the
 *    RT_GOV_TRIAL steps before it: its size becomes the current one,
 *    `best` its fastest step, `wait` RT_GOV_WAIT. A trial that loses
 *    doubles `wait` (up to RT_GOV_WAIT_MAX), so a quiet machine pays for
 *    few of them.
 * Alone on the machine, steps stay near `best` and no trial runs, so the
 * team keeps every core. parallelize's contract (no sum depends on the
 * thread count) makes the tokens the same whatever the sizes were. The
 * governor only decides: its caller sets the team (rt_set_threads). */
#include "runtime/gen/rt_tok.h"

#include <string.h>

static double gov_median(const double *v, int n)
{
    double x[RT_GOV_TRIAL];
    memcpy(x, v, sizeof *v * (size_t)n);
    for (int i = 1; i < n; i++)          /* insertion sort: n is RT_GOV_TRIAL */
        for (int j = i; j > 0 && x[j] < x[j - 1]; j--) {
            double t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

void rt_gov_init(rt_gov *gv, int most, int fixed)
{
    memset(gv, 0, sizeof *gv);
    gv->most = gv->cur = most;
    gv->on = !fixed && gv->most > 1;
    gv->best = 1e30;
    gv->wait = RT_GOV_WAIT;
}

int rt_gov_next(rt_gov *gv)
{
    if (!gv->on || gv->trial || gv->since < gv->wait || gv->nlast < RT_GOV_TRIAL)
        return gv->trial ? gv->trial : gv->cur;
    if (gv->cur > 1 && gov_median(gv->last, RT_GOV_TRIAL) > RT_GOV_SLOW * gv->best)
        gv->trial = gv->cur - 1;
    else if (gv->cur < gv->most)
        gv->trial = gv->cur + 1;
    if (gv->trial)
        gv->ntried = 0;
    return gv->trial ? gv->trial : gv->cur;
}

void rt_gov_took(rt_gov *gv, double t)
{
    if (!gv->on)
        return;
    if ((gv->trial ? gv->trial : gv->cur) < gv->most)
        gv->fewer++;
    if (!gv->trial) {
        gv->best = t < gv->best ? t : gv->best;
        memmove(gv->last, gv->last + 1, sizeof *gv->last * (RT_GOV_TRIAL - 1));
        gv->last[RT_GOV_TRIAL - 1] = t;
        gv->nlast += gv->nlast < RT_GOV_TRIAL;
        gv->since++;
        return;
    }
    gv->tried[gv->ntried++] = t;
    if (gv->ntried < RT_GOV_TRIAL)
        return;
    double m = gov_median(gv->tried, RT_GOV_TRIAL);
    if (m < RT_GOV_GAIN * gov_median(gv->last, RT_GOV_TRIAL)) {
        gv->cur = gv->trial;
        gv->best = gv->tried[0];
        for (int i = 0; i < RT_GOV_TRIAL; i++)
            gv->best = gv->tried[i] < gv->best ? gv->tried[i] : gv->best;
        memcpy(gv->last, gv->tried, sizeof gv->tried);
        gv->wait = RT_GOV_WAIT;
    } else {
        gv->wait = gv->wait * 2 < RT_GOV_WAIT_MAX ? gv->wait * 2 : RT_GOV_WAIT_MAX;
    }
    gv->trial = 0;
    gv->since = 0;
}
