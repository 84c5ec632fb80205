/* ir/parse_prog.c: the program section of a .kir file (KIR.md): buffers,
 * the arena, kernels and their statements (expressions: parse_expr.c).
 *
 * Contract (with parse.c's): the program read is one ir_verify_prog
 * accepts: dense buffer and kernel ids, views of buffers that are not
 * views, every variable and local buffer used in its scope, no store to
 * an input or a weight, no parallel loop in a parallel loop, no check in
 * one; and one codegen prints safely: buffer numbers within the graph's
 * counts, a check's message a printf format for exactly its arguments.
 * 1. Buffers and the arena, then views linked to their bases.
 * 2. Kernels: the header, then statements by indentation, each kernel's
 *    variables made by id as their `for` or `let` declares them.
 * 3. The open program, when there is one, the same way; it holds only
 *    weights, the derived weights it makes (each number once, from 0),
 *    views of those and locals, and stores only to derived weights;
 *    prog's derived buffers must be ones it makes, alike.
 * 4. Every node gets the buffer holding its value (Node.buf). */
#include "parse.h"

#include <limits.h>
#include <string.h>

#define MAX_VAR_ID 100000         /* k->nvars sizes passes' tables */
#define MAX_DEPTH 64              /* statements nested in statements */

/* The word w comes next (not taken). */
static int at_word(Parser *ps, const char *w)
{
    const char *save = ps->p;
    int yes = kir_accept(ps, w);
    ps->p = save;
    return yes;
}

/* ---- buffers ---------------------------------------------------------- */

/* A view waiting for its base: `of bM` may name a later buffer. */
typedef struct {
    Buf *b;
    int base, line;
} Pending;

static BufKind buf_kind(Parser *ps)
{
    for (int k = BK_INPUT; k <= BK_LOCAL; k++)
        if (kir_accept(ps, bufkind_name((BufKind)k)))
            return (BufKind)k;
    kir_fail(ps, "expected a buffer kind (input, output, weight, state, derived, temp or "
                 "local), found %s", kir_found(ps));
}

/* The number of an input, output, weight or state buffer: one of the
 * graph's; a derived weight's: checked with the open program. */
static void buf_index(Parser *ps, const Buf *b)
{
    const Module *m = ps->m;
    int count[] = {[BK_INPUT] = m->ninputs, [BK_OUTPUT] = m->noutputs,
                   [BK_WEIGHT] = m->nweights, [BK_STATE] = m->nstates};
    if (b->kind > BK_DERIVED)
        return;
    if (b->index < 0)
        kir_fail(ps, "b%d needs its number among the %ss", b->id, bufkind_name(b->kind));
    if (b->kind == BK_DERIVED)
        return;
    if (b->index >= count[b->kind])
        kir_fail(ps, "b%d is %s %d, but the graph has %d %ss", b->id, bufkind_name(b->kind),
                 b->index, count[b->kind], bufkind_name(b->kind));
    Node **of[] = {[BK_INPUT] = m->inputs, [BK_OUTPUT] = m->outputs, [BK_WEIGHT] = m->weights,
                   [BK_STATE] = m->states};
    const Node *n = of[b->kind][b->index];
    if (b->node && b->node != n)
        kir_fail(ps, "b%d is %s %d, which is %%%d, not %%%d", b->id, bufkind_name(b->kind),
                 b->index, n->id, b->node->id);
    if (b->dtype != n->dtype || (b->rank != n->rank && !b->packed))
        kir_fail(ps, "b%d's type is not that of %s %d (%%%d)", b->id, bufkind_name(b->kind),
                 b->index, n->id);
    for (int d = 0; d < b->rank && !b->packed; d++)
        if (b->dims[d] != n->dims[d])
            kir_fail(ps, "b%d's shape is not that of %s %d (%%%d)", b->id,
                     bufkind_name(b->kind), b->index, n->id);
}

