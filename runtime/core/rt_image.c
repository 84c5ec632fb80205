/* runtime/core/rt_image.c: prepared weights, kept in a file and mapped.
 *
 * Contract (kiln_rt.h): a program's held weights (m->w: every weight as
 * its kernels read it, converted, packed in panels, and the derived
 * weights its open program made) are produced once, at the first open
 * of a weights file, and written to an image file in the weights cache;
 * every later open of the same file by a program of the same layout maps
 * the image read-only and points m->w into it: nothing is read, converted
 * or copied, and the weights are in memory once (the page cache's).
 *
 * Where: $KILN_WEIGHTS_CACHE when it is a directory path ("off": no
 * image, every open prepares in memory as before), else
 * $XDG_CACHE_HOME/kiln/weights, else $HOME/.cache/kiln/weights; the
 * image is named by a hash of its key, KEY-HASH.kwi.
 * The key: the program's layout (kiln_layout: a hash of the module kiln
 * compiled, the runtime parts that make its bytes and kiln's version) and the identity of the
 * weights file(s) (each file's real path, size, modification time,
 * inode, and its safetensors header's bytes, or a GGUF's bytes before
 * its data section; for an index of shards, the index and every shard). A changed file or program is another key,
 * so a stale image is never found; the image holds its whole key, which
 * must match exactly.
 *
 * The file: a header of RT_IMAGE_HEAD bytes at most, then each held
 * buffer at an offset aligned to RT_IMAGE_ALIGN:
 *   "kiln weights image 1\n"     magic, 21 bytes, then a NUL
 *   u64 file size, u64 n, u64 key length, the key
 *   n x {u64 offset, u64 bytes, u64 check}   (offset 0: none, freed at open)
 *   u64 check of all the header before it
 * checks are FNV-1a 64 (of the header; of each buffer's first and last
 * RT_IMAGE_SAMPLE bytes): what is cheap to check at every open. Sizes are
 * always checked (the file's, each buffer's against what the program
 * expects, offsets inside the file and in order). An image that fails
 * any check is removed and prepared again (said on stderr), never used.
 *
 * A first open that took RT_IMAGE_SAY seconds or more says where it kept
 * the image. Writing: into a temporary beside it (".tmp-PID-N"), flushed to the
 * disk, then renamed into place: an image is whole or absent, and two
 * programs preparing one at once each rename a whole file. A write that
 * fails (a full disk, a read-only cache) removes the temporary and only
 * says so: the open goes on with the weights prepared in memory. A
 * temporary whose process is gone (killed while it wrote) is removed
 * before each write; one of a live process is never touched. After a
 * write, the oldest images go while there are more than RT_IMAGE_KEEP or
 * they hold more than RT_IMAGE_MAX_BYTES (the newest stays). */
#include "runtime/core/rt_core.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define RT_IMAGE_MAGIC "kiln weights image 1\n"
#define RT_IMAGE_ALIGN 4096
#define RT_IMAGE_SAMPLE 4096
#define RT_IMAGE_HUGE ((size_t)2 << 20)      /* a huge page: the mapping's alignment */
#define RT_IMAGE_HEAD ((size_t)1 << 24)     /* 16 MB: key and table at most */
#define RT_IMAGE_KEEP 8
#define RT_IMAGE_MAX_BYTES ((uint64_t)64 << 30)
#define RT_IMAGE_SAY 1.0                     /* seconds: a slower first open says so */

/* ---- hashes ------------------------------------------------------------- */

static uint64_t im_fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}
#define IM_FNV0 0xcbf29ce484222325ull

/* A buffer's check: its first and last RT_IMAGE_SAMPLE bytes. */
static uint64_t im_check(const unsigned char *p, uint64_t n)
{
    uint64_t k = n < RT_IMAGE_SAMPLE ? n : RT_IMAGE_SAMPLE;
    uint64_t h = im_fnv(IM_FNV0, p, (size_t)k);
    return im_fnv(h, p + n - k, (size_t)k);
}

