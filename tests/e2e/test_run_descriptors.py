"""End-to-end: what `nsbox run` does with the caller's descriptors: files, pipes, fifos,
sockets and terminals (moved from test_run.py)."""
import os
import subprocess
import unittest

from nsbox_test import TERMINAL_HARM, HostStdioChecks, in_a_terminal, nsbox_command, run_with_stdio

from test_run import RunTest, setUpModule  # noqa: F401 (unittest runs setUpModule)


class HostDescriptors(HostStdioChecks, RunTest):
    """run gives the command the host's stdio only when sharing it is harmless (/dev/null, a file
    read from that others may not write), a pipe opened anew; a file written to, a socket, a
    named FIFO or a terminal is relayed through a pipe."""

    def test_a_command_cannot_truncate_or_rewind_an_appended_file(self):
        self.check_appended_files_untouched(["run", "--"])
        self.assertNoLeftovers()

    def test_a_stdin_open_for_writing_is_read_not_truncated(self):
        # `nsbox run -- CMD 0<> file`: the command reads it whole, and cannot empty it
        src, out = self.paths("in", "out")
        with open(src, "wb") as f:
            f.write(b"data\n")
        script = ("import os, sys\nsys.stdout.write(sys.stdin.read())\ntry:\n"
                  "    os.ftruncate(0, 0)\nexcept OSError:\n    pass\n")
        with open(src, "r+b") as i, open(out, "wb") as o:
            code = run_with_stdio(["run", "--", "python3", "-c", script], self.dirs,
                                  stdin=i, stdout=o)
        self.assertEqual((code, self.read(out), self.read(src)), (0, b"data\n", b"data\n"))

    def test_output_to_files_comes_whole_and_in_order_with_the_exit_code(self):
        self.check_output_to_files(["run", "--"], ["run", "--timeout", "1", "--"])

    def test_stdout_and_stderr_to_one_file_keep_the_commands_order(self):
        self.check_one_file_keeps_the_order(["run", "--"])

    def test_the_callers_pipes_reopen_only_the_way_they_were_given(self):
        self.check_pipes_reopen_only_one_way(["run", "--"])
        self.assertNoLeftovers()

    def test_a_pipe_between_two_sandboxes_works_both_ways(self):
        # `nsbox run ... | nsbox run ...`: the pipe is one's stdout and the other's stdin, and
        # both reopen it (/dev/stdout, /dev/stdin); each nsbox adds the bits its side needs.
        cmd, env = nsbox_command(["run", "--", "sh", "-c", "echo hi > /dev/stdout"], self.dirs)
        cmd2, _ = nsbox_command(["run", "--", "sh", "-c", "cat /dev/stdin"], self.dirs)
        for _ in range(5):
            r, w = os.pipe()
            a = subprocess.Popen(cmd, env=env, stdout=w, stderr=subprocess.PIPE)
            b = subprocess.Popen(cmd2, env=env, stdin=r, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
            os.close(r)
            os.close(w)
            out_b, err_b = b.communicate(timeout=60)
            _, err_a = a.communicate(timeout=60)
            self.assertEqual((a.returncode, b.returncode, out_b), (0, 0, b"hi\n"),
                             err_a + err_b)
        self.assertNoLeftovers()

    def test_the_callers_pipes_keep_their_flags(self):
        self.check_pipe_flags_stay_the_callers(["run", "--"])
        self.assertNoLeftovers()

    def test_a_named_fifo_is_not_reopened_for_reading(self):
        self.check_named_fifo_not_reopened(["run", "--"])
        self.assertNoLeftovers()

    def test_a_stdin_file_others_may_write_is_not_written(self):
        self.check_stdin_file_others_may_write_is_kept(["run", "--"])
        self.assertNoLeftovers()

    def test_host_sockets_are_not_handed_to_the_command(self):
        self.check_sockets_not_handed_over(["run", "--"])
        self.assertNoLeftovers()

    def test_a_terminal_keeps_its_settings(self):
        code, out, before, after = in_a_terminal(["run", "--", "python3", "-c", TERMINAL_HARM],
                                                 self.dirs)
        self.assertEqual(code, 0, out)
        self.assertIn(b"done", out)
        self.assertEqual(after, before)


if __name__ == "__main__":
    unittest.main()
