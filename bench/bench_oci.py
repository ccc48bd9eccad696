#!/usr/bin/env python3
"""nsbox-oci against runc and crun under the engines that call them: start to exit of a
container that runs `true`.

    sudo python3 bench/bench_oci.py [--quick] [--oci build/nsbox-oci] [--extra LABEL=PATH]
                                    [--rounds N] [--gap-ms 40]

Two cases, each run by every runtime in the same run, round-robin (the order rotated every
round), wall clock with time.perf_counter_ns around the client command, medians and p10/p90
plus the medians of the per-round ratios nsbox-oci / runc and nsbox-oci / crun (the runtime is
named `nsbox` in the tables; `--extra LABEL=PATH` adds another nsbox-oci build to the same
rotation, for an A/B of a change):

docker  `docker run --rm --network none --runtime=X IMG true` against a dockerd of our own
        (`--add-runtime nsbox=<nsbox-oci> --add-runtime crun=/usr/bin/crun`; runc is dockerd's
        default, Debian's /usr/sbin/runc), on overlay2 storage, Docker's default (--storage
        vfs: directories). Network none for every runtime: no veth or
        address to set up (Docker's config still has its prestart hook, which every runtime
        runs).
ctr     `ctr run --rm --runtime io.containerd.runc.v2 --runc-binary X IMG NAME true` against
        that dockerd's own containerd (its namespace nsbox-bench), each runtime with its own
        --runc-root under the work directory.

The engines are Debian's (docker.io, containerd), started as the e2e tests start them
(tests/lib/engines.py): dockerd in its own network and mount namespaces, own roots, socket and
cgroup parent. In that mount namespace the hybrid host's cgroup2 mount is hidden, as crun 1.x
refuses a hybrid host: every runtime then sees the same cgroup v1 hierarchies. The image is the
tests' busybox image (a docker-save archive made here, loaded into dockerd and imported into
containerd). The first --warmup rounds are not counted.

What differs between the runtimes is what each container gets: nsbox-oci makes an nsbox
sandbox (a user namespace mapping an unprivileged range, every namespace new, nsbox's seccomp
profile, cgroup limits) with the config's mounts, user and capabilities; runc and crun run
Docker's or ctr's config as given (no user namespace, Docker's default seccomp profile under
docker, none under ctr).

Needs root, Debian's docker.io, containerd, runc and crun. Everything is made in one temporary
directory and the engines' own, removed on exit (also on Ctrl-C); results as markdown on
stdout and JSON + markdown in bench/results/ (gitignored).
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
import engines  # noqa: E402
from benchlib import summary_ms as summary  # noqa: E402

NS = "nsbox-bench"
RUNC = "/usr/sbin/runc"
CRUN = "/usr/bin/crun"


def timed(argv):
    t0 = time.perf_counter_ns()
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter_ns() - t0
    if r.returncode != 0:
        raise SystemExit("bench_oci: %s failed (%d): %s"
                         % (" ".join(argv), r.returncode, r.stderr.decode(errors="replace")))
    return dt


def commands(daemon, ocis, work):
    """{case: {runtime: function(round) -> argv}}; ocis: {label: path} of the nsbox-oci builds,
    each a runtime of dockerd named as its label."""
    docker = [engines.DOCKER, "-H", "unix://" + daemon.sock]
    ctr = [engines.CTR, "--address", daemon.containerd_sock, "-n", NS]
    binaries = dict(ocis, runc=RUNC, crun=CRUN)

    def docker_run(tool):
        return lambda r: docker + ["run", "--rm", "--network", "none", "--runtime=" + tool,
                                   engines.IMAGE, "true"]

    def ctr_run(tool):
        root = os.path.join(work, "runc-root-" + tool)
        return lambda r: ctr + ["run", "--rm", "--runtime", "io.containerd.runc.v2",
                                "--runc-binary", binaries[tool], "--runc-root", root,
                                "docker.io/" + engines.IMAGE, "b%d-%s" % (r, tool), "true"]
    return {"docker": {t: docker_run(t) for t in binaries},
            "ctr": {t: ctr_run(t) for t in binaries}}


def bench(cases, ocis, rounds, warmup, gap):
    res = {c: {t: [] for t in tools} for c, tools in cases.items()}
    ratios = {c: {"%s / %s" % (o, ref): [] for o in ocis for ref in ("runc", "crun")}
              for c in cases}
    for r in range(rounds + warmup):
        for case, tools in cases.items():
            order = list(tools)
            order = order[r % len(order):] + order[:r % len(order)]
            got = {}
            for tool in order:
                time.sleep(gap)
                got[tool] = timed(tools[tool](r))
            if r < warmup:
                continue
            for t, v in got.items():
                res[case][t].append(v)
            for o in ocis:
                for ref in ("runc", "crun"):
                    ratios[case]["%s / %s" % (o, ref)].append(got[o] / got[ref])
    return res, ratios


def report_text(report):
    lines = ["# nsbox-oci vs runc vs crun: start to exit of `true` (dockerd's storage: %s)"
             % report["storage"], "",
             "| case | runtime | median ms | p10 | p90 | n |", "|---|---|---:|---:|---:|---:|"]
    for case, tools in report["results"].items():
        for t, s in tools.items():
            lines.append("| %s | %s | %.1f | %.1f | %.1f | %d |"
                         % (case, t, s["median_ms"], s["p10_ms"], s["p90_ms"], s["n"]))
    lines += ["", "Medians of the per-round ratios (target: nsbox / runc below 1):", ""]
    for case, r in report["ratios"].items():
        lines.append("- %s: %s" % (case, ", ".join("%s %.2f" % kv for kv in r.items())))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--oci", default=os.path.join(os.path.dirname(
        os.environ.get("NSBOX_BIN") or os.path.join(REPO, "build", "nsbox")), "nsbox-oci"))
    ap.add_argument("--extra", action="append", default=[], metavar="LABEL=PATH",
                    help="another nsbox-oci build in the same rotation (A/B of a change)")
    ap.add_argument("--quick", action="store_true", help="6 rounds, 1 warm-up")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--gap-ms", type=int, default=40)
    ap.add_argument("--storage", choices=("overlay2", "vfs"), default="overlay2",
                    help="dockerd's storage driver (overlay2, Docker's default: nsbox-oci "
                    "makes the writable root over the layers again; vfs: directories)")
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.warmup = 6, 1
    why = engines.missing(engines.DOCKERD, engines.DOCKER, engines.CTR, RUNC, CRUN)
    if why:
        raise SystemExit("bench_oci: " + why)
    ocis = {"nsbox": os.path.abspath(a.oci)}
    for x in a.extra:
        label, sep, path = x.partition("=")
        if not sep or not label.isalnum() or label in ("nsbox", "runc", "crun"):
            raise SystemExit("bench_oci: --extra %r: give LABEL=PATH, LABEL a new word" % x)
        ocis[label] = os.path.abspath(path)
    for path in ocis.values():
        if not os.path.exists(path):
            raise SystemExit("bench_oci: no nsbox-oci at %s: build first, or give --oci" % path)
    work = tempfile.mkdtemp(prefix="nsbox-bench-oci.")
    daemon = None
    try:
        env = {"PATH": engines.PATH}
        for k in ("STATE", "CACHE", "DATA"):  # nsbox's own, private to this run
            env["NSBOX_%s_DIR" % k] = os.path.join(work, k.lower())
            os.makedirs(env["NSBOX_%s_DIR" % k])
        daemon = engines.Dockerd(dict(ocis, crun=CRUN), env=env, hide_cgroup2=True,
                                 storage=a.storage)
        archive = os.path.join(work, "image.tar")
        engines.busybox_archive(archive)
        for r in (daemon.docker("load", "-i", archive),
                  daemon.ctr(NS, "image", "import", archive)):
            if r.returncode != 0:
                raise SystemExit("bench_oci: image load: " + r.stderr)
        res, ratios = bench(commands(daemon, ocis, work), ocis, a.rounds, a.warmup,
                            a.gap_ms / 1000)
    finally:
        if daemon:
            for c in daemon.ctr(NS, "container", "ls", "-q").stdout.split():
                daemon.ctr(NS, "task", "rm", "-f", c)
                daemon.ctr(NS, "container", "rm", c)
            daemon.stop()
        shutil.rmtree(work, ignore_errors=True)

    report = {"results": {c: {t: summary(v) for t, v in tools.items()}
                          for c, tools in res.items()},
              "ratios": {c: {o: statistics.median(v) for o, v in r.items()}
                         for c, r in ratios.items()},
              "rounds": a.rounds, "warmup": a.warmup, "gap_ms": a.gap_ms,
              "storage": a.storage}
    text = report_text(report)
    print(text)
    os.makedirs(a.results, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with open(os.path.join(a.results, "oci-%s.json" % stamp), "w") as f:
        json.dump({"summary": report, "ns": res}, f, indent=1)
    with open(os.path.join(a.results, "oci-%s.md" % stamp), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
