"""Security: hostile OCI image layers (`nsbox image import`) and hostile bundles (nsbox-oci).
A layer is a tar an attacker wrote: its entries must never create, replace or link a file
outside the image's own root, whatever their names ("../", absolute) or the symlinks earlier
entries made; device nodes and setuid bits never reach the store. Each attempt targets a file
of the test's own outside the store and checks it afterwards.

A bundle's mounts must never reach the host's mount namespace: a mount made inside a container,
on a bind that asks for shared propagation of a host directory that is shared, does not appear
on the host. And for nsbox-oci's writable root (root.readonly false: the bundle's root is the
container's root, its mount points made in it): a bundle whose entries are symlinks pointing out
of it must not move a mount or make a mount point outside it."""
import ctypes
import gzip
import io
import json
import os
import shutil
import stat
import tarfile
import tempfile
import unittest

import subprocess

import oci_images
from nsbox_test import NSBOX, Dirs, run_nsbox, wait_for
from oci_bundle import OCI, BundleCase, config, is_mount_point, require_runtime, shared_source

REG, DIR, SYM, LNK, CHR = (tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE,
                           tarfile.CHRTYPE)


def setUpModule():
    if not os.path.exists(oci_images.BUSYBOX):
        raise unittest.SkipTest("needs busybox-static (/bin/busybox)")


