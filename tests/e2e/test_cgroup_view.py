"""A sandbox sees its own cgroup at /sys/fs/cgroup, read-only (docs/cgroups.md, "What a sandbox
sees"): its limit files read what its instance type says, /proc/self/cgroup and mountinfo agree
with them as a JVM's or Rust's detection needs (namespace root "/", mount root "/"), and real
runtimes that size themselves from the cgroup find the sandbox's limits instead of the host's
size. Runs on cgroup v1 (this host) and again in the cgroup-v2 VM (tests/vm/cases.txt)."""
import json
import os
import re
import shutil
import unittest

from nsbox_test import CGROUP_V1, CGROUP_V2_ONLY, Dirs, is_root, run_nsbox

# What a sandbox reads, in one Python run inside it: the limit files where v1 or v2 lays them
# out, what /proc/self/cgroup says of each hierarchy, and every cgroup mount in mountinfo.
PROBE = r"""
import json, os
def read(p):
    try:
        with open(p) as f: return f.read().strip()
    except OSError as e: return "error " + e.strerror
v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
if v2:
    files = {k: "/sys/fs/cgroup/" + k for k in ("memory.max", "cpu.max", "pids.max")}
else:
    files = {k: "/sys/fs/cgroup/" + k for k in ("memory/memory.limit_in_bytes",
             "cpu/cpu.cfs_quota_us", "cpu/cpu.cfs_period_us", "pids/pids.max")}
mounts = []
for l in open("/proc/self/mountinfo"):
    pre, _, post = l.partition(" - ")
    f = pre.split()
    if post.split()[0] in ("cgroup", "cgroup2"):
        mounts.append({"root": f[3], "point": f[4], "opts": f[5], "super": post.split()[2]})
print(json.dumps({"v2": v2, "files": {k: read(p) for k, p in files.items()},
                  "proc_cgroup": open("/proc/self/cgroup").read().split(),
                  "mounts": mounts}))
"""


def setUpModule():
    if not is_root():
        raise unittest.SkipTest("nsbox runs here as root (a delegated user is tested by the "
                                "attack suite's AttacksAsUser)")
    if not (CGROUP_V1 or CGROUP_V2_ONLY):
        raise unittest.SkipTest("neither v1 memory and pids hierarchies nor cgroup v2 alone")


