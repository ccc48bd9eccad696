"""End to end: Podman runs nsbox sandboxes through nsbox-oci (docs/oci.md). Debian's podman with
the test's own storage, run and tmp directories, containers.conf and cgroup parent
(tests/lib/engines.py), cgroupfs, `--runtime <build>/nsbox-oci` (its state in its default root,
/run/nsbox-oci: podman's cleanup after --rm does not pass --runtime-flag on), network none; the image is a busybox
docker-save archive the test builds and `podman load`s. Checked: `podman run` output and exit
code, `podman stop` (the SIGTERM ends it), `podman pause`/`unpause`, `podman run -t` (a
terminal), `podman exec`, `podman run --preserve-fds` and socket activation through podman,
`-v DIR:/data:idmap` (an idmapped volume the container's root writes as host root), a container
that joins another's network, ipc or uts namespace (`container:NAME`) and writes its root,
Podman's seccomp profile loaded over nsbox's, and that nothing is left."""
import os
import select
import shutil
import tempfile
import unittest

import engines
from oci_bundle import seccomp_filters

from nsbox_test import NSBOX, fds_at_3

OCI = os.path.join(os.path.dirname(NSBOX), "nsbox-oci") if NSBOX else None
IMAGE = "localhost/" + engines.IMAGE
OCI_ROOT = "/run/nsbox-oci"


def setUpModule():
    engines.skip_module_unless(OCI, engines.PODMAN, "/usr/bin/conmon")


