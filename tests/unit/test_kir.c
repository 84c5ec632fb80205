/* tests/unit/test_kir.c: the .kir parser (ir/parse.c, ir/parse_prog.c,
 * grammar in ir/KIR.md).
 * 1. Every stage of every model reads back: print(parse(text)) == text,
 *    the parsed module passes the verifiers, its C is the same bytes, and
 *    the next pass run on it gives the next stage.
 * 2. Each element of the syntax reads as the IR it stands for.
 * 3. Malformed text gives exactly the one message "FILE: line N: ...".
 * 4. A parsed program builds and runs under the JIT exactly like the
 *    module it was printed from.
 * 5. Truncated and corrupted dumps give messages, or modules that print
 *    stably; never a crash (run it under ASan to see). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "passes/passes.h"

#include <glob.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------ */

/* The module as ir_print_module prints it (malloc'd). Not inlined: gcc 12
 * would take the buffer open_memstream returns for the local it comes
 * through (a false -Wdangling-pointer). */
static __attribute__((noinline)) char *module_text(const Module *m)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    ir_print_module(f, m);
    fclose(f);
    return text;
}

/* Parses text as file "t.kir" into a; NULL with the messages in d. */
static Module *parse(Arena *a, const char *text, Diags *d)
{
    diag_init(d, a, "t.kir");
    return ir_parse(a, "t.kir", text, d);
}

static Module *parse_ok(Arena *a, const char *text)
{
    Diags d;
    Module *m = parse(a, text, &d);
    if (!m)
        fail_msg("refused: %s\n--- text:\n%s", d.lines[0], text);
    return m;
}

static void verify(Module *m)
{
    ir_verify_graph(m);
    if (m->prog)
        ir_verify_prog(m);
}

/* Where two texts first differ, as "line N: 'a' / 'b'", in buf. */
static void first_difference(const char *x, const char *y, char *buf, size_t len)
{
    int line = 1;
    const char *bx = x, *by = y;
    for (; *x && *x == *y; x++, y++)
        if (*x == '\n') {
            line++;
            bx = x + 1;
            by = y + 1;
        }
    snprintf(buf, len, "line %d:\n  printed: %.*s\n  re-read: %.*s", line,
             (int)strcspn(bx, "\n"), bx, (int)strcspn(by, "\n"), by);
}

/* The text printed again after reading it back, or NULL with why set. */
static char *reprint(const char *text, Module **back, Arena *a, char *why, size_t len)
{
    Diags d;
    *back = parse(a, text, &d);
    if (!*back) {
        snprintf(why, len, "refused: %s", d.lines[0]);
        return NULL;
    }
    verify(*back);
    return module_text(*back);
}

/* ---- 1. every stage of every model --------------------------------------- */

typedef struct {
    const char *model;
    int stages;
    char *prev;                   /* the stage before, printed */
    char why[2048];
} Trip;

/* The C of both modules (CG_JIT, then CG_CC) is the same bytes. */
static int same_c(const Module *m, const Module *back)
{
    for (int fl = CG_CC; fl <= CG_JIT; fl++)
        if (strcmp(cg_emit_string(m, (CgFlavour)fl), cg_emit_string(back, (CgFlavour)fl)) != 0)
            return 0;
    return 1;
}

/* The pass run on the previous stage read back gives this stage's text,
 * as `kiln opt` would. */
static void same_pass(PassCtx *cx, const char *prev, int pass, const char *text, char *why,
                      size_t len)
{
    Arena *a = arena_new();
    Diags d;
    Module *m = parse(a, prev, &d);
    if (!m) {
        snprintf(why, len, "the stage before is refused: %s", d.lines[0]);
    } else {
        m->notes.n = 0;
        if (m->prog)
            m->prog->notes.n = 0;
        PassCtx pc = *cx;
        pc.d = &d;
        char *got = pass_table[pass].run(m, &pc) < 0 ? NULL : module_text(m);
        if (!got)
            snprintf(why, len, "the pass fails on the stage before, read back");
        else if (strcmp(got, text) != 0)
            first_difference(text, got, why, len);
        free(got);
    }
    arena_free(a);
}

static void round_trip_stage(PassCtx *cx, Module *m, int pass, int changed)
{
    Trip *t = cx->user;
    char *text = module_text(m), why[1500] = "";
    Arena *a = arena_new();
    Module *back;
    char *again = t->why[0] ? NULL : reprint(text, &back, a, why, sizeof why);
    if (again && strcmp(text, again) != 0)
        first_difference(text, again, why, sizeof why);
    else if (again && m->prog && !same_c(m, back))
        snprintf(why, sizeof why, "the C differs");
    else if (again && pass > 0 && changed >= 0)
        same_pass(cx, t->prev, pass, text, why, sizeof why);
    if (why[0])
        snprintf(t->why, sizeof t->why, "%s after %s: %s", t->model, pass_table[pass].name, why);
    t->stages++;
    free(again);
    free(t->prev);
    t->prev = text;
    arena_free(a);
}

static void run_pipeline(const char *path, void (*after)(PassCtx *, Module *, int, int),
                         void *user)
{
    Arena *a = arena_new();
    Diags d;
    diag_init(&d, a, path);
    Module *m = fe_load(a, path, &d, NULL);
    if (!m)
        fail_msg("%s does not load: %s", path, d.n ? d.lines[0] : "?");
    PassCtx cx = {.d = &d, .verify = 1, .after = after, .user = user};
    machine_default(&cx.machine);
    if (pass_pipeline(m, &cx) != 0)
        fail_msg("%s: the pipeline fails: %s", path, d.n ? d.lines[0] : "?");
    arena_free(a);
}

