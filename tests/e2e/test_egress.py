"""End-to-end: allow(hosts) by name through the egress helper (docs/network.md, "allow by
name"), in the network lab of tests/e2e/netlab.py. An HTTPS origin in the lab's upstream
namespace serves two names from one address with a certificate of a lab CA this module makes
(openssl); the sandbox trusts that CA through an environment variable, the host's trust store is
never touched. Checked: the allowed name works with verification; another name on the same
address is refused, by name through the helper and by address; no SNI and plain text are
refused; all of it without a word in the config (by name is the default); the address mode,
the config's opt-out, lets the neighbour through (what the helper is for)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from netlab import API, TLS_SERVE, Lab, make_pki, missing_tools, start_origin
from nsbox_test import NSBOX, Dirs, is_root

PORT = 8444  # not one of the lab's banner ports
NAMES = ("api.lab.test", "neighbour.lab.test")

ORIGIN = r"""
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("ORIGIN " + (self.headers.get("Host") or "")).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
""" + TLS_SERVE

# Runs inside the sandbox: each argument KIND:HOST:PORT[:SNI], the result as JSON.
PROBE = r"""
import errno, json, os, socket, ssl, sys
ca = os.environ["LAB_CA"]
def classify(ex):
    if isinstance(ex, (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError)):
        return "reset"
    if isinstance(ex, socket.timeout):
        return "timeout"
    n = getattr(ex, "errno", None)
    if n == errno.ECONNREFUSED:
        return "refused"
    if n in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EACCES, errno.EPERM):
        return "unreachable"
    if isinstance(ex, socket.gaierror):
        return "unresolved"
    return "error:" + repr(ex)
def get(s, host):
    s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode())
    data = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        data += d
    if not data:
        raise ConnectionResetError()
    return data.split(b"\r\n\r\n", 1)[-1].decode()
def run(kind, host, port, sni):
    s = socket.create_connection((host, int(port)), timeout=8)
    s.settimeout(8)
    if kind == "plain":
        return "ok:" + get(s, host)
    ctx = ssl.create_default_context(cadata=ca)
    if kind == "nosni":
        ctx.check_hostname = False
        s = ctx.wrap_socket(s)
    else:
        s = ctx.wrap_socket(s, server_hostname=sni or host)
    return "ok:" + get(s, sni or host)
out = {}
for t in sys.argv[1:]:
    parts = t.split(":")
    kind, host, port = parts[:3]
    try:
        out[t] = run(kind, host, port, parts[3] if len(parts) > 3 else None)
    except Exception as ex:
        out[t] = classify(ex)
