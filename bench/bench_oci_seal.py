#!/usr/bin/env python3
"""nsbox-oci's create on an engine's overlay root, whose set-id seal walks either the merged
root (before) or the layer directories (rootfs/setid_layers.h), for two builds side by side.

    sudo python3 bench/bench_oci_seal.py [--rounds N] [--layers DIR,...] LABEL=PATH LABEL=PATH

The bundle's rootfs is an overlay mounted as the engines mount one (lowerdir of several
layers, an upper and a work directory): a busybox layer on top of host directories taken as
layers as they are (default: /usr/include, /usr/lib/python3.11, /usr/lib/python3 and
/usr/lib/x86_64-linux-gnu, about 23,000 entries; read only: the overlay writes in its upper
directory alone), and an upper directory with a set-id program in it (a restarted
container's). Each round runs `nsbox-oci create` of every build to its pid file, timed
(perf_counter_ns around the command), then `delete --force` (not timed); the order is reversed
every other round and the first 3 rounds are not counted. Printed: each build's median and the
median of the per-round ratios of the builds to the first. Everything is made in one temporary
directory (nsbox's own state, data and cache directories too) and removed at the end, the
overlay unmounted.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
sys.path.insert(0, HERE)
from nsbox_test import Dirs  # noqa: E402
from oci_bundle import config  # noqa: E402
from bench_oci_create import create_ms, delete_left  # noqa: E402

LAYERS = "/usr/include,/usr/lib/python3.11,/usr/lib/python3,/usr/lib/x86_64-linux-gnu"


def engine_bundle(work, layers):
    """The bundle, its rootfs an overlay of busybox over layers; the mount point."""
    b = os.path.join(work, "bundle")
    rootfs = os.path.join(b, "rootfs")
    top, upper, ovl_work = (os.path.join(work, d) for d in ("top", "upper", "work"))
    for d in ("bin", "tmp", "etc", "proc"):
        os.makedirs(os.path.join(top, d))
    shutil.copy("/bin/busybox", os.path.join(top, "bin", "busybox"))
    for tool in ("sh", "true"):
        os.symlink("busybox", os.path.join(top, "bin", tool))
    os.makedirs(os.path.join(upper, "usr/local/bin"))
    with open(os.path.join(upper, "usr/local/bin/mine"), "w") as f:
        f.write("earlier\n")
    os.chmod(os.path.join(upper, "usr/local/bin/mine"), 0o4755)
    os.makedirs(ovl_work)
    os.makedirs(rootfs)
    opts = f"lowerdir={':'.join([top] + layers)},upperdir={upper},workdir={ovl_work}"
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o", opts, rootfs], check=True)
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(config(["true"]), f)
    return b, rootfs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--layers", default=LAYERS)
    ap.add_argument("builds", nargs="+", help="LABEL=PATH of an nsbox-oci; the first is the base")
    a = ap.parse_args()
    builds = {k: os.path.abspath(v) for k, v in (x.split("=", 1) for x in a.builds)}
    layers = a.layers.split(",")
    entries = sum(sum(len(d) + len(f) for _, d, f in os.walk(x)) for x in layers)
    work = tempfile.mkdtemp(prefix="nsbox-bench-seal-")
    dirs = Dirs()
    rootfs = None
    try:
        b, rootfs = engine_bundle(work, layers)
        ms = {label: [] for label in builds}
        with open(os.path.join(work, "streams"), "w") as err:
            for i in range(a.rounds + 3):
                for label in builds if i % 2 else list(builds)[::-1]:
                    t = create_ms(builds[label], os.path.join(work, f"state-{label}"), b,
                                  dirs.env(), err)
                    if i >= 3:
                        ms[label].append(t)
        print(f"# nsbox-oci create on an overlay root, {a.rounds} rounds; layers: busybox, "
              f"{', '.join(layers)} ({entries} entries)\n")
        print("| build | median ms | p10 | p90 |\n|---|---:|---:|---:|")
        for label, v in ms.items():
            q = statistics.quantiles(v, n=10)
            print(f"| {label} | {statistics.median(v):.1f} | {q[0]:.1f} | {q[-1]:.1f} |")
        print()
        base = list(builds)[0]
        for label in list(builds)[1:]:
            ratio = [x / y for x, y in zip(ms[label], ms[base])]
            print(f"- {label} / {base}: median of the per-round ratios "
                  f"{statistics.median(ratio):.3f}")
    finally:
        delete_left(builds, work, dirs.env())
        if rootfs:
            subprocess.run(["umount", "-l", rootfs], check=False)
        shutil.rmtree(work, True)
        dirs.cleanup()


if __name__ == "__main__":
    main()
