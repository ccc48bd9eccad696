"""End to end: nsbox-oci's writable root on an engine's overlay (docs/oci.md, "The root").
Docker's overlay2, containerd's overlayfs snapshotter and Podman's overlay give the runtime a
bundle whose rootfs is an overlay mounted in the host's mount namespace. The kernel does not
idmap an overlay, so nsbox-oci makes the same overlay again over idmapped clones of its layers,
with the engine's upper directory: what the container writes lands there, owned on disk as the
engine would write it (container root as host 0), and the engine's own view of the overlay
sees it. Each test mounts such an overlay the way an engine does: two lower layers of host
root's files, the top one with a whiteout and an opaque directory (trusted.overlay.opaque, as
Docker's layers have them), an upper and a work directory, mounted on the bundle's rootfs."""
import ctypes
import json
import os
import shutil
import stat
import subprocess
import unittest

from oci_bundle import OCI, BundleCase, config, no_idmapped_overlay_layers, require_runtime


def setUpModule():
    require_runtime()
    why = no_idmapped_overlay_layers()
    if why:
        raise unittest.SkipTest(why)


def fs_mounted(target, options):
    """An overlay of options (key, value) each given to the kernel as it is (fsconfig, no
    mount(8) option string: a value may hold a comma); the error's text, or None."""
    libc = ctypes.CDLL(None, use_errno=True)
    # the new mount API's numbers are one on every architecture
    fsopen, fsconfig, fsmount, move_mount = 430, 431, 432, 429
    fs = libc.syscall(fsopen, b"overlay", 1)
    if fs < 0:
        return os.strerror(ctypes.get_errno())
    try:
        for key, value in options:
            if libc.syscall(fsconfig, fs, 1, key.encode(), value.encode(), 0) < 0:  # SET_STRING
                return f"{key}: {os.strerror(ctypes.get_errno())}"
        if libc.syscall(fsconfig, fs, 6, None, None, 0) < 0:  # CMD_CREATE
            return os.strerror(ctypes.get_errno())
        m = libc.syscall(fsmount, fs, 1, 0)
        if m < 0:
            return os.strerror(ctypes.get_errno())
        try:
            if libc.syscall(move_mount, m, b"", -100, target.encode(), 4) < 0:  # F_EMPTY_PATH
                return os.strerror(ctypes.get_errno())
        finally:
            os.close(m)
    finally:
        os.close(fs)
    return None


