/* passes/tile.c: placeholder until the pass is written: leaves the IR
 * unchanged. */
#include "passes.h"

int pass_tile(Module *m, PassCtx *cx)
{
    (void)m;
    (void)cx;
    return 0;
}
