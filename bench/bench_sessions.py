#!/usr/bin/env python3
"""Persistent-sandbox benchmarks (issue: sessions), side by side with crun where there is an
equivalent:

  create -> first exec result        nsbox create + exec /bin/true   (crun: run -d + exec)
  exec round trip of /bin/true       protocol round trip from a client, and `nsbox exec` vs
                                     (crun runs with --cgroup-manager=disabled: it refuses
                                     this machine's hybrid cgroup layout otherwise)
                                     `crun exec` as command lines
  host memory per idle sandbox       PSS of supervisor + init (crun: conmon-less, the container's
                                     init process only, for reference)
  sleep -> wake latency              exec round trip on a frozen sandbox minus the same on a
                                     sandbox as long idle but awake, paired
  creates per second                 2 parallel clients doing create + rm (command line, and the
                                     Python client's open/close); for scale, the same
                                     2 clients running one-shot bwrap sandboxes, bare
                                     namespaces (unshare), /bin/true; and the kernel's
                                     floors without exec: the namespaces alone
                                     (clone_floor.c), a whole sandbox's kernel work
                                     (setup_floor.c, as root), compiled here; the ratio to
                                     setup_floor.c also from interleaved rounds (5 with
                                     --quick, 10 without: the command line, the Python
                                     client and the floor a slice each, order rotated), the
                                     median of the rounds' ratios
  create with many alive             a create's time with 100 (quick) or 300 sandboxes alive,
                                     against none

Prints a markdown table; raw numbers as JSON to bench/results/sessions-<time>.json.
Usage: bench/bench_sessions.py [--quick]   (NSBOX_BIN selects the binary)
"""
import atexit
import glob
import importlib.util
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NSBOX = os.environ.get("NSBOX_BIN") or os.path.join(HERE, "..", "build", "nsbox")
QUICK = "--quick" in sys.argv
N = 30 if QUICK else 200


def ms(ns):
    return ns / 1e6


def stats(xs):
    xs = sorted(xs)
    return {"median": statistics.median(xs), "p10": xs[len(xs) // 10], "p90": xs[len(xs) * 9 // 10],
            "n": len(xs)}


class Env:
    def __init__(self):
        self.base = tempfile.mkdtemp(prefix="nsbox-bench-")
        self.env = dict(os.environ, NSBOX_STATE_DIR=os.path.join(self.base, "state"),
                        NSBOX_CACHE_DIR=os.path.join(self.base, "cache"))
        os.makedirs(self.env["NSBOX_STATE_DIR"])
        os.makedirs(self.env["NSBOX_CACHE_DIR"])

    def nsbox(self, *args, check=True):
        r = subprocess.run([NSBOX, *args], capture_output=True, env=self.env)
        if check and r.returncode != 0:
            raise RuntimeError(f"nsbox {args}: {r.stderr.decode()}")
        return r

    def create(self, *opts):
        return self.nsbox("create", *opts).stdout.decode().strip()

    def cleanup(self):
        for sid in os.listdir(self.env["NSBOX_STATE_DIR"]):
            if len(sid) == 12:
                self.nsbox("rm", sid, check=False)
        shutil.rmtree(self.base, ignore_errors=True)


class Client:
    """A minimal protocol client (docs/protocol.md), to time the round trip itself."""

    def __init__(self, env, sid):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(os.path.join(env.env["NSBOX_STATE_DIR"], sid, "ctl"))
        self.null = os.open("/dev/null", os.O_RDWR)

    def exec(self, argv):
        msg = json.dumps({"v": 1, "op": "exec", "argv": argv}).encode()
        socket.send_fds(self.s, [struct.pack(">I", len(msg)) + msg], [self.null] * 3)
        n = struct.unpack(">I", self._recv(4))[0]
        return json.loads(self._recv(n))

    def _recv(self, n):
        buf = b""
        while len(buf) < n:
            buf += self.s.recv(n - len(buf))
        return buf


def client_in(label, pydir):
    """The Python client package in pydir/nsbox (the python/ of a tree), imported under a name
    of its own, so that two trees' clients live side by side in one process (an A/B of a change
    of the client and the binary together)."""
    name = "nsbox_client_" + "".join(c if c.isalnum() else "_" for c in label)
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(pydir, "nsbox", "__init__.py"),
        submodule_search_locations=[os.path.join(pydir, "nsbox")])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its relative imports resolve through this name
    spec.loader.exec_module(module)
    return module


