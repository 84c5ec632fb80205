/* tests/unit/test_mxfp4_st.c: MXFP4 weights of a safetensors file (the
 * Hub's gpt-oss: NAME_blocks and NAME_scales, docs/importing.md) through
 * rt_load_weights: nibbles and scales written by hand in the file's order
 * (value 2j the low nibble of byte j), the kiln block bytes the loader
 * repacks them into (the scale, then byte j = value j | value j + 16 << 4)
 * checked byte by byte, the values widened to f32 and read back from the
 * repacked blocks (rt_mxfp4_at) checked against the E2M1 table; a rank's
 * part (by experts, by rows) of blocks and scales; and the bad files,
 * each refused in one line naming its tensor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "frontend/import.h"
#include "runtime/kiln_rt.h"
#include "runtime/rt_quant.h"
#include "tests/unit/testlib.h"

#include <string.h>

/* w [2, 32]: one block a row. Row 0, scale 127 (x 1): values 0 .. 3 are
 * codes 1, 2, 7, 0xf (0.5, 1, 6, -6), 16 and 17 codes 9, 4 (-0.5, 2), 31
 * code 5 (3), the rest 0. Row 1, scale 129 (x 4): value 0 code 3 (1.5:
 * 6), value 31 code 0xa (-1: -4). */
static const unsigned char file_blocks[2][16] = {
    {0x21, 0xf7, 0, 0, 0, 0, 0, 0, 0x49, 0, 0, 0, 0, 0, 0, 0x50},
    {0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xa0},
};
static const unsigned char file_scales[2] = {127, 129};
/* kiln's blocks: byte j = value j | value j + 16 << 4 */
static const unsigned char kiln_blocks[2][17] = {
    {127, 0x91, 0x42, 0x07, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x50},
    {129, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xa0},
};

static float want(int r, int k)
{
    static const struct { int r, k; float v; } nz[] = {
        {0, 0, 0.5f}, {0, 1, 1}, {0, 2, 6}, {0, 3, -6}, {0, 16, -0.5f}, {0, 17, 2}, {0, 31, 3},
        {1, 0, 6}, {1, 31, -4},
    };
    for (size_t i = 0; i < sizeof nz / sizeof *nz; i++)
        if (nz[i].r == r && nz[i].k == k)
            return nz[i].v;
    return 0;
}

/* The file with blocks and scales of the given dtypes and shapes (bytes
 * from the tables above, as many as asked); loads w [2, 32] as store. */
static int load(const char *bdtype, int brank, const int64_t *bdims, const char *sdtype,
                int srank, const int64_t *sdims, int store, void **out, rt_err *e)
{
    static unsigned char bytes[4096];
    memcpy(bytes, file_blocks, sizeof file_blocks);
    memcpy(bytes + 2048, file_scales, sizeof file_scales);
    ImpTensor t[2] = {{"w_blocks", bdtype, brank, {0}, bytes},
                      {"w_scales", sdtype, srank, {0}, bytes + 2048}};
    memcpy(t[0].dims, bdims, sizeof *bdims * (size_t)brank);
    if (srank)                          /* no scales: sdims NULL, which memcpy may not take */
        memcpy(t[1].dims, sdims, sizeof *sdims * (size_t)srank);
    char why[256];
    const char *path = tl_tmp_path("mx.safetensors");
    assert_int_equal(imp_st_write(path, t, sdtype ? 2 : 1, why, sizeof why), 0);
    rt_tensor_info info = {.name = "w", .dtype = RT_F32, .rank = 2, .dims = {2, 32}, .count = 64,
                           .store = store};
    *out = NULL;
    return rt_load_weights(path, &info, 1, out, e);
}

static int load_good(int store, void **out, rt_err *e)
{
    return load("U8", 3, (int64_t[]){2, 1, 16}, "U8", 2, (int64_t[]){2, 1}, store, out, e);
}

