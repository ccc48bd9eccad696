"""Helpers shared by the end-to-end and security tests: run the real nsbox binary, as root or
as an unprivileged test user, each test with its own state and cache directories."""
import atexit
import contextlib
import fcntl
import json
import os
import pwd
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
import unittest

import leakwatch

NSBOX = os.environ.get("NSBOX_BIN") or shutil.which("nsbox") or "nsbox"
SOURCE_DIR = os.environ.get("NSBOX_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TEST_USER = "nsbox-test"
UID_BASE = 2000000000


def is_root():
    return os.geteuid() == 0


_reachable = []


def reachable_nsbox():
    """The nsbox binary at a path every user can execute, for tests that run it as another
    user: the build tree may be below /root (mode 0700). A copy in a directory of its own, made
    once per test process and removed when it exits."""
    if not _reachable:
        d = tempfile.mkdtemp(prefix="nsbox-bin-")
        atexit.register(shutil.rmtree, d, True)
        os.chmod(d, 0o755)
        path = os.path.join(d, "nsbox")
        shutil.copy(NSBOX, path)
        os.chmod(path, 0o755)
        helper = os.path.join(os.path.dirname(NSBOX), "nsbox-egress")  # run from beside nsbox
        if os.path.exists(helper):
            shutil.copy(helper, d)
            os.chmod(os.path.join(d, "nsbox-egress"), 0o755)
        _reachable.append(path)
    return _reachable[0]


def ensure_test_user():
    """An unprivileged user with a home directory (created once, never deleted: other runs may
    use it)."""
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        pass
    if not is_root():
        raise unittest.SkipTest("creating the unprivileged test user needs root")
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", TEST_USER], check=True)
    return pwd.getpwnam(TEST_USER)


def no_pool_env(base):
    """The env that selects a config file (written in base) with the warm pool off.

    By default nsbox keeps sandboxes warm once runs of the same settings repeat
    (docs/pool.md, "auto"): they would outlive a test that ran twice, whose directories are
    then removed, and count as leftovers in the next. Tests of the pool choose their own."""
    import json
    path = os.path.join(base, "no-pool.json")
    if not os.path.exists(path):
        with open(path, "w") as f:
            json.dump({"pool": {"size": 0}}, f)
        os.chmod(path, 0o644)
    return {"NSBOX_CONFIG": path}


class Dirs:
    """Private state/cache/data directories for one test, removed afterwards (first its pool,
    if the test made one)."""

    def __init__(self, owner=None):
        self.owner = owner
        self.base = tempfile.mkdtemp(prefix="nsbox-test-")
        os.chmod(self.base, 0o755)
        self.state = os.path.join(self.base, "state")
        self.cache = os.path.join(self.base, "cache")
        self.data = os.environ.get("NSBOX_TEST_DATA_DIR") or os.path.join(self.base, "data")
        for d in (self.state, self.cache):
            os.makedirs(d)
            if owner is not None:
                os.chown(d, owner.pw_uid, owner.pw_gid)
        if not os.environ.get("NSBOX_TEST_DATA_DIR"):
            os.makedirs(self.data)
            if owner is not None:
                os.chown(self.data, owner.pw_uid, owner.pw_gid)

    def env(self, extra=None):
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "NSBOX_STATE_DIR": self.state,
            "NSBOX_CACHE_DIR": self.cache,
            "NSBOX_DATA_DIR": self.data,
            "HOSTENV_SECRET": "must-not-leak",
        }
        env.update(no_pool_env(self.base))
        if extra:
            env.update(extra)
        return env

    def live_ids(self):
        """Ids of the sandboxes whose state directories are here (live, or left for gc)."""
        return [n for n in os.listdir(self.state) if len(n) == 12]

    def leftovers(self):
        """Everything a finished sandbox could have left in our directories."""
        out = []
        for d in (self.state, self.cache):
            for name in os.listdir(d):
                # shared, not a sandbox's: uid slot locks; empty-filesystem templates; the
                # bounded log of deletions (docs/protocol.md); when create's gc last ran; the
                # one lock mark every state directory links to
                if name not in ("uids", ".workspace-templates", "pool", "tombstones",
                                "gc.stamp", "lock-mark"):
                    out.append(os.path.join(d, name))
        # the pool's directory: its waiting sandboxes' entries are leftovers; the default
        # mode's notes of past runs (<key>.seen, docs/pool.md) and fillers' locks are not
        pool = os.path.join(self.state, "pool")
        if os.path.isdir(pool):
            out += [os.path.join(pool, n) for n in os.listdir(pool)
                    if not n.endswith((".seen", ".failed", ".lock")) and n != ".drained"]
        return out

    def cleanup(self):
        def nsbox(args, timeout):
            # as the owner: root refuses directories another user can write (docs/security.md)
            cmd, env = nsbox_command(args, self, self.owner)
            subprocess.run(cmd, env=env, capture_output=True, timeout=timeout)
        if os.path.isdir(os.path.join(self.state, "pool")):
            nsbox(["pool", "drain"], 60)
        # A test may end with a supervisor it killed and no gc after it (the gc tests' last
        # step), or fail with sandboxes it never got the ids of: their cgroups, loop devices,
        # mounts and supervisors are found through the state directory removed below, and
        # were left on the machine for good.
        leakwatch.note_sandbox_ids(self.state, self.cache)  # the runner's report, before they go
        ids = self.live_ids()
        if ids:
            nsbox(["rm"] + ids, 120)
            nsbox(["gc"], 60)
        shutil.rmtree(self.base, ignore_errors=True)


