/* runtime/rt_gguf.h: the runtime's GGUF part (gguf/): reading GGUF files,
 * llama.cpp's model format, whole (metadata and tensors; rt_gguf.c). A
 * generated program carries it when it may be handed one: a decoder (its
 * weights, and a GGUF's tokenizer, rt_tokenizer_gguf.c) or a program built
 * from a GGUF (codegen's cg_rt_uses). The core's weights loader reads a
 * GGUF through it (kiln_rt.h's rt_gguf_file, which the part installs before
 * main); without it such a file is refused with one line, RT_EUSAGE. */
#ifndef KILN_RT_GGUF_H
#define KILN_RT_GGUF_H

#include "runtime/kiln_rt.h"

/* A metadata value's type, as the file numbers it (gguf.h's gguf_type). */
enum {
    RT_GGUF_U8, RT_GGUF_I8, RT_GGUF_U16, RT_GGUF_I16, RT_GGUF_U32, RT_GGUF_I32, RT_GGUF_F32,
    RT_GGUF_BOOL, RT_GGUF_STR, RT_GGUF_ARR, RT_GGUF_U64, RT_GGUF_I64, RT_GGUF_F64
};
typedef struct {
    const char *key;
    int type;                   /* RT_GGUF_*; RT_GGUF_ARR: an array */
    int etype;                  /* its elements' type, never an array (a
                                   scalar: type itself) */
    uint64_t n;                 /* elements (a scalar: 1) */
    const unsigned char *raw;   /* numbers, bools: the n values as the
                                   file holds them, little-endian */
    const char *const *str;     /* strings: n + 1 pointers; element i is
                                   str[i], NUL-terminated, of str[i + 1] -
                                   str[i] - 1 bytes (a NUL may be inside) */
} rt_gguf_kv;
typedef struct {
    void *map;
    size_t size;
    const char *path;
    uint32_t version;           /* 2 or 3 */
    uint32_t alignment;         /* general.alignment, or 32 */
    uint64_t data_start;        /* the data section's first byte */
    int nkv, nt;
    rt_gguf_kv *kv;             /* in the file's order */
    rt_gguf_tensor *t;          /* in the file's order */
    /* rt_gguf.c's: sorted for the finds; the strings' one block */
    const rt_gguf_kv **kv_by_key;
    const rt_gguf_tensor **t_by_name;
    char *strs;
    const char **strp;
} rt_gguf;
/* Maps and checks the whole file (rt_gguf.c's top comment lists every
 * check): versions 2 and 3, little-endian; metadata of every type, nested
 * arrays refused; keys and tensor names unique; tensors of F32, F16,
 * BF16, Q8_0, Q4_0, Q4_K and Q6_K inside the data section, aligned, not
 * overlapping (any other type refused by its GGML name, with what to do).
 * Messages "PATH: at byte N: what", "PATH: key 'KEY': what" or "PATH:
 * tensor 'NAME': what"; on error nothing stays allocated or mapped.
 * g->path is the caller's string, which must outlive g. */
RT_API int rt_gguf_open(rt_gguf *g, const char *path, rt_err *e);
RT_API void rt_gguf_close(rt_gguf *g);
/* NULL when there is none. */
RT_API const rt_gguf_kv *rt_gguf_find_key(const rt_gguf *g, const char *key);
RT_API const rt_gguf_tensor *rt_gguf_find_tensor(const rt_gguf *g, const char *name);
/* GGML's name of a type number ("Q4_K"), NULL when it has none. */
RT_API const char *rt_gguf_type_name(int type);
/* A scalar's value: 0, or -1 (nothing written) when kv is NULL, an array,
 * or not of the kind asked: u64 takes any integer type whose value is >=
 * 0, i64 any whose value fits; f64 takes f32 and f64; bool and str only
 * themselves (*len, when len is not NULL: the string's bytes, 0 when the
 * answer is NULL). */
RT_API int rt_gguf_u64(const rt_gguf_kv *kv, uint64_t *v);
RT_API int rt_gguf_i64(const rt_gguf_kv *kv, int64_t *v);
RT_API int rt_gguf_f64(const rt_gguf_kv *kv, double *v);
RT_API int rt_gguf_bool(const rt_gguf_kv *kv, int *v);
RT_API const char *rt_gguf_str(const rt_gguf_kv *kv, size_t *len);
/* Element i of an array, as the scalars' (-1 or NULL also when kv is not
 * an array or i >= kv->n). */
RT_API int rt_gguf_arr_u64(const rt_gguf_kv *kv, uint64_t i, uint64_t *v);
RT_API int rt_gguf_arr_i64(const rt_gguf_kv *kv, uint64_t i, int64_t *v);
RT_API int rt_gguf_arr_f64(const rt_gguf_kv *kv, uint64_t i, double *v);
RT_API int rt_gguf_arr_bool(const rt_gguf_kv *kv, uint64_t i, int *v);
RT_API const char *rt_gguf_arr_str(const rt_gguf_kv *kv, uint64_t i, size_t *len);

/* Every symbol of this part that generated code may call (for libtcc). */
#define RT_GGUF_SYMBOLS(X)                                                    \
    X(rt_gguf_open) X(rt_gguf_close) X(rt_gguf_find_key) X(rt_gguf_find_tensor) \
    X(rt_gguf_type_name) X(rt_gguf_u64) X(rt_gguf_i64) X(rt_gguf_f64)       \
    X(rt_gguf_bool) X(rt_gguf_str) X(rt_gguf_arr_u64) X(rt_gguf_arr_i64)    \
    X(rt_gguf_arr_f64) X(rt_gguf_arr_bool) X(rt_gguf_arr_str)

#endif
