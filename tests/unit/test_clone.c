/* tests/unit/test_clone.c: ir_clone (ir/clone.c), the in-memory copy a
 * decoder's shape variants are made of (cli/program.c).
 * 1. A clone prints the same .kir as its original, in the original's
 *    arena or another: every leaf kind, init, const, attribute kind,
 *    quoted name and note.
 * 2. It shares no node, operand list, attribute list or string with the
 *    original: changing the clone leaves the original's text as it was.
 * 3. A decoder cloned and re-inferred at T tokens (ir_decoder_tokens) is
 *    the decoder parsed afresh and re-inferred, as a graph and compiled
 *    through the whole pipeline; the original stays at its own T. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "frontend/frontend.h"
#include "frontend/import.h"
#include "passes/passes.h"
#include "testlib.h"

#include <stdlib.h>
#include <string.h>

/* Every kind of graph line: leaves of each kind and init, a const, an
 * unnamed node, INTS, ENUM, FLOAT and INT attributes, names that need
 * quoting, and a note. */
static const char graph_kir[] =
    "graph g\n"
    "  # a note, kept\n"
    "  input  %0 \"x \\\"in\\\"\" : f32[2,6]\n"
    "  input  %1 \"ids\" : i32[2]\n"
    "  weight %2 \"w\" : f32[6,6] init random(seed=7, scale=0.25)\n"
    "  weight %3 \"b\" : f32[6] init data(1, 2, 3, 4, 5, 6)\n"
    "  weight %4 \"table\" : f32[4,6] init fill(0.5)\n"
    "  state  %5 \"s\" : f32[2,6]\n"
    "  %6 = const 0.5 : f32[]\n"
    "  %7 = linear %0, %2, %3 : f32[2,6]\n"
    "  %8 \"e\" = embedding %4, %1 : f32[2,6]\n"
    "  %9 = mul %7, %6 : f32[2,6]\n"
    "  %10 \"sum\" = add %9, %8 : f32[2,6]\n"
    "  %11 \"r\" = reshape %10 {shape=[3,-1]} : f32[3,4]\n"
    "  %12 \"top\" = topk %11 {k=2, axis=-1, result=values} : f32[3,2]\n"
    "  output %12\n";

static char *text_of(const Module *m) { return ir_module_text(m); }

static Module *parse_kir(Arena *a, const char *text)
{
    Diags d;
    diag_init(&d, a, "clone.kir");
    Module *m = ir_parse(a, "clone.kir", text, &d);
    if (!m) {
        diag_print(&d, stderr);
        fail_msg("the test graph does not parse");
    }
    return m;
}

/* ---- 1. the same text ------------------------------------------------------ */

static void test_clone_prints_same(void **state)
{
    (void)state;
    Arena *a = arena_new(), *b = arena_new();
    Module *m = parse_kir(a, graph_kir);
    assert_string_equal(text_of(m), graph_kir);
    assert_string_equal(text_of(ir_clone(a, m)), graph_kir);
    Module *c = ir_clone(b, m);
    assert_ptr_equal(c->a, b);
    assert_string_equal(text_of(c), graph_kir);
    assert_string_equal(text_of(ir_clone(b, c)), graph_kir);
    arena_free(a);
    arena_free(b);
}

/* An empty module clones to an empty module. */
static void test_clone_empty(void **state)
{
    (void)state;
    Module *m = tl_module();
    Module *c = ir_clone(m->a, m);
    assert_int_equal(c->nnodes, 0);
    assert_int_equal(c->noutputs, 0);
    assert_string_equal(text_of(c), text_of(m));
    tl_free(m);
}

/* ---- 2. nothing shared ----------------------------------------------------- */

/* x and y are distinct copies of each other: same contents, own memory. */
static void distinct_str(const char *x, const char *y)
{
    assert_true(!x == !y);
    if (x) {
        assert_ptr_not_equal(x, y);
        assert_string_equal(x, y);
    }
}

