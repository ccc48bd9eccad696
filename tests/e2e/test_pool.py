"""End-to-end: the warm pool of `nsbox run` (docs/pool.md).

With a pool (by default once runs of the same settings repeat; with {"pool": {"size": N}} in
the config from the first run on), `nsbox run` takes a sandbox made ahead of time for the same
settings, runs its one command there, and deletes it; the used sandbox's supervisor makes a
replacement. These tests check that a pooled run is the same as a cold one for the
user (output, exit codes, environment, hardening, signals, a fresh sandbox every time), that
nothing of a used sandbox outlives its run, and that the pool itself is kept in bounds (ttl,
drain, gc, mismatching settings, concurrent runs)."""
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
import unittest

from nsbox_test import (NSBOX, Dirs, cgroup_leftovers, gc_just_ran, is_root, loop_devices_under,
                        run_nsbox, signal_pending, state_lock_free, wait_for)


def readline(p, timeout=10.0):
    """A line of p's stdout, or b"" if none comes in time (a test must fail, not hang)."""
    import select
    if select.select([p.stdout], [], [], timeout)[0]:
        return p.stdout.readline()
    return b""


def read(path):
    with open(path, "rb") as f:
        return f.read()


def children(pid):
    """The pids whose parent is pid (its own children, even while traced: /proc's ppid is the
    parent's, not the tracer's)."""
    out = []
    for n in os.listdir("/proc"):
        try:
            with open(f"/proc/{n}/stat") as f:
                stat = f.read()
        except (OSError, ValueError):
            continue
        if n.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(n))
    return out


