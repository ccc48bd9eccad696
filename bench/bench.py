#!/usr/bin/env python3
"""Side-by-side one-shot sandbox benchmark: nsbox vs bubblewrap vs crun (+ extras).

Started by bench/run.sh, which makes the work directory, compiles cgattach and removes
everything afterwards. Standard library only.

Method: for each case (/bin/true, a shell writing to /workspace, python3 -c pass) the tools run
round-robin, interleaved: round r runs every tool once, the order rotated by r so that no tool is
always first after another. Wall time of one invocation = time.perf_counter_ns() around
os.posix_spawn() + waitpid() (posix_spawn uses vfork, so the harness's own fork cost is small;
it is measured as the "direct" column: the same command without any sandbox). For bwrap and crun
the fresh /workspace directory is created and removed inside the timed region, as nsbox does it
inside its own run.
"""

import argparse
import datetime
import gzip
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time

from bench_phases import PERF_EVENTS, PERF_LINE, phases_of_run
from benchlib import pool_config

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CRUN_UID_BASE = 100000  # crun: container uid N -> host uid CRUN_UID_BASE + N
APP_UID = 1000

CASES = {
    "true": ["/bin/true"],
    "sh": ["sh", "-c", "echo hi > /workspace/x"],
    "python": ["python3", "-c", "pass"],
}
CASE_TITLES = {
    "true": "`/bin/true`",
    "sh": "`sh -c 'echo hi > /workspace/x'`",
    "python": "`python3 -c pass`",
}

interrupted = False


def on_signal(signum, frame):
    global interrupted
    interrupted = True


# ---- small helpers ------------------------------------------------------------------------------


def pct(sorted_vals, p):
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_vals:
        return float("nan")
    k = max(0, min(len(sorted_vals) - 1, int(round(p / 100.0 * (len(sorted_vals) - 1)))))
    return sorted_vals[k]


def summary(vals):
    s = sorted(vals)
    return {
        "n": len(s),
        "median": statistics.median(s) if s else float("nan"),
        "p10": pct(s, 10),
        "p90": pct(s, 90),
        "mean": statistics.fmean(s) if s else float("nan"),
        "min": s[0] if s else float("nan"),
    }


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def cmd_out(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def which_abs(name, path=None):
    p = shutil.which(name, path=path)
    return os.path.realpath(p) if p else None


# ---- machine description ------------------------------------------------------------------------


def kernel_config_value(key):
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            for line in f:
                if line.startswith(key + "=") or line.startswith("# " + key + " "):
                    return line.strip()
    except OSError:
        pass
    return None


def cgroup_mounts():
    out = []
    for line in read("/proc/mounts").splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] in ("cgroup", "cgroup2"):
            out.append({"mountpoint": f[1], "type": f[2], "options": f[3],
                        "favordynmods": "favordynmods" in f[3].split(",")})
    return out


def machine_info(nsbox, root_fs_of):
    cpu = ""
    for line in read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = 0
    for line in read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    mounts = cgroup_mounts()
    fs = ""
    for line in read("/proc/mounts").splitlines():
        f = line.split()
        if len(f) >= 4 and f[1] == root_fs_of:
            fs = f"{f[2]} ({f[3]})"
    cmdline = read("/proc/cmdline").strip()
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "hostname": platform.node(),
        "kernel": platform.release(),
        "cpu": cpu,
        "nproc": os.cpu_count(),
        "mem_gib": round(mem_kb / 1048576, 1),
        "loadavg_start": read("/proc/loadavg").strip(),
        "python": platform.python_version(),
        "bwrap": cmd_out(["bwrap", "--version"]),
        "crun": cmd_out(["crun", "--version"]).splitlines()[0] if shutil.which("crun") else "",
        "nsbox": cmd_out([nsbox, "--version"]),
        "nsbox_path": nsbox,
        "nsbox_mtime_utc": datetime.datetime.fromtimestamp(
            os.stat(nsbox).st_mtime, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "git_commit": cmd_out(["git", "-C", os.path.dirname(os.path.abspath(__file__)),
                               "rev-parse", "--short", "HEAD"]),
        "cgroup_v1": any(m["type"] == "cgroup" for m in mounts),
        "cgroup_mounts": mounts,
        "favordynmods_mounted": any(m["favordynmods"] for m in mounts),
        "favordynmods_cmdline": re.findall(r"cgroup_favordynmods=\S+", cmdline),
        "CONFIG_CGROUP_FAVOR_DYNMODS": kernel_config_value("CONFIG_CGROUP_FAVOR_DYNMODS"),
        "CONFIG_HZ": kernel_config_value("CONFIG_HZ"),
        "CONFIG_RCU_LAZY": kernel_config_value("CONFIG_RCU_LAZY"),
        "root_fs": fs,
    }


