/* codegen/check.c: `kiln check`: the reference interpreter, the cc build
 * and the JIT build run on the same weights and inputs; every output is
 * compared with the reference.
 *
 * 0. --input NAME=FILE pairs are bound to the model's inputs first, as the
 *    generated program binds them (after the longest declared name, so a
 *    name may hold '='; each input once): a usage error comes before any
 *    file is opened.
 * 1. Weights: rt_load_weights, as the generated program loads them; a
 *    weight the program holds 16-bit or quantized (--weight-dtype) is
 *    rounded as its load rounds it (quantized, then widened back), so the
 *    reference runs on the very values the builds read, and the table says
 *    the weights were rounded (lossy). The kernels over quantized weights
 *    also quantize their activations (qgemm, rt_quant.h), which the
 *    reference does not: the tolerance covers that (docs).
 * 2. Inputs: the given .npy files, or seeded by rt_seed_input exactly as
 *    the generated program seeds them.
 * 3. The reference runs on those tensors; states start at zero.
 * 4. The cc build runs as a child process (inputs written as .npy to a
 *    private directory, outputs read back); the JIT runs in process.
 * 5. Per output: max absolute error, and that error relative to the
 *    reference's largest magnitude; f32 passes at <= tol, i32 only exact.
 * 6. With weights held quantized, the reference runs again on the
 *    weights as they are (f32), and the table gives, for information, the
 *    cc build's error against that too, and for an output named logits
 *    (rows of a softmax) the mean KL divergence of the f32 weights'
 *    softmax to the build's, and the rows whose argmax agrees (top-1), as
 *    llama.cpp's perplexity --kl-divergence reports a quantized model.
 * A session (cg_check_begin) keeps 1-3 so that `kiln check --bisect` can
 * JIT the program after every loop-level pass and compare each stage.
 *
 * A program of N > 1 MPI ranks (cg_ranks; docs/distributed.md): weights
 * are f32 (the check of several ranks refuses --weight-dtype), loaded once
 * per rank (rt_ranks_set r of N: each rank's parts); the reference
 * simulates the N ranks (ref_run_ranks); the cc build runs under `mpirun
 * -np N --oversubscribe` (--allow-run-as-root as root), rank 0 writing the
 * outputs; the JIT, which runs no ranks, is skipped. With the one-rank
 * graph (CheckOpts.whole), the reference runs it too on the whole weights,
 * and the table adds the split graph's reference and the cc build against
 * it (checked within the tolerance), and for an output named logits the
 * rows whose greedy token (the argmax, ties to the lower index) the cc
 * build shares with the one-rank graph (every row must). */
#include "codegen.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

struct CgCheck {
    const Module *m;
    const CheckOpts *o;
    CgInfos info;
    float **weights;
    float **weights32;       /* quantized weights: as they are (else NULL) */
    int rounded[ST_MXFP4 + 1];  /* by store: weights held so rounded at load, */
    int copied[ST_MXFP4 + 1];   /* and held so as the file has them */
    void **inputs;           /* by input index */
    const char **in_file;    /* by input index: its --input file, or NULL */
    void **ref;              /* reference outputs */
    void **ref32;            /* on weights32 (quantized weights only) */
    int nranks;              /* cg_ranks(m) */
    const char *mpirun;      /* of several ranks, for the cc build: its path */
    float ***rweights;       /* by rank: its parts (rweights[0] is weights) */
    CgInfos winfo;           /* the one-rank graph's (o->whole), */
    float **wweights;        /* its whole weights */
    void **wref;             /* and its reference outputs */
    char dir[4096];          /* scratch for the cc build's files */
    char **files;            /* made in dir, removed at the end */
    int nfiles, capfiles;
    double ref_run, cc_run, jit_compile, jit_run;
};
typedef struct CgCheck Check;

static void *alloc_tensor(const rt_tensor_info *t)
{
    return rt_alloc((size_t)(t->count ? t->count : 1) * 4);
}

/* One --input, given split at its first '=' (NAME=FILE): the input whose
 * name, then '=', starts it, the longest such name. */
static int bind_input(Check *c, int j, rt_err *err)
{
    const Module *m = c->m;
    const char *spec = arena_printf(m->a, "%s=%s", c->o->given_names[j], c->o->given_files[j]);
    int best = -1;
    size_t blen = 0;
    for (int i = 0; i < m->ninputs; i++) {
        size_t len = strlen(m->inputs[i]->name);
        if (!strncmp(spec, m->inputs[i]->name, len) && spec[len] == '=' && (best < 0 || len > blen))
            best = i, blen = len;
    }
    if (best < 0)
        return rt_errf(err, RT_EUSAGE, "--input: the model has no input '%s'",
                       c->o->given_names[j]);
    if (c->in_file[best])
        return rt_errf(err, RT_EUSAGE, "--input: input '%s' given twice", m->inputs[best]->name);
    if (!spec[blen + 1])
        return rt_errf(err, RT_EUSAGE, "--input: no file name after '%s='", m->inputs[best]->name);
    c->in_file[best] = spec + blen + 1;
    return 0;
}

