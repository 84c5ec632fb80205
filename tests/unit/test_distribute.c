/* tests/unit/test_distribute.c: the distribute pass. Each model type the
 * test tools write (tests/import/ckpt.c) is imported, split over 2 ranks
 * and run by the reference simulating them (ref_run_ranks), each rank on
 * its part of the folder's weights, cut as Node.shard says: the logits of
 * several decode steps and of a prefill chunk equal the one-rank graph's.
 * The Megatron layout of a Llama is pinned, and Mixtral's experts of one
 * tensor each (each rank reading its own; a stack of more than 64 too),
 * and refusals name the dimension and the rank counts that work
 * (mistral's one KV head among them, the experts 3 ranks do not split,
 * an FP8 weight's row of blocks of 128 that 8 ranks do not split). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "frontend/frontend.h"
#include "tests/unit/import_run.h"
#include "tests/unit/testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NR 2                  /* ranks */

/* The imported decoder at T tokens a call, through simplify and, with
 * ranks > 1, distribute; NULL when distribute refused (its lines in err). */
static Module *load(Arena *a, const char *text, int ranks, char *err, size_t errlen)
{
    Diags d;
    diag_init(&d, a, "imported");
    Module *m = fe_parse(a, "imported", text, strlen(text), &d);
    if (!m) {
        diag_print(&d, stderr);
        fail_msg("the imported graph does not load");
    }
    PassCtx cx = {.d = &d, .verify = 1, .ranks = ranks};
    assert_int_equal(pass_simplify(m, &cx) >= 0, 1);
    if (pass_distribute(m, &cx) < 0) {
        size_t at = 0;
        for (int i = 0; i < d.n && at < errlen; i++)
            at += (size_t)snprintf(err + at, errlen - at, "%s\n", d.lines[i]);
        return NULL;
    }
    ir_verify_graph(m);
    return m;
}

/* Weight w's data on rank r in the folder's safetensors file (f32): its
 * tensor, or rank r's of a weight of a tensor per rank. */
static const float *file_weight(const rt_safetensors *st, const Node *w, int r)
{
    const char *name = w->shard.tensors ? w->shard.tensors[r] : w->name;
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->t[i].name, name) == 0) {
            assert_int_equal(st->t[i].dtype, RT_ST_F32);
            return (const float *)st->t[i].data;
        }
    fail_msg("no tensor '%s' in the weights file", name);
    return NULL;
}

/* Rank r's part of whole (the weight's full data) as w's shard says. */
static float *part(const Node *w, const float *whole, int r)
{
    int64_t count = node_count(w);
    float *p = malloc((size_t)count * 4 + 4);
    if (!w->shard.ranks || w->shard.tensors) {
        memcpy(p, whole, (size_t)count * 4);
        return p;
    }
    int a = w->shard.axis;
    int64_t len = w->dims[a], inner = shape_count(w->rank - a - 1, w->dims + a + 1);
    int64_t outer = shape_count(a, w->dims);
    for (int64_t o = 0; o < outer; o++)
        memcpy(p + o * len * inner, whole + (o * w->shard.of + r * len) * inner,
               (size_t)(len * inner) * 4);
    return p;
}

/* One graph with its leaves' tensors on `ranks` ranks. */
typedef struct {
    Module *m;
    int ranks;
    Tensor *w[NR][64], *st[NR][16];
    Tensor *const *wr[NR], *const *sr[NR];
} Run;

static void run_open(Run *g, Module *m, int ranks, const rt_safetensors *st)
{
    g->m = m;
    g->ranks = ranks;
    assert_true(m->nweights <= 64 && m->nstates <= 16);
    for (int r = 0; r < ranks; r++) {
        for (int i = 0; i < m->nweights; i++)
            g->w[r][i] = tensor_wrap(m->weights[i], part(m->weights[i],
                                                         file_weight(st, m->weights[i], r), r));
        for (int i = 0; i < m->nstates; i++)
            g->st[r][i] = tensor_new(m->states[i]);
        g->wr[r] = g->w[r];
        g->sr[r] = g->st[r];
    }
}

