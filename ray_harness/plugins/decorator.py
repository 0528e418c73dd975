"""``@hook``: marks a method of a :class:`~ray_harness.plugins.Plugin` as a hook callback.

The event type comes from the annotation of the parameter after ``self`` (or ``cls``); a union ``A | B`` (or
``Union[A, B]``) subscribes the method to each of its events, as in Strands. The function itself is returned,
marked with the event types: a plugin's methods stay plain methods, so a plugin pickles as any object does
(it is shipped to Ray actors with its agent).
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any, TypeVar, overload

from ray_harness.hooks.registry import BaseHookEvent, infer_event_types

__all__ = ("hook",)

F = TypeVar("F", bound=Callable[..., Any])

HOOK_EVENT_TYPES = "_hook_event_types"
"""The attribute ``@hook`` sets on the function: the list of event classes (Strands' name for it)."""


@overload
def hook(func: F, /) -> F: ...


@overload
def hook() -> Callable[[F], F]: ...


def hook(func: F | None = None, /) -> F | Callable[[F], F]:
    """Mark a plugin method as a hook callback; usable as ``@hook`` or ``@hook()``.

    Args:
        func: The method; its first parameter after ``self`` / ``cls`` is annotated with a hook event class
            or a union of them.

    Returns:
        The method itself, marked for discovery by :class:`~ray_harness.plugins.Plugin`.

    Raises:
        ValueError: The event type cannot be inferred: no annotation, or one that is not a hook event class
            (``None`` in a union included).
    """

    def decorate(target: F) -> F:
        if not callable(target):
            raise TypeError(f"@hook decorates a function, got {target!r}")
        setattr(target, HOOK_EVENT_TYPES, _event_types(target))
        return target

    return decorate if func is None else decorate(func)


def _event_types(func: Callable[..., Any]) -> list[type[BaseHookEvent]]:
    """The event classes of ``func``: its parameter after ``self``/``cls`` (as Strands skips either)."""
    params = list(inspect.signature(func).parameters)
    if len(params) > 1 and params[0] in ("self", "cls") and inspect.isfunction(func):
        # Bound to a stand-in, the function's signature starts at the event parameter; its hints are the same.
        return infer_event_types(types.MethodType(func, object()))
    return infer_event_types(func)
