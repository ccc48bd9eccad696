"""End-to-end: what a bound host's connection carries besides one request at a time
(docs/network.md, "Header bindings"), in the network lab of tests/e2e/netlab.py: pipelined
requests (sent in one TLS write, before any response) each reach the origin checked and with the
bound header, come back in order, and each gets its own entry in the network log with its own
status; a request refused behind others is answered after their responses; a response that
comes before its request's body is sent leaves the connection going on; a response whose
last bytes could begin the bound value is not held back on a kept-alive connection; a WebSocket
handshake goes out with the bound header, and after its 101 both directions are relayed, the
value still masked in what comes back and a message ending in the value's first bytes not held
back, with a handshake by hand and with node's WebSocket client; a handshake the origin turns
down leaves HTTP going on; an HTTP/2-capable client falls
back to HTTP/1.1 and an HTTP/2-only one is refused with the reason in the log. Attacks on the
relay: the value echoed in an interim head, the final head, a Location, a trailer and a chunked
body whose chunks cut it is masked everywhere, the body as the client decodes it included;
chunk lines clients read (whitespace before an extension, LF alone) are re-framed and masked,
their trailer section ending in CRLF; chunked with a Content-Length, or after another coding,
is re-chunked and the head loses the length; framing clients could read otherwise (two
Transfer-Encoding lines) or a chunk no client reads ends the connection instead of going raw,
with the request's one entry in the log saying why, and a body cut after the value's first
bytes stays in the helper's framing; a body that ends with a reset of the origin's connection
does not end with a close_notify; a head sent a byte at a time costs the helper
its length, not its square, and a response of one-byte chunks a few TLS records, not one each.
One sandbox serves the module; each test names its own paths."""
import json
import os
import subprocess
import unittest

from netlab import API, TLS_SERVE, Lab, in_lab, make_pki, skip_unless_lab, start_origin
from nsbox_test import NSBOX, Dirs, wait_for

PORT = 8446
NAME = "api.lab.test"
SECRET = "ghp_pipeS3cr3tVALUE0123456789ab"
BEARER = "Bearer " + SECRET

# WebSocket frames (RFC 6455 5.2), for the origin and the client inside alike
WS = r"""
import base64, hashlib, os, struct
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
def ws_accept(key):
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
def ws_frame(op, data, masked):
    n = len(data)
    head = bytes([0x80 | op])
    bit = 0x80 if masked else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 65536:
        head += bytes([bit | 126]) + struct.pack(">H", n)
    else:
        head += bytes([bit | 127]) + struct.pack(">Q", n)
    if not masked:
        return head + data
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(data))
def ws_read(f):
    h = f.read(2)
    if len(h) < 2:
        return None, b""
    n = h[1] & 0x7f
    if n == 126:
        n = struct.unpack(">H", f.read(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", f.read(8))[0]
    key = f.read(4) if h[1] & 0x80 else b"\0\0\0\0"
    data = f.read(n)
    return h[0] & 0x0f, bytes(b ^ key[i % 4] for i, b in enumerate(data))
"""

