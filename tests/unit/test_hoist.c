/* tests/unit/test_hoist.c: hoist-weights. What reads only weights is
 * computed once, by the open program, and no per-call kernel computes it
 * again: the experts of an imported qwen3_moe stacked at open, read by
 * the moe kernel as derived weights (packed by tile as weights are); what
 * an input or an output touches stays per call. Each JIT build agrees
 * with the reference over several calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "passes/passes.h"
#include "tests/unit/testlib.h"

#include <stdlib.h>
#include <string.h>

enum { E = 3, H = 16, I = 16, T = 2 };

static Node *reshape(Module *m, Node *x, int count, const int64_t *dims)
{
    Node *n = tl_op(m, OP_RESHAPE, NULL, 1, x);
    tl_attr_ints(m, n, "shape", count, dims);
    tl_infer_ok(m, n, NULL);
    return n;
}

/* Each expert's [rows, cols] matrix reshaped to [1, rows, cols] and
 * concatenated, as `kiln import hf` stacks a qwen3_moe's experts. */
static Node *stack(Module *m, const char *proj, int64_t rows, int64_t cols)
{
    Node *part[E];
    for (int e = 0; e < E; e++) {
        char name[32];
        snprintf(name, sizeof name, "experts.%d.%s", e, proj);
        part[e] = reshape(m, tl_weight(m, name, TL_DIMS(rows, cols)), TL_DIMS(1, rows, cols));
    }
    Node *n = tl_op(m, OP_CONCAT, proj, E, part[0], part[1], part[2]);
    tl_infer_ok(m, n, NULL);
    return n;
}

/* y = moe(x; router, the stacked gate, up and down) + x */
static Module *moe_model(void)
{
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(T, H));
    Node *router = tl_weight(m, "router", TL_DIMS(E, H));
    Node *gate = stack(m, "gate", I, H), *up = stack(m, "up", I, H), *down = stack(m, "down", H, I);
    Node *moe = tl_op(m, OP_MOE, "moe", 5, x, router, gate, up, down);
    tl_attr_i(moe, "top_k", 2);
    tl_infer_ok(m, moe, NULL);
    Node *y = tl_op(m, OP_ADD, "y", 2, moe, x);
    tl_infer_ok(m, y, NULL);
    tl_outputs(m, 1, y);
    return m;
}

/* m lowered, canonicalized and hoisted (with its weights held as
 * `store`); returns what the pass returned. */
static int hoist(Module *m, Storage store)
{
    PassCtx cx = {.weight_store = store};
    machine_default(&cx.machine);
    assert_int_equal(pass_lower(m, &cx), 1);
    pass_canonicalize_memrefs(m, &cx);
    int changed = pass_hoist_weights(m, &cx);
    ir_verify_prog(m);
    return changed;
}

/* Random weights and inputs for m: w[i], in[i] (free with release). */
static void data(Module *m, void **in, void **w, uint64_t seed)
{
    for (int i = 0; i < m->ninputs; i++)
        in[i] = tl_random(node_count(m->inputs[i]), seed + (uint64_t)i);
    for (int i = 0; i < m->nweights; i++)
        w[i] = tl_random(node_count(m->weights[i]), 100 + (uint64_t)i);
}

static void release(Module *m, void **in, void **w)
{
    for (int i = 0; i < m->ninputs; i++)
        free(in[i]);
    for (int i = 0; i < m->nweights; i++)
        free(w[i]);
}

/* The weight named name's ir_held_index. */
static int weight_index(const Module *m, const char *name)
{
    for (int i = 0; i < m->nweights; i++)
        if (!strcmp(m->weights[i]->name, name))
            return i;
    fail_msg("no weight '%s'", name);
    return -1;
}

/* The text of the C function `name` in c: from its line to its closing
 * brace at column 0 (malloc'd). */
static char *function(const char *c, const char *name)
{
    const char *at = strstr(c, name);
    assert_non_null(at);
    const char *end = strstr(at, "\n}\n");
    assert_non_null(end);
    return strndup(at, (size_t)(end - at));
}

/* The expert stacks move to the open program: no per-call kernel reads
 * an expert's own weight or writes a stack, the moe kernel reads the
 * stacks as derived weights, and the run function calls no open kernel. */
static void stacks_made_at_open(void **state)
{
    (void)state;
    Module *m = moe_model();
    assert_int_equal(hoist(m, ST_F32), 1);
    assert_non_null(m->open);
    assert_int_equal(ir_nderived(m), 3);
    assert_int_equal(m->open->nkernels, 3 * E);       /* a copy per expert matrix */
    char read[64] = {0};
    ir_held_reads(m, m->prog, read);
    const char *proj[] = {"gate", "up", "down"};
    for (int p = 0; p < 3; p++)
        for (int e = 0; e < E; e++) {
            char name[32];
            snprintf(name, sizeof name, "experts.%d.%s", e, proj[p]);
            assert_false(read[weight_index(m, name)]);
        }
    for (int j = 0; j < 3; j++)
        assert_true(read[m->nweights + j]);
    for (int k = 0; k < m->prog->nkernels; k++)
        for (int b = 0; b < m->prog->nbufs; b++)
            if (m->prog->bufs[b]->kind == BK_DERIVED)
                assert_false(ir_block_writes(&m->prog->kernels[k]->body, m->prog->bufs[b]));
    char *prog = tl_prog_text(m);
    tl_assert_has(prog, "hoist-weights: 9 kernels read only weights: moved to the open program");
    tl_assert_has(prog, "open t\n");
    free(prog);
    char *c = cg_emit_string(m, CG_CC);
    char *run = function(c, "static int kiln_run_kernels(");
    char *open = function(c, "static int kiln_open_kernels(");
    assert_null(strstr(run, "o0("));
    assert_non_null(strstr(run, "k0("));
    tl_assert_has(open, "const struct kiln_call *c = &kiln_open_calls[i];");
    char *table = strstr(c, "static const struct kiln_call kiln_open_calls["),
         *end = strstr(c, "static int kiln_open_kernels(");
    assert_non_null(table);
    for (int k = 0; k < 3 * E; k++) {           /* in the table, in order */
        char call[32];
        snprintf(call, sizeof call, "/* o%d ", k);
        table = strstr(table, call);
        assert_true(table && table < end);
    }
    tl_assert_has(open, "rt_free(m->w[1]);");           /* experts.0.gate: read only here */
    assert_null(strstr(open, "rt_free(m->w[0]);"));     /* the router stays */
    free(run);
    free(open);
    void *in[4], *w[16];
    data(m, in, w, 1);
    tl_check(m, in, w, 1e-5);
    release(m, in, w);
    tl_free(m);
}

