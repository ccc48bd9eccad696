#!/usr/bin/env python3
"""nsbox-oci's create alone, with a bundle's seccomp profile of Docker's shape and without one,
for one build or several side by side (an A/B of a change).

    sudo python3 bench/bench_oci_create.py [--rounds N] [LABEL=PATH ...]

Each round runs, for every build (LABEL=PATH of an nsbox-oci; default this tree's
build/nsbox-oci) and both bundles, `nsbox-oci create` to its pid file, timed (perf_counter_ns
around the command), then `delete --force` (not timed); the order is reversed every other
round and the first 3 rounds are not counted. The profile is Docker's shape (errno by default,
an allow list of the calls this kernel's headers name but for those Docker's profile leaves
out, three architectures), about 4 KB of JSON; "none" is the same bundle without linux.seccomp,
so the per-round ratio profile / none is what a bundle's profile costs a create. The container
runs busybox's true and is deleted before it starts. Everything is made in one temporary
directory (and nsbox's own state, data and cache directories of its own), removed at the end.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
from nsbox_test import Dirs  # noqa: E402
from oci_bundle import config  # noqa: E402

UNISTD = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"
# what Docker's default profile does not allow without a capability or at all
LEFT_OUT = {
    "acct", "add_key", "bpf", "chroot", "clock_adjtime", "clock_settime", "clone3",
    "create_module", "delete_module", "fanotify_init", "finit_module", "fsconfig", "fsmount",
    "fsopen", "fspick", "get_kernel_syms", "get_mempolicy", "init_module", "ioperm", "iopl",
    "kcmp", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mbind", "migrate_pages",
    "mount", "move_mount", "move_pages", "name_to_handle_at", "nfsservctl", "open_by_handle_at",
    "open_tree", "perf_event_open", "personality", "pivot_root", "process_vm_readv",
    "process_vm_writev", "ptrace", "query_module", "quotactl", "reboot", "request_key",
    "set_mempolicy", "setns", "settimeofday", "swapoff", "swapon", "syslog", "umount2",
    "unshare", "uselib", "userfaultfd", "ustat", "vhangup", "_sysctl", "sysfs", "afs_syscall",
    "tuxcall", "security", "getpmsg", "putpmsg", "epoll_ctl_old", "epoll_wait_old", "vserver",
    "adjtimex", "io_uring_setup", "io_uring_enter", "io_uring_register"}


def docker_shaped_profile():
    with open(UNISTD) as f:
        names = [line.split()[1][len("__NR_"):] for line in f if line.startswith("#define __NR_")]
    return {"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            "syscalls": [{"names": sorted(set(names) - LEFT_OUT), "action": "SCMP_ACT_ALLOW"}]}


def bundle(work, name, seccomp):
    b = os.path.join(work, name)
    rootfs = os.path.join(b, "rootfs")
    for d in ("bin", "tmp", "etc", "proc"):
        os.makedirs(os.path.join(rootfs, d))
    shutil.copy("/bin/busybox", os.path.join(rootfs, "bin", "busybox"))
    for tool in ("sh", "true"):
        os.symlink("busybox", os.path.join(rootfs, "bin", tool))
    c = config(["true"])
    if seccomp:
        c["linux"]["seccomp"] = seccomp
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(c, f)
    return b


def create_ms(oci, root, b, env, err):
    pidfile = os.path.join(root + ".pid")
    t0 = time.perf_counter_ns()
    # the container inherits create's streams: files, which nobody waits to end
    r = subprocess.run([oci, "--root", root, "create", "--bundle", b, "--pid-file", pidfile, "c"],
                       env=env, stdout=err, stderr=err)
    ms = (time.perf_counter_ns() - t0) / 1e6
    if r.returncode != 0:
        err.flush()
        with open(err.name) as f:
            sys.exit(f"{oci} create failed: {f.read()[-2000:]}")
    with open(pidfile) as f:
        pid = int(f.read())
    subprocess.run([oci, "--root", root, "delete", "--force", "c"], env=env, check=True)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    return ms


def delete_left(builds, work, env):
    """The container an interrupted round left, under each build's state root in work."""
    for label, oci in builds.items():
        subprocess.run([oci, "--root", os.path.join(work, f"state-{label}"), "delete", "--force",
                        "c"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("builds", nargs="*", help="LABEL=PATH of an nsbox-oci")
    a = ap.parse_args()
    builds = {k: os.path.abspath(v) for k, v in (x.split("=", 1) for x in a.builds)} or {
        "nsbox-oci": os.path.join(REPO, "build", "nsbox-oci")}
    profile = docker_shaped_profile()
    work = tempfile.mkdtemp(prefix="nsbox-bench-create-")
    dirs = Dirs()
    try:
        bundles = {"profile": bundle(work, "profile", profile), "none": bundle(work, "none", None)}
        runs = [(label, kind) for label in builds for kind in bundles]
        ms = {r: [] for r in runs}
        with open(os.path.join(work, "streams"), "w") as err:
            for i in range(a.rounds + 3):
                for label, kind in runs if i % 2 else runs[::-1]:
                    t = create_ms(builds[label], os.path.join(work, f"state-{label}"),
                                  bundles[kind], dirs.env(), err)
                    if i >= 3:
                        ms[(label, kind)].append(t)
        size = len(json.dumps(profile))
        print(f"# nsbox-oci create, {a.rounds} rounds; profile: "
              f"{len(profile['syscalls'][0]['names'])} names, {size} bytes\n")
        print("| build | bundle | median ms | p10 | p90 |\n|---|---|---:|---:|---:|")
        for (label, kind), v in ms.items():
            q = statistics.quantiles(v, n=10)
            print(f"| {label} | {kind} | {statistics.median(v):.2f} | {q[0]:.2f} | {q[-1]:.2f} |")
        print()
        for label in builds:
            ratio = [p / n for p, n in zip(ms[(label, "profile")], ms[(label, "none")])]
            print(f"- {label}: profile / none, median of the per-round ratios "
                  f"{statistics.median(ratio):.3f}")
    finally:
        delete_left(builds, work, dirs.env())
        shutil.rmtree(work, True)
        dirs.cleanup()


if __name__ == "__main__":
    main()
