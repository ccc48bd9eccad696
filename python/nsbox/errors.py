"""Typed errors of the nsbox client.

Every error the client raises on behalf of nsbox is a SandboxError. The message is the runtime's
own text, passed through unchanged (the client does not keep a second copy of the rules), and
`code` is the wire protocol's error code (`invalid`, `not_found`, `deleted`, `timeout`,
`unsupported`, `policy`, `system`, `exec`, `no_space`) when there is one.
"""
import contextlib
import errno
import os
import sys
import warnings


class SandboxError(Exception):
    """Base class of every nsbox client error."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        self.code = code

    def __str__(self):
        return self.message


class SandboxCreationError(SandboxError):
    """Creating the sandbox failed: invalid options, a failing setup script, a missing
    prerequisite on this machine. The message is nsbox's one-line explanation (with the fix when
    there is one)."""


class InvalidOption(SandboxCreationError, ValueError):
    """An option was refused by the runtime's validation (e.g. a host with a scheme in
    Network.allow, a CIDR with host bits set, an unknown instance type)."""


class PolicyNotSupported(SandboxCreationError):
    """The sandbox cannot enforce the requested policy: the region rule (a network policy other
    than Network.all() outside nl-north-1) or a policy this machine cannot enforce."""


class SetupScriptError(SandboxCreationError):
    """The setup script exited non-zero or timed out; the sandbox was deleted. The message
    carries the script's stderr."""


class SandboxNotFound(SandboxError):
    """No such sandbox in this runtime directory (it never existed there)."""


class SandboxDeletedError(SandboxError):
    """The sandbox is gone: deleted by rm, because ttl_seconds expired, or because it died. The
    message says which (e.g. "sandbox 0123456789ab was deleted because ttl_seconds=2 expired").
    Raised by an execute() that the deletion cut off, `result` holds what the command printed
    until then (exit_code 137: its processes were killed with the sandbox); else None."""

    def __init__(self, message, code=None, result=None):
        super().__init__(message, code)
        self.result = result


class ExecTimeout(SandboxError, TimeoutError):
    """execute() ran past its timeout; the command was killed. `result` holds what it printed
    until then (exit_code 124)."""

    def __init__(self, message, result=None, code="timeout"):
        super().__init__(message, code)
        self.result = result


class ExecError(SandboxError):
    """A command could not be started (e.g. its working directory does not exist)."""

    def __init__(self, message, exit_code=None, code="exec"):
        super().__init__(message, code)
        self.exit_code = exit_code


class SandboxFileNotFoundError(SandboxError, FileNotFoundError):
    """A file operation named a path that does not exist in the workspace. Also a
    FileNotFoundError, so `except FileNotFoundError` works."""

    def __init__(self, message, code="not_found", path=None):
        SandboxError.__init__(self, message, code)
        self.filename = path

    def __str__(self):
        return self.message


class _FileError(SandboxError, OSError):
    """A SandboxError that is also the OSError a local file operation would raise (ERRNO)."""

    ERRNO = 0

    def __init__(self, message, code, path=None):
        SandboxError.__init__(self, message, code)
        self.errno = self.ERRNO
        self.strerror = message
        self.filename = path

    def __str__(self):
        return self.message


class SandboxDiskFullError(_FileError):
    """A file operation ran out of room: the workspace's disk (its bytes or its inodes) is
    full. Also an OSError with errno ENOSPC, as a full local disk gives."""

    ERRNO = errno.ENOSPC

    def __init__(self, message, code="no_space", path=None):
        _FileError.__init__(self, message, code, path)


class SandboxFileTooLargeError(_FileError):
    """read_file(max_bytes=N) of a larger file. Also an OSError with errno EFBIG."""

    ERRNO = errno.EFBIG

    def __init__(self, message, code="too_large", path=None):
        _FileError.__init__(self, message, code, path)


class ProcessNotFound(SandboxError, LookupError):
    """kill/logs named a pid that is not a (running) process started by start_process()."""


class InvalidRequest(SandboxError, ValueError):
    """The supervisor refused a request as invalid (bad path, bad argument)."""


class OperationNotSupported(SandboxError):
    """The supervisor does not support this operation (yet, or on this machine)."""


class SandboxBusyError(SandboxError):
    """The sandbox has as much under way as it takes (48 commands, waits and long file
    operations at once; docs/protocol.md "busy"). Nothing was started. execute() sends its
    command again until the sandbox takes it; start_process() and the file operations send
    theirs again for up to 60 s before they raise this."""


class ProtocolError(SandboxError):
    """The supervisor's reply could not be understood."""


class NsboxWarning(UserWarning):
    """What nsbox says about a call that did what was asked, with a catch (warnings.warn):
    e.g. that a root-owned workspace directory is not writable inside, or that a listing was
    ended before the directory's end."""


def warn(message):
    """An NsboxWarning, attributed to the first frame outside this package and contextlib: the
    caller's line (open() goes through contextlib, create() does not)."""
    here = os.path.dirname(os.path.abspath(__file__))
    skip = (here + os.sep, os.path.dirname(os.path.abspath(contextlib.__file__)) + os.sep +
            "contextlib")
    f, level = sys._getframe(0), 1
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(skip):
        f, level = f.f_back, level + 1
    warnings.warn(message, NsboxWarning, stacklevel=level)