static void run_close(Run *g)
{
    for (int r = 0; r < g->ranks; r++) {
        for (int i = 0; i < g->m->nweights; i++)
            tensor_free(g->w[r][i]);
        for (int i = 0; i < g->m->nstates; i++)
            tensor_free(g->st[r][i]);
    }
}

/* One call at positions pos.. with the test sequence's tokens; the
 * logits, malloc'd. */
static float *run_call(Run *g, int64_t T, int pos, int64_t V)
{
    int32_t tok[64], p[64];
    for (int t = 0; t < T; t++) {
        tok[t] = ti_token_at(pos + t, (int)V);
        p[t] = pos + t;
    }
    Tensor *in[2] = {tensor_wrap(g->m->inputs[0], tok), tensor_wrap(g->m->inputs[1], p)};
    float *out = calloc((size_t)(T * V), 4);
    Tensor *o = tensor_wrap(g->m->outputs[0], out);
    char err[512] = "";
    if (ref_run_ranks(g->m, g->ranks, in, g->wr, g->sr, &o, err, sizeof err) != 0)
        fail_msg("reference on %d ranks: %s", g->ranks, err);
    free(in[0]);
    free(in[1]);
    free(o);
    return out;
}

/* A folder of type's small shape, as the test tools write it. */
static const char *folder(const char *type)
{
    CkShape s = ti_hf_shape(type);
    CkModel *ck = ti_model(&s);
    const char *dir = ti_write_hf(type, ck, 1, NULL);
    ck_free(ck);
    return dir;
}

/* type's folder, imported at T tokens a call, on 1 and on NR ranks:
 * `calls` calls give the same logits. */
static void agree(const char *type, int64_t T, int calls)
{
    const char *dir = folder(type);
    Arena *a = arena_new();
    char *text = ti_hf(a, dir, T, 16), err[2000] = "";
    Module *one = load(a, text, 1, err, sizeof err), *dist = load(a, text, NR, err, sizeof err);
    if (!dist)
        fail_msg("%s: distribute refused:\n%s", type, err);
    Diags d;
    diag_init(&d, a, "weights");
    int io;
    const rt_safetensors *st = imp_st_open(a, arena_printf(a, "%s/model.safetensors", dir), &d,
                                           &io);
    assert_non_null(st);
    Run g1, gn;
    run_open(&g1, one, 1, st);
    run_open(&gn, dist, NR, st);
    int64_t V = one->outputs[0]->dims[1];
    for (int c = 0; c < calls; c++) {
        float *want = run_call(&g1, T, (int)(c * T), V), *got = run_call(&gn, T, (int)(c * T), V);
        tl_assert_close(got, want, (int)(T * V));
        free(want);
        free(got);
    }
    run_close(&g1);
    run_close(&gn);
    arena_free(a);
}

static void llama_decode(void **state) { (void)state; agree("llama", 1, 4); }
static void llama_prefill(void **state) { (void)state; agree("llama", 5, 2); }
static void qwen2_biases_tied(void **state) { (void)state; agree("qwen2", 1, 3); }
static void qwen3_head_norms(void **state) { (void)state; agree("qwen3", 3, 2); }
/* GPT-2's Conv1D weights are read through matmul, which the pass does
 * not split: the graph stays whole, and agrees. */
static void gpt2_whole(void **state) { (void)state; agree("gpt2", 2, 2); }
/* Experts of one tensor each, split by experts: each rank reads its own. */
static void mixtral_experts_split(void **state) { (void)state; agree("mixtral", 1, 2); }
static void qwen3_moe_experts_split(void **state) { (void)state; agree("qwen3_moe", 3, 2); }
/* gpt-oss: sinks split with the query heads, its experts, read through
 * views, split by experts beneath them (tests/mpi.sh: MXFP4 ones too). */
static void gpt_oss_sinks_views(void **state) { (void)state; agree("gpt_oss", 3, 2); }

