/* passes/passes.h: the pass pipeline, a table of contents.
 * Each pass is one file with one entry point `int pass_x(Module *, PassCtx *)`
 * returning 1 when it changed the IR, 0 when not, -1 on failure (after
 * reporting with diag). pipeline.c lists them in DESIGN.md order. */
#ifndef KILN_PASSES_H
#define KILN_PASSES_H

#include "ir/ir.h"

typedef enum { LEVEL_GRAPH, LEVEL_LOWER, LEVEL_LOOP, LEVEL_C } PassLevel;

typedef struct PassCtx PassCtx;
struct PassCtx {
    Diags *d;
    const char *stop_after;        /* last pass to run; NULL: all */
    const char *const *disabled;   /* passes not to run */
    int ndisabled;
    int verify;                    /* ir_verify_* after every pass */
    /* Called after every stage (frontend included) with its index in
     * pass_table and whether it changed anything (-1: disabled). */
    void (*after)(PassCtx *cx, Module *m, int pass, int changed);
    void *user;
};

typedef struct {
    const char *name;              /* on the command line and in dump names */
    PassLevel level;
    int required;                  /* cannot be disabled */
    int (*run)(Module *m, PassCtx *cx);
    const char *what;              /* one line for `kiln passes` */
} PassDesc;

extern const PassDesc pass_table[];
extern const int pass_count;
/* Index of a pass by name; -1 when there is none. */
int pass_index(const char *name);
/* Runs every pass after `frontend` up to `codegen` (exclusive), honouring
 * stop_after and disabled. Returns 0, or -1 when a pass failed. */
int pass_pipeline(Module *m, PassCtx *cx);

/* ---- the passes, one file each ---------------------------------------- */
int pass_lower(Module *m, PassCtx *cx);          /* lower.c */

#endif