/* ---- the key ------------------------------------------------------------- */

/* Appends to the growing string *s (malloc'd); 0, or -1 out of memory. */
static int im_cat(char **s, size_t *len, const char *t)
{
    size_t n = strlen(t);
    char *g = realloc(*s, *len + n + 1);
    if (!g)
        return -1;
    memcpy(g + *len, t, n + 1);
    *s = g;
    *len += n;
    return 0;
}

/* One file's identity: real path, size, time, inode, and the hash of its
 * first `head` bytes (a safetensors header: 8 + its length). */
static int im_file_id(const char *path, uint64_t head, char **s, size_t *len)
{
    struct stat st;
    char real[PATH_MAX], line[PATH_MAX + 160];
    if (stat(path, &st) != 0 || !realpath(path, real))
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    uint64_t h = IM_FNV0, left = head < (uint64_t)st.st_size ? head : (uint64_t)st.st_size;
    unsigned char buf[65536];
    while (left > 0) {
        ssize_t r = read(fd, buf, left < sizeof buf ? (size_t)left : sizeof buf);
        if (r <= 0)
            break;
        h = im_fnv(h, buf, (size_t)r);
        left -= (uint64_t)r;
    }
    close(fd);
    if (left)
        return -1;
    snprintf(line, sizeof line, "%s %lld %lld.%09ld %llu %llu %016llx\n", real,
             (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
             (unsigned long long)st.st_dev, (unsigned long long)st.st_ino, (unsigned long long)h);
    return im_cat(s, len, line);
}

/* The key of the weights at path for layout: malloc'd, or NULL when the
 * files cannot be read (the load that follows says why). */
static char *im_key(const char *layout, const char *path)
{
    rt_safetensors st;
    rt_err e = {0, ""};
    char *s = NULL;
    size_t len = 0;
    char rank[64] = "";
    if (rt_ranks_now()->size > 1)                /* each rank holds its own parts */
        snprintf(rank, sizeof rank, "rank %d of %d\n", rt_ranks_now()->rank, rt_ranks_now()->size);
    int bad = im_cat(&s, &len, layout) || im_cat(&s, &len, "\n") || im_cat(&s, &len, rank);
    if (rt_is_gguf(path)) {                     /* its metadata and tensor infos */
        rt_gguf_file g = {0};
        if (rt_gguf_weights(path, &g, &e)) {
            free(s);
            return NULL;
        }
        bad = bad || im_file_id(path, g.data_start, &s, &len);
        g.close(g.g);
        if (bad)
            free(s);
        return bad ? NULL : s;
    }
    if (rt_st_open(&st, path, &e)) {
        free(s);
        return NULL;
    }
    const rt_safetensors *files = st.nshards ? st.shards : &st;
    if (st.nshards)
        bad = bad || im_file_id(path, UINT64_MAX, &s, &len);
    for (int i = 0; i < (st.nshards ? st.nshards : 1) && !bad; i++) {
        const unsigned char *p = files[i].map;
        uint64_t hl = 0;
        for (int b = 7; b >= 0; b--)
            hl = hl << 8 | p[b];                  /* rt_st_open checked it fits */
        bad = im_file_id(files[i].path, 8 + hl, &s, &len);
    }
    rt_st_close(&st);
    if (bad) {
        free(s);
        return NULL;
    }
    return s;
}

/* The cache directory (malloc'd), or NULL: none ("off", or no home). */
static char *im_dir(void)
{
    const char *env = getenv("KILN_WEIGHTS_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char buf[PATH_MAX];
    if (env && strcmp(env, "off") == 0)
        return NULL;
    if (env && *env)
        snprintf(buf, sizeof buf, "%s", env);
    else if (xdg && xdg[0] == '/')
        snprintf(buf, sizeof buf, "%s/kiln/weights", xdg);
    else if (home && *home)
        snprintf(buf, sizeof buf, "%s/.cache/kiln/weights", home);
    else
        return NULL;
    return strdup(buf);
}

/* dir/HASH.kwi for key (malloc'd). */
static char *im_path(const char *dir, const char *key)
{
    size_t n = strlen(dir) + 32;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%016llx.kwi", dir,
                 (unsigned long long)im_fnv(IM_FNV0, key, strlen(key)));
    return p;
}

/* ---- reading ---------------------------------------------------------------- */

static uint64_t im_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

const char *rt_image_check(const unsigned char *p, uint64_t size, const char *key, int n,
                           const size_t *bytes)
{
    size_t m = sizeof RT_IMAGE_MAGIC, klen = strlen(key);
    if (size < m + 24 || memcmp(p, RT_IMAGE_MAGIC, m))
        return "not a weights image of this kiln";
    if (im_u64(p + m) != size)
        return "its size is not the size it was written with (truncated?)";
    if (im_u64(p + m + 8) != (uint64_t)n || im_u64(p + m + 16) != klen)
        return "another program's (its table differs)";
    uint64_t head = m + 24 + klen + 24 * (uint64_t)n + 8;
    if (head > size || head > RT_IMAGE_HEAD)
        return "its header runs past its end";
    if (memcmp(p + m + 24, key, klen))
        return "another program's or another file's (its key differs)";
    if (im_u64(p + head - 8) != im_fnv(IM_FNV0, p, (size_t)(head - 8)))
        return "its header is damaged";
    uint64_t end = head;
    for (int i = 0; i < n; i++) {
        const unsigned char *t = p + m + 24 + klen + 24 * (size_t)i;
        uint64_t off = im_u64(t), len = im_u64(t + 8);
        if (len != bytes[i] || (off == 0) != (len == 0))
            return "a buffer's size is not the program's";
        if (!len)
            continue;
        if (off < end || off % RT_IMAGE_ALIGN || off > size || len > size - off)
            return "a buffer lies outside the file";
        if (im_check(p + off, len) != im_u64(t + 16))
            return "a buffer is damaged";
        end = off + len;
    }
    return NULL;
}

/* The image mapped read-only at an address aligned to RT_IMAGE_HUGE, so
 * that the kernel can map the page cache's huge folios whole (one TLB
 * entry for 2 MB: a decode step streams every weight, and with 4 KB
 * entries it misses the TLB every 64 lines), asked for (MADV_HUGEPAGE,
 * which also makes the reads ahead that fill them huge-sized), then read
 * in: the first token does not wait on page faults. MAP_FAILED when it
 * cannot be mapped. */
static void *im_map(int fd, size_t size)
{
    size_t span = size + RT_IMAGE_HUGE;
    unsigned char *r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        return MAP_FAILED;
    unsigned char *at = (unsigned char *)(((uintptr_t)r + RT_IMAGE_HUGE - 1) &
                                          ~(uintptr_t)(RT_IMAGE_HUGE - 1));
    void *p = mmap(at, size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        munmap(r, span);
        return MAP_FAILED;
    }
    if (at > r)
        munmap(r, (size_t)(at - r));
    if (r + span > at + size)
        munmap(at + size, (size_t)(r + span - (at + size)));
#ifdef MADV_HUGEPAGE
    madvise(p, size, MADV_HUGEPAGE);          /* hints: failure is harmless */
#endif
#ifdef MADV_POPULATE_READ
    if (madvise(p, size, MADV_POPULATE_READ) == 0)
        return p;
#endif
    volatile const unsigned char *q = p;      /* older kernels: touch each page */
    for (size_t i = 0; i < size; i += 4096)
        (void)q[i];
    return p;
}

int rt_image_open(const char *layout, const char *path, int n, void **w, const size_t *bytes,
                  rt_image *im)
{
    memset(im, 0, sizeof *im);
    char *dir = path ? im_dir() : NULL, *key = dir ? im_key(layout, path) : NULL;
    char *file = key ? im_path(dir, key) : NULL;
    int fd = file ? open(file, O_RDONLY | O_CLOEXEC) : -1, got = 0;
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0) {
        void *p = im_map(fd, (size_t)st.st_size);
        const char *bad = p == MAP_FAILED ? "cannot be mapped"
                          : rt_image_check(p, (uint64_t)st.st_size, key, n, bytes);
        if (!bad) {
            im->map = p;
            im->size = (size_t)st.st_size;
            const unsigned char *t = (const unsigned char *)p + sizeof RT_IMAGE_MAGIC + 24 +
                                     strlen(key);
            for (int i = 0; i < n; i++)
                w[i] = im_u64(t + 24 * (size_t)i) ? (unsigned char *)p + im_u64(t + 24 * (size_t)i)
                                                 : NULL;
            got = 1;
        } else {
            if (p != MAP_FAILED)
                munmap(p, (size_t)st.st_size);
            fprintf(stderr, "note: weights image %s: %s; preparing it again\n", file, bad);
            unlink(file);
        }
    }
    if (fd >= 0)
        close(fd);
    free(file);
    free(key);
    free(dir);
    return got;
}

