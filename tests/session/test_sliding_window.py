from __future__ import annotations

from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.agent.conversation_manager import (
    NullConversationManager,
    SlidingWindowConversationManager,
)
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.types.exceptions import ContextWindowOverflowException
from tests.session.helpers import assert_valid_history, text_of


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
def dump(size: int) -> str:
    """Return a big blob."""
    return "x" * size


def user(content: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"text": content}]}


def assistant(content: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"text": content}]}


def use(use_id: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"toolUse": {"toolUseId": use_id, "name": "lookup", "input": {"key": "k"}}}]}


def result(use_id: str, body: str = "ok") -> dict[str, Any]:
    return {"role": "user", "content": [{"toolResult": {"toolUseId": use_id, "status": "success",
                                                        "content": [{"text": body}]}}]}


def conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        messages += [user(f"q{turn}"), use(f"t{turn}"), result(f"t{turn}"), assistant(f"a{turn}")]
    return messages


def test_default_agent_manager_is_sliding_window() -> None:
    agent = Agent(ScriptedModel("hi"))
    assert isinstance(agent.conversation_manager, SlidingWindowConversationManager)
    assert agent.conversation_manager.window_size == 40


def test_trim_prefers_plain_user_message_and_keeps_pairs() -> None:
    manager = SlidingWindowConversationManager(window_size=6)
    agent = Agent(ScriptedModel(), messages=conversation(3), conversation_manager=NullConversationManager())
    manager.apply_management(agent)
    assert len(agent.messages) <= 6
    # Index 6 (the window start) is a toolResult, 7 an assistant answer: the tail starts at q2.
    assert agent.messages[0] == user("q2")
    assert manager.removed_message_count == 8
    assert_valid_history(agent.messages)


def test_trim_falls_back_to_tool_pair_boundary_in_long_tool_loops() -> None:
    messages = [user("task")]
    for index in range(6):
        messages += [use(f"t{index}"), result(f"t{index}")]
    agent = Agent(ScriptedModel(), messages=messages, conversation_manager=NullConversationManager())
    manager = SlidingWindowConversationManager(window_size=5)
    manager.apply_management(agent)
    # No plain user message in the window: the tail starts on a complete toolUse/toolResult pair.
    assert len(agent.messages) == 4
    assert agent.messages[0] == use("t4")
    assert manager.removed_message_count == 9
    assert_valid_history(agent.messages)


def test_trim_never_starts_the_history_on_an_assistant_text() -> None:
    # Providers reject a conversation whose first message is the assistant's: like Strands, the window then
    # stays over its size after an invocation, and an overflow that cannot be reduced otherwise re-raises.
    agent = Agent(ScriptedModel(), messages=[user("q0"), assistant("a0"), user("q1"), assistant("a1")],
                  conversation_manager=NullConversationManager())
    manager = SlidingWindowConversationManager(window_size=1)
    manager.apply_management(agent)
    assert len(agent.messages) == 4 and manager.removed_message_count == 0
    agent.messages[:] = [user("q0"), use("t0"), result("t0"), assistant("a0")]
    error = ContextWindowOverflowException("too long")
    with pytest.raises(ContextWindowOverflowException) as raised:
        SlidingWindowConversationManager(should_truncate_results=False).reduce_context(agent, error)
    assert raised.value is error
    assert agent.messages[0] == user("q0")


def test_agent_run_trims_after_invocation_without_splitting_pairs() -> None:
    model = ScriptedModel(*[tool_call("lookup", {"key": f"k{i}"}) for i in range(5)], text("done"))
    manager = SlidingWindowConversationManager(window_size=4)
    agent = Agent(model, tools=[lookup], conversation_manager=manager)
    result_ = agent("go")
    assert str(result_) == "done\n"
    assert len(agent.messages) <= 4
    assert_valid_history(agent.messages)
    assert manager.removed_message_count == 12 - len(agent.messages)


