#!/usr/bin/env python3
"""The phases of `nsbox create` + `nsbox rm`, in wall-clock ms, from perf's kernel tracepoints.

    sudo python3 bench/create_phases.py [--cycles 40]

One client runs create + rm cycles one after the other (as the command line does, from a shell
loop) under `perf record -a` of a few scheduler and system-call tracepoints; the events of the
loop's own process tree (the commands, their supervisors, the sandboxes' init and the
workspace thread) mark each phase's start and end. Printed: per phase, the median over the
cycles and the range. The workspace thread runs beside the supervisor's own preparation, so
those two rows overlap; the others follow each other. Wall time, not CPU: on a shared machine a
phase includes the waits for a CPU and for the disk. Needs root (ext4 workspaces, perf) and
nsbox built (`$NSBOX_BIN`, else build/nsbox). Sandboxes live in a `mktemp -d` state and cache
directory of their own, removed at the end.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
NSBOX = os.path.abspath(os.environ.get("NSBOX_BIN") or os.path.join(HERE, "..", "build", "nsbox"))

EVENTS = ("sched:sched_process_exec,sched:sched_process_fork,sched:sched_process_exit,"
          "syscalls:sys_enter_clone3,syscalls:sys_exit_fsmount,syscalls:sys_enter_pivot_root,"
          "syscalls:sys_exit_seccomp,syscalls:sys_exit_bind,syscalls:sys_enter_sendto,"
          "syscalls:sys_enter_pidfd_send_signal,syscalls:sys_exit_wait4,syscalls:sys_enter_mkdir,"
          "syscalls:sys_enter_connect")
LINE = re.compile(r"\s*(\S.*?)\s+(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)$")

# (from, to, what): the marks are set by mark() below
STEPS = [
    ("create_exec", "fork_sup", "`nsbox create`: exec to the supervisor's fork"),
    ("fork_sup", "mkdir_state", "supervisor: start to its state directory (image, config)"),
    ("mkdir_state", "thread", "state directory, uid slot; the workspace thread starts"),
    ("thread", "fsmount", "workspace thread: backing file, template copy, loop device, mount"),
    ("thread", "clone_child", "supervisor meanwhile: seccomp, cgroups; the thread joined"),
    ("clone_child", "pivot", "child: id maps, cgroups joined, mount plan, to pivot_root"),
    ("pivot", "seccomp", "child: hostname, lo, rlimits, capabilities, seccomp"),
    ("seccomp", "bind", "init ready, workspace handed over, control socket bound"),
    ("bind", "ok", "the id written to create's stdout, OK sent"),
    ("ok", "create_exit", "`nsbox create`: OK to its exit"),
    ("create_exec", "create_exit", "**create** (exec to exit)"),
    ("create_exit", "rm_exec", "the shell: create's exit to rm's exec"),
    ("rm_exec", "rm_connect", "`nsbox rm`: exec to connect"),
    ("rm_connect", "kill", "delete request and reply, to the kill of init"),
    ("kill", "reaped", "init's death (its namespaces)"),
    ("reaped", "sup_exit", "cgroups, backing file, state directory, workspace unmount, exit"),
    ("sup_exit", "rm_exit", "`nsbox rm`: the hang-up to its exit"),
    ("rm_exec", "rm_exit", "**rm** (exec to exit)"),
    ("create_exec", "rm_exit", "**the cycle**"),
]


def mark(cur, t, comm, pid, tid, ev, text):
    """Set the phase marks of the cycle cur that this event is."""
    sup = cur.get("sup")
    if ev == "sched:sched_process_fork" and pid == cur["create_pid"] and sup is None:
        cur["sup"] = int(re.search(r"child_pid=(\d+)", text).group(1))
        cur["fork_sup"] = t
    elif tid == sup and ev == "syscalls:sys_enter_mkdir":
        cur.setdefault("mkdir_state", t)
    elif tid == sup and ev == "syscalls:sys_enter_clone3":
        cur["clone_child" if "thread" in cur else "thread"] = t
    elif pid == sup and tid != sup and ev == "syscalls:sys_exit_fsmount":
        cur["fsmount"] = t
    elif sup and tid != sup and ev == "syscalls:sys_enter_pivot_root":
        cur["pivot"] = t
    elif sup and tid != sup and ev == "syscalls:sys_exit_seccomp":
        cur["seccomp"] = t
    elif tid == sup and ev == "syscalls:sys_exit_bind":
        cur["bind"] = t
    elif tid == sup and ev == "syscalls:sys_enter_sendto":
        cur.setdefault("ok", t)
    elif pid == cur["create_pid"] and ev == "sched:sched_process_exit":
        cur["create_exit"] = t
    elif pid == cur.get("rm_pid") and ev == "syscalls:sys_enter_connect":
        cur["rm_connect"] = t
    elif tid == sup and ev == "syscalls:sys_enter_pidfd_send_signal":
        cur["kill"] = t
    elif tid == sup and ev == "syscalls:sys_exit_wait4" and "kill" in cur:
        cur.setdefault("reaped", t)
    elif tid == sup and ev == "sched:sched_process_exit":
        cur["sup_exit"] = t
    elif pid == cur.get("rm_pid") and ev == "sched:sched_process_exit":
        cur["rm_exit"] = t


def cycles_of(events, root, binary):
    """The cycles' marks (ms) from the events [(t, comm, pid, tid, event, text)] of the whole
    machine: those of root's process tree only."""
    ours = {root}
    for t, comm, pid, tid, ev, text in events:
        if ev == "sched:sched_process_fork" and pid in ours:
            ours.add(int(re.search(r"child_pid=(\d+)", text).group(1)))
    cycles, cur = [], None
    for t, comm, pid, tid, ev, text in events:
        if pid not in ours and tid not in ours:
            continue
        if ev == "sched:sched_process_exec" and "filename=" + binary in text:
            if cur is None or "rm_exec" in cur:
                cur = {"create_exec": t, "create_pid": pid}
                cycles.append(cur)
            else:
                cur["rm_exec"], cur["rm_pid"] = t, pid
        elif cur is not None:
            mark(cur, t, comm, pid, tid, ev, text)
    return [c for c in cycles if all(k in c for s in STEPS for k in s[:2])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=40)
    a = ap.parse_args()
    if not os.path.exists(NSBOX) or not shutil.which("perf"):
        sys.exit("needs nsbox built (%s, or NSBOX_BIN) and perf" % NSBOX)
    base = tempfile.mkdtemp(prefix="nsbox-phases-")
    env = dict(os.environ, NSBOX_STATE_DIR=os.path.join(base, "state"),
               NSBOX_CACHE_DIR=os.path.join(base, "cache"), NSB=NSBOX)
    os.makedirs(env["NSBOX_STATE_DIR"])
    os.makedirs(env["NSBOX_CACHE_DIR"])
    try:
        # the first create makes the workspace template: outside the recording
        sid = subprocess.run([NSBOX, "create"], env=env, check=True, capture_output=True,
                             text=True).stdout.strip()
        subprocess.run([NSBOX, "rm", sid], env=env, check=True)
        loop = os.path.join(base, "loop.sh")
        with open(loop, "w") as f:
            f.write('for i in $(seq %d); do id=$("$NSB" create) && "$NSB" rm "$id" || exit 1; '
                    'done\n' % a.cycles)
        data = os.path.join(base, "perf.data")
        subprocess.run(["perf", "record", "-q", "-a", "-e", EVENTS, "-o", data, "--", "/bin/sh",
                        loop], env=env, check=True, stdout=subprocess.DEVNULL)
        out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,tid,time,event,trace"],
                             capture_output=True, text=True).stdout
        events = []
        for line in out.splitlines():
            m = LINE.match(line)
            if m:
                comm, pid, tid, t, ev, text = m.groups()
                events.append((float(t) * 1000, comm, int(pid), int(tid), ev, text))
        root = next(e[2] for e in events
                    if e[4] == "sched:sched_process_exec" and "filename=/bin/sh" in e[5])
        cycles = cycles_of(events, root, NSBOX)
        if not cycles:
            sys.exit("no complete cycle in the recording")
        print("%d cycles, load average %.1f; wall ms per phase\n" % (len(cycles),
                                                                      os.getloadavg()[0]))
        print("| phase | median | range |")
        print("|---|---:|---:|")
        for start, end, what in STEPS:
            xs = [c[end] - c[start] for c in cycles]
            print("| %s | %.2f | %.2f-%.2f |" % (what, statistics.median(xs), min(xs), max(xs)))
    finally:
        subprocess.run([NSBOX, "gc"], env=env, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
