/* tests/unit/test_fuse.c: the fuse pass on every model, with the fixed
 * machine figures of golden tests and `kiln opt` (one core, so fusion by
 * rows is not held back by parallelism: the most fusion kiln does).
 * 1. Every model, compiled through the whole pipeline, JIT-runs to the
 *    reference's numbers (kiln check's tolerance).
 * 2. Every producer/consumer pair of kernels of fuse's input gets a note.
 * 3. Fusing again changes nothing: the pass reaches its fixed point.
 * 4. The SwiGLU of deepseek: gate and up share one reduction loop, with
 *    silu(gate) * up as their epilogue.
 * 5. A long element-wise chain fuses into kernels of at most
 *    FUSE_MAX_STMTS statements, with a note where it stops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "passes/fuse.h"
#include "passes/passes.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* path's module after the pipeline up to and including `stop` (NULL: all). */
static Module *compiled(Arena *a, const char *path, const char *stop)
{
    Diags d;
    diag_init(&d, a, path);
    Module *m = fe_load(a, path, &d, NULL);
    assert_non_null(m);
    PassCtx cx = {.d = &d, .verify = 1, .stop_after = stop};
    machine_default(&cx.machine);
    assert_int_equal(pass_pipeline(m, &cx), 0);
    assert_non_null(m->prog);
    return m;
}

/* Every model file the tests check: the examples and the op models. */
static glob_t models(void)
{
    glob_t g;
    assert_int_equal(glob("examples/*.json", 0, NULL, &g), 0);
    assert_int_equal(glob("tests/models/*.json", GLOB_APPEND, NULL, &g), 0);
    return g;
}

static void same_numbers(void **state)
{
    (void)state;
    glob_t g = models();
    for (size_t i = 0; i < g.gl_pathc; i++) {
        Arena *a = arena_new();
        Module *m = compiled(a, g.gl_pathv[i], NULL);
        CheckOpts o = {.seed = 1, .tol = 1e-4, .skip_cc = 1, .quiet = 1};
        rt_err e = {0, ""};
        CgCheck *c = cg_check_begin(m, &o, &e);
        if (!c)
            fail_msg("%s: %s", g.gl_pathv[i], e.msg);
        CgMiss miss;
        int rc = cg_check_stage(c, m, &miss, &e);
        if (rc)
            fail_msg("%s: output %d element %lld: %g, want %g (%s)", g.gl_pathv[i], miss.output,
                     (long long)miss.element, miss.got, miss.want, e.msg);
        cg_check_end(c);
        arena_free(a);
    }
    globfree(&g);
}

/* Whether a note of p reads "... k<w>[ name] -> k<c>[ name]: ...". */
static int noted(const Prog *p, int w, int c)
{
    char tight[64], named[64];
    snprintf(tight, sizeof tight, "k%d -> k%d:", w, c);
    snprintf(named, sizeof named, "k%d ", w);
    for (int i = 0; i < p->notes.n; i++) {
        const char *s = p->notes.v[i], *at;
        if (strstr(s, tight))
            return 1;
        char arrow[32];
        snprintf(arrow, sizeof arrow, " -> k%d ", c);
        if ((at = strstr(s, named)) && strstr(at, arrow))
            return 1;
    }
    return 0;
}

static void every_pair_noted(void **state)
{
    (void)state;
    glob_t g = models();
    for (size_t i = 0; i < g.gl_pathc; i++) {
        Arena *a = arena_new();
        Module *m = compiled(a, g.gl_pathv[i], "canonicalize-memrefs");
        Prog *p = m->prog;
        int nk = p->nkernels, npairs = 0;
        int *pw = calloc((size_t)nk * (size_t)p->nbufs + 1, sizeof *pw);
        int *pc = calloc((size_t)nk * (size_t)p->nbufs + 1, sizeof *pc);
        for (int c = 0; c < nk; c++)
            for (int b = 0; b < p->nbufs; b++) {
                Buf *s = p->bufs[b];
                if (s->base || s->kind == BK_LOCAL || !ir_block_reads(&p->kernels[c]->body, s))
                    continue;
                for (int w = c - 1; w >= 0; w--)
                    if (ir_block_writes(&p->kernels[w]->body, s)) {
                        pw[npairs] = w;
                        pc[npairs++] = c;
                        break;
                    }
            }
        PassCtx cx = {.verify = 1};
        machine_default(&cx.machine);
        assert_true(pass_fuse(m, &cx) >= 0);
        ir_verify_prog(m);
        for (int j = 0; j < npairs; j++)
            if (!noted(p, pw[j], pc[j]))
                fail_msg("%s: no note on k%d -> k%d", g.gl_pathv[i], pw[j], pc[j]);
        free(pw);
        free(pc);
        arena_free(a);
    }
    globfree(&g);
}

