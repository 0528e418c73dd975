from __future__ import annotations

import json
import pickle
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from ray_harness import Agent, ToolContext, tool
from ray_harness.agent.conversation_manager import (
    NullConversationManager,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from ray_harness.hooks.events import AfterInvocationEvent, BeforeToolCallEvent
from ray_harness.session import FileSessionManager
from ray_harness.testing import ScriptedModel, text, tool_call, tool_calls
from ray_harness.types.exceptions import ContextWindowOverflowException, SessionException
from tests.session.helpers import assert_valid_history, text_of


@tool(context=True)
def remember(note: str, tool_context: ToolContext) -> str:
    """Remember a note in agent state."""
    notes = tool_context.agent.state.get("notes") or []
    tool_context.agent.state.set("notes", [*notes, note])
    return f"remembered {note}"


def session(tmp_path: Path, session_id: str = "s1") -> FileSessionManager:
    return FileSessionManager(session_id, storage_dir=tmp_path)


def agent_dir(tmp_path: Path, session_id: str = "s1", agent_id: str = "default") -> Path:
    return tmp_path / f"session_{session_id}" / "agents" / f"agent_{agent_id}"


def test_messages_state_and_manager_state_survive_a_restart(tmp_path: Path) -> None:
    model = ScriptedModel(tool_call("remember", {"note": "milk"}), text("noted"))
    first = Agent(model, tools=[remember], session_manager=session(tmp_path))
    first("remember milk")
    assert first.state.get("notes") == ["milk"]

    second = Agent(ScriptedModel(text("you said milk")), tools=[remember], session_manager=session(tmp_path))
    assert second.messages == first.messages
    assert second.state.get("notes") == ["milk"]
    second("what did I say?")
    assert len(second.messages) == 6
    third = Agent(ScriptedModel(), session_manager=session(tmp_path))
    assert third.messages == second.messages


def test_layout_permissions_and_one_file_per_message(tmp_path: Path) -> None:
    Agent(ScriptedModel(text("hi")), session_manager=session(tmp_path))("hello")
    root = tmp_path / "session_s1"
    files = sorted(p.name for p in (agent_dir(tmp_path) / "messages").iterdir())
    assert files == ["message_0.json", "message_1.json"]
    assert json.loads((root / "session.json").read_text())["schema_version"] == "1"
    record = json.loads((agent_dir(tmp_path) / "messages" / "message_1.json").read_text())
    assert record["message_id"] == 1 and record["message"] == {"role": "assistant", "content": [{"text": "hi"}]}
    for directory in (root, root / "agents", agent_dir(tmp_path), agent_dir(tmp_path) / "messages"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    assert stat.S_IMODE((agent_dir(tmp_path) / "agent.json").stat().st_mode) == 0o600
    assert not list(root.rglob("*.tmp"))


def test_initial_messages_of_a_new_agent_are_stored(tmp_path: Path) -> None:
    initial = [{"role": "user", "content": [{"text": "a"}]}, {"role": "assistant", "content": [{"text": "b"}]}]
    Agent(ScriptedModel(), messages=initial, session_manager=session(tmp_path))
    assert Agent(ScriptedModel(), session_manager=session(tmp_path)).messages == initial


def test_agents_in_one_session_are_independent(tmp_path: Path) -> None:
    manager = session(tmp_path)
    Agent(ScriptedModel(text("A")), agent_id="alpha", session_manager=manager)("to alpha")
    Agent(ScriptedModel(text("B")), agent_id="beta", session_manager=manager)("to beta")
    with pytest.raises(SessionException, match="already used"):
        Agent(ScriptedModel(), agent_id="alpha", session_manager=manager)
    assert manager.repository.list_agents("s1") == ["alpha", "beta"]
    restored = Agent(ScriptedModel(), agent_id="beta", session_manager=session(tmp_path))
    assert text_of(restored.messages[-1]) == "B"


def test_a_second_writer_of_one_agent_is_refused_and_loses_nothing_stored(tmp_path: Path) -> None:
    # Two processes (here two managers) writing the same agent of one session would overwrite each other's
    # messages by index: the second to append an index that exists gets SessionException instead.
    first = Agent(ScriptedModel(text("one"), text("two")), session_manager=session(tmp_path))
    second = Agent(ScriptedModel(text("other")), session_manager=session(tmp_path))  # restored before `first` ran
    first("q1")
    stored = sorted(p.name for p in (agent_dir(tmp_path) / "messages").iterdir())
    before = {name: (agent_dir(tmp_path) / "messages" / name).read_bytes() for name in stored}
    with pytest.raises(SessionException, match=r"message 0 was already written .* by another writer"):
        second("q2")
    assert second.messages == []  # the failed invocation rolled back
    assert {name: (agent_dir(tmp_path) / "messages" / name).read_bytes() for name in stored} == before
    assert sorted(p.name for p in (agent_dir(tmp_path) / "messages").iterdir()) == stored
    first("q3")  # the first writer goes on
    restored = Agent(ScriptedModel(), session_manager=session(tmp_path))
    assert [text_of(m) for m in restored.messages] == ["q1", "one", "q3", "two"]


@pytest.mark.parametrize("bad", ["../escape", "a/b", "a\\b", "..", ""])
def test_ids_with_separators_or_dotdot_are_rejected(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="session_id"):
        FileSessionManager(bad, storage_dir=tmp_path)
    with pytest.raises(ValueError, match="agent_id"):
        Agent(ScriptedModel(), agent_id=bad, session_manager=session(tmp_path))
    assert not (tmp_path.parent / "escape").exists()


def test_failed_invocation_rollback_deletes_its_messages(tmp_path: Path) -> None:
    model = ScriptedModel(text("first"), RuntimeError("provider exploded"))
    agent = Agent(model, session_manager=session(tmp_path), retry_strategy=None)
    agent("one")
    with pytest.raises(RuntimeError, match="exploded"):
        agent("two")
    assert len(agent.messages) == 2
    assert sorted(p.name for p in (agent_dir(tmp_path) / "messages").iterdir()) == ["message_0.json", "message_1.json"]
    assert Agent(ScriptedModel(), session_manager=session(tmp_path)).messages == agent.messages


def test_sliding_window_trim_restores_the_same_history(tmp_path: Path) -> None:
    manager = SlidingWindowConversationManager(window_size=4, pin_first=1)
    model = ScriptedModel(*[tool_call("remember", {"note": f"n{i}"}) for i in range(4)], text("done"), text("again"))
    agent = Agent(model, tools=[remember], conversation_manager=manager, session_manager=session(tmp_path))
    agent("start")
    agent("more")
    assert manager.removed_message_count > 0
    stored = len(list((agent_dir(tmp_path) / "messages").iterdir()))
    assert stored == len(agent.messages) + manager.removed_message_count  # removed ones stay stored
    restored = Agent(ScriptedModel(), tools=[remember], session_manager=session(tmp_path),
                     conversation_manager=SlidingWindowConversationManager(window_size=4, pin_first=1))
    assert restored.messages == agent.messages
    assert restored.conversation_manager.removed_message_count == manager.removed_message_count
    assert_valid_history(restored.messages)


def test_truncated_tool_results_are_rewritten_in_the_store(tmp_path: Path) -> None:
    @tool
    def dump() -> str:
        """Big."""
        return "y" * 3000

    model = ScriptedModel(tool_call("dump", {}), ContextWindowOverflowException("x"), text("ok"))
    agent = Agent(model, tools=[dump], session_manager=session(tmp_path))
    agent("go")
    restored = Agent(ScriptedModel(), tools=[dump], session_manager=session(tmp_path))
    assert "[truncated:" in restored.messages[2]["content"][0]["toolResult"]["content"][0]["text"]
    assert restored.messages == agent.messages


def test_summary_lives_in_manager_state_and_messages_stay_stored(tmp_path: Path) -> None:
    chat = [{"role": r, "content": [{"text": f"{r}{i}"}]} for i in range(5) for r in ("user", "assistant")]
    model = ScriptedModel(ContextWindowOverflowException("x"), text("SUMMARY"), text("ok"))
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    agent = Agent(model, messages=chat, conversation_manager=manager, session_manager=session(tmp_path))
    agent("go")
    assert text_of(agent.messages[0]) == "SUMMARY"
    assert len(list((agent_dir(tmp_path) / "messages").iterdir())) == 12
    restored = Agent(ScriptedModel(), session_manager=session(tmp_path),
                     conversation_manager=SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2))
    assert restored.messages == agent.messages
    # and the restored agent keeps appending at the right stored index
    restored.model = ScriptedModel(text("later"))
    restored("after restore")
    again = Agent(ScriptedModel(), session_manager=session(tmp_path),
                  conversation_manager=SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2))
    assert again.messages == restored.messages


