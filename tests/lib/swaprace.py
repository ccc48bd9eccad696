"""A name swapped under nsbox as fast as the kernel allows (renameat2 RENAME_EXCHANGE): the race
that a check by path and a use by path lose, for the tests that show nsbox does not."""
import os
import subprocess
import sys
import time


# Swaps each pair of paths (argv[2::2] with argv[3::2]) atomically (renameat2 RENAME_EXCHANGE)
# as fast as it can for argv[1] seconds, then prints how many rounds it made: a directory and a
# symlink flipping under a program that looks them up.
FLIPPER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
pairs = [(a.encode(), b.encode()) for a, b in zip(sys.argv[2::2], sys.argv[3::2])]
end = time.monotonic() + float(sys.argv[1])
n = 0
while time.monotonic() < end:
    for a, b in pairs:
        if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
            sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
    n += 1
print(n)
"""


def race_workspace_swap(test, parent, owner, swapper, run, runs, seconds=8, min_runs=12):
    """The --workspace PARENT/a/proc (a directory of owner's, a pwd entry) while swapper (a pwd
    entry; None: root) swaps `a` with a link to / as fast as it can, so that the path leads now
    to the directory, now to the host's /proc. run(ws) makes one sandbox that lists /workspace
    (`ls -a`); up to runs of them, for `seconds` but at least min_runs. Every run must bind the
    directory (its marker seen) or be refused in one line, never list the host's /proc; both
    must be seen, or the race was not run. Returns the refusals' reasons and their counts."""
    a = os.path.join(parent, "a")
    ws = os.path.join(a, "proc")
    os.makedirs(ws)
    open(os.path.join(ws, "real-workspace"), "w").close()
    for d in (a, ws):
        os.chmod(d, 0o755)
        os.chown(d, owner.pw_uid, owner.pw_gid)
    link = os.path.join(parent, "a-link")
    os.symlink("/", link)
    ids = {} if swapper is None else {"user": swapper.pw_uid, "group": swapper.pw_gid,
                                      "extra_groups": []}
    if swapper is not None:
        os.lchown(link, swapper.pw_uid, swapper.pw_gid)
    # the system's python3: the test's own may be below /root, closed to the swapper
    flipper = subprocess.Popen(["/usr/bin/python3", "-c", FLIPPER, str(seconds * 10), a, link],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, **ids)
    bound, reasons = 0, {}
    try:
        end = time.monotonic() + seconds
        for i in range(runs):
            if i >= min_runs and time.monotonic() > end:
                break
            r = run(ws)
            err = r.stderr.decode()
            names = r.stdout.decode().split()
            test.assertFalse("self" in names and "real-workspace" not in names,
                             f"run {i}: the sandbox was given the host's /proc")
            if r.returncode == 125:
                # besides the note a directory of root's gets (its own look may see it)
                lines = [ln for ln in err.strip().splitlines() if not ln.startswith("nsbox: note:")]
                test.assertEqual(len(lines), 1, err)
                why = ("changed while the sandbox was made" if "changed while" in err
                       else "a kernel file system" if "is a kernel file system" in err
                       else lines[0])
                reasons[why] = reasons.get(why, 0) + 1
                continue
            test.assertEqual(r.returncode, 0, f"run {i}: {err}")
            test.assertIn("real-workspace", names, f"run {i}: {names}")
            bound += 1
    finally:
        flipper.kill()
        _, ferr = flipper.communicate()
    test.assertEqual(ferr, b"", "the swaps failed")
    print(f"\n{test.id()}: {bound} bound, refused: {reasons}", file=sys.stderr)
    test.assertGreater(bound, 0, reasons)
    test.assertTrue(reasons, "no run saw the link: the race was not run")
    test.assertLessEqual(set(reasons), {"changed while the sandbox was made",
                                        "a kernel file system"}, reasons)
    return reasons
