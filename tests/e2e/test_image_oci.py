"""End to end: OCI and docker images (`nsbox image import|pull|ls|inspect|tag|rm|prune`,
`--image REF`), with test images made offline from the host's busybox (tests/lib/oci_images.py):
both archive formats and a layout import to the same image, whose layers' whiteouts, opaque
directory, hard link and Env are seen inside; a corrupt blob is refused with nothing kept; a
registry on 127.0.0.1 (Debian's docker-registry, tests/lib/oci_registry.py) serves pulls: in
plain HTTP, and with TLS and htpasswd auth (credentials, a refused password, an unknown tag, an
untrusted certificate, the --pull policies of run and create)."""
import io
import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

import oci_images
import oci_registry
from nsbox_test import NSBOX, Dirs, ensure_test_user, in_a_terminal, is_root, run_nsbox

CHECK = ("id -un; echo \"$PATH|$FOO|$BAR\"; ls /opq; ls /keep; "
         "test -e /keep/gone && echo gone-visible; "
         "stat -c %h /bin/hl; stat -c %a /bin/setuid; cat /etc/secret 2>/dev/null || echo no-secret; "
         "cat /top.txt; touch /top.txt 2>/dev/null || echo read-only")


def text(b):
    return b if isinstance(b, str) else b.decode()


def setUpModule():
    if not os.path.exists(oci_images.BUSYBOX):
        raise unittest.SkipTest("needs busybox-static (/bin/busybox)")


