"""End-to-end: `nsbox run` as root, real sandboxes (namespaces, mounts, cgroups, seccomp)."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import unittest

from nsbox_test import (CGROUP_V2_ONLY, CPYTHON, CPYTHON_ID_TESTS, Dirs, NSBOX, UID_BASE,
                        cgroup_leftovers, cpython_on_host, cpython_outcomes,
                        cpython_testsuite_missing, ensure_test_user, is_root, run_nsbox,
                        sandbox_cgroup_file, sigkill_run_and_check_init_dies, signal_pending,
                        wait_for)
from wheels import make_probe_wheel


def setUpModule():
    if not is_root():
        raise unittest.SkipTest("these tests run nsbox as root; test_run_unprivileged covers users")


class RunTest(unittest.TestCase):
    def setUp(self):
        self.dirs = Dirs()
        # a cleanup, not tearDown: it also runs when a subclass's setUp skips the test
        self.addCleanup(self.dirs.cleanup)

    def sh(self, script, *extra, **kw):
        return run_nsbox(["run"] + list(extra) + ["--", "sh", "-c", script], self.dirs, **kw)

    def assertNoLeftovers(self, sandbox_id=None):
        self.assertEqual(self.dirs.leftovers(), [])
        if sandbox_id:
            self.assertEqual(cgroup_leftovers(sandbox_id), [])
            with open("/proc/self/mountinfo") as f:
                self.assertNotIn(sandbox_id, f.read())


class Basics(RunTest):
    @unittest.skipIf(not shutil.which("capsh"), "needs capsh (libcap2-bin)")
    def test_an_owner_not_taken_is_said(self):
        # The sandbox's user namespace is made by an id of its own slot: without CAP_SETUID that
        # id cannot be taken, and the message says so rather than guessing at the namespaces.
        r = run_nsbox(["run", "--", "true"], self.dirs,
                      wrap=lambda cmd: ["capsh", "--drop=cap_setuid", "--", "-c",
                                        'exec "$0" "$@"'] + cmd)
        self.assertEqual(r.returncode, 125)
        self.assertRegex(r.stderr.decode(), r"cannot take uid \d+ to make the sandbox's user "
                         r"namespace: Operation not permitted")
        self.assertNoLeftovers()

    def test_python_runs_and_prints(self):
        r = run_nsbox(["run", "--", "python3", "-c", "import sys; print(6*7, sys.version_info[0])"],
                      self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"42 3\n")

    def test_pip_installs_into_the_users_site(self):
        """pip installs as in the hosted sandbox's python image: into the user's site in the
        workspace, where Debian's Python alone refuses it (PEP 668: externally managed)."""
        if subprocess.run(["/usr/bin/python3", "-m", "pip", "--version"],
                          capture_output=True).returncode:
            self.skipTest("the host's /usr/bin/python3 has no pip (Debian's python3-pip, "
                          "in scripts/packages.txt)")
        ws = os.path.join(self.dirs.base, "ws")
        os.mkdir(ws, 0o755)
        wheel = make_probe_wheel(ws)
        for path in (ws, os.path.join(ws, wheel)):
            os.chown(path, 4242, 4343)
        r = run_nsbox(["run", "--workspace", ws, "--", "sh", "-c",
                       f"python3 -m pip install -q --no-index --disable-pip-version-check {wheel}"
                       " && python3 -c 'import nsboxprobe; print(nsboxprobe.VALUE)'"], self.dirs,
                      timeout=120)
        self.assertEqual((r.returncode, r.stdout), (0, b"42\n"), r.stderr)
        self.assertTrue(os.path.isdir(os.path.join(ws, ".local/lib")), os.listdir(ws))

    def test_workspace_writable_root_and_usr_not(self):
        # The error must be EROFS, not EACCES: appuser could not write these even on a
        # writable mount, and only a read-only one makes the kernel say so before it checks.
        r = self.sh("cd /workspace && echo data > f && cat f && pwd;"
                    "for f in /x /usr/x /etc/x; do touch $f 2>&1 || true; done;"
                    "echo tmp > /tmp/t && cat /tmp/t")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertEqual(lines[:2] + lines[-1:], ["data", "/workspace", "tmp"])
        self.assertEqual(len(lines), 6, lines)
        for f, line in zip(("/x", "/usr/x", "/etc/x"), lines[2:5]):
            self.assertIn(f"'{f}': Read-only file system", line)

    def test_starts_in_workspace_as_appuser(self):
        r = self.sh("pwd; id -u; id -g; id -un; echo $HOME")
        self.assertEqual(r.stdout, b"/workspace\n1000\n1000\nappuser\n/workspace\n", r.stderr)

    def test_identity_capabilities_nnp_seccomp(self):
        r = self.sh("cat /proc/self/status")
        self.assertEqual(r.returncode, 0, r.stderr)
        status = dict(line.split(":", 1) for line in r.stdout.decode().splitlines() if ":" in line)
        self.assertEqual(status["Uid"].split(), ["1000"] * 4)
        self.assertEqual(status["Gid"].split(), ["1000"] * 4)
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            self.assertEqual(int(status[cap].strip(), 16), 0, cap)
        self.assertEqual(status["NoNewPrivs"].strip(), "1")
        self.assertEqual(status["Seccomp"].strip(), "2")

    def test_sandbox_uid_is_unprivileged_on_host(self):
        # The sandbox's processes run on the host as its own uid from nsbox's range, never root.
        p = subprocess.Popen([NSBOX, "run", "--", "sh", "-c", "echo up; sleep 30"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.dirs.env())
        try:
            self.assertEqual(p.stdout.readline(), b"up\n")
            uids = {}
            todo = [p.pid]
            while todo:
                pid = todo.pop()
                for t in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{t}/children") as f:
                        todo += [int(c) for c in f.read().split()]
                if pid != p.pid:
                    with open(f"/proc/{pid}/status") as f:
                        st = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
                    uids[pid] = [int(x) for x in st["Uid"].split()]
            self.assertGreaterEqual(len(uids), 2, uids)  # init and sh (and sleep)
            for u in uids.values():
                self.assertTrue(all(x >= UID_BASE for x in u), uids)
        finally:
            # SIGTERM: the command ends and nsbox cleans up (a SIGKILL would leave the
            # sandbox's cgroups for a gc that never comes once the test's directories are gone)
            p.terminate()
            p.wait()
            p.stdout.close()
            p.stderr.close()

    def test_cpython_id_tests_pass_as_on_the_host(self):
        # A sandbox has the ids of an ordinary system (docs/decisions.md "Identity"): CPython's
        # tests of chown, setuid and setgroups give what they give on the host as a user.
        why = cpython_testsuite_missing()
        if why:
            self.skipTest(why)
        host = cpython_on_host(ensure_test_user())
        self.assertIn(b"== Tests result: SUCCESS ==", host.stdout, host.stdout + host.stderr)
        r = run_nsbox(["run", "--", CPYTHON] + CPYTHON_ID_TESTS, self.dirs, timeout=300)
        self.assertEqual(cpython_outcomes(r.stdout), cpython_outcomes(host.stdout),
                         r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(any(l.startswith("test_chown_without_permission ") and l.endswith("ok")
                            for l in cpython_outcomes(r.stdout)), r.stdout)

    def test_system_users_and_groups(self):
        # the generated /etc/passwd and /etc/group of the host image: Debian's system entries,
        # root first, every one of them a mapped id
        r = self.sh("head -1 /etc/passwd; for u in daemon bin sys nobody; do id -u $u; done;"
                    "getent group nogroup adm | cut -d: -f1,3; cat /proc/self/uid_map")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertTrue(lines[0].startswith("root:x:0:0:"), lines)
        self.assertEqual(lines[1:7], ["1", "2", "3", "65534", "nogroup:65534", "adm:4"])
        self.assertEqual(lines[7].split()[0::2], ["0", "65536"])

    def test_given_directory_keeps_its_owner(self):
        # --workspace DIR as root goes through an idmapped mount: the directory's owner is
        # appuser inside, and what the sandbox creates belongs to that owner on the host, not
        # to an unknown uid.
        ws = os.path.join(self.dirs.base, "proj")
        os.mkdir(ws, 0o755)
        with open(os.path.join(ws, "main.py"), "w") as f:
            f.write("print('hi')\n")
        other = os.path.join(ws, "others.txt")
        with open(other, "w") as f:
            f.write("not yours\n")
        os.chown(ws, 4242, 4343)
        os.chown(os.path.join(ws, "main.py"), 4242, 4343)
        os.chown(other, 5151, 5151)
        r = run_nsbox(["run", "--workspace", ws, "--", "sh", "-c",
                       "stat -c '%u %n' main.py others.txt; python3 main.py > out.txt; "
                       "echo more >> main.py; mkdir sub && echo x > sub/f; "
                       "echo no >> others.txt 2>/dev/null || echo refused"], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode().splitlines(),
                         ["1000 main.py", "65534 others.txt", "refused"])
        for name in ("out.txt", "main.py", "sub", "sub/f"):
            st = os.stat(os.path.join(ws, name))
            self.assertEqual((st.st_uid, st.st_gid), (4242, 4343), name)
        with open(os.path.join(ws, "out.txt")) as f:
            self.assertEqual(f.read(), "hi\n")
        with open(other) as f:
            self.assertEqual(f.read(), "not yours\n")
        # and no set-id program can be made there (it would be the owner's on the host)
        r = run_nsbox(["run", "--workspace", ws, "--", "sh", "-c",
                       "cp /bin/true t && chmod u+s t; ls -l t"], self.dirs)
        self.assertFalse(os.stat(os.path.join(ws, "t")).st_mode & 0o6000, r.stdout)

    def test_root_owned_directory_is_not_mapped_to_the_sandbox(self):
        # Root is never mapped into a sandbox: a root-owned directory is bound plainly, so the
        # sandbox writes there only what the mode lets others write. In particular a setuid-root
        # program there cannot be rewritten, not even through a shared mapping (which, unlike
        # write(), keeps the set-id bits).
        ws = os.path.join(self.dirs.base, "rootproj")
        os.mkdir(ws, 0o755)
        prog = os.path.join(ws, "helper")
        shutil.copy("/bin/true", prog)
        os.chmod(prog, 0o4755)
        with open(prog, "rb") as f:
            before = f.read()
        code = ("import mmap, os\n"
                "try:\n"
                "    fd = os.open('helper', os.O_RDWR)\n"
                "    m = mmap.mmap(fd, 4096)\n"
                "    m[:4] = b'PWND'\n"
                "    m.flush()\n"
                "    print('WROTE')\n"
                "except OSError as e:\n"
                "    print('refused', e.errno)\n"
                "try:\n"
                "    open('new.txt', 'w').write('x')\n"
                "    print('CREATED')\n"
                "except OSError as e:\n"
                "    print('refused', e.errno)\n")
        r = run_nsbox(["run", "--workspace", ws, "--", "python3", "-c", code], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode().split(), ["refused", "13", "refused", "13"])
        with open(prog, "rb") as f:
            self.assertEqual(f.read(), before)
        self.assertEqual(os.stat(prog).st_mode & 0o7777, 0o4755)
        self.assertFalse(os.path.exists(os.path.join(ws, "new.txt")))

    def test_relative_cwd_is_in_the_workspace(self):
        ws = os.path.join(self.dirs.base, "ws")
        os.makedirs(os.path.join(ws, "src", "pkg"))
        r = run_nsbox(["run", "--workspace", ws, "--cwd", "src/pkg", "--", "pwd"], self.dirs)
        self.assertEqual(r.stdout, b"/workspace/src/pkg\n", r.stderr)
        r = run_nsbox(["run", "--cwd", "/tmp", "--", "pwd"], self.dirs)
        self.assertEqual(r.stdout, b"/tmp\n", r.stderr)

    def test_hostname_and_clean_environment(self):
        r = self.sh("hostname; env | sort", "-e", "FOO=bar", "-e", "PATH=/usr/bin:/bin")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertRegex(lines[0], r"^nsbox-[0-9a-f]{12}$")
        env = dict(l.split("=", 1) for l in lines[1:] if "=" in l)
        self.assertEqual(env.get("FOO"), "bar")
        self.assertEqual(env.get("PATH"), "/usr/bin:/bin")
        self.assertNotIn("HOSTENV_SECRET", env)
        self.assertNotIn("NSBOX_STATE_DIR", env)

    def test_own_hostname_resolves_without_dns(self):
        """Code that looks up its own host name (socket.gethostbyname(socket.gethostname()),
        `getent hosts $(hostname)`) gets an answer with network none, from /etc/hosts, as
        Debian and Docker give one; the file is the sandbox's own and read-only."""
        r = self.sh('hostname; getent hosts "$(hostname)"; python3 -c "import socket; '
                    'print(socket.gethostbyname(socket.gethostname()))"; '
                    'echo x >> /etc/hosts || echo READONLY')
        self.assertEqual(r.returncode, 0, r.stderr)
        name, entry, addr, ro = r.stdout.decode().splitlines()
        self.assertRegex(name, r"^nsbox-[0-9a-f]{12}$")
        self.assertEqual(entry.split(), ["127.0.1.1", name])
        self.assertEqual(addr, "127.0.1.1")
        self.assertEqual(ro, "READONLY")
        # localhost is still there, and another sandbox has its own name in its own file
        r2 = self.sh('hostname; getent ahostsv4 localhost | head -1; cat /etc/hosts')
        name2, localhost, hosts = r2.stdout.decode().split("\n", 2)
        self.assertNotEqual(name2, name)
        self.assertIn("127.0.0.1", localhost)
        self.assertIn(f"127.0.1.1\t{name2}\n", hosts)
        self.assertNotIn(name, hosts)

    def test_workspace_that_is_not_a_directory_is_refused(self):
        afile = os.path.join(self.dirs.base, "afile")
        with open(afile, "w") as f:
            f.write("kept\n")
        missing = os.path.join(self.dirs.base, "missing", "dir")
        for path, why in ((missing, "No such file or directory"), (afile, "is not a directory")):
            r = self.sh("echo RAN", "--workspace", path)
            self.assertEqual(r.returncode, 125, r.stderr)
            self.assertEqual(r.stdout, b"")
            self.assertIn(f"workspace {path}".encode(), r.stderr)
            self.assertIn(why.encode(), r.stderr)
        self.assertFalse(os.path.exists(os.path.dirname(missing)))  # nothing made for it
        with open(afile) as f:
            self.assertEqual(f.read(), "kept\n")
        self.assertNoLeftovers()

    def test_a_workspace_with_a_mount_below_it(self):
        # The sandbox's user namespace locks the mounts below the directory to it, and the
        # kernel refused the bind that left them out: "cannot bind DIR: Invalid argument".
        # Bound with them now, as the caller sees the directory. (The mount is made in a mount
        # namespace of the test's own.)
        ws = os.path.join(self.dirs.base, "proj")
        os.makedirs(os.path.join(ws, "data"))
        script = ('mount -t tmpfs t "$1/data" && echo inside > "$1/data/f" && '
                  'exec "$2" run --workspace "$1" -- cat /workspace/data/f')
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                            "sh", ws, NSBOX], env=self.dirs.env(), capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"inside\n")
        self.assertEqual(os.listdir(os.path.join(ws, "data")), [])  # it was in that namespace
        self.assertNoLeftovers()

    def test_host_root_and_kernel_file_systems_are_refused_as_workspaces(self):
        # --workspace /proc showed the sandbox the host's processes; / and /dev/shm the host's
        # files and shared memory. Refused before anything is made, in one line (no note).
        for path in ("/", "/proc", "/proc/1", "/sys/fs/cgroup", "/dev", "/dev/shm"):
            r = self.sh("ls /workspace; echo RAN", "--workspace", path)
            self.assertEqual(r.returncode, 125, (path, r.stderr))
            self.assertEqual(r.stdout, b"", path)
            self.assertIn(b"refusing to hand it to a sandbox", r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        # /proc's links to a process's files may lead into another mount namespace: refused
        # even where they lead to a directory that may be given (here /etc, below)
        r = self.sh("ls /workspace; echo RAN", "--workspace", "/proc/self/root/etc")
        self.assertEqual((r.returncode, r.stdout), (125, b""), r.stderr)
        self.assertIn(b"give the directory's own path", r.stderr)
        # a system directory still runs (read-only for the sandbox), but without the advice to
        # chown it
        r = self.sh("test -r /workspace/passwd && echo RAN", "--workspace", "/etc")
        self.assertEqual(r.stdout, b"RAN\n", r.stderr)
        self.assertIn(b"it is a system directory", r.stderr)
        self.assertNotIn(b"chown", r.stderr)
        self.assertNoLeftovers()

    def test_a_kernel_file_system_mounted_elsewhere_is_refused_as_a_workspace(self):
        # a proc of its own (another superblock than the host's /proc, at a path that says
        # nothing of /proc) shows the host's processes all the same: refused by its type.
        # Mounted in a mount namespace of nsbox's own, gone with it.
        d = os.path.join(self.dirs.base, "p")
        os.mkdir(d)

        def own_proc(cmd):
            return ["unshare", "-m", "sh", "-c", 'mount -t proc proc "$0" && exec "$@"', d] + cmd
        r = self.sh("cat /workspace/1/comm; echo RAN", "--workspace", d, wrap=own_proc)
        self.assertEqual((r.returncode, r.stdout), (125, b""), r.stderr)
        self.assertIn(b"is a kernel file system", r.stderr)
        self.assertNoLeftovers()

    def test_default_environment_and_a_session_of_its_own(self):
        # Nothing given with -e: the environment is nsbox's alone. The command leads a new
        # session without a controlling terminal, so even with TIOCSTI allowed it could not
        # type into the caller's terminal (the attack suite checks the seccomp side).
        r = run_nsbox(["run", "--", "python3", "-c",
                       "import os, json\n"
                       "try:\n    os.open('/dev/tty', os.O_RDWR); tty = 'has a terminal'\n"
                       "except OSError as e:\n    tty = e.strerror\n"
                       "print(json.dumps([dict(os.environ), os.getsid(0) == os.getpid(), tty]))"],
                      self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        env, leader, tty = json.loads(r.stdout)
        self.assertEqual(env, {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/workspace", "USER": "appuser", "LOGNAME": "appuser", "SHELL": "/bin/sh",
            "LANG": "C.UTF-8", "PIP_BREAK_SYSTEM_PACKAGES": "1"})
        self.assertTrue(leader)
        self.assertEqual(tty, "No such device or address")

    def test_only_loopback_network(self):
        r = run_nsbox(["run", "--", "python3", "-c",
                       "import socket; print([n for _, n in socket.if_nameindex()])"], self.dirs)
        self.assertEqual(r.stdout, b"['lo']\n", r.stderr)

    def test_host_loopback_listener_unreachable(self):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        try:
            # Reachable from the host: the check below is meaningful.
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            srv.accept()[0].close()
            code = ("import socket\n"
                    "try:\n"
                    f"    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
                    "    print('CONNECTED')\n"
                    "except OSError as e:\n"
                    "    print('refused', e.errno)\n")
            r = run_nsbox(["run", "--", "python3", "-c", code], self.dirs)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith(b"refused"), r.stdout)
        finally:
            srv.close()

    def test_host_processes_invisible(self):
        r = self.sh("ls /proc | grep -E '^[0-9]+$' | sort -n | tr '\\n' ' '")
        pids = [int(p) for p in r.stdout.split()]
        self.assertIn(1, pids)
        self.assertLess(max(pids), 20, pids)  # only the sandbox's own few processes
        self.assertLessEqual(len(pids), 6, pids)

    def test_all_seven_namespaces_are_the_sandbox_own(self):
        # The IPC namespace in particular has no other test: a System V queue or segment of
        # the host would otherwise be shared.
        kinds = ("ipc", "mnt", "net", "pid", "user", "uts", "cgroup")
        r = self.sh("for k in " + " ".join(kinds) + "; do readlink /proc/self/ns/$k; done")
        self.assertEqual(r.returncode, 0, r.stderr)
        inside = r.stdout.decode().split()
        self.assertEqual([x.split(":")[0] for x in inside], list(kinds), inside)
        for k, x in zip(kinds, inside):
            self.assertNotEqual(x, os.readlink(f"/proc/self/ns/{k}"), k)

    def test_minimal_dev_and_sys_only_cgroup(self):
        r = self.sh("ls /dev | sort | tr '\\n' ' '; echo; ls -A /sys /sys/fs | tr '\\n' ' '")
        dev, sys_ = r.stdout.decode().split("\n")[:2]
        names = set(dev.split())
        self.assertTrue({"null", "zero", "full", "random", "urandom", "tty", "pts", "shm",
                         "ptmx"} <= names, names)
        self.assertNotIn("sda", names)
        self.assertNotIn("kmsg", names)
        self.assertNotIn("mem", names)
        # /sys holds the sandbox's own cgroup and nothing else (test_cgroup_view.py)
        self.assertEqual(sys_.split(), ["/sys:", "fs", "/sys/fs:", "cgroup"], sys_)

    def test_dev_nodes_work(self):
        r = self.sh("head -c 4 /dev/zero | od -An -tx1; head -c 16 /dev/urandom | wc -c;"
                    "echo gone > /dev/null && echo ok")
        self.assertEqual(r.stdout.split(), [b"00", b"00", b"00", b"00", b"16", b"ok"], r.stderr)

    def test_proc_masked_and_readonly(self):
        # Paths this kernel has are masked (read as empty); absent ones stay absent.
        masked = [p for p in ("kcore", "keys", "timer_list", "sched_debug")
                  if os.path.exists("/proc/" + p)]
        self.assertIn("keys", masked)  # at least one is present here: the test means something
        script = "".join(f"wc -c < /proc/{p};" for p in masked)
        r = self.sh(script + "echo 1 > /proc/sys/kernel/ns_last_pid 2>/dev/null && echo SYS-W;"
                    "echo b > /proc/sysrq-trigger 2>/dev/null && echo SYSRQ-W;"
                    "touch /proc/sys/x 2>/dev/null && echo SYS-W; echo end")
        self.assertEqual(r.stdout.split(), [b"0"] * len(masked) + [b"end"], r.stderr)
        self.assertIn(b"Read-only file system", r.stderr)

    def test_proc_paths_each_masked_or_read_only(self):
        # Every path the issue lists, as far as this kernel has it, by the sandbox's own mount
        # table (the lists are written out here, not taken from nsbox's code): a file is
        # covered by /dev/null, a directory by an empty read-only tmpfs, and the rest is
        # read-only.
        files = ("kcore", "keys", "timer_list", "sched_debug", "latency_stats")
        dirs = ("acpi", "scsi")
        read_only = ("sys", "sysrq-trigger", "irq", "bus", "fs")
        present = [p for p in files + dirs + read_only if os.path.exists("/proc/" + p)]
        self.assertTrue({"keys", "sys"} <= set(present), present)  # the test means something
        r = self.sh("cat /proc/self/mountinfo")
        self.assertEqual(r.returncode, 0, r.stderr)
        mounts = {}
        for line in r.stdout.decode().splitlines():
            f = line.split()
            sep = f.index("-")
            mounts[f[4]] = {"root": f[3], "opts": f[5].split(","), "fstype": f[sep + 1]}
        for p in present:
            m = mounts.get("/proc/" + p)
            self.assertIsNotNone(m, f"/proc/{p} is not covered: {sorted(mounts)}")
            if p in files:
                self.assertEqual(m["root"], "/null", (p, m))
            elif p in dirs:
                self.assertEqual(m["fstype"], "tmpfs", (p, m))
                self.assertIn("ro", m["opts"], (p, m))
            else:
                self.assertEqual((m["fstype"], m["root"]), ("proc", "/" + p), (p, m))
                self.assertIn("ro", m["opts"], (p, m))

    def test_fds_above_2_closed(self):
        rd, wr = os.pipe()
        try:
            r = run_nsbox(["run", "--", "python3", "-c",
                           "import os; print(sorted(int(f) for f in os.listdir('/proc/self/fd')))"],
                          self.dirs, pass_fds=(rd, wr))
        finally:
            os.close(rd)
            os.close(wr)
        # 0-2 plus the descriptor listdir itself holds open
        self.assertEqual(r.stdout, b"[0, 1, 2, 3]\n", r.stderr)

    def test_stdin_passes_through(self):
        r = run_nsbox(["run", "--", "python3", "-c", "import sys; print(sys.stdin.read().upper())"],
                      self.dirs, input=b"hello")
        self.assertEqual(r.stdout, b"HELLO\n")

    def test_stderr_separate(self):
        r = self.sh("echo out; echo err >&2")
        self.assertEqual((r.stdout, r.stderr), (b"out\n", b"err\n"))

    def test_dev_stdin_stdout_and_stderr_reopen_the_callers_pipes(self):
        # "echo x > /dev/stderr", "cat /dev/stdin": they reopen the caller's pipe through
        # /proc/self/fd, whose mode (0600, the caller's) refused the sandbox's uid. Cold runs
        # and exec; pooled runs hand the descriptors over as exec does (test_pool).
        script = "cat /dev/stdin; echo out > /dev/stdout; echo err > /dev/stderr"
        r = self.sh(script, input=b"in\n")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"in\nout\n", b"err\n"))
        sid = run_nsbox(["create"], self.dirs, check=True).stdout.decode().strip()
        r = run_nsbox(["exec", "-i", sid, "--", "sh", "-c", script], self.dirs, input=b"in\n")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"in\nout\n", b"err\n"))
        run_nsbox(["rm", sid], self.dirs, check=True)
        # A named FIFO's mode is a file's on disk: left as it was.
        fifo = os.path.join(self.dirs.base, "fifo")
        os.mkfifo(fifo, 0o600)
        fd = os.open(fifo, os.O_RDWR)  # (O_RDWR: no wait for a writer)
        try:
            r = subprocess.run([NSBOX, "run", "--", "true"], stdin=fd, capture_output=True,
                               env=self.dirs.env(), timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
        finally:
            os.close(fd)
        self.assertEqual(os.stat(fifo).st_mode & 0o777, 0o600)

    def test_rlimits(self):
        r = self.sh("ulimit -c; ulimit -n")
        self.assertEqual(r.stdout.split(), [b"0", b"4096"])


class SpecAndLimits(RunTest):
    def write_spec(self, obj):
        import json
        path = os.path.join(self.dirs.base, "spec.json")
        with open(path, "w") as f:
            json.dump(obj, f)
        return path

    def test_spec_file_then_flags(self):
        spec = self.write_spec({"instance_type": "small", "env": {"A": "from-spec", "B": "x"}})
        # --spec is applied first wherever it stands; flags add to it and override it.
        r = self.sh("echo $A $B $C", "-e", "C=flag", "--spec", spec, "-e", "B=flag")
        self.assertEqual(r.stdout, b"from-spec flag flag\n", r.stderr)

    def test_spec_from_standard_input_even_a_pipe_and_bounded(self):
        import json
        spec = json.dumps({"env": {"A": "from-stdin"}}).encode()
        # "-" is standard input itself, not /dev/stdin (minimal systems have none); a pipe
        # works as well as a file
        r = self.sh("echo $A", "--spec", "-", input=spec)
        self.assertEqual((r.returncode, r.stdout), (0, b"from-stdin\n"), r.stderr)
        # a socket, which open("/dev/stdin") refuses (ENXIO): "-" must read fd 0 itself
        mine, theirs = socket.socketpair()
        with mine, theirs:
            mine.sendall(spec)
            mine.shutdown(socket.SHUT_WR)
            r = subprocess.run([NSBOX, "run", "--spec", "-", "--", "sh", "-c", "echo $A"],
                               stdin=theirs.fileno(), capture_output=True, timeout=60,
                               env=self.dirs.env())
        self.assertEqual((r.returncode, r.stdout), (0, b"from-stdin\n"), r.stderr)
        # a stream longer than the limit is refused, whole, before anything is built
        r = self.sh("true", "--spec", "-", input=b" " * (4 << 20) + b"{}")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"--spec -: more than 4194304 bytes", r.stderr)
        r = self.sh("true", "--spec", self.dirs.base)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"not a file of at most", r.stderr)
        self.assertNoLeftovers()

    def test_spec_errors_name_the_key(self):
        for obj, needle in (({"ttl_secondz": 5}, b"ttl_secondz"),
                            ({"ttl_seconds": "5"}, b"ttl_seconds"),
                            ({"instance_type": "huge"}, b"huge"),
                            ({"network": {"allow": ["https://x.example"]}}, b"scheme")):
            r = self.sh("true", "--spec", self.write_spec(obj))
            self.assertEqual(r.returncode, 125, obj)
            self.assertIn(needle, r.stderr, obj)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertNoLeftovers()

    def test_instance_type_limits_applied(self):
        p = subprocess.Popen([os.environ.get("NSBOX_BIN", "nsbox"), "run", "--instance-type",
                              "small", "--", "sh", "-c", "hostname; sleep 60"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.dirs.env())
        try:
            sid = p.stdout.readline().decode().strip().split("-", 1)[1]
            # small: 1 GiB of memory, 256 pids, 1 CPU (v1 and v2 name and write them apart)
            for controller, v1, v2, want1, want2 in (
                    ("memory", "memory.limit_in_bytes", "memory.max", str(1 << 30), str(1 << 30)),
                    ("pids", "pids.max", "pids.max", "256", "256"),
                    ("cpu", "cpu.cfs_quota_us", "cpu.max", "100000", "100000 100000")):
                self.assertEqual(sandbox_cgroup_file(sid, controller, v1, v2),
                                 want2 if CGROUP_V2_ONLY else want1, (v1, v2))
        finally:
            p.terminate()
            p.communicate(timeout=20)
        self.assertEqual(cgroup_leftovers(sid), [])

    def test_pids_limit_holds_a_fork_flood(self):
        code = ("import os, signal, time\n"
                "kids = []\n"
                "err = None\n"
                "for i in range(600):\n"
                "    try:\n"
                "        pid = os.fork()\n"
                "    except OSError as e:\n"
                "        err = e.errno; break\n"
                "    if pid == 0:\n"
                "        time.sleep(30); os._exit(0)\n"
                "    kids.append(pid)\n"
                "print(len(kids), err)\n"
                "for k in kids: os.kill(k, signal.SIGKILL)\n")
        r = run_nsbox(["run", "--instance-type", "small", "--", "python3", "-c", code],
                      self.dirs, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        forked, err = r.stdout.split()
        self.assertLess(int(forked), 256)  # small: 256 pids in all
        self.assertGreater(int(forked), 100)
        self.assertEqual(int(err), 11)  # EAGAIN


class CgroupV2Root(RunTest):
    """Root on a cgroup-v2-only machine, in a cgroup that holds processes: what a login
    session's scope or a service is under systemd, where most users run `sudo nsbox run`."""

    def setUp(self):
        super().setUp()
        if not CGROUP_V2_ONLY or not is_root():
            self.skipTest("needs root and cgroup v2 alone (this host has v1; this runs in the "
                          "cgroup v2 VM of tests/vm)")
        self.session = f"/sys/fs/cgroup/nsbox-test-session-{os.getpid()}"
        os.mkdir(self.session)
        self.addCleanup(os.rmdir, self.session)

    def test_root_in_a_busy_cgroup_puts_sandboxes_below_the_top_nsbox(self):
        # the caller's shell stays in the session cgroup: nsbox moves nobody
        p = subprocess.Popen(["sh", "-c", f"echo $$ > {self.session}/cgroup.procs; exec \"$@\"",
                              "sh", NSBOX, "run", "--instance-type", "small", "--", "sh", "-c",
                              "hostname; sleep 30"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.dirs.env())
        try:
            line = p.stdout.readline().decode().strip()
            self.assertTrue(line.startswith("nsbox-"), (line, p.stderr.read(2000) if p.poll()
                                                        is not None else ""))
            sid = line.split("-", 1)[1]
            cg = f"/sys/fs/cgroup/nsbox/nsbox-{sid}"
            self.assertTrue(os.path.isdir(cg), os.listdir("/sys/fs/cgroup"))
            with open(os.path.join(cg, "memory.max")) as f:
                self.assertEqual(f.read().strip(), str(1 << 30))
            with open(os.path.join(self.session, "cgroup.procs")) as f:
                self.assertEqual(f.read().split(), [str(p.pid)])
            with open(os.path.join(self.session, "cgroup.subtree_control")) as f:
                self.assertEqual(f.read().strip(), "")
        finally:
            p.terminate()
            _, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        self.assertFalse(os.path.exists(cg))
        self.assertNoLeftovers(sid)

    def test_a_delegated_parent_still_wins(self):
        # delegated as an admin would: the top enables the controllers for it first
        with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as f:
            f.write("+memory +cpu +pids")
        parent = f"/sys/fs/cgroup/nsbox-test-parent-{os.getpid()}"
        os.mkdir(parent)
        self.addCleanup(os.rmdir, parent)
        r = subprocess.run(["sh", "-c", f"echo $$ > {self.session}/cgroup.procs; exec \"$@\"",
                            "sh", NSBOX, "run", "--", "sh", "-c", "hostname"],
                           capture_output=True, timeout=60,
                           env=self.dirs.env({"NSBOX_CGROUP_PARENT": "/" + os.path.basename(parent)}))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(parent, "cgroup.subtree_control")) as f:
            self.assertIn("memory", f.read().split())  # nsbox made its sandbox there


class OutOfMemory(RunTest):
    def test_memory_bomb_is_killed_and_reported(self):
        r = run_nsbox(["run", "--instance-type", "small", "--", "python3", "-c",
                       "b = []\nwhile True: b.append(bytearray(64 << 20))"],
                      self.dirs, timeout=120)
        self.assertEqual(r.returncode, 137, r.stderr)
        self.assertIn(b"out of memory: the instance type's limit (small, 1024 MiB) killed 1 process",
                      r.stderr)
        self.assertNoLeftovers()

    def test_no_report_without_oom(self):
        r = self.sh("kill -9 $$")
        self.assertEqual(r.returncode, 137)
        self.assertNotIn(b"out of memory", r.stderr)


class Signals(RunTest):
    def start(self, script):
        p = subprocess.Popen(["sh", "-c", 'exec "$@"', "sh", os.environ.get("NSBOX_BIN", "nsbox"),
                              "run", "--", "sh", "-c", script],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.dirs.env())
        return p

    def wait_ready(self, p):
        line = p.stdout.readline()
        self.assertEqual(line, b"ready\n")

    def test_sigint_forwarded(self):
        p = self.start('trap "echo got-int; exit 42" INT; echo ready; while :; do sleep 0.05; done')
        self.wait_ready(p)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 42, err)
        self.assertEqual(out, b"got-int\n")

    def test_sigterm_ends_command(self):
        p = self.start("echo ready; exec sleep 100")
        self.wait_ready(p)
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=20)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM)

    def test_second_interrupt_kills_stubborn_command(self):
        p = self.start('trap "" INT TERM; echo ready; while :; do sleep 0.05; done')
        self.wait_ready(p)
        p.send_signal(signal.SIGINT)
        # the second must come after nsbox took the first, or the two are one (a slow machine
        # may take longer than a fixed pause)
        self.assertTrue(wait_for(lambda: not signal_pending(p.pid, signal.SIGINT)),
                        "nsbox never took the first SIGINT")
        time.sleep(0.3)
        self.assertIsNone(p.poll())
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=20)
        self.assertEqual(p.returncode, 128 + signal.SIGKILL)
        self.assertNoLeftovers()