/* view = "strides" "[" [INT {"," INT}] "]" "offset" INT ["of" bN] */
static void view(Parser *ps, Buf *b, int *base)
{
    int n = 0;
    kir_expect(ps, "[");
    if (!kir_accept(ps, "]")) {
        do {
            int64_t s = kir_int(ps, "a stride");
            if (n < b->rank)
                b->strides[n] = s;
            n++;
        } while (kir_accept(ps, ","));
        kir_expect(ps, "]");
    }
    if (n != b->rank)
        kir_fail(ps, "b%d has %d dimensions but %d strides", b->id, b->rank, n);
    kir_expect(ps, "offset");
    b->offset = kir_int(ps, "an offset");
    if (kir_accept(ps, "of") && (*base = kir_ref(ps, 'b')) < 0)
        kir_fail(ps, "expected a buffer bN, found %s", kir_found(ps));
}

/* buf = "buf" bN KIND [INT] [%N] ":" type [STORE] ["packed"] [view] ["@" INT] NL */
static Pending buf(Parser *ps, Prog *p)
{
    int id = kir_ref(ps, 'b');
    if (id != p->nbufs)
        kir_fail(ps, "expected b%d (buffer ids count up from b0), found %s", p->nbufs,
                 id < 0 ? kir_found(ps) : arena_printf(ps->a, "'b%d'", id));
    BufKind kind = buf_kind(ps);
    int64_t index = -1;
    double f;
    int is_float;
    if (kir_number(ps, &index, &f, &is_float) && (is_float || index < 0 || index > INT_MAX))
        kir_fail(ps, "a buffer's number is an integer >= 0");
    Node *n = kir_peek(ps, '%') ? kir_node(ps) : NULL;
    DType t;
    int rank;
    int64_t dims[KILN_MAX_RANK];
    kir_expect(ps, ":");
    kir_type(ps, &t, &rank, dims);
    Buf *b = ir_buf_new(ps->a, p, kind, t, rank, dims);
    b->index = (int)index;
    b->node = n;
    Pending v = {b, -1, ps->lineno};
    b->store = ST_F32;
    for (Storage s = ST_BF16; s <= ST_MXFP4; s++)
        if (s != ST_Q4_K_M && kir_accept(ps, storage_name(s)))
            b->store = s;
    if (b->store != ST_F32 && ((kind != BK_WEIGHT && kind != BK_DERIVED) || t != DT_F32))
        kir_fail(ps, "only an f32 weight is stored as %s", storage_name(b->store));
    if (storage_block(b->store) && (rank < 1 || dims[rank - 1] % storage_block(b->store)))
        kir_fail(ps, "a weight held as %s has rows (its last dim) of a multiple of %d values",
                 storage_name(b->store), storage_block(b->store));
    if (ps->open && kind != BK_WEIGHT && kind != BK_DERIVED && kind != BK_TEMP &&
        kind != BK_LOCAL)
        kir_fail(ps, "b%d is %s storage: the open program reads only weights", b->id,
                 bufkind_name(kind));
    b->packed = kir_accept(ps, "packed");
    if (b->packed && ps->open)
        kir_fail(ps, "b%d is packed: the open program runs before weights are packed", b->id);
    if (kir_accept(ps, "strides"))
        view(ps, b, &v.base);
    if (kir_accept(ps, "@") && (b->arena_off = kir_int(ps, "an arena offset")) < 0)
        kir_fail(ps, "an arena offset is >= 0");
    kir_end(ps);
    buf_index(ps, b);
    return v;
}

/* Each view's base: a buffer that is not a view itself; packed buffers
 * checked once views are known. */
