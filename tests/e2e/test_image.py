"""`nsbox image build|ls|rm` and the host image (rootfs/image*.c), against the built binary.

Every test uses its own temporary NSBOX_DATA_DIR, so the machine's image store is never touched.
The debian build (which downloads packages) is in test_image_debian.py so it can run in
parallel with this module."""
import json
import os
import shutil
import stat
import subprocess
import tempfile
import unittest

from nsbox_test import no_pool_env, reachable_nsbox

NSBOX = os.environ.get("NSBOX_BIN")
IS_ROOT = os.geteuid() == 0
SECRETS = {"shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d", "machine-id",
           "ssh", "subuid", "subgid", "private", "environment", "npmrc", "pip.conf",
           "gitconfig", "hostname"}


def nsbox(data, *args, env_extra=None, timeout=300, preexec_fn=None):
    env = dict(os.environ, NSBOX_DATA_DIR=data)
    env.update(env_extra or {})
    # another user (preexec_fn) may not reach the build tree (below /root, say)
    binary = reachable_nsbox() if preexec_fn else NSBOX
    return subprocess.run([binary, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=preexec_fn)


def tool(name):
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")


@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
class HostImage(unittest.TestCase):
    def setUp(self):
        self.data = tempfile.mkdtemp(prefix="nsbox-e2e-image-")
        self.addCleanup(shutil.rmtree, self.data, True)
        self.images = os.path.join(self.data, "images")
        self.etc = os.path.join(self.images, "host", "etc")

    def build_host(self, *extra):
        r = nsbox(self.data, "image", "build", "host", *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def leftovers(self):
        return [n for n in os.listdir(self.images) if n.startswith((".tmp-", ".old-"))]

    def test_build_contents(self):
        r = self.build_host()
        self.assertIn("nsbox: image host: built", r.stderr)
        with open(os.path.join(self.etc, "passwd")) as f:
            passwd = f.read()
        self.assertIn("\nappuser:x:1000:1000:", passwd)
        self.assertTrue(passwd.startswith("root:x:0:0:"))
        # Debian's system users, nobody and appuser: never a person of the host (uid >= 1000)
        entries = [l.split(":") for l in passwd.splitlines()]
        self.assertIn(["nobody", "x", "65534", "65534"], [e[:4] for e in entries])
        self.assertTrue({"daemon", "bin", "sys"} <= {e[0] for e in entries}, passwd)
        self.assertEqual([e[0] for e in entries if int(e[2]) >= 1000 and e[2] != "65534"],
                         ["appuser"], passwd)
        with open(os.path.join(self.etc, "group")) as f:
            self.assertIn("\nappuser:x:1000:\n", f.read())
        with open(os.path.join(self.etc, "nsswitch.conf")) as f:
            nss = f.read()
        self.assertRegex(nss, r"(?m)^passwd:\s+files$")
        self.assertNotIn("systemd", nss)
        self.assertFalse(os.path.lexists(os.path.join(self.etc, "shadow")))
        with open(os.path.join(self.etc, "hosts")) as f:
            hosts = [l.split() for l in f if l.strip() and not l.startswith("#")]
        self.assertIn(["127.0.0.1", "localhost"], hosts)
        self.assertIn("localhost", [n for l in hosts if l[0] == "::1" for n in l[1:]])
        self.assertTrue(os.path.isfile(os.path.join(self.etc, "resolv.conf")))
        if os.path.exists("/etc/ld.so.cache"):
            self.assertTrue(os.path.isfile(os.path.join(self.etc, "ld.so.cache")))
            with open("/etc/ld.so.cache", "rb") as a, \
                    open(os.path.join(self.etc, "ld.so.cache"), "rb") as b:
                self.assertEqual(a.read(), b.read())
        if os.path.isdir("/etc/alternatives"):
            # symlinks are kept as symlinks, pointing where the host's do (into /usr)
            for name in os.listdir("/etc/alternatives")[:20]:
                host = os.path.join("/etc/alternatives", name)
                if os.path.islink(host):
                    ours = os.path.join(self.etc, "alternatives", name)
                    self.assertEqual(os.readlink(ours), os.readlink(host))
        if os.path.isfile("/etc/ssl/certs/ca-certificates.crt"):
            self.assertTrue(os.path.isfile(os.path.join(self.etc, "ssl/certs/ca-certificates.crt")))
        if os.path.exists("/usr/lib/os-release"):
            self.assertEqual(os.readlink(os.path.join(self.etc, "os-release")),
                             "../usr/lib/os-release")
        with open(os.path.join(self.etc, "resolv.conf")) as f:
            self.assertNotIn("nameserver", f.read())
        with open(os.path.join(self.images, "host", "image.json")) as f:
            meta = json.load(f)
        self.assertEqual(meta["name"], "host")
        self.assertEqual(meta["kind"], "host")
        self.assertIsInstance(meta["builder_version"], int)
        self.assertRegex(meta["created"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(meta["packages"], [])
        self.assertEqual(self.leftovers(), [])

    def test_nothing_secret_and_modes(self):
        self.build_host()
        for dirpath, dirnames, filenames in os.walk(self.etc):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, self.etc)
                self.assertNotIn(name, SECRETS, rel)
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    continue
                if IS_ROOT:
                    self.assertEqual((st.st_uid, st.st_gid), (0, 0), rel)
                if stat.S_ISDIR(st.st_mode):
                    self.assertEqual(stat.S_IMODE(st.st_mode), 0o755, rel)
                else:
                    self.assertTrue(stat.S_ISREG(st.st_mode), rel)
                    self.assertEqual(stat.S_IMODE(st.st_mode), 0o644, rel)
        self.assertEqual(stat.S_IMODE(os.stat(self.etc).st_mode), 0o755)

    def test_rebuild_is_atomic_and_idempotent(self):
        self.build_host("--quiet")
        first = os.stat(os.path.join(self.images, "host")).st_ino
        r = self.build_host("--quiet")
        self.assertEqual(r.stderr, "")
        self.assertNotEqual(os.stat(os.path.join(self.images, "host")).st_ino, first)
        self.assertEqual(self.leftovers(), [])
        with open(os.path.join(self.etc, "passwd")) as f:
            self.assertEqual(f.read().count("appuser:"), 1)

    def test_leftover_of_dead_build_removed(self):
        os.makedirs(self.images)
        # pid 2**22 + 1 is above the kernel's pid_max limit: it can never be running
        dead = os.path.join(self.images, ".tmp-host-%d" % (2**22 + 1))
        os.makedirs(os.path.join(dead, "etc"))
        self.build_host("--quiet")
        self.assertFalse(os.path.exists(dead))

    def test_ls_columns_line_up(self):
        # the built images' kinds are host, debian (6 letters) and dir: each row's columns start
        # under the header's; a debian image is made by hand here (debootstrap takes minutes)
        self.build_host("--quiet")
        for name, kind in (("debian", "debian"), ("mine", None)):
            os.makedirs(os.path.join(self.images, name, "rootfs"))
            if kind:
                with open(os.path.join(self.images, name, "image.json"), "w") as f:
                    json.dump({"kind": kind}, f)
        r = nsbox(self.data, "image", "ls")
        self.assertEqual(r.returncode, 0, r.stderr)
        header, *rows = r.stdout.splitlines()
        self.assertEqual([row.split()[1] for row in rows], ["debian", "host", "dir"], r.stdout)
        for col in ("KIND", "DIGEST", "SIZE", "CREATED", "USE", "PATH"):
            at = header.index(col)
            for row in rows:
                self.assertTrue(row[at - 2:at] == "  " and row[at] != " ", (col, r.stdout))

    def test_ls_and_rm(self):
        r = nsbox(self.data, "image", "ls")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(),
                         ["NAME", "KIND", "DIGEST", "SIZE", "CREATED", "USE", "PATH"])
        self.build_host("--quiet")
        r = nsbox(self.data, "image", "ls")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 2, r.stdout)
        self.assertEqual(lines[1].split()[0:2], ["host", "host"])
        self.assertEqual(lines[1].split()[-1], self.etc)
        r = nsbox(self.data, "image", "ls", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        listed = json.loads(r.stdout)
        self.assertEqual([(i["name"], i["kind"], i["path"]) for i in listed],
                         [("host", "host", self.etc)])

        r = nsbox(self.data, "image", "rm", "host")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertFalse(os.path.exists(os.path.join(self.images, "host")))
        self.assertEqual(self.leftovers(), [])
        r = nsbox(self.data, "image", "rm", "host")
        self.assertEqual(r.returncode, 125)
        self.assertEqual(r.stderr, "nsbox: image 'host' does not exist\n")
        r = nsbox(self.data, "image", "rm", "-f", "host")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(json.loads(nsbox(self.data, "image", "ls", "--json").stdout), [])

    @unittest.skipUnless(IS_ROOT, "hiding a library takes a private mount namespace (root)")
    def test_an_import_without_libarchive_says_so(self):
        # libarchive is loaded when an image is imported, not at start: a machine without it
        # must hear that, not "out of memory" from the first call that found no library.
        lib = os.path.realpath(next(
            l.split("=>")[1].strip() for l in subprocess.run(
                ["ldconfig", "-p"], capture_output=True, text=True).stdout.splitlines()
            if "libarchive.so.13 " in l and "x86-64" in l))
        bad = os.path.join(self.data, "bad.tar")
        with open(bad, "w") as f:
            f.write("not a tar")
        r = subprocess.run(["unshare", "-m", "sh", "-ec",
                            'mount --make-rprivate /; mount --bind /dev/null "$1"; '
                            'exec "$2" image import "$3"', "sh", lib, NSBOX, bad],
                           env=dict(os.environ, NSBOX_DATA_DIR=self.data),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("images cannot be imported", r.stderr)
        self.assertIn("apt-get install libarchive13", r.stderr)
        self.assertNotIn("out of memory", r.stderr)
        self.assertEqual(nsbox(self.data, "image", "import", bad).stderr.strip(),
                         "nsbox: not a tar archive (import takes a `docker save` or OCI "
                         "archive, compressed or not, or an OCI layout directory): "
                         "Unrecognized archive format")

    def test_help_after_a_subcommand(self):
        # as `nsbox run --help`: the image commands' help, not "unknown option"
        for args in (["image", "pull", "--help"], ["image", "build", "-h"],
                     ["image", "import", "-q", "--help"]):
            r = nsbox(self.data, *args)
            self.assertEqual(r.returncode, 0, (args, r.stderr))
            self.assertIn("nsbox image pull [-q]", r.stdout)

    def test_usage_errors(self):
        for args in (["image"], ["image", "build"], ["image", "build", "ubuntu"],
                     ["image", "build", "host", "debian"], ["image", "build", "--bogus", "host"],
                     ["image", "ls", "--bogus"], ["image", "rm"], ["image", "frobnicate"]):
            r = nsbox(self.data, *args)
            self.assertEqual(r.returncode, 125, args)  # as every command's (it was 2 here)
            self.assertTrue(r.stderr.startswith("nsbox: "), r.stderr)
            # the message, then the help's hint on a line of its own, as every command's
            self.assertEqual(r.stderr.splitlines()[1:], ["(see nsbox image --help)"], r.stderr)
        r = nsbox(self.data, "image", "rm", "../etc")
        self.assertEqual(r.returncode, 125)
        self.assertIn("invalid image name", r.stderr)
        # a directory image by a relative path, as --workspace takes one (it was refused as
        # "neither host, an image name nor an absolute path")
        empty = tempfile.mkdtemp(dir=self.data)
        r = subprocess.run([NSBOX, "run", "--image", "./" + os.path.basename(empty), "--",
                            "true"], cwd=self.data, env=dict(os.environ, NSBOX_DATA_DIR=self.data),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 125)
        self.assertIn("image %s: no executable bin/sh inside it" % empty, r.stderr)

    def test_debian_needs_root(self):
        def drop():
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
        r = nsbox(self.data, "image", "build", "debian", preexec_fn=drop if IS_ROOT else None)
        self.assertEqual(r.returncode, 125)
        self.assertIn("needs root", r.stderr)
        self.assertIn("sudo nsbox image build debian", r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)

    def test_unprivileged_user_builds_host(self):
        if not IS_ROOT:
            self.skipTest("this test switches to another user, which needs root")
        os.chmod(self.data, 0o777)  # the temp dir stands in for the user's own data directory

        def drop():
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
        r = nsbox(self.data, "image", "build", "host", preexec_fn=drop)
        self.assertEqual(r.returncode, 0, r.stderr)
        st = os.stat(os.path.join(self.etc, "passwd"))
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (65534, 0o644))
        self.assertFalse(os.path.lexists(os.path.join(self.etc, "shadow")))

    def test_generated_etc_works(self):
        """Mount the generated /etc over /etc in a private mount namespace and run the tools
        the brief lists as appuser. Independent of `nsbox run`, so it checks the image alone."""
        if not IS_ROOT or not tool("unshare") or not tool("setpriv"):
            self.skipTest("needs root, unshare and setpriv to mount the image's /etc")
        self.build_host("--quiet")
        ws = tempfile.mkdtemp(prefix="nsbox-e2e-ws-")
        self.addCleanup(shutil.rmtree, ws, True)
        os.chown(ws, 1000, 1000)
        script = r"""
set -e
id -un
id
getent passwd appuser
echo 'a b' | awk '{print $2}'
ls / >/dev/null && echo ls-ok
python3 -c 'import ssl, json, socket, subprocess
ctx = ssl.create_default_context()
print("certs", ctx.cert_store_stats()["x509_ca"] > 0)
print(json.dumps({"tcp": socket.getprotobyname("tcp")}))
print("sub", subprocess.run(["true"]).returncode)'
git init -q repo && cd repo && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m m
git log --format=%s
test ! -e /etc/shadow && echo no-shadow
"""
        r = subprocess.run(
            [tool("unshare"), "-m", "--propagation", "private", "sh", "-c",
             'mount --bind "$1" /etc && cd "$2" && exec "$3" --reuid=1000 --regid=1000 '
             '--clear-groups env -i HOME=/workspace PATH=/usr/local/bin:/usr/bin:/bin '
             'sh -c "$4"', "sh", self.etc, ws, tool("setpriv"), script],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = r.stdout.splitlines()
        self.assertEqual(out[0], "appuser")
        self.assertIn("uid=1000(appuser) gid=1000(appuser)", out[1])
        self.assertTrue(out[2].startswith("appuser:x:1000:1000:"))
        self.assertEqual(out[3:], ["b", "ls-ok", "certs True", '{"tcp": 6}', "sub 0", "m",
                                   "no-shadow"])


@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
class RunWithHostImage(unittest.TestCase):
    """Through `nsbox run`."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="nsbox-e2e-image-run-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.env = {"NSBOX_STATE_DIR": os.path.join(self.tmp, "state"),
                    "NSBOX_CACHE_DIR": os.path.join(self.tmp, "cache"),
                    **no_pool_env(self.tmp)}
        self.data = os.path.join(self.tmp, "data")

    def test_appuser_python_in_host_image(self):
        r = nsbox(self.data, "run", "--image", "host", "--", "sh", "-c",
                  "id -un; getent passwd appuser | cut -d: -f6; "
                  "python3 -c 'import ssl, json, socket, subprocess; print(6*7)'; "
                  "test -e /etc/shadow || echo no-shadow",
                  env_extra=self.env, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["appuser", "/workspace", "42", "no-shadow"])


if __name__ == "__main__":
    unittest.main()
