"""Tests of the nsbox Python client against real sandboxes, as test_client.py (which tells how to
run them): hooks, processes, file operations, and the example."""
import asyncio
import errno
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # client_support, however this module was loaded
# setUpModule: unittest runs it for this module too
from client_support import NSBOX, AsyncClientTest, ClientTest, setUpModule  # noqa: E402,F401
import nsbox  # noqa: E402  (client_support put python/ first on the path)

REPO = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(REPO, "examples", "agent_session.py")


# ---- hooks -----------------------------------------------------------------------------------


class Recorder(nsbox.Hook):
    def __init__(self, name, log):
        self.name, self.log = name, log

    def on_create(self, ctx):
        r = ctx.sandbox.execute("echo %s > hook-%s.txt; ls" % (self.name, self.name))
        self.log.append(("create", self.name, r.stdout.split()))

    def on_destroy(self, ctx):
        r = ctx.sandbox.execute("cat hook-%s.txt" % self.name)
        self.log.append(("destroy", self.name, r.stdout.strip()))


class AsyncRecorder(nsbox.Hook):
    def __init__(self, name, log):
        self.name, self.log = name, log

    async def on_create(self, ctx):
        r = await ctx.sandbox.execute("echo %s > hook-%s.txt" % (self.name, self.name))
        self.log.append(("create", self.name, r.exit_code))

    async def on_destroy(self, ctx):
        r = await ctx.sandbox.execute("cat hook-%s.txt" % self.name)
        self.log.append(("destroy", self.name, r.stdout.strip()))


class Hooks(AsyncClientTest):
    def test_order_sync_session(self):
        log = []
        box = self.box(hooks=[Recorder("a", log), AsyncRecorder("b", log)])
        with box.open() as sb:
            log.append(("body", sb.execute("cat hook-a.txt hook-b.txt").stdout))
        self.assertEqual(log, [("create", "a", ["hook-a.txt"]), ("create", "b", 0),
                               ("body", "a\nb\n"),
                               ("destroy", "b", "b"), ("destroy", "a", "a")])

    async def test_order_async_session(self):
        log = []
        box = self.box(hooks=[AsyncRecorder("a", log), Recorder("b", log)])
        async with box.session() as sb:
            log.append(("body", (await sb.execute("cat hook-a.txt hook-b.txt")).stdout))
        self.assertEqual(log, [("create", "a", 0), ("create", "b", ["hook-a.txt", "hook-b.txt"]),
                               ("body", "a\nb\n"),
                               ("destroy", "b", "b"), ("destroy", "a", "a")])

    async def test_function_hooks_and_read_file(self):
        seen = {}

        async def seed(ctx):
            seen["id"] = ctx.sandbox_id
            await ctx.sandbox.write_file("seed.txt", "seeded\n")

        def collect(ctx):
            seen["data"] = ctx.sandbox.read_file("seed.txt")

        async with self.box(hooks=[nsbox.Hook(on_create=seed, on_destroy=collect)]).session() \
                as sb:
            self.assertEqual(seen["id"], sb.id)
            self.assertEqual((await sb.execute("cat seed.txt")).stdout, "seeded\n")
        self.assertEqual(seen["data"], b"seeded\n")

    async def test_hooks_that_return_a_coroutine_get_the_async_session(self):
        # A lambda or partial around an async function, an object with an async __call__:
        # not `async def` themselves, they got the blocking session, and their awaits failed.
        async def seed(ctx, data):
            await ctx.sandbox.write_file("seed-%s.txt" % data, data)

        class Seeder:
            async def __call__(self, ctx):
                await ctx.sandbox.write_file("seed-call.txt", "call")

        hooks = [nsbox.Hook(on_create=lambda ctx: seed(ctx, "lambda")),
                 nsbox.Hook(on_create=Seeder())]
        async with self.box(hooks=hooks).session() as sb:
            self.assertEqual((await sb.execute("cat seed-lambda.txt seed-call.txt")).stdout,
                             "lambdacall")
        with self.box(hooks=hooks).open() as sb:
            self.assertEqual(sb.execute("cat seed-lambda.txt seed-call.txt").stdout,
                             "lambdacall")

    async def test_failing_on_create_deletes_and_propagates(self):
        log = []

        class Boom(nsbox.Hook):
            def on_create(self, ctx):
                raise RuntimeError("seeding failed")

        box = self.box(hooks=[Recorder("a", log), Boom(), Recorder("c", log)])
        with self.assertRaisesRegex(RuntimeError, "seeding failed"):
            async with box.session():
                self.fail("body ran")
        # the hook that did run its on_create gets its on_destroy; the others never started
        self.assertEqual(log, [("create", "a", ["hook-a.txt"]), ("destroy", "a", "a")])
        self.assertEqual(self.dirs.live_sandboxes(), [])

    def test_failing_on_destroy_still_deletes_and_propagates(self):
        class Boom(nsbox.Hook):
            def on_destroy(self, ctx):
                raise RuntimeError("archive failed")

        with self.assertRaisesRegex(RuntimeError, "archive failed"):
            with self.box(hooks=[Boom()]).open() as sb:
                sb.execute("true")
        self.assertEqual(self.dirs.live_sandboxes(), [])

    async def test_failing_on_destroy_keeps_the_body_exception_as_context(self):
        # docs/python.md: the hook's exception is raised, with the body's as its __context__,
        # for plain and async hooks, under open() and session() alike.
        class Plain(nsbox.Hook):
            def on_destroy(self, ctx):
                raise RuntimeError("archive failed")

        class Async(nsbox.Hook):
            async def on_destroy(self, ctx):
                raise RuntimeError("archive failed")

        for hook in (Plain(), Async()):
            with self.assertRaisesRegex(RuntimeError, "archive failed") as cm:
                async with self.box(hooks=[hook]).session():
                    raise KeyError("agent crashed")
            self.assertIsInstance(cm.exception.__context__, KeyError, type(hook).__name__)
            with self.assertRaisesRegex(RuntimeError, "archive failed") as cm:
                with self.box(hooks=[hook]).open():
                    raise KeyError("agent crashed")
            self.assertIsInstance(cm.exception.__context__, KeyError, type(hook).__name__)
        self.assertEqual(self.dirs.live_sandboxes(), [])

    def test_body_exception_propagates_and_on_destroy_runs(self):
        log = []
        with self.assertRaises(KeyError):
            with self.box(hooks=[Recorder("a", log)]).open():
                raise KeyError("agent crashed")
        self.assertEqual([x[0] for x in log], ["create", "destroy"])

    def test_on_destroy_skipped_when_ttl_already_deleted_it(self):
        log = []
        with self.box(ttl_seconds=5, hooks=[Recorder("a", log)]).open():  # room for on_create
            time.sleep(6)
        self.assertEqual([x[0] for x in log], ["create"])

    def test_not_a_hook(self):
        with self.assertRaises(TypeError):
            self.box(hooks=[lambda ctx: None])


