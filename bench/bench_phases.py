"""The phases of one `nsbox run -- /bin/true` from perf's kernel tracepoints: the events to
record and how to read them. bench.py's perf_phases records and runs this; standard library
only."""
import re

PERF_EVENTS = ("sched:sched_process_exec,sched:sched_process_fork,sched:sched_process_exit,"
               "syscalls:sys_enter_clone3,syscalls:sys_enter_write,syscalls:sys_exit_write,"
               "syscalls:sys_enter_read,syscalls:sys_exit_read,cgroup:cgroup_attach_task,"
               "syscalls:sys_enter_exit_group,syscalls:sys_exit_wait4")
PERF_LINE = re.compile(r"^\s*(\d+)/(\d+)\s+(\d+\.\d+):\s+([\w:]+):\s*(.*)$")


def phases_of_run(events):
    """One run's phases (ms) from its perf tracepoint events [(tid, t, event, text, pid)]."""
    def first(pred):
        return next((e for e in events if pred(e)), None)

    ex = first(lambda e: e[2] == "sched:sched_process_exec" and "nsbox" in e[3])
    if not ex:
        return None
    P, t0 = ex[0], ex[1]
    # The sandbox's pid 1 is the first child that is a process of its own (pid == tid): nsbox
    # also starts a thread (the workspace job), whose fork event comes first.
    procs = {e[4] for e in events}
    fork = first(lambda e: e[0] == P and e[2] == "sched:sched_process_fork"
                 and int(re.search(r"child_pid=(\d+)", e[3]).group(1)) in procs)
    if not fork:
        return None
    C = int(re.search(r"child_pid=(\d+)", fork[3]).group(1))
    clone = next((e for e in reversed(events[:events.index(fork)])
                  if e[0] == P and e[2] == "syscalls:sys_enter_clone3"), None)
    if not clone:
        return None
    wfork = first(lambda e: e[0] == C and e[2] == "sched:sched_process_fork")
    if not wfork:
        return None
    W = int(re.search(r"child_pid=(\d+)", wfork[3]).group(1))
    wexec = first(lambda e: e[0] == W and e[2] == "sched:sched_process_exec")
    wexit = first(lambda e: e[0] == W and e[2] == "sched:sched_process_exit")
    reaped = first(lambda e: e[0] == P and e[2] == "syscalls:sys_exit_wait4"
                   and int(e[3].split()[-1], 16) == C)
    end = first(lambda e: e[0] == P and e[2] == "syscalls:sys_enter_exit_group")
    if not (wexec and wexit and reaped and end):
        return None
    # The sandbox's pid 1 (C) is moved into its cgroups either by the parent (writes its pid to
    # cgroup.procs) or by itself (writes "0" to tasks); the tracepoint fires in the mover.
    attaches = [e for e in events if e[2] == "cgroup:cgroup_attach_task"
                and ("pid=%d " % C) in e[3] + " "]
    r = {}
    r["nsbox exec -> clone (startup, spec, state dirs, mount plan, seccomp, cgroup mkdirs)"] = \
        (clone[1] - t0) * 1e3
    joined = clone[1]
    if attaches:
        mover = attaches[0][0]
        i = events.index(attaches[0])
        w0 = next((e for e in reversed(events[:i]) if e[0] == mover and
                   e[2] == "syscalls:sys_enter_write"), None)
        t_w0 = w0[1] if w0 else attaches[0][1]
        joined = attaches[-1][1]
        if mover == P:
            # The child's read that was waiting when the last attach finished: its idle time.
            reads = [e for e in events if e[0] == C and e[2] in ("syscalls:sys_enter_read",
                                                                "syscalls:sys_exit_read")]
            idle, ready = 0.0, None
            for a_, b_ in zip(reads, reads[1:]):
                if (a_[2].endswith("enter_read") and b_[2].endswith("exit_read")
                        and a_[1] <= joined <= b_[1]):
                    idle, ready = (b_[1] - a_[1]) * 1e3, a_[1]
            r["clone -> child's root ready (id maps, mounts, pivot_root, hostname, lo)"] = \
                ((ready if ready else joined) - clone[1]) * 1e3
            r["parent: first cgroup.procs write (in parallel with the above)"] = \
                (attaches[0][1] - t_w0) * 1e3
            r["parent: all %d cgroup moves" % len(attaches)] = (joined - t_w0) * 1e3
            r["child idle, waiting for the cgroup join"] = idle
            r["cgroup joined -> workload exec (cgroup ns, fork, rlimits, caps, seccomp)"] = \
                (wexec[1] - joined) * 1e3
        else:
            r["clone -> child starts moving itself (id maps, sync)"] = (t_w0 - clone[1]) * 1e3
            r["child: first move (\"0\" > tasks)"] = (attaches[0][1] - t_w0) * 1e3
            r["child: all %d cgroup moves" % len(attaches)] = (joined - t_w0) * 1e3
            r["cgroup joined -> workload exec (mounts, pivot_root, hostname, lo, cgroup ns, "
              "fork, rlimits, caps, seccomp)"] = (wexec[1] - joined) * 1e3
    else:
        r["clone -> workload exec"] = (wexec[1] - clone[1]) * 1e3
    r["workload exec -> exit (/bin/true itself)"] = (wexit[1] - wexec[1]) * 1e3
    r["workload exit -> parent reaped sandbox pid 1"] = (reaped[1] - wexit[1]) * 1e3
    r["reaped -> nsbox exit (cgroup rmdirs, state and workspace removal)"] = \
        (end[1] - reaped[1]) * 1e3
    r["total (nsbox exec -> exit)"] = (end[1] - t0) * 1e3
    return r