/* count of lines of text that hold `part` */
static int lines_with(const char *text, const char *part)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, part)); p += strlen(part))
        n++;
    return n;
}

/* Llama's Megatron layout: q, k, v, gate, up and the classifier by rows,
 * o and down by columns, each followed by an allreduce, the logits
 * gathered; the embedding table by vocabulary rows, its rows completed by
 * an allreduce; the norms whole; the KV caches by heads. */
static void llama_layout(void **state)
{
    (void)state;
    const char *dir = folder("llama");
    Arena *a = arena_new();
    char err[2000] = "";
    Module *m = load(a, ti_hf(a, dir, 1, 16), NR, err, sizeof err);
    assert_non_null(m);
    char *g = tl_graph_text(m);
    tl_assert_has(g, "weight %4 \"model.layers.0.self_attn.q_proj.weight\" : f32[32,64] "
                     "shard(axis=0, of=64, ranks=2)");
    tl_assert_has(g, "\"model.layers.0.self_attn.k_proj.weight\" : f32[16,64] shard(axis=0, "
                     "of=32, ranks=2)");
    tl_assert_has(g, "\"model.layers.0.self_attn.o_proj.weight\" : f32[64,32] shard(axis=1, "
                     "of=64, ranks=2)");
    tl_assert_has(g, "\"model.layers.0.mlp.down_proj.weight\" : f32[64,48] shard(axis=1, "
                     "of=96, ranks=2)");
    tl_assert_has(g, "\"lm_head.weight\" : f32[160,64] shard(axis=0, of=320, ranks=2)");
    tl_assert_has(g, "weight %2 \"model.embed_tokens.weight\" : f32[160,64] shard(axis=0, "
                     "of=320, ranks=2)");
    tl_assert_has(g, "\"x0.part\" = embedding %2, %0 {ranks=2} : f32[1,64]");
    tl_assert_has(g, "\"x0\" = allreduce %29 {ranks=2} : f32[1,64]");
    tl_assert_has(g, "\"layers.0.k_cache\" : f32[16,1,16] shard(axis=1, of=2, ranks=2)");
    tl_assert_has(g, "\"layers.0.att_out\" = allreduce %44 {ranks=2} : f32[1,64]");
    tl_assert_has(g, "\"logits\" = allgather %80 {axis=1, ranks=2} : f32[1,320]");
    assert_int_equal(lines_with(g, "= allreduce"), 5);
    assert_int_equal(lines_with(g, "= allgather"), 1);
    assert_int_equal(lines_with(g, "shard("), 20);
    tl_assert_has(g, "# 2 ranks: each holds 206080 weight bytes of 410880");
    tl_assert_has(g, "# a call of 1 token(s) runs allreduce 5 times (1280 bytes of results in "
                     "all) and allgather 1 times (1280 bytes)");
    tl_assert_has(g, "# weight 'lm_head.weight' split by rows (320 of them): rank 0 holds "
                     "0..159, rank 1 holds 160..319 (40960 bytes each)");
    free(g);
    arena_free(a);
}

/* Mixtral's experts, one tensor each: of the 4 per projection the first
 * 2 weights stay, rank r reading experts 2r, 2r + 1's tensors, stacked
 * by a concat of 2 for the moe over 2 ranks, whose part an allreduce
 * completes; the notes say which rank reads which tensor, and the bytes
 * each rank holds; the graph's text reads back. */