static int bind_inputs(Check *c, rt_err *err)
{
    c->in_file = arena_alloc(c->m->a, sizeof *c->in_file * (size_t)(c->m->ninputs + 1));
    for (int j = 0; j < c->o->ngiven; j++)
        if (bind_input(c, j, err))
            return err->code;
    return 0;
}

static int load_inputs(Check *c, rt_err *err)
{
    for (int i = 0; i < c->m->ninputs; i++) {
        const rt_tensor_info *t = &c->info.inputs[i];
        if (!(c->inputs[i] = alloc_tensor(t)))
            return rt_errf(err, RT_EINTERNAL, "out of memory");
        if (!c->in_file[i])
            rt_seed_input(t, i, c->o->seed, c->inputs[i]);
        else if (rt_npy_read(c->in_file[i], t, c->inputs[i], err))
            return err->code;
    }
    return 0;
}

static Tensor **wrap_all(Node *const *v, int n, void *const *data)
{
    Tensor **t = calloc((size_t)n + 1, sizeof *t);
    for (int i = 0; t && i < n; i++)
        t[i] = tensor_wrap(v[i], data[i]);
    return t;
}

static void free_all(Tensor **t, int n)
{
    for (int i = 0; t && i < n; i++)
        free(t[i]);
    free(t);
}

/* The one-rank graph's whole weights (f32) and its reference outputs. */
static int run_whole(Check *c, rt_err *err)
{
    const Module *w = c->o->whole, *m = c->m;
    cg_infos(w, &c->winfo);
    if (w->ninputs != m->ninputs || w->noutputs != m->noutputs)
        return rt_errf(err, RT_EINTERNAL, "the one-rank graph has other inputs or outputs");
    for (int i = 0; i < m->ninputs; i++)
        if (c->winfo.inputs[i].count != c->info.inputs[i].count)
            return rt_errf(err, RT_EINTERNAL, "input '%s' differs in the one-rank graph",
                           c->info.inputs[i].name);
    rt_tensor_info *f32 = arena_alloc(m->a, sizeof *f32 * (size_t)(w->nweights + 1));
    for (int i = 0; i < w->nweights; i++) {
        f32[i] = c->winfo.weights[i];
        f32[i].store = RT_F32;
        f32[i].panel = 0;
    }
    c->wweights = arena_alloc(m->a, sizeof *c->wweights * (size_t)(w->nweights + 1));
    c->wref = arena_alloc(m->a, sizeof *c->wref * (size_t)(w->noutputs + 1));
    if (rt_load_weights(c->o->weights, f32, w->nweights, (void **)c->wweights, err))
        return err->code;
    void **states = calloc((size_t)w->nstates + 1, sizeof *states);
    int rc = states ? 0 : rt_errf(err, RT_EINTERNAL, "out of memory");
    for (int i = 0; !rc && i < w->nstates; i++)
        if (!(states[i] = alloc_tensor(&c->winfo.states[i])))
            rc = rt_errf(err, RT_EINTERNAL, "out of memory");
    for (int i = 0; !rc && i < w->noutputs; i++)
        if (!(c->wref[i] = alloc_tensor(&c->winfo.outputs[i])))
            rc = rt_errf(err, RT_EINTERNAL, "out of memory");
    Tensor **ti = wrap_all(w->inputs, w->ninputs, c->inputs);
    Tensor **tw = wrap_all(w->weights, w->nweights, (void *const *)c->wweights);
    Tensor **ts = wrap_all(w->states, w->nstates, states);
    Tensor **to = wrap_all(w->outputs, w->noutputs, c->wref);
    char msg[512];
    if (!rc && (!ti || !tw || !ts || !to))
        rc = rt_errf(err, RT_EINTERNAL, "out of memory");
    if (!rc && ref_run((Module *)w, ti, tw, ts, to, msg, sizeof msg) != 0)
        rc = rt_errf(err, RT_EINVAL, "reference of the one-rank graph: %s", msg);
    free_all(ti, w->ninputs);
    free_all(tw, w->nweights);
    free_all(ts, w->nstates);
    free_all(to, w->noutputs);
    for (int i = 0; states && i < w->nstates; i++)
        rt_free(states[i]);
    free(states);
    return rc;
}

/* The reference's outputs into ref, on weights w (of several ranks:
 * each rank on its own, rweights). */
