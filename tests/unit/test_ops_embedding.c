/* tests/unit/test_ops_embedding.c: embedding: shape inference (every
 * refusal word for word), the reference against values worked out by
 * hand (the vocabulary-parallel form of a distributed graph included),
 * key lines of the lowered loop IR, and the lowered program compiled by
 * libtcc against the reference (tl_check), its run-time errors included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testlib.h"

#include <stdlib.h>

static void embedding_infers(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *table = tl_weight(m, "table", TL_DIMS(4, 3));
    Node *ids = tl_input(m, "ids", DT_I32, TL_DIMS(2, 5));
    Node *one = tl_input(m, "one", DT_I32, 0, NULL);
    tl_infer_ok(m, tl_op(m, OP_EMBEDDING, "e", 2, table, ids), "f32[2,5,3]");
    tl_infer_ok(m, tl_op(m, OP_EMBEDDING, "e1", 2, table, one), "f32[3]");
    tl_free(m);
}

static void embedding_refusals(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *table = tl_weight(m, "table", TL_DIMS(4, 3));
    Node *flat = tl_weight(m, "flat", TL_DIMS(12));
    Node *itable = tl_input(m, "itable", DT_I32, TL_DIMS(4, 3));
    Node *ids = tl_input(m, "ids", DT_I32, TL_DIMS(2));
    Node *fids = tl_input(m, "fids", DT_F32, TL_DIMS(2));
    Node *deep = tl_input(m, "deep", DT_I32, TL_DIMS(1, 1, 1, 1, 1, 2));
    tl_infer_err(m, tl_op(m, OP_EMBEDDING, "e", 2, itable, ids), 1,
                 "nodes[6].inputs[0]: embedding needs f32 here, got i32[4,3]");
    tl_infer_err(m, tl_op(m, OP_EMBEDDING, "e", 2, flat, ids), 1,
                 "nodes[7].inputs[0]: embedding needs rank 2 here, got f32[12]");
    tl_infer_err(m, tl_op(m, OP_EMBEDDING, "e", 2, table, fids), 1,
                 "nodes[8].inputs[1]: embedding needs i32 here, got f32[2]");
    tl_infer_err(m, tl_op(m, OP_EMBEDDING, "e", 2, table, deep), 1,
                 "nodes[9].inputs[1]: embedding: ids i32[1,1,1,1,1,2] would give a result of "
                 "rank 7, more than 6");
    tl_free(m);
}

/* table[v][d] = 10 v + d, V = 4, D = 3; ids [2, 2]. */
static Module *embedding_model(Node **e)
{
    Module *m = tl_module();
    Node *table = tl_weight(m, "table", TL_DIMS(4, 3));
    Node *ids = tl_input(m, "ids", DT_I32, TL_DIMS(2, 2));
    *e = tl_op(m, OP_EMBEDDING, "tok%emb", 2, table, ids);
    assert_int_equal(tl_infer(m, *e, NULL, 0), 0);
    tl_outputs(m, 1, *e);
    return m;
}

static float emb_table[12] = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32};

static void embedding_gathers_rows(void **state)
{
    (void)state;
    Node *e;
    Module *m = embedding_model(&e);
    int32_t ids[4] = {3, 0, 1, 3};
    void *in[] = {ids}, *w[] = {emb_table}, *out[1];
    tl_ref_ok(m, in, w, NULL, out);
    /* rows 3, 0, 1, 3 of the table */
    float want[12] = {30, 31, 32, 0, 1, 2, 10, 11, 12, 30, 31, 32};
    tl_assert_close(out[0], want, 12);
    free(out[0]);
    tl_check(m, in, w, 1e-5);
    tl_free(m);
}

/* Vocabulary parallel on 2 ranks: rank r holds rows 2r, 2r + 1 of
 * emb_table; each rank's part has its own rows and zeros, the allreduce
 * gives every rank the whole rows; id 4 (V = 4 over both) is refused. */
