"""OpenAIModel specifics: Chat Completions messages, tool calls, usage, OpenAI-compatible servers."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from ray_harness import Agent
from ray_harness.cli import main
from ray_harness.models import from_string
from ray_harness.models.openai import OpenAIModel
from ray_harness.types.exceptions import ModelConfigurationError
from tests.providers.conftest import openai_model
from tests.providers.fake_servers import Answer, OpenAIServer, text

PNG = b"\x89PNG\r\n\x1a\nfake"


async def drain(model: OpenAIModel, *args: object, **kwargs: object) -> list[dict]:
    return [event async for event in model.stream(*args, **kwargs)]  # type: ignore[arg-type]


async def test_messages_are_converted_to_chat_completions(openai_server: OpenAIServer) -> None:
    openai_server.script(text("ok"))
    history = [
        {"role": "user", "content": [{"text": "Look"}, {"image": {"format": "png", "source": {"bytes": PNG}}}]},
        {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "hidden"}}},
            {"text": "Calling."},
            {"toolUse": {"toolUseId": "c1", "name": "lookup", "input": {"q": "x"}}},
            {"toolUse": {"toolUseId": "c2", "name": "lookup", "input": {"q": "y"}}},
        ]},
        {"role": "user", "content": [
            {"toolResult": {"toolUseId": "c1", "status": "success", "content": [{"text": "one"}, {"json": {"n": 1}}]}},
            {"toolResult": {"toolUseId": "c2", "status": "error", "content": [
                {"text": "bad"}, {"image": {"format": "png", "source": {"bytes": PNG}}}]}},
            {"text": "and?"},
        ]},
    ]
    spec = {"name": "lookup", "description": "Look up.", "inputSchema": {"json": {"type": "object"}}}

    await drain(openai_model(openai_server), history, [spec], "sys", tool_choice={"any": {}})

    body = openai_server.bodies[0]
    data_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["tool_choice"] == "required"
    assert body["tools"] == [{"type": "function", "function": {"name": "lookup", "description": "Look up.",
                                                               "parameters": {"type": "object"}}}]
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "Look"},
                                     {"type": "image_url", "image_url": {"url": data_url}}]},
        {"role": "assistant", "content": "Calling.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}},
            {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "y"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": 'one\n{"n": 1}'},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: bad"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_url}},
                                     {"type": "text", "text": "and?"}]},
    ]
    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(("choice", "sent"), [
    ({"auto": {}}, "auto"),
    ({"any": {}}, "required"),
    ({"tool": {"name": "lookup"}}, {"type": "function", "function": {"name": "lookup"}}),
])
async def test_tool_choice_mapping(openai_server: OpenAIServer, choice: dict, sent: object) -> None:
    openai_server.script(text("ok"))
    spec = {"name": "lookup", "description": "d", "inputSchema": {"json": {"type": "object"}}}

    await drain(openai_model(openai_server), [{"role": "user", "content": [{"text": "hi"}]}], [spec],
                tool_choice=choice)

    assert openai_server.bodies[0]["tool_choice"] == sent


async def test_tool_choice_is_not_sent_without_tools(openai_server: OpenAIServer) -> None:
    openai_server.script(text("ok"))

    await drain(openai_model(openai_server), [{"role": "user", "content": [{"text": "hi"}]}],
                tool_choice={"any": {}})

    assert "tool_choice" not in openai_server.bodies[0] and "tools" not in openai_server.bodies[0]


async def test_tool_call_deltas_become_converse_events(openai_server: OpenAIServer) -> None:
    openai_server.script(Answer([("text", "Let me check."), ("tool", "call_abc", "get_weather", {"city": "Paris"})]))

    events = await drain(openai_model(openai_server), [{"role": "user", "content": [{"text": "hi"}]}])

    assert events[:2] == [{"messageStart": {"role": "assistant"}},
                          {"contentBlockStart": {"start": {}, "contentBlockIndex": 0}}]
    starts = [e["contentBlockStart"] for e in events if "contentBlockStart" in e]
    assert starts[1] == {"start": {"toolUse": {"toolUseId": "call_abc", "name": "get_weather"}},
                         "contentBlockIndex": 1}
    pieces = [e["contentBlockDelta"]["delta"]["toolUse"]["input"] for e in events
              if "toolUse" in e.get("contentBlockDelta", {}).get("delta", {})]
    assert "".join(pieces) == '{"city": "Paris"}' and len(pieces) == 2
    assert [e for e in events if "contentBlockStop" in e] == [{"contentBlockStop": {"contentBlockIndex": 0}},
                                                              {"contentBlockStop": {"contentBlockIndex": 1}}]
    assert {"messageStop": {"stopReason": "tool_use"}} in events


async def test_a_cited_answer_in_the_history_is_sent_as_text(openai_server: OpenAIServer) -> None:
    openai_server.script(text("ok"))
    history = [{"role": "user", "content": [{"text": "Q1"}]},
               {"role": "assistant", "content": [{"citationsContent": {"content": [{"text": "Paris"}],
                                                                       "citations": []}}]},
               {"role": "user", "content": [{"text": "Q2"}]}]

    await drain(openai_model(openai_server), history)

    assert openai_server.bodies[0]["messages"][1] == {"role": "assistant", "content": "Paris"}


def _chunk(delta: dict, finish: str | None = None) -> object:
    from openai.types.chat import ChatCompletionChunk

    return ChatCompletionChunk.model_validate({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                                               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _call(index: int, use_id: str | None = None, name: str | None = None, arguments: str | None = None) -> dict:
    function = {key: value for key, value in (("name", name), ("arguments", arguments)) if value is not None}
    call: dict = {"index": index, "function": function}
    if use_id is not None:
        call.update(id=use_id, type="function")
    return {"tool_calls": [call]}


def _tool_uses(events: list) -> list[tuple[str, str, str]]:
    """(id, name, input) of each tool block, checking every delta lands between its block's start and stop."""
    uses: list[tuple[str, str, str]] = []
    open_index = None
    for event in events:
        if "contentBlockStart" in event:
            assert open_index is None
            open_index = event["contentBlockStart"]["contentBlockIndex"]
            use = event["contentBlockStart"]["start"]["toolUse"]
            uses.append((use["toolUseId"], use["name"], ""))
        elif "contentBlockDelta" in event:
            assert event["contentBlockDelta"]["contentBlockIndex"] == open_index
            use_id, name, arguments = uses[-1]
            uses[-1] = (use_id, name, arguments + event["contentBlockDelta"]["delta"]["toolUse"]["input"])
        elif "contentBlockStop" in event:
            assert event["contentBlockStop"]["contentBlockIndex"] == open_index
            open_index = None
    return uses


