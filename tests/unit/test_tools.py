from __future__ import annotations

import asyncio
import json
import math
import threading
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from ray_harness import Agent, ToolContext, tool
from ray_harness.testing import ScriptedModel, text, tool_call, tool_calls
from ray_harness.tools import SequentialToolExecutor, ToolRegistry
from ray_harness.tools.decorator import to_tool_result


@tool
def weather(city: str, unit: Literal["c", "f"] = "c") -> str:
    """Get the weather.

    Args:
        city: The city name.
        unit: Temperature unit.
    """
    return f"{city}: 20{unit}"


def test_spec_from_hints_and_docstring() -> None:
    spec = weather.tool_spec
    assert spec["name"] == "weather"
    assert spec["description"] == "Get the weather."
    schema = spec["inputSchema"]["json"]
    assert schema["required"] == ["city"]
    assert schema["properties"]["city"] == {"description": "The city name.", "type": "string"}
    assert schema["properties"]["unit"]["enum"] == ["c", "f"]
    assert weather("Paris") == "Paris: 20c"  # still callable as a function


def test_spec_from_a_sphinx_docstring() -> None:
    @tool
    def search(query: str, limit: int = 5) -> str:
        """Search the index.

        :param query: The words
            to look for.
        :param int limit: How many hits.
        :returns: The hits, one per line.
        :raises ValueError: never.
        """
        return query

    spec = search.tool_spec
    assert spec["description"] == "Search the index."  # the other fields stay out of the description
    properties = spec["inputSchema"]["json"]["properties"]
    assert properties["query"]["description"] == "The words to look for."
    assert properties["limit"]["description"] == "How many hits."


def test_decorator_options_and_bad_names() -> None:
    @tool(name="lookup-city", description="Find a city")
    def find(q: str) -> str:
        return q

    assert (find.tool_name, find.tool_spec["description"]) == ("lookup-city", "Find a city")
    with pytest.raises(ValueError, match="must match"):
        tool(name="bad name!")(lambda: None)


def test_annotated_descriptions_and_field_defaults_as_in_strands() -> None:
    @tool
    def page(limit: Annotated[int, "How many rows."] = 10, offset: int = Field(default=0, ge=0),
             sort: str = Field(default="id", description="Sort key.")) -> str:
        """Page through rows.

        Args:
            offset: Rows to skip.
        """
        return f"{limit}/{offset}/{sort}"

    properties = page.tool_spec["inputSchema"]["json"]["properties"]
    assert properties["limit"] == {"default": 10, "description": "How many rows.", "type": "integer"}
    assert properties["offset"] == {"default": 0, "description": "Rows to skip.", "minimum": 0, "type": "integer"}
    assert properties["sort"]["description"] == "Sort key."
    assert page.validate_input({}) == {"limit": 10, "offset": 0, "sort": "id"}  # the defaults, not FieldInfo
    with pytest.raises(ValueError, match=r"input\.offset"):
        page.validate_input({"offset": -1})


def test_a_parameter_named_agent_receives_the_calling_agent() -> None:
    seen: list[Any] = []

    @tool
    def who(x: int, agent: Any = None) -> str:
        """Report the caller."""
        seen.append(agent)
        return "ok"

    assert list(who.tool_spec["inputSchema"]["json"]["properties"]) == ["x"]
    agent = _run([who], tool_call("who", {"x": 1}), text("done"))
    agent.tool.who(x=2)
    assert seen == [agent, agent]


def test_tool_context_parameter_needs_context_option() -> None:
    def uses_context(x: int, tool_context: ToolContext) -> str:
        return "ok"

    with pytest.raises(ValueError, match=r"@tool\(context=True\)"):
        tool(uses_context)
    with pytest.raises(ValueError, match="names 'ctx'"):
        tool(context="ctx")(uses_context)
    assert list(tool(context=True)(uses_context).tool_spec["inputSchema"]["json"]["properties"]) == ["x"]


@pytest.mark.parametrize("given", [{"type": "object", "properties": {"q": {"type": "string"}}},
                                   {"json": {"type": "object", "properties": {"q": {"type": "string"}}}}])
def test_input_schema_accepts_the_plain_and_the_converse_form(given: dict[str, Any]) -> None:
    @tool(inputSchema=given)
    def search(q: str) -> str:
        return q

    assert search.tool_spec["inputSchema"] == {"json": {"type": "object", "properties": {"q": {"type": "string"}}}}


