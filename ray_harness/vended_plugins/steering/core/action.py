"""Strands' ``steering.core.action``: the steering decisions, as ray_harness's ``Steer*`` classes.

``Proceed`` is :class:`ray_harness.steering.SteerProceed` and ``Interrupt`` is
:class:`~ray_harness.steering.SteerInterrupt` (both built as Strands builds them: ``Proceed(reason=...)``,
``Interrupt(reason=...)``); ``ToolSteeringAction`` is :data:`~ray_harness.steering.SteeringAction`. ``Guide`` is a
thin subclass of :class:`~ray_harness.steering.SteerGuide` taking Strands' ``reason`` for its ``message``.
``ModelSteeringAction`` (``Proceed | Guide``) is a plain union: ray_harness has no name for it.

Unlike Strands' pydantic models these are frozen dataclasses, with no ``type`` field, and ``Proceed``'s reason is
optional.
"""

from __future__ import annotations

from ray_harness.steering import SteerGuide, SteeringAction, SteerInterrupt, SteerProceed

__all__ = ("Guide", "Interrupt", "ModelSteeringAction", "Proceed", "ToolSteeringAction")

Proceed = SteerProceed
Interrupt = SteerInterrupt
ToolSteeringAction = SteeringAction


class Guide(SteerGuide):
    """Strands' ``Guide(reason=...)``: a :class:`~ray_harness.steering.SteerGuide` whose ``message`` is ``reason``.

    The handler acts on it as on any ``SteerGuide``: before a tool, the tool is cancelled and ``reason`` is its
    result as is (Strands wraps it in "Tool call cancelled. ... You MUST follow this guidance immediately.");
    after a model call, the reply is discarded and ``reason`` is added for the retry.
    """

    def __init__(self, reason: str) -> None:
        """Build the guide from Strands' keyword.

        Args:
            reason: The text the model sees.
        """
        super().__init__(message=reason)

    @property
    def reason(self) -> str:
        """The guide's text (Strands' name for ``message``)."""
        return self.message


ModelSteeringAction = SteerProceed | SteerGuide
"""What ``steer_after_model`` may return (``None`` also proceeds)."""
