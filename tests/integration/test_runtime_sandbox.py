"""RemoteSandbox: a LocalEnvironment served by its own actor, through the Sandbox API and an agent."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ray_harness.sandbox.errors import SandboxPathNotFoundError, SandboxTimeoutError
from ray_harness.sandbox.local import LocalEnvironment
from ray_harness.sandbox.types import ExecutionResult, StreamChunk
from tests.integration.agents import shell_agent

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


@pytest.fixture(scope="module")
def sandbox(ray_session: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from ray_harness.runtime import RemoteSandbox

    served = RemoteSandbox(LocalEnvironment(tmp_path_factory.mktemp("remote_sandbox")), name="local-test")
    yield served
    served.shutdown()


async def test_output_streams_as_it_is_produced(sandbox: Any) -> None:
    arrivals: list[tuple[float, Any]] = []
    started = time.monotonic()
    async for item in sandbox.execute_streaming("echo one; sleep 0.5; echo two"):
        arrivals.append((time.monotonic() - started, item))
    chunks = [item for _, item in arrivals if isinstance(item, StreamChunk)]
    result = arrivals[-1][1]
    assert isinstance(result, ExecutionResult)
    assert (result.exit_code, result.stdout) == (0, "one\ntwo\n")
    assert "".join(chunk.data for chunk in chunks) == "one\ntwo\n"
    assert arrivals[0][0] < arrivals[-1][0] - 0.3  # the first line arrived before the command finished


async def test_files_and_helpers_round_trip(sandbox: Any) -> None:
    await sandbox.write_text("notes/a.txt", "hello")
    assert await sandbox.read_text("notes/a.txt") == "hello"
    assert [info.name for info in await sandbox.list_files("notes")] == ["a.txt"]
    result = await sandbox.execute_code("print(6 * 7)", "python3")
    assert result.stdout == "42\n"
    await sandbox.remove_file("notes/a.txt")
    with pytest.raises(SandboxPathNotFoundError):
        await sandbox.read_file("notes/a.txt")


async def test_timeout_keeps_its_type(sandbox: Any) -> None:
    with pytest.raises(SandboxTimeoutError):
        await sandbox.execute("sleep 5", timeout=0.3)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        ({"command": 5}, TypeError, r"command must be a string, got int"),
        ({"cwd": 5}, TypeError, r"cwd must be a path string or None, got int"),
        ({"timeout": "abc"}, ValueError, r"timeout must be a positive number of seconds or None, got 'abc'"),
        ({"env": {"A": 5}}, ValueError, r"env\['A'\] must be a string, got int"),
        ({"code": b"x"}, TypeError, r"code must be a string, got bytes"),
    ],
)
async def test_bad_arguments_fail_as_on_a_local_sandbox(
    sandbox: Any, call: dict[str, Any], error: type[Exception], message: str
) -> None:
    # The same error as LocalEnvironment's, naming the argument (it named the actor's internal request type).
    for target in (sandbox, LocalEnvironment()):
        run = (
            target.execute_code(call["code"], "sh") if "code" in call else target.execute(**{"command": "true", **call})
        )
        with pytest.raises(error, match=message):
            await run


async def test_closing_the_stream_early_kills_the_command(sandbox: Any) -> None:
    marker = Path(sandbox.describe().split(" in ", 1)[1].split(" (")[0]) / "late-marker"
    stream = sandbox.execute_streaming("echo started; sleep 1.5; touch late-marker")
    first = await stream.__anext__()
    assert isinstance(first, StreamChunk)
    await stream.aclose()
    await asyncio.sleep(2.5)
    assert not marker.exists()


def test_an_agent_in_an_actor_uses_the_remote_sandbox(sandbox: Any) -> None:
    from ray_harness.runtime import RemoteAgent

    remote = RemoteAgent(shell_agent(sandbox), name="sandboxed")
    try:
        result = remote("run it")
        assert str(result) == "ran\n"
        tool_result = remote.messages[2]["content"][0]["toolResult"]
        assert "from-the-sandbox" in tool_result["content"][0]["text"]
    finally:
        remote.shutdown()


def test_resources_no_node_has_fail_at_once_naming_them(tmp_path: Path) -> None:
    # Ray would wait for such an actor forever with only an autoscaler warning (as for RemoteAgent, AgentPool).
    from ray_harness.runtime import RemoteSandbox

    with pytest.raises(ValueError, match=r"RemoteSandbox 'unplaceable'.*resources\['docker_host'\]=1 \(no node"):
        RemoteSandbox(LocalEnvironment(tmp_path), name="unplaceable", resources={"docker_host": 1})
