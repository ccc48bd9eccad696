"""End-to-end: the scripts a new user runs first (README.md, "Quick start"), as far as they can
run without installing anything: which packages scripts/install-deps.sh asks for. A fake
`dpkg-query` says nothing is installed and a fake `id` says the caller is not root, so the
script stops at the list it would install, before apt-get."""
import os
import shutil
import subprocess
import tempfile
import unittest

from nsbox_test import SOURCE_DIR

# what only the tests, benchmarks and test VM need (scripts/packages.txt, below "# -- tests")
TEST_ONLY = ("docker.io", "podman", "containerd", "qemu-system-x86", "clang",
             "libpython3.11-testsuite", "hyperfine", "docker-registry")
# what building and using nsbox needs
NEEDED = ("build-essential", "cmake", "libseccomp-dev", "libcmocka-dev", "libnftables-dev",
          "libisal-dev", "skopeo", "e2fsprogs", "uidmap", "debootstrap", "python3")


class NothingInstalled(unittest.TestCase):
    def setUp(self):
        self.bin = tempfile.mkdtemp(prefix="nsbox-scripts-")
        self.addCleanup(shutil.rmtree, self.bin, True)
        for name, body in (("dpkg-query", "exit 1"), ("id", "echo 1000"),
                           ("apt-get", "echo apt-get must not run >&2; exit 99"),
                           ("cmake", "echo cmake must not run >&2; exit 99")):
            path = os.path.join(self.bin, name)
            with open(path, "w") as f:
                f.write("#!/bin/sh\n%s\n" % body)
            os.chmod(path, 0o755)

    def script(self, name, *args):
        env = {"PATH": self.bin + ":/usr/sbin:/usr/bin:/sbin:/bin"}
        r = subprocess.run([os.path.join(SOURCE_DIR, "scripts", name)] + list(args), env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertNotIn("must not run", r.stderr)
        return r

    def missing(self, r):
        self.assertEqual(r.returncode, 1, r.stderr)
        line = [l for l in r.stderr.splitlines() if l.startswith("install-deps: missing")]
        self.assertEqual(len(line), 1, r.stderr)
        self.assertTrue(line[0].endswith("; run this script as root"), line[0])
        return set(line[0].split(":", 2)[2].split(";")[0].split())

    def test_quickstart_asks_only_for_what_nsbox_needs(self):
        # docker.io cannot be installed beside the Docker a CI runner has from Docker's own
        # packages (containerd.io), and the test packages are hundreds of MB a user never runs
        got = self.missing(self.script("quickstart.sh"))
        for p in NEEDED:
            self.assertIn(p, got)
        for p in TEST_ONLY:
            self.assertNotIn(p, got)

    def test_no_tests_lists_the_part_above_the_marker(self):
        self.assertEqual(self.missing(self.script("install-deps.sh", "--no-tests")),
                         self.missing(self.script("quickstart.sh")))

    def test_the_whole_list_by_default(self):
        got = self.missing(self.script("install-deps.sh"))
        with open(os.path.join(SOURCE_DIR, "scripts", "packages.txt")) as f:
            every = {l.strip() for l in f if l.strip() and not l.startswith("#")}
        self.assertEqual(got, every)
        for p in NEEDED + TEST_ONLY:
            self.assertIn(p, got)

    def test_an_unknown_argument_is_refused(self):
        r = self.script("install-deps.sh", "--notests")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown argument '--notests' (usage: install-deps.sh [--no-tests])",
                      r.stderr)


if __name__ == "__main__":
    unittest.main()
