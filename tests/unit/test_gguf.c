/* tests/unit/test_gguf.c: the GGUF reader (runtime/core/rt_gguf.c) and the
 * test tools' writer (tests/import/gguf_write.c).
 *   - a file written byte by byte here from the specification is read
 *     right: header, KVs, the tensor's shape (ne reversed), place and data;
 *   - the writer's files read back: every KV type, arrays of each, every
 *     accessor's conversions and refusals; tensors of every type kiln
 *     holds, of ranks 1 to 4, at the offsets worked out by hand for the
 *     default alignment 32 and for 64; GGUF version 2 alike;
 *   - each way of being bad is refused with its message, word for word:
 *     the hand-written file cut at every field and with fields patched,
 *     and writer-made files (duplicates, alignments, bools, names, shapes,
 *     GGML types kiln does not hold, rows across blocks, offsets, overlaps).
 * Then the weights loader on a GGUF: held as stored, widened, requantized,
 * packed, and refused without a way to widen blocks.
 * With KILN_GGUF_SEEDS=DIR the files read back are also written into DIR
 * (tests/fuzz/seeds.sh makes the fuzzer's seeds so). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/kiln_rt.h"
#include "runtime/rt_gguf.h"
#include "runtime/rt_quant.h"
#include "tests/import/gguf_write.h"
#include "tests/unit/testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX 65535           /* bytes of a key (the specification) */

/* ---- helpers ------------------------------------------------------------ */

/* Opens path, which must be accepted. */
static void open_ok(rt_gguf *g, const char *path)
{
    rt_err e = {0, ""};
    int rc = rt_gguf_open(g, path, &e);
    if (rc)
        fail_msg("refused: %s", e.msg);
}

/* path must be refused with status code and exactly "PATH: want",
 * leaving nothing in g. */
static void refused(const char *path, int code, const char *want)
{
    rt_gguf g;
    rt_err e = {0, ""};
    char full[1024];
    snprintf(full, sizeof full, "%s: %s", path, want);
    assert_int_equal(rt_gguf_open(&g, path, &e), code);
    assert_int_equal(e.code, code);
    assert_string_equal(e.msg, full);
    assert_null(g.map);
    assert_null(g.kv);
    assert_null(g.t);
    assert_null(g.strs);
}

/* The bytes b[0, n) as a file of that name; its path. */
static const char *put(const char *name, const void *b, size_t n)
{
    const char *p = tl_tmp_path(name);
    tl_put_file(p, b, n);
    return p;
}

/* w's file, which is freed, under name; its path. */
static const char *put_w(const char *name, GgufWriter *w)
{
    const char *p = tl_tmp_path(name);
    assert_int_equal(gw_write(w, p), 0);
    gw_free(w);
    return p;
}

/* w's file refused with want (w is freed). */
static void refused_w(GgufWriter *w, const char *want)
{
    refused(put_w("bad.gguf", w), RT_EINVAL, want);
}

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> 8 * i);
}

/* With KILN_GGUF_SEEDS set, a copy of the file at path there as name. */
static void seed(const char *path, const char *name)
{
    const char *dir = getenv("KILN_GGUF_SEEDS");
    if (!dir)
        return;
    size_t n;
    char *b = tl_get_file(path, &n), out[512];
    snprintf(out, sizeof out, "%s/%s", dir, name);
    tl_put_file(out, b, n);
    free(b);
}

/* ---- a file written by hand ----------------------------------------------- */

/* GGUF version 3, every field at the byte its comment gives: the header
 * (magic, u32 version, u64 tensor count, u64 KV count), three KVs (u64
 * key length, key, u32 type, value), one tensor info (u64 name length,
 * name, u32 n_dims, u64 ne[] innermost first, u32 GGML type, u64 offset in
 * the data section), zeros to the next multiple of 32 (no
 * general.alignment: the default), then the data. Little-endian. */
static const unsigned char hand[248] = {
    /*   0 magic */ 'G', 'G', 'U', 'F',
    /*   4 version 3 */ 3, 0, 0, 0,
    /*   8 tensor count 1 */ 1, 0, 0, 0, 0, 0, 0, 0,
    /*  16 KV count 3 */ 3, 0, 0, 0, 0, 0, 0, 0,
    /*  24 KV 0: key length 20 */ 20, 0, 0, 0, 0, 0, 0, 0,
    /*  32 */ 'g', 'e', 'n', 'e', 'r', 'a', 'l', '.', 'a', 'r', 'c', 'h', 'i', 't', 'e', 'c',
              't', 'u', 'r', 'e',
    /*  52 type 8: string */ 8, 0, 0, 0,
    /*  56 its length 5 */ 5, 0, 0, 0, 0, 0, 0, 0,
    /*  64 */ 'l', 'l', 'a', 'm', 'a',
    /*  69 KV 1: key length 17 */ 17, 0, 0, 0, 0, 0, 0, 0,
    /*  77 */ 'l', 'l', 'a', 'm', 'a', '.', 'b', 'l', 'o', 'c', 'k', '_', 'c', 'o', 'u', 'n',
              't',
    /*  94 type 4: u32 */ 4, 0, 0, 0,
    /*  98 value 2 */ 2, 0, 0, 0,
    /* 102 KV 2: key length 21 */ 21, 0, 0, 0, 0, 0, 0, 0,
    /* 110 */ 't', 'o', 'k', 'e', 'n', 'i', 'z', 'e', 'r', '.', 'g', 'g', 'm', 'l', '.', 's',
              'c', 'o', 'r', 'e', 's',
    /* 131 type 9: array */ 9, 0, 0, 0,
    /* 135 element type 6: f32 */ 6, 0, 0, 0,
    /* 139 count 2 */ 2, 0, 0, 0, 0, 0, 0, 0,
    /* 147 0.5f = 0x3f000000, -1.0f = 0xbf800000 */ 0, 0, 0, 0x3f, 0, 0, 0x80, 0xbf,
    /* 155 tensor 0: name length 1 */ 1, 0, 0, 0, 0, 0, 0, 0,
    /* 163 */ 'w',
    /* 164 n_dims 2 */ 2, 0, 0, 0,
    /* 168 ne[0] 3: a row of 3 values, the innermost dim */ 3, 0, 0, 0, 0, 0, 0, 0,
    /* 176 ne[1] 2: two rows */ 2, 0, 0, 0, 0, 0, 0, 0,
    /* 184 GGML type 0: F32 */ 0, 0, 0, 0,
    /* 188 offset 0 */ 0, 0, 0, 0, 0, 0, 0, 0,
    /* 196 zeros to 224, the first multiple of 32 at or after 196 */
    [224] =
    /* 224 the data: 1.0f .. 6.0f = 0x3f800000, 0x40000000, 0x40400000, 0x40800000,
     * 0x40a00000, 0x40c00000, in row-major order of [2, 3] */
    0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40, 0, 0, 0xa0, 0x40,
    0, 0, 0xc0, 0x40,
    /* 248: the end */
};