static int run_reference_on(Check *c, float *const *w, void **ref, rt_err *err)
{
    const Module *m = c->m;
    int N = c->nranks > 1 ? c->nranks : 1;
    void **states = calloc((size_t)N * (size_t)m->nstates + 1, sizeof *states);
    Tensor ***tw = calloc((size_t)N, sizeof *tw), ***ts = calloc((size_t)N, sizeof *ts);
    int rc = states && tw && ts ? 0 : rt_errf(err, RT_EINTERNAL, "out of memory");
    for (int i = 0; !rc && i < N * m->nstates; i++)
        if (!(states[i] = alloc_tensor(&c->info.states[i % m->nstates])))
            rc = rt_errf(err, RT_EINTERNAL, "out of memory");
    for (int i = 0; !rc && i < m->noutputs; i++)
        if (!(ref[i] = alloc_tensor(&c->info.outputs[i])))
            rc = rt_errf(err, RT_EINTERNAL, "out of memory");
    Tensor **ti = wrap_all(m->inputs, m->ninputs, c->inputs);
    Tensor **to = wrap_all(m->outputs, m->noutputs, ref);
    for (int r = 0; !rc && r < N; r++) {
        tw[r] = wrap_all(m->weights, m->nweights, (void *const *)(N > 1 ? c->rweights[r] : w));
        ts[r] = wrap_all(m->states, m->nstates, states + (size_t)r * (size_t)m->nstates);
        if (!tw[r] || !ts[r])
            rc = rt_errf(err, RT_EINTERNAL, "out of memory");
    }
    char msg[512];
    if (!rc && (!ti || !to))
        rc = rt_errf(err, RT_EINTERNAL, "out of memory");
    if (!rc && ref_run_ranks((Module *)m, N, ti, (Tensor *const *const *)tw,
                             (Tensor *const *const *)ts, to, msg, sizeof msg) != 0)
        rc = rt_errf(err, RT_EINVAL, "reference: %s", msg);
    free_all(ti, m->ninputs);
    free_all(to, m->noutputs);
    for (int r = 0; tw && ts && r < N; r++) {
        free_all(tw[r], m->nweights);
        free_all(ts[r], m->nstates);
    }
    free(tw);
    free(ts);
    for (int i = 0; states && i < N * m->nstates; i++)
        rt_free(states[i]);
    free(states);
    return rc;
}

static int run_reference(Check *c, rt_err *err)
{
    int rc = run_reference_on(c, c->weights, c->ref, err);
    if (!rc && c->weights32)
        rc = run_reference_on(c, c->weights32, c->ref32, err);
    if (!rc && c->nranks > 1 && c->o->whole)
        rc = run_whole(c, err);
    return rc;
}

/* ---- the cc build, run as a child ---------------------------------------- */

/* A file in the scratch directory, removed at the end (or by an
 * interrupt, interrupt.c). */
static void keep_file(Check *c, char *path)
{
    ARR_PUSH(c->m->a, c->files, c->nfiles, c->capfiles, path);
    cg_tmp_add(path);
}

static char *scratch(Check *c, const char *what, int i)
{
    char *p = arena_printf(c->m->a, "%s/%s%d.npy", c->dir, what, i);
    keep_file(c, p);
    return p;
}

/* Runs argv with stdout and stderr to log; returns the exit status, or
 * -1 when it could not run or died of a signal. */
static int spawn(char **argv, const char *log)
{
    posix_spawn_file_actions_t fa;
    int st, e = posix_spawn_file_actions_init(&fa);
    if (!e && !(e = posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC,
                                                     0600)) &&
        !(e = posix_spawn_file_actions_adddup2(&fa, 1, 2)))
        e = cg_spawn(argv[0], argv, &fa, 0, &st);
    posix_spawn_file_actions_destroy(&fa);
    return e ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void first_line(const char *path, char *line, size_t len)
{
    line[0] = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(line, (int)len, f))
            line[0] = 0;
        fclose(f);
    }
    line[strcspn(line, "\n")] = 0;
}

static int read_outputs(Check *c, char **files, void **out, rt_err *err)
{
    for (int i = 0; i < c->m->noutputs; i++) {
        rt_array arr;
        if (rt_npy_load(files[i], &arr, err))
            return err->code;
        const rt_tensor_info *t = &c->info.outputs[i];
        int same = arr.dtype == t->dtype && arr.count == t->count;
        if (same)
            memcpy(out[i], arr.data, (size_t)t->count * 4);
        free(arr.data);
        if (!same)
            return rt_errf(err, RT_EINTERNAL, "cc build: output %d has the wrong shape", i);
    }
    return 0;
}

static int run_cc(Check *c, void **out, rt_err *err)
{
    const Module *m = c->m;
    Arena *a = m->a;
    char *exe = arena_printf(a, "%s/model", c->dir), *log = arena_printf(a, "%s/run.log", c->dir);
    keep_file(c, exe);
    keep_file(c, log);
    char **argv = arena_alloc(a, sizeof *argv * (size_t)(10 + 2 * (m->ninputs + m->noutputs)));
    char **outf = arena_alloc(a, sizeof *outf * (size_t)(m->noutputs + 1));
    int n = 0;
    if (cg_build_exe(m, exe, &(CgBuild){.quiet = 1, .cache = 1, .anew = 1}, err))
        return err->code;
    if (c->mpirun) {        /* -np N, more ranks than cores allowed, as root too */
        argv[n++] = (char *)c->mpirun;
        argv[n++] = "-np";
        argv[n++] = arena_printf(a, "%d", c->nranks);
        argv[n++] = "--oversubscribe";
        if (geteuid() == 0)
            argv[n++] = "--allow-run-as-root";
    }
    argv[n++] = exe;
    if (c->o->weights) {
        argv[n++] = "--weights";
        argv[n++] = (char *)c->o->weights;
    }
    for (int i = 0; i < m->ninputs; i++) {
        const rt_tensor_info *t = &c->info.inputs[i];
        char *f = scratch(c, "in", i);
        if (rt_npy_write(f, t->dtype, t->rank, t->dims, c->inputs[i], err))
            return err->code;
        argv[n++] = "--input";
        argv[n++] = arena_printf(a, "%s=%s", t->name, f);
    }
    for (int i = 0; i < m->noutputs; i++) {
        outf[i] = scratch(c, "out", i);
        argv[n++] = "--output";
        argv[n++] = arena_printf(a, "%s=%s", c->info.outputs[i].name, outf[i]);
    }
    argv[n] = NULL;
    double t0 = rt_now();
    int st = spawn(argv, log);
    c->cc_run = rt_now() - t0;
    if (cg_interrupted())
        return rt_errf(err, RT_EINTERNAL, "interrupted");
    if (st != 0) {
        char line[400];
        first_line(log, line, sizeof line);
        return rt_errf(err, st == 1 ? RT_EINVAL : RT_EINTERNAL, "the cc build failed to run: %s",
                       line[0] ? line : "(no message)");
    }
    return read_outputs(c, outf, out, err);
}

