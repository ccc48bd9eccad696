"""End to end: the shared store of OCI layers (docs/images.md). Two images with a
common base hold its files once, on disk and in the sandboxes (one inode, so one page cache);
20 sandboxes of one image add nothing to the store; `rm` keeps a layer another image uses and
`prune` removes the layers no image names; a half-unpacked layer left by a crash is never used;
an image stored in the older merged form keeps working; an unprivileged user's store is made of
shared layers too, its sandboxes' root an overlay mounted in a user namespace. Disk is counted
(blocks and files of the store, each inode once), never timed."""
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import unittest

import oci_images
from nsbox_test import CGROUP_V1, CGROUP_V2_ONLY, NSBOX, AsTestUser, Dirs, run_nsbox

BASE = None  # layer 1 of the test images: busybox and its links, about 1-2 MB


def setUpModule():
    global BASE
    if not os.path.exists(oci_images.BUSYBOX):
        raise unittest.SkipTest("needs busybox-static (/bin/busybox)")
    if os.geteuid() != 0:
        raise unittest.SkipTest("counts root's store and switches to a test user: needs root")
    BASE = oci_images.layer1()


def disk(path):
    """Blocks (bytes) and entries below path, each inode counted once."""
    seen, size, entries = set(), 0, 0
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            st = os.lstat(os.path.join(root, n))
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            size += st.st_blocks * 512
            entries += 1
    return size, entries


def top(name):
    """A small top layer of its own: /NAME.txt."""
    return oci_images.tar_bytes([(name + ".txt", b"image " + name.encode() + b"\n")])


