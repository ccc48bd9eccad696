"""Security: nsbox run as root on a machine with other local users (docs/security.md, "Other
local users"). Root's state, data and cache directories hold what root trusts and writes: state
directories, control sockets, locks, images, workspace backing files and templates. Another
user who can write one of them, or a directory above it, can plant a symlink there, so that
root creates and removes files where the user chose, or a state directory or an image of the
user's making. As root, nsbox refuses such a directory, with the variable that fixes it; root's
default cache is below root's own home, whatever $HOME says (`sudo -E` keeps the caller's).

A user granted subordinate ids (/etc/subuid, /etc/subgid) can become them in a user namespace
of their own: had a root sandbox run as such ids, the user could signal its processes. Root's
sandboxes never take a uid slot whose ids are granted to anyone, and the files of root's OCI
images, which belong to the image ids just below those slots, are in directories closed to other
users: granted those ids, a user still cannot reach a shared layer to rewrite it.

A directory root gives as a sandbox's workspace may lie below one another user owns (a checkout
in the user's home): the user can swap a name on its path for a symlink at any moment, so what
nsbox checks must be what it binds.

A root sandbox's user namespace belongs to its slot's last id, which the launcher and the clone
hold as their effective and saved uid while it is made: a user watching /proc then must reach
neither them nor the sandbox's processes."""
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import unittest

import oci_images
from nsbox_test import NSBOX, Dirs, ensure_test_user, nsbox_command, run_nsbox
from swaprace import race_workspace_swap


