/* runtime/core/rt_profile.c: the timers of a profiled run, and their JSON lines.
 *
 * A generated run function with timers attached (rt_model.profile) reads
 * rt_now() around each kernel call and adds the time here: per kernel,
 * its calls, their total and a ring of the last RT_PROFILE_SAMPLES times
 * for the median, so memory stays bounded however long the run. Without
 * timers attached none of this runs: run looks at its handle once per
 * call, not once per kernel.
 *
 * Writing groups the kernels by name, in the order of each name's first
 * kernel: a decode step of 6 layers calls gemm_n288_k288 18 times, which
 * is one line with 18 calls per run. A line:
 *   {"name": "gemm_n288_k288", "kernels": ["k2", "k3", ...], "calls": 180,
 *    "total_ms": 1.9, "median_ms": 0.0102, "flops": 175104, "bytes": 334080,
 *    "gflops": 16.6, "gbs": 31.6, "peak_percent": 3.19,
 *    "bandwidth_percent": 45.7, "threads": 2}
 * flops and bytes are per call (kiln's count, as the dumps print it: each
 * arithmetic operation one FLOP, each buffer a kernel touches counted once
 * at its full size; but a kernel's attention calls count what they
 * computed, rt_profile_count, in place of their bound, rt_kernel_info);
 * gflops and gbs are the totals over all calls divided by the total
 * time; the median is over every recorded call of the name; the
 * percentages are of the FMA peak on `threads` threads (one core's
 * times the threads, at most every core's) and of the read bandwidth.
 * What cannot be known is null: percentages without the machine's
 * figures, rates of a total time of 0. */
#include "runtime/core/rt_core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FLOPs rt_profile_count was given since the last kernel's time was added:
 * the kernels run one after another, each on every thread, so they are
 * the kernel's that ran in between. */
static uint64_t rp_counted;

struct rt_profile {
    int n;                      /* kernels */
    const rt_kernel_info *k;    /* [n] */
    uint64_t *calls;            /* [n] */
    double *counted;            /* [n] FLOPs rt_profile_count was given, in all */
    double *seconds;            /* [n] total per kernel */
    double *ring;               /* [n][RT_PROFILE_SAMPLES]: the last calls' times */
};

void rt_profile_free(rt_profile *p)
{
    if (!p)
        return;
    free(p->calls);
    free(p->counted);
    free(p->seconds);
    free(p->ring);
    free(p);
}

rt_profile *rt_profile_new(int nkernels, const rt_kernel_info *kernels)
{
    size_t n = nkernels > 0 ? (size_t)nkernels : 1;
    rt_profile *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n = nkernels > 0 ? nkernels : 0;
    p->k = kernels;
    p->calls = calloc(n, sizeof *p->calls);
    p->counted = calloc(n, sizeof *p->counted);
    p->seconds = calloc(n, sizeof *p->seconds);
    p->ring = calloc(n * RT_PROFILE_SAMPLES, sizeof *p->ring);
    if (!p->calls || !p->counted || !p->seconds || !p->ring) {
        rt_profile_free(p);
        return NULL;
    }
    (void)__atomic_exchange_n(&rp_counted, 0, __ATOMIC_RELAXED);
    return p;
}

void rt_profile_count(uint64_t flops)
{
    __atomic_fetch_add(&rp_counted, flops, __ATOMIC_RELAXED);
}

void rt_profile_add(rt_profile *p, int k, double seconds)
{
    uint64_t c = p->calls[k]++;
    p->counted[k] += (double)__atomic_exchange_n(&rp_counted, 0, __ATOMIC_RELAXED);
    p->seconds[k] += seconds;
    p->ring[(size_t)k * RT_PROFILE_SAMPLES + c % RT_PROFILE_SAMPLES] = seconds;
}

/* ---- the lines ------------------------------------------------------------ */

/* A JSON string: ", \ and control bytes escaped. */
static void rp_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

