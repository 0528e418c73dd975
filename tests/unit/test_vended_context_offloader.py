"""ContextOffloader (Strands' context offloader): offloading tool results, the retrieval tool, pickling."""

from __future__ import annotations

import json
import pickle
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent, tool
from ray_harness.hooks import BeforeToolCallEvent
from ray_harness.testing import ScriptedModel, tool_call
from ray_harness.types.content import ToolResult
from ray_harness.vended_plugins.context_offloader import (
    ContextOffloader,
    FileStorage,
    InMemoryStorage,
    S3Storage,
    ShouldOffload,
    Storage,
)

BIG = "\n".join(f"line {n}: {'ERROR disk full' if n == 150 else 'ok'}" for n in range(1, 301))
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
PDF = b"%PDF-1.7 " + b"x" * 3000


@tool
def big_log() -> str:
    """A long log."""
    return BIG


@tool
def small() -> str:
    """A short answer."""
    return "short"


@tool
def mixed() -> dict[str, Any]:
    """Text, JSON, an image, a document and an image that is not bytes."""
    return {"status": "success", "content": [
        {"text": BIG},
        {"json": {"rows": list(range(50))}},
        {"image": {"format": "png", "source": {"bytes": PNG}}},
        {"document": {"format": "pdf", "name": "report", "source": {"bytes": PDF}}},
        {"image": {"format": "png", "source": {"location": {"type": "s3", "uri": "s3://b/k.png"}}}},
    ]}


def _run(offloader: ContextOffloader, *steps: Any, tools: list[Any] | None = None) -> Agent:
    agent = Agent(model=ScriptedModel([*steps, "done"]), tools=tools or [big_log, small, mixed],
                  plugins=[offloader])
    agent("go")
    return agent


def _result(agent: Agent, use_id: str) -> ToolResult:
    for message in agent.messages:
        for block in message["content"]:
            if "toolResult" in block and block["toolResult"]["toolUseId"] == use_id:
                return block["toolResult"]
    raise AssertionError(f"no result for {use_id}")


def _retrieve(use_id: str, **arguments: Any) -> Any:
    return tool_call("retrieve_offloaded_content", arguments, tool_use_id=use_id)


# ---- offloading ---------------------------------------------------------------------------------


def test_a_result_below_the_threshold_stays_and_nothing_is_stored() -> None:
    storage = InMemoryStorage()
    agent = _run(ContextOffloader(storage, max_result_tokens=100, preview_tokens=10),
                 tool_call("small", tool_use_id="s1"))
    assert _result(agent, "s1")["content"] == [{"text": "short"}]
    assert storage._entries == {}


def test_an_oversized_result_is_stored_and_replaced_by_a_preview_and_its_reference() -> None:
    storage = InMemoryStorage()
    agent = _run(ContextOffloader(storage, max_result_tokens=200, preview_tokens=10),
                 tool_call("big_log", tool_use_id="t1"))
    result = _result(agent, "t1")
    assert result["status"] == "success"
    assert len(result["content"]) == 1
    shown = result["content"][0]["text"]
    assert shown.startswith("[Offloaded: 1 blocks, ~")
    assert "use retrieve_offloaded_content with a reference" in shown
    assert f"\n\n{BIG[:40]}\n\n[Stored references:]\n" in shown  # 10 preview tokens = 40 characters
    assert BIG[:41] not in shown
    assert shown.endswith(f"  mem_1_t1_0 (text, {len(BIG):,} chars)")
    assert storage._entries["mem_1_t1_0"][:2] == (BIG.encode(), "text/plain")


