"""The local process engine and LocalEnvironment specifics (real subprocesses)."""

from __future__ import annotations

import os
import resource
import time
from contextlib import aclosing
from pathlib import Path

import pytest

from ray_harness.sandbox import (
    ExecutionResult,
    LocalEnvironment,
    NotASandboxLocalEnvironment,
    SandboxPathNotFoundError,
    SandboxTimeoutError,
    StreamChunk,
)
from ray_harness.sandbox._output import RetainedOutput
from ray_harness.sandbox._process import stream_process


def local_pids_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                found.append(int(entry))
    return found


def test_alias_names_the_danger() -> None:
    assert NotASandboxLocalEnvironment is LocalEnvironment
    assert "no isolation" in LocalEnvironment().describe()


async def test_sh_c_cmd_then_sleep_ends_at_the_timeout() -> None:
    marker = "sleep 161.424242"
    started = time.monotonic()
    with pytest.raises(SandboxTimeoutError) as caught:
        await LocalEnvironment().execute(f"echo hi; sh -c '{marker}'; {marker}", timeout=1)
    assert time.monotonic() - started < 60  # at the timeout, not after the 161 s sleeps
    assert caught.value.stdout == "hi\n"
    assert caught.value.seconds == 1
    assert local_pids_with(marker) == []


async def test_sigkill_maps_to_137() -> None:
    result = await LocalEnvironment().execute("echo before; kill -9 $$")
    assert (result.exit_code, result.stdout) == (137, "before\n")


async def test_one_gigabyte_of_output_keeps_memory_bounded() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    result = await LocalEnvironment(max_output_chars=100_000).execute(
        "head -c 1000000000 /dev/zero | tr '\\0' a; echo; echo tail-marker"
    )
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.exit_code == 0
    assert result.truncated
    assert len(result.stdout) < 100_100
    assert result.stdout.startswith("aaaa") and result.stdout.endswith("tail-marker\n")
    assert "999900013 characters truncated" in result.stdout  # 1e9 + 13 chars printed, 1e5 kept
    assert grown_mib < 300, f"memory grew by {grown_mib:.0f} MiB"


async def test_unlimited_retention_with_none() -> None:
    result = await LocalEnvironment(max_output_chars=None).execute("head -c 300000 /dev/zero | tr '\\0' b")
    assert result.stdout == "b" * 300_000 and not result.truncated


async def test_multibyte_characters_split_across_reads() -> None:
    # 70000 three-byte characters cross the 64 KiB read boundary mid-character.
    result = await LocalEnvironment().execute_code("import sys; sys.stdout.write('✓' * 70000)", "python3")
    assert result.stdout == "✓" * 70000


async def test_invalid_utf8_is_replaced_not_fatal() -> None:
    result = await LocalEnvironment().execute("printf 'a\\377b'")
    assert result.stdout == "a\ufffdb"


async def test_code_runs_with_stdin_program_and_env(tmp_path: Path) -> None:
    local = LocalEnvironment(working_dir=tmp_path)
    result = await local.execute_code("import os; print(os.getcwd(), os.environ['X'])", "python3", env={"X": "1"})
    assert result.stdout == f"{tmp_path} 1\n"


@pytest.mark.parametrize("timeout", [0, -1, "5", True])
async def test_timeout_must_be_positive(timeout: object) -> None:
    with pytest.raises(ValueError, match="timeout"):
        await LocalEnvironment().execute("true", timeout=timeout)  # type: ignore[arg-type]


async def test_missing_working_dir(tmp_path: Path) -> None:
    with pytest.raises(SandboxPathNotFoundError):
        await LocalEnvironment(working_dir=tmp_path / "nope").execute("true")


async def test_local_listing_has_real_sizes(tmp_path: Path) -> None:
    local = LocalEnvironment(working_dir=tmp_path)
    await local.write_file("five.txt", b"12345")
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    entries = {e.name: e for e in await local.list_files(".")}
    assert entries["five.txt"].size == 5
    assert entries["dangling"].size is None and not entries["dangling"].is_dir


async def test_write_file_rejects_text() -> None:
    with pytest.raises(TypeError, match="write_text"):
        await LocalEnvironment().write_file("x", "text")  # type: ignore[arg-type]


async def test_stream_process_feeds_stdin_and_streams() -> None:
    items = []
    async with aclosing(stream_process(["cat"], stdin=b"x" * 200_000, max_output_chars=10)) as stream:
        async for item in stream:
            items.append(item)
    assert sum(len(i.data) for i in items if isinstance(i, StreamChunk)) == 200_000
    final = items[-1]
    assert isinstance(final, ExecutionResult) and final.truncated and len(final.stdout) < 100


def test_retained_output_keeps_head_and_tail() -> None:
    retained = RetainedOutput(10)
    for piece in ("abc", "defgh", "ijklmnop", "qrstuvwxyz"):
        retained.feed(piece.encode())
    assert retained.value() == "abcde\n[... 16 characters truncated ...]\nvwxyz"
    assert retained.truncated
    whole = RetainedOutput(100)
    whole.feed(b"short")
    assert (whole.value(), whole.truncated) == ("short", False)
