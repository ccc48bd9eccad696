"""End to end: Docker's default storage driver, overlay2, under nsbox-oci (docs/oci.md, "The
root"). A dockerd of the test's own (tests/lib/engines.py) with `--storage-driver overlay2`
gives nsbox-oci a bundle whose rootfs is an overlay of the image's layers and the container's
upper directory, mounted in dockerd's mount namespace; nsbox-oci makes the same overlay again
over idmapped layers, so the container's root is writable and what it writes is Docker's:
`docker diff` lists it and `docker cp` copies it out, as under runc."""
import os
import tempfile
import unittest

import engines

from nsbox_test import NSBOX, Dirs

OCI = os.path.join(os.path.dirname(NSBOX), "nsbox-oci") if NSBOX else None


def setUpModule():
    engines.skip_module_unless(OCI, engines.DOCKERD, engines.DOCKER)


class DockerOverlay2(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dirs = Dirs()
        cls.daemon = None
        try:
            cls.daemon = engines.Dockerd({"nsbox": OCI}, env=cls.dirs.env(), storage="overlay2")
            with tempfile.TemporaryDirectory() as t:
                archive = os.path.join(t, "image.tar")
                engines.busybox_archive(archive)
                r = cls.daemon.docker("load", "-i", archive)
            if r.returncode != 0:
                raise AssertionError(f"docker load: {r.stderr}")
            info = cls.daemon.docker("info", "-f", "{{.Driver}}")
            if info.stdout.strip() != "overlay2":
                raise unittest.SkipTest(f"dockerd's storage is not overlay2 here: {info.stdout}")
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.daemon:
            cls.daemon.stop()
        cls.dirs.cleanup()

    def docker(self, *args, **kw):
        return self.daemon.docker(*args, **kw)

    def test_root_is_writable_and_docker_sees_the_writes(self):
        # the image's /etc and a new /usr/local directory written (pip install's kind of
        # write); the root is an overlay, writable
        r = self.docker("run", "--name", "written", "--runtime=nsbox", engines.IMAGE, "sh", "-c",
                        "echo x > /etc/x && cat /etc/x && mkdir -p /usr/local/lib && echo m >"
                        " /usr/local/lib/m.py && awk '$5 == \"/\" { for (i = 7; $i != \"-\"; i++); print $6, $(i + 1) }'"
                        " /proc/self/mountinfo")
        self.addCleanup(self.docker, "rm", "-f", "written")
        self.assertEqual(r.returncode, 0, r.stderr + self.daemon.log_tail())
        made, _, root = r.stdout.partition("\n")
        self.assertEqual(made, "x")
        opts, fstype = root.split()
        self.assertEqual(fstype, "overlay")
        self.assertIn("rw", opts.split(","))
        self.assertNotIn("read-only", r.stderr)
        # Docker reads its upper directory: diff lists the writes, cp copies them out
        r = self.docker("diff", "written")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("A /etc/x", r.stdout.splitlines())
        self.assertIn("A /usr/local/lib/m.py", r.stdout.splitlines())
        r = self.docker("cp", "written:/usr/local/lib/m.py", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("m\n", r.stdout)
        self.assertEqual(self.dirs.live_ids(), [])


if __name__ == "__main__":
    unittest.main()
