"""End to end: Docker runs nsbox sandboxes through nsbox-oci (docs/oci.md). A dockerd of the test's
own (Debian's docker.io; tests/lib/engines.py: its own network and mount namespaces, data and exec
roots, socket and containerd, bridge networking without iptables) gets `--add-runtime
nsbox=<build>/nsbox-oci` and loads a busybox image the test builds (a docker-save archive).
Checked: `docker run --runtime=nsbox` output and exit code, `--memory` and `--pids-limit` as the
sandbox's limits (also as the container reads them at /sys/fs/cgroup, read-only), `docker update` of one limit leaving the others, `-v` volumes, `docker pause`/`unpause`, `docker exec` (also with -t), `docker
stop` (the workload ends of the SIGTERM, not of the SIGKILL after the grace period), `docker run
-t` (a terminal), bridge networking (eth0 with the address Docker gave, set up by Docker's prestart
hook), `--pid=host` refused at create with the reason in docker's output, Docker's seccomp
profile (its default, or `--security-opt seccomp=FILE`) loaded over nsbox's, named volumes
under a second registration of the runtime with `"runtimeArgs": ["--idmap-volumes=engine"]`
(daemon.json): written as host root, the writable root's protections held, other binds, a
symlinked volume and a volume bound from elsewhere left plain; and that nothing is left: no sandbox, no state, no Docker chain
in the host's ruleset."""
import glob
import ipaddress
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import unittest

import engines
from oci_bundle import make_programs, seccomp_filters

from nsbox_test import CGROUP_V2_ONLY, NSBOX

OCI = os.path.join(os.path.dirname(NSBOX), "nsbox-oci") if NSBOX else None


def ruleset():
    r = subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def setUpModule():
    engines.skip_module_unless(OCI, engines.DOCKERD, engines.DOCKER)


