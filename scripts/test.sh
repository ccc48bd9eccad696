#!/bin/sh
# Fresh Debian 12 machine, as root: install what nsbox needs, build it, and run the whole test
# suite through ctest: unit tests, end-to-end and security tests against real sandboxes, the
# same e2e and security tests (and the live cgroup test) again in a cgroup-v2-only qemu VM
# (tests/vm, labels "vm"), then the unit tests and fuzz targets again in a clang ASan/UBSan
# build.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"

status=0
ctest --test-dir "$root/build" --output-on-failure --timeout 1200 2>&1 | tee "$root/build/ctest.log" || status=1

CC=clang cmake -S "$root" -B "$root/build-asan" -DNSBOX_SANITIZE=ON -DNSBOX_FUZZ=ON \
    -DNSBOX_WERROR=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$root/build-asan" -j"$(nproc)"
ctest --test-dir "$root/build-asan" -L 'unit|fuzz' --output-on-failure 2>&1 | tee "$root/build-asan/ctest.log" || status=1

# One closing line for both runs, and the exit status from the logs: `ctest | tee` alone would
# give tee's status (POSIX sh has no pipefail), and a failed test would pass CI.
if python3 - "$root/build/ctest.log" "$root/build-asan/ctest.log" <<'PY'
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
