#!/bin/sh
# nsbox vs bubblewrap vs crun, one-shot sandboxes, side by side in one run.
#
#   bench/run.sh [--quick] [bench.py options...]
#
# Uses $NSBOX_BIN, else build/nsbox next to this directory. Needs root (crun and the cgroup
# micro-benchmark), bwrap and crun (a missing one is skipped), python3, a C compiler for
# bench/cgattach.c (skipped without one), perf for the phase breakdown (optional).
# Results: a markdown table on stdout, raw JSON + markdown in bench/results/ (gitignored).
# Everything it creates lives in one temporary directory, plus containers and cgroups named
# nsboxbench-<tag>-*, and all of it is removed on exit, also on Ctrl-C.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
nsbox=${NSBOX_BIN:-$repo/build/nsbox}

if [ ! -x "$nsbox" ]; then
    echo "run.sh: no nsbox binary at $nsbox: build first (cmake -S . -B build && cmake --build build)" \
         "or set NSBOX_BIN" >&2
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    echo "run.sh: run as root (crun with user namespaces and cgroups, cgroup micro-benchmark)" >&2
    exit 1
fi

# The harness's interpreter only drives the runs; the sandboxed `python3 -c pass` is whatever
# python3 the sandbox PATH finds in /usr. Prefer the system one over shims (pyenv, ...).
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)

quick=""
if [ "${1:-}" = "--quick" ]; then
    shift
    quick="--rounds 40 --rounds-python 20 --warmup 2 --cg-iters 30 --phases 3"
fi

tag="b$$"
work=$(mktemp -d "${TMPDIR:-/tmp}/nsbox-bench.XXXXXX")

# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
    rc=$?
    trap - EXIT INT TERM HUP
    # crun removes its containers when `crun run` returns; these catch an interrupted one.
    if [ -d "$work/crun-state" ] && command -v crun >/dev/null 2>&1; then
        for c in "$work"/crun-state/nsboxbench-"$tag"-*; do
            if [ -e "$c" ]; then
                crun --root "$work/crun-state" delete -f "$(basename "$c")" >/dev/null 2>&1 || :
            fi
        done
    fi
    # cgattach removes its cgroups itself; this catches a killed one.
    for d in /sys/fs/cgroup/*/nsboxbench-"$tag"-* /sys/fs/cgroup/*/*/nsboxbench-"$tag"-* \
             /sys/fs/cgroup/*/*/*/nsboxbench-"$tag"-*; do
        if [ -d "$d" ]; then rmdir "$d" 2>/dev/null || :; fi
    done
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

cgattach=""
cc=${CC:-cc}
if command -v "$cc" >/dev/null 2>&1; then
    if "$cc" -O2 -Wall -o "$work/cgattach" "$here/cgattach.c" 2>"$work/cc.log"; then
        cgattach="$work/cgattach"
    else
        echo "run.sh: cgattach.c did not compile; cgroup micro-benchmark skipped:" >&2
        cat "$work/cc.log" >&2
    fi
else
    echo "run.sh: no C compiler; cgroup micro-benchmark skipped" >&2
fi

# In the background so that a signal sent to this script alone (not to the whole process
# group, as Ctrl-C does) is passed on: bench.py then stops after the current invocation,
# removes what it made and still writes what it measured.
# shellcheck disable=SC2086
"$py" "$here/bench.py" --nsbox "$nsbox" --work "$work" --tag "$tag" \
    --results "$here/results" --cgattach "$cgattach" $quick "$@" &
pypid=$!
trap 'kill -INT "$pypid" 2>/dev/null || :' INT TERM HUP
rc=0
wait "$pypid" || rc=$?
while kill -0 "$pypid" 2>/dev/null; do
    wait "$pypid" || rc=$?
done
exit "$rc"
