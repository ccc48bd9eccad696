#!/bin/busybox sh
# /init of the test VM's initramfs (tests/vm/run.sh): load the virtio and 9p modules, mount
# the host's root read-only from the 9p share "root", and switch to stage2.sh in it.
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t devtmpfs dev /dev
for m in $(/bin/busybox cat /lib/modules/order); do
    /bin/busybox insmod "/lib/modules/$m" || echo "nsbox-vm: insmod $m failed"
done
if ! /bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 root /newroot; then
    echo "nsbox-vm: cannot mount the host's root over 9p"
    /bin/busybox echo o > /proc/sysrq-trigger
fi
stage2=$(/bin/busybox sed -n 's/.*nsboxvm.stage2=\([^ ]*\).*/\1/p' /proc/cmdline)
/bin/busybox umount /proc
/bin/busybox umount /dev
exec /bin/busybox switch_root /newroot /bin/bash "$stage2"