def cgroup_of(pid, controller):
    """pid's cgroup in the hierarchy of controller (v2: its one cgroup)."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctl, path = line.rstrip("\n").split(":", 2)
            if (not ctl) if CGROUP_V2_ONLY else controller in ctl.split(","):
                return path
    return None


def cgroup_file_of(pid, controller, v1_name, v2_name):
    top = "/sys/fs/cgroup" if CGROUP_V2_ONLY else f"/sys/fs/cgroup/{controller}"
    path = top + cgroup_of(pid, controller)
    with open(os.path.join(path, v2_name if CGROUP_V2_ONLY else v1_name)) as f:
        return f.read().strip()


class Docker(engines.DockerCase):
    OCI = OCI
    # the administrator's choice, where the runtime is registered (daemon.json's runtimeArgs)
    RUNTIME_ARGS = {"nsbox-volumes": ["--idmap-volumes=engine"]}

    def run_nsbox(self, *cmd, opts=(), runtime="nsbox"):
        return self.docker("run", "--rm", "--runtime=" + runtime, *opts, engines.IMAGE, *cmd)

    def test_run_output_and_exit_code(self):
        r = self.run_nsbox("sh", "-c", "echo hi; cat /proc/self/uid_map")
        self.assertEqual(r.returncode, 0, r.stderr)
        out, _, uid_map = r.stdout.partition("\n")
        self.assertEqual(out, "hi")
        # an nsbox sandbox: a user namespace that never maps the host's root (the floor)
        self.assertTrue(uid_map.strip(), r.stdout)
        self.assertFalse(engines.host_root_mapped(uid_map), uid_map)
        r = self.run_nsbox("sh", "-c", "exit 3")
        self.assertEqual(r.returncode, 3, r.stderr)

    FILTERS = "awk '/^Seccomp_filters:/ { print $2 }' /proc/self/status"

    def test_seccomp_default_profile_loaded(self):
        # Docker's default profile is in every bundle: a second filter over nsbox's, which
        # runs whatever busybox's shell needs; seccomp=unconfined gives none, nsbox's stays
        own = seccomp_filters()
        if own is None:
            self.skipTest("no Seccomp_filters in /proc/self/status (Linux 5.10 and later)")
        r = self.run_nsbox("sh", "-c", "echo x > /tmp/f && cat /tmp/f && " + self.FILTERS)
        self.assertEqual((r.returncode, r.stdout), (0, f"x\n{own + 2}\n"), r.stderr)
        r = self.run_nsbox("sh", "-c", self.FILTERS, opts=("--security-opt", "seccomp=unconfined"))
        self.assertEqual((r.returncode, r.stdout), (0, f"{own + 1}\n"), r.stderr)

    def test_seccomp_profile_file_denies(self):
        # --security-opt seccomp=FILE: the user's stricter profile takes effect
        prof = {"defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO",
                              "errnoRet": 1}]}
        path = os.path.join(self.dirs.base, "seccomp.json")
        with open(path, "w") as f:
            json.dump(prof, f)
        self.addCleanup(os.unlink, path)
        r = self.run_nsbox("sh", "-c", "mkdir /d 2>&1; echo mkdir=$?; echo x > /f && cat /f",
                           opts=("--security-opt", "seccomp=" + path))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "mkdir: can't create directory '/d': Operation not permitted\n"
                                   "mkdir=1\nx\n", r.stderr)

    def test_root_is_writable(self):
        # docker's default, root.readonly false: the container's root is the one docker made
        # (the test's dockerd uses the vfs driver: a directory), through an idmapped mount,
        # written in place
        r = self.run_nsbox("sh", "-c", "echo x > /made && cat /made &&"
                           " awk '$5 == \"/\"' /proc/self/mountinfo")
        self.assertEqual(r.returncode, 0, r.stderr)
        made, _, root = r.stdout.partition("\n")
        self.assertEqual(made, "x")
        self.assertIn("idmapped", root)

    def test_volumes(self):
        # -v of a directory and of a file, also below one of the image's own directories
        # (/etc), where nsbox-oci binds onto the image (docs/oci.md, Mounts)
        host = tempfile.mkdtemp(prefix="nsbox-docker-vol-")
        self.addCleanup(shutil.rmtree, host, True)
        os.chmod(host, 0o755)
        with open(os.path.join(host, "f"), "w") as f:
            f.write("from-the-host\n")
        os.chmod(os.path.join(host, "f"), 0o644)
        r = self.run_nsbox("cat", "/etc/vol/f", "/vol/f", "/etc/one",
                           opts=("-v", host + ":/etc/vol:ro", "-v", host + ":/vol:ro",
                                 "-v", os.path.join(host, "f") + ":/etc/one:ro"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "from-the-host\n" * 3)

    def volume(self, name):
        """A named volume of Docker's local driver, removed at the end: its directory on the
        host (host root's, 0755, below dockerd's data root)."""
        r = self.docker("volume", "create", name)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.docker, "volume", "rm", "-f", name)
        path = self.docker("volume", "inspect", "-f", "{{.Mountpoint}}", name).stdout.strip()
        self.assertEqual(path, os.path.join(self.daemon.d, "data", "volumes", name, "_data"))
        st = os.stat(path)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, 0o755))
        return path

    def host_dir(self):
        """A directory of host root's, 0755, removed at the end."""
        d = tempfile.mkdtemp(prefix="nsbox-docker-bind-")
        self.addCleanup(shutil.rmtree, d, True)
        os.chmod(d, 0o755)
        return d

    # what the container's root writes in DIR: "DIR written", or the shell's error
    WRITES = "for d in {}; do (echo x > $d/f) 2>&1 && echo $d written; done; true"

    def test_named_volume_written_as_host_root_with_idmap_volumes(self):
        data = self.volume("idmapped")
        # the runtime registered without the option: the volume is bound as it is
        r = self.run_nsbox("sh", "-c", self.WRITES.format("/data"), opts=("-v", "idmapped:/data"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("can't create /data/f: Permission denied", r.stdout)
        self.assertEqual(os.listdir(data), [])
        # with --idmap-volumes=engine (runtimeArgs: every command of the runtime gets it, so
        # run, exec, kill and delete below take it): written as host root, as under runc
        r = self.docker("run", "-d", "--name", "volumes", "--runtime=nsbox-volumes", "-v",
                        "idmapped:/data", engines.IMAGE, "sleep", "1000")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.docker, "rm", "-f", "volumes")
        r = self.docker("exec", "volumes", "sh", "-c", self.WRITES.format("/data") +
                        " && ls -n /data/f && grep ' /data ' /proc/self/mountinfo")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        written, owner, mount = r.stdout.splitlines()
        self.assertEqual(written, "/data written")
        self.assertEqual(owner.split()[2:4], ["0", "0"])
        # the writable root's protections: idmapped, nosuid and nodev whatever Docker asked
        self.assertTrue({"idmapped", "nosuid", "nodev"} <= set(mount.split()[5].split(",")),
                        mount)
        st = os.stat(os.path.join(data, "f"))
        self.assertEqual((st.st_uid, st.st_gid), (0, 0))
        self.assertEqual(self.docker("rm", "-f", "volumes").returncode, 0)

    def test_idmap_volumes_refuses_set_id_and_seals_the_volumes_programs(self):
        # a set-user-ID-root program of the container's making would be host root's: chmod
        # refused; the volume's own set-id and file-capability programs bound read-only onto
        # themselves
        data = self.volume("sealed")
        make_programs(data, {"suid": 0o4755, "plain": 0o755, "capped": 0o755})
        r = self.run_nsbox("sh", "-c", "touch /data/new && echo touched;"
                           " chmod 4755 /data/new 2>&1; echo x >> /data/plain && echo plain;"
                           " (echo x >> /data/suid) 2>&1; (echo x >> /data/capped) 2>&1; true",
                           opts=("-v", "sealed:/data"), runtime="nsbox-volumes")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), [
            "touched", "chmod: /data/new: Operation not permitted", "plain",
            "sh: can't create /data/suid: Read-only file system",
            "sh: can't create /data/capped: Read-only file system"])
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(data, "new")).st_mode) & 0o6000, 0)
        for name in ("suid", "capped"):
            with open(os.path.join(data, name)) as f:
                self.assertEqual(f.read(), "original\n")

    def test_idmap_volumes_refuses_file_capabilities(self):
        # a file capability the container's root writes would be host root's: refused by the
        # writable root's seccomp refusals, folded in for the volume (the root is read-only
        # here, so the volume alone brings them)
        probes = os.environ.get("NSBOX_SECURITY_BIN_DIR")
        attack = os.path.join(probes or "", "attack")
        if not probes or not os.path.exists(attack):
            self.skipTest("needs the security probes (run through ctest)")
        data = self.volume("capable")
        r = self.run_nsbox("sh", "-c", "touch /data/prog && /attack xattr /data/prog",
                           opts=("--read-only", "-v", "capable:/data",
                                 "-v", attack + ":/attack:ro"), runtime="nsbox-volumes")
        self.assertEqual(r.returncode, 0, r.stderr)
        caps = [line for line in r.stdout.splitlines() if "security.capability" in line]
        self.assertEqual(len(caps), 4, r.stdout)
        for line in caps:  # nsbox's refusal, or Docker's of a call newer than its profile
            self.assertIn(line.split()[-1], ("EOPNOTSUPP", "EPERM"), line)
        self.assertNotIn("security.capability", os.listxattr(os.path.join(data, "prog")))

    def assert_only_the_volume_written(self, volume, other):
        """Under --idmap-volumes=engine, a container given the named volume at /data and other
        (a -v source) at /other: its root writes the volume and not /other."""
        r = self.run_nsbox("sh", "-c", self.WRITES.format("/data /other"),
                           opts=("-v", volume + ":/data", "-v", other + ":/other"),
                           runtime="nsbox-volumes")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), [
            "/data written", "sh: can't create /other/f: Permission denied"])

    def test_idmap_volumes_leaves_other_binds_as_they_are(self):
        # a bind of any other host directory is not the engine's volume: not idmapped, so not
        # writable by the container's root (the volume beside it is)
        self.volume("beside")
        other = self.host_dir()
        self.assert_only_the_volume_written("beside", other)
        self.assertEqual(os.listdir(other), [])

    def test_idmap_volumes_leaves_a_symlinked_volume_as_it_is(self):
        # a volume's directory that is a symlink to elsewhere leads out of the engine's
        # volumes: bound as it is (Docker follows it), not idmapped
        self.volume("real")
        linked = self.volume("linked")
        elsewhere = self.host_dir()
        os.rmdir(linked)
        os.symlink(elsewhere, linked)
        self.addCleanup(os.mkdir, linked)
        self.addCleanup(os.unlink, linked)
        self.assert_only_the_volume_written("real", "linked")
        self.assertEqual(os.listdir(elsewhere), [])

    def test_idmap_volumes_leaves_a_volume_mounted_from_elsewhere_as_it_is(self):
        # a local volume with mount options has Docker's mount on its directory, here a bind
        # of another host directory: not a directory the engine made, not idmapped
        self.volume("real")
        elsewhere = self.host_dir()
        r = self.docker("volume", "create", "-o", "type=none", "-o", "o=bind", "-o",
                        "device=" + elsewhere, "bound")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.docker, "volume", "rm", "-f", "bound")
        self.assert_only_the_volume_written("real", "bound")
        self.assertEqual(os.listdir(elsewhere), [])

    def test_stop_ends_with_sigterm(self):
        r = self.docker("run", "-d", "--name", "stopme", "--runtime=nsbox", engines.IMAGE,
                        "sleep", "1000")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.docker, "rm", "-f", "stopme")
        self.assertEqual(self.docker("inspect", "-f", "{{.State.Running}}", "stopme").stdout,
                         "true\n")
        r = self.docker("stop", "-t", "60", "stopme")
        self.assertEqual(r.returncode, 0, r.stderr)
        # 143: the SIGTERM ended it (a SIGKILL at the grace period's end would be 137)
        self.assertEqual(self.docker("inspect", "-f", "{{.State.ExitCode}}", "stopme").stdout,
                         "143\n")
        self.assertEqual(self.dirs.live_ids(), [])

    def state_of(self, cid):
        """nsbox-oci's state of container cid (under the runc shim's root in dockerd's exec
        root)."""
        found = glob.glob(os.path.join(self.daemon.d, "exec", "runtime-*", "moby", cid,
                                       "state.json"))
        self.assertEqual(len(found), 1, found)
        with open(found[0]) as f:
            return json.load(f)

    def test_limits_and_pause(self):
        r = self.docker("run", "-d", "--name", "limits", "--runtime=nsbox", "--memory", "96m",
                        "--pids-limit", "37", engines.IMAGE, "sleep", "1000")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.docker, "rm", "-f", "limits")
        cid = r.stdout.strip()
        # the container's cgroup is where Docker's config puts it (cgroupsPath: /docker/ID,
        # or the systemd form), with Docker's limits; the state's pid is the container's init
        init = self.state_of(cid)["pid"]
        self.assertTrue(cgroup_of(init, "memory").endswith(cid), cgroup_of(init, "memory"))
        self.assertEqual(cgroup_file_of(init, "memory", "memory.limit_in_bytes", "memory.max"),
                         str(96 << 20))
        self.assertEqual(cgroup_file_of(init, "pids", "pids.max", "pids.max"), "37")
        # docker stats reads the cgroup of the state's pid (containerd's task metrics): the
        # sandbox's, with its limit and its two processes (init, sleep)
        r = self.docker("stats", "--no-stream", "--format", "{{.MemUsage}} pids={{.PIDs}}",
                        "limits")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("/ 96MiB pids=2", r.stdout)
        # docker pause freezes the sandbox's cgroup (nsbox-oci pause), unpause thaws it
        self.assertEqual(self.docker("pause", "limits").returncode, 0)
        self.assertEqual(self.docker("inspect", "-f", "{{.State.Status}}", "limits").stdout,
                         "paused\n")
        self.assertIn(cgroup_file_of(init, "freezer", "freezer.state", "cgroup.freeze"),
                      ("FROZEN", "1"))
        self.assertEqual(self.docker("unpause", "limits").returncode, 0)
        self.assertIn(cgroup_file_of(init, "freezer", "freezer.state", "cgroup.freeze"),
                      ("THAWED", "0"))
        self.assertEqual(self.docker("inspect", "-f", "{{.State.Status}}", "limits").stdout,
                         "running\n")

    def test_container_sees_its_own_cgroup(self):
        # at /sys/fs/cgroup, where Docker's config mounts cgroup, as under runc: its own limits
        # (a JVM, Go or Node sizes itself from them), read-only; v1 as well as v2
        r = self.docker("run", "--rm", "--runtime=nsbox", "-m", "96m", "--pids-limit", "37",
                        engines.IMAGE, "sh", "-c",
                        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || "
                        "cat /sys/fs/cgroup/memory.max; cat /sys/fs/cgroup/pids/pids.max "
                        "2>/dev/null || cat /sys/fs/cgroup/pids.max; cat /proc/self/cgroup; "
                        "for f in /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max; do "
                        "test -e $f && { (echo 5 > $f) 2>/dev/null && echo wrote; }; done; "
                        "mkdir /sys/fs/cgroup/x 2>/dev/null && echo made; true")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.split("\n")
        self.assertEqual(lines[:2], [str(96 << 20), "37"], r.stdout)
        # its cgroup namespace is rooted there: every hierarchy says /
        self.assertTrue(all(l.endswith(":/") for l in lines[2:] if l), r.stdout)
        self.assertNotIn("wrote", r.stdout)
        self.assertNotIn("made", r.stdout)

    def test_update_changes_only_what_it_names(self):
        # docker update sends every limit, those not given as 0, which leave them (runc's
        # update): a new pids limit keeps the memory limit and the cpu quota, a new memory
        # limit the cpu quota
        r = self.docker("run", "-d", "--name", "updated", "--runtime=nsbox", "--memory", "64m",
                        "--cpus", "0.5", engines.IMAGE, "sleep", "1000")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.docker, "rm", "-f", "updated")
        init = self.state_of(r.stdout.strip())["pid"]

        def limits():
            cpu = cgroup_file_of(init, "cpu", "cpu.cfs_quota_us", "cpu.max").split()[0]
            return (cgroup_file_of(init, "memory", "memory.limit_in_bytes", "memory.max"), cpu,
                    cgroup_file_of(init, "pids", "pids.max", "pids.max"))

        self.assertEqual(limits()[:2], (str(64 << 20), "50000"))
        r = self.docker("update", "--pids-limit", "50", "updated")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(limits(), (str(64 << 20), "50000", "50"))
        r = self.docker("update", "--memory", "96m", "updated")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(limits(), (str(96 << 20), "50000", "50"))

    def test_exec(self):
        r = self.docker("run", "-d", "--name", "execme", "--runtime=nsbox", engines.IMAGE,
                        "sleep", "1000")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.docker, "rm", "-f", "execme")
        r = self.docker("exec", "execme", "sh", "-c", "echo in-$(hostname); exit 4")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertEqual(r.stdout, "in-" + self.docker("inspect", "-f", "{{.Config.Hostname}}",
                                                       "execme").stdout)
        # as another user: a root container's init (Docker's capabilities) forks it as that
        # user, with no capability left
        r = self.docker("exec", "-u", "1000:1000", "execme", "sh", "-c",
                        "id -u; id -g; grep -E '^(CapEff|CapPrm):' /proc/self/status")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["1000", "1000", "CapPrm:", "0" * 16,
                                            "CapEff:", "0" * 16])
        # as root into a non-root container without capabilities (runc enters it from outside;
        # nsbox-oci's init keeps what changing users takes): root, with the container's none
        r = self.docker("run", "-d", "--name", "execroot", "--runtime=nsbox", "-u", "1000:1000",
                        "--cap-drop", "ALL", engines.IMAGE, "sleep", "1000")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.docker, "rm", "-f", "execroot")
        r = self.docker("exec", "-u", "0:0", "execroot", "sh", "-c",
                        "id -u; grep -E '^(CapEff|CapBnd):' /proc/self/status")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.split(), ["0", "CapEff:", "0" * 16, "CapBnd:", "0" * 16])

    def test_run_tty(self):
        r = self.run_nsbox("sh", "-c", "test -t 0 && test -t 1 && tty", opts=("-t",))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"^/dev/pts/[0-9]+\r?\n$")

    def test_exec_tty(self):
        r = self.docker("run", "-d", "--name", "exectty", "--runtime=nsbox", engines.IMAGE,
                        "sleep", "1000")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.docker, "rm", "-f", "exectty")
        r = self.docker("exec", "-t", "exectty", "sh", "-c", "test -t 0 && test -t 1 && tty")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"^/dev/pts/[0-9]+\r?\n$")

    def test_bridge_eth0(self):
        subnet = self.docker("network", "inspect", "-f", "{{(index .IPAM.Config 0).Subnet}}",
                             "bridge").stdout.strip()
        r = self.run_nsbox("ip", "-o", "-4", "addr", "show", "dev", "eth0")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        m = re.search(r" inet ([0-9.]+)/", r.stdout)
        self.assertTrue(m, r.stdout)
        self.assertIn(ipaddress.ip_address(m.group(1)), ipaddress.ip_network(subnet))

    def assert_run_refused(self, name, option, words):
        """docker run with option is refused at create: docker shows "OCI runtime create
        failed: <msg>", and the message has each of words (what, why, the fix)."""
        self.addCleanup(self.docker, "rm", "-f", name)
        r = self.docker("run", "--name", name, option, "--runtime=nsbox", engines.IMAGE, "true")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        for w in ("OCI runtime create failed",) + words:
            self.assertIn(w, r.stderr)

    def test_host_pid_refused(self):
        # --pid=host leaves the pid namespace out of the config
        self.assert_run_refused("hostpid", "--pid=host", (
            "host's pid namespace", "never shares a host namespace", "drop --pid=host"))

    def test_create_warning_not_in_the_containers_output(self):
        # a warning of create (kernel memory, which current kernels ignore) goes to the log
        # the shim gives (log.json in the task's bundle), not to the container's stderr, which
        # is docker logs' and the attached client's
        r = self.docker("run", "--name", "warned", "--kernel-memory", "64m", "--runtime=nsbox",
                        engines.IMAGE, "echo", "hi")
        self.addCleanup(self.docker, "rm", "-f", "warned")
        self.assertEqual((r.returncode, r.stdout), (0, "hi\n"), r.stderr)
        self.assertNotIn("nsbox-oci", r.stderr)
        r = self.docker("logs", "warned")
        self.assertEqual((r.stdout, r.stderr), ("hi\n", ""))

    def test_host_network_refused(self):
        # --network=host names the host's network namespace by path (dockerd's own): the
        # refusal says which option asked for it
        self.assert_run_refused("hostnet", "--network=host", (
            "host's network namespace", "never shares a host namespace",
            "--network=host: drop it"))

    def test_zz_nothing_left(self):
        # runs last (names sort): every container above is gone, and with it its sandbox
        self.assertEqual(self.docker("ps", "-aq").stdout, "")
        self.assertEqual(self.dirs.leftovers(), [])
        # dockerd's chains (DOCKER, DOCKER-USER, ...) never reach the host's ruleset; the full
        # ruleset is not compared, as other programs on the machine may change it meanwhile
        self.assertNotIn("DOCKER", ruleset() or "")


if __name__ == "__main__":
    unittest.main()
