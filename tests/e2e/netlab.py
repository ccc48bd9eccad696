"""A network lab for the network tests: nothing here touches the host's own network
(docs/decisions.md, "Network modes are tested only in a lab namespace"). Everything lives in
namespaces the lab makes and removes:

  LAB  (ip netns nsbox-lab-<pid>)     plays "the host": nsbox runs here, so its nftables table,
                                      veths, routes and ip_forward are the lab's
        lab0 10.250.0.1/24 --veth-- up0 10.250.0.2/24
  UP   (ip netns nsbox-labup-<pid>)   a fake upstream: 198.51.100.10, 198.51.100.20 and
                                      169.254.169.254 on its loopback, TCP listeners on every
                                      address, a DNS server on 10.250.0.2:53 for *.lab.test

LAB's default route goes to UP; UP has no route anywhere else, so nothing can leave.

nsbox is started as `nsenter --net=LAB unshare --mount sh -c 'mount --bind R /etc/resolv.conf;
exec nsbox ...'`: in a private mount namespace /etc/resolv.conf names the lab's DNS server (for
allow-mode names, which the host resolves), and the real /etc is untouched.

Run as a script, this file is the lab's servers: `python3 netlab.py serve ...`.

A lab is removed whichever way its test process ends. Its cleanup is registered with atexit
before the first namespace is made: a module or class set-up that fails after the lab was built
(unittest then skips its tearDownModule or tearDownClass), a KeyboardInterrupt and sys.exit all
run it. The servers die with the process that started them (PR_SET_PDEATHSIG), so a test killed
outright (SIGKILL, a ctest timeout) leaves none running; its namespaces and directory, named
after its pid, are removed by the next Lab() once that pid is gone (sweep_stale). Files a test
needs beside its lab (a PKI) go in Lab.subdir, so that they share its fate.
"""
import atexit
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time

LAB_ADDR = "10.250.0.1"
UP_ADDR = "10.250.0.2"
API = "198.51.100.10"      # api.lab.test
OTHER = "198.51.100.20"    # other.lab.test
META = "169.254.169.254"   # a cloud metadata address
HOST_PORT = 7000           # a service of "the host" (LAB), on all its addresses
UP_PORTS = (80, 443, 8443, 9999)
DNS_NAMES = {"api.lab.test": API, "other.lab.test": OTHER}

HERE = os.path.dirname(os.path.abspath(__file__))


def sh(*cmd, check=True, **kw):
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True, **kw)


def missing_tools():
    return [t for t in ("ip", "nsenter", "unshare", "nft", "mount") if not shutil.which(t)]


def skip_unless_lab(*tools):
    """For a module's setUpModule: unittest.SkipTest, with the reason, unless the lab can be
    built here (root, its tools) and these tools are there too."""
    import unittest
    if os.geteuid() != 0:
        raise unittest.SkipTest("the network lab needs root (network namespaces, veths)")
    missing = missing_tools() + [t for t in tools if not shutil.which(t)]
    if missing:
        raise unittest.SkipTest(f"the network lab needs {', '.join(missing)}")


# The names of a lab's namespaces and directory carry the pid of the test process that made it.
STALE_NETNS = re.compile(r"nsbox-lab(?:up)?-([0-9]+)")
STALE_TMP = re.compile(r"nsbox-netlab-([0-9]+)-.+")

# Prepended to a lab server's script: it dies with the test process that started it (argv[1]
# gives that one's pid, in case it is gone before the request was made).
DIE_WITH_PARENT = r"""
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv.pop(1)):
    os._exit(1)
"""


def die_with_parent(parent):
    """In a lab server: be killed when the test process, pid parent, ends."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def sweep_stale():
    """Remove the namespaces and directories of labs whose test process is gone (killed before
    it could clean up). A lab of a live process, another test's, is left alone."""
    def gone(pid):
        return not os.path.exists(f"/proc/{pid}")
    try:
        names = os.listdir("/run/netns")
    except OSError:
        names = []
    for name in names:
        m = STALE_NETNS.fullmatch(name)
        if m and gone(m.group(1)):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        m = STALE_TMP.fullmatch(name)
        if m and gone(m.group(1)):
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