void rt_image_close(rt_image *im)
{
    if (im->map)
        munmap(im->map, im->size);
    im->map = NULL;
}

/* ---- writing ---------------------------------------------------------------- */

static void im_put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static int im_write_all(int fd, const void *p, uint64_t n, uint64_t off)
{
    const char *s = p;
    while (n > 0) {
        ssize_t r = pwrite(fd, s, n > ((size_t)1 << 30) ? (size_t)1 << 30 : (size_t)n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        s += r;
        off += (uint64_t)r;
        n -= (uint64_t)r;
    }
    return 0;
}

unsigned char *rt_image_header(const char *key, int n, void *const *w, const size_t *bytes,
                               uint64_t *head, uint64_t *size)
{
    size_t m = sizeof RT_IMAGE_MAGIC, klen = strlen(key);
    *head = m + 24 + klen + 24 * (uint64_t)n + 8;
    unsigned char *h = calloc(1, (size_t)*head);
    if (!h)
        return NULL;
    memcpy(h, RT_IMAGE_MAGIC, m);
    im_put64(h + m + 8, (uint64_t)n);
    im_put64(h + m + 16, klen);
    memcpy(h + m + 24, key, klen);
    uint64_t off = *head;
    for (int i = 0; i < n; i++) {
        unsigned char *t = h + m + 24 + klen + 24 * (size_t)i;
        if (!w[i] || !bytes[i])
            continue;
        off = (off + RT_IMAGE_ALIGN - 1) / RT_IMAGE_ALIGN * RT_IMAGE_ALIGN;
        im_put64(t, off);
        im_put64(t + 8, bytes[i]);
        im_put64(t + 16, im_check(w[i], bytes[i]));
        off += bytes[i];
    }
    *size = off;
    im_put64(h + m, off);
    im_put64(h + *head - 8, im_fnv(IM_FNV0, h, (size_t)(*head - 8)));
    return h;
}

/* Writes the image to tmp; 0, or -1 with errno set. */
static int im_write(const char *tmp, const char *key, int n, void *const *w, const size_t *bytes)
{
    uint64_t head, size;
    unsigned char *h = rt_image_header(key, n, w, bytes, &head, &size);
    if (!h)
        return errno = ENOMEM, -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), rc = fd < 0 ? -1 : 0;
    if (!rc)
        rc = im_write_all(fd, h, head, 0);
    const unsigned char *t = h + sizeof RT_IMAGE_MAGIC + 24 + strlen(key);
    for (int i = 0; i < n && !rc; i++)
        if (im_u64(t + 24 * (size_t)i))
            rc = im_write_all(fd, w[i], bytes[i], im_u64(t + 24 * (size_t)i));
    if (!rc && ftruncate(fd, (off_t)size) != 0)
        rc = -1;
    if (!rc && fdatasync(fd) != 0)
        rc = -1;
#ifdef POSIX_FADV_DONTNEED
    if (!rc)                                  /* the written pages leave the page cache, */
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);   /* so that opens read it huge (im_map) */
#endif
    int e = errno;
    if (fd >= 0 && close(fd) != 0 && !rc)
        rc = -1, e = errno;
    free(h);
    errno = e;
    return rc;
}

