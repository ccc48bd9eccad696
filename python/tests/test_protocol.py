"""The client's side of docs/protocol.md, against a fake supervisor: framing, descriptors in
both directions, request fields, error codes, tombstones. No root and no nsbox binary needed;
test_client.py checks the same calls against real sandboxes."""
import asyncio
import errno
import io
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nsbox  # noqa: E402
from nsbox._transport import SESSION_END  # noqa: E402

SID = "0123456789ab"


def recv_msg(conn):
    hdr, fds, _, _ = socket.recv_fds(conn, 4, 3)
    if not hdr:
        return None, []
    while len(hdr) < 4:
        hdr += conn.recv(4 - len(hdr))
    (n,) = struct.unpack(">I", hdr)
    body = b""
    while len(body) < n:
        body += conn.recv(n - len(body))
    return json.loads(body), fds


def send_msg(conn, obj, fds=()):
    body = json.dumps(obj).encode()
    msg = struct.pack(">I", len(body)) + body
    if fds:
        socket.send_fds(conn, [msg], list(fds))
    else:
        conn.sendall(msg)


class FakeSupervisor:
    """Serves one request per connection, recording each request."""

    def __init__(self, rt):
        self.rt = rt
        self.files = {"hello.txt": b"hello\n"}
        self.requests = []
        os.makedirs(os.path.join(rt, SID))
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(os.path.join(rt, SID, "ctl"))
        self.sock.listen(8)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                req, fds = recv_msg(conn)
                if req is None:
                    continue
                self.requests.append(req)
                try:
                    self.handle(conn, req, fds)
                finally:
                    for fd in fds:
                        os.close(fd)
                if req["op"] == "delete":
                    self.stop()
                    return

    def err(self, conn, code, message, **extra):
        send_msg(conn, dict({"v": 1, "ok": False, "error": {"code": code, "message": message}},
                            **extra))

    def handle(self, conn, req, fds):
        op, path = req["op"], req.get("path")
        ok = {"v": 1, "ok": True}
        if op == "read":
            if path not in self.files:
                return self.err(conn, "not_found", "no such file: %s" % path)
            fd = os.memfd_create("x")
            os.write(fd, self.files[path] + getattr(self, "extra", b""))
            os.lseek(fd, 0, 0)
            send_msg(conn, dict(ok, size=len(self.files[path])), [fd])
            os.close(fd)
        elif op == "write":
            data = b""
            while True:
                chunk = os.read(fds[0], 65536)
                if not chunk:
                    break
                data += chunk
            self.files[path] = data
            send_msg(conn, dict(ok, size=len(data)))
        elif op == "list":
            send_msg(conn, dict(ok, entries=[
                {"name": n, "type": "file", "size": len(d), "mode": 0o644, "mtime": 1.5}
                for n, d in sorted(self.files.items())]))
        elif op == "stat":
            if path not in self.files:
                return self.err(conn, "not_found", "no such file: %s" % path)
            send_msg(conn, dict(ok, type="file", size=len(self.files[path]), mode=0o644,
                                mtime=2.0))
        elif op in ("remove", "mkdir"):
            self.files.pop(path, None)
            send_msg(conn, ok)
        elif op == "exec":
            data = os.read(fds[0], 1000)
            os.write(fds[1], b"out:" + data)
            os.write(fds[2], b"err\n")
            send_msg(conn, dict(ok, exit_code=3, timed_out=False, oom_killed=False))
        elif op == "start":
            self.err(conn, "exec", "no-such: command not found", exit_code=127)
        elif op == "kill":
            self.err(conn, "not_found", "no running process %d started by nsbox" % req["pid"])
        elif op == "delete":
            # the log's format (sandbox/state.h), with records of other sandboxes around
            os.makedirs(os.path.join(self.rt, "tombstones"), exist_ok=True)
            with open(os.path.join(self.rt, "tombstones", "older"), "w") as f:
                f.write("%s deleted because ttl_seconds=5 expired\n" % SID)
            with open(os.path.join(self.rt, "tombstones", "recent"), "a") as f:
                f.write("0123456789ab deleted because ttl_seconds=9 expired\n"
                        "%s %s\n" % (SID, SESSION_END if req.get("by") == "session"
                                      else "deleted by rm"))
            send_msg(conn, ok)
        else:
            self.err(conn, "invalid", "request: unknown op '%s'" % op)

    def stop(self):
        self.sock.close()
        shutil.rmtree(os.path.join(self.rt, SID), ignore_errors=True)


