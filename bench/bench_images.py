#!/usr/bin/env python3
"""OCI images: what an image costs at create, and what nsbox adds to a pull.

    sudo python3 bench/bench_images.py [--quick] [--nsbox build/nsbox] [--rounds N]
                                       [--pull-rounds N] [--gap-ms 40] [--skip-disk]
                                       [--baseline OTHER_NSBOX] [--skip-create]
                                       [--rm-each-round]

Three measures, each side by side in one run, round-robin (the order rotated every round), wall
clock with time.perf_counter_ns, medians and p10/p90 plus the median of the per-round ratios:

create  `nsbox create` then `nsbox exec ID -- sh -c 'echo hi'`, timed until exec's output is
        in, for --image host, for --image REF (the test image below, pulled once: in root's
        store its layers, the sandbox's root their overlay) and for the same image stored
        merged (NSBOX_OCI_LAYOUT=merged, in a data directory of its own: no overlay). The rm
        that follows is not timed. The pool is off (a config with {"pool": {"size": 0}}), so
        every create is a cold one. Target: the image within 10 % of host.
disk    what a second image with the same base and 20 sandboxes of one image add to the store,
        counted (blocks of the image store, each inode once), for root's store of shared layers
        and for the merged form (NSBOX_OCI_LAYOUT=merged, one rootfs/ per image) side by side:
        image 2 is image 1's two layers plus a small top layer of its own; the 20 sandboxes
        are `nsbox create` with tmpfs workspaces, their state directories counted too.
        Target: the second image adds its own layer only; the sandboxes add nothing.
pull    `nsbox image pull --tls-verify=false REF` into an empty data directory vs
        `skopeo copy --src-tls-verify=false docker://REF oci:DIR:latest` into an empty
        directory, from Debian's docker-registry on 127.0.0.1 (plain HTTP), and vs
        "skopeo+tar": that copy followed by `tar -xzf` of each layer into one directory and a
        sync, the floor of any pull that unpacks (tar checks no digest and applies no
        whiteout). nsbox's pull is that same skopeo copy into a staging layout followed by the
        import (hash, unpack); the difference is the import. Target: within 1.5x of skopeo.
        Every pull's files are kept until the measure ends (--rm-each-round: removed after
        each pull, which on ext4 without a journal measures the kernel's scan past recently
        freed inodes instead: bench_pull says why).
        --baseline adds another nsbox binary to the rotation (an A/B of two builds).

The image: two gzip layers made from host files, no download: the small busybox layer of the
e2e tests (tests/lib/oci_images.py, with a stand-in python3) and a tar of /usr/lib/python3.11
(or --big-dir), about 120 MB unpacked / 30 MB compressed on Debian 12.

Needs root, skopeo and docker-registry (apt install skopeo docker-registry). Everything is
made in one temporary directory, removed on exit (also on Ctrl-C); results as markdown on
stdout and JSON + markdown in bench/results/ (gitignored).
"""
import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
import oci_images  # noqa: E402
import oci_registry  # noqa: E402
from benchlib import pool_config, summary_ms as summary  # noqa: E402


def big_layer(src):
    """A tar of the directory src as usr/lib/<name>, files in sorted order."""
    path = tempfile.mktemp(suffix=".tar")
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(src, arcname=src.lstrip("/"))
    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    return data


def make_layout(d, big_dir):
    layers = [oci_images.layer1(), big_layer(big_dir)]
    oci_images.write_layout(d, layers=layers)
    gz = sum(os.path.getsize(os.path.join(d, "blobs", "sha256", n))
             for n in os.listdir(os.path.join(d, "blobs", "sha256")))
    return sum(len(x) for x in layers), gz


def run(argv, env, check=True):
    r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check and r.returncode != 0:
        raise SystemExit("bench_images: %s failed (%d): %s"
                         % (" ".join(argv), r.returncode, r.stderr.decode(errors="replace")))
    return r


def timed(argvs, env):
    """Runs the commands one after the other; ns for all, and the first one's stdout."""
    t0 = time.perf_counter_ns()
    out = None
    for a in argvs:
        r = run(a, env)
        if out is None:
            out = r.stdout
    return time.perf_counter_ns() - t0, out


