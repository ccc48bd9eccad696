"""Private container engines for the tests and the benchmark of nsbox-oci (docs/oci.md): Debian's
dockerd (docker.io) and podman, each with its own roots, socket, configuration and cgroup
parent, so that no engine of the machine's own is used or touched and nothing of ours is left.

Dockerd runs in a network and a mount namespace made for it (`unshare --net --mount`): its
bridge, veths and addresses, and the mounts of its containers, live and die there; it has no
iptables rules to write (--iptables=false), so the host's ruleset is never in reach. Its
managed containerd (started by dockerd under the private exec root) serves `ctr` too.
Everything is started here and ended here by pid; the clients are Debian's /usr/bin/docker and
/usr/bin/podman, named by path (another docker client may come first on PATH)."""
import json
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import unittest

import oci_images
from nsbox_test import Dirs

DOCKERD = "/usr/sbin/dockerd"
DOCKER = "/usr/bin/docker"
PODMAN = "/usr/bin/podman"
CTR = "/usr/bin/ctr"
BUSYBOX = "/bin/busybox"
APPLETS = ("sh", "echo", "id", "sleep", "cat", "ip", "true", "tty", "test", "ls", "hostname")
IMAGE = "nsbox-test/busybox:1"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def missing(*paths):
    """Why an engine cannot run here (a reason for skipTest), or None."""
    if os.geteuid() != 0:
        return "the engines run as root"
    if not os.path.exists(BUSYBOX):
        return "needs busybox-static (/bin/busybox) for the test image"
    for p in paths:
        if not os.path.exists(p):
            return f"needs {p} (scripts/install-deps.sh installs Debian's docker.io and podman)"
    return None


def skip_module_unless(oci, *paths):
    """setUpModule of a test module that drives an engine: skip it, with the reason, when the
    engine or the nsbox-oci build (oci) is not here."""
    why = missing(*paths)
    if why:
        raise unittest.SkipTest(why)
    if not oci or not os.path.exists(oci):
        raise unittest.SkipTest("NSBOX_BIN is not set (run through ctest)")


def busybox_archive(path, tag=IMAGE, more=()):
    """A `docker save` archive of a one-layer image: /bin/busybox and its applets, /etc, /tmp;
    more: layers above it (oci_images.tar_bytes's)."""
    with open(BUSYBOX, "rb") as f:
        bb = f.read()
    layer = oci_images.tar_bytes(
        [("bin", b"", 0o755, tarfile.DIRTYPE), ("bin/busybox", bb, 0o755)] +
        [("bin/" + a, b"", 0o777, tarfile.SYMTYPE, "busybox") for a in APPLETS] +
        [("etc", b"", 0o755, tarfile.DIRTYPE), ("tmp", b"", 0o1777, tarfile.DIRTYPE)])
    oci_images.write_docker_save(path, layers=[layer, *more], tag=tag)


def host_root_mapped(uid_map):
    """Whether a /proc/PID/uid_map text maps any id onto the host's root (uid 0)."""
    for line in uid_map.splitlines():
        inside, outside, count = (int(x) for x in line.split())
        if outside == 0 and count > 0:
            return True
    return False


def remove_cgroup(name):
    """The cgroup `name` (a top-level one of ours) and what is below it, in every hierarchy."""
    for top in ["/sys/fs/cgroup"] + [os.path.join("/sys/fs/cgroup", h)
                                     for h in os.listdir("/sys/fs/cgroup")]:
        base = os.path.join(top, name)
        if not os.path.isdir(base):
            continue
        for d, _, _ in sorted(os.walk(base), key=lambda w: -w[0].count("/")):
            try:
                os.rmdir(d)
            except OSError:
                pass


# What containerd's shims and dockerd make below /run whatever their roots say: the shims'
# sockets and fifos, runc's root (/run/containerd/runc/NAMESPACE), dockerd's plugin directory.
RUN_DIRS = ("/run/containerd", "/run/containerd/fifo", "/run/containerd/s",
            "/run/containerd/runc", "/run/docker", "/run/docker/plugins")


def absent(paths):
    """Those of paths that are not there: what an engine about to start may make."""
    return [p for p in paths if not os.path.lexists(p)]


def remove_made(paths):
    """The directories of paths (absent's, once our engine has ended) that are empty, deepest
    first: an engine of another run at once keeps its own, which are not empty."""
    for p in sorted(paths, key=lambda p: -p.count("/")):
        try:
            os.rmdir(p)
        except OSError:
            pass


def unmount_below(d):
    """Lazily unmount whatever an engine left mounted below d (deepest first)."""
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    for p in sorted((p for p in points if p == d or p.startswith(d + "/")), reverse=True):
        subprocess.run(["umount", "-l", p], capture_output=True)


def _pids_naming(d):
    """Processes whose command line names directory d: what an engine of ours left running."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if d.encode() in f.read():
                    out.append(int(pid))
        except OSError:
            pass
    return [p for p in out if p != os.getpid()]


def _running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _end(pid, grace=20):
    """SIGTERM, then SIGKILL after grace seconds: one process of ours (not our child), by
    pid."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _running(pid):
        os.kill(pid, signal.SIGKILL)