@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
class HostileLayers(unittest.TestCase):
    def setUp(self):
        self.dirs = Dirs()
        self.addCleanup(self.dirs.cleanup)
        self.work = tempfile.mkdtemp(prefix="nsbox-hostile-oci-")
        self.addCleanup(shutil.rmtree, self.work, True)
        self.outside = os.path.join(self.work, "outside")
        os.makedirs(self.outside)
        self.victim = os.path.join(self.outside, "victim")
        with open(self.victim, "w") as f:
            f.write("original\n")

    def import_layer(self, entries):
        return self.import_layer_bytes(oci_images.tar_bytes(entries))

    def import_layer_bytes(self, layer):
        """Import busybox + a hostile layer; returns the result and the image's store
        directory (or None)."""
        layout = os.path.join(self.work, "layout")
        shutil.rmtree(layout, True)
        oci_images.write_layout(layout, layers=[oci_images.layer1(), layer])
        r = run_nsbox(["image", "import", "-q", "--name", "evil/x:1", layout], self.dirs,
                      timeout=120)
        images = os.path.join(self.dirs.data, "images")
        roots = [os.path.join(images, n) for n in os.listdir(images)
                 if n.startswith("oci-")] if os.path.isdir(images) else []
        return r, (roots[0] if roots else None)

    def assert_outside_untouched(self):
        with open(self.victim) as f:
            self.assertEqual(f.read(), "original\n")
        self.assertEqual(sorted(os.listdir(self.outside)), ["victim"])
        self.assertEqual(os.stat(self.victim).st_nlink, 1)

    def assert_refused_nothing_kept(self, r, root):
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"refused entry", r.stderr)
        self.assertIsNone(root)
        self.assertEqual(oci_images.stored_layers(self.dirs.data), [])  # busybox's neither
        self.assert_outside_untouched()

    def test_dotdot_entry_refused(self):
        rel = os.path.relpath(self.victim, "/")
        r, root = self.import_layer([("../../../../../../../../" + rel, b"pwned\n")])
        self.assert_refused_nothing_kept(r, root)

    def test_absolute_entry_refused(self):
        r, root = self.import_layer([(self.victim, b"pwned\n")])
        self.assert_refused_nothing_kept(r, root)

    def test_dotdot_hard_link_refused(self):
        r, root = self.import_layer([("x", b"", 0o644, LNK, "../../../../../.." + self.victim)])
        self.assert_refused_nothing_kept(r, root)

    # A name of the image's with escape sequences: OSC (a window title), ESC's CSI, 8-bit CSI
    # raw and as UTF-8, NEL; then printable UTF-8, which is kept. Surrogate escapes are raw bytes.
    HOSTILE_NAME = "/evil\x1b]0;pwned\x07\x1b[2J\udc9b2J\u009b31m\u0085\u00e9\u2192"
    HOSTILE_SHOWN = "/evil?]0;pwned??[2J?2J?31m?\u00e9\u2192".encode()

    def assert_no_controls(self, text):
        for bad in (b"\x1b", b"\x07", b"\x9b", b"\x85"):  # C1 as UTF-8 ends in these too
            self.assertNotIn(bad, text)

    def test_a_refused_entry_name_reaches_the_error_without_its_controls(self):
        """The error that names a refused entry prints the image's text: its controls (C0, C1
        raw and as UTF-8) arrive as '?', so that the image cannot drive the user's terminal."""
        r, root = self.import_layer([(self.HOSTILE_NAME, b"pwned\n")])
        self.assert_refused_nothing_kept(r, root)
        self.assertIn(b"refused entry '" + self.HOSTILE_SHOWN + b"'", r.stderr)
        self.assert_no_controls(r.stderr)

    def test_a_refused_archive_member_name_reaches_the_error_without_its_controls(self):
        """The same for a member of an image archive (nsbox image import FILE.tar)."""
        layout = os.path.join(self.work, "layout")
        oci_images.write_layout(layout, layers=[oci_images.layer1()])
        archive = os.path.join(self.work, "oci.tar")
        oci_images.tar_dir(layout, archive)
        with tarfile.open(archive, "a", format=tarfile.PAX_FORMAT) as tar:
            ti = tarfile.TarInfo(self.HOSTILE_NAME)
            ti.size = 6
            tar.addfile(ti, io.BytesIO(b"pwned\n"))
        r = run_nsbox(["image", "import", "-q", "--name", "evil/x:1", archive], self.dirs,
                      timeout=120)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"refused member name '" + self.HOSTILE_SHOWN + b"'", r.stderr)
        self.assert_no_controls(r.stderr)

    def test_an_images_created_time_reaches_image_ls_without_its_controls(self):
        """image ls printed the config's "created" as the image wrote it: its controls (OSC,
        ESC's CSI, C1 as UTF-8) arrive as '?'."""
        layout = os.path.join(self.work, "layout")
        oci_images.write_layout(layout, layers=[oci_images.layer1()],
                                created="2024\x1b]0;pwned\x07\x1b[2J\u009b31m")
        r = run_nsbox(["image", "import", "-q", "--name", "evil/x:1", layout], self.dirs,
                      timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run_nsbox(["image", "ls"], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        row = [line for line in r.stdout.splitlines() if line.startswith(b"docker.io/evil/x:1 ")]
        self.assertEqual(len(row), 1, r.stdout)
        self.assertIn(b" 2024?]0;pwned??[2J?31m ", row[0])
        self.assert_no_controls(r.stdout)

    def test_write_through_symlink_stays_inside(self):
        # a symlink to the host directory, then a file "through" it, then a hard link through
        # it: each resolves inside the image's root, never on the host
        r, root = self.import_layer([("evil", b"", 0o777, SYM, self.outside),
                                     ("evil/victim", b"pwned\n"),
                                     ("evil/new", b"new\n"),
                                     ("up", b"", 0o777, SYM, "../../../../../../.." + self.outside),
                                     ("up/other", b"other\n")])
        self.assert_outside_untouched()
        if r.returncode == 0:  # contained: the files are in the image, below its own path
            inside = self.outside.lstrip("/")
            with open(oci_images.find_in_image(root, inside + "/victim")) as f:
                self.assertEqual(f.read(), "pwned\n")
            self.assertIsNotNone(oci_images.find_in_image(root, inside + "/other"))

    def test_hard_link_through_symlink_stays_inside(self):
        r, root = self.import_layer([("evil", b"", 0o777, SYM, self.outside),
                                     ("bin/stolen", b"", 0o644, LNK, "evil/victim")])
        self.assert_outside_untouched()
        self.assertEqual(r.returncode, 125)  # no such file inside the image
        self.assertIn(b"hard link /bin/stolen points at /evil/victim, which is not a file of the "
                      b"image", r.stderr)  # the entry named whole
        self.assertIsNone(root)

    def test_devices_and_setuid_do_not_reach_the_store(self):
        # su3's mode has bits the umask takes away: it is set again after the owner, whose
        # change alone would have cleared the set-id bits
        r, root = self.import_layer([("bin/su2", b"#!/bin/sh\n", 0o6755),
                                     ("bin/su3", b"#!/bin/sh\n", 0o6777),
                                     ("etc/kmem", b"", 0o666, CHR)])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsNone(oci_images.find_in_image(root, "etc/kmem"))
        for name in ("bin/su2", "bin/su3"):
            mode = os.stat(oci_images.find_in_image(root, name)).st_mode
            self.assertEqual(mode & (stat.S_ISUID | stat.S_ISGID), 0, (name, oct(mode)))

    def test_layer_cannot_forge_overlay_whiteouts_or_opaque_directories(self):
        """Stored as overlayfs's layers, a whiteout is a 0/0 character device and an opaque
        directory an xattr: a layer that carries either itself (a device entry, an xattr in its
        tar) must not hide the files of the layers below."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            dev = tarfile.TarInfo("bin/busybox")  # the lower layer's busybox, "whited out"
            dev.type, dev.devmajor, dev.devminor = CHR, 0, 0
            tar.addfile(dev)
            etc = tarfile.TarInfo("etc")  # "opaque": would hide passwd, group, secret
            etc.type, etc.mode = DIR, 0o755
            etc.pax_headers = {"SCHILY.xattr.user.overlay.opaque": "y",
                               "SCHILY.xattr.trusted.overlay.opaque": "y"}
            tar.addfile(etc)
            extra = tarfile.TarInfo("etc/extra")
            extra.size = 3
            tar.addfile(extra, io.BytesIO(b"ok\n"))
        r, root = self.import_layer_bytes(buf.getvalue())
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run_nsbox(["run", "--image", "evil/x:1", "--", "sh", "-c",
                       "ls /bin/busybox; cat /etc/extra; grep -c root /etc/passwd"], self.dirs,
                      timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode().split(), ["/bin/busybox", "ok", "1"])

    def test_whiteout_cannot_reach_outside(self):
        rel = os.path.relpath(self.victim, "/")
        r, root = self.import_layer([("../../../../../../../../" + os.path.dirname(rel) +
                                      "/.wh.victim", b"")])
        self.assert_refused_nothing_kept(r, root)
        r, root = self.import_layer([("evil", b"", 0o777, SYM, self.outside),
                                     ("evil/.wh.victim", b"")])
        self.assert_outside_untouched()

    def test_truncated_and_garbage_layers_leave_nothing(self):
        layout = os.path.join(self.work, "layout")
        for blob in (oci_images.tar_bytes([("a", b"x" * 5000)])[:1500], b"\x1f\x8b garbage"):
            shutil.rmtree(layout, True)
            oci_images.write_layout(layout, layers=[oci_images.layer1(), blob])
            r = run_nsbox(["image", "import", "-q", layout], self.dirs, timeout=120)
            self.assertEqual(r.returncode, 125, r.stderr)
            images = os.path.join(self.dirs.data, "images")
            self.assertEqual([n for n in os.listdir(images) if not n.startswith(".lock-")
                              and n not in (".refs", ".layers")], [])
            self.assertEqual(oci_images.stored_layers(self.dirs.data), [])

    def test_layer_compressions_and_their_checks(self):
        """A gzip layer is inflated by ISA-L where it is installed, any other by libarchive
        (rootfs/oci_stream.c): a layer of two gzip members is whole, a zstd layer too; one
        whose CRC or length in a gzip trailer is wrong (the blob's and the tar's digests right:
        the image's author wrote it so) is refused, as docker's Go reader refuses it, and a
        member cut short is too."""
        try:
            ctypes.CDLL("libisal.so.2")
        except OSError:
            self.skipTest("libisal2 is not installed: gzip is libarchive's, which checks no "
                          "trailer (apt-get install libisal2)")
        data = os.urandom(500) * 40
        tar = oci_images.tar_bytes([("f%d" % i, data) for i in range(50)])
        third = len(tar) // 3
        whole = gzip.compress(tar, mtime=0)
        layout = os.path.join(self.work, "layout")
        def zstd(b):
            return subprocess.run(["zstd", "-q", "-c"], input=b, stdout=subprocess.PIPE,
                                  check=True).stdout
        cases = [("two members", gzip.compress(tar[:third]) + gzip.compress(tar[third:]), None),
                 ("zstd", zstd(tar), None)]
        for name, at in (("bad CRC", -6), ("bad length", -2)):
            b = bytearray(whole)
            b[at] ^= 1
            cases.append((name, bytes(b), b"invalid gzip data"))
        cases.append(("cut", whole[:-20], b"truncated gzip data"))
        for name, blob, err in cases:
            shutil.rmtree(layout, True)
            z = name == "zstd"
            base = oci_images.layer1()
            oci_images.write_layout(
                layout, layers=[base, tar],
                gz=[zstd(base) if z else gzip.compress(base, mtime=0), blob],
                media="application/vnd.oci.image.layer.v1.tar+" + ("zstd" if z else "gzip"))
            r = run_nsbox(["image", "import", "-q", "--name", "t/gz:1", layout], self.dirs,
                          timeout=120)
            if err is None:
                self.assertEqual(r.returncode, 0, (name, r.stderr))
                images = os.path.join(self.dirs.data, "images")
                image, = [os.path.join(images, n) for n in os.listdir(images)
                          if n.startswith("oci-")]
                top = oci_images.image_layers(image)[-1]
                for i in (0, 49):
                    with open(os.path.join(top, "f%d" % i), "rb") as f:
                        self.assertEqual(f.read(), data, name)
                run_nsbox(["image", "rm", "t/gz:1"], self.dirs, timeout=60)
                continue
            self.assertEqual(r.returncode, 125, (name, r.stderr))
            self.assertIn(err, r.stderr, name)
            self.assertEqual(oci_images.stored_layers(self.dirs.data), [], name)

    def test_a_layer_failing_early_or_midway_stops_its_decompression(self):
        """A layer is decompressed by a thread of its own, a few buffers (512 KB) ahead of the
        files being written (rootfs/oci_stream.c). A refused first entry with 16 MB after it
        fails the import while that thread waits for room, which must stop it; a gzip stream
        that breaks in its middle fails it after files were written, told as a corrupt blob
        by the whole file's digest. Each fails at once (the timeout), keeps nothing."""
        rel = os.path.relpath(self.victim, "/")
        r, root = self.import_layer([("../../../../../../../../" + rel, b"pwned\n"),
                                     ("big", os.urandom(16 << 20))])
        self.assert_refused_nothing_kept(r, root)
        layout = os.path.join(self.work, "layout")
        shutil.rmtree(layout, True)
        layer = oci_images.tar_bytes([("first", b"written before the break\n"),
                                      ("big", b"0123456789abcdef" * (4 << 20))])
        oci_images.write_layout(layout, layers=[oci_images.layer1(), layer],
                                corrupt_layer=True)
        r = run_nsbox(["image", "import", "-q", layout], self.dirs, timeout=120)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"digest mismatch", r.stderr)
        self.assertIn(b"the blob is corrupt or was tampered with", r.stderr)
        images = os.path.join(self.dirs.data, "images")
        self.assertEqual([n for n in os.listdir(images) if not n.startswith(".lock-")
                          and n not in (".refs", ".layers")], [])
        self.assertEqual(oci_images.stored_layers(self.dirs.data), [])

    def assert_nothing_kept(self):
        images = os.path.join(self.dirs.data, "images")
        self.assertEqual([n for n in os.listdir(images) if not n.startswith(".lock-")
                          and n not in (".refs", ".layers")], [])
        self.assertEqual(oci_images.stored_layers(self.dirs.data), [])

    def test_an_inode_bomb_stops_at_the_image_entry_limit(self):
        """Entries count against the image's limit whatever their size (each costs the host's
        file system an inode): under NSBOX_OCI_MAX_ENTRIES=300, a layer of 1,000 empty files
        fails and keeps nothing, in both forms of the store. Refused as its entries are read,
        before any file is made: the image's total, checked once its layers are unpacked,
        would refuse it too, with the inodes spent ("bytes or 300 entries")."""
        layer = oci_images.tar_bytes([(f"f{i}", b"") for i in range(1000)])
        layout = os.path.join(self.work, "layout")
        oci_images.write_layout(layout, layers=[oci_images.layer1(), layer])
        for form in ("overlay", "merged"):
            env = {"NSBOX_OCI_LAYOUT": form, "NSBOX_OCI_MAX_ENTRIES": "300"}
            r = run_nsbox(["image", "import", "-q", "--name", "t/inodes:1", layout], self.dirs,
                          timeout=120, extra_env=env)
            self.assertEqual(r.returncode, 125, (form, r.stderr))
            self.assertIn(b"image has more than 300 entries (NSBOX_OCI_MAX_ENTRIES)", r.stderr)
            self.assert_nothing_kept()

    def test_a_decompression_bomb_stops_at_the_image_limit(self):
        """A layer's decompressed stream counts against the image's byte limit whole, not only
        its entries' sizes (rootfs/oci_stream.c, the bound): a small tar followed by 64 MiB of
        zeros (a 64 KB gzip blob, both digests right, the config's diff_id over all of it)
        fails under a 16 MiB limit, keeps nothing, and stops decompressing there. Tar headers,
        padding and what follows the tar's end are bytes no entry's size accounts for, which
        would otherwise make a small blob keep a core busy for hours. Under a limit it fits,
        the same layer imports."""
        layer = oci_images.tar_bytes([("a", b"small\n")]) + bytes(64 << 20)
        layout = os.path.join(self.work, "layout")
        oci_images.write_layout(layout, layers=[oci_images.layer1(), layer])
        for form in ("overlay", "merged"):  # layers side by side, or one tree read twice
            env = {"NSBOX_OCI_LAYOUT": form}
            r = run_nsbox(["image", "import", "-q", "--name", "t/bomb:1", layout], self.dirs,
                          timeout=120, extra_env=dict(env, NSBOX_OCI_MAX_BYTES=str(16 << 20)))
            self.assertEqual(r.returncode, 125, (form, r.stderr))
            self.assertIn(b"image unpacks to more than 16777216 bytes (NSBOX_OCI_MAX_BYTES)",
                          r.stderr)
            self.assertIn(b"decompresses past it", r.stderr)
            self.assert_nothing_kept()
            r = run_nsbox(["image", "import", "-q", "--name", "t/bomb:1", layout], self.dirs,
                          timeout=120, extra_env=dict(env, NSBOX_OCI_MAX_BYTES=str(256 << 20)))
            self.assertEqual(r.returncode, 0, (form, r.stderr))
            run_nsbox(["image", "rm", "t/bomb:1"], self.dirs, timeout=60, check=True)
            run_nsbox(["image", "prune"], self.dirs, timeout=60, check=True)

    def test_layers_already_stored_count_toward_the_limit(self):
        """The layers an import finds in the store count too (by their files' bytes): a 15 MiB
        stream over a stored 2 MB busybox layer passes a 16 MiB limit alone, not together."""
        layout = os.path.join(self.work, "layout")
        limit = {"NSBOX_OCI_MAX_BYTES": str(16 << 20)}
        oci_images.write_layout(layout, layers=[oci_images.layer1()])
        run_nsbox(["image", "import", "-q", "--name", "t/base:1", layout], self.dirs,
                  timeout=120, extra_env=limit, check=True)
        shutil.rmtree(layout)
        layer = oci_images.tar_bytes([("a", b"small\n")]) + bytes(15 << 20)
        oci_images.write_layout(layout, layers=[oci_images.layer1(), layer])
        r = run_nsbox(["image", "import", "-q", "--name", "t/bomb:1", layout], self.dirs,
                      timeout=120, extra_env=limit)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"image unpacks to more than 16777216 bytes", r.stderr)
        self.assertEqual(len(oci_images.stored_layers(self.dirs.data)), 1)  # the base's alone

    def test_a_layout_whose_files_are_fifos_or_devices_is_refused_at_once(self):
        """A layout is a directory an outsider made (tar unpacks FIFOs, and as root device
        nodes): a layer blob or index.json that is a FIFO would block the import for good, a
        device like /dev/zero would be read endlessly. Each is refused at once, keeping
        nothing, and a FIFO's writer is never waited for."""
        layer = oci_images.tar_bytes([("a", b"x\n")])
        layout = os.path.join(self.work, "layout")
        blob = os.path.join(layout, "blobs", "sha256",
                            oci_images.sha(gzip.compress(layer, mtime=0))[7:])
        cases = [("layer FIFO", blob, lambda p: os.mkfifo(p), b"is not a regular file in the "
                  b"image"),
                 ("index.json FIFO", os.path.join(layout, "index.json"), lambda p: os.mkfifo(p),
                  b"index.json is not a regular file")]
        if os.geteuid() == 0:
            cases.append(("layer /dev/zero", blob,
                          lambda p: os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 5)),
                          b"is not a regular file in the image"))
        for name, path, make, err in cases:
            shutil.rmtree(layout, True)
            oci_images.write_layout(layout, layers=[oci_images.layer1(), layer])
            os.unlink(path)
            make(path)
            r = run_nsbox(["image", "import", "-q", layout], self.dirs, timeout=60)
            self.assertEqual(r.returncode, 125, (name, r.stderr))
            self.assertIn(err, r.stderr, name)
            self.assert_nothing_kept()

    def test_a_blob_longer_than_its_manifest_says_is_not_read_to_its_end(self):
        """A layout's blob may be a sparse file far longer than the size its manifest gives
        (a terabyte of holes costs no disk): after a gzip layer's last member the rest of the
        file was read and hashed to its end before the size was compared. It fails one byte
        past the declared size, at once, saying so, and keeps nothing."""
        layer = oci_images.tar_bytes([("a", b"x\n")])
        gz = gzip.compress(layer, mtime=0)
        layout = os.path.join(self.work, "layout")
        oci_images.write_layout(layout, layers=[oci_images.layer1(), layer])
        blob = os.path.join(layout, "blobs", "sha256", oci_images.sha(gz)[7:])
        os.truncate(blob, len(gz) + (1 << 40))
        r = run_nsbox(["image", "import", "-q", layout], self.dirs, timeout=60)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"the blob is longer than the %d bytes its manifest gives" % len(gz),
                      r.stderr)
        self.assert_nothing_kept()

    def test_a_blob_whose_manifest_says_zero_bytes_is_not_read_to_its_end(self):
        """A size of 0 is a size (policy/ocimanifest.c accepts it): it bounds the blob as any
        other, and only a docker-save archive, whose manifest gives none, goes unbounded. A
        terabyte sparse blob declared 0 bytes fails at its first byte, at once, and keeps
        nothing."""
        layer = oci_images.tar_bytes([("a", b"x\n")])
        base = oci_images.layer1()
        gz = [gzip.compress(base, mtime=0), gzip.compress(layer, mtime=0)]
        layout = os.path.join(self.work, "layout")
        oci_images.write_layout(layout, layers=[base, layer], gz=gz, sizes=[len(gz[0]), 0])
        blob = os.path.join(layout, "blobs", "sha256", oci_images.sha(gz[1])[7:])
        os.truncate(blob, len(gz[1]) + (1 << 40))
        r = run_nsbox(["image", "import", "-q", layout], self.dirs, timeout=60)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"the blob is longer than the 0 bytes its manifest gives", r.stderr)
        self.assert_nothing_kept()

    def test_a_zstd_frame_asking_for_a_huge_window_is_refused(self):
        """A zstd frame may ask for a window of up to 2 GiB, which its decoder would allocate:
        libarchive's zstd reader keeps zstd's default bound (128 MiB), so a layer written with
        --long=31 fails at its first frame, with zstd's reason, and keeps nothing."""
        tar = oci_images.tar_bytes([("a", b"x" * 1000)])
        def zstd(b, *opts):
            return subprocess.run(["zstd", "-q", "-c", *opts], input=b, stdout=subprocess.PIPE,
                                  check=True).stdout
        base = oci_images.layer1()
        layout = os.path.join(self.work, "layout")
        oci_images.write_layout(layout, layers=[base, tar],
                                gz=[zstd(base), zstd(tar, "--long=31")],
                                media="application/vnd.oci.image.layer.v1.tar+zstd")
        r = run_nsbox(["image", "import", "-q", "--name", "t/zw:1", layout], self.dirs,
                      timeout=120)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"Frame requires too much memory", r.stderr)
        self.assert_nothing_kept()


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class HostileBundleRoot(BundleCase):
    """Each bundle plants a symlink to a directory of the test's own outside the bundle (mode
    0777, so that only the resolution keeps a write out of it) where a mount goes."""

    def setUp(self):
        require_runtime()
        super().setUp()
        self.rootfs = os.path.join(self.bundle, "rootfs")
        self.outside = os.path.join(self.tmp, "outside")
        os.makedirs(self.outside)
        os.chmod(self.outside, 0o777)

    def plant(self, name, target=None):
        path = os.path.join(self.rootfs, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        os.symlink(target or self.outside, path)

    def create_refused(self, c):
        """create must fail; the log's last error is returned."""
        self.write_config(c)
        with open(self.out, "w") as out:
            r = self.oci("create", "--bundle", self.bundle, "--pid-file", self.pidfile, "c1",
                         stdout=out, stderr=out)
        if r.returncode == 0:
            with open(self.pidfile) as f:
                self.waited_pids.append(int(f.read()))
            self.oci("start", "c1")
        self.assertNotEqual(r.returncode, 0, "create went through a symlink")
        return self.log_errors()[-1]["msg"]

    def assert_outside_untouched(self):
        self.assertEqual(os.listdir(self.outside), [])
        with open("/proc/self/mountinfo") as f:
            self.assertNotIn(self.outside, f.read())

    def test_proc_symlink_out_refused(self):
        # /proc -> a host directory: proc (and nsbox's masks over it) must not follow it
        self.plant("proc")
        msg = self.create_refused(config(["true"]))
        self.assertIn("/proc is a symlink; refusing to mount over it", msg)
        self.assert_outside_untouched()

    def test_dev_symlink_out_refused(self):
        # no /dev in the config: nsbox's own /dev tmpfs and its nodes would go there
        self.plant("dev")
        msg = self.create_refused(config(["true"]))
        self.assertIn("/dev is a symlink", msg)
        self.assert_outside_untouched()

    def test_mount_point_through_a_symlinked_parent_refused(self):
        # /etc -> outside, a tmpfs on /etc/ssl: its mount point would be made outside
        self.plant("etc")
        c = config(["true"])
        c["mounts"].append({"destination": "/etc/ssl", "type": "tmpfs", "source": "tmpfs"})
        msg = self.create_refused(c)
        self.assertIn("/etc is a symlink; refusing to mount /etc/ssl through it", msg)
        self.assert_outside_untouched()

    def test_bind_onto_a_relative_symlink_out_refused(self):
        # a relative link climbing out of the root, as the target of a bind
        src = os.path.join(self.tmp, "src")
        os.makedirs(src)
        self.plant("data", "../../outside")
        c = config(["true"])
        c["mounts"].append({"destination": "/data", "type": "bind", "source": src,
                            "options": ["rbind"]})
        msg = self.create_refused(c)
        self.assertIn("/data is a symlink; refusing to mount over it", msg)
        self.assert_outside_untouched()

    def test_masked_path_through_a_symlink_left_alone(self):
        # a masked path below a symlink out: left alone (the link resolves inside the
        # container's own root), never masked on the host's directory
        self.plant("etc")
        c = config(["echo"])
        c["linux"]["maskedPaths"] = ["/etc/passwd", "/etc"]
        self.write_config(c)
        pid = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 0, self.output())
        self.assert_outside_untouched()

    def test_a_symlink_does_not_hide_a_path_from_its_mask(self):
        # an image whose masked or read-only path is reached through a symlink (a merged /usr:
        # /bin/su is /usr/bin/su) had it left alone, the file readable and writable at the path
        # the config named; the links are followed inside the root, as the container follows
        # them, and one pointing out of the root resolves inside it, never on the host
        secret = os.path.join(self.rootfs, "usr", "secret")
        os.makedirs(secret)
        os.makedirs(os.path.join(self.rootfs, "usr", "rw"))
        with open(os.path.join(secret, "file"), "w") as f:
            f.write("image secret\n")
        with open(os.path.join(self.outside, "x"), "w") as f:
            f.write("host\n")
        self.plant("sec", "usr/secret")
        self.plant("abs", "/usr/secret")
        self.plant("rolink", "../usr/rw")
        self.plant("out")
        for readonly in (False, True):
            with self.subTest(readonly=readonly):
                cid = "ro" if readonly else "rw"
                c = config(["sh", "-c", "cat /usr/secret/file /sec/file; ls /usr/secret;"
                            " cat /out/x; touch /usr/rw/new 2>/dev/null && echo written;"
                            " echo done; sleep 60"],
                           root={"path": "rootfs", "readonly": readonly})
                c["linux"]["maskedPaths"] = ["/sec/file", "/abs", "/out/x"]
                c["linux"]["readonlyPaths"] = ["/rolink"]
                self.write_config(c)
                pid = self.create(cid)
                self.assertEqual(self.oci("start", cid).returncode, 0)
                self.assertTrue(wait_for(lambda: "done" in self.output(), 30), self.output())
                with open(f"/proc/{pid}/mountinfo") as f:
                    points = [line.split()[4] for line in f]
                self.oci("kill", cid, "KILL")
                self.wait(pid)
                out = self.output()
                self.assertNotIn("image secret", out)
                self.assertNotIn("host\n", out)
                self.assertNotIn("written", out)
                self.assertIn("/usr/secret", points)
                if not readonly:  # the image's own /usr is read-only already
                    self.assertIn("/usr/rw", points)
                self.assertFalse([p for p in points if self.outside in p], points)
                self.assertEqual(os.listdir(self.outside), ["x"])
                with open(os.path.join(self.outside, "x")) as f:
                    self.assertEqual(f.read(), "host\n")
                self.assertFalse(os.path.exists(os.path.join(self.rootfs, "usr", "rw", "new")))

    def test_masked_paths_inside_a_read_only_image_are_masked(self):
        # root.readonly true: the image's files are bound read-only, but a mask hides what is
        # read; the config's masks inside the image must be there (they were left out, and
        # the file read as the image had it), and one through an image's symlink out of it
        # must not be mounted where the link points on the host
        data = os.path.join(self.rootfs, "data")
        os.makedirs(os.path.join(data, "dir"))
        with open(os.path.join(data, "secret"), "w") as f:
            f.write("image secret\n")
        with open(os.path.join(data, "dir", "f"), "w") as f:
            f.write("image dir secret\n")
        with open(os.path.join(self.outside, "x"), "w") as f:
            f.write("host\n")
        self.plant("lnk")
        self.plant("data/link")
        c = config(["sh", "-c", "cat /data/secret /data/dir/f; echo done; sleep 60"],
                   root={"path": "rootfs", "readonly": True})
        c["linux"]["maskedPaths"] = ["/data/secret", "/data/dir", "/lnk/x", "/data/link/x"]
        self.write_config(c)
        pid = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        self.assertTrue(wait_for(lambda: "done" in self.output(), 30), self.output())
        with open(f"/proc/{pid}/mountinfo") as f:
            points = [line.split()[4] for line in f]
        self.oci("kill", "c1", "KILL")
        self.wait(pid)
        self.assertEqual(self.output().splitlines()[-1:], ["done"])
        self.assertNotIn("secret", self.output())
        self.assertIn("/data/secret", points)
        self.assertIn("/data/dir", points)
        self.assertFalse([p for p in points if p.endswith("/x") or self.outside in p], points)
        self.assertEqual(os.listdir(self.outside), ["x"])
        with open(os.path.join(self.outside, "x")) as f:
            self.assertEqual(f.read(), "host\n")


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class HostileProcMounts(BundleCase):
    """A proc the config mounts anywhere but /proc is a whole procfs of the container's: nsbox's
    masks and read-only paths (the floor) must cover it as they cover /proc."""

    def setUp(self):
        require_runtime()
        super().setUp()

    def test_a_second_proc_is_masked_as_proc_is(self):
        # the container's root writes kernel.shmmax (its ipc namespace's, owned by its root)
        # through each proc: /proc/sys is read-only, and so must the second one's be; its
        # keys and timer_list are masked as /proc's are
        for readonly, at in ((False, "/tmp/p"), (True, "/p2")):
            with self.subTest(readonly=readonly):
                cid = "ro" if readonly else "rw"
                mi = os.path.join(self.tmp, f"mi-{cid}")
                os.makedirs(mi)
                os.chmod(mi, 0o777)  # the container's root is not the host's
                c = config(["sh", "-c",
                            f"echo 4096 > /proc/sys/kernel/shmmax && echo WROTE-proc;"
                            f" echo 4096 > {at}/sys/kernel/shmmax && echo WROTE-second;"
                            f" cat {at}/sys/kernel/shmmax; cat /proc/self/mountinfo > /mi/m;"
                            " echo done"],
                           root={"path": "rootfs", "readonly": readonly})
                c["mounts"] += [{"destination": at, "type": "proc", "source": "proc"},
                                {"destination": "/mi", "type": "bind", "source": mi,
                                 "options": ["rbind"]}]
                self.write_config(c)
                pid = self.create(cid)
                self.assertEqual(self.oci("start", cid).returncode, 0)
                self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 0, self.output())
                out = self.output()
                self.assertIn("done", out)
                self.assertNotIn("WROTE", out)  # neither proc's sys/ was writable
                self.assertNotIn("\n4096\n", "\n" + out)  # the value is the kernel's
                with open(os.path.join(mi, "m")) as f:
                    points = {line.split()[4]: line.split()[5] for line in f}
                for name in ("keys", "timer_list", "kallsyms"):
                    self.assertIn(f"{at}/{name}", points)  # masked, as /proc/{name}
                self.assertTrue(points[f"{at}/sys"].startswith("ro"), points)