# ---- crun on a "hybrid" cgroup host ------------------------------------------------------------


class CrunMountNs:
    """crun 1.x refuses to run at all ("cgroups in hybrid mode not supported") when the cgroup2
    mount next to the v1 hierarchies has a controller enabled, even with cgroups disabled. We do
    not touch the host: the harness makes a private mount namespace once, in which that cgroup2
    mount is detached, and enters it (setns) only around each crun spawn. crun then sees a
    plain cgroup v1 host, and its cgroupfs manager works on the same v1 hierarchies nsbox uses.
    """

    CLONE_NEWNS = 0x00020000
    MS_REC, MS_PRIVATE, MNT_DETACH = 0x4000, 0x40000, 2

    def __init__(self):
        self.orig = self.priv = None

    @staticmethod
    def needed():
        mounts = {f[1]: f[2] for f in (l.split() for l in read("/proc/mounts").splitlines())
                  if len(f) >= 3}
        return (mounts.get("/sys/fs/cgroup") == "tmpfs"
                and mounts.get("/sys/fs/cgroup/unified") == "cgroup2"
                and read("/sys/fs/cgroup/unified/cgroup.controllers").strip() != "")

    def setup(self):
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        self.libc = libc
        self.orig = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        if libc.unshare(self.CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
        try:
            # Private first: nothing we do below may propagate back to the host's mounts.
            if libc.mount(None, b"/", None, self.MS_REC | self.MS_PRIVATE, None) != 0:
                raise OSError(ctypes.get_errno(), "make / rprivate")
            if libc.umount2(b"/sys/fs/cgroup/unified", self.MNT_DETACH) != 0:
                raise OSError(ctypes.get_errno(), "umount /sys/fs/cgroup/unified")
            self.priv = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            self.leave()

    def enter(self):
        if self.libc.setns(self.priv, self.CLONE_NEWNS) != 0:
            raise OSError(0, "setns(private mount namespace)")

    def leave(self):
        if self.libc.setns(self.orig, self.CLONE_NEWNS) != 0:
            raise OSError(0, "setns(original mount namespace)")


# ---- the tools ----------------------------------------------------------------------------------


class Tool:
    """One way of running a case. prepare() returns (argv, env, cleanup) for one invocation;
    both run inside the timed region."""

    def __init__(self, name):
        self.name = name

    def setup(self, work):
        pass

    def prepare(self, case, cmd, i):
        raise NotImplementedError

    def before_spawn(self):
        pass

    def after_spawn(self):
        pass

    def teardown(self):
        pass


class Direct(Tool):
    """The same command without a sandbox: the harness's own cost plus the program's."""

    def setup(self, work):
        self.work = work
        self.ws = os.path.join(work, "direct-ws")

    def prepare(self, case, cmd, i):
        os.mkdir(self.ws)
        argv = list(cmd)
        if case == "sh":
            argv = ["sh", "-c", "echo hi > " + self.ws + "/x"]
        argv[0] = which_abs(argv[0], SANDBOX_PATH) if "/" not in argv[0] else argv[0]
        return argv, {"PATH": SANDBOX_PATH, "LANG": "C.UTF-8"}, lambda: shutil.rmtree(self.ws)


class Nsbox(Tool):
    """nsbox run. pool: the config's pool section; {"size": 0} (the cold run, every time) unless
    given; None: nsbox's default ("auto": a pool of two once runs repeat, docs/pool.md), which
    the first rounds start and which is drained at the end."""

    def __init__(self, name, binary, env=None, pool={"size": 0}):
        super().__init__(name)
        self.binary = binary
        self.extra_env = env or {}
        self.pool = pool

    def setup(self, work):
        if "NSBOX_CONFIG" not in self.extra_env:
            self.extra_env = dict(self.extra_env, **pool_config(work, self.name, self.pool))

    def teardown(self):
        # also when the pool was meant to be off: an --extra tool's own config may have one
        env = dict(os.environ, **self.extra_env)
        subprocess.run([self.binary, "pool", "drain"], env=env, stdout=subprocess.DEVNULL)

    def prepare(self, case, cmd, i):
        env = dict(os.environ)
        env.update(self.extra_env)
        return [self.binary, "run", "--"] + list(cmd), env, None


def host_root_symlinks():
    """/bin, /lib, ... as the host has them (merged /usr): name -> target."""
    out = {}
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = "/" + name
        if os.path.islink(p):
            out[name] = os.readlink(p)
    return out


def make_etc(work):
    """A small generated /etc, bound read-only by bwrap and crun (nsbox binds its image's)."""
    etc = os.path.join(work, "etc")
    os.mkdir(etc, 0o755)
    files = {
        "passwd": "root:x:0:0:root:/root:/bin/sh\nappuser:x:1000:1000::/workspace:/bin/sh\n"
                  "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        "group": "root:x:0:\nappuser:x:1000:\nnogroup:x:65534:\n",
        "hosts": "127.0.0.1 localhost\n::1 localhost\n",
        "hostname": "bench\n",
    }
    for n, text in files.items():
        with open(os.path.join(etc, n), "w") as f:
            f.write(text)
    return etc


class Bwrap(Tool):
    def setup(self, work):
        self.work = work
        self.binary = which_abs("bwrap")
        self.etc = os.path.join(work, "etc")
        self.base = ["--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
                     "--cap-drop", "ALL", "--uid", str(APP_UID), "--gid", str(APP_UID),
                     "--hostname", "bench",
                     "--ro-bind", "/usr", "/usr"]
        for name, target in sorted(host_root_symlinks().items()):
            self.base += ["--symlink", target, "/" + name]
        self.base += ["--ro-bind", self.etc, "/etc", "--proc", "/proc", "--dev", "/dev",
                      "--tmpfs", "/tmp"]

    def prepare(self, case, cmd, i):
        ws = os.path.join(self.work, "bwrap-ws-%d" % i)
        os.mkdir(ws, 0o755)
        argv = [self.binary] + self.base + ["--bind", ws, "/workspace", "--chdir", "/workspace",
                                            "--clearenv", "--setenv", "PATH", SANDBOX_PATH,
                                            "--setenv", "HOME", "/workspace", "--"] + list(cmd)
        return argv, {"PATH": SANDBOX_PATH}, lambda: shutil.rmtree(ws)


class Crun(Tool):
    """crun with an OCI bundle per case made once. With cgroups (crun's default cgroupfs
    manager, limits equal to nsbox's default instance type) or without (--cgroup-manager
    disabled)."""

    def __init__(self, name, cgroups, tag, limits, mntns=None):
        super().__init__(name)
        self.cgroups = cgroups
        self.tag = tag
        self.limits = limits
        self.mntns = mntns

    def before_spawn(self):
        if self.mntns:
            self.mntns.enter()

    def after_spawn(self):
        if self.mntns:
            self.mntns.leave()

    def setup(self, work):
        self.work = work
        self.binary = which_abs("crun")
        self.state = os.path.join(work, "crun-state")
        os.makedirs(self.state, exist_ok=True)
        self.rootfs = os.path.join(work, "crun-rootfs")
        if not os.path.isdir(self.rootfs):
            os.mkdir(self.rootfs, 0o755)
            for d in ("usr", "etc", "proc", "dev", "tmp", "workspace"):
                os.mkdir(os.path.join(self.rootfs, d), 0o755)
            for name, target in host_root_symlinks().items():
                os.symlink(target, os.path.join(self.rootfs, name))
        self.etc = os.path.join(work, "etc")
        self.ws = os.path.join(work, "%s-ws" % self.name)
        self.bundles = {}
        self.template = None

    def bundle(self, case, cmd):
        if case in self.bundles:
            return self.bundles[case]
        b = os.path.join(self.work, "%s-bundle-%s" % (self.name, case))
        os.mkdir(b)
        if self.template is None:
            subprocess.run([self.binary, "spec"],
                           cwd=b, check=True, capture_output=True)
            with open(os.path.join(b, "config.json")) as f:
                self.template = json.load(f)
        c = json.loads(json.dumps(self.template))
        p = c["process"]
        p["terminal"] = False
        p["user"] = {"uid": APP_UID, "gid": APP_UID}
        p["args"] = list(cmd)
        p["env"] = ["PATH=" + SANDBOX_PATH, "HOME=/workspace"]
        p["cwd"] = "/workspace"
        p["capabilities"] = {k: [] for k in ("bounding", "effective", "inheritable",
                                             "permitted", "ambient")}
        p["noNewPrivileges"] = True
        p.pop("rlimits", None)
        c["root"] = {"path": self.rootfs, "readonly": True}
        c["hostname"] = "bench"
        mounts = [
            {"destination": "/proc", "type": "proc", "source": "proc"},
        ]
        # /dev (tmpfs), /dev/pts, /dev/shm as crun spec makes them; no /sys, no mqueue (bwrap and
        # nsbox mount neither).
        for m in self.template["mounts"]:
            if m["destination"] in ("/dev", "/dev/pts", "/dev/shm"):
                mounts.append(m)
        mounts += [
            {"destination": "/usr", "type": "bind", "source": "/usr",
             "options": ["rbind", "ro", "nosuid", "nodev"]},
            {"destination": "/etc", "type": "bind", "source": self.etc,
             "options": ["bind", "ro", "nosuid", "nodev"]},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "nodev", "mode=1777"]},
            {"destination": "/workspace", "type": "bind", "source": self.ws,
             "options": ["bind", "rw", "nosuid", "nodev"]},
        ]
        c["mounts"] = mounts
        lx = c["linux"]
        lx["namespaces"] = [{"type": t} for t in
                            ("pid", "network", "ipc", "uts", "mount", "user", "cgroup")]
        lx["uidMappings"] = [{"containerID": 0, "hostID": CRUN_UID_BASE, "size": 65536}]
        lx["gidMappings"] = [{"containerID": 0, "hostID": CRUN_UID_BASE, "size": 65536}]
        res = {"devices": [{"allow": False, "access": "rwm"}]}
        if self.cgroups and self.limits:
            res["memory"] = {"limit": self.limits["memory"], "swap": self.limits["memory"]}
            res["cpu"] = {"quota": self.limits["cpus"] * 100000, "period": 100000}
            res["pids"] = {"limit": self.limits["pids"]}
        lx["resources"] = res
        with open(os.path.join(b, "config.json"), "w") as f:
            json.dump(c, f, indent=1)
        self.bundles[case] = b
        return b

    def prepare(self, case, cmd, i):
        b = self.bundle(case, cmd)
        os.mkdir(self.ws, 0o755)
        os.chown(self.ws, CRUN_UID_BASE + APP_UID, CRUN_UID_BASE + APP_UID)
        cid = "nsboxbench-%s-%s-%d" % (self.tag, self.name, i)
        argv = [self.binary, "--root", self.state]
        if not self.cgroups:
            argv.append("--cgroup-manager=disabled")
        argv += ["run", "--no-new-keyring", "--bundle", b, cid]
        return argv, {"PATH": SANDBOX_PATH}, lambda: shutil.rmtree(self.ws)

    def probe(self, errpath):
        """One run of /bin/true. crun refuses cgroups on a "hybrid" host (v1 controllers plus a
        cgroup2 mount that has controllers): then this tool runs without cgroups, and says so."""
        self.note = ""
        try:
            run_one(self, "true", CASES["true"], -1, errpath)
        except RuntimeError as ex:
            if not self.cgroups:
                raise
            self.note = ("crun cannot use cgroups on this host (%s); it ran with "
                         "--cgroup-manager=disabled" % str(ex).split(": ", 1)[-1].splitlines()[0])
            self.cgroups = False
            run_one(self, "true", CASES["true"], -1, errpath)

    def teardown(self):
        # crun run removes the container when it exits; this catches an interrupted one.
        if not os.path.isdir(self.state):
            return
        for name in os.listdir(self.state):
            if name.startswith("nsboxbench-"):
                subprocess.run([self.binary, "--root", self.state, "delete", "-f", name],
                               capture_output=True)


