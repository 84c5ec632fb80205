/* codegen/kernel.c: one loop-IR kernel as a C function.
 *
 * A kernel becomes `static int kN(MODEL *m)`: pointers to the buffers it
 * touches (restrict; inputs and weights const), then its statements, one
 * C statement per IR statement, in the order of the math (expressions as
 * cprint.c prints them; under the JIT, innermost nests as vec.c's rt_vec
 * programs where they qualify). A run-time check returns its status
 * through rt_errf. A loop marked parallel is outlined into
 * `kN_pJ(ctx, lo, hi)` and called through rt_parallel_for with a context
 * holding the enclosing scalars and local arrays it reads, in both
 * flavours: the runtime's pool splits iterations among threads
 * dynamically, where OpenMP's parallel for would wait at its end for a
 * thread the system has descheduled (runtime/core/rt_parallel.c).
 *
 * Kernels alike (codegen.h, "share.c") share one function: cg_kernel
 * prints each kernel first as a template, `sT(MODEL *m, void *const *p)`,
 * whose buffers are named by their place (b0 is p[0]) and whose
 * functions by a stem left blank; when another kernel printed the same
 * template, the kernel is a wrapper that fills p and calls sT. So the
 * layers of a model, alike but for their weights and arena slots, are
 * compiled once: the C holds one function per distinct kernel (noinline:
 * cc -O3 would otherwise copy it into each wrapper, which took
 * Qwen3-30B-A3B's build from 65 s to 94 s). */
#include "codegen.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ---- statements -------------------------------------------------------- */

static const char *ctype(EType t)
{
    return t == T_F32 ? "float" : t == T_I32 ? "int32_t" : "int64_t";
}

static void indent(CgCx *cx, int depth) { fprintf(cx->f, "%*s", depth * 4, ""); }

/* A kernel's C name starts k, o in the open program: kN, oN, kN_pJ. */
static char kchar(const CgCx *cx) { return cx->open ? 'o' : 'k'; }

static void assign(CgCx *cx, AsgOp op, void (*lhs)(CgCx *, const Stmt *),
                   const Stmt *s)
{
    lhs(cx, s);
    if (op == A_MAX) {
        fprintf(cx->f, " = kiln_max%s(", s->e->type == T_F32 ? "f" : "i");
        lhs(cx, s);
        fputs(", ", cx->f);
        cg_expr(cx, s->e);
        fputs(");\n", cx->f);
        return;
    }
    fputs(op == A_ADD ? " += " : " = ", cx->f);
    cg_expr(cx, s->e);
    fputs(";\n", cx->f);
}

static void lhs_var(CgCx *cx, const Stmt *s) { cg_var(cx, s->v); }
static void lhs_store(CgCx *cx, const Stmt *s) { cg_access(cx, s->buf, s->idx); }

/* A store to a 16-bit derived weight (the open program's; always `=`,
 * ir_verify_prog): the value rounded as rt_round_half rounds weights. */
static void store_half(CgCx *cx, const Stmt *s, Storage st)
{
    cg_access(cx, s->buf, s->idx);
    fputs(st == ST_BF16 ? " = rt_f32_bf16(" : " = rt_f32_f16(", cx->f);
    cg_expr(cx, s->e);
    fputs(");\n", cx->f);
}

typedef struct Outline Outline;
static void block(CgCx *cx, const Block *blk, int depth, Outline *o);

static void check(CgCx *cx, const Stmt *s, int depth)
{
    if (cx->in_parallel)
        KILN_BUG("run-time check inside a parallel loop");
    indent(cx, depth);
    fputs("if (!(", cx->f);
    cg_expr(cx, s->e);
    fputs("))\n", cx->f);
    indent(cx, depth + 1);
    fputs("return rt_errf(&m->err, RT_EINVAL, ", cx->f);
    CgNames *t = cx->names;
    if (t) {                      /* a template: the message is the kernel's */
        ARR_PUSH(cx->m->a, t->msgs, t->nmsgs, t->capmsgs, s->msg);
        fprintf(cx->f, "(const char *)p[%d]", t->nptrs + t->nmsgs - 1);
    } else {
        cg_print_cstring(cx->f, s->msg);
    }
    for (int i = 0; i < s->nargs; i++) {
        fputs(", (long long)(", cx->f);
        cg_expr(cx, s->args[i]);
        fputc(')', cx->f);
    }
    fputs(");\n", cx->f);
}