def test_each_block_is_stored_with_its_type_and_media_leave_placeholders() -> None:
    storage = InMemoryStorage()
    agent = _run(ContextOffloader(storage, max_result_tokens=200, preview_tokens=50),
                 tool_call("mixed", tool_use_id="m1"))
    json_text = json.dumps({"rows": list(range(50))}, indent=2)
    assert {ref: entry[:2] for ref, entry in storage._entries.items()} == {
        "mem_1_m1_0": (BIG.encode(), "text/plain"),
        "mem_2_m1_1": (json_text.encode(), "application/json"),
        "mem_3_m1_2": (PNG, "image/png"),
        "mem_4_m1_3": (PDF, "application/pdf"),
    }
    content = _result(agent, "m1")["content"]
    assert content[0]["text"].startswith("[Offloaded: 5 blocks, ~")
    assert "  mem_3_m1_2 (image/png, 2,056 bytes)\n  mem_4_m1_3 (report, 3,009 bytes)" in content[0]["text"]
    assert content[1:] == [
        {"text": "[image: png, 2056 bytes | ref: mem_3_m1_2]"},
        {"text": "[document: pdf, report, 3009 bytes | ref: mem_4_m1_3]"},
        {"image": {"format": "png", "source": {"location": {"type": "s3", "uri": "s3://b/k.png"}}}},
    ]


def test_the_preview_is_cut_from_text_and_json_together() -> None:
    @tool
    def two() -> dict[str, Any]:
        """Two blocks."""
        return {"status": "success", "content": [{"text": "head"}, {"json": {"k": "v" * 2000}}]}

    agent = _run(ContextOffloader(InMemoryStorage(), max_result_tokens=100, preview_tokens=5),
                 tool_call("two", tool_use_id="w1"), tools=[two])
    shown = _result(agent, "w1")["content"][0]["text"]
    assert '\n\nhead\n{\n  "k": "vvvvv\n\n[Stored references:]' in shown  # 20 characters of "head\n" + JSON


def test_an_empty_text_block_is_dropped_and_the_placeholders_keep_their_own_references() -> None:
    @tool
    def gappy() -> dict[str, Any]:
        """An empty text block before an image."""
        return {"status": "success", "content": [{"text": BIG}, {"text": ""},
                                                 {"image": {"format": "png", "source": {"bytes": PNG}}}]}

    storage = InMemoryStorage()
    agent = _run(ContextOffloader(storage, max_result_tokens=200, preview_tokens=10),
                 tool_call("gappy", tool_use_id="g1"), tools=[gappy])
    assert sorted(storage._entries) == ["mem_1_g1_0", "mem_2_g1_2"]
    assert _result(agent, "g1")["content"][1:] == [{"text": "[image: png, 2056 bytes | ref: mem_2_g1_2]"}]


def test_a_failing_storage_keeps_the_original_result() -> None:
    class Broken:
        async def store(self, key: str, content: bytes, content_type: str = "text/plain") -> str:
            raise OSError("disk full")

        async def retrieve(self, reference: str) -> tuple[bytes, str]:
            raise KeyError(reference)

    agent = _run(ContextOffloader(Broken(), max_result_tokens=100, preview_tokens=10),
                 tool_call("big_log", tool_use_id="b1"))
    assert _result(agent, "b1")["content"] == [{"text": BIG}]


def test_the_threshold_is_the_models_token_count_of_the_result() -> None:
    counted: list[Any] = []

    class Counting(ScriptedModel):
        async def count_tokens(self, messages: Any, *args: Any, **kwargs: Any) -> int:
            counted.append(messages)
            return 100  # equal to the threshold: kept

    agent = Agent(model=Counting([tool_call("big_log", tool_use_id="c1"), "done"]), tools=[big_log],
                  plugins=[ContextOffloader(InMemoryStorage(), max_result_tokens=100, preview_tokens=10)])
    agent("go")
    assert _result(agent, "c1")["content"] == [{"text": BIG}]
    assert [{"role": "user", "content": [{"toolResult": _result(agent, "c1")}]}] in counted


# ---- should_offload ----------------------------------------------------------------------------


