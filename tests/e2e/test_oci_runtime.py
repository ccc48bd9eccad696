"""End to end: nsbox-oci, the runc-compatible runtime (docs/oci.md), driven the way
containerd's shim drives runc: the test process is a subreaper (PR_SET_CHILD_SUBREAPER), makes
a bundle (a busybox-static root and a config.json it writes itself), and runs create (the
pid-file process must become its child), state, start, kill and delete. Also: an unknown id
"does not exist" (in the JSON log line callers read), a privileged config is refused, a
running container is not deleted without --force. Then a private containerd (its own root,
state, socket and config, started and killed by pid here) runs an image the test imports
from a docker-save archive with `ctr run --runc-binary nsbox-oci`."""
import glob
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import unittest

import oci_images

from engines import RUN_DIRS, absent, remove_cgroup, remove_made
from nsbox_test import Dirs, sandbox_cgroup_file, wait_for
from oci_bundle import (BUSYBOX, OCI, BundleCase, config, no_idmapped_overlay_layers,
                        require_runtime)


def setUpModule():
    require_runtime()


def read_pty(master):
    """What comes on a pty's master until its last slave closes (EIO), or 60 s of silence."""
    out = b""
    while select.select([master], [], [], 60)[0]:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the last slave is closed
            break
        if not chunk:
            break
        out += chunk
    return out


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class OciRuntime(BundleCase):
    def test_version(self):
        r = self.oci("--version")
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.decode().startswith("runc version "), r.stdout)

    def test_lifecycle(self):
        self.write_config(config(["sh", "-c", "echo hello $FOO; id -u; hostname; pwd"]))
        pid = self.create()
        # the pid-file process is the caller's child: a subreaper can wait for it
        with open(f"/proc/{pid}/stat") as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        self.assertEqual(ppid, os.getpid())
        st = self.state()
        self.assertEqual((st["status"], st["pid"], st["id"]), ("created", pid, "c1"))
        self.assertEqual(st["bundle"], os.path.realpath(self.bundle))
        self.assertEqual(self.output(), "")  # held at the start barrier
        r = self.oci("start", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 0)
        self.assertEqual(self.output(), "hello from-config\n0\nocibox\n/tmp\n")
        self.assertEqual(self.state()["status"], "stopped")
        r = self.oci("start", "c1")
        self.assertNotEqual(r.returncode, 0)
        r = self.oci("delete", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.oci("state", "c1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("does not exist", r.stderr.decode())
        self.assertEqual(self.dirs.leftovers(), [])

    def test_exit_code(self):
        self.write_config(config(["sh", "-c", "exit 7"]))
        pid = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 7)
        self.assertEqual(self.oci("delete", "c1").returncode, 0)

    def test_state_pid_is_the_container(self):
        # the pid callers are given (pid file, state) is the container's init: callers read
        # and enter the container through /proc/PID (Docker's prestart hook and CNI: ns/net;
        # docker stats and containerd's metrics: cgroup; nsenter, runc-exec-style joins: every
        # ns/): all must be the container's, those of its workload
        self.write_config(config(["sleep", "1000"]))
        pid = self.create()
        self.assertEqual(self.state()["pid"], pid)
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        r = self.oci("ps", "--format", "json", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        workload = [p for p in json.loads(r.stdout) if p != pid]
        self.assertEqual(len(workload), 1, r.stdout)
        with open(os.path.join(self.root, "c1", "state.json")) as f:
            sid = json.load(f)["sandbox"]
        for ns in ("net", "ipc", "uts", "pid", "mnt", "user", "cgroup"):
            mine = os.readlink(f"/proc/{pid}/ns/{ns}")
            self.assertEqual(mine, os.readlink(f"/proc/{workload[0]}/ns/{ns}"), ns)
            self.assertNotEqual(mine, os.readlink(f"/proc/self/ns/{ns}"), ns)
        with open(f"/proc/{pid}/cgroup") as f:
            cgroup = f.read()
        with open(f"/proc/{workload[0]}/cgroup") as f:
            self.assertEqual(cgroup, f.read())
        self.assertIn(sid, cgroup)
        # pid 1 inside
        with open(f"/proc/{pid}/status") as f:
            nspid = [line.split()[1:] for line in f if line.startswith("NSpid:")][0]
        self.assertEqual(nspid[-1], "1")
        self.kill_and_delete(pid)

    def kill_and_delete(self, pid):
        """kill c1 KILL: its pid-file process (pid) dies of it; then nothing is left."""
        r = self.oci("kill", "c1", "KILL")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), -9)
        self.assertEqual(self.oci("delete", "c1").returncode, 0)
        self.assertEqual(self.dirs.leftovers(), [])

    def test_state_of_an_older_version(self):
        # a container created before an upgrade recorded the monitor as "pid" and init as
        # "init_pid": it is still stopped, killed and deleted through them
        self.write_config(config(["sleep", "1000"]))
        pid = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        path = os.path.join(self.root, "c1", "state.json")
        with open(path) as f:
            st = json.load(f)
        old = dict(st, pid=st["monitor_pid"], pid_start=st["monitor_start"],
                   init_pid=st["pid"], init_start=st["pid_start"])
        del old["monitor_pid"], old["monitor_start"]
        with open(path, "w") as f:
            json.dump(old, f)
        self.assertEqual((self.state()["status"], self.state()["pid"]), ("running", pid))
        self.kill_and_delete(pid)

    def test_monitor_killed(self):
        # the monitor (which would remove the sandbox) dies of SIGKILL: the container ends as
        # killed, not as a success, and delete has nsbox's gc remove what the monitor left
        self.write_config(config(["sleep", "1000"]))
        pid = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        with open(os.path.join(self.root, "c1", "state.json")) as f:
            monitor = json.load(f)["monitor_pid"]
        for _ in range(3000):  # until the monitor has let init fork the workload
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                if f.read().split():
                    break
            time.sleep(0.01)
        os.kill(monitor, signal.SIGKILL)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 137)
        self.assertEqual(self.state()["status"], "stopped")
        r = self.oci("delete", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.dirs.leftovers(), [])

    def test_monitor_killed_before_start(self):
        # the same at the start barrier: init, which holds nothing of the monitor's there,
        # sees it gone and ends without running the workload
        self.write_config(config(["sh", "-c", "echo never"]))
        pid = self.create()
        with open(os.path.join(self.root, "c1", "state.json")) as f:
            os.kill(json.load(f)["monitor_pid"], signal.SIGKILL)
        fd = os.pidfd_open(pid)
        self.addCleanup(os.close, fd)
        if not select.select([fd], [], [], 30)[0]:  # a guard against a hang, not a measure
            os.kill(pid, signal.SIGKILL)
            self.fail("init still waits at its start barrier with its monitor gone")
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 125)
        self.assertEqual(self.output(), "")
        self.assertEqual(self.oci("delete", "c1").returncode, 0)
        self.assertEqual(self.dirs.leftovers(), [])

    def test_kill_running(self):
        self.write_config(config(["sleep", "1000"]))
        pid = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        self.assertEqual(self.state()["status"], "running")
        r = self.oci("delete", "c1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not stopped", r.stderr.decode())
        r = self.oci("kill", "c1", "SIGTERM")
        self.assertEqual(r.returncode, 0, r.stderr)
        # the workload died of SIGTERM: init exits 128+15
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 143)
        self.assertEqual(self.state()["status"], "stopped")
        r = self.oci("kill", "c1", "9")
        self.assertIn("container not running", r.stderr.decode())
        self.assertEqual(self.oci("delete", "c1").returncode, 0)
        self.assertEqual(self.dirs.leftovers(), [])

    def test_kill_created_and_force_delete(self):
        self.write_config(config(["echo", "never"]))
        pid = self.create("c2")
        r = self.oci("kill", "c2", "KILL")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), -9)
        self.assertEqual(self.output(), "")
        self.assertEqual(self.state("c2")["status"], "stopped")
        self.assertEqual(self.oci("delete", "c2").returncode, 0)
        pid = self.create("c3")
        r = self.oci("delete", "--force", "c3")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.wait(pid)
        self.assertEqual(self.output(), "")
        self.assertFalse(os.path.exists(os.path.join(self.root, "c3")))
        self.assertEqual(self.dirs.leftovers(), [])

    def test_resources_become_limits(self):
        c = config(["true"])
        c["linux"]["resources"] = {"memory": {"limit": 96 << 20}, "pids": {"limit": 37}}
        self.write_config(c)
        self.create()
        with open(os.path.join(self.root, "c1", "state.json")) as f:
            sid = json.load(f)["sandbox"]
        self.assertEqual(sandbox_cgroup_file(sid, "memory", "memory.limit_in_bytes",
                                             "memory.max"), str(96 << 20))
        self.assertEqual(sandbox_cgroup_file(sid, "pids", "pids.max", "pids.max"), "37")
        self.assertEqual(self.oci("delete", "--force", "c1").returncode, 0)

    def test_features(self):
        r = self.oci("features")
        self.assertEqual(r.returncode, 0, r.stderr)
        f = json.loads(r.stdout)
        self.assertEqual((f["ociVersionMin"], f["ociVersionMax"]), ("1.0.0", "1.1.0"))
        # only what is really done: the hooks run on the host, the mount options it parses,
        # every capability but CAP_SYS_ADMIN and CAP_SYS_MODULE, a bundle's seccomp; every
        # namespace (each sandbox has all of them new)
        self.assertEqual(f["hooks"], ["prestart", "createRuntime", "poststart", "poststop"])
        self.assertIn("rbind", f["mountOptions"])
        self.assertIn("nosuid", f["mountOptions"])
        # a bind's idmap, on request (docs/oci.md, "Idmapped volumes")
        self.assertIn("idmap", f["mountOptions"])
        self.assertIn("ridmap", f["mountOptions"])
        self.assertEqual(f["linux"]["mountExtensions"], {"idmap": {"enabled": True}})
        self.assertIn("CAP_CHOWN", f["linux"]["capabilities"])
        self.assertNotIn("CAP_SYS_ADMIN", f["linux"]["capabilities"])
        self.assertEqual(sorted(f["linux"]["namespaces"]),
                         ["cgroup", "ipc", "mount", "network", "pid", "user", "uts"])
        # systemd: the slice:prefix:name form of cgroupsPath (made through cgroupfs)
        self.assertEqual(f["linux"]["cgroup"], {"v1": True, "v2": True, "systemd": True,
                                                "systemdUser": False})
        # a bundle's profile, over nsbox's: what its parser takes, one architecture (nsbox's
        # own filter kills the calls of every other ABI)
        sc = f["linux"]["seccomp"]
        self.assertTrue(sc["enabled"])
        self.assertEqual(sorted(sc["actions"]),
                         ["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL",
                          "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG",
                          "SCMP_ACT_TRAP"])  # no NOTIFY, no TRACE
        self.assertEqual(len(sc["operators"]), 7)
        self.assertIn("SCMP_CMP_MASKED_EQ", sc["operators"])
        self.assertEqual(len(sc["archs"]), 1)
        self.assertEqual(sc["supportedFlags"], ["SECCOMP_FILTER_FLAG_LOG",
                                                "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
                                                "SECCOMP_FILTER_FLAG_TSYNC"])

    def test_state_annotations(self):
        ann = {"io.kubernetes.cri.container-type": "container", "org.example/x": "a b"}
        self.write_config(config(["true"], annotations=ann))
        self.create()
        self.assertEqual(self.state()["annotations"], ann)
        self.assertEqual(self.oci("delete", "--force", "c1").returncode, 0)
        c = config(["true"], annotations={"n": 1})
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "c2")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("'annotations'", r.stderr.decode())

    def test_pause_resume(self):
        self.write_config(config(["sh", "-c", "while :; do echo t; sleep 0.05; done"]))
        pid = self.create()
        r = self.oci("pause", "c1")
        self.assertNotEqual(r.returncode, 0)  # created, not running
        self.assertIn("container not running", r.stderr.decode())
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        time.sleep(0.3)
        r = self.oci("resume", "c1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not paused", r.stderr.decode())
        r = self.oci("pause", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.state()["status"], "paused")
        with open(os.path.join(self.root, "c1", "state.json")) as f:
            sid = json.load(f)["sandbox"]
        self.assertIn(sandbox_cgroup_file(sid, "freezer", "freezer.state", "cgroup.freeze"),
                      ("FROZEN", "1"))
        before = len(self.output())
        time.sleep(0.5)
        self.assertEqual(len(self.output()), before)  # nothing runs
        r = self.oci("resume", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.state()["status"], "running")
        # the loop runs again once it is scheduled, later on a busy machine
        self.assertTrue(wait_for(lambda: len(self.output()) > before, 20), "nothing ran")
        # a paused container ends on kill KILL (it is thawed so that it can die)
        self.assertEqual(self.oci("pause", "c1").returncode, 0)
        r = self.oci("kill", "c1", "KILL")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), -9)
        self.assertEqual(self.state()["status"], "stopped")
        self.assertEqual(self.oci("delete", "c1").returncode, 0)
        self.assertEqual(self.dirs.leftovers(), [])

    def test_force_delete_paused(self):
        self.write_config(config(["sleep", "1000"]))
        pid = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        self.assertEqual(self.oci("pause", "c1").returncode, 0)
        r = self.oci("delete", "c1")
        self.assertIn("not stopped", r.stderr.decode())
        r = self.oci("delete", "--force", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.wait(pid)
        self.assertFalse(os.path.exists(os.path.join(self.root, "c1")))
        self.assertEqual(self.dirs.leftovers(), [])

    def test_unknown_id(self):
        for cmd in (["state", "nope"], ["start", "nope"], ["kill", "nope", "KILL"],
                    ["delete", "nope"]):
            r = self.oci(*cmd)
            self.assertNotEqual(r.returncode, 0, cmd)
            self.assertIn("does not exist", r.stderr.decode(), cmd)
        errors = self.log_errors()
        self.assertEqual(len(errors), 4)
        for e in errors:
            self.assertEqual(e["level"], "error")
            self.assertIn("container nope does not exist", e["msg"])
            self.assertIn("time", e)
        self.assertEqual(self.oci("delete", "--force", "nope").returncode, 0)

    def test_privileged_refused(self):
        c = config(["true"])
        c["process"]["capabilities"]["bounding"].append("CAP_SYS_ADMIN")
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "--pid-file", self.pidfile, "p1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("privileged containers are not supported", r.stderr.decode())
        self.assertIn("privileged", self.log_errors()[0]["msg"])
        self.assertFalse(os.path.exists(self.pidfile))
        self.assertFalse(os.path.exists(os.path.join(self.root, "p1")))

    def test_program_not_found_fails_create(self):
        # as runc's create does, in the words engines match (podman: exit code 127 and the
        # message); a create that succeeded left start to succeed and the container to end
        # at once with 127 and no word anywhere
        for args, want in ((["nonexistent-cmd"], "nonexistent-cmd: executable file not found "
                                                 "in $PATH (PATH=/bin)"),
                           (["/bin/nope"], "/bin/nope: no such file or directory"),
                           (["./nope"], "./nope: no such file or directory")):
            self.write_config(config(args))
            self.assertIn(want, self.create_refused("n1"), args)
        self.assertEqual(self.dirs.leftovers(), [])
        # a program found on PATH, or by a path, still runs
        self.write_config(config(["/bin/sh", "-c", "echo found"]))
        pid = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 0)
        self.assertEqual(self.output(), "found\n")

    def test_bad_config_names_key(self):
        c = config(["true"])
        c["process"]["cwd"] = "relative"
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "c1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("'process.cwd'", r.stderr.decode())
        # a bundle without config.json says what a bundle is (runc's default is the cwd)
        r = self.oci("create", "--bundle", self.tmp, "c1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("config.json does not exist: the bundle is --bundle DIR, or the current "
                      "directory", r.stderr.decode())
        # runc's commands that nsbox-oci has not are named so, not as typos
        r = self.oci("checkpoint", "c1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("'checkpoint' is a runc command that nsbox-oci does not have",
                      r.stderr.decode())


