#!/usr/bin/env python3
"""What a header binding costs a request: from inside one sandbox (network all, one host
bound), HTTPS to the same origin by a bound name (through the egress helper: TLS ended there,
the head rewritten, a second TLS connection upstream) and by a name that is not bound (straight
through the sandbox's veth and NAT), alternating, medians of the per-round differences.

    sudo bench/bench_bindings.py [--rounds 300] [--nsbox build/nsbox]

Two measures per path: a new connection and its first request (TCP, TLS, one GET), and one
GET on a kept-alive connection. The targets: bound at most +3 ms per new connection,
+0.3 ms per keep-alive request (docs/benchmarks.md, "Header bindings").

Safety: everything runs in the network lab of tests/e2e/netlab.py (namespaces this script
makes and removes; the host's network, routes and trust store are never touched).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
from netlab import API, TLS_SERVE, Lab, make_pki, start_origin  # noqa: E402

PORT = 8446
BOUND, PLAIN = "api.lab.test", "other.lab.test"

ORIGIN = r"""
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # or the body waits for the head's ACK: 40 ms a request
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
""" + TLS_SERVE

# In the sandbox: rounds of (bound, plain) alternating; per round, a new connection with its
# first GET and then one more GET on it, each path; the times in ms, as JSON.
CLIENT = r"""
import http.client, json, os, ssl, sys, time
rounds, port, bound, plain = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
system = ssl.create_default_context()                     # has the sandbox's CA
lab = ssl.create_default_context(cadata=os.environ["LAB_CA"])
def once(host, ctx):
    t0 = time.perf_counter()
    c = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
    c.request("GET", "/"); c.getresponse().read()
    t1 = time.perf_counter()
    c.request("GET", "/"); c.getresponse().read()
    t2 = time.perf_counter()
    c.close()
    return (t1 - t0) * 1000, (t2 - t1) * 1000
for _ in range(20):
    once(bound, system), once(plain, lab)
out = []
for i in range(rounds):  # which goes first alternates
    if i % 2:
        b = once(bound, system)
        p = once(plain, lab)
    else:
        p = once(plain, lab)
        b = once(bound, system)
    out.append([b, p])
print(json.dumps(out))
"""


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100 * len(v)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--nsbox", default=os.path.join(HERE, "..", "build", "nsbox"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the lab makes network namespaces")
    nsbox = os.path.abspath(a.nsbox)
    pki = tempfile.mkdtemp(prefix="nsbox-bench-bind-")
    os.chmod(pki, 0o755)
    lab = None
    try:
        make_pki(pki, (BOUND, PLAIN))
        with open(os.path.join(pki, "hosts"), "w") as f:
            f.write(f"127.0.0.1\tlocalhost\n{API}\t{BOUND} {PLAIN}\n")
        cfg = os.path.join(pki, "config.json")
        with open(cfg, "w") as f:
            json.dump({"pool": {"size": 0},
                       "network": {"upstream_ca": os.path.join(pki, "ca.pem")}}, f)
        os.chmod(cfg, 0o644)
        lab = Lab()
        start_origin(lab, ORIGIN, "0.0.0.0", PORT, pki)  # both names, both addresses
        with open(os.path.join(pki, "ca.pem")) as f:
            ca = f.read()
        env = dict(os.environ, NSBOX_CONFIG=cfg, NSBOX_RESOLV_CONF=lab.resolv,
                   BENCH_TOKEN="Bearer bench-0123456789")
        for k in ("NSBOX_STATE_DIR", "NSBOX_DATA_DIR", "NSBOX_CACHE_DIR"):
            env[k] = os.path.join(pki, k.lower())
        cmd = ["nsenter", f"--net=/run/netns/{lab.lab}", "unshare", "--mount", "--propagation",
               "private", "sh", "-c",
               'mount --bind "$0" /etc/resolv.conf && mount --bind "$1" /etc/hosts && '
               'shift && exec "$@"', lab.resolv, os.path.join(pki, "hosts"), nsbox, "run",
               "--network", "all", "--header-binding",
               f"{BOUND}:{PORT}:Authorization=env:BENCH_TOKEN", "-e", f"LAB_CA={ca}",
               "--", "python3", "-c", CLIENT, str(a.rounds), str(PORT), BOUND, PLAIN]
        r = subprocess.run(cmd, capture_output=True, env=env, timeout=1800)
        if r.returncode:
            sys.exit(r.stderr.decode())
        rounds = json.loads(r.stdout)
    finally:
        if lab:
            lab.cleanup()
        shutil.rmtree(pki, ignore_errors=True)
    print(f"{a.rounds} alternating rounds; ms: median (p10-p90)")
    for i, what in enumerate(("new connection + first GET", "keep-alive GET")):
        bound = [p[0][i] for p in rounds]
        plain = [p[1][i] for p in rounds]
        diff = [p[0][i] - p[1][i] for p in rounds]
        print(f"{what:28s} bound {median(bound):6.2f} ({pct(bound, 10):.2f}-{pct(bound, 90):.2f})"
              f"  not bound {median(plain):6.2f} ({pct(plain, 10):.2f}-{pct(plain, 90):.2f})"
              f"  difference {median(diff):+6.2f} ({pct(diff, 10):+.2f}-{pct(diff, 90):+.2f})")


if __name__ == "__main__":
    main()
