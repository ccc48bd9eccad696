"""Security: kernel counts a sandbox shares with the host: per user, and one for the host.

The kernel keeps some limits per user, not per cgroup: inotify instances and watches, queued
signals (RLIMIT_SIGPENDING), POSIX message queue bytes (RLIMIT_MSGQUEUE). A process in a user
namespace is charged in its own namespace and, up the chain, to the namespace's owner in the
parent one. A sandbox's user namespace owned by host root put what its processes took on root's
account: one sandbox holding all it could get left every root process of the host (and every
other sandbox) without inotify, rt signals or message queues. Each test here has a sandbox take
all it can of one count and hold it, then checks that host root, and a second sandbox, still get
theirs. The host's Linux AIO events (fs.aio-max-nr) are one pool for every process: a sandbox
may take none of them; its pseudo-terminals, one pool for every devpts instance: a sandbox may
take 128. docs/security.md, findings 17 to 19."""
import fcntl
import os
import resource
import struct
import subprocess
import sys
import unittest

from nsbox_test import NSBOX, UID_BASE, Dirs, children, in_a_terminal, is_root, run_nsbox

NS_GET_OWNER_UID = 0xB704

# Each attack prints "took N errno E" once it can take no more, then holds what it took until
# its stdin closes. Bounded: at most LIMIT of each.
PRELUDE = """
import ctypes, errno, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
LIMIT = int(sys.argv[1])
def hold(n, err):
    print("took %d errno %s" % (n, errno.errorcode.get(err, err)), flush=True)
    sys.stdin.read()
"""

INOTIFY_INSTANCES = PRELUDE + """
fds = []
while len(fds) < LIMIT:
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        break
    fds.append(fd)
hold(len(fds), ctypes.get_errno() if len(fds) < LIMIT else 0)
"""

# Watches are counted per (instance, inode): 64 instances over enough files in /tmp.
INOTIFY_WATCHES = PRELUDE + """
os.chdir("/tmp")
per = LIMIT // 64 + 1
for i in range(per):
    open("f%d" % i, "w").close()
n, err = 0, 0
for k in range(64):
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        err = ctypes.get_errno()
        break
    for i in range(per):
        if libc.inotify_add_watch(fd, b"f%d" % i, 0x2) < 0:
            err = ctypes.get_errno()
            break
        n += 1
    if err or n >= LIMIT:
        break
hold(n, err)
"""

SIGQUEUE = PRELUDE + """
class sigval(ctypes.Union):
    _fields_ = [("i", ctypes.c_int), ("p", ctypes.c_void_p)]
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
n = 0
while n < LIMIT and libc.sigqueue(os.getpid(), signal.SIGRTMIN, sigval(0)) == 0:
    n += 1
hold(n, ctypes.get_errno() if n < LIMIT else 0)
"""

# 10 messages of 8 KiB each: about 80 KiB of RLIMIT_MSGQUEUE per queue.
MQUEUES = PRELUDE + """
class attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long),
                ("msgsize", ctypes.c_long), ("cur", ctypes.c_long), ("pad", ctypes.c_long * 4)]
n = 0
while n < LIMIT:
    a = attr(0, 10, 8192, 0)
    if libc.mq_open(b"/q%d" % n, os.O_CREAT | os.O_RDWR, 0o600, ctypes.byref(a)) < 0:
        break
    n += 1
hold(n, ctypes.get_errno() if n < LIMIT else 0)
"""

# Linux AIO events: one pool for the whole host (fs.aio-max-nr), taken in halving requests.
AIO_EVENTS = PRELUDE + """
n, err, ctxs = 0, 0, []
want = LIMIT
while want and n < LIMIT:
    ctx = ctypes.c_ulong(0)
    if libc.syscall(206, want, ctypes.byref(ctx)) == 0:  # io_setup
        ctxs.append(ctx)
        n += want
    else:
        err = ctypes.get_errno()
        if err != errno.EAGAIN:
            break
        want //= 2
hold(n, err)
"""

# Pseudo-terminals: every devpts instance draws on one pool of the host's.
PTYS = PRELUDE + """
fds, err = [], 0
while len(fds) < LIMIT:
    try:
        fds.append(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
    except OSError as e:
        err = e.errno
        break
hold(len(fds), err)
"""