static void every_stage_of_every_model(void **state)
{
    (void)state;
    glob_t g;
    assert_int_equal(glob("examples/*.json", 0, NULL, &g), 0);
    assert_int_equal(glob("tests/models/*.json", GLOB_APPEND, NULL, &g), 0);
    assert_true(g.gl_pathc >= 10);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        Trip t = {g.gl_pathv[i], 0, NULL, ""};
        run_pipeline(t.model, round_trip_stage, &t);
        free(t.prev);
        if (t.why[0])
            fail_msg("%s", t.why);
        assert_int_equal(t.stages, pass_count - 1);
    }
    globfree(&g);
}

/* ---- 2. the syntax --------------------------------------------------------- */

static const char graph_text[] =
    "graph syntax\n"
    "  # a module note\n"
    "  #  a second, indented\n"
    "  input  %0 \"x\" : f32[2,3]\n"
    "  input  %1 \"q\\\"uo\\\\t\xc3\xa9\" : i32[2]\n"
    "  weight %2 \"w\" : f32[4,3] init random(seed=7, scale=0.5)\n"
    "  weight %3 \"b\" : f32[4] init data(1, -2.5, 0.125, 3)\n"
    "  weight %4 \"e\" : f32[10,3] init fill(0.25)\n"
    "  state  %5 \"cache\" : f32[6,2,4]\n"
    "  %6 = const 0.5 : f32[]\n"
    "  %7 \"y\" = linear %0, %2, %3 : f32[2,4]\n"
    "  %8 = mul %7, %6 : f32[2,4]\n"
    "  %9 \"vals\" = topk %8 {k=2, axis=-1, result=values} : f32[2,2]\n"
    "  %10 \"idx\" = topk %8 {k=2, axis=-1, result=indices} : i32[2,2]\n"
    "  %11 \"g\" = gelu %8 {approximate=tanh} : f32[2,4]\n"
    "  %12 \"s\" = reduce_sum %11 {axes=[0,1], keepdims=true} : f32[1,1]\n"
    "  %13 \"emb\" = embedding %4, %1 : f32[2,3]\n"
    "  output %9\n"
    "  output %10\n"
    "  output %12\n";

static void graph_syntax(void **state)
{
    (void)state;
    Arena *a = arena_new();
    char *text = arena_printf(a, "# kiln 0.1.0: a file comment\n\n#  another\n%s", graph_text);
    Module *m = parse_ok(a, text);
    char *again = module_text(m);
    assert_string_equal(again, graph_text);
    free(again);
    assert_string_equal(m->name, "syntax");
    assert_string_equal(m->file, "t.kir");
    assert_int_equal(m->notes.n, 2);
    assert_string_equal(m->notes.v[1], " a second, indented");
    assert_int_equal(m->nnodes, 14);
    assert_int_equal(m->ninputs, 2);
    assert_int_equal(m->nweights, 3);
    assert_int_equal(m->nstates, 1);
    assert_string_equal(m->inputs[1]->name, "q\"uo\\t\xc3\xa9");
    assert_int_equal(m->inputs[1]->dtype, DT_I32);
    assert_int_equal(m->weights[2]->index, 2);
    assert_string_equal(m->nodes[7]->where, "line 14");
    Init *r = &m->nodes[2]->init, *dt = &m->nodes[3]->init, *fl = &m->nodes[4]->init;
    assert_true(r->kind == INIT_RANDOM && r->seed == 7 && r->scale == 0.5);
    assert_true(dt->kind == INIT_DATA && dt->data[1] == -2.5f && dt->data[3] == 3.0f);
    assert_true(fl->kind == INIT_FILL && fl->fill == 0.25);
    assert_true(m->nodes[6]->op == OP_CONST && m->nodes[6]->value == 0.5 && !m->nodes[6]->name);
    assert_null(m->nodes[8]->name);
    Node *idx = m->nodes[10], *s = m->nodes[12];
    assert_int_equal(attr_i(idx, "k"), 2);
    assert_int_equal(attr_i(idx, "axis"), -1);
    assert_int_equal(attr_i(idx, "result"), 1);
    assert_true(attr_v(idx, "k")->given && !attr_v(idx, "axis")->given);
    assert_int_equal(attr_i(m->nodes[11], "approximate"), 1);
    assert_int_equal(attr_v(s, "axes")->nints, 2);
    assert_int_equal(attr_v(s, "axes")->ints[1], 1);
    assert_int_equal(attr_i(s, "keepdims"), 1);
    assert_int_equal(m->noutputs, 3);
    assert_ptr_equal(m->outputs[2], s);
    verify(m);
    arena_free(a);
}