def cgroup_leftovers(sandbox_id=None):
    """nsbox-* cgroup directories below any hierarchy (v1 and v2)."""
    found = []
    pattern = "nsbox-" + (sandbox_id or "")
    for top, dirs, _ in os.walk("/sys/fs/cgroup"):
        for d in dirs:
            if d.startswith(pattern) and len(d) == len("nsbox-") + 12:
                found.append(os.path.join(top, d))
        # cgroup trees are shallow here; do not wander too deep
        if top.count("/") > 8:
            dirs[:] = []
    return found


# cgroup v2 only (the unified hierarchy at /sys/fs/cgroup, as on most machines and in the test
# VM of tests/vm), else v1 hierarchies per controller (this project's CI host).
CGROUP_V2_ONLY = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
# v1 hierarchies for memory and pids, what the host-side checks of v1 need
CGROUP_V1 = os.path.isdir("/sys/fs/cgroup/memory") and os.path.isdir("/sys/fs/cgroup/pids")


def cgroup_dir(controller, path=""):
    """The directory of cgroup path (from the hierarchy's root) in the hierarchy that has
    controller: the one v2 hierarchy, or the controller's v1 one."""
    top = "/sys/fs/cgroup" if CGROUP_V2_ONLY else f"/sys/fs/cgroup/{controller}"
    return os.path.join(top, path.lstrip("/")) if path.strip("/") else top


def cgroup_read(controller, path, name):
    """The stripped text of file name of cgroup path (cgroup_dir)."""
    with open(os.path.join(cgroup_dir(controller, path), name)) as f:
        return f.read().strip()


def rmdir_cgroup_tree(path):
    """Remove cgroup path (from each hierarchy's root) and what is below it, children first, in
    every hierarchy (rmdir_cgroups)."""
    roots = ["/sys/fs/cgroup"] if CGROUP_V2_ONLY else [
        os.path.join("/sys/fs/cgroup", h) for h in os.listdir("/sys/fs/cgroup")
        if not os.path.islink(os.path.join("/sys/fs/cgroup", h))]
    found = []
    for r in roots:
        found += [w[0] for w in os.walk(os.path.join(r, path.lstrip("/")))]
    rmdir_cgroups(sorted(found, key=lambda d: -d.count("/")))


def sandbox_cgroup_file(sid, controller, v1_name, v2_name):
    """The stripped text of a file of sandbox sid's cgroup, None when there is none: v1_name in
    the controller's v1 hierarchy, or v2_name in its one v2 cgroup."""
    top_dir = cgroup_dir(controller)
    name = v2_name if CGROUP_V2_ONLY else v1_name
    for top, dirs, files in os.walk(top_dir):
        if os.path.basename(top) == "nsbox-" + sid and name in files:
            try:
                with open(os.path.join(top, name)) as f:
                    return f.read().strip()
            except OSError:
                return None
        if top.count("/") > 10:
            dirs[:] = []
    return None


def sandbox_cpu_usage_ns(sid):
    """CPU time the sandbox's processes used, in ns (v1 cpuacct.usage, v2 cpu.stat), or None."""
    text = sandbox_cgroup_file(sid, "cpuacct", "cpuacct.usage", "cpu.stat")
    if text is None:
        return None
    if not CGROUP_V2_ONLY:
        return int(text)
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k == "usage_usec":
            return int(v) * 1000
    return None


def stat_fields(pid):
    """The fields of /proc/PID/stat after the command's name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def proc_state(pid):
    """What a process is doing, for a finding: its state, where it sleeps in the kernel, and
    the top of its kernel stack (root only)."""
    fields = stat_fields(pid)
    parts = ["state " + fields[0]] if fields else []
    for name in ("wchan", "stack"):
        try:
            with open(f"/proc/{pid}/{name}") as f:
                text = f.read()
        except OSError:
            continue
        if name == "stack":
            text = " < ".join(line.split("] ", 1)[-1].split("+")[0]
                              for line in text.splitlines()[:6])
        parts.append(text)
    return "; ".join(parts) or "gone"


def children(pid):
    """The pids of pid's children."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        r = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True)
        return [int(x) for x in r.stdout.split()]


