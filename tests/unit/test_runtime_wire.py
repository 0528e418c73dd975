"""The runtime's wire format (ray_harness.runtime._wire): typed requests, the event filter, the item union."""

from __future__ import annotations

import pickle

import pytest
from pydantic import TypeAdapter, ValidationError

from ray_harness import Agent
from ray_harness.agent.result import AgentResult
from ray_harness.runtime._order import Ticket
from ray_harness.runtime._wire import (
    BatchItem,
    CancelRequest,
    EndItem,
    EventItem,
    InvokeRequest,
    OrchestratorEventItem,
    ResultItem,
    ResumeRequest,
    SandboxRequest,
    SessionWriteItem,
    SnapshotItem,
    WireItem,
    invoke_request,
    is_terminal,
    wanted,
)
from ray_harness.testing import ScriptedModel


def test_bad_requests_name_the_field() -> None:
    with pytest.raises(ValidationError, match="invocation_id"):
        InvokeRequest(invocation_id="", prompt="hi")
    with pytest.raises(ValidationError, match="events"):
        InvokeRequest(invocation_id="a", events="some")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="limits"):  # as Agent.invoke_async raises for bad limits
        InvokeRequest(invocation_id="a", limits={"turns": -1})
    with pytest.raises(ValidationError, match="operation"):
        SandboxRequest(operation="format_disk")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="unknown"):
        CancelRequest(unknown=1)  # type: ignore[call-arg]


def test_requests_are_frozen_and_pickle() -> None:
    request = InvokeRequest(invocation_id="a", prompt="hi", ticket=Ticket("caller", 2, 1), events="result")
    with pytest.raises(ValidationError):
        request.prompt = "other"  # type: ignore[misc]
    again = pickle.loads(pickle.dumps(request))
    assert again == request and again.ticket == Ticket("caller", 2, 1)
    assert request.agent_options() == {"limits": None, "structured_output_model": None}


def test_interrupt_responses_make_a_resume_request() -> None:
    responses = [{"interruptResponse": {"interruptId": "i1", "response": "yes"}}]
    assert isinstance(invoke_request("a", responses), ResumeRequest)
    assert type(invoke_request("a", "hi")) is InvokeRequest
    with pytest.raises(ValidationError, match="interruptResponse"):
        ResumeRequest(invocation_id="a", prompt=[{"interruptResponse": {"response": "no id"}}])


def test_the_event_filter_is_applied_once_by_its_rule() -> None:
    events = [{"type": "model_event"}, {"type": "text_delta"}, {"type": "tool_result"}, {"type": "result"}]
    assert [e["type"] for e in events if wanted(e, "all")] == ["model_event", "text_delta", "tool_result", "result"]
    assert [e["type"] for e in events if wanted(e, "agent")] == ["text_delta", "tool_result", "result"]
    assert [e["type"] for e in events if wanted(e, "result")] == ["result"]


def test_items_are_one_discriminated_union_and_only_ends_are_terminal() -> None:
    adapter: TypeAdapter[object] = TypeAdapter(WireItem)
    result = AgentResult(stop_reason="end_turn", message={"role": "assistant", "content": [{"text": "ok"}]})
    items = [EventItem(event={"type": "text_delta"}), ResultItem(result=result), SnapshotItem(snapshot=b""),
             OrchestratorEventItem(payload=b"x"), SessionWriteItem(path="", data={}),
             BatchItem(items=[OrchestratorEventItem(payload=b"x")]), EndItem(payload=b"e")]
    for item in items:
        fields = {name: getattr(item, name) for name in type(item).model_fields}
        assert type(adapter.validate_python(fields)) is type(item)  # picked by its "kind"
    assert [is_terminal(item) for item in items] == [False, True, False, False, False, False, True]
    assert not is_terminal({"type": "result"})  # a plain event is never the end of a stream


def test_the_snapshot_rides_beside_the_result_not_inside_it() -> None:
    agent = Agent(ScriptedModel("hi"), name="a")
    agent("go")
    packed = pickle.dumps(agent.snapshot())
    item = ResultItem(result=AgentResult(stop_reason="end_turn", message=agent.messages[-1]), snapshot=packed)
    assert item.event() == {"type": "result", "result": item.result}
    snapshot = item.agent_snapshot()
    assert snapshot is not None and snapshot.messages == agent.messages
    assert ResultItem(result=item.result).agent_snapshot() is None
    with pytest.raises(TypeError, match="AgentSnapshot"):
        SnapshotItem(snapshot=pickle.dumps({"not": "a snapshot"})).agent_snapshot()
