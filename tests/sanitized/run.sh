#!/bin/sh
# One end-to-end module against the ASan/UBSan build (ctest label asan-e2e):
#
#   run.sh LOG_DIR tests/e2e/test_x.py [PATTERN ...]
#
# The module runs as under tests/run_py_test.py; then any sanitizer report its processes left in
# LOG_DIR (tests/sanitized/options.c sends them there) is printed and fails it, even where the
# module passed: a report of a process whose end no test noticed is still a memory error.
set -u
logs=$1
shift
mkdir -p "$logs"
chmod 1777 "$logs" # the tests' own unprivileged users' processes write there too
rm -f "$logs"/report.*
python3 "$(dirname "$0")/../run_py_test.py" "$@"
rc=$?
reports=0
for f in "$logs"/report.*; do
    if [ -s "$f" ]; then
        echo "=== sanitizer report $f"
        cat "$f"
        reports=$((reports + 1))
    fi
done
if [ "$reports" -gt 0 ]; then
    echo "asan-e2e: $reports sanitizer report(s) above: failed"
    exit 1
fi
if [ "$rc" = 1 ]; then
    # a sandbox's init cannot write its report: the error ends it, and that is all a test sees
    echo "asan-e2e: a test that saw a sandbox's init end (\"deleted because its init process" \
        "ended\") may have met a sanitizer error in init, whose report cannot leave the" \
        "sandbox: run the same test against build/nsbox to compare"
fi
exit $rc
