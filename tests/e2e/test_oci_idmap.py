"""End to end: a config's idmapped volume (docs/oci.md, "Idmapped volumes"). A bind with the
option "idmap" is seen through an idmapped mount: the container's id N is the volume's on-disk
id N, as under runc without a user namespace, so that its root writes a volume of host root's
as host root, while the process runs as an unprivileged host id. The writable root's
protections hold there: set-id modes and extended attribute writes refused, the volume's own
set-id programs sealed read-only, nosuid and nodev. Without the option nothing changes; a
mapping outside the container's ids is refused at create. With nsbox-oci's --idmap-volumes=engine
(the administrator's), a bind of one of Docker's named volumes is idmapped the same way, without
asking: a bundle laid out as Docker's vfs driver lays it out (the root at <R>/vfs/dir/<id>, the
volume at <R>/volumes/<name>/_data); tests/e2e/test_oci_docker.py has it under Docker itself."""
import json
import os
import shutil
import stat
import struct
import subprocess
import tempfile
import unittest

from oci_bundle import OCI, BundleCase, config, make_programs, require_runtime


def setUpModule():
    require_runtime()


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class IdmappedVolume(BundleCase):
    TOOLS = BundleCase.TOOLS + ("chmod", "stat", "touch", "awk", "rm", "mv", "ln")

    def setUp(self):
        super().setUp()
        # a volume of host root's, as a Docker or Podman named volume is: mode 0755
        self.vol = tempfile.mkdtemp(prefix="nsbox-oci-vol-")
        self.addCleanup(shutil.rmtree, self.vol, True)
        os.chmod(self.vol, 0o755)

    def volume_config(self, args, options=("rbind", "idmap"), **mount):
        c = config(args)
        c["root"]["readonly"] = True  # the volume alone is written
        c["mounts"].append(dict({"destination": "/data", "type": "bind", "source": self.vol,
                                 "options": list(options)}, **mount))
        return c

    def test_root_writes_as_the_volumes_owner(self):
        code, out = self.run_container(self.volume_config(
            ["sh", "-c", "echo hi > /data/made && stat -c %u:%g /data && echo ok"]))
        self.assertEqual((code, out), (0, "0:0\nok\n"))
        st = os.stat(os.path.join(self.vol, "made"))
        self.assertEqual((st.st_uid, st.st_gid), (0, 0))  # host root's, as runc writes it

    def test_uid_1000_writes_as_host_1000(self):
        os.chown(self.vol, 1000, 1000)
        c = self.volume_config(["sh", "-c", "echo hi > /data/mine && echo ok"])
        c["process"]["user"] = {"uid": 1000, "gid": 1000}
        self.assertEqual(self.run_container(c), (0, "ok\n"))
        st = os.stat(os.path.join(self.vol, "mine"))
        self.assertEqual((st.st_uid, st.st_gid), (1000, 1000))

    def test_without_idmap_the_volume_stays_read_only_to_root(self):
        code, out = self.run_container(self.volume_config(
            ["sh", "-c", "(echo hi > /data/made) 2>/dev/null || echo refused"], options=["rbind"]))
        self.assertEqual((code, out), (0, "refused\n"))
        self.assertEqual(os.listdir(self.vol), [])

    def test_mappings_onto_the_containers_ids(self):
        # on-disk 0 is the container's 1000: what its uid 1000 writes is host root's
        maps = [{"containerID": 0, "hostID": 1000, "size": 1}]
        c = self.volume_config(["sh", "-c", "echo hi > /data/m && stat -c %u /data && echo ok"],
                               uidMappings=maps, gidMappings=maps)
        c["process"]["user"] = {"uid": 1000, "gid": 1000}
        self.assertEqual(self.run_container(c), (0, "1000\nok\n"))
        st = os.stat(os.path.join(self.vol, "m"))
        self.assertEqual((st.st_uid, st.st_gid), (0, 0))

    def test_mappings_outside_the_range_refused_at_create(self):
        cases = [
            # onto host ids the container does not have
            ([{"containerID": 0, "hostID": 100000, "size": 65536}], "not the container's own"),
            # on-disk ids past 65535: other containers' files
            ([{"containerID": 200000, "hostID": 0, "size": 1}],
             "on-disk ids 200000-200000, past 65535"),
        ]
        for maps, want in cases:
            with self.subTest(maps=maps):
                self.write_config(self.volume_config(["true"], uidMappings=maps,
                                                     gidMappings=maps))
                msg = self.create_refused()
                self.assertIn("mounts.uidMappings", msg)
                self.assertIn(want, msg)
        # the config's own user namespace: its host ids are the container's
        c = self.volume_config(["true"], uidMappings=cases[0][0], gidMappings=cases[0][0])
        c["linux"]["uidMappings"] = c["linux"]["gidMappings"] = [
            {"containerID": 0, "hostID": 100000, "size": 65536}]
        self.write_config(c)
        self.assertEqual(self.create(), self.waited_pids[-1])

    def test_set_id_modes_and_file_capabilities_refused(self):
        self.install_probe()
        c = self.volume_config(["sh", "-c", "attack setid /data; echo x > /data/prog;"
                                " attack xattr /data/prog"])
        c["process"]["capabilities"] = {k: ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER",
                                            "CAP_FSETID", "CAP_SETFCAP"]
                                        for k in ("bounding", "effective", "permitted")}
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        lines = out.splitlines()
        probes = [json.loads(line) for line in lines if line.startswith("{")]
        self.assertGreaterEqual(len(probes), 10, out)
        for p in probes:
            if p["name"] != "openat_plain_mode_ignored":
                self.assertTrue(p["blocked"], p)
        xattr = [line for line in lines if "security.capability" in line]
        self.assertTrue(xattr, out)
        for line in xattr:
            self.assertTrue(line.endswith("EOPNOTSUPP"), line)
        for name in os.listdir(self.vol):
            path = os.path.join(self.vol, name)
            self.assertFalse(os.lstat(path).st_mode & (stat.S_ISUID | stat.S_ISGID), name)
        self.assertEqual(os.listxattr(os.path.join(self.vol, "prog")), [])

    def test_set_id_programs_in_the_volume_cannot_be_rewritten(self):
        self.install_probe()
        os.makedirs(os.path.join(self.vol, "deep", "er"))
        files = {"suid": 0o4755, "deep/er/sgid": 0o2755, "capped": 0o755, "plain": 0o755}
        make_programs(self.vol, files)
        c = self.volume_config(["sh", "-c", "attack mmap-write /data/" + " /data/".join(files)
                                + "; rm /data/suid; mv /data/suid /data/moved; true"])
        c["process"]["capabilities"] = {k: ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER",
                                            "CAP_FSETID"]
                                        for k in ("bounding", "effective", "permitted")}
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        self.assertEqual(out.splitlines()[:4], ["/data/suid open EROFS",
                                                "/data/deep/er/sgid open EROFS",
                                                "/data/capped open EROFS", "/data/plain written"])
        for name, mode in files.items():
            path = os.path.join(self.vol, name)
            with open(path) as f:
                self.assertEqual(f.read(), "nsboxnal\n" if name == "plain" else "original\n")
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), mode, name)
        self.assertFalse(os.path.exists(os.path.join(self.vol, "moved")))

    def test_directories_above_a_set_id_program_cannot_be_moved(self):
        """The seal's walk of a volume is not atomic: a running container on the same volume
        that moved a directory holding a set-id program from the part another container's
        create had not walked yet into one it had would leave the program unsealed, and
        writable through a shared mapping, there. Each container holds in place the
        directories above the programs its walk sealed: it cannot move them, so none can move
        a program out of another's walk; other directories move as before."""
        for d in ("d/e", "free"):
            os.makedirs(os.path.join(self.vol, d))
        files = {"d/e/suid": 0o4755, "d/capped": 0o755}
        make_programs(self.vol, files, capped="d/capped")
        c = self.volume_config(["sh", "-c", "mv /data/d /data/d2; mv /data/d/e /data/e2;"
                                " mv /data/free /data/free2 && echo moved free;"
                                " (echo x >> /data/d/e/suid) 2>/dev/null || echo sealed;"
                                " awk '$5 == \"/data\" { o = $6 } END { print o }'"
                                " /proc/self/mountinfo"])
        c["process"]["capabilities"] = {k: ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER"]
                                        for k in ("bounding", "effective", "permitted")}
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        self.assertEqual(out.count("Device or resource busy"), 2, out)
        self.assertIn("moved free\nsealed\n", out)
        top = out.splitlines()[-1].split(",")  # the clone over the volume, as the volume is
        for opt in ("rw", "nosuid", "nodev", "idmapped"):
            self.assertIn(opt, top, out)
        self.assertEqual(sorted(os.listdir(self.vol)), ["d", "free2"])
        for name, mode in files.items():
            path = os.path.join(self.vol, name)
            with open(path) as f:
                self.assertEqual(f.read(), "original\n")
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), mode, name)

    def test_a_program_that_arrives_after_the_walk_gains_nothing_inside(self):
        """What the seal is for: a set-user-ID-root program and a file-capability program put
        into the volume after the container's walk (by the host here; a second container
        cannot make one) run inside without their privilege, the volume being nosuid (which
        ignores file capabilities too); on the host, where nothing is nosuid, the same files
        give root and the capability to anyone. A rewrite of such a file through a shared
        mapping keeps its bits (docs/oci.md, "The root"): the seal keeps the container from
        writing one on the host's disk, nosuid only from running one as it is."""
        self.install_probe()
        late = os.path.join(self.vol, "late")
        c = self.volume_config(["sh", "-c", "i=0; while [ ! -e /data/late/ready ] && "
                                "[ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done;"
                                " /data/late/suid ids; /data/late/capped ids"])
        c["process"]["user"] = {"uid": 1000, "gid": 1000}
        c["process"]["capabilities"] = {k: [] for k in ("bounding", "effective", "permitted")}
        self.write_config(c)
        pid = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        os.makedirs(late)
        probe = os.path.join(self.bundle, "rootfs", "bin", "attack")
        for name, mode in (("suid", 0o4755), ("capped", 0o755)):
            shutil.copy(probe, os.path.join(late, name))
            os.chmod(os.path.join(late, name), mode)
        os.setxattr(os.path.join(late, "capped"), "security.capability",
                    struct.pack("<5I", 0x02000001, 1 << 13, 0, 0, 0))  # CAP_NET_RAW, effective
        open(os.path.join(late, "ready"), "w").close()
        code = os.waitstatus_to_exitcode(self.wait(pid))
        out = self.output()
        self.assertEqual(code, 0, out)
        self.assertEqual(out, "euid=1000 CapEff=0000000000000000\n" * 2)
        host = [subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534",
                                "--clear-groups", os.path.join(late, name), "ids"],
                               capture_output=True, text=True).stdout
                for name in ("suid", "capped")]
        self.assertTrue(host[0].startswith("euid=0 "), host)  # and root's capabilities
        self.assertEqual(host[1], "euid=65534 CapEff=0000000000002000\n")

    def test_the_volume_is_nosuid_and_nodev(self):
        c = self.volume_config(["sh", "-c", "awk '$5 == \"/data\" { print $6 }' "
                                "/proc/self/mountinfo"])
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        opts = out.strip().split(",")
        self.assertIn("nosuid", opts)
        self.assertIn("nodev", opts)
        self.assertIn("idmapped", opts)


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class EngineVolume(BundleCase):
    """--idmap-volumes=engine on a bundle laid out as Docker's: <R>/vfs/dir/<id> its root."""
    WRITE = "(echo hi > /data/made) 2>/dev/null && echo written || echo refused"

    def setUp(self):
        super().setUp()
        self.data_root = os.path.join(self.tmp, "docker")
        self.rootfs = os.path.join(self.data_root, "vfs", "dir", "c0ffee")
        os.makedirs(os.path.dirname(self.rootfs))
        os.rename(os.path.join(self.bundle, "rootfs"), self.rootfs)
        self.vol = self.volume(self.data_root, "data")

    def volume(self, data_root, name):
        """<data_root>/volumes/<name>/_data, host root's, 0755, as Docker makes it."""
        path = os.path.join(data_root, "volumes", name, "_data")
        os.makedirs(path)
        os.chmod(path, 0o755)
        return path

    def volume_config(self, source):
        c = config(["sh", "-c", self.WRITE])
        c["root"] = {"path": self.rootfs, "readonly": True}
        c["mounts"].append({"destination": "/data", "type": "bind", "source": source,
                            "options": ["rbind"]})
        return c

    def test_written_as_host_root_with_the_option_only(self):
        self.assertEqual(self.run_container(self.volume_config(self.vol)), (0, "refused\n"))
        self.assertEqual(os.listdir(self.vol), [])
        self.oci_globals = ["--idmap-volumes=engine"]
        self.oci("delete", "c1")
        self.assertEqual(self.run_container(self.volume_config(self.vol)), (0, "written\n"))
        st = os.stat(os.path.join(self.vol, "made"))
        self.assertEqual((st.st_uid, st.st_gid), (0, 0))

    def test_a_volume_of_another_data_root_stays_plain(self):
        # the same layout below a directory that is not the data root this root is in
        other = self.volume(os.path.join(self.tmp, "other"), "data")
        self.oci_globals = ["--idmap-volumes", "engine"]
        self.assertEqual(self.run_container(self.volume_config(other)), (0, "refused\n"))
        self.assertEqual(os.listdir(other), [])
        # and a root that is not in a data root's layout proves none
        c = self.volume_config(self.vol)
        plain = os.path.join(self.tmp, "plain-root")
        os.rename(self.rootfs, plain)
        c["root"]["path"] = plain
        self.oci("delete", "c1")
        self.assertEqual(self.run_container(c), (0, "refused\n"))
        self.assertEqual(os.listdir(self.vol), [])

    def mount(self, *args):
        """mount ARGS... on the host, undone at the end; the test is skipped where it fails."""
        r = subprocess.run(["mount"] + list(args), capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest("cannot mount here: " + r.stderr)
        self.addCleanup(subprocess.run, ["umount", "-l", args[-1]])

    def test_a_volume_the_kernel_cannot_idmap_stays_plain_with_a_warning(self):
        # the engine's volumes on an overlay: the kernel has no idmapped mounts of overlayfs,
        # and nothing the config asked is refused
        layers = {n: os.path.join(self.tmp, n) for n in ("lower", "upper", "work")}
        for d in layers.values():
            os.mkdir(d)
        os.makedirs(os.path.join(layers["lower"], "data", "_data"))
        for d in layers.values():
            os.chmod(d, 0o755)
        self.mount("-t", "overlay", "overlay", "-o",
                   "lowerdir={lower},upperdir={upper},workdir={work}".format(**layers),
                   os.path.join(self.data_root, "volumes"))
        self.oci_globals = ["--idmap-volumes=engine"]
        self.assertEqual(self.run_container(self.volume_config(self.vol)), (0, "refused\n"))
        with open(self.log) as f:
            warnings = [json.loads(line)["msg"] for line in f if '"warning"' in line]
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn("--idmap-volumes=engine: a volume is bound as it is, not idmapped",
                      warnings[0])
        self.assertIn("/data", warnings[0])

    def test_a_mount_on_the_volumes_directory_stays_plain(self):
        # a local volume made with mount options has a mount there (here a bind of another
        # host directory, as `docker volume create -o type=none -o o=bind -o device=DIR`):
        # whatever it shows is not a directory the engine made
        other = os.path.join(self.tmp, "other")
        os.mkdir(other)
        os.chmod(other, 0o755)
        self.mount("--bind", other, self.vol)
        self.oci_globals = ["--idmap-volumes=engine"]
        self.assertEqual(self.run_container(self.volume_config(self.vol)), (0, "refused\n"))
        self.assertEqual(os.listdir(other), [])

    def test_other_values_refused(self):
        r = self.oci("--idmap-volumes=all", "list")
        self.assertNotEqual(r.returncode, 0)
        msg = self.log_errors()[-1]["msg"]
        for w in ("--idmap-volumes all", "give engine", "or none"):
            self.assertIn(w, msg)
        self.assertEqual(self.oci("--idmap-volumes=none", "list").returncode, 0)


if __name__ == "__main__":
    unittest.main()