CONTAINERD_CONFIG = """version = 2
root = "{d}/root"
state = "{d}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "{d}/c.sock"
[ttrpc]
  address = "{d}/c.sock.ttrpc"
"""


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
@unittest.skipIf(not shutil.which("containerd") or not shutil.which("ctr") or
                 not shutil.which("containerd-shim-runc-v2"),
                 "needs containerd (Debian package containerd)")
class Containerd(unittest.TestCase):
    """ctr run through containerd's runc shim, with nsbox-oci as its runc."""
    # containerd's namespace, and so the top cgroup of its containers (/NS/ID): ours alone,
    # so that what is removed below is only what our containerd made
    NS = f"nsbox-oci-test-{os.getpid()}"

    @classmethod
    def setUpClass(cls):
        cls.dirs = Dirs()
        cls.run_made = absent(RUN_DIRS)
        cls.d = tempfile.mkdtemp(prefix="nsbox-ctd-")
        with open(os.path.join(cls.d, "config.toml"), "w") as f:
            f.write(CONTAINERD_CONFIG.format(d=cls.d))
        cls.log = open(os.path.join(cls.d, "containerd.log"), "w")
        # nsbox-oci, run by the shim, inherits this environment: the test's own nsbox dirs
        cls.daemon = subprocess.Popen(
            ["containerd", "--config", os.path.join(cls.d, "config.toml")],
            stdout=cls.log, stderr=cls.log, env=cls.dirs.env(), start_new_session=True)
        sock = os.path.join(cls.d, "c.sock")
        deadline = time.monotonic() + 30
        while not os.path.exists(sock) and cls.daemon.poll() is None:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if not os.path.exists(sock):
            cls.tearDownClass()
            raise unittest.SkipTest("the private containerd did not start")
        layer = oci_images.tar_bytes(
            [("bin", b"", 0o755, tarfile.DIRTYPE),
             ("bin/busybox", open(BUSYBOX, "rb").read(), 0o755)] +
            [("bin/" + a, b"", 0o777, tarfile.SYMTYPE, "busybox")
             for a in ("sh", "echo", "id", "sleep", "cat")] +
            [("etc", b"", 0o755, tarfile.DIRTYPE), ("tmp", b"", 0o1777, tarfile.DIRTYPE)])
        archive = os.path.join(cls.d, "image.tar")
        oci_images.write_docker_save(archive, layers=[layer], tag="nsbox-test/oci-bb:1")
        r = cls.ctr("image", "import", archive)
        if r.returncode != 0:
            cls.tearDownClass()
            raise AssertionError(f"ctr image import: {r.stderr}")

    @classmethod
    def tearDownClass(cls):
        if cls.daemon.poll() is None:
            for t in cls.ctr("task", "ls", "-q").stdout.split():
                cls.ctr("task", "kill", "-s", "SIGKILL", t)
                cls.ctr("task", "rm", "-f", t)
            for c in cls.ctr("container", "ls", "-q").stdout.split():
                cls.ctr("container", "rm", c)
            cls.daemon.send_signal(signal.SIGTERM)
            try:
                cls.daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                cls.daemon.kill()
                cls.daemon.wait()
        cls.log.close()
        # containerd's overlay snapshots may still be mounted below its root
        subprocess.run(["sh", "-c", f"grep -o ' {cls.d}[^ ]*' /proc/mounts | sort -r | "
                        "xargs -r -n1 umount -l"], check=False)
        shutil.rmtree(cls.d, True)
        # the shim's runc root for our namespace (runc's layout), empty once all is deleted,
        # and the shims' directories of /run if ours made them
        remove_made([f"/run/containerd/runc/{cls.NS}"] + cls.run_made)
        # the namespace's cgroup, in every hierarchy: nsbox-oci removes a container's own,
        # made below it, and leaves the parent as runc does; its daemon is gone, so it is ours
        remove_cgroup(cls.NS)
        cls.dirs.cleanup()
        tops = ["/sys/fs/cgroup"] + glob.glob("/sys/fs/cgroup/*")
        left = [os.path.join(t, cls.NS) for t in tops if os.path.isdir(os.path.join(t, cls.NS))]
        if left:
            raise AssertionError(f"cgroups of our containerd left: {left}")

    @classmethod
    def ctr(cls, *args, timeout=60):
        return subprocess.run(["ctr", "--address", os.path.join(cls.d, "c.sock"), "-n", cls.NS]
                              + list(args), capture_output=True, text=True, timeout=timeout)

    def run_ctr(self, name, *cmd, detach=False):
        return self.ctr("run", *(["-d"] if detach else ["--rm"]),
                        "--runtime", "io.containerd.runc.v2", "--runc-binary", OCI,
                        "docker.io/nsbox-test/oci-bb:1", name, *cmd)

    def test_ctr_run(self):
        r = self.run_ctr("t1", "sh", "-c", "echo hello-from-ctr; id -u")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "hello-from-ctr\n0\n")
        r = self.run_ctr("t2", "sh", "-c", "exit 3")
        self.assertEqual(r.returncode, 3, r.stderr)

    def test_ctr_root_is_writable(self):
        # containerd's default snapshotter is overlayfs: the root is that overlay made again
        # over idmapped layers (docs/oci.md, "The root"), writable, the writes in the snapshot
        if no_idmapped_overlay_layers():
            self.skipTest(no_idmapped_overlay_layers())
        r = self.run_ctr("t5", "sh", "-c", "echo x > /etc/x && cat /etc/x")
        self.assertEqual((r.returncode, r.stdout), (0, "x\n"), r.stderr)

    def test_ctr_kill(self):
        r = self.run_ctr("t3", "sleep", "1000", detach=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("RUNNING", self.ctr("task", "ls").stdout)
        r = self.ctr("task", "kill", "-s", "SIGKILL", "t3")
        self.assertEqual(r.returncode, 0, r.stderr)
        deadline = time.monotonic() + 30
        while "STOPPED" not in self.ctr("task", "ls").stdout and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertIn("STOPPED", self.ctr("task", "ls").stdout)
        self.assertEqual(self.ctr("task", "rm", "t3").returncode, 0)
        self.assertEqual(self.ctr("container", "rm", "t3").returncode, 0)
        self.assertEqual(self.dirs.leftovers(), [])

    def kill_and_remove(self, name):
        self.assertEqual(self.ctr("task", "kill", "-s", "SIGKILL", name).returncode, 0)
        # task rm needs the task stopped: it is once the shim has reaped the pid-file process
        deadline = time.monotonic() + 30
        while self.ctr("task", "rm", name).returncode != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.ctr("container", "rm", name).returncode, 0)

    def test_ctr_exec(self):
        r = self.run_ctr("t4", "sleep", "1000", detach=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.ctr("task", "exec", "--exec-id", "e1", "t4", "sh", "-c",
                     "echo in-exec; id -u; exit 4")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertEqual(r.stdout, "in-exec\n0\n")  # the container's user
        # ctr task ps: the shim's runc ps --format json, the cgroup's pids (init, sleep)
        r = self.ctr("task", "ps", "t4")
        self.assertEqual(r.returncode, 0, r.stderr)
        pids = [int(line.split()[0]) for line in r.stdout.splitlines()[1:]]
        self.assertEqual(len(pids), 2, r.stdout)
        cmds = sorted(open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")[0] for p in pids)
        self.assertEqual(cmds, [b"nsbox-init", b"sleep"])
        self.kill_and_remove("t4")

    def on_pty(self, *args):
        """ctr with a terminal of its own (-t wants one): a pty whose master the test reads
        until ctr ends. Its exit code and what it wrote."""
        master, slave = pty.openpty()
        cmd = ["ctr", "--address", os.path.join(self.d, "c.sock"), "-n", self.NS] + list(args)
        p = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave,
                             start_new_session=True)
        os.close(slave)
        out = read_pty(master)
        os.close(master)
        return p.wait(timeout=60), out

    def test_ctr_run_tty(self):
        code, out = self.on_pty("run", "-t", "--rm", "--runtime", "io.containerd.runc.v2",
                                "--runc-binary", OCI, "docker.io/nsbox-test/oci-bb:1", "t5",
                                "sh", "-c", "tty; test -t 0 && echo stdin-is-a-tty; exit 6")
        self.assertEqual(code, 6, out)
        self.assertIn(b"/dev/pts/0", out)
        self.assertIn(b"stdin-is-a-tty", out)

    def test_ctr_exec_tty(self):
        r = self.run_ctr("t6", "sleep", "1000", detach=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        code, out = self.on_pty("task", "exec", "-t", "--exec-id", "e2", "t6", "sh", "-c",
                                "tty; test -t 1 && echo exec-has-a-tty; exit 2")
        self.assertEqual(code, 2, out)
        self.assertIn(b"/dev/pts/", out)
        self.assertIn(b"exec-has-a-tty", out)
        self.kill_and_remove("t6")

if __name__ == "__main__":
    unittest.main()
