"""Strands' ``steering.core.handler``: ``SteeringHandler`` is :class:`ray_harness.steering.SteeringHandler`.

It is a hook provider (``Agent(hooks=[handler])``, not ``plugins=``), its ``steer_before_tool(event)`` and
``steer_after_model(event)`` take the hook event, and it takes no context providers; a subclass written with
Strands' keyword form (``agent=``, ``tool_use=``, ...) is refused when registered, with the signature to use.
"""

from __future__ import annotations

from ray_harness.steering import SteeringHandler

__all__ = ("SteeringHandler",)