def test_pin_first_is_never_removed() -> None:
    manager = SlidingWindowConversationManager(window_size=5, pin_first=1)
    model = ScriptedModel(*[tool_call("lookup", {"key": f"k{i}"}) for i in range(5)], text("done"))
    agent = Agent(model, tools=[lookup], conversation_manager=manager)
    agent("the constitution")
    assert agent.messages[0] == user("the constitution")
    assert len(agent.messages) <= 5
    assert_valid_history(agent.messages[1:])
    assert manager.pinned_message_count == 1
    # Restoring keeps the layout a session needs.
    clone = SlidingWindowConversationManager(window_size=5, pin_first=1)
    assert clone.restore_from_session(manager.get_state()) is None
    assert (clone.removed_message_count, clone.pinned_message_count) == (manager.removed_message_count, 1)


def test_pinned_tool_use_keeps_its_result() -> None:
    messages = [user("task"), use("t0"), result("t0"), *conversation(2)]
    agent = Agent(ScriptedModel(), messages=messages, conversation_manager=NullConversationManager())
    manager = SlidingWindowConversationManager(window_size=4, pin_first=2)
    manager.apply_management(agent)
    assert agent.messages[:3] == [user("task"), use("t0"), result("t0")]
    assert_valid_history(agent.messages)


def test_overflow_recovery_trims_and_retries() -> None:
    model = ScriptedModel(ContextWindowOverflowException("prompt is too long"), text("fine"))
    manager = SlidingWindowConversationManager(window_size=40)
    agent = Agent(model, messages=conversation(3), conversation_manager=manager)
    outcome = agent("next")
    assert str(outcome) == "fine\n"
    assert manager.removed_message_count > 0
    assert len(model.calls) == 2
    assert len(model.calls[1].messages) < len(model.calls[0].messages)
    assert_valid_history(list(model.calls[1].messages))
    assert model.calls[1].messages[0]["role"] == "user"


def test_overflow_truncates_large_tool_results_first() -> None:
    model = ScriptedModel(tool_call("dump", {"size": 5000}), ContextWindowOverflowException("too long"), text("ok"))
    manager = SlidingWindowConversationManager()
    agent = Agent(model, tools=[dump], conversation_manager=manager)
    agent("dump it")
    sent = model.calls[2].messages
    assert len(sent) == len(model.calls[1].messages)  # nothing removed, only shortened
    body = sent[2]["content"][0]["toolResult"]["content"][0]["text"]
    assert "[truncated: 4600 chars removed]" in body
    assert body.startswith("x" * 200) and len(body) < 600
    assert manager.removed_message_count == 0


def test_overflow_replaces_images_in_tool_results_before_removing_messages() -> None:
    screenshot = {"toolResult": {"toolUseId": "t0", "status": "success",
                                 "content": [{"image": {"format": "png", "source": {"bytes": b"\x89PNG" * 5000}}}]}}
    history = [user("look"), use("t0"), {"role": "user", "content": [screenshot]}]
    model = ScriptedModel(ContextWindowOverflowException("too long"), text("ok"))
    manager = SlidingWindowConversationManager()
    agent = Agent(model, messages=history, conversation_manager=manager)
    agent(None)
    sent = model.calls[1].messages
    assert len(sent) == 3 and manager.removed_message_count == 0
    assert sent[2]["content"][0]["toolResult"]["content"] == [{"text": "[image: png, 20000 bytes]"}]


def test_overflow_that_cannot_be_reduced_raises_the_original_error() -> None:
    error = ContextWindowOverflowException("way too long")
    agent = Agent(ScriptedModel(error), conversation_manager=SlidingWindowConversationManager())
    with pytest.raises(ContextWindowOverflowException) as raised:
        agent("one huge prompt")
    assert raised.value is error
    assert agent.messages == []  # the failed invocation was rolled back


def test_proactive_compression_uses_reported_input_tokens() -> None:
    usage = {"inputTokens": 800, "outputTokens": 5, "totalTokens": 805}
    model = ScriptedModel(tool_call("lookup", {"key": "a"}, usage=usage), text("done"), context_window=1000)
    manager = SlidingWindowConversationManager(proactive_compression=True)
    agent = Agent(model, tools=[lookup], messages=conversation(2), conversation_manager=manager)
    agent("go")
    # 800 reported tokens >= 0.7 * 1000: the second call was compressed before it was sent.
    assert manager.removed_message_count > 0
    assert len(model.calls[1].messages) < len(model.calls[0].messages) + 2
    assert_valid_history(list(model.calls[1].messages))


