"""execute(): the command gets our pipes as its stdin/stdout/stderr (docs/protocol.md: output
never passes through the supervisor); we read both pipes and the socket in one selector loop."""
import os
import selectors
import signal
import threading
import time

from . import errors
from ._transport import PROTO_VERSION, error_from_reply, retry_if_busy
from .models import SandboxExecutionResult

# How long past `timeout` we wait for the supervisor's own timeout before killing the command
# ourselves (the supervisor enforces timeout_ms; this only guards against a stuck supervisor).
CLIENT_GRACE_S = 10.0
CHUNK = 65536


def _close(fd):
    if fd is not None and fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass


class _Output:
    """What the command wrote to its stdout and stderr, each cut at max_output bytes."""

    def __init__(self, max_output):
        self.max_output = max_output
        self.bufs = {"out": bytearray(), "err": bytearray()}
        self.truncated = False

    def take(self, name, fd):
        """Read what is there; False at EOF."""
        while True:
            try:
                chunk = os.read(fd, CHUNK)
            except BlockingIOError:
                return True
            except InterruptedError:
                continue
            if not chunk:
                return False
            b = self.bufs[name]
            if self.max_output is not None and len(b) + len(chunk) > self.max_output:
                chunk = chunk[:max(0, self.max_output - len(b))]
                self.truncated = True
            b += chunk

    def drain(self, fds):
        """What is in the pipes still open (fds: out_r, err_r by name)."""
        for name in ("out", "err"):
            if name + "_r" in fds:
                self.take(name, fds[name + "_r"])


