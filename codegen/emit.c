/* codegen/emit.c: the whole C program of a lowered module.
 *
 * Layout of the file (cc flavour; the JIT flavour differs where noted):
 *   1. a header comment: model, counts, how to build it;
 *   2. the runtime parts the program uses (cg_rt_uses): their headers,
 *      then their code (JIT, and cc builds that link the parts' objects:
 *      the headers only; kiln hands its own runtime to libtcc as symbols);
 *   3. the tensor tables (rt_tensor_info) and weights' inline init data;
 *   4. the handle struct, one function per kernel (kernel.c), and the
 *      open program's (oN, run once by NAME_open: passes/hoist.c);
 *   5. the kernel table (names and costs, for profiles) and the public
 *      API: NAME_open/status/error/run/reset/close;
 *   6. the rt_model descriptor and a thin main (cc only, unless
 *      KILN_NO_MAIN is defined, as for --lib).
 * User names appear only inside escaped string literals. */
#include "codegen.h"

#include <stdlib.h>
#include <string.h>

static int count_nonzero(int n) { return n ? n : 1; }

/* ---- tables -------------------------------------------------------------- */

/* quant: the program has the quantized part (rt_dequantize widens a GGUF's
 * blocks held otherwise); tensors: the name of its kiln_tensorsI (NULL:
 * none). */
