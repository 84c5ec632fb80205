/* passes/simplify.c: placeholder until the pass is written: leaves the IR
 * unchanged. */
#include "passes.h"

int pass_simplify(Module *m, PassCtx *cx)
{
    (void)m;
    (void)cx;
    return 0;
}