/* Text a person writes reads as its printed form. */
static void graph_normalised(void **state)
{
    (void)state;
    static const char *const pairs[][2] = {
        {"graph n\n\n  input %0 \"x\":f32[4 , 3]\n  %1 \"t\" = topk %0 {axis=-1,k=1}:f32[4,1]\n",
         "graph n\n  input  %0 \"x\" : f32[4,3]\n"
         "  %1 \"t\" = topk %0 {k=1, axis=-1, result=values} : f32[4,1]\n"},
        {"graph n\n  input %0 \"x\" : f32[1]\n  %1 = softmax %0 {} : f32[1]\n  # late note\r\n",
         "graph n\n  # late note\r\n  input  %0 \"x\" : f32[1]\n"
         "  %1 = softmax %0 {axis=-1} : f32[1]\n"},
        {"graph n\n  input %0 \"x\" : f32[2]\n  %1 = const 1.0 : f32[]\n"
         "  %2 \"y\" = rmsnorm %0, %0 {eps=1e-6} : f32[2]\n",
         "graph n\n  input  %0 \"x\" : f32[2]\n  %1 = const 1 : f32[]\n"
         "  %2 \"y\" = rmsnorm %0, %0 {eps=1e-06} : f32[2]\n"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        Arena *a = arena_new();
        char *got = module_text(parse_ok(a, pairs[i][0]));
        assert_string_equal(got, pairs[i][1]);
        free(got);
        arena_free(a);
    }
}

static const char prog_text[] =
    "graph p\n"
    "  input  %0 \"x\" : f32[1,2,4]\n"
    "  input  %1 \"pos\" : i32[]\n"
    "  state  %2 \"c\" : f32[6,2,4]\n"
    "  %3 \"c2\" = cache_write %2, %0, %1 : f32[6,2,4]\n"
    "  %4 \"y\" = relu %0 : f32[1,2,4]\n"
    "  output %3\n"
    "  output %4\n"
    "prog p\n"
    "  # a prog note\n"
    "  buf b0 input 0 %0 : f32[1,2,4]\n"
    "  buf b1 input 1 %1 : i32[]\n"
    "  buf b2 state 0 %2 : f32[6,2,4]\n"
    "  buf b3 output 0 %3 : f32[6,2,4]\n"
    "  buf b4 output 1 %4 : f32[1,2,4]\n"
    "  buf b5 temp : f32[2,4] strides [4,1] offset 0 of b6\n"
    "  buf b6 temp %4 : f32[8] @0\n"
    "  buf b7 local : f32[4]\n"
    "  buf b8 temp %4 : f32[2,2] strides [1,2] offset 1 @64\n"
    "  arena 128\n"
    "  kernel k0 cache_write_s6 (%3)\n"
    "    # a kernel note\n"
    "    let v0: i64 = b1[]\n"
    "    check v0 >= 0 && v0 <= 5 else \"pos %lld is out of range (100%%)\", v0\n"
    "    for i1 in 0..2 parallel\n"
    "      for i2 in v0 - 1..(v0 + 3) reduce vector\n"
    "        b2[v0, i1, i2] = b0[0, i1, i2]\n"
    "  kernel k1 misc (%4, %3)\n"
    "    for i0 in 0..6 reduce\n"
    "      local b7\n"
    "      for i1 in 0..4\n"
    "        b7[i1] = f32(i1) * 0.5\n"
    "      let v2: f32 = -inf\n"
    "      for i3 in 0..4 reduce\n"
    "        v2 max= b7[i3]\n"
    "      v2 += 1.09951163e+12\n"
    "      v2 = neg(v2) / 2.0\n"
    "      if i0 < 2 || i0 == 5\n"
    "        b3[i0, 0, 0] = v2 > 0.0 ? sqrt(v2) : nan\n"
    "      else\n"
    "        b3[i0, 1, 3] += max(v2, -0.0)\n"
    "      if i0 != 3\n"
    "        b6[i0] = exp(b2[i0, 1, 2])\n"
    "    for i4 in 0..2\n"
    "      b5[i4, 1] = b8[i4, 0] - b4[0, i4, 0]\n"
    "      b4[0, i4, 1] max= b5[i4, 3]\n";

/* text without the cost comments the printer puts on kernel lines */
static void strip_costs(char *text)
{
    char *o = text;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        const char *cut = strncmp(p, "  kernel ", 9) == 0 ? strstr(p, ")  # ") : NULL;
        size_t keep = cut && cut < p + len ? (size_t)(cut - p) + 1 : len;
        memmove(o, p, keep);
        o += keep;
        p += len;
        if (*p)
            *o++ = *p++;
    }
    *o = 0;
}

static Stmt *st(const Block *blk, int i)
{
    assert_true(i < blk->n);
    return blk->s[i];
}

static void prog_buffers(const Module *m)
{
    Prog *p = m->prog;
    Buf **b = p->bufs;
    assert_int_equal(p->nbufs, 9);
    assert_int_equal(p->arena_bytes, 128);
    assert_int_equal(p->notes.n, 1);
    assert_true(b[1]->kind == BK_INPUT && b[1]->index == 1 && b[1]->rank == 0);
    assert_true(b[5]->kind == BK_TEMP && b[5]->index == -1 && !b[5]->node);
    assert_ptr_equal(b[5]->base, b[6]);
    assert_true(b[5]->strides[0] == 4 && b[5]->arena_off == -1);
    assert_true(!b[8]->base && b[8]->offset == 1 && b[8]->strides[1] == 2);
    assert_true(b[6]->arena_off == 0 && b[8]->arena_off == 64);
    assert_int_equal(b[7]->kind, BK_LOCAL);
    assert_ptr_equal(m->nodes[0]->buf, b[0]);
    assert_ptr_equal(m->nodes[2]->buf, b[2]);
    assert_ptr_equal(m->nodes[3]->buf, b[2]);      /* cache_write: its state's */
    assert_ptr_equal(m->nodes[4]->buf, b[4]);      /* the first that is not a view */
}

