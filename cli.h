/* cli.h: the command line's own files (main.c dispatches to these). */
#ifndef KILN_CLI_H
#define KILN_CLI_H

#include <stdio.h>

#include "frontend/import.h"
#include "runtime/kiln_rt.h"

/* kiln bench [MODEL ...] [options]: bench.c */
int cli_bench(int argc, char **argv);
/* kiln machine [--refresh]: bench.c */
int cli_machine(int argc, char **argv);
/* The figures `kiln machine` cached for this CPU, without measuring:
 * 0, or -1 when there are none. */
int cli_machine_figures(rt_machine *mc);
/* kiln profile's table: the lines of a profile (rt_profile_write's, in
 * the file path) sorted by time, with their shares, to out; mc is what
 * the percentages are of (peak 0: none). 0, or an exit status with one
 * line on stderr. profile.c */
int cli_profile_table(const char *path, const char *model, const rt_machine *mc, FILE *out);

/* The program of a model (program.c): the pipeline on *m; for a decoder
 * (ir_decoder), its decode step and a prefill variant of `chunk` tokens
 * (<= 1: none) in one program, *m then the leader holding the other in
 * Module.variants. reload gives a fresh copy of the model (NULL on
 * failure, said). 0, or -1 with the problems in cx->d. */
typedef struct PassCtx PassCtx;
typedef struct Module Module;
int cli_program(Module **m, PassCtx *cx, int64_t chunk, int verbose,
                Module *(*reload)(void *user), void *user);

/* kiln import hf DIR | llama2c FILE.bin [options]: import.c */
int cli_import(int argc, char **argv);
/* --tokens T or --max-seq S at argv[*i] (advancing i past its value)
 * into o: 1 when it was one of them (*rc: 0, or a usage status said on
 * stderr), else 0. */
int cli_import_opt(int argc, char **argv, int *i, ImportOpts *o, int *rc);
/* A model directory for the model commands: DIR imported in memory as a
 * Hugging Face folder; NULL with its problems printed and *status set. */
Module *cli_import_dir(Arena *a, const char *dir, const ImportOpts *o, int *status);
int cli_is_dir(const char *path);
/* DIR's weights as kiln loads them (malloc'd): the index of its shards
 * when there is one, else DIR/model.safetensors. */
char *cli_import_weights(const char *dir);

#endif
