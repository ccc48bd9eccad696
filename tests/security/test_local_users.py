"""Security: nsbox run as root on a machine with other local users (docs/security.md, "Other
local users"). Root's state, data and cache directories hold what root trusts and writes: state
directories, control sockets, locks, images, workspace backing files and templates. Another
user who can write one of them, or a directory above it, can plant a symlink there, so that
root creates and removes files where the user chose, or a state directory or an image of the
user's making. As root, nsbox refuses such a directory, with the variable that fixes it."""
import os
import shutil
import stat
import tempfile
import unittest

from nsbox_test import NSBOX, Dirs, ensure_test_user, run_nsbox


@unittest.skipIf(not NSBOX, "NSBOX_BIN is not set (run through ctest)")
@unittest.skipUnless(os.geteuid() == 0, "the attack is on nsbox run as root by another user")
class DirectoriesAnotherUserCanWrite(unittest.TestCase):
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

    def test_root_cache_below_another_users_home_is_not_written_through_its_link(self):
        """`sudo -E nsbox run` keeps the caller's HOME: root's cache directory is then
        $HOME/.cache/nsbox, the user's to replace. A link there to a root-only directory made
        root create the workspace templates (and each sandbox's backing file) in it."""
        def plant():
            os.makedirs(os.path.join(self.home, ".cache"))
            os.symlink(self.victim, os.path.join(self.home, ".cache", "nsbox"))
        self.as_user(plant)
        env = {"HOME": self.home, "NSBOX_CACHE_DIR": ""}
        rc, err = self.run_root(env)
        self.assertEqual(os.listdir(self.victim), [], err)
        self.assertRefused(rc, err, "NSBOX_CACHE_DIR", self.home)
        self.assertIn("cache directory", err)

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


if __name__ == "__main__":
    unittest.main()