static void mixtral_experts_layout(void **state)
{
    (void)state;
    const char *dir = folder("mixtral");
    Arena *a = arena_new();
    char err[2000] = "";
    Module *one = load(a, ti_hf(a, dir, 1, 16), 1, err, sizeof err);
    Module *m = load(a, ti_hf(a, dir, 1, 16), NR, err, sizeof err);
    assert_non_null(m);
    assert_int_equal(m->nweights, one->nweights - 12);       /* 2 layers, 3 x 2 experts */
    char *g = tl_graph_text(m);
    tl_assert_has(g, "weight %10 \"model.layers.0.block_sparse_moe.experts.0.w1.weight\" : "
                     "f32[48,64] shard(tensors=[\"model.layers.0.block_sparse_moe.experts.0.w1."
                     "weight\", \"model.layers.0.block_sparse_moe.experts.2.w1.weight\"])\n");
    tl_assert_has(g, "\"model.layers.1.block_sparse_moe.experts.1.w2.weight\" : f32[64,48] "
                     "shard(tensors=[\"model.layers.1.block_sparse_moe.experts.1.w2.weight\", "
                     "\"model.layers.1.block_sparse_moe.experts.3.w2.weight\"])\n");
    assert_int_equal(lines_with(g, "shard(tensors="), 12);
    assert_int_equal(lines_with(g, ".w1\" = reshape %"), 4);
    assert_int_equal(lines_with(g, "\"layers.0.experts.2.w1\""), 0);
    tl_assert_has(g, "\"layers.0.w1_stack.0.0\" = concat %56, %57 {axis=0} : f32[2,48,64]\n");
    tl_assert_has(g, "\"layers.0.ffn_out.part\" = moe %55, %9, %62, %63, %64 {top_k=2, "
                     "norm_topk_prob=true, ranks=2");
    tl_assert_has(g, "\"layers.0.ffn_out\" = allreduce %65 {ranks=2} : f32[1,64]\n");
    tl_assert_has(g, "# moe 'layers.0.ffn_out.part': 4 experts over the ranks, 2 each: rank 0 "
                     "holds experts 0..1, rank 1 holds 2..3 (6 weight tensors, 73728 bytes a "
                     "rank)\n");
    assert_int_equal(lines_with(g, "experts over the ranks"), 2);
    assert_int_equal(lines_with(g, "one tensor of the file per rank"), 0);
    tl_assert_has(g, "# 2 ranks: each holds 284416 weight bytes of 565504");
    Diags d;                                    /* the .kir reads back, byte for byte */
    diag_init(&d, a, "split.kir");
    Module *back = ir_parse(a, "split.kir", g, &d);
    assert_non_null(back);
    char *again = tl_graph_text(back);
    assert_string_equal(again, g);
    free(again);
    free(g);
    arena_free(a);
}

/* A stack of 130 experts (concats of 64, as the frontend makes them)
 * over 2 ranks: 65 a rank, stacked again by 64 and 1, then by 2; rank r
 * reading expert 65 r + j's tensor for its j. The reference (every
 * expert kept: top_k 130) agrees with the one-rank graph's, each rank
 * given the tensors its weights name. */
