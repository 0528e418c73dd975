"""Strands' ``strands.vended_plugins.steering.core``, served by :mod:`ray_harness.steering`.

``SteeringHandler`` and ``SteeringContext`` are ray_harness's own; ``Proceed``, ``Guide``, ``Interrupt``,
``ToolSteeringAction`` and ``ModelSteeringAction`` are ray_harness's ``Steer*`` decisions under Strands' names
(see :mod:`ray_harness.vended_plugins.steering.core.action`; ``Guide`` is a thin subclass taking ``reason``).
Not provided: ``SteeringContextCallback`` and ``SteeringContextProvider`` (importing them raises ``ImportError``).
"""

from __future__ import annotations

from ray_harness._strands_paths import not_provided
from ray_harness.vended_plugins.steering._left_out import REASONS
from ray_harness.vended_plugins.steering.core.action import (
    Guide,
    Interrupt,
    ModelSteeringAction,
    Proceed,
    ToolSteeringAction,
)
from ray_harness.vended_plugins.steering.core.context import SteeringContext
from ray_harness.vended_plugins.steering.core.handler import SteeringHandler

__all__ = ("Guide", "Interrupt", "ModelSteeringAction", "Proceed", "SteeringContext", "SteeringHandler",
           "ToolSteeringAction")

__getattr__ = not_provided(__name__, {name: REASONS[name] for name in
                                      ("SteeringContextCallback", "SteeringContextProvider")})
