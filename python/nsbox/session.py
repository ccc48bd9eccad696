"""A live sandbox: Session (blocking calls) and AsyncSession (the same calls as coroutines, run
in worker threads so that the event loop never blocks)."""
import asyncio
import concurrent.futures
import contextvars
import functools
import json
import math
import os
import re
import socket
import subprocess
import threading
import time

from . import _transport, errors
from ._exec import ExecJob
from ._transport import (CANCELLED, SESSION_END, SUPERVISOR_GONE, PROTO_VERSION, Connection,
                         error_from_reply, find_binary, retry_if_busy)
from ._transport import runtime_dir as _runtime_dir
from ._files import (_PATH_TYPES, _content_fd, _copy_at_most, _copy_keeping_holes, _file_info,
                     _into_path)
from .models import ProcessInfo, ProcessLogs

WORKSPACE = "/workspace"
# What execute() keeps of each output stream unless told otherwise (max_output=None: all). A
# command that prints without end must not take the agent's memory with it.
DEFAULT_MAX_OUTPUT = 64 << 20


# The async calls' worker threads. Not the event loop's default executor: that one has
# min(32, CPUs + 4) threads (6 on two CPUs), so six long execute() calls made every other
# to_thread() of the application wait, and a seventh command wait for one of them to end.
# Threads are made as calls need them and reused; the bound is only a backstop.
_MAX_THREADS = 1024
_executor = None
_executor_lock = threading.Lock()


def _threads():
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(_MAX_THREADS, "nsbox")
        return _executor


def run_blocking(fn, *args):
    """fn(*args) in one of nsbox's worker threads (with the caller's context variables, as
    asyncio.to_thread does): an awaitable future. Once the awaiting call is cancelled, the
    thread sends nothing more that the sandbox refused as busy (_transport.CANCELLED): a
    start_process() or write_file() the caller gave up on must not happen a minute later."""
    cancelled = threading.Event()
    ctx = contextvars.copy_context()
    ctx.run(CANCELLED.set, cancelled)
    call = functools.partial(ctx.run, fn, *args)
    fut = asyncio.get_running_loop().run_in_executor(_threads(), call)
    fut.add_done_callback(lambda f: f.cancelled() and cancelled.set())
    return fut


def _command_fields(command):
    if isinstance(command, str):
        return {"cmd": command}
    if isinstance(command, (bytes, bytearray)):
        raise TypeError("command must be a str (run by /bin/sh -c) or a list of str (argv)")
    argv = [os.fspath(a) if not isinstance(a, str) else a for a in command]
    if not argv:
        raise ValueError("command must not be empty")
    return {"argv": argv}


PYTHON_STDIN = ["python3", "-"]  # run_code's command: the program is its stdin


def _python_source(code):
    """run_code's code, checked: a str or bytes-like (any other type would reach execute() as a
    stdin of another meaning, such as a file object)."""
    if not isinstance(code, (str, bytes, bytearray, memoryview)):
        raise TypeError("code must be str or bytes, not %s" % type(code).__name__)
    return code


def _cwd(cwd):
    if cwd is None:
        return None
    cwd = os.fspath(cwd)
    return cwd if cwd.startswith("/") else WORKSPACE + "/" + cwd


_ID = re.compile(r"[0-9a-f]{12}")

# Requests the supervisor answers without waiting for anything (_transport.ANSWER_S).
_ANSWERED_AT_ONCE = frozenset({"ping", "inspect", "ps", "kill", "logs"})


def _timeout_ms(timeout):
    if timeout is None or timeout == 0:
        return None
    if not isinstance(timeout, (int, float)) or timeout < 0 or not math.isfinite(timeout):
        raise ValueError("timeout must be a finite number of seconds, 0 or None for none")
    return max(1, int(math.ceil(timeout * 1000)))


_NO_WAIT_OP = object()