static void prog_kernels(const Module *m)
{
    Kernel *k0 = m->prog->kernels[0], *k1 = m->prog->kernels[1];
    assert_string_equal(k0->name, "cache_write_s6");
    assert_true(k1->nnodes == 2 && k1->nodes[0] == m->nodes[4]);
    assert_string_equal(k0->notes.v[0], "a kernel note");
    assert_int_equal(k0->nvars, 3);
    assert_int_equal(k1->nvars, 5);
    Stmt *let = st(&k0->body, 0), *chk = st(&k0->body, 1), *par = st(&k0->body, 2);
    assert_true(let->kind == S_LET && let->v->kind == VAR_LOCAL && let->v->type == T_I64);
    assert_true(chk->kind == S_CHECK && chk->nargs == 1 && chk->args[0]->v == let->v);
    assert_string_equal(chk->msg, "pos %lld is out of range (100%%)");
    assert_true(par->kind == S_LOOP && par->marks == MARK_PARALLEL && par->v->id == 1);
    Stmt *vec = st(&par->body, 0);
    assert_int_equal(vec->marks, MARK_REDUCE | MARK_VECTOR);
    assert_true(vec->v->kind == VAR_LOOP && vec->v->type == T_I64);
    Stmt *store = st(&vec->body, 0);
    assert_true(store->kind == S_STORE && store->op == A_SET && store->idx[1]->v == par->v);
    Stmt *outer = st(&k1->body, 0), *ifs = st(&outer->body, 6);
    assert_true(st(&outer->body, 0)->kind == S_LOCAL && st(&outer->body, 0)->buf->id == 7);
    assert_true(st(&outer->body, 2)->v->type == T_F32);
    assert_int_equal(st(&st(&outer->body, 3)->body, 0)->op, A_MAX);
    assert_true(ifs->kind == S_IF && ifs->body.n == 1 && ifs->els.n == 1);
    assert_int_equal(st(&ifs->els, 0)->op, A_ADD);
    assert_int_equal(st(&outer->body, 7)->els.n, 0);
}

static void prog_syntax(void **state)
{
    (void)state;
    Arena *a = arena_new();
    Module *m = parse_ok(a, prog_text);
    verify(m);
    char *again = module_text(m);
    strip_costs(again);
    assert_string_equal(again, prog_text);
    free(again);
    prog_buffers(m);
    prog_kernels(m);
    arena_free(a);
}

/* Expressions print back as written (precedence, parentheses, literals),
 * or folded as the builders fold them. */
static void expressions(void **state)
{
    (void)state;
    static const char *const same[] = {
        "i0 + 1", "i0 - (i0 - 1)", "(i0 + 1) * 2 % 5 - -1", "i0 / 2 * 3", "i0 * (2 / i0)",
        "-9223372036854775808", "i0 < 2 || i0 == 5 && i0 != 3", "(i0 < 2) + 1",
        "i0 < 2 ? i0 : i0 > 3 ? 1 : 2", "(i0 < 2 ? 1 : 2) * 3", "min(i0, 3) + max(1, i0)",
        "not(i0 <= 3)", "i64(v1 * 2.0)", "b1[i0] + 1", "b1[i0] + b1[3]", "i64(b0[i0 % 4])",
        "(i0 < 1 || i0 > 2) && i0 >= 0", "abs(i0 - 3)", "i0 - -1",
    };
    static const char *const same_f32[] = {
        "v1 * sigmoid(v1) + 1.5", "f32(i0) / 3.0", "-0.0", "inf", "-inf", "nan",
        "1.00000002e+20 * 1.17549435e-38", "tanh(erf(log(sqrt(rsqrt(exp(abs(neg(v1))))))))",
        "cos(v1) - sin(v1)", "b0[i0] > v1 ? b0[3] : -1.0", "max(v1, b0[i0]) - min(v1, 2.0)",
        "(v1 + 1.0) * (v1 - 1.0)", "v1 - (v1 - 1.0)", "v1 / (v1 * 2.0)", "f32(b1[i0])",
    };
    static const char *const folded[][2] = {
        {"(i0 + 1)", "i0 + 1"}, {"2 * 3 + i0 * 1", "6 + i0"}, {"0 + i0 - 0", "i0"},
        {"1 < 2 ? i0 : 3", "i0"}, {"neg(4)", "-4"}, {"f32(3)", "3.0"}, {"f32(v1)", "v1"},
        {"0.1", "0.100000001"}, {"1e-45", "1.40129846e-45"}, {"1.0E3", "1000.0"},
    };
    const char *form = "graph e\n  input  %%0 \"a\" : f32[4]\n  input  %%1 \"b\" : i32[4]\n"
                       "prog e\n  buf b0 input 0 %%0 : f32[4]\n  buf b1 input 1 %%1 : i32[4]\n"
                       "  kernel k0 e ()\n    let v1: f32 = 1.0\n    for i0 in 0..4\n"
                       "      let v2: %s = %s\n";
    size_t ns = sizeof same / sizeof same[0], nf = sizeof same_f32 / sizeof same_f32[0];
    size_t nx = sizeof folded / sizeof folded[0];
    for (size_t i = 0; i < ns + nf + nx; i++) {
        const char *in = i < ns ? same[i] : i < ns + nf ? same_f32[i - ns] : folded[i - ns - nf][0];
        const char *out = i < ns + nf ? in : folded[i - ns - nf][1];
        Arena *a = arena_new();
        Module *m = parse_ok(a, arena_printf(a, form, i >= ns && i < ns + nf ? "f32" : "i64", in));
        char *text = module_text(m);
        const char *line = strstr(text, "let v2: ");
        assert_non_null(line);
        size_t at = strlen("let v2: i64 = "), len = strcspn(line + at, "\n");
        if (strlen(out) != len || strncmp(line + at, out, len) != 0)
            fail_msg("%s reads as %.*s, not %s", in, (int)len, line + at, out);
        free(text);
        arena_free(a);
    }
}

