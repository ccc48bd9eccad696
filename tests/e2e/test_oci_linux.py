"""End to end: what nsbox-oci makes of a bundle's linux.cgroupsPath and linux.resources
(docs/oci.md, "cgroupsPath"): the container's cgroup where the config names it, in the path
form and in systemd's slice:prefix:name form (--systemd-cgroup), with the cpu quota, period and
shares, memory and pids exactly as written, removed by delete; hostile paths refused at create,
and a cgroup that holds processes never taken (its removal would kill them). linux.devices
(docs/oci.md, "linux.devices"): a device of the safe list usable inside, a block device and any
other refused at create, and no way to make one inside. linux.sysctl (docs/oci.md,
"linux.sysctl"): the network, ipc and uts namespaces' keys applied inside before the process
starts, with the host's values unchanged; a host-wide key refused at create."""
import json
import os
import signal
import subprocess
import unittest
import uuid

from nsbox_test import (CGROUP_V2_ONLY, cgroup_dir, cgroup_read, rmdir_cgroup_tree,
                        sandbox_cgroup_file, wait_for)
from oci_bundle import OCI, BundleCase, config, require_runtime


def setUpModule():
    require_runtime()


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class CgroupsPath(BundleCase):
    def setUp(self):
        # registered first, so run last: after BundleCase has deleted the containers
        self.cg_tops = []
        self.addCleanup(lambda: [rmdir_cgroup_tree(t) for t in self.cg_tops])
        super().setUp()
        self.top = "/nsbox-test-" + uuid.uuid4().hex[:8]
        self.cg_tops.append(self.top)

    def test_path_form_limits_exact(self):
        path = self.top + "/ctr"
        c = config(["sleep", "60"])
        c["linux"]["cgroupsPath"] = path
        c["linux"]["resources"] = {"cpu": {"quota": 50000, "period": 100000, "shares": 512},
                                   "memory": {"limit": 64 << 20}, "pids": {"limit": 77}}
        self.write_config(c)
        init = self.create()  # the state's pid: the container's init
        with open(f"/proc/{init}/cgroup") as f:
            self.assertIn(path, f.read())  # the container's init is in it
        self.assertEqual(cgroup_read("pids", path, "pids.max"), "77")
        if CGROUP_V2_ONLY:
            # half a CPU, not rounded up to a whole one
            self.assertEqual(cgroup_read("cpu", path, "cpu.max"), "50000 100000")
            self.assertEqual(cgroup_read("cpu", path, "cpu.weight"), "20")
            self.assertEqual(cgroup_read("memory", path, "memory.max"), str(64 << 20))
        else:
            self.assertEqual(cgroup_read("cpu", path, "cpu.cfs_quota_us"), "50000")
            self.assertEqual(cgroup_read("cpu", path, "cpu.cfs_period_us"), "100000")
            self.assertEqual(cgroup_read("cpu", path, "cpu.shares"), "512")
            self.assertEqual(cgroup_read("memory", path, "memory.limit_in_bytes"), str(64 << 20))
        r = self.oci("delete", "--force", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(cgroup_dir("pids", path)))

    def test_memory_beyond_the_limit(self):
        """linux.resources.memory's reservation, swap, swappiness, disableOOMKiller and
        kernelTCP in the memory controller's files (runtime-tools' linux_cgroups_memory
        config); kernel memory is left out with a warning; on v2 what it lacks is refused."""
        path = self.top + "/mem"
        limit = 48 << 20
        mem = {"limit": limit, "reservation": 32 << 20, "swap": 2 * limit, "kernel": limit,
               "kernelTCP": 16 << 20, "swappiness": 10, "disableOOMKiller": True}
        c = config(["sleep", "60"])
        c["linux"]["cgroupsPath"] = path
        c["linux"]["resources"]["memory"] = mem
        if CGROUP_V2_ONLY:
            self.write_config(c)
            self.assertIn("cgroup v2 has no per-cgroup swappiness", self.create_refused())
            self.assertFalse(os.path.exists(cgroup_dir("memory", path)))
            del mem["swappiness"], mem["disableOOMKiller"]
        self.write_config(c)
        self.create()
        # in the log, as a warning: create's stderr is the container's (an engine's logs)
        warned = [m for m in self.log_errors() if "kernel memory limits are deprecated" in m["msg"]]
        self.assertEqual([m["level"] for m in warned], ["warning"], self.log_errors())
        self.assertNotIn("kernel memory", self.output())
        if CGROUP_V2_ONLY:
            self.assertEqual(cgroup_read("memory", path, "memory.low"), str(32 << 20))
            self.assertEqual(cgroup_read("memory", path, "memory.swap.max"), str(limit))
            return
        self.assertEqual(cgroup_read("memory", path, "memory.soft_limit_in_bytes"), str(32 << 20))
        self.assertEqual(cgroup_read("memory", path, "memory.memsw.limit_in_bytes"),
                         str(2 * limit))
        self.assertEqual(cgroup_read("memory", path, "memory.swappiness"), "10")
        self.assertIn("oom_kill_disable 1", cgroup_read("memory", path, "memory.oom_control"))
        self.assertEqual(cgroup_read("memory", path, "memory.kmem.tcp.limit_in_bytes"),
                         str(16 << 20))

    def test_unlimited_swap_refused(self):
        """memory.swap -1 (docker --memory-swap -1) would let the container swap without
        bound: refused at create, before any cgroup exists."""
        path = self.top + "/swap"
        c = config(["true"])
        c["linux"]["cgroupsPath"] = path
        c["linux"]["resources"]["memory"] = {"limit": 32 << 20, "swap": -1}
        self.write_config(c)
        self.assertIn("unlimited swap", self.create_refused())
        self.assertFalse(os.path.exists(cgroup_dir("memory", path)))

    def test_a_huge_cpu_quota_is_the_most_cpus_not_a_wrapped_count(self):
        # 2^40 periods' worth: nsbox's own cgroup gets its most (1024 CPUs), where a count
        # cut to 32 bits would have been 0 (a create refused) or a few CPUs
        c = config(["sleep", "60"])
        c["linux"]["resources"] = {"cpu": {"quota": (1 << 40) * 100000, "period": 100000}}
        self.write_config(c)
        self.create()
        with open(os.path.join(self.root, "c1", "state.json")) as f:
            sid = json.load(f)["sandbox"]
        self.assertIn(sandbox_cgroup_file(sid, "cpu", "cpu.cfs_quota_us", "cpu.max"),
                      (str(1024 * 100000), f"{1024 * 100000} 100000"))

    def test_delete_removes_what_a_killed_monitor_left(self):
        path = self.top + "/ctr"
        c = config(["sleep", "60"])
        c["linux"]["cgroupsPath"] = path
        self.write_config(c)
        init = self.create()
        with open(os.path.join(self.root, "c1", "state.json")) as f:
            monitor = json.load(f)["monitor_pid"]
        os.kill(monitor, signal.SIGKILL)  # init ends at its start barrier, the cgroup stays
        self.wait(init)
        self.assertTrue(os.path.exists(cgroup_dir("pids", path)))
        # init's end empties the cgroup
        procs = os.path.join(cgroup_dir("pids", path), "cgroup.procs")
        self.assertTrue(wait_for(lambda: not open(procs).read().strip()))
        r = self.oci("delete", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(cgroup_dir("pids", path)))
        self.assertFalse(os.path.exists(cgroup_dir("memory", path)))

    def test_relative_path_is_below_the_runtimes_cgroup(self):
        rel = self.top.lstrip("/") + "/ctr"
        c = config(["sleep", "60"])
        c["linux"]["cgroupsPath"] = rel
        self.write_config(c)
        init = self.create()  # the state's pid: the container's init
        with open("/proc/self/cgroup") as f:
            own = [ln.split(":", 2)[2].strip() for ln in f
                   if (ln.split(":")[1] == "" if CGROUP_V2_ONLY else "pids" in ln.split(":")[1].split(","))]
        with open(f"/proc/{init}/cgroup") as f:
            mine = [ln.split(":", 2)[2].strip() for ln in f
                    if (ln.split(":")[1] == "" if CGROUP_V2_ONLY else "pids" in ln.split(":")[1].split(","))]
        self.assertEqual(mine[0], os.path.join(own[0], rel))
        self.cg_tops.append(os.path.join(own[0], self.top.lstrip("/")))
        self.assertEqual(cgroup_read("pids", mine[0], "pids.max"), "64")

    def test_systemd_form(self):
        slice_ = self.top.lstrip("/").replace("-", "") + ".slice"
        self.cg_tops.append("/" + slice_)
        c = config(["sleep", "60"])
        c["linux"]["cgroupsPath"] = f"{slice_}:nsbox:abc"
        self.write_config(c)
        with open(self.out, "w") as out:
            r = self.oci("--systemd-cgroup", "create", "--bundle", self.bundle, "--pid-file",
                         self.pidfile, "c1", stdout=out, stderr=out)
        self.assertEqual(r.returncode, 0, self.output())
        with open(self.pidfile) as f:
            self.waited_pids.append(int(f.read()))
        self.assertEqual(cgroup_read("pids", f"/{slice_}/nsbox-abc.scope", "pids.max"), "64")
        # without --systemd-cgroup a path is expected: that form is refused by the flag
        c["linux"]["cgroupsPath"] = self.top + "/x"
        self.write_config(c)
        r = self.oci("--systemd-cgroup", "create", "--bundle", self.bundle, "c2")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("slice:prefix:name", r.stderr.decode())

    def test_hostile_paths_refused(self):
        for bad, why in ((self.top + "/../../escape", "'..'"), ("/", "root"),
                         ("/" + "a" * 600, "longer than 511")):
            c = config(["true"])
            c["linux"]["cgroupsPath"] = bad
            self.write_config(c)
            r = self.oci("create", "--bundle", self.bundle, "c1")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("linux.cgroupsPath", r.stderr.decode())
            self.assertIn(why, r.stderr.decode())
        self.assertFalse(os.path.exists(cgroup_dir("pids", "/escape")))

    def test_populated_cgroup_is_not_taken(self):
        # a config naming a cgroup that holds a process: were it taken, the container's removal
        # would kill that process
        path = self.top + "/busy"
        victim = subprocess.Popen(["sleep", "60"])
        self.addCleanup(victim.wait)
        self.addCleanup(victim.kill)
        os.makedirs(cgroup_dir("pids", path))
        with open(os.path.join(cgroup_dir("pids", path), "cgroup.procs"), "w") as f:
            f.write(str(victim.pid))
        c = config(["true"])
        c["linux"]["cgroupsPath"] = path
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "c1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("holds processes", r.stderr.decode())
        self.assertIsNone(victim.poll())  # still alive
        with open(os.path.join(cgroup_dir("pids", path), "cgroup.procs")) as f:
            self.assertEqual(f.read().split(), [str(victim.pid)])
        victim.send_signal(signal.SIGKILL)



