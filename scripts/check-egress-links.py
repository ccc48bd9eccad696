#!/usr/bin/env python3
"""nsbox-egress links the C library and nothing else (docs/decisions.md, "The egress helper is
an executable of its own"): its dynamic section names none of the libraries nsbox links or
loads (libseccomp, libnl, libnftables, cJSON, libcap, libarchive, libssl, libcrypto), so that
an idle helper maps none of them, and libssl and libcrypto only when a sandbox has header
bindings (loaded then with dlopen). A helper's file that came to call one of those libraries
would put it back here, and this says which. The C library's own (libm, libdl...) and a
sanitizer build's runtime are not counted.

Usage: check-egress-links.py PATH-TO-nsbox-egress. Exit 0 when clean, 1 with the libraries
found, 77 when readelf is not installed (binutils)."""
import shutil
import subprocess
import sys


def main():
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[-1])
        return 2
    if not shutil.which("readelf"):
        print("check-egress-links: readelf (binutils) is not installed: skipped")
        return 77
    out = subprocess.run(["readelf", "-d", sys.argv[1]], capture_output=True, text=True,
                         check=True).stdout
    needed = [line.split("[", 1)[1].rstrip("]") for line in out.splitlines()
              if "(NEEDED)" in line]
    extra = [n for n in needed if n.startswith(NSBOX_LIBS)]
    if extra or not any(n.startswith("libc.so") for n in needed):
        print(f"{sys.argv[1]} needs {', '.join(needed) or 'nothing'}: libc only is wanted; "
              f"a file of the helper calls into {', '.join(extra) or '?'} (see which with "
              f"`nm -u` on the objects of sandbox/egress*.c)")
        return 1
    return 0


NSBOX_LIBS = ("libseccomp", "libnl", "libnftables", "libcjson", "libcap", "libarchive",
              "libssl", "libcrypto")


if __name__ == "__main__":
    sys.exit(main())