def _load(d, load):
    """The test's busybox image, written in d and loaded by load(archive): AssertionError with
    the engine's words when it fails."""
    archive = os.path.join(d, "image.tar")
    busybox_archive(archive)
    r = load(archive)
    os.unlink(archive)
    if r.returncode != 0:
        raise AssertionError(f"load of {IMAGE}: {r.stderr}")


class Dockerd:
    """A dockerd of our own. runtimes: {name: path} added with --add-runtime, or {name: (path,
    args)}: each then in its daemon.json with args as its runtimeArgs, as an administrator
    registers a runtime's options (--add-runtime has no way to give them); env: the
    environment of dockerd, its containerd, shims and runtimes (nsbox's directories); storage:
    its storage driver (vfs: directories; overlay2: Docker's default)."""

    def __init__(self, runtimes, env=None, hide_cgroup2=False, storage="vfs"):
        self.d = tempfile.mkdtemp(prefix="nsbox-dockerd-")
        self.sock = os.path.join(self.d, "docker.sock")
        self.cgroup_parent = f"nsbox-test-docker-{os.getpid()}"
        self.proc = None
        self.run_made = absent(RUN_DIRS)
        cfg = os.path.join(self.d, "daemon.json")
        in_file = any(not isinstance(v, str) for v in runtimes.values())
        with open(cfg, "w") as f:  # not /etc/docker/daemon.json
            json.dump({"runtimes": {
                name: {"path": v, "runtimeArgs": []} if isinstance(v, str) else
                {"path": v[0], "runtimeArgs": list(v[1])}
                for name, v in runtimes.items()}} if in_file else {}, f)
        args = [DOCKERD, "--config-file", cfg, "--data-root", os.path.join(self.d, "data"),
                "--exec-root", os.path.join(self.d, "exec"),
                "--pidfile", os.path.join(self.d, "docker.pid"), "-H", "unix://" + self.sock,
                "--storage-driver", storage, "--iptables=false", "--ip-forward=false",
                "--ip-masq=false", "--userland-proxy=false",
                "--exec-opt", "native.cgroupdriver=cgroupfs",
                "--cgroup-parent", "/" + self.cgroup_parent]
        for name, path in runtimes.items() if not in_file else ():
            args += ["--add-runtime", f"{name}={path}"]
        self.log = open(os.path.join(self.d, "dockerd.log"), "w")
        env = dict(env or {"PATH": PATH})
        prep = "ip link set lo up"
        if hide_cgroup2 and os.path.ismount("/sys/fs/cgroup/unified"):
            # crun refuses a hybrid host whose cgroup2 mount has controllers; without that
            # mount (in dockerd's mount namespace only) every runtime sees cgroup v1 alone
            prep += " && umount /sys/fs/cgroup/unified"
        try:
            self.proc = subprocess.Popen(
                ["unshare", "--net", "--mount", "--propagation", "private", "--",
                 "sh", "-c", prep + ' && exec "$@"', "sh"] + args,
                stdout=self.log, stderr=self.log, env=env, start_new_session=True)
            self._wait_up()
        except BaseException:
            self.stop()
            raise

    def _wait_up(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            if os.path.exists(self.sock) and self.docker("version").returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("the private dockerd did not start:\n" + self.log_tail())

    def log_tail(self, n=20):
        with open(os.path.join(self.d, "dockerd.log")) as f:
            return "".join(f.readlines()[-n:])

    def docker(self, *args, timeout=120, **kw):
        return subprocess.run([DOCKER, "-H", "unix://" + self.sock] + list(args),
                              capture_output=True, text=True, timeout=timeout,
                              env={"PATH": PATH, "HOME": self.d}, **kw)

    def load_busybox(self):
        """docker load of the test's busybox image (busybox_archive)."""
        _load(self.d, lambda archive: self.docker("load", "-i", archive))

    @property
    def containerd_sock(self):
        """The socket of dockerd's own containerd, for `ctr --address`."""
        return os.path.join(self.d, "exec", "containerd", "containerd.sock")

    def ctr(self, namespace, *args, timeout=120):
        return subprocess.run([CTR, "--address", self.containerd_sock, "-n", namespace] +
                              list(args), capture_output=True, text=True, timeout=timeout)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            ids = self.docker("ps", "-aq").stdout.split()
            if ids:
                self.docker("rm", "-f", *ids)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # what outlived dockerd (its containerd, a shim): ours, since it names our directory
        for pid in _pids_naming(self.d):
            _end(pid, grace=5)
        if getattr(self, "log", None):
            self.log.close()
        remove_cgroup(self.cgroup_parent)
        unmount_below(self.d)
        shutil.rmtree(self.d, True)
        remove_made(self.run_made)


CONTAINERS_CONF = """[containers]
netns = "none"
[network]
network_config_dir = "{d}/net"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "{d}/events.log"
tmp_dir = "{d}/tmp"
conmon_env_vars = [{env}]
"""


class Podman:
    """podman with its own storage (vfs, or the driver given: overlay, with storage_opts as
    --storage-opt), run and tmp directories, configuration (no file of /etc/containers is
    written) and cgroup parent. runtime: the OCI runtime's path; env: what conmon gives it
    (conmon passes on only what containers.conf lists)."""

    def __init__(self, runtime, env=None, storage="vfs", storage_opts=()):
        self.d = tempfile.mkdtemp(prefix="nsbox-podman-")
        self.runtime = runtime
        self.storage = storage
        self.storage_opts = [a for o in storage_opts for a in ("--storage-opt", o)]
        self.cgroup_parent = f"nsbox-test-podman-{os.getpid()}"
        env = dict(env or {})
        env.setdefault("PATH", PATH)
        conf = os.path.join(self.d, "containers.conf")
        with open(conf, "w") as f:
            f.write(CONTAINERS_CONF.format(
                d=self.d, env=", ".join(f'"{k}={v}"' for k, v in sorted(env.items()))))
        self.env = {"PATH": PATH, "HOME": self.d, "CONTAINERS_CONF": conf,
                    "CONTAINERS_STORAGE_CONF": os.path.join(self.d, "storage.conf")}
        with open(self.env["CONTAINERS_STORAGE_CONF"], "w") as f:
            f.write(f'[storage]\ndriver = "{storage}"\ngraphroot = "{self.d}/root"\n'
                    f'runroot = "{self.d}/runroot"\n')

    def podman(self, *args, timeout=120, prefix=(), **kw):
        """prefix: what runs podman (nsbox_test.fds_at_3)."""
        return subprocess.run(
            list(prefix) + [PODMAN, "--root", os.path.join(self.d, "root"),
             "--runroot", os.path.join(self.d, "runroot"), "--storage-driver", self.storage,
             *self.storage_opts,
             "--cgroup-manager", "cgroupfs", "--runtime", self.runtime] + list(args),
            capture_output=True, text=True, timeout=timeout, env=self.env, **kw)

    def load_busybox(self):
        """podman load of the test's busybox image (busybox_archive)."""
        _load(self.d, lambda archive: self.podman("load", "-i", archive))

    @property
    def created(self):
        """The full ids of every container this podman created (its events file)."""
        path = os.path.join(self.d, "events.log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            events = [json.loads(line) for line in f if line.strip()]
        return [e["ID"] for e in events if e.get("Type") == "container" and
                e.get("Status") == "create"]

    def run_args(self):
        """What every `podman run` here gets: our cgroup parent, no network."""
        return ["--cgroup-parent", "/" + self.cgroup_parent, "--network", "none"]

    def stop(self):
        self.podman("rm", "-a", "-f", "-t", "0")
        for pid in _pids_naming(self.d):  # a conmon of ours that outlived its container
            _end(pid, grace=5)
        remove_cgroup(self.cgroup_parent)
        unmount_below(self.d)
        shutil.rmtree(self.d, True)


class DockerCase(unittest.TestCase):
    """Tests of one dockerd of ours (STORAGE its storage driver) with nsbox-oci (OCI, set by the
    module) as its runtime `nsbox` and the busybox image loaded; self.dirs its nsbox dirs."""
    OCI = None
    STORAGE = "vfs"
    # more runtimes: {name: [nsbox-oci's global options]}, registered with them as runtimeArgs
    RUNTIME_ARGS = {}

    @classmethod
    def setUpClass(cls):
        skip_module_unless(cls.OCI, DOCKERD, DOCKER)
        cls.dirs = Dirs()
        cls.daemon = None
        runtimes = {"nsbox": cls.OCI}
        if cls.RUNTIME_ARGS:
            runtimes = {"nsbox": (cls.OCI, ()),
                        **{name: (cls.OCI, args) for name, args in cls.RUNTIME_ARGS.items()}}
        try:
            cls.daemon = Dockerd(runtimes, env=cls.dirs.env(), storage=cls.STORAGE)
            cls.daemon.load_busybox()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.daemon:
            cls.daemon.stop()
        cls.dirs.cleanup()

    def docker(self, *args, **kw):
        return self.daemon.docker(*args, **kw)


class PodmanCase(unittest.TestCase):
    """Tests of one podman of ours (STORAGE its storage driver, STORAGE_OPTS its options) with
    nsbox-oci (OCI, set by the module) as its runtime and the busybox image loaded; self.dirs
    its nsbox dirs."""
    OCI = None
    STORAGE = "vfs"
    STORAGE_OPTS = ()

    @classmethod
    def setUpClass(cls):
        skip_module_unless(cls.OCI, PODMAN, "/usr/bin/conmon")
        cls.dirs = Dirs()
        cls.engine = Podman(cls.OCI, env=cls.dirs.env(), storage=cls.STORAGE,
                            storage_opts=cls.STORAGE_OPTS)
        try:
            cls.engine.load_busybox()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.engine.stop()
        cls.dirs.cleanup()

    def podman(self, *args, **kw):
        return self.engine.podman(*args, **kw)
