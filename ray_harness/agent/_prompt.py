"""Normalize what an invocation was given into the messages it appends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ray_harness.checkpoint import Checkpoint
from ray_harness.types.content import Message
from ray_harness.types.validation import validate_blocks, validate_messages

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.agent.loop import Invocation

__all__ = ("INTERRUPTED_TOOL_TEXT", "prepare_prompt", "prompt_messages")

INTERRUPTED_TOOL_TEXT = "Tool was interrupted."  # Strands' text for a tool use answered this way

_FORMS = ("a string, a list of content blocks, a list of messages, a list of interruptResponse blocks, "
          "{'checkpointResume': {...}}, or None")


def prepare_prompt(agent: Agent, prompt: Any, inv: Invocation) -> list[Message]:
    """Messages to append for ``prompt``; resumes interrupts and checkpoints as a side effect."""
    state = agent._interrupt_state
    if state.activated:
        state.resume(prompt)  # TypeError / KeyError for bad responses
        return []
    if isinstance(prompt, str):  # the usual prompt: neither interrupt responses nor a checkpoint, as prompt_messages
        return _answering_open_tool_uses(agent, [{"role": "user", "content": [{"text": prompt}]}])
    state.resume(prompt)  # ValueError when responses arrive at an agent that is not interrupted
    checkpoint = _checkpoint_payload(prompt)
    if checkpoint is not _NO_CHECKPOINT:  # a None payload is a bad checkpoint, named as such, not a prompt
        if not agent.checkpointing:
            raise ValueError("prompt is a checkpointResume but the agent was created with checkpointing=False; "
                             "pass checkpointing=True to Agent to resume from a checkpoint")
        _resume_checkpoint(agent, inv, checkpoint)
        return []
    messages = prompt_messages(prompt, _FORMS)
    return _answering_open_tool_uses(agent, messages) if messages else messages


def prompt_messages(prompt: Any, forms: str) -> list[Message]:
    """The messages a prompt (``None``, a string, content blocks or messages) stands for, validated.

    Raises:
        ValueError: Any other prompt; the message ends with "expected ``forms``".
    """
    if prompt is None:
        return []
    if isinstance(prompt, str):
        return [{"role": "user", "content": [{"text": prompt}]}]
    if isinstance(prompt, list):
        if not prompt:
            return []
        if all(isinstance(item, dict) and "role" in item for item in prompt):
            return validate_messages(prompt, "prompt")
        if all(isinstance(item, dict) and "role" not in item for item in prompt):
            return [{"role": "user", "content": validate_blocks(prompt, "prompt")}]
        for index, item in enumerate(prompt):
            if not isinstance(item, dict):
                raise ValueError(f"prompt[{index}] is a {type(item).__name__}, not a message or content block dict; "
                                 f"expected {forms}")
        raise ValueError(f"prompt list mixes messages and content blocks; expected {forms}")
    raise ValueError(f"unsupported prompt of type {type(prompt).__name__}; expected {forms}")


def _answering_open_tool_uses(agent: Agent, messages: list[Message]) -> list[Message]:
    """A new prompt after tool uses that have no results first answers them with error results (as in Strands).

    Such a history comes from a hand-set ``agent.messages`` or an interrupted process; providers reject a tool
    use without its result. The results open the prompt's own user turn, so roles keep alternating.
    """
    history = agent.messages
    if not history or history[-1]["role"] != "assistant":
        return messages
    ids = [block["toolUse"]["toolUseId"] for block in history[-1]["content"] if "toolUse" in block]
    if not ids:
        return messages
    results: list[Any] = [{"toolResult": {"toolUseId": use_id, "status": "error",
                                          "content": [{"text": INTERRUPTED_TOOL_TEXT}]}} for use_id in ids]
    if messages and messages[0]["role"] == "user":
        return [{"role": "user", "content": [*results, *messages[0]["content"]]}, *messages[1:]]
    return [{"role": "user", "content": results}, *messages]


_NO_CHECKPOINT = object()


def _checkpoint_payload(prompt: Any) -> Any:
    if isinstance(prompt, dict) and "checkpointResume" in prompt:
        payload = prompt["checkpointResume"]
    elif isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], dict) and "checkpointResume" in prompt[0]:
        payload = prompt[0]["checkpointResume"]
    else:
        return _NO_CHECKPOINT
    if isinstance(payload, dict) and "checkpoint" in payload:
        return payload["checkpoint"]
    return payload


def _resume_checkpoint(agent: Agent, inv: Invocation, data: Any) -> None:
    checkpoint = data if isinstance(data, Checkpoint) else Checkpoint.from_dict(data)
    inv.resumed_position = checkpoint.position
    inv.cycle_index = checkpoint.cycle_index + (1 if checkpoint.position == "after_tools" else 0)
