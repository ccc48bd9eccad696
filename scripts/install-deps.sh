#!/bin/sh
# Install every Debian package nsbox needs (scripts/packages.txt). Idempotent: when everything
# is installed already it does nothing and needs no network.
#   install-deps.sh             what building, using and testing nsbox needs (test.sh, CI)
#   install-deps.sh --no-tests  what building, installing and using it needs: the list's part
#                               above its "# -- tests" line (quickstart.sh). The rest (docker.io,
#                               podman, qemu, clang, ...) is large, and docker.io cannot be
#                               installed beside Docker's own packages (containerd.io).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
case "${1-}" in
"") list=$(cat "$here/packages.txt") ;;
--no-tests) list=$(sed '/^# -- tests/,$d' "$here/packages.txt") ;;
*)
    echo "install-deps: unknown argument '$1' (usage: install-deps.sh [--no-tests])" >&2
    exit 2
    ;;
esac
pkgs=$(printf '%s\n' "$list" | grep -v '^#' | grep -v '^$' | tr '\n' ' ')
missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done
if [ -z "$missing" ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages:$missing; run this script as root" >&2
    exit 1
fi
echo "install-deps: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# A package's postinst may start its daemon (docker.io starts a system dockerd and containerd
# through invoke-rc.d or deb-systemd-invoke). nsbox's tests start their own engines, privately,
# and a machine's user did not ask for a system-wide one: a policy-rc.d that exits 101 ("not
# allowed") keeps every service stopped during this install. One that is already there is
# the machine's own and is left as it is.
policy=/usr/sbin/policy-rc.d
made_policy=""
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# nsbox install-deps: no service starts during its apt-get\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    made_policy=1
    trap 'rm -f "$policy"' EXIT
    trap 'rm -f "$policy"; exit 130' INT TERM
fi
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
if [ -n "$made_policy" ]; then
    rm -f "$policy"
    trap - EXIT INT TERM
fi