# What the host (or a second sandbox) tries once: prints "ok" or the errno's name.
PROBES = {
    "inotify_instance": """
fd = libc.inotify_init1(os.O_CLOEXEC)
print("ok" if fd >= 0 else errno.errorcode[ctypes.get_errno()])
""",
    "inotify_watch": """
fd = libc.inotify_init1(os.O_CLOEXEC)
r = fd if fd < 0 else libc.inotify_add_watch(fd, b"/", 0x2)
print("ok" if r >= 0 else errno.errorcode[ctypes.get_errno()])
""",
    "sigqueue": """
class sigval(ctypes.Union):
    _fields_ = [("i", ctypes.c_int), ("p", ctypes.c_void_p)]
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
r = libc.sigqueue(os.getpid(), signal.SIGRTMIN, sigval(0))
print("ok" if r == 0 else errno.errorcode[ctypes.get_errno()])
""",
    "aio": """
ctx = ctypes.c_ulong(0)
r = libc.syscall(206, 128, ctypes.byref(ctx))
print("ok" if r == 0 else errno.errorcode[ctypes.get_errno()])
""",
    "pty": """
try:
    os.close(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
    print("ok")
except OSError as e:
    print(errno.errorcode[e.errno])
""",
    # in an ipc namespace of its own (host side: unshare --ipc): nothing is left in the host's
    "mqueue": """
class attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long),
                ("msgsize", ctypes.c_long), ("cur", ctypes.c_long), ("pad", ctypes.c_long * 4)]
a = attr(0, 10, 8192, 0)
r = libc.mq_open(b"/probe", os.O_CREAT | os.O_RDWR, 0o600, ctypes.byref(a))
print("ok" if r >= 0 else errno.errorcode[ctypes.get_errno()])
""",
}
PROBE_PRELUDE = "import ctypes, errno, os, signal\nlibc = ctypes.CDLL(None, use_errno=True)\n"


def setUpModule():
    if not is_root():
        raise unittest.SkipTest("these tests run nsbox as root (a user's sandboxes are charged "
                                "to that user, as the user's own processes are)")


def host_probe(kind):
    argv = [sys.executable, "-c", PROBE_PRELUDE + PROBES[kind]]
    if kind == "mqueue":
        argv = ["unshare", "--ipc"] + argv
    return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()


