"""The wire protocol of docs/protocol.md: 4-byte big-endian length + UTF-8 JSON over the
sandbox's unix socket, descriptors as SCM_RIGHTS on the first byte of a message."""
import asyncio
import contextvars
import errno
import fcntl
import json
import os
import shutil
import socket
import struct
import time

from . import errors

PROTO_VERSION = 1
PROTO_MAX = 1 << 20
PROTO_MAX_FDS = 3

_NOT_FOUND_FILE_OPS = {"read", "write", "list", "stat", "remove", "mkdir"}


# sandbox/state.h NSBOX_TOMB_SESSION_END: a delete with "by": "session" (Session.delete())
SESSION_END = ("deleted when the session that held it ended (its client's delete(), or the end "
               "of open() or session())")

# sandbox/state.h NSBOX_TOMB_SUPERVISOR_GONE
SUPERVISOR_GONE = "deleted because its supervisor ended without removing it (killed or crashed)"


# A sandbox with as much under way as it takes refuses more with "busy" before it starts
# anything (service/sup.c nsbox_sup_refuse_if_busy): the request is sent again after 5 ms, then up
# to 50 ms apart (so not in the order the requests came), as `nsbox exec` does: for
# BUSY_RETRY_S at most, or, for what waits for a command's end anyway (execute), until it is
# taken. An async call's worker thread stops trying once the call is cancelled (CANCELLED).
BUSY_RETRY_S = 60.0
CANCELLED = contextvars.ContextVar("nsbox_cancelled", default=None)


def busy_pauses(limit=BUSY_RETRY_S):
    """The pauses between the attempts of a request the sandbox refused as busy (limit:
    seconds in all, None: no end)."""
    waited = 0.0
    while limit is None or waited < limit:
        pause = min(max(waited, 0.005), 0.05)
        waited += pause
        yield pause


def check_cancelled():
    """Raise if the async call this thread works for was cancelled (session.run_blocking)."""
    ev = CANCELLED.get()
    if ev is not None and ev.is_set():
        raise errors.SandboxError("the call was cancelled before the sandbox took it",
                                  "cancelled")


def retry_if_busy(fn, *args, limit=BUSY_RETRY_S, cancellable=True):
    """fn(*args), sent again while it raises SandboxBusyError, for `limit` seconds at most
    (None: until it is taken); not once the async call it works for was cancelled, unless not
    cancellable (a clean-up)."""
    for pause in busy_pauses(limit):
        if cancellable:
            check_cancelled()
        try:
            return fn(*args)
        except errors.SandboxBusyError:
            time.sleep(pause)
    if cancellable:
        check_cancelled()
    return fn(*args)


def find_binary(binary, env):
    """The nsbox binary to run: the one given, else $NSBOX_BIN, else nsbox on env's PATH;
    None when there is none."""
    return binary or env.get("NSBOX_BIN") or shutil.which("nsbox", path=env.get("PATH"))


def runtime_dir(env):
    """Where nsbox keeps sandbox sockets, the same choice as os/paths.c."""
    o = env.get("NSBOX_STATE_DIR")
    if o and not o.startswith("/"):
        raise errors.SandboxError("NSBOX_STATE_DIR must be an absolute path, not '%s' (e.g. "
                                  "NSBOX_STATE_DIR=\"$PWD/%s\")" % (o, o), "invalid")
    if o:
        return o
    if os.geteuid() == 0:
        return "/run/nsbox"
    x = env.get("XDG_RUNTIME_DIR")
    if x and x.startswith("/") and os.access(x, os.W_OK):
        return x + "/nsbox"
    return "/tmp/nsbox-%d" % os.getuid()


TOMB_READ_MAX = 2 * 512 * 1024  # sandbox/state.h: twice NSBOX_TOMB_ROTATE_BYTES


