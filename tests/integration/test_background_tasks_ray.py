"""``Agent(background_tasks=...)`` on ``runtime="ray"``: a Graph node's background tool runs on its node host.

The agent crosses two processes (driver → orchestration host → node host) with its background-task plugin and
the plugin's ``strands_manage_background_task`` tool; the task's result joins the node's history, which comes
back to the driver.
"""

from __future__ import annotations

import json

import pytest

from ray_harness import Agent, GraphBuilder, Status, tool
from ray_harness.testing import ScriptedModel, text, tool_call

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


@tool
def square(n: int) -> int:
    """Square a number.

    Args:
        n: The number.
    """
    return n * n


def test_a_graph_nodes_background_task_completes_and_its_result_comes_back() -> None:
    model = ScriptedModel(tool_call("square", {"n": 12, "_background_execution": True}), text("working on it"),
                          text("144"))
    builder = GraphBuilder()
    builder.add_node(Agent(model, name="a", tools=[square], background_tasks=True, retry_strategy=None), "a")
    graph = builder.build(runtime="ray")
    try:
        assert graph("square 12").status == Status.COMPLETED
        messages = graph.nodes["a"].executor.messages
        acknowledged = messages[2]["content"][0]["toolResult"]["content"][0]["text"]
        assert acknowledged.startswith("Background task dispatched.")
        delivered = [block["toolResult"]["content"] for message in messages for block in message["content"]
                     if "toolResult" in block and "json" in block["toolResult"]["content"][0]]
        assert len(delivered) == 1
        record, answer = delivered[0][0]["json"], delivered[0][-1]
        assert (record["tool_name"], record["status"]) == ("square", "completed")
        assert json.loads(json.dumps(answer)) == {"text": "144"}
    finally:
        graph.shutdown()
