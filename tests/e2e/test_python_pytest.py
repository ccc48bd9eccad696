"""End-to-end: the Python client in a pytest suite, as a CI pipeline runs one (docs/python.md,
"In a test suite (pytest)"): the fixture as the docs give it, run by pytest with
pytest-xdist's parallel workers, and every way a run ends early that the docs name (a failing
test, Ctrl-C, pytest-timeout's two methods, SIGKILL of the whole run) leaves no sandbox.

The conftest and the test are taken from the docs' own code block, so that the docs cannot
drift from what works. Needs Debian's python3-pytest, python3-pytest-xdist and
python3-pytest-timeout (scripts/packages.txt); without them the module is skipped, saying so."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import unittest

from nsbox_test import SOURCE_DIR, Dirs, wait_for

PYTEST = shutil.which("pytest-3") or shutil.which("pytest")
SLOW_TEST = '''
def test_slow(sb):
    sb.execute("sleep 120")
'''


def setUpModule():
    if os.geteuid() != 0:
        raise unittest.SkipTest("the suite's sandboxes are made as root here (an unprivileged "
                                "user's need a delegated cgroup: test_python_client covers it)")
    if not PYTEST:
        raise unittest.SkipTest("no pytest: apt-get install python3-pytest python3-pytest-xdist "
                                "python3-pytest-timeout (scripts/packages.txt)")
    # both plugins' options, in a directory with no test: 5 (none collected) when they exist
    empty = tempfile.mkdtemp(prefix="nsbox-pytest-probe-")
    try:
        probe = subprocess.run([PYTEST, "-q", "-p", "no:cacheprovider", "-n", "0", "--timeout",
                                "1", empty], capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(empty, True)
    if probe.returncode != 5:
        raise unittest.SkipTest("pytest-xdist or pytest-timeout is missing (apt-get install "
                                "python3-pytest-xdist python3-pytest-timeout): "
                                + (probe.stderr or probe.stdout).strip()[-300:])


def documented_suite():
    """The conftest.py and test_agent.py of docs/python.md's pytest section."""
    with open(os.path.join(SOURCE_DIR, "docs", "python.md")) as f:
        doc = f.read()
    section = doc.split("## In a test suite (pytest)", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    conftest, test = code.split("# test_agent.py\n")
    return conftest, test


class PytestSuite(unittest.TestCase):
    def setUp(self):
        self.dirs = Dirs()
        self.addCleanup(self.dirs.cleanup)
        self.suite = tempfile.mkdtemp(prefix="nsbox-pytest-suite-")
        self.addCleanup(shutil.rmtree, self.suite, True)
        conftest, test = documented_suite()
        self.write("conftest.py", conftest)
        self.write("test_agent.py", test)
        self.env = self.dirs.env({"PYTHONPATH": os.path.join(SOURCE_DIR, "python"),
                                  "NSBOX_BIN": os.environ["NSBOX_BIN"]})

    def write(self, name, text):
        with open(os.path.join(self.suite, name), "w") as f:
            f.write(text)

    def pytest(self, *args):
        """pytest in its own process group, with Ctrl-C's default action (a test runner may
        have started this one with SIGINT ignored, which its children would keep)."""
        return subprocess.Popen(
            [PYTEST, "-q", "-p", "no:cacheprovider", "-n", "2"] + list(args), cwd=self.suite,
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def finish(self, p, timeout=120):
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            self.fail("pytest did not end: " + out[-2000:])
        return out

    def assert_none_left(self, out):
        left = wait_for(lambda: not self.dirs.live_ids(), timeout=30)
        self.assertTrue(left, f"sandboxes left: {self.dirs.live_ids()}\n{out[-3000:]}")

    def test_documented_fixture_in_parallel_and_a_failing_test(self):
        self.write("test_more.py", '''
import pytest

@pytest.mark.parametrize("n", range(6))
def test_many(sb, n):
    sb.write_file("n.txt", str(n))
    assert sb.read_file("n.txt") == str(n).encode()
    assert sb.execute("cat n.txt").stdout == str(n)

def test_fails(sb):
    assert sb.execute("exit 3").exit_code == 0
''')
        out = self.finish(self.pytest())
        self.assertIn("1 failed, 7 passed", out)
        self.assertIn("FAILED test_more.py::test_fails", out)
        self.assert_none_left(out)

    def interrupted(self, *args, signal_to_send=None):
        """A slow test in each worker, stopped as args and signal_to_send say."""
        self.write("test_slow.py", SLOW_TEST + SLOW_TEST.replace("test_slow", "test_slow_2"))
        p = self.pytest("test_slow.py", *args)
        started = wait_for(lambda: len(self.dirs.live_ids()) >= 2, timeout=60)
        if signal_to_send is not None:
            if started:
                os.killpg(p.pid, signal_to_send)
            else:
                os.killpg(p.pid, signal.SIGKILL)
        out = self.finish(p)
        self.assertTrue(started, "the slow tests' sandboxes never showed: " + out[-2000:])
        self.assert_none_left(out)
        return p.returncode, out

    def test_ctrl_c(self):
        rc, out = self.interrupted(signal_to_send=signal.SIGINT)
        self.assertNotEqual(rc, 0, out)
        self.assertIn("KeyboardInterrupt", out)

    def test_pytest_timeout_signal_method(self):
        rc, out = self.interrupted("--timeout", "3")
        self.assertIn("2 failed", out)
        self.assertIn("Timeout", out)

    def test_pytest_timeout_thread_method_ends_the_worker(self):
        rc, out = self.interrupted("--timeout", "3", "--timeout-method", "thread")
        self.assertIn("crashed while running", out)

    def test_sigkill_of_the_whole_run(self):
        rc, out = self.interrupted(signal_to_send=signal.SIGKILL)
        self.assertEqual(rc, -signal.SIGKILL)


if __name__ == "__main__":
    unittest.main()