class FakeTest(unittest.TestCase):
    """A session of SID against a FAKE supervisor in a runtime directory of the test's own."""

    FAKE = FakeSupervisor

    def setUp(self):
        self.rt = tempfile.mkdtemp(prefix="nsbox-proto-")
        self.sup = self.FAKE(self.rt)
        self.sb = nsbox.Session(SID, self.rt)

    def tearDown(self):
        self.sup.stop()
        shutil.rmtree(self.rt, ignore_errors=True)


class Protocol(FakeTest):

    def test_read_write_descriptors(self):
        self.assertEqual(self.sb.read_file("hello.txt"), b"hello\n")
        payload = os.urandom(300_000)
        self.assertEqual(self.sb.write_file("d/x.bin", payload, mode=0o600), len(payload))
        self.assertEqual(self.sup.files["d/x.bin"], payload)
        self.assertEqual(self.sup.requests[-1],
                         {"v": 1, "op": "write", "path": "d/x.bin", "mode": 0o600, "set_mode": True,
                          "mkdir": True})
        self.sb.write_file("t.txt", "é")
        self.assertEqual(self.sup.files["t.txt"], "é".encode())
        with open(__file__, "rb") as f:
            self.sb.write_file("copy.py", f)
        with open(__file__, "rb") as f:
            self.assertEqual(self.sup.files["copy.py"], f.read())

    def test_read_stops_at_the_size_and_max_bytes_refuses(self):
        # the content the descriptor gives beyond the reply's size (a file that grew after the
        # read was answered) is not read
        self.sup.files["grows.txt"] = b"0123456789"
        self.sup.extra = b"more and more"
        self.assertEqual(self.sb.read_file("grows.txt"), b"0123456789")
        self.assertEqual(self.sb.read_file("grows.txt", max_bytes=10), b"0123456789")
        with self.assertRaises(nsbox.SandboxFileTooLargeError) as cm:
            self.sb.read_file("grows.txt", max_bytes=9)
        self.assertIsInstance(cm.exception, OSError)
        self.assertEqual(cm.exception.errno, errno.EFBIG)
        self.assertIn("grows.txt is 10 bytes, more than max_bytes=9", str(cm.exception))
        with self.assertRaises(ValueError):
            self.sb.read_file("grows.txt", max_bytes=-1)

    def test_read_into_a_path_or_a_file_object(self):
        # into=: copied in pieces, never whole in memory; the count returned; a path is not
        # made when max_bytes refuses the file; the size bounds the copy as it bounds bytes.
        payload = os.urandom(3 * (1 << 20) + 12345)
        self.sup.files["big.bin"] = payload
        dest = os.path.join(self.rt, "big.copy")
        self.assertEqual(self.sb.read_file("big.bin", into=dest), len(payload))
        with open(dest, "rb") as f:
            self.assertEqual(f.read(), payload)
        buf = io.BytesIO()
        self.assertEqual(self.sb.read_file("big.bin", into=buf), len(payload))
        self.assertEqual(buf.getvalue(), payload)
        refused = os.path.join(self.rt, "refused")
        with self.assertRaises(nsbox.SandboxFileTooLargeError):
            self.sb.read_file("big.bin", max_bytes=1 << 20, into=refused)
        self.assertFalse(os.path.exists(refused))
        self.sup.files["grows.txt"] = b"0123456789"
        self.sup.extra = b"more and more"
        self.assertEqual(self.sb.read_file("grows.txt", into=buf), 10)
        self.assertTrue(buf.getvalue().endswith(payload[-3:] + b"0123456789"))
        with self.assertRaises(TypeError):
            self.sb.read_file("grows.txt", into=123)

    def test_missing_file(self):
        with self.assertRaises(FileNotFoundError) as cm:
            self.sb.read_file("nope")
        self.assertIsInstance(cm.exception, nsbox.SandboxFileNotFoundError)
        self.assertEqual(cm.exception.filename, "nope")
        self.assertEqual(str(cm.exception), "no such file: nope")
        self.assertFalse(self.sb.exists("nope"))

    def test_list_and_stat(self):
        files = self.sb.list_files("sub")
        self.assertEqual(files[0], nsbox.FileInfo("hello.txt", "file", 6, 0o644, 1.5,
                                                  "sub/hello.txt"))
        self.assertEqual(self.sup.requests[-1], {"v": 1, "op": "list", "path": "sub"})
        st = self.sb.stat("hello.txt")
        self.assertEqual((st.name, st.size, st.is_file), ("hello.txt", 6, True))

    def test_exec_fds_and_result(self):
        r = self.sb.execute("x", stdin="in", cwd="sub", env={"A": "1"}, timeout=1.5)
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, "out:in", "err\n"))
        self.assertEqual(self.sup.requests[-1],
                         {"v": 1, "op": "exec", "cmd": "x", "env": {"A": "1"},
                          "cwd": "/workspace/sub", "timeout_ms": 1500})

    def test_error_codes(self):
        with self.assertRaises(nsbox.ExecError) as cm:
            self.sb.start_process(["no-such"])
        self.assertEqual(cm.exception.exit_code, 127)
        with self.assertRaises(nsbox.ProcessNotFound):
            self.sb.kill_process(42)
        with self.assertRaises(nsbox.InvalidRequest):
            self.sb.ping()

    def test_delete_then_tombstone(self):
        self.sb.delete()
        with self.assertRaises(nsbox.SandboxDeletedError) as cm:
            self.sb.read_file("hello.txt")
        self.assertEqual(str(cm.exception), "sandbox %s was deleted by this session (its "
                                            "delete(), or the end of open() or session())" % SID)
        with self.assertRaises(nsbox.SandboxDeletedError) as cm:  # another client of it
            nsbox.Session(SID, self.rt).read_file("hello.txt")
        self.assertEqual(str(cm.exception), "sandbox %s was %s" % (SID, SESSION_END))
        self.sb.delete()  # idempotent

    def test_tombstone_files(self):
        """The reader takes the newest record of the id, in recent then older, and the one
        file per id an nsbox before the log left."""
        from nsbox._transport import read_tombstone
        d = os.path.join(self.rt, "tombstones")
        os.makedirs(d, exist_ok=True)
        other = "ba9876543210"
        self.assertIsNone(read_tombstone(self.rt, other))
        with open(os.path.join(d, other), "w") as f:
            f.write("deleted by rm")
        self.assertEqual(read_tombstone(self.rt, other), "deleted by rm")
        with open(os.path.join(d, "older"), "w") as f:
            f.write("%s deleted because ttl_seconds=3 expired\n" % other)
        self.assertEqual(read_tombstone(self.rt, other), "deleted because ttl_seconds=3 expired")
        with open(os.path.join(d, "recent"), "w") as f:
            f.write("%s deleted because its init process ended\n"
                    "%s deleted by rm\n"
                    "x%s not this one\n" % (other, other, other[:11]))
        self.assertEqual(read_tombstone(self.rt, other), "deleted by rm")
        # a log longer than a reader takes in: its end is read
        with open(os.path.join(d, "recent"), "w") as f:
            for i in range(60000):
                f.write("%012x deleted because it was filler\n" % i)
            f.write("%s deleted because ttl_seconds=4 expired\n" % other)
        self.assertGreater(os.path.getsize(os.path.join(d, "recent")), 2 * 1024 * 1024)
        self.assertEqual(read_tombstone(self.rt, other), "deleted because ttl_seconds=4 expired")

    def test_supervisor_gone_text_is_the_runtimes(self):
        """The client recognises a killed supervisor's sandbox by the tombstone text that
        sandbox/state.h defines; the two copies must not drift apart."""
        header = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), "sandbox", "state.h")
        if not os.path.exists(header):
            self.skipTest("needs the source tree (a copy of python/ alone has no sandbox/)")
        with open(header) as f:
            text = f.read()
        m = re.search(r'#define NSBOX_TOMB_SUPERVISOR_GONE\s*\\?\s*"([^"]*)"', text)
        self.assertIsNotNone(m)
        from nsbox._transport import SUPERVISOR_GONE
        self.assertEqual(SUPERVISOR_GONE, m.group(1))

    def test_never_existed(self):
        with self.assertRaises(nsbox.SandboxNotFound):
            nsbox.Session("ba9876543210", self.rt).ping()