class Pool(unittest.TestCase):
    maxDiff = None
    SIZE = 1
    TTL = 120

    def setUp(self):
        self.dirs = Dirs()
        self.config = os.path.join(self.dirs.base, "config.json")
        self.write_config({"pool": {"size": self.SIZE, "ttl_seconds": self.TTL}})
        self.env = {"NSBOX_CONFIG": self.config}

    def tearDown(self):
        run_nsbox(["pool", "drain"], self.dirs, extra_env=self.env)
        wait_for(lambda: not self.live_ids(), 20)
        self.dirs.cleanup()

    def write_config(self, cfg):
        with open(self.config, "w") as f:
            json.dump(cfg, f)

    def nsbox(self, *args, **kw):
        kw.setdefault("extra_env", self.env)
        return run_nsbox(list(args), self.dirs, **kw)

    def entries(self):
        return json.loads(self.nsbox("pool", "ls", "--json", check=True).stdout)

    def strace_or_skip(self, what):
        """strace's path, which holds a system call of another process here (its delay
        injection); the test is skipped without it."""
        strace = shutil.which("strace")
        if not strace:
            self.skipTest("needs strace to hold " + what)
        return strace

    def pooled(self):
        return [e["id"] for e in self.entries()]

    def live_ids(self):
        return self.dirs.live_ids()

    def fill(self, n=None):
        args = ["pool", "fill"] + (["--size", str(n)] if n else [])
        r = self.nsbox(*args, check=True)
        self.assertIn(b"ready", r.stdout)
        ids = self.pooled()
        self.assertEqual(len(ids), n or self.SIZE, ids)
        return ids

    def gone(self, sid):
        """Nothing of sandbox sid is left: state, cache, cgroups, loop devices."""
        return (not os.path.exists(os.path.join(self.dirs.state, sid)) and
                not os.path.exists(os.path.join(self.dirs.cache, sid)) and
                not cgroup_leftovers(sid) and
                not [d for d in loop_devices_under(self.dirs.cache) if sid in d])

    def run_pooled(self, *args, **kw):
        """nsbox run with a pooled sandbox ready; checks that the run took it."""
        ids = wait_for(self.pooled)
        self.assertTrue(ids, "the pool was not refilled")
        r = self.nsbox("run", *args, **kw)
        self.assertFalse(set(ids) & set(self.pooled()), "the run did not take the pooled sandbox")
        return r, ids[0]

    # ---- the pool's life ------------------------------------------------------------------

    def test_run_takes_the_pooled_sandbox_and_a_replacement_follows(self):
        (sid,) = self.fill()
        r = self.nsbox("run", "--", "hostname", check=True)
        self.assertEqual(r.stdout.decode().strip(), "nsbox-" + sid)
        self.assertTrue(wait_for(lambda: self.gone(sid)), f"sandbox {sid} left something")
        new = wait_for(self.pooled)
        self.assertEqual(len(new), 1)
        self.assertNotEqual(new[0], sid)
        # the replacement is ready for the next run
        r = self.nsbox("run", "--", "hostname", check=True)
        self.assertEqual(r.stdout.decode().strip(), "nsbox-" + new[0])

    def test_first_run_is_cold_and_fills_the_pool(self):
        self.assertEqual(self.pooled(), [])
        r = self.nsbox("run", "--", "sh", "-c", "hostname; echo ok", check=True)
        cold_id = r.stdout.decode().split()[0][len("nsbox-"):]
        ids = wait_for(self.pooled)
        self.assertEqual(len(ids), 1, "no pool fill started after a cold run")
        self.assertNotEqual(ids[0], cold_id)

    # ---- the default: "auto", a pool once runs repeat ---------------------------------------

    def marks(self, suffix):
        d = os.path.join(self.dirs.state, "pool")
        return sorted(n for n in os.listdir(d) if n.endswith(suffix)) if os.path.isdir(d) else []

    def hostname_run(self):
        r = self.nsbox("run", "--", "hostname", check=True)
        return r.stdout.decode().strip()[len("nsbox-"):]

    def test_by_default_a_lone_run_leaves_nothing_running(self):
        self.write_config({})  # no pool section: nsbox's default
        sid = self.hostname_run()
        time.sleep(1.0)  # time enough for a filler to have made something
        self.assertEqual(self.pooled(), [])
        self.assertEqual(self.live_ids(), [])
        self.assertEqual(cgroup_leftovers(sid), [])
        # what it keeps is the time of the run, in an empty file named by the settings' key
        (seen,) = self.marks(".seen")
        self.assertEqual(os.path.getsize(os.path.join(self.dirs.state, "pool", seen)), 0)
        self.assertEqual(sorted(os.listdir(os.path.join(self.dirs.state, "pool"))), [seen])

    def test_by_default_the_pool_starts_when_runs_repeat(self):
        self.write_config({})
        first = self.hostname_run()
        self.assertEqual(self.pooled(), [])
        second = self.hostname_run()
        ids = wait_for(lambda: len(self.pooled()) == 2 and self.pooled())
        self.assertTrue(ids, f"no pool of 2 after a repeated run: {self.pooled()}")
        self.assertFalse({first, second} & set(ids))
        # the third run takes one of them, and the pool is made whole again
        self.assertIn(self.hostname_run(), ids)
        self.assertTrue(wait_for(lambda: len(self.pooled()) == 2), self.pooled())
        # and the pool keeps the default ttl of the auto mode
        info = json.loads(self.nsbox("inspect", self.pooled()[0], check=True).stdout)
        self.assertEqual(info["spec"]["ttl_seconds"], 60, info)

    def test_auto_runs_further_apart_than_the_ttl_make_no_pool(self):
        # Whether a run repeats the one before is judged as it ends, from the mark the one
        # before left as it ended; the pool's members live as long. A ttl of 1 s can be
        # shorter than one run (or the fill of two members) in CI's emulated VM.
        self.write_config({"pool": {"size": "auto", "ttl_seconds": 10}})
        self.hostname_run()
        # as if the next run came 12 s later (the mark has whole seconds: more than the ttl,
        # surely)
        (seen,) = self.marks(".seen")
        past = time.time() - 12
        os.utime(os.path.join(self.dirs.state, "pool", seen), (past, past))
        self.hostname_run()
        time.sleep(1.0)
        self.assertEqual((self.pooled(), self.live_ids()), ([], []))
        # two close together do (this one and the one before); then the pool goes after its ttl
        self.hostname_run()
        ids = wait_for(lambda: len(self.pooled()) == 2 and self.pooled())
        self.assertTrue(ids, self.pooled())
        self.assertTrue(wait_for(lambda: not self.pooled() and not self.live_ids(), 40),
                        "the auto pool outlived its ttl")

    def test_auto_stops_trying_after_a_fill_failed_and_says_why(self):
        self.write_config({})
        self.hostname_run()
        (seen,) = self.marks(".seen")
        key = seen[:-len(".seen")]
        # the filler's lock is a directory now: every fill of this key fails
        lock = os.path.join(self.dirs.state, "pool", key + ".lock")
        os.mkdir(lock)
        self.hostname_run()
        failed = os.path.join(self.dirs.state, "pool", key + ".failed")
        self.assertTrue(wait_for(lambda: os.path.exists(failed)), "no record of the failed fill")
        self.assertTrue(wait_for(lambda: not self.live_ids(), 10), self.live_ids())
        r = self.nsbox("pool", "ls", check=True)
        # when, too: a failure of a minute ago and one of yesterday read differently
        self.assertRegex(r.stderr.decode(), f"the last fill for key {key} failed "
                         r"(just now|\d+ s ago): pool fill: pool lock")
        # further runs run cold without starting a filler each time (it would rewrite the file)
        with open(failed, "w") as f:
            f.write("marker\n")
        for _ in range(3):
            self.hostname_run()
        time.sleep(1.0)
        self.assertEqual(read(failed), b"marker\n")
        # once the cause is gone and the record too, repeated runs fill again; and a fill that
        # works removes the record
        os.rmdir(lock)
        os.unlink(failed)
        self.hostname_run()
        self.assertTrue(wait_for(lambda: len(self.pooled()) == 2), self.pooled())
        with open(failed, "w") as f:
            f.write("old\n")
        self.nsbox("pool", "fill", check=True)
        self.assertFalse(os.path.exists(failed))

    def test_drain_forgets_the_runs_and_gc_old_marks(self):
        self.write_config({})
        self.hostname_run()
        self.hostname_run()
        self.assertTrue(wait_for(lambda: len(self.pooled()) == 2), self.pooled())
        self.nsbox("pool", "drain", check=True)
        self.assertTrue(wait_for(lambda: not self.live_ids(), 20), self.live_ids())
        self.assertEqual(self.marks(".seen"), [])
        # so one run after a drain is a lone run again
        self.hostname_run()
        time.sleep(1.0)
        self.assertEqual((self.pooled(), self.live_ids()), ([], []))
        # gc removes marks nobody renewed for a day, and only those
        (seen,) = self.marks(".seen")
        old = os.path.join(self.dirs.state, "pool", "0123456789abcdef.seen")
        with open(old, "w"):
            pass
        os.utime(old, (time.time() - 2 * 86400,) * 2)
        self.nsbox("gc", check=True)
        self.assertEqual(self.marks(".seen"), [seen])

    def test_gc_removes_fillers_locks_idle_for_a_day_unless_held(self):
        self.write_config({"pool": {"size": 1}})
        self.fill(1)
        (lock,) = self.marks(".lock")
        pool = os.path.join(self.dirs.state, "pool")
        day_ago = (time.time() - 2 * 86400,) * 2
        held = os.path.join(pool, "0123456789abcdef.lock")
        with open(held, "w") as h:
            fcntl.flock(h, fcntl.LOCK_EX)  # a filler at work on that key
            for name in (lock, "0123456789abcdef.lock"):
                os.utime(os.path.join(pool, name), day_ago)
            self.nsbox("gc", check=True)
            self.assertEqual(self.marks(".lock"), ["0123456789abcdef.lock"])
        # the pool works on without its lock file: the next fill makes it again
        self.nsbox("pool", "drain", check=True)
        self.fill(1)
        self.assertIn(lock, self.marks(".lock"))
        # and one in use is not old: the fill renewed its time
        self.assertLess(time.time() - os.stat(os.path.join(pool, lock)).st_mtime, 600)

    def test_a_drain_right_after_two_runs_wins_over_their_filler(self):
        # The filler the second run starts may not hold its lock yet when the drain waits for
        # the fillers at work: it must still make nothing.
        self.write_config({})
        for _ in range(4):
            self.hostname_run()
            self.hostname_run()
            self.nsbox("pool", "drain", check=True)
            # A filler that took its lock before the drain's mark made its sandboxes, which the
            # drain deleted: their supervisors remove their state after it returned.
            self.assertEqual(self.pooled(), [])
            self.assertTrue(wait_for(lambda: not self.live_ids(), 20), self.live_ids())
            time.sleep(1.0)  # time enough for a filler that gave way to have made something
            self.assertEqual((self.pooled(), self.live_ids()), ([], []))

    def test_runs_that_cannot_make_their_sandbox_start_no_pool(self):
        self.write_config({})
        for _ in range(2):
            r = self.nsbox("run", "--image", "nosuch", "--", "true")
            self.assertEqual(r.returncode, 125)
        time.sleep(1.0)
        self.assertEqual((self.pooled(), self.live_ids()), ([], []))
        self.assertEqual((self.marks(".seen"), self.marks(".failed")), ([], []))

    def test_size_0_turns_the_pool_off(self):
        self.write_config({"pool": {"size": 0}})
        for _ in range(3):
            r = self.nsbox("run", "--", "true")
            self.assertEqual(r.returncode, 0, r.stderr)
        time.sleep(1.0)
        self.assertEqual((self.pooled(), self.live_ids(), self.marks(".seen")), ([], [], []))
        r = self.nsbox("pool", "fill")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"the pool is off", r.stderr)

    def test_a_bad_pool_config_is_an_error_naming_the_key(self):
        self.write_config({"pool": {"size": 100}})
        r = self.nsbox("run", "--", "true")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"pool.size", r.stderr)

    # ---- a config file edited while a filler works -----------------------------------------

    def fill_with_an_edit(self, edit):
        """`nsbox pool fill --size 2` that meets edit(), made once the first member is listed
        and the filler has forked the second one's supervisor: strace holds each process's
        first look at the config file (-P: the calls that name it) for 2 s, so that the second
        supervisor, forked from the filler with the file it had read (and had looked at again
        before the fork), looks only after the edit. The filler's stdout and stderr once it
        ended, and the listed members' inspect (the second None if none was made)."""
        strace = self.strace_or_skip("the supervisors' look at the config file")
        pool_dir = os.path.join(self.dirs.state, "pool")
        members = lambda: sorted(n for n in (os.listdir(pool_dir) if os.path.isdir(pool_dir)
                                             else []) if "-" in n and "." not in n)
        out, err = (os.path.join(self.dirs.base, n) for n in ("fill.out", "fill.err"))
        with open(out, "wb") as o, open(err, "wb") as e:
            tracer = subprocess.Popen(
                [strace, "-f", "-I1", "-o", "/dev/null", "-P", self.config, "-e",
                 "trace=newfstatat", "-e", "inject=newfstatat:delay_enter=2000000:when=1", NSBOX,
                 "pool", "fill", "--size", "2"], stdout=o, stderr=e, env=self.dirs.env(self.env))
        try:
            before = wait_for(members, 60)
            self.assertTrue(before, "the first member never came")
            # the filler (strace's child) and the two supervisors it forked, the first one's
            # done: the second one's is held before its first look
            filler = wait_for(lambda: children(tracer.pid), 10)
            self.assertEqual(len(filler), 1, filler)
            self.assertTrue(wait_for(lambda: len(children(filler[0])) == 2, 20),
                            "the second member's supervisor never came")
            edit()
            self.assertTrue(wait_for(lambda: b"ready" in read(out) or b"nsbox:" in read(err), 60),
                            read(err))
        finally:
            tracer.terminate()  # -I1: it ends at once and the supervisors go on, untraced
            tracer.wait(20)
        self.assertEqual(len(before), 1, before)
        ids = [n.split("-", 1)[1] for n in before + sorted(set(members()) - set(before))]
        info = [json.loads(self.nsbox("inspect", i, check=True).stdout) for i in ids]
        return read(out), read(err), info + [None] * (2 - len(info))

    @unittest.skipUnless(os.geteuid() == 0 and os.path.exists("/dev/loop-control"),
                         "tells the workspace's kind apart: ext4 is root's, on a loop device")
    def test_a_fill_that_meets_an_edit_of_the_config_stops_and_the_next_follows_it(self):
        self.write_config({"pool": {"size": 2, "ttl_seconds": self.TTL},
                           "workspace": {"fs": "tmpfs"}})
        edited = os.path.join(self.dirs.base, "edited.json")

        def edit():  # as an editor that writes aside and renames does
            with open(edited, "w") as f:
                json.dump({"pool": {"size": 2, "ttl_seconds": self.TTL},
                           "workspace": {"fs": "ext4"}}, f)
            os.rename(edited, self.config)
        out, err, (first, second) = self.fill_with_an_edit(edit)
        # the second member, made with the edited file, is not pooled under the key of the
        # file before (which runs with that file, an edit reverted, would take), and the fill
        # stops
        self.assertIsNone(second)
        self.assertEqual(out, b"")
        self.assertEqual(err.decode(),
                         f"nsbox: pool fill: the config file {self.config} changed during the "
                         "fill: stopped after 1 pooled sandbox made with the file as it was; "
                         "runs with the file as it is now start a filler of their own (or run "
                         "`nsbox pool fill` again)\n")
        self.assertEqual(first["disk"]["kind"], "tmpfs")
        (old,) = self.entries()
        self.assertEqual(old["id"], first["id"])
        # the pool's state says why, for a filler that a run started
        r = self.nsbox("pool", "ls", check=True)
        self.assertRegex(r.stderr.decode(), f"the last fill for key {old['key']} failed "
                         r"(just now|\d+ s ago): pool fill: the config file " +
                         re.escape(self.config) + " changed during the fill")
        # the next fill takes the key of the file as it is, and its members follow it
        r = self.nsbox("pool", "fill", "--size", "1", check=True)
        self.assertEqual(r.stdout, b"1 pooled sandbox ready\n", r.stderr)
        new = [m for m in self.entries() if m["id"] != old["id"]]
        self.assertEqual(len(new), 1, new)
        self.assertNotEqual(new[0]["key"], old["key"])
        info = json.loads(self.nsbox("inspect", new[0]["id"], check=True).stdout)
        self.assertEqual(info["disk"]["kind"], "ext4")
        # nothing is left of the member that was not pooled
        self.assertEqual(sorted(self.live_ids()), sorted([old["id"], new[0]["id"]]))

    def check_a_fill_goes_on_past(self, edit):
        """A fill that meets edit(), which leaves the config's text as it was: the filler and
        the second member's supervisor read the file again and find the text the fill started
        from, so both members are pooled and no failure is kept for the key."""
        self.write_config({"pool": {"size": 2, "ttl_seconds": self.TTL}})
        text = read(self.config)
        out, err, (first, second) = self.fill_with_an_edit(lambda: edit(text))
        self.assertEqual((out, err), (b"2 pooled sandboxes ready\n", b""))
        self.assertEqual(read(self.config), text)
        self.assertIsNotNone(second)
        self.assertEqual(sorted(m["id"] for m in self.entries()),
                         sorted([first["id"], second["id"]]))
        r = self.nsbox("pool", "ls", check=True)
        self.assertNotIn(b"failed", r.stderr)

    def test_a_touch_of_the_config_during_a_fill_does_not_stop_it(self):
        def touch(text):  # a later mtime and ctime, the same inode and bytes
            st = os.stat(self.config)
            os.utime(self.config, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
            os.chmod(self.config, 0o640)
        self.check_a_fill_goes_on_past(touch)

    def test_the_same_text_renamed_over_the_config_during_a_fill_does_not_stop_it(self):
        def rewrite(text):  # as an editor that saves unchanged text aside and renames it in
            same = os.path.join(self.dirs.base, "same.json")
            with open(same, "wb") as f:
                f.write(text)
            os.rename(same, self.config)
        self.check_a_fill_goes_on_past(rewrite)

    def test_an_edit_after_the_instance_types_were_read_stops_the_fill_before_any_member(self):
        """The members' limits come from the instance types the command read first; the key
        from the file as the fill finds it. strace holds the filler's third look at the file
        (the first two read the types) while the file is edited: the fill makes nothing under
        a key whose limits would not be its members'."""
        strace = self.strace_or_skip("the filler's look at the config file")
        cfg = lambda mem: {"pool": {"size": 2, "ttl_seconds": self.TTL},
                           "instance_types": {"medium": {"memory": mem}}}
        self.write_config(cfg("1GiB"))
        log, out, err = (os.path.join(self.dirs.base, n) for n in ("strace.log", "fill.out",
                                                                    "fill.err"))
        with open(out, "wb") as o, open(err, "wb") as e:
            tracer = subprocess.Popen(
                [strace, "-f", "-I1", "-o", log, "-P", self.config, "-e", "trace=newfstatat",
                 "-e", "inject=newfstatat:delay_enter=2000000:when=3", NSBOX, "pool", "fill"],
                stdout=o, stderr=e, env=self.dirs.env(self.env))
        try:
            # strace writes a call's first half as it holds it
            self.assertTrue(wait_for(lambda: os.path.exists(log) and
                                     read(log).count(b"newfstatat(") == 3, 30), read(err))
            edited = os.path.join(self.dirs.base, "edited.json")
            with open(edited, "w") as f:
                json.dump(cfg("2GiB"), f)
            os.rename(edited, self.config)
            self.assertTrue(wait_for(lambda: b"ready" in read(out) or b"nsbox:" in read(err), 60),
                            read(err))
        finally:
            tracer.terminate()
            tracer.wait(20)
        self.assertEqual(read(out), b"")
        self.assertIn(b"changed during the fill: stopped after 0 pooled sandboxes", read(err))
        self.assertEqual(self.entries(), [])
        # the next fill's members have the limits of the file as it is
        (sid,) = self.fill(1)
        info = json.loads(self.nsbox("inspect", sid, check=True).stdout)
        self.assertEqual(info["limits"]["memory_bytes"], 2 << 30)

    def test_a_broken_edit_of_the_config_fails_the_fill_and_keeps_the_pool(self):
        self.write_config({"pool": {"size": 2, "ttl_seconds": self.TTL}})
        good = read(self.config)

        def edit():  # in place, half written
            with open(self.config, "r+b") as f:
                f.truncate(0)
                f.write(b'{"pool": {"size": 2, "ttl_')
        out, err, (first, second) = self.fill_with_an_edit(edit)
        self.assertIsNone(second)
        self.assertEqual(out, b"")
        # the filler's own error, with the file's name and what is wrong with it
        self.assertRegex(err.decode(), r"^nsbox: pool fill: config " + self.config +
                         r": invalid JSON: the text ends before its object does, after 26 "
                         r"bytes: is it whole\?\n$")
        # kept for `pool ls`, and the member made before the edit waits for its run
        r = self.nsbox("pool", "ls", check=True)
        self.assertIn("invalid JSON", r.stderr.decode())
        self.assertEqual(self.pooled(), [first["id"]])
        with open(self.config, "wb") as f:
            f.write(good)
        r, used = self.run_pooled("--", "true")
        self.assertEqual((r.returncode, used), (0, first["id"]), r.stderr)

    def test_other_settings_run_cold_and_leave_the_pool_alone(self):
        (sid,) = self.fill()
        ws = os.path.join(self.dirs.base, "mine")
        os.mkdir(ws)
        for extra in (["--instance-type", "small"], ["--workspace", ws],
                      ["--network", "all"] if is_root() else ["--instance-type", "large"]):
            r = self.nsbox("run", *extra, "--", "hostname")
            self.assertEqual(r.returncode, 0, (extra, r.stderr))
            self.assertNotEqual(r.stdout.decode().strip(), "nsbox-" + sid, extra)
        self.assertIn(sid, self.pooled())
        # the settings that only concern the command do not matter
        r = self.nsbox("run", "-e", "X=1", "--cwd", "/tmp", "--timeout", "30", "--", "hostname")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode().strip(), "nsbox-" + sid)
        # its supervisor removes the entry when init reports the claim, which a busy machine
        # (the fills those cold runs started) can delay past the run's end
        self.assertTrue(wait_for(lambda: sid not in self.pooled(), 10), self.pooled())

    def test_a_run_from_another_network_namespace_runs_cold(self):
        # A pooled sandbox's network is made in its filler's network namespace (routes,
        # firewall); a run under `ip netns exec` (here: unshare -n) took it all the same.
        if not is_root():
            self.skipTest("unshare -n needs root")
        (sid,) = self.fill()
        r = self.nsbox("run", "--", "hostname", wrap=lambda cmd: ["unshare", "-n"] + cmd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotEqual(r.stdout.decode().strip(), "nsbox-" + sid)
        self.assertIn(sid, self.pooled())
        r = self.nsbox("run", "--", "hostname", check=True)  # from here it is taken
        self.assertEqual(r.stdout.decode().strip(), "nsbox-" + sid)

    def test_a_rebuilt_image_is_not_taken_from_the_pool(self):
        # A pooled sandbox keeps the image it was made with. After `nsbox image build host`
        # (which an apt run on the host also triggers), runs took it all the same.
        (sid,) = self.fill()  # in a new data directory: the fill builds the host image
        r = self.nsbox("run", "--", "hostname", check=True)
        self.assertEqual(r.stdout.decode().strip(), "nsbox-" + sid)
        new = wait_for(self.pooled)
        self.assertEqual(len(new), 1, "no replacement")
        self.nsbox("image", "build", "host", check=True)
        r = self.nsbox("run", "--", "hostname", check=True)
        self.assertNotEqual(r.stdout.decode().strip(), "nsbox-" + new[0])
        self.assertIn(new[0], self.pooled())

    def test_a_replaced_directory_image_is_not_taken_from_the_pool(self):
        # A directory image named through a link that a deploy switches to a new tree: the
        # pool's sandbox has the old tree mounted. A fill only needs an executable bin/sh; the
        # runs' command does not exist in either tree (127), what matters is which sandbox ran.
        trees = []
        for name in ("v1", "v2"):
            d = os.path.join(self.dirs.base, name)
            os.makedirs(os.path.join(d, "bin"))
            with open(os.path.join(d, "bin", "sh"), "w") as f:
                f.write("#!/nonexistent\n")
            os.chmod(os.path.join(d, "bin", "sh"), 0o755)
            os.chmod(d, 0o755)
            trees.append(d)
        os.chmod(self.dirs.base, 0o755)
        current = os.path.join(self.dirs.base, "current")

        def point_at(tree):
            os.symlink(tree, current + ".new")
            os.replace(current + ".new", current)

        def run():
            return self.nsbox("run", "--image", current, "--", "/nonexistent").returncode

        point_at(trees[0])
        r = self.nsbox("pool", "fill", "--image", current, check=True)
        self.assertIn(b"ready", r.stdout)
        ((sid, key),) = [(e["id"], e["key"]) for e in self.entries()]
        point_at(trees[1])
        self.assertEqual(run(), 127)
        self.assertIn(sid, self.pooled(), "a run of the new tree took a sandbox of the old one")
        point_at(trees[0])  # the same tree again: the same key
        self.assertEqual(run(), 127)
        self.assertTrue(wait_for(lambda: sid not in self.pooled(), 10), self.pooled())
        # An entry added at the top of the tree, which a sandbox mounts one by one when it is
        # made: the pooled sandbox (the replacement of the one just taken) has no /opt.
        new = wait_for(lambda: [e["id"] for e in self.entries() if e["key"] == key])
        self.assertEqual(len(new), 1, self.entries())
        new = new[0]
        os.mkdir(os.path.join(trees[0], "opt"))
        self.assertEqual(run(), 127)
        self.assertIn(new, self.pooled(), "a run took a sandbox made before /opt was added")

    def test_a_stored_image_whose_rootfs_was_replaced_is_not_taken_from_the_pool(self):
        store = os.path.join(self.dirs.data, "images", "mine")
        self.addCleanup(shutil.rmtree, store, True)
        for name in ("rootfs", "rootfs.new"):
            os.makedirs(os.path.join(store, name, "bin"))
            with open(os.path.join(store, name, "bin", "sh"), "w") as f:
                f.write("#!/nonexistent\n")
            os.chmod(os.path.join(store, name, "bin", "sh"), 0o755)
        r = self.nsbox("pool", "fill", "--image", "mine", check=True)
        self.assertIn(b"ready", r.stdout)
        (sid,) = self.pooled()
        os.rename(os.path.join(store, "rootfs"), os.path.join(store, "rootfs.old"))
        os.rename(os.path.join(store, "rootfs.new"), os.path.join(store, "rootfs"))
        r = self.nsbox("run", "--image", "mine", "--", "/nonexistent")
        self.assertEqual(r.returncode, 127, r.stderr)
        self.assertIn(sid, self.pooled(), "a run took a sandbox of the replaced rootfs")

    def test_ttl_deletes_unused_pooled_sandboxes(self):
        self.write_config({"pool": {"size": 1, "ttl_seconds": 1}})
        (sid,) = self.fill()
        self.assertTrue(wait_for(lambda: not self.pooled() and self.gone(sid), 15),
                        "a pooled sandbox outlived its ttl")

    def test_drain_deletes_them_all(self):
        ids = self.fill(3)
        r = self.nsbox("pool", "drain", check=True)
        self.assertIn(b"deleted 3 pooled sandboxes", r.stdout)
        for sid in ids:
            self.assertTrue(wait_for(lambda: self.gone(sid)), sid)
        self.assertEqual(self.pooled(), [])

    def test_drain_right_after_runs_leaves_nothing(self):
        # the used sandboxes' replacements are under way when drain comes: it stops them
        self.fill()
        for _ in range(3):
            r = self.nsbox("run", "--", "true")
            self.assertEqual(r.returncode, 0, r.stderr)
        self.nsbox("pool", "drain", check=True)
        self.assertTrue(wait_for(lambda: not self.live_ids(), 20), self.live_ids())
        time.sleep(1.0)
        self.assertEqual((self.live_ids(), self.pooled()), ([], []))
        # a fill asked for afterwards starts the pool again, and so do its refills
        (sid,) = self.fill()
        r = self.nsbox("run", "--", "hostname", check=True)
        self.assertEqual(r.stdout.decode().strip(), "nsbox-" + sid)
        self.assertTrue(wait_for(self.pooled), "no refill after a new fill")

    def test_drain_leaves_a_run_under_way_alone(self):
        # The run and the drain reach the supervisor together (it is stopped meanwhile, so
        # that the drain still lists the sandbox): the run gets it, the drain's delete is
        # refused, and the run ends normally.
        (sid,) = self.fill()
        sup = json.loads(self.nsbox("inspect", sid, check=True).stdout)["supervisor_pid"]
        env = self.dirs.env(self.env)
        os.kill(sup, signal.SIGSTOP)
        try:
            p = subprocess.Popen([NSBOX, "run", "--", "sh", "-c", "echo started; sleep 1; "
                                  "echo finished"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env)
            time.sleep(0.5)  # its request is queued
            d = subprocess.Popen([NSBOX, "pool", "drain"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env)
            time.sleep(0.5)
        finally:
            os.kill(sup, signal.SIGCONT)
        try:
            out, err = p.communicate(timeout=60)
            d.communicate(timeout=60)
        finally:
            p.kill()
            d.kill()
        self.assertEqual((p.returncode, out), (0, b"started\nfinished\n"), err)
        self.assertTrue(wait_for(lambda: self.gone(sid)))

    def test_a_request_that_cannot_start_keeps_the_pool(self):
        # a directory as stdin: refused before the sandbox is used up; the cold run says why
        (sid,) = self.fill()
        fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
        try:
            r = subprocess.run([NSBOX, "run", "--", "true"], stdin=fd, capture_output=True,
                               env=self.dirs.env(self.env), timeout=60)
        finally:
            os.close(fd)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"stdin", r.stderr)
        self.assertEqual(self.pooled(), [sid])
        # and a closed stdin runs cold, not with the pool directory as its stdin
        r = subprocess.run([NSBOX, "run", "--", "sh", "-c", "ls -l /proc/self/fd/0 2>&1; true"],
                           stdin=subprocess.DEVNULL, capture_output=True,
                           env=self.dirs.env(self.env), timeout=60,
                           preexec_fn=lambda: os.close(0))
        self.assertNotIn(b"pool", r.stdout + r.stderr)
        self.assertEqual(self.pooled(), [sid])

    def test_a_socket_served_by_another_user_gets_nothing(self):
        # an entry and a run socket that someone else serves: the run must not send its
        # command, environment and descriptors there
        if not is_root():
            self.skipTest("needs a second user to serve the socket")
        from nsbox_test import ensure_test_user
        user = ensure_test_user()
        self.fill()
        key = json.loads(self.nsbox("pool", "ls", "--json", check=True).stdout)[0]["key"]
        fake = "aaaaaaaaaaaa"
        fdir = os.path.join(self.dirs.state, fake)
        os.mkdir(fdir)
        os.chown(fdir, user.pw_uid, user.pw_gid)
        out = os.path.join(self.dirs.base, "fake-out")  # where the fake may write what it got
        os.mkdir(out)
        os.chown(out, user.pw_uid, user.pw_gid)
        got = os.path.join(out, "got")
        server = subprocess.Popen(
            ["setpriv", "--reuid", str(user.pw_uid), "--regid", str(user.pw_gid),
             "--clear-groups", "--", "python3", "-c",
             "import socket,sys\n"
             "s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.bind(sys.argv[1])\n"
             "s.listen(1)\n"
             "print('up', flush=True)\n"
             "c,_=s.accept(); d=c.recv(262144)\n"
             "open(sys.argv[2],'wb').write(d)\n",
             os.path.join(fdir, "run"), got + ".tmp"],
            stdout=subprocess.PIPE)
        try:
            self.assertEqual(server.stdout.readline(), b"up\n")
            open(os.path.join(self.dirs.state, "pool", key + "-" + fake), "w").close()
            # listed first or not, the run must end in a real sandbox and say nothing there
            for _ in range(3):
                r = self.nsbox("run", "-e", "API_TOKEN=secret", "--", "echo", "hi")
                self.assertEqual((r.returncode, r.stdout), (0, b"hi\n"), r.stderr)
            # the fake may see a connection (it is closed at once), never a byte of the request
            server.wait(timeout=5) if os.path.exists(got + ".tmp") else None
            data = open(got + ".tmp", "rb").read() if os.path.exists(got + ".tmp") else b""
            self.assertEqual(data, b"", "the fake socket received the run")
        finally:
            server.kill()
            server.wait()

    def run_socket(self, sid):
        path = os.path.join(self.dirs.state, sid, "run")
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        c.settimeout(10)
        c.connect(path)
        return c

    def test_a_bad_request_on_the_run_socket_leaves_the_sandbox_for_a_run(self):
        # init takes requests on the run socket itself (agent.h): whatever a misbehaving
        # program of the user sends there, nothing runs and the sandbox stays in the pool
        (sid,) = self.fill()
        hdr = struct.Struct("<IIiiIIII")  # type seq pid status argc envc len flags
        payload = b"/workspace\0true\0"
        # too short to be a message: dropped
        c = self.run_socket(sid)
        c.send(b"junk")
        self.assertEqual(c.recv(4096), b"")
        c.close()
        # a run request without its three descriptors: refused, said so (FAILED, status 0)
        c = self.run_socket(sid)
        c.send(hdr.pack(1, 7, 0, 0, 1, 0, len(payload), 0) + payload)
        rep = c.recv(4096)
        typ, seq, _, status = hdr.unpack(rep[:hdr.size])[:4]
        self.assertEqual((typ, seq, status), (103, 7, 0), rep)
        self.assertIn(b"refused", rep[hdr.size:])
        c.close()
        # counts that do not match the payload: refused
        c = self.run_socket(sid)
        fds = [0, 1, 2]
        c.sendmsg([hdr.pack(1, 8, 0, 0, 5, 9, len(payload), 0) + payload],
                  [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("3i", *fds))])
        self.assertEqual(hdr.unpack(c.recv(4096)[:hdr.size])[3], 0)
        c.close()
        # a connection that says nothing is dropped at once (200 ms), so that a queue of them
        # cannot keep init from answering its supervisor
        c = self.run_socket(sid)
        t = time.monotonic()
        self.assertEqual(c.recv(4096), b"")
        self.assertLess(time.monotonic() - t, 2)
        c.close()
        self.assertEqual(self.pooled(), [sid])
        r, used = self.run_pooled("--", "sh", "-c", "ls -A /workspace | wc -l")
        self.assertEqual((used, r.stdout), (sid, b"0\n"), r.stderr)

    def init_pid(self, sid):
        sup = json.loads(self.nsbox("inspect", sid, check=True).stdout)["supervisor_pid"]
        kids = read(f"/proc/{sup}/task/{sup}/children").split()
        self.assertEqual(len(kids), 1, kids)
        return sup, int(kids[0])

    def test_a_run_whose_client_left_before_init_read_it_does_not_run(self):
        # init is stopped; a client sends a complete run request and goes away; when init
        # comes back, the request is there but nobody would get its status: refused, nothing
        # runs, and the sandbox is still there for a run
        (sid,) = self.fill()
        _, init = self.init_pid(sid)
        hdr = struct.Struct("<IIiiIIII")
        mark = os.path.join(self.dirs.base, "ran")
        out = os.open(mark + ".out", os.O_WRONLY | os.O_CREAT, 0o666)
        payload = b"/workspace\0/bin/sh\0-c\0echo ran >&1\0PATH=/usr/bin:/bin\0"
        os.kill(init, signal.SIGSTOP)
        try:
            c = self.run_socket(sid)
            c.sendmsg([hdr.pack(1, 1, 0, 0, 3, 1, len(payload), 0) + payload],
                      [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("3i", out, out, out))])
            c.close()
        finally:
            os.kill(init, signal.SIGCONT)
            os.close(out)
        time.sleep(0.5)
        self.assertEqual(read(mark + ".out"), b"", "the command of a departed client ran")
        self.assertEqual(self.pooled(), [sid])
        r, used = self.run_pooled("--", "echo", "fine")
        self.assertEqual((used, r.stdout), (sid, b"fine\n"), r.stderr)

    def test_a_directory_as_stdin_is_refused_by_init_too(self):
        # nsbox run leaves such a request to the cold run; init refuses it from anyone else
        (sid,) = self.fill()
        hdr = struct.Struct("<IIiiIIII")
        payload = b"/workspace\0true\0"
        d = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
        try:
            c = self.run_socket(sid)
            c.sendmsg([hdr.pack(1, 1, 0, 0, 1, 0, len(payload), 0) + payload],
                      [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("3i", d, 1, 2))])
            rep = c.recv(4096)
            c.close()
        finally:
            os.close(d)
        typ, _, _, status = hdr.unpack(rep[:hdr.size])[:4]
        self.assertEqual((typ, status), (103, 0), rep)
        self.assertEqual(self.pooled(), [sid])

    def test_signals_as_the_command_ends_do_not_lose_its_status(self):
        # a signal that crosses init's last message must not turn into "ended before its
        # status": init reads what is left before it closes, and the client rereads a reset
        for _ in range(5):
            self.fill()
            p = subprocess.Popen([NSBOX, "run", "--", "sh", "-c", "sleep 0.3; exit 7"],
                                 stderr=subprocess.PIPE, env=self.dirs.env(self.env))
            t = time.monotonic()
            while p.poll() is None and time.monotonic() - t < 20:
                os.kill(p.pid, signal.SIGWINCH)
                time.sleep(0.0005)
            _, err = p.communicate(timeout=20)
            self.assertEqual(p.returncode, 7, err)

    def test_ttl_and_claim_in_one_round_do_not_hang_the_supervisor(self):
        # the supervisor wakes to its ttl and to init's "claimed" (and the run's end) at once:
        # asking init to retire reads those messages, and the round must not then wait for
        # one more. It is stopped before its ttl (counted from the fill): 2 s may leave too
        # little room for the inspect in between in CI's emulated VM.
        self.write_config({"pool": {"size": 1, "ttl_seconds": 5}})
        (sid,) = self.fill()
        filled = time.monotonic()
        sup, _ = self.init_pid(sid)
        os.kill(sup, signal.SIGSTOP)
        try:
            r = self.nsbox("run", "--", "echo", "ran")
            self.assertEqual((r.returncode, r.stdout), (0, b"ran\n"), r.stderr)
            time.sleep(max(0.0, filled + 5.5 - time.monotonic()))  # the ttl is due as well
        finally:
            os.kill(sup, signal.SIGCONT)
        self.assertTrue(wait_for(lambda: self.gone(sid), 20), "the supervisor hung")

    def test_the_pool_lists_no_sandbox_a_finished_run_took(self):
        # the supervisor hears of the claim in its own time (stopped here): once the run has
        # ended, `pool ls` lists the sandbox no more, whatever its supervisor has done
        (sid,) = self.fill()
        sup, _ = self.init_pid(sid)
        os.kill(sup, signal.SIGSTOP)
        try:
            r = self.nsbox("run", "--", "hostname")
            self.assertEqual((r.returncode, r.stdout.decode().strip()), (0, "nsbox-" + sid),
                             r.stderr)
            self.assertNotIn(sid, self.pooled())
        finally:
            os.kill(sup, signal.SIGCONT)
        self.assertTrue(wait_for(lambda: self.gone(sid), 20))

    def check_a_running_run_is_not_listed(self, *wrap):
        """The supervisor, stopped here, has not heard of the claim; the run's command runs
        and says so, and still `pool ls` does not list the sandbox, nor is a claim left once
        it has ended. wrap: what the run is started under."""
        (sid,) = self.fill()
        sup, _ = self.init_pid(sid)
        os.kill(sup, signal.SIGSTOP)
        try:
            p = subprocess.Popen(list(wrap) + [NSBOX, "run", "--", "sh", "-c", "hostname; read x"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=self.dirs.env(self.env))
        except BaseException:
            os.kill(sup, signal.SIGCONT)
            raise
        try:
            self.assertEqual(readline(p, 30), f"nsbox-{sid}\n".encode())
            self.assertNotIn(sid, self.pooled())
        finally:
            os.kill(sup, signal.SIGCONT)
            out, err = p.communicate(b"\n", timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertTrue(wait_for(lambda: self.gone(sid), 20))
        claims = [n for n in os.listdir(os.path.join(self.dirs.state, "pool"))
                  if n.startswith(".claim-")]
        self.assertEqual(claims, [], "the run left its claim of the entry")

    def test_the_pool_lists_no_sandbox_a_running_run_took(self):
        self.check_a_running_run_is_not_listed()

    def test_the_pool_lists_no_sandbox_whose_run_waits_for_its_answer(self):
        # the run's own wait for init's answer held too (strace delays its recvmsg): the run
        # takes the entry out before it asks for the command, not once it hears back
        strace = self.strace_or_skip("the run's wait for init's answer")
        self.check_a_running_run_is_not_listed(strace, "-f", "-o", "/dev/null", "-e",
                                               "trace=recvmsg", "-e",
                                               "inject=recvmsg:delay_enter=3000000")

    def test_the_pool_lists_no_sandbox_a_drain_deleted(self):
        # the supervisor removes its entry as it tears its sandbox down, in its own time (its
        # unlink is held here): once the drain has ended, `pool ls` lists the sandbox no more,
        # and a fill makes a new one instead of counting it as waiting
        strace = self.strace_or_skip("the supervisor's removal of its entry")
        (sid,) = self.fill()
        sup, _ = self.init_pid(sid)
        tracer = subprocess.Popen([strace, "-p", str(sup), "-o", "/dev/null",
                                   "-e", "trace=unlink,unlinkat",
                                   "-e", "inject=unlink,unlinkat:delay_enter=60000000"],
                                  stderr=subprocess.PIPE)
        try:
            self.assertIn(b"attached", tracer.stderr.readline())
            r = self.nsbox("pool", "drain", check=True)
            self.assertEqual(r.stdout, b"deleted 1 pooled sandbox\n")
            self.assertNotIn(sid, self.pooled())
            (new,) = self.fill()
            self.assertNotEqual(new, sid)
        finally:
            tracer.terminate()  # it detaches: the supervisor goes on at once
            tracer.wait()
        self.assertTrue(wait_for(lambda: self.gone(sid), 20))

    def test_a_run_outlives_the_ttl_of_the_pool(self):
        # the ttl of a waiting sandbox ends when a run takes it: the run is bounded by its own
        # --timeout, not by the pool's ttl. The ttl leaves room for the run to take it (2 s
        # may not, in CI's emulated VM); the command outlasts it.
        self.write_config({"pool": {"size": 1, "ttl_seconds": 5}})
        (sid,) = self.fill()
        r = self.nsbox("run", "--", "sh", "-c", "sleep 7; hostname")
        self.assertEqual((r.returncode, r.stdout.decode().strip()), (0, "nsbox-" + sid), r.stderr)
        self.assertTrue(wait_for(lambda: self.gone(sid)))

    def test_gc_clears_the_claim_of_a_run_that_died(self):
        # a run killed between taking an entry out of the pool and its end leaves the entry's
        # claim; gc removes it once the sandbox is gone, and no other file of the pool
        pool = os.path.join(self.dirs.state, "pool")
        os.makedirs(pool, exist_ok=True)
        claim = ".claim-0123456789abcdef-0123456789ab"  # no such sandbox
        other = ".claim-not-an-entry"
        for n in (claim, other):
            open(os.path.join(pool, n), "w").close()
        self.nsbox("gc", check=True)
        self.assertEqual(sorted(n for n in os.listdir(pool) if n.startswith(".claim")), [other])

    def test_gc_clears_the_entry_of_a_killed_supervisor(self):
        (sid,) = self.fill()
        info = json.loads(self.nsbox("inspect", sid, check=True).stdout)
        self.assertEqual(info["state"], "pooled")
        os.kill(info["supervisor_pid"], signal.SIGKILL)
        self.assertTrue(wait_for(lambda: state_lock_free(self.dirs, sid)),
                        "the killed supervisor's lock stayed held")
        self.nsbox("gc", check=True)
        self.assertTrue(wait_for(lambda: self.gone(sid)))
        self.assertEqual(self.pooled(), [])
        # and a run then still works (cold), and fills again
        r = self.nsbox("run", "--", "echo", "fine")
        self.assertEqual((r.returncode, r.stdout), (0, b"fine\n"), r.stderr)

    def test_a_fill_replaces_a_killed_member_at_once(self):
        # A fill follows every pooled run. It runs create's gc, at most once a second, not a
        # full one (which visits every sandbox alive); its own members it looks at each: a
        # dead one is removed and not counted, even within that second.
        (sid,) = self.fill()
        info = json.loads(self.nsbox("inspect", sid, check=True).stdout)
        os.kill(info["supervisor_pid"], signal.SIGKILL)
        sdir = os.path.join(self.dirs.state, sid)
        self.assertTrue(wait_for(lambda: state_lock_free(self.dirs, sid)),
                        "the killed supervisor's lock stayed held")
        gc_just_ran(self.dirs)  # the fill's own is skipped
        self.nsbox("pool", "fill", check=True)
        self.assertFalse(os.path.exists(sdir), "the dead member was left")
        ids = self.pooled()
        self.assertEqual(len(ids), 1, ids)
        self.assertNotEqual(ids[0], sid)

    def test_a_pooled_sandbox_takes_no_other_requests(self):
        (sid,) = self.fill()
        for args in (["exec", sid, "--", "true"], ["cp", "/etc/hostname", sid + ":x"],
                     ["ps", sid]):
            r = self.nsbox(*args)
            self.assertEqual(r.returncode, 125, args)
            self.assertIn(b"pool", r.stderr, args)
        # ls lists the user's sandboxes: a waiting one is nsbox's own, listed with -a only (a
        # CI job's `test -z "$(nsbox ls -q)"` after its tests must not see the pool)
        self.assertNotIn(sid.encode(), self.nsbox("ls", check=True).stdout)
        self.assertEqual(self.nsbox("ls", "-q", check=True).stdout, b"")
        self.assertEqual(json.loads(self.nsbox("ls", "--json", check=True).stdout), [])
        ls = self.nsbox("ls", "-a", check=True).stdout.decode()
        self.assertRegex(ls, sid + r"\s+pooled")
        self.assertEqual(self.nsbox("ls", "-aq", check=True).stdout, sid.encode() + b"\n")
        listed = json.loads(self.nsbox("ls", "--all", "--json", check=True).stdout)
        self.assertEqual([(e["id"], e["state"]) for e in listed], [(sid, "pooled")])
        # ps names the supervisor by its sandbox, not by the filler's command line
        sup = json.loads(self.nsbox("inspect", sid, check=True).stdout)["supervisor_pid"]
        self.assertTrue(read(f"/proc/{sup}/cmdline").startswith(b"nsbox " + sid.encode()))
        # still intact for its run
        r, used = self.run_pooled("--", "sh", "-c", "ls -A /workspace | wc -l")
        self.assertEqual((used, r.stdout), (sid, b"0\n"))

    def test_concurrent_runs_never_share_a_sandbox(self):
        self.write_config({"pool": {"size": 3, "ttl_seconds": self.TTL}})
        ids = self.fill(3)
        procs = [subprocess.Popen([NSBOX, "run", "--", "sh", "-c", "hostname; echo $0-done", str(i)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=self.dirs.env(self.env)) for i in range(6)]
        hosts = []
        for i, p in enumerate(procs):
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
            host, done = out.decode().split()
            self.assertEqual(done, f"{i}-done")
            hosts.append(host)
        self.assertEqual(len(set(hosts)), 6, hosts)
        # the runs raced for the pool: cold runs alone would share nothing anyway
        self.assertGreaterEqual(len({"nsbox-" + i for i in ids} & set(hosts)), 2, (ids, hosts))

    # ---- a pooled run behaves as a cold one -------------------------------------------------

    def test_same_results_as_a_cold_run(self):
        cases = [
            (["--", "sh", "-c", "echo out; echo err >&2; exit 3"], None),
            (["--", "sh", "-c", "cat; echo; cat /proc/self/status | "
              "grep -E '^(Uid|CapEff|CapPrm|NoNewPrivs|Seccomp):'"], b"from-stdin"),
            (["-e", "K=V", "-e", "K=W", "--", "sh", "-c", "echo $K $HOME $HOSTENV_SECRET; pwd; id -u"],
             None),
            (["--cwd", "/tmp", "--", "pwd"], None),
            (["--", "nosuchcommand"], None),
            (["--", "/etc/passwd"], None),
            (["--", "sh", "-c", "kill -9 $$"], None),
            (["--", "sh", "-c", "ls /workspace /tmp | wc -l; ps -e -o pid= | wc -l"], None),
            (["--", "sh", "-c", "touch /usr/x 2>&1; echo $?"], None),
            (["--", "sh", "-c", "echo TERM=$TERM; env | sort"], None),
        ]
        cold_env = dict(self.env)
        cold_cfg = os.path.join(self.dirs.base, "cold.json")
        with open(cold_cfg, "w") as f:
            f.write('{"pool": {"size": 0}}')
        cold_env["NSBOX_CONFIG"] = cold_cfg
        self.fill()
        for args, stdin in cases:
            cold = self.nsbox("run", *args, input=stdin, extra_env=cold_env)
            warm, _ = self.run_pooled(*args, input=stdin)
            self.assertEqual((warm.returncode, warm.stdout, warm.stderr),
                             (cold.returncode, cold.stdout, cold.stderr), args)
        # the caller's TERM, whatever the filler's was (the pool was filled without one)
        for term in ("vt100", "xterm-256color"):
            args = ["--", "sh", "-c", "echo $TERM"]
            cold = self.nsbox("run", *args, extra_env=dict(cold_env, TERM=term))
            warm, _ = self.run_pooled(*args, extra_env=dict(self.env, TERM=term))
            self.assertEqual((warm.stdout, cold.stdout), (term.encode() + b"\n",) * 2)
        # a cwd that does not exist: 125 both ways; the cold run says more about where
        cold = self.nsbox("run", "--cwd", "sub", "--", "pwd", extra_env=cold_env)
        warm, _ = self.run_pooled("--cwd", "sub", "--", "pwd")
        self.assertEqual((warm.returncode, warm.stdout), (cold.returncode, cold.stdout))
        self.assertEqual(warm.returncode, 125)
        for r in (warm, cold):
            self.assertRegex(r.stderr.decode(), "^nsbox: .*cannot enter /workspace/sub: .*"
                             "No such file or directory\n$")

    def test_timeout_kills_and_gives_124(self):
        self.fill()
        t = time.monotonic()
        r, sid = self.run_pooled("--timeout", "1", "--", "sh", "-c", "sleep 30; echo no")
        self.assertEqual(r.returncode, 124, r.stderr)
        self.assertEqual(r.stdout, b"")
        self.assertIn(b"nsbox: timed out: the command ran past --timeout of 1.000 s", r.stderr)
        self.assertLess(time.monotonic() - t, 15)
        self.assertTrue(wait_for(lambda: self.gone(sid)))

    def test_each_run_gets_a_fresh_sandbox(self):
        self.fill()
        r, _ = self.run_pooled("--", "sh", "-c", "echo a > /workspace/x; echo b > /tmp/y")
        self.assertEqual(r.returncode, 0, r.stderr)
        r, _ = self.run_pooled("--", "sh", "-c", "ls -A /workspace /tmp")
        self.assertEqual(r.stdout.decode().split(), ["/tmp:", "/workspace:"])

    def test_nothing_of_the_sandbox_runs_on_after_its_command(self):
        # When the run's command ends, init kills every other process of the sandbox before it
        # reports the status, so that nothing runs on once nsbox run has returned. Shown with
        # the supervisor stopped: it cannot tear the sandbox down, and still the background
        # writer stops as soon as the command has ended. The status comes from init itself
        # (the run socket), so nsbox run returns meanwhile. (The command lasts 2 s, for the
        # test to stop the supervisor first, also on a slow machine.)
        (sid,) = self.fill()
        sup = json.loads(self.nsbox("inspect", sid, check=True).stdout)["supervisor_pid"]
        out = os.path.join(self.dirs.base, "out")
        with open(out, "wb") as f:
            p = subprocess.Popen([NSBOX, "run", "--", "sh", "-c",
                                  "(while :; do echo tick; sleep 0.01; done) & sleep 2; "
                                  "echo main-done"],
                                 stdout=f, stderr=subprocess.PIPE, env=self.dirs.env(self.env))
        try:
            self.assertTrue(wait_for(lambda: os.path.getsize(out) > 0, 20), "did not start")
            os.kill(sup, signal.SIGSTOP)
            self.assertEqual(p.wait(timeout=20), 0, "the status waited for the supervisor")
            self.assertIn(b"main-done", read(out))
            size = os.path.getsize(out)
            time.sleep(0.5)
            self.assertEqual(os.path.getsize(out), size,
                             "a background process ran on after the run's command ended")
            self.assertFalse(self.gone(sid), "torn down by a stopped supervisor?")
        finally:
            os.kill(sup, signal.SIGCONT)
        p.communicate(timeout=60)
        self.assertTrue(wait_for(lambda: self.gone(sid)))

    def test_signals_reach_the_command(self):
        self.fill()
        p = subprocess.Popen([NSBOX, "run", "--", "sh", "-c",
                              'trap "echo got-int; exit 7" INT; echo ready; '
                              'while :; do sleep 0.05; done'],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=self.dirs.env(self.env))
        self.assertEqual(readline(p), b"ready\n")
        self.assertEqual(self.pooled(), [], "not a pooled run")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        self.assertEqual((p.returncode, out), (7, b"got-int\n"), err)

    def test_winch_and_cont_reach_the_command(self):
        (sid,) = self.fill()
        p = subprocess.Popen([NSBOX, "run", "--", "sh", "-c",
                              'trap "echo got-winch" WINCH; trap "echo got-cont" CONT; '
                              'trap "exit 5" TERM; echo ready; while :; do sleep 0.05; done'],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=self.dirs.env(self.env))
        try:
            self.assertEqual(readline(p), b"ready\n")
            self.assertNotIn(sid, self.pooled(), "not a pooled run")
            p.send_signal(signal.SIGWINCH)
            self.assertEqual(readline(p), b"got-winch\n")
            p.send_signal(signal.SIGCONT)
            self.assertEqual(readline(p), b"got-cont\n")
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=30)
        finally:
            p.kill()
        self.assertEqual(p.returncode, 5)

    def test_a_relative_config_path_fills_the_pool(self):
        env = dict(self.env, NSBOX_CONFIG="config.json")
        r = subprocess.run([NSBOX, "run", "--", "true"], cwd=self.dirs.base, capture_output=True,
                           env=self.dirs.env(env), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(wait_for(self.pooled), "no fill with a relative NSBOX_CONFIG")

    def test_a_second_interrupt_kills(self):
        (sid,) = self.fill()
        p = subprocess.Popen([NSBOX, "run", "--", "sh", "-c",
                              'trap "" INT; echo ready; while :; do sleep 0.05; done'],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=self.dirs.env(self.env))
        self.assertEqual(readline(p), b"ready\n")
        took = sid not in self.pooled()  # judged at the end, once the command is gone
        p.send_signal(signal.SIGINT)
        # the second must come after nsbox took the first, or the two are one
        self.assertTrue(wait_for(lambda: not signal_pending(p.pid, signal.SIGINT)),
                        "nsbox never took the first SIGINT")
        time.sleep(0.3)
        self.assertIsNone(p.poll(), "the first interrupt was ignored by the command")
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)
        self.assertEqual(p.returncode, 128 + signal.SIGKILL)
        self.assertTrue(took, "not a pooled run")

    def test_killing_nsbox_run_deletes_its_sandbox(self):
        (sid,) = self.fill()
        p = subprocess.Popen([NSBOX, "run", "--", "sh", "-c", "echo ready; sleep 300"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=self.dirs.env(self.env))
        self.assertEqual(readline(p), b"ready\n")
        p.kill()
        p.wait()
        self.assertTrue(wait_for(lambda: self.gone(sid)),
                        "the sandbox of a killed nsbox run was not deleted")


@unittest.skipUnless(is_root(), "the memory limit needs cgroups, which only root has here without "
                     "delegation; the pooled path is the same for every user")
class PoolMemory(unittest.TestCase):
    """An OOM kill in a pooled run is reported as in a cold one."""

    def setUp(self):
        self.dirs = Dirs()
        tiny = {"tiny": {"cpus": 1, "memory": "64MiB", "pids": 64, "disk": "64MiB"}}
        config = os.path.join(self.dirs.base, "config.json")
        with open(config, "w") as f:
            json.dump({"pool": {"size": 1}, "instance_types": tiny}, f)
        cold = os.path.join(self.dirs.base, "cold.json")
        with open(cold, "w") as f:
            json.dump({"instance_types": tiny}, f)
        self.env = {"NSBOX_CONFIG": config}
        self.cold_env = {"NSBOX_CONFIG": cold}

    def tearDown(self):
        run_nsbox(["pool", "drain"], self.dirs, extra_env=self.env)
        self.dirs.cleanup()

    def test_oom(self):
        r = run_nsbox(["pool", "fill", "--instance-type", "tiny"], self.dirs, extra_env=self.env,
                      check=True)
        self.assertIn(b"1 pooled sandbox ready", r.stdout)
        before = run_nsbox(["pool", "ls"], self.dirs, extra_env=self.env).stdout.split()[2]
        r = run_nsbox(["run", "--instance-type", "tiny", "--", "python3", "-c",
                       "b = []\nwhile True: b.append(bytearray(1 << 20))"], self.dirs,
                      extra_env=self.env)
        self.assertEqual(r.returncode, 137, r.stderr)
        self.assertIn(b"out of memory", r.stderr)
        after = run_nsbox(["pool", "ls"], self.dirs, extra_env=self.env).stdout
        self.assertNotIn(before, after, "the run did not take the pooled sandbox")

    def test_oom_of_other_processes_counted_as_cold(self):
        # the command survives; two of its children are killed: both runs say "2 processes"
        run_nsbox(["pool", "fill", "--instance-type", "tiny"], self.dirs, extra_env=self.env,
                  check=True)
        args = ["run", "--instance-type", "tiny", "--", "sh", "-c",
                "tail /dev/zero; tail /dev/zero; echo after $?"]
        warm = run_nsbox(args, self.dirs, extra_env=self.env)
        cold = run_nsbox(args, self.dirs, extra_env=self.cold_env)
        self.assertEqual(cold.stdout, b"after 137\n")
        self.assertIn(b"killed 2 processes", cold.stderr)
        self.assertEqual((warm.returncode, warm.stdout, warm.stderr),
                         (cold.returncode, cold.stdout, cold.stderr))


if __name__ == "__main__":
    unittest.main()
