/* cli/folder.c: `kiln import`, and model folders and GGUF files for the
 * other commands.
 *   kiln import hf DIR [-o MODEL.json] [--tokens T] [--max-seq S] [--slots N]
 *   kiln import gguf FILE.gguf [-o MODEL.json] [--tokens T] [--max-seq S] [--slots N]
 *   kiln import llama2c FILE.bin [-o MODEL.json] [--weights-out W.safetensors]
 *                       [--tokens T] [--max-seq S] [--slots N]
 * The graph (frontend/import.h) is checked by the frontend like any model
 * file before it is written: to -o (atomically), else to stdout; a GGUF's
 * tensors are checked against it too (its weights stay in the file).
 * A folder or GGUF file given to the model commands is imported in
 * memory, and those that compile it check its weights file (the
 * folder's, the GGUF itself) against the graph first (cli_folder_weights),
 * so a file the program could not load fails the build, not the
 * program. */
#include "cli.h"
#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "frontend/import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_import_opt(int argc, char **argv, int *i, ImportOpts *o, int *rc)
{
    const char *v = cli_opt_value(argc, argv, i, "--tokens");
    int64_t *dst = &o->tokens;
    if (!v && (v = cli_opt_value(argc, argv, i, "--max-seq")))
        dst = &o->max_seq;
    if (!v && (v = cli_opt_value(argc, argv, i, "--slots")))
        dst = &o->slots;
    if (!v)
        return 0;
    char *end;
    long long n = strtoll(v, &end, 10);
    *rc = 0;
    if (!*v || *end || n < 1 || n > INT32_MAX)
        *rc = cli_usage(dst == &o->tokens ? "--tokens takes a count from 1 to 2^31-1, got '%s'"
                        : dst == &o->max_seq ? "--max-seq takes a count from 1 to 2^31-1, got '%s'"
                        : "--slots takes a count from 1 to 2^31-1, got '%s'", v);
    *dst = n;
    return 1;
}

int cli_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *cli_folder_file(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    if (p && access(p, R_OK) != 0) {
        free(p);
        p = NULL;
    }
    return p;
}

int cli_is_gguf(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && rt_is_gguf(path);
}

int cli_is_model_source(const char *path) { return cli_is_dir(path) || cli_is_gguf(path); }

char *cli_import_weights(const char *dir)
{
    if (!cli_is_dir(dir))
        return strdup(dir);
    Arena *a = arena_new();
    char *w = a ? strdup(imp_hf_weights(a, dir)) : NULL;
    arena_free(a);
    return w;
}

/* ---- a folder's weights, checked before it is compiled -------------------- */

int cli_folder_weights(const Module *m, const char *path)
{
    if (!path)                          /* cli_import_weights ran out of memory */
        return cli_out_of_memory();
    CgInfos t;
    cg_infos(m, &t);                    /* the weights as the program declares them */
    rt_err e = {0, ""};
    return rt_check_weights(path, t.weights, m->nweights, &e) ? cli_report(&e) : 0;
}

enum { IMPORT_LLAMA2C, IMPORT_HF, IMPORT_GGUF };

/* src imported (a folder, a GGUF file, a llama2.c file: kind) and
 * checked: the module, its text in *text; NULL with the problems
 * printed. */
static Module *import(Arena *a, int kind, const char *src, const ImportOpts *o,
                      const char *weights_out, char **text, int *status)
{
    Diags d;
    int io = 0;
    diag_init(&d, a, kind == IMPORT_HF ? arena_printf(a, "%s/config.json", src) : src);
    *text = kind == IMPORT_HF     ? imp_hf(a, src, o, &d, &io)
            : kind == IMPORT_GGUF ? imp_gguf(a, src, o, &d, &io)
                                  : imp_llama2c(a, src, o, weights_out, &d, &io);
    Module *m = NULL;
    if (*text) {
        diag_init(&d, a, src);
        m = fe_parse(a, src, *text, strlen(*text), &d);
    }
    if (!m) {
        diag_print(&d, stderr);
        *status = io ? EXIT_IO : EXIT_INVALID;
    }
    return m;
}

