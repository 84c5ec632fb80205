/* cli/program.c: the program kiln builds of a model, for emit-c, build, run
 * and profile.
 *
 * A model that is not a decoder (ir_decoder) is one program as it always
 * was. A decoder (what `kiln import` writes) becomes shape variants in
 * one program: the leader, a decode step at T = 1, and a prefill chunk at
 * T = --chunk (256; at most the cache's rows), each a clone of the graph
 * as loaded (ir_clone: the model is read once) re-inferred at its T
 * (ir_decoder_tokens), compiled by pass_pipeline_variants so that they
 * share every weight's layout; the others hang on the leader as
 * Module.variants, each with its role, which codegen writes beside it
 * (NAME_run_ROLE): the chunk ("chunk"); a slotted decoder's of N > 1
 * slots (kiln import --slots N) batch at T = N ("batch"): a token of each
 * of up to N sequences a call; and with a chunk of 128 tokens or more, a
 * chunk of a quarter of it for the rest of a prompt ("rest"), so that a
 * prompt's last few tokens do not pay for a whole chunk (the prefill's
 * layout: runtime/gen/rt_decode.c). Both chunks give their last row's
 * logits alone. A decoder whose graph does not hold at another T
 * (reshapes that spell T out) stays one variant, said with -v; one that
 * holds at C but not at C / 4 has no rest chunk. */
#include "cli.h"
#include "codegen/codegen.h"
#include "passes/passes.h"

#include <string.h>
#include <unistd.h>

typedef struct {
    const Module *model;        /* the decoder as loaded, never compiled */
    int64_t T[4];               /* tokens a call of each variant */
    int last[4];                /* 1: its last row's logits alone (a prefill chunk) */
} Fresh;

/* A fresh copy of the model at T[i] tokens a call; NULL when its graph
 * does not hold at T[i]. */
static Module *fresh(void *user, int i)
{
    Fresh *f = user;
    Module *m = ir_clone(f->model->a, f->model);
    Diags d;
    diag_init(&d, m->a, m->file);
    if (ir_decoder_tokens(m, f->T[i], &d) != 0 || (f->last[i] && ir_decoder_last_row(m, &d) != 0))
        return NULL;
    return m;
}

int cli_program(Module **mp, PassCtx *cx, int64_t chunk, int verbose)
{
    Module *m = *mp;
    IrDecoder dec;
    if (cx->stop_after || !ir_decoder(m, &dec))
        return pass_pipeline(m, cx);
    if (chunk > dec.max_seq)
        fprintf(stderr, "kiln: %s: --chunk %lld is more than the KV cache's %lld rows: prefill "
                "chunks of %lld\n", m->file, (long long)chunk, (long long)dec.max_seq,
                (long long)dec.max_seq);
    chunk = chunk ? chunk : 256;
    if (chunk > dec.max_seq)
        chunk = dec.max_seq;
    int64_t rest = chunk >= 128 ? chunk / 4 : 0;          /* the prompt's rest's chunk */
    Fresh f = {ir_clone(m->a, m), {1}, {0}};
    static const char *const roles[4] = {NULL, "chunk", "batch", "rest"};
    int64_t want[4] = {1, chunk > 1 ? chunk : 0, dec.slots > 1 ? dec.slots : 0, rest};
    Module *v[4] = {dec.tokens == 1 ? m : fresh(&f, 0)};
    const char *role[4] = {NULL};
    if (!v[0])
        return pass_pipeline(m, cx);
    int nv = 1;
    for (int r = 1; r < 4; r++) {
        if (!want[r])
            continue;
        f.T[nv] = want[r];
        f.last[nv] = r != 2;
        if (!(v[nv] = fresh(&f, nv)) && r == 3)     /* none: the prompt's rest as before */
            continue;
        if (!v[nv]) {
            if (verbose && r == 1)
                fprintf(stderr, "kiln: %s: a decoder, but its graph does not hold at %lld tokens "
                        "a call: one variant, no prefill chunks\n", m->file, (long long)chunk);
            return *mp = v[0], pass_pipeline(v[0], cx);
        }
        role[nv++] = roles[r];
    }
    if (nv == 1)
        return *mp = v[0], pass_pipeline(v[0], cx);
    if (pass_pipeline_variants(v, nv, cx, fresh, &f) != 0)
        return -1;
    v[0]->variants = arena_alloc(v[0]->a, sizeof *v[0]->variants * (size_t)(nv - 1));
    for (int i = 1; i < nv; i++) {
        v[i]->role = role[i];
        v[0]->variants[i - 1] = v[i];
    }
    v[0]->nvariants = nv - 1;
    *mp = v[0];
    if (verbose)
        fprintf(stderr, "kiln: %s: decoder variants: decode (1 token, %d kernels)", m->file,
                v[0]->prog->nkernels);
    for (int i = 1; verbose && i < nv; i++)
        fprintf(stderr, "%s %s (%lld %s, %d kernels)", i + 1 < nv ? "," : " and",
                !strcmp(role[i], "chunk") ? "prefill" : !strcmp(role[i], "rest")
                ? "the prompt's rest" : "batch", (long long)f.T[i],
                !strcmp(role[i], "batch") ? "sequences a token each" : "tokens",
                v[i]->prog->nkernels);
    if (verbose)
        fputc('\n', stderr);
    return 0;
}

/* ---- what the program holds, against this machine's memory --------------- */


/* Weights as loaded, and the derived weights the open program makes
 * (held together while it runs). */
static int64_t weight_bytes(const Module *m)
{
    CgInfos info;
    cg_infos(m, &info);
    int64_t n = 0;
    for (int i = 0; i < m->nweights; i++)
        n += storage_bytes((Storage)info.weights[i].store, info.weights[i].count);
    for (int i = 0; m->open && i < m->open->nbufs; i++) {
        const Buf *b = m->open->bufs[i];
        if (b->kind == BK_DERIVED && !b->base)
            n += storage_bytes(b->store, shape_count(b->rank, b->dims));
    }
    return n;
}

void cli_memory_note(const Module *m)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (!m->prog || pages <= 0 || page <= 0)
        return;
    int64_t state = 0, arena = m->prog->arena_bytes, weights = weight_bytes(m);
    for (int i = 0; i < m->nstates; i++)
        state += (int64_t)node_bytes(m->states[i]);
    for (int i = 0; i < m->nvariants; i++)     /* one arena serves every variant */
        if (m->variants[i]->prog->arena_bytes > arena)
            arena = m->variants[i]->prog->arena_bytes;
    int64_t need = weights + state + arena, have = (int64_t)pages * page;
    if (need > have)
        fprintf(stderr, "kiln: note: %s needs %lld bytes once opened (weights %lld, state "
                "%lld, intermediates %lld); this machine has %lld bytes of memory\n", m->name,
                (long long)need, (long long)weights, (long long)state, (long long)arena,
                (long long)have);
}
