"""A ``PosixShellSandbox`` subclass that implements only ``execute_streaming`` gets the rest.

The contract suite runs the same subclass shape (``ShellOnlySandbox`` in conftest); this file pins that every
operation really goes through the subclass's one method, and what a subclass implementing nothing gets.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import Any

import pytest

from ray_harness.sandbox import ExecutionResult, FileInfo, PosixShellSandbox, SandboxPathNotFoundError, StreamChunk


class BareShell(PosixShellSandbox):
    """``/bin/sh -c`` through asyncio, in one directory; records every command it was given."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory
        self.commands: list[str] = []

    async def execute_streaming(self, command: str, *, timeout: float | None = None, cwd: str | None = None,
                                env: Mapping[str, str] | None = None) -> AsyncGenerator[Any, None]:
        self.commands.append(command)
        process = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", command, cwd=self.directory / (cwd or "."), env=dict(env) if env else None,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
        stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
        if stdout:
            yield StreamChunk(stdout, "stdout")
        if stderr:
            yield StreamChunk(stderr, "stderr")
        yield ExecutionResult(exit_code=process.returncode or 0, stdout=stdout, stderr=stderr)


async def test_every_operation_is_built_from_execute_streaming(tmp_path: Path) -> None:
    sandbox = BareShell(tmp_path)
    await sandbox.write_file("dir/data.bin", bytes(range(256)))
    assert (tmp_path / "dir" / "data.bin").read_bytes() == bytes(range(256))
    assert await sandbox.read_file("dir/data.bin") == bytes(range(256))
    assert await sandbox.list_files("dir") == [FileInfo("data.bin", False)]
    result = await sandbox.execute_code("import os; print(os.environ['X'] * 2)", "python3", env={"X": "ab"})
    assert (result.exit_code, result.stdout) == (0, "abab\n")
    await sandbox.remove_file("dir/data.bin")
    assert not (tmp_path / "dir" / "data.bin").exists()
    with pytest.raises(SandboxPathNotFoundError):
        await sandbox.read_file("dir/data.bin")
    assert len(sandbox.commands) == 6  # write, read, list, code, remove, failed read: one script each
    assert sandbox.recovery_state() == {"groups": []}


async def test_reads_are_whole_even_when_the_subclass_caps_its_result(tmp_path: Path) -> None:
    class Capped(BareShell):
        async def execute_streaming(self, command: str, **kwargs: Any) -> AsyncGenerator[Any, None]:
            async for item in super().execute_streaming(command, **kwargs):
                yield ExecutionResult(item.exit_code, item.stdout[:10], item.stderr) if isinstance(
                    item, ExecutionResult) else item

    data = bytes(range(256)) * 100
    (tmp_path / "big.bin").write_bytes(data)
    assert await Capped(tmp_path).read_file("big.bin") == data


def test_a_subclass_implementing_neither_primitive_is_refused() -> None:
    class Nothing(PosixShellSandbox):
        pass

    with pytest.raises(TypeError, match="execute_streaming"):
        Nothing()
