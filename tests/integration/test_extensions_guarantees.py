"""Seed 002's guarantees on both runtimes, from a real installed plugin (``tests/plugins/rh_probe_plugin``):
a probe at every placement and, outside each, a middleware that breaks one row of the fault-isolation table.
The same Graph node runs in this process (``runtime="local"``) and on a pooled host (``runtime="ray"``)."""

from __future__ import annotations

import logging
import os
from typing import Any

import pytest

from ray_harness import Agent, GraphBuilder, Status, tool
from ray_harness.agent.retry import ModelRetryStrategy
from ray_harness.extensions import use
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.testing.clock import FakeClock
from ray_harness.types.exceptions import ModelThrottledException
from tests.extension_state import clean_extensions  # noqa: F401 - the autouse fixture
from tests.plugin_fixture import installed_probe_plugin  # noqa: F401 - the fixture

pytestmark = pytest.mark.usefixtures("installed_probe_plugin")


@tool(context=True)
def fetch(key: str, tool_context: Any) -> dict[str, Any]:
    """Look a key up (counts its runs in agent.state: its side effect)."""
    state = tool_context.agent.state
    state.set("fetch_runs", (state.get("fetch_runs") or 0) + 1)
    return {"key": key, "found": True}


@tool
def explode(key: str) -> str:
    """Always fails."""
    raise ValueError(f"no {key}")




@pytest.mark.parametrize("runtime", ["local", pytest.param("ray", marks=pytest.mark.ray)])
async def test_every_placement_guarantee_and_fault_isolation_row_holds(
        runtime: str, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture) -> None:
    if runtime == "ray":
        request.getfixturevalue("ray_session")
    use("rh_probe_plugin")
    model = ScriptedModel(ModelThrottledException("slow down"), tool_call("fetch", {"key": "k"}),
                          tool_call("explode", {"key": "k"}), text("done"))
    agent = Agent(model, tools=[fetch, explode], name="probed", retry_strategy=ModelRetryStrategy(clock=FakeClock()))
    builder = GraphBuilder()
    builder.add_node(agent, "probed")
    graph = builder.build(runtime=runtime)
    with caplog.at_level(logging.WARNING, "ray_harness.extensions"):
        result = await graph.invoke_async("go")
    assert result.status == Status.COMPLETED
    node = graph.nodes["probed"].executor
    report = node.state.get("rh_probe_plugin")
    assert report["scope"] == "lead" and (report["pid"] == os.getpid()) == (runtime == "local")
    results = [block["toolResult"] for message in node.messages for block in message["content"]
               if "toolResult" in block]
    fetched, exploded = results
    assert fetched["status"] == "success" and exploded["content"] == [{"text": "Error: no k"}]
    # MODEL_PHYSICAL once per provider request (the throttled one too), MODEL_LOGICAL once per decision;
    # TOOL_RAW the raw return value and the raised exception, TOOL_VISIBLE exactly what the model received.
    assert report["seen"] == [
        ["MODEL_PHYSICAL", "model", "raised", "ModelThrottledException", "slow down"],
        ["MODEL_PHYSICAL", "model", "returned", "tool_use"], ["MODEL_LOGICAL", "model", "returned", "tool_use"],
        ["TOOL_RAW", "fetch", "returned", {"key": "k", "found": True}], ["TOOL_VISIBLE", "fetch", "returned", fetched],
        ["MODEL_PHYSICAL", "model", "returned", "tool_use"], ["MODEL_LOGICAL", "model", "returned", "tool_use"],
        ["TOOL_RAW", "explode", "raised", "ValueError", "no k"], ["TOOL_VISIBLE", "explode", "returned", exploded],
        ["MODEL_PHYSICAL", "model", "returned", "end_turn"], ["MODEL_LOGICAL", "model", "returned", "end_turn"],
    ]
    # No recovery added a model request (four provider requests, as scripted) or a tool side effect; the
    # changed requests never reached downstream (the tool saw key "k"); the faulty hooks' own results were
    # dropped; a second handler call raised in the hook; lifecycle faults applied no state update.
    assert node.state.get("fetch_runs") == 1
    assert report["caught"] == ["handler was already called: a contributed wrap hook may call it once "
                                "(the host returns the first result)"]
    assert node.state.get("rh_probe_poisoned") is None
    assert str(result.results["probed"].result).strip() == "done"
    if runtime == "local":  # the diagnostics, in the seed's format (an actor's go to its own log)
        for line in ("Faulty.awrap_model_call failed and was skipped: logical fault before handler",
                     "Faulty.awrap_model_call failed and was skipped: the hook did not call handler; the host called it",
                     "Faulty.awrap_tool_call failed and was skipped: visible fault after handler",
                     "Faulty.before_agent failed and was skipped: lifecycle fault",
                     "Faulty.after_model failed and was skipped: "):
            assert f"Extension rh_probe_plugin: {line}" in caplog.text
