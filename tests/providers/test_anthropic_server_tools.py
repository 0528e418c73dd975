"""Anthropic server tools (``anthropic_tools=``): their blocks in a streamed answer, as Strands handles them."""

from __future__ import annotations

from ray_harness import Agent
from tests.providers.conftest import anthropic_model
from tests.providers.fake_servers import Answer, AnthropicServer

WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search"}


def test_an_answer_with_a_server_tool_call_reaches_the_agent_as_its_text(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(Answer([("text", "Searching. "), ("web_search", "srvtoolu_1", "weather paris"),
                                    ("text", "It is sunny.")]))
    agent = Agent(model=anthropic_model(anthropic_server, anthropic_tools=[WEB_SEARCH]))

    result = agent("weather in Paris?")

    assert result.stop_reason == "end_turn"
    # The server ran the search: its call and result are not tool uses for the agent, only the text is kept.
    assert agent.messages[-1]["content"] == [{"text": "Searching. "}, {"text": "It is sunny."}]


def test_a_paused_server_tool_turn_is_resumed_with_its_content(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(Answer([("text", "Searching. "), ("web_search", "srvtoolu_1", "weather paris")],
                                   stop="pause_turn", input_tokens=20, output_tokens=5),
                            Answer([("text", "It is sunny.")], input_tokens=30, output_tokens=4))
    agent = Agent(model=anthropic_model(anthropic_server, anthropic_tools=[WEB_SEARCH]))

    result = agent("weather in Paris?")

    first, resumed = anthropic_server.bodies
    assert resumed["messages"] == [*first["messages"], {"role": "assistant", "content": [
        {"type": "text", "text": "Searching. "},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "weather paris"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{
            "type": "web_search_result", "url": "https://example.com/", "title": "Example",
            "encrypted_content": "opaque", "page_age": None}]},
    ]}]
    assert result.stop_reason == "end_turn"
    assert agent.messages[-1]["content"] == [{"text": "Searching. "}, {"text": "It is sunny."}]  # one message
    usage = result.metrics.accumulated_usage
    assert (usage["inputTokens"], usage["outputTokens"]) == (50, 9)  # both responses, as Strands sums them


async def test_a_turn_still_paused_after_ten_continuations_ends_with_the_answer_so_far(
        anthropic_server: AnthropicServer) -> None:
    paused = Answer([("text", "more ")], stop="pause_turn")
    anthropic_server.script(*[paused] * 11)
    model = anthropic_model(anthropic_server, anthropic_tools=[WEB_SEARCH])

    events = [event async for event in model.stream([{"role": "user", "content": [{"text": "q"}]}])]

    assert len(anthropic_server.requests) == 11
    assert [event for event in events if "messageStart" in event or "messageStop" in event] == [
        {"messageStart": {"role": "assistant"}}, {"messageStop": {"stopReason": "end_turn"}}]
    assert "".join(event["contentBlockDelta"]["delta"]["text"] for event in events
                   if "contentBlockDelta" in event) == "more " * 11
    starts = [event["contentBlockStart"]["contentBlockIndex"] for event in events if "contentBlockStart" in event]
    assert starts == list(range(11))  # the responses' blocks are numbered on, not from 0 each time
