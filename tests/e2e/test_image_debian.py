"""`nsbox image build debian`: a real debootstrap into a temporary NSBOX_DATA_DIR.

It downloads about 250 MB from the Debian mirror configured in the host's apt sources and takes
a few minutes (twice: the second build checks the atomic replacement). Needs root, because debootstrap does; as
any other user the whole module is skipped, with that reason."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from nsbox_test import no_pool_env
from wheels import make_probe_wheel

NSBOX = os.environ.get("NSBOX_BIN")
NOT_ROOT = os.geteuid() != 0
ROOT_REASON = "building the debian image needs root (debootstrap creates device nodes and chroots)"


def nsbox(data, *args, env_extra=None, timeout=900):
    env = dict(os.environ, NSBOX_DATA_DIR=data)
    env.update(env_extra or {})
    return subprocess.run([NSBOX, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


@unittest.skipIf(NOT_ROOT, ROOT_REASON)
@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
class DebianImage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="nsbox-e2e-debian-")
        cls.data = os.path.join(cls.tmp, "data")
        cls.images = os.path.join(cls.data, "images")
        cls.rootfs = os.path.join(cls.images, "debian", "rootfs")
        t0 = time.monotonic()
        cls.first = nsbox(cls.data, "image", "build", "debian")
        cls.first_seconds = time.monotonic() - t0
        print(f"\ndebian image build: {cls.first_seconds:.0f} s, exit {cls.first.returncode}")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr[-3000:])

    def read(self, rel):
        with open(os.path.join(self.rootfs, rel)) as f:
            return f.read()

    def test_progress_lines(self):
        lines = self.first.stderr.splitlines()
        self.assertEqual(lines[0],
                         "nsbox: image debian: running debootstrap (this takes a few minutes)...")
        self.assertTrue(all(l.startswith("nsbox: image debian: ") for l in lines), lines[:5])
        # debootstrap's own progress is forwarded
        self.assertTrue(any(l.startswith("nsbox: image debian: I: ") for l in lines))
        self.assertTrue(lines[-1].startswith("nsbox: image debian: done: "), lines[-1])

    def test_rootfs_contents(self):
        for rel in ("bin/sh", "usr/bin/python3", "usr/bin/git", "usr/bin/curl", "usr/bin/jq",
                    "usr/bin/rg", "usr/bin/gh", "usr/bin/node", "usr/bin/npm",
                    "usr/bin/pre-commit"):
            path = os.path.join(self.rootfs, rel)
            # bin -> usr/bin and python3 -> python3.11 are relative links, safe to follow here
            self.assertTrue(os.path.isfile(path) and os.access(path, os.X_OK), rel)
        self.assertTrue(os.path.isfile(os.path.join(self.rootfs, "etc/ssl/certs/ca-certificates.crt")))
        passwd = self.read("etc/passwd")
        self.assertIn("\nappuser:x:1000:1000:nsbox sandbox user:/workspace:/bin/bash\n", passwd)
        self.assertEqual(passwd.count(":x:1000:"), 1)
        self.assertIn("\nappuser:x:1000:\n", self.read("etc/group"))
        self.assertTrue(os.path.isdir(os.path.join(self.rootfs, "workspace")))
        self.assertNotIn("nameserver", self.read("etc/resolv.conf"))
        self.assertIn("localhost", self.read("etc/hosts"))
        self.assertEqual(oct(os.stat(self.rootfs).st_mode & 0o777), oct(0o755))
        debs = os.listdir(os.path.join(self.rootfs, "var/cache/apt/archives"))
        self.assertEqual([d for d in debs if d.endswith(".deb")], [])
        with open(os.path.join(self.images, "debian", "image.json")) as f:
            meta = json.load(f)
        self.assertEqual(meta["kind"], "debian")
        for pkg in ("python3", "git", "curl", "jq", "ripgrep", "ca-certificates", "gh", "nodejs",
                    "npm", "pre-commit", "python3-pip", "python3-venv"):
            self.assertIn(pkg, meta["packages"])
        with open("/etc/os-release") as f:
            codename = [l.split("=", 1)[1].strip().strip('"') for l in f
                        if l.startswith("VERSION_CODENAME=")]
        if codename:
            self.assertEqual(meta["suite"], codename[0])
        self.assertTrue(meta["mirror"].startswith(("http://", "https://", "file:")))

    def test_python_runs_in_the_image(self):
        """chroot, independent of `nsbox run`: the image's own python3 and ssl work."""
        r = subprocess.run(["chroot", self.rootfs, "/usr/bin/python3", "-c",
                            "import ssl, json, socket, subprocess, pwd\n"
                            "print(ssl.create_default_context().cert_store_stats()['x509_ca'] > 0)\n"
                            "print(pwd.getpwuid(1000).pw_name, 6 * 7)"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "True\nappuser 42\n")

    def test_second_build_is_idempotent(self):
        before = os.stat(os.path.join(self.images, "debian")).st_ino
        r = nsbox(self.data, "image", "build", "debian", "--quiet")
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertEqual(r.stderr, "")
        self.assertNotEqual(os.stat(os.path.join(self.images, "debian")).st_ino, before)
        left = [n for n in os.listdir(self.images) if n.startswith((".tmp-", ".old-"))]
        self.assertEqual(left, [])
        self.assertTrue(os.access(os.path.join(self.rootfs, "usr/bin/python3"), os.X_OK))
        self.assertEqual(self.read("etc/passwd").count("appuser:"), 1)
        r = nsbox(self.data, "image", "ls", "--json")
        self.assertEqual([i["name"] for i in json.loads(r.stdout)], ["debian"])

    def test_run_python_in_debian(self):
        """Through `nsbox run --image debian`."""
        env = {"NSBOX_STATE_DIR": os.path.join(self.tmp, "state"),
               "NSBOX_CACHE_DIR": os.path.join(self.tmp, "cache"),
               **no_pool_env(self.tmp)}
        r = nsbox(self.data, "run", "--image", "debian", "--", "python3", "-c", "print(42)",
                  env_extra=env, timeout=120)
        self.assertEqual((r.returncode, r.stdout), (0, "42\n"), r.stderr)
        r = nsbox(self.data, "run", "--image", "debian", "--", "sh", "-c",
                  "id -un; cat /etc/debian_version >/dev/null && echo debian; rg --version | "
                  "head -c 7", env_extra=env, timeout=120)
        self.assertEqual((r.returncode, r.stdout), (0, "appuser\ndebian\nripgrep"), r.stderr)

    def test_pip_and_venv_in_debian(self):
        """pip installs into the user's site in the workspace, as in the hosted image (Debian's
        Python alone refuses it: PEP 668), and a venv can be made."""
        env = {"NSBOX_STATE_DIR": os.path.join(self.tmp, "state"),
               "NSBOX_CACHE_DIR": os.path.join(self.tmp, "cache"),
               **no_pool_env(self.tmp)}
        ws = os.path.join(self.tmp, "pip-ws")
        os.mkdir(ws, 0o755)
        wheel = make_probe_wheel(ws)
        for path in (ws, os.path.join(ws, wheel)):
            os.chown(path, 4242, 4343)
        r = nsbox(self.data, "run", "--image", "debian", "--workspace", ws, "--", "sh", "-c",
                  f"pip install -q --no-index --disable-pip-version-check {wheel} && "
                  "python3 -c 'import nsboxprobe; print(nsboxprobe.VALUE)' && "
                  "python3 -m venv v && v/bin/pip --version | cut -c1-4", env_extra=env,
                  timeout=180)
        self.assertEqual((r.returncode, r.stdout), (0, "42\npip \n"), r.stderr)

    def test_the_hosted_images_tools_run_in_debian(self):
        """Node with npm (installed by the image's apt-get, not debootstrap), gh and pre-commit,
        as a sandbox user."""
        env = {"NSBOX_STATE_DIR": os.path.join(self.tmp, "state"),
               "NSBOX_CACHE_DIR": os.path.join(self.tmp, "cache"),
               **no_pool_env(self.tmp)}
        r = nsbox(self.data, "run", "--image", "debian", "--", "sh", "-c",
                  "node -e 'console.log(6 * 7)' && npm --version >/dev/null && echo npm && "
                  "gh --version | head -c 10 && echo && pre-commit --version | head -c 10",
                  env_extra=env, timeout=120)
        self.assertEqual((r.returncode, r.stdout), (0, "42\nnpm\ngh version\npre-commit"),
                         r.stderr)


if __name__ == "__main__":
    unittest.main()


@unittest.skipIf(NOT_ROOT, ROOT_REASON)
@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
@unittest.skipIf(not shutil.which("debootstrap"), "debootstrap is not installed")
class UnreachableMirror(unittest.TestCase):
    def test_the_error_says_the_build_needs_the_mirror(self):
        # Offline, the build failed with debootstrap's bare "E: Failed getting release file",
        # while the README says nsbox works offline (it does, with the host image). The mirror
        # here is a closed port in a network namespace of the test's own: nothing leaves it.
        tmp = tempfile.mkdtemp(prefix="nsbox-e2e-debian-off-")
        self.addCleanup(shutil.rmtree, tmp, True)
        env = dict(os.environ, NSBOX_DATA_DIR=os.path.join(tmp, "data"),
                   NSBOX_DEBIAN_MIRROR="http://127.0.0.1:9/debian")
        r = subprocess.run(["unshare", "-n", "sh", "-c", 'ip link set lo up; exec "$@"', "sh",
                            NSBOX, "image", "build", "debian", "--quiet"],
                           env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("debootstrap failed", r.stderr)
        self.assertIn("are downloaded once, from http://127.0.0.1:9/debian: this host must reach "
                      "that mirror", r.stderr)
        self.assertIn("NSBOX_DEBIAN_MIRROR", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(tmp, "data", "images", "debian")))