static void link_views(Parser *ps, Prog *p, const Pending *v, int n)
{
    for (int i = 0; i < n; i++) {
        int base = v[i].base;
        ps->lineno = v[i].line;
        if (base < 0)
            continue;
        if (base >= p->nbufs || base == v[i].b->id)
            kir_fail(ps, "b%d is a view of b%d, which is not another buffer", v[i].b->id, base);
        if (v[base].base >= 0)
            kir_fail(ps, "b%d is a view of b%d, which is a view itself", v[i].b->id, base);
        v[i].b->base = p->bufs[base];
    }
    for (int i = 0; i < n; i++) {
        ps->lineno = v[i].line;
        const Buf *b = v[i].b, *st = ir_storage(v[i].b);
        if (b->store != ST_F32 && v[i].base >= 0)
            kir_fail(ps, "b%d is a view, which is stored as its base is", b->id);
        if (b->kind == BK_DERIVED && b->base)
            kir_fail(ps, "b%d is a derived weight: it is storage, not a view", b->id);
        if (ps->open && b->kind == BK_TEMP && st->kind != BK_WEIGHT && st->kind != BK_DERIVED)
            kir_fail(ps, "b%d is a temp of the open program, which has no arena: only a view "
                     "of a weight or a derived weight", b->id);
        if (v[i].b->packed && !ir_packed_ok(p, v[i].b))
            kir_fail(ps, "b%d is packed, but not a weight's [..., N, K] as panels "
                     "[..., N/P, K, P] that no buffer views", v[i].b->id);
    }
}

/* arena = "arena" INT NL */
static void arena_line(Parser *ps, Prog *p)
{
    p->arena_bytes = kir_int(ps, "the arena's size in bytes");
    if (p->arena_bytes < 0)
        kir_fail(ps, "the arena's size is >= 0");
    kir_end(ps);
}

/* {note | buf | arena}, up to the first kernel */
static void prog_header(Parser *ps, Prog *p)
{
    Pending *v = NULL;
    int n = 0, cap = 0;
    for (kir_next_line(ps); !ps->eof; kir_next_line(ps)) {
        if (kir_is_note(ps)) {
            ir_note(ps->a, &p->notes, "%s", kir_note_text(ps));
            continue;
        }
        if (ps->indent == 0)
            break;
        kir_indent(ps, 2);
        if (kir_accept(ps, "buf"))
            ARR_PUSH(ps->a, v, n, cap, buf(ps, p));
        else if (!ps->open && kir_accept(ps, "arena"))
            arena_line(ps, p);
        else if (at_word(ps, "kernel"))
            break;
        else if (ps->open)
            kir_fail(ps, "expected buf or kernel (the open program has no arena), found %s",
                     kir_found(ps));
        else
            kir_fail(ps, "expected buf, arena or kernel, found %s", kir_found(ps));
    }
    int line = ps->lineno;
    link_views(ps, p, v, n);
    ps->lineno = line;
}

/* ---- variables ---------------------------------------------------------- */

/* A new variable of the kernel, declared by a `for` or a `let`. */
static Var *define(Parser *ps, VarKind kind, int id, EType t)
{
    if (id >= MAX_VAR_ID)
        kir_fail(ps, "%c%d: variable ids are below %d", kir_var_char(kind), id, MAX_VAR_ID);
    for (int i = 0; i < ps->nvars; i++)
        if (ps->vars[i]->id == id)
            kir_fail(ps, "%c%d: id %d is taken by %c%d in this kernel", kir_var_char(kind), id, id,
                     kir_var_char(ps->vars[i]->kind), id);
    Var *v = arena_alloc(ps->a, sizeof *v);
    v->id = id;
    v->kind = kind;
    v->type = t;
    ARR_PUSH(ps->a, ps->vars, ps->nvars, ps->capvars, v);
    if (id >= ps->k->nvars)
        ps->k->nvars = id + 1;
    return v;
}

static void enter(Parser *ps, Var *v) { ARR_PUSH(ps->a, ps->scope, ps->nscope, ps->capscope, v); }

/* ---- statements --------------------------------------------------------- */

static void block(Parser *ps, Block *blk, int depth);

static Stmt *new_stmt(Parser *ps, Block *blk, StmtKind kind)
{
    Stmt *s = arena_alloc(ps->a, sizeof *s);
    s->kind = kind;
    ir_push(ps->a, blk, s);
    return s;
}