static void repacked(void **state)
{
    (void)state;
    void *q, *f;
    rt_err e = {0, ""};
    assert_int_equal(load_good(RT_MXFP4, &q, &e), 0);
    assert_memory_equal(q, kiln_blocks, sizeof kiln_blocks);
    assert_int_equal(load_good(RT_F32, &f, &e), 0);
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 32; k++) {
            assert_true(((float *)f)[r * 32 + k] == want(r, k));
            assert_true(rt_mxfp4_at(q, r * 32 + k) == want(r, k));
        }
    rt_free(q);
    rt_free(f);
}

static void refuse(const char *bdtype, int brank, const int64_t *bdims, const char *sdtype,
                   int srank, const int64_t *sdims, const char *msg)
{
    void *q;
    rt_err e = {0, ""};
    assert_int_equal(load(bdtype, brank, bdims, sdtype, srank, sdims, RT_MXFP4, &q, &e), RT_EINVAL);
    assert_null(q);
    if (!strstr(e.msg, msg))
        fail_msg("got: %s\nwant: %s", e.msg, msg);
    assert_null(strchr(e.msg, '\n'));
}

static void bad_files(void **state)
{
    (void)state;
    /* the scales' shape, dtype; the blocks' dtype, last dim, count */
    refuse("U8", 3, (int64_t[]){2, 1, 16}, "U8", 2, (int64_t[]){1, 2},
           "'w_scales': U8 [1,2], for 'w_blocks' [2,1,16] kiln reads [2,1] (U8)");
    refuse("U8", 3, (int64_t[]){2, 1, 16}, "BF16", 1, (int64_t[]){2},
           "'w_scales': not U8 [2], for 'w_blocks' [2,1,16] kiln reads [2,1] (U8)");
    refuse("BF16", 3, (int64_t[]){2, 1, 16}, "U8", 2, (int64_t[]){2, 1},
           "'w_blocks': not U8 [2,1,16], kiln reads MXFP4 blocks as U8 [..., cols / 32, 16]");
    refuse("U8", 3, (int64_t[]){2, 2, 8}, "U8", 2, (int64_t[]){2, 2},
           "'w_blocks': U8 [2,2,8], kiln reads MXFP4 blocks as U8 [..., cols / 32, 16]");
    refuse("U8", 3, (int64_t[]){2, 2, 16}, "U8", 2, (int64_t[]){2, 2},
           "'w': shape [2,64] in the file, the model declares [2,32]");
    refuse("U8", 3, (int64_t[]){2, 1, 16}, NULL, 0, NULL,
           "'w_blocks' is MXFP4 but its scales 'w_scales' are not in the file");
}

/* A NaN scale (255), by place; a U8 tensor that is no MXFP4 weight's. */
static void nan_and_u8(void **state)
{
    (void)state;
    unsigned char b[64] = {0}, s[2] = {127, 255};
    ImpTensor t[2] = {{"w_blocks", "U8", 3, {2, 1, 16}, b}, {"w_scales", "U8", 2, {2, 1}, s}};
    char why[256];
    const char *path = tl_tmp_path("nan.safetensors");
    assert_int_equal(imp_st_write(path, t, 2, why, sizeof why), 0);
    rt_tensor_info info = {.name = "w", .dtype = RT_F32, .rank = 2, .dims = {2, 32}, .count = 64,
                           .store = RT_MXFP4};
    void *q = NULL;
    rt_err e = {0, ""};
    assert_int_equal(rt_load_weights(path, &info, 1, &q, &e), RT_EINVAL);
    assert_non_null(strstr(e.msg, "'w_scales': element 1 is 255 (NaN)"));
    ImpTensor u[1] = {{"w", "U8", 2, {2, 32}, b}};
    assert_int_equal(imp_st_write(path, u, 1, why, sizeof why), 0);
    e = (rt_err){0, ""};
    assert_int_equal(rt_load_weights(path, &info, 1, &q, &e), RT_EINVAL);
    assert_non_null(strstr(e.msg, "'w': U8, which kiln reads only as MXFP4 blocks ('w_blocks' "
                                  "with 'w_scales')"));
}

