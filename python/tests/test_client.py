"""Tests of the nsbox Python client against real sandboxes.

Run with the nsbox binary to test in NSBOX_BIN (else nsbox on PATH), as root (as another user
the module is skipped unless a first sandbox can be created):

    NSBOX_BIN=build/nsbox PYTHONPATH=python python3 -m unittest discover -s python/tests -v

ctest runs them through tests/e2e/test_python_client.py. Each test class works in its own state
and cache directories, and every test checks that it left no sandbox behind. The hooks,
processes and files tests are in test_client_hooks_files.py, what both share in
client_support.py.
"""
import asyncio
import io
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # client_support, however this module was loaded
# setUpModule: unittest runs it for this module too
from client_support import (NSBOX, AsyncClientTest, ClientTest,  # noqa: E402,F401
                            all_at_once, running, setUpModule)
import nsbox  # noqa: E402  (client_support put python/ first on the path)
from nsbox._transport import runtime_dir  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "lib"))
from nsbox_test import fake_supervisor, fill_queue  # noqa: E402

REGION_MESSAGE = ("This network policy is not supported in region 'us-east-1'; it is supported "
                  "only in nl-north-1. Pass network=Network.all() or a supported region.")


# ---- the client's contract (docs/python.md) -------------------------------------------------


class DesignExample(AsyncClientTest):
    async def test_design_example(self):
        box = self.box(instance_type="medium", ttl_seconds=3600, network=nsbox.Network.none())
        async with box.session() as sb:
            r = await sb.execute("python3 -c 'print(6*7)'", timeout=30)
            self.assertIsInstance(r, nsbox.SandboxExecutionResult)
            self.assertTrue(r.exit_code == 0 and r.stdout == "42\n", r)
            self.assertEqual(r.stderr, "")
            sid = sb.id
            self.assertEqual(self.dirs.live_sandboxes(), [sid])
        self.assertEqual(self.dirs.live_sandboxes(), [])

    async def test_design_example_files_and_process(self):
        async with self.box().session() as sb:
            await sb.write_file("data.csv", b"a,b\n1,2\n")
            self.assertEqual(await sb.read_file("data.csv"), b"a,b\n1,2\n")
            p = await sb.start_process("python3 -m http.server 8000")
            self.assertIsInstance(p.pid, int)
            r = await sb.execute("for i in $(seq 50); do python3 -c 'import urllib.request as u;"
                                 "print(u.urlopen(\"http://127.0.0.1:8000/data.csv\").read()"
                                 ".decode(), end=\"\")' 2>/dev/null && break; sleep 0.1; done",
                                 timeout=30)
            self.assertEqual(r.stdout, "a,b\n1,2\n", r)
            await p.kill()

    def test_the_docs_first_examples_run_as_typed(self):
        # README's and docs/python.md's first examples, pasted into a file and run as a user
        # does: top-level `async with` was a SyntaxError outside an async function
        root = os.path.dirname(os.path.dirname(HERE))
        for doc in ("README.md", os.path.join("docs", "python.md")):
            path = os.path.join(root, doc)
            if not os.path.exists(path):
                self.skipTest("%s is not beside python/ (a copy of python/ alone)" % doc)
            with open(path) as f:
                text = f.read()
            blocks = text.split("```python\n")
            self.assertGreater(len(blocks), 1, doc)
            first = blocks[1].split("```")[0]
            if doc.endswith("python.md"):  # its next block goes on with that one's box
                first += blocks[2].split("```")[0]
            env = self.dirs.env()
            env["PYTHONPATH"] = os.path.dirname(HERE)
            r = subprocess.run([sys.executable, "-c", first], env=env, capture_output=True,
                               text=True, timeout=120)
            self.assertEqual(r.returncode, 0, (doc, r.stderr))
            self.assertEqual(self.dirs.live_sandboxes(), [], doc)

    async def test_defaults_are_designs(self):
        box = nsbox.LocalSandbox()
        self.assertEqual(box.spec(), {
            "instance_type": "medium", "idle_timeout_seconds": 0, "ttl_seconds": 86400,
            "region": "nl-north-1", "network": "none", "setup_script_timeout_seconds": 600})
        self.assertEqual(box.hooks, [])
        # paths as the caller has them (image= went raw into the JSON and failed there)
        import pathlib
        self.assertEqual(nsbox.LocalSandbox(image=pathlib.Path("/srv/img")).spec()["image"],
                         "/srv/img")
        async with self.box().session() as sb:
            spec = (await sb.inspect())["spec"]
            self.assertEqual(spec["instance_type"], "medium")
            self.assertEqual(spec["network"], "none")
            self.assertEqual(spec["region"], "nl-north-1")
            self.assertEqual(spec["limits"]["cpus"], 2)


# ---- execute ---------------------------------------------------------------------------------