class KernelCounts(unittest.TestCase):
    def setUp(self):
        self.dirs = Dirs()
        self.addCleanup(self.dirs.cleanup)

    def sandbox_probe(self, kind):
        r = run_nsbox(["run", "--", "python3", "-c", PROBE_PRELUDE + PROBES[kind]], self.dirs,
                      timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.decode().strip()

    def hold(self, script, limit, *prefix):
        """The attack in a sandbox (nsbox run, or prefix: an exec in a persistent one), once it
        holds all it could take: the process and its "took N errno E" line."""
        argv = [NSBOX] + list(prefix or ["run", "--instance-type", "small"])
        p = subprocess.Popen(argv + ["--", "python3", "-c", script, str(limit)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=self.dirs.env())
        self.addCleanup(p.wait, 60)
        self.addCleanup(p.stdin.close)
        line = p.stdout.readline().strip()
        self.assertTrue(line.startswith("took "), (line, p.stderr.read() if p.poll() else ""))
        return p, line

    def attack(self, kind, script, limit, want_errno, *prefix):
        p, line = self.hold(script, limit, *prefix)
        # the attack reached the limit (not LIMIT, not some other failure)
        self.assertTrue(line.endswith("errno " + want_errno), line)
        self.assertEqual(host_probe(kind), "ok",
                         f"host root lost its {kind} to a sandbox that holds them ({line})")
        self.assertEqual(self.sandbox_probe(kind), "ok",
                         f"another sandbox lost its {kind} to one that holds them ({line})")
        p.stdin.close()
        self.assertEqual(p.wait(60), 0, p.stderr.read())

    def test_inotify_instances_held_by_a_sandbox_are_not_roots(self):
        # EMFILE is also the sandbox's own descriptor limit (4096): where the per-user count is
        # higher, the attack ends there and says nothing of whose count it took
        with open("/proc/sys/fs/inotify/max_user_instances") as f:
            if int(f.read()) >= 4000:
                self.skipTest("fs.inotify.max_user_instances is above a sandbox's descriptor "
                              "limit here: the per-user count cannot be reached from one")
        self.attack("inotify_instance", INOTIFY_INSTANCES, 100000, "EMFILE")

    def test_inotify_watches_held_by_a_sandbox_are_not_roots(self):
        with open("/proc/sys/fs/inotify/max_user_watches") as f:
            limit = int(f.read())
        if limit > 1100000:
            self.skipTest(f"max_user_watches is {limit}: too many watches to take in a test")
        self.attack("inotify_watch", INOTIFY_WATCHES, limit + 1000, "ENOSPC")

    def test_queued_signals_held_by_a_sandbox_are_not_roots(self):
        limit = resource.getrlimit(resource.RLIMIT_SIGPENDING)[0]
        if limit == resource.RLIM_INFINITY or limit > 1100000:
            self.skipTest(f"RLIMIT_SIGPENDING is {limit}: too many signals to queue in a test")
        self.attack("sigqueue", SIGQUEUE, limit + 1000, "EAGAIN")

    def test_message_queues_held_by_a_sandbox_are_not_roots(self):
        self.attack("mqueue", MQUEUES, 10000, "EMFILE")

    def test_the_hosts_aio_events_cannot_be_taken(self):
        # Not a per-user count: the host has one pool, so the sandbox may take none of it
        # (io_setup is ENOSYS inside, as on a kernel without AIO).
        with open("/proc/sys/fs/aio-max-nr") as f:
            pool = int(f.read())
        p, line = self.hold(AIO_EVENTS, 2 * pool)
        self.assertEqual(host_probe("aio"), "ok", f"the sandbox took the host's AIO ({line})")
        self.assertEqual(line, "took 0 errno ENOSYS")
        p.stdin.close()
        self.assertEqual(p.wait(60), 0, p.stderr.read())

    def test_pseudo_terminals_held_by_a_sandbox_leave_the_others_theirs(self):
        # Not per user: one pool for every devpts instance but the host's own (kernel.pty.max
        # less kernel.pty.reserve). A sandbox has at most 128 of it.
        p, line = self.hold(PTYS, 5000)
        self.assertEqual(self.sandbox_probe("pty"), "ok",
                         f"another sandbox lost its pseudo-terminals to one that holds them "
                         f"({line})")
        self.assertEqual(line, "took 128 errno ENOSPC")
        p.stdin.close()
        self.assertEqual(p.wait(60), 0, p.stderr.read())

    def test_exec_t_past_the_bound_says_which(self):
        # the sandbox's 128 held, `exec -t` names the bound and the way out, not only ENOSPC's
        # "No space left on device", which reads as a full disk
        r = run_nsbox(["create", "--ttl", "120"], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        self.addCleanup(run_nsbox, ["rm", sid], self.dirs)
        p, line = self.hold(PTYS, 5000, "exec", "-i", sid)
        self.assertEqual(line, "took 128 errno ENOSPC")
        code, out, _, _ = in_a_terminal(["exec", "-t", sid, "--", "true"], self.dirs)
        self.assertEqual(code, 125, out)
        self.assertIn(b"cannot make a pseudo-terminal: none left (a sandbox has at most 128 at "
                      b"once", out)
        p.stdin.close()
        self.assertEqual(p.wait(60), 0, p.stderr.read())

    def test_inotify_instances_held_by_a_persistent_sandbox_are_not_roots(self):
        r = run_nsbox(["create", "--ttl", "120"], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        self.addCleanup(run_nsbox, ["rm", sid], self.dirs)
        self.attack("inotify_instance", INOTIFY_INSTANCES, 100000, "EMFILE", "exec", "-i", sid)

    def test_the_user_namespace_is_owned_by_the_sandboxs_own_id(self):
        p, _ = self.hold(INOTIFY_INSTANCES, 1)
        todo, uid = [p.pid], None
        while todo and uid is None:  # the command: below nsbox, the one running as appuser
            pid = todo.pop()
            todo += children(pid)
            with open(f"/proc/{pid}/status") as f:
                uid = int([ln for ln in f if ln.startswith("Uid:")][0].split()[1])
            uid = uid if uid >= UID_BASE + 1000 else None
        self.assertIsNotNone(uid, "no process of the sandbox below nsbox")
        fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
        try:
            owner = struct.unpack("I", fcntl.ioctl(fd, NS_GET_OWNER_UID, b"\0" * 4))[0]
        finally:
            os.close(fd)
        base = uid - 1000  # appuser is sandbox id 1000
        self.assertEqual(owner, base + 65535, "not the last id of the sandbox's own range")
        p.stdin.close()
        self.assertEqual(p.wait(60), 0)


if __name__ == "__main__":
    unittest.main()
