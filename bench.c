/* bench.c: kiln bench and kiln machine (being written). */
#include "cli.h"

#include <stdio.h>

int cli_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "kiln: bench is not written yet\n");
    return 4;
}

int cli_machine(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "kiln: machine is not written yet\n");
    return 4;
}
