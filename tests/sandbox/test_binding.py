"""Sandboxes follow agents (no Ray): identity through pickling, one live sandbox per process, holders close it."""

from __future__ import annotations

import asyncio
import copy
import pickle
import secrets
from typing import Any

import pytest
from ray import cloudpickle

from ray_harness import Agent
from ray_harness.sandbox import DockerSandbox, LocalEnvironment, SshSandbox, _binding
from ray_harness.testing import ScriptedModel, text
from tests.sandbox.conftest import TEST_IMAGE, another_process


class CountingSandbox(LocalEnvironment):
    """A local environment that counts its closes (and can hold a close open until released)."""

    def __init__(self) -> None:
        super().__init__()
        self.closes = 0
        self.gate: asyncio.Event | None = None

    async def close(self) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.closes += 1


def _holder() -> str:
    return f"test-{secrets.token_hex(4)}"


def test_identity_survives_pickling_and_copies_are_the_sandbox() -> None:
    sandbox = DockerSandbox(image="img:1")
    other = DockerSandbox(image="img:1")
    assert sandbox.sandbox_id != other.sandbox_id  # a second object is a second sandbox
    for dumps in (pickle.dumps, cloudpickle.dumps):
        data = dumps(sandbox)
        with another_process():
            clone = pickle.loads(data)
            assert clone is not sandbox and clone.sandbox_id == sandbox.sandbox_id
    assert pickle.loads(pickle.dumps(sandbox)) is sandbox  # in the process that has it: the sandbox itself
    assert copy.copy(sandbox) is sandbox and copy.deepcopy(sandbox) is sandbox
    assert copy.deepcopy({"a": sandbox, "b": sandbox})["a"] is sandbox


def test_copies_unpickled_separately_in_one_process_are_one_sandbox() -> None:
    sandbox = SshSandbox("example.com", port=2200)
    first_agent = Agent(ScriptedModel(text("a")), name="a", sandbox=sandbox)
    second_agent = Agent(ScriptedModel(text("b")), name="b", sandbox=sandbox)
    shipped = [cloudpickle.dumps(first_agent), cloudpickle.dumps(second_agent)]  # two nodes, shipped separately
    with another_process():
        first, second = (cloudpickle.loads(data) for data in shipped)
        assert first.sandbox is second.sandbox  # one live sandbox: one SSH connection when used
        assert first.sandbox is not sandbox and first.sandbox.sandbox_id == sandbox.sandbox_id
        for agent in (first, second):
            shell = agent.tool_registry.get("sandbox_shell")
            assert shell is not None and shell.sandbox is first.sandbox  # type: ignore[attr-defined]


def test_collecting_records_the_sandboxes_an_agent_is_built_with() -> None:
    shared = LocalEnvironment()
    data = cloudpickle.dumps(Agent(ScriptedModel(text("a")), sandbox=shared))
    with another_process(), _binding.collecting() as found:
        agent = cloudpickle.loads(data)
        built_inside = LocalEnvironment()  # a factory building its own sandbox in the host
    assert found == [agent.sandbox, built_inside]


async def test_the_last_holder_closes_the_sandbox() -> None:
    sandbox = CountingSandbox()
    first, second = _holder(), _holder()
    assert _binding.bind(first, [sandbox, sandbox]) == [sandbox]
    _binding.bind(second, [sandbox])
    assert _binding.holders(sandbox.sandbox_id) == {first, second}
    assert await _binding.release(first) == []
    assert sandbox.closes == 0
    assert await _binding.release(second) == [sandbox]
    assert sandbox.closes == 1 and _binding.holders(sandbox.sandbox_id) == frozenset()
    assert await _binding.release(second) == []  # releasing twice is harmless
    assert sandbox.closes == 1


async def test_a_sandbox_its_actor_owns_is_held_but_not_closed() -> None:
    class Owned(CountingSandbox):
        closes_with_holders = False

    sandbox = Owned()
    holder = _holder()
    _binding.bind(holder, [sandbox])
    assert await _binding.release(holder) == []
    assert sandbox.closes == 0


async def test_a_new_holder_waits_for_a_close_still_running() -> None:
    sandbox = CountingSandbox()
    sandbox.gate = asyncio.Event()
    first, second = _holder(), _holder()
    _binding.bind(first, [sandbox])
    releasing = asyncio.create_task(_binding.release(first))
    await asyncio.sleep(0)  # the close has started and waits on the gate
    acquiring = asyncio.create_task(_binding.acquire(second, [sandbox]))
    await asyncio.sleep(0)
    assert not acquiring.done() and sandbox.closes == 0
    sandbox.gate.set()
    assert await acquiring == [sandbox]
    assert sandbox.closes == 1  # the new holder uses the sandbox after the close: it starts afresh
    await releasing
    await _binding.release(second)


