"""End to end: nsbox-oci's exec, console, ps, update and kill --all (docs/oci.md), called as
containerd's shim calls runc: the test is a subreaper and waits for the pid in the pid file.
An exec'd process must be in the container's namespaces and cgroup with the same hardening
(seccomp, no capabilities, no_new_privs); its status is the exec's (or the relay's in the pid
file); the console socket gets one message with one descriptor, a master of the container's
own devpts. The containerd side (ctr task exec, ctr run -t) is in test_oci_runtime.py."""
import json
import os
import pty
import select
import signal
import socket
import struct
import subprocess
import unittest

import test_oci_runtime as rt
from oci_bundle import BundleCase, seccomp_filters

from nsbox_test import CGROUP_V2_ONLY, fds_at_3, sandbox_cgroup_file

# Docker's default capabilities: a root container's init holds CAP_SETUID and CAP_SETGID
DOCKER_CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
               "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
               "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"]
IDS = "grep -E '^(Uid|Gid|Groups|CapEff|CapPrm|CapAmb):' /proc/self/status"


def ids_status(lines):
    """The lines IDS printed, as {"Uid": ["1000", ...], "CapEff": 0, ...}."""
    st = {}
    for line in lines:
        key, _, value = line.partition(":")
        st[key] = int(value, 16) if key.startswith("Cap") else value.split()
    return st


HARDENING = ("grep -E '^(NoNewPrivs|Seccomp|Seccomp_filters|CapEff|CapBnd):' /proc/self/status; "
             "for n in pid mnt net; do readlink /proc/self/ns/$n; done")


