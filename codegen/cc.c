/* codegen/cc.c: builds generated C with the system cc.
 *
 * The C goes to a private temporary directory; cc writes its result to a
 * temporary name beside the destination, which is renamed into place only
 * when everything succeeded, so a failed build never leaves a half-written
 * file and an older one at the destination stays intact. A destination
 * that is a symbolic link has its target replaced, never the link; one
 * that is no regular file (/dev/null, a pipe) is written through by
 * cg_write_file and refused by the builds: renaming over it would replace
 * the device itself.
 *
 * With CgBuild.cache, a build is first looked up in the build cache
 * (cache.c) under a key that is the SHA-256 of everything its result
 * depends on: the generated C, the command lines (flags, the machine's
 * figures, $KILN_CFLAGS_EXTRA, $CC; not the temporary paths), who the
 * compiler is (what `$CC --version` prints, and the path, size and time
 * of its program) and the CPU (for -march=native: /proc/cpuinfo's first
 * processor but its clock). A hit copies the files out; a miss builds
 * and keeps a copy. Either way the result reaches the destination
 * through the same temporary and rename.
 *
 * An executable built with the cache is the model's C alone
 * (cg_emit_linked) linked with an object per runtime part it uses
 * (cg_rt_uses), each itself a cache entry keyed by the part's text, its
 * command and the same compiler and CPU: cc compiles a part once, and
 * then only models. The executable's key holds the parts' keys, so a
 * changed runtime is a miss. With CgBuild.anew as well (kiln check), the
 * model's C is compiled every time and only the parts come from the
 * cache. Without a cache (no $HOME nor
 * $XDG_CACHE_HOME), and for libraries (whose runtime is static, so two
 * models link into one program), the runtime is pasted in as emit-c
 * writes it. */
#include "codegen.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *cg_cflags(Arena *a, const Module *m)
{
    return arena_printf(a, "-O3 -march=%s -fopenmp", m->target ? m->target : "native");
}

const char *cg_cc(void)
{
    const char *cc = getenv("CC");
    return cc && *cc ? cc : "cc";
}

/* $KILN_CFLAGS_EXTRA, or "": more flags for executables, e.g. sanitizers
 * (make test-asan). Split into words by the shell, as $CC is. */
static const char *cflags_extra(void)
{
    const char *x = getenv("KILN_CFLAGS_EXTRA");
    return x ? x : "";
}

/* A private directory for one build's files. */
typedef struct {
    char dir[4096];
} Scratch;

/* The files a build makes in it besides each runtime part's rt_NAME.c
 * and rt_NAME.o, registered as temporaries (interrupt.c) with the
 * directory. */
static const char *const scratch_names[] = {"model.c", "model.o", "cc.log"};

static int scratch_open(Scratch *s, Arena *a, rt_err *err)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(s->dir, sizeof s->dir, "%s/kiln-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(s->dir))
        return rt_errf(err, RT_EIO, "cannot make a temporary directory: %s", strerror(errno));
    cg_tmp_add(s->dir);                   /* then its files: removed before it */
    for (size_t i = 0; i < sizeof scratch_names / sizeof scratch_names[0]; i++)
        cg_tmp_add(arena_printf(a, "%s/%s", s->dir, scratch_names[i]));
    for (int p = 0; p < CG_RT_NPARTS; p++) {
        cg_tmp_add(arena_printf(a, "%s/rt_%s.c", s->dir, cg_rt_parts[p].name));
        cg_tmp_add(arena_printf(a, "%s/rt_%s.o", s->dir, cg_rt_parts[p].name));
    }
    return 0;
}

static char *scratch_path(Scratch *s, Arena *a, const char *name)
{
    return arena_printf(a, "%s/%s", s->dir, name);
}