static int run_jit(Check *c, void **out, rt_err *err)
{
    double t0 = rt_now();
    CgJit *j = cg_jit_new(c->m, err);
    if (!j)
        return err->code;
    c->jit_compile = rt_now() - t0;
    const rt_model *md = cg_jit_model(j);
    void *h = md->open(c->o->weights);
    int rc = !h ? rt_errf(err, RT_EINTERNAL, "out of memory") : md->status(h);
    if (h && rc)
        rt_errf(err, rc, "%s", md->error(h));
    t0 = rt_now();
    if (!rc && (rc = md->run(h, (const void *const *)c->inputs, out)) != 0)
        rt_errf(err, rc, "%s", md->error(h));
    c->jit_run = rt_now() - t0;
    if (h)
        md->close(h);
    cg_jit_free(j);
    return rc;
}

/* ---- comparison ---------------------------------------------------------- */

typedef struct {
    double maxabs, rel, refmax;
    int64_t worst;
    int ok;
} Diff;

/* |r - g|, where equal infinities and two NaNs agree (0) and any other
 * disagreement involving them is infinite. */
static double element_error(double r, double g)
{
    if (r == g || (isnan(r) && isnan(g)))
        return 0;
    double e = fabs(r - g);
    return isnan(e) ? INFINITY : e;
}

static Diff compare(const rt_tensor_info *t, const void *ref, const void *got, double tol)
{
    Diff d = {0, 0, 0, 0, 1};
    for (int64_t i = 0; i < t->count; i++) {
        double r = t->dtype == RT_I32 ? ((const int32_t *)ref)[i] : ((const float *)ref)[i];
        double g = t->dtype == RT_I32 ? ((const int32_t *)got)[i] : ((const float *)got)[i];
        double e = element_error(r, g);
        if (e > d.maxabs) {
            d.maxabs = e;
            d.worst = i;
        }
        if (isfinite(r) && fabs(r) > d.refmax)
            d.refmax = fabs(r);
    }
    d.rel = d.refmax > 0 ? d.maxabs / d.refmax : d.maxabs;
    d.ok = t->dtype == RT_I32 ? d.maxabs == 0 : d.rel <= tol;
    return d;
}

/* ---- the table and the driver ------------------------------------------- */

static void row(FILE *f, const Check *c, int i, void *const *cc, void *const *jit,
                int *bad)
{
    const rt_tensor_info *t = &c->info.outputs[i];
    char shape[80];
    int len = snprintf(shape, sizeof shape, "%s[", t->dtype == RT_I32 ? "i32" : "f32");
    for (int d = 0; d < t->rank; d++)
        len += snprintf(shape + len, sizeof shape - (size_t)len, "%s%lld", d ? "," : "",
                        (long long)t->dims[d]);
    snprintf(shape + len, sizeof shape - (size_t)len, "]");
    fprintf(f, "%-24.24s %-18s", t->name, shape);
    void *const *got[2] = {cc, jit};
    for (int k = 0; k < 2; k++) {
        if (!got[k]) {
            fprintf(f, " %10s %10s", "-", "-");
            continue;
        }
        Diff d = compare(t, c->ref[i], got[k][i], c->o->tol);
        fprintf(f, " %10.3g %10.3g%s", d.maxabs, d.rel, d.ok ? "" : "!");
        if (!d.ok && !*bad) {
            *bad = 1;
            fprintf(stderr, "kiln: check: output '%s' (%s) differs from the reference: "
                    "element %lld, max abs error %.3g, relative %.3g > %.3g\n", t->name,
                    k ? "jit" : "cc", (long long)d.worst, d.maxabs, d.rel, c->o->tol);
        }
        if (!d.ok)
            *bad = 1;
    }
    void *const *q = cc ? cc : jit;
    if (c->weights32 && q)
        fprintf(f, " %10.3g", compare(t, c->ref32[i], q[i], c->o->tol).rel);
    if (c->wref) {                /* the split graph's reference vs the one-rank graph's */
        Diff d = compare(t, c->wref[i], c->ref[i], c->o->tol);
        fprintf(f, " %10.3g%s", d.rel, d.ok ? "" : "!");
        if (!d.ok && !*bad)
            fprintf(stderr, "kiln: check: output '%s' of the %d-rank graph differs from the "
                    "one-rank graph's: element %lld, relative error %.3g > %.3g\n", t->name,
                    c->nranks, (long long)d.worst, d.rel, c->o->tol);
        *bad |= !d.ok;
    }
    fputc('\n', f);
}

