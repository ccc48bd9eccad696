#!/bin/bash
# PID 1 of the test VM once the host's root is mounted (read-only, over 9p): a cgroup-v2-only
# machine like most users' (Debian 12's own kernel, cgroup2 at /sys/fs/cgroup with every
# controller), writable tmpfs where a system writes, then the command that tests/vm/run.sh left
# in the "out" share. Its output goes to out/log and its exit status to out/rc.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
mount -t proc proc /proc
# the kernel's modules, unpacked by prepare.sh into ROOT/lib/modules: made visible below /run
# further down (not over /lib/modules: the host's root is read-only here, and a host whose
# kernel has no loadable modules has no such directory to bind onto)
modules=$(sed -n 's/.*nsboxvm.modules=\([^ ]*\).*/\1/p' /proc/cmdline)
mount -t devtmpfs devtmpfs /dev
mount -t sysfs sysfs /sys
mkdir -p /dev/pts /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
ln -sf pts/ptmx /dev/ptmx 2>/dev/null
mount -t tmpfs tmpfs /dev/shm
# No /dev/fd, /dev/stdin...: a bare devtmpfs, as on minimal systems without udev (nsbox must
# not need them; neither may this script: no <(...) here).
# The work directory's share first: it says which host paths the command needs (its source and
# build trees), which must stay visible through the tmpfs mounts below.
mount -t tmpfs -o mode=0755,size=300g tmpfs /run
mkdir -p /run/nsboxvm /run/keep
# The modules below /run, which stays (/root, where the cache is, gets covered further down);
# modprobe is told where they are, by us (modload) and for the kernel's own module loader.
mroot=/run/modules-root
mkdir -p "$mroot/lib/modules"
[ -n "$modules" ] && mount --bind "$modules" "$mroot/lib/modules"
printf '#!/bin/sh\nexec /sbin/modprobe -d %s "$@"\n' "$mroot" > /run/modprobe
chmod 755 /run/modprobe && echo /run/modprobe > /proc/sys/kernel/modprobe
modload() { /run/modprobe "$@"; }
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out /run/nsboxvm
n=0
keep=()
while IFS= read -r p; do
    [ -d "$p" ] || continue
    mkdir -p "/run/keep/$n" && mount --bind "$p" "/run/keep/$n" && keep+=("$p")
    n=$((n + 1))
done < /run/nsboxvm/keep
# /tmp, where the tests keep their directories and sandboxes their workspace images, is an
# ext4 on the scratch disk (a sparse file on the host, given back as files are deleted:
# discard), so that big files do not fill the RAM.
modload virtio_blk
mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 /dev/vda && mount -o discard /dev/vda /tmp
for d in /var/tmp /var/cache /var/lib /root /home; do
    mount -t tmpfs -o mode=0755,size=300g tmpfs "$d"
done
chmod 1777 /tmp /var/tmp
# and the kept paths back where they were (a checkout in /root or /tmp is common)
for i in "${!keep[@]}"; do
    mkdir -p "${keep[$i]}" 2>/dev/null
    mount --bind "/run/keep/$i" "${keep[$i]}" || echo "nsbox-vm: cannot keep ${keep[$i]} visible"
    [ -e "${keep[$i]}" ] || echo "nsbox-vm: ${keep[$i]} is not visible in the guest"
done
# /etc writable over the host's (an overlay whose upper layer is in RAM): the tests add their
# unprivileged user with useradd
modload overlay
mkdir -p /run/etc-rw && mount -t tmpfs tmpfs /run/etc-rw && mkdir -p /run/etc-rw/up /run/etc-rw/work
mount -t overlay overlay -o lowerdir=/etc,upperdir=/run/etc-rw/up,workdir=/run/etc-rw/work /etc ||
    echo "nsbox-vm: /etc stays read-only"
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
for m in loop nf_tables veth; do modload "$m" || echo "nsbox-vm: cannot load $m"; done
ip link set lo up
hostname nsbox-vm
echo "nsbox-vm: $(uname -r), cgroup2 controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
# A heartbeat in the out share: the host (run.sh) takes a guest whose beat stops for minutes
# for frozen (seen under emulation, without a word on the console) and boots it once more.
( n=0; while :; do n=$((n + 1)); echo "$n" > /run/nsboxvm/beat; sleep 10; done ) \
    < /dev/null > /dev/null 2>&1 &
beat=$!
rc=1
if [ -f /run/nsboxvm/cmd ]; then
    bash /run/nsboxvm/cmd < /dev/null > /run/nsboxvm/log 2>&1
    rc=$?
fi
kill "$beat" 2>/dev/null
wait "$beat" 2>/dev/null
echo "$rc" > /run/nsboxvm/rc
sync
umount /run/nsboxvm
echo o > /proc/sysrq-trigger
sleep 10
