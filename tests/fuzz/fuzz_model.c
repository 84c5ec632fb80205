/* tests/fuzz/fuzz_model.c: model JSON through the whole compiler to C.
 *
 * Input: a model file (docs/model-format.md). fe_parse validates it
 * and infers shapes; a model it accepts goes through pass_pipeline with
 * ir_verify after every pass, then cg_emit_string in both flavours (the C
 * is never compiled). Every stage must also keep the .kir contract
 * (fuzz_reparse). Half the inputs, chosen by their hash, run with one
 * optional pass disabled, as `--disable-pass` allows. Refusals are fine;
 * crashes, sanitizer reports, KILN_BUG and leaks are not. */
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "fuzz.h"
#include "passes/passes.h"

static void after(PassCtx *cx, Module *m, int pass, int changed)
{
    (void)cx, (void)pass;
    if (changed > 0)
        fuzz_reparse(m);
}

/* The optional pass to switch off, or NULL for the full pipeline. */
static const char *disabled(uint64_t h)
{
    int optional[16], n = 0;
    for (int i = 0; i < pass_count && n < 16; i++)
        if (!pass_table[i].required)
            optional[n++] = i;
    int k = (int)(h % (uint64_t)(2 * n));
    return k < n ? pass_table[optional[k]].name : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Arena *a = arena_new();
    jmp_buf oom;
    if (!a)
        abort();
    if (setjmp(oom)) {                /* a model too big to compile is fine */
        arena_free(a);
        return 0;
    }
    arena_set_oom(a, &oom);
    Diags d;
    diag_init(&d, a, "fuzz.json");
    Module *m = fe_parse(a, "fuzz.json", (const char *)data, size, &d);
    FUZZ_CHECK(m ? d.n == 0 : d.n > 0);
    if (m) {
        const char *off = disabled(fuzz_hash(data, size));
        PassCtx cx = {.d = &d, .verify = 1, .after = after, .disabled = &off, .ndisabled = !!off};
        machine_default(&cx.machine);
        if (pass_pipeline(m, &cx) == 0) {
            FUZZ_CHECK(m->prog != NULL);
            for (int fl = CG_CC; fl <= CG_JIT; fl++)
                FUZZ_CHECK(strlen(cg_emit_string(m, fl)) > 0);
        } else {
            FUZZ_CHECK(d.n > 0);
        }
    }
    arena_free(a);
    return 0;
}
