/* runtime/rt_npy.c (being written) */
#include "kiln_rt.h"