static void test_by_hand(void **state)
{
    (void)state;
    const char *p = put("hand.gguf", hand, sizeof hand);
    seed(p, "hand.gguf");
    rt_gguf g;
    open_ok(&g, p);
    assert_int_equal(g.version, 3);
    assert_int_equal(g.alignment, 32);
    assert_int_equal(g.data_start, 224);
    assert_int_equal(g.nkv, 3);
    assert_int_equal(g.nt, 1);

    const rt_gguf_kv *kv = &g.kv[0];
    size_t len;
    assert_string_equal(kv->key, "general.architecture");
    assert_int_equal(kv->type, RT_GGUF_STR);
    assert_string_equal(rt_gguf_str(kv, &len), "llama");
    assert_int_equal(len, 5);
    uint64_t u;
    assert_ptr_equal(rt_gguf_find_key(&g, "llama.block_count"), &g.kv[1]);
    assert_int_equal(rt_gguf_u64(&g.kv[1], &u), 0);
    assert_int_equal(u, 2);
    kv = rt_gguf_find_key(&g, "tokenizer.ggml.scores");
    assert_ptr_equal(kv, &g.kv[2]);
    assert_int_equal(kv->type, RT_GGUF_ARR);
    assert_int_equal(kv->etype, RT_GGUF_F32);
    assert_int_equal(kv->n, 2);
    double d;
    assert_int_equal(rt_gguf_arr_f64(kv, 0, &d), 0);
    assert_true(d == 0.5);
    assert_int_equal(rt_gguf_arr_f64(kv, 1, &d), 0);
    assert_true(d == -1.0);
    assert_null(rt_gguf_find_key(&g, "general.name"));

    const rt_gguf_tensor *t = rt_gguf_find_tensor(&g, "w");
    assert_ptr_equal(t, &g.t[0]);
    assert_string_equal(t->name, "w");
    assert_int_equal(t->type, 0);
    assert_int_equal(t->store, RT_F32);
    assert_int_equal(t->rank, 2);
    assert_int_equal(t->dims[0], 2);    /* ne[1]: outermost first */
    assert_int_equal(t->dims[1], 3);    /* ne[0], the row */
    assert_int_equal(t->count, 6);
    assert_int_equal(t->offset, 0);
    assert_int_equal(t->nbytes, 24);
    assert_ptr_equal(t->data, (const unsigned char *)g.map + 224);
    float f[6];
    memcpy(f, t->data, sizeof f);
    for (int i = 0; i < 6; i++)
        assert_true(f[i] == (float)(i + 1));
    assert_null(rt_gguf_find_tensor(&g, "v"));
    rt_gguf_close(&g);
    assert_null(g.map);
}

/* The hand-written file cut after n bytes: each field in turn runs past
 * the end (the counts first: too many for the bytes left). */
static void test_truncated(void **state)
{
    (void)state;
    static const struct {
        size_t n;
        const char *want;
    } cut[] = {
        {0, "at byte 0: not a GGUF file: 0 bytes, too few for the magic"},
        {2, "at byte 0: not a GGUF file: 2 bytes, too few for the magic"},
        {7, "at byte 4: the version runs past the end of the file (7 bytes)"},
        {12, "at byte 8: the tensor count runs past the end of the file (12 bytes)"},
        {20, "at byte 16: the KV count runs past the end of the file (20 bytes)"},
        /* 4 bytes left hold no tensor info (33 bytes at least) */
        {28, "at byte 8: tensor count 1 does not fit in the 4 bytes left (a tensor info takes "
             "33 or more)"},
        /* 36 left: one info, but not three KVs (14 bytes each at least) */
        {60, "at byte 16: KV count 3 does not fit in the 36 bytes left (a KV takes 14 or more)"},
        {30, "at byte 8: tensor count 1 does not fit in the 6 bytes left (a tensor info takes "
             "33 or more)"},
        {66, "at byte 56: key 'general.architecture': its value of 5 bytes runs past the end "
             "of the file (66 bytes)"},
        {75, "at byte 69: KV 1: its key runs past the end of the file (75 bytes)"},
        {90, "at byte 69: KV 1: its key of 17 bytes runs past the end of the file (90 bytes)"},
        {96, "at byte 94: key 'llama.block_count': its type runs past the end of the file "
             "(96 bytes)"},
        {100, "at byte 98: key 'llama.block_count': its value runs past the end of the file "
              "(100 bytes)"},
        {133, "at byte 131: key 'tokenizer.ggml.scores': its type runs past the end of the file "
              "(133 bytes)"},
        {137, "at byte 135: key 'tokenizer.ggml.scores': its element type runs past the end of "
              "the file (137 bytes)"},
        {145, "at byte 139: key 'tokenizer.ggml.scores': its count runs past the end of the "
              "file (145 bytes)"},
        {150, "at byte 139: key 'tokenizer.ggml.scores': count 2 of f32 elements does not fit "
              "in the 3 bytes left"},
        {160, "at byte 155: tensor 0: its name runs past the end of the file (160 bytes)"},
        {166, "at byte 164: tensor 'w': its n_dims runs past the end of the file (166 bytes)"},
        {172, "at byte 168: tensor 'w': its ne[0] runs past the end of the file (172 bytes)"},
        {180, "at byte 176: tensor 'w': its ne[1] runs past the end of the file (180 bytes)"},
        {186, "at byte 184: tensor 'w': its type runs past the end of the file (186 bytes)"},
        {190, "at byte 188: tensor 'w': its offset runs past the end of the file (190 bytes)"},
        {200, "tensor 'w': 24 bytes at offset 0 run past the data section (0 bytes from byte "
              "224)"},
        {230, "tensor 'w': 24 bytes at offset 0 run past the data section (6 bytes from byte "
              "224)"},
        {247, "tensor 'w': 24 bytes at offset 0 run past the data section (23 bytes from byte "
              "224)"},
    };
    for (size_t i = 0; i < sizeof cut / sizeof *cut; i++)
        refused(put("cut.gguf", hand, cut[i].n), RT_EINVAL, cut[i].want);
}

