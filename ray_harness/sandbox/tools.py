"""Tools a sandbox vends to an agent: ``sandbox_shell`` and ``sandbox_file_editor``.

Both are bound to one sandbox; ``Agent(sandbox=...)`` registers them unless
the user already has tools of those names. Failures (a non-zero exit, a
timeout, a missing file, a bad argument) come back as error tool results the
model can read, never as exceptions that end the turn.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from typing_extensions import override

from ray_harness.middleware.types import ToolResultEvent
from ray_harness.sandbox._output import RetainedOutput
from ray_harness.sandbox.errors import SandboxPathNotFoundError, SandboxTimeoutError
from ray_harness.sandbox.types import ExecutionResult
from ray_harness.tools.base import AgentTool, ToolContext, ToolStreamEvent, until_set
from ray_harness.types.validation import describe_validation_error

if TYPE_CHECKING:
    from ray_harness.sandbox.base import Sandbox, Stream
    from ray_harness.types.content import ToolResult, ToolUse
    from ray_harness.types.tools import ToolSpec

__all__ = ("DEFAULT_SHELL_TIMEOUT_S", "SandboxFileEditorTool", "SandboxShellTool", "sandbox_tools", "until_cancelled")

DEFAULT_SHELL_TIMEOUT_S: Final = 300.0
"""Timeout of a ``sandbox_shell`` call that does not ask for one: a model must not hang the agent forever."""
MAX_TOOL_OUTPUT_CHARS: Final = 30_000
"""Characters of output a tool result shows the model (start and end kept)."""


def sandbox_tools(sandbox: Sandbox) -> list[AgentTool]:
    """The ``sandbox_shell`` and ``sandbox_file_editor`` tools bound to ``sandbox``."""
    return [SandboxShellTool(sandbox), SandboxFileEditorTool(sandbox)]


def _clip(text: str) -> str:
    retained = RetainedOutput(MAX_TOOL_OUTPUT_CHARS)
    retained.feed(text.encode(), final=True)
    return retained.value()


def _result(use_id: str, text: str, *, ok: bool = True) -> ToolResultEvent:
    result: ToolResult = {"toolUseId": use_id, "status": "success" if ok else "error", "content": [{"text": text}]}
    return ToolResultEvent(result)


def _parse(model: type[BaseModel], tool_use: ToolUse, tool_name: str) -> BaseModel | str:
    try:
        return model.model_validate(tool_use.get("input") or {})
    except ValidationError as error:
        return f"Error: invalid input for tool '{tool_name}': {describe_validation_error(error, 'input')}"


class _ShellInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    command: str = Field(min_length=1)
    timeout: float | None = Field(default=None, gt=0)


class SandboxShellTool(AgentTool):
    """``sandbox_shell``: run a shell command in the sandbox, streaming its output."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    @property
    @override
    def tool_name(self) -> str:
        return "sandbox_shell"

    @property
    @override
    def tool_spec(self) -> ToolSpec:
        return {
            "name": "sandbox_shell",
            "description": (
                f"Run a POSIX shell command on {self.sandbox.describe()}. Returns stdout, stderr and the exit "
                f"code. Commands are killed after `timeout` seconds (default {DEFAULT_SHELL_TIMEOUT_S:g})."
            ),
            "inputSchema": {"json": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The shell command to run."},
                    "timeout": {"type": "number", "description": "Seconds before the command is killed."},
                },
                "required": ["command"],
            }},
        }

    @override
    async def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        use_id = tool_use["toolUseId"]
        parsed = _parse(_ShellInput, tool_use, self.tool_name)
        if isinstance(parsed, str):
            yield _result(use_id, parsed, ok=False)
            return
        assert isinstance(parsed, _ShellInput)
        timeout = parsed.timeout or DEFAULT_SHELL_TIMEOUT_S
        final: ExecutionResult | None = None
        stream = until_cancelled(self.sandbox.execute_streaming(parsed.command, timeout=timeout), context.cancel_signal)
        try:
            async with aclosing(stream) as items:
                async for item in items:
                    if isinstance(item, ExecutionResult):
                        final = item
                    else:
                        yield ToolStreamEvent(tool_use, {"stream_type": item.stream_type, "data": item.data})
        except SandboxTimeoutError as error:
            text = _format(error.stdout, error.stderr, f"command timed out after {timeout:g} seconds and was killed")
            yield _result(use_id, text, ok=False)
            return
        except (ValueError, OSError) as error:
            yield _result(use_id, f"Error: {error}", ok=False)
            return
        if final is None:
            yield _result(use_id, "Error: command cancelled", ok=False)
            return
        yield _result(use_id, _format(final.stdout, final.stderr, f"exit code: {final.exit_code}"),
                      ok=final.exit_code == 0)


async def until_cancelled(stream: Stream, cancel_signal: threading.Event) -> Stream:
    """``stream``'s items until its ``ExecutionResult``, or until ``cancel_signal`` is set: then it just ends.

    Closing this closes ``stream``, which kills its command. A cancel must reach a command that prints nothing
    too (`sleep 600`): the next item is awaited against the signal, not only checked between items.
    """
    cancelled = asyncio.ensure_future(until_set(cancel_signal))
    try:
        async with aclosing(stream) as items:
            while not cancel_signal.is_set():
                step = asyncio.ensure_future(items.__anext__())
                await asyncio.wait((step, cancelled), return_when=asyncio.FIRST_COMPLETED)
                if not step.done():
                    step.cancel()  # the command's stream stops here; leaving the `async with` kills it
                    await asyncio.gather(step, return_exceptions=True)
                    return
                try:
                    item = step.result()
                except StopAsyncIteration:
                    return
                yield item
                if isinstance(item, ExecutionResult):
                    return
    finally:
        cancelled.cancel()


