"""Sandboxes: where an agent's commands, code and file operations run.

``Sandbox`` is the contract; ``PosixShellSandbox`` builds everything from a
POSIX shell; ``DockerSandbox`` (docker SDK) and ``SshSandbox`` (paramiko) are
real sandboxes; ``LocalEnvironment`` (alias ``NotASandboxLocalEnvironment``)
runs on this machine with no isolation. The docker and paramiko packages are
imported only when those sandboxes first connect.

Sandboxes follow agents: one sandbox object is one sandbox (``sandbox_id``,
kept through pickling). Copies of it in one process are one live sandbox (one
container, one SSH connection); on a Ray host it is closed when the last agent
slot holding it is released (:mod:`ray_harness.sandbox._binding`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ray_harness._lazy import lazy_attributes

if TYPE_CHECKING:
    from ray_harness.sandbox._validation import LANGUAGE_PATTERN
    from ray_harness.sandbox.base import Sandbox
    from ray_harness.sandbox.docker import DockerSandbox
    from ray_harness.sandbox.errors import (
        HostKeyMismatchError,
        SandboxError,
        SandboxPathNotFoundError,
        SandboxTimeoutError,
        UnknownHostKeyError,
    )
    from ray_harness.sandbox.local import LocalEnvironment, NotASandboxLocalEnvironment
    from ray_harness.sandbox.posix_shell import PosixShellSandbox
    from ray_harness.sandbox.ssh import SshSandbox
    from ray_harness.sandbox.tools import SandboxFileEditorTool, SandboxShellTool
    from ray_harness.sandbox.types import ExecutionResult, FileInfo, OutputFile, StreamChunk, StreamType

__all__ = [
    "DockerSandbox",
    "ExecutionResult",
    "FileInfo",
    "HostKeyMismatchError",
    "LANGUAGE_PATTERN",
    "LocalEnvironment",
    "NotASandboxLocalEnvironment",
    "OutputFile",
    "PosixShellSandbox",
    "Sandbox",
    "SandboxError",
    "SandboxFileEditorTool",
    "SandboxPathNotFoundError",
    "SandboxShellTool",
    "SandboxTimeoutError",
    "SshSandbox",
    "StreamChunk",
    "StreamType",
    "UnknownHostKeyError",
]


# The names load their module on first use: every Ray host process imports ray_harness.sandbox._binding (and with
# it this package), and most never build a sandbox; importing all of them cost each host start ≈40 ms.
_MODULES = {
    "LANGUAGE_PATTERN": "_validation",
    "Sandbox": "base",
    "DockerSandbox": "docker",
    "HostKeyMismatchError": "errors",
    "SandboxError": "errors",
    "SandboxPathNotFoundError": "errors",
    "SandboxTimeoutError": "errors",
    "UnknownHostKeyError": "errors",
    "LocalEnvironment": "local",
    "NotASandboxLocalEnvironment": "local",
    "PosixShellSandbox": "posix_shell",
    "SshSandbox": "ssh",
    "SandboxFileEditorTool": "tools",
    "SandboxShellTool": "tools",
    "ExecutionResult": "types",
    "FileInfo": "types",
    "OutputFile": "types",
    "StreamChunk": "types",
    "StreamType": "types",
}


__getattr__ = lazy_attributes(__name__, {name: f"{__name__}.{module}" for name, module in _MODULES.items()})


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
