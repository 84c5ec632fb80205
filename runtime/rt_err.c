/* runtime/rt_err.c (being written) */
#include "kiln_rt.h"