/* A kernel-local array on the stack, aligned for vector loads. */
static void local(CgCx *cx, const Buf *b, int depth)
{
    indent(cx, depth);
    fprintf(cx->f, "_Alignas(64) %s b%d[%lld];\n", b->dtype == DT_I32 ? "int32_t" : "float",
            cg_bname(cx, b), (long long)shape_count(b->rank, b->dims));
}

static int kept_gemm(const CgCx *cx, const Stmt *s);

/* qgemm: rt_gemm_TYPE(m, n, k, &A[...], lda, W, woff, ldw, &C[...], ldc),
 * W's rows from element woff (rt_quant.h); rt_gemm_q_kept(ks, TYPE, m,
 * ...) when A is kept (kept_gemm). */
static void qgemm(CgCx *cx, const Stmt *s)
{
    int64_t m, n, k, lda, ldw, ldc;
    const Tile *c = &s->tiles[0], *x = &s->tiles[1], *w = &s->tiles[2];
    ir_tile_matrix(x, &m, &k, &lda);
    ir_tile_matrix(c, &m, &n, &ldc);
    ir_tile_matrix(w, &n, &k, &ldw);
    Storage st = cg_store(w->buf);
    if (kept_gemm(cx, s)) {
        fputs("rt_gemm_q_kept(ks, RT_", cx->f);
        for (const char *p = storage_name(st); *p; p++)
            fputc(toupper((unsigned char)*p), cx->f);
        fputs(", ", cx->f);
    } else {
        fprintf(cx->f, "rt_gemm_%s(", storage_name(st));
    }
    fprintf(cx->f, "%lld, %lld, %lld, &", (long long)m, (long long)n, (long long)k);
    cg_access(cx, x->buf, x->idx);
    fprintf(cx->f, ", %lld, b%d, ", (long long)lda, cg_bname(cx, ir_storage(w->buf)));
    cg_offset(cx, w->buf, w->idx);
    fprintf(cx->f, ", %lld, &", (long long)ldw);
    cg_access(cx, c->buf, c->idx);
    fprintf(cx->f, ", %lld);\n", (long long)ldc);
}

/* attn: rt_attn(nt, nh, d, &Q[...], ldq, &K[...], ldk, &V[...], ldv,
 * &O[...], ldo, &SK[...] or NULL, p0, hi, window, scale, softcap), the
 * row strides the buffers' (kiln_rt.h). */
static void attn(CgCx *cx, const Stmt *s)
{
    static const int order[4] = {1, 2, 3, 0};
    const Tile *o = &s->tiles[0];
    fprintf(cx->f, "rt_attn(%lld, %lld, %lld", (long long)o->ext[0], (long long)o->ext[1],
            (long long)o->ext[2]);
    for (int i = 0; i < 4; i++) {
        const Tile *t = &s->tiles[order[i]];
        fputs(", &", cx->f);
        cg_access(cx, t->buf, t->idx);
        fprintf(cx->f, ", %lld", (long long)t->buf->strides[t->buf->rank - 3]);
    }
    if (s->ntiles == 5) {
        fputs(", &", cx->f);
        cg_access(cx, s->tiles[4].buf, s->tiles[4].idx);
    } else {
        fputs(", NULL", cx->f);
    }
    for (int i = 0; i < s->nargs; i++) {
        fputs(", ", cx->f);
        cg_expr(cx, s->args[i]);
    }
    fputs(");\n", cx->f);
}

/* rt_gemm(m, n, k, &A[...], lda, &B[...], ldb, &C[...], ldc): the runtime's
 * micro-kernel (pasted, so cc inlines it; a symbol for libtcc);
 * rt_gemm_bf16 or rt_gemm_f16 when B is a 16-bit weight. */
