#!/bin/sh
# ctest oci.conformance: opencontainers/runtime-tools' validation programs against nsbox-oci
# (scripts/oci-conformance.sh), failing when a program of tests/oci/conformance-pass.txt no
# longer passes. runtime-tools comes from a checkout (or its git directory) named by
# NSBOX_RUNTIME_TOOLS, or from Debian's golang-github-opencontainers-runtime-tools-dev where
# it ships the validation programs' sources; otherwise the test is skipped (77) with the reason.
#
#   tests/oci/conformance.sh NSBOX_OCI
set -u
here=$(cd "$(dirname "$0")" && pwd)
oci=$1
debian=/usr/share/gocode/src/github.com/opencontainers/runtime-tools
src=${NSBOX_RUNTIME_TOOLS:-}
if [ -z "$src" ]; then
    if [ -d "$debian/validation" ] && [ -d "$debian/cmd/runtimetest" ]; then
        src=$debian
    else
        echo "skip: no runtime-tools with its validation programs: Debian's" \
            "golang-github-opencontainers-runtime-tools-dev ships the library only; set" \
            "NSBOX_RUNTIME_TOOLS to a checkout of opencontainers/runtime-tools (commit 0105384)"
        exit 77
    fi
fi
work=$(mktemp -d /tmp/nsbox-oci-conformance.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$here/../../scripts/oci-conformance.sh" -w "$work" -e "$here/conformance-pass.txt" "$src" "$oci"
