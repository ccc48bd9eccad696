"""End-to-end: network none / all / allow and egress CIDRs, in a lab of network namespaces that
this module makes and removes (tests/e2e/netlab.py). nsbox runs inside the lab namespace, so the
nftables table, veths, routes and ip_forward it manages are the lab's, never the host's; no
packet leaves the lab's namespaces."""
import json
import os
import signal
import subprocess
import time
import unittest

from netlab import (API, DNS_NAMES, HOST_PORT, LAB_ADDR, META, OTHER, PROBE, UP_ADDR, Lab,
                    missing_tools)
from nsbox_test import NSBOX, Dirs, ensure_test_user, is_root, reachable_nsbox

REGION_MSG = ("This network policy is not supported in region 'us-east-1'; it is supported only "
              "in nl-north-1. Pass network=Network.all() or a supported region.")

lab = None


def setUpModule():
    global lab
    if not is_root():
        raise unittest.SkipTest("the network lab needs root (network namespaces, veths)")
    missing = missing_tools()
    if missing:
        raise unittest.SkipTest(f"the network lab needs {', '.join(missing)}")
    if not os.path.isfile("/etc/resolv.conf"):
        raise unittest.SkipTest("no /etc/resolv.conf to bind the lab's over")
    try:
        lab = Lab()
    except (subprocess.CalledProcessError, RuntimeError) as ex:
        detail = getattr(ex, "stderr", "") or ""
        raise unittest.SkipTest(f"cannot build the network lab here: {ex} {detail}")


def tearDownModule():
    if lab:
        lab.cleanup()


