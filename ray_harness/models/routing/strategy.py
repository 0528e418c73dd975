"""The ``RoutingStrategy`` protocol, the ``RoutingAttempt`` record it reads and the ``RoutingContext`` it is given.

A strategy makes every routing decision: ``ModelRouter`` asks it for a candidate when a request opens a routing
session and again after a candidate failed, with the attempts so far. The router only resolves the answer to a
model, calls it and keeps the session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ray_harness.types.content import Messages, SystemPrompt
from ray_harness.types.tools import ToolSpec

if TYPE_CHECKING:
    from ray_harness.models.routing.router import RoutingCandidate

__all__ = ("RoutingAttempt", "RoutingContext", "RoutingStrategy")

_NO_STATE: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class RoutingAttempt:
    """One candidate a routing session used, and how that went.

    Attributes:
        candidate: The router's own ``RoutingCandidate`` (the instance in ``RoutingContext.candidates``).
        exception: ``None`` when the call succeeded; otherwise the model's error, or the error raised while
            resolving a candidate (a nested router whose strategy raised).
    """

    candidate: RoutingCandidate
    exception: Exception | None = None


@dataclass(frozen=True)
class RoutingContext:
    """What a strategy sees when it chooses.

    ``messages``, ``system_prompt`` and ``tool_specs`` are copies made for this ask, so a strategy may change them
    without touching the request. ``candidates`` and each attempt's ``candidate`` are the router's own instances,
    stable for its lifetime: a strategy may match them by identity. ``attempts`` are the session's, oldest first.

    ``invocation_state`` is Strands' field, kept so a strategy written for Strands runs: here it is always empty,
    since the router is a ``Model`` and a model call carries no invocation state.
    """

    messages: Messages
    system_prompt: SystemPrompt | None
    tool_specs: Sequence[ToolSpec]
    candidates: Sequence[RoutingCandidate]
    invocation_state: Mapping[str, Any] = field(default_factory=lambda: _NO_STATE)
    attempts: Sequence[RoutingAttempt] = field(default_factory=tuple)


@runtime_checkable
class RoutingStrategy(Protocol):
    """Chooses the candidate a routing session uses, and the next one after a failure.

    Only ``select`` is required.
    """

    async def select(self, context: RoutingContext, **kwargs: Any) -> RoutingCandidate | None:
        """Return one of ``context.candidates`` (the same instance: they are matched by identity), or ``None``.

        Asked when a request opens its session (``context.attempts`` empty) and after each failed call (the
        failure last in ``attempts``). ``None`` at the opening serves the router's default model (its first
        candidate); after a failure it ends routing and the model's error is raised. A round — the failures since
        the last success — uses each candidate once: naming one the round already used ends routing as ``None``
        does. Raising at the opening propagates; after a failure the model's error is raised instead.

        The router never substitutes a candidate of its own: a strategy that ignores ``attempts`` gets no
        failover (delegate to ``FallbackStrategy`` for it).
        """
        ...


def attempts_since_success(attempts: Sequence[RoutingAttempt]) -> Sequence[RoutingAttempt]:
    """The trailing failed attempts: everything after the last success (all of them when none succeeded)."""
    for index in range(len(attempts) - 1, -1, -1):
        if attempts[index].exception is None:
            return attempts[index + 1:]
    return attempts
