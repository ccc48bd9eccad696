"""End-to-end: the /workspace disk limit (limits.disk_bytes of the instance type).

As root, a fresh workspace is an ext4 filesystem of exactly the limit on a loop device, mounted
only inside the sandbox; as an unprivileged user, a tmpfs of the limit (see
tests/e2e/test_run_unprivileged.py); a `--workspace DIR` of the caller's is not limited. The
abuse side (filling it, running out of inodes) is in tests/security/test_resource_abuse.py."""
import json
import os
import signal
import subprocess
import time
import unittest

from nsbox_test import (NSBOX, Dirs, is_root, loop_devices_under, run_nsbox, wait_for,
                        write_config)

MiB = 1 << 20
TINY = {"tiny": {"cpus": 1, "memory": "512MiB", "pids": 128, "disk": "64MiB"}}


def setUpModule():
    if not is_root():
        raise unittest.SkipTest("ext4 workspaces are root's (loop devices); the unprivileged "
                                "tmpfs kind is tested in test_run_unprivileged.py")
    if not os.path.exists("/dev/loop-control"):
        raise unittest.SkipTest("no /dev/loop-control on this machine: nsbox uses a tmpfs "
                                "workspace here, tested in test_run_unprivileged.py")



def big_type(disk):
    """An instance type "big" with a disk limit of its own, for a small cache filesystem."""
    return {"big": {"cpus": 1, "memory": "512MiB", "pids": 128, "disk": disk}}


def reserve_config(dirs, types, **kw):
    """write_config, with the strict reservation of each workspace's whole limit
    ("workspace": {"reserve": true}) instead of the default thin provisioning."""
    env = write_config(dirs, types, **kw)
    with open(env["NSBOX_CONFIG"]) as f:
        cfg = json.load(f)
    cfg["workspace"] = {"reserve": True}
    with open(env["NSBOX_CONFIG"], "w") as f:
        json.dump(cfg, f)
    return env


def writing_run(mib):
    """Shell lines: a one-shot run of type "big" that writes mib MiB to its workspace, then
    waits; $p is its nsbox (kill -9 $p: killed with its supervisor, as a crash would)."""
    return ('"$NSBOX" run --instance-type big -- sh -c '
            f'"head -c {mib}M /dev/zero > f && sync && echo written && sleep 60" > out & p=$!\n'
            'until grep -q written out; do sleep 0.05; done\n')