/* rt_mpi_allreduce(y, x, n) or rt_mpi_allgather(y, x, outer, row, 4):
 * x's elements before the gathered axis (outer) and from it (row). */
static void collective(CgCx *cx, const Stmt *s)
{
    const Buf *y = s->tiles[0].buf, *x = s->tiles[1].buf;
    int ax = 0;
    while (ax < x->rank - 1 && x->dims[ax] == y->dims[ax])
        ax++;
    if (s->call == CALL_ALLREDUCE)
        fprintf(cx->f, "rt_mpi_allreduce(&");
    else
        fprintf(cx->f, "rt_mpi_allgather(&");
    cg_access(cx, s->tiles[0].buf, s->tiles[0].idx);
    fputs(", &", cx->f);
    cg_access(cx, s->tiles[1].buf, s->tiles[1].idx);
    if (s->call == CALL_ALLREDUCE)
        fprintf(cx->f, ", %lld);\n", (long long)shape_count(x->rank, x->dims));
    else
        fprintf(cx->f, ", %lld, %lld, 4);\n", (long long)shape_count(ax, x->dims),
                (long long)shape_count(x->rank - ax, x->dims + ax));
}

/* Whether s is a gemm of 16 rows or more whose A the kernel never writes,
 * on a bf16 B (rt_gemm_bf16_kept) or a weight whose blocks A is quantized
 * for (rt_gemm_q_kept), under the scope ks that the kernel's function
 * takes at its start (render) and hands its parallel loops' bodies:
 * the runtime then rounds or quantizes each A once a kernel and thread,
 * not once a call of 64 or 128 columns. */
static int kept_gemm(const CgCx *cx, const Stmt *s)
{
    int64_t m, k, ld;
    if (s->kind != S_CALL || !ir_tile_matrix(&s->tiles[1], &m, &k, &ld) || m < 16 ||
        ir_block_writes((Block *)&cx->kernel->body, s->tiles[1].buf))
        return 0;
    Storage st = cg_store(s->tiles[2].buf);
    if (s->call == CALL_GEMM)
        return st == ST_BF16;
    return s->call == CALL_QGEMM && ((st >= ST_Q8_0 && st <= ST_Q6_K) || st == ST_MXFP4);
}

/* Whether blk holds a kept_gemm. */
static int has_kept(const CgCx *cx, const Block *blk)
{
    for (int i = 0; i < blk->n; i++) {
        const Stmt *s = blk->s[i];
        if (kept_gemm(cx, s) || has_kept(cx, &s->body) || has_kept(cx, &s->els))
            return 1;
    }
    return 0;
}

static void call(CgCx *cx, const Stmt *s, int depth)
{
    static const int order[3] = {1, 2, 0};   /* A, B, then C, the one written */
    int64_t m, n, k, ld;
    indent(cx, depth);
    if (s->call == CALL_QGEMM) {
        qgemm(cx, s);
        return;
    }
    if (s->call == CALL_ATTN) {
        attn(cx, s);
        return;
    }
    if (s->call == CALL_ALLREDUCE || s->call == CALL_ALLGATHER) {
        collective(cx, s);
        return;
    }
    if (s->call == CALL_RANK) {               /* rank(Y): the core's rt_ranks_now */
        cg_access(cx, s->tiles[0].buf, s->tiles[0].idx);
        fputs(" = rt_ranks_now()->rank;\n", cx->f);
        return;
    }
    ir_tile_matrix(&s->tiles[1], &m, &k, &ld);
    ir_tile_matrix(&s->tiles[0], &m, &n, &ld);
    Storage st = cg_store(s->tiles[2].buf);
    int kept = kept_gemm(cx, s);
    fprintf(cx->f, "rt_%s%s(%s%lld, %lld, %lld", call_table[s->call].name,
            kept ? "_bf16_kept" : st == ST_BF16 ? "_bf16" : st == ST_F16 ? "_f16" : "",
            kept ? "ks, " : "", (long long)m, (long long)n, (long long)k);
    for (int i = 0; i < s->ntiles; i++) {
        const Tile *t = &s->tiles[order[i]];
        int64_t rows, cols;
        ir_tile_matrix(t, &rows, &cols, &ld);
        fputs(", &", cx->f);
        cg_access(cx, t->buf, t->idx);
        fprintf(cx->f, ", %lld", (long long)ld);
    }
    fputs(");\n", cx->f);
}

