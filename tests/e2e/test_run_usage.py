"""End-to-end: `nsbox run` as root, what the user is told: the command's exit code passed on
(126, 127, 128+N, 124), nsbox's own failures in one line (125), and the usage errors of run,
exec, create and pool fill (a typo's suggestion, a Docker habit's nsbox way, each command's
help). The sandbox's own behaviour under run is test_run.py's."""
import json
import os
import re
import shutil
import tempfile
import time
import unittest

from nsbox_test import Dirs, is_root, run_nsbox


def setUpModule():
    if not is_root():
        raise unittest.SkipTest("these tests run nsbox as root; test_run_unprivileged covers users")


class RunUsageTest(unittest.TestCase):
    def setUp(self):
        self.dirs = Dirs()
        self.addCleanup(self.dirs.cleanup)

    def sh(self, script, *extra, **kw):
        return run_nsbox(["run"] + list(extra) + ["--", "sh", "-c", script], self.dirs, **kw)

    def assertNoLeftovers(self):
        self.assertEqual(self.dirs.leftovers(), [])


class ExitCodes(RunUsageTest):
    def test_own_exit_code(self):
        self.assertEqual(self.sh("exit 3").returncode, 3)
        self.assertEqual(self.sh("exit 0").returncode, 0)

    def test_not_found_127(self):
        r = run_nsbox(["run", "--", "no-such-command-xyz"], self.dirs)
        self.assertEqual(r.returncode, 127)
        self.assertIn(b"no-such-command-xyz: command not found", r.stderr)

    def test_not_executable_126(self):
        r = run_nsbox(["run", "--", "/etc/passwd"], self.dirs)
        self.assertEqual(r.returncode, 126, r.stderr)

    def test_killed_by_signal_128_plus_n(self):
        self.assertEqual(self.sh("kill -9 $$").returncode, 137)
        self.assertEqual(self.sh("kill -SEGV $$").returncode, 128 + 11)

    def test_timeout_124(self):
        t = time.monotonic()
        r = run_nsbox(["run", "--timeout", "1", "--", "sleep", "30"], self.dirs)
        self.assertEqual(r.returncode, 124)
        # well short of the sleep, with room for a cold run's set-up and teardown on a slow
        # machine (an emulated VM takes seconds)
        self.assertLess(time.monotonic() - t, 20)
        # said, so that it is not taken for a command's own 124 (which is not)
        self.assertEqual(r.stderr, b"nsbox: timed out: the command ran past --timeout of 1.000 "
                                   b"s, and its processes were killed (exit code 124)\n")
        r = self.sh("exit 124")
        self.assertEqual((r.returncode, r.stderr), (124, b""))

    def test_nsbox_failure_125_one_line(self):
        r = run_nsbox(["run", "--image", "/nonexistent-image-dir", "--", "true"], self.dirs)
        self.assertEqual(r.returncode, 125)
        lines = r.stderr.decode().strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("nsbox: "), lines)

    def test_a_misspelt_image_gets_the_name_meant(self):
        # a CI file's `--image debain` said only that it does not exist, among five ways to name
        # an image; a stored image's name is offered too, an OCI image's id is not
        data = tempfile.mkdtemp(prefix="nsbox-usage-data-")
        self.addCleanup(shutil.rmtree, data, True)
        os.makedirs(os.path.join(data, "images", "agent-tools"))
        for typo, meant in (("debain", "debian"), ("hots", "host"),
                            ("agent-tols", "agent-tools")):
            r = run_nsbox(["run", "--image", typo, "--", "true"], self.dirs,
                          extra_env={"NSBOX_DATA_DIR": data})
            self.assertEqual(r.returncode, 125, r.stderr)
            self.assertIn(f"nsbox: image '{typo}' does not exist in {data}/images: did you mean "
                          f"'{meant}'? give `host`".encode(), r.stderr)
        r = run_nsbox(["run", "--image", "frobnicate", "--", "true"], self.dirs,
                      extra_env={"NSBOX_DATA_DIR": data})
        self.assertIn(b"/images: give `host`", r.stderr)  # nothing close: no guess

    def test_bad_option_125(self):
        r = run_nsbox(["run", "--no-such-flag", "x", "--", "true"], self.dirs)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"unknown option", r.stderr)

    def test_a_typo_gets_the_name_meant(self):
        for cmd, typo, meant in (("run", "--instance-typ", "--instance-type"),
                                 ("create", "--idle-timout", "--idle-timeout"),
                                 ("run", "--netwrok=none", "--network"),
                                 ("run", "--timout", "--timeout")):
            r = run_nsbox([cmd, typo, "small", "--", "true"], self.dirs)
            self.assertEqual(r.returncode, 125)
            name = typo.split("=")[0]
            self.assertIn(("nsbox: unknown option %s: did you mean %s?\n" % (name, meant))
                          .encode(), r.stderr)
        # create has no --timeout: nothing run-only is suggested to it
        r = run_nsbox(["create", "--timout", "5"], self.dirs)
        self.assertEqual(r.stderr.splitlines()[0], b"nsbox: unknown option --timout")
        r = run_nsbox(["exec", "--timout", "5", "0123456789ab", "--", "true"], self.dirs)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"unknown exec option --timout: did you mean --timeout? (exec [-i]",
                      r.stderr)
        r = run_nsbox(["crate", "--instance-type", "small"], self.dirs)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"nsbox: unknown command crate: did you mean create?\n", r.stderr)
        # nothing close: the plain message
        r = run_nsbox(["frobnicate"], self.dirs)
        self.assertEqual(r.stderr.splitlines()[0], b"nsbox: unknown command frobnicate")

    def test_a_usage_error_shows_the_argument_without_its_controls(self):
        # A usage error quotes the argument it names (ls's, exec --timeout's value, image's
        # options and names) with each control (ESC, BEL, C1 as UTF-8) as '?', as every
        # message of nsbox's does: an escape sequence a script passes on must not reach the
        # terminal.
        bad = b"x\x1b]0;t\x07\xc2\x9b2J"
        for args, said in (
                (["ls", bad],
                 b"nsbox: ls takes no argument but --json, -q or -a, not 'x?]0;t??2J'"),
                (["exec", "--timeout", bad, "0123456789ab", "--", "true"],
                 b"nsbox: --timeout needs a number of seconds from 0 to 31536000 (a year), "
                 b"not 'x?]0;t??2J'"),
                (["image", "build", bad], b"nsbox: image: cannot build 'x?]0;t??2J': nsbox "
                                          b"builds `host` and `debian`\n(see nsbox image --help)\n"),
                (["image", "pull", b"-" + bad], b"nsbox: image: unknown option '-x?]0;t??2J' for "
                                                b"pull\n(see nsbox image --help)\n")):
            r = run_nsbox(args, self.dirs)
            self.assertEqual(r.returncode, 125, args)
            self.assertTrue(r.stderr.startswith(said), r.stderr)
            self.assertNotIn(b"\x1b", r.stderr)
            self.assertNotIn(b"\x9b", r.stderr)

    def test_docker_s_options_before_the_command(self):
        # docker -v prints the version; its other global options (a context, a host, debug)
        # are not run's: -c there is a context, not CPU shares, -v no volume
        r = run_nsbox(["-v"], self.dirs)
        self.assertEqual((r.returncode, r.stdout, r.stderr),
                         (0, run_nsbox(["--version"], self.dirs).stdout, b""))
        self.assertTrue(r.stdout.startswith(b"nsbox "), r.stdout)
        for opt in ("-c", "--context=ci", "-H", "-D", "--rm"):
            r = run_nsbox([opt, "run", "--", "true"], self.dirs)
            self.assertEqual(r.returncode, 125)
            self.assertEqual(r.stderr.splitlines()[0].decode(),
                             "nsbox: unknown option %s before the command: nsbox has no global "
                             "options, each command takes its own after its name" % opt)

    def test_a_docker_habit_gets_the_nsbox_way_not_a_spelling(self):
        # "-w: did you mean -e?" sent a Docker user the wrong way: each habit names nsbox's
        for cmd, opt, way in (("run", "-w", b"--cwd DIR"), ("run", "--workdir=/src", b"--cwd DIR"),
                              ("run", "--rm", b"deletes its sandbox"),
                              ("run", "-v", b"--workspace DIR"),
                              ("create", "--memory", b"--instance-type small|medium|large"),
                              ("run", "-u", b"appuser (uid 1000)"),
                              ("run", "-p", b"publishes no port")):
            r = run_nsbox([cmd, opt, "x", "--", "true"], self.dirs)
            self.assertEqual(r.returncode, 125, (opt, r.stderr))
            self.assertIn(b"nsbox: unknown option %s (as in docker?): " % opt.split("=")[0].encode(),
                          r.stderr)
            self.assertIn(way, r.stderr, opt)
            self.assertNotIn(b"did you mean", r.stderr, opt)
        r = run_nsbox(["exec", "--workdir", "/src", "0123456789ab", "--", "pwd"], self.dirs)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"unknown exec option --workdir (as in docker?): where the command starts "
                      b"is --cwd DIR", r.stderr)
        # podman run's --tls-verify=false: the pull that does not verify, and the lasting way
        for cmd in ("run", "create"):
            r = run_nsbox([cmd, "--tls-verify=false", "--image", "127.0.0.1:5000/team/py:1",
                           "--", "true"], self.dirs)
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"nsbox: unknown option --tls-verify (as in podman?): run and create "
                          b"pull with TLS verified; for a registry in plain HTTP, pull its image "
                          b"first with nsbox image pull --tls-verify=false REF, or name the "
                          b"registry insecure once in registries.conf", r.stderr)
        # docker run IMAGE runs the image's command; here one is asked for, saying why (before
        # anything is pulled)
        r = run_nsbox(["run", "--image", "python:3.12-slim"], self.dirs)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"run needs a command: nsbox run [OPTIONS] -- CMD [ARG...] (an image's "
                      b"Entrypoint and Cmd are not run", r.stderr)
        # docker's -e NAME takes the caller's value; nsbox says how to give it
        for cmd in (["run", "-e", "API_KEY", "--", "true"], ["run", "--env", "API_KEY", "--", "true"],
                    ["exec", "-e", "API_KEY", "0123456789ab", "--", "true"]):
            r = run_nsbox(cmd, self.dirs)
            self.assertEqual(r.returncode, 125, cmd)
            self.assertIn(b"%s API_KEY: expected NAME=VALUE (docker's -e NAME passes the caller's "
                          b"value; here give it: %s API_KEY=\"$API_KEY\")"
                          % (cmd[1].encode(), cmd[1].encode()), r.stderr)

    def test_bad_option_names_the_option_not_a_missing_value(self):
        for cmd in ("run", "create"):
            r = run_nsbox([cmd, "--no-such-flag"], self.dirs)
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"unknown option --no-such-flag", r.stderr)
            self.assertIn(("(see nsbox %s --help)" % cmd).encode(), r.stderr)
        # an option of exec's given last, without its value: named as such, as run does (it
        # said "unknown exec option -e: did you mean -i?")
        for opt in ("-e", "--env", "--cwd", "--timeout"):
            r = run_nsbox(["exec", opt], self.dirs)
            self.assertEqual((r.returncode, r.stderr.decode().splitlines()[0]),
                             (125, f"nsbox: option {opt} needs a value"), opt)
        r = run_nsbox(["exec", "--env", "FOO", "x", "--", "true"], self.dirs)
        self.assertIn(b"nsbox: --env FOO: expected NAME=VALUE", r.stderr)
        r = run_nsbox(["create", "--timeout", "5"], self.dirs)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"--timeout is an option of run and exec", r.stderr)
        self.assertIn(b"--ttl", r.stderr)
        # what a user tries first, and what each means instead
        # run's -it (exec's flags) and Docker's --interactive are told the one same way
        for opt in ("-it", "--interactive"):
            r = run_nsbox(["run", opt, "--", "bash"], self.dirs)
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"an interactive shell is id=$(nsbox create); "
                          b"nsbox exec -it $id -- bash (run passes its stdin through already)",
                          r.stderr, opt)
        r = run_nsbox(["run", "--timeout", "99999999999", "--", "true"], self.dirs)
        self.assertIn(b"from 0 to 31536000", r.stderr)
        # a run's sandbox is busy for its whole life: an idle timeout would never fire
        spec = os.path.join(self.dirs.base, "idle.json")
        with open(spec, "w") as f:
            json.dump({"idle_timeout_seconds": 30}, f)
        for opt in (["--idle-timeout", "30"], ["--spec", spec]):
            r = run_nsbox(["run"] + opt + ["--", "true"], self.dirs)
            self.assertEqual(r.returncode, 125, opt)
            self.assertIn(b"idle_timeout_seconds is supported for persistent sandboxes (nsbox "
                          b"create), not for nsbox run", r.stderr)
        self.assertEqual(run_nsbox(["run", "--idle-timeout", "0", "--", "true"],
                                   self.dirs).returncode, 0)
        for opt in (["--ttl", "5"], ["-e", "A=1"], ["--idle-timeout=3"]):
            r = run_nsbox(["pool", "fill"] + opt, self.dirs)
            self.assertEqual(r.returncode, 125, opt)
            self.assertIn(b"does not apply to pooled sandboxes", r.stderr)

    def test_each_command_has_its_own_help(self):
        # every option each parser takes (cli/main.c, client.c) must be in its help
        sandbox = ["--instance-type", "--network", "--egress", "--region", "--image",
                   "--workspace", "--env", "-e", "--spec"]
        options = {
            "run": sandbox + ["--timeout", "--cwd"],
            "create": sandbox + ["--ttl", "--idle-timeout", "--owner-pid", "--setup-script",
                                 "--setup-timeout", "--json"],
            "exec": ["-i", "-t", "-d", "--timeout", "--cwd", "-e", "--env"],
            "cp": ["-p"], "ls": ["--json", "-q"], "inspect": [], "rm": [], "ps": [], "kill": [],
            "logs": ["-f", "--follow"], "wait": ["--timeout"], "gc": ["-v"], "info": ["--json"],
            "pool": ["fill", "drain", "ls", "--size"], "image": ["build", "ls", "rm"],
            "version": [],
        }
        for cmd, opts in options.items():
            r = run_nsbox([cmd, "--help"], self.dirs)
            self.assertEqual(r.returncode, 0, (cmd, r.stderr))
            text = r.stdout.decode()
            self.assertTrue(text.startswith("usage: nsbox %s" % cmd), (cmd, text))
            for o in opts:
                self.assertRegex(text, r"(^|[\s\[,])%s[\s\],=]" % re.escape(o), (cmd, o))
            self.assertEqual(run_nsbox(["help", cmd], self.dirs).stdout, r.stdout, cmd)
            self.assertEqual(run_nsbox([cmd, "-h"], self.dirs).stdout, r.stdout, cmd)
        # among the leading options too; after "--" it is the command's own
        r = run_nsbox(["exec", "-d", "--help"], self.dirs)
        self.assertTrue(r.stdout.startswith(b"usage: nsbox exec"), r.stdout)
        r = run_nsbox(["run", "--", "sh", "-c", "echo $0", "-h"], self.dirs)
        self.assertEqual(r.stdout, b"-h\n", r.stderr)
        # a usage error points at its command's help; the overview lists every command
        r = run_nsbox(["exec", "--bogus", "x"], self.dirs)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"(see nsbox exec --help)", r.stderr)
        overview = run_nsbox(["--help"], self.dirs).stdout.decode()
        for cmd in options:
            self.assertRegex(overview, r"\n  (\S+ .*\| )?%s\b" % cmd, cmd)
        r = run_nsbox(["help", "nope"], self.dirs)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"no command 'nope'", r.stderr)

    def test_create_and_pool_fill_take_no_command(self):
        """A command after create's or pool fill's options is a usage error that says where
        a command goes; nothing is made."""
        for args, said in ((["create", "--", "sh"], b"create takes no command (unexpected "
                            b"'sh'); use nsbox exec"),
                           (["pool", "fill", "--instance-type", "small", "true"],
                            b"pool fill takes no command (unexpected 'true')\n")):
            with self.subTest(args=args):
                r = run_nsbox(args, self.dirs)
                self.assertEqual(r.returncode, 125, r.stderr)
                self.assertIn(said, r.stderr)
                self.assertEqual(self.dirs.live_ids(), [])

    def test_a_broken_config_stops_only_what_makes_sandboxes(self):
        # Every command failed on a broken config file, pool drain, gc and rm included: the
        # clean-up could not run until the file was mended.
        sid = run_nsbox(["create"], self.dirs, check=True).stdout.decode().strip()
        self.addCleanup(run_nsbox, ["rm", sid], self.dirs)  # before the directories go
        cfg = os.path.join(self.dirs.base, "config.json")
        with open(cfg, "w") as f:
            f.write("{bad")
        env = {"NSBOX_CONFIG": cfg}
        for args in (["version"], ["ls"], ["gc"], ["pool", "ls"], ["pool", "drain"],
                     ["inspect", sid], ["rm", sid]):
            r = run_nsbox(args, self.dirs, extra_env=env)
            self.assertEqual(r.returncode, 0, (args, r.stderr))
        self.assertFalse(os.path.exists(os.path.join(self.dirs.state, sid)))
        for args in (["run", "--", "true"], ["create"], ["pool", "fill"]):
            r = run_nsbox(args, self.dirs, extra_env=env)
            self.assertEqual(r.returncode, 125, args)
            self.assertIn(b"invalid JSON near byte 2", r.stderr)
        r = run_nsbox(["info"], self.dirs, extra_env=env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b"invalid JSON near byte 2 (the instance types below are the defaults)",
                      r.stderr)
        with open(cfg, "w") as f:
            f.write('{"pol": {"size": 0}}')  # a misspelled section was silently ignored
        r = run_nsbox(["run", "--", "true"], self.dirs, extra_env=env)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"unknown key 'pol'", r.stderr)
        # info checks every section as the command that uses it does: a typo in one that a
        # plain run reads (workspace, pool) or only a networked one (network) said "OK"
        for text, word in (('{"workspace": {"fss": "tmpfs"}}', b"'workspace.fss': unknown"),
                           ('{"pool": {"sise": 3}}', b"'pool.sise': unknown"),
                           ('{"network": {"pol": "x"}}', b"'network.pol': unknown")):
            with open(cfg, "w") as f:
                f.write(text)
            r = run_nsbox(["info"], self.dirs, extra_env=env)
            self.assertEqual(r.returncode, 1, text)
            self.assertIn(word, r.stderr)
            self.assertNotIn(b"the instance types below are the defaults", r.stderr)
            # and so does every run, whatever its network (the network section was read only
            # for --network all: a typo there went unnoticed by every other sandbox)
            r = run_nsbox(["run", "--", "true"], self.dirs, extra_env=env)
            self.assertEqual(r.returncode, 125, text)
            self.assertIn(word, r.stderr)
        # the instance types' own mistake: info lists the defaults
        with open(cfg, "w") as f:
            f.write('{"instance_types": {"tiny": {"cpus": 0}}}')
        r = run_nsbox(["info"], self.dirs, extra_env=env)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"(the instance types below are the defaults)", r.stderr)
        # and the directories' overrides, which a relative path made silently ineffective
        os.unlink(cfg)
        for var in ("NSBOX_STATE_DIR", "NSBOX_CACHE_DIR", "NSBOX_DATA_DIR"):
            for args in (["info"], ["run", "--", "true"]) + ((["ls"],) if "STATE" in var else ()):
                r = run_nsbox(args, self.dirs, extra_env={var: "relative/dir"})
                self.assertNotEqual(r.returncode, 0, (var, args))
                self.assertIn(b"%s must be an absolute path, not 'relative/dir'" % var.encode(),
                              r.stderr, (var, args))
        self.assertEqual(self.dirs.leftovers(), [])

    def test_region_rule_refuses_before_anything_is_built(self):
        r = run_nsbox(["run", "--region", "us-east-1", "--", "true"], self.dirs)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"This network policy is not supported in region 'us-east-1'; it is "
                      b"supported only in nl-north-1. Pass network=Network.all() or a supported "
                      b"region.", r.stderr)
        self.assertIn(b"(on the command line: --network all, or --region nl-north-1)", r.stderr)
        self.assertNoLeftovers()