ORIGIN = r"""
import http.server, json, socket, ssl, sys, threading, time
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def record(self):
        rec = {"method": self.command, "path": self.path, "peer": self.client_address[1],
               "headers": [[k, v] for k, v in self.headers.items()]}
        with lock, open(sys.argv[5], "a") as f:
            f.write(json.dumps(rec) + "\n")
        return json.dumps(rec).encode()
    def reply(self):
        body = self.record()
        # /TEST/KIND/ARGS: KIND says how to answer
        p = self.path.split("/")
        kind, args = (p[2], p[3:]) if len(p) > 2 else ("", [])
        if kind == "ws":  # /TEST/ws
            return self.websocket(body)
        if kind == "everywhere":  # everywhere/N: the value in every place a response has
            return self.everywhere(body, int(args[0]))
        if kind == "framed":  # framed/SHAPE: a chunked body framed by hand
            return self.framed(body, args[0], args[1:])
        if kind == "ends":  # ends/HOW: a body that ends with the connection
            return self.ends(args[0])
        if kind == "slow":  # slow/MS/STATUS: answered late
            time.sleep(int(args[0]) / 1000)
            kind, args = "status", args[1:]
        status = (int(args[0]) if kind in ("status", "chunked") else
                  403 if kind == "ws-refused" else 200)
        if kind == "tail":  # a body whose last bytes begin the bound value
            body = b"the end is " + sys.argv[6].encode()[:5]
        if kind == "early":  # answered before the request's body is read, as a 401 often is
            status = 401
        self.send_response(status)
        if kind == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            half = len(body) // 2
            for piece in (body[:half], body[half:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\nX-Trailer: t\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        if kind == "early":  # then the body is read and dropped
            self.wfile.flush()
            self.rfile.read(int(self.headers["Content-Length"]))
    def everywhere(self, body, n):
        # the bound value as the origin read it, in an interim response, the final head (a
        # field and a redirect's Location), a chunked body cut into chunks of n bytes (the
        # value across several of them) and a trailer
        value = self.headers["Authorization"]
        self.send_response_only(103)
        self.send_header("X-Echo", value)
        self.end_headers()
        self.send_response(302)
        self.send_header("X-Echo", value)
        self.send_header("Location", "/next?v=" + value.replace(" ", "%20"))
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(0, len(body), n):
            piece = body[i:i + n]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\nX-Echo: %s\r\n\r\n" % value.encode())
    def framed(self, body, shape, args):
        # the request as the origin read it (the bound value in it) cut into chunks of 3 bytes,
        # in framings clients read (bws, lf; tecl with a Content-Length that chunked overrides,
        # gzte with chunked the last of two codings) or frame otherwise than a strict reader
        # (twote), a chunk no client reads (badchunk), a body cut before its last chunk and
        # after the value's first bytes (cut), and a body of one-byte chunks (tiny/N)
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
        size, eol = b"%x", b"\r\n"
        if shape == "bws":
            size = b"%x \t;e=1"
        if shape == "lf":
            eol = b"\n"
        if shape == "twote":
            head += b"Transfer-Encoding: identity\r\n"
        if shape == "tecl":
            head += b"Content-Length: %d\r\n" % len(body)
        if shape == "gzte":
            head = head.replace(b"chunked", b"gzip, chunked")
        pieces = [body[i:i + 3] for i in range(0, len(body), 3)]
        if shape == "badchunk":
            pieces.insert(1, None)
        if shape == "cut":
            pieces = [b"the end is " + sys.argv[6].encode()[:5]]
        if shape == "tiny":
            pieces = [b"%d" % (i % 10) for i in range(int(args[0]))]
        self.wfile.write(head + b"\r\n")
        self.wfile.flush()
        out = b"".join(b"zz\r\n" if p is None else (size % len(p)) + eol + p + eol
                       for p in pieces)
        if shape != "cut":
            out += b"0" + eol + eol
        self.wfile.write(out)
        self.wfile.flush()
        self.close_connection = True
    def ends(self, how):
        # a body with neither length nor chunks, its end the connection's: closed with TLS's
        # close_notify (clean), or reset (SO_LINGER 0) once what was sent has had time to go
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b"the body so far")
        self.wfile.flush()
        self.close_connection = True
        if how == "clean":
            try:
                self.connection.unwrap()
            except (OSError, ValueError):
                pass  # the helper closes without answering the close_notify
            return
        time.sleep(1)
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    def websocket(self, head):
        # the handshake by hand, then an echo: "headers" is answered with the handshake's head
        # as the origin read it (the bound value in it)
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", ws_accept(self.headers["Sec-WebSocket-Key"]))
        self.end_headers()
        self.wfile.flush()
        while True:
            op, data = ws_read(self.rfile)
            if op is None or op == 8:
                if op == 8:
                    self.wfile.write(ws_frame(8, b"", False))
                break
            reply = (head if data == b"headers" else
                     b"the end is " + sys.argv[6].encode()[:5] if data == b"tail" else
                     b"echo:" + data)
            self.wfile.write(ws_frame(op, reply, False))
            self.wfile.flush()
        self.close_connection = True
    do_GET = do_POST = do_HEAD = reply
    def log_message(self, *a):
        pass
""" + WS + TLS_SERVE

# Responses read one after the other from one stream (http.client closes the file it read a
# response from: this one stays open)
READER = r"""
class Keep:
    def __init__(self, f): self.f = f
    def __getattr__(self, n): return getattr(self.f, n)
    def close(self): pass
class Sock:
    def __init__(self, f): self.f = Keep(f)
    def makefile(self, mode): return self.f
"""

# Inside the sandbox: a verified TLS connection to the bound host (argv[1], argv[2]), and all that
# comes on one until it closes.
TLSCONN = r"""
import json, socket, ssl, sys
name, port = sys.argv[1], int(sys.argv[2])
def connect():
    return ssl.create_default_context().wrap_socket(
        socket.create_connection((name, port), timeout=60), server_hostname=name)
def read_all(s):
    raw = b""
    while True:
        d = s.recv(65536)
        if not d:
            return raw
        raw += d
"""

