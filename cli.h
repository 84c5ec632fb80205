/* cli.h: the command line's own files (main.c dispatches to these). */
#ifndef KILN_CLI_H
#define KILN_CLI_H

/* kiln bench [MODEL ...] [options]: bench.c */
int cli_bench(int argc, char **argv);
/* kiln machine [--refresh]: bench.c */
int cli_machine(int argc, char **argv);

#endif
