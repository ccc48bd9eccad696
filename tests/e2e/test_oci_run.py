"""End to end: what a person who learned containers from runc's tutorial types, with nsbox-oci
(docs/oci.md): `spec` writes a config.json that runs as it is (once its args name a command and
its terminal is false), `run` prints the container's output, exits with its status (143 for a
SIGTERM) and passes its own SIGTERM on; `run -d`, then `list` (table, -q, JSON matching
`state`) and `delete`; exec before start is refused, saying why. The bundle is a busybox-static
root (tests/lib/oci_bundle.py); the test process is a subreaper, as the other nsbox-oci
modules' are, and every container is deleted at the end."""
import json
import os
import pty
import select
import signal
import subprocess
import unittest

from nsbox_test import wait_for
from oci_bundle import OCI, BundleCase, config, require_runtime

# runc's state fields, as `state` and `list --format json` print them
STATE_KEYS = ("ociVersion", "id", "pid", "status", "bundle", "rootfs", "created", "owner",
              "annotations")


def setUpModule():
    require_runtime()


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class OciRun(BundleCase):
    def setUp(self):
        super().setUp()
        self.config_path = os.path.join(self.bundle, "config.json")

    def run_oci(self, *args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE):
        """nsbox-oci in the bundle's directory (the tutorial's `cd mycontainer`), stdin not a
        terminal."""
        return subprocess.run([OCI, "--root", self.root, "--log", self.log, "--log-format",
                               "json"] + list(args), cwd=self.bundle, stdin=stdin,
                              stdout=stdout, stderr=stderr, env=self.dirs.env(),
                              timeout=60)

    def spec_with(self, args):
        """`spec`, then the tutorial's edit: args a command, terminal false."""
        r = self.run_oci("spec")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.config_path) as f:
            c = json.load(f)
        c["process"]["args"] = args
        c["process"]["terminal"] = False
        self.write_config(c)

    def run_detached(self, cid, args):
        """`run -d` of args: init, reparented to this subreaper once run has exited, is waited
        for at the end. Its streams (the container's) are a file, not pipes it would hold
        open."""
        self.spec_with(args)
        with open(self.out, "w") as out:
            r = self.run_oci("run", "-d", "--pid-file", self.pidfile, cid, stdout=out,
                             stderr=out)
        self.assertEqual(r.returncode, 0, self.output())
        with open(self.pidfile) as f:
            pid = int(f.read())
        self.waited_pids.append(pid)
        return pid

    def list_ids(self):
        r = self.run_oci("list", "-q")
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.decode().split()

    def test_spec_then_run(self):
        self.spec_with(["sh", "-c", "echo hello from $(hostname) in $(pwd); exit 3"])
        r = self.run_oci("run", "c1")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertEqual(r.stdout.decode(), "hello from nsbox in /\n")
        # deleted once it ended: nothing left under --root, nor of the sandbox
        self.assertEqual(self.list_ids(), [])
        self.assertEqual(os.listdir(self.root), [])
        self.assertEqual(self.dirs.leftovers(), [])

    def test_spec_edited_with_sed_as_tutorials_do(self):
        # runc writes `"terminal": true`; tutorials and CI scripts edit it with sed, which
        # matched nothing in nsbox-oci's `"terminal":<TAB>true` and left a terminal to ask for
        r = self.run_oci("spec")
        self.assertEqual(r.returncode, 0, r.stderr)
        subprocess.run(["sed", "-i", 's/"terminal": true/"terminal": false/; '
                        's/"sh"/"sh", "-c", "echo edited by sed"/', self.config_path], check=True)
        r = self.run_oci("run", "c1")
        self.assertEqual((r.returncode, r.stdout), (0, b"edited by sed\n"), r.stderr)
        self.assertEqual(self.list_ids(), [])

    def test_spec_default_is_runcs(self):
        r = self.run_oci("spec", "--bundle", self.bundle)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.config_path) as f:
            c = json.load(f)
        self.assertEqual(c["process"]["args"], ["sh"])
        self.assertTrue(c["process"]["terminal"])
        self.assertEqual(c["root"], {"path": "rootfs", "readonly": True})
        self.assertNotIn("CAP_SYS_ADMIN", c["process"]["capabilities"]["bounding"])
        types = [n["type"] for n in c["linux"]["namespaces"]]
        self.assertEqual(sorted(types), ["cgroup", "ipc", "mount", "network", "pid", "uts"])
        r = self.run_oci("spec", "--rootless", "--bundle", os.path.join(self.tmp))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.tmp, "config.json")) as f:
            self.assertIn({"type": "user"}, json.load(f)["linux"]["namespaces"])

    def test_spec_refuses_to_overwrite(self):
        self.write_config({"mine": True})
        r = self.run_oci("spec")
        self.assertEqual(r.returncode, 1)
        self.assertIn("File config.json exists. Remove it first.", r.stderr.decode())
        with open(self.config_path) as f:
            self.assertEqual(json.load(f), {"mine": True})

    def test_run_of_the_default_spec_on_a_terminal(self):
        """The tutorial's own: `spec`, then `run` from a terminal is a shell on it (the
        caller's terminal lent: what is typed reaches the container's pty, what it prints
        comes back), and run exits with the shell's status."""
        r = self.run_oci("spec")
        self.assertEqual(r.returncode, 0, r.stderr)
        master, slave = pty.openpty()
        self.addCleanup(os.close, master)
        p = subprocess.Popen([OCI, "--root", self.root, "run", "c1"], cwd=self.bundle,
                             stdin=slave, stdout=slave, stderr=slave, env=self.dirs.env(),
                             start_new_session=True)
        os.close(slave)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        os.write(master, b"echo typed-$((6*7)); tty; exit 4\n")
        out = b""
        while select.select([master], [], [], 60)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: run has exited, the last slave is closed
                break
            if not chunk:
                break
            out += chunk
        self.assertEqual(p.wait(timeout=60), 4, out)
        self.assertIn(b"typed-42\r\n/dev/pts/0\r\n", out)
        self.assertEqual(self.list_ids(), [])

    def test_run_of_a_terminal_without_one_names_the_fix(self):
        """A config with a terminal, run with no terminal to lend (stdin not one) and no
        --console-socket: refused, saying what to change."""
        r = self.run_oci("spec")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_oci("run", "c1")
        self.assertEqual(r.returncode, 1)
        msg = r.stderr.decode()
        self.assertIn('"terminal": false', msg)
        self.assertIn("--console-socket", msg)
        self.assertEqual(self.list_ids(), [])

    def test_run_exit_of_a_signal(self):
        self.spec_with(["sh", "-c", "kill -TERM $$"])
        r = self.run_oci("run", "c1")
        self.assertEqual(r.returncode, 143, r.stderr)

    def test_sigterm_to_run_reaches_the_container(self):
        self.spec_with(["sh", "-c", "trap 'echo got-term; exit 7' TERM; echo ready; "
                                    "while :; do sleep 1; done"])
        with open(self.out, "w") as out:
            p = subprocess.Popen([OCI, "--root", self.root, "run", "c1"], cwd=self.bundle,
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                 env=self.dirs.env())
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        self.assertTrue(wait_for(lambda: "ready" in self.output(), timeout=60), self.output())
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(timeout=60), 7, self.output())
        self.assertIn("got-term", self.output())
        self.assertEqual(self.list_ids(), [])

    def test_interrupt_while_creating_leaves_nothing(self):
        """A ^C that comes while run is still making the container (here: its createRuntime
        hook waits on a fifo the test opens once it has sent SIGINT) removes the container,
        whose process never runs, and run exits as interrupted."""
        marker = os.path.join(self.tmp, "in-hook")
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        self.spec_with(["echo", "the-workload-ran"])
        with open(self.config_path) as f:
            c = json.load(f)
        c["hooks"] = {"createRuntime": [{"path": "/bin/sh", "args": [
            "sh", "-c", f"touch {marker}; cat {fifo} >/dev/null"]}]}
        self.write_config(c)
        with open(self.out, "w") as out:
            p = subprocess.Popen([OCI, "--root", self.root, "run", "c1"], cwd=self.bundle,
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                 env=self.dirs.env())
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        self.assertTrue(wait_for(lambda: os.path.exists(marker), timeout=60), self.output())
        p.send_signal(signal.SIGINT)
        with open(fifo, "w"):
            pass  # the hook ends: create returns to run, which has the SIGINT noted
        self.assertEqual(p.wait(timeout=60), 130, self.output())
        self.assertNotIn("the-workload-ran", self.output())
        self.assertEqual(self.list_ids(), [])
        self.assertEqual(self.dirs.leftovers(), [])

    def test_run_keep(self):
        self.spec_with(["true"])
        r = self.run_oci("run", "--keep", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.state()["status"], "stopped")
        self.assertEqual(self.oci("delete", "c1").returncode, 0)

    def test_run_detached_list_delete(self):
        pid = self.run_detached("c1", ["sleep", "100"])
        st = self.state()
        self.assertEqual((st["status"], st["pid"]), ("running", pid))
        r = self.run_oci("list")
        self.assertEqual(r.returncode, 0, r.stderr)
        header, *rows = r.stdout.decode().splitlines()
        self.assertEqual(header.split(), ["ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"])
        self.assertEqual([row.split() for row in rows],
                         [["c1", str(pid), "running", st["bundle"], st["created"], "root"]])
        self.assertEqual(self.list_ids(), ["c1"])
        r = self.run_oci("list", "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        listed = json.loads(r.stdout)
        self.assertEqual(len(listed), 1)
        self.assertEqual({k: listed[0][k] for k in STATE_KEYS}, {k: st[k] for k in STATE_KEYS})
        self.assertEqual(st["rootfs"], os.path.join(os.path.realpath(self.bundle), "rootfs"))
        self.assertEqual(self.oci("delete", "--force", "c1").returncode, 0)
        self.wait(pid)
        self.assertEqual(self.list_ids(), [])
        self.assertEqual(json.loads(self.run_oci("list", "--format", "json").stdout), [])

    def test_list_shows_a_bundle_path_without_its_controls(self):
        # list's table shows the bundle's path, the caller's text, with each escape sequence
        # (ESC's CSI, C1 as UTF-8) as '?', as every message does: it must not drive the terminal
        bundle = os.path.join(self.tmp, "b\x1b[2J\u009bx")
        os.rename(self.bundle, bundle)
        self.bundle, self.config_path = bundle, os.path.join(bundle, "config.json")
        pid = self.run_detached("c1", ["sleep", "100"])
        r = self.run_oci("list")
        self.assertEqual(r.returncode, 0, r.stderr)
        header, *rows = r.stdout.splitlines()
        self.assertEqual(len(rows), 1, r.stdout)
        self.assertEqual(rows[0].split()[3], os.path.realpath(self.tmp).encode() + b"/b?[2J?x")
        self.assertNotIn(b"\x1b", r.stdout)
        self.assertNotIn(b"\x9b", r.stdout)
        self.assertEqual(self.oci("delete", "--force", "c1").returncode, 0)
        self.wait(pid)

    def test_a_signal_reaches_the_program_alone(self):
        # runc signals the container's process, not its process group: the background shell
        # it started must not see the USR1 (the default action would end it). Had it, its
        # trap would print "child" before the TERM the program sends it after its own trap.
        child = ('trap "echo child" USR1; trap "exit 0" TERM; echo ready; '
                 'while :; do sleep 0.05; done')
        pid = self.run_detached("c1", ["sh", "-c", f'trap "echo parent" USR1; sh -c \'{child}\' & '
                                       'c=$!; wait; kill -TERM $c; wait $c; echo done'])
        self.assertTrue(wait_for(lambda: "ready" in self.output(), timeout=60), self.output())
        self.assertEqual(self.oci("kill", "c1", "USR1").returncode, 0)
        self.wait(pid)
        self.assertEqual(self.output().split(), ["ready", "parent", "done"])
        self.assertEqual(self.oci("delete", "c1").returncode, 0)

    def test_list_goes_past_a_broken_state(self):
        pid = self.run_detached("c1", ["sleep", "100"])
        os.makedirs(os.path.join(self.root, "b0"))
        with open(os.path.join(self.root, "b0", "state.json"), "w") as f:
            f.write("{not json")
        for args in (["list"], ["list", "-q"], ["list", "--format", "json"]):
            r = self.run_oci(*args)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("c1", r.stdout.decode())
            self.assertNotIn("b0", r.stdout.decode())
            self.assertIn("b0", r.stderr.decode())
        self.assertEqual(self.oci("delete", "--force", "c1").returncode, 0)
        self.wait(pid)

    def test_exec_before_start_is_refused_saying_why(self):
        self.write_config(config(["sleep", "100"]))
        pid = self.create()
        r = self.oci("exec", "c1", "true")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("run -d", r.stderr.decode())
        # nothing changed: it starts, and exec then runs
        self.assertEqual(self.state()["status"], "created")
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        r = self.oci("exec", "c1", "echo", "in")
        self.assertEqual((r.returncode, r.stdout), (0, b"in\n"), r.stderr)
        self.assertEqual(self.oci("delete", "--force", "c1").returncode, 0)
        self.wait(pid)

    def test_help(self):
        r = self.run_oci("--help")
        self.assertEqual(r.returncode, 0)
        for cmd in ("spec [--bundle DIR]", "run [--bundle DIR]", "list [--format table|json]"):
            self.assertIn(cmd, r.stdout.decode())
        for cmd in ("spec", "run", "list", "create"):
            r = self.run_oci(cmd, "--help")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.decode().startswith(f"usage: nsbox-oci {cmd} "), r.stdout)


if __name__ == "__main__":
    unittest.main()
