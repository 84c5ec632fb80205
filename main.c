/* main.c: the kiln command line (being built). */
#include "ir/ir.h"

int main(void)
{
    printf("kiln %s\n", KILN_VERSION);
    return 0;
}
