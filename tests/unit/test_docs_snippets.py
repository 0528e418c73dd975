"""The Ray-free code blocks of the docs run as a reader copies them, and print what the page says.

Convention (in the Markdown source of a page listed in ``PAGES``):

* ``<!-- run -->`` on the line before a ```` ```python ```` fence (a blank line between them is fine) marks the
  block as runnable offline without Ray. Unmarked blocks are not run: fragments, and blocks that need Ray,
  Docker, a cloud account or a package of yours.
* The marked blocks of one page run in order in one namespace, as a reader following the page runs them in
  one session; each block still states its own imports.
* ``<!-- prints -->`` before a ```` ```text ```` fence that follows a marked block (prose between them is fine,
  another fence is not) is what that block prints;
  the test compares it with the block's stdout line by line (trailing spaces ignored). Leave it out when the
  output varies (timings).

Blocks run in this process (they must not import ray: ``tests/unit`` blocks it), in a temporary working
directory, with ``RAY_HARNESS_SESSION_DIR`` pointing into it.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

# Pages whose runnable blocks are marked; every one of them must have at least one.
PAGES = [
    "getting-started.md",
    "concepts/hooks.md",
    "concepts/middleware.md",
    "concepts/interventions.md",
    "concepts/interrupts.md",
    "concepts/cancel-and-limits.md",
    "concepts/sessions.md",
    "concepts/extensions.md",
]

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_MARKER = re.compile(r"<!--\s*(run|prints)\s*-->\s*\Z")


@dataclass
class Block:
    line: int
    code: str
    prints: str | None = None


def runnable_blocks(markdown: str) -> list[Block]:
    """The ``<!-- run -->`` python blocks of a page, each with its ``<!-- prints -->`` output if any."""
    blocks: list[Block] = []
    previous_end = 0
    last_run: Block | None = None
    for fence in _FENCE.finditer(markdown):
        between = markdown[previous_end:fence.start()]
        marker = _MARKER.search(between.rstrip() + "\n")
        kind = marker.group(1) if marker else None
        line = markdown.count("\n", 0, fence.start()) + 1
        if kind == "run":
            assert fence.group(1) == "python", f"line {line}: <!-- run --> marks a {fence.group(1)!r} block"
            last_run = Block(line, fence.group(2))
            blocks.append(last_run)
        elif kind == "prints":
            assert last_run is not None, f"line {line}: <!-- prints --> must come after a <!-- run --> block"
            assert fence.group(1) == "text", f"line {line}: <!-- prints --> marks a {fence.group(1)!r} block"
            last_run.prints = fence.group(2)
            last_run = None
        else:
            last_run = None
        previous_end = fence.end()
    return blocks


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def test_markers_are_parsed() -> None:
    page = ("<!-- run -->\n\n```python\nprint('a')\n```\n\n<!-- prints -->\n```text\na\n```\n"
            "```python\nnot run\n```\n<!-- run -->\n```python\nprint('b')\n```\n")
    blocks = runnable_blocks(page)
    assert [(b.code, b.prints) for b in blocks] == [("print('a')\n", "a\n"), ("print('b')\n", None)]


@pytest.mark.parametrize("page", PAGES)
def test_page_blocks_run(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = runnable_blocks((DOCS / page).read_text())
    assert blocks, f"{page} has no <!-- run --> block"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAY_HARNESS_SESSION_DIR", str(tmp_path / "sessions"))
    namespace: dict[str, object] = {"__name__": "__main__"}
    for block in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block.code, f"{page}:{block.line}", "exec"), namespace)
        if block.prints is not None:
            assert _lines(out.getvalue()) == _lines(block.prints), f"{page}:{block.line} printed something else"