class ExecJob:
    """One execute() call. run() blocks; cancel() (from any thread) kills the command."""

    def __init__(self, connect, request, stdin=None, text=True, max_output=None, timeout=None):
        self._connect = connect
        self.request = request
        if stdin is not None and not isinstance(stdin, (str, bytes, bytearray, memoryview)):
            if not callable(getattr(stdin, "read", None)):
                # bytes(5) would be five NUL bytes
                raise TypeError("stdin must be str, bytes (or bytearray, memoryview) or a file "
                                "object open for reading, not %s" % type(stdin).__name__)
            stdin = stdin.read()  # a file object: what is left of it, as write_file takes it
        if isinstance(stdin, str):
            stdin = stdin.encode("utf-8")
        elif stdin is not None:
            stdin = bytes(stdin)
        self.stdin = stdin
        self.text = text
        self.max_output = max_output
        self.timeout = timeout
        self._conn = None
        self._lock = threading.Lock()
        self._cancelled = False

    def cancel(self, sig=signal.SIGKILL):
        """Signal the running command (SIGKILL by default); harmless once it has ended."""
        with self._lock:
            self._cancelled = True
            conn = self._conn
            if conn is None or conn.sock is None:
                return
            try:
                conn.send({"v": PROTO_VERSION, "op": "signal", "signal": int(sig)})
            except Exception:
                pass

    def run(self):
        # A busy sandbox refuses the command before it starts anything, the descriptors
        # included: it is sent again, with new pipes, for as long as it takes (a command's
        # turn); each attempt first checks that cancel() has not come meanwhile.
        return retry_if_busy(self._run_once, limit=None)

    def _run_once(self):
        conn = self._connect()
        fds = {}
        sel = None
        out = _Output(self.max_output)
        try:
            self._send(conn, fds)
            sel = selectors.DefaultSelector()
            sel.register(fds["out_r"], selectors.EVENT_READ, "out")
            sel.register(fds["err_r"], selectors.EVENT_READ, "err")
            sel.register(conn.sock, selectors.EVENT_READ, "sock")
            if "in_w" in fds:
                sel.register(fds["in_w"], selectors.EVENT_WRITE, "in")
            try:
                reply, killed_by_us = self._pump(conn, sel, fds, out)
            except errors.SandboxDeletedError as ex:
                # Deleted under the command (its ttl, an rm): what it printed until then is
                # the caller's, as the command line prints it as it comes.
                out.drain(fds)
                ex.result = self._result(out.bufs, 137, False, False, out.truncated)
                raise
            except BaseException:
                # KeyboardInterrupt, a cancelled task, a lost supervisor: do not leave the
                # command running on our behalf (harmless if it has ended).
                self.cancel()
                raise
            # The command has ended, so everything it wrote is in the pipes: drain without
            # waiting for EOF (a background child may still hold the write ends).
            out.drain(fds)
        finally:
            if sel is not None:
                sel.close()
            for fd in fds.values():
                _close(fd)
            with self._lock:
                self._conn = None
            conn.close()
        return self._finish(reply, out.bufs, out.truncated, killed_by_us)

    def _send(self, conn, fds):
        """Makes the command's pipes (into fds, by name), sends the request with its ends and
        keeps ours: out_r, err_r (non-blocking) and in_w when there is stdin."""
        out_r, out_w = os.pipe()
        fds.update(out_r=out_r, out_w=out_w)
        err_r, err_w = os.pipe()
        fds.update(err_r=err_r, err_w=err_w)
        if self.stdin is None:
            fds["in_r"] = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        else:
            fds["in_r"], fds["in_w"] = os.pipe()
            os.set_blocking(fds["in_w"], False)
        with self._lock:
            if self._cancelled:
                raise errors.SandboxError("execute() was cancelled before it started")
            conn.send(self.request, [fds["in_r"], fds["out_w"], fds["err_w"]])
            self._conn = conn
        # The command holds the write ends now; ours would keep the pipes open forever.
        for k in ("in_r", "out_w", "err_w"):
            _close(fds.pop(k))
        for k in ("out_r", "err_r"):
            os.set_blocking(fds[k], False)

    def _pump(self, conn, sel, fds, out):
        """Feeds stdin and reads the output until the supervisor's reply: (reply, whether we
        killed the command for its timeout)."""
        pending = memoryview(self.stdin) if self.stdin is not None else None
        deadline = time.monotonic() + self.timeout + CLIENT_GRACE_S if self.timeout else None
        killed_by_us = False
        while True:
            wait = None
            if deadline is not None:
                # in steps of an hour at most: poll() takes a 32-bit count of ms
                wait = min(max(0.0, deadline - time.monotonic()), 3600.0)
            events = sel.select(wait)
            if not events and deadline is not None and time.monotonic() >= deadline:
                if killed_by_us:
                    raise errors.ExecTimeout(
                        "command did not end %.0fs after its timeout of %ss, even when "
                        "killed" % (2 * CLIENT_GRACE_S, self.timeout),
                        self._result(out.bufs, 124, True, False, out.truncated))
                self.cancel()
                killed_by_us = True
                deadline = time.monotonic() + CLIENT_GRACE_S
                continue
            for key, _ in events:
                what = key.data
                if what == "sock":
                    reply, rfds = conn.recv()
                    for fd in rfds:
                        _close(fd)
                    return reply, killed_by_us
                if what == "in":
                    try:
                        n = os.write(key.fd, pending[:CHUNK])
                        pending = pending[n:]
                        done = not pending
                    except BlockingIOError:
                        done = False
                    except (BrokenPipeError, OSError):
                        done = True  # the command stopped reading: fine
                    if done:
                        sel.unregister(key.fd)
                        _close(fds.pop("in_w"))
                    continue
                if not out.take(what, key.fd):
                    sel.unregister(key.fd)
                    _close(fds.pop(what + "_r"))

    def _result(self, bufs, code, timed_out, oom, truncated, note=""):
        out, err = bytes(bufs["out"]), bytes(bufs["err"])
        if self.text:
            out = out.decode("utf-8", "replace")
            err = err.decode("utf-8", "replace")
        return SandboxExecutionResult(code, out, err, timed_out, oom, truncated, note)

    def _finish(self, reply, bufs, truncated, killed_by_us):
        if not reply.get("ok"):
            code = reply.get("exit_code")
            if isinstance(code, int) and not isinstance(code, bool):
                # The command could not be started (not found, not executable, no such cwd):
                # reported as `nsbox exec` does, as an exit code with the reason on stderr, so
                # that an agent sees it like any other failing command.
                e = error_from_reply(reply, "exec")
                bufs["err"] += ("nsbox: %s\n" % e.message).encode("utf-8")
                return self._result(bufs, code, False, False, truncated)
            raise error_from_reply(reply, "exec")
        code = reply.get("exit_code")
        if not isinstance(code, int):
            raise errors.ProtocolError("exec reply without an exit code")
        timed_out = bool(reply.get("timed_out")) or killed_by_us
        note = reply.get("dns_note")
        res = self._result(bufs, 124 if timed_out else code, timed_out,
                           bool(reply.get("oom_killed")), truncated,
                           note if isinstance(note, str) else "")
        if timed_out:
            raise errors.ExecTimeout("command timed out after %ss" % (self.timeout,), res)
        return res