def comm(pid):
    """The command name of host process pid, "" once it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def setUpModule():
    rt.setUpModule()


@unittest.skipIf(not rt.OCI, "NSBOX_BIN is not set (run through ctest)")
class OciExec(BundleCase):
    # the bundle, state and helpers nsbox-oci's tests share (tests/lib/oci_bundle.py)

    def running(self, args, cid="c1"):
        self.write_config(rt.config(args))
        pid = self.create(cid)
        self.assertEqual(self.oci("start", cid).returncode, 0)
        return pid

    def process_file(self, args, **extra):
        p = {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": args,
             "env": ["PATH=/bin", "X=from-exec"], "cwd": "/tmp",
             "capabilities": {"bounding": ["CAP_CHOWN", "CAP_KILL"]}, "noNewPrivileges": True}
        p.update(extra)
        path = os.path.join(self.tmp, "process.json")
        with open(path, "w") as f:
            json.dump(p, f)
        return path

    def exec_detached(self, args, cid="c1", out=None, **extra):
        """exec --detach as the shim runs it; the process file is deleted at once."""
        pf = os.path.join(self.tmp, "exec.pid")
        path = self.process_file(args, **extra)
        with open(out or os.devnull, "w") as o:
            r = self.oci("exec", "--process", path, "--detach", "--pid-file", pf, cid,
                         stdout=o, stderr=o)
        os.unlink(path)
        self.assertEqual(r.returncode, 0, self.log_errors() if os.path.exists(self.log) else r)
        with open(pf) as f:
            text = f.read()
        self.assertRegex(text, r"^[0-9]+$")
        pid = int(text)
        self.waited_pids.append(pid)
        return pid

    def init_ns(self):
        with open(os.path.join(self.root, "c1", "state.json")) as f:
            init = json.load(f)["pid"]
        return [os.readlink(f"/proc/{init}/ns/{n}") for n in ("pid", "mnt", "net")]

    def test_exec_detached_is_contained(self):
        own_filters = seccomp_filters()
        mon = self.running(["sleep", "1000"])
        out = os.path.join(self.tmp, "exec.out")
        relay = self.exec_detached(["sh", "-c", "echo $X; id -u; pwd; " + HARDENING + "; exit 5"],
                                   out=out)
        # the pid-file process is ours to wait for, and has the exec'd process's status
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(relay)), 5)
        with open(out) as f:
            lines = f.read().split("\n")
        # the container's user and capabilities (config(): uid 0, bounding CHOWN and KILL)
        self.assertEqual(lines[:3], ["from-exec", "0", "/tmp"])
        n = 5 if own_filters is not None else 4  # Seccomp_filters: Linux 5.10 and later
        status = dict(line.split(":\t") for line in lines[3:3 + n])
        self.assertEqual(status["NoNewPrivs"], "1")
        self.assertEqual(status["Seccomp"], "2")
        if own_filters is not None:  # init's one filter (a writable root's refusals folded in)
            self.assertEqual(int(status["Seccomp_filters"]), own_filters + 1)
        self.assertEqual(int(status["CapEff"], 16), 0)
        self.assertEqual(int(status["CapBnd"], 16), 0x21)
        self.assertEqual(lines[3 + n:6 + n], self.init_ns())
        self.assertEqual(self.state()["status"], "running")  # the container goes on
        self.assertEqual(self.oci("kill", "c1", "KILL").returncode, 0)
        self.wait(mon)

    def test_exec_attacks(self):
        """What an exec'd process tries that its floor forbids: a mount, killing or reading
        init, entering init's root, a new user namespace."""
        mon = self.running(["sleep", "1000"])
        out = os.path.join(self.tmp, "attack.out")
        relay = self.exec_detached(
            ["sh", "-c", "mount -t tmpfs none /tmp && echo MOUNTED; kill -KILL 1; "
             "cat /proc/1/environ && echo READ-INIT; ls /proc/1/root/ && echo ENTERED-INIT; "
             "unshare -U true && echo USERNS; echo; cat /proc/1/cmdline; echo; echo done"],
            out=out)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(relay)), 0)
        with open(out) as f:
            text = f.read()
        self.assertIn("done", text)
        # each was tried (busybox has them all) and refused
        self.assertEqual(text.count("ermission denied") + text.count("not permitted"), 4, text)
        for bad in ("MOUNTED", "READ-INIT", "ENTERED-INIT", "USERNS"):
            self.assertNotIn(bad, text)
        # init's command line is wiped: no host path of nsbox-oci's (root, bundle, log)
        self.assertIn("nsbox-init", text)
        self.assertNotIn(self.tmp, text)
        self.assertEqual(self.state()["status"], "running")  # init lives on
        self.assertEqual(self.oci("kill", "c1", "KILL").returncode, 0)
        self.wait(mon)

    def test_exec_in_cgroup_and_ps(self):
        self.running(["sleep", "1000"])
        relay = self.exec_detached(["sleep", "999"])
        r = self.oci("ps", "--format", "json", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        pids = json.loads(r.stdout)
        cmds = {}
        for p in pids:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmds[p] = f.read().split(b"\0")[:2]
        # init, the container's process and the exec'd one, all in the cgroup
        self.assertIn([b"sleep", b"1000"], cmds.values())
        self.assertIn([b"sleep", b"999"], cmds.values())
        self.assertEqual(len(pids), 3, cmds)
        r = self.oci("ps", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        table = r.stdout.decode().splitlines()
        self.assertIn("PID", table[0])
        self.assertEqual(len(table), 4, table)
        # a signal to the pid-file process reaches the exec'd one: its status comes back
        os.kill(relay, signal.SIGTERM)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(relay)), 128 + signal.SIGTERM)
        self.assertEqual(len(json.loads(self.oci("ps", "--format", "json", "c1").stdout)), 2)

    def test_ps_keeps_a_long_command_lines_row_whole(self):
        # ps's table is read in whole rows: cut at 4 KiB, a container's process with a longer
        # command line lost the rest of its row, and the row after it, another process's, was
        # glued onto it (the cut part had no newline): a process hidden from `docker top`.
        tail = "y" * 6000
        self.running(["sh", "-c", "sleep 999 & wait; : " + tail])
        for _ in range(100):
            pids = json.loads(self.oci("ps", "--format", "json", "c1").stdout)
            if len(pids) == 3:
                break
            __import__("time").sleep(0.05)
        self.assertEqual(len(pids), 3, pids)  # init, sh, sleep
        r = self.oci("ps", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        table = r.stdout.decode()
        self.assertTrue(table.endswith("\n"), table[-200:])
        rows = table.splitlines()
        self.assertEqual(len(rows), 4, [row[:100] for row in rows])
        self.assertTrue(any(row.endswith(": " + tail) for row in rows), "the long row was cut")
        self.assertTrue(any(row.endswith("sleep 999") for row in rows), "the sleep is not shown")

    def test_exec_foreground(self):
        self.running(["sleep", "1000"])
        r = self.oci("exec", "--env", "Y=flag", "--cwd", "/bin", "c1", "sh", "-c",
                     "echo $Y $FOO; pwd; exit 3")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertEqual(r.stdout.decode(), "flag from-config\n/bin\n")
        r = self.oci("exec", "c1", "no-such-command")
        self.assertEqual(r.returncode, 127)
        self.assertIn("not found", r.stderr.decode())

    def test_exec_searches_where_create_checks(self):
        # one search (policy/pathsearch.c) for create's check of process.args[0] and exec's
        # command: without PATH, glibc execvp's /bin:/usr/bin (not /usr/local/bin), and an
        # empty entry is the command's cwd
        local = os.path.join(self.bundle, "rootfs", "usr", "local", "bin")
        os.makedirs(local)
        with open(os.path.join(local, "here"), "w") as f:
            f.write("#!/bin/sh\necho here $X\n")
        os.chmod(os.path.join(local, "here"), 0o755)
        no_path = ["X=1"]
        c = rt.config(["here"])
        c["process"]["env"] = no_path
        self.write_config(c)
        self.assertIn("here: executable file not found in $PATH (PATH=/bin:/usr/bin)",
                      self.create_refused("n1"))
        self.running(["sleep", "1000"])
        r = self.oci("exec", "--process", self.process_file(["here"], env=no_path), "c1")
        self.assertEqual(r.returncode, 127, r.stdout)
        r = self.oci("exec", "--process", self.process_file(["sh", "-c", "echo $X"], env=no_path),
                     "c1")
        self.assertEqual((r.returncode, r.stdout), (0, b"1\n"), r.stderr)
        cwd_last = ["PATH=/nowhere:", "X=2"]
        r = self.oci("exec", "--process", self.process_file(["here"], env=cwd_last,
                                                           cwd="/usr/local/bin"), "c1")
        self.assertEqual((r.returncode, r.stdout), (0, b"here 2\n"), r.stderr)
        c["process"].update(env=cwd_last, cwd="/usr/local/bin")
        self.write_config(c)
        pid = self.create("c2")
        self.assertEqual(self.oci("start", "c2").returncode, 0)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 0)
        self.assertEqual(self.output(), "here 2\n")

    def test_exec_errors(self):
        r = self.oci("exec", "nope", "true")
        self.assertIn("container nope does not exist", self.log_errors()[-1]["msg"])
        mon = self.running(["sh", "-c", "exit 0"])
        self.wait(mon)
        r = self.oci("exec", "c1", "true")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("container not running", self.log_errors()[-1]["msg"])
        self.write_config(rt.config(["sleep", "1000"]))
        self.create("c2")
        r = self.oci("exec", "c2", "true")  # created, not started
        self.assertIn("start it first", r.stderr.decode())
        self.assertEqual(self.oci("start", "c2").returncode, 0)
        caps = {"bounding": ["CAP_SYS_ADMIN"]}
        path = self.process_file(["true"], capabilities=caps)
        r = self.oci("exec", "--process", path, "c2")
        self.assertIn("privileged", r.stderr.decode())
        path = self.process_file([])
        r = self.oci("exec", "--process", path, "c2")
        self.assertIn("process.json: key 'args'", r.stderr.decode())

    def root_container(self):
        """A root container with Docker's capabilities and root's groups."""
        caps = {k: DOCKER_CAPS for k in ("bounding", "effective", "permitted")}
        c = rt.config(["sleep", "1000"])
        c["process"]["capabilities"] = caps
        c["process"]["user"]["additionalGids"] = [0, 10]
        self.write_config(c)
        self.create("c1")
        self.assertEqual(self.oci("start", "c1").returncode, 0)

    def test_exec_as_another_user(self):
        """exec --user into a root container: init's child drops to the ids, keeps none of
        root's groups or capabilities (the kernel's rule for a uid that leaves 0)."""
        self.root_container()
        r = self.oci("exec", "c1", "sh", "-c", IDS)  # as the container's own user: root's
        self.assertEqual(r.returncode, 0, r.stderr)
        st = ids_status(r.stdout.decode().splitlines())
        self.assertNotEqual(st["CapEff"], 0)
        self.assertEqual(sorted(st["Groups"]), ["0", "10"])
        r = self.oci("exec", "--user", "1000:1000", "c1", "sh", "-c", "id -u; id -g; " + IDS)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        self.assertEqual(lines[:2], ["1000", "1000"])
        st = ids_status(lines[2:])
        self.assertEqual(st["Uid"], ["1000"] * 4)
        self.assertEqual(st["Gid"], ["1000"] * 4)
        self.assertEqual(st["Groups"], [])
        self.assertEqual((st["CapEff"], st["CapPrm"], st["CapAmb"]), (0, 0, 0))
        # the groups given, only those
        r = self.oci("exec", "--user", "1000:1000", "--additional-gids", "20,30", "c1",
                     "sh", "-c", IDS)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(ids_status(r.stdout.decode().splitlines())["Groups"]),
                         ["20", "30"])
        # outside the container's ids: refused, nothing runs
        for user in ("70000", "1000:70000"):
            r = self.oci("exec", "--user", user, "c1", "sh", "-c", "echo RAN")
            self.assertNotEqual(r.returncode, 0)
            self.assertNotIn(b"RAN", r.stdout)
            self.assertIn("outside the container's user namespace", r.stderr.decode())
        self.assertEqual(self.state()["status"], "running")

    def test_exec_own_no_new_privs(self):
        """An exec'd process's own noNewPrivileges (process.json, --no-new-privs), as runc
        honours it, in a container created without it: set for the process that asks, and
        only for it; as another user too."""
        c = rt.config(["sleep", "1000"])
        c["process"]["noNewPrivileges"] = False
        self.write_config(c)
        self.create("c1")
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        nnp = "grep '^NoNewPrivs:' /proc/self/status"

        def run(*args, **process):
            if process:
                path = self.process_file(["sh", "-c", nnp], **process)
                r = self.oci("exec", "--process", path, *args, "c1")
            else:
                r = self.oci("exec", *args, "c1", "sh", "-c", nnp)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stdout.decode().split()[1]

        self.assertEqual(run(noNewPrivileges=True), "1")
        self.assertEqual(run(noNewPrivileges=False), "0")
        self.assertEqual(run(noNewPrivileges=True, user={"uid": 1000, "gid": 1000}), "1")
        self.assertEqual(run("--no-new-privs"), "1")
        self.assertEqual(run(), "0")  # the config's: without
        self.assertEqual(run("--no-new-privs", "--user", "1000:1000"), "1")
        self.assertEqual(self.state()["status"], "running")

    def test_exec_process_with_user_and_groups(self):
        """--process as containerd's shim and Docker pass it: user with additionalGids and
        umask."""
        self.root_container()
        out = os.path.join(self.tmp, "user.out")
        user = {"uid": 1000, "gid": 1001, "additionalGids": [20, 30], "umask": 0o27}
        relay = self.exec_detached(["sh", "-c", "id -u; id -g; umask; " + IDS], out=out,
                                   user=user, cwd="/")
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(relay)), 0)
        with open(out) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[:3], ["1000", "1001", "0027"])
        st = ids_status(lines[3:])
        self.assertEqual(st["Uid"], ["1000"] * 4)
        self.assertEqual(st["Gid"], ["1001"] * 4)
        self.assertEqual(sorted(st["Groups"]), ["20", "30"])
        self.assertEqual((st["CapEff"], st["CapPrm"], st["CapAmb"]), (0, 0, 0))

    def test_non_root_container_exec_as_root(self):
        """A container of uid 1000 without CAP_SETUID (docker exec -u root into it): init
        keeps CAP_SETUID and CAP_SETGID for its children, so exec runs as root (or any of the
        container's users), with the container's capabilities and no more."""
        c = rt.config(["sleep", "1000"])
        c["process"]["user"] = {"uid": 1000, "gid": 1000}
        self.write_config(c)
        self.create("c1")
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        r = self.oci("exec", "c1", "id", "-u")
        self.assertEqual((r.returncode, r.stdout), (0, b"1000\n"), r.stderr)
        for args, uid, gid in ((["--user", "0"], "0", "1000"), (["--user", "0:0"], "0", "0"),
                               (["--user", "1000:0"], "1000", "0")):
            r = self.oci("exec", *args, "c1", "sh", "-c", "id -u; id -g; " + IDS)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.decode().splitlines()
            self.assertEqual(lines[:2], [uid, gid], args)
            st = ids_status(lines[2:])
            self.assertEqual((st["CapEff"], st["CapPrm"], st["CapAmb"]), (0, 0, 0), args)
        path = self.process_file(["sh", "-c", "id -u; grep CapBnd /proc/self/status"],
                                 user={"uid": 0, "gid": 0})
        r = self.oci("exec", "--process", path, "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode().split(), ["0", "CapBnd:", "%016x" % 0x21])

    def test_direct_request_gets_no_kept_capability(self):
        """A request that skips nsbox-oci exec (on the monitor's control socket, with a user
        string and no capability sets): init's child gives the process the container's sets,
        never what init keeps for changing users (CAP_SETUID, CAP_SETGID, CAP_SETPCAP)."""
        c = rt.config(["sleep", "1000"])
        c["process"]["user"] = {"uid": 1000, "gid": 1000}
        self.write_config(c)
        self.create("c1")
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        out = os.path.join(self.tmp, "direct.out")
        for user in (b"0 0 -1", b"1000 1000 -1", b"1000 0 -1 0"):
            payload = user + b"\0/\0sh\0-c\0" + IDS.encode() + b"; grep CapBnd /proc/self/status\0"
            # struct nsbox_ocictl_msg (oci/ocirt.h): op, pid, status, flags (F_USER 4),
            # winsize, argc, envc, len
            hdr = struct.pack("=16siiIIIII", b"exec", 0, 0, 4, 0, 3, 0, len(payload))
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s, \
                    open(out, "w") as o:
                s.connect(os.path.join(self.root, "c1", "ctl.sock"))
                socket.send_fds(s, [hdr + payload], [0, o.fileno(), o.fileno()])
                answers = [s.recv(4096), s.recv(4096)]
            ops = [a[:16].rstrip(b"\0") for a in answers]
            self.assertEqual(ops, [b"spawned", b"exited"], answers)
            with open(out) as f:
                lines = f.read().splitlines()
            st = ids_status(lines[:-1])
            self.assertEqual(st["Uid"][0], user.split()[0].decode())
            self.assertEqual((st["CapEff"], st["CapPrm"], st["CapAmb"]), (0, 0, 0), user)
            self.assertEqual(lines[-1].split(), ["CapBnd:", "%016x" % 0x21], user)

    def test_container_end_kills_execs(self):
        mon = self.running(["sleep", "1000"])
        relay = self.exec_detached(["sleep", "999"])
        self.assertEqual(self.oci("kill", "c1", "KILL").returncode, 0)
        self.wait(mon)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(relay)), 128 + signal.SIGKILL)

    def test_kill_all(self):
        mon = self.running(["sleep", "1000"])
        relay = self.exec_detached(["sleep", "999"])
        # --all signals the exec'd process itself (TERM); without it, it would die of the
        # KILL that ends the container after its process died of TERM
        r = self.oci("kill", "--all", "c1", "TERM")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(relay)), 128 + signal.SIGTERM)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(mon)), 128 + signal.SIGTERM)
        r = self.oci("kill", "--all", "c1", "TERM")
        self.assertIn("container not running", r.stderr.decode())

    def test_ps_and_kill_all_past_a_batch(self):
        # 300 processes: more than one batch of kill --all's signals (256 pidfds), and more
        # than a ps list cut short by NSBOX_OCI_PS_MAX, which says so instead of hiding the rest
        c = rt.config(["sh", "-c", "i=0; while [ $i -lt 300 ]; do sleep 1000 & i=$((i+1)); "
                       "done; wait"])
        c["linux"]["resources"]["pids"]["limit"] = 400
        self.write_config(c)
        mon = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        for _ in range(200):  # until init, sh and its sleeps are there, each sleep exec'd
            pids = json.loads(self.oci("ps", "--format", "json", "c1").stdout)
            sleeps = [p for p in pids if comm(p) == "sleep\n"]
            if len(sleeps) == 300:
                break
            __import__("time").sleep(0.05)
        self.assertEqual((len(pids), len(sleeps)), (302, 300))
        r = self.oci("ps", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, b"")
        self.assertEqual(len(r.stdout.decode().splitlines()), 303)  # and the header
        env = dict(self.dirs.env(), NSBOX_OCI_PS_MAX="50")
        r = subprocess.run([rt.OCI, "--root", self.root, "ps", "--format", "json", "c1"],
                           capture_output=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(json.loads(r.stdout)), 50)
        self.assertIn(b"container c1 has 302 processes: only the first 50 are listed", r.stderr)
        env["NSBOX_OCI_PS_MAX"] = "0"
        r = subprocess.run([rt.OCI, "--root", self.root, "ps", "c1"], capture_output=True,
                           env=env, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"NSBOX_OCI_PS_MAX=0: give a number from 1 to 16384", r.stderr)
        # each sleep has its TERM (sh waits on): the container ends with them
        r = self.oci("kill", "--all", "c1", "TERM")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(mon)), 128 + signal.SIGTERM)
        self.assertEqual([p for p in sleeps if comm(p) == "sleep\n"], [])

    def test_update(self):
        self.running(["sleep", "1000"])
        with open(os.path.join(self.root, "c1", "state.json")) as f:
            sid = json.load(f)["sandbox"]
        res = {"memory": {"limit": 80 << 20}, "pids": {"limit": 21},
               "cpu": {"quota": 50000, "period": 100000}}
        r = subprocess.run([rt.OCI, "--root", self.root, "update", "--resources", "-", "c1"],
                           input=json.dumps(res).encode(), capture_output=True,
                           env=self.dirs.env(), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sandbox_cgroup_file(sid, "memory", "memory.limit_in_bytes",
                                             "memory.max"), str(80 << 20))
        self.assertEqual(sandbox_cgroup_file(sid, "pids", "pids.max", "pids.max"), "21")
        self.assertIn(sandbox_cgroup_file(sid, "cpu", "cpu.cfs_quota_us", "cpu.max"),
                      ("50000", "50000 100000"))
        path = os.path.join(self.tmp, "res.json")
        with open(path, "w") as f:
            json.dump({"memory": {"limit": -1}, "pids": {"limit": "x"}}, f)
        r = self.oci("update", "--resources", path, "c1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("resources: key 'pids.limit'", r.stderr.decode())
        self.assertEqual(sandbox_cgroup_file(sid, "pids", "pids.max", "pids.max"), "21")
        # -1 (no limit) gives the floor, what create gives a config that names no limit (a
        # container made so, read back): no update makes a container unbounded
        c = rt.config(["sleep", "1000"])
        del c["linux"]["resources"]
        self.write_config(c)
        self.create("c2")
        self.assertEqual(self.oci("start", "c2").returncode, 0)
        with open(os.path.join(self.root, "c2", "state.json")) as f:
            sid2 = json.load(f)["sandbox"]

        def limits(s):
            return (sandbox_cgroup_file(s, "memory", "memory.limit_in_bytes", "memory.max"),
                    sandbox_cgroup_file(s, "pids", "pids.max", "pids.max"))

        floor = limits(sid2)
        self.assertNotIn("max", floor)
        self.assertNotEqual(limits(sid), floor)
        with open(path, "w") as f:
            json.dump({"memory": {"limit": -1}, "pids": {"limit": -1}}, f)
        r = self.oci("update", "--resources", path, "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(limits(sid), floor)

    def update_memory(self, memory):
        """update with the resources {"memory": memory}: the command's result."""
        path = os.path.join(self.tmp, "memory.json")
        with open(path, "w") as f:
            json.dump({"memory": memory}, f)
        return self.oci("update", "--resources", path, "c1")

    def running_with_swap(self):
        """A running container made with 64 MiB of memory and 32 of swap: its sandbox's id."""
        c = rt.config(["sleep", "1000"])
        c["linux"]["resources"] = {"memory": {"limit": 64 << 20, "swap": 96 << 20}}
        self.write_config(c)
        self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        with open(os.path.join(self.root, "c1", "state.json")) as f:
            return json.load(f)["sandbox"]

    def memory_and_swap(self, sid):
        """The cgroup's memory limit and swap (v1: memory+swap less memory), read back."""
        limit = int(sandbox_cgroup_file(sid, "memory", "memory.limit_in_bytes", "memory.max"))
        total = sandbox_cgroup_file(sid, "memory", "memory.memsw.limit_in_bytes",
                                    "memory.swap.max")
        if total is None:
            self.skipTest("this kernel does not account swap per cgroup")
        return (limit, int(total) - (0 if CGROUP_V2_ONLY else limit))

    def test_update_of_the_memory_keeps_the_swap(self):
        """An update that names memory.limit alone keeps the swap the container was made with
        (docs/decisions.md, "nsbox-oci update keeps the swap"): v1's memory+swap moves with
        the limit, in the order the kernel accepts (memsw first when it grows past it), v2's
        memory.swap.max is left as it is."""
        sid = self.running_with_swap()
        self.assertEqual(self.memory_and_swap(sid), (64 << 20, 32 << 20))
        for limit in (128 << 20, 48 << 20):  # past the old memory+swap, then below it
            r = self.update_memory({"limit": limit})
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(self.memory_and_swap(sid), (limit, 32 << 20))

    def test_update_of_memory_and_swap(self):
        """memory.swap in an update (runc's --memory-swap): memory plus swap, with the limit or
        alone against the current one; below the limit or unlimited refused, nothing changed."""
        sid = self.running_with_swap()
        r = self.update_memory({"limit": 128 << 20, "swap": 256 << 20})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.memory_and_swap(sid), (128 << 20, 128 << 20))
        r = self.update_memory({"swap": 160 << 20})  # against the limit it has
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.memory_and_swap(sid), (128 << 20, 32 << 20))
        for memory, says in (({"swap": 64 << 20}, "below the memory limit"),
                             ({"limit": 128 << 20, "swap": -1}, "unlimited swap")):
            r = self.update_memory(memory)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(says, r.stderr.decode())
            self.assertEqual(self.memory_and_swap(sid), (128 << 20, 32 << 20))

    def test_update_of_the_memory_without_swap_makes_none(self):
        # the floor: a container made without swap gets none from an update either
        self.running(["sleep", "1000"])
        with open(os.path.join(self.root, "c1", "state.json")) as f:
            sid = json.load(f)["sandbox"]
        r = self.update_memory({"limit": 72 << 20})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.memory_and_swap(sid), (72 << 20, 0))

    def console(self, d=None):
        """A console socket listening in directory d (the test's own by default), bound
        through d's descriptor: its path may be longer than a unix address holds."""
        d = d or self.tmp
        dfd = os.open(d, os.O_PATH | os.O_DIRECTORY)
        self.addCleanup(os.close, dfd)
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(srv.close)
        srv.bind(f"/proc/self/fd/{dfd}/console.sock")
        srv.listen(1)
        return os.path.join(d, "console.sock"), srv

    def created_on_a_terminal(self, path, srv):
        """c1 made with a terminal whose master goes to the console socket at path, and
        started: the master, and what came out of it up to the command's tty-yes."""
        c = rt.config(["sh", "-c", "tty; test -t 0 && echo tty-yes; sleep 1000"])
        c["process"]["terminal"] = True
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "--pid-file", self.pidfile,
                     "--console-socket", path, "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.pidfile) as f:
            self.waited_pids.append(int(f.read()))
        master = self.receive_master(srv)
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        buf = b""
        while b"tty-yes" not in buf:
            ready, _, _ = select.select([master], [], [], 30)
            self.assertTrue(ready, buf)
            buf += os.read(master, 4096)
        return master, buf

    def receive_master(self, srv):
        conn, _ = srv.accept()
        with conn:
            msg, fds, _, _ = socket.recv_fds(conn, 4096, 4)
            self.assertTrue(msg)
            self.assertEqual(len(fds), 1)
            rest = conn.recv(4096)
        self.assertEqual(rest, b"")  # one message, no more
        return fds[0]

    def test_console_create_and_exec(self):
        path, srv = self.console()
        master, buf = self.created_on_a_terminal(path, srv)
        self.assertIn(b"/dev/pts/0", buf)
        os.close(master)
        # exec with a terminal: its own pty, from the same devpts
        pf = os.path.join(self.tmp, "exec.pid")
        proc = self.process_file(["sh", "-c", "tty; test -t 1 && echo exec-tty"], terminal=True)
        r = self.oci("exec", "--process", proc, "--detach", "--pid-file", pf,
                     "--console-socket", path, "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        master = self.receive_master(srv)
        with open(pf) as f:
            relay = int(f.read())
        self.waited_pids.append(relay)
        out = rt.read_pty(master)
        os.close(master)
        self.assertIn(b"/dev/pts/1", out)
        self.assertIn(b"exec-tty", out)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(relay)), 0)
        # detached, a terminal needs a socket to go to
        r = self.oci("exec", "--tty", "--detach", "c1", "true")
        self.assertIn("needs --console-socket", r.stderr.decode())

    def test_console_socket_at_a_path_longer_than_sun_path(self):
        # an engine's socket path may be longer than a unix address holds (108 bytes):
        # nsbox-oci reaches it through its directory's descriptor
        d = os.path.join(self.tmp, *(["d" * 50] * 3))
        os.makedirs(d)
        path, srv = self.console(d)
        self.assertGreater(len(path), 108)
        master, _ = self.created_on_a_terminal(path, srv)
        self.assertTrue(os.isatty(master))
        os.close(master)

    def test_exec_tty_foreground(self):
        """exec -t without a console socket, as a person runs it: nsbox-oci relays its own
        terminal (here a pty of the test's) to one of the container's."""
        self.running(["sleep", "1000"])
        master, slave = pty.openpty()
        p = subprocess.Popen([rt.OCI, "--root", self.root, "exec", "-t", "c1", "sh", "-c",
                              "tty; read line; echo got-$line; exit 3"],
                             stdin=slave, stdout=slave, stderr=slave, env=self.dirs.env(),
                             start_new_session=True)
        os.close(slave)
        os.write(master, b"typed\n")
        out = rt.read_pty(master)
        os.close(master)
        self.assertEqual(p.wait(timeout=60), 3, out)
        self.assertIn(b"/dev/pts/", out)
        self.assertIn(b"got-typed", out)


