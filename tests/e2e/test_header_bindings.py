"""End-to-end: header bindings (docs/network.md, "Header bindings"), in the network lab of
tests/e2e/netlab.py. An HTTPS origin in the lab's upstream namespace, with a certificate of a
lab CA this module makes (openssl), records every request head it receives (in a file on the
host side) and echoes it back in its response. The egress helper checks the origin against
that CA through the config's "network.upstream_ca"; the sandbox trusts only its own CA, in its
system bundle. Checked: curl, Python's urllib, git clone, pip and node reach the bound host
with verified TLS and the origin receives exactly the bound header, also when the sandbox sent
its own; keep-alive; server-sent events are not held back; the echo does not carry the secret
back; Host != SNI, smuggling shapes, TRACE and absolute targets are refused with an HTTP error; a
header that CGI would take for the bound one (underscores for dashes) does not reach the origin;
the secret is nowhere inside the sandbox nor in inspect, the state directory or the host-side
processes' environments; the CA is name-constrained (critical) and has no key inside; with
network all the bound host is intercepted and the rest passes; an upstream that the host's
trust store does not vouch for is refused (502); libssl is loaded only with bindings; the
Python client's bindings; a bound host the network cannot reach fails creation; an OCI image
stored as shared layers (its root an overlay mount, not a directory) gets the bundle from its
own layers while the store's file stays as it was."""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import unittest

import oci_images
from netlab import (API, OTHER, TLS_SERVE, Lab, in_lab, make_pki, skip_unless_lab,
                    start_origin)
from nsbox_test import NSBOX, Dirs, wait_for

PORT = 8445
NAME = "api.lab.test"
SECRET = "ghp_s3cr3tVALUE0123456789abcdef"
BEARER = "Bearer " + SECRET

ORIGIN = r"""
import hashlib, http.server, json, os, ssl, sys, threading
lock = threading.Lock()
release = threading.Event()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def handle_one_request(self):
        super().handle_one_request()
    def sse(self):
        # an event, then nothing until /release is asked for: a relay that held the first
        # event back until the stream's end would leave the client waiting for ever
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        release.clear()
        self.wfile.write(b"data: one\n\n")
        self.wfile.flush()
        release.wait(30)
        self.wfile.write(b"data: two\n\n")
        self.wfile.flush()
        self.close_connection = True
    def static(self):
        # files below sys.argv[6]: a bare git repository (dumb HTTP) and a package index
        rel = self.path.split("?")[0][len("/static/"):]
        path = os.path.join(sys.argv[6], rel)
        if rel.endswith("/") or rel == "":
            path = os.path.join(path, "index.html")
        if ".." in rel.split("/") or not os.path.isfile(path):
            body, code = b"not found", 404
        else:
            body, code = open(path, "rb").read(), 200
        self.send_response(code)
        if path.endswith(".html"):
            self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def body(self):
        if (self.headers.get("Transfer-Encoding") or "").lower() != "chunked":
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""
        parts = []
        while True:
            size = int(self.rfile.readline().split(b";")[0], 16)
            if size == 0:
                self.rfile.readline()
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()
    def reply(self):
        if self.path == "/sse":
            return self.sse()
        if self.path == "/release":
            release.set()
        body = self.body()
        rec = {"method": self.command, "path": self.path, "peer": self.client_address[1],
               "headers": [[k, v] for k, v in self.headers.items()], "body_len": len(body),
               "sha256": hashlib.sha256(body).hexdigest()}
        with lock, open(sys.argv[5], "a") as f:
            f.write(json.dumps(rec) + "\n")
        if self.path.startswith("/static/"):
            return self.static()
        out = json.dumps(rec).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    do_GET = do_POST = do_PUT = reply
    def log_message(self, *a):
        pass
""" + TLS_SERVE

# Inside the sandbox: raw requests over TLS (the system bundle, verified), one per argument
# given as JSON: {"req": "<request head and body>"}; prints each response's status line and body.
RAW = r"""
import json, socket, ssl, sys
out = []
for a in sys.argv[2:]:
    ctx = ssl.create_default_context()
    try:
        s = ctx.wrap_socket(socket.create_connection((sys.argv[1], %d), timeout=10),
                            server_hostname=sys.argv[1])
        s.sendall(a.encode())
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
        head, _, body = data.partition(b"\r\n\r\n")
        out.append([head.split(b"\r\n")[0].decode(), body.decode(errors="replace")])
    except Exception as ex:
        out.append(["error", repr(ex)])
print(json.dumps(out))
""" % PORT

# Inside the sandbox: urllib (default context: the system bundle) and http.client keep-alive.
URLLIB = r"""
import http.client, json, ssl, sys, urllib.request
r = urllib.request.urlopen(urllib.request.Request(
    "https://%s:%d/urllib", headers={"Authorization": "Bearer mine"}), timeout=10)
first = r.read().decode()
c = http.client.HTTPSConnection("%s", %d, timeout=10, context=ssl.create_default_context())
bodies = []
for i in range(3):
    c.request("POST", "/keepalive/%%d" %% i, body=b"x" * 1000)
    bodies.append(c.getresponse().read().decode())
print(json.dumps({"urllib": first, "keepalive": bodies}))
""" % (NAME, PORT, NAME, PORT)

# Inside the sandbox: server-sent events keep their timing through the relay.
SSE = r"""
import http.client, ssl
ctx = ssl.create_default_context()
c = http.client.HTTPSConnection("%s", %d, timeout=20, context=ctx)
c.request("GET", "/sse")
r = c.getresponse()
first = r.fp.readline() + r.fp.readline()
d = http.client.HTTPSConnection("%s", %d, timeout=20, context=ctx)
d.request("GET", "/release")
d.getresponse().read()
print(repr(first), repr(r.read()))
""" % (NAME, PORT, NAME, PORT)

lab = None
pki = None
received = None


