#!/bin/bash
# Inside the test VM (tests/vm/run.sh), in one boot: the live cgroup unit test, then each module
# of tests/vm/cases.txt with its patterns, as ctest runs a module on the host (run_py_test.py).
#   tests/vm/cases.sh BUILD_DIR TEST_CGROUP_LIVE
# One boot for all: under emulation a boot costs most of a minute, more than most modules' own
# tests here. Exit 1 if anything failed or a module could not run at all (exit 77: the VM is where
# it must run), else 0.
set -uf  # -f: the patterns, "*" among them, are words for run_py_test.py, never globs
build=$1
cgroup_live=$2
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
export NSBOX_BIN=$build/nsbox NSBOX_SOURCE_DIR=$src NSBOX_BUILD_DIR=$build \
       NSBOX_SECURITY_BIN_DIR=$build/tests/security-bin
# TCG runs the fault storm several times slower than the host: fewer kills, the same kinds
export NSBOX_FAULT_CYCLES=${NSBOX_FAULT_CYCLES:-100}
cd /tmp
echo "nsbox-vm: $(uname -r); cgroup v2 only; controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"

passed=() failed=() skipped=()
run() {
    local name=$1 start=$SECONDS rc
    shift
    echo "=== $name"
    "$@"
    rc=$?
    echo "=== $name: exit $rc, $((SECONDS - start)) s"
    case $rc in
    0) passed+=("$name") ;;
    77) skipped+=("$name"); failed+=("$name (could not run)") ;;
    *) failed+=("$name") ;;
    esac
}

run unit.test_cgroup_live env NSBOX_REQUIRE_LIVE_CGROUPS=1 "$cgroup_live"
# (no process substitution: the guest has no /dev/fd)
modules=$(awk '/^[a-z]/ && !seen[$1]++ { print $1 }' "$here/cases.txt")
if [ -z "$modules" ]; then
    echo "nsbox-vm: no test read from $here/cases.txt"
    exit 1
fi
for m in $modules; do
    # shellcheck disable=SC2207 # one word each ([*A-Za-z0-9_.]); set -f keeps "*" as it is
    patterns=($(awk -v m="$m" '$1 == m { print $2 }' "$here/cases.txt"))
    run "$m" python3 "$src/tests/run_py_test.py" "$src/tests/$m.py" "${patterns[@]}"
done

echo "nsbox-vm: passed: ${passed[*]:-none}"
echo "nsbox-vm: skipped: ${skipped[*]:-none}"
echo "nsbox-vm: failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ] || exit 1
exit 0