def test_interleaved_parallel_tool_call_fragments_stay_with_their_call() -> None:
    from ray_harness.models._openai_format import OpenAIStreamState

    state = OpenAIStreamState()
    chunks = [_chunk(_call(0, "call_a", "get_weather", "")), _chunk(_call(1, "call_b", "get_time", "")),
              _chunk(_call(0, arguments='{"city": ')), _chunk(_call(1, arguments='{"tz": ')),
              _chunk(_call(0, arguments='"Oslo"}')), _chunk(_call(1, arguments='"CET"}')), _chunk({}, "tool_calls")]

    events = [event for chunk in chunks for event in state.convert(chunk)] + state.finish()

    assert _tool_uses(events[:-1]) == [("call_a", "get_weather", '{"city": "Oslo"}'),
                                       ("call_b", "get_time", '{"tz": "CET"}')]
    assert events[-1] == {"messageStop": {"stopReason": "tool_use"}}


def test_a_tool_name_sent_after_the_call_id_still_names_the_call() -> None:
    from ray_harness.models._openai_format import OpenAIStreamState

    state = OpenAIStreamState()
    chunks = [_chunk(_call(0, "call_a", arguments="")), _chunk(_call(0, name="get_weather")),
              _chunk(_call(0, arguments="{}")), _chunk({}, "tool_calls")]

    events = [event for chunk in chunks for event in state.convert(chunk)] + state.finish()

    assert _tool_uses(events[:-1]) == [("call_a", "get_weather", "{}")]