class _Wait:
    """One wait for a background process's end, on a connection of its own: the supervisor
    replies when the process ends ("wait", docs/protocol.md). Closing the connection (a
    timeout, a cancelled coroutine) ends the wait, never the process."""

    def __init__(self, session, pid, timeout):
        self.session = session
        self.pid = pid
        self.timeout = timeout
        self.req = {"v": PROTO_VERSION, "op": "wait", "pid": int(pid)}
        # at least 50 ms, so that wait(timeout=0) still gets an ended process's code; beyond
        # a lifetime (1e9 s), none: a socket's timeout cannot hold more
        self.limit = (None if timeout is None or float(timeout) >= 1e9
                      else max(float(timeout), 0.05))

    def _timed_out(self):
        return TimeoutError("process %d still running after %ss" % (self.pid, self.timeout))

    def _code(self, reply):
        """The exit code; _NO_WAIT_OP from a supervisor without the op (an older nsbox)."""
        if not reply.get("ok"):
            err = reply.get("error") if isinstance(reply.get("error"), dict) else {}
            if err.get("code") == "invalid" and "unknown op" in str(err.get("message")):
                return _NO_WAIT_OP
            if err.get("code") == "busy":  # as many waits as it takes: poll ps, as for an older
                return _NO_WAIT_OP
            raise error_from_reply(reply, "wait")
        code = reply.get("exit_code")
        if not isinstance(code, int):
            raise errors.ProtocolError("wait reply without an exit code")
        return code

    def run(self):
        with self.session._connect() as c:
            c.send(self.req)
            if self.limit is not None:
                c.sock.settimeout(self.limit)
            try:
                reply, fds = c.recv()
            except (socket.timeout, TimeoutError):
                raise self._timed_out() from None
            for fd in fds:
                os.close(fd)
        return self._code(reply)

    async def arun(self):
        # On the event loop itself: a wait may last as long as a server runs, and a worker
        # thread held that long would starve every other call of the session.
        with self.session._connect() as c:
            try:
                reply = await asyncio.wait_for(c.acall_nofds(self.req), self.limit)
            except asyncio.TimeoutError:
                raise self._timed_out() from None
        return self._code(reply)


def _logs_of(r):
    """ProcessLogs of a logs reply."""
    return ProcessLogs(stdout=r.get("stdout", ""), stderr=r.get("stderr", ""),
                       truncated=bool(r.get("truncated")), running=r.get("running"),
                       sleeping=r.get("sleeping"))


# sandbox/egress_log.h: the current file and the one it was last copied to.
NETWORK_LOG_FILES = ("network.log.1", "network.log")


