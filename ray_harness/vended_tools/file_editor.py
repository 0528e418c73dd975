"""``file_editor``: view, create and edit text files in a sandbox.

Strands' ``strands.vended_tools.file_editor``: its name, inputs and rules, run by ray_harness's
``sandbox_file_editor`` (:class:`~ray_harness.sandbox.tools.SandboxFileEditorTool`). As in Strands, paths must be
absolute without ``..`` segments, and ``create`` refuses to overwrite an existing file. What the model reads back
is ``sandbox_file_editor``'s text (line-numbered views, short edit confirmations, a one-level directory listing),
not Strands' ``cat -n`` wording and edit snippets.
"""

# Annotations stay objects here (no ``from __future__ import annotations``): the tools' input models are
# built from them.

import posixpath
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from ray_harness.middleware.types import ToolResultEvent
from ray_harness.sandbox.base import Sandbox
from ray_harness.sandbox.errors import SandboxPathNotFoundError
from ray_harness.sandbox.tools import SandboxFileEditorTool
from ray_harness.tools.base import ToolContext
from ray_harness.tools.decorator import DecoratedFunctionTool, tool
from ray_harness.types.content import ToolResult
from ray_harness.vended_tools._sandboxed import active_sandbox

if TYPE_CHECKING:
    from ray_harness.types.content import ToolUse

__all__ = ("DEFAULT_FILE_EDITOR_DESCRIPTION", "file_editor", "make_file_editor")

DEFAULT_FILE_EDITOR_DESCRIPTION = (
    "Filesystem editor tool for viewing, creating, and editing files. Supports view (with line ranges), create, "
    "str_replace, and insert operations. Files must use absolute paths."
)

Command = Literal["view", "create", "str_replace", "insert"]
ViewRange = Annotated[list[int], Field(min_length=2, max_length=2)]
InsertLine = Annotated[int, Field(ge=0)]


def make_file_editor(*, sandbox: Sandbox | None = None, name: str = "file_editor",
                     description: str = DEFAULT_FILE_EDITOR_DESCRIPTION) -> DecoratedFunctionTool:
    """A file editor tool.

    Args:
        sandbox: The sandbox whose files it edits; ``None``: the calling agent's ``agent.sandbox``.
        name: The tool's name.
        description: What the model reads.
    """

    @tool(name=name, description=description, context=True)
    async def file_editor_tool(command: Command, path: str, tool_context: ToolContext, file_text: str | None = None,
                               view_range: ViewRange | None = None, old_str: str | None = None,
                               new_str: str | None = None, insert_line: InsertLine | None = None) -> ToolResult:
        """Filesystem editor for viewing, creating, and editing files.

        Args:
            command: The operation to perform: `view`, `create`, `str_replace`, `insert`.
            path: Absolute path to the file or directory.
            file_text: Content for new file (required for create command).
            view_range: Line range to view [start, end]. 1-indexed. End can be -1 for end of file.
            old_str: Exact string to find and replace (required for str_replace command).
            new_str: Replacement string (for str_replace and insert commands).
            insert_line: Line number after which the text is inserted (0: at the top; required for insert).
            tool_context: Injected by the agent (not an input).
        """
        active = active_sandbox(sandbox, tool_context)
        file_path = _checked_path(path)
        if command == "create" and file_text is not None and await _exists(active, file_path):
            raise ValueError(f"File already exists at: {file_path}. Cannot overwrite files using command `create`.")
        request = {"command": command, "path": file_path, "file_text": file_text, "view_range": view_range,
                   "old_str": old_str, "new_str": new_str, "insert_line": insert_line}
        return await _edit(active, request, tool_context)

    return file_editor_tool


def _checked_path(path: str) -> str:
    """``path`` without trailing slashes, if it is absolute and has no ``..`` segment."""
    stripped = re.sub(r"[/\\]+$", "", path) or "/"
    if not posixpath.isabs(stripped):
        raise ValueError(f"`path` {path} is not absolute: it should start with `/`")
    if ".." in re.split(r"[/\\]", stripped):
        raise ValueError(f"`path` {path} has a `..` segment: path traversal is not allowed")
    return stripped


async def _exists(sandbox: Sandbox, path: str) -> bool:
    parent, name = posixpath.split(path)
    try:
        return any(entry.name == name for entry in await sandbox.list_files(parent or "/"))
    except SandboxPathNotFoundError:
        return False


async def _edit(sandbox: Sandbox, request: dict[str, Any], context: ToolContext) -> ToolResult:
    """The request run by ``sandbox_file_editor`` on ``sandbox``: its result (a failure is an error result)."""
    use: ToolUse = {"toolUseId": context.tool_use["toolUseId"], "name": "sandbox_file_editor",
                    "input": {key: value for key, value in request.items() if value is not None}}
    result: ToolResult | None = None
    async for event in SandboxFileEditorTool(sandbox).stream(use, context):
        if isinstance(event, ToolResultEvent):
            result = event.tool_result
    assert result is not None  # the editor's stream always ends with its result
    return result


file_editor = make_file_editor()
"""The default file editor: edits files in the calling agent's sandbox."""