static void scratch_close(Scratch *s, Arena *a)
{
    for (size_t i = 0; i < sizeof scratch_names / sizeof scratch_names[0]; i++)
        cg_tmp_remove(scratch_path(s, a, scratch_names[i]));
    for (int p = 0; p < CG_RT_NPARTS; p++) {
        cg_tmp_remove(arena_printf(a, "%s/rt_%s.c", s->dir, cg_rt_parts[p].name));
        cg_tmp_remove(arena_printf(a, "%s/rt_%s.o", s->dir, cg_rt_parts[p].name));
    }
    cg_tmp_remove(s->dir);
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

/* Writes text to path; a message names shown (the file the user asked
 * for, when path is its temporary). */
static int write_text(const char *path, const char *shown, const char *text, rt_err *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return rt_errf(err, RT_EIO, "%s: cannot write: %s", shown, strerror(errno));
    size_t len = strlen(text);
    int bad = fwrite(text, 1, len, f) != len;
    bad |= fclose(f) != 0;
    if (bad)
        return rt_errf(err, RT_EIO, "%s: cannot write: %s", shown, strerror(errno));
    return 0;
}

/* Runs a shell command line, its output to log, in a process group of
 * its own (cg_spawn: Ctrl-C reaches cc and what it runs); on failure the
 * first line of the log goes into the message, unless kiln was
 * interrupted: then only that is said. */
static int run(Arena *a, const char *cmd, const char *log, rt_err *err)
{
    char *argv[] = {"sh", "-c", arena_printf(a, "%s >%s 2>&1", cmd, shell_quote(a, log)), NULL};
    int st = 0, e = cg_spawn("/bin/sh", argv, NULL, 1, &st);
    if (cg_interrupted())
        return rt_errf(err, RT_EINTERNAL, "interrupted");
    if (e)
        return rt_errf(err, RT_EIO, "cannot run /bin/sh: %s", strerror(e));
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
    if (WIFSIGNALED(st))
        return rt_errf(err, RT_EINTERNAL, "the C compiler died of signal %d: %s", WTERMSIG(st),
                       line);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (code == 127)
        return rt_errf(err, RT_EIO, "cannot run the C compiler '%s' (set CC)", cg_cc());
    return rt_errf(err, RT_EINTERNAL, "the C compiler failed (status %d): %s", code, line);
}

/* Where a result for path goes. A symbolic link is followed to the file
 * it names, which is replaced while the link stays. *through is set when
 * that is no regular file (/dev/null, /dev/stdout, a pipe, a dangling
 * link): such a file is written through, never replaced, which for root
 * would mean replacing /dev/null. Returns path or the resolved name. */
static const char *dest_of(Arena *a, const char *path, int *through)
{
    struct stat ln, st;
    *through = 0;
    if (lstat(path, &ln) != 0)
        return path;                  /* a new file */
    if (stat(path, &st) != 0 || (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))) {
        *through = 1;
        return path;
    }
    char *real = S_ISLNK(ln.st_mode) ? realpath(path, NULL) : NULL;
    if (!real)
        return path;
    const char *r = arena_strdup(a, real);
    free(real);
    return r;
}

/* dest_of for what only a rename can put in place (an executable, a
 * library): NULL with err set when that is no regular file. */
static const char *regular_dest(Arena *a, const char *path, rt_err *err)
{
    int through;
    const char *dest = dest_of(a, path, &through);
    if (through)
        rt_errf(err, RT_EIO, "%s: not a regular file; kiln replaces only regular files", path);
    return through ? NULL : dest;
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

/* A new empty file beside path, created exclusively, for the result to be
 * renamed from: so a destination where nothing can be created is found
 * before any work, and named (access(2) lets root pass where creating a
 * file still fails, as in /sys). */
static int temp_beside(Arena *a, const char *path, char **tmp, rt_err *err)
{
    static int seq;
    for (int tries = 0; tries < 100; tries++) {
        *tmp = arena_printf(a, "%s.kiln-tmp%ld-%d", path, (long)getpid(), seq++);
        int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            cg_tmp_add(*tmp);     /* its name is kiln's while kiln lives (pid): */
            return close(fd), 0;  /* removed or renamed, it may stay registered */
        }
        if (errno != EEXIST)
            break;
    }
    *tmp = NULL;
    return rt_errf(err, RT_EIO, "%s: cannot write: %s", path, strerror(errno));
}

