"""One behaviour suite, run against LocalEnvironment, a shell-only PosixShellSandbox subclass, DockerSandbox and
SshSandbox (the ``sandbox`` fixture)."""

from __future__ import annotations

import asyncio
import os
import random
import time
from contextlib import aclosing

import pytest

from ray_harness.sandbox import (
    ExecutionResult,
    FileInfo,
    Sandbox,
    SandboxPathNotFoundError,
    SandboxTimeoutError,
    StreamChunk,
)

ALL_BYTES = bytes(range(256))


async def process_command_lines(sandbox: Sandbox) -> list[str]:
    """Command lines of every process visible inside the sandbox (read through the sandbox itself)."""
    result = await sandbox.execute(
        "for f in /proc/[0-9]*/cmdline; do tr '\\000' ' ' < \"$f\" 2>/dev/null; echo; done", timeout=20
    )
    return result.stdout.splitlines()


async def assert_no_process(sandbox: Sandbox, marker: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        leftovers = [line for line in await process_command_lines(sandbox) if marker in line]
        if not leftovers:
            return
        assert time.monotonic() < deadline, f"processes survived: {leftovers}"
        await asyncio.sleep(0.1)


# The timeout counts from spawn, so it must cover starting the shell: over SSH on a loaded 2-core machine
# that took more than 1.5 s (nothing printed yet when the timeout fired). The commands run ≥ 90 s.
COMMAND_TIMEOUT = 6.0


def unique_sleep() -> str:
    """A sleep duration nobody else uses, so its process can be found (and must be gone) afterwards."""
    return f"{random.randint(90, 150)}.{random.randint(100000, 999999)}"


async def test_exit_code_and_separate_streams(sandbox: Sandbox) -> None:
    result = await sandbox.execute("echo out; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert (await sandbox.execute("true")).exit_code == 0
    assert (await sandbox.execute("no-such-command-xyz")).exit_code == 127


async def test_stream_order_and_liveness(sandbox: Sandbox) -> None:
    started = time.monotonic()
    seen: list[tuple[str, str, float]] = []
    final = None
    command = "echo a; sleep 0.4; echo b >&2; sleep 0.4; echo c"
    async with aclosing(sandbox.execute_streaming(command)) as stream:
        async for item in stream:
            if isinstance(item, StreamChunk):
                assert final is None, "chunks must come before the result"
                seen.append((item.stream_type, item.data, time.monotonic() - started))
            else:
                final = item
    assert [(kind, data) for kind, data, _ in seen] == [("stdout", "a\n"), ("stderr", "b\n"), ("stdout", "c\n")]
    assert seen[0][2] < seen[2][2] - 0.5, "the first chunk must arrive while the command still runs"
    assert isinstance(final, ExecutionResult)
    assert (final.stdout, final.stderr, final.exit_code) == ("a\nc\n", "b\n", 0)


async def test_signal_exit_is_128_plus_n(sandbox: Sandbox) -> None:
    assert (await sandbox.execute("sh -c 'kill -TERM $$'")).exit_code == 143


@pytest.mark.parametrize(("signal", "code"), [("KILL", 137), ("TERM", 143), ("INT", 130)])
async def test_a_command_killing_its_own_shell_exits_128_plus_n(sandbox: Sandbox, signal: str, code: int) -> None:
    # Over SSH the killed shell has no exit status: sshd reports an exit-signal instead (paramiko drops it).
    result = await sandbox.execute(f"echo before; kill -s {signal} $$; echo never")
    assert (result.exit_code, result.stdout) == (code, "before\n")


async def test_timeout_kills_the_whole_tree(sandbox: Sandbox) -> None:
    duration = unique_sleep()
    started = time.monotonic()
    with pytest.raises(SandboxTimeoutError) as caught:
        await sandbox.execute(f"echo started; echo warn >&2; sh -c 'sleep {duration}'; sleep {duration}",
                              timeout=COMMAND_TIMEOUT)
    elapsed = time.monotonic() - started
    assert COMMAND_TIMEOUT - 0.1 < elapsed < 80  # at the timeout, not at the end of the ≥ 90 s sleeps
    assert caught.value.stdout == "started\n"
    assert caught.value.stderr == "warn\n"
    assert isinstance(caught.value, TimeoutError)
    await assert_no_process(sandbox, f"sleep {duration}")


async def test_timeout_is_wall_clock_not_idle(sandbox: Sandbox) -> None:
    started = time.monotonic()
    with pytest.raises(SandboxTimeoutError) as caught:
        await sandbox.execute("while :; do echo tick; sleep 0.1; done", timeout=COMMAND_TIMEOUT)
    assert time.monotonic() - started < 60  # the loop never ends by itself
    assert caught.value.stdout.startswith("tick\n")


async def test_closing_the_stream_kills_the_command(sandbox: Sandbox) -> None:
    duration = unique_sleep()
    async with aclosing(sandbox.execute_streaming(f"echo go; sleep {duration}; echo never")) as stream:
        first = await anext(stream)
        assert first == StreamChunk("go\n", "stdout")
    await assert_no_process(sandbox, f"sleep {duration}")


async def test_cancelling_the_consumer_kills_the_command(sandbox: Sandbox) -> None:
    duration = unique_sleep()
    started = asyncio.Event()

    async def consume() -> None:
        async with aclosing(sandbox.execute_streaming(f"echo go; sleep {duration}")) as stream:
            async for _ in stream:
                started.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 120)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await assert_no_process(sandbox, f"sleep {duration}")


async def test_close_kills_running_commands(sandbox: Sandbox) -> None:
    if type(sandbox).__name__ == "ShellOnlySandbox":
        pytest.skip("a subclass with its own execute_streaming and no close() keeps its own lifetime")
    duration = unique_sleep()
    started = asyncio.Event()

    async def run() -> ExecutionResult | None:
        async with aclosing(sandbox.execute_streaming(f"echo go; sh -c 'sleep {duration}'; echo never")) as stream:
            async for item in stream:
                started.set()
                if isinstance(item, ExecutionResult):
                    return item
        return None

    task = asyncio.create_task(run())
    await asyncio.wait_for(started.wait(), 120)
    # An attached container, a remote host and this machine outlive close(): what ran there used to go on.
    await sandbox.close()
    result = await task
    assert result is not None and result.stdout == "go\n" and result.exit_code != 0
    await assert_no_process(sandbox, f"sleep {duration}")  # the sandbox reopens on use


async def test_binary_round_trip(sandbox: Sandbox) -> None:
    await sandbox.write_file("bytes.bin", ALL_BYTES)
    assert await sandbox.read_file("bytes.bin") == ALL_BYTES
    big = os.urandom(200_000)  # several write chunks
    await sandbox.write_file("nested/dir/big.bin", big)
    assert await sandbox.read_file("nested/dir/big.bin") == big
    await sandbox.write_file("empty.bin", b"")
    assert await sandbox.read_file("empty.bin") == b""
    await sandbox.write_file("bytes.bin", b"shorter")  # replaces, never appends
    assert await sandbox.read_file("bytes.bin") == b"shorter"


async def test_text_helpers(sandbox: Sandbox) -> None:
    await sandbox.write_text("hello.txt", "héllo ✓\nline 2\n")
    assert await sandbox.read_text("hello.txt") == "héllo ✓\nline 2\n"
    assert (await sandbox.execute("cat hello.txt")).stdout == "héllo ✓\nline 2\n"
    await sandbox.write_text("latin.txt", content="é", encoding="latin-1")  # Strands' keyword names
    assert await sandbox.read_file("latin.txt") == b"\xe9"
    assert await sandbox.read_text("latin.txt", encoding="latin-1") == "é"


async def test_awkward_paths(sandbox: Sandbox) -> None:
    names = ["dir with space/it's \"quoted\" $(x) `y`.txt", "-rf", "--help", "new\nline"]
    for name in names:
        await sandbox.write_file(name, name.encode())
        assert await sandbox.read_file(name) == name.encode()
    listing = await sandbox.list_files(".")
    assert {"-rf", "--help", "new\nline", "dir with space"} <= {entry.name for entry in listing}
    assert [e.name for e in await sandbox.list_files("dir with space")] == ["it's \"quoted\" $(x) `y`.txt"]
    for name in names:
        await sandbox.remove_file(name)
    assert {entry.name for entry in await sandbox.list_files(".")} == {"dir with space"}


async def test_list_files(sandbox: Sandbox) -> None:
    await sandbox.write_file("b.txt", b"12345")
    await sandbox.write_file(".hidden", b"")
    await sandbox.write_file("a_dir/inner", b"x")
    entries = await sandbox.list_files(".")
    assert [(e.name, e.is_dir) for e in entries] == [(".hidden", False), ("a_dir", True), ("b.txt", False)]
    assert all(isinstance(e, FileInfo) for e in entries)
    sizes = {e.name: e.size for e in entries}
    assert sizes["b.txt"] in (5, None)  # shell listings may not know sizes
    assert await sandbox.list_files("a_dir") == [FileInfo("inner", False, sizes["b.txt"] and 1)]


async def test_missing_paths(sandbox: Sandbox) -> None:
    for operation in (sandbox.read_file("missing.txt"), sandbox.remove_file("missing.txt"),
                      sandbox.list_files("missing-dir")):
        with pytest.raises(SandboxPathNotFoundError) as caught:
            await operation
        assert isinstance(caught.value, FileNotFoundError)
        assert "missing" in caught.value.path
    await sandbox.write_file("plain.txt", b"x")
    with pytest.raises(SandboxPathNotFoundError):
        await sandbox.list_files("plain.txt")
    # A file used as a directory is not there, as for `cat plain.txt/` (the local backend used to drop the
    # slash: it read the file, and remove_file("plain.txt/") deleted it).
    for operation in (sandbox.read_file("plain.txt/"), sandbox.read_file("plain.txt/x"),
                      sandbox.remove_file("plain.txt/"), sandbox.remove_file("plain.txt/x")):
        with pytest.raises(SandboxPathNotFoundError):
            await operation
    assert await sandbox.read_file("plain.txt") == b"x"
    for operation in (sandbox.read_file(""), sandbox.remove_file(""), sandbox.list_files(""),
                      sandbox.write_file("", b"x")):
        with pytest.raises(ValueError, match="path must be a non-empty string"):
            await operation
    await sandbox.write_file("adir/f", b"x")
    with pytest.raises(IsADirectoryError):
        await sandbox.remove_file("adir")
    with pytest.raises(IsADirectoryError):
        await sandbox.read_file("adir")
    with pytest.raises(SandboxPathNotFoundError) as missing_cwd:
        await sandbox.execute("true", cwd="no/such/dir")
    assert missing_cwd.value.path.endswith("no/such/dir")
    # A command that itself exits 77 is not mistaken for a missing directory.
    await sandbox.execute("mkdir -p real")
    assert (await sandbox.execute("exit 77", cwd="real")).exit_code == 77


async def test_cwd_and_env(sandbox: Sandbox) -> None:
    await sandbox.execute("mkdir -p sub")
    result = await sandbox.execute('basename "$PWD"; echo "$GREETING"', cwd="sub", env={"GREETING": "hi"})
    assert result.stdout == "sub\nhi\n"


async def test_env_values_are_data_not_code(sandbox: Sandbox) -> None:
    value = "a'b\"c $(touch pwned1) `touch pwned2` ${HOME} \\n; touch pwned3"
    result = await sandbox.execute('printf "%s" "$V"', env={"V": value})
    assert result.stdout == value
    code = await sandbox.execute_code('printf "%s" "$V"', "sh", env={"V": value})
    assert code.stdout == value
    assert (await sandbox.execute("ls pwned1 pwned2 pwned3 2>/dev/null | wc -l")).stdout.strip() == "0"


@pytest.mark.parametrize("key", ["A B", "1A", "A;B", "A=B", "", "A\n"])
async def test_bad_env_keys_rejected(sandbox: Sandbox, key: str) -> None:
    with pytest.raises(ValueError, match="env key"):
        await sandbox.execute("true", env={key: "x"})


async def test_nul_bytes_in_a_command_are_refused(sandbox: Sandbox) -> None:
    # No backend can hand a NUL to a shell; each used to fail its own way (exit 1, a bare SSH error).
    with pytest.raises(ValueError, match="command must not contain NUL bytes"):
        await sandbox.execute("echo a\0b")
    assert (await sandbox.execute("echo still")).stdout == "still\n"


@pytest.mark.parametrize(("arguments", "error", "message"), [
    ({"cwd": 5}, TypeError, r"cwd must be a path string or None, got int"),
    ({"cwd": ""}, ValueError, r"cwd must be a non-empty path without NUL bytes, got ''"),
    ({"cwd": "a\0b"}, ValueError, r"cwd must be a non-empty path without NUL bytes"),
    ({"timeout": "abc"}, ValueError, r"timeout must be a positive number of seconds or None, got 'abc'"),
])
async def test_bad_arguments_are_refused_naming_the_argument(
    sandbox: Sandbox, arguments: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        await sandbox.execute("true", **arguments)  # type: ignore[arg-type]
    with pytest.raises(error, match=message):
        await sandbox.execute_code("true", "sh", **arguments)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="code must be a string, got bytes"):
        await sandbox.execute_code(b"true", "sh")  # type: ignore[arg-type]


@pytest.mark.parametrize("language", ["python3; rm -rf /", "python3\n", "sh && id", "-c", "sh -c id", "$(id)", ""])
async def test_bad_interpreter_names_rejected(sandbox: Sandbox, language: str) -> None:
    with pytest.raises(ValueError, match="language"):
        await sandbox.execute_code("echo hi", language)


async def test_execute_code(sandbox: Sandbox) -> None:
    code = "echo \"$0\" >/dev/null; echo 'quotes \" and $(not run)' ; echo err >&2; exit 4\n"
    result = await sandbox.execute_code(code, "sh")
    assert (result.exit_code, result.stdout, result.stderr) == (4, "quotes \" and $(not run)\n", "err\n")
    missing = await sandbox.execute_code("x", "no-such-interpreter")
    assert missing.exit_code == 127


async def test_execute_code_larger_than_one_argument(sandbox: Sandbox) -> None:
    padding = "# " + "x" * 100 + "\n"
    code = padding * 1000 + "echo big done\n"  # ~100 KB: staged through a file on shell backends
    result = await sandbox.execute_code(code, "sh")
    assert (result.exit_code, result.stdout) == (0, "big done\n")


async def test_output_retention_is_bounded(sandbox: Sandbox) -> None:
    sandbox.max_output_chars = 1000  # type: ignore[attr-defined]
    streamed = 0
    final = None
    async with aclosing(sandbox.execute_streaming("i=0; while [ $i -lt 2000 ]; do echo 0123456789abcdefghi; "
                                                  "i=$((i+1)); done; echo END")) as stream:
        async for item in stream:
            if isinstance(item, StreamChunk):
                streamed += len(item.data)
            else:
                final = item
    assert streamed == 2000 * 20 + 4
    assert final is not None and final.truncated
    assert len(final.stdout) < 1100
    assert final.stdout.startswith("0123456789") and final.stdout.endswith("END\n")
    assert "characters truncated" in final.stdout
