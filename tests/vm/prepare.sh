#!/bin/bash
# Make the test VM's kernel, modules and initramfs (tests/vm/run.sh uses them), once, and print
# the directory that holds them:
#   tests/vm/prepare.sh            # NSBOX_VM_KERNEL_DIR, default ~/.cache/nsbox/vm
# The kernel is Debian 12's own (the package linux-image-amd64 depends on), fetched with
# `apt-get download` from the machine's configured sources (after an `apt-get update` if the
# package lists lack it) and unpacked there: nothing is installed, /boot and the host's
# /lib/modules are not touched. Offline, a Debian kernel already in /boot with its modules is
# used instead. The kernel is kept: delete the directory to fetch a newer one. Exit 77 (ctest's "skipped") with the reason when neither is possible or qemu is
# missing, so that such a machine skips the VM tests instead of failing them; the reason is
# kept for 10 minutes, so that the other VM tests skip at once instead of trying again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
dir=${NSBOX_VM_KERNEL_DIR:-${XDG_CACHE_HOME:-$home/.cache}/nsbox/vm}

skip() { echo "nsbox-vm: SKIP: $*" >&2; exit 77; }
command -v qemu-system-x86_64 >/dev/null ||
    skip "needs qemu-system-x86_64 (package qemu-system-x86; scripts/install-deps.sh installs it)"
[ -x /usr/bin/busybox ] || skip "needs /usr/bin/busybox (package busybox-static)"
command -v cpio >/dev/null || skip "needs cpio"
command -v depmod >/dev/null || skip "needs depmod (package kmod)"

# A directory of ours, or a new one: this script deletes below it
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ ! -e "$dir/.nsbox-vm-cache" ]; then
    [ -z "$(ls -A "$dir")" ] || [ -s "$dir/kver" ] ||
        { echo "nsbox-vm: $dir is not empty and not a VM cache; set NSBOX_VM_KERNEL_DIR" >&2; exit 1; }
    touch "$dir/.nsbox-vm-cache"
fi

# One preparation at a time (ctest -j, two builds sharing the cache)
exec 9>"$dir/.lock"
flock 9
# what a killed preparation left: its mktemp directories (six characters after the dot; not
# initrd.gz itself, which a VM booting meanwhile opens: every preparation removed it and built it
# again, and a second run.sh at the same time failed to boot) and its *.tmp files
rm -rf "$dir"/fetch.?????? "$dir"/initrd.?????? "$dir"/*.tmp
if [ -s "$dir/unavailable" ] && [ -n "$(find "$dir/unavailable" -mmin -10)" ]; then
    skip "$(cat "$dir/unavailable") (noted less than 10 minutes ago)"
fi
rm -f "$dir/unavailable"
unavailable() { echo "$*" > "$dir/unavailable"; skip "$*"; }

if [ ! -s "$dir/kver" ]; then
    tmp=$(mktemp -d "$dir/fetch.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    pkg=
    fetch() {
        pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
              awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')
        [ -n "$pkg" ] && (cd "$tmp" && apt-get download -q "$pkg" >/dev/null 2>"$tmp/err")
    }
    # package lists missing or stale (a CI image that cleaned them): refresh them once, as root
    if fetch || { [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>"$tmp/err" && fetch; }; then
        dpkg-deb -x "$tmp"/"$pkg"_*.deb "$tmp/tree"
        kernel=$(ls -1 "$tmp"/tree/boot/vmlinuz-* | head -1)
        kver=${kernel##*/vmlinuz-}
        from=$pkg
        moddir=$tmp/tree/lib/modules/$kver
    else
        why="cannot download Debian's kernel package (${pkg:-linux-image-amd64}: $(tail -1 "$tmp/err" 2>/dev/null | grep . || echo "not in the apt sources"))"
        # offline: the newest Debian kernel in /boot, with its modules
        kernel=$(ls -1 /boot/vmlinuz-*-amd64 2>/dev/null | sort -V | tail -1 || true)
        kver=${kernel#/boot/vmlinuz-}
        [ -n "$kernel" ] && [ -d "/lib/modules/$kver/kernel" ] ||
            unavailable "$why, and no Debian kernel with its modules is in /boot"
        from=/boot
        moddir=/lib/modules/$kver
    fi
    mkdir -p "$dir/lib/modules"
    rm -rf "${dir:?}/lib/modules/$kver"
    if [ "$from" = /boot ]; then
        cp -a "$moddir" "$dir/lib/modules/$kver"
    else
        mv "$moddir" "$dir/lib/modules/$kver"
    fi
    cp "$kernel" "$dir/vmlinuz"
    # drivers for hardware the VM does not have: 200 MB of the 400 the cache would hold
    for d in gpu media net/wireless net/ethernet infiniband staging scsi; do
        rm -rf "$dir/lib/modules/$kver/kernel/drivers/$d"
    done
    rm -rf "$dir/lib/modules/$kver/kernel/sound"
    depmod -b "$dir" "$kver"
    echo "$kver" > "$dir/kver.tmp" && mv "$dir/kver.tmp" "$dir/kver"
    echo "nsbox-vm: kernel $kver from $from" >&2
    rm -rf "$tmp"
    trap - EXIT
fi
kver=$(cat "$dir/kver")

# The initramfs: busybox, the virtio and 9p modules (uncompressed: busybox's insmod reads only
# plain ones), and initrd-init.sh as /init
initrd=$dir/initrd.gz
if [ ! -s "$initrd" ] || [ "$initrd" -ot "$here/initrd-init.sh" ] || [ "$initrd" -ot "$dir/kver" ]; then
    tree=$(mktemp -d "$dir/initrd.XXXXXX")
    trap 'rm -rf "$tree"' EXIT
    mkdir -p "$tree"/{bin,dev,proc,sys,newroot,lib/modules}
    cp /usr/bin/busybox "$tree/bin/busybox"
    cp "$here/initrd-init.sh" "$tree/init"
    chmod 0755 "$tree/init"
    mods=$(modprobe -d "$dir" --show-depends -S "$kver" -a virtio_pci 9pnet_virtio 9p |
           awk '$1 == "insmod" && !seen[$2]++ { print $2 }')
    for want in virtio_pci 9pnet_virtio 9p; do
        grep -Eq "/$want\.ko(\.[a-z]+)?$" <<< "$mods" ||
            { echo "nsbox-vm: kernel $kver has no module $want" >&2; exit 1; }
    done
    for m in $mods; do
        name=$(basename "$m")
        case $m in
        *.ko.xz) xz -dc "$m" > "$tree/lib/modules/${name%.xz}"; name=${name%.xz} ;;
        *.ko.zst) zstd -qdc "$m" > "$tree/lib/modules/${name%.zst}"; name=${name%.zst} ;;
        *.ko.gz) gzip -dc "$m" > "$tree/lib/modules/${name%.gz}"; name=${name%.gz} ;;
        *) cp "$m" "$tree/lib/modules/" ;;
        esac
        echo "$name" >> "$tree/lib/modules/order"
    done
    (cd "$tree" && find . | cpio -o -H newc --quiet | gzip -1) > "$initrd.tmp"
    mv "$initrd.tmp" "$initrd"
    rm -rf "$tree"
    trap - EXIT
fi
echo "nsbox-vm: ready: $dir (kernel $kver)" >&2
echo "$dir"