static int commit(const char *tmp, const char *path, rt_err *err)
{
    if (rename(tmp, path) == 0) {
        cg_tmp_forget(tmp);
        return 0;
    }
    int e = errno;
    unlink(tmp);
    return rt_errf(err, RT_EIO, "%s: %s", path, strerror(e));
}

/* ---- the cache key ------------------------------------------------------ */

/* Where the shell finds cmd (a first word without '/' is looked up in
 * $PATH); NULL when nowhere. */
static const char *program_path(Arena *a, const char *cmd)
{
    const char *word = arena_printf(a, "%.*s", (int)strcspn(cmd, " \t"), cmd);
    if (strchr(word, '/'))
        return word;
    const char *path = getenv("PATH");
    for (const char *d = path ? path : ""; *d;) {
        size_t n = strcspn(d, ":");
        const char *p = arena_printf(a, "%.*s/%s", (int)n, n ? d : ".", word);
        if (access(p, X_OK) == 0)
            return p;
        d += n + (d[n] == ':');
    }
    return NULL;
}

/* Who cc is: what `$CC --version` prints, and the path, size and time of
 * its program (a compiler rebuilt in place may keep its version). */
static const char *cc_identity(Arena *a)
{
    FILE *out = arena_stream(a), *p = popen(arena_printf(a, "%s --version 2>&1", cg_cc()), "r");
    char buf[4096];
    size_t n;
    while (p && (n = fread(buf, 1, sizeof buf, p)) > 0)
        fwrite(buf, 1, n, out);
    if (p)
        fprintf(out, "status %d\n", pclose(p));
    const char *prog = program_path(a, cg_cc());
    struct stat st;
    if (prog && stat(prog, &st) == 0)
        fprintf(out, "%s %lld %lld.%09ld\n", prog, (long long)st.st_size,
                (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
    return arena_stream_text(a, out);
}

/* What -march=native sees: the first processor of /proc/cpuinfo, but its
 * clock, which changes from one moment to the next. */
static const char *cpu_identity(Arena *a)
{
    FILE *out = arena_stream(a), *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    while (f && fgets(line, sizeof line, f) && line[0] != '\n')
        if (strncmp(line, "cpu MHz", 7) != 0)
            fputs(line, out);
    if (f)
        fclose(f);
    return arena_stream_text(a, out);
}

/* A build's place in the cache: dir NULL when it goes without. */
typedef struct {
    const char *dir;
    char key[65];
} Slot;

/* Who builds: the compiler and the CPU, asked once a build. */
static const char *identity(Arena *a)
{
    return arena_printf(a, "%s%s", cc_identity(a), cpu_identity(a));
}

/* The slot of what `commands` make of C text c, by the compiler and CPU
 * `who` (identity). */
static Slot slot_of(const char *dir, const char *commands, const char *who, const char *c)
{
    Slot s = {dir, ""};
    if (!s.dir)
        return s;
    const char *parts[] = {"kiln build cache 2", commands, who, c};
    CgSha256 h;
    cg_sha256_init(&h);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        char len[32];                 /* length-prefixed: no two lists hash alike */
        snprintf(len, sizeof len, "%zu:", strlen(parts[i]));
        cg_sha256_add(&h, len, strlen(len));
        cg_sha256_add(&h, parts[i], strlen(parts[i]));
    }
    cg_sha256_hex(&h, s.key);
    return s;
}

/* The cache a build uses: NULL when none. */
static const char *cache_of(Arena *a, const CgBuild *b)
{
    return !b->cache ? NULL : b->cache_dir ? b->cache_dir : cg_cache_dir(a);
}

static Slot slot(Arena *a, const CgBuild *b, const char *commands, const char *c)
{
    const char *dir = cache_of(a, b);
    return slot_of(dir, commands, dir ? identity(a) : "", c);
}

/* 1 when the files came from the cache. */
static int lookup(Arena *a, const Slot *s, const CgBuild *b, int n, const char *const *names,
                  const char *const *dests)
{
    int got = s->dir ? cg_cache_get(a, s->dir, s->key, n, names, dests) : 0;
    if (got < 0 && !b->quiet)
        fprintf(stderr, "kiln: cache: removed a damaged entry (%s/%s); building again\n", s->dir,
                s->key);
    return got > 0;
}

/* Keeps the built files; failing to is only said. */
static void keep(Arena *a, const Slot *s, const CgBuild *b, int n, const char *const *names,
                 const char *const *srcs)
{
    rt_err e = {0, ""};
    if (s->dir && cg_cache_put(a, s->dir, s->key, n, names, srcs, &e) && !b->quiet)
        fprintf(stderr, "kiln: cache: not kept: %s\n", e.msg);
}

/* ---- the runtime's parts, built once --------------------------------------- */

/* What a part's object is compiled from: the headers it needs (the
 * core's public and internal ones, the other parts' it calls, which
 * cg_rt_uses gives every program that carries it, then its own), then its
 * body; RT_API empty, so its functions are the object's to export. */
static const char *part_text(Arena *a, int p)
{
    int core = p == CG_RT_CORE;
    return arena_printf(a, "#define RT_API\n%s%s%s%s%s%s",
                        core ? "" : cg_rt_parts[CG_RT_CORE].header, core ? "" : cg_rt_core_h,
                        p == CG_RT_GEN ? cg_rt_parts[CG_RT_GGUF].header : "",
                        p == CG_RT_QUANT ? cg_rt_parts[CG_RT_PAIRS].header : "",
                        cg_rt_parts[p].header, cg_rt_parts[p].body);
}

/* Open MPI's flags, compile (`mpicc --showme:compile`) or link
 * (`--showme:link`), with a space before them; asked once each. NULL
 * when mpicc does not answer. */
static const char *mpi_flags(int link)
{
    static char flags[2][2048];
    static int asked[2];
    if (!asked[link]) {
        asked[link] = 1;
        FILE *p = popen(link ? "mpicc --showme:link 2>/dev/null" : "mpicc --showme:compile 2>/dev/null",
                        "r");
        size_t n = p ? fread(flags[link] + 1, 1, sizeof flags[link] - 2, p) : 0;
        int rc = p ? pclose(p) : -1;
        if (rc != 0 || n == 0 || n == sizeof flags[link] - 2)
            asked[link] = 2;
        flags[link][0] = ' ';
        flags[link][n + 1] = 0;
        flags[link][strcspn(flags[link], "\n")] = 0;
    }
    return asked[link] == 1 ? flags[link] : NULL;
}

/* Open MPI's compile and link flags for a program of several ranks ("" for
 * one rank, NULL when mpicc is missing). */
static const char *mpi_words(Arena *a, const Module *m, int link)
{
    if (!(cg_rt_uses(m, CG_CC) >> CG_RT_MPI & 1))
        return "";
    const char *c = mpi_flags(0), *l = mpi_flags(1);
    return c && l ? (link ? arena_printf(a, "%s%s", c, l) : c) : NULL;
}

/* The command that compiles a part's src into obj (shell words): the
 * flags of executables, less what only the model's C reads; MPI's part
 * with Open MPI's. */
static const char *part_command(Arena *a, const char *cflags, int p, const char *obj,
                                const char *src)
{
    const char *mpi = p == CG_RT_MPI ? mpi_flags(0) : "";
    return arena_printf(a, "%s %s %s%s -c -o %s %s", cg_cc(), cflags, cflags_extra(),
                        mpi ? mpi : "", obj, src);
}

/* The runtime as an executable links it: the parts a program uses, each
 * an object in the cache, keyed by its text, its command and who
 * compiles it, so that kiln compiles each once per compiler, flags and
 * runtime. */
typedef struct {
    const char *cflags;            /* cg_cflags */
    unsigned uses;                 /* 1 << CG_RT_* */
    Slot slot[CG_RT_NPARTS];
    const char *obj[CG_RT_NPARTS]; /* its object, once fetched or built */
} Parts;

static void parts_plan(Arena *a, const Module *m, const char *dir, const char *who, Parts *ps)
{
    ps->cflags = cg_cflags(a, m);
    ps->uses = cg_rt_uses(m, CG_CC);
    for (int p = 0; p < CG_RT_NPARTS; p++)
        if (ps->uses >> p & 1)
            ps->slot[p] = slot_of(dir, part_command(a, ps->cflags, p, "OBJ", "SRC"), who,
                                  part_text(a, p));
}

/* The keys of the parts, for the executable's own key. */
static const char *parts_keys(Arena *a, const Parts *ps)
{
    FILE *f = arena_stream(a);
    for (int p = 0; p < CG_RT_NPARTS; p++)
        if (ps->uses >> p & 1)
            fprintf(f, "%s %s\n", cg_rt_parts[p].name, ps->slot[p].key);
    return arena_stream_text(a, f);
}

/* Part p's object in the scratch directory: from the cache, else
 * compiled (said on stderr) and kept there. */
static int part_object(Arena *a, const CgBuild *b, Parts *ps, int p, Scratch *sc, rt_err *err)
{
    static const char *const names[] = {"rt.o"};
    const char *name = cg_rt_parts[p].name;
    const char *obj = scratch_path(sc, a, arena_printf(a, "rt_%s.o", name));
    const char *src = scratch_path(sc, a, arena_printf(a, "rt_%s.c", name));
    const char *const dests[] = {obj};
    ps->obj[p] = obj;
    if (lookup(a, &ps->slot[p], b, 1, names, dests))
        return 0;
    if (!b->quiet)
        fprintf(stderr, "kiln: cc: building the runtime's %s part (once for this compiler, its "
                "flags and this runtime)...\n", name);
    int rc = write_text(src, src, part_text(a, p), err);
    if (!rc)
        rc = run(a, part_command(a, ps->cflags, p, shell_quote(a, obj), shell_quote(a, src)),
                 scratch_path(sc, a, "cc.log"), err);
    if (!rc)
        keep(a, &ps->slot[p], b, 1, names, dests);
    return rc;
}

/* The objects of every part ps uses, into the scratch directory sc. */
static int parts_objects(Arena *a, const CgBuild *b, Parts *ps, Scratch *sc, rt_err *err)
{
    int rc = 0;
    for (int p = 0; p < CG_RT_NPARTS && !rc; p++)
        if (ps->uses >> p & 1)
            rc = part_object(a, b, ps, p, sc, err);
    return rc;
}

int cg_build_parts(const Module *m, const CgBuild *b, rt_err *err)
{
    Arena *a = m->a;
    const char *dir = cache_of(a, b);
    Parts ps = {0};
    Scratch sc;
    if (!dir)
        return 0;
    parts_plan(a, m, dir, identity(a), &ps);
    if (scratch_open(&sc, a, err))
        return err->code;
    int rc = parts_objects(a, b, &ps, &sc, err);
    scratch_close(&sc, a);
    return rc;
}

/* ---- executables ---------------------------------------------------------- */

/* -DKILN_MACHINE={peak,peak1,read,cores} as one shell word with a space
 * before it; "" without figures. */
static const char *machine_flag(Arena *a, const rt_machine *mc)
{
    if (!mc || mc->peak <= 0)
        return "";
    const char *d = arena_printf(a, "-DKILN_MACHINE={%.9g,%.9g,%.9g,%d}", mc->peak, mc->peak1,
                                 mc->read, mc->cores);
    return arena_printf(a, " %s", shell_quote(a, d));
}

/* The command that builds the executable out from src and the objects
 * objs (shell words; "" with the runtime pasted in src). */
/* -DKILN_BUILD_FLAGS="..." as one shell word with a space before it: how
 * the executable was built, which its --version prints (a C string). */
static const char *flags_define(Arena *a, const char *cflags)
{
    const char *v = arena_printf(a, "%s %s%s%s", cg_cc(), cflags, *cflags_extra() ? " " : "",
                                 cflags_extra());
    FILE *f = arena_stream(a);
    fputs("-DKILN_BUILD_FLAGS=\"", f);
    for (const char *p = v; *p; p++)
        fprintf(f, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
    fputc('"', f);
    return arena_printf(a, " %s", shell_quote(a, arena_stream_text(a, f)));
}

static const char *exe_command(Arena *a, const Module *m, const CgBuild *b, const char *out,
                               const char *src, const char *objs)
{
    const char *cflags = cg_cflags(a, m), *mpi = mpi_words(a, m, 1);
    return arena_printf(a, "%s %s%s%s %s -o %s %s%s -lm%s%s", cg_cc(), cflags,
                        machine_flag(a, b->machine), flags_define(a, cflags), cflags_extra(), out,
                        src, objs, cg_rt_libs(cg_rt_uses(m, CG_CC)), mpi ? mpi : "");
}

/* The parts' objects as shell words, each after a space. */
static const char *objs_words(Arena *a, const Parts *ps)
{
    FILE *f = arena_stream(a);
    for (int p = 0; ps && p < CG_RT_NPARTS; p++)
        if (ps->uses >> p & 1)
            fprintf(f, " %s", ps->obj[p] ? shell_quote(a, ps->obj[p]) : "RT");
    return arena_stream_text(a, f);
}

/* C text c compiled into the file tmp, linked with the parts ps (NULL:
 * c holds the runtime). */
static int compile_exe(const Module *m, const CgBuild *b, const char *c, Parts *ps,
                       const char *out, const char *tmp, rt_err *err)
{
    Arena *a = m->a;
    Scratch sc;
    if (scratch_open(&sc, a, err))
        return err->code;
    const char *src = scratch_path(&sc, a, "model.c");
    int rc = ps ? parts_objects(a, b, ps, &sc, err) : 0;
    if (!rc)
        rc = write_text(src, src, c, err);
    if (!b->quiet && !rc)
        fprintf(stderr, "kiln: cc: building %s (%d kernels)...\n", out, m->prog->nkernels);
    if (!rc)
        rc = run(a, exe_command(a, m, b, shell_quote(a, tmp), shell_quote(a, src), objs_words(a, ps)),
                 scratch_path(&sc, a, "cc.log"), err);
    scratch_close(&sc, a);
    return rc;
}

/* With a cache, the model's C alone (cg_emit_linked), linked with the
 * runtime parts' cached objects; without one, the self-contained file. */
int cg_build_exe(const Module *m, const char *out, const CgBuild *b, rt_err *err)
{
    static const char *const names[] = {"exe"};
    Arena *a = m->a;
    char *tmp;
    if (!mpi_words(a, m, 1))
        return rt_errf(err, RT_EIO, "a program of %d ranks needs Open MPI's mpicc, which does not "
                       "answer (make deps installs libopenmpi-dev and openmpi-bin)", cg_ranks(m));
    const char *dest = regular_dest(a, out, err);
    if (!dest || check_dest(dest, err) || temp_beside(a, dest, &tmp, err))
        return err->code;
    double t0 = rt_now();
    const char *dir = cache_of(a, b), *who = dir ? identity(a) : "";
    Parts parts = {0}, *ps = dir ? &parts : NULL;
    if (ps)
        parts_plan(a, m, dir, who, ps);
    const char *c = ps ? cg_emit_linked(m) : cg_emit_string(m, CG_CC);
    const char *const tmps[] = {tmp};
    const char *cmd = exe_command(a, m, b, "OUT", "SRC", objs_words(a, ps));
    /* anew: a slot without a place, neither looked up nor kept */
    Slot s = slot_of(b->anew ? NULL : dir,
                     ps ? arena_printf(a, "%s\n%s", cmd, parts_keys(a, ps)) : cmd, who, c);
    int hit = lookup(a, &s, b, 1, names, tmps);
    int rc = hit ? 0 : compile_exe(m, b, c, ps, out, tmp, err);
    if (!rc && !hit)
        keep(a, &s, b, 1, names, tmps);
    if (!rc)
        rc = commit(tmp, dest, err);
    else
        unlink(tmp);
    if (!b->quiet && !rc && hit)
        fprintf(stderr, "kiln: built %s in %.1f ms (cache hit)\n", out, (rt_now() - t0) * 1e3);
    else if (!b->quiet && !rc)
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

/* text to dest through a temporary beside it, renamed over it; messages
 * name shown. */
static int write_atomic(Arena *a, const char *dest, const char *shown, const char *text,
                        rt_err *err)
{
    char *tmp;
    if (check_dest(dest, err) || temp_beside(a, dest, &tmp, err))
        return err->code;
    if (write_text(tmp, shown, text, err)) {
        unlink(tmp);
        return err->code;
    }
    return commit(tmp, dest, err);
}

char *cg_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n + 4097 > cap) {
            char *nb = realloc(buf, cap = cap * 2 + 8192);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        got = fread(buf + n, 1, 4096, f);
        n += got;
    } while (got == 4096);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

int cg_write_file(const char *path, const char *text, rt_err *err)
{
    Arena *a = arena_new();
    if (!a)
        return rt_errf(err, RT_EINTERNAL, "out of memory");
    int through;
    const char *dest = dest_of(a, path, &through);
    int rc = through ? write_text(path, path, text, err) : write_atomic(a, dest, path, text, err);
    arena_free(a);
    return rc;
}

static int write_header(const Module *m, const char *path, rt_err *err)
{
    FILE *f = arena_stream(m->a);
    cg_emit_header(f, m);
    return cg_write_file(path, arena_stream_text(m->a, f), err);
}

/* NAME.pc beside the library, for pkg-config: its directory found where
 * the file lies (${pcfiledir}), so the folder can move; the archive's
 * OpenMP and libm in Libs.private (pkg-config --static). */
static int write_pc(const Module *m, const char *path, rt_err *err)
{
    const char *text = arena_printf(
        m->a,
        "# pkg-config file of lib%s, built by kiln %s: PKG_CONFIG_PATH=THIS_DIR pkg-config\n"
        "# --cflags --libs %s (the .so; --static for the .a)\n"
        "prefix=${pcfiledir}\nlibdir=${prefix}\nincludedir=${prefix}\n\n"
        "Name: %s\nDescription: the model %s, compiled by kiln (%s)\nVersion: %s\n"
        "Cflags: -I${includedir}\nLibs: -L${libdir} -l%s\nLibs.private: -fopenmp -lm%s\n",
        m->name, KILN_VERSION, m->name, m->name, m->name, cg_cflags(m->a, m), KILN_VERSION,
        m->name, cg_rt_libs(cg_rt_uses(m, CG_CC)));
    return cg_write_file(path, text, err);
}

/* The commands that build the library's object, .so and .a from src.
 * The .so stays mapped after dlclose (-z nodelete, as libgomp's static
 * TLS keeps it): the runtime's pool threads run its code and outlive any
 * call (tests/cli.sh dlcloses one while they spin). */
static void lib_commands(Arena *a, const Module *m, const char *cmd[3], const char *obj,
                         const char *so, const char *ar, const char *src)
{
    cmd[0] = arena_printf(a, "%s %s -fPIC -DKILN_NO_MAIN -c -o %s %s", cg_cc(), cg_cflags(a, m),
                          obj, src);
    cmd[1] = arena_printf(a, "%s -fopenmp -shared -Wl,-z,nodelete -o %s %s -lm%s", cg_cc(), so,
                          obj, cg_rt_libs(cg_rt_uses(m, CG_CC)));
    cmd[2] = arena_printf(a, "ar rcs %s %s", ar, obj);
}

/* C text c compiled into the files so and ar (which does not exist). */
static int compile_lib(const Module *m, const CgBuild *b, const char *c, const char *dir,
                       const char *so, const char *ar, rt_err *err)
{
    Arena *a = m->a;
    Scratch sc;
    if (scratch_open(&sc, a, err))
        return err->code;
    const char *src = scratch_path(&sc, a, "model.c"), *obj = scratch_path(&sc, a, "model.o");
    const char *log = scratch_path(&sc, a, "cc.log"), *cmd[3];
    lib_commands(a, m, cmd, shell_quote(a, obj), shell_quote(a, so), shell_quote(a, ar),
                 shell_quote(a, src));
    int rc = write_text(src, src, c, err);
    if (!b->quiet && !rc)
        fprintf(stderr, "kiln: cc: building lib%s.so and lib%s.a in %s...\n", m->name, m->name,
                dir);
    for (int i = 0; i < 3 && !rc; i++)
        rc = run(a, cmd[i], log, err);
    scratch_close(&sc, a);
    return rc;
}

int cg_build_lib(const Module *m, const char *dir, const CgBuild *b, rt_err *err)
{
    static const char *const names[] = {"lib.so", "lib.a"};
    Arena *a = m->a;
    const char *sep = *dir && dir[strlen(dir) - 1] == '/' ? "" : "/";   /* out/ or out */
    const char *so = arena_printf(a, "%s%slib%s.so", dir, sep, m->name);
    const char *ar = arena_printf(a, "%s%slib%s.a", dir, sep, m->name);
    char *so_tmp = NULL, *ar_tmp = NULL;
    if (make_dir(dir, err) || !(so = regular_dest(a, so, err)) || !(ar = regular_dest(a, ar, err)) ||
        temp_beside(a, so, &so_tmp, err) || temp_beside(a, ar, &ar_tmp, err)) {
        if (so_tmp)
            unlink(so_tmp);
        return err->code;
    }
    double t0 = rt_now();
    const char *c = cg_emit_string(m, CG_CC), *cmd[3];
    const char *const tmps[] = {so_tmp, ar_tmp};
    lib_commands(a, m, cmd, "OBJ", "SO", "AR", "SRC");
    Slot s = slot(a, b, arena_printf(a, "%s\n%s\n%s", cmd[0], cmd[1], cmd[2]), c);
    int hit = lookup(a, &s, b, 2, names, tmps);
    if (!hit)
        unlink(ar_tmp);               /* ar makes an archive only where there is no file */
    int rc = hit ? 0 : compile_lib(m, b, c, dir, so_tmp, ar_tmp, err);
    if (!rc && !hit)
        keep(a, &s, b, 2, names, tmps);
    const char *h = arena_printf(a, "%s%s%s.h", dir, sep, m->name);
    if (!rc)
        rc = write_header(m, h, err);
    if (!rc)
        rc = write_pc(m, arena_printf(a, "%s%s%s.pc", dir, sep, m->name), err);
    if (!rc)
        rc = commit(so_tmp, so, err);
    if (!rc)
        rc = commit(ar_tmp, ar, err);
    unlink(so_tmp);
    unlink(ar_tmp);
    if (!b->quiet && !rc && hit)
        fprintf(stderr, "kiln: built %s, %s, %s and %s.pc in %.1f ms (cache hit)\n", so, ar, h,
                m->name, (rt_now() - t0) * 1e3);
    else if (!b->quiet && !rc)
        fprintf(stderr, "kiln: built %s, %s, %s and %s.pc in %.2f s\n", so, ar, h, m->name,
                rt_now() - t0);
    return rc;
}
