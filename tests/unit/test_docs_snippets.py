"""The Ray-free code blocks of the docs run as a reader copies them, and print what the page says.

Convention (in the Markdown source of a page listed in ``PAGES``):

* ``<!-- run -->`` on the line before a ```` ```python ```` fence (a blank line between them is fine) marks the
  block as runnable offline without Ray. ``<!-- run: ray -->``, ``<!-- run: docker -->`` (or ``run: ray, docker``)
  mark blocks that need those services: ``tests/integration/test_docs_snippets_services.py`` runs them. Unmarked
  blocks are not run: fragments, and blocks that need a cloud account, a second cluster or a package of yours.
* The marked blocks of one page run in order in one namespace, as a reader following the page runs them in
  one session; each block still states its own imports.
* ``<!-- prints -->`` before a ```` ```text ```` fence that follows a marked block (prose between them is fine,
  another fence is not) is what that block prints;
  the test compares it with the block's stdout line by line (trailing spaces ignored). Leave it out when the
  output varies (timings).

Blocks run in this process (they must not import ray: ``tests/unit`` blocks it), in a temporary working
directory, with ``RAY_HARNESS_SESSION_DIR`` pointing into it. The parsing is in ``tests/docs_snippets.py``.
"""

from __future__ import annotations

import contextlib
import io
import itertools
from pathlib import Path

import pytest

from tests.docs_snippets import DOCS, lines, pages_with_blocks, runnable_blocks

# Pages whose runnable blocks are marked; every one of them must have at least one.
PAGES = [
    "getting-started.md",
    "concepts/hooks.md",
    "concepts/plugins.md",
    "concepts/context-injection.md",
    "concepts/context-offloading.md",
    "concepts/memory.md",
    "concepts/background-tasks.md",
    "concepts/goal.md",
    "concepts/skills.md",
    "concepts/vended-tools.md",
    "concepts/middleware.md",
    "concepts/interventions.md",
    "concepts/interrupts.md",
    "concepts/human-in-the-loop.md",
    "concepts/cancel-and-limits.md",
    "concepts/model-routing.md",
    "concepts/sessions.md",
    "concepts/extensions.md",
]

def test_markers_are_parsed() -> None:
    page = ("<!-- run -->\n\n```python\nprint('a')\n```\n\n<!-- prints -->\n```text\na\n```\n"
            "```python\nnot run\n```\n<!-- run -->\n```python\nprint('b')\n```\n")
    blocks = runnable_blocks(page)
    assert [(b.code, b.prints) for b in blocks] == [("print('a')\n", "a\n"), ("print('b')\n", None)]


def test_service_markers_are_parsed() -> None:
    page = ("<!-- run: ray -->\n```python\nprint('r')\n```\n<!-- prints -->\n```text\nr\n```\n"
            "<!-- run: ray, docker -->\n```python\nprint('d')\n```\n<!-- run -->\n```python\nprint('o')\n```\n")
    blocks = runnable_blocks(page)
    assert [(b.code, b.prints, sorted(b.needs)) for b in blocks] == [
        ("print('r')\n", "r\n", ["ray"]), ("print('d')\n", None, ["docker", "ray"]), ("print('o')\n", None, [])]


def test_an_unknown_service_is_refused_with_its_line() -> None:
    with pytest.raises(AssertionError, match=r"line 2: <!-- run: gpu --> names \['gpu'\]"):
        runnable_blocks("<!-- run: gpu -->\n```python\npass\n```\n")


def test_every_page_with_offline_blocks_is_listed() -> None:
    # A page marked but not listed would silently go unchecked.
    assert sorted(pages_with_blocks(services=False)) == sorted(PAGES)


@pytest.mark.parametrize("page", PAGES)
def test_page_blocks_run(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = [block for block in runnable_blocks((DOCS / page).read_text()) if not block.needs]
    assert blocks, f"{page} has no <!-- run --> block"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAY_HARNESS_SESSION_DIR", str(tmp_path / "sessions"))
    # A page runs as the script a reader saves, in a fresh process: ScriptedModel numbers its tool-use ids across
    # the process, and a longer id changes the estimated input tokens a page prints.
    monkeypatch.setattr("ray_harness.testing.model._ids", itertools.count(1))
    namespace: dict[str, object] = {"__name__": "__main__"}
    for block in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block.code, f"{page}:{block.line}", "exec"), namespace)
        if block.prints is not None:
            assert lines(out.getvalue()) == lines(block.prints), f"{page}:{block.line} printed something else"
