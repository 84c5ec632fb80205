/* bench/util.c: what the benchmark runner's parts share: the
 * statistics of a set of timings, reading what rt_main and /proc/cpuinfo
 * print, a private scratch directory, and small programs compiled with the
 * system cc and run as children (argv, not a shell: no quoting). */
#include "bench/bench.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- statistics and parsing -------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

BenchTime bench_stats(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return (BenchTime){med, v[0], v[n - 1], n};
}

int bench_parse_repeat(const char *text, BenchTime *t)
{
    for (const char *p = strstr(text, " runs: median "); p; p = strstr(p + 1, " runs: median ")) {
        const char *num = p;
        while (num > text && num[-1] >= '0' && num[-1] <= '9')
            num--;
        int runs;
        double med, mn, mx;
        if (num < p && sscanf(num, "%d runs: median %lf ms, min %lf ms, max %lf ms", &runs, &med,
                              &mn, &mx) == 4 && runs > 0) {
            *t = (BenchTime){med / 1e3, mn / 1e3, mx / 1e3, runs};
            return 0;
        }
    }
    return -1;
}

void bench_cpu_model(const char *cpuinfo, char *out, size_t size)
{
    const char *line = cpuinfo;
    while (line && strncmp(line, "model name", 10) != 0) {
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    const char *v = line ? line + strcspn(line, ":\n") : NULL;
    size_t k = 0;
    if (v && *v == ':')
        for (v++; *v && *v != '\n' && k + 1 < size; v++)
            if ((*v != ' ' && *v != '\t') || (k && out[k - 1] != ' '))
                out[k++] = *v == '\t' ? ' ' : *v;
    while (k && out[k - 1] == ' ')
        k--;
    out[k] = 0;
    if (!k)
        snprintf(out, size, "unknown");
}

void bench_progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kiln: bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

/* ---- scratch directories -------------------------------------------------- */

int bench_dir_open(char *dir, rt_err *err)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, 4096, "%s/kiln-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return rt_errf(err, RT_EIO, "cannot make a temporary directory: %s", strerror(errno));
    return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void bench_dir_remove(const char *dir)
{
    if (dir && dir[0])
        nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- children ------------------------------------------------------------- */

static void redirect(int fd, const char *path, int flags)
{
    int f = open(path, flags, 0600);
    if (f >= 0) {
        dup2(f, fd);
        close(f);
    }
}

extern char **environ;

/* kiln's environment plus the settings of env it lacks (malloc'd array,
 * borrowed strings); NULL when out of memory. */
static char **child_environ(const char *const *env)
{
    size_t n = 0, k = 0;
    while (environ[n])
        n++;
    for (size_t i = 0; env[i]; i++)
        k++;
    char **v = calloc(n + k + 1, sizeof *v);
    if (!v)
        return NULL;
    memcpy(v, environ, n * sizeof *v);
    for (size_t i = 0; i < k; i++) {
        size_t eq = strcspn(env[i], "="), j = 0;
        while (j < n && !(strncmp(environ[j], env[i], eq) == 0 && environ[j][eq] == '='))
            j++;
        if (j == n)
            v[n++] = (char *)env[i];
    }
    return v;
}

int bench_spawn(char *const *argv, const char *const *env, const char *out, const char *errf)
{
    char **envp = env ? child_environ(env) : NULL;
    if (env && !envp)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        redirect(0, "/dev/null", O_RDONLY);
        if (out)
            redirect(1, out, O_WRONLY | O_CREAT | O_TRUNC);
        if (errf && out && strcmp(errf, out) == 0)
            dup2(1, 2);
        else if (errf)
            redirect(2, errf, O_WRONLY | O_CREAT | O_TRUNC);
        if (envp)
            environ = envp;
        execvp(argv[0], argv);
        _exit(127);
    }
    free(envp);
    int st;
    while (pid > 0 && waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return pid > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The first line of a compiler log that names a problem. */
static void complaint(const char *log, char *line, size_t size)
{
    char *text = cg_read_file(log, NULL);
    const char *p = text ? text : "";
    const char *hit = strstr(p, "error");
    if (hit) {
        while (hit > p && hit[-1] != '\n')
            hit--;
        p = hit;
    }
    snprintf(line, size, "%.*s", (int)strcspn(p, "\n"), p);
    free(text);
}

int bench_compile(const char *src, const char *exe, const char *const *extra, int nextra,
                     rt_err *err)
{
    /* $CC may hold words of its own ("ccache gcc"); paths are never split */
    char *cc = strdup(cg_cc()), *flags = strdup(CG_CFLAGS), *log = malloc(strlen(exe) + 5);
    char **argv = calloc(strlen(cg_cc()) + sizeof CG_CFLAGS + (size_t)nextra + 8, sizeof *argv);
    int n = 0, rc = 0;
    if (!cc || !flags || !log || !argv) {
        rc = rt_errf(err, RT_EINTERNAL, "out of memory");
        goto done;
    }
    for (char *w = strtok(cc, " \t"); w; w = strtok(NULL, " \t"))
        argv[n++] = w;
    for (char *w = strtok(flags, " "); w; w = strtok(NULL, " "))
        argv[n++] = w;
    argv[n++] = "-o";
    argv[n++] = (char *)exe;
    argv[n++] = (char *)src;
    for (int i = 0; i < nextra; i++)
        argv[n++] = (char *)extra[i];
    argv[n++] = "-lm";
    sprintf(log, "%s.log", exe);
    int st = bench_spawn(argv, NULL, log, log);
    if (st == 127) {
        rc = rt_errf(err, RT_EIO, "cannot run the C compiler '%s' (set CC)", cg_cc());
    } else if (st != 0) {
        char line[400];
        complaint(log, line, sizeof line);
        rc = rt_errf(err, RT_EINTERNAL, "the C compiler failed (status %d): %s", st, line);
    }
done:
    free(cc);
    free(flags);
    free(log);
    free(argv);
    return rc;
}
