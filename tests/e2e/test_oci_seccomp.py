"""End to end: a bundle's linux.seccomp (docs/oci.md, docs/seccomp.md "A bundle's profile"),
honoured on top of nsbox's floor: nsbox's filter is loaded first and the bundle's after it, so
every call gets the stricter answer of the two (of two errnos the bundle's). A denied call fails
with the profile's errno, in the container's process and in an exec'd one; an allow-list runs a
shell; a profile that allows everything loosens nothing; what nsbox-oci cannot do (a seccomp
agent's SCMP_ACT_NOTIFY, a profile that refuses what init still calls) is refused at create."""
import json
import os
import unittest

from oci_bundle import OCI, BundleCase, config, require_runtime, seccomp_filters


def setUpModule():
    require_runtime()


# the flag reaches seccomp(2): one it did not take would fail the load, and the container
EPERM_MKDIR = {"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
               "flags": ["SECCOMP_FILTER_FLAG_LOG"],
               "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO",
                             "errnoRet": 1},
                            # a name no libseccomp knows is skipped, as runc skips it
                            {"names": ["no_such_call_yet"], "action": "SCMP_ACT_ERRNO"}]}

# What init calls after loading the bundle's filter (sandbox/contain_calls.c) and what busybox's
# shell, cat, echo and awk need; mkdir is not in it, nor openat2 (its EPERM, which wins over
# nsbox's ENOSYS, sends init's safe path resolution to its walker, as ENOSYS does).
ALLOWED = [
    "capset", "prctl", "sendmsg", "recvmsg", "read", "write", "close", "openat", "open", "ioctl",
    "pipe2", "pipe", "clone", "fork", "vfork", "rt_sigprocmask", "rt_sigaction", "rt_sigreturn",
    "setsid", "dup2", "dup3", "dup", "fchdir", "execve", "exit", "exit_group", "signalfd4", "poll",
    "ppoll", "kill", "wait4", "pread64", "pwrite64", "mmap", "munmap", "mprotect", "brk",
    "close_range", "newfstatat", "fstat", "stat", "lstat", "statx", "lseek", "getdents64",
    "getpid", "getppid", "getuid", "geteuid", "getgid", "getegid", "gettid", "set_tid_address",
    "set_robust_list", "arch_prctl", "uname", "fcntl", "getcwd", "chdir", "access", "faccessat",
    "faccessat2", "readlink", "readlinkat", "getrandom", "rseq", "futex", "sigaltstack", "madvise",
    "prlimit64", "sched_getaffinity", "getpgrp", "setpgid", "getpgid", "readv", "writev",
    "nanosleep", "clock_nanosleep", "getresuid", "getresgid", "getgroups", "umask"]
ALLOW_LIST = {"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
              "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
              "flags": ["SECCOMP_FILTER_FLAG_SPEC_ALLOW"],
              "syscalls": [{"names": ALLOWED, "action": "SCMP_ACT_ALLOW"}]}

ALLOW_ALL = {"defaultAction": "SCMP_ACT_ALLOW"}

MKDIR = "mkdir /tmp/d 2>&1; echo mkdir=$?; echo x > /tmp/f && cat /tmp/f; "
FILTERS = "awk '/^Seccomp_filters:/ { print $2 }' /proc/self/status"


