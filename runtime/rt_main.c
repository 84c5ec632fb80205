/* runtime/rt_main.c (being written) */
#include "kiln_rt.h"