/* ---- 3. messages ----------------------------------------------------------- */

#define GRAPH_HEAD "graph x\n  input  %0 \"a\" : f32[4,3]\n"
#define PROG_HEAD                                                                                  \
    "graph x\n  input  %0 \"a\" : f32[2,3]\n  %1 \"b\" = relu %0 : f32[2,3]\n  output %1\n"      \
    "prog x\n  buf b0 input 0 %0 : f32[2,3]\n  buf b1 output 0 %1 : f32[2,3]\n"                 \
    "  kernel k0 relu (%1)\n"

static const char *const bad_graphs[][2] = {
    {"", "t.kir: line 1: expected 'graph', found the end of the file"},
    {"# only a comment\ngrph x\n", "t.kir: line 2: expected 'graph', found 'grph'"},
    {"graph 9x\n", "t.kir: line 1: expected the model's name (a C identifier), found '9x'"},
    {"graph x\n  input %1 \"a\" : f32[2]\n",
     "t.kir: line 2: expected %0 (node ids count up from %0), found %1"},
    {"graph x\n    input %0 \"a\" : f32[2]\n",
     "t.kir: line 2: expected 2 spaces of indentation, found 4"},
    {GRAPH_HEAD "  %1 \"y\" = add %0, %2 : f32[4,3]\n",
     "t.kir: line 3: %2 is not defined above this line"},
    {GRAPH_HEAD "  %1 \"y\" = relu %0 : f32[4,4]\n",
     "t.kir: line 3: type f32[4,4] does not match f32[4,3] inferred from the operands"},
    {GRAPH_HEAD "  %1 \"y\" = relu %0, %0 : f32[4,3]\n",
     "t.kir: line 3: relu takes 1 operand, not 2"},
    {GRAPH_HEAD "  %1 \"y\" = frob %0 : f32[4,3]\n", "t.kir: line 3: expected an op, found 'frob'"},
    {GRAPH_HEAD "  %1 = relu %0 {k=1} : f32[4,3]\n", "t.kir: line 3: relu has no attribute 'k'"},
    {GRAPH_HEAD "  %1 = topk %0 {axis=0} : f32[4,3]\n",
     "t.kir: line 3: topk needs attribute 'k'"},
    {GRAPH_HEAD "  %1 = gelu %0 {approximate=fast} : f32[4,3]\n",
     "t.kir: line 3: approximate is one of none|tanh, not 'fast'"},
    {GRAPH_HEAD "  %1 = topk %0 {k=9} : f32[4,3]\n",
     "t.kir: line 3.attrs.k: topk: k 9 is not in 1..3 (axis 1 of f32[4,3])"},
    {GRAPH_HEAD "  %1 \"a\" = relu %0 : f32[4,3]\n", "t.kir: line 3: \"a\" is already the name of %0"},
    {"graph x\n  input  %0 \"a\\n\" : f32[2]\n",
     "t.kir: line 2: a string may only escape \\\", \\\\ and \\xNN (not \\x00)"},
    {"graph x\n  input  %0 \"a : f32[2]\n", "t.kir: line 2: the string does not end on this line"},
    {"graph x\n  weight %0 \"w\" : f32[2,2] init data(1, 2, 3)\n",
     "t.kir: line 2: init data has 3 elements; the weight has 4"},
    {"graph x\n  state  %0 \"s\" : f32[2] init fill(0)\n",
     "t.kir: line 2: only weights take an init"},
    {GRAPH_HEAD "  %1 = relu %0 : f32[4,3]\n  output %1\n", "t.kir: line 4: output %1 has no name"},
    {GRAPH_HEAD "  input  %1 \"b\" : f32[0]\n", "t.kir: line 3: dimension 0 is not >= 1"},
    {GRAPH_HEAD "  %1 = const 1 : i32[]\n", "t.kir: line 3: a const is f32"},
    {GRAPH_HEAD "junk\n", "t.kir: line 3: expected 'prog' or the end of the file, found 'junk'"},
};

/* A weight-only value, %2, as a derived weight: prog reads it, the open
 * program (its header after OPEN_PROG, line 12) makes it. */
#define OPEN_PROG                                                                                  \
    "graph x\n  input  %0 \"a\" : f32[2,3]\n  weight %1 \"w\" : f32[2,3] init fill(1)\n"              \
    "  %2 = neg %1 : f32[2,3]\n  %3 \"y\" = add %0, %2 : f32[2,3]\n  output %3\nprog x\n"            \
    "  buf b0 input 0 %0 : f32[2,3]\n  buf b1 weight 0 %1 : f32[2,3]\n"                              \
    "  buf b2 derived 0 %2 : f32[2,3]\n  buf b3 output 0 %3 : f32[2,3]\n"
