"""Option and result types: Network, EgressPolicy, SandboxExecutionResult, file and process
records, hooks."""
from dataclasses import dataclass, field
from typing import Any, Optional, Union


def _strings(values, what, example):
    """A light local type check only: that we were given strings. Whether each string is a
    valid host or CIDR is the runtime's decision (docs/spec.md), surfaced with its message."""
    if isinstance(values, (str, bytes)):
        raise TypeError("%s must be a sequence of strings, not a single string: %s"
                        % (what, example))
    try:
        values = tuple(values)
    except TypeError:
        raise TypeError("%s must be a sequence of strings: %s" % (what, example)) from None
    for v in values:
        if not isinstance(v, str):
            raise TypeError("%s must be strings, got %r: %s" % (what, v, example))
    return values


class Network:
    """Outbound network policy: Network.none() (loopback only, the default), Network.all(),
    Network.allow(hosts=("pypi.org", "api.github.com:443")) (only HTTPS to those hosts)."""

    __slots__ = ("mode", "hosts")

    def __init__(self, mode, hosts=()):
        if mode not in ("none", "all", "allow"):
            raise ValueError("network mode must be 'none', 'all' or 'allow'")
        self.mode = mode
        self.hosts = tuple(hosts)

    @classmethod
    def none(cls):
        return cls("none")

    @classmethod
    def all(cls):
        return cls("all")

    @classmethod
    def allow(cls, hosts):
        return cls("allow", _strings(hosts, "Network.allow(hosts=...)",
                                     "Network.allow(hosts=('pypi.org',))"))

    def to_spec(self):
        """The value of the spec's "network" key."""
        return {"allow": list(self.hosts)} if self.mode == "allow" else self.mode

    def __eq__(self, other):
        return isinstance(other, Network) and (self.mode, self.hosts) == (other.mode, other.hosts)

    def __hash__(self):
        return hash((self.mode, self.hosts))

    def __repr__(self):
        if self.mode == "allow":
            return "Network.allow(hosts=%r)" % (self.hosts,)
        return "Network.%s()" % self.mode


class EgressPolicy:
    """Extra IP addresses / CIDRs the sandbox may connect to, on top of `network`:
    EgressPolicy(cidrs=("192.168.0.0/16", "192.0.2.7")) (not the sandbox address pool,
    10.171.0.0/16 by default)."""

    __slots__ = ("cidrs",)

    def __init__(self, cidrs=()):
        self.cidrs = _strings(cidrs, "EgressPolicy(cidrs=...)",
                              "EgressPolicy(cidrs=('192.168.0.0/16',))")

    def to_spec(self):
        return list(self.cidrs)

    def __eq__(self, other):
        return isinstance(other, EgressPolicy) and self.cidrs == other.cidrs

    def __hash__(self):
        return hash(self.cidrs)

    def __repr__(self):
        return "EgressPolicy(cidrs=%r)" % (self.cidrs,)


class HeaderBinding:
    """A header added to every HTTPS request the sandbox sends to host, whose value never
    enters the sandbox (docs/network.md, "Header bindings"): HeaderBinding(host="api.example.com",
    header="Authorization", value="Bearer ..."). The host must be reachable under the network
    policy (Network.all(), or Network.allow() with the host)."""

    __slots__ = ("host", "header", "value")

    def __init__(self, host, header, value):
        for name, v in (("host", host), ("header", header), ("value", value)):
            if not isinstance(v, str):
                raise TypeError("HeaderBinding(%s=...) must be a string" % name)
        self.host = host
        self.header = header
        self.value = value

    def _entries(self):
        return [self]

    def __eq__(self, other):
        return isinstance(other, HeaderBinding) and (self.host, self.header, self.value) == (
            other.host, other.header, other.value)

    def __hash__(self):
        return hash((self.host, self.header))

    def __repr__(self):  # never the value: reprs end up in logs and tracebacks
        return "HeaderBinding(host=%r, header=%r, value=<hidden>)" % (self.host, self.header)


