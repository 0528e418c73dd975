"""A session folder the Strands SDK wrote is read as Strands reads it, so a conversation survives switching imports.

The records below are what strands-agents 1.62's ``FileSessionManager`` writes (no ``schema_version``, the
interrupt state under ``_internal_state``, bytes as ``__bytes_encoded__`` objects, ``tracking_id`` in messages).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.hooks import BeforeToolCallEvent, HookProvider, HookRegistry
from ray_harness.multiagent import GraphBuilder
from ray_harness.session import FileSessionManager
from ray_harness.testing import ScriptedModel, text
from ray_harness.types.exceptions import SessionException

STAMP = {"created_at": "2026-12-07T02:46:02.762719+00:00", "updated_at": "2026-12-07T02:46:02.762726+00:00"}
TOOL_USE = {"toolUse": {"toolUseId": "tooluse_delete_1", "name": "delete", "input": {"path": "/x"}}}
INTERRUPT_ID = "v1:before_tool_call:tooluse_delete_1:5cf56bed-067e-5438-a1ef-dbfa3405e45d"


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))


def _strands_message(index: int, message: dict[str, Any], redacted: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"message": {**message, "tracking_id": f"t-{index}"}, "message_id": index, "redact_message": redacted,
            **STAMP}


def _strands_session(root: Path, messages: list[dict[str, Any]], interrupt_state: dict[str, Any],
                     state: dict[str, Any] | None = None) -> Path:
    session = root / "session_s1"
    _write(session / "session.json", {"session_id": "s1", "session_type": "AGENT", **STAMP})
    agent_dir = session / "agents" / "agent_a1"
    _write(agent_dir / "agent.json", {
        "agent_id": "a1", "state": state or {},
        "conversation_manager_state": {"__name__": "SlidingWindowConversationManager", "removed_message_count": 0,
                                       "model_call_count": 0},
        "_internal_state": {"interrupt_state": interrupt_state, "model_state": {}}, **STAMP})
    for index, message in enumerate(messages):
        _write(agent_dir / "messages" / f"message_{index}.json", message)
    return agent_dir


NO_INTERRUPTS: dict[str, Any] = {"interrupts": {}, "context": {}, "activated": False}


def test_a_strands_conversation_continues_with_its_state_images_and_redactions(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n-image"
    image = {"image": {"format": "png", "source": {"bytes": {"__bytes_encoded__": True,
                                                              "data": base64.b64encode(png).decode()}}}}
    _strands_session(tmp_path, [
        _strands_message(0, {"role": "user", "content": [{"text": "look"}, image]}),
        _strands_message(1, {"role": "assistant", "content": [{"text": "my secret"}],
                             "metadata": {"usage": {"inputTokens": 5, "outputTokens": 2, "totalTokens": 7}}},
                         redacted={"role": "assistant", "content": [{"text": "[redacted]"}]}),
    ], NO_INTERRUPTS, state={"k": 1})
    model = ScriptedModel(text("next answer"))
    agent = Agent(model, session_manager=FileSessionManager("s1", storage_dir=tmp_path), agent_id="a1")
    assert agent.state.get("k") == 1
    assert agent.messages[0]["content"][1]["image"]["source"]["bytes"] == png
    assert agent.messages[1] == {"role": "assistant", "content": [{"text": "[redacted]"}]}
    assert str(agent("and now?")) == "next answer\n"
    assert [m["role"] for m in model.calls[0].messages] == ["user", "assistant", "user"]
    reopened = Agent(ScriptedModel(), session_manager=FileSessionManager("s1", storage_dir=tmp_path), agent_id="a1")
    assert reopened.messages == agent.messages


@tool
def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


class Approve(HookProvider):
    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self.ask)

    def ask(self, event: BeforeToolCallEvent) -> None:
        if event.interrupt("approve", reason={"path": event.tool_use["input"]["path"]}) != "yes":
            event.cancel_tool = "denied"


def test_an_interrupt_strands_left_pending_is_resumed(tmp_path: Path) -> None:
    interrupt = {"id": INTERRUPT_ID, "name": "approve", "reason": {"path": "/x"}, "response": None}
    assistant = {"role": "assistant", "content": [TOOL_USE], "metadata": {"usage": {"inputTokens": 5}},
                 "tracking_id": "t-1"}
    _strands_session(tmp_path, [
        _strands_message(0, {"role": "user", "content": [{"text": "delete /x"}]}),
        _strands_message(1, {"role": "assistant", "content": [TOOL_USE]}),
    ], {"interrupts": {INTERRUPT_ID: interrupt}, "context": {}, "activated": True,
        "pending_tool_execution": {"assistant_message": assistant, "completed_tool_results": []}})
    agent = Agent(ScriptedModel(text("all done")), tools=[delete], hooks=[Approve()],
                  session_manager=FileSessionManager("s1", storage_dir=tmp_path), agent_id="a1")
    result = agent([{"interruptResponse": {"interruptId": INTERRUPT_ID, "response": "yes"}}])
    assert (result.stop_reason, str(result)) == ("end_turn", "all done\n")
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "deleted /x"}]


def test_a_strands_graph_state_is_refused_by_name(tmp_path: Path) -> None:
    _write(tmp_path / "session_s1" / "session.json", {"session_id": "s1", "session_type": "AGENT", **STAMP})
    _write(tmp_path / "session_s1" / "multi_agents" / "multi_agent_g1" / "multi_agent.json",
           {"type": "graph", "id": "g1", "status": "completed", "completed_nodes": ["a"]})
    builder = GraphBuilder()
    builder.add_node(Agent(ScriptedModel(text("x"))), "a")
    builder.set_graph_id("g1")
    with pytest.raises(SessionException, match="written by the Strands SDK"):
        builder.set_session_manager(FileSessionManager("s1", storage_dir=tmp_path)).build(runtime="local")