def _run(tools: list, *steps, **kwargs) -> Agent:
    agent = Agent(ScriptedModel(*steps), tools=tools, **kwargs)
    agent("go")
    return agent


def _results(agent: Agent) -> list[dict]:
    return [b["toolResult"] for m in agent.messages for b in m["content"] if "toolResult" in b]


def test_exceptions_unknown_tools_and_invalid_input_become_error_results() -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    agent = _run([broken, weather],
                 tool_calls(("broken", {}, "t1"), ("nope", {}, "t2"), ("weather", {"unit": "k"}, "t3")),
                 text("ok"))
    r1, r2, r3 = _results(agent)
    assert r1 == {"toolUseId": "t1", "status": "error", "content": [{"text": "Error: disk on fire"}]}
    assert r2 == {"toolUseId": "t2", "status": "error", "content": [{"text": "Unknown tool: nope"}]}
    assert r3["status"] == "error"
    assert "input.city" in r3["content"][0]["text"] and "input.unit" in r3["content"][0]["text"]


def test_return_values_are_converted() -> None:
    @tool
    def as_dict() -> dict:
        """Dict."""
        return {"a": 1}

    @tool
    def as_result() -> dict:
        """Full result."""
        return {"status": "error", "content": [{"text": "custom"}]}

    agent = _run([as_dict, as_result], tool_calls(("as_dict", {}, "a"), ("as_result", {}, "b")), text("ok"))
    assert _results(agent) == [
        {"toolUseId": "a", "status": "success", "content": [{"json": {"a": 1}}]},
        {"toolUseId": "b", "status": "error", "content": [{"text": "custom"}]},
    ]


class Point(BaseModel):
    x: int
    at: date


def _content(value: Any) -> list[dict[str, Any]]:
    result = to_tool_result("u", value)
    assert (result["toolUseId"], result["status"]) == ("u", "success")
    return result["content"]  # type: ignore[return-value]


WHEN = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)


@pytest.mark.parametrize(("value", "content"), [
    pytest.param("plain", [{"text": "plain"}], id="str"),
    pytest.param(True, [{"text": "true"}], id="bool"),
    pytest.param(None, [{"text": "null"}], id="none"),
    pytest.param(7, [{"text": "7"}], id="int"),
    pytest.param(1.5, [{"text": "1.5"}], id="float"),
    pytest.param(math.inf, [{"text": "inf"}], id="infinite-float"),
    pytest.param(Decimal("1.10"), [{"text": "1.10"}], id="decimal"),
    pytest.param(WHEN, [{"text": "2024-05-06 07:08:09+00:00"}], id="datetime"),
    pytest.param({"when": WHEN, "price": Decimal("1.10")},
                 [{"json": {"when": "2024-05-06T07:08:09Z", "price": "1.10"}}], id="dict-of-datetime-decimal"),
    pytest.param({"a": [{"b": (1, 2)}, {"tags": {"x"}}], "path": Path("/tmp/f"), 3: None},
                 [{"json": {"a": [{"b": [1, 2]}, {"tags": ["x"]}], "path": "/tmp/f", "3": None}}], id="nested"),
    pytest.param((1, "two", None), [{"json": [1, "two", None]}], id="tuple"),
    pytest.param([1.5, math.nan], [{"text": "[1.5, nan]"}], id="list-with-nan"),
    pytest.param({"ratio": math.inf}, [{"text": "{'ratio': inf}"}], id="dict-with-inf"),
    pytest.param(Point(x=1, at=date(2024, 5, 6)), [{"json": {"x": 1, "at": "2024-05-06"}}], id="pydantic"),
    pytest.param({"point": Point(x=2, at=date(2024, 1, 1))}, [{"json": {"point": {"x": 2, "at": "2024-01-01"}}}],
                 id="dict-of-pydantic"),
])
def test_return_value_becomes_plain_json_or_text(value: Any, content: list[dict[str, Any]]) -> None:
    assert _content(value) == content
    json.dumps(content, allow_nan=False)  # what a provider request or a session write will do with it


def test_return_value_json_cannot_hold_falls_back_to_str() -> None:
    looped: dict[str, Any] = {"name": "loop"}
    looped["self"] = looped
    assert _content(looped) == [{"text": "{'name': 'loop', 'self': {...}}"}]
    assert _content({frozenset({1}): "key"}) == [{"text": "{frozenset({1}): 'key'}"}]