class Execute(ClientTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cm = nsbox.LocalSandbox(binary=NSBOX, nsbox_env=cls.dirs.env(), ttl_seconds=600,
                                    instance_type="small").open()
        cls.sb = cls.cm.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cm.__exit__(None, None, None)
        super().tearDownClass()

    def tearDown(self):
        self.assertEqual(self.dirs.live_sandboxes(), [self.sb.id])

    def test_stdout_stderr_exit_code(self):
        r = self.sb.execute("echo out; echo err >&2; exit 3")
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, "out\n", "err\n"))
        self.assertFalse(r.ok)
        self.assertTrue(self.sb.execute("true").ok)

    def test_a_name_that_did_not_resolve_is_said_in_network_note(self):
        # network none: the lookup fails as before, and the result says why (as nsbox exec
        # says on stderr); the command's own stderr is left as it wrote it
        r = self.sb.execute("getent hosts pypi.org; echo err >&2")
        self.assertEqual((r.exit_code, r.stderr), (0, "err\n"))
        self.assertEqual(r.network_note,
                         "nsbox: the command looked up pypi.org, but this sandbox has no network "
                         "(network none); to reach it: --network allow=pypi.org (or all); "
                         "docs/network.md")
        self.assertEqual(self.sb.execute("true").network_note, "")

    def test_runs_as_appuser_in_workspace_with_sh(self):
        r = self.sb.execute("pwd; id -un; echo $0")
        self.assertEqual(r.stdout, "/workspace\nappuser\n/bin/sh\n", r)

    def test_not_found_and_signal_exit_codes(self):
        r = self.sb.execute("no-such-command-xyz")
        self.assertEqual(r.exit_code, 127)
        self.assertIn("not found", r.stderr)
        r = self.sb.execute(["no-such-command-xyz"])
        self.assertEqual(r.exit_code, 127)
        self.assertIn("no-such-command-xyz", r.stderr)
        r = self.sb.execute("kill -9 $$")
        self.assertEqual(r.exit_code, 128 + 9)

    def test_argv_form_is_not_a_shell(self):
        r = self.sb.execute(["python3", "-c", "import sys; print(sys.argv[1:])", "$HOME", "a b"])
        self.assertEqual(r.stdout, "['$HOME', 'a b']\n")

    def test_stdin_str_bytes_large_and_default(self):
        self.assertEqual(self.sb.execute("cat", stdin="héllo\n").stdout, "héllo\n")
        self.assertEqual(self.sb.execute("wc -c", stdin=b"\x00" * 3_000_000).stdout,
                         "3000000\n")
        self.assertEqual(self.sb.execute("cat").stdout, "")  # /dev/null, never waits
        # a command that does not read its input does not block us
        self.assertEqual(self.sb.execute("echo x", stdin=b"y" * 3_000_000).stdout, "x\n")
        # a file object, from its position, as write_file takes one; other types are refused
        # (stdin=5 fed five NUL bytes, a file a TypeError about integers)
        with tempfile.TemporaryFile() as f:
            f.write(b"skip:data\n")
            f.seek(5)
            self.assertEqual(self.sb.execute("cat", stdin=f).stdout, "data\n")
        self.assertEqual(self.sb.execute("cat", stdin=io.StringIO("text\n")).stdout, "text\n")
        for bad in (5, 1.5, ["a"], object()):
            with self.assertRaisesRegex(TypeError, "stdin must be str, bytes"):
                self.sb.execute("cat", stdin=bad)

    def test_env(self):
        r = self.sb.execute("echo $FOO-$BAR; echo ${HOSTENV_SECRET:-none}",
                            env={"FOO": "1", "BAR": "two words"})
        self.assertEqual(r.stdout, "1-two words\nnone\n")

    def test_cwd_relative_absolute_and_missing(self):
        self.sb.execute("mkdir -p sub/dir")
        self.assertEqual(self.sb.execute("pwd", cwd="sub/dir").stdout, "/workspace/sub/dir\n")
        self.assertEqual(self.sb.execute("pwd", cwd="/tmp").stdout, "/tmp\n")
        r = self.sb.execute("pwd", cwd="missing")
        self.assertNotEqual(r.exit_code, 0)
        self.assertIn("/workspace/missing", r.stderr)

    def test_timeout_raises_with_partial_output(self):
        # 3 s: the shell must print before the timeout, and starting it can take most of a
        # second in CI's emulated VM
        t = time.monotonic()
        with self.assertRaises(nsbox.ExecTimeout) as cm:
            self.sb.execute("echo started; echo e >&2; sleep 30", timeout=3)
        self.assertLess(time.monotonic() - t, 15)
        res = cm.exception.result
        self.assertEqual((res.exit_code, res.stdout, res.stderr, res.timed_out),
                         (124, "started\n", "e\n", True))
        self.assertIsInstance(cm.exception, TimeoutError)
        # the command is gone, and the sandbox still works
        self.assertNotIn("sleep 30", self.sb.execute("ps -eo args").stdout)
        self.assertEqual(self.sb.execute("echo ok", timeout=10).stdout, "ok\n")

    def test_any_timeout_the_runtime_takes_works(self):
        # Up to the runtime's year, a timeout works, also as "no limit in practice"; beyond,
        # the runtime's own error. A local wait of more than about 24 days overflowed poll()'s
        # milliseconds (a bare OverflowError), and 1e10 s a socket's timeout.
        self.assertEqual(self.sb.execute("echo ok", timeout=31536000).stdout, "ok\n")
        for t in (31536001, 1e10):
            with self.assertRaises(nsbox.InvalidRequest) as cm:
                self.sb.execute("true", timeout=t)
            self.assertIn("timeout_ms", str(cm.exception))
        with self.assertRaises(ValueError):
            self.sb.execute("true", timeout=float("inf"))
        p = self.sb.start_process("true", timeout=31536000)
        self.assertEqual(p.wait(timeout=1e10), 0)

    def test_a_script_over_128_kib_is_said_to_be_one(self):
        # A str command is one argument of sh -c, and the kernel takes 128 KiB at most (an
        # agent's heredoc that writes a file, say): exit 126 with what to do, not a bare
        # "Argument list too long".
        r = self.sb.execute("echo " + "a" * 140000)
        self.assertEqual(r.exit_code, 126)
        self.assertIn("Argument list too long (the kernel takes 128 KiB per argument or "
                      "variable, and less than the stack limit in all: put long inputs in a "
                      "file)", r.stderr)
        self.sb.write_file("long.sh", "echo " + "a" * 140000)
        self.assertEqual(len(self.sb.execute(["sh", "long.sh"]).stdout), 140001)

    def test_run_code_runs_python_source_as_given(self):
        # an agent's code: quotes of both kinds, a backslash, a $ a shell would expand, and
        # more than the 128 KiB a `python3 -c` argument may hold
        code = ("import sys\n"
                "x = \"it's $HOME \\\\n\"\n"
                "print(x, sys.stdin.read() == '')\n"
                "# " + "a" * 140000 + "\n")
        r = self.sb.run_code(code, timeout=30)
        self.assertIsInstance(r, nsbox.SandboxExecutionResult)
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (0, "it's $HOME \\n True\n", ""))
        self.sb.mkdir("sub")
        r = self.sb.run_code(b"import os\nprint(os.getcwd(), os.environ['K'])", cwd="sub",
                             env={"K": "v"})
        self.assertEqual(r.stdout, "/workspace/sub v\n", r)
        r = self.sb.run_code("print('out')\nraise SystemExit(3)", text=False)
        self.assertEqual((r.exit_code, r.stdout), (3, b"out\n"))
        r = self.sb.run_code("1/0")
        self.assertEqual(r.exit_code, 1)
        self.assertIn('File "<stdin>", line 1', r.stderr)
        self.assertIn("ZeroDivisionError", r.stderr)
        with self.assertRaises(nsbox.ExecTimeout) as cm:
            self.sb.run_code("import time\nprint('started', flush=True)\ntime.sleep(30)",
                             timeout=1)
        self.assertEqual(cm.exception.result.exit_code, 124)
        self.assertEqual(cm.exception.result.stdout, "started\n")
        with self.assertRaises(TypeError):
            self.sb.run_code(io.BytesIO(b"print(1)"))

    def test_bytes_on_request_and_invalid_utf8(self):
        cmd = "printf 'a\\377b'"
        self.assertEqual(self.sb.execute(cmd, text=False).stdout, b"a\xffb")
        self.assertEqual(self.sb.execute(cmd).stdout, "a\ufffdb")

    def test_large_output_whole_and_bounded(self):
        r = self.sb.execute("head -c 20000000 /dev/zero; echo end >&2", text=False)
        self.assertEqual((len(r.stdout), r.stderr, r.truncated), (20_000_000, b"end\n", False))
        r = self.sb.execute("head -c 20000000 /dev/zero; echo end >&2", text=False,
                            max_output=1000)
        self.assertEqual((len(r.stdout), r.stderr, r.truncated, r.exit_code),
                         (1000, b"end\n", True, 0))
        # by default 64 MiB of each stream: a command printing without end cannot take the
        # agent's memory; max_output=None keeps all
        big = "head -c %d /dev/zero" % ((64 << 20) + 5000)
        r = self.sb.execute(big, text=False)
        self.assertEqual((len(r.stdout), r.truncated, r.exit_code), (64 << 20, True, 0))
        r = self.sb.execute(big, text=False, max_output=None)
        self.assertEqual((len(r.stdout), r.truncated), ((64 << 20) + 5000, False))

    def test_background_child_holding_stdout_does_not_hang(self):
        t = time.monotonic()
        r = self.sb.execute("sleep 30 & echo started", timeout=20)
        self.assertEqual(r.stdout, "started\n")
        self.assertLess(time.monotonic() - t, 10)
        self.sb.execute("pkill sleep || kill $(pgrep sleep) || true")

    def test_concurrent_executes(self):
        # They wait for each other (they all must be running at once): a bound on the time of
        # four 1 s commands could not tell on a slow machine.
        import concurrent.futures as cf
        self.sb.execute("rm -rf concurrent; mkdir concurrent")
        with cf.ThreadPoolExecutor(4) as ex:
            outs = list(ex.map(lambda i: self.sb.execute(
                ["sh", "-c", all_at_once(4, "concurrent"), str(i)]).stdout, range(4)))
        self.sb.execute("rm -rf concurrent")
        self.assertEqual(outs, ["0 4\n", "1 4\n", "2 4\n", "3 4\n"])

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            self.sb.execute("true", timeout=-1)
        with self.assertRaises(TypeError):
            self.sb.execute(b"true")
        with self.assertRaises(nsbox.InvalidRequest):
            self.sb.execute("true", env={"BAD NAME": "x"})


