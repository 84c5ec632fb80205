/* codegen/codegen.h: loop IR to C, and what builds and runs that C.
 * A table of contents, a section per file. */
#ifndef KILN_CODEGEN_H
#define KILN_CODEGEN_H

#include "ir/ir.h"
#include "runtime/kiln_rt.h"
#include "runtime/rt_gen.h"
#include "runtime/rt_gguf.h"
#include "runtime/rt_attn.h"
#include "runtime/rt_quant.h"
#include "runtime/rt_jit.h"

#include <nettle/sha2.h>
#include <spawn.h>

/* Two flavours of the same program: CG_CC for the system cc (`omp simd`
 * pragmas, a main), CG_JIT for libtcc (runtime symbols handed in by kiln,
 * rt_vec programs); parallel loops go through rt_parallel_for in both. */
typedef enum { CG_CC, CG_JIT } CgFlavour;

/* ---- the runtime's parts as C text (rt_text.c, which the Makefile
 * makes from runtime/; runtime/kiln_rt.h says what each part holds) ---- */
enum {
    CG_RT_CORE, CG_RT_GGUF, CG_RT_ATTN, CG_RT_GEN, CG_RT_QUANT, CG_RT_JIT, CG_RT_SERVE, CG_RT_MPI,
    CG_RT_PAIRS, CG_RT_NPARTS
};
typedef struct {
    const char *name;            /* its folder under runtime/: "core" */
    const char *header;          /* its public header, as C text */
    const char *body;            /* its internal headers and code; "" for
                                    the JIT's, which kiln holds */
} CgRtPart;
extern const CgRtPart cg_rt_parts[CG_RT_NPARTS];
/* runtime/core/rt_core.h, which every part's body uses: pasted once, in
 * the core's body (every program has the core); prepended to another
 * part's text for its cached object (cc.c). */
extern const char cg_rt_core_h[];

/* ---- emit.c: the whole C file --------------------------------------- */
/* The runtime parts a module's program uses, a bit (1 << CG_RT_*) each:
 * the core always; generation for a decoder of one token a call
 * (ir_decoder); GGUF's reader for such a decoder (its weights or its
 * tokenizer may be a GGUF), a program whose weights are a GGUF's, and
 * the JIT flavour; attention's when a kernel calls it (`call attn`), and in
 * the JIT flavour; the quantized part when it holds a weight so, or when
 * its weights are a GGUF's (m->folder_weights: their blocks may need
 * widening, rt_dequantize), and always in the JIT flavour (kiln's own
 * symbols); the JIT's in the JIT flavour; serving for a slotted decoder of
 * more than one slot (its batch variant), in the cc flavour; MPI's for a
 * program of several ranks (cg_ranks); the pairs part (bf16 gemms on
 * pair products) for a program holding a bf16 weight or a quantized one
 * (whose AMX path shares its machinery), and so in the JIT flavour. */
unsigned cg_rt_uses(const Module *m, CgFlavour fl);
/* The libraries a program of those parts links beyond libm and OpenMP,
 * as words each after a space: " -lmicrohttpd -lpthread" with the
 * serving part, else "" (Open MPI's come from mpicc, codegen/cc.c). */
const char *cg_rt_libs(unsigned uses);
/* The MPI ranks m's program runs on: its collectives' (1 without one);
 * above 1 the program carries the MPI part and its main is rt_mpi_main. */
int cg_ranks(const Module *m);
/* Writes the C program of a lowered module. Deterministic: the same
 * module gives the same bytes. CG_CC: one self-contained file, the
 * runtime parts it uses pasted in (static); CG_JIT: their headers only. */
void cg_emit(FILE *f, const Module *m, CgFlavour fl);
/* The public header of --lib builds (<name>.h). */
void cg_emit_header(FILE *f, const Module *m);
/* The same C as a string in the arena. */
char *cg_emit_string(const Module *m, CgFlavour fl);
/* CG_CC with the runtime declared, not pasted: the model's C alone, to
 * link with the parts' objects (cc.c: cg_rt_object). */
char *cg_emit_linked(const Module *m);

/* ---- share.c: kernels alike, one function ----------------------------- */
/* Kernels whose C differs only in the buffers they point to (a model's
 * layers; its experts' copies at open) share one function, sN(m, p),
 * over an array p of those pointers. A table of each kernel's C so
 * written, a template (kernel.c): how many kernels have it, and the N of
 * the sN printed for it (-1: not yet). */
