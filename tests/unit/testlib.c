/* tests/unit/testlib.c: see testlib.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testlib.h"

#include "passes/passes.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- building graphs ------------------------------------------------- */

Module *tl_module(void)
{
    Arena *a = arena_new();
    return ir_module_new(a, "t.json", "t");
}

void tl_free(Module *m) { arena_free(m->a); }

static Node *leaf(Module *m, OpKind op, const char *name, DType t, int rank,
                  const int64_t *dims)
{
    Node *n = ir_node_new(m, op, NULL, 0);
    n->name = arena_strdup(m->a, name);
    n->where = n->name;
    n->dtype = t;
    n->rank = rank;
    for (int i = 0; i < rank; i++)
        n->dims[i] = dims[i];
    ir_module_renumber(m);
    return n;
}

Node *tl_input(Module *m, const char *name, DType t, int rank, const int64_t *dims)
{
    return leaf(m, OP_INPUT, name, t, rank, dims);
}

Node *tl_weight(Module *m, const char *name, int rank, const int64_t *dims)
{
    return leaf(m, OP_WEIGHT, name, DT_F32, rank, dims);
}

Node *tl_state(Module *m, const char *name, int rank, const int64_t *dims)
{
    return leaf(m, OP_STATE, name, DT_F32, rank, dims);
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

void tl_attr_ints(Module *m, Node *n, const char *attr, int count, const int64_t *v)
{
    AttrVal *a = (AttrVal *)attr_v(n, attr);
    a->ints = arena_alloc(m->a, sizeof *v * (size_t)(count ? count : 1));
    for (int i = 0; i < count; i++)
        a->ints[i] = v[i];
    a->nints = count;
    a->given = 1;
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

/* ---- shape inference ------------------------------------------------- */

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

void tl_infer_ok(Module *m, Node *n, const char *want)
{
    char msg[512], got[128];
    if (tl_infer(m, n, msg, sizeof msg))
        fail_msg("unexpected refusal: %s", msg);
    if (!want)
        return;
    snprintf(got, sizeof got, "%s%s", dtype_name(n->dtype), shape_str(m->a, n->rank, n->dims));
    assert_string_equal(got, want);
}

void tl_infer_err(Module *m, Node *n, int count, const char *want)
{
    char msg[512];
    int got = tl_infer(m, n, msg, sizeof msg);
    if (got != count)
        fail_msg("%d problems (want %d), the first: \"%s\"", got, count, msg);
    assert_string_equal(msg, want);
}

/* ---- the reference --------------------------------------------------- */

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

void tl_ref_ok(Module *m, void **in, void **w, void **st, void **out)
{
    char err[512] = "";
    if (tl_ref(m, in, w, st, out, err, sizeof err) != 0)
        fail_msg("reference failed: %s", err);
}

void tl_ref_fails(Module *m, void **in, void **w, void **st, const char *want)
{
    char err[512] = "";
    void *out[8] = {0};
    int rc = tl_ref(m, in, w, st, out, err, sizeof err);
    for (int i = 0; i < m->noutputs && i < 8; i++)
        free(out[i]);
    assert_int_not_equal(rc, 0);
    assert_string_equal(err, want);
}

void tl_values(Module *m, Node *y, const char *type, void **in, void **w, const float *want,
               int count)
{
    tl_infer_ok(m, y, type);
    tl_outputs(m, 1, y);
    void *out[1];
    tl_ref_ok(m, in, w, NULL, out);
    tl_assert_near(out[0], want, count);
    free(out[0]);
    tl_check(m, in, w, 1e-6);
    tl_free(m);
}

void tl_assert_near(const float *got, const float *want, int count)
{
    for (int i = 0; i < count; i++)
        if (!(fabs((double)got[i] - want[i]) <= 1e-6 * fabs(want[i]) + 1e-7))
            fail_msg("element %d: got %.9g, want %.9g", i, got[i], want[i]);
}

void tl_assert_close(const float *got, const float *want, int count)
{
    double mx = 0;
    for (int i = 0; i < count; i++)
        mx = fmax(mx, fabs(want[i]));
    for (int i = 0; i < count; i++)
        if (fabs((double)got[i] - want[i]) > 1e-5 * mx)
            fail_msg("element %d: got %.9g, want %.9g", i, got[i], want[i]);
}

/* ---- pseudo-random data ---------------------------------------------- */

float *tl_random(int64_t count, uint64_t seed)
{
    float *f = malloc(sizeof *f * (size_t)(count + 1));
    for (int64_t i = 0; i < count; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        f[i] = (float)((double)(seed >> 40) / (1 << 24) * 2 - 1);
    }
    return f;
}

float *tl_fill(int64_t count, unsigned *seed, int ties)
{
    float *f = malloc(sizeof *f * (size_t)(count + 1));
    for (int64_t i = 0; i < count; i++) {
        *seed = *seed * 1103515245u + 12345u;
        float v = (float)((*seed >> 8) & 0xffff) / 65536.0f * 4 - 2;
        f[i] = ties ? roundf(v) : v;
    }
    return f;
}

/* ---- printed IR ------------------------------------------------------ */

static char *print_text(void (*print)(FILE *, const Module *), const Module *m)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    print(f, m);
    fclose(f);
    return text;
}

char *tl_graph_text(const Module *m) { return print_text(ir_print_graph, m); }

char *tl_prog_text(const Module *m) { return print_text(ir_print_prog, m); }

char *tl_lowered(Module *m, Node *n)
{
    m->prog = ir_prog_new(m->a);
    LowerCx cx = {m, m->a, m->prog};
    op_table[n->op].lower(&cx, n);
    char *text = tl_prog_text(m);
    /* copies text onto itself, each kernel line cut at its comment */
    char *out = text;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n"), keep = len;
        if (strncmp(p + strspn(p, " "), "kernel ", 7) == 0) {
            const char *note = strstr(p, "  # ");
            if (note && note < p + len)
                keep = (size_t)(note - p);
        }
        memmove(out, p, keep);
        out += keep;
        p += len;
        if (*p == '\n')
            *out++ = *p++;
    }
    *out = 0;
    return text;
}

