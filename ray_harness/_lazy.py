"""A package ``__getattr__`` that imports a name's module when the name is first asked for (PEP 562).

Packages whose names pull in heavy modules (providers, sandbox backends, the Ray runtime) export them this way, so
``import ray_harness.<package>`` stays cheap; a name, once loaded, is set on the package and later look-ups skip
this function.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ("lazy_attributes",)


def lazy_attributes(package: str, sources: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: ``sources`` maps each lazy name to the module (full path) holding it."""

    def attribute(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        setattr(sys.modules[package], name, value)
        return value

    return attribute
