/* Probes of the child nsbox-oci's init forks for an exec (attack.h). From the clone until it
 * changes ids the child has init's uid, which the container's process shares, and it holds
 * what init keeps for its children (CAP_SETUID, CAP_SETGID, CAP_SETPCAP) in its permitted
 * set, in init's memory: a process of that uid can stop it there with SIGSTOP, and then must
 * still not reach it. */
#include "attack.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* The name in /proc/PID/stat, between its parentheses, and the state after them. */
static bool stat_of(int pid, char *name, size_t n, char *state)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    char *text = read_file(path, NULL);
    char *open = text ? strchr(text, '(') : NULL, *close = text ? strrchr(text, ')') : NULL;
    if (!open || !close || close < open || close[1] != ' ')
        return false;
    snprintf(name, n, "%.*s", (int)(close - open - 1), open + 1);
    *state = close[2];
    return true;
}

/* CapPrm in /proc/PID/status ("self" for ours); 0 when unread. */
static unsigned long long cap_permitted(const char *pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/status", pid);
    char *st = read_file(path, NULL), *prm = st ? strstr(st, "CapPrm:\t") : NULL;
    return prm ? strtoull(prm + 8, NULL, 16) : 0;
}

/* A stopped process other than init and us that has init's name and capabilities we lack: an
 * exec's child before it has cut its sets. The others stopped (the commands execs ran, a child
 * stopped too late) go on; with all, every one but held does, and none is looked for. */
static int stopped_spawn_child(const char *init_name, bool all, int held)
{
    unsigned long long own = cap_permitted("self");
    DIR *d = opendir("/proc");
    struct dirent *de;
    int found = 0;
    while (d && !found && (de = readdir(d))) {
        int pid = atoi(de->d_name);
        char name[64], state;
        if (pid <= 1 || pid == getpid() || pid == held ||
            !stat_of(pid, name, sizeof name, &state) || state != 'T')
            continue;
        if (!all && !strcmp(name, init_name) && (cap_permitted(de->d_name) & ~own))
            found = pid;
        else
            kill(pid, SIGCONT);
    }
    if (d)
        closedir(d);
    return found;
}

static void open_probe(int pid, const char *what, const char *name)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", pid, what);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    report(name, now(fd), (const int[]){EACCES, EPERM, 0});
    if (fd >= 0)
        close(fd);
}

/* attack catch-spawn: stops every process of our uid until one of them is an exec's child
 * of init, then reports its capabilities ("spawn_caught", CapPrm in the detail) and tries to
 * reach it; lets it go on (SIGCONT) and returns. Run as the container's process, with execs
 * started until it has caught one. With hold: lets every other process go on, and keeps the
 * caught one stopped until the attacker is ended (init must still serve meanwhile). */
int attack_spawn_catch_main(bool hold)
{
    char init_name[64], state;
    if (!stat_of(1, init_name, sizeof init_name, &state))
        return 2;
    int pid = 0;
    while (!pid) {
        for (int i = 0; i < 1000; i++)
            kill(-1, SIGSTOP);
        pid = stopped_spawn_child(init_name, false, 0);
    }
    char spid[16];
    snprintf(spid, sizeof spid, "%d", pid);
    if (hold) {
        stopped_spawn_child(init_name, true, pid);
        emit("spawn_caught", false, "pid %d held", pid);
        for (;;)
            pause();
    }
    emit("spawn_caught", false, "pid %d CapPrm:\t%016llx", pid, cap_permitted(spid));
    report("ptrace_seize_spawn", now(ptrace(PTRACE_SEIZE, pid, 0, 0)), EPERM_ENOSYS);
    char buf[8];
    struct iovec local = {buf, sizeof buf}, remote = {(void *)0x10000, sizeof buf};
    report("process_vm_readv_spawn",
           now(syscall(SYS_process_vm_readv, pid, &local, 1, &remote, 1, 0)), EPERM_ENOSYS);
    long pfd = syscall(SYS_pidfd_open, pid, 0);
    /* its descriptors 0-2 are the exec's streams, then init's own, which it has not closed
     * yet when it was stopped early enough */
    for (int fd = 0; pfd >= 0 && fd < 20; fd++) {
        long got = syscall(SYS_pidfd_getfd, (int)pfd, fd, 0);
        if (got >= 0 || errno != EBADF) {
            char name[40];
            snprintf(name, sizeof name, "pidfd_getfd_spawn_%d", fd);
            report(name, now(got), EPERM_ENOSYS);
        }
        if (got >= 0)
            close((int)got);
    }
    open_probe(pid, "mem", "open_spawn_mem");
    open_probe(pid, "environ", "open_spawn_environ");
    open_probe(pid, "fd/0", "open_spawn_fd");
    open_probe(pid, "root/", "open_spawn_root");
    open_probe(pid, "cwd/", "open_spawn_cwd");
    kill(-1, SIGCONT);
    return 0;
}
