"""`nsbox info`: every check is reported, the JSON has the documented shape, the text form says
the same thing, and the verdicts agree with what the machine says when asked independently,
both as root and as an unprivileged user (a throwaway system user, run through setpriv).

Read-only: nsbox info changes nothing on the host, and neither does this test (the only thing it
may create is the system user nsbox-info-test, which it never deletes, as other runs reuse it)."""
import ctypes
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import unittest

from nsbox_test import reachable_nsbox

NSBOX = os.environ.get("NSBOX_BIN", "")
CHECKS = [
    "user_namespaces", "namespaces", "overlayfs", "cgroups", "seccomp", "nftables",
    "net_admin", "idmapped_mounts", "openat2", "image_host", "image_debian", "workspace_disk",
    "privileges", "config", "egress_helper", "oci_images", "file_table",
]
REQUIRED = {"user_namespaces", "namespaces", "cgroups", "seccomp", "openat2", "image_host",
            "config"}
TEST_USER = "nsbox-info-test"
NET_ADMIN_FIX = "run as root (network all/allow need CAP_NET_ADMIN on the host)"
DATA_DIR_FIX = "point HOME or NSBOX_DATA_DIR at a directory of yours"


def setUpModule():
    if not NSBOX or not os.access(NSBOX, os.X_OK):
        raise unittest.SkipTest("NSBOX_BIN is not set to an executable nsbox binary")


def run(args, **kw):
    return subprocess.run([NSBOX] + args, capture_output=True, text=True, timeout=60, **kw)


def by_name(report):
    return {c["name"]: c for c in report["checks"]}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


class Shape:
    """Assertions every report must satisfy, whoever runs nsbox info."""

    def assert_report(self, proc):
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        report = json.loads(proc.stdout)
        self.assertEqual(set(report), {"ok", "checks", "instance_types", "host"})
        self.assertIsInstance(report["ok"], bool)
        names = [c["name"] for c in report["checks"]]
        self.assertEqual(sorted(names), sorted(CHECKS), "each check exactly once")
        for c in report["checks"]:
            self.assertEqual(set(c), {"name", "ok", "required", "detail", "fix"}, c)
            self.assertIsInstance(c["ok"], bool, c)
            self.assertIsInstance(c["required"], bool, c)
            self.assertEqual(c["required"], c["name"] in REQUIRED, c)
            self.assertTrue(c["detail"], c)
            # a fix exactly when something is missing
            self.assertEqual(c["fix"] == "", c["ok"], c)
        required_ok = all(c["ok"] for c in report["checks"] if c["required"])
        self.assertEqual(report["ok"], required_ok)
        self.assertEqual(proc.returncode, 0 if required_ok else 1)
        types = {t["name"]: t for t in report["instance_types"]}
        self.assertTrue({"small", "medium", "large"} <= set(types), types)
        for t in types.values():
            self.assertEqual(set(t), {"name", "cpus", "memory", "pids", "disk"}, t)
            for k in ("cpus", "memory", "pids", "disk"):
                self.assertIsInstance(t[k], int, t)
                self.assertGreater(t[k], 0, t)
        self.assertLessEqual(types["small"]["memory"], types["large"]["memory"])
        return report

    def assert_agrees_with_machine(self, checks):
        """Verdicts that can be checked without nsbox's help."""
        filesystems = read("/proc/filesystems") or ""
        has_overlay = any(line.split()[-1:] == ["overlay"] for line in filesystems.splitlines())
        if not has_overlay:
            self.assertFalse(checks["overlayfs"]["ok"])
        actions = (read("/proc/sys/kernel/seccomp/actions_avail") or "").split()
        if actions:
            self.assertEqual(checks["seccomp"]["ok"],
                             "kill_process" in actions and "errno" in actions)
        max_userns = read("/proc/sys/user/max_user_namespaces")
        if max_userns is not None:
            self.assertIn(f"max_user_namespaces={int(max_userns)}",
                          checks["user_namespaces"]["detail"])
        self.assertTrue(checks["privileges"]["ok"])
        self.assertFalse(checks["privileges"]["required"])
        if not checks["net_admin"]["ok"]:
            self.assertEqual(checks["net_admin"]["fix"], NET_ADMIN_FIX)
        deb = checks["image_debian"]
        if not deb["ok"]:
            nodata = deb["detail"].startswith("no data directory: ")
            self.assertEqual(deb["fix"], DATA_DIR_FIX if nodata else "nsbox image build debian")
        py = os.access("/usr/bin/python3", os.X_OK) and os.access("/bin/sh", os.X_OK)
        self.assertEqual(checks["image_host"]["ok"], py)

    def assert_host_is_the_machine(self, report):
        with open("/proc/meminfo") as f:
            total = next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemTotal:"))
        self.assertEqual(report["host"], {"cpus": len(os.sched_getaffinity(0)),
                                          "memory": total})


