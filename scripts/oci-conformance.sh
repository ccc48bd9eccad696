#!/bin/sh
# OCI runtime conformance: opencontainers/runtime-tools' validation programs against one or
# more runtimes, side by side (docs/oci.md, "Conformance").
#
#   scripts/oci-conformance.sh [-w WORKDIR] [-t SECONDS] [-o REGEX] [-e EXPECTED] SOURCE RUNTIME...
#
# SOURCE is a runtime-tools checkout (a directory with validation/ and vendor/) or its git
# directory, of which commit 0105384 (the snapshot Debian packages) is taken. Its programs
# are built offline with the Go toolchain found on PATH and the checkout's vendor/ tree; none
# of runtime-tools is part of this repository. RUNTIME is a path or a name on PATH (nsbox-oci,
# runc, crun). Each runtime runs in its own private mount namespace (`unshare -m
# --propagation private`), as its propagation tests leave mounts behind. crun 1.8 refuses this
# host's hybrid cgroup layout, so for a runtime named crun the namespace goes without
# /sys/fs/cgroup/unified (as bench/ does). -o runs only the programs whose names match REGEX.
# -e names a file of programs (one a line, # comments) that must pass for every runtime given:
# the exit status is 1 when one of them does not (the regression test of tests/CMakeLists.txt).
#
# Prints one line per program and runtime (PASS, FAIL, TIMEOUT) and the totals; the TAP output
# of each run is kept in WORKDIR/logs/RUNTIME/PROGRAM.log. A program passes when it exits 0
# and reports no "not ok". Exit status: 0 when it ran, 77 when it could not be built here, 1 on
# a usage error, an expected program that failed, or a cgroup the programs made that could not
# be removed. Needs root (the runtimes do).
set -eu

COMMIT=0105384
work=""
timeout_s=120
only=""
expected=""
while getopts w:t:o:e: opt; do
    case $opt in
    w) work=$OPTARG ;;
    t) timeout_s=$OPTARG ;;
    o) only=$OPTARG ;;
    e) expected=$OPTARG ;;
    *) exit 1 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -lt 2 ]; then
    echo "usage: $0 [-w WORKDIR] [-t SECONDS] [-o REGEX] RUNTIME_TOOLS_SOURCE RUNTIME..." >&2
    exit 1
fi
src=$1
shift
if [ "$(id -u)" != 0 ]; then
    echo "skip: needs root (the runtimes create namespaces and cgroups)" >&2
    exit 77
fi
if ! command -v go >/dev/null 2>&1; then
    echo "skip: no Go toolchain (apt-get install golang-go)" >&2
    exit 77
fi
if [ -z "$work" ]; then
    work=$(mktemp -d /tmp/oci-conformance.XXXXXX)
fi
mkdir -p "$work"
work=$(cd "$work" && pwd)

# The source tree: a checkout as it is, or the snapshot's commit out of a git directory.
tree=$work/src
if [ -d "$src/validation" ] && [ -d "$src/vendor" ]; then
    tree=$(cd "$src" && pwd)
elif git --git-dir="$src" cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
    if [ ! -d "$tree/validation" ]; then
        mkdir -p "$tree"
        git --git-dir="$src" archive "$COMMIT" | tar -x -C "$tree"
    fi
else
    echo "skip: $src is neither a runtime-tools checkout (validation/, vendor/) nor a git" \
        "directory holding commit $COMMIT" >&2
    exit 77
fi

# Build offline: the vendored modules only, never the network.
bin=$work/bin
mkdir -p "$bin" "$work/gocache"
export GOFLAGS=-mod=vendor GOPROXY=off GOCACHE="$work/gocache" GO111MODULE=on
export GOPATH="$work/gopath" GOTOOLCHAIN=local
if [ ! -x "$bin/runtimetest" ]; then
    echo "building runtime-tools' validation programs in $bin ..." >&2
    if ! (cd "$tree" && CGO_ENABLED=0 go build -o "$bin/runtimetest" ./cmd/runtimetest &&
        go build -o "$bin/" ./validation/...) >"$work/build.log" 2>&1; then
        echo "skip: runtime-tools did not build here (see $work/build.log):" >&2
        tail -5 "$work/build.log" >&2
        exit 77
    fi
    rm -f "$bin/util"
fi
progs=$(cd "$bin" && ls | grep -v '^runtimetest$' | sort)
if [ -n "$only" ]; then
    progs=$(echo "$progs" | grep -E "$only" || true)