class BadLengthFake(FakeSupervisor):
    """Answers every request with a reply header of `length` bytes and a little body."""

    length = 0

    def handle(self, conn, req, fds):
        conn.sendall(struct.pack(">I", self.length) + b'{"v": 1, "ok": true}')


class BadReplyLength(FakeTest):
    FAKE = BadLengthFake

    def test_a_reply_length_past_the_protocols_bound_is_refused_unread(self):
        # the length is checked before the body is read: a client never waits for (or makes
        # room for) 4 GiB a broken or hostile peer says it sends
        for length in (0xFFFFFFFF, (1 << 20) + 1, 0):
            self.sup.length = length
            with self.assertRaises(nsbox.ProtocolError) as cm:
                self.sb.ping()
            self.assertEqual(str(cm.exception), "reply of %d bytes from the supervisor" % length)


class OlderFake(FakeSupervisor):
    """A supervisor of an older nsbox: no `wait` op, and `start` ignores
    `timeout_ms` (so its reply does not echo it). Its one background process, pid 7, is
    reported running by the first two `ps` and ended with exit code 5 after."""

    def handle(self, conn, req, fds):
        ok = {"v": 1, "ok": True}
        if req["op"] == "start":
            send_msg(conn, dict(ok, pid=7))
        elif req["op"] == "ps":
            done = sum(r["op"] == "ps" for r in self.requests) > 2
            send_msg(conn, dict(ok, processes=[{"pid": 7, "cmd": "x", "running": not done,
                                                "exit_code": 5 if done else None}]))
        elif req["op"] == "kill":
            send_msg(conn, ok)
        else:
            super().handle(conn, req, fds)


