/* tests/unit/testlib.c: see testlib.h. */
#include "tests/unit/testlib.h"

#include "codegen/codegen.h"
#include "passes/passes.h"

#include <math.h>

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

Module *tl_module(void)
{
    Arena *a = arena_new();
    return ir_module_new(a, "t.json", "t");
}

void tl_free(Module *m) { arena_free(m->a); }

static Node *leaf(Module *m, OpKind op, const char *name, DType t, int rank, va_list ap)
{
    Node *n = ir_node_new(m, op, NULL, 0);
    n->name = arena_strdup(m->a, name);
    n->where = arena_printf(m->a, "%s", name);
    n->dtype = t;
    n->rank = rank;
    for (int i = 0; i < rank; i++)
        n->dims[i] = va_arg(ap, int64_t);
    ir_module_renumber(m);
    return n;
}

Node *tl_input(Module *m, const char *name, DType t, int rank, ...)
{
    va_list ap;
    va_start(ap, rank);
    Node *n = leaf(m, OP_INPUT, name, t, rank, ap);
    va_end(ap);
    return n;
}

Node *tl_weight(Module *m, const char *name, int rank, ...)
{
    va_list ap;
    va_start(ap, rank);
    Node *n = leaf(m, OP_WEIGHT, name, DT_F32, rank, ap);
    va_end(ap);
    return n;
}

Node *tl_state(Module *m, const char *name, int rank, ...)
{
    va_list ap;
    va_start(ap, rank);
    Node *n = leaf(m, OP_STATE, name, DT_F32, rank, ap);
    va_end(ap);
    return n;
}

Node *tl_const(Module *m, double v)
{
    Node *n = ir_node_new(m, OP_CONST, NULL, 0);
    n->value = v;
    n->dtype = DT_F32;
    n->where = "const";
    return n;
}

Node *tl_op(Module *m, OpKind op, const char *name, int nin, ...)
{
    Node *in[64];
    va_list ap;
    va_start(ap, nin);
    for (int i = 0; i < nin; i++)
        in[i] = va_arg(ap, Node *);
    va_end(ap);
    Node *n = ir_node_new(m, op, in, nin);
    n->name = name ? arena_strdup(m->a, name) : NULL;
    n->where = arena_printf(m->a, "nodes[%d]", n->id);
    return n;
}

void tl_attr_i(Node *n, const char *attr, int64_t v)
{
    AttrVal *a = (AttrVal *)attr_v(n, attr);
    a->i = v;
    a->given = 1;
}

void tl_attr_f(Node *n, const char *attr, double v)
{
    AttrVal *a = (AttrVal *)attr_v(n, attr);
    a->f = v;
    a->given = 1;
}

void tl_attr_ints(Module *m, Node *n, const char *attr, int count, ...)
{
    AttrVal *a = (AttrVal *)attr_v(n, attr);
    a->ints = arena_alloc(m->a, sizeof(int64_t) * (size_t)(count ? count : 1));
    va_list ap;
    va_start(ap, count);
    for (int i = 0; i < count; i++)
        a->ints[i] = va_arg(ap, int64_t);
    va_end(ap);
    a->nints = count;
    a->given = 1;
}

int tl_infer(Module *m, Node *n, char *msg, size_t msglen)
{
    Diags d;
    diag_init(&d, m->a, "t.json");
    InferCx cx = {m, &d};
    int rc = op_table[n->op].infer(&cx, n);
    if (msg && msglen) {
        msg[0] = 0;
        if (d.n)
            snprintf(msg, msglen, "%s", d.lines[0] + strlen("t.json: "));
    }
    if (rc != 0 && d.n == 0)
        return 1;
    return d.n;
}

void tl_outputs(Module *m, int nout, ...)
{
    m->outputs = arena_alloc(m->a, sizeof(Node *) * (size_t)nout);
    va_list ap;
    va_start(ap, nout);
    for (int i = 0; i < nout; i++)
        m->outputs[i] = va_arg(ap, Node *);
    va_end(ap);
    m->noutputs = nout;
    ir_module_renumber(m);
}