def tree_state(pid):
    """pid and every process below it, a line each: pid, name and proc_state, and each other
    thread's; for the message of a command that did not end (where each of them waits)."""
    lines, todo = [], [(pid, 0)]
    while todo:
        p, depth = todo.pop()
        try:
            with open(f"/proc/{p}/comm") as f:
                name = f.read().strip()
            tids = sorted(int(t) for t in os.listdir(f"/proc/{p}/task"))
        except OSError:
            continue
        lines.append("  " * depth + f"{p} {name}: {proc_state(p)}")
        lines += ["  " * depth + f"  thread {t}: {proc_state(f'{p}/task/{t}')}"
                  for t in tids if t != p]
        todo += [(c, depth + 1) for c in reversed(children(p))]
    return "\n".join(lines)


def nsbox_command(args, dirs, user=None, extra_env=None, wrap=None):
    """The argv and environment run_nsbox uses: nsbox with args, as root or as `user` (a pwd
    entry) via setpriv, inside wrap (a delegation's). For a Popen, or an environment to edit.
    setpriv and the wraps exec, so the process's pid ends up being nsbox's."""
    cmd = [NSBOX] + list(args)
    if user is not None:
        cmd = ["setpriv", "--reuid", str(user.pw_uid), "--regid", str(user.pw_gid),
               "--clear-groups", "--", reachable_nsbox()] + list(args)
    if wrap:
        cmd = wrap(cmd)
    env = dirs.env(extra_env)
    if user is not None:
        env["HOME"] = user.pw_dir
    return cmd, env


def run_nsbox(args, dirs, user=None, input=None, timeout=60, extra_env=None, pass_fds=(),
              check=False, wrap=None):
    """Run nsbox with args; as root, or as `user` (a pwd entry) via setpriv."""
    cmd, env = nsbox_command(args, dirs, user, extra_env, wrap)
    p = subprocess.Popen(cmd, stdin=None if input is None else subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         pass_fds=pass_fds)
    try:
        out, err = p.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        # where it waits, for the failure's message (a hang seen once in CI is otherwise lost)
        state = tree_state(p.pid)
        p.kill()
        try:  # what it left running may hold the pipes (subprocess.run only waits)
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.wait()
            err = b"(its output pipes stayed open)"
        raise AssertionError(f"nsbox {args} did not end within {timeout} s; stderr so far: "
                             f"{err.decode(errors='replace')!r}; its processes then:\n{state}")
    r = subprocess.CompletedProcess(cmd, p.returncode, out, err)
    if check and r.returncode != 0:
        raise AssertionError(f"nsbox {args} failed ({r.returncode}): {r.stderr.decode()}")
    return r


def rmdir_cgroups(paths):
    """Remove test-made cgroup directories, children first, waiting up to 2.5 s each for the
    processes in them to be gone."""
    for p in paths:
        for _ in range(50):
            try:
                os.rmdir(p)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)


class V1Delegation:
    """cgroup v1 delegation for the unprivileged test user: one cgroup per controller below this
    process's own, owned by the user, as systemd's Delegate=yes would give on v2. nsbox run as
    that user then creates its sandboxes' cgroups inside it."""

    CONTROLLERS = ("memory", "cpu", "pids", "freezer", "cpuacct")

    def __init__(self, user):
        self.paths = []
        own = {}
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                for c in ctrls.split(","):
                    own[c] = path
        name = f"nsbox-test-deleg-{os.getpid()}"
        for c in self.CONTROLLERS:
            root = f"/sys/fs/cgroup/{c}"
            if not os.path.isdir(root) or c not in own:
                continue
            p = os.path.join(root + own[c], name)
            os.makedirs(p, exist_ok=True)
            for entry in ["", "cgroup.procs", "tasks"]:
                target = os.path.join(p, entry) if entry else p
                if os.path.exists(target):
                    os.chown(target, user.pw_uid, user.pw_gid)
            self.paths.append(p)

    def wrap(self, cmd):
        joins = " ".join(f"echo $$ > {p}/cgroup.procs;" for p in self.paths)
        return ["sh", "-c", joins + ' exec "$@"', "sh"] + cmd

    def cleanup(self):
        rmdir_cgroups(self.paths)


class V2Delegation:
    """cgroup v2 delegation for the unprivileged test user, as systemd's Delegate=yes makes it
    and docs/cgroups.md's recipe uses it: a cgroup below the root whose directory,
    cgroup.procs, cgroup.subtree_control and cgroup.threads belong to the user, with memory, cpu
    and pids enabled for it; the caller is moved into a leaf of it ("shell"), so that the
    delegated cgroup holds no process (the no-internal-process rule), and NSBOX_CGROUP_PARENT
    names it."""

    def __init__(self, user):
        self.rel = f"/nsbox-test-deleg-{os.getpid()}"
        self.path = "/sys/fs/cgroup" + self.rel
        with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as f:
            f.write("+memory +cpu +pids")
        os.makedirs(os.path.join(self.path, "shell"), exist_ok=True)
        for entry in ("", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads", "shell",
                      "shell/cgroup.procs"):
            os.chown(os.path.join(self.path, entry), user.pw_uid, user.pw_gid)

    def wrap(self, cmd):
        return ["sh", "-c", f"echo $$ > {self.path}/shell/cgroup.procs; "
                f"export NSBOX_CGROUP_PARENT={self.rel}; " + 'exec "$@"', "sh"] + cmd

    def cleanup(self):
        rmdir_cgroups([os.path.join(self.path, "shell"), self.path])