async def test_reasoning_content_of_compatible_servers(openai_server: OpenAIServer) -> None:
    openai_server.script(Answer([("thinking", "hmm, let me see", ""), ("text", "done")]))
    agent = Agent(openai_model(openai_server))

    await agent.invoke_async("?")

    assert agent.messages[-1]["content"] == [{"reasoningContent": {"reasoningText": {"text": "hmm, let me see"}}},
                                             {"text": "done"}]


async def test_usage_with_cached_tokens(openai_server: OpenAIServer) -> None:
    openai_server.script(text("ok", input_tokens=100, output_tokens=3, cache_read=64))

    events = await drain(openai_model(openai_server), [{"role": "user", "content": [{"text": "hi"}]}])

    assert events[-1]["metadata"]["usage"] == {"inputTokens": 100, "outputTokens": 3, "totalTokens": 103,
                                               "cacheReadInputTokens": 64}


async def test_server_without_usage_gets_an_estimate(openai_server: OpenAIServer) -> None:
    openai_server.honour_include_usage = False
    openai_server.script(text("a" * 40))

    events = await drain(openai_model(openai_server), [{"role": "user", "content": [{"text": "b" * 80}]}])

    assert events[-1]["metadata"]["usage"] == {"inputTokens": 20, "outputTokens": 10, "totalTokens": 30,
                                               "estimatedTokens": 30}


def test_openai_compatible_spec_drives_any_base_url(openai_server: OpenAIServer) -> None:
    openai_server.script(text("served locally"))
    model = from_string(f"openai-compatible:{openai_server.base_url()}#llama-3-8b")
    model.client_args["max_retries"] = 0  # type: ignore[attr-defined]

    result = Agent(model)("hi")

    assert str(result) == "served locally\n"
    assert openai_server.bodies[0]["model"] == "llama-3-8b"
    assert openai_server.requests[0].headers["authorization"] == "Bearer EMPTY"


def test_agent_accepts_an_openai_model_string(openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url())
    openai_server.script(text("hello from gpt"))

    agent = Agent(model="openai:gpt-4o")

    assert str(agent("hi")) == "hello from gpt\n"
    assert openai_server.bodies[0]["model"] == "gpt-4o"
    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-from-env"


@pytest.mark.parametrize(("status", "message"), [
    (None, "Rate limit exceeded, please retry"),  # a compatible server's mid-stream error, with no code
    (503, "server busy, please try again.  maximum pending requests exceeded"),  # Ollama
    (503, "The engine is currently overloaded, please try again later"),
])
def test_throttling_worded_without_a_429_is_throttling(status: int | None, message: str) -> None:
    import httpx
    import openai

    from ray_harness.models.openai import _map_error
    from ray_harness.types.exceptions import ModelThrottledException

    request = httpx.Request("POST", "http://localhost/v1/chat/completions")
    body = {"error": {"message": message}}
    error: openai.APIError = openai.APIError(message, request, body=body) if status is None else \
        openai.APIStatusError(message, response=httpx.Response(status, request=request), body=body)

    assert isinstance(_map_error(error), ModelThrottledException)


def test_a_client_error_mentioning_rate_limits_is_not_throttling() -> None:
    import httpx
    import openai

    from ray_harness.models.openai import _map_error

    request = httpx.Request("POST", "http://localhost/v1/chat/completions")
    error = openai.BadRequestError("Invalid value for 'rate limit tier'",
                                   response=httpx.Response(400, request=request), body=None)

    assert _map_error(error) is error


async def test_missing_api_key_is_a_configuration_error() -> None:
    model = OpenAIModel("gpt-4o")

    with pytest.raises(ModelConfigurationError, match="OPENAI_API_KEY"):
        await drain(model, [{"role": "user", "content": [{"text": "hi"}]}])


