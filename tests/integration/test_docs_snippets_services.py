"""The docs' code blocks that need Ray or Docker run as a reader copies them, and print what the page says.

Convention (Markdown source of any page under ``docs/``; the pages are found by their markers, so no list):

* ``<!-- run: ray -->`` before a ```` ```python ```` fence marks a complete program that needs Ray,
  ``<!-- run: docker -->`` one that needs a Docker engine, ``<!-- run: ray, docker -->`` both. Blocks that
  need a real cloud model, a second cluster or a package of yours stay unmarked (not run). Ray-free blocks are
  ``<!-- run -->`` (``tests/unit/test_docs_snippets.py``; it has the rest of the convention).
* The service blocks of one page, in page order, form one script that runs as one ``python`` process in a
  temporary working directory, as a reader pasting them into a file would run it; they do not see the page's
  ``<!-- run -->`` blocks, so each states its own imports and definitions.
* A ``<!-- prints -->`` ```` ```text ```` block after one of them is compared with what that block printed,
  line by line (outer blank lines and trailing spaces ignored; Ray's forwarded worker lines, ``(... pid=N ...)``,
  are left out).

Services, as the rest of the suite gets them (``RAY_HARNESS_REQUIRE_SERVICES=1``: a missing one fails):

* Ray: the script gets ``RAY_ADDRESS`` of the test session's Ray, so its ``runtime.init()`` (or
  ``ray.init()``) joins that Ray instead of starting one, and its ``runtime.shutdown()`` only disconnects it.
  The actors it starts are its own (owned by its driver, in the default ``"ray_harness"`` namespace) and end
  with it.
* Docker: ``DOCKER_HOST`` as set, and every ``"python:3.12-slim"`` in a docker block is replaced by the
  registry-free test image (``RAY_HARNESS_TEST_IMAGE``, default ``rh-busybox:test``: busybox, a POSIX shell
  and no Python), so docker blocks use the shell only.

The how-to guides are scripts in ``examples/`` that ``tests/examples/test_examples.py`` runs; their pages show
the commands in ```` ```bash ```` blocks. Rather than run each script twice, a check here holds every
``python examples/...`` command of ``docs/how-to`` to one that test runs with the same arguments (or to a reason
it does not, in ``NOT_RUN``).
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import missing_service
from tests.docs_snippets import DOCS, ROOT, Block, lines, pages_with_blocks, runnable_blocks

PAGES = pages_with_blocks(services=True)
DOCS_IMAGE = '"python:3.12-slim"'
TEST_IMAGE = os.environ.get("RAY_HARNESS_TEST_IMAGE", "rh-busybox:test")
_END = "=== end of docs block ==="
_RAY_WORKER_LINE = re.compile(r"^\([^)]*\bpid=\d+[^)]*\) ")


def _blocks(page: str) -> list[Block]:
    return [block for block in runnable_blocks((DOCS / page).read_text()) if block.needs]


def _needs(page: str) -> set[str]:
    return set().union(*(block.needs for block in _blocks(page)))


def _require_docker() -> None:
    try:
        import docker

        client = docker.from_env()
        client.ping()
        client.images.get(TEST_IMAGE)
        client.close()
    except Exception as error:
        missing_service(f"dockerd with image {TEST_IMAGE} (run scripts/ci/docker.sh): {error}")


def _script(page: str, blocks: list[Block]) -> str:
    parts = []
    for block in blocks:
        code = block.code
        if "docker" in block.needs:
            # Any other image would be pulled from a registry, which CI does not have.
            assert "image=" not in code or DOCS_IMAGE in code, f"docs/{page}:{block.line}: use image={DOCS_IMAGE}"
            code = code.replace(DOCS_IMAGE, f'"{TEST_IMAGE}"')
        parts.append(f"# ---- docs/{page}:{block.line}\n{code}\nprint({_END!r}, flush=True)\n")
    return "\n".join(parts)


def _outputs(stdout: str) -> list[str]:
    """What each block printed, in order (Ray's forwarded worker lines left out)."""
    outputs: list[list[str]] = [[]]
    for line in stdout.splitlines():
        if line == _END:
            outputs.append([])
        elif not _RAY_WORKER_LINE.match(line):
            outputs[-1].append(line)
    return ["\n".join(output) for output in outputs]


def test_some_pages_have_service_blocks() -> None:
    # The discovery itself: an empty PAGES would make the test below vanish without a failure.
    assert {"concepts/runtime.md", "concepts/sandboxes.md"} <= set(PAGES)


@pytest.mark.parametrize("page", [pytest.param(page, marks=pytest.mark.ray if "ray" in _needs(page) else pytest.mark.services)
                                  for page in PAGES])
def test_page_blocks_run(page: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    blocks = _blocks(page)
    if "docker" in _needs(page):
        _require_docker()
    address = None
    if "ray" in _needs(page):
        # Before the environment is copied: starting Ray sets what a joining driver needs (RAY_AUTH_MODE).
        session: dict[str, Any] = request.getfixturevalue("ray_session")
        address = str(session["gcs_address"])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_HARNESS_SESSION_DIR": str(tmp_path / "sessions")}
    env.pop("RAY_ADDRESS", None)
    if address is not None:
        env["RAY_ADDRESS"] = address
    script = tmp_path / "page.py"
    script.write_text(_script(page, blocks))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, timeout=280, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, f"docs/{page}: exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    outputs = _outputs(done.stdout)
    assert len(outputs) == len(blocks) + 1, f"docs/{page}: a block ended the script early:\n{done.stdout[-3000:]}"
    for block, printed in zip(blocks, outputs, strict=False):
        if block.prints is not None:
            assert lines(printed) == lines(block.prints), f"docs/{page}:{block.line} printed something else"


# -- how-to commands -------------------------------------------------------------------------------------------

# A how-to command that tests/examples/test_examples.py does not run as written, and why that is fine.
NOT_RUN = {
    "docker_sandbox_coder.py": "its default image python:3.12-slim comes from a registry; CI runs --image",
    "human_approval_across_processes.py start --name refunds-42": "the default mode runs this step as a child",
    "human_approval_across_processes.py answer --name refunds-42 --interrupt-id <id> --approve":
        "the default mode runs this step as a child",
}
_COMMAND = re.compile(r"^python3? examples/(\S+\.py)\b([^#\n]*)", re.M)


def _howto_commands() -> set[str]:
    found = set()
    for path in sorted((DOCS / "how-to").glob("*.md")):
        for fence in re.finditer(r"^```bash\n(.*?)^```", path.read_text(), re.S | re.M):
            for script, args in _COMMAND.findall(fence.group(1)):
                found.add(" ".join([script, *args.split()]))
    return found


def _tested_invocations() -> list[list[str | None]]:
    """``_run("script", *args)`` calls of the examples test; ``None`` for an argument computed at run time."""
    tree = ast.parse((ROOT / "tests" / "examples" / "test_examples.py").read_text())
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_run":
            calls.append([arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
                          for arg in node.args])
    return calls


def _is_tested(command: str, invocations: list[list[str | None]]) -> bool:
    words = shlex.split(command)
    return any(len(call) == len(words) and all(want is None or want == word for want, word in zip(call, words, strict=True))
               for call in invocations)


def test_every_howto_command_is_one_the_examples_test_runs() -> None:
    commands = _howto_commands()
    assert len(commands) >= 10, commands  # the pattern still finds them
    invocations = _tested_invocations()
    untested = {command for command in commands if not _is_tested(command, invocations)}
    assert untested == set(NOT_RUN), f"run these in tests/examples/test_examples.py, or say why not: {untested}"
