/* tests/unit/test_interrupt.c: Ctrl-C and SIGTERM (codegen/interrupt.c),
 * each case in a child process of its own, which the signal ends:
 * interrupted in process, the registered temporaries are removed (files
 * before their directory), a forgotten one stays, and the child dies of
 * the signal; interrupted while cg_spawn waits, the signal reaches the
 * spawned process group, cg_spawn returns with its status and
 * cg_interrupted() says which signal, and nothing more is spawned; a
 * second signal kills a child deaf to the first; a signal ignored before
 * cg_intr_init stays ignored. Files live in a
 * mkdtemp directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codegen/codegen.h"
#include "tests/unit/testlib.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

/* The wait status of child pid. */
static int reap(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        assert_int_equal(errno, EINTR);
    return st;
}

/* Whether pid runs: neither gone nor a zombie (orphaned, it waits for
 * whoever adopts it to reap it). */
static int alive(pid_t pid)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    int ok = f && fgets(line, sizeof line, f);
    if (f)
        fclose(f);
    const char *end = ok ? strrchr(line, ')') : NULL;   /* pid (comm) state ... */
    return end && end[1] == ' ' && end[2] != 'Z' && end[2] != 'X';
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void test_in_process(void **state)
{
    (void)state;
    char dir[4096], file[4200], kept[4096];
    snprintf(dir, sizeof dir, "%s", tl_tmp_path("scratch"));
    snprintf(file, sizeof file, "%s/model.c", dir);
    snprintf(kept, sizeof kept, "%s", tl_tmp_path("kept"));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        cg_intr_init();
        if (mkdir(dir, 0777) != 0)
            _exit(3);
        cg_tmp_add(dir);
        touch(file);
        cg_tmp_add(file);
        touch(kept);
        cg_tmp_add(kept);
        cg_tmp_forget(kept);                 /* renamed into place, say */
        raise(SIGINT);
        _exit(0);                            /* not reached */
    }
    int st = reap(pid);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGINT);
    assert_false(exists(file));
    assert_false(exists(dir));
    assert_true(exists(kept));
}

/* The child: cg_spawn of a shell (ignoring SIGTERM when deaf, and so
 * its sleep) that says it started, then sleeps; exit 0 when it came back
 * dead of the signal it should (SIGTERM, or SIGKILL when deaf), a second
 * cg_spawn refusing to start. */
static int spawn_child(const char *started, int deaf)
{
    cg_intr_init();
    char *cmd = malloc(strlen(started) + 64);
    sprintf(cmd, "%ssleep 30 & echo $! >'%s'; wait", deaf ? "trap '' TERM; " : "", started);
    char *argv[] = {"sh", "-c", cmd, NULL};
    int st = 0, e = cg_spawn("/bin/sh", argv, NULL, 1, &st);
    if (e || !WIFSIGNALED(st) || WTERMSIG(st) != (deaf ? SIGKILL : SIGTERM) ||
        cg_interrupted() != SIGTERM)
        return 1;
    char *again[] = {"true", NULL};
    return cg_spawn("/bin/true", again, NULL, 0, &st) == EINTR ? 0 : 2;
}

/* SIGTERM sent to a child running spawn_child (twice when deaf). */
static void interrupt_spawn(int deaf)
{
    char started[4096];
    snprintf(started, sizeof started, "%s", tl_tmp_path(deaf ? "started-deaf" : "started"));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(spawn_child(started, deaf));
    long sleeper = 0;
    for (int i = 0; i < 300 && !sleeper; i++) {
        pause_ms(20);
        FILE *f = fopen(started, "r");
        if (f && fscanf(f, "%ld", &sleeper) != 1)
            sleeper = 0;
        if (f)
            fclose(f);
    }
    assert_true(sleeper > 0);
    kill(pid, SIGTERM);
    if (deaf) {
        pause_ms(200);
        assert_true(alive((pid_t)sleeper));  /* deaf to the first */
        kill(pid, SIGTERM);
    }
    int st = reap(pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    for (int i = 0; i < 100 && alive((pid_t)sleeper); i++)
        pause_ms(20);                        /* the group's signal on its way */
    assert_false(alive((pid_t)sleeper));
}

static void test_spawn(void **state)
{
    (void)state;
    interrupt_spawn(0);
}

/* A second signal kills a child that ignores the first. */
static void test_second_signal(void **state)
{
    (void)state;
    interrupt_spawn(1);
}

static void test_ignored(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGINT, SIG_IGN);
        cg_intr_init();
        raise(SIGINT);
        _exit(cg_interrupted() ? 1 : 7);
    }
    int st = reap(pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_process),
        cmocka_unit_test(test_spawn),
        cmocka_unit_test(test_second_signal),
        cmocka_unit_test(test_ignored),
    };
    return cmocka_run_group_tests(tests, tl_tmp_setup, tl_tmp_teardown);
}