class NetTest(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.dirs = Dirs()

    def tearDown(self):
        self.dirs.cleanup()

    def nsbox(self, args, user=None, extra_env=None, timeout=60, resolv=None, dirs=None):
        dirs = dirs or self.dirs
        env = dirs.env({"NSBOX_RESOLV_CONF": lab.resolv})
        if extra_env:
            env.update(extra_env)
        if user is not None:
            env["HOME"] = user.pw_dir
        binary = NSBOX if user is None else reachable_nsbox()  # the build tree may be in /root
        return subprocess.run(lab.wrap([binary] + list(args), user=user, resolv=resolv),
                              capture_output=True, timeout=timeout, env=env)

    def probe(self, net_args, *targets, env=None):
        r = self.nsbox(["run"] + net_args + ["--", "python3", "-c", PROBE] + list(targets),
                       extra_env=env)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        return json.loads(r.stdout)

    def address_mode(self):
        """extra_env for the config's opt-out {"network": {"allow_names": "address"}}: allowed
        names resolved at creation and enforced by address (docs/network.md)."""
        cfg = os.path.join(self.dirs.base, "net-address.json")
        with open(cfg, "w") as f:
            json.dump({"pool": {"size": 0}, "network": {"allow_names": "address"}}, f)
        os.chmod(cfg, 0o644)
        return {"NSBOX_CONFIG": cfg}

    def sh(self, net_args, script):
        r = self.nsbox(["run"] + net_args + ["--", "sh", "-c", script])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        return r.stdout.decode()

    def assertOk(self, result, addr=None):
        self.assertTrue(result.startswith("ok:"), result)
        if addr:
            self.assertIn(f"HELLO {addr}:", result)

    def assertRejected(self, result):
        # refused (TCP reset) or admin-prohibited/no route: visible at once, never a hang
        self.assertIn(result, ("refused", "unreachable"))

    def assertLabClean(self):
        """Nothing of any sandbox is left in the lab: set elements, links, addresses, routes.
        The veth goes away with the sandbox's namespace, asynchronously: poll a while (the
        kernel's end of a namespace is slow in an emulated VM)."""
        sets = lab.nft_table()
        if sets is not None:
            self.assertEqual({k: v for k, v in sets.items() if v}, {}, "nft elements left")
        deadline = time.time() + 20
        while (lab.sandbox_links() or lab.pool_routes_and_addrs()) and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(lab.sandbox_links(), [])
        self.assertEqual(lab.pool_routes_and_addrs(), [])
        self.assertEqual(self.dirs.leftovers(), [])


class LabSanity(NetTest):
    def test_lab_targets_are_up(self):
        # Without this, a blocked connection in the tests below would prove nothing.
        self.assertIn(f"HELLO {API}:443", lab.tcp_from_lab(API, 443) or "")
        self.assertIn(f"HELLO {META}:80", lab.tcp_from_lab(META, 80) or "")
        self.assertIn(f"HELLO {LAB_ADDR}:{HOST_PORT}", lab.tcp_from_lab(LAB_ADDR, HOST_PORT) or "")


class NetworkNone(NetTest):
    def test_reaches_nothing(self):
        res = self.probe([], f"tcp:{API}:443", f"tcp:{LAB_ADDR}:{HOST_PORT}", f"dns:{UP_ADDR}:api.lab.test",
                         f"tcp:{META}:80")
        for k, v in res.items():
            self.assertEqual(v, "unreachable", k)
        self.assertLabClean()

    def test_only_loopback(self):
        out = self.sh([], "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
        self.assertEqual(out.split(), ["lo"])


class NetworkAll(NetTest):
    def test_reaches_upstream_with_masquerade(self):
        res = self.probe(["--network", "all"], f"tcp:{API}:443", f"tcp:{OTHER}:80",
                         f"tcp:{UP_ADDR}:9999")
        self.assertOk(res[f"tcp:{API}:443"], API)
        self.assertOk(res[f"tcp:{OTHER}:80"], OTHER)
        self.assertOk(res[f"tcp:{UP_ADDR}:9999"], UP_ADDR)
        # upstream sees the lab host's address, not the sandbox's
        self.assertTrue(res[f"tcp:{API}:443"].endswith(f"FROM {LAB_ADDR}"), res)
        self.assertLabClean()

    def test_a_failing_setup_script_is_not_said_to_be_offline(self):
        # test_sessions.py: a sandbox of network none says it has none; this one has a network
        script = os.path.join(self.dirs.base, "setup.sh")
        with open(script, "w") as f:
            f.write("echo 'E: the reason' >&2; exit 4\n")
        r = self.nsbox(["create", "--network", "all", "--setup-script", script])
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"nsbox: setup script failed (exit code 4): E: the reason", r.stderr)
        self.assertNotIn(b"network none", r.stderr)
        self.assertLabClean()

    def test_ipv4_only_cold_and_pooled(self):
        # No IPv6 address at all, not even link-local: a pooled sandbox's eth0 had one (its
        # link came up with its peer already up, before the "no address" mode applied).
        cfg = os.path.join(self.dirs.base, "pool.json")
        with open(cfg, "w") as f:
            json.dump({"pool": {"size": 1, "ttl_seconds": 120}}, f)
        env = {"NSBOX_CONFIG": cfg}
        script = "cat /proc/net/if_inet6; hostname"
        cold = self.nsbox(["run", "--network", "all", "--", "sh", "-c", script], extra_env=env)
        self.assertEqual(cold.returncode, 0, cold.stderr)
        r = self.nsbox(["pool", "fill", "--network", "all"], extra_env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        ids = [e["id"] for e in json.loads(self.nsbox(["pool", "ls", "--json"],
                                                         extra_env=env).stdout)]
        pooled = self.nsbox(["run", "--network", "all", "--", "sh", "-c", script], extra_env=env)
        self.assertEqual(pooled.returncode, 0, pooled.stderr)
        host = pooled.stdout.decode().splitlines()[-1]
        self.assertIn(host[len("nsbox-"):], ids)  # it was a pooled one
        for r in (cold, pooled):
            v6 = [l for l in r.stdout.decode().splitlines()[:-1] if not l.endswith(" lo")]
            self.assertEqual(v6, [], r.stdout)
        self.nsbox(["pool", "drain"], extra_env=env)

    def test_not_the_host_nor_metadata(self):
        res = self.probe(["--network", "all"], f"tcp:{LAB_ADDR}:{HOST_PORT}",
                         f"tcp:GATEWAY:{HOST_PORT}", f"tcp:{META}:80", f"tcp:{META}:443")
        for k, v in res.items():
            self.assertRejected(v)
        self.assertLabClean()

    def test_dns_works(self):
        out = self.sh(["--network", "all"], "cat /etc/resolv.conf; getent ahostsv4 api.lab.test")
        self.assertIn(f"nameserver {UP_ADDR}\n", out)
        self.assertIn(f"{API}", out.split("\n", 3)[-1])
        res = self.probe(["--network", "all"], "resolve:other.lab.test")
        self.assertEqual(res["resolve:other.lab.test"], f"ok:{OTHER}")

    def test_dns_behind_a_local_stub(self):
        # The host's resolv.conf names a 127.0.0.53-style stub, unreachable from a sandbox;
        # nsbox takes the upstream list (systemd-resolved keeps it in a second file).
        stub = os.path.join(self.dirs.base, "stub.conf")
        upstream = os.path.join(self.dirs.base, "upstream.conf")
        with open(stub, "w") as f:
            f.write("nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lab.test\n")
        with open(upstream, "w") as f:
            f.write(f"# managed by a resolver daemon\nnameserver {UP_ADDR}\nsearch lab.test\n")
        r = self.nsbox(["run", "--network", "all", "--", "sh", "-c",
                        "cat /etc/resolv.conf; getent ahostsv4 api"],
                       extra_env={"NSBOX_RESOLV_CONF": f"{stub}:{upstream}"})
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        out = r.stdout.decode()
        self.assertIn(f"nameserver {UP_ADDR}\n", out)
        self.assertNotIn("127.0.0.53", out)
        self.assertIn(API, out)

    def test_no_reachable_resolver_is_refused_with_the_fix(self):
        stub = os.path.join(self.dirs.base, "stub.conf")
        with open(stub, "w") as f:
            f.write("nameserver 127.0.0.53\n")
        r = self.nsbox(["run", "--network", "all", "--", "true"],
                       extra_env={"NSBOX_RESOLV_CONF": stub})
        self.assertEqual(r.returncode, 125)
        err = r.stderr.decode()
        self.assertIn("127.0.0.53", err)
        self.assertIn("fix:", err)
        self.assertLabClean()

    def test_ip_forward_on_and_guarded(self):
        self.sh(["--network", "all"], "true")
        self.assertEqual(lab.ip_forward(), "1")
        # the lab did not forward before nsbox: nsbox keeps it from forwarding anything else
        self.assertIn('iifname != "nsb*" oifname != "nsb*" drop', lab.nft_rules_text())

    def test_two_sandboxes_cannot_reach_each_other(self):
        server = ("import socket,sys,struct\n"
                  "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                  "s.bind(('0.0.0.0', 9000)); s.listen(5)\n"
                  "u=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.connect(('%s', 9))\n"
                  "print(u.getsockname()[0], flush=True)\n"
                  "s.settimeout(20)\n"
                  "try:\n"
                  "    c,_=s.accept(); c.sendall(b'LEAK\\n'); print('ACCEPTED', flush=True)\n"
                  "except socket.timeout: pass\n") % API
        env = self.dirs.env({"NSBOX_RESOLV_CONF": lab.resolv})
        a = subprocess.Popen(lab.wrap([NSBOX, "run", "--network", "all", "--", "python3", "-c",
                                       server]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env)
        try:
            addr = a.stdout.readline().decode().strip()
            self.assertTrue(addr.startswith("10.171."), addr)
            res = self.probe(["--network", "all"], f"tcp:{addr}:9000")
            self.assertRejected(res[f"tcp:{addr}:9000"])
            # nor through an egress range (which would have to overlap the pool: refused)
            r = self.nsbox(["run", "--network", "all", "--egress", "10.171.0.0/16", "--", "true"])
            self.assertEqual(r.returncode, 125)
            self.assertIn("pool", r.stderr.decode())
        finally:
            a.terminate()  # relayed to the sandbox; nsbox then removes what it made
            a.wait(timeout=30)
        self.assertNotIn(b"ACCEPTED", a.stdout.read())
        self.assertLabClean()

    def test_concurrent_creates_get_distinct_slots(self):
        env = self.dirs.env({"NSBOX_RESOLV_CONF": lab.resolv})
        script = ("import socket; u=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                  "u.connect(('%s', 9)); print(u.getsockname()[0])" % API)
        procs = [subprocess.Popen(lab.wrap([NSBOX, "run", "--network", "all", "--", "python3",
                                            "-c", script]), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env) for _ in range(6)]
        addrs = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err.decode())
            addrs.append(out.decode().strip())
        self.assertEqual(len(set(addrs)), len(addrs), addrs)
        self.assertLabClean()


class NetworkAllow(NetTest):
    """allow=NAMES as users get it by default: by name, through the egress helper on the
    sandbox's gateway (docs/network.md, "allow by name"). The lab's upstream servers speak no
    TLS; the probe's `tls:` sends a real ClientHello and gets their banner back, which says
    which address and port the connection arrived at. test_egress.py checks full HTTPS with
    certificate verification against an origin of its own."""

    def test_only_the_listed_name_over_tls(self):
        res = self.probe(["--network", "allow=api.lab.test"], "tls:api.lab.test:443",
                         "http:api.lab.test:443", "tls:api.lab.test:443:other.lab.test",
                         "tls:api.lab.test:443:", "http:api.lab.test:80", "tls:api.lab.test:8443",
                         f"tls:{API}:443", f"tcp:{API}:443", f"tcp:{OTHER}:443",
                         f"tcp:{UP_ADDR}:9999", f"tcp:{LAB_ADDR}:{HOST_PORT}",
                         f"tcp:GATEWAY:{HOST_PORT}", f"tcp:{META}:80",
                         f"dns:{UP_ADDR}:api.lab.test")
        # the allowed name, its ClientHello passed on, reaches its address upstream, from the
        # lab host's address (the helper's connection)
        self.assertEqual(res.pop("tls:api.lab.test:443"), f"ok:HELLO {API}:443 FROM {LAB_ADDR}")
        # on the helper's port: plain text, another name, no name: reset by the helper
        for k in ("http:api.lab.test:443", "tls:api.lab.test:443:other.lab.test",
                  "tls:api.lab.test:443:"):
            self.assertEqual(res.pop(k), "reset", k)
        # plain HTTP and other ports of the name are not open at all
        self.assertEqual(res.pop("http:api.lab.test:80"), "refused")
        self.assertEqual(res.pop("tls:api.lab.test:8443"), "refused")
        # the name's address itself is not open: only the name, through the helper
        self.assertEqual(res.pop(f"tls:{API}:443"), "refused")
        self.assertEqual(res.pop(f"tcp:{API}:443"), "refused")
        for k, v in res.items():
            self.assertRejected(v)
        self.assertLabClean()

    def test_a_name_outside_the_list_is_said_after_the_command(self):
        # the allowed name resolves as before (pinned in /etc/hosts: the sandbox's stub
        # resolver never hears it); another fails as before, and nsbox says why after the
        # command (docs/network.md, "Names that do not resolve")
        script = ("import socket, sys\n"
                  "print(socket.getaddrinfo(sys.argv[1], 443)[0][4][0], flush=True)\n"
                  "try:\n    socket.getaddrinfo(sys.argv[2], 443)\n"
                  "except socket.gaierror as ex:\n    print(ex.errno)\n")
        r = self.nsbox(["run", "--network", "allow=api.lab.test", "--", "python3", "-c", script,
                        "api.lab.test", "other.lab.test"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        self.assertEqual(r.stdout.decode().split()[1], "-2")  # EAI_NONAME: the stub's NXDOMAIN
        self.assertEqual(r.stderr.decode(),
                         "nsbox: the command looked up other.lab.test, which is not in the allow "
                         "list; add it: --network allow=api.lab.test,other.lab.test\n")
        r = self.nsbox(["run", "--network", "allow=api.lab.test", "--", "python3", "-c",
                        "import socket; socket.getaddrinfo('api.lab.test', 443)"])
        self.assertEqual((r.returncode, r.stderr), (0, b""))

    def test_by_address_only_listed_host_and_port(self):
        # The "address" opt-out: the name's addresses at creation, whatever is said over them.
        res = self.probe(["--network", "allow=api.lab.test"], f"tcp:{API}:443", f"tcp:{API}:80",
                         f"tcp:{API}:8443", f"tcp:{OTHER}:443", f"tcp:{UP_ADDR}:9999",
                         f"tcp:{LAB_ADDR}:{HOST_PORT}", f"tcp:GATEWAY:{HOST_PORT}",
                         f"tcp:{META}:80", f"dns:{UP_ADDR}:api.lab.test",
                         "tls:api.lab.test:443:other.lab.test", env=self.address_mode())
        self.assertOk(res.pop(f"tcp:{API}:443"), API)
        # by address the neighbour's name passes: what by name is for
        self.assertOk(res.pop("tls:api.lab.test:443:other.lab.test"), API)
        # plain HTTP to the allowed host is refused, everything else rejected visibly
        self.assertEqual(res.pop(f"tcp:{API}:80"), "refused")
        for k, v in res.items():
            self.assertRejected(v)
        self.assertLabClean()

    def test_names_pinned_and_dns_blocked(self):
        script = ("cat /etc/hosts; echo ---; cat /etc/resolv.conf; echo ---;"
                  "getent ahostsv4 api.lab.test | head -1; echo ---;"
                  "getent ahostsv4 other.lab.test || echo NOT-RESOLVED; echo ---;"
                  'hostname; getent hosts "$(hostname)"; echo ---;'
                  "ip -4 route show default")
        # by name, the names point to the gateway (the helper); by address, to their addresses
        for mode, env in (("name", None), ("address", self.address_mode())):
            with self.subTest(mode=mode):
                r = self.nsbox(["run", "--network", "allow=api.lab.test", "--", "sh", "-c",
                                script], extra_env=env)
                self.assertEqual(r.returncode, 0, r.stderr.decode())
                hosts, resolv, pinned, other, own, route = r.stdout.decode().split("---\n")
                gateway = route.split()[2]  # "default via GATEWAY dev eth0"
                want = gateway if mode == "name" else API
                self.assertIn(f"{want}\tapi.lab.test\n", hosts)
                self.assertEqual(pinned.split()[0], want)
                name, entry = own.splitlines()  # its own name resolves too, with DNS blocked
                self.assertEqual(entry.split(), ["127.0.1.1", name])
                # no resolver but the sandbox's own init, which refuses every name
                self.assertEqual([l for l in resolv.splitlines() if "nameserver" in l],
                                 ["nameserver 127.0.0.1"])
                self.assertIn("NOT-RESOLVED", other)

    def test_port_and_ip_literal(self):
        # the name by name on its port, the IP literal by address on its own
        res = self.probe(["--network", f"allow=api.lab.test:8443,{OTHER}:80"],
                         "tls:api.lab.test:8443", "tls:api.lab.test:443", f"tcp:{API}:8443",
                         f"tcp:{OTHER}:80", f"tcp:{OTHER}:443")
        self.assertEqual(res["tls:api.lab.test:8443"], f"ok:HELLO {API}:8443 FROM {LAB_ADDR}")
        self.assertOk(res[f"tcp:{OTHER}:80"], OTHER)
        self.assertEqual(res["tls:api.lab.test:443"], "refused")
        self.assertEqual(res[f"tcp:{API}:8443"], "refused")
        self.assertEqual(res[f"tcp:{OTHER}:443"], "refused")
        res = self.probe(["--network", f"allow=api.lab.test:8443,{OTHER}:80"], f"tcp:{API}:8443",
                         f"tcp:{API}:443", f"tcp:{OTHER}:80", f"tcp:{OTHER}:443",
                         env=self.address_mode())
        self.assertOk(res[f"tcp:{API}:8443"], API)
        self.assertOk(res[f"tcp:{OTHER}:80"], OTHER)
        self.assertEqual(res[f"tcp:{API}:443"], "refused")
        self.assertEqual(res[f"tcp:{OTHER}:443"], "refused")

    def test_a_service_on_the_host(self):
        # The host's "localhost" service is what a user means by allow=localhost; inside the
        # sandbox 127.0.0.1 is the sandbox itself, so that is refused with the way that works:
        # the host's own address, as an explicit entry.
        for bad in (f"localhost:{HOST_PORT}", f"127.0.0.1:{HOST_PORT}"):
            r = self.nsbox(["run", "--network", f"allow={bad}", "--", "true"])
            self.assertEqual(r.returncode, 125, r.stderr)
            err = r.stderr.decode()
            self.assertIn("loopback", err)
            self.assertIn("a service on this host is reached at one of the host's other "
                          "addresses", err)
            self.assertEqual(err.count("\n"), 1, err)
        res = self.probe(["--network", f"allow={LAB_ADDR}:{HOST_PORT}"],
                         f"tcp:{LAB_ADDR}:{HOST_PORT}", f"tcp:{API}:443")
        self.assertOk(res[f"tcp:{LAB_ADDR}:{HOST_PORT}"], LAB_ADDR)
        self.assertRejected(res[f"tcp:{API}:443"])
        self.assertLabClean()

    def test_port_of_a_host_wide_service_refused_with_the_fix(self):
        # By name, the helper listens on the gateway at the name's port; a service of the host
        # listening on that port on all its addresses (the lab's HOST_PORT) takes it first.
        r = self.nsbox(["run", "--network", f"allow=api.lab.test:{HOST_PORT}", "--", "true"])
        self.assertEqual(r.returncode, 125, r.stderr)
        err = r.stderr.decode()
        self.assertIn(f"port {HOST_PORT}", err)
        self.assertIn('fix: have it listen on its own addresses only, or set {"network": '
                      '{"allow_names": "address"}}', err)
        self.assertLabClean()
        # with the opt-out the message names, the sandbox is made (the probe exits 0) and the
        # port is open by address (nothing upstream listens there: its own reset, "refused")
        res = self.probe(["--network", f"allow=api.lab.test:{HOST_PORT}"],
                         f"tcp:{API}:{HOST_PORT}", env=self.address_mode())
        self.assertEqual(res[f"tcp:{API}:{HOST_PORT}"], "refused")
        self.assertLabClean()

    def inspect_network(self, env=None):
        r = self.nsbox(["create", "--network", f"allow=api.lab.test:8443,{OTHER}:80",
                        "--egress", "192.0.2.0/24"], extra_env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        try:
            r = self.nsbox(["inspect", sid], extra_env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            net = json.loads(r.stdout)["network"]
            self.assertEqual(net["mode"], "allow")
            self.assertEqual(net["host_interface"], f"nsb{sid}")
            self.assertEqual(net["egress"], ["192.0.2.0/24"])
            # the addresses are the ones really in use, on both ends of the link
            r = self.nsbox(["exec", sid, "--", "ip", "-4", "-o", "addr", "show", "dev", "eth0"],
                           extra_env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(f" {net['address']}/30 ", r.stdout.decode())
            host = lab.exec("ip", "-4", "-o", "addr", "show", "dev", net["host_interface"]).stdout
            self.assertIn(f" {net['gateway']}/30 ", host)
            return net
        finally:
            self.nsbox(["rm", sid], extra_env=env)

    def test_inspect_shows_names_addresses_and_what_is_open(self):
        net = self.inspect_network()
        # by name: the names as the helper lets them through; what is open for them, and where
        # they are pinned, is the gateway
        self.assertEqual(net["names"], ["api.lab.test:8443"])
        self.assertEqual(sorted(net["allowed"]),
                         sorted([f"{net['gateway']}:8443", f"{OTHER}:80"]))
        self.assertEqual(net["pinned"], {"api.lab.test": [net["gateway"]]})
        net = self.inspect_network(self.address_mode())
        self.assertNotIn("names", net)
        self.assertEqual(sorted(net["allowed"]), sorted([f"{API}:8443", f"{OTHER}:80"]))
        self.assertEqual(net["pinned"], {"api.lab.test": [API]})
        r = self.nsbox(["create"])
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        try:
            net = json.loads(self.nsbox(["inspect", sid]).stdout)["network"]
            self.assertEqual(net, {"mode": "none", "address": None, "egress": []})
        finally:
            self.nsbox(["rm", sid])
        self.assertLabClean()

    def test_unknown_name(self):
        # By name, names are resolved when connected to: a name that does not resolve is
        # accepted at creation and reset when used.
        res = self.probe(["--network", "allow=nowhere.lab.test"], "tls:nowhere.lab.test:443")
        self.assertEqual(res["tls:nowhere.lab.test:443"], "reset")
        # by address, it fails creation
        r = self.nsbox(["run", "--network", "allow=nowhere.lab.test", "--", "true"],
                       extra_env=self.address_mode())
        self.assertEqual(r.returncode, 125)
        self.assertIn("nowhere.lab.test", r.stderr.decode())
        self.assertLabClean()

    def test_region_rule_refuses_before_anything(self):
        before = lab.nft_table()
        r = self.nsbox(["run", "--region", "us-east-1", "--network", "allow=api.lab.test", "--",
                        "true"])
        self.assertEqual(r.returncode, 125)
        self.assertIn(REGION_MSG, r.stderr.decode())
        self.assertEqual(lab.nft_table(), before)
        self.assertLabClean()


class Egress(NetTest):
    def test_cidr_opens_exactly_that_range(self):
        res = self.probe(["--egress", "198.51.100.16/28"], f"tcp:{OTHER}:443", f"tcp:{OTHER}:80",
                         f"tcp:{API}:443", f"tcp:{UP_ADDR}:9999", f"tcp:{LAB_ADDR}:{HOST_PORT}",
                         f"dns:{UP_ADDR}:api.lab.test")
        self.assertOk(res.pop(f"tcp:{OTHER}:443"), OTHER)
        self.assertOk(res.pop(f"tcp:{OTHER}:80"), OTHER)
        for k, v in res.items():
            self.assertRejected(v)
        self.assertLabClean()

    def test_on_top_of_allow(self):
        res = self.probe(["--network", "allow=api.lab.test", "--egress", f"{OTHER},{META}"],
                         "tls:api.lab.test:443", "http:api.lab.test:80", f"tcp:{OTHER}:80",
                         f"tcp:{META}:80", f"tcp:{UP_ADDR}:9999")
        self.assertEqual(res["tls:api.lab.test:443"], f"ok:HELLO {API}:443 FROM {LAB_ADDR}")
        self.assertEqual(res["http:api.lab.test:80"], "refused")
        self.assertOk(res[f"tcp:{OTHER}:80"], OTHER)
        # an explicit egress entry opens even a link-local address
        self.assertOk(res[f"tcp:{META}:80"], META)
        self.assertRejected(res[f"tcp:{UP_ADDR}:9999"])
        self.assertLabClean()

    def test_ipv6_refused(self):
        r = self.nsbox(["run", "--egress", "2001:db8::/32", "--", "true"])
        self.assertEqual(r.returncode, 125)
        self.assertIn("IPv6", r.stderr.decode())
        self.assertLabClean()


class Cleanup(NetTest):
    def test_table_is_persistent_and_sandboxes_leave_nothing(self):
        for net in (["--network", "all"], ["--network", "allow=api.lab.test"],
                    ["--egress", "198.51.100.0/24"]):
            self.sh(net, "true")
        sets = lab.nft_table()
        self.assertIsNotNone(sets)  # made once, kept for the next sandbox
        self.assertEqual(sorted(sets), ["sb_all", "sb_cidr", "sb_dns", "sb_slot", "sb_src",
                                        "sb_tcp"])
        self.assertLabClean()

    def sleeping_run(self, net_args, extra_env=None):
        """`nsbox run NET_ARGS -- sleep 60` in the lab, once its veth is up."""
        env = self.dirs.env(dict({"NSBOX_RESOLV_CONF": lab.resolv}, **(extra_env or {})))
        p = subprocess.Popen(lab.wrap([NSBOX, "run"] + net_args + ["--", "sleep", "60"]),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        # 60 s: CI's emulated VM, with the host busy besides, once took more than 20
        deadline = time.time() + 60
        while time.time() < deadline and not lab.sandbox_links() and p.poll() is None:
            time.sleep(0.05)
        if not lab.sandbox_links():
            p.kill()
            _, err = p.communicate()
            self.fail(f"the sandbox never came up (nsbox run: exit {p.returncode}, "
                      f"{err.decode(errors='replace')!r})")
        return p

    @staticmethod
    def sigkill(p):
        p.send_signal(signal.SIGKILL)  # nsbox itself: its sandbox dies with it
        p.wait()

    def test_sigkill_then_gc(self):
        self.sigkill(self.sleeping_run(["--network", "allow=api.lab.test", "--egress", OTHER]))
        sets = lab.nft_table()
        self.assertTrue(sets["sb_slot"] and sets["sb_tcp"] and sets["sb_cidr"], sets)
        r = self.nsbox(["gc"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        self.assertLabClean()

    def test_a_full_pool_takes_back_a_killed_sandboxs_slot(self):
        # A network.pool of one /30: one sandbox at a time. A live sandbox's slot is never
        # taken; a sandbox killed with its supervisor keeps its slot until a gc, and a one-shot
        # run runs none. The next sandbox that finds the pool full takes such a slot back
        # (its state directory is there, its lock free) instead of failing.
        cfg = os.path.join(self.dirs.base, "one-slot.json")
        with open(cfg, "w") as f:
            json.dump({"pool": {"size": 0}, "network": {"pool": "10.171.0.0/30"}}, f)
        p = self.sleeping_run(["--network", "all"], {"NSBOX_CONFIG": cfg})
        try:
            busy = self.nsbox(["run", "--network", "all", "--", "true"],
                              extra_env={"NSBOX_CONFIG": cfg})
            self.assertEqual(busy.returncode, 125, busy.stderr.decode())
            self.assertIn("all 1 address slots of the sandbox pool are in use",
                          busy.stderr.decode())
        finally:
            self.sigkill(p)
        self.assertTrue(lab.nft_table()["sb_slot"], "the killed sandbox's slot is gone already")
        script = ("import socket; u=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                  "u.connect(('%s', 9)); print(u.getsockname()[0])" % API)
        r = self.nsbox(["run", "--network", "all", "--", "python3", "-c", script],
                       extra_env={"NSBOX_CONFIG": cfg})
        self.assertEqual((r.returncode, r.stdout), (0, b"10.171.0.2\n"), r.stderr.decode())
        r = self.nsbox(["gc"])
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        self.assertLabClean()


class Unprivileged(NetTest):
    def test_all_allow_and_egress_refused_with_the_fix(self):
        user = ensure_test_user()
        dirs = Dirs(owner=user)
        try:
            before = lab.nft_table()
            for net in (["--network", "all"], ["--network", "allow=api.lab.test"],
                        ["--egress", OTHER]):
                r = self.nsbox(["run"] + net + ["--", "true"], user=user, dirs=dirs)
                self.assertEqual(r.returncode, 125, r.stderr)
                err = r.stderr.decode()
                self.assertIn("CAP_NET_ADMIN", err)
                self.assertIn("fix:", err)
            self.assertEqual(lab.nft_table(), before)
            self.assertEqual(dirs.leftovers(), [])
        finally:
            dirs.cleanup()
