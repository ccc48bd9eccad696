"""End-to-end: `nsbox cp` both ways on persistent sandboxes, as root (docs/files.md).

Round trips with byte equality (text, binary, stdin/stdout), the owner of copied files inside,
a 1 GiB file through a pipe and a sparse one with the supervisor's peak memory checked, and what
a hostile sandbox can plant: symlinks out of /workspace, a FIFO, a directory swapped for a
symlink while the host copies. Every sandbox made here is removed (nsbox rm), every file too."""
import hashlib
import json
import os
import random
import select
import signal
import socket
import struct
import subprocess
import threading
import time
import unittest

from nsbox_test import (NSBOX, UID_BASE, Dirs, control_socket, is_root, recv_reply, run_nsbox,
                        send_request, wait_for)

GiB = 1 << 30
# The streamed file's size: 1 GiB, which must stream (docs/files.md). NSBOX_TEST_STREAM_MIB
# makes it smaller on a slow (emulated) machine; keep it at least four times the supervisor's
# 64 MiB bound, so that a supervisor that buffered the file would still fail.
STREAM = int(os.environ.get("NSBOX_TEST_STREAM_MIB", "1024")) << 20


def setUpModule():
    if not is_root():
        raise unittest.SkipTest("these tests run nsbox as root")


def current_umask():
    m = os.umask(0)
    os.umask(m)
    return m


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


class FilesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dirs = Dirs()
        r = run_nsbox(["create"], cls.dirs)
        if r.returncode != 0:
            cls.dirs.cleanup()
            raise AssertionError(f"nsbox create failed: {r.stderr.decode()}")
        cls.id = r.stdout.decode().strip()
        cls.work = os.path.join(cls.dirs.base, "work")
        os.mkdir(cls.work)

    @classmethod
    def tearDownClass(cls):
        run_nsbox(["rm", cls.id], cls.dirs)
        cls.dirs.cleanup()

    def nsbox(self, *args, **kw):
        return run_nsbox(list(args), self.dirs, **kw)

    def sh(self, script, **kw):
        return self.nsbox("exec", self.id, "--", "sh", "-c", script, **kw)

    def host(self, name):
        return os.path.join(self.work, name)

    def put(self, name, data, mode=0o644):
        p = self.host(name)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, mode)
        return p

    def supervisor_pid(self):
        r = self.nsbox("inspect", self.id, check=True)
        return int(json.loads(r.stdout)["supervisor_pid"])

    def assertFails(self, r, *words):
        self.assertEqual(r.returncode, 125, r.stderr)
        err = r.stderr.decode()
        self.assertTrue(err.startswith("nsbox: "), err)
        self.assertEqual(err.count("\n"), 1, err)  # one line
        for w in words:
            self.assertIn(w, err)

    # ---- round trips -----------------------------------------------------------------------

    def test_round_trip_text_and_binary(self):
        data = {
            "text.txt": b"hello\nworld\n",
            "binary.bin": bytes(range(256)) * 257 + os.urandom(100000),
            "empty": b"",
        }
        for name, content in data.items():
            src = self.put(name, content)
            # three spellings of places in the workspace
            for dst in (f"/workspace/{name}", f"rt-{name}", f"./rt2-{name}"):
                r = self.nsbox("cp", src, f"{self.id}:{dst}")
                self.assertEqual(r.returncode, 0, r.stderr)
            # and an absolute path elsewhere: refused (it was taken as /workspace/tmp/...)
            r = self.nsbox("cp", src, f"{self.id}:/tmp/{name}")
            self.assertFails(r, f"path '/tmp/{name}' is outside /workspace")
            r = self.sh(f"sha256sum /workspace/{name} /workspace/rt-{name} /workspace/rt2-{name}")
            self.assertEqual(r.returncode, 0, r.stderr)
            want = hashlib.sha256(content).hexdigest()
            self.assertEqual([l.split()[0] for l in r.stdout.decode().splitlines()], [want] * 3)
            out = self.host(name + ".back")
            r = self.nsbox("cp", f"{self.id}:/workspace/rt-{name}", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), content)
        # stdin and stdout
        blob = os.urandom(300000)
        r = self.nsbox("cp", "-", f"{self.id}:from-stdin", input=blob)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.nsbox("cp", f"{self.id}:from-stdin", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, blob)

    def test_files_belong_to_the_sandbox_user(self):
        src = self.put("owned.sh", b"#!/bin/sh\necho ran\n", mode=0o750)
        r = self.nsbox("cp", src, f"{self.id}:/workspace/owned.sh")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.sh("stat -c '%u %g %a' /workspace/owned.sh; ./owned.sh;"
                    "echo more >> owned.sh && rm owned.sh && echo removed")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"1000 1000 750\nran\nremoved\n")
        # on the host: the sandbox's own uid from nsbox's range, never root
        src = self.put("owned2", b"x")
        self.assertEqual(self.nsbox("cp", src, f"{self.id}:owned2").returncode, 0)
        # (the workspace exists only in the sandbox's mount namespace: look through init's root)
        sup = json.loads(self.nsbox("inspect", self.id, check=True).stdout)["supervisor_pid"]
        with open(f"/proc/{sup}/task/{sup}/children") as f:
            init = int(f.read().split()[0])
        st = os.stat(f"/proc/{init}/root/workspace/owned2")
        self.assertGreaterEqual(st.st_uid, UID_BASE)
        self.assertGreaterEqual(st.st_gid, UID_BASE)

    def test_cp_like_cp(self):
        # into a directory (either side) the file keeps its name; -p makes missing directories
        src = self.put("report.csv", b"a,b\n")
        self.assertEqual(self.nsbox("cp", src, f"{self.id}:/workspace/").returncode, 0)
        self.sh("mkdir -p data")
        self.assertEqual(self.nsbox("cp", src, f"{self.id}:data").returncode, 0)
        r = self.nsbox("cp", src, f"{self.id}:new/deep/r.csv")
        self.assertFails(r, "does not exist", "nsbox cp -p")
        self.assertEqual(self.nsbox("cp", "-p", src, f"{self.id}:new/deep/r.csv").returncode, 0)
        # "ID:" alone is the workspace, as "host:" is the home directory to scp (it was taken
        # for "/report.csv", outside /workspace)
        self.sh("rm report.csv")
        r = self.nsbox("cp", src, f"{self.id}:")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.sh("cat report.csv data/report.csv new/deep/r.csv")
        self.assertEqual(r.stdout, b"a,b\n" * 3, r.stderr)
        out = self.host("outdir")
        os.mkdir(out)
        self.assertEqual(self.nsbox("cp", f"{self.id}:data/report.csv", out).returncode, 0)
        with open(os.path.join(out, "report.csv"), "rb") as f:
            self.assertEqual(f.read(), b"a,b\n")
        # -p on the host's side too: DST's missing directories, or DIR/ itself
        r = self.nsbox("cp", f"{self.id}:data/report.csv", self.host("new/deep/r.csv"))
        self.assertFails(r, "cp -p makes missing directories")
        for dst in ("new/deep/r.csv", "new/other/"):
            r = self.nsbox("cp", "-p", f"{self.id}:data/report.csv", self.host(dst))
            self.assertEqual(r.returncode, 0, r.stderr)
        for got in ("new/deep/r.csv", "new/other/report.csv"):
            with open(self.host(got), "rb") as f:
                self.assertEqual(f.read(), b"a,b\n")
        # an executable stays one, both ways (out of the sandbox it became 0644)
        tool = self.put("tool.sh", b"#!/bin/sh\necho tool\n", mode=0o750)
        self.assertEqual(self.nsbox("cp", tool, f"{self.id}:tool.sh").returncode, 0)
        self.assertEqual(self.sh("./tool.sh").stdout, b"tool\n")
        back = os.path.join(out, "tool-back.sh")
        self.assertEqual(self.nsbox("cp", f"{self.id}:tool.sh", back).returncode, 0)
        self.assertEqual(os.stat(back).st_mode & 0o777, 0o750 & ~current_umask())
        # mistakes: a directory as the source (either side), an id with a typo
        self.assertFails(self.nsbox("cp", out, f"{self.id}:x"), "is a directory", "tar")
        self.assertFails(self.nsbox("cp", f"{self.id}:data", out), "(it is a directory)",
                         "for a tree, use tar")
        # the tar pipelines said instead, typed as given, put the tree there under its own
        # name, as cp -r does (they said "tar -C DIR -cf - .": its files, without it)
        tree = self.host("tree")
        os.makedirs(os.path.join(tree, "sub"))
        self.put("tree/sub/leaf", b"leaf\n")
        self.sh("mkdir -p into")
        back = self.host("back")
        os.mkdir(back)
        for args, want in (((tree + "/", f"{self.id}:into"),
                            f"tar -C {self.work} -cf - tree | nsbox exec -i {self.id} -- "
                            "tar -C into -xf -"),
                           ((f"{self.id}:into/tree", back),
                            f"nsbox exec {self.id} -- tar -C into -cf - tree | "
                            f"tar -C {back} -xf -")):
            r = self.nsbox("cp", *args)
            said = r.stderr.decode().rstrip("\n").split("for a tree, use tar: ")[1]
            self.assertEqual(said, want)
            nsbox = f"env {' '.join(f'{k}={v}' for k, v in self.dirs.env().items())} {NSBOX}"
            done = subprocess.run(["sh", "-c", said.replace("nsbox ", nsbox + " ")],
                                  capture_output=True)
            self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.sh("cat into/tree/sub/leaf").stdout, b"leaf\n")
        with open(os.path.join(back, "tree", "sub", "leaf"), "rb") as f:
            self.assertEqual(f.read(), b"leaf\n")
        # a DST that does not exist yet becomes the copy, as with cp -r and docker cp (tar -C
        # of a missing directory failed as typed); cp -r, which a user tries first, says the
        # same pipeline rather than "cp needs SRC and DST"
        fresh = self.host("fresh")
        for args, want in (((tree, f"{self.id}:copy"),
                            f"nsbox exec {self.id} -- mkdir -p copy && tar -C {tree} -cf - . | "
                            f"nsbox exec -i {self.id} -- tar -C copy -xf -"),
                           ((f"{self.id}:copy", fresh),
                            f"mkdir -p {fresh} && nsbox exec {self.id} -- tar -C copy -cf - . | "
                            f"tar -C {fresh} -xf -")):
            for flag in ([], ["-r"]):
                r = self.nsbox("cp", *flag, *args)
                self.assertEqual(r.returncode, 125, r.stderr)
                said = r.stderr.decode().rstrip("\n").split("for a tree, use tar: ")[1]
                self.assertEqual(said, want, flag)
                self.assertEqual(b"nsbox: cp copies one file and has no -r; " in r.stderr,
                                 bool(flag), r.stderr)
            nsbox = f"env {' '.join(f'{k}={v}' for k, v in self.dirs.env().items())} {NSBOX}"
            done = subprocess.run(["sh", "-c", said.replace("nsbox ", nsbox + " ")],
                                  capture_output=True)
            self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.sh("cat copy/sub/leaf").stdout, b"leaf\n")
        with open(os.path.join(fresh, "sub", "leaf"), "rb") as f:
            self.assertEqual(f.read(), b"leaf\n")
        r = self.nsbox("cp", "-x", src, f"{self.id}:x")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"nsbox: unknown cp option -x (cp [-p] SRC DST: one file)", r.stderr)
        self.assertFails(self.nsbox("cp", src, "0123:/x"), "'0123' is not a sandbox id")

    def test_cp_tree_hint_quotes_a_path_the_shell_would_split(self):
        # a path with a space or a quote is one word of the pipeline said (it split in two)
        spaced = self.host("it's a tree")
        os.makedirs(os.path.join(spaced, "sub"))
        self.put("it's a tree/sub/leaf", b"leaf\n")
        r = self.nsbox("cp", spaced, f"{self.id}:sp copy")
        said = r.stderr.decode().rstrip("\n").split("for a tree, use tar: ")[1]
        quoted = "'" + spaced.replace("'", "'\\''") + "'"
        self.assertEqual(said, f"nsbox exec {self.id} -- mkdir -p 'sp copy' && tar -C {quoted} "
                               f"-cf - . | nsbox exec -i {self.id} -- tar -C 'sp copy' -xf -")
        nsbox = f"env {' '.join(f'{k}={v}' for k, v in self.dirs.env().items())} {NSBOX}"
        done = subprocess.run(["sh", "-c", said.replace("nsbox ", nsbox + " ")],
                              capture_output=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.sh("cat 'sp copy/sub/leaf'").stdout, b"leaf\n")

    def test_cp_shows_a_path_without_its_controls(self):
        # cp's own messages (a directory given, cp -r's pipeline, an id that is none) show a
        # path with each control, C1's as UTF-8 too, as '?', as every message does: a name with
        # an escape sequence (a file a sandbox wrote, picked by a glob) must not drive the
        # terminal
        tree = os.path.join(self.work.encode(), b"t\x1b[2J\xc2\x9bx")
        os.makedirs(tree)
        shown = self.work.encode() + b"/t?[2J?x"
        for flag, said in (([], b"nsbox: " + shown + b" is a directory: "),
                           (["-r"], b"nsbox: cp copies one file and has no -r; ")):
            r = self.nsbox("cp", *flag, tree, f"{self.id}:copy")
            self.assertEqual(r.returncode, 125, r.stderr)
            self.assertTrue(r.stderr.startswith(said), r.stderr)
            self.assertIn(b"t?[2J?x", r.stderr.split(b"for a tree, use tar: ")[1])
            self.assertNotIn(b"\x1b", r.stderr)
            self.assertNotIn(b"\x9b", r.stderr)
        r = self.nsbox("cp", self.put("shown-f", b"x"), b"0123\x1b]0;t\x07:/x")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"'0123?]0;t?' is not a sandbox id", r.stderr)
        self.assertNotIn(b"\x1b", r.stderr)

    def test_cp_to_the_host_replaces_whole_or_not_at_all(self):
        # A full disk (or a Ctrl-C) in the middle of `cp ID:f DST` must not leave DST truncated
        # with a part of the new content, the old file lost: the copy takes DST's name only
        # once complete; DST keeps its permissions; a symlink and a file with other hard links
        # are still written through, in place.
        self.sh("head -c 3000000 /dev/urandom > big; echo new > small")
        tiny = self.host("tiny")
        os.mkdir(tiny)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "nsbox-test", tiny], check=True)
        self.addCleanup(subprocess.run, ["umount", "-l", tiny])
        keep = os.path.join(tiny, "keep")
        with open(keep, "w") as f:
            f.write("precious\n")
        os.chmod(keep, 0o640)
        r = self.nsbox("cp", f"{self.id}:big", keep)
        self.assertFails(r, f"cannot write {keep}", "No space left on device",
                         "it was left as it was")
        with open(keep) as f:
            self.assertEqual(f.read(), "precious\n")
        self.assertEqual(os.listdir(tiny), ["keep"])
        r = self.nsbox("cp", f"{self.id}:big", os.path.join(tiny, "new"))
        self.assertFails(r, "No space left on device", "no file was made")
        self.assertEqual(os.listdir(tiny), ["keep"])
        ino = os.stat(keep).st_ino
        r = self.nsbox("cp", f"{self.id}:small", keep)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(keep) as f:
            self.assertEqual(f.read(), "new\n")
        self.assertNotEqual(os.stat(keep).st_ino, ino)  # a new file took the name
        self.assertEqual(os.stat(keep).st_mode & 0o7777, 0o640)
        self.assertEqual(os.listdir(tiny), ["keep"])
        # through a symlink, into a file with a second name: both still see the new content
        os.symlink("keep", os.path.join(tiny, "link"))
        os.link(keep, os.path.join(tiny, "second"))
        ino = os.stat(keep).st_ino
        self.sh("echo newer > small")
        r = self.nsbox("cp", f"{self.id}:small", os.path.join(tiny, "link"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.islink(os.path.join(tiny, "link")))
        for name in ("keep", "second", "link"):
            with open(os.path.join(tiny, name)) as f:
                self.assertEqual(f.read(), "newer\n", name)
        self.assertEqual(os.stat(keep).st_ino, ino)  # in place
        # a path near PATH_MAX, in a directory whose path is as long: the name beside it is
        # made relative to the directory (as a path, it was too long: ENAMETOOLONG)
        n, rest = divmod(4085 - len(tiny), 201)
        deep = os.path.join(tiny, *["d" * 200] * n + (["e" * (rest - 1)] if rest > 1 else []))
        os.makedirs(deep)
        far = os.path.join(deep, "f")
        with open(far, "w") as f:
            f.write("old\n")
        r = self.nsbox("cp", f"{self.id}:small", far)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(far) as f:
            self.assertEqual(f.read(), "newer\n")

    def test_missing_things(self):
        r = self.nsbox("cp", f"{self.id}:/workspace/does-not-exist", self.host("nope"))
        self.assertFails(r, "no such file: /workspace/does-not-exist")
        self.assertFalse(os.path.exists(self.host("nope")))
        src = self.put("x", b"x")
        r = self.nsbox("cp", src, f"{self.id}:/workspace/no/such/dir/x")
        self.assertFails(r, "/workspace/no/such/dir/x", "does not exist")
        r = self.nsbox("cp", f"{self.id}:/workspace", self.host("dir"))
        self.assertFails(r, "not a regular file")
        self.sh("echo y > cp-out-src")  # into a host directory that does not exist: not EISDIR
        r = self.nsbox("cp", f"{self.id}:cp-out-src", self.host("absent") + "/")
        self.assertFails(r, self.host("absent") + "/: no such directory")
        self.assertFalse(os.path.exists(self.host("absent")))

    def test_a_failed_recursive_remove_names_each_path_once(self):
        """The requested directory is named once; a file below it after it, the verb once."""
        r = self.sh("mkdir -p rmfail/kept rmfail2 && touch rmfail/kept/f")
        self.assertEqual(r.returncode, 0, r.stderr)
        kids = subprocess.run(["pgrep", "-P", str(self.supervisor_pid())], capture_output=True)
        (init,) = kids.stdout.split()  # no file job runs: the supervisor's one child is init
        ws = f"/proc/{int(init)}/root/workspace"
        # immutable (as root on the host; the sandbox cannot clear it): rmfail2 itself cannot
        # go, nor can rmfail/kept's file
        flagged = [f"{ws}/rmfail2", f"{ws}/rmfail/kept"]
        r = subprocess.run(["chattr", "+i"] + flagged, capture_output=True)
        if r.returncode != 0:
            self.skipTest(f"the workspace's file system has no immutable flag: {r.stderr!r}")
        try:
            with control_socket(self.dirs, self.id, timeout=30) as s:
                send_request(s, {"op": "remove", "path": "/workspace/rmfail2", "recursive": True})
                top = recv_reply(s)
                send_request(s, {"op": "remove", "path": "rmfail", "recursive": True})
                below = recv_reply(s)
        finally:
            subprocess.run(["chattr", "-i"] + flagged, check=True)
        self.assertFalse(top["ok"], top)
        self.assertEqual(top["error"]["message"],
                         "cannot remove /workspace/rmfail2: Operation not permitted")
        self.assertFalse(below["ok"], below)
        self.assertEqual(below["error"]["message"], "cannot remove /workspace/rmfail: "
                         "/workspace/rmfail/kept/f: Operation not permitted")
        self.assertEqual(self.sh("rm -r rmfail rmfail2").returncode, 0)

    # ---- size and memory -------------------------------------------------------------------

    def test_a_sparse_file_stays_sparse_on_the_host(self):
        # A 1 TiB file that holds 8 KiB inside the sandbox: copied out byte by byte it wrote
        # its apparent size of zeros to the host's disk (a sandbox could fill it from 4 KiB).
        r = self.sh("python3 -c \"import os\n"
                    "f = os.open('sparse', os.O_WRONLY | os.O_CREAT)\n"
                    "os.write(f, b'head')\n"
                    "os.lseek(f, (1 << 40) - 10, 0)\n"
                    "os.write(f, b'0123456789')\"")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = self.host("sparse.back")
        r = self.nsbox("cp", f"{self.id}:sparse", out, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        st = os.stat(out)
        self.assertEqual(st.st_size, 1 << 40)
        self.assertLess(st.st_blocks * 512, 1 << 20)
        with open(out, "rb") as f:
            self.assertEqual(f.read(8), b"head\0\0\0\0")
            f.seek((1 << 40) - 12)
            self.assertEqual(f.read(), b"\0\x000123456789")
        os.unlink(out)
        # into a pipe the holes are the zeros they read as
        self.sh("truncate -s 100000 small-sparse; printf end >> small-sparse")
        r = self.nsbox("cp", f"{self.id}:small-sparse", "-")
        self.assertEqual(r.stdout, b"\0" * 100000 + b"end", r.stderr)

    def test_cp_to_stdout_writes_where_stdout_is(self):
        # stdout that the shell made a regular file is not cp's own: `>> log` appends, and
        # what a group wrote before stays. The sparse copy once seeked it to 0 and cut it to
        # the copy's size: the log's start was overwritten, then cut off.
        self.sh("printf data > f; truncate -s 4096 holes; printf end >> holes")
        log = self.put("log.txt", b"previous content\n")
        r = subprocess.run(["sh", "-c", f'"$NSBOX" cp {self.id}:f - >> "$1"', "sh", log],
                           env=dict(self.dirs.env(), NSBOX=NSBOX), capture_output=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(log, "rb") as f:
            self.assertEqual(f.read(), b"previous content\ndata")
        out = self.host("group.txt")
        r = subprocess.run(["sh", "-c", f'{{ echo before; "$NSBOX" cp {self.id}:holes -; '
                                        f'echo after; }} > "$1"', "sh", out],
                           env=dict(self.dirs.env(), NSBOX=NSBOX), capture_output=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), b"before\n" + b"\0" * 4096 + b"end" + b"after\n")

    def test_one_gib_streams_in_bounded_memory(self):
        pid = self.supervisor_pid()
        peak = [vm_hwm_kib(pid)]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                try:
                    peak[0] = max(peak[0], vm_hwm_kib(pid))
                except OSError:
                    return
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            # 1 GiB (STREAM) of non-repeating data through a pipe: nothing sparse, nothing cached
            block = os.urandom(1 << 20)
            h = hashlib.sha256()
            p = subprocess.Popen([NSBOX, "cp", "-", f"{self.id}:/workspace/big"],
                                 stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=self.dirs.env())
            for i in range(STREAM >> 20):
                chunk = i.to_bytes(8, "little") + block[8:]
                h.update(chunk)
                p.stdin.write(chunk)
            p.stdin.close()
            err = p.stderr.read()
            self.assertEqual(p.wait(timeout=300), 0, err)
            want = h.hexdigest()
            r = self.sh("stat -c '%s %u' big; sha256sum big", timeout=300)
            self.assertEqual(r.stdout.decode().split()[:3], [str(STREAM), "1000", want], r.stderr)
            # and back, to stdout
            p = subprocess.Popen([NSBOX, "cp", f"{self.id}:/workspace/big", "-"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=self.dirs.env())
            h2 = hashlib.sha256()
            n = 0
            while True:
                b = p.stdout.read(1 << 20)
                if not b:
                    break
                n += len(b)
                h2.update(b)
            self.assertEqual(p.wait(timeout=300), 0, p.stderr.read())
            self.assertEqual((n, h2.hexdigest()), (STREAM, want))

            # a sparse 1 GiB file, with data at both ends
            sparse = self.host("sparse")
            with open(sparse, "wb") as f:
                f.truncate(GiB)
                f.write(b"HEAD")
                f.seek(GiB - 4)
                f.write(b"TAIL")
            r = self.nsbox("cp", sparse, f"{self.id}:sparse", timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            os.unlink(sparse)
            back = self.host("sparse.back")
            r = self.nsbox("cp", f"{self.id}:sparse", back, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(os.path.getsize(back), GiB)
            with open(back, "rb") as f:
                self.assertEqual(f.read(4), b"HEAD")
                f.seek(GiB // 2)
                self.assertEqual(f.read(4), b"\0\0\0\0")
                f.seek(GiB - 4)
                self.assertEqual(f.read(4), b"TAIL")
            os.unlink(back)
        finally:
            stop.set()
            sampler.join()
            self.sh("rm -f /workspace/big /workspace/sparse")
        peak[0] = max(peak[0], vm_hwm_kib(pid))
        self.assertLess(peak[0], 64 * 1024, f"supervisor peak RSS {peak[0]} KiB")

    # ---- a hostile sandbox -----------------------------------------------------------------

    def test_symlinks_planted_by_the_sandbox(self):
        with open("/etc/shadow", "rb") as f:
            shadow = f.read()
        shadow_mtime = os.stat("/etc/shadow").st_mtime_ns
        r = self.sh("cd /workspace && ln -s /etc/shadow x && ln -s ../../../../etc/shadow y &&"
                    "ln -s /etc z && ln -s loop loop")
        self.assertEqual(r.returncode, 0, r.stderr)
        for name in ("x", "/workspace/y", "z/shadow"):
            out = self.host("leak")
            r = self.nsbox("cp", f"{self.id}:{name}", out)
            self.assertFails(r, "no such file")
            self.assertFalse(os.path.exists(out))
            self.assertNotIn(shadow[:20], r.stdout + r.stderr)
        r = self.nsbox("cp", f"{self.id}:/workspace/x", self.host("leak"))
        self.assertIn("a symlink to '/etc/shadow'", r.stderr.decode())
        r = self.nsbox("cp", f"{self.id}:/workspace/loop", self.host("leak"))
        self.assertFails(r, "symlink")
        # writing through them: refused at the leaf, nothing followed
        src = self.put("pwn", b"pwned\n")
        for name in ("x", "y"):
            r = self.nsbox("cp", src, f"{self.id}:/workspace/{name}")
            self.assertFails(r, "refusing to write through it")
        r = self.nsbox("cp", src, f"{self.id}:/workspace/z/shadow")
        self.assertFails(r)
        with open("/etc/shadow", "rb") as f:
            self.assertEqual(f.read(), shadow)
        self.assertEqual(os.stat("/etc/shadow").st_mtime_ns, shadow_mtime)
        self.sh("rm -f /workspace/x /workspace/y /workspace/z /workspace/loop")

    def test_a_symlinks_text_reaches_the_terminal_without_controls(self):
        # The message for a link that names nothing quotes its text, which the sandbox wrote:
        # terminal controls in it (ESC, BEL, and CSI and OSC as the single characters U+009B
        # and U+009D, which xterm acts on in UTF-8) would reach the terminal of whoever ran
        # nsbox cp.
        r = self.sh("cd /workspace && ln -s \"$(printf 'a\\302\\2332J\\302\\2350;pwned\\007"
                    "\\033[31m\\302\\205\\302\\237b\\303\\251')\" ctl")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.sh("readlink /workspace/ctl | od -An -c")
        self.assertIn("302 233", r.stdout.decode())  # the link holds U+009B
        r = self.nsbox("cp", f"{self.id}:ctl", self.host("ctl"))
        self.assertFails(r, "no such file", "a symlink to 'a?2J?0;pwned??[31m??b\u00e9'")
        for c in range(0x80, 0xa0):
            self.assertNotIn(chr(c).encode(), r.stderr)
        self.assertNotIn(b"\x1b", r.stderr)
        self.assertNotIn(b"\x07", r.stderr)
        self.sh("rm -f /workspace/ctl")

    def test_fifo_planted_by_the_sandbox(self):
        r = self.sh("mkfifo /workspace/fifo")
        self.assertEqual(r.returncode, 0, r.stderr)
        t0 = time.monotonic()
        r = self.nsbox("cp", f"{self.id}:/workspace/fifo", self.host("fifo-out"), timeout=30)
        self.assertFails(r, "not a regular file (it is a FIFO)")
        src = self.put("into-fifo", b"data")
        r = self.nsbox("cp", src, f"{self.id}:/workspace/fifo", timeout=30)
        self.assertFails(r, "not a regular file")
        self.assertLess(time.monotonic() - t0, 20)
        # the supervisor still answers
        self.assertEqual(self.sh("rm /workspace/fifo").returncode, 0)

    def test_directory_swapped_for_a_symlink_during_copies(self):
        secret_dir = os.path.join(self.dirs.base, "secretdir")
        os.mkdir(secret_dir)
        secret = os.path.join(secret_dir, "f")
        with open(secret, "wb") as f:
            f.write(b"HOST-SECRET\n")
        before = os.stat(secret)
        swapper = (
            "import os\n"
            "os.chdir('/workspace')\n"
            "os.makedirs('real', exist_ok=True)\n"
            "open('real/f', 'w').write('INSIDE\\n')\n"
            f"os.symlink({secret_dir!r}, 'abs')\n"
            "os.symlink('../../../../..' + " + repr(secret_dir) + ", 'rel')\n"
            "while True:\n"
            "    for link in ('abs', 'rel'):\n"
            "        os.rename('real', 'd'); os.rename('d', 'real')\n"
            "        os.rename(link, 'd'); os.rename('d', link)\n")
        r = self.nsbox("exec", "-d", self.id, "--", "python3", "-c", swapper)
        self.assertEqual(r.returncode, 0, r.stderr)
        src = self.put("race-src", b"FROM-HOST\n")
        out = self.host("race-out")
        got_inside = 0
        deadline = time.monotonic() + 4
        i = 0
        while time.monotonic() < deadline or i < 40:
            i += 1
            if i % 2:
                r = self.nsbox("cp", f"{self.id}:/workspace/d/f", out)
                if r.returncode == 0:
                    with open(out, "rb") as f:
                        data = f.read()
                    self.assertNotIn(b"HOST-SECRET", data)
                    got_inside += 1
                    os.unlink(out)
                else:
                    self.assertEqual(r.returncode, 125, r.stderr)
            else:
                r = self.nsbox("cp", src, f"{self.id}:/workspace/d/f")
                self.assertIn(r.returncode, (0, 125), r.stderr)
            if i > 400:
                break
        after = os.stat(secret)
        with open(secret, "rb") as f:
            self.assertEqual(f.read(), b"HOST-SECRET\n")
        self.assertEqual(after.st_mtime_ns, before.st_mtime_ns)
        self.assertEqual(sorted(os.listdir(secret_dir)), ["f"])
        r = self.nsbox("ps", self.id)
        for line in r.stdout.decode().splitlines():
            if "python3" in line:
                pid = line.split()[0]
                if pid.isdigit():
                    self.nsbox("kill", self.id, pid, "9")
        print(f"\n      race: {i} copies, {got_inside} read the file inside", flush=True)


class DeletedSandbox(unittest.TestCase):
    def setUp(self):
        self.dirs = Dirs()

    def tearDown(self):
        self.dirs.cleanup()

    def test_cp_to_a_removed_sandbox_says_so(self):
        r = run_nsbox(["create"], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        src = os.path.join(self.dirs.base, "f")
        with open(src, "wb") as f:
            f.write(b"x")
        self.assertEqual(run_nsbox(["cp", src, f"{sid}:f"], self.dirs).returncode, 0)
        self.assertEqual(run_nsbox(["rm", sid], self.dirs).returncode, 0)
        for args in (["cp", src, f"{sid}:f"], ["cp", f"{sid}:f", src + ".back"]):
            r = run_nsbox(args, self.dirs)
            self.assertEqual(r.returncode, 125, r.stderr)
            self.assertIn(f"sandbox {sid} was deleted by rm", r.stderr.decode())
        self.assertFalse(os.path.exists(src + ".back"))
        # the tombstone stays (that is how the message above knows); nothing else does
        self.assertEqual(self.dirs.leftovers(), [])


class LongOperations(unittest.TestCase):
    """A write from a slow stream or a recursive remove of a big tree takes as long as it
    takes; meanwhile the supervisor serves everyone else (docs/files.md, "Long operations")."""

    def setUp(self):
        self.dirs = Dirs()
        r = run_nsbox(["create", "--instance-type", "large"], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.id = r.stdout.decode().strip()

    def tearDown(self):
        run_nsbox(["rm", self.id], self.dirs)
        self.dirs.cleanup()

    def supervisor_children(self, sup=None):
        """init, and the file jobs running (sup: the supervisor's pid, else asked of it)"""
        if sup is None:
            sup = json.loads(run_nsbox(["inspect", self.id], self.dirs,
                                       check=True).stdout)["supervisor_pid"]
        r = subprocess.run(["pgrep", "-P", str(sup)], capture_output=True)
        return [int(x) for x in r.stdout.split()]

    def served_at_once(self):
        started = time.monotonic()
        r = run_nsbox(["exec", self.id, "--", "echo", "served"], self.dirs, timeout=60)
        self.assertEqual(r.stdout, b"served\n", r.stderr)
        return time.monotonic() - started

    def slow_cp(self, name="slow.txt"):
        """nsbox cp from a pipe that the test feeds (or not); killed at the test's end."""
        cp = subprocess.Popen([NSBOX, "cp", "-", f"{self.id}:{name}"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.dirs.env())

        def end():
            if cp.poll() is None:
                cp.kill()
            cp.wait()
            for f in (cp.stdin, cp.stdout, cp.stderr):
                if not f.closed:
                    f.close()
        self.addCleanup(end)
        return cp

    def test_a_stalled_write_holds_nothing_else(self):
        # The write's source sends nothing (for up to 60 s it would be waited for): a
        # supervisor that waited in its loop would make every exec, ps or ttl wait with it.
        cp = self.slow_cp()
        # its request is with the supervisor once its job runs (a fixed pause was not always
        # enough for nsbox cp to start on a slow machine)
        self.assertTrue(wait_for(lambda: len(self.supervisor_children()) == 2), "no job")
        self.assertLess(self.served_at_once(), 20)
        self.assertIsNone(cp.poll(), "the write ended before its source did")
        out, err = cp.communicate(b"late\n", timeout=30)
        self.assertEqual(cp.returncode, 0, err)
        r = run_nsbox(["exec", self.id, "--", "cat", "slow.txt"], self.dirs)
        self.assertEqual(r.stdout, b"late\n")

    def test_a_stream_write_whose_client_died_changes_nothing(self):
        # Ctrl-C on `producer | nsbox cp - ID:f` ends both: the stream's end looked like the
        # end of the data, and the half that came was renamed over the file.
        r = run_nsbox(["exec", self.id, "--", "sh", "-c", "echo OLD > keep.txt"], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        for name, before in (("keep.txt", b"OLD\n"), ("new.txt", None)):
            cp = self.slow_cp(name)
            # our own copy of the pipe's write end outlives the client, as the producer's does
            w = os.dup(cp.stdin.fileno())
            try:
                cp.stdin.write(b"new-partial\n")
                cp.stdin.flush()
                time.sleep(0.5)
                cp.kill()
                cp.wait()
                cp.stdin.close()
            finally:
                os.close(w)
            self.assertTrue(wait_for(lambda: len(self.supervisor_children()) == 1),
                            "the write's job never ended")
            r = run_nsbox(["exec", self.id, "--", "sh", "-c",
                           f"cat {name} 2>/dev/null || echo missing"], self.dirs)
            self.assertEqual(r.stdout, before if before else b"missing\n", name)

    def test_ctrl_c_on_a_pipeline_into_cp_keeps_nothing(self):
        # SIGINT to the whole pipeline, as a terminal's Ctrl-C sends it: the producer usually
        # dies first, and its pipe's end reached the supervisor while `nsbox cp` was still
        # alive, so a check for the client's hang-up kept the half (about a third of the
        # time). cp now confirms the end; killed, it never does.
        r = run_nsbox(["exec", self.id, "--", "sh", "-c", "echo OLD > g"], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        rnd = random.Random(1234)
        for trial in range(16):
            name = "g" if trial % 2 else "n%d" % trial
            p = subprocess.Popen(["sh", "-c", "i=0; while :; do echo $i; i=$((i+1)); done | "
                                  f"{NSBOX} cp - {self.id}:{name}"],
                                 env=self.dirs.env(), start_new_session=True,
                                 stderr=subprocess.DEVNULL,
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
            time.sleep(rnd.uniform(0.05, 0.6))
            os.killpg(p.pid, signal.SIGINT)
            p.wait()
            self.assertTrue(wait_for(lambda: len(self.supervisor_children()) == 1),
                            "the write's job never ended")
            r = run_nsbox(["exec", self.id, "--", "sh", "-c",
                           f"cat {name} 2>/dev/null || echo missing"], self.dirs)
            self.assertEqual(r.stdout, b"OLD\n" if name == "g" else b"missing\n", trial)
        # and a pipe that ends as it should still gives the whole content, every time
        for _ in range(5):
            r = subprocess.run(["sh", "-c", f"seq 1 100000 | {NSBOX} cp - {self.id}:seq"],
                               env=self.dirs.env(), capture_output=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = run_nsbox(["exec", self.id, "--", "sh", "-c", "wc -l < seq; tail -n1 seq"],
                          self.dirs)
            self.assertEqual(r.stdout.split(), [b"100000", b"100000"])

    def test_a_stream_write_stops_reading_when_its_client_goes(self):
        # `yes | nsbox cp - ID:y` with only the cp killed: the job read on into the workspace
        # until the disk limit, for a result it then threw away.
        cp = self.slow_cp("y")
        fill = threading.Thread(target=lambda: self._feed(cp), daemon=True)
        fill.start()
        time.sleep(0.5)
        cp.kill()
        self.assertTrue(wait_for(lambda: len(self.supervisor_children()) == 1, 10),
                        "the job read on after its client was gone")
        r = run_nsbox(["exec", self.id, "--", "sh", "-c", "ls -a; du -sk ."], self.dirs)
        self.assertNotIn(b".nsbox-write", r.stdout)
        self.assertNotIn(b"\ny\n", b"\n" + r.stdout)

    @staticmethod
    def _feed(cp):
        try:
            while True:
                cp.stdin.write(b"y\n" * 65536)
        except (BrokenPipeError, ValueError, OSError):
            pass

    def test_a_client_that_shuts_down_its_writing_half_still_gets_its_write(self):
        r, w = os.pipe()
        try:
            with control_socket(self.dirs, self.id) as s:
                send_request(s, {"op": "write", "path": "half.txt"}, [r])
                os.close(r)
                r = -1
                s.shutdown(socket.SHUT_WR)
                time.sleep(0.3)
                os.write(w, b"still here\n")
                os.close(w)
                w = -1
                reply = recv_reply(s)
        finally:
            for fd in (r, w):
                if fd >= 0:
                    os.close(fd)
        self.assertTrue(reply["ok"], reply)
        r = run_nsbox(["exec", self.id, "--", "cat", "half.txt"], self.dirs)
        self.assertEqual(r.stdout, b"still here\n")

    def test_rm_during_a_long_write_is_prompt_and_complete(self):
        cp = self.slow_cp()
        self.assertTrue(wait_for(lambda: len(self.supervisor_children()) == 2), "no job")
        started = time.monotonic()
        r = run_nsbox(["rm", self.id], self.dirs, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(time.monotonic() - started, 20)
        out, err = cp.communicate(timeout=30)
        self.assertEqual(cp.returncode, 125)
        self.assertIn(f"sandbox {self.id} was deleted by rm", err.decode())
        self.assertEqual(self.dirs.leftovers(), [])

    def test_a_killed_supervisor_takes_its_file_job_along(self):
        # The long operation runs in a child of the supervisor; SIGKILL of the supervisor (an
        # OOM kill, a CI runner's cleanup) must not leave it writing into the workspace.
        cp = self.slow_cp()
        sup = json.loads(run_nsbox(["inspect", self.id], self.dirs, check=True).stdout)
        sup = sup["supervisor_pid"]
        kids = wait_for(lambda: len(self.supervisor_children(sup)) == 2 and
                        self.supervisor_children(sup))
        self.assertTrue(kids, "no file job beside init: %s" % self.supervisor_children(sup))
        def comm(pid):
            with open(f"/proc/{pid}/comm") as f:
                return f.read().strip()
        (job,) = [k for k in kids if comm(k) != "nsbox-init"]
        # it holds its client, the workspace and the source, and nothing else of the
        # supervisor's (the listening socket, other clients, log pipes, locks). Right after
        # its fork it still has them all, until it closes what it does not need: wait for
        # that, and fail if they stay.
        def held():
            links = [os.readlink(f"/proc/{job}/fd/{f}") for f in os.listdir(f"/proc/{job}/fd")]
            kinds = sorted("socket" if l.startswith("socket:") else "pipe" if
                           l.startswith("pipe:") else "null" if l == "/dev/null" else
                           "workspace" if l.split("/")[1:2] == ["workspace"] else l
                           for l in links)
            return [k for k in kinds if k not in ("null", "workspace")], links
        wait_for(lambda: held()[0] == ["pipe", "socket"], 10)
        kinds, links = held()
        self.assertEqual(kinds, ["pipe", "socket"], links)
        os.kill(sup, signal.SIGKILL)
        for pid in kids:
            self.assertTrue(wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 10),
                            f"child {pid} of the killed supervisor lives on")
        out, err = cp.communicate(b"late\n", timeout=30)
        self.assertEqual(cp.returncode, 125, err)
        run_nsbox(["gc"], self.dirs, check=True)
        self.assertEqual(self.dirs.leftovers(), [])

    def test_many_stalled_writes_hold_nothing_else_and_the_ttl_still_deletes(self):
        # More long operations than any fixed number of workers: none may run in the loop
        # (where one stalled source held the supervisor, and the ttl, for ever).
        run_nsbox(["rm", self.id], self.dirs)
        # The ttl leaves room for the twelve to start and for the exec: 8 s may not on a
        # machine as slow as CI's emulated VM, where an nsbox command takes about a second.
        r = run_nsbox(["create", "--ttl", "15"], self.dirs)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.id = r.stdout.decode().strip()
        sup = json.loads(run_nsbox(["inspect", self.id], self.dirs,
                                   check=True).stdout)["supervisor_pid"]
        cps = [self.slow_cp() for _ in range(12)]
        self.assertTrue(wait_for(lambda: len(self.supervisor_children(sup)) == 13, 30),
                        f"not every write's job runs: {self.supervisor_children(sup)}")
        self.assertLess(self.served_at_once(), 5)
        self.assertTrue(wait_for(lambda: not os.path.exists(
            os.path.join(self.dirs.state, self.id, "ctl")), 40), "the ttl did not delete it")
        for cp in cps:
            out, err = cp.communicate(timeout=30)
            self.assertEqual(cp.returncode, 125, err)
            self.assertIn("ttl_seconds=15 expired", err.decode())

    def test_a_file_operation_on_a_connection_that_waits_is_refused(self):
        pid = int(run_nsbox(["exec", "-d", self.id, "--", "sleep", "60"], self.dirs,
                            check=True).stdout)
        with control_socket(self.dirs, self.id) as s:
            send_request(s, {"op": "wait", "pid": pid})
            send_request(s, {"op": "remove", "path": "x", "recursive": True, "tag": "rm"})
            reply = recv_reply(s)
        self.assertEqual((reply["ok"], reply.get("tag")), (False, "rm"), reply)
        self.assertIn("already waits", reply["error"]["message"])
        self.assertLess(self.served_at_once(), 20)

    def test_out_of_descriptors_a_job_is_still_never_waited_for_in_the_loop(self):
        # A supervisor at its open-files limit: the job's pidfd cannot be opened (it is then
        # reaped on SIGCHLD; it was waited for in the loop, holding every other request and
        # the ttl), and accept fails (the loop spun on the readable listening socket).
        run_nsbox(["rm", self.id], self.dirs)
        r = run_nsbox(["create"], self.dirs, wrap=lambda cmd: ["prlimit", "--nofile=40:40"] + cmd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.id = r.stdout.decode().strip()
        sup = json.loads(run_nsbox(["inspect", self.id], self.dirs, check=True).stdout)
        sup = sup["supervisor_pid"]

        def cpu_s():
            with open("/proc/%d/stat" % sup) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        def ping(s, wait=1.0):
            s.settimeout(wait)
            try:
                send_request(s, {"op": "ping"})
                return recv_reply(s)["ok"]
            except (socket.timeout, ConnectionError):
                return False

        idle = []
        self.addCleanup(lambda: [s.close() for s in idle])
        while len(idle) < 60:  # until one is not served: no descriptor left to accept it
            s = control_socket(self.dirs, self.id)
            idle.append(s)
            if not ping(s):
                break
        self.assertLess(len(idle), 60, "the limit of 40 descriptors was never reached")
        c0 = cpu_s()
        time.sleep(2)  # the last one waits in the backlog meanwhile
        self.assertLess(cpu_s() - c0, 0.5, "the supervisor spun on its listening socket")
        idle.pop().close()  # the one in the backlog
        idle.pop().close()  # two descriptors free: the write's connection and its pipe, and
        idle.pop().close()  # none for the job's pidfd
        time.sleep(0.3)
        cp = self.slow_cp()
        # its request must have taken the two before one more is freed (nsbox cp may take
        # longer than a fixed pause to start on a slow machine): its job runs then
        self.assertTrue(wait_for(lambda: len(self.supervisor_children(sup)) == 2, 30),
                        "the write's job never started")
        idle.pop().close()  # a descriptor for the next connection
        time.sleep(0.3)
        s = control_socket(self.dirs, self.id)
        idle.append(s)
        self.assertTrue(ping(s, 10), "a request waited for the stalled write")
        out, err = cp.communicate(b"late\n", timeout=30)
        self.assertEqual(cp.returncode, 0, err)
        self.assertTrue(ping(s, 10))
        self.assertTrue(wait_for(lambda: len(self.supervisor_children(sup)) == 1, 10),
                        "the job was never reaped (no pidfd: SIGCHLD must do it)")

    def test_a_big_recursive_remove_holds_nothing_else(self):
        r = run_nsbox(["exec", self.id, "--", "python3", "-c",
                       "import os\nfor i in range(100):\n d = 'big/d%d' % i\n os.makedirs(d)\n"
                       " for j in range(1000): open(d + '/f%d' % j, 'w').close()"],
                      self.dirs, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        (init,) = self.supervisor_children()
        big = f"/proc/{init}/root/workspace/big"
        with control_socket(self.dirs, self.id, timeout=120) as s:
            send_request(s, {"op": "remove", "path": "big", "recursive": True})
            # under way: the tree shrinks
            deadline = time.monotonic() + 60
            while len(os.listdir(big)) == 100:
                self.assertLess(time.monotonic(), deadline, "the remove never started")
                time.sleep(0.005)
            self.served_at_once()
            ready, _, _ = select.select([s], [], [], 0)
            self.assertFalse(ready, "the exec was served only after the remove")
            self.assertTrue(os.path.exists(big), "the remove ended before the exec")
            reply = recv_reply(s)
        self.assertTrue(reply["ok"], reply)
        self.assertFalse(os.path.exists(big))


    def test_a_huge_directorys_listing_holds_nothing_else(self):
        # Every part of a listing is answered in the supervisor's loop. The first also counts
        # the names after it, and counted up to 6.4 million: hard links (no inode each, cheap
        # for a sandbox) made a directory whose every listing held exec, kill and the ttl for
        # seconds, and past that count the listing's bound was off. The count stops at
        # 400,000 names, which the first reply's cursor shows: the names it listed and twice
        # 400,000 may follow, where twice the whole rest was allowed. (A directory big enough
        # for the old count to hold the loop for long takes minutes to make, so the promptness
        # is checked here for what a part costs, not against the old stall.)
        n, count_max = 600000, 400000
        make = ("mkdir huge && cd huge && exec python3 -c 'import os\n"
                "for i in range(%d):\n"
                "    if i %% 60000 == 0:\n"  # ext4 allows 65,000 links to one inode
                "        src = \"%%07d\" %% i\n"
                "        open(src, \"w\").close()\n"
                "    else:\n"
                "        os.link(src, \"%%07d\" %% i)'" % n)
        r = run_nsbox(["exec", self.id, "--", "sh", "-c", make], self.dirs, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        with control_socket(self.dirs, self.id, timeout=120) as s:
            send_request(s, {"op": "list", "path": "huge"})
            first = recv_reply(s)
        self.assertTrue(first["ok"] and first["truncated"], first.get("error"))
        k = len(first["entries"])
        # the cursor is opaque to clients; this test reads it to see what was counted
        self.assertEqual(int(first["next"].split(":")[1]), k + 2 * count_max,
                         "the first part counted past %d names" % count_max)

        done, lists, failure = threading.Event(), [], []

        def lister():  # whole listings, one after another, until the execs are done
            try:
                with control_socket(self.dirs, self.id, timeout=120) as c:
                    while not done.is_set():
                        names, cursor, last = [], None, None
                        while True:
                            send_request(c, {"op": "list", "path": "huge",
                                             **({"cursor": cursor} if cursor else {})})
                            last = recv_reply(c)
                            if not last["ok"]:
                                raise AssertionError(last)
                            names += [e["name"] for e in last["entries"]]
                            if not last["truncated"]:
                                break
                            cursor = last["next"]
                        lists.append((names, last["incomplete"]))
            except Exception as e:  # reported by the test's thread
                failure.append(e)

        t = threading.Thread(target=lister, daemon=True)
        t.start()
        try:
            for _ in range(3):
                # Generous: a part reads at most 100,000 entries and counts at most 400,000
                # names (well under a second); 10 s leaves room for a loaded machine.
                self.assertLess(self.served_at_once(), 10)
                self.assertTrue(t.is_alive(), failure or "the listing stopped")
        finally:
            done.set()
            t.join(300)
        self.assertFalse(failure, failure)
        self.assertTrue(lists, "no listing ended")
        names, incomplete = lists[-1]
        # a directory left alone, bigger than the count reaches, is listed whole
        self.assertFalse(incomplete)
        self.assertEqual(sorted(names), ["%07d" % i for i in range(n)])


class DiskLimit(unittest.TestCase):
    """The workspace's disk limit is not enforced on the file system yet (docs/files.md), but a
    single write larger than it is refused, before anything is written."""

    def setUp(self):
        self.dirs = Dirs()
        self.sid = None

    def tearDown(self):
        if self.sid:
            run_nsbox(["rm", self.sid], self.dirs)
        self.dirs.cleanup()

    def test_a_write_larger_than_the_disk_limit_is_refused(self):
        r = run_nsbox(["create", "--instance-type", "small"], self.dirs)  # 2 GiB of disk
        self.assertEqual(r.returncode, 0, r.stderr)
        self.sid = r.stdout.decode().strip()
        src = os.path.join(self.dirs.base, "three-gib")
        with open(src, "wb") as f:
            f.truncate(3 * GiB)
        r = run_nsbox(["cp", src, f"{self.sid}:/workspace/huge"], self.dirs, timeout=120)
        self.assertEqual(r.returncode, 125,
                         "a 3 GiB write was accepted by a sandbox with a 2 GiB disk limit: does "
                         "the supervisor pass limits.disk_bytes to nsbox_files_op_ex?")
        self.assertIn("more than the sandbox's workspace disk limit of 2 GiB", r.stderr.decode())
        r = run_nsbox(["exec", self.sid, "--", "ls", "/workspace"], self.dirs)
        self.assertEqual(r.stdout, b"")


if __name__ == "__main__":
    unittest.main()
