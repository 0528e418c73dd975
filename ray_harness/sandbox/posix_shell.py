"""``PosixShellSandbox``: every operation built from POSIX ``sh`` scripts.

A subclass only has to implement :meth:`~Sandbox.execute_streaming` (seed
001 §2.5): code and file operations become shell scripts run through it. The
built-in backends override :meth:`PosixShellSandbox._start_script` instead,
an optional hook that starts ``/bin/sh -c <script>`` directly on the process
engine (pid header, process-group kill, wall-clock timeout); either way:

* file contents and source code travel base64-encoded inside a quoted
  here-document with a random delimiter, so no byte of them is ever shell
  syntax, and binary data round-trips;
* paths are ``shlex.quote``-d, and a leading ``-`` gets ``./`` so no command
  reads a path as an option; interpreter names and env keys are validated
  (:mod:`ray_harness.sandbox._validation`);
* environment variables are ``export``-ed with quoted values;
* on the process engine, scripts print ``rh-pid:<pid>`` first. The shell is the leader of its own
  process group (``docker exec`` and ``sshd`` sessions start one), so a
  timeout or cancel kills the whole tree with ``kill -s KILL -<pid>`` from a
  second script (a kill that lands before that line was read waits for it:
  :mod:`ray_harness.sandbox._pid_header`). A missing working directory
  exits 76/77 *before* that line, which tells it apart from a command that
  exits 76/77 itself.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import posixpath
import secrets
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from contextvars import ContextVar
from dataclasses import replace
from typing import Any, ClassVar, Final, Self

from typing_extensions import override

from ray_harness.sandbox._config import CommonSettings, validated
from ray_harness.sandbox._engine import RawExecution, check_timeout, drive
from ray_harness.sandbox._output import DEFAULT_MAX_OUTPUT_CHARS
from ray_harness.sandbox._pid_header import PidHeader
from ray_harness.sandbox._validation import (
    check_code,
    check_command,
    check_cwd,
    check_language,
    export_lines,
    safe_path,
)
from ray_harness.sandbox.base import Sandbox, as_bytes
from ray_harness.sandbox.errors import SandboxPathNotFoundError
from ray_harness.sandbox.types import ExecutionResult, FileInfo, StreamChunk

__all__ = ("SCRIPT_INPUT", "PosixShellSandbox")

logger = logging.getLogger(__name__)

_EXIT_MISSING: Final = 77
_EXIT_MISSING_CWD: Final = 76
_EXIT_IS_DIR: Final = 78
_WRITE_CHUNK: Final = 64 * 1024
"""Raw bytes per write script: base64 of it stays well under Linux's 128 KiB limit for one argv string."""
_INLINE_CODE_LIMIT: Final = 64 * 1024

SCRIPT_INPUT: ContextVar[bytes | None] = ContextVar("ray_harness_script_input", default=None)
"""Bytes the next ``_start_script`` of this context sends to its script's stdin (``write_file`` of a backend with
``stdin_writes``); the kill script never gets them."""


def _heredoc(data: bytes) -> tuple[str, str]:
    """``(delimiter, body)``: base64 lines; the delimiter contains ``_``, which base64 never does."""
    delimiter = f"RH_EOF_{secrets.token_hex(8)}"
    return delimiter, base64.encodebytes(data).decode("ascii")