static void distinct_node(const Module *m, const Module *c, int i)
{
    const Node *n = m->nodes[i], *k = c->nodes[i];
    assert_ptr_not_equal(n, k);
    assert_int_equal(k->id, i);
    assert_int_equal(k->nin, n->nin);
    if (n->nin)
        assert_ptr_not_equal(k->in, n->in);
    for (int j = 0; j < n->nin; j++)
        assert_ptr_equal(k->in[j], c->nodes[n->in[j]->id]);
    for (int j = 0; j < KILN_MAX_ATTRS; j++)
        if (n->attrs.v[j].ints)
            assert_ptr_not_equal(k->attrs.v[j].ints, n->attrs.v[j].ints);
    distinct_str(n->name, k->name);
    distinct_str(n->where, k->where);
}

/* Each of the clone's leaf and output arrays is its own and points at
 * the clone's nodes. */
static void distinct_array(Node *const *v, Node *const *w, int n, const Module *c)
{
    if (n)
        assert_ptr_not_equal(v, w);
    for (int i = 0; i < n; i++)
        assert_ptr_equal(w[i], c->nodes[v[i]->id]);
}

static void test_clone_shares_nothing(void **state)
{
    (void)state;
    Arena *a = arena_new();
    Module *m = parse_kir(a, graph_kir);
    Module *c = ir_clone(a, m);
    assert_ptr_not_equal(c, m);
    assert_ptr_not_equal(c->nodes, m->nodes);
    assert_int_equal(c->nnodes, m->nnodes);
    for (int i = 0; i < m->nnodes; i++)
        distinct_node(m, c, i);
    distinct_array(m->inputs, c->inputs, m->ninputs, c);
    distinct_array(m->weights, c->weights, m->nweights, c);
    distinct_array(m->states, c->states, m->nstates, c);
    distinct_array(m->outputs, c->outputs, m->noutputs, c);
    assert_ptr_not_equal(c->notes.v, m->notes.v);
    distinct_str(m->notes.v[0], c->notes.v[0]);
    /* the init data, never written, is shared */
    assert_ptr_equal(c->weights[1]->init.data, m->weights[1]->init.data);

    /* change everything a pass could: the original prints as it did */
    c->inputs[0]->dims[1] = 12;
    c->nodes[11]->attrs.v[0].ints[0] = 6;
    c->nodes[12]->in[0] = c->nodes[10];
    c->nodes[10]->rank = 1;
    ((char *)c->nodes[8]->name)[0] = 'E';
    ir_note(a, &c->notes, "another note");
    ir_node_new(c, OP_EXP, &c->nodes[10], 1);
    c->outputs[0] = c->nodes[10];
    ir_module_renumber(c);
    assert_string_equal(text_of(m), graph_kir);
    arena_free(a);
}

/* ---- 3. a decoder's variants ----------------------------------------------- */

/* A small llama-family decoder at T tokens (its kiln/1 text); moe:
 * sparse layers, q/k norms and a sliding window besides. */
static char *decoder_text(Arena *a, int64_t T, int moe)
{
    static const unsigned char sparse[2] = {1, 1};
    ImpLlama c = {.model_name = "tiny", .vocab = 40, .dim = 16, .hidden = 24, .layers = 2,
                  .heads = 4, .kv_heads = 2, .head_dim = 4, .tokens = T, .max_seq = 32,
                  .eps = 1e-5, .theta = 10000.0, .rope_style = "half", .hf_names = 1};
    if (moe) {
        c.moe = sparse;
        c.experts = 4;
        c.top_k = 2;
        c.moe_hidden = 8;
        c.norm_topk = 1;
        c.qk_norm = 1;
        c.window = 5;
    }
    return imp_llama_graph(a, &c);
}

static Module *load_decoder(Arena *a, const char *text)
{
    Diags d;
    diag_init(&d, a, "tiny.json");
    Module *m = fe_parse(a, "tiny.json", text, strlen(text), &d);
    if (!m) {
        diag_print(&d, stderr);
        fail_msg("the decoder does not load");
    }
    IrDecoder dec;
    assert_true(ir_decoder(m, &dec));
    return m;
}

static void at_tokens(Module *m, int64_t T)
{
    Diags d;
    diag_init(&d, m->a, m->file);
    if (ir_decoder_tokens(m, T, &d) != 0) {
        diag_print(&d, stderr);
        fail_msg("the decoder does not hold at %lld tokens", (long long)T);
    }
}