# Inside the sandbox: the requests given as JSON [[method, path, extra header lines], ...] in one
# write on one TLS connection, then everything read to the end and parsed in order.
PIPELINE = READER + TLSCONN + r"""
import http.client, io
reqs = json.loads(sys.argv[3])
s = connect()
s.sendall(b"".join(("%s %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: mine\r\n%s\r\n"
                    % (m, p, name, port, extra)).encode() for m, p, extra in reqs))
raw = read_all(s)
f = io.BytesIO(raw)
out = []
for m, p, extra in reqs:
    if f.tell() == len(raw):
        break
    r = http.client.HTTPResponse(Sock(f), method=m)
    r.begin()
    out.append([r.status, r.read().decode(errors="replace")])
print(json.dumps({"bytes": len(raw), "responses": out}))
"""

# Inside the sandbox: a WebSocket session, then a handshake the origin turns down followed by a
# plain request on the same connection.
WSCLIENT = WS + READER + r"""
import http.client, json, socket, ssl, sys
name, port = sys.argv[1], int(sys.argv[2])
ctx = ssl.create_default_context()
def handshake(path):
    s = ctx.wrap_socket(socket.create_connection((name, port), timeout=20), server_hostname=name)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nAuthorization: mine\r\n\r\n"
               % (path, name, port, key)).encode())
    return s, key
out = {}
s, key = handshake("/ws/ws")
f = s.makefile("rb")
out["status"] = f.readline().decode().strip()
head = {}
while True:
    line = f.readline().decode().strip()
    if not line:
        break
    k, _, v = line.partition(":")
    head[k.strip().lower()] = v.strip()
out["accept_ok"] = head.get("sec-websocket-accept") == ws_accept(key)
blob = os.urandom(200000)
s.sendall(ws_frame(1, b"hello", True))
out["echo"] = ws_read(f)[1].decode()
s.sendall(ws_frame(1, b"headers", True))
out["headers"] = ws_read(f)[1].decode()
s.sendall(ws_frame(1, b"tail", True))
out["tail"] = ws_read(f)[1].decode()
s.sendall(ws_frame(2, blob, True))
op, data = ws_read(f)
out["blob_ok"] = op == 2 and data == b"echo:" + blob
s.sendall(ws_frame(8, b"", True))
out["close_op"] = ws_read(f)[0]
out["eof"] = f.read() == b""
s.close()
# turned down: a 403 with a body, then HTTP on the same connection
s, key = handshake("/ws/ws-refused")
s.sendall(("GET /ws/after-refused HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n"
           % (name, port)).encode())
f = s.makefile("rb")
r = http.client.HTTPResponse(Sock(f), method="GET")
r.begin()
r.read()
out["refused_status"] = r.status
r = http.client.HTTPResponse(Sock(f), method="GET")
r.begin()
out["after"] = [r.status, json.loads(r.read())["path"]]
print(json.dumps(out))
"""

# Inside the sandbox: a response whose last bytes begin the bound value, on a connection kept
# alive: the client reads it whole (Content-Length), then asks again on the same connection.
TAIL = r"""
import http.client, json, ssl, sys
c = http.client.HTTPSConnection(sys.argv[1], int(sys.argv[2]), timeout=10,
                                context=ssl.create_default_context())
c.request("GET", "/tail/tail")
first = c.getresponse().read().decode()
c.request("GET", "/tail/status/200")
second = json.loads(c.getresponse().read())["path"]
print(json.dumps([first, second]))
"""

# Inside the sandbox: a POST answered before its body is sent, then its body, then another
# request on the same connection.
EARLY = READER + r"""
import http.client, json, socket, ssl, sys
name, port = sys.argv[1], int(sys.argv[2])
s = ssl.create_default_context().wrap_socket(socket.create_connection((name, port), timeout=20),
                                             server_hostname=name)
f = s.makefile("rb")
s.sendall(b"POST /early/early HTTP/1.1\r\nHost: %s:%d\r\nContent-Length: 300000\r\n\r\n"
          % (name.encode(), port))
r = http.client.HTTPResponse(Sock(f), method="POST")
r.begin()
r.read()
first = r.status
s.sendall(b"x" * 300000)
s.sendall(b"GET /early/status/200 HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n"
          % (name.encode(), port))
r = http.client.HTTPResponse(Sock(f), method="GET")
r.begin()
print(json.dumps([first, r.status, json.loads(r.read())["path"]]))
"""

# Inside the sandbox: a client that offers only h2 in ALPN.
H2ONLY = r"""
import socket, ssl, sys
ctx = ssl.create_default_context()
ctx.set_alpn_protocols(["h2"])
try:
    ctx.wrap_socket(socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10),
                    server_hostname=sys.argv[1])
    print("connected")
except (ssl.SSLError, OSError) as ex:
    print("refused", type(ex).__name__)
"""