NOBODY = 65534


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class HostileStateDir(BundleCase):
    """--root is what nsbox-oci, as root, reads to act: a container's pids (kill), its sandbox
    and cgroup (delete), its hooks (run on the host as root). Another user who can write --root
    or a directory above it can swap a container's state for one of its own making."""

    def setUp(self):
        require_runtime()
        super().setUp()
        os.chmod(self.tmp, 0o711)  # the user passes through the test's directory, no more
        self.base = os.path.join(self.tmp, "user")
        os.makedirs(self.base)
        os.chown(self.base, NOBODY, NOBODY)
        self.root = os.path.join(self.base, "state")
        self.addCleanup(self.give_back)
        self.marker = os.path.join(self.tmp, "hook-ran")

    def give_back(self):
        """Everything the user made becomes root's again, so that the containers are deleted."""
        for top, dirs, files in os.walk(self.base):
            for name in dirs + files + ["."]:
                os.lchown(os.path.join(top, name), 0, 0)

    def as_user(self, script):
        r = subprocess.run(["sh", "-c", script], user=NOBODY, group=NOBODY, extra_groups=[],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def plant(self, pid, start):
        """The user's container c1 in place of root's: pids of its choosing, a poststop hook."""
        state = {"id": "c1", "bundle": self.bundle, "rootfs": "", "sandbox": "",
                 "created": "2026-01-01T00:00:00Z", "pid": pid, "pid_start": start,
                 "monitor_pid": pid, "monitor_start": start}
        hooks = {"poststop": [{"path": "/bin/sh",
                               "args": ["sh", "-c", f"id -u > {self.marker}"]}]}
        self.as_user(f"cd {self.base} && mv state old 2>/dev/null; mkdir -p state/c1 &&"
                     f" echo '{json.dumps(state)}' > state/c1/state.json &&"
                     f" echo '{json.dumps(hooks)}' > state/c1/hooks.json")

    def test_a_state_directory_another_user_can_write_is_refused(self):
        self.write_config(config(["true"]))
        r = self.oci("create", "--bundle", self.bundle, "--pid-file", self.pidfile, "c1",
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode == 0:  # made: let it run and end, as root's container would
            with open(self.pidfile) as f:
                pid = int(f.read())
            self.waited_pids.append(pid)
            self.oci("start", "c1")
            self.wait(pid)
        else:
            self.assertIn(f"--root {self.root}", self.log_errors()[-1]["msg"])
        # a root process of the host's the user would end: its pid and start time are public
        victim = subprocess.Popen(["sleep", "60"])
        self.addCleanup(victim.wait)
        self.addCleanup(victim.kill)
        with open(f"/proc/{victim.pid}/stat") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19])
        self.plant(victim.pid, start)
        kill = self.oci("kill", "c1", "KILL")
        delete = self.oci("delete", "--force", "c1")
        self.assertIsNone(victim.poll(), "root's kill reached a process the user named")
        self.assertFalse(os.path.exists(self.marker), "root ran the user's hook")
        for r in (kill, delete):
            self.assertNotEqual(r.returncode, 0)
        msg = self.log_errors()[-1]["msg"]
        self.assertIn(f"--root {self.root}", msg)
        self.assertIn(f"{self.base} belongs to uid {NOBODY}", msg)

    def chain(self, fd, letter, n):
        """n directories, one in another, below the directory fd (closed): the last one's fd and
        the path to it from fd's."""
        name = letter * 200
        for _ in range(n):
            os.mkdir(name, dir_fd=fd)
            fd, up = os.open(name, os.O_PATH | os.O_DIRECTORY, dir_fd=fd), fd
            os.close(up)
        return fd, "/".join([name] * n)

    def test_a_root_whose_links_lead_past_path_max_is_refused(self):
        # a link of root's into the user's directory, and there the user's links to a
        # directory whose path, resolved, is longer than PATH_MAX (4096): which directories
        # --root passes through cannot be told (realpath fails), but the kernel, which has no
        # such limit on a path it resolves, would use it, in the user's hands
        base = os.open(self.base, os.O_PATH | os.O_DIRECTORY)
        far, a = self.chain(base, "a", 11)
        self.addCleanup(shutil.rmtree, os.path.join(self.base, "a" * 200), True)
        end, b = self.chain(os.dup(far), "b", 11)
        os.close(end)
        os.symlink(b, "s", dir_fd=far)  # each link's text is short enough for the kernel
        os.close(far)
        os.symlink(a + "/s", os.path.join(self.base, "in"))
        self.assertGreater(len(self.base) + len(a) + len(b), 4096)
        link = os.path.join(self.tmp, "link")
        os.symlink(os.path.join(self.base, "in"), link)
        self.root = os.path.join(link, "state")
        r = self.oci("list")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        msg = self.log_errors()[-1]["msg"]
        self.assertIn(f"--root {self.root}", msg)
        self.assertIn("cannot be resolved (File name too long)", msg)
        self.assertFalse(os.path.lexists(os.path.join(self.base, "in", "state")))
        # where the links lead within PATH_MAX, the user's directory is found on the way
        near = os.path.join(self.tmp, "near")
        os.symlink(os.path.join(self.base, "a" * 200), near)
        self.root = os.path.join(near, "state")
        self.assertNotEqual(self.oci("list").returncode, 0)
        self.assertIn(f"{self.base} belongs to uid {NOBODY}", self.log_errors()[-1]["msg"])

    def test_a_pid_file_beside_a_link_another_user_planted_is_written_there_only(self):
        # the engine's --pid-file in a directory another user can write (the state is root's):
        # the user links the temporary name create writes first to a file of root's
        self.root = os.path.join(self.tmp, "state")
        victim = os.path.join(self.tmp, "victim")
        with open(victim, "w") as f:
            f.write("original\n")
        pidfile = os.path.join(self.base, "pid")
        self.as_user(f"ln -s {victim} {pidfile}.tmp")
        self.write_config(config(["true"]))
        with open(self.out, "w") as out:
            r = self.oci("create", "--bundle", self.bundle, "--pid-file", pidfile, "c1",
                         stdout=out, stderr=out)
        self.assertEqual(r.returncode, 0, self.output())
        with open(pidfile) as f:
            pid = int(f.read())
        self.waited_pids.append(pid)
        self.oci("start", "c1")
        self.wait(pid)
        with open(victim) as f:
            self.assertEqual(f.read(), "original\n")  # not the pid
        self.assertFalse(os.path.islink(pidfile))


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class HostileNamespacePaths(BundleCase):
    """linux.namespaces[].path is opened by root on the host: a path that is no namespace must
    be refused without being opened, since opening a FIFO blocks until a writer comes (create
    hung, and the engine's call with it) and opening a device runs its driver's open (a
    watchdog's starts its countdown)."""

    def setUp(self):
        require_runtime()
        super().setUp()

    def test_a_path_that_is_no_namespace_is_refused_unopened(self):
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        plain = os.path.join(self.tmp, "plain")
        with open(plain, "w") as f:
            f.write("x")
        for path in (fifo, plain):
            with self.subTest(path=os.path.basename(path)):
                c = config(["true"])
                c["linux"]["namespaces"] = [{"type": t} for t in ("pid", "ipc", "uts", "mount")]
                c["linux"]["namespaces"].append({"type": "network", "path": path})
                self.write_config(c)
                try:
                    msg = self.create_refused(os.path.basename(path))
                except subprocess.TimeoutExpired:
                    self.fail(f"create opened {path} and waited for a writer")
                self.assertIn(f"linux.namespaces.path {path} is not a network namespace", msg)


