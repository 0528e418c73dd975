"""One contract, three providers: each backend's official client against its local wire-protocol server."""

from __future__ import annotations

import pickle

import cloudpickle
import pytest
from pydantic import BaseModel

from ray_harness import Agent, tool
from ray_harness.agent.retry import ModelRetryStrategy
from ray_harness.testing import FakeClock
from ray_harness.types.exceptions import ContextWindowOverflowException, ModelConfigurationError
from tests.providers.conftest import Backend
from tests.providers.fake_servers import Answer, Failure, text, tool_use


@tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


class Weather(BaseModel):
    """A weather report."""

    city: str
    degrees: int


def fast_retries(clock: FakeClock) -> ModelRetryStrategy:
    return ModelRetryStrategy(max_attempts=3, initial_delay=0, clock=clock)


async def collect(model_stream: object) -> list[dict]:
    return [event async for event in model_stream]  # type: ignore[attr-defined]


async def test_text_answer_events_and_request(backend: Backend) -> None:
    backend.server.script(text("Hello world", input_tokens=12, output_tokens=4))
    model = backend.model()

    events = await collect(model.stream([{"role": "user", "content": [{"text": "hi"}]}], system_prompt="Be brief."))

    assert events[0] == {"messageStart": {"role": "assistant"}}
    deltas = [e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e]
    assert "".join(deltas) == "Hello world"
    assert len(deltas) == 2  # streamed, not buffered
    assert {"messageStop": {"stopReason": "end_turn"}} in events
    metadata = events[-1]["metadata"]
    assert metadata["usage"] == {"inputTokens": 12, "outputTokens": 4, "totalTokens": 16}
    assert isinstance(metadata["metrics"]["latencyMs"], int)
    (body,) = backend.server.bodies
    assert backend.sent_system(body) == "Be brief."
    assert backend.sent_tool_names(body) == []


async def test_stream_async_yields_text_deltas_in_order(backend: Backend) -> None:
    backend.server.script(text("The quick brown fox"))
    agent = Agent(backend.model(), system_prompt="sys")

    pieces = [event["data"] async for event in agent.stream_async("go") if event.get("type") == "text_delta"]

    assert pieces == ["The quick", " brown fox"]
    assert agent.messages[-1] == {"role": "assistant", "content": [{"text": "The quick brown fox"}]}


def test_agent_tool_round_trip(backend: Backend) -> None:
    backend.server.script(tool_use("get_weather", {"city": "Paris"}, "call_w1", before="Checking."), text("It is sunny."))
    agent = Agent(backend.model(), tools=[get_weather], system_prompt="You report weather.")

    result = agent("Weather in Paris?")

    assert str(result) == "It is sunny.\n"
    assert result.stop_reason == "end_turn"
    first, second = backend.server.bodies
    assert backend.sent_tool_names(first) == ["get_weather"]
    assert backend.sent_system(second) == "You report weather."
    assert backend.sent_tool_result(second, "call_w1") == "sunny in Paris"
    assert agent.messages[1]["content"][-1] == {"toolUse": {"toolUseId": "call_w1", "name": "get_weather",
                                                            "input": {"city": "Paris"}}}
    usage = result.metrics.accumulated_usage
    assert usage["inputTokens"] == 22 and usage["outputTokens"] == 14


@pytest.mark.parametrize("kind", ["throttle", "overloaded", "midstream_overloaded"])
def test_throttling_is_retried_by_the_agent(backend: Backend, kind: str) -> None:
    backend.server.script(Failure(kind, retry_after=3), text("recovered"))
    clock = FakeClock()
    agent = Agent(backend.model(), retry_strategy=fast_retries(clock))

    result = agent("hello")

    assert str(result) == "recovered\n"
    assert len(backend.server.requests) == 2
    honours_retry_after = backend.name != "bedrock" and kind != "midstream_overloaded"
    assert clock.sleeps == ([3.0] if honours_retry_after else [0.0])


def test_throttling_gives_up_after_max_attempts(backend: Backend) -> None:
    from ray_harness.types.exceptions import ModelThrottledException

    backend.server.script(Failure("throttle"), Failure("throttle"), Failure("throttle"))
    agent = Agent(backend.model(), retry_strategy=fast_retries(FakeClock()))

    with pytest.raises(ModelThrottledException, match="throttled"):
        agent("hello")
    assert len(backend.server.requests) == 3


async def test_context_overflow_is_mapped(backend: Backend) -> None:
    backend.server.script(Failure("overflow"))
    model = backend.model()

    with pytest.raises(ContextWindowOverflowException):
        await collect(model.stream([{"role": "user", "content": [{"text": "a very long prompt"}]}]))


async def test_auth_error_names_what_to_set(backend: Backend) -> None:
    backend.server.script(Failure("auth"))
    model = backend.model()

    with pytest.raises(ModelConfigurationError) as caught:
        await collect(model.stream([{"role": "user", "content": [{"text": "hi"}]}]))

    hint = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY", "bedrock": "AWS_ACCESS_KEY_ID"}
    assert hint[backend.name] in str(caught.value)
    assert pickle.loads(pickle.dumps(caught.value)).args == caught.value.args