def test_spec_query_parameters_reach_the_request_body(openai_server: OpenAIServer) -> None:
    openai_server.script(text("short"))
    model = from_string(f"openai-compatible:{openai_server.base_url()}#llama-3-8b?max_tokens=5&temperature=0&stop=%0A")
    model.client_args["max_retries"] = 0  # type: ignore[attr-defined]

    Agent(model)("hi")

    body = openai_server.bodies[0]
    assert (body["max_tokens"], body["temperature"], body["stop"]) == (5, 0, ["\n"])
    assert "max_completion_tokens" not in body


@pytest.mark.parametrize(("argv", "sent"), [([], 512), (["--max-tokens", "33"], 33)])
def test_demo_caps_each_model_call_unless_the_spec_does(openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path, argv: list[str], sent: int) -> None:
    monkeypatch.setenv("RAY_HARNESS_DEMO_MODEL", "")  # the demo sets it; restored after the test
    openai_server.script(*[text(f"answer {n}") for n in range(4)])  # one row: four nodes, four calls
    spec = f"openai-compatible:{openai_server.base_url()}#local-model"

    code = main(["demo", "--local", "--rows", "1", "--output-dir", str(tmp_path), "--model", spec, *argv])

    assert code == 0
    assert [body["max_tokens"] for body in openai_server.bodies] == [sent] * 4

    openai_server.script(*[text(f"answer {n}") for n in range(4)])
    assert main(["demo", "--local", "--rows", "1", "--output-dir", str(tmp_path), "--model", spec + "?max_tokens=7",
                 *argv]) == 0
    assert [body["max_tokens"] for body in openai_server.bodies[4:]] == [7] * 4  # the spec's own cap wins


# -- client= (a client the caller built, as Strands' OpenAIModel(client=...)) --------------------------------------

def given_client(server: OpenAIServer, key: str = "sk-given") -> object:
    import openai

    return openai.AsyncOpenAI(base_url=server.base_url(), api_key=key, max_retries=0)


async def test_a_given_client_serves_every_request_and_is_left_open(openai_server: OpenAIServer) -> None:
    openai_server.script(text("one"), text("two"))
    client = given_client(openai_server)
    agent = Agent(OpenAIModel("gpt-test", client=client))

    first = await agent.invoke_async("hi")
    second = await agent.invoke_async("again")

    assert (str(first), str(second)) == ("one\n", "two\n")
    assert [request.headers["authorization"] for request in openai_server.requests] == ["Bearer sk-given"] * 2
    assert not client.is_closed()  # type: ignore[attr-defined]
    await client.close()  # type: ignore[attr-defined]


def test_client_and_client_args_together_are_refused(openai_server: OpenAIServer) -> None:
    with pytest.raises(ValueError, match="client= or client_args="):
        OpenAIModel("gpt-test", client=given_client(openai_server), client_args={"api_key": "k"})


def test_a_model_with_a_given_client_does_not_pickle(openai_server: OpenAIServer) -> None:
    import pickle

    model = OpenAIModel("gpt-test", client=given_client(openai_server))

    with pytest.raises(TypeError, match="pass client_args="):
        pickle.dumps(model)
    assert pickle.loads(pickle.dumps(OpenAIModel("gpt-test"))).client is None


def test_a_given_client_on_a_second_event_loop_is_a_clear_error(openai_server: OpenAIServer) -> None:
    import gc

    openai_server.script(text("one"))
    agent = Agent(OpenAIModel("gpt-test", client=given_client(openai_server)))

    assert str(agent("hi")) == "one\n"
    with pytest.raises(ModelConfigurationError, match="first used on another event loop"):
        agent("again")  # each agent(...) call runs on a fresh loop
    assert len(openai_server.requests) == 1
    del agent
    gc.collect()  # the client's connection of the closed loop is finalised here, not inside a later import
