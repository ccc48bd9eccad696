#!/usr/bin/env python3
"""Where `nsbox create` + `nsbox rm` spends its CPU, with two parallel clients (the
creates-per-second measure, bench_sessions.py's `create_rm`).

    sudo python3 bench/profile_create.py                      # rate, busy %, CPU per cycle
    sudo python3 bench/profile_create.py --perf               # ... and a perf profile
    sudo python3 bench/profile_create.py --rounds 4 \\
        --variant ext4= --variant dir='--workspace /tmp/wsdir' # A/B of create options
    sudo python3 bench/profile_create.py --variant new= --variant old= \
        --bin old=/tmp/old-build/nsbox                          # A/B of two builds
    sudo python3 bench/profile_create.py --python-client --tree --variant new= --variant old= \
        --bin old=/tmp/old/build/nsbox --python old=/tmp/old/python  # the Python client's

Each round runs the loop for --seconds per variant, variants alternating (this machine is
noisy: compare variants within one run). CPU per cycle is the whole machine's busy time (from
/proc/stat, kernel threads included) divided by the cycles made; on a machine shared with other
work that counts theirs too, so --tree also gives the CPU of the loop's own process tree (its
clients, their supervisors and sandboxes, the harness; `perf stat -e task-clock`, which follows
every descendant; not the kernel threads' work for them), each round rerun under perf stat.
With --perf, one extra round of the first variant runs under `perf record -g -e cpu-clock`
(the loop's process tree; `-a` with --perf-all), and the shares by process name, with the tree's
CPU per cycle in ms for each, and the top kernel and user functions are printed. With
--python-client a cycle is the Python client's `with LocalSandbox().open(): pass` instead of the
two commands (a variant's options are then not used), with this tree's python/nsbox, or a
variant's own (--python LABEL=DIR: DIR/nsbox). Sandboxes live in a `mktemp -d`
state and cache directory of their own, removed at the end. Needs root (ext4 workspaces) and
nsbox built (`$NSBOX_BIN`, else build/nsbox).
"""
import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_sessions as bs  # noqa: E402

NSBOX = os.environ.get("NSBOX_BIN") or os.path.join(HERE, "..", "build", "nsbox")


def busy_total():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4], sum(v)


def loop(nsbox, env, opts, seconds, client=None):
    """Two threads doing create + rm for `seconds` (client: the Python client's module, whose
    open() and its end are the cycle): (cycles/s, busy share, CPU ms per cycle, cycles)."""
    counts, errors = [0, 0], []
    box = client.LocalSandbox(binary=nsbox, nsbox_env=env) if client else None

    def cycle():
        if box:
            with box.open():
                return
        r = subprocess.run([nsbox, "create", *opts], capture_output=True, env=env)
        if r.returncode != 0:
            raise RuntimeError("nsbox create %s: %s" % (" ".join(opts), r.stderr.decode().strip()))
        subprocess.run([nsbox, "rm", r.stdout.decode().strip()], capture_output=True, env=env,
                       check=True)

    def worker(i):
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                cycle()
                counts[i] += 1
        except Exception as ex:  # reported by the caller
            errors.append(ex)

    cycle()  # the template, first-use work
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    b0, t0 = busy_total()
    w0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    b1, t1 = busy_total()
    wall = time.monotonic() - w0
    if errors:
        raise errors[0]
    n = sum(counts)
    busy = (b1 - b0) / (t1 - t0) if t1 > t0 else float("nan")
    ncpu = os.cpu_count() or 1
    return n / wall, busy, busy * ncpu * wall / n * 1000 if n else float("nan"), n


PERF_HZ = 1000  # perf record's default sampling frequency for cpu-clock (-F 1000 below)


def perf_report(data, what, limit, samples=False):
    """perf report's rows (share, then the key); with samples, (share, samples, key) tuples."""
    r = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", what, "--stdio",
                        "-g", "none", *(["-n"] if samples else [])], capture_output=True,
                       text=True)
    rows = [line.rstrip() for line in r.stdout.splitlines()
            if line.strip() and not line.startswith("#")]
    if samples:
        rows = [(float(x.split()[0].rstrip("%")), int(x.split()[1]), " ".join(x.split()[2:]))
                for x in rows]
    return rows[:limit]


def child_args(a, label, opts, bins):
    """The arguments of a child that runs one loop of variant label (--tree, --perf)."""
    cmd = ["--seconds", str(a.seconds), "--variant", "%s=%s" % (label, shlex.join(opts))]
    if label in bins:
        cmd += ["--bin", "%s=%s" % (label, bins[label])]
    if a.python_client:
        cmd += ["--python-client"]
        cmd += ["--python", "%s=%s" % (label, a.pydirs[label])] if label in a.pydirs else []
    return cmd