@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
@unittest.skipUnless(os.geteuid() == 0, "the attack is on nsbox run as root by another user")
class UserAndRoot(unittest.TestCase):
    """The test user, the attacker, with a home directory of its own in the test's."""

    def setUp(self):
        self.user = ensure_test_user()
        self.dirs = Dirs()
        self.addCleanup(self.dirs.cleanup)
        self.tmp = tempfile.mkdtemp(prefix="nsbox-local-users-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        os.chmod(self.tmp, 0o711)  # the user passes through the test's directory, no more
        self.home = os.path.join(self.tmp, "home")  # the user's own
        os.makedirs(self.home)
        os.chown(self.home, self.user.pw_uid, self.user.pw_gid)


class DirectoriesAnotherUserCanWrite(UserAndRoot):
    def setUp(self):
        super().setUp()
        self.victim = os.path.join(self.tmp, "victim")  # root's, closed to others
        os.makedirs(self.victim, 0o700)

    def as_user(self, fn):
        pid = os.fork()
        if pid == 0:
            try:
                os.setgroups([])
                os.setgid(self.user.pw_gid)
                os.setuid(self.user.pw_uid)
                fn()
                os._exit(0)
            except BaseException:
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)

    def run_root(self, env, args=("run", "--", "true")):
        r = run_nsbox(list(args), self.dirs, extra_env=env)
        return r.returncode, r.stderr.decode()

    def assertRefused(self, rc, err, var, path):
        self.assertEqual(rc, 125, err)
        self.assertIn(f"{path} belongs to uid {self.user.pw_uid}", err)
        self.assertIn(f"set {var} to a directory only root can write", err)

    def run_root_home(self, env):
        """nsbox run as root with env, in a mount namespace of its own where root's home (the
        user database's) is a directory of the test's: what root's cache makes lands there,
        not in the machine's. rc, stderr and what root's cache directory then holds."""
        root_home = os.path.join(self.tmp, "root-home")
        os.makedirs(root_home, 0o700, exist_ok=True)
        cmd, full_env = nsbox_command(["run", "--", "true"], self.dirs, extra_env=env)
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            'mount --bind "$1" "$2" || exit 90; shift 2; exec "$@"', "sh",
                            root_home, pwd.getpwuid(0).pw_dir] + cmd,
                           env=full_env, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 90, r.stderr)
        cache = os.path.join(root_home, ".cache", "nsbox")
        return r.returncode, r.stderr, os.listdir(cache) if os.path.isdir(cache) else None

    def test_root_cache_ignores_the_callers_home_under_sudo_E(self):
        """`sudo -E nsbox run` keeps the caller's HOME (and XDG_CACHE_HOME). Had root's cache
        followed it ($HOME/.cache/nsbox, the user's to replace), a link there to a root-only
        directory would have made root create its workspace templates (and each sandbox's
        backing file) in it. Root's cache is below root's home, as `sudo` and root's login
        give it: the run works, and the user's home is left as it was."""
        def plant():
            os.makedirs(os.path.join(self.home, ".cache"))
            os.symlink(self.victim, os.path.join(self.home, ".cache", "nsbox"))
        self.as_user(plant)
        env = {"HOME": self.home, "XDG_CACHE_HOME": os.path.join(self.home, ".cache"),
               "NSBOX_CACHE_DIR": ""}
        rc, err, root_cache = self.run_root_home(env)
        self.assertEqual(rc, 0, err)
        self.assertEqual(os.listdir(self.victim), [], err)
        self.assertEqual(os.listdir(self.home), [".cache"])
        self.assertEqual(os.readlink(os.path.join(self.home, ".cache", "nsbox")), self.victim)
        self.assertTrue(root_cache, f"root's cache below its home is empty or missing: {err}")

    def test_root_cache_under_sudo_and_root_login_stays_in_roots_home(self):
        """`sudo` without -E and root's login set HOME to root's home: the cache is where it
        was, and NSBOX_CACHE_DIR still overrides it."""
        rc, err, root_cache = self.run_root_home({"HOME": pwd.getpwuid(0).pw_dir,
                                                  "NSBOX_CACHE_DIR": ""})
        self.assertEqual(rc, 0, err)
        self.assertTrue(root_cache, err)
        shutil.rmtree(os.path.join(self.tmp, "root-home", ".cache"))
        rc, err, root_cache = self.run_root_home({"HOME": self.home})
        self.assertEqual(rc, 0, err)
        self.assertIsNone(root_cache, err)
        self.assertNotEqual(os.listdir(self.dirs.cache), [], err)
        self.assertEqual(os.listdir(self.home), [])

    def test_each_directory_below_one_another_user_can_write_is_refused(self):
        """NSBOX_STATE_DIR, NSBOX_DATA_DIR and NSBOX_CACHE_DIR below the user's directory
        (a CI job's checkout, say): refused before anything is made there."""
        for var in ("NSBOX_STATE_DIR", "NSBOX_DATA_DIR", "NSBOX_CACHE_DIR"):
            with self.subTest(var=var):
                where = os.path.join(self.home, var.lower())
                rc, err = self.run_root({var: where})
                self.assertRefused(rc, err, var, self.home)
                self.assertFalse(os.path.lexists(where), err)

    def test_a_link_to_a_directory_another_user_can_write_is_refused(self):
        """Root's own link that leads below the user's directory: where it leads counts."""
        link = os.path.join(self.tmp, "state-link")
        os.symlink(os.path.join(self.home, "state"), link)
        rc, err = self.run_root({"NSBOX_STATE_DIR": link})
        self.assertRefused(rc, err, "NSBOX_STATE_DIR", self.home)
        self.assertFalse(os.path.lexists(os.path.join(self.home, "state")), err)

    def test_group_or_world_writable_directories_are_refused(self):
        for mode, gid, why in ((0o770, self.user.pw_gid, f"is writable by group {self.user.pw_gid}"),
                               (0o777, 0, "is writable by every user")):
            with self.subTest(mode=oct(mode)):
                d = os.path.join(self.tmp, "shared-%o" % mode)
                os.makedirs(d)
                os.chown(d, 0, gid)
                os.chmod(d, mode)
                rc, err = self.run_root({"NSBOX_DATA_DIR": os.path.join(d, "data")})
                self.assertEqual(rc, 125, err)
                self.assertIn(f"{d} {why} (mode {mode:04o})", err)
                self.assertEqual(os.listdir(d), [], err)

    def test_directories_only_root_can_write_work(self):
        """The control: root's own directories below the sticky /tmp (as every test's)."""
        rc, err = self.run_root({})
        self.assertEqual(rc, 0, err)
        self.assertEqual(stat.S_IMODE(os.stat(self.dirs.state).st_mode) & 0o022, 0)


