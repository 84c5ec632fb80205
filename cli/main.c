/* cli/main.c: the kiln command line. Parses options, calls the layers, prints.
 * Nothing below this file exits or prints usage. */
#include "cli.h"
#include "bench/bench.h"
#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "passes/passes.h"

#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


/* ---- loading and the pipeline ------------------------------------------- */

static Module *load(Arena *a, const Opts *o, int *status)
{
    const char *path = o->model;
    if (cli_is_model_source(path))
        return cli_import_dir(a, path, &o->import, status);
    Diags d;
    diag_init(&d, a, path);
    int io = 0;
    Module *m = fe_load(a, path, &d, &io);
    if (!m) {
        diag_print(&d, stderr);
        *status = io ? EXIT_IO : EXIT_INVALID;
    }
    return m;
}

/* The weights file known when compiling: --weights (a run's, among the
 * options it forwards), or a folder's own; NULL when none. */
static const char *weights_file(const Opts *o)
{
    for (int i = 0; !o->weights && i < o->nrest; i++) {
        if (!strcmp(o->rest[i], "--weights") && i + 1 < o->nrest)
            return o->rest[i + 1];
        if (!strncmp(o->rest[i], "--weights=", 10))
            return o->rest[i] + 10;
    }
    return o->weights;
}

/* A GGUF's stores, by weight index: each weight of rank >= 2 as the file
 * holds it (its store numbers are Storage's); NULL when it cannot be
 * read. */
static const Storage *gguf_stores(const Module *m, const char *path)
{
    rt_gguf g;
    rt_err e = {0, ""};
    if (rt_gguf_open(&g, path, &e))
        return NULL;
    Storage *s = arena_alloc(m->a, sizeof *s * (size_t)(m->nweights + 1));
    for (int i = 0; i < m->nweights; i++) {
        const rt_gguf_tensor *t = rt_gguf_find_tensor(&g, m->weights[i]->name);
        s[i] = t && m->weights[i]->rank >= 2 ? (Storage)t->store : ST_F32;
    }
    rt_gguf_close(&g);
    return s;
}

/* --weight-dtype auto: each weight of rank >= 2 held as the weights file
 * stores it (BF16, F16: 16-bit, copied at load; a GGUF's Q8_0, Q4_0, Q4_K
 * and Q6_K: its blocks, copied; F32: f32), by weight index; NULL (every
 * weight f32) without a file or when its header cannot be read (loading
 * then says why). */
static const Storage *auto_stores(const Module *m, const Opts *o)
{
    const char *path = weights_file(o);
    rt_safetensors st;
    rt_err e = {0, ""};
    if (path && cli_is_dir(path))           /* a folder's weights, as its model's */
        path = imp_hf_weights(m->a, path);
    if (o->weight_auto && path && rt_is_gguf(path))
        return gguf_stores(m, path);
    if (!o->weight_auto || !path || rt_st_open(&st, path, &e))
        return NULL;
    Storage *s = arena_alloc(m->a, sizeof *s * (size_t)(m->nweights + 1));
    for (int i = 0; i < m->nweights; i++) {
        const char *name = m->weights[i]->name;
        const rt_st_tensor *t = rt_st_find(&st, name);
        int dt = t && m->weights[i]->rank >= 2 ? t->dtype : RT_ST_F32;
        int mx = !t && m->weights[i]->rank >= 2 &&           /* NAME_blocks: MXFP4 */
                 rt_st_find(&st, arena_printf(m->a, "%s_blocks", name));
        s[i] = mx ? ST_MXFP4 : dt == RT_ST_BF16 ? ST_BF16 : dt == RT_ST_F16 ? ST_F16
               : dt == RT_ST_F8_E4M3 ? ST_F8_E4M3 : ST_F32;
    }
    rt_st_close(&st);
    return s;
}

/* Runs the passes on *mp (for a program: a decoder's shape variants too,
 * program.c, *mp then their leader); `after` (may be NULL) sees every
 * stage. */