static void wide_stack(void **state)
{
    (void)state;
    enum { E = 130, D = 4, I = 2 };
    static const char *const proj[3] = {"g", "u", "d"};
    Arena *a = arena_new();
    int id = 2;
    char *t = arena_printf(a, "graph t\n  input  %%0 \"x\" : f32[1,%d]\n  weight %%1 \"router\" : "
                              "f32[%d,%d]\n", D, E, D);
    for (int p = 0; p < 3; p++)
        for (int e = 0; e < E; e++)
            t = arena_printf(a, "%s  weight %%%d \"e.%d.%s\" : f32[%d,%d]\n", t, id++, e, proj[p],
                             p == 2 ? D : I, p == 2 ? I : D);
    int stack[3];
    for (int p = 0; p < 3; p++) {
        int r0 = id, rows = p == 2 ? D : I, cols = p == 2 ? I : D;
        for (int e = 0; e < E; e++)
            t = arena_printf(a, "%s  %%%d = reshape %%%d {shape=[1,%d,%d]} : f32[1,%d,%d]\n", t,
                             id++, 2 + p * E + e, rows, cols, rows, cols);
        int g0 = id;
        for (int g = 0; g < 3; g++) {
            int n = g < 2 ? 64 : E - 128;
            t = arena_printf(a, "%s  %%%d \"%s_stack.0.%d\" = concat", t, id++, proj[p], g);
            for (int i = 0; i < n; i++)
                t = arena_printf(a, "%s%s %%%d", t, i ? "," : "", r0 + g * 64 + i);
            t = arena_printf(a, "%s {axis=0} : f32[%d,%d,%d]\n", t, n, rows, cols);
        }
        stack[p] = id;
        t = arena_printf(a, "%s  %%%d \"%s_stack.1.0\" = concat %%%d, %%%d, %%%d {axis=0} : "
                            "f32[%d,%d,%d]\n", t, id++, proj[p], g0, g0 + 1, g0 + 2, E, rows, cols);
    }
    t = arena_printf(a, "%s  %%%d \"y\" = moe %%0, %%1, %%%d, %%%d, %%%d {top_k=%d} : f32[1,%d]\n"
                        "  output %%%d\n", t, id, stack[0], stack[1], stack[2], E, D, id);
    Module *mod[2];
    for (int n = 0; n < 2; n++) {
        Diags d;
        diag_init(&d, a, "t.kir");
        mod[n] = ir_parse(a, "t.kir", t, &d);
        if (!mod[n]) {
            diag_print(&d, stderr);
            fail_msg("the wide stack does not parse");
        }
        PassCtx cx = {.d = &d, .verify = 1, .ranks = n ? NR : 1};
        assert_int_equal(pass_distribute(mod[n], &cx), n);
        ir_verify_graph(mod[n]);
    }
    Module *m = mod[1];
    assert_int_equal(m->nweights, 1 + 3 * E / NR);
    char *g = tl_graph_text(m);
    tl_assert_has(g, "\"e.64.u\" : f32[2,4] shard(tensors=[\"e.64.u\", \"e.129.u\"])\n");
    tl_assert_has(g, "\"e.0.d\" : f32[4,2] shard(tensors=[\"e.0.d\", \"e.65.d\"])\n");
    tl_assert_has(g, "{axis=0} : f32[64,2,4]\n");
    tl_assert_has(g, "{axis=0} : f32[1,4,2]\n");
    tl_assert_has(g, "\"d_stack.1.0\" = concat ");
    tl_assert_has(g, "{axis=0} : f32[65,4,2]\n");
    tl_assert_has(g, "\"y.part\" = moe %0, %1, ");
    assert_int_equal(lines_with(g, "= concat"), 3 * 3);
    free(g);
    /* the one-rank graph's weights at random; rank r's by the names its weights read */
    Tensor *w1[1 + 3 * E], *wr[NR][1 + 3 * E];
    Tensor *const *wp[NR];
    for (int i = 0; i < mod[0]->nweights; i++) {
        w1[i] = tensor_new(mod[0]->weights[i]);
        for (int64_t j = 0; j < w1[i]->count; j++)
            w1[i]->f[j] = (float)((i * 131 + j * 17) % 97) / 97.0f - 0.5f;
    }
    for (int r = 0; r < NR; r++) {
        for (int i = 0; i < m->nweights; i++) {
            const Node *w = m->weights[i];
            const char *name = w->shard.tensors ? w->shard.tensors[r] : w->name;
            wr[r][i] = tensor_new(w);
            for (int k = 0; k < mod[0]->nweights; k++)
                if (strcmp(mod[0]->weights[k]->name, name) == 0)
                    memcpy(wr[r][i]->f, w1[k]->f, (size_t)w1[k]->count * 4);
        }
        wp[r] = wr[r];
    }
    float xs[D] = {0.3f, -0.7f, 0.2f, 0.9f}, want[D], got[D];
    Tensor *x = tensor_wrap(mod[0]->inputs[0], xs), *o1 = tensor_wrap(mod[0]->outputs[0], want),
           *on = tensor_wrap(m->outputs[0], got);
    Tensor *const *w1p = w1, *const *none[NR] = {NULL, NULL};
    char err[512] = "";
    if (ref_run_ranks(mod[0], 1, &x, &w1p, none, &o1, err, sizeof err) ||
        ref_run_ranks(m, NR, &x, wp, none, &on, err, sizeof err))
        fail_msg("reference: %s", err);
    tl_assert_close(got, want, D);
    assert_true(want[0] != 0 && want[1] != 0);
    for (int i = 0; i < mod[0]->nweights; i++)
        tensor_free(w1[i]);
    for (int r = 0; r < NR; r++)
        for (int i = 0; i < m->nweights; i++)
            tensor_free(wr[r][i]);
    free(x);
    free(o1);
    free(on);
    arena_free(a);
}