def test_tool_result_dict_is_kept_with_its_status() -> None:
    given = {"status": "error", "content": [{"text": "custom"}], "toolUseId": "old"}
    assert to_tool_result("u", given) == {"status": "error", "content": [{"text": "custom"}], "toolUseId": "u"}
    assert given["toolUseId"] == "old"


def test_history_holds_a_copy_of_the_returned_value() -> None:
    payload = {"items": [1, 2]}

    @tool
    def listing() -> dict:
        """Returns a dict its owner keeps changing."""
        return payload

    agent = _run([listing], tool_call("listing", {}, tool_use_id="l"), text("ok"))
    (result,) = _results(agent)
    assert result["content"] == [{"json": {"items": [1, 2]}}]
    assert result["content"][0]["json"] is not payload
    payload["items"].append(3)
    assert result["content"] == [{"json": {"items": [1, 2]}}]


def test_agent_with_datetime_result_keeps_a_json_history() -> None:
    @tool
    def clock() -> dict:
        """Tells the time."""
        return {"when": WHEN}

    agent = _run([clock], tool_call("clock", {}, tool_use_id="c"), text("done"))
    assert _results(agent) == [
        {"toolUseId": "c", "status": "success", "content": [{"json": {"when": "2024-05-06T07:08:09Z"}}]},
    ]
    assert agent.messages[-1]["content"] == [{"text": "done"}]
    json.dumps(agent.messages, allow_nan=False)


async def test_async_and_streaming_tools() -> None:
    @tool
    async def slow(x: int) -> int:
        """Async."""
        await asyncio.sleep(0)
        return x * 2

    @tool
    async def progress(n: int):  # type: ignore[no-untyped-def]
        """Streams progress, the last yield is the result."""
        for i in range(n):
            yield f"step {i}"
        yield "finished"

    agent = Agent(ScriptedModel(tool_calls(("slow", {"x": 4}, "s"), ("progress", {"n": 2}, "p")), text("ok")),
                  tools=[slow, progress])
    streamed = [e async for e in agent.stream_async("go")]
    tool_stream = [e["tool_stream_event"]["data"] for e in streamed if e["type"] == "tool_stream"]
    assert tool_stream == ["step 0", "step 1", "finished"]  # every yield streams, the last one too (Strands)
    assert [r["content"] for r in _results(agent)] == [[{"text": "8"}], [{"text": "finished"}]]


async def _streamed_data(agent: Agent) -> list[Any]:
    return [e["tool_stream_event"]["data"] async for e in agent.stream_async("go") if e["type"] == "tool_stream"]


@pytest.mark.parametrize(("yields", "result"), [([1, 2, 3], "3"), (["only"], "only")])
async def test_generator_tool_streams_every_yield_and_the_last_is_the_result(yields: list[Any], result: str) -> None:
    @tool
    async def counter():  # type: ignore[no-untyped-def]
        """Yields the scripted items."""
        for item in yields:
            yield item

    agent = Agent(ScriptedModel(tool_call("counter", {}, tool_use_id="c"), text("ok")), tools=[counter])
    assert await _streamed_data(agent) == yields
    assert _results(agent) == [{"toolUseId": "c", "status": "success", "content": [{"text": result}]}]


def test_concurrent_by_default_results_in_tool_use_order() -> None:
    # All three must be inside the tool at once to pass the barrier: run one after the other, the first
    # would wait in vain and break it. C finishes first (A and B wait for it), yet results keep toolUse order.
    barrier = threading.Barrier(3, timeout=60)
    c_done = threading.Event()
    finished: list[str] = []

    @tool
    def sleepy(label: str) -> str:
        """Waits for its siblings in a thread."""
        barrier.wait()
        if label != "C":
            assert c_done.wait(60)
        finished.append(label)
        if label == "C":
            c_done.set()
        return label

    agent = _run([sleepy], tool_calls(("sleepy", {"label": "A"}, "a"), ("sleepy", {"label": "B"}, "b"),
                                      ("sleepy", {"label": "C"}, "c")), text("ok"))
    assert [r["content"][0]["text"] for r in _results(agent)] == ["A", "B", "C"]
    assert finished[0] == "C"


