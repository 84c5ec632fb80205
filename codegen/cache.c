/* codegen/cache.c: the build cache. What cc built is kept under the hash
 * of everything that made it (cc.c says what that is), so that building
 * an unchanged model again is a copy.
 *
 * DIR/KEY/ is an entry: its files and a manifest,
 *   kiln build cache 1
 *   NAME SIZE SHA256            one line per file
 * 1. An entry is written whole into a fresh DIR/.tmp-XXXXXX, then renamed
 *    to DIR/KEY in one step, so no reader ever sees half of one. Two kilns
 *    storing one key at once: the second rename fails, its copy is dropped.
 * 2. A lookup copies each file out only when its size and SHA-256 are the
 *    manifest's. An entry found damaged anyway (a file missing or changed:
 *    a crash before the data reached the disk, a disk error, someone's
 *    editing) is removed and counts as a miss, so the build that follows
 *    replaces it. A hit sets the entry's time to now.
 * 3. After each store the least recently used entries go while there are
 *    more than CG_CACHE_MAX_ENTRIES or they hold more than
 *    CG_CACHE_MAX_BYTES (the newest always stays), and so do temporaries
 *    older than an hour (a kiln killed while storing).
 * Removing an entry renames it to a temporary first, so a reader sees it
 * whole or not at all. */
#include "codegen.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MANIFEST_HEAD "kiln build cache 1\n"
#define STALE_SECONDS 3600          /* a temporary this old is a dead kiln's */

/* ---- SHA-256, by nettle ---------------------------------------------------- */

void cg_sha256_init(CgSha256 *s) { sha256_init(&s->ctx); }

void cg_sha256_add(CgSha256 *s, const void *data, size_t n)
{
    sha256_update(&s->ctx, n, data);
}

void cg_sha256_hex(CgSha256 *s, char hex[65])
{
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_digest(&s->ctx, sizeof d, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

/* ---- files ------------------------------------------------------------------ */

const char *cg_cache_dir(Arena *a)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/')            /* the spec ignores a relative path */
        return arena_printf(a, "%s/kiln/builds", xdg);
    if (home && *home)
        return arena_printf(a, "%s/.cache/kiln/builds", home);
    return NULL;
}

/* A whole file, malloc'd (NULL when it cannot be read); its size and
 * permission bits. */
static unsigned char *slurp(const char *path, size_t *size, mode_t *mode)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return NULL;
    unsigned char *p = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (p = malloc((size_t)st.st_size + 1))) {
        size_t got = 0;
        ssize_t r = 1;
        while (got < (size_t)st.st_size && (r = read(fd, p + got, (size_t)st.st_size - got)) != 0)
            if (r > 0)
                got += (size_t)r;
            else if (errno != EINTR)
                break;
        if (got != (size_t)st.st_size) {
            free(p);
            p = NULL;
        } else {
            p[got] = 0;
            *size = got;
            *mode = st.st_mode & 0777;
        }
    }
    close(fd);
    return p;
}

/* n bytes to path, created (or truncated) with the given permissions. */
static int spill(const char *path, const void *data, size_t n, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int bad = fchmod(fd, mode) != 0;
    for (size_t done = 0; !bad && done < n;) {
        ssize_t w = write(fd, (const char *)data + done, n - done);
        if (w > 0)
            done += (size_t)w;
        else if (errno != EINTR)
            bad = 1;
    }
    bad |= close(fd) != 0;
    return bad ? -1 : 0;
}

static void sha_hex(const void *data, size_t n, char hex[65])
{
    CgSha256 s;
    cg_sha256_init(&s);
    cg_sha256_add(&s, data, n);
    cg_sha256_hex(&s, hex);
}

/* Removes a directory of plain files (an entry, a temporary), or a file
 * where one was expected. */
static void remove_flat(Arena *a, const char *dir)
{
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlink(arena_printf(a, "%s/%s", dir, e->d_name));
    if (d)
        closedir(d);
    if (rmdir(dir) != 0 && errno == ENOTDIR)
        unlink(dir);
}

/* Takes entry `name` out of dir: renamed aside first, then removed. */
static void discard(Arena *a, const char *dir, const char *name)
{
    static unsigned seq;
    const char *from = arena_printf(a, "%s/%s", dir, name);
    const char *aside = arena_printf(a, "%s/.tmp-gone-%ld-%u", dir, (long)getpid(), seq++);
    remove_flat(a, rename(from, aside) == 0 ? aside : from);
}

/* ---- lookup ------------------------------------------------------------------- */

/* The size and hash the manifest gives for name; 0 when it has them. */
static int manifest_find(const char *text, const char *name, size_t *size, char hex[65])
{
    if (strncmp(text, MANIFEST_HEAD, strlen(MANIFEST_HEAD)) != 0)
        return -1;
    for (const char *line = strchr(text, '\n'); line; line = strchr(line, '\n')) {
        char word[256];
        unsigned long long n;
        line++;
        if (sscanf(line, "%255s %llu %64s", word, &n, hex) == 3 && strcmp(word, name) == 0 &&
            strlen(hex) == 64) {
            *size = (size_t)n;
            return 0;
        }
    }
    return -1;
}

/* File `name` of entry into dest when it is what the manifest says. */
static int take(Arena *a, const char *entry, const char *manifest, const char *name,
                const char *dest)
{
    size_t want, n = 0;
    mode_t mode = 0;
    char hex[65], got[65];
    if (manifest_find(manifest, name, &want, hex))
        return -1;
    unsigned char *data = slurp(arena_printf(a, "%s/%s", entry, name), &n, &mode);
    int ok = data && n == want;
    if (ok) {
        sha_hex(data, n, got);
        ok = strcmp(got, hex) == 0;
    }
    mode_t mask = umask(0);
    umask(mask);
    int rc = !ok ? -1 : spill(dest, data, n, mode & ~mask) ? -2 : 0;
    free(data);
    return rc;
}

