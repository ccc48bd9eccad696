#!/usr/bin/env python3
"""What the egress helper costs (docs/network.md, "allow by name"): in the same run, a sandbox
that reaches an HTTPS origin by name through the helper's splice path against one that reaches
the same origin directly through an egress range, alternating: a new connection (TCP connect,
TLS handshake, a small GET), a 100 MB download (throughput), the helper's CPU time per 100 MB
spliced (where its share of the time goes); and the idle helper's PSS (smaps_rollup), without
header bindings and with one (after one bound request), for this nsbox and, with --bin
NAME=PATH, for others (an older build) side by side; each --bin build's splice path also
downloads in the same rounds, its ratio to direct printed beside this one's (an A/B of builds).
With --uploads N, N rounds of a 100 MB upload per path too, the --bin builds' included (the
sandbox's own sockets send).

    sudo bench/bench_egress.py [--rounds 200] [--downloads 40] [--uploads 0] [--mb 100]
                               [--nsbox build/nsbox] [--bin old=/path/to/other/nsbox] [--pss-only]

Throughput is judged on rounds: each round downloads once through each path, back to back (the
order alternating from round to round), and its ratio splice / direct is taken; the verdict is
the median of the rounds' ratios, with their p10 and p90, so that a load that comes and goes on
the machine weighs on both paths of a round alike instead of on whichever path it hit.

Safety (the host's own network is never touched): everything runs in the network lab of
tests/e2e/netlab.py (two namespaces this script makes and deletes: nsbox's table, veths and
routes are the lab's; the origin lives in the lab's upstream namespace, with a lab CA that only
the sandboxes are given). The targets: a new connection at most +2 ms through splice, a
download at least 90 % of direct throughput, an idle helper at most 0.5 MiB PSS without
bindings and 3 MiB with.
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
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "e2e"))
from netlab import API, Lab, missing_tools  # noqa: E402
from benchlib import summary  # noqa: E402

PORT = 8445
NAME = "api.lab.test"

ORIGIN = r"""
import socket, ssl, sys, threading
chunk = b"\0" * (1 << 20)
def handle(c):
    try:
        req = b""
        while b"\r\n\r\n" not in req:
            d = c.recv(4096)
            if not d:
                return
            req += d
        head, _, rest = req.partition(b"\r\n\r\n")
        method, path = head.split(b" ")[:2]
        mb = int(path.strip(b"/") or b"0")
        if method == b"PUT":  # an upload: mb MiB read and dropped, then the answer
            buf = bytearray(1 << 20)
            left = (mb << 20) - len(rest)
            while left > 0:
                n = c.recv_into(buf)
                if not n:
                    return
                left -= n
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        body = max(mb, 0) << 20
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % body)
        if not mb:
            return
        for _ in range(mb):
            c.sendall(chunk)
    except OSError:
        pass
    finally:
        c.close()
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[3], sys.argv[4])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(256)
print("READY", flush=True)
while True:
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        c = ctx.wrap_socket(c, server_side=True)
    except (OSError, ssl.SSLError):
        c.close()
        continue
    threading.Thread(target=handle, args=(c,), daemon=True).start()