class WorkspaceDisk(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.dirs = Dirs()
        self.env = write_config(self.dirs, TINY)

    def tearDown(self):
        self.dirs.cleanup()

    def nsbox(self, *args, **kw):
        kw.setdefault("extra_env", self.env)
        return run_nsbox(list(args), self.dirs, **kw)

    def no_loop_left(self):
        return wait_for(lambda: not loop_devices_under(self.dirs.base), 10) or \
            self.fail(f"loop devices left: {loop_devices_under(self.dirs.base)}")

    def test_default_workspace_is_an_ext4_of_the_limit(self):
        # medium: 10 GiB. df inside sees the limit (less ext4's own metadata), ext4, empty.
        r = self.nsbox("run", "--", "sh", "-c",
                       "stat -f -c '%T %b %S %c' /workspace; ls -A /workspace | wc -l; "
                       "touch /workspace/x && stat -c '%U' /workspace/x")
        self.assertEqual(r.returncode, 0, r.stderr)
        kind, blocks, bsize, inodes = r.stdout.decode().splitlines()[0].split()
        self.assertEqual(kind, "ext2/ext3")  # coreutils' name for the ext family
        size = int(blocks) * int(bsize)
        self.assertLessEqual(size, 10 << 30)
        self.assertGreater(size, int(0.97 * (10 << 30)))
        self.assertEqual(int(inodes), (10 << 30) // 16384)
        self.assertEqual(r.stdout.decode().splitlines()[1:], ["0", "appuser"])
        self.assertEqual(self.dirs.leftovers(), [])
        self.no_loop_left()

    def test_a_fresh_workspace_is_dated_now_not_as_its_template(self):
        # the second workspace of a size is a copy of the template the first one made: its
        # root kept the template's times (`ls -la` showed a fresh /workspace days old)
        tiny = ("--instance-type", "tiny")
        self.assertEqual(self.nsbox("run", *tiny, "--", "true").returncode, 0)
        time.sleep(1.1)  # the template's second is over: whole seconds tell them apart
        before = int(time.time())
        r = self.nsbox("run", *tiny, "--", "stat", "-c", "%Y", "/workspace")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreaterEqual(int(r.stdout), before)
        self.no_loop_left()

    def test_the_limit_holds_and_errors_inside(self):
        r = self.nsbox("run", "--instance-type", "tiny", "--", "sh", "-c",
                       "dd if=/dev/zero of=/workspace/big bs=1M count=200 2>&1; "
                       "echo status=$?; stat -c %s /workspace/big")
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("No space left on device", out)
        self.assertIn("status=1", out)
        written = int(out.strip().splitlines()[-1])
        self.assertLessEqual(written, 64 * MiB)
        self.assertGreater(written, 56 * MiB)  # the limit is the sandbox's, not eaten by overhead

    def test_mounted_only_inside_and_gone_after_run(self):
        p = subprocess.Popen([NSBOX, "run", "--instance-type", "tiny", "--", "sh", "-c",
                              "echo up; read x"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=self.dirs.env(self.env))
        try:
            self.assertEqual(p.stdout.readline(), b"up\n", p.stderr.read1(500) if p.poll() else "")
            loops = loop_devices_under(self.dirs.cache)
            self.assertEqual(len(loops), 1, loops)
            with open("/proc/self/mountinfo") as f:
                host_mounts = [l for l in f if "/workspace" in l or self.dirs.base in l]
            self.assertEqual(host_mounts, [], "the workspace appeared in the host's mount table")
            p.stdin.write(b"\n")
            p.stdin.close()
            self.assertEqual(p.wait(30), 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()
        self.no_loop_left()
        self.assertEqual(self.dirs.leftovers(), [])

    def test_sigkill_of_run_then_gc_leaves_no_loop_device(self):
        p = subprocess.Popen([NSBOX, "run", "--instance-type", "tiny", "--", "sh", "-c",
                              "dd if=/dev/zero of=/workspace/f bs=1M count=8 2>/dev/null; "
                              "echo up; sleep 60"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=self.dirs.env(self.env))
        self.assertEqual(p.stdout.readline(), b"up\n")
        p.send_signal(signal.SIGKILL)
        p.wait()
        p.stdout.close()
        p.stderr.close()
        # init dies with its parent (PDEATHSIG); the namespace, the mount and the loop device
        # with it. The backing file is gc's.
        self.no_loop_left()
        r = self.nsbox("gc")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.dirs.leftovers(), [])

    def test_session_inspect_cp_and_rm(self):
        r = self.nsbox("create", "--instance-type", "tiny")
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        try:
            info = json.loads(self.nsbox("inspect", sid).stdout)
            disk = info["disk"]
            self.assertEqual(disk["kind"], "ext4")
            self.assertTrue(disk["enforced"])
            self.assertEqual(disk["limit_bytes"], 64 * MiB)
            self.assertEqual(disk["inodes_limit"], 4096)
            self.assertLess(disk["used_bytes"], 4 * MiB)
            self.assertIsNone(info["workspace"])  # no host path: it exists only inside
            # its backing file holds what the sandbox writes: the owner's alone
            backing = [os.path.join(d, n) for d, _, names in os.walk(self.dirs.cache)
                       for n in names if n == sid + ".ext4"]
            self.assertEqual(len(backing), 1, backing)
            self.assertEqual(os.stat(backing[0]).st_mode & 0o777, 0o600, backing[0])
            r = self.nsbox("exec", sid, "--", "sh", "-c",
                           "dd if=/dev/zero of=fill bs=1M count=100 2>/dev/null; true")
            self.assertEqual(r.returncode, 0, r.stderr)
            disk = json.loads(self.nsbox("inspect", sid).stdout)["disk"]
            self.assertGreater(disk["used_bytes"], 56 * MiB)
            # a file from the host into a full workspace: a clear error, and nothing half-done
            src = os.path.join(self.dirs.base, "two-mib")
            with open(src, "wb") as f:
                f.write(b"x" * (2 * MiB))
            r = self.nsbox("cp", src, f"{sid}:copy")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(b"disk is full", r.stderr)
            r = self.nsbox("exec", sid, "--", "sh", "-c", "rm fill && ls")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn(b"copy", r.stdout, "a partial copy was left")
            r = self.nsbox("cp", src, f"{sid}:copy")
            self.assertEqual(r.returncode, 0, r.stderr)  # room again once the sandbox freed it
            self.assertEqual(len(loop_devices_under(self.dirs.cache)), 1)
        finally:
            self.nsbox("rm", sid)
        self.no_loop_left()
        self.assertEqual(self.dirs.leftovers(), [])

    def test_given_directory_is_not_limited_and_says_so(self):
        ws = os.path.join(self.dirs.base, "mine")
        os.mkdir(ws)
        os.chown(ws, 4242, 4242)  # a user's: idmapped (a root-owned one is bound plainly)
        r = self.nsbox("run", "--instance-type", "tiny", "--workspace", ws, "--", "sh", "-c",
                       "dd if=/dev/zero of=/workspace/big bs=1M count=80 2>/dev/null")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.path.getsize(os.path.join(ws, "big")), 80 * MiB)
        r = self.nsbox("create", "--instance-type", "tiny", "--workspace", ws)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        try:
            info = json.loads(self.nsbox("inspect", sid).stdout)
            self.assertEqual(info["workspace"], ws)
            self.assertEqual(info["disk"]["kind"], "directory")
            self.assertFalse(info["disk"]["enforced"])
            self.assertTrue(info["disk"]["idmapped"])
            self.assertIn("no limit", info["disk"]["note"])
            # file operations go through the same idmapped mount: the copy is the owner's
            src = os.path.join(self.dirs.base, "in.txt")
            with open(src, "w") as f:
                f.write("from the host\n")
            r = self.nsbox("cp", src, f"{sid}:copied.txt")
            self.assertEqual(r.returncode, 0, r.stderr)
            st = os.stat(os.path.join(ws, "copied.txt"))
            self.assertEqual((st.st_uid, st.st_gid), (os.stat(ws).st_uid, os.stat(ws).st_gid))
            r = self.nsbox("exec", sid, "--", "stat", "-c", "%u", "copied.txt")
            self.assertEqual(r.stdout, b"1000\n", r.stderr)
        finally:
            self.nsbox("rm", sid)
        self.assertTrue(os.path.exists(os.path.join(ws, "big")))

    @unittest.skipUnless(os.geteuid() == 0, "the note is about root's directories")
    def test_a_root_owned_directory_is_noted_once(self):
        # Bound plainly (root is never mapped in): the sandbox cannot write there, and a run
        # whose first write fails should not leave the user guessing why.
        ws = os.path.join(self.dirs.base, "roots")
        os.mkdir(ws, 0o755)
        r = self.nsbox("run", "--workspace", ws, "--", "touch", "/workspace/x")
        self.assertEqual(r.returncode, 1)
        note = r.stderr.decode().splitlines()
        self.assertEqual(sum("nsbox: note: --workspace" in l for l in note), 1, note)
        self.assertIn("belongs to root (its owner is 0), which is never mapped into a sandbox",
                      note[0])
        self.assertIn("chown -R USER: %s" % ws, note[0])
        # a CI container has root alone: any uid but 0 will do, and the note names one
        self.assertIn("where root is the only user, as in a CI container, chown -R 1000:1000 %s"
                      % ws, note[0])
        # create says it too: its supervisor makes the sandbox, and passes the note on
        r = self.nsbox("create", "--workspace", ws)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.nsbox("rm", r.stdout.decode().strip())
        self.assertEqual(r.stderr.decode().count("nsbox: note: --workspace %s belongs to root "
                                                 "(its owner is 0)" % ws), 1, r.stderr)
        # a system directory gets no chown advice, even through a link of another name
        link = os.path.join(self.dirs.base, "etc-link")
        os.symlink("/etc", link)
        r = self.nsbox("run", "--workspace", link, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"it is a system directory: give a copy", r.stderr)
        self.assertNotIn(b"chown", r.stderr)
        os.chown(ws, 1000, 1000)
        r = self.nsbox("run", "--workspace", ws, "--", "sh", "-c", "touch x && stat -c %u x")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"1000\n", b""))
        self.assertEqual(os.stat(os.path.join(ws, "x")).st_uid, 1000)
        os.remove(os.path.join(ws, "x"))
        os.chown(ws, 0, 0)
        # a user's directory of group 0 is bound plainly too (what chown USER alone leaves)
        os.chown(ws, 4242, 0)
        r = self.nsbox("run", "--workspace", ws, "--", "touch", "/workspace/x")
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"belongs to root (its group is 0)", r.stderr)
        os.chown(ws, 0, 0)
        # nothing to say for a directory the sandbox may write, or a user's (idmapped)
        os.chmod(ws, 0o777)
        r = self.nsbox("run", "--workspace", ws, "--", "touch", "/workspace/x")
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        os.chmod(ws, 0o755)
        os.chown(ws, 4242, 4242)
        r = self.nsbox("run", "--workspace", ws, "--", "touch", "/workspace/y")
        self.assertEqual((r.returncode, r.stderr), (0, b""))

    def test_file_operations_in_a_root_owned_directory_have_the_sandboxs_rights(self):
        # Bound plainly, a root-owned directory holds files the sandbox may not touch. The
        # supervisor's file operations ran as root: a symlink the sandbox planted where it may
        # write steered them to those files (reads, writes, removals), and they read any file
        # there directly too.
        ws = os.path.join(self.dirs.base, "project")
        for d, mode in ((ws, 0o755), (os.path.join(ws, "out"), 0o777),
                        (os.path.join(ws, "protected"), 0o700)):
            os.mkdir(d)
            os.chmod(d, mode)
        secret = os.path.join(ws, "secret.key")
        with open(secret, "w") as f:
            f.write("ROOT-ONLY\n")
        os.chmod(secret, 0o600)
        keep = os.path.join(ws, "protected", "keep")
        with open(keep, "w") as f:
            f.write("kept\n")
        r = self.nsbox("create", "--workspace", ws)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        try:
            r = self.nsbox("exec", sid, "--", "sh", "-c",
                           "cd /workspace/out && ln -s /secret.key result.txt && "
                           "ln -s /protected reports && echo mine > mine.txt")
            self.assertEqual(r.returncode, 0, r.stderr)
            got = os.path.join(self.dirs.base, "got")
            for src in ("out/result.txt", "secret.key", "out/reports/keep"):
                r = self.nsbox("cp", f"{sid}:/workspace/{src}", got)
                self.assertEqual(r.returncode, 125, src)
                self.assertIn(b"Permission denied", r.stderr, src)
                self.assertFalse(os.path.exists(got), src)
            put = os.path.join(self.dirs.base, "put")
            with open(put, "w") as f:
                f.write("pwned\n")
            for dst in ("out/reports/keep", "out/reports/new", "protected/new"):
                r = self.nsbox("cp", put, f"{sid}:/workspace/{dst}")
                self.assertEqual(r.returncode, 125, dst)
                self.assertIn(b"Permission denied", r.stderr, dst)
            self.assertEqual(sorted(os.listdir(os.path.join(ws, "protected"))), ["keep"])
            with open(keep) as f:
                self.assertEqual(f.read(), "kept\n")
            with open(secret) as f:
                self.assertEqual(f.read(), "ROOT-ONLY\n")
            # what the sandbox may do, the file operations still do, as its user
            r = self.nsbox("cp", f"{sid}:/workspace/out/mine.txt", got)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.nsbox("cp", put, f"{sid}:/workspace/out/new.txt")
            self.assertEqual(r.returncode, 0, r.stderr)
            st = os.stat(os.path.join(ws, "out", "new.txt"))
            self.assertEqual(st.st_uid, os.stat(os.path.join(ws, "out", "mine.txt")).st_uid)
            self.assertNotEqual(st.st_uid, 0)
        finally:
            self.nsbox("rm", sid)

    def test_tampered_template_is_not_used(self):
        # The empty filesystem every workspace is copied from is cached in the data directory.
        # One that someone else could have written is replaced, never mounted.
        r = self.nsbox("run", "--instance-type", "tiny", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        cache = os.path.join(self.dirs.cache, ".workspace-templates")
        tpl = [n for n in os.listdir(cache) if n.startswith("workspace-") and n.endswith(".ext4")]
        self.assertEqual(len(tpl), 1, tpl)
        path = os.path.join(cache, tpl[0])
        with open(path, "r+b") as f:
            f.seek(1024)  # the ext4 superblock
            f.write(b"\xff" * 1024)
        os.chmod(path, 0o666)
        r = self.nsbox("run", "--instance-type", "tiny", "--", "sh", "-c",
                       "echo ok > /workspace/f && cat /workspace/f")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"ok\n")
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        with open(path, "rb") as f:
            f.seek(1024 + 56)
            self.assertEqual(f.read(2), b"\x53\xef")  # the ext4 magic: remade

    def test_damaged_template_of_the_right_size_is_made_again(self):
        # Root's own file, mode 0600, the right size, but no filesystem in it (a crash before
        # its data reached the disk): the first mount fails, nsbox makes it again and goes on.
        r = self.nsbox("run", "--instance-type", "tiny", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        tdir = os.path.join(self.dirs.cache, ".workspace-templates")
        path = os.path.join(tdir, [n for n in os.listdir(tdir) if n.endswith(".ext4")][0])
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.truncate(0)
            f.truncate(size)
        r = self.nsbox("run", "--instance-type", "tiny", "--", "sh", "-c", "echo ok > f; cat f")
        self.assertEqual((r.returncode, r.stdout), (0, b"ok\n"), r.stderr)
        with open(path, "rb") as f:
            f.seek(1024 + 56)
            self.assertEqual(f.read(2), b"\x53\xef")

    def test_cache_and_data_on_different_filesystems(self):
        # /dev/shm is a tmpfs, the data directory is on the disk: the template is kept beside
        # the backing files, in the cache directory.
        if not os.path.isdir("/dev/shm"):
            self.skipTest("no /dev/shm")
        import tempfile, shutil
        cache = tempfile.mkdtemp(prefix="nsbox-test-cache-", dir="/dev/shm")
        self.addCleanup(shutil.rmtree, cache, True)
        env = dict(self.env, NSBOX_CACHE_DIR=cache)
        r = self.nsbox("run", "--instance-type", "tiny", "--", "sh", "-c",
                       "stat -f -c %T /workspace", extra_env=env)
        self.assertEqual((r.returncode, r.stdout), (0, b"ext2/ext3\n"), r.stderr)
        self.assertTrue(wait_for(lambda: not loop_devices_under(cache)), loop_devices_under(cache))
        self.assertEqual(sorted(os.listdir(cache)), [".workspace-templates"])

    def in_private_mount_ns(self, script, extra_env=None):
        """sh -c script in a mount namespace of its own (util-linux unshare: private
        propagation), so that mounts made to simulate a host change nothing outside."""
        env = self.dirs.env(dict(self.env, **(extra_env or {})))
        env["NSBOX"] = NSBOX
        return subprocess.run(["unshare", "-m", "sh", "-ec", script], capture_output=True,
                              env=env, timeout=120, cwd=self.dirs.base)  # scratch files there

    def test_template_store_on_a_filesystem_of_its_own(self):
        # The template store on a filesystem of its own (a tmpfs mounted on it, in a private
        # mount namespace), not the backing files': the copy must still work.
        tdir = os.path.join(self.dirs.cache, ".workspace-templates")
        os.makedirs(tdir, exist_ok=True)
        r = self.in_private_mount_ns(
            'mount -t tmpfs -o mode=0700 tmpfs "$NSBOX_CACHE_DIR/.workspace-templates"\n'
            'exec "$NSBOX" run --instance-type tiny -- sh -c '
            '"stat -f -c %T /workspace; echo ok > /workspace/f && cat /workspace/f"')
        self.assertEqual((r.returncode, r.stdout), (0, b"ext2/ext3\nok\n"), r.stderr)
        self.no_loop_left()

    def test_without_usable_loop_devices_the_workspace_is_a_tmpfs(self):
        r = self.in_private_mount_ns(
            'mount --bind /dev/null /dev/loop-control\n'
            '"$NSBOX" info --json > "$NSBOX_STATE_DIR/../info.json"\n'
            'exec "$NSBOX" run --instance-type tiny -- stat -f -c "%T %b %S" /workspace')
        self.assertEqual(r.returncode, 0, r.stderr)
        kind, blocks, bsize = r.stdout.decode().split()
        self.assertEqual((kind, int(blocks) * int(bsize)), ("tmpfs", 64 * MiB))
        with open(os.path.join(self.dirs.base, "info.json")) as f:
            ws = [c for c in json.load(f)["checks"] if c["name"] == "workspace_disk"][0]
        self.assertTrue(ws["detail"].startswith("tmpfs:"), ws)
        self.assertIn("LOOP_CTL_GET_FREE", ws["detail"])

    def test_file_operations_in_a_tmpfs_workspace_as_root(self):
        # The tmpfs kind (the config's choice here; also where loop devices are missing) is
        # mounted inside the sandbox's user namespace, where root is not mapped: the supervisor
        # writes there as the sandbox's user. Before, every write failed with EOVERFLOW.
        cfg = os.path.join(self.dirs.base, "fs.json")
        with open(cfg, "w") as f:
            json.dump({"instance_types": TINY, "pool": {"size": 0},
                       "workspace": {"fs": "tmpfs"}}, f)
        env = {"NSBOX_CONFIG": cfg}
        r = self.nsbox("create", "--instance-type", "tiny", extra_env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        try:
            src = os.path.join(self.dirs.base, "in.txt")
            with open(src, "w") as f:
                f.write("from the host\n")
            r = self.nsbox("cp", "-p", src, f"{sid}:/workspace/d/in.txt", extra_env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.nsbox("exec", sid, "--", "sh", "-c",
                           "stat -f -c %T .; stat -c '%U %a' d/in.txt; cat d/in.txt; "
                           "echo back > out.txt", extra_env=env)
            self.assertEqual(r.stdout.decode().splitlines(),
                             ["tmpfs", "appuser 644", "from the host"], r.stderr)
            dst = os.path.join(self.dirs.base, "out.txt")
            r = self.nsbox("cp", f"{sid}:/workspace/out.txt", dst, extra_env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(dst) as f:
                self.assertEqual(f.read(), "back\n")
        finally:
            self.assertEqual(self.nsbox("rm", sid, extra_env=env).returncode, 0)

    def test_config_chooses_the_filesystem(self):
        cfg = os.path.join(self.dirs.base, "fs.json")
        env = {"NSBOX_CONFIG": cfg}
        # tmpfs on request, also for root: faster to make, counted against memory
        with open(cfg, "w") as f:
            json.dump({"instance_types": TINY, "workspace": {"fs": "tmpfs"}}, f)
        r = self.nsbox("run", "--instance-type", "tiny", "--", "stat", "-f", "-c", "%T %b %S",
                       "/workspace", extra_env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        kind, blocks, bsize = r.stdout.decode().split()
        self.assertEqual((kind, int(blocks) * int(bsize)), ("tmpfs", 64 * MiB))
        self.assertEqual(loop_devices_under(self.dirs.base), [])
        # ext4 on request where it cannot be had: refused with the reason, not a tmpfs
        with open(cfg, "w") as f:
            json.dump({"workspace": {"fs": "ext4"}}, f)
        r = self.in_private_mount_ns('mount --bind /dev/null /dev/loop-control\n'
                                     'exec "$NSBOX" run -- true', env)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"asks for ext4 workspaces", r.stderr)
        self.assertIn(b"LOOP_CTL_GET_FREE", r.stderr)
        # a typo is an error naming the key, not the default
        with open(cfg, "w") as f:
            json.dump({"workspace": {"fs": "xfs"}}, f)
        r = self.nsbox("run", "--", "true", extra_env=env)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"workspace.fs", r.stderr)
        self.assertEqual(self.dirs.leftovers(), [])

    def test_sandboxes_together_cannot_promise_more_than_the_host_has(self):
        # With "reserve": a 220 MiB filesystem for the cache directory: one 150 MiB workspace fits, a second
        # does not while the first may still fill its own, in this runtime directory or in
        # another that shares the cache directory; after rm it does.
        r = self.in_private_mount_ns(
            'mount -t tmpfs -o size=220m,mode=0700 tmpfs "$NSBOX_CACHE_DIR"\n'
            'a=$("$NSBOX" create --instance-type big)\n'
            '"$NSBOX" exec "$a" -- sh -c "head -c 20M /dev/zero > f"\n'
            'if "$NSBOX" create --instance-type big 2> err; then echo SECOND-CREATED; fi\n'
            'cat err >&2\n'
            'mkdir -p other\n'
            'if NSBOX_STATE_DIR="$PWD/other" "$NSBOX" create --instance-type big 2> err\n'
            'then echo OTHER-CREATED; fi\n'
            'cat err >&2\n'
            '"$NSBOX" rm "$a"\n'
            'b=$("$NSBOX" create --instance-type big)\n'
            '"$NSBOX" rm "$b"\n'
            'echo done\n',
            reserve_config(self.dirs, big_type("150MiB")))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"done\n", r.stderr)
        self.assertEqual(r.stderr.count(b"may still be written by the workspaces of 1 other "
                                        b"sandbox "), 2, r.stderr)
        self.assertIn(b"\"reserve\": false", r.stderr)  # the way out, named
        # A sandbox that died without its cleanup (SIGKILL) promises nothing more; and with
        # the older name of thin provisioning (overcommit) and a floor below the filesystem's
        # size, both fit.
        r = self.in_private_mount_ns(
            'mount -t tmpfs -o size=220m,mode=0700 tmpfs "$NSBOX_CACHE_DIR"\n'
            '"$NSBOX" run --instance-type big -- sleep 30 & p=$!\n'
            'until ls "$NSBOX_CACHE_DIR"/????????????.ext4 >/dev/null 2>&1; do sleep 0.05; done\n'
            'kill -9 $p; wait $p || true\n'
            '"$NSBOX" run --instance-type big -- true\n'
            'ls "$NSBOX_CACHE_DIR"/????????????.ext4 >/dev/null && echo left-for-gc\n'
            '"$NSBOX" gc\n'
            'echo \'{"instance_types": {"big": {"cpus": 1, "memory": "512MiB", "pids": 128, '
            '"disk": "150MiB"}}, "workspace": {"overcommit": true, "min_free": "16MiB", '
            '"min_free_percent": 0}}\' > "$NSBOX_CONFIG"\n'
            'a=$("$NSBOX" create --instance-type big)\n'
            'b=$("$NSBOX" create --instance-type big)\n'
            '"$NSBOX" rm "$a" "$b"\n'
            'echo done\n',
            {"NSBOX_CONFIG": os.path.join(self.dirs.base, "config.json")})
        self.assertEqual((r.returncode, r.stdout), (0, b"left-for-gc\ndone\n"), r.stderr)

    def test_what_a_killed_sandbox_wrote_does_not_refuse_the_next(self):
        # A sandbox killed with its supervisor leaves its backing file, with what it wrote,
        # until a gc. A one-shot run runs none of its own, and create's runs at most once a
        # second: before it refuses, the disk check removes the backing files of sandboxes
        # nobody holds the lock of, and looks again. Here the dead sandbox wrote
        # 100 MiB of a 220 MiB filesystem, and the next wants 150 MiB.
        r = self.in_private_mount_ns(
            'mount -t tmpfs -o size=220m,mode=0700 tmpfs "$NSBOX_CACHE_DIR"\n'
            + writing_run(100) +
            'kill -9 $p; wait $p || true\n'
            'df -m "$NSBOX_CACHE_DIR" | awk \'NR == 2 && $3 >= 100 { print "dead-holds-space" }\'\n'
            '"$NSBOX" run --instance-type big -- true\n'
            'echo ran\n'
            'ls -A "$NSBOX_CACHE_DIR" | grep -v "^.workspace-templates$" || echo none-left\n',
            reserve_config(self.dirs, big_type("150MiB")))
        self.assertEqual((r.returncode, r.stdout), (0, b"dead-holds-space\nran\nnone-left\n"),
                         r.stderr)
        self.no_loop_left()

    def test_a_backing_file_without_a_state_directory_here_is_not_reclaimed(self):
        # The reclaim above takes only the files of sandboxes whose state directory is there
        # and unlocked. A file without one may be a live sandbox's of another runtime directory
        # sharing this cache directory (XDG_RUNTIME_DIR set in one shell, not in another):
        # the run is refused and the file stays (gc decides about it).
        r = self.in_private_mount_ns(
            'mount -t tmpfs -o size=220m,mode=0700 tmpfs "$NSBOX_CACHE_DIR"\n'
            'head -c 100M /dev/zero > "$NSBOX_CACHE_DIR/0123456789ab.ext4"\n'
            'if "$NSBOX" run --instance-type big -- true; then echo RAN; fi\n'
            'test -s "$NSBOX_CACHE_DIR/0123456789ab.ext4" && echo kept\n',
            reserve_config(self.dirs, big_type("150MiB")))
        self.assertEqual((r.returncode, r.stdout), (0, b"kept\n"), r.stderr)
        self.assertIn(b"are free on the filesystem", r.stderr)
        self.no_loop_left()

    def test_a_gc_of_another_runtime_directory_keeps_a_live_workspace(self):
        # One cache directory, two runtime directories (a CI job that sets only
        # NSBOX_STATE_DIR; XDG_RUNTIME_DIR set in one shell and not another): a gc of the
        # other leaves the backing file of a live sandbox, which the disk check counts; once
        # that sandbox is dead (its supervisor killed), the same gc removes it.
        r = self.nsbox("create", "--instance-type", "tiny")
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        backing = os.path.join(self.dirs.cache, sid + ".ext4")
        other = {"NSBOX_STATE_DIR": os.path.join(self.dirs.base, "other-state")}
        os.mkdir(other["NSBOX_STATE_DIR"])
        r = self.nsbox("gc", extra_env={**self.env, **other})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(backing), "a live sandbox's workspace file was removed")
        r = self.nsbox("exec", sid, "--", "sh", "-c", "echo kept > f && cat f")
        self.assertEqual((r.returncode, r.stdout), (0, b"kept\n"), r.stderr)
        sup = json.loads(self.nsbox("inspect", sid).stdout)["supervisor_pid"]
        os.kill(sup, signal.SIGKILL)
        self.no_loop_left()

        def gone_after_gc():
            self.assertEqual(self.nsbox("gc", extra_env={**self.env, **other}).returncode, 0)
            return not os.path.exists(backing)

        self.assertTrue(wait_for(gone_after_gc, 10, 0.1), "a dead sandbox's file was kept")
        self.assertEqual(self.nsbox("gc").returncode, 0)
        self.assertEqual(self.dirs.leftovers(), [])

    def test_waiting_pooled_sandboxes_give_way(self):
        # A 220 MiB filesystem for the cache directory and a pool of two 100 MiB sandboxes
        # (docs/pool.md): they promise most of it while they wait. A sandbox wanted now gets
        # its space: one pooled sandbox is deleted for it. A pool fill does not do that.
        r = self.in_private_mount_ns(
            'mount -t tmpfs -o size=220m,mode=0700 tmpfs "$NSBOX_CACHE_DIR"\n'
            '"$NSBOX" pool fill --instance-type big --size 2 >/dev/null\n'
            'a=$("$NSBOX" create --instance-type big)\n'
            'echo created\n'
            '"$NSBOX" pool ls --json | python3 -c "import json,sys; print(len(json.load(sys.stdin)))"\n'
            'if "$NSBOX" pool fill --instance-type big --size 2 2> err; then echo REFILLED; fi\n'
            'cat err >&2\n'
            '"$NSBOX" pool ls --json | python3 -c "import json,sys; print(len(json.load(sys.stdin)))"\n'
            '"$NSBOX" exec "$a" -- true && echo a-alive\n'
            '"$NSBOX" rm "$a"\n'
            '"$NSBOX" pool drain >/dev/null\n'
            'echo done\n',
            reserve_config(self.dirs, big_type("100MiB"), pool={"size": 2}))
        self.assertEqual((r.returncode, r.stdout), (0, b"created\n1\n1\na-alive\ndone\n"),
                         r.stderr)
        self.assertIn(b"may still be written by the workspaces of 2 other sandboxes", r.stderr)
        self.no_loop_left()

    def test_pooled_sandboxes_give_way_only_for_what_the_reclaim_left_missing(self):
        # (Pooled sandboxes are counted in the pool directory: `nsbox pool ls` runs a gc.)
        # A 260 MiB filesystem: a sandbox writes 90 MiB and is killed with its supervisor,
        # after two pooled 100 MiB sandboxes were made beside it (their fill thin, with no
        # floor). A one-shot run (which runs no gc) of 100 MiB then finds about 165 MiB
        # free and 194 promised. Freeing the dead one's file leaves it 39 MiB short: one pooled
        # sandbox covers that, and only one goes. Sized by the free space before the reclaim,
        # both went.
        r = self.in_private_mount_ns(
            'mount -t tmpfs -o size=260m,mode=0700 tmpfs "$NSBOX_CACHE_DIR"\n'
            'python3 -c "import json,sys; c=json.load(open(sys.argv[1])); '
            'c[\'pool\']={\'size\': 2}; c[\'workspace\']={\'min_free\': 0, \'min_free_percent\': 0}; '
            'json.dump(c, open(sys.argv[1] + \'.oc\', \'w\'))" "$NSBOX_CONFIG"\n'
            + writing_run(90) +
            'NSBOX_CONFIG="$NSBOX_CONFIG.oc" "$NSBOX" pool fill --instance-type big --size 2 '
            '>/dev/null\n'
            'kill -9 $p; wait $p || true\n'
            'pooled() { echo pooled $(ls "$NSBOX_STATE_DIR/pool" | grep -vc "[.]"); }\n'
            'pooled\n'
            '"$NSBOX" run --instance-type big -- true\n'
            'echo ran\n'
            'pooled\n'
            '"$NSBOX" pool drain >/dev/null\n',
            reserve_config(self.dirs, big_type("100MiB")))
        self.assertEqual((r.returncode, r.stdout), (0, b"pooled 2\nran\npooled 1\n"),
                         r.stderr)
        self.no_loop_left()

    def test_host_free_space_is_checked_first(self):
        # With "reserve", a limit larger than the host can hold is refused before anything is
        # made.
        st = os.statvfs(self.dirs.cache)
        free = st.f_bavail * st.f_frsize
        huge = {"huge": {"cpus": 1, "memory": "512MiB", "pids": 128,
                         "disk": free + (64 << 30)}}
        env = reserve_config(self.dirs, huge)
        r = self.nsbox("run", "--instance-type", "huge", "--", "true", extra_env=env)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"are free on the filesystem", r.stderr)
        self.assertEqual(self.dirs.leftovers(), [])
        self.no_loop_left()

    def loop_mounted_cache(self, size):
        """Shell lines: a fresh ext4 filesystem of size, in an image file of the test's own,
        loop-mounted on the cache directory (in in_private_mount_ns): a small host disk made
        for the test, which it can fill without touching the machine's."""
        return (f'truncate -s {size} disk.img\n'
                'mkfs.ext4 -q -F -m 0 disk.img\n'
                'mount -o loop disk.img "$NSBOX_CACHE_DIR"\n')

    def test_twelve_medium_sandboxes_start_together_on_a_3_gib_filesystem(self):
        # Thin provisioning (the default): each medium workspace is limited to 10 GiB, none is
        # set aside, so 12 of them (120 GiB of limits) start at once on a 3 GiB filesystem,
        # whose free space stays above the floor (1 GiB). Each still sees its whole limit, and
        # a small one beside them still cannot write past its own 2 GiB.
        r = self.in_private_mount_ns(
            self.loop_mounted_cache("3G") +
            'for i in $(seq 12); do\n'
            '  ( "$NSBOX" create --instance-type medium > id.$i 2> err.$i || cat err.$i >&2 ) &\n'
            'done\n'
            'wait\n'
            'for i in $(seq 12); do\n'
            '  id=$(cat id.$i)\n'
            '  [ -n "$id" ] && "$NSBOX" exec "$id" -- stat -f -c "%T %b %S" /workspace\n'
            'done > sizes\n'
            's=$("$NSBOX" create --instance-type small)\n'
            '"$NSBOX" exec "$s" -- sh -c "head -c 3G /dev/zero > big; echo status=\\$?; '
            'stat -c %s big" > small.out 2>&1\n'
            'ids=$(cat id.*)\n'
            '"$NSBOX" rm $ids "$s"\n'
            'cat sizes\n')
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertEqual(len(lines), 12, r.stderr)
        for line in lines:
            kind, blocks, bsize = line.split()
            self.assertEqual(kind, "ext2/ext3")
            self.assertGreater(int(blocks) * int(bsize), int(0.97 * (10 << 30)))
        with open(os.path.join(self.dirs.base, "small.out")) as f:
            out = f.read()
        self.assertIn("status=1", out)
        self.assertIn("No space left on device", out)
        self.assertLessEqual(int(out.splitlines()[-1]), 2 << 30)
        self.assertEqual(self.dirs.leftovers(), [])
        self.no_loop_left()

    def test_a_full_host_disk_stops_the_writer_not_the_host(self):
        # A 400 MiB host filesystem and three sandboxes of 200 MiB each (thin, with a floor of
        # 16 MiB): all three are created. Two fill 300 MiB of it; the third's write then fails
        # with ENOSPC (at its fsync: the loop device reports the full host disk there), while
        # its supervisor answers, inspect shows the workspace's use and limit and the host's
        # free space, and the other sandboxes still work. A fourth creation is refused under the
        # floor, saying so and how to fix it; rm gives the space back and a creation works again.
        env = write_config(self.dirs, big_type("200MiB"))
        with open(env["NSBOX_CONFIG"]) as f:
            cfg = json.load(f)
        cfg["workspace"] = {"min_free": "16MiB", "min_free_percent": 0}
        with open(env["NSBOX_CONFIG"], "w") as f:
            json.dump(cfg, f)
        r = self.in_private_mount_ns(
            self.loop_mounted_cache("400M") +
            'a=$("$NSBOX" create --instance-type big)\n'
            'b=$("$NSBOX" create --instance-type big)\n'
            'c=$("$NSBOX" create --instance-type big)\n'
            'echo created\n'
            '"$NSBOX" exec "$a" -- sh -c "head -c 150M /dev/zero > f && sync"\n'
            '"$NSBOX" exec "$b" -- sh -c "head -c 150M /dev/zero > f && sync"\n'
            'if "$NSBOX" exec "$c" -- dd if=/dev/zero of=g bs=1M count=150 conv=fsync '
            '2> dd.err; then echo WROTE-PAST-THE-HOST; fi\n'
            'grep -o "No space left on device" dd.err\n'
            '"$NSBOX" inspect "$c" > inspect.json\n'
            '"$NSBOX" exec "$a" -- sh -c "rm f && echo still-works > x && cat x"\n'
            'if "$NSBOX" create --instance-type big 2> err; then echo CREATED-UNDER-THE-FLOOR; fi\n'
            'cat err >&2\n'
            'df -B1 --output=avail "$NSBOX_CACHE_DIR" | tail -1 > free.full\n'
            '"$NSBOX" rm "$a" "$b" "$c"\n'
            'until [ "$(df -B1 --output=avail "$NSBOX_CACHE_DIR" | tail -1)" -gt 300000000 ]; do\n'
            '  sleep 0.05; done\n'
            'd=$("$NSBOX" create --instance-type big)\n'
            '"$NSBOX" rm "$d"\n'
            'echo done\n',
            env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"created\nNo space left on device\nstill-works\ndone\n",
                         r.stderr)
        self.assertIn(b"below the 16 MiB nsbox keeps free there", r.stderr)
        self.assertIn(b"nsbox rm ID", r.stderr)  # the fixes, named
        self.assertIn(b"min_free", r.stderr)
        with open(os.path.join(self.dirs.base, "inspect.json")) as f:
            disk = json.load(f)["disk"]
        self.assertEqual((disk["kind"], disk["limit_bytes"]), ("ext4", 200 * MiB))
        self.assertGreater(disk["used_bytes"], 100 * MiB)  # what dd wrote, as the sandbox sees it
        host = disk["host"]
        self.assertLess(host["free_bytes"], 16 * MiB)
        self.assertGreater(host["fs_bytes"], 300 * MiB)
        self.assertLessEqual(host["fs_bytes"], 400 * MiB)
        self.assertTrue(host["backing_file"].endswith(".ext4"))
        self.assertGreater(host["backing_bytes"], 0)
        self.assertEqual(self.dirs.leftovers(), [])
        self.no_loop_left()


if __name__ == "__main__":
    unittest.main()