class WorkspaceSwappedByAnotherUser(UserAndRoot):
    """`nsbox run --workspace HOME/a/proc` as root, where HOME is another user's. The user
    swaps `a` with a link to / (renameat2 RENAME_EXCHANGE, as fast as it can) while root makes
    sandboxes, so that the path leads now to the directory, now to the host's /proc, which a
    workspace may never be. Checked by path and bound by path again, a run whose check saw the
    directory and whose bind saw the link showed the sandbox the host's processes. Each run must
    bind the directory checked, or be refused in one line: never the host's /proc."""

    def race(self, owner, runs):
        run = lambda ws: run_nsbox(["run", "--workspace", ws, "--", "ls", "-a", "/workspace"],
                                   self.dirs)
        race_workspace_swap(self, self.home, owner, self.user, run, runs)
        self.assertEqual(self.dirs.live_ids(), [])

    def test_a_directory_of_roots_is_never_bound_from_the_swapped_path(self):
        """Root's directory is bound plainly (root is never mapped), by path in the sandbox's
        mount namespace: there it must be the inode checked, found with no symlink. (Bound by
        path as checked, about one run in five gave the sandbox the host's /proc.)"""
        self.race(pwd.getpwuid(0), runs=80)

    def test_a_directory_of_the_users_is_never_bound_from_the_swapped_path(self):
        """The user's directory is bound through an idmapped mount, cloned from the descriptor
        the checks ran on. (Before, it was opened by path again, and when that saw the link, the
        host's /proc, root's, was bound plainly by path once more: about one run in forty.)"""
        self.race(self.user, runs=240)


# Run by the test user: scans /proc for processes of nsbox's ids (a root sandbox's, and the
# clone in its owner window: real uid 0, effective and saved uid the slot's last id) and tries
# each as that user can: signal 0, /proc/PID/{environ,mem,root,cwd}, PTRACE_SEIZE (detached at
# once). Stops when STOP exists; writes what it saw to COUNTS after every scan.
REACHER = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
stop, counts = sys.argv[1:3]
base = int(sys.argv[3])
seen, window, hits = set(), set(), []
while not os.path.exists(stop):
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/status") as f:
                r, e, s = map(int, [l for l in f if l.startswith("Uid:")][0].split()[1:4])
        except (OSError, IndexError, ValueError):
            continue
        if max(r, e, s) < base:
            continue
        key = (pid, r, e, s)
        seen.add(key)
        if r == 0 and e >= base:
            window.add(key)
        try:
            os.kill(pid, 0)
            hits.append(f"signal {key}")
        except OSError:
            pass
        for what in ("environ", "mem", "root/.", "cwd/."):
            try:
                os.close(os.open(f"/proc/{pid}/{what}", os.O_RDONLY))
                hits.append(f"/proc/PID/{what} {key}")
            except OSError:
                pass
        if libc.ptrace(0x4206, pid, 0, 0) == 0:  # PTRACE_SEIZE
            hits.append(f"ptrace {key}")
            libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
    with open(counts + ".new", "w") as f:
        json.dump({"seen": len(seen), "window": len(window), "hits": hits[:20]}, f)
    os.rename(counts + ".new", counts)