# ---- background processes --------------------------------------------------------------------


class Processes(AsyncClientTest):
    def test_sync_start_logs_list_kill(self):
        with self.box().open() as sb:
            p = sb.start_process("echo hello; echo oops >&2; exec sleep 60")
            self.assertIsInstance(p, nsbox.Process)
            deadline = time.monotonic() + 30  # a slow machine takes a while to start sh
            while time.monotonic() < deadline:
                logs = p.logs()
                if logs.stdout and logs.stderr:
                    break
                time.sleep(0.05)
            self.assertEqual((logs.stdout, logs.stderr), ("hello\n", "oops\n"))
            self.assertIn(p.pid, [q.pid for q in sb.list_processes() if q.running])
            self.assertTrue(p.running)
            p.kill()
            self.assertEqual(p.wait(timeout=10), 128 + signal.SIGTERM)
            info = [q for q in sb.list_processes() if q.pid == p.pid][0]
            self.assertFalse(info.running)
            self.assertIn("sleep 60", info.command)
            with self.assertRaises(nsbox.ProcessNotFound):
                p.kill()
            with self.assertRaises(nsbox.ProcessNotFound):
                sb.process_logs(99999)

    def test_logs_that_are_not_utf8_are_readable(self):
        # The supervisor sent the raw bytes, which made the reply unreadable JSON: a sandbox
        # could hide its logs from the agent. They are replaced (U+FFFD), NUL by '?'.
        with self.box().open() as sb:
            p = sb.start_process("printf 'ok\\377\\376bad\\000\\n\\303\\251'; printf "
                                 "'\\377' >&2")
            self.assertEqual(p.wait(timeout=10), 0)
            logs = p.logs()
            self.assertEqual(logs.stdout, "ok\ufffd\ufffdbad?\n\u00e9")
            self.assertEqual(logs.stderr, "\ufffd")

    def test_sync_follow_logs_streams_until_the_end(self):
        # The second line is written only once the first has come through the follower: the
        # output must arrive while the process runs. A character split across two writes
        # comes whole.
        with self.box().open() as sb:
            p = sb.start_process("echo first; echo warn >&2; while [ ! -e go ]; do sleep 0.05; "
                                 "done; printf 'caf\\303'; sleep 0.3; printf '\\251 done\\n'")
            out, err = "", ""
            for chunk in p.follow_logs():
                self.assertIsInstance(chunk, nsbox.ProcessLogs)
                self.assertFalse(chunk.truncated)
                out, err = out + chunk.stdout, err + chunk.stderr
                if out == "first\n":
                    self.assertTrue(chunk.running)
                    sb.write_file("go", b"")
            self.assertEqual((out, err), ("first\ncafé done\n", "warn\n"))
            self.assertFalse(p.running)

    def test_follow_logs_says_when_the_sandbox_falls_asleep(self):
        # following does not wake a sleeping sandbox: the follower is told, once, instead of
        # waiting in silence (it was; nsbox logs -f notes it)
        # (the ttl ends a follow that is never told: the frozen process itself never ends)
        with self.box(idle_timeout_seconds=1, ttl_seconds=60).open() as sb:
            p = sb.start_process("echo hi; exec sleep 600")
            chunks = []
            for c in p.follow_logs():
                chunks.append(c)
                if c.sleeping:
                    break
            self.assertTrue(chunks and chunks[-1].sleeping, chunks)
            self.assertEqual([c for c in chunks if c.sleeping], chunks[-1:])
            self.assertEqual("".join(c.stdout for c in chunks), "hi\n")
            self.assertTrue(chunks[-1].running)
            p.kill(signal.SIGKILL)

    async def test_async_follow_logs(self):
        async with self.box().session() as sb:
            # It prints "0", then waits for the go the test gives only once "0" came: the rest
            # cannot come in the same piece however slow the machine is (a fixed pause is not:
            # an emulated VM took longer than 0.4 s).
            p = await sb.start_process(["python3", "-u", "-c",
                                        "import os, time\nprint(0)\n"
                                        "while not os.path.exists('/workspace/go'): time.sleep(0.02)\n"
                                        "print(1); print(2)"])
            # "0" and its newline are two writes (print under -u): a slow machine may hand
            # them over in two pieces, so the go waits for the text so far, not for one piece
            chunks, went = [], False
            async for c in p.follow_logs():
                chunks.append(c)
                if not went and "".join(c.stdout for c in chunks) == "0\n":
                    await sb.write_file("go", b"")
                    went = True
            self.assertEqual("".join(c.stdout for c in chunks), "0\n1\n2\n")
            self.assertGreater(len(chunks), 1, "the output came in one piece at the end")
            self.assertEqual(await p.wait(timeout=10), 0)
            with self.assertRaises(nsbox.ProcessNotFound):
                async for _ in sb.follow_process_logs(99999):
                    pass

    async def test_async_process_outlives_execute_and_serves(self):
        async with self.box().session() as sb:
            p = await sb.start_process(["python3", "-u", "-c",
                                        "import time\nfor i in range(3): print(i)\n"
                                        "time.sleep(60)"], cwd="/tmp", env={"X": "1"})
            self.assertIsInstance(p, nsbox.AsyncProcess)
            deadline = time.monotonic() + 30  # python3 starts slowly on a slow machine
            while time.monotonic() < deadline:
                if (await p.logs()).stdout == "0\n1\n2\n":
                    break
                await asyncio.sleep(0.05)
            self.assertEqual((await p.logs()).stdout, "0\n1\n2\n")
            self.assertEqual([q.pid for q in await sb.list_processes() if q.running], [p.pid])
            await p.kill(signal.SIGKILL)
            self.assertEqual(await p.wait(timeout=10), 128 + signal.SIGKILL)

    def test_wait_is_answered_at_the_end_without_polling(self):
        # wait() is the supervisor's answer when the process ends ("wait" in protocol.md), not
        # a poll of ps: time.sleep must not be called, and the code comes at once.
        import nsbox.session as session_module

        def no_sleep(_seconds):
            raise AssertionError("wait() polled")

        with self.box().open() as sb:
            p = sb.start_process("sleep 0.4; exit 7")
            slow = sb.start_process(["sleep", "60"])
            real = session_module.time.sleep
            session_module.time.sleep = no_sleep
            try:
                t0 = time.monotonic()
                self.assertEqual(p.wait(timeout=30), 7)
                took = time.monotonic() - t0
                self.assertEqual(p.wait(), 7)        # ended: answered at once, again
                self.assertEqual(p.wait(timeout=0), 7)
                t0 = time.monotonic()
                with self.assertRaises(TimeoutError) as cm:
                    slow.wait(timeout=0.3)
                self.assertGreaterEqual(time.monotonic() - t0, 0.29)
                self.assertIn("still running after 0.3s", str(cm.exception))
            finally:
                session_module.time.sleep = real
            self.assertLess(took, 5.0)
            self.assertTrue(slow.running)            # a wait that timed out kills nothing
            with self.assertRaises(nsbox.ProcessNotFound):
                nsbox.session.Process(sb, 99999, "x").wait(timeout=1)
            slow.kill(signal.SIGKILL)
            self.assertEqual(slow.wait(timeout=10), 128 + signal.SIGKILL)

    async def test_async_waits_hold_no_worker_thread(self):
        # An agent that awaits several long-running processes must still be able to call the
        # sandbox: waits run on the event loop, not in the (small) default thread pool.
        async with self.box().session() as sb:
            procs = [await sb.start_process(["sleep", "60"]) for _ in range(12)]
            tasks = [asyncio.ensure_future(p.wait()) for p in procs]
            await asyncio.sleep(0.3)
            r = await asyncio.wait_for(sb.execute("echo hi"), 20)
            self.assertEqual(r.stdout, "hi\n")
            self.assertFalse(any(t.done() for t in tasks))
            await procs[0].kill(signal.SIGKILL)
            self.assertEqual(await asyncio.wait_for(tasks[0], 20), 128 + signal.SIGKILL)
            for t in tasks[1:]:
                t.cancel()
            await asyncio.gather(*tasks[1:], return_exceptions=True)
            for p in procs[1:]:
                await p.kill(signal.SIGKILL)

    async def test_start_process_timeout(self):
        async with self.box().session() as sb:
            # 2 s: time for the shell to start both sleeps first, also on a slow machine
            p = await sb.start_process("sleep 30 & sleep 31", timeout=2)
            self.assertEqual(await p.wait(timeout=20), 124)
            # both killed; the one that is not the process itself is reaped a moment later
            deadline = time.monotonic() + 20
            while True:
                r = await sb.execute("ps -e -o comm= | grep -c sleep || true")
                if r.stdout.strip() == "0" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            self.assertEqual(r.stdout.strip(), "0")
            with self.assertRaises(ValueError):
                await sb.start_process("true", timeout=-1)

    async def test_async_wait_cancelled_leaves_the_process_running(self):
        async with self.box().session() as sb:
            p = await sb.start_process(["sleep", "60"])
            w = asyncio.ensure_future(p.wait())
            await asyncio.sleep(0.2)
            self.assertFalse(w.done())
            w.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await w
            self.assertTrue((await p.info()).running)  # the cancel ended the wait only
            q = await sb.start_process("exit 3")
            self.assertEqual(await q.wait(timeout=10), 3)
            await p.kill(signal.SIGKILL)
            self.assertEqual(await p.wait(timeout=10), 128 + signal.SIGKILL)

    def test_start_failure(self):
        with self.box().open() as sb:
            with self.assertRaises(nsbox.SandboxError):
                sb.start_process(["no-such-program-xyz"])