# Inside the sandbox: one request (argv[3], a path) with Connection: close; the raw bytes that
# came back, and the chunked body as a client decodes it.
RAWCHUNKED = TLSCONN + r"""
s = connect()
s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
           % (sys.argv[3], name)).encode())
raw = read_all(s)
rest = raw.split(b"\r\n\r\n", 2)[2]  # after the 103's head and the final one
body = b""
while True:
    line, rest = rest.split(b"\r\n", 1)
    size = int(line.split(b";")[0], 16)
    if not size:
        break
    body, rest = body + rest[:size], rest[size + 2:]
print(json.dumps({"raw": raw.decode(errors="replace"), "body": body.decode(errors="replace"),
                  "trailers": rest.decode(errors="replace")}))
"""

# Inside the sandbox: a head of nearly 32 KiB sent a byte at a time, each byte its own TLS
# record (one write each), then the response's status line.
BYTEWISE = TLSCONN + r"""
s = connect()
head = ("GET /bytewise/status/200 HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n" % name +
        "".join("X-%d: %s\r\n" % (i, "a" * 400) for i in range(75)) + "\r\n").encode()
for b in head:
    s.sendall(bytes([b]))
data = read_all(s)
print(json.dumps({"bytes": len(head), "status": data.split(b"\r\n")[0].decode()}))
"""

# Inside the sandbox: one request (argv[3], a path) with Connection: close; the raw bytes that
# came back until the connection ended, and how: "close_notify", or the error of an end without
# it.
RAWGET = TLSCONN + r"""
ctx = ssl.create_default_context()
ctx.options &= ~getattr(ssl, "OP_IGNORE_UNEXPECTED_EOF", 0)  # set by some Pythons' defaults
s = ctx.wrap_socket(socket.create_connection((name, port), timeout=60), server_hostname=name,
                    suppress_ragged_eofs=False)
s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
           % (sys.argv[3], name)).encode())
raw, end = b"", "close_notify"
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        raw += d
except OSError as ex:
    end = type(ex).__name__
print(json.dumps({"raw": raw.decode("latin-1"), "end": end}))
"""

# Inside the sandbox: the same, over TLS in memory so that the records that came after the
# handshake can be counted; the body as http.client decodes it.
RECORDS = READER + r"""
import http.client, io, json, socket, ssl, sys
name, port = sys.argv[1], int(sys.argv[2])
raw = socket.create_connection((name, port), timeout=60)
inc, outg = ssl.MemoryBIO(), ssl.MemoryBIO()
tls = ssl.create_default_context().wrap_bio(inc, outg, server_hostname=name)
wire, records = b"", 0
def send():
    raw.sendall(outg.read())
def more():
    global wire, records
    d = raw.recv(65536)
    inc.write(d) if d else inc.write_eof()
    wire += d
    while len(wire) >= 5 and len(wire) >= 5 + int.from_bytes(wire[3:5], "big"):
        records += wire[0] == 23  # application data (TLS 1.3 hides all types behind it)
        wire = wire[5 + int.from_bytes(wire[3:5], "big"):]
    return d
while True:
    try:
        tls.do_handshake()
        break
    except ssl.SSLWantReadError:
        send()
        more()
send()
records = 0
tls.write(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
           % (sys.argv[3], name)).encode())
send()
got = b""
while True:
    try:
        d = tls.read(65536)
        if not d:
            break
        got += d
    except ssl.SSLWantReadError:
        if not more():
            break
    except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
        break
r = http.client.HTTPResponse(Sock(io.BytesIO(got)), method="GET")
r.begin()
print(json.dumps({"records": records, "body": r.read().decode()}))
"""


def dechunk(body):
    """A chunked body read strictly (CRLF, no extensions), as the helper frames it: its data,
    whether its last chunk came, and what could not be read (the trailer section after it)."""
    data = b""
    while True:
        line, sep, rest = body.partition(b"\r\n")
        if not sep or not line or any(c not in b"0123456789abcdef" for c in line):
            return data, False, body
        n = int(line, 16)
        if not n:
            return data, True, rest
        if rest[n:n + 2] != b"\r\n":
            return data, False, body
        data, body = data + rest[:n], rest[n + 2:]


lab = pki = received = dirs = sid = None


def nsbox(*args, timeout=120):
    env = dirs.env({"NSBOX_RESOLV_CONF": lab.resolv, "BOUND_TOKEN": BEARER,
                    "NSBOX_CONFIG": os.path.join(pki, "config.json")})
    return subprocess.run(in_lab(lab, os.path.join(pki, "hosts"), [NSBOX] + list(args)),
                          capture_output=True, timeout=timeout, env=env)


