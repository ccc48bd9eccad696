"""Configuring with -DNSBOX_FUZZ=ON and gcc fails at once, naming the fix (CC=clang), instead of
on the build's first file with gcc's "unrecognized argument to -fsanitize=" (README's line
`CC=clang cmake ... -DNSBOX_FUZZ=ON`)."""
import os
import shutil
import subprocess
import tempfile
import unittest

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@unittest.skipUnless(shutil.which("gcc") and shutil.which("cmake"), "needs gcc and cmake")
class FuzzNeedsClang(unittest.TestCase):
    def test_gcc_is_refused_at_configure(self):
        with tempfile.TemporaryDirectory() as build:
            env = dict(os.environ, CC="gcc")
            r = subprocess.run(["cmake", "-S", SOURCE, "-B", build, "-DNSBOX_FUZZ=ON"],
                               capture_output=True, text=True, env=env, timeout=120)
            self.assertNotEqual(r.returncode, 0, r.stdout)
            said = " ".join(r.stderr.split())
            self.assertIn("NSBOX_FUZZ needs clang (libFuzzer), and the C compiler is GNU", said)
            self.assertIn("CC=clang cmake", said)
            self.assertFalse(os.path.exists(os.path.join(build, "Makefile")))


if __name__ == "__main__":
    unittest.main()