/* The index of the largest of p[0, v) (ties to the lower): a greedy token. */
static int64_t argmax(const float *p, int64_t v)
{
    int64_t a = 0;
    for (int64_t j = 1; j < v; j++)
        a = p[j] > p[a] ? j : a;
    return a;
}

/* Rows of logits against the f32 weights' (6): mean KL(P32 || P) of
 * their softmaxes, and the rows whose argmax agrees. */
static void logits_line(FILE *f, const Check *c, int i, void *const *got)
{
    const rt_tensor_info *t = &c->info.outputs[i];
    if (!c->weights32 || !got || t->dtype != RT_F32 || t->rank < 1 || strcmp(t->name, "logits"))
        return;
    int64_t v = t->dims[t->rank - 1], rows = v ? t->count / v : 0, agree = 0;
    double kl = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *p = (const float *)c->ref32[i] + r * v, *x = (const float *)got[i] + r * v;
        int64_t ap = argmax(p, v), ax = argmax(x, v);
        agree += ap == ax;
        double sp = 0, sx = 0, row = 0;
        for (int64_t j = 0; j < v; j++) {
            sp += exp((double)p[j] - p[ap]);
            sx += exp((double)x[j] - x[ax]);
        }
        for (int64_t j = 0; j < v; j++) {   /* log P_j - log X_j, each shifted by its max */
            double lp = (double)p[j] - p[ap] - log(sp), lx = (double)x[j] - x[ax] - log(sx);
            row += exp(lp) * (lp - lx);
        }
        kl += row;
    }
    fprintf(f, "%s against the f32 weights: mean KL divergence %.3g over %lld row%s, top-1 "
            "agrees in %lld of %lld\n", t->name, rows ? kl / (double)rows : 0, (long long)rows,
            rows == 1 ? "" : "s", (long long)agree, (long long)rows);
}

/* Of several ranks: the rows of logits whose greedy token (argmax, ties
 * to the lower index) the build shares with the one-rank graph; every row
 * must. */
static void greedy_line(FILE *f, const Check *c, int i, void *const *got, int *bad)
{
    const rt_tensor_info *t = &c->info.outputs[i];
    if (!c->wref || !got || t->dtype != RT_F32 || t->rank < 1 || strcmp(t->name, "logits"))
        return;
    int64_t v = t->dims[t->rank - 1], rows = v ? t->count / v : 0, agree = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *p = (const float *)c->wref[i] + r * v, *x = (const float *)got[i] + r * v;
        agree += argmax(p, v) == argmax(x, v);
    }
    fprintf(f, "%s: the greedy token of the %d-rank cc build is the one-rank graph's in %lld of "
            "%lld row%s\n", t->name, c->nranks, (long long)agree, (long long)rows,
            rows == 1 ? "" : "s");
    if (agree != rows) {
        if (!*bad)
            fprintf(stderr, "kiln: check: the %d-rank program's greedy tokens differ from the "
                    "one-rank graph's in %lld of %lld rows of '%s'\n", c->nranks,
                    (long long)(rows - agree), (long long)rows, t->name);
        *bad = 1;
    }
}

static void **alloc_outputs(Check *c)
{
    void **v = arena_alloc(c->m->a, sizeof *v * (size_t)(c->m->noutputs + 1));
    for (int i = 0; i < c->m->noutputs; i++)
        if (!(v[i] = alloc_tensor(&c->info.outputs[i])))
            return NULL;
    return v;
}

static void free_outputs(const Check *c, void **v)
{
    for (int i = 0; v && i < c->m->noutputs; i++)
        rt_free(v[i]);
}

/* The weights file as check reads it: which store it holds a weight in
 * (a safetensors file or index, or a GGUF). */
typedef struct {
    int gguf, open;
    rt_safetensors st;
    rt_gguf g;
} WFile;

static void wfile_open(WFile *f, const char *path)
{
    rt_err ignored = {0, ""};
    memset(f, 0, sizeof *f);
    f->gguf = path && rt_is_gguf(path);
    if (path)
        f->open = !(f->gguf ? rt_gguf_open(&f->g, path, &ignored)
                            : rt_st_open(&f->st, path, &ignored));
}

static void wfile_close(WFile *f)
{
    if (f->open && f->gguf)
        rt_gguf_close(&f->g);
    else if (f->open)
        rt_st_close(&f->st);
    f->open = 0;
}

/* Whether the file holds weight w in store itself (the program copies
 * it: nothing is rounded). */
