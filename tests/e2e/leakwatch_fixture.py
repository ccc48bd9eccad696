"""Not a test of nsbox: the module test_leakwatch.py runs with tests/run_py_test.py, to see what
the runner's leak report says of it. Files in $LEAKWATCH_DIR pass what it did and when."""
import os
import shutil
import subprocess
import unittest

from nsbox_test import NSBOX, Dirs, sigkill_run_and_check_init_dies, wait_for

SIGNALS = os.environ.get("LEAKWATCH_DIR", "")


def say(name, text=""):
    with open(os.path.join(SIGNALS, name), "w") as f:
        f.write(text)


@unittest.skipUnless(SIGNALS, "run by test_leakwatch.py, which sets LEAKWATCH_DIR")
class Fixture(unittest.TestCase):
    def test_a_leaks(self):
        # A sandbox whose teardown never ran (its nsbox killed) and whose state directory went
        # without a gc: its cgroup stays, which the report is to name.
        dirs = Dirs()
        say("base", dirs.base)
        p = subprocess.Popen([NSBOX, "run", "--", "sh", "-c", "hostname; sleep 300"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dirs.env())
        say("leaked", p.stdout.readline().decode().strip()[len("nsbox-"):])
        sigkill_run_and_check_init_dies(self, p)
        shutil.rmtree(dirs.base)

    def test_b_sees_another_process_sandbox(self):
        # test_leakwatch.py makes a sandbox of its own while this test runs, and keeps it past
        # the end of this module: not this test's to report.
        say("started")
        self.assertTrue(wait_for(lambda: os.path.exists(os.path.join(SIGNALS, "go")), 60))