"""


class RootSandboxesBeingMade(UserAndRoot):
    """A root sandbox's user namespace belongs to its slot's last id: the launcher takes that id
    as its effective and saved uid (its real uid stays 0) for the clone, and the clone keeps it
    until it becomes its own. A user granted nothing, watching /proc while root makes
    sandboxes, must reach none of those processes in that window, nor the sandboxes' own: not
    signal them, trace them, or open what /proc holds of them."""

    WINDOW_WANTED, RUNS_MAX = 10, 300
    maxDiff = None

    def test_a_user_granted_nothing_reaches_no_process_of_a_root_sandbox_being_made(self):
        stop, counts = os.path.join(self.home, "stop"), os.path.join(self.home, "counts")
        reacher = subprocess.Popen(
            ["setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}",
             "--clear-groups", "python3", "-c", REACHER, stop, counts, str(BASE)])
        self.addCleanup(reacher.kill)
        got, runs, failed = {"seen": 0, "window": 0, "hits": []}, 0, None
        while got["window"] < self.WINDOW_WANTED and runs < self.RUNS_MAX and not failed:
            try:
                r = run_nsbox(["run", "--", "true"], self.dirs, timeout=30)
                if r.returncode != 0:
                    failed = r.stderr.decode() or f"exit {r.returncode}"
            except AssertionError as ex:  # it hung: reported below, with what the user did
                failed = str(ex).splitlines()[0]
            runs += 1
            if os.path.exists(counts):
                with open(counts) as f:
                    got = json.load(f)
        open(stop, "w").close()
        self.assertEqual(reacher.wait(60), 0)
        with open(counts) as f:
            got = json.load(f)
        self.assertEqual(got["hits"], [], f"the user reached root's sandboxes ({runs} runs; "
                                          f"{failed or 'every run ended well'})")
        self.assertFalse(failed, f"run {runs}")
        # the user saw root's sandboxes at all: a reacher that saw nothing proves nothing
        self.assertGreater(got["seen"], 0, f"in {runs} runs the user saw no sandbox's process")
        if got["window"] == 0:
            self.skipTest(f"in {runs} runs the user never saw a clone in its owner window")


BASE, COUNT, SLOTS = 2000000000, 65536, 2248  # policy/idmap.h
FREE_SLOT = 2000  # the only slot whose ids the test grants to no user

# As root, in a mount namespace of its own where /etc/subuid and /etc/subgid are the test's:
# a root sandbox, then the user, in a user namespace made of the ids it was granted (through
# newuidmap, as any user may), becoming the sandbox's host uid and signalling its command.
ATTACK = r"""
set -u
mount --bind "$GRANTS" /etc/subuid && mount --bind "$GRANTS" /etc/subgid || exit 90
"$NSBOX_BIN" run -- sleep "$MARK" &
run=$!
for i in $(seq 100); do
    pid=$(pgrep -f -x "sleep $MARK" | head -1)
    [ -n "$pid" ] && [ "$(stat -c %u /proc/$pid)" -ge 2000000000 ] && break
    pid=; sleep 0.1
