/* tests/unit/testlib.h: what the cmocka unit tests share: small graphs
 * built by hand, assertions on shape inference, the reference and the
 * lowered loop IR, the libtcc JIT build of a module, and scratch files.
 * Include after cmocka.h. The assertions fail the calling test. */
#ifndef KILN_TESTLIB_H
#define KILN_TESTLIB_H

#include "codegen/codegen.h"
#include "ir/ir.h"

/* A shape (or any int list) as a count and an array: TL_DIMS(2, 3) is
 * 2, (int64_t[]){2, 3}. An empty list is written 0, NULL. */
#define TL_DIMS(...)                                                                               \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

/* ---- building graphs ------------------------------------------------- */

/* A fresh module named "t" in a fresh arena (tl_free frees both). */
Module *tl_module(void);
void tl_free(Module *m);
/* Leaves named `name` (also their JSON path), of the given shape. */
Node *tl_input(Module *m, const char *name, DType t, int rank, const int64_t *dims);
Node *tl_weight(Module *m, const char *name, int rank, const int64_t *dims);
Node *tl_state(Module *m, const char *name, int rank, const int64_t *dims);
Node *tl_const(Module *m, double v);
/* An op node with nin operands (attrs at their defaults, named `name`,
 * JSON path "nodes[ID]"). */
Node *tl_op(Module *m, OpKind op, const char *name, int nin, ...);
/* Attributes as a model file gives them (marked given). */
void tl_attr_i(Node *n, const char *attr, int64_t v);
void tl_attr_f(Node *n, const char *attr, double v);
void tl_attr_ints(Module *m, Node *n, const char *attr, int count, const int64_t *v);
/* Marks outputs and renumbers (after all nodes are added). */
void tl_outputs(Module *m, int nout, ...);

/* ---- shape inference ------------------------------------------------- */

/* Runs n's infer; returns the number of problems reported; the first
 * message (without the "FILE: " prefix) is copied to msg when given. */
int tl_infer(Module *m, Node *n, char *msg, size_t msglen);
/* n infers without a problem to the type `want`, e.g. "f32[2,3]"; any
 * type when want is NULL. */
void tl_infer_ok(Module *m, Node *n, const char *want);
/* n is refused with exactly `count` problems, the first being `want`
 * (JSON path included). */
void tl_infer_err(Module *m, Node *n, int count, const char *want);

/* ---- the reference --------------------------------------------------- */

/* Runs the reference once. Data for inputs/weights/states in module order
 * as arrays of float* or int32_t* (by dtype); outputs get malloc'd copies
 * in out[i] (free them). Returns ref_run's status; err gets the message. */
int tl_ref(Module *m, void **in, void **w, void **st, void **out,
           char *err, size_t errlen);
/* tl_ref, which must succeed. */
void tl_ref_ok(Module *m, void **in, void **w, void **st, void **out);
/* tl_ref, which must fail with exactly `want` (outputs freed). */
void tl_ref_fails(Module *m, void **in, void **w, void **st, const char *want);
/* y, the only output of m, infers to `type` (any when NULL); its
 * reference values are `want` (count of them, tl_assert_near) and the JIT
 * build agrees (tl_check, within 1e-6). Frees m. */
void tl_values(Module *m, Node *y, const char *type, void **in, void **w, const float *want,
               int count);
/* Element-wise: |got - want| <= 1e-6 |want| + 1e-7. */
void tl_assert_near(const float *got, const float *want, int count);
/* Every |got - want| within 1e-5 of the largest |want|. */
void tl_assert_close(const float *got, const float *want, int count);

/* ---- pseudo-random data (the same on every machine; malloc'd) -------- */

/* count values uniform in [-1, 1) from seed (a 64-bit LCG). */
float *tl_random(int64_t count, uint64_t seed);
/* count values in [-2, 2) from a 32-bit LCG whose state *seed carries on
 * across calls; rounded to integers when `ties`, so that equal values
 * are common. */
float *tl_fill(int64_t count, unsigned *seed, int ties);

/* ---- printed IR ------------------------------------------------------ */

/* The graph IR / loop IR of m as ir_print_graph / ir_print_prog print it
 * (malloc'd). */
char *tl_graph_text(const Module *m);
char *tl_prog_text(const Module *m);
/* n lowered alone into a fresh loop program of m, printed (malloc'd),
 * its kernel lines without their cost comments ("  # 6 FLOP, ..."): op
 * tests pin the loop nests, test_ir.c the costs. */
char *tl_lowered(Module *m, Node *n);
/* text holds `part` somewhere. */
void tl_assert_has(const char *text, const char *part);
/* The number (from 0) of text's first line that is `line` after its
 * indentation; fails when there is none. */
int tl_has_line(const char *text, const char *line);
/* The head of a .kir module for kernel tests: x f32[8,64] in, y = exp(x)
 * out; the program's buffers b0 (x), b1 (y), b2 a temp of 600 floats, b3
 * a local f32[64]; then "kernel k0 t (%1)", whose body follows, indented
 * one level below it. */
extern const char tl_exp_kir_head[];

/* ---- the JIT build --------------------------------------------------- */

/* Lowers m (unless lowered already), compiles it with libtcc, runs it
 * once on the same data as tl_ref (weights become inline init data;
 * states start at zero), and compares every output with the reference:
 * f32 within tol relative to the reference's largest magnitude, i32
 * exactly. Fails naming the first output that differs. */
void tl_check(Module *m, void **in, void **w, double tol);

/* A JIT build of a module, open: successive runs share its states, as
 * calls of a generated program do. */
typedef struct {
    CgJit *j;
    const rt_model *md;
    void *h;
} TlJit;
/* Lowers m unless it is lowered already, compiles it and opens it with
 * every weight from its init. */
void tl_jit_open(TlJit *jt, Module *m);
void tl_jit_close(TlJit *jt);
/* One run that fails with RT_EINVAL and exactly the message `want`. */
void tl_jit_fails(TlJit *jt, void **in, const char *want);

/* ---- scratch files --------------------------------------------------- */

/* cmocka group setup and teardown: a fresh directory /tmp/kiln-unit-XXXXXX,
 * removed with everything in it at the end. */
int tl_tmp_setup(void **state);
int tl_tmp_teardown(void **state);
const char *tl_tmp_dir(void);
/* tl_tmp_dir()/name, in one of four static buffers used in turn. */
const char *tl_tmp_path(const char *name);
/* Writes n bytes of data to path (replacing it). */
void tl_put_file(const char *path, const void *data, size_t n);
/* The whole file, NUL-terminated, malloc'd; its size in *n. */
char *tl_get_file(const char *path, size_t *n);

/* Skips the running cmocka test unless cond, saying why (a machine
 * without what the test needs: never a silent pass). */
#define TL_NEED(cond, why)                                                   \
    do {                                                                     \
        if (!(cond)) {                                                       \
            print_message("%s: skipped\n", why);                             \
            skip();                                                          \
        }                                                                    \
    } while (0)

#endif
