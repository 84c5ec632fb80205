/* runtime/rt_parallel.c (being written) */
#include "kiln_rt.h"
