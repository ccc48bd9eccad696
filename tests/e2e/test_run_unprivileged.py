"""End-to-end: `nsbox run` as an unprivileged user (uid != 0, no capabilities).

The user gets a delegated cgroup: on cgroup v2 (the test VM, tests/vm) one made as systemd's
Delegate=yes makes it (tests/lib V2Delegation), on a cgroup-v1 host one per controller
(V1Delegation)."""
import json
import os
import shutil
import socket
import subprocess
import unittest

from nsbox_test import (CGROUP_V1, CGROUP_V2_ONLY, CPYTHON, CPYTHON_ID_TESTS, AsTestUser,
                        cgroup_leftovers, cpython_on_host, cpython_outcomes,
                        cpython_testsuite_missing, is_root, nsbox_command,
                        sigkill_run_and_check_init_dies, wait_for, write_config)
from swaprace import race_workspace_swap


def write_pool_config(dirs):
    path = os.path.join(dirs.base, "pool.json")
    with open(path, "w") as f:
        json.dump({"pool": {"size": 1, "ttl_seconds": 120}}, f)
    os.chmod(path, 0o644)
    return {"NSBOX_CONFIG": path}


def setUpModule():
    if not is_root():
        raise unittest.SkipTest("the test switches to its unprivileged user with setpriv: needs root")
    if not (CGROUP_V1 or CGROUP_V2_ONLY):
        raise unittest.SkipTest("cgroup delegation for the test user needs v1 memory and pids "
                                "hierarchies, or cgroup v2 alone")