/* w [2, 2, 32] of four blocks (the rows above: 0, 1, 1, 0) split over 2
 * ranks by axis 0 (each rank a run of two: a view of the file) and by
 * axis 1 (a block of each run: copied), held as mxfp4 and as f32: rank
 * r's blocks and scales are its part's; by axis 2 a part would be half a
 * block, refused; a NaN scale is refused by the rank whose part holds it,
 * named by its place in the file's tensor. */
static void parts(void **state)
{
    (void)state;
    static const int row[4] = {0, 1, 1, 0};
    unsigned char b[4][16], sc[4];
    for (int i = 0; i < 4; i++) {
        memcpy(b[i], file_blocks[row[i]], 16);
        sc[i] = file_scales[row[i]];
    }
    ImpTensor t[2] = {{"w_blocks", "U8", 4, {2, 2, 1, 16}, b}, {"w_scales", "U8", 3, {2, 2, 1}, sc}};
    char why[256];
    const char *path = tl_tmp_path("parts.safetensors");
    assert_int_equal(imp_st_write(path, t, 2, why, sizeof why), 0);
    for (int axis = 0; axis < 3; axis++)
        for (int held = 0; held < 2; held++)
            for (int r = 0; r < 2; r++) {
                rt_tensor_info info = {.name = "w", .dtype = RT_F32, .rank = 3, .dims = {2, 2, 32},
                                       .count = 64, .store = held ? RT_F32 : RT_MXFP4,
                                       .shard_axis = axis};
                info.shard_of = info.dims[axis];
                info.dims[axis] /= 2;
                void *q = NULL;
                rt_err e = {0, ""};
                rt_ranks_set(&(rt_ranks){r, 2, NULL, NULL});
                int rc = rt_load_weights(path, &info, 1, &q, &e);
                rt_ranks_set(&(rt_ranks){0, 1, NULL, NULL});
                if (axis == 2) {
                    assert_int_equal(rc, RT_EINVAL);
                    assert_non_null(strstr(e.msg, "weight 'w': its parts of 16 values do not hold "
                                                  "whole blocks"));
                    continue;
                }
                assert_int_equal(rc, 0);
                for (int i = 0; i < 2; i++) {          /* the part's blocks: whole block j */
                    int j = axis == 0 ? 2 * r + i : 2 * i + r;
                    if (!held)
                        assert_memory_equal((unsigned char *)q + i * 17, kiln_blocks[row[j]], 17);
                    for (int k = 0; k < 32; k++)
                        assert_true((held ? ((float *)q)[i * 32 + k] : rt_mxfp4_at(q, i * 32 + k)) ==
                                    want(row[j], k));
                }
                rt_free(q);
            }
    sc[3] = 255;                    /* a NaN scale: refused by the rank that reads it */
    assert_int_equal(imp_st_write(path, t, 2, why, sizeof why), 0);
    for (int r = 0; r < 2; r++) {
        rt_tensor_info info = {.name = "w", .dtype = RT_F32, .rank = 3, .dims = {2, 1, 32},
                               .count = 64, .store = RT_MXFP4, .shard_axis = 1, .shard_of = 2};
        void *q = NULL;
        rt_err e = {0, ""};
        rt_ranks_set(&(rt_ranks){r, 2, NULL, NULL});
        int rc = rt_load_weights(path, &info, 1, &q, &e);
        rt_ranks_set(&(rt_ranks){0, 1, NULL, NULL});
        assert_int_equal(rc, r ? RT_EINVAL : 0);
        assert_true(r ? strstr(e.msg, "'w_scales': element 3 is 255 (NaN)") != NULL : q != NULL);
        rt_free(q);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(repacked),
        cmocka_unit_test(bad_files),
        cmocka_unit_test(nan_and_u8),
        cmocka_unit_test(parts),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
