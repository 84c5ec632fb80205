/* tests/unit/test_canonicalize.c: canonicalize-memrefs against the
 * reference. Shape ops over intermediates (transposed, sliced, placed into
 * concats, written later, flowing into outputs) on every combination of
 * small shapes are lowered, canonicalized, verified and JIT-built, and
 * every element must land where the reference puts it (exactly: neg and
 * abs round nothing). Which reshapes become views is checked against a
 * brute-force oracle: the element addresses either fit offset + sum of
 * index * stride, or they do not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "passes/passes.h"
#include "tests/unit/testlib.h"

#include <stdlib.h>
#include <string.h>

/* Distinct f32 data for every input of m (i + 0.5 shifted per input). */
static void **inputs(Module *m)
{
    void **in = calloc((size_t)m->ninputs + 1, sizeof *in);
    for (int i = 0; i < m->ninputs; i++) {
        int64_t count = node_count(m->inputs[i]);
        float *f = malloc((size_t)count * 4 + 4);
        for (int64_t j = 0; j < count; j++)
            f[j] = (float)(1000 * i + j) + 0.5f;
        in[i] = f;
    }
    return in;
}

static void free_inputs(Module *m, void **in)
{
    for (int i = 0; i < m->ninputs; i++)
        free(in[i]);
    free(in);
}

/* Lowers m and runs the pass; returns what it returned. */
static int canonicalize(Module *m)
{
    PassCtx cx = {0};
    assert_int_equal(pass_lower(m, &cx), 1);
    int changed = pass_canonicalize_memrefs(m, &cx);
    ir_verify_prog(m);
    return changed;
}

/* The JIT build of m, canonicalized, against the reference on distinct
 * data, exactly. Frees m. */
static void check(Module *m)
{
    void **in = inputs(m);
    tl_check(m, in, NULL, 0.0);
    free_inputs(m, in);
    tl_free(m);
}

/* The buffer holding n's value after the pass; NULL when none does. */
static Buf *buf_of(const Module *m, const Node *n)
{
    for (int i = 0; i < m->prog->nbufs; i++)
        if (m->prog->bufs[i]->node == n && m->prog->bufs[i]->kind == BK_TEMP)
            return m->prog->bufs[i];
    return NULL;
}

/* Whether a kernel still computes n (a copy the pass kept). */
static int copied(const Module *m, const Node *n)
{
    for (int i = 0; i < m->prog->nkernels; i++)
        if (m->prog->kernels[i]->nodes[0] == n)
            return 1;
    return 0;
}

static Node *unary(Module *m, OpKind op, const char *name, Node *x)
{
    Node *n = tl_op(m, op, name, 1, x);
    tl_infer_ok(m, n, NULL);
    return n;
}

static Node *shape_op(Module *m, OpKind op, const char *attr, int count, const int64_t *v, Node *x)
{
    Node *n = tl_op(m, op, NULL, 1, x);
    tl_attr_ints(m, n, attr, count, v);
    tl_infer_ok(m, n, NULL);
    return n;
}

/* ---- the oracle ------------------------------------------------------- */

/* Whether the addresses addr[k] of the elements of a tensor of shape
 * dims, in row-major order, are offset + sum of index * stride. */
static int strided(int rank, const int64_t *dims, const int64_t *addr)
{
    int64_t st[KILN_MAX_RANK], idx[KILN_MAX_RANK] = {0}, count = shape_count(rank, dims);
    for (int d = 0; d < rank; d++)     /* the address one step along d */
        st[d] = dims[d] > 1 ? addr[shape_count(rank - d - 1, dims + d + 1)] - addr[0] : 0;
    for (int64_t k = 0; k < count; k++) {
        int64_t a = addr[0];
        for (int d = 0; d < rank; d++)
            a += idx[d] * st[d];
        if (a != addr[k])
            return 0;
        for (int d = rank - 1; d >= 0 && ++idx[d] == dims[d]; d--)
            idx[d] = 0;
    }
    return 1;
}

/* Addresses in e (contiguous dims ed) of the elements of e transposed by
 * perm, in row-major order. */