/* {"parallel" | "reduce" | "vector"} */
static int loop_marks(Parser *ps)
{
    int marks = 0;
    for (;;) {
        if (kir_accept(ps, "parallel"))
            marks |= MARK_PARALLEL;
        else if (kir_accept(ps, "reduce"))
            marks |= MARK_REDUCE;
        else if (kir_accept(ps, "vector"))
            marks |= MARK_VECTOR;
        else
            return marks;
    }
}

/* for = "for" iN "in" expr ".." expr {mark} NL block */
static Stmt *loop(Parser *ps, Block *blk, int depth)
{
    int id = kir_ref(ps, 'i');
    if (id < 0)
        kir_fail(ps, "expected a loop variable iN, found %s", kir_found(ps));
    kir_expect(ps, "in");
    Expr *lo = kir_integer(ps, "the loop's start");
    kir_expect(ps, "..");
    Expr *hi = kir_integer(ps, "the loop's end");
    int marks = loop_marks(ps), outer = ps->parallel;
    kir_end(ps);
    if ((marks & MARK_PARALLEL) && outer)
        kir_fail(ps, "a parallel loop inside a parallel loop");
    Stmt *s = new_stmt(ps, blk, S_LOOP);
    s->v = define(ps, VAR_LOOP, id, T_I64);
    s->lo = lo;
    s->hi = hi;
    s->marks = marks;
    kir_next_line(ps);
    ps->parallel |= marks & MARK_PARALLEL;
    enter(ps, s->v);
    block(ps, &s->body, depth + 1);
    ps->nscope--;
    ps->parallel = outer;
    return s;
}

/* let = "let" vN ":" ("f32" | "i32" | "i64") "=" expr NL */
static Stmt *let(Parser *ps, Block *blk)
{
    static const char *const types[] = {[T_F32] = "f32", [T_I32] = "i32", [T_I64] = "i64"};
    int id = kir_ref(ps, 'v'), t = 0;
    if (id < 0)
        kir_fail(ps, "expected a local vN, found %s", kir_found(ps));
    kir_expect(ps, ":");
    while (t < 3 && !kir_accept(ps, types[t]))
        t++;
    if (t == 3)
        kir_fail(ps, "expected f32, i32 or i64, found %s", kir_found(ps));
    kir_expect(ps, "=");
    Expr *e = kir_expr(ps);
    kir_end(ps);
    Stmt *s = new_stmt(ps, blk, S_LET);
    s->v = define(ps, VAR_LOCAL, id, (EType)t);
    s->e = e;
    enter(ps, s->v);
    kir_next_line(ps);
    return s;
}

/* if = "if" expr NL block ["else" NL block] (else: see block) */
static Stmt *if_stmt(Parser *ps, Block *blk, int depth)
{
    Expr *c = kir_expr(ps);
    kir_end(ps);
    Stmt *s = s_if(ps->a, blk, c);
    kir_next_line(ps);
    block(ps, &s->body, depth + 1);
    return s;
}

/* A check's message is a printf format: each '%' is "%%" or "%lld", one
 * "%lld" per argument. */
static void check_format(Parser *ps, const char *msg, int nargs)
{
    int n = 0;
    for (const char *q = msg; (q = strchr(q, '%')); q += 2) {
        if (q[1] == '%')
            continue;
        if (strncmp(q + 1, "lld", 3) != 0)
            kir_fail(ps, "a check's message has '%%' only in %%%% and %%lld");
        n++;
        q += 2;
    }
    if (n != nargs)
        kir_fail(ps, "a check's message has %d %%lld for %d argument%s", n, nargs,
                 nargs == 1 ? "" : "s");
}

/* check = "check" expr "else" STRING {"," expr} NL */
static Stmt *check(Parser *ps, Block *blk)
{
    if (ps->parallel)
        kir_fail(ps, "a check cannot be inside a parallel loop");
    Expr *c = kir_expr(ps), **args = NULL;
    int n = 0, cap = 0;
    kir_expect(ps, "else");
    const char *msg = kir_string(ps);
    while (kir_accept(ps, ","))
        ARR_PUSH(ps->a, args, n, cap, kir_expr(ps));
    kir_end(ps);
    check_format(ps, msg, n);
    Stmt *s = s_check(ps->a, blk, c, msg, args, n);
    kir_next_line(ps);
    return s;
}