class Lab:
    def __init__(self):
        tag = os.getpid()
        self.lab = f"nsbox-lab-{tag}"
        self.up = f"nsbox-labup-{tag}"
        self.procs = []
        self.made = []
        self.tmp = None
        self.owner = tag  # a forked child that exits (pty.fork's, exec failed) removes nothing
        sweep_stale()
        atexit.register(self.cleanup)
        self.tmp = tempfile.mkdtemp(prefix=f"nsbox-netlab-{tag}-")
        os.chmod(self.tmp, 0o755)
        self.resolv = os.path.join(self.tmp, "resolv.conf")
        with open(self.resolv, "w") as f:
            f.write(f"nameserver {UP_ADDR}\nsearch lab.test\n")
        os.chmod(self.resolv, 0o644)
        try:
            self._build()
        except BaseException:
            self.cleanup()
            raise

    # ---- building and removing --------------------------------------------------------------

    def _build(self):
        for ns in (self.lab, self.up):
            self.made.append(ns)  # before: a name half made is removed too (del is harmless)
            sh("ip", "netns", "add", ns)
        sh("ip", "-n", self.lab, "link", "add", "name", "lab0", "type", "veth", "peer", "name",
           "up0", "netns", self.up)
        L = ("ip", "-n", self.lab)
        U = ("ip", "-n", self.up)
        sh(*L, "link", "set", "lo", "up")
        # A new namespace inherits ip_forward from the host's: start from "the host does not
        # forward", the case where nsbox must turn it on and guard it.
        sh("ip", "netns", "exec", self.lab, "sysctl", "-qw", "net.ipv4.ip_forward=0")
        sh(*L, "addr", "add", f"{LAB_ADDR}/24", "dev", "lab0")
        sh(*L, "link", "set", "lab0", "up")
        sh(*L, "route", "add", "default", "via", UP_ADDR)
        sh(*U, "link", "set", "lo", "up")
        for a in (API, OTHER, META):
            sh(*U, "addr", "add", f"{a}/32", "dev", "lo")
        sh(*U, "addr", "add", f"{UP_ADDR}/24", "dev", "up0")
        sh(*U, "link", "set", "up0", "up")
        ports = ",".join(str(p) for p in UP_PORTS)
        self._serve(self.up, ["--tcp", ports, "--dns", json.dumps(DNS_NAMES)])
        self._serve(self.lab, ["--tcp", str(HOST_PORT)])

    def _serve(self, ns, args):
        p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable,
                              os.path.join(HERE, "netlab.py"), "serve", str(os.getpid())] + args,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        line = p.stdout.readline()
        if line.strip() != "READY":
            raise RuntimeError(f"lab server in {ns} did not start: {line} {p.stderr.read()}")

    def cleanup(self):
        """Remove the lab: its servers (by pid), then whatever else still runs in its namespaces
        (all started by this test: a sandbox's helper a failed test left), then the namespaces
        and the directory. Safe to call again."""
        if os.getpid() != self.owner:
            return
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.procs = []
        for ns in reversed(self.made):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            for pid in pids.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.made = []
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def subdir(self, name):
        """A new directory name in the lab's own, readable by the sandboxes' users: what a test
        keeps there (its PKI, an origin's files) goes with the lab however the test ends."""
        d = os.path.join(self.tmp, name)
        os.mkdir(d)
        os.chmod(d, 0o755)
        return d

    # ---- running things in the lab ----------------------------------------------------------

    def wrap(self, cmd, user=None, resolv=None):
        """cmd run in LAB's network namespace, with the lab's resolv.conf bound over
        /etc/resolv.conf in a private mount namespace; as `user` (a pwd entry) if given."""
        if user is not None:
            cmd = ["setpriv", "--reuid", str(user.pw_uid), "--regid", str(user.pw_gid),
                   "--clear-groups", "--"] + list(cmd)
        return ["nsenter", f"--net=/run/netns/{self.lab}", "unshare", "--mount",
                "--propagation", "private", "sh", "-c",
                'mount --bind "$0" /etc/resolv.conf && exec "$@"', resolv or self.resolv] + list(cmd)

    def exec(self, *cmd, check=True):
        return sh("ip", "netns", "exec", self.lab, *cmd, check=check)

    def nft_table(self):
        """The lab's `inet nsbox` table as {set name: [elements]}, or None when absent."""
        r = self.exec("nft", "-j", "list", "table", "inet", "nsbox", check=False)
        if r.returncode != 0:
            return None
        sets = {}
        for obj in json.loads(r.stdout)["nftables"]:
            if "set" in obj:
                sets[obj["set"]["name"]] = obj["set"].get("elem", [])
        return sets

    def nft_rules_text(self):
        return self.exec("nft", "list", "table", "inet", "nsbox", check=False).stdout

    def sandbox_links(self):
        out = self.exec("ip", "-o", "link").stdout
        return [l.split(":")[1].strip().split("@")[0] for l in out.splitlines()
                if l.split(":")[1].strip().startswith("nsb")]

    def pool_routes_and_addrs(self, pool_prefix="10.171."):
        r = self.exec("ip", "-4", "route").stdout + self.exec("ip", "-4", "-o", "addr").stdout
        return [l for l in r.splitlines() if pool_prefix in l]

    def ip_forward(self):
        return self.exec("cat", "/proc/sys/net/ipv4/ip_forward").stdout.strip()

    def tcp_from_lab(self, addr, port, timeout=3):
        """Connect from LAB itself (to prove a target is really up)."""
        code = ("import socket,sys\n"
                "s=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=3)\n"
                "print(s.recv(200).decode().strip())\n")
        r = self.exec(sys.executable, "-c", code, addr, str(port), check=False)
        return r.stdout.strip() if r.returncode == 0 else None