static void transposed(int rank, const int64_t *ed, const int *perm, int64_t *addr)
{
    int64_t es[KILN_MAX_RANK], td[KILN_MAX_RANK], idx[KILN_MAX_RANK] = {0};
    for (int d = rank - 1; d >= 0; d--)
        es[d] = d == rank - 1 ? 1 : es[d + 1] * ed[d + 1];
    for (int d = 0; d < rank; d++)
        td[d] = ed[perm[d]];
    for (int64_t k = 0; k < shape_count(rank, ed); k++) {
        addr[k] = 0;
        for (int d = 0; d < rank; d++)
            addr[k] += idx[d] * es[perm[d]];
        for (int d = rank - 1; d >= 0 && ++idx[d] == td[d]; d--)
            idx[d] = 0;
    }
}

/* ---- reshapes of transposed views ----------------------------------- */

static const int64_t shapes24[][5] = {
    {1, 24}, {2, 2, 12}, {2, 12, 2}, {2, 6, 4}, {2, 4, 6}, {2, 3, 8}, {2, 8, 3},
    {3, 2, 3, 4}, {3, 4, 3, 2}, {3, 2, 2, 6}, {3, 3, 2, 4}, {4, 2, 2, 2, 3}, {3, 1, 24, 1},
};

static const int perms3[][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

/* y = abs(reshape(transpose(neg(x)))) for every perm and shape: the
 * transpose is always a view, the reshape exactly when the oracle says
 * the transposed elements are strided in the reshape's shape. */
static void transpose_reshape(void **state)
{
    (void)state;
    const int64_t ed[] = {2, 3, 4};
    int views = 0, copies = 0;
    for (size_t p = 0; p < sizeof perms3 / sizeof perms3[0]; p++)
        for (size_t s = 0; s < sizeof shapes24 / sizeof shapes24[0]; s++) {
            int rank = (int)shapes24[s][0];
            const int64_t *dims = shapes24[s] + 1;
            int64_t addr[24], perm[3] = {perms3[p][0], perms3[p][1], perms3[p][2]};
            transposed(3, ed, perms3[p], addr);
            Module *m = tl_module();
            Node *x = tl_input(m, "x", DT_F32, 3, ed);
            Node *e = unary(m, OP_NEG, "e", x);
            Node *t = shape_op(m, OP_TRANSPOSE, "perm", 3, perm, e);
            Node *r = shape_op(m, OP_RESHAPE, "shape", rank, dims, t);
            tl_outputs(m, 1, unary(m, OP_ABS, "y", r));
            canonicalize(m);
            assert_false(copied(m, t));
            int view = !copied(m, r);
            if (view != strided(rank, dims, addr))
                fail_msg("perm %zu shape %zu: view %d, oracle %d", p, s, view, !view);
            views += view;
            copies += !view;
            check(m);
        }
    assert_true(views > 0 && copies > 0);
}

/* ---- slices ------------------------------------------------------------ */

/* y = abs(reshape(slice(neg(x)))): every slice is a view; its reshape
 * to one dim is one unless the slice keeps parts of rows wider than 1. */
static void slice_reshape(void **state)
{
    (void)state;
    for (int ax = 0; ax < 2; ax++)
        for (int start = 0; start < 4; start++)
            for (int end = start + 1; end <= 4; end++) {
                Module *m = tl_module();
                Node *x = tl_input(m, "x", DT_F32, TL_DIMS(4, 4));
                Node *e = unary(m, OP_NEG, "e", x);
                Node *s = tl_op(m, OP_SLICE, "s", 1, e);
                tl_attr_i(s, "axis", ax);
                tl_attr_i(s, "start", start);
                tl_attr_i(s, "end", end);
                tl_infer_ok(m, s, NULL);
                Node *r = shape_op(m, OP_RESHAPE, "shape", TL_DIMS(-1), s);
                tl_outputs(m, 1, unary(m, OP_ABS, "y", r));
                canonicalize(m);
                assert_false(copied(m, s));
                assert_int_equal(copied(m, r), ax == 1 && end - start > 1 && end - start < 4);
                check(m);
            }
}

/* ---- concats ----------------------------------------------------------- */

static Node *concat(Module *m, int axis, int nin, Node *a, Node *b, Node *c)
{
    Node *n = tl_op(m, OP_CONCAT, NULL, nin, a, b, c);
    tl_attr_i(n, "axis", axis);
    tl_infer_ok(m, n, NULL);
    return n;
}

/* Producers write into their slices, through two levels of concat on
 * either axis; inputs and repeated operands keep their copies. */
static void concat_in_place(void **state)
{
    (void)state;
    for (int inner = 0; inner < 2; inner++)
        for (int outer = 0; outer < 2; outer++) {
            Module *m = tl_module();
            Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 2));
            Node *a = unary(m, OP_NEG, "a", x), *b = unary(m, OP_ABS, "b", x);
            Node *ab = concat(m, inner, 3, a, b, a);
            Node *z = unary(m, OP_NEG, "z", inner == outer ? x : ab);
            Node *c = concat(m, outer, inner == outer ? 3 : 2, ab, z, x);
            tl_outputs(m, 1, unary(m, OP_ABS, "y", c));
            canonicalize(m);
            assert_ptr_equal(buf_of(m, a)->base, buf_of(m, c));
            assert_ptr_equal(buf_of(m, b)->base, buf_of(m, c));
            check(m);
        }
}

