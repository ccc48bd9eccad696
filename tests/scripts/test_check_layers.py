"""scripts/check-layers.py finds what it is there to find, in trees made for it: I/O in policy/
(and not the words of a comment or a string), an upward include, an include circle."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "scripts", "check-layers.py")


class CheckLayers(unittest.TestCase):
    def check(self, files):
        with tempfile.TemporaryDirectory() as root:
            for path, text in files.items():
                os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
                with open(os.path.join(root, path), "w") as f:
                    f.write(text)
            r = subprocess.run([sys.executable, SCRIPT, root], capture_output=True, text=True)
            return r.returncode, r.stdout.splitlines()

    def test_io_in_policy_is_named_by_line(self):
        rc, out = self.check({"policy/rule.c": (
            '/* read(2) and open() are only words here */\n'
            'static const char *s = "fopen(x)";\n'
            'int rule(int fd, char *b) { return (int)read(fd, b, 1); }\n'
            'int ok(struct ops *o) { return o->write(1) + o->close(2); }\n'
            'int fine(void) { return reader(1) + thread(2); }\n'
            'void *cfg(void) { return fopen("/etc/x", "r"); }\n')})
        self.assertEqual(rc, 1)
        self.assertEqual([l.split(": policy/")[0] for l in out[:-1]],
                         ["policy/rule.c:3: calls read()", "policy/rule.c:6: calls fopen()"])

    def test_the_same_calls_above_policy_are_fine(self):
        rc, out = self.check({"os/files.c": 'void *cfg(void) { return fopen("/x", "r"); }\n',
                              "policy/pure.c": "int pure(int a) { return a + 1; }\n"})
        self.assertEqual((rc, out), (0, []))

    def test_the_allowed_call_is_allowed_only_where_named(self):
        call = "int f(void) { return memfd_create(\"x\", 0); }\n"
        rc, out = self.check({"policy/seccomp_compile.c": call, "policy/other.c": call})
        self.assertEqual(rc, 1)
        self.assertEqual(len(out), 2, out)
        self.assertTrue(out[0].startswith("policy/other.c:1: calls memfd_create()"), out)

    def test_an_upward_include(self):
        rc, out = self.check({"os/a.h": "", "policy/b.c": '#include "a.h"\n'})
        self.assertEqual(rc, 1)
        self.assertIn("policy/b.c:1: includes os/a.h, a higher layer", out[0])


if __name__ == "__main__":
    unittest.main()
