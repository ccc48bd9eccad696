#!/usr/bin/env python3
"""Creates per second against the kernel's floor, for one nsbox build or several side by side.

    sudo python3 bench/create_ratio.py [--rounds 10] [--slice 2] [LABEL=/path/to/nsbox ...]

The interleaved measure of bench_sessions.py alone, with A/B builds: each round runs, for a
slice each and in an order rotated by the round, every build's create + rm through the command
line and through the Python client (`with LocalSandbox().open(): pass`), two clients each, and
bench/setup_floor.c (the same kernel work done directly with system calls). Printed: each
round's rates, then per build the median of the rounds' ratios to the floor and their
quartiles. Without arguments the build is `$NSBOX_BIN`, else build/nsbox. Needs root (ext4
workspaces, cgroups) and a C compiler.

    --python LABEL=DIR   build LABEL's Python client is DIR/nsbox (the python/ of its tree),
                         for a change of the client and the binary together; by default
                         every build uses this tree's python/nsbox
"""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import bench_sessions as bs  # noqa: E402
import nsbox as client  # noqa: E402


def parts_of(label, binary, env, slice_s, client=client):
    def cli():
        r = subprocess.run([binary, "create"], capture_output=True, env=env.env, check=True)
        subprocess.run([binary, "rm", r.stdout.decode().strip()], capture_output=True,
                       env=env.env, check=True)

    box = client.LocalSandbox(binary=binary, nsbox_env=env.env)

    def python():
        with box.open():
            pass

    cli(), python()  # first use (the workspace template) outside the measure
    return [("cli " + label, lambda: bs.rate(cli, slice_s)),
            ("python " + label, lambda: bs.rate(python, slice_s))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--slice", type=float, default=2.0, help="seconds per part and round")
    ap.add_argument("--python", action="append", default=[], metavar="LABEL=DIR",
                    help="build LABEL's Python client is DIR/nsbox")
    ap.add_argument("builds", nargs="*", help="LABEL=PATH of an nsbox binary")
    a = ap.parse_args()
    clients = {}
    for p in a.python:
        label, _, pydir = p.partition("=")
        if not os.path.exists(os.path.join(pydir, "nsbox", "__init__.py")):
            sys.exit("--python %s: no Python client at %s/nsbox" % (p, pydir))
        clients[label] = bs.client_in(label, os.path.abspath(pydir))
    builds = [b.partition("=")[::2] for b in a.builds] or [("nsbox", bs.NSBOX)]
    for label, path in builds:
        if not os.path.exists(path):
            sys.exit("%s: no such file" % path)
    floor = bs.floor_binary("setup_floor")
    if not floor:
        sys.exit("cannot compile bench/setup_floor.c (no C compiler?)")
    env = bs.Env()
    try:
        parts = [p for label, path in builds
                 for p in parts_of(label, os.path.abspath(path), env, a.slice,
                                   clients.get(label, client))]

        def floor_rate():
            r = subprocess.run([floor, str(a.slice), "--ws=ext4"], capture_output=True,
                               text=True)
            return float(r.stdout) if r.returncode == 0 else float("nan")

        parts.append(("floor", floor_rate))
        per = {name: [] for name, _ in parts}
        for k in range(a.rounds):
            for name, fn in parts[k % len(parts):] + parts[:k % len(parts)]:
                per[name].append(fn())
            print("round %d: %s; load %.1f" % (k + 1, ", ".join(
                "%s %.0f" % (n, per[n][-1]) for n, _ in parts), os.getloadavg()[0]), flush=True)
    finally:
        env.cleanup()
    print("\n| per second, 2 clients | median | ratio to the floor: median of the rounds' "
          "(quartiles) |\n|---|---:|---|")
    for name, _ in parts:
        xs = per[name]
        if name == "floor":
            print("| `setup_floor.c` | %.0f | |" % statistics.median(xs))
            continue
        rs = [x / f for x, f in zip(xs, per["floor"])]
        q = statistics.quantiles(rs, n=4) if len(rs) > 1 else rs * 3
        print("| %s | %.0f | **%.2f** (%.2f-%.2f) |" % (name, statistics.median(xs),
                                                          statistics.median(rs), q[0], q[2]))


if __name__ == "__main__":
    main()
