/* tests/unit/import_run.h: what the importers' tests share (test_import.c,
 * test_import_gguf.c): an imported graph built and run under libtcc, its
 * logits against the hand-written reference of tests/import/ckpt.c, and
 * the Hugging Face folders they are compared from. Failures are cmocka's. */
#ifndef KILN_IMPORT_RUN_H
#define KILN_IMPORT_RUN_H

#include "codegen/codegen.h"
#include "frontend/import.h"
#include "passes/passes.h"
#include "tests/import/ckpt.h"

typedef struct {
    Arena *a;
    CgJit *j;
    const rt_model *md;
    void *h;
    int64_t T, V;
} TiRun;
/* The import's text through the frontend and every pass (weights of
 * rank >= 2 held as store; ti_open: f32), JIT-built and opened with
 * weights. */
void ti_open_as(TiRun *r, Arena *a, const char *text, const char *weights, Storage store);
void ti_open(TiRun *r, Arena *a, const char *text, const char *weights);
void ti_close(TiRun *r);
/* The token of step t of every test sequence. */
int32_t ti_token_at(int t, int vocab);
/* steps tokens, T per call from position 0, each row of logits compared
 * with the reference's step at that position: within 1e-4 of its largest
 * magnitude. */
void ti_agree(TiRun *r, CkModel *ref, int steps);
/* The weights of shape s from seed 42. */
CkModel *ti_model(const CkShape *s);
/* A new folder (each case its own: no file of another case left in it). */
const char *ti_folder(const char *name);
/* An HF folder of m (and extra config members), written; returns its
 * path. */
const char *ti_write_hf(const char *name, CkModel *m, int shards, const char *extra);
/* imp_hf of dir with T tokens a call and S rows, which must succeed. */
char *ti_hf(Arena *a, const char *dir, int64_t T, int64_t S);
/* ck_hf_shape's shape of model_type type. */
CkShape ti_hf_shape(const char *type);

#endif
