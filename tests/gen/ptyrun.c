/* tests/gen/ptyrun.c: runs a command on a pseudo-terminal and plays a
 * script at it, as a person at a terminal would, for tests/chat.sh.
 *
 *   ptyrun SCRIPT COMMAND [ARG...]
 *
 * The command runs in a new session whose controlling terminal is the
 * pty's slave (so ^C typed is SIGINT to it, ^D is the end of input). Its
 * output (stdout and stderr both, as on a terminal) is copied to ptyrun's
 * stdout as it comes. SCRIPT has one step a line:
 *   send TEXT     types TEXT; \n, \r, \\, \xHH escapes (\x03 is ^C, \x04 ^D)
 *   expect TEXT   waits until TEXT has appeared in the output since the
 *                 last expect's match (escapes as send's)
 *   sleep MS      waits MS milliseconds
 *   # ...         a comment
 * After the script ptyrun waits for the command to end and prints
 * "\n[exit N]" (or "\n[signal N]"). A step that times out (60 s, or
 * PTYRUN_TIMEOUT seconds) kills the command and says which; ptyrun's
 * status is then 1, else 0. */
#define _XOPEN_SOURCE 700
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static char seen[1 << 20];              /* the output since the last match */
static size_t nseen;
static int master = -1;
static pid_t child;
static double timeout = 60;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Output that is there within ms milliseconds, copied and kept; -1 at
 * the end of it (the command has closed the terminal). */
static int pump(int ms)
{
    struct pollfd p = {master, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0)
        return 0;
    char buf[4096];
    ssize_t k = read(master, buf, sizeof buf);
    if (k <= 0)
        return -1;
    fwrite(buf, 1, (size_t)k, stdout);
    fflush(stdout);
    if (nseen + (size_t)k >= sizeof seen) {   /* keep the newest half */
        memmove(seen, seen + nseen / 2, nseen - nseen / 2);
        nseen -= nseen / 2;
    }
    memcpy(seen + nseen, buf, (size_t)k);
    nseen += (size_t)k;
    seen[nseen] = 0;
    return (int)k;
}

/* TEXT with its escapes undone into out; its length. */
static size_t unescape(const char *s, char *out)
{
    size_t n = 0;
    while (*s) {
        if (s[0] == '\\' && (s[1] == 'n' || s[1] == 'r')) {
            out[n++] = s[1] == 'n' ? '\n' : '\r';
            s += 2;
        } else if (s[0] == '\\' && s[1] == 'x' && s[2] && s[3]) {
            char hex[3] = {s[2], s[3], 0};
            out[n++] = (char)strtol(hex, NULL, 16);
            s += 4;
        } else if (s[0] == '\\' && s[1] == '\\') {
            out[n++] = '\\';
            s += 2;
        } else {
            out[n++] = *s++;
        }
    }
    out[n] = 0;
    return n;
}

static void fail(const char *what, const char *arg)
{
    fprintf(stdout, "\n[ptyrun: %s '%s' timed out after %.0f s]\n", what, arg, timeout);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    exit(1);
}

static void expect(const char *text)
{
    double end = now() + timeout;
    char *hit;
    while (!(hit = memmem(seen, nseen, text, strlen(text)))) {
        if (now() > end || pump(100) < 0)
            fail("expect", text);
    }
    size_t used = (size_t)(hit - seen) + strlen(text);
    memmove(seen, seen + used, nseen - used);
    nseen -= used;
}

static void start(char **argv)
{
    master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) || unlockpt(master)) {
        perror("ptyrun: posix_openpt");
        exit(2);
    }
    const char *slave = ptsname(master);
    child = fork();
    if (child < 0) {
        perror("ptyrun: fork");
        exit(2);
    }
    if (child == 0) {
        setsid();
        int s = open(slave, O_RDWR);
        if (s < 0 || ioctl(s, TIOCSCTTY, 0) < 0)
            _exit(127);
        dup2(s, 0);
        dup2(s, 1);
        dup2(s, 2);
        if (s > 2)
            close(s);
        close(master);
        execvp(argv[0], argv);
        _exit(127);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ptyrun SCRIPT COMMAND [ARG...]\n");
        return 2;
    }
    if (getenv("PTYRUN_TIMEOUT"))
        timeout = atof(getenv("PTYRUN_TIMEOUT"));
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    start(argv + 2);
    char line[4096], text[4096];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "send ", 5)) {
            size_t n = unescape(line + 5, text);
            if (write(master, text, n) != (ssize_t)n)
                fail("send", line + 5);
        } else if (!strncmp(line, "expect ", 7)) {
            unescape(line + 7, text);
            expect(text);
        } else if (!strncmp(line, "sleep ", 6)) {
            double end = now() + atoi(line + 6) / 1e3;
            while (now() < end && pump(10) >= 0)
                ;
        }
    }
    fclose(f);
    double end = now() + timeout;
    int st;
    while (waitpid(child, &st, WNOHANG) == 0) {
        if (now() > end)
            fail("waiting for the end", argv[2]);
        pump(50);
    }
    while (pump(0) > 0)
        ;
    if (WIFEXITED(st))
        printf("\n[exit %d]\n", WEXITSTATUS(st));
    else
        printf("\n[signal %d]\n", WTERMSIG(st));
    return 0;
}
