"""Small history edits shared by interventions and steering."""

from __future__ import annotations

from typing import Any

__all__ = ("append_user_text",)


def append_user_text(agent: Any, text: str) -> None:
    """Add text the model sees on its next call, keeping user/assistant alternation."""
    messages = agent.messages
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]
        messages[-1] = {"role": "user", "content": [*last["content"], {"text": text}]}
    else:
        messages.append({"role": "user", "content": [{"text": text}]})
