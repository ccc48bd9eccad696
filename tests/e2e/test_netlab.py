"""The network lab (tests/e2e/netlab.py) leaves nothing behind, whichever way the test process
that made it ends: a set-up that fails after the lab was built (unittest then runs no
tearDownModule), a KeyboardInterrupt, or a kill. Each case is a real lab made by a child
process of this test."""
import json
import os
import signal
import subprocess
import sys
import unittest

from nsbox_test import wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netlab  # noqa: E402

# argv: what to do once the lab is built: "raise" (as a failing setUpModule), "wait"
CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import netlab
lab = netlab.Lab()
pki = lab.subdir("pki")  # as the egress modules keep theirs
netlab.make_pki(pki, ("api.lab.test",))
print(json.dumps({"netns": [lab.lab, lab.up], "tmp": lab.tmp, "pki": pki,
                  "servers": [p.pid for p in lab.procs]}), flush=True)
if sys.argv[2] == "raise":
    raise RuntimeError("the module's set-up failed after its lab was built")
time.sleep(600)
"""


def setUpModule():
    netlab.skip_unless_lab()


def running(pid):
    """Whether pid is a process that has not ended (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class LabTeardown(unittest.TestCase):
    def start(self, then):
        p = subprocess.Popen([sys.executable, "-c", CHILD, HERE, then], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.remove_leftovers, p)
        made = json.loads(p.stdout.readline() or "null")
        self.assertIsNotNone(made, p.stderr.read() if p.poll() is not None else "")
        self.made = made
        return p, made

    def remove_leftovers(self, p):
        """What a failed check left: this test's child and its lab."""
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()
        p.stderr.close()
        for pid in getattr(self, "made", {}).get("servers", []):
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        for ns in getattr(self, "made", {}).get("netns", []):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        tmp = getattr(self, "made", {}).get("tmp")
        if tmp:
            subprocess.run(["rm", "-rf", tmp])

    def assert_all_gone(self, made):
        self.assertTrue(wait_for(lambda: not any(running(s) for s in made["servers"]), 20),
                        "a lab server outlived its test process")
        self.assertEqual([ns for ns in made["netns"] if os.path.exists(f"/run/netns/{ns}")], [])
        self.assertFalse(os.path.exists(made["tmp"]))
        self.assertFalse(os.path.exists(made["pki"]))

    def test_a_set_up_that_fails_after_the_lab_removes_it(self):
        p, made = self.start("raise")
        self.assertEqual(len(made["servers"]), 2)
        self.assertTrue(all(os.path.exists(f"/run/netns/{ns}") for ns in made["netns"]))
        self.assertEqual(p.wait(timeout=60), 1)
        self.assertIn("the module's set-up failed", p.stderr.read())
        self.assert_all_gone(made)

    def test_a_keyboard_interrupt_removes_it(self):
        p, made = self.start("wait")
        os.kill(p.pid, signal.SIGINT)  # to the test process alone, not its servers
        # Python ends of the SIGINT, once its exit handlers ran
        self.assertEqual(p.wait(timeout=60), -signal.SIGINT)
        self.assertIn("KeyboardInterrupt", p.stderr.read())
        self.assert_all_gone(made)

    def test_a_killed_test_leaves_no_server_and_the_next_lab_sweeps_the_rest(self):
        p, made = self.start("wait")
        p.kill()
        p.wait()
        # nothing of the killed process ran: its servers die with it, the names stay
        self.assertTrue(wait_for(lambda: not any(running(s) for s in made["servers"]), 20),
                        "a lab server outlived its killed test process")
        self.assertTrue(all(os.path.exists(f"/run/netns/{ns}") for ns in made["netns"]))
        lab = netlab.Lab()
        try:
            self.assert_all_gone(made)
            self.assertTrue(os.path.exists(f"/run/netns/{lab.lab}"))  # its own is made
        finally:
            lab.cleanup()
        self.assertFalse(os.path.exists(f"/run/netns/{lab.lab}"))


if __name__ == "__main__":
    unittest.main()
