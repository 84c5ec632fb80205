/* codegen/jit.c: compiles the JIT flavour of a model in memory with
 * libtcc and hands back its rt_model. tcc neither vectorises nor runs
 * OpenMP: the generated code calls kiln's own runtime (compiled by cc
 * into kiln) through the symbols added here. */
#include "codegen.h"

#include <libtcc.h>
#include <stdlib.h>
#include <string.h>

struct CgJit {
    TCCState *s;
    const rt_model *model;
    double seconds;
};

static void on_error(void *opaque, const char *msg)
{
    rt_err *err = opaque;
    rt_errf(err, RT_EINTERNAL, "libtcc: %s", msg);
}

static void add_runtime(TCCState *s)
{
#define X(name) tcc_add_symbol(s, #name, (const void *)name);
    RT_CORE_SYMBOLS(X)
    RT_GGUF_SYMBOLS(X)
    RT_ATTN_SYMBOLS(X)
    RT_GEN_SYMBOLS(X)
    RT_QUANT_SYMBOLS(X)
    RT_JIT_SYMBOLS(X)
#undef X
}

static int relocate(TCCState *s)
{
#ifdef TCC_RELOCATE_AUTO
    return tcc_relocate(s, TCC_RELOCATE_AUTO);
#else
    return tcc_relocate(s);
#endif
}

CgJit *cg_jit_new(const Module *m, rt_err *err)
{
    double t0 = rt_now();
    if (cg_ranks(m) > 1) {
        rt_errf(err, RT_EUSAGE, "a program of %d ranks runs under MPI, not in the JIT: build it "
                "(kiln build --ranks %d) and run it with mpirun -np %d", cg_ranks(m), cg_ranks(m),
                cg_ranks(m));
        return NULL;
    }
    const char *src = cg_emit_string(m, CG_JIT);
    CgJit *j = calloc(1, sizeof *j);
    if (!j || !(j->s = tcc_new())) {
        free(j);
        rt_errf(err, RT_EINTERNAL, "out of memory");
        return NULL;
    }
    tcc_set_error_func(j->s, err, on_error);
    tcc_set_output_type(j->s, TCC_OUTPUT_MEMORY);
    add_runtime(j->s);
    if (tcc_compile_string(j->s, src) < 0 || relocate(j->s) < 0 ||
        !(j->model = tcc_get_symbol(j->s, "kiln_model"))) {
        rt_errf(err, RT_EINTERNAL, "libtcc could not build the model");
        cg_jit_free(j);
        return NULL;
    }
    j->seconds = rt_now() - t0;
    return j;
}

const rt_model *cg_jit_model(const CgJit *j) { return j->model; }
double cg_jit_seconds(const CgJit *j) { return j->seconds; }

void cg_jit_free(CgJit *j)
{
    if (!j)
        return;
    if (j->s)
        tcc_delete(j->s);
    free(j);
}
