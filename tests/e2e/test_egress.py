"""End-to-end: allow(hosts) by name through the egress helper (docs/network.md, "allow by
name"), in the network lab of tests/e2e/netlab.py. An HTTPS origin in the lab's upstream
namespace serves two names from one address with a certificate of a lab CA this module makes
(openssl); the sandbox trusts that CA through an environment variable, the host's trust store is
never touched. Checked: the allowed name works with verification; another name on the same
address is refused, by name through the helper and by address; no SNI and plain text are
refused; all of it without a word in the config (by name is the default); the address mode,
the config's opt-out, lets the neighbour through (what the helper is for).

The network log (docs/network.md "The network log"): `nsbox logs --network [-f]`, `nsbox run
--network-log FILE` and the Python client's Session.network_log() show each connection. The
helper's jail (docs/network.md "The egress helper's jail"): from the host, its /proc status, a
ptrace and /proc/PID/mem attempt as its own uid and as the sandbox's, and its death with a
killed supervisor. Two sandboxes that allow the same port have their helpers at once."""
import asyncio
import ctypes
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import unittest

import netlab
from netlab import (API, DIE_WITH_PARENT, LAB_ADDR, META, TLS_SERVE, Lab, make_pki,
                    missing_tools, start_origin)
from nsbox_test import NSBOX, Dirs, is_root, wait_for