class AsyncExecute(AsyncClientTest):
    async def test_supervisor_killed_during_an_async_execute_is_said_to_it(self):
        async with self.box().session() as sb:
            task = asyncio.ensure_future(sb.execute("sleep 60"))
            deadline = time.monotonic() + 30
            while "sleep 60" not in (await sb.execute("ps -eo args")).stdout:
                self.assertLess(time.monotonic(), deadline, "the command never started")
                await asyncio.sleep(0.05)
            os.kill((await sb.inspect())["supervisor_pid"], signal.SIGKILL)
            with self.assertRaises(nsbox.SandboxDeletedError) as cm:
                await asyncio.wait_for(task, 30)
            self.assertEqual(str(cm.exception), "sandbox %s was deleted because its supervisor "
                             "ended without removing it (killed or crashed)" % sb.id)
        self.assertEqual(self.dirs.live_sandboxes(), [])

    async def test_async_run_code(self):
        async with self.box().session() as sb:
            r = await sb.run_code("print(6 * 7)", timeout=30)
            self.assertEqual((r.exit_code, r.stdout), (0, "42\n"))
            with self.assertRaises(TypeError):
                await sb.run_code(["print(1)"])

    async def test_async_execute_concurrent_and_cancel(self):
        async with self.box().session() as sb:
            self.assertIsInstance(sb, nsbox.AsyncSession)
            # they wait for each other: all must be running at once (a bound on their time
            # could not tell on a slow machine)
            await sb.mkdir("arrived")
            rs = await asyncio.gather(*[sb.execute(["sh", "-c", all_at_once(4, "arrived"),
                                                    str(i)]) for i in range(4)])
            self.assertEqual([r.stdout for r in rs], ["0 4\n", "1 4\n", "2 4\n", "3 4\n"])

            # cancelling the task kills the command (once it runs: a fixed pause did not
            # always see it start on a slow machine)
            task = asyncio.ensure_future(sb.execute("sleep 40; echo never"))
            deadline = time.monotonic() + 30
            while "sleep 40" not in (await sb.execute("ps -eo args")).stdout:
                self.assertLess(time.monotonic(), deadline, "the command never started")
                await asyncio.sleep(0.05)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            deadline = time.monotonic() + 30
            while "sleep 40" in (await sb.execute("ps -eo args")).stdout:
                self.assertLess(time.monotonic(), deadline, "the cancelled command still runs")
                await asyncio.sleep(0.1)

            # 3 s: room for the shell to print first on a slow machine
            with self.assertRaises(nsbox.ExecTimeout) as cm:
                await sb.execute("echo a; sleep 20", timeout=3)
            self.assertEqual(cm.exception.result.stdout, "a\n")

    async def test_many_concurrent_executes_and_the_apps_own_threads(self):
        # The async calls ran in the event loop's default executor: min(32, CPUs + 4) threads,
        # so beyond that many concurrent execute()s the rest queued, and every to_thread() of
        # the application waited behind them. Here 40 commands wait for each other (they all
        # must be running at once) and for a file the test writes only after a to_thread().
        # (The waiting loop counts with builtins: 40 loops forking `ls | wc` every 0.1 s can
        # keep a slow machine's CPUs so busy that the last commands start later than the test
        # waited for them.)
        n = 40
        wait = ("touch arrived/$0; i=0; "
                "while set -- arrived/*; [ $# -lt %d ] && [ $i -lt 600 ]; do "
                "sleep 0.1; i=$((i+1)); done; echo $#") % (n + 1)
        async with self.box().session() as sb:
            await sb.mkdir("arrived")
            runs = [asyncio.ensure_future(sb.execute(["sh", "-c", wait, str(i)]))
                    for i in range(n)]
            deadline = time.monotonic() + 60  # the commands wait 60 s and more
            while len(await sb.list_files("arrived")) < n and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            self.assertEqual(len(await sb.list_files("arrived")), n, "not all ran at once")
            self.assertEqual(await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 10),
                             "free")
            await sb.write_file("arrived/last", "")
            rs = await asyncio.gather(*runs)
            self.assertEqual({(r.exit_code, r.stdout) for r in rs}, {(0, "%d\n" % (n + 1))})

    async def test_more_executes_than_the_sandbox_takes_wait_their_turn(self):
        # A sandbox takes 48 commands at once (docs/protocol.md "busy") on 64 connections: the
        # execute()s past that are sent again until they run, rather than failing with "too many
        # connections" or a SandboxDeletedError of a live sandbox, and other calls get through
        # meanwhile.
        async with self.box().session() as sb:
            t = time.monotonic()
            runs = [asyncio.ensure_future(sb.execute("sleep 2; echo %d" % i)) for i in range(80)]
            await asyncio.sleep(1)
            self.assertIn("state", await sb.inspect())
            rs = await asyncio.gather(*runs, return_exceptions=True)
            self.assertEqual([r.stdout if isinstance(r, nsbox.SandboxExecutionResult) else r
                              for r in rs], ["%d\n" % i for i in range(80)])
            self.assertGreater(time.monotonic() - t, 3.5)  # in two turns, not at once
            self.assertTrue(await sb.is_alive())

    async def test_a_busy_sandbox_waits_by_polling_and_forgets_cancelled_calls(self):
        # 32 waits held elsewhere: a wait of ours polls ps instead of failing. Then 48
        # requests at work: a start_process() is sent again and again; cancelled meanwhile, its
        # worker thread stops trying (before, it could start the process a minute after the
        # caller had given up on it).
        from nsbox._transport import Connection
        async with self.box().session() as sb:
            p = await sb.start_process(["sleep", "100"])
            null = os.open(os.devnull, os.O_RDWR)
            conns = []
            try:
                for _ in range(32):
                    conns.append(Connection(sb.id, sb.sync.runtime_dir))
                    conns[-1].send({"v": 1, "op": "wait", "pid": p.pid})
                quick = await sb.start_process("sleep 1; exit 3")
                self.assertEqual(await quick.wait(timeout=30), 3)
                for _ in range(16):
                    conns.append(Connection(sb.id, sb.sync.runtime_dir))
                    conns[-1].send({"v": 1, "op": "exec", "argv": ["sleep", "100"]}, [null] * 3)
                task = asyncio.ensure_future(sb.start_process("touch /workspace/started"))
                await asyncio.sleep(0.5)
                self.assertFalse(task.done())  # refused as busy, and sent again
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task
            finally:
                os.close(null)
                for c in conns:
                    c.close()  # the execs end with their connections, the waits too
            await asyncio.sleep(1.5)  # longer than the pauses between attempts
            self.assertFalse(await sb.exists("started"))
            self.assertEqual(sorted(x.pid for x in await sb.list_processes()),
                             sorted([p.pid, quick.pid]))

    async def test_cancelled_while_being_created_leaves_nothing(self):
        # asyncio.wait_for around the session's entry: the creation (here 2 s of set-up
        # script) went on in its thread, and its sandbox lived for its whole ttl.
        box = self.box(setup_script="sleep 2")

        async def enter():
            async with box.session():
                self.fail("entered a session that was cancelled")

        with self.assertRaises(asyncio.TimeoutError):
            await asyncio.wait_for(enter(), 0.5)
        # the creation goes on (its set-up script, the create), then the deletion: seconds
        # on a slow machine
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            if not self.dirs.live_sandboxes() and os.path.exists(
                    os.path.join(self.dirs.state, "tombstones")):
                break
        self.assertEqual(self.dirs.live_sandboxes(), [])
        with open(os.path.join(self.dirs.state, "tombstones", "recent")) as f:
            self.assertIn("deleted when the session that held it ended", f.read())  # made,
            # then deleted by the client

    async def test_idle_sleep_is_transparent(self):
        async with self.box(idle_timeout_seconds=1).session() as sb:
            self.assertEqual((await sb.execute("echo a")).stdout, "a\n")
            await asyncio.sleep(2.5)
            self.assertEqual((await sb.execute("echo b")).stdout, "b\n")
            self.assertGreaterEqual((await sb.inspect())["sleeps"], 1)


