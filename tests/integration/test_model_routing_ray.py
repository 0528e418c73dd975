"""An agent whose model is a ``ModelRouter`` runs on a Ray host: it ships, fails over there, and snapshots."""

from __future__ import annotations

import os
import uuid

import pytest

from ray_harness import Agent, tool
from ray_harness.models import ModelRouter, RoutingCandidate
from ray_harness.testing import ScriptedModel, text, tool_call

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


async def test_a_routed_agent_fails_over_on_its_host_and_snapshots_the_candidates() -> None:
    from ray_harness.runtime import RemoteAgent

    down = ScriptedModel(RuntimeError("primary down"), model_id="primary")
    backup = ScriptedModel(tool_call("add", {"a": 1, "b": 2}), text("3"), model_id="backup")
    router = ModelRouter([RoutingCandidate(down, name="primary"), RoutingCandidate(backup, name="backup")])
    remote = RemoteAgent(Agent(router, tools=[add], name="routed"), name=f"routed-{uuid.uuid4().hex[:6]}")
    try:
        result = await remote.invoke_async("add 1 and 2")
        assert str(result).strip() == "3"
        assert remote.info()["pid"] != os.getpid()
        primary_state, backup_state = (await remote.snapshot_async()).model_state["candidates"]  # type: ignore[index]
        # The host's copies made the calls: the primary once (it failed), the backup for both calls of the request.
        assert (primary_state["cursor"], backup_state["cursor"]) == (1, 2)
        assert down.calls == [] and backup.calls == []  # the driver's copies were never called
    finally:
        remote.shutdown()