sys.path.insert(0, os.path.join(os.environ.get("NSBOX_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python"))
from nsbox.session import AsyncSession, Session  # noqa: E402

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

# A banner on the lab host's loopback and uplink address only (argv[1] the port): a service of
# "the host" that does not hold the port on the sandboxes' gateways.
LAB_LISTENER = r"""
import socket, threading
def serve(s):
    while True:
        c, peer = s.accept()
        c.sendall(("HELLO %s:%d FROM %s\n" % (c.getsockname() + (peer[0],))).encode())
        c.close()
for a in ("127.0.0.1", "LAB_ADDR"):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((a, int(sys.argv[1])))
    s.listen(16)
    threading.Thread(target=serve, args=(s,), daemon=True).start()
print("READY", flush=True)
threading.Event().wait()
""".replace("LAB_ADDR", LAB_ADDR)

# Inside the sandbox: a real TLS handshake (verified) whose ClientHello is over 2 KB (a long
# ALPN list, as post-quantum key shares make it), written in four pieces, then a request. argv:
# the host to connect to, its port, the SNI. Prints {"hello": bytes, "result": ...}.
BIG_HELLO = r"""
import json, os, socket, ssl, sys, time
host, port, sni = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(cadata=os.environ["LAB_CA"])
ctx.set_alpn_protocols(["http/1.1"] + ["x-padding-%02d-" % i + "p" * 180 for i in range(12)])
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
o = ctx.wrap_bio(inc, out, server_hostname=sni)
res = {}
def pump():
    d = s.recv(65536)
    if not d:
        raise ConnectionResetError()
    inc.write(d)
try:
    s = socket.create_connection((host, port), timeout=8)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        try:
            o.do_handshake()
            break
        except ssl.SSLWantReadError:
            data = out.read()
            if "hello" not in res:
                res["hello"] = len(data)
                q = len(data) // 4 + 1
                for i in range(0, len(data), q):  # one piece per segment (a pause between)
                    s.sendall(data[i:i + q])
                    time.sleep(0.05)
            else:
                s.sendall(data)
            pump()
    o.write(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % sni).encode())
    s.sendall(out.read())
    body = b""
    while b"ORIGIN" not in body:
        try:
            body += o.read(65536)
        except ssl.SSLWantReadError:
            pump()
    res["result"] = "ok:" + body.split(b"\r\n\r\n", 1)[-1].decode()
except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
    res["result"] = "reset"
print(json.dumps(res))
"""

# A UDP listener on 0.0.0.0:argv[1] that appends each datagram it receives, a line each, to
# the file argv[2].
UDP_LISTENER = r"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("READY", flush=True)
while True:
    d, peer = s.recvfrom(2048)
    with open(sys.argv[2], "ab") as f:
        f.write(d + b"\n")
"""

# Inside the sandbox: one datagram to each HOST:PORT:TAG argument (the tag as its payload);
# what sendto says is not the point, what arrives is.
UDP_SEND = r"""
import socket, struct, sys
def gateway():
    for line in open("/proc/net/route").read().splitlines()[1:]:
        f = line.split()
        if f[1] == "00000000":
            return socket.inet_ntoa(struct.pack("<I", int(f[2], 16)))
for t in sys.argv[1:]:
    host, port, tag = t.split(":")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(tag.encode(), (gateway() if host == "GATEWAY" else host, int(port)))
    except OSError:
        pass
print("SENT")
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
    try:
        lab = Lab()
    except (subprocess.CalledProcessError, RuntimeError) as ex:
        raise unittest.SkipTest(f"cannot build the network lab here: {ex}")
    pki = lab.subdir("pki")
    make_pki(pki, NAMES)
    # "The host" resolves both names to the origin's one address: a CDN's shared address.
    with open(os.path.join(pki, "hosts"), "w") as f:
        f.write(f"127.0.0.1\tlocalhost\n{API}\t{' '.join(NAMES)}\n")
    start_origin(lab, ORIGIN, API, PORT, pki)


def tearDownModule():
    if lab:
        lab.cleanup()


def _which(t):
    from shutil import which
    return which(t)


def lab_helpers():
    """Pids of the egress helpers in this module's lab (other nsbox runs on the machine have
    their own): nsbox-egress processes in the lab's network namespace."""
    lab_ns = os.stat(f"/run/netns/{lab.lab}").st_ino
    out = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "nsbox-egress":
                    continue
            if os.stat(f"/proc/{pid}/ns/net").st_ino == lab_ns:
                out.append(int(pid))
        except (OSError, ValueError):
            continue
    return out


def status_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def wait_for_exec(pid, comm, seconds=20):
    """Waits until pid runs comm (Popen returns before the child's exec)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with open(f"/proc/{pid}/comm") as f:
            if f.read().strip() == comm:
                return
        time.sleep(0.01)
    raise AssertionError(f"{pid} did not exec {comm}")


def wait_gone(pid, seconds=20):
    """Whether pid is gone (or a zombie) within seconds: a bound on waiting, not on speed."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if status_of(pid)["State"].startswith("Z"):
                return True
        except (OSError, KeyError):
            return True
        time.sleep(0.05)
    return False


# Run as uid:gid in a forked child: what an attacker of that uid can do to the helper.
def attack_as(pid, uid, gid):
    """{"environ", "maps", "mem", "ptrace", "vm_readv"}: "denied" or what happened."""
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        res = {}
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            for what in ("environ", "maps", "mem"):
                try:
                    with open(f"/proc/{pid}/{what}", "rb") as f:
                        if what == "mem":  # the first byte of its first mapping
                            f.seek(first_mapping(pid))
                        f.read(1)
                    res[what] = "read"
                except PermissionError:
                    res[what] = "denied"
                except OSError as ex:
                    res[what] = repr(ex)
            libc = ctypes.CDLL(None, use_errno=True)
            libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p,
                                    ctypes.c_void_p]
            if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
                res["ptrace"] = "attached"
                os.waitpid(pid, 0)
                libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
            else:
                e = ctypes.get_errno()
                res["ptrace"] = "denied" if e == 1 else os.strerror(e)
            res["vm_readv"] = vm_readv(libc, pid)
        except Exception as ex:
            res["error"] = repr(ex)
        os.write(w, json.dumps(res).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    os.waitpid(child, 0)
    return json.loads(out)


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def first_mapping(pid):
    """The start of pid's first mapping, when its maps can be read; else any address (an access
    that is denied is denied before the address is looked at)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return int(f.readline().split("-")[0], 16)
    except OSError:
        return 0x400000


def vm_readv(libc, pid):
    """process_vm_readv of 16 bytes of pid's first mapping."""
    buf = ctypes.create_string_buffer(16)
    local = _Iovec(ctypes.cast(buf, ctypes.c_void_p), 16)
    remote = _Iovec(first_mapping(pid), 16)
    libc.process_vm_readv.argtypes = [ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_ulong,
                                      ctypes.POINTER(_Iovec), ctypes.c_ulong, ctypes.c_ulong]
    n = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if n == 16:
        return "read"
    e = ctypes.get_errno()
    return "denied" if e == 1 else os.strerror(e)


DENIED = {k: "denied" for k in ("environ", "maps", "mem", "ptrace", "vm_readv")}


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

    def nsbox(self, args, mode=None, hosts=None):
        # the lab's resolv.conf and the hosts file with both names (or hosts), in a private
        # mount namespace
        cmd = ["nsenter", f"--net=/run/netns/{lab.lab}", "unshare", "--mount", "--propagation",
               "private", "sh", "-c",
               'mount --bind "$0" /etc/resolv.conf && mount --bind "$1" /etc/hosts && '
               'shift && exec "$@"', lab.resolv, hosts or os.path.join(pki, "hosts"),
               NSBOX] + args
        return subprocess.run(cmd, capture_output=True, timeout=120, env=self.env(mode))

    def probe(self, allow, *targets, mode=None, extra=()):
        with open(os.path.join(pki, "ca.pem")) as f:
            ca = f.read()
        r = self.nsbox(["run", "--network", f"allow={allow}", "-e", f"LAB_CA={ca}"] +
                       list(extra) + ["--", "python3", "-c", PROBE] + list(targets), mode=mode)
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

    def test_client_hello_over_several_segments(self):
        # a hello of over 2 KB, in four writes: the helper reassembles it before deciding
        with open(os.path.join(pki, "ca.pem")) as f:
            ca = f.read()
        out, entries = {}, []
        for sni in NAMES:
            log = os.path.join(self.dirs.base, f"big-{sni}.jsonl")  # one run's log each
            r = self.nsbox(["run", "--network", f"allow={NAMES[0]}:{PORT}", "-e", f"LAB_CA={ca}",
                            "--network-log", log, "--", "python3", "-c", BIG_HELLO, NAMES[0],
                            str(PORT), sni])
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            out[sni] = json.loads(r.stdout)
            with open(log) as f:
                entries += [json.loads(line) for line in f]
        self.assertGreater(out[NAMES[0]]["hello"], 2048)
        self.assertEqual(out[NAMES[0]]["result"], f"ok:ORIGIN {NAMES[0]}")
        self.assertEqual(out[NAMES[1]]["result"], "reset")
        self.assertEqual([(e["name"], e["verdict"]) for e in entries],
                         [(NAMES[0], "spliced"), (NAMES[1], "refused")])
        self.assertGreater(entries[0]["bytes_up"], out[NAMES[0]]["hello"])
        self.assertEqual(entries[1]["reason"], "not in the allow list")

    def udp_listener(self, ns, port, path):
        open(path, "wb").close()
        p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c",
                              DIE_WITH_PARENT + UDP_LISTENER, str(os.getpid()), str(port), path],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)  # the listener this test started
        if p.stdout.readline().strip() != "READY":
            self.fail(f"the UDP listener did not start: {p.stderr.read()}")

    def test_udp_to_an_allowed_name_and_the_gateway_is_refused(self):
        # QUIC is UDP on the allowed port: neither the gateway (where the name is pinned) nor
        # the name's real address passes it. Listeners on the lab host and upstream record
        # what arrives; a network "all" sandbox and the lab host itself show that they would.
        up, host = (os.path.join(self.dirs.base, n) for n in ("udp-up", "udp-host"))
        self.udp_listener(lab.up, 443, up)
        self.udp_listener(lab.lab, 443, host)
        r = self.nsbox(["run", "--network", f"allow={NAMES[0]}:443", "--", "python3", "-c",
                        UDP_SEND, "GATEWAY:443:gateway", f"{NAMES[0]}:443:name",
                        f"{API}:443:address"])
        self.assertEqual((r.returncode, r.stdout), (0, b"SENT\n"), r.stderr.decode())
        r = self.nsbox(["run", "--network", "all", "--", "python3", "-c", UDP_SEND,
                        f"{API}:443:control"])
        self.assertEqual((r.returncode, r.stdout), (0, b"SENT\n"), r.stderr.decode())
        lab.exec(sys.executable, "-c", "import socket; socket.socket(socket.AF_INET, "
                 f"socket.SOCK_DGRAM).sendto(b'control', ('{LAB_ADDR}', 443))")
        # the controls arrived, so anything sent before them has too
        self.assertTrue(wait_for(lambda: open(up, "rb").read() and open(host, "rb").read(),
                                 20), "the controls never arrived")
        with open(up, "rb") as f:
            self.assertEqual(f.read(), b"control\n")
        with open(host, "rb") as f:
            self.assertEqual(f.read(), b"control\n")

    def test_names_pinned_to_the_gateway_and_helper_gone_after(self):
        r = self.nsbox(["run", "--network", f"allow={NAMES[0]}:{PORT}", "--", "sh", "-c",
                        f"getent ahostsv4 {NAMES[0]} | head -1; ip -4 route show default"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        pinned, route = r.stdout.decode().splitlines()
        self.assertEqual(pinned.split()[0], route.split()[2])  # "default via GATEWAY ..."
        self.assertEqual(lab_helpers(), [])  # the one-shot run's helper ended with it

    def test_names_that_rebind_to_forbidden_addresses_are_refused(self):
        # "The host" resolves allowed names to its own loopback and address, to the metadata
        # address and into the sandbox pool: each of them listens (the lab's upstream on the
        # metadata address, LAB_LISTENER on the host's), so only the helper's address check
        # stands between the sandbox and them. The log says which address and why.
        host_port = 7010
        p = subprocess.Popen(["ip", "netns", "exec", lab.lab, sys.executable, "-c",
                              DIE_WITH_PARENT + LAB_LISTENER, str(os.getpid()), str(host_port)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            if p.stdout.readline().strip() != "READY":
                self.fail(f"the lab host's listener did not start: {p.stderr.read()}")
            self.assertEqual(lab.tcp_from_lab(LAB_ADDR, host_port),
                             f"HELLO {LAB_ADDR}:{host_port} FROM {LAB_ADDR}")
            self.assertEqual(lab.tcp_from_lab(META, 9999), f"HELLO {META}:9999 FROM {LAB_ADDR}")
            self.rebinding_probe(host_port)
        finally:
            p.kill()  # the listener this test started
            p.wait()

    def rebinding_probe(self, host_port):
        hosts = os.path.join(self.dirs.base, "rebind-hosts")
        pool_addr = "10.171.255.254"  # a slot of the default pool no sandbox here has
        names = {"loop.lab.test": ("127.0.0.1", host_port),
                 "self.lab.test": (LAB_ADDR, host_port),
                 "meta.lab.test": (META, 9999),
                 "pool.lab.test": (pool_addr, 9999),
                 "api.lab.test": (API, 9999)}  # the control: an address it may reach
        with open(hosts, "w") as f:
            f.write("127.0.0.1\tlocalhost\n" +
                    "".join(f"{a}\t{n}\n" for n, (a, _) in names.items()))
        os.chmod(hosts, 0o644)
        # the metadata address named explicitly: that entry opens it, by address, and only it
        # and a name the host cannot resolve at all (neither its /etc/hosts nor the lab's DNS)
        allow = ",".join(f"{n}:{port}" for n, (_, port) in names.items()) + \
            f",{META}:9999,nowhere.lab.test:9999"
        log = os.path.join(self.dirs.base, "rebind.jsonl")
        targets = [f"tls:{n}:{port}" for n, (_, port) in names.items()] + \
            [f"tcp:{META}:9999", "tls:nowhere.lab.test:9999"]
        r = self.nsbox(["run", "--network", f"allow={allow}", "--network-log", log, "--",
                        "python3", "-c", netlab.PROBE] + targets, hosts=hosts)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        res = json.loads(r.stdout)
        self.assertTrue(res.pop("tls:api.lab.test:9999").startswith(f"ok:HELLO {API}:9999"))
        self.assertTrue(res.pop(f"tcp:{META}:9999").startswith(f"ok:HELLO {META}:9999"))
        self.assertEqual(res, {t: "reset" for t in res})
        with open(log) as f:
            entries = {e["name"]: e for e in map(json.loads, f) if "name" in e}
        reasons = {n: (entries[n]["verdict"], entries[n].get("reason")) for n in names}
        self.assertEqual(reasons, {
            "loop.lab.test": ("refused", "resolves to 127.0.0.1, loopback (this host)"),
            "self.lab.test": ("refused", f"resolves to {LAB_ADDR}, an address of this host"),
            "meta.lab.test": ("refused", f"resolves to {META}, link-local or cloud metadata "
                                         "(169.254.0.0/16)"),
            "pool.lab.test": ("refused", f"resolves to {pool_addr}, the sandbox address pool"),
            "api.lab.test": ("spliced", None)})
        self.assertRegex(entries["nowhere.lab.test"]["reason"], r"^cannot resolve: \S")

    def create(self, allow):
        with open(os.path.join(pki, "ca.pem")) as f:
            ca = f.read()
        r = self.nsbox(["create", "--network", f"allow={allow}", "-e", f"LAB_CA={ca}"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        return r.stdout.decode().strip()

    def exec_probe(self, sid, *targets):
        r = self.nsbox(["exec", sid, "--", "python3", "-c", PROBE] + list(targets))
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        return json.loads(r.stdout)

    def rm(self, sid):
        r = self.nsbox(["rm", sid])
        self.assertEqual(r.returncode, 0, r.stderr.decode())

    def helper_of(self, sid):
        r = self.nsbox(["inspect", sid])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        sup = int(json.loads(r.stdout)["supervisor_pid"])
        mine = [p for p in lab_helpers() if status_of(p)["PPid"] == str(sup)]
        self.assertEqual(len(mine), 1, f"the egress helpers of supervisor {sup}: {mine}")
        return sup, mine[0]

    def test_persistent_sandbox_keeps_its_helper_until_rm(self):
        sid = self.create(f"{NAMES[0]}:{PORT}")
        try:
            _, helper = self.helper_of(sid)
            for _ in range(2):  # the helper serves every exec, not only the first
                res = self.exec_probe(sid, f"tls:{NAMES[0]}:{PORT}",
                                      f"tls:{NAMES[0]}:{PORT}:{NAMES[1]}")
                self.assertEqual(res[f"tls:{NAMES[0]}:{PORT}"], f"ok:ORIGIN {NAMES[0]}")
                self.assertEqual(res[f"tls:{NAMES[0]}:{PORT}:{NAMES[1]}"], "reset")
        finally:
            self.rm(sid)
        self.assertTrue(wait_gone(helper), "the helper outlived nsbox rm")

    def network_log(self, sid, *extra):
        r = self.nsbox(["logs", "--network"] + list(extra) + [sid])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        return [json.loads(line) for line in r.stdout.decode().splitlines()]

    def held_connection(self, sid, check):
        """check() run while a TLS connection from sandbox sid to the helper is held open."""
        hold = ("import os, socket, ssl, sys, time\n"
                "ctx = ssl.create_default_context(cadata=os.environ['LAB_CA'])\n"
                "s = ctx.wrap_socket(socket.create_connection((sys.argv[1], %d), timeout=8),"
                " server_hostname=sys.argv[1])\n"
                "print('up', flush=True)\n"
                "sys.stdin.read()\n" % PORT)
        cmd = ["nsenter", f"--net=/run/netns/{lab.lab}", "unshare", "--mount",
               "--propagation", "private", "sh", "-c",
               'mount --bind "$0" /etc/resolv.conf && mount --bind "$1" /etc/hosts && '
               'shift && exec "$@"', lab.resolv, os.path.join(pki, "hosts"), NSBOX,
               "exec", "-i", sid, "--", "python3", "-c", hold, NAMES[0]]
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=self.env(None))
        try:
            ready, _, _ = select.select([p.stdout], [], [], 30)
            self.assertTrue(ready, "the held connection did not come up")
            self.assertEqual(p.stdout.readline(), b"up\n")
            check()
        finally:
            p.stdin.close()
            p.wait(timeout=20)

    def assertReno(self, ss):
        self.assertIn("reno", ss, ss)
        for other in ("bbr", "cubic"):
            self.assertNotIn(other, ss, ss)

    def test_sandbox_side_is_not_paced(self):
        # The helper's socket towards the sandbox takes reno, which never paces, whatever the
        # host's default (bbr paces, and halved a spliced download's throughput): read with ss
        # from the lab's namespace, where the helper lives, while a connection is held open.
        # The listener has it, so that each connection starts with it: switched on an
        # established bbr connection, reno would keep bbr's pacing on.
        def check():
            ss = subprocess.run(["nsenter", f"--net=/run/netns/{lab.lab}", "ss", "-Htin",
                                 "state", "established", f"( sport = :{PORT} )"],
                                capture_output=True, text=True, check=True).stdout.split()
            self.assertReno(ss)
            ls = subprocess.run(["nsenter", f"--net=/run/netns/{lab.lab}", "ss", "-Htlni",
                                 f"( sport = :{PORT} )"],
                                capture_output=True, text=True, check=True).stdout.split()
            self.assertIn("reno", ls, ls)
        sid = self.create(f"{NAMES[0]}:{PORT}")
        try:
            self.held_connection(sid, check)
        finally:
            self.rm(sid)

    def test_sandbox_sockets_to_the_helper_are_not_paced(self):
        # The sandbox's own socket to the helper (an upload's sender) takes reno from the route
        # to the gateway, whatever the namespace inherits from the host (bbr paces): read with
        # ss inside the sandbox's namespace while a connection is held open. Only that route
        # has it: the default route keeps the host's choice.
        def check():
            r = self.nsbox(["exec", sid, "--", "ss", "-Htin", "state", "established",
                            f"( dport = :{PORT} )"])
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            self.assertReno(r.stdout.decode().split())
        sid = self.create(f"{NAMES[0]}:{PORT}")
        try:
            self.held_connection(sid, check)
            r = self.nsbox(["exec", sid, "--", "ip", "-4", "route", "show"])
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            routes = r.stdout.decode().splitlines()
            gw = [l for l in routes if "congctl" in l]
            self.assertEqual(len(gw), 1, routes)
            self.assertRegex(gw[0], r"^10\.[0-9.]+ dev eth0 .*congctl reno", routes)
            self.assertNotIn("lock", gw[0].split(), routes)
        finally:
            self.rm(sid)

    def test_connections_past_the_helpers_bound_are_reset(self):
        # 128 connections that send nothing hold the helper's threads until their ClientHello
        # is due (10 s); the next is reset at once, not given a thread of its own
        sid = self.create(f"{NAMES[0]}:{PORT}")
        hold = ("import socket, sys\n"
                "a = (sys.argv[1], int(sys.argv[2]))\n"
                "held = [socket.create_connection(a, timeout=8) for _ in range(128)]\n"
                "s = socket.create_connection(a, timeout=8)\n"
                "s.settimeout(3)\n"
                "try:\n"
                "    print('data' if s.recv(1) else 'closed')\n"
                "except ConnectionResetError:\n"
                "    print('reset')\n"
                "except socket.timeout:\n"
                "    print('timeout')\n")
        try:
            r = self.nsbox(["exec", sid, "--", "python3", "-c", hold, NAMES[0], str(PORT)])
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            self.assertIn(r.stdout.decode().strip(), ("reset", "closed"))
            said = wait_for(lambda: [e for e in self.network_log(sid)
                                     if e.get("reason") == "128 connections open"])
            self.assertTrue(said, self.network_log(sid))
        finally:
            self.rm(sid)

    def test_network_all_keeps_the_hosts_control(self):
        # A network all sandbox's connections leave for the real network: no route of its
        # takes a control of nsbox's choosing.
        r = self.nsbox(["run", "--network", "all", "--", "ip", "-4", "route", "show"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        routes = r.stdout.decode()
        self.assertIn("default via", routes)
        self.assertNotIn("congctl", routes)

    def test_network_log_has_each_connection(self):
        sid = self.create(f"{NAMES[0]}:{PORT}")
        follower = None
        try:
            # a follower from before the connections: it shows them, and ends with the sandbox
            follower = subprocess.Popen(
                ["nsenter", f"--net=/run/netns/{lab.lab}", NSBOX, "logs", "--network", "-f",
                 sid], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env(None))
            self.exec_probe(sid, f"tls:{NAMES[0]}:{PORT}", f"tls:{NAMES[0]}:{PORT}:{NAMES[1]}",
                            f"nosni:{NAMES[0]}:{PORT}", f"plain:{NAMES[0]}:{PORT}")
            # the helper writes a connection's entry when it has seen it close, in its own
            # time: the probe's end does not wait for that
            def logged():
                entries = self.network_log(sid)
                return entries if len(entries) >= 4 else None
            log = wait_for(logged) or self.network_log(sid)
            self.assertEqual([e["seq"] for e in log], [1, 2, 3, 4])
            by_name = {e.get("name"): e for e in log}
            ok = by_name[NAMES[0]]
            self.assertEqual((ok["verdict"], ok["port"], ok["address"]), ("spliced", PORT, API))
            self.assertGreater(ok["bytes_up"], 200)  # a ClientHello at least
            self.assertGreater(ok["bytes_down"], 1000)  # a certificate at least
            self.assertGreaterEqual(ok["duration_ms"], 0)
            self.assertRegex(ok["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            other = by_name[NAMES[1]]
            self.assertEqual((other["verdict"], other["reason"]),
                             ("refused", "not in the allow list"))
            self.assertNotIn("address", other)
            nameless = [e for e in log if "name" not in e]
            self.assertEqual([e["verdict"] for e in nameless], ["refused", "refused"])
            self.assertTrue(all(e["reason"] for e in nameless))
            # the Python client reads the same entries, blocking and async
            session = Session(sid, runtime_dir=self.dirs.state)
            self.assertEqual(session.network_log(), log)
            self.assertEqual(asyncio.run(AsyncSession(session).network_log()), log)
        finally:
            self.rm(sid)
        out, err = follower.communicate(timeout=60)
        self.assertEqual(follower.returncode, 0, err.decode())
        self.assertEqual([json.loads(line) for line in out.decode().splitlines()], log)

    def test_network_log_of_a_sandbox_without_names_is_an_error(self):
        r = self.nsbox(["create", "--network", f"allow={API}:{PORT}"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        sid = r.stdout.decode().strip()
        try:
            r = self.nsbox(["logs", "--network", sid])
            self.assertEqual(r.returncode, 125)
            self.assertIn("has no network log", r.stderr.decode())
        finally:
            self.rm(sid)

    def test_run_network_log_file(self):
        out = os.path.join(self.dirs.base, "net.jsonl")
        res = self.probe(f"{NAMES[0]}:{PORT}", f"tls:{NAMES[0]}:{PORT}",
                         f"tls:{NAMES[0]}:{PORT}:{NAMES[1]}", extra=["--network-log", out])
        self.assertEqual(res[f"tls:{NAMES[0]}:{PORT}"], f"ok:ORIGIN {NAMES[0]}")
        with open(out) as f:
            log = [json.loads(line) for line in f]
        # in the order the connections ended: the spliced one may close after the refusal
        self.assertEqual(sorted((e["name"], e["verdict"]) for e in log),
                         [(NAMES[0], "spliced"), (NAMES[1], "refused")])
        # a run that allows no name has nothing to log: said, not an empty file
        r = self.nsbox(["run", "--network-log", out, "--", "true"])
        self.assertEqual(r.returncode, 125, r.stderr.decode())  # a usage error
        self.assertIn("--network-log", r.stderr.decode())

    # ---- the helper's jail ----------------------------------------------------------------

    def test_helper_is_jailed(self):
        sid = self.create(f"{NAMES[0]}:{PORT}")
        try:
            _, helper = self.helper_of(sid)
            st = status_of(helper)
            uid = int(st["Uid"].split()[0])
            # its own ids, past the sandboxes' ranges (policy/idmap.h NSBOX_EGRESS_ID_BASE)
            self.assertEqual(st["Uid"].split(), [str(uid)] * 4)
            self.assertEqual(st["Gid"].split(), [str(uid)] * 4)
            self.assertTrue(2147324928 <= uid < 2147324928 + 2248, uid)
            self.assertEqual(st["Groups"].strip(), "")
            for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
                self.assertEqual(int(st[cap], 16), 0, cap)
            self.assertEqual((st["NoNewPrivs"], st["Seccomp"]), ("1", "2"))
            # the helper still works jailed
            res = self.exec_probe(sid, f"tls:{NAMES[0]}:{PORT}")
            self.assertEqual(res[f"tls:{NAMES[0]}:{PORT}"], f"ok:ORIGIN {NAMES[0]}")
            # attacks from its own uid, and from the sandbox's appuser on the host
            # the sandbox's own host uid: its init's, the supervisor's other child
            sup = int(st["PPid"])
            kids = subprocess.run(["pgrep", "-P", str(sup)], capture_output=True, text=True)
            inits = [int(p) for p in kids.stdout.split() if int(p) != helper]
            self.assertEqual(len(inits), 1, kids.stdout)
            sandbox_uid = int(status_of(inits[0])["Uid"].split()[1])
            self.assertNotEqual(sandbox_uid, uid)
            for who in (uid, sandbox_uid):
                self.assertEqual(attack_as(helper, who, who), DENIED, f"as uid {who}")
        finally:
            self.rm(sid)

    def test_helper_is_not_dumpable(self):
        # The helper runs an executable of its own under its own uid, with an empty
        # environment: the exec leaves it dumpable (its uid is its euid), and only its
        # PR_SET_DUMPABLE keeps a process of that uid out of its environ, maps, memory, ptrace
        # and process_vm_readv. The control: a dumpable process of the same uid, which the
        # same attacks reach, so that a denial is the helper's doing and not the attack's.
        sid = self.create(f"{NAMES[0]}:{PORT}")
        control = None
        try:
            _, helper = self.helper_of(sid)
            uid = int(status_of(helper)["Uid"].split()[0])
            control = subprocess.Popen(["sleep", "120"], user=uid, group=uid, extra_groups=[],
                                       env={"CONTROL": "1"})
            wait_for_exec(control.pid, "sleep")
            reached = attack_as(control.pid, uid, uid)
            self.assertEqual(reached, {"environ": "read", "maps": "read", "mem": "read",
                                       "ptrace": "attached", "vm_readv": "read"})
            self.assertEqual(attack_as(helper, uid, uid), DENIED)
            # and the helper still serves
            res = self.exec_probe(sid, f"tls:{NAMES[0]}:{PORT}")
            self.assertEqual(res[f"tls:{NAMES[0]}:{PORT}"], f"ok:ORIGIN {NAMES[0]}")
        finally:
            if control:
                control.kill()  # the sleep this test started
                control.wait()
            self.rm(sid)

    def test_missing_helper_executable_is_named(self):
        # nsbox runs nsbox-egress from its own directory: a copy of nsbox alone says so
        alone = os.path.join(self.dirs.base, "alone")
        os.mkdir(alone)
        shutil.copy(NSBOX, alone)
        cmd = ["nsenter", f"--net=/run/netns/{lab.lab}", os.path.join(alone, "nsbox"), "run",
               "--network", f"allow={NAMES[0]}:{PORT}", "--", "true"]
        r = subprocess.run(cmd, capture_output=True, timeout=120, env=self.env(None))
        self.assertEqual(r.returncode, 125, r.stderr.decode())
        err = r.stderr.decode()
        self.assertIn(os.path.join(alone, "nsbox-egress"), err)
        self.assertIn("beside", err)
        self.assertEqual(lab_helpers(), [])

    def test_helper_executable_is_opened_once(self):
        # nsbox checks nsbox-egress when it prepares the sandbox and runs the descriptor it
        # checked: the file is opened once, and the file run is the file checked (a file put
        # in its place between the two would otherwise be what runs)
        strace = shutil.which("strace")
        if not strace:
            self.skipTest("needs strace to count the opens of nsbox-egress")
        trace = os.path.join(self.dirs.base, "opens")
        cmd = ["nsenter", f"--net=/run/netns/{lab.lab}", "unshare", "--mount", "--propagation",
               "private", "sh", "-c",
               'mount --bind "$0" /etc/resolv.conf && mount --bind "$1" /etc/hosts && '
               'shift && exec "$@"', lab.resolv, os.path.join(pki, "hosts"),
               strace, "-f", "-qq", "-e", "trace=open,openat,execve,execveat", "-e",
               "signal=none", "-o", trace, NSBOX, "run", "--network",
               f"allow={NAMES[0]}:{PORT}", "--", "true"]
        r = subprocess.run(cmd, capture_output=True, timeout=120, env=self.env(None))
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        with open(trace) as f:
            lines = f.read().splitlines()
        helper = os.path.join(os.path.dirname(NSBOX), "nsbox-egress")
        opens = [ln for ln in lines if "open" in ln and f'"{helper}"' in ln]
        self.assertEqual(len(opens), 1, "\n".join(opens))
        # and it runs from that descriptor, not by its name
        self.assertTrue(any("execveat(" in ln and "AT_EMPTY_PATH" in ln for ln in lines))
        self.assertFalse([ln for ln in lines if "execve(" in ln and f'"{helper}"' in ln])
        self.assertEqual(lab_helpers(), [])

    def test_helper_runs_from_a_directory_only_root_enters(self):
        # a build below /root: the helper's uid cannot enter the directory, and does not need
        # to, as nsbox execs the file from a descriptor it opened
        private = os.path.join(self.dirs.base, "private")
        os.mkdir(private, 0o700)
        for name in ("nsbox", "nsbox-egress"):
            shutil.copy(os.path.join(os.path.dirname(NSBOX), name), private)
        cmd = ["nsenter", f"--net=/run/netns/{lab.lab}", "unshare", "--mount", "--propagation",
               "private", "sh", "-c",
               'mount --bind "$0" /etc/resolv.conf && mount --bind "$1" /etc/hosts && '
               'shift && exec "$@"', lab.resolv, os.path.join(pki, "hosts"),
               os.path.join(private, "nsbox"), "run", "--network", f"allow={NAMES[0]}:{PORT}",
               "-e", f"LAB_CA={open(os.path.join(pki, 'ca.pem')).read()}", "--", "python3",
               "-c", PROBE, f"tls:{NAMES[0]}:{PORT}"]
        r = subprocess.run(cmd, capture_output=True, timeout=120, env=self.env(None))
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        self.assertEqual(json.loads(r.stdout)[f"tls:{NAMES[0]}:{PORT}"], f"ok:ORIGIN {NAMES[0]}")
        # the file itself must be executable by the helper's uid: said, with the fix
        os.chmod(os.path.join(private, "nsbox-egress"), 0o700)
        r = subprocess.run(cmd, capture_output=True, timeout=120, env=self.env(None))
        self.assertEqual(r.returncode, 125, r.stderr.decode())
        self.assertIn(os.path.join(private, "nsbox-egress"), r.stderr.decode())
        self.assertIn("mode 0755", r.stderr.decode())
        self.assertEqual(lab_helpers(), [])

    def test_helper_dies_with_its_supervisor(self):
        sid = self.create(f"{NAMES[0]}:{PORT}")
        sup, helper = self.helper_of(sid)
        os.kill(sup, signal.SIGKILL)  # a supervisor this test made
        self.assertTrue(wait_gone(helper), "the helper outlived its supervisor")
        r = self.nsbox(["gc"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())

    def test_two_sandboxes_allow_the_same_port(self):
        # each helper listens on its own sandbox's gateway address: both at once
        a = self.create(f"{NAMES[0]}:{PORT}")
        try:
            b = self.create(f"{NAMES[0]}:{PORT}")
            try:
                self.assertNotEqual(self.helper_of(a)[1], self.helper_of(b)[1])
                for sid in (a, b, a):
                    res = self.exec_probe(sid, f"tls:{NAMES[0]}:{PORT}")
                    self.assertEqual(res[f"tls:{NAMES[0]}:{PORT}"], f"ok:ORIGIN {NAMES[0]}")
            finally:
                self.rm(b)
        finally:
            self.rm(a)


if __name__ == "__main__":
    unittest.main()
