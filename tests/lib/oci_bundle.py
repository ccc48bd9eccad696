"""What the nsbox-oci tests share: a bundle with a busybox-static root, the runtime driven as
containerd's shim drives runc (its own --root, a JSON --log), the config they start from."""
import ctypes
import json
import os
import shutil
import struct
import subprocess
import tempfile
import unittest

from nsbox_test import NSBOX, Dirs, fds_at_3

BUSYBOX = "/bin/busybox"
OCI = os.path.join(os.path.dirname(NSBOX), "nsbox-oci") if NSBOX else None
PR_SET_CHILD_SUBREAPER = 36


def require_runtime():
    """Skips the module where nsbox-oci cannot run; the test process becomes a subreaper, as
    containerd's shim is, so that the pid-file process is its child."""
    if not os.path.exists(BUSYBOX):
        raise unittest.SkipTest("needs busybox-static (/bin/busybox)")
    if os.geteuid() != 0:
        raise unittest.SkipTest("nsbox-oci runs as root")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise unittest.SkipTest("cannot become a subreaper")


def no_idmapped_overlay_layers():
    """Why this kernel cannot make an engine's overlay root again over idmapped layers (docs/
    oci.md, "The root"), or None: overlayfs takes idmapped layers from Linux 5.19."""
    release = os.uname().release
    try:
        version = tuple(int(x) for x in release.split("-")[0].split(".")[:2])
    except ValueError:
        return None
    return f"needs Linux 5.19 (idmapped overlay layers), not {release}" \
        if version < (5, 19) else None


def config(args, **extra):
    c = {"ociVersion": "1.0.2",
         "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": args,
                     "env": ["PATH=/bin", "FOO=from-config"], "cwd": "/tmp",
                     "capabilities": {"bounding": ["CAP_CHOWN", "CAP_KILL"]},
                     "noNewPrivileges": True},
         "root": {"path": "rootfs", "readonly": False},
         "hostname": "ocibox",
         "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
         "linux": {"namespaces": [{"type": t} for t in
                                  ("pid", "network", "ipc", "uts", "mount")],
                   "resources": {"pids": {"limit": 64}}}}
    c.update(extra)
    return c


def shared_source(test, parent):
    """A host directory parent/vol (with vol/sub) that is a shared mount of its own, as a volume
    on a host whose / is shared (systemd's) is: bound onto itself and made shared, in the
    host's mount namespace; unmounted (with what is below it) at the test's end."""
    src = os.path.join(parent, "vol")
    os.makedirs(os.path.join(src, "sub"))
    subprocess.run(["mount", "--bind", src, src], check=True)
    test.addCleanup(subprocess.run, ["umount", "-R", "-l", src], check=False)
    subprocess.run(["mount", "--make-shared", src], check=True)
    return src


def make_programs(top, files, capped="capped"):
    """Files below top, each "original\n" with its mode (files: name to mode), and capped given
    a file capability (CAP_NET_RAW, effective; VFS_CAP_REVISION_2): what a writable root's or
    volume's seal must bind read-only (docs/oci.md, "The root")."""
    for name, mode in files.items():
        path = os.path.join(top, name)
        with open(path, "w") as f:
            f.write("original\n")
        os.chmod(path, mode)
    fcap = struct.pack("<5I", 0x02000001, 1 << 13, 0, 0, 0)
    os.setxattr(os.path.join(top, capped), "security.capability", fcap)


