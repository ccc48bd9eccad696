"""LocalSandbox: a sandbox's options (docs/spec.md), and the sessions that create and delete a
sandbox through the nsbox runtime."""
import asyncio
import contextlib
import inspect
import json
import os
import re
import signal
import subprocess
import tempfile
import threading

from . import errors
from ._transport import find_binary, runtime_dir
from .models import EgressPolicy, GitHubBinding, HookContext, Network, binding_entries
from .session import AsyncSession, Session, run_blocking

_REGION_MESSAGE = re.compile(r"^This network policy is not supported in region ")
_SPEC_PREFIX = re.compile(r"^--spec [^:]*: ")


def _create_output(stdout):
    """What `nsbox create --json` printed last (its object: the id, or the error), or None."""
    lines = stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        return json.loads(lines[-1]) if lines else None
    except ValueError:
        return None


def _message_from_stderr(stderr):
    """nsbox's one-line message: without the "nsbox: " prefix, the "(see nsbox --help)" hint,
    and the name of the spec file we gave it (an implementation detail of this client)."""
    text = stderr.decode("utf-8", "replace").strip()
    lines = [ln for ln in text.splitlines() if ln.strip() != "(see nsbox --help)"]
    text = "\n".join(lines).strip()
    if text.startswith("nsbox: "):
        text = text[len("nsbox: "):]
    return _SPEC_PREFIX.sub("", text)


def creation_error(message, code=None):
    """The typed error for a failed `nsbox create`. With a wire code when the runtime gave one;
    otherwise from the message's documented shape (docs/spec.md: spec errors start with
    "spec:", the region rule has its exact text)."""
    if code in ("policy", "unsupported") or _REGION_MESSAGE.match(message):
        return errors.PolicyNotSupported(message, code or "policy")
    if code == "invalid" or message.startswith("spec: "):
        return errors.InvalidOption(message, code or "invalid")
    if message.startswith("setup script "):
        return errors.SetupScriptError(message, code or "exec")
    return errors.SandboxCreationError(message, code)


