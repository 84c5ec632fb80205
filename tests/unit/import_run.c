/* tests/unit/import_run.c: the importers' tests' shared steps
 * (import_run.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "import_run.h"
#include "frontend/frontend.h"
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


/* The import's text through the frontend and every pass (weights of
 * rank >= 2 held as store), JIT-built and opened with weights. */
void ti_open_as(TiRun *r, Arena *a, const char *text, const char *weights, Storage store)
{
    Diags d;
    diag_init(&d, a, "imported");
    Module *m = fe_parse(a, "imported", text, strlen(text), &d);
    if (!m) {
        diag_print(&d, stderr);
        fail_msg("the imported graph does not load");
    }
    PassCtx cx = {.d = &d, .verify = 1, .weight_store = store};
    machine_default(&cx.machine);
    assert_int_equal(pass_pipeline(m, &cx), 0);
    rt_err e = {0, ""};
    r->a = a;
    r->j = cg_jit_new(m, &e);
    if (!r->j)
        fail_msg("JIT build failed: %s", e.msg);
    r->md = cg_jit_model(r->j);
    assert_int_equal(r->md->ninputs, 2);
    assert_string_equal(r->md->inputs[0].name, "tokens");
    assert_string_equal(r->md->inputs[1].name, "positions");
    assert_string_equal(r->md->outputs[0].name, "logits");
    r->T = r->md->inputs[0].dims[0];
    r->V = r->md->outputs[0].dims[1];
    r->h = r->md->open(weights);
    if (r->md->status(r->h) != RT_OK)
        fail_msg("the weights do not load: %s", r->md->error(r->h));
}

void ti_open(TiRun *r, Arena *a, const char *text, const char *weights)
{
    ti_open_as(r, a, text, weights, ST_F32);
}

void ti_close(TiRun *r)
{
    r->md->close(r->h);
    cg_jit_free(r->j);
    arena_free(r->a);
}

/* The token of step t of every test sequence. */
int32_t ti_token_at(int t, int vocab) { return (int32_t)((t * 7919 + 13) % vocab); }

/* steps tokens, T per call from position 0, each row of logits compared
 * with the reference's step at that position: within 1e-4 of its largest
 * magnitude. */
void ti_agree(TiRun *r, CkModel *ref, int steps)
{
    int64_t T = r->T, V = r->V;
    int32_t *tok = malloc(sizeof *tok * (size_t)T), *pos = malloc(sizeof *pos * (size_t)T);
    float *logits = malloc(sizeof *logits * (size_t)(T * V));
    ck_reset(ref);
    for (int p0 = 0; p0 < steps; p0 += (int)T) {
        for (int t = 0; t < T; t++)
            tok[t] = ti_token_at(p0 + t, (int)V), pos[t] = p0 + t;
        const void *in[2] = {tok, pos};
        void *out[1] = {logits};
        if (r->md->run(r->h, in, out) != RT_OK)
            fail_msg("run at %d: %s", p0, r->md->error(r->h));
        for (int t = 0; t < T; t++) {
            const float *want = ck_step(ref, tok[t], p0 + t), *got = logits + t * V;
            double big = 0, worst = 0;
            for (int64_t i = 0; i < V; i++)
                big = fmax(big, fabs(want[i]));
            for (int64_t i = 0; i < V; i++)
                worst = fmax(worst, fabs((double)got[i] - want[i]));
            if (!(worst <= 1e-4 * big))
                fail_msg("position %d: logits off by %g (largest %g)", p0 + t, worst, big);
        }
    }
    free(tok);
    free(pos);
    free(logits);
}

CkModel *ti_model(const CkShape *s)
{
    CkModel *m = ck_new(s, 42);
    assert_non_null(m);
    return m;
}

/* A new folder (each case its own: no file of another case left in it). */
const char *ti_folder(const char *name)
{
    static int seq;
    static char dir[64][600];
    char *d = dir[seq % 64];
    snprintf(d, sizeof dir[0], "%s-%d", tl_tmp_path(name), seq++);
    assert_int_equal(mkdir(d, 0777), 0);
    return d;
}

/* An HF folder of shape s (and extra config members), written; returns
 * its path. */
const char *ti_write_hf(const char *name, CkModel *m, int shards, const char *extra)
{
    const char *dir = ti_folder(name);
    char why[600];
    if (ck_write_hf(m, dir, shards, extra, why, sizeof why))
        fail_msg("cannot write %s: %s", dir, why);
    return dir;
}

char *ti_hf(Arena *a, const char *dir, int64_t T, int64_t S)
{
    Diags d;
    diag_init(&d, a, "config.json");
    int io;
    ImportOpts o = {T, S, 0};
    char *text = imp_hf(a, dir, &o, &d, &io);
    if (!text) {
        diag_print(&d, stderr);
        fail_msg("HF import refused %s", dir);
    }
    return text;
}

CkShape ti_hf_shape(const char *type)
{
    CkShape s;
    assert_int_equal(ck_hf_shape(type, &s), 0);
    return s;
}