def test_sequential_executor_runs_in_order() -> None:
    order: list[str] = []

    @tool
    async def mark(label: str) -> str:
        """Record order."""
        order.append(f"start {label}")
        await asyncio.sleep(0.01)
        order.append(f"end {label}")
        return label

    _run([mark], tool_calls(("mark", {"label": "1"}), ("mark", {"label": "2"})), text("ok"),
         tool_executor=SequentialToolExecutor())
    assert order == ["start 1", "end 1", "start 2", "end 2"]


def test_tool_context_injection() -> None:
    seen: dict = {}

    @tool(context=True)
    def ctx_tool(x: int, tool_context: ToolContext) -> str:
        """Uses context."""
        seen["id"] = tool_context.tool_use["toolUseId"]
        seen["agent"] = tool_context.agent.name
        seen["state"] = tool_context.invocation_state.get("user")
        seen["signal"] = isinstance(tool_context.cancel_signal, threading.Event)
        return "ok"

    assert "tool_context" not in ctx_tool.tool_spec["inputSchema"]["json"]["properties"]
    agent = Agent(ScriptedModel(tool_call("ctx_tool", {"x": 1}, tool_use_id="u1"), text("ok")), tools=[ctx_tool],
                  name="ctx-agent")
    agent("go", invocation_state={"user": "alice"})
    assert seen == {"id": "u1", "agent": "ctx-agent", "state": "alice", "signal": True}


def test_registry_rejects_duplicates_and_junk() -> None:
    registry = ToolRegistry()
    registry.register(weather)
    registry.register(weather)  # the same tool listed twice is one tool, as in Strands
    assert registry.names == ["weather"]

    @tool(name="weather")
    def other_weather(city: str) -> str:
        return city

    with pytest.raises(ValueError, match="already registered"):
        registry.register(other_weather)  # Strands keeps the last one: the first would be lost without a word
    assert registry.get("weather") is weather
    with pytest.raises(ValueError, match="cannot use"):
        registry.register(42)
    with pytest.raises(ValueError, match="not loaded from file paths, module paths or modules"):
        registry.register("strands_tools.calculator")  # a Strands tool string says why it is refused
    with pytest.raises(ValueError, match="not loaded from file paths, module paths or modules"):
        registry.register(json)


def test_plain_functions_are_wrapped() -> None:
    def shout(word: str) -> str:
        """Upper-case a word."""
        return word.upper()

    agent = Agent(ScriptedModel(), tools=[shout])
    assert agent.tool_names == ["shout"]


def test_direct_tool_call_recorded_as_four_messages() -> None:
    agent = Agent(ScriptedModel(), tools=[weather])
    result = agent.tool.weather(city="Oslo")
    assert result["status"] == "success" and result["content"] == [{"text": "Oslo: 20c"}]
    assert [m["role"] for m in agent.messages] == ["user", "assistant", "user", "assistant"]
    assert agent.messages[0]["content"][0]["text"].startswith("agent.tool.weather direct tool call.")
    assert agent.messages[3]["content"] == [{"text": "agent.tool.weather was called."}]

    quiet = Agent(ScriptedModel(), tools=[weather], record_direct_tool_call=False)
    quiet.tool.weather(city="Oslo")
    assert quiet.messages == []
    with pytest.raises(AttributeError, match="no tool"):
        quiet.tool.missing()


def test_closing_a_finished_concurrent_batch_does_not_suspend() -> None:
    # asyncio.run's end closes every live generator at once; a close that suspended while waiting for
    # tasks that are already done left the callers' generators "already running" (logged RuntimeErrors).
    from ray_harness.tools.executors import ConcurrentToolExecutor

    async def run_one(tool_use: Any) -> Any:
        yield tool_use["toolUseId"]

    async def skip(tool_use: Any) -> Any:
        yield None

    async def scenario() -> None:
        uses: list[Any] = [{"toolUseId": "a", "name": "t", "input": {}}, {"toolUseId": "b", "name": "t", "input": {}}]
        batch = ConcurrentToolExecutor().execute(uses, run_one, threading.Event(), skip)
        assert await batch.__anext__() in ("a", "b")
        for _ in range(5):  # let both tasks finish
            await asyncio.sleep(0)
        closing = batch.aclose()
        with pytest.raises(StopIteration):  # finished within its first step
            closing.send(None)

    asyncio.run(scenario())


def test_direct_call_finds_a_tool_whose_name_mixes_dashes_and_underscores() -> None:
    @tool(name="my-tool_v2")
    def versioned(x: int) -> int:
        return x

    agent = Agent(ScriptedModel(), tools=[versioned], record_direct_tool_call=False)
    assert agent.tool.my_tool_v2(x=3)["content"] == [{"text": "3"}]


