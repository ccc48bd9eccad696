"""tests/run_py_test.py run by hand, without the variables ctest sets, tests the build tree's
nsbox (CONTRIBUTING.md's `python3 tests/run_py_test.py tests/e2e/test_run.py Signals`), never
one on PATH, and says what to do when there is no build to test."""
import ast
import os
import re
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(SOURCE, "tests", "run_py_test.py")
NAMES = ("NSBOX_BIN", "NSBOX_BUILD_DIR", "NSBOX_SOURCE_DIR", "NSBOX_SECURITY_BIN_DIR")
PROBE = """import os, unittest
class Env(unittest.TestCase):
    def test_env(self):
        print("ENV " + repr([os.environ.get(n) for n in %r]))
""" % (NAMES,)


class RunPyTestEnv(unittest.TestCase):
    def run_probe(self, **env):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "test_probe.py"), "w") as f:
                f.write(PROBE)
            # an nsbox on PATH that must not be the one tested
            with open(os.path.join(d, "nsbox"), "w") as f:
                f.write("#!/bin/sh\nexit 99\n")
            os.chmod(os.path.join(d, "nsbox"), 0o755)
            base = {k: v for k, v in os.environ.items() if k not in NAMES}
            base["PATH"] = d + ":" + base.get("PATH", "/usr/bin:/bin")
            r = subprocess.run([sys.executable, RUNNER, os.path.join(d, "test_probe.py")],
                               capture_output=True, text=True, env=dict(base, **env),
                               timeout=60)
        # the runner's verbose line ("test_env (...) ... ") comes first on the probe's line
        found = re.search(r"ENV (\[.*?\])", r.stdout)
        return r, ast.literal_eval(found.group(1)) if found else None

    def test_a_build_directory_gives_the_rest(self):
        with tempfile.TemporaryDirectory() as build:
            with open(os.path.join(build, "nsbox"), "w") as f:
                f.write("#!/bin/sh\n")
            os.chmod(os.path.join(build, "nsbox"), 0o755)
            r, got = self.run_probe(NSBOX_BUILD_DIR=build)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(got, [os.path.join(build, "nsbox"), build, SOURCE,
                                   os.path.join(build, "tests", "security-bin")])

    def test_without_a_build_it_says_so(self):
        with tempfile.TemporaryDirectory() as empty:
            r, got = self.run_probe(NSBOX_BUILD_DIR=empty)
            self.assertEqual((r.returncode, got), (1, None), r.stdout)
            self.assertIn("no %s/nsbox to test: build it first (./scripts/build.sh)" % empty,
                          r.stdout)

    def test_a_binary_gives_its_build_directory(self):
        # CONTRIBUTING.md's ThreadSanitizer line: NSBOX_BIN=$PWD/build-tsan/nsbox
        r, got = self.run_probe(NSBOX_BIN="/b/nsbox")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(got, ["/b/nsbox", "/b", SOURCE, "/b/tests/security-bin"])

    def test_ctest_s_variables_win(self):
        r, got = self.run_probe(NSBOX_BIN="/x/nsbox", NSBOX_BUILD_DIR="/x",
                                NSBOX_SOURCE_DIR="/s", NSBOX_SECURITY_BIN_DIR="/p")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(got, ["/x/nsbox", "/x", "/s", "/p"])


if __name__ == "__main__":
    unittest.main()