@unittest.skipIf(not OCI, "NSBOX_BIN is not set (run through ctest)")
class BundleSeccomp(BundleCase):
    TOOLS = BundleCase.TOOLS + ("mkdir", "awk", "unshare", "mount")

    def setUp(self):
        super().setUp()
        self.own = seccomp_filters()
        if self.own is None:
            self.skipTest("no Seccomp_filters in /proc/self/status (Linux 5.10 and later)")

    def container(self, script, seccomp, **process):
        c = config(["sh", "-c", script])
        c["process"].update(process)
        c["linux"]["seccomp"] = seccomp
        return c

    def test_denied_call_fails_with_the_profiles_errno(self):
        # Docker's shape of noNewPrivileges (false): init loads the bundle's filter with
        # CAP_SYS_ADMIN, before it drops it; nsbox's and the bundle's: two filters
        c = self.container(MKDIR + FILTERS, EPERM_MKDIR, noNewPrivileges=False)
        code, out = self.run_container(c)
        self.assertEqual(code, 0, out)
        self.assertEqual(out, "mkdir: can't create directory '/tmp/d': Operation not permitted\n"
                              f"mkdir=1\nx\n{self.own + 2}\n")

    def test_allow_list_runs_a_shell(self):
        # errno by default, as Docker's profile: the shell and init run on what it allows, the
        # rest (mkdir) answers the default errno
        code, out = self.run_container(self.container(MKDIR + FILTERS, ALLOW_LIST))
        self.assertEqual(code, 0, out)
        self.assertEqual(out, "mkdir: can't create directory '/tmp/d': Operation not permitted\n"
                              f"mkdir=1\nx\n{self.own + 2}\n")

    def exec_mkdir(self, seccomp, **process):
        """nsbox-oci exec of MKDIR in a running container of that profile: mkdir refused,
        the rest run, under both filters."""
        self.write_config(self.container("sleep 30", seccomp, **process))
        pid = self.create()
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        r = self.oci("exec", "c1", "sh", "-c", MKDIR + FILTERS)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode(),
                         "mkdir: can't create directory '/tmp/d': Operation not permitted\n"
                         f"mkdir=1\nx\n{self.own + 2}\n")
        self.assertEqual(self.oci("kill", "c1", "KILL").returncode, 0)
        self.wait(pid)

    def test_allow_list_runs_an_exec(self):
        # init serves exec under the allow-list too: the request, the spawn, the reaping
        self.exec_mkdir(ALLOW_LIST)

    def test_allow_everything_keeps_the_floor(self):
        # a bundle that allows every call loosens nothing: nsbox's filter still refuses a
        # nested user namespace and a mount, as root of the container with CAP_SYS_ADMIN's
        # neighbours
        script = ("unshare -U true 2>&1; echo unshare=$?; "
                  "mount -t tmpfs t /tmp 2>&1; echo mount=$?; " + FILTERS)
        code, out = self.run_container(self.container(script, ALLOW_ALL))
        self.assertEqual(code, 0, out)
        self.assertEqual(out, "unshare: unshare(0x10000000): Operation not permitted\nunshare=1\n"
                              "mount: permission denied (are you root?)\nmount=1\n"
                              f"{self.own + 2}\n")  # the bundle's filter was loaded too

    def test_exec_is_under_the_bundles_profile(self):
        self.exec_mkdir(EPERM_MKDIR, noNewPrivileges=False)

    def bundle_programs(self):
        """The disk cache's programs of bundles' profiles (magic NSBXBPFT): name -> inode."""
        cache = os.path.join(self.dirs.data, "cache")
        found = {}
        for name in os.listdir(cache) if os.path.isdir(cache) else []:
            with open(os.path.join(cache, name), "rb") as f:
                if f.read(8) == b"NSBXBPFT":
                    found[name] = os.fstat(f.fileno()).st_ino
        return found

    def test_profile_is_compiled_once(self):
        # an engine gives every container the same default profile: the second create reads
        # the program the first compiled (a compile writes the file anew: another inode), even
        # from a config.json spaced otherwise; another profile gets a file of its own
        code, out = self.run_container(self.container(MKDIR, EPERM_MKDIR))
        self.assertEqual((code, out.splitlines()[1]), (0, "mkdir=1"), out)
        first = self.bundle_programs()
        self.assertEqual(len(first), 1, first)
        self.assertEqual(self.oci("delete", "c1").returncode, 0)
        with open(os.path.join(self.bundle, "config.json"), "w") as f:
            json.dump(self.container(MKDIR, EPERM_MKDIR), f, indent=3)
        pid = self.create()
        self.assertEqual(self.bundle_programs(), first)
        self.assertEqual(self.oci("start", "c1").returncode, 0)
        self.assertEqual(os.waitstatus_to_exitcode(self.wait(pid)), 0)
        self.assertEqual(self.output().splitlines()[1], "mkdir=1", self.output())
        self.assertEqual(self.oci("delete", "c1").returncode, 0)
        code, out = self.run_container(self.container(MKDIR, ALLOW_ALL))
        self.assertEqual((code, out.splitlines()[0]), (0, "mkdir=0"), out)
        both = self.bundle_programs()
        self.assertEqual(len(both), 2, both)
        self.assertEqual({n: both[n] for n in first}, first)

    def test_notify_refused_at_create(self):
        # no seccomp agent answers a notification: the call would hang, so create says so
        prof = {"defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{"names": ["getpid"], "action": "SCMP_ACT_NOTIFY"}]}
        self.write_config(self.container("true", prof))
        msg = self.create_refused()
        self.assertIn("linux.seccomp", msg)
        self.assertIn("syscalls[0].action: SCMP_ACT_NOTIFY is not supported", msg)
        prof = {"defaultAction": "SCMP_ACT_ALLOW", "listenerPath": "/run/agent.sock"}
        self.write_config(self.container("true", prof))
        self.assertIn("listenerPath: not supported: nsbox-oci runs no seccomp agent",
                      self.create_refused())

    def test_profile_refusing_what_init_calls_is_refused_at_create(self):
        # init reaps the container's processes under the bundle's filter: a profile that
        # kills wait4 would leave it dead or waiting, so create names the call instead
        prof = {"defaultAction": "SCMP_ACT_ALLOW",
                "syscalls": [{"names": ["wait4"], "action": "SCMP_ACT_KILL"}]}
        self.write_config(self.container("true", prof))
        msg = self.create_refused()
        self.assertIn("the profile answers wait4 with SCMP_ACT_KILL_THREAD", msg)
        self.assertIn("allow wait4", msg)


if __name__ == "__main__":
    unittest.main()