static void loop_head(CgCx *cx, const Stmt *s, int depth)
{
    indent(cx, depth);
    fputs("for (int64_t ", cx->f);
    cg_var(cx, s->v);
    fputs(" = ", cx->f);
    cg_expr(cx, s->lo);
    fputs("; ", cx->f);
    cg_var(cx, s->v);
    fputs(" < ", cx->f);
    cg_operand(cx, s->hi, 5, 0);
    fputs("; ", cx->f);
    cg_var(cx, s->v);
    fputs("++) {\n", cx->f);
}

static void parallel_loop(CgCx *cx, const Stmt *s, int depth, Outline *o);

static void stmt(CgCx *cx, const Stmt *s, int depth, Outline *o)
{
    switch (s->kind) {
    case S_LOOP:
        if (cx->vec && cg_vec_nest(cx, s, depth))
            return;
        if (s->marks & MARK_PARALLEL) {
            parallel_loop(cx, s, depth, o);
            return;
        }
        if (s->marks & MARK_VECTOR) {     /* lanes never touch one another's elements */
            indent(cx, depth);
            fputs("#pragma omp simd\n", cx->f);
        }
        loop_head(cx, s, depth);
        block(cx, &s->body, depth + 1, o);
        indent(cx, depth);
        fputs("}\n", cx->f);
        return;
    case S_LET:
        indent(cx, depth);
        fprintf(cx->f, "%s ", ctype(s->v->type));
        cg_var(cx, s->v);
        fputs(" = ", cx->f);
        cg_expr(cx, s->e);
        fputs(";\n", cx->f);
        return;
    case S_SET: indent(cx, depth); assign(cx, s->op, lhs_var, s); return;
    case S_STORE:
        indent(cx, depth);
        if (cg_store(s->buf) != ST_F32)
            store_half(cx, s, cg_store(s->buf));
        else
            assign(cx, s->op, lhs_store, s);
        return;
    case S_IF:
        indent(cx, depth);
        fputs("if (", cx->f);
        cg_expr(cx, s->e);
        fputs(") {\n", cx->f);
        block(cx, &s->body, depth + 1, o);
        if (s->els.n) {
            indent(cx, depth);
            fputs("} else {\n", cx->f);
            block(cx, &s->els, depth + 1, o);
        }
        indent(cx, depth);
        fputs("}\n", cx->f);
        return;
    case S_CHECK: check(cx, s, depth); return;
    case S_LOCAL: local(cx, s->buf, depth); return;
    case S_CALL: call(cx, s, depth); return;
    }
}

/* ---- buffers a kernel touches ----------------------------------------- */

typedef struct {
    const Buf **v;
    int n, cap;
    Arena *a;
    int outer;                    /* not inside parallel loops: outlined */
} BufSet;

static void use_buf(BufSet *u, const Buf *b)
{
    if (b->base)
        b = b->base;
    if (b->kind == BK_LOCAL)
        return;                   /* declared where it is used */
    for (int i = 0; i < u->n; i++)
        if (u->v[i] == b)
            return;
    ARR_PUSH(u->a, u->v, u->n, u->cap, b);
}

static void uses_expr(BufSet *u, const Expr *e)
{
    if (!e)
        return;
    if (e->kind == E_LOAD) {
        use_buf(u, e->buf);
        for (int i = 0; i < e->buf->rank; i++)
            uses_expr(u, e->idx[i]);
    }
    uses_expr(u, e->a);
    uses_expr(u, e->b);
    uses_expr(u, e->c);
}

