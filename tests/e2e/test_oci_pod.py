"""End to end: a pod made by nsbox-oci directly (docs/oci.md, "Joined namespaces"). A first
container (the pod's sandbox, as Kubernetes' pause container) has its own namespaces; a second
joins its network, ipc and uts namespaces by path (/proc/PID/ns/..., as containerd's CRI
writes an app container's config), and with them its user namespace: it sees the first's
hostname, talks to it over loopback, sees its message queue, and has its ids. The floor still
refuses the host's namespaces (pid 1's), and a namespace made by the host's root (as a CNI
plugin's network namespace) is joined with a user namespace of the container's own."""
import json
import os
import shutil
import subprocess
import time
import unittest

from nsbox_test import ROOT_UID_SLOTS, UID_BASE
from oci_bundle import OCI, BundleCase, config, require_runtime


def setUpModule():
    require_runtime()


def pod_config(args, hostname, joins=None):
    c = config(args, hostname=hostname)
    c["mounts"].append({"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue"})
    paths = joins or {}
    c["linux"]["namespaces"] = [dict({"type": t}, **({"path": paths[t]} if t in paths else {}))
                                for t in ("pid", "network", "ipc", "uts", "mount")]
    return c


def slot_ofd_locked(path):
    """Whether someone holds an OFD lock (a pod's joined container's, sandbox/state.h) on the
    uid slot file path, as /proc/locks has it."""
    try:
        ino = os.stat(path).st_ino
    except FileNotFoundError:
        return False
    with open("/proc/locks") as f:
        return any("OFDLCK" in line and "->" not in line and
                   line.split()[5].endswith(f":{ino}") for line in f)


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class Pod(BundleCase):
    TOOLS = BundleCase.TOOLS + ("nc", "touch", "ls", "seq", "readlink", "grep")

    def second_bundle(self, c):
        """A bundle beside the first, on the same root, with config c."""
        b = os.path.join(self.tmp, "bundle2")
        os.makedirs(b, exist_ok=True)
        if not os.path.exists(os.path.join(b, "rootfs")):
            os.symlink(os.path.join(self.bundle, "rootfs"), os.path.join(b, "rootfs"))
        with open(os.path.join(b, "config.json"), "w") as f:
            json.dump(c, f)
        return b

    def create_in(self, bundle, cid, out):
        pidfile = os.path.join(self.tmp, cid + ".pid")
        with open(out, "w") as o:
            r = self.oci("create", "--bundle", bundle, "--pid-file", pidfile, cid,
                         stdout=o, stderr=o)
        return r, pidfile

    def start_pause(self):
        """The pod's first container: its hostname, a message queue in its ipc namespace, a
        listener on its loopback (a little late, so that a joiner's first try finds none);
        its pid once running."""
        self.write_config(pod_config(
            ["sh", "-c", "touch /dev/mqueue/podq && sleep 0.3 && echo pod-hello | nc -l -p 7777; "
             "sleep 1000"], "pod-a"))
        pid = self.create("pause")
        self.assertEqual(self.oci("start", "pause").returncode, 0)
        return pid

    def test_app_joins_the_pods_namespaces(self):
        pause = self.start_pause()
        joins = {t: f"/proc/{pause}/ns/{n}"
                 for t, n in (("network", "net"), ("ipc", "ipc"), ("uts", "uts"))}
        # its own hostname is not set over the pod's; it tries until the pod's listener is up
        # (the pod's program starts it after `start` returns), quietly
        # it writes its writable root (an engine's container layer: Podman's pods) as the
        # pod's ids, which are its own
        app = pod_config(["sh", "-c", "hostname; ls /dev/mqueue; echo app > /from-app && "
                          "for i in $(seq 100); do "
                          "nc 127.0.0.1 7777 2>/dev/null && break; sleep 0.1; done"],
                         "app-b", joins)
        out = os.path.join(self.tmp, "app.out")
        r, pidfile = self.create_in(self.second_bundle(app), "app", out)
        with open(out) as f:
            self.assertEqual(r.returncode, 0, f.read())
        with open(pidfile) as f:
            apid = int(f.read())
        self.waited_pids.append(apid)
        for ns in ("net", "ipc", "uts", "user"):
            self.assertEqual(os.readlink(f"/proc/{apid}/ns/{ns}"),
                             os.readlink(f"/proc/{pause}/ns/{ns}"), ns)
        for ns in ("pid", "mnt"):  # its own
            self.assertNotEqual(os.readlink(f"/proc/{apid}/ns/{ns}"),
                                os.readlink(f"/proc/{pause}/ns/{ns}"), ns)
        self.assertNotEqual(os.readlink(f"/proc/{apid}/ns/user"),
                            os.readlink("/proc/self/ns/user"))
        self.assertEqual(self.oci("start", "app").returncode, 0)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(apid)), 0)
        with open(out) as f:
            self.assertEqual(f.read(), "pod-a\npodq\npod-hello\n")
        # through the root's idmapped mount, the pod's root is the root's owner on disk, as a
        # container's own root is
        made = os.stat(os.path.join(self.bundle, "rootfs", "from-app"))
        self.assertEqual((made.st_uid, made.st_gid), (0, 0))
        # the pod's sandbox goes on, and both go cleanly
        self.assertEqual(self.state("pause")["status"], "running")
        self.assertEqual(self.oci("delete", "app").returncode, 0)
        self.assertEqual(self.oci("kill", "pause", "KILL").returncode, 0)
        self.wait(pause)
        self.assertEqual(self.oci("delete", "pause").returncode, 0)
        self.assertEqual(self.dirs.leftovers(), [])

    @unittest.skipUnless(os.geteuid() == 0, "uid slots hold host ids only as root")
    def test_pods_ids_held_while_a_joined_container_runs(self):
        # The attack: the pod's first container is deleted while a container that joined its
        # user namespace runs with its host ids; were its uid slot free, the next sandbox
        # could be given those ids and reach the joiner's processes and files.
        pause = self.start_pause()
        with open(f"/proc/{pause}/uid_map") as f:
            base = int(f.read().split()[1])
        slot = os.path.join(ROOT_UID_SLOTS, str((base - UID_BASE) // 65536))
        user = {"type": "user", "path": f"/proc/{pause}/ns/user"}
        app = pod_config(["sleep", "1000"], "app-b", {"network": f"/proc/{pause}/ns/net"})
        app["linux"]["namespaces"].append(user)
        r, pidfile = self.create_in(self.second_bundle(app), "app",
                                    os.path.join(self.tmp, "app.out"))
        self.assertEqual(r.returncode, 0)
        with open(pidfile) as f:
            apid = int(f.read())
        self.waited_pids.append(apid)
        self.assertEqual(self.oci("start", "app").returncode, 0)
        self.assertEqual(self.oci("kill", "pause", "KILL").returncode, 0)
        self.wait(pause)
        self.assertEqual(self.oci("delete", "pause").returncode, 0)
        with open(f"/proc/{apid}/uid_map") as f:
            self.assertEqual(int(f.read().split()[1]), base)
        # the slot's file stays, read-locked by the joiner (its OFD lock), which neither a
        # create nor gc takes: a third container gets other ids, then a fourth joins the pod
        # through the joiner (the pod lives as long as one of its containers)
        self.assertTrue(slot_ofd_locked(slot), slot)
        self.write_config(pod_config(["sleep", "1000"], "third"))
        third = self.create("third")
        with open(f"/proc/{third}/uid_map") as f:
            self.assertNotEqual(int(f.read().split()[1]), base)
        user["path"] = f"/proc/{apid}/ns/user"
        fourth = pod_config(["true"], "fourth")
        fourth["linux"]["namespaces"].append(user)
        r, pidfile = self.create_in(self.second_bundle(fourth), "fourth",
                                    os.path.join(self.tmp, "fourth.out"))
        self.assertEqual(r.returncode, 0, open(os.path.join(self.tmp, "fourth.out")).read())
        with open(pidfile) as f:
            self.waited_pids.append(int(f.read()))
        self.assertEqual(self.oci("delete", "--force", "fourth").returncode, 0)
        self.assertTrue(slot_ofd_locked(slot), slot)
        # the joiner goes: so does its hold
        self.assertEqual(self.oci("kill", "app", "KILL").returncode, 0)
        self.wait(apid)
        self.assertEqual(self.oci("delete", "app").returncode, 0)
        self.assertFalse(slot_ofd_locked(slot), slot)
        self.assertEqual(self.oci("delete", "--force", "third").returncode, 0)
        self.waited_pids.remove(third)
        self.assertEqual(self.dirs.leftovers(), [])

    def test_host_namespaces_refused(self):
        for t, n in (("network", "net"), ("ipc", "ipc"), ("uts", "uts")):
            # the runtime's own (pid 1's is the same on a host; not always readable here)
            self.write_config(pod_config(["true"], "x", {t: f"/proc/{os.getpid()}/ns/{n}"}))
            r = self.oci("create", "--bundle", self.bundle, "h")
            self.assertNotEqual(r.returncode, 0, t)
            self.assertIn(f"joining the host's {t} namespace", r.stderr.decode())
            self.assertFalse(os.path.exists(os.path.join(self.root, "h")))
        c = pod_config(["true"], "x")
        c["linux"]["namespaces"].append({"type": "user",
                                         "path": f"/proc/{os.getpid()}/ns/user"})
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "h")
        self.assertIn("the host's user namespace", r.stderr.decode())
        # a namespace of another type than the entry's
        self.write_config(pod_config(["true"], "x", {"ipc": "/proc/self/ns/net"}))
        r = self.oci("create", "--bundle", self.bundle, "h")
        self.assertIn("is not a ipc namespace", r.stderr.decode())
        self.assertEqual(self.dirs.leftovers(), [])

    def holder(self, *unshare_opts):
        """A process in namespaces that `unshare` (the host's root) makes: its pid."""
        p = subprocess.Popen(["unshare", *unshare_opts, "sleep", "1000"])
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        for _ in range(500):  # until unshare has made them and run sleep
            if open(f"/proc/{p.pid}/comm").read() == "sleep\n":
                break
            time.sleep(0.01)
        return p.pid

    @unittest.skipIf(not shutil.which("unshare"), "needs unshare (util-linux)")
    def test_user_namespace_mapping_host_root_refused(self):
        # the attack: a user namespace whose root is the host's uid 0, joined directly or
        # through a namespace it owns, would make the container's root the host's
        pid = self.holder("--user", "--map-root-user", "--net")
        with open(f"/proc/{pid}/uid_map") as f:
            self.assertEqual(f.read().split()[:2], ["0", "0"])
        c = pod_config(["true"], "x")
        c["linux"]["namespaces"].append({"type": "user", "path": f"/proc/{pid}/ns/user"})
        for config in (c, pod_config(["true"], "x", {"network": f"/proc/{pid}/ns/net"})):
            self.write_config(config)
            r = self.oci("create", "--bundle", self.bundle, "--pid-file", self.pidfile, "r")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("it maps the host's root (id 0)", r.stderr.decode())
            self.assertFalse(os.path.exists(self.pidfile))
        self.assertEqual(self.dirs.leftovers(), [])

    def refused_user_join(self, pid):
        """create's error for a config that joins the user namespace of process pid."""
        c = pod_config(["true"], "x")
        c["linux"]["namespaces"].append({"type": "user", "path": f"/proc/{pid}/ns/user"})
        self.write_config(c)
        r = self.oci("create", "--bundle", self.bundle, "--pid-file", self.pidfile, "u")
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(os.path.exists(self.pidfile))
        self.assertEqual(self.dirs.leftovers(), [])
        return r.stderr.decode()

    @unittest.skipIf(not shutil.which("unshare"), "needs unshare (util-linux)")
    def test_user_namespace_without_maps_refused(self):
        # its maker has not written its maps yet: a process there has no ids, which create
        # says instead of failing later at the workload's groups
        pid = self.holder("--user")
        with open(f"/proc/{pid}/uid_map") as f:
            self.assertEqual(f.read(), "")
        self.assertIn(f"the user namespace at /proc/{pid}/ns/user has no uid map yet",
                      self.refused_user_join(pid))

    @unittest.skipIf(not shutil.which("unshare"), "needs unshare (util-linux)")
    @unittest.skipUnless(os.geteuid() == 0, "a joined pod's ids are idmapped only as root")
    def test_user_namespace_of_another_shape_refused(self):
        # maps that are not one slot's range, which the root and volumes could not be
        # idmapped to: refused at create with the maps named, not a mount's EOVERFLOW later
        # ('0 BASE 1000'), nor a slot of nsbox's left unheld (a part of one)
        for uids, gids in (("0 300000 1000", "0 300000 1000"),
                           ("0 300000 65536", "0 400000 65536"),
                           (f"0 {UID_BASE} 1000", f"0 {UID_BASE} 1000"),
                           ("0 300000 65536\n65536 500000 1", "0 300000 65536")):
            pid = self.holder("--user")
            for name, text in (("gid_map", gids), ("uid_map", uids)):
                with open(f"/proc/{pid}/{name}", "w") as f:
                    f.write(text + "\n")
            err = self.refused_user_join(pid)
            self.assertIn(f"the user namespace at /proc/{pid}/ns/user maps uids "
                          f"'{uids.replace(chr(10), ', ')}' and gids '{gids}'", err)
            self.assertIn("'0 BASE 65536'", err)

    @unittest.skipIf(not shutil.which("unshare"), "needs unshare (util-linux)")
    def test_host_made_network_namespace(self):
        # a network namespace the host's root made (as a CNI plugin's): joined, with the
        # container's own user namespace; the test's own process in it is seen from inside
        netns = f"/proc/{self.holder('--net')}/ns/net"
        self.assertNotEqual(os.readlink(netns), os.readlink("/proc/self/ns/net"))
        # the config's sysfs, which the kernel lets only the namespace's owner mount: the
        # host's /sys bound read-only instead; the config's cgroup mount over it is the
        # container's own cgroup (its pids limit), not the host's hierarchies that bind holds
        c = pod_config(["sh", "-c", "readlink /proc/self/ns/net; test -d /sys/kernel && "
                        "echo sys; grep -q ' /sys [^ ]* ro[, ]' /proc/self/mounts && echo read-only; "
                        "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || "
                        "cat /sys/fs/cgroup/pids.max"], "x",
                       {"network": netns})
        c["mounts"].append({"destination": "/sys", "type": "sysfs", "source": "sysfs",
                            "options": ["nosuid", "noexec", "nodev", "ro"]})
        c["mounts"].append({"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
                            "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]})
        self.write_config(c)
        pid = self.create("cni")
        self.assertEqual(os.readlink(f"/proc/{pid}/ns/net"), os.readlink(netns))
        self.assertNotEqual(os.readlink(f"/proc/{pid}/ns/user"),
                            os.readlink("/proc/self/ns/user"))
        self.assertEqual(self.oci("start", "cni").returncode, 0)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 0, self.output())
        self.assertEqual(self.output(), os.readlink(netns) + "\nsys\nread-only\n64\n")
        self.assertEqual(self.oci("delete", "cni").returncode, 0)
        self.assertEqual(self.dirs.leftovers(), [])

    @unittest.skipIf(not shutil.which("unshare") or not shutil.which("capsh"),
                     "needs unshare (util-linux) and capsh (libcap2-bin)")
    @unittest.skipUnless(os.geteuid() == 0, "the namespace's owner is taken by root only")
    def test_an_owner_not_taken_in_the_join_helper_is_said(self):
        # The join helper (a bare clone's child, where nothing is formatted) takes the owner's
        # ids before it clones init; without CAP_SETUID that fails, and the launcher says which
        # step failed instead of a guess at the namespaces.
        netns = f"/proc/{self.holder('--net')}/ns/net"
        c = pod_config(["true"], "x", {"network": netns})
        c["root"]["readonly"] = True  # a writable root's idmapped tree would need CAP_SETUID first
        self.write_config(c)
        r = self.oci_fds([], "create", "--bundle", self.bundle, "--pid-file", self.pidfile, "o",
                         shell=("capsh", "--drop=cap_setuid", "--", "-c", 'exec "$0" "$@"'))
        self.assertNotEqual(r.returncode, 0)
        self.assertRegex(r.stderr.decode(), r"cannot take uid \d+ to make the sandbox's user "
                         r"namespace: Operation not permitted")
        self.assertFalse(os.path.exists(self.pidfile))
        self.assertEqual(self.dirs.leftovers(), [])


if __name__ == "__main__":
    unittest.main()
