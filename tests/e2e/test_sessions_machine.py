"""End-to-end: persistent sandboxes and what of theirs is the machine's, not their state
directory's: root's uid slots (ROOT_UID_SLOTS), which every root sandbox of every state
directory takes from, and root's own runtime directory (moved from test_sessions.py, so that
the rest of it can run beside another module: tests/CMakeLists.txt)."""
import json
import os
import subprocess
import unittest

from nsbox_test import (NSBOX, ROOT_UID_SLOTS, Dirs, ensure_test_user, gc_just_ran, is_root,
                        reachable_nsbox, run_nsbox, uid_slot_holders, wait_for)

from test_sessions import SessionTest, setUpModule  # noqa: F401 (unittest runs setUpModule)


def slot_of_uid_map(text):
    """The uid slot of a sandbox from its init's or a command's uid map (2000000000 + slot *
    65536 on the host)."""
    outside = int(text.split()[1])
    return str((outside - 2000000000) // 65536)


def slot_of_run(dirs):
    """The uid slot a one-shot run took."""
    r = run_nsbox(["run", "--", "cat", "/proc/self/uid_map"], dirs)
    if r.returncode != 0:
        raise AssertionError(r.stderr)
    return slot_of_uid_map(r.stdout.decode())


def slot_of_sandbox(dirs, sid):
    """The uid slot of persistent sandbox sid."""
    r = run_nsbox(["exec", sid, "--", "cat", "/proc/self/uid_map"], dirs)
    if r.returncode != 0:
        raise AssertionError(r.stderr)
    return slot_of_uid_map(r.stdout.decode())


def free_slot_files():
    """Root's uid slot files that nobody holds."""
    return {name for name, pid in uid_slot_holders().items() if pid is None}


class Machine(SessionTest):
    def test_state_directories_never_share_a_host_uid(self):
        # Host uids are the machine's: two sandboxes of different $NSBOX_STATE_DIR (two tools,
        # two test suites) must not be given the same one.
        if not is_root():
            self.skipTest("sandboxes get reserved host uids only as root")
        other = Dirs()
        try:
            a = self.create()
            r = run_nsbox(["create"], other, check=True)
            b = r.stdout.decode().strip()

            def init_uid(dirs, sid):
                sup = json.loads(run_nsbox(["inspect", sid], dirs, check=True).stdout)[
                    "supervisor_pid"]
                with open(f"/proc/{sup}/task/{sup}/children") as f:
                    init = f.read().split()[0]
                with open(f"/proc/{init}/status") as f:
                    return int([l for l in f if l.startswith("Uid:")][0].split()[1])

            try:
                ua, ub = init_uid(self.dirs, a), init_uid(other, b)
            finally:
                run_nsbox(["rm", b], other, check=True)
            self.assertGreaterEqual(min(ua, ub), 2000000000)
            self.assertNotEqual(ua, ub)
        finally:
            other.cleanup()

    def test_uid_slot_files_do_not_pile_up(self):
        # A sandbox's uid slot is picked at random among the low free ones (a create does not
        # try every live sandbox's slot from 0); the slot's lock file stays when the sandbox
        # ends and is taken first by the next create, or one-shot runs, which run no gc, would
        # leave one file per slot they used. Root's slot files are the machine's
        # (ROOT_UID_SLOTS), where other sandboxes come and go meanwhile and any create's gc
        # removes the free ones: so what is counted is what this test's own sandboxes did. A
        # sandbox that made a new file although the one its predecessor left was there and
        # free is a file piled up; without the reuse nearly every one does (a new slot at
        # random among 64 or more).
        def let_go(slot):
            """Whether slot's file is there once its sandbox has let it go (its supervisor
            does as it ends, after rm has answered)."""
            path = os.path.join(ROOT_UID_SLOTS, slot)
            self.assertTrue(wait_for(lambda: slot in free_slot_files() or
                                     not os.path.exists(path), 10), "the slot is still held")
            return os.path.exists(path)

        def piled(start_one, rounds):
            made = 0
            prev = None
            for _ in range(rounds):
                free_before = free_slot_files()
                slot = start_one()
                if prev in free_before and slot not in free_before:
                    made += 1
                prev = slot
            return made
        # (another sandbox may take the free file first, or hold every file a create tries
        # first: the slack)
        self.assertLessEqual(piled(lambda: slot_of_run(self.dirs), 20), 5,
                             "slot files left by one-shot runs")

        def create_and_rm():
            gc_just_ran(self.dirs)  # not create's gc: it would remove the free files
            sid = self.create()
            slot = slot_of_sandbox(self.dirs, sid)
            self.assertEqual(self.nsbox("rm", sid).returncode, 0)
            let_go(slot)
            return slot
        self.assertLessEqual(piled(create_and_rm, 20), 5, "slot files left by removed sandboxes")
        # A removed sandbox's slot file stays, free, for the next create to take (a file made
        # and removed per sandbox was an inode allocated and freed at every create). Another
        # create's gc may remove it right after the rm: one of three must find it there.
        stayed = []
        for _ in range(3):
            sid = self.create()
            slot = slot_of_sandbox(self.dirs, sid)
            self.assertTrue(os.path.exists(os.path.join(ROOT_UID_SLOTS, slot)), slot)
            self.assertEqual(self.nsbox("rm", sid).returncode, 0)
            stayed.append(let_go(slot))
        self.assertIn(True, stayed, "the slot file went with its sandbox")

    def test_another_users_sandbox_is_named_not_never_existed(self):
        # Runtime directories are per user (and per environment): a sandbox made with sudo is
        # not in the user's own. "Never existed" would be wrong; say whose it is instead.
        user = ensure_test_user()
        root_env = {k: v for k, v in self.dirs.env().items() if k != "NSBOX_STATE_DIR"}
        r = subprocess.run([NSBOX, "create", "--ttl", "120"], env=root_env, capture_output=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        try:
            self.assertTrue(os.path.isdir(os.path.join("/run/nsbox", sid)))
            r = self.exec(sid, "true")  # root, with another NSBOX_STATE_DIR
            self.assertEqual(r.returncode, 125)
            self.assertIn(f"no sandbox {sid} in {self.dirs.state}, but /run/nsbox/{sid} is one"
                          .encode(), r.stderr)
            self.assertIn(b"NSBOX_STATE_DIR=/run/nsbox reaches it", r.stderr)
            user_env = dict(root_env, HOME=user.pw_dir)
            r = subprocess.run(["setpriv", "--reuid", str(user.pw_uid), "--regid",
                                str(user.pw_gid), "--clear-groups", "--", reachable_nsbox(),
                                "inspect", sid], env=user_env, capture_output=True, timeout=60)
            self.assertEqual(r.returncode, 125)
            self.assertIn(f"/run/nsbox/{sid} is root's (made with sudo?)".encode(), r.stderr)
            self.assertNotIn(b"never existed", r.stderr)
        finally:
            subprocess.run([NSBOX, "rm", sid], env=root_env, capture_output=True, timeout=60)
        self.assertFalse(os.path.exists(os.path.join("/run/nsbox", sid)))
        r = self.exec(sid, "true")
        self.assertIn(f"no sandbox {sid} in {self.dirs.state} (it never existed there)".encode(),
                      r.stderr)


if __name__ == "__main__":
    unittest.main()