"""

# Inside a sandbox: "conn HOST N" times N new connections (ms each); "get HOST MB" downloads MB
# (MB/s); "put HOST MB" uploads MB (MB/s, until the origin's answer). TLS verified against the
# lab CA, with the origin's name whatever HOST is.
CLIENT = r"""
import json, os, socket, ssl, sys, time
ctx = ssl.create_default_context(cadata=os.environ["LAB_CA"])
def fetch(host, mb):
    s = socket.create_connection((host, %d), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s = ctx.wrap_socket(s, server_hostname="%s")
    s.sendall(b"GET /%%d HTTP/1.1\r\nHost: x\r\n\r\n" %% mb)
    buf = bytearray(1 << 20)
    got = 0
    while True:
        n = s.recv_into(buf)
        if not n:
            break
        got += n
    s.close()
    return got
def upload(host, mb):
    s = socket.create_connection((host, %d), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s = ctx.wrap_socket(s, server_hostname="%s")
    s.sendall(b"PUT /%%d HTTP/1.1\r\nHost: x\r\nContent-Length: %%d\r\n\r\n" %% (mb, mb << 20))
    chunk = b"\0" * (1 << 20)
    for _ in range(mb):
        s.sendall(chunk)
    answer = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        answer += d
    s.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:80]
kind, host, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = []
if kind == "put":
    t = time.perf_counter()
    upload(host, n)
    out.append(n / (time.perf_counter() - t))
elif kind == "conn":
    for _ in range(n):
        t = time.perf_counter()
        fetch(host, 0)
        out.append((time.perf_counter() - t) * 1000)
else:
    t = time.perf_counter()
    got = fetch(host, n)
    dt = time.perf_counter() - t
    assert got >= n << 20, got
    out.append(n / dt)
print(json.dumps(out))
""" % (PORT, NAME, PORT, NAME)

# Inside a sandbox with a header binding on the origin: one request through the helper, which
# ends TLS with the sandbox's CA (the sandbox's system bundle has it) and opens its own upstream.
BOUND = r"""
import socket, ssl
ctx = ssl.create_default_context()
s = ctx.wrap_socket(socket.create_connection(("%s", %d), timeout=30), server_hostname="%s")
s.sendall(b"GET /0 HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n")
data = s.makefile("rb").read()
assert data.startswith(b"HTTP/1.1 200"), data[:80]
print("ok")
""" % (NAME, PORT, NAME, NAME, PORT)


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def make_pki(d):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=nsbox bench CA", cwd=d)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
            "-subj", f"/CN={NAME}", cwd=d)
    with open(os.path.join(d, "ext"), "w") as f:
        f.write(f"subjectAltName=DNS:{NAME}\n")
    openssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "srv.pem", "-days", "2", "-extfile", "ext", cwd=d)
    for n in os.listdir(d):
        os.chmod(os.path.join(d, n), 0o644)


def transfer_rounds(b, kind, n, mb, order, others, res, rounds, mbps, ratio):
    """n rounds of one transfer ("get" or "put", mb MB) per path, in the round's order: each
    transfer's MB/s in res[mbps_PATH], each round's splice / direct in rounds[ratio] (and
    rounds[ratio_NAME] for each other build's splice path)."""
    for k, _ in order[0]:
        res.setdefault(f"{mbps}_{k}", [])
    for key in [ratio] + [f"{ratio}_{name}" for name in others]:
        rounds.setdefault(key, [])
    for i in range(n):
        got = {}
        for k, (sid, host) in order[i % 2]:
            got[k] = b.client(sid, kind, host, str(mb))[0]
            res[f"{mbps}_{k}"].append(got[k])
        rounds[ratio].append(got["splice"] / got["direct"])
        for name in others:
            rounds[f"{ratio}_{name}"].append(got[f"splice_{name}"] / got["direct"])


def print_others(what, ratio, others, out, rounds):
    """Each other build's splice / direct in the same rounds, and how often this build's splice
    path beat it, by how much."""
    for name in others:
        o = out[f"{ratio}_{name}"]
        gain = [x / y for x, y in zip(rounds[ratio], rounds[f"{ratio}_{name}"])]
        print(f"{what} through {name}'s helper: splice / direct {o['median']:.2f} (p10 "
              f"{o['p10']:.2f}, p90 {o['p90']:.2f}; same rounds; this one faster in "
              f"{sum(g > 1 for g in gain)} of {len(gain)}, by "
              f"{(statistics.median(gain) - 1) * 100:+.0f} % at the median)")


class Bench:
    def __init__(self, a, lab, work):
        self.a, self.lab, self.work = a, lab, work
        self.env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
                    "NSBOX_STATE_DIR": f"{work}/state", "NSBOX_CACHE_DIR": f"{work}/cache",
                    "NSBOX_DATA_DIR": f"{work}/data", "NSBOX_RESOLV_CONF": lab.resolv,
                    "NSBOX_CONFIG": f"{work}/config.json"}
        for d in ("state", "cache", "data"):
            os.makedirs(f"{work}/{d}")
        with open(f"{work}/config.json", "w") as f:
            json.dump({"pool": {"size": 0},
                       "network": {"upstream_ca": f"{work}/pki/ca.pem"}}, f)
        self.env["BENCH_TOKEN"] = "Bearer bench-token-value"
        with open(f"{work}/pki/ca.pem") as f:
            self.ca = f.read()

    def nsbox(self, *args, binary=None):
        # the lab's resolv.conf and a hosts file naming the origin, in a private mount namespace
        cmd = ["nsenter", f"--net=/run/netns/{self.lab.lab}", "unshare", "--mount",
               "--propagation", "private", "sh", "-c",
               'mount --bind "$0" /etc/resolv.conf && mount --bind "$1" /etc/hosts && '
               'shift && exec "$@"', self.lab.resolv, f"{self.work}/pki/hosts",
               os.path.abspath(binary or self.a.nsbox)] + list(args)
        r = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=600)
        if r.returncode != 0:
            raise SystemExit(f"nsbox {' '.join(args[:3])}: {r.stderr.strip()}")
        return r.stdout

    def create(self, *net, binary=None):
        return self.nsbox("create", *net, "-e", f"LAB_CA={self.ca}", binary=binary).strip()

    def client(self, sid, *args):
        return json.loads(self.nsbox("exec", sid, "--", "python3", "-c", CLIENT, *args))

    def helper_pid(self, sid, binary=None):
        sup = json.loads(self.nsbox("inspect", sid, binary=binary))["supervisor_pid"]
        return subprocess.run(["pgrep", "-x", "nsbox-egress", "-P", str(sup)],
                              capture_output=True, text=True).stdout.split()[0]

    def helper_cpu_ms(self, pid):
        """CPU time of the helper (its threads', ended ones included: user and system) so far."""
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")

    def helper_pss_kib(self, sid, binary=None, supervisor=False, field="Pss"):
        """The PSS (KiB) of the sandbox's helper; supervisor: of its supervisor instead; field
        "Private": its private pages (clean and dirty: the memory it alone holds, whatever
        else runs on the machine), where PSS adds its share of the pages it shares."""
        if supervisor:
            pid = json.loads(self.nsbox("inspect", sid, binary=binary))["supervisor_pid"]
        else:
            pid = self.helper_pid(sid, binary)
        kib = {}
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                k, _, v = line.partition(":")
                if v.strip().endswith("kB"):
                    kib[k] = int(v.split()[0])
        if field == "Private":
            return kib["Private_Clean"] + kib["Private_Dirty"]
        return kib.get(field)


