from __future__ import annotations

from typing import Any

import pytest

from ray_harness import Agent, tool
from ray_harness.agent.conversation_manager import SummarizingConversationManager
from ray_harness.agent.conversation_manager.summarizing import DEFAULT_SUMMARIZATION_PROMPT
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.types.exceptions import ContextWindowOverflowException
from tests.session.helpers import assert_valid_history, text_of
from tests.session.test_sliding_window import assistant, result, use, user


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def chat(pairs: int) -> list[dict[str, Any]]:
    return [message for index in range(pairs) for message in (user(f"q{index}"), assistant(f"a{index}"))]


def test_summary_replaces_the_oldest_ratio_in_a_separate_call() -> None:
    model = ScriptedModel(ContextWindowOverflowException("too long"), text("SUMMARY of q0..q4"), text("final"))
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=4)
    agent = Agent(model, messages=chat(10), conversation_manager=manager, system_prompt="be brief")
    outcome = agent("next")
    assert str(outcome) == "final\n"
    # 21 messages * 0.5 = 10 summarized into one user message.
    assert manager.removed_message_count == 10
    assert agent.messages[0] == {"role": "user", "content": [{"text": "SUMMARY of q0..q4"}]}
    assert agent.messages[1:] == [*chat(10)[10:], user("next"), assistant("final")]
    summary_call = model.calls[1]
    assert summary_call.system_prompt == DEFAULT_SUMMARIZATION_PROMPT
    assert summary_call.tool_specs == ()
    assert len(summary_call.messages) == 1
    transcript = text_of(summary_call.messages[0])
    assert "[user] q0" in transcript and "[assistant] a4" in transcript and "q5" not in transcript
    # The summary request never entered the agent's history.
    assert not any("Summarize this conversation" in text_of(message) for message in agent.messages)
    assert model.calls[2].system_prompt == "be brief"
    assert model.calls[2].messages[0] == agent.messages[0]


def test_summarization_usage_counts_towards_the_agent() -> None:
    usage = {"inputTokens": 100, "outputTokens": 10, "totalTokens": 110}
    model = ScriptedModel(ContextWindowOverflowException("x"), text("S", usage=usage), text("ok", usage=usage))
    agent = Agent(model, messages=chat(10), conversation_manager=SummarizingConversationManager())
    outcome = agent("go")
    assert outcome.metrics.accumulated_usage["totalTokens"] == 220


def test_summarization_agent_is_used_and_keeps_no_history() -> None:
    helper_model = ScriptedModel(text("HELPER SUMMARY"))
    helper = Agent(helper_model, system_prompt="You summarize.", messages=[user("old"), assistant("memory")])
    model = ScriptedModel(ContextWindowOverflowException("too long"), text("final"))
    manager = SummarizingConversationManager(summarization_agent=helper)
    agent = Agent(model, messages=chat(10), conversation_manager=manager)
    agent("next")
    assert text_of(agent.messages[0]) == "HELPER SUMMARY"
    assert helper.messages == [user("old"), assistant("memory")]
    assert helper_model.calls[0].system_prompt == "You summarize."
    assert len(model.calls) == 2


def test_summarization_agent_with_structured_output_still_writes_a_text_summary() -> None:
    from pydantic import BaseModel

    class Report(BaseModel):
        title: str

    helper_model = ScriptedModel(text("HELPER SUMMARY"))
    helper = Agent(helper_model, structured_output_model=Report)
    model = ScriptedModel(ContextWindowOverflowException("too long"), text("final"))
    agent = Agent(model, messages=chat(10), conversation_manager=SummarizingConversationManager(summarization_agent=helper))
    agent("next")
    assert text_of(agent.messages[0]) == "HELPER SUMMARY"
    assert helper_model.calls[0].tool_names == ()  # no forced structured-output tool
    assert helper.structured_output_model is Report


def test_split_never_separates_a_tool_pair() -> None:
    history = [user("task"), use("t0"), result("t0"), use("t1"), result("t1"), assistant("a"),
               user("q"), use("t2"), result("t2"), assistant("b")]
    model = ScriptedModel(ContextWindowOverflowException("x"), text("S"), text("ok"))
    # 11 messages * 0.3 = 3 -> messages[3] is a toolUse whose result follows: the split stays at 3,
    # and with ratio 0.4 (4) it would land on a toolResult and moves back to 3.
    manager = SummarizingConversationManager(summary_ratio=0.4, preserve_recent_messages=2)
    agent = Agent(model, messages=history, conversation_manager=manager)
    agent("go")
    assert manager.removed_message_count == 3
    assert agent.messages[1] == use("t1")
    assert_valid_history(agent.messages)


def test_pin_first_keeps_leading_messages_before_the_summary() -> None:
    model = ScriptedModel(ContextWindowOverflowException("x"), text("S"), text("ok"))
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2, pin_first=2)
    agent = Agent(model, messages=chat(6), conversation_manager=manager)
    agent("go")
    assert agent.messages[:3] == [user("q0"), assistant("a0"), {"role": "user", "content": [{"text": "S"}]}]
    assert "q0" not in text_of(model.calls[1].messages[0])
    assert manager.pinned_message_count == 2