def _format(stdout: str, stderr: str, status: str) -> str:
    parts = []
    if stdout:
        parts.append(_clip(stdout))
    if stderr:
        parts.append("[stderr]\n" + _clip(stderr))
    parts.append(f"[{status}]")
    return "\n".join(parts)


class _EditorInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    command: Literal["view", "create", "str_replace", "insert"]
    path: str = Field(min_length=1)
    file_text: str | None = None
    old_str: str | None = None
    new_str: str | None = None
    insert_line: int | None = Field(default=None, ge=0)
    view_range: list[int] | None = Field(default=None, min_length=2, max_length=2)


class SandboxFileEditorTool(AgentTool):
    """``sandbox_file_editor``: view, create and edit text files in the sandbox."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    @property
    @override
    def tool_name(self) -> str:
        return "sandbox_file_editor"

    @property
    @override
    def tool_spec(self) -> ToolSpec:
        return {
            "name": "sandbox_file_editor",
            "description": (
                f"View and edit files on {self.sandbox.describe()}. Commands: `view` (a file with line numbers, "
                "optionally `view_range` [start, end] with end -1 for the last line; or a directory listing), "
                "`create` (write `file_text`, replacing any file), `str_replace` (replace `old_str`, which must "
                "occur exactly once, with `new_str`), `insert` (insert `new_str` after line `insert_line`; 0 "
                "inserts at the top)."
            ),
            "inputSchema": {"json": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"]},
                    "path": {"type": "string", "description": "File or directory path."},
                    "file_text": {"type": "string", "description": "Content for `create`."},
                    "old_str": {"type": "string", "description": "Exact text to replace (`str_replace`)."},
                    "new_str": {"type": "string", "description": "Replacement or inserted text."},
                    "insert_line": {"type": "integer", "description": "Line after which to insert (`insert`)."},
                    "view_range": {"type": "array", "items": {"type": "integer"},
                                   "description": "[start, end] lines for `view` (1-based, end -1 = last)."},
                },
                "required": ["command", "path"],
            }},
        }

    @override
    async def stream(self, tool_use: ToolUse, context: ToolContext) -> AsyncGenerator[Any, None]:
        use_id = tool_use["toolUseId"]
        parsed = _parse(_EditorInput, tool_use, self.tool_name)
        if isinstance(parsed, str):
            yield _result(use_id, parsed, ok=False)
            return
        assert isinstance(parsed, _EditorInput)
        try:
            text = await self._run(parsed)
        except SandboxPathNotFoundError:
            yield _result(use_id, f"Error: {parsed.path} does not exist", ok=False)
            return
        except UnicodeDecodeError:
            yield _result(use_id, f"Error: {parsed.path} is not UTF-8 text (a binary file?); the editor handles text "
                                  "files only: use sandbox_shell to inspect it", ok=False)
            return
        except (ValueError, OSError) as error:
            yield _result(use_id, f"Error: {error}", ok=False)
            return
        yield _result(use_id, text)

    async def _run(self, request: _EditorInput) -> str:
        if request.command == "view":
            return await self._view(request.path, request.view_range)
        if request.command == "create":
            if request.file_text is None:
                raise ValueError("`create` needs `file_text`")
            await self.sandbox.write_text(request.path, request.file_text)
            return f"Created {request.path} ({len(request.file_text.encode())} bytes)"
        text = await self.sandbox.read_text(request.path)
        if request.command == "str_replace":
            return await self._replace(request, text)
        return await self._insert(request, text)

    async def _view(self, path: str, view_range: list[int] | None) -> str:
        try:
            text = await self.sandbox.read_text(path)
        except IsADirectoryError:
            entries = await self.sandbox.list_files(path)
            return "\n".join(f"{e.name}/" if e.is_dir else e.name for e in entries) or "(empty directory)"
        lines = text.splitlines()
        start, end = 1, len(lines)
        if view_range is not None:
            start, end = view_range[0], (len(lines) if view_range[1] == -1 else view_range[1])
            if not 1 <= start <= max(end, 1) or end > len(lines):
                raise ValueError(f"view_range {view_range} is outside the file's {len(lines)} lines")
        numbered = "\n".join(f"{number:6}\t{line}" for number, line in enumerate(lines[start - 1:end], start))
        return _clip(numbered) if numbered else "(empty file)"

    async def _replace(self, request: _EditorInput, text: str) -> str:
        if not request.old_str:
            raise ValueError("`str_replace` needs a non-empty `old_str`")
        count = text.count(request.old_str)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            raise ValueError(f"`old_str` {where} in {request.path}; it must occur exactly once")
        await self.sandbox.write_text(request.path, text.replace(request.old_str, request.new_str or "", 1))
        return f"Replaced 1 occurrence in {request.path}"

    async def _insert(self, request: _EditorInput, text: str) -> str:
        if request.insert_line is None or request.new_str is None:
            raise ValueError("`insert` needs `insert_line` and `new_str`")
        lines = text.splitlines(keepends=True)
        if request.insert_line > len(lines):
            raise ValueError(f"insert_line {request.insert_line} is past the file's {len(lines)} lines")
        if lines and not lines[-1].endswith("\n") and request.insert_line == len(lines):
            lines[-1] += "\n"
        addition = request.new_str if request.new_str.endswith("\n") else request.new_str + "\n"
        lines.insert(request.insert_line, addition)
        await self.sandbox.write_text(request.path, "".join(lines))
        return f"Inserted {addition.count(chr(10))} line(s) after line {request.insert_line} of {request.path}"
