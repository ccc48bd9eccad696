"""End-to-end: a persistent sandbox's background processes: ps, wait, kill, timeouts and
their logs (moved from test_sessions.py, which has the rest of the lifecycle)."""
import os
import re
import select
import subprocess
import time
import unittest

from nsbox_test import NSBOX, control_socket, recv_reply, send_request, wait_for

from test_sessions import SessionTest, setUpModule  # noqa: F401 (unittest runs setUpModule)


class Background(SessionTest):
    def test_background_process_ps_logs_kill(self):
        sid = self.create()
        r = self.nsbox("exec", "-d", sid, "--", "sh", "-c",
                       "echo started; echo warn >&2; exec sleep 60")
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = r.stdout.decode().strip()
        self.assertTrue(pid.isdigit())
        time.sleep(0.3)
        ps = self.nsbox("ps", sid).stdout.decode()
        self.assertRegex(ps, rf"(?m)^{pid}\s+running")
        # what it printed, once it has (its warning comes last)
        wait_for(lambda: self.nsbox("logs", sid, pid).stderr)
        logs = self.nsbox("logs", sid, pid)
        self.assertEqual((logs.stdout, logs.stderr), (b"started\n", b"warn\n"))
        self.assertEqual(self.nsbox("kill", sid, pid, "9").returncode, 0)
        self.assertTrue(self.ps_shows(sid, rf"(?m)^{pid}\s+exit 137"),
                        self.nsbox("ps", sid).stdout)
        # signals by name too, as kill(1) takes them; a wrong one is a usage error
        pid = self.nsbox("exec", "-d", sid, "--", "sleep", "60").stdout.decode().strip()
        self.assertEqual(self.nsbox("kill", sid, pid, "SIGINT").returncode, 0)
        self.assertTrue(self.ps_shows(sid, rf"(?m)^{pid}\s+exit 130"),
                        self.nsbox("ps", sid).stdout)
        # one line per process, whatever the command holds
        multi = self.nsbox("exec", "-d", sid, "--", "sh", "-c", "sleep 60\necho x").stdout
        line = [l for l in self.nsbox("ps", sid).stdout.decode().splitlines()
                if l.startswith(multi.decode().strip() + " ")]
        self.assertEqual(len(line), 1)
        self.assertTrue(line[0].endswith("sh -c sleep 60\\necho x"), line)
        r = self.nsbox("kill", sid, pid, "NOPE")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"not a signal", r.stderr)

    def test_ps_shows_a_command_without_its_controls(self):
        # the command column shows C1 controls as UTF-8 encodes them (U+009B, CSI) and invalid
        # UTF-8 (a raw 0x9b) as '?', as every message does, a newline still as "\n": a
        # command's text must not drive the terminal of whoever runs ps
        sid = self.create()
        r = self.nsbox("exec", "-d", sid, "--", "sh", "-c",
                       b"sleep 60 # \xc2\x9b2J \x9b31m \x1b]0;t\x07\nx \xc3\xa9")
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = r.stdout.decode().strip()
        ps = self.nsbox("ps", sid).stdout
        line = [l for l in ps.splitlines() if l.startswith(pid.encode() + b" ")]
        self.assertEqual(len(line), 1, ps)
        self.assertTrue(line[0].endswith(b"sh -c sleep 60 # ?2J ?31m ?]0;t?\\nx \xc3\xa9"), line)
        self.assertEqual(self.nsbox("kill", sid, pid, "9").returncode, 0)

    def test_wait_for_a_background_process(self):
        sid = self.create()
        pid = self.nsbox("exec", "-d", sid, "--", "sh", "-c", "sleep 0.5; exit 7").stdout
        pid = pid.decode().strip()
        self.assertEqual(self.nsbox("wait", sid, pid).returncode, 7)  # its exit code: it ended
        self.assertEqual(self.nsbox("wait", "--timeout", "0", sid, pid).returncode, 7)  # ended
        slow = self.nsbox("exec", "-d", sid, "--", "sleep", "60").stdout.decode().strip()
        t = time.monotonic()
        r = self.nsbox("wait", "--timeout", "0.3", sid, slow)
        self.assertEqual(r.returncode, 124)
        self.assertGreaterEqual(time.monotonic() - t, 0.29)
        self.assertIn(b"still running after 0.3 s", r.stderr)
        self.assertRegex(self.nsbox("ps", sid).stdout.decode(), rf"(?m)^{slow}\s+running")
        r = self.nsbox("wait", sid, "99999")
        self.assertEqual((r.returncode, r.stderr), (125, b"nsbox: no background process 99999\n"))
        for bad in (["abc"], ["--timeout", "nan", slow], ["--timeout", "-1", slow], [], ["1", "2"]):
            args = bad[:-1] + [sid, bad[-1]] if bad and bad[0] == "--timeout" else [sid] + bad
            r = self.nsbox("wait", *args)
            self.assertEqual(r.returncode, 125, (bad, r.stderr))
        r = self.nsbox("wait", sid, "1")  # said "wait needs a process id", given one
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"pid 1 is the sandbox's init", r.stderr)
        r = self.nsbox("logs", sid, "12x")  # was read as pid 12
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"logs needs a process id", r.stderr)
        for args in (["logs", sid, "1"], ["logs", "-f", sid, "1"]):  # "needs a process id"
            r = self.nsbox(*args)
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"pid 1 is the sandbox's init, which has no logs", r.stderr)
        r = self.nsbox("kill", sid, "1", "KILL")  # said "kill needs a process id", given one
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"pid 1 is the sandbox's init, which ends only with the sandbox", r.stderr)
        r = self.nsbox("logs", sid, slow, "-f", "--follow", "x")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"nsbox logs [-f] ID PID", r.stderr)
        r = self.nsbox("exec", "--timeout", "nan", sid, "--", "true")  # was taken as a number
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"--timeout needs a number", r.stderr)
        self.assertEqual(self.nsbox("kill", sid, slow, "KILL").returncode, 0)
        self.assertEqual(self.nsbox("wait", "--timeout", "10", sid, slow).returncode, 137)
        # why nsbox ended it, as exec says (124 was silent, like a command's own 124)
        timed = self.nsbox("exec", "-d", "--timeout", "0.3", sid, "--", "sleep", "60").stdout
        r = self.nsbox("wait", sid, timed.decode().strip())
        self.assertEqual(r.returncode, 124)
        self.assertIn(b"timed out: the command ran past its --timeout", r.stderr)
        own = self.nsbox("exec", "-d", sid, "--", "sh", "-c", "exit 124").stdout
        r = self.nsbox("wait", sid, own.decode().strip())
        self.assertEqual((r.returncode, r.stderr), (124, b""))

    def test_a_reused_pid_names_the_running_process(self):
        # After the sandbox's pids wrap around, a pid can name an ended background process and
        # a running one. wait, kill and logs must act on the running one.
        sid = self.create()
        old = self.nsbox("exec", "-d", sid, "--", "sh", "-c", "echo old; exit 3").stdout
        old = int(old.decode())
        self.assertEqual(self.nsbox("wait", sid, str(old)).returncode, 3)
        # make the sandbox's next pid that one again: ns_last_pid of its pid namespace,
        # written by a process in it (echo is sh's own: no fork takes a pid in between)
        r = subprocess.run(["nsenter", "--target", str(self.init_pid(sid)), "--pid",
                            "--", "sh", "-c", "echo %d > /proc/sys/kernel/ns_last_pid" % (old - 1)],
                           capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        new = self.nsbox("exec", "-d", sid, "--", "sh", "-c", "echo new; exec sleep 60").stdout
        self.assertEqual(int(new.decode()), old, "the pid was not reused: the test proves nothing")
        self.assertEqual(len(re.findall(rf"(?m)^{old}\s", self.nsbox("ps", sid).stdout.decode())), 2)
        self.assertEqual(self.nsbox("wait", "--timeout", "0.3", sid, str(old)).returncode, 124)
        wait_for(lambda: self.nsbox("logs", sid, str(old)).stdout)  # once it has printed
        self.assertEqual(self.nsbox("logs", sid, str(old)).stdout, b"new\n")
        self.assertEqual(self.nsbox("kill", sid, str(old), "KILL").returncode, 0)
        self.assertEqual(self.nsbox("wait", "--timeout", "10", sid, str(old)).returncode, 137)

    def test_wait_for_an_ended_process_lets_the_sandbox_sleep(self):
        # Like ps and logs, asking about a process that has ended does not wake the sandbox;
        # only a wait that has to wait does.
        sid = self.create("--idle-timeout", "1")
        pid = self.nsbox("exec", "-d", sid, "--", "sh", "-c", "exit 3").stdout.decode().strip()
        deadline = time.monotonic() + 10
        while self.inspect(sid)["state"] != "sleeping" and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.inspect(sid)["state"], "sleeping")
        self.assertEqual(self.nsbox("wait", "--timeout", "5", sid, pid).returncode, 3)
        info = self.inspect(sid)
        self.assertEqual((info["state"], info["sleeps"]), ("sleeping", 1))
        self.assertNotIn("last_wake_us", info)  # never woken

    def test_background_timeout_kills_its_tree(self):
        sid = self.create()
        pid = self.nsbox("exec", "-d", "--timeout", "1", sid, "--", "sh", "-c",
                         "sleep 30 & setsid sleep 31 & sleep 32; echo never").stdout
        pid = pid.decode().strip()
        self.assertEqual(self.nsbox("wait", "--timeout", "20", sid, pid).returncode, 124)
        self.assertRegex(self.nsbox("ps", sid).stdout.decode(), rf"(?m)^{pid}\s+exit 124")
        self.assertEqual(self.nsbox("logs", sid, pid).stdout, b"")
        self.assertTrue(self.none_left(sid), "a sleep outlived the timeout")
        # -i cannot be honoured for a background process: refused, nothing started
        r = self.nsbox("exec", "-d", "-i", sid, "--", "cat")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"exec -d takes no -i", r.stderr)
        self.assertEqual(len(self.nsbox("ps", sid).stdout.decode().splitlines()), 2)

    def test_background_timeout_fires_in_a_sleeping_sandbox(self):
        # The deadline is wall-clock from the start; a sandbox asleep by then is woken to end
        # the process (ps does not wake it, so only the deadline can).
        sid = self.create("--idle-timeout", "1")
        pid = self.nsbox("exec", "-d", "--timeout", "2.5", sid, "--", "sleep", "60").stdout
        pid = pid.decode().strip()
        deadline = time.monotonic() + 15
        ps = ""
        while time.monotonic() < deadline:
            ps = self.nsbox("ps", sid).stdout.decode()
            if "exit 124" in ps:
                break
            time.sleep(0.2)
        self.assertRegex(ps, rf"(?m)^{pid}\s+exit 124")
        self.assertGreaterEqual(self.inspect(sid)["sleeps"], 1)

    def test_wait_keeps_the_sandbox_awake(self):
        # A client waiting for a process is a client at work: the idle timer must not freeze
        # the process it waits for (it would never end). The wait must come before the idle
        # timeout (counted from the exec): 2 s is short for two nsbox commands in CI's emulated
        # VM. The process ends 8 s after the exec: the timer fires during the wait (at 5 s,
        # then again 5 s later if it is still at work), and the process does not end just as
        # it fires again (at 10 s it did, and the sandbox fell asleep before the inspect).
        sid = self.create("--idle-timeout", "5")
        pid = self.nsbox("exec", "-d", sid, "--", "sh", "-c", "sleep 8; exit 4").stdout
        r = self.nsbox("wait", "--timeout", "30", sid, pid.decode().strip())
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertEqual(self.inspect(sid)["sleeps"], 0)

    def test_background_log_is_bounded(self):
        sid = self.create()
        r = self.nsbox("exec", "-d", sid, "--", "sh", "-c",
                       "head -c 5000000 /dev/zero | tr '\\0' x")
        pid = r.stdout.decode().strip()
        for _ in range(100):
            if "exit 0" in self.nsbox("ps", sid).stdout.decode():
                break
            time.sleep(0.1)
        logs = self.nsbox("logs", sid, pid)
        self.assertEqual(logs.stdout, b"x" * (64 << 10))  # the last 64 KiB are kept
        # and the log, which now starts mid-stream, says so (the output alone did not)
        self.assertEqual(logs.stderr.decode(), "nsbox: note: earlier output of process %s was "
                         "dropped (the last 64 KiB of each stream are kept)\n" % pid)

    def follow(self, sid, pid):
        return subprocess.Popen([NSBOX, "logs", "-f", sid, pid], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self.dirs.env())

    def test_logs_follow_streams_output_until_the_process_ends(self):
        sid = self.create()
        # "second" only once the test has read "first" through the follower: the output must
        # arrive while the process runs, not at its end. A character split across two writes
        # (a 0.3 s gap between its two bytes) arrives whole.
        pid = self.nsbox("exec", "-d", sid, "--", "sh", "-c",
                         "echo first; echo oops >&2; while [ ! -e go ]; do sleep 0.05; done; "
                         "printf 'caf\\303'; sleep 0.3; printf '\\251 second\\n'"
                         ).stdout.decode().strip()
        self.assertTrue(pid.isdigit(), pid)
        p = self.follow(sid, pid)
        try:
            ready, _, _ = select.select([p.stdout], [], [], 20)
            self.assertTrue(ready, "no output while the process runs")
            self.assertEqual(p.stdout.readline(), b"first\n")
            self.assertIsNone(p.poll(), "logs -f ended while the process runs")
            self.exec(sid, "touch", "go")
            out, err = p.communicate(timeout=20)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(out, "café second\n".encode())
        self.assertEqual(err, b"oops\n")
        # the process's own end ended it, and ps agrees
        self.assertRegex(self.nsbox("ps", sid).stdout.decode(), rf"(?m)^{pid}\s+exit 0")

    def test_logs_follow_ends_when_a_child_keeps_the_output_open(self):
        # The process ended; a child it left holds its stdout. Following ends once nothing
        # more came for a second after the end, rather than for as long as the child lives.
        sid = self.create()
        pid = self.nsbox("exec", "-d", sid, "--", "sh", "-c",
                         "sleep 60 & echo bye").stdout.decode().strip()
        started = time.monotonic()
        p = self.follow(sid, pid)
        out, err = p.communicate(timeout=30)
        self.assertEqual((p.returncode, out, err), (0, b"bye\n", b""))
        self.assertLess(time.monotonic() - started, 15)

    def test_logs_follow_ends_when_its_reader_goes(self):
        # `nsbox logs -f ID PID | grep -m1 ready`: after "ready" the process writes only to
        # stderr, so no write of ours ever fails; the follower must still see its reader go.
        sid = self.create()
        pid = self.nsbox("exec", "-d", sid, "--", "sh", "-c",
                         "echo ready; while :; do echo tick >&2; sleep 0.2; done"
                         ).stdout.decode().strip()
        p = subprocess.Popen([NSBOX, "logs", "-f", sid, pid], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=self.dirs.env())
        try:
            self.assertEqual(p.stdout.readline(), b"ready\n")
            p.stdout.close()
            self.assertEqual(p.wait(timeout=10), 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        # and logs that cannot be written are an error, not a silent success
        with open("/dev/full", "w") as full:
            r = subprocess.run([NSBOX, "logs", sid, pid], stdout=full, stderr=subprocess.PIPE,
                               env=self.dirs.env())
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"cannot write the logs: No space left on device", r.stderr)
        # no stdout at all: an error at once, not a loop of requests as fast as they go (a
        # process that writes nothing never made a write of ours fail)
        quiet = self.nsbox("exec", "-d", sid, "--", "sleep", "100").stdout.decode().strip()
        r = subprocess.run([NSBOX, "logs", "-f", sid, quiet], stderr=subprocess.PIPE,
                           env=self.dirs.env(), timeout=20, preexec_fn=lambda: os.close(1))
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"cannot write the logs: Bad file descriptor", r.stderr)

    def test_logs_follow_says_when_the_sandbox_sleeps(self):
        sid = self.create("--idle-timeout", "1")
        pid = self.nsbox("exec", "-d", sid, "--", "sh", "-c",
                         "while :; do echo tick; sleep 0.2; done").stdout.decode().strip()
        p = subprocess.Popen([NSBOX, "logs", "-f", sid, pid],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env=self.dirs.env())
        try:
            ready, _, _ = select.select([p.stderr], [], [], 20)
            self.assertTrue(ready, "no note while the sandbox sleeps")
            self.assertEqual(p.stderr.readline().decode(),
                             f"nsbox: note: sandbox {sid} is asleep (idle_timeout_seconds): "
                             f"process {pid} is frozen until a request wakes the sandbox; "
                             "following on\n")
            self.assertIsNone(p.poll())
        finally:
            p.kill()
            p.wait()

    def test_logs_follow_says_where_output_was_dropped(self):
        # The supervisor keeps 64 KiB of each stream. A follower that falls further behind
        # says so where it happened; it never shows a byte twice.
        sid = self.create()
        pid = self.nsbox("exec", "-d", sid, "--", "sh", "-c",
                         "head -c 3000000 /dev/zero | tr '\\0' x").stdout.decode().strip()
        p = self.follow(sid, pid)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(out, b"x" * len(out))
        note = ("nsbox: note: output of process %s was dropped here: it wrote more than the "
                "64 KiB kept of each stream between two reads\n" % pid)
        early = "nsbox: note: earlier output of process %s was dropped (the last 64 KiB of " \
                "each stream are kept)\n" % pid
        if len(out) == 3000000:
            self.assertEqual(err, b"")
        else:
            self.assertLess(len(out), 3000000)
            notes = err.decode().splitlines(keepends=True)
            self.assertTrue(notes and set(notes) <= {note, early}, err)

    def test_logs_offsets_on_the_socket(self):
        # The protocol under -f: stdout_from/stderr_from give what came after a reply's
        # stdout_end/stderr_end; an offset the log no longer holds is marked truncated.
        sid = self.create()
        pid = int(self.nsbox("exec", "-d", sid, "--", "sh", "-c",
                             "echo one; echo two >&2").stdout)

        def logs(**kw):
            with control_socket(self.dirs, sid) as s:
                send_request(s, {"op": "logs", "pid": pid, **kw})
                return recv_reply(s)

        # The pipes close (eof) a moment before the supervisor reaps the process (running
        # turns false): wait for both.
        r = wait_for(lambda: (lambda r: r if r.get("eof") and not r.get("running") else None)(logs()))
        self.assertTrue(r, "the output pipes were never closed or the process never reaped")
        self.assertEqual((r["stdout"], r["stderr"], r["stdout_end"], r["stderr_end"],
                          r["truncated"], r["running"]), ("one\n", "two\n", 4, 4, False, False))
        r = logs(stdout_from=2, stderr_from=4)
        self.assertEqual((r["stdout"], r["stderr"], r["stdout_end"]), ("e\n", "", 4))
        r = logs(stdout_from=99, stderr_from=0)  # a future offset: nothing (yet)
        self.assertEqual((r["stdout"], r["stderr"], r["stdout_end"]), ("", "two\n", 4))
        r = logs(stdout_from=-1)
        self.assertFalse(r["ok"])
        self.assertIn("stdout_from", r["error"]["message"])

    def test_background_output_costs_the_host_little_cpu(self):
        # The supervisor reads background output outside every cgroup of the sandbox: a
        # `yes &` had it take a whole host CPU beside the sandbox's own quota, and
        # requests waited behind the reading. It now reads at most 8 MiB/s (the writer waits).
        sid = self.create("--instance-type", "small")
        sup = self.supervisor_pid(sid)

        def cpu_s():
            with open("/proc/%d/stat" % sup) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        flood = self.nsbox("exec", "-d", sid, "--", "yes").stdout.decode().strip()
        time.sleep(0.5)
        c0, t0 = cpu_s(), time.monotonic()
        time.sleep(3)
        started = time.monotonic()
        self.assertEqual(self.exec(sid, "echo", "served").stdout, b"served\n")
        self.assertLess(time.monotonic() - started, 5)
        used = (cpu_s() - c0) / (time.monotonic() - t0)
        self.assertLess(used, 0.35, "the supervisor used %.0f%% of a CPU" % (100 * used))
        logs = self.nsbox("logs", sid, flood).stdout
        self.assertEqual(logs, b"y\n" * (32 << 10))  # still read: the last 64 KiB are there
        self.assertEqual(self.nsbox("kill", sid, flood, "KILL").returncode, 0)

    def test_background_output_is_shared_among_writers(self):
        # The budget of background output (8 MiB/s) was spent in slot order: four streams
        # that never ran dry took every window, the streams of later processes were never read,
        # and their writers blocked for good on a full pipe (`wait` on them hung). Each stream
        # with output now has its part of every window: only the fast writers wait.
        sid = self.create()
        flood = "yes A & exec yes B >&2"
        enlarged = ("import fcntl, os\n"
                    "for fd in (1, 2):\n"
                    "    fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ: 1 MiB a read\n"
                    "os.execvp('sh', ['sh', '-c', %r])\n" % flood)
        floods = []
        for i in range(7):
            cmd = ["python3", "-c", enlarged] if i < 2 else ["sh", "-c", flood]
            r = self.nsbox("exec", "-d", sid, "--", *cmd)
            self.assertEqual(r.returncode, 0, r.stderr)
            floods.append(r.stdout.decode().strip())
        r = self.nsbox("exec", "-d", sid, "--", "sh", "-c",
                       "seq 1 100000; touch /workspace/modest.done")
        self.assertEqual(r.returncode, 0, r.stderr)
        modest = r.stdout.decode().strip()
        self.assertTrue(wait_for(lambda: self.exec(sid, "test", "-e", "/workspace/modest.done")
                                 .returncode == 0, 60, 0.5),
                        "the modest writer never got its output out")
        self.assertTrue(self.ps_shows(sid, r"(?m)^%s\s+exit 0\s" % modest, 60))
        # its end was still in the pipe when it ended (the last 64 KiB fit there)
        self.assertTrue(wait_for(lambda: self.nsbox("logs", sid, modest).stdout
                                 .endswith(b"\n99999\n100000\n"), 60, 0.5),
                        self.nsbox("logs", sid, modest).stdout[-100:])
        for pid in floods:  # every stream was read, the flooders' too
            r = self.nsbox("logs", sid, pid)
            self.assertTrue(b"A\nA\n" in r.stdout and b"B\nB\n" in r.stderr, pid)
        for pid in floods:
            self.assertEqual(self.nsbox("kill", sid, pid, "KILL").returncode, 0)


if __name__ == "__main__":
    unittest.main()