def pss_of(b, name, binary):
    """The idle helper's PSS (KiB) of nsbox `binary`: without bindings (fresh), and with a
    header binding after one bound request, 1 s idle; and its supervisor's beside (a forked
    helper shares pages with it, which PSS splits between the two)."""
    out = {}
    sid = b.create("--network", f"allow={NAME}:{PORT}", binary=binary)
    try:
        out["plain"] = b.helper_pss_kib(sid, binary)
        out["plain_private"] = b.helper_pss_kib(sid, binary, field="Private")
        out["plain_sup"] = b.helper_pss_kib(sid, binary, supervisor=True)
    finally:
        b.nsbox("rm", sid, binary=binary)
    sid = b.create("--network", f"allow={NAME}:{PORT}", "--header-binding",
                   f"{NAME}:{PORT}:X-Bench=env:BENCH_TOKEN", binary=binary)
    try:
        b.nsbox("exec", sid, "--", "python3", "-c", BOUND, binary=binary)
        time.sleep(1)
        out["bound"] = b.helper_pss_kib(sid, binary)
        out["bound_private"] = b.helper_pss_kib(sid, binary, field="Private")
        out["bound_sup"] = b.helper_pss_kib(sid, binary, supervisor=True)
    finally:
        b.nsbox("rm", sid, binary=binary)
    print(f"{name:>8}: idle helper PSS {out['plain']} KiB without bindings (target <= 512), "
          f"{out['bound']} KiB with one after a bound request (target <= 3072); private "
          f"{out['plain_private']} / {out['bound_private']} KiB; its supervisor's "
          f"{out['plain_sup']} / {out['bound_sup']} KiB")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nsbox", default=os.environ.get("NSBOX_BIN") or
                    os.path.join(os.path.dirname(HERE), "build", "nsbox"))
    ap.add_argument("--rounds", type=int, default=200, help="new connections per path")
    ap.add_argument("--batch", type=int, default=20, help="connections per exec")
    ap.add_argument("--downloads", type=int, default=40,
                    help="rounds of downloads (one per path each)")
    ap.add_argument("--mb", type=int, default=100, help="size of a download (and an upload)")
    ap.add_argument("--uploads", type=int, default=0,
                    help="rounds of uploads (one per path each), after the downloads; none by "
                         "default (they would double the run)")
    ap.add_argument("--json", help="write raw results here")
    ap.add_argument("--bin", action="append", default=[], metavar="NAME=PATH",
                    help="another nsbox whose helper's PSS, and splice path's downloads, are "
                         "measured beside this one's")
    ap.add_argument("--pss-only", action="store_true", help="measure the helpers' PSS only")
    ap.add_argument("--pss-rounds", type=int, default=3, help="PSS measurements per binary")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench_egress: run as root (network namespaces, veths, nftables)")
    if missing_tools() or not shutil.which("openssl"):
        raise SystemExit("bench_egress: needs ip, nsenter, unshare, nft, mount and openssl")
    work = tempfile.mkdtemp(prefix="nsbox-benchegress-")
    os.chmod(work, 0o755)
    os.makedirs(f"{work}/pki")
    make_pki(f"{work}/pki")
    with open(f"{work}/pki/hosts", "w") as f:
        f.write(f"127.0.0.1\tlocalhost\n{API}\t{NAME}\n")
    lab = Lab()
    sids = []
    b = None
    try:
        p = subprocess.Popen(["ip", "netns", "exec", lab.up, sys.executable, "-c", ORIGIN, API,
                              str(PORT), f"{work}/pki/srv.pem", f"{work}/pki/srv.key"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lab.procs.append(p)
        if p.stdout.readline().strip() != "READY":
            raise SystemExit(f"the origin did not start: {p.stderr.read()}")
        b = Bench(a, lab, work)
        bins = [("this", a.nsbox)] + [tuple(x.split("=", 1)) for x in a.bin]
        pss = {name: [] for name, _ in bins}
        for _ in range(a.pss_rounds):  # alternating, so that both see the same machine
            for name, path in bins:
                pss[name].append(pss_of(b, name, path))
        for name, runs in pss.items():
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(f"{name:>8}: median of {len(runs)}: helper {med['plain']:.0f} KiB without "
                  f"bindings, {med['bound']:.0f} KiB with (private {med['plain_private']:.0f} / "
                  f"{med['bound_private']:.0f} KiB); helper + supervisor "
                  f"{med['plain'] + med['plain_sup']:.0f} / {med['bound'] + med['bound_sup']:.0f}"
                  f" KiB")
        if a.pss_only:
            if a.json:
                with open(a.json, "w") as f:
                    json.dump({"pss_kib": pss}, f, indent=1)
            return
        spliced = b.create("--network", f"allow={NAME}:{PORT}")
        sids.append(spliced)
        direct = b.create("--egress", f"{API}/32")
        sids.append(direct)
        paths = {"splice": (spliced, NAME), "direct": (direct, API)}
        # each --bin build's splice path in the same rounds (its downloads only): A/B of builds
        others = [name for name, _ in bins[1:]]
        for name, path in bins[1:]:
            sids.append(b.create("--network", f"allow={NAME}:{PORT}", binary=path))
            paths[f"splice_{name}"] = (sids[-1], NAME)
        pss_fresh = b.helper_pss_kib(spliced)
        for sid, host in paths.values():  # warm-up: page cache, the origin's first handshakes
            b.client(sid, "conn", host, "5")
        res = {"conn_splice": [], "conn_direct": []}
        rounds = {"conn_delta": []}
        # interleaved rounds, the order alternating, so that both paths see the same load of
        # the machine; each round gives one difference (connections) or ratio (downloads)
        order = [list(paths.items()), list(reversed(paths.items()))]
        conn_paths = {k: paths[k] for k in ("splice", "direct")}
        conn_order = [list(conn_paths.items()), list(reversed(conn_paths.items()))]
        for i in range(max(1, a.rounds // a.batch)):
            got = {}
            for k, (sid, host) in conn_order[i % 2]:
                got[k] = b.client(sid, "conn", host, str(a.batch))
                res[f"conn_{k}"] += got[k]
            rounds["conn_delta"].append(statistics.median(got["splice"]) -
                                        statistics.median(got["direct"]))
        helper = b.helper_pid(spliced)
        cpu0 = b.helper_cpu_ms(helper)
        transfer_rounds(b, "get", a.downloads, a.mb, order, others, res, rounds, "mbps",
                        "mbps_ratio")
        cpu_per_100mb = (b.helper_cpu_ms(helper) - cpu0) / a.downloads * 100 / a.mb
        if a.uploads:
            transfer_rounds(b, "put", a.uploads, a.mb, order, others, res, rounds, "up_mbps",
                            "up_ratio")
        pss_idle = b.helper_pss_kib(spliced)
        out = {k: summary(v) for k, v in res.items()}
        out.update({k: summary(v) for k, v in rounds.items()})
        cs, cd = out["conn_splice"]["median"], out["conn_direct"]["median"]
        print(f"nsbox {os.path.abspath(a.nsbox)}; {os.cpu_count()} CPUs; "
              f"load average {os.getloadavg()[0]:.2f}")
        print(f"{'':28} {'median':>9} {'p10':>9} {'p90':>9}")
        for k, unit in (("conn_direct", "ms"), ("conn_splice", "ms"), ("mbps_direct", "MB/s"),
                        ("mbps_splice", "MB/s")):
            s = out[k]
            print(f"{k + ' (' + unit + ')':28} {s['median']:9.2f} {s['p10']:9.2f} "
                  f"{s['p90']:9.2f}")
        d, r = out["conn_delta"], out["mbps_ratio"]
        print(f"new connection: splice - direct {d['median']:+.2f} ms (p10 {d['p10']:+.2f}, "
              f"p90 {d['p90']:+.2f}; {d['n']} rounds; ratio of medians {cs / cd:.2f}); "
              f"target <= +2 ms")
        print(f"{a.mb} MB download: splice / direct throughput {r['median']:.2f} (p10 "
              f"{r['p10']:.2f}, p90 {r['p90']:.2f}; {r['n']} rounds); target >= 0.90")
        print_others(f"{a.mb} MB download", "mbps_ratio", others, out, rounds)
        if a.uploads:
            u, ud, us = out["up_ratio"], out["up_mbps_direct"], out["up_mbps_splice"]
            print(f"{a.mb} MB upload: direct {ud['median']:.0f} MB/s, splice {us['median']:.0f} "
                  f"MB/s; splice / direct {u['median']:.2f} (p10 {u['p10']:.2f}, p90 "
                  f"{u['p90']:.2f}; {u['n']} rounds)")
            print_others(f"{a.mb} MB upload", "up_ratio", others, out, rounds)
        print(f"helper CPU (user + system) per 100 MB spliced: {cpu_per_100mb:.0f} ms")
        print(f"idle helper PSS: {pss_fresh} KiB fresh, {pss_idle} KiB after the runs; "
              f"target <= 512 KiB")
        out["pss_kib"] = {"fresh": pss_fresh, "idle_after": pss_idle, "by_binary": pss}
        out["helper_cpu_ms_per_100mb"] = cpu_per_100mb
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"summary": out, "raw": res, "rounds": rounds}, f, indent=1)
    finally:
        for sid in sids:
            try:
                b.nsbox("rm", sid)
            except SystemExit:
                pass
        lab.cleanup()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
