/* ir/ir.h: kiln's intermediate representation, a table of contents.
 *
 * Two levels (docs/design.md):
 *   graph IR  tensors with static shapes, one Node per value, ops from one
 *             table (ops.def); the reference interpreter runs it.
 *   loop IR   a Prog of Kernels over Bufs; a kernel is a loop nest of Stmts
 *             whose index and value expressions are Exprs, their operators
 *             from one table (scalar.def).
 * Everything of one compilation lives in one Arena, freed at once.
 *
 * Fixed short locals: m Module, n Node, a Arena, cx context, p Prog,
 * k Kernel, b Buf, s Stmt, e Expr, blk Block. */
#ifndef KILN_IR_H
#define KILN_IR_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KILN_VERSION "0.1.0"
#define KILN_MAX_RANK 6
#define KILN_MAX_ATTRS 12         /* attributes of one op (test_ir checks each) */
#define KILN_MAX_NAME 128          /* bytes in a tensor or node name */
#define KILN_MAX_ELEMS (INT64_C(1) << 40) /* elements in one tensor */

typedef struct Arena Arena;
typedef struct Node Node;
typedef struct Module Module;
typedef struct Diags Diags;
typedef struct Buf Buf;
typedef struct Var Var;
typedef struct Expr Expr;
typedef struct Stmt Stmt;
typedef struct Kernel Kernel;
typedef struct Prog Prog;
typedef struct RefCx RefCx;
typedef struct LowerCx LowerCx;
typedef struct Tensor Tensor;

/* Kiln bugs (never bad input): print kiln's own file:line and abort. */
#define KILN_BUG(...) ir_bug(__FILE__, __LINE__, __VA_ARGS__)
_Noreturn void ir_bug(const char *file, int line, const char *fmt, ...);

/* ---- alloc.c: the allocator under the memory kiln owns ---------------- */
/* malloc, realloc and free for arena chunks, jansson's trees (see
 * frontend/jansson.c) and a model file's text. */
void *ir_malloc(size_t size);
void *ir_realloc(void *p, size_t size);
void ir_free(void *p);
/* Tests: the n-th allocation from now fails, once (0: none); the count of
 * allocations since; blocks allocated and not yet freed. */
void ir_alloc_fail_at(unsigned long n);
unsigned long ir_alloc_count(void);
long ir_alloc_live(void);

/* ---- arena.c: one region per compilation ---------------------------- */
/* arena_alloc never returns NULL: out of memory, it longjmps to a->oom
 * when set (the driver's recovery point, which frees the arena), else
 * prints "kiln: out of memory" and exits 4. arena_new returns NULL when
 * out of memory. */
Arena *arena_new(void);
void arena_free(Arena *a);
void *arena_alloc(Arena *a, size_t size);          /* zeroed, 16-aligned */
void *arena_dup(Arena *a, const void *p, size_t size);
char *arena_strdup(Arena *a, const char *s);
char *arena_printf(Arena *a, const char *fmt, ...);
void arena_set_oom(Arena *a, jmp_buf *oom);
/* Takes the out-of-memory exit above, for memory outside the arena. */
_Noreturn void arena_oom(Arena *a);
/* Memory held outside the arena for a while (a model file's text, a
 * jansson tree): arena_hold records it with the function that releases
 * it; arena_release(a, p) releases it now; arena_free releases what is
 * still held, so that leaving by the out-of-memory exit leaks nothing.
 * When the record itself cannot be made, p is released, then arena_oom. */
void arena_hold(Arena *a, void *p, void (*release)(void *));
void arena_release(Arena *a, void *p);
/* A memory stream (open_memstream) held by the arena; arena_stream_text
 * closes it and returns what was written, copied into the arena. Either
 * takes arena_oom when memory runs out, a write that failed included. */
FILE *arena_stream(Arena *a);
char *arena_stream_text(Arena *a, FILE *f);
/* Growable array of pointers in an arena: ARR_PUSH(a, arr, n, cap, x). */
void *arena_grow(Arena *a, void *arr, int n, int *cap, size_t elem);
#define ARR_PUSH(a, arr, n, cap, x)                                         \
    do {                                                                    \
        if ((n) == (cap))                                                   \
            (arr) = arena_grow((a), (arr), (n), &(cap), sizeof *(arr));     \
        (arr)[(n)++] = (x);                                                 \
    } while (0)