static int run_passes_on(Module **mp, const Opts *o, int need_loops, int program,
                         void (*after)(PassCtx *, Module *, int, int), void *user)
{
    Module *m = *mp;
    Diags d;
    diag_init(&d, m->a, m->file);
    PassCtx cx = {.d = &d, .stop_after = o->stop_after, .disabled = o->disabled,
                  .ndisabled = o->ndisabled, .verify = 1, .after = after, .user = user,
                  .max_memory = o->max_memory, .weight_store = o->weight_store,
                  .weight_stores = auto_stores(m, o), .ranks = o->ranks};
    machine_detect(&cx.machine);
    if (o->machine)
        machine_parse(&cx.machine, o->machine);
    if (o->target)                  /* its vectors, whatever this CPU's */
        machine_target(&cx.machine, o->target);
    double t0 = rt_now();
    if ((program ? cli_program(mp, &cx, o->chunk, o->verbose)
                 : pass_pipeline(m, &cx)) != 0) {
        diag_print(&d, stderr);
        return EXIT_INVALID;
    }
    m = *mp;
    m->target = o->target;
    if (need_loops && !m->prog) {
        fprintf(stderr, "kiln: --stop-after %s: C needs the loop IR; stop at 'lower' or later\n",
                o->stop_after);
        return EXIT_USAGE;
    }
    if (o->verbose)
        fprintf(stderr, "kiln: %s: passes ran in %.1f ms (%d kernels)\n", m->file,
                (rt_now() - t0) * 1e3, m->prog ? m->prog->nkernels : 0);
    return 0;
}

static int run_passes(Module *m, const Opts *o, int need_loops,
                      void (*after)(PassCtx *, Module *, int, int), void *user)
{
    return run_passes_on(&m, o, need_loops, 0, after, user);
}

static int pipeline(Module *m, const Opts *o, int need_loops)
{
    return run_passes(m, o, need_loops, NULL, NULL);
}

/* The program of *m: a decoder's variants in one (program.c). */
static int program(Module **m, const Opts *o)
{
    return run_passes_on(m, o, 1, 1, NULL, NULL);
}

/* ---- commands -------------------------------------------------------------- */

/* path made absolute in m's arena; NULL when path is NULL or gone. */
static const char *absolute(Module *m, const char *path)
{
    char *p = path ? realpath(path, NULL) : NULL;
    const char *q = p ? arena_strdup(m->a, p) : NULL;
    free(p);
    return q;
}

/* A program remembers the weights it was built with (--weights, or a
 * model folder's or GGUF's own) and a folder's tokenizer, by their
 * absolute paths, as its defaults (rt_model). */
static void remember_files(Module *m, const Opts *o)
{
    m->folder_weights = absolute(m, weights_file(o));
    m->folder_tokenizer = absolute(m, o->dir_tok);
}

static int cmd_emit(Module *m, const Opts *o)
{
    int rc = program(&m, o);
    if (rc)
        return rc;
    if (!o->jit)                      /* the JIT's C is kiln run's, which passes them */
        remember_files(m, o);
    const char *c = cg_emit_string(m, o->jit ? CG_JIT : CG_CC);
    if (!o->out || strcmp(o->out, "-") == 0) {
        fputs(c, stdout);             /* checked by main */
        return 0;
    }
    rt_err err = {0, ""};
    return cg_write_file(o->out, c, &err) ? cli_report(&err) : 0;
}

/* The weights' image made ahead of the first run (runtime/core/rt_image.c):
 * the executable just built opens the weights kiln knows (--weights, or
 * the folder it remembers) with --prepare-weights. 0, or the exit status
 * of an executable that could not open them (its one line said why). A
 * program of several ranks prepares each rank's part at its first run
 * under mpirun. */