class OwnCgroupView(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dirs = Dirs()
        info = json.loads(run_nsbox(["info", "--json"], cls.dirs, check=True).stdout)
        cls.types = {t["name"]: t for t in info["instance_types"]}

    @classmethod
    def tearDownClass(cls):
        cls.dirs.cleanup()

    def run_in(self, itype, *argv, check=True):
        r = run_nsbox(["run", "--instance-type", itype, "--"] + list(argv), self.dirs,
                      timeout=120)
        if check:
            self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        return r.stdout.decode() + r.stderr.decode(errors="replace")

    def test_limit_files_read_the_instance_types(self):
        for itype in ("small", "medium"):
            with self.subTest(itype):
                t = self.types[itype]
                got = json.loads(self.run_in(itype, "python3", "-c", PROBE).splitlines()[0])
                self.assertEqual(got["v2"], CGROUP_V2_ONLY)
                mem, cpus, pids = str(t["memory"]), t["cpus"], str(t["pids"])
                if CGROUP_V2_ONLY:
                    want = {"memory.max": mem, "cpu.max": f"{cpus * 100000} 100000",
                            "pids.max": pids}
                else:
                    want = {"memory/memory.limit_in_bytes": mem,
                            "cpu/cpu.cfs_quota_us": str(cpus * 100000),
                            "cpu/cpu.cfs_period_us": "100000", "pids/pids.max": pids}
                self.assertEqual(got["files"], want)
                # the namespace's root and every mount's root are "/": how the JVM, Rust's
                # available_parallelism and libuv join /proc/self/cgroup's path to a mount
                self.assertEqual({l.rsplit(":", 1)[1] for l in got["proc_cgroup"]}, {"/"})
                self.assertTrue(got["mounts"], "no cgroup mount in the sandbox's mountinfo")
                for m in got["mounts"]:
                    self.assertEqual(m["root"], "/", m)
                    self.assertTrue(m["opts"].startswith("ro,"), m)
                    self.assertTrue(m["point"] == "/sys/fs/cgroup"
                                    or m["point"].startswith("/sys/fs/cgroup/"), m)
                if not CGROUP_V2_ONLY:
                    self.assertEqual({m["point"] for m in got["mounts"]}
                                     & {"/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu",
                                        "/sys/fs/cgroup/pids"},
                                     {"/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu",
                                      "/sys/fs/cgroup/pids"})

    def test_a_persistent_sandboxs_commands_see_it_too(self):
        """nsbox create, then exec: a command the sandbox's init starts later sees the same."""
        sid = run_nsbox(["create", "--instance-type", "small"], self.dirs,
                        check=True).stdout.decode().strip()
        try:
            r = run_nsbox(["exec", sid, "--", "python3", "-c", PROBE], self.dirs, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = json.loads(r.stdout.decode().splitlines()[0])
        finally:
            run_nsbox(["rm", sid], self.dirs, check=True)
        mem = str(self.types["small"]["memory"])
        self.assertEqual(got["files"]["memory.max" if CGROUP_V2_ONLY
                                      else "memory/memory.limit_in_bytes"], mem)
        self.assertEqual({l.rsplit(":", 1)[1] for l in got["proc_cgroup"]}, {"/"})

    def java(self):
        java = shutil.which("java")
        if not java or not os.path.realpath(java).startswith("/usr/"):
            self.skipTest("no java under /usr (Debian's openjdk-17-jre-headless, 190 MB, is not "
                          "in scripts/packages.txt): the JVM's own detection is untested here")
        return java

    def test_java_reads_the_sandbox_limits(self):
        """The JDK's platform metrics (what -XshowSettings:system, Runtime and the management
        beans show) read the cgroup files for real: 1 GiB and one CPU's quota for small."""
        self.java()
        out = self.run_in("small", "java", "-XshowSettings:system", "-version")
        self.assertRegex(out, r"Provider: cgroupv%d" % (2 if CGROUP_V2_ONLY else 1), out)
        self.assertRegex(out, r"Memory Limit: 1\.00G", out)
        self.assertRegex(out, r"CPU Quota: 100000us" if not CGROUP_V2_ONLY
                         else r"CPU Quota: 100000us|Effective CPU Count: 1", out)

    def test_hotspot_sizes_its_heap_and_cpus_from_the_sandbox(self):
        """HotSpot's own container support: the default heap is a quarter of the sandbox's
        memory (256 MiB of small's 1 GiB, not of the host's) and it counts one CPU."""
        self.java()
        if not CGROUP_V2_ONLY:
            self.skipTest("on cgroup v1 HotSpot also needs a cpuset hierarchy it can read "
                          "(JDK 17: 'Required cgroup v1 cpuset subsystem not found'), where "
                          "nsbox makes no cgroup of the sandbox's; the cgroup-v2 VM has no java, so "
                          "HotSpot's own sizing is checked only on a v2 host with java")
        out = self.run_in("small", "java", "-XX:+PrintFlagsFinal", "-XshowSettings:system",
                          "-version")
        heap = int(re.search(r"\bMaxHeapSize\s*=\s*(\d+)", out).group(1))
        self.assertEqual(heap, 256 << 20, out[-2000:])
        # HotSpot's own count (Runtime.availableProcessors), which the line shows
        self.assertRegex(out, r"Effective CPU Count: 1\b", out[-2000:])

    def test_node_reads_the_sandbox_memory(self):
        """libuv's uv_get_constrained_memory (Node's process.constrainedMemory), which reads
        memory.max or memory.limit_in_bytes."""
        node = shutil.which("node")
        if not node or not node.startswith("/usr/"):
            self.skipTest("no node under /usr: libuv's cgroup reading is untested here")
        out = self.run_in("small", "node", "-e",
                          "console.log(typeof process.constrainedMemory === 'function' ? "
                          "process.constrainedMemory() : 'none')").strip()
        if out == "none":
            self.skipTest("this node has no process.constrainedMemory (before 18.15)")
        self.assertEqual(int(out), self.types["small"]["memory"])


if __name__ == "__main__":
    unittest.main()