static void uses_block(BufSet *u, const Block *blk)
{
    for (int i = 0; i < blk->n; i++) {
        const Stmt *s = blk->s[i];
        uses_expr(u, s->lo);
        uses_expr(u, s->hi);
        uses_expr(u, s->e);
        if (s->kind == S_STORE) {
            use_buf(u, s->buf);
            for (int j = 0; j < s->buf->rank; j++)
                uses_expr(u, s->idx[j]);
        }
        for (int j = 0; j < s->nargs; j++)
            uses_expr(u, s->args[j]);
        for (int j = 0; j < s->ntiles; j++) {
            use_buf(u, s->tiles[j].buf);
            for (int d = 0; d < s->tiles[j].buf->rank; d++)
                uses_expr(u, s->tiles[j].idx[d]);
        }
        if (!(u->outer && s->kind == S_LOOP && (s->marks & MARK_PARALLEL)))
            uses_block(u, &s->body);
        uses_block(u, &s->els);
    }
}

static int by_id(const void *x, const void *y)
{
    const Buf *a = *(const Buf *const *)x, *b = *(const Buf *const *)y;
    return a->id - b->id;
}

/* The storages the block touches, by id; outer: but for the bodies of
 * its parallel loops. */
static BufSet storages(CgCx *cx, const Block *blk, int outer)
{
    BufSet u = {NULL, 0, 0, cx->m->a, outer};
    uses_block(&u, blk);
    if (u.n)                          /* qsort(NULL, 0) is undefined */
        qsort(u.v, (size_t)u.n, sizeof *u.v, by_id);
    return u;
}

/* Where the pointer to storage b comes from, as a pointer to t; t NULL:
 * as a void * (a wrapper's p[i]). */
static void pointer_to(CgCx *cx, const Buf *b, const char *t)
{
    FILE *f = cx->f;
    switch (b->kind) {
    case BK_INPUT:
        if (t)
            fprintf(f, "(const %s *)m->in[%d]", t, b->index);
        else
            fprintf(f, "(void *)m->in[%d]", b->index);
        break;
    case BK_OUTPUT:
        if (t)
            fprintf(f, "(%s *)", t);
        fprintf(f, "m->out[%d]", b->index);
        break;
    case BK_WEIGHT:
    case BK_DERIVED: fprintf(f, "m->w[%d]", ir_held_index(cx->m, b)); break;
    case BK_STATE: fprintf(f, "m->s[%d]", b->index); break;
    case BK_TEMP:
        if (t)
            fprintf(f, "(%s *)(m->arena + %lld)", t, (long long)b->arena_off);
        else
            fprintf(f, "m->arena + %lld", (long long)b->arena_off);
        break;
    case BK_LOCAL: KILN_BUG("local b%d declared as a pointer", b->id);
    }
}

/* Declares a pointer for every buffer the block touches; outer: but for
 * the bodies of its parallel loops, which declare their own. In a
 * template each comes from p, in its place. */
static void declare_bufs(CgCx *cx, const Block *blk, int depth, int outer)
{
    BufSet u = storages(cx, blk, outer);
    for (int i = 0; i < u.n; i++) {
        const Buf *b = u.v[i];
        const char *t = b->dtype == DT_I32      ? "int32_t"
                        : storage_block(b->store) ? "uint8_t"
                        : b->store                ? "uint16_t"
                                                  : "float";
        int ro = b->kind == BK_INPUT || b->kind == BK_WEIGHT ||
                 (b->kind == BK_DERIVED && !cx->open);
        indent(cx, depth);
        fprintf(cx->f, "%s%s *restrict b%d = ", ro ? "const " : "", t, cg_bname(cx, b));
        if (cx->names) {
            fprintf(cx->f, "p[%d];\n", cg_bname(cx, b));
            continue;
        }
        pointer_to(cx, b, t);
        fputs(";\n", cx->f);
    }
}

/* ---- outlined parallel loops ------------------------------------------ */

/* Scalars in scope at the parallel loop: enclosing loop variables and
 * locals, which the outlined body receives through its context, as it
 * receives the local arrays in scope (a row computed before the loop). */
struct Outline {
    const Var **scope;
    int nscope, cap;
    const Buf **arrays;
    int narrays, acap;
    int count;                    /* parallel loops outlined so far */
    FILE *fns;                    /* outlined functions, printed first */
};

static const char *array_type(const Buf *b) { return b->dtype == DT_I32 ? "int32_t" : "float"; }

