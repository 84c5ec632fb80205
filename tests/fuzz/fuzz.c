/* tests/fuzz/fuzz.c: helpers of the libFuzzer harnesses (fuzz.h). */
#define _GNU_SOURCE /* memfd_create */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codegen/codegen.h"

_Noreturn void fuzz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "fuzz: %s:%d: invariant broken: %s\n", file, line, what);
    abort();
}

const char *fuzz_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("kiln-fuzz", MFD_CLOEXEC);
        if (fd < 0) {
            perror("fuzz: memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
        perror("fuzz: writing the memory file");
        abort();
    }
    return path;
}

char *fuzz_text(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    if (size)
        memcpy(s, data, size);
    s[size] = 0;
    return s;
}

uint64_t fuzz_hash(const uint8_t *data, size_t size)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * UINT64_C(0x100000001b3);
    return h;
}

/* ir_print_module's text, malloc'd. */
static char *module_text(const Module *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        abort();
    ir_print_module(f, m);
    fclose(f);
    return buf;
}

/* Aborts, showing the first line that differs, unless x and y are equal. */
static void same(const char *what, const char *x, const char *y)
{
    if (strcmp(x, y) == 0)
        return;
    size_t bol = 0;
    int line = 1;
    for (size_t i = 0; x[i] == y[i]; i++)
        if (x[i] == '\n')
            bol = i + 1, line++;
    fprintf(stderr, "fuzz: %s differs at line %d:\n  was %.*s\n  now %.*s\n", what, line,
            (int)strcspn(x + bol, "\n"), x + bol, (int)strcspn(y + bol, "\n"), y + bol);
    abort();
}

void fuzz_reparse(const Module *m)
{
    char *text = module_text(m);
    Arena *a = arena_new();
    Diags d;
    diag_init(&d, a, "reparse.kir");
    Module *back = ir_parse(a, "reparse.kir", text, &d);
    if (!back) {
        fprintf(stderr, "fuzz: printed IR does not parse back: %s\n--- text ---\n%s",
                d.n ? d.lines[0] : "?", text);
        abort();
    }
    char *again = module_text(back);
    same("the IR printed, parsed and printed again", text, again);
    if (m->prog)
        for (int fl = CG_CC; fl <= CG_JIT; fl++)
            same("the C of the module parsed back", cg_emit_string(m, fl),
                 cg_emit_string(back, fl));
    free(again);
    free(text);
    arena_free(a);
}