def test_in_place_edits_are_reconciled_at_the_end_of_an_invocation(tmp_path: Path) -> None:
    def edit_last(event: AfterInvocationEvent) -> None:
        event.agent.messages[-1] = {"role": "assistant", "content": [{"text": "edited"}]}

    agent = Agent(ScriptedModel(text("original")), session_manager=session(tmp_path), hooks=[edit_last])
    agent("hi")
    assert text_of(Agent(ScriptedModel(), session_manager=session(tmp_path)).messages[-1]) == "edited"


def test_interrupt_state_restores_in_a_new_agent(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        ran.append(target)
        return f"deployed {target}"

    def approval(event: BeforeToolCallEvent) -> None:
        if event.interrupt("approve", reason={"target": event.tool_use["input"]["target"]}) != "yes":
            event.cancel_tool = "not approved"

    first = Agent(ScriptedModel(tool_call("deploy", {"target": "prod"})), tools=[deploy], hooks=[approval],
                  session_manager=session(tmp_path))
    paused = first("deploy")
    assert paused.stop_reason == "interrupt"
    (pending,) = paused.interrupts
    model = ScriptedModel(text("done"))
    second = Agent(model, tools=[deploy], hooks=[approval], session_manager=session(tmp_path))
    assert second._interrupt_state.activated
    outcome = second([{"interruptResponse": {"interruptId": pending.id, "response": "yes"}}])
    assert outcome.stop_reason == "end_turn"
    assert ran == ["prod"]
    assert len(model.calls) == 1
    assert_valid_history(second.messages)
    assert not Agent(ScriptedModel(), session_manager=session(tmp_path))._interrupt_state.activated


def test_image_bytes_round_trip(tmp_path: Path) -> None:
    image = {"role": "user", "content": [{"text": "look"},
                                         {"image": {"format": "png", "source": {"bytes": b"\x89PNG\x00\xff"}}}]}
    Agent(ScriptedModel(text("nice")), session_manager=session(tmp_path))([image])
    restored = Agent(ScriptedModel(), session_manager=session(tmp_path))
    assert restored.messages[0]["content"][1]["image"]["source"]["bytes"] == b"\x89PNG\x00\xff"


def test_multi_agent_json_round_trip(tmp_path: Path) -> None:
    manager = session(tmp_path)
    assert manager.read_multi_agent_json() is None
    state: dict[str, Any] = {"status": "executing", "completed": ["a", "b"], "nested": {"n": 1}}
    manager.write_multi_agent_json(state)
    manager.write_multi_agent_json({"other": True}, multi_agent_id="graph-2")
    assert session(tmp_path).read_multi_agent_json() == state
    assert session(tmp_path).read_multi_agent_json("graph-2") == {"other": True}
    with pytest.raises(ValueError, match="multi_agent_id"):
        manager.write_multi_agent_json({}, multi_agent_id="../x")


def test_non_json_interrupt_reason_is_a_clear_session_error(tmp_path: Path) -> None:
    def approval(event: BeforeToolCallEvent) -> None:
        event.interrupt("approve", reason=object())

    agent = Agent(ScriptedModel(tool_call("remember", {"note": "x"})), tools=[remember], hooks=[approval],
                  session_manager=session(tmp_path))
    with pytest.raises(SessionException, match="not JSON serializable"):
        agent("go")


def test_manager_pickles_and_null_manager_works(tmp_path: Path) -> None:
    manager = pickle.loads(pickle.dumps(session(tmp_path)))
    agent = Agent(ScriptedModel(text("x")), conversation_manager=NullConversationManager(), session_manager=manager)
    agent("y")
    restored = Agent(ScriptedModel(), conversation_manager=NullConversationManager(), session_manager=session(tmp_path))
    assert len(restored.messages) == 2
    with pytest.raises(SessionException, match="NullConversationManager"):
        Agent(ScriptedModel(), session_manager=session(tmp_path))  # a different manager cannot take over its state


def test_delete_session_removes_everything(tmp_path: Path) -> None:
    manager = session(tmp_path)
    Agent(ScriptedModel(text("x")), session_manager=manager)("y")
    manager.repository.delete_session("s1")
    assert not (tmp_path / "session_s1").exists()


def test_agent_with_a_session_pickles_and_keeps_persisting(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel(text("one"), text("two")), session_manager=session(tmp_path))
    agent("first")
    clone = pickle.loads(pickle.dumps(agent))  # plain pickle: what an actor restart or a copy does
    clone("second")
    assert Agent(ScriptedModel(), session_manager=session(tmp_path)).messages == clone.messages


def test_after_model_checkpoint_resumes_in_a_new_agent_and_runs_the_tools(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        ran.append(target)
        return f"deployed {target}"

    first = Agent(ScriptedModel(tool_call("deploy", {"target": "prod"})), tools=[deploy], checkpointing=True,
                  session_manager=session(tmp_path))
    paused = first("deploy")
    assert paused.stop_reason == "checkpoint" and paused.checkpoint is not None
    assert paused.checkpoint.position == "after_model"
    saved = json.loads(json.dumps(paused.checkpoint.to_dict()))

    # Another process: the restored history still ends on the tool use, so the resume runs the tool.
    model = ScriptedModel(text("done"))
    second = Agent(model, tools=[deploy], checkpointing=True, session_manager=session(tmp_path))
    assert "toolUse" in second.messages[-1]["content"][0]
    after_tools = second({"checkpointResume": {"checkpoint": saved}})
    assert after_tools.stop_reason == "checkpoint" and ran == ["prod"]
    assert not model.calls
    assert second({"checkpointResume": {"checkpoint": after_tools.checkpoint.to_dict()}}).stop_reason == "end_turn"
    assert second.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "deployed prod"}]
    assert_valid_history(second.messages)