@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class Devices(BundleCase):
    TOOLS = BundleCase.TOOLS + ("dd", "wc", "test", "mknod", "ls")

    def run_container(self, c):
        self.write_config(c)
        pid = self.create()
        r = self.oci("start", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 0, self.output())
        return self.output()

    def refused(self, dev, why):
        c = config(["true"])
        c["linux"]["devices"] = [dev]
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "c1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(why, r.stderr.decode())
        self.assertFalse(os.path.exists(os.path.join(self.root, "c1")))

    def test_allowed_device_works_inside(self):
        c = config(["sh", "-c", "test -c /dev/myzero && dd if=/dev/myzero bs=4 count=1 "
                                "2>/dev/null | wc -c"])
        c["linux"]["devices"] = [{"path": "/dev/myzero", "type": "c", "major": 1, "minor": 5,
                                  "fileMode": 0o666, "uid": 0, "gid": 0}]
        self.assertEqual(self.run_container(c).strip(), "4")

    def test_block_device_refused(self):
        self.refused({"path": "/dev/sda", "type": "b", "major": 8, "minor": 0}, "block device")

    def test_other_device_refused(self):
        # /dev/mem, the host's physical memory
        self.refused({"path": "/dev/mem", "type": "c", "major": 1, "minor": 1},
                     "not a device nsbox-oci gives")
        self.refused({"path": "/etc/zero", "type": "c", "major": 1, "minor": 5}, "below /dev")
        self.refused({"path": "/dev/../etc/zero", "type": "c", "major": 1, "minor": 5},
                     "below /dev")

    def test_no_device_can_be_made_inside(self):
        # the attack a refused --device leaves: the container makes the node itself, with
        # CAP_MKNOD in every set
        caps = ["CAP_MKNOD", "CAP_CHOWN", "CAP_DAC_OVERRIDE"]
        c = config(["sh", "-c", "mknod /tmp/sda b 8 0 && echo made; "
                                "dd if=/tmp/sda bs=1 count=1 2>/dev/null && echo read; true"])
        c["process"]["capabilities"] = {k: caps for k in
                                        ("bounding", "effective", "permitted", "inheritable")}
        c["mounts"].append({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"})
        out = self.run_container(c)
        self.assertIn("mknod: /tmp/sda: Operation not permitted", out)
        self.assertNotIn("made", out)
        self.assertNotIn("read", out)



def host_sysctl(path):
    with open("/proc/sys/" + path) as f:
        return f.read().strip()


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class Sysctl(BundleCase):
    KEYS = {"net.ipv4.ip_unprivileged_port_start": ("net/ipv4/ip_unprivileged_port_start", "81"),
            "kernel.shmmni": ("kernel/shmmni", "1234"),
            "fs.mqueue.msg_max": ("fs/mqueue/msg_max", "17"),
            "kernel.domainname": ("kernel/domainname", "nsbox.test")}

    def test_namespaced_keys_applied_inside_only(self):
        before = {k: host_sysctl(p) for k, (p, _) in self.KEYS.items()}
        for k, (_, v) in self.KEYS.items():
            self.assertNotEqual(before[k], v, k)  # a value the container could not inherit
        paths = " ".join("/proc/sys/" + p for p, _ in self.KEYS.values())
        c = config(["cat"] + ["/proc/sys/" + p for p, _ in self.KEYS.values()])
        c["linux"]["sysctl"] = {k: v for k, (_, v) in self.KEYS.items()}
        c["linux"]["namespaces"].append({"type": "user"})
        self.write_config(c)
        pid = self.create()
        r = self.oci("start", "c1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 0, self.output())
        self.assertEqual(self.output().split("\n")[:4], [v for _, v in self.KEYS.values()],
                         paths)
        self.assertEqual({k: host_sysctl(p) for k, (p, _) in self.KEYS.items()}, before)

    def test_host_wide_key_refused(self):
        for key, path in (("kernel.panic", "kernel/panic"), ("vm.swappiness", "vm/swappiness")):
            before = host_sysctl(path)
            c = config(["true"])
            c["linux"]["sysctl"] = {key: "42" if before != "42" else "43"}
            self.write_config(c)
            r = self.oci("create", "--bundle", self.bundle, "c1")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(f"{key} is not in a namespace of the container's own",
                          r.stderr.decode())
            self.assertEqual(host_sysctl(path), before)
            self.assertFalse(os.path.exists(os.path.join(self.root, "c1")))

    def test_malformed_key_refused(self):
        c = config(["true"])
        c["linux"]["sysctl"] = {"net/../../kernel/panic": "1"}
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "c1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("is not a sysctl name", r.stderr.decode())


if __name__ == "__main__":
    unittest.main()
