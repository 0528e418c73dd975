"""Module ``__getattr__`` functions for Strands import paths kept only for switched programs (PEP 562).

:func:`not_provided` makes a Strands name that ray_harness leaves out fail with ``ImportError`` saying what to use
instead (``from ... import`` reports it as it is). :func:`moved` serves Strands' deprecated aliases: the object
of the current ray_harness path, with the ``DeprecationWarning`` Strands gives at the old one.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ("moved", "not_provided")


def not_provided(package: str, reasons: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: each name of ``reasons`` raises ``ImportError`` with its reason."""

    def attribute(name: str) -> Any:
        if name in reasons:
            raise ImportError(reasons[name], name=package)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return attribute


def moved(package: str, aliases: Mapping[str, tuple[str, str]]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: ``aliases`` maps an old name to ``(module, name)`` of its current place.

    Each access warns (as Strands' aliases do); nothing is cached on the package, so every use is reported.
    """

    def attribute(name: str) -> Any:
        target = aliases.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, current = target
        value = getattr(importlib.import_module(module), current)  # a name left out raises its ImportError here
        warnings.warn(f"{package}.{name} is deprecated, as in Strands: use {current} from {module}",
                      DeprecationWarning, stacklevel=2)
        return value

    return attribute