def make_www(www):
    """A bare git repository served over dumb HTTP and a package index with one wheel."""
    import zipfile
    src = os.path.join(www, "src")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run(git + ["init", "-q", src], check=True)
    with open(os.path.join(src, "README"), "w") as f:
        f.write("cloned through the egress helper\n")
    subprocess.run(git + ["-C", src, "add", "README"], check=True)
    subprocess.run(git + ["-C", src, "commit", "-q", "-m", "one"], check=True)
    subprocess.run(git + ["clone", "-q", "--bare", src, os.path.join(www, "repo.git")], check=True)
    subprocess.run(["git", "-C", os.path.join(www, "repo.git"), "update-server-info"], check=True)
    simple = os.path.join(www, "simple", "nsboxdemo")
    os.makedirs(simple)
    wheel = "nsboxdemo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(simple, wheel), "w") as z:
        z.writestr("nsboxdemo/__init__.py", "")
        z.writestr("nsboxdemo-1.0.dist-info/METADATA",
                   "Metadata-Version: 2.1\nName: nsboxdemo\nVersion: 1.0\n")
        z.writestr("nsboxdemo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: t\n"
                   "Root-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("nsboxdemo-1.0.dist-info/RECORD", "")
    with open(os.path.join(www, "simple", "index.html"), "w") as f:
        f.write('<a href="nsboxdemo/">nsboxdemo</a>\n')
    with open(os.path.join(simple, "index.html"), "w") as f:
        f.write(f'<a href="{wheel}">{wheel}</a>\n')
    subprocess.run(["chmod", "-R", "a+rX", www], check=True)


def setUpModule():
    global lab, pki, received
    skip_unless_lab("openssl", "curl")
    try:
        lab = Lab()
    except (subprocess.CalledProcessError, RuntimeError) as ex:
        raise unittest.SkipTest(f"cannot build the network lab here: {ex}")
    pki = lab.subdir("pki")
    make_pki(pki, (NAME, "other.lab.test"))
    received = os.path.join(pki, "received.jsonl")
    make_www(os.path.join(pki, "www"))
    with open(os.path.join(pki, "hosts"), "w") as f:
        f.write(f"127.0.0.1\tlocalhost\n{API}\t{NAME}\n{OTHER}\tother.lab.test\n")
    start_origin(lab, ORIGIN, API, PORT, pki, received, os.path.join(pki, "www"))


def tearDownModule():
    if lab:
        lab.cleanup()


class HeaderBindings(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.dirs = Dirs()
        open(received, "w").close()

    def tearDown(self):
        self.dirs.cleanup()

    def env(self, upstream_ca=True, allow_names=None):
        cfg = os.path.join(self.dirs.base, "config.json")
        # upstream_ca: True the lab CA, a str another file, False none (the host's store)
        ca = upstream_ca if isinstance(upstream_ca, str) else os.path.join(pki, "ca.pem")
        net = {"upstream_ca": ca} if upstream_ca else {}
        if allow_names:
            net["allow_names"] = allow_names
        with open(cfg, "w") as f:
            json.dump({"pool": {"size": 0}, "network": net}, f)
        os.chmod(cfg, 0o644)
        env = self.dirs.env({"NSBOX_RESOLV_CONF": lab.resolv})
        env["NSBOX_CONFIG"] = cfg
        env["BOUND_TOKEN"] = BEARER
        return env

    def nsbox(self, args, upstream_ca=True, timeout=120, allow_names=None, host_store=None,
              hosts=None):
        # host_store: a directory bound over the host's /etc/ssl/certs, in the private mount
        # namespace only (the host's trust store is never touched); hosts: another /etc/hosts
        cmd = in_lab(lab, hosts or os.path.join(pki, "hosts"), [NSBOX] + args, host_store)
        return subprocess.run(cmd, capture_output=True, timeout=timeout,
                              env=self.env(upstream_ca, allow_names))

    def assertNotVouchedFor(self, **kw):
        """A bound request whose upstream certificate the helper cannot verify: the sandbox
        gets a 502 that says why, the origin nothing."""
        out = self.run_in(f"allow={NAME}:{PORT}",
                          f"curl -sS https://{NAME}:{PORT}/x -w '\\n%{{http_code}}\\n'", **kw)
        self.assertIn("502", out)
        self.assertIn("certificate", out)
        self.assertEqual(self.received(), [])

    def run_in(self, network, script, upstream_ca=True, host_store=None, image=None):
        r = self.nsbox(["run"] + (["--image", image] if image else []) +
                       ["--network", network, "--header-binding",
                        f"{NAME}:{PORT}:Authorization=env:BOUND_TOKEN", "--", "sh", "-c",
                        script], upstream_ca=upstream_ca, host_store=host_store)
        self.assertEqual(r.returncode, 0, r.stderr.decode() + r.stdout.decode())
        return r.stdout.decode()

    def received(self):
        with open(received) as f:
            return [json.loads(line) for line in f if line.strip()]

    def auth_headers(self, rec):
        return [v for k, v in rec["headers"] if k.lower() == "authorization"]

    def test_curl_and_urllib_get_exactly_the_bound_header(self):
        allow = f"allow={NAME}:{PORT}"
        out = self.run_in(allow, f"curl -sS --fail-with-body https://{NAME}:{PORT}/curl "
                                 f"-H 'Authorization: Bearer mine' -H 'X-Other: kept'; echo; "
                                 "python3 -c " + _q(URLLIB))
        curl_line, py_line = out.strip().splitlines()
        recs = self.received()
        self.assertEqual([r["path"] for r in recs],
                         ["/curl", "/urllib", "/keepalive/0", "/keepalive/1", "/keepalive/2"])
        for r in recs:
            self.assertEqual(self.auth_headers(r), [BEARER], r)
        self.assertIn(["X-Other", "kept"], recs[0]["headers"])
        # three requests on one connection: one client port at the origin
        self.assertEqual(len({r["peer"] for r in recs[2:]}), 1)
        self.assertEqual([r["body_len"] for r in recs[2:]], [1000] * 3)
        # the origin echoed the head: the secret came back masked
        for text in (curl_line, py_line):
            self.assertNotIn(SECRET, text)
        self.assertIn("*" * len(SECRET), curl_line)
        self.assertEqual(json.loads(curl_line)["path"], "/curl")
        self.assertEqual(len(json.loads(py_line)["keepalive"]), 3)

    def test_a_header_named_with_underscores_does_not_reach_the_origin(self):
        # X_Api_Key is another header than X-Api-Key to HTTP, but the same one to an origin's
        # code behind CGI, WSGI or PHP (HTTP_X_API_KEY), which would see the sandbox's value
        # beside or instead of the bound one
        r = self.nsbox(["run", "--network", f"allow={NAME}:{PORT}", "--header-binding",
                        f"{NAME}:{PORT}:X-Api-Key=env:BOUND_TOKEN", "--", "curl", "-sS",
                        "-o", "/dev/null", f"https://{NAME}:{PORT}/underscores",
                        "-H", "X_Api_Key: mine", "-H", "x_api-KEY: mine too",
                        "-H", "X-Api-Keys: kept"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        [rec] = self.received()
        keys = [[k, v] for k, v in rec["headers"]
                if k.lower().replace("_", "-").startswith("x-api-key")]
        self.assertEqual(keys, [["X-Api-Keys", "kept"], ["X-Api-Key", BEARER]])

    def test_layered_oci_image_bundle_comes_from_its_mount(self):
        # A layered image's root is a detached overlay mount (rootfs/image.h mount_fd), its
        # directory in the store an empty mount point: a bundle read from the directory would
        # find nothing, and one written where it was read would change the shared layer.
        if not os.path.exists(oci_images.BUSYBOX) or not IMAGE_BUNDLE:
            self.skipTest("needs busybox-static (/bin/busybox) and the host's " + NSBOX_BUNDLE)
        archive = os.path.join(self.dirs.base, "curl-image.tar")
        oci_images.write_docker_save(archive, layers=[oci_images.layer1(), curl_layer(),
                                                      bundle_layer()], tag="t/bindcurl:1")
        r = self.nsbox(["image", "import", "-q", archive])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        store = os.path.join(self.dirs.data, "images")
        image_dir = [os.path.join(store, n) for n in os.listdir(store) if n.startswith("oci-")]
        self.assertEqual(len(image_dir), 1, os.listdir(store))
        # the layered form: a merged store's root is a plain directory, not the mount in question
        self.assertTrue(os.path.exists(os.path.join(image_dir[0], "layers")),
                        os.listdir(image_dir[0]))
        stored = oci_images.find_in_image(image_dir[0], NSBOX_BUNDLE)
        self.assertIsNotNone(stored)
        with open(stored, "rb") as f:
            self.assertEqual(f.read(), IMAGE_BUNDLE)
        where = oci_images.image_layers(image_dir[0]) + [image_dir[0]]
        before = tree_state(where)
        out = self.run_in(f"allow={NAME}:{PORT}",
                          f"curl -sS --fail-with-body https://{NAME}:{PORT}/layered "
                          f"-H 'Authorization: Bearer mine'; echo; echo BUNDLE; "
                          f"cat /{NSBOX_BUNDLE}", image="t/bindcurl:1")
        reply, _, inside = out.partition("\nBUNDLE\n")
        self.assertEqual(json.loads(reply)["path"], "/layered")
        self.assertEqual([(r["path"], self.auth_headers(r)) for r in self.received()],
                         [("/layered", [BEARER])])
        # the image's own bundle (not the host's), then the sandbox's CA
        self.assertTrue(inside.startswith(IMAGE_BUNDLE.decode()), inside[:300])
        ca = inside[len(IMAGE_BUNDLE):]
        self.assertEqual(ca.count("-----BEGIN CERTIFICATE-----"), 1, inside)
        subject = subprocess.run(["openssl", "x509", "-noout", "-subject"], input=ca.strip(),
                                 capture_output=True, text=True)
        self.assertIn("header bindings CA", subject.stdout, subject.stderr)
        # the store: every entry of the image's layers and directory as it was, the bundle's
        # bytes and inode included
        after = tree_state(where)
        self.assertEqual(sorted(p for p in before.keys() | after.keys()
                                if before.get(p) != after.get(p)), [])
        with open(stored, "rb") as f:
            self.assertEqual(f.read(), IMAGE_BUNDLE)

    def test_smuggling_shapes_and_host_mismatch_are_refused(self):
        h = f"Host: {NAME}\r\n"
        reqs = [
            "GET / HTTP/1.1\r\nHost: other.lab.test\r\n\r\n",
            f"POST / HTTP/1.1\r\n{h}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            f"POST / HTTP/1.1\r\n{h}Content-Length: 5\r\nContent-Length: 6\r\n\r\n",
            f"GET / HTTP/1.1\r\n{h}X-A: 1\r\n folded\r\n\r\n",
            f"TRACE / HTTP/1.1\r\n{h}\r\n",
            f"GET http://other.lab.test/ HTTP/1.1\r\n{h}\r\n",
            # hop-by-hop: an intermediary before the origin would drop the header so named
            f"GET / HTTP/1.1\r\n{h}Connection: close, authorization\r\n\r\n",
            f"POST / HTTP/1.1\r\n{h}Content-Length: 5\r\nConnection: Content-Length\r\n\r\n"
            "hello",
            # a second request hidden in the first one's body is read as a body, nothing more
            f"POST /first HTTP/1.1\r\n{h}Content-Length: 40\r\nConnection: close\r\n\r\n"
            "GET /hidden HTTP/1.1\r\nHost: x\r\n\r\nxxxxxxx",
        ]
        script = ("python3 -c " + _q(RAW) + f" {NAME} " + " ".join(_q(r) for r in reqs))
        out = json.loads(self.run_in(f"allow={NAME}:{PORT}", script))
        statuses = [o[0] for o in out]
        self.assertEqual(statuses[:6], ["HTTP/1.1 403 Forbidden", "HTTP/1.1 400 Bad Request",
                                        "HTTP/1.1 400 Bad Request", "HTTP/1.1 400 Bad Request",
                                        "HTTP/1.1 405 Method Not Allowed",
                                        "HTTP/1.1 400 Bad Request"])
        self.assertEqual(statuses[6:8], ["HTTP/1.1 400 Bad Request"] * 2)
        self.assertIn("Connection header names the bound header", out[6][1])
        self.assertIn("Connection header names Host, Content-Length", out[7][1])
        self.assertIn("another host than the TLS server name", out[0][1])
        self.assertIn("both Content-Length and Transfer-Encoding", out[1][1])
        self.assertIn("folding", out[3][1])
        paths = [r["path"] for r in self.received()]
        self.assertEqual(paths, ["/first"])  # nothing refused reached the origin

    def test_secret_is_nowhere_inside(self):
        script = (
            f"curl -sS -o /dev/null https://{NAME}:{PORT}/x; "
            f"for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do "
            f"  grep -l -F -a '{SECRET[:12]}''{SECRET[12:]}' $f 2>/dev/null; done; "
            f"grep -r -l -F '{SECRET[:12]}''{SECRET[12:]}' /etc /workspace /tmp /run /home "
            f"  /root 2>/dev/null; "
            f"echo BUNDLE; grep -c 'PRIVATE KEY' /etc/ssl/certs/ca-certificates.crt; "
            f"env | grep -E '^(SSL_CERT_FILE|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|PIP_CERT|"
            f"GIT_SSL_CAINFO|NODE_EXTRA_CA_CERTS)=' | sort")
        # the secret in pieces on the command line, so that the grep does not find itself
        out = self.run_in(f"allow={NAME}:{PORT}", script)
        found, _, rest = out.partition("BUNDLE\n")
        self.assertEqual(found.strip(), "")
        lines = rest.strip().splitlines()
        self.assertEqual(lines[0], "0")
        self.assertEqual(len(lines[1:]), 6, lines)
        for line in lines[1:]:
            self.assertTrue(line.endswith("=/etc/ssl/certs/ca-certificates.crt"), line)
        self.assertEqual(len(self.received()), 1)

    def test_ca_is_name_constrained_and_the_rest_untrusted(self):
        script = (
            # the sandbox's CA: the last certificate of its bundle
            "awk '/BEGIN CERT/{c=\"\"} {c=c $0 \"\\n\"} END{printf \"%s\", c}' "
            "/etc/ssl/certs/ca-certificates.crt > /tmp/ca.pem; "
            "python3 -c 'import ssl,json; "
            "print(json.dumps(ssl._ssl._test_decode_cert(\"/tmp/ca.pem\")))'; "
            "openssl x509 -in /tmp/ca.pem -noout -ext nameConstraints,basicConstraints "
            "2>/dev/null || echo no-openssl-inside; "
            # the neighbour name, with the origin's real certificate: not trusted inside
            f"curl -sS -o /dev/null --resolve other.lab.test:{PORT}:{API} "
            f"https://other.lab.test:{PORT}/ 2>&1 | head -1; true")
        out = self.run_in("all", script)
        cert = json.loads(out.splitlines()[0])
        self.assertIn("header bindings CA", str(cert["subject"]))
        if "no-openssl-inside" not in out:
            self.assertIn("X509v3 Name Constraints: critical", out)
            self.assertIn(f"DNS:{NAME}", out)
            self.assertIn("IP:0.0.0.0/0.0.0.0", out)
            self.assertIn("CA:TRUE", out)
        self.assertIn("SSL certificate problem", out)
        # checked on the host too, where openssl is known to be
        r = self.nsbox(["run", "--network", "all", "--header-binding",
                        f"{NAME}:{PORT}:Authorization=env:BOUND_TOKEN", "--", "sh", "-c",
                        "cat /etc/ssl/certs/ca-certificates.crt"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        last = r.stdout.decode().rsplit("-----BEGIN CERTIFICATE-----", 1)[1]
        text = subprocess.run(["openssl", "x509", "-noout", "-text"], capture_output=True,
                              input="-----BEGIN CERTIFICATE-----" + last, text=True).stdout
        self.assertIn("X509v3 Name Constraints: critical", text)
        self.assertIn(f"Permitted:\n                  DNS:{NAME}", text)

    def test_network_all_intercepts_the_bound_host_only(self):
        out = self.run_in("all", f"curl -sS https://{NAME}:{PORT}/all; echo; "
                                 f"getent hosts {NAME}; ip -4 route show default; "
                                 f"python3 -c 'import socket; s=socket.create_connection("
                                 f"(\"{OTHER}\", 80), timeout=5); print(s.recv(100).decode())'")
        lines = out.strip().splitlines()
        self.assertEqual(json.loads(lines[0])["path"], "/all")
        self.assertEqual(lines[1].split()[0], lines[2].split()[2])  # pinned to the gateway
        self.assertIn(OTHER, lines[3])  # the lab's banner: the rest passes as with all
        self.assertEqual([self.auth_headers(r) for r in self.received()], [[BEARER]])

    def test_git_pip_and_node(self):
        base = f"https://{NAME}:{PORT}/static"
        node = ("require('https').get('https://%s:%d/node', r => { let d = ''; "
                "r.on('data', c => d += c); r.on('end', () => console.log(JSON.parse(d).path)) })"
                % (NAME, PORT))
        out = self.run_in(f"allow={NAME}:{PORT}",
                          f"cd /tmp && git clone -q {base}/repo.git r && cat r/README && "
                          f"PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip download -q "
                          f"--no-deps --index-url {base}/simple/ -d dl nsboxdemo && ls dl && "
                          f"node -e {_q(node)}")
        self.assertEqual(out.strip().splitlines(), ["cloned through the egress helper",
                                                    "nsboxdemo-1.0-py3-none-any.whl", "/node"])
        recs = self.received()
        agents = {r["path"].split("/")[2] if r["path"].startswith("/static/") else r["path"]
                  for r in recs}
        self.assertEqual(agents, {"repo.git", "simple", "/node"})
        for r in recs:
            self.assertEqual(self.auth_headers(r), [BEARER], r["path"])

    def test_uploads_and_parallel_connections(self):
        # 50 MB with Content-Length and 50 MB chunked (curl -T - reads a pipe: chunked), their
        # checksums as the origin computed them; then 64 connections at once
        url = f"https://{NAME}:{PORT}"
        par = ("import concurrent.futures as f, json, urllib.request as u\n"
               "def get(i):\n"
               "    return json.loads(u.urlopen('%s/par/%%d' %% i, timeout=60).read())['path']\n"
               "with f.ThreadPoolExecutor(64) as ex:\n"
               "    print(sorted(ex.map(get, range(64))) == sorted('/par/%%d' %% i "
               "for i in range(64)))\n" % url)
        out = self.run_in(f"allow={NAME}:{PORT}",
                          "head -c 50000000 /dev/urandom > /workspace/up && sha256sum /workspace/up && "
                          f"curl -sS --data-binary @/workspace/up {url}/length && echo && "
                          f"cat /workspace/up | curl -sS -T - {url}/chunked && echo && "
                          "python3 -c " + _q(par))
        lines = out.strip().splitlines()
        digest = lines[0].split()[0]
        length, chunked = json.loads(lines[1]), json.loads(lines[2])
        self.assertEqual((length["body_len"], length["sha256"]), (50000000, digest))
        self.assertEqual((chunked["body_len"], chunked["sha256"]), (50000000, digest))
        self.assertIn(["Transfer-Encoding", "chunked"], chunked["headers"])
        self.assertEqual(lines[3], "True")
        recs = self.received()
        self.assertEqual(len(recs), 66)
        for r in recs:
            self.assertEqual(self.auth_headers(r), [BEARER], r["path"])

    def test_server_sent_events_are_not_held_back(self):
        out = self.run_in(f"allow={NAME}:{PORT}", "python3 -c " + _q(SSE))
        self.assertEqual(out.strip(), "b'data: one\\n\\n' b'data: two\\n\\n'")

    def test_upstream_not_vouched_for_is_refused(self):
        # without upstream_ca the helper checks the origin against the host's store, which does
        # not know the lab CA: the sandbox gets a 502 that says so, the origin nothing
        self.assertNotVouchedFor(upstream_ca=False)
        # and a host store that has it (a copy of the system's with the lab CA added, hashed
        # as update-ca-certificates does) lets the same request through
        store = os.path.join(self.dirs.base, "certs")
        shutil.copytree("/etc/ssl/certs", store, symlinks=True)
        shutil.copy(os.path.join(pki, "ca.pem"), os.path.join(store, "nsbox-lab-ca.pem"))
        with open(os.path.join(store, "ca-certificates.crt"), "a") as f, \
                open(os.path.join(pki, "ca.pem")) as ca:
            f.write(ca.read())
        subprocess.run(["openssl", "rehash", store], check=True, capture_output=True)
        subprocess.run(["chmod", "-R", "a+rX", store], check=True)
        out = self.run_in(f"allow={NAME}:{PORT}", f"curl -sS https://{NAME}:{PORT}/stored",
                          upstream_ca=False, host_store=store)
        self.assertEqual(json.loads(out)["path"], "/stored")
        self.assertEqual([self.auth_headers(r) for r in self.received()], [[BEARER]])

    def refused_upstream(self, sub, port, leaf_name, why, **leaf):
        """An origin on OTHER:port with a leaf the trusted lab CA signed for leaf_name (issue_
        leaf's options), the bound name pinned to it by the host: a bound request gets a 502
        saying why, and not one request (so no secret) reaches the origin."""
        d = os.path.join(self.dirs.base, sub)
        os.mkdir(d)
        issue_leaf(d, leaf_name, **leaf)
        received = os.path.join(d, "received.jsonl")
        open(received, "w").close()
        os.chmod(d, 0o755)
        os.chmod(received, 0o666)
        start_origin(lab, ORIGIN, OTHER, port, d, received, os.path.join(pki, "www"),
                     weak=leaf.get("bits", 2048) < 2048)
        hosts = os.path.join(d, "hosts")
        with open(hosts, "w") as f:
            f.write(f"127.0.0.1\tlocalhost\n{OTHER}\t{NAME}\n")
        os.chmod(hosts, 0o644)
        r = self.nsbox(["run", "--network", f"allow={NAME}:{port}", "--header-binding",
                        f"{NAME}:{port}:Authorization=env:BOUND_TOKEN", "--", "sh", "-c",
                        f"curl -sS https://{NAME}:{port}/x -w '\\n%{{http_code}}\\n'"],
                       hosts=hosts)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        out = r.stdout.decode()
        self.assertEqual(out.splitlines()[-1], "502", out)
        self.assertIn(why, out)
        with open(received) as f:
            self.assertEqual(f.read(), "")

    def test_upstream_that_cannot_be_reached_says_where_the_reason_is(self):
        # the bound name resolves on the host to an address where nothing listens on the port
        # (the other tests' origins there use PORT and PORT + 1): the sandbox gets a 502 that
        # sends its user to the network log, which has the reason
        port = PORT + 40
        hosts = os.path.join(self.dirs.base, "hosts-unreached")
        with open(hosts, "w") as f:
            f.write(f"127.0.0.1\tlocalhost\n{OTHER}\t{NAME}\n")
        os.chmod(hosts, 0o644)
        log = os.path.join(self.dirs.base, "unreached.log")
        r = self.nsbox(["run", "--network", f"allow={NAME}:{port}", "--network-log", log,
                        "--header-binding", f"{NAME}:{port}:Authorization=env:BOUND_TOKEN",
                        "--", "sh", "-c",
                        f"curl -sS https://{NAME}:{port}/x -w '\n%{{http_code}}\n'"],
                       hosts=hosts)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        out = r.stdout.decode()
        self.assertEqual(out.splitlines()[-1], "502", out)
        self.assertIn("nsbox egress: cannot connect to the bound host; why is in the sandbox's "
                      "network log (on the host: nsbox logs --network ID)", out)
        with open(log) as f:
            entries = [json.loads(line) for line in f]
        self.assertEqual([(e["verdict"], e["reason"]) for e in entries],
                         [("failed", f"cannot connect to {OTHER}")])

    def test_upstream_certificate_for_another_name_is_refused(self):
        # An origin whose certificate the trusted lab CA signed, but for another name: the
        # chain verifies, only the helper's host name check stands between the secret and it.
        self.refused_upstream("wrong", PORT, "wrong.lab.test", "hostname mismatch")

    def test_upstream_certificate_with_a_weak_key_is_refused(self):
        # A 1024-bit RSA leaf the trusted lab CA signed for the bound name: the chain and the
        # name verify; the helper's security level (at least 2, whatever the host's OpenSSL
        # build or configuration) refuses the key before the secret goes. Its own port: the
        # other-name test's origin keeps OTHER:PORT for the lab's life.
        self.refused_upstream("weak", PORT + 1, NAME, "key too weak", bits=1024)

    def test_file_binding_value_reaches_the_origin_and_nothing_inside(self):
        # the value from a file only root reads, its trailing newline not part of it
        path = os.path.join(self.dirs.base, "token")
        with open(path, "w") as f:
            f.write(BEARER + "\n")
        os.chmod(path, 0o600)
        # the pattern matches the secret without spelling it (grep's own cmdline is searched)
        pattern = _q(SECRET[:-1] + "[" + SECRET[-1] + "]")
        find = (f"grep -rlsE {pattern} /etc /workspace /tmp /run /home /root "
                f"/proc/[0-9]*/environ /proc/[0-9]*/cmdline; test -e {_q(path)} && echo VISIBLE")
        r = self.nsbox(["run", "--network", f"allow={NAME}:{PORT}", "--header-binding",
                        f"{NAME}:{PORT}:Authorization=file:{path}", "--", "sh", "-c",
                        f"curl -sS --fail-with-body https://{NAME}:{PORT}/file; echo; {find}; "
                        "echo END"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        lines = r.stdout.decode().splitlines()
        self.assertEqual(lines[1:], ["END"])  # nothing found inside, the file not there
        self.assertEqual(json.loads(lines[0])["path"], "/file")
        self.assertEqual([self.auth_headers(r) for r in self.received()], [[BEARER]])

    def test_file_binding_that_cannot_be_read_fails_create(self):
        before = tree_state([self.dirs.state])
        for path in (os.path.join(self.dirs.base, "missing"), self.dirs.base):  # a directory
            r = self.nsbox(["create", "--network", f"allow={NAME}:{PORT}", "--header-binding",
                            f"{NAME}:{PORT}:Authorization=file:{path}"])
            self.assertEqual(r.returncode, 125, r.stderr.decode())
            err = r.stderr.decode()
            self.assertIn(f"--header-binding {NAME}:{PORT}:Authorization=..., file:{path}: ",
                          err)
            self.assertEqual(r.stdout, b"")
            self.assertEqual(tree_state([self.dirs.state]), before)
            self.assertEqual(lab.sandbox_links(), [])

    def test_upstream_ca_file_only_root_reads(self):
        # nsbox reads the config's CA file and hands the helper a copy: the helper, under its
        # own uid, could not open a file of mode 0600
        ca = os.path.join(self.dirs.base, "root-only-ca.pem")
        shutil.copy(os.path.join(pki, "ca.pem"), ca)
        os.chmod(ca, 0o600)
        out = self.run_in(f"allow={NAME}:{PORT}", f"curl -sS https://{NAME}:{PORT}/rootca",
                          upstream_ca=ca)
        self.assertEqual(json.loads(out)["path"], "/rootca")
        # and a file that is not there fails the run, naming it
        r = self.nsbox(["run", "--network", f"allow={NAME}:{PORT}", "--header-binding",
                        f"{NAME}:{PORT}:Authorization=env:BOUND_TOKEN", "--", "true"],
                       upstream_ca=ca + ".missing")
        self.assertEqual(r.returncode, 125, r.stderr.decode())
        self.assertIn(ca + ".missing", r.stderr.decode())

    def test_upstream_ca_file_of_many_certificates(self):
        # the helper keeps the config's CA file as DER and parses a certificate only when a
        # chain asks for its subject: in a copy of the host's bundle the lab CA, last of them,
        # is found, and without it the origin is not vouched for
        system = "/etc/ssl/certs/ca-certificates.crt"
        if not os.path.exists(system):
            self.skipTest(f"needs the host's bundle {system} (ca-certificates)")
        bundle = os.path.join(self.dirs.base, "bundle.pem")
        shutil.copy(system, bundle)
        self.assertNotVouchedFor(upstream_ca=bundle)
        with open(bundle, "a") as f, open(os.path.join(pki, "ca.pem")) as ca:
            f.write(ca.read())
        out = self.run_in(f"allow={NAME}:{PORT}", f"curl -sS https://{NAME}:{PORT}/bundle",
                          upstream_ca=bundle)
        self.assertEqual(json.loads(out)["path"], "/bundle")
        self.assertEqual([self.auth_headers(r) for r in self.received()], [[BEARER]])
        # a file without a certificate fails the run, naming it
        with open(bundle, "w") as f:
            f.write("not a certificate\n")
        r = self.nsbox(["run", "--network", f"allow={NAME}:{PORT}", "--header-binding",
                        f"{NAME}:{PORT}:Authorization=env:BOUND_TOKEN", "--", "true"],
                       upstream_ca=bundle)
        self.assertEqual(r.returncode, 125, r.stderr.decode())
        self.assertIn(bundle, r.stderr.decode())

    def test_inspect_and_state_never_hold_the_secret(self):
        r = self.nsbox(["create", "--network", f"allow={NAME}:{PORT}", "--header-binding",
                        f"{NAME}:{PORT}:Authorization=env:BOUND_TOKEN"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        sid = r.stdout.decode().strip()
        try:
            r = self.nsbox(["exec", sid, "--", "curl", "-sS", f"https://{NAME}:{PORT}/exec"])
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            self.assertEqual(json.loads(r.stdout)["path"], "/exec")
            r = self.nsbox(["inspect", sid])
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            spec = json.loads(r.stdout)["spec"]
            self.assertEqual(spec["header_bindings"],
                             [{"host": f"{NAME}:{PORT}", "header": "Authorization"}])
            self.assertNotIn(SECRET, r.stdout.decode())
            state = os.path.join(self.dirs.state, sid)
            hits = subprocess.run(["grep", "-r", "-l", "-F", SECRET, state], capture_output=True)
            self.assertEqual(hits.stdout, b"")
            self.assertTrue(os.path.exists(os.path.join(state, "ca-bundle.crt")))
            # the supervisor and the sandbox's init (this test's: other sandboxes may run
            # beside): the secret neither on their command lines nor in their environments
            mine = []
            for pid in subprocess.run(["pgrep", "-f", "nsbox"], capture_output=True,
                                      text=True).stdout.split():
                try:
                    with open(f"/proc/{pid}/environ", "rb") as fh:
                        environ = fh.read()
                    with open(f"/proc/{pid}/cmdline", "rb") as fh:
                        cmdline = fh.read()
                    with open(f"/proc/{pid}/comm") as fh:
                        comm = fh.read().strip()
                except OSError:
                    continue
                if self.dirs.state.encode() in environ:
                    mine.append(comm)
                    self.assertNotIn(SECRET.encode(), environ + cmdline)
                    self.assertEqual(secret_page_flags(pid), [])
            self.assertIn("nsbox-supervise", mine)
            # the helper, an executable of its own: an empty environment, its name and the
            # sandbox's id as argv, libssl mapped; the secret only in pages left out of core
            # dumps (MADV_DONTDUMP: "dd" in their VmFlags), not in its heap
            helper = self.helper_of(sid)
            with open(f"/proc/{helper}/environ", "rb") as fh:
                self.assertEqual(fh.read(), b"")
            with open(f"/proc/{helper}/cmdline", "rb") as fh:
                self.assertEqual(fh.read(), b"nsbox-egress\0" + sid.encode() + b"\0")
            self.assertIn("libssl.so", maps(helper))
            self.assertEqual(secret_page_flags(helper), [True])
        finally:
            r = self.nsbox(["rm", sid])
            self.assertEqual(r.returncode, 0, r.stderr.decode())
        self.assertEqual([self.auth_headers(r) for r in self.received()], [[BEARER]])

    def helper_of(self, sid):
        """The pid of the sandbox's egress helper: the nsbox-egress child of its supervisor."""
        r = self.nsbox(["inspect", sid])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        sup = str(json.loads(r.stdout)["supervisor_pid"])
        kids = subprocess.run(["pgrep", "-P", sup, "-x", "nsbox-egress"], capture_output=True,
                              text=True).stdout.split()
        self.assertEqual(len(kids), 1, kids)
        return int(kids[0])

    def test_network_log_has_each_bound_request(self):
        r = self.nsbox(["create", "--network", f"allow={NAME}:{PORT}", "--header-binding",
                        f"{NAME}:{PORT}:Authorization=env:BOUND_TOKEN"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        sid = r.stdout.decode().strip()
        try:
            # the helper that ends TLS is as jailed as one that splices (test_egress.py)
            helper = self.helper_of(sid)
            st = status_of(helper)
            self.assertNotEqual(st["Uid"].split()[0], "0")
            self.assertEqual(int(st["CapEff"], 16), 0)
            self.assertEqual((st["NoNewPrivs"], st["Seccomp"]), ("1", "2"))
            # two requests on one connection (keep-alive), then one the helper refuses
            r = self.nsbox(["exec", sid, "--", "sh", "-c",
                            f"curl -sS -o /dev/null -o /dev/null "
                            f"'https://{NAME}:{PORT}/logged/one?q=inquery' "
                            f"'https://{NAME}:{PORT}/logged/two#frag' && "
                            f"curl -sS -o /dev/null -H 'Host: other.lab.test' "
                            f"https://{NAME}:{PORT}/refused"])
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            # an entry is written when its connection's thread sees the end: poll briefly
            def read_log():
                r = self.nsbox(["logs", "--network", sid])
                self.assertEqual(r.returncode, 0, r.stderr.decode())
                return r.stdout.decode()
            wait_for(lambda: len(read_log().splitlines()) >= 3, 15)
            text = read_log()
            log = [json.loads(line) for line in text.splitlines()]
            with open(os.path.join(self.dirs.state, sid, "network.log")) as f:
                raw = f.read()
        finally:
            r = self.nsbox(["rm", sid])
            self.assertEqual(r.returncode, 0, r.stderr.decode())
        for t in (text, raw):
            self.assertNotIn(SECRET, t)
            self.assertNotIn("inquery", t)
            self.assertNotIn("frag", t)
        bound = sorted((e for e in log if e["verdict"] == "bound"), key=lambda e: e["path"])
        self.assertEqual([(e["method"], e["path"], e["status"]) for e in bound],
                         [("GET", "/logged/one", 200), ("GET", "/logged/two", 200)], log)
        for e in bound:
            self.assertEqual((e["name"], e["port"]), (NAME, PORT), e)
            self.assertGreater(e["bytes_up"], 0, e)
            self.assertGreater(e["bytes_down"], 0, e)
        refused = [e for e in log if e["verdict"] == "refused"]
        self.assertEqual(len(refused), 1, log)
        self.assertEqual(refused[0]["status"], 403, refused)
        self.assertIn("another host than the TLS server name", refused[0]["reason"])
        self.assertEqual(len(log), 3, log)  # no entry per connection beside the requests'

    def test_python_client(self):
        sys.path.insert(0, os.path.join(os.environ.get("NSBOX_SOURCE_DIR", ""), "python"))
        import nsbox as client
        # the client runs nsbox in the lab, as self.nsbox does
        wrapper = os.path.join(self.dirs.base, "nsbox-in-lab")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nexec nsenter --net=/run/netns/%s unshare --mount --propagation "
                    "private sh -c 'mount --bind \"$0\" /etc/resolv.conf && mount --bind \"$1\" "
                    "/etc/hosts && shift && exec \"$@\"' %s %s %s \"$@\"\n"
                    % (lab.lab, lab.resolv, os.path.join(pki, "hosts"), NSBOX))
        os.chmod(wrapper, 0o755)
        env = self.env()
        del env["BOUND_TOKEN"]  # the client passes the value in the spec, on a memfd
        binding = client.HeaderBinding(host=f"{NAME}:{PORT}", header="Authorization",
                                       value=BEARER)
        box = client.LocalSandbox(network=client.Network.allow(hosts=[f"{NAME}:{PORT}"]),
                                  header_bindings=[binding], binary=wrapper, nsbox_env=env)
        self.assertNotIn(SECRET, repr(box))
        with box.open() as sb:
            r = sb.execute(f"curl -sS https://{NAME}:{PORT}/python -H 'Authorization: x'; "
                           f"echo; env")
            self.assertEqual(r.exit_code, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout.splitlines()[0])["path"], "/python")
            self.assertNotIn(SECRET, r.stdout)
        self.assertEqual([self.auth_headers(r) for r in self.received()], [[BEARER]])
        # the hosted SDK's helpers: the hosts and headers they stand for
        gh = client.LocalSandbox(network=client.Network.all(), header_bindings=[
            client.GitHubBinding(token="ghp_TOKEN123"), client.MistralApiBinding(api_key="KEY12345")])
        self.assertEqual([(b["host"], b["header"], b["value"].split()[0])
                          for b in gh.spec()["header_bindings"]],
                         [("api.github.com", "Authorization", "Bearer"),
                          ("github.com", "Authorization", "Basic"),
                          ("api.mistral.ai", "Authorization", "Bearer")])
        self.assertNotIn("TOKEN123", repr(gh))
        self.assertNotIn("KEY12345", repr(gh))

    def test_libssl_is_loaded_only_with_bindings(self):
        # the helper links libc only; libssl and libcrypto come with bindings, and nothing of
        # what nsbox itself links (libseccomp, libnl, libnftables, cJSON) ever
        never = ("libseccomp", "libnl", "libnftables", "libcjson", "libcap")
        for bound in (False, True):
            args = ["create", "--network", f"allow={NAME}:{PORT}"]
            if bound:
                args += ["--header-binding", f"{NAME}:{PORT}:Authorization=env:BOUND_TOKEN"]
            r = self.nsbox(args)
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            sid = r.stdout.decode().strip()
            try:
                libs = {os.path.basename(line.split()[-1]) for line in
                        maps(self.helper_of(sid)).splitlines() if ".so" in line}
            finally:
                self.nsbox(["rm", sid])
            self.assertEqual(any(n.startswith("libssl.so") for n in libs), bound, libs)
            self.assertEqual(any(n.startswith("libcrypto.so") for n in libs), bound, libs)
            self.assertEqual([n for n in libs if n.startswith(never)], [], libs)
            if not bound:
                self.assertEqual([n for n in libs if not n.startswith(("libc.so", "ld-linux"))],
                                 [], libs)

    def test_bound_host_the_network_cannot_reach_fails_creation(self):
        r = self.nsbox(["create", "--network", f"allow=other.lab.test:{PORT}", "--header-binding",
                        f"{NAME}:{PORT}:Authorization=env:BOUND_TOKEN"])
        self.assertEqual(r.returncode, 125)
        self.assertIn("not in the network's allow list", r.stderr.decode())
        r = self.nsbox(["run", "--header-binding", f"{NAME}:Authorization=env:BOUND_TOKEN",
                        "--", "true"])
        self.assertEqual(r.returncode, 125)
        self.assertIn("the network is none", r.stderr.decode())
        r = self.nsbox(["run", "--network", "all", "--header-binding",
                        f"{NAME}:Authorization={SECRET}", "--", "true"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("never from the command line", r.stderr.decode())
        self.assertNotIn(SECRET, r.stderr.decode())
        # names by address (no egress helper) cannot bind
        r = self.nsbox(["run", "--network", f"allow={NAME}:{PORT}", "--header-binding",
                        f"{NAME}:{PORT}:Authorization=env:BOUND_TOKEN", "--", "true"],
                       allow_names="address")
        self.assertEqual(r.returncode, 125)
        self.assertIn("header bindings need the egress helper", r.stderr.decode())


NSBOX_BUNDLE = "etc/ssl/certs/ca-certificates.crt"
# The test image's bundle: one certificate of the host's and a line of its own, so that a copy of
# the host's bundle (or of an empty one) is told apart from the image's
with open("/" + NSBOX_BUNDLE, "rb") as _f:
    IMAGE_BUNDLE = (b"# the test image's own bundle\n" + b"-----BEGIN CERTIFICATE-----" +
                    _f.read().split(b"-----BEGIN CERTIFICATE-----")[1].split(b"-----END")[0] +
                    b"-----END CERTIFICATE-----\n") if os.path.exists("/" + NSBOX_BUNDLE) \
        else b""


def issue_leaf(d, name, bits=2048):
    """In d: srv.pem and srv.key (RSA, bits) for name alone, signed by the module's lab CA."""
    def openssl(*args):
        subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)
    openssl("req", "-newkey", f"rsa:{bits}", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
            "-subj", f"/CN={name}")
    with open(os.path.join(d, "ext"), "w") as f:
        f.write(f"subjectAltName=DNS:{name}\n")
    openssl("x509", "-req", "-in", "srv.csr", "-CA", os.path.join(pki, "ca.pem"), "-CAkey",
            os.path.join(pki, "ca.key"), "-CAcreateserial", "-CAserial", "ca.srl", "-out",
            "srv.pem", "-days", "2", "-extfile", "ext")
    for n in os.listdir(d):
        os.chmod(os.path.join(d, n), 0o644)


def curl_layer():
    """The host's curl with the libraries ldd names, below usr/ (lib and lib64 link there, as in
    a merged-/usr system), and an nsswitch.conf that reads /etc/hosts (where the bound name is
    pinned)."""
    curl = shutil.which("curl")
    ldd = subprocess.run(["ldd", curl], capture_output=True, text=True, check=True).stdout
    files = [("usr/bin/curl", curl)]
    for lib in sorted({w for line in ldd.splitlines() for w in line.split() if w[:1] == "/"}):
        rel = lib.lstrip("/")
        files.append((rel if rel.startswith("usr/") else "usr/" + rel, lib))
    dirs = sorted({os.path.dirname(rel)[:i] for rel, _ in files
                   for i, c in enumerate(os.path.dirname(rel) + "/") if c == "/"})
    e = [("lib", b"", 0o777, tarfile.SYMTYPE, "usr/lib"),
         ("lib64", b"", 0o777, tarfile.SYMTYPE, "usr/lib64"),
         ("etc", b"", 0o755, tarfile.DIRTYPE),
         ("etc/nsswitch.conf", b"hosts: files dns\n", 0o644)]
    e += [(d, b"", 0o755, tarfile.DIRTYPE) for d in dirs]
    for rel, host in files:
        with open(os.path.realpath(host), "rb") as f:
            e.append((rel, f.read(), 0o755))
    return oci_images.tar_bytes(e)


def bundle_layer():
    return oci_images.tar_bytes([("etc", b"", 0o755, tarfile.DIRTYPE),
                                 ("etc/ssl", b"", 0o755, tarfile.DIRTYPE),
                                 ("etc/ssl/certs", b"", 0o755, tarfile.DIRTYPE),
                                 (NSBOX_BUNDLE, IMAGE_BUNDLE, 0o644)])


def tree_state(dirs):
    """Every entry below dirs: its inode, mode, size, times and, for a file, its bytes' hash."""
    import hashlib
    out = {}
    for d in dirs:
        for root, subdirs, files in os.walk(d):
            for n in subdirs + files:
                p = os.path.join(root, n)
                st = os.lstat(p)
                h = None
                if os.path.isfile(p) and not os.path.islink(p):
                    with open(p, "rb") as f:
                        h = hashlib.sha256(f.read()).hexdigest()
                out[p] = (st.st_ino, st.st_mode, st.st_nlink, st.st_size, st.st_mtime_ns,
                          st.st_ctime_ns, h)
    return out


def status_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def secret_page_flags(pid):
    """For each mapping of process pid that holds SECRET (read as root through /proc/PID/mem):
    whether it is left out of core dumps ("dd" in its VmFlags: MADV_DONTDUMP)."""
    where, found = [], []
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5:
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                where.append([lo, hi, head[1], []])
            elif line.startswith("VmFlags:"):
                where[-1][3] = head[1:]
    with open(f"/proc/{pid}/mem", "rb") as mem:
        for lo, hi, perms, vmflags in where:
            if not perms.startswith("r") or hi - lo > 256 << 20:
                continue
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except OSError:
                continue
            if SECRET.encode() in data:
                found.append("dd" in vmflags)
    return found


def environ_of(pid):
    """Process pid's environment as text; empty once it has ended."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def maps(pid):
    with open(f"/proc/{pid}/maps") as f:
        return f.read()


def _q(s):
    return "'" + s.replace("'", "'\"'\"'") + "'"


if __name__ == "__main__":
    unittest.main()