class Unprivileged(AsTestUser):
    def test_python_workspace_identity(self):
        r = self.run_as_user(["run", "--", "sh", "-c",
                              "python3 -c 'print(6*7)'; echo hi > /workspace/f && cat /workspace/f;"
                              "id -u; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status;"
                              "touch /usr/x 2>/dev/null && echo USR-WRITABLE; hostname"])
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertEqual(lines[:3], ["42", "hi", "1000"])
        self.assertEqual([l.split()[1] for l in lines[3:7]],
                         ["0000000000000000", "0000000000000000", "1", "2"])
        self.assertNotIn("USR-WRITABLE", lines)
        sid = lines[-1].split("-", 1)[1]
        self.assertEqual(self.dirs.leftovers(), [])
        self.assertEqual(cgroup_leftovers(sid), [])

    def subids(self):
        """The test user's subordinate uid range's start, or None (useradd grants one)."""
        with open("/etc/subuid") as f:
            for line in f:
                name, _, rest = line.strip().partition(":")
                start, _, count = rest.partition(":")
                if name in (self.user.pw_name, str(self.user.pw_uid)) and int(count) >= 65536:
                    return int(start)
        return None

    def test_subordinate_ids_mapped(self):
        # with newuidmap/newgidmap and a range in /etc/subuid and /etc/subgid, ids 0-65535
        # exist: appuser is the user, the others its subordinate ids (never host root)
        start = self.subids()
        if start is None or not os.path.exists("/usr/bin/newuidmap"):
            self.skipTest("the test user has no subordinate ids, or uidmap is not installed")
        r = self.run_as_user(["run", "--", "sh", "-c", "cat /proc/self/uid_map; id -u;"
                              "touch /tmp/f; chown 1 /tmp/f 2>&1 | grep -c 'not permitted'"])
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [l.split() for l in r.stdout.decode().splitlines()]
        self.assertEqual(lines[:3], [["0", str(start), "1000"],
                                     ["1000", str(self.user.pw_uid), "1"],
                                     ["1001", str(start + 1001), "64535"]])
        self.assertEqual(lines[3:], [["1000"], ["1"]])
        r = self.run_as_user(["info", "--json"])
        self.assertIn(b"subordinate ids", r.stdout, r.stdout)

    def test_cpython_id_tests_pass_as_on_the_host(self):
        why = cpython_testsuite_missing()
        if why:
            self.skipTest(why)
        if self.subids() is None:
            self.skipTest("the test user has no subordinate ids: the sandbox maps appuser alone")
        host = cpython_on_host(self.user)
        self.assertIn(b"== Tests result: SUCCESS ==", host.stdout, host.stdout + host.stderr)
        r = self.run_as_user(["run", "--", CPYTHON] + CPYTHON_ID_TESTS, timeout=300)
        self.assertEqual(cpython_outcomes(r.stdout), cpython_outcomes(host.stdout),
                         r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_pooled_run_as_a_user(self):
        # the warm pool (docs/pool.md) in the user's own runtime directory
        env = write_pool_config(self.dirs)
        r = self.run_as_user(["pool", "fill"], extra_env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_as_user(["pool", "ls", "--json"], extra_env=env)
        (entry,) = json.loads(r.stdout)
        r = self.run_as_user(["run", "--", "sh", "-c", "hostname; id -u"], extra_env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode().split(), ["nsbox-" + entry["id"], "1000"])
        r = self.run_as_user(["pool", "drain"], extra_env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(wait_for(lambda: not self.dirs.live_ids(), 10), self.dirs.live_ids())
        self.assertEqual(cgroup_leftovers(entry["id"]), [])

    def test_files_belong_to_the_user_on_the_host(self):
        ws = os.path.join(self.dirs.base, "ws")
        os.mkdir(ws)
        os.chown(ws, self.user.pw_uid, self.user.pw_gid)
        r = self.run_as_user(["run", "--workspace", ws, "--", "sh", "-c", "echo x > made"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.stat(os.path.join(ws, "made")).st_uid, self.user.pw_uid)

    def test_a_workspace_swapped_meanwhile_is_never_bound_from_the_swapped_path(self):
        """--workspace BASE/a/proc while another who can rename `a` (here root, the test's only
        other user) swaps it with a link to /: the user's sandbox binds the directory checked, by
        path in its own mount namespace, only if that path holds no link and leads to the inode
        checked, or the run is refused; never the host's /proc (bound by path as checked, about
        one run in five listed the host's processes)."""
        parent = os.path.join(self.dirs.base, "swap")
        os.mkdir(parent, 0o755)
        run = lambda ws: self.run_as_user(["run", "--workspace", ws, "--", "ls", "-a",
                                           "/workspace"])
        reasons = race_workspace_swap(self, parent, self.user, None, run, runs=60)
        self.assertIn("changed while the sandbox was made", reasons)
        self.assertEqual(self.dirs.live_ids(), [])

    def test_host_loopback_unreachable(self):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        try:
            r = self.run_as_user(["run", "--", "python3", "-c",
                                  "import socket\ntry:\n socket.create_connection(('127.0.0.1',"
                                  f" {port}), timeout=3); print('CONNECTED')\n"
                                  "except OSError: print('refused')"])
            self.assertEqual(r.stdout, b"refused\n", r.stderr)
        finally:
            srv.close()

    def test_a_name_that_did_not_resolve_is_said_as_for_root(self):
        # init binds 127.0.0.1:53 with the capability the sandbox's user namespace gives it
        r = self.run_as_user(["run", "--", "getent", "hosts", "pypi.org"])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertTrue(r.stderr.endswith(
            b"nsbox: the command looked up pypi.org, but this sandbox has no network (network "
            b"none); to reach it: --network allow=pypi.org (or all); docs/network.md\n"),
            r.stderr)

    def test_exit_codes(self):
        self.assertEqual(self.run_as_user(["run", "--", "sh", "-c", "exit 7"]).returncode, 7)
        self.assertEqual(self.run_as_user(["run", "--", "nope-not-here"]).returncode, 127)

    def test_tmp_fallback_state_dir_of_another_user_is_refused(self):
        # Without NSBOX_STATE_DIR and XDG_RUNTIME_DIR a user's state goes to /tmp/nsbox-UID.
        # /tmp is everyone's: a directory of that name made first by someone else (here root,
        # as an attacker would) must be refused, not used. Then nsbox makes its own, the
        # user's, closed to others. (The test user is the suite's own: so is the path.)
        path = f"/tmp/nsbox-{self.user.pw_uid}"
        shutil.rmtree(path, ignore_errors=True)
        self.addCleanup(shutil.rmtree, path, True)
        def run(*args):
            cmd, env = nsbox_command(args, self.dirs, self.user, wrap=self.deleg.wrap)
            del env["NSBOX_STATE_DIR"]
            return subprocess.run(cmd, capture_output=True, env=env, timeout=60)

        os.mkdir(path, 0o755)  # root's
        r = run("run", "--", "true")
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(f"{path} is not a directory of yours closed to others".encode(), r.stderr)
        self.assertEqual(os.listdir(path), [])
        os.rmdir(path)
        r = run("run", "--", "sh", "-c", "echo ok")
        self.assertEqual((r.returncode, r.stdout), (0, b"ok\n"), r.stderr)
        st = os.lstat(path)
        self.assertEqual(st.st_uid, self.user.pw_uid)
        self.assertEqual(st.st_mode & 0o022, 0, oct(st.st_mode))

    def test_signals_timeout_and_read_only_root(self):
        self.assertEqual(self.run_as_user(["run", "--", "sh", "-c", "kill -TERM $$"]).returncode,
                         128 + 15)
        r = self.run_as_user(["run", "--timeout", "1", "--", "sleep", "30"])
        self.assertEqual(r.returncode, 124, r.stderr)
        r = self.run_as_user(["run", "--", "sh", "-c",
                              "for f in /x /usr/x; do touch $f 2>&1 || true; done"])
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertEqual(len(lines), 2, lines)
        for f, line in zip(("/x", "/usr/x"), lines):
            self.assertIn(f"'{f}': Read-only file system", line)  # EROFS, not just EACCES

    def test_sigkill_of_nsbox_then_gc(self):
        # a cold run (Dirs turn the pool off): the sandbox's init is nsbox's child
        cmd, env = nsbox_command(["run", "--", "sh", "-c", "hostname; echo ready; sleep 300"],
                                 self.dirs, self.user, wrap=self.deleg.wrap)
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        host = p.stdout.readline()
        if not host.startswith(b"nsbox-") or p.stdout.readline() != b"ready\n":
            p.kill()
            p.wait()
            self.fail(host + p.stderr.read(2000))
        sid = host.decode().strip()[len("nsbox-"):]
        sigkill_run_and_check_init_dies(self, p)
        self.assertTrue(self.dirs.leftovers())  # until gc runs
        r = self.run_as_user(["gc", "-v"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"removed 1 leftover sandbox", r.stdout)
        self.assertEqual(self.dirs.leftovers(), [])
        self.assertEqual(cgroup_leftovers(sid), [])

    def test_persistent_sandbox_as_a_user(self):
        r = self.run_as_user(["create"])
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        try:
            r = self.run_as_user(["exec", sid, "--", "sh", "-c",
                                  "id -u; grep -E '^CapEff:' /proc/self/status"], delegated=False)
            self.assertEqual(r.stdout.split()[0], b"1000", r.stderr)
            self.assertEqual(r.stdout.split()[2], b"0000000000000000")
            src = os.path.join(self.dirs.base, "in.txt")
            with open(src, "w") as f:
                f.write("from the host\n")
            os.chmod(src, 0o644)
            r = self.run_as_user(["cp", src, sid + ":/workspace/in.txt"], delegated=False)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.run_as_user(["exec", sid, "--", "cat", "in.txt"], delegated=False)
            self.assertEqual(r.stdout, b"from the host\n")
            # back over a file of the user's: in the user's directory replaced by a new file
            # (its inode), made whole before it took the name (O_TMPFILE and a link through
            # /proc: no CAP_DAC_READ_SEARCH for AT_EMPTY_PATH); in a directory of root's (the
            # test's base), where no new file can be made, written in place. Its mode is kept
            # and nothing is left beside it either way.
            mine = os.path.join(self.dirs.base, "mine")
            os.mkdir(mine)
            os.chown(mine, self.user.pw_uid, self.user.pw_gid)
            for where, replaced in ((mine, True), (self.dirs.base, False)):
                back = os.path.join(where, "back.txt")
                with open(back, "w") as f:
                    f.write("old\n")
                os.chown(back, self.user.pw_uid, self.user.pw_gid)
                os.chmod(back, 0o640)
                before = set(os.listdir(where))
                ino = os.stat(back).st_ino
                r = self.run_as_user(["cp", sid + ":in.txt", back], delegated=False)
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(back) as f:
                    self.assertEqual(f.read(), "from the host\n")
                st = os.stat(back)
                self.assertEqual(st.st_ino != ino, replaced, where)
                self.assertEqual((st.st_uid, st.st_mode & 0o7777), (self.user.pw_uid, 0o640))
                self.assertEqual(set(os.listdir(where)), before)
            # a file the user made read-only is not replaced: the copy fails, as cp's does
            ro = os.path.join(mine, "back.txt")
            os.chmod(ro, 0o444)
            with open(ro, "w") as f:
                f.write("read-only\n")
            r = self.run_as_user(["cp", sid + ":in.txt", ro], delegated=False)
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"Permission denied", r.stderr)
            with open(ro) as f:
                self.assertEqual(f.read(), "read-only\n")
            # the socket and state belong to the user, mode 0600
            st = os.stat(os.path.join(self.dirs.state, sid, "ctl"))
            self.assertEqual((st.st_uid, st.st_mode & 0o777), (self.user.pw_uid, 0o600))
        finally:
            self.assertEqual(self.run_as_user(["rm", sid], delegated=False).returncode, 0)
        self.assertEqual(self.dirs.leftovers(), [])

    def test_workspace_is_a_tmpfs_of_the_disk_limit(self):
        # Loop devices are root's: a user's fresh workspace is a tmpfs of limits.disk_bytes
        # with one inode per 16 KiB, made inside the sandbox; nothing of it is on the host.
        env = write_config(self.dirs, {"tiny": {"cpus": 1, "memory": "512MiB", "pids": 128,
                                                "disk": "64MiB"}})
        r = self.run_as_user(["run", "--instance-type", "tiny", "--", "sh", "-c",
                              "stat -f -c '%T %b %S %c' /workspace; "
                              "head -c 200M /dev/zero > big; echo status=$?; stat -c %s big; "
                              "rm big; python3 -c \"import os\nn = 0\ntry:\n"
                              " while n < 5000: os.close(os.open(f'f{n}', os.O_CREAT | "
                              "os.O_WRONLY)); n += 1\nexcept OSError as e: print(e.strerror)\n"
                              "print(f'files={n}')\""], extra_env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        kind, blocks, bsize, inodes = lines[0].split()
        self.assertEqual(kind, "tmpfs")
        self.assertEqual(int(blocks) * int(bsize), 64 << 20)
        self.assertEqual(int(inodes), 4096)
        self.assertEqual(lines[1], "status=1")  # head: No space left on device
        self.assertLessEqual(int(lines[2]), 64 << 20)
        self.assertGreater(int(lines[2]), 60 << 20)
        self.assertEqual(lines[3], "No space left on device")
        files = int(lines[4].split("=")[1])
        self.assertLess(files, 4096)  # out of inodes before 5000 files
        self.assertGreater(files, 4000)
        self.assertEqual(self.dirs.leftovers(), [])
        # a session shows it in inspect, and file operations reach it
        r = self.run_as_user(["create", "--instance-type", "tiny"], extra_env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        try:
            info = json.loads(self.run_as_user(["inspect", sid], delegated=False,
                                               extra_env=env).stdout)
            self.assertEqual(info["disk"]["kind"], "tmpfs")
            self.assertEqual(info["disk"]["limit_bytes"], 64 << 20)
            src = os.path.join(self.dirs.base, "in.bin")
            with open(src, "wb") as f:
                f.write(b"y" * (1 << 20))
            os.chmod(src, 0o644)
            r = self.run_as_user(["cp", src, sid + ":in.bin"], delegated=False, extra_env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            info = json.loads(self.run_as_user(["inspect", sid], delegated=False,
                                               extra_env=env).stdout)
            self.assertGreaterEqual(info["disk"]["used_bytes"], 1 << 20)
        finally:
            self.run_as_user(["rm", sid], delegated=False, extra_env=env)

    def test_a_workspace_fuller_than_memory_is_an_oom_that_says_why(self):
        # A user's workspace is a tmpfs: its files are memory, and a disk limit above the
        # memory limit ends in the OOM killer, not ENOSPC. The message says so.
        env = write_config(self.dirs, {"lean": {"cpus": 1, "memory": "64MiB", "pids": 128,
                                                "disk": "256MiB"}})
        r = self.run_as_user(["run", "--instance-type", "lean", "--", "sh", "-c",
                              "head -c 200M /dev/zero > /workspace/f"], extra_env=env)
        self.assertEqual(r.returncode, 137, r.stderr)
        self.assertIn(b"out of memory: the instance type's limit (lean, 64 MiB)", r.stderr)
        self.assertIn(b"the workspace's files count toward it: without root it is a tmpfs",
                      r.stderr)
        self.assertEqual(self.dirs.leftovers(), [])

    def test_network_all_refused_without_cap_net_admin(self):
        # Refused when the sandbox is built, with the fix, rather than run without a network
        # or with a weaker one.
        for policy in ("all", "allow=example.com"):
            r = self.run_as_user(["run", "--network", policy, "--", "true"])
            self.assertEqual(r.returncode, 125, policy)
            self.assertIn(b"CAP_NET_ADMIN", r.stderr, policy)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertEqual(self.dirs.leftovers(), [])

    def test_without_cgroups_refuses_with_the_fix(self):
        # Limits are enforced, not advisory: without a delegated cgroup the sandbox is refused,
        # naming the cause and the fix, rather than run without limits.
        r = self.run_as_user(["run", "--", "true"], delegated=False)
        self.assertEqual(r.returncode, 125)
        err = r.stderr.decode()
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("cgroup", err)
        self.assertIn("run nsbox as root", err)  # the fix, in the words nsbox info uses
        if CGROUP_V1:
            # v1: the delegation commands with this user's id, to be typed as they are (they
            # said nsbox-USER and chown -R USER, to be edited first)
            uid = self.user.pw_uid
            self.assertIn(f"mkdir /sys/fs/cgroup/$c/nsbox-{uid}; chown -R {uid} "
                          f"/sys/fs/cgroup/$c/nsbox-{uid}; done) and set "
                          f"NSBOX_CGROUP_PARENT=/nsbox-{uid}", err)
        self.assertEqual(self.dirs.leftovers(), [])


if __name__ == "__main__":
    unittest.main()
