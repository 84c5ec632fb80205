/* passes/fuse.h: the fuse pass's own header, between its two files:
 * fuse.c decides (which pairs of kernels fuse, and why not), fuse_nest.c
 * rewrites loop nests (chains, rows, appending one nest to another,
 * contracting intermediates). Terms are defined atop fuse.c. */
#ifndef KILN_FUSE_H
#define KILN_FUSE_H

#include "passes.h"

#define FUSE_MAXD KILN_MAX_RANK   /* deepest fusion: a buffer's rank */
#define FUSE_MAX_STMTS 256        /* largest fused body, in statements */
#define FUSE_MAX_ZIP 8            /* accumulators of merged siblings: tile's gemm nest */

enum { FUSE_RD = 1, FUSE_WR = 2 }; /* how a kernel touches a storage */

/* k's chain, its perfect outer nest: L[0] is k's only statement, L[j+1]
 * the only statement of L[j]'s body. Returns its length. */
int fuse_chain(Kernel *k, Stmt **L);
/* The block below the d-th loop of k's chain (k's body for 0). */
Block *fuse_below(Kernel *k, Stmt **L, int d);
/* Structural equality of expressions; variable vx[i] of x's side stands
 * for vy[i] of y's (n pairs). */
int fuse_same_expr(const Expr *x, const Expr *y, Var **vx, Var **vy, int n);
/* Whether the first d loops of p's and c's chains run alike. */
int fuse_same_rows(Kernel *p, Kernel *c, int d);
/* FUSE_RD | FUSE_WR per storage id (kernel-local arrays left out). */
char *fuse_touch(Arena *a, Prog *p, Kernel *k);

typedef struct {
    int check;                    /* has run-time checks */
    int call;                     /* has micro-kernel calls (tile ran) */
    int reduce;                   /* has a reduction loop */
    Buf *state;                   /* a state it writes, or NULL */
} FuseTraits;
FuseTraits fuse_traits(Kernel *k);

/* The depth d at which k accesses storage s by rows: every load and store
 * goes through one Buf (*via) whose first d indices are the variables of
 * the chain's first d loops (or the one value of a loop run once). 0 when
 * it does not. */
int fuse_row_depth(Kernel *k, Buf *s, Buf **via);
/* Bytes of the storages c loads at indices free of its first d loops'
 * variables (read again in every row); *which names them ("b3, b4"). */
int64_t fuse_row_invariant(Arena *a, Prog *p, Kernel *c, int d, const char **which);

/* Appends c's statements below its d-th loop to dst's below its d-th
 * loop (their first d loops alike), c's loop variables mapped to dst's;
 * with `zipping`, interleaves them with dst's instead, each side's order
 * kept and loops of equal bounds merged (the sides must be independent).
 * Adds c's nodes and notes to dst; c itself is left to the caller.
 * Returns the number of loops merged. */
int fuse_append(Arena *a, Prog *p, Kernel *dst, Kernel *c, int d, int zipping);

/* Contraction of an intermediate s that only kernel k touches: its one
 * store, read afterwards in its block at the same index, becomes a let
 * (or its value); returns 1 when done. */
int fuse_to_register(Arena *a, Kernel *k, Buf *s);
/* ... or its rows at depth d become a local row below the chain's d-th
 * loop, when one takes at most `limit` bytes; returns its bytes, or 0. */
int64_t fuse_to_local_row(Arena *a, Prog *p, Kernel *k, Buf *s, int64_t limit);

#endif