def test_an_agent_spec_names_the_sandboxes_pickled_into_it() -> None:
    from ray_harness.runtime._sandbox_owner import sandbox_affinity
    from ray_harness.runtime._spec import agent_spec

    sandbox = LocalEnvironment()
    spec = agent_spec(Agent(ScriptedModel(text("a")), sandbox=sandbox))
    assert spec.sandbox_ids == (sandbox.sandbox_id,)
    assert sandbox_affinity(spec) == sandbox.sandbox_id
    assert agent_spec(lambda: Agent(ScriptedModel(text("a")), sandbox=sandbox)).sandbox_ids == (sandbox.sandbox_id,)
    assert sandbox_affinity(agent_spec(Agent(ScriptedModel(text("a"))))) is None


def _labelled(client: Any, sandbox: DockerSandbox) -> list[Any]:
    return list(client.containers.list(all=True, filters={"label": f"ray_harness.sandbox={sandbox.sandbox_id}"},
                                       ignore_removed=True))


async def test_docker_copies_in_one_process_share_one_container(docker_client: Any) -> None:
    sandbox = DockerSandbox(image=TEST_IMAGE)
    shipped = [pickle.dumps(sandbox), pickle.dumps(sandbox)]
    holders = [_holder(), _holder()]
    with another_process():
        first, second = (pickle.loads(data) for data in shipped)
        assert first is second
        _binding.bind(holders[0], [first])
        _binding.bind(holders[1], [second])
        await first.write_text("/tmp/shared.txt", "from the first")
        assert await second.read_text("/tmp/shared.txt") == "from the first"
        assert len(_labelled(docker_client, sandbox)) == 1
        await _binding.release(holders[0])
        assert len(_labelled(docker_client, sandbox)) == 1  # still held by the second
        await _binding.release(holders[1])
        assert _labelled(docker_client, sandbox) == []  # the last holder removed the container


def test_created_containers_carry_identity_and_owner_labels() -> None:
    sandbox = DockerSandbox(image=TEST_IMAGE)
    _binding.set_owner_labels({"ray_harness.owner": "test-owner"})
    try:
        labels = sandbox._create_options()["container"]["labels"]
    finally:
        _binding.set_owner_labels({})
    assert labels == {"ray_harness.sandbox": sandbox.sandbox_id, "ray_harness.owner": "test-owner"}


def test_remove_owned_containers_removes_only_the_labelled_ones(docker_client: Any) -> None:
    from ray_harness.sandbox.docker import remove_owned_containers

    owner = f"test-owner-{secrets.token_hex(4)}"
    mine = docker_client.containers.run(TEST_IMAGE, ["sleep", "2147483647"], detach=True, init=True,
                                        network_mode="none", labels={"ray_harness.owner": owner})
    theirs = docker_client.containers.run(TEST_IMAGE, ["sleep", "2147483647"], detach=True, init=True,
                                          network_mode="none", labels={"ray_harness.owner": owner + "-other"})
    try:
        assert remove_owned_containers({"ray_harness.owner": owner}, [""]) == 1
        remaining = {c.id for c in docker_client.containers.list(all=True, filters={"label": "ray_harness.owner"},
                                                                 ignore_removed=True)}
        assert mine.id not in remaining and theirs.id in remaining
        with pytest.raises(ValueError, match="label"):
            remove_owned_containers({}, [""])
    finally:
        theirs.remove(force=True)


class _RemovingEngine:
    """A docker API whose engine is already auto-removing the container: remove answers 409, it lingers a while."""

    def __init__(self, lingering: int) -> None:
        self.lingering = lingering
        self.calls: list[str] = []

    def containers(self, **_: Any) -> list[dict[str, str]]:
        return [{"Id": "c1"}]

    def remove_container(self, container_id: str, force: bool = False) -> None:
        import docker
        import requests

        self.calls.append("remove")
        response = requests.Response()
        response.status_code = 409
        raise docker.errors.APIError("Conflict", response=response,
                                     explanation=f"removal of container {container_id} is already in progress")

    def inspect_container(self, container_id: str) -> dict[str, str]:
        import docker

        self.calls.append("inspect")
        if self.lingering == 0:
            raise docker.errors.NotFound("gone")
        self.lingering -= 1
        return {"Id": container_id}


def test_removal_already_in_progress_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # A host killed mid-run: the engine's auto-remove and the pool's cleanup race. The cleanup used to give up
    # on "removal already in progress" and return while the container was still listed.
    import docker

    from ray_harness.sandbox.docker import remove_owned_containers

    engine = _RemovingEngine(lingering=2)

    class Client:
        api = engine

        def close(self) -> None:
            engine.calls.append("close")

    monkeypatch.setattr(docker, "from_env", lambda **_: Client())
    assert remove_owned_containers({"ray_harness.owner": "x"}, [""]) == 1
    assert engine.calls == ["remove", "inspect", "inspect", "inspect", "close"]