class PosixShellSandbox(Sandbox):
    """A sandbox reached through a POSIX shell.

    Subclasses implement :meth:`execute_streaming` (which must honour the
    ``Sandbox`` contract: ``cwd``, ``timeout``, killing on close); code and
    file operations then run as scripts through it, so relative paths resolve
    wherever its commands start. Built-in backends override the optional
    :meth:`_start_script` instead and get ``execute_streaming`` from the
    process engine.

    Args:
        working_dir: Directory commands start in and relative paths resolve
            against (the target's default if ``None``). Applied by the process
            engine; a subclass's own ``execute_streaming`` decides for itself.
        max_output_chars: Characters of stdout/stderr an ``ExecutionResult``
            retains per stream (``None``: unlimited); chunks always stream in full.
    """

    stdin_writes: ClassVar[bool] = False
    """Whether ``_start_script`` sends :data:`SCRIPT_INPUT` to the script's stdin: ``write_file`` is then one command."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        """Refuse a subclass that implements neither ``execute_streaming`` nor the process-engine hook.

        Raises:
            TypeError: The subclass has no way to run commands.
        """
        if not _has_engine(cls) and cls.execute_streaming is PosixShellSandbox.execute_streaming:
            raise TypeError(f"Can't instantiate {cls.__name__}: a PosixShellSandbox subclass must implement "
                            "execute_streaming (or the process-engine hook _start_script)")
        return super().__new__(cls)

    def __init__(self, *, working_dir: str | None = None,
                 max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS) -> None:
        # Checked here, naming the argument: a bad value would otherwise surface at the first command.
        validated(CommonSettings, type(self).__name__, working_dir=working_dir, max_output_chars=max_output_chars)
        self.working_dir = working_dir
        self.max_output_chars = max_output_chars

    async def _start_script(self, script: str) -> RawExecution:
        """Optional hook: start ``/bin/sh -c script`` in the target as the leader of a new process group.

        Overriding it puts every operation on the process engine; without it, operations run through
        the subclass's ``execute_streaming``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not start scripts on the process engine")

    # -- execution ----------------------------------------------------------------------------------

    @override
    async def execute_streaming(
        self,
        command: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> AsyncGenerator[StreamChunk | ExecutionResult, None]:
        if not _has_engine(type(self)):
            raise NotImplementedError(f"{type(self).__name__} must implement execute_streaming")
        async with aclosing(self._run(check_command(command), timeout=timeout, cwd=cwd, env=env,
                                      limit=self.max_output_chars)) as items:
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
        interpreter = check_language(language)
        source = check_code(code).encode()
        if len(source) <= _INLINE_CODE_LIMIT:
            delimiter, body = _heredoc(source)
            script = f"base64 -d << '{delimiter}' | {interpreter}\n{body}{delimiter}\n"
        else:  # too big for one argv string: stage it as a file first
            staged = f"/tmp/.rh-code-{secrets.token_hex(8)}"
            await self.write_file(staged, source)
            script = f"{interpreter} < {staged}; rh_rc=$?; rm -f {staged}; exit $rh_rc\n"
        async with aclosing(self._shell(script, timeout=timeout, cwd=cwd, env=env,
                                        limit=self.max_output_chars)) as items:
            async for item in items:
                yield item

    def _shell(
        self, body: str, *, timeout: float | None, cwd: str | None, env: Mapping[str, str] | None,
        limit: int | None,
    ) -> AsyncGenerator[StreamChunk | ExecutionResult, None]:
        """Run a script on the process engine when the backend has one, else through ``execute_streaming``."""
        if _has_engine(type(self)):
            return self._run(body, timeout=timeout, cwd=cwd, env=env, limit=limit)
        # Exported in the script (not passed as env) so every command of a pipeline sees the variables.
        return self.execute_streaming(export_lines(env or {}) + body, timeout=timeout, cwd=cwd)

    async def _run(
        self, body: str, *, timeout: float | None, cwd: str | None, env: Mapping[str, str] | None,
        limit: int | None,
    ) -> AsyncGenerator[StreamChunk | ExecutionResult, None]:
        timeout = check_timeout(timeout)
        cwd = check_cwd(cwd)
        # A relative cwd is relative to working_dir. Each cd has its own exit code, and both run before
        # the pid line, so a command exiting 76/77 itself is never mistaken for a missing directory.
        missing = {_EXIT_MISSING: self.working_dir, _EXIT_MISSING_CWD: cwd}
        script = ""
        for code, directory in missing.items():
            if directory is not None:
                script += f"cd {safe_path(directory)} >/dev/null 2>&1 || exit {code}\n"
        script += "printf 'rh-pid:%s\\n' \"$$\"\n" + export_lines(env or {}) + body
        execution = PidHeader(await self._start_script(script), self)
        running: set[PidHeader] = self.__dict__.setdefault("_live_executions", set())
        running.add(execution)
        try:
            async with aclosing(drive(execution, timeout=timeout, max_output_chars=limit)) as items:
                async for item in items:
                    if isinstance(item, ExecutionResult) and execution.pid is None:
                        directory = missing.get(item.exit_code)
                        if directory is not None:
                            raise SandboxPathNotFoundError(directory)
                    yield item
        finally:
            running.discard(execution)

    async def _kill_started(self, raw: RawExecution) -> None:
        """Kill a script whose start was cancelled (see :func:`~ray_harness.sandbox._engine.start_in_thread`)."""
        execution = PidHeader(raw, self)
        try:
            await execution.kill()
        finally:
            await execution.close()

    async def _kill_running(self) -> None:
        """Kill every command still running; backends call it first thing in ``close()``.

        An attached container or a remote host outlives the sandbox's connection to it: without this, what a
        command started there would go on after ``close()``, with nobody left to stop it.
        """
        running = list(self.__dict__.get("_live_executions", ()))
        await asyncio.gather(*(execution.kill() for execution in running), return_exceptions=True)

    def _track_group(self, pid: int, *, running: bool) -> None:
        groups: set[int] = self.__dict__.setdefault("_running_groups", set())
        changed = (pid not in groups) if running else (pid in groups)
        if running:
            groups.add(pid)
        else:
            groups.discard(pid)
        if changed:
            self._recovery_changed()

    @override
    def recovery_state(self) -> dict[str, Any]:
        return {"groups": sorted(self.__dict__.get("_running_groups", ()))}

    @override
    async def recover(self, state: dict[str, Any]) -> None:
        for pid in state.get("groups", []):
            if isinstance(pid, int):
                await self._kill_group(pid)

    async def _kill_group(self, pid: int) -> None:
        """Kill the process group ``pid`` leads. dash needs ``--``; busybox ash rejects it."""
        script = f"kill -s KILL -- -{pid} 2>/dev/null || kill -s KILL -{pid} 2>/dev/null; exit 0\n"
        token = SCRIPT_INPUT.set(None)  # a write_file being killed: its bytes are not this script's input
        try:
            execution = await self._start_script(script)
            async with aclosing(drive(execution, timeout=10.0, max_output_chars=4096)) as items:
                async for _ in items:
                    pass
        except Exception:  # the target may be gone already; the stream is being torn down anyway
            logger.debug("killing sandbox process group %s failed", pid, exc_info=True)
        finally:
            SCRIPT_INPUT.reset(token)

    async def _script(self, body: str) -> ExecutionResult:
        """Run an internal script with unbounded output (file contents must arrive whole).

        stdout is rebuilt from the streamed chunks, which always stream in full, so a subclass's
        ``execute_streaming`` that caps what its result retains cannot truncate a file read.
        """
        streamed: list[str] = []
        async with aclosing(self._shell(body, timeout=None, cwd=None, env=None, limit=None)) as items:
            async for item in items:
                if isinstance(item, StreamChunk):
                    if item.stream_type == "stdout":
                        streamed.append(item.data)
                elif isinstance(item, ExecutionResult):
                    return replace(item, stdout="".join(streamed)) if streamed else item
        raise RuntimeError("sandbox stream ended without an ExecutionResult")

    # -- files ----------------------------------------------------------------------------------------

    @override
    async def read_file(self, path: str) -> bytes:
        quoted = safe_path(path)
        result = await self._script(
            f"[ -e {quoted} ] || exit {_EXIT_MISSING}\n[ -d {quoted} ] && exit {_EXIT_IS_DIR}\nbase64 < {quoted}\n"
        )
        _check_file_result(result, "read_file", path)
        return base64.b64decode(result.stdout)

    @override
    async def write_file(self, path: str, content: bytes) -> None:
        data = as_bytes(content)
        quoted = safe_path(path)
        parent = posixpath.dirname(path)
        prefix = f"mkdir -p {safe_path(parent)} || exit 1\n" if parent and parent != "/" else ""
        prefix += f"[ -d {quoted} ] && exit {_EXIT_IS_DIR}\n"
        if self.stdin_writes:
            # One command reading the bytes from its stdin: the chunks below cost a round trip per 64 KiB
            # (a 5 MB write took 20 s over SSH, 6-10 s through docker exec).
            token = SCRIPT_INPUT.set(data)
            try:
                result = await self._script(f"{prefix}cat > {quoted}\n")
            finally:
                SCRIPT_INPUT.reset(token)
            _check_file_result(result, "write_file", path)
            return
        offset = 0
        while True:
            delimiter, body = _heredoc(data[offset:offset + _WRITE_CHUNK])
            redirect = ">" if offset == 0 else ">>"
            result = await self._script(f"{prefix}base64 -d {redirect} {quoted} << '{delimiter}'\n{body}{delimiter}\n")
            _check_file_result(result, "write_file", path)
            offset += _WRITE_CHUNK
            if offset >= len(data):
                return

    @override
    async def remove_file(self, path: str) -> None:
        quoted = safe_path(path)
        result = await self._script(
            f"[ -e {quoted} ] || [ -L {quoted} ] || exit {_EXIT_MISSING}\n"
            f"[ -d {quoted} ] && [ ! -L {quoted} ] && exit {_EXIT_IS_DIR}\n"
            f"rm -f {quoted}\n"
        )
        _check_file_result(result, "remove_file", path)

    @override
    async def list_files(self, path: str = ".") -> list[FileInfo]:
        quoted = safe_path(path)
        # NUL-separated "<d|f><name>" records: any name (spaces, quotes, newlines) survives intact.
        result = await self._script(
            f"[ -d {quoted} ] || exit {_EXIT_MISSING}\n"
            f"cd {quoted} || exit 1\n"
            "for f in .* *; do\n"
            "  case \"$f\" in .|..) continue ;; esac\n"
            "  [ -e \"$f\" ] || [ -L \"$f\" ] || continue\n"
            "  if [ -d \"$f\" ]; then printf 'd%s\\0' \"$f\"; else printf 'f%s\\0' \"$f\"; fi\n"
            "done\n"
        )
        _check_file_result(result, "list_files", path)
        entries = {record[1:]: record[0] == "d" for record in result.stdout.split("\0") if record}
        return [FileInfo(name=name, is_dir=is_dir) for name, is_dir in sorted(entries.items())]


def _has_engine(cls: type[PosixShellSandbox]) -> bool:
    return cls._start_script is not PosixShellSandbox._start_script


def _check_file_result(result: ExecutionResult, operation: str, path: str) -> None:
    if result.exit_code == 0:
        return
    if result.exit_code == _EXIT_MISSING:
        raise SandboxPathNotFoundError(path)
    if result.exit_code == _EXIT_IS_DIR:
        raise IsADirectoryError(f"is a directory: {path}")
    detail = result.stderr.strip() or result.stdout.strip()[:500]
    raise OSError(f"{operation}({path!r}) failed with exit code {result.exit_code}: {detail}")
