/* passes/tile.h: the tile pass's own header, between its two files:
 * tile.c (the pass: blocking, jamming and lane splits of the loops that
 * stay loops) and tile_gemm.c (matmul nests into micro-kernel calls,
 * their weights packed at load). */
#ifndef KILN_TILE_H
#define KILN_TILE_H

#include "passes.h"

#define TILE_NOTE_VARS 3

/* A note waiting for renumbering: '@' in text stands for vars[i]. */
typedef struct {
    const char *text;
    const Var *vars[TILE_NOTE_VARS];
} Pending;

typedef struct {
    Pending *v;
    int n, cap;
    int changed;                         /* the kernel was rewritten */
} KernelNotes;

typedef struct {
    Arena *a;
    const Module *m;
    Prog *p;
    Kernel *k;                           /* the kernel being rewritten */
    int V, L, R;                         /* lanes per vector, per accumulator; rows */
    int accs;                            /* vector registers kept for accumulators */
    int accs4;                           /* the same for rows of 4 vectors (tile_gemm.c) */
    int64_t l1, l2, cores;
    int amx;                             /* Machine.amx */
    KernelNotes *kn;                     /* by kernel id */
    const int64_t *panels;               /* PassCtx.panels: imposed layouts */
    int npanels;
} Tiler;

/* A note t->k gets once its variables are renumbered: "tile: " and fmt,
 * each '@' standing for the next of v0, v1, v2. */
void tile_note(Tiler *t, const Var *v0, const Var *v1, const Var *v2, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static inline int tile_const_loop(const Stmt *s)
{
    return s->kind == S_LOOP && s->lo->kind == E_INT && s->hi->kind == E_INT &&
           s->hi->i > s->lo->i;
}

static inline int64_t tile_trip(const Stmt *s) { return s->hi->i - s->lo->i; }

/* "384 KiB", "1 MiB" in the arena. */
const char *tile_kib(Tiler *t, int64_t bytes);

/* tile_gemm.c: every matmul nest of the program that can be becomes calls
 * of the gemm micro-kernel (weights packed in panels where they must be),
 * before tile.c sees the kernels; the others are left for tile.c. */
void tile_gemms(Tiler *t);

#endif
