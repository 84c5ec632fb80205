/* bench/model.c: one compiled model, timed every way kiln runs it.
 *
 * 1. Cost per call: FLOPs, the sum of ir_kernel_cost over the final
 *    kernels (kiln's own count); bytes, the weights, inputs and outputs
 *    (what must stream at least once).
 * 2. The reference interpreter, in process, on the weights and seeded
 *    inputs the builds see: once, again while the whole stays within half
 *    the budget, at most 5 times (it is slow).
 * 3. The cc build (cg_build_exe) in a cache of the benchmark's own whose
 *    runtime parts are built first (cg_build_parts: compiled once, for
 *    the first model, and timed apart), so the time is the model's own
 *    cold build, as `kiln build` of a new model; its executable run with --repeat
 *    and --threads, rt_main's "N runs: median, min, max" line read back
 *    (process start and weight loading excluded). A first run of 2 calls
 *    sizes the count.
 * 4. The JIT: compiled 3 times (the median is its compile time), then
 *    md->run timed call by call in process; the first call, included as
 *    rt_main includes it, sizes the count.
 * 5. cg_check: the reference, the cc build and the JIT on the same data,
 *    within the tolerance.
 * Counts: o->repeat, else as many as fit in o->budget seconds, 3 to 30. */
#include "bench/bench.h"

#include <stdlib.h>
#include <string.h>

static int runs_for(const BenchModelOpts *o, double per_call)
{
    if (o->repeat)
        return o->repeat;
    double n = o->budget / (per_call > 1e-6 ? per_call : 1e-6);
    return n < 3 ? 3 : n > 30 ? 30 : (int)n;
}

static void cost(const Module *m, BenchModel *r)
{
    for (int i = 0; i < m->prog->nkernels; i++) {
        double f, b;
        ir_kernel_cost(m->prog->kernels[i], &f, &b);
        r->flops += f;
    }
    r->kernels = m->prog->nkernels;
    for (int i = 0; i < m->ninputs; i++)
        r->bytes += (double)node_bytes(m->inputs[i]);
    for (int i = 0; i < m->nweights; i++)
        r->bytes += (double)node_bytes(m->weights[i]);
    for (int i = 0; i < m->noutputs; i++)
        r->bytes += (double)node_bytes(m->outputs[i]);
}

/* ---- the reference interpreter ---------------------------------------- */

static void tensors_free(Tensor **t, int n)
{
    for (int i = 0; t && i < n; i++)
        tensor_free(t[i]);
    free(t);
}

static Tensor **tensors_new(Node *const *v, int n)
{
    Tensor **t = calloc((size_t)n + 1, sizeof *t);
    for (int i = 0; t && i < n; i++)
        if (!(t[i] = tensor_new(v[i]))) {
            tensors_free(t, n);
            return NULL;
        }
    return t;
}

/* Weights from their inits and seeded inputs, as the builds see them. */
static int ref_data(const Module *m, const CgInfos *info, uint64_t seed, Tensor **w, Tensor **in,
                    rt_err *err)
{
    for (int i = 0; i < m->nweights; i++) {
        rt_tensor_info wi = info->weights[i];
        wi.store = RT_F32;                       /* the reference reads f32, */
        wi.panel = 0;                            /* as the graph lays it out */
        void *p;
        if (rt_load_weights(NULL, &wi, 1, &p, err))
            return err->code;
        memcpy(w[i]->f, p, (size_t)w[i]->count * 4);
        rt_free(p);
    }
    for (int i = 0; i < m->ninputs; i++)
        rt_seed_input(&info->inputs[i], i, seed,
                      in[i]->dtype == DT_I32 ? (void *)in[i]->i : (void *)in[i]->f);
    return 0;
}

static int time_reference(Module *m, const CgInfos *info, const BenchModelOpts *o, BenchTime *t,
                          rt_err *err)
{
    Tensor **in = tensors_new(m->inputs, m->ninputs), **w = tensors_new(m->weights, m->nweights);
    Tensor **st = tensors_new(m->states, m->nstates), **out = tensors_new(m->outputs, m->noutputs);
    int rc = in && w && st && out ? ref_data(m, info, o->seed, w, in, err)
                                  : rt_errf(err, RT_EINTERNAL, "out of memory");
    double v[5], spent = 0;
    int n = 0;
    char msg[512];
    while (!rc && n < 5 && (n == 0 || spent * (n + 1) / n < o->budget / 2)) {
        double t0 = rt_now();
        if (ref_run(m, in, w, st, out, msg, sizeof msg) != 0)
            rc = rt_errf(err, RT_EINVAL, "reference: %s", msg);
        spent += v[n++] = rt_now() - t0;
    }
    if (!rc)
        *t = bench_stats(v, n);
    tensors_free(in, m->ninputs);
    tensors_free(w, m->nweights);
    tensors_free(st, m->nstates);
    tensors_free(out, m->noutputs);
    return rc;
}

/* ---- the cc build ----------------------------------------------------------- */

/* exe --repeat runs --threads T; rt_main's timing line read back. */
static int run_exe(Arena *a, const char *exe, int runs, int threads, BenchTime *t, rt_err *err)
{
    char r[16], th[16];
    snprintf(r, sizeof r, "%d", runs < 2 ? 2 : runs); /* rt_main times 2 runs or more */
    snprintf(th, sizeof th, "%d", threads);
    char *argv[] = {(char *)exe, "--repeat", r, "--threads", th, NULL};
    const char *log = arena_printf(a, "%s.log", exe);
    int st = bench_spawn(argv, NULL, "/dev/null", log);
    char *text = cg_read_file(log, NULL);
    int rc = 0;
    if (st != 0)
        rc = rt_errf(err, st == 1 ? RT_EINVAL : RT_EINTERNAL, "the cc build failed: %.*s",
                     text ? (int)strcspn(text, "\n") : 0, text ? text : "");
    else if (!text || bench_parse_repeat(text, t))
        rc = rt_errf(err, RT_EINTERNAL, "the cc build printed no timing line");
    free(text);
    return rc;
}