def rate(fn, seconds):
    """Calls of fn per second, two threads calling it in a loop for `seconds`."""
    counts = [0, 0]

    def worker(i):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            fn()
            counts[i] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.monotonic() - t0)


def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid):
    r = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True)
    return [int(x) for x in r.stdout.split()]


def crun_available():
    return shutil.which("crun") is not None


def crun_bundle():
    """A bundle with the host's /usr read-only, like nsbox's host image."""
    b = tempfile.mkdtemp(prefix="nsbox-bench-crun-")
    root = os.path.join(b, "rootfs")
    os.makedirs(os.path.join(root, "usr"))
    for d in ("proc", "dev", "tmp", "workspace", "etc"):
        os.makedirs(os.path.join(root, d))
    for l in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink("/" + l):
            os.symlink(os.readlink("/" + l), os.path.join(root, l))
    subprocess.run(["crun", "spec", "--rootless"] if os.geteuid() else ["crun", "spec"], cwd=b,
                   check=True, capture_output=True)
    with open(os.path.join(b, "config.json")) as f:
        cfg = json.load(f)
    cfg["process"]["terminal"] = False
    cfg["process"]["args"] = ["/bin/sleep", "3600"]
    cfg["root"]["readonly"] = True
    cfg["mounts"].append({"destination": "/usr", "type": "bind", "source": "/usr",
                          "options": ["rbind", "ro"]})
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(cfg, f)
    return b


