"""Tests of the nsbox Python client against real sandboxes.

Run with the nsbox binary to test in NSBOX_BIN (else nsbox on PATH), as root (as another user
the module is skipped unless a first sandbox can be created):

    NSBOX_BIN=build/nsbox PYTHONPATH=python python3 -m unittest discover -s python/tests -v

ctest runs them through tests/e2e/test_python_client.py. Each test class works in its own state
and cache directories, and every test checks that it left no sandbox behind.
"""
import asyncio
import errno
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # python/, so that the tested nsbox is this one
import nsbox  # noqa: E402
from nsbox._transport import runtime_dir  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "lib"))
from nsbox_test import fake_supervisor, fill_queue  # noqa: E402

NSBOX = os.environ.get("NSBOX_BIN") or shutil.which("nsbox") or "nsbox"
REPO = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(REPO, "examples", "agent_session.py")
REGION_MESSAGE = ("This network policy is not supported in region 'us-east-1'; it is supported "
                  "only in nl-north-1. Pass network=Network.all() or a supported region.")


class Dirs:
    """Private state/cache/data directories (as tests/lib/nsbox_test.py's Dirs)."""

    def __init__(self):
        self.base = tempfile.mkdtemp(prefix="nsbox-pytest-")
        os.chmod(self.base, 0o755)
        self.state = os.path.join(self.base, "state")
        self.cache = os.path.join(self.base, "cache")
        self.data = os.environ.get("NSBOX_TEST_DATA_DIR") or os.path.join(self.base, "data")
        for d in (self.state, self.cache, self.data):
            os.makedirs(d, exist_ok=True)

    def env(self):
        env = dict(os.environ)
        env.update(NSBOX_STATE_DIR=self.state, NSBOX_CACHE_DIR=self.cache,
                   NSBOX_DATA_DIR=self.data, NSBOX_BIN=NSBOX)
        return env

    def live_sandboxes(self):
        if not os.path.isdir(self.state):
            return []
        return sorted(n for n in os.listdir(self.state)
                      if len(n) == 12 and os.path.isdir(os.path.join(self.state, n)))

    def cleanup(self):
        shutil.rmtree(self.base, ignore_errors=True)


def setUpModule():
    if os.geteuid() == 0:
        return
    # As another user, sandboxes need delegated cgroups and user namespaces: probe once.
    dirs = Dirs()
    try:
        with nsbox.LocalSandbox(binary=NSBOX, nsbox_env=dirs.env()).open():
            pass
    except nsbox.SandboxError as e:
        raise unittest.SkipTest("cannot create sandboxes as uid %d here: %s" % (os.geteuid(), e))
    finally:
        dirs.cleanup()


def all_at_once(n, d):
    """A command that, run n times at once as `sh -c CMD I`, marks its arrival in directory d
    and waits (30 s at most) until all n have come, then prints I and how many came: commands
    that ran one after the other never all come. A barrier, not a time limit, however slow
    the machine (builtins only in the loop, but for sleep)."""
    return ("touch %s/$0; i=0; while set -- %s/*; [ $# -lt %d ] && [ $i -lt 300 ]; do "
            "sleep 0.1; i=$((i+1)); done; echo $0 $#") % (d, d, n)


def running(test, ps, what, seconds=30):
    """Wait until what shows in ps()'s output."""
    deadline = time.monotonic() + seconds
    while what not in ps():
        test.assertLess(time.monotonic(), deadline, "%r never started" % what)
        time.sleep(0.05)


class ClientTest(unittest.TestCase):
    """Base: a LocalSandbox factory bound to this class's directories, and a check that every
    test deleted what it created."""

    @classmethod
    def setUpClass(cls):
        cls.dirs = Dirs()

    @classmethod
    def tearDownClass(cls):
        cls.dirs.cleanup()

    def box(self, **kw):
        kw.setdefault("ttl_seconds", 600)  # a crashed test leaves nothing running for long
        return nsbox.LocalSandbox(binary=NSBOX, nsbox_env=self.dirs.env(), **kw)

    def tearDown(self):
        left = self.dirs.live_sandboxes()
        rt = runtime_dir(self.dirs.env())
        for sid in left:
            nsbox.Session(sid, rt).delete()
        self.assertEqual(left, [], "the test left sandboxes behind")


class AsyncClientTest(unittest.IsolatedAsyncioTestCase, ClientTest):
    pass


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
        # A sandbox takes 48 commands at once (docs/protocol.md "busy"); its 64 connections
        # were all taken by 64 execute()s, and the rest failed with "too many connections" or
        # a SandboxDeletedError of a live sandbox. Now the rest are sent again until they run,
        # and other calls get through meanwhile.
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
        # The execute under way said "the sandbox's supervisor closed the connection
        # (sandbox deleted?)": now it tells the supervisor's death (its lock is free) from a
        # hang-up, as the command line does.
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
            # cannot come in the same piece however slow the machine is (an emulated VM took
            # longer than the 0.4 s the process used to run for).
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
        # 10,000 long names are several replies (1 MiB each): list_files gave the first
        # reply's 6,000, in no useful order, without a word. Each part now goes on from where
        # the one before ended (the supervisor reads only its part each time); all of them,
        # sorted, come back, in the workspace's ext4 and in a tmpfs one alike.
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