/* ---- diag.c: problems in the user's files, one line each ------------- */
struct Diags {
    Arena *a;
    const char *file;      /* printed first on every line */
    char **lines;
    int n, cap;
};
void diag_init(Diags *d, Arena *a, const char *file);
/* Records "FILE: WHERE: message"; WHERE is a JSON path, NULL to omit. */
void diag(Diags *d, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void diag_print(const Diags *d, FILE *f);

/* ---- notes: what a pass did and why, printed in dumps as "# ..." lines
 * (kept by the .kir parser, so a dump reads back as it was printed) ---- */
typedef struct {
    const char **v;
    int n, cap;
} Notes;
void ir_note(Arena *a, Notes *ns, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- types.c: dtypes and shapes ------------------------------------- */
typedef enum { DT_F32, DT_I32 } DType;
const char *dtype_name(DType t);                 /* "f32", "i32" */
/* How a weight's f32 values are held in memory: as they are, rounded to
 * 16 bits (to nearest, ties to even) and widened exactly where read, or
 * quantized in GGML's blocks (runtime/rt_quant.h: a row, the last dim, a
 * multiple of the block) and read through the runtime's element reads
 * and gemm kernels; ST_F8_E4M3, an FP8 checkpoint's e4m3 bytes in blocks
 * of 128 with an f32 scale each (docs/fp8.md), likewise; ST_MXFP4, OCP
 * MXFP4 blocks (32 E2M1 values sharing an E8M0 scale), likewise. Values
 * equal RT_F32, RT_BF16, ... RT_Q6_K, RT_F8_E4M3, RT_MXFP4 (kiln_rt.h).
 * ST_Q4_K_M is no storage but --weight-dtype's mix of q4_k and q6_k, which
 * lower resolves per weight (passes/lower.c). */
typedef enum {
    ST_F32, ST_BF16 = 2, ST_F16 = 3, ST_Q8_0 = 4, ST_Q4_0 = 5, ST_Q4_K = 6, ST_Q6_K = 7,
    ST_Q4_K_M = 8, ST_F8_E4M3 = 9, ST_MXFP4 = 10
} Storage;
const char *storage_name(Storage s);             /* "f32", "bf16", "f16", "q8_0", ... */
int storage_parse(const char *name, Storage *s); /* 1 when name is one */
int storage_block(Storage s);                    /* values a block; 0: not quantized */
int64_t storage_bytes(Storage s, int64_t count); /* count values held so */
int64_t shape_count(int rank, const int64_t *dims);
/* 1 when a shape of dims >= 0 holds at most KILN_MAX_ELEMS elements, found
 * without overflow: every buffer kiln makes must be addressable. */
int shape_fits(int rank, const int64_t *dims);
/* "[40,1536]" in the arena; "[]" for a scalar. */
char *shape_str(Arena *a, int rank, const int64_t *dims);
/* NumPy broadcast of two shapes; -1 when they do not broadcast. */
int shape_broadcast(int ra, const int64_t *da, int rb, const int64_t *db,
                    int64_t *out);
/* Resolves a possibly negative axis; -1 when out of range. */
int axis_norm(int64_t axis, int rank);

/* ---- the op table (ops.def) ----------------------------------------- */
typedef enum { AT_INT, AT_FLOAT, AT_BOOL, AT_ENUM, AT_INTS } AttrKind;

/* One attribute of an op's schema. Without `required`, missing takes
 * the default (i for INT/BOOL/ENUM, f for FLOAT; INTS default empty).
 * ENUM choices are "|"-separated; the value is the choice's index. */
typedef struct {
    const char *name;
    AttrKind kind;
    int required;
    int64_t i;
    double f;
    const char *choices;
    int internal;         /* set by kiln, never by a model file */
    int quiet;            /* the op's quiet attributes are dumped only when
                             one is not its default (a variant few models
                             use: rope's scaling) */
} AttrSpec;

typedef struct {
    int64_t i;            /* INT, BOOL, ENUM */
    double f;             /* FLOAT */
    int64_t *ints;        /* INTS */
    int nints;
    int given;            /* set by the file, not a default */
} AttrVal;

typedef struct {
    AttrVal v[KILN_MAX_ATTRS];
} Attrs;

typedef enum {
#define OP(e, name, min_in, max_in, attrs, infer, ref, lower) OP_##e,
#include "ops.def"
#undef OP
    OP_COUNT
} OpKind;

/* Context of shape inference: where problems go. */
typedef struct {
    Module *m;
    Diags *d;
} InferCx;

typedef struct {
    const char *name;
    int min_in, max_in;
    const AttrSpec *attrs;          /* NULL-name terminated */
    /* Checks operands and attributes, sets n->dtype/rank/dims; reports
     * every problem with diag(); returns 0 when n is well-formed. */
    int (*infer)(InferCx *cx, Node *n);
    /* Reference kernel: computes n's tensor from its operands'; returns 0,
     * or -1 after ref_fail() for a run-time error (id out of range). */
    int (*ref)(RefCx *cx, Node *n);
    /* Builds n's loop nests (lower.c calls it in node order). */
    void (*lower)(LowerCx *cx, Node *n);
} OpDesc;

extern const OpDesc op_table[OP_COUNT];
/* A user op by its model-format name; -1 when there is none. */
int op_lookup(const char *name);
/* A leaf op (input, weight, state, const) has no infer function. */
#define OP_IS_LEAF(op) (op_table[(op)].infer == NULL)

/* attrs.c: typed attribute access by schema name (KILN_BUG if absent). */
int attr_index(OpKind op, const char *name);
int64_t attr_i(const Node *n, const char *name);
double attr_f(const Node *n, const char *name);
const AttrVal *attr_v(const Node *n, const char *name);
void attrs_default(Node *n);

/* ---- graph IR: graph.c ---------------------------------------------- */
/* How a weight is made when no weights file holds it. */
typedef enum { INIT_NONE, INIT_FILL, INIT_RANDOM, INIT_DATA } InitKind;
typedef struct {
    InitKind kind;
    double fill;           /* FILL */
    uint64_t seed;         /* RANDOM */
    double scale;          /* RANDOM */
    float *data;           /* DATA: shape_count elements, row-major */
} Init;

/* A weight's or state's part on each rank of a distributed graph
 * (passes/distribute.c): rank r holds elements [r * len, (r + 1) * len)
 * of axis `axis` of the whole tensor, len = dims[axis] = of / ranks.
 * A weight with `tensors` (axis -1, of 0) is instead one whole tensor of
 * the weights file per rank, each of the weight's shape: rank r reads
 * tensors[r] (ranks names; one expert of a moe's, each rank another).
 * ranks 0: the whole tensor, the same on every rank. */
typedef struct {
    int ranks, axis;
    int64_t of;
    const char **tensors;
} Shard;

struct Node {
    OpKind op;
    int id;                       /* dense %id in dumps, node order */
    DType dtype;
    int rank;
    int64_t dims[KILN_MAX_RANK];
    Node **in;                    /* operands in model order */
    int nin;
    Attrs attrs;                  /* layout given by op_table[op].attrs */
    const char *name;             /* user's name (never in C); NULL: none */
    const char *where;            /* JSON path, e.g. "nodes[3]" */
    int index;                    /* position among inputs/weights/states */
    Init init;                    /* weights only */
    Shard shard;                  /* weights and states only */
    double value;                 /* OP_CONST only */
    Buf *buf;                     /* set by lowering: where the value lives */
};

struct Module {
    Arena *a;
    const char *file;             /* model file, for messages */
    const char *name;             /* model name: a C identifier */
    Node **nodes;                 /* every value, in definition order */
    int nnodes, capnodes;
    Node **inputs, **weights, **states;
    int ninputs, nweights, nstates;
    Node **outputs;
    int noutputs;
    Notes notes;                  /* of the last graph pass */
    Prog *prog;                   /* loop IR, once lowered: run at every call */
    /* The open program (passes/hoist.c): kernels run once when the model
     * is opened, after its weights load and before any is packed, which
     * read only weights and make the derived weights (BK_DERIVED) that
     * prog's kernels read as they read weights. NULL: none. Its buffers
     * are its own: weights as loaded, the derived weights it writes,
     * views of those, and its kernels' locals. */
    Prog *open;
    /* The program's other shape variants (a decoder's prefill chunk),
     * lowered alike and sharing this module's weights and state: codegen
     * writes them into the same program (NULL, 0: none). */
    struct Module **variants;
    int nvariants;
    /* A variant's role, its entry point NAME_run_ROLE: "chunk" (the
     * prefill chunk), "batch" (a slotted decoder's), "rest" (the smaller
     * prefill chunk of a prompt's rest); NULL for the leader. */
    const char *role;
    /* The model folder's files a program built of it opens by default
     * (rt_model.weights_file, .tokenizer_file): absolute paths, set by
     * the command line for emit-c and build of a folder; NULL: none. */
    const char *folder_weights, *folder_tokenizer;
    /* The x86-64 level the program's C is compiled for (-march=TARGET:
     * "x86-64-v2", "-v3", "-v4"), set by the command line's --target;
     * NULL: this machine's CPU (-march=native). */
    const char *target;
};

Module *ir_module_new(Arena *a, const char *file, const char *name);
/* Appends a node (id = position); operands are copied into the arena. */
Node *ir_node_new(Module *m, OpKind op, Node **in, int nin);
/* Renumbers ids and rebuilds inputs/weights/states after a rewrite. */
void ir_module_renumber(Module *m);
size_t node_bytes(const Node *n);
int64_t node_count(const Node *n);
/* bounds.c: an i32 input's values must lie in [0, hi) for a run to
 * accept them (embedding ids, cache positions); used to seed inputs. */
int64_t ir_input_hi(const Module *m, const Node *in);
/* decoder.c: the decoder contract (inputs exactly tokens i32[T] and
 * positions i32[T]; output exactly logits f32[T, V]; state, every one of
 * S rows): 1 when m keeps it, with its figures in dec. */
typedef struct {
    int64_t tokens, vocab, max_seq;   /* T, V, S */
    int64_t slots;                    /* N sequences' caches (input slots); 0: one */
    int last;                         /* logits f32[1, V]: the last token's alone */
} IrDecoder;
int ir_decoder(const Module *m, IrDecoder *dec);
/* The decoder m (unlowered, every row's logits) cut to its last row's
 * logits, f32[1, V] (decoder.c's top comment): 0, or -1 with the problems
 * in d. */
int ir_decoder_last_row(Module *m, Diags *d);
/* The decoder m (unlowered) at T tokens a call: its inputs become
 * i32[T] and every node's shape is inferred again (a reshape that writes
 * the token axis as -1 follows). 0, or -1 with the problems in d. */
int ir_decoder_tokens(Module *m, int64_t T, Diags *d);
/* clone.c: a deep copy of unlowered m in arena a (KILN_BUG when lowered),
 * printing as m does and sharing nothing a pass may change: new nodes,
 * operand lists, INTS attributes, node arrays, notes and strings. A
 * weight's init data (never written) is shared, so the copy must not
 * outlive m's arena. */
Module *ir_clone(Arena *a, const Module *m);
/* Prints the graph IR as .kir text (stable; KIR.md). */
void ir_print_graph(FILE *f, const Module *m);
/* A name as a .kir quoted string. */
void ir_print_quoted(FILE *f, const char *s);
/* Checks invariants (operands defined earlier, shapes re-inferred agree);
 * KILN_BUG on a violation. */
void ir_verify_graph(Module *m);

/* ---- parse.c: .kir text back to a module (ir/KIR.md) ------------------ */
/* Parses what ir_print_module prints (a graph, and a program once
 * lowered; leading "#" lines before `graph` are skipped). Returns NULL
 * with the first problem in d as "FILE: line N: message". */
Module *ir_parse(Arena *a, const char *file, const char *text, Diags *d);

/* ---- ref.c: the reference interpreter ------------------------------- */
/* A dense row-major tensor; f for f32, i for i32. */
struct Tensor {
    DType dtype;
    int rank;
    int64_t dims[KILN_MAX_RANK];
    int64_t count;
    float *f;
    int32_t *i;
};

struct RefCx {
    Module *m;
    Tensor *t;                    /* by node id */
    char err[512];
    int rank, nranks;             /* this context's rank of nranks */
    RefCx *peers;                 /* every rank's context, by rank */
};
/* Tensor of an operand; of n itself with ref_out. */
Tensor *ref_in(RefCx *cx, const Node *n, int i);
Tensor *ref_out(RefCx *cx, const Node *n);
int ref_fail(RefCx *cx, const Node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Runs the graph once. inputs[i]/weights[i] hold module order data;
 * states[i] persist across calls (updated in place). outputs[i] receive
 * copies. Returns 0, or -1 with *err set to a message. */
int ref_run(Module *m, Tensor *const *inputs, Tensor *const *weights,
            Tensor *const *states, Tensor *const *outputs, char *err,
            size_t errlen);
/* ref_run simulating nranks MPI ranks, for a graph whose collectives span
 * them (a distributed program's graph): every rank runs m on the same
 * inputs, rank r on weights[r] and states[r], in lockstep node by node; a
 * collective reads its operand from every rank. outputs get rank 0's.
 * ref_run is ref_run_ranks at nranks = 1. */
int ref_run_ranks(Module *m, int nranks, Tensor *const *inputs,
                  Tensor *const *const *weights, Tensor *const *const *states,
                  Tensor *const *outputs, char *err, size_t errlen);
Tensor *tensor_new(const Node *n);        /* malloc'd, zeroed */
/* A malloc'd Tensor of n's shape over caller data (not owned; NULL when
 * out of memory); tensor_free must not be used on it, free() is. */
Tensor *tensor_wrap(const Node *n, void *data);
void tensor_free(Tensor *t);

/* ---- loop IR: loop.c ------------------------------------------------ */
typedef enum {
    BK_INPUT,     /* caller's memory, read only */
    BK_OUTPUT,    /* caller's memory, written */
    BK_WEIGHT,    /* loaded at open */
    BK_STATE,     /* lives across calls, zero at open */
    BK_DERIVED,   /* made once at open from weights by the open program
                     (Module.open), then read as a weight is */
    BK_TEMP,      /* an intermediate, in the model's arena */
    BK_LOCAL,     /* a small array of one kernel, declared by S_LOCAL where
                     it is needed: private to each iteration of the loops
                     around it (so to each thread of a parallel loop) */
} BufKind;

/* A memref: element type, shape, strides and offset (in elements) into
 * the storage of `base` (itself when base is NULL). */
struct Buf {
    int id;
    BufKind kind;
    DType dtype;
    int rank;
    int64_t dims[KILN_MAX_RANK];
    int64_t strides[KILN_MAX_RANK];
    int64_t offset;
    Buf *base;
    Node *node;                   /* the value it holds, for dumps */
    int index;                    /* input/output/weight/state/derived number */
    int64_t arena_off;            /* TEMP: byte offset in the arena; -1 */
    /* WEIGHT or DERIVED packed in panels at load (rt_pack_panels): the
     * node's [..., N, K] held as [..., N/P, K, P], P = dims[rank-1];
     * element [..., p, k, c] is the weight's [..., p*P + c, k]. */
    int packed;
    /* WEIGHT or DERIVED (not a view): how its elements are held (ST_BF16,
     * ST_F16: 16 bits, widened to f32 by every load, rounded by every
     * store; ST_F32: dtype's own). */
    Storage store;
};

typedef enum {
    E_INT,        /* i: integer constant (index arithmetic, i32 values) */
    E_FLT,        /* f: f32 constant */
    E_VAR,        /* v: loop variable or scalar local */
    E_LOAD,       /* buf[idx...] */
    E_BIN,        /* a op b */
    E_UN,         /* op a */
    E_SEL,        /* a ? b : c */
} ExprKind;

/* The scalar operators, a row each of scalar.def: B_ADD .. B_OR, U_NEG
 * .. U_TOI64 (U_TOF32 integer to f32, U_TOI64 f32 to i64, truncating). */
typedef enum {
#define BIN(e, ...) B_##e,
#define UN(e, ...)
#include "scalar.def"
#undef BIN
#undef UN
    B_COUNT
} BinOp;

typedef enum {
#define BIN(e, ...)
#define UN(e, ...) U_##e,
#include "scalar.def"
#undef BIN
#undef UN
    U_COUNT
} UnOp;

/* Value types of expressions: f32, i32 (tensor elements), i64 (indices,
 * loop variables). Comparisons yield i64 0/1. */
typedef enum { T_F32, T_I32, T_I64 } EType;

typedef enum { VAR_LOOP, VAR_LOCAL } VarKind;
struct Var {
    int id;                       /* unique in its kernel */
    VarKind kind;
    EType type;
};

struct Expr {
    ExprKind kind;
    EType type;
    int64_t i;
    double f;
    Var *v;
    Buf *buf;
    Expr **idx;                   /* LOAD: one per buf dim */
    int op;                       /* BinOp or UnOp */
    Expr *a, *b, *c;
};

typedef struct {
    Stmt **s;
    int n, cap;
} Block;

typedef enum {
    S_LOOP,       /* for v in lo..hi (step 1): body */
    S_LET,        /* local v = e (declares v) */
    S_SET,        /* local v op= e */
    S_STORE,      /* buf[idx] op= e */
    S_IF,         /* if e: body else els */
    S_CHECK,      /* run-time error `msg` unless e; args printed as %lld */
    S_LOCAL,      /* declares the BK_LOCAL buf (contents undefined) */
    S_CALL,       /* a micro-kernel over tiles of buffers (CallKind) */
} StmtKind;

/* Assignment operators of S_SET / S_STORE. */
typedef enum { A_SET, A_ADD, A_MAX } AsgOp;

/* A rectangular region of a buffer, operand of a call: from the element
 * at idx, ext[d] elements along each dim d. As a matrix (what kernels
 * see): its last two dims, rows of ext[rank-2] (1 for rank 1) by
 * columns of ext[rank-1], contiguous; every other extent is 1. */
typedef struct {
    Buf *buf;
    Expr **idx;                   /* one per buf dim */
    int64_t ext[KILN_MAX_RANK];
} Tile;

/* The micro-kernels of S_CALL (rt_NAME: runtime/core/rt_kernels.c; attn's
 * runtime/attn/rt_attn.c), and the meaning of their tiles (loop.c: call_table):
 *   gemm(C, A, B)  C[m,n] += A[m,k] B[k,n]: each element of C adds its k
 *                  products to itself in k order (fused multiply-adds),
 *                  so calls over consecutive k ranges continue one sum.
                  With B held bf16 and 16 rows or more, where the program
                  runs on AMX tiles: A rounded to bf16, products added in
                  pairs by the tiles (lossy; runtime/core/rt_amx.c).
 *   qgemm(C, A, W) C[m,n] += A[m,k] W[n,k]^T, W a weight held quantized
 *                  (rows as stored, k a multiple of its block): each row of
 *                  A quantized per block to int8, each block's product
 *                  exact, scaled and added in block order (runtime/
 *                  rt_quant.h: rt_gemm_q8_0 ...): the dequantized weight's
 *                  products up to that rounding of A, for any blocking.
 *   attn(O, Q, K, V[, SK]; p0, hi, window, scale, softcap)
 *                  attention of nt query rows of H heads (O, Q [nt, H, D]
 *                  from row t0, head h0) against the rows of one kv head
 *                  (K, V [S, 1, D], or [1, S, 1, D]: one slot of a slotted
 *                  cache); row i, at position p0 + i, sees the keys below
 *                  hi (hi 0: causal, below p0 + i + 1) and, with a window
 *                  W > 0, none before p0 + i - W + 1. With SK [H] (f32),
 *                  head r's sink logit SK[r] joins its softmax's
 *                  denominator. Online softmax over blocks of keys in an
 *                  order fixed by the arguments alone (rt_attn,
 *                  runtime/rt_attn.h). Args: p0 and hi integers, window an
 *                  INT, scale and softcap FLTs (softcap 0: none).
 *   allreduce(Y, X) Y = the sum over the program's MPI ranks of each
 *                  rank's X, added in rank order (runtime/rt_mpi.h); whole
 *                  dense buffers of one shape, f32.
 *   allgather(Y, X) Y = the ranks' X one after another along the one axis
 *                  where Y is N times X (N ranks); whole dense buffers.
 *   rank(Y)        Y = this program's MPI rank (0 of one rank); a whole
 *                  dense i32 buffer of one element. */
typedef enum {
    CALL_GEMM, CALL_QGEMM, CALL_ATTN, CALL_ALLREDUCE, CALL_ALLGATHER, CALL_RANK, CALL_COUNT
} CallKind;
typedef struct {
    const char *name;             /* in .kir, and the runtime's rt_NAME */
    int ntiles;                   /* at most; the last `optional` may be left off */
    int optional;
    int nargs;                    /* scalar arguments after the tiles */
    int written;                  /* the tile it updates (also read) */
} CallDesc;
extern const CallDesc call_table[CALL_COUNT];

/* Loop marks: the schedule. They change speed, never numbers. */
enum {
    MARK_PARALLEL = 1,
    MARK_REDUCE = 2,              /* carries an accumulation */
    MARK_VECTOR = 4,
};

struct Stmt {
    StmtKind kind;
    Var *v;                       /* LOOP, LET, SET */
    Expr *lo, *hi;                /* LOOP */
    int marks;                    /* LOOP */
    Buf *buf;                     /* STORE */
    Expr **idx;                   /* STORE */
    AsgOp op;                     /* SET, STORE */
    Expr *e;                      /* LET, SET, STORE, IF, CHECK */
    Block body, els;              /* LOOP, IF */
    const char *msg;              /* CHECK: printf format, %lld per arg */
    Expr **args;                  /* CHECK: printed; CALL: call_table[call].nargs */
    int nargs;
    CallKind call;                /* CALL */
    Tile *tiles;                  /* CALL: call_table[call].ntiles (or fewer) */
    int ntiles;
};

struct Kernel {
    int id;
    const char *name;             /* C-safe: op and shape, e.g. linear_n8960_k1536 */
    Node **nodes;                 /* graph nodes it computes */
    int nnodes, capnodes;
    Block body;
    int nvars;                    /* Var ids 0..nvars-1 */
    Notes notes;                  /* what passes did to it, for dumps */
};

struct Prog {
    Buf **bufs;
    int nbufs, capbufs;
    Kernel **kernels;
    int nkernels, capkernels;
    int64_t arena_bytes;          /* size of the intermediate arena */
    Notes notes;                  /* of the last loop pass */
};

/* Builders (loop.c). Constructors fold constants: 0 + x is x, 2 * 3 is 6,
 * so lowered index arithmetic prints as a person would write it. */
Prog *ir_prog_new(Arena *a);
Buf *ir_buf_new(Arena *a, Prog *p, BufKind kind, DType t, int rank,
                const int64_t *dims);
Kernel *ir_kernel_new(Arena *a, Prog *p, const char *name);
Var *ir_var(Arena *a, Kernel *k, VarKind kind, EType t);
void ir_push(Arena *a, Block *blk, Stmt *s);

Expr *e_int(Arena *a, int64_t i);
Expr *e_flt(Arena *a, double f);
Expr *e_var(Arena *a, Var *v);
Expr *e_load(Arena *a, Buf *b, Expr **idx);     /* idx copied; b->rank */
Expr *e_bin(Arena *a, BinOp op, Expr *x, Expr *y);
Expr *e_un(Arena *a, UnOp op, Expr *x);
Expr *e_sel(Arena *a, Expr *c, Expr *x, Expr *y);
Expr *e_add(Arena *a, Expr *x, Expr *y);
Expr *e_mul(Arena *a, Expr *x, Expr *y);

/* Appends a loop over [lo, hi) to blk; its variable is s->v. */
Stmt *s_loop(Arena *a, Kernel *k, Block *blk, Expr *lo, Expr *hi, int marks);
Stmt *s_let(Arena *a, Kernel *k, Block *blk, EType t, Expr *init);
Stmt *s_set(Arena *a, Block *blk, Var *v, AsgOp op, Expr *e);
Stmt *s_store(Arena *a, Block *blk, Buf *b, Expr **idx, AsgOp op, Expr *e);
Stmt *s_if(Arena *a, Block *blk, Expr *cond);
Stmt *s_check(Arena *a, Block *blk, Expr *cond, const char *msg,
              Expr **args, int nargs);
/* Declares a new kernel-local array in blk (a BK_LOCAL buf of p). */
Stmt *s_local(Arena *a, Prog *p, Block *blk, DType t, int rank, const int64_t *dims);
/* A call; tiles (and their indices) and args are copied. */
Stmt *s_call(Arena *a, Block *blk, CallKind call, const Tile *tiles, int ntiles);
Stmt *s_call_args(Arena *a, Block *blk, CallKind call, const Tile *tiles, int ntiles,
                  Expr **args, int nargs);
/* A tile as a matrix: rows, columns and the row stride; 0 when it is not
 * one (an extent other than the last two above 1, columns not contiguous). */
int ir_tile_matrix(const Tile *t, int64_t *rows, int64_t *cols, int64_t *ld);
/* Whether b, when a view of storage held in blocks, starts each of its
 * rows at a whole block (offset and every stride but the last, 1, are
 * multiples of the block), so that qgemm can read it as stored; 1 for
 * any other buffer. */
int ir_whole_blocks(const Buf *b);
/* The calls of p that AMX tiles may run, of 16 rows or more: gemm with B
 * held bf16 (rt_gemm_bf16_amx), and qgemm on q8_0, q4_0, q4_k or q6_k weights
 * (rt_gemm_q_amx; their number also in *quantized). Their rows of A are
 * rounded to bf16 there, qgemm's weights dequantized to bf16. */
int ir_prog_amx_calls(Prog *p, int *quantized);
/* Why call s is malformed (tile count, shapes that do not agree, an
 * extent past its dim, a written tile in read-only storage or sharing
 * storage with another tile), or NULL. */
const char *ir_call_refusal(Arena *a, const Stmt *s);
/* FLOPs of one run of call s (gemm: 2mnk). */
double ir_call_flops(const Stmt *s);

/* Row-major strides for a fresh buffer. */
void ir_buf_contiguous(Buf *b);
/* Prints the loop IR as .kir text (stable; KIR.md): the program, then
 * the open program when there is one. */
void ir_print_prog(FILE *f, const Module *m);
/* The whole module: the graph, then the programs once lowered. */
void ir_print_module(FILE *f, const Module *m);
/* The same as text in m's arena (what dumps write and kiln opt reads). */
char *ir_module_text(const Module *m);
const char *bufkind_name(BufKind k);
/* Binding strength of an expression as an operand, as in C: 0 select,
 * 1 ||, 2 &&, 3 == !=, 4 < <= > >=, 5 + -, 6 * / %, 9 calls and atoms
 * (a binary operator's is its row's in scalar.def). */
int ir_expr_prec(const Expr *e);
void ir_print_float(FILE *f, double v);
/* Notes as "# ..." lines, one per line of text, indented. */
void ir_print_notes(FILE *f, const Notes *ns, int indent);    /* %.9g, always with . or e */
/* An operator's .kir spelling (scalar.def): "+", "max", "sigmoid". */
const char *binop_name(BinOp op);
const char *unop_name(UnOp op);

/* ---- xform.c: what passes rewrite the loop IR with ------------------- */
/* The storage a buf's elements live in: its base, or itself. */
Buf *ir_storage(Buf *b);
/* Copies of e with every use of v replaced by r (shared subtrees are
 * reused; e itself is never changed). */
Expr *ir_subst(Arena *a, Expr *e, const Var *v, Expr *r);
/* Replaces every use of v in blk's statements, in place. */
void ir_block_subst(Arena *a, Block *blk, const Var *v, Expr *r);
/* A deep copy of blk whose loop variables and locals are new vars of k
 * (so statements can move between kernels); uses of vars declared
 * outside blk are kept unless mapped by from[i] -> to[i]. */
Block ir_block_clone(Arena *a, Prog *p, Kernel *k, const Block *blk, Var **from,
                     Expr **to, int nmap);
int ir_expr_uses(const Expr *e, const Var *v);
int ir_block_uses(const Block *blk, const Var *v);
/* Whether blk loads from / stores to storage that b's storage is. */
int ir_block_reads(const Block *blk, Buf *b);
int ir_block_writes(const Block *blk, Buf *b);
/* Every statement of blk and the blocks in it, in program order. */
typedef void (*StmtFn)(Stmt *s, void *ctx);
void ir_block_walk(Block *blk, StmtFn fn, void *ctx);
/* Calls fn on every expression tree of s (not of nested blocks). */
typedef void (*ExprFn)(Expr *e, void *ctx);
void ir_stmt_exprs(Stmt *s, ExprFn fn, void *ctx);
/* Calls fn on every load (E_LOAD) of e's tree / of s's expression trees
 * (not of nested blocks), a load before the loads in its indices. */
void ir_expr_loads(Expr *e, ExprFn fn, void *ctx);
void ir_stmt_loads(Stmt *s, ExprFn fn, void *ctx);
/* Calls fn(b, how, ctx) for every buffer each statement of blk (and the
 * blocks in it) touches, in program order, and within a statement: the
 * buffer it stores to (IR_WR), its call's tiles (IR_RD, and IR_WR for
 * the one the call updates), then its loads as ir_stmt_loads visits them
 * (IR_RD). Locals declared by S_LOCAL are not visited for the
 * declaration, only where they are stored to or read. */
enum { IR_RD = 1, IR_WR = 2 };
typedef void (*BufFn)(Buf *b, int how, void *ctx);
void ir_block_bufs(Block *blk, BufFn fn, void *ctx);
/* Replaces every expression tree of s (not of nested blocks) by fn's
 * result for it. */
typedef Expr *(*ExprMap)(Expr *e, void *ctx);
void ir_stmt_map(Stmt *s, ExprMap fn, void *ctx);
/* e with its loads rewritten: operands and indices first, left to right,
 * then fn(load, idx, ctx) with the load's indices as rewritten; NULL from
 * fn keeps the load (on the new indices). A node none of whose operands
 * changed is returned itself, so a tree without a rewritten load is e. */
typedef Expr *(*LoadMap)(Expr *load, Expr **idx, void *ctx);
Expr *ir_expr_map_loads(Arena *a, Expr *e, LoadMap fn, void *ctx);
/* Dense var ids in order of appearance; dense kernel and buf ids, bufs
 * no kernel touches dropped (except inputs, outputs, weights, states and
 * derived weights). */
void ir_kernel_renumber(Kernel *k);
void ir_prog_renumber(Prog *p);
/* Gives every intermediate (TEMP, not a view) its own 64-byte aligned
 * place in the arena, one after the other (plan-memory shares places). */
void ir_prog_layout(Prog *p);
/* Derived weights: how many the open program makes (0 without one), and
 * the place of a weight or derived weight among everything held from
 * open to close: weight i is i, derived weight j is nweights + j; -1 for
 * other storage. */
int ir_nderived(const Module *m);
int ir_held_index(const Module *m, const Buf *b);
/* read[ir_held_index(b)] = 1 for every weight or derived weight that a
 * kernel of p (m's prog or open program) reads. */
void ir_held_reads(const Module *m, const Prog *p, char *read);
/* The open program's buffer that makes derived weight index; NULL. */
const Buf *ir_derived_made(const Module *m, int index);

/* ---- verify.c: the loop IR's invariants ------------------------------- */
/* Checks the loop IR's invariants (every var in scope, index counts,
 * nothing stored to inputs or weights, locals declared before use, no
 * nested parallel loops, no check inside a parallel loop), and the open
 * program's (it reads weights and derived weights only, and writes only
 * derived weights; those are numbered densely, each made once, and
 * prog's derived buffers are among them); KILN_BUG. */
void ir_verify_prog(const Module *m);
/* Whether packed buffer b is its weight node's panels (Buf.packed):
 * a weight or derived weight, no view, row-major, [..., N/P, K, P] of the
 * node's [..., N, K], and nothing views it. */
int ir_packed_ok(const Prog *p, const Buf *b);
/* Whether prog's derived buffer b is what the open program makes: not a
 * view; the same node, element type and storage; the same dims, or as
 * many elements packed (ir_packed_ok checks the panels). */
int ir_derived_agree(const Module *m, const Buf *b);

/* ---- indep.c: affine indices and loop independence ------------------- */
/* Structural equality of two expressions. */
int ir_expr_equal(const Expr *x, const Expr *y);
/* The coefficient of v in e when e is affine in v (sums, differences and
 * constant multiples; v appears in no other part); *affine = 0 if not. */
int64_t ir_expr_coef(const Expr *e, const Var *v, int *affine);
/* Whether loop s's iterations may run in any order, or at once: it holds
 * no run-time check, assigns no scalar declared outside it, and every
 * storage it writes (but local arrays declared inside it, private to an
 * iteration) is accessed only at elements no other iteration touches:
 * along some dim, every access's index is a*v + c + a span of inner loop
 * variables narrower than |a|, with the same a and the same loop-invariant
 * c. Returns 1, or 0 with *why (if not NULL) saying why not, for notes. */
int ir_loop_independent(Arena *a, Stmt *s, const char **why);

/* ---- cost.c: what a kernel costs, for dumps and profiles ------------- */
/* FLOPs (multiply and add count one each; exp, sqrt, ... one) and bytes
 * of the buffers it touches (each storage once). Loops whose bounds are
 * known only at run time count at their largest extent. */
void ir_kernel_cost(const Kernel *k, double *flops, double *bytes);
/* Of ir_kernel_cost's FLOPs, its attention calls' (CALL_ATTN): every row
 * against the whole cache, a bound that a profile replaces by what the
 * calls computed (rt_profile_count). */
double ir_kernel_attn_flops(const Kernel *k);
/* FLOPs of e's own operator, not its operands': its scalar.def figure
 * on f32 values; none on integers, nor for a load, variable, constant or
 * select. */
double ir_expr_op_flops(const Expr *e);
/* FLOPs of s itself, not of its expressions or blocks: an f32
 * accumulation (+=, max=) counts one, a call what its micro-kernel does
 * (ir_call_flops). */
double ir_stmt_op_flops(const Stmt *s);
/* Iterations of loop s: hi - lo when both are constants; else (a bound
 * known only at run time) the largest extent its variable can take, the
 * size of the largest buffer dimension it indexes directly (1: none). */
double ir_loop_trips(const Stmt *loop);

/* ---- lower helpers (lowerlib.c), used by the ops' lower_* ----------- */
struct LowerCx {
    Module *m;
    Arena *a;
    Prog *p;
};
/* A kernel for node n named after its op and shape, listing n. */
Kernel *lw_kernel(LowerCx *cx, Node *n, const char *name);
/* The buffer holding n's value (created on first use). */
Buf *lw_buf(LowerCx *cx, Node *n);
/* Loops over every element of n's shape in blk; vars[] gets the loop
 * variables (rank of them); returns the innermost block. */
Block *lw_nest(LowerCx *cx, Kernel *k, Block *blk, int rank,
               const int64_t *dims, Var **vars);
/* Loops over every dim of a shape but `axis`, outermost first; ix[d] gets
 * dim d's loop variable, ix[axis] is left for the caller to fill (a row
 * operation's inner loops). Returns the innermost block. */
Block *lw_nest_but(LowerCx *cx, Kernel *k, Block *blk, int rank,
                   const int64_t *dims, int axis, Expr **ix);
/* Element of operand x at output indices idx (rank r), NumPy broadcast:
 * a constant node is its literal, an i32 value stays i32. */
Expr *lw_bcast_load(LowerCx *cx, Node *x, int r, Var **idx);
/* Load of x at indices given as expressions. */
Expr *lw_load(LowerCx *cx, Node *x, Expr **idx);
/* Load of a rank-0 node (a scalar input such as pos), as i64 or f32. */
Expr *lw_scalar(LowerCx *cx, Node *x);
/* A scratch buffer of the kernel being built (not a graph value). */
Buf *lw_temp(LowerCx *cx, DType t, int rank, const int64_t *dims);
/* n's user name quoted for a check message: '%' doubled, so the name can
 * never act as a printf directive ("'tok_emb'", or "node %7"). */
const char *lw_name(LowerCx *cx, const Node *n);
Expr **lw_idx(LowerCx *cx, int n, ...);           /* n Expr* args */
Expr **lw_vars(LowerCx *cx, int n, Var **v);      /* e_var of each */

#endif
