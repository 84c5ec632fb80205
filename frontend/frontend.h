/* frontend/frontend.h: model files (docs/model-format.md) to graph IR.
 *
 * Contract: a file that breaks docs/model-format.md gives NULL and one line per
 * problem in d, "FILE: JSON-PATH: message", in a stable order; a file that
 * keeps it gives a Module whose every node has inferred its shape, in node
 * order inputs, weights, state, then the nodes of the file (a constant just
 * before its user). The caller initialises d (diag_init(d, a, file)); the
 * Module, its names and its data live in a. */
#ifndef KILN_FRONTEND_H
#define KILN_FRONTEND_H

#include "ir/ir.h"

/* Loads a model file: parse, validate, infer shapes. Returns the module,
 * or NULL when any problem was found (every problem is in d, one line each
 * "FILE: JSON-PATH: message"). I/O failure (cannot open or read): one line
 * "FILE: cannot read: why", *io = 1; otherwise *io = 0 (a file over
 * 256 MiB is refused as bad input). io may be NULL. Out of memory, here
 * or in jansson, takes arena_oom(a), leaving nothing allocated but the
 * arena. */
Module *fe_load(Arena *a, const char *path, Diags *d, int *io);
/* The same for text already in memory; file names the model in messages
 * and becomes m->file. */
Module *fe_parse(Arena *a, const char *file, const char *text, size_t len, Diags *d);

#endif
