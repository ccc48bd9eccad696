#!/bin/bash
# Inside the test VM (tests/vm/run.sh): one e2e or security module, as ctest runs it on the
# host (run_py_test.py: exit 0, 1, or 77 for a module that cannot run here).
#   tests/vm/module.sh BUILD_DIR tests/e2e/test_x.py [PATTERN ...]   (tests/vm/cases.txt)
set -u
build=$1
module=$2
shift 2
src=$(cd "$(dirname "$0")/../.." && pwd)
export NSBOX_BIN=$build/nsbox NSBOX_SOURCE_DIR=$src NSBOX_BUILD_DIR=$build \
       NSBOX_SECURITY_BIN_DIR=$build/tests/security-bin
# TCG runs the fault storms several times slower than the host: fewer kills, the same kinds
export NSBOX_FAULT_CYCLES=${NSBOX_FAULT_CYCLES:-200}
# and more time for the tmpfs inode flood to reach its limit (test_resource_abuse's Memory)
export NSBOX_TEST_INODE_SECONDS=${NSBOX_TEST_INODE_SECONDS:-120}
cd /tmp
echo "nsbox-vm: $(uname -r); cgroup v2 only; controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
exec python3 "$src/tests/run_py_test.py" "$src/$module" "$@"