/* ---- what a view must not see ----------------------------------------- */

/* A reshape of a state read after cache_write updates it keeps its copy
 * (the reference reads the old rows); one of the updated state is a view. */
static void state_written_later(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *nw = tl_input(m, "new", DT_F32, TL_DIMS(1, 2, 2));
    Node *pos = tl_input(m, "pos", DT_I32, 0, NULL);
    Node *s = tl_state(m, "cache", TL_DIMS(3, 2, 2));
    Node *before = shape_op(m, OP_RESHAPE, "shape", TL_DIMS(3, 4), s);
    Node *cw = tl_op(m, OP_CACHE_WRITE, "cw", 3, s, nw, pos);
    tl_infer_ok(m, cw, NULL);
    Node *after = shape_op(m, OP_RESHAPE, "shape", TL_DIMS(3, 4), cw);
    Node *d = tl_op(m, OP_SUB, "d", 2, after, before);
    tl_infer_ok(m, d, NULL);
    tl_outputs(m, 1, d);
    canonicalize(m);
    assert_true(copied(m, before));
    assert_false(copied(m, after));
    float nv[] = {1, 2, 3, 4};
    int32_t pv = 1;
    tl_check(m, (void *[]){nv, &pv}, NULL, 0.0);
    tl_free(m);
}

/* A transpose or reshape into an output makes its operand a view of the
 * output; a slice into one, or a reshape of an input, keeps its copy. */
static void outputs_inverted(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(2, 3, 4));
    Node *e = unary(m, OP_NEG, "e", x), *f = unary(m, OP_ABS, "f", x);
    Node *t = shape_op(m, OP_TRANSPOSE, "perm", TL_DIMS(2, 0, 1), e);
    Node *r = shape_op(m, OP_RESHAPE, "shape", TL_DIMS(4, 6), f);
    Node *s = tl_op(m, OP_SLICE, "s", 1, e);
    tl_attr_i(s, "axis", 1);
    tl_attr_i(s, "start", 1);
    tl_infer_ok(m, s, NULL);
    Node *xr = shape_op(m, OP_RESHAPE, "shape", TL_DIMS(24), x);
    t->name = "t", r->name = "r", xr->name = "xr";
    tl_outputs(m, 4, t, r, s, xr);
    canonicalize(m);
    assert_int_equal(buf_of(m, e)->base->kind, BK_OUTPUT);
    assert_int_equal(buf_of(m, f)->base->kind, BK_OUTPUT);
    assert_int_equal(m->prog->nkernels, 4);     /* e, f, the slice, xr */
    check(m);
}

/* Running the pass again finds nothing more to do. */
static void idempotent(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *x = tl_input(m, "x", DT_F32, TL_DIMS(4, 6));
    Node *e = unary(m, OP_NEG, "e", x);
    Node *t = shape_op(m, OP_TRANSPOSE, "perm", TL_DIMS(1, 0), e);
    Node *r = shape_op(m, OP_RESHAPE, "shape", TL_DIMS(3, 2, 4), t);
    Node *c = concat(m, 0, 2, unary(m, OP_ABS, "a", r), r, NULL);
    tl_outputs(m, 1, unary(m, OP_NEG, "y", c));
    assert_int_equal(canonicalize(m), 1);
    char *once = tl_prog_text(m);
    PassCtx cx = {0};
    assert_int_equal(pass_canonicalize_memrefs(m, &cx), 0);
    ir_verify_prog(m);
    m->prog->notes.n = 0;
    char *twice = tl_prog_text(m);
    assert_string_equal(strstr(twice, "  buf"), strstr(once, "  buf"));
    free(once);
    free(twice);
    check(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(transpose_reshape),
        cmocka_unit_test(slice_reshape),
        cmocka_unit_test(concat_in_place),
        cmocka_unit_test(state_written_later),
        cmocka_unit_test(outputs_inverted),
        cmocka_unit_test(idempotent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