/* kept: the body has a kept_gemm, so its context carries the kernel's ks. */
static void outline_fn(CgCx *cx, const Stmt *s, Outline *o, int j, int kept)
{
    CgCx in = *cx;
    in.f = o->fns;
    in.fl = CG_CC;                /* the body is serial C */
    in.in_parallel = 1;
    FILE *f = o->fns;
    const char *st = cx->stem;
    fprintf(f, "struct %s_p%d_ctx {\n    %s *m;\n", st, j, cx->model_type);
    if (cx->names)
        fputs("    void *const *p;\n", f);
    for (int i = 0; i < o->nscope; i++) {
        fprintf(f, "    %s ", ctype(o->scope[i]->type));
        cg_var(&in, o->scope[i]);
        fputs(";\n", f);
    }
    for (int i = 0; i < o->narrays; i++)
        fprintf(f, "    %s *b%d;\n", array_type(o->arrays[i]), cg_bname(&in, o->arrays[i]));
    if (kept)
        fputs("    uint64_t ks;\n", f);
    fputs("};\n\n", f);
    fprintf(f, "static void %s_p%d(void *ctx, int64_t lo, int64_t hi)\n{\n", st, j);
    fprintf(f, "    const struct %s_p%d_ctx *c = ctx;\n    %s *m = c->m;\n", st, j,
            cx->model_type);
    if (cx->names)
        fputs("    void *const *p = c->p;\n", f);
    for (int i = 0; i < o->nscope; i++) {
        fprintf(f, "    %s ", ctype(o->scope[i]->type));
        cg_var(&in, o->scope[i]);
        fputs(" = c->", f);
        cg_var(&in, o->scope[i]);
        fputs(";\n", f);
    }
    for (int i = 0; i < o->narrays; i++)
        fprintf(f, "    %s *b%d = c->b%d;\n", array_type(o->arrays[i]), cg_bname(&in, o->arrays[i]),
                cg_bname(&in, o->arrays[i]));
    if (kept)
        fputs("    const uint64_t ks = c->ks;\n", f);
    if (cx->names)
        fputs("    (void)m;\n    (void)p;\n", f);
    for (int i = 0; i < o->nscope; i++) {
        fputs("    (void)", f);
        cg_var(&in, o->scope[i]);
        fputs(";\n", f);
    }
    for (int i = 0; i < o->narrays; i++)
        fprintf(f, "    (void)b%d;\n", cg_bname(&in, o->arrays[i]));
    declare_bufs(&in, &s->body, 1, 0);
    fputs("    for (int64_t ", f);
    cg_var(&in, s->v);
    fputs(" = lo + ", f);
    cg_operand(&in, s->lo, 5, 0);
    fputs("; ", f);
    cg_var(&in, s->v);
    fputs(" < hi + ", f);
    cg_operand(&in, s->lo, 5, 0);
    fputs("; ", f);
    cg_var(&in, s->v);
    fputs("++) {\n", f);
    block(&in, &s->body, 2, NULL);
    fputs("    }\n}\n\n", f);
}

static void parallel_loop(CgCx *cx, const Stmt *s, int depth, Outline *o)
{
    if (!o)
        KILN_BUG("nested parallel loops");
    int j = o->count++;
    int kept = has_kept(cx, &s->body);
    outline_fn(cx, s, o, j, kept);
    indent(cx, depth);
    fprintf(cx->f, "{\n");
    indent(cx, depth + 1);
    fprintf(cx->f, "struct %s_p%d_ctx c = {m%s", cx->stem, j, cx->names ? ", p" : "");
    for (int i = 0; i < o->nscope; i++) {
        fputs(", ", cx->f);
        cg_var(cx, o->scope[i]);
    }
    for (int i = 0; i < o->narrays; i++)
        fprintf(cx->f, ", b%d", cg_bname(cx, o->arrays[i]));
    if (kept)
        fputs(", ks", cx->f);
    fputs("};\n", cx->f);
    indent(cx, depth + 1);
    fprintf(cx->f, "rt_parallel_for(%s_p%d, &c, ", cx->stem, j);
    cg_operand(cx, s->hi, 5, 0);
    fputs(" - ", cx->f);
    cg_operand(cx, s->lo, 6, 1);
    fputs(");\n", cx->f);
    indent(cx, depth);
    fputs("}\n", cx->f);
}

