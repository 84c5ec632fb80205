/* cli/profile.c: `kiln profile`'s table, from the lines a profiled run wrote
 * (runtime/core/rt_profile.c says what each holds). One row per kernel name,
 * the slowest first: its share of the time of all kernels, calls, time,
 * and how far it is from the roofline (GFLOP/s and GB/s, and their
 * percentages of the machine's figures). A decoder's generate run times
 * its prefill variant's kernels too, named NAME@T: the header then counts
 * prefill calls and decode steps, and kernels never called are left out.
 * main.c builds and runs. */
#include "cli.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char name[128];
    int kernels;                  /* how many share the name */
    long long calls;
    int threads;
    double total_ms, median_ms, gflops, gbs, peak_pct, bw_pct;   /* NAN: null */
} Row;

/* A number of the line, NAN when null or absent. */
static double number(json_t *j, const char *key)
{
    json_t *v = json_object_get(j, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* One line into r; -1 when it is no profile line. */
static int parse_row(const char *line, Row *r)
{
    json_t *j = json_loads(line, 0, NULL), *k = json_object_get(j, "kernels");
    json_t *name = json_object_get(j, "name"), *calls = json_object_get(j, "calls");
    int ok = json_is_string(name) && json_is_array(k) && json_is_integer(calls);
    if (ok) {
        snprintf(r->name, sizeof r->name, "%s", json_string_value(name));
        r->kernels = (int)json_array_size(k);
        r->calls = json_integer_value(calls);
        r->threads = (int)number(j, "threads");
        r->total_ms = number(j, "total_ms");
        r->median_ms = number(j, "median_ms");
        r->gflops = number(j, "gflops");
        r->gbs = number(j, "gbs");
        r->peak_pct = number(j, "peak_percent");
        r->bw_pct = number(j, "bandwidth_percent");
        ok = r->kernels > 0 && isfinite(r->total_ms);
    }
    json_decref(j);
    return ok ? 0 : -1;
}

/* Every line of the file into *rows (malloc'd), *n of them: 0, or an
 * exit status with the reason said. */
static int read_rows(const char *path, Row **rows, int *n)
{
    FILE *f = fopen(path, "r");
    *rows = NULL;
    *n = 0;
    if (!f) {
        fprintf(stderr, "kiln: profile: %s: cannot read\n", path);
        return EXIT_IO;
    }
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    while (!rc && getline(&line, &cap, f) > 0) {
        Row *more = realloc(*rows, (size_t)(*n + 1) * sizeof *more);
        if (!more) {
            fprintf(stderr, "kiln: out of memory\n");
            rc = EXIT_INTERNAL;
        } else if (*rows = more, parse_row(line, &more[*n]) != 0) {
            fprintf(stderr, "kiln: profile: %s: line %d is no profile line\n", path, *n + 1);
            rc = EXIT_INVALID;
        } else {
            ++*n;
        }
    }
    free(line);
    fclose(f);
    return rc;
}

static int slower(const void *x, const void *y)
{
    const Row *a = x, *b = y;
    return (a->total_ms < b->total_ms) - (a->total_ms > b->total_ms);
}

/* A column of a number, "-" when it is unknown. */
static void cell(FILE *out, int width, int prec, double v)
{
    if (isfinite(v))
        fprintf(out, " %*.*f", width, prec, v);
    else
        fprintf(out, " %*s", width, "-");
}

static void print_rows(FILE *out, const Row *r, int n, double all_ms)
{
    int w = 6;
    for (int i = 0; i < n; i++)
        w = (int)strlen(r[i].name) > w ? (int)strlen(r[i].name) : w;
    fprintf(out, "%-*s %7s %7s %9s %6s %10s %8s %6s %8s %6s\n", w, "kernel", "kernels", "calls",
            "total ms", "share", "median us", "GFLOP/s", "%peak", "GB/s", "%bw");
    for (int i = 0; i < n; i++) {
        fprintf(out, "%-*s %7d %7lld", w, r[i].name, r[i].kernels, r[i].calls);
        cell(out, 9, 3, r[i].total_ms);
        fprintf(out, " %5.1f%%", all_ms > 0 ? 100 * r[i].total_ms / all_ms : 0);
        cell(out, 10, 1, r[i].median_ms * 1e3);
        cell(out, 8, 1, r[i].gflops);
        cell(out, 6, 1, r[i].peak_pct);
        cell(out, 8, 1, r[i].gbs);
        cell(out, 6, 1, r[i].bw_pct);
        fputc('\n', out);
    }
}

int cli_profile_table(const char *path, const char *model, const rt_machine *mc, FILE *out)
{
    Row *r;
    int n, rc = read_rows(path, &r, &n);
    if (rc || !n) {
        free(r);
        if (!rc)
            fprintf(out, "kiln profile: %s has no kernels\n", model);
        return rc;
    }
    double all_ms = 0, prefill_ms = 0;
    long long runs = -1, chunks = -1;          /* every kernel runs once a run */
    int kept = 0;
    for (int i = 0; i < n; i++) {
        int variant = strchr(r[i].name, '@') != NULL;
        long long *c = variant ? &chunks : &runs;
        if (*c < 0)
            *c = r[i].calls / r[i].kernels;
        all_ms += r[i].total_ms;
        prefill_ms += variant ? r[i].total_ms : 0;
        if (r[i].calls)
            r[kept++] = r[i];
    }
    n = kept;
    qsort(r, (size_t)n, sizeof *r, slower);
    if (chunks > 0)
        fprintf(out, "kiln profile: %s, cc build, generate on %d threads: %lld prefill calls "
                "(the kernels @) %.3f ms in the kernels, %lld decode steps %.3f ms\n", model,
                r[0].threads, chunks, prefill_ms, runs, all_ms - prefill_ms);
    else
        fprintf(out, "kiln profile: %s, cc build, %lld runs on %d threads: %.3f ms a run in the "
                "kernels\n", model, runs, r[0].threads, runs > 0 ? all_ms / (double)runs : 0);
    if (mc->peak > 0)
        fprintf(out, "percentages of kiln machine's figures: fp32 FMA peak %.1f GFLOP/s "
                "(%.1f on 1 core), read %.1f GB/s\n\n", mc->peak, mc->peak1, mc->read);
    else
        fprintf(out, "no percentages of peak: no figures from `kiln machine` (run it once)\n\n");
    print_rows(out, r, n, all_ms);
    free(r);
    return 0;
}