def test_structured_output_forces_the_tool_on_retry(backend: Backend) -> None:
    backend.server.script(
        text("It is warm in Paris."),  # ignores the structured-output tool: the agent forces it next
        tool_use("Weather", {"city": "Paris", "degrees": 21}, "call_s1"),
    )
    agent = Agent(backend.model())

    result = agent("Weather in Paris?", structured_output_model=Weather)

    assert result.structured_output == Weather(city="Paris", degrees=21)
    first, second = backend.server.bodies
    assert "Weather" in backend.sent_tool_names(first)
    assert backend.sent_tool_choice(first) is None
    assert backend.sent_tool_choice(second) == {"tool": {"name": "Weather"}}


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
def test_model_pickles_after_use_without_its_client(backend: Backend, dumps: object) -> None:
    backend.server.script(text("one"), text("two"))
    model = backend.model(params=_params(backend.name), context_window=1000)
    assert str(Agent(model)("first")) == "one\n"  # a client now exists inside the model

    clone = pickle.loads(dumps(model))  # type: ignore[operator]

    assert clone.get_config() == model.get_config()
    assert clone.context_window == 1000
    assert str(Agent(clone)("second")) == "two\n"  # the clone builds its own client
    assert backend.server.bodies[1] == backend.server.bodies[0] | {"messages": backend.server.bodies[1]["messages"]}


def test_update_config_changes_later_requests(backend: Backend) -> None:
    backend.server.script(text("ok"))
    model = backend.model()
    model.update_config(model_id="other-model")

    Agent(model)("hi")

    assert model.get_config()["model_id"] == "other-model"
    request = backend.server.requests[0]
    sent = request.body.get("model") or request.path
    assert "other-model" in sent
    with pytest.raises(ValueError, match="model_id"):
        model.update_config(model_id="")


def test_multiple_tool_calls_in_one_turn(backend: Backend) -> None:
    backend.server.script(
        Answer([("tool", "call_a", "get_weather", {"city": "Oslo"}), ("tool", "call_b", "get_weather", {"city": "Rome"})]),
        text("Oslo and Rome are sunny."),
    )
    agent = Agent(backend.model(), tools=[get_weather])

    result = agent("Weather in Oslo and Rome?")

    assert str(result) == "Oslo and Rome are sunny.\n"
    uses = [block["toolUse"] for block in agent.messages[1]["content"] if "toolUse" in block]
    assert [(use["toolUseId"], use["input"]) for use in uses] == [("call_a", {"city": "Oslo"}),
                                                                  ("call_b", {"city": "Rome"})]
    second = backend.server.bodies[1]
    assert backend.sent_tool_result(second, "call_a") == "sunny in Oslo"
    assert backend.sent_tool_result(second, "call_b") == "sunny in Rome"


def _params(name: str) -> dict:
    if name == "bedrock":
        return {"inferenceConfig": {"temperature": 0.5}}
    return {"temperature": 0.5}


def test_agent_surfaces_auth_errors_unwrapped(backend: Backend) -> None:
    backend.server.script(Failure("auth"))

    with pytest.raises(ModelConfigurationError, match="rejected the"):
        Agent(backend.model())("hi")


def test_agent_recovers_from_context_overflow_by_reducing_history(backend: Backend) -> None:
    backend.server.script(Failure("overflow"), text("fits now"))
    history = []
    for turn in range(6):
        history += [{"role": "user", "content": [{"text": f"question {turn}"}]},
                    {"role": "assistant", "content": [{"text": f"answer {turn}"}]}]
    agent = Agent(backend.model(), messages=history)

    result = agent("next")

    assert str(result) == "fits now\n"
    first, second = backend.server.bodies
    assert len(second["messages"]) < len(first["messages"])


def test_follow_up_call_after_structured_output_sends_a_valid_history(backend: Backend) -> None:
    backend.server.script(tool_use("Weather", {"city": "Oslo", "degrees": 3}, "call_s2"), text("Anything else?"))
    agent = Agent(backend.model())  # no tools of its own: only the structured-output tool ever existed

    agent("Weather in Oslo?", structured_output_model=Weather)
    result = agent("Thanks!")

    assert str(result) == "Anything else?\n"
    follow_up = backend.server.bodies[1]
    assert backend.sent_tool_names(follow_up) == []
    wire = str(follow_up["messages"])
    if backend.name == "openai":
        assert "call_s2" in wire  # Chat Completions accepts tool calls in a history without tools
    else:  # Anthropic and Bedrock reject tool blocks without tool definitions: they travel as text
        assert "call_s2" not in wire and "[called tool Weather with input" in wire


async def test_tool_input_that_did_not_parse_is_sent_as_an_object(backend: Backend) -> None:
    # The agent keeps unparsable tool input (a call cut off by max_tokens) as a string; the providers reject that.
    backend.server.script(text("ok"))
    history = [
        {"role": "user", "content": [{"text": "Weather?"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "call_1", "name": "get_weather",
                                                       "input": '{"city": "Os'}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "call_1", "status": "error",
                                                     "content": [{"text": "Error: invalid input"}]}}]},
    ]

    await collect(backend.model().stream(history, [get_weather.tool_spec]))

    (body,) = backend.server.bodies
    assistant = next(message for message in body["messages"] if message["role"] == "assistant")
    if backend.name == "openai":
        assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
    elif backend.name == "anthropic":
        assert assistant["content"][0]["input"] == {}
    else:
        assert assistant["content"][0]["toolUse"]["input"] == {}
