"""End-to-end: in network none (and allow, tests/e2e/test_network.py), a name that does not
resolve is said after the command: the sandbox's init answers 127.0.0.1:53 with NXDOMAIN and keeps
the first names asked (docs/network.md, "Names that do not resolve"). The command fails at once,
glibc's resolver and musl's alike ("Name or service not known"), with its own exit code; the note comes after its output; a command that
asks nothing gets none; a flood of packets, hostile or not, leaves init answering."""
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import unittest

from nsbox_test import (Dirs, children, nsbox_command, run_nsbox, stat_fields, tree_state,
                        wait_for)

LOOKUP = "import socket, sys; socket.getaddrinfo(sys.argv[1], 443)"
GAI_NONAME = b"socket.gaierror: [Errno -2] Name or service not known"
NOTE = re.compile(rb"nsbox: the command looked up (.*), but this sandbox has no network "
                  rb"\(network none\); to reach (it|them): --network allow=(\S+) \(or all\); "
                  rb"docs/network\.md\n")

# A sandbox process floods 127.0.0.1:53: malformed packets (random bytes, a compression
# pointer, an answer, a name with a control character, an oversized datagram) and valid queries
# of distinct names, without waiting; then one query whose answer must come back.
FLOOD = r"""
import os, socket, struct, sys
def query(name, qid=0x4242):
    b = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for l in name.split("."):
        b += bytes([len(l)]) + l.encode("latin-1")
    return b + b"\0" + struct.pack(">HH", 1, 1)
bad = [os.urandom(40), struct.pack(">HHHHHH", 1, 0x0100, 1, 0, 0, 0) + b"\x01a\xc0\x0c\0\1\0\1",
       struct.pack(">HHHHHH", 1, 0x8180, 1, 0, 0, 0) + b"\x01a\0\0\1\0\1",
       query("a\x1bb.test"), b"\0" * 4000, b""]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setblocking(False)
sent = 0
for i in range(int(sys.argv[1])):
    pkt = query("n%d.flood.test" % i) if i % 2 else bad[i // 2 % len(bad)]
    try:
        s.sendto(pkt, ("127.0.0.1", 53))
        sent += 1
    except (BlockingIOError, OSError):
        pass
s.setblocking(True)
s.settimeout(2)
for attempt in range(10):
    s.sendto(query("last.flood.test", 0x7777), ("127.0.0.1", 53))
    try:
        while True:
            rep = s.recv(600)
            if rep[:2] == b"\x77\x77":
                print("answered rcode=%d sent=%d" % (rep[3] & 15, sent))
                sys.exit(0)
    except socket.timeout:
        pass
print("no answer")
sys.exit(1)
"""

# Queries the stub does not read (and keeps no name of), each sent on its own and timed: every
# one answered at once, as when nothing listened there (ECONNREFUSED), never left to time out.
# Then one it reads, for a name the note should give alone.
ODD = r"""
import socket, struct, sys, time
def query(name, qid, flags=0x0100, qtype=1, an=0, ns=0):
    b = struct.pack(">HHHHHH", qid, flags, 1, an, ns, 0)
    for l in (name.split(".") if name else []):
        b += bytes([len(l)]) + l.encode("latin-1")
    return b + b"\0" + struct.pack(">HH", qtype, 1)
odd = {"root": query("", 1, qtype=2), "bang": query("a!b.test", 2),
       "space": query("a b.test", 3), "esc": query("a\x1b[2Jb.test", 4),
       "long": query(".".join(["a" * 63] * 4), 5), "notify": query("n.test", 6, flags=0x2000),
       "ancount": query("an.test", 7, an=1), "nscount": query("ns.test", 8, ns=1),
       "ok": query("ok.example", 9)}
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("127.0.0.1", 53))
s.settimeout(1)
for what, pkt in odd.items():
    t = time.monotonic()
    s.send(pkt)
    try:
        rep = s.recv(600)
    except socket.timeout:
        print(what, "no answer within a second")
        continue
    qd = rep[4] << 8 | rep[5]
    print(what, "id=%d qr=%d rcode=%d qd=%d len=%d/%d ms=%d" % (
        rep[0] << 8 | rep[1], rep[2] >> 7, rep[3] & 15, qd, len(rep), len(pkt),
        (time.monotonic() - t) * 1000))
"""