static void block(CgCx *cx, const Block *blk, int depth, Outline *o)
{
    int mark = o ? o->nscope : 0, marka = o ? o->narrays : 0;
    for (int i = 0; i < blk->n; i++) {
        const Stmt *s = blk->s[i];
        if (o && s->kind == S_LOOP && !(s->marks & MARK_PARALLEL)) {
            ARR_PUSH(cx->m->a, o->scope, o->nscope, o->cap, s->v);
            stmt(cx, s, depth, o);
            o->nscope--;
            continue;
        }
        stmt(cx, s, depth, o);
        if (o && s->kind == S_LET)
            ARR_PUSH(cx->m->a, o->scope, o->nscope, o->cap, s->v);
        if (o && s->kind == S_LOCAL)
            ARR_PUSH(cx->m->a, o->arrays, o->narrays, o->acap, s->buf);
    }
    if (o) {
        o->nscope = mark;
        o->narrays = marka;
    }
}

/* ---- the kernel function ---------------------------------------------- */

static void comment(CgCx *cx, const Kernel *k)
{
    fprintf(cx->f, "/* %c%d %s:", kchar(cx), k->id, k->name);
    for (int i = 0; i < k->nnodes; i++)
        fprintf(cx->f, "%s %%%d = %s", i ? ";" : "", k->nodes[i]->id,
                op_table[k->nodes[i]->op].name);
    fputs(" */\n", cx->f);
}

/* k's functions as C: the outlined parallel bodies in *fns, then the
 * kernel's own, named by cx->stem; with names, a template, over p. */
static char *render(CgCx *cx, const Kernel *k, CgNames *names, char **fns)
{
    Arena *a = cx->m->a;
    FILE *bf = arena_stream(a), *ff = arena_stream(a);
    Outline o = {NULL, 0, 0, NULL, 0, 0, 0, ff};
    CgCx in = *cx;
    in.f = bf;
    in.names = names;
    in.kernel = k;
    declare_bufs(&in, &k->body, 1, 1);
    if (has_kept(&in, &k->body))
        fputs("    const uint64_t ks = rt_keep_scope();\n", bf);
    block(&in, &k->body, 1, &o);
    char *body = arena_stream_text(a, bf);
    *fns = arena_stream_text(a, ff);
    if (names)      /* not inlined into its wrappers: they would each hold a copy */
        return arena_printf(a, "static __attribute__((noinline)) int %s(%s *m, void *const *p)\n"
                            "{\n    (void)m;\n"
                            "    (void)p;\n%s    return 0;\n}\n\n", cx->stem,
                            cx->model_type, body);
    return arena_printf(a, "static int %s(%s *m)\n{\n%s    return 0;\n}\n\n", cx->stem,
                        cx->model_type, body);
}

/* A template stem no C name can hold: a byte that names and messages
 * print escaped. */
#define TSTEM "\001"

/* k as a template (stem TSTEM), all its functions; its buffers' names
 * in *names, the storages first, in p's order. */
static char *template_of(CgCx *cx, const Kernel *k, CgNames *names)
{
    BufSet u = storages(cx, &k->body, 0);
    memset(names, 0, sizeof *names);
    for (int i = 0; i < u.n; i++)
        ARR_PUSH(cx->m->a, names->v, names->n, names->cap, u.v[i]);
    names->nptrs = u.n;
    CgCx t = *cx;
    t.stem = TSTEM;
    char *fns, *fn = render(&t, k, names, &fns);
    return arena_printf(cx->m->a, "%s%s", fns, fn);
}

void cg_kernel_count(CgCx *cx, const Kernel *k)
{
    CgNames names;
    cg_share_find(cx->share, template_of(cx, k, &names))->uses++;
}