@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
class OciImages(unittest.TestCase):
    def setUp(self):
        self.dirs = Dirs()
        self.addCleanup(self.dirs.cleanup)
        self.src = tempfile.mkdtemp(prefix="nsbox-oci-src-")
        self.addCleanup(shutil.rmtree, self.src, True)
        self.layout = os.path.join(self.src, "layout")
        oci_images.write_layout(self.layout)

    def nsbox(self, *args, env=None, input=None, check=False):
        return run_nsbox(list(args), self.dirs, extra_env=env, input=input, timeout=120,
                         check=check)

    def images(self):
        d = os.path.join(self.dirs.data, "images")
        return sorted(n for n in os.listdir(d) if not n.startswith(".lock-") and
                      n != ".layers") if os.path.isdir(d) else []

    def layers(self):
        """The layers of the shared store (root's store)."""
        return oci_images.stored_layers(self.dirs.data)

    def test_formats_import_to_one_image_with_layer_semantics(self):
        archive = os.path.join(self.src, "oci.tar")
        oci_images.tar_dir(self.layout, archive)
        saved = os.path.join(self.src, "docker.tar")
        oci_images.write_docker_save(saved)
        ids = set()
        for args in (["--name", "t/layout:1", self.layout], ["--name", "t/archive:1", archive],
                     [saved]):
            r = self.nsbox("image", "import", "-q", *args)
            self.assertEqual(r.returncode, 0, r.stderr)
            ids.add(text(r.stdout).split()[-1])
        with open(archive, "rb") as f:
            r = self.nsbox("image", "import", "-q", "--name", "t/stdin:1", "-", input=f.read())
        self.assertEqual(r.returncode, 0, r.stderr)
        ids.add(text(r.stdout).split()[-1])
        self.assertEqual(len(ids), 1, ids)  # one image id (its config): unpacked once
        for ref in ("t/layout:1", "docker.io/t/archive:1", "nsbox-test/busybox:1"):
            r = self.nsbox("run", "--image", ref, "-e", "BAR=cli", "--", "sh", "-c", CHECK)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.decode().split()
            self.assertEqual(lines[0], "appuser")
            # the image's Env is the base (PATH included), -e wins
            self.assertEqual(lines[1], "/usr/local/bin:/usr/bin:/bin:/custom|from-image|cli")
            self.assertEqual(lines[2], "c")  # opaque: a and b of the lower layer are hidden
            self.assertEqual(lines[3:5], ["added", "x"])  # whiteout: gone is gone
            self.assertNotIn("gone-visible", lines)
            self.assertEqual(lines[5], "2")  # the hard link of layer 2 to layer 1's busybox
            self.assertEqual(lines[6], "755")  # setuid dropped
            self.assertEqual(lines[7], "no-secret")  # a 0600 root file stays root's
            # a regular file at the top level is there, read-only
            self.assertEqual(lines[8:], ["at", "the", "top", "read-only"])

    def test_ls_table_lines_up(self):
        # docker's config says nanoseconds and a registry's reference is long: the table shows
        # the second, and every row's columns start where the header's do
        saved = os.path.join(self.src, "docker.tar")
        ref = "127.0.0.1:5000/team/agents/reviewer:2024.01"
        oci_images.write_docker_save(saved, tag=ref, created="2024-01-02T03:04:05.123456789Z")
        self.nsbox("image", "import", "-q", saved, check=True)
        self.nsbox("image", "import", "-q", "--name", "t/a:1", self.layout, check=True)
        r = self.nsbox("image", "ls", check=True)
        head, *rows = r.stdout.decode().splitlines()
        cols = [head.index(c) for c in ("KIND", "DIGEST", "SIZE", "CREATED", "USE", "PATH")]
        self.assertEqual(len(rows), 2, r.stdout)
        for row in rows:
            for c in cols:
                self.assertEqual(row[c - 2:c], "  ", (row, head))
                self.assertNotEqual(row[c], " ", (row, head))
        row = [l for l in rows if l.startswith(ref + " ")]
        self.assertEqual(len(row), 1, r.stdout)
        created = head.index("CREATED")
        self.assertEqual(row[0][created:created + 22], "2024-01-02T03:04:05Z  ")
        # --json keeps the config's own text
        r = self.nsbox("image", "ls", "--json", check=True)
        self.assertIn("2024-01-02T03:04:05.123456789Z",
                      [i["created"] for i in json.loads(r.stdout.decode()) if i["name"] == ref])

    def test_ls_inspect_tag_rm_prune(self):
        self.nsbox("image", "import", "-q", "--name", "t/a:1", self.layout, check=True)
        r = self.nsbox("image", "ls", "--json", check=True)
        row = [i for i in json.loads(r.stdout.decode()) if i["name"] == "docker.io/t/a:1"]
        self.assertEqual(len(row), 1, r.stdout)
        self.assertTrue(row[0]["digest"].startswith("sha256:"))
        self.assertGreater(row[0]["size"], 1000000)
        self.assertFalse(row[0]["in_use"])
        # CREATED is the image's own (its config's), as docker shows it, not the import's
        self.assertEqual(row[0]["created"], "2024-01-02T03:04:05Z")
        r = self.nsbox("image", "inspect", "t/a:1", check=True)
        info = json.loads(r.stdout.decode())
        self.assertIn("FOO=from-image", info["config"]["config"]["Env"])
        self.assertEqual(info["refs"], ["docker.io/t/a:1"])
        self.nsbox("image", "tag", "t/a:1", "t/b:2", check=True)
        self.nsbox("image", "rm", "t/a:1", check=True)
        r = self.nsbox("run", "--image", "t/b:2", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)  # the image stays with its other name
        # in use: refused
        r = self.nsbox("create", "--image", "t/b:2", check=True)
        sid = r.stdout.decode().strip()
        # inspect says which image the reference named when the sandbox was made
        r = self.nsbox("inspect", sid, check=True)
        made = json.loads(r.stdout.decode())
        self.assertEqual(made["spec"]["image"], "t/b:2")
        self.assertEqual(made["image"], {"id": info["id"], "digest": info["digest"]})
        r = self.nsbox("image", "rm", "t/b:2")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"in use", r.stderr)
        self.assertIn(b"`nsbox pool drain`", r.stderr)  # a run's pooled sandbox may be the one
        # but a name that is not its last goes (docker's untag): the image stays for the sandbox
        self.nsbox("image", "tag", "t/b:2", "t/c:3", check=True)
        r = self.nsbox("image", "rm", "t/c:3")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.nsbox("image", "inspect", "t/b:2", check=True)
        self.assertEqual(json.loads(r.stdout.decode())["refs"], ["docker.io/t/b:2"])
        self.nsbox("rm", sid, check=True)
        self.nsbox("image", "rm", "t/b:2", check=True)
        self.assertEqual([n for n in self.images() if n.startswith("oci-")], [])
        # prune: an image no name refers to
        r = self.nsbox("image", "import", "-q", self.layout, check=True)
        self.assertEqual(len([n for n in self.images() if n.startswith("oci-")]), 1)
        r = self.nsbox("image", "prune", check=True)
        self.assertIn(b"removed 1", r.stdout)
        self.assertEqual([n for n in self.images() if n.startswith("oci-")], [])

    def test_a_nul_in_an_images_json_is_refused(self):
        # cJSON cuts a string at "\u0000" and reads on: the image's PATH would be
        # "/usr/bin", not the value its config (and its digest) says. The import refuses it,
        # naming the document; inspect refuses a stored config that holds one (as an older
        # nsbox may have stored it) rather than show the cut value.
        bad = os.path.join(self.src, "nul")
        oci_images.write_layout(bad, env=["PATH=/usr/bin\x00:/evil", "FOO=x"])
        r = self.nsbox("image", "import", "-q", "--name", "t/nul:1", bad)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"image config: contains a NUL character (\\u0000) in a string", r.stderr)
        self.assertEqual([n for n in self.images() if n.startswith("oci-")], [])
        self.nsbox("image", "import", "-q", "--name", "t/a:1", self.layout, check=True)
        [name] = [n for n in self.images() if n.startswith("oci-")]
        path = os.path.join(self.dirs.data, "images", name, "config.json")
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("FOO=from-image", "FOO=from\\u0000-image"))
        r = self.nsbox("image", "inspect", "t/a:1")
        self.assertEqual((r.returncode, r.stdout), (125, b""), r.stderr)
        self.assertIn(b"nsbox: image t/a:1: its stored config contains a NUL character "
                      b"(\\u0000) in a string: remove it (nsbox image rm) and pull or import "
                      b"it again", r.stderr)
        # nor do run and create start a sandbox without the image's Env (its PATH) for it
        for cmd in (["run", "--image", "t/a:1", "--", "sh", "-c", "echo ran"],
                    ["create", "--image", "t/a:1"]):
            r = self.nsbox(*cmd)
            self.assertEqual((r.returncode, r.stdout), (125, b""), r.stderr)
            self.assertIn(b"image " + name.encode() + b": its stored image config: contains a "
                          b"NUL character (\\u0000) in a string: remove it (nsbox image rm) and "
                          b"pull or import it again", r.stderr)

    def test_an_archive_or_layout_given_to_image_says_to_import_it(self):
        archive = os.path.join(self.src, "oci.tar")
        oci_images.tar_dir(self.layout, archive)
        for path, what in ((self.layout, b"an OCI image layout, not a root filesystem"),
                           (archive, b"not a directory; an image archive")):
            r = self.nsbox("run", "--image", path, "--", "true")
            self.assertEqual(r.returncode, 125)
            self.assertIn(what, r.stderr)
            self.assertIn(b"`nsbox image import %s`" % path.encode(), r.stderr)

    def test_docker_save_of_two_images_imports_the_one_named(self):
        # `docker save a b`: one manifest.json entry per image; --name chooses by RepoTag
        archive = os.path.join(self.src, "two.tar")
        l1, l2 = oci_images.layer1(), oci_images.layer2()
        c1, c2 = oci_images.config([l1]), oci_images.config([l1, l2])
        with tarfile.open(archive, "w") as tar:
            def put(name, data):
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                tar.addfile(ti, io.BytesIO(data))
            put("1/layer.tar", l1)
            put("2/layer.tar", l2)
            put("c1.json", c1)
            put("c2.json", c2)
            put("manifest.json", json.dumps([
                {"Config": "c1.json", "RepoTags": ["t/one:1"], "Layers": ["1/layer.tar"]},
                {"Config": "c2.json", "RepoTags": ["t/two:1"],
                 "Layers": ["1/layer.tar", "2/layer.tar"]}]).encode())
        r = self.nsbox("image", "import", "-q", archive)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"the archive holds 2 images: choose one with --name", r.stderr)
        r = self.nsbox("image", "import", "-q", "--name", "docker.io/t/two:1", archive)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.nsbox("run", "--pull", "never", "--image", "t/two:1", "--", "cat", "/top.txt")
        self.assertEqual((r.returncode, r.stdout), (0, b"at the top\n"), r.stderr)
        r = self.nsbox("image", "import", "-q", "--name", "t/three:1", archive)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"no image tagged 't/three:1' among the archive's 2 (t/one:1, t/two:1)",
                      r.stderr)

    def test_a_bare_word_is_never_made_a_reference(self):
        # `--image mine` and `image rm mine` look for the stored image "mine": a reference
        # docker.io/library/mine made by tag or import --name could never be used by that name
        self.nsbox("image", "import", "-q", "--name", "t/a:1", self.layout, check=True)
        for cmd in (("image", "tag", "t/a:1", "mine"),
                    ("image", "import", "-q", "--name", "mine", self.layout),
                    ("image", "inspect", "mine")):
            r = self.nsbox(*cmd)
            self.assertEqual(r.returncode, 125, cmd)
            self.assertIn(b"'mine' is a bare word, which names a stored image", r.stderr)
            self.assertIn(b"write mine:latest", r.stderr)
        r = self.nsbox("image", "ls", "--json", check=True)
        self.assertEqual([i["name"] for i in json.loads(r.stdout.decode())], ["docker.io/t/a:1"])
        # `image pull python` stores docker.io/library/python:latest: rm python names it
        self.nsbox("image", "tag", "t/a:1", "mine:latest", check=True)
        r = self.nsbox("image", "rm", "mine")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"image 'mine' does not exist; the reference docker.io/library/mine:latest "
                      b"does: `nsbox image rm mine:latest`", r.stderr)
        self.nsbox("image", "rm", "mine:latest", check=True)
        # and a bare word that names no stored image says how to write the reference
        r = self.nsbox("run", "--image", "mine", "--", "true")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"an OCI reference (a bare word is never one: `mine:latest` is "
                      b"docker.io/library/mine)", r.stderr)
        # nor a directory: a relative one is written with a '/'
        self.assertIn(b"or a directory's path (with a '/': `./mine`)", r.stderr)

    def test_progress_on_a_terminal_only_and_json(self):
        # on a pipe, without -q: the result alone
        r = self.nsbox("image", "import", "--name", "t/p:1", self.layout)
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        self.assertEqual(r.stdout.decode().split()[0], "docker.io/t/p:1")
        r = self.nsbox("image", "import", "--json", "--name", "t/p:1", self.layout)
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        got = json.loads(r.stdout)
        self.assertEqual((got["ref"], got["existed"]), ("docker.io/t/p:1", True))
        self.assertTrue(got["name"].startswith("oci-") and got["digest"].startswith("sha256:"))
        # on a terminal: each layer, its size, time and rate (or that it was stored already)
        self.nsbox("image", "rm", "t/p:1", check=True)
        code, out, _, _ = in_a_terminal(["image", "import", "--name", "t/p:1", self.layout],
                                        self.dirs, timeout=120)
        self.assertEqual(code, 0, out)
        for n in (1, 2):
            self.assertRegex(out, rb"layer %d/2 sha256:[0-9a-f]+: [0-9.]+ MB in [0-9.]+ s "
                                  rb"\([0-9.]+ MB/s\)" % n)
        code, out, _, _ = in_a_terminal(["image", "import", "-q", "--name", "t/p:1",
                                         self.layout], self.dirs, timeout=120)
        self.assertEqual((code, out.strip()), (0, b"docker.io/t/p:1 (%s)" % got["name"].encode()))

    def test_files_keep_their_owners(self):
        """As root, the layers' owners are kept (as image ids, shown through an idmapped
        mount): the image's root files are root's inside, uid 1000's are appuser's, an id
        beyond 65535 is nobody's."""
        if os.geteuid() != 0:
            self.skipTest("owners are kept only in root's store")
        self.nsbox("image", "import", "-q", "--name", "t/own:1", self.layout, check=True)
        r = self.nsbox("run", "--image", "t/own:1", "--", "sh", "-c",
                       "stat -c '%n %u:%g' / /bin/busybox /etc/passwd /etc/mine /etc/high "
                       "/etc/secret; cat /etc/mine; cat /etc/secret 2>/dev/null || echo denied; "
                       "echo x 2>/dev/null >>/etc/mine || echo read-only")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode().splitlines(), [
            "/ 1000:1000",  # nsbox's own tmpfs root
            "/bin/busybox 0:0", "/etc/passwd 0:0", "/etc/mine 1000:1000",
            "/etc/high 65534:65534", "/etc/secret 0:0", "appuser's own", "denied",
            "read-only"])  # owning a file of the image grants reading it, never writing
        # on the host: the image-id range, never host root or a sandbox's ids; in the shared
        # layer store (the bottom layer holds these), and the image's own top layer
        image = [os.path.join(self.dirs.data, "images", n) for n in self.images()
                 if n.startswith("oci-")][0]
        base = 2000000000 - 65536
        self.assertEqual(os.stat(os.path.join(image, "top")).st_uid, base)
        self.assertEqual(os.lstat(os.path.join(image, "top", "etc", "passwd")).st_uid, base)
        bottom = oci_images.image_layers(image)[0]
        self.assertEqual(os.lstat(os.path.join(bottom, "etc", "mine")).st_uid, base + 1000)
        self.assertEqual(os.lstat(os.path.join(bottom, "bin", "sh")).st_uid, base)

    def test_image_without_python3_is_refused_at_create(self):
        nopy = os.path.join(self.src, "nopy")
        oci_images.write_layout(nopy, layers=[oci_images.layer1(python=False),
                                              oci_images.layer2()])
        self.nsbox("image", "import", "-q", "--name", "t/nopy:1", nopy, check=True)
        r = self.nsbox("run", "--image", "t/nopy:1", "--", "true")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"no python3", r.stderr)
        self.assertTrue(r.stderr.startswith(b"nsbox: t/nopy:1: image oci-"), r.stderr)

    @unittest.skipUnless(os.geteuid() == 0, "hiding a library takes a private mount namespace")
    def test_gzip_layers_without_isal_are_inflated_by_zlib(self):
        """ISA-L is optional (rootfs/oci_stream.c): with libisal.so.2 hidden (/dev/null bound
        over it in a mount namespace of the test's own), the image imports the same through
        libarchive's zlib, and `info` says so and how to get ISA-L."""
        found = [l.split("=>")[1].strip() for l in subprocess.run(
            ["ldconfig", "-p"], capture_output=True, text=True).stdout.splitlines()
            if "libisal.so.2 " in l]
        if not found:
            self.skipTest("libisal2 is not installed: zlib is the only path here, which the "
                          "other tests take")
        lib = os.path.realpath(found[0])
        env = dict(os.environ, NSBOX_DATA_DIR=self.dirs.data, NSBOX_STATE_DIR=self.dirs.state,
                   NSBOX_CACHE_DIR=self.dirs.cache)

        def hidden(*args):
            return subprocess.run(["unshare", "-m", "sh", "-ec",
                                   'mount --make-rprivate /; mount --bind /dev/null "$1"; '
                                   'shift; exec "$@"', "sh", lib, NSBOX, *args],
                                  env=env, capture_output=True, text=True, timeout=120)
        r = hidden("image", "import", "-q", "--name", "t/x:1", self.layout)
        self.assertEqual(r.returncode, 0, r.stderr)
        seen = self.nsbox("run", "--image", "t/x:1", "--", "sh", "-c", CHECK, check=True)
        self.nsbox("image", "rm", "t/x:1", check=True)
        self.assertEqual(self.layers(), [])
        again = self.nsbox("image", "import", "-q", "--name", "t/x:1", self.layout, check=True)
        self.assertEqual(r.stdout, text(again.stdout))  # the same image id
        want = self.nsbox("run", "--image", "t/x:1", "--", "sh", "-c", CHECK, check=True)
        self.assertEqual(seen.stdout, want.stdout)
        info = json.loads(hidden("info", "--json").stdout)
        c = [c for c in info["checks"] if c["name"] == "oci_images"][0]
        if c["ok"]:
            self.assertIn("gzip by zlib: apt-get install libisal2", c["detail"])

    def test_isal_of_another_release_is_not_used(self):
        """struct inflate_state is allocated by the build's <isa-l.h> and its layout changed
        between releases under the one soname (os/imagelibs.c): a libisal.so.2 whose real file
        is another release (a copy of the installed one named libisal.so.2.0.99, found first
        through LD_LIBRARY_PATH) is not called; gzip layers are inflated by zlib, the same
        image results, and `info` says why."""
        found = [l.split("=>")[1].strip() for l in subprocess.run(
            ["ldconfig", "-p"], capture_output=True, text=True).stdout.splitlines()
            if "libisal.so.2 " in l]
        if not found:
            self.skipTest("libisal2 is not installed: no ISA-L to refuse")
        libdir = os.path.join(self.src, "lib")
        os.makedirs(libdir)
        shutil.copyfile(os.path.realpath(found[0]), os.path.join(libdir, "libisal.so.2.0.99"))
        os.symlink("libisal.so.2.0.99", os.path.join(libdir, "libisal.so.2"))
        other = {"LD_LIBRARY_PATH": libdir}
        info = json.loads(self.nsbox("info", "--json", env=other, check=True).stdout)
        c = [c for c in info["checks"] if c["name"] == "oci_images"][0]
        self.assertIn("gzip by zlib: ISA-L not used: %s/libisal.so.2.0.99 is not the release"
                      % os.path.realpath(libdir), c["detail"])
        r = self.nsbox("image", "import", "-q", "--name", "t/x:1", self.layout, env=other)
        self.assertEqual(r.returncode, 0, r.stderr)
        seen = self.nsbox("run", "--image", "t/x:1", "--", "sh", "-c", CHECK, check=True)
        self.nsbox("image", "rm", "t/x:1", check=True)
        again = self.nsbox("image", "import", "-q", "--name", "t/x:1", self.layout, check=True)
        self.assertEqual(text(r.stdout), text(again.stdout))  # the same image id
        want = self.nsbox("run", "--image", "t/x:1", "--", "sh", "-c", CHECK, check=True)
        self.assertEqual(seen.stdout, want.stdout)
        info = json.loads(self.nsbox("info", "--json", check=True).stdout)
        c = [c for c in info["checks"] if c["name"] == "oci_images"][0]
        if c["ok"]:
            self.assertIn("gzip by ISA-L", c["detail"])

    def test_digest_mismatch_keeps_nothing(self):
        bad = os.path.join(self.src, "bad")
        oci_images.write_layout(bad, corrupt_layer=True)
        r = self.nsbox("image", "import", "--name", "t/bad:1", bad)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"digest mismatch", r.stderr)
        self.assertEqual([n for n in self.images() if n != ".refs"], [])
        self.assertEqual(self.layers(), [])  # nor the good layer below the corrupt one
        refs = os.path.join(self.dirs.data, "images", ".refs")
        self.assertEqual(os.listdir(refs) if os.path.isdir(refs) else [], [])
        # an archive member named by a digest it does not have
        oci_images.write_layout(bad)
        blobs = os.path.join(bad, "blobs", "sha256")
        victim = sorted(os.listdir(blobs))[0]
        with open(os.path.join(blobs, victim), "ab") as f:
            f.write(b" ")
        archive = os.path.join(self.src, "bad.tar")
        oci_images.tar_dir(bad, archive)
        r = self.nsbox("image", "import", archive)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"digest mismatch", r.stderr)
        self.assertEqual([n for n in self.images() if n != ".refs"], [])

    def test_a_config_or_manifest_blob_of_other_bytes_is_refused(self):
        # a layout directory whose JSON blob was edited in place, its name kept: the config's
        # environment (or the manifest) is not the image's, and nothing says so but its digest
        for which in ("config", "manifest"):
            bad = os.path.join(self.src, "edited-" + which)
            mdg = oci_images.write_layout(bad)
            blobs = os.path.join(bad, "blobs", "sha256")
            with open(os.path.join(blobs, mdg[7:])) as f:
                digest = json.load(f)["config"]["digest"] if which == "config" else mdg
            path = os.path.join(blobs, digest[7:])
            with open(path, "rb") as f:
                text = f.read()
            edited = text.replace(b"from-image", b"from-attacker") if which == "config" \
                else text.replace(b'"schemaVersion": 2', b'"schemaVersion":  2')
            self.assertNotEqual(edited, text)
            with open(path, "wb") as f:
                f.write(edited)
            r = self.nsbox("image", "import", "--name", f"t/{which}:1", bad)
            self.assertEqual(r.returncode, 125, (which, r.stderr))
            self.assertIn(f"digest mismatch: {which} {digest} has sha256".encode(), r.stderr)
            self.assertEqual([n for n in self.images() if n != ".refs"], [])

    def test_layer_blob_of_other_bytes_that_unpack_the_same_is_refused(self):
        # another gzip of the same tar: it decompresses and unpacks to what the config's
        # diff_id says, so only the blob's own digest tells it is not the manifest's blob
        bad = os.path.join(self.src, "regzipped")
        layer = oci_images.layer1()
        oci_images.write_layout(bad, layers=[layer])
        digest = oci_images.gz_digest(layer)
        other = gzip.compress(layer, mtime=12345)
        self.assertNotEqual(other, gzip.compress(layer, mtime=0))
        with open(os.path.join(bad, "blobs", "sha256", digest[7:]), "wb") as f:
            f.write(other)
        r = self.nsbox("image", "import", "--name", "t/regz:1", bad)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"digest mismatch: layer " + digest.encode() + b" has sha256", r.stderr)
        self.assertEqual([n for n in self.images() if n != ".refs"], [])
        self.assertEqual(self.layers(), [])

    def test_a_layer_that_unpacks_to_other_than_its_diff_id_is_refused(self):
        # the blob is the manifest's (its digest matches) but unpacks to another tar than the
        # config's diff_id says: kept under the chain id the config gives, it would stand in
        # for that layer in every image of the store that shares it
        bad = os.path.join(self.src, "otherdiff")
        oci_images.write_layout(bad, layers=[oci_images.layer1()],
                                gz=[gzip.compress(oci_images.layer1(python=False), mtime=0)])
        r = self.nsbox("image", "import", "--name", "t/diff:1", bad)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"unpacks to sha256", r.stderr)
        self.assertEqual([n for n in self.images() if n != ".refs"], [])
        self.assertEqual(self.layers(), [])

    def test_a_layer_cut_short_is_a_broken_tar_and_keeps_nothing(self):
        # the blob is what the manifest says (its digests match): its tar ends in the second
        # entry's header (the first's is 512 bytes, and its byte of data a block)
        bad = os.path.join(self.src, "short")
        whole = oci_images.tar_bytes([("a", b"x"), ("b", b"y")])
        oci_images.write_layout(bad, layers=[whole[:1024 + 100]])
        r = self.nsbox("image", "import", "--name", "t/short:1", bad)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"is not a valid tar archive", r.stderr)
        self.assertEqual([n for n in self.images() if n != ".refs"], [])
        self.assertEqual(self.layers(), [])

    def test_missing_reference_with_pull_never(self):
        r = self.nsbox("run", "--image", "t/nothere:1", "--", "true", env={"NSBOX_PULL": "never"})
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"NSBOX_PULL=never: image docker.io/t/nothere:1 is not in the store: ",
                      r.stderr)
        self.assertEqual(r.stderr.count(b"nsbox image pull"), 1, r.stderr)

    def test_a_missing_tag_names_the_stored_ones_of_its_repository(self):
        # a CI job (or a machine offline) that imported agent:1.4 and runs --image agent
        # (latest): the registry's error alone does not say the image is there under 1.4
        self.nsbox("image", "import", "-q", "--name", "127.0.0.1:1/t/agent:1.4", self.layout,
                   check=True)
        self.nsbox("image", "tag", "127.0.0.1:1/t/agent:1.4", "127.0.0.1:1/t/agent:2",
                   check=True)
        self.nsbox("image", "tag", "127.0.0.1:1/t/agent:1.4", "127.0.0.1:1/t/agent-b:1",
                   check=True)
        stored = b"; the store has 127.0.0.1:1/t/agent:1.4, 127.0.0.1:1/t/agent:2"
        nothing = {"NSBOX_SKOPEO": os.path.join(self.src, "no-skopeo")}
        for args, env in ((["--image", "127.0.0.1:1/t/agent"], nothing),
                          (["--image", "127.0.0.1:1/t/agent:3", "--pull", "never"], None)):
            r = self.nsbox("run", *args, "--", "true", env=env)
            self.assertEqual(r.returncode, 125, r.stderr)
            self.assertTrue(r.stderr.rstrip().endswith(stored), r.stderr)
            self.assertNotIn(b"agent-b", r.stderr)
        # another repository, whose name only begins alike, is not offered
        r = self.nsbox("run", "--image", "127.0.0.1:1/t/age", "--", "true", env=nothing)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertNotIn(b"the store has", r.stderr)

    def test_pull_of_a_bare_word_says_what_to_write(self):
        # `--image python` looks for the stored image "python", never docker.io/library/python:
        # a pull of the bare word would store what no --image finds; refused before skopeo
        r = self.nsbox("image", "pull", "-q", "python",
                       env={"NSBOX_SKOPEO": os.path.join(self.src, "no-skopeo")})
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"write python:latest", r.stderr)
        self.assertEqual(self.images(), [])

    def test_pull_without_skopeo_says_how_to_install_it(self):
        # no registry is reached: the transport is missing before anything is asked
        r = self.nsbox("image", "pull", "-q", "127.0.0.1:1/t/x:1",
                       env={"NSBOX_SKOPEO": os.path.join(self.src, "no-skopeo")})
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"skopeo is not installed (apt-get install skopeo)", r.stderr)
        self.assertEqual(self.images(), [])

    def test_a_registrys_words_reach_the_error_without_their_controls(self):
        # skopeo's last line carries the registry's error text: its terminal controls (ESC,
        # OSC, 8-bit CSI raw and as UTF-8) reach pull's error as '?', its UTF-8 as it is
        skopeo = os.path.join(self.src, "skopeo-says")
        with open(skopeo, "w") as f:
            f.write("#!/bin/sh\nprintf 'time=\"x\" level=fatal msg=\"denied \\033]0;t\\007"
                    "\\033[2J\\2332J\\302\\23331m \\342\\206\\222\"\\n' >&2; exit 1\n")
        os.chmod(skopeo, 0o755)
        r = self.nsbox("image", "pull", "-q", "127.0.0.1:1/t/x:1", env={"NSBOX_SKOPEO": skopeo})
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("(skopeo: denied ?]0;t??[2J?2J?31m \u2192)".encode(), r.stderr)
        for bad in (b"\x1b", b"\x07", b"\x9b"):
            self.assertNotIn(bad, r.stderr)