# Queries sent in one sendmmsg call, faster than init reads them: count of a one-label name
# (answered, never said), then the name given; the process ends at once, without waiting for
# an answer.
LAST = r"""
import ctypes, os, socket, struct, sys
def query(name, qid):
    b = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for l in name.split("."):
        b += bytes([len(l)]) + l.encode()
    return b + b"\0" + struct.pack(">HH", 1, 1)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32),
                ("iov", ctypes.POINTER(iovec)), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]
class mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]
pkts = [query("x", 1)] * int(sys.argv[2]) + [query(sys.argv[1], 2)]
bufs = [ctypes.create_string_buffer(p, len(p)) for p in pkts]
iovs = (iovec * len(pkts))(*[iovec(ctypes.cast(b, ctypes.c_void_p), len(p))
                             for b, p in zip(bufs, pkts)])
msgs = (mmsghdr * len(pkts))()
for i in range(len(pkts)):
    msgs[i].hdr.iov = ctypes.pointer(iovs[i])
    msgs[i].hdr.iovlen = 1
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("127.0.0.1", 53))
sent = ctypes.CDLL(None, use_errno=True).sendmmsg(s.fileno(), msgs, len(pkts), 0)
if sent != len(pkts):
    print("sendmmsg sent %d of %d, errno %d" % (sent, len(pkts), ctypes.get_errno()))
    sys.stdout.flush()
os._exit(3)
"""

