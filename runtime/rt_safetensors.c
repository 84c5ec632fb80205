/* runtime/rt_safetensors.c (being written) */
#include "kiln_rt.h"
