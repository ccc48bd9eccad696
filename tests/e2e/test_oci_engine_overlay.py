"""End to end: the engines' default storage, overlayfs, under nsbox-oci (docs/oci.md, "The
root"). A dockerd of the test's own with `--storage-driver overlay2`, and a podman with its
`overlay` driver (tests/lib/engines.py), give nsbox-oci a bundle whose rootfs is an overlay of
the image's layers and the container's upper directory, mounted in the engine's mount
namespace; nsbox-oci makes the same overlay again over idmapped layers, so the container's root
is writable and what it writes is the engine's: `docker diff` and `podman diff` list it, `docker
cp` copies it out and `docker commit` makes a layer of it, host root's as under runc. With
--idmap-volumes=engine, the overlay2 root proves Docker's data root: its named volume is
written as host root. A podman mounting with metacopy=on (Fedora's and RHEL's default) has its
metadata-only copies up read, written and sealed as the engine's own overlay would."""
import os
import stat
import tarfile
import unittest

import engines
import oci_images
from oci_bundle import no_idmapped_overlay_layers

from nsbox_test import NSBOX

OCI = os.path.join(os.path.dirname(NSBOX), "nsbox-oci") if NSBOX else None


def setUpModule():
    why = no_idmapped_overlay_layers()
    if why:
        raise unittest.SkipTest(why)


ROOT_FS = "awk '$5 == \"/\" { for (i = 7; $i != \"-\"; i++); print $6, $(i + 1) }' /proc/self/mountinfo"

# the root's filesystem options
ROOT_SUPER = "awk '$5 == \"/\" { for (i = 7; $i != \"-\"; i++); print $(i + 3) }' /proc/self/mountinfo"

def check_root(test, r):
    """The container wrote /etc/x and printed it, then its root's mount options and type: a
    writable overlay."""
    test.assertEqual(r.returncode, 0, r.stderr)
    made, _, root = r.stdout.partition("\n")
    test.assertEqual(made, "x")
    opts, fstype = root.split()
    test.assertEqual(fstype, "overlay")
    test.assertIn("rw", opts.split(","))
    test.assertNotIn("read-only", r.stderr)