class InfoTest(Shape, unittest.TestCase):
    def test_json_report(self):
        report = self.assert_report(run(["info", "--json"]))
        self.assert_agrees_with_machine(by_name(report))

    def test_text_matches_json(self):
        report = by_name(json.loads(run(["info", "--json"]).stdout))
        proc = run(["info"])
        self.assertIn(proc.returncode, (0, 1))
        lines = proc.stdout.rstrip("\n").split("\n")
        for name, c in report.items():
            row = [i for i, l in enumerate(lines) if l[9:].split(" ", 1)[0] == name]
            self.assertEqual(len(row), 1, f"{name} once in:\n{proc.stdout}")
            line = lines[row[0]]
            self.assertTrue(line.startswith("OK       " if c["ok"] else "MISSING  "), line)
            if not c["ok"]:
                self.assertEqual(lines[row[0] + 1].strip(), "fix: " + c["fix"])
        self.assertTrue(lines[-1].startswith("summary: "), lines[-1])
        self.assertIn("instance types", proc.stdout)
        for t in ("small", "medium", "large"):
            self.assertTrue(any(l.split()[:1] == [t] for l in lines), t)

    def test_egress_helper_beside_nsbox(self):
        # nsbox runs nsbox-egress from its own directory: the build's is found; a copy of nsbox
        # alone reports it missing, optional, naming the path
        c = by_name(json.loads(run(["info", "--json"]).stdout))["egress_helper"]
        helper = os.path.join(os.path.dirname(os.path.realpath(NSBOX)), "nsbox-egress")
        self.assertEqual((c["ok"], c["required"]), (True, False), c)
        self.assertTrue(c["detail"].startswith(helper + ","), c)
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(NSBOX, d)
            proc = subprocess.run([os.path.join(d, "nsbox"), "info", "--json"],
                                  capture_output=True, text=True, timeout=60)
            c = by_name(json.loads(proc.stdout))["egress_helper"]
        self.assertEqual((c["ok"], c["required"]), (False, False), c)
        self.assertIn(os.path.join(d, "nsbox-egress") + " (ENOENT)", c["detail"])
        self.assertIn("install nsbox-egress beside nsbox", c["fix"])

    def test_oci_images_names_skopeo(self):
        # pulls run skopeo ($NSBOX_SKOPEO, else from PATH): without it only import works
        c = by_name(json.loads(run(["info", "--json"]).stdout))["oci_images"]
        self.assertFalse(c["required"])
        if c["ok"]:
            self.assertIn("pull (", c["detail"])
            # gzip layers: ISA-L's inflate where libisal2 loads, else zlib's and how to get it
            try:
                ctypes.CDLL("libisal.so.2")
                self.assertIn("gzip by ISA-L)", c["detail"])
            except OSError:
                self.assertIn("gzip by zlib: apt-get install libisal2", c["detail"])
        proc = run(["info", "--json"], env=dict(os.environ, NSBOX_SKOPEO="/nonexistent/skopeo"))
        c = by_name(json.loads(proc.stdout))["oci_images"]
        if "import works" not in c["detail"]:
            self.skipTest("libarchive or libcrypto cannot be loaded here: " + c["detail"])
        self.assertEqual((c["ok"], c["required"]), (False, False), c)
        self.assertIn("pull does not: NSBOX_SKOPEO=/nonexistent/skopeo is not executable",
                      c["detail"])
        self.assertTrue(c["fix"].endswith("apt-get install skopeo"), c)

    def test_file_table_sized_by_memory_after_a_root_sandbox(self):
        # root's nsbox raises fs.file-max when it makes a sandbox (docs/security.md, finding
        # 22): info then says so, and reads the number the kernel gives
        if os.geteuid() != 0:
            self.skipTest("only root's nsbox raises fs.file-max")
        self.assertEqual(run(["run", "--", "true"]).returncode, 0)
        c = by_name(json.loads(run(["info", "--json"]).stdout))["file_table"]
        with open("/proc/sys/fs/file-max") as f:
            file_max = f.read().strip()
        self.assertEqual((c["ok"], c["required"], c["fix"]), (True, False, ""), c)
        self.assertTrue(c["detail"].startswith(f"fs.file-max {file_max}: "), c)

    def test_types_above_the_machine_are_noted(self):
        # accepted, as Docker's limits above the machine are; but on a small CI runner a type's
        # numbers misled: more CPUs than it gets, a memory limit the machine never reaches
        report = json.loads(run(["info", "--json"]).stdout)
        self.assert_host_is_the_machine(report)
        host = report["host"]
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, "config.json")
            with open(cfg, "w") as f:
                json.dump({"instance_types": {
                    "roomy": {"cpus": host["cpus"] + 1,
                              "memory": f"{host['memory'] // 2**30 + 1}GiB", "pids": 64,
                              "disk": "1GiB"},
                    "fits": {"cpus": host["cpus"], "memory": "64MiB", "pids": 64,
                             "disk": "1GiB"}}}, f)
            text = run(["info"], env=dict(os.environ, NSBOX_CONFIG=cfg)).stdout
        n = host["cpus"]
        self.assertIn(f"  note: roomy's {n + 1} CPUs are more than the {n} this machine gives "
                      f"nsbox: a sandbox of it gets at most {n}\n", text)
        self.assertRegex(text, r"  note: roomy's \d+ GiB of memory are more than this machine's "
                               r"[\d.]+ [GM]iB: its limit is never reached, the machine runs out "
                               r"first and its OOM killer chooses what to end\n")
        self.assertNotIn("note: fits", text)

    def test_a_broken_config_is_a_missing_required_check(self):
        # The report said "OK" and "ok": true beside the error on stderr and exit code 1.
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, "config.json")
            with open(cfg, "w") as f:
                json.dump({"instance_types": {"medium": {"memory": "8XB"}}}, f)
            env = dict(os.environ, NSBOX_CONFIG=cfg)
            proc = run(["info", "--json"], env=env)
            report = self.assert_report(proc)
            self.assertFalse(report["ok"])
            c = by_name(report)["config"]
            self.assertFalse(c["ok"])
            self.assertIn("unknown unit 'XB'", c["detail"])
            self.assertIn(cfg, c["fix"])
            text = run(["info"], env=env)
            self.assertEqual(text.returncode, 1)
            self.assertIn("MISSING 1 required: config", text.stdout)
            self.assertNotIn("OK, every required check passed", text.stdout)
            self.assertIn("unknown unit 'XB'", text.stderr)
            with open(cfg, "w") as f:
                json.dump({"instance_types": {}}, f)
            c = by_name(json.loads(run(["info", "--json"], env=env).stdout))["config"]
            self.assertEqual((c["ok"], c["detail"]), (True, cfg + ": valid"))

    def test_a_configs_path_and_an_argument_reach_no_terminal_with_their_controls(self):
        # The config's path (NSBOX_CONFIG, as a script sets it) in the report and the error on
        # stderr, and an unknown argument in the usage error, show each escape sequence (ESC's
        # CSI, C1 as UTF-8) as '?', as every message of nsbox's does: a path or an argument a
        # script passes on must not drive the terminal.
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d.encode(), b"c\x1b[31m\xc2\x9b2J.json")
            with open(cfg, "w") as f:
                json.dump({"instance_types": {"medium": {"memory": "8XB"}}}, f)
            proc = subprocess.run([NSBOX, "info"], capture_output=True, timeout=60,
                                  env=dict(os.environb, NSBOX_CONFIG=cfg))
            self.assertEqual(proc.returncode, 1)
            shown = d.encode() + b"/c?[31m?2J.json"
            self.assertIn(b"nsbox: config " + shown + b": instance_types.medium", proc.stderr)
            self.assertIn(b" config " + shown + b": instance_types.medium", proc.stdout)
            for out in (proc.stdout, proc.stderr):
                self.assertNotIn(b"\x1b", out)
                self.assertNotIn(b"\x9b", out)
        proc = subprocess.run([NSBOX, "info", b"--x\x1b]0;t\x07"], capture_output=True,
                              timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertIn(b"nsbox info: unknown argument '--x?]0;t?'\n", proc.stderr)

    def test_usage_error(self):
        proc = run(["info", "--no-such-flag"])
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--no-such-flag", proc.stderr)
        self.assertEqual(proc.stdout, "")

    @unittest.skipUnless(os.geteuid() == 0, "needs root")
    def test_root_has_every_required_check(self):
        proc = run(["info", "--json"])
        report = self.assert_report(proc)
        checks = by_name(report)
        missing = {n: c for n, c in checks.items() if c["required"] and not c["ok"]}
        self.assertEqual(missing, {}, "this machine is expected to run nsbox as root")
        self.assertEqual(proc.returncode, 0)
        self.assertTrue(checks["privileges"]["detail"].startswith("root"), checks["privileges"])
        self.assertTrue(checks["net_admin"]["ok"])
        if os.path.exists("/dev/loop-control"):
            self.assertTrue(checks["workspace_disk"]["detail"].startswith("ext4 on a loop device"),
                            checks["workspace_disk"])
        # nftables, asked of the nft command instead of nsbox, in a throwaway network namespace;
        # only where nf_tables is in the kernel already (built in, or a module loaded), since
        # nft would load the module and nsbox info deliberately does not
        in_kernel = os.path.exists("/sys/module/nf_tables") or not os.path.exists("/proc/modules")
        if in_kernel and shutil.which("nft") and shutil.which("unshare"):
            probe = subprocess.run(["unshare", "-n", "nft", "list", "tables"],
                                   capture_output=True, timeout=60)
            self.assertEqual(checks["nftables"]["ok"], probe.returncode == 0,
                             (checks["nftables"], probe.stderr))


    @unittest.skipUnless(os.geteuid() == 0, "needs root")
    @unittest.skipUnless(shutil.which("unshare") and shutil.which("findmnt"),
                         "needs unshare and findmnt (util-linux)")
    def test_root_in_a_container_without_privileges_is_told_so(self):
        # root whose cgroup filesystem is read-only, as in a container Docker or Podman (or a
        # GitLab docker executor) started without --privileged: the fix is the container's,
        # not "run nsbox as root" nor a delegation to root. Made in a private mount namespace:
        # every cgroup mount remounted read-only there, the host's left as they are.
        script = ('for m in $(findmnt -rn -o TARGET -t cgroup,cgroup2); do '
                  'mount -o remount,bind,ro "$m" || exit 99; done; exec "$@"')
        proc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script,
                               "sh", NSBOX, "info", "--json"],
                              capture_output=True, text=True, timeout=60)
        report = self.assert_report(proc)
        cg = by_name(report)["cgroups"]
        self.assertFalse(cg["ok"], cg)
        self.assertIn(": the cgroup filesystem is read-only here, as in a container started "
                      "without --privileged", cg["fix"])
        # a root systemd unit with ProtectControlGroups=yes is on the host, yet its cgroup
        # filesystem is read-only too: "run nsbox on the host" alone would not help it, and
        # the unit's own setting is the direct fix
        self.assertIn("or a systemd unit with ProtectControlGroups=yes: set "
                      "ProtectControlGroups=no in that unit (and Delegate=yes in a unit whose "
                      "nsbox runs as a user), or start the container with --privileged "
                      "--cgroupns=host", cg["fix"])
        self.assertNotIn("run nsbox as root", cg["fix"])
        self.assertNotIn("nsbox-0", cg["fix"])


    @unittest.skipUnless(os.geteuid() == 0, "needs root")
    @unittest.skipUnless(shutil.which("setpriv"), "needs setpriv (util-linux)")
    def test_root_without_its_capabilities_is_not_told_to_run_as_root(self):
        # a container's root (Docker and Podman without --privileged) has no CAP_SYS_ADMIN nor
        # CAP_NET_ADMIN: "run as root" is no fix for it, nor are root's features its own
        proc = subprocess.run(
            ["setpriv", "--bounding-set", "-sys_admin,-net_admin", NSBOX, "info", "--json"],
            capture_output=True, text=True, timeout=60)
        checks = by_name(self.assert_report(proc))
        self.assertFalse(checks["net_admin"]["ok"])
        # a systemd unit's CapabilityBoundingSet= without it is on the host: named too
        self.assertEqual(checks["net_admin"]["fix"],
                         "run nsbox on the host with CAP_SYS_ADMIN (from a systemd unit, one whose "
                         "CapabilityBoundingSet= keeps it), or in a container started with "
                         "--privileged --cgroupns=host, not without --privileged (network "
                         "all/allow need CAP_NET_ADMIN on the host)", proc.stdout)
        self.assertTrue(checks["privileges"]["detail"].startswith(
            "root (uid 0) without CAP_SYS_ADMIN, as in a container started without "
            "--privileged or a systemd unit whose CapabilityBoundingSet= leaves it out: what "
            "root's sandboxes have"), checks["privileges"])


    @unittest.skipUnless(os.geteuid() == 0, "needs root")
    @unittest.skipUnless(shutil.which("setpriv"), "needs setpriv (util-linux)")
    def test_root_without_sys_admin_cannot_make_sandboxes_and_is_told_why(self):
        # root whose bounding set lacks CAP_SYS_ADMIN (a CI job in a container started without
        # --privileged) may make a user namespace, but not write the id maps of one owned by a
        # sandbox's uid: info said nsbox could create sandboxes, and blamed user namespaces
        # (nftables) and a missing ext4 module (workspace_disk) for what the capability does
        proc = subprocess.run(
            ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", NSBOX, "info",
             "--json"], capture_output=True, text=True, timeout=60)
        report = self.assert_report(proc)
        self.assertFalse(report["ok"])
        checks = by_name(report)
        userns = checks["user_namespaces"]
        self.assertFalse(userns["ok"], userns)
        self.assertIn("; but root without CAP_SYS_ADMIN (not even in its bounding set) cannot "
                      "make a sandbox: each sandbox's user namespace belongs to a uid of its "
                      "own, and root may write that namespace's id maps only with "
                      "CAP_SYS_ADMIN", userns["detail"])
        self.assertEqual(userns["fix"],
                         "run nsbox on the host with CAP_SYS_ADMIN (from a systemd unit, one whose "
                         "CapabilityBoundingSet= keeps it), or in a container started with "
                         "--privileged --cgroupns=host, not without --privileged")
        for c in checks.values():
            self.assertNotIn("fix user_namespaces", c["fix"], c)
            self.assertNotIn("modprobe ext4", c["detail"], c)
        self.assertIn("ext4 workspaces: mounting one needs CAP_SYS_ADMIN, which this root lacks",
                      checks["workspace_disk"]["detail"])
        self.assertFalse(checks["idmapped_mounts"]["ok"], checks["idmapped_mounts"])
        self.assertEqual(checks["idmapped_mounts"]["fix"], userns["fix"])
        text = subprocess.run(
            ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", NSBOX, "info"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(text.returncode, 1, text.stdout)
        self.assertIn("summary: MISSING 1 required: user_namespaces; nsbox cannot create "
                      "sandboxes here until fixed", text.stdout)


@unittest.skipUnless(os.geteuid() == 0, "needs root to run as another user")
@unittest.skipUnless(shutil.which("setpriv") and shutil.which("useradd"), "needs setpriv, useradd")
class UnprivilegedInfoTest(Shape, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        try:
            pw = pwd.getpwnam(TEST_USER)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", TEST_USER], check=True)
            pw = pwd.getpwnam(TEST_USER)
        cls.uid, cls.gid = pw.pw_uid, pw.pw_gid
        # The build tree may sit below a directory the user cannot enter: run a copy.
        cls.bin = reachable_nsbox()
        # An empty home of the user's: nothing of root's (images, caches) leaks into the view.
        cls.home = tempfile.mkdtemp(prefix="nsbox-info-home-")
        os.chown(cls.home, cls.uid, cls.gid)
        cls.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": cls.home}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.home, ignore_errors=True)

    def as_user(self, argv, **env):
        return subprocess.run(
            ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"] + argv,
            capture_output=True, text=True, timeout=60, env=dict(self.env, **env), cwd="/")

    def test_unprivileged_report(self):
        proc = self.as_user([self.bin, "info", "--json"])
        report = self.assert_report(proc)
        checks = by_name(report)
        self.assert_agrees_with_machine(checks)

        priv = checks["privileges"]
        self.assertTrue(priv["ok"])
        self.assertTrue(priv["detail"].startswith(f"unprivileged (uid {self.uid})"), priv)

        net = checks["net_admin"]
        self.assertFalse(net["ok"])
        self.assertFalse(net["required"])
        self.assertEqual(net["fix"], NET_ADMIN_FIX)

        self.assertFalse(checks["idmapped_mounts"]["ok"])
        # This user has no delegated cgroup (unlike the run tests' user): refused, with the way
        # to get one; and nsbox run refuses with that same cause and fix, word for word.
        cg = checks["cgroups"]
        self.assertFalse(cg["ok"], cg)
        self.assertIn(f"is not writable by uid {self.uid}", cg["fix"])
        self.assertIn("NSBOX_CGROUP_PARENT", cg["fix"])
        home = tempfile.mkdtemp(prefix="nsbox-info-home-")
        self.addCleanup(shutil.rmtree, home, True)
        os.chown(home, self.uid, self.gid)
        r = self.as_user([self.bin, "run", "--", "true"], HOME=home,
                         NSBOX_STATE_DIR=home + "/state")
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(cg["fix"], r.stderr)
        ws = checks["workspace_disk"]
        self.assertTrue(ws["ok"])  # enforced either way
        self.assertTrue(ws["detail"].startswith("tmpfs:"), ws)
        self.assertIn("loop devices need root", ws["detail"])
        self.assertFalse(checks["image_debian"]["ok"])
        self.assertIn(self.home + "/", checks["image_debian"]["detail"])

        # Whether this user can make a user namespace, asked of util-linux instead of nsbox.
        if shutil.which("unshare"):
            probe = self.as_user(["unshare", "--user", "true"])
            if probe.returncode != 0:
                self.assertFalse(checks["user_namespaces"]["ok"])
            elif not checks["user_namespaces"]["ok"]:
                # a restrictive sysctl (AppArmor) can make the namespace useless though it exists
                self.assertIn("sysctl", checks["user_namespaces"]["fix"])

    def test_apparmor_restriction_is_named_with_its_fix(self):
        # Ubuntu 23.10+'s kernel.apparmor_restrict_unprivileged_userns=1: the namespace is
        # made but useless, so the probe alone would say OK. This kernel has no such sysctl:
        # in a mount namespace of its own, a directory holding it (set to 1) stands in for
        # /proc/sys/kernel while the user runs nsbox info. Nothing outside is touched.
        fake = tempfile.mkdtemp(prefix="nsbox-info-sysctl-")
        self.addCleanup(shutil.rmtree, fake, True)
        os.chmod(fake, 0o755)
        with open(os.path.join(fake, "apparmor_restrict_unprivileged_userns"), "w") as f:
            f.write("1\n")
        os.chmod(os.path.join(fake, "apparmor_restrict_unprivileged_userns"), 0o644)
        proc = subprocess.run(
            ["unshare", "-m", "sh", "-ec", 'mount --bind "$1" /proc/sys/kernel; shift; exec "$@"',
             "sh", fake, "setpriv", f"--reuid={self.uid}", f"--regid={self.gid}",
             "--clear-groups", self.bin, "info", "--json"],
            capture_output=True, text=True, timeout=60, env=self.env, cwd="/")
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        userns = by_name(json.loads(proc.stdout))["user_namespaces"]
        self.assertFalse(userns["ok"], userns)
        self.assertIn("apparmor_restrict_unprivileged_userns=1", userns["detail"])
        self.assertIn("sysctl -w kernel.apparmor_restrict_unprivileged_userns=0", userns["fix"])
        self.assertIn("AppArmor profile", userns["fix"])

    def test_a_home_not_the_users_is_named_with_its_fix(self):
        # `sudo -u USER` without -H, `su` without -l, a container's --user: HOME is root's,
        # "/" or missing. Each image then failed to open with "Permission denied" on a path
        # the user never chose, while info said OK and nothing said where it came from.
        other = tempfile.mkdtemp(prefix="nsbox-info-roots-home-")  # root's, 0755: not theirs
        self.addCleanup(shutil.rmtree, other, True)
        os.chmod(other, 0o755)
        state = tempfile.mkdtemp(prefix="nsbox-info-state-")
        self.addCleanup(shutil.rmtree, state, True)
        os.chown(state, self.uid, self.gid)
        for home, blocked in ((other, other), ("/nonexistent", "/")):
            with self.subTest(home=home):
                proc = self.as_user([self.bin, "info", "--json"], HOME=home)
                checks = by_name(self.assert_report(proc))
                self.assert_agrees_with_machine(checks)
                config = checks["config"]
                self.assertFalse(config["ok"])
                # "/" is read-only on some machines (the cgroup v2 VM): mkdir says so there
                why = ("Read-only file system" if home == "/nonexistent" and
                       "(/: Read-only file system)" in config["detail"] else "Permission denied")
                said = (f"nsbox's data directory {home}/.local/share/nsbox, from HOME={home}, "
                        f"is not usable by uid {self.uid} ({blocked}: {why}): set "
                        "HOME to a directory of yours")
                self.assertTrue(config["detail"].startswith(said), config)
                self.assertTrue(config["detail"].endswith(", or NSBOX_DATA_DIR"), config)
                self.assertNotIn("config.json", config["fix"])
                self.assertIn(said, proc.stderr)
                self.assertEqual(checks["image_debian"]["fix"], DATA_DIR_FIX)
                r = self.as_user([self.bin, "run", "--", "true"], HOME=home,
                                 NSBOX_STATE_DIR=state)
                self.assertEqual(r.returncode, 125, r.stderr)
                self.assertIn(said, r.stderr)
                # the fix it names: a data directory of the user's own, HOME left as it was
                proc = self.as_user([self.bin, "info", "--json"], HOME=home,
                                    NSBOX_DATA_DIR=self.home + "/data")
                self.assertTrue(by_name(self.assert_report(proc))["config"]["ok"], proc.stdout)
        # XDG_DATA_HOME, where it is set, is the one to name and to change
        proc = self.as_user([self.bin, "info", "--json"], XDG_DATA_HOME=other)
        config = by_name(self.assert_report(proc))["config"]
        self.assertIn(f"{other}/nsbox, from XDG_DATA_HOME={other}, is not usable by uid "
                      f"{self.uid} ({other}: Permission denied): set XDG_DATA_HOME to a "
                      "directory of yours, or NSBOX_DATA_DIR", config["detail"])

    def test_unprivileged_text(self):
        proc = self.as_user([self.bin, "info"])
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        lines = proc.stdout.split("\n")
        net = [i for i, l in enumerate(lines) if l.startswith("MISSING  net_admin ")]
        self.assertEqual(len(net), 1, proc.stdout)
        self.assertEqual(lines[net[0] + 1].strip(), "fix: " + NET_ADMIN_FIX)
        self.assertTrue(any(l.startswith("OK       privileges") and "unprivileged" in l
                            for l in lines), proc.stdout)


if __name__ == "__main__":
    unittest.main()