class GitHubBinding:
    """A GitHub token for api.github.com (Authorization: Bearer TOKEN) and github.com, for git
    over HTTPS (Authorization: Basic, user x-access-token and the token as password, as GitHub
    documents for tokens)."""

    __slots__ = ("token",)

    def __init__(self, token):
        if not isinstance(token, str):
            raise TypeError("GitHubBinding(token=...) must be a string")
        self.token = token

    def _entries(self):
        import base64
        basic = base64.b64encode(("x-access-token:" + self.token).encode()).decode()
        return [HeaderBinding("api.github.com", "Authorization", "Bearer " + self.token),
                HeaderBinding("github.com", "Authorization", "Basic " + basic)]

    def __repr__(self):
        return "GitHubBinding(token=<hidden>)"


class MistralApiBinding:
    """A Mistral API key for api.mistral.ai (Authorization: Bearer KEY)."""

    __slots__ = ("api_key",)

    def __init__(self, api_key):
        if not isinstance(api_key, str):
            raise TypeError("MistralApiBinding(api_key=...) must be a string")
        self.api_key = api_key

    def _entries(self):
        return [HeaderBinding("api.mistral.ai", "Authorization", "Bearer " + self.api_key)]

    def __repr__(self):
        return "MistralApiBinding(api_key=<hidden>)"


def binding_entries(bindings):
    """The HeaderBindings of a list of bindings (GitHubBinding stands for two)."""
    if isinstance(bindings, (str, bytes, HeaderBinding, GitHubBinding, MistralApiBinding)):
        raise TypeError("header_bindings must be a list of bindings, e.g. "
                        "[GitHubBinding(token=...)]")
    out = []
    for b in bindings:
        if not isinstance(b, (HeaderBinding, GitHubBinding, MistralApiBinding)):
            raise TypeError("header_bindings takes HeaderBinding, GitHubBinding and "
                            "MistralApiBinding, got %r" % (type(b).__name__,))
        out.extend(b._entries())
    return out


Output = Union[str, bytes]


@dataclass
class SandboxExecutionResult:
    """What execute() returns. stdout/stderr are str (UTF-8, invalid bytes replaced) or bytes
    with text=False. exit_code: the command's own; 124 timed out; 126 not executable; 127 not
    found; 128+N killed by signal N."""

    exit_code: int
    stdout: Output
    stderr: Output
    timed_out: bool = False
    oom_killed: bool = False
    truncated: bool = False  # output beyond max_output was dropped
    # names the command looked up that the sandbox's network did not let resolve, said as nsbox
    # exec says them ("nsbox: the command looked up ..."); "" when none (docs/network.md)
    network_note: str = ""

    @property
    def ok(self):
        return self.exit_code == 0


@dataclass(frozen=True)
class FileInfo:
    """One entry of list_files() / the result of stat(). type: "file", "dir", "symlink" or
    "other"; a symlink is not followed (stat() gives its text in `target`)."""

    name: str
    type: str
    size: int
    mode: int
    mtime: float
    path: Optional[str] = None
    target: Optional[str] = None

    @property
    def is_dir(self):
        return self.type == "dir"

    @property
    def is_file(self):
        return self.type == "file"


@dataclass(frozen=True)
class ProcessInfo:
    """A background process, as list_processes() reports it."""

    pid: int
    command: str
    running: bool
    exit_code: Optional[int] = None


@dataclass(frozen=True)
class ProcessLogs:
    """The last 64 KiB of a background process's stdout and stderr. sleeping: the sandbox is
    asleep (idle_timeout_seconds), its processes frozen until a request wakes it."""

    stdout: str
    stderr: str
    truncated: bool = False
    running: Optional[bool] = None
    sleeping: Optional[bool] = None


@dataclass
class HookContext:
    """What a hook receives. `sandbox` is the session (sync or async, matching the hook's own
    kind), so hooks use ctx.sandbox.execute(), read_file(), write_file()..."""

    sandbox: Any
    sandbox_id: str
    options: Any = None  # the LocalSandbox
    data: dict = field(default_factory=dict)  # shared between a hook's on_create and on_destroy


class Hook:
    """Base class for hooks; override on_create(ctx) and/or on_destroy(ctx), as plain or async
    methods. Hook(on_create=fn, on_destroy=fn) wraps functions."""

    def __init__(self, on_create=None, on_destroy=None):
        if on_create is not None:
            self.on_create = on_create
        if on_destroy is not None:
            self.on_destroy = on_destroy

    def on_create(self, ctx):
        pass

    def on_destroy(self, ctx):
        pass