static int prepare_weights(Module *m, const char *exe, const Opts *o)
{
    const char *w = weights_file(o), *cache = getenv("KILN_WEIGHTS_CACHE");
    if (!w || (cache && !strcmp(cache, "off")) || cg_ranks(m) > 1)
        return 0;
    char *path = strchr(exe, '/') ? (char *)exe : arena_printf(m->a, "./%s", exe);
    char *argv[] = {path, "--prepare-weights", "--weights", (char *)w, NULL};
    int st = 0, e = cg_spawn(path, argv, NULL, 0, &st);
    if (e) {
        fprintf(stderr, "kiln: %s: cannot run it to prepare the weights: %s\n", exe, strerror(e));
        return RT_EIO;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : RT_EINTERNAL;      /* its message is said */
}

static int cmd_build(Module *m, const Opts *o)
{
    int rc = program(&m, o);
    if (rc)
        return rc;
    cli_memory_note(m);
    rt_err err = {0, ""};
    CgBuild b = {.cache = !o->no_cache, .machine = &o->figures};
    if (o->lib) {
        if (!o->out)
            return cli_usage("%s needs -o DIR", "build --lib");
        return cg_build_lib(m, o->out, &b, &err) ? cli_report(&err) : 0;
    }
    const char *out = o->out ? o->out : m->name;
    remember_files(m, o);
    return cg_build_exe(m, out, &b, &err) ? cli_report(&err) : prepare_weights(m, out, o);
}

static int cmd_run(Module *m, const Opts *o)
{
    int rc = program(&m, o);
    if (rc)
        return rc;
    cli_memory_note(m);
    rt_err err = {0, ""};
    CgJit *j = cg_jit_new(m, &err);
    if (!j)
        return cli_report(&err);
    if (o->verbose)
        fprintf(stderr, "kiln: jit: compiled in %.1f ms\n", cg_jit_seconds(j) * 1e3);
    char *args[o->nrest + 2];
    args[0] = "kiln";
    for (int i = 0; i < o->nrest; i++)
        args[i + 1] = o->rest[i];
    args[o->nrest + 1] = NULL;
    rt_model md = *cg_jit_model(j);
    md.machine = o->figures;
    md.weights_file = o->dir_weights;   /* passed as --weights unless given */
    md.tokenizer_file = o->dir_tok;     /* generate's for a text prompt */
    char usage[strlen(o->model) + 16];
    snprintf(usage, sizeof usage, "kiln run %s", o->model);
    md.usage = usage;
    rc = rt_main(o->nrest + 1, args, &md);
    cg_jit_free(j);
    return rc;
}

/* ---- kiln profile: the cc build run with --profile, as a table ----------- */

/* 1 when args hold option opt (--opt or --opt=value). */
static int has_option(char *const *args, int n, const char *opt)
{
    size_t len = strlen(opt);
    for (int i = 0; i < n; i++)
        if (!strncmp(args[i], opt, len) && (!args[i][len] || args[i][len] == '='))
            return 1;
    return 0;
}

/* The executable with the run options (rest, n of them), --profile lines
 * and --repeat 10 unless given or generating; argv[0] is "kiln", so its
 * messages read as kiln's, and its stdout (the outputs' summaries, the
 * tokens) goes to stderr: stdout is the table's. */
static int run_profiled(const char *exe, const char *lines, char *const *rest, int nrest)
{
    char *argv[nrest + 6];
    int n = 0, g = 0;
    while (g < nrest && strcmp(rest[g], "generate"))
        g++;
    int gen = g < nrest;
    argv[n++] = "kiln";
    for (int i = g; i < nrest; i++)              /* generate and its options first, */
        argv[n++] = rest[i];
    for (int i = 0; i < g; i++)                  /* then those given before it */
        argv[n++] = rest[i];
    argv[n++] = "--profile";
    argv[n++] = (char *)lines;
    if (!gen && !has_option(rest, nrest, "--repeat")) {
        argv[n++] = "--repeat";
        argv[n++] = "10";
    }
    argv[n] = NULL;
    fflush(stdout);
    posix_spawn_file_actions_t fa;
    int st, e = posix_spawn_file_actions_init(&fa);
    if (!e && !(e = posix_spawn_file_actions_adddup2(&fa, 2, 1)))
        e = cg_spawn(exe, argv, &fa, 0, &st);
    posix_spawn_file_actions_destroy(&fa);
    if (cg_interrupted())
        return EXIT_INTERNAL;     /* main says so */
    if (e) {
        fprintf(stderr, "kiln: profile: cannot run %s: %s\n", exe, strerror(e));
        return EXIT_IO;
    }
    if (WIFEXITED(st))
        return WEXITSTATUS(st);   /* which said what went wrong */
    fprintf(stderr, "kiln: profile: the model's program died (signal %d)\n", WTERMSIG(st));
    return EXIT_INTERNAL;
}

/* A decoder's default run for a profile, unless the run options are for
 * a plain run or generate's own: `generate` with a prompt of P ids and N
 * tokens drawn greedily (llama-bench's pp256 and tg64 where the KV cache
 * has the rows), then the options given (--weights, --threads). */
static int generate_args(const Module *m, const Opts *o, char **rest)
{
    IrDecoder dec;
    if (!ir_decoder(m, &dec) || has_option(o->rest, o->nrest, "generate") ||
        has_option(o->rest, o->nrest, "--input") || has_option(o->rest, o->nrest, "--output") ||
        has_option(o->rest, o->nrest, "--repeat"))
        return 0;
    int64_t n = dec.max_seq / 4 < 64 ? dec.max_seq / 4 : 64, p = dec.max_seq - n;
    p = p < 256 ? p : 256;
    char *ids = arena_alloc(m->a, (size_t)p * 12 + 1), *at = ids;
    for (int64_t i = 0; i < p; i++)
        at += sprintf(at, "%s%lld", i ? "," : "", (long long)(1 + i % (dec.vocab - 1)));
    char *const args[] = {"generate", "--tokens", ids, "-n", arena_printf(m->a, "%lld", (long long)n),
                          "--temperature", "0"};
    memcpy(rest, args, sizeof args);
    for (int i = 0; i < o->nrest; i++)
        rest[7 + i] = o->rest[i];
    return 7 + o->nrest;
}

/* A program to run once: m's executable built (from the build cache when
 * it is there; its progress on stderr, as kiln build's) in a temporary
 * directory, which holds also the file `other` names; all three are
 * registered as temporaries, removed if kiln is interrupted. */
typedef struct {
    char dir[4096];
    const char *exe;
    const char *made[3];            /* dir, exe, other; NULL until made */
} TempExe;

/* 0, or an exit status said; temp_exe_remove(t) in either case. */
static int temp_exe(Module *m, const Opts *o, const char *other, TempExe *t)
{
    memset(t, 0, sizeof *t);
    rt_err err = {0, ""};
    if (bench_dir_open(t->dir, &err))
        return cli_report(&err);
    t->exe = arena_printf(m->a, "%s/%s", t->dir, m->name);
    const char *made[] = {t->dir, t->exe, arena_printf(m->a, "%s/%s", t->dir, other)};
    for (int i = 0; i < 3; i++)
        cg_tmp_add(t->made[i] = made[i]);
    CgBuild b = {.cache = !o->no_cache, .machine = &o->figures};
    return cg_build_exe(m, t->exe, &b, &err) ? cli_report(&err) : 0;
}

static void temp_exe_remove(TempExe *t)
{
    if (t->made[0])
        bench_dir_remove(t->dir);
    for (int i = 0; i < 3 && t->made[i]; i++)
        cg_tmp_forget(t->made[i]);
}

/* kiln profile MODEL [RUN OPTIONS]: the cc build (from the build cache
 * when it is there; its progress on stderr, as kiln build's) in a
 * temporary directory, run with --profile (a decoder without options:
 * generate_args); its lines as a table, the slowest kernel first. */
static int cmd_profile(Module *m, const Opts *o)
{
    int rc = program(&m, o);
    if (rc)
        return rc;
    char *gen[7 + o->nrest];
    int ngen = generate_args(m, o, gen);
    cli_memory_note(m);
    TempExe t;
    if ((rc = temp_exe(m, o, "profile.jsonl", &t)) == 0) {
        rc = ngen ? run_profiled(t.exe, t.made[2], gen, ngen)
                  : run_profiled(t.exe, t.made[2], o->rest, o->nrest);
        if (!rc)
            rc = cli_profile_table(t.made[2], m->name, &o->figures, stdout);
    }
    temp_exe_remove(&t);
    return rc;
}

/* kiln bench MODEL [-p P] [-n N] [-r R] [--threads T] [--json FILE]: a
 * decoder's program built (from the build cache when it is there) in a
 * temporary directory, then its prompt processing and generation speed
 * as llama-bench's pp and tg tests (bench_cmd_tokens). */
static int cmd_bench(Module *m, const Opts *o)
{
    IrDecoder dec;
    if (!ir_decoder(m, &dec)) {
        fprintf(stderr, "kiln: bench: " RT_NOT_A_DECODER "; kiln bench %s without -p or -n times "
                "it as a graph\n", m->name, o->model);
        return EXIT_USAGE;
    }
    if (o->pp + 1 > dec.max_seq || o->tg + 2 > dec.max_seq) {
        fprintf(stderr, "kiln: bench: -p %lld and -n %lld need %lld and %lld of the KV cache's "
                "%lld rows (--max-seq at import)\n", (long long)o->pp, (long long)o->tg,
                (long long)o->pp + 1, (long long)o->tg + 2, (long long)dec.max_seq);
        return EXIT_USAGE;
    }
    int rc = program(&m, o);
    if (rc)
        return rc;
    TempExe t;
    if ((rc = temp_exe(m, o, arena_printf(m->a, "%s.log", m->name), &t)) != 0) {
        temp_exe_remove(&t);
        return rc;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    BenchTokensOpts bo = {.exe = t.exe, .weights = o->weights, .vocab = dec.vocab, .prompt = o->pp,
                          .gen = o->tg, .reps = o->reps,
                          .threads = o->threads ? o->threads : cores > 0 ? (int)cores : 1};
    const char *weights = o->weight_auto ? "as stored (--weight-dtype auto)"
                                         : storage_name(o->weight_store);
    rc = bench_cmd_tokens(&bo, o->model, weights, o->json);
    temp_exe_remove(&t);
    return rc;
}

/* ---- kiln check --bisect: the JIT after every loop-level pass ----------- */

typedef struct {
    CheckOpts co;
    CgCheck *chk;
    int bad;                        /* first stage off the reference; 0: none */
    CgMiss miss;
    int rc;
} Bisect;

/* "[3,17]" for a flat element of output i. */
static char *element_str(Arena *a, const Node *out, int64_t e)
{
    int64_t idx[KILN_MAX_RANK];
    for (int d = out->rank - 1; d >= 0; d--) {
        idx[d] = e % out->dims[d];
        e /= out->dims[d];
    }
    return shape_str(a, out->rank, idx);
}

/* Tests of --bisect: KILN_TEST_BREAK=PASS adds 1 to the value of the
 * first f32 store of the last kernel right after PASS, as a wrong pass
 * would. Nothing else reads this variable. */
static int break_store(Stmt **found, Block *blk)
{
    for (int i = 0; i < blk->n; i++) {
        Stmt *s = blk->s[i];
        if (s->kind == S_STORE && s->e->type == T_F32 && s->op == A_SET)
            return *found = s, 1;
        if (break_store(found, &s->body) || break_store(found, &s->els))
            return 1;
    }
    return 0;
}

static void test_break(Module *m, int pass)
{
    const char *name = getenv("KILN_TEST_BREAK");
    Stmt *s = NULL;
    if (!name || strcmp(name, pass_table[pass].name) != 0 || !m->prog->nkernels)
        return;
    if (break_store(&s, &m->prog->kernels[m->prog->nkernels - 1]->body))
        s->e = e_add(m->a, s->e, e_flt(m->a, 1.0));
}

static void bisect_stage(PassCtx *cx, Module *m, int pass, int changed)
{
    Bisect *b = cx->user;
    rt_err err = {0, ""};
    if (b->rc || (pass == 0 && !(b->chk = cg_check_begin(m, &b->co, &err)))) {
        b->rc = b->rc ? b->rc : cli_report(&err);
        return;
    }
    if (!m->prog)
        return;
    printf("%02d %-22s ", pass, pass_table[pass].name);
    if (changed < 0) {
        printf("disabled\n");
        return;
    }
    test_break(m, pass);
    CgMiss miss;
    int rc = cg_check_stage(b->chk, m, &miss, &err);
    if (rc > 1) {
        printf("failed: %s\n", err.msg);
        b->rc = rc;
        return;
    }
    printf("%s (max relative error %.3g)\n", rc ? "OFF" : "ok", miss.worst_rel);
    if (rc && !b->bad) {
        b->bad = pass;
        b->miss = miss;
    }
    fflush(stdout);
}

static int cmd_bisect(Module *m, const Opts *o, const CheckOpts *co)
{
    Bisect b = {.co = *co};
    b.co.quiet = 1;
    printf("bisect %s: the JIT after every loop-level pass vs the reference (tolerance %.3g)\n",
           m->file, co->tol);
    int rc = run_passes(m, o, 1, bisect_stage, &b);
    cg_check_end(b.chk);
    if (rc || b.rc)
        return rc ? rc : b.rc;
    if (!b.bad) {
        printf("ok: every stage within tolerance\n");
        return 0;
    }
    const Node *out = m->outputs[b.miss.output];
    fprintf(stderr, "kiln: bisect: first pass off the reference: %s: output '%s' element %s: "
            "%.9g, reference %.9g (max |ref| %.3g)\n", pass_table[b.bad].name, out->name,
            element_str(m->a, out, b.miss.element), b.miss.got, b.miss.want, b.miss.refmax);
    return EXIT_INVALID;
}

/* Whether a buffer of p is held in int8-activation blocks (not f8_e4m3,
 * whose kernels keep activations in f32). */
static int int8_blocks(const Prog *p)
{
    for (int i = 0; p && i < p->nbufs; i++)
        if (storage_block(p->bufs[i]->store) && p->bufs[i]->store != ST_F8_E4M3)
            return 1;
    return 0;
}

/* --tolerance, else 1e-4, or 3e-2 when weights are held in GGML's blocks:
 * the kernels then round activations to int8 (qgemm), or with AMX tiles
 * (calls of 16 rows or more) activations and weights to bf16, which the
 * reference does not; about 1 % of the largest output on the examples
 * (docs/quantized-weights.md). f8_e4m3's kernels keep f32 activations:
 * 1e-4 (docs/fp8.md). 1e-2 when gemms on bf16 weights may run on AMX
 * tiles, which round their rows to bf16: 0.04-0.22 % of the largest
 * output on the examples (docs/16-bit-weights.md). */
static double tolerance(const Module *m, const Opts *o)
{
    int quant = (storage_block(o->weight_store) && o->weight_store != ST_F8_E4M3) ||
                o->weight_store == ST_Q4_K_M;
    int amx = 0;
    if (m->prog) {
        quant = int8_blocks(m->prog) || int8_blocks(m->open);
        amx = ir_prog_amx_calls(m->prog, NULL) > 0;
    }
    return o->tol >= 0 ? o->tol : quant ? 3e-2 : amx ? 1e-2 : 1e-4;
}

static int cmd_check(Module *m, const Opts *o)
{
    CheckOpts co = {o->weights, o->given_names, o->given_files, o->ngiven, o->seed,
                    tolerance(m, o), o->no_cc, o->no_jit, 0, (int)o->weight_store, NULL};
    if (o->bisect && o->ranks > 1)
        return cli_usage("check --bisect runs the JIT, which runs one rank: %s", "drop --ranks");
    if (o->bisect)
        return cmd_bisect(m, o, &co);
    co.whole = o->ranks > 1 ? ir_clone(m->a, m) : NULL;
    int rc = pipeline(m, o, 1);
    if (rc)
        return rc;
    co.tol = tolerance(m, o);
    cli_memory_note(m);
    rt_err err = {0, ""};
    rc = cg_check(m, &co, stdout, &err);
    if (rc)
        return cli_report(&err);
    printf("ok: every output within tolerance\n");
    return 0;
}

static int cmd_print(Module *m, const Opts *o)
{
    int rc = pipeline(m, o, 0);
    if (rc)
        return rc;
    ir_print_module(stdout, m);
    return 0;
}

/* ---- kiln dump: every stage to a directory, or one stage to stdout ------ */

typedef struct {
    const Opts *o;
    char *prev;                    /* the last stage's text */
    int after;                     /* --after: the stage to print; -1: all */
    int rc;
} Dump;

/* The next line of s that is not a comment (# after any indent), or its
 * end; *len its length with the newline. */
static const char *ir_line(const char *s, size_t *len)
{
    for (;;) {
        size_t n = strcspn(s, "\n");
        n += s[n] == '\n';
        const char *t = s + strspn(s, " ");
        if (*t != '#' || !n) {
            *len = n;
            return s;
        }
        s += n;
    }
}

/* Whether two stages' texts are the same IR: their notes (comment lines)
 * aside, which a pass may drop or add without changing anything. */
static int same_ir(const char *a, const char *b)
{
    for (;;) {
        size_t na, nb;
        a = ir_line(a, &na);
        b = ir_line(b, &nb);
        if (na != nb || memcmp(a, b, na))
            return 0;
        if (!na)
            return 1;
        a += na, b += nb;
    }
}

static void dump_stage(PassCtx *cx, Module *m, int pass, int changed)
{
    Dump *dp = cx->user;
    char *text = ir_module_text(m);
    int same = dp->prev && same_ir(dp->prev, text);
    const char *state = changed < 0 ? "disabled" : pass == 0 ? "parsed"
                        : same ? "unchanged" : "changed";
    char *file = arena_printf(m->a, "# kiln %s: %s after %02d-%s (%s)\n%s", KILN_VERSION,
                              m->file, pass, pass_table[pass].name, state, text);
    if (dp->after == pass) {
        fputs(file, stdout);
    } else if (dp->after < 0 && !dp->rc) {
        rt_err err = {0, ""};
        char *path = arena_printf(m->a, "%s/%02d-%s.kir", dp->o->out, pass, pass_table[pass].name);
        if (cg_write_file(path, file, &err))
            dp->rc = cli_report(&err);
    }
    dp->prev = text;
}

static int cmd_dump(Module *m, const Opts *o)
{
    Dump dp = {o, NULL, o->dump_after ? pass_index(o->dump_after) : -1, 0};
    if (dp.after < 0 && !o->out)
        return cli_usage("%s needs --dump-dir DIR or --after PASS", "dump");
    if (dp.after < 0 && mkdir(o->out, 0777) != 0) {
        struct stat st;
        int e = errno;
        if (e == EEXIST && stat(o->out, &st) == 0 && !S_ISDIR(st.st_mode))
            e = ENOTDIR;              /* a file of that name */
        if (e != EEXIST) {
            fprintf(stderr, "kiln: %s: %s\n", o->out, strerror(e));
            return EXIT_IO;
        }
    }
    int rc = run_passes(m, o, 0, dump_stage, &dp);
    if (rc || dp.rc)
        return rc ? rc : dp.rc;
    int last = o->stop_after ? pass_index(o->stop_after) : pass_count - 1;
    if (!m->prog || last < pass_index("codegen"))
        return 0;
    char *c = cg_emit_string(m, CG_CC);
    int cg = pass_index("codegen");
    if (dp.after == cg) {
        fputs(c, stdout);
        return 0;
    }
    if (dp.after >= 0)
        return 0;
    rt_err err = {0, ""};
    char *path = arena_printf(m->a, "%s/%02d-codegen.c", o->out, cg);
    return cg_write_file(path, c, &err) ? cli_report(&err) : 0;
}

typedef struct {
    const char *name;
    int (*run)(Module *m, const Opts *o);
    int weights;                    /* makes a program: a folder's weights
                                       are checked first */
} Command;

static const Command commands[] = {
    {"emit-c", cmd_emit, 1}, {"build", cmd_build, 1}, {"run", cmd_run, 1},
    {"check", cmd_check, 1}, {"print", cmd_print, 0}, {"dump", cmd_dump, 0},
    {"profile", cmd_profile, 1},
};
/* kiln bench MODEL -p ... (bench_tokens_form): a model command too */
static const Command bench_tokens_cmd = {"bench", cmd_bench, 1};

/* kiln bench's form that times a decoder's tokens per second: -p, -n or
 * -r given, or MODEL a folder or a GGUF file. */
static int bench_tokens_form(int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-p") || !strcmp(argv[i], "-n") || !strcmp(argv[i], "-r") ||
            (argv[i][0] != '-' && cli_is_model_source(argv[i])))
            return 1;
    return 0;
}

/* Loads the model and runs the command in one arena; the weights file
 * known (a folder's, or --weights), for a command that makes a program,
 * is checked between the two
 * (cli_folder_weights), cached build or not. Out of memory
 * anywhere below comes back here, with nothing held but the arena. */
static int compile(const Command *c, const Opts *o)
{
    Arena *a = arena_new();
    if (!a)
        return cli_out_of_memory();
    int rc = 0;
    jmp_buf oom;
    if (setjmp(oom)) {
        rc = cli_out_of_memory();
    } else {
        arena_set_oom(a, &oom);
        Module *m = load(a, o, &rc);
        const char *w = m && c->weights ? weights_file(o) : NULL;
        if (w && cli_is_dir(w)) {            /* --weights DIR: the folder's, as a run reads */
            char *f = cli_import_weights(w);
            w = f ? arena_strdup(a, f) : NULL;
            free(f);
        }
        if (m && c->weights && (cli_is_model_source(o->model) || w))
            rc = cli_folder_weights(m, w);
        if (m && !rc)
            rc = c->run(m, o);
    }
    arena_free(a);
    return rc;
}

/* The commands that time kernels read kiln machine's figures: builds of
 * executables (their --profile), profile, and run --profile. */
static int wants_machine(const Opts *o)
{
    return (!strcmp(o->cmd, "build") && !o->lib) || !strcmp(o->cmd, "profile") ||
           !strcmp(o->cmd, "bench") ||
           (!strcmp(o->cmd, "run") && has_option(o->rest, o->nrest, "--profile"));
}

static int model_command(const Command *c, int argc, char **argv)
{
    Opts o = {.cmd = c->name};
    int rc = cli_parse_opts(&o, argc, argv);
    if (!rc && o.out && cli_same_file(o.out, o.model))
        rc = cli_usage("-o %s would overwrite the model file", o.out);
    char *given_dir = !rc && o.weights && cli_is_dir(o.weights) ? cli_import_weights(o.weights)
                                                                 : NULL;
    if (given_dir)                          /* --weights DIR: the folder's */
        o.weights = given_dir;
    char *dir_weights = !rc && cli_is_model_source(o.model) ? cli_import_weights(o.model) : NULL;
    o.dir_weights = dir_weights;
    if (dir_weights && !o.weights)          /* a folder's model loads its own weights */
        o.weights = dir_weights;
    if (dir_weights && !has_option(o.rest, o.nrest, "--weights") &&
        (!strcmp(o.cmd, "run") || !strcmp(o.cmd, "profile"))) {
        o.rest[o.nrest++] = "--weights";
        o.rest[o.nrest++] = dir_weights;
    }
    /* generate's text prompt: the folder's tokenizer.json (rt_model), a
     * GGUF's own metadata */
    char *dir_tok = !dir_weights         ? NULL
                    : cli_is_dir(o.model) ? cli_folder_file(o.model, "tokenizer.json")
                                          : strdup(o.model);
    o.dir_tok = dir_tok;
    if (!rc && wants_machine(&o))
        bench_machine_figures(&o.figures);      /* none: no percentages, said then */
    const char *fail = getenv("KILN_TEST_ALLOC_FAIL");  /* tests/unit/test_alloc.c */
    if (fail)
        ir_alloc_fail_at(strtoul(fail, NULL, 10));
    if (!rc)
        rc = compile(c, &o);
    for (int i = 0; i < o.ngiven; i++)
        free((char *)o.given_names[i]);
    free(o.given_names);
    free(o.given_files);
    free(o.disabled);
    free(o.rest);
    free(dir_weights);
    free(dir_tok);
    free(given_dir);
    return rc;
}

static int is_help(const char *a)
{
    return !strcmp(a, "--help") || !strcmp(a, "-h");
}

/* kiln CMD ... --help (or -h) anywhere among CMD's arguments; for run
 * only first: kiln run MODEL --help is the model's usage (rt_main's). */
static int asks_help(int argc, char **argv)
{
    int end = !strcmp(argv[1], "run") ? 3 : argc;
    for (int i = 2; i < argc && i < end; i++)
        if (is_help(argv[i]))
            return 1;
    return 0;
}

/* kiln help [COMMAND]: the overview, or COMMAND's usage. */
static int help(int argc, char **argv)
{
    if (argc < 3 || !cli_help(argv[2]))
        return argc < 3 ? cli_help(NULL) : 0;
    char *args[] = {argv[0], argv[2], "--help", NULL};
    if (!strcmp(argv[2], "bench"))
        return bench_cmd_bench(3, args);
    if (!strcmp(argv[2], "machine"))
        return bench_cmd_machine(3, args);
    return cli_usage("help: no command '%s'", argv[2]);
}

static int command(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage("%s", "missing command");
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || is_help(cmd))
        return help(argc, argv);
    if (asks_help(argc, argv) && cli_help(cmd) == 0)      /* bench, machine: their own */
        return 0;
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("kiln %s\n", KILN_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "passes"))
        return cli_passes();
    if (!strcmp(cmd, "opt"))
        return cli_opt(argc, argv);
    if (!strcmp(cmd, "bench"))
        return bench_tokens_form(argc, argv) ? model_command(&bench_tokens_cmd, argc, argv)
                                             : bench_cmd_bench(argc, argv);
    if (!strcmp(cmd, "import"))
        return cli_import(argc, argv);
    if (!strcmp(cmd, "machine"))
        return bench_cmd_machine(argc, argv);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name))
            return model_command(&commands[i], argc, argv);
    return cli_usage("unknown command '%s'", cmd);
}

/* What a command printed must have reached stdout (not a full disk or a
 * closed pipe): otherwise an I/O error, said once. */
static int flushed(int rc)
{
    int e = fflush(stdout) != 0 ? errno : ferror(stdout) ? -1 : 0;
    if (rc || !e)
        return rc;
    fprintf(stderr, "kiln: cannot write to stdout%s%s\n", e > 0 ? ": " : "", e > 0 ? strerror(e) : "");
    return EXIT_IO;
}

/* Interrupted (SIGINT, SIGTERM, SIGHUP, SIGQUIT: codegen/interrupt.c),
 * kiln removes its temporaries and dies of the signal, said once here. */
int main(int argc, char **argv)
{
    cg_intr_init();
    int rc = flushed(command(argc, argv));
    cg_intr_die();
    return rc;
}