class BackgroundProcessesOption(ClientTest):
    """supports_background_processes=False (the hosted option, docs/spec.md): start_process()
    and nsbox exec -d are refused with a message naming the option; the default takes them."""

    def cli(self, *args):
        env = dict(os.environ, **self.dirs.env())
        return subprocess.run([NSBOX, *args], env=env, capture_output=True, text=True,
                              timeout=120)

    def test_client_refuses_start_process(self):
        with self.assertRaises(TypeError):
            self.box(supports_background_processes="no")
        box = self.box(supports_background_processes=False)
        self.assertIs(box.spec()["supports_background_processes"], False)
        self.assertNotIn("supports_background_processes", self.box().spec())
        with box.open() as sb:
            with self.assertRaises(nsbox.OperationNotSupported) as cm:
                sb.start_process("sleep 1")
            self.assertIn("supports_background_processes=false", str(cm.exception))
            self.assertEqual(sb.list_processes(), [])  # nothing was started
            self.assertEqual(sb.execute("echo fg").stdout, "fg\n")
            r = self.cli("exec", "-d", sb.id, "--", "sleep", "1")
            self.assertEqual(r.returncode, 125, r.stderr)
            self.assertIn("supports_background_processes=false", r.stderr)
        with self.box().open() as sb:
            p = sb.start_process("exit 4")
            self.assertEqual(p.wait(timeout=30), 4)

    def test_cli_flag(self):
        for flags, refused in ((["--no-background-processes"], True), ([], False)):
            r = self.cli("create", "--ttl", "600", *flags)
            self.assertEqual(r.returncode, 0, r.stderr)
            sid = r.stdout.strip()
            try:
                r = self.cli("exec", "-d", sid, "--", "true")
                if refused:
                    self.assertEqual(r.returncode, 125, r.stderr)
                    self.assertIn("supports_background_processes=false", r.stderr)
                    self.assertEqual(self.cli("exec", sid, "--", "true").returncode, 0)
                else:
                    self.assertEqual(r.returncode, 0, r.stderr)
                spec = json.loads(self.cli("inspect", sid).stdout)["spec"]
                self.assertIs(spec["supports_background_processes"], not refused)
            finally:
                self.cli("rm", sid)
        r = self.cli("create", "--no-background-processes=yes")
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("takes no value", r.stderr)


