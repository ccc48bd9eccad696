#!/bin/sh
# Fresh Debian 12 machine, as root: install what nsbox needs, build it, install it on PATH, and
# run a first sandbox that prints its Python version, writes to /workspace and shows that the
# network is blocked.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh" --no-tests
"$root/scripts/build.sh"
cmake --install "$root/build" >/dev/null
echo "nsbox installed as $(command -v nsbox)"
exec nsbox run -- sh -c '
python3 --version
echo "written inside the sandbox" > /workspace/hello.txt && echo "workspace: $(cat /workspace/hello.txt)"
echo "whoami: $(id -un) (uid $(id -u)), hostname: $(hostname)"
python3 - <<"PY"
import socket
print("network interfaces:", [name for _, name in socket.if_nameindex()])
try:
    socket.getaddrinfo("deb.debian.org", 443)
    print("network: OPEN (unexpected)")
except OSError as e:
    print("network: blocked (name resolution fails: %s)" % e)
PY'
