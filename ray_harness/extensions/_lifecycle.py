"""Lifecycle hooks of contributions (``before_agent`` ...): run in turn, each fault-isolated."""

from __future__ import annotations

import inspect
from typing import Any

from ray_harness.extensions._wrapper import Wrapper
from ray_harness.extensions.types import ExtensionData, LifecycleContext, reset_task_store, set_task_store

__all__ = ("run_lifecycle",)


async def run_lifecycle(wrappers: list[Wrapper], hook: str, ctx: LifecycleContext, store: ExtensionData) -> None:
    """Run ``hook`` (async form preferred) of each wrapper; a returned dict updates ``agent.state``.

    A hook that raises, or returns something that is neither None nor a JSON-serializable dict, gets the
    diagnostic and changes nothing.
    """
    for wrapper in wrappers:
        middleware = wrapper.middleware
        function = getattr(middleware, "a" + hook, None) or getattr(middleware, hook, None)
        if function is None:
            continue
        name = function.__name__ if hasattr(function, "__name__") else hook
        token = set_task_store(store)
        try:
            update = function(ctx)
            if inspect.isawaitable(update):
                update = await update
        except Exception as error:
            wrapper.diagnostic(name, error)
            continue
        finally:
            reset_task_store(token)
        if update is None:
            continue
        try:
            _apply_state(ctx.agent, update)
        except (TypeError, ValueError) as error:
            wrapper.diagnostic(name, error)


def _apply_state(agent: Any, update: Any) -> None:
    import json

    if not isinstance(update, dict):
        raise TypeError(f"a lifecycle hook returns a dict (an agent.state update) or None, got {type(update).__name__}")
    for key, value in update.items():  # checked whole first: a bad entry means no update at all
        if not isinstance(key, str) or not key:
            raise ValueError(f"state key must be a non-empty string, got {key!r}")
        json.dumps(value)
    for key, value in update.items():
        agent.state.set(key, value)