def test_second_summary_folds_the_first() -> None:
    model = ScriptedModel(ContextWindowOverflowException("x"), text("S1"), text("ok"),
                          ContextWindowOverflowException("x"), text("S2"), text("ok2"))
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    agent = Agent(model, messages=chat(6), conversation_manager=manager)
    agent("one")
    first_removed = manager.removed_message_count
    agent("two")
    assert "S1" in text_of(model.calls[4].messages[0])
    assert text_of(agent.messages[0]) == "S2"
    assert sum(1 for message in agent.messages if text_of(message).startswith("S")) == 1
    # the folded summary is not counted as a removed stored message
    assert manager.removed_message_count > first_removed
    assert manager.synthetic_message_count == 1


def test_too_few_messages_raises_the_overflow() -> None:
    error = ContextWindowOverflowException("too long")
    agent = Agent(ScriptedModel(error), messages=chat(2),
                  conversation_manager=SummarizingConversationManager(preserve_recent_messages=10))
    with pytest.raises(ContextWindowOverflowException) as raised:
        agent("go")
    assert raised.value is error


def test_proactive_summary_before_the_model_call() -> None:
    history = [message for turn in range(6) for message in (user("u" * 400 + str(turn)), assistant("a" * 400))]
    model = ScriptedModel(text("SHORT"), text("ok"), context_window=1000)
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2, proactive_compression=True)
    agent = Agent(model, messages=history, conversation_manager=manager)
    agent("go")
    assert model.calls[0].system_prompt == DEFAULT_SUMMARIZATION_PROMPT
    assert text_of(model.calls[1].messages[0]) == "SHORT"
    assert manager.removed_message_count == 6


def test_failed_proactive_summary_still_calls_the_model() -> None:
    # Proactive compression is best effort (as Strands): a failing summary call must not fail the invocation.
    from ray_harness.types.exceptions import ModelThrottledException

    history = [message for turn in range(6) for message in (user("u" * 400 + str(turn)), assistant("a" * 400))]
    model = ScriptedModel(ModelThrottledException("busy"), text("ok"), context_window=1000)
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2, proactive_compression=True)
    agent = Agent(model, messages=history, conversation_manager=manager, retry_strategy=None)
    assert str(agent("go")) == "ok\n"
    assert model.calls[1].messages == (*history, user("go"))
    assert manager.removed_message_count == 0 and manager.synthetic_message_count == 0


def test_summarizing_survives_tool_loops() -> None:
    model = ScriptedModel(tool_call("lookup", {"key": "a"}), ContextWindowOverflowException("x"), text("S"),
                          text("done"))
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=1)
    agent = Agent(model, tools=[lookup], messages=chat(3), conversation_manager=manager)
    agent("go")
    assert_valid_history(agent.messages)
    assert_valid_history(list(model.calls[3].messages))


def test_state_round_trip_returns_the_summary() -> None:
    model = ScriptedModel(ContextWindowOverflowException("x"), text("S"), text("ok"))
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    Agent(model, messages=chat(5), conversation_manager=manager)("go")
    clone = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    assert clone.restore_from_session(manager.get_state()) == [{"role": "user", "content": [{"text": "S"}]}]
    assert clone.removed_message_count == manager.removed_message_count


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"summary_ratio": 0}, "summary_ratio"),
        ({"summary_ratio": 1.5}, "summary_ratio"),
        ({"preserve_recent_messages": -1}, "preserve_recent_messages"),
        ({"summarization_agent": "x", "summarization_system_prompt": "y"}, "not both"),
        ({"proactive_compression": {"compression_threshold": 0}}, "compression_threshold"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SummarizingConversationManager(**kwargs)


def test_reduce_context_without_an_error_is_best_effort() -> None:
    # As Strands: without the overflow (a manual or proactive call) a failed summary is logged, not raised.
    manager = SummarizingConversationManager(preserve_recent_messages=10)
    agent = Agent(ScriptedModel(), messages=chat(2), conversation_manager=manager)
    before = list(agent.messages)
    manager.reduce_context(agent)  # nothing to summarize outside the 10 preserved messages
    assert agent.messages == before
    failing = Agent(ScriptedModel(RuntimeError("summarizer down")))
    manager = SummarizingConversationManager(preserve_recent_messages=2, summarization_agent=failing)
    agent = Agent(ScriptedModel(), messages=chat(4), conversation_manager=manager)
    manager.reduce_context(agent)
    assert agent.messages == chat(4) and manager.removed_message_count == 0
    overflow = ContextWindowOverflowException("too long")
    with pytest.raises(RuntimeError, match="summarizer down"):
        SummarizingConversationManager(preserve_recent_messages=2, summarization_agent=Agent(
            ScriptedModel(RuntimeError("summarizer down")))).reduce_context(agent, overflow)
