/* cli/program.c: the program kiln builds of a model, for emit-c, build, run
 * and profile.
 *
 * A model that is not a decoder (ir_decoder) is one program as it always
 * was. A decoder (what `kiln import` writes) becomes two shape variants
 * in one program: the leader, a decode step at T = 1, and a prefill
 * chunk at T = --chunk (64; at most the cache's rows), each a clone of
 * the graph as loaded (ir_clone: the model is read once) re-inferred at
 * its T (ir_decoder_tokens), compiled by pass_pipeline_variants so that
 * they share every weight's layout; the chunk hangs on the leader as
 * Module.variants, which codegen writes beside it (NAME_run_chunk). A
 * decoder whose graph does not hold at another T (reshapes that spell T
 * out) stays one variant, said with -v. */
#include "cli.h"
#include "passes/passes.h"

typedef struct {
    const Module *model;        /* the decoder as loaded, never compiled */
    int64_t T[2];
} Fresh;

/* A fresh copy of the model at T[i] tokens a call; NULL when its graph
 * does not hold at T[i]. */
static Module *fresh(void *user, int i)
{
    Fresh *f = user;
    Module *m = ir_clone(f->model->a, f->model);
    Diags d;
    diag_init(&d, m->a, m->file);
    return ir_decoder_tokens(m, f->T[i], &d) == 0 ? m : NULL;
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
    chunk = chunk ? chunk : 64;
    if (chunk > dec.max_seq)
        chunk = dec.max_seq;
    Fresh f = {ir_clone(m->a, m), {1, chunk}};
    Module *v[2] = {dec.tokens == 1 ? m : fresh(&f, 0), chunk > 1 ? fresh(&f, 1) : NULL};
    if (!v[0] || !v[1]) {
        if (verbose && chunk > 1)
            fprintf(stderr, "kiln: %s: a decoder, but its graph does not hold at %lld tokens a "
                    "call: one variant, no prefill chunks\n", m->file, (long long)chunk);
        return v[0] ? (*mp = v[0], pass_pipeline(v[0], cx)) : pass_pipeline(m, cx);
    }
    if (pass_pipeline_variants(v, 2, cx, fresh, &f) != 0)
        return -1;
    v[0]->variants = arena_alloc(v[0]->a, sizeof *v[0]->variants);
    v[0]->variants[0] = v[1];
    v[0]->nvariants = 1;
    *mp = v[0];
    if (verbose)
        fprintf(stderr, "kiln: %s: decoder variants: decode (1 token, %d kernels) and prefill "
                "(%lld tokens, %d kernels)\n", m->file, v[0]->prog->nkernels, (long long)chunk,
                v[1]->prog->nkernels);
    return 0;
}
