"""Citations stream into the agent's message as Strands keeps them, and every provider accepts that history."""

from __future__ import annotations

from typing import Any

import pytest

from ray_harness import Agent
from tests.providers.conftest import anthropic_model, bedrock_model, openai_model
from tests.providers.fake_servers import Answer, AnthropicServer, BedrockServer, OpenAIServer, text

CITED = ("cited", "Paris is the capital.", "Paris is the capital of France", "Atlas", 4, 34)
CITATION = {"title": "Atlas", "sourceContent": [{"text": "Paris is the capital of France"}],
            "location": {"documentChar": {"documentIndex": 0, "start": 4, "end": 34}}}
CITED_BLOCK = {"citationsContent": {"citations": [CITATION], "content": [{"text": "Paris is the capital."}]}}


def test_an_anthropic_citation_makes_a_citations_block(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(Answer([("text", "Checking. "), CITED]), text("ok"))
    seen: list[dict[str, Any]] = []
    agent = Agent(anthropic_model(anthropic_server), callback_handler=lambda **event: seen.append(event))

    result = agent("Capital?")
    agent("And?")  # the cited answer goes back as its text, as Strands sends it

    assert agent.messages[1]["content"] == [{"text": "Checking. "}, CITED_BLOCK]
    assert [event["citation"] for event in seen if "citation" in event] == [CITATION]  # Strands' callback keys
    assert str(result) == "Checking. \nParis is the capital.\n"
    assert anthropic_server.bodies[1]["messages"][1]["content"] == [
        {"type": "text", "text": "Checking. "}, {"type": "text", "text": "Paris is the capital."}]


@pytest.mark.parametrize("streaming", [True, False])
def test_a_bedrock_citation_makes_a_citations_block_sent_back_with_its_citations(bedrock_server: BedrockServer,
                                                                                  streaming: bool) -> None:
    bedrock_server.script(Answer([CITED]), text("ok"))
    agent = Agent(bedrock_model(bedrock_server, streaming=streaming))

    agent("Capital?")
    agent("And?")

    assert agent.messages[1]["content"] == [CITED_BLOCK]
    assert bedrock_server.bodies[1]["messages"][1]["content"] == [CITED_BLOCK]


def test_a_citations_block_from_elsewhere_is_sent_to_bedrock_with_only_what_converse_takes(
        bedrock_server: BedrockServer) -> None:
    bedrock_server.script(text("ok"))
    streamed = {"citationsContent": {"citations": [{**CITATION, "source": "s3://atlas",
                                                    "sourceContent": [{"text": "Paris"}, {"image": {}}]}],
                                     "content": [{"text": "Paris."}, {"image": {}}]}}
    agent = Agent(bedrock_model(bedrock_server),
                  messages=[{"role": "user", "content": [{"text": "Q"}]}, {"role": "assistant", "content": [streamed]}])

    agent("And?")

    assert bedrock_server.bodies[0]["messages"][1]["content"] == [{"citationsContent": {
        "citations": [{**CITATION, "sourceContent": [{"text": "Paris"}]}], "content": [{"text": "Paris."}]}}]


def test_a_citations_block_goes_to_openai_as_its_text(openai_server: OpenAIServer) -> None:
    openai_server.script(text("ok"))
    agent = Agent(openai_model(openai_server),
                  messages=[{"role": "user", "content": [{"text": "Q"}]}, {"role": "assistant", "content": [CITED_BLOCK]}])

    agent("And?")

    assert openai_server.bodies[0]["messages"][1] == {"role": "assistant", "content": "Paris is the capital."}
