"""Steering: runtime decisions from a handler's own local context.

A :class:`SteeringHandler` is a hook provider. ``steer_before_tool(event)``
returns ``SteerProceed()``, ``SteerGuide(message)`` (the tool is cancelled and
the model sees the message) or ``SteerInterrupt(reason)`` (a human decides: an
approving response — ``True``, "y", "yes" or "approve" — lets the tool run).
``steer_after_model(event)`` returns ``SteerProceed()`` or ``SteerGuide(message)``
(the reply is discarded and the model retries with the message; bounded by
``max_guide_retries``). Each handler owns a JSON-serializable
:class:`SteeringContext`, never shared between handlers.

The decisions are named ``Steer*`` because they are not the same things as
:class:`ray_harness.interventions.Proceed` / :class:`~ray_harness.interventions.Guide`
(an intervention's ``Guide`` accumulates ``GUIDANCE:`` feedback across
handlers; a steering guide replaces the tool result with its message as is) or
:class:`ray_harness.Interrupt` (the record of a pending human decision, which a
``SteerInterrupt`` creates).
"""

from __future__ import annotations

import inspect
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from ray_harness.agent._history import append_user_text
from ray_harness.hooks.events import AfterModelCallEvent, BeforeInvocationEvent, BeforeToolCallEvent
from ray_harness.hooks.registry import HookOrder, HookRegistry

__all__ = ("SteerGuide", "SteerInterrupt", "SteerProceed", "SteeringAction", "SteeringContext", "SteeringHandler")

logger = logging.getLogger(__name__)
_APPROVALS = {"y", "yes", "approve", "approved"}


@dataclass(frozen=True)
class SteerProceed:
    """Let the tool call or the model's reply stand.

    Attributes:
        reason: Why (for logs and readers of the handler; not shown to the model).
    """

    reason: str | None = None


@dataclass(frozen=True)
class SteerGuide:
    """Redirect the model.

    Before a tool, the tool is cancelled with ``message`` as its result; after a model call, the reply is
    discarded and ``message`` is added for a retry.

    Attributes:
        message: The text the model sees.
    """

    message: str


@dataclass(frozen=True)
class SteerInterrupt:
    """Ask a human before the tool runs (only before a tool call).

    The run pauses with ``stop_reason="interrupt"``; the pending
    :class:`ray_harness.Interrupt` is named ``steering:<handler name>`` and
    carries ``reason``. An approving response lets the tool run; anything else
    cancels it with ``"Denied by human: <reason>"``.

    Attributes:
        reason: What the human is asked.
    """

    reason: str


SteeringAction = SteerProceed | SteerGuide | SteerInterrupt
"""What ``steer_before_tool`` / ``steer_after_model`` may return (``None`` means proceed)."""


