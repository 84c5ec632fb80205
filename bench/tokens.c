/* bench/tokens.c: a decoder's prompt processing and generation speed,
 * as llama-bench measures them (`kiln bench MODEL -p P -n N`), from the
 * model's built program.
 *
 * The program runs `generate` as a child, its stderr read back (the
 * documented line "prefill: P tokens in X ms, R tokens/s ...; decode: D
 * tokens in Y ms, R tokens/s", docs/generating.md):
 * - once to warm up (the weights' image prepared or paged in), unmeasured;
 * - then per repetition, the tests in turn (so that a burst of other
 *   work on the machine spreads over both), each a child that generates
 *   twice (generate --repeat 2) and measured by its second generation, as
 *   llama-bench measures a process whose buffers, KV cache and threads
 *   are ready; the first generation's prefill is ppP-cold, what a fresh
 *   process's first prompt costs:
 *   ppP: a prompt of P ids (1 + i % (V - 1), as `kiln profile` uses)
 *        and one token drawn, every prompt token through the prefill
 *        chunks (--prefill-min 2): prefill's tokens/s;
 *   tgN: a prompt of one id and N + 1 tokens drawn, so N decode steps
 *        from an empty cache: decode's tokens/s.
 * Greedy (--temperature 0) on a fixed team (--threads). Each test's mean
 * and sample standard deviation over its runs. */
#include "bench/bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The tokens/s after the first `what` ("prefill: " or "decode: ") in
 * text: 0, or -1 when the line is not there; *next past it. */
static int rate_after(const char *text, const char *what, double *rate, const char **next)
{
    const char *at = strstr(text, what);
    const char *comma = at ? strchr(at, ',') : NULL;
    *next = comma;
    return comma && sscanf(comma, ", %lf tokens/s", rate) == 1 ? 0 : -1;
}

/* One run of the program's generate, generating twice (--repeat 2): the
 * rates after `what` of the first and the second (cold may be NULL). */
static int run_once(Arena *a, const BenchTokensOpts *o, const char *ids, int64_t n,
                    const char *what, double *cold, double *rate, rt_err *err)
{
    const char *log = arena_printf(a, "%s.log", o->exe);
    char *argv[18] = {(char *)o->exe, "generate", "--tokens", (char *)ids, "-n",
                      arena_printf(a, "%lld", (long long)n), "--temperature", "0", "--threads",
                      arena_printf(a, "%d", o->threads), "--prefill-min", "2", "--repeat", "2"};
    int k = 14;
    if (o->weights) {
        argv[k++] = "--weights";
        argv[k++] = (char *)o->weights;
    }
    int st = bench_spawn(argv, NULL, "/dev/null", log);
    char *text = cg_read_file(log, NULL);
    const char *next = NULL;
    double first = 0;
    int rc = 0;
    if (st != 0)
        rc = rt_errf(err, st == 1 || st == 2 || st == 3 ? st : RT_EINTERNAL,
                     "the model's program failed: %.*s",
                     text ? (int)strcspn(text, "\n") : 0, text ? text : "");
    else if (!text || rate_after(text, what, &first, &next) || rate_after(next, what, rate, &next))
        rc = rt_errf(err, RT_EINTERNAL, "the model's program printed no second %.7s line", what);
    else if (cold)
        *cold = first;
    free(text);
    return rc;
}

static void stats(BenchTokensTest *t)
{
    double sum = 0, sq = 0;
    for (int i = 0; i < t->runs; i++)
        sum += t->rate[i];
    t->mean = sum / t->runs;
    for (int i = 0; i < t->runs; i++)
        sq += (t->rate[i] - t->mean) * (t->rate[i] - t->mean);
    t->stddev = t->runs > 1 ? sqrt(sq / (t->runs - 1)) : 0;
}

int bench_tokens(const BenchTokensOpts *o, BenchTokens *r, rt_err *err)
{
    Arena *a = arena_new();
    if (!a)
        return rt_errf(err, RT_EINTERNAL, "out of memory");
    memset(r, 0, sizeof *r);
    int64_t p = o->prompt;
    char *ids = arena_alloc(a, (size_t)(p > 0 ? p : 1) * 12 + 1), *at = ids;
    for (int64_t i = 0; i < p; i++)
        at += sprintf(at, "%s%lld", i ? "," : "", (long long)(1 + i % (o->vocab - 1)));
    BenchTokensTest *pp = &r->test[0], *tg = &r->test[1], *cold = &r->test[2];
    snprintf(pp->name, sizeof pp->name, "pp%lld", (long long)o->prompt);
    snprintf(tg->name, sizeof tg->name, "tg%lld", (long long)o->gen);
    snprintf(cold->name, sizeof cold->name, "pp%lld-cold", (long long)o->prompt);
    pp->tokens = cold->tokens = o->prompt;
    tg->tokens = o->gen;
    r->ntests = 3;
    double warm;
    bench_progress("warming up (one generate)");
    int rc = run_once(a, o, p ? ids : "1", 2, "prefill: ", NULL, &warm, err);
    for (int i = 0; !rc && i < o->reps; i++) {
        bench_progress("round %d of %d", i + 1, o->reps);
        if (p && !(rc = run_once(a, o, ids, 1, "prefill: ", &cold->rate[cold->runs],
                                 &pp->rate[pp->runs], err))) {
            pp->runs++;
            cold->runs++;
        }
        if (!rc && o->gen &&
            !(rc = run_once(a, o, "1", o->gen + 1, "decode: ", NULL, &tg->rate[tg->runs], err)))
            tg->runs++;
    }
    for (int i = 0; !rc && i < r->ntests; i++)
        if (r->test[i].runs)
            stats(&r->test[i]);
    arena_free(a);
    return rc;
}