typedef struct CgShare CgShare;
typedef struct {
    const char *text;
    int uses, n;
} CgShared;
CgShare *cg_share_new(Arena *a);
/* The entry of text, added (uses 0) when absent. */
CgShared *cg_share_find(CgShare *sh, const char *text);
/* The next template number. */
int cg_share_next(CgShare *sh);

/* ---- kernel.c: one kernel as a C function ---------------------------- */
typedef struct {
    FILE *f;
    const Module *m;
    CgFlavour fl;
    const char *model_type;      /* the handle's C type name */
    int in_parallel;             /* printing a parallel loop's body */
    int vec;                     /* innermost nests through rt_vec (JIT) */
    int open;                    /* the open program's kernels (oN), which
                                    write the derived weights */
    CgShare *share;              /* kernels alike share a function; NULL: none */
    struct CgCalls *calls;       /* rows of a call table instead of wrappers;
                                    NULL: wrappers */
    /* Set by cg_kernel for the kernel being printed: */
    const char *stem;            /* its functions' names: "k12" (k12_p0), "o3" */
    struct CgNames *names;       /* printing a template: its buffers' names;
                                    NULL: b<id> */
    const Kernel *kernel;        /* the kernel being printed */
} CgCx;
/* A template's buffers, numbered by place: the storages it points to
 * (b<i> is p[i], i < nptrs), then its local arrays as they come; and the
 * messages of its run-time checks (which name the node), p[nptrs + j]. */
typedef struct CgNames {
    const Buf **v;
    int n, cap, nptrs;
    const char **msgs;
    int nmsgs, capmsgs;
} CgNames;
/* A call table (the open program's, emit.c): a row a kernel,
 *   {oN, NULL, 0, 0}            a kernel of its own, or
 *   {NULL, sT, nrefs, at}       a shared function over the pointers that
 *                               refs[at .. at + nrefs) name,
 * a ref {'w', i} (m->w[i]), {'s', i} (m->s[i]), {'a', off} (m->arena +
 * off) or {'m', j} (msgs[j], a check's message). */
typedef struct CgCalls {
    FILE *rows, *refs, *msgs;   /* their initializers' text */
    int nrows, nrefs, nmsgs;
    int maxrefs;                /* the most refs a row has */
} CgCalls;
/* Prints k's outlined parallel bodies and the function itself:
 *   static int kN(MODEL *m)  returning an RT_* status (oN for the open
 *   program's). With cx->share, after cg_kernel_count has seen every
 *   kernel: a kernel whose C another kernel has too is a wrapper,
 *   kN(m) { void *const p[] = {its pointers}; return sT(m, p); }, and sT
 *   is printed before its first wrapper; with cx->calls, a row of that
 *   table instead (every kernel has one). */
void cg_kernel(CgCx *cx, const Kernel *k);
/* Counts k's C in cx->share (the first pass over the kernels). */
void cg_kernel_count(CgCx *cx, const Kernel *k);

/* ---- cprint.c: expressions, elements and literals as C ---------------- */
/* A string as a C literal: printable ASCII as is, everything else (and
 * " \ ?) escaped, so no name can end the literal or form a trigraph. */
void cg_print_cstring(FILE *f, const char *s);
/* An f32 constant as C: %.9g with a '.' or exponent and an f suffix. */
void cg_print_float(FILE *f, double v);
/* An expression; as an operand of an operator of precedence p
 * (ir_expr_prec; right: its right operand), parenthesised where C needs
 * it and around comparisons and logic inside comparisons and logic. */
void cg_expr(CgCx *cx, const Expr *e);
void cg_operand(CgCx *cx, const Expr *e, int p, int right);
/* A buffer's element (`b3[i0 * 64 + i1]`), its offset in its storage
 * (`i0 * 64 + i1`); a variable (`i2`, `v0`). */
void cg_access(CgCx *cx, const Buf *b, Expr *const *idx);
void cg_offset(CgCx *cx, const Buf *b, Expr *const *idx);
void cg_var(CgCx *cx, const Var *v);
/* The N of buffer b's C name bN: its id, or in a template its place
 * (CgNames; a local array numbered where it first appears). */