/* The same model through every pass: tile packs the stacks as it packs
 * weights, and the moe kernel's gemms become calls over them; several
 * calls of one open JIT build give the reference's values each time. */
static void stacks_packed_and_reused(void **state)
{
    (void)state;
    Module *m = moe_model();
    PassCtx cx = {.verify = 1};
    machine_default(&cx.machine);
    assert_int_equal(pass_pipeline(m, &cx), 0);
    int packed = 0;
    for (int b = 0; b < m->prog->nbufs; b++)
        packed += m->prog->bufs[b]->kind == BK_DERIVED && m->prog->bufs[b]->packed;
    assert_int_equal(packed, 3);
    char *prog = tl_prog_text(m);
    tl_assert_has(prog, "call gemm(");
    free(prog);
    void *in[4], *w[16], *ref[4];
    data(m, in, w, 7);
    TlJit jt;
    for (int i = 0; i < m->nweights; i++) {          /* the weights as inline data */
        m->weights[i]->init.kind = INIT_DATA;
        m->weights[i]->init.data = w[i];
    }
    tl_jit_open(&jt, m);
    for (int call = 0; call < 3; call++) {
        float *x = in[0];
        for (int j = 0; j < T * H; j++)
            x[j] += 0.25f * (float)call;
        tl_ref_ok(m, in, w, NULL, ref);
        float got[T * H];
        void *out[1] = {got};
        assert_int_equal(jt.md->run(jt.h, (const void *const *)in, out), RT_OK);
        tl_assert_close(got, ref[0], T * H);
        free(ref[0]);
    }
    tl_jit_close(&jt);
    release(m, in, w);
    tl_free(m);
}

/* Experts held in bf16: the stacks only copy them, so they are held in
 * bf16 too (nothing rounded that was not); w * v computes, so f32. */
static void storage_of_derived(void **state)
{
    (void)state;
    Module *m = moe_model();
    Node *w = tl_weight(m, "w", TL_DIMS(T, H)), *v = tl_weight(m, "v", TL_DIMS(T, H));
    Node *wv = tl_op(m, OP_MUL, "wv", 2, w, v);
    tl_infer_ok(m, wv, NULL);
    Node *s = tl_op(m, OP_ADD, "s", 2, m->outputs[0], wv);
    tl_infer_ok(m, s, NULL);
    tl_outputs(m, 1, s);
    assert_int_equal(hoist(m, ST_BF16), 1);
    assert_int_equal(ir_nderived(m), 4);
    for (int j = 0; j < 3; j++)
        assert_int_equal(ir_derived_made(m, j)->store, ST_BF16);
    assert_int_equal(ir_derived_made(m, 3)->store, ST_F32);
    assert_ptr_equal(ir_derived_made(m, 3)->node, wv);
    tl_free(m);
}

/* What an input or an output touches stays per call: a weight's copy into
 * a concat whose other slice an input fills, and an output computed from
 * weights alone; nothing moves, and the JIT build is right. */
static void kept_per_call(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 8));
    Node *w = tl_weight(m, "w", TL_DIMS(2, 8)), *v = tl_weight(m, "v", TL_DIMS(2, 8));
    Node *nx = tl_op(m, OP_NEG, "nx", 1, x);
    tl_infer_ok(m, nx, NULL);
    Node *wx = tl_op(m, OP_CONCAT, "wx", 2, reshape(m, w, TL_DIMS(1, 2, 8)),
                     reshape(m, nx, TL_DIMS(1, 2, 8)));
    tl_infer_ok(m, wx, NULL);
    Node *out = tl_op(m, OP_ABS, "out", 1, wx), *sum = tl_op(m, OP_ADD, "wsum", 2, w, v);
    tl_infer_ok(m, out, NULL);
    tl_infer_ok(m, sum, NULL);
    tl_outputs(m, 2, out, sum);
    assert_int_equal(hoist(m, ST_F32), 0);
    assert_null(m->open);
    void *in[2], *wd[2];
    data(m, in, wd, 3);
    tl_check(m, in, wd, 0.0);
    release(m, in, wd);
    tl_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stacks_made_at_open),
        cmocka_unit_test(stacks_packed_and_reused),
        cmocka_unit_test(storage_of_derived),
        cmocka_unit_test(kept_per_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
