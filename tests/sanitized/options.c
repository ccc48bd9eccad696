/* The sanitizers' options of nsbox, nsbox-oci and nsbox-egress in the ASan/UBSan build
 * (-DNSBOX_SANITIZE=ON), linked into those programs only there. Compiled in, not taken from
 * ASAN_OPTIONS alone: the tests start nsbox with environments of their own, and a sandbox's
 * init and supervisor run on with the options of the nsbox that forked them. A variable that is
 * set still overrides these (the sanitizers read it after them).
 *
 * - An error kills the process with SIGABRT (abort_on_error): a supervisor or init whose
 *   stderr is /dev/null still ends, and the test that needed it fails.
 * - Reports go to NSBOX_SANITIZER_LOG.<pid> (the build tree's; tests/sanitized/run.sh fails a
 *   module that leaves one). A process inside a sandbox cannot open it (its mount namespace
 *   has no such path): the runtime then says so on that process's stderr and ends it, which is
 *   still an error that fails the test.
 * - Leaks are checked at exit (LeakSanitizer). It cannot run under ptrace (strace, gdb): a
 *   test that traces nsbox is left out of the asan-e2e set (tests/CMakeLists.txt). A sandbox's
 *   init ends with _exit and is never checked.
 *
 * The names are the runtimes' (they look these functions up), not this file's. */
#ifndef NSBOX_SANITIZER_LOG
#error "NSBOX_SANITIZER_LOG: the path prefix of the sanitizers' reports (CMakeLists.txt)"
#endif

const char *__asan_default_options(void);
const char *__ubsan_default_options(void);

const char *__asan_default_options(void)
{
    return "abort_on_error=1:halt_on_error=1:detect_leaks=1:log_path=" NSBOX_SANITIZER_LOG;
}

const char *__ubsan_default_options(void)
{
    return "abort_on_error=1:halt_on_error=1:print_stacktrace=1:log_path=" NSBOX_SANITIZER_LOG;
}
