"""Errors raised by sandboxes (all are :class:`~ray_harness.types.exceptions.RayHarnessError`).

SandboxTimeoutError(RayHarnessError, TimeoutError)            the wall-clock timeout expired; the process tree was killed
SandboxPathNotFoundError(RayHarnessError, FileNotFoundError)  a file, directory or working directory does not exist
SandboxError(RayHarnessError)                                 the sandbox could not run the operation at all
├── UnknownHostKeyError                                       SSH: the server's host key is not in known_hosts
└── HostKeyMismatchError                                      SSH: the server's host key differs from the known one

A command that runs and fails is not an error: it is an ``ExecutionResult``
with a non-zero exit code. Every class pickles with its attributes, because
sandboxes may run inside Ray actors.
"""

from __future__ import annotations

from ray_harness.types.exceptions import RayHarnessError

__all__ = (
    "HostKeyMismatchError",
    "SandboxError",
    "SandboxPathNotFoundError",
    "SandboxTimeoutError",
    "UnknownHostKeyError",
)


class SandboxTimeoutError(RayHarnessError, TimeoutError):
    """The command ran longer than its timeout. ``stdout``/``stderr`` hold what it printed until then."""

    def __init__(self, seconds: float | None, stdout: str = "", stderr: str = "") -> None:
        super().__init__(f"execution timed out after {seconds} seconds")
        self.seconds = seconds
        self.stdout = stdout
        self.stderr = stderr


class SandboxPathNotFoundError(RayHarnessError, FileNotFoundError):
    """``path`` does not exist in the sandbox (or is a file where a directory was needed)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"path not found in sandbox: {path}")
        self.path = path


class SandboxError(RayHarnessError):
    """The sandbox could not run the operation (engine unreachable, container gone, SSH failure)."""


class UnknownHostKeyError(SandboxError):
    """The SSH server presented a host key that known_hosts does not list."""


class HostKeyMismatchError(SandboxError):
    """The SSH server presented a host key different from the one in known_hosts."""
