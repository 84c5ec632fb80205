/* tests/fuzz/fuzz_kir.c: the .kir parser, and what `kiln opt` does next.
 *
 * Input: .kir text (ir/KIR.md). ir_parse promises that no text crashes
 * it "or anything after it": a module it accepts satisfies ir_verify_*,
 * prints back (fuzz_reparse), and can go through passes to C. So an
 * accepted graph runs the whole pipeline; an accepted program runs
 * loop-level passes as `kiln opt --passes` would (loop_passes); either
 * then prints C in both flavours. */
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "fuzz.h"
#include "passes/passes.h"

static void verify(Module *m)
{
    ir_verify_graph(m);
    if (m->prog)
        ir_verify_prog(m);
}

/* Loop-level passes as `kiln opt --passes` runs them: for half the inputs
 * (by hash h) every one in pipeline order, for the others four picked and
 * ordered by h (a pass may come twice). -1 when one fails. */
static int loop_passes(Module *m, PassCtx *cx, uint64_t h)
{
    int loop[16], n = 0;
    for (int i = 0; i < pass_count && n < 16; i++)
        if (pass_table[i].level == LEVEL_LOOP)
            loop[n++] = i;
    int ordered = h & 1, steps = ordered ? n : 4;
    for (int s = 0; s < steps; s++) {
        h >>= 4;
        const PassDesc *p = &pass_table[loop[ordered ? s : (int)(h % (uint64_t)n)]];
        m->notes.n = 0;
        m->prog->notes.n = 0;
        if (p->run(m, cx) < 0)
            return -1;
        verify(m);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    Arena *a = arena_new();
    jmp_buf oom;
    if (!a)
        abort();
    if (setjmp(oom)) {
        arena_free(a);
        free(text);
        return 0;
    }
    arena_set_oom(a, &oom);
    Diags d;
    diag_init(&d, a, "fuzz.kir");
    Module *m = ir_parse(a, "fuzz.kir", text, &d);
    FUZZ_CHECK(m ? d.n == 0 : d.n == 1);
    if (m) {
        verify(m);
        fuzz_reparse(m);
        PassCtx cx = {.d = &d, .verify = 1};
        machine_default(&cx.machine);
        int rc = m->prog ? loop_passes(m, &cx, fuzz_hash(data, size)) : pass_pipeline(m, &cx);
        FUZZ_CHECK(rc == 0 ? d.n == 0 : d.n > 0);
        if (rc == 0) {
            fuzz_reparse(m);
            for (int fl = CG_CC; fl <= CG_JIT; fl++)
                FUZZ_CHECK(strlen(cg_emit_string(m, fl)) > 0);
        }
    }
    arena_free(a);
    free(text);
    return 0;
}
