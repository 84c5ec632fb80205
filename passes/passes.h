/* passes/passes.h: the pass pipeline, a table of contents.
 * Each pass is one file with one entry point `int pass_x(Module *, PassCtx *)`
 * returning 1 when it changed the IR, 0 when not, -1 on failure (after
 * reporting with diag). pipeline.c lists them in docs/design.md order. */
#ifndef KILN_PASSES_H
#define KILN_PASSES_H

#include "ir/ir.h"

typedef enum { LEVEL_GRAPH, LEVEL_LOWER, LEVEL_LOOP, LEVEL_C } PassLevel;

/* What the tile and parallelize passes size their work by. Detected from
 * /sys at build time (machine.c), overridable; fixed in golden tests. */
typedef struct {
    int64_t l1d, l2, l3;           /* data cache bytes per core (l3: shared) */
    int vector_bytes;              /* 64 with AVX-512, 32 with AVX2 */
    int cores;
    int amx;                       /* 1: bf16 pair products in hardware, AMX-BF16 tiles
                                      or AVX512-BF16 (bf16 gemms of 16 rows or more) */
} Machine;
/* The machine kiln runs on; fields it cannot read keep portable defaults
 * (32 KiB, 1 MiB, 8 MiB, 32-byte vectors, 1 core). */
void machine_detect(Machine *mc);
/* The vectors of x86-64 level `target` ("x86-64-v2": 16 bytes, "-v3":
 * 32, "-v4": 64), for a program built to run elsewhere (--target);
 * "native" leaves mc as detected. Returns 0, or -1 for another name. */
int machine_target(Machine *mc, const char *target);
/* Fixed figures for golden tests and reproducible dumps. */
void machine_default(Machine *mc);
/* Overrides from "l1d=48K,l2=2M,l3=32M,vector=64,cores=2,amx=1" (any subset;
 * K and M suffixes), or "default" for machine_default's figures. Returns
 * 0, or -1 for a malformed spec. */
int machine_parse(Machine *mc, const char *spec);

typedef struct PassCtx PassCtx;
struct PassCtx {
    Machine machine;
    Diags *d;
    const char *stop_after;        /* last pass to run; NULL: all */
    const char *const *disabled;   /* passes not to run */
    int ndisabled;
    int verify;                    /* ir_verify_* after every pass */
    /* Called after every stage (frontend included) with its index in
     * pass_table and whether it changed anything (-1: disabled). */
    void (*after)(PassCtx *cx, Module *m, int pass, int changed);
    void *user;
    int64_t max_memory;            /* plan-memory fails above it; 0: no limit */
    /* Weight layouts another shape variant of the program chose, which
     * tile must keep (variants.c), by ir_held_index (weights, then
     * derived weights): a packed weight's panel width, -1 for one kept as
     * it is (npanels of them); NULL: tile chooses. */
    const int64_t *panels;
    int npanels;
    /* --weight-dtype: how lower stores every weight of rank >= 2 (the
     * matrices, tables and experts a run streams); ST_F32: as f32.
     * weight_stores (auto: as the weights file stores each), by weight
     * index, replaces it when not NULL (distribute, which drops the
     * experts other ranks hold, points it at the stores of those left). */
    Storage weight_store;
    const Storage *weight_stores;
    /* --ranks: MPI ranks the program runs on (distribute); 0 or 1: one. */
    int ranks;
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

/* ---- the passes, one file each, in pipeline order ---------------------- */
int pass_simplify(Module *m, PassCtx *cx);       /* simplify.c */
int pass_distribute(Module *m, PassCtx *cx);     /* distribute.c */
int pass_lower(Module *m, PassCtx *cx);          /* lower.c */
/* How lower holds weight w (rank >= 2) of m when --weight-dtype asks for
 * st: q4_k_m's choice for w (q4_k or q6_k, as llama.cpp's Q4_K_M), then,
 * when w's rows (its last dim) are no multiple of that type's block, the
 * nearest that fits, as llama.cpp falls back: q4_k to q4_0 (llama.cpp's
 * q5_0, which kiln lacks), q6_k to q8_0, and to f16 when 32 does not
 * divide a row. *want: the type before any fallback. */
Storage lower_weight_store(const Module *m, const Node *w, Storage st, Storage *want);
int pass_canonicalize_memrefs(Module *m, PassCtx *cx); /* canonicalize.c */
int pass_hoist_weights(Module *m, PassCtx *cx);  /* hoist.c */
int pass_fuse(Module *m, PassCtx *cx);           /* fuse.c */
int pass_tile(Module *m, PassCtx *cx);           /* tile.c */
int pass_parallelize(Module *m, PassCtx *cx);    /* parallelize.c */
int pass_plan_memory(Module *m, PassCtx *cx);    /* plan_memory.c */

/* ---- variants.c: the pipeline over a program's shape variants ---------- */
/* Runs the pipeline on v[0..n), variants of one model that declare the
 * same weights and state (a decoder at T = 1 first, then at other T), so
 * that every weight ends in the same layout in all: v[0] leads, the
 * others keep its choices, and a weight one of them cannot pack stays
 * unpacked in all; for that the variants are made again by fresh(user,
 * i) (NULL after reporting in cx->d: failure) into v[i] and compiled
 * again. Returns 0, or -1 after reporting in cx->d. */
int pass_pipeline_variants(Module **v, int n, PassCtx *cx, Module *(*fresh)(void *user, int i),
                           void *user);

#endif
