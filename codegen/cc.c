/* codegen/cc.c: builds generated C with the system cc.
 *
 * The C goes to a private temporary directory; cc writes its result to a
 * temporary name beside the destination, which is renamed into place only
 * when everything succeeded, so a failed build never leaves a half-written
 * file and an older one at the destination stays intact. */
#include "codegen.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *cg_cc(void)
{
    const char *cc = getenv("CC");
    return cc && *cc ? cc : "cc";
}

/* A private directory for one build's files. */
typedef struct {
    char dir[4096];
} Scratch;

static int scratch_open(Scratch *s, rt_err *err)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(s->dir, sizeof s->dir, "%s/kiln-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(s->dir))
        return rt_errf(err, RT_EIO, "cannot make a temporary directory: %s", strerror(errno));
    return 0;
}

static char *scratch_path(Scratch *s, Arena *a, const char *name)
{
    return arena_printf(a, "%s/%s", s->dir, name);
}

static void scratch_close(Scratch *s, Arena *a)
{
    static const char *names[] = {"model.c", "model.o", "cc.log"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unlink(scratch_path(s, a, names[i]));
    rmdir(s->dir);
}

/* A string as one single-quoted shell word. */
static char *shell_quote(Arena *a, const char *s)
{
    size_t n = 3;
    for (const char *p = s; *p; p++)
        n += *p == '\'' ? 4 : 1;
    char *q = arena_alloc(a, n), *o = q;
    *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    return q;
}

static int write_text(const char *path, const char *text, rt_err *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return rt_errf(err, RT_EIO, "%s: %s", path, strerror(errno));
    size_t len = strlen(text);
    int bad = fwrite(text, 1, len, f) != len;
    bad |= fclose(f) != 0;
    if (bad)
        return rt_errf(err, RT_EIO, "%s: %s", path, strerror(errno));
    return 0;
}

/* Runs a shell command line, its output to log; on failure the first line
 * of the log goes into the message. */
static int run(Arena *a, const char *cmd, const char *log, rt_err *err)
{
    int st = system(arena_printf(a, "%s >%s 2>&1", cmd, shell_quote(a, log)));
    if (st == 0)
        return 0;
    char line[300] = "";
    FILE *f = fopen(log, "r");
    if (f) {
        if (!fgets(line, sizeof line, f))
            line[0] = 0;
        fclose(f);
    }
    line[strcspn(line, "\n")] = 0;
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (code == 127)
        return rt_errf(err, RT_EIO, "cannot run the C compiler '%s' (set CC)", cg_cc());
    return rt_errf(err, RT_EINTERNAL, "the C compiler failed (status %d): %s", code, line);
}

/* A destination must be a writable place in an existing directory. */
static int check_dest(const char *path, rt_err *err)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return rt_errf(err, RT_EIO, "%s: is a directory", path);
    char *dir = strdup(path);
    if (!dir)
        return rt_errf(err, RT_EINTERNAL, "out of memory");
    char *slash = strrchr(dir, '/');
    const char *d = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
    int ok = stat(d, &st) == 0 && S_ISDIR(st.st_mode);
    int wr = ok && access(d, W_OK) == 0;
    int e = errno;
    free(dir);
    if (!ok)
        return rt_errf(err, RT_EIO, "%s: the directory does not exist", path);
    if (!wr)
        return rt_errf(err, RT_EIO, "%s: %s", path, strerror(e));
    return 0;
}

static char *temp_beside(Arena *a, const char *path)
{
    static int seq;
    return arena_printf(a, "%s.kiln-tmp%ld-%d", path, (long)getpid(), seq++);
}

static int commit(const char *tmp, const char *path, rt_err *err)
{
    if (rename(tmp, path) == 0)
        return 0;
    int e = errno;
    unlink(tmp);
    return rt_errf(err, RT_EIO, "%s: %s", path, strerror(e));
}