/* mkdir -p */
static int im_mkdirs(const char *dir)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                return -1;
            *s = '/';
        }
    return mkdir(p, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

/* Removes the oldest images of dir past RT_IMAGE_KEEP or
 * RT_IMAGE_MAX_BYTES; keep is the newest, never removed. */
static void im_trim(const char *dir, const char *keep)
{
    DIR *d = opendir(dir);
    struct { char name[64]; time_t t; uint64_t size; } v[256];
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < 256) {
        size_t len = strlen(e->d_name);
        char p[PATH_MAX];
        struct stat st;
        if (len < 5 || len >= 64 || strcmp(e->d_name + len - 4, ".kwi"))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &st) != 0 || strcmp(p, keep) == 0)
            continue;
        memcpy(v[n].name, e->d_name, len + 1);        /* len < 64: checked above */
        v[n].t = st.st_mtime;
        v[n++].size = (uint64_t)st.st_size;
    }
    if (d)
        closedir(d);
    struct stat st;
    uint64_t total = stat(keep, &st) == 0 ? (uint64_t)st.st_size : 0;
    for (int i = 0; i < n; i++)
        total += v[i].size;
    for (int left = n; left > 0 && (left + 1 > RT_IMAGE_KEEP || total > RT_IMAGE_MAX_BYTES);
         left--) {
        int old = -1;
        for (int i = 0; i < n; i++)
            if (v[i].name[0] && (old < 0 || v[i].t < v[old].t))
                old = i;
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, v[old].name);
        unlink(p);
        total -= v[old].size;
        v[old].name[0] = 0;
    }
}

