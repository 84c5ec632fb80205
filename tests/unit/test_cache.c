/* tests/unit/test_cache.c: the build cache (codegen/cache.c): SHA-256
 * against FIPS 180-2's examples; entries stored and found byte for byte
 * with their permissions; damaged entries (a byte changed, a file cut
 * short or missing, no manifest) never used and removed; a second store
 * of one key; the bounds (oldest out first, by count and by bytes; dead
 * temporaries). Everything happens in a mkdtemp directory: the user's
 * cache is never touched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codegen/codegen.h"
#include "tests/unit/testlib.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- SHA-256 ----------------------------------------------------------- */

static void expect_sha(const void *data, size_t n, size_t piece, const char *want)
{
    CgSha256 s;
    char hex[65];
    cg_sha256_init(&s);
    for (size_t i = 0; i < n; i += piece)
        cg_sha256_add(&s, (const char *)data + i, n - i < piece ? n - i : piece);
    cg_sha256_hex(&s, hex);
    assert_string_equal(hex, want);
}

static void test_sha256(void **state)
{
    (void)state;
    expect_sha("", 0, 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect_sha("abc", 3, 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";   /* 56 bytes */
    for (size_t piece = 1; piece <= 64; piece += 7)
        expect_sha(two, strlen(two), piece,
                   "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *million = malloc(1000000);
    assert_non_null(million);
    memset(million, 'a', 1000000);
    expect_sha(million, 1000000, 1000000,
               "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    expect_sha(million, 1000000, 4099,
               "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(million);
}

/* ---- entries --------------------------------------------------------------- */

static const char *const names[] = {"lib.so", "lib.a"};

/* A key: 64 hex digits, all c. */
static const char *key_of(char c)
{
    static char k[4][65];
    static int turn;
    turn = (turn + 1) % 4;
    memset(k[turn], c, 64);
    k[turn][64] = 0;
    return k[turn];
}

/* The cache directory of the test, under the scratch directory. */
static const char *cache = "builds";
static const char *dir(void) { return tl_tmp_path(cache); }

/* Two source files, "so" (mode 0755) and "a" (0644), of n bytes from c. */
static void sources(char c, size_t n)
{
    char *b = malloc(n);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++)
        b[i] = (char)(c + i % 7);
    tl_put_file(tl_tmp_path("so"), b, n);
    b[0] ^= 1;
    tl_put_file(tl_tmp_path("a"), b, n);
    free(b);
    chmod(tl_tmp_path("so"), 0755);
    chmod(tl_tmp_path("a"), 0644);
}

static int put(Arena *a, const char *key)
{
    const char *srcs[] = {tl_tmp_path("so"), tl_tmp_path("a")};
    rt_err e = {0, ""};
    int rc = cg_cache_put(a, dir(), key, 2, names, srcs, &e);
    if (rc)
        fail_msg("%s", e.msg);
    return rc;
}

static int get(Arena *a, const char *key)
{
    unlink(tl_tmp_path("so.out"));
    unlink(tl_tmp_path("a.out"));
    const char *dests[] = {tl_tmp_path("so.out"), tl_tmp_path("a.out")};
    return cg_cache_get(a, dir(), key, 2, names, dests);
}

static void same_file(const char *x, const char *y)
{
    size_t nx, ny;
    char *a = tl_get_file(x, &nx), *b = tl_get_file(y, &ny);
    assert_int_equal(nx, ny);
    assert_memory_equal(a, b, nx);
    free(a);
    free(b);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static const char *entry_file(Arena *a, const char *key, const char *name)
{
    return tl_tmp_path(arena_printf(a, "%s/%s/%s", cache, key, name));
}

static void test_round_trip(void **state)
{
    (void)state;
    Arena *a = arena_new();
    const char *k = key_of('1');
    assert_int_equal(get(a, k), 0);                    /* nothing yet */
    sources('a', 100000);
    assert_int_equal(put(a, k), 0);
    assert_int_equal(get(a, k), 1);
    same_file(tl_tmp_path("so"), tl_tmp_path("so.out"));
    same_file(tl_tmp_path("a"), tl_tmp_path("a.out"));
    mode_t mask = umask(0);
    umask(mask);
    struct stat st;
    assert_int_equal(stat(tl_tmp_path("so.out"), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0755 & ~mask);
    assert_int_equal(stat(tl_tmp_path("a.out"), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644 & ~mask);
    assert_int_equal(get(a, key_of('2')), 0);         /* another key misses */
    sources('b', 10);                                  /* storing a key again keeps the first */
    assert_int_equal(put(a, k), 0);
    assert_int_equal(get(a, k), 1);
    sources('a', 100000);
    same_file(tl_tmp_path("so"), tl_tmp_path("so.out"));
    arena_free(a);
}

/* Each kind of damage: the entry is refused, removed, and can be stored again. */
static void test_damage(void **state)
{
    (void)state;
    Arena *a = arena_new();
    const char *k = key_of('3');
    for (int kind = 0; kind < 5; kind++) {
        sources('c', 5000);
        assert_int_equal(put(a, k), 0);
        const char *f = entry_file(a, k, kind % 2 ? "lib.a" : "lib.so");
        if (kind == 0) {                               /* a byte changed */
            int fd = open(f, O_WRONLY);
            assert_true(fd >= 0);
            assert_int_equal(pwrite(fd, "!", 1, 2500), 1);
            close(fd);
        } else if (kind == 1) {                        /* cut short */
            assert_int_equal(truncate(f, 4000), 0);
        } else if (kind == 2) {                        /* missing */
            assert_int_equal(unlink(f), 0);
        } else if (kind == 3) {                        /* no manifest */
            assert_int_equal(unlink(entry_file(a, k, "manifest")), 0);
        } else {                                       /* a manifest of another format */
            tl_put_file(entry_file(a, k, "manifest"), "kiln build cache 0\n", 19);
        }
        assert_int_equal(get(a, k), -1);
        assert_false(exists(tl_tmp_path(arena_printf(a, "%s/%s", cache, k))));
        assert_int_equal(get(a, k), 0);
    }
    assert_int_equal(put(a, k), 0);
    assert_int_equal(get(a, k), 1);
    arena_free(a);
}

/* Sets an entry's time of last use, in seconds from now. */
static void used(Arena *a, const char *key, long ago)
{
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= ago;
    t[1] = t[0];
    const char *entry = tl_tmp_path(arena_printf(a, "%s/%s", cache, key));
    assert_int_equal(utimensat(AT_FDCWD, entry, t, 0), 0);
}

static void test_bounds(void **state)
{
    (void)state;
    Arena *a = arena_new();
    cache = "bounds";
    sources('d', 1000);              /* an entry: 2172 bytes with its manifest */
    const char keys[] = "456789";
    for (int i = 0; i < 6; i++) {
        assert_int_equal(put(a, key_of(keys[i])), 0);
        used(a, key_of(keys[i]), 600 - 100 * i);       /* '4' the oldest */
    }
    assert_int_equal(get(a, key_of('5')), 1);          /* a hit makes '5' the newest */
    cg_cache_trim(a, dir(), 1 << 20, 4);               /* by count: '4' and '6' go */
    assert_int_equal(get(a, key_of('4')), 0);
    used(a, key_of('5'), 0);
    assert_int_equal(get(a, key_of('6')), 0);
    for (int i = 3; i < 6; i++)
        used(a, key_of(keys[i]), 600 - 100 * i);
    used(a, key_of('5'), 0);
    cg_cache_trim(a, dir(), 5000, 100);                /* by bytes: two entries stay */
    assert_int_equal(get(a, key_of('7')), 0);
    assert_int_equal(get(a, key_of('8')), 0);
    assert_int_equal(get(a, key_of('9')), 1);
    assert_int_equal(get(a, key_of('5')), 1);
    used(a, key_of('9'), 10);        /* file times are coarser than two hits apart */
    used(a, key_of('5'), 0);
    cg_cache_trim(a, dir(), 0, 0);                     /* the newest always stays */
    assert_int_equal(get(a, key_of('9')), 0);
    assert_int_equal(get(a, key_of('5')), 1);

    const char *dead = arena_strdup(a, tl_tmp_path("bounds/.tmp-dead"));
    const char *live = arena_strdup(a, tl_tmp_path("bounds/.tmp-live"));
    assert_int_equal(mkdir(dead, 0700), 0);
    assert_int_equal(mkdir(live, 0700), 0);
    tl_put_file(tl_tmp_path("bounds/.tmp-dead/exe"), "x", 1);
    struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
    assert_int_equal(utimensat(AT_FDCWD, dead, old, 0), 0);
    tl_put_file(tl_tmp_path("bounds/README"), "not an entry", 12);
    cg_cache_trim(a, dir(), 1 << 20, 100);
    assert_false(exists(dead));                        /* a dead kiln's */
    assert_true(exists(live));                         /* maybe a kiln storing now */
    assert_true(exists(tl_tmp_path("bounds/README"))); /* not the cache's: left alone */
    cache = "builds";
    arena_free(a);
}

static void test_where(void **state)
{
    (void)state;
    Arena *a = arena_new();
    char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    xdg = xdg ? strdup(xdg) : NULL;
    home = home ? strdup(home) : NULL;
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    setenv("HOME", "/h", 1);
    assert_string_equal(cg_cache_dir(a), "/x/cache/kiln/builds");
    setenv("XDG_CACHE_HOME", "relative", 1);           /* the spec says to ignore it */
    assert_string_equal(cg_cache_dir(a), "/h/.cache/kiln/builds");
    unsetenv("XDG_CACHE_HOME");
    assert_string_equal(cg_cache_dir(a), "/h/.cache/kiln/builds");
    unsetenv("HOME");
    assert_null(cg_cache_dir(a));
    if (xdg)
        setenv("XDG_CACHE_HOME", xdg, 1);
    if (home)
        setenv("HOME", home, 1);
    free(xdg);
    free(home);

    rt_err e = {0, ""};                                /* a cache that cannot be made */
    const char *srcs[] = {tl_tmp_path("so"), tl_tmp_path("a")};
    tl_put_file(tl_tmp_path("plain"), "x", 1);
    assert_int_equal(cg_cache_put(a, tl_tmp_path("plain/builds"), key_of('a'), 2, names, srcs, &e),
                     RT_EIO);
    assert_non_null(strstr(e.msg, "plain"));
    arena_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256), cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_damage), cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_where),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
