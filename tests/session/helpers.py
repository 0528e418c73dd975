"""Shared assertions for history validity."""

from __future__ import annotations

from typing import Any


def tool_use_ids(message: dict[str, Any]) -> list[str]:
    return [block["toolUse"]["toolUseId"] for block in message["content"] if "toolUse" in block]


def tool_result_ids(message: dict[str, Any]) -> list[str]:
    return [block["toolResult"]["toolUseId"] for block in message["content"] if "toolResult" in block]


def assert_valid_history(messages: list[Any], *, allow_dangling_tail: bool = False) -> None:
    """Every toolResult answers the toolUse right before it; every toolUse is answered."""
    for index, message in enumerate(messages):
        results = tool_result_ids(message)
        if results:
            assert index > 0, f"history starts on an orphan toolResult: {message}"
            assert sorted(results) == sorted(tool_use_ids(messages[index - 1])), f"orphan toolResult at {index}"
        uses = tool_use_ids(message)
        if uses:
            if index == len(messages) - 1 and allow_dangling_tail:
                continue
            assert index + 1 < len(messages), f"unanswered toolUse at the end: {message}"
            assert sorted(tool_result_ids(messages[index + 1])) == sorted(uses), f"unanswered toolUse at {index}"


def text_of(message: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in message["content"])