#define OPEN_HEAD OPEN_PROG "open x\n"

static const char *const bad_progs[][2] = {
    {"graph x\n  input  %0 \"a\" : f32[2]\nprog y\n",
     "t.kir: line 3: expected the graph's name x, found 'y'"},
    {"graph x\n  input  %0 \"a\" : f32[2]\nprog x\n  buf b1 input 0 %0 : f32[2]\n",
     "t.kir: line 4: expected b0 (buffer ids count up from b0), found 'b1'"},
    {"graph x\n  input  %0 \"a\" : f32[2]\nprog x\n  buf b0 input 3 %0 : f32[2]\n",
     "t.kir: line 4: b0 is input 3, but the graph has 1 inputs"},
    {"graph x\n  input  %0 \"a\" : f32[2]\nprog x\n  buf b0 weight : f32[2]\n",
     "t.kir: line 4: b0 needs its number among the weights"},
    {"graph x\nprog x\n  buf b0 temp : f32[2] strides [1] offset 0 of b1\n"
     "  buf b1 temp : f32[2] strides [1] offset 0 of b0\n",
     "t.kir: line 3: b0 is a view of b1, which is a view itself"},
    {"graph x\nprog x\n  buf b0 temp : f32[2,2] strides [1] offset 0\n",
     "t.kir: line 3: b0 has 2 dimensions but 1 strides"},
    {PROG_HEAD "    for i0 in 0..2\n      b1[i0, i1] = 0.0\n", "t.kir: line 10: i1 is not in scope here"},
    {PROG_HEAD "    for i0 in 0..2\n      b1[i0, 0, 1] = 0.0\n",
     "t.kir: line 10: b1 has rank 2; 3 indices given"},
    {PROG_HEAD "    b0[0, 0] = 1.0\n", "t.kir: line 9: b0 is input storage: kernels do not store to it"},
    {PROG_HEAD "    b1[0, 0] = b0[0, 0] + 1\n", "t.kir: line 9: '+' mixes f32 and integer operands"},
    {PROG_HEAD "    for i0 in 0..2 parallel\n      for i1 in 0..3 parallel\n",
     "t.kir: line 10: a parallel loop inside a parallel loop"},
    {PROG_HEAD "    check 1 < 2 else \"bad %lld\"\n",
     "t.kir: line 9: a check's message has 1 %lld for 0 arguments"},
    {PROG_HEAD "    check 1 < 2 else \"bad %s\", 1\n",
     "t.kir: line 9: a check's message has '%' only in %% and %lld"},
    {PROG_HEAD "    else\n", "t.kir: line 9: 'else' without an 'if' just above it"},
    {PROG_HEAD "      b1[0, 0] = 0.0\n", "t.kir: line 9: expected 4 spaces of indentation, found 6"},
    {PROG_HEAD "    for i0 in 0..2\n      let v0: f32 = 0.0\n",
     "t.kir: line 10: v0: id 0 is taken by i0 in this kernel"},
    {PROG_HEAD "    let v0: i64 = 9223372036854775807 + 1\n",
     "t.kir: line 9: 9223372036854775807 + 1 overflows"},
    {PROG_HEAD "    i0 = 1\n", "t.kir: line 9: i0 is a loop variable: it cannot be assigned"},
    {PROG_HEAD "    b1[0, 0] = frob(1.0)\n", "t.kir: line 9: unknown function 'frob'"},
    {PROG_HEAD "    b1[0, 0] = b0[0, 0] +\n",
     "t.kir: line 9: expected an expression, found the end of the line"},
    {PROG_HEAD "  buf b2 temp : f32[1]\n", "t.kir: line 9: expected 'kernel', found 'buf'"},
    {PROG_HEAD "  kernel k2 x ()\n", "t.kir: line 9: expected k1 (kernel ids count up from k0), "
                                     "found 'k2'"},
    {PROG_HEAD "    call frob(b1[0 +: 2, 0 +: 3])\n",
     "t.kir: line 9: expected a micro-kernel (gemm), found 'frob'"},
    {PROG_HEAD "    call gemm(b1[0, 0 +: 3], b0[0 +: 2, 0 +: 3], b0[0 +: 3, 0 +: 3])\n",
     "t.kir: line 9: expected '+:', found ','"},
    {PROG_HEAD "    call gemm(b1[0 +: 2, 0 +: 3], b0[0 +: 2, 0 +: 3])\n",
     "t.kir: line 9: gemm takes 3 tiles, not 2"},
    {PROG_HEAD "    call attn(b1[0 +: 2, 0 +: 3], b0[0 +: 2, 0 +: 3], b0[0 +: 2, 0 +: 3]; 0, 0, 0, "
               "1.0, 0.0)\n",
     "t.kir: line 9: attn takes 4 to 5 tiles, not 3"},
    {PROG_HEAD "    call gemm(b1[0 +: 2, 0 +: 4], b0[0 +: 2, 0 +: 3], b0[0 +: 2, 0 +: 3])\n",
     "t.kir: line 9: extent 4 of b1 is not in 1..3"},
    {PROG_HEAD "    call gemm(b1[0 +: 2, 0 +: 3], b0[0 +: 2, 0 +: 3], b0[0 +: 2, 0 +: 3])\n",
     "t.kir: line 9: gemm of [2,3] += [2,3] x [2,3]: the shapes do not agree"},
    {PROG_HEAD "    call gemm(b0[0 +: 2, 0 +: 3], b1[0 +: 2, 0 +: 2], b1[0 +: 2, 0 +: 3])\n",
     "t.kir: line 9: gemm writes b0, input storage"},
    {PROG_HEAD "    call gemm(b1[0 +: 2, 0 +: 3], b1[0 +: 2, 0 +: 2], b0[0 +: 2, 0 +: 3])\n",
     "t.kir: line 9: gemm writes b1, which tile 1 reads"},
    {"graph x\n  weight %0 \"w\" : f32[4,3] init fill(1)\nprog x\n"
     "  buf b0 weight 0 %0 : f32[2,3,3] packed\n",
     "t.kir: line 4: b0 is packed, but not a weight's [..., N, K] as panels [..., N/P, K, P] "
     "that no buffer views"},
    {"graph x\n  weight %0 \"w\" : f32[4,3] init fill(1)\n  weight %1 \"u\" : f32[3,4] "
     "init fill(1)\nprog x\n  buf b0 weight 1 %0 : f32[4,3]\n",
     "t.kir: line 5: b0 is weight 1, which is %1, not %0"},
    {"graph x\n  weight %0 \"w\" : f32[4,3] init fill(1)\nprog x\n"
     "  buf b0 weight 0 %0 : f32[3,4]\n",
     "t.kir: line 4: b0's shape is not that of weight 0 (%0)"},
    /* the open program (hoist-weights) */
    {OPEN_HEAD "  buf b0 input 0 %0 : f32[2,3]\n",
     "t.kir: line 13: b0 is input storage: the open program reads only weights"},
    {OPEN_PROG, "t.kir: line 7: b2 is derived 0, which the open program does not make with its "
                "node, type and storage"},
    {OPEN_HEAD "  buf b0 weight 0 %1 : f32[2,3]\n  buf b1 derived 1 %2 : f32[2,3]\n",
     "t.kir: line 12: open b1 is derived 1: the open program's 1 derived weights are numbered 0 "
     "to 0, each once"},
    {OPEN_HEAD "  buf b0 weight 0 %1 : f32[2,3]\n  buf b1 derived 0 %2 : f32[3,2]\n",
     "t.kir: line 12: b2 is derived 0, which the open program does not make with its node, type "
     "and storage"},
    {OPEN_HEAD "  buf b0 weight 0 %1 : f32[2,3]\n  buf b1 derived 0 %2 : f32[2,3]\n"
     "  kernel k0 neg (%2)\n    b0[0, 0] = 1.0\n",
     "t.kir: line 16: b0 is weight storage: kernels do not store to it"},
    {OPEN_PROG "  kernel k0 add (%3)\n    b2[0, 0] = 1.0\nopen x\n  buf b0 derived 0 %2 : f32[2,3]\n",
     "t.kir: line 13: b2 is derived storage: kernels do not store to it"},
    {OPEN_HEAD "  buf b0 temp : f32[2,3]\n",
     "t.kir: line 13: b0 is a temp of the open program, which has no arena: only a view of a "
     "weight or a derived weight"},
    {OPEN_HEAD "  buf b0 weight 0 %1 : f32[1,3,2] packed\n",
     "t.kir: line 13: b0 is packed: the open program runs before weights are packed"},
    {"graph x\n  weight %0 \"w\" : f32[2,3] init fill(1)\n  %1 \"y\" = neg %0 : f32[2,3]\n"
     "  output %1\nprog x\n  buf b0 weight 0 %0 : f32[2,3] bf16\n"
     "  buf b1 derived 0 %1 : f32[2,3] bf16\nopen x\n  buf b0 weight 0 %0 : f32[2,3] bf16\n"
     "  buf b1 derived 0 %1 : f32[2,3] bf16\n  kernel k0 neg (%1)\n    b1[0, 0] += 1.0\n",
     "t.kir: line 12: b1 is held as bf16: a store to it is '='"},
    {OPEN_HEAD "  arena 64\n",
     "t.kir: line 13: expected buf or kernel (the open program has no arena), found 'arena'"},
};