def bench_create(nsbox, env, variants, rounds, gap):
    """variants: {label: (image, env)}; ratios of each to host, per round."""
    res = {k: [] for k in variants}
    ratios = {k: [] for k in variants if k != "host"}
    labels = list(variants)
    for r in range(rounds):
        order = labels[r % len(labels):] + labels[:r % len(labels)]
        got = {}
        for which in order:
            time.sleep(gap)
            img, e = variants[which]
            t0 = time.perf_counter_ns()
            sid = run([nsbox, "create", "--image", img], e).stdout.decode().strip()
            out = run([nsbox, "exec", sid, "--", "sh", "-c", "echo hi"], e).stdout
            got[which] = time.perf_counter_ns() - t0
            run([nsbox, "rm", sid], e)
            if out != b"hi\n":
                raise SystemExit("bench_images: exec printed %r" % out)
        if r == 0:
            continue  # a warm-up round: caches, the image's first mount
        for k in got:
            res[k].append(got[k])
        for k in ratios:
            ratios[k].append(got[k] / got["host"])
    return res, ratios


def skopeo_tar(copy, dst, env):
    """The floor of a pull that unpacks, with the usual tools: the same skopeo copy, then
    tar -xzf of each layer, bottom first, into one directory (no digest checked, no
    whiteouts, owners as root's tar keeps them), and a sync of that filesystem; ns."""
    t0 = time.perf_counter_ns()
    run(copy, env)
    layout = os.path.join(dst, "layout")
    with open(os.path.join(layout, "index.json")) as f:
        mdg = json.load(f)["manifests"][0]["digest"]
    blobs = os.path.join(layout, "blobs", "sha256")
    with open(os.path.join(blobs, mdg[7:])) as f:
        man = json.load(f)
    root = os.path.join(dst, "rootfs")
    os.makedirs(root)
    for d in man["layers"]:
        run(["tar", "-xzf", os.path.join(blobs, d["digest"][7:]), "-C", root], env)
    run(["sync", "-f", root], env)
    return time.perf_counter_ns() - t0


def bench_pull(tools, env, ref, rounds, gap, work, rm_each):
    """tools: {label: nsbox binary, or None for skopeo}; ratios of each nsbox to skopeo.
    Each pull's files are kept until the last round (rm_each: removed after each pull): on
    ext4 without a journal the kernel does not reuse an inode freed in the last minute (six
    while its inode table block is dirty), and scans past every such inode for each file it
    creates, so that a pull made just after the previous round's 3 800 files were removed
    measures that scan, for nsbox and tar alike."""
    res = {k: [] for k in tools}
    nsboxes = [k for k in tools if tools[k]]
    ratios = {"%s / %s" % (k, b): [] for k in nsboxes for b in ("skopeo", "skopeo+tar")}
    ratios["skopeo+tar / skopeo"] = []
    res["skopeo+tar"] = []
    labels = list(tools) + ["skopeo+tar"]
    for r in range(rounds):
        order = labels[r % len(labels):] + labels[:r % len(labels)]
        got = {}
        for which in order:
            dst = os.path.join(work, "pull-" + which if rm_each else "pull-%s-%d" % (which, r))
            shutil.rmtree(dst, ignore_errors=True)
            os.makedirs(dst)
            e = dict(env, NSBOX_DATA_DIR=dst)
            subprocess.run(["sync"])
            time.sleep(gap)
            copy = ["skopeo", "copy", "--quiet", "--src-tls-verify=false",
                    "docker://" + ref, "oci:%s/layout:latest" % dst]
            if which == "skopeo+tar":
                got[which] = skopeo_tar(copy, dst, e)
            elif tools[which]:
                argv = [tools[which], "image", "pull", "-q", "--tls-verify=false", ref]
                got[which], _ = timed([argv], e)
            else:
                got[which], _ = timed([copy], e)
            if rm_each:
                shutil.rmtree(dst, ignore_errors=True)
        for k in got:
            res[k].append(got[k])
        for k in ratios:
            a, b = k.split(" / ")
            ratios[k].append(got[a] / got[b])
    return res, ratios


def disk(path):
    """Bytes (blocks) below path, each inode once."""
    seen, size = set(), 0
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            st = os.lstat(os.path.join(root, n))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                size += st.st_blocks * 512
    return size