def test_should_offload_decides_per_tool_with_the_token_count() -> None:
    asked: list[tuple[str, int]] = []

    def only_mixed(tool_name: str, token_count: int, **kwargs: Any) -> bool:
        asked.append((tool_name, token_count))
        return tool_name == "mixed"

    policy: ShouldOffload = only_mixed
    agent = _run(ContextOffloader(InMemoryStorage(), max_result_tokens=200, preview_tokens=10,
                                  should_offload=policy),
                 tool_call("big_log", tool_use_id="k1"), tool_call("small", tool_use_id="k2"),
                 tool_call("mixed", tool_use_id="k3"))
    assert _result(agent, "k1")["content"] == [{"text": BIG}]
    assert _result(agent, "k3")["content"][0]["text"].startswith("[Offloaded: 5 blocks")
    assert [name for name, _ in asked] == ["big_log", "mixed"]  # "small" is under the threshold: not asked
    assert all(tokens > 200 for _, tokens in asked)


def test_an_async_should_offload_is_awaited_and_one_that_raises_offloads() -> None:
    async def never(tool_name: str, token_count: int, **kwargs: Any) -> bool:
        return False

    def broken(tool_name: str, token_count: int, **kwargs: Any) -> bool:
        raise RuntimeError("policy bug")

    kept = _run(ContextOffloader(InMemoryStorage(), max_result_tokens=200, preview_tokens=10, should_offload=never),
                tool_call("big_log", tool_use_id="a1"))
    assert _result(kept, "a1")["content"] == [{"text": BIG}]
    offloaded = _run(ContextOffloader(InMemoryStorage(), max_result_tokens=200, preview_tokens=10,
                                      should_offload=broken), tool_call("big_log", tool_use_id="a2"))
    assert _result(offloaded, "a2")["content"][0]["text"].startswith("[Offloaded:")


# ---- the retrieval tool ------------------------------------------------------------------------


def _offload_then(*steps: Any, storage: Storage | None = None) -> Agent:
    return _run(ContextOffloader(storage or InMemoryStorage(), max_result_tokens=200, preview_tokens=10),
                tool_call("mixed", tool_use_id="m1"), *steps)


def test_a_pattern_returns_numbered_matches_with_context_lines() -> None:
    agent = _offload_then(_retrieve("r1", reference="mem_1_m1_0", pattern="ERROR|FATAL", context_lines=1))
    assert _result(agent, "r1")["content"] == [{"text": (
        "[1 match for /ERROR|FATAL/]\n\n"
        "  149| line 149: ok\n> 150| line 150: ERROR disk full\n  151| line 151: ok")}]


def test_a_line_range_returns_those_lines_and_a_pattern_searches_within_it() -> None:
    agent = _offload_then(_retrieve("r1", reference="mem_1_m1_0", line_range={"start": 9, "end": 11}),
                          _retrieve("r2", reference="mem_1_m1_0", pattern="ERROR",
                                    line_range={"start": 1, "end": 100}),
                          _retrieve("r3", reference="mem_1_m1_0", context_lines=2))
    assert _result(agent, "r1")["content"][0]["text"] == (
        "[Lines 9-11 of 300]\n\n   9| line 9: ok\n  10| line 10: ok\n  11| line 11: ok")
    assert _result(agent, "r2")["content"][0]["text"] == (
        "No matches found for pattern 'ERROR' in lines 1-100 (searched 100 lines).")
    assert _result(agent, "r3")["content"][0]["text"] == "[Lines 1-2 of 300]\n\n  1| line 1: ok\n  2| line 2: ok"


def test_without_pattern_or_range_each_block_comes_back_whole_in_its_own_kind() -> None:
    agent = _offload_then(_retrieve("r1", reference="mem_1_m1_0"), _retrieve("r2", reference="mem_2_m1_1"),
                          _retrieve("r3", reference="mem_3_m1_2"), _retrieve("r4", reference="mem_4_m1_3"))
    assert _result(agent, "r1")["content"] == [{"text": BIG}]
    assert _result(agent, "r2")["content"] == [{"json": {"rows": list(range(50))}}]
    assert _result(agent, "r3")["content"] == [{"image": {"format": "png", "source": {"bytes": PNG}}}]
    assert _result(agent, "r4")["content"] == [
        {"document": {"format": "pdf", "name": "mem_4_m1_3", "source": {"bytes": PDF}}}]


