"""``model.structured_output(...)`` called on a model directly (Strands' provider method), on every provider."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from ray_harness.testing import ScriptedModel
from ray_harness.testing.model import text as scripted_text, tool_call as scripted_tool_call
from ray_harness.types.exceptions import StructuredOutputException
from tests.providers.conftest import Backend
from tests.providers.fake_servers import Answer, text, tool_use


class Weather(BaseModel):
    """A weather report."""

    city: str
    degrees: int


async def collect(model: object, *args: object, **kwargs: object) -> list[dict]:
    return [event async for event in model.structured_output(*args, **kwargs)]  # type: ignore[attr-defined]


async def test_forced_tool_call_yields_the_validated_output_last(backend: Backend) -> None:
    backend.server.script(tool_use("Weather", {"city": "Paris", "degrees": 21}, "call_s1"))
    model = backend.model()

    events = await collect(model, Weather, [{"role": "user", "content": [{"text": "Paris?"}]}],
                           system_prompt="Report weather.")

    assert events[-1] == {"type": "output", "output": Weather(city="Paris", degrees=21)}
    stop_reason, message, usage, _metrics = events[-2]["stop"]
    assert stop_reason == "tool_use"
    assert message["content"][-1]["toolUse"]["input"] == {"city": "Paris", "degrees": 21}
    assert usage["inputTokens"] == 11 and usage["outputTokens"] == 7
    assert any(event.get("type") == "model_event" for event in events[:-2])  # the stream, as the agent sees it
    (body,) = backend.server.bodies
    assert backend.sent_tool_names(body) == ["Weather"]
    assert backend.sent_tool_choice(body) == {"tool": {"name": "Weather"}}
    assert backend.sent_system(body) == "Report weather."


async def test_a_string_prompt_is_one_user_message(backend: Backend) -> None:
    backend.server.script(tool_use("Weather", {"city": "Oslo", "degrees": -3}))

    events = await collect(backend.model(), Weather, "Oslo?")

    assert events[-1]["output"] == Weather(city="Oslo", degrees=-3)
    assert backend.server.bodies[0]["messages"][-1]["role"] == "user"


async def test_json_answered_as_text_is_accepted(backend: Backend) -> None:
    backend.server.script(text('{"city": "Rome", "degrees": 30}'))

    events = await collect(backend.model(), Weather, "Rome?")

    assert events[-1]["output"] == Weather(city="Rome", degrees=30)


async def test_invalid_tool_input_names_the_field(backend: Backend) -> None:
    backend.server.script(tool_use("Weather", {"city": "Paris", "degrees": "warm"}))

    with pytest.raises(StructuredOutputException, match=r"Weather\.degrees"):
        await collect(backend.model(), Weather, "Paris?")


async def test_an_answer_without_the_tool_is_refused(backend: Backend) -> None:
    backend.server.script(Answer([("text", "I cannot say")], stop="max_tokens"))

    with pytest.raises(StructuredOutputException, match="'max_tokens'"):
        await collect(backend.model(), Weather, "Paris?")


async def test_scripted_model_has_it_too() -> None:
    model = ScriptedModel(scripted_tool_call("Weather", {"city": "Lima", "degrees": 18}),
                          scripted_text("no JSON here"))

    events = await collect(model, Weather, "Lima?", system_prompt="sys")

    assert events[-1] == {"type": "output", "output": Weather(city="Lima", degrees=18)}
    assert model.calls[0].tool_choice == {"tool": {"name": "Weather"}}
    assert model.calls[0].system_prompt == "sys"
    with pytest.raises(StructuredOutputException, match="neither called the tool nor answered with a JSON object"):
        await collect(model, Weather, "again?")


async def test_bad_arguments_are_refused_before_any_call() -> None:
    model = ScriptedModel()

    with pytest.raises(TypeError, match="pydantic BaseModel class"):
        await collect(model, dict, "x")
    with pytest.raises(TypeError, match="prompt must be a list of messages or a string"):
        await collect(model, Weather, {"role": "user"})
    assert model.calls == []


async def test_the_call_waits_for_the_models_rate_limit() -> None:
    from ray_harness.models import RateLimit
    from ray_harness.models.rate_limit import _LOCAL

    model = ScriptedModel(scripted_tool_call("Weather", {"city": "Bern", "degrees": 9}))
    model.rate_limit = RateLimit(requests_per_minute=60, key="structured-output-test")

    assert "structured-output-test" not in _LOCAL

    events = await collect(model, Weather, "Bern?")

    assert events[-1]["output"] == Weather(city="Bern", degrees=9)
    assert "structured-output-test" in _LOCAL  # the call went through the model's bucket