/* Qwen2's classifier tied to the embedding: the one table split by
 * vocabulary rows serves both, the embedding completed by an allreduce,
 * the logits gathered. */
static void qwen2_tied_layout(void **state)
{
    (void)state;
    const char *dir = folder("qwen2");
    Arena *a = arena_new();
    char err[2000] = "";
    Module *m = load(a, ti_hf(a, dir, 1, 16), NR, err, sizeof err);
    assert_non_null(m);
    char *g = tl_graph_text(m);
    tl_assert_has(g, "weight %2 \"model.embed_tokens.weight\" : f32[170,64] shard(axis=0, "
                     "of=340, ranks=2)");
    tl_assert_has(g, "\"x0.part\" = embedding %2, %0 {ranks=2} : f32[1,64]");
    tl_assert_has(g, "\"logits.part\" = linear ");
    tl_assert_has(g, ", %2 : f32[1,170]");
    tl_assert_has(g, "\"logits\" = allgather ");
    assert_int_equal(lines_with(g, "= allgather"), 1);
    assert_int_equal(lines_with(g, "embed_tokens"), 2);    /* its note and its leaf */
    free(g);
    arena_free(a);
}

/* distribute's lines on `ranks` ranks of type's folder (which it must
 * refuse), malloc'd. */
static char *refused(const char *type, int ranks)
{
    const char *dir = folder(type);
    Arena *a = arena_new();
    char err[4000] = "";
    assert_null(load(a, ti_hf(a, dir, 1, 16), ranks, err, sizeof err));
    arena_free(a);
    return strdup(err);
}

/* One line per problem, at its first place, naming the rank counts that
 * split every dimension: 3 ranks split neither llama's q and k rows nor
 * its vocabulary; 4 split the rows but not its 2 KV heads; mistral's one
 * KV head splits over no more than 1. */
static void refusals(void **state)
{
    (void)state;
    char *err = refused("llama", 3);
    assert_string_equal(err,
        "imported: nodes[4]: layers.0.q: the 64 rows of its weight do not split evenly over 3 "
        "ranks (and 3 more places); --ranks that split every sharded dimension: 1, 2\n"
        "imported: nodes[6]: layers.0.k: the 32 rows of its weight do not split evenly over 3 "
        "ranks (and 3 more places); --ranks that split every sharded dimension: 1, 2\n"
        "imported: nodes[48]: logits: the 320 rows of its weight do not split evenly over 3 "
        "ranks; --ranks that split every sharded dimension: 1, 2\n");
    free(err);
    err = refused("llama", 4);
    assert_string_equal(err,
        "imported: nodes[14]: layers.0.att: the KV heads (2 of them, for 4 query heads) do not "
        "split evenly over 4 ranks (and 1 more places); --ranks that split every sharded "
        "dimension: 1, 2\n");
    free(err);
    err = refused("mixtral", 3);          /* experts of a tensor each, as stacked ones */
    tl_assert_has(err, "imported: nodes[34]: layers.0.ffn_out: the 4 experts do not split evenly "
                       "over 3 ranks (and 1 more places); --ranks that split every sharded "
                       "dimension: 1, 2\n");
    free(err);
    err = refused("mistral", 2);
    assert_string_equal(err,
        "imported: nodes[14]: layers.0.att: the KV heads (1 of them, for 4 query heads) do not "
        "split evenly over 2 ranks (and 1 more places); --ranks that split every sharded "
        "dimension: 1\n");
    free(err);
}