def test_direct_call_of_a_tool_named_like_a_caller_method() -> None:
    @tool
    def call_async(x: int) -> int:
        return x

    agent = Agent(ScriptedModel(), tools=[call_async], record_direct_tool_call=False)
    assert agent.tool.call_async(x=4)["content"] == [{"text": "4"}]


def test_direct_call_records_a_plain_json_copy_of_its_input(tmp_path: Path) -> None:
    from ray_harness.session import FileSessionManager

    @tool
    def on_day(day: date) -> str:
        """Plan a day."""
        return day.isoformat()

    agent = Agent(ScriptedModel(), tools=[on_day],
                  session_manager=FileSessionManager(session_id="s", storage_dir=str(tmp_path)))
    agent.tool.on_day(day=date(2024, 5, 1))  # a session write of the raw date would fail halfway
    assert agent.messages[1]["content"][0]["toolUse"]["input"] == {"day": "2024-05-01"}
    assert 'Input parameters: {"day": "2024-05-01"}' in agent.messages[0]["content"][0]["text"]
    assert len(agent.messages) == 4


def test_direct_calls_are_kept_within_the_conversation_window() -> None:
    from ray_harness.agent.conversation_manager import SlidingWindowConversationManager

    agent = Agent(ScriptedModel(), tools=[weather], conversation_manager=SlidingWindowConversationManager(window_size=4))
    for city in ("Oslo", "Rome", "Lima"):
        agent.tool.weather(city=city)
    assert len(agent.messages) == 4  # trimmed after each call, as after an invocation


def test_closing_a_streaming_tool_closes_the_users_generator_at_once() -> None:
    log: list[str] = []

    @tool
    async def ticker() -> Any:
        """Streams."""
        try:
            yield "p1"
            yield "p2"
        finally:
            log.append("user generator closed")

    async def scenario() -> None:
        use: Any = {"toolUseId": "t", "name": "ticker", "input": {}}
        stream = ticker.stream(use, ToolContext(tool_use=use, agent=None, invocation_state={},
                                                cancel_signal=threading.Event()))
        await stream.__anext__()
        await stream.aclose()
        log.append("stream closed")

    asyncio.run(scenario())
    assert log == ["user generator closed", "stream closed"]


def test_a_direct_call_with_positional_arguments_says_to_name_them() -> None:
    agent = Agent(ScriptedModel(), tools=[weather])
    with pytest.raises(TypeError, match=r"agent.tool.weather\(\) takes keyword arguments only"):
        agent.tool.weather("Oslo")
    assert agent.messages == []


class _Provider:
    """A tool provider publishing fixed tools (as an MCP client would, once connected)."""

    def __init__(self, label: str, *tools: Any) -> None:
        self.label = label
        self.tools = list(tools)

    async def load_tools(self) -> list[Any]:
        return self.tools

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"Provider({self.label})"


def test_a_tool_name_published_by_two_providers_names_both_and_suggests_a_prefix() -> None:
    @tool(name="search")
    def first(q: str) -> str:
        """Search one."""
        return q

    @tool(name="search")
    def second(q: str) -> str:
        """Search two."""
        return q

    agent = Agent(ScriptedModel(text("never")), tools=[_Provider("one", first), _Provider("two", second)])
    expected = r"tool name 'search' of Provider\(two\) is already registered \(by <tool search>\)"
    with pytest.raises(ValueError, match=expected) as caught:
        agent("hi")
    assert "prefix=" in str(caught.value)


def test_an_optional_parameter_with_a_default_is_published_as_its_type_as_in_strands() -> None:
    @tool
    def find(query: str | None, limit: int | None = None, tags: list[str] | None = None) -> str:
        """Find things."""
        return f"{query}/{limit}/{tags}"

    properties = find.tool_spec["inputSchema"]["json"]["properties"]
    assert properties["limit"] == {"type": "integer", "default": None, "description": "Parameter limit"}
    assert properties["tags"] == {"type": "array", "items": {"type": "string"}, "default": None,
                                  "description": "Parameter tags"}
    # Required: the null branch stays, or the model could never pass the None the function accepts.
    assert properties["query"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "Parameter query"}

    agent = Agent(ScriptedModel(tool_call("find", {"query": None, "limit": None}), text("ok")), tools=[find])
    agent("go")
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"text": "None/None/None"}]
