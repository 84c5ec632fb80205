/* tests/fuzz/fuzz_image.c: the prepared weights' image, as every open
 * checks it (runtime/core/rt_image.c, rt_image_check).
 *
 * Input: edits of a sound image (a program of three held buffers, one of
 * them freed at open), then the input again as a whole file. The sound
 * image is made once by the writer's own header (rt_image_header) and
 * data; the input's first byte chooses a length to cut or pad it to, the
 * rest are (offset, byte) pairs written into it, so the fuzzer reaches
 * every check. Whatever the bytes, rt_image_check must return, and an
 * image it passes must be one the program can read: its size what the
 * header says, every buffer of the program's size, inside the file,
 * aligned and in order, and the buffer freed at open absent. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/core/rt_core.h"

#define KEY "layout 0123\nweights /w.safetensors 100 1.5 1 2 00ff\n"
enum { N = 3 };
static const size_t bytes[N] = {100, 0, 5000};

static uint64_t u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The sound image, made once. */
static unsigned char *sound(uint64_t *size)
{
    static unsigned char *img;
    static uint64_t n;
    if (!img) {
        unsigned char *w0 = malloc(bytes[0]), *w2 = malloc(bytes[2]);
        for (size_t i = 0; i < bytes[2]; i++)
            w2[i] = (unsigned char)(i * 7 + 3), w0[i % bytes[0]] = (unsigned char)i;
        void *w[N] = {w0, NULL, w2};
        uint64_t head;
        unsigned char *h = rt_image_header(KEY, N, w, bytes, &head, &n);
        FUZZ_CHECK(h && n > head);
        img = calloc(1, (size_t)n);
        memcpy(img, h, (size_t)head);
        const unsigned char *t = h + 22 + 24 + strlen(KEY);
        for (int i = 0; i < N; i++)
            if (u64(t + 24 * i))
                memcpy(img + u64(t + 24 * i), w[i], bytes[i]);
        FUZZ_CHECK(rt_image_check(img, n, KEY, N, bytes) == NULL);
        free(h);
        free(w0);
        free(w2);
    }
    *size = n;
    return img;
}

/* What a passed image promises the program. */
static void readable(const unsigned char *p, uint64_t size)
{
    FUZZ_CHECK(u64(p + 22) == size);
    const unsigned char *t = p + 22 + 24 + strlen(KEY);
    uint64_t end = 0;
    for (int i = 0; i < N; i++) {
        uint64_t off = u64(t + 24 * i), len = u64(t + 8 + 24 * i);
        FUZZ_CHECK(len == bytes[i] && (off == 0) == (bytes[i] == 0));
        if (!len)
            continue;
        FUZZ_CHECK(off >= end && off % 4096 == 0 && off <= size && len <= size - off);
        end = off + len;
    }
}

static void check(const unsigned char *p, uint64_t size)
{
    const char *why = rt_image_check(p, size, KEY, N, bytes);
    if (!why)
        readable(p, size);
    else
        FUZZ_CHECK(*why && !strchr(why, '\n'));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t n;
    const unsigned char *img = sound(&n);
    uint64_t len = size ? n - (n / 256) * (data[0] % 8) + (data[0] >> 3) : n;
    unsigned char *p = calloc(1, (size_t)len + 1);
    memcpy(p, img, (size_t)(len < n ? len : n));
    for (size_t i = 1; i + 2 < size; i += 3) {
        uint64_t at = ((uint64_t)data[i] << 8 | data[i + 1]) % (len ? len : 1);
        if (len)
            p[at] = data[i + 2];
    }
    check(p, len);
    free(p);
    p = malloc(size + 1);                  /* the input, whole */
    memcpy(p, data, size);
    check(p, size);
    free(p);
    return 0;
}