def floor_binary(name):
    """bench/<name>.c and its parts bench/<name>_*.c (clone_floor, setup_floor) compiled into a
    temporary directory (removed at exit), or None without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None
    d = tempfile.mkdtemp(prefix="nsbox-bench-")
    atexit.register(shutil.rmtree, d, True)
    binary = os.path.join(d, name)
    sources = [os.path.join(HERE, name + ".c")] + sorted(
        glob.glob(os.path.join(HERE, name + "_*.c")))
    r = subprocess.run([cc, "-O2", "-o", binary] + sources, capture_output=True)
    return binary if r.returncode == 0 else None


def main():
    if not os.path.exists(NSBOX):
        sys.exit(f"no nsbox binary at {NSBOX} (build first, or set NSBOX_BIN)")
    out = {}
    env = Env()
    try:
        # create -> first exec result
        xs = []
        for _ in range(N // 4 or 5):
            t = time.perf_counter_ns()
            sid = env.create()
            env.nsbox("exec", sid, "--", "/bin/true")
            xs.append(ms(time.perf_counter_ns() - t))
            env.nsbox("rm", sid)
        out["create_to_first_exec_ms"] = stats(xs)

        sid = env.create("--ttl", "3600")
        # protocol round trip
        c = Client(env, sid)
        xs = []
        for _ in range(N):
            t = time.perf_counter_ns()
            r = c.exec(["/bin/true"])
            xs.append(ms(time.perf_counter_ns() - t))
            assert r["exit_code"] == 0, r
        out["exec_roundtrip_protocol_ms"] = stats(xs)
        # the floor: the same /bin/true run directly on the host (fork + exec + wait), so that
        # nsbox's own share of the round trip can be told from the cost of exec on this machine
        xs = []
        for _ in range(N):
            t = time.perf_counter_ns()
            subprocess.run(["/bin/true"])
            xs.append(ms(time.perf_counter_ns() - t))
        out["direct_true_ms"] = stats(xs)
        # the CLI, process start included
        xs = []
        for _ in range(N // 2):
            t = time.perf_counter_ns()
            env.nsbox("exec", sid, "--", "/bin/true")
            xs.append(ms(time.perf_counter_ns() - t))
        out["exec_roundtrip_cli_ms"] = stats(xs)

        # memory of an idle sandbox: supervisor + init
        info = json.loads(env.nsbox("inspect", sid).stdout)
        sup = info["supervisor_pid"]
        kids = children(sup)
        out["idle_pss_kib"] = pss_kb(sup) + sum(pss_kb(k) for k in kids)
        out["idle_pss_detail_kib"] = {"supervisor": pss_kb(sup),
                                      "init": sum(pss_kb(k) for k in kids)}
        env.nsbox("rm", sid)
        # PSS divides shared pages (the nsbox binary, libc) among the processes mapping them, so
        # a lone sandbox carries all of its text. With several, what each adds shows.
        many = [env.create("--ttl", "600", "--instance-type", "small") for _ in range(8)]
        time.sleep(1.5)
        total = 0
        for m in many:
            sup = json.loads(env.nsbox("inspect", m).stdout)["supervisor_pid"]
            total += pss_kb(sup) + sum(pss_kb(k) for k in children(sup))
        out["idle_pss_kib_each_of_8"] = round(total / len(many))
        for m in many:
            env.nsbox("rm", m)

        # sleep -> wake. A sandbox left idle for a second is slower to exec anyway (cold CPU
        # caches): the control is a second sandbox, idle as long but never put to sleep. Each
        # round waits until the sleeper sleeps, then execs in both (alternating which first);
        # the wake latency is the difference.
        sid = env.create("--idle-timeout", "1")
        ctl_sid = env.create()
        c, ctl = Client(env, sid), Client(env, ctl_sid)
        xs, awake, wakes = [], [], []
        for i in range(8 if QUICK else 20):
            deadline = time.monotonic() + 10
            while json.loads(env.nsbox("inspect", sid).stdout)["state"] != "sleeping":
                if time.monotonic() > deadline:
                    raise RuntimeError("never slept")
                time.sleep(0.1)
            for who in ((c, xs), (ctl, awake)) if i % 2 == 0 else ((ctl, awake), (c, xs)):
                t = time.perf_counter_ns()
                who[0].exec(["/bin/true"])
                who[1].append(ms(time.perf_counter_ns() - t))
            wakes.append(json.loads(env.nsbox("inspect", sid).stdout)["last_wake_us"] / 1000)
        out["wake_exec_roundtrip_ms"] = stats(xs)
        out["thaw_ms"] = stats(wakes)
        out["idle_awake_exec_roundtrip_ms"] = stats(awake)
        out["wake_latency_ms"] = stats([a - b for a, b in zip(xs, awake)])
        env.nsbox("rm", sid)
        env.nsbox("rm", ctl_sid)

        # creates per second with two parallel clients
        seconds = 3 if QUICK else 10

        def create_rm():
            env.nsbox("rm", env.create())

        out["creates_per_second_2_clients"] = rate(create_rm, seconds)
        # The same through the Python client, as agent code does it: `with box.open():` runs
        # `nsbox create` and holds the sandbox, then deletes it over its socket (no second exec).
        sys.path.insert(0, os.path.join(HERE, "..", "python"))
        import nsbox as nsbox_client
        box = nsbox_client.LocalSandbox(binary=NSBOX, nsbox_env=env.env)

        def open_close():
            with box.open():
                pass

        out["creates_per_second_2_clients_python"] = rate(open_close, seconds)

        # A create's time with many sandboxes alive against none (a create that visited every
        # sandbox, for its gc or the uid slot search, would grow with them). Workspace overcommit, so that the host's
        # disk does not refuse the many (docs/workspace.md); medians of wall times.
        cfg = os.path.join(env.base, "overcommit.json")
        with open(cfg, "w") as f:
            json.dump({"workspace": {"overcommit": True}}, f)
        many_env = dict(env.env, NSBOX_CONFIG=cfg)

        def create_ms():
            t = time.perf_counter_ns()
            r = subprocess.run([NSBOX, "create"], capture_output=True, env=many_env, check=True)
            return ms(time.perf_counter_ns() - t), r.stdout.decode().strip()

        alive = 100 if QUICK else 300
        made = []
        try:
            for n in (0, alive):
                while len(made) < n:
                    made.append(create_ms()[1])
                xs = []
                for _ in range(N // 2):
                    x, sid = create_ms()
                    xs.append(x)
                    env.nsbox("rm", sid)
                out[f"create_ms_with_{'none' if n == 0 else 'many'}_alive"] = stats(xs)
            out["alive_for_create_ms"] = alive
        finally:
            for sid in made:
                env.nsbox("rm", sid, check=False)
        # The same harness doing less, for scale on this machine: what 2 clients get through
        # per second when each "create" is only a one-shot bubblewrap sandbox, only the
        # namespaces (unshare), or nothing but an exec.
        refs = {"true": ["/bin/true"],
                "unshare": ["unshare", "--user", "--map-root-user", "--pid", "--mount", "--net",
                            "--uts", "--ipc", "--cgroup", "--fork", "/bin/true"]}
        if shutil.which("bwrap"):
            refs["bwrap"] = ["bwrap", "--unshare-all", "--ro-bind", "/usr", "/usr",
                             "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
                             "--symlink", "usr/lib64", "/lib64", "--proc", "/proc",
                             "--dev", "/dev", "--tmpfs", "/tmp", "/bin/true"]
        for name, argv in refs.items():
            def one(argv=argv):
                subprocess.run(argv, check=True, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            out[f"reference_per_second_2_clients_{name}"] = rate(one, seconds)
        # The kernel's floor, in C with no exec (bench/clone_floor.c): a clone into the six
        # namespaces of a sandbox and its exit, and a plain clone, 2 processes.
        # And the kernel work of a whole sandbox's create + rm, with no process beyond its
        # init (bench/setup_floor.c; root: loop devices and cgroups): with the ext4 workspace
        # nsbox makes as root, and with a tmpfs one.
        floors = [("clone_floor", "clone_namespaces", []), ("clone_floor", "clone", ["-"])]
        if os.geteuid() == 0:
            floors += [("setup_floor", "setup_ext4", ["--ws=ext4"]),
                       ("setup_floor", "setup_tmpfs", ["--ws=tmpfs"])]
        built = {}
        for prog, name, extra in floors:
            if prog not in built:
                built[prog] = floor_binary(prog)
            r = subprocess.run([built[prog], str(seconds), *extra], capture_output=True,
                               text=True) if built[prog] else None
            if r is not None and r.returncode == 0:
                out[f"reference_per_second_2_clients_{name}"] = float(r.stdout)
            elif r is not None:
                print(f"bench: {prog} {' '.join(extra)}: {r.stderr.strip()}", file=sys.stderr)

        # The ratio to the floor, measured interleaved: on a shared machine the load changes
        # from one measure to the next (the floor alone swung 62-139 per second between runs),
        # so each round runs the command line, the Python client and setup_floor.c for a slice
        # each, in an order rotated by the round, and the ratio is the median of the rounds'.
        if built.get("setup_floor"):
            slice_s, rounds = (1.0, 5) if QUICK else (2.0, 10)

            def floor_rate():
                r = subprocess.run([built["setup_floor"], str(slice_s), "--ws=ext4"],
                                   capture_output=True, text=True)
                return float(r.stdout) if r.returncode == 0 else float("nan")

            parts = [("cli", lambda: rate(create_rm, slice_s)),
                     ("python", lambda: rate(open_close, slice_s)), ("floor", floor_rate)]
            per = {name: [] for name, _ in parts}
            for k in range(rounds):
                for name, fn in parts[k % 3:] + parts[:k % 3]:
                    per[name].append(fn())
            out["floor_rounds"] = dict(per, ratio_cli=statistics.median(
                c / f for c, f in zip(per["cli"], per["floor"])), ratio_python=statistics.median(
                p / f for p, f in zip(per["python"], per["floor"])))

        # crun exec into a running crun container, same machine, same run. crun refuses this
        # machine's hybrid cgroup layout; bench.py's CrunMountNs hides the cgroup2 mount from it
        # in a private mount namespace (the host is not touched).
        if crun_available() and os.geteuid() == 0:
            sys.path.insert(0, HERE)
            from bench import CrunMountNs
            ns = CrunMountNs()
            hybrid = ns.needed()
            if hybrid:
                ns.setup()

            def crun(*args, check=True):
                if hybrid:
                    ns.enter()
                try:
                    # No pipes: `run -d` leaves the container holding them, and waiting for
                    # their end would wait for the container.
                    return subprocess.run(["crun", "--cgroup-manager=disabled", *args], check=check,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL)
                finally:
                    if hybrid:
                        ns.leave()

            b = crun_bundle()
            name = f"nsbox-bench-{os.getpid()}"
            try:
                crun("run", "-d", "--bundle", b, name)
                xs = []
                for _ in range(N // 2):
                    t = time.perf_counter_ns()
                    crun("exec", name, "/bin/true")
                    xs.append(ms(time.perf_counter_ns() - t))
                out["crun_exec_cli_ms"] = stats(xs)
            finally:
                crun("delete", "-f", name, check=False)
                shutil.rmtree(b, ignore_errors=True)
    finally:
        env.cleanup()

    print("| measure | nsbox | crun | target |")
    print("|---|---|---|---|")
    print(f"| create -> first exec result (median ms) | {out['create_to_first_exec_ms']['median']:.2f} | | |")
    print(f"| exec round trip /bin/true, protocol (median ms) | {out['exec_roundtrip_protocol_ms']['median']:.2f} | | <= 1 |")
    print(f"| /bin/true run directly on the host, no sandbox (median ms) | {out['direct_true_ms']['median']:.2f} | | (floor) |")
    crun = out.get("crun_exec_cli_ms", {}).get("median")
    print(f"| exec round trip /bin/true, command line (median ms) | {out['exec_roundtrip_cli_ms']['median']:.2f} | "
          f"{crun:.2f} |" if crun else f"| exec round trip, command line (median ms) | {out['exec_roundtrip_cli_ms']['median']:.2f} | n/a |", "|")
    print(f"| host memory of one idle sandbox alone (PSS KiB) | {out['idle_pss_kib']} | | |")
    print(f"| host memory per idle sandbox, 8 of them (PSS KiB each) | {out['idle_pss_kib_each_of_8']} | | <= 1024 |")
    print(f"| sleep -> wake exec round trip (median ms) | {out['wake_exec_roundtrip_ms']['median']:.2f} | | |")
    print(f"| the same on a sandbox as idle but awake (median ms) | {out['idle_awake_exec_roundtrip_ms']['median']:.2f} | | |")
    print(f"| wake latency: the difference (median of pairs, ms) | {out['wake_latency_ms']['median']:.2f} | | |")
    print(f"| wake latency: the thaw itself, timed by the supervisor (median ms) | {out['thaw_ms']['median']:.2f} | | <= 1 |")
    print(f"| creates per second, 2 clients (create + rm) | {out['creates_per_second_2_clients']:.0f} | | >= 400 |")
    print(f"| the same through the Python client (`with LocalSandbox().open(): pass`) | "
          f"{out['creates_per_second_2_clients_python']:.0f} | | >= 400 |")
    none, many = out["create_ms_with_none_alive"], out["create_ms_with_many_alive"]
    print(f"| create (median ms) with none alive / with {out['alive_for_create_ms']} alive | "
          f"{none['median']:.2f} / {many['median']:.2f} ({many['median'] / none['median']:.2f} x) | | |")
    print(f"| the same, 90th percentile (ms) | {none['p90']:.2f} / {many['p90']:.2f} | | |")
    same = "the same 2 clients: "
    for name, what in (("bwrap", same + "one-shot bubblewrap sandboxes (`bwrap --unshare-all ... "
                                        "/bin/true`)"),
                       ("unshare", same + "namespaces alone (`unshare -Urpmnuic --fork /bin/true`)"),
                       ("true", same + "`/bin/true` alone"),
                       ("clone_namespaces", "2 processes in C, no exec: a clone into a sandbox's "
                                            "6 namespaces and its exit (`clone_floor.c`)"),
                       ("clone", "2 processes in C, no exec: a plain clone and its exit"),
                       ("setup_ext4", "2 processes in C, no exec: the kernel work of a whole "
                                      "sandbox's create + rm, ext4 workspace (`setup_floor.c`)"),
                       ("setup_tmpfs", "the same with a tmpfs workspace")):
        v = out.get(f"reference_per_second_2_clients_{name}")
        if v:
            print(f"| for scale, {what} per second | {v:.0f} | | |")
    # Machines differ by several times in what a process costs (docs/benchmarks.md, "Two
    # kernels"): the ratios of the same run are what compares across them.
    bw = out.get("reference_per_second_2_clients_bwrap")
    if bw:
        print(f"| creates per second / one-shot bubblewrap per second, same run (command line / "
              f"Python client) | {out['creates_per_second_2_clients'] / bw:.2f} / "
              f"{out['creates_per_second_2_clients_python'] / bw:.2f} | | |")
    fl = out.get("reference_per_second_2_clients_setup_ext4")
    if fl:
        # what no implementation of the contract can beat on this machine (setup_floor.c)
        print(f"| creates per second / the whole sandbox's kernel floor (ext4), same run "
              f"(command line / Python client) | {out['creates_per_second_2_clients'] / fl:.2f} / "
              f"{out['creates_per_second_2_clients_python'] / fl:.2f} | | |")
        print(f"| 400 per second (the sessions target) / that floor | {400 / fl:.2f} | | |")
    fr = out.get("floor_rounds")
    if fr:
        n = len(fr["cli"])
        print(f"| **the same, interleaved: median of {n} rounds' ratios** (command line / Python "
              f"client; per second, medians: {statistics.median(fr['cli']):.0f} / "
              f"{statistics.median(fr['python']):.0f} against {statistics.median(fr['floor']):.0f})"
              f" | **{fr['ratio_cli']:.2f} / {fr['ratio_python']:.2f}** | | >= 0.80 |")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = os.path.join(HERE, "results", time.strftime("sessions-%Y%m%d-%H%M%S.json"))
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"\nraw: {path}")


if __name__ == "__main__":
    main()