def test_proactive_compression_respects_custom_threshold() -> None:
    usage = {"inputTokens": 800, "outputTokens": 5, "totalTokens": 805}
    model = ScriptedModel(tool_call("lookup", {"key": "a"}, usage=usage), text("done"), context_window=1000)
    manager = SlidingWindowConversationManager(proactive_compression={"compression_threshold": 0.9})
    agent = Agent(model, tools=[lookup], messages=conversation(2), conversation_manager=manager)
    agent("go")
    assert manager.removed_message_count == 0
    assert len(model.calls[1].messages) == len(model.calls[0].messages) + 2


def test_proactive_compression_estimates_when_nothing_was_reported() -> None:
    history = [message for turn in range(4) for message in (user("u" * 400 + str(turn)), assistant("a" * 400))]
    model = ScriptedModel(text("ok"), context_window=400)
    manager = SlidingWindowConversationManager(proactive_compression=True)
    agent = Agent(model, messages=history, conversation_manager=manager)
    agent("short")
    sent = model.calls[0].messages
    assert len(sent) < len(history) + 1
    assert text_of(sent[-1]) == "short"
    assert manager.removed_message_count == len(history) + 1 - len(sent)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window_size": -1}, "window_size"),
        ({"window_size": True}, "window_size"),
        ({"window_size": 3, "pin_first": 3}, "pin_first"),
        ({"pin_first": -1}, "pin_first"),
        ({"proactive_compression": {"threshold": 0.5}}, "compression_threshold"),
        ({"proactive_compression": {"compression_threshold": 1.5}}, "compression_threshold"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SlidingWindowConversationManager(**kwargs)


def test_a_failed_invocation_whose_prompt_was_trimmed_away_leaves_nothing_of_its_own() -> None:
    @tool
    def small(n: int) -> str:
        """Small."""
        return "ok"

    history = [user("q0"), assistant("a0"), user("q1"), assistant("a1")]
    overflow = ContextWindowOverflowException("too long")
    model = ScriptedModel(tool_call("small", {"n": 1}), tool_call("small", {"n": 2}), overflow, overflow, overflow,
                          RuntimeError("provider down"))
    agent = Agent(model, tools=[small], messages=history, retry_strategy=None)
    with pytest.raises(RuntimeError, match="provider down"):
        agent("go")
    # The trimming took "go" and everything before it; what is left was the failed invocation's own.
    assert agent.messages == []


def test_window_size_zero_clears_every_unpinned_message_after_each_invocation() -> None:
    # Strands: "Use 0 to clear all messages on every reduction" (a stateless agent).
    manager = SlidingWindowConversationManager(window_size=0)
    agent = Agent(ScriptedModel("one", "two"), conversation_manager=manager)
    assert str(agent("first")) == "one\n"
    assert agent.messages == [] and manager.removed_message_count == 2
    agent("second")
    assert agent.messages == [] and manager.removed_message_count == 4


def test_window_size_zero_keeps_the_pinned_messages() -> None:
    manager = SlidingWindowConversationManager(window_size=0, pin_first=1)
    agent = Agent(ScriptedModel("one", "two"), messages=[user("context"), assistant("noted")],
                  conversation_manager=manager)
    agent("q")
    assert agent.messages == [user("context")]
    assert manager.removed_message_count == 3


def test_reduce_context_without_an_error_trims_messages_and_never_raises() -> None:
    # As Strands: a call without the overflow (a manual or proactive one) only trims whole messages, and when
    # nothing can be trimmed it logs a warning and returns instead of raising.
    manager = SlidingWindowConversationManager(window_size=10)
    big = {"role": "user", "content": [{"toolResult": {"toolUseId": "t0", "status": "success",
                                                       "content": [{"text": "x" * 5000}]}}]}
    agent = Agent(ScriptedModel(), messages=[user("q0"), use("t0"), big, assistant("a0")],
                  conversation_manager=NullConversationManager())
    manager.reduce_context(agent)
    assert agent.messages[2] == big  # no tool result was truncated
    assert manager.removed_message_count == 0
    agent.messages[:] = [user("q0"), assistant("a0"), user("q1"), assistant("a1")]
    manager.reduce_context(agent)
    assert agent.messages == [user("q1"), assistant("a1")]
    assert manager.removed_message_count == 2
