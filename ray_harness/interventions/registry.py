"""Bridges intervention handlers onto the hook registry and arbitrates their actions.

Hooks are registered only for lifecycle methods some handler overrides: input
points (before_*) at ``HookOrder.INTERVENTION_INPUT``, output points (after_*)
at ``HookOrder.INTERVENTION_OUTPUT``. Handlers are asked in registration order.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any, assert_never

from ray_harness.agent._history import append_user_text
from ray_harness.hooks.events import (
    AfterModelCallEvent,
    AfterToolCallEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
)
from ray_harness.hooks.registry import HookOrder
from ray_harness.interrupts import InterruptException
from ray_harness.interventions.actions import Confirm, Deny, Guide, InterventionAction, Proceed, Transform
from ray_harness.interventions.handler import LIFECYCLE_METHODS, InterventionHandler

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent

__all__ = ("InterventionRegistry",)

logger = logging.getLogger(__name__)

_EVENTS: dict[str, tuple[type, int]] = {
    "before_invocation": (BeforeInvocationEvent, HookOrder.INTERVENTION_INPUT),
    "before_model_call": (BeforeModelCallEvent, HookOrder.INTERVENTION_INPUT),
    "before_tool_call": (BeforeToolCallEvent, HookOrder.INTERVENTION_INPUT),
    "after_model_call": (AfterModelCallEvent, HookOrder.INTERVENTION_OUTPUT),
    "after_tool_call": (AfterToolCallEvent, HookOrder.INTERVENTION_OUTPUT),
}


class InterventionRegistry:
    """An agent's intervention handlers, wired into its hooks (one callback per overridden lifecycle method).

    Args:
        agent: The agent whose hooks receive the callbacks.
        handlers: The handlers, in arbitration order.
    """

    def __init__(self, agent: Agent, handlers: list[InterventionHandler]) -> None:
        self._agent = agent
        self._handlers: list[InterventionHandler] = []
        self._guide_retries = 0
        for handler in handlers:
            self.add(handler)

    def add(self, handler: InterventionHandler) -> None:
        """Add a handler.

        Args:
            handler: An ``InterventionHandler``.

        Raises:
            TypeError: ``handler`` is not an ``InterventionHandler``.
            ValueError: Its ``on_error`` is invalid or its name is already registered.
        """
        if not isinstance(handler, InterventionHandler):
            raise TypeError(f"interventions must be InterventionHandler instances, got {handler!r}")
        if handler.on_error not in ("throw", "deny", "proceed"):
            raise ValueError(f"{handler.name}: on_error must be 'throw', 'deny' or 'proceed', got {handler.on_error!r}")
        if any(existing.name == handler.name for existing in self._handlers):
            raise ValueError(f"intervention handler name {handler.name!r} is already registered")
        newly = [m for m in LIFECYCLE_METHODS if _overrides(handler, m) and not self._any_overrides(m)]
        self._handlers.append(handler)
        for method in newly:
            event_type, order = _EVENTS[method]
            self._agent.hooks.add_callback(event_type, self._callback(method), order)
            if method == "after_model_call":
                self._agent.hooks.add_callback(BeforeInvocationEvent, self._reset_guides, HookOrder.SDK_FIRST)

    def _any_overrides(self, method: str) -> bool:
        return any(_overrides(h, method) for h in self._handlers)

    def _reset_guides(self, event: BeforeInvocationEvent) -> None:
        self._guide_retries = 0

    def _callback(self, method: str) -> Any:
        async def dispatch(event: Any) -> None:
            await self._dispatch(method, event)

        dispatch.__name__ = f"intervention_{method}"
        return dispatch

    async def _dispatch(self, method: str, event: Any) -> None:
        guidance: list[str] = []
        for handler in self._handlers:
            if not _overrides(handler, method):
                continue
            action = await self._ask(handler, method, event)
            if self._apply(method, handler, action, event, guidance):
                return  # Deny / failed Confirm: the first "no" ends arbitration, guidance is dropped
        if guidance:
            self._apply_guidance(method, event, "GUIDANCE: " + "\n".join(guidance))

    async def _ask(self, handler: InterventionHandler, method: str, event: Any) -> InterventionAction:
        try:
            action = getattr(handler, method)(event)
            if inspect.isawaitable(action):
                action = await action
        except InterruptException:
            raise
        except Exception as error:
            if handler.on_error == "throw":
                raise
            logger.warning("handler=<%s>, on_error=<%s> | intervention handler raised: %s", handler.name,
                           handler.on_error, error)
            return Deny(f"Handler threw: {error}") if handler.on_error == "deny" else Proceed()
        if not isinstance(action, Proceed | Deny | Guide | Confirm | Transform):
            # None too (Strands): a handler that forgot its `return` must not let every tool through.
            raise TypeError(f"intervention handler {handler.name!r}.{method} returned {action!r}; "
                            "expected Proceed, Deny, Guide, Confirm or Transform")
        return action

    def _apply(self, method: str, handler: InterventionHandler, action: InterventionAction, event: Any,
               guidance: list[str]) -> bool:
        """Apply one action; True means arbitration stops here."""
        match action:
            case Proceed():
                return False
            case Deny(reason=reason):
                if method in ("after_model_call", "after_tool_call"):
                    _unsupported(action, method)
                    return False
                _set_cancel(method, event, f"DENIED: {reason}")
                return True
            case Guide(feedback=feedback):
                if method == "after_tool_call":
                    _unsupported(action, method)
                else:
                    guidance.append(f"[{handler.name}] {feedback}")
                return False
            case Confirm():
                if method != "before_tool_call":
                    _unsupported(action, method)
                    return False
                return self._confirm(handler, action, event)
            case Transform():
                failed = self._transform(handler, action, event)
                return failed is not None and self._apply(method, handler, failed, event, guidance)
            case _:
                assert_never(action)

    @staticmethod
    def _transform(handler: InterventionHandler, action: Transform, event: Any) -> Deny | None:
        """Run a Transform; if it raises, the handler's ``on_error`` decides (a Deny to apply, or None)."""
        try:
            action.apply(event)
        except InterruptException:
            raise
        except Exception as error:  # as for a raising decision (and as Strands does)
            if handler.on_error == "throw":
                raise
            logger.warning("handler=<%s>, on_error=<%s> | intervention transform raised: %s", handler.name,
                           handler.on_error, error)
            return Deny(f"Handler threw: {error}") if handler.on_error == "deny" else None
        return None

    def _confirm(self, handler: InterventionHandler, action: Confirm, event: BeforeToolCallEvent) -> bool:
        answer = action.response if action.response is not None else event.interrupt(handler.name, reason=action.prompt)
        if action.evaluate(answer):
            return False
        event.cancel_tool = f"CONFIRMATION_FAILED: {action.prompt}"
        return True

    def _apply_guidance(self, method: str, event: Any, text: str) -> None:
        if method in ("before_invocation", "before_tool_call"):
            _set_cancel(method, event, text)
        elif method == "before_model_call":
            messages = self._agent.messages
            if messages and messages[-1]["role"] == "user" and messages[-1]["content"][-1:] == [{"text": text}]:
                return  # the same call again (a throttling retry): the model already gets this guidance once
            append_user_text(self._agent, text)
        elif method == "after_model_call":
            # A failed call (``exception``) is retried with the guidance too, as in Strands; a cancelled one is not.
            if event.stop_response is not None and event.stop_response.stop_reason == "cancelled":
                return
            if self._guide_retries >= self._agent.max_guide_retries:
                logger.warning("guide_retries=<%d> | guidance after the model call ignored: retry bound reached",
                               self._guide_retries)
                return
            self._guide_retries += 1
            append_user_text(self._agent, text)
            event.retry = True


def _overrides(handler: InterventionHandler, method: str) -> bool:
    return getattr(type(handler), method, None) is not getattr(InterventionHandler, method)


def _set_cancel(method: str, event: Any, text: str) -> None:
    if method == "before_tool_call":
        event.cancel_tool = text
    else:
        event.cancel = text


def _unsupported(action: InterventionAction, method: str) -> None:
    logger.warning("action=<%s>, lifecycle=<%s> | action has no effect here", type(action).__name__, method)