def read_tombstone(rt, sandbox_id):
    """Why the sandbox is gone, from the log nsbox keeps (sandbox/state.h: lines "<id> <reason>"
    in tombstones/recent, then tombstones/older; the newest record wins), else from the one
    file per id of an nsbox before the log; None when there is none."""
    d = os.path.join(rt, "tombstones")
    key = sandbox_id.encode() + b" "
    for name in ("recent", "older"):
        try:
            with open(os.path.join(d, name), "rb") as f:
                # its end, where the newest records are (a line cut there is dropped)
                start = max(0, os.fstat(f.fileno()).st_size - TOMB_READ_MAX)
                f.seek(start)
                data = f.read(TOMB_READ_MAX)
        except OSError:
            continue
        lines = data.split(b"\n")
        if start > 0:
            lines = lines[1:]
        for line in reversed(lines):
            if line.startswith(key):
                return line[len(key):].decode("utf-8", "replace")
    try:
        with open(os.path.join(d, sandbox_id), "rb") as f:
            return f.read(255).decode("utf-8", "replace")
    except OSError:
        return None


def error_from_reply(reply, op=None, path=None):
    """The typed error for a {"ok": false, "error": {...}} reply."""
    err = reply.get("error") if isinstance(reply.get("error"), dict) else {}
    code = err.get("code") if isinstance(err.get("code"), str) else "system"
    msg = err.get("message") if isinstance(err.get("message"), str) else "the supervisor said no"
    if code == "deleted":
        return errors.SandboxDeletedError(msg, code)
    if code == "not_found":
        if op in _NOT_FOUND_FILE_OPS:
            return errors.SandboxFileNotFoundError(msg, code, path)
        if op in ("kill", "logs", "wait"):
            return errors.ProcessNotFound(msg, code)
        return errors.SandboxNotFound(msg, code)
    if code == "invalid":
        return errors.InvalidRequest(msg, code)
    if code == "no_space":
        return errors.SandboxDiskFullError(msg, code, path)
    if code == "unsupported":
        return errors.OperationNotSupported(msg, code)
    if code == "busy":
        return errors.SandboxBusyError(msg, code)
    if code == "exec":
        ec = reply.get("exit_code")
        return errors.ExecError(msg, ec if isinstance(ec, int) else None, code)
    if code == "timeout" and op == "exec":
        return errors.ExecTimeout(msg, None, code)
    return errors.SandboxError(msg, code)


def probe_supervisor(rt, sandbox_id):
    """Whether anybody holds sandbox_id's state directory lock (sandbox/state.c
    nsbox_state_lock; its supervisor does while it lives): "held", "free" (it died without
    removing the sandbox) or "gone" (no directory)."""
    try:
        fd = os.open(os.path.join(rt, sandbox_id),
                     os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        return "gone" if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP) else "held"
    try:
        try:  # an older nsbox locked a "lock" file inside; ours is a symlink
            lock = os.open("lock", os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = lock
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ELOOP):
                return "held"
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return "held"
        return "free"
    finally:
        os.close(fd)