/* local = "local" bN NL */
static Stmt *local(Parser *ps, Block *blk)
{
    int id = kir_ref(ps, 'b');
    if (id < 0 || id >= ps->prog->nbufs)
        kir_fail(ps, "expected a buffer bN, found %s", kir_found(ps));
    Buf *b = ps->prog->bufs[id];
    if (b->kind != BK_LOCAL)
        kir_fail(ps, "b%d is a %s buffer, not a local one", id, bufkind_name(b->kind));
    kir_end(ps);
    Stmt *s = new_stmt(ps, blk, S_LOCAL);
    s->buf = b;
    ARR_PUSH(ps->a, ps->locals, ps->nlocals, ps->caplocals, b);
    kir_next_line(ps);
    return s;
}

/* tile = bN "[" [expr "+:" INT {"," expr "+:" INT}] "]" */
static Tile tile(Parser *ps)
{
    Tile t;
    memset(&t, 0, sizeof t);
    int id = kir_ref(ps, 'b'), n = 0, cap = 0;
    if (id < 0)
        kir_fail(ps, "expected a tile bN[...], found %s", kir_found(ps));
    t.buf = kir_buf(ps, id);
    kir_expect(ps, "[");
    if (!kir_accept(ps, "]")) {
        do {
            Expr *e = kir_integer(ps, arena_printf(ps->a, "index %d of b%d", n, id));
            kir_expect(ps, "+:");
            int64_t ext = kir_int(ps, "a tile's extent");
            if (n < KILN_MAX_RANK)
                t.ext[n] = ext;
            ARR_PUSH(ps->a, t.idx, n, cap, e);
        } while (kir_accept(ps, ","));
        kir_expect(ps, "]");
    }
    if (n != t.buf->rank)
        kir_fail(ps, "b%d has rank %d; %d ind%s given", id, t.buf->rank, n, n == 1 ? "ex" : "ices");
    return t;
}

/* call = "call" NAME "(" tile {"," tile} [";" expr {"," expr}] ")" NL */
static Stmt *call(Parser *ps, Block *blk)
{
    const char *name = kir_name(ps);
    int c = 0, n = 0, cap = 0, nargs = 0, capargs = 0;
    Expr **args = NULL;
    while (c < CALL_COUNT && !(name && strcmp(name, call_table[c].name) == 0))
        c++;
    if (c == CALL_COUNT)
        kir_fail(ps, "expected a micro-kernel (gemm), found %s",
                 name ? arena_printf(ps->a, "'%s'", name) : kir_found(ps));
    Tile *tiles = NULL;
    kir_expect(ps, "(");
    do
        ARR_PUSH(ps->a, tiles, n, cap, tile(ps));
    while (kir_accept(ps, ","));
    if (kir_accept(ps, ";"))
        do
            ARR_PUSH(ps->a, args, nargs, capargs, kir_expr(ps));
        while (kir_accept(ps, ","));
    kir_expect(ps, ")");
    kir_end(ps);
    Stmt *s = s_call_args(ps->a, blk, (CallKind)c, tiles, n, args, nargs);
    const char *why = ir_call_refusal(ps->a, s);
    if (why)
        kir_fail(ps, "%s", why);
    kir_next_line(ps);
    return s;
}

/* ASSIGN = "=" | "+=" | "max=" */
static AsgOp assign_op(Parser *ps)
{
    if (kir_accept(ps, "+="))
        return A_ADD;
    if (kir_accept(ps, "max="))
        return A_MAX;
    if (!kir_accept(ps, "="))
        kir_fail(ps, "expected =, += or max=, found %s", kir_found(ps));
    return A_SET;
}

