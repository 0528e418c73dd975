"""``A2AAgent`` where Ray ships it: a node of a ``runtime="ray"`` Graph/Swarm, a tool of a RemoteAgent's agent.

The A2A servers run under uvicorn in this process (as in ``test_a2a_agent.py``); the Graph/Swarm and the
RemoteAgent run in the local Ray of the integration session and reach them over loopback.
"""

from __future__ import annotations

from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.multiagent import GraphBuilder, Status, Swarm
from ray_harness.runtime import RemoteAgent
from ray_harness.serve import A2AAgent
from ray_harness.testing import ScriptedModel, text, tool_call
from tests.serve.a2a_client import answers
from tests.serve.conftest import TOKEN
from tests.serve.targets import build_plain_agent

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session"), pytest.mark.timeout(600)]


def test_graph_node_on_ray_answers_and_resumes_a_remote_interrupt(support_url: str) -> None:
    remote = A2AAgent(support_url, auth_token=TOKEN)
    builder = GraphBuilder()
    builder.add_node(remote, "remote")
    builder.add_node(Agent(ScriptedModel(lambda call: text("summarized"), loop=True), name="summary"), "summary")
    builder.add_edge("remote", "summary")
    graph = builder.build(runtime="ray")
    simple = graph("hello graph")
    assert simple.status == Status.COMPLETED
    assert simple.results["remote"].result.text == "echo: hello graph"
    assert simple.results["summary"].result.text == "summarized"
    assert [m["content"][0]["text"] for m in remote.messages] == ["hello graph", "echo: hello graph"]  # came back
    paused = graph("refund order R1")
    assert paused.status == Status.INTERRUPTED
    assert paused.interrupts[0].id.startswith("v1:a2a:") and paused.interrupts[0].reason == "Refund order R1?"
    assert remote._interrupt_state.activated  # the driver's copy can resume it ...
    graph.shutdown()  # ... also when the orchestration host's copy is gone: the resume ships the driver's
    done = graph(answers(paused))
    assert done.status == Status.COMPLETED
    assert done.results["remote"].result.text == "Done: refunded R1."
    assert not remote._interrupt_state.activated
    assert remote.messages[-1]["content"][0]["text"] == "Done: refunded R1."


def test_swarm_member_on_ray_answers_as_with_runtime_local(replicas: Any) -> None:
    url = replicas(build_plain_agent, store=None, name="plain").url
    results = {runtime: Swarm([A2AAgent(url)], runtime=runtime)("hello swarm") for runtime in ("local", "ray")}
    for result in results.values():
        assert result.status == Status.COMPLETED
        assert "User Request: hello swarm" in str(result.results["plain"].result)
    assert str(results["ray"].results["plain"].result) == str(results["local"].results["plain"].result)


def _parent_model(call: Any) -> Any:
    results = [block["toolResult"] for block in call.messages[-1]["content"] if "toolResult" in block]
    if results:
        return text(f"the remote said: {results[0]['content'][0]['text']}")
    return tool_call("support", {"input": str(call.messages[-1]["content"][0]["text"])})


def test_tool_of_an_agent_in_a_remote_agent(support_url: str) -> None:
    parent = Agent(ScriptedModel(_parent_model, loop=True), tools=[A2AAgent(support_url, auth_token=TOKEN)])
    remote = RemoteAgent(parent)
    try:
        assert remote("hi").text == "the remote said: echo: hi"
        paused = remote("refund order T7")
        assert paused.stop_reason == "interrupt"
        assert paused.interrupts[0].reason == "Refund order T7?"
        assert remote(answers(paused)).text == "the remote said: Done: refunded T7."
    finally:
        remote.shutdown()


def test_an_a2a_agent_is_refused_as_the_agent_of_an_actor(support_url: str) -> None:
    remote = A2AAgent(support_url, auth_token=TOKEN)
    with pytest.raises(TypeError, match=r"cannot be the agent of a RemoteAgent.*runtime='local'"):
        RemoteAgent(remote)  # before this fix: called as if it were a factory, in the actor
    assert remote.messages == []