# ---- the probe that runs inside sandboxes ------------------------------------------------------

PROBE = r"""
import errno, json, socket, struct, sys
def gateway():
    for line in open('/proc/net/route').read().splitlines()[1:]:
        f = line.split()
        if f[1] == '00000000':
            return socket.inet_ntoa(struct.pack('<I', int(f[2], 16)))
    return None
def classify(ex):
    if isinstance(ex, socket.timeout):
        return 'timeout'
    if isinstance(ex, ConnectionResetError):
        return 'reset'
    n = getattr(ex, 'errno', None)
    if n == errno.ECONNREFUSED:
        return 'refused'
    if n in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EACCES, errno.EPERM):
        return 'unreachable'
    return 'error:' + (errno.errorcode.get(n, str(n)) if n else repr(ex))
def tcp(host, port):
    try:
        s = socket.create_connection((host, port), timeout=4)
        s.settimeout(4)
        data = s.recv(200).decode().strip()
        return 'ok:' + data
    except Exception as ex:
        return classify(ex)
def hello(sni):
    # a real TLS ClientHello naming sni (the lab's banner servers speak no TLS: what comes back
    # is their banner, which says where the connection arrived)
    import ssl
    out = ssl.MemoryBIO()
    ctx = ssl.create_default_context()
    if not sni:  # a hello without a server name
        ctx.check_hostname = False
    o = ctx.wrap_bio(ssl.MemoryBIO(), out, server_hostname=sni or None)
    try:
        o.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()
def send_first(host, port, data):
    try:
        s = socket.create_connection((host, port), timeout=4)
        s.settimeout(4)
        s.sendall(data)
        d = s.recv(200).decode().strip()
        if not d:
            raise ConnectionResetError()
        return 'ok:' + d
    except Exception as ex:
        return classify(ex)
def dns(server, name):
    q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0)
    q += b''.join(bytes([len(p)]) + p.encode() for p in name.split('.')) + b'\0'
    q += struct.pack('>HH', 1, 1)
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(4)
        s.connect((server, 53))
        s.send(q)
        r = s.recv(512)
        return 'ok:' + socket.inet_ntoa(r[-4:])
    except Exception as ex:
        return classify(ex)
out = {}
for t in sys.argv[1:]:
    kind, rest = t.split(':', 1)
    if kind == 'tcp':
        host, port = rest.rsplit(':', 1)
        if host == 'GATEWAY':
            host = gateway()
        out[t] = tcp(host, int(port))
    elif kind == 'tls':  # tls:HOST:PORT[:SNI], SNI defaulting to HOST
        parts = rest.split(':')
        host, port = parts[0], int(parts[1])
        out[t] = send_first(host, port, hello(parts[2] if len(parts) > 2 else host))
    elif kind == 'http':  # http:HOST:PORT, a plain-text request
        host, port = rest.split(':')
        out[t] = send_first(host, int(port),
                            ('GET / HTTP/1.1\r\nHost: %s\r\n\r\n' % host).encode())
    elif kind == 'dns':
        server, name = rest.split(':', 1)
        out[t] = dns(server, name)
    elif kind == 'resolve':
        try:
            out[t] = 'ok:' + socket.gethostbyname(rest)
        except Exception as ex:
            out[t] = 'fail'
print(json.dumps(out))
"""


# ---- HTTPS origins with a lab CA (test_egress.py, test_header_bindings.py) --------------------

# The end of an origin's script (python -c): its handler class H served over TLS on
# argv[1]:argv[2] with the certificate argv[3] and key argv[4]; "READY" once it listens.
TLS_SERVE = r"""
srv = http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
if os.environ.get("NETLAB_WEAK_ORIGIN"):  # it may serve a key its own library calls too weak
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
ctx.load_cert_chain(sys.argv[3], sys.argv[4])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print("READY", flush=True)
srv.serve_forever()
"""