def seccomp_filters():
    """How many seccomp filters this process runs under (what a container it starts inherits
    besides its own): None before Linux 5.10, whose status has no Seccomp_filters line."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Seccomp_filters:"):
                return int(line.split()[1])
    return None


def is_mount_point(path):
    """Is path a mount point in this (the host's) mount namespace?"""
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


class BundleCase(unittest.TestCase):
    """A bundle per test (a busybox-static root, config.json written by the test), nsbox-oci
    with its own --root and JSON log, and every container deleted (--force) at the end."""
    TOOLS = ("sh", "echo", "sleep", "id", "hostname", "pwd", "cat", "true")

    def setUp(self):
        self.dirs = Dirs()
        self.addCleanup(self.dirs.cleanup)
        self.tmp = tempfile.mkdtemp(prefix="nsbox-oci-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.root = os.path.join(self.tmp, "state")
        self.log = os.path.join(self.tmp, "log.json")
        self.bundle = os.path.join(self.tmp, "bundle")
        rootfs = os.path.join(self.bundle, "rootfs")
        for d in ("bin", "tmp", "etc", "proc"):
            os.makedirs(os.path.join(rootfs, d))
        shutil.copy(BUSYBOX, os.path.join(rootfs, "bin", "busybox"))
        for tool in self.TOOLS:
            os.symlink("busybox", os.path.join(rootfs, "bin", tool))
        self.out = os.path.join(self.tmp, "out")
        self.pidfile = os.path.join(self.tmp, "pid")
        self.waited_pids = []
        self.oci_globals = []  # more global options, as an engine's runtimeArgs give them
        self.addCleanup(self.reap)

    def reap(self):
        # delete --force, not a kill of init: delete waits until the monitor has removed the sandbox
        for cid in os.listdir(self.root) if os.path.isdir(self.root) else []:
            self.oci("delete", "--force", cid)
        for pid in self.waited_pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass

    def install_probe(self):
        """The security tests' static probe (tests/security/attack.c) as the root's
        /bin/attack; the test is skipped where it was not built."""
        probes = os.environ.get("NSBOX_SECURITY_BIN_DIR")
        if not probes or not os.path.exists(os.path.join(probes, "attack")):
            self.skipTest("needs the security probes (run through ctest)")
        shutil.copy(os.path.join(probes, "attack"),
                    os.path.join(self.bundle, "rootfs", "bin", "attack"))

    def write_config(self, c):
        with open(os.path.join(self.bundle, "config.json"), "w") as f:
            json.dump(c, f)

    def oci(self, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
        env = self.dirs.env()
        return subprocess.run([OCI] + self.oci_globals + ["--root", self.root, "--log", self.log,
                                                          "--log-format", "json"] + list(args),
                              stdout=stdout, stderr=stderr, env=env, timeout=60)

    def oci_fds(self, fds, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, shell=()):
        """nsbox-oci with fds[i] as its descriptor 3 + i (for --preserve-fds); shell: a
        command line's prefix that execs its arguments (a bash -c that sets the environment)."""
        with fds_at_3(fds) as (prefix, keep):
            return subprocess.run(prefix + list(shell) + [OCI] + self.oci_globals +
                                  ["--root", self.root, "--log", self.log, "--log-format", "json"]
                                  + list(args),
                                  pass_fds=keep, stdout=stdout, stderr=stderr,
                                  env=self.dirs.env(), timeout=60)

    def create(self, cid="c1"):
        # the container inherits create's stdout and stderr (as runc's does): files, not pipes
        # that would stay open after create has exited
        with open(self.out, "w") as out:
            r = self.oci("create", "--bundle", self.bundle, "--pid-file", self.pidfile, cid,
                         stdout=out, stderr=out)
        self.assertEqual(r.returncode, 0, self.output())
        with open(self.pidfile) as f:
            text = f.read()
        self.assertRegex(text, r"^[0-9]+$")  # decimal, no newline
        pid = int(text)
        self.waited_pids.append(pid)
        return pid

    def state(self, cid="c1"):
        r = self.oci("state", cid)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def output(self):
        with open(self.out) as f:
            return f.read()

    def wait(self, pid):
        _, status = os.waitpid(pid, 0)
        self.waited_pids.remove(pid)
        return status

    def run_container(self, c):
        """create, start, wait: the container's exit code and output."""
        self.write_config(c)
        pid = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        return os.waitstatus_to_exitcode(self.wait(pid)), self.output()

    def create_refused(self, cid="c1"):
        """create, which must fail: the message it logged. Its streams are not the test's (a
        container made by mistake would hold a pipe open)."""
        r = self.oci("create", "--bundle", self.bundle, cid, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(os.path.exists(os.path.join(self.root, cid)))
        return self.log_errors()[-1]["msg"]

    def log_errors(self):
        with open(self.log) as f:
            return [json.loads(line) for line in f if line.strip()]
