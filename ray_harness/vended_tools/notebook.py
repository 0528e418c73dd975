"""``notebook``: named text notebooks the model keeps in ``agent.state`` (under the key ``"notebooks"``).

Strands' ``strands.vended_tools.notebook``. Modes: ``create`` (replaces a notebook), ``list``, ``read`` (all, or
``read_range`` [start, end], 1-based, negative counts from the end), ``write`` (``new_str`` alone appends,
with ``old_str`` replaces its first occurrence, with ``insert_line`` — a line number or a text to find — inserts
after that line) and ``clear``. The notebooks travel with the agent's state: sessions and snapshots keep them.
"""

# Annotations stay objects here (no ``from __future__ import annotations``): the tools' input models are
# built from them.

from typing import Annotated, Literal

from pydantic import Field

from ray_harness.tools.base import ToolContext
from ray_harness.tools.decorator import DecoratedFunctionTool, tool

__all__ = ("DEFAULT_NOTEBOOK_DESCRIPTION", "make_notebook", "notebook")

STATE_KEY = "notebooks"
"""The ``agent.state`` key holding ``{notebook name: text}``."""
DEFAULT_NOTEBOOK = "default"
DEFAULT_MAX_NOTEBOOK_SIZE_BYTES = 1_048_576
DEFAULT_NOTEBOOK_DESCRIPTION = (
    "Manages text notebooks for note-taking and documentation. Supports create, list, read, write (append, "
    "replace, or insert), and clear operations. In write mode: new_str alone appends to the end; new_str with "
    "old_str replaces matching text; new_str with insert_line inserts at a position. Write operations only "
    "succeed on notebooks that already exist; use list to check or create to initialize one (create overwrites "
    "any existing content)."
)

Mode = Literal["create", "list", "read", "write", "clear"]
ReadRange = Annotated[list[int], Field(min_length=2, max_length=2)]


def make_notebook(*, name: str = "notebook", description: str = DEFAULT_NOTEBOOK_DESCRIPTION,
                  max_notebook_size_bytes: int = DEFAULT_MAX_NOTEBOOK_SIZE_BYTES) -> DecoratedFunctionTool:
    """A notebook tool.

    Args:
        name: The tool's name.
        description: What the model reads.
        max_notebook_size_bytes: The largest notebook (UTF-8 bytes) a ``create`` or ``write`` may leave.

    Raises:
        ValueError: ``name`` is empty or ``max_notebook_size_bytes`` is not a positive int.
    """
    if not name:
        raise ValueError("name must be a non-empty string")
    if isinstance(max_notebook_size_bytes, bool) or not isinstance(max_notebook_size_bytes, int) \
            or max_notebook_size_bytes < 1:
        raise ValueError(f"max_notebook_size_bytes must be a positive integer, got {max_notebook_size_bytes!r}")

    @tool(name=name, description=description, context=True)
    async def notebook_tool(mode: Mode, tool_context: ToolContext, name: str | None = None,
                            new_str: str | None = None, old_str: str | None = None,
                            insert_line: int | str | None = None, read_range: ReadRange | None = None) -> str:
        """Manages text notebooks for note-taking and documentation.

        Args:
            mode: The operation: `create`, `list`, `read`, `write` or `clear`.
            name: The notebook to operate on (default "default").
            new_str: The text for create, or to append, insert or replace with in write mode.
            old_str: The text to replace in write mode.
            insert_line: Write mode: the line number (negative counts from the end) or a text of the line after
                which `new_str` goes.
            read_range: Read mode: the lines [start, end] to show, 1-based; negative counts from the end.
            tool_context: Injected by the agent (not an input).
        """
        state = tool_context.agent.state
        notebooks = _loaded(state.get(STATE_KEY))
        target = DEFAULT_NOTEBOOK if name is None else name
        if mode == "list":
            return _list(notebooks)
        if mode == "read":
            return _read(notebooks, target, read_range)
        if mode == "create":
            notebooks[target] = new_str or ""
            text = f"Created notebook '{target}'" + (" with specified content" if new_str else " (empty)")
        elif mode == "clear":
            _require(notebooks, target)
            notebooks[target] = ""
            text = f"Cleared notebook '{target}'"
        else:
            text = _write(notebooks, target, old_str, new_str, insert_line)
        size = len(notebooks[target].encode())
        if size > max_notebook_size_bytes:
            raise ValueError(f"Notebook '{target}' content ({size} bytes) would exceed the maximum of "
                             f"{max_notebook_size_bytes} bytes")
        state.set(STATE_KEY, notebooks)
        return text

    return notebook_tool