static void embedding_vocab_parallel(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *ids = tl_input(m, "ids", DT_I32, TL_DIMS(2, 2));
    Node *table = tl_weight(m, "table", TL_DIMS(2, 3));
    Node *e = tl_op(m, OP_EMBEDDING, "e", 2, table, ids);
    tl_attr_i(e, "ranks", 2);
    Node *y = tl_op(m, OP_ALLREDUCE, "y", 1, e);
    tl_attr_i(y, "ranks", 2);
    tl_infer_ok(m, e, "f32[2,2,3]");
    tl_infer_ok(m, y, "f32[2,2,3]");
    tl_outputs(m, 2, e, y);
    int32_t good[4] = {3, 0, 1, 3}, bad[4] = {0, 4, 0, 0};
    float part0[12], whole[12];
    float want0[12] = {0, 0, 0, 0, 1, 2, 10, 11, 12, 0, 0, 0};
    float want[12] = {30, 31, 32, 0, 1, 2, 10, 11, 12, 30, 31, 32};
    Tensor *tw[2] = {tensor_wrap(table, emb_table), tensor_wrap(table, emb_table + 6)};
    Tensor *const *wr[2] = {&tw[0], &tw[1]}, *const *sr[2] = {NULL, NULL};
    Tensor *ti = tensor_wrap(ids, good), *to[2] = {tensor_wrap(e, part0), tensor_wrap(y, whole)};
    char err[512] = "";
    if (ref_run_ranks(m, 2, &ti, wr, sr, to, err, sizeof err) != 0)
        fail_msg("reference failed: %s", err);
    tl_assert_near(whole, want, 12);
    tl_assert_near(part0, want0, 12);          /* the outputs are rank 0's */
    free(ti);
    ti = tensor_wrap(ids, bad);
    assert_int_not_equal(ref_run_ranks(m, 2, &ti, wr, sr, to, err, sizeof err), 0);
    tl_assert_has(err, "embedding: id 4 at position 1 is out of range [0, 4)");
    char *ir = tl_lowered(m, e);
    tl_has_line(ir, "kernel k0 embedding_rank (%2)");
    tl_has_line(ir, "call rank(b0[0 +: 1])");
    tl_has_line(ir, "kernel k1 embedding_v4_d3 (%2)");
    tl_has_line(ir, "let v7: i64 = v5 - b0[0] * 2");
    tl_has_line(ir, "if v7 >= 0 && v7 < 2");
    tl_has_line(ir, "b2[i3, i4, i8] = b3[v7, i8]");
    free(ir);
    free(ti);
    free(to[0]);
    free(to[1]);
    free(tw[0]);
    free(tw[1]);
    tl_free(m);
}

/* The table is an input here, so that the JIT build needs no weights. */
static void embedding_id_out_of_range(void **state)
{
    (void)state;
    Module *m = tl_module();
    Node *table = tl_input(m, "table", DT_F32, TL_DIMS(4, 3));
    Node *ids = tl_input(m, "ids", DT_I32, TL_DIMS(2, 2));
    Node *e = tl_op(m, OP_EMBEDDING, "tok%emb", 2, table, ids);
    assert_int_equal(tl_infer(m, e, NULL, 0), 0);
    tl_outputs(m, 1, e);
    int32_t big[4] = {0, 1, 4, 0}, neg[4] = {-1, 0, 0, 0};
    void *in[] = {emb_table, big};
    tl_ref_fails(m, in, NULL, NULL,
              "node 'tok%emb': embedding: id 4 at position 2 is out of range [0, 4)");
    TlJit jt;
    tl_jit_open(&jt, m);
    tl_jit_fails(&jt, in, "embedding 'tok%emb': id 4 at position 2 is out of range [0, 4)");
    in[1] = neg;
    tl_ref_fails(m, in, NULL, NULL,
              "node 'tok%emb': embedding: id -1 at position 0 is out of range [0, 4)");
    tl_jit_fails(&jt, in, "embedding 'tok%emb': id -1 at position 0 is out of range [0, 4)");
    tl_jit_close(&jt);
    tl_free(m);
}

static void embedding_lowers(void **state)
{
    (void)state;
    Node *e;
    Module *m = embedding_model(&e);
    char *ir = tl_lowered(m, e);
    tl_has_line(ir, "kernel k0 embedding_v4_d3 (%2)");
    tl_has_line(ir, "let v2: i64 = b0[i0, i1]");
    /* the name's % is doubled so that it cannot act as a directive */
    int check = tl_has_line(ir, "check v2 >= 0 && v2 < 4 else \"embedding 'tok%%emb': id %lld at "
                                "position %lld is out of range [0, 4)\", v2, i0 * 2 + i1");
    /* every id is checked before the first row is read */
    tl_has_line(ir, "let v5: i64 = b0[i3, i4]");
    assert_true(check < tl_has_line(ir, "b2[i3, i4, i6] = b1[v5, i6]"));
    free(ir);
    tl_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(embedding_infers),
        cmocka_unit_test(embedding_refusals),
        cmocka_unit_test(embedding_gathers_rows),
        cmocka_unit_test(embedding_vocab_parallel),
        cmocka_unit_test(embedding_id_out_of_range),
        cmocka_unit_test(embedding_lowers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