static int bench_cc(const Module *m, const BenchModelOpts *o, const char *dir, BenchModel *r)
{
    const char *exe = arena_printf(m->a, "%s/%s", dir, m->name);
    CgBuild b = {.quiet = 1, .cache = 1, .cache_dir = arena_printf(m->a, "%s/cache", dir)};
    bench_progress("building %s (cc)...", m->name);
    double t0 = rt_now();
    if (cg_build_parts(m, &b, &r->err))
        return r->err.code;
    double t1 = rt_now();
    if (cg_build_exe(m, exe, &b, &r->err))
        return r->err.code;
    r->build = rt_now() - t1;
    r->build_rt = t1 - t0;
    BenchTime probe = {0, 0, 0, 0};
    if (!o->repeat && run_exe(m->a, exe, 2, o->threads, &probe, &r->err))
        return r->err.code;
    int runs = runs_for(o, probe.min);
    bench_progress("running %s (cc, %d runs)...", m->name, runs);
    return run_exe(m->a, exe, runs, o->threads, &r->cc, &r->err);
}

/* ---- the JIT ---------------------------------------------------------------- */

/* md->run timed call by call; the first call sizes the count. */
static int time_calls(const rt_model *md, void *h, void **in, void **out, const BenchModelOpts *o,
                      BenchTime *t, rt_err *err)
{
    double *v = NULL;
    int runs = 1;
    for (int i = 0; i < runs; i++) {
        double t0 = rt_now();
        int rc = md->run(h, (const void *const *)in, out);
        double dt = rt_now() - t0;
        if (rc) {
            free(v);
            return rt_errf(err, rc, "jit: %s", md->error(h) ? md->error(h) : "the run failed");
        }
        if (i == 0) {
            runs = runs_for(o, dt);
            bench_progress("running %s (jit, %d runs)...", md->name, runs);
            if (!(v = malloc(sizeof *v * (size_t)runs)))
                return rt_errf(err, RT_EINTERNAL, "out of memory");
        }
        v[i] = dt;
    }
    *t = bench_stats(v, runs);
    free(v);
    return 0;
}

static void free_buffers(void **v, int n)
{
    for (int i = 0; v && i < n; i++)
        rt_free(v[i]);
    free(v);
}

static void **buffers(const rt_tensor_info *t, int n)
{
    void **v = calloc((size_t)n + 1, sizeof *v);
    for (int i = 0; v && i < n; i++)
        if (!(v[i] = rt_alloc((size_t)(t[i].count ? t[i].count : 1) * 4))) {
            free_buffers(v, n);
            return NULL;
        }
    return v;
}

static int bench_jit(const Module *m, const CgInfos *info, const BenchModelOpts *o, BenchModel *r)
{
    bench_progress("compiling %s (jit, 3 times)...", m->name);
    CgJit *j = NULL;
    double c[3];
    for (int i = 0; i < 3; i++) {
        cg_jit_free(j);
        if (!(j = cg_jit_new(m, &r->err)))
            return r->err.code;
        c[i] = cg_jit_seconds(j);
    }
    r->compile = bench_stats(c, 3).median;
    const rt_model *md = cg_jit_model(j);
    rt_set_threads(o->threads);
    void *h = md->open(NULL);
    void **in = buffers(info->inputs, m->ninputs), **out = buffers(info->outputs, m->noutputs);
    int rc = h && in && out ? md->status(h) : rt_errf(&r->err, RT_EINTERNAL, "out of memory");
    if (h && rc && !r->err.code)
        rt_errf(&r->err, rc, "jit: %s", md->error(h));
    for (int i = 0; !rc && i < m->ninputs; i++)
        rt_seed_input(&info->inputs[i], i, o->seed, in[i]);
    if (!rc)
        rc = time_calls(md, h, in, out, o, &r->jit, &r->err);
    free_buffers(in, m->ninputs);
    free_buffers(out, m->noutputs);
    if (h)
        md->close(h);
    cg_jit_free(j);
    return rc;
}

/* ---- kiln check ------------------------------------------------------------- */

static void check(const Module *m, const BenchModelOpts *o, BenchModel *r)
{
    bench_progress("checking %s (reference vs cc vs jit)...", m->name);
    CheckOpts co = {.seed = o->seed, .tol = o->tol, .quiet = 1};
    char *table = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&table, &len);
    rt_err err = {0, ""};
    int rc = f ? cg_check(m, &co, f, &err) : rt_errf(&err, RT_EINTERNAL, "out of memory");
    if (f)
        fclose(f);
    free(table);
    r->check = rc == 0 ? 1 : rc == RT_EINVAL ? 0 : -1;
    if (rc)
        fprintf(stderr, "kiln: bench: %s: check: %s\n", m->name, err.msg);
}

int bench_model(Module *m, const BenchModelOpts *o, BenchModel *r)
{
    memset(r, 0, sizeof *r);
    r->check = -1;
    cost(m, r);
    CgInfos info;
    cg_infos(m, &info);
    char dir[4096] = "";
    bench_progress("running %s (reference)...", m->name);
    if (!time_reference(m, &info, o, &r->ref, &r->err) && !bench_dir_open(dir, &r->err) &&
        !bench_cc(m, o, dir, r) && !bench_jit(m, &info, o, r))
        check(m, o, r);
    bench_dir_remove(dir);
    return r->err.code;
}