def mounted(*args, cwd=None):
    return subprocess.run(["mount", "-t", "overlay", "overlay", "-o"] + list(args), cwd=cwd,
                          stderr=subprocess.PIPE, text=True)


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class EngineOverlayRoot(BundleCase):
    TOOLS = BundleCase.TOOLS + ("chmod", "chown", "mkdir", "stat", "ls", "rm", "touch", "ln", "mv")

    def setUp(self):
        super().setUp()
        self.rootfs = os.path.join(self.bundle, "rootfs")
        lay = os.path.join(self.tmp, "layers")
        self.low, self.top = os.path.join(lay, "low"), os.path.join(lay, "top")
        self.upper, self.work = os.path.join(lay, "c1", "diff"), os.path.join(lay, "c1", "work")
        # the bottom layer: the bundle's busybox root, with host root's files and a set-id one
        os.makedirs(lay)
        os.rename(self.rootfs, self.low)
        os.makedirs(self.rootfs)
        for d in ("usr/local/bin", "usr/bin", "opaque"):
            os.makedirs(os.path.join(self.low, d))
        for name, text in (("etc/base", "base\n"), ("etc/gone", "gone\n"), ("etc/engine", "engine\n"),
                           ("etc/hidden", "hidden\n"), ("opaque/old", "old\n"),
                           ("usr/bin/suid", "original\n")):
            with open(os.path.join(self.low, name), "w") as f:
                f.write(text)
        os.chmod(os.path.join(self.low, "usr/bin/suid"), 0o4755)
        os.chmod(os.path.join(self.low, "tmp"), 0o1777)
        # the top layer: a whiteout of etc/hidden, an opaque directory over opaque/
        os.makedirs(os.path.join(self.top, "etc"))
        os.makedirs(os.path.join(self.top, "opaque"))
        os.mknod(os.path.join(self.top, "etc", "hidden"), stat.S_IFCHR | 0o600, os.makedev(0, 0))
        os.setxattr(os.path.join(self.top, "opaque"), "trusted.overlay.opaque", b"y")
        with open(os.path.join(self.top, "opaque", "new"), "w") as f:
            f.write("new\n")
        os.makedirs(self.upper)
        os.makedirs(self.work)

    def mount_engine(self, extra="", relative=False, links=None, at=None):
        """The engine's overlay on the bundle's rootfs (or at), in the host's mount namespace
        (where engines mount it), unmounted at the test's end. links: the lower layers named by
        symlinks in layers/l/ to these targets (top first), as Docker's and Podman's are;
        relative: the paths relative to layers/, from where it is mounted."""
        lay = os.path.dirname(self.low)
        lowers = [self.top, self.low]
        if links:
            os.makedirs(os.path.join(lay, "l"))
            lowers = [os.path.join(lay, "l", name) for name in ("TOP", "LOW")]
            for link, target in zip(lowers, links):
                os.symlink(target, link)
        if relative:  # Docker's form when the options are longer than a page
            names = ["l/TOP", "l/LOW"] if links else ["top", "low"]
            opts = f"lowerdir={':'.join(names)},upperdir=c1/diff,workdir=c1/work"
        else:
            opts = f"lowerdir={':'.join(lowers)},upperdir={self.upper},workdir={self.work}"
        at = at or self.rootfs
        r = mounted(opts + extra, at, cwd=lay)
        if r.returncode:
            self.skipTest(f"cannot mount an overlay here: {r.stderr.strip()}")
        self.addCleanup(subprocess.run, ["umount", "-l", at], check=False)

    def warnings(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(line)["msg"] for line in f
                    if line.strip() and json.loads(line)["level"] == "warning"]

    def upper_stat(self, rel):
        return os.lstat(os.path.join(self.upper, rel))

    def test_writes_land_in_the_engines_upper_directory(self):
        self.mount_engine(links=["../top", "../low"])  # Docker's l/ID -> ../ID/diff
        code, out = self.run_container(config(
            ["sh", "-c", "echo x > /etc/x && mkdir -p /usr/local/lib/py && echo m > "
             "/usr/local/lib/py/m.py && echo b >> /etc/base && rm /etc/gone && "
             "(cat /etc/hidden 2>/dev/null || echo hidden-by-whiteout) && ls /opaque && "
             "stat -c %u:%g /etc/base /bin/busybox && echo ok"]))
        self.assertEqual((code, out), (0, "hidden-by-whiteout\nnew\n0:0\n0:0\nok\n"))
        self.assertEqual(self.warnings(), [])
        # in the engine's upper directory, host root's as Docker writes them
        for rel, text in (("etc/x", "x\n"), ("usr/local/lib/py/m.py", "m\n"),
                          ("etc/base", "base\nb\n")):
            st = self.upper_stat(rel)
            self.assertEqual((st.st_uid, st.st_gid), (0, 0), rel)
            with open(os.path.join(self.upper, rel)) as f:
                self.assertEqual(f.read(), text, rel)
            with open(os.path.join(self.rootfs, rel)) as f:  # the engine's own view
                self.assertEqual(f.read(), text, rel)
        # the removal is a whiteout there, and the lower layer is untouched
        st = self.upper_stat("etc/gone")
        self.assertTrue(stat.S_ISCHR(st.st_mode) and st.st_rdev == 0, oct(st.st_mode))
        with open(os.path.join(self.low, "etc", "base")) as f:
            self.assertEqual(f.read(), "base\n")
        self.assertTrue(os.path.exists(os.path.join(self.low, "etc", "gone")))
        # the overlay's own work directory is inside the engine's, whose "work" the engine's
        # overlay still uses: it copies a lower file up afterwards as before
        self.assertTrue(os.path.isdir(os.path.join(self.work, "nsbox")))
        with open(os.path.join(self.rootfs, "etc", "engine"), "a") as f:
            f.write("by the engine\n")
        with open(os.path.join(self.upper, "etc", "engine")) as f:
            self.assertEqual(f.read(), "engine\nby the engine\n")

    def test_a_users_files_keep_its_id_and_the_root_is_an_overlay(self):
        # container id N is host id N on disk, as without nsbox; the root is an overlay,
        # writable, nosuid and nodev
        self.mount_engine()
        c = config(["sh", "-c", "id -u; echo u > /tmp/mine; stat -c %u /tmp/mine;"
                    " cat /proc/self/mountinfo"])
        c["process"]["user"] = {"uid": 1234, "gid": 1234}
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        lines = out.splitlines()
        self.assertEqual(lines[:2], ["1234", "1234"])
        root = [line.split() for line in lines[2:] if line.split()[4:5] == ["/"]]
        self.assertEqual(len(root), 1, out)
        opts, fstype = root[0][5].split(","), root[0][root[0].index("-") + 1]
        self.assertEqual(fstype, "overlay")
        self.assertIn("rw", opts)
        self.assertTrue({"nosuid", "nodev"} <= set(opts), opts)
        st = self.upper_stat("tmp/mine")
        self.assertEqual((st.st_uid, st.st_gid), (1234, 1234))

    def test_set_id_and_file_capabilities_refused(self):
        # the container's root writes host root's files: set-id modes and extended attributes
        # are refused there, and a lower layer's set-id program cannot be rewritten through a
        # shared mapping (it is sealed read-only: the kernel would keep its bits)
        self.probe_in_layer()
        self.mount_engine()
        c = config(["sh", "-c", "echo x > /prog; chmod 755 /prog && echo plain;"
                    " chmod u+s /prog || echo refused-suid; chmod g+s /prog || echo refused-sgid;"
                    " attack xattr /prog; attack mmap-write /usr/bin/suid; rm /usr/bin/suid;"
                    " chown 65536 /prog || echo unmapped; true"])
        caps = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_SETFCAP"]
        c["process"]["capabilities"] = {k: caps for k in ("bounding", "effective", "permitted")}
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        lines = [line for line in out.splitlines()
                 if not line.startswith(("chmod:", "rm:", "chown:"))]
        self.assertEqual(lines[:3], ["plain", "refused-suid", "refused-sgid"], out)
        self.assertIn("setxattr security.capability EOPNOTSUPP", lines)
        self.assertIn("/usr/bin/suid open EROFS", lines)
        self.assertEqual(lines[-1], "unmapped")
        st = self.upper_stat("prog")
        self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o755, 0))
        self.assertEqual(os.listxattr(os.path.join(self.upper, "prog")), [])
        # the set-id program is neither copied up nor removed
        self.assertFalse(os.path.lexists(os.path.join(self.upper, "usr", "bin", "suid")))
        with open(os.path.join(self.rootfs, "usr", "bin", "suid")) as f:
            self.assertEqual(f.read(), "original\n")

    def probe_in_layer(self):
        """The security tests' static probe (tests/security/attack.c) as the lower layer's
        /bin/attack; the test is skipped where it was not built."""
        probes = os.environ.get("NSBOX_SECURITY_BIN_DIR")
        if not probes or not os.path.exists(os.path.join(probes, "attack")):
            self.skipTest("needs the security probes (run through ctest)")
        shutil.copy(os.path.join(probes, "attack"), os.path.join(self.low, "bin", "attack"))

    def set_id_in_upper(self):
        """The upper directory's files that would run set-user-ID or set-group-ID."""
        found = []
        for d, _, files in os.walk(self.upper):
            for name in files:
                mode = os.lstat(os.path.join(d, name)).st_mode
                if stat.S_ISREG(mode) and (mode & stat.S_ISUID or (
                        mode & stat.S_ISGID and mode & stat.S_IXGRP)):
                    found.append(os.path.relpath(os.path.join(d, name), self.upper))
        return found

    def test_no_call_that_makes_a_file_gives_it_a_set_id_mode(self):
        # open, openat, creat, mknod, mknodat and O_TMPFILE with a set-id mode, openat2, every
        # chmod: in the overlay root each would leave a set-id program of host root's in the
        # engine's upper directory, which a later runc container of a commit of it would run
        self.probe_in_layer()
        self.mount_engine()
        c = config(["attack", "setid", "/"])
        caps = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_MKNOD"]
        c["process"]["capabilities"] = {k: caps for k in ("bounding", "effective", "permitted")}
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        probes = [json.loads(line) for line in out.splitlines()]
        self.assertGreaterEqual(len(probes), 13, out)
        self.assertEqual([p for p in probes if not p["blocked"]], [])
        self.assertEqual(self.set_id_in_upper(), [])

    def test_a_lower_set_id_program_stays_sealed_by_every_name_and_move(self):
        # a lower layer's set-id program reached by a second name (a hard link), in a directory
        # only its owner may list (the seal's walk reads it all the same), and after its
        # directory is renamed (redirect_dir=on: the seal's bind moves with it); none is copied
        # up writable. A set-group-ID file without group execute is no program: it may be
        # copied up, but never given group execute (the mode would carry the bit)
        self.probe_in_layer()
        os.makedirs(os.path.join(self.low, "opt"))
        os.link(os.path.join(self.low, "usr/bin/suid"), os.path.join(self.low, "opt/suid2"))
        priv = os.path.join(self.low, "priv")
        os.makedirs(priv)
        shutil.copy(os.path.join(self.low, "usr/bin/suid"), os.path.join(priv, "suid"))
        os.chmod(os.path.join(priv, "suid"), 0o4755)
        os.chown(priv, 1000, 1000)
        os.chmod(priv, 0o111)
        with open(os.path.join(self.low, "usr/bin/sgid"), "w") as f:
            f.write("original\n")
        os.chmod(os.path.join(self.low, "usr/bin/sgid"), 0o2745)
        self.mount_engine(",redirect_dir=on")
        c = config(["sh", "-c", "ln /opt/suid2 /tmp/l || echo no-link;"
                    " attack mmap-write /opt/suid2 /priv/suid /usr/bin/sgid;"
                    " chmod g+x /usr/bin/sgid || echo refused-gx;"
                    " mv /usr/bin /usr/b2 && attack mmap-write /usr/b2/suid"])
        caps = ["CAP_CHOWN", "CAP_FOWNER", "CAP_FSETID"]  # the owner's powers, not DAC's
        c["process"]["capabilities"] = {k: caps for k in ("bounding", "effective", "permitted")}
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        lines = [line for line in out.splitlines() if not line.startswith(("ln:", "chmod:"))]
        self.assertEqual(lines, ["no-link", "/opt/suid2 open EROFS", "/priv/suid open EROFS",
                                 "/usr/bin/sgid written", "refused-gx",
                                 "/usr/b2/suid open EROFS"], out)
        self.assertEqual(self.set_id_in_upper(), [])
        self.assertEqual(stat.S_IMODE(self.upper_stat("usr/b2/sgid").st_mode), 0o2745)
        with open(os.path.join(self.low, "usr/bin/suid")) as f:
            self.assertEqual(f.read(), "original\n")

    # The seal of this root takes its candidates from a walk of the layer directories and the
    # upper one (rootfs/setid_layers.h), checked in the merged view: each test below puts a
    # program where a list that left out a layer, a kind of entry or a path form would miss it.

    def program(self, path, mode=0o4755):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("original\n")
        os.chmod(path, mode)

    def test_the_seal_reaches_every_layers_programs_and_the_uppers(self):
        # programs of the bottom layer, of the top one (a file capability), of the upper
        # directory (an earlier run's: a restarted container's writes are there); a bottom
        # program hidden by the upper's plain file of the same name is no program any more
        self.probe_in_layer()
        self.program(os.path.join(self.top, "opt/capped"), 0o755)
        # CAP_NET_RAW, effective (VFS_CAP_REVISION_2), as setcap writes it
        os.setxattr(os.path.join(self.top, "opt/capped"), "security.capability",
                    bytes.fromhex("01000002" "00200000" "00000000" "00000000" "00000000"))
        self.program(os.path.join(self.upper, "usr/local/bin/mine"))
        self.program(os.path.join(self.low, "usr/bin/replaced"))
        self.program(os.path.join(self.upper, "usr/bin/replaced"), 0o755)
        self.mount_engine()
        code, out = self.run_container(config(
            ["attack", "mmap-write", "/usr/bin/suid", "/opt/capped", "/usr/local/bin/mine",
             "/usr/bin/replaced"]))
        self.assertEqual(code, 0, out)
        self.assertEqual(out.splitlines(), [
            "/usr/bin/suid open EROFS", "/opt/capped open EROFS",
            "/usr/local/bin/mine open EROFS", "/usr/bin/replaced written"], out)
        with open(os.path.join(self.upper, "usr/local/bin/mine")) as f:
            self.assertEqual(f.read(), "original\n")

    def test_a_layer_directory_the_container_cannot_list_is_sealed_whole(self):
        # owned by ids the idmap does not map, searchable only: the merged root's walk could
        # not list it, and seals it whole; so must the seal from the layers
        self.probe_in_layer()
        dark = os.path.join(self.top, "dark")
        self.program(os.path.join(dark, "suid"))
        os.chown(dark, 70000, 70000)
        os.chmod(dark, 0o711)
        self.mount_engine()
        code, out = self.run_container(config(
            ["sh", "-c", "attack mmap-write /dark/suid; "
             "grep -c ' /dark ' /proc/self/mountinfo"]))
        self.assertEqual(code, 0, out)
        self.assertEqual(out.splitlines(), ["/dark/suid open EROFS", "1"], out)

    def test_a_directory_renamed_by_a_redirect_keeps_its_programs_sealed(self):
        # redirect_dir=on: the engine's container renamed /usr/bin (its upper directory has
        # usr/b2 pointing at the layer's usr/bin): the program shows at a path no layer has
        self.probe_in_layer()
        self.mount_engine(",redirect_dir=on")
        os.rename(os.path.join(self.rootfs, "usr/bin"), os.path.join(self.rootfs, "usr/b2"))
        self.assertTrue(os.getxattr(os.path.join(self.upper, "usr/b2"),
                                    "trusted.overlay.redirect"))
        code, out = self.run_container(config(["attack", "mmap-write", "/usr/b2/suid"]))
        self.assertEqual((code, out), (0, "/usr/b2/suid open EROFS\n"))

    def test_a_filesystem_mounted_in_a_layer_does_not_hide_its_programs(self):
        # the overlay sees a layer's own directories, not what the host mounted on them: a
        # walk that entered the host's mount would see its empty directory instead
        self.probe_in_layer()
        self.mount_engine()
        over = os.path.join(self.low, "usr/bin")
        self.assertEqual(subprocess.run(["mount", "-t", "tmpfs", "tmpfs", over]).returncode, 0)
        self.addCleanup(subprocess.run, ["umount", "-l", over], check=False)
        code, out = self.run_container(config(["attack", "mmap-write", "/usr/bin/suid"]))
        self.assertEqual((code, out), (0, "/usr/bin/suid open EROFS\n"))

    def sealed(self, c):
        """The container's mount points but nsbox's own: what its root's seal bound."""
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        points = {line.split()[4] for line in out.splitlines()}
        return sorted(p for p in points if p != "/" and not p.startswith(("/proc", "/dev", "/sys")))

    def test_the_layers_seal_binds_what_the_merged_walk_binds(self):
        # the same tree as an overlay (programs in each layer and the upper, hidden by a
        # whiteout, by an opaque directory, replaced, hard-linked, in directories the container
        # may not list) and as a plain directory (a copy of the overlay's view, sealed by the
        # walk of the whole root): the same binds
        for rel in ("usr/bin/gone", "opaque/old-suid", "usr/bin/replaced", "deep/a/b/c/suid"):
            self.program(os.path.join(self.low, rel))
        self.program(os.path.join(self.low, "usr/bin/sgid"), 0o2755)
        self.program(os.path.join(self.low, "usr/bin/sgid-noexec"), 0o2745)
        os.link(os.path.join(self.low, "usr/bin/suid"), os.path.join(self.low, "usr/hard"))
        os.makedirs(os.path.join(self.top, "usr/bin"))
        os.mknod(os.path.join(self.top, "usr/bin/gone"), stat.S_IFCHR | 0o600, os.makedev(0, 0))
        for d, owner, mode in (("dark", 70000, 0o711), ("mine", 1000, 0o700),
                               ("open", 70000, 0o755)):
            self.program(os.path.join(self.top, d, "suid"))
            os.chown(os.path.join(self.top, d), owner, owner)
            os.chmod(os.path.join(self.top, d), mode)
        self.program(os.path.join(self.top, "opt/capped"), 0o644)
        os.setxattr(os.path.join(self.top, "opt/capped"), "security.capability",
                    bytes.fromhex("01000002" "00200000" "00000000" "00000000" "00000000"))
        self.program(os.path.join(self.upper, "usr/local/bin/mine"))
        self.program(os.path.join(self.upper, "usr/bin/replaced"), 0o755)
        self.mount_engine()
        plain = os.path.join(self.bundle, "plain")
        subprocess.run(["cp", "-a", self.rootfs, plain], check=True)
        show = ["cat", "/proc/self/mountinfo"]
        by_layers = self.sealed(config(show))
        self.oci("delete", "--force", "c1")
        c = config(show)
        c["root"]["path"] = "plain"
        by_walk = self.sealed(c)
        self.assertEqual(by_layers, by_walk)
        self.assertEqual(by_layers, ["/dark", "/deep/a/b/c/suid", "/mine/suid", "/open/suid",
                                     "/opt/capped", "/usr/bin/sgid", "/usr/bin/suid",
                                     "/usr/hard", "/usr/local/bin/mine"])

    def test_root_readonly_decides(self):
        # root.readonly true: the image seen read-only, nothing in the upper directory;
        # false on the same overlay: written there
        self.mount_engine()
        c = config(["sh", "-c", "echo x > /etc/x || echo refused"],
                   root={"path": "rootfs", "readonly": True})
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        self.assertIn("refused", out)
        self.assertEqual(os.listdir(self.upper), [])
        self.oci("delete", "c1")
        c["root"]["readonly"] = False
        self.assertEqual(self.run_container(c), (0, ""))
        with open(os.path.join(self.upper, "etc", "x")) as f:
            self.assertEqual(f.read(), "x\n")

    def read_only_with_warning(self):
        code, out = self.run_container(config(["sh", "-c", "echo x > /etc/x || echo refused"]))
        self.assertEqual(code, 0, out)
        self.assertIn("refused", out)
        self.assertEqual(os.listdir(self.upper), [])
        warnings = self.warnings()
        self.assertEqual(len(warnings), 1, warnings)
        return warnings[0]

    def test_layer_paths_are_read_through_the_mount_tables_escapes(self):
        # a space, a comma and an equals sign in the layers' paths (the mount table escapes the
        # first two, \040 and \054), and a colon in a lowerdir+ one (which that form keeps
        # as it is, one layer): each read back as the path it is, the writes in that upper
        lay = os.path.dirname(self.low)
        odd = os.path.join(lay, "a b,c=d:e")
        for d in ("diff", "work"):
            os.makedirs(os.path.join(odd, d))
        low = os.path.join(lay, "lo w,x=y:z")
        os.rename(self.low, low)
        why = fs_mounted(self.rootfs, [("lowerdir+", self.top), ("lowerdir+", low),
                                       ("upperdir", odd + "/diff"), ("workdir", odd + "/work")])
        if why:
            self.skipTest(f"cannot mount an overlay here: {why}")
        self.addCleanup(subprocess.run, ["umount", "-l", self.rootfs], check=False)
        c = config(["sh", "-c", "echo x > /etc/x && cat /etc/base && ls /opaque"])
        self.assertEqual(self.run_container(c), (0, "base\nnew\n"))
        self.assertEqual(self.warnings(), [])
        with open(os.path.join(odd, "diff", "etc", "x")) as f:
            self.assertEqual(f.read(), "x\n")

    def test_relative_paths_of_another_shape_keep_the_root_read_only(self):
        # relative paths, mounted elsewhere than at ID/merged of the directory they are
        # relative to: the mount table does not say relative to what, so nothing is guessed
        self.mount_engine(relative=True)
        msg = self.read_only_with_warning()
        self.assertIn("lowerdir top is relative", msg)
        self.assertIn("read-only", msg)

    def test_dockers_relative_form_is_read_from_its_storage_directory(self):
        # mounted from the storage directory D at D/ID/merged, with ID/diff, ID/work and l/
        # links (Docker's form for an image of many layers): the paths are read from D, once
        # the upper directory D/ID/diff is the overlay's own
        merged = os.path.join(os.path.dirname(self.upper), "merged")
        os.makedirs(merged)
        self.mount_engine(relative=True, links=["../top", "../low"], at=merged)
        c = config(["sh", "-c", "echo x > /etc/x && ls /opaque"], root={"path": merged})
        self.assertEqual(self.run_container(c), (0, "new\n"))
        self.assertEqual(self.warnings(), [])
        with open(os.path.join(self.upper, "etc", "x")) as f:
            self.assertEqual(f.read(), "x\n")

    def test_relative_paths_that_lead_elsewhere_keep_the_root_read_only(self):
        # the same shape at another storage directory's ID/merged: read from there, the paths
        # lead to its own ID/diff, not the overlay's upper directory, and nothing is used
        other = os.path.join(self.tmp, "other")
        for d in ("l/TOP", "l/LOW", "c1/diff", "c1/work", "c1/merged"):
            os.makedirs(os.path.join(other, d))
        merged = os.path.join(other, "c1", "merged")
        self.mount_engine(relative=True, links=["../top", "../low"], at=merged)
        code, out = self.run_container(config(["sh", "-c", "echo x > /etc/x || echo refused"],
                                              root={"path": merged}))
        self.assertEqual(code, 0, out)
        self.assertIn("refused", out)
        self.assertEqual(os.listdir(self.upper), [])
        self.assertEqual(os.listdir(os.path.join(other, "c1", "work")), [])
        (msg,) = self.warnings()
        self.assertIn(f"its relative paths, read from {other}", msg)
        self.assertIn("do not lead to its upper directory", msg)

    def test_a_layer_link_out_of_the_engines_directory_is_not_followed(self):
        # a layer's short link is followed only beneath the directory above its own (the
        # engine's storage): one that leads elsewhere on the host keeps the root read-only
        self.mount_engine(links=["../top", self.low])
        msg = self.read_only_with_warning()
        self.assertIn("lowerdir " + os.path.dirname(self.low) + "/l/LOW", msg)
        self.assertIn("a symlink out of the directory above it", msg)

    def test_an_upper_directory_through_a_symlink_is_not_followed(self):
        # the upper directory is opened with no symlink on the way: one that the mount
        # followed (the engine's diff a link to a directory elsewhere) keeps the root read-only
        real = os.path.join(self.tmp, "elsewhere")
        os.rename(self.upper, real)
        os.symlink(real, self.upper)
        self.mount_engine()
        code, out = self.run_container(config(["sh", "-c", "echo x > /etc/x || echo refused"]))
        self.assertEqual(code, 0, out)
        self.assertIn("refused", out)
        self.assertEqual(os.listdir(real), [])
        (msg,) = self.warnings()
        self.assertIn(f"upperdir {self.upper} (a symlink)", msg)

    def test_an_upper_directory_path_that_leads_elsewhere_is_not_used(self):
        # the mount table keeps the paths the engine mounted with: where the upper directory's
        # path leads to another directory (renamed, or mounted over, since), the container's
        # writes would land in that host directory, outside the engine's upper one
        self.mount_engine()
        real = self.upper + "-real"
        os.rename(self.upper, real)
        os.makedirs(self.upper)
        msg = self.read_only_with_warning()
        self.assertEqual(os.listdir(real), [])
        self.assertEqual(os.listdir(self.work), ["work"])
        self.assertIn(f"its upperdir {self.upper} is not the overlay's upper directory", msg)

    def test_index_on_keeps_the_root_read_only(self):
        # the kernel lends an upper directory to one overlay with an index at a time
        self.mount_engine(",index=on")
        msg = self.read_only_with_warning()
        self.assertIn("index=on", msg)


if __name__ == "__main__":
    unittest.main()