def setUpModule():
    global lab, pki, received, dirs, sid
    skip_unless_lab("openssl", "curl")
    try:
        lab = Lab()
    except (subprocess.CalledProcessError, RuntimeError) as ex:
        raise unittest.SkipTest(f"cannot build the network lab here: {ex}")
    pki = lab.subdir("pki")
    make_pki(pki, (NAME,))
    received = os.path.join(pki, "received.jsonl")
    with open(os.path.join(pki, "hosts"), "w") as f:
        f.write(f"127.0.0.1\tlocalhost\n{API}\t{NAME}\n")
    with open(os.path.join(pki, "config.json"), "w") as f:
        json.dump({"pool": {"size": 0},
                   "network": {"upstream_ca": os.path.join(pki, "ca.pem")}}, f)
    for n in ("hosts", "config.json"):
        os.chmod(os.path.join(pki, n), 0o644)
    try:
        start_origin(lab, ORIGIN, API, PORT, pki, received, BEARER)
        dirs = Dirs()
        r = nsbox("create", "--network", f"allow={NAME}:{PORT}", "--header-binding",
                  f"{NAME}:{PORT}:Authorization=env:BOUND_TOKEN")
        if r.returncode != 0:
            raise RuntimeError(f"nsbox create: {r.stderr.decode()}")
        sid = r.stdout.decode().strip()
    except BaseException:
        tearDownModule()
        raise


def tearDownModule():
    if sid:
        nsbox("rm", sid)
    if dirs:
        dirs.cleanup()
    if lab:
        lab.cleanup()


def _q(s):
    return "'" + s.replace("'", "'\"'\"'") + "'"