def make_pki(d, names):
    """In d: a lab CA (ca.pem, ca.key) and a certificate for names (srv.pem, srv.key) signed by
    it, all readable by the sandboxes' users. Trusted by nothing but what a test gives it to."""
    def openssl(*args):
        sh("openssl", *args, cwd=d)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "2", "-subj", "/CN=nsbox lab CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
            "-subj", f"/CN={names[0]}")
    with open(os.path.join(d, "ext"), "w") as f:
        f.write("subjectAltName=" + ",".join(f"DNS:{n}" for n in names) + "\n")
    openssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "srv.pem", "-days", "2", "-extfile", "ext")
    for n in os.listdir(d):
        os.chmod(os.path.join(d, n), 0o644)


def in_lab(lab, hosts, argv, store=None):
    """argv run in the lab's network namespace and a private mount namespace in which
    /etc/resolv.conf names the lab's DNS server and /etc/hosts is the file hosts (and, with
    store, /etc/ssl/certs is that directory): the host's own files are never touched."""
    bind = f'mount --bind "{store}" /etc/ssl/certs && ' if store else ""
    return ["nsenter", f"--net=/run/netns/{lab.lab}", "unshare", "--mount", "--propagation",
            "private", "sh", "-c",
            'mount --bind "$0" /etc/resolv.conf && mount --bind "$1" /etc/hosts && ' + bind +
            'shift && exec "$@"', lab.resolv, hosts] + list(argv)


def start_origin(lab, script, address, port, pki, *args, weak=False):
    """script (ending with TLS_SERVE) in the lab's upstream namespace, on address:port with
    pki's certificate, more arguments after it; returns once it listens. weak: it serves a
    certificate under its own library's security level (a test of a client's refusal)."""
    env = dict(os.environ, NETLAB_WEAK_ORIGIN="1") if weak else None
    p = subprocess.Popen(["ip", "netns", "exec", lab.up, sys.executable, "-c",
                          DIE_WITH_PARENT + script, str(os.getpid()), address, str(port),
                          os.path.join(pki, "srv.pem"), os.path.join(pki, "srv.key")]
                         + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    lab.procs.append(p)
    line = p.stdout.readline()
    if line.strip() != "READY":
        raise RuntimeError(f"the HTTPS origin did not start: {line} {p.stderr.read()}")


# ---- servers (python3 netlab.py serve PARENT_PID --tcp PORTS [--dns JSON]) ---------------------

class _Banner(socketserver.BaseRequestHandler):
    def handle(self):
        local = self.request.getsockname()
        peer = self.request.getpeername()
        try:
            self.request.sendall(f"HELLO {local[0]}:{local[1]} FROM {peer[0]}\n".encode())
        except OSError:
            pass


class _TCPServer(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def _dns_answer(names, data):
    if len(data) < 12:
        return None
    tid, flags, qd = struct.unpack(">HHH", data[:6])
    i, labels = 12, []
    while i < len(data) and data[i]:
        labels.append(data[i + 1:i + 1 + data[i]].decode(errors="replace"))
        i += 1 + data[i]
    qtype, qclass = struct.unpack(">HH", data[i + 1:i + 5])
    question = data[12:i + 5]
    name = ".".join(labels).lower()
    addr = names.get(name)
    if addr is None:
        return struct.pack(">HHHHHH", tid, 0x8183, 1, 0, 0, 0) + question
    if qtype != 1:
        return struct.pack(">HHHHHH", tid, 0x8180, 1, 0, 0, 0) + question
    answer = struct.pack(">HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton(addr)
    return struct.pack(">HHHHHH", tid, 0x8180, 1, 1, 0, 0) + question + answer


def _serve_dns(names):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 53))
    def loop():
        while True:
            data, peer = s.recvfrom(512)
            try:
                r = _dns_answer(names, data)
            except Exception:
                r = None
            if r:
                s.sendto(r, peer)
    threading.Thread(target=loop, daemon=True).start()


def serve(argv):
    die_with_parent(int(argv[0]))
    ports, names = [], None
    it = iter(argv[1:])
    for a in it:
        if a == "--tcp":
            ports = [int(p) for p in next(it).split(",")]
        elif a == "--dns":
            names = json.loads(next(it))
    for p in ports:
        srv = _TCPServer(("0.0.0.0", p), _Banner)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    if names:
        _serve_dns(names)
    print("READY", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:
        time.sleep(3600)


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "serve":
    serve(sys.argv[2:])
