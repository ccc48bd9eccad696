/* The kernel's floor for a sandbox's namespaces on this machine: two processes, each cloning
 * a child into new user, pid, mount, network, UTS and IPC namespaces (what every nsbox sandbox
 * has) that exits at once, and waiting for it, for SECONDS. No exec, no mount, no cgroup: what
 * no design that makes fresh namespaces per sandbox can beat. Prints the total per second.
 *
 *     cc -O2 -o clone_floor bench/clone_floor.c && ./clone_floor [SECONDS] [-]
 *
 * With "-" the clone makes no namespace (a plain fork's cost). bench_sessions.py compiles and
 * runs it as a reference row. */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char child_stack[64 * 1024] __attribute__((aligned(16)));

static int child_main(void *arg)
{
    (void)arg;
    return 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 3.0;
    int flags = argc > 2 && !strcmp(argv[2], "-")
                    ? 0
                    : CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS |
                          CLONE_NEWIPC;
    if (seconds <= 0)
        seconds = 3.0;
    int counts[2];
    if (pipe(counts) < 0)
        return perror("pipe"), 1;
    for (int c = 0; c < 2; c++) {
        pid_t w = fork();
        if (w < 0)
            return perror("fork"), 1;
        if (w > 0)
            continue;
        long n = 0;
        for (double end = now_s() + seconds; now_s() < end; n++) {
            pid_t p = clone(child_main, child_stack + sizeof child_stack, flags | SIGCHLD, NULL);
            int status;
            if (p < 0 || waitpid(p, &status, 0) != p || !WIFEXITED(status)) {
                perror("clone");
                _exit(1);
            }
        }
        _exit(write(counts[1], &n, sizeof n) == (ssize_t)sizeof n ? 0 : 1);
    }
    close(counts[1]);
    long total = 0, n;
    for (int c = 0; c < 2; c++)
        if (read(counts[0], &n, sizeof n) == (ssize_t)sizeof n)
            total += n;
    int failed = 0, status;
    while (wait(&status) > 0)
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    if (failed)
        return 1;
    printf("%.0f\n", (double)total / seconds);
    return 0;
}
