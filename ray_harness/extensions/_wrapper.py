"""A contribution in a chain of extension hooks, and the diagnostic logged when one of its hooks fails."""

from __future__ import annotations

import logging
from typing import Any

from ray_harness.extensions.types import AgentMiddleware, Placement

__all__ = ("Wrapper", "diagnostic", "logger")

logger = logging.getLogger("ray_harness.extensions")


def diagnostic(use: str, owner: str, hook: str, error: Any) -> None:
    if isinstance(error, BaseException) and not str(error):  # TimeoutError(), CancelledError(): say which
        error = type(error).__name__
    logger.warning("Extension %s: %s.%s failed and was skipped: %s", use, owner, hook, error)


class Wrapper:
    """One contribution in one chain: ``name`` is its trace identity (``extension_<use>_<Class>_<n>``)."""

    __slots__ = ("middleware", "name", "order", "placement", "use")

    def __init__(self, use: str, middleware: AgentMiddleware, placement: Placement, order: int, name: str) -> None:
        self.use = use
        self.middleware = middleware
        self.placement = placement
        self.order = order
        self.name = name

    def diagnostic(self, hook: str, error: Any) -> None:
        diagnostic(self.use, type(self.middleware).__name__, hook, error)

    def __repr__(self) -> str:
        return f"<{self.name} at {self.placement.name}>"