void tl_assert_has(const char *text, const char *part)
{
    if (!strstr(text, part))
        fail_msg("lowered program lacks:\n%s\n--- in:\n%s", part, text);
}

const char tl_exp_kir_head[] =
    "graph t\n"
    "  input  %0 \"x\" : f32[8,64]\n"
    "  %1 \"y\" = exp %0 : f32[8,64]\n"
    "  output %1\n"
    "prog t\n"
    "  buf b0 input 0 %0 : f32[8,64]\n"
    "  buf b1 output 0 %1 : f32[8,64]\n"
    "  buf b2 temp : f32[600] @0\n"
    "  buf b3 local : f32[64]\n"
    "  arena 2432\n"
    "  kernel k0 t (%1)\n";

int tl_has_line(const char *text, const char *line)
{
    size_t len = strlen(line);
    int no = 0;
    for (const char *p = text; *p; no++) {
        p += strspn(p, " ");
        if (strncmp(p, line, len) == 0 && (p[len] == '\n' || p[len] == 0))
            return no;
        p += strcspn(p, "\n");
        p += *p == '\n';
    }
    fail_msg("no line \"%s\" in:\n%s", line, text);
    return -1;
}

/* ---- the JIT build --------------------------------------------------- */

void tl_jit_open(TlJit *jt, Module *m)
{
    PassCtx cx = {0};
    if (!m->prog && pass_lower(m, &cx) < 0)
        fail_msg("lowering failed");
    rt_err e = {0, ""};
    jt->j = cg_jit_new(m, &e);
    if (!jt->j)
        fail_msg("JIT build failed: %s", e.msg);
    jt->md = cg_jit_model(jt->j);
    jt->h = jt->md->open(NULL);
    if (jt->md->status(jt->h) != RT_OK)
        fail_msg("JIT build does not open: %s", jt->md->error(jt->h));
}

