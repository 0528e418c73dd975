"""Sandboxes follow agents on Ray: one sandbox object → one container / one SSH connection on its host; no leaks.

Containers are counted through the docker SDK by the ``ray_harness.sandbox=<sandbox_id>`` label of the
sandbox each test built, never by image: other tests and sessions on this machine create containers too.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.sandbox import DockerSandbox, Sandbox
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.types.exceptions import RemoteActorError
from tests.sandbox.conftest import TEST_IMAGE, SshServer, docker_client, sshd  # noqa: F401 - the services' fixtures, used below

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


@pytest.fixture
def docker_engine(request: pytest.FixtureRequest) -> Any:
    """The docker SDK client of the engine the sandboxes use (tests/sandbox/conftest.py)."""
    return request.getfixturevalue("docker_client")


@pytest.fixture
def ssh_server(request: pytest.FixtureRequest) -> SshServer:
    """This session's private sshd (tests/sandbox/conftest.py)."""
    server: SshServer = request.getfixturevalue("sshd")
    return server


def _shell_agent(sandbox: Sandbox, command: str, name: str, *, loop: bool = False) -> Agent:
    model = ScriptedModel(tool_call("sandbox_shell", {"command": command}), text("done"), loop=loop)
    return Agent(model, name=name, sandbox=sandbox, retry_strategy=None)


def _tool_outputs(messages: list[Any]) -> list[list[str]]:
    """The stdout lines of each ``sandbox_shell`` result (without the ``[exit code: 0]`` line)."""
    texts = [block["toolResult"]["content"][0]["text"] for message in messages for block in message["content"]
             if "toolResult" in block]
    return [[line for line in output.splitlines() if line and not line.startswith("[")] for output in texts]


def _containers(client: Any, sandbox: Sandbox) -> list[Any]:
    # ignore_removed: the SDK lists ids, then inspects each; one removed in between is gone, not an error
    return list(client.containers.list(all=True, filters={"label": f"ray_harness.sandbox={sandbox.sandbox_id}"},
                                       ignore_removed=True))


def _keys_on_different_hosts(prefix: str, size: int) -> tuple[str, str]:
    """Two agent keys whose hashes alone would put them on different hosts (affinity must override that)."""
    first = f"{prefix}-a"
    for index in range(100):
        second = f"{prefix}-b{index}"
        if zlib.crc32(first.encode()) % size != zlib.crc32(second.encode()) % size:
            return first, second
    raise AssertionError("no such keys")


@pytest.fixture
def own_pool(ray_session: Any) -> Iterator[Any]:
    from ray_harness.runtime import AgentPool

    pool = AgentPool(size=2, namespace=f"rh_sandbox_{uuid.uuid4().hex[:6]}")
    try:
        yield pool
    finally:
        pool.shutdown()


async def test_resident_agents_built_with_one_docker_sandbox_share_one_container(own_pool: Any,
                                                                                 docker_engine: Any) -> None:
    sandbox = DockerSandbox(image=TEST_IMAGE)
    tag = uuid.uuid4().hex[:8]
    writer = _shell_agent(sandbox, f"echo from-the-writer > /tmp/{tag}; hostname", "writer", loop=True)
    reader = _shell_agent(sandbox, f"cat /tmp/{tag}; hostname", "reader")
    writer_key, reader_key = _keys_on_different_hosts(tag, own_pool.size)
    await own_pool.run(writer, "write", agent_key=writer_key)
    await own_pool.run(reader, "read", agent_key=reader_key)
    await own_pool.run(writer, "again", agent_key=writer_key)  # a revisit of the resident agent
    (container,) = _containers(docker_engine, sandbox)  # one container for every agent and turn
    written = _tool_outputs(await own_pool.resident_messages(writer_key))
    read = _tool_outputs(await own_pool.resident_messages(reader_key))
    assert len(written) == 2 and read[0][0] == "from-the-writer"  # B reads the file A wrote
    hostnames = {lines[-1] for lines in [*written, *read]}
    assert hostnames == {container.id[:12]}  # the revisit ran in the same container
    assert await own_pool.release(writer_key)
    assert len(_containers(docker_engine, sandbox)) == 1  # the reader still holds it
    assert await own_pool.release(reader_key)
    assert _containers(docker_engine, sandbox) == []  # the last holder's release removed it


async def test_ephemeral_runs_and_pool_shutdown_leave_no_container(docker_engine: Any, ray_session: Any) -> None:
    from ray_harness.runtime import AgentPool

    sandbox = DockerSandbox(image=TEST_IMAGE)
    pool = AgentPool(size=2, namespace=f"rh_sandbox_{uuid.uuid4().hex[:6]}")
    try:
        agent = _shell_agent(sandbox, "hostname", "ephemeral")
        await asyncio.gather(*(pool.run(agent, "go") for _ in range(3)))
        assert _containers(docker_engine, sandbox) == []  # held for the runs only
        await pool.run(agent, "stay", agent_key="resident")
        assert len(_containers(docker_engine, sandbox)) == 1
    finally:
        pool.shutdown()
    assert _containers(docker_engine, sandbox) == []  # shutdown closed the resident agent's sandbox


async def _host_pid(pool: Any, index: int = 0) -> int:
    return int((await pool.stats())[index]["pid"])


