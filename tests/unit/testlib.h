/* tests/unit/testlib.h: building small graphs by hand for unit tests, and
 * running the reference on them. Include after cmocka.h. */
#ifndef KILN_TESTLIB_H
#define KILN_TESTLIB_H

#include "ir/ir.h"

/* A fresh module named "t" in a fresh arena (tl_free frees both). */
Module *tl_module(void);
void tl_free(Module *m);
/* Leaves; dims given as rank values. */
Node *tl_input(Module *m, const char *name, DType t, int rank, ...);
Node *tl_weight(Module *m, const char *name, int rank, ...);
Node *tl_state(Module *m, const char *name, int rank, ...);
Node *tl_const(Module *m, double v);
/* An op node with nin operands (attrs at their defaults, named `name`). */
Node *tl_op(Module *m, OpKind op, const char *name, int nin, ...);
void tl_attr_i(Node *n, const char *attr, int64_t v);
void tl_attr_f(Node *n, const char *attr, double v);
void tl_attr_ints(Module *m, Node *n, const char *attr, int count, ...);
/* Runs n's infer; returns the number of problems reported; the first
 * message (without the "FILE: " prefix) is copied to msg when given. */
int tl_infer(Module *m, Node *n, char *msg, size_t msglen);
/* Marks outputs and renumbers (after all nodes are added). */
void tl_outputs(Module *m, int nout, ...);
/* Runs the reference once. Data for inputs/weights/states in module order
 * as arrays of float* or int32_t* (by dtype); outputs get malloc'd copies
 * in out[i] (free them). Returns ref_run's status; err gets the message. */
int tl_ref(Module *m, void **in, void **w, void **st, void **out,
           char *err, size_t errlen);

/* Lowers m, compiles it with libtcc, runs it once on the same data as
 * tl_ref (weights become inline init data; states start at zero), and
 * compares every output with the reference: f32 within tol relative to
 * the reference's largest magnitude, i32 exactly. Returns 0 when all
 * agree; otherwise prints the first difference and returns -1. */
int tl_check(Module *m, void **in, void **w, double tol);

#endif
