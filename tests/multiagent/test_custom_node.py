"""A custom node written for Strands (a ``MultiAgentBase`` subclass with only ``invoke_async``) runs unchanged."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

import pytest

from ray_harness import AgentResult, GraphBuilder, Status
from ray_harness.agent.result import EventLoopMetrics
from ray_harness.multiagent import MultiAgentResult, NodeResult
from ray_harness.multiagent.base import MultiAgentBase
from tests.multiagent.conftest import make_agent


def _answer(text: str) -> AgentResult:
    return AgentResult(stop_reason="end_turn", message={"role": "assistant", "content": [{"text": text}]},
                       metrics=EventLoopMetrics(), state={})


class FunctionNode(MultiAgentBase):
    """Strands' documented deterministic node: a function in a graph."""

    def __init__(self, func: Callable[[str], str], name: str | None = None) -> None:
        super().__init__()
        self.func = func
        self.name = name or func.__name__

    async def invoke_async(self, task: Any, invocation_state: dict[str, Any] | None = None,
                           **kwargs: Any) -> MultiAgentResult:
        started = time.time()
        output = self.func(task if isinstance(task, str) else str(task))
        elapsed = int((time.time() - started) * 1000)
        return MultiAgentResult(status=Status.COMPLETED, execution_time=elapsed, results={
            self.name: NodeResult(result=_answer(output), execution_time=elapsed, status=Status.COMPLETED)})


class StreamingNode(MultiAgentBase):
    """A Strands-style ``stream_async``: its last event is ``{"result": ...}`` without a ``type``."""

    async def invoke_async(self, task: Any, invocation_state: dict[str, Any] | None = None,
                           **kwargs: Any) -> MultiAgentResult:
        raise AssertionError("the graph streams this node")

    async def stream_async(self, task: Any, invocation_state: dict[str, Any] | None = None,
                           **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
        yield {"progress": "half"}
        yield {"result": MultiAgentResult(status=Status.COMPLETED, results={
            "s": NodeResult(result=_answer("streamed"), status=Status.COMPLETED)})}


def shout(text: str) -> str:
    return f"SHOUT: {len(text)} chars"


async def test_function_node_feeds_the_next_agent(runtime: str) -> None:
    after = make_agent("after", "done", "done again")
    builder = GraphBuilder()
    builder.add_node(FunctionNode(shout, "fn"), "fn")
    builder.add_node(after)
    builder.add_edge("fn", "after")
    graph = builder.build(runtime=runtime)
    result = await graph.invoke_async("hello")
    assert result.status == Status.COMPLETED
    assert [node.node_id for node in result.execution_order] == ["fn", "after"]
    nested = result.results["fn"].result
    assert isinstance(nested, MultiAgentResult)
    # as in Strands, an entry node gets the task as content blocks: [{"text": "hello"}]
    assert str(nested.results["fn"].result) == f"SHOUT: {len(str([{'text': 'hello'}]))} chars\n"
    assert (await graph.invoke_async("again")).status == Status.COMPLETED


async def test_function_node_alone_and_called_directly() -> None:
    node = FunctionNode(shout)
    assert node.name == "shout"
    assert str(node("abc").results["shout"].result) == "SHOUT: 3 chars\n"
    events = [event async for event in node.stream_async("abcd")]
    assert events[-1]["type"] == "multiagent_result"
    assert str(events[-1]["result"].results["shout"].result) == "SHOUT: 4 chars\n"
    assert node.serialize_state() == {}
    node.deserialize_state({})
    node.cancel()  # nothing runs: nothing to stop


async def test_strands_style_stream_ending_in_a_result_event(runtime: str) -> None:
    builder = GraphBuilder()
    builder.add_node(StreamingNode(), "s")
    graph = builder.build(runtime=runtime)
    events = [event async for event in graph.stream_async("go")]
    forwarded = [event["event"] for event in events if event.get("type") == "multiagent_node_stream"]
    assert {"progress": "half"} in forwarded
    result = events[-1]["result"]
    assert result.status == Status.COMPLETED
    assert str(result.results["s"].result.results["s"].result) == "streamed\n"


def test_a_node_with_neither_method_is_refused_when_built() -> None:
    class Empty(MultiAgentBase):
        pass

    with pytest.raises(TypeError, match="Empty must implement invoke_async or stream_async"):
        Empty()