class DockerOverlay2(engines.DockerCase):
    OCI = OCI
    STORAGE = "overlay2"
    RUNTIME_ARGS = {"nsbox-volumes": ["--idmap-volumes=engine"]}

    def test_named_volume_idmapped_with_idmap_volumes(self):
        # the overlay2 driver's root, <data-root>/overlay2/<id>/merged, proves the data root of
        # the named volume (docs/oci.md, "An engine's named volumes"): written as host root
        r = self.docker("volume", "create", "ovl")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.docker, "volume", "rm", "-f", "ovl")
        r = self.docker("run", "--rm", "--runtime=nsbox-volumes", "-v", "ovl:/data",
                        engines.IMAGE, "sh", "-c", "echo x > /data/f && cat /data/f")
        self.assertEqual((r.returncode, r.stdout), (0, "x\n"), r.stderr)
        st = os.stat(os.path.join(self.daemon.d, "data", "volumes", "ovl", "_data", "f"))
        self.assertEqual((st.st_uid, st.st_gid), (0, 0))

    def test_root_is_writable_and_docker_sees_the_writes(self):
        # the image's /etc and a new /usr/local directory written (pip install's kind of
        # write); the root is an overlay, writable
        r = self.docker("run", "--name", "written", "--runtime=nsbox", engines.IMAGE, "sh", "-c",
                        "echo x > /etc/x && cat /etc/x && mkdir -p /usr/local/lib && echo m >"
                        " /usr/local/lib/m.py && " + ROOT_FS)
        self.addCleanup(self.docker, "rm", "-f", "written")
        check_root(self, r)
        # Docker reads its upper directory: diff lists the writes, cp copies them out
        r = self.docker("diff", "written")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("A /etc/x", r.stdout.splitlines())
        self.assertIn("A /usr/local/lib/m.py", r.stdout.splitlines())
        r = self.docker("cp", "written:/usr/local/lib/m.py", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("m\n", r.stdout)
        # started again: the same upper directory, and nsbox-oci's work directory of the
        # first run in the engine's, which the kernel empties
        r = self.docker("start", "-a", "written")
        check_root(self, r)
        # committed: an image layer of host root's files, as runc's would be
        r = self.docker("commit", "written", "nsbox-test/committed:1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.docker, "rmi", "-f", "nsbox-test/committed:1")
        r = self.docker("run", "--rm", "--runtime=nsbox", "nsbox-test/committed:1", "busybox",
                        "stat", "-c", "%u:%g %n", "/etc/x", "/usr/local/lib/m.py")
        self.assertEqual((r.returncode, r.stdout), (0, "0:0 /etc/x\n0:0 /usr/local/lib/m.py\n"),
                         r.stderr)
        self.assertEqual(self.dirs.live_ids(), [])


class PodmanOverlay(engines.PodmanCase):
    OCI = OCI
    STORAGE = "overlay"

    def test_root_is_writable_and_podman_sees_the_writes(self):
        p = self.podman
        r = p("run", "--name", "written", *self.engine.run_args(), engines.IMAGE, "sh", "-c",
              "echo x > /etc/x && cat /etc/x && " + ROOT_FS)
        self.addCleanup(p, "rm", "-f", "written")
        check_root(self, r)
        r = p("diff", "written")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("A /etc/x", r.stdout.splitlines())
        self.assertEqual(self.dirs.live_ids(), [])


class PodmanMetacopy(engines.PodmanCase):
    """Fedora's and RHEL's storage.conf: `mountopt = "nodev,metacopy=on"`. A chmod or chown
    through the engine's overlay copies the file's metadata up alone (its data stays in the
    image's layer); the container's overlay must follow that, or the file reads EPERM."""
    OCI = OCI
    STORAGE = "overlay"
    STORAGE_OPTS = ("overlay.mountopt=nodev,metacopy=on",)
    MC_IMAGE = "nsbox-test/metacopy:1"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # a layer above busybox's: /etc/prog, a program once the engine makes it set-user-ID
        # root, /etc/data, which the engine gives to another owner, /etc/other, which it
        # makes private and renames, and /etc/own, which the container makes private
        more = oci_images.tar_bytes([("etc", b"", 0o755, tarfile.DIRTYPE),
                                     ("etc/prog", b"original\n", 0o755),
                                     ("etc/data", b"data\n", 0o644),
                                     ("etc/other", b"other\n", 0o644),
                                     ("etc/own", b"own\n", 0o644)])
        archive = os.path.join(cls.engine.d, "metacopy.tar")
        engines.busybox_archive(archive, cls.MC_IMAGE, more=[more])
        r = cls.engine.podman("load", "-i", archive)
        if r.returncode != 0:
            cls.tearDownClass()
            raise AssertionError(f"load of {cls.MC_IMAGE}: {r.stderr}")

    def engine_copies_metadata_up(self, name):
        """The engine's own overlay of the created container, with metacopy=on: /etc/prog made
        set-user-ID root, /etc/data given to 1:1, /etc/other made 0600 and renamed /etc/moved,
        each copied up metadata-only, the last with a redirect to its data (the premise:
        asserted). The container's upper directory."""
        r = self.podman("mount", name)
        self.assertEqual(r.returncode, 0, r.stderr)
        merged = r.stdout.strip()
        try:
            os.chmod(os.path.join(merged, "etc", "prog"), 0o4755)
            os.chown(os.path.join(merged, "etc", "data"), 1, 1)
            os.chmod(os.path.join(merged, "etc", "other"), 0o600)
            os.rename(os.path.join(merged, "etc", "other"), os.path.join(merged, "etc", "moved"))
        finally:
            self.assertEqual(self.podman("unmount", name).returncode, 0)
        upper = os.path.join(os.path.dirname(merged), "diff")
        for f in ("prog", "data", "moved"):
            self.assertIn("trusted.overlay.metacopy", os.listxattr(os.path.join(upper, "etc", f)))
        self.assertIn("trusted.overlay.redirect",
                      os.listxattr(os.path.join(upper, "etc", "moved")))
        return upper

    def test_metadata_copies_up_read_written_and_sealed(self):
        probes = os.environ.get("NSBOX_SECURITY_BIN_DIR")
        attack = os.path.join(probes or "", "attack")
        if not probes or not os.path.exists(attack):
            self.skipTest("needs the security probes (run through ctest)")
        # the container reads the three files, appends to /etc/data (its data copied up), cannot
        # rewrite the set-user-ID program (sealed: the seal's walk of the layers gives up on a
        # metacopy attribute and walks the merged root), and cannot write the attributes
        # overlayfs follows (a redirect to another file's data, a metacopy)
        p = self.podman
        r = p("create", "--name", "mc", *self.engine.run_args(), "-v", attack + ":/attack:ro",
              self.MC_IMAGE, "sh", "-c",
              "cat /etc/prog /etc/data /etc/moved && ls -ln /etc/prog && ls -ln /etc/data &&"
              " echo more >> /etc/data && cat /etc/data && chmod 600 /etc/own &&"
              " /attack mmap-write /etc/prog;"
              " /attack xattr /etc/data trusted.overlay.redirect=/etc/prog"
              " trusted.overlay.metacopy=; " + ROOT_SUPER)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(p, "rm", "-f", "mc")
        upper = self.engine_copies_metadata_up("mc")
        r = p("start", "-a", "mc")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[:3], ["original", "data", "other"], r.stdout + r.stderr)
        self.assertEqual([line.split()[0] for line in lines[3:5]], ["-rwsr-xr-x", "-rw-r--r--"])
        self.assertEqual(lines[3].split()[2:4], ["0", "0"])
        self.assertEqual(lines[4].split()[2:4], ["1", "1"])
        self.assertEqual(lines[5:7], ["data", "more"])
        self.assertIn("/etc/prog open EROFS", lines)
        for name in ("trusted.overlay.redirect", "trusted.overlay.metacopy"):
            tries = [line for line in lines if line.split()[1:2] == [name]]
            self.assertEqual(len(tries), 4, r.stdout)
            self.assertFalse([t for t in tries if t.endswith("written")], tries)
        self.assertIn("metacopy=on", lines[-1].split(","))
        # on disk: /etc/data's data copied up by the append, the owner the engine gave it kept;
        # /etc/prog still the engine's metadata-only copy, its data the image's
        data = os.path.join(upper, "etc", "data")
        with open(data) as f:
            self.assertEqual(f.read(), "data\nmore\n")
        self.assertNotIn("trusted.overlay.metacopy", os.listxattr(data))
        self.assertNotIn("trusted.overlay.redirect", os.listxattr(data))
        self.assertEqual((os.stat(data).st_uid, os.stat(data).st_gid), (1, 1))
        prog = os.path.join(upper, "etc", "prog")
        self.assertEqual(sorted(os.listxattr(prog)),
                         ["trusted.overlay.metacopy", "trusted.overlay.origin"])
        self.assertEqual(stat.S_IMODE(os.stat(prog).st_mode), 0o4755)
        # the container's own chmod copied /etc/own's metadata up alone, as the engine's would
        own = os.path.join(upper, "etc", "own")
        self.assertIn("trusted.overlay.metacopy", os.listxattr(own))
        self.assertEqual(stat.S_IMODE(os.stat(own).st_mode), 0o600)
        r = p("diff", "mc")
        self.assertIn("C /etc/data", r.stdout.splitlines(), r.stderr)
        self.assertEqual(self.dirs.live_ids(), [])


if __name__ == "__main__":
    unittest.main()