/* text with every TSTEM made stem. */
static void put_stem(FILE *f, const char *text, const char *stem)
{
    for (const char *at; (at = strchr(text, TSTEM[0])); text = at + 1) {
        fwrite(text, 1, (size_t)(at - text), f);
        fputs(stem, f);
    }
    fputs(text, f);
}

/* b as a ref of a call table (CgCalls): what pointer_to would print. */
static void ref_to(CgCx *cx, const Buf *b)
{
    FILE *f = cx->calls->refs;
    switch (b->kind) {
    case BK_WEIGHT:
    case BK_DERIVED: fprintf(f, "{'w', %d}", ir_held_index(cx->m, b)); break;
    case BK_STATE: fprintf(f, "{'s', %d}", b->index); break;
    case BK_TEMP: fprintf(f, "{'a', %lld}", (long long)b->arena_off); break;
    default: KILN_BUG("a call table row points to b%d, an input or output", b->id);
    }
}

/* k's row of cx->calls, over template t (NULL: k's own function). */
static void call_row(CgCx *cx, const Kernel *k, const CgShared *t, const CgNames *names)
{
    CgCalls *c = cx->calls;
    if (!t) {
        fprintf(c->rows, "    {%c%d, NULL, 0, 0},", kchar(cx), k->id);
    } else {
        int n = names->nptrs + names->nmsgs;
        fprintf(c->rows, "    {NULL, s%d, %d, %d},", t->n, n, c->nrefs);
        for (int i = 0; i < names->nptrs; i++, c->nrefs++) {
            fputs(c->nrefs % 4 ? " " : "\n    ", c->refs);
            ref_to(cx, names->v[i]);
            fputc(',', c->refs);
        }
        for (int i = 0; i < names->nmsgs; i++, c->nrefs++, c->nmsgs++) {
            fprintf(c->refs, "%s{'m', %d},", c->nrefs % 4 ? " " : "\n    ", c->nmsgs);
            fputs("\n    ", c->msgs);
            cg_print_cstring(c->msgs, names->msgs[i]);
            fputc(',', c->msgs);
        }
        c->maxrefs = n > c->maxrefs ? n : c->maxrefs;
    }
    fprintf(c->rows, "   /* %c%d %s */\n", kchar(cx), k->id, k->name);
    c->nrows++;
}

void cg_kernel(CgCx *cx, const Kernel *k)
{
    Arena *a = cx->m->a;
    CgCx in = *cx;
    in.stem = arena_printf(a, "%c%d", kchar(cx), k->id);
    CgNames names;
    CgShared *t = cx->share ? cg_share_find(cx->share, template_of(cx, k, &names)) : NULL;
    if (!t || t->uses < 2) {
        char *fns, *fn = render(&in, k, NULL, &fns);
        fputs(fns, cx->f);
        comment(cx, k);
        fputs(fn, cx->f);
        if (cx->calls)
            call_row(cx, k, NULL, NULL);
        return;
    }
    if (t->n < 0) {
        t->n = cg_share_next(cx->share);
        fprintf(cx->f, "/* s%d: the code of %d kernels that differ only in the buffers they "
                       "point to (and the names in their messages) */\n", t->n, t->uses);
        put_stem(cx->f, t->text, arena_printf(a, "s%d", t->n));
    }
    if (cx->calls) {
        call_row(cx, k, t, &names);
        return;
    }
    comment(cx, k);
    fprintf(cx->f, "static int %s(%s *m)\n{\n", in.stem, cx->model_type);
    if (names.nptrs + names.nmsgs) {
        fprintf(cx->f, "    void *const p[%d] = {", names.nptrs + names.nmsgs);
        for (int i = 0; i < names.nptrs; i++) {
            fputs(i ? ", " : "", cx->f);
            pointer_to(&in, names.v[i], NULL);
        }
        for (int i = 0; i < names.nmsgs; i++) {
            fputs(names.nptrs + i ? ",\n        " : "", cx->f);
            cg_print_cstring(cx->f, names.msgs[i]);
        }
        fprintf(cx->f, "};\n    return s%d(m, p);\n}\n\n", t->n);
    } else {
        fprintf(cx->f, "    return s%d(m, NULL);\n}\n\n", t->n);
    }
}
