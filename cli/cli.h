/* cli/cli.h: the command line's own files (main.c dispatches to these). */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include <stdio.h>

#include "frontend/import.h"
#include "runtime/kiln_rt.h"
#include "runtime/rt_gguf.h"

/* Exit statuses (kiln --help). */
enum { EXIT_INVALID = 1, EXIT_USAGE = 2, EXIT_IO = 3, EXIT_INTERNAL = 4 };

/* ---- cli.c: what every command's parsing shares ------------------------- */
/* "kiln: " fmt (one %s: arg) " (see kiln --help)" on stderr, the hint left
 * out when fmt gives its own "(see ...)"; EXIT_USAGE. */
int cli_usage(const char *fmt, const char *arg);
/* "kiln: out of memory"; EXIT_INTERNAL. */
int cli_out_of_memory(void);
/* "kiln: MESSAGE" of err; its status. Nothing said once kiln was
 * interrupted (cg_interrupted): main says that. */
int cli_report(const rt_err *err);
/* --name VALUE or --name=VALUE at argv[*i] (i advanced past a separate
 * value): the value, "" when it is missing, NULL when argv[*i] is
 * another option. */
const char *cli_opt_value(int argc, char **argv, int *i, const char *name);
/* Whether paths a and b name the same file (-o must not be the input). */
int cli_same_file(const char *a, const char *b);

/* ---- args.c: a model command's options ---------------------------------- */
typedef struct {
    const char *cmd, *model, *out, *weights;
    const char **given_names, **given_files;
    int ngiven;
    const char *stop_after, *dump_after;
    const char **disabled;
    int ndisabled;
    int lib, verbose, no_cc, no_jit, bisect, no_cache, jit;
    int64_t max_memory;             /* 0: no limit */
    Storage weight_store;           /* --weight-dtype: weights of rank >= 2 */
    int weight_auto;                /* --weight-dtype auto (the default) */
    int64_t chunk;                  /* a decoder's prefill variant: tokens a call */
    int ranks;                      /* --ranks: MPI ranks (distribute); 1 by default */
    ImportOpts import;              /* MODEL a folder or GGUF: --tokens, --max-seq, --slots */
    const char *machine;            /* --machine SPEC; NULL: detect */
    const char *target;             /* --target LEVEL; NULL: native */
    uint64_t seed;
    double tol;
    char **rest;                    /* run, profile: options for rt_main */
    int nrest;
    rt_machine figures;             /* kiln machine's, for profiles; zeros: none */
    char *dir_weights, *dir_tok;    /* MODEL a folder or GGUF: its weights, tokenizer */
    int64_t pp, tg;                 /* bench MODEL: -p P, -n N */
    int reps, threads;              /* bench MODEL: -r R, --threads T */
    const char *json;               /* bench MODEL: --json FILE */
} Opts;
/* argv (argv[0] the command) into o (zeroed by the caller): 0, or an exit
 * status with the problem said (a usage error names the option). */
int cli_parse_opts(Opts *o, int argc, char **argv);

/* kiln --help's overview (cmd NULL), or cmd's usage, on stdout: 0; -1
 * when cmd has none here (bench and machine print their own). help.c */
int cli_help(const char *cmd);

typedef struct Module Module;
/* kiln opt FILE.kir --passes a,b [-o OUT] [--machine SPEC]; kiln passes:
 * opt.c */
int cli_opt(int argc, char **argv);
int cli_passes(void);

/* kiln profile's table: the lines of a profile (rt_profile_write's, in
 * the file path) sorted by time, with their shares, to out; mc is what
 * the percentages are of (peak 0: none). 0, or an exit status with one
 * line on stderr. profile.c */
int cli_profile_table(const char *path, const char *model, const rt_machine *mc, FILE *out);

/* The program of a model (program.c): the pipeline on *m; for a decoder
 * (ir_decoder), its decode step and a prefill variant of `chunk` tokens
 * (0: the default, 64; 1: none; more than the KV cache's rows: its rows,
 * said on stderr) in one program, *m then the leader holding the other in
 * Module.variants, each variant a clone of *m as it came (ir_clone).
 * 0, or -1 with the problems in cx->d. */
typedef struct PassCtx PassCtx;
int cli_program(Module **m, PassCtx *cx, int64_t chunk, int verbose);

/* "kiln: note: ..." on stderr when what m's program holds once opened
 * (its weights and derived weights, state and intermediate arena, as
 * plan-memory counts them) is more than this machine's memory. */
void cli_memory_note(const Module *m);

/* kiln import hf DIR | gguf FILE.gguf | llama2c FILE.bin [options]: folder.c */
int cli_import(int argc, char **argv);
/* --tokens T or --max-seq S at argv[*i] (advancing i past its value)
 * into o: 1 when it was one of them (*rc: 0, or a usage status said on
 * stderr), else 0. */
int cli_import_opt(int argc, char **argv, int *i, ImportOpts *o, int *rc);
/* A model folder or GGUF file for the model commands (cli_is_model_source):
 * a DIR imported in memory as a Hugging Face folder, a GGUF file as
 * llama.cpp's; NULL with its problems printed and *status set. */
Module *cli_import_dir(Arena *a, const char *dir, const ImportOpts *o, int *status);
int cli_is_dir(const char *path);
/* A regular file that begins with GGUF's magic (rt_is_gguf). */
int cli_is_gguf(const char *path);
/* A folder or a GGUF file: a model to import (and its weights file). */
int cli_is_model_source(const char *path);
/* DIR's weights as kiln loads them (malloc'd): the index of its shards
 * when there is one, else DIR/model.safetensors; a GGUF file's are
 * itself. */
char *cli_import_weights(const char *dir);
/* The weights file at path (a folder's) against m, as imported, before it
 * is compiled: the file whole, as rt_st_open or rt_gguf_open check it
 * (every tensor's type one kiln reads, its bytes inside the file), then as rt_load_weights
 * will at run time: every weight of m there, of its declared shape, and
 * no tensor that is not one. 0, or the status with one line on stderr,
 * worded as the program would (path NULL: out of memory). */
int cli_folder_weights(const Module *m, const char *path);
/* DIR/name (malloc'd) when it is a readable file, else NULL. */
char *cli_folder_file(const char *dir, const char *name);

#endif