/* `, "key": v`, null when v is no finite number. */
static void rp_number(FILE *f, const char *key, double v)
{
    if (isfinite(v))
        fprintf(f, ", \"%s\": %.6g", key, v);
    else
        fprintf(f, ", \"%s\": null", key);
}

static int rp_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* GFLOP/s on `threads` threads; NAN when unknown. */
static double rp_peak(const rt_machine *mc, int threads)
{
    double p = mc->peak1 * threads;
    if (mc->peak <= 0)
        return NAN;
    return threads >= mc->cores || p <= 0 || p > mc->peak ? mc->peak : p;
}

/* The line of kernel i's name, over i and every later kernel of that
 * name; buf holds every recorded time. */
static void rp_line(FILE *f, const rt_profile *p, int i, const rt_machine *mc, int threads,
                    double *buf)
{
    const char *name = p->k[i].name;
    uint64_t calls = 0;
    double seconds = 0, flops = 0, bytes = 0;
    size_t nbuf = 0;
    fputs("{\"name\": ", f);
    rp_string(f, name);
    fputs(", \"kernels\": [", f);
    for (int j = i; j < p->n; j++) {
        if (strcmp(p->k[j].name, name) != 0)
            continue;
        uint64_t c = p->calls[j];
        size_t keep = c < RT_PROFILE_SAMPLES ? (size_t)c : RT_PROFILE_SAMPLES;
        fprintf(f, "%s\"k%d\"", j > i ? ", " : "", j);
        calls += c;
        seconds += p->seconds[j];
        flops += (double)c * (p->k[j].flops - p->k[j].bound) + p->counted[j];
        bytes += (double)c * p->k[j].bytes;
        memcpy(buf + nbuf, p->ring + (size_t)j * RT_PROFILE_SAMPLES, keep * sizeof *buf);
        nbuf += keep;
    }
    qsort(buf, nbuf, sizeof *buf, rp_cmp);
    double median = !nbuf       ? NAN
                    : nbuf % 2  ? buf[nbuf / 2]
                                : (buf[nbuf / 2 - 1] + buf[nbuf / 2]) / 2;
    double gflops = seconds > 0 ? flops / seconds / 1e9 : NAN;
    double gbs = seconds > 0 ? bytes / seconds / 1e9 : NAN;
    fprintf(f, "], \"calls\": %llu", (unsigned long long)calls);
    rp_number(f, "total_ms", seconds * 1e3);
    rp_number(f, "median_ms", median * 1e3);
    fprintf(f, ", \"flops\": %.17g, \"bytes\": %.17g", calls ? flops / (double)calls : 0,
            calls ? bytes / (double)calls : 0);
    rp_number(f, "gflops", gflops);
    rp_number(f, "gbs", gbs);
    rp_number(f, "peak_percent", 100 * gflops / rp_peak(mc, threads));
    rp_number(f, "bandwidth_percent", mc->read > 0 ? 100 * gbs / mc->read : NAN);
    fprintf(f, ", \"threads\": %d}\n", threads);
}

/* 1 when no kernel before i has i's name. */
static int rp_first(const rt_profile *p, int i)
{
    for (int j = 0; j < i; j++)
        if (strcmp(p->k[j].name, p->k[i].name) == 0)
            return 0;
    return 1;
}

int rt_profile_write(const rt_profile *p, const rt_machine *mc, int threads, const char *path,
                     rt_err *e)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    double *buf = malloc(((size_t)p->n + 1) * RT_PROFILE_SAMPLES * sizeof *buf);
    int rc = 0;
    if (f && buf)
        for (int i = 0; i < p->n; i++)
            if (rp_first(p, i))
                rp_line(f, p, i, mc, threads, buf);
    if (!f || fclose(f) != 0 || !buf)
        rc = rt_errf(e, RT_EINTERNAL, "out of memory writing the profile");
    else
        rc = rt_write_file(path, text, len, e);
    free(buf);
    free(text);
    return rc;
}