class BoundStreams(unittest.TestCase):
    maxDiff = None

    def inside(self, script, *args):
        r = nsbox("exec", sid, "--", "python3", "-c", script, NAME, str(PORT), *args)
        self.assertEqual(r.returncode, 0, r.stderr.decode() + r.stdout.decode())
        return json.loads(r.stdout)

    def received(self, prefix):
        with open(received) as f:
            recs = [json.loads(line) for line in f if line.strip()]
        return [r for r in recs if r["path"].startswith(prefix)]

    def log(self, prefix, count):
        """The network log's entries of requests whose path begins with prefix (or refused
        ones, whose entries have no path, when prefix is None), once count of them are there:
        an entry is written when its response ends."""
        def entries():
            r = nsbox("logs", "--network", sid)
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            self.assertNotIn(SECRET, r.stdout.decode())
            log = [json.loads(line) for line in r.stdout.decode().splitlines()]
            return [e for e in log if (e.get("path") or "").startswith(prefix or "\0") or
                    (prefix is None and e["verdict"] == "refused")]
        wait_for(lambda: len(entries()) >= count, 15)
        return entries()

    def auth(self, rec):
        return [v for k, v in rec["headers"] if k.lower() == "authorization"]

    def test_pipelined_requests_each_get_their_own_status(self):
        # the first answer is late: the four after it are at the helper (and at the origin)
        # before any response has begun
        reqs = [["GET", "/pipe/slow/300/201", ""], ["GET", "/pipe/status/404", ""],
                ["HEAD", "/pipe/status/200", ""], ["GET", "/pipe/chunked/202", ""],
                ["GET", "/pipe/status/203", "Connection: close\r\n"]]
        out = self.inside(PIPELINE, json.dumps(reqs))
        # the sandbox: each response in order, bodies whole (the origin echoes the head it read)
        self.assertEqual([st for st, _ in out["responses"]], [201, 404, 200, 202, 203])
        paths = [json.loads(body)["path"] if body else None for _, body in out["responses"]]
        self.assertEqual(paths, ["/pipe/slow/300/201", "/pipe/status/404", None,
                                 "/pipe/chunked/202", "/pipe/status/203"])
        for _, body in out["responses"]:
            self.assertNotIn(SECRET, body)
        # the origin: every request checked and rewritten, exactly the bound header each
        recs = self.received("/pipe/")
        self.assertEqual([(r["method"], r["path"]) for r in recs], [(m, p) for m, p, _ in reqs])
        for r in recs:
            self.assertEqual(self.auth(r), [BEARER], r)
        self.assertEqual(len({r["peer"] for r in recs}), 1)  # one connection upstream too
        # the log: one entry per request, in order, each with its own response's status and
        # bytes (together, what the sandbox received)
        log = self.log("/pipe/", len(reqs))
        self.assertEqual([(e["verdict"], e["method"], e["path"], e.get("status")) for e in log],
                         [("bound", m, p, st) for (m, p, _), st in
                          zip(reqs, [201, 404, 200, 202, 203])])
        self.assertEqual(sum(e["bytes_down"] for e in log), out["bytes"])
        for e in log:
            self.assertGreater(e["bytes_up"], 0, e)
            self.assertGreater(e["bytes_down"], 0, e)
        self.assertEqual(sorted(e["seq"] for e in log), [e["seq"] for e in log])

    def test_request_refused_behind_others_is_answered_after_them(self):
        reqs = [["GET", "/behind/slow/300/200", ""],
                ["TRACE", "/behind/refused", ""],
                ["GET", "/behind/never", ""]]
        out = self.inside(PIPELINE, json.dumps(reqs))
        statuses = [st for st, _ in out["responses"]]
        self.assertEqual(statuses, [200, 405], out)  # the first answer whole, then the refusal
        self.assertEqual(json.loads(out["responses"][0][1])["path"], "/behind/slow/300/200")
        self.assertIn("TRACE", out["responses"][1][1])
        self.assertEqual([r["path"] for r in self.received("/behind/")], ["/behind/slow/300/200"])
        log = self.log("/behind/", 1)
        self.assertEqual([(e["path"], e["status"]) for e in log], [("/behind/slow/300/200", 200)])

    def test_response_before_the_request_body_ends(self):
        # the origin answers (401) before it reads the body; the body follows, then a request
        # on the same connection: the entry waits for the body, the connection goes on
        self.assertEqual(self.inside(EARLY), [401, 200, "/early/status/200"])
        log = self.log("/early/", 2)
        self.assertEqual([(e["method"], e["path"], e["status"]) for e in log],
                         [("POST", "/early/early", 401), ("GET", "/early/status/200", 200)])
        self.assertGreater(log[0]["bytes_up"], 300000)
        self.assertEqual([self.auth(r) for r in self.received("/early/")], [[BEARER]] * 2)

    def test_tail_that_begins_the_value_is_not_held_back(self):
        # kept alive, the response's end is its last byte: a relay that waited for more bytes
        # to tell whether "Beare" begins the value would leave the client waiting (timeout)
        first, second = self.inside(TAIL)
        self.assertEqual((first, second), ("the end is " + BEARER[:5], "/tail/status/200"))

    def test_value_echoed_in_every_part_of_a_response_is_masked(self):
        # an interim head, the final head, a Location, a trailer, and a chunked body cut into
        # chunks of 7 bytes: the value crosses chunk boundaries, which a client's decoding
        # removes, so the masking must see the body's data as one stream
        for n in (7, 1, 4096):
            out = self.inside(RAWCHUNKED, f"/every{n}/everywhere/{n}")
            self.assertNotIn(SECRET, out["raw"])
            self.assertNotIn(SECRET, out["body"], out["raw"])
            self.assertIn("*" * len(SECRET), out["body"])
            self.assertEqual(json.loads(out["body"].replace("*", "x"))["path"],
                             f"/every{n}/everywhere/{n}")
            self.assertTrue(out["raw"].startswith("HTTP/1.1 103 "), out["raw"][:200])
            self.assertGreaterEqual(out["raw"].count("*" * len(SECRET)), 4, out["raw"])
            self.assertIn("X-Echo: " + "*" * len(BEARER), out["trailers"])
        log = self.log("/every", 3)
        self.assertEqual(sorted((e["path"], e["status"]) for e in log),
                         [(f"/every{n}/everywhere/{n}", 302) for n in (1, 4096, 7)])

    def framed(self, path):
        """The raw bytes of one request's answer: its head, and its body read strictly."""
        raw = self.inside(RAWGET, path)["raw"].encode("latin-1")
        self.assertNotIn(SECRET.encode(), raw)
        head, _, body = raw.partition(b"\r\n\r\n")
        return raw, head, dechunk(body)

    def failed(self, needle):
        """The log's "failed" entries whose reason holds needle, once one is there."""
        def entries():
            r = nsbox("logs", "--network", sid)
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            log = [json.loads(line) for line in r.stdout.decode().splitlines()]
            return [e for e in log if e["verdict"] == "failed" and needle in e.get("reason", "")]
        wait_for(lambda: entries(), 15)
        return entries()

    def test_chunk_framing_clients_read_is_masked_and_reframed(self):
        # whitespace before a chunk extension (RFC 9112's BWS) and LF alone ending chunk lines,
        # which http.client and curl read: the body goes in the helper's chunks, the value the
        # origin's chunks cut masked, since relayed as they came they would be joined again by
        # the client's decoding after the masking saw them apart; the empty trailer section
        # ends with the helper's CRLF, not the origin's LF
        for shape in ("bws", "lf"):
            raw, head, (data, complete, rest) = self.framed(f"/framed-{shape}/framed/{shape}")
            self.assertTrue(head.startswith(b"HTTP/1.1 200 "), raw[:300])
            self.assertTrue(complete, raw[-300:])
            self.assertEqual(rest, b"\r\n", raw[-300:])
            self.assertNotIn(SECRET.encode(), data)
            self.assertIn(b"*" * len(SECRET), data)
            self.assertEqual(json.loads(data.replace(b"*", b"x"))["path"],
                             f"/framed-{shape}/framed/{shape}")

    def test_chunked_overrides_a_length_and_other_codings(self):
        # chunked with a Content-Length (RFC 9112 6.3: chunked frames the body, and the length
        # goes from a message passed on), or the last of two codings: the body comes in the
        # helper's chunks, masked, and the head the client sees has no Content-Length
        for shape, coding in (("tecl", b"Transfer-Encoding: chunked"),
                              ("gzte", b"Transfer-Encoding: gzip, chunked")):
            path = f"/framed-{shape}/framed/{shape}"
            raw, head, (data, complete, rest) = self.framed(path)
            self.assertTrue(head.startswith(b"HTTP/1.1 200 "), raw[:400])
            self.assertIn(coding, head.split(b"\r\n"), head)
            self.assertNotIn(b"content-length", head.lower(), head)
            self.assertTrue(complete, raw[-300:])
            self.assertEqual(rest, b"\r\n", raw[-300:])
            self.assertIn(b"*" * len(SECRET), data)
            self.assertEqual(json.loads(data.replace(b"*", b"x"))["path"], path)
            self.assertEqual([(e["verdict"], e["status"]) for e in self.log(path, 1)],
                             [("bound", 200)])

    def test_ambiguous_framing_ends_the_connection(self):
        # two Transfer-Encoding lines (chunked, then identity: http.client takes the first and
        # decodes the chunks, a reader that takes the last relays them as they came, the value
        # they cut joined again by the client): the client gets no body, and the request's one
        # entry in the log says why
        path, why = "/framed-twote/framed/twote", "more than one Transfer-Encoding line"
        raw, head, _ = self.framed(path)
        self.assertEqual(raw.partition(b"\r\n\r\n")[2], b"", raw[:400])
        self.assertEqual([(e["method"], e["path"]) for e in self.failed(why)], [("GET", path)])
        self.assertEqual([e["verdict"] for e in self.log(path, 1)], ["failed"])

    def test_body_that_ends_with_a_reset_does_not_look_complete(self):
        # a body framed by the connection's end: the helper ends the sandbox's TLS with a
        # close_notify only when the upstream did, so that a client sees a reset or a
        # truncation as one, not as the body's end
        out = self.inside(RAWGET, "/ends-clean/ends/clean")
        self.assertTrue(out["raw"].endswith("\r\n\r\nthe body so far"), out["raw"])
        self.assertEqual(out["end"], "close_notify")
        out = self.inside(RAWGET, "/ends-reset/ends/reset")
        self.assertTrue(out["raw"].startswith("HTTP/1.1 200 "), out["raw"])
        self.assertNotEqual(out["end"], "close_notify", out["raw"])

    def test_chunk_no_client_reads_ends_the_connection(self):
        # the body's first chunk, then one that cannot be read: the client gets the first in the
        # helper's framing and then the connection's end, not the rest as it came
        raw, head, (data, complete, rest) = self.framed("/framed-bad/framed/badchunk")
        self.assertFalse(complete)
        self.assertEqual(rest, b"", raw[-300:])
        self.assertTrue(data.startswith(b'{"m'), raw[:400])
        self.assertTrue(self.failed("malformed chunk size"))

    def test_body_cut_after_the_values_first_bytes_stays_framed(self):
        # the origin ends the stream inside a chunked body whose last bytes begin the value: the
        # held-back tail goes in a chunk of the helper's own, the client sees a short body
        raw, head, (data, complete, rest) = self.framed("/framed-cut/framed/cut")
        self.assertEqual((data, complete, rest), (b"the end is " + BEARER[:5].encode(), False,
                                                  b""), raw)

    def test_tiny_chunks_cost_few_records(self):
        # 30000 one-byte chunks: written as the helper's chunks, a few per read of the upstream,
        # not a TLS record (and a write) each, which costs the helper, outside the sandbox's
        # cgroup, its CPU per chunk
        out = self.inside(RECORDS, "/framed-tiny/framed/tiny/30000")
        self.assertEqual(out["body"], "".join(str(i % 10) for i in range(30000)))
        self.assertLess(out["records"], 300, out["records"])

    def helper_cpu(self):
        """The CPU time (s) the sandbox's egress helper has spent: the nsbox-egress child of
        its supervisor."""
        r = nsbox("inspect", sid)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        sup = str(json.loads(r.stdout)["supervisor_pid"])
        kids = subprocess.run(["pgrep", "-P", sup, "-x", "nsbox-egress"], capture_output=True,
                              text=True).stdout.split()
        self.assertEqual(len(kids), 1, kids)
        with open(f"/proc/{kids[0]}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def test_head_sent_a_byte_at_a_time_costs_the_helper_its_length(self):
        # the helper runs outside the sandbox's cgroup: a head of 32 KiB in one-byte TLS
        # records, read whole again at each byte, costs it a quarter of a second of CPU per
        # connection (0.04 s read once), as often as a sandbox likes
        before = self.helper_cpu()
        out = self.inside(BYTEWISE)
        spent = self.helper_cpu() - before
        self.assertEqual(out["status"], "HTTP/1.1 200 OK", out)
        self.assertGreater(out["bytes"], 30000)
        self.assertLess(spent, 0.12, f"the helper spent {spent:.2f} s of CPU")
        self.assertEqual([r["path"] for r in self.received("/bytewise/")],
                         ["/bytewise/status/200"])

    def test_websocket_session_with_the_bound_header(self):
        out = self.inside(WSCLIENT)
        self.assertEqual(out["status"], "HTTP/1.1 101 Switching Protocols", out)
        self.assertTrue(out["accept_ok"], out)
        self.assertEqual(out["echo"], "echo:hello")
        self.assertTrue(out["blob_ok"])  # 200 KB both ways, unchanged
        self.assertEqual((out["close_op"], out["eof"]), (8, True))
        # the handshake's head as the origin read it, sent back in a frame: the value masked
        self.assertNotIn(SECRET, out["headers"])
        self.assertIn("*" * len(SECRET), out["headers"])
        self.assertEqual(json.loads(out["headers"].replace("*", "x"))["path"], "/ws/ws")
        # a message whose last bytes begin the value is not held until the next one
        self.assertEqual(out["tail"], "the end is " + BEARER[:5])
        # turned down, the handshake was an ordinary request: the next one is read and bound
        self.assertEqual(out["refused_status"], 403)
        self.assertEqual(out["after"], [200, "/ws/after-refused"])
        recs = self.received("/ws/")
        self.assertEqual([r["path"] for r in recs],
                         ["/ws/ws", "/ws/ws-refused", "/ws/after-refused"])
        for r in recs:
            self.assertEqual(self.auth(r), [BEARER], r)
        # one entry for the session, once it is over: its bytes are the session's
        log = self.log("/ws/", 3)
        # (two connections: their entries in either order)
        log.sort(key=lambda e: e["path"])
        self.assertEqual([(e["method"], e["path"], e["status"]) for e in log],
                         [("GET", "/ws/after-refused", 200), ("GET", "/ws/ws", 101),
                          ("GET", "/ws/ws-refused", 403)])
        self.assertGreater(log[1]["bytes_up"], 200000)
        self.assertGreater(log[1]["bytes_down"], 200000)

    def test_node_websocket_client(self):
        # a WebSocket client of the real world (node's, undici's): its own handshake, its
        # extensions offer, its masking of frames
        script = ("const ws = new WebSocket('wss://%s:%d/node/ws'); "
                  "ws.onopen = () => ws.send('from node'); "
                  "ws.onmessage = e => { console.log(e.data); ws.close(); }; "
                  "ws.onerror = e => { console.log('error', e.message); process.exit(1); };"
                  % (NAME, PORT))
        r = nsbox("exec", sid, "--", "node", "--experimental-websocket", "--no-warnings", "-e",
                  script)
        if b"bad option" in r.stderr:
            self.skipTest("this node has no WebSocket client (node 20.10 or later has one)")
        self.assertEqual((r.returncode, r.stdout.decode()), (0, "echo:from node\n"),
                         r.stderr.decode())
        recs = self.received("/node/")
        self.assertEqual([(r["path"], self.auth(r)) for r in recs], [("/node/ws", [BEARER])])
        self.assertEqual([(e["path"], e["status"]) for e in self.log("/node/", 1)],
                         [("/node/ws", 101)])

    def test_http2_clients(self):
        # curl can speak h2: it is offered http/1.1 and takes it
        r = nsbox("exec", sid, "--", "curl", "-sS", "--http2", "-o", "/dev/null", "-w",
                  "%{http_version} %{http_code}", f"https://{NAME}:{PORT}/h2/curl")
        self.assertEqual((r.returncode, r.stdout.decode()), (0, "1.1 200"), r.stderr.decode())
        self.assertEqual(self.auth(self.received("/h2/curl")[0]), [BEARER])
        # a client that speaks only h2 is refused at the handshake, and the log says why
        r = nsbox("exec", sid, "--", "python3", "-c", H2ONLY, NAME, str(PORT))
        self.assertEqual(r.stdout.decode().split()[0], "refused", r.stdout + r.stderr)
        log = self.log(None, 1)
        self.assertTrue(any("ALPN" in e.get("reason", "") and "HTTP/2" in e["reason"]
                            for e in log), log)


if __name__ == "__main__":
    unittest.main()