class OlderSupervisor(FakeTest):
    """The clients' fallbacks for a sandbox whose supervisor an older nsbox started (a sandbox
    lives on across an upgrade of nsbox)."""

    FAKE = OlderFake

    def ops(self):
        return [r["op"] for r in self.sup.requests]

    def test_wait_polls_ps_without_the_wait_op(self):
        p = self.sb.start_process("x")
        self.assertEqual(p.wait(timeout=10, poll=0.01), 5)
        self.assertEqual(self.ops(), ["start", "wait", "ps", "ps", "ps"])

    def test_async_wait_polls_ps_without_the_wait_op(self):
        async def main():
            p = await nsbox.AsyncSession(self.sb).start_process("x")
            return await p.wait(timeout=10, poll=0.01)
        self.assertEqual(asyncio.run(main()), 5)
        self.assertEqual(self.ops(), ["start", "wait", "ps", "ps", "ps"])

    def test_wait_timeout_while_polling(self):
        p = self.sb.start_process("x")
        with self.assertRaises(TimeoutError):
            p.wait(timeout=0, poll=0.01)  # the first ps says it runs

    def test_ignored_start_timeout_stops_the_process(self):
        with self.assertRaises(nsbox.OperationNotSupported) as cm:
            self.sb.start_process("x", timeout=5)
        self.assertIn("older nsbox", str(cm.exception))
        self.assertEqual(self.sup.requests[-1], {"v": 1, "op": "kill", "pid": 7, "signal": 9})

    def cli(self, *args):
        nsbox_bin = os.environ.get("NSBOX_BIN")
        if not nsbox_bin or not os.access(nsbox_bin, os.X_OK):
            self.skipTest("needs the nsbox binary (NSBOX_BIN)")
        return subprocess.run([nsbox_bin] + list(args), capture_output=True, timeout=30,
                              env=dict(os.environ, NSBOX_STATE_DIR=self.rt))

    def test_cli_wait_polls_ps_without_the_wait_op(self):
        r = self.cli("wait", SID, "7")
        self.assertEqual(r.returncode, 5, r.stderr)
        self.assertEqual(self.ops(), ["wait", "ps", "ps", "ps"])
        r = self.cli("wait", SID, "8")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"no background process 8", r.stderr)

    def test_cli_wait_timeout_while_polling(self):
        self.sup.requests.clear()
        r = self.cli("wait", "--timeout", "0", SID, "7")
        self.assertEqual(r.returncode, 124, r.stderr)
        self.assertIn(b"still running", r.stderr)

    def test_cli_ignored_start_timeout_stops_the_process(self):
        r = self.cli("exec", "-d", "--timeout", "5", SID, "--", "x")
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"older nsbox", r.stderr)
        self.assertEqual(self.ops()[0], "start")
        self.assertEqual(self.sup.requests[-1], {"v": 1, "op": "kill", "pid": 7, "signal": 9})


if __name__ == "__main__":
    unittest.main()