/* Weights held f8_e4m3 as the file stores them (--weight-dtype auto's
 * stores): the column-parallel one split by rows, the row-parallel one by
 * columns where N divides a row's 4 blocks of 128 (a part of rows may
 * begin inside a 128 x 128 scale block: each rank reads its places'
 * scales); over 8 ranks a part would be half a block, refused by the
 * linear's name with the rank counts that work. */
static void fp8_held(void **state)
{
    (void)state;
    static const char text[] = "graph t\n"
                               "  input  %0 \"x\" : f32[1,128]\n"
                               "  weight %1 \"up\" : f32[512,128]\n"
                               "  weight %2 \"down\" : f32[128,512]\n"
                               "  %3 \"h\" = linear %0, %1 : f32[1,512]\n"
                               "  %4 \"y\" = linear %3, %2 : f32[1,128]\n"
                               "  output %4\n";
    static const Storage f8[2] = {ST_F8_E4M3, ST_F8_E4M3};
    Arena *a = arena_new();
    for (int n = 2; n <= 8; n *= 2) {
        Diags d;
        diag_init(&d, a, "t.kir");
        Module *m = ir_parse(a, "t.kir", text, &d);
        assert_non_null(m);
        PassCtx cx = {.d = &d, .verify = 1, .ranks = n, .weight_stores = f8};
        if (n == 8) {
            assert_int_equal(pass_distribute(m, &cx), -1);
            assert_int_equal(d.n, 1);
            assert_string_equal(d.lines[0], "t.kir: line 6: y: the 4 blocks of 128 in a row of its "
                                            "f8_e4m3 weight do not split evenly over 8 ranks; "
                                            "--ranks that split every sharded dimension: 1, 2, 4");
            continue;
        }
        assert_int_equal(pass_distribute(m, &cx), 1);
        ir_verify_graph(m);
        char *g = tl_graph_text(m);
        tl_assert_has(g, arena_printf(a, "\"up\" : f32[%d,128] shard(axis=0, of=512, ranks=%d)\n",
                                      512 / n, n));
        tl_assert_has(g, arena_printf(a, "\"down\" : f32[128,%d] shard(axis=1, of=512, ranks=%d)\n",
                                      512 / n, n));
        tl_assert_has(g, "\"y\" = allreduce ");
        assert_int_equal(cx.weight_stores[0], ST_F8_E4M3);
        assert_int_equal(cx.weight_stores[1], ST_F8_E4M3);
        free(g);
    }
    arena_free(a);
}

/* At 1 rank the pass changes nothing. */
static void one_rank(void **state)
{
    (void)state;
    Arena *a = arena_new();
    const char *dir = folder("llama");
    char err[100];
    Module *m = load(a, ti_hf(a, dir, 1, 16), 1, err, sizeof err);
    char *before = tl_graph_text(m);
    Diags d;
    diag_init(&d, a, "imported");
    PassCtx cx = {.d = &d, .ranks = 1};
    assert_int_equal(pass_distribute(m, &cx), 0);
    char *after = tl_graph_text(m);
    assert_string_equal(after, before);
    free(before);
    free(after);
    arena_free(a);
}

/* A tied table whose rows N does not divide stays whole, said in a note,
 * and its classifier with it: no collective at all. */
