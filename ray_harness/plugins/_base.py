"""What agent and orchestrator plugins share: a ``name`` and ``@hook`` methods found once.

A class may subclass both :class:`~ray_harness.plugins.Plugin` and
:class:`~ray_harness.plugins.MultiAgentPlugin`; with one base below both, its hooks are discovered once (by
whichever ``__init__`` runs first) and its ``name`` is one abstract property, as Strands guards.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from ray_harness.plugins._discovery import discover_hooks

__all__ = ("HookedPlugin",)


class HookedPlugin(ABC):
    """A named object whose ``@hook`` methods are registered where it is attached."""

    @property
    @abstractmethod
    def name(self) -> str:
        """A stable identifier of the plugin, unique among the plugins of one agent or orchestrator."""

    def __init__(self) -> None:
        """Find the ``@hook`` methods (once, also under multiple inheritance)."""
        if "_hooks" not in self.__dict__:
            self._hooks: list[Callable[..., Any]] = discover_hooks(self)

    @property
    def hooks(self) -> list[Callable[..., Any]]:
        """The hook callbacks to register: the ``@hook`` methods, bound to this plugin."""
        if "_hooks" not in self.__dict__:  # a subclass whose __init__ did not call super().__init__()
            self._hooks = discover_hooks(self)
        return self._hooks