# ---- files -----------------------------------------------------------------------------------


class Files(AsyncClientTest):
    @unittest.skipUnless(os.geteuid() == 0, "an idmapped --workspace needs root")
    def test_given_directory_files_belong_to_its_owner(self):
        # As root, a user's directory given as the workspace is idmapped: the supervisor's file
        # operations act as the sandbox's user, so what they create is the owner's on disk, and
        # a tree the sandbox locked (mode 000) can still be removed.
        ws = os.path.join(self.dirs.base, "given")
        os.mkdir(ws)
        os.chown(ws, 4242, 4343)
        with self.box(workspace=ws).open() as sb:
            sb.write_file("notes/a.txt", "x")
            st = os.stat(os.path.join(ws, "notes", "a.txt"))
            self.assertEqual((st.st_uid, st.st_gid), (4242, 4343))
            sb.execute("mkdir -p q/r && touch q/r/f && chmod 000 q/r q")
            sb.remove("q", recursive=True)
            self.assertFalse(os.path.exists(os.path.join(ws, "q")))
        self.assertTrue(os.path.exists(os.path.join(ws, "notes", "a.txt")))

    @unittest.skipUnless(os.geteuid() == 0, "a root-owned workspace is noted only for root")
    def test_the_command_lines_notes_are_warnings(self):
        # nsbox create's note on a root-owned workspace (the sandbox cannot write there) was
        # thrown away with its stderr: the agent only met "Permission denied" later.
        ws = os.path.join(self.dirs.base, "rootowned")
        os.mkdir(ws)
        with self.assertWarns(nsbox.NsboxWarning) as cm:
            with self.box(workspace=ws).open() as sb:
                self.assertNotEqual(sb.execute("touch x").exit_code, 0)
        self.assertIn("belongs to root", str(cm.warning))
        self.assertIn("chown -R USER: %s" % ws, str(cm.warning))
        self.assertEqual(cm.filename, __file__)  # the caller's line, not contextlib's
        with self.assertWarns(nsbox.NsboxWarning) as cm:
            self.box(workspace=ws).create().delete()
        self.assertEqual(cm.filename, __file__)

    @unittest.skipUnless(os.geteuid() == 0, "a root-owned workspace is noted only for root")
    async def test_the_command_lines_notes_are_warnings_at_the_async_callers_line(self):
        # the creation runs in a worker thread; its note must point at the caller's line, not
        # the executor's frames, where the default filter would say it once for all sessions
        ws = os.path.join(self.dirs.base, "rootowned-async")
        os.mkdir(ws)
        with self.assertWarns(nsbox.NsboxWarning) as cm:
            async with self.box(workspace=ws).session():
                pass
        self.assertIn("belongs to root", str(cm.warning))
        self.assertEqual(cm.filename, __file__)

    async def test_read_into_a_local_file(self):
        # a large result fetched without holding it in memory, sync and async
        with self.box().open() as sb:
            sb.execute("head -c 3000000 /dev/urandom > r.bin")
            digest = sb.execute("sha256sum r.bin").stdout.split()[0]
            dest = os.path.join(self.dirs.base, "r.bin")
            self.assertEqual(sb.read_file("r.bin", into=dest), 3000000)
            with open(dest, "rb") as f:
                self.assertEqual(__import__("hashlib").sha256(f.read()).hexdigest(), digest)
        async with self.box().session() as sb:
            await sb.execute("printf abc > small.txt")
            buf = __import__("io").BytesIO()
            self.assertEqual(await sb.read_file("small.txt", into=buf), 3)
            self.assertEqual(buf.getvalue(), b"abc")

    def test_read_into_a_path_replaces_it_whole_or_not_at_all(self):
        # a full disk in the middle of the copy left the local file cut, its old content lost
        if os.geteuid() != 0:
            self.skipTest("mounts a small tmpfs: needs root")
        tiny = os.path.join(self.dirs.base, "tiny")
        os.mkdir(tiny)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "nsbox-test", tiny], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", tiny])
        keep = os.path.join(tiny, "keep")
        with open(keep, "wb") as f:
            f.write(b"precious")
        os.chmod(keep, 0o640)
        with self.box().open() as sb:
            sb.execute("head -c 3000000 /dev/urandom > big; printf new > small")
            for dest in (keep, os.path.join(tiny, "new")):
                with self.assertRaises(OSError) as cm:
                    sb.read_file("big", into=dest)
                self.assertEqual(cm.exception.errno, errno.ENOSPC)
                self.assertEqual(os.listdir(tiny), ["keep"])
            with open(keep, "rb") as f:
                self.assertEqual(f.read(), b"precious")
            self.assertEqual(sb.read_file("small", into=keep), 3)
            with open(keep, "rb") as f:
                self.assertEqual(f.read(), b"new")
            self.assertEqual(os.stat(keep).st_mode & 0o7777, 0o640)
            self.assertEqual(os.listdir(tiny), ["keep"])

    def test_read_into_a_path_keeps_a_sparse_files_holes(self):
        # A sandbox's file of 16 TiB costs its 2 GiB workspace 4 KiB: read_file(into=PATH)
        # must not write every zero of it onto the host's disk (nsbox cp keeps the holes). Here
        # 256 MiB, with data at both ends and in the middle; the copy must cost about what its
        # data does.
        with self.box().open() as sb:
            sb.execute("truncate -s 128M sparse; printf mid >> sparse; truncate -s 256M sparse;"
                       " printf head | dd of=sparse conv=notrunc status=none;"
                       " printf tail >> sparse")
            size = (256 << 20) + 4
            for dest in (os.path.join(self.dirs.base, "sparse.new"),
                         os.path.join(self.dirs.base, "sparse.old")):
                if dest.endswith(".old"):
                    with open(dest, "wb") as f:  # two links: written in place
                        f.write(b"old content")
                    os.link(dest, dest + ".link")
                self.assertEqual(sb.read_file("sparse", into=dest), size)
                st = os.stat(dest)
                self.assertEqual(st.st_size, size)
                self.assertLess(st.st_blocks * 512, 1 << 20,
                                "%s: the holes were written (%d bytes on disk)"
                                % (dest, st.st_blocks * 512))
                with open(dest, "rb") as f:
                    self.assertEqual(f.read(4), b"head")
                    f.seek(128 << 20)
                    self.assertEqual(f.read(3), b"mid")
                    self.assertEqual(f.read(16), bytes(16))
                    f.seek(size - 4)
                    self.assertEqual(f.read(), b"tail")
            # a file object the caller opened gets every byte where it writes (its offset)
            buf = __import__("io").BytesIO(b"x")
            buf.seek(1)
            sb.execute("printf ab > small; truncate -s 5 small")
            self.assertEqual(sb.read_file("small", into=buf), 5)
            self.assertEqual(buf.getvalue(), b"xab\0\0\0")

    _MAKE = ("cd d && python3 -c 'import os\n"
             "for i in range(10000): open(\"%s%%05d\" %% i + \"x\" * 200, \"w\").close()'")

    def grow_while_listed(self, sb):
        """Make sb's listings of d grow it by 10,000 names for each part that comes; returns
        sb's own _call, to put back, and the list of the parts' sizes."""
        call, parts = sb._call, []

        def growing(op, **kw):
            reply = call(op, **kw)
            if op == "list":
                parts.append(len(reply.get("entries") or []))
                if len(parts) > 12:
                    raise AssertionError("the listing went on: %d parts, %d names"
                                         % (len(parts), sum(parts)))
                grown = sb.execute(self._MAKE % ("b%d-" % len(parts)))
                self.assertEqual(grown.exit_code, 0, grown.stderr)
            return reply

        sb._call = growing
        return call, parts

    def test_a_directory_that_grows_while_listed_is_listed_within_a_bound(self):
        # Entries made while a directory is listed in parts may be listed: a sandbox making
        # them faster than the parts come must not keep list_files going, the client holding
        # every name, until the workspace is full (640,000 names for a directory of 20,000,
        # measured without the bound). A listing ends at twice the names the directory held
        # when it began. Long names: fewer in a part (about 3,000), so that the parts are
        # outgrown at small cost.
        make = self._MAKE
        with self.box().open() as sb:
            r = sb.execute("mkdir d && " + make % "a")
            self.assertEqual(r.exit_code, 0, r.stderr)
            call, parts = self.grow_while_listed(sb)
            # what came is given, and the cut is said: it looked like the whole directory
            with self.assertWarns(nsbox.NsboxWarning) as cm:
                names = [f.name for f in sb.list_files("d")]
            self.assertIn("the listing of d ended before the directory's end", str(cm.warning))
            self.assertEqual(cm.filename, __file__)  # the caller's line
            self.assertGreater(len(parts), 2)  # in parts, or nothing was tried
            self.assertLessEqual(len(names), 2 * 10000)
            self.assertEqual(len(set(names)), len(names))
            sb._call = call
            # a directory left alone is listed whole, every part, and nothing is said
            sb.execute("rm -r d && mkdir d && " + make % "c")
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                names = [f.name for f in sb.list_files("d")]
            self.assertEqual(sorted(names), ["c%05d" % i + "x" * 200 for i in range(10000)])

    async def test_a_directory_that_grows_while_listed_async_warns_at_the_callers_line(self):
        # the listing runs in a worker thread; its cut must point at the caller's line, not
        # the executor's frames, where the default filter would say it once for all of them
        async with self.box().session() as asb:
            sb = asb.sync
            r = await asb.execute("mkdir d && " + self._MAKE % "a")
            self.assertEqual(r.exit_code, 0, r.stderr)
            call, parts = self.grow_while_listed(sb)
            with self.assertWarns(nsbox.NsboxWarning) as cm:
                names = [f.name for f in await asb.list_files("d")]
            sb._call = call
            self.assertIn("the listing of d ended before the directory's end", str(cm.warning))
            self.assertEqual(cm.filename, __file__)  # the caller's line
            self.assertGreater(len(parts), 2)
            self.assertLessEqual(len(names), 2 * 10000)

    def test_round_trip_sync(self):
        with self.box().open() as sb:
            payload = bytes(range(256)) * 4096  # 1 MiB, every byte value
            self.assertEqual(sb.write_file("bin.dat", payload), len(payload))
            self.assertEqual(sb.read_file("bin.dat"), payload)
            self.assertEqual(sb.execute("sha256sum bin.dat").stdout.split()[0],
                             __import__("hashlib").sha256(payload).hexdigest())
            sb.write_file("dir/sub/note.txt", "héllo\n")  # str as UTF-8, parents made
            self.assertEqual(sb.execute("cat dir/sub/note.txt").stdout, "héllo\n")
            self.assertEqual(sb.read_file("/workspace/dir/sub/note.txt"), "héllo\n".encode())
            sb.execute("echo from-sandbox > made.txt")
            self.assertEqual(sb.read_file("made.txt"), b"from-sandbox\n")
            sb.write_file("made.txt", b"replaced")
            self.assertEqual(sb.execute("cat made.txt").stdout, "replaced")

    async def test_round_trip_async_list_stat_remove(self):
        async with self.box().session() as sb:
            await sb.write_file("a.txt", b"abc")
            await sb.write_file("d/b.txt", b"12345")
            await sb.write_file("run.sh", "echo ran\n", mode=0o755)
            with self.assertRaises(nsbox.InvalidRequest) as cm:  # was given 0o755, silently
                await sb.write_file("suid.sh", "x", mode=0o4755)
            self.assertIn("setuid, setgid and sticky bits are never given", str(cm.exception))
            self.assertFalse(await sb.exists("suid.sh"))
            names = {f.name: f for f in await sb.list_files()}
            self.assertLessEqual({"a.txt", "d", "run.sh"}, set(names))
            self.assertEqual(names["a.txt"].size, 3)
            self.assertTrue(names["d"].is_dir)
            self.assertEqual([f.name for f in await sb.list_files("d")], ["b.txt"])
            st = await sb.stat("d/b.txt")
            self.assertEqual((st.size, st.is_file), (5, True))
            self.assertEqual((await sb.execute("./run.sh")).stdout, "ran\n")
            # an existing file: a mode given is applied (it was ignored: "Permission denied"
            # on the next run), none given keeps the file's own, in place or replaced whole
            await sb.write_file("tool.sh", "echo v1\n")
            await sb.execute("ln tool.sh tool-link.sh")  # two links: written in place
            for name in ("run.sh", "tool.sh"):
                await sb.write_file(name, "echo v2\n", mode=0o750)
                self.assertEqual(((await sb.stat(name)).mode, (await sb.execute("./" + name))
                                  .stdout), (0o750, "v2\n"))
                await sb.write_file(name, "echo v3\n")
                self.assertEqual((await sb.stat(name)).mode, 0o750)
                await sb.write_file(name, "echo v4\n", mode=0o600)
                self.assertEqual((await sb.stat(name)).mode, 0o600)
            await sb.remove("tool-link.sh")
            await sb.remove("a.txt")
            self.assertFalse(await sb.exists("a.txt"))
            await sb.remove("d", recursive=True)
            self.assertFalse(await sb.exists("d"))

    def test_a_directory_bigger_than_a_reply_is_listed_whole(self):
        # 10,000 long names are several replies (1 MiB each): a listing that stopped at the
        # first would give its 6,000, in no useful order, without a word. Each part goes on
        # from where the one before ended (the supervisor reads only its part each time); all
        # of them, sorted, come back, in the workspace's ext4 and in a tmpfs one alike.
        names = ["sample_%06d_with_a_rather_long_and_descriptive_name.json" % i
                 for i in range(10000)]
        conf = os.path.join(self.dirs.base, "tmpfs.json")
        with open(conf, "w") as f:
            f.write('{"workspace": {"fs": "tmpfs"}}')
        given = tempfile.mkdtemp(dir=self.dirs.base)
        os.chown(given, 4242, 4242)
        for kw in ({}, {"nsbox_env": dict(self.dirs.env(), NSBOX_CONFIG=conf)},
                   {"workspace": given}):
            with nsbox.LocalSandbox(binary=NSBOX, **dict({"nsbox_env": self.dirs.env(),
                                                          "ttl_seconds": 600}, **kw)).open() as sb:
                self.assertEqual(sb.inspect()["disk"]["kind"],
                                 "tmpfs" if "nsbox_env" in kw else
                                 "directory" if kw else "ext4")
                sb.execute("mkdir data && cd data && seq -f 'sample_%06g_with_a_rather_long_"
                           "and_descriptive_name.json' 0 9999 | xargs touch && ln -s /etc e")
                first = sb._call("list", path="data")
                self.assertTrue(first["truncated"], len(first["entries"]))
                self.assertLess(len(first["entries"]), 10000)
                got = sb.list_files("data")
                self.assertEqual([f.name for f in got], sorted(names + ["e"]), kw)
                self.assertEqual(got[0].target, "/etc")
                self.assertEqual(got[1].path, "data/" + names[0])
                # a cursor that is not a reply's
                for bad in ("x", "-1", "99999999999999999999999"):
                    with self.assertRaises(nsbox.SandboxError) as cm:
                        sb._call("list", path="data", cursor=bad)
                    self.assertIn("cursor", str(cm.exception))
                self.assertEqual(sb.execute("ls data | wc -l").stdout, "10001\n")

    def test_a_full_disk_is_an_oserror_enospc(self):
        with self.box().open() as sb:
            sb.write_file("important.txt", "precious data\n")
            sb.execute("fallocate -l $(df --output=avail -B1 /workspace | tail -1) fill "
                       "2>/dev/null; dd if=/dev/zero of=fill2 bs=1M 2>/dev/null; true")
            with self.assertRaises(nsbox.SandboxDiskFullError) as cm:
                sb.write_file("big.bin", b"x" * (4 << 20))
            e = cm.exception
            self.assertIsInstance(e, OSError)
            self.assertEqual((e.errno, e.code, e.filename), (errno.ENOSPC, "no_space", "big.bin"))
            self.assertIn("the workspace's disk is full", str(e))
            self.assertNotIn("big.bin", [f.name for f in sb.list_files()])  # nothing half-made
            # an overwrite that does not fit leaves the file as it was (it was truncated)
            with self.assertRaises(nsbox.SandboxDiskFullError) as cm:
                sb.write_file("important.txt", b"n" * (4 << 20))
            self.assertIn("(the file is unchanged)", str(cm.exception))
            self.assertEqual(sb.read_file("important.txt"), b"precious data\n")
            self.assertEqual([f.name for f in sb.list_files() if f.name.startswith(".nsbox")],
                             [])

    def test_file_objects_are_read_from_their_position(self):
        with self.box().open() as sb, tempfile.TemporaryFile() as f:
            f.write(b"skip:" + b"data" * 1000)
            f.seek(5)
            self.assertEqual(sb.write_file("from-file", f), 4000)  # a regular file, read direct
            self.assertEqual(sb.read_file("from-file"), b"data" * 1000)
            self.assertEqual(f.tell(), 5)  # the caller's file object is left where it was
            self.assertEqual(sb.write_file("from-bytesio", io.BytesIO(b"abc")), 3)  # copied
            self.assertEqual(sb.read_file("from-bytesio"), b"abc")

    def test_a_file_larger_than_the_whole_disk_is_the_same_error(self):
        # It was an InvalidRequest (a ValueError): code that handles a full disk as OSError
        # or ENOSPC missed it.
        with self.box(instance_type="small").open() as sb, tempfile.TemporaryFile() as f:
            f.truncate(3 << 30)  # sparse: more than small's 2 GiB, nothing written to disk
            with self.assertRaises(nsbox.SandboxDiskFullError) as cm:
                sb.write_file("huge.bin", f)
            self.assertIsInstance(cm.exception, OSError)
            self.assertEqual(cm.exception.code, "no_space")
            self.assertIn("more than the sandbox's workspace disk limit", str(cm.exception))

    def test_missing_file_is_a_file_not_found_error(self):
        with self.box().open() as sb:
            with self.assertRaises(FileNotFoundError) as cm:
                sb.read_file("nope.txt")
            self.assertIsInstance(cm.exception, nsbox.SandboxFileNotFoundError)
            self.assertIsInstance(cm.exception, nsbox.SandboxError)

    def test_errors_of_file_operations(self):
        with self.box().open() as sb:
            sb.mkdir("d")
            with self.assertRaises(nsbox.InvalidRequest):
                sb.read_file("d")  # not a regular file
            with self.assertRaises(FileNotFoundError):
                sb.write_file("missing/f.txt", b"x", mkdir=False)
            with self.assertRaises(nsbox.InvalidRequest):
                sb.remove("d")  # a directory, without recursive
            with self.assertRaises(FileNotFoundError):
                sb.list_files("nowhere")
            sb.execute("ln -s /etc/passwd link")
            st = sb.stat("link")
            self.assertEqual((st.type, st.target), ("symlink", "/etc/passwd"))
            # list_files gives the same (its entries had no target), the others none
            entries = {f.name: f for f in sb.list_files()}
            self.assertEqual((entries["link"].type, entries["link"].target),
                             ("symlink", "/etc/passwd"))
            self.assertIsNone(entries["d"].target)
            with self.assertRaises(nsbox.InvalidRequest):
                sb.write_file("link", b"through the link")  # refused, never followed

    def test_paths_stay_in_the_workspace(self):
        with self.box().open() as sb:
            sb.write_file("x.txt", b"x")
            sb.execute("ln -s /etc/passwd link; ln -s ../../../../etc/passwd rel")
            for bad in ("../../etc/passwd", "link", "rel", "/workspace/../etc/passwd"):
                try:
                    data = sb.read_file(bad)
                except nsbox.SandboxError:
                    continue
                self.assertNotIn(b"root:", data)
            # an absolute path elsewhere is refused (it was taken as /workspace/etc/passwd)
            for op in (lambda p: sb.read_file(p), lambda p: sb.write_file(p, b"x"),
                       lambda p: sb.list_files(p)):
                with self.assertRaises(nsbox.InvalidRequest) as cm:
                    op("/etc/passwd")
                self.assertIn("'/etc/passwd' is outside /workspace", str(cm.exception))
            self.assertEqual(sb.execute("test -e /workspace/etc || echo none").stdout, "none\n")


# ---- the example -----------------------------------------------------------------------------


class Example(ClientTest):
    def test_agent_session_example_runs(self):
        if not os.path.exists(EXAMPLE):
            self.skipTest("examples/agent_session.py is not next to this copy of the tests")
        env = self.dirs.env()
        env["PYTHONPATH"] = os.path.dirname(HERE)
        r = subprocess.run([sys.executable, EXAMPLE], capture_output=True, env=env, timeout=300)
        out = r.stdout.decode() + r.stderr.decode()
        if r.returncode != 0 and "is not supported yet" in out:
            self.skipTest("the example needs file operations, not implemented by this nsbox "
                          "yet: " + out.strip().splitlines()[-1])
        self.assertEqual(r.returncode, 0, out)
        self.assertIn("session ok", out)
        self.assertIn("best region: north", out)


if __name__ == "__main__":
    unittest.main()