int tl_ref(Module *m, void **in, void **w, void **st, void **out,
           char *err, size_t errlen)
{
    Tensor *ti[64], *tw[64], *ts[64], *to[64];
    for (int i = 0; i < m->ninputs; i++) ti[i] = tensor_wrap(m->inputs[i], in[i]);
    for (int i = 0; i < m->nweights; i++) tw[i] = tensor_wrap(m->weights[i], w[i]);
    for (int i = 0; i < m->nstates; i++) ts[i] = tensor_wrap(m->states[i], st[i]);
    for (int i = 0; i < m->noutputs; i++) {
        out[i] = calloc((size_t)node_count(m->outputs[i]) + 1, 4);
        to[i] = tensor_wrap(m->outputs[i], out[i]);
    }
    int rc = ref_run(m, ti, tw, ts, to, err, errlen);
    for (int i = 0; i < m->ninputs; i++) free(ti[i]);
    for (int i = 0; i < m->nweights; i++) free(tw[i]);
    for (int i = 0; i < m->nstates; i++) free(ts[i]);
    for (int i = 0; i < m->noutputs; i++) free(to[i]);
    return rc;
}

static void weights_inline(Module *m, void **w)
{
    for (int i = 0; i < m->nweights; i++) {
        Node *n = m->weights[i];
        n->init.kind = INIT_DATA;
        n->init.data = arena_dup(m->a, w[i], node_bytes(n));
    }
}

static int compare(const Node *n, const void *ref, const void *got, double tol)
{
    int64_t count = node_count(n), worst = -1;
    double refmax = 0, maxabs = 0;
    for (int64_t i = 0; i < count; i++) {
        double r = n->dtype == DT_I32 ? ((const int32_t *)ref)[i] : ((const float *)ref)[i];
        double g = n->dtype == DT_I32 ? ((const int32_t *)got)[i] : ((const float *)got)[i];
        double e = fabs(r - g);
        if (!(e <= maxabs)) {
            maxabs = isnan(e) ? INFINITY : e;
            worst = i;
        }
        refmax = fabs(r) > refmax ? fabs(r) : refmax;
    }
    double rel = refmax > 0 ? maxabs / refmax : maxabs;
    int ok = n->dtype == DT_I32 ? maxabs == 0 : rel <= tol;
    if (!ok)
        fprintf(stderr, "tl_check: output '%s' element %lld: max abs error %g, relative %g > %g\n",
                n->name ? n->name : "?", (long long)worst, maxabs, rel, tol);
    return ok ? 0 : -1;
}

int tl_check(Module *m, void **in, void **w, double tol)
{
    void *st[64], *ref[64], *got[64];
    char err[512];
    for (int i = 0; i < m->nstates; i++)
        st[i] = calloc((size_t)node_count(m->states[i]) + 1, 4);
    int rc = tl_ref(m, in, w, st, ref, err, sizeof err);
    for (int i = 0; i < m->nstates; i++)
        free(st[i]);
    if (rc != 0) {
        fprintf(stderr, "tl_check: reference failed: %s\n", err);
        return -1;
    }
    weights_inline(m, w);
    PassCtx cx = {0};
    if (!m->prog && pass_lower(m, &cx) < 0)
        return -1;
    rt_err e = {0, ""};
    CgJit *j = cg_jit_new(m, &e);
    if (!j) {
        fprintf(stderr, "tl_check: %s\n", e.msg);
        return -1;
    }
    const rt_model *md = cg_jit_model(j);
    void *h = md->open(NULL);
    rc = md->status(h);
    for (int i = 0; i < m->noutputs; i++)
        got[i] = calloc((size_t)node_count(m->outputs[i]) + 1, 4);
    if (rc == 0)
        rc = md->run(h, (const void *const *)in, got);
    if (rc != 0)
        fprintf(stderr, "tl_check: the JIT build failed: %s\n", md->error(h));
    for (int i = 0; rc == 0 && i < m->noutputs; i++)
        rc = compare(m->outputs[i], ref[i], got[i], tol);
    for (int i = 0; i < m->noutputs; i++) {
        free(ref[i]);
        free(got[i]);
    }
    md->close(h);
    cg_jit_free(j);
    return rc;
}
