/* cli/opt.c: `kiln opt FILE.kir --passes a,b`, passes run on a dumped stage
 * (so a stage can be edited and resumed), and `kiln passes`. */
#include "cli.h"
#include "codegen/codegen.h"
#include "passes/passes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Runs the comma-separated passes in order on m; 0, or an exit status. */
static int run_list(Module *m, const char *list, const char *machine)
{
    Diags d;
    diag_init(&d, m->a, m->file);
    PassCtx cx = {.d = &d, .verify = 1};
    machine_default(&cx.machine);
    if (machine && machine_parse(&cx.machine, machine) != 0)
        return cli_usage("--machine: cannot read '%s'", machine);
    char *names = arena_strdup(m->a, list);
    for (char *name = strtok(names, ","); name; name = strtok(NULL, ",")) {
        int i = pass_index(name);
        if (i < 0 || !pass_table[i].run)
            return cli_usage("'%s' is not a pass kiln opt can run (see kiln passes)", name);
        if ((pass_table[i].level == LEVEL_LOOP) != (m->prog != NULL) ||
            (pass_table[i].level == LEVEL_LOWER && m->prog))
            return cli_usage("pass '%s' does not apply at this stage of the IR", name);
        m->notes.n = 0;
        if (m->prog)
            m->prog->notes.n = 0;
        if (pass_table[i].run(m, &cx) < 0) {
            diag_print(&d, stderr);
            return EXIT_INVALID;
        }
        ir_verify_graph(m);
        if (m->prog)
            ir_verify_prog(m);
    }
    return 0;
}

/* kiln opt FILE.kir --passes a,b [-o OUT.kir]: tile sizes use fixed
 * machine figures, so the output is the same on every machine. */
int cli_opt(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *list = NULL, *machine = NULL;
    for (int i = 2; i < argc; i++) {
        const char *v;
        if ((v = cli_opt_value(argc, argv, &i, "--passes")) && !*v)
            return cli_usage("%s needs a list of passes, e.g. fuse,tile", "--passes");
        else if (v)
            list = v;
        else if ((v = cli_opt_value(argc, argv, &i, "-o")))
            out = v;
        else if ((v = cli_opt_value(argc, argv, &i, "--machine")))
            machine = v;
        else if (argv[i][0] == '-' && argv[i][1])
            return cli_usage("unknown option '%s'", argv[i]);
        else if (!in)
            in = argv[i];
        else
            return cli_usage("unexpected argument '%s'", argv[i]);
    }
    if (!in)
        return cli_usage("%s needs a .kir file", "opt");
    if (!list)
        return cli_usage("%s needs --passes a,b", "opt");
    if (out && cli_same_file(out, in))
        return cli_usage("-o %s would overwrite the input", out);
    size_t len = 0;
    char *text = cg_read_file(in, &len);
    if (!text) {
        fprintf(stderr, "kiln: %s: %s\n", in, strerror(errno));
        return EXIT_IO;
    }
    if (strlen(text) != len) {
        fprintf(stderr, "kiln: %s: a .kir file is text; this one holds a NUL byte\n", in);
        free(text);
        return EXIT_INVALID;
    }
    Arena *a = arena_new();
    if (!a) {
        free(text);
        return cli_out_of_memory();
    }
    Diags d;
    diag_init(&d, a, in);
    Module *m = ir_parse(a, in, text, &d);
    free(text);
    int rc = m ? run_list(m, list, machine) : (diag_print(&d, stderr), EXIT_INVALID);
    if (!rc) {
        char *t = ir_module_text(m);
        rt_err err = {0, ""};
        if (!out)
            fputs(t, stdout);
        else if (cg_write_file(out, t, &err))
            rc = cli_report(&err);
    }
    arena_free(a);
    return rc;
}

int cli_passes(void)
{
    static const char *levels[] = {"graph", "graph to loops", "loops", "C"};
    for (int i = 0; i < pass_count; i++)
        printf("%02d %-22s %-15s %s%s\n", i, pass_table[i].name, levels[pass_table[i].level],
               pass_table[i].what, pass_table[i].required ? "" : " (can be disabled)");
    return 0;
}
