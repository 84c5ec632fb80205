/* runtime/rt_random.c (being written) */
#include "kiln_rt.h"
