/* cli/cli.c: what the command line's files share to parse options and say
 * what went wrong. */
#include "cli.h"
#include "codegen/codegen.h"

#include <string.h>
#include <sys/stat.h>

int cli_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "kiln: ");
    fprintf(stderr, fmt, arg);
    fputs(strstr(fmt, "(see ") ? "\n" : " (see kiln --help)\n", stderr);  /* one hint */
    return EXIT_USAGE;
}

int cli_out_of_memory(void)
{
    fprintf(stderr, "kiln: out of memory\n");
    return EXIT_INTERNAL;
}

int cli_report(const rt_err *err)
{
    if (cg_interrupted())
        return err->code;       /* a consequence: main says it was interrupted */
    fprintf(stderr, "kiln: %s\n", err->msg);
    return err->code;
}

const char *cli_opt_value(int argc, char **argv, int *i, const char *name)
{
    size_t len = strlen(name);
    if (strncmp(argv[*i], name, len) != 0)
        return NULL;
    if (argv[*i][len] == '=')
        return argv[*i] + len + 1;
    if (argv[*i][len] != 0)
        return NULL;
    if (*i + 1 >= argc)
        return "";              /* caught by the caller as missing */
    return argv[++*i];
}

int cli_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (strcmp(a, b) == 0)
        return 1;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}
