"""Find the runnable code blocks of a docs page (Ray-free: the unit and the integration tests share it).

The marker convention is written down in ``tests/unit/test_docs_snippets.py`` (blocks without Ray or Docker)
and ``tests/integration/test_docs_snippets_services.py`` (blocks that need them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# What a ``<!-- run: ... -->`` marker may ask for; a plain ``<!-- run -->`` asks for nothing.
SERVICES = frozenset({"ray", "docker"})

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_MARKER = re.compile(r"<!--\s*(run|prints)\s*(?::\s*([^>]*?))?\s*-->\s*\Z")


@dataclass
class Block:
    line: int
    code: str
    prints: str | None = None
    needs: frozenset[str] = field(default_factory=frozenset)
    """The services of its ``<!-- run: ... -->`` marker (empty: runs offline, without Ray)."""


def _needs(kind: str, services: str | None, line: int) -> frozenset[str]:
    if services is None:
        return frozenset()
    assert kind == "run", f"line {line}: <!-- prints --> takes no services"
    needs = frozenset(name.strip() for name in services.split(",") if name.strip())
    unknown = needs - SERVICES
    assert needs and not unknown, (f"line {line}: <!-- run: {services} --> names {sorted(unknown) or 'nothing'}; "
                                   f"known services: {sorted(SERVICES)}")
    return needs


def runnable_blocks(markdown: str) -> list[Block]:
    """Every marked python block of a page, in order, each with its ``<!-- prints -->`` output if any."""
    blocks: list[Block] = []
    previous_end = 0
    last_run: Block | None = None
    for fence in _FENCE.finditer(markdown):
        between = markdown[previous_end:fence.start()]
        marker = _MARKER.search(between.rstrip() + "\n")
        kind = marker.group(1) if marker else None
        line = markdown.count("\n", 0, fence.start()) + 1
        if marker is not None and kind == "run":
            assert fence.group(1) == "python", f"line {line}: <!-- run --> marks a {fence.group(1)!r} block"
            last_run = Block(line, fence.group(2), needs=_needs("run", marker.group(2), line))
            blocks.append(last_run)
        elif marker is not None and kind == "prints":
            _needs("prints", marker.group(2), line)
            assert last_run is not None, f"line {line}: <!-- prints --> must come after a <!-- run --> block"
            assert fence.group(1) == "text", f"line {line}: <!-- prints --> marks a {fence.group(1)!r} block"
            last_run.prints = fence.group(2)
            last_run = None
        else:
            last_run = None
        previous_end = fence.end()
    return blocks


def pages_with_blocks(*, services: bool) -> list[str]:
    """The docs pages (paths under ``docs/``) with at least one marked block that needs services (or none)."""
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        blocks = runnable_blocks(path.read_text())
        if any(bool(block.needs) == services for block in blocks):
            found.append(path.relative_to(DOCS).as_posix())
    return found


def lines(text: str) -> list[str]:
    """Output lines as compared with a ``<!-- prints -->`` block: outer blank lines and trailing spaces ignored."""
    return [line.rstrip() for line in text.strip("\n").splitlines()]
