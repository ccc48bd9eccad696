"""End to end: what nsbox-oci makes of a bundle's config.json (docs/oci.md, "What of config.json
is honoured"), checked from inside the container and from the host: the process's ids, groups,
umask, environment, rlimits and capabilities as the config says, within nsbox's floor (never
host root, never CAP_SYS_ADMIN, nsbox's seccomp filter); hooks run on the host with the state on
their stdin, in their order, a failing or slow prestart hook failing create with its reason;
what nsbox cannot give refused at create with the way out."""
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
import unittest

from nsbox_test import CGROUP_V2_ONLY, wait_for
from oci_bundle import OCI, BundleCase, config, require_runtime, shared_source


def setUpModule():
    require_runtime()


def status_field(pid, name):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].split()
    return None


def first_child(pid):
    """pid's first child, waiting for it to be forked (up to 30 s)."""
    for _ in range(3000):
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
        if kids:
            return int(kids[0])
        time.sleep(0.01)
    raise AssertionError(f"process {pid} has no child")


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class Process(BundleCase):
    TOOLS = BundleCase.TOOLS + ("grep", "env", "mount", "chown", "touch", "stat")

    def run_container(self, c, cid="c1"):
        """create, start, wait: the container's output."""
        self.write_config(c)
        pid = self.create(cid)
        r = self.oci("start", cid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 0, self.output())
        return self.output()

    def test_user_groups_umask(self):
        c = config(["sh", "-c", "id -u; id -g; id -G; umask"])
        c["process"]["user"] = {"uid": 1234, "gid": 100, "additionalGids": [5, 6], "umask": 0o27}
        self.assertEqual(self.run_container(c), "1234\n100\n100 5 6\n0027\n")

    def test_root_inside_is_not_root_outside(self):
        # the config's uid 0 is the container's root: on the host an id of nsbox's range
        c = config(["sleep", "60"])
        self.write_config(c)
        init = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        workload = first_child(init)  # forked by init once start's byte has reached it
        uids = status_field(workload, "Uid")
        self.assertTrue(all(int(u) >= 65536 for u in uids), uids)
        with open(f"/proc/{workload}/uid_map") as f:
            first = f.read().split()
        self.assertEqual(first[0], "0")
        self.assertNotEqual(first[1], "0")

    def test_environment_is_the_configs(self):
        c = config(["cat", "/proc/self/environ"])
        c["process"]["env"] = ["PATH=/bin", "A=1"]
        self.assertEqual(self.run_container(c), "PATH=/bin\0A=1\0")

    def test_rlimits(self):
        c = config(["sh", "-c", "ulimit -n; ulimit -Hn; ulimit -c"])
        c["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "soft": 321, "hard": 654},
                                   {"type": "RLIMIT_CORE", "soft": 4096, "hard": 4096}]
        self.assertEqual(self.run_container(c), "321\n654\n8\n")  # ulimit -c: 512-byte blocks

    def test_a_limit_above_the_runtimes_own_is_lowered_to_it(self):
        # RLIMIT_RTPRIO 99 would let the workload run SCHED_FIFO past its cpu limit: the
        # container gets nsbox-oci's own hard limit instead (0 on most hosts)
        hard = resource.getrlimit(resource.RLIMIT_RTPRIO)[1]
        if hard == resource.RLIM_INFINITY or hard >= 99:
            self.skipTest(f"this host's hard RLIMIT_RTPRIO is {hard}: 99 is not above it")
        c = config(["sh", "-c", "grep '^Max realtime priority' /proc/self/limits"])
        c["process"]["rlimits"] = [{"type": "RLIMIT_RTPRIO", "soft": 99, "hard": 99}]
        self.assertEqual(self.run_container(c).split()[3:5], [str(hard), str(hard)])

    def test_a_core_limit_of_0_is_1_byte(self):
        # docker run --ulimit core=0: at 0 the kernel runs a piped core_pattern's host helper
        # for each crash, at 1 byte it dumps nothing at all, file or pipe
        c = config(["sh", "-c", "cat /proc/self/limits | grep '^Max core file size'"])
        c["process"]["rlimits"] = [{"type": "RLIMIT_CORE", "soft": 0, "hard": 0}]
        self.assertEqual(self.run_container(c).split()[4:6], ["1", "1"])
        c["process"]["rlimits"] = [{"type": "RLIMIT_CORE", "soft": 0, "hard": 4096}]
        self.assertEqual(self.run_container(c, "c2").splitlines()[-1].split()[4:6],
                         ["1", "4096"])

    def test_oom_score_adj(self):
        c = config(["cat", "/proc/self/oom_score_adj"])
        c["process"]["oomScoreAdj"] = 123
        self.assertEqual(self.run_container(c), "123\n")

    def test_capabilities_and_no_new_privs(self):
        c = config(["grep", "-E", "^(CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):",
                    "/proc/self/status"])
        caps = ["CAP_CHOWN", "CAP_KILL"]
        c["process"]["capabilities"] = {"bounding": caps, "effective": caps,
                                        "permitted": caps, "inheritable": caps}
        c["process"]["noNewPrivileges"] = False
        got = dict(line.split(":\t") for line in self.run_container(c).splitlines())
        self.assertEqual(got["CapEff"], "0000000000000021")
        self.assertEqual(got["CapBnd"], "0000000000000021")
        self.assertEqual(got["CapAmb"], "0000000000000000")
        self.assertEqual(got["NoNewPrivs"], "0")
        self.assertEqual(got["Seccomp"], "2")  # nsbox's filter although no_new_privs is off

    def test_init_keeps_no_capability_the_config_does_not_give(self):
        # init (pid 1, nsbox's) holds CAP_SYS_ADMIN only while it loads the filters: after,
        # its sets are the config's and what exec's change of user keeps (launch.h cap_keep),
        # so that a flaw in what it serves gives nobody a mount in the container's namespaces
        c = config(["grep", "-E", "^(CapEff|CapPrm|CapBnd):", "/proc/1/status"])
        caps = ["CAP_CHOWN", "CAP_KILL"]
        c["process"]["capabilities"] = {"bounding": caps, "effective": caps,
                                        "permitted": caps, "inheritable": caps}
        got = dict(line.split(":\t") for line in self.run_container(c).splitlines())
        for k in ("CapEff", "CapPrm", "CapBnd"):
            held = int(got[k], 16)
            self.assertEqual(held & (1 << 21), 0, (k, got[k]))  # CAP_SYS_ADMIN

    def test_ambient_for_a_non_root_user(self):
        c = config(["grep", "^CapEff:", "/proc/self/status"])
        c["process"]["user"] = {"uid": 1000, "gid": 1000}
        c["process"]["capabilities"] = {k: ["CAP_NET_BIND_SERVICE"] for k in
                                        ("bounding", "effective", "permitted", "inheritable",
                                         "ambient")}
        self.assertEqual(self.run_container(c), "CapEff:\t0000000000000400\n")

    def test_granted_capabilities_do_not_reach_mounts(self):
        # the attack: a container root with capabilities tries to mount over what nsbox set up
        c = config(["sh", "-c", "mount -t tmpfs x /tmp && echo MOUNTED; touch /tmp/f && "
                    "chown 4321 /tmp/f && stat -c %u /tmp/f"])
        c["process"]["capabilities"] = {k: ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER"]
                                        for k in ("bounding", "effective", "permitted")}
        out = self.run_container(c)
        self.assertNotIn("MOUNTED", out)
        self.assertTrue(out.endswith("4321\n"), out)  # CAP_CHOWN works inside

    def test_id_outside_the_namespace_refused(self):
        c = config(["true"])
        c["process"]["user"] = {"uid": 70000, "gid": 0}
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "c1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ids 0-65535", self.log_errors()[-1]["msg"])
        self.assertNotEqual(self.oci("state", "c1").returncode, 0)

    def test_host_pid_namespace_refused(self):
        # a config without a pid namespace asks for the host's (docker run --pid=host): refused,
        # not run in a new one the container did not ask for
        c = config(["true"])
        c["linux"]["namespaces"] = [ns for ns in c["linux"]["namespaces"] if ns["type"] != "pid"]
        self.write_config(c)
        with open(self.out, "w") as out:  # a container made would hold a pipe open
            r = self.oci("create", "--bundle", self.bundle, "--pid-file", self.pidfile, "c1",
                         stdout=out, stderr=out)
        self.assertNotEqual(r.returncode, 0)
        msg = self.log_errors()[-1]["msg"]
        for words in ("host's pid namespace", "never shares a host namespace",
                      "drop --pid=host"):
            self.assertIn(words, msg)
        self.assertEqual(os.listdir(self.root) if os.path.isdir(self.root) else [], [])
        self.assertFalse(os.path.exists(self.pidfile))


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class Hooks(BundleCase):
    def hook(self, name, script="cat > \"$0\"", timeout=None):
        """A host program that keeps its stdin (the state) in OUT/NAME."""
        h = {"path": "/bin/sh", "args": ["sh", "-c", script, os.path.join(self.tmp, name)]}
        if timeout:
            h["timeout"] = timeout
        return h

    def read_state(self, name):
        with open(os.path.join(self.tmp, name)) as f:
            return json.load(f)

    def test_state_on_stdin(self):
        c = config(["true"], annotations={"org.example/k": "v"})
        c["hooks"] = {k: [self.hook(k)] for k in
                      ("prestart", "createRuntime", "poststart", "poststop")}
        self.write_config(c)
        pid = self.create()
        for k in ("prestart", "createRuntime"):
            st = self.read_state(k)
            self.assertEqual((st["id"], st["status"], st["pid"]), ("c1", "created", pid))
            self.assertEqual(st["bundle"], os.path.realpath(self.bundle))
            self.assertEqual(st["annotations"], {"org.example/k": "v"})
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "poststart")))
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        self.assertEqual(self.read_state("poststart")["status"], "running")
        self.wait(pid)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "poststop")))
        self.assertEqual(self.oci("delete", "c1").returncode, 0)
        st = self.read_state("poststop")
        self.assertEqual((st["id"], st["status"]), ("c1", "stopped"))

    def test_failing_prestart_fails_create(self):
        c = config(["true"])
        c["hooks"] = {"prestart": [self.hook("p", "echo no bridge here >&2; exit 3")],
                      "poststart": [self.hook("never")]}
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "--pid-file", self.pidfile, "c1")
        self.assertNotEqual(r.returncode, 0)
        msg = self.log_errors()[-1]["msg"]
        self.assertIn("prestart hook /bin/sh failed (exit code 3): no bridge here", msg)
        self.assertIn("does not exist", self.oci("state", "c1").stderr.decode())
        self.assertFalse(os.path.exists(self.pidfile))

    def test_prestart_timeout(self):
        c = config(["true"])
        c["hooks"] = {"prestart": [self.hook("p", "exec sleep 60", timeout=1)]}
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "c1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("timed out after 1 s", self.log_errors()[-1]["msg"])

    def test_failing_poststop_is_a_warning(self):
        # what the hook said is shown in the warning, its controls (ESC, 8-bit CSI raw and as
        # UTF-8) as '?': delete's stderr is a terminal's or an engine's log
        c = config(["true"])
        c["hooks"] = {"poststop": [self.hook("p", "printf 'gone\\033[2J\\233" "2J\\302\\233"
                                                  "31m \\342\\206\\222' >&2; exit 1")]}
        self.write_config(c)
        pid = self.create()
        self.oci("start", "c1")
        self.wait(pid)
        r = self.oci("delete", "c1")
        self.assertEqual(r.returncode, 0)
        self.assertIn(b"warning: poststop hook", r.stderr)
        self.assertIn("gone?[2J?2J?31m \u2192".encode(), r.stderr)
        for bad in (b"\x1b", b"\x9b"):
            self.assertNotIn(bad, r.stderr)
        self.assertIn("does not exist", self.oci("state", "c1").stderr.decode())

    def test_hook_inside_container_refused(self):
        c = config(["true"])
        c["hooks"] = {"startContainer": [{"path": "/bin/true"}]}
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "c1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("hooks.startContainer", self.log_errors()[-1]["msg"])


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class Mounts(BundleCase):
    TOOLS = BundleCase.TOOLS + ("grep", "touch", "stat", "cut", "ls", "wc")

    def run_container(self, c):
        self.write_config(c)
        pid = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 0, self.output())
        return self.output()

    def test_config_mounts(self):
        host = os.path.join(self.tmp, "hostdata")
        os.makedirs(host)
        with open(os.path.join(host, "f"), "w") as f:
            f.write("from-the-host\n")
        extra = os.path.join(self.tmp, "extra")
        with open(extra, "w") as f:
            f.write("extra-file\n")
        open(os.path.join(self.bundle, "rootfs", "etc", "extra"), "w").close()
        c = config(["sh", "-c",
                    "grep -E ' /(scratch|data|dev/mqueue|sys|etc/extra) ' /proc/self/mountinfo"
                    " | cut -d' ' -f5,6,8,9; stat -c %a /scratch; cat /data/f /etc/extra;"
                    " touch /data/new 2>/dev/null || echo read-only"])
        c["mounts"] = [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/scratch", "type": "tmpfs", "source": "scr",
             "options": ["nosuid", "size=1m", "mode=0700"]},
            {"destination": "/data", "type": "bind", "source": host,
             "options": ["rbind", "ro"]},
            {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue"},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["ro"]},
            {"destination": "/etc/extra", "type": "none", "source": extra,
             "options": ["bind", "ro"]}]
        lines = self.run_container(c).splitlines()
        self.assertIn("/scratch rw,nosuid,relatime tmpfs scr", lines)
        self.assertIn("/dev/mqueue rw,relatime mqueue mqueue", lines)
        self.assertIn("/sys ro,relatime sysfs sysfs", lines)
        self.assertTrue(any(l.startswith("/data ro") for l in lines), lines)
        self.assertTrue(any(l.startswith("/etc/extra ro") for l in lines), lines)
        self.assertEqual(lines[-4:], ["700", "from-the-host", "extra-file", "read-only"])

    def test_mounts_are_made_in_the_config_order(self):
        # binds among new filesystems: mountinfo lists mounts in the order they were made (Linux
        # 6.8 and later; attach order before), and tools check the config's order there
        host = os.path.join(self.tmp, "hostdata")
        os.makedirs(host)
        c = config(["sh", "-c", "grep -E ' /(a|b|c|d) ' /proc/self/mountinfo | cut -d' ' -f5"])
        c["mounts"] = [{"destination": "/proc", "type": "proc", "source": "proc"},
                       {"destination": "/a", "type": "tmpfs", "source": "tmpfs"},
                       {"destination": "/b", "type": "bind", "source": host,
                        "options": ["rbind"]},
                       {"destination": "/c", "type": "tmpfs", "source": "tmpfs"},
                       {"destination": "/d", "type": "bind", "source": host,
                        "options": ["bind", "shared"]}]
        self.assertEqual(self.run_container(c).split(), ["/a", "/b", "/c", "/d"])

    def cgroup_then(self, at, script):
        """The output of script in a container whose config mounts cgroup at /sys/fs/cgroup
        and, after it, binds a host directory holding the file "mark" at `at`."""
        host = os.path.join(self.tmp, "cgbind")
        os.makedirs(host, exist_ok=True)
        with open(os.path.join(host, "mark"), "w") as f:
            f.write("bound-later\n")
        c = config(["sh", "-c", script])
        c["mounts"] = [{"destination": "/proc", "type": "proc", "source": "proc"},
                       {"destination": "/sys", "type": "sysfs", "source": "sysfs",
                        "options": ["nosuid", "noexec", "nodev", "ro"]},
                       {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
                        "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]},
                       {"destination": at, "type": "bind", "source": host,
                        "options": ["rbind", "ro"]}]
        return self.run_container(c)

    def test_a_bind_over_the_cgroup_mount_is_seen(self):
        # docker run -v /sys/fs/cgroup:/sys/fs/cgroup: the config's later bind goes over the
        # container's own cgroup, in the config's order, not under it
        self.assertEqual(self.cgroup_then("/sys/fs/cgroup", "cat /sys/fs/cgroup/mark"),
                         "bound-later\n")

    @unittest.skipIf(CGROUP_V2_ONLY, "a bind below the cgroup mount is Podman --systemd's on a "
                     "v1 host; on v2 the cgroup directory is bound read-only, as runc mounts it")
    def test_a_bind_below_the_cgroup_mount_is_seen(self):
        # Podman --systemd binds /sys/fs/cgroup/systemd after the cgroup mount: its mount point
        # is made in the cgroup mount's tmpfs, which is read-only after it; the container's
        # own hierarchies stay beside it. EROFS, not the EACCES its mode 0555 gives a process
        # without CAP_DAC_OVERRIDE: the tmpfs is sealed
        out = self.cgroup_then("/sys/fs/cgroup/systemd",
                               "cat /sys/fs/cgroup/systemd/mark; "
                               "test -f /sys/fs/cgroup/pids/pids.max && echo pids; "
                               "mkdir /sys/fs/cgroup/x 2>&1 | grep -o 'Read-only file system'")
        self.assertEqual(out, "bound-later\npids\nRead-only file system\n")

    def test_missing_mount_point_in_the_image_is_made(self):
        # Podman binds /etc/hosts and /etc/hostname; a small image has neither: nsbox-oci makes
        # the mount point in the bundle's root (an empty file), as runc does
        hosts = os.path.join(self.tmp, "hosts")
        with open(hosts, "w") as f:
            f.write("127.0.0.1 here\n")
        made = os.path.join(self.bundle, "rootfs", "etc", "hosts")
        self.assertFalse(os.path.exists(made))
        c = config(["cat", "/etc/hosts"])
        c["mounts"] = [{"destination": "/proc", "type": "proc", "source": "proc"},
                       {"destination": "/etc/hosts", "type": "bind", "source": hosts,
                        "options": ["rbind", "ro"]}]
        self.assertEqual(self.run_container(c), "127.0.0.1 here\n")
        self.assertEqual(os.path.getsize(made), 0)

    def test_masked_and_readonly_paths(self):
        c = config(["sh", "-c", "ls -A /sys/firmware | wc -l; cat /proc/cpuinfo | wc -c;"
                    " (echo x > /tmp/f) 2>/dev/null || echo read-only"])
        c["mounts"] = [{"destination": "/proc", "type": "proc", "source": "proc"},
                       {"destination": "/sys", "type": "sysfs", "source": "sysfs",
                        "options": ["ro"]},
                       {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"}]
        c["linux"]["maskedPaths"] = ["/sys/firmware", "/proc/cpuinfo", "/proc/nonexistent"]
        c["linux"]["readonlyPaths"] = ["/tmp"]
        self.assertEqual(self.run_container(c).split(), ["0", "0", "read-only"])

    def test_bind_through_a_symlink_stays_inside(self):
        # the attack: an image symlink that points at a host directory, and a bind onto a
        # path below it; the target is resolved inside the root, never on the host
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(outside)
        os.symlink(outside, os.path.join(self.bundle, "rootfs", "etc", "evil"))
        src = os.path.join(self.tmp, "src")
        open(src, "w").close()
        c = config(["true"])
        c["mounts"] = [{"destination": "/proc", "type": "proc", "source": "proc"},
                       {"destination": "/etc/evil/x", "type": "bind", "source": src,
                        "options": ["bind"]}]
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "c1")
        if r.returncode == 0:
            self.oci("delete", "--force", "c1")
        self.assertEqual(os.listdir(outside), [])
        with open("/proc/self/mountinfo") as f:
            self.assertNotIn(outside, f.read())

    def test_unsupported_mount_refused(self):
        # a read-only root is the image's, bound entry by entry: only binds go inside it (a
        # writable root takes any mount: test_oci_root.py)
        c = config(["true"], root={"path": "rootfs", "readonly": True})
        c["mounts"] = [{"destination": "/etc/ssl", "type": "tmpfs", "source": "tmpfs"}]
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "c1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("lies inside the image, where nsbox-oci only binds",
                      self.log_errors()[-1]["msg"])


if __name__ == "__main__":
    unittest.main()


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class Propagation(BundleCase):
    """A bind's propagation (docs/oci.md, "Mounts"): a slave bind receives a mount the host
    makes below its source after the container started (a volume mounted later), as a user of
    rslave expects; a bind that asks for nothing is private and does not."""

    def setUp(self):
        # registered first, so unmounted last: after BundleCase has deleted the containers
        self.vol_parent = tempfile.mkdtemp(prefix="nsbox-oci-vol-")
        self.addCleanup(shutil.rmtree, self.vol_parent, True)
        self.src = shared_source(self, self.vol_parent)
        super().setUp()
        self.ctl = os.path.join(self.tmp, "ctl")
        os.makedirs(self.ctl)
        os.chmod(self.ctl, 0o777)  # the container's root is an unprivileged id on the host

    def after_host_mount(self, options):
        """What the container reads at /vol/sub/marker once the host has mounted a tmpfs on its
        source's sub (the container waits for the word on /ctl)."""
        c = config(["sh", "-c", "echo > /ctl/ready; while [ ! -e /ctl/go ]; do sleep 0.05; done;"
                    " cat /vol/sub/marker 2>/dev/null || echo absent"])
        c["mounts"] = [{"destination": "/proc", "type": "proc", "source": "proc"},
                       {"destination": "/vol", "type": "bind", "source": self.src,
                        "options": options},
                       {"destination": "/ctl", "type": "bind", "source": self.ctl,
                        "options": ["bind"]}]
        self.write_config(c)
        pid = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        self.assertTrue(wait_for(lambda: os.path.exists(os.path.join(self.ctl, "ready"))))
        sub = os.path.join(self.src, "sub")
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "later", sub], check=True)
        with open(os.path.join(sub, "marker"), "w") as f:
            f.write("mounted-later\n")
        open(os.path.join(self.ctl, "go"), "w").close()
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 0, self.output())
        return self.output().strip()

    def test_slave_bind_sees_a_later_host_mount(self):
        self.assertEqual(self.after_host_mount(["rbind", "rslave"]), "mounted-later")

    def test_shared_bind_sees_it_too(self):
        # shared is a slave of the host's first (docs/decisions.md): it receives
        self.assertEqual(self.after_host_mount(["rbind", "rshared"]), "mounted-later")

    def test_bind_without_propagation_is_private(self):
        self.assertEqual(self.after_host_mount(["rbind"]), "absent")

    def test_rprivate_bind_does_not_see_it(self):
        self.assertEqual(self.after_host_mount(["rbind", "rprivate"]), "absent")
