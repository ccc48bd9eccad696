#!/usr/bin/env python3
"""The layers hold (docs/architecture.md): no source includes a header of a higher layer, and no
two modules include each other, however indirectly.

Layers, lowest first: include/ and policy/, os/, rootfs/, sandbox/, service/, then the front
ends cli/, oci/ (nsbox-oci) and egress/ (nsbox-egress), which do not see each other. A module is a
.c file and the .h of the same name (foo_impl.h counts as foo's), so "a.c includes b.h and b.c
includes a.h" is a circle. The build already refuses an upward include (each layer's library sees
only its own and lower layers' headers); this check says which line does it, and finds the
circles that the compiler cannot see.

policy/ does no I/O: its sources call none of the functions that open, read, write, list or
remove files, print, or make system calls (IO_CALLS), comments and strings aside. The one
exception is named in IO_ALLOWED with its reason. Headers are not read: cleanup.h's close() is a
helper for the layers above.

Usage: check-layers.py [SOURCE_DIR]. Exit 0 when clean, 1 with one line per finding."""
import os
import re
import sys

LAYERS = ["include", "policy", "os", "rootfs", "sandbox", "service", "cli", "oci", "egress"]
RANK = {"include": 0, "policy": 0, "os": 1, "rootfs": 2, "sandbox": 3, "service": 4, "cli": 5, "oci": 5,
        "egress": 5}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
IO_CALLS = re.compile(
    r"(?<![\w.>])(fopen|fdopen|freopen|open|openat|openat2|creat|read|pread|readv|preadv|write|"
    r"pwrite|writev|pwritev|close|stat|fstat|lstat|fstatat|statx|access|faccessat|mkdir|mkdirat|"
    r"rename|renameat|renameat2|unlink|unlinkat|rmdir|link|linkat|symlink|symlinkat|chmod|fchmod|"
    r"chown|fchown|truncate|ftruncate|opendir|fdopendir|readdir|scandir|fread|fwrite|fgets|fputs|"
    r"fputc|fprintf|vfprintf|printf|vprintf|puts|perror|getline|getdelim|dprintf|socket|connect|"
    r"ioctl|memfd_create|syscall|prctl|mmap|dup|dup2|dup3|pipe|pipe2|fork|vfork|clone|execve|"
    r"execvp|execv|system|popen|mount|umount|umount2|sendfile|splice|copy_file_range)\s*\(")
# (file, call): why it is not I/O
IO_ALLOWED = {
    ("seccomp_compile.c", "memfd_create"): "libseccomp 2.5 exports a program only to a file "
    "descriptor: an anonymous memory file, no file system",
    ("seccomp_compile.c", "fstat"): "the size of that memory file",
    ("seccomp_compile.c", "pread"): "reading the program back from that memory file",
}
# comments, string and character literals: what they say is not a call
NOT_CODE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def io_calls(folder, name, text):
    """policy/ sources that do I/O: one line per call."""
    if folder != "policy" or not name.endswith(".c"):
        return []
    code = NOT_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    found = []
    for m in IO_CALLS.finditer(code):
        if (name, m.group(1)) in IO_ALLOWED:
            continue
        line = code.count("\n", 0, m.start()) + 1
        found.append(f"{folder}/{name}:{line}: calls {m.group(1)}(): policy/ does no I/O; the "
                     f"layer above that acts does it (os/ at the lowest)")
    return found


def module(folder, name):
    stem = os.path.splitext(name)[0]
    if stem.endswith("_impl"):
        stem = stem[: -len("_impl")]
    return folder + "/" + stem


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))
    where = {}  # header name -> folder
    sources = []  # (folder, name)
    for folder in LAYERS:
        d = os.path.join(root, folder)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith((".c", ".h")):
                sources.append((folder, name))
                if name.endswith(".h"):
                    if name in where:
                        print(f"{folder}/{name}: the same header name is in {where[name]}/ too")
                        return 1
                    where[name] = folder
    problems = []
    edges = {}  # module -> {module: "file:line"}
    for folder, name in sources:
        path = os.path.join(root, folder, name)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        problems += io_calls(folder, name, text)
        me = module(folder, name)
        edges.setdefault(me, {})
        for m in INCLUDE.finditer(text):
            header = os.path.basename(m.group(1))
            to = where.get(header)
            if to is None:
                continue  # a generated or system header
            line = text.count("\n", 0, m.start()) + 1
            if RANK[to] > RANK[folder]:
                problems.append(f"{folder}/{name}:{line}: includes {to}/{header}, a higher "
                                f"layer ({folder}/ is below {to}/)")
            elif RANK[to] == RANK["cli"] and to != folder:
                problems.append(f"{folder}/{name}:{line}: includes {to}/{header}: the front "
                                f"ends cli/, oci/ and egress/ do not see each other")
            other = module(to, header)
            if other != me:
                edges[me].setdefault(other, f"{folder}/{name}:{line}")
    # circles: the strongly connected components of the module graph (Tarjan)
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    for comp in comps:
        inside = set(comp)
        how = [f"{edges[a][b]} -> {b}" for a in comp for b in sorted(edges[a]) if b in inside]
        problems.append("include circle between " + ", ".join(comp) + ": " + "; ".join(how))
    for p in problems:
        print(p)
    if problems:
        print(f"check-layers: {len(problems)} problem(s); the layers are in docs/architecture.md")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