Module *cli_import_dir(Arena *a, const char *dir, const ImportOpts *o, int *status)
{
    char *text;
    return import(a, cli_is_dir(dir) ? IMPORT_HF : IMPORT_GGUF, dir, o, NULL, &text, status);
}

typedef struct {
    int kind;
    const char *src, *out, *weights_out;
    ImportOpts o;
} ImportArgs;

static int parse(ImportArgs *ia, int argc, char **argv)
{
    static const char *const kinds[] = {"llama2c", "hf", "gguf"};
    ia->kind = -1;
    for (int k = 0; argc >= 3 && k < 3; k++)
        ia->kind = strcmp(argv[2], kinds[k]) ? ia->kind : k;
    if (ia->kind < 0)
        return cli_usage("import takes hf DIR, gguf FILE.gguf or llama2c FILE.bin, got '%s'",
                         argc < 3 ? "" : argv[2]);
    for (int i = 3; i < argc; i++) {
        const char *v;
        int rc = 0;
        if (cli_import_opt(argc, argv, &i, &ia->o, &rc)) {
            if (rc)
                return rc;
        } else if ((v = cli_opt_value(argc, argv, &i, "-o"))) {
            if (!*v)
                return cli_usage("%s needs a path", "-o");
            ia->out = v;
        } else if (ia->kind == IMPORT_LLAMA2C &&
                   (v = cli_opt_value(argc, argv, &i, "--weights-out"))) {
            if (!*v)
                return cli_usage("%s needs a path", "--weights-out");
            ia->weights_out = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage("unknown option '%s'", argv[i]);
        } else if (!ia->src) {
            ia->src = argv[i];
        } else {
            return cli_usage("unexpected argument '%s'", argv[i]);
        }
    }
    if (!ia->src)
        return cli_usage("import %s needs a source", argv[2]);
    if (ia->out && cli_same_file(ia->out, ia->src))
        return cli_usage("-o %s would overwrite the checkpoint", ia->out);
    if (ia->weights_out && cli_same_file(ia->weights_out, ia->src))
        return cli_usage("--weights-out %s would overwrite the checkpoint", ia->weights_out);
    if (ia->out && ia->weights_out && cli_same_file(ia->out, ia->weights_out))
        return cli_usage("-o and --weights-out name the same file, %s", ia->out);
    return 0;
}

int cli_import(int argc, char **argv)
{
    ImportArgs ia = {0};
    int rc = parse(&ia, argc, argv);
    if (rc)
        return rc;
    if (ia.kind == IMPORT_HF && !cli_is_dir(ia.src)) {
        fprintf(stderr, "kiln: %s: not a directory (import hf takes a Hugging Face folder)\n",
                ia.src);
        return EXIT_IO;
    }
    Arena *a = arena_new();
    if (!a) {
        fprintf(stderr, "kiln: out of memory\n");
        return EXIT_INTERNAL;
    }
    jmp_buf oom;
    char *text = NULL;
    if (setjmp(oom)) {
        fprintf(stderr, "kiln: out of memory\n");
        rc = EXIT_INTERNAL;
    } else {
        arena_set_oom(a, &oom);
        Module *m = import(a, ia.kind, ia.src, &ia.o, ia.weights_out, &text, &rc);
        rt_err err = {0, ""};
        if (m && ia.kind == IMPORT_GGUF && (rc = cli_folder_weights(m, ia.src)))
            m = NULL;                   /* its tensors are not the graph's weights */
        if (m && (!ia.out || !strcmp(ia.out, "-")))
            fputs(text, stdout);
        else if (m && cg_write_file(ia.out, text, &err)) {
            fprintf(stderr, "kiln: %s\n", err.msg);
            rc = err.code;
        }
    }
    arena_free(a);
    return rc;
}
