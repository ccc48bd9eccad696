#!/bin/sh
# Configure and build nsbox into build/ (warnings are errors). Extra arguments go to cmake.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNSBOX_WERROR=ON "$@" >/dev/null
cmake --build "$root/build" -j"$(nproc)"