fi

# The programs expect runtimetest and the rootfs archive in their working directory.
run=$work/run
mkdir -p "$run/tmp"
cp "$bin/runtimetest" "$run/runtimetest"
cp "$tree/rootfs-amd64.tar.gz" "$run/"

# One runtime's whole run, inside its private mount namespace. The programs call the runtime
# without --root: a wrapper gives it a state root of this run's own, whose containers (a failed
# program leaves some) are deleted at the end. The programs' cgroups (runtime-tools'
# cgroups/cgroups.go: /cgrouptest, and testdir/cgrouptest/container from the root here) lose
# their containers' own with the containers, and keep the parents, as runc leaves them: those
# this run made (not there before it) are removed, and one that cannot be is a LEFT line.
cgroups="cgrouptest testdir"
run_one() {
    rt=$1
    name=$2
    logs=$work/logs/$name
    state=$work/state/$name
    mkdir -p "$logs" "$state"
    printf '#!/bin/sh\nexec "%s" --root "%s" "$@"\n' "$rt" "$state" >"$work/rt-$name"
    chmod +x "$work/rt-$name"
    rt=$work/rt-$name
    cat >"$work/run-$name.sh" <<EOF
set -u
cd "$run"
if [ "$name" = crun ] && mountpoint -q /sys/fs/cgroup/unified; then
    umount -l /sys/fs/cgroup/unified
fi
made=""
for top in /sys/fs/cgroup /sys/fs/cgroup/*; do
    for c in $cgroups; do
        [ -d "\$top/\$c" ] || made="\$made \$top/\$c"
    done
done
for p in $(echo $progs); do
    TMPDIR="$run/tmp" RUNTIME="$rt" timeout -k 5 $timeout_s "$bin/\$p" >"$logs/\$p.log" 2>&1
    rc=\$?
    if [ \$rc = 124 ] || [ \$rc = 137 ]; then
        echo "TIMEOUT \$p"
    elif [ \$rc = 0 ] && ! grep -q '^not ok' "$logs/\$p.log"; then
        echo "PASS \$p"
    else
        echo "FAIL \$p"
    fi
done
for c in \$(ls "$state"); do
    "$rt" delete --force "\$c" >/dev/null 2>&1
done
for d in \$made; do
    if [ -d "\$d" ]; then
        find "\$d" -depth -type d -exec rmdir {} + 2>/dev/null
        [ -d "\$d" ] && echo "LEFT \$d"
    fi
done
EOF
    unshare -m --propagation private sh "$work/run-$name.sh" >"$work/result-$name.txt"
}

names=""
for rt in "$@"; do
    path=$(command -v "$rt" || true)
    if [ -z "$path" ]; then
        echo "skip: runtime $rt not found" >&2
        exit 77
    fi
    # the programs run the runtime from their own directories: a relative path is made whole
    case $path in /*) ;; *) path=$(cd "$(dirname "$path")" && pwd)/$(basename "$path") ;; esac
    name=$(basename "$path")
    names="$names $name"
    start=$(date +%s)
    run_one "$path" "$name"
    echo "$name: $(($(date +%s) - start)) s" >&2
done

# The table: one row per program, one column per runtime.
printf '%-40s' program
for n in $names; do printf ' %-10s' "$n"; done
echo
for p in $progs; do
    printf '%-40s' "$p"
    for n in $names; do
        printf ' %-10s' "$(awk -v p="$p" '$2 == p { print $1 }' "$work/result-$n.txt")"
    done
    echo
done
printf '%-40s' "passed (of $(echo "$progs" | wc -w))"
for n in $names; do printf ' %-10s' "$(grep -c '^PASS' "$work/result-$n.txt" || true)"; done
echo

# Against the expected list: every program in it passed, for every runtime.
status=0
if [ -n "$expected" ]; then
    for p in $(grep -v '^#' "$expected"); do
        for n in $names; do
            if ! grep -qx "PASS $p" "$work/result-$n.txt"; then
                echo "REGRESSION: $p no longer passes with $n (log: $work/logs/$n/$p.log)"
                status=1
            fi
        done
    done
fi
# What a run left on the host fails it, whatever was expected.
for n in $names; do
    for d in $(awk '$1 == "LEFT" { print $2 }' "$work/result-$n.txt"); do
        echo "LEFT: cgroup $d, made by the programs run with $n, could not be removed"
        status=1
    done
done
exit $status