int cg_bname(CgCx *cx, const Buf *b);
/* How b's elements are held: a 16-bit weight's storage, or f32/i32. */
Storage cg_store(const Buf *b);

/* ---- vec.c: innermost loop nests as rt_vec programs (JIT) ------------- */
/* Prints the loop nest at s as a call of rt_vec and returns 1, or returns
 * 0, printing nothing, when it does not qualify (see vec.c). */
int cg_vec_nest(CgCx *cx, const Stmt *s, int depth);

/* ---- info.c: the model's tensors as the runtime describes them ------- */
/* Tables for rt_model (arena-allocated): inputs, outputs, weights, states
 * in module order. */
typedef struct {
    rt_tensor_info *inputs, *outputs, *weights, *states;
} CgInfos;
void cg_infos(const Module *m, CgInfos *t);

/* ---- interrupt.c: Ctrl-C, and the temporaries it must not leave ------ */
/* Handles SIGINT, SIGTERM, SIGHUP and SIGQUIT (those not ignored when kiln
 * started): while a child of cg_spawn runs, the signal is passed on to it
 * and noted; else the registered temporaries are removed and kiln dies
 * of the signal at once (interrupt.c says why). The command line calls it
 * first. */
void cg_intr_init(void);
/* The first signal caught, 0 when none: what failed after it failed
 * because of it (the child it killed), and says nothing of its own. */
int cg_interrupted(void);
/* When a signal was caught: the temporaries still registered removed,
 * "kiln: interrupted (SIGINT)" on stderr, and kiln dead of that signal
 * (the shell's 128 + signal). Only the command line calls it, last. */
void cg_intr_die(void);
/* A temporary file or directory to remove if kiln is interrupted, from
 * when it exists until cg_tmp_forget (renamed into place, or removed by
 * its maker) or cg_tmp_remove (which removes it: unlink, else rmdir). */
void cg_tmp_add(const char *path);
void cg_tmp_forget(const char *path);
void cg_tmp_remove(const char *path);
/* Runs the program at path with argv and file actions fa (may be NULL),
 * in a process group of its own when group (a shell and the compilers
 * it starts: a signal reaches them all), and waits for it: 0 with its
 * wait status in *status, or an errno value when it did not start (EINTR:
 * kiln was interrupted before). */
int cg_spawn(const char *path, char *const *argv, const posix_spawn_file_actions_t *fa, int group,
             int *status);

/* ---- cc.c: the system cc --------------------------------------------- */
/* `$CC` or "cc", and the flags every build uses. */
const char *cg_cc(void);
#define CG_CFLAGS "-O3 -march=native -fopenmp"
/* The flags m's program builds with: CG_CFLAGS, -march=m->target for a
 * program built to run elsewhere (--target). */
const char *cg_cflags(Arena *a, const Module *m);
/* How a build goes. */
typedef struct {
    int quiet;                   /* no progress or timing on stderr */
    int cache;                   /* from the build cache when there; kept there */
    int anew;                    /* with cache: the model's C compiled anew, neither
                                    looked up nor kept; its runtime parts still
                                    the cache's objects (kiln check) */
    const char *cache_dir;       /* that cache: NULL, the user's (cg_cache_dir) */
    const rt_machine *machine;   /* figures for profiles' percentages
                                    (-DKILN_MACHINE); NULL or zeros: none */
} CgBuild;
/* Builds an executable at out (written to a temporary beside it, then
 * renamed) with cg_cflags, the machine's figures, then
 * $KILN_CFLAGS_EXTRA. From the cache, "(cache hit)" ends the timing line.
 * Returns an RT_* status with err set. */
int cg_build_exe(const Module *m, const char *out, const CgBuild *b, rt_err *err);
/* With b->cache: the objects of the runtime parts m's executable links
 * compiled into the cache where missing, as cg_build_exe would (so that
 * a build timed after it compiles the model alone). 0, or an RT_* status
 * with err set; without a cache, 0 and nothing done. */
int cg_build_parts(const Module *m, const CgBuild *b, rt_err *err);
/* Writes text to path atomically (a temporary beside it, then rename);
 * a link's target is replaced, a device or pipe written through. */
int cg_write_file(const char *path, const char *text, rt_err *err);
/* A whole file (any kind: a pipe, /proc), NUL-terminated and malloc'd,
 * its length in *len (unless NULL); NULL with errno set when unreadable. */