async def _restarted(pool: Any, old_pid: int) -> None:
    deadline = time.monotonic() + 120
    while True:  # the same host, restarted by Ray in a new process (unavailable meanwhile)
        try:
            if await _host_pid(pool) != old_pid:
                return
        except Exception:
            pass
        assert time.monotonic() < deadline, "the host was not restarted"
        await asyncio.sleep(0.2)


def _has_file(container: Any, path: str) -> bool:
    """Whether ``path`` exists in ``container``; False while it is created but not yet running (exec: 409)."""
    import docker

    try:
        return bool(container.exec_run(["test", "-e", path]).exit_code == 0)
    except docker.errors.APIError:
        return False


async def _wait_for(predicate: Any, what: str, running: asyncio.Task[Any] | None = None) -> None:
    deadline = time.monotonic() + 120
    while not predicate():
        if running is not None and running.done():  # say why, instead of waiting out the deadline
            raise AssertionError(f"the run ended before {what}: {running.exception()!r}")
        assert time.monotonic() < deadline, f"not reached: {what}"
        await asyncio.sleep(0.1)


async def test_a_host_killed_mid_run_leaves_no_container(docker_engine: Any, ray_session: Any) -> None:
    from ray_harness.runtime import AgentPool

    sandbox = DockerSandbox(image=TEST_IMAGE)
    pool = AgentPool(size=1, namespace=f"rh_sandbox_{uuid.uuid4().hex[:6]}", max_restarts=1)
    try:
        agent = _shell_agent(sandbox, "touch /tmp/started; sleep 300", "victim")
        running = asyncio.create_task(pool.run(agent, "go", agent_key="victim"))
        await _wait_for(lambda: any(_has_file(c, "/tmp/started") for c in _containers(docker_engine, sandbox)),
                        "the command started", running)
        pid = await _host_pid(pool)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(RemoteActorError):
            await asyncio.wait_for(running, 120)
        await _restarted(pool, pid)
        assert _containers(docker_engine, sandbox) == []  # the restarted host removed its predecessor's
    finally:
        pool.shutdown()


async def test_a_host_that_died_for_good_is_cleaned_up_at_shutdown(docker_engine: Any, ray_session: Any) -> None:
    from ray_harness.runtime import AgentPool

    sandbox = DockerSandbox(image=TEST_IMAGE)
    pool = AgentPool(size=1, namespace=f"rh_sandbox_{uuid.uuid4().hex[:6]}", max_restarts=0)
    try:
        await pool.run(_shell_agent(sandbox, "hostname", "doomed"), "go", agent_key="doomed")
        assert len(_containers(docker_engine, sandbox)) == 1
        os.kill(await _host_pid(pool), signal.SIGKILL)  # no restart: nobody in that process closes it
    finally:
        pool.shutdown()
    assert _containers(docker_engine, sandbox) == []  # removed by its owner label


def test_a_remote_agent_removes_its_container_at_shutdown(docker_engine: Any) -> None:
    from ray_harness.runtime import RemoteAgent

    sandbox = DockerSandbox(image=TEST_IMAGE)
    remote = RemoteAgent(_shell_agent(sandbox, "hostname", "dedicated"), name=f"sandboxed-{uuid.uuid4().hex[:6]}")
    try:
        remote("go")
        assert len(_containers(docker_engine, sandbox)) == 1
    finally:
        remote.shutdown()
    assert _containers(docker_engine, sandbox) == []


async def test_resident_agents_built_with_one_ssh_sandbox_share_one_connection(own_pool: Any,
                                                                               ssh_server: SshServer) -> None:
    sandbox = ssh_server.sandbox()
    tag = uuid.uuid4().hex[:8]
    first_key, second_key = _keys_on_different_hosts(tag, own_pool.size)
    command = "echo $SSH_CONNECTION"  # the client's address and port: one per TCP connection
    await own_pool.run(_shell_agent(sandbox, command, "first"), "go", agent_key=first_key)
    await own_pool.run(_shell_agent(sandbox, command, "second"), "go", agent_key=second_key)
    connections = [*_tool_outputs(await own_pool.resident_messages(first_key)),
                   *_tool_outputs(await own_pool.resident_messages(second_key))]
    assert len(connections) == 2 and len({lines[0].split()[1] for lines in connections}) == 1
    await own_pool.release(first_key)
    await own_pool.release(second_key)


async def test_a_shared_sandbox_actor_serves_every_copy_of_one_sandbox(docker_engine: Any) -> None:
    import pickle

    from ray_harness.runtime import RemoteSandbox

    sandbox = DockerSandbox(image=TEST_IMAGE)
    first = RemoteSandbox.shared(sandbox)
    try:
        # A second handle, as another host would ask for it, reaches the same actor.
        second = RemoteSandbox.shared(pickle.loads(pickle.dumps(sandbox)))
        assert first.actor_name == second.actor_name == f"ray_harness:sandbox:{sandbox.sandbox_id}"
        await first.write_text("/tmp/shared.txt", "one sandbox")
        assert await second.read_text("/tmp/shared.txt") == "one sandbox"
        assert len(_containers(docker_engine, sandbox)) == 1
        assert RemoteSandbox.shared(first) is first
    finally:
        first.shutdown()
    assert _containers(docker_engine, sandbox) == []
