"""Strands' ``strands.vended_plugins.steering``, served by ray_harness's steering (:mod:`ray_harness.steering`).

- ``SteeringHandler`` is :class:`ray_harness.steering.SteeringHandler`: a hook provider
  (``Agent(hooks=[handler])``) whose ``steer_before_tool(event)`` / ``steer_after_model(event)`` take the hook
  event; a subclass declaring Strands' keyword form is refused when registered, saying which signature to use.
- ``Proceed``, ``Interrupt`` and ``ToolSteeringAction`` are ``SteerProceed``, ``SteerInterrupt`` and
  ``SteeringAction``; ``Guide`` is a thin ``SteerGuide`` subclass taking Strands' ``reason``;
  ``ModelSteeringAction`` is ``SteerProceed | SteerGuide`` (see :mod:`.core.action`).
- Not provided (importing one raises ``ImportError`` saying what to use instead): ``SteeringContextCallback``,
  ``SteeringContextProvider``, ``LedgerBeforeToolCall``, ``LedgerAfterToolCall``, ``LedgerProvider``,
  ``LLMSteeringHandler``, ``LLMPromptMapper`` (and ``handlers.llm``).

Nothing imports this package: ``import ray_harness`` does not load it.
"""

from __future__ import annotations

from ray_harness._strands_paths import not_provided
from ray_harness.vended_plugins.steering._left_out import REASONS
from ray_harness.vended_plugins.steering.core import (
    Guide,
    Interrupt,
    ModelSteeringAction,
    Proceed,
    SteeringHandler,
    ToolSteeringAction,
)

__all__ = ("Guide", "Interrupt", "ModelSteeringAction", "Proceed", "SteeringHandler", "ToolSteeringAction")

__getattr__ = not_provided(__name__, {name: reason for name, reason in REASONS.items() if name != "llm"})