static char *compiled(Module *m)
{
    Diags d;
    diag_init(&d, m->a, m->file);
    PassCtx cx = {.d = &d, .verify = 1};
    machine_default(&cx.machine);
    assert_int_equal(pass_pipeline(m, &cx), 0);
    return text_of(m);
}

/* The decoder loaded at T0, cloned to each T: the fresh load's graph and
 * program, and the original untouched. */
static void variants(int64_t T0, int moe)
{
    static const int64_t Ts[] = {1, 7, 32};
    Arena *a = arena_new();
    const char *text = decoder_text(a, T0, moe);
    Module *m = load_decoder(a, text);
    char *before = text_of(m);
    for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++) {
        Module *c = ir_clone(a, m), *f = load_decoder(a, text);
        at_tokens(c, Ts[i]);
        at_tokens(f, Ts[i]);
        assert_string_equal(text_of(c), text_of(f));
        IrDecoder dec;
        assert_true(ir_decoder(c, &dec));
        assert_int_equal(dec.tokens, Ts[i]);
        assert_string_equal(compiled(c), compiled(f));
        assert_string_equal(text_of(m), before);
    }
    arena_free(a);
}

static void test_clone_decoder(void **state)
{
    (void)state;
    variants(1, 0);
    variants(4, 0);
}

static void test_clone_decoder_moe(void **state)
{
    (void)state;
    variants(1, 1);
}

/* The decoder at T = 7 (seed-filled weights, tokens t % V at positions
 * 0..6) on the reference: every row's logits into *out. */
static void run_ref(Module *m, void **out)
{
    void *in[2], *w[64], *st[64];
    int32_t *tok = malloc(4 * 7), *pos = malloc(4 * 7);
    for (int t = 0; t < 7; t++)
        tok[t] = (t * 11 + 3) % 40, pos[t] = t;
    in[0] = tok, in[1] = pos;
    for (int i = 0; i < m->nweights; i++)
        w[i] = tl_random(node_count(m->weights[i]), 100 + (uint64_t)i);
    for (int i = 0; i < m->nstates; i++)
        st[i] = calloc((size_t)node_count(m->states[i]), 4);
    tl_ref_ok(m, in, w, st, out);
    free(tok);
    free(pos);
    for (int i = 0; i < m->nweights; i++)
        free(w[i]);
    for (int i = 0; i < m->nstates; i++)
        free(st[i]);
}

/* The chunk cut to its last row: logits [1, V] equal to row T - 1 of the
 * uncut graph's on the reference, the slice right before the final norm
 * (the first value read twice: the last residual add). */
static void last_row(int moe)
{
    Arena *a = arena_new();
    Module *m = load_decoder(a, decoder_text(a, 7, moe)), *c = ir_clone(a, m);
    Diags d;
    diag_init(&d, a, "tiny.json");
    assert_int_equal(ir_decoder_last_row(c, &d), 0);
    IrDecoder dec;
    assert_true(ir_decoder(c, &dec));
    assert_true(dec.last);
    assert_int_equal(dec.tokens, 7);
    assert_int_equal(c->outputs[0]->dims[0], 1);
    assert_int_equal(c->outputs[0]->dims[1], 40);
    const Node *y = c->outputs[0], *norm = y->in[0], *s = norm->in[0];
    assert_int_equal(y->op, OP_LINEAR);
    assert_int_equal(norm->op, OP_RMSNORM);
    assert_int_equal(s->op, OP_SLICE);
    assert_int_equal(s->in[0]->op, OP_ADD);
    assert_int_equal(s->dims[0], 1);
    ir_verify_graph(c);
    void *all[1], *one[1];
    run_ref(m, all);
    run_ref(c, one);
    tl_assert_near(one[0], (float *)all[0] + 6 * 40, 40);
    free(all[0]);
    free(one[0]);
    compiled(c);
    arena_free(a);
}

static void test_decoder_last_row(void **state)
{
    (void)state;
    last_row(0);
    last_row(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clone_prints_same),
        cmocka_unit_test(test_clone_empty),
        cmocka_unit_test(test_clone_shares_nothing),
        cmocka_unit_test(test_clone_decoder),
        cmocka_unit_test(test_decoder_last_row),
        cmocka_unit_test(test_clone_decoder_moe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