def _loaded(stored: object) -> dict[str, str]:
    """The notebooks in the state; a ``default`` one when there are none (stored with the first change)."""
    if stored is None or stored == {}:
        return {DEFAULT_NOTEBOOK: ""}
    if not isinstance(stored, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in stored.items()):
        raise ValueError(f"agent.state[{STATE_KEY!r}] is malformed: expected a dict of notebook names to texts")
    return stored


def _require(notebooks: dict[str, str], name: str) -> str:
    if name not in notebooks:
        raise ValueError(f"Notebook '{name}' not found")
    return notebooks[name]


def _list(notebooks: dict[str, str]) -> str:
    rows = [f"- {name}: {f'{text.count(chr(10)) + 1} lines' if text else 'Empty'}" for name, text in notebooks.items()]
    return "Available notebooks:\n" + "\n".join(rows)


def _read(notebooks: dict[str, str], name: str, read_range: list[int] | None) -> str:
    text = _require(notebooks, name)
    if read_range is None:
        return text or f"Notebook '{name}' is empty"
    lines = text.split("\n")
    start, end = (n if n >= 0 else len(lines) + n + 1 for n in read_range)
    shown = [f"{number}: {lines[number - 1]}" for number in range(max(start, 1), min(end, len(lines)) + 1)]
    if not shown:
        return f"No lines found in range {read_range}. Notebook '{name}' has {len(lines)} line(s)."
    return "\n".join(shown)


def _write(notebooks: dict[str, str], name: str, old_str: str | None, new_str: str | None,
           insert_line: int | str | None) -> str:
    if new_str is None:
        raise ValueError("write needs `new_str`: alone to append, with `old_str` to replace, or with `insert_line` "
                         "to insert")
    if old_str is not None and insert_line is not None:
        raise ValueError("write takes either `old_str` (replace) or `insert_line` (insert), not both")
    text = _require(notebooks, name)
    if old_str is not None:
        if old_str not in text:
            raise ValueError(f"String '{old_str}' not found in notebook '{name}'")
        notebooks[name] = text.replace(old_str, new_str, 1)
        return f"Replaced text in notebook '{name}'"
    if insert_line is not None:
        lines = text.split("\n")
        after = _line_index(lines, insert_line, name)
        lines.insert(after + 1, new_str)
        notebooks[name] = "\n".join(lines)
        return f"Inserted text at line {after + 2} in notebook '{name}'"
    if not new_str:
        return f"No changes made to notebook '{name}'"
    notebooks[name] = f"{text}\n{new_str}" if text and not text.endswith("\n") else text + new_str
    return f"Appended text to notebook '{name}'"


def _line_index(lines: list[str], insert_line: int | str, name: str) -> int:
    """The 0-based index of the line to insert after (-1: before the first line)."""
    if isinstance(insert_line, str):
        found = next((index for index, line in enumerate(lines) if insert_line in line), None)
        if found is None:
            raise ValueError(f"Text '{insert_line}' not found in notebook '{name}'")
        return found
    index = len(lines) + insert_line if insert_line < 0 else insert_line - 1
    if not -1 <= index <= len(lines):
        raise ValueError(f"insert_line {insert_line} is out of range for notebook '{name}' ({len(lines)} lines)")
    return index


notebook = make_notebook()
"""The default notebook tool."""