static int file_has(const WFile *f, const Node *w, int store)
{
    static const int st_store[] = {RT_F32, RT_F16, RT_BF16, RT_F8_E4M3, -1}; /* by RT_ST_* */
    if (!f->open)
        return 0;
    if (f->gguf) {
        const rt_gguf_tensor *t = rt_gguf_find_tensor(&f->g, w->name);
        return t && t->store == store;
    }
    const rt_st_tensor *t = rt_st_find(&f->st, w->name);
    char blocks[512];                       /* NAME_blocks and NAME_scales, repacked */
    if (!t && store == RT_MXFP4 &&
        (size_t)snprintf(blocks, sizeof blocks, "%s_blocks", w->name) < sizeof blocks)
        return rt_st_find(&f->st, blocks) != NULL;
    return t && st_store[t->dtype] == store;
}

/* Of several ranks: rank r's parts of the f32 weights into rweights[r],
 * loaded as rank r of N loads them; refused when the program holds a
 * weight in another store. */
static int load_rank_weights(Check *c, const rt_tensor_info *f32, rt_err *err)
{
    const Module *m = c->m;
    for (int i = 0; i < m->nweights; i++)
        if (c->info.weights[i].store != RT_F32)
            return rt_errf(err, RT_EUSAGE, "a program of %d ranks is checked in f32; weight '%s' "
                           "is held as %s (check it with --weight-dtype f32)", c->nranks, f32[i].name,
                           storage_name((Storage)c->info.weights[i].store));
    c->rweights = arena_alloc(m->a, sizeof *c->rweights * (size_t)c->nranks);
    c->rweights[0] = c->weights;
    int rc = 0;
    for (int r = 0; r < c->nranks && !rc; r++) {
        if (r)
            c->rweights[r] = arena_alloc(m->a, sizeof **c->rweights * (size_t)(m->nweights + 1));
        rt_ranks_set(&(rt_ranks){r, c->nranks, NULL, NULL});
        rc = rt_load_weights(c->o->weights, f32, m->nweights, (void **)c->rweights[r], err);
    }
    rt_ranks_set(&(rt_ranks){0, 1, NULL, NULL});
    return rc ? err->code : 0;
}

/* The weights as f32, each then rounded to what the program holds: its
 * buffer's store, or (no program yet: --bisect) the option's for every
 * weight of rank >= 2, as lower gives it. A weight the file holds as the
 * program does is exact already (a GGUF's blocks, widened). */
static int load_weights(Check *c, rt_err *err)
{
    const Module *m = c->m;
    WFile file;
    wfile_open(&file, c->o->weights);
    rt_tensor_info *f32 = arena_alloc(m->a, sizeof *f32 * (size_t)(m->nweights + 1));
    for (int i = 0; i < m->nweights; i++) {
        f32[i] = c->info.weights[i];
        f32[i].store = RT_F32;               /* the reference reads f32, as the graph */
        f32[i].panel = 0;                    /* lays it out */
    }
    if (c->nranks > 1) {
        wfile_close(&file);
        return load_rank_weights(c, f32, err);
    }
    if (rt_load_weights(c->o->weights, f32, m->nweights, (void **)c->weights, err)) {
        wfile_close(&file);
        return err->code;
    }
    for (int i = 0; i < m->nweights; i++) {
        int st = c->info.weights[i].store;
        if (!m->prog && m->weights[i]->rank >= 2)
            st = c->o->weight_store;
        if (st == RT_F32 || st == ST_Q4_K_M || st > ST_MXFP4 ||
            (storage_block((Storage)st) && f32[i].count % storage_block((Storage)st)))
            continue;
        if (file_has(&file, m->weights[i], st)) {
            c->copied[st]++;
            continue;
        }
        c->rounded[st]++;
        float *w = c->weights[i];
        if (storage_block((Storage)st)) {
            void *q = rt_alloc((size_t)rt_store_bytes(st, f32[i].count));
            if (!c->weights32)
                c->weights32 = arena_alloc(m->a, sizeof *c->weights32 * (size_t)(m->nweights + 1));
            c->weights32[i] = q ? rt_alloc((size_t)f32[i].count * sizeof(float)) : NULL;
            if (c->weights32[i])
                memcpy(c->weights32[i], w, (size_t)f32[i].count * sizeof(float));
            if (!q || !c->weights32[i]) {
                rt_free(q);
                wfile_close(&file);
                return rt_errf(err, RT_EINTERNAL, "out of memory quantizing weight '%s'",
                               f32[i].name);
            }
            rt_quantize(st, w, q, f32[i].count);
            rt_dequantize(st, q, w, f32[i].count);
            rt_free(q);
        } else {
            for (int64_t j = 0; j < f32[i].count; j++)
                w[j] = st == RT_BF16 ? rt_bf16_f32(rt_f32_bf16(w[j])) : rt_f16_f32(rt_f32_f16(w[j]));
        }
    }
    wfile_close(&file);
    for (int i = 0; c->weights32 && i < m->nweights; i++)
        if (!c->weights32[i])
            c->weights32[i] = c->weights[i];          /* held as it is: the same */
    return 0;
}

/* Where $PATH has mpirun; NULL when nowhere. */
static const char *find_mpirun(Arena *a)
{
    const char *path = getenv("PATH");
    for (const char *d = path ? path : ""; *d;) {
        size_t len = strcspn(d, ":");
        const char *p = arena_printf(a, "%.*s/mpirun", (int)len, len ? d : ".");
        if (!access(p, X_OK))
            return p;
        d += len + (d[len] == ':');
    }
    return NULL;
}