@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
@unittest.skipUnless(is_root(), "imports as root and runs as the unprivileged test user")
class PerUserStore(unittest.TestCase):
    """A user whose image was imported with sudo is in root's store, which the user can neither
    use nor list (its references are 0700): the user's not-found error says that stores are per
    user and how to bring the image over, without looking into root's store."""

    REF = "127.0.0.1:1/t/agent:1.4"

    def setUp(self):
        self.user = ensure_test_user()
        self.root_dirs = Dirs()
        self.addCleanup(self.root_dirs.cleanup)
        self.user_dirs = Dirs(owner=self.user)
        self.addCleanup(self.user_dirs.cleanup)
        self.src = tempfile.mkdtemp(prefix="nsbox-oci-src-")
        self.addCleanup(shutil.rmtree, self.src, True)
        self.layout = os.path.join(self.src, "layout")
        oci_images.write_layout(self.layout)
        os.chmod(self.src, 0o755)
        self.nothing = {"NSBOX_SKOPEO": os.path.join(self.src, "no-skopeo")}

    def as_user(self, *args, env=None, check=False):
        return run_nsbox(list(args), self.user_dirs, user=self.user, extra_env=env, timeout=120,
                         check=check)

    def test_a_user_is_told_images_are_stored_per_user(self):
        run_nsbox(["image", "import", "-q", "--name", self.REF, self.layout], self.root_dirs,
                  timeout=120, check=True)
        hint = ("; images are stored per user: one pulled or imported with sudo is in root's "
                f"store, not in yours ({self.user_dirs.data}/images): pull or import it as "
                f"yourself, e.g. `docker save {self.REF} | nsbox image import -`")
        for cmd, args, env in ((["run"], ["--pull", "never"], None),
                               (["run"], [], self.nothing),  # the pull's own error first
                               (["create"], ["--pull", "never"], None)):
            with self.subTest(cmd=cmd, args=args):
                tail = ["--", "true"] if cmd == ["run"] else []
                r = self.as_user(*cmd, "--image", self.REF, *args, *tail, env=env)
                self.assertEqual(r.returncode, 125, r.stderr)
                self.assertTrue(r.stderr.decode().rstrip("\n").endswith(hint), r.stderr)
                if args:  # pull=never: one way in, the hint's, said once
                    self.assertEqual(r.stderr.decode(), f"nsbox: pull=never: image {self.REF} "
                                     f"is not in the store{hint}\n")
        # root's store is its own: root is not told
        r = run_nsbox(["run", "--image", "127.0.0.1:1/t/other:1", "--pull", "never", "--",
                       "true"], self.root_dirs)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertEqual(r.stderr, b"nsbox: pull=never: image 127.0.0.1:1/t/other:1 is not in "
                         b"the store: `nsbox image pull 127.0.0.1:1/t/other:1` or "
                         b"`nsbox image import`\n")
        # a user whose store has the repository under another tag is shown those instead
        self.as_user("image", "import", "-q", "--name", "127.0.0.1:1/t/agent:1.3", self.layout,
                     check=True)
        r = self.as_user("run", "--image", self.REF, "--pull", "never", "--", "true")
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertTrue(r.stderr.rstrip().endswith(b"; the store has 127.0.0.1:1/t/agent:1.3"),
                        r.stderr)
        self.assertEqual(r.stderr.count(b"nsbox image pull"), 1, r.stderr)
        self.assertNotIn(b"stored per user", r.stderr)
        # imported as the user, it is in the user's own store
        self.as_user("image", "import", "-q", "--name", self.REF, self.layout, check=True)
        r = self.as_user("image", "ls")
        self.assertIn(self.REF.encode(), r.stdout, r.stderr)


