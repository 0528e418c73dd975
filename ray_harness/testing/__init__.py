"""Public test doubles: ``ScriptedModel``, ``RecordingHooks``, ``FakeClock``."""

from ray_harness.testing.clock import FakeClock
from ray_harness.testing.hooks import RecordingHooks
from ray_harness.testing.model import (
    ModelCall,
    ScriptedModel,
    ScriptError,
    Step,
    reasoning,
    step,
    text,
    tool_call,
    tool_calls,
)

__all__ = [
    "FakeClock",
    "ModelCall",
    "RecordingHooks",
    "ScriptError",
    "ScriptedModel",
    "Step",
    "reasoning",
    "step",
    "text",
    "tool_call",
    "tool_calls",
]
