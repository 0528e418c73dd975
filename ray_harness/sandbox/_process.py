"""The local process engine: asyncio subprocesses supervised as process groups.

Each command starts in a new session (``start_new_session``), so it leads its
own process group and a kill reaches the whole tree. Killing only the direct
child is not enough: in ``sh -c 'cmd; sleep 60'`` the orphaned ``sleep`` keeps
the pipe's write end open and the reader would never see EOF.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing

from ray_harness.sandbox._engine import QueuedExecution, drive, signal_exit_code
from ray_harness.sandbox.types import ExecutionResult, StreamChunk, StreamType

__all__ = ("ProcessExecution", "add_group_listener", "live_process_groups", "stream_process")

_READ_SIZE = 65_536
_LIVE_GROUPS: set[int] = set()
_LISTENERS: list[Callable[[set[int]], None]] = []


def live_process_groups() -> set[int]:
    """Process groups started by this process that have not been reaped yet."""
    return set(_LIVE_GROUPS)


def add_group_listener(listener: Callable[[set[int]], None]) -> None:
    """Call ``listener(live_groups)`` whenever a process group starts or ends.

    A sandbox actor records them, so that after a crash its restarted self can kill what the dead process
    left running.
    """
    _LISTENERS.append(listener)


def _groups_changed() -> None:
    for listener in _LISTENERS:
        listener(set(_LIVE_GROUPS))


class ProcessExecution(QueuedExecution):
    """A local child process group."""

    def __init__(self, process: asyncio.subprocess.Process, stdin: bytes | None) -> None:
        super().__init__()
        self._process = process
        self._tasks = [
            asyncio.create_task(self._pump(process.stdout, "stdout")),
            asyncio.create_task(self._pump(process.stderr, "stderr")),
        ]
        if stdin is not None:
            self._tasks.append(asyncio.create_task(self._feed_stdin(stdin)))

    @classmethod
    async def spawn(
        cls, argv: Sequence[str], *, cwd: str | None, env: Mapping[str, str] | None, stdin: bytes | None = None
    ) -> ProcessExecution:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
        _LIVE_GROUPS.add(process.pid)
        _groups_changed()
        return cls(process, stdin)

    @property
    def pid(self) -> int:
        return self._process.pid

    async def _pump(self, reader: asyncio.StreamReader | None, stream: StreamType) -> None:
        try:
            while reader is not None and (chunk := await reader.read(_READ_SIZE)):
                await self.put_output(stream, chunk)
        except (OSError, ValueError):  # a pipe torn down under us counts as EOF
            pass
        await self.put_eof()

    async def _feed_stdin(self, data: bytes) -> None:
        writer = self._process.stdin
        if writer is None:
            return
        try:
            writer.write(data)
            await writer.drain()
        except (BrokenPipeError, ConnectionResetError):  # the program did not read all of it
            pass
        finally:
            writer.close()

    async def wait(self) -> int:
        code = await self._process.wait()
        self._forget()
        return signal_exit_code(code)

    def _forget(self) -> None:
        if self._process.pid in _LIVE_GROUPS:
            _LIVE_GROUPS.discard(self._process.pid)
            _groups_changed()

    def signal_kill(self) -> None:
        """SIGKILL the process group, from any thread or event loop (the stream's own loop reaps it)."""
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)
        if self._process.returncode is None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._process.wait(), 5.0)
        self._forget()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # Closes the pipes even if an escaped grandchild still holds them (no ResourceWarning later).
        transport = getattr(self._process, "_transport", None)
        if transport is not None:
            transport.close()


async def stream_process(
    argv: Sequence[str],
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float | None = None,
    max_output_chars: int | None = None,
    running: set[ProcessExecution] | None = None,
) -> AsyncGenerator[StreamChunk | ExecutionResult, None]:
    """Run ``argv`` in its own process group and stream it (see :func:`~ray_harness.sandbox._engine.drive`).

    ``running`` holds the execution while it runs (a sandbox's ``close()`` kills what is in it).
    """
    execution = await ProcessExecution.spawn(argv, cwd=cwd, env=env, stdin=stdin)
    if running is not None:
        running.add(execution)
    try:
        async with aclosing(drive(execution, timeout=timeout, max_output_chars=max_output_chars)) as items:
            async for item in items:
                yield item
    finally:
        if running is not None:
            running.discard(execution)