def test_retrieval_errors_name_the_problem() -> None:
    agent = _offload_then(_retrieve("r1", reference="mem_9_nope_0"),
                          _retrieve("r2", reference="mem_3_m1_2", pattern="x"),
                          _retrieve("r3", reference="mem_1_m1_0", line_range={"start": 400, "end": 401}))
    texts = [_result(agent, use)["content"][0]["text"] for use in ("r1", "r2", "r3")]
    assert all(_result(agent, use)["status"] == "error" for use in ("r1", "r2", "r3"))
    assert "reference not found: mem_9_nope_0" in texts[0]
    assert "cannot search binary content (image/png)" in texts[1]
    assert "line_range.start (400) is beyond content length (300 lines)" in texts[2]


def test_the_retrieval_tools_own_large_results_are_not_offloaded_again() -> None:
    storage = InMemoryStorage()
    agent = _offload_then(_retrieve("r1", reference="mem_1_m1_0"), storage=storage)
    assert _result(agent, "r1")["content"] == [{"text": BIG}]
    assert len(storage._entries) == 4


def test_a_delegating_agent_tools_answer_and_a_cancelled_call_stay_whole() -> None:
    writer = Agent(model=ScriptedModel([BIG]), name="writer")
    storage = InMemoryStorage()
    delegating = Agent(model=ScriptedModel([tool_call("writer", {"input": "write"}, tool_use_id="d1")]),
                       tools=[writer.as_tool(name="writer", delegate=True)],
                       plugins=[ContextOffloader(storage, max_result_tokens=200, preview_tokens=10)])
    delegating("go")
    assert BIG in _result(delegating, "d1")["content"][0]["text"]

    def cancel(event: BeforeToolCallEvent) -> None:
        event.cancel_tool = BIG

    other = InMemoryStorage()
    cancelled = Agent(model=ScriptedModel([tool_call("small", tool_use_id="x1"), "done"]), tools=[small],
                      plugins=[ContextOffloader(other, max_result_tokens=200, preview_tokens=10)])
    cancelled.add_hook(cancel)
    cancelled("go")
    assert BIG in _result(cancelled, "x1")["content"][0]["text"]
    assert storage._entries == other._entries == {}


def test_without_the_retrieval_tool_the_guidance_points_to_the_agents_tools() -> None:
    agent = _run(ContextOffloader(InMemoryStorage(), max_result_tokens=200, preview_tokens=10,
                                  include_retrieval_tool=False), tool_call("big_log", tool_use_id="t1"))
    assert "retrieve_offloaded_content" not in agent.tool_names
    shown = _result(agent, "t1")["content"][0]["text"]
    assert "use your available tools to access specific data" in shown
    assert "retrieve_offloaded_content" not in shown
    with_tool = Agent(model=ScriptedModel([]), plugins=[ContextOffloader()])
    assert "retrieve_offloaded_content" in with_tool.tool_names


# ---- storage binding, defaults, pickling -------------------------------------------------------


def test_file_storage_is_bound_to_the_agents_sandbox(tmp_path: Any) -> None:
    from ray_harness.sandbox.local import LocalEnvironment

    offloader = ContextOffloader(FileStorage("artifacts"), max_result_tokens=200, preview_tokens=10)
    agent = Agent(model=ScriptedModel([tool_call("big_log", tool_use_id="f1"), "done"]), tools=[big_log],
                  plugins=[offloader], sandbox=LocalEnvironment(tmp_path))
    agent("go")
    files = sorted(path.name for path in (tmp_path / "artifacts").iterdir())
    assert len(files) == 2 and files[0] == ".metadata.json" and files[1].endswith("_1_f1_0.txt")
    assert (tmp_path / "artifacts" / files[1]).read_text() == BIG
    assert f"  {files[1]} (text, {len(BIG):,} chars)" in _result(agent, "f1")["content"][0]["text"]