/* The hand-written file with bytes [at, at + n) replaced by v. */
static void test_patched(void **state)
{
    (void)state;
    static const struct {
        int at, n;
        uint64_t v;
        const char *want;
    } patch[] = {
        {0, 4, 0x4c4d4747, "at byte 0: not a GGUF file: it begins 'GGML', not 'GGUF'"},
        {0, 4, 0x0a0d00ff, "at byte 0: not a GGUF file: it begins '\\xff\\x00\\x0d\\x0a', not "
                           "'GGUF'"},
        {4, 4, 1, "at byte 4: GGUF version 1 is not supported (kiln reads versions 2 and 3): "
                  "convert the model again with a current llama.cpp"},
        {4, 4, 4, "at byte 4: GGUF version 4 is not supported (kiln reads versions 2 and 3)"},
        {4, 4, 0, "at byte 4: GGUF version 0 is not supported (kiln reads versions 2 and 3)"},
        /* bytes 00 00 00 03: version 3 written big-endian */
        {4, 4, 0x03000000, "at byte 4: a big-endian GGUF file (version 3 byte-swapped): kiln "
                           "reads little-endian files"},
        {8, 8, UINT64_C(1) << 40, "at byte 8: tensor count 1099511627776 does not fit in the "
                                  "224 bytes left (a tensor info takes 33 or more)"},
        {16, 8, UINT64_MAX, "at byte 16: KV count 18446744073709551615 does not fit in the 224 "
                            "bytes left (a KV takes 14 or more)"},
        {24, 8, UINT64_C(1) << 63, "at byte 24: KV 0: its key of 9223372036854775808 bytes runs "
                                   "past the end of the file (248 bytes)"},
        {24, 8, 0, "at byte 24: KV 0: its key is empty"},
        {32, 1, 0xc3, "at byte 32: KV 0: its key is not valid UTF-8"},
        {33, 1, 0, "at byte 24: KV 0: its key holds a NUL byte"},
        {52, 4, 13, "at byte 52: key 'general.architecture': type 13 is not a GGUF value type "
                    "(0 to 12)"},
        /* a string that runs past the file */
        {56, 8, 1000, "at byte 56: key 'general.architecture': its value of 1000 bytes runs "
                      "past the end of the file (248 bytes)"},
        {135, 4, 9, "at byte 135: key 'tokenizer.ggml.scores': an array of arrays (kiln, as "
                    "llama.cpp, reads arrays of numbers, bools and strings)"},
        {135, 4, 0x10000, "at byte 135: key 'tokenizer.ggml.scores': element type 65536 is not "
                          "a GGUF value type (0 to 12)"},
        {139, 8, UINT64_C(1) << 61, "at byte 139: key 'tokenizer.ggml.scores': count "
                                    "2305843009213693952 of f32 elements does not fit in the "
                                    "101 bytes left"},
        {155, 8, 100, "at byte 155: tensor 0: its name of 100 bytes runs past the end of the "
                      "file (248 bytes)"},
        {163, 1, 0xff, "at byte 163: tensor 0: its name is not valid UTF-8"},
        {163, 1, 0, "at byte 155: tensor 0: its name holds a NUL byte"},
        {164, 4, 0, "tensor 'w': n_dims is 0, GGUF allows 1 to 4"},
        {164, 4, 5, "tensor 'w': n_dims is 5, GGUF allows 1 to 4"},
        {168, 8, 0, "tensor 'w': ne[0] is 0: every dim must be at least 1"},
        {176, 8, UINT64_C(1) << 60, "tensor 'w': ne[0..1] hold 2^60 elements or more"},
        {176, 8, UINT64_MAX, "tensor 'w': ne[0..1] hold 2^60 elements or more"},
        {184, 4, 6, "tensor 'w': GGML type Q5_0 is not supported (kiln holds F32, F16, BF16, "
                    "Q8_0, Q4_0, Q4_K, Q6_K and MXFP4: requantize the model with llama-quantize to "
                    "Q8_0 or Q4_K_M)"},
        {184, 4, 99, "tensor 'w': GGML type 99 is unknown (kiln holds F32, F16, BF16, Q8_0, "
                     "Q4_0, Q4_K, Q6_K and MXFP4: requantize the model with llama-quantize to Q8_0 or "
                     "Q4_K_M)"},
        {184, 4, 0xffffffff, "tensor 'w': GGML type 4294967295 is unknown (kiln holds F32, F16, "
                             "BF16, Q8_0, Q4_0, Q4_K, Q6_K and MXFP4: requantize the model with "
                             "llama-quantize to Q8_0 or Q4_K_M)"},
        /* F16 makes 12 bytes of [2, 3]: fine; Q8_0 wants rows of 32 */
        {184, 4, 8, "tensor 'w': rows of 3 values (ne[0]) are not a multiple of Q8_0's block "
                    "of 32"},
        {188, 8, 8, "tensor 'w': offset 8 is not a multiple of the alignment 32"},
        {188, 8, 32, "tensor 'w': 24 bytes at offset 32 run past the data section (24 bytes "
                     "from byte 224)"},
        {188, 8, UINT64_MAX - 31, "tensor 'w': 24 bytes at offset 18446744073709551584 run past "
                                  "the data section (24 bytes from byte 224)"},
    };
    for (size_t i = 0; i < sizeof patch / sizeof *patch; i++) {
        unsigned char b[sizeof hand];
        memcpy(b, hand, sizeof b);
        put_le(b + patch[i].at, patch[i].v, patch[i].n);
        refused(put("patched.gguf", b, sizeof b), RT_EINVAL, patch[i].want);
    }
    /* F16 instead: [2, 3] takes 12 of the 24 bytes, which is fine */
    unsigned char b[sizeof hand];
    memcpy(b, hand, sizeof b);
    b[184] = 1;
    rt_gguf g;
    open_ok(&g, put("f16.gguf", b, sizeof b));
    assert_int_equal(g.t[0].store, RT_F16);
    assert_int_equal(g.t[0].nbytes, 12);
    rt_gguf_close(&g);
}