class DnsNote(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.dirs = Dirs()
        self.env = {}

    def tearDown(self):
        self.dirs.cleanup()

    def nsbox(self, *args, **kw):
        kw.setdefault("extra_env", self.env)
        return run_nsbox(list(args), self.dirs, **kw)

    def names_in(self, stderr):
        m = NOTE.search(stderr)
        self.assertIsNotNone(m, stderr.decode(errors="replace"))
        return m.group(1).decode().replace(" and ", ", ").split(", ")

    def test_run_fails_at_once_and_the_note_names_the_host(self):
        r = self.nsbox("run", "--", "python3", "-c", LOOKUP, "pypi.org")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(GAI_NONAME, r.stderr)
        # after the command's own output, once
        self.assertTrue(r.stderr.endswith(
            b"nsbox: the command looked up pypi.org, but this sandbox has no network (network "
            b"none); to reach it: --network allow=pypi.org (or all); docs/network.md\n"),
            r.stderr)
        self.assertEqual(r.stderr.count(b"nsbox:"), 1, r.stderr)

    def test_musl_resolver_gets_its_answer(self):
        # musl (Alpine images, static musl programs) takes only NOERROR and NXDOMAIN as an
        # answer and waits its whole timeout (5 s) for another after any other code, then fails
        # with EAI_AGAIN; with the stub's NXDOMAIN it fails at once with EAI_NONAME
        cc = shutil.which("musl-gcc")
        if not cc:
            self.skipTest("musl-gcc (Debian's musl-tools, scripts/packages.txt) is not installed: "
                          "musl's resolver is not tried")
        src = os.path.join(self.dirs.base, "gai.c")
        exe = os.path.join(self.dirs.base, "gai")
        with open(src, "w") as f:
            f.write("#include <netdb.h>\n#include <stdio.h>\n"
                    "int main(int c, char **v) { struct addrinfo *r;"
                    " printf(\"%d\\n\", getaddrinfo(v[1], \"443\", 0, &r)); return 0; }\n")
        subprocess.run([cc, "-static", "-O2", "-o", exe, src], check=True)
        with open(exe, "rb") as f:
            r = self.nsbox("run", "--", "sh", "-c",
                           "cat > /tmp/gai && chmod +x /tmp/gai && /tmp/gai pypi.org",
                           input=f.read())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"-2\n", r.stderr)  # EAI_NONAME; -3 (EAI_AGAIN) after 5 s
        self.assertEqual(self.names_in(r.stderr), ["pypi.org"])

    def test_curl_and_names_in_one_note_exit_code_kept(self):
        r = self.nsbox("run", "--", "sh", "-c",
                       "getent hosts Files.PythonHosted.org; getent ahosts pypi.org;"
                       "getent hosts pypi.org; exit 7")
        self.assertEqual(r.returncode, 7, r.stderr)
        # lower case, each once, in the order asked
        self.assertEqual(self.names_in(r.stderr), ["files.pythonhosted.org", "pypi.org"])
        self.assertIn(b"allow=files.pythonhosted.org,pypi.org (or all)", r.stderr)

    def test_queries_not_read_are_answered_at_once_and_not_said(self):
        r = self.nsbox("run", "--", "python3", "-c", ODD)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = {line.split()[0]: line.split(None, 1)[1] for line in r.stdout.decode().splitlines()}
        # the question echoed when it was read (NXDOMAIN); the header alone when not: another
        # opcode or record counts (REFUSED), a name of more than 253 bytes (FORMERR)
        want = {"root": (1, 3, 1), "bang": (2, 3, 1), "space": (3, 3, 1), "esc": (4, 3, 1),
                "long": (5, 1, 0), "notify": (6, 5, 0), "ancount": (7, 5, 0),
                "nscount": (8, 5, 0), "ok": (9, 3, 1)}
        self.assertEqual(sorted(got), sorted(want), r.stdout)
        for what, (qid, rcode, qd) in want.items():
            m = re.fullmatch(r"id=(\d+) qr=1 rcode=(\d+) qd=(\d+) len=(\d+)/(\d+) ms=\d+",
                             got[what])
            self.assertIsNotNone(m, (what, got[what]))
            self.assertEqual(tuple(int(x) for x in m.groups()[:3]), (qid, rcode, qd), what)
            self.assertLessEqual(int(m.group(4)), int(m.group(5)), what)
            if not qd:
                self.assertEqual(int(m.group(4)), 12, what)
        # none of the names not read is said: only the one that was
        self.assertEqual(self.names_in(r.stderr), ["ok.example"])

    def test_reverse_lookups_are_not_said_srv_as_its_host(self):
        r = self.nsbox("run", "--", "sh", "-c",
                       "getent hosts 10.1.2.3; getent hosts 2001:db8::1; echo done >&2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, b"done\n")
        srv = ("import socket, struct\n"
               "q = struct.pack('>HHHHHH', 1, 0x100, 1, 0, 0, 0)\n"
               "q += b''.join(bytes([len(l)]) + l.encode() for l in "
               "'_http._tcp.srv.example'.split('.')) + b'\\0\\0\\x21\\0\\1'\n"
               "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
               "s.settimeout(5)\n"
               "s.sendto(q, ('127.0.0.1', 53))\n"
               "print(s.recv(600)[3] & 15)\n")
        r = self.nsbox("run", "--", "python3", "-c", srv)
        self.assertEqual((r.returncode, r.stdout), (0, b"3\n"), r.stderr)
        self.assertEqual(self.names_in(r.stderr), ["srv.example"])

    def test_no_lookup_no_note(self):
        # its own hostname and localhost resolve through /etc/hosts: the stub never hears them
        r = self.nsbox("run", "--", "sh", "-c",
                       "getent hosts localhost >/dev/null; getent hosts $(hostname) >/dev/null;"
                       "echo done >&2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, b"done\n")

    def test_exec_says_its_own_names_only(self):
        sid = self.nsbox("create", check=True).stdout.decode().strip()
        try:
            r = self.nsbox("exec", sid, "--", "python3", "-c", LOOKUP, "a.example")
            self.assertEqual(r.returncode, 1)
            self.assertIn(GAI_NONAME, r.stderr)
            self.assertEqual(self.names_in(r.stderr), ["a.example"])
            # said once: the next exec, which asks nothing, gets no note
            r = self.nsbox("exec", sid, "--", "true")
            self.assertEqual((r.returncode, r.stderr), (0, b""))
            # a background process's names are not the next command's
            self.nsbox("exec", "-d", sid, "--", "getent", "hosts", "b.example", check=True)
            # ps says "exit N" of an ended process: none is "running" once it has ended
            self.assertTrue(wait_for(lambda: b"running" not in self.nsbox("ps", sid).stdout, 10))
            r = self.nsbox("exec", sid, "--", "getent", "hosts", "c.example")
            self.assertEqual(r.returncode, 2)
            self.assertEqual(self.names_in(r.stderr), ["c.example"])
        finally:
            self.nsbox("rm", sid)

    def test_exec_of_a_fast_lookup_keeps_its_name(self):
        # the names before an exec are dropped before its command starts, so that none of the
        # command's own goes with them: a background process leaves one before each exec, so
        # that each round drops something while the command asks at once
        sid = self.nsbox("create", check=True).stdout.decode().strip()
        try:
            for i in range(8):
                self.nsbox("exec", "-d", sid, "--", "getent", "hosts", "bg%d.example" % i,
                           check=True)
                self.assertTrue(
                    wait_for(lambda: b"running" not in self.nsbox("ps", sid).stdout, 10))
                r = self.nsbox("exec", sid, "--", "getent", "hosts", "fast%d.example" % i)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(self.names_in(r.stderr), ["fast%d.example" % i])
        finally:
            self.nsbox("rm", sid)

    def assert_last_query_said(self, rounds, *cmd):
        # the command's very last act is a query it does not wait for, behind 100 others init
        # has to read first (below the 157 the stub's receive buffer holds, so none is dropped):
        # when it ends, the query is still unread, and init must read it before it reports
        # the end, else the name is missing from this note and dropped before the next command
        for i in range(rounds):
            name = "end%d.example" % i
            r = self.nsbox(*cmd, "--", "python3", "-c", LAST, name, "100")
            self.assertEqual((r.returncode, r.stdout), (3, b""), r.stderr)
            self.assertEqual(self.names_in(r.stderr), [name], "round %d" % i)

    def test_exec_says_a_query_sent_as_it_ends(self):
        sid = self.nsbox("create", check=True).stdout.decode().strip()
        try:
            self.assert_last_query_said(20, "exec", sid)
        finally:
            self.nsbox("rm", sid)

    def test_run_says_queries_sent_while_init_was_late(self):
        # A one-shot run's init reads the socket in the turn that wakes it to its command's
        # end, before it reaps, and a process takes longer to end than an init awake since the
        # first packet takes to read 100: whether assert_last_query_said's run would miss the
        # drain depends on the machine's load. The case the drain is for is an init that is
        # late, made so here: stopped while the command sends 100 queries and the name, and
        # ends, it wakes to the end and to more packets than one turn reads (dnsstub.c, BATCH)
        for i in range(3):
            name = "late%d.example" % i
            cmd, env = nsbox_command(["run", "--", "sh", "-c",
                                      'read go && exec python3 -c "$0" "$1" 100', LAST, name],
                                     self.dirs, extra_env=self.env)
            go_rd, go_wr = os.pipe()
            p = subprocess.Popen(cmd, env=env, stdin=go_rd, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
            os.close(go_rd)
            try:
                self.assertTrue(wait_for(lambda: len(children(p.pid)) == 1
                                         and len(children(children(p.pid)[0])) == 1, 20),
                                tree_state(p.pid))
                init = children(p.pid)[0]
                (cmd_pid,) = children(init)
                os.kill(init, signal.SIGSTOP)
                try:
                    self.assertTrue(wait_for(lambda: (stat_fields(init) or ["?"])[0] == "T"))
                    os.write(go_wr, b"go\n")
                    # ended, and not reaped: its packets and its end wait for init together
                    self.assertTrue(wait_for(lambda: (stat_fields(cmd_pid) or ["?"])[0] == "Z"),
                                    tree_state(p.pid))
                finally:
                    # continued on every path; a gone init must not hide the test's own failure
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(init, signal.SIGCONT)
                out, err = p.communicate(timeout=60)
            finally:
                os.close(go_wr)
                if p.returncode is None:
                    p.kill()
                    p.communicate()
            self.assertEqual((p.returncode, out), (3, b""), err)
            self.assertEqual(self.names_in(err), [name], "round %d" % i)

    def test_stub_receive_buffer_is_its_own(self):
        # init's drain at a command's end reads 1024 packets, more than a buffer of 128 KiB
        # holds (dnsstub.c); a socket that took net.core.rmem_default, which a host may raise,
        # could hold more, and a query sent as a command ended be left unread: the socket's
        # size, as the kernel reports it (ss -m, "rb")
        r = self.nsbox("run", "--", "ss", "-uanm", "sport", "=", ":53")
        self.assertEqual(r.returncode, 0, r.stderr)
        rb = re.findall(rb"\brb([0-9]+)\b", r.stdout)
        self.assertEqual(len(rb), 1, r.stdout)
        # the size it asks for, 64 KiB, which the kernel doubles (and net.core.rmem_max caps),
        # not net.core.rmem_default (212992 unless tuned)
        with open("/proc/sys/net/core/rmem_max") as f:
            rmem_max = int(f.read())
        self.assertEqual(int(rb[0]), 2 * min(65536, rmem_max), r.stdout)

    def test_pooled_run(self):
        cfg = os.path.join(self.dirs.base, "pool.json")
        with open(cfg, "w") as f:
            json.dump({"pool": {"size": 1, "ttl_seconds": 60}}, f)
        self.env = {"NSBOX_CONFIG": cfg}
        try:
            self.nsbox("pool", "fill", check=True)
            ids = [e["id"] for e in json.loads(self.nsbox("pool", "ls", "--json").stdout)]
            self.assertEqual(len(ids), 1)
            r = self.nsbox("run", "--", "python3", "-c", LOOKUP, "pooled.example")
            self.assertEqual(r.returncode, 1, r.stderr)
            # the run took the pooled sandbox
            self.assertTrue(wait_for(lambda: ids[0] not in self.nsbox("pool", "ls").stdout
                                     .decode()))
            self.assertIn(GAI_NONAME, r.stderr)
            self.assertEqual(self.names_in(r.stderr), ["pooled.example"])
            # init reports a pooled run's end with its names: a query sent as it ends is in
            # them (assert_last_query_said), each round in a pooled sandbox of its own
            for i in range(6):
                self.nsbox("pool", "fill", check=True)
                ids = [e["id"] for e in json.loads(self.nsbox("pool", "ls", "--json").stdout)]
                self.assertEqual(len(ids), 1)
                name = "pooled-end%d.example" % i
                r = self.nsbox("run", "--", "python3", "-c", LAST, name, "100")
                self.assertEqual((r.returncode, r.stdout), (3, b""), r.stderr)
                self.assertNotIn(ids[0], self.nsbox("pool", "ls").stdout.decode())
                self.assertEqual(self.names_in(r.stderr), [name], "round %d" % i)
        finally:
            self.nsbox("pool", "drain")
            wait_for(lambda: not self.dirs.live_ids(), 20)

    def test_flood_leaves_init_answering(self):
        sid = self.nsbox("create", check=True).stdout.decode().strip()
        try:
            r = self.nsbox("exec", sid, "--", "python3", "-c", FLOOD, "100000", timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn(b"answered rcode=3", r.stdout)
            names = self.names_in(r.stderr)
            self.assertLessEqual(len(names), 4)
            for n in names:
                self.assertRegex(n, r"^(n[0-9]+|last)\.flood\.test$")
            # the sandbox is still usable, and a lookup still fails at once, as it should
            r = self.nsbox("exec", sid, "--", "python3", "-c", LOOKUP, "after.example")
            self.assertIn(GAI_NONAME, r.stderr)
            self.assertEqual(self.names_in(r.stderr), ["after.example"])
            self.assertEqual(self.nsbox("exec", sid, "--", "echo", "ok").stdout, b"ok\n")
        finally:
            self.nsbox("rm", sid)


if __name__ == "__main__":
    unittest.main()