def test_a_crash_while_resuming_an_interrupt_does_not_run_finished_tools_again(tmp_path: Path) -> None:
    ran: list[str] = []
    crashed = tmp_path / "crashed"

    @tool(context=True)
    def refund(tool_context: ToolContext) -> str:
        """Refund after approval."""
        ran.append(f"refund {tool_context.interrupt('approve refund')}")
        return "refunded"

    @tool(context=True)
    def notify(tool_context: ToolContext) -> str:
        """Notify after approval; the first resume 'dies' here."""
        ran.append(f"notify {tool_context.interrupt('approve notify')}")
        if not crashed.exists():
            agent_file = agent_dir(tmp_path / "live") / "agent.json"
            deadline = time.monotonic() + 10
            while "refunded" not in agent_file.read_text() and time.monotonic() < deadline:
                time.sleep(0.01)  # the refund runs beside this tool; its result is stored when it ends
            shutil.copytree(tmp_path / "live", crashed)  # the store as a process killed at this moment leaves it
        return "notified"

    live = FileSessionManager("s1", storage_dir=tmp_path / "live")
    paused = Agent(ScriptedModel(tool_calls(("refund", {}, "use-refund"), ("notify", {}, "use-notify"))),
                   tools=[refund, notify], session_manager=live)("go")
    answers = [{"interruptResponse": {"interruptId": item.id, "response": "yes"}} for item in paused.interrupts]
    Agent(ScriptedModel(text("done")), tools=[refund, notify],
          session_manager=FileSessionManager("s1", storage_dir=tmp_path / "live"))(answers)
    assert sorted(ran) == ["notify yes", "refund yes"]

    ran.clear()
    restored = Agent(ScriptedModel(text("done")), tools=[refund, notify], session_manager=FileSessionManager("s1", storage_dir=crashed))
    assert restored(answers).stop_reason == "end_turn"
    assert ran == ["notify yes"]  # the refund finished before the crash: its stored result is used
    assert_valid_history(restored.messages)
    results = [block["toolResult"]["content"] for block in restored.messages[2]["content"]]
    assert results == [[{"text": "refunded"}], [{"text": "notified"}]]