/* vN ASSIGN expr NL | load ASSIGN expr NL */
static Stmt *assign(Parser *ps, Block *blk)
{
    int id;
    if ((id = kir_ref(ps, 'i')) >= 0)
        kir_fail(ps, "i%d is a loop variable: it cannot be assigned", id);
    if ((id = kir_ref(ps, 'v')) >= 0) {
        Var *v = kir_lookup(ps, VAR_LOCAL, id);
        AsgOp op = assign_op(ps);
        Expr *e = kir_expr(ps);
        kir_end(ps);
        Stmt *s = s_set(ps->a, blk, v, op, e);
        kir_next_line(ps);
        return s;
    }
    if ((id = kir_ref(ps, 'b')) < 0)
        kir_fail(ps, "expected a statement, found %s", kir_found(ps));
    Buf *b = kir_buf(ps, id);
    BufKind k = ir_storage(b)->kind;
    if (k == BK_INPUT || k == BK_WEIGHT || (k == BK_DERIVED && !ps->open))
        kir_fail(ps, "b%d is %s storage: kernels do not store to it", id, bufkind_name(k));
    if (ps->open && k != BK_DERIVED && k != BK_LOCAL)
        kir_fail(ps, "b%d is %s storage: the open program stores only to derived weights", id,
                 bufkind_name(k));
    Expr **idx = kir_indices(ps, b);
    AsgOp op = assign_op(ps);
    if (op != A_SET && ir_storage(b)->store != ST_F32)
        kir_fail(ps, "b%d is held as %s: a store to it is '='", id,
                 storage_name(ir_storage(b)->store));
    Expr *e = kir_expr(ps);
    kir_end(ps);
    Stmt *s = s_store(ps->a, blk, b, idx, op, e);
    kir_next_line(ps);
    return s;
}

/* stmt = for | let | if | check | local | call | assignment: one line, and the
 * block it opens */
static Stmt *stmt(Parser *ps, Block *blk, int depth)
{
    ps->nexpr = 0;
    ps->depth = 0;
    if (kir_accept(ps, "for"))
        return loop(ps, blk, depth);
    if (kir_accept(ps, "let"))
        return let(ps, blk);
    if (kir_accept(ps, "if"))
        return if_stmt(ps, blk, depth);
    if (kir_accept(ps, "check"))
        return check(ps, blk);
    if (kir_accept(ps, "local"))
        return local(ps, blk);
    if (kir_accept(ps, "call"))
        return call(ps, blk);
    return assign(ps, blk);
}

/* block = {stmt}, each line indented by 4 + 2 * depth; an "else" line
 * there gives the `if` just above it its else block. Notes go to the
 * kernel. */
static void block(Parser *ps, Block *blk, int depth)
{
    int want = 4 + 2 * depth, nscope = ps->nscope, nlocals = ps->nlocals;
    Stmt *open_if = NULL;
    if (depth > MAX_DEPTH)
        kir_fail(ps, "statements nest more than %d deep", MAX_DEPTH);
    while (!ps->eof) {
        if (kir_is_note(ps)) {
            ir_note(ps->a, &ps->k->notes, "%s", kir_note_text(ps));
            kir_next_line(ps);
            continue;
        }
        if (ps->indent < want)
            break;
        kir_indent(ps, want);
        if (kir_accept(ps, "else")) {
            if (!open_if)
                kir_fail(ps, "'else' without an 'if' just above it");
            kir_end(ps);
            kir_next_line(ps);
            block(ps, &open_if->els, depth + 1);
            open_if = NULL;
            continue;
        }
        Stmt *s = stmt(ps, blk, depth);
        open_if = s->kind == S_IF ? s : NULL;
    }
    ps->nscope = nscope;
    ps->nlocals = nlocals;
}

/* ---- kernels and the program ------------------------------------------- */

