"""End to end: an exec'd process's own capabilities (docs/oci.md, "exec"). runc gives an
exec'd process the sets of its process.json (bounding, effective, permitted, inheritable,
ambient) and `exec --cap`; nsbox-oci's init forks it and cuts its sets to those, never above
the container's: a bounding and effective set read back from /proc/self/status, ambient
CAP_NET_BIND_SERVICE letting uid 1000 bind port 80 (and without it not), what the container
lacks refused with why, and the kernel refusing it again when the monitor is asked directly."""
import json
import os
import signal
import socket
import struct
import subprocess
import time
import unittest

import test_oci_runtime as rt
from oci_bundle import BundleCase

# Docker's default capabilities, given to the container in every set but inheritable and
# ambient, as Docker gives them
DOCKER_CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
               "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
               "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"]
STATUS = "grep -E '^(Uid|CapInh|CapPrm|CapEff|CapBnd|CapAmb):' /proc/self/status"
CHOWN, KILL, NET_BIND_SERVICE, NET_ADMIN = 1 << 0, 1 << 5, 1 << 10, 1 << 12


def status(text):
    """STATUS's lines as {"CapEff": 0x21, "Uid": "1000", ...}."""
    st = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("Uid", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            st[key] = int(value, 16) if key.startswith("Cap") else value.split()[0]
    return st


def setUpModule():
    rt.setUpModule()


@unittest.skipIf(not rt.OCI, "NSBOX_BIN is not set (run through ctest)")
class OciExecCaps(BundleCase):

    def setUp(self):
        super().setUp()
        self.install_probe()

    def container(self, caps=None, user=None):
        """A running container: Docker's capabilities (or caps, every set), as root (or user)."""
        c = rt.config(["sleep", "1000"])
        c["process"]["capabilities"] = {k: caps if caps is not None else DOCKER_CAPS
                                        for k in ("bounding", "effective", "permitted")}
        if user:
            c["process"]["user"] = user
        self.write_config(c)
        self.create("c1")
        self.assertEqual(self.oci("start", "c1").returncode, 0)

    def exec_process(self, args, caps, user=None, nnp=True):
        """exec --process in the foreground, as containerd's shim writes the file."""
        p = {"terminal": False, "user": user or {"uid": 0, "gid": 0}, "args": args,
             "env": ["PATH=/bin"], "cwd": "/", "noNewPrivileges": nnp}
        if caps is not None:
            p["capabilities"] = caps
        path = os.path.join(self.tmp, "process.json")
        with open(path, "w") as f:
            json.dump(p, f)
        return self.oci("exec", "--process", path, "c1")

    def test_reduced_sets_read_back(self):
        self.container()
        caps = {"bounding": ["CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE"],
                "effective": ["CAP_CHOWN", "CAP_KILL"], "permitted": ["CAP_CHOWN", "CAP_KILL"]}
        r = self.exec_process(["sh", "-c", STATUS], caps)
        self.assertEqual(r.returncode, 0, r.stderr)
        st = status(r.stdout.decode())
        self.assertEqual(st["CapBnd"], CHOWN | KILL | NET_BIND_SERVICE)
        # root's exec gains its bounding set, but no_new_privs keeps it within what was
        # permitted before: the process's own permitted set, not the container's
        self.assertEqual((st["CapEff"], st["CapPrm"], st["CapAmb"]), (CHOWN | KILL,) * 2 + (0,))
        # the container's own, without capabilities in the process: init's, as before
        r = self.exec_process(["sh", "-c", STATUS], None)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(bin(status(r.stdout.decode())["CapBnd"]).count("1"), len(DOCKER_CAPS))
        # exec --cap: the config's sets and the one named, which the config must allow
        self.container_caps_flag()

    def container_caps_flag(self):
        r = self.oci("exec", "--cap", "CAP_NET_ADMIN", "c1", "true")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("process.capabilities.bounding: CAP_NET_ADMIN is not in the container's "
                      "bounding set", r.stderr.decode())
        r = self.oci("exec", "--cap", "CAP_NOPE", "c1", "true")
        self.assertIn("unknown capability", r.stderr.decode())
        r = self.oci("exec", "--cap", "CAP_KILL", "c1", "sh", "-c", STATUS)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_ambient_lets_a_user_bind_port_80(self):
        """Docker's and Kubernetes' way to give a non-root process one capability:
        CAP_NET_BIND_SERVICE ambient (and so inheritable and permitted) for uid 1000."""
        self.container()
        user = {"uid": 1000, "gid": 1000}
        nbs = ["CAP_NET_BIND_SERVICE"]
        caps = {k: nbs for k in ("bounding", "effective", "permitted", "inheritable",
                                 "ambient")}
        r = self.exec_process(["sh", "-c", STATUS + "; attack bind 80"], caps, user=user)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout.decode()
        self.assertIn("bound 80", out)
        st = status(out)
        self.assertEqual(st["Uid"], "1000")
        for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            self.assertEqual(st[k], NET_BIND_SERVICE, k)
        # without it ambient: a uid that is not 0 loses the rest at exec, and cannot bind
        caps["ambient"] = []
        r = self.exec_process(["sh", "-c", STATUS + "; attack bind 80"], caps, user=user)
        self.assertNotEqual(r.returncode, 0)
        out = r.stdout.decode()
        self.assertIn("bind 80 EACCES", out)
        st = status(out)
        self.assertEqual((st["CapPrm"], st["CapEff"], st["CapAmb"]), (0, 0, 0))
        self.assertEqual(self.state()["status"], "running")

    def test_above_the_container_refused(self):
        """What the container lacks, the floor refuses, or the container's init cannot cut:
        refused with why and the fix, and nothing runs."""
        self.container()
        cases = [
            ({"bounding": ["CAP_NET_ADMIN"]},
             "process.capabilities.bounding: CAP_NET_ADMIN is not in the container's bounding "
             "set"),
            ({"bounding": DOCKER_CAPS, "permitted": ["CAP_NET_ADMIN"]},
             "process.capabilities.permitted: CAP_NET_ADMIN is not in the container's "
             "permitted set"),
            ({"bounding": DOCKER_CAPS, "ambient": ["CAP_NET_ADMIN"]},
             "process.capabilities.ambient: CAP_NET_ADMIN is not in the container's permitted"),
            ({"bounding": DOCKER_CAPS, "effective": ["CAP_KILL"]},
             "process.capabilities.effective: CAP_KILL is not in the process's permitted"),
            ({"bounding": ["CAP_SYS_ADMIN"]}, "privileged containers are not supported"),
            ({"ambient": ["CAP_SYS_MODULE"]}, "privileged containers are not supported"),
        ]
        for caps, why in cases:
            r = self.exec_process(["sh", "-c", "echo RAN"], caps)
            self.assertNotEqual(r.returncode, 0, caps)
            self.assertNotIn(b"RAN", r.stdout, caps)
            self.assertIn(why, r.stderr.decode(), caps)
            self.assertIn(why, self.log_errors()[-1]["msg"], caps)
        self.assertEqual(self.state()["status"], "running")

    def test_bounding_cut_without_setpcap(self):
        """A container without CAP_SETPCAP: init keeps it for its children, so an exec'd
        process's bounding set is cut all the same."""
        self.container(caps=["CAP_CHOWN", "CAP_KILL"])
        r = self.exec_process(["sh", "-c", STATUS], {"bounding": ["CAP_CHOWN"]})
        self.assertEqual(r.returncode, 0, r.stderr)
        st = status(r.stdout.decode())
        self.assertEqual((st["CapBnd"], st["CapEff"], st["CapPrm"]), (CHOWN, 0, 0))
        r = self.exec_process(["sh", "-c", STATUS], {"bounding": ["CAP_CHOWN", "CAP_KILL"],
                                                    "permitted": ["CAP_KILL"],
                                                    "effective": ["CAP_KILL"]})
        self.assertEqual(r.returncode, 0, r.stderr)
        st = status(r.stdout.decode())
        self.assertEqual((st["CapBnd"], st["CapEff"]), (CHOWN | KILL, KILL))

    def test_kernel_refuses_more_when_asked_directly(self):
        """The kernel is the floor, not exec's check: a request straight to the monitor's
        control socket whose capability sets exceed init's (CAP_NET_ADMIN, which the container
        lacks; permitted above init's) fails in init's child before anything runs."""
        self.container()
        out = os.path.join(self.tmp, "direct.out")
        docker = sum(1 << n for n in (0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31))
        for sets in ((docker, NET_ADMIN, NET_ADMIN, 0, 0),  # permitted above init's
                     (docker, NET_ADMIN, docker, 0, 0),     # effective above permitted
                     (docker, 0, 0, NET_ADMIN, 0)):         # inheritable above init's
            user = b"0 0 -1 caps " + b" ".join(b"%x" % v for v in sets)
            answer = self.direct(user, out)
            op, _pid, code = struct.unpack("=16sii", answer[:24])
            self.assertEqual(op.rstrip(b"\0"), b"failed", answer)
            self.assertEqual(code, 125)
            self.assertIn(b"cannot give the process its capabilities: Operation not permitted",
                          answer[44:])
            with open(out) as f:
                self.assertEqual(f.read(), "")
        self.assertEqual(self.state()["status"], "running")

    def test_kept_capabilities_unreachable(self):
        """Init keeps CAP_SETUID, CAP_SETGID and CAP_SETPCAP beyond the config's sets, for the
        processes it forks as other users. A container of uid 1000 without capabilities
        (Kubernetes' drop: [ALL]): its process and an exec'd one of its user hold none of them,
        cannot change ids or raise a capability, and cannot reach init (trace it, read its
        memory, open its descriptors or root); nor can root of a container with
        CAP_SYS_PTRACE."""
        c = rt.config(["sh", "-c", "attack; echo WORKLOAD-DONE; exec sleep 1000"])
        c["process"]["capabilities"] = {}
        c["process"]["user"] = {"uid": 1000, "gid": 1000}
        self.write_config(c)
        self.create("c1")
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        with open(os.path.join(self.root, "c1", "state.json")) as f:
            init = json.load(f)["pid"]
        with open(f"/proc/{init}/status") as f:
            init_st = status(f.read())
        kept = (1 << 6) | (1 << 7) | (1 << 8)  # CAP_SETGID, CAP_SETUID, CAP_SETPCAP
        self.assertEqual(init_st["CapPrm"] & kept, kept)  # there to be reached
        r = self.oci("exec", "c1", "attack")
        self.assertEqual(r.returncode, 0, r.stderr)
        # the container's process: its attack is done once it has exec'd sleep
        w = self.oci("exec", "c1", "sh", "-c",
                     "until grep -q sleep /proc/2/cmdline; do sleep 0.1; done")
        self.assertEqual(w.returncode, 0, w.stderr)
        with open(self.out) as f:
            workload = f.read().split("WORKLOAD-DONE")[0]
        for who, text in (("exec'd", r.stdout.decode()), ("workload", workload)):
            probes = {p["name"]: p for p in map(json.loads, text.splitlines())}
            for name in ("caps_CapInh_zero", "caps_CapPrm_zero", "caps_CapEff_zero",
                         "caps_CapBnd_zero", "caps_CapAmb_zero", "setresuid_root",
                         "setresgid_root", "setgroups", "capset_raise_all",
                         "setresuid_other_mapped", "setresgid_other_mapped",
                         "ptrace_seize_init", "open_proc_1_mem", "open_proc_1_environ",
                         "open_proc_1_fd", "open_proc_1_root", "open_proc_1_cwd"):
                self.assertTrue(probes[name]["blocked"], (who, probes[name]))
        self.assertEqual(self.state()["status"], "running")
        # not even root of a container with CAP_SYS_PTRACE reaches init: its memory is the
        # host's user namespace's
        self.assertEqual(self.oci("delete", "--force", "c1").returncode, 0)
        self.container(caps=DOCKER_CAPS + ["CAP_SYS_PTRACE"])
        r = self.oci("exec", "c1", "attack")
        self.assertEqual(r.returncode, 0, r.stderr)
        probes = {p["name"]: p for p in map(json.loads, r.stdout.decode().splitlines())}
        eff = int(probes["caps_CapEff_zero"]["detail"].partition("=")[2], 16)
        self.assertTrue(eff & (1 << 19), probes["caps_CapEff_zero"])  # CAP_SYS_PTRACE
        for name in ("ptrace_seize_init", "open_proc_1_mem", "open_proc_1_environ",
                     "open_proc_1_fd", "open_proc_1_root", "open_proc_1_cwd"):
            self.assertTrue(probes[name]["blocked"], probes[name])

    def test_config_changed_after_create_gives_nothing_more(self):
        """exec checks a process against the config the container was created with, as runc
        does: the bundle's config.json changed after start to give the container more (any
        capability, and what init keeps for its children) changes nothing. exec refuses with
        its own message, naming the set and the fix, and nothing runs; the container's own
        sets still go to a process that names none."""
        self.container(caps=["CAP_CHOWN", "CAP_KILL"])
        sets = ("bounding", "effective", "permitted")
        c = rt.config(["sleep", "1000"])
        more = ["CAP_CHOWN", "CAP_KILL", "CAP_NET_ADMIN", "CAP_SETUID"]
        c["process"]["capabilities"] = {k: more for k in sets}
        self.write_config(c)
        for cap in ("CAP_NET_ADMIN", "CAP_SETUID"):
            r = self.exec_process(["sh", "-c", "echo RAN"], {k: [cap] for k in sets})
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertNotIn(b"RAN", r.stdout)
            self.assertIn("process.capabilities.bounding: %s is not in the container's "
                          "bounding set" % cap, r.stderr.decode())
        r = self.oci("exec", "--cap", "CAP_NET_ADMIN", "c1", "sh", "-c", "echo RAN")
        self.assertNotIn(b"RAN", r.stdout)
        self.assertIn("CAP_NET_ADMIN is not in the container's bounding set", r.stderr.decode())
        # the command line's form: the process of the config as created, not the bundle's
        r = self.oci("exec", "c1", "sh", "-c", STATUS)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(status(r.stdout.decode())["CapBnd"], CHOWN | KILL)
        self.assertEqual(self.state()["status"], "running")

    def test_kept_capabilities_never_given_on_request(self):
        """What init keeps for its children (CAP_SETUID, CAP_SETGID, CAP_SETPCAP) is no
        capability of the container's: init holds it, so the kernel would give it to a process
        that asks. A request straight to the monitor's control socket is refused by init
        before anything runs, and exec refuses it itself."""
        c = rt.config(["sleep", "1000"])
        c["process"]["capabilities"] = {}
        c["process"]["user"] = {"uid": 1000, "gid": 1000}
        self.write_config(c)
        self.create("c1")
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        out = os.path.join(self.tmp, "direct.out")
        kept = "%x" % ((1 << 6) | (1 << 7) | (1 << 8))
        for user in ("0 0 -1 caps %s %s %s 0 0" % ((kept,) * 3),
                     "1000 1000 -1 caps %s %s %s %s %s" % ((kept,) * 5),
                     "1000 1000 -1 caps %s 0 0 0 0" % kept):
            answer = self.direct(user.encode(), out)
            op, _pid, code = struct.unpack("=16sii", answer[:24])
            self.assertEqual(op.rstrip(b"\0"), b"failed", (user, answer))
            self.assertEqual(code, 125)
            self.assertIn(b"cannot give the process its capabilities: Operation not permitted",
                          answer[44:])
            with open(out) as f:
                self.assertEqual(f.read(), "")
        sets = ("bounding", "effective", "permitted", "inheritable", "ambient")
        kept_names = ["CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"]
        for caps, user in (({k: kept_names for k in sets}, {"uid": 1000, "gid": 1000}),
                           ({k: kept_names for k in sets[:3]}, None)):
            r = self.exec_process(["sh", "-c", "echo RAN; " + STATUS], caps, user=user)
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertNotIn(b"RAN", r.stdout)
            self.assertIn("is not in the container's bounding set", r.stderr.decode())
        self.assertEqual(self.state()["status"], "running")

    def test_exec_child_stopped_holding_kept_capabilities_unreachable(self):
        """The child init forks for an exec has init's uid, the container's, until it changes
        ids, and holds what init keeps in its permitted set meanwhile, in init's memory. The
        container's process stops it there (SIGSTOP to every process of its uid while execs
        are started) and fails to trace it, read its memory, take its descriptors or open its
        /proc files; the exec then goes on. Uid 1000 without capabilities, and root with
        CAP_SYS_PTRACE, whom only init's memory being the host's user namespace's and not
        dumpable keeps out. The execs are of the container's user: one of another uid would
        make init's memory not dumpable by the kernel's rule, whatever init set."""
        for user, caps in (({"uid": 1000, "gid": 1000}, []),
                           ({"uid": 0, "gid": 0}, ["CAP_SYS_PTRACE"])):
            c = rt.config(["attack", "catch-spawn"])
            c["process"]["capabilities"] = {k: caps for k in ("bounding", "effective",
                                                             "permitted")}
            c["process"]["user"] = user
            self.write_config(c)
            pid = self.create("c1")
            self.assertEqual(self.oci("start", "c1").returncode, 0)
            # each exec is one chance for the stop to come in the child's first steps; the
            # attacker lets the commands it stopped go on
            for _ in range(500):
                if "spawn_caught" in self.output():
                    break
                self.oci("exec", "c1", "true")
            self.wait(pid)
            probes = {p["name"]: p for p in map(json.loads, self.output().splitlines())}
            caught = probes["spawn_caught"]["detail"]
            kept = (1 << 6) | (1 << 7) | (1 << 8)  # CAP_SETGID, CAP_SETUID, CAP_SETPCAP
            self.assertEqual(int(caught.split("CapPrm:\t")[1][:16], 16) & kept, kept, caught)
            names = [n for n in probes if n != "spawn_caught"]
            self.assertIn("ptrace_seize_spawn", names)
            self.assertIn("open_spawn_environ", names)
            for name in names:
                self.assertTrue(probes[name]["blocked"], (user, probes[name]))
            self.assertEqual(self.oci("delete", "--force", "c1").returncode, 0)

    def test_exec_child_held_stopped_holds_up_nothing(self):
        """A process of init's uid stops an exec's child before it changes ids and keeps it
        stopped: that exec waits, but init does not. Another exec runs, and `kill` reaches the
        container's process, which ends the container (and with it the held exec)."""
        c = rt.config(["attack", "catch-spawn", "hold"])
        c["process"]["capabilities"] = {}
        c["process"]["user"] = {"uid": 1000, "gid": 1000}
        self.write_config(c)
        pid = self.create("c1")
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        cmd = [rt.OCI, "--root", self.root, "--log", self.log, "--log-format", "json", "exec",
               "c1", "true"]
        execs = []
        # each exec is one chance for the stop to come in the child's first steps; one that
        # is caught waits for its child, which the attacker never lets go on
        while "spawn_caught" not in self.output() and len(execs) < 500:
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 env=self.dirs.env())
            execs.append(p)
            while p.poll() is None and "spawn_caught" not in self.output():
                time.sleep(0.01)
        self.assertIn("spawn_caught", self.output())
        self.assertTrue(any(p.poll() is None for p in execs))  # the held one waits
        r = self.oci("exec", "c1", "sh", "-c", "echo RAN")
        self.assertEqual((r.returncode, r.stdout), (0, b"RAN\n"), r.stderr)
        self.assertEqual(self.oci("kill", "c1", "TERM").returncode, 0)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 128 + signal.SIGTERM)
        for p in execs:
            self.assertIsNotNone(p.wait(60))

    def test_root_without_setuid_gains_none_of_the_kept_at_its_exec(self):
        """A root process without no_new_privs gets its bounding set as its permitted one at
        every exec: the container's process and an exec'd one of a root container whose config
        has no CAP_SETUID, CAP_SETGID or CAP_SETPCAP have none of them after an exec of their
        own."""
        c = rt.config(["sh", "-c", "sh -c \"%s\"; exec sleep 1000" % STATUS])
        c["process"]["capabilities"] = {k: ["CAP_CHOWN", "CAP_KILL"]
                                        for k in ("bounding", "effective", "permitted")}
        c["process"]["noNewPrivileges"] = False
        self.write_config(c)
        self.create("c1")
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        r = self.oci("exec", "c1", "sh", "-c", "sh -c \"%s\"" % STATUS)
        self.assertEqual(r.returncode, 0, r.stderr)
        w = self.oci("exec", "c1", "sh", "-c",
                     "until grep -q sleep /proc/2/cmdline; do sleep 0.1; done")
        self.assertEqual(w.returncode, 0, w.stderr)
        for who, text in (("exec'd", r.stdout.decode()), ("workload", self.output())):
            st = status(text)
            self.assertEqual(st["Uid"], "0", who)
            for k in ("CapPrm", "CapEff", "CapBnd"):
                self.assertEqual(st[k], CHOWN | KILL, (who, k))

    def test_profile_faking_drops_refused(self):
        """A bundle's seccomp profile is loaded in init before init drops the CAP_SYS_ADMIN it
        loaded it with, and its children cut their bounding sets under it. One that answers
        prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN or CAP_SETUID) with SCMP_ACT_ERRNO and errno 0,
        success without the call, would leave both in the bounding set, and a root process
        without no_new_privs gets its bounding set at exec: refused at create."""
        c = rt.config(["sh", "-c", STATUS])
        c["process"]["noNewPrivileges"] = False
        drop = [{"names": ["prctl"], "action": "SCMP_ACT_ERRNO", "errnoRet": 0,
                 "args": [{"index": 0, "value": 24, "op": "SCMP_CMP_EQ"},
                          {"index": 1, "value": cap, "op": "SCMP_CMP_EQ"}]}
                for cap in (21, 7)]  # CAP_SYS_ADMIN, CAP_SETUID
        c["linux"]["seccomp"] = {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": drop}
        self.write_config(c)
        self.assertIn("the profile answers prctl with SCMP_ACT_ERRNO and errno 0",
                      self.create_refused())
        # another errno fails the drop, and create with it, as before
        for rule in drop:
            rule["errnoRet"] = 1
        self.write_config(c)
        self.assertIn("PR_CAPBSET_DROP", self.create_refused())
        # nor may descriptors stay open that init and its children close: what nsbox-oci's
        # caller left open would reach the container
        c["linux"]["seccomp"]["syscalls"] = [{"names": ["close_range"],
                                              "action": "SCMP_ACT_ERRNO", "errnoRet": 0}]
        self.write_config(c)
        self.assertIn("the profile answers close_range with SCMP_ACT_ERRNO and errno 0",
                      self.create_refused())

    def direct(self, user, out):
        """One exec request with user (policy/spawnuser.h) on ctl.sock: the first answer."""
        payload = user + b"\0/\0sh\0-c\0echo RAN\0"
        # struct nsbox_ocictl_msg (oci/ocirt.h): op, pid, status, flags (F_USER 4), winsize,
        # argc, envc, len
        hdr = struct.pack("=16siiIIIII", b"exec", 0, 0, 4, 0, 3, 0, len(payload))
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s, open(out, "w") as o:
            s.connect(os.path.join(self.root, "c1", "ctl.sock"))
            socket.send_fds(s, [hdr + payload], [0, o.fileno(), o.fileno()])
            return s.recv(4096)


if __name__ == "__main__":
    unittest.main()
