#!/bin/bash
# Run a shell command inside a throw-away VM that has cgroup v2 only: Debian 12's own kernel
# (unpacked from the package linux-image-amd64 by prepare.sh, not installed) under qemu, with
# the host's root filesystem shared read-only over 9p and tmpfs wherever the guest writes. The
# command's output is printed, and its exit status is this script's. Exit 77 (ctest's
# "skipped") when the VM cannot be had here: not root, no qemu, no kernel (prepare.sh says why).
#
#   tests/vm/run.sh WORKDIR 'command ...' [PATH...]
#
# WORKDIR is an empty-or-reused scratch directory (the guest's scratch disk and output). The
# guest covers /tmp, /root, /home and /var/{tmp,cache,lib} with its own filesystems; the source
# tree this script is in, and each PATH (a build tree), stay visible at their paths, read-only.
# The kernel is NSBOX_VM_KERNEL_DIR (default ~/.cache/nsbox/vm). The host is not changed: the
# guest writes only into WORKDIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
work=$1
cmd=$2
shift 2
timeout_s=${NSBOX_VM_TIMEOUT:-1500}  # below ctest's 1800 s, so that the console is shown

if [ "$(id -u)" != 0 ]; then
    # the guest's root reads the host's files with the caller's rights (9p): the tests need root's
    echo "nsbox-vm: SKIP: the cgroup v2 VM runs as root only" >&2
    exit 77
fi
kdir=$("$here/prepare.sh") || exit $?  # 77 with the reason when the VM cannot be made here
mkdir -p "$work"
work=$(cd "$work" && pwd)
# qemu's option syntax takes no comma in a path, and the guest reads paths per line or word
for p in "$work" "$kdir" "$src" "$@"; do
    case $p in
    *[,[:space:]]*)
        echo "nsbox-vm: a path with a comma or a blank cannot go through qemu's options: '$p'" >&2
        exit 1 ;;
    esac
done

out=$work/out
disk=$work/scratch.img
trap 'rm -f "$disk"' EXIT

accel=tcg,thread=multi
cpu=max
# KVM only where a stock kernel boots under it (not under every nested hypervisor): opt in.
if [ "${NSBOX_VM_KVM:-0}" = 1 ] && [ -w /dev/kvm ]; then accel=kvm; cpu=host; fi
smp=$(nproc)
[ "$smp" -gt 4 ] && smp=4
# 4 GiB of guest memory, less on a host that has not twice that available
avail_mib=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
mem=4096
[ "$avail_mib" -lt 8192 ] && mem=$((avail_mib / 2))
if [ "$mem" -lt 1536 ]; then
    echo "nsbox-vm: SKIP: only ${avail_mib} MiB of memory available; the VM needs at least 3 GiB" >&2
    exit 77
fi

# One boot. A guest kernel that reports a soft lockup (a CPU stuck in the kernel for 20 s and
# more) is stopped at once: under emulation (TCG) this has been seen, rarely, with both vCPUs
# stuck at the start of a run; waiting would only reach the timeout. So is a guest that froze
# without a word: its heartbeat (stage2.sh writes a new count to out/beat every 10 s of its
# clock) unchanged for NSBOX_VM_FROZEN_S of the host's (default 240 s).
frozen_s=${NSBOX_VM_FROZEN_S:-240}
boot() {
    rm -rf "$out" "$disk"
    mkdir -p "$out"
    printf '%s\n' "$cmd" > "$out/cmd"
    printf '%s\n' "$src" "$@" > "$out/keep"
    truncate -s 300G "$disk"  # sparse: the host gives only what the guest writes (and discards)
    # niced: whatever else the machine runs keeps the CPU it needs (the suite's debian image
    # build beside it, a developer's work) and the VM takes what is left
    nice -n 10 timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 \
        -accel "$accel" -cpu "$cpu" -m "$mem" -smp "$smp" -nographic -no-reboot -nodefaults \
        -serial stdio -kernel "$kdir/vmlinuz" -initrd "$kdir/initrd.gz" \
        -drive file="$disk",format=raw,if=virtio,cache=unsafe,discard=unmap,werror=report,rerror=report \
        -append "console=ttyS0 loglevel=5 panic=-1 nsboxvm.stage2=$here/stage2.sh nsboxvm.modules=$kdir/lib/modules" \
        -virtfs local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap \
        -virtfs local,path="$out",mount_tag=out,security_model=none,multidevs=remap \
        > "$work/console.log" 2>&1 &
    local qpid=$!
    lockup=0
    frozen=0
    local beat="" seen beat_at
    beat_at=$(date +%s)
    while kill -0 "$qpid" 2>/dev/null; do
        if grep -q 'soft lockup' "$work/console.log"; then
            lockup=1
            sleep 2  # the rest of its report
            kill "$qpid"
            break
        fi
        if [ -f "$out/beat" ] && [ ! -f "$out/rc" ]; then
            seen=$(cat "$out/beat" 2>/dev/null) || seen=""
            if [ "$seen" != "$beat" ]; then
                beat=$seen
                beat_at=$(date +%s)
            elif [ $(( $(date +%s) - beat_at )) -gt "$frozen_s" ]; then
                frozen=1
                kill "$qpid"
                break
            fi
        fi
        sleep 1
    done
    set +e
    wait "$qpid"
    qrc=$?
    set -e
}

boot "$@"
if [ "$lockup" = 1 ] || [ "$frozen" = 1 ]; then
    if [ "$lockup" = 1 ]; then
        echo "nsbox-vm: the guest kernel locked up (emulated CPUs); its console:"
        grep -A40 -m1 'soft lockup' "$work/console.log" | head -60
    else
        echo "nsbox-vm: the guest froze (no heartbeat for ${frozen_s} s); its output until then:"
        tail -30 "$out/log" 2>/dev/null
        echo "nsbox-vm: its console:"
        tail -30 "$work/console.log"
    fi
    echo "nsbox-vm: booting once more"
    boot "$@"
    if [ "$lockup" = 1 ] || [ "$frozen" = 1 ]; then
        echo "nsbox-vm: the guest kernel locked up or froze again; its console:"
        tail -60 "$work/console.log"
        exit 1
    fi
fi
[ -f "$out/log" ] && cat "$out/log"
if [ ! -f "$out/rc" ]; then
    echo "nsbox-vm: the VM ended without a result (qemu exit $qrc); its console:"
    tail -60 "$work/console.log"
    exit 1
fi
grep -m1 '^nsbox-vm:' "$work/console.log" || true
exit "$(cat "$out/rc")"