if __name__ == "__main__":
    unittest.main()


NO_SYS_ADMIN = ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", "--"]
ROOT_CAPS_ERROR = (
    "nsbox: root without CAP_SYS_ADMIN (not even in its bounding set) cannot make a sandbox: "
    "each sandbox's user namespace belongs to a uid of its own, and root may write that "
    "namespace's id maps only with CAP_SYS_ADMIN; fix: run nsbox on the host with CAP_SYS_ADMIN "
    "(from a systemd unit, one whose CapabilityBoundingSet= keeps it), or in a container started "
    "with --privileged --cgroupns=host, not without --privileged\n")


@unittest.skipUnless(shutil.which("setpriv"), "needs setpriv (util-linux) to drop CAP_SYS_ADMIN")
class RootWithoutSysAdmin(RunUsageTest):
    """Root whose bounding set lacks CAP_SYS_ADMIN (a CI job in a container started without
    --privileged) is told so, with the container's fix, before anything is pulled or made:
    not the kernel's "open /proc/N/setgroups: Permission denied" of the id maps."""

    def without_sys_admin(self, args, **kw):
        return run_nsbox(args, self.dirs, wrap=lambda cmd: NO_SYS_ADMIN + cmd, **kw)

    def test_run_and_create_say_the_cause_and_the_fix(self):
        for args in (["run", "--", "true"], ["create"],
                     # an image reference is not pulled first (pull=always would try)
                     ["run", "--image", "127.0.0.1:9/nsbox-test/none:1", "--pull", "always",
                      "--", "true"],
                     ["create", "--image", "127.0.0.1:9/nsbox-test/none:1"]):
            with self.subTest(args=args):
                r = self.without_sys_admin(args)
                self.assertEqual((r.returncode, r.stderr.decode()), (125, ROOT_CAPS_ERROR))
                self.assertEqual(r.stdout, b"")
                self.assertEqual(self.dirs.live_ids(), [])
                self.assertNoLeftovers()

    def test_only_what_makes_sandboxes_is_refused(self):
        # ls reads the state directory: root without CAP_SYS_ADMIN may still do that
        r = self.without_sys_admin(["ls"])
        self.assertEqual(r.returncode, 0, r.stderr)