/* ---- the writer's files read back ---------------------------------------- */

/* Each type kiln holds, with its bytes worked out from the block sizes:
 * F32 4 a value, F16 and BF16 2, Q8_0 34 per 32, Q4_0 18 per 32, Q4_K 144
 * per 256, Q6_K 210 per 256; and a 1-D and a 4-D tensor. */
static const struct {
    const char *name;
    int type, store, rank;
    int64_t dims[4];
    size_t nbytes;
    uint64_t off32, off64;      /* offsets at alignment 32 and 64 */
} kinds[] = {
    /* each at the first multiple of the alignment after the one before:
     * 32: 0+24 -> 32, +16 -> 64, +12 -> 96, +68 = 164 -> 192, +36 = 228
     * -> 256, +288 = 544, +210 = 754 -> 768, +32 = 800, +96 = 896;
     * 64: 0+24 -> 64, +16 -> 128, +12 -> 192, +68 = 260 -> 320, +36 = 356
     * -> 384, +288 = 672 -> 704, +210 = 914 -> 960, +32 = 992 -> 1024,
     * +96 = 1120 -> 1152 */
    {"f32", GW_T_F32, RT_F32, 2, {2, 3}, 24, 0, 0},
    {"f16", GW_T_F16, RT_F16, 2, {2, 4}, 16, 32, 64},
    {"bf16", GW_T_BF16, RT_BF16, 2, {3, 2}, 12, 64, 128},
    {"q8_0", GW_T_Q8_0, RT_Q8_0, 2, {2, 32}, 68, 96, 192},
    {"q4_0", GW_T_Q4_0, RT_Q4_0, 2, {1, 64}, 36, 192, 320},
    {"q4_k", GW_T_Q4_K, RT_Q4_K, 2, {2, 256}, 288, 256, 384},
    {"q6_k", GW_T_Q6_K, RT_Q6_K, 2, {1, 256}, 210, 544, 704},
    {"norm", GW_T_F32, RT_F32, 1, {8}, 32, 768, 960},
    {"cube", GW_T_F16, RT_F16, 4, {2, 1, 3, 8}, 96, 800, 1024},
};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

/* Byte j of tensor i's data. */
static unsigned char pattern(int i, size_t j)
{
    return (unsigned char)(j * 7 + (size_t)i * 31 + 1);
}

static const char *const tokens[] = {"<unk>", "<s>", "</s>", "", "\xe2\x96\x81the", "<0x0A>"};

/* Every KV type, an array of each, then the tensors of kinds. */
static GgufWriter *every_kind(uint32_t version, uint32_t alignment)
{
    GgufWriter *w = gw_new(version);
    gw_str(w, "general.architecture", "llama");
    if (alignment)
        gw_u32(w, "general.alignment", alignment);
    gw_u8(w, "t.u8", 200);
    gw_i8(w, "t.i8", -128);
    gw_u16(w, "t.u16", 65535);
    gw_i16(w, "t.i16", -300);
    gw_u32(w, "t.u32", 4000000000u);
    gw_i32(w, "t.i32", -2000000000);
    gw_f32(w, "t.f32", 1e-5f);
    gw_bool(w, "t.bool", 1);
    gw_strn(w, "t.str", "a\0b", 3);
    gw_u64(w, "t.u64", UINT64_MAX);
    gw_i64(w, "t.i64", INT64_MIN);
    gw_f64(w, "t.f64", -0.125);
    const uint8_t u8[] = {0, 255};
    const int8_t i8[] = {-1, 127};
    const uint16_t u16[] = {1, 65535};
    const int16_t i16[] = {-32768, 7};
    const uint32_t u32[] = {0, 4294967295u};
    const int32_t i32[] = {-5, 2147483647};
    const float f32[] = {0.5f, -2.0f, 3.25f};
    const uint8_t bools[] = {1, 0, 1};
    const uint64_t u64[] = {UINT64_C(1) << 63};
    const int64_t i64[] = {-3, INT64_MAX};
    const double f64[] = {1e300, -1.5};
    gw_arr(w, "a.u8", GW_U8, 2, u8);
    gw_arr(w, "a.i8", GW_I8, 2, i8);
    gw_arr(w, "a.u16", GW_U16, 2, u16);
    gw_arr(w, "a.i16", GW_I16, 2, i16);
    gw_arr(w, "a.u32", GW_U32, 2, u32);
    gw_arr(w, "a.i32", GW_I32, 2, i32);
    gw_arr(w, "a.f32", GW_F32, 3, f32);
    gw_arr(w, "a.bool", GW_BOOL, 3, bools);
    gw_arr_str(w, "a.str", 6, tokens);
    gw_arr(w, "a.u64", GW_U64, 1, u64);
    gw_arr(w, "a.i64", GW_I64, 2, i64);
    gw_arr(w, "a.f64", GW_F64, 2, f64);
    gw_arr(w, "a.empty", GW_U32, 0, u32);
    gw_arr_str(w, "a.nostr", 0, tokens);
    for (int i = 0; i < NKINDS; i++) {
        unsigned char *b = malloc(kinds[i].nbytes);
        assert_non_null(b);
        for (size_t j = 0; j < kinds[i].nbytes; j++)
            b[j] = pattern(i, j);
        gw_tensor(w, kinds[i].name, kinds[i].type, kinds[i].rank, kinds[i].dims, b,
                  kinds[i].nbytes);
        free(b);
    }
    return w;
}

static const rt_gguf_kv *kv_of(const rt_gguf *g, const char *key)
{
    const rt_gguf_kv *kv = rt_gguf_find_key(g, key);
    assert_non_null(kv);
    assert_string_equal(kv->key, key);
    return kv;
}