class Podman(engines.PodmanCase):
    OCI = OCI

    def run_detached(self, name, *cmd):
        r = self.podman("run", "-d", "--name", name, *self.engine.run_args(), IMAGE, *cmd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.podman, "rm", "-f", "-t", "0", name)

    def test_run_output_and_exit_code(self):
        r = self.podman("run", "--rm", *self.engine.run_args(), IMAGE,
                        "sh", "-c", "echo hi; cat /proc/self/uid_map")
        self.assertEqual(r.returncode, 0, r.stderr)
        out, _, uid_map = r.stdout.partition("\n")
        self.assertEqual(out, "hi")
        # an nsbox sandbox: a user namespace that never maps the host's root (the floor)
        self.assertTrue(uid_map.strip(), r.stdout)
        self.assertFalse(engines.host_root_mapped(uid_map), uid_map)
        r = self.podman("run", "--rm", *self.engine.run_args(), IMAGE, "sh", "-c", "exit 3")
        self.assertEqual(r.returncode, 3, r.stderr)

    def test_seccomp_profile_loaded(self):
        # Podman's default profile (errno by default, ENOSYS; rules of two actions for setns
        # and socket) parses and is a second filter over nsbox's
        own = seccomp_filters()
        if own is None:
            self.skipTest("no Seccomp_filters in /proc/self/status (Linux 5.10 and later)")
        r = self.podman("run", "--rm", *self.engine.run_args(), IMAGE, "sh", "-c",
                        "awk '/^Seccomp_filters:/ { print $2 }' /proc/self/status")
        self.assertEqual((r.returncode, r.stdout), (0, f"{own + 2}\n"), r.stderr)

    def test_stop_ends_with_sigterm(self):
        self.run_detached("stopme", "sleep", "1000")
        r = self.podman("stop", "-t", "60", "stopme")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.podman("inspect", "-f", "{{.State.ExitCode}}", "stopme")
        self.assertEqual(r.stdout, "143\n", r.stderr)  # SIGTERM's, not the SIGKILL's 137

    def test_pause_unpause(self):
        self.run_detached("pauseme", "sleep", "1000")
        self.assertEqual(self.podman("pause", "pauseme").returncode, 0)
        self.assertEqual(self.podman("inspect", "-f", "{{.State.Status}}", "pauseme").stdout,
                         "paused\n")
        self.assertEqual(self.podman("unpause", "pauseme").returncode, 0)
        self.assertEqual(self.podman("inspect", "-f", "{{.State.Status}}", "pauseme").stdout,
                         "running\n")

    def test_run_tty(self):
        r = self.podman("run", "--rm", "-t", *self.engine.run_args(), IMAGE,
                        "sh", "-c", "test -t 0 && test -t 1 && tty")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"^/dev/pts/[0-9]+\r?\n$")

    def test_exec(self):
        self.run_detached("execme", "sleep", "1000")
        r = self.podman("exec", "execme", "sh", "-c", "echo in-$(hostname); exit 4")
        self.assertEqual(r.returncode, 4, r.stderr)
        hostname = self.podman("inspect", "-f", "{{.Config.Hostname}}", "execme").stdout
        self.assertEqual(r.stdout, "in-" + hostname)
        # as another user (a --process whose user differs): its ids, no capability
        r = self.podman("exec", "--user", "1000:1000", "execme", "sh", "-c",
                        "id -u; id -g; grep -E '^CapEff:' /proc/self/status")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["1000", "1000", "CapEff:", "0" * 16])

    def test_run_preserve_fds(self):
        """podman run --preserve-fds=1 (socket activation's path through Podman): podman's
        descriptor 3, a pipe here, is the container's 3, and its only one above stdio."""
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        with fds_at_3([w]) as (prefix, keep):
            p = self.podman("run", "--rm", "--preserve-fds=1", *self.engine.run_args(), IMAGE,
                            "sh", "-c", "ls /proc/$$/fd; echo via-podman >&3",
                            prefix=prefix, pass_fds=keep)
        os.close(w)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split(), ["0", "1", "2", "3"], p.stderr)
        # podman has ended, and with it every holder of the pipe but the container's gone
        self.assertTrue(select.select([r], [], [], 60)[0], "the pipe is still held open")
        self.assertEqual(os.read(r, 4096), b"via-podman\n")

    def test_run_socket_activation(self):
        """podman started by systemd's socket activation (LISTEN_FDS, LISTEN_PID its own pid):
        it passes its descriptor 3 on and sets LISTEN_PID=1 in the config, runc's process's
        pid, which must become the container's process's own, as sd_listen_fds() checks."""
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        activated = ["bash", "-c", 'export LISTEN_FDS=1 LISTEN_PID=$$; exec "$@"', "bash"]
        with fds_at_3([w]) as (prefix, keep):
            p = self.podman("run", "--rm", *self.engine.run_args(), IMAGE, "sh", "-c",
                            'echo "$LISTEN_FDS $LISTEN_PID $$"; echo activated >&3',
                            prefix=prefix + activated, pass_fds=keep)
        os.close(w)
        self.assertEqual(p.returncode, 0, p.stderr)
        fds, listen_pid, own_pid = p.stdout.split()
        self.assertEqual((fds, listen_pid), ("1", own_pid))
        self.assertTrue(select.select([r], [], [], 60)[0], "the pipe is still held open")
        self.assertEqual(os.read(r, 4096), b"activated\n")

    def test_idmapped_volume(self):
        # -v DIR:/data:idmap: the container's root writes a directory of host root's as host
        # root, as under runc (docs/oci.md, "Idmapped volumes"); without :idmap it cannot
        vol = tempfile.mkdtemp(prefix="nsbox-podman-vol-")
        self.addCleanup(shutil.rmtree, vol, True)
        os.chmod(vol, 0o755)
        r = self.podman("run", "--rm", *self.engine.run_args(), "-v", f"{vol}:/data", IMAGE,
                        "sh", "-c", "(echo x > /data/plain) 2>/dev/null || echo refused")
        self.assertEqual((r.returncode, r.stdout), (0, "refused\n"), r.stderr)
        r = self.podman("run", "--rm", *self.engine.run_args(), "-v", f"{vol}:/data:idmap",
                        IMAGE, "sh", "-c", "echo x > /data/made && echo ok")
        self.assertEqual((r.returncode, r.stdout), (0, "ok\n"), r.stderr)
        st = os.stat(os.path.join(vol, "made"))
        self.assertEqual((st.st_uid, st.st_gid), (0, 0))

    def test_container_joins_anothers_namespaces(self):
        # --network/--ipc/--uts container:NAME, a pod's sharing: the joiner runs in the first
        # container's user namespace, and its own root (Podman's container directory) is
        # mapped to that namespace's ids, so its root is writable there
        self.run_detached("podfirst", "sleep", "1000")
        for opt in ("--network", "--ipc", "--uts"):
            r = self.podman("run", "--rm", "--cgroup-parent", "/" + self.engine.cgroup_parent,
                            *(["--network", "none"] if opt != "--network" else []),
                            opt, "container:podfirst", IMAGE, "sh", "-c",
                            "echo x > /made && cat /made")
            self.assertEqual((r.returncode, r.stdout), (0, "x\n"), opt + ": " + r.stderr)

    def test_zz_nothing_left(self):
        # runs last (names sort): the containers above are gone, and with them their sandboxes
        self.assertEqual(self.podman("ps", "-aq").stdout, "")
        self.assertEqual(self.dirs.leftovers(), [])
        # nor the runtime's state of any container this podman made (the ids are podman's)
        made = set(self.engine.created)
        self.assertTrue(made)
        left = os.listdir(OCI_ROOT) if os.path.isdir(OCI_ROOT) else []
        self.assertEqual(made.intersection(left), set())


if __name__ == "__main__":
    unittest.main()
