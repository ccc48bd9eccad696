"""What the tests of the nsbox Python client against real sandboxes share (test_client.py,
test_client_hooks_files.py): private directories, the probe that skips a module where sandboxes
cannot be made, and the base classes that check that every test left no sandbox behind."""
import os
import shutil
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # python/, so that the tested nsbox is this one
import nsbox  # noqa: E402
from nsbox._transport import runtime_dir  # noqa: E402

NSBOX = os.environ.get("NSBOX_BIN") or shutil.which("nsbox") or "nsbox"


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