static void fixed_point(void **state)
{
    (void)state;
    glob_t g = models();
    for (size_t i = 0; i < g.gl_pathc; i++) {
        Arena *a = arena_new();
        Module *m = compiled(a, g.gl_pathv[i], "fuse");
        int nk = m->prog->nkernels;
        PassCtx cx = {.verify = 1};
        machine_default(&cx.machine);
        if (pass_fuse(m, &cx) != 0 || m->prog->nkernels != nk)
            fail_msg("%s: fusing again changed the program", g.gl_pathv[i]);
        arena_free(a);
    }
    globfree(&g);
}

static void swiglu_epilogue(void **state)
{
    (void)state;
    Arena *a = arena_new();
    Module *m = compiled(a, "examples/deepseek-r1-block.json", "fuse");
    const Kernel *k = NULL;
    for (int i = 0; i < m->prog->nkernels; i++)
        if (strcmp(m->prog->kernels[i]->name, "gemm_n8960_k1536_x2_silu_mul") == 0)
            k = m->prog->kernels[i];
    assert_non_null(k);
    assert_int_equal(k->nnodes, 4);          /* gate, up, silu, mul */
    /* for rows: for features: two accumulators, one reduction loop, the
     * epilogue, one store */
    const Block *in = &k->body.s[0]->body.s[0]->body;
    int lets = 0, loops = 0, stores = 0;
    for (int i = 0; i < in->n; i++) {
        lets += in->s[i]->kind == S_LET;
        loops += in->s[i]->kind == S_LOOP;
        stores += in->s[i]->kind == S_STORE;
    }
    assert_int_equal(loops, 1);
    assert_int_equal(lets, 3);               /* gate, up accumulators; silu(gate) */
    assert_int_equal(stores, 1);
    arena_free(a);
}

static void count(Stmt *s, void *ctx)
{
    (void)s;
    ++*(int *)ctx;
}

/* 600 neg/relu nodes in a row: one kernel each after lowering. */
static void long_chain_bounded(void **state)
{
    (void)state;
    char path[] = "/tmp/kiln-chain-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f, "{\"format\": \"kiln/1\", \"name\": \"chain\", \"inputs\": "
               "[{\"name\": \"x\", \"shape\": [4, 8]}], \"nodes\": [");
    for (int i = 0; i < 600; i++) {
        char in[16] = "x";
        if (i)
            snprintf(in, sizeof in, "n%d", i - 1);
        fprintf(f, "%s{\"name\": \"n%d\", \"op\": \"%s\", \"inputs\": [\"%s\"]}",
                i ? ", " : "", i, i % 2 ? "relu" : "neg", in);
    }
    fprintf(f, "], \"outputs\": [\"n599\"]}\n");
    assert_int_equal(fclose(f), 0);
    Arena *a = arena_new();
    Module *m = compiled(a, path, "fuse");
    const Prog *p = m->prog;
    int limit_noted = 0;
    for (int i = 0; i < p->nkernels; i++) {
        int n = 0;
        ir_block_walk(&p->kernels[i]->body, count, &n);
        assert_true(n <= FUSE_MAX_STMTS);
    }
    for (int i = 0; i < p->notes.n; i++)
        limit_noted |= strstr(p->notes.v[i], "statements, more than") != NULL;
    assert_true(p->nkernels > 1 && p->nkernels < 600 / 100);
    assert_true(limit_noted);
    CheckOpts o = {.seed = 1, .tol = 1e-4, .skip_cc = 1, .quiet = 1};
    rt_err e = {0, ""};
    CgCheck *c = cg_check_begin(m, &o, &e);
    assert_non_null(c);
    CgMiss miss;
    assert_int_equal(cg_check_stage(c, m, &miss, &e), 0);
    cg_check_end(c);
    arena_free(a);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_numbers),
        cmocka_unit_test(every_pair_noted),
        cmocka_unit_test(fixed_point),
        cmocka_unit_test(swiglu_epilogue),
        cmocka_unit_test(long_chain_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