def test_the_default_storage_is_in_memory_and_belongs_to_one_agent() -> None:
    offloader = ContextOffloader()
    first = Agent(model=ScriptedModel([]), plugins=[offloader])  # kept: the storage is bound to a live agent
    assert isinstance(offloader._storage, InMemoryStorage)
    with pytest.raises(ValueError, match="InMemoryStorage cannot be shared across multiple agents"):
        Agent(model=ScriptedModel([]), plugins=[offloader])
    assert first.name


def test_in_memory_entries_unused_for_evict_after_turns_cycles_are_evicted() -> None:
    storage = InMemoryStorage(evict_after_turns=1)
    steps = [tool_call("big_log", tool_use_id="e1"), tool_call("small", tool_use_id="e2"),
             tool_call("small", tool_use_id="e3"), _retrieve("e4", reference="mem_1_e1_0")]
    agent = _run(ContextOffloader(storage, max_result_tokens=200, preview_tokens=10), *steps)
    assert "reference not found: mem_1_e1_0" in _result(agent, "e4")["content"][0]["text"]
    assert storage._entries == {}


def test_an_agent_pickled_with_the_plugin_offloads_in_its_copy() -> None:
    storage = InMemoryStorage()
    agent = Agent(model=ScriptedModel([tool_call("big_log", tool_use_id="p1"), "one",
                                       _retrieve("p2", reference="mem_1_p1_0", pattern="ERROR", context_lines=0),
                                       tool_call("mixed", tool_use_id="p3"), "two"]),
                  tools=[big_log, mixed],
                  plugins=[ContextOffloader(storage, max_result_tokens=200, preview_tokens=10)])
    agent("first")
    copy = pickle.loads(cloudpickle.dumps(agent))
    copy("second")
    assert _result(copy, "p2")["content"] == [{"text": "[1 match for /ERROR/]\n\n> 150| line 150: ERROR disk full"}]
    assert _result(copy, "p3")["content"][0]["text"].startswith("[Offloaded: 5 blocks")
    copied = copy._plugin_registry.plugins["context_offloader"]._storage
    assert isinstance(copied, InMemoryStorage) and copied is not storage
    assert sorted(copied._entries) == ["mem_1_p1_0", "mem_2_p3_0", "mem_3_p3_1", "mem_4_p3_2", "mem_5_p3_3"]
    assert list(storage._entries) == ["mem_1_p1_0"]  # the original is untouched by the copy


# ---- arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("arguments", "error", "message"), [
    ({"max_result_tokens": 0}, ValueError, "max_result_tokens must be positive"),
    ({"preview_tokens": -1}, ValueError, "preview_tokens must be non-negative"),
    ({"max_result_tokens": 100, "preview_tokens": 100}, ValueError,
     "preview_tokens must be less than max_result_tokens"),
    ({"evict_after_cycles": 0}, ValueError, "evict_after_cycles must be a positive integer or None"),
    ({"max_result_tokens": "many"}, TypeError, "max_result_tokens must be an int"),
    ({"preview_tokens": 1.5}, TypeError, "preview_tokens must be an int"),
    ({"should_offload": True}, TypeError, "should_offload must be callable"),
    ({"storage": object()}, ValueError, "storage must have async store"),
])
def test_bad_arguments_are_named(arguments: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        ContextOffloader(**arguments)


def test_the_public_names_are_strands() -> None:
    from ray_harness.vended_plugins import context_offloader

    assert sorted(context_offloader.__all__) == ["ContextOffloader", "FileStorage", "InMemoryStorage",
                                                 "S3Storage", "ShouldOffload", "Storage"]
    assert isinstance(S3Storage("bucket"), Storage) and ContextOffloader.name == "context_offloader"
