#!/bin/bash
# The test VM itself (tests/vm/run.sh): what every vm.* test relies on, checked in one boot.
#   tests/vm/selftest.sh WORKDIR
# - host directories handed to run.sh stay visible at their paths although the guest covers
#   /root and /tmp with its own filesystems (checkouts live there), and read-only;
# - the guest has cgroup v2 only, with the memory, cpu and pids controllers;
# - the command's exit status comes back;
# - the guest has the loop, overlay, nf_tables and veth modules and a writable /etc;
# - nothing the guest writes reaches the host.
# Exit 77 where run.sh cannot make the VM.
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=$1
home=${HOME:-/root}
mkdir -p "$home/.cache/nsbox"
a=$(mktemp -d "$home/.cache/nsbox/vm-selftest.XXXXXX")  # below /root as root
b=$(mktemp -d /tmp/nsbox-vm-selftest.XXXXXX)
trap 'rm -rf "$a" "$b"' EXIT
echo "from-root-$$" > "$a/mark"
echo "from-tmp-$$" > "$b/mark"
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }

out=$("$here/run.sh" "$work" "
set -u
echo \"a=\$(cat $a/mark) b=\$(cat $b/mark)\"
touch $a/written 2>/dev/null && echo a-writable
touch $b/written 2>/dev/null && echo b-writable
touch /root/guest-file && echo root-writable
echo \"v2=\$(stat -fc %T /sys/fs/cgroup) ctl=\$(cat /sys/fs/cgroup/cgroup.controllers)\"
for m in loop overlay nf_tables veth; do [ -d /sys/module/\$m ] && echo \"module-\$m\"; done
touch /etc/nsbox-vm-selftest && echo etc-writable
exit 7" "$a" "$b")
rc=$?
[ "$rc" = 77 ] && { echo "$out"; exit 77; }
echo "$out"
check "the command's status comes back (7)" '[ "$rc" = 7 ]'
check "a kept directory below $home is visible" 'grep -q "a=from-root-$$" <<< "$out"'
check "a kept directory below /tmp is visible" 'grep -q "b=from-tmp-$$" <<< "$out"'
check "kept directories are read-only in the guest" '! grep -Eq "^(a|b)-writable$" <<< "$out"'
check "the guest can write its own /root" 'grep -q root-writable <<< "$out"'
check "cgroup v2 only, with memory, cpu and pids" \
      'grep -Eq "v2=cgroup2fs ctl=.*\bcpu\b" <<< "$out" && grep -q "memory" <<< "$out" && grep -q "pids" <<< "$out"'
check "nothing the guest wrote reached the host" \
      '[ ! -e "$a/written" ] && [ ! -e "$b/written" ] && [ ! -e /root/guest-file ] &&
       [ ! -e /etc/nsbox-vm-selftest ]'
# what the e2e modules need of the guest kernel (once missing on a host without /lib/modules:
# test_network skipped, /etc stayed read-only, workspaces fell back to tmpfs)
for m in loop overlay nf_tables veth; do
    check "the guest has the $m module" 'grep -qx "module-$m" <<< "$out"'
done
check "the guest's /etc is writable (an overlay: useradd)" 'grep -qx etc-writable <<< "$out"'
exit $fail
