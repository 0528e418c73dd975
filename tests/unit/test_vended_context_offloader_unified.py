"""ContextOffloader with a ``ray_harness.storage`` Storage (Strands' unified storage): keys, framing, eviction."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent, tool
from ray_harness.sandbox.local import LocalEnvironment
from ray_harness.storage import InMemoryStorage, LocalFileStorage
from ray_harness.testing import ScriptedModel, tool_call
from ray_harness.types.content import ToolResult
from ray_harness.vended_plugins.context_offloader import ContextOffloader, InMemoryStorage as OffloaderMemory
from ray_harness.vended_plugins.context_offloader.unified import frame, unframe

BIG = "\n".join(f"line {n}: {'ERROR disk full' if n == 150 else 'ok'}" for n in range(1, 301))
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


@tool
def big_log() -> str:
    """A long log."""
    return BIG


@tool
def small() -> str:
    """A short answer."""
    return "short"


@tool
def picture() -> dict[str, Any]:
    """Text and an image."""
    return {"status": "success", "content": [{"text": BIG}, {"image": {"format": "png", "source": {"bytes": PNG}}}]}


def _agent(offloader: ContextOffloader, *steps: Any, **options: Any) -> Agent:
    return Agent(model=ScriptedModel([*steps, "done"]), tools=[big_log, small, picture], plugins=[offloader],
                 **options)


def _result(agent: Agent, use_id: str) -> ToolResult:
    for message in agent.messages:
        for block in message["content"]:
            if "toolResult" in block and block["toolResult"]["toolUseId"] == use_id:
                return block["toolResult"]
    raise AssertionError(f"no result for {use_id}")


def _retrieve(use_id: str, **arguments: Any) -> Any:
    return tool_call("retrieve_offloaded_content", arguments, tool_use_id=use_id)


def test_blocks_go_under_offloader_framed_with_their_type_and_the_key_is_the_reference() -> None:
    storage = InMemoryStorage()
    agent = _agent(ContextOffloader(storage, max_result_tokens=200, preview_tokens=10),
                   tool_call("picture", tool_use_id="u1"), _retrieve("r1", reference="u1_0", pattern="ERROR",
                                                                    context_lines=0),
                   _retrieve("r2", reference="u1_1"))
    agent("go")
    assert sorted(storage._shelf.entries) == ["offloader/u1_0", "offloader/u1_1"]
    assert unframe(storage._shelf.entries["offloader/u1_0"]) == (BIG.encode(), "text/plain")
    assert storage._shelf.entries["offloader/u1_1"] == frame(PNG, "image/png")
    content = _result(agent, "u1")["content"]
    assert "  u1_0 (text, " in content[0]["text"] and content[1] == {
        "text": f"[image: png, {len(PNG)} bytes | ref: u1_1]"}
    assert _result(agent, "r1")["content"] == [{"text": "[1 match for /ERROR/]\n\n> 150| line 150: ERROR disk full"}]
    assert _result(agent, "r2")["content"][0]["image"]["source"]["bytes"] == PNG


def test_a_storage_scoped_already_is_used_as_it_is() -> None:
    storage = InMemoryStorage()
    agent = _agent(ContextOffloader(storage.namespace("mine"), max_result_tokens=200, preview_tokens=10),
                   tool_call("big_log", tool_use_id="u1"))
    agent("go")
    assert list(storage._shelf.entries) == ["mine/u1_0"]


def test_an_unknown_reference_and_a_corrupt_frame_are_named() -> None:
    storage = InMemoryStorage()
    agent = _agent(ContextOffloader(storage, max_result_tokens=200, preview_tokens=10),
                   _retrieve("r1", reference="nothing"), _retrieve("r2", reference="bad"))
    storage._shelf.entries["offloader/bad"] = b"\x00"
    agent("go")
    assert "reference not found: nothing" in _result(agent, "r1")["content"][0]["text"]
    assert "Corrupt storage frame" in _result(agent, "r2")["content"][0]["text"]
    with pytest.raises(ValueError, match="content-type length 9 exceeds frame size 4"):
        unframe(b"\x00\x09ab")


def test_blocks_unused_for_evict_after_cycles_are_deleted_and_retrieval_keeps_them() -> None:
    storage = InMemoryStorage()
    # A tool result counts as stored (or retrieved) in the cycle its model call opened: e1 in 1, e2 in 2.
    steps = [tool_call("big_log", tool_use_id="e1"), tool_call("big_log", tool_use_id="e2"),
             _retrieve("r1", reference="e2_0", line_range={"start": 1, "end": 1}),  # e2 used in cycle 3
             tool_call("small", tool_use_id="s1"), tool_call("small", tool_use_id="s2"),
             _retrieve("r2", reference="e1_0"),  # cycle 6: e1, unused for more than 3 cycles, is gone
             _retrieve("r3", reference="e2_0", line_range={"start": 2, "end": 2})]  # cycle 7: e2 is kept
    agent = _agent(ContextOffloader(storage, max_result_tokens=200, preview_tokens=10, evict_after_cycles=3),
                   *steps)
    agent("go")
    assert "reference not found: e1_0" in _result(agent, "r2")["content"][0]["text"]
    assert "line 2: ok" in _result(agent, "r3")["content"][0]["text"]
    assert list(storage._shelf.entries) == ["offloader/e2_0"]


def test_without_evict_after_cycles_nothing_is_deleted() -> None:
    storage = InMemoryStorage()
    steps = [tool_call("big_log", tool_use_id="e1"), *[tool_call("small", tool_use_id=f"s{n}") for n in range(4)]]
    agent = _agent(ContextOffloader(storage, max_result_tokens=200, preview_tokens=10, evict_after_cycles=None),
                   *steps)
    agent("go")
    assert list(storage._shelf.entries) == ["offloader/e1_0"]


def test_an_eviction_that_fails_is_kept_and_tried_again() -> None:
    class Sticky(InMemoryStorage):
        refusals = 0

        async def delete(self, key: str) -> None:
            if Sticky.refusals < 1:
                Sticky.refusals += 1
                raise OSError("busy")
            await super().delete(key)

    storage = Sticky()
    steps = [tool_call("big_log", tool_use_id="e1"), *[tool_call("small", tool_use_id=f"s{n}") for n in range(3)]]
    agent = _agent(ContextOffloader(storage, max_result_tokens=200, preview_tokens=10, evict_after_cycles=1),
                   *steps)
    agent("go")
    assert Sticky.refusals == 1 and storage._shelf.entries == {}


def test_local_file_storage_is_bound_to_the_agents_sandbox(tmp_path: Path) -> None:
    offloader = ContextOffloader(LocalFileStorage("offloads"), max_result_tokens=200, preview_tokens=10)
    agent = _agent(offloader, tool_call("big_log", tool_use_id="f1"), sandbox=LocalEnvironment(str(tmp_path)))
    agent("go")
    stored = tmp_path / "offloads" / "offloader" / "f1_0"
    assert unframe(stored.read_bytes()) == (BIG.encode(), "text/plain")


def test_without_storage_the_agents_storage_is_used_under_offloader() -> None:
    shared = InMemoryStorage()

    class StoringAgent(Agent):
        storage = shared

    offloader = ContextOffloader(max_result_tokens=200, preview_tokens=10)
    agent = StoringAgent(model=ScriptedModel([tool_call("big_log", tool_use_id="a1"), "done"]), tools=[big_log],
                         plugins=[offloader])
    agent("go")
    assert list(shared._shelf.entries) == ["offloader/a1_0"]
    plain = Agent(model=ScriptedModel([]), plugins=[default := ContextOffloader()])
    assert isinstance(default._storage, OffloaderMemory) and plain.name  # no agent storage: the offloader's own


def test_an_agent_pickled_with_a_unified_storage_offloads_and_retrieves_in_its_copy() -> None:
    storage = InMemoryStorage()
    agent = _agent(ContextOffloader(storage, max_result_tokens=200, preview_tokens=10),
                   tool_call("big_log", tool_use_id="p1"), "one", _retrieve("p2", reference="p1_0", pattern="ERROR",
                                                                            context_lines=0))
    agent("first")
    copy = pickle.loads(cloudpickle.dumps(agent))
    copy("second")
    assert _result(copy, "p2")["content"] == [{"text": "[1 match for /ERROR/]\n\n> 150| line 150: ERROR disk full"}]


def test_a_storage_with_neither_interface_is_refused() -> None:
    with pytest.raises(ValueError, match=r"storage must have async store\(\) and retrieve\(\) methods .* or "
                                         r"write\(\), read\(\) and delete\(\)"):
        ContextOffloader(object())  # type: ignore[arg-type]


def test_the_frame_is_strands_own() -> None:
    plugin = pytest.importorskip("strands.vended_plugins.context_offloader.plugin")
    assert frame(b"data", "image/png") == plugin._frame_content(b"data", "image/png")
    assert unframe(plugin._frame_content(b"\x00\x01", "application/json")) == (b"\x00\x01", "application/json")