static void check_scalars(const rt_gguf *g)
{
    uint64_t u;
    int64_t s;
    double d;
    int b;
    size_t len;
    const rt_gguf_kv *kv;
    assert_int_equal(rt_gguf_u64((kv = kv_of(g, "t.u8")), &u), 0);
    assert_int_equal(u, 200);
    assert_int_equal(kv->type, RT_GGUF_U8);
    assert_int_equal(rt_gguf_i64((kv = kv_of(g, "t.i8")), &s), 0);
    assert_int_equal(s, -128);
    assert_int_equal(rt_gguf_u64(kv, &u), -1);          /* negative */
    assert_int_equal(rt_gguf_u64((kv = kv_of(g, "t.u16")), &u), 0);
    assert_int_equal(u, 65535);
    assert_int_equal(rt_gguf_i64((kv = kv_of(g, "t.i16")), &s), 0);
    assert_int_equal(s, -300);
    assert_int_equal(rt_gguf_i64((kv = kv_of(g, "t.u32")), &s), 0);  /* fits */
    assert_int_equal(s, 4000000000);
    assert_int_equal(rt_gguf_i64((kv = kv_of(g, "t.i32")), &s), 0);
    assert_int_equal(s, -2000000000);
    assert_int_equal(rt_gguf_f64((kv = kv_of(g, "t.f32")), &d), 0);
    assert_true(d == (double)1e-5f);
    assert_int_equal(rt_gguf_u64(kv, &u), -1);          /* a float is no integer */
    assert_int_equal(rt_gguf_bool((kv = kv_of(g, "t.bool")), &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(rt_gguf_u64(kv, &u), -1);
    assert_non_null(rt_gguf_str((kv = kv_of(g, "t.str")), &len));
    assert_int_equal(len, 3);
    assert_memory_equal(rt_gguf_str(kv, NULL), "a\0b", 4);
    assert_int_equal(rt_gguf_u64((kv = kv_of(g, "t.u64")), &u), 0);
    assert_true(u == UINT64_MAX);
    assert_int_equal(rt_gguf_i64(kv, &s), -1);          /* does not fit */
    assert_int_equal(rt_gguf_i64((kv = kv_of(g, "t.i64")), &s), 0);
    assert_true(s == INT64_MIN);
    assert_int_equal(rt_gguf_f64((kv = kv_of(g, "t.f64")), &d), 0);
    assert_true(d == -0.125);
    assert_int_equal(rt_gguf_i64(kv, &s), -1);
    assert_null(rt_gguf_str(kv, &len));
    assert_int_equal(rt_gguf_bool(kv, &b), -1);
    assert_int_equal(rt_gguf_u64(NULL, &u), -1);        /* no such key */
    assert_null(rt_gguf_str(NULL, &len));
    assert_int_equal(rt_gguf_arr_u64((kv = kv_of(g, "t.u8")), 0, &u), -1);  /* not an array */
}

static void check_arrays(const rt_gguf *g)
{
    uint64_t u;
    int64_t s;
    double d;
    int b;
    size_t len;
    const rt_gguf_kv *kv;
    assert_int_equal(rt_gguf_arr_u64((kv = kv_of(g, "a.u8")), 1, &u), 0);
    assert_int_equal(u, 255);
    assert_int_equal(kv->n, 2);
    assert_int_equal(kv->type, RT_GGUF_ARR);
    assert_int_equal(kv->etype, RT_GGUF_U8);
    assert_int_equal(rt_gguf_arr_u64(kv, 2, &u), -1);   /* past the end */
    assert_int_equal(rt_gguf_u64(kv, &u), -1);          /* not a scalar */
    assert_int_equal(rt_gguf_arr_i64((kv = kv_of(g, "a.i8")), 0, &s), 0);
    assert_int_equal(s, -1);
    assert_int_equal(rt_gguf_arr_u64((kv = kv_of(g, "a.u16")), 1, &u), 0);
    assert_int_equal(u, 65535);
    assert_int_equal(rt_gguf_arr_i64((kv = kv_of(g, "a.i16")), 0, &s), 0);
    assert_int_equal(s, -32768);
    assert_int_equal(rt_gguf_arr_u64((kv = kv_of(g, "a.u32")), 1, &u), 0);
    assert_int_equal(u, 4294967295u);
    assert_int_equal(rt_gguf_arr_i64((kv = kv_of(g, "a.i32")), 1, &s), 0);
    assert_int_equal(s, 2147483647);
    assert_int_equal(rt_gguf_arr_u64(kv, 0, &u), -1);   /* -5 */
    kv = kv_of(g, "a.f32");
    for (int i = 0; i < 3; i++)
        assert_int_equal(rt_gguf_arr_f64(kv, (uint64_t)i, &d), 0);
    assert_true(d == 3.25);
    assert_int_equal(rt_gguf_arr_bool((kv = kv_of(g, "a.bool")), 1, &b), 0);
    assert_int_equal(b, 0);
    assert_int_equal(rt_gguf_arr_bool(kv, 2, &b), 0);
    assert_int_equal(b, 1);
    kv = kv_of(g, "a.str");
    assert_int_equal(kv->n, 6);
    for (int i = 0; i < 6; i++) {
        assert_string_equal(rt_gguf_arr_str(kv, (uint64_t)i, &len), tokens[i]);
        assert_int_equal(len, strlen(tokens[i]));
    }
    assert_null(rt_gguf_arr_str(kv, 6, &len));
    assert_null(rt_gguf_str(kv, &len));
    assert_int_equal(rt_gguf_arr_u64((kv = kv_of(g, "a.u64")), 0, &u), 0);
    assert_true(u == UINT64_C(1) << 63);
    assert_int_equal(rt_gguf_arr_i64(kv, 0, &s), -1);
    assert_int_equal(rt_gguf_arr_i64((kv = kv_of(g, "a.i64")), 1, &s), 0);
    assert_true(s == INT64_MAX);
    assert_int_equal(rt_gguf_arr_f64((kv = kv_of(g, "a.f64")), 0, &d), 0);
    assert_true(d == 1e300);
    kv = kv_of(g, "a.empty");
    assert_int_equal(kv->n, 0);
    assert_int_equal(rt_gguf_arr_u64(kv, 0, &u), -1);
    kv = kv_of(g, "a.nostr");
    assert_int_equal(kv->n, 0);
    assert_null(rt_gguf_arr_str(kv, 0, &len));
}

static void check_tensors(const rt_gguf *g, uint32_t alignment)
{
    assert_int_equal(g->nt, NKINDS);
    assert_int_equal(g->data_start % alignment, 0);
    for (int i = 0; i < NKINDS; i++) {
        const rt_gguf_tensor *t = rt_gguf_find_tensor(g, kinds[i].name);
        assert_ptr_equal(t, &g->t[i]);
        assert_int_equal(t->type, kinds[i].type);
        assert_int_equal(t->store, kinds[i].store);
        assert_int_equal(t->rank, kinds[i].rank);
        int64_t count = 1;
        for (int j = 0; j < t->rank; j++) {
            assert_int_equal(t->dims[j], kinds[i].dims[j]);
            count *= t->dims[j];
        }
        assert_int_equal(t->count, count);
        assert_int_equal(t->nbytes, kinds[i].nbytes);
        assert_int_equal(t->offset, alignment == 64 ? kinds[i].off64 : kinds[i].off32);
        assert_ptr_equal(t->data, (const unsigned char *)g->map + g->data_start + t->offset);
        assert_int_equal((uintptr_t)t->data % alignment, 0);
        for (size_t j = 0; j < t->nbytes; j++)
            assert_int_equal(t->data[j], pattern(i, j));
    }
}

static void test_round_trip(void **state)
{
    (void)state;
    static const struct {
        uint32_t version, alignment;
        const char *name;
    } files[] = {{3, 0, "every-v3.gguf"}, {2, 0, "every-v2.gguf"}, {3, 64, "align64.gguf"}};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        const char *p = put_w(files[f].name, every_kind(files[f].version, files[f].alignment));
        seed(p, files[f].name);
        rt_gguf g;
        open_ok(&g, p);
        uint32_t a = files[f].alignment ? files[f].alignment : 32;
        assert_int_equal(g.version, files[f].version);
        assert_int_equal(g.alignment, a);
        assert_int_equal(g.nkv, files[f].alignment ? 28 : 27);
        assert_string_equal(g.kv[0].key, "general.architecture");
        check_scalars(&g);
        check_arrays(&g);
        check_tensors(&g, a);
        /* the file ends where the last tensor's padding does */
        assert_int_equal(g.size, g.data_start + (a == 64 ? 1152 : 896));
        rt_gguf_close(&g);
    }
}

/* Metadata only, tensors only, nothing at all; alignments 1 and 4096. */
static void test_small_files(void **state)
{
    (void)state;
    rt_gguf g;
    GgufWriter *w = gw_new(3);
    open_ok(&g, put_w("empty.gguf", w));
    assert_int_equal(g.nkv + g.nt, 0);
    assert_int_equal(g.size, 32);       /* the header, padded to the alignment */
    assert_null(rt_gguf_find_key(&g, "x"));
    assert_null(rt_gguf_find_tensor(&g, "x"));
    rt_gguf_close(&g);

    int64_t d[] = {3};
    for (uint32_t a = 1; a <= 4096; a *= 4096) {
        w = gw_new(3);
        gw_u32(w, "general.alignment", a);
        gw_tensor(w, "a", GW_T_F16, 1, d, NULL, 6);
        gw_tensor(w, "b", GW_T_F16, 1, d, NULL, 6);
        open_ok(&g, put_w("align.gguf", w));
        assert_int_equal(g.alignment, a);
        assert_int_equal(g.data_start % a, 0);
        assert_int_equal(g.t[1].offset, a == 1 ? 6 : 4096);
        rt_gguf_close(&g);
    }
    /* gaps between tensors, and offsets out of the infos' order, are fine:
     * "room" holds 4 bytes and makes a data section of 256 */
    w = gw_new(3);
    gw_tensor(w, "room", GW_T_F32, 1, (int64_t[]){1}, NULL, 256);
    gw_tensor_at(w, "late", GW_T_F32, 1, d, NULL, 12, 128);
    gw_tensor_at(w, "early", GW_T_F32, 1, d, NULL, 12, 64);
    open_ok(&g, put_w("gaps.gguf", w));
    assert_int_equal(g.t[1].offset, 128);
    assert_int_equal(g.t[2].offset, 64);
    assert_ptr_equal(rt_gguf_find_tensor(&g, "early"), &g.t[2]);
    rt_gguf_close(&g);
}

/* ---- bad files ------------------------------------------------------------ */

static void test_bad_metadata(void **state)
{
    (void)state;
    GgufWriter *w = gw_new(3);
    gw_u32(w, "a", 1);
    gw_str(w, "b", "x");
    gw_u8(w, "a", 2);
    refused_w(w, "key 'a' given twice");

    w = gw_new(3);
    gw_i32(w, "general.alignment", 64);
    refused_w(w, "key 'general.alignment': of type i32, GGUF wants u32");
    w = gw_new(3);
    gw_arr(w, "general.alignment", GW_U32, 1, (uint32_t[]){32});
    refused_w(w, "key 'general.alignment': of type array of u32, GGUF wants u32");
    w = gw_new(3);
    gw_u32(w, "general.alignment", 48);
    refused_w(w, "key 'general.alignment': 48 is not a power of two");
    w = gw_new(3);
    gw_u32(w, "general.alignment", 0);
    refused_w(w, "key 'general.alignment': 0 is not a power of two");

    /* a bool is one byte, 0 or 1; the value is at 24 + 8 + 1 + 4 = 37 */
    w = gw_new(3);
    gw_kv_raw(w, "b", GW_BOOL, "\x02", 1);
    refused_w(w, "at byte 37: key 'b': a bool of value 2, not 0 or 1");
    /* element type, count 3, then 1 0 7: element 2 at 37 + 4 + 8 + 2 = 51 */
    w = gw_new(3);
    gw_kv_raw(w, "b", GW_ARR, "\x07\0\0\0\x03\0\0\0\0\0\0\0\x01\x00\x07", 15);
    refused_w(w, "at byte 51: key 'b': element 2: a bool of value 7, not 0 or 1");
    /* strings of an array: count 2, then lengths 1 and 2^40 (the file,
     * 66 bytes, padded to 96) */
    w = gw_new(3);
    gw_kv_raw(w, "s", GW_ARR, "\x08\0\0\0\x02\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0x"
              "\0\0\0\0\0\x01\0\0", 29);
    refused_w(w, "at byte 58: key 's': element 1: the string of 1099511627776 bytes runs past "
              "the end of the file (96 bytes)");
    /* a count of strings the bytes left cannot hold at 8 bytes each: the
     * file is 57 bytes padded to 64, the count ends at 49 */
    w = gw_new(3);
    gw_kv_raw(w, "s", GW_ARR, "\x08\0\0\0\x05\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 20);
    refused_w(w, "at byte 41: key 's': count 5 of string elements does not fit in the 15 bytes "
              "left");

    char big[KEY_MAX + 2];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = 0;
    w = gw_new(3);
    gw_u8(w, big, 1);
    refused_w(w, "at byte 24: KV 0: its key has 65536 bytes, more than GGUF's limit of 65535");
    big[KEY_MAX] = 0;
    w = gw_new(3);
    gw_u8(w, big, 1);
    rt_gguf g;
    open_ok(&g, put_w("bigkey.gguf", w));
    assert_int_equal(strlen(g.kv[0].key), KEY_MAX);
    rt_gguf_close(&g);
}

static void test_bad_tensors(void **state)
{
    (void)state;
    int64_t d[] = {2, 32};
    GgufWriter *w = gw_new(3);
    gw_tensor(w, "t", GW_T_F32, 2, d, NULL, 256);
    gw_tensor(w, "t", GW_T_F32, 2, d, NULL, 256);
    refused_w(w, "tensor 't': name given twice");

    /* 64 bytes of name: the limit; 65 is one too many */
    char name[66];
    memset(name, 'n', 65);
    name[65] = 0;
    w = gw_new(3);
    gw_tensor(w, name, GW_T_F32, 2, d, NULL, 256);
    refused_w(w, "at byte 24: tensor 0: its name has 65 bytes, more than GGUF's limit of 64");
    name[64] = 0;
    w = gw_new(3);
    gw_tensor(w, name, GW_T_F32, 2, d, NULL, 256);
    rt_gguf g;
    open_ok(&g, put_w("name64.gguf", w));
    rt_gguf_close(&g);
    w = gw_new(3);
    gw_tensor(w, "", GW_T_F32, 2, d, NULL, 256);
    refused_w(w, "at byte 24: tensor 0: its name is empty");

    w = gw_new(3);
    gw_tensor(w, "r5", GW_T_F32, 5, (int64_t[]){1, 1, 1, 2, 32}, NULL, 256);
    refused_w(w, "tensor 'r5': n_dims is 5, GGUF allows 1 to 4");
    w = gw_new(3);
    gw_tensor(w, "r0", GW_T_F32, 0, d, NULL, 4);
    refused_w(w, "tensor 'r0': n_dims is 0, GGUF allows 1 to 4");
    w = gw_new(3);
    gw_tensor(w, "big", GW_T_F32, 3, (int64_t[]){1 << 20, 1 << 20, 1 << 20}, NULL, 4);
    refused_w(w, "tensor 'big': ne[0..2] hold 2^60 elements or more");

    /* rows that do not fill whole blocks */
    w = gw_new(3);
    gw_tensor(w, "q", GW_T_Q4_K, 2, (int64_t[]){256, 100}, NULL, 144 * 100);
    refused_w(w, "tensor 'q': rows of 100 values (ne[0]) are not a multiple of Q4_K's block "
              "of 256");
    w = gw_new(3);
    gw_tensor(w, "q", GW_T_Q6_K, 1, (int64_t[]){512 + 32}, NULL, 420);
    refused_w(w, "tensor 'q': rows of 544 values (ne[0]) are not a multiple of Q6_K's block of "
              "256");
    w = gw_new(3);
    gw_tensor(w, "q", GW_T_Q4_0, 2, (int64_t[]){32, 48}, NULL, 18 * 48);
    refused_w(w, "tensor 'q': rows of 48 values (ne[0]) are not a multiple of Q4_0's block of "
              "32");

    /* places: misaligned, past the end, overlapping */
    w = gw_new(3);
    gw_tensor(w, "a", GW_T_F32, 2, d, NULL, 256);
    gw_tensor_at(w, "b", GW_T_F32, 1, (int64_t[]){4}, NULL, 16, 48);
    refused_w(w, "tensor 'b': offset 48 is not a multiple of the alignment 32");
    w = gw_new(3);
    gw_tensor(w, "a", GW_T_F32, 2, d, NULL, 256);
    gw_tensor_at(w, "b", GW_T_F32, 1, (int64_t[]){8}, NULL, 32, 256);
    refused_w(w, "tensor 'b': 32 bytes at offset 256 run past the data section (256 bytes from "
              "byte 128)");
    w = gw_new(3);
    gw_tensor(w, "a", GW_T_F32, 2, d, NULL, 256);
    gw_tensor_at(w, "b", GW_T_F32, 1, (int64_t[]){8}, NULL, 32, 224);
    gw_tensor_at(w, "c", GW_T_F32, 1, (int64_t[]){8}, NULL, 32, 32);
    refused_w(w, "tensor 'c': bytes [32, 64) of the data section overlap tensor 'a' (bytes "
              "[0, 256))");
    /* a tensor that says it is shorter than its shape makes it */
    w = gw_new(3);
    gw_tensor(w, "a", GW_T_F32, 2, d, NULL, 200);
    gw_tensor(w, "b", GW_T_F32, 2, d, NULL, 256);
    refused_w(w, "tensor 'b': bytes [224, 480) of the data section overlap tensor 'a' (bytes "
              "[0, 256))");
}

/* Every GGML type number but the eight kiln holds is refused by its name
 * (or, past the known ones, by its number), with what to do. */
static void test_refused_types(void **state)
{
    (void)state;
    static const int held[] = {0, 1, 2, 8, 12, 14, 30, 39};
    static const char *const names[] = {"Q4_1", "Q5_0", "Q5_1", "Q8_1", "Q2_K", "Q3_K", "Q5_K",
                                        "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
                                        "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32",
                                        "I64", "F64", "IQ1_M", "TQ1_0", "TQ2_0"};
    int named = 0;
    for (int type = 0; type < 48; type++) {
        int ok = 0;
        for (int i = 0; i < 8; i++)
            ok |= held[i] == type;
        GgufWriter *w = gw_new(3);
        gw_tensor(w, "blk.0.ffn_up.weight", type, 2, (int64_t[]){2, 256}, NULL, 2048);
        const char *p = put_w("type.gguf", w);
        rt_gguf g;
        rt_err e = {0, ""};
        int rc = rt_gguf_open(&g, p, &e);
        const char *name = rt_gguf_type_name(type);
        char want[512];
        if (ok) {
            assert_int_equal(rc, 0);
            assert_string_equal(rt_gguf_type_name(g.t[0].type), name);
            rt_gguf_close(&g);
            continue;
        }
        if (name)
            snprintf(want, sizeof want, "%s: tensor 'blk.0.ffn_up.weight': GGML type %s is not "
                     "supported (kiln holds F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K and MXFP4: requantize "
                     "the model with llama-quantize to Q8_0 or Q4_K_M)", p, name);
        else
            snprintf(want, sizeof want, "%s: tensor 'blk.0.ffn_up.weight': GGML type %d is "
                     "unknown (kiln holds F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K and MXFP4: requantize "
                     "the model with llama-quantize to Q8_0 or Q4_K_M)", p, type);
        assert_int_equal(rc, RT_EINVAL);
        assert_string_equal(e.msg, want);
        for (size_t i = 0; i < sizeof names / sizeof *names; i++)
            named += name && !strcmp(name, names[i]);
    }
    assert_int_equal(named, (int)(sizeof names / sizeof *names));
    assert_string_equal(rt_gguf_type_name(12), "Q4_K");
    assert_string_equal(rt_gguf_type_name(39), "MXFP4");
    assert_null(rt_gguf_type_name(-1));
    assert_null(rt_gguf_type_name(1000));
}

static void test_io_errors(void **state)
{
    (void)state;
    const char *p = tl_tmp_path("nonexistent.gguf");
    char want[512];
    snprintf(want, sizeof want, "cannot open: No such file or directory");
    refused(p, RT_EIO, want);
    refused(tl_tmp_dir(), RT_EIO, "cannot read: not a regular file");
}

/* ---- weights loaded from a GGUF (runtime/core/rt_weights.c) -------------- */

/* A file of one tensor of each kind, loaded as a model's weights:
 *   q  Q8_0 [1,32]: one block, d = 0x3800 (0.5 as an IEEE half), then
 *      int8 q[j] = j - 16: values 0.5 (j - 16), -8 .. 7.5;
 *   h  F16 [2]: 0x3E00 (1.5), 0xC000 (-2);
 *   b  BF16 [2]: 0x3F80 (1.0), 0xC040 (-3.0: sign, exponent 128, 1.5);
 *   m  F32 [2,2]: 1, 2, 3, 4 (rows [1, 2] and [3, 4]).
 * Held as stored, each buffer is the file's bytes; held as f32, the values
 * above (the block widened by the info's dequantize); m packed in panels
 * of 2 rows is [k][nr]: 1, 3, 2, 4; q held as q4_0 is q's values
 * quantized; without a dequantize q held as f32 is refused, by the load
 * and by rt_check_weights, in one line. */
static void test_load_weights(void **state)
{
    (void)state;
    unsigned char q[34] = {0x00, 0x38};
    for (int j = 0; j < 32; j++)
        q[2 + j] = (unsigned char)(int8_t)(j - 16);
    uint16_t h[2] = {0x3E00, 0xC000}, b[2] = {0x3F80, 0xC040};
    float m[4] = {1, 2, 3, 4};
    GgufWriter *w = gw_new(3);
    gw_tensor(w, "q", GW_T_Q8_0, 2, (int64_t[]){1, 32}, q, sizeof q);
    gw_tensor(w, "h", GW_T_F16, 1, (int64_t[]){2}, h, sizeof h);
    gw_tensor(w, "b", GW_T_BF16, 1, (int64_t[]){2}, b, sizeof b);
    gw_tensor(w, "m", GW_T_F32, 2, (int64_t[]){2, 2}, m, sizeof m);
    const char *path = put_w("weights.gguf", w);
    rt_tensor_info t[4] = {
        {.name = "q", .rank = 2, .dims = {1, 32}, .count = 32, .store = RT_Q8_0,
         .quantize = rt_quantize, .dequantize = rt_dequantize},
        {.name = "h", .rank = 1, .dims = {2}, .count = 2, .store = RT_F16},
        {.name = "b", .rank = 1, .dims = {2}, .count = 2, .store = RT_BF16},
        {.name = "m", .rank = 2, .dims = {2, 2}, .count = 4, .store = RT_F32},
    };
    void *d[4];
    rt_err e = {0, ""};
    assert_int_equal(rt_load_weights(path, t, 4, d, &e), 0);
    assert_memory_equal(d[0], q, sizeof q);
    assert_memory_equal(d[1], h, sizeof h);
    assert_memory_equal(d[2], b, sizeof b);
    assert_memory_equal(d[3], m, sizeof m);
    for (int i = 0; i < 4; i++)
        rt_free(d[i]);

    for (int i = 0; i < 4; i++)
        t[i].store = RT_F32;
    t[3].panel = 2;
    assert_int_equal(rt_load_weights(path, t, 4, d, &e), 0);
    float vq[32], vh[2] = {1.5f, -2}, vb[2] = {1, -3}, vm[4] = {1, 3, 2, 4};
    for (int j = 0; j < 32; j++)
        vq[j] = 0.5f * (float)(j - 16);
    assert_memory_equal(d[0], vq, sizeof vq);
    assert_memory_equal(d[1], vh, sizeof vh);
    assert_memory_equal(d[2], vb, sizeof vb);
    assert_memory_equal(d[3], vm, sizeof vm);
    for (int i = 0; i < 4; i++)
        rt_free(d[i]);

    unsigned char q4[18];
    rt_quantize(RT_Q4_0, vq, q4, 32);
    t[0].store = RT_Q4_0;
    assert_int_equal(rt_load_weights(path, t, 4, d, &e), 0);
    assert_memory_equal(d[0], q4, sizeof q4);
    for (int i = 0; i < 4; i++)
        rt_free(d[i]);

    char want[1024];
    snprintf(want, sizeof want, "%s: 'q' is Q8_0, which this program cannot widen (it was built "
             "without quantized weights): build it with --weights %s, which holds the file's "
             "blocks as stored", path, path);
    t[0].store = RT_F32;
    t[0].dequantize = NULL;
    e = (rt_err){0, ""};
    assert_int_equal(rt_load_weights(path, t, 4, d, &e), RT_EINVAL);
    assert_string_equal(e.msg, want);
    for (int i = 0; i < 4; i++)
        assert_null(d[i]);
    e = (rt_err){0, ""};
    assert_int_equal(rt_check_weights(path, t, 4, &e), RT_EINVAL);
    assert_string_equal(e.msg, want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_by_hand),       cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_patched),       cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_small_files),   cmocka_unit_test(test_bad_metadata),
        cmocka_unit_test(test_bad_tensors),   cmocka_unit_test(test_refused_types),
        cmocka_unit_test(test_io_errors),     cmocka_unit_test(test_load_weights),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
