"""End to end: nsbox-oci's writable root (docs/oci.md, "The root"). With root.readonly false the
container's / is the bundle's root itself, through an idmapped bind: what the process writes at
the top of its root is in the bundle on the host, owned by the bundle's ids (the container's id
N is the bundle's host id N) while the process runs as an unprivileged host id; set-id modes are
refused there, and so are extended attribute writes (a file capability would be host root's),
by nsbox's seccomp filter, whatever seccomp profile the bundle brings; masked paths
inside the bundle are masked; root.readonly true keeps the image read-only, with nothing written
to the bundle."""
import os
import stat
import struct
import subprocess
import time
import unittest

from oci_bundle import (OCI, BundleCase, config, make_programs, require_runtime,
                        seccomp_filters)


def setUpModule():
    require_runtime()


# A bundle's own linux.seccomp, in the two shapes engines write: a deny-list (allow by default)
# and an allow-list (errno by default, Docker's shape, whose list has the xattr writes, and what
# init calls after loading it: sandbox/contain_calls.c). Neither may undo the writable root's
# refusals; each is a second filter, over nsbox's one.
ALLOW_BY_DEFAULT = {"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
                    "syscalls": [{"names": ["kexec_load", "open_by_handle_at"],
                                  "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}
ERRNO_BY_DEFAULT = {"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
                    "architectures": ["SCMP_ARCH_X86_64"],
                    "syscalls": [{"names": [
                        "setxattr", "lsetxattr", "fsetxattr", "setxattrat", "getxattr",
                        "read", "write", "readv", "writev", "pread64", "openat", "open", "close",
                        "fstat", "newfstatat", "stat", "lstat", "statx", "lseek", "mmap",
                        "munmap", "mprotect", "brk", "rt_sigaction", "rt_sigprocmask",
                        "rt_sigreturn", "ioctl", "access", "faccessat", "faccessat2", "execve",
                        "execveat", "exit", "exit_group", "wait4", "clone", "clone3", "fork",
                        "vfork", "getpid", "getppid", "getuid", "geteuid", "getgid", "getegid",
                        "gettid", "set_tid_address", "set_robust_list", "arch_prctl", "prctl",
                        "uname", "fcntl", "dup", "dup2", "dup3", "pipe", "pipe2", "getcwd",
                        "chdir", "getdents64", "prlimit64", "getrandom", "rseq", "futex",
                        "sigaltstack", "madvise", "poll", "ppoll", "select", "pselect6", "capset",
                        "sendmsg", "recvmsg", "setsid", "fchdir", "signalfd4", "kill", "pwrite64",
                        "close_range", "getresuid", "getresgid", "getgroups", "umask"],
                        "action": "SCMP_ACT_ALLOW"}]}


def host_uid(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[2])  # effective
    raise AssertionError(f"no Uid line for {pid}")


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class WritableRoot(BundleCase):
    TOOLS = BundleCase.TOOLS + ("chmod", "mkdir", "touch", "stat", "ls", "awk", "rm", "mv", "ln")

    def setUp(self):
        super().setUp()
        self.rootfs = os.path.join(self.bundle, "rootfs")

    def test_output_at_the_top_lands_in_the_bundle(self):
        # as runtime-tools' start and killsig: a file at the top of the root, read on the host
        code, out = self.run_container(config(
            ["sh", "-c", "echo process called > /output && mkdir /made && echo ok"]))
        self.assertEqual((code, out), (0, "ok\n"))
        path = os.path.join(self.rootfs, "output")
        with open(path) as f:
            self.assertEqual(f.read(), "process called\n")
        st, root = os.stat(path), os.stat(self.rootfs)
        # the bundle's owner (root here, as for most bundles), not an id of nsbox's range
        self.assertEqual((st.st_uid, st.st_gid), (root.st_uid, root.st_gid))
        self.assertTrue(os.path.isdir(os.path.join(self.rootfs, "made")))

    def test_ids_map_one_to_one_and_the_process_is_not_host_root(self):
        # bundle id N is the container's id N: a file of 1234's is 1234's inside, and what
        # uid 1234 writes is 1234's on the host; the process itself runs as nsbox's range
        os.chown(os.path.join(self.rootfs, "tmp"), 1234, 1234)
        c = config(["sh", "-c", "stat -c %u:%g /tmp; echo x > /tmp/mine; sleep 30"])
        c["process"]["user"] = {"uid": 1234, "gid": 1234}
        self.write_config(c)
        init = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        mine = os.path.join(self.rootfs, "tmp", "mine")
        for _ in range(3000):
            if os.path.exists(mine) and os.path.getsize(mine):
                break
            time.sleep(0.01)
        with open(f"/proc/{init}/task/{init}/children") as f:
            workload = int(f.read().split()[0])
        self.assertGreaterEqual(host_uid(workload), 65536)  # never a host id of the bundle's
        st = os.stat(mine)
        self.assertEqual((st.st_uid, st.st_gid), (1234, 1234))
        self.oci("kill", "c1", "KILL")
        self.wait(init)
        self.assertEqual(self.output(), "1234:1234\n")

    def test_set_id_modes_refused(self):
        # what the container's root makes in the bundle is host root's on disk: a set-user-ID
        # file would be a set-user-ID-root program on the host. nsbox's seccomp filter refuses
        # the modes (chmod, and creating with them)
        code, out = self.run_container(config(
            ["sh", "-c", "echo x > /prog; chmod 755 /prog && echo plain;"
             " chmod u+s /prog || echo refused-suid; chmod g+s /prog || echo refused-sgid;"
             " mkdir /d && chmod 2775 /d || echo refused-dir"]))
        self.assertEqual(code, 0, out)
        self.assertEqual([line for line in out.splitlines() if not line.startswith("chmod:")],
                         ["plain", "refused-suid", "refused-sgid", "refused-dir"])
        mode = os.stat(os.path.join(self.rootfs, "prog")).st_mode
        self.assertEqual(stat.S_IMODE(mode), 0o755)
        self.assertFalse(os.stat(os.path.join(self.rootfs, "d")).st_mode & (stat.S_ISUID |
                                                                           stat.S_ISGID))

    def filters_inside(self, c, script=""):
        """Run script, then print the process's Seccomp_filters, in a container of config c:
        the exit code, the script's output, and how many filters the container added to those
        this test process runs under (which nsbox-oci and the container inherit)."""
        c["process"]["args"] = ["sh", "-c", script +
                                "awk '/^Seccomp_filters:/ { print $2 }' /proc/self/status"]
        own = seccomp_filters()
        if own is None:
            self.skipTest("no Seccomp_filters in /proc/self/status (Linux 5.10 and later)")
        code, out = self.run_container(c)
        lines = out.splitlines()
        self.assertTrue(lines and lines[-1].isdigit(), out)
        return code, "".join(line + "\n" for line in lines[:-1]), int(lines[-1]) - own

    def test_one_seccomp_filter_with_a_writable_root(self):
        # the root's refusals are folded into nsbox's profile: one BPF program per system
        # call, as with a read-only root, not a second one stacked over it
        code, out, added = self.filters_inside(config([]), "echo x > /written && ")
        self.assertEqual((code, out), (0, ""))
        self.assertTrue(os.path.exists(os.path.join(self.rootfs, "written")))  # the bundle's
        self.assertEqual(added, 1)

    def test_one_seccomp_filter_with_a_read_only_root(self):
        c = config([], root={"path": "rootfs", "readonly": True})
        code, out, added = self.filters_inside(c, "(echo x > /written) 2>/dev/null; ")
        self.assertEqual((code, out), (0, ""))
        self.assertFalse(os.path.exists(os.path.join(self.rootfs, "written")))
        self.assertEqual(added, 1)

    def xattr_writes(self, seccomp=None):
        """attack xattr on a file of the writable root, as the container's root with
        CAP_SETFCAP, under the bundle's own linux.seccomp when given: what it printed, and the
        filters the container added."""
        self.install_probe()
        open(os.path.join(self.rootfs, "prog"), "w").close()
        c = config([])
        caps = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_SETFCAP"]
        c["process"]["capabilities"] = {k: caps for k in ("bounding", "effective", "permitted")}
        if seccomp:
            c["linux"]["seccomp"] = seccomp
        code, out, added = self.filters_inside(c, "attack xattr /prog; ")
        self.assertEqual(code, 0, out)
        self.assertEqual(os.listxattr(os.path.join(self.rootfs, "prog")), [])
        return out, added

    # by every call that writes one, setxattrat too (a number Debian 12's libseccomp does not
    # know: the filter has it from nsbox's own table)
    XATTR_REFUSED = "".join(f"{call} {name} EOPNOTSUPP\n"
                            for name in ("user.nsbox", "security.capability")
                            for call in ("setxattr", "lsetxattr", "fsetxattr", "setxattrat"))

    def test_file_capabilities_refused(self):
        # a file capability the container's root (with CAP_SETFCAP) set in the bundle would be
        # stored as host root's, effective for a host user who runs the file: extended
        # attribute writes are refused there (EOPNOTSUPP), user ones too (seccomp cannot tell),
        # by the container's one filter
        self.assertEqual(self.xattr_writes(), (self.XATTR_REFUSED, 1))

    def test_xattr_writes_refused_with_the_bundles_allow_by_default_seccomp(self):
        # the bundle's filter is loaded after nsbox's (docs/seccomp.md): two
        self.assertEqual(self.xattr_writes(ALLOW_BY_DEFAULT), (self.XATTR_REFUSED, 2))

    def test_xattr_writes_refused_with_the_bundles_errno_by_default_seccomp(self):
        # the bundle's list allows the writes: they stay refused, nsbox's filter answering
        # before it (the stricter answer of the two wins)
        self.assertEqual(self.xattr_writes(ERRNO_BY_DEFAULT), (self.XATTR_REFUSED, 2))

    def test_set_id_programs_cannot_be_rewritten(self):
        # the bundle's own set-id programs and those with a file capability are host root's:
        # written through a shared mapping, the kernel keeps their bits and capability (a
        # write(2) clears them), and the container's code would be a set-user-ID-root program
        # on the host. Each is bound read-only onto itself; a plain program stays writable
        self.install_probe()
        os.makedirs(os.path.join(self.rootfs, "usr", "lib", "deep"))
        files = {"suid": 0o4755, "sgid": 0o2755, "usr/lib/deep/suid": 0o4711,
                 "capped": 0o755, "plain": 0o755}
        make_programs(self.rootfs, files)
        os.link(os.path.join(self.rootfs, "suid"), os.path.join(self.rootfs, "usr", "suid-link"))
        c = config(["sh", "-c", "attack mmap-write /" + " /".join(list(files) + ["usr/suid-link"])
                    + "; rm /suid; mv /suid /moved; ln /suid /tmp/linked; true"])
        c["process"]["capabilities"] = {k: ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER",
                                            "CAP_FSETID"]
                                        for k in ("bounding", "effective", "permitted")}
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        lines = out.splitlines()
        self.assertEqual(lines[:6], ["/suid open EROFS", "/sgid open EROFS",
                                     "/usr/lib/deep/suid open EROFS", "/capped open EROFS",
                                     "/plain written", "/usr/suid-link open EROFS"])
        self.assertEqual(len(lines), 9, out)  # rm, mv and ln each refused
        for name, mode in files.items():
            path = os.path.join(self.rootfs, name)
            with open(path) as f:
                want = "nsboxnal\n" if name == "plain" else "original\n"
                self.assertEqual(f.read(), want, name)
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), mode, name)
        self.assertEqual(os.listxattr(os.path.join(self.rootfs, "capped")),
                         ["security.capability"])
        self.assertFalse(os.path.exists(os.path.join(self.rootfs, "moved")))
        self.assertFalse(os.path.exists(os.path.join(self.rootfs, "tmp", "linked")))

    def test_a_set_id_program_in_a_directory_the_walk_cannot_list_is_sealed(self):
        # a directory of an id the idmap does not map (70000) that others may search but not
        # list (0711): the seal's walk cannot read it, but the container reaches the set-id
        # program of host root's inside by its name, and would rewrite it through a shared
        # mapping; the directory is sealed read-only whole
        self.install_probe()
        dark = os.path.join(self.rootfs, "dark")
        os.makedirs(dark)
        with open(os.path.join(dark, "suid"), "w") as f:
            f.write("original\n")
        os.chmod(os.path.join(dark, "suid"), 0o4755)
        os.chown(dark, 70000, 70000)
        os.chmod(dark, 0o711)
        c = config(["sh", "-c", "attack mmap-write /dark/suid;"
                    " ls /dark 2>/dev/null || echo unlisted;"
                    " touch /dark/new 2>/dev/null || echo refused"])
        c["process"]["capabilities"] = {k: ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER",
                                            "CAP_FSETID"]
                                        for k in ("bounding", "effective", "permitted")}
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        self.assertEqual(out.splitlines(), ["/dark/suid open EROFS", "unlisted", "refused"])
        with open(os.path.join(dark, "suid")) as f:
            self.assertEqual(f.read(), "original\n")
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(dark, "suid")).st_mode), 0o4755)

    def test_names_the_container_wrote_reach_no_terminal_in_an_error(self):
        # The seal's walk names what it refuses (here: a directory deeper than it goes), and the
        # tree is the container's: a name with terminal controls and a newline, made in one run,
        # must not reach create's stderr as it is when the container is made again (`docker
        # start` passes it on), nor put a line of its own in a text --log.
        hostile = "\x1b]0;pwned\x07\n{\"level\":\"info\",\"msg\":\"forged\"}\u009b2Jx"
        octal = "".join("\\%03o" % b for b in hostile.encode())
        c = config(["sh", "-c", "p=/d; i=1; while [ $i -lt 256 ]; do p=$p/d; i=$((i+1)); done;"
                    " mkdir -p \"$p/$(printf '%s')\" && echo made" % octal])
        code, out = self.run_container(c)
        self.assertEqual((code, out), (0, "made\n"))
        self.assertEqual(self.oci("delete", "c1").returncode, 0)
        deep = os.path.join(self.rootfs, *["d"] * 256)
        self.assertEqual(os.listdir(deep), [hostile])  # the container's own name, as it wrote it
        with open(self.out, "w") as err:
            r = self.oci("create", "--bundle", self.bundle, "c1", stdout=subprocess.DEVNULL,
                         stderr=err)
        self.assertNotEqual(r.returncode, 0)
        with open(self.out, "rb") as f:
            said = f.read()
        self.assertIn(b"deeper than 256 directories", said)
        self.assertIn(b"?]0;pwned??{\"level\":\"info\",\"msg\":\"forged\"}?2Jx", said)
        self.assertEqual(said.count(b"\n"), 1, said)  # one line
        for bad in (b"\x1b", b"\x07", "\u009b".encode()):
            self.assertNotIn(bad, said)
        msg = self.log_errors()[-1]["msg"]
        self.assertIn("deeper than 256 directories", msg)
        for bad in ("\x1b", "\x07", "\n", "\u009b"):
            self.assertNotIn(bad, msg)

    def test_a_file_capability_of_a_root_id_outside_the_idmap_is_sealed(self):
        # a version 3 file capability whose root id (70000) the idmap does not map cannot be
        # read inside (EOVERFLOW), but a shared mapping's writes keep it as any other: the
        # program, the container's root's to open, is sealed all the same
        self.install_probe()
        path = os.path.join(self.rootfs, "capped")
        with open(path, "w") as f:
            f.write("original\n")
        os.chmod(path, 0o755)
        # CAP_NET_RAW, effective, for the user namespaces whose root is host 70000
        fcap = struct.pack("<6I", 0x03000001, 1 << 13, 0, 0, 0, 70000)
        os.setxattr(path, "security.capability", fcap)
        c = config(["attack", "mmap-write", "/capped"])
        c["process"]["capabilities"] = {k: ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER",
                                            "CAP_FSETID"]
                                        for k in ("bounding", "effective", "permitted")}
        self.assertEqual(self.run_container(c), (0, "/capped open EROFS\n"))
        with open(path) as f:
            self.assertEqual(f.read(), "original\n")
        self.assertEqual(os.getxattr(path, "security.capability"), fcap)

    def test_any_mount_inside_the_root(self):
        # the root is the bundle's: a tmpfs may go inside the image's directories, its mount
        # point made in the bundle (as runc makes it), and the root itself is not read-only
        c = config(["awk", "$5 == \"/\" || $5 == \"/etc/ssl\" { print $5, $6 }", "/proc/self/mountinfo"])
        c["mounts"].append({"destination": "/etc/ssl", "type": "tmpfs", "source": "tmpfs"})
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        lines = sorted(line.split() for line in out.splitlines())
        self.assertEqual(lines[0][0], "/")
        self.assertTrue(lines[0][1].startswith("rw,"), lines)
        self.assertEqual(lines[1], ["/etc/ssl", "rw,relatime"])
        self.assertTrue(os.path.isdir(os.path.join(self.rootfs, "etc", "ssl")))

    def test_a_tmpfs_inside_the_root_takes_its_propagation(self):
        # the tmpfs's own mount is made shared (mountinfo's optional field), not the mount
        # point's directory below it, which the kernel refuses (runtime-tools' mounts program)
        c = config(["awk", "$5 == \"/shared-tmp\" { print $7 }", "/proc/self/mountinfo"])
        c["mounts"].append({"destination": "/shared-tmp", "type": "tmpfs", "source": "tmpfs",
                            "options": ["rshared"]})
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        self.assertTrue(out.startswith("shared:"), out)

    def root_optional_fields(self, propagation):
        """linux.rootfsPropagation's outcome: the optional fields of / in mountinfo."""
        c = config(["awk", "$5 == \"/\" { for (i = 7; $i != \"-\"; i++) print $i }",
                    "/proc/self/mountinfo"])
        c["linux"]["rootfsPropagation"] = propagation
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        return sorted(field.split(":")[0] for field in out.split())

    def test_root_propagation_rshared_makes_the_root_shared(self):
        # in a peer group of the container's own (docs/decisions.md, "Mount propagation:
        # shared is the container's own"); a master too when the host's mount is shared
        self.assertIn("shared", self.root_optional_fields("rshared"))

    def test_root_propagation_private_has_no_peer_and_no_master(self):
        self.assertEqual(self.root_optional_fields("private"), [])

    def test_masked_paths_inside_the_bundle(self):
        # linux.maskedPaths of the bundle's own files and directories: /dev/null over a file,
        # an empty read-only tmpfs over a directory, after every mount
        with open(os.path.join(self.rootfs, "secret"), "w") as f:
            f.write("top secret\n")
        os.makedirs(os.path.join(self.rootfs, "private"))
        with open(os.path.join(self.rootfs, "private", "key"), "w") as f:
            f.write("key\n")
        c = config(["sh", "-c", "cat /secret; echo [; ls /private; echo ];"
                    " touch /private/x 2>/dev/null || echo read-only"])
        c["linux"]["maskedPaths"] = ["/secret", "/private", "/missing"]
        code, out = self.run_container(c)
        self.assertEqual((code, out), (0, "[\n]\nread-only\n"))
        with open(os.path.join(self.rootfs, "secret")) as f:  # the bundle's file unchanged
            self.assertEqual(f.read(), "top secret\n")
        self.assertEqual(os.listdir(os.path.join(self.rootfs, "private")), ["key"])

    def test_readonly_true_keeps_the_image_read_only(self):
        c = config(["sh", "-c", "echo x > /output || echo refused"],
                   root={"path": "rootfs", "readonly": True})
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        self.assertIn("refused", out)
        self.assertFalse(os.path.exists(os.path.join(self.rootfs, "output")))


if __name__ == "__main__":
    unittest.main()