class Cleanup(RunTest):
    def sandbox_id(self, out):
        m = re.search(rb"nsbox-([0-9a-f]{12})", out)
        self.assertIsNotNone(m, out)
        return m.group(1).decode()

    def test_nothing_left_after_normal_exit(self):
        r = self.sh("hostname; echo x > /workspace/f; mkdir -p /workspace/d/e; chmod 0 /workspace/d")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNoLeftovers(self.sandbox_id(r.stdout))

    def test_nothing_left_after_crash(self):
        r = self.sh("hostname; kill -SEGV $$")
        self.assertEqual(r.returncode, 139)
        self.assertNoLeftovers(self.sandbox_id(r.stdout))

    def test_nothing_left_after_failed_exec(self):
        r = run_nsbox(["run", "--", "/no/such/binary"], self.dirs)
        self.assertEqual(r.returncode, 127)
        self.assertNoLeftovers()

    def test_given_workspace_is_kept(self):
        ws = os.path.join(self.dirs.base, "keep")
        os.mkdir(ws)
        os.chmod(ws, 0o777)
        with open(os.path.join(ws, "seed"), "w") as f:
            f.write("seed")
        r = self.sh("cat /workspace/seed; echo new > /workspace/out", "--workspace", ws)
        self.assertEqual(r.stdout, b"seed", r.stderr)
        self.assertEqual(sorted(os.listdir(ws)), ["out", "seed"])
        self.assertNoLeftovers()

    def test_sigkill_of_nsbox_then_gc(self):
        p = subprocess.Popen([os.environ.get("NSBOX_BIN", "nsbox"), "run", "--", "sh", "-c",
                              "hostname; echo ready; sleep 300"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.dirs.env())
        sid = self.sandbox_id(p.stdout.readline())
        self.assertEqual(p.stdout.readline(), b"ready\n")
        sigkill_run_and_check_init_dies(self, p)
        # Leftovers exist until gc runs ...
        self.assertTrue(self.dirs.leftovers())
        r = run_nsbox(["gc", "-v"], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"removed 1 leftover sandbox", r.stdout)
        self.assertIn(f"gc: removed sandbox {sid}\n".encode(), r.stderr)  # -v's own line
        self.assertNoLeftovers(sid)

    def test_gc_leaves_live_sandboxes_alone(self):
        p = subprocess.Popen([os.environ.get("NSBOX_BIN", "nsbox"), "run", "--", "sh", "-c",
                              "echo ready; sleep 300"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.dirs.env())
        try:
            self.assertEqual(p.stdout.readline(), b"ready\n")
            r = run_nsbox(["gc", "-v"], self.dirs)
            self.assertIn(b"removed 0 leftover sandboxes", r.stdout)
            self.assertIsNone(p.poll())
        finally:
            p.terminate()
            p.wait()

    def test_gc_removes_seccomp_programs_of_other_builds(self):
        # A compiled seccomp program is cached under a key of the nsbox and libseccomp that
        # made it; after an upgrade the old files are never read again, and gc removes them.
        r = self.sh("true")
        self.assertEqual(r.returncode, 0, r.stderr)
        cache = os.path.join(self.dirs.data, "cache")
        current = sorted(n for n in os.listdir(cache) if n.startswith("seccomp-"))
        self.assertTrue(current, "the run cached no seccomp program")
        old = os.path.join(cache, "seccomp-00000000000000a0.bpf")  # an older nsbox's
        shutil.copyfile(os.path.join(cache, current[0]), old)
        r = run_nsbox(["gc", "-v"], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"removed 1 seccomp program of another build", r.stderr)
        self.assertFalse(os.path.exists(old))
        self.assertEqual(current, sorted(n for n in os.listdir(cache) if n.startswith("seccomp-")))

    def own_cgroup_dir(self):
        """This process's cgroup in the pids hierarchy (v1), or in the unified one (v2 only)."""
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                if "pids" in ctrls.split(","):
                    return "/sys/fs/cgroup/pids" + path
                if ctrls == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
                    return "/sys/fs/cgroup" + path
        self.skipTest("no pids cgroup hierarchy and no pure cgroup v2 here")

    def test_gc_removes_old_empty_sandbox_cgroups_and_nothing_else(self):
        # Sandbox cgroups whose state directory is gone (removed by hand, or by a test): the
        # per-sandbox gc never hears of them. `nsbox gc` removes those that are empty, have no
        # child cgroup and are older than 10 minutes, and touches nothing that holds a process.
        if not is_root():
            self.skipTest("making cgroups beside our own needs root here")
        own = self.own_cgroup_dir()
        two_hours_ago = time.time() - 7200
        made = {}
        for kind in ("old", "fresh", "occupied", "parent", "users"):
            d = os.path.join(own, "nsbox-" + os.urandom(6).hex())
            os.mkdir(d)
            made[kind] = d
        # a user's v1 delegation as nsbox's fix makes it (nsbox-UID, theirs): empty whenever
        # they run nothing, and not an orphan of root's
        os.chown(made["users"], 65534, 65534)
        child = os.path.join(made["parent"], "sub")
        os.mkdir(child)
        sleeper = subprocess.Popen(["sleep", "120"])
        live = subprocess.Popen([NSBOX, "run", "--", "sh", "-c", "hostname; sleep 120"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=self.dirs.env())
        try:
            with open(os.path.join(made["occupied"], "cgroup.procs"), "w") as f:
                f.write(str(sleeper.pid))
            sid = self.sandbox_id(live.stdout.readline())
            live_cgs = cgroup_leftovers(sid)
            self.assertTrue(live_cgs, "the running sandbox has no cgroup")
            for d in [made["old"], made["occupied"], made["parent"], made["users"]] + live_cgs:
                os.utime(d, (two_hours_ago, two_hours_ago))
            r = run_nsbox(["gc", "-v"], self.dirs)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(b"removed 1 empty sandbox cgroup older than 10 minutes", r.stdout)
            self.assertFalse(os.path.exists(made["old"]))
            for kind in ("fresh", "occupied", "parent", "users"):
                self.assertTrue(os.path.isdir(made[kind]), kind)
            self.assertTrue(os.path.isdir(child))
            self.assertIsNone(sleeper.poll(), "gc killed a process")
            self.assertEqual(cgroup_leftovers(sid), live_cgs)
            self.assertIsNone(live.poll(), "gc ended a live sandbox")
        finally:
            sleeper.kill()
            sleeper.wait()
            live.kill()
            live.wait()
            run_nsbox(["gc"], self.dirs)
            for d in (child, made["occupied"], made["fresh"], made["parent"], made["old"],
                      made["users"]):
                for _ in range(100):
                    try:
                        os.rmdir(d)
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.05)


if __name__ == "__main__":
    unittest.main()