static void uneven_table_whole(void **state)
{
    (void)state;
    static const char text[] = "graph t\n"
                               "  input  %0 \"tokens\" : i32[1]\n"
                               "  weight %1 \"table\" : f32[5,4]\n"
                               "  %2 \"x\" = embedding %1, %0 : f32[1,4]\n"
                               "  %3 \"logits\" = linear %2, %1 : f32[1,5]\n"
                               "  output %3\n";
    Arena *a = arena_new();
    Diags d;
    diag_init(&d, a, "t.kir");
    Module *m = ir_parse(a, "t.kir", text, &d);
    assert_non_null(m);
    PassCtx cx = {.d = &d, .verify = 1, .ranks = 2};
    assert_int_equal(pass_distribute(m, &cx), 1);
    char *g = tl_graph_text(m);
    tl_assert_has(g, "# weight 'table' whole on every rank: its 5 rows do not split evenly over 2 "
                     "ranks\n");
    tl_assert_has(g, "weight %1 \"table\" : f32[5,4]\n");
    tl_assert_has(g, "\"x\" = embedding %1, %0 : f32[1,4]\n");
    assert_int_equal(lines_with(g, "= all"), 0);
    free(g);
    arena_free(a);
}

/* A shard prints and parses back; one that does not fit its leaf is
 * refused with its line. */
static void shard_text(void **state)
{
    (void)state;
    static const char good[] = "graph t\n"
                               "  weight %0 \"w\" : f32[2,3] shard(axis=0, of=4, ranks=2)\n"
                               "  output %0\n";
    Arena *a = arena_new();
    Diags d;
    diag_init(&d, a, "t.kir");
    Module *m = ir_parse(a, "t.kir", good, &d);
    assert_non_null(m);
    char *text = tl_graph_text(m);
    assert_string_equal(text, good);
    free(text);
    static const char bad[] = "graph t\n"
                              "  weight %0 \"w\" : f32[2,3] shard(axis=1, of=4, ranks=2)\n";
    assert_null(ir_parse(a, "t.kir", bad, &d));
    assert_string_equal(d.lines[0], "t.kir: line 2: shard(axis=1, of=4, ranks=2) does not fit "
                                    "the weight's shape");
    static const char tensors[] = "graph t\n"
                                  "  weight %0 \"w\" : f32[2,3] shard(tensors=[\"w\", \"e.1\", "
                                  "\"e\\\"2\"])\n"
                                  "  output %0\n";
    m = ir_parse(a, "t.kir", tensors, &d);
    assert_non_null(m);
    assert_int_equal(m->weights[0]->shard.ranks, 3);
    assert_string_equal(m->weights[0]->shard.tensors[2], "e\"2");
    text = tl_graph_text(m);
    assert_string_equal(text, tensors);
    free(text);
    static const char *const refused_text[][2] = {
        {"  weight %0 \"w\" : f32[2] shard(tensors=[\"w\"])\n",
         "t.kir: line 2: shard(tensors=...) names a tensor for each of 2 ranks or more"},
        {"  state  %0 \"s\" : f32[2] shard(tensors=[\"a\", \"b\"])\n",
         "t.kir: line 2: only a weight reads a tensor per rank"},
        {"  weight %0 \"w\" : f32[2] shard(tensors=[\"a\", \"\"])\n",
         "t.kir: line 2: a tensor's name is not empty"},
    };
    for (size_t i = 0; i < sizeof refused_text / sizeof refused_text[0]; i++) {
        diag_init(&d, a, "t.kir");
        assert_null(ir_parse(a, "t.kir", arena_printf(a, "graph t\n%s", refused_text[i][0]), &d));
        assert_string_equal(d.lines[0], refused_text[i][1]);
    }
    arena_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llama_layout),
        cmocka_unit_test(refusals),
        cmocka_unit_test(fp8_held),
        cmocka_unit_test(one_rank),
        cmocka_unit_test(shard_text),
        cmocka_unit_test(llama_decode),
        cmocka_unit_test(llama_prefill),
        cmocka_unit_test(qwen2_biases_tied),
        cmocka_unit_test(qwen2_tied_layout),
        cmocka_unit_test(uneven_table_whole),
        cmocka_unit_test(qwen3_head_norms),
        cmocka_unit_test(gpt2_whole),
        cmocka_unit_test(mixtral_experts_split),
        cmocka_unit_test(qwen3_moe_experts_split),
        cmocka_unit_test(gpt_oss_sinks_views),
        cmocka_unit_test(mixtral_experts_layout),
        cmocka_unit_test(wide_stack),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