def connect_now(path):
    """One connect that does not wait: the socket (blocking), or the OSError (BlockingIOError:
    the listener's queue is full; ConnectionRefusedError: nobody listens)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # CLOEXEC by default
    s.setblocking(False)
    try:
        s.connect(path)
    except BaseException:
        s.close()
        raise
    s.setblocking(True)
    return s


def listener_gone(rt, sandbox_id):
    """Whether nobody listens on sandbox_id's control socket (ECONNREFUSED): its supervisor,
    which keeps its listener until it exits, is dead, whoever holds its lock now (a gc removing
    it). A live one with a full queue is alive."""
    try:
        connect_now(os.path.join(rt, sandbox_id, "ctl")).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        pass
    return False


# A supervisor that dies closes its connections and lets its lock go in the same moment of its
# exit: a lock still held this long after a hang-up is a supervisor that lives (service/
# connect.c nsbox_connect_lost).
LOST_PAUSE_S, LOST_PAUSES = 0.005, 200

# The supervisor answers ping, hold, inspect, ps, kill, logs and delete at once (a sleeping
# sandbox thaws in well under a millisecond): a longer silence is a stuck supervisor, and a
# client must not hang on it for ever (service/client.c ANSWER_S).
ANSWER_S = 30
# ... and takes a connection at once: a stopped one whose listener's queue filled up makes a
# connect wait for a place, for as long at most (service/connect.c CONNECT_WAIT_S).
CONNECT_PAUSE_S = 0.01


class Connection:
    """One connection to a sandbox's supervisor. Requests on one connection are served in
    order; open several for concurrent work."""

    def __init__(self, sandbox_id, rt):
        self.sandbox_id = sandbox_id
        self.rt = rt
        path = os.path.join(rt, sandbox_id, "ctl")
        self.sock = None
        end = time.monotonic() + ANSWER_S
        while True:
            try:
                self.sock = connect_now(path)
                break
            except BlockingIOError:
                if time.monotonic() >= end:
                    raise errors.SandboxError(
                        "sandbox %s: its supervisor took no connection within %g s (stuck; the "
                        "process 'nsbox %s' on the host: kill it, then nsbox gc)"
                        % (sandbox_id, ANSWER_S, sandbox_id), "timeout") from None
                time.sleep(CONNECT_PAUSE_S)
            except OSError as e:
                raise self._gone(e) from None

    def _gone(self, cause=None):
        """The error for a sandbox we cannot reach (or that hung up on us)."""
        reason = read_tombstone(self.rt, self.sandbox_id)
        if reason:
            return errors.SandboxDeletedError(
                "sandbox %s was %s" % (self.sandbox_id, reason), "deleted")
        if cause is None:
            return self._lost_error("held")
        if cause.errno == errno.ECONNREFUSED:
            # its socket is there with nobody listening: the supervisor died (sandbox/state.h)
            return errors.SandboxDeletedError(
                "sandbox %s was %s" % (self.sandbox_id, SUPERVISOR_GONE), "deleted")
        if cause.errno == errno.ENOENT:
            return errors.SandboxNotFound(
                "no sandbox %s in %s (it never existed there)" % (self.sandbox_id, self.rt),
                "not_found")
        return errors.SandboxError(
            "cannot reach sandbox %s: %s" % (self.sandbox_id, cause.strerror), "system")

    def _lost_error(self, fate):
        """The error for a hang-up without a deletion record: fate is probe_supervisor's."""
        if fate == "free":
            return errors.SandboxDeletedError(
                "sandbox %s was %s" % (self.sandbox_id, SUPERVISOR_GONE), "deleted")
        if fate == "gone":
            return errors.SandboxDeletedError(
                "sandbox %s was deleted while this request was under way" % self.sandbox_id,
                "deleted")
        return errors.SandboxError(
            "sandbox %s: its supervisor closed the connection without an answer (the sandbox "
            "is still there)" % self.sandbox_id, "system")

    def _lost_now(self):
        """After a hang-up: the error, or None while the supervisor's fate is not known yet."""
        reason = read_tombstone(self.rt, self.sandbox_id)
        if reason:
            return errors.SandboxDeletedError(
                "sandbox %s was %s" % (self.sandbox_id, reason), "deleted")
        fate = probe_supervisor(self.rt, self.sandbox_id)
        return None if fate == "held" else self._lost_error(fate)

    def _lost_look(self, i):
        """_lost_now, and at the first and last of the LOST_PAUSES looks, whether anybody
        listens (a gc that found the supervisor dead holds its lock while it removes it)."""
        err = self._lost_now()
        if err is None and i in (0, LOST_PAUSES - 1) and listener_gone(self.rt, self.sandbox_id):
            err = self._lost_error("free")
        return err

    def _lost(self):
        """The error for a connection the supervisor ended without an answer."""
        for i in range(LOST_PAUSES):
            err = self._lost_look(i)
            if err is not None:
                return err
            time.sleep(LOST_PAUSE_S)
        return self._gone()

    async def _alost(self):
        """_lost without blocking the event loop."""
        for i in range(LOST_PAUSES):
            err = self._lost_look(i)
            if err is not None:
                return err
            await asyncio.sleep(LOST_PAUSE_S)
        return self._gone()

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def fileno(self):
        return self.sock.fileno()

    def wait_hangup(self, seconds):
        """Wait up to `seconds` for the supervisor to close this connection (its exit);
        anything it still sends is dropped. Returns whether it did."""
        end = time.monotonic() + seconds
        try:
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.sock.settimeout(left)
                if not self.sock.recv(4096):
                    return True
        except socket.timeout:
            return False
        except OSError:
            return True  # reset: the other end is gone all the same
        finally:
            if self.sock is not None:
                self.sock.settimeout(None)

    # ---- framing --------------------------------------------------------------------------

    @staticmethod
    def _frame(obj):
        body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if len(body) > PROTO_MAX:
            raise errors.InvalidRequest(
                "request of %d bytes is larger than the protocol's %d" % (len(body), PROTO_MAX),
                "invalid")
        return struct.pack(">I", len(body)) + body

    @staticmethod
    def _length(hdr):
        (length,) = struct.unpack(">I", hdr)
        if length == 0 or length > PROTO_MAX:
            raise errors.ProtocolError("reply of %d bytes from the supervisor" % length)
        return length

    @staticmethod
    def _reply(body):
        try:
            reply = json.loads(body.decode("utf-8"))
        except ValueError:
            raise errors.ProtocolError("unreadable reply from the supervisor") from None
        if not isinstance(reply, dict):
            raise errors.ProtocolError("unreadable reply from the supervisor")
        return reply

    async def acall_nofds(self, req):
        """One request and its reply (no descriptors either way) on the running event loop:
        nothing blocks, no thread is held while the supervisor takes its time (a wait).
        Returns the reply dict, errors included; the caller closes the connection."""
        loop = asyncio.get_running_loop()
        self.sock.setblocking(False)
        try:
            await loop.sock_sendall(self.sock, self._frame(req))
        except (BrokenPipeError, ConnectionResetError):
            pass  # its answer ("busy") or the hang-up is read below, as in send()

        async def exact(n):
            buf = bytearray()
            while len(buf) < n:
                try:
                    data = await loop.sock_recv(self.sock, n - len(buf))
                except ConnectionResetError:
                    data = b""
                if not data:
                    return None
                buf += data
            return bytes(buf)

        hdr = await exact(4)
        if hdr is None:
            raise await self._alost()
        body = await exact(self._length(hdr))
        if body is None:
            raise errors.ProtocolError("truncated reply from the supervisor")
        return self._reply(body)

    def send(self, obj, fds=()):
        msg = self._frame(obj)
        try:
            if fds:
                n = socket.send_fds(self.sock, [msg], list(fds))
                if n < len(msg):
                    self.sock.sendall(msg[n:])
            else:
                self.sock.sendall(msg)
        except (BrokenPipeError, ConnectionResetError):
            # The supervisor hung up before it read this. With every connection taken it
            # answers "busy" first: the caller's recv() reads that answer, or the hang-up
            # (_gone), as for a request it did read.
            pass

    def _recv_exact(self, n, want_fds):
        buf = bytearray()
        fds = []
        while len(buf) < n:
            if want_fds and not buf:
                data, got, _flags, _addr = socket.recv_fds(
                    self.sock, n, PROTO_MAX_FDS, socket.MSG_CMSG_CLOEXEC)
                fds.extend(got)
            else:
                data = self.sock.recv(n - len(buf))
            if not data:
                for fd in fds:
                    os.close(fd)
                return None, []
            buf += data
        return bytes(buf), fds

    def recv(self):
        """One reply: (dict, [fds]). A hang-up is a SandboxDeletedError naming the reason."""
        try:
            hdr, fds = self._recv_exact(4, True)
        except ConnectionResetError:
            raise self._lost() from None
        if hdr is None:
            raise self._lost()
        try:
            body, _ = self._recv_exact(self._length(hdr), False)
            if body is None:
                raise errors.ProtocolError("truncated reply from the supervisor")
            reply = self._reply(body)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return reply, fds

    def call(self, op, fds=(), keep_fds=False, answer_s=None, **fields):
        """Send one request and wait for its reply; an error reply is raised as its typed error.
        Descriptors that come with the reply are returned when keep_fds, else closed. With
        answer_s, a reply that has not come within that many seconds is a SandboxError
        ("timeout")."""
        req = {"v": PROTO_VERSION, "op": op}
        req.update(fields)
        self.send(req, fds)
        if answer_s is not None:
            self.sock.settimeout(answer_s)
        try:
            reply, rfds = self.recv()
        except socket.timeout:
            raise errors.SandboxError(
                "sandbox %s: its supervisor did not answer within %g s (stuck; the process "
                "'nsbox %s' on the host: kill it, then nsbox gc)"
                % (self.sandbox_id, answer_s, self.sandbox_id), "timeout") from None
        finally:
            if answer_s is not None and self.sock is not None:
                self.sock.settimeout(None)
        if not reply.get("ok"):
            for fd in rfds:
                os.close(fd)
            raise error_from_reply(reply, op, fields.get("path"))
        if keep_fds:
            return reply, rfds
        for fd in rfds:
            os.close(fd)
        return reply