def delegation(user):
    """The user's delegated cgroup(s) on this machine (V1Delegation or V2Delegation), or None
    when it has neither v1 memory and pids hierarchies nor cgroup v2 alone."""
    if CGROUP_V1:
        return V1Delegation(user)
    if CGROUP_V2_ONLY:
        return V2Delegation(user)
    return None


class AsTestUser(unittest.TestCase):
    """Tests that run nsbox as the unprivileged test user, in its delegated cgroup(s), each
    with private directories the user owns."""

    @classmethod
    def setUpClass(cls):
        cls.user = ensure_test_user()
        cls.deleg = delegation(cls.user)

    @classmethod
    def tearDownClass(cls):
        cls.deleg.cleanup()

    def setUp(self):
        self.dirs = Dirs(owner=self.user)
        self.addCleanup(self.dirs.cleanup)

    def run_as_user(self, args, delegated=True, **kw):
        return run_nsbox(args, self.dirs, user=self.user,
                         wrap=self.deleg.wrap if delegated else None, **kw)


@contextlib.contextmanager
def fake_supervisor(state, sid, dies):
    """A sandbox sid in the runtime directory state served by a fake supervisor: its directory
    locked as a live supervisor's is, and a ctl socket whose connections are read and closed
    without an answer. With dies, the first one ends it as a death does: the listener closes
    too, while the lock stays held (as by a gc removing the sandbox). Removed at the end."""
    d = os.path.join(state, sid)
    os.makedirs(d, 0o700)
    lock = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    t = None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        srv.bind(os.path.join(d, "ctl"))
        srv.listen(8)

        def serve():
            while True:
                try:
                    c, _ = srv.accept()
                except OSError:
                    return
                c.recv(65536)
                if dies:
                    srv.close()
                c.close()
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        yield
    finally:
        try:
            srv.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        srv.close()
        if t is not None:
            t.join(5)
        os.close(lock)
        shutil.rmtree(d)


def fill_queue(path, limit=10000):
    """Connections to the listening socket path, made without waiting until its queue is full
    (its server stopped): the list, for the caller to close."""
    queued = []
    while len(queued) < limit:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.setblocking(False)
        try:
            c.connect(path)
        except BlockingIOError:
            c.close()
            return queued
        queued.append(c)
    for c in queued:
        c.close()
    raise AssertionError("the queue of %s never filled" % path)


def wait_for(pred, timeout=20.0, interval=0.02):
    """pred's first true value within timeout seconds, else its last (false) one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    return pred()


def signal_pending(pid, sig):
    """Whether signal sig waits for process pid to take it (nsbox reads its signals from a
    signalfd: one sent again before it took the first would be merged with it)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            masks = [int(l.split()[1], 16) for l in f if l.startswith(("SigPnd:", "ShdPnd:"))]
    except OSError:
        return False
    return any(m & (1 << (sig - 1)) for m in masks)


def sigkill_run_and_check_init_dies(test, p):
    """SIGKILL a running `nsbox run` (p, a Popen whose pid is nsbox's own) and check that its
    sandbox's init, nsbox's one child, dies with it."""
    try:
        kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True).stdout.split()
        test.assertEqual(len(kids), 1, kids)
        init = int(kids[0])
    finally:
        p.kill()
        p.wait()
    test.assertTrue(wait_for(lambda: not os.path.exists(f"/proc/{init}"), 10),
                    "sandbox init survived nsbox's death")


def loop_devices_under(prefix):
    """Loop devices whose backing file lies under prefix (nsbox's ext4 workspaces), as
    "/dev/loopN -> path"; a detached but not yet freed device shows its file as "(deleted)"."""
    found = []
    for name in sorted(os.listdir("/sys/block")):
        if not name.startswith("loop"):
            continue
        try:
            with open(f"/sys/block/{name}/loop/backing_file") as f:
                backing = f.read().strip()
        except OSError:
            continue  # not attached
        if backing.startswith(prefix):
            found.append(f"/dev/{name} -> {backing}")
    return found


