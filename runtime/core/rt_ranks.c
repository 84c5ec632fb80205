/* runtime/core/rt_ranks.c: which MPI rank this process is (kiln_rt.h):
 * rank 0 of 1, unless the MPI part set it before anything loaded. */
#include "runtime/core/rt_core.h"

static rt_ranks rk_now = {0, 1, NULL, NULL};

void rt_ranks_set(const rt_ranks *r) { rk_now = *r; }

const rt_ranks *rt_ranks_now(void) { return &rk_now; }
