/* tests/unit/test_import_gguf.c: the GGUF import (frontend/import_gguf.c)
 * and the weights loaded from a GGUF (runtime/core/rt_weights.c) against
 * the hand-written forward passes of tests/import/ckpt.c.
 *
 * Each case writes the GGUF file llama.cpp's converter makes of a
 * checkpoint's Hugging Face folder (tests/import/ckpt_gguf.c: q and k
 * permuted for llama, Gemma's norms as 1 + w, experts stacked), imports
 * it, builds and runs it as test_import.c does its folders, with the
 * file itself as the weights, and compares every step's logits with the
 * reference's: so each layout is read back right. Quantized files, their
 * blocks used as stored, against the folder quantized at load. Then what
 * must be refused, by the import or by the weights check of the file's
 * tensors against its graph, word for word; and the graph itself
 * (names, stacked experts, Llama 3.1's rope numbers back from
 * rope_freqs.weight). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "frontend/frontend.h"
#include "import_run.h"
#include "tests/import/gguf_write.h"
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The GGUF file llama.cpp's converter makes of m's folder (ckpt_gguf.c). */
static const char *write_gguf(const char *name, CkModel *m, int type)
{
    static int seq;
    static char path[64][600];
    char *p = path[seq % 64], why[600];
    snprintf(p, sizeof path[0], "%s-%d.gguf", tl_tmp_path(name), seq++);
    if (ck_write_gguf(m, p, type, why, sizeof why))
        fail_msg("cannot write %s: %s", p, why);
    return p;
}

static char *gguf(Arena *a, const char *path, int64_t T)
{
    Diags d;
    diag_init(&d, a, path);
    int io;
    ImportOpts o = {T, 0, 0};
    char *text = imp_gguf(a, path, &o, &d, &io);
    if (!text) {
        diag_print(&d, stderr);
        fail_msg("GGUF import refused %s", path);
    }
    return text;
}

/* The file's graph, its own tensors the weights, agrees with the
 * reference: the converter's layouts read back right. */
static void gguf_case(const CkShape *s, int type, int64_t T, int steps)
{
    CkModel *m = ti_model(s);
    const char *path = write_gguf("gguf", m, type);
    TiRun r;
    Arena *a = arena_new();
    ti_open(&r, a, gguf(a, path, T), path);
    ti_agree(&r, m, steps);
    ti_close(&r);
    ck_free(m);
}

/* llama: q and k permuted by the converter from the folder's order
 * (rotate_half's), rope on interleaved pairs: llama2.c's shape (the
 * folder's rows permuted from interleaved, permuted back), in f32, 3
 * tokens a call, BF16; Mistral's (rotate_half's own rows); Llama 3.1's
 * rope scaling from rope_freqs.weight. */
static void test_gguf_llama(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("llama");
    gguf_case(&s, GW_T_F32, 1, 10);
    gguf_case(&s, GW_T_F32, 3, 9);
    s.bf16 = 1;
    gguf_case(&s, GW_T_BF16, 1, 8);
    s = ti_hf_shape("mistral");
    gguf_case(&s, GW_T_F32, 1, 10);
    s = ti_hf_shape("llama");
    s.llama3_rope = 1;
    gguf_case(&s, GW_T_F32, 1, 12);
    gguf_case(&s, GW_T_F32, 4, 12);
}

/* Experts stacked in ffn_*_exps: Mixtral's (llama), Qwen3-MoE's with a
 * dense layer (no ffn_gate_inp) among the sparse ones, BF16 too. */
static void test_gguf_moe(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("mixtral");
    gguf_case(&s, GW_T_F32, 1, 10);
    s = ti_hf_shape("qwen3_moe");
    gguf_case(&s, GW_T_F32, 1, 8);
    s.bf16 = 1;
    gguf_case(&s, GW_T_BF16, 2, 6);
}

/* qwen2's biases, tied (no output.weight) and not; qwen3's q/k norms. */
static void test_gguf_qwen(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("qwen2");
    gguf_case(&s, GW_T_F32, 1, 10);
    s.tied = 0;
    gguf_case(&s, GW_T_F32, 4, 8);
    s = ti_hf_shape("qwen3");
    gguf_case(&s, GW_T_F32, 1, 10);
}

/* The gemmas: norms stored as 1 + w, read as w; scores scaled by
 * head_dim^-1/2 (llama.cpp's; the folders say 32); gemma2's caps and
 * window on every other layer; gemma3's q/k norms and local rope on the
 * window's layers (pattern 2), 3 tokens a call. Phi-3's fused qkv and
 * gate-up. */
static void test_gguf_gemma_phi3(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("gemma");
    gguf_case(&s, GW_T_F32, 1, 10);
    s = ti_hf_shape("gemma2");
    s.qpas = 32;
    gguf_case(&s, GW_T_F32, 1, 10);
    s.window = 3;
    gguf_case(&s, GW_T_F32, 3, 12);
    s = ti_hf_shape("gemma3_text");
    s.qpas = 32;
    s.window = 3;
    gguf_case(&s, GW_T_F32, 3, 12);
    s = ti_hf_shape("phi3");
    gguf_case(&s, GW_T_F32, 1, 10);
}