def state_lock_free(dirs, sid):
    """Whether nobody holds sandbox sid's lock (a flock on its state directory): how nsbox
    tells a dead sandbox from a live one."""
    import fcntl
    fd = os.open(os.path.join(dirs.state, sid), os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


# Root's uid slot files (sandbox/state.h NSBOX_UID_SLOT_DIR): the machine's, whatever the state
# directory, so that no two sandboxes share host uids; other sandboxes hold theirs there too.
ROOT_UID_SLOTS = "/run/nsbox/uids"


def uid_slot_holders(d=ROOT_UID_SLOTS):
    """The slot files of uid slot directory d, each with the pid that holds its flock (as
    /proc/locks has it), or None when nobody does."""
    holders = {}  # MAJ:MIN:INODE (hex device numbers) -> pid
    with open("/proc/locks") as f:
        for line in f:
            fields = line.split()
            if "FLOCK" in fields and "->" not in fields:  # "->": a waiter, not a holder
                i = fields.index("FLOCK")
                holders[fields[i + 4]] = int(fields[i + 3])
    out = {}
    for name in os.listdir(d) if os.path.isdir(d) else []:
        try:
            st = os.stat(os.path.join(d, name))
        except FileNotFoundError:
            continue
        out[name] = holders.get(f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:"
                                f"{st.st_ino}")
    return out


def gc_just_ran(dirs):
    """Stamp the state directory as if create's gc had just run (it then skips its own for a
    second: <state>/gc.stamp)."""
    stamp = os.path.join(dirs.state, "gc.stamp")
    open(stamp, "a").close()
    os.utime(stamp)
    return stamp


def write_config(dirs, types, pool={"size": 0}):
    """A config file defining extra instance types and a pool section (the pool off unless
    given; None: no section, nsbox's default); returns the env that selects it."""
    import json
    path = os.path.join(dirs.base, "config.json")
    cfg = {"instance_types": types}
    if pool is not None:
        cfg["pool"] = pool
    with open(path, "w") as f:
        json.dump(cfg, f)
    os.chmod(path, 0o644)
    return {"NSBOX_CONFIG": path}


# ---- the control socket (docs/protocol.md), for tests that speak it directly -------------------

def control_socket(dirs, sid, timeout=20):
    """A connection to sandbox sid's control socket."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(os.path.join(dirs.state, sid, "ctl"))
    return s


def send_request(s, req, fds=()):
    """One framed request (a dict, or bytes as they are), with descriptors if any."""
    body = req if isinstance(req, bytes) else json.dumps({"v": 1, **req}).encode()
    s.sendmsg([struct.pack(">I", len(body)) + body],
              [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % len(fds), *fds))]
              if fds else [])


def recv_exactly(s, n):
    """n bytes from s: MSG_WAITALL alone is not enough on a socket with a timeout, which
    Python reads in non-blocking mode, so a large reply can come back cut."""
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


def recv_reply(s):
    """The next framed reply, as a dict."""
    head = recv_exactly(s, 4)
    return json.loads(recv_exactly(s, struct.unpack(">I", head)[0]))


# ---- the host's own descriptors as a command's stdio (docs/protocol.md) -------------------------

# What a command given the host's open file description of stdout and stderr could do to it:
# truncate it, clear its O_APPEND, seek to its start; then each stream says "inside N".
HOST_FD_HARM = """
import fcntl, os
for fd in (1, 2):
    for harm in (lambda: os.ftruncate(fd, 0), lambda: fcntl.fcntl(fd, fcntl.F_SETFL, 0),
                 lambda: os.lseek(fd, 0, os.SEEK_SET)):
        try:
            harm()
        except OSError:
            pass
    os.write(fd, b"inside %d\\n" % fd)
"""

# What a command given the host's terminal could change in it for after its end: the line
# discipline's settings (echo, canonical mode) and the window size, through 0, 1 and 2.
TERMINAL_HARM = """
import fcntl, struct, termios
for fd in (0, 1, 2):
    try:
        a = termios.tcgetattr(fd)
        a[3] &= ~(termios.ECHO | termios.ICANON)
        termios.tcsetattr(fd, termios.TCSANOW, a)
    except Exception:
        pass
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 5, 7, 0, 0))
    except Exception:
        pass
print("done")
"""

# What a command given the host's sockets as stdin and stdout could do with them: accept a
# connection waiting on a listening socket, send a datagram to another socket of the host's
# network namespace (an abstract unix name, argv[1]; a UDP socket would reach any address),
# read what was sent to the caller, shut the caller's socket down. It says "inside" first, then
# on stderr which of these worked.
SOCKET_HARM = """
import os, socket, sys
print("inside", flush=True)
done = []
for name, harm in (("accept", lambda: socket.socket(fileno=os.dup(0)).accept()),
                   ("sendto", lambda: socket.socket(fileno=os.dup(1)).sendto(
                       b"escaped", "\\0" + sys.argv[1])),
                   ("read", lambda: os.read(1, 100)),
                   ("shutdown", lambda: socket.socket(fileno=os.dup(1)).shutdown(
                       socket.SHUT_RDWR))):
    try:
        harm()
        done.append(name)
    except OSError:
        pass
