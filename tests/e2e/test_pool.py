"""End-to-end: the warm pool of `nsbox run` (docs/pool.md).

With {"pool": {"size": N}} in the config, `nsbox run` takes a sandbox made ahead of time for
the same settings, runs its one command there, and deletes it; the used sandbox's supervisor
makes a replacement. These tests check that a pooled run is the same as a cold one for the
user (output, exit codes, environment, hardening, signals, a fresh sandbox every time), that
nothing of a used sandbox outlives its run, and that the pool itself is kept in bounds (ttl,
drain, gc, mismatching settings, concurrent runs)."""
import json
import os
import signal
import subprocess
import time
import unittest

from nsbox_test import NSBOX, Dirs, cgroup_leftovers, is_root, loop_devices_under, run_nsbox


def wait_for(pred, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    return pred()


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

    def pooled(self):
        r = self.nsbox("pool", "ls", "--json", check=True)
        return [e["id"] for e in json.loads(r.stdout)]

    def live_ids(self):
        return [n for n in os.listdir(self.dirs.state) if len(n) == 12]

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

    def test_no_pool_by_default(self):
        self.write_config({})
        r = self.nsbox("run", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        time.sleep(0.5)
        self.assertEqual(self.pooled(), [])
        self.assertEqual(self.live_ids(), [])
        r = self.nsbox("pool", "fill")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"the pool is off", r.stderr)

    def test_a_bad_pool_config_is_an_error_naming_the_key(self):
        self.write_config({"pool": {"size": 100}})
        r = self.nsbox("run", "--", "true")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"pool.size", r.stderr)

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
        self.assertNotIn(sid, self.pooled())

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

    def test_gc_clears_the_entry_of_a_killed_supervisor(self):
        (sid,) = self.fill()
        info = json.loads(self.nsbox("inspect", sid, check=True).stdout)
        self.assertEqual(info["state"], "pooled")
        os.kill(info["supervisor_pid"], signal.SIGKILL)
        time.sleep(0.2)
        self.nsbox("gc", check=True)
        self.assertTrue(wait_for(lambda: self.gone(sid)))
        self.assertEqual(self.pooled(), [])
        # and a run then still works (cold), and fills again
        r = self.nsbox("run", "--", "echo", "fine")
        self.assertEqual((r.returncode, r.stdout), (0, b"fine\n"), r.stderr)

    def test_a_pooled_sandbox_takes_no_other_requests(self):
        (sid,) = self.fill()
        for args in (["exec", sid, "--", "true"], ["cp", "/etc/hostname", sid + ":x"],
                     ["ps", sid]):
            r = self.nsbox(*args)
            self.assertEqual(r.returncode, 125, args)
            self.assertIn(b"pool", r.stderr, args)
        ls = self.nsbox("ls", check=True).stdout.decode()
        self.assertRegex(ls, sid + r"\s+pooled")
        # still intact for its run
        r, used = self.run_pooled("--", "sh", "-c", "ls -A /workspace | wc -l")
        self.assertEqual((used, r.stdout), (sid, b"0\n"))

    def test_concurrent_runs_never_share_a_sandbox(self):
        self.write_config({"pool": {"size": 3, "ttl_seconds": self.TTL}})
        self.fill(3)
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
        ]
        cold_env = dict(self.env)
        cold_cfg = os.path.join(self.dirs.base, "cold.json")
        with open(cold_cfg, "w") as f:
            f.write("{}")
        cold_env["NSBOX_CONFIG"] = cold_cfg
        self.fill()
        for args, stdin in cases:
            cold = self.nsbox("run", *args, input=stdin, extra_env=cold_env)
            warm, _ = self.run_pooled(*args, input=stdin)
            self.assertEqual((warm.returncode, warm.stdout, warm.stderr),
                             (cold.returncode, cold.stdout, cold.stderr), args)
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
        # the supervisor stopped: the status cannot go out, the sandbox is not torn down, and
        # still the background writer stops as soon as the command has ended.
        (sid,) = self.fill()
        sup = json.loads(self.nsbox("inspect", sid, check=True).stdout)["supervisor_pid"]
        out = os.path.join(self.dirs.base, "out")
        with open(out, "wb") as f:
            p = subprocess.Popen([NSBOX, "run", "--", "sh", "-c",
                                  "(while :; do echo tick; sleep 0.01; done) & sleep 0.5; "
                                  "echo main-done"],
                                 stdout=f, stderr=subprocess.PIPE, env=self.dirs.env(self.env))
        try:
            self.assertTrue(wait_for(lambda: os.path.getsize(out) > 0, 20), "did not start")
            os.kill(sup, signal.SIGSTOP)
            self.assertTrue(wait_for(lambda: b"main-done" in open(out, "rb").read(), 20))
            time.sleep(0.3)
            size = os.path.getsize(out)
            time.sleep(0.5)
            self.assertEqual(os.path.getsize(out), size,
                             "a background process ran on after the run's command ended")
            self.assertIsNone(p.poll(), "nsbox run returned while its supervisor was stopped")
        finally:
            os.kill(sup, signal.SIGCONT)
        _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertTrue(wait_for(lambda: self.gone(sid)))

    def test_signals_reach_the_command(self):
        self.fill()
        wait_for(self.pooled)
        p = subprocess.Popen([NSBOX, "run", "--", "sh", "-c",
                              'trap "echo got-int; exit 7" INT; echo ready; '
                              'while :; do sleep 0.05; done'],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=self.dirs.env(self.env))
        self.assertEqual(p.stdout.readline(), b"ready\n")
        self.assertEqual(self.pooled(), [], "not a pooled run")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        self.assertEqual((p.returncode, out), (7, b"got-int\n"), err)

    def test_a_second_interrupt_kills(self):
        self.fill()
        wait_for(self.pooled)
        p = subprocess.Popen([NSBOX, "run", "--", "sh", "-c",
                              'trap "" INT; echo ready; while :; do sleep 0.05; done'],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=self.dirs.env(self.env))
        self.assertEqual(p.stdout.readline(), b"ready\n")
        p.send_signal(signal.SIGINT)
        time.sleep(0.3)
        self.assertIsNone(p.poll(), "the first interrupt was ignored by the command")
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)
        self.assertEqual(p.returncode, 128 + signal.SIGKILL)

    def test_killing_nsbox_run_deletes_its_sandbox(self):
        (sid,) = self.fill()
        p = subprocess.Popen([NSBOX, "run", "--", "sh", "-c", "echo ready; sleep 300"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=self.dirs.env(self.env))
        self.assertEqual(p.stdout.readline(), b"ready\n")
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
        config = os.path.join(self.dirs.base, "config.json")
        with open(config, "w") as f:
            json.dump({"pool": {"size": 1},
                       "instance_types": {"tiny": {"cpus": 1, "memory": "64MiB", "pids": 64,
                                                   "disk": "64MiB"}}}, f)
        self.env = {"NSBOX_CONFIG": config}

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


if __name__ == "__main__":
    unittest.main()