/* A GGUF's quantized blocks, used as stored, against the folder of the
 * same weights quantized at load (the same rt_quantize): steps logits
 * within tol of the folder's largest (0: bit for bit). */
static void quant_case(const CkShape *s, int type, Storage st, int steps, double tol)
{
    CkModel *m = ti_model(s);
    const char *path = write_gguf("q", m, type), *dir = ti_write_hf("q", m, 1, NULL);
    ck_free(m);
    TiRun g, h;
    Arena *a = arena_new(), *b = arena_new();
    ti_open_as(&g, a, gguf(a, path, 1), path, st);
    ti_open_as(&h, b, ti_hf(b, dir, 1, 0), imp_hf_weights(b, dir), st);
    int64_t V = g.V;
    float *lg = malloc(sizeof *lg * (size_t)V), *lh = malloc(sizeof *lh * (size_t)V);
    for (int t = 0; t < steps; t++) {
        int32_t tok = ti_token_at(t, (int)V), pos = t;
        const void *in[2] = {&tok, &pos};
        void *og[1] = {lg}, *oh[1] = {lh};
        assert_int_equal(g.md->run(g.h, in, og), RT_OK);
        assert_int_equal(h.md->run(h.h, in, oh), RT_OK);
        double big = 0, worst = 0;
        for (int64_t i = 0; i < V; i++)
            big = fmax(big, fabs(lh[i])), worst = fmax(worst, fabs((double)lg[i] - lh[i]));
        if (!(worst <= tol * big))
            fail_msg("position %d: logits off by %g (largest %g)", t, worst, big);
    }
    free(lg);
    free(lh);
    ti_close(&g);
    ti_close(&h);
}

/* Q8_0 of qwen3 (no rows permuted: bit for bit), Q6_K and Q4_K of
 * llama's rows of 256 (q's and k's rows permuted: the same blocks, summed
 * in another order). */
static void test_gguf_quantized(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("qwen3");
    s.tied = 0;
    quant_case(&s, GW_T_Q8_0, ST_Q8_0, 8, 0);
    assert_int_equal(ck_hf_shape_named("llama", "blocks", &s), 0);
    s.layers = 2;
    quant_case(&s, GW_T_Q4_K, ST_Q4_K, 6, 1e-5);
    quant_case(&s, GW_T_Q6_K, ST_Q6_K, 6, 1e-5);
}

/* ---- GGUF files refused ------------------------------------------------------------ */

/* The tiny llama's GGUF (one layer), edited, is refused with the one line
 * `want` (after "PATH: ") by the import, or (import_ok) by the weights
 * check the command line makes of a GGUF's tensors against its graph. */
static void gguf_refused(const CkGgufEdit *e, int import_ok, const char *want)
{
    CkShape s = ti_hf_shape("llama");
    s.layers = 1;
    CkModel *m = ti_model(&s);
    const char *path = tl_tmp_path("edited.gguf");
    char why[600];
    if (ck_gguf_rewrite(write_gguf("bad", m, GW_T_F32), path, e, why, sizeof why))
        fail_msg("%s", why);
    ck_free(m);
    Arena *a = arena_new();
    Diags d;
    diag_init(&d, a, path);
    int io;
    ImportOpts o = {0, 0, 0};
    char *text = imp_gguf(a, path, &o, &d, &io), line[1024];
    snprintf(line, sizeof line, "%s: %s", path, want);
    if (import_ok) {
        assert_non_null(text);
        Module *mod = fe_parse(a, path, text, strlen(text), &d);
        assert_non_null(mod);
        CgInfos t;
        cg_infos(mod, &t);
        rt_err err = {0, ""};
        assert_int_equal(rt_check_weights(path, t.weights, mod->nweights, &err), RT_EINVAL);
        assert_string_equal(err.msg, line);
    } else if (text || d.n != 1 || strcmp(d.lines[0], line)) {
        diag_print(&d, stderr);
        fail_msg("wanted the one line: %s", line);
    }
    arena_free(a);
}

static void yarn(GgufWriter *w) { gw_str(w, "llama.rope.scaling.type", "yarn"); }
static void kv_by_layer(GgufWriter *w)
{
    uint32_t v[2] = {2, 4};
    gw_arr(w, "llama.attention.head_count_kv", GW_U32, 2, v);
}
static void split(GgufWriter *w) { gw_u16(w, "split.count", 3); }
static void bias(GgufWriter *w)
{
    gw_tensor(w, "blk.0.attn_q.bias", GW_T_F32, IG_DIMS(64), NULL, 64 * 4);
}