@dataclass
class SteeringContext:
    """Local, JSON-serializable memory of one handler."""

    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The context as a JSON-ready dict ``{"data": {...}}`` (a deep copy).

        Raises:
            TypeError: ``data`` holds a value that is not JSON.
        """
        json.dumps(self.data)  # fail loudly on non-JSON values
        return {"data": json.loads(json.dumps(self.data))}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> SteeringContext:
        """Rebuild a context from :meth:`to_dict` output.

        Raises:
            ValueError: ``raw`` is not ``{"data": {...}}``.
        """
        if not isinstance(raw, dict) or not isinstance(raw.get("data", {}), dict):
            raise ValueError("steering context must be {'data': {...}}")
        return cls(data=dict(raw.get("data", {})))


class SteeringHandler:
    """Subclass and override ``steer_before_tool`` and/or ``steer_after_model``."""

    name: str = "steering"
    max_guide_retries: int = 3

    def __init__(self) -> None:
        self.steering_context = SteeringContext()
        self._guides = 0

    def steer_before_tool(self, event: BeforeToolCallEvent) -> SteeringAction | Any:
        """Decide about a tool call before it runs. Override to enable.

        Args:
            event: The ``BeforeToolCallEvent`` (``event.tool_use`` is the call).

        Returns:
            ``SteerProceed()``, ``SteerGuide(message)`` or ``SteerInterrupt(reason)`` (``None`` proceeds).
        """
        return SteerProceed()

    def steer_after_model(self, event: AfterModelCallEvent) -> SteeringAction | Any:
        """Decide about a model response. Override to enable.

        Args:
            event: The ``AfterModelCallEvent`` (``event.stop_response.message`` is the reply).

        Returns:
            ``SteerProceed()`` or ``SteerGuide(message)`` (``None`` proceeds).
        """
        return SteerProceed()

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        """Register callbacks for the ``steer_*`` methods this subclass overrides.

        Args:
            registry: The agent's hook registry.
            **kwargs: Reserved for future use.

        Raises:
            TypeError: An overridden ``steer_*`` method cannot be called with the event alone.
        """
        cls = type(self)
        if cls.steer_before_tool is not SteeringHandler.steer_before_tool:
            _check_takes_event(self, "steer_before_tool", "BeforeToolCallEvent", "tool_use")
            registry.add_callback(BeforeToolCallEvent, self._before_tool, HookOrder.INTERVENTION_INPUT)
        if cls.steer_after_model is not SteeringHandler.steer_after_model:
            _check_takes_event(self, "steer_after_model", "AfterModelCallEvent",
                               "stop_response.message")
            registry.add_callback(BeforeInvocationEvent, self._reset, HookOrder.SDK_FIRST)
            registry.add_callback(AfterModelCallEvent, self._after_model, HookOrder.INTERVENTION_OUTPUT)

    def _reset(self, event: BeforeInvocationEvent) -> None:
        self._guides = 0

    async def _before_tool(self, event: BeforeToolCallEvent) -> None:
        action = await _call(self.steer_before_tool, event)
        match action:
            case SteerProceed() | None:
                return
            case SteerGuide(message=message):
                event.cancel_tool = message
            case SteerInterrupt(reason=reason):
                answer = event.interrupt(f"steering:{self.name}", reason=reason)
                if not (answer is True or (isinstance(answer, str) and answer.strip().lower() in _APPROVALS)):
                    event.cancel_tool = f"Denied by human: {reason}"
            case _:
                raise TypeError(f"steer_before_tool returned {action!r}; "
                                "expected SteerProceed, SteerGuide or SteerInterrupt")

    async def _after_model(self, event: AfterModelCallEvent) -> None:
        if event.stop_response is None or event.stop_response.stop_reason == "cancelled":
            return  # no reply to steer: the call failed, or it was cancelled (and is not retried)
        action = await _call(self.steer_after_model, event)
        match action:
            case SteerProceed() | None:
                return
            case SteerGuide(message=message):
                if self._guides >= self.max_guide_retries:
                    logger.warning("handler=<%s> | steering guidance ignored: retry bound reached", self.name)
                    return
                self._guides += 1
                append_user_text(event.agent, message)
                event.retry = True
            case SteerInterrupt():
                logger.warning("handler=<%s> | SteerInterrupt is only supported before a tool call", self.name)
            case _:
                raise TypeError(f"steer_after_model returned {action!r}; expected SteerProceed or SteerGuide")


def _check_takes_event(handler: SteeringHandler, name: str, event_name: str, field_hint: str) -> None:
    """Fail at registration, with the signature to use, for a method the event cannot be passed to.

    A handler ported from Strands' steering declares ``(self, *, agent, tool_use, **kwargs)``; called with the
    event it would fail at the first tool call with a bare "takes 1 positional argument but 2 were given".
    """
    try:
        inspect.signature(getattr(handler, name)).bind(None)
    except TypeError:
        raise TypeError(
            f"{type(handler).__name__}.{name} must take the {event_name} as its one argument: "
            f"def {name}(self, event) (read event.agent, event.{field_hint}); Strands' keyword form "
            "(agent=..., ...) is not how ray_harness calls it"
        ) from None
    except ValueError:  # no signature to inspect (a builtin): let the call decide
        return


async def _call(method: Any, event: Any) -> Any:
    outcome = method(event)
    if inspect.isawaitable(outcome):
        outcome = await outcome
    return outcome