int cg_cache_get(Arena *a, const char *dir, const char *key, int n, const char *const *names,
                 const char *const *dests)
{
    const char *entry = arena_printf(a, "%s/%s", dir, key);
    struct stat st;
    if (stat(entry, &st) != 0)
        return 0;
    size_t len;
    mode_t mode;
    char *manifest = (char *)slurp(arena_printf(a, "%s/manifest", entry), &len, &mode);
    int rc = manifest ? 0 : -1;
    for (int i = 0; !rc && i < n; i++)
        rc = take(a, entry, manifest, names[i], dests[i]);
    free(manifest);
    if (rc == -1) {
        discard(a, dir, key);
        return -1;
    }
    if (rc)
        return 0;                     /* could not write dest: let the build say why */
    utimensat(AT_FDCWD, entry, NULL, 0);
    return 1;
}

/* ---- store -------------------------------------------------------------------- */

/* mkdir -p */
static int make_dirs(Arena *a, const char *path)
{
    char *p = arena_strdup(a, path);
    for (char *s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
        if (s)
            *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            return -1;
        if (!s)
            return 0;
        *s = '/';
    }
}

/* srcs into the temporary entry tmp, and the manifest last. */
static int fill(Arena *a, const char *tmp, int n, const char *const *names,
                const char *const *srcs)
{
    FILE *mf = arena_stream(a);
    fputs(MANIFEST_HEAD, mf);
    for (int i = 0; i < n; i++) {
        size_t len;
        mode_t mode;
        char hex[65];
        unsigned char *data = slurp(srcs[i], &len, &mode);
        if (!data)
            return -1;
        sha_hex(data, len, hex);
        int bad = spill(arena_printf(a, "%s/%s", tmp, names[i]), data, len, mode);
        free(data);
        if (bad)
            return -1;
        fprintf(mf, "%s %zu %s\n", names[i], len, hex);
    }
    const char *text = arena_stream_text(a, mf);
    return spill(arena_printf(a, "%s/manifest", tmp), text, strlen(text), 0644);
}

int cg_cache_put(Arena *a, const char *dir, const char *key, int n, const char *const *names,
                 const char *const *srcs, rt_err *err)
{
    if (make_dirs(a, dir) != 0)
        return rt_errf(err, RT_EIO, "%s: %s", dir, strerror(errno));
    char *tmp = arena_printf(a, "%s/.tmp-XXXXXX", dir);
    if (!mkdtemp(tmp))
        return rt_errf(err, RT_EIO, "%s: %s", dir, strerror(errno));
    const char *entry = arena_printf(a, "%s/%s", dir, key);
    if (fill(a, tmp, n, names, srcs) != 0) {
        int e = errno;
        remove_flat(a, tmp);
        return rt_errf(err, RT_EIO, "%s: %s", dir, strerror(e));
    }
    if (rename(tmp, entry) != 0) {
        int e = errno;
        remove_flat(a, tmp);
        if (e != EEXIST && e != ENOTEMPTY)
            return rt_errf(err, RT_EIO, "%s: %s", entry, strerror(e));
    }
    utimensat(AT_FDCWD, entry, NULL, 0);
    cg_cache_trim(a, dir, CG_CACHE_MAX_BYTES, CG_CACHE_MAX_ENTRIES);
    return 0;
}

/* ---- bounds ------------------------------------------------------------------- */

typedef struct {
    const char *name;
    struct timespec used;
    int64_t bytes;
} Entry;

static int is_key(const char *s)
{
    size_t n = strspn(s, "0123456789abcdef");
    return n == 64 && !s[n];
}

static int64_t entry_bytes(Arena *a, const char *path)
{
    int64_t sum = 0;
    DIR *d = opendir(path);
    struct stat st;
    for (struct dirent *e; d && (e = readdir(d));)
        if (stat(arena_printf(a, "%s/%s", path, e->d_name), &st) == 0 && S_ISREG(st.st_mode))
            sum += st.st_size;
    if (d)
        closedir(d);
    return sum;
}

static int older(const void *x, const void *y)
{
    const Entry *a = x, *b = y;
    if (a->used.tv_sec != b->used.tv_sec)
        return a->used.tv_sec < b->used.tv_sec ? -1 : 1;
    return (a->used.tv_nsec > b->used.tv_nsec) - (a->used.tv_nsec < b->used.tv_nsec);
}

void cg_cache_trim(Arena *a, const char *dir, int64_t max_bytes, int max_entries)
{
    DIR *d = opendir(dir);
    Entry *v = NULL;
    int n = 0, cap = 0;
    int64_t total = 0;
    time_t now = time(NULL);
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *path = arena_printf(a, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        if (!strncmp(e->d_name, ".tmp-", 5) && now - st.st_mtime > STALE_SECONDS)
            remove_flat(a, path);
        if (!is_key(e->d_name))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            Entry *nv = arena_alloc(a, (size_t)cap * sizeof *nv);
            if (n)
                memcpy(nv, v, (size_t)n * sizeof *v);
            v = nv;
        }
        v[n] = (Entry){arena_strdup(a, e->d_name), st.st_mtim, entry_bytes(a, path)};
        total += v[n++].bytes;
    }
    if (d)
        closedir(d);
    if (n)
        qsort(v, (size_t)n, sizeof *v, older);
    for (int i = 0; n - i > 1 && (n - i > max_entries || total > max_bytes); i++) {
        discard(a, dir, v[i].name);
        total -= v[i].bytes;
    }
}