static void test_gguf_refused(void **state)
{
    (void)state;
    gguf_refused(&(CkGgufEdit){.arch = "falcon"}, 0,
                 "key 'general.architecture': \"falcon\" not supported (kiln: llama, qwen2, "
                 "qwen3, qwen3moe, gemma, gemma2, gemma3, phi3)");
    gguf_refused(&(CkGgufEdit){.drop = "llama.block_count"}, 0, "key 'llama.block_count': missing");
    gguf_refused(&(CkGgufEdit){.add = yarn}, 0,
                 "key 'llama.rope.scaling.type': \"yarn\" not supported (kiln: none)");
    gguf_refused(&(CkGgufEdit){.drop = "llama.attention.head_count_kv", .add = kv_by_layer}, 0,
                 "key 'llama.attention.head_count_kv': 2 at layer 0, 4 at layer 1: values "
                 "that differ by layer are not supported");
    gguf_refused(&(CkGgufEdit){.add = split}, 0, "key 'split.count': a model split in 3 files: "
                 "merge them first (llama-gguf-split --merge)");
    gguf_refused(&(CkGgufEdit){.tensor = "token_embd.weight", .rank = 2, .dims = {320, 32}}, 0,
                 "tensor 'token_embd.weight': shape [320,32], not [vocab, 64] "
                 "(llama.embedding_length)");
    gguf_refused(&(CkGgufEdit){.add = bias}, 1, "'blk.0.attn_q.bias': not a weight of the model");
    gguf_refused(&(CkGgufEdit){.tensor = "blk.0.attn_k.weight", .rank = 2, .dims = {16, 64}}, 1,
                 "'blk.0.attn_k.weight': shape [16,64] in the file, the model declares [32,64]");
}

/* The graph: llama.cpp's names, interleaved rope for llama, experts as
 * one stacked weight, Llama 3.1's numbers back from rope_freqs.weight of
 * its real shape (head_dim 128, theta 500000, factors computed in f32 as
 * the converter does). */
static void test_gguf_graph(void **state)
{
    (void)state;
    CkShape s = ti_hf_shape("mixtral");
    s.layers = 1;
    CkModel *m = ti_model(&s);
    const char *path = write_gguf("g", m, GW_T_F32);
    ck_free(m);
    Arena *a = arena_new();
    char *text = gguf(a, path, 1);
    tl_assert_has(text, "\"name\": \"llama\"");
    tl_assert_has(text, "{\"name\": \"blk.0.ffn_gate_exps.weight\", \"shape\": [4, 48, 64]}");
    tl_assert_has(text, "{\"name\": \"blk.0.ffn_down_exps.weight\", \"shape\": [4, 64, 48]}");
    tl_assert_has(text, "{\"name\": \"blk.0.ffn_gate_inp.weight\", \"shape\": [4, 64]}");
    tl_assert_has(text, "\"style\": \"interleaved\"");
    tl_assert_has(text, "\"norm_topk_prob\": true");
    tl_assert_has(text, "\"output.weight\"");
    GgufWriter *w = gw_new(3);
    gw_str(w, "general.architecture", "llama");
    gw_u32(w, "llama.embedding_length", 128);
    gw_u32(w, "llama.block_count", 1);
    gw_u32(w, "llama.feed_forward_length", 256);
    gw_u32(w, "llama.attention.head_count", 1);
    gw_u32(w, "llama.context_length", 131072);
    gw_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gw_f32(w, "llama.rope.freq_base", 500000.0f);
    gw_tensor(w, "token_embd.weight", GW_T_F32, IG_DIMS(8, 128), NULL, 8 * 128 * 4);
    float r[64];
    for (int i = 0; i < 64; i++) {              /* LlamaModel.generate_extra_tensors */
        float f = 1.0f / powf(500000.0f, (float)(2 * i) / 128.0f);
        float wl = (float)(2 * M_PI) / f;
        r[i] = wl < 8192.0f / 4 ? 1 : wl > 8192.0f ? 8 : 1 / ((1 - (8192 / wl - 1) / 3) / 8 +
                                                                (8192 / wl - 1) / 3);
    }
    gw_tensor(w, "rope_freqs.weight", GW_T_F32, IG_DIMS(64), r, sizeof r);
    const char *p = tl_tmp_path("l31.gguf");
    assert_int_equal(gw_write(w, p), 0);
    gw_free(w);
    text = gguf(a, p, 1);
    tl_assert_has(text, "\"scaling\": \"llama3\", \"factor\": 8, \"low_freq_factor\": ");
    tl_assert_has(text, "\"original_max_position_embeddings\": 8192}");
    tl_assert_has(text, "{\"name\": \"rope_freqs.weight\", \"shape\": [64]}");
    double lo, hi;
    const char *at = strstr(text, "\"low_freq_factor\": ");
    assert_int_equal(sscanf(at, "\"low_freq_factor\": %lf, \"high_freq_factor\": %lf", &lo, &hi), 2);
    assert_true(fabs(lo - 1) < 1e-4 && fabs(hi - 4) < 1e-4);
    arena_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_llama),     cmocka_unit_test(test_gguf_moe),
        cmocka_unit_test(test_gguf_qwen),      cmocka_unit_test(test_gguf_gemma_phi3),
        cmocka_unit_test(test_gguf_quantized), cmocka_unit_test(test_gguf_refused),
        cmocka_unit_test(test_gguf_graph),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
