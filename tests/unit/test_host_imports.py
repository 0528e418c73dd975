"""What a Ray host process imports when it starts: what every request needs, not what only some requests need.

Each host actor (and every restart of one) imports ``ray_harness.runtime._host`` and runs ``AgentHost.__init__``;
the A2A client, the evaluation package and the Docker/SSH/local sandboxes load when a request needs them. The
import time itself is measured in benchmarks/README.md ("Host process import").
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from ray_harness.runtime._spec import agent_spec  # imports Ray: at collection, before conftest blocks it
from ray_harness.sandbox import _binding
from ray_harness.serve.client import A2AAgent

# Imports Ray in a fresh interpreter (it starts nothing): this process keeps Ray unimportable (conftest).
_HOST_START = """
import sys
import ray_harness.runtime._host  # the module of the actor class a host process unpickles
from ray_harness.runtime import _sandbox_owner
from ray_harness.sandbox import _binding
_sandbox_owner.claim("host-actor-id", reconstructed=False)  # what AgentHost.__init__ does
print(len(_binding.engine_listeners()))
print(" ".join(sorted(sys.modules)))
"""
_POOL = "import sys, ray_harness.runtime.pool; print(1); print(' '.join(sorted(sys.modules)))"

_ON_DEMAND = ("ray_harness.serve", "ray_harness.evaluation", "ray_harness.sandbox.docker", "ray_harness.sandbox.ssh",
              "ray_harness.sandbox.local", "ray_harness.sandbox.posix_shell", "ray_harness.sandbox.tools")


@pytest.mark.parametrize(("code", "on_demand"), [
    # A node host runs agents; the multi-agent package loads with the first Graph/Swarm an orchestration host runs.
    (_HOST_START, (*_ON_DEMAND, "ray_harness.multiagent")),
    # Drivers and orchestration hosts (running a Graph/Swarm) import the pool.
    (_POOL, _ON_DEMAND),
], ids=["host-start", "pool"])
def test_a_starting_host_imports_no_module_only_some_requests_need(code: str, on_demand: tuple[str, ...]) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    listeners, modules = done.stdout.splitlines()
    assert listeners == "1"  # the host's container engines are still recorded, by a listener set without docker
    loaded = set(modules.split())
    assert {"ray_harness.runtime._host", "ray_harness.sandbox._binding"} <= loaded
    assert not [m for m in loaded if any(m == lazy or m.startswith(lazy + ".") for lazy in on_demand)]


def test_the_engine_listener_set_before_docker_is_imported_hears_of_new_engines(monkeypatch: Any) -> None:
    from ray_harness.sandbox import docker

    monkeypatch.setattr(docker, "_engines", set())
    heard: list[list[str]] = []
    _binding.set_engine_listener(heard.append)
    try:
        docker._note_engine("tcp://engine-a:2375")
        docker._note_engine("tcp://engine-a:2375")  # known: not reported again
        docker._note_engine(None)  # the default engine
    finally:
        _binding.set_engine_listener(None)
    assert heard == [["tcp://engine-a:2375"], ["", "tcp://engine-a:2375"]]
    assert _binding.engine_listeners() == []


def test_docker_reports_the_engines_it_used_before_its_listener_was_set(monkeypatch: Any) -> None:
    from ray_harness.sandbox import docker

    monkeypatch.setattr(docker, "_engines", {"tcp://engine-b:2375"})
    heard: list[list[str]] = []
    try:
        docker.set_engine_listener(heard.append)
        assert _binding.engine_listeners() == [heard.append]
    finally:
        docker.set_engine_listener(None)
    assert heard == [["tcp://engine-b:2375"]]


def test_an_a2a_agent_is_still_refused_as_an_actor_agent_and_a_factory_still_accepted() -> None:
    # _spec no longer imports the A2A client; it recognises an A2AAgent from the module its instance came from.
    with pytest.raises(TypeError, match=r"an A2AAgent \(http://127\.0\.0\.1:9\) cannot be the agent of a RemoteAgent"):
        agent_spec(A2AAgent("http://127.0.0.1:9"))
    assert agent_spec(_factory).kind == "factory"


def _factory() -> Any:
    return None
