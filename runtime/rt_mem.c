/* runtime/rt_mem.c (being written) */
#include "kiln_rt.h"