sys.stderr.write("worked: %s\\n" % " ".join(done))
"""

# A command given the caller's pipes reopens them through /proc/self/fd: /dev/stdin and
# /dev/stdout must work, and the other way must not (writing into its stdin, which the host
# reads after it; reading its stdout, what others wrote for the caller's reader). It reads
# "first\n" from fd 0 and "second\n" through /dev/stdin, then says what it could do.
PIPE_HARM = """
import os
said = [os.read(0, 6), os.read(os.open("/dev/stdin", os.O_RDONLY), 7)]
fd = os.open("/dev/stdout", os.O_WRONLY)
os.write(fd, b"via /dev/stdout\\n")
for name, path, flags in (("write stdin", "/proc/self/fd/0", os.O_WRONLY),
                          ("read stdout", "/proc/self/fd/1", os.O_RDONLY | os.O_NONBLOCK)):
    try:
        fd = os.open(path, flags)
        if flags & os.O_WRONLY:
            os.write(fd, b"INJECTED\\n")
        said.append(name.encode())
    except OSError:
        pass
print(said, flush=True)
"""

# 5 MiB of numbered lines on stdout and 1 MiB on stderr, written in turns, then exit 3: what
# each stream must carry whole and in order. BIG_OUT and BIG_ERR are what they hold.
BIG_OUTPUT = """
import os, sys
o = memoryview(b"".join(b"%07d\\n" % i for i in range(655360)))
e = memoryview(b"".join(b"e%06d\\n" % i for i in range(131072)))
while o or e:
    if o:
        o = o[os.write(1, o[:70001]):]
    if e:
        e = e[os.write(2, e[:13001]):]