class LocalSandbox:
    """A local sandbox with the options of the hosted MistralSandbox.

    Nothing is created until session() / open() is entered; each entry creates a fresh sandbox
    and deletes it on exit. Option values are checked by the runtime (the same checks as the
    nsbox CLI and --spec files), so an invalid one raises on entry with the runtime's message.

    supports_background_processes (keyword-only, the hosted option for custom images): False
    makes the sandbox refuse start_process() with OperationNotSupported naming the option.

    header_bindings (keyword-only, the hosted option): a list of HeaderBinding, GitHubBinding
    and MistralApiBinding: headers added to the sandbox's HTTPS requests to those hosts, whose
    values never enter the sandbox (docs/network.md, "Header bindings").

    nsbox extensions (keyword-only): workspace (a host directory bound as /workspace, kept),
    env (variables for every command), pull (when an image reference is pulled: "missing",
    "always" or "never"; default: NSBOX_PULL, else "missing"), binary (the nsbox executable;
    default $NSBOX_BIN, else nsbox on PATH), nsbox_env (the environment nsbox runs with, e.g. NSBOX_STATE_DIR; default
    os.environ).
    """

    def __init__(self, instance_type="medium", idle_timeout_seconds=0, ttl_seconds=86400,
                 region="nl-north-1", network=None, egress=None, image=None, setup_script=None,
                 setup_script_timeout_seconds=600, hooks=(), *,
                 supports_background_processes=True, header_bindings=None, workspace=None,
                 env=None, pull=None, binary=None, nsbox_env=None):
        self.instance_type = instance_type
        self.idle_timeout_seconds = idle_timeout_seconds
        self.ttl_seconds = ttl_seconds
        self.region = region
        if network is None:
            network = Network.none()
        elif isinstance(network, str):
            network = Network(network)
        elif not isinstance(network, Network):
            raise TypeError("network must be Network.none(), Network.all() or "
                            "Network.allow(hosts=(...))")
        self.network = network
        if egress is not None and not isinstance(egress, EgressPolicy):
            egress = EgressPolicy(egress)
        self.egress = egress
        self.image = os.fspath(image) if isinstance(image, os.PathLike) else image
        self.pull = pull
        if isinstance(setup_script, os.PathLike):
            with open(setup_script, encoding="utf-8") as f:
                setup_script = f.read()
        self.setup_script = setup_script
        self.setup_script_timeout_seconds = setup_script_timeout_seconds
        if not isinstance(supports_background_processes, bool):
            raise TypeError("supports_background_processes must be True or False")
        self.supports_background_processes = supports_background_processes
        self.header_bindings = list(header_bindings or ())
        binding_entries(self.header_bindings)  # the types, now rather than at creation
        self.hooks = list(hooks or ())
        for h in self.hooks:
            if not (hasattr(h, "on_create") or hasattr(h, "on_destroy")):
                raise TypeError("a hook needs an on_create(ctx) and/or on_destroy(ctx) method "
                                "(see nsbox.Hook), got %r" % (h,))
        self.workspace = os.path.abspath(os.fspath(workspace)) if workspace else None
        self.env = dict(env) if env else None
        self.binary = binary
        self.nsbox_env = nsbox_env

    # ---- spec and runtime --------------------------------------------------------------------

    def spec(self):
        """The spec document (docs/spec.md) given to `nsbox create --spec`."""
        s = {
            "instance_type": self.instance_type,
            "idle_timeout_seconds": self.idle_timeout_seconds,
            "ttl_seconds": self.ttl_seconds,
            "region": self.region,
            "network": self.network.to_spec(),
            "setup_script_timeout_seconds": self.setup_script_timeout_seconds,
        }
        if self.egress is not None:
            s["egress"] = self.egress.to_spec()
        if self.image is not None:
            s["image"] = self.image
        if self.pull is not None:
            s["pull"] = self.pull
        if self.setup_script is not None:
            s["setup_script"] = self.setup_script
        if self.workspace is not None:
            s["workspace"] = self.workspace
        if self.env is not None:
            s["env"] = self.env
        if not self.supports_background_processes:
            s["supports_background_processes"] = False
        if self.header_bindings:
            s["header_bindings"] = [{"host": b.host, "header": b.header, "value": b.value}
                                    for b in binding_entries(self.header_bindings)]
        return s

    def _env(self):
        return dict(os.environ if self.nsbox_env is None else self.nsbox_env)

    def _binary(self, env):
        b = find_binary(self.binary, env)
        if not b:
            raise errors.SandboxCreationError(
                "the nsbox binary was not found: install nsbox, put it on PATH, or set "
                "NSBOX_BIN (or LocalSandbox(binary=...))")
        return b

    def _create_id(self, owner_pid=None, notes=None):
        env = self._env()
        binary = self._binary(env)
        argv = [binary, "create", "--spec", "-", "--json"]
        if owner_pid is not None:
            argv += ["--owner-pid", str(owner_pid)]
        doc = json.dumps(self.spec()).encode("utf-8")
        # The spec goes in as a memfd on stdin (a regular file, as --spec requires): no
        # temporary file on disk, nothing to clean up.
        try:
            fd = os.memfd_create("nsbox-spec", os.MFD_CLOEXEC)
            spec_file = os.fdopen(fd, "w+b")
        except (AttributeError, OSError):
            if self.header_bindings:  # a binding's value is never written to a disk
                raise errors.SandboxCreationError(
                    "header bindings need memfd_create (Linux 3.17, Python 3.8)") from None
            spec_file = tempfile.TemporaryFile()
        with spec_file:
            spec_file.write(doc)
            spec_file.flush()
            spec_file.seek(0)
            timeout = None
            if isinstance(self.setup_script_timeout_seconds, int):
                timeout = self.setup_script_timeout_seconds + 600
            try:
                p = subprocess.Popen(argv, stdin=spec_file, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
            except OSError as e:
                raise errors.SandboxCreationError(
                    "cannot run nsbox (%s): %s" % (binary, e.strerror)) from None
            try:
                stdout, stderr = p.communicate(timeout=timeout)
            except BaseException as e:
                # Interrupted (Ctrl-C that reached only this process, an exception raised by
                # a signal handler, the timeout): nothing may outlive it.
                self._abandon_create(p)
                if isinstance(e, subprocess.TimeoutExpired):
                    raise errors.SandboxCreationError(
                        "nsbox create did not finish within %ss" % timeout) from None
                raise
        out = stdout.decode("utf-8", "replace").strip()
        parsed = _create_output(stdout)
        if p.returncode != 0:
            err = parsed.get("error") if isinstance(parsed, dict) else None
            if isinstance(err, dict) and isinstance(err.get("message"), str):
                raise creation_error(self._explain(err["message"]), err.get("code"))
            msg = _message_from_stderr(stderr) or (
                "nsbox create failed with exit code %d" % p.returncode)
            raise creation_error(self._explain(msg))
        if not isinstance(parsed, dict) or not isinstance(parsed.get("id"), str):
            raise errors.SandboxCreationError("nsbox create printed no sandbox id: %r" % out)
        # What the command line says on success (a root-owned workspace the sandbox cannot
        # write to, ...) is said here too, as a warning; with notes (a list), by the caller,
        # the async session after its await: from a worker thread, the warning would point at
        # the executor's frames, not at the caller's line.
        for line in stderr.decode("utf-8", "replace").splitlines():
            if line.startswith("nsbox: note: "):
                if notes is None:
                    errors.warn(line[len("nsbox: note: "):])
                else:
                    notes.append(line[len("nsbox: note: "):])
        rt = parsed.get("runtime_dir") or runtime_dir(env)
        return parsed["id"], rt

    def _explain(self, message):
        """The runtime's message, with what only the client knows: a GitHubBinding stands for
        two hosts, and the user wrote neither of them."""
        github = any(isinstance(b, GitHubBinding) for b in self.header_bindings or ())
        if github and re.search(r"host '(api\.)?github\.com(:443)?' is bound", message):
            message += (" (GitHubBinding binds api.github.com, and github.com for git over "
                        "HTTPS: allow both)")
        return message

    def _abandon_create(self, p):
        """Stop an `nsbox create` whose caller gave up: SIGTERM makes it stop the creation and
        end once nothing of the sandbox is left, or, when it came too late, end with the id,
        whose sandbox is deleted here. Interrupted again meanwhile, create is killed (its
        supervisor then ends the sandbox unless the id was already out) and that goes on."""
        try:
            p.send_signal(signal.SIGTERM)
            out, _ = p.communicate(timeout=60)
        except BaseException:
            p.kill()
            p.wait()
            raise
        parsed = _create_output(out)
        if isinstance(parsed, dict) and isinstance(parsed.get("id"), str):  # made all the same
            Session(parsed["id"], parsed.get("runtime_dir") or runtime_dir(self._env()),
                    self).delete()

    def create(self):
        """Create the sandbox and return its Session, without hooks; the caller deletes it
        (session.delete()). Most code wants `with box.open()` / `async with box.session()`."""
        sandbox_id, rt = self._create_id()
        return Session(sandbox_id, rt, self)

    def _create_held(self, abandoned=None, notes=None):
        """A session's sandbox: tied to this process from its creation (--owner-pid; before
        the hold below exists, an interrupted creation would leave it for its whole ttl),
        then held (Session.hold). abandoned(): true once the caller gave up waiting (a
        cancelled task): the sandbox is deleted here and None returned. notes: as
        _create_id's."""
        sandbox_id, rt = self._create_id(owner_pid=os.getpid(), notes=notes)
        sb = Session(sandbox_id, rt, self)
        try:
            if abandoned is None or not abandoned(sb):
                sb.hold()
                return sb
        except BaseException:
            sb.delete()
            raise
        sb.delete()
        return None

    # ---- sessions ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def open(self):
        """Blocking session: `with box.open() as sb: sb.execute(...)`. Creates the sandbox, runs
        the on_create hooks, and on exit (even on an exception) runs the on_destroy hooks and
        deletes the sandbox. If this process dies first (SIGKILL, SIGTERM, a cancelled CI job),
        the sandbox is deleted all the same (Session.hold)."""
        sb = self._create_held()  # if this process dies without the delete, the sandbox too
        with contextlib.ExitStack() as stack:
            stack.callback(sb.delete)
            for hook in self.hooks:
                ctx = HookContext(sandbox=sb, sandbox_id=sb.id, options=self)
                _call_hook_sync(hook, "on_create", ctx, sb)
                stack.callback(_destroy_sync, hook, ctx, sb)
            yield sb

    @contextlib.asynccontextmanager
    async def session(self):
        """Async session: `async with box.session() as sb: await sb.execute(...)`. Same life
        cycle as open()."""
        # Cancelled while the creation runs (asyncio.wait_for, a task group), the thread goes
        # on; whichever of it and this coroutine sees the other's state last deletes the
        # sandbox, so that it never outlives the cancellation.
        lock, gave_up, made = threading.Lock(), [], []

        def abandoned(sb):
            with lock:
                made.append(sb)
                return bool(gave_up)

        notes = []
        fut = run_blocking(self._create_held, abandoned, notes)
        try:
            sb = await asyncio.shield(fut)
        except asyncio.CancelledError:
            with lock:
                gave_up.append(True)
                late = made[0] if made else None
            if late is not None:  # made and held before we gave up: ours to delete
                fut.add_done_callback(lambda f: f.cancelled() or f.exception())
                await run_blocking(late.delete)
            raise
        for note in notes:
            errors.warn(note)
        asb = AsyncSession(sb)
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(asb.delete)
            for hook in self.hooks:
                ctx = HookContext(sandbox=asb, sandbox_id=sb.id, options=self)
                await _call_hook_async(hook, "on_create", ctx, sb, asb)
                stack.push_async_callback(_destroy_async, hook, ctx, sb, asb)
            yield asb

    def __repr__(self):
        parts = ["%s=%r" % kv for kv in self.spec().items()
                 if kv[0] not in ("setup_script", "header_bindings")]
        if self.header_bindings:  # their reprs hide the values
            parts.append("header_bindings=%r" % (self.header_bindings,))
        return "LocalSandbox(%s)" % ", ".join(parts)


# ---- hooks -----------------------------------------------------------------------------------
#
# A hook's kind decides what ctx.sandbox is: an `async def` hook gets the AsyncSession, a plain
# one the blocking Session, whichever of open() / session() is used. on_create hooks run in list
# order after creation; on_destroy hooks in reverse order before deletion, only for hooks whose
# on_create succeeded, and only while the sandbox still exists (not after its ttl expired).


def _hook_fn(hook, name):
    fn = getattr(hook, name, None)
    return fn if callable(fn) else None


def _run_coroutine_in_thread(make_coro):
    """Run an async hook from blocking code, even when the caller has an event loop running."""
    box = {}

    def target():
        try:
            box["value"] = asyncio.run(make_coro())
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, name="nsbox-hook")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _call_hook_sync(hook, name, ctx, sb):
    fn = _hook_fn(hook, name)
    if fn is None:
        return
    if inspect.iscoroutinefunction(fn):
        ctx.sandbox = AsyncSession(sb)
        _run_coroutine_in_thread(lambda: fn(ctx))
        return
    ctx.sandbox = sb
    r = fn(ctx)
    if inspect.isawaitable(r):
        # Not an `async def` but awaitable all the same (a lambda or partial that returns a
        # coroutine, an object with an async __call__): a coroutine has not begun, so it
        # finds the async session, as an `async def` hook does.
        ctx.sandbox = AsyncSession(sb)
        _run_coroutine_in_thread(lambda: r)


async def _call_hook_async(hook, name, ctx, sb, asb):
    fn = _hook_fn(hook, name)
    if fn is None:
        return
    if inspect.iscoroutinefunction(fn):
        ctx.sandbox = asb
        await fn(ctx)
        return
    ctx.sandbox = sb
    # A plain function runs in a worker thread. Its exception is raised again here, in the
    # coroutine, so that it chains to the exception being handled (the session body's) as the
    # hook's own would; re-raised from the thread's future it lost that __context__.
    failed = []

    def call():
        try:
            return fn(ctx)
        except BaseException as e:  # noqa: B902 - handed to the coroutine as it is
            failed.append(e)
            return None

    r = await run_blocking(call)
    if failed:
        raise failed[0]
    if inspect.isawaitable(r):
        ctx.sandbox = asb  # as above (_call_hook_sync)
        await r


def _destroy_sync(hook, ctx, sb):
    if _hook_fn(hook, "on_destroy") is not None and sb.is_alive():
        _call_hook_sync(hook, "on_destroy", ctx, sb)


async def _destroy_async(hook, ctx, sb, asb):
    if _hook_fn(hook, "on_destroy") is not None and await asb.is_alive():
        await _call_hook_async(hook, "on_destroy", ctx, sb, asb)
