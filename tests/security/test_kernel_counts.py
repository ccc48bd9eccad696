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
take 128. The host's file table (fs.file-max): one count for every process of the host, which
no rlimit bounds for a sandbox (a mapping keeps its file past RLIMIT_NOFILE); root's nsbox makes
it larger than memory could fill, so that each sandbox's memory limit bounds its files.
docs/security.md, findings 17 to 19 and 22."""
import fcntl
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest

from nsbox_test import (CGROUP_V1, CGROUP_V2_ONLY, NSBOX, UID_BASE, AsTestUser, Dirs, children,
                        in_a_terminal, is_root, nsbox_command, run_nsbox)

ATTACK = os.path.join(os.environ.get("NSBOX_SECURITY_BIN_DIR", ""), "attack")

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


def file_nr():
    """The host's open files and its table's size (fs.file-nr's first and third fields)."""
    with open("/proc/sys/fs/file-nr") as f:
        nr, _, top = f.read().split()
    return int(nr), int(top)


def mem_total():
    with open("/proc/meminfo") as f:
        return int(next(ln for ln in f if ln.startswith("MemTotal:")).split()[1]) * 1024


# Another process of the host, not root (root's CAP_SYS_ADMIN passes a full table): the
# descriptors it opens, or the error that stopped it.
OPEN_1000 = """
import os
fds = []
try:
    for i in range(1000):
        fds.append(os.open("/dev/null", os.O_RDONLY))
    print("ok")
except OSError as e:
    print("%s after %d" % (e.strerror, len(fds)))
"""


class FileTable(unittest.TestCase):
    """The kernel's own table of open files, fs.file-max, is one count for the whole host:
    full, every process without CAP_SYS_ADMIN gets ENFILE. Its default is a tenth of the memory
    in KiB (2,466,239 on 24 GiB), while a `medium` sandbox may hold 1,024 processes of 4,096
    descriptors, files kept by mappings past that, and files in flight on unix sockets: its
    memory (232 bytes a descriptor, 403 a mapping) runs out long after the table did."""

    def setUp(self):
        if not os.access(ATTACK, os.X_OK):
            self.skipTest("the prober is not built (NSBOX_SECURITY_BIN_DIR)")
        self.dirs = Dirs()
        self.addCleanup(self.dirs.cleanup)
        self.ws = tempfile.mkdtemp(prefix="nsbox-filetable-")
        self.addCleanup(shutil.rmtree, self.ws, True)
        shutil.copy(ATTACK, self.ws)
        os.chmod(self.ws, 0o755)

    def test_a_sandbox_holding_all_the_files_it_can_leaves_the_host_its_table(self):
        mem = mem_total()
        default = mem // 1024 // 10  # the kernel's boot default for this memory
        # more than that table held, within what `medium` reaches by descriptors alone
        # (1,024 processes of 4,096, less init and what each keeps open)
        target = min(default + default // 10, 1000 * 4000)
        t = time.monotonic()
        p = subprocess.Popen([NSBOX, "run", "--instance-type", "medium", "--workspace", self.ws,
                              "--", "/workspace/attack", "holdfiles", str(target), "60000"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=self.dirs.env())
        self.addCleanup(p.wait, 120)
        self.addCleanup(p.stdin.close)
        line = p.stdout.readline()
        self.assertTrue(line.startswith("{"), (line, p.stderr.read() if p.poll() else ""))
        held = json.loads(line)
        took = time.monotonic() - t
        nr, top = file_nr()
        print(f"\n  files held by a medium sandbox: {held} in {took:.1f} s; host file-nr "
              f"{nr} of {top} (the kernel's default table here: {default})", file=sys.stderr)
        # the host's table is sized by memory: no count of files the sandbox could reach
        self.assertGreaterEqual(top, mem // 128, "fs.file-max is still one that files fill "
                                                 "before memory does")
        self.assertLess(nr, top // 2)
        # and the attack held what would have filled the kernel's default table (on a host
        # whose default is beyond `medium`'s descriptors, `large` would reach it: said, not run)
        self.assertEqual(held["opened"], target, held)
        if target > default:
            self.assertGreater(held["opened"] + held["mapped"], default, held)
        else:
            print(f"  the kernel's default table here ({default}) is beyond a medium sandbox's "
                  f"descriptors: not shown filled", file=sys.stderr)
        # a mapping keeps its file past RLIMIT_NOFILE: no rlimit bounds the files
        self.assertEqual((held["mapped"], held["map_errno"]), (60000, "none"), held)
        # in flight on unix sockets: bounded per user by RLIMIT_NOFILE (the sandbox's own uid)
        self.assertEqual(held["in_flight_errno"], "ETOOMANYREFS", held)
        self.assertLessEqual(held["in_flight"], 4096 + 2 * 253, held)
        # another process of the host, not root, and another sandbox still open files
        user = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                               sys.executable, "-c", OPEN_1000], capture_output=True, text=True,
                              timeout=30)
        self.assertEqual(user.stdout.strip(), "ok", user.stderr)
        r = run_nsbox(["run", "--", "python3", "-c", OPEN_1000], self.dirs, timeout=60)
        self.assertEqual((r.returncode, r.stdout.decode().strip()), (0, "ok"), r.stderr)
        p.stdin.close()
        self.assertEqual(p.wait(120), 0, p.stderr.read())


class FileTableRaised(unittest.TestCase):
    """What `nsbox info` says of a table sandboxes could fill, by who could raise it: root's
    nsbox where it can write the file, unless the config file says "keep"; not where
    /proc/sys is read-only (a container without userns-remap), where it said "nsbox raises it"
    all the same. The host's table is never touched: nsbox runs in a mount namespace of its own,
    where a file of the test's, holding a small table, is bound over /proc/sys/fs/file-max (no
    sandbox can be made there: a covered /proc cannot be mounted again, so the raise itself and
    its notes are tests/unit/test_filemax.c's)."""

    def setUp(self):
        self.dirs = Dirs()
        self.addCleanup(self.dirs.cleanup)
        self.fake = os.path.join(self.dirs.base, "file-max")
        with open(self.fake, "w") as f:
            f.write("1000\n")  # fewer files than any test machine's memory could hold

    def info_bound(self, read_only=False, extra_env=None):
        """nsbox info's file_table check with the test's file over fs.file-max."""
        script = 'mount --bind "$0" /proc/sys/fs/file-max'
        if read_only:
            script += " && mount -o remount,bind,ro /proc/sys/fs/file-max"
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            script + ' && exec "$@"', self.fake, NSBOX, "info", "--json"],
                           capture_output=True, text=True, env=self.dirs.env(extra_env),
                           timeout=60)
        return {c["name"]: c for c in json.loads(r.stdout)["checks"]}["file_table"]

    def test_writable_root_raises_it(self):
        c = self.info_bound()
        self.assertTrue(c["detail"].startswith("fs.file-max 1000 is fewer files"), c)
        self.assertIn("; nsbox raises it when it makes a sandbox", c["detail"])

    def test_read_only_proc_sys_is_not_raised(self):
        c = self.info_bound(read_only=True)
        self.assertIn("; nsbox cannot raise it here: /proc/sys/fs/file-max is not writable",
                      c["detail"])
        self.assertNotIn("nsbox raises it", c["detail"])
        self.assertEqual(c["fix"], "sysctl -w fs.file-max=9223372036854775807, and the same in "
                                   "a file of /etc/sysctl.d (what systemd sets at boot)")

    def test_the_config_file_keeps_it(self):
        config = os.path.join(self.dirs.base, "keep.json")
        with open(config, "w") as f:
            json.dump({"pool": {"size": 0}, "host": {"file_max": "keep"}}, f)
        c = self.info_bound(extra_env={"NSBOX_CONFIG": config})
        self.assertIn('; the config file\'s "host": {"file_max": "keep"} leaves it as it is',
                      c["detail"])
        self.assertNotIn("nsbox raises it", c["detail"])
        # the run itself, on this host's table: the option changes nothing else
        r = run_nsbox(["run", "--", "true"], self.dirs, extra_env={"NSBOX_CONFIG": config})
        self.assertEqual(r.returncode, 0, r.stderr)
        # a misspelt value stops a run, as any mistake in the file does
        with open(config, "w") as f:
            json.dump({"pool": {"size": 0}, "host": {"file_max": "kept"}}, f)
        r = run_nsbox(["run", "--", "true"], self.dirs, extra_env={"NSBOX_CONFIG": config})
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"key 'host.file_max': must be \"raise\"", r.stderr)