sys.exit(3)
"""
BIG_OUT = b"".join(b"%07d\n" % i for i in range(655360))
BIG_ERR = b"".join(b"e%06d\n" % i for i in range(131072))


@contextlib.contextmanager
def fds_at_3(fds):
    """A command line's prefix that runs the command with fds[i] as its descriptor 3 + i, as a
    caller hands descriptors on (runc's --preserve-fds), and nothing else above 2; and the
    descriptors to give subprocess's pass_fds for it. bash moves them, whose redirections take
    any number: the test's own may overlap 3, 4, ..."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in fds]
    try:
        redir = " ".join(f"{3 + i}>&{h} {h}>&-" for i, h in enumerate(high))
        yield ["bash", "-c", f'exec "$@" {redir}', "bash"], high
    finally:
        for h in high:
            os.close(h)


def pipe_files():
    """A new pipe as (reader, writer) unbuffered binary file objects."""
    r, w = os.pipe()
    return os.fdopen(r, "rb", buffering=0), os.fdopen(w, "wb", buffering=0)


def run_with_stdio(args, dirs, stdin=None, stdout=None, stderr=None, timeout=60, extra_env=None,
                   wrap=None):
    """nsbox with args, its stdio the given files or descriptors (None: /dev/null); returns its
    exit code. extra_env, wrap: as run_nsbox's."""
    cmd, env = nsbox_command(args, dirs, extra_env=extra_env, wrap=wrap)
    return subprocess.run(cmd, env=env, timeout=timeout,
                          stdin=subprocess.DEVNULL if stdin is None else stdin,
                          stdout=subprocess.DEVNULL if stdout is None else stdout,
                          stderr=subprocess.DEVNULL if stderr is None else stderr).returncode


class HostStdioChecks:
    """What run's and exec's tests of the host's stdio share (test_run.py, test_sessions.py):
    each check takes the nsbox arguments that come before the command (["run", "--"],
    ["exec", ID, "--"]) and, for the timeout, those with --timeout 1 in them. Needs self.dirs."""

    def paths(self, *names):
        return [os.path.join(self.dirs.base, n) for n in names]

    @staticmethod
    def read(path):
        with open(path, "rb") as f:
            return f.read()

    def check_appended_files_untouched(self, before):
        # { echo keep; nsbox ... -- CMD; echo after; } >> log, stdout and stderr each
        out, err = self.paths("out.log", "err.log")
        for path in (out, err):
            with open(path, "wb") as f:
                f.write(b"keep\n")
        with open(out, "ab") as o, open(err, "ab") as e:
            code = run_with_stdio(before + ["python3", "-c", HOST_FD_HARM], self.dirs,
                                  stdout=o, stderr=e)
            # the host's open file descriptions are as they were: still appending
            for f in (o, e):
                self.assertTrue(fcntl.fcntl(f.fileno(), fcntl.F_GETFL) & os.O_APPEND)
            o.write(b"after\n")
            e.write(b"after\n")
        self.assertEqual(code, 0)
        self.assertEqual(self.read(out), b"keep\ninside 1\nafter\n")
        self.assertEqual(self.read(err), b"keep\ninside 2\nafter\n")

    def check_output_to_files(self, before, before_with_timeout_1):
        out, err = self.paths("out", "err")
        with open(out, "wb") as o, open(err, "wb") as e:
            code = run_with_stdio(before + ["python3", "-c", BIG_OUTPUT], self.dirs,
                                  stdout=o, stderr=e)
        self.assertEqual(code, 3)
        got_out, got_err = self.read(out), self.read(err)
        self.assertEqual((len(got_out), len(got_err)), (len(BIG_OUT), len(BIG_ERR)))
        self.assertTrue(got_out == BIG_OUT and got_err == BIG_ERR, "output out of order")
        # what the command line says of its own comes after the command's output
        with open(out, "wb") as o, open(err, "wb") as e:
            code = run_with_stdio(before_with_timeout_1 + ["sh", "-c", "echo said >&2; sleep 30"],
                                  self.dirs, stdout=o, stderr=e)
        self.assertEqual(code, 124)
        self.assertRegex(self.read(err), rb"^said\nnsbox: timed out")

    def check_pipes_reopen_only_one_way(self, before, relayed=False):
        # The caller's own pipes as stdin and stdout; the test keeps both ends of each.
        # relayed (exec): the pipes are copied through nsbox's own, and what the caller wrote
        # to stdin while the command ran is taken whole (as ssh and docker exec -i do).
        (in_r, in_w), (out_r, out_w) = pipe_files(), pipe_files()
        with in_r, in_w, out_r, out_w:
            in_w.write(b"first\nsecond\nthird\n")
            code = run_with_stdio(before + ["python3", "-c", PIPE_HARM], self.dirs,
                                  stdin=in_r, stdout=out_w)
            in_w.close()
            out_w.close()
            left, out = in_r.read(), out_r.read()
        self.assertEqual(code, 0, out)
        self.assertEqual(out, b"via /dev/stdout\n[b'first\\n', b'second\\n']\n")
        # the host reads what it wrote and nsbox did not take, nothing injected
        self.assertEqual(left, b"" if relayed else b"third\n")

    def check_pipe_flags_stay_the_callers(self, before):
        # O_NONBLOCK set by the command on its stdin and stdout: on the caller's own open file
        # description it stayed after the command, and the caller's next writer or reader
        # failed with EAGAIN.
        (in_r, in_w), (out_r, out_w) = pipe_files(), pipe_files()
        with in_r, in_w, out_r, out_w:
            code = run_with_stdio(before + ["python3", "-c", "import os\nfor fd in (0, 1):\n"
                                            "    os.set_blocking(fd, False)\nprint('set')"],
                                  self.dirs, stdin=in_r, stdout=out_w)
            self.assertEqual(code, 0)
            for f in (in_r, in_w, out_r, out_w):
                self.assertFalse(fcntl.fcntl(f, fcntl.F_GETFL) & os.O_NONBLOCK, f)
            self.assertEqual(os.read(out_r.fileno(), 100), b"set\n")

    def check_named_fifo_not_reopened(self, before):
        # A host FIFO (mkfifo's 0644) as stdout: through /proc/self/fd/1 opened for reading the
        # command took what other writers put in it for the caller's reader.
        fifo, err = self.paths("fifo", "err")
        os.mkfifo(fifo, 0o644)
        fd = os.open(fifo, os.O_RDWR)  # the reader's end too: the test reads it back
        try:
            script = ("import os, sys\nprint('out', flush=True)\ntry:\n"
                      "    os.open('/proc/self/fd/1', os.O_RDONLY | os.O_NONBLOCK)\n"
                      "    sys.stderr.write('opened for reading\\n')\n"
                      "except OSError as e:\n    sys.stderr.write('refused\\n')\n")
            with open(err, "wb") as e:
                code = run_with_stdio(before + ["python3", "-c", script], self.dirs,
                                      stdout=fd, stderr=e)
            self.assertEqual(code, 0)
            self.assertEqual(self.read(err), b"refused\n")
            self.assertEqual(os.read(fd, 100), b"out\n")
        finally:
            os.close(fd)

    def check_stdin_file_others_may_write_is_kept(self, before):
        # A file read from, which others may write, in a directory only root may enter: the
        # command wrote it through /proc/self/fd/0 (a magic link skips the directories).
        (d,) = self.paths("private")
        os.mkdir(d, 0o700)
        path = os.path.join(d, "input.txt")
        with open(path, "wb") as f:
            f.write(b"original\n")
        os.chmod(path, 0o666)
        (out,) = self.paths("out")
        script = ("import os, sys\nsys.stdout.write(sys.stdin.read())\ntry:\n"
                  "    os.write(os.open('/proc/self/fd/0', os.O_WRONLY), b'overwritten\\n')\n"
                  "    print('written')\nexcept OSError:\n    print('refused')\n")
        with open(path, "rb") as i, open(out, "wb") as o:
            code = run_with_stdio(before + ["python3", "-c", script], self.dirs, stdin=i,
                                  stdout=o)
        self.assertEqual((code, self.read(out), self.read(path)),
                         (0, b"original\nrefused\n", b"original\n"))

    def check_sockets_not_handed_over(self, before):
        # stdin a listening unix socket with a client waiting, stdout one end of a datagram
        # socketpair (the host's network namespace): what SOCKET_HARM tries must all fail, and
        # the command's output still arrives, as datagrams, at the other end.
        import random
        name = "nsbox-test-%d-%x" % (os.getpid(), random.getrandbits(48))
        (err,) = self.paths("err")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as outside, \
                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener, \
                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as waiting:
            outside.bind("\0" + name + "-outside")
            listener.bind("\0" + name + "-listen")
            listener.listen(1)
            waiting.connect("\0" + name + "-listen")
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            with mine, theirs, open(err, "wb") as e:
                mine.send(b"secret")
                code = run_with_stdio(before + ["python3", "-c", SOCKET_HARM,
                                                name + "-outside"],
                                      self.dirs, stdin=listener, stdout=theirs, stderr=e)
                for s in (outside, mine, theirs, listener):
                    s.setblocking(False)
                self.assertEqual(self.read(err), b"worked: \n")
                self.assertEqual(code, 0)
                self.assertEqual(mine.recv(100), b"inside\n")
                self.assertEqual(theirs.recv(100), b"secret")  # still the caller's to read
                with self.assertRaises(BlockingIOError):
                    outside.recv(100)
                listener.accept()[0].close()  # the waiting client is still the caller's
                mine.send(b"after")  # not shut down
                self.assertEqual(theirs.recv(100), b"after")

    def check_one_file_keeps_the_order(self, before):
        # `> log 2>&1`: one file, so one pipe for both streams
        (path,) = self.paths("log")
        script = "for i in 1 2 3 4 5 6; do echo o$i; echo e$i >&2; done"
        with open(path, "wb") as f:
            code = run_with_stdio(before + ["sh", "-c", script], self.dirs, stdout=f, stderr=f)
        self.assertEqual(code, 0)
        self.assertEqual(self.read(path), b"".join(b"o%d\ne%d\n" % (i, i) for i in range(1, 7)))


def in_a_terminal(args, dirs, timeout=60, extra_env=None, wrap=None):
    """nsbox with args, its stdin, stdout and stderr a new pseudo-terminal (30 x 100) that is
    not its controlling one (extra_env and wrap as run_nsbox's). Returns (exit code, what it
    printed, (the terminal's settings, window size) before, and after)."""
    import select
    import termios
    master, slave = os.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))

        def state():
            return termios.tcgetattr(slave), fcntl.ioctl(slave, termios.TIOCGWINSZ, b"\0" * 8)
        before = state()
        code = run_with_stdio(args, dirs, slave, slave, slave, timeout, extra_env, wrap)
        after = state()
        out = b""
        while select.select([master], [], [], 0.2)[0]:
            chunk = os.read(master, 65536)
            if not chunk:
                break
            out += chunk
        return code, out, before, after
    finally:
        os.close(master)
        os.close(slave)


