"""A cancel that lands while a remote command is being started (a blocking SDK call in a worker thread).

The thread cannot be interrupted: it goes on to start the command. That command must still be killed, and the
channel's session slot freed, although nobody awaits its start any more. Checked on the remote side: the
process is gone.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from ray_harness.sandbox import DockerSandbox, PosixShellSandbox, SshSandbox
from tests.sandbox.conftest import SshServer
from tests.sandbox.test_contract import assert_no_process, unique_sleep


@pytest.fixture(params=["docker", "ssh"])
async def remote(request: pytest.FixtureRequest) -> AsyncIterator[PosixShellSandbox]:
    if request.param == "docker":
        container = request.getfixturevalue("docker_container")
        async with DockerSandbox(container) as docker_sandbox:
            yield docker_sandbox
        return
    server: SshServer = request.getfixturevalue("sshd")
    # One command channel: a slot the cancelled start kept would block every later command.
    async with server.sandbox(max_sessions=2) as ssh_sandbox:
        yield ssh_sandbox


def gate_the_start(sandbox: PosixShellSandbox, monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, ...]:
    """Hold the next command start in its worker thread: ``(entered, proceed, started)``."""
    entered, proceed, started = threading.Event(), threading.Event(), threading.Event()

    def gated(real: Callable[..., Any]) -> Callable[..., Any]:
        def start(*args: Any, **kwargs: Any) -> Any:
            if not entered.is_set():
                entered.set()
                assert proceed.wait(120)
                try:
                    value = real(*args, **kwargs)
                    started.value = value  # type: ignore[attr-defined]
                    return value
                finally:
                    started.set()
            return real(*args, **kwargs)

        return start

    if isinstance(sandbox, SshSandbox):
        monkeypatch.setattr(sandbox, "_open_channel", gated(sandbox._open_channel))
    else:
        assert isinstance(sandbox, DockerSandbox)
        api = sandbox._docker().api
        monkeypatch.setattr(api, "exec_create", gated(api.exec_create))
    return entered, proceed, started


async def until_spawned(sandbox: PosixShellSandbox, started: threading.Event) -> None:
    """Wait until the gated command's process exists (or existed), so its absence afterwards means it was killed.

    sshd has forked it once the exec request succeeded; the engine spawns a docker exec a moment after
    ``exec_start`` returns, so that is waited for.
    """
    if isinstance(sandbox, DockerSandbox):
        exec_id = started.value["Id"]  # type: ignore[attr-defined]
        for _ in range(2400):
            if (await asyncio.to_thread(sandbox._docker().api.exec_inspect, exec_id)).get("Pid"):
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"docker exec {exec_id} never started")


async def test_a_cancel_while_the_command_starts_still_kills_it(
    remote: PosixShellSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (await remote.execute("true")).exit_code == 0  # connected: the gate holds the command's own start
    entered, proceed, started = gate_the_start(remote, monkeypatch)
    duration = unique_sleep()
    task = asyncio.create_task(remote.execute(f"sleep {duration}"))
    assert await asyncio.to_thread(entered.wait, 120)
    task.cancel()  # lands now: the task awaits the thread's result
    proceed.set()  # the thread goes on and starts the command
    with pytest.raises(asyncio.CancelledError):
        await task
    monkeypatch.undo()
    assert await asyncio.to_thread(started.wait, 120)
    await until_spawned(remote, started)
    await assert_no_process(remote, f"sleep {duration}")
    assert (await remote.execute("echo next")).stdout == "next\n"


async def test_cancels_at_every_step_of_a_start_leave_nothing_running(remote: PosixShellSandbox) -> None:
    marker = f"sleep {unique_sleep()}"
    for steps in range(24):
        task = asyncio.create_task(remote.execute(f"{marker}; echo {secrets.token_hex(2)}"))
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    await assert_no_process(remote, marker)
    assert (await remote.execute("echo next")).stdout == "next\n"


async def test_a_cancel_before_the_pid_line_arrives_still_kills_the_command(
    remote: PosixShellSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command runs, but the line naming its process group has not been read when the cancel lands: the
    # kill used to close only the stream, and the command went on in the container or on the host.
    marker = f"sleep {unique_sleep()}"
    start = remote._start_script

    async def start_then_cancel(script: str) -> Any:
        execution = await start(script)
        if marker in script:
            current = asyncio.current_task()
            assert current is not None
            current.cancel()  # lands at the stream's first wait for output, before the pid line is read
        return execution

    monkeypatch.setattr(remote, "_start_script", start_then_cancel)
    for _ in range(3):
        with pytest.raises(asyncio.CancelledError):
            await remote.execute(f"{marker}; echo never")
    monkeypatch.undo()
    await assert_no_process(remote, marker)