char *cg_read_file(const char *path, size_t *len);
/* Builds DIR/lib<name>.so, DIR/lib<name>.a and DIR/<name>.h (no machine
 * figures: a library has no profiles). */
int cg_build_lib(const Module *m, const char *dir, const CgBuild *b, rt_err *err);

/* ---- cache.c: the build cache ---------------------------------------- */
/* SHA-256 (nettle's), fed piece by piece; hex is 64 digits and a NUL.
 * cg_sha256_hex ends the hash: init again before another. */
typedef struct {
    struct sha256_ctx ctx;
} CgSha256;
void cg_sha256_init(CgSha256 *s);
void cg_sha256_add(CgSha256 *s, const void *data, size_t n);
void cg_sha256_hex(CgSha256 *s, char hex[65]);
/* $XDG_CACHE_HOME/kiln/builds, else ~/.cache/kiln/builds; NULL when
 * neither variable is set (no cache). */
const char *cg_cache_dir(Arena *a);
#define CG_CACHE_MAX_BYTES ((int64_t)1 << 30)
#define CG_CACHE_MAX_ENTRIES 200
/* Entry key (64 hex digits) of dir: its files names[i] copied to
 * dests[i], each checked against the entry's manifest (size, SHA-256).
 * 1: a hit; 0: a miss; -1: the entry was damaged and is removed (a miss
 * too). */
int cg_cache_get(Arena *a, const char *dir, const char *key, int n, const char *const *names,
                 const char *const *dests);
/* Keeps copies of the files srcs[i] as entry key's names[i] (made whole,
 * then renamed into place), then trims the cache to its bounds. Returns
 * 0, or an RT_* status with err set: the build stands, only uncached. */
int cg_cache_put(Arena *a, const char *dir, const char *key, int n, const char *const *names,
                 const char *const *srcs, rt_err *err);
/* Removes the least recently used entries while there are more than
 * max_entries or they hold more than max_bytes (the newest stays), and
 * temporaries over an hour old. */
void cg_cache_trim(Arena *a, const char *dir, int64_t max_bytes, int max_entries);

/* ---- jit.c: libtcc in memory ----------------------------------------- */
typedef struct CgJit CgJit;
/* Compiles the JIT flavour in memory; NULL with err set on failure. */
CgJit *cg_jit_new(const Module *m, rt_err *err);
const rt_model *cg_jit_model(const CgJit *j);
double cg_jit_seconds(const CgJit *j);           /* compile time */
void cg_jit_free(CgJit *j);

/* ---- check.c: reference vs cc build vs JIT ---------------------------- */
typedef struct {
    const char *weights;               /* safetensors file; NULL: inits */
    const char *const *given_names;    /* --input NAME=FILE, split at the first */
    const char *const *given_files;    /* '='; bound after the longest input name */
    int ngiven;
    uint64_t seed;                     /* for inputs not given */
    double tol;                        /* relative to the reference's max |x| */
    int skip_cc, skip_jit;
    int quiet;                         /* no progress on stderr */
    int weight_store;                  /* --weight-dtype (RT_F32, RT_BF16, RT_F16):
                                          for a module not lowered yet (--bisect) */
    const Module *whole;               /* a program of several ranks: the graph
                                          before distribute (NULL: not compared) */
} CheckOpts;
/* Prints a table of errors per output to out. Returns 0 when every output
 * is within tolerance, 1 when one is not (err says which), else the RT_*
 * status of what failed. */
int cg_check(const Module *m, const CheckOpts *o, FILE *out, rt_err *err);

/* A session for comparing many stages of one module with one reference
 * run: weights and inputs loaded as by cg_check, the reference run once. */
typedef struct CgCheck CgCheck;
typedef struct {
    int output;                        /* first output off; -1: none */
    int64_t element;                   /* its first element off (flat) */
    double got, want, refmax;
    double worst_rel;                  /* largest relative error, all outputs */
} CgMiss;
CgCheck *cg_check_begin(const Module *m, const CheckOpts *o, rt_err *err);
/* JIT-compiles m as it stands, runs it and compares: 0 within tolerance,
 * 1 off (miss says where), else the RT_* status of what failed. */
int cg_check_stage(CgCheck *c, const Module *m, CgMiss *miss, rt_err *err);
void cg_check_end(CgCheck *c);

#endif