# CPython's own tests of users and groups (Debian's libpython3.11-testsuite, with Debian's
# python, not a pyenv one): chown to another user must fail with EPERM, setuid/setgid to nobody
# and setgroups with EPERM, never EINVAL (docs/decisions.md "Identity"). The full
# modules (python3 -m test test_os test_subprocess) take about 40 s either way; these are the
# tests of them that a sandbox of one mapped id failed.
CPYTHON = "/usr/bin/python3"
CPYTHON_ID_TESTS = ["-m", "test", "-v", "-m", "test_chown*", "-m", "test_user", "-m", "test_group",
                    "-m", "test_extra_groups", "test_os", "test_subprocess"]


def cpython_testsuite_missing():
    """Why CPython's id tests cannot run here, or None."""
    r = subprocess.run([CPYTHON, "-c", "import test.test_os, test.test_subprocess"],
                       capture_output=True)
    if r.returncode != 0:
        return (f"{CPYTHON} has no test suite (Debian's libpython3.11-testsuite): "
                f"{r.stderr[-200:]!r}")
    return None


def cpython_outcomes(stdout):
    """The per-test lines of a verbose `python3 -m test` run ("name (class) ... ok")."""
    return sorted(l for l in stdout.decode(errors="replace").splitlines() if " ... " in l)


def cpython_on_host(user):
    """CPython's id tests on the host as `user` (unprivileged), in /tmp."""
    return subprocess.run(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                           "--init-groups", "env", "-i", "HOME=/tmp", "PATH=/usr/bin:/bin",
                           "LANG=C.UTF-8", CPYTHON] + CPYTHON_ID_TESTS,
                          cwd="/tmp", capture_output=True, timeout=300)