class CountsOfAnUnprivilegedUser(AsTestUser):
    """A sandbox of an unprivileged user runs as that user's host uid, in a user namespace the
    user owns: the kernel charges what it takes to the sandbox's namespace and, up the chain,
    to the user, whose other processes (an editor's file watchers, a desktop) share the rest.
    Its own namespace's inotify limits and its processes' signal and message queue limits are
    half the user's, so that one sandbox taking all it may leaves the user the other half."""

    @classmethod
    def setUpClass(cls):
        if not (CGROUP_V1 or CGROUP_V2_ONLY):
            raise unittest.SkipTest("cgroup delegation for the test user needs v1 memory and pids "
                                    "hierarchies, or cgroup v2 alone")
        super().setUpClass()

    def user_probe(self, code):
        r = subprocess.run(["setpriv", f"--reuid={self.user.pw_uid}",
                            f"--regid={self.user.pw_gid}", "--clear-groups", "--",
                            sys.executable, "-c", PROBE_PRELUDE + code], capture_output=True,
                           text=True, timeout=30)
        return r.stdout.strip() or r.stderr.strip()

    def attack(self, script, limit, share, want_errno, probe):
        cmd, env = nsbox_command(["run", "--instance-type", "small", "--", "python3", "-c",
                                  script, str(limit)], self.dirs, user=self.user,
                                 wrap=self.deleg.wrap)
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
        self.addCleanup(p.wait, 60)
        self.addCleanup(p.stdin.close)
        line = p.stdout.readline().strip()
        self.assertTrue(line.startswith("took "), (line, p.stderr.read() if p.poll() else ""))
        self.assertTrue(line.endswith("errno " + want_errno), line)
        self.assertEqual(self.user_probe(probe), "ok",
                         f"the user's own processes lost theirs to a sandbox ({line})")
        took = int(line.split()[1])
        print(f"\n  an unprivileged user's sandbox: {line} (its share: {share})", file=sys.stderr)
        self.assertLessEqual(took, share, line)
        self.assertGreater(took, 0, line)
        p.stdin.close()
        self.assertEqual(p.wait(60), 0, p.stderr.read())

    def test_inotify_instances_held_by_a_sandbox_leave_the_user_half(self):
        with open("/proc/sys/user/max_inotify_instances") as f:
            user_max = int(f.read())
        if user_max >= 4000:
            self.skipTest("max_user_instances is above a sandbox's descriptor limit here: the "
                          "attack would end at that limit, not at the user's")
        self.attack(INOTIFY_INSTANCES, 100000, user_max // 2, "EMFILE",
                    PROBES["inotify_instance"])

    def test_inotify_watches_held_by_a_sandbox_leave_the_user_half(self):
        with open("/proc/sys/user/max_inotify_watches") as f:
            user_max = int(f.read())
        if user_max > 1100000:
            self.skipTest(f"max_user_watches is {user_max}: too many watches to take in a test")
        self.attack(INOTIFY_WATCHES, user_max + 1000, user_max // 2, "ENOSPC",
                    PROBES["inotify_watch"])

    def test_queued_signals_held_by_a_sandbox_leave_the_user_half(self):
        limit = resource.getrlimit(resource.RLIMIT_SIGPENDING)[0]  # setpriv keeps ours
        if limit == resource.RLIM_INFINITY or limit > 1100000:
            self.skipTest(f"RLIMIT_SIGPENDING is {limit}: too many signals to queue in a test")
        self.attack(SIGQUEUE, limit + 1000, limit // 2, "EAGAIN", PROBES["sigqueue"])

    def test_message_queues_held_by_a_sandbox_leave_the_user_half(self):
        # the user's probe in the host's ipc namespace (an unprivileged user cannot make one
        # without a user namespace), under a name of its own, removed at once
        probe = PROBES["mqueue"].replace('b"/probe"', f'b"/nsbox-probe-{os.getpid()}"') + (
            f'libc.mq_unlink(b"/nsbox-probe-{os.getpid()}")\n')
        limit = resource.getrlimit(resource.RLIMIT_MSGQUEUE)[0]
        self.attack(MQUEUES, 10000, limit // 2 // 81920, "EMFILE", probe)


if __name__ == "__main__":
    unittest.main()