void tl_jit_close(TlJit *jt)
{
    jt->md->close(jt->h);
    cg_jit_free(jt->j);
}

/* Zeroed output buffers for one run of md (free with free_outputs). */
static void **new_outputs(const rt_model *md)
{
    void **out = calloc((size_t)md->noutputs + 1, sizeof *out);
    for (int i = 0; i < md->noutputs; i++)
        out[i] = calloc((size_t)md->outputs[i].count + 1, 4);
    return out;
}

static void free_outputs(const rt_model *md, void **out)
{
    for (int i = 0; i < md->noutputs; i++)
        free(out[i]);
    free(out);
}

void tl_jit_fails(TlJit *jt, void **in, const char *want)
{
    void **out = new_outputs(jt->md);
    int rc = jt->md->run(jt->h, (const void *const *)in, out);
    free_outputs(jt->md, out);
    assert_int_equal(rc, RT_EINVAL);
    assert_string_equal(jt->md->error(jt->h), want);
}

static void weights_inline(Module *m, void **w)
{
    for (int i = 0; i < m->nweights; i++) {
        Node *n = m->weights[i];
        n->init.kind = INIT_DATA;
        n->init.data = arena_dup(m->a, w[i], node_bytes(n));
    }
}

/* Compares n's values got with ref: f32 within tol relative to the
 * reference's largest magnitude, i32 exactly; says how they differ in why
 * when they do. */
static void compare(const Node *n, const void *ref, const void *got, double tol, char *why,
                  size_t whylen)
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
    if (n->dtype == DT_I32 ? maxabs != 0 : !(rel <= tol))
        snprintf(why, whylen, "output '%s' element %lld: max abs error %g, relative %g > %g",
                 n->name ? n->name : "?", (long long)worst, maxabs, rel, tol);
}

void tl_check(Module *m, void **in, void **w, double tol)
{
    void *st[64], *ref[64];
    for (int i = 0; i < m->nstates; i++)
        st[i] = calloc((size_t)node_count(m->states[i]) + 1, 4);
    tl_ref_ok(m, in, w, st, ref);
    for (int i = 0; i < m->nstates; i++)
        free(st[i]);
    weights_inline(m, w);
    TlJit jt;
    tl_jit_open(&jt, m);
    void **got = new_outputs(jt.md);
    char why[512] = "";
    if (jt.md->run(jt.h, (const void *const *)in, got) != RT_OK)
        snprintf(why, sizeof why, "the JIT build failed: %s", jt.md->error(jt.h));
    for (int i = 0; !why[0] && i < m->noutputs; i++)
        compare(m->outputs[i], ref[i], got[i], tol, why, sizeof why);
    for (int i = 0; i < m->noutputs; i++)
        free(ref[i]);
    free_outputs(jt.md, got);
    tl_jit_close(&jt);
    if (why[0])
        fail_msg("tl_check: %s", why);
}

/* ---- scratch files --------------------------------------------------- */

static char tmp_dir[64];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p);
}

int tl_tmp_setup(void **state)
{
    (void)state;
    strcpy(tmp_dir, "/tmp/kiln-unit-XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

int tl_tmp_teardown(void **state)
{
    (void)state;
    return nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *tl_tmp_dir(void) { return tmp_dir; }

const char *tl_tmp_path(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp_dir, name);
    return buf[k];
}

void tl_put_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

char *tl_get_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t cap = 4096;
    char *b = malloc(cap);
    *n = 0;
    for (size_t got; (got = fread(b + *n, 1, cap - *n - 1, f)) > 0;) {
        *n += got;
        if (cap - *n == 1)
            b = realloc(b, cap *= 2);
    }
    b[*n] = 0;
    fclose(f);
    return b;
}
