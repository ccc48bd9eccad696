"""A registry on 127.0.0.1 for tests: Debian's docker-registry, in plain HTTP or with TLS (a lab
CA and a server certificate for 127.0.0.1 made here with openssl) and htpasswd basic auth
(`htpasswd -B`, apache2-utils).

The CA is trusted only where a test says so: `certs_wrap()` runs a command in a private mount
namespace (`unshare -m`) whose /etc/containers is a copy with certs.d/127.0.0.1:PORT/ca.crt
added, bound over the real one there; the host's files are never changed."""
import base64
import json
import os
import shutil
import socket
import subprocess
import time

NEEDS = ("skopeo", "docker-registry", "openssl", "htpasswd", "unshare")


def missing_tools():
    return [t for t in NEEDS if not shutil.which(t)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                   timeout=60)


class Registry:
    """Started by the constructor; stop() ends it. work: a private directory of the test."""

    def __init__(self, work, tls=False, user=None, password=None):
        self.work = work
        self.port = free_port()
        self.host = "127.0.0.1:%d" % self.port
        self.tls = tls
        self.user, self.password = user, password
        cfg = ["version: 0.1", "log:", "  level: error", "storage:", "  filesystem:",
               "    rootdirectory: %s/data" % work, "http:", "  addr: %s" % self.host]
        if tls:
            self._make_certs()
            cfg += ["  tls:", "    certificate: %s" % self.cert, "    key: %s" % self.key]
        if user:
            htp = os.path.join(work, "htpasswd")
            _run(["htpasswd", "-B", "-b", "-c", htp, user, password])
            cfg += ["auth:", "  htpasswd:", "    realm: nsbox-test", "    path: %s" % htp]
        path = os.path.join(work, "config.yml")
        with open(path, "w") as f:
            f.write("\n".join(cfg) + "\n")
        self.proc = subprocess.Popen(["docker-registry", "serve", path],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise AssertionError("docker-registry did not listen on %s" % self.host)

    def stop(self):
        self.proc.kill()
        self.proc.wait()

    def _make_certs(self):
        w = self.work
        self.ca, ca_key = os.path.join(w, "ca.crt"), os.path.join(w, "ca.key")
        self.cert, self.key = os.path.join(w, "server.crt"), os.path.join(w, "server.key")
        csr, ext = os.path.join(w, "server.csr"), os.path.join(w, "server.ext")
        _run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
              "-subj", "/CN=nsbox test lab CA", "-keyout", ca_key, "-out", self.ca])
        _run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
              "-keyout", self.key, "-out", csr])
        with open(ext, "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        _run(["openssl", "x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", ca_key,
              "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", self.cert])

    def push(self, layout, ref_path):
        """skopeo copy of an OCI layout to HOST/ref_path, with the credentials and the CA."""
        ref = "%s/%s" % (self.host, ref_path)
        cmd = ["skopeo", "copy", "--quiet"]
        if self.tls:
            cdir = os.path.join(self.work, "push-certs")
            os.makedirs(cdir, exist_ok=True)
            shutil.copy(self.ca, os.path.join(cdir, "ca.crt"))
            cmd.append("--dest-cert-dir=" + cdir)
        else:
            cmd.append("--dest-tls-verify=false")
        if self.user:
            cmd.append("--dest-creds=%s:%s" % (self.user, self.password))
        subprocess.run(cmd + ["oci:%s:latest" % layout, "docker://" + ref], check=True,
                       timeout=120)
        return ref

    def auth_file(self, path, password=None):
        """An auth.json (containers-auth.json(5)) for this registry."""
        token = "%s:%s" % (self.user, self.password if password is None else password)
        with open(path, "w") as f:
            json.dump({"auths": {self.host: {
                "auth": base64.b64encode(token.encode()).decode()}}}, f)
        return path

    def certs_wrap(self, trust=True):
        """A run_nsbox wrap: the command in a private mount namespace whose /etc/containers is
        a copy (with this registry's CA under certs.d/HOST/ca.crt when trust)."""
        etc = os.path.join(self.work, "etc-containers-%s" % ("ca" if trust else "none"))
        if not os.path.isdir(etc):
            if os.path.isdir("/etc/containers"):
                shutil.copytree("/etc/containers", etc, symlinks=True)
            else:
                os.makedirs(etc)
            if trust:
                d = os.path.join(etc, "certs.d", self.host)
                os.makedirs(d)
                shutil.copy(self.ca, os.path.join(d, "ca.crt"))
        script = 'mount --bind "$0" /etc/containers && exec "$@"'

        def wrap(cmd):
            return ["unshare", "-m", "--propagation", "private", "--", "sh", "-c", script,
                    etc] + list(cmd)
        return wrap