def network_log_of(state_dir):
    """The entries of the network log in state_dir, oldest first, each once (a read that met
    the writer's copy sees some twice: its seq tells)."""
    entries = {}
    for name in NETWORK_LOG_FILES:
        try:
            with open(os.path.join(state_dir, name), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue
        for line in data.split(b"\n")[:-1]:  # the last is cut short, or empty
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if isinstance(e, dict) and isinstance(e.get("seq"), int):
                entries[e["seq"]] = e
    return [entries[k] for k in sorted(entries)]


class _LogFollower:
    """The state of following one process's output (the protocol's logs offsets, as
    `nsbox logs -f` does): which request to send next, what a reply yields, and how long to
    wait before the next one. Shared by the sync and async clients."""

    QUIET = 1.0  # after its end, output that stops for this long is all there is

    def __init__(self, pid):
        self.pid = int(pid)
        self.pos = {}
        self.delay = 0.02
        self.ended_at = None
        self.done = False
        self.asleep = False

    def request(self):
        return dict(pid=self.pid, **self.pos)

    def step(self, r):
        """The ProcessLogs of reply r (or None: nothing new); sets done and delay."""
        if "stdout_end" not in r:
            raise errors.OperationNotSupported(
                "this sandbox's supervisor is from an older nsbox, which cannot follow logs; "
                "use logs()", "unsupported")
        pos = {"stdout_from": r["stdout_end"], "stderr_from": r["stderr_end"]}
        new = pos != self.pos
        got = sum(pos[k] - self.pos.get(k, pos[k]) for k in pos)
        self.pos = pos
        if not r.get("running"):
            now = time.monotonic()
            if self.ended_at is None or new:
                self.ended_at = now
            self.done = bool(r.get("eof")) or now - self.ended_at >= self.QUIET
        # at once after a reply that brought half of what is kept or lost some: the writer is
        # faster than the pace
        self.delay = (0 if r.get("truncated") or got >= 32768 else 0.02 if new
                      else min(self.delay * 2, 0.25))
        # the sandbox fell asleep while its process runs: said once, with or without text (a
        # follower waited on in silence, where nsbox logs -f notes it)
        fell_asleep = bool(r.get("sleeping")) and not self.asleep and bool(r.get("running"))
        self.asleep = bool(r.get("sleeping"))
        if not (r.get("stdout") or r.get("stderr") or r.get("truncated") or fell_asleep):
            return None
        return _logs_of(r)


class Process:
    """A background process started by Session.start_process()."""

    def __init__(self, session, pid, command):
        self.session = session
        self.pid = pid
        self.command = command

    def logs(self):
        """Its output so far (the last 64 KiB of each stream): ProcessLogs(stdout, stderr, ...)."""
        return self.session.process_logs(self.pid)

    def follow_logs(self):
        """Its output as it comes, until it has ended and all of it was read: yields
        ProcessLogs whose stdout and stderr are the text new since the one before (the first:
        all that is kept). truncated: output was dropped just before this text (more than the
        64 KiB kept per stream came between two reads). When the sandbox falls asleep
        (idle_timeout_seconds) while the process runs, a ProcessLogs with sleeping=True comes
        (its text may be empty): following does not wake it, and nothing more comes until a
        request does."""
        return self.session.follow_process_logs(self.pid)

    def kill(self, signal=15):
        """Send it a signal (SIGTERM by default)."""
        self.session.kill_process(self.pid, signal)

    def info(self):
        """Its ProcessInfo (running, exit_code) from list_processes()."""
        for p in self.session.list_processes():
            if p.pid == self.pid:
                return p
        raise errors.ProcessNotFound("no background process %d" % self.pid, "not_found")

    @property
    def running(self):
        return self.info().running

    @property
    def exit_code(self):
        return self.info().exit_code

    def wait(self, timeout=None, poll=0.05):
        """Wait until it ends; its exit code. TimeoutError after `timeout` seconds (the process
        runs on). The supervisor answers as soon as it ends; `poll` is the interval used only
        with an older nsbox that cannot."""
        end = None if timeout is None else time.monotonic() + timeout
        code = _Wait(self.session, self.pid, timeout).run()
        if code is not _NO_WAIT_OP:
            return code
        while True:
            p = self.info()
            if not p.running:
                return p.exit_code
            if end is not None and time.monotonic() >= end:
                raise TimeoutError("process %d still running after %ss" % (self.pid, timeout))
            time.sleep(poll)

    def __repr__(self):
        return "<nsbox.Process pid=%d %r>" % (self.pid, self.command)


class Session:
    """A created sandbox. Every call opens its own connection to the sandbox's supervisor, so a
    Session may be used from several threads at once."""

    def __init__(self, sandbox_id, runtime_dir=None, options=None):
        """runtime_dir: where nsbox keeps the sandbox's socket; by default the one nsbox
        itself would use in this process's environment."""
        # the id names a directory under runtime_dir: '../x' or '' would reach other sockets
        if not isinstance(sandbox_id, str) or not _ID.fullmatch(sandbox_id):
            raise ValueError("a sandbox id is 12 hex digits, as nsbox create prints it, not %s"
                             % (repr(sandbox_id)[:40],))
        self.id = sandbox_id
        self.runtime_dir = runtime_dir if runtime_dir is not None else _runtime_dir(os.environ)
        self.options = options
        self.closed = False
        self._holder = None

    def hold(self):
        """Tie the sandbox's life to this process: the supervisor deletes it when the
        connection opened here closes, which the kernel does when the process ends however it
        ends (SIGKILL, a cancelled CI job). open() and session() do this; delete() lets go."""
        if self._holder is None:
            def once():
                c = self._connect()
                try:
                    c.call("hold", answer_s=_transport.ANSWER_S)
                except BaseException:
                    c.close()
                    raise
                return c
            self._holder = retry_if_busy(once)

    @property
    def socket_path(self):
        return os.path.join(self.runtime_dir, self.id, "ctl")

    def _connect(self):
        try:
            return Connection(self.id, self.runtime_dir)
        except errors.SandboxDeletedError as e:
            # this session's own delete; another's (nsbox rm: "by rm") keeps its reason
            if self.closed and SESSION_END in str(e):
                raise errors.SandboxDeletedError(
                    "sandbox %s was deleted by this session (its delete(), or the end of open() "
                    "or session())" % self.id, "deleted") from None
            raise

    def _call(self, op, **fields):
        """One request on a connection of its own (Connection.call's arguments), sent again
        while the sandbox refuses it as busy. What the supervisor answers at once is answered
        within ANSWER_S."""
        if op in _ANSWERED_AT_ONCE:
            fields["answer_s"] = _transport.ANSWER_S

        def once():
            with self._connect() as c:
                return c.call(op, **fields)
        return retry_if_busy(once)

    # ---- commands -----------------------------------------------------------------------

    def _exec_job(self, command, timeout=None, cwd=None, env=None, stdin=None, text=True,
                  max_output=None):
        req = {"v": PROTO_VERSION, "op": "exec"}
        req.update(_command_fields(command))
        if env:
            req["env"] = dict(env)
        c = _cwd(cwd)
        if c is not None:
            req["cwd"] = c
        ms = _timeout_ms(timeout)
        if ms is not None:
            req["timeout_ms"] = ms
        if max_output is not None and max_output < 0:
            raise ValueError("max_output must be a number of bytes >= 0")
        return ExecJob(self._connect, req, stdin, text, max_output, timeout)

    def execute(self, command, timeout=None, cwd=None, env=None, stdin=None, *, text=True,
                max_output=DEFAULT_MAX_OUTPUT):
        """Run `command` (a str, run by /bin/sh -c, or a list: argv) in /workspace and wait.

        Returns SandboxExecutionResult(exit_code, stdout, stderr): str by default (UTF-8,
        invalid bytes replaced), bytes with text=False. max_output: bytes kept of each stream
        (64 MiB by default; None: all of it); the rest is dropped, `truncated` set, and the
        command is never blocked by it.
        timeout: seconds; past it the command is killed and ExecTimeout raised, with what it
        printed in `.result` (exit_code 124). cwd: relative to /workspace. env: extra
        variables. stdin: bytes or str fed to the command (default: /dev/null).
        """
        return self._exec_job(command, timeout, cwd, env, stdin, text, max_output).run()

    def run_code(self, code, timeout=None, cwd=None, env=None, *, text=True,
                 max_output=DEFAULT_MAX_OUTPUT):
        """Run Python source `code` (str or bytes) with the sandbox's python3 and wait: as
        execute(), whose result and errors it gives. The source goes on the command's stdin
        (`python3 -`), so that it needs no quoting for a shell and has no size limit, where
        `python3 -c` is one argument of at most 128 KiB; the program's own stdin is then at
        its end, and its tracebacks name "<stdin>"."""
        return self.execute(PYTHON_STDIN, timeout, cwd, env, _python_source(code), text=text,
                            max_output=max_output)

    def start_process(self, command, cwd=None, env=None, timeout=None):
        """Start `command` in the background; its output goes to a bounded log. A Process.
        timeout: seconds from now (sleep included) after which its whole tree is killed; it
        then ends with exit code 124."""
        fields = _command_fields(command)
        ms = _timeout_ms(timeout)
        if ms:
            fields["timeout_ms"] = ms
        if env:
            fields["env"] = dict(env)
        c = _cwd(cwd)
        if c is not None:
            fields["cwd"] = c
        r = self._call("start", **fields)
        pid = r.get("pid")
        if not isinstance(pid, int):
            raise errors.ProtocolError("start reply without a pid")
        if ms and not isinstance(r.get("timeout_ms"), int):
            # a supervisor of an older nsbox ignores the timeout: no process without its bound
            try:
                self.kill_process(pid, 9)
            except errors.SandboxError:
                pass
            raise errors.OperationNotSupported(
                "this sandbox's supervisor (an older nsbox) cannot bound a background process; "
                "it was stopped. Make a new sandbox, or bound it inside: timeout S CMD",
                "unsupported")
        return Process(self, pid, command if isinstance(command, str) else " ".join(command))

    def list_processes(self):
        """Background processes started in this sandbox, running or ended: [ProcessInfo]."""
        r = self._call("ps")
        out = []
        for p in r.get("processes") or []:
            cmd = p.get("cmd")
            if cmd is None and isinstance(p.get("argv"), list):
                cmd = " ".join(p["argv"])
            out.append(ProcessInfo(pid=p.get("pid"), command=cmd or "",
                                   running=bool(p.get("running")),
                                   exit_code=p.get("exit_code")))
        return out

    def kill_process(self, pid, signal=15):
        self._call("kill", pid=int(pid), signal=int(signal))

    def process_logs(self, pid):
        return _logs_of(self._call("logs", pid=int(pid)))

    def network_log(self):
        """The sandbox's network log (docs/network.md, "The network log"): a list of dicts,
        oldest first, one per connection its egress helper decided on (time, name, port,
        verdict, reason, address, bytes_up, bytes_down, duration_ms, seq), and on a bound host
        one per request (verdict "bound", method, path without its query, status). Empty for
        a sandbox with neither allowed names nor header bindings (it has no egress helper)."""
        return network_log_of(os.path.join(self.runtime_dir, self.id))

    def follow_process_logs(self, pid):
        """Process.follow_logs() by pid: a generator of ProcessLogs."""
        f = _LogFollower(pid)
        while True:
            chunk = f.step(self._call("logs", **f.request()))
            if chunk is not None:
                yield chunk
            if f.done:
                return
            time.sleep(f.delay)

    # ---- files (paths relative to /workspace; "/workspace/x" and "/x" mean the same) -------

    def read_file(self, path, max_bytes=None, into=None):
        """The whole content of a workspace file, as bytes: as long as it was when the read
        was answered (what it gains meanwhile is not read). SandboxFileNotFoundError (also a
        FileNotFoundError) if it does not exist. max_bytes: SandboxFileTooLargeError (also an
        OSError, EFBIG) instead of reading a larger file into memory, for files an untrusted
        command made. into (a local path, or a binary file object open for writing): the
        content is copied there in pieces of 1 MiB, never whole in memory, and the number of
        bytes copied is returned; a path is made only once the size is known to be within
        max_bytes, and is replaced whole or not at all (a full disk leaves it as it was)."""
        path = os.fspath(path)
        if max_bytes is not None and max_bytes < 0:
            raise ValueError("max_bytes must be a number of bytes >= 0")
        into_path = isinstance(into, _PATH_TYPES)
        if into is not None and not into_path and not callable(getattr(into, "write", None)):
            raise TypeError("into must be a path or a binary file object open for writing, "
                            "not %s" % type(into).__name__)
        reply, fds = self._call("read", keep_fds=True, path=path)
        if not fds:
            raise errors.ProtocolError("read reply without a descriptor")
        for fd in fds[1:]:
            os.close(fd)
        with os.fdopen(fds[0], "rb") as f:
            size = reply.get("size")
            if not isinstance(size, int) or size < 0:
                raise errors.ProtocolError("read reply without a size")
            if max_bytes is not None and size > max_bytes:
                raise errors.SandboxFileTooLargeError(
                    "%s is %d bytes, more than max_bytes=%d" % (path, size, max_bytes), path=path)
            if into is None:
                return f.read(size)
            if into_path:
                return _into_path(into, lambda out: _copy_keeping_holes(f, out, size))
            return _copy_at_most(f, into, size)

    def write_file(self, path, data, mode=None, mkdir=True):
        """Write `data` (bytes, str as UTF-8, or a binary file object) to a workspace file,
        replacing it; mode (0 to 0o777) is given to the file whether new or not (None: a new
        file gets 0o644, an existing one keeps its own); mkdir=True creates missing parent
        directories. Returns the size."""
        path = os.fspath(path)
        fields = {} if mode is None else {"mode": int(mode), "set_mode": True}
        fd = _content_fd(data)
        try:  # (a busy refusal comes before anything of fd is read: sent again as it is)
            r = self._call("write", fds=[fd], path=path, mkdir=bool(mkdir), **fields)
        finally:
            os.close(fd)
        return r.get("size")

    def list_files(self, path="."):
        """The entries of a workspace directory: [FileInfo(name, type, size, mode, mtime,
        path, target)], target a symlink's text (None for the others), as stat() gives it.
        A listing that the runtime ended before the directory's end (it grew while listed)
        gives what came and warns (NsboxWarning)."""
        infos, cut = self._list_files(path)
        if cut:
            errors.warn(cut)
        return infos

    def _list_files(self, path):
        """list_files()'s entries and its warning (None if none), for the caller to say: the
        async client says it after its await, where the caller's frames are on the stack (from
        the worker thread, it would point at the executor's)."""
        path = os.fspath(path)
        # A directory too big for one reply comes in parts, each from where the one before
        # ended; all of them, sorted by name as one reply is.
        entries, cursor, seen = [], None, set()
        while True:
            r = self._call("list", path=path, **({"cursor": cursor} if cursor else {}))
            entries += r.get("entries") or []
            if not r.get("truncated"):
                break
            cursor = r.get("next")
            if not isinstance(cursor, str) or cursor in seen:
                raise errors.SandboxError(
                    "the listing of %s does not fit one reply and this nsbox runtime cannot "
                    "give the rest (%d entries came); update nsbox" % (path, len(entries)),
                    "unsupported")
            seen.add(cursor)
        cut = None
        if r.get("incomplete"):
            # The entries that came are given, with a warning rather than an error: a listing
            # is most often for a look at the results, and these are as true as any.
            cut = ("the listing of %s ended before the directory's end, at %d entries: it "
                   "grew while it was listed (a listing holds at most twice the names the "
                   "directory held when it began), or it holds more than about 800,000 names "
                   "(up to 1,000,000); list a smaller directory, or read it with execute()"
                   % (path, len(entries)))
        base = path.rstrip("/")
        entries.sort(key=lambda d: str(d.get("name")))
        return [_file_info(d, path=(d.get("name") if base in ("", ".")
                                    else base + "/" + str(d.get("name"))))
                for d in entries], cut

    def stat(self, path):
        path = os.fspath(path)
        r = self._call("stat", path=path)
        return _file_info(r, name=os.path.basename(path.rstrip("/")) or path, path=path)

    def exists(self, path):
        try:
            self.stat(path)
            return True
        except FileNotFoundError:
            return False

    def remove(self, path, recursive=False):
        path = os.fspath(path)
        self._call("remove", path=path, recursive=bool(recursive))

    def mkdir(self, path, parents=True):
        path = os.fspath(path)
        self._call("mkdir", path=path, parents=bool(parents))

    # ---- the sandbox itself ----------------------------------------------------------------

    def ping(self):
        return self._call("ping").get("id")

    def inspect(self):
        """State, spec, limits, stats and processes, as `nsbox inspect` prints them."""
        r = dict(self._call("inspect"))
        r.pop("v", None)
        r.pop("ok", None)
        return r

    def is_alive(self):
        try:
            self.ping()
            return True
        except (errors.SandboxDeletedError, errors.SandboxNotFound):
            return False

    def delete(self):
        """Delete the sandbox now (idempotent: a sandbox already gone is not an error). Returns
        once its runtime state is gone, as `nsbox rm` does."""
        self.closed = True
        # The delete goes over the holding connection when there is one (no second connect),
        # and its end is the supervisor's exit: it replies first, tears the sandbox down, and
        # closes its connections only when it exits. Waiting for that hang-up, rather than
        # polling the state directory, returns as soon as the sandbox is gone.
        c, self._holder = self._holder, None

        def once(held):
            conn = held if held is not None else Connection(self.id, self.runtime_dir)
            try:
                conn.call("delete", by="session", answer_s=_transport.ANSWER_S)  # its tombstone: not "by rm" (older: it is)
                return conn
            except BaseException:
                if conn is not held:
                    conn.close()
                raise
        try:
            # a holding connection is never refused; a new one may be (every one taken), and
            # a delete is sent again even for a cancelled call: it is the clean-up
            c = once(c) if c is not None else retry_if_busy(once, None, cancellable=False)
            c.wait_hangup(5)
        except errors.SandboxDeletedError as e:
            if SUPERVISOR_GONE in str(e):
                self._gc()  # its supervisor was killed: remove what it left, as nsbox rm does
            return
        except errors.SandboxNotFound:
            return
        finally:
            if c is not None:
                c.close()
        # Should the wait have been cut short, the state directory's removal is the end.
        d = os.path.join(self.runtime_dir, self.id)
        end = time.monotonic() + 5
        while os.path.exists(d) and time.monotonic() < end:
            time.sleep(0.005)

    close = delete

    def _gc(self):
        """Best effort: `nsbox gc` with this session's binary and environment."""
        opts = self.options
        try:
            env = opts._env() if opts is not None else dict(os.environ)
            binary = find_binary(opts.binary if opts is not None else None, env)
            if binary:
                subprocess.run([binary, "gc"], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        except (OSError, subprocess.SubprocessError):
            pass

    def __repr__(self):
        return "<nsbox.Session %s>" % self.id


async def _afollow(session, pid):
    """Session.follow_process_logs() for the async client: the same requests, off the loop."""
    f = _LogFollower(pid)
    while True:
        chunk = f.step(await run_blocking(functools.partial(session._call, "logs",
                                                            **f.request())))
        if chunk is not None:
            yield chunk
        if f.done:
            return
        await asyncio.sleep(f.delay)


class AsyncProcess:
    """A background process started by AsyncSession.start_process()."""

    def __init__(self, process):
        self._p = process
        self.pid = process.pid
        self.command = process.command

    async def logs(self):
        return await run_blocking(self._p.logs)

    def follow_logs(self):
        """An async iterator of ProcessLogs: Process.follow_logs()."""
        return _afollow(self._p.session, self.pid)

    async def kill(self, signal=15):
        await run_blocking(self._p.kill, signal)

    async def info(self):
        return await run_blocking(self._p.info)

    async def wait(self, timeout=None, poll=0.05):
        end = None if timeout is None else time.monotonic() + timeout
        code = await _Wait(self._p.session, self.pid, timeout).arun()
        if code is not _NO_WAIT_OP:
            return code
        while True:
            p = await self.info()
            if not p.running:
                return p.exit_code
            if end is not None and time.monotonic() >= end:
                raise TimeoutError("process %d still running after %ss" % (self.pid, timeout))
            await asyncio.sleep(poll)

    def __repr__(self):
        return "<nsbox.AsyncProcess pid=%d %r>" % (self.pid, self.command)


class AsyncSession:
    """The same operations as Session, as coroutines. The blocking socket work runs in worker
    threads of nsbox's own (not the event loop's default executor, whose few threads a handful
    of long commands would hold); cancelling an execute() kills the command."""

    def __init__(self, session):
        self.sync = session
        self.id = session.id
        self.options = session.options

    @property
    def socket_path(self):
        return self.sync.socket_path

    async def execute(self, command, timeout=None, cwd=None, env=None, stdin=None, *, text=True,
                      max_output=DEFAULT_MAX_OUTPUT):
        job = self.sync._exec_job(command, timeout, cwd, env, stdin, text, max_output)
        fut = run_blocking(job.run)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            job.cancel()
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            raise

    execute.__doc__ = Session.execute.__doc__

    async def run_code(self, code, timeout=None, cwd=None, env=None, *, text=True,
                       max_output=DEFAULT_MAX_OUTPUT):
        return await self.execute(PYTHON_STDIN, timeout, cwd, env, _python_source(code),
                                  text=text, max_output=max_output)

    run_code.__doc__ = Session.run_code.__doc__

    async def start_process(self, command, cwd=None, env=None, timeout=None):
        return AsyncProcess(await run_blocking(self.sync.start_process, command, cwd, env,
                                                    timeout))

    async def list_processes(self):
        return await run_blocking(self.sync.list_processes)

    async def kill_process(self, pid, signal=15):
        await run_blocking(self.sync.kill_process, pid, signal)

    async def process_logs(self, pid):
        return await run_blocking(self.sync.process_logs, pid)

    async def network_log(self):
        return await run_blocking(self.sync.network_log)

    def follow_process_logs(self, pid):
        """An async iterator of ProcessLogs: Session.follow_process_logs()."""
        return _afollow(self.sync, pid)

    async def read_file(self, path, max_bytes=None, into=None):
        return await run_blocking(self.sync.read_file, path, max_bytes, into)

    async def write_file(self, path, data, mode=None, mkdir=True):
        return await run_blocking(self.sync.write_file, path, data, mode, mkdir)

    async def list_files(self, path="."):
        infos, cut = await run_blocking(self.sync._list_files, path)
        if cut:
            errors.warn(cut)
        return infos

    async def stat(self, path):
        return await run_blocking(self.sync.stat, path)

    async def exists(self, path):
        return await run_blocking(self.sync.exists, path)

    async def remove(self, path, recursive=False):
        await run_blocking(self.sync.remove, path, recursive)

    async def mkdir(self, path, parents=True):
        await run_blocking(self.sync.mkdir, path, parents)

    async def ping(self):
        return await run_blocking(self.sync.ping)

    async def inspect(self):
        return await run_blocking(self.sync.inspect)

    async def is_alive(self):
        return await run_blocking(self.sync.is_alive)

    async def delete(self):
        await run_blocking(self.sync.delete)

    close = delete

    def __repr__(self):
        return "<nsbox.AsyncSession %s>" % self.id
