"""End to end: the engines' default storage, overlayfs, under nsbox-oci (docs/oci.md, "The
root"). A dockerd of the test's own with `--storage-driver overlay2`, and a podman with its
`overlay` driver (tests/lib/engines.py), give nsbox-oci a bundle whose rootfs is an overlay of
the image's layers and the container's upper directory, mounted in the engine's mount
namespace; nsbox-oci makes the same overlay again over idmapped layers, so the container's root
is writable and what it writes is the engine's: `docker diff` and `podman diff` list it, `docker
cp` copies it out and `docker commit` makes a layer of it, host root's as under runc. With
--idmap-volumes=engine, the overlay2 root proves Docker's data root: its named volume is
written as host root."""
import os
import unittest

import engines
from oci_bundle import no_idmapped_overlay_layers

from nsbox_test import NSBOX

OCI = os.path.join(os.path.dirname(NSBOX), "nsbox-oci") if NSBOX else None


def setUpModule():
    why = no_idmapped_overlay_layers()
    if why:
        raise unittest.SkipTest(why)


ROOT_FS = "awk '$5 == \"/\" { for (i = 7; $i != \"-\"; i++); print $6, $(i + 1) }' /proc/self/mountinfo"


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


if __name__ == "__main__":
    unittest.main()