static void expect_refusal(const char *text, const char *want)
{
    Arena *a = arena_new();
    Diags d;
    Module *m = parse(a, text, &d);
    if (m || d.n != 1)
        fail_msg("%s with %d messages (want \"%s\") for:\n%s", m ? "accepted" : "refused", d.n,
                 want, text);
    assert_string_equal(d.lines[0], want);
    arena_free(a);
}

static void messages(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_graphs / sizeof bad_graphs[0]; i++)
        expect_refusal(bad_graphs[i][0], bad_graphs[i][1]);
    for (size_t i = 0; i < sizeof bad_progs / sizeof bad_progs[0]; i++)
        expect_refusal(bad_progs[i][0], bad_progs[i][1]);
}

/* ---- 4. the JIT ------------------------------------------------------------ */

/* The module after every pass, and the same module printed and read back. */
static Module *compiled(Arena *a, const char *path)
{
    Diags d;
    diag_init(&d, a, path);
    Module *m = fe_load(a, path, &d, NULL);
    assert_non_null(m);
    PassCtx cx = {.d = &d, .verify = 1};
    machine_default(&cx.machine);
    assert_int_equal(pass_pipeline(m, &cx), 0);
    assert_non_null(m->prog);
    return m;
}

static void *jit_open(const Module *m, CgJit **j)
{
    rt_err e = {0, ""};
    *j = cg_jit_new(m, &e);
    if (!*j)
        fail_msg("JIT build failed: %s", e.msg);
    void *h = cg_jit_model(*j)->open(NULL);
    assert_int_equal(cg_jit_model(*j)->status(h), RT_OK);
    return h;
}