static void info_row(FILE *f, const rt_tensor_info *t, const char *data, const char *tensors,
                     int quant)
{
    fputs("    {", f);
    cg_print_cstring(f, t->name);
    fprintf(f, ", %s, %d, {", t->dtype == RT_I32 ? "RT_I32" : "RT_F32", t->rank);
    for (int i = 0; i < t->rank; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    fprintf(f, "%s}, %lld, %d, %.17g, %lluull, %.17g, %s, %lld", t->rank ? "" : "0",
            (long long)t->count, t->init, t->fill, (unsigned long long)t->seed, t->scale,
            data ? data : "NULL", (long long)t->hi);
    /* how it is held: 16-bit or quantized for a weight of --weight-dtype */
    static const char *const stores[] = {"RT_F32",     "RT_F32",  "RT_BF16", "RT_F16",
                                         "RT_Q8_0",    "RT_Q4_0", "RT_Q4_K", "RT_Q6_K",
                                         "RT_F32",     "RT_F8_E4M3", "RT_MXFP4"};
    fprintf(f, ", %s, %s, %lld, %s, %d, %lld, %s},\n", stores[t->store],
            storage_block((Storage)t->store) ? "rt_quantize" : "NULL", (long long)t->panel,
            quant ? "rt_dequantize" : "NULL", t->shard_axis, (long long)t->shard_of,
            tensors ? tensors : "NULL");
}

static void table(FILE *f, const char *name, const rt_tensor_info *t, int n, int quant)
{
    fprintf(f, "static const rt_tensor_info %s[%d] = {\n", name, count_nonzero(n));
    for (int i = 0; i < n; i++) {
        char data[32], tensors[32];
        snprintf(data, sizeof data, "kiln_data%d", i);
        snprintf(tensors, sizeof tensors, "kiln_tensors%d", i);
        info_row(f, &t[i], t[i].init == RT_INIT_DATA ? data : NULL,
                 t[i].tensors ? tensors : NULL, quant);
    }
    if (!n)
        fputs("    {0},\n", f);
    fputs("};\n", f);
}

/* The tensors of the weights file a weight reads, one per rank
 * (rt_tensor_info.tensors): kiln_tensorsI, NULL-terminated. */
static void rank_tensors(FILE *f, const rt_tensor_info *w, int n)
{
    for (int i = 0; i < n; i++) {
        if (!w[i].tensors)
            continue;
        fprintf(f, "static const char *const kiln_tensors%d[] = {", i);
        for (int r = 0; w[i].tensors[r]; r++) {
            cg_print_cstring(f, w[i].tensors[r]);
            fputs(", ", f);
        }
        fputs("NULL};\n", f);
    }
}

static void init_data(FILE *f, const Module *m)
{
    for (int i = 0; i < m->nweights; i++) {
        const Node *w = m->weights[i];
        if (w->init.kind != INIT_DATA)
            continue;
        int64_t n = node_count(w);
        fprintf(f, "static const float kiln_data%d[%lld] = {", i, (long long)n);
        for (int64_t j = 0; j < n; j++) {
            fputs(j % 8 ? " " : "\n    ", f);
            cg_print_float(f, w->init.data[j]);
            fputc(',', f);
        }
        fputs("\n};\n", f);
    }
}

/* What an open-program kernel computes that two compilers may round
 * differently (OR of these bits): MUL and ADD together may fuse into an
 * FMA (the system cc contracts them; tcc does not); LIBM is a function
 * whose result is the implementation's (exp, tanh, ...: rt_vec's in the
 * JIT); SUM an accumulation or a gemm call, whose order vectorizing
 * changes. One correctly rounded operation (+, -, *, /, sqrt) gives the
 * same bits anywhere. */
enum { ROUND_MUL = 1, ROUND_ADD = 2, ROUND_LIBM = 4, ROUND_SUM = 8 };

static int round_bits(const Expr *e)
{
    if (!e)
        return 0;
    int r = round_bits(e->a) | round_bits(e->b) | round_bits(e->c);
    if (e->kind == E_BIN && e->type == T_F32)
        r |= e->op == B_MUL ? ROUND_MUL : e->op == B_ADD || e->op == B_SUB ? ROUND_ADD : 0;
    if (e->kind == E_UN && e->type == T_F32 && e->op != U_NEG && e->op != U_ABS &&
        e->op != U_SQRT && e->op != U_RSQRT && e->op != U_TOF32)
        r |= ROUND_LIBM;
    return r;
}

static void round_stmt(Stmt *s, void *ctx)
{
    int *r = ctx;
    if (s->kind == S_CALL || (s->kind == S_STORE && s->op == A_ADD) ||
        (s->kind == S_SET && s->op == A_ADD && s->v->type == T_F32))
        *r |= ROUND_SUM;
    *r |= round_bits(s->e);
}

/* Whether the open program's bytes depend on the compiler that runs it:
 * a kernel of it that rounds in a way two compilers may not share. One
 * that copies, selects, converts or does one operation an element (an
 * imported MoE's stacking of its experts, gemma's 1 + w) makes the same
 * bytes under the system cc and tcc. */
static int open_compiler_bound(const Module *m)
{
    for (int i = 0; m->open && i < m->open->nkernels; i++) {
        int r = 0;
        ir_block_walk(&m->open->kernels[i]->body, round_stmt, &r);
        if ((r & (ROUND_MUL | ROUND_ADD)) == (ROUND_MUL | ROUND_ADD) || r & (ROUND_LIBM | ROUND_SUM))
            return 1;
    }
    return 0;
}

/* The layout of the held weights, which names their image (rt_image.c):
 * a hash of all that makes their bytes from a weights file: the module
 * (its buffers, stores, panels and open program), the runtime parts that
 * load, convert, quantize and pack (core, quant, GGUF: one set, so that a
 * build and the JIT share the image; their bytes are GGML's or exact
 * conversions whoever compiles them), kiln's version and, when the open
 * program's bytes depend on its compiler, the flavour (which runs it). */
static void layout(FILE *f, const Module *m, CgFlavour fl)
{
    const char *flavour = !open_compiler_bound(m) ? "" : fl == CG_JIT ? "jit" : "cc";
    const char *parts[] = {"kiln " KILN_VERSION, flavour, ir_module_text(m)};
    CgSha256 h;
    char hex[65];
    unsigned makers = 1u << CG_RT_CORE | 1u << CG_RT_QUANT | 1u << CG_RT_GGUF;
    cg_sha256_init(&h);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        cg_sha256_add(&h, parts[i], strlen(parts[i]) + 1);
    for (int p = 0; p < CG_RT_NPARTS; p++)
        if (makers >> p & 1)
            cg_sha256_add(&h, cg_rt_parts[p].body, strlen(cg_rt_parts[p].body) + 1);
    cg_sha256_hex(&h, hex);
    fprintf(f, "static const char kiln_layout[] = \"%s\";\n", hex);
}

/* ---- the handle and the API ---------------------------------------------- */

/* The arena serves every shape variant (one runs at a time): the largest. */
static long long arena_bytes(const Module *m)
{
    long long n = m->prog->arena_bytes;
    for (int i = 0; i < m->nvariants; i++)
        if (m->variants[i]->prog->arena_bytes > n)
            n = m->variants[i]->prog->arena_bytes;
    return n;
}

static void handle(FILE *f, const Module *m)
{
    fprintf(f, "struct %s_model {\n", m->name);
    fputs("    rt_err err;\n    int opened;                  /* weights loaded */\n", f);
    fprintf(f, "    unsigned char *arena;        /* intermediates: %lld bytes */\n",
            arena_bytes(m));
    fprintf(f, "    void *w[%d];                 /* weights: f32, 16-bit or blocks (kiln_weights' store)%s */\n",
            count_nonzero(m->nweights + ir_nderived(m)), m->open ? ", then derived" : "");
    fprintf(f, "    float *s[%d];                /* state */\n", count_nonzero(m->nstates));
    fputs("    const void *const *in;       /* this call's inputs */\n", f);
    fputs("    void *const *out;            /* this call's outputs */\n", f);
    fputs("    rt_profile *prof;            /* kernel timers (--profile); NULL: off */\n", f);
    fputs("    rt_image image;              /* w's image, when mapped (rt_image.c) */\n};\n\n", f);
}

/* Weights the tile pass packed (Buf.packed) change layout once loaded
 * (derived weights once made): [.., N, K] into panels [.., N/P, K, P];
 * most as they load (rt_tensor_info.panel), the others here. */
static void pack_weights(FILE *f, const Module *m, const rt_tensor_info *weights)
{
    for (int i = 0; i < m->prog->nbufs; i++) {
        const Buf *b = m->prog->bufs[i];
        if (!b->packed || (b->kind == BK_WEIGHT && weights[b->index].panel))
            continue;
        int r = b->rank;
        long long batch = shape_count(r - 3, b->dims), panels = b->dims[r - 3],
                  k = b->dims[r - 2], p = b->dims[r - 1];
        fprintf(f, "    /* b%d: [%lld, %lld] as %lld panels [%lld, %lld] */\n", b->id, panels * p, k,
                panels, k, p);
        fprintf(f, "    m->opened = m->opened && rt_pack_panels(&m->w[%d], %lld, %lld, %lld, %lld, "
                "%d, &m->err) == 0;\n", ir_held_index(m, b), batch, panels * p, k, p,
                (int)storage_bytes(b->store, 1));
    }
}

static void read_at_run(const Module *m, char *read);

/* The bytes of each held buffer (ir_held_index) once open: a weight's
 * and a derived weight's as held (2 an element when 16-bit); 0 for those
 * the open program frees (read by no kernel of a run). */
static void held_bytes(FILE *f, const Module *m, const rt_tensor_info *weights)
{
    int n = m->nweights + ir_nderived(m);
    unsigned long long *b = arena_alloc(m->a, sizeof *b * ((size_t)n + 1));
    char *read = arena_alloc(m->a, (size_t)n + 1);
    for (int i = 0; i < m->nweights; i++)
        b[i] = (unsigned long long)storage_bytes((Storage)weights[i].store, weights[i].count);
    for (int i = 0; m->open && i < m->open->nbufs; i++) {
        const Buf *d = m->open->bufs[i];
        if (d->kind == BK_DERIVED)
            b[ir_held_index(m, d)] =
                (unsigned long long)storage_bytes(d->store, shape_count(d->rank, d->dims));
    }
    if (m->open) {
        read_at_run(m, read);
        for (int i = 0; i < n; i++)
            b[i] = read[i] ? b[i] : 0;
    }
    fprintf(f, "    static const size_t held[%d] = {", n ? n : 1);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%lluu,", i % 8 ? " " : "\n        ", b[i]);
    fputs(n ? "\n    };\n" : "0};\n", f);
}

static void api_open(FILE *f, const Module *m, const rt_tensor_info *weights)
{
    const char *n = m->name;
    int nheld = m->nweights + ir_nderived(m);
    fprintf(f, "%s_model *%s_open(const char *weights_path)\n{\n", n, n);
    fprintf(f, "    %s_model *m = calloc(1, sizeof *m);\n    if (!m)\n        return NULL;\n", n);
    fprintf(f, "    m->arena = rt_alloc(%lldu);\n", arena_bytes(m));
    fprintf(f, "    int ok = m->arena != NULL;\n");
    for (int i = 0; i < m->nstates; i++)
        fprintf(f, "    ok = ok && (m->s[%d] = rt_alloc_lazy(%lluu)) != NULL;\n", i,
                (unsigned long long)node_bytes(m->states[i]));
    fputs("    if (!ok) {\n        rt_errf(&m->err, RT_EINTERNAL, \"out of memory\");\n"
          "        return m;\n    }\n", f);
    fputs("    /* the held weights: mapped from their image when there is one, else\n"
          "     * loaded, prepared and kept as one for the next open (rt_image.c) */\n", f);
    held_bytes(f, m, weights);
    fprintf(f, "    if (rt_image_open(kiln_layout, weights_path, %d, m->w, held, &m->image)) {\n"
               "        m->opened = 1;\n        return m;\n    }\n    double t0 = rt_now();\n", nheld);
    fprintf(f, "    m->opened = rt_load_weights(weights_path, kiln_weights, %d, m->w, &m->err) == 0;\n",
            m->nweights);
    if (m->open)
        fputs("    m->opened = m->opened && kiln_open_kernels(m) == 0;\n", f);
    pack_weights(f, m, weights);
    fprintf(f, "    if (m->opened)\n        rt_image_save(kiln_layout, weights_path, %d, m->w, held, rt_now() - t0);\n",
            nheld);
    fputs("    return m;\n}\n\n", f);
}

/* ---- the open program ------------------------------------------------------ */

/* The weights and derived weights that some kernel of some shape variant
 * reads at run time: read[i] = 1 (i: ir_held_index). */
static void read_at_run(const Module *m, char *read)
{
    ir_held_reads(m, m->prog, read);
    for (int v = 0; v < m->nvariants; v++)
        ir_held_reads(m, m->variants[v]->prog, read);
}

/* The call table of the open program (CgCalls, codegen.h), and kiln_ref,
 * which makes a ref a pointer. */
static void open_calls(FILE *f, const Module *m, CgCalls *c)
{
    Arena *a = m->a;
    fputs("/* The open program, a call a row: a kernel's own function, or a shared one over\n"
          " * the pointers kiln_open_refs[at .. at + nrefs) name: {'w', i} m->w[i], {'s', i}\n"
          " * m->s[i], {'a', off} m->arena + off, {'m', j} kiln_open_msgs[j]. */\n", f);
    fprintf(f, "struct kiln_call {\n    int (*own)(%s_model *);\n"
               "    int (*shared)(%s_model *, void *const *);\n    int nrefs, at;\n};\n",
            m->name, m->name);
    fprintf(f, "static const struct kiln_call kiln_open_calls[%d] = {\n%s};\n",
            count_nonzero(c->nrows), arena_stream_text(a, c->rows));
    if (!c->maxrefs) {
        fputc('\n', f);
        return;
    }
    fputs("struct kiln_ref {\n    char kind;\n    long long v;\n};\n", f);
    fprintf(f, "static const struct kiln_ref kiln_open_refs[%d] = {%s\n};\n", c->nrefs,
            arena_stream_text(a, c->refs));
    fprintf(f, "static const char *const kiln_open_msgs[%d] = {%s%s};\n\n",
            count_nonzero(c->nmsgs), arena_stream_text(a, c->msgs), c->nmsgs ? "\n" : "NULL");
    fprintf(f, "static void *kiln_ref(%s_model *m, const struct kiln_ref *r)\n{\n", m->name);
    fputs("    switch (r->kind) {\n"
          "    case 'w': return m->w[r->v];\n"
          "    case 's': return m->s[r->v];\n"
          "    case 'a': return m->arena + r->v;\n"
          "    default: return (void *)kiln_open_msgs[r->v];\n"
          "    }\n}\n\n", f);
}

/* The open program's kernels (oN), and kiln_open_kernels, which NAME_open
 * calls once the weights are loaded, before packing: each derived weight
 * allocated, the kernels run in order from a call table, then every
 * weight or derived weight that no kernel of any shape variant reads at
 * run time freed (the weights that served only to make derived ones).
 * A MoE model has a kernel a layer and expert (18432 in Qwen3-30B-A3B):
 * a wrapper function each, called one by one from here, took cc 45 s of
 * the build's 65; as rows of a table they take none. */
static void open_program(CgCx *cx, const Module *m)
{
    FILE *f = cx->f;
    Arena *a = m->a;
    CgCalls calls = {arena_stream(a), arena_stream(a), arena_stream(a), 0, 0, 0, 0};
    CgCx ox = *cx;
    ox.open = 1;
    ox.calls = &calls;
    int nk = m->open->nkernels;
    for (int i = 0; i < nk; i++)
        cg_kernel(&ox, m->open->kernels[i]);
    open_calls(f, m, &calls);
    fprintf(f, "static int kiln_open_kernels(%s_model *m)\n{\n", m->name);
    for (int i = 0; i < m->open->nbufs; i++) {
        const Buf *b = m->open->bufs[i];
        if (b->kind != BK_DERIVED)
            continue;
        unsigned long long bytes =
            (unsigned long long)storage_bytes(b->store, shape_count(b->rank, b->dims));
        fprintf(f, "    /* derived %d: %s%s%s%s */\n", b->index, dtype_name(b->dtype),
                shape_str(m->a, b->rank, b->dims), b->store ? " " : "",
                b->store ? storage_name(b->store) : "");
        fprintf(f, "    if (!(m->w[%d] = rt_alloc(%lluu)))\n", ir_held_index(m, b), bytes);
        fputs("        return rt_errf(&m->err, RT_EINTERNAL, \"out of memory\");\n", f);
    }
    fputs("    int rc = 0;\n", f);
    if (calls.maxrefs)
        fprintf(f, "    void *p[%d];\n", calls.maxrefs);
    fprintf(f, "    for (int i = 0; rc == 0 && i < %d; i++) {\n"
               "        const struct kiln_call *c = &kiln_open_calls[i];\n", nk);
    if (calls.maxrefs)
        fputs("        for (int j = 0; j < c->nrefs; j++)\n"
              "            p[j] = kiln_ref(m, &kiln_open_refs[c->at + j]);\n"
              "        rc = c->own ? c->own(m) : c->shared(m, p);\n    }\n", f);
    else
        fputs("        rc = c->own ? c->own(m) : c->shared(m, NULL);\n    }\n", f);
    int n = m->nweights + ir_nderived(m);
    char *read = arena_alloc(m->a, (size_t)n + 1);
    read_at_run(m, read);
    for (int i = 0, first = 1; i < m->open->nbufs; i++) {
        int h = ir_held_index(m, m->open->bufs[i]);
        if (h < 0 || read[h])
            continue;
        if (first)
            fputs("    /* read only here, by no kernel of a run */\n", f);
        fprintf(f, "    rt_free(m->w[%d]);\n    m->w[%d] = NULL;\n", h, h);
        read[h] = 1;
        first = 0;
    }
    fputs("    return rc;\n}\n\n", f);
}

/* Each kernel's C seen once, before any is printed, so that kernels alike
 * share one function (kernel.c): the program's, the prefill variant's
 * and the open program's, with the contexts they are printed in. */
static void count_kernels(CgCx *cx, const Module *m)
{
    for (int i = 0; i < m->prog->nkernels; i++)
        cg_kernel_count(cx, m->prog->kernels[i]);
    CgCx vx = *cx, ox = *cx;
    for (int j = 0; j < m->nvariants; j++) {
        vx.m = m->variants[j];
        for (int i = 0; i < vx.m->prog->nkernels; i++)
            cg_kernel_count(&vx, vx.m->prog->kernels[i]);
    }
    ox.open = 1;
    for (int i = 0; m->open && i < m->open->nkernels; i++)
        cg_kernel_count(&ox, m->open->kernels[i]);
}

/* Every kernel in order, called directly: a run without a profile costs
 * what it did before profiles. */
static void run_kernels(FILE *f, const Module *m, const char *fn)
{
    fprintf(f, "static int %s(%s_model *m)\n{\n    int rc = 0;\n", fn, m->name);
    for (int i = 0; i < m->prog->nkernels; i++)
        fprintf(f, "    if (rc == 0)\n        rc = k%d(m);\n", m->prog->kernels[i]->id);
    fputs("    return rc;\n}\n\n", f);
}

/* The variant of m with role `role` (Module.role), or NULL. */
static const Module *role_variant(const Module *m, const char *role)
{
    for (int j = 0; j < m->nvariants; j++)
        if (!strcmp(m->variants[j]->role, role))
            return m->variants[j];
    return NULL;
}

/* The kernels before variant j's (the leader's, then each variant's). */
static int kernels_before(const Module *m, int j)
{
    int n = m->prog->nkernels;
    for (int i = 0; i < j; i++)
        n += m->variants[i]->prog->nkernels;
    return n;
}

/* A decoder's shape variants (Module.variants[j]: the prefill chunk, a
 * slotted decoder's batch, the prompt's rest's chunk): their kernels,
 * numbered on after the leader's so that their C names differ, over the
 * same handle (weights, state, arena), and NAME_run_ROLE (Module.role),
 * which runs them, timed as the leader's are when a profile is attached
 * (run_timed). */
static void variant(CgCx *cx, const Module *m, int j)
{
    FILE *f = cx->f;
    Module *v = m->variants[j];
    int first = kernels_before(m, j);
    for (int i = 0; i < v->prog->nkernels; i++)
        v->prog->kernels[i]->id = first + i;
    CgCx vx = *cx;
    vx.m = v;
    for (int i = 0; i < v->prog->nkernels; i++)
        cg_kernel(&vx, v->prog->kernels[i]);
    run_kernels(f, v, arena_printf(m->a, "kiln_run_%s_kernels", v->role));
}

/* NAME_run_ROLE, after run_timed. */
static void variant_run(FILE *f, const Module *m, int j)
{
    const Module *v = m->variants[j];
    const char *n = m->name, *vn = v->role;
    int first = kernels_before(m, j);
    fprintf(f, "int %s_run_%s(%s_model *m, const void *const *inputs, void *const *outputs)\n{\n",
            n, vn, n);
    fputs("    if (!m->opened)\n        return m->err.code;\n", f);
    fputs("    m->err.code = 0;\n    m->in = inputs;\n    m->out = outputs;\n", f);
    fprintf(f, "    int rc = m->prof ? kiln_run_timed(m, %d, %d) : kiln_run_%s_kernels(m);\n",
            first, first + v->prog->nkernels, vn);
    fputs("    m->in = NULL;\n    m->out = NULL;\n    return rc;\n}\n\n", f);
    fprintf(f, "static int kiln_run_%s(void *h, const void *const *in, void *const *out)\n"
               "{\n    return %s_run_%s(h, in, out);\n}\n", vn, n, vn);
}

/* The kernels a profile times: the leader's, then its variants'. */
static int timed_kernels(const Module *m)
{
    return kernels_before(m, m->nvariants);
}

/* Every kernel's name and cost, and the kernels as a table for the timed
 * runs, which call rt_profile_add after each: the leader's kernels
 * [0, nk), a prefill variant's after them, named NAME@T (T its tokens a
 * call) so that a profile tells a prefill's kernels from a decode step's.
 * Printed before the variant's run_chunk, which calls kiln_run_timed. */
static void run_timed(FILE *f, const Module *m)
{
    int nk = timed_kernels(m);
    const char *at[3] = {"@variant", "@variant", "@variant"};
    for (int j = 0; j < m->nvariants; j++) {
        IrDecoder dec;
        if (ir_decoder(m->variants[j], &dec))
            at[j] = arena_printf(m->a, "@%lld", (long long)dec.tokens);
    }
    fprintf(f, "static const rt_kernel_info kiln_kernels[%d] = {\n", count_nonzero(nk));
    for (int i = 0; i < nk; i++) {
        int j = -1;                 /* the variant of kernel i; -1: the leader */
        while (j + 1 < m->nvariants && i >= kernels_before(m, j + 1))
            j++;
        const Kernel *k = j < 0 ? m->prog->kernels[i]
                                : m->variants[j]->prog->kernels[i - kernels_before(m, j)];
        double flops, bytes;
        ir_kernel_cost(k, &flops, &bytes);
        fputs("    {", f);
        cg_print_cstring(f, j < 0 ? k->name : arena_printf(m->a, "%s%s", k->name, at[j]));
        fprintf(f, ", %.17g, %.17g, %.17g},\n", flops, bytes, ir_kernel_attn_flops(k));
    }
    fputs(nk ? "};\n" : "    {0},\n};\n", f);
    fprintf(f, "static int (*const kiln_kernel_fns[%d])(%s_model *) = {", count_nonzero(nk), m->name);
    for (int i = 0; i < nk; i++)
        fprintf(f, "%sk%d,", i % 10 ? " " : "\n    ", i);
    fputs(nk ? "\n};\n\n" : "NULL};\n\n", f);
    fprintf(f, "static int kiln_run_timed(%s_model *m, int from, int to)\n{\n    int rc = 0;\n",
            m->name);
    fputs("    for (int i = from; rc == 0 && i < to; i++) {\n", f);
    fputs("        double t0 = rt_now();\n        rc = kiln_kernel_fns[i](m);\n"
          "        rt_profile_add(m->prof, i, rt_now() - t0);\n    }\n    return rc;\n}\n\n", f);
}

static void api_rest(FILE *f, const Module *m)
{
    const char *n = m->name;
    fprintf(f, "int %s_status(const %s_model *m) { return m ? m->err.code : RT_EINTERNAL; }\n\n", n, n);
    fprintf(f, "const char *%s_error(const %s_model *m)\n{\n", n, n);
    fputs("    if (!m)\n        return \"out of memory\";\n"
          "    return m->err.code ? m->err.msg : NULL;\n}\n\n", f);
    fprintf(f, "int %s_run(%s_model *m, const void *const *inputs, void *const *outputs)\n{\n", n, n);
    fputs("    if (!m->opened)\n        return m->err.code;\n", f);
    fputs("    m->err.code = 0;\n    m->in = inputs;\n    m->out = outputs;\n", f);
    fprintf(f, "    int rc = m->prof ? kiln_run_timed(m, 0, %d) : kiln_run_kernels(m);\n",
            m->prog->nkernels);
    fputs("    m->in = NULL;\n    m->out = NULL;\n    return rc;\n}\n\n", f);
    fprintf(f, "void %s_reset(%s_model *m)\n{\n", n, n);
    for (int i = 0; i < m->nstates; i++)
        fprintf(f, "    memset(m->s[%d], 0, %lluu);\n", i, (unsigned long long)node_bytes(m->states[i]));
    fputs("    (void)m;\n}\n\n", f);
    fprintf(f, "void %s_close(%s_model *m)\n{\n    if (!m)\n        return;\n", n, n);
    fprintf(f, "    for (int i = 0; !m->image.map && i < %d; i++)\n        rt_free(m->w[i]);\n",
            m->nweights + ir_nderived(m));
    fputs("    rt_image_close(&m->image);\n", f);
    fprintf(f, "    for (int i = 0; i < %d; i++)\n        rt_free(m->s[i]);\n", m->nstates);
    fputs("    rt_free(m->arena);\n    free(m);\n}\n\n", f);
}

/* The rt_model descriptor over the typed API, and the thin main. */
static void descriptor(FILE *f, const Module *m, CgFlavour fl)
{
    const char *n = m->name;
    fprintf(f, "static void *kiln_open(const char *w) { return %s_open(w); }\n", n);
    fprintf(f, "static int kiln_status(const void *h) { return %s_status(h); }\n", n);
    fprintf(f, "static const char *kiln_error(const void *h) { return %s_error(h); }\n", n);
    fprintf(f, "static int kiln_run(void *h, const void *const *in, void *const *out)\n"
               "{\n    return %s_run(h, in, out);\n}\n", n);
    fprintf(f, "static void kiln_close(void *h) { %s_close(h); }\n", n);
    fprintf(f, "static void kiln_profile(void *h, rt_profile *p) "
               "{ ((%s_model *)h)->prof = p; }\n", n);
    fprintf(f, "static void kiln_reset(void *h) { %s_reset(h); }\n\n", n);
    fputs("/* The machine's figures for profiles' percentages (rt_machine): kiln build\n"
          " * passes -DKILN_MACHINE={peak,peak1,read,cores} from `kiln machine`. */\n"
          "#ifndef KILN_MACHINE\n#define KILN_MACHINE {0, 0, 0, 0}\n#endif\n", f);
    if (fl == CG_CC)
        fprintf(f, "/* How this file was compiled, for --version: kiln build passes\n"
                   " * -DKILN_BUILD_FLAGS=\"its cc command\"; else the flags it builds with. */\n"
                   "#ifndef KILN_BUILD_FLAGS\n#define KILN_BUILD_FLAGS \"%s\"\n#endif\n",
                cg_cflags(m->a, m));
    fprintf(f, "%sconst rt_model kiln_model = {\n    ", fl == CG_CC ? "static " : "");
    cg_print_cstring(f, n);
    fprintf(f, ", %d, %d, %d, %d,\n", m->ninputs, m->noutputs, m->nweights, m->nstates);
    fputs("    kiln_inputs, kiln_outputs, kiln_weights, kiln_states,\n"
          "    kiln_open, kiln_status, kiln_error, kiln_run, kiln_close,\n", f);
    fprintf(f, "    %d, kiln_kernels, kiln_profile, KILN_MACHINE,\n", timed_kernels(m));
    const Module *chunk = role_variant(m, "chunk"), *bv = role_variant(m, "batch");
    const Module *rest = role_variant(m, "rest");
    if (chunk)
        fprintf(f, "    %lld, kiln_run_chunk, kiln_reset, NULL,",
                (long long)chunk->inputs[0]->dims[0]);
    else
        fputs("    0, NULL, kiln_reset, NULL,", f);
    const char *batch = bv ? arena_printf(m->a, "%lld, kiln_run_batch",
                                          (long long)bv->inputs[0]->dims[0])
                           : "0, NULL";
    fprintf(f, " %s,\n    ", cg_rt_uses(m, fl) >> CG_RT_GEN & 1 ? "rt_generate" : "NULL");
    cg_print_cstring(f, KILN_VERSION);
    fputs(fl == CG_CC ? ", KILN_BUILD_FLAGS" : ", \"the JIT: libtcc, in memory (kiln run)\"", f);
    const char *files[2] = {m->folder_weights, m->folder_tokenizer};   /* NULL: none */
    for (int i = 0; i < 2; i++) {
        fputs(",\n    ", f);
        if (files[i])
            cg_print_cstring(f, files[i]);
        else
            fputs("NULL", f);
    }
    fprintf(f, ",\n    %s,\n    %s,\n", batch,
            cg_rt_uses(m, fl) >> CG_RT_SERVE & 1 ? "rt_serve" : "NULL");
    if (rest)
        fprintf(f, "    %lld, kiln_run_rest,\n};\n", (long long)rest->inputs[0]->dims[0]);
    else
        fputs("    0, NULL,\n};\n", f);
    if (fl == CG_CC && cg_ranks(m) > 1)
        fprintf(f, "\n#ifndef KILN_NO_MAIN\nint main(int argc, char **argv)\n{\n"
                "    return rt_mpi_main(argc, argv, &kiln_model, %d);\n}\n#endif\n", cg_ranks(m));
    else if (fl == CG_CC)
        fputs("\n#ifndef KILN_NO_MAIN\nint main(int argc, char **argv)\n{\n"
              "    return rt_main(argc, argv, &kiln_model);\n}\n#endif\n", f);
}

/* ---- the file ------------------------------------------------------------ */

const char *cg_rt_libs(unsigned uses)
{
    return uses >> CG_RT_SERVE & 1 ? " -lmicrohttpd -lpthread" : "";
}

int cg_ranks(const Module *m)
{
    int n = 1;
    for (int i = 0; i < m->nnodes; i++)
        if ((m->nodes[i]->op == OP_ALLREDUCE || m->nodes[i]->op == OP_ALLGATHER) &&
            attr_i(m->nodes[i], "ranks") > n)
            n = (int)attr_i(m->nodes[i], "ranks");
    return n;
}

/* A `call attn` statement: *(int *)ctx set. */
static void attn_stmt(Stmt *s, void *ctx)
{
    if (s->kind == S_CALL && s->call == CALL_ATTN)
        *(int *)ctx = 1;
}

/* Whether a kernel of p calls attention's kernel (rt_attn). */
static int calls_attn(const Prog *p)
{
    int found = 0;
    for (int i = 0; p && i < p->nkernels && !found; i++)
        ir_block_walk(&p->kernels[i]->body, attn_stmt, &found);
    return found;
}

unsigned cg_rt_uses(const Module *m, CgFlavour fl)
{
    IrDecoder dec;
    unsigned uses = 1u << CG_RT_CORE;
    if (cg_ranks(m) > 1)
        uses |= 1u << CG_RT_MPI;
    if (ir_decoder(m, &dec) && dec.tokens == 1)
        uses |= 1u << CG_RT_GEN;
    if (fl == CG_CC && ir_decoder(m, &dec) && dec.tokens == 1 && dec.slots > 1 &&
        role_variant(m, "batch"))
        uses |= 1u << CG_RT_SERVE;
    for (int i = 0; i < m->prog->nbufs; i++)
        uses |= storage_block(m->prog->bufs[i]->store) ? 1u << CG_RT_QUANT
                : m->prog->bufs[i]->store == ST_BF16 ? 1u << CG_RT_PAIRS : 0;
    for (int i = 0; m->open && i < m->open->nbufs; i++)
        uses |= storage_block(m->open->bufs[i]->store) ? 1u << CG_RT_QUANT
                : m->open->bufs[i]->store == ST_BF16 ? 1u << CG_RT_PAIRS : 0;
    size_t n = m->folder_weights ? strlen(m->folder_weights) : 0;
    if (fl == CG_JIT || (n >= 5 && !strcmp(m->folder_weights + n - 5, ".gguf")))
        uses |= 1u << CG_RT_QUANT | 1u << CG_RT_GGUF;
    if (uses >> CG_RT_GEN & 1)
        uses |= 1u << CG_RT_GGUF;
    int attn = fl == CG_JIT || calls_attn(m->prog) || calls_attn(m->open);
    for (int i = 0; i < m->nvariants; i++)
        attn = attn || calls_attn(m->variants[i]->prog);
    if (attn)
        uses |= 1u << CG_RT_ATTN;
    if (fl == CG_JIT)
        uses |= 1u << CG_RT_JIT;
    if (uses >> CG_RT_QUANT & 1)        /* its AMX path: the tiles' machinery */
        uses |= 1u << CG_RT_PAIRS;
    return uses;
}

/* The runtime parts the program uses: every header, then (paste) every
 * body; RT_API makes their functions static when pasted, so that two
 * models link into one program. */
static void prelude(FILE *f, const Module *m, CgFlavour fl, int paste)
{
    unsigned uses = cg_rt_uses(m, fl);
    fprintf(f, "/* Generated by kiln %s from model \"%s\": %d inputs, %d weights, "
               "%d state, %d outputs, %d kernels.\n", KILN_VERSION, m->name, m->ninputs,
            m->nweights, m->nstates, m->noutputs, m->prog->nkernels);
    if (fl == CG_JIT)
        fputs(" * For libtcc (kiln run): the runtime's functions are declared, not\n"
              " * defined, and there is no main; the JIT links them from kiln itself.\n", f);
    else if (paste)
        fprintf(f, " * Build: cc %s THIS.c -lm%s   (add -DKILN_NO_MAIN for a library)\n",
                cg_cflags(m->a, m), cg_rt_libs(uses));
    else
        fputs(" * The runtime's functions are declared, not defined: kiln build links\n"
              " * them from its cached objects of the runtime's parts.\n", f);
    fputs(" * Runtime parts:", f);
    for (int i = 0; i < CG_RT_NPARTS; i++)
        if (uses >> i & 1)
            fprintf(f, " %s", cg_rt_parts[i].name);
    fputs(". Do not edit: regenerate it. */\n", f);
    fprintf(f, "#define RT_API%s\n", fl == CG_JIT ? " extern"
                                     : paste ? " static __attribute__((unused))" : "");
    for (int i = 0; i < CG_RT_NPARTS; i++)
        if (uses >> i & 1)
            fputs(cg_rt_parts[i].header, f);
    for (int i = 0; paste && i < CG_RT_NPARTS; i++)
        if (uses >> i & 1)
            fputs(cg_rt_parts[i].body, f);
    fputs("\n/* ---- the model ---- */\n#include <math.h>\n#include <stdlib.h>\n"
          "#include <string.h>\n\n", f);
    /* unused: a model that calls none of them compiles warning-free with clang too */
    fputs("__attribute__((unused)) static inline float kiln_maxf(float a, float b)\n"
          "{ return a > b ? a : b; }\n"
          "__attribute__((unused)) static inline float kiln_minf(float a, float b)\n"
          "{ return a < b ? a : b; }\n"
          "__attribute__((unused)) static inline int64_t kiln_maxi(int64_t a, int64_t b)\n"
          "{ return a > b ? a : b; }\n"
          "__attribute__((unused)) static inline int64_t kiln_mini(int64_t a, int64_t b)\n"
          "{ return a < b ? a : b; }\n\n", f);
}

static void names(FILE *f, const char *model, const char *what, Node *const *v, int n)
{
    fprintf(f, "const char *const %s_%s_names[%d] = {", model, what, n ? n : 1);
    for (int i = 0; i < n; i++) {
        fputs(i ? ", " : "", f);
        cg_print_cstring(f, v[i]->name);
    }
    fputs(n ? "};\n" : "NULL};\n", f);
}

static void api_decls(FILE *f, const Module *m)
{
    const char *n = m->name;
    fprintf(f, "extern const char *const %s_input_names[%d];\n", n, m->ninputs ? m->ninputs : 1);
    fprintf(f, "extern const char *const %s_output_names[%d];\n", n, m->noutputs);
    names(f, n, "input", m->inputs, m->ninputs);
    names(f, n, "output", m->outputs, m->noutputs);
    fprintf(f, "typedef struct %s_model %s_model;\n", n, n);
    fprintf(f, "%s_model *%s_open(const char *weights_path);\n", n, n);
    fprintf(f, "int %s_status(const %s_model *m);\n", n, n);
    fprintf(f, "const char *%s_error(const %s_model *m);\n", n, n);
    fprintf(f, "int %s_run(%s_model *m, const void *const *inputs, void *const *outputs);\n", n, n);
    fprintf(f, "void %s_reset(%s_model *m);\n", n, n);
    for (int j = 0; j < m->nvariants; j++)
        fprintf(f, "int %s_run_%s(%s_model *m, const void *const *inputs, void *const *outputs);\n",
                n, m->variants[j]->role, n);
    fprintf(f, "void %s_close(%s_model *m);\n\n", n, n);
}

static void emit(FILE *f, const Module *m, CgFlavour fl, int paste)
{
    CgInfos t;
    cg_infos(m, &t);
    prelude(f, m, fl, paste);
    api_decls(f, m);
    init_data(f, m);
    rank_tensors(f, t.weights, m->nweights);
    int quant = cg_rt_uses(m, fl) >> CG_RT_QUANT & 1;
    table(f, "kiln_inputs", t.inputs, m->ninputs, 0);
    table(f, "kiln_outputs", t.outputs, m->noutputs, 0);
    table(f, "kiln_weights", t.weights, m->nweights, quant);
    table(f, "kiln_states", t.states, m->nstates, 0);
    layout(f, m, fl);
    fputc('\n', f);
    handle(f, m);
    char *type = arena_printf(m->a, "%s_model", m->name);
    CgCx cx = {f, m, fl, type, 0, fl == CG_JIT, 0, cg_share_new(m->a), NULL, NULL, NULL, NULL};
    count_kernels(&cx, m);
    for (int i = 0; i < m->prog->nkernels; i++)
        cg_kernel(&cx, m->prog->kernels[i]);
    run_kernels(f, m, "kiln_run_kernels");
    for (int j = 0; j < m->nvariants; j++)
        variant(&cx, m, j);
    run_timed(f, m);
    for (int j = 0; j < m->nvariants; j++)
        variant_run(f, m, j);
    if (m->open)
        open_program(&cx, m);
    api_open(f, m, t.weights);
    api_rest(f, m);
    descriptor(f, m, fl);
}

void cg_emit(FILE *f, const Module *m, CgFlavour fl)
{
    emit(f, m, fl, fl == CG_CC);
}

char *cg_emit_string(const Module *m, CgFlavour fl)
{
    FILE *f = arena_stream(m->a);
    cg_emit(f, m, fl);
    return arena_stream_text(m->a, f);
}

char *cg_emit_linked(const Module *m)
{
    FILE *f = arena_stream(m->a);
    emit(f, m, CG_CC, 0);
    return arena_stream_text(m->a, f);
}

void cg_emit_header(FILE *f, const Module *m)
{
    const char *n = m->name;
    fprintf(f, "/* %s.h: generated by kiln %s from model \"%s\"; do not edit.\n", n, KILN_VERSION, n);
    fputs(" * inputs[] and outputs[] follow the model's order:\n", f);
    for (int i = 0; i < m->ninputs; i++)
        fprintf(f, " *   inputs[%d]  %s%s\n", i, dtype_name(m->inputs[i]->dtype),
                shape_str(m->a, m->inputs[i]->rank, m->inputs[i]->dims));
    for (int i = 0; i < m->noutputs; i++)
        fprintf(f, " *   outputs[%d] %s%s\n", i, dtype_name(m->outputs[i]->dtype),
                shape_str(m->a, m->outputs[i]->rank, m->outputs[i]->dims));
    fprintf(f, " * and their names are %s_input_names[i] and %s_output_names[i]. */\n", n, n);
    fprintf(f, "#ifndef KILN_MODEL_%s_H\n#define KILN_MODEL_%s_H\n\n", n, n);
    fprintf(f, "typedef struct %s_model %s_model;\n\n", n, n);
    fprintf(f, "extern const char *const %s_input_names[%d];\n", n, m->ninputs ? m->ninputs : 1);
    fprintf(f, "extern const char *const %s_output_names[%d];\n\n", n, m->noutputs);
    fputs("/* Loads weights from a safetensors file, or makes them from each weight's\n"
          " * init when weights_path is NULL. Returns NULL only when out of memory;\n"
          " * otherwise check NAME_status (0: ready). */\n", f);
    fprintf(f, "%s_model *%s_open(const char *weights_path);\n", n, n);
    fputs("/* Status of the last call: 0 ok, 1 invalid weights or inputs, 3 I/O,\n"
          " * 4 internal; and its one-line message (NULL when 0). */\n", f);
    fprintf(f, "int %s_status(const %s_model *m);\n", n, n);
    fprintf(f, "const char *%s_error(const %s_model *m);\n", n, n);
    fputs("/* One call: inputs[i] and outputs[i] point to row-major f32/i32 data of\n"
          " * the shapes above (outputs must not overlap inputs). Returns the status. */\n", f);
    fprintf(f, "int %s_run(%s_model *m, const void *const *inputs, void *const *outputs);\n", n, n);
    fputs("/* Zeroes the state (KV caches). */\n", f);
    fprintf(f, "void %s_reset(%s_model *m);\n", n, n);
    const Module *chunk = role_variant(m, "chunk"), *batch = role_variant(m, "batch");
    const Module *rest = role_variant(m, "rest");
    if (chunk) {
        fprintf(f, "/* The prefill variant: as %s_run, with %lld tokens and positions a call\n"
                   " * and the logits of the last, over the same weights and state. */\n", n,
                (long long)chunk->inputs[0]->dims[0]);
        fprintf(f, "int %s_run_chunk(%s_model *m, const void *const *inputs, void *const *outputs);\n",
                n, n);
    }
    if (rest) {
        fprintf(f, "/* The same with %lld tokens a call: a prompt's rest. */\n",
                (long long)rest->inputs[0]->dims[0]);
        fprintf(f, "int %s_run_rest(%s_model *m, const void *const *inputs, void *const *outputs);\n",
                n, n);
    }
    if (batch) {
        fprintf(f, "/* The batch variant of a slotted decoder: %lld rows a call, each a token\n"
                   " * of the sequence in its slot (inputs tokens, positions, slots). */\n",
                (long long)batch->inputs[0]->dims[0]);
        fprintf(f, "int %s_run_batch(%s_model *m, const void *const *inputs, void *const *outputs);\n",
                n, n);
    }
    fprintf(f, "void %s_close(%s_model *m);\n\n#endif\n", n, n);
}
