"""The ``rh-pid:<pid>`` line a process-engine script prints first, and killing through the group it names.

A kill needs that pid. A cancel, a timeout or a ``close()`` can land after the command started but before its
line was read (it is still in flight, or nobody has read it yet): the kill then waits for the line, reading it
itself when the stream's consumer is not reading, instead of only closing the stream, which leaves the command
running in the container or on the remote host.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Final

from ray_harness.sandbox._engine import RawExecution

if TYPE_CHECKING:
    from ray_harness.sandbox.posix_shell import PosixShellSandbox

__all__ = ("PID_PREFIX", "PidHeader")

logger = logging.getLogger(__name__)

PID_PREFIX: Final = b"rh-pid:"
PID_WAIT_S: Final = 30.0
"""How long a kill waits for the pid line of a command that started (it is the command's first output)."""
_POLL_S: Final = 0.05


class PidHeader(RawExecution):
    """Strips the pid line from stdout and kills through the process group it names."""

    def __init__(self, inner: RawExecution, sandbox: PosixShellSandbox) -> None:
        self._inner = inner
        self._sandbox = sandbox
        self.started_at = inner.started_at
        self.pid: int | None = None
        self._pending = b""
        self._header_done = False
        self._ended = False
        self._readers = 0
        self._killed = False
        self._killing = False

    async def next_output(self) -> tuple[str, bytes] | None:  # type: ignore[override]
        while True:
            item = await self._read()
            if item is None:
                if self._pending:
                    pending, self._pending, self._header_done = self._pending, b"", True
                    return ("stdout", pending)
                return None
            stream, data = item
            if self._header_done or stream != "stdout":
                return item
            after = self._parse_header(data)
            if after:
                return ("stdout", after)

    async def _read(self) -> tuple[str, bytes] | None:
        self._readers += 1
        try:
            item = await self._inner.next_output()
        finally:
            self._readers -= 1
        if item is None:
            self._ended = True
        return item

    def _parse_header(self, data: bytes) -> bytes:
        """Feed stdout until the first line is complete; the stdout that follows the pid line."""
        self._pending += data
        line, newline, rest = self._pending.partition(b"\n")
        if not newline and len(self._pending) < 64:
            return b""
        self._header_done = True
        self._pending = b""
        if newline and line.startswith(PID_PREFIX) and line[len(PID_PREFIX) :].isdigit():
            self.pid = int(line[len(PID_PREFIX) :])
            self._sandbox._track_group(self.pid, running=True)
            return rest
        return line + newline + rest

    async def _pid_for_kill(self) -> int | None:
        """The pid, once its line is read: by the consumer if it is reading, else here.

        A consumer reads from the start up to that line without pause, so with no reader and no line yet, the
        consumer is gone (cancelled) or never came (a cancelled start): the output read here is dropped.
        """
        try:
            async with asyncio.timeout(PID_WAIT_S):
                while not self._header_done and not self._ended:
                    if self._readers:
                        await asyncio.sleep(_POLL_S)  # the consumer's read brings the line
                    elif (item := await self._read()) is not None and item[0] == "stdout":
                        self._parse_header(item[1])
        except TimeoutError:
            logger.warning("%s: a command to kill sent no pid within %s s", self._sandbox.describe(), PID_WAIT_S)
        return self.pid

    async def wait(self) -> int:
        code = await self._inner.wait()
        self._forget()
        return code

    def _forget(self) -> None:
        if self.pid is not None:
            self._sandbox._track_group(self.pid, running=False)

    async def kill(self) -> None:
        if not self._killed:
            self._killed = self._killing = True
            try:
                pid = await self._pid_for_kill()
                if pid is not None:
                    await self._sandbox._kill_group(pid)
            finally:
                self._killing = False
        # A second kill (a close() during a cancel) must not close the stream under the first one's read of the
        # pid line. Polled, not awaited: the two may run in different event loops.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(PID_WAIT_S + 15):
                while self._killing:  # noqa: ASYNC110 - an Event belongs to one loop
                    await asyncio.sleep(_POLL_S)
        self._forget()
        await self._inner.kill()

    def abandon(self) -> None:
        self._inner.abandon()

    async def close(self) -> None:
        await self._inner.close()
