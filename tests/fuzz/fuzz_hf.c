/* tests/fuzz/fuzz_hf.c: a Hugging Face folder's config.json through
 * `kiln import hf` (frontend/import_hf.c, import_hf_quant.c).
 *
 * Input: config.json, in a folder made once whose config.json is a
 * symbolic link to the input's memory file. imp_hf must refuse it with
 * at least one line, or write a graph and say nothing; a graph it writes
 * must be read by fe_parse, accepted or refused with lines of its own (a
 * size past kiln's limits), never crash. Half the inputs, by their hash,
 * are imported with --tokens 3 --max-seq 16. Refusals are fine; crashes,
 * sanitizer reports, hangs and leaks are not. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frontend/frontend.h"
#include "frontend/import.h"
#include "fuzz.h"

static char dir[64];

static void remove_folder(void)
{
    char link[96];
    snprintf(link, sizeof link, "%s/config.json", dir);
    unlink(link);
    rmdir(dir);
}

/* The folder, made on first use, its config.json the memory file at path. */
static const char *folder(const char *path)
{
    if (*dir)
        return dir;
    char link[96];
    snprintf(dir, sizeof dir, "/tmp/kiln-fuzz-hf-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    snprintf(link, sizeof link, "%s/config.json", dir);
    if (symlink(path, link) != 0) {
        perror("fuzz: symlink");
        abort();
    }
    atexit(remove_folder);
    return dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = folder(fuzz_file(data, size));
    Arena *a = arena_new();
    jmp_buf oom;
    if (!a)
        abort();
    if (setjmp(oom)) {                /* a graph too big to hold is fine */
        arena_free(a);
        return 0;
    }
    arena_set_oom(a, &oom);
    Diags d;
    diag_init(&d, a, "config.json");
    ImportOpts o = {0, 0, 0};
    if (fuzz_hash(data, size) & 1)
        o = (ImportOpts){.tokens = 3, .max_seq = 16};
    int io = 0;
    char *text = imp_hf(a, in, &o, &d, &io);
    FUZZ_CHECK(text ? d.n == 0 : d.n > 0);
    if (text) {
        Diags g;
        diag_init(&g, a, "import.json");
        Module *m = fe_parse(a, "import.json", text, strlen(text), &g);
        FUZZ_CHECK(m ? g.n == 0 : g.n > 0);
    }
    arena_free(a);
    return 0;
}