@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
@unittest.skipIf(oci_registry.missing_tools(), "needs %s" % ", ".join(oci_registry.NEEDS))
class Registry(unittest.TestCase):
    """A pull from a registry on 127.0.0.1 over plain HTTP: --tls-verify=false, or the
    registries.conf entry the error gives, in a drop-in directory of the test's HOME (Debian's
    skopeo 1.9 reads no CONTAINERS_REGISTRIES_CONF)."""

    def test_push_with_skopeo_pull_with_nsbox(self):
        dirs = Dirs()
        self.addCleanup(dirs.cleanup)
        work = tempfile.mkdtemp(prefix="nsbox-registry-")
        self.addCleanup(shutil.rmtree, work, True)
        reg = oci_registry.Registry(work)
        self.addCleanup(reg.stop)
        layout = os.path.join(work, "layout")
        oci_images.write_layout(layout)
        ref = reg.push(layout, "team/bb:1")
        r = run_nsbox(["image", "pull", "-q", "--tls-verify=false", ref], dirs, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run_nsbox(["run", "--image", ref, "--", "sh", "-c", "echo $FOO"], dirs, timeout=120)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, b"from-image"), r.stderr)
        # --tls-verify=true is skopeo's default spelled out: it verifies
        r = run_nsbox(["image", "pull", "-q", "--tls-verify=true", ref], dirs, timeout=120)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"speaks plain HTTP", r.stderr)
        # run's own pull verifies TLS: the fix it gives is the pull that does not
        r = run_nsbox(["run", "--pull", "always", "--image", ref, "--", "true"], dirs,
                      timeout=120)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"speaks plain HTTP", r.stderr)
        self.assertIn(("fix: `nsbox image pull --tls-verify=false %s`" % ref).encode(), r.stderr)
        self.assertNotIn(b'\\"', r.stderr)  # skopeo's words unquoted
        self.said_once_in_registries_conf(dirs, reg, layout, ref, r.stderr.decode())
        self.assertNotIn(b"pulling", r.stderr)  # on a pipe, the command's words alone
        # on a terminal, that the run is pulling (for minutes, with a big image) before it fails
        code, out, _, _ = in_a_terminal(["run", "--pull", "always", "--image", ref, "--",
                                         "true"], dirs, timeout=120)
        self.assertEqual(code, 125)
        self.assertIn(("nsbox: pulling %s (pull=always)" % ref).encode(), out)
        # create pulls before it forks the supervisor, which has no terminal: saying so
        other = ref[:-1] + "7"
        code, out, _, _ = in_a_terminal(["create", "--image", other], dirs, timeout=120)
        self.assertEqual(code, 125)
        self.assertIn(("nsbox: pulling %s (not in the store)" % other).encode(), out)
        self.assertIn(b"speaks plain HTTP", out)
        # a tag the registry does not have: the cause, named
        r = run_nsbox(["image", "pull", "-q", "--tls-verify=false", ref[:-1] + "9"], dirs,
                      timeout=120)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"unknown tag", r.stderr)

    def said_once_in_registries_conf(self, dirs, reg, layout, ref, err):
        """The error's other fix, the registries.conf entry, run as the error gives it (its
        mkdir included) in a HOME of the test's where no drop-in directory exists yet (/etc is
        not touched): run, create and the Python client then pull from the plain-HTTP registry
        without --tls-verify."""
        host = reg.host
        line = "`mkdir -p ~/.config/containers/registries.conf.d && echo 'registry = " \
               "[{location = \"%s\", insecure = true}]' > " \
               "~/.config/containers/registries.conf.d/insecure-%s.conf`" % (host, host)
        self.assertIn(line, err)
        self.assertIn("(for every user, as root: /etc/containers/registries.conf.d/)", err)
        home = os.path.join(reg.work, "home")
        os.makedirs(home)
        subprocess.run(["sh", "-c", line.strip("`")], env=dict(os.environ, HOME=home),
                       check=True)
        self.assertTrue(os.path.isfile(os.path.join(
            home, ".config", "containers", "registries.conf.d", "insecure-%s.conf" % host)))
        env = {"HOME": home}
        r = run_nsbox(["run", "--pull", "always", "--image", ref, "--", "sh", "-c", "echo $FOO"],
                      dirs, extra_env=env, timeout=120)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, b"from-image"), r.stderr)
        other = reg.push(layout, "team/bb:2")  # not in the store: create pulls it
        r = run_nsbox(["create", "--image", other], dirs, extra_env=env, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        r = run_nsbox(["exec", sid, "--", "sh", "-c", "echo $FOO"], dirs, timeout=60)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, b"from-image"), r.stderr)
        run_nsbox(["rm", sid], dirs, timeout=60)
        sys.path.insert(0, os.path.join(os.environ.get("NSBOX_SOURCE_DIR", "."), "python"))
        import nsbox
        box = nsbox.LocalSandbox(image=reg.push(layout, "team/bb:3"), binary=NSBOX,
                                 nsbox_env=dirs.env(env))
        with box.open() as sb:
            self.assertEqual(sb.execute("echo $FOO").stdout, "from-image\n")


