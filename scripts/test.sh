#!/bin/sh
# Fresh Debian 12 machine, as root: install what nsbox needs, build it, and run the tests
# through ctest.
#
#   ./scripts/test.sh           the whole suite (what CI runs: .ci/run), about 25 minutes on
#                               2 cores: unit tests, end-to-end and security tests against real
#                               sandboxes, the cgroup tests again in a cgroup-v2-only qemu VM
#                               (tests/vm, tests/vm/cases.txt), the debian image build beside
#                               them; then the unit tests, fuzz targets and a few end-to-end
#                               modules (ctest label "asan-e2e", about 2 minutes) again in a
#                               clang ASan/UBSan build
#   ./scripts/test.sh --quick   day-to-day: the unit tests and the fast end-to-end modules
#                               (ctest label "quick"), about 3 minutes
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
quick=0
case "${1:-}" in
--quick) quick=1 ;;
"") ;;
*) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"

status=0
logs="$root/build/ctest.log"
if [ "$quick" = 1 ]; then
    ctest --test-dir "$root/build" -L 'unit|quick' -LE vm --output-on-failure --timeout 1200 2>&1 |
        tee "$root/build/ctest.log" || status=1
else
    # -j2: the debian image build runs beside the other tests (tests/CMakeLists.txt)
    ctest --test-dir "$root/build" -j2 --output-on-failure --timeout 1200 2>&1 |
        tee "$root/build/ctest.log" || status=1

    CC=clang cmake -S "$root" -B "$root/build-asan" -DNSBOX_SANITIZE=ON -DNSBOX_FUZZ=ON \
        -DNSBOX_WERROR=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
    cmake --build "$root/build-asan" -j"$(nproc)"
    # asan-e2e: the main end-to-end paths against the sanitized programs (tests/CMakeLists.txt)
    ctest --test-dir "$root/build-asan" -L 'unit|asan-e2e' --output-on-failure 2>&1 |
        tee "$root/build-asan/ctest.log" || status=1
    # the fuzz targets two at a time: each runs for a fixed time, on its own corpus directory,
    # and touches nothing of the machine's, so two share the cores without changing a result
    ctest --test-dir "$root/build-asan" -L fuzz -j2 --output-on-failure 2>&1 |
        tee "$root/build-asan/ctest-fuzz.log" || status=1
    logs="$logs $root/build-asan/ctest.log $root/build-asan/ctest-fuzz.log"
fi

# One closing line for all runs, and the exit status from the logs: `ctest | tee` alone would
# give tee's status (POSIX sh has no pipefail), and a failed test would pass CI.
# shellcheck disable=SC2086
if python3 - $logs <<'PY'
import re, sys
passed = failed = skipped = 0
for path in sys.argv[1:]:
    text = open(path, errors="replace").read()
    m = re.search(r"tests passed, (\d+) tests failed out of (\d+)", text)
    if not m:
        failed += 1
        continue
    f, total = int(m.group(1)), int(m.group(2))
    # "Not Run" (a missing program, a failed fixture) is counted by ctest as failed already
    s = len(re.findall(r"\*\*\*Skipped", text))
    passed += total - f - s
    failed += f
    skipped += s
print(f"total: {passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
then :; else status=1; fi
exit $status