def tree_loop(a, label, opts, bins, env, base):
    """One round of a variant in a child under `perf stat`: (rate, busy, CPU ms per cycle of the
    whole machine, CPU ms per cycle of the loop's own process tree, its context switches per
    cycle)."""
    out, st = os.path.join(base, "tree.cycles"), os.path.join(base, "tree.stat")
    cmd = ["perf", "stat", "-x,", "-e", "task-clock,context-switches", "-o", st, "--",
           sys.executable, os.path.abspath(__file__), *child_args(a, label, opts, bins),
           "--cycles-out", out]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(out) as f:
        rate, busy, cpu, n = f.read().split()
    with open(st) as f:
        counts = {line.split(",")[2]: float(line.split(",")[0]) for line in f
                  if line.count(",") >= 2 and line.split(",")[0][:1].isdigit()}
    # the child's first cycle (the template's first use) is outside its count: n + 1
    n = int(n) + 1
    return (float(rate), float(busy), float(cpu), counts["task-clock"] / n,
            counts["context-switches"] / n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL=OPTIONS: extra `nsbox create` options (repeatable)")
    ap.add_argument("--bin", action="append", default=[],
                    help="LABEL=PATH: the nsbox binary of a variant (default: $NSBOX_BIN)")
    ap.add_argument("--perf", action="store_true", help="also profile one round with perf")
    ap.add_argument("--perf-all", action="store_true", help="with --perf: the whole machine")
    ap.add_argument("--tree", action="store_true",
                    help="also the CPU per cycle of the loop's own process tree (perf stat)")
    ap.add_argument("--python-client", action="store_true",
                    help="the cycle is the Python client's open() and its end")
    ap.add_argument("--python", action="append", default=[], metavar="LABEL=DIR",
                    help="with --python-client: variant LABEL's client is DIR/nsbox")
    ap.add_argument("--cycles-out", help=argparse.SUPPRESS)  # a --tree child's cycle count
    a = ap.parse_args()
    a.pydirs = {label: os.path.abspath(d) for label, d in (p.partition("=")[::2] for p in a.python)}
    clients = {}
    if a.python_client:
        clients = {label: bs.client_in(label, d) for label, d in a.pydirs.items()}
        clients[None] = bs.client_in("this tree", os.path.join(HERE, "..", "python"))
    if not os.path.exists(NSBOX):
        sys.exit("no nsbox binary at %s (build first, or set NSBOX_BIN)" % NSBOX)
    variants = []
    for v in a.variant or ["default="]:
        label, _, opts = v.partition("=")
        variants.append((label, shlex.split(opts)))
    bins = dict(b.partition("=")[::2] for b in a.bin)
    for label, path in bins.items():
        if label not in dict(variants) or not os.path.exists(path):
            sys.exit("--bin %s=%s: no such variant or no such file" % (label, path))
    base = tempfile.mkdtemp(prefix="nsbox-profile-")
    env = dict(os.environ, NSBOX_STATE_DIR=os.path.join(base, "state"),
               NSBOX_CACHE_DIR=os.path.join(base, "cache"))
    os.makedirs(env["NSBOX_STATE_DIR"])
    os.makedirs(env["NSBOX_CACHE_DIR"])
    results = {label: [] for label, _ in variants}
    try:
        if a.cycles_out:  # a --tree child: one loop, its cycle count for the parent
            label, opts = variants[0]
            with open(a.cycles_out, "w") as f:
                f.write("%f %f %f %d" % loop(bins.get(label, NSBOX), env, opts, a.seconds,
                                             clients.get(label, clients.get(None))))
            return
        for r in range(a.rounds):
            for label, opts in variants:
                if a.tree:
                    rate, busy, cpu, tree, cs = tree_loop(a, label, opts, bins, env, base)
                else:
                    rate, busy, cpu, _ = loop(bins.get(label, NSBOX), env, opts, a.seconds,
                                              clients.get(label, clients.get(None)))
                    tree = cs = float("nan")
                results[label].append((rate, busy, cpu, tree, cs))
                print("round %d %-10s %6.0f cycles/s  busy %3.0f %%  %5.2f ms CPU per cycle"
                      % (r + 1, label, rate, busy * 100, cpu)
                      + ("  (own tree %5.2f ms, %5.1f context switches)" % (tree, cs)
                         if a.tree else ""), flush=True)
        print()
        print("| variant | cycles/s (median) | CPU ms per cycle (median) | own tree | "
              "its context switches |")
        print("|---|---:|---:|---:|---:|")
        for label, _ in variants:
            xs = results[label]
            print("| %s | %.0f | %.2f | %.2f | %.1f |" % (
                label, statistics.median(x[0] for x in xs), statistics.median(x[2] for x in xs),
                statistics.median(x[3] for x in xs), statistics.median(x[4] for x in xs)))
        if a.perf:
            if not shutil.which("perf"):
                print("\nperf is not installed: no profile (apt-get install linux-perf)")
                return
            data = os.path.join(base, "perf.data")
            label, opts = variants[0]
            counted = os.path.join(base, "perf.cycles")
            cmd = ["perf", "record", "-q", *(["-a"] if a.perf_all else []), "-g", "-F", str(PERF_HZ),
                   "-e", "cpu-clock", "-o", data, "--", sys.executable, os.path.abspath(__file__),
                   "--rounds", "1", *child_args(a, label, opts, bins), "--cycles-out", counted]
            subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
            with open(counted) as f:
                cycles = int(f.read().split()[3]) + 1  # and its first, untimed cycle
            rows = perf_report(data, "comm", 15, samples=True)
            total = sum(n for _, n, _ in rows) or 1
            print("\nperf, variant %s: %s by process name (ms per cycle: 1 sample = 1 ms of "
                  "cpu-clock, over %d cycles)" % (label, "all CPU" if a.perf_all else
                                                   "the loop's own tree", cycles))
            for share, n, comm in rows:
                print("%8.2f%%  %6.2f ms  %s" % (share, n / cycles * (1000 / PERF_HZ), comm))
            print("%8s   %6.2f ms  all" % ("", total / cycles * (1000 / PERF_HZ)))
            print("\ntop functions (self time)")
            print("\n".join(perf_report(data, "comm,dso,sym", 40)))
    finally:
        subprocess.run([NSBOX, "gc"], env=env, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