done
[ -n "$pid" ] || { kill $run; exit 91; }
uid=$(stat -c %u /proc/$pid)
echo "uid $uid"
try_signal() {
    setpriv --reuid "$USER_UID" --regid "$USER_GID" --clear-groups -- \
        unshare --map-users=$BASE,0,$SPAN --map-groups=$BASE,0,$SPAN --setuid 0 --setgid 0 \
        python3 -c '
import os, sys
pid, uid, base, span = map(int, sys.argv[1:])
if not base <= uid < base + span:
    print("signal out of reach: not one of the granted ids")
    sys.exit(0)
os.setgid(uid - base); os.setuid(uid - base)
try:
    os.kill(pid, 0); print("signal reached", sys.argv[1])
except PermissionError:
    print("signal refused")
' "$1" "$2" "$BASE" "$SPAN"
}
try_signal "$pid" "$uid"
# the control: a process of a granted id is reached the same way
setpriv --reuid $((BASE + 5)) --regid $((BASE + 5)) --clear-groups sleep 30 &
control=$!
sleep 0.2
try_signal "$control" $((BASE + 5)) | sed 's/reached [0-9]*/reached the control/'
kill $control
kill $pid 2>/dev/null; wait $run
"""


@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
@unittest.skipUnless(os.geteuid() == 0, "root's sandboxes and a mount namespace need root")
class SubordinateIdsOfAnotherUser(unittest.TestCase):
    def setUp(self):
        for tool in ("newuidmap", "unshare", "setpriv", "pgrep"):
            if not shutil.which(tool):
                self.skipTest(f"needs {tool} (uidmap, util-linux, procps)")
        self.user = ensure_test_user()
        self.dirs = Dirs()
        self.addCleanup(self.dirs.cleanup)

    def grants(self, lines):
        path = os.path.join(self.dirs.base, "subids")
        with open(path, "w") as f:
            f.write("".join(f"{self.user.pw_name}:{a}:{n}\n" for a, n in lines))
        os.chmod(path, 0o644)
        return path

    def attack(self, grants, span):
        env = self.dirs.env({"NSBOX_BIN": NSBOX, "GRANTS": grants, "MARK": f"60.{os.getpid()}",
                             "USER_UID": str(self.user.pw_uid),
                             "USER_GID": str(self.user.pw_gid), "BASE": str(BASE),
                             "SPAN": str(span)})
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", ATTACK],
                           env=env, capture_output=True, text=True, timeout=120)
        if r.returncode in (90, 91):
            self.fail(f"set-up failed ({r.returncode}): {r.stdout}{r.stderr}")
        return r

    def test_a_root_sandbox_never_runs_as_ids_granted_to_a_user(self):
        """The user holds every slot's ids but one's (as an admin's large grant would): the
        sandbox runs in that one, and the user's signal cannot reach it."""
        span = FREE_SLOT * COUNT
        grants = self.grants([(BASE, span),
                              (BASE + (FREE_SLOT + 1) * COUNT, (SLOTS - FREE_SLOT - 1) * COUNT)])
        r = self.attack(grants, span)
        self.assertIn(f"uid {BASE + FREE_SLOT * COUNT + 1000}\n", r.stdout, r.stderr)
        self.assertIn("signal out of reach", r.stdout, r.stderr)
        self.assertIn("signal reached the control", r.stdout, r.stderr)
        self.assertEqual(r.stdout.count("signal reached"), 1, r.stdout)

    def test_all_slots_granted_is_a_clear_error(self):
        grants = self.grants([(BASE, SLOTS * COUNT)])
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            'mount --bind "$1" /etc/subuid && exec "$2" run -- true',
                            "sh", grants, NSBOX],
                           env=self.dirs.env(), capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("granted to users as subordinate ids (2248 of them: /etc/subuid", r.stderr)


IMAGE_BASE = BASE - COUNT  # NSBOX_IMAGE_ID_BASE: image id N is host id IMAGE_BASE + N

# As root, in a mount namespace of its own with the test's grant of the image ids: the user, in
# a user namespace of those ids (image id 0 becomes its 0), writes each path given, then puts a
# file of its own in its place (rename over it).
REWRITE = r"""
set -u
mount --bind "$GRANTS" /etc/subuid && mount --bind "$GRANTS" /etc/subgid || exit 90
setpriv --reuid "$USER_UID" --regid "$USER_GID" --clear-groups -- \
    unshare --map-users=$IMAGE_BASE,0,65536 --map-groups=$IMAGE_BASE,0,65536 \
    --setuid 0 --setgid 0 python3 -c '
import os, sys
for path in sys.argv[1:]:
    try:
        with open(path, "ab") as f:
            f.write(b"rewritten by another user\n")
        with open(path + ".new", "wb") as f:
            f.write(b"replaced by another user\n")
        os.rename(path + ".new", path)
        print("rewrote", path)
    except OSError as e:
        print("refused", path, e.strerror)
' "$@"
"""


