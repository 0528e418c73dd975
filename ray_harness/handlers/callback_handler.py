"""Callback handlers for ``Agent(callback_handler=...)``, under the names Strands gives them.

A callback handler hears every stream event as keyword arguments (see :class:`~ray_harness.Agent`). ray_harness
passes none by default (nothing is printed); ``PrintingCallbackHandler()`` prints the answer as it streams and
the tools the model calls, as Strands' default handler does.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ("CompositeCallbackHandler", "PrintingCallbackHandler", "null_callback_handler")


class PrintingCallbackHandler:
    """Print streamed reasoning and text to stdout, and a ``Tool #<n>: <name>`` line for each tool the model calls."""

    def __init__(self, verbose_tool_use: bool = True) -> None:
        """``verbose_tool_use=False`` counts the tool calls (``tool_count``) without printing them."""
        self.tool_count = 0
        self._verbose_tool_use = verbose_tool_use
        self._mid_line = False  # text was printed and the answer has not ended yet

    def __call__(self, **event: Any) -> None:
        """Print what ``event`` adds: a reasoning or text delta, a tool call starting, the end of an answer."""
        kind = event.get("type")
        if kind == "reasoning_delta" and event.get("reasoningText"):
            _write(str(event["reasoningText"]))
        elif kind == "text_delta" and event.get("data"):
            _write(str(event["data"]))
            self._mid_line = True
        elif kind == "model_event":
            start = (event.get("event") or {}).get("contentBlockStart", {}).get("start", {})
            if "toolUse" in start:
                self._tool_called(str(start["toolUse"].get("name", "")))
        elif kind == "message" and self._mid_line:
            _write("\n")  # the answer is complete
            self._mid_line = False

    def _tool_called(self, name: str) -> None:
        self.tool_count += 1
        if self._verbose_tool_use:
            _write(f"\nTool #{self.tool_count}: {name}\n")
            self._mid_line = False


def _write(text: str) -> None:
    # Printing is this handler's job: straight to stdout, flushed so a streamed answer shows as it comes.
    sys.stdout.write(text)
    sys.stdout.flush()


class CompositeCallbackHandler:
    """Several handlers as one: each hears every event, in the order given."""

    def __init__(self, *handlers: Callable[..., Any]) -> None:
        self.handlers = handlers

    def __call__(self, **event: Any) -> None:
        """Pass ``event`` to every handler."""
        for handler in self.handlers:
            handler(**event)


def null_callback_handler(**_event: Any) -> None:
    """A handler that ignores every event (``callback_handler=None`` does the same, without the calls)."""
    return None
