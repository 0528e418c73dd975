"""Intervention actions: what a handler decides at a lifecycle point.

Action × lifecycle point (— is a no-op with a warning)::

    | Action    | before_invocation | before_tool_call | before_model_call | after_tool_call | after_model_call |
    |-----------|-------------------|------------------|-------------------|-----------------|------------------|
    | Proceed   | —                 | —                | —                 | —               | —                |
    | Deny      | cancel            | cancel           | cancel            | —               | —                |
    | Guide     | cancel+           | cancel+          | inject            | —               | inject + retry   |
    | Confirm   | —                 | confirm          | —                 | —               | —                |
    | Transform | apply             | apply            | apply             | apply           | apply            |

Deny and a failed Confirm short-circuit (later handlers are not asked, earlier
guidance is dropped); Guide accumulates ``[name] feedback`` lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ("Confirm", "Deny", "Guide", "InterventionAction", "Proceed", "Transform", "default_evaluate")

_APPROVED = {"y", "yes"}


def default_evaluate(response: Any) -> bool:
    """``True``, ``"y"`` or ``"yes"`` (case-insensitive, stripped) approve; anything else denies."""
    if response is True:
        return True
    return isinstance(response, str) and response.strip().lower() in _APPROVED


@dataclass(frozen=True)
class Proceed:
    """Let the operation go ahead.

    Attributes:
        reason: Why (for logs; not shown to the model).
    """

    reason: str | None = None


@dataclass(frozen=True)
class Deny:
    """Stop the operation; later handlers are not asked. The model sees ``DENIED: <reason>``.

    Attributes:
        reason: Why, shown to the model.
    """

    reason: str = ""


@dataclass(frozen=True)
class Guide:
    """Give the model feedback.

    The feedback of every guiding handler is collected into one ``GUIDANCE: [name] feedback`` block.

    Attributes:
        feedback: The text for the model.
        reason: Why (for logs).
    """

    feedback: str = ""
    reason: str | None = None


@dataclass(frozen=True)
class Confirm:
    """Ask a human (an interrupt) unless ``response`` is given up front; only on ``before_tool_call``."""

    prompt: str = ""
    response: Any = None
    evaluate: Callable[[Any], bool] = field(default=default_evaluate)
    reason: str | None = None


@dataclass(frozen=True)
class Transform:
    """Mutate the event in place (through its writable fields); later handlers see the change."""

    apply: Callable[[Any], None] = field(default=lambda event: None)
    reason: str | None = None


InterventionAction = Proceed | Deny | Guide | Confirm | Transform