/* kernel = "kernel" kN NAME "(" [%N {"," %N}] ")" ["#" ANY] NL block */
static void kernel(Parser *ps, Prog *p)
{
    int id = kir_ref(ps, 'k');
    if (id != p->nkernels)
        kir_fail(ps, "expected k%d (kernel ids count up from k0), found %s", p->nkernels,
                 id < 0 ? kir_found(ps) : arena_printf(ps->a, "'k%d'", id));
    const char *name = kir_name(ps);
    if (!name)
        kir_fail(ps, "expected the kernel's name (a C identifier), found %s", kir_found(ps));
    Kernel *k = ir_kernel_new(ps->a, p, name);
    kir_expect(ps, "(");
    if (!kir_accept(ps, ")")) {
        do
            ARR_PUSH(ps->a, k->nodes, k->nnodes, k->capnodes, kir_node(ps));
        while (kir_accept(ps, ","));
        kir_expect(ps, ")");
    }
    if (!kir_at_end(ps) && !kir_accept(ps, "#"))
        kir_fail(ps, "expected the end of the line or '#', found %s", kir_found(ps));
    ps->k = k;
    ps->nvars = ps->nscope = ps->nlocals = ps->parallel = 0;
    kir_next_line(ps);
    block(ps, &k->body, 0);
}

/* Node.buf: the first buffer naming the node that is not a view (the
 * first view when there is none); a cache_write's is its state's. */
static void link_nodes(Module *m)
{
    Prog *p = m->prog;
    for (int i = 0; i < p->nbufs; i++) {
        Buf *b = p->bufs[i];
        Node *n = b->node;
        if (n && (!n->buf || (n->buf->base && !b->base)))
            n->buf = b;
    }
    for (int i = 0; i < m->nnodes; i++)
        if (m->nodes[i]->op == OP_CACHE_WRITE)
            m->nodes[i]->buf = m->nodes[i]->in[0]->buf;
}

/* The open program's derived weights are numbered 0, 1, .. (each once),
 * and every derived buffer of prog is one of them, alike. Problems are
 * reported at line (the open line, else the prog line). */
static void derived(Parser *ps, int line)
{
    Module *m = ps->m;
    int n = ir_nderived(m), end = ps->lineno;
    ps->lineno = line;
    for (int i = 0; m->open && i < m->open->nbufs; i++) {
        const Buf *b = m->open->bufs[i];
        if (b->kind == BK_DERIVED && (b->index >= n || ir_derived_made(m, b->index) != b))
            kir_fail(ps, "open b%d is derived %d: the open program's %d derived weights are "
                     "numbered 0 to %d, each once", b->id, b->index, n, n - 1);
    }
    for (int i = 0; i < m->prog->nbufs; i++) {
        const Buf *b = m->prog->bufs[i];
        if (b->kind == BK_DERIVED && !ir_derived_agree(m, b))
            kir_fail(ps, "b%d is derived %d, which the open program does not make with its "
                     "node, type and storage", b->id, b->index);
    }
    ps->lineno = end;
}

/* WHAT NAME NL {note | buf | arena} {kernel}, WHAT "prog" or "open" */
static Prog *section(Parser *ps, const char *what)
{
    Module *m = ps->m;
    if (!kir_accept(ps, what))
        kir_fail(ps, "expected '%s' or the end of the file, found %s", what, kir_found(ps));
    const char *name = kir_name(ps);
    if (!name || strcmp(name, m->name) != 0)
        kir_fail(ps, "expected the graph's name %s, found %s", m->name,
                 name ? arena_printf(ps->a, "'%s'", name) : kir_found(ps));
    kir_end(ps);
    Prog *p = ps->prog = ir_prog_new(ps->a);
    prog_header(ps, p);
    while (!ps->eof && ps->indent > 0) {
        kir_indent(ps, 2);
        kir_expect(ps, "kernel");
        kernel(ps, p);
    }
    return p;
}

void kir_prog(Parser *ps)
{
    Module *m = ps->m;
    int line = ps->lineno;
    m->prog = section(ps, "prog");
    if (!ps->eof) {
        line = ps->lineno;
        ps->open = 1;
        m->open = section(ps, "open");
    }
    derived(ps, line);
    link_nodes(m);
}
