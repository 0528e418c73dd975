"""``LocalEnvironment``: commands on this machine, with no isolation at all.

Its alias ``NotASandboxLocalEnvironment`` says what it is: a model-driven
``rm -rf`` here deletes your files. It is the default ``agent.sandbox`` so
that code can always reach *an* environment, but an Agent only gets shell
and file tools when a sandbox is passed explicitly.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing

from pydantic import Field
from typing_extensions import override

from ray_harness.sandbox._config import CommonSettings, validated
from ray_harness.sandbox._engine import check_timeout
from ray_harness.sandbox._output import DEFAULT_MAX_OUTPUT_CHARS
from ray_harness.sandbox._process import ProcessExecution, stream_process
from ray_harness.sandbox._validation import check_code, check_command, check_cwd, check_env, check_language
from ray_harness.sandbox.base import Sandbox, as_bytes
from ray_harness.sandbox.errors import SandboxPathNotFoundError
from ray_harness.sandbox.types import ExecutionResult, FileInfo, StreamChunk

__all__ = ("LocalEnvironment", "NotASandboxLocalEnvironment")


class _LocalSettings(CommonSettings):
    shell: str = Field(min_length=1)


class LocalEnvironment(Sandbox):
    """Run commands in local process groups; files through ``pathlib``.

    Args:
        working_dir: Default directory for commands and relative paths (the
            process's current directory if ``None``).
        shell: The POSIX shell that runs commands.
        max_output_chars: Characters of stdout/stderr an ``ExecutionResult``
            retains per stream (``None``: unlimited); chunks always stream in full.
    """

    def __init__(
        self,
        working_dir: str | os.PathLike[str] | None = None,
        *,
        shell: str = "/bin/sh",
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> None:
        directory = os.fspath(working_dir) if isinstance(working_dir, os.PathLike) else working_dir
        validated(_LocalSettings, "LocalEnvironment", working_dir=directory, shell=shell,
                  max_output_chars=max_output_chars)
        self.working_dir = directory
        self.shell = shell
        self.max_output_chars = max_output_chars

    def __repr__(self) -> str:
        return f"LocalEnvironment(working_dir={self.working_dir!r})"

    @override
    def describe(self) -> str:
        where = f" in {self.working_dir}" if self.working_dir else ""
        return f"this machine{where} (no isolation)"

    def _path(self, path: str | os.PathLike[str]) -> str:
        # Joined as strings, not pathlib: Path("plain.txt/") drops the slash and would read or delete the file.
        resolved = os.fspath(path)
        if not isinstance(resolved, str) or not resolved:
            raise ValueError(f"path must be a non-empty string, got {path!r}")
        if self.working_dir is not None and not os.path.isabs(resolved):
            resolved = os.path.join(self.working_dir, resolved)
        return resolved

    def _directory(self, cwd: str | None) -> str | None:
        checked = check_cwd(cwd)
        directory = self._path(checked) if checked is not None else self.working_dir
        if directory is not None and not os.path.isdir(directory):
            raise SandboxPathNotFoundError(directory)
        return directory

    def _running(self) -> set[ProcessExecution]:
        # In __dict__ under the name pickling drops: a copy elsewhere must not kill this process's groups.
        running: set[ProcessExecution] = self.__dict__.setdefault("_live_executions", set())
        return running

    @override
    async def close(self) -> None:
        """Kill the commands still running (they would outlive the sandbox otherwise). Idempotent."""
        for execution in list(self.__dict__.get("_live_executions", ())):
            execution.signal_kill()

    def _environment(self, env: Mapping[str, str] | None) -> dict[str, str] | None:
        extra = check_env(env)
        return {**os.environ, **extra} if extra else None

    @override
    async def execute_streaming(
        self,
        command: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> AsyncGenerator[StreamChunk | ExecutionResult, None]:
        timeout = check_timeout(timeout)
        argv = [self.shell, "-c", check_command(command)]
        stream = stream_process(argv, cwd=self._directory(cwd), env=self._environment(env),
                                timeout=timeout, max_output_chars=self.max_output_chars, running=self._running())
        async with aclosing(stream) as items:
            async for item in items:
                yield item

    @override
    async def execute_code_streaming(
        self,
        code: str,
        language: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> AsyncGenerator[StreamChunk | ExecutionResult, None]:
        timeout = check_timeout(timeout)
        # `exec "$0"` resolves the interpreter through PATH exactly like the shell backends do
        # (exit 127 when missing) while the name stays a separate argv entry, never shell text.
        argv = [self.shell, "-c", 'exec "$0"', check_language(language)]
        stream = stream_process(argv, cwd=self._directory(cwd), env=self._environment(env),
                                stdin=check_code(code).encode(),
                                timeout=timeout, max_output_chars=self.max_output_chars, running=self._running())
        async with aclosing(stream) as items:
            async for item in items:
                yield item

    @override
    async def read_file(self, path: str) -> bytes:
        target = self._path(path)

        def read() -> bytes:
            with open(target, "rb") as handle:
                return handle.read()

        try:
            return await asyncio.to_thread(read)
        except (FileNotFoundError, NotADirectoryError):  # NotADirectory: a file used as a directory
            raise SandboxPathNotFoundError(path) from None

    @override
    async def write_file(self, path: str, content: bytes) -> None:
        data = as_bytes(content)
        target = self._path(path)

        def write() -> None:
            parent = os.path.dirname(target)
            if parent:
                os.makedirs(parent, exist_ok=True)
            with open(target, "wb") as handle:
                handle.write(data)

        await asyncio.to_thread(write)

    @override
    async def remove_file(self, path: str) -> None:
        target = self._path(path)

        def remove() -> None:
            if os.path.isdir(target) and not os.path.islink(target):
                raise IsADirectoryError(f"is a directory: {path}")
            os.unlink(target)

        try:
            await asyncio.to_thread(remove)
        except (FileNotFoundError, NotADirectoryError):
            raise SandboxPathNotFoundError(path) from None

    @override
    async def list_files(self, path: str = ".") -> list[FileInfo]:
        target = self._path(path)
        try:
            return await asyncio.to_thread(_scan, target)
        except (FileNotFoundError, NotADirectoryError):
            raise SandboxPathNotFoundError(path) from None


def _scan(directory: str) -> list[FileInfo]:
    entries: list[FileInfo] = []
    with os.scandir(directory) as scanner:
        for entry in scanner:
            try:
                is_dir = entry.is_dir()
                size = None if is_dir else entry.stat().st_size
            except OSError:  # a dangling symlink: listed, size unknown
                is_dir, size = False, None
            entries.append(FileInfo(name=entry.name, is_dir=is_dir, size=size))
    return sorted(entries, key=lambda info: info.name)


NotASandboxLocalEnvironment = LocalEnvironment