# ---- running ------------------------------------------------------------------------------------


def spawn_timed(argv, env, errpath):
    fa = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, errpath, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
    ]
    return os.posix_spawn(argv[0], argv, env, file_actions=fa)


def run_one(tool, case, cmd, i, errpath):
    t0 = time.perf_counter_ns()
    argv, env, cleanup = tool.prepare(case, cmd, i)
    tool.before_spawn()
    try:
        pid = spawn_timed(argv, env, errpath)
    finally:
        tool.after_spawn()
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if cleanup:
        cleanup()
    t1 = time.perf_counter_ns()
    code = os.waitstatus_to_exitcode(status)
    if code != 0 and interrupted:
        return None  # killed by the same Ctrl-C: not a measurement
    if code != 0:
        err = read(errpath).strip()
        raise RuntimeError("%s (%s) exited with %d: %s\n  argv: %s" %
                           (tool.name, case, code, err[-2000:], shlex.join(argv)))
    return (t1 - t0) / 1e6


def bench_case(tools, case, rounds, warmup, gap_ms, errpath, log):
    cmd = CASES[case]
    times = {t.name: [] for t in tools}
    n = len(tools)
    t_start = time.monotonic()
    for r in range(-warmup, rounds):
        if interrupted:
            break
        order = [tools[(k + r) % n] for k in range(n)]
        for t in order:
            if gap_ms:
                time.sleep(gap_ms / 1000.0)  # idle, untimed: see --gap-ms
            ms = run_one(t, case, cmd, r + warmup, errpath)
            if ms is None:
                break
            if r >= 0:
                times[t.name].append(ms)
        if r >= 0 and (r + 1) % 50 == 0:
            log("  %s: %d/%d rounds (%.0f s)" % (case, r + 1, rounds, time.monotonic() - t_start))
    return times


