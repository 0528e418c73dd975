"""Runtime pieces that need no Ray: the snapshot store, the runner's replay logic, lazy imports."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.agent import SnapshotDelta
from ray_harness.runtime._runner import AgentRunner
from ray_harness.runtime._store import FileAgentStore
from ray_harness.runtime._wire import InvokeRequest
from ray_harness.testing import ModelCall, ScriptedModel, text, tool_calls
from ray_harness.types.exceptions import SessionException
from tests.closing import BOTH_ENDED, two_waiting_tools

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_package_and_runtime_does_not_import_ray() -> None:
    code = "import sys, ray_harness, ray_harness.runtime; print('ray' in sys.modules)"
    output = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert output.stdout.strip() == "False"


def test_store_round_trip_and_atomic_replace(tmp_path: Path) -> None:
    store = FileAgentStore(tmp_path)
    store.save("ns/ray_harness:agent:a", {"messages": [1]})
    store.save("ns/ray_harness:agent:a", {"messages": [1, 2]})
    assert store.load("ns/ray_harness:agent:a") == {"messages": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == [store.path("ns/ray_harness:agent:a").name]  # no temp files left
    assert store.load("missing") is None
    store.delete("ns/ray_harness:agent:a")
    assert store.load("ns/ray_harness:agent:a") is None


def test_corrupted_snapshot_names_the_file(tmp_path: Path) -> None:
    store = FileAgentStore(tmp_path)
    store.path("k").write_bytes(b"not a pickle")
    with pytest.raises(SessionException, match=r"agent snapshot .*k\.pkl.* is unreadable"):
        store.load("k")


def test_default_directory_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_HARNESS_STATE_DIR", str(tmp_path))
    assert FileAgentStore().directory == tmp_path


def _responder(call: ModelCall) -> Any:
    results = [b["toolResult"] for b in call.messages[-1]["content"] if "toolResult" in b]
    if not results:
        return tool_calls(("fast", {"tag": "a"}, "id-a"), ("blocking", {"tag": "b"}, "id-b"))
    return text(" + ".join(r["content"][0]["text"] for r in results))


def _agent(log: list[str], gate: asyncio.Event) -> Agent:
    @tool
    def fast(tag: str) -> str:
        """Quick."""
        log.append(tag)
        return tag

    @tool
    async def blocking(tag: str) -> str:
        """Waits for the gate."""
        log.append(tag)
        await gate.wait()
        return tag

    return Agent(ScriptedModel(_responder, loop=True), tools=[fast, blocking], retry_strategy=None)


async def test_a_replayed_invocation_skips_completed_tools(tmp_path: Path) -> None:
    store = FileAgentStore(tmp_path)
    log: list[str] = []
    gate = asyncio.Event()
    first = AgentRunner(_agent(log, gate), store=store, key="k")
    running = asyncio.create_task(first.invoke(InvokeRequest(invocation_id="inv-1", prompt="go")))
    for _ in range(500):
        if sorted(log) == ["a", "b"] and first._batch_results:
            break
        await asyncio.sleep(0.01)
    crashed = store.path("k").read_bytes()  # what was on disk when the process "died"
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    store.path("k").write_bytes(crashed)

    gate.set()
    second = AgentRunner(_agent(log, gate), store=store, key="k")
    assert second.restore() is True
    result = await second.invoke(InvokeRequest(invocation_id="inv-1", prompt="go"))
    assert str(result) == "a + b\n"
    assert sorted(log) == ["a", "b", "b"]  # the completed tool did not run again; the running one did
    assert [m["role"] for m in second.agent.messages] == ["user", "assistant", "user", "assistant"]
    again = await second.invoke(InvokeRequest(invocation_id="inv-1", prompt="go"))  # a duplicate retry returns the stored result
    assert str(again) == "a + b\n" and len(second.agent.messages) == 4


async def test_a_node_slot_journals_from_its_first_tool_result_and_adopts_only_its_own_invocation(
        tmp_path: Path) -> None:
    store = FileAgentStore(tmp_path)
    quiet = AgentRunner(Agent(ScriptedModel(text("no tools"), loop=True), retry_strategy=None), store=store,
                        key="slot:g/a", journal="side_effects")
    await quiet.invoke(InvokeRequest(invocation_id="inv-0", prompt="hi"))
    assert store.load("slot:g/a") is None  # a run without tools writes nothing

    log: list[str] = []
    gate = asyncio.Event()
    history = [{"role": "user", "content": [{"text": "earlier"}]}, {"role": "assistant", "content": [{"text": "ok"}]}]

    def copy_with_history() -> Agent:  # the caller's copy: the history the run starts from
        agent = _agent(log, gate)
        agent.messages = [dict(message) for message in history]
        return agent

    first = AgentRunner(copy_with_history(), store=store, key="slot:g/b", journal="side_effects")
    running = asyncio.create_task(first.invoke(InvokeRequest(invocation_id="inv-1", prompt="go")))
    for _ in range(500):
        if sorted(log) == ["a", "b"] and first._batch_results:
            break
        await asyncio.sleep(0.01)
    crashed = store.path("slot:g/b").read_bytes()  # written at the first tool result
    entry = store.load("slot:g/b")
    assert entry is not None and entry["base"] == "inv-1"
    assert isinstance(entry["agent"], SnapshotDelta)  # what the run added, not the history before it
    assert entry["agent"].base_messages == 2 and entry["agent"].snapshot.messages[0]["content"] == [{"text": "go"}]
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    store.path("slot:g/b").write_bytes(crashed)

    gate.set()
    other = AgentRunner(copy_with_history(), store=store, key="slot:g/b", journal="side_effects")
    assert other.adopt("inv-2") is False  # a journal of another invocation: the caller's copy wins
    assert other.agent.messages == history
    stranger = AgentRunner(_agent(log, gate), store=store, key="slot:g/b", journal="side_effects")
    assert stranger.adopt("inv-1") is False  # built from another history than the run started from
    second = AgentRunner(copy_with_history(), store=store, key="slot:g/b", journal="side_effects")
    assert second.adopt("inv-1") is True
    result = await second.invoke(InvokeRequest(invocation_id="inv-1", prompt="go"))
    assert str(result) == "a + b\n"
    assert sorted(log) == ["a", "b", "b"]  # the completed tool did not run again; the running one did
    assert second.agent.messages[:2] == history and len(second.agent.messages) == 6
    second.forget()
    assert store.load("slot:g/b") is None


async def test_a_run_still_going_after_forget_writes_no_journal(tmp_path: Path) -> None:
    # shutdown() forgets the journal, then kills the actor: a step landing in between must not write it back.
    store = FileAgentStore(tmp_path)
    log: list[str] = []
    gate = asyncio.Event()
    runner = AgentRunner(_agent(log, gate), store=store, key="agent")  # "every_step": journaled from the start
    running = asyncio.create_task(runner.invoke(InvokeRequest(invocation_id="inv-1", prompt="go")))
    for _ in range(500):
        if sorted(log) == ["a", "b"] and runner._batch_results:
            break
        await asyncio.sleep(0.01)
    assert store.load("agent") is not None
    runner.forget()
    gate.set()  # the blocking tool completes: a step that would journal
    await running
    assert store.load("agent") is None


def test_a_runner_refuses_an_unknown_journal_policy() -> None:
    with pytest.raises(ValueError, match="journal must be"):
        AgentRunner(Agent(ScriptedModel(text("x"))), journal="sometimes")  # type: ignore[arg-type]


async def test_cancel_that_overtakes_its_invocation_lands() -> None:
    runner = AgentRunner(Agent(ScriptedModel(text("late", delay=30)), retry_strategy=None))
    assert runner.cancel("inv-9") is False
    result = await asyncio.wait_for(runner.invoke(InvokeRequest(invocation_id="inv-9", prompt="hi")), 120)
    assert result.stop_reason == "cancelled"


@pytest.mark.parametrize("layer", ["stream", "wire_stream"])
async def test_the_next_invocation_starts_once_a_closed_one_has_ended(layer: str) -> None:
    """A caller that stops reading mid-tool (its consumer is gone) frees the runner once the agent is idle.

    At the next invocation's turn the closed one's tool has ended and its history is rolled back, and the agent
    is free to restore (a host slot restores it there); the turn used to come while the closed invocation was
    still unwinding (``ConcurrencyException``, the tool still running).
    """
    tools: list[str] = []
    agent = two_waiting_tools(tools)
    runner = AgentRunner(agent)
    closed = getattr(runner, layer)(InvokeRequest(invocation_id="x", prompt="x", events="all"))
    async for item in closed:  # nobody reads further once the tool runs
        event = item if isinstance(item, dict) else item.event
        if event.get("type") == "tool_start" and tools:
            break
    await closed.aclose()
    seen: list[Any] = []

    def prepare() -> None:  # what a host slot does at the run's turn
        agent.restore(agent.snapshot())
        seen.append((sorted(tools), len(agent.messages)))

    events = runner.stream(InvokeRequest(invocation_id="y", prompt="y"), events="result", prepare=prepare)
    results = await asyncio.wait_for(_collect(events), 20)
    assert seen == [(BOTH_ENDED, 0)] and str(results[-1]["result"]).strip() == "next"


async def _collect(events: Any) -> list[Any]:
    return [event async for event in events]