/* Removes dir's temporaries ".tmp-PID-N" whose process PID is gone
 * (getpgid: ESRCH; not kill, whose <signal.h> defines si_status and
 * other names a model's symbols may take: tests/names.sh). */
static void im_sweep(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char *end, p[PATH_MAX];
        if (strncmp(e->d_name, ".tmp-", 5) != 0)
            continue;
        long pid = strtol(e->d_name + 5, &end, 10);
        if (pid <= 0 || pid > INT_MAX || *end != '-' || getpgid((pid_t)pid) >= 0 || errno != ESRCH)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
}

int rt_image_save(const char *layout, const char *path, int n, void *const *w,
                  const size_t *bytes, double seconds)
{
    static int seq;
    char *dir = path ? im_dir() : NULL, *key = dir ? im_key(layout, path) : NULL;
    char *file = key ? im_path(dir, key) : NULL, tmp[PATH_MAX];
    int rc = 1;
    if (file) {
        snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-%d", dir, (long)getpid(), seq++);
        double t0 = rt_now();
        int made = im_mkdirs(dir) == 0;
        if (made)
            im_sweep(dir);
        if (!made || im_write(tmp, key, n, w, bytes) != 0 || rename(tmp, file) != 0) {
            fprintf(stderr, "note: weights image not kept in %s (%s): the weights stay prepared "
                    "in memory\n", dir, strerror(errno));
            unlink(tmp);
        } else {
            rc = 0;
            if (seconds + rt_now() - t0 >= RT_IMAGE_SAY)
                fprintf(stderr, "note: weights prepared in %.2f s and kept in %s (%.2f s): later "
                        "opens map it\n", seconds, file, rt_now() - t0);
            im_trim(dir, file);
        }
    }
    free(file);
    free(key);
    free(dir);
    return rc;
}
