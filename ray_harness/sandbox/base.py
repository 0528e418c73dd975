"""The ``Sandbox`` contract: where an agent's commands, code and file operations run.

Only the streaming operations and the file operations are abstract; the
non-streaming helpers drain a stream. A sandbox is an async context manager
(``start()`` on entry, ``close()`` on exit) and pickles as configuration: live
clients and connections are recreated on first use in the receiving process.

Every sandbox object has an identity (:attr:`Sandbox.sandbox_id`, a uuid set at construction) that
pickling keeps: copies of one object unpickled in one process are that process's one live sandbox (one
container, one SSH connection), and ``copy.copy`` / ``copy.deepcopy`` return the sandbox itself. See
:mod:`ray_harness.sandbox._binding` for who closes it on a host.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Self

from ray_harness.sandbox import _binding
from ray_harness.sandbox.types import ExecutionResult, FileInfo, StreamChunk
from ray_harness.telemetry.config import capture_content_enabled
from ray_harness.telemetry.tracing import span_scope

if TYPE_CHECKING:
    from ray_harness.tools.base import AgentTool

__all__ = ("Sandbox",)

Stream = AsyncGenerator[StreamChunk | ExecutionResult, None]


class Sandbox(ABC):
    """An execution environment for commands, code and files.

    ``execute_streaming`` and ``execute_code_streaming`` yield ``StreamChunk``
    items as output arrives, then exactly one ``ExecutionResult``. A non-zero
    exit code is a result, not an error; ``SandboxTimeoutError`` (with the
    partial output) is raised when ``timeout`` seconds pass, and the command's
    process tree is killed. Closing or cancelling the stream early kills it too.

    Identity: each object is one sandbox (:attr:`sandbox_id`). Agents built with the same object, in one
    process or shipped separately to one host, share its live state; a second object is another sandbox.
    """

    closes_with_holders: ClassVar[bool] = True
    """Whether a host closes this sandbox when the last agent slot holding it is released (a
    ``RemoteSandbox`` does not: its actor owns the sandbox)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        """Give the new sandbox its identity."""
        sandbox = super().__new__(cls)
        sandbox.__dict__["_sandbox_id"] = uuid.uuid4().hex
        _binding.note_created(sandbox)
        return sandbox

    @property
    def sandbox_id(self) -> str:
        """This sandbox's identity: a uuid set at construction, kept by pickling (and by copies)."""
        identity = self.__dict__.get("_sandbox_id")
        if identity is None:  # a subclass that replaced __dict__ wholesale
            identity = self.__dict__["_sandbox_id"] = uuid.uuid4().hex
        return str(identity)

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        """Pickle as configuration plus identity; unpickling in a process that has this sandbox returns it."""
        getstate = getattr(self, "__getstate__", None)
        state = getstate() if getstate is not None else self.__dict__
        state = dict(state) if isinstance(state, dict) else dict(self.__dict__)
        state.pop("_recovery_listener", None)  # the listener belongs to the process that set it
        state.pop("_live_executions", None)  # running commands stay with the process that started them
        state["_sandbox_id"] = self.sandbox_id
        _binding.note_pickled(self)
        return _binding.restore, (type(self), self.sandbox_id, state)

    def __copy__(self) -> Self:
        """The sandbox itself: a copy of a handle to an environment is the same environment."""
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        """The sandbox itself (see :meth:`__copy__`)."""
        return self

    @abstractmethod
    def execute_streaming(
        self,
        command: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Stream:
        """Run a shell command."""

    @abstractmethod
    def execute_code_streaming(
        self,
        code: str,
        language: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Stream:
        """Feed ``code`` to the interpreter ``language`` (e.g. ``"python3"``, ``"sh"``) on its stdin."""

    @abstractmethod
    async def read_file(self, path: str) -> bytes:
        """The file's bytes; ``SandboxPathNotFoundError`` if it does not exist."""

    @abstractmethod
    async def write_file(self, path: str, content: bytes) -> None:
        """Create or replace the file, creating missing parent directories."""

    @abstractmethod
    async def remove_file(self, path: str) -> None:
        """Delete a file; ``SandboxPathNotFoundError`` if missing, ``IsADirectoryError`` for a directory."""

    @abstractmethod
    async def list_files(self, path: str = ".") -> list[FileInfo]:
        """The directory's entries sorted by name, hidden ones included, without ``.`` and ``..``."""

    def describe(self) -> str:
        """Where commands run, for tool descriptions (e.g. "Docker container abc123")."""
        return type(self).__name__

    # -- helpers ------------------------------------------------------------------------------------

    async def execute(
        self,
        command: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecutionResult:
        """Run a command to completion and return its result."""
        with span_scope("execute", _execute_attributes(self, command)) as span:
            result = await _final(self.execute_streaming(command, timeout=timeout, cwd=cwd, env=env))
            if span is not None:
                span.set_attribute("ray_harness.sandbox.exit_code", result.exit_code)
            return result

    async def execute_code(
        self,
        code: str,
        language: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecutionResult:
        """Run code to completion and return its result."""
        return await _final(self.execute_code_streaming(code, language, timeout=timeout, cwd=cwd, env=env))

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """Read a text file.

        Args:
            path: The file in the sandbox.
            encoding: Its text encoding.

        Raises:
            SandboxPathNotFoundError: The file does not exist.
        """
        return (await self.read_file(path)).decode(encoding)

    async def write_text(self, path: str, content: str, encoding: str = "utf-8") -> None:
        """Write a text file, replacing it.

        Args:
            path: The file in the sandbox.
            content: The text (named as in Strands).
            encoding: Its text encoding.
        """
        await self.write_file(path, content.encode(encoding))

    def get_tools(self) -> list[AgentTool]:
        """``sandbox_shell`` and ``sandbox_file_editor``, bound to this sandbox."""
        from ray_harness.sandbox.tools import sandbox_tools

        return sandbox_tools(self)

    # -- recovery after a crash of the process that drives this sandbox ------------------------------

    def recovery_state(self) -> dict[str, Any]:
        """JSON describing what a successor must clean up if this process died now.

        That is running commands and created containers. A host (``RemoteSandbox``) records it whenever
        it changes.
        """
        return {}

    async def recover(self, state: dict[str, Any]) -> None:
        """Clean up after a predecessor that died with ``state``: kill its commands, remove what it created."""

    def set_recovery_listener(self, listener: Callable[[], None] | None) -> None:
        """Called (with no arguments) whenever :meth:`recovery_state` changes."""
        self.__dict__["_recovery_listener"] = listener

    def _recovery_changed(self) -> None:
        listener = self.__dict__.get("_recovery_listener")
        if listener is not None:
            listener()

    # -- lifecycle ----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Acquire resources (connect, create a container). Operations also start lazily."""

    async def close(self) -> None:
        """Release what ``start`` acquired. Idempotent."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


def _execute_attributes(sandbox: Sandbox, command: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {"ray_harness.sandbox": type(sandbox).__name__}
    if capture_content_enabled():  # commands can carry secrets: recorded only on opt-in
        attributes["ray_harness.sandbox.command"] = command[:4096]
    return attributes


async def _final(stream: Stream) -> ExecutionResult:
    async with aclosing(stream) as items:
        async for item in items:
            if isinstance(item, ExecutionResult):
                return item
    raise RuntimeError("sandbox stream ended without an ExecutionResult")


def as_bytes(content: bytes | bytearray | memoryview) -> bytes:
    """``write_file`` takes bytes; a ``str`` is almost always a forgotten ``write_text``."""
    if isinstance(content, str):
        raise TypeError("write_file() takes bytes; use write_text() for str")
    if not isinstance(content, bytes | bytearray | memoryview):
        raise TypeError(f"write_file() takes bytes, got {type(content).__name__}")
    return bytes(content)
