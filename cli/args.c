/* cli/args.c: the options of kiln's model commands (build, emit-c, run,
 * check, print, dump, profile, bench MODEL) read into Opts, each checked
 * (a bad value is a usage error naming it); main.c dispatches on them. */
#include "cli.h"
#include "bench/bench.h"
#include "passes/passes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int parse_number(const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    return *s && !*end;
}

static int parse_seed(const char *s, uint64_t *v)
{
    char *end;
    if (!*s || *s == '-')
        return 0;
    *v = strtoull(s, &end, 10);
    return !*end;
}

static int add_input(Opts *o, const char *spec)
{
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec)
        return cli_usage("--input takes NAME=FILE.npy, got '%s'", spec);
    char *name = strndup(spec, (size_t)(eq - spec));
    if (!name)
        return cli_out_of_memory();
    o->given_names[o->ngiven] = name;
    o->given_files[o->ngiven++] = eq + 1;
    return 0;
}

/* Options of rt_main (run) that take a separate value. */
static int takes_value(const char *a)
{
    static const char *const v[] = {"--weights", "--input", "--output", "--repeat",
                                    "--threads", "--seed",  "--profile"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (strcmp(a, v[i]) == 0)
            return 1;
    return 0;
}

/* The value after argv[*i] (*i moves to it; "" when there is none), a
 * whole number in [lo, hi] into *n: 1, else 0. */
static int count_arg(int argc, char **argv, int *i, int64_t lo, int64_t hi, int64_t *n)
{
    if (*i + 1 >= argc)
        return 0;
    char *end;
    const char *v = argv[++*i];
    long long x = strtoll(v, &end, 10);
    *n = x;
    return *v >= '0' && *v <= '9' && !*end && x >= lo && x <= hi;
}

/* Options shared by the model commands; run forwards what it does not know. */
int cli_parse_opts(Opts *o, int argc, char **argv)
{
    o->given_names = calloc((size_t)argc, sizeof *o->given_names);
    o->given_files = calloc((size_t)argc, sizeof *o->given_files);
    o->disabled = calloc((size_t)argc, sizeof *o->disabled);
    o->rest = calloc((size_t)argc + 4, sizeof *o->rest);   /* room for a folder's two */
    if (!o->given_names || !o->given_files || !o->disabled || !o->rest)
        return cli_out_of_memory();
    o->tol = -1;                    /* unset: tolerance() decides */
    o->seed = 1;
    o->weight_auto = 1;
    o->chunk = 0;                   /* 256, cli_program's default */
    o->pp = 256, o->tg = 64, o->reps = 5;   /* bench MODEL: llama-bench's -r, the P, N */
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        int bad = 0;
        int is_run = !strcmp(o->cmd, "run") || !strcmp(o->cmd, "profile");
        int builds = !strcmp(o->cmd, "build") || !strcmp(o->cmd, "profile") ||
                     !strcmp(o->cmd, "bench");
        int bench = !strcmp(o->cmd, "bench");
        if (is_run && o->model &&
            (!strcmp(a, "generate") || (!strcmp(a, "chat") && !strcmp(o->cmd, "run")))) {
            while (i < argc)                 /* its options are rt_generate's, rt_chat's */
                o->rest[o->nrest++] = argv[i++];
            break;
        }
        int64_t n;
        if (bench && (strcmp(a, "-p") == 0 || strcmp(a, "-n") == 0)) {
            if (!count_arg(argc, argv, &i, 0, 1 << 20, &n))
                return cli_usage("-p and -n take a number of tokens from 0, got '%s'", argv[i]);
            *(a[1] == 'p' ? &o->pp : &o->tg) = n;
        } else if (bench && strcmp(a, "-r") == 0) {
            if (!count_arg(argc, argv, &i, 1, BENCH_TOKENS_RUNS, &n))
                return cli_usage("-r takes a number of runs from 1 to 100, got '%s'", argv[i]);
            o->reps = (int)n;
        } else if (bench && strcmp(a, "--threads") == 0) {
            if (!count_arg(argc, argv, &i, 1, 4096, &n))
                return cli_usage("--threads takes a number from 1, got '%s'", argv[i]);
            o->threads = (int)n;
        } else if (bench && (v = cli_opt_value(argc, argv, &i, "--json"))) {
            if (!*v)
                return cli_usage("%s needs a path", "--json");
            o->json = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--chunk"))) {
            char *end;
            long long n = strtoll(v, &end, 10);
            if (!*v || *end || n < 1 || n > 1 << 20)
                return cli_usage("--chunk takes a number of tokens from 1, got '%s'", v);
            o->chunk = n;
        } else if ((v = cli_opt_value(argc, argv, &i, "--stop-after")) || (v = cli_opt_value(argc, argv, &i, "--disable-pass"))) {
            if (!*v)
                return cli_usage("%s needs a pass name (see 'kiln passes')", a);
            if (pass_index(v) < 0)
                return cli_usage("unknown pass '%s' (see 'kiln passes')", v);
            if (a[2] == 's')
                o->stop_after = v;
            else if (pass_table[pass_index(v)].required)
                return cli_usage("pass '%s' cannot be disabled", v);
            else
                o->disabled[o->ndisabled++] = v;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            o->verbose = 1;
        } else if (cli_import_opt(argc, argv, &i, &o->import, &bad)) {
            if (bad)
                return bad;
        } else if ((v = cli_opt_value(argc, argv, &i, "--weight-dtype"))) {
            o->weight_auto = strcmp(v, "auto") == 0;
            if (!o->weight_auto && !storage_parse(v, &o->weight_store))
                return cli_usage("--weight-dtype takes auto, f32, bf16, f16, q8_0, q4_0, q4_k, "
                                 "q6_k, q4_k_m, f8_e4m3 or mxfp4, got '%s'", v);
            if (o->weight_auto)
                o->weight_store = ST_F32;
        } else if (builds && strcmp(a, "--no-cache") == 0) {
            o->no_cache = 1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--target"))) {
            if (!strcmp(o->cmd, "run"))
                return cli_usage("%s: kiln run's JIT compiles for this machine; --target is for "
                                 "programs built with cc (emit-c, build, check, profile, bench)", a);
            Machine mc;
            if (machine_target(&mc, v) != 0)
                return cli_usage("--target takes native, x86-64-v2, x86-64-v3 or x86-64-v4, got "
                                 "'%s'", v);
            o->target = strcmp(v, "native") ? v : NULL;
        } else if ((v = cli_opt_value(argc, argv, &i, "--machine"))) {
            Machine mc;
            if (machine_parse(&mc, v) != 0)
                return cli_usage("--machine takes default or l1d=48K,l2=2M,l3=32M,vector=64,cores=2,amx=1; got '%s'", v);
            o->machine = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--ranks"))) {
            char *end;
            long n = strtol(v, &end, 10);
            if (!*v || *end || n < 1 || n > 1 << 20)
                return cli_usage("--ranks takes a number of MPI ranks in [1, 1048576], got '%s'",
                                 v);
            o->ranks = (int)n;
        } else if ((v = cli_opt_value(argc, argv, &i, "--max-memory"))) {
            char *end;
            long long n = strtoll(v, &end, 10);
            if (!*v || *end || n <= 0)
                return cli_usage("--max-memory takes a number of bytes, got '%s'", v);
            o->max_memory = n;
        } else if (is_run && a[0] == '-') {
            o->rest[o->nrest++] = argv[i];
            if (takes_value(a) && i + 1 < argc)
                o->rest[o->nrest++] = argv[++i];
        } else if ((v = cli_opt_value(argc, argv, &i, "-o"))) {
            if (!*v)
                return cli_usage("%s needs a path", "-o");
            o->out = v;
        } else if (strcmp(a, "--lib") == 0) {
            o->lib = 1;
        } else if (!strcmp(o->cmd, "emit-c") && strcmp(a, "--jit") == 0) {
            o->jit = 1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--dump-dir"))) {
            if (!*v)
                return cli_usage("%s needs a directory", "--dump-dir");
            o->out = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--after"))) {
            if (pass_index(v) < 0)
                return cli_usage("unknown pass '%s' (see 'kiln passes')", v);
            o->dump_after = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--weights"))) {
            if (!*v)
                return cli_usage("%s needs a file", "--weights");
            if (o->weights)
                return cli_usage("option '%s' given twice", "--weights");
            o->weights = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--input"))) {
            int rc = add_input(o, v);
            if (rc)
                return rc;
        } else if ((v = cli_opt_value(argc, argv, &i, "--seed"))) {
            if (!parse_seed(v, &o->seed))
                return cli_usage("--seed takes a non-negative integer, got '%s'", v);
        } else if ((v = cli_opt_value(argc, argv, &i, "--tolerance"))) {
            if (!parse_number(v, &o->tol) || o->tol < 0)
                return cli_usage("--tolerance takes a number >= 0, got '%s'", v);
        } else if (strcmp(a, "--bisect") == 0) {
            o->bisect = 1;
        } else if (strcmp(a, "--no-cc") == 0) {
            o->no_cc = 1;
        } else if (strcmp(a, "--no-jit") == 0) {
            o->no_jit = 1;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage("unknown option '%s'", a);
        } else if (!o->model) {
            o->model = a;
        } else if (is_run) {
            o->rest[o->nrest++] = argv[i];
        } else {
            return cli_usage("unexpected argument '%s'", a);
        }
    }
    if (!o->model)
        return cli_usage("%s needs a model file", o->cmd);
    if ((o->import.tokens || o->import.max_seq || o->import.slots) &&
        !cli_is_model_source(o->model))
        return cli_usage("--tokens, --max-seq and --slots apply to a model folder or GGUF file, "
                         "not '%s'", o->model);
    return 0;
}