# what the container's process (the shell) has open, listed by a child (no pipe of the shell's
# own in the way), then its writes to 3 and 4
LIST_AND_WRITE = "ls /proc/$$/fd; echo {0}-pipe >&3; echo {0}-file >&4"


@unittest.skipIf(not rt.OCI, "NSBOX_BIN is not set (run through ctest)")
class OciPreserveFds(BundleCase):
    """--preserve-fds N (docs/oci.md): the caller's descriptors 3 to 3+N-1 are the process's,
    at the same numbers, and nothing else of the runtime's; without it, none of them."""

    def pipe_and_file(self):
        """A pipe (its reading end, and the writing end for the runtime) and a file open for
        writing: the two descriptors the test passes."""
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        path = os.path.join(self.tmp, "passed-file")
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        return r, w, f, path

    def read_to_end(self, fd):
        """The pipe's data up to its end of file, which comes only once every holder of the
        writing end (the runtime's processes, the container's) has let it go."""
        out = b""
        while select.select([fd], [], [], 60)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                return out
            out += chunk
        self.fail(f"the pipe is still held open after its writer ended: {out!r}")

    def create_with_fds(self, fds, cid, *flags):
        """create with fds as its 3, 4, ... and start; the container's exit code, and its
        stdout and stderr (files: the container holds them)."""
        out_path, err_path = os.path.join(self.tmp, cid + ".out"), os.path.join(self.tmp, "err")
        with open(out_path, "w") as out, open(err_path, "w") as err:
            c = self.oci_fds(fds, "create", "--bundle", self.bundle, "--pid-file",
                             self.pidfile, *flags, cid, stdout=out, stderr=err)
        for fd in fds:
            os.close(fd)
        with open(err_path) as err:
            self.assertEqual(c.returncode, 0, err.read())
        with open(self.pidfile) as pf:
            pid = int(pf.read())
        self.waited_pids.append(pid)
        self.assertEqual(self.oci("start", cid).returncode, 0)
        code = os.waitstatus_to_exitcode(self.wait(pid))
        with open(out_path) as out, open(err_path) as err:
            return code, out.read(), err.read()

    def test_create_passes_pipe_and_file(self):
        # Podman's socket activation: LISTEN_PID=1, the process's pid under runc, which
        # sd_listen_fds() compares with its own
        c = rt.config(["sh", "-c", LIST_AND_WRITE.format("create") +
                       '; echo "$LISTEN_PID $$" >&4'])
        c["process"]["env"] += ["LISTEN_FDS=2", "LISTEN_PID=1"]
        self.write_config(c)
        r, w, f, path = self.pipe_and_file()
        code, out, err = self.create_with_fds([w, f], "c1", "--preserve-fds", "2")
        self.assertEqual(code, 0, out + err)
        # exactly stdio and the two: nothing of nsbox-oci's (its sockets, the monitor's)
        self.assertEqual(out.split(), ["0", "1", "2", "3", "4"])
        self.assertEqual(self.read_to_end(r), b"create-pipe\n")
        with open(path) as pf:
            written, listen = pf.read().splitlines()
        self.assertEqual(written, "create-file")
        listen_pid, own_pid = listen.split()
        self.assertEqual(listen_pid, own_pid)
        # without the flag: 3 and 4 are open in create all the same, and the container has
        # neither
        r, w, f, path = self.pipe_and_file()
        code, out, err = self.create_with_fds([w, f], "c2")
        self.assertNotEqual(code, 0)
        self.assertEqual(out.split(), ["0", "1", "2"])
        self.assertIn("3: Bad file descriptor", err)
        self.assertEqual(self.read_to_end(r), b"")
        with open(path) as pf:
            self.assertEqual(pf.read(), "")

    def test_closed_whatever_proc_lists(self):
        """A bundle's profile may refuse close_range, and init and the workload then close
        what /proc/self/fd lists under the bundle's filter and mounts: a listing faked by a
        directory bound over /proc, or by getdents64 answered with success and nothing, must
        not leave the caller's descriptors open in the container."""
        secret = os.path.join(self.tmp, "host-file")
        with open(secret, "w") as f:
            f.write("host-secret\n")
        fake = os.path.join(self.tmp, "fake-proc")
        os.makedirs(os.path.join(fake, "self", "fd"))
        os.makedirs(os.path.join(fake, "1", "fd"))
        c = rt.config(["sh", "-c", "cat <&3"])
        refuse = {"names": ["close_range"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}
        c["linux"]["seccomp"] = {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [refuse]}
        c["mounts"].append({"destination": "/proc", "type": "bind", "source": fake,
                            "options": ["rbind"]})
        self.write_config(c)
        code, out, err = self.create_with_fds([os.open(secret, os.O_RDONLY)], "bound")
        self.assertNotIn("host-secret", out)
        self.assertNotEqual(code, 0, out + err)
        self.assertIn("3: Bad file descriptor", err)
        # getdents64 answered with success: refused at create, as close_range answered so is
        c["mounts"].pop()
        c["linux"]["seccomp"]["syscalls"].append({"names": ["getdents64"],
                                                  "action": "SCMP_ACT_ERRNO", "errnoRet": 0})
        self.write_config(c)
        self.assertIn("the profile answers getdents64 with SCMP_ACT_ERRNO and errno 0",
                      self.create_refused())
        # and answered with an errno: closed one by one
        c["linux"]["seccomp"]["syscalls"][-1]["errnoRet"] = 1
        self.write_config(c)
        code, out, err = self.create_with_fds([os.open(secret, os.O_RDONLY)], "refused")
        self.assertNotIn("host-secret", out)
        self.assertNotEqual(code, 0, out + err)
        self.assertIn("3: Bad file descriptor", err)

    def test_create_bad_counts_refused(self):
        self.write_config(rt.config(["true"]))
        _, w, f, _ = self.pipe_and_file()
        os.close(f)
        for n, why in (("-1", "give the number of descriptors"),
                       ("100000", "0 to 250"), ("2x", "give the number"),
                       ("2", "descriptor 4 is not open")):
            with open(self.out, "w") as out:  # files: a container made by mistake holds them
                r = self.oci_fds([w], "create", "--bundle", self.bundle, "--pid-file",
                                 self.pidfile, "--preserve-fds", n, "c1", stdout=out,
                                 stderr=out)
            self.assertNotEqual(r.returncode, 0, n)
            self.assertIn(why, self.output(), n)
            self.assertIn(why, self.log_errors()[-1]["msg"], n)
            # nothing made: no state, no pid file, no sandbox
            self.assertFalse(os.path.exists(os.path.join(self.root, "c1")), n)
            self.assertFalse(os.path.exists(self.pidfile), n)
        os.close(w)
        self.assertEqual(self.dirs.leftovers(), [])

    def test_exec_passes_pipe_and_file(self):
        self.write_config(rt.config(["sleep", "1000"]))
        mon = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        r, w, f, path = self.pipe_and_file()
        e = self.oci_fds([w, f], "exec", "--preserve-fds", "2", "c1", "sh", "-c",
                         LIST_AND_WRITE.format("exec"))
        os.close(w)
        os.close(f)
        self.assertEqual(e.returncode, 0, e.stderr)
        self.assertEqual(e.stdout.decode().split(), ["0", "1", "2", "3", "4"])
        self.assertEqual(self.read_to_end(r), b"exec-pipe\n")
        with open(path) as pf:
            self.assertEqual(pf.read(), "exec-file\n")
        # one: the pipe alone; without the flag, neither (both open in exec all the same)
        r, w, f, path = self.pipe_and_file()
        e = self.oci_fds([w, f], "exec", "--preserve-fds", "1", "c1", "sh", "-c",
                         "ls /proc/$$/fd; echo one-pipe >&3")
        self.assertEqual(e.stdout.decode().split(), ["0", "1", "2", "3"], e.stderr)
        e = self.oci_fds([w, f], "exec", "c1", "sh", "-c", LIST_AND_WRITE.format("none"))
        os.close(w)
        os.close(f)
        self.assertNotEqual(e.returncode, 0)
        self.assertEqual(e.stdout.decode().split(), ["0", "1", "2"])
        self.assertEqual(self.read_to_end(r), b"one-pipe\n")
        with open(path) as pf:
            self.assertEqual(pf.read(), "")
        # bad counts: refused before anything reaches the container
        for n, why in (("-3", "give the number"), ("251", "0 to 250"),
                       ("3", "descriptor 3 is not open")):
            e = self.oci("exec", "--preserve-fds", n, "c1", "true")
            self.assertNotEqual(e.returncode, 0, n)
            self.assertIn(why, e.stderr.decode(), n)
        self.assertEqual(self.state()["status"], "running")
        self.assertEqual(self.oci("kill", "c1", "KILL").returncode, 0)
        self.wait(mon)

    def test_exec_tty_passes_pipe(self):
        """With a terminal (exec -t), stdio is a pty of the container's; the descriptors passed
        on come alone and are 3, 4, ... all the same."""
        self.write_config(rt.config(["sleep", "1000"]))
        mon = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        r, w, f, _ = self.pipe_and_file()
        os.close(f)
        master, slave = pty.openpty()
        with fds_at_3([w]) as (prefix, keep):
            p = subprocess.Popen(prefix + [rt.OCI, "--root", self.root, "exec", "-t",
                                           "--preserve-fds", "1", "c1", "sh", "-c",
                                           "tty; ls /proc/$$/fd; echo tty-pipe >&3"],
                                 stdin=slave, stdout=slave, stderr=slave, pass_fds=keep,
                                 env=self.dirs.env(), start_new_session=True)
        os.close(slave)
        os.close(w)
        out = rt.read_pty(master)
        os.close(master)
        self.assertEqual(p.wait(timeout=60), 0, out)
        tty, *fds = out.decode().split()
        self.assertRegex(tty, r"^/dev/pts/[0-9]+$")
        self.assertEqual(fds, ["0", "1", "2", "3"])
        self.assertEqual(self.read_to_end(r), b"tty-pipe\n")
        self.assertEqual(self.oci("kill", "c1", "KILL").returncode, 0)
        self.wait(mon)


def activated_by(listen_fds, listen_pid="$$"):
    """A command line's prefix that runs its arguments as systemd's socket activation starts a
    service: LISTEN_FDS, and LISTEN_PID the service's own pid ($$, which exec keeps)."""
    return ["bash", "-c", f'export LISTEN_FDS={listen_fds} LISTEN_PID={listen_pid}; exec "$@"',
            "bash"]


@unittest.skipIf(not rt.OCI, "NSBOX_BIN is not set (run through ctest)")
class OciSocketActivation(BundleCase):
    """runc's own socket activation (docs/oci.md): started with LISTEN_FDS and LISTEN_PID its
    own pid, create passes descriptors 3 to 3+LISTEN_FDS-1 on without --preserve-fds, and the
    process is told so (LISTEN_FDS, LISTEN_PID its own pid), as sd_listen_fds() checks."""

    def setUp(self):
        super().setUp()
        self.install_probe()
        self.sock_path = os.path.join(self.tmp, "activated.sock")

    def listener(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(self.sock_path)
        s.listen(4)
        return s

    def create_activated(self, fds, shell, *flags, cid="c1"):
        """create with fds as its 3, 4, ..., started through shell; its result, stdout and
        stderr in self.out."""
        with open(self.out, "w") as out:
            return self.oci_fds(fds, "create", "--bundle", self.bundle, "--pid-file",
                                self.pidfile, *flags, cid, stdout=out, stderr=out, shell=shell)

    def serve_once(self, cid="c1"):
        """start the container, which accepts on its descriptor 3: what a client of the
        listener reads, and the container's exit code."""
        with open(self.pidfile) as f:
            pid = int(f.read())
        self.waited_pids.append(pid)
        self.assertEqual(self.oci("start", cid).returncode, 0)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.settimeout(60)
            c.connect(self.sock_path)
            got = b""
            while chunk := c.recv(4096):
                got += chunk
        return got.decode(), os.waitstatus_to_exitcode(self.wait(pid))

    def test_create_passes_listening_socket(self):
        # with --preserve-fds 1 as well: the pipe comes after the socket, at 4
        self.write_config(rt.config(["sh", "-c", 'ls /proc/$$/fd; echo "$LISTEN_FDS" >&4; '
                                     "exec attack sockact"]))
        s = self.listener()
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        c = self.create_activated([s.fileno(), w], activated_by(1), "--preserve-fds", "1")
        s.close()
        os.close(w)
        self.assertEqual(c.returncode, 0, self.output())
        got, code = self.serve_once()
        self.assertEqual(code, 0, self.output())
        # the process's pid (LISTEN_PID=1 made its own) and LISTEN_FDS=1
        self.assertRegex(got, r"^accepted by [0-9]+ of 1\n$")
        self.assertEqual(select.select([r], [], [], 60)[0], [r])
        self.assertEqual(os.read(r, 4096), b"1\n")
        # exactly stdio, the socket and the pipe
        self.assertEqual(self.output().split(), ["0", "1", "2", "3", "4", "served"])

    def test_other_pids_activation_ignored(self):
        """LISTEN_PID of another process (a podman or conmon above the runtime): not ours,
        and descriptor 3 does not reach the container (systemd's rule)."""
        self.write_config(rt.config(["sh", "-c", 'ls /proc/$$/fd; echo "[$LISTEN_FDS]"']))
        s = self.listener()
        c = self.create_activated([s.fileno()], activated_by(1, listen_pid="1"))
        s.close()
        self.assertEqual(c.returncode, 0, self.output())
        with open(self.pidfile) as f:
            pid = int(f.read())
        self.waited_pids.append(pid)
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 0)
        self.assertEqual(self.output().split(), ["0", "1", "2", "[]"])

    def test_bad_activation_refused(self):
        self.write_config(rt.config(["true"]))
        s = self.listener()
        for n, why in (("2", "descriptor 4 is not open"), ("x", "LISTEN_FDS 'x'"),
                       ("251", "0 to 250")):
            c = self.create_activated([s.fileno()], activated_by(n))
            self.assertNotEqual(c.returncode, 0, n)
            self.assertIn(why, self.output(), n)
            self.assertIn(why, self.log_errors()[-1]["msg"], n)
            self.assertFalse(os.path.exists(os.path.join(self.root, "c1")), n)
            self.assertFalse(os.path.exists(self.pidfile), n)
        # socket activation's one and --preserve-fds 1 after it: 4 must be open too
        c = self.create_activated([s.fileno()], activated_by(1), "--preserve-fds", "1")
        self.assertNotEqual(c.returncode, 0)
        self.assertIn("--preserve-fds 1: descriptor 4 is not open", self.output())
        s.close()
        self.assertEqual(self.dirs.leftovers(), [])


if __name__ == "__main__":
    unittest.main()