class Interrupts(ClientTest):
    def test_an_interrupt_while_being_created_leaves_nothing(self):
        # A Ctrl-C that reaches only this process (a SIGINT to its pid, as an agent service's
        # own signal handling may send), at moments spread over the creation: the
        # KeyboardInterrupt comes, and no sandbox is left. Before, subprocess gave create a
        # quarter of a second; when it finished in it, the sandbox lived on unnamed.
        box = self.box(instance_type="small", setup_script="sleep 0.2")
        during_creation = 0
        for i in range(12):
            entered = []
            t = threading.Timer(0.05 + 0.03 * i, os.kill, (os.getpid(), signal.SIGINT))
            t.start()
            try:
                with box.open():
                    entered.append(True)
                    time.sleep(5)
                self.fail("the interrupt never came")
            except KeyboardInterrupt:
                pass
            finally:
                t.join()
            during_creation += not entered
            self.assertEqual(self.dirs.live_sandboxes(), [], "after %.2f s" % (0.05 + 0.03 * i))
        self.assertGreater(during_creation, 0, "no interrupt came during a creation")


# ---- options and typed errors ----------------------------------------------------------------


class OptionsAndErrors(ClientTest):
    def test_region_rule_exact_message(self):
        for network in (None, nsbox.Network.none(), nsbox.Network.allow(hosts=("pypi.org",))):
            with self.assertRaises(nsbox.PolicyNotSupported) as cm:
                with self.box(region="us-east-1", network=network).open():
                    self.fail("created")
            self.assertEqual(str(cm.exception), REGION_MESSAGE)
            self.assertIsInstance(cm.exception, nsbox.SandboxCreationError)
        # the same text as the runtime's own CLI, not a copy kept by the client
        r = subprocess.run([NSBOX, "create", "--region", "us-east-1"], capture_output=True,
                           env=self.dirs.env())
        self.assertEqual(r.returncode, 125)
        self.assertEqual(r.stderr.decode().splitlines()[0], "nsbox: " + REGION_MESSAGE)

    def test_invalid_hosts_raise_with_the_runtimes_message(self):
        for host, why in (("https://pypi.org", "has a scheme"), ("pypi.org/simple", "path"),
                          ("*", "wildcard"), ("*.example.com", "wildcard"),
                          ("a.com:0", "port")):
            with self.subTest(host=host):
                with self.assertRaises(nsbox.InvalidOption) as cm:
                    with self.box(network=nsbox.Network.allow(hosts=(host,))).open():
                        self.fail("created")
                msg = str(cm.exception)
                self.assertTrue(msg.startswith("spec: key 'network': host '%s'" % host), msg)
                self.assertIn(why, msg)
                self.assertIsInstance(cm.exception, ValueError)
                self.assertNotIn("--spec", msg)  # how the spec got there is not the user's
                # the runtime says the same through its CLI
                r = subprocess.run([NSBOX, "create", "--network", "allow=" + host],
                                   capture_output=True, env=self.dirs.env())
                self.assertEqual(r.returncode, 125)
                self.assertIn(msg.split(": ", 2)[2], r.stderr.decode())

    def test_github_binding_says_it_binds_two_hosts(self):
        # the runtime names github.com, which the user never wrote: GitHubBinding did
        box = self.box(network=nsbox.Network.allow(hosts=("api.github.com",)),
                       header_bindings=[nsbox.GitHubBinding(token="ghp_" + "x" * 36)])
        with self.assertRaises(nsbox.InvalidOption) as cm:
            with box.open():
                self.fail("created")
        msg = str(cm.exception)
        self.assertIn("host 'github.com' is bound but not in the network's allow list", msg)
        self.assertIn("GitHubBinding binds api.github.com, and github.com for git over HTTPS: "
                      "allow both", msg)
        self.assertNotIn("x" * 36, msg)

    def test_local_type_checks_only(self):
        with self.assertRaises(TypeError):
            nsbox.Network.allow(hosts="pypi.org")  # a str is not a sequence of hosts
        with self.assertRaises(TypeError):
            nsbox.Network.allow(hosts=(443,))
        with self.assertRaises(TypeError):
            nsbox.EgressPolicy(cidrs="10.0.0.0/8")
        # syntax is the runtime's to judge: building these does not raise
        nsbox.Network.allow(hosts=("https://x",))
        nsbox.EgressPolicy(cidrs=("10.1.0.0/8",))

    def test_invalid_values_are_the_runtimes_to_refuse(self):
        cases = [(dict(ttl_seconds=0), "ttl_seconds"), (dict(instance_type="huge"), "huge"),
                 (dict(egress=nsbox.EgressPolicy(cidrs=("10.1.0.0/8",))), "host bits"),
                 (dict(network=nsbox.Network.allow(hosts=())), "network")]
        for kw, needle in cases:
            with self.subTest(kw=kw):
                with self.assertRaises(nsbox.InvalidOption) as cm:
                    with self.box(**kw).open():
                        self.fail("created")
                self.assertIn(needle, str(cm.exception))

    def test_setup_script(self):
        with self.box(setup_script="echo prepared > ready.txt; id -un >> ready.txt").open() as sb:
            self.assertEqual(sb.execute("cat ready.txt").stdout, "prepared\nappuser\n")
        with self.assertRaises(nsbox.SetupScriptError) as cm:
            with self.box(setup_script="echo broken dependency >&2; exit 3").open():
                self.fail("created")
        self.assertIn("broken dependency", str(cm.exception))
        self.assertIsInstance(cm.exception, nsbox.SandboxCreationError)
        with self.assertRaises(nsbox.SetupScriptError) as cm:
            with self.box(setup_script="sleep 30", setup_script_timeout_seconds=1).open():
                self.fail("created")
        self.assertIn("setup_script_timeout_seconds=1", str(cm.exception))

    # These ttls leave room for a first command before they end the sandbox: 2 s did not
    # always in CI's emulated VM.
    def test_ttl_expiry_is_a_deleted_error_that_says_so(self):
        with self.box(ttl_seconds=5).open() as sb:
            self.assertEqual(sb.execute("echo alive").stdout, "alive\n")
            time.sleep(6)
            with self.assertRaises(nsbox.SandboxDeletedError) as cm:
                sb.execute("echo late")
            self.assertIn("ttl_seconds=5 expired", str(cm.exception))
            self.assertIn(sb.id, str(cm.exception))
            with self.assertRaises(nsbox.SandboxDeletedError):
                sb.list_processes()
        # leaving the session after the ttl deleted the sandbox is not an error

    def test_ttl_expiry_during_a_command(self):
        with self.box(ttl_seconds=5).open() as sb:
            with self.assertRaises(nsbox.SandboxDeletedError) as cm:
                sb.execute("echo before; echo warn >&2; sleep 20")
            self.assertIn("ttl_seconds=5 expired", str(cm.exception))
            # what it printed until then is kept (the command line shows it as it comes)
            r = cm.exception.result
            self.assertEqual((r.exit_code, r.stdout, r.stderr), (137, "before\n", "warn\n"))
        with self.assertRaises(nsbox.SandboxDeletedError) as cm:
            sb.execute("true")
        self.assertIsNone(cm.exception.result)  # nothing ran

    def test_use_after_close_and_unknown_sandbox(self):
        with self.box().open() as sb:
            pass
        with self.assertRaises(nsbox.SandboxDeletedError) as cm:
            sb.execute("true")
        self.assertIn("was deleted by this session", str(cm.exception))  # not "by rm"
        self.assertFalse(sb.is_alive())
        sb.delete()  # idempotent
        other = nsbox.Session(sb.id, sb.runtime_dir)  # another client of it: the tombstone,
        with self.assertRaises(nsbox.SandboxDeletedError) as cm:  # which said "by rm" before
            other.execute("true")
        self.assertIn("was deleted when the session that held it ended (its client's delete(), "
                      "or the end of open() or session())", str(cm.exception))
        r = subprocess.run([NSBOX, "exec", sb.id, "--", "true"], capture_output=True,
                           env=dict(os.environ, NSBOX_STATE_DIR=sb.runtime_dir))
        self.assertIn(b"was deleted when the session that held it ended", r.stderr)
        # runtime_dir may be left out: the one nsbox would use in this environment
        from unittest import mock
        with mock.patch.dict(os.environ, NSBOX_STATE_DIR=self.dirs.state):
            self.assertEqual(nsbox.Session(sb.id).runtime_dir, sb.runtime_dir)
            with self.assertRaises(nsbox.SandboxDeletedError):
                nsbox.Session(sb.id).execute("true")
        with mock.patch.dict(os.environ, NSBOX_STATE_DIR="state"):
            with self.assertRaises(nsbox.SandboxError) as cm:
                nsbox.Session(sb.id)
            self.assertIn("NSBOX_STATE_DIR must be an absolute path", str(cm.exception))
        # removed by someone else (nsbox rm) while open: that stays the reason after the end
        with self.box().open() as sb:
            subprocess.run([NSBOX, "rm", sb.id], check=True, env=self.dirs.env())
            with self.assertRaises(nsbox.SandboxDeletedError) as cm:
                sb.execute("true")
            self.assertIn("was deleted by rm", str(cm.exception))
        with self.assertRaises(nsbox.SandboxDeletedError) as cm:
            sb.execute("true")
        self.assertIn("was deleted by rm", str(cm.exception))
        # an id is a name under the runtime directory: nothing else is taken for one (an
        # agent's '../../x' reached sockets outside it)
        for bad in ("../../etc", "", "0123456789AB", "0123456789abc", "0123456789a/", 12):
            with self.assertRaisesRegex(ValueError, "a sandbox id is 12 hex digits"):
                nsbox.Session(bad, self.dirs.state)
        ghost = nsbox.Session("0123456789ab", runtime_dir(self.dirs.env()))
        with self.assertRaises(nsbox.SandboxNotFound) as cm:
            ghost.execute("true")
        self.assertEqual(str(cm.exception), "no sandbox 0123456789ab in %s (it never existed "
                         "there)" % runtime_dir(self.dirs.env()))

    def test_missing_binary(self):
        with self.assertRaises(nsbox.SandboxCreationError) as cm:
            with nsbox.LocalSandbox(binary="/nonexistent/nsbox",
                                    nsbox_env=self.dirs.env()).open():
                pass
        self.assertIn("/nonexistent/nsbox", str(cm.exception))

    def test_session_deleted_even_on_exception(self):
        with self.assertRaises(ZeroDivisionError):
            with self.box().open() as sb:
                sb.execute("true")
                1 / 0
        self.assertFalse(sb.is_alive())

    def test_delete_returns_when_the_sandbox_is_gone_without_polling(self):
        # delete() waits for the supervisor's hang-up, which comes after the teardown; a poll
        # of the state directory (5 ms sleeps) cost agent loops about a fifth of their rate.
        import nsbox.session as session_module

        def no_sleep(_seconds):
            raise AssertionError("delete() polled for the sandbox's removal")

        for _ in range(5):
            with self.box().open() as sb:
                d = os.path.join(sb.runtime_dir, sb.id)
                self.assertTrue(os.path.isdir(d))
                real = session_module.time.sleep
                session_module.time.sleep = no_sleep
                try:
                    sb.delete()
                finally:
                    session_module.time.sleep = real
            self.assertFalse(os.path.exists(d))
            self.assertFalse(sb.is_alive())
            sb.delete()  # still idempotent

    def test_a_stuck_supervisor_is_a_timeout_not_a_hang(self):
        # What the supervisor answers at once (inspect, ps, kill, logs, ping, delete) waited
        # for ever on a stuck one: a session's end hung a CI job until its own timeout.
        sb = self.box().create()
        pid = sb.inspect()["supervisor_pid"]
        real = nsbox._transport.ANSWER_S
        nsbox._transport.ANSWER_S = 1
        os.kill(pid, signal.SIGSTOP)
        try:
            for call in (sb.inspect, sb.list_processes, sb.delete):
                t = time.monotonic()
                with self.assertRaises(nsbox.SandboxError) as cm:
                    call()
                self.assertLess(time.monotonic() - t, 20, call)
                self.assertEqual(cm.exception.code, "timeout", call)
                self.assertEqual(str(cm.exception), "sandbox %s: its supervisor did not answer "
                                 "within 1 s (stuck; the process 'nsbox %s' on the host: kill "
                                 "it, then nsbox gc)" % (sb.id, sb.id))
        finally:
            nsbox._transport.ANSWER_S = real
            os.kill(pid, signal.SIGCONT)
        sb.delete()
        self.assertEqual(self.dirs.live_sandboxes(), [])

    def test_killed_supervisor_is_a_deleted_error(self):
        sb = self.box().create()
        pid = sb.inspect()["supervisor_pid"]
        os.kill(pid, signal.SIGKILL)
        for _ in range(100):
            if not os.path.exists("/proc/%d" % pid):
                break
            time.sleep(0.02)
        with self.assertRaises(nsbox.SandboxDeletedError) as cm:
            sb.execute("true")
        self.assertIn("its supervisor ended without removing it", str(cm.exception))
        self.assertEqual(self.dirs.live_sandboxes(), [sb.id])  # its state, until a gc
        sb.delete()  # idempotent, and it removes what the supervisor left (nsbox gc)
        self.assertEqual(self.dirs.live_sandboxes(), [])
        with self.assertRaises(nsbox.SandboxDeletedError) as cm:  # gc recorded why
            sb.execute("true")
        self.assertIn("its supervisor ended without removing it", str(cm.exception))

    def test_supervisor_killed_during_an_execute_is_said_to_it(self):
        # Not just "the sandbox's supervisor closed the connection (sandbox deleted?)": the
        # execute under way tells the supervisor's death (its lock is free) from a hang-up, as
        # the command line does.
        sb = self.box().create()
        got = []

        def run():
            try:
                sb.execute("sleep 60")
            except Exception as e:  # checked below
                got.append(e)
        t = threading.Thread(target=run)
        t.start()
        running(self, lambda: sb.execute("ps -eo args").stdout, "sleep 60")
        os.kill(sb.inspect()["supervisor_pid"], signal.SIGKILL)
        t.join(30)
        self.assertFalse(t.is_alive())
        self.assertEqual(len(got), 1)
        self.assertIsInstance(got[0], nsbox.SandboxDeletedError)
        self.assertEqual(str(got[0]), "sandbox %s was deleted because its supervisor ended "
                         "without removing it (killed or crashed)" % sb.id)
        sb.delete()
        self.assertEqual(self.dirs.live_sandboxes(), [])

    def test_a_live_supervisor_that_hangs_up_is_not_a_deletion(self):
        # A hang-up from a supervisor that still holds its lock is not "deleted". (The fake is
        # gone before tearDown, which would ask it to delete.)
        rt = runtime_dir(self.dirs.env())
        sid = "abcdef012345"
        with fake_supervisor(rt, sid, dies=False):
            with self.assertRaises(nsbox.SandboxError) as cm:
                nsbox.Session(sid, rt).inspect()
        self.assertNotIsInstance(cm.exception, nsbox.SandboxDeletedError)
        self.assertEqual(str(cm.exception), "sandbox %s: its supervisor closed the connection "
                         "without an answer (the sandbox is still there)" % sid)

    def test_a_dead_supervisor_whose_lock_a_gc_holds_is_said_dead(self):
        # A review: a gc that found the supervisor dead holds its lock while it removes the
        # sandbox; a call that lost its connection then said "still there". Nobody listening
        # on its socket tells.
        rt = runtime_dir(self.dirs.env())
        sid = "abcdef012346"
        with fake_supervisor(rt, sid, dies=True):
            with self.assertRaises(nsbox.SandboxDeletedError) as cm:
                nsbox.Session(sid, rt).inspect()
        self.assertEqual(str(cm.exception), "sandbox %s was deleted because its supervisor ended "
                         "without removing it (killed or crashed)" % sid)

    def test_a_stopped_supervisor_with_a_full_queue_is_a_timeout_not_a_hang(self):
        # A review: timed-out calls leave their connections in the stopped supervisor's
        # queue; once it is full, a connect waited for ever. It waits ANSWER_S at most.
        sb = self.box().create()
        pid = sb.inspect()["supervisor_pid"]
        path = os.path.join(sb.runtime_dir, sb.id, "ctl")
        real = nsbox._transport.ANSWER_S
        queued = []
        nsbox._transport.ANSWER_S = 1
        os.kill(pid, signal.SIGSTOP)
        try:
            queued = fill_queue(path)
            t = time.monotonic()
            with self.assertRaises(nsbox.SandboxError) as cm:
                sb.inspect()
            self.assertLess(time.monotonic() - t, 20)
        finally:
            nsbox._transport.ANSWER_S = real
            for c in queued:
                c.close()
            os.kill(pid, signal.SIGCONT)
        self.assertEqual(cm.exception.code, "timeout")
        self.assertEqual(str(cm.exception), "sandbox %s: its supervisor took no connection within "
                         "1 s (stuck; the process 'nsbox %s' on the host: kill it, then nsbox "
                         "gc)" % (sb.id, sb.id))
        sb.delete()
        self.assertEqual(self.dirs.live_sandboxes(), [])

    def test_killed_client_takes_its_sandbox_along(self):
        # A cancelled CI job: the process inside `with box.open()` is SIGKILLed, no cleanup code
        # runs. The sandbox must not live on until its ttl.
        code = ("import os, sys, time\n"
                "sys.path.insert(0, %r)\n"
                "import nsbox\n"
                "with nsbox.LocalSandbox(binary=%r, nsbox_env=dict(os.environ), ttl_seconds=600)"
                ".open() as sb:\n"
                "    print(sb.id, flush=True)\n"
                "    time.sleep(60)\n" % (os.path.dirname(os.path.dirname(nsbox.__file__)), NSBOX))
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             env=self.dirs.env())
        try:
            sid = p.stdout.readline().decode().strip()
            self.assertEqual(len(sid), 12, sid)
            sb = nsbox.Session(sid, runtime_dir(self.dirs.env()))
            self.assertTrue(sb.is_alive())
            p.send_signal(signal.SIGKILL)
            p.wait()
            end = time.monotonic() + 10
            while sb.is_alive() and time.monotonic() < end:
                time.sleep(0.05)
            with self.assertRaises(nsbox.SandboxDeletedError) as cm:
                sb.execute("true")
            # the hold's connection closing and the --owner-pid process ending are the same
            # event, seen by the supervisor in either order
            self.assertRegex(str(cm.exception), r"deleted because (the client holding it went "
                             r"away|its owner process \(pid %d\) ended)$" % p.pid)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
        # and a sandbox made without open() is not tied to anyone
        sb = self.box().create()
        try:
            self.assertTrue(sb.is_alive())
        finally:
            sb.delete()

    def test_sandbox_env_extension(self):
        with self.box(env={"MODE": "test"}).open() as sb:
            self.assertEqual(sb.execute("echo $MODE").stdout, "test\n")


if __name__ == "__main__":
    unittest.main()