if __name__ == "__main__":
    unittest.main()


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class HostileMounts(BundleCase):
    """The container's mounts stay in its mount namespace (docs/decisions.md, "Mount
    propagation: shared is the container's own")."""
    TOOLS = BundleCase.TOOLS + ("mount",)

    def setUp(self):
        require_runtime()
        self.vol_parent = tempfile.mkdtemp(prefix="nsbox-oci-vol-")
        self.addCleanup(shutil.rmtree, self.vol_parent, True)
        self.src = shared_source(self, self.vol_parent)
        super().setUp()

    def test_mount_inside_a_shared_bind_does_not_reach_the_host(self):
        sub = os.path.join(self.src, "sub")
        # the control: the same mount from a mount namespace that is a peer of the host's (as
        # runc's container is without a user namespace) does reach it, so the check can see it
        r = subprocess.run(["unshare", "-m", "--propagation", "unchanged", "mount", "-t", "tmpfs",
                            "control", sub], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(is_mount_point(sub))
        subprocess.run(["umount", sub], check=True)
        self.assertFalse(is_mount_point(sub))
        # the attack: a bind that asks for rshared, and a mount made on it inside the container
        # by a process with every privilege over the container's mount namespace (the host's
        # root entering it: more than the container's own process has)
        c = config(["sleep", "60"])
        c["mounts"] = [{"destination": "/proc", "type": "proc", "source": "proc"},
                       {"destination": "/vol", "type": "bind", "source": self.src,
                        "options": ["rbind", "rshared"]}]
        self.write_config(c)
        pid = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        r = subprocess.run(["nsenter", "-t", str(pid), "-m", "/bin/mount", "-t", "tmpfs",
                            "inside", "/vol/sub"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(f"/proc/{pid}/mountinfo") as f:
            self.assertIn(" /vol/sub ", f.read())  # it is there, inside
        self.assertFalse(is_mount_point(sub))  # and not on the host
        self.assertEqual(os.listdir(sub), [])
        # nor from the container's user namespace, as its root with every capability there
        # (more than the floor lets its process have: no CAP_SYS_ADMIN)
        sub2 = os.path.join(self.src, "sub2")
        os.makedirs(sub2)
        r = subprocess.run(["nsenter", "-t", str(pid), "-a", "/bin/mount", "-t", "tmpfs",
                            "userns", "/vol/sub2"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(f"/proc/{pid}/mountinfo") as f:
            self.assertIn(" /vol/sub2 ", f.read())
        self.assertFalse(is_mount_point(sub2))

    def test_readonly_bind_that_would_receive_host_mounts_is_refused(self):
        # a host mount arriving later in a read-only slave bind would be writable inside
        c = config(["true"])
        c["mounts"] = [{"destination": "/proc", "type": "proc", "source": "proc"},
                       {"destination": "/vol", "type": "bind", "source": self.src,
                        "options": ["rbind", "ro", "rslave"]}]
        self.write_config(c)
        self.assertIn("read-only bind at /vol asks for rslave", self.create_refused())
