"""End-to-end: exec -t under a real pseudo-terminal, with a real supervisor (the persistent
sandboxes of test_sessions)."""
import json
import os
import signal
import struct
import time
import unittest

from nsbox_test import NSBOX, control_socket, recv_reply, send_request, wait_for

from test_sessions import SessionTest, setUpModule  # noqa: F401 (unittest runs setUpModule)


class Terminal(SessionTest):
    """exec -t under a real pseudo-terminal, as a person at a terminal would use it."""

    def run_in_pty(self, args, send=b"", rows=30, cols=100, timeout=20, signal_at_connect=0):
        """args' exit code and what it wrote to the terminal, a pty. With signal_at_connect,
        that signal is sent as soon as nsbox has connected to the supervisor: the command is
        about to start, and exec has yet to hear that it did."""
        import fcntl
        import termios
        pid, fd = self.start_in_pty(args)
        if signal_at_connect:
            self.assertTrue(wait_for(lambda: self.has_a_socket(pid), 20, 0.001))
            os.kill(pid, signal_at_connect)
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.kill(pid, signal.SIGWINCH)
        return self.finish_in_pty(pid, fd, send, timeout)

    def start_in_pty(self, args):
        """nsbox with args under a new pty: its pid and the pty's master."""
        import pty
        pid, fd = pty.fork()
        if pid == 0:
            os.execve(NSBOX, [NSBOX] + args, self.dirs.env())
        self.addCleanup(self.reap, pid)
        return pid, fd

    @staticmethod
    def reap(pid):
        """A child a failed check left running: ended and waited for."""
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        except ChildProcessError:  # waited for already
            pass

    def finish_in_pty(self, pid, fd, send=b"", timeout=20):
        """What pid writes to the pty until it ends (send written once "ready" shows), and its
        exit code."""
        out = b""
        deadline = time.monotonic() + timeout
        sent = False
        while time.monotonic() < deadline:
            import select
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
                if send and not sent and b"ready" in out:
                    os.write(fd, send)
                    sent = True
        _, status = os.waitpid(pid, 0)
        os.close(fd)
        return os.waitstatus_to_exitcode(status), out

    @staticmethod
    def has_a_socket(pid):
        """Whether process pid, once it runs nsbox, has a socket open."""
        try:
            if os.readlink(f"/proc/{pid}/exe") != os.path.realpath(NSBOX):
                return False
            return any(os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
                       for fd in os.listdir(f"/proc/{pid}/fd"))
        except OSError:  # it is between its fork and its exec, or a descriptor just closed
            return False

    def test_term_and_hup_right_after_start_reach_the_command(self):
        """A TERM (a CI job's timeout) or a HUP (the terminal closed) that comes while exec -t
        waits for its command to start goes to the command: exec does not die of it, leaving
        the command to be killed as an orphan."""
        sid = self.create()
        for sig, trapped in ((signal.SIGTERM, 42), (signal.SIGHUP, 43)):
            name = signal.Signals(sig).name[3:]
            code, out = self.run_in_pty(
                ["exec", "-t", sid, "--", "sh", "-c",
                 f"trap 'echo got-{name}; kill $!; exit {trapped}' {name}; sleep 30 & wait"],
                signal_at_connect=sig)
            # the command ended of the signal: in its trap, or before its trap was set
            self.assertIn(code, (trapped, 128 + sig), (name, out))

    def test_exec_t_at_a_busy_supervisor_waits_its_turn_and_hears_a_term(self):
        """A supervisor with every exec slot taken answers "busy": exec -t asks again until it
        runs, and a TERM while it waits ends it (nothing has started; blocked, the TERM would
        have waited for a slot that may never come)."""
        sid = self.create()
        exec_ = json.dumps({"v": 1, "op": "exec", "argv": ["sleep", "100"]}).encode()
        null = os.open(os.devnull, os.O_RDWR)
        self.addCleanup(os.close, null)
        conns = []
        self.addCleanup(lambda: [c.close() for c in conns])
        for _ in range(49):  # 48 run (the most at once), the last is refused: all were read
            conns.append(control_socket(self.dirs, sid, timeout=15))
            send_request(conns[-1], exec_, fds=(null,) * 3)
        self.assertEqual(recv_reply(conns.pop())["error"]["code"], "busy")

        pid, fd = self.start_in_pty(["exec", "-t", sid, "--", "true"])
        self.assertTrue(wait_for(lambda: self.has_a_socket(pid), 20, 0.001))
        os.kill(pid, signal.SIGTERM)
        status = wait_for(lambda: os.waitpid(pid, os.WNOHANG)[1] or None, 20)
        self.assertTrue(status, "exec -t went on waiting for a slot after a TERM")
        self.assertEqual(os.waitstatus_to_exitcode(status), -signal.SIGTERM)
        os.close(fd)

        pid, fd = self.start_in_pty(["exec", "-t", sid, "--", "sh", "-c", "echo ran; exit 5"])
        self.assertTrue(wait_for(lambda: self.has_a_socket(pid), 20, 0.001))
        conns.pop().close()  # its command ends with the connection: a slot is free
        code, out = self.finish_in_pty(pid, fd)
        self.assertEqual(code, 5, out)
        self.assertIn(b"ran", out)

    def test_exec_t_gives_a_terminal_with_the_window_size(self):
        sid = self.create()
        code, out = self.run_in_pty(["exec", "-t", sid, "--", "sh", "-c",
                                     "test -t 0 && echo TTY; stty size; tty; exit 7"])
        self.assertEqual(code, 7, out)
        self.assertIn(b"TTY", out)
        self.assertIn(b"30 100", out)
        # the terminal is one of the sandbox's own devpts: it has a name in there
        self.assertRegex(out, rb"/dev/pts/\d+")
        self.assertNotIn(b"not a tty", out)
        code, out = self.run_in_pty(["exec", "-t", sid, "--", "no-such-command"])
        self.assertEqual(code, 127, out)
        self.assertIn(b"command not found", out)

    def test_ctrl_c_reaches_the_command(self):
        # The ^C goes in once "ready" shows. Were sleep forked, the shell might still be
        # forking it: dash (sh -c) catches SIGINT and holds it over a fork, and a child that is
        # not yet sleep loses it at its exec; sleep would run its 30 s, and the shell die of the
        # held SIGINT after it, 130 all the same (a pass 30 s late, in about one run in five).
        # With exec, the process that said "ready" is the one that sleeps.
        sid = self.create()
        code, out = self.run_in_pty(["exec", "-t", sid, "--", "sh", "-c",
                                     "echo ready; exec sleep 30"], send=b"\x03")
        self.assertEqual(code, 130, out)

    def test_exec_t_refuses_without_a_terminal(self):
        sid = self.create()
        r = self.nsbox("exec", "-t", sid, "--", "true")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"needs a terminal", r.stderr)


if __name__ == "__main__":
    unittest.main()
