#!/usr/bin/env python3
"""What network `all` adds to a one-shot run: `nsbox run --network all -- /bin/true` against
`--network none`, alternating, medians. Optionally the same
set-up and teardown done with `ip` and `nft` processes, for comparison.

    sudo bench/bench_network.py [--rounds 200] [--tools] [--back-to-back N] [--nsbox build/nsbox]

Safety (the host's own network is never touched): everything runs inside a network namespace
this script makes (ip netns nsbox-bench-<pid>); nsbox's table, veths and ip_forward are that
namespace's, and it is deleted at the end. /bin/true sends nothing; the resolver named in the sandboxes' resolv.conf is
never contacted.
"""
import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from benchlib import summary

CLONE_NEWNET = 0x40000000
HERE = os.path.dirname(os.path.abspath(__file__))


def setns(path):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns")
    finally:
        os.close(fd)


def timed(argv, env):
    t = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env)
    _, status = os.waitpid(pid, 0)
    dt = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        r = subprocess.run(argv, env=env, capture_output=True, text=True)
        raise SystemExit(f"{' '.join(argv)} failed: {r.stderr.strip()}")
    return dt * 1000


def run(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


def tools_round(target_pid, i):
    """The set-up and teardown nsbox does, through ip and nft processes (the veth is deleted
    afterwards, untimed: nsbox lets it go with the sandbox's namespace)."""
    ifn = f"nsbt{i % 10000:04d}"
    sub = f"10.172.{(i // 64) % 256}.{(i % 64) * 4}"
    host, sbx = sub[:-len(sub.split('.')[-1])] + str(int(sub.split('.')[-1]) + 1), \
        sub[:-len(sub.split('.')[-1])] + str(int(sub.split('.')[-1]) + 2)
    ns = ["nsenter", f"--net=/proc/{target_pid}/ns/net"]
    t = time.perf_counter()
    run("nft", f"add element inet nsbox sb_slot {{ {sub} comment \"bench{i}\" }}; "
               f"add element inet nsbox sb_src {{ \"{ifn}\" . {sbx} }}; "
               f"add element inet nsbox sb_all {{ \"{ifn}\" }}")
    run("ip", "link", "add", ifn, "type", "veth", "peer", "name", "eth0", "netns", str(target_pid))
    run("ip", "addr", "add", f"{host}/30", "dev", ifn)
    run("ip", "link", "set", ifn, "up")
    run(*ns, "ip", "link", "set", "lo", "up")
    run(*ns, "ip", "link", "set", "eth0", "up")
    run(*ns, "ip", "addr", "add", f"{sbx}/30", "dev", "eth0")
    run(*ns, "ip", "route", "add", "default", "via", host)
    run("nft", f"delete element inet nsbox sb_slot {{ {sub} }}; "
               f"delete element inet nsbox sb_src {{ \"{ifn}\" . {sbx} }}; "
               f"delete element inet nsbox sb_all {{ \"{ifn}\" }}")
    dt = (time.perf_counter() - t) * 1000
    run(*ns, "ip", "link", "del", "eth0")  # not timed: nsbox lets it go with the namespace
    return dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nsbox", default=os.environ.get("NSBOX_BIN") or
                    os.path.join(os.path.dirname(HERE), "build", "nsbox"))
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--back-to-back", type=int, default=0, metavar="N",
                    help="also time N `all` runs in a row")
    ap.add_argument("--tools", action="store_true", help="also time the ip/nft process version")
    ap.add_argument("--tools-rounds", type=int, default=30)
    ap.add_argument("--json", help="write raw results here")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench_network: run as root (network namespaces, veths, nftables)")
    nsbox = os.path.abspath(a.nsbox)
    if not os.access(nsbox, os.X_OK):
        raise SystemExit(f"bench_network: no nsbox at {nsbox} (build it or pass --nsbox)")

    name = f"nsbox-bench-{os.getpid()}"
    work = tempfile.mkdtemp(prefix="nsbox-benchnet-")
    target = None
    run("ip", "netns", "add", name)
    try:
        # A link of its own first, as any real host has: a fresh namespace whose first link is
        # nsbox's would make the first sandbox wait for the kernel's link watcher (net_link.c).
        run("ip", "-n", name, "link", "add", "bench0", "type", "veth", "peer", "name", "bench1")
        run("ip", "-n", name, "link", "set", "lo", "up")
        run("ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv4.ip_forward=0")
        setns(f"/run/netns/{name}")  # this process, and all it spawns, now live in the bench ns
        resolv = os.path.join(work, "resolv.conf")
        with open(resolv, "w") as f:
            f.write("nameserver 192.0.2.53\n")  # TEST-NET-1; never contacted by /bin/true
        # cold runs: with nsbox's default, repeated runs would soon take pooled sandboxes
        config = os.path.join(work, "config.json")
        with open(config, "w") as f:
            f.write('{"pool": {"size": 0}}')
        env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "NSBOX_STATE_DIR": f"{work}/state",
               "NSBOX_CACHE_DIR": f"{work}/cache", "NSBOX_DATA_DIR": f"{work}/data",
               "NSBOX_RESOLV_CONF": resolv, "NSBOX_CONFIG": config}
        for d in ("state", "cache", "data"):
            os.makedirs(f"{work}/{d}")
        cmds = {m: [nsbox, "run", "--network", m, "--", "/bin/true"] for m in ("none", "all")}
        for i in range(a.warmup):
            for m in cmds:
                timed(cmds[m], env)
        # Strictly alternating, so that every `all` run follows a `none` run: back to back, an
        # `all` run also pays for the kernel's clean-up of the previous one's veth and
        # nftables transactions (docs/network.md).
        res = {"none": [], "all": []}
        for i in range(a.rounds):
            for m in ("none", "all"):
                res[m].append(timed(cmds[m], env))
        if a.back_to_back:
            res["all_back_to_back"] = [timed(cmds["all"], env) for _ in range(a.back_to_back)]
        out = {m: summary(v) for m, v in res.items()}
        print(f"nsbox {nsbox}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
        diffs = [b - n for n, b in zip(res["none"], res["all"])]
        out["all_minus_none"] = summary(diffs)
        out["all_minus_none"]["of_medians"] = out["all"]["median"] - out["none"]["median"]
        if a.tools:
            if not shutil.which("nft") or not shutil.which("ip"):
                raise SystemExit("bench_network: --tools needs ip and nft")
            target = subprocess.Popen(["unshare", "--net", "sleep", "3600"])
            time.sleep(0.2)
            t = [tools_round(target.pid, i) for i in range(a.tools_rounds)]
            out["ip_nft_processes"] = summary(t)
        print(f"{'':24} {'median':>8} {'p10':>8} {'p90':>8}   (ms; {a.rounds} alternating rounds)")
        for k in ("none", "all", "all_minus_none", "all_back_to_back", "ip_nft_processes"):
            if k in out:
                s = out[k]
                print(f"{k:24} {s['median']:8.2f} {s['p10']:8.2f} {s['p90']:8.2f}")
        print(f"all - none (difference of medians): {out['all_minus_none']['of_medians']:.2f} ms")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"summary": out, "raw": res}, f, indent=1)
    finally:
        if target:
            target.kill()
            target.wait()
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