static int setup(Check *c, rt_err *err)
{
    const Module *m = c->m;
    cg_infos(m, &c->info);
    c->nranks = cg_ranks(m);
    if (c->nranks > 1 && !c->o->skip_cc && !(c->mpirun = find_mpirun(m->a)))
        return rt_errf(err, RT_EIO, "a program of %d ranks is checked under mpirun, which is not "
                       "on PATH (make deps installs Open MPI's openmpi-bin; --no-cc skips the "
                       "build)", c->nranks);
    c->weights = arena_alloc(m->a, sizeof *c->weights * (size_t)(m->nweights + 1));
    c->inputs = arena_alloc(m->a, sizeof *c->inputs * (size_t)(m->ninputs + 1));
    c->ref = arena_alloc(m->a, sizeof *c->ref * (size_t)(m->noutputs + 1));
    c->ref32 = arena_alloc(m->a, sizeof *c->ref32 * (size_t)(m->noutputs + 1));
    if (bind_inputs(c, err))
        return err->code;
    if (load_weights(c, err))
        return err->code;
    if (load_inputs(c, err))
        return err->code;
    const char *tmp = getenv("TMPDIR");
    snprintf(c->dir, sizeof c->dir, "%s/kiln-check-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(c->dir)) {
        c->dir[0] = 0;                   /* none to remove */
        return rt_errf(err, RT_EIO, "cannot make a temporary directory: %s", strerror(errno));
    }
    cg_tmp_add(c->dir);
    return 0;
}

static void teardown(Check *c)
{
    const Module *m = c->m;
    for (int i = 0; i < c->nfiles; i++)
        cg_tmp_remove(c->files[i]);
    if (c->dir[0])
        cg_tmp_remove(c->dir);
    for (int i = 0; c->weights32 && i < m->nweights; i++)
        if (c->weights32[i] != c->weights[i])
            rt_free(c->weights32[i]);
    for (int i = 0; c->weights && i < m->nweights; i++)
        rt_free(c->weights[i]);
    for (int r = 1; c->rweights && r < c->nranks; r++)
        for (int i = 0; c->rweights[r] && i < m->nweights; i++)
            rt_free(c->rweights[r][i]);
    for (int i = 0; c->wweights && i < c->o->whole->nweights; i++)
        rt_free(c->wweights[i]);
    for (int i = 0; c->wref && i < c->o->whole->noutputs; i++)
        rt_free(c->wref[i]);
    for (int i = 0; c->inputs && i < m->ninputs; i++)
        rt_free(c->inputs[i]);
    for (int i = 0; c->ref && i < m->noutputs; i++)
        rt_free(c->ref[i]);
    for (int i = 0; c->ref32 && i < m->noutputs; i++)
        rt_free(c->ref32[i]);
}

/* What f8_e4m3's kernels do with activations (docs/fp8.md). */
static const char activations_f32[] =
    "the kernels keep activations in f32 (no FP8 activation quantization: a file's input_scale "
    "is not applied)";

static void header(FILE *f, const Check *c)
{
    fprintf(f, "model %s: seed %llu, weights %s, tolerance %.3g (relative to max |ref|)\n",
            c->m->name, (unsigned long long)c->o->seed, c->o->weights ? c->o->weights : "from init",
            c->o->tol);
    for (int st = ST_BF16; st <= ST_MXFP4; st++) {     /* ST_Q4_K_M: none held so */
        const char *act = st == ST_F8_E4M3 ? activations_f32
                          : storage_block((Storage)st) ? "the kernels on activations quantized to int8"
                                                       : NULL;
        if (c->copied[st])
            fprintf(f, "weights: %d of %d held as %s as the file stores them (lossless)%s%s\n",
                    c->copied[st], c->m->nweights, storage_name((Storage)st), act ? "; " : "",
                    act ? act : "");
        if (c->rounded[st])
            fprintf(f, "weights: %d of %d held as %s, %s at load (lossy, --weight-dtype); the "
                    "reference runs on the same %s values%s%s\n", c->rounded[st], c->m->nweights,
                    storage_name((Storage)st), storage_block((Storage)st) ? "quantized" : "rounded",
                    storage_block((Storage)st) ? "dequantized" : "rounded", act ? ", " : "",
                    act ? act : "");
    }
    int qamx, amx = ir_prog_amx_calls(c->m->prog, &qamx);
    if (amx - qamx)
        fprintf(f, "gemms: %d call%s on bf16 weights of 16 rows or more, on AMX tiles or "
                "AVX512-BF16 where the machine has them: rows rounded to bf16 (lossy)\n",
                amx - qamx,
                amx - qamx == 1 ? "" : "s");
    if (qamx)
        fprintf(f, "gemms: %d call%s on q8_0, q4_0, q4_k or q6_k weights of 16 rows or more, on AMX "
                "tiles where the machine has them: rows rounded to bf16 rather than int8, "
                "weights dequantized to bf16 (lossy; KILN_AMX=off: int8)\n", qamx,
                qamx == 1 ? "" : "s");
    if (c->weights32)
        fprintf(f, "f32 rel: the %s build's error against the reference on the weights as they "
                "are, unquantized (information, not checked)\n", c->o->skip_cc ? "JIT" : "cc");
    if (c->nranks > 1)
        fprintf(f, "%d ranks: the reference simulates them, each on its part of the weights; the "
                "cc build runs under mpirun -np %d; no JIT%s\n", c->nranks, c->nranks,
                c->wref ? "; 1-rank rel: the reference of the split graph against the one-rank "
                "graph's (checked)" : "");
    fprintf(f, "%-24s %-18s %10s %10s %10s %10s%s%s\n", "output", "shape", "cc abs", "cc rel",
            "jit abs", "jit rel", c->weights32 ? "    f32 rel" : "", c->wref ? " 1-rank rel" : "");
}

