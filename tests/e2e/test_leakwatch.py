"""End-to-end: the leak report of the test runner (tests/run_py_test.py) names a sandbox cgroup
a test left, and only that test's: not the sandboxes another process (ctest -j2) makes during
it. It runs leakwatch_fixture.py, whose first test leaks on purpose, while making a sandbox of
its own during the fixture's second test."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from nsbox_test import (NSBOX, SOURCE_DIR, Dirs, cgroup_leftovers, is_root, loop_devices_under,
                        rmdir_cgroups, run_nsbox, wait_for)


def setUpModule():
    if not is_root():
        raise unittest.SkipTest("the leak is a sandbox of root's (cgroups of its own)")


class LeakReport(unittest.TestCase):
    def test_names_the_tests_own_leak_only(self):
        signals = tempfile.mkdtemp(prefix="nsbox-leakwatch-")
        self.addCleanup(shutil.rmtree, signals, True)
        runner = os.path.join(SOURCE_DIR, "tests", "run_py_test.py")
        fixture = os.path.join(SOURCE_DIR, "tests", "e2e", "leakwatch_fixture.py")
        p = subprocess.Popen([sys.executable, runner, fixture], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT,
                             env=dict(os.environ, LEAKWATCH_DIR=signals, NSBOX_BIN=NSBOX))
        self.addCleanup(self.remove_leak, signals)
        self.addCleanup(p.kill)
        started = wait_for(lambda: os.path.exists(os.path.join(signals, "started")), 60)
        self.assertTrue(started or p.poll() is not None, "the fixture's second test never began")
        dirs = Dirs()
        self.addCleanup(dirs.cleanup)
        r = run_nsbox(["create"], dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        other = r.stdout.decode().strip()
        self.addCleanup(run_nsbox, ["rm", other], dirs)
        self.assertTrue(cgroup_leftovers(other), "the sandbox of this process has no cgroup")
        open(os.path.join(signals, "go"), "w").close()
        out = p.communicate(timeout=120)[0].decode()
        self.assertEqual(p.returncode, 0, out)
        with open(os.path.join(signals, "leaked")) as f:
            leaked = f.read()
        report = [line for line in out.splitlines() if line.startswith("LEFT CGROUPS")]
        self.assertEqual(len(report), 1, out)
        self.assertTrue(report[0].startswith(
            "LEFT CGROUPS after leakwatch_fixture.Fixture.test_a_leaks: "), report)
        self.assertIn(f"nsbox-{leaked}", report[0])
        self.assertNotIn(other, out)

    def remove_leak(self, signals):
        """What the fixture's killed sandbox left: its cgroups (empty: its init is dead) and a
        loop device of its workspace, if one is still there."""
        try:
            with open(os.path.join(signals, "leaked")) as f:
                leaked = f.read()
            with open(os.path.join(signals, "base")) as f:
                base = f.read()
        except OSError:
            return
        if leaked:
            for top in cgroup_leftovers(leaked):
                rmdir_cgroups([d for d, _, _ in os.walk(top, topdown=False)])
        for line in loop_devices_under(base):
            subprocess.run(["losetup", "-d", line.split(" -> ")[0]], capture_output=True)


if __name__ == "__main__":
    unittest.main()
