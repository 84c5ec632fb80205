/* tests/unit/test_alloc.c: out of memory at every allocation (SQLite's
 * fault injection). Each example is compiled as `kiln emit-c` does (file,
 * jansson, frontend, every pass, C in both flavours) once to count kiln's
 * allocations (ir/alloc.c: arena chunks, jansson's, the file's text,
 * what the arena holds), then once more for each of them failing. Every
 * such run must come back out of memory (never a syntax error, which is
 * what jansson makes of it, nor a crash) with every block given back; a
 * leak of libc's own (a memory stream) is left to ASan and valgrind.
 * Then the command itself: "kiln: out of memory", exit 4, nothing written.
 * KILN names the binary (default ./kiln). */
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "frontend/frontend.h"
#include "passes/passes.h"
#include "tests/unit/testlib.h"

enum { EMITTED, OUT_OF_MEMORY };

/* The model at path to C, as kiln emit-c --machine default does, in
 * process; the JIT flavour too when jit. */
static int emit(const char *path, int jit)
{
    Arena *a = arena_new();
    if (!a)
        return OUT_OF_MEMORY;
    jmp_buf oom;
    if (setjmp(oom)) {
        arena_free(a);
        return OUT_OF_MEMORY;
    }
    arena_set_oom(a, &oom);
    Diags d;
    diag_init(&d, a, path);
    Module *m = fe_load(a, path, &d, NULL);
    if (!m)
        fail_msg("%s: %s", path, d.n ? d.lines[0] : "no module");
    PassCtx cx = {.d = &d, .verify = 1};
    machine_default(&cx.machine);
    if (pass_pipeline(m, &cx) != 0)
        fail_msg("%s: %s", path, d.n ? d.lines[0] : "a pass failed");
    assert_true(strlen(cg_emit_string(m, CG_CC)) > 0);
    if (jit)
        assert_true(strlen(cg_emit_string(m, CG_JIT)) > 0);
    arena_free(a);
    return EMITTED;
}

/* Allocations a whole compilation of path makes. */
static unsigned long allocations(const char *path, int jit)
{
    ir_alloc_fail_at(0);
    long live = ir_alloc_live();
    assert_int_equal(emit(path, jit), EMITTED);
    assert_int_equal(ir_alloc_live(), live);
    return ir_alloc_count();
}

static void every_allocation_fails(void **state)
{
    (void)state;
    glob_t g;
    assert_int_equal(glob("examples/*.json", 0, NULL, &g), 0);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *path = g.gl_pathv[i];
        unsigned long total = allocations(path, 1);
        long live = ir_alloc_live();
        for (unsigned long n = 1; n <= total; n++) {
            ir_alloc_fail_at(n);
            if (emit(path, 1) != OUT_OF_MEMORY)
                fail_msg("%s: allocation %lu of %lu failed unnoticed", path, n, total);
            if (ir_alloc_count() < n)
                fail_msg("%s: allocation %lu of %lu was never made", path, n, total);
            if (ir_alloc_live() != live)
                fail_msg("%s: allocation %lu of %lu failed: %ld blocks leaked", path, n, total,
                         ir_alloc_live() - live);
        }
        ir_alloc_fail_at(0);
        printf("%s: each of %lu allocations failed in turn\n", path, total);
    }
    globfree(&g);
}

/* What the arena holds outside itself goes with it: a memory stream open
 * and a block held when memory runs out (the examples never run out with
 * a stream open), and both released on the way that does not. */
static void holds_are_released(void **state)
{
    (void)state;
    long live = ir_alloc_live();
    Arena *a = arena_new();
    jmp_buf oom;
    if (!setjmp(oom)) {
        arena_set_oom(a, &oom);
        fputs("kept", arena_stream(a));
        void *p = ir_malloc(10);
        arena_hold(a, p, ir_free);
        FILE *f = arena_stream(a);
        fprintf(f, "%s %d", "text", 42);
        assert_string_equal(arena_stream_text(a, f), "text 42");
        arena_release(a, p);
        arena_hold(a, ir_malloc(10), ir_free);
        ir_alloc_fail_at(1);
        arena_alloc(a, (size_t)1 << 20);      /* a new chunk, which fails */
        fail_msg("arena_alloc returned");
    }
    ir_alloc_fail_at(0);
    arena_free(a);
    assert_int_equal(ir_alloc_live(), live);
}

/* kiln emit-c with allocation n failing (KILN_TEST_ALLOC_FAIL). */
static void command_fails(const char *kiln, const char *model, unsigned long n)
{
    const char *out = tl_tmp_path("out.c"), *err = tl_tmp_path("err.txt");
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "KILN_TEST_ALLOC_FAIL=%lu '%s' emit-c %s --machine default -o '%s' 2>'%s'", n, kiln,
             model, out, err);
    int st = system(cmd);
    size_t len;
    char *text = tl_get_file(err, &len);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 4 || strcmp(text, "kiln: out of memory\n") != 0)
        fail_msg("%s: allocation %lu failing: status %d, stderr \"%s\"", model, n,
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1, text);
    free(text);
    assert_int_equal(access(out, F_OK), -1);
}

static void the_command_says_so(void **state)
{
    (void)state;
    const char *kiln = getenv("KILN") ? getenv("KILN") : "./kiln";
    const char *model = "examples/mlp.json";
    unsigned long total = allocations(model, 0);
    for (unsigned long n = 1; n <= 3; n++)
        command_fails(kiln, model, n);
    for (unsigned long n = 4; n < total; n += total / 8 + 1)
        command_fails(kiln, model, n);
    command_fails(kiln, model, total);      /* the last of the compilation */
    command_fails(kiln, model, total + 1);  /* cg_write_file's arena */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_allocation_fails),
        cmocka_unit_test(holds_are_released),
        cmocka_unit_test(the_command_says_so),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