int cg_check(const Module *m, const CheckOpts *o, FILE *out, rt_err *err)
{
    Check c = {.m = m, .o = o};
    void **cc = NULL, **jit = NULL;
    int rc = setup(&c, err);
    double t0 = rt_now();
    if (!rc)
        rc = run_reference(&c, err);
    c.ref_run = rt_now() - t0;
    if (!rc && !o->quiet)
        fprintf(stderr, "kiln: check: reference ran in %.3f s\n", c.ref_run);
    if (!rc && !o->skip_cc) {
        if (!o->quiet)
            fprintf(stderr, "kiln: check: building with %s...\n", cg_cc());
        rc = (cc = alloc_outputs(&c)) ? run_cc(&c, cc, err) : rt_errf(err, RT_EINTERNAL, "out of memory");
    }
    int skip_jit = o->skip_jit || c.nranks > 1;
    if (!rc && !skip_jit)
        rc = (jit = alloc_outputs(&c)) ? run_jit(&c, jit, err) : rt_errf(err, RT_EINTERNAL, "out of memory");
    if (!rc && !o->quiet && !o->skip_cc)
        fprintf(stderr, "kiln: check: cc run %.3f s\n", c.cc_run);
    if (!rc && !o->quiet && !skip_jit)
        fprintf(stderr, "kiln: check: jit compile %.3f s, run %.3f s\n", c.jit_compile, c.jit_run);
    int bad = 0;
    if (!rc) {
        header(out, &c);
        for (int i = 0; i < m->noutputs; i++)
            row(out, &c, i, cc, jit, &bad);
        for (int i = 0; i < m->noutputs; i++)
            logits_line(out, &c, i, cc ? cc : jit);
        for (int i = 0; i < m->noutputs; i++)
            greedy_line(out, &c, i, cc, &bad);
        if (bad)
            rc = rt_errf(err, RT_EINVAL, "outputs differ from the reference beyond tolerance");
    }
    free_outputs(&c, cc);
    free_outputs(&c, jit);
    teardown(&c);
    return rc;
}

/* ---- sessions: one reference, many stages -------------------------------- */

CgCheck *cg_check_begin(const Module *m, const CheckOpts *o, rt_err *err)
{
    Check *c = calloc(1, sizeof *c);
    if (!c) {
        rt_errf(err, RT_EINTERNAL, "out of memory");
        return NULL;
    }
    c->m = m;
    c->o = o;
    if (setup(c, err) || run_reference(c, err)) {
        teardown(c);
        free(c);
        return NULL;
    }
    return c;
}

void cg_check_end(CgCheck *c)
{
    if (!c)
        return;
    teardown(c);
    free(c);
}

/* The first element of output i off by more than the tolerance. */
static void first_miss(const Check *c, int i, const void *got, const Diff *d, CgMiss *miss)
{
    const rt_tensor_info *t = &c->info.outputs[i];
    double limit = t->dtype == RT_I32 ? 0 : c->o->tol * d->refmax;
    for (int64_t e = 0; e < t->count; e++) {
        double r = t->dtype == RT_I32 ? ((const int32_t *)c->ref[i])[e] : ((const float *)c->ref[i])[e];
        double g = t->dtype == RT_I32 ? ((const int32_t *)got)[e] : ((const float *)got)[e];
        if (!(element_error(r, g) <= limit)) {
            miss->output = i;
            miss->element = e;
            miss->got = g;
            miss->want = r;
            miss->refmax = d->refmax;
            return;
        }
    }
}

int cg_check_stage(CgCheck *c, const Module *m, CgMiss *miss, rt_err *err)
{
    c->m = m;
    memset(miss, 0, sizeof *miss);
    miss->output = -1;
    void **out = alloc_outputs(c);
    int rc = out ? run_jit(c, out, err) : rt_errf(err, RT_EINTERNAL, "out of memory");
    for (int i = 0; !rc && i < m->noutputs; i++) {
        Diff d = compare(&c->info.outputs[i], c->ref[i], out[i], c->o->tol);
        if (d.rel > miss->worst_rel)
            miss->worst_rel = d.rel;
        if (!d.ok && miss->output < 0)
            first_miss(c, i, out[i], &d, miss);
    }
    free_outputs(c, out);
    return rc ? rc : miss->output >= 0;
}
