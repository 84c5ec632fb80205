/* tests/import/gguf_write.h: GGUF files for the tests, written from the
 * format's specification (llama.cpp's gguf.h and docs), not from its code.
 *
 * A GgufWriter collects metadata (KVs, in the order given) and tensors,
 * then lays out the file: "GGUF", u32 version, u64 tensor count, u64 KV
 * count; the KVs (string key, u32 type, value; arrays: u32 element type,
 * u64 count, the elements; strings: u64 length, bytes); the tensor infos
 * (name, u32 n_dims, u64 ne[] innermost first, u32 GGML type, u64 offset);
 * zeros to the next multiple of the alignment; the data section, each
 * tensor at its offset, the section padded to the alignment at its end.
 * The alignment is 32, or what a u32 KV "general.alignment" says (as
 * readers take it). Everything is little-endian (this host's order; the
 * writer aborts on a big-endian host). Nothing is checked: bad files are
 * written as readily as good ones. Out of memory aborts. */
#ifndef KILN_GGUF_WRITE_H
#define KILN_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

/* GGUF's value types (gguf.h gguf_type) and some of GGML's tensor types. */
enum {
    GW_U8, GW_I8, GW_U16, GW_I16, GW_U32, GW_I32, GW_F32, GW_BOOL, GW_STR, GW_ARR, GW_U64,
    GW_I64, GW_F64
};
enum {
    GW_T_F32 = 0, GW_T_F16 = 1, GW_T_Q4_0 = 2, GW_T_Q8_0 = 8, GW_T_Q4_K = 12, GW_T_Q6_K = 14,
    GW_T_BF16 = 30
};

typedef struct GgufWriter GgufWriter;

/* version: 3 or 2 (which GGUF lays out the same), or any, for bad files. */
GgufWriter *gw_new(uint32_t version);
void gw_free(GgufWriter *w);

/* One KV each, a scalar of the type the name says. */
void gw_u8(GgufWriter *w, const char *key, uint8_t v);
void gw_i8(GgufWriter *w, const char *key, int8_t v);
void gw_u16(GgufWriter *w, const char *key, uint16_t v);
void gw_i16(GgufWriter *w, const char *key, int16_t v);
void gw_u32(GgufWriter *w, const char *key, uint32_t v);
void gw_i32(GgufWriter *w, const char *key, int32_t v);
void gw_f32(GgufWriter *w, const char *key, float v);
void gw_bool(GgufWriter *w, const char *key, int v);
void gw_str(GgufWriter *w, const char *key, const char *v);
void gw_u64(GgufWriter *w, const char *key, uint64_t v);
void gw_i64(GgufWriter *w, const char *key, int64_t v);
void gw_f64(GgufWriter *w, const char *key, double v);
/* A string of len bytes (which may hold NULs). */
void gw_strn(GgufWriter *w, const char *key, const char *v, size_t len);
/* An array of n numbers or bools of etype (GW_U8 ... GW_F64 but GW_STR,
 * GW_ARR), v holding them as C holds them (bools: one byte each). */
void gw_arr(GgufWriter *w, const char *key, int etype, uint64_t n, const void *v);
void gw_arr_str(GgufWriter *w, const char *key, uint64_t n, const char *const *v);
/* A KV of any type number with these bytes as its value (for bad files:
 * unknown types, nested arrays, lying counts). */
void gw_kv_raw(GgufWriter *w, const char *key, uint32_t type, const void *bytes, size_t n);

/* A tensor of GGML type `type` and shape dims[0 .. rank) outermost first
 * (written reversed, as ne; rank as n_dims, whatever it is), holding
 * nbytes bytes of data (zeros when data is NULL), at the first multiple
 * of the alignment after the end of the tensor gw_tensor added before it:
 * these make the data section. gw_tensor_at puts one at `offset` instead,
 * aligned or not, inside the data section or not (for bad files: its
 * data is written where it falls inside). */
void gw_tensor(GgufWriter *w, const char *name, int type, int rank, const int64_t *dims,
               const void *data, size_t nbytes);
void gw_tensor_at(GgufWriter *w, const char *name, int type, int rank, const int64_t *dims,
                  const void *data, size_t nbytes, uint64_t offset);

/* The file's bytes (malloc'd, *n of them); w is kept. */
unsigned char *gw_bytes(GgufWriter *w, size_t *n);
/* Writes the file to path: 0, or -1 with errno set. */
int gw_write(GgufWriter *w, const char *path);

#endif
