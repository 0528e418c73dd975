"""Small history edits shared by the loop (a failed invocation's rollback), interventions and steering."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ray_harness.types.content import Message

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.agent.loop import Invocation

__all__ = ("append_user_text", "rollback")


def append_user_text(agent: Any, text: str) -> None:
    """Add text the model sees on its next call, keeping user/assistant alternation."""
    messages = agent.messages
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]
        messages[-1] = {"role": "user", "content": [*last["content"], {"text": text}]}
    else:
        messages.append({"role": "user", "content": [{"text": text}]})


def rollback(agent: Agent, inv: Invocation, length: int) -> None:
    """A failed invocation removes what it added, so the history stays valid for the next call.

    The cut is at the first message this invocation appended, found by identity: a conversation manager
    may have trimmed or summarized older messages meanwhile, which shifts positions.
    """
    if agent._interrupt_state.activated:
        return  # the interrupted turn must stay so that it can be resumed
    first = inv.first_appended
    if first is not None:
        found = _index_of(agent.messages, first)
        if found is None and inv.last_before is not None:
            # Not trimmed but replaced (a guide merged its text into the prompt's turn): it follows the
            # history's last message from before the invocation, if that one is still there.
            before = _index_of(agent.messages, inv.last_before)
            if before is not None and before + 1 < len(agent.messages):
                found = before + 1
        if found is None:
            # Trimmed away, with everything older than it but the manager's pinned prefix and summary.
            manager = agent.conversation_manager
            length = int(getattr(manager, "pinned_message_count", 0)) + int(
                getattr(manager, "synthetic_message_count", 0))
        elif _answers_earlier_tool_use(agent.messages, found):
            length = found + 1  # a resume's results of tools that ran: they did, whatever failed after
        else:
            length = found
    if len(agent.messages) > length:
        del agent.messages[length:]
        truncate = getattr(agent.session_manager, "on_history_truncated", None)
        if callable(truncate):
            truncate(agent, length)


def _index_of(messages: list[Message], message: Message) -> int | None:
    return next((i for i, candidate in enumerate(messages) if candidate is message), None)


def _answers_earlier_tool_use(messages: list[Message], index: int) -> bool:
    """Whether ``messages[index]`` holds only tool results for the tool uses of the message before it."""
    if index == 0 or messages[index]["role"] != "user" or messages[index - 1]["role"] != "assistant":
        return False
    uses = {block["toolUse"]["toolUseId"] for block in messages[index - 1]["content"] if "toolUse" in block}
    results = [block["toolResult"].get("toolUseId") for block in messages[index]["content"] if "toolResult" in block]
    return bool(results) and len(results) == len(messages[index]["content"]) and set(results) <= uses
