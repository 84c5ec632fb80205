/* frontend/fe.h: the frontend's internals, a section per file. Included by
 * the frontend/ sources only; everyone else includes frontend.h.
 *
 * The frontend walks the JSON once, in the order of docs/model-format.md
 * (format, name, inputs, weights, state, nodes, outputs) and in file order
 * within a section, so messages come out in a stable order. Every check
 * reports with diag() and carries on; a value whose definition failed is
 * remembered as failed, and its users skip inference silently, so one
 * mistake gives one line. */
#ifndef KILN_FE_H
#define KILN_FE_H

#include <jansson.h>

#include "frontend.h"

#define FE_FORMAT "kiln/1"
#define FE_MAX_MODEL_NAME 64           /* characters of the model's name */
#define FE_MAX_FILE ((size_t)256 << 20)  /* bytes of a model file */
#define FE_QUOTE_MAX 60                /* bytes of a user string in a message */

/* What a name stands for: the node at hand is defining it (a use is "not
 * defined above this node"), a usable value, a definition that failed
 * (uses are skipped silently), a topk node's own name (a use must pick one
 * of its two results, alt[0] or alt[1]), or nothing yet, reported once
 * (later uses are quiet; a definition further down may still take it). */
typedef enum { SYM_PENDING, SYM_VALUE, SYM_FAILED, SYM_MULTI, SYM_UNDEF } SymKind;

typedef struct {
    const char *name;             /* arena copy */
    const char *where;            /* defining element: "inputs[0]", "nodes[3]";
                                     NULL for SYM_UNDEF */
    SymKind kind;
    Node *n;                      /* SYM_VALUE */
    const char *alt[2];           /* SYM_MULTI: the names of its results */
    const char *listed;           /* the outputs entry that lists it, if any */
} Sym;

typedef struct {
    Arena *a;
    Module *m;
    Diags *d;
    Sym **tab;                    /* open addressing, cap a power of two */
    size_t cap, count;
    int broken;                   /* a section is missing or malformed, so
                                     undefined names are not reported */
} FeCx;

/* ---- util.c: JSON paths, quoting, typed reads, names ------------------ */
const char *fe_at(FeCx *cx, const char *base, size_t i);        /* "base[i]" */
const char *fe_dot(FeCx *cx, const char *base, const char *key); /* "base.key" */
/* A user's string for a message: control bytes and '\' escaped, cut after
 * FE_QUOTE_MAX bytes (on a character boundary) with "...". */
const char *fe_quote(FeCx *cx, const char *s);
/* Text with control bytes escaped, never cut (jansson's messages). */
const char *fe_escape(FeCx *cx, const char *s);
/* A JSON value as a message shows it: 3, 2.0, "abc", true, an array;
 * "nothing" for NULL (an absent value). */
const char *fe_got(FeCx *cx, json_t *j);
/* Reports "WANT, got VALUE" at where; returns -1. */
int fe_want(FeCx *cx, const char *where, json_t *j, const char *want);
/* obj[key]; NULL when absent, reported "missing" at where.key if required. */
json_t *fe_get(FeCx *cx, json_t *obj, const char *where, const char *key,
               int required);
/* Reports every key of obj not in keys (NULL-terminated), in file order,
 * as "unknown key 'k'" at where; returns how many. */
int fe_keys(FeCx *cx, json_t *obj, const char *where, const char *const *keys);
/* A JSON integer into *v, else "SUBJECT must be an integer, got ...". */
int fe_int(FeCx *cx, json_t *j, const char *where, const char *subject,
           int64_t *v);
/* A JSON number whose magnitude fits in f32 (at most FLT_MAX). */
int fe_is_f32(json_t *j);
/* Such a number into *v, else "SUBJECT must be a number, got ..." or
 * "SUBJECT 1e+39 does not fit in f32". */
int fe_f32(FeCx *cx, json_t *j, const char *where, const char *subject,
           double *v);

/* The symbol table: every name of the file, unique. */
Sym *fe_sym(FeCx *cx, const char *name);
/* Checks a name (a non-empty string, no control characters, at most
 * KILN_MAX_NAME bytes, not defined before) at where and enters it as
 * SYM_PENDING, defined by the element def; NULL after reporting. */
Sym *fe_name(FeCx *cx, json_t *j, const char *where, const char *def);
/* Ends a definition: a value when n, else failed. s may be NULL. */
void fe_define(Sym *s, Node *n);
/* The value a name stands for, used at where: 0 with *n set; -1 after
 * reporting (undef is the message for an unknown name, e.g. "is not
 * defined"); 1 when there is nothing to report again (its definition
 * failed, or it was already reported undefined). */
int fe_use(FeCx *cx, const char *name, const char *where, const char *undef,
           Node **n);

/* ---- jansson.c: jansson on kiln's allocator ------------------------ */
/* json_loadb (duplicate keys refused, any value at the top) with every
 * block from ir_malloc; out of memory takes arena_oom(a) with nothing of
 * jansson's left allocated. */
json_t *fe_json_load(Arena *a, const char *text, size_t len, json_error_t *err);

/* ---- decl.c: inputs, weights, state ---------------------------------- */
/* section := [decl, ...]; op is OP_INPUT, OP_WEIGHT or OP_STATE. */
void fe_decls(FeCx *cx, json_t *j, const char *section, OpKind op);

/* ---- node.c: the nodes ----------------------------------------------- */
void fe_nodes(FeCx *cx, json_t *j);

/* ---- attrs.c: a node's attributes ------------------------------------ */
/* Fills n->attrs (already at their defaults) from j (NULL: none) by the
 * schema of n->op; where is the node's path. Returns 0 when valid. */
int fe_attrs(FeCx *cx, json_t *j, const char *where, Node *n);

#endif