/* Runs both models `runs` times on the same seeded inputs (states carry
 * over); every output is the same bytes. */
static void jit_same(const char *path, int runs)
{
    Arena *a = arena_new(), *b = arena_new();
    Module *m = compiled(a, path);
    char *text = module_text(m);
    Module *back = parse_ok(b, text);
    free(text);
    CgJit *j[2];
    void *h[2] = {jit_open(m, &j[0]), jit_open(back, &j[1])};
    const rt_model *md = cg_jit_model(j[0]);
    void *in[16], *out[2][16];
    assert_true(md->ninputs <= 16 && md->noutputs <= 16);
    for (int r = 0; r < runs; r++) {
        for (int i = 0; i < md->ninputs; i++) {
            in[i] = malloc((size_t)md->inputs[i].count * 4);
            rt_seed_input(&md->inputs[i], i, (uint64_t)r + 1, in[i]);
        }
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < md->noutputs; i++)
                out[k][i] = calloc((size_t)md->outputs[i].count, 4);
            assert_int_equal(cg_jit_model(j[k])->run(h[k], (const void *const *)in, out[k]),
                             RT_OK);
        }
        for (int i = 0; i < md->noutputs; i++) {
            assert_memory_equal(out[0][i], out[1][i], (size_t)md->outputs[i].count * 4);
            free(out[0][i]);
            free(out[1][i]);
        }
        for (int i = 0; i < md->ninputs; i++)
            free(in[i]);
    }
    for (int k = 0; k < 2; k++) {
        cg_jit_model(j[k])->close(h[k]);
        cg_jit_free(j[k]);
    }
    arena_free(a);
    arena_free(b);
}

static void jit_kv_cache(void **state)
{
    (void)state;
    jit_same("tests/models/kv-cache.json", 3);
}

static void jit_mlp(void **state)
{
    (void)state;
    jit_same("examples/mlp.json", 1);
}

/* ---- 5. corrupted text ------------------------------------------------------ */

typedef struct {
    char **texts;
    int n, cap;
} Stages;

static void keep_stage(PassCtx *cx, Module *m, int pass, int changed)
{
    Stages *s = cx->user;
    (void)pass, (void)changed;
    if (s->n == s->cap)
        s->texts = realloc(s->texts, sizeof *s->texts * (size_t)(s->cap = s->cap * 2 + 8));
    s->texts[s->n++] = module_text(m);
}

/* One mutation of text: cut at a random place or change a random byte to
 * one that means something in .kir (or any byte). */
static void mutate(char *text, uint64_t *seed)
{
    static const char bytes[] = "0123456789%biv kx\n\"[](),-.#e=:{}@?";
    size_t len = strlen(text);
    *seed = *seed * 6364136223846793005u + 1442695040888963407u;
    size_t at = (size_t)(*seed >> 33) % len;
    unsigned op = (unsigned)(*seed >> 20) % 8;
    if (op == 0)
        text[at] = 0;
    else if (op == 1)
        text[at] = (char)(1 + (*seed >> 8) % 255);
    else
        text[at] = bytes[(*seed >> 8) % (sizeof bytes - 1)];
}

static void corrupted(void **state)
{
    (void)state;
    Stages s = {NULL, 0, 0};
    run_pipeline("tests/models/kv-cache.json", keep_stage, &s);
    run_pipeline("tests/models/argmax-topk.json", keep_stage, &s);
    uint64_t seed = 42;
    int accepted = 0, total = 0;
    for (int i = 0; i < s.n; i++)
        for (int r = 0; r < 150; r++, total++) {
            char *text = strdup(s.texts[i]), why[1500] = "";
            mutate(text, &seed);
            if (r % 3 == 0)
                mutate(text, &seed);
            Arena *a = arena_new(), *b = arena_new();
            Diags d;
            Module *m = parse(a, text, &d), *back;
            for (int j = 0; !m && j < d.n; j++)
                assert_true(strncmp(d.lines[j], "t.kir: line ", 12) == 0);
            if (m) {
                accepted++;
                verify(m);
                char *once = module_text(m), *twice = reprint(once, &back, b, why, sizeof why);
                if (!twice || strcmp(once, twice) != 0)
                    fail_msg("unstable after a mutation: %s\n%s", why, text);
                free(once);
                free(twice);
            }
            arena_free(a);
            arena_free(b);
            free(text);
        }
    assert_true(accepted > 0 && accepted < total);
    for (int i = 0; i < s.n; i++)
        free(s.texts[i]);
    free(s.texts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_stage_of_every_model),
        cmocka_unit_test(graph_syntax),
        cmocka_unit_test(graph_normalised),
        cmocka_unit_test(prog_syntax),
        cmocka_unit_test(expressions),
        cmocka_unit_test(messages),
        cmocka_unit_test(jit_kv_cache),
        cmocka_unit_test(jit_mlp),
        cmocka_unit_test(corrupted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
