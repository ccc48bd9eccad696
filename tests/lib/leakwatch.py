"""Which sandboxes the running test made, for the leak report of the test runner
(tests/run_py_test.py, its LeakWatch): under `ctest -j2` another module runs beside this one, and
the sandboxes it makes are not this test's to report."""
import os
import subprocess

# The running test's (the runner empties both before each test): the state directories given to
# the processes it started (record_state_dirs), and the ids found in a Dirs' directories before
# they went.
TEST_STATE_DIRS = set()
TEST_SANDBOX_IDS = set()


def record_state_dirs():
    """Note the NSBOX_STATE_DIR of every process started with subprocess after the call (its
    env, else ours) in TEST_STATE_DIRS, and when one has been waited for (subprocess.run too),
    the ids in those directories: a sandbox whose nsbox was killed is still named there then.
    The runner calls it before it imports a test module."""
    init, wait = subprocess.Popen.__init__, subprocess.Popen.wait

    def recording_init(self, *args, **kwargs):
        env = kwargs.get("env")
        state = (os.environ if env is None else env).get("NSBOX_STATE_DIR")
        if state:
            TEST_STATE_DIRS.add(os.path.abspath(state))
        init(self, *args, **kwargs)

    def noting_wait(self, *args, **kwargs):
        status = wait(self, *args, **kwargs)
        note_sandbox_ids(*tuple(TEST_STATE_DIRS))  # a copy: other threads may add to it
        return status
    subprocess.Popen.__init__ = recording_init
    subprocess.Popen.wait = noting_wait


def note_sandbox_ids(*dirs):
    """Add to TEST_SANDBOX_IDS the sandbox ids named in dirs: state directories (ID, and
    ID.new-PID being made) or cache directories (ID.ext4, ID.ext4.bak, ...)."""
    for d in dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        TEST_SANDBOX_IDS.update(n[:12] for n in names
                                if len(n) >= 12 and all(c in "0123456789abcdef" for c in n[:12])
                                and (len(n) == 12 or n[12] == "."))


def made_by_this_test(cgroup):
    """Is the sandbox of cgroup (a path nsbox_test.cgroup_leftovers gave) one the running test
    made: was its id in a directory of the test's (TEST_SANDBOX_IDS, or a state directory of
    TEST_STATE_DIRS still there)? Another process's sandbox (ctest -j2 runs two modules at
    once) is in directories of that process's."""
    note_sandbox_ids(*tuple(TEST_STATE_DIRS))
    return os.path.basename(cgroup)[len("nsbox-"):] in TEST_SANDBOX_IDS
