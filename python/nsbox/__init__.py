"""nsbox: local container sandboxes for AI agents, with the interface of the hosted
MistralSandbox. Standard library only.

    import nsbox
    box = nsbox.LocalSandbox(instance_type="medium", ttl_seconds=3600,
                             network=nsbox.Network.none())
    async with box.session() as sb:                 # created here, deleted on exit
        r = await sb.execute("python3 -c 'print(6*7)'", timeout=30)
        assert r.exit_code == 0 and r.stdout == "42\\n"

See docs/python.md.
"""
from .errors import (ExecError, ExecTimeout, InvalidOption, InvalidRequest, NsboxWarning,
                     OperationNotSupported, PolicyNotSupported, ProcessNotFound, ProtocolError,
                     SandboxBusyError, SandboxCreationError, SandboxDeletedError,
                     SandboxDiskFullError,
                     SandboxError, SandboxFileNotFoundError, SandboxFileTooLargeError,
                     SandboxNotFound, SetupScriptError)
from .models import (EgressPolicy, FileInfo, GitHubBinding, HeaderBinding, Hook, HookContext,
                     MistralApiBinding, Network, ProcessInfo, ProcessLogs,
                     SandboxExecutionResult)
from .sandbox import LocalSandbox
from .session import AsyncProcess, AsyncSession, Process, Session

__version__ = "0.1.0"

__all__ = [
    "LocalSandbox", "Network", "EgressPolicy", "HeaderBinding", "GitHubBinding",
    "MistralApiBinding", "SandboxExecutionResult", "Session",
    "AsyncSession", "Process", "AsyncProcess", "FileInfo", "ProcessInfo", "ProcessLogs", "Hook",
    "HookContext", "SandboxError", "SandboxCreationError", "InvalidOption",
    "PolicyNotSupported", "SetupScriptError", "SandboxNotFound", "SandboxDeletedError",
    "ExecTimeout", "ExecError", "SandboxFileNotFoundError", "ProcessNotFound", "InvalidRequest",
    "OperationNotSupported", "ProtocolError", "SandboxDiskFullError", "SandboxFileTooLargeError",
    "SandboxBusyError", "NsboxWarning",
]