@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
class SharedLayers(unittest.TestCase):
    def setUp(self):
        self.dirs = Dirs()
        self.addCleanup(self.dirs.cleanup)
        self.src = tempfile.mkdtemp(prefix="nsbox-oci-layers-")
        self.addCleanup(shutil.rmtree, self.src, True)
        self.store = os.path.join(self.dirs.data, "images")
        self.busybox_size = os.path.getsize(oci_images.BUSYBOX)

    def nsbox(self, *args, env=None, check=False):
        return run_nsbox(list(args), self.dirs, extra_env=env, timeout=120, check=check)

    def import_image(self, name, layers, ref=None, env=None):
        layout = os.path.join(self.src, name)
        oci_images.write_layout(layout, layers=layers)
        args = ["image", "import", "-q"] + (["--name", ref] if ref else []) + [layout]
        return self.nsbox(*args, env=env, check=True).stdout.decode().split()[-1]

    def busyboxes(self):
        """The files of the store that are the image's busybox (its size), each inode once."""
        seen = set()
        for root, _, files in os.walk(self.store):
            for n in files:
                st = os.lstat(os.path.join(root, n))
                if n == "busybox" and st.st_size == self.busybox_size:
                    seen.add(st.st_ino)
        return seen

    def sandbox_inode(self, ref):
        r = self.nsbox("run", "--image", ref, "--", "sh", "-c", "stat -c %i /bin/busybox; cat /*.txt")
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.decode().split("\n", 1)

    def test_common_base_is_stored_once_and_shared_by_sandboxes(self):
        self.import_image("b", [BASE, top("b")], "t/b:1")
        self.assertEqual(len(oci_images.stored_layers(self.dirs.data)), 2)
        before, entries_before = disk(self.store)
        self.import_image("c", [BASE, top("c")], "t/c:1")
        after, entries_after = disk(self.store)
        # one more layer (c's top), not two: the base is found by its chain id, the OCI
        # image spec's (a layer's on the bottom one: sha256 of "<bottom's> <its diff_id>")
        base = oci_images.sha(BASE)
        chains = {base[7:]} | {hashlib.sha256((base + " " + oci_images.sha(top(n))).encode())
                               .hexdigest() for n in "bc"}
        self.assertEqual(set(oci_images.stored_layers(self.dirs.data)), chains)
        self.assertEqual(len(self.busyboxes()), 1)
        # the second image costs its own top layer, /etc and metadata: a few dozen small
        # files, far less than the base's busybox, which a merged store would hold again
        self.assertLess(after - before, self.busybox_size // 4, (before, after))
        self.assertLess(entries_after - entries_before, 40)
        # inside, both see the base's one file: one inode, so one page cache
        (ino_b, txt_b), (ino_c, txt_c) = self.sandbox_inode("t/b:1"), self.sandbox_inode("t/c:1")
        self.assertEqual((txt_b, txt_c), ("image b\n", "image c\n"))
        self.assertEqual(ino_b, ino_c)
        self.assertEqual(int(ino_b), self.busyboxes().pop())

    def test_twenty_sandboxes_add_nothing_to_the_store(self):
        self.import_image("b", [BASE, top("b")], "t/b:1")
        before = disk(self.store)
        config = os.path.join(self.dirs.base, "tmpfs-ws.json")
        with open(config, "w") as f:  # workspaces in memory: only the image's disk is counted
            json.dump({"pool": {"size": 0}, "workspace": {"fs": "tmpfs"}}, f)
        env = {"NSBOX_CONFIG": config}
        ids = []
        try:
            for _ in range(20):
                r = self.nsbox("create", "--image", "t/b:1", env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                ids.append(r.stdout.decode().strip())
            self.assertEqual(disk(self.store), before)
            inodes = set()
            for sid in (ids[0], ids[-1]):
                # the image's entries are the overlay of its layers, read-only
                r = self.nsbox("exec", sid, "--", "sh", "-c",
                               "stat -c %i /bin/busybox; cat /proc/self/mountinfo", env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                ino, mounts = r.stdout.decode().split("\n", 1)
                fs = [m.split(" - ")[1].split()[0] for m in mounts.splitlines()
                      if m.split()[4] == "/bin"]
                self.assertEqual(fs, ["overlay"], mounts)
                inodes.add(int(ino))
            self.assertEqual(inodes, self.busyboxes())  # the store's one file, in each
        finally:
            for sid in ids:
                self.nsbox("rm", sid, env=env)
        self.assertEqual(disk(self.store), before)

    def test_rm_keeps_a_shared_layer_and_prune_removes_unnamed_ones(self):
        self.import_image("b", [BASE, top("b")], "t/b:1")
        self.import_image("c", [BASE, top("c")], "t/c:1")
        base_chain = oci_images.sha(BASE)[7:]  # the bottom layer's chain id is its diff_id
        self.assertIn(base_chain, oci_images.stored_layers(self.dirs.data))
        self.nsbox("image", "rm", "t/b:1", check=True)
        layers = oci_images.stored_layers(self.dirs.data)
        self.assertEqual(len(layers), 2)  # b's top went; the base stays for c
        self.assertIn(base_chain, layers)
        self.assertEqual(self.sandbox_inode("t/c:1")[1], "image c\n")
        # an image no reference names, and a layer no image names
        self.import_image("d", [BASE, top("d")])
        stray = os.path.join(self.store, ".layers", "ab" * 32)
        os.makedirs(os.path.join(stray, "diff"))
        self.assertEqual(len(oci_images.stored_layers(self.dirs.data)), 4)
        r = self.nsbox("image", "prune", check=True)
        self.assertIn(b"removed 1 unreferenced image and 2 unreferenced layers", r.stdout)
        self.assertEqual(sorted(oci_images.stored_layers(self.dirs.data)), sorted(layers))
        self.nsbox("image", "rm", "t/c:1", check=True)
        self.assertEqual(oci_images.stored_layers(self.dirs.data), [])
        self.assertEqual(self.busyboxes(), set())

    def test_half_unpacked_layer_is_never_used(self):
        # what a crash during an unpack leaves: the layer under a temporary name, by a process
        # that is gone, holding a truncated busybox
        dead = subprocess.Popen(["true"])
        dead.wait()
        chain = oci_images.sha(BASE)[7:]
        half = os.path.join(self.store, ".layers", ".tmp-%s-%d" % (chain, dead.pid))
        os.makedirs(os.path.join(half, "diff", "bin"))
        with open(os.path.join(half, "diff", "bin", "busybox"), "wb") as f:
            f.write(b"\x7fELF truncated")
        self.import_image("b", [BASE, top("b")], "t/b:1")
        self.assertFalse(os.path.exists(half))  # swept by the import
        self.assertEqual(len(self.busyboxes()), 1)  # unpacked again, whole
        self.assertEqual(self.sandbox_inode("t/b:1")[1], "image b\n")

    def test_entry_wins_over_its_whiteout_in_one_layer_in_either_order(self):
        """A layer is unpacked in one reading: a whiteout of a name the same layer has (before
        or after it in the tar) hides only the layers below, as Docker applies it."""
        upper = oci_images.tar_bytes([("keep/gone", b"mine, before\n"), ("keep/.wh.gone", b""),
                                      ("keep/.wh.x", b""), ("keep/x", b"mine, after\n")])
        self.import_image("w", [BASE, upper], "t/w:1")
        r = self.nsbox("run", "--image", "t/w:1", "--", "sh", "-c", "cat /keep/gone /keep/x")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"mine, before\nmine, after\n")

    def assert_nothing_kept(self):
        self.assertEqual([n for n in os.listdir(self.store) if n.startswith(("oci-", ".tmp-"))],
                         [])
        self.assertEqual(oci_images.stored_layers(self.dirs.data), [])
        self.assertEqual([n for n in os.listdir(os.path.join(self.store, ".layers"))
                          if n.startswith((".tmp-", ".del-"))], [])

    def test_failing_layer_stops_the_other_and_keeps_nothing(self):
        """Two layers unpacked side by side: the top one is corrupt and fails at once, while
        the bottom one (thousands of files) is still unpacking. The bottom one stops, and
        neither is stored, even while another import holds the layer store (so that the
        collection a failed import runs cannot remove what it left); the error is the corrupt
        layer's, not the stopped one's."""
        many = oci_images.tar_bytes([("many", b"", 0o755, tarfile.DIRTYPE)] +
                                    [("many/f%05d" % i, b"x") for i in range(5000)])
        layout = os.path.join(self.src, "bad-top")
        oci_images.write_layout(layout, layers=[many, top("b")], corrupt_layer=True)
        os.makedirs(os.path.join(self.store, ".layers"), exist_ok=True)
        with open(os.path.join(self.store, ".layers", ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)  # another import, as far as collection can tell
            r = self.nsbox("image", "import", "-q", layout, env={"NSBOX_OCI_JOBS": "2"})
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"digest mismatch: layer " + oci_images.gz_digest(top("b")).encode(),
                      r.stderr)
        self.assertNotIn(b"stopped", r.stderr)
        self.assert_nothing_kept()

    def test_failing_bottom_layer_fails_the_layer_that_links_to_it(self):
        """The top layer hard-links a file of the bottom one, so it waits for the bottom one
        to be whole; the bottom one is corrupt: both fail, the error is the bottom one's."""
        layout = os.path.join(self.src, "bad-bottom")
        oci_images.write_layout(layout, layers=[BASE, oci_images.layer2()])
        blobs = os.path.join(layout, "blobs", "sha256")
        bottom = oci_images.gz_digest(BASE)
        with open(os.path.join(blobs, bottom[7:]), "r+b") as f:  # its bytes, not its name
            f.seek(os.path.getsize(f.name) // 2)
            f.write(b"\0corrupt\0")
        r = self.nsbox("image", "import", "-q", layout, env={"NSBOX_OCI_JOBS": "2"})
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"digest mismatch: layer " + bottom.encode(), r.stderr)
        self.assert_nothing_kept()

    def test_image_stored_merged_keeps_working(self):
        """An image imported before layers were shared (a merged rootfs/, no `layers`) runs as
        it did, owners included, and is removed like any other."""
        self.import_image("old", [BASE, oci_images.layer2()], "t/old:1",
                          env={"NSBOX_OCI_LAYOUT": "merged"})
        image = [os.path.join(self.store, n) for n in os.listdir(self.store)
                 if n.startswith("oci-")][0]
        self.assertFalse(os.path.exists(os.path.join(image, "layers")))
        self.assertTrue(os.path.exists(os.path.join(image, "rootfs", "bin", "busybox")))
        self.assertEqual(oci_images.stored_layers(self.dirs.data), [])
        r = self.nsbox("run", "--image", "t/old:1", "--", "sh", "-c",
                       "id -un; ls /opq; stat -c %u /etc/mine; cat /top.txt")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode().split("\n"),
                         ["appuser", "c", "1000", "at the top", ""])
        self.nsbox("image", "rm", "t/old:1", check=True)
        self.assertEqual([n for n in os.listdir(self.store) if n.startswith("oci-")], [])


@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
@unittest.skipIf(not (CGROUP_V1 or CGROUP_V2_ONLY),
                 "cgroup delegation for the test user needs v1 memory and pids hierarchies, or "
                 "cgroup v2 alone")
class Unprivileged(AsTestUser):
    """An unprivileged user's store: layers shared, a sandbox's root their overlay, mounted in
    a user namespace, with Docker's layer semantics."""

    def setUp(self):
        super().setUp()
        self.src = tempfile.mkdtemp(prefix="nsbox-oci-layers-")
        os.chmod(self.src, 0o755)
        self.addCleanup(shutil.rmtree, self.src, True)

    def nsbox(self, *args):
        return self.run_as_user(list(args), timeout=120)

    def test_layers_shared_and_overlaid_in_a_user_namespace(self):
        for name, layers in (("a", [BASE, oci_images.layer2()]), ("b", [BASE, top("b")])):
            layout = os.path.join(self.src, name)
            oci_images.write_layout(layout, layers=layers)
            r = self.nsbox("image", "import", "-q", "--name", "t/%s:1" % name, layout)
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(oci_images.stored_layers(self.dirs.data)), 3)  # one base
        r = self.nsbox("run", "--image", "t/a:1", "--", "sh", "-c",
                       "id -un; ls /opq; ls /keep; stat -c %h /bin/hl; cat /top.txt; "
                       "cat /proc/self/mountinfo")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().split("\n")
        # opaque: only c; whiteout: gone is gone; the hard link across layers: one file
        self.assertEqual(lines[:6], ["appuser", "c", "added", "x", "2", "at the top"])
        fs = [m.split(" - ")[1].split()[0] for m in lines[6:] if m and m.split()[4] == "/bin"]
        self.assertEqual(fs, ["overlay"], r.stdout)
        for name in ("a", "b"):  # the user's layers go with the images that used them
            r = self.nsbox("image", "rm", "t/%s:1" % name)
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(oci_images.stored_layers(self.dirs.data), [])

    def test_kernel_refusing_the_overlay_gives_a_merged_image_that_works(self):
        """Where the kernel refuses this user's overlay, an import says so and stores the
        image merged, and its sandboxes run. The refusal is the kernel's own: the user's store
        is on an overlay of an overlay (made by root, in a mount namespace of each command's
        own), and overlayfs stacks at most two deep (FILESYSTEM_MAX_STACK_DEPTH), so the
        overlay of the image's layers, a third, cannot be mounted."""
        base = os.path.join(self.src, "stack")
        for d in ("l1", "l2", "a", "upper", "work"):
            os.makedirs(os.path.join(base, d))
        os.chown(os.path.join(base, "upper"), self.user.pw_uid, self.user.pw_gid)
        mounts = ("mount -t overlay -o ro,lowerdir={b}/l1:{b}/l2 overlay {b}/a && "
                  "mount -t overlay -o lowerdir={b}/a,upperdir={b}/upper,workdir={b}/work "
                  "overlay {d} && ").format(b=base, d=self.dirs.data)

        def stacked(cmd):
            return ["unshare", "-m", "--propagation", "private", "sh", "-c",
                    mounts + 'exec "$@"', "sh"] + self.deleg.wrap(cmd)

        layout = os.path.join(self.src, "m")
        oci_images.write_layout(layout, layers=[BASE, oci_images.layer2()])
        r = run_nsbox(["image", "import", "--name", "t/m:1", layout], self.dirs,
                      user=self.user, wrap=stacked, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"is stored merged, not as shared layers: this user cannot mount an "
                      b"overlay here", r.stderr)
        # the kernel's refusal, passed on (overlayfs logs its reason, "maximum fs stacking
        # depth exceeded", to the kernel log, not to the mount's context)
        self.assertIn(b"(overlay of the image's layers: create: Invalid argument)", r.stderr)
        self.assertIn(b"its sandboxes work the same", r.stderr)
        upper = os.path.join(base, "upper", "images")
        image = [n for n in os.listdir(upper) if n.startswith("oci-")]
        self.assertEqual(len(image), 1, os.listdir(upper))
        self.assertTrue(os.path.isfile(os.path.join(upper, image[0], "rootfs", "bin",
                                                    "busybox")))
        self.assertFalse(os.path.exists(os.path.join(upper, image[0], "layers")))
        r = run_nsbox(["run", "--image", "t/m:1", "--", "sh", "-c",
                       "id -un; ls /opq; ls /keep; stat -c %h /bin/hl; cat /top.txt"],
                      self.dirs, user=self.user, wrap=stacked, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode().split("\n"),
                         ["appuser", "c", "added", "x", "2", "at the top", ""])


if __name__ == "__main__":
    unittest.main()
