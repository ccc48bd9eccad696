#!/bin/bash
# Run a shell command inside a throw-away VM that has cgroup v2 only: Debian 12's own kernel
# (package linux-image-amd64) under qemu, with the host's root filesystem shared read-only over
# 9p and tmpfs wherever the guest writes. The command's output is printed, and its exit status
# is this script's. Exit 77 (ctest's "skipped") when qemu or the kernel is not installed.
#
#   tests/vm/run.sh WORKDIR 'command ...'
#
# WORKDIR is an empty-or-reused scratch directory (the initramfs is built there). The host is
# not changed: the guest sees "/" read-only and writes only into WORKDIR/out.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$1
cmd=$2
timeout_s=${NSBOX_VM_TIMEOUT:-2400}

kernel=$(ls -1 /boot/vmlinuz-*-amd64 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$kernel" ] || ! command -v qemu-system-x86_64 >/dev/null || [ ! -x /usr/bin/busybox ]; then
    echo "nsbox-vm: SKIP: needs qemu-system-x86_64, busybox-static and a Debian kernel in /boot" \
         "(scripts/install-deps.sh installs them)"
    exit 77
fi
kver=${kernel#/boot/vmlinuz-}

mkdir -p "$work"
initrd=$work/initrd-$kver.gz
if [ ! -s "$initrd" ] || [ "$initrd" -ot "$here/initrd-init.sh" ]; then
    tree=$(mktemp -d "$work/initrd.XXXXXX")
    mkdir -p "$tree"/{bin,dev,proc,sys,newroot,lib/modules}
    cp /usr/bin/busybox "$tree/bin/busybox"
    cp "$here/initrd-init.sh" "$tree/init"
    chmod 0755 "$tree/init"
    for m in $(modprobe --show-depends -S "$kver" -a virtio_pci 9pnet_virtio 9p |
               awk '$1 == "insmod" && !seen[$2]++ { print $2 }'); do
        cp "$m" "$tree/lib/modules/"
        basename "$m" >> "$tree/lib/modules/order"
    done
    (cd "$tree" && find . | cpio -o -H newc --quiet | gzip -1) > "$initrd.tmp"
    mv "$initrd.tmp" "$initrd"
    rm -rf "$tree"
fi

out=$work/out
rm -rf "$out"
mkdir -p "$out"
printf '%s\n' "$cmd" > "$out/cmd"
disk=$work/scratch.img
rm -f "$disk"
truncate -s 300G "$disk"  # sparse: the host gives only what the guest writes
trap 'rm -f "$disk"' EXIT

accel=tcg,thread=multi
cpu=max
# KVM only where a stock kernel boots under it (not under every nested hypervisor): opt in.
if [ "${NSBOX_VM_KVM:-0}" = 1 ] && [ -w /dev/kvm ]; then accel=kvm; cpu=host; fi
smp=$(nproc)
[ "$smp" -gt 4 ] && smp=4
set +e
timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 \
    -accel "$accel" -cpu "$cpu" -m 4096 -smp "$smp" -nographic -no-reboot -nodefaults \
    -serial stdio -drive file="$disk",format=raw,if=virtio,cache=unsafe -kernel "$kernel" -initrd "$initrd" \
    -append "console=ttyS0 quiet panic=-1 nsboxvm.stage2=$here/stage2.sh" \
    -virtfs local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap \
    -virtfs local,path="$out",mount_tag=out,security_model=none,multidevs=remap \
    > "$work/console.log" 2>&1
qrc=$?
set -e
[ -f "$out/log" ] && cat "$out/log"
if [ ! -f "$out/rc" ]; then
    echo "nsbox-vm: the VM ended without a result (qemu exit $qrc); its console:"
    tail -40 "$work/console.log"
    exit 1
fi
grep -m1 '^nsbox-vm:' "$work/console.log" || true
exit "$(cat "$out/rc")"