int cg_build_exe(const Module *m, const char *out, int quiet, rt_err *err)
{
    Arena *a = m->a;
    if (check_dest(out, err))
        return err->code;
    Scratch s;
    if (scratch_open(&s, err))
        return err->code;
    double t0 = rt_now();
    const char *src = scratch_path(&s, a, "model.c"), *tmp = temp_beside(a, out);
    int rc = write_text(src, cg_emit_string(m, CG_CC), err);
    if (!quiet && !rc)
        fprintf(stderr, "kiln: cc: building %s (%d kernels)...\n", out, m->prog->nkernels);
    if (!rc)
        rc = run(a, arena_printf(a, "%s " CG_CFLAGS " -o %s %s -lm", cg_cc(), shell_quote(a, tmp),
                                 shell_quote(a, src)), scratch_path(&s, a, "cc.log"), err);
    if (!rc)
        rc = commit(tmp, out, err);
    else
        unlink(tmp);
    scratch_close(&s, a);
    if (!quiet && !rc)
        fprintf(stderr, "kiln: built %s in %.2f s\n", out, rt_now() - t0);
    return rc;
}

static int make_dir(const char *dir, rt_err *err)
{
    if (mkdir(dir, 0777) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
            return 0;
        return rt_errf(err, RT_EIO, "%s: not a directory", dir);
    }
    return rt_errf(err, RT_EIO, "%s: %s", dir, strerror(errno));
}

int cg_write_file(const char *path, const char *text, rt_err *err)
{
    if (check_dest(path, err))
        return err->code;
    Arena *a = arena_new();
    if (!a)
        return rt_errf(err, RT_EINTERNAL, "out of memory");
    char *tmp = temp_beside(a, path);
    int rc = write_text(tmp, text, err);
    rc = rc ? (unlink(tmp), rc) : commit(tmp, path, err);
    arena_free(a);
    return rc;
}

static int write_header(const Module *m, const char *path, rt_err *err)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return rt_errf(err, RT_EINTERNAL, "out of memory");
    cg_emit_header(f, m);
    fclose(f);
    char *tmp = temp_beside(m->a, path);
    int rc = write_text(tmp, buf, err);
    free(buf);
    return rc ? (unlink(tmp), rc) : commit(tmp, path, err);
}

int cg_build_lib(const Module *m, const char *dir, int quiet, rt_err *err)
{
    Arena *a = m->a;
    if (make_dir(dir, err))
        return err->code;
    Scratch s;
    if (scratch_open(&s, err))
        return err->code;
    double t0 = rt_now();
    const char *src = scratch_path(&s, a, "model.c"), *obj = scratch_path(&s, a, "model.o");
    const char *log = scratch_path(&s, a, "cc.log");
    const char *so = arena_printf(a, "%s/lib%s.so", dir, m->name);
    const char *ar = arena_printf(a, "%s/lib%s.a", dir, m->name);
    const char *so_tmp = temp_beside(a, so), *ar_tmp = temp_beside(a, ar);
    int rc = write_text(src, cg_emit_string(m, CG_CC), err);
    if (!quiet && !rc)
        fprintf(stderr, "kiln: cc: building lib%s.so and lib%s.a in %s...\n", m->name, m->name, dir);
    if (!rc)
        rc = run(a, arena_printf(a, "%s " CG_CFLAGS " -fPIC -DKILN_NO_MAIN -c -o %s %s", cg_cc(),
                                 shell_quote(a, obj), shell_quote(a, src)), log, err);
    if (!rc)
        rc = run(a, arena_printf(a, "%s -fopenmp -shared -o %s %s -lm", cg_cc(),
                                 shell_quote(a, so_tmp), shell_quote(a, obj)), log, err);
    if (!rc)
        rc = run(a, arena_printf(a, "ar rcs %s %s", shell_quote(a, ar_tmp), shell_quote(a, obj)),
                 log, err);
    if (!rc)
        rc = write_header(m, arena_printf(a, "%s/%s.h", dir, m->name), err);
    if (!rc)
        rc = commit(so_tmp, so, err);
    if (!rc)
        rc = commit(ar_tmp, ar, err);
    unlink(so_tmp);
    unlink(ar_tmp);
    scratch_close(&s, a);
    if (!quiet && !rc)
        fprintf(stderr, "kiln: built %s, %s and %s/%s.h in %.2f s\n", so, ar, dir, m->name,
                rt_now() - t0);
    return rc;
}