print(json.dumps(out))
"""

lab = None
pki = None


def setUpModule():
    global lab, pki
    if not is_root():
        raise unittest.SkipTest("the network lab needs root (network namespaces, veths)")
    missing = missing_tools() + [t for t in ("openssl",) if not _which(t)]
    if missing:
        raise unittest.SkipTest(f"the network lab needs {', '.join(missing)}")
    pki = tempfile.mkdtemp(prefix="nsbox-egress-pki-")
    os.chmod(pki, 0o755)
    make_pki(pki, NAMES)
    # "The host" resolves both names to the origin's one address: a CDN's shared address.
    with open(os.path.join(pki, "hosts"), "w") as f:
        f.write(f"127.0.0.1\tlocalhost\n{API}\t{' '.join(NAMES)}\n")
    try:
        lab = Lab()
    except (subprocess.CalledProcessError, RuntimeError) as ex:
        raise unittest.SkipTest(f"cannot build the network lab here: {ex}")
    start_origin(lab, ORIGIN, API, PORT, pki)


def tearDownModule():
    if lab:
        lab.cleanup()
    if pki:
        subprocess.run(["rm", "-rf", pki])


def _which(t):
    from shutil import which
    return which(t)


class Egress(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.dirs = Dirs()

    def tearDown(self):
        self.dirs.cleanup()

    def env(self, mode):
        # mode None: the config says nothing, so that these tests check the default (by name)
        cfg = os.path.join(self.dirs.base, f"net-{mode or 'default'}.json")
        with open(cfg, "w") as f:
            json.dump({"pool": {"size": 0}, "network": {"allow_names": mode}} if mode
                      else {"pool": {"size": 0}}, f)
        os.chmod(cfg, 0o644)
        env = self.dirs.env({"NSBOX_RESOLV_CONF": lab.resolv})
        env["NSBOX_CONFIG"] = cfg
        return env

    def nsbox(self, args, mode=None):
        # the lab's resolv.conf and the hosts file with both names, in a private mount namespace
        cmd = ["nsenter", f"--net=/run/netns/{lab.lab}", "unshare", "--mount", "--propagation",
               "private", "sh", "-c",
               'mount --bind "$0" /etc/resolv.conf && mount --bind "$1" /etc/hosts && '
               'shift && exec "$@"', lab.resolv, os.path.join(pki, "hosts"), NSBOX] + args
        return subprocess.run(cmd, capture_output=True, timeout=120, env=self.env(mode))

    def probe(self, allow, *targets, mode=None):
        with open(os.path.join(pki, "ca.pem")) as f:
            ca = f.read()
        r = self.nsbox(["run", "--network", f"allow={allow}", "-e", f"LAB_CA={ca}", "--",
                        "python3", "-c", PROBE] + list(targets), mode=mode)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        return json.loads(r.stdout)

    def assertRefused(self, result):
        self.assertIn(result, ("reset", "refused", "unreachable"))

    def test_allowed_name_works_with_verification(self):
        res = self.probe(f"{NAMES[0]}:{PORT}", f"tls:{NAMES[0]}:{PORT}")
        self.assertEqual(res[f"tls:{NAMES[0]}:{PORT}"], f"ok:ORIGIN {NAMES[0]}")

    def test_neighbour_on_the_same_address_is_refused(self):
        res = self.probe(f"{NAMES[0]}:{PORT}",
                         # through the helper, with the neighbour's name in the ClientHello
                         f"tls:{NAMES[0]}:{PORT}:{NAMES[1]}",
                         # straight to the shared address
                         f"tls:{API}:{PORT}:{NAMES[1]}", f"tls:{API}:{PORT}:{NAMES[0]}",
                         # the neighbour's name is not pinned and DNS is off
                         f"tls:{NAMES[1]}:{PORT}")
        self.assertEqual(res.pop(f"tls:{NAMES[1]}:{PORT}"), "unresolved")
        for k, v in res.items():
            self.assertRefused(v)

    def test_address_mode_lets_the_neighbour_through(self):
        # What the helper is for: by address, the shared address serves every name on it.
        res = self.probe(f"{NAMES[0]}:{PORT}", f"tls:{API}:{PORT}:{NAMES[1]}", mode="address")
        self.assertEqual(res[f"tls:{API}:{PORT}:{NAMES[1]}"], f"ok:ORIGIN {NAMES[1]}")

    def test_no_sni_and_plain_text_are_refused(self):
        res = self.probe(f"{NAMES[0]}:{PORT}", f"nosni:{NAMES[0]}:{PORT}",
                         f"plain:{NAMES[0]}:{PORT}", f"tls:{NAMES[0]}:443")
        self.assertEqual(res.pop(f"nosni:{NAMES[0]}:{PORT}"), "reset")
        self.assertEqual(res.pop(f"plain:{NAMES[0]}:{PORT}"), "reset")
        self.assertRefused(res.pop(f"tls:{NAMES[0]}:443"))  # a port not allowed

    def test_names_pinned_to_the_gateway_and_helper_gone_after(self):
        r = self.nsbox(["run", "--network", f"allow={NAMES[0]}:{PORT}", "--", "sh", "-c",
                        f"getent ahostsv4 {NAMES[0]} | head -1; ip -4 route show default"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        pinned, route = r.stdout.decode().splitlines()
        self.assertEqual(pinned.split()[0], route.split()[2])  # "default via GATEWAY ..."
        left = subprocess.run(["pgrep", "-x", "nsbox-egress"], capture_output=True, text=True)
        self.assertEqual(left.stdout, "")

    def test_persistent_sandbox_keeps_its_helper_until_rm(self):
        with open(os.path.join(pki, "ca.pem")) as f:
            ca = f.read()
        r = self.nsbox(["create", "--network", f"allow={NAMES[0]}:{PORT}", "-e", f"LAB_CA={ca}"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        sid = r.stdout.decode().strip()
        try:
            for _ in range(2):  # the helper serves every exec, not only the first
                r = self.nsbox(["exec", sid, "--", "python3", "-c", PROBE,
                                f"tls:{NAMES[0]}:{PORT}", f"tls:{NAMES[0]}:{PORT}:{NAMES[1]}"])
                self.assertEqual(r.returncode, 0, r.stderr.decode())
                res = json.loads(r.stdout)
                self.assertEqual(res[f"tls:{NAMES[0]}:{PORT}"], f"ok:ORIGIN {NAMES[0]}")
                self.assertEqual(res[f"tls:{NAMES[0]}:{PORT}:{NAMES[1]}"], "reset")
            with open(os.path.join(self.dirs.state, sid, "egress.log")) as f:
                log = f.read()
            self.assertIn(f"-> {NAMES[0]}:{PORT} at {API}", log)
            self.assertIn(f"-> {NAMES[1]}:{PORT}: not in the allow list", log)
            running = subprocess.run(["pgrep", "-x", "nsbox-egress"], capture_output=True)
            self.assertNotEqual(running.stdout, b"")  # so that the check below means something
        finally:
            r = self.nsbox(["rm", sid])
            self.assertEqual(r.returncode, 0, r.stderr.decode())
        left = subprocess.run(["pgrep", "-x", "nsbox-egress"], capture_output=True, text=True)
        self.assertEqual(left.stdout, "")


if __name__ == "__main__":
    unittest.main()
