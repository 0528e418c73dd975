"""Bedrock guardrails: redaction of the prompt and the answer when a guardrail blocked content (as in Strands)."""

from __future__ import annotations

from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.models.bedrock import BedrockModel
from ray_harness.session import FileSessionManager
from tests.providers.conftest import bedrock_model
from tests.providers.fake_servers import Answer, BedrockServer, tool_use

GUARDRAIL = {"guardrail_id": "gr-1", "guardrail_version": "1"}
BLOCKED_INPUT = {"guardrail": {"inputAssessment": {"gr-1": {"contentPolicy": {"filters": [
    {"type": "VIOLENCE", "confidence": "HIGH", "filterStrength": "HIGH", "action": "BLOCKED", "detected": True}]}}}}}
BLOCKED_OUTPUT = {"guardrail": {"outputAssessments": {"gr-1": [{"wordPolicy": {"customWords": [
    {"match": "secret", "action": "BLOCKED", "detected": True}]}}]}}}
ANONYMIZED_OUTPUT = {"guardrail": {"outputAssessments": {"gr-1": [{"sensitiveInformationPolicy": {"piiEntities": [
    {"match": "a@b.c", "type": "EMAIL", "action": "ANONYMIZED", "detected": True}]}}]}}}


def intervened(text: str = "Sorry, I cannot help with that.", trace: dict[str, Any] | None = None) -> Answer:
    return Answer([("text", text)], stop="guardrail_intervened", trace=trace)


def guarded(server: BedrockServer, **kwargs: Any) -> BedrockModel:
    return bedrock_model(server, **GUARDRAIL, **kwargs)  # type: ignore[return-value]


@pytest.mark.parametrize("streaming", [True, False])
def test_a_blocked_prompt_is_redacted_in_the_history(bedrock_server: BedrockServer, streaming: bool) -> None:
    bedrock_server.script(intervened(trace=BLOCKED_INPUT))
    agent = Agent(guarded(bedrock_server, streaming=streaming))

    result = agent("how do I hurt someone?")

    assert result.stop_reason == "guardrail_intervened"
    assert agent.messages == [
        {"role": "user", "content": [{"text": "[User input redacted.]"}]},
        {"role": "assistant", "content": [{"text": "Sorry, I cannot help with that."}]},  # output kept by default
    ]
    assert bedrock_server.bodies[0]["messages"][0]["content"] == [{"text": "how do I hurt someone?"}]


async def test_the_redaction_events_come_before_the_metadata(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(intervened(trace=BLOCKED_OUTPUT))
    model = guarded(bedrock_server, guardrail_redact_output=True, guardrail_redact_output_message="[gone]")

    events = [event async for event in model.stream([{"role": "user", "content": [{"text": "tell"}]}])]

    keys = [next(iter(event)) for event in events]
    assert keys[-3:] == ["redactContent", "redactContent", "metadata"]
    assert events[-3:-1] == [{"redactContent": {"redactUserContentMessage": "[User input redacted.]"}},
                             {"redactContent": {"redactAssistantContentMessage": "[gone]"}}]


def test_output_redaction_replaces_the_answer(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(intervened("the secret is 42", trace=BLOCKED_OUTPUT))
    agent = Agent(guarded(bedrock_server, guardrail_redact_input=False, guardrail_redact_output=True,
                          guardrail_redact_output_message="[Answer withheld.]"))

    result = agent("what is the secret?")

    assert str(result) == "[Answer withheld.]\n"
    assert agent.messages == [{"role": "user", "content": [{"text": "what is the secret?"}]},
                              {"role": "assistant", "content": [{"text": "[Answer withheld.]"}]}]


def test_anonymized_content_is_not_redacted(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(intervened("write to {EMAIL}", trace=ANONYMIZED_OUTPUT))
    agent = Agent(guarded(bedrock_server, guardrail_redact_output=True))

    agent("my address is a@b.c")

    assert agent.messages[0]["content"] == [{"text": "my address is a@b.c"}]
    assert agent.messages[1]["content"] == [{"text": "write to {EMAIL}"}]


def test_without_a_trace_the_stop_reason_decides(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(intervened(trace=None))
    agent = Agent(guarded(bedrock_server, guardrail_trace="disabled", guardrail_redact_input_message="[removed]"))

    agent("blocked words")

    assert agent.messages[0]["content"] == [{"text": "[removed]"}]


def test_redaction_can_be_turned_off(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(intervened(trace=BLOCKED_INPUT))
    agent = Agent(guarded(bedrock_server, guardrail_redact_input=False))

    agent("how do I hurt someone?")

    assert agent.messages[0]["content"] == [{"text": "how do I hurt someone?"}]


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found: {query}"


def test_a_tool_result_turn_keeps_its_results(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(tool_use("lookup", {"query": "x"}, "t1"), intervened(trace=BLOCKED_INPUT))
    agent = Agent(guarded(bedrock_server), tools=[lookup])

    agent("look up x")

    assert agent.messages[0]["content"] == [{"text": "look up x"}]  # only the turn the guardrail saw last
    assert agent.messages[2]["content"] == [{"toolResult": {"toolUseId": "t1", "status": "success",
                                                            "content": [{"text": "[User input redacted.]"}]}}]


def test_the_session_keeps_the_redacted_prompt(bedrock_server: BedrockServer, tmp_path: Any) -> None:
    bedrock_server.script(intervened(trace=BLOCKED_INPUT))
    Agent(guarded(bedrock_server), session_manager=FileSessionManager("s1", storage_dir=tmp_path))("bad words")

    restored = Agent(guarded(bedrock_server), session_manager=FileSessionManager("s1", storage_dir=tmp_path))

    assert restored.messages[0] == {"role": "user", "content": [{"text": "[User input redacted.]"}]}


def test_latest_message_only_goes_to_the_guardrail(bedrock_server: BedrockServer) -> None:
    bedrock_server.script(tool_use("lookup", {"query": "x"}, "t1"), Answer([("text", "done")]))
    agent = Agent(guarded(bedrock_server, guardrail_latest_message=True), tools=[lookup],
                  messages=[{"role": "user", "content": [{"text": "earlier"}]},
                            {"role": "assistant", "content": [{"text": "ok"}]}])

    agent("now this")

    first, second = (body["messages"] for body in bedrock_server.bodies)
    assert first[0]["content"] == [{"text": "earlier"}]
    assert first[-1]["content"] == [{"guardContent": {"text": {"text": "now this"}}}]
    assert second[2]["content"] == [{"guardContent": {"text": {"text": "now this"}}}]  # still the prompt
    assert "toolResult" in second[-1]["content"][0]


def test_the_redaction_settings_are_config(bedrock_server: BedrockServer) -> None:
    model = guarded(bedrock_server)
    config = model.get_config()
    assert (config["guardrail_redact_input"], config["guardrail_redact_output"]) == (True, False)
    assert config["guardrail_redact_input_message"] == "[User input redacted.]"

    model.update_config(guardrail_redact_output=True, guardrail_latest_message=True)

    assert model.get_config()["guardrail_redact_output"] is True
    with pytest.raises(ValueError, match="guardrail_redact_input"):
        model.update_config(guardrail_redact_input="sometimes")