@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
@unittest.skipUnless(os.geteuid() == 0, "root's image store and a mount namespace need root")
class ImageStoreIdsOfAnotherUser(unittest.TestCase):
    """Root's OCI images keep their files' owners shifted to the image ids (docs/images.md,
    "Owners"): image id 0, the owner of a layer's directories and of nsbox's /etc files, is
    host id 1999934464. A user whose /etc/subuid and /etc/subgid grant that id becomes it in a
    user namespace (newuidmap): below directories it may pass, it owns those files and could
    rewrite a shared layer every later sandbox of the image runs."""
    REF = "nsbox-test/store:1"

    def setUp(self):
        for tool in ("newuidmap", "unshare", "setpriv"):
            if not shutil.which(tool):
                self.skipTest(f"needs {tool} (uidmap, util-linux)")
        self.user = ensure_test_user()
        self.dirs = Dirs()  # its data directory is 0755 below a 0755 one, as /var/lib/nsbox
        self.addCleanup(self.dirs.cleanup)
        layout = os.path.join(self.dirs.base, "layout")
        oci_images.write_layout(layout)
        r = run_nsbox(["image", "import", "-q", layout, "--name", self.REF], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        name = r.stdout.decode().split("(")[-1].rstrip(")\n")
        self.images = os.path.join(self.dirs.data, "images")
        self.image = os.path.join(self.images, name)
        grants = os.path.join(self.dirs.base, "subids")
        with open(grants, "w") as f:
            f.write(f"{self.user.pw_name}:{IMAGE_BASE}:{COUNT}\n")
        os.chmod(grants, 0o644)
        self.grants = grants

    def targets(self):
        """A file of the image's bottom layer, shared by every image of that base, and nsbox's
        /etc/passwd in the image's own top layer: both image id 0's."""
        layer = oci_images.image_layers(self.image)[0]
        files = [os.path.join(layer, "etc", "passwd"), os.path.join(self.image, "top/etc/passwd")]
        for f in files:
            self.assertEqual(os.stat(f).st_uid, IMAGE_BASE, f)
        return files

    def rewrite(self, paths):
        env = self.dirs.env({"GRANTS": self.grants, "USER_UID": str(self.user.pw_uid),
                             "USER_GID": str(self.user.pw_gid), "IMAGE_BASE": str(IMAGE_BASE)})
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", REWRITE,
                            "sh"] + paths, env=env, capture_output=True, text=True, timeout=60)
        if r.returncode == 90:
            self.fail(f"set-up failed: {r.stdout}{r.stderr}")
        return r.stdout + r.stderr

    def control(self):
        """A directory of the same kind the store's were (0755 below 0755 ones), holding a file
        of image id 0: the granted user rewrites it, so the attack itself works here."""
        d = os.path.join(self.dirs.base, "control")
        os.makedirs(d)
        os.chown(d, IMAGE_BASE, IMAGE_BASE)
        f = os.path.join(d, "passwd")
        with open(f, "w") as fh:
            fh.write("x\n")
        os.chown(f, IMAGE_BASE, IMAGE_BASE)
        return f

    def assertHeld(self, files, out):
        for f in files:
            self.assertIn(f"refused {f} Permission denied", out)
            with open(f) as fh:
                self.assertNotIn("another user", fh.read(), f)
        r = run_nsbox(["run", "--image", self.REF, "--", "cat", "/etc/passwd"], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr.decode())  # root's sandboxes still reach it
        self.assertIn(b"appuser:x:1000", r.stdout)
        self.assertNotIn(b"another user", r.stdout)

    def test_a_user_granted_the_image_ids_cannot_rewrite_a_shared_layer(self):
        files, control = self.targets(), self.control()
        out = self.rewrite(files + [control])
        self.assertIn(f"rewrote {control}", out)
        self.assertHeld(files, out)
        for d in (os.path.join(self.images, ".layers"), self.image):
            self.assertEqual(stat.S_IMODE(os.stat(d).st_mode), 0o700, d)

    def test_a_store_an_older_build_left_open_is_closed_on_first_use(self):
        """Builds before this one left the layer store and the image's directory 0755: the
        first command that uses the store (a run of the image, a tag) closes them."""
        files = self.targets()
        for closer in (["run", "--image", self.REF, "--", "true"],
                       ["image", "tag", self.REF, "nsbox-test/store:2"]):
            with self.subTest(closer=closer[:2]):
                for d in (os.path.join(self.images, ".layers"), self.image):
                    os.chmod(d, 0o755)
                r = run_nsbox(closer, self.dirs)
                self.assertEqual(r.returncode, 0, r.stderr.decode())
                self.assertHeld(files, self.rewrite(files))
        # an image's directory left open where the layer store is closed already (copied in,
        # restored from a backup): its own run closes it
        os.chmod(self.image, 0o755)
        r = run_nsbox(["run", "--image", self.REF, "--", "true"], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        self.assertEqual(stat.S_IMODE(os.stat(self.image).st_mode), 0o700, self.image)
        self.assertHeld(files, self.rewrite(files))


@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
@unittest.skipUnless(os.geteuid() == 0, "the attack is on nsbox run as root by another user")
class ImageReferencesOfAnotherUser(unittest.TestCase):
    """Root's OCI references (<data>/images/.refs/, one symlink per tag naming its image) say
    which images root pulled, from which registries (a private one's host and team names
    included): nothing another user needs, as nsbox resolves a sandbox's image itself. The
    store above them is 0755 (a user may run root's debian rootfs as a directory image)."""
    REF = "registry.example:5000/team-x/secret-tool:1"

    def setUp(self):
        if not shutil.which("setpriv"):
            self.skipTest("needs setpriv (util-linux)")
        self.user = ensure_test_user()
        self.dirs = Dirs()
        self.addCleanup(self.dirs.cleanup)
        layout = os.path.join(self.dirs.base, "layout")
        oci_images.write_layout(layout)
        r = run_nsbox(["image", "import", "-q", layout, "--name", self.REF], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        self.images = os.path.join(self.dirs.data, "images")
        self.refs = os.path.join(self.images, ".refs")

    def as_user(self, *cmd):
        return subprocess.run(["setpriv", f"--reuid={self.user.pw_uid}",
                               f"--regid={self.user.pw_gid}", "--clear-groups", "--"] + list(cmd),
                              capture_output=True, text=True, timeout=30)

    def assertClosed(self):
        self.assertEqual(stat.S_IMODE(os.stat(self.refs).st_mode), 0o700)
        names = os.listdir(self.refs)
        self.assertTrue(any("secret-tool" in n for n in names), names)
        store = self.as_user("ls", "-a", self.images)  # the store itself stays open (control)
        self.assertEqual(store.returncode, 0, store.stderr)
        self.assertIn(".refs", store.stdout)
        listing = self.as_user("ls", "-a", self.refs)
        self.assertNotEqual(listing.returncode, 0, listing.stdout)
        self.assertIn("Permission denied", listing.stderr)
        self.assertNotIn("secret-tool", listing.stdout)
        for n in names:
            link = self.as_user("readlink", os.path.join(self.refs, n))
            self.assertNotEqual(link.returncode, 0, link.stdout)
            self.assertEqual(link.stdout, "")

    def test_a_user_cannot_list_which_images_root_pulled(self):
        self.assertClosed()
        r = run_nsbox(["run", "--image", self.REF, "--", "true"], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr.decode())  # root still resolves its tags

    def test_references_an_older_build_left_open_are_closed_on_first_use(self):
        """Builds before this one made .refs 0755 (and may have closed the layer store
        already): a run of one of the store's OCI images, or a tag, closes it."""
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.images, ".layers")).st_mode), 0o700)
        for closer in (["run", "--image", self.REF, "--", "true"],
                       ["image", "tag", self.REF, "nsbox-test/refs:2"]):
            with self.subTest(closer=closer[:2]):
                os.chmod(self.refs, 0o755)
                self.assertEqual(self.as_user("ls", self.refs).returncode, 0)  # open: listed
                r = run_nsbox(closer, self.dirs)
                self.assertEqual(r.returncode, 0, r.stderr.decode())
                self.assertClosed()

if __name__ == "__main__":
    unittest.main()