@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
@unittest.skipIf(oci_registry.missing_tools(), "needs %s" % ", ".join(oci_registry.NEEDS))
@unittest.skipIf(not os.path.isdir("/etc/containers"), "needs /etc/containers (skopeo's)")
class SecureRegistry(unittest.TestCase):
    """A registry with TLS (a lab CA) and htpasswd auth. nsbox runs in a private mount
    namespace whose /etc/containers/certs.d/127.0.0.1:PORT/ca.crt is the lab CA (the host's
    files are not touched), with REGISTRY_AUTH_FILE naming an auth.json the test writes."""

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="nsbox-registry-tls-")
        cls.reg = oci_registry.Registry(cls.work, tls=True, user="agent", password="s3cret!")
        layout = os.path.join(cls.work, "layout")
        oci_images.write_layout(layout)
        cls.ref = cls.reg.push(layout, "team/bb:1")
        cls.auth = cls.reg.auth_file(os.path.join(cls.work, "auth.json"))
        cls.bad_auth = cls.reg.auth_file(os.path.join(cls.work, "bad-auth.json"), "wrong")

    @classmethod
    def tearDownClass(cls):
        cls.reg.stop()
        shutil.rmtree(cls.work, True)

    def setUp(self):
        self.dirs = Dirs()
        self.addCleanup(self.dirs.cleanup)

    def nsbox(self, *args, auth=None, trust=True, env=None):
        extra = {"REGISTRY_AUTH_FILE": auth or self.auth}
        extra.update(env or {})
        return run_nsbox(list(args), self.dirs, extra_env=extra, timeout=120,
                         wrap=self.reg.certs_wrap(trust))

    def oci_images(self):
        d = os.path.join(self.dirs.data, "images")
        return [n for n in os.listdir(d) if n.startswith("oci-")] if os.path.isdir(d) else []

    def test_pull_with_credentials_and_ca(self):
        r = self.nsbox("image", "pull", "-q", self.ref)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.nsbox("run", "--image", self.ref, "--", "sh", "-c", "echo $FOO")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, b"from-image"), r.stderr)

    def test_wrong_password_names_the_credential_file(self):
        r = self.nsbox("image", "pull", "-q", self.ref, auth=self.bad_auth)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"unauthorized", r.stderr)
        self.assertIn(("REGISTRY_AUTH_FILE=%s" % self.bad_auth).encode(), r.stderr)
        self.assertEqual(self.oci_images(), [])

    def test_unknown_tag(self):
        r = self.nsbox("image", "pull", "-q", self.ref[:-1] + "9")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"unknown tag", r.stderr)

    def test_untrusted_certificate_names_the_ca_paths_searched(self):
        r = self.nsbox("image", "pull", "-q", self.ref, trust=False)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"TLS failure", r.stderr)
        self.assertIn(("/etc/containers/certs.d/%s/" % self.reg.host).encode(), r.stderr)
        # run and create have no --tls-verify: the fix names the pull that has it
        self.assertIn(("`nsbox image pull --tls-verify=false %s`" % self.ref).encode(), r.stderr)
        self.assertEqual(self.oci_images(), [])

    def test_pull_policies(self):
        # never: a reference that is not stored is refused, by run, create and a spec
        for cmd in (["run", "--pull", "never", "--image", self.ref, "--", "true"],
                    ["create", "--pull=never", "--image", self.ref]):
            r = self.nsbox(*cmd)
            self.assertEqual(r.returncode, 125, r.stdout)
            self.assertIn(b"pull=never", r.stderr)
            self.assertIn(b"not in the store", r.stderr)
        spec = json.dumps({"image": self.ref, "pull": "never"}).encode()
        r = run_nsbox(["run", "--spec", "-", "--", "true"], self.dirs, input=spec,
                      wrap=self.reg.certs_wrap(), extra_env={"REGISTRY_AUTH_FILE": self.auth})
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"pull=never", r.stderr)
        self.assertEqual(self.oci_images(), [])
        # the flag wins over NSBOX_PULL, and its usage errors name it
        r = self.nsbox("run", "--pull", "sometimes", "--image", self.ref, "--", "true")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"'pull': 'sometimes' is not a pull policy", r.stderr)
        r = self.nsbox("run", "--pull", "missing", "--image", self.ref, "--", "sh", "-c",
                       "echo $FOO", env={"NSBOX_PULL": "never"})
        self.assertEqual((r.returncode, r.stdout.strip()), (0, b"from-image"), r.stderr)
        # the tag moves: missing keeps the stored image, always follows the tag
        work = tempfile.mkdtemp(prefix="nsbox-oci-v2-")
        self.addCleanup(shutil.rmtree, work, True)
        v2 = os.path.join(work, "layout")
        oci_images.write_layout(v2, env=["PATH=/usr/bin:/bin", "FOO=v2"])
        self.reg.push(v2, "team/bb:moving")
        r = self.nsbox("run", "--image", self.ref[:-1] + "moving", "--", "sh", "-c", "echo $FOO")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, b"v2"), r.stderr)
        self.reg.push(os.path.join(self.work, "layout"), "team/bb:moving")
        for cmd, want in ((["run"], b"v2"), (["run", "--pull", "always"], b"from-image")):
            r = self.nsbox(*cmd, "--image", self.ref[:-1] + "moving", "--", "sh", "-c",
                           "echo $FOO")
            self.assertEqual((r.returncode, r.stdout.strip()), (0, want), (cmd, r.stderr))
        # NSBOX_PULL=always, when no flag says otherwise, pulls too (v2 again)
        self.reg.push(v2, "team/bb:moving")
        r = self.nsbox("run", "--image", self.ref[:-1] + "moving", "--", "sh", "-c", "echo $FOO",
                       env={"NSBOX_PULL": "always"})
        self.assertEqual((r.returncode, r.stdout.strip()), (0, b"v2"), r.stderr)
        # and create --pull always (the first image again)
        self.reg.push(os.path.join(self.work, "layout"), "team/bb:moving")
        r = self.nsbox("create", "--pull", "always", "--image", self.ref[:-1] + "moving")
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        r = run_nsbox(["exec", sid, "--", "sh", "-c", "echo $FOO"], self.dirs)
        run_nsbox(["rm", sid], self.dirs, check=True)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, b"from-image"), r.stderr)

    def test_create_pull_always_pulls_before_its_supervisor(self):
        # create --pull always pulls a stored reference again, as run does: in create's own
        # process, before its supervisor is forked, so that a terminal sees that it is pulling
        # (for minutes, with a big image); on a pipe the id alone is printed. The supervisor
        # then pulls nothing: a skopeo that logs its calls (NSBOX_SKOPEO) counts the pulls.
        work = tempfile.mkdtemp(prefix="nsbox-oci-create-")
        self.addCleanup(shutil.rmtree, work, True)
        v2 = os.path.join(work, "layout")
        oci_images.write_layout(v2, env=["PATH=/usr/bin:/bin", "FOO=v2"])
        log, skopeo = os.path.join(work, "pulls.log"), os.path.join(work, "skopeo")
        with open(skopeo, "w") as f:
            f.write('#!/bin/sh\necho "$*" >> %s\nexec skopeo "$@"\n' % log)
        os.chmod(skopeo, 0o755)
        env = {"NSBOX_SKOPEO": skopeo}

        def pulls():
            with open(log) as f:
                return len(f.readlines())

        def foo(sid):
            r = run_nsbox(["exec", sid, "--", "sh", "-c", "echo $FOO"], self.dirs)
            run_nsbox(["rm", sid], self.dirs, check=True)
            return r.stdout.strip()
        ref = self.reg.push(os.path.join(self.work, "layout"), "team/bb:create")
        r = self.nsbox("image", "pull", "-q", ref, env=env)
        self.assertEqual((r.returncode, pulls()), (0, 1), r.stderr)
        # the tag moves; on a pipe: the new image, and nothing but the id
        self.reg.push(v2, "team/bb:create")
        r = self.nsbox("create", "--pull", "always", "--image", ref, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, b"")
        self.assertRegex(r.stdout, rb"^[0-9a-f]{12}\n$")
        self.assertEqual(foo(r.stdout.decode().strip()), b"v2")
        self.assertEqual(pulls(), 2)
        # it moves back; on a terminal: that it is pulling, then the id
        self.reg.push(os.path.join(self.work, "layout"), "team/bb:create")
        code, out, _, _ = in_a_terminal(
            ["create", "--pull", "always", "--image", ref], self.dirs, timeout=120,
            extra_env=dict(env, REGISTRY_AUTH_FILE=self.auth), wrap=self.reg.certs_wrap())
        self.assertEqual(code, 0, out)
        lines = out.decode().replace("\r", "").splitlines()
        self.assertEqual(len(lines), 2, lines)
        self.assertEqual(lines[0], "nsbox: pulling %s (pull=always)" % ref)
        self.assertRegex(lines[1], "^[0-9a-f]{12}$")
        self.assertEqual(foo(lines[1]), b"from-image")
        self.assertEqual(pulls(), 3)

    def test_python_client_pull(self):
        sys.path.insert(0, os.path.join(os.environ.get("NSBOX_SOURCE_DIR", "."), "python"))
        import nsbox
        env = self.dirs.env({"REGISTRY_AUTH_FILE": self.auth})
        box = nsbox.LocalSandbox(image=self.ref, pull="never", binary=NSBOX, nsbox_env=env)
        self.assertEqual(box.spec()["pull"], "never")
        with self.assertRaises(nsbox.errors.SandboxCreationError) as cm:
            with box.open():
                pass
        self.assertIn("pull=never", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