def bench_disk(nsbox, env, layout, work, sandboxes=20):
    """Store growth for a second image on the same base and for N sandboxes, per store form."""
    second = os.path.join(work, "layout2")
    shutil.copytree(layout, second)
    with open(os.path.join(layout, "index.json")) as f:
        mdg = json.load(f)["manifests"][0]["digest"]
    blobs = os.path.join(layout, "blobs", "sha256")
    with open(os.path.join(blobs, mdg[7:])) as f:
        man = json.load(f)
    with open(os.path.join(blobs, man["config"]["digest"][7:]), "rb") as f:
        cfg = json.load(f)
    layers = []
    for d in man["layers"]:
        with open(os.path.join(blobs, d["digest"][7:]), "rb") as f:
            layers.append(gzip.decompress(f.read()))
    layers.append(oci_images.tar_bytes([("second.txt", b"the second image\n")]))
    shutil.rmtree(second)
    oci_images.write_layout(second, layers=layers, env=cfg["config"]["Env"])
    out = {}
    for form in ("layers", "merged"):
        e = dict(env)
        for k in ("STATE", "CACHE", "DATA"):
            e["NSBOX_%s_DIR" % k] = os.path.join(work, "disk-" + form, k.lower())
            os.makedirs(e["NSBOX_%s_DIR" % k])
        if form == "merged":
            e["NSBOX_OCI_LAYOUT"] = "merged"
        cfg_path = os.path.join(work, "disk-" + form, "config.json")
        with open(cfg_path, "w") as f:
            json.dump({"pool": {"size": 0}, "workspace": {"fs": "tmpfs"}}, f)
        e["NSBOX_CONFIG"] = cfg_path
        store = os.path.join(e["NSBOX_DATA_DIR"], "images")
        run([nsbox, "image", "import", "-q", "--name", "bench/one:1", layout], e)
        one = disk(store)
        run([nsbox, "image", "import", "-q", "--name", "bench/two:1", second], e)
        two = disk(store)
        ids = [run([nsbox, "create", "--image", "bench/two:1"], e).stdout.decode().strip()
               for _ in range(sandboxes)]
        boxes = disk(store)
        state = disk(e["NSBOX_STATE_DIR"])
        for sid in ids:
            run([nsbox, "rm", sid], e)
        out[form] = {"first_image": one, "second_image_adds": two - one,
                     "sandboxes_add_to_store": boxes - two, "sandboxes_state": state,
                     "sandboxes": sandboxes}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nsbox", default=os.environ.get("NSBOX_BIN") or
                    os.path.join(REPO, "build", "nsbox"))
    ap.add_argument("--quick", action="store_true", help="6 create rounds, 3 pull rounds")
    ap.add_argument("--rounds", type=int, default=31, help="create rounds (the first: warm-up)")
    ap.add_argument("--pull-rounds", type=int, default=8)
    ap.add_argument("--gap-ms", type=int, default=40)
    ap.add_argument("--big-dir", default="/usr/lib/python3.11")
    ap.add_argument("--baseline", metavar="NSBOX", action="append", default=[],
                    help="another nsbox binary, pulled with in the same rotation (repeatable: "
                    "baseline, baseline2, ...)")
    ap.add_argument("--skip-disk", action="store_true", help="no disk measure")
    ap.add_argument("--skip-create", action="store_true", help="no create measure")
    ap.add_argument("--rm-each-round", action="store_true",
                    help="remove each pull's files before the next (see bench_pull)")
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.pull_rounds = 6, 3
    if os.geteuid() != 0:
        raise SystemExit("bench_images: run as root")
    if not shutil.which("skopeo") or not shutil.which("docker-registry"):
        raise SystemExit("bench_images: needs skopeo and docker-registry")
    nsbox = os.path.abspath(a.nsbox)
    gap = a.gap_ms / 1000.0
    work = tempfile.mkdtemp(prefix="nsbox-bench-images.")
    reg = None
    try:
        env = dict(os.environ)
        for k in ("STATE", "CACHE", "DATA"):
            env["NSBOX_%s_DIR" % k] = os.path.join(work, k.lower())
            os.makedirs(env["NSBOX_%s_DIR" % k])
        env.update(pool_config(work, "images", {"size": 0}))

        layout = os.path.join(work, "layout")
        t0 = time.monotonic()
        raw, gz = make_layout(layout, a.big_dir)
        print("image: 2 layers, %.1f MB unpacked, %.1f MB compressed (made in %.0f s)"
              % (raw / 1e6, gz / 1e6, time.monotonic() - t0), file=sys.stderr)
        os.makedirs(os.path.join(work, "reg"))
        reg = oci_registry.Registry(os.path.join(work, "reg"))
        ref = reg.push(layout, "bench/py:1")
        run([nsbox, "image", "pull", "-q", "--tls-verify=false", ref], env)

        dres = {} if a.skip_disk else bench_disk(nsbox, env, layout, work)
        # the same image stored merged, in a data directory of its own: what the overlay costs
        menv = dict(env, NSBOX_DATA_DIR=os.path.join(work, "data-merged"),
                    NSBOX_OCI_LAYOUT="merged")
        os.makedirs(menv["NSBOX_DATA_DIR"])
        run([nsbox, "image", "import", "-q", "--name", "bench/py:1", layout], menv)
        variants = {"host": ("host", env), "image (layers, overlay)": (ref, env),
                    "image (merged)": ("bench/py:1", menv)}
        cres, cratios = ({}, {}) if a.skip_create else bench_create(nsbox, env, variants,
                                                                     a.rounds, gap)
        tools = {"nsbox": nsbox, "skopeo": None}
        for i, b in enumerate(a.baseline):
            tools["baseline" + (str(i + 1) if i else "")] = os.path.abspath(b)
        pres, pratios = bench_pull(tools, env, ref, a.pull_rounds, gap, work, a.rm_each_round)
    finally:
        if reg:
            reg.stop()
        if "env" in locals():
            for sid in os.listdir(env["NSBOX_STATE_DIR"]):
                subprocess.run([nsbox, "rm", sid], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)

    report = {"image_unpacked_bytes": raw, "image_compressed_bytes": gz,
              "load_average": os.getloadavg(),
              "create": {k: summary(v) for k, v in cres.items()},
              "create_ratio_median": {k: statistics.median(v) for k, v in cratios.items()},
              "pull": {k: summary(v) for k, v in pres.items()},
              "pull_ratio_median": {k: statistics.median(v) for k, v in pratios.items()},
              "disk": dres,
              "rounds": a.rounds - 1, "pull_rounds": a.pull_rounds, "gap_ms": a.gap_ms,
              "pulls_removed_each_round": a.rm_each_round}
    lines = ["# nsbox images benchmark", "",
             "image: 2 gzip layers, %.1f MB unpacked, %.1f MB compressed" % (raw / 1e6, gz / 1e6),
             "load average at the end: %.1f %.1f %.1f" % report["load_average"],
             "", "| measure | tool | median ms | p10 | p90 | n |", "|---|---|---|---|---|---|"]
    for m, res in (("create + first exec", report["create"]), ("pull", report["pull"])):
        for k, s in res.items():
            lines.append("| %s | %s | %.1f | %.1f | %.1f | %d |"
                         % (m, k, s["median_ms"], s["p10_ms"], s["p90_ms"], s["n"]))
    lines.append("")
    for k, v in report["create_ratio_median"].items():
        lines.append("create: %s / host, median of per-round ratios: %.3f (target <= 1.10)"
                     % (k, v))
    for k, v in report["pull_ratio_median"].items():
        lines.append("pull: %s, median of per-round ratios: %.2f%s"
                     % (k, v, " (target <= 1.5)" if k == "nsbox / skopeo" else ""))
    if dres:
        lines += ["", "| disk (MB) | first image | second image adds | %d sandboxes add to "
                  "the store | their state dirs |" % dres["layers"]["sandboxes"],
                  "|---|---|---|---|---|"]
    for form, d in dres.items():
        lines.append("| %s | %.1f | %.2f | %.2f | %.2f |"
                     % (form, d["first_image"] / 1e6, d["second_image_adds"] / 1e6,
                        d["sandboxes_add_to_store"] / 1e6, d["sandboxes_state"] / 1e6))
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(a.results, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with open(os.path.join(a.results, "images-%s.json" % stamp), "w") as f:
        json.dump({"summary": report, "create_ns": cres, "pull_ns": pres}, f, indent=1)
    with open(os.path.join(a.results, "images-%s.md" % stamp), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