def ratio_stats(times, a, b):
    """Per-round ratios a/b (same round index, so the same moment of the machine)."""
    ra, rb = times.get(a), times.get(b)
    if not ra or not rb:
        return None
    rr = [x / y for x, y in zip(ra, rb) if y > 0]
    s = sorted(rr)
    return {
        "ratio_of_medians": statistics.median(ra) / statistics.median(rb),
        "median_of_round_ratios": statistics.median(rr),
        "p10": pct(s, 10),
        "p90": pct(s, 90),
    }


# ---- cgroup v1 attach micro-benchmark --------------------------------------------------------


def own_v1_controllers():
    ctrls = []
    for line in read("/proc/self/cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[1] and not parts[1].startswith("name="):
            ctrls += parts[1].split(",")
    return ctrls


def run_cgattach(binary, tag, iters, gap_ms, log):
    have = own_v1_controllers()
    if not have:
        return {"skipped": "no cgroup v1 hierarchy in /proc/self/cgroup"}
    # The hierarchies nsbox uses on v1 (see sandbox/cgroup.c), as far as mounted here.
    nsbox_set = [c for c in ("memory", "cpu", "cpuacct", "pids", "freezer") if c in have]
    sets = [("pids", ["pids"] if "pids" in have else nsbox_set[:1]), ("nsbox-set", nsbox_set)]
    out = {"iters": iters, "runs": []}
    for label, ctrls in sets:
        for gap in sorted({gap_ms, 0}, reverse=True):
            modes = "procs,tasks,self" if gap else "procs"
            log("  cgattach %s gap=%dms modes=%s" % (",".join(ctrls), gap, modes))
            p = subprocess.run([binary, "--tag", tag, "--iters", str(iters), "--gap-ms", str(gap),
                                "--modes", modes, "--controllers", ",".join(ctrls)],
                               capture_output=True, text=True)
            if p.returncode != 0:
                return {"error": p.stderr.strip()[-1000:]}
            for line in p.stdout.splitlines():
                d = json.loads(line)
                d["set"] = label
                d["summary"] = {k: summary(v) for k, v in d.items() if k.endswith("_us")}
                fa = d["attach_first_us"]
                d["summary"]["share_first_over_1ms"] = (
                    sum(1 for x in fa if x > 1000) / len(fa) if fa else float("nan"))
                out["runs"].append(d)
    return out


# ---- nsbox phases from kernel tracepoints ---------------------------------------------------
# (the events and how to read them: bench_phases.py)


def perf_phases(nsbox, runs, gap_ms, work, log):
    """Where one `nsbox run -- /bin/true` spends its time: kernel tracepoints (perf record),
    which stop nothing, so the timings are close to untraced runs."""
    perf = shutil.which("perf")
    if not perf:
        return {"skipped": "perf not installed"}
    data = os.path.join(work, "perf.data")
    env = dict(os.environ, **pool_config(work, "phases", {"size": 0}))  # cold runs
    out = []
    for k in range(runs):
        if interrupted:
            break
        time.sleep(gap_ms / 1000.0)
        p = subprocess.run([perf, "record", "-q", "-o", data, "-e", PERF_EVENTS, "--", nsbox,
                            "run", "--", "/bin/true"], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            return {"error": "perf record: " + p.stderr.strip()[-500:]}
        s = subprocess.run([perf, "script", "-i", data, "-F", "pid,tid,time,event,trace"],
                           capture_output=True, text=True)
        events = []
        for line in s.stdout.splitlines():
            m = PERF_LINE.match(line)
            if m:
                events.append((int(m.group(2)), float(m.group(3)), m.group(4), m.group(5),
                               int(m.group(1))))
        r = phases_of_run(events)
        if r:
            out.append(r)
    if os.path.exists(data):
        os.unlink(data)
    if not out:
        return {"error": "could not parse perf script output"}
    keys = list(out[0].keys())
    med = {}
    for k in keys:
        vals = [r[k] for r in out if k in r]
        med[k] = statistics.median(vals)
    return {"runs": len(out), "method": "perf record (tracepoints)", "median": med,
            "samples": out}


# ---- report ---------------------------------------------------------------------------------------


def fmt(x, nd=1):
    return "%.*f" % (nd, x)


def markdown(res):
    m = res["machine"]
    L = []
    L.append("## Results (%s UTC, %s)" % (m["date_utc"], m["hostname"]))
    L.append("")
    L.append("Kernel %s, %s x %s, %s GiB; %s; %s; %s; %s: %s, built %s UTC (repository HEAD "
             "at run time: %s)." % (
                 m["kernel"], m["nproc"], m["cpu"], m["mem_gib"], m["bwrap"], m["crun"],
                 "cgroup v1" if m["cgroup_v1"] else "cgroup v2", m["nsbox"], m["nsbox_path"],
                 m.get("nsbox_mtime_utc", "?"), m["git_commit"] or "?"))
    L.append("Load average at start: %s. Wall time per invocation in ms; %s." % (
        m["loadavg_start"], "rounds interleaved, order rotated every round"))
    for name, note in res.get("notes", {}).items():
        L.append("Note: %s: %s." % (name, note))
    L.append("")
    tools = res["tools"]
    for key, data in res["cases"].items():
        L.append("### %s, %s (%d rounds)" % (
            CASE_TITLES[data["case"]],
            "%d ms idle before each run" % data["gap_ms"] if data["gap_ms"] else "back-to-back",
            data["rounds"]))
        L.append("")
        L.append("| tool | median | p10 | p90 | median - direct |")
        L.append("|---|---:|---:|---:|---:|")
        direct = data["stats"].get("direct", {}).get("median", 0.0)
        for t in tools:
            s = data["stats"].get(t)
            if not s:
                continue
            net = s["median"] - direct if t != "direct" else 0.0
            L.append("| %s | %s | %s | %s | %s |" % (t, fmt(s["median"], 2), fmt(s["p10"], 2),
                                                     fmt(s["p90"], 2),
                                                     fmt(net, 2) if t != "direct" else "-"))
        L.append("")
        L.append("| ratio | of medians | median of per-round ratios | p10 | p90 |")
        L.append("|---|---:|---:|---:|---:|")
        for name, r in data["ratios"].items():
            if r:
                L.append("| %s | %s | %s | %s | %s |" % (name, fmt(r["ratio_of_medians"], 2),
                                                         fmt(r["median_of_round_ratios"], 2),
                                                         fmt(r["p10"], 2), fmt(r["p90"], 2)))
        L.append("")
    for key in ("true", "true-b2b"):
        if key not in res["cases"]:
            continue
        for name in ("nsbox/bwrap", "nsbox-default/bwrap", "nsbox-pool/bwrap"):
            r = res["cases"][key]["ratios"].get(name)
            if r:
                ok = r["median_of_round_ratios"] <= 0.6
                L.append("**Target** (one-shot `/bin/true` <= 0.6 x bubblewrap, same run), %s, "
                         "%s: %s x -> %s." % (name.split("/")[0], key,
                                              fmt(r["median_of_round_ratios"], 2),
                                              "met" if ok else "NOT met"))
        L.append("")
    cg = res.get("cgattach")
    if cg and "runs" in cg:
        L.append("### cgroup v1 attach alone (`cgattach`, %d iterations each, microseconds)" %
                 cg["iters"])
        L.append("")
        L.append("| hierarchies | gap | mode | mkdir | first attach med | p10 | p90 | "
                 "> 1 ms | other attaches | rmdir |")
        L.append("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        for d in cg["runs"]:
            s = d["summary"]
            L.append("| %s | %d ms | %s | %s | %s | %s | %s | %d%% | %s | %s |" % (
                ",".join(d["hierarchies"]), d["gap_ms"], d["mode"],
                fmt(s["mkdir_us"]["median"], 0), fmt(s["attach_first_us"]["median"], 0),
                fmt(s["attach_first_us"]["p10"], 0), fmt(s["attach_first_us"]["p90"], 0),
                round(100 * s["share_first_over_1ms"]), fmt(s["attach_rest_us"]["median"], 0),
                fmt(s["rmdir_us"]["median"], 0)))
        L.append("")
        L.append("favordynmods in cgroup mount options: %s; kernel %s; cmdline %s." % (
            "yes" if m["favordynmods_mounted"] else "no",
            m["CONFIG_CGROUP_FAVOR_DYNMODS"] or "config unknown",
            " ".join(m["favordynmods_cmdline"]) or "no cgroup_favordynmods="))
        L.append("")
    elif cg:
        L.append("cgroup attach micro-benchmark: %s" % (cg.get("skipped") or cg.get("error")))
        L.append("")
    ph = res.get("phases")
    if ph and "median" not in ph:
        L.append("nsbox phases: %s" % (ph.get("skipped") or ph.get("error")))
        L.append("")
    if ph and "median" in ph:
        L.append("### Where nsbox's time goes (%s, %d runs of `/bin/true`, each after %d ms "
                 "idle; medians, ms)" % (ph["method"], ph["runs"], res["gap_ms"]))
        L.append("")
        L.append("| phase | ms |")
        L.append("|---|---:|")
        for k, v in ph["median"].items():
            L.append("| %s | %s |" % (k, fmt(v, 2)))
        L.append("")
    return "\n".join(L)


# ---- main ----------------------------------------------------------------------------------------


class NsboxPool(Nsbox):
    """nsbox run with a pool of a set size (docs/pool.md): filled before the first round,
    refilled by nsbox itself after every run (untimed unless it overlaps the next one), drained
    at the end. A run that finds the pool empty runs cold, so back-to-back rounds show what that
    costs."""

    def __init__(self, name, binary, size):
        super().__init__(name, binary, pool={"size": size, "ttl_seconds": 3600})

    def setup(self, work):
        super().setup(work)
        env = dict(os.environ, **self.extra_env)
        subprocess.run([self.binary, "pool", "fill"], env=env, check=True,
                       stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nsbox", required=True)
    ap.add_argument("--work", required=True, help="empty scratch directory (removed by run.sh)")
    ap.add_argument("--tag", required=True, help="[a-z0-9]+, names containers and cgroups")
    ap.add_argument("--results", required=True, help="directory for the JSON and markdown")
    ap.add_argument("--cases", default="true,sh,python")
    ap.add_argument("--tools",
                    default="direct,nsbox,nsbox-default,nsbox-pool,bwrap,crun,crun-nocg",
                    help="nsbox: the cold run (pool off); nsbox-default: nsbox's default "
                         "settings (the pool starts once runs repeat); nsbox-pool: a pool of "
                         "--pool-size filled beforehand (docs/pool.md); crun-nocg: crun "
                         "--cgroup-manager=disabled")
    ap.add_argument("--pool-size", type=int, default=2, help="pool size of nsbox-pool")
    ap.add_argument("--rounds", type=int, default=200, help="rounds for true and sh")
    ap.add_argument("--rounds-python", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--gap-ms", type=int, default=40,
                    help="idle time before every invocation (untimed). A sandbox call normally "
                         "follows other work, not another cgroup move: on cgroup v1 the kernel's "
                         "threadgroup rwsem needs ~1 RCU grace period of quiet to fall back to "
                         "its fast mode, and only then does an attach pay the full grace period")
    ap.add_argument("--b2b", default="true",
                    help="cases also run back-to-back (gap 0), '' for none")
    ap.add_argument("--extra", action="append", default=[],
                    help="LABEL='[K=V ...] /path/to/nsbox': another nsbox build in the rotation")
    ap.add_argument("--cgattach", help="path of the compiled cgattach ('' to skip)")
    ap.add_argument("--cg-iters", type=int, default=100)
    ap.add_argument("--phases", type=int, default=20,
                    help="runs of nsbox under perf record for the phase breakdown (0 to skip)")
    a = ap.parse_args()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    if not re.fullmatch(r"[a-z0-9]+", a.tag):
        sys.exit("bench.py: --tag must be [a-z0-9]+")
    nsbox = os.path.abspath(a.nsbox)
    work = os.path.abspath(a.work)
    os.chmod(work, 0o755)  # crun's container root (an unprivileged host uid) must reach rootfs
    make_etc(work)

    limits = None
    info = cmd_out([nsbox, "info", "--json"])
    try:
        for it in json.loads(info).get("instance_types", []):
            if it.get("name") == "medium":
                limits = {"memory": int(it["memory"]), "cpus": int(it["cpus"]),
                          "pids": int(it["pids"])}
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    if limits is None:  # nsbox's default instance type, medium (docs/spec.md)
        limits = {"memory": 4 << 30, "cpus": 2, "pids": 1024}

    mntns = None
    notes = {}
    if any(n.startswith("crun") for n in a.tools.split(",")) and shutil.which("crun") \
            and CrunMountNs.needed():
        mntns = CrunMountNs()
        mntns.setup()
        notes["crun"] = ("the host's cgroup2 mount /sys/fs/cgroup/unified has controllers "
                         "(hybrid layout), which crun refuses; crun runs in a private mount "
                         "namespace without that mount (entered with setns around each spawn)")
    tools = []
    for name in a.tools.split(","):
        if name == "direct":
            tools.append(Direct("direct"))
        elif name == "nsbox":
            tools.append(Nsbox("nsbox", nsbox))
        elif name == "nsbox-default":
            tools.append(Nsbox("nsbox-default", nsbox, pool=None))
        elif name == "nsbox-pool":
            tools.append(NsboxPool("nsbox-pool", nsbox, a.pool_size))
        elif name == "bwrap":
            if not shutil.which("bwrap"):
                log("bwrap not installed: skipped")
                continue
            tools.append(Bwrap("bwrap"))
        elif name in ("crun", "crun-nocg"):
            if not shutil.which("crun"):
                log("crun not installed: skipped")
                continue
            tools.append(Crun(name, name == "crun", a.tag, limits, mntns))
        else:
            sys.exit("bench.py: unknown tool %s" % name)
    for spec in a.extra:
        label, _, rest = spec.partition("=")
        words = shlex.split(rest)
        env = dict(w.split("=", 1) for w in words[:-1])
        tools.append(Nsbox(label, os.path.abspath(words[-1]), env))
    errpath = os.path.join(work, "stderr.txt")
    for t in tools:
        t.setup(work)
        if isinstance(t, Crun):
            t.probe(errpath)
            if t.note:
                notes[t.name] = (notes.get(t.name, "") + "; " + t.note).lstrip("; ")
                log(t.name + ": " + t.note)
    if any(isinstance(t, Crun) and t.name == "crun" and not t.cgroups for t in tools):
        tools = [t for t in tools if t.name != "crun-nocg"]  # the same thing twice

    res = {"machine": machine_info(nsbox, "/"), "tools": [t.name for t in tools],
           "crun_limits": limits, "notes": notes, "gap_ms": a.gap_ms, "cases": {}}
    try:
        runs = [(c, a.gap_ms) for c in a.cases.split(",")]
        runs += [(c, 0) for c in a.b2b.split(",") if c and a.gap_ms]
        for case, gap in runs:
            if case not in CASES:
                sys.exit("bench.py: unknown case %s" % case)
            key = case if gap == a.gap_ms else case + "-b2b"
            rounds = a.rounds_python if case == "python" else a.rounds
            log("case %s: %d rounds x %d tools, gap %d ms" % (key, rounds, len(tools), gap))
            times = bench_case(tools, case, rounds, a.warmup, gap, errpath, log)
            data = {"case": case, "gap_ms": gap, "rounds": min(len(v) for v in times.values()),
                    "times_ms": times,
                    "stats": {k: summary(v) for k, v in times.items() if v}, "ratios": {}}
            for other in [t.name for t in tools if t.name not in ("direct",)]:
                if other == "nsbox":
                    continue
                if other in ("bwrap", "crun", "crun-nocg"):
                    data["ratios"]["nsbox/" + other] = ratio_stats(times, "nsbox", other)
                else:
                    data["ratios"][other + "/bwrap"] = ratio_stats(times, other, "bwrap")
                    data["ratios"][other + "/nsbox"] = ratio_stats(times, other, "nsbox")
            res["cases"][key] = data
            if interrupted:
                break
        if a.cgattach and not interrupted:
            log("cgroup v1 attach micro-benchmark")
            res["cgattach"] = run_cgattach(a.cgattach, a.tag, a.cg_iters, a.gap_ms, log)
        if a.phases and not interrupted:
            log("nsbox phases (perf tracepoints)")
            res["phases"] = perf_phases(nsbox, a.phases, a.gap_ms, work, log)
    finally:
        for t in tools:
            t.teardown()
    res["machine"]["loadavg_end"] = read("/proc/loadavg").strip()

    os.makedirs(a.results, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    md = markdown(res)
    with open(os.path.join(a.results, "bench-%s.json" % stamp), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(a.results, "bench-%s.md" % stamp), "w") as f:
        f.write(md + "\n")
    print(md)
    log("raw results: %s" % os.path.join(a.results, "bench-%s.json" % stamp))
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
