/* codegen/interrupt.c: Ctrl-C (SIGINT), SIGTERM, SIGHUP and SIGQUIT while
 * kiln works.
 *
 * kiln's temporaries (a build's scratch directory and the files in it,
 * the temporary beside a destination, kiln check's and kiln profile's
 * directories) are registered while they exist, and children (cc, a
 * built program) run through cg_spawn. A signal that comes while a child
 * runs is passed on to the child (cc: its process group, which holds
 * cc1, as and ld too) and noted: the child dies, the code waiting for it
 * sees cg_interrupted() and unwinds as from any failure, removing what it
 * made, and the command line dies of the signal at the end. A signal
 * that comes while kiln computes in process (the passes, the reference,
 * the JIT) ends it at once: the handler removes the registered
 * temporaries, newest first (the files before their directory), says so
 * and dies of the signal. Either way the shell sees 128 + the signal: 130
 * for SIGINT, 143 for SIGTERM (SIGQUIT dumps core, as it would have). A second signal while a child ignores the
 * first kills it (SIGKILL). A signal ignored when kiln started (a
 * background job's SIGINT) stays ignored.
 *
 * The handler may run in any thread (the runtime's pool, OpenMP's), even
 * while the main thread registers a temporary, so the registry is a list
 * that only grows: a node is made whole, then published by one atomic
 * store; forgetting one marks it dead. Nodes are never freed (a handful a
 * build). */
#include "codegen.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct Tmp {
    struct Tmp *next;            /* older */
    atomic_int dead;             /* removed or renamed by its owner */
    char path[];
} Tmp;

static _Atomic(Tmp *) tmps;      /* the newest first */
static atomic_int caught;        /* the first signal; 0: none */
/* Whom a signal goes to: 0 nobody (the handler ends kiln), a pid, -pgid
 * (a process group), or STARTING: a child is being started (cg_spawn
 * passes a caught signal on once it has the pid). */
#define STARTING INT_MIN
static atomic_int target;

/* The signals handled, and what kiln says of each. */
static const struct {
    int sig;
    const char *said;
} handled[] = {
    {SIGINT, "kiln: interrupted (SIGINT)\n"},
    {SIGTERM, "kiln: interrupted (SIGTERM)\n"},
    {SIGHUP, "kiln: interrupted (SIGHUP)\n"},
    {SIGQUIT, "kiln: interrupted (SIGQUIT)\n"},
};
#define NHANDLED (sizeof handled / sizeof handled[0])

static const char *message(int sig)
{
    for (size_t i = 0; i < NHANDLED; i++)
        if (handled[i].sig == sig)
            return handled[i].said;
    return "kiln: interrupted\n";
}

/* Removes every live temporary: async-signal-safe (unlink, rmdir). */
static void remove_all(void)
{
    for (Tmp *t = atomic_load(&tmps); t; t = t->next)
        if (!atomic_load(&t->dead) && unlink(t->path) != 0)
            rmdir(t->path);
}

/* Dies of sig, as if it had not been caught. */
static void die(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    sigprocmask(SIG_UNBLOCK, &s, NULL);
    raise(sig);
    _exit(128 + sig);            /* not reached */
}

static void on_signal(int sig)
{
    int e = errno, first = 0;
    atomic_compare_exchange_strong(&caught, &first, sig);
    int to = atomic_load(&target);
    if (to == 0) {
        remove_all();
        const char *msg = message(sig);
        ssize_t n = write(2, msg, strlen(msg));
        (void)n;
        die(sig);
    }
    if (to != STARTING)
        kill(to, first ? SIGKILL : sig);   /* a second signal: it did not die of the first */
    errno = e;
}

void cg_intr_init(void)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;            /* the waits go on until the child is gone */
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NHANDLED; i++)
        sigaddset(&sa.sa_mask, handled[i].sig);
    for (size_t i = 0; i < NHANDLED; i++)
        if (sigaction(handled[i].sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(handled[i].sig, &sa, NULL);
}

int cg_interrupted(void)
{
    return atomic_load(&caught);
}

void cg_intr_die(void)
{
    int sig = cg_interrupted();
    if (!sig)
        return;
    remove_all();
    fputs(message(sig), stderr);
    fflush(stderr);
    die(sig);
}

void cg_tmp_add(const char *path)
{
    size_t len = strlen(path);
    Tmp *t = malloc(sizeof *t + len + 1);
    if (!t)
        return;                          /* left behind if interrupted: no worse than before */
    memcpy(t->path, path, len + 1);
    atomic_init(&t->dead, 0);
    t->next = atomic_load(&tmps);
    while (!atomic_compare_exchange_weak(&tmps, &t->next, t))
        ;
}

void cg_tmp_forget(const char *path)
{
    for (Tmp *t = atomic_load(&tmps); t; t = t->next)
        if (!atomic_load(&t->dead) && strcmp(t->path, path) == 0) {
            atomic_store(&t->dead, 1);
            return;
        }
}

void cg_tmp_remove(const char *path)
{
    if (unlink(path) != 0)
        rmdir(path);
    cg_tmp_forget(path);
}

/* Waits for pid without reaping it, so its pid (and group) cannot be
 * another's while a signal may still be sent to it; then reaps it. */
static int wait_child(pid_t pid, int *status)
{
    siginfo_t si;
    while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0)
        if (errno != EINTR)
            break;
    atomic_store(&target, 0);
    while (waitpid(pid, status, 0) < 0)
        if (errno != EINTR)
            return errno;
    return 0;
}

int cg_spawn(const char *path, char *const *argv, const posix_spawn_file_actions_t *fa, int group,
             int *status)
{
    if (cg_interrupted())
        return EINTR;
    posix_spawnattr_t at;
    int e = posix_spawnattr_init(&at);
    if (e)
        return e;
    if (group)
        e = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);   /* pgroup 0: its own */
    pid_t pid = 0;
    atomic_store(&target, STARTING);
    if (!e)
        e = posix_spawn(&pid, path, fa, &at, argv, environ);
    posix_spawnattr_destroy(&at);
    if (e) {
        atomic_store(&target, 0);
        return e;
    }
    atomic_store(&target, group ? -pid : pid);
    int sig = cg_interrupted();
    if (sig)
        kill(group ? -pid : pid, sig);   /* caught while it was being started */
    return wait_child(pid, status);
}
