"""Finding a plugin's ``@hook`` and ``@tool`` methods.

Methods are listed in declaration order, the classes of the MRO from the base down, so a parent's methods come
before a child's; a method a subclass overrides keeps its parent's place and is looked up on the instance, so
only the override counts (and an override without the decorator drops the method). Attributes are inspected
statically: properties and other descriptors of a plugin are never called while looking.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

from ray_harness.plugins.decorator import HOOK_EVENT_TYPES
from ray_harness.tools.decorator import DecoratedFunctionTool

__all__ = ("discover_hooks", "discover_tools")


def discover_hooks(instance: object) -> list[Callable[..., Any]]:
    """The bound ``@hook`` methods of ``instance``, in declaration order (parents first)."""
    return [getattr(instance, name) for name, static in _attributes(instance) if _is_hook(static)]


def discover_tools(instance: object) -> list[DecoratedFunctionTool]:
    """The ``@tool`` methods of ``instance``, bound to it, in declaration order (parents first)."""
    return [getattr(instance, name) for name, static in _attributes(instance)
            if isinstance(static, DecoratedFunctionTool)]


def _attributes(instance: object) -> Iterator[tuple[str, Any]]:
    """Each attribute name of the class hierarchy once, where it was first declared, with its final value."""
    seen: set[str] = set()
    for cls in reversed(type(instance).__mro__):
        for name in cls.__dict__:
            if name in seen:
                continue
            seen.add(name)
            try:
                yield name, inspect.getattr_static(instance, name)
            except AttributeError:
                continue


def _is_hook(static: Any) -> bool:
    function = static.__func__ if isinstance(static, staticmethod | classmethod) else static
    return callable(function) and hasattr(function, HOOK_EVENT_TYPES)
