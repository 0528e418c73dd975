"""The contribution contract: middleware, placements, scopes, build context and the keyed stores."""

from __future__ import annotations

import contextvars
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = (
    "AgentBuildContext",
    "AgentMiddleware",
    "AgentScope",
    "ExtensionData",
    "ExtensionError",
    "LifecycleContext",
    "MiddlewarePlacement",
    "Placement",
    "task_store",
)

from ray_harness.types.exceptions import RayHarnessError

T = TypeVar("T")


class ExtensionError(RayHarnessError):
    """An extension could not be loaded, or its contribution breaks the host's stack (names the extension)."""


class Placement(enum.Enum):
    """Where on which axis a contribution sits; each member is a guarantee, not an index."""

    MODEL_LOGICAL = "model_logical"
    """Outside every model retry: once per logical model decision."""
    MODEL_PHYSICAL = "model_physical"
    """Inside all request-rewriting middleware: once per provider request, re-entered on each retry."""
    TOOL_VISIBLE = "tool_visible"
    """Outermost on the tool axis: sees the result exactly as the model will receive it."""
    TOOL_RAW = "tool_raw"
    """At the real tool call: sees the raw return value or raised exception before any conversion."""
    STANDARD = "standard"
    """No position guarantee: lifecycle hooks (``before_agent``/``before_model``/``after_model``/``after_agent``)."""


class AgentScope(enum.Flag):
    """Which chains receive a contribution: the lead agent's, a sub-agent's, or both."""

    LEAD = enum.auto()
    SUBAGENT = enum.auto()
    BOTH = LEAD | SUBAGENT


class AgentMiddleware:
    """Base class of contributed middleware. Override only the hooks you need.

    Wrap hooks take ``(request, handler)`` and must call ``handler`` exactly once; the async forms
    (``awrap_model_call``/``awrap_tool_call``) are the ones an invocation uses, a middleware with only
    the sync form is passed through there. Lifecycle hooks take a :class:`LifecycleContext` and may return
    a dict, applied as an ``agent.state`` update; their async forms are ``a``-prefixed. Instances may be
    shared by concurrent runs: keep per-run state in :func:`task_store`, never on ``self``.
    """

    state_schema: Any = None
    """Forwarded by the host's wrapper; unused by ray_harness itself (agent state is schemaless JSON)."""


_WRAP_HOOKS = ("wrap_model_call", "awrap_model_call", "wrap_tool_call", "awrap_tool_call")
_LIFECYCLE_HOOKS = ("before_agent", "before_model", "after_model", "after_agent")


def implemented(middleware: AgentMiddleware, hook: str) -> bool:
    """Whether ``middleware``'s class defines ``hook`` (the base class defines none)."""
    return getattr(type(middleware), hook, None) is not None


@dataclass(frozen=True)
class MiddlewarePlacement:
    """One contribution: a middleware instance, the guarantee it needs, its scope and its order.

    Raises:
        TypeError: ``middleware`` is not an ``AgentMiddleware``, ``placement`` not a ``Placement``,
            ``scope`` not an ``AgentScope`` or ``order`` not an int.
    """

    middleware: AgentMiddleware
    placement: Placement
    scope: AgentScope = AgentScope.BOTH
    order: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.middleware, AgentMiddleware):
            raise TypeError(f"MiddlewarePlacement.middleware must be an AgentMiddleware, got {self.middleware!r}")
        if not isinstance(self.placement, Placement):
            raise TypeError(f"MiddlewarePlacement.placement must be a Placement, got {self.placement!r}")
        if not isinstance(self.scope, AgentScope) or not self.scope:
            raise TypeError(f"MiddlewarePlacement.scope must be a non-empty AgentScope, got {self.scope!r}")
        if not isinstance(self.order, int) or isinstance(self.order, bool):
            raise TypeError(f"MiddlewarePlacement.order must be an int, got {self.order!r}")


@dataclass(frozen=True)
class AgentBuildContext:
    """What a contributor knows about the chain being assembled."""

    scope: AgentScope
    """``AgentScope.LEAD`` or ``AgentScope.SUBAGENT`` (an agent run as another agent's tool)."""
    agent_name: str | None
    model_name: str
    """The model's ``model_id`` config."""
    policy: dict[str, Any] = field(default_factory=dict)
    """``{"limits": {...}}``: the run's limits."""


@dataclass
class LifecycleContext:
    """The argument of lifecycle hooks."""

    agent: Any
    invocation_state: dict[str, Any]
    result: Any = None
    """``after_model``: the ``ModelStopReason``; ``after_agent``: the ``AgentResult``; otherwise None."""


class ExtensionData:
    """A store keyed by type: each extension defines its own key classes, so keys never collide."""

    def __init__(self) -> None:
        self._values: dict[type, Any] = {}

    def get(self, key: type[T]) -> T | None:
        """The value stored under ``key``, or None."""
        return self._values.get(key)

    def get_or_init(self, key: type[T], factory: Callable[[], T]) -> T:
        """The value under ``key``, created with ``factory()`` the first time."""
        try:
            return self._values[key]  # type: ignore[no-any-return]
        except KeyError:
            value = self._values[key] = factory()
            return value

    def set(self, key: type[T], value: T) -> None:
        """Store ``value`` under ``key``, replacing what was there."""
        self._values[key] = value

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __repr__(self) -> str:
        return f"ExtensionData({sorted(key.__qualname__ for key in self._values)})"


_current_store: contextvars.ContextVar[ExtensionData | None] = contextvars.ContextVar(
    "ray_harness_extension_task_store", default=None)


def task_store() -> ExtensionData | None:
    """The current run's ``ExtensionData`` inside extension hooks (and what runs under their ``handler``).

    One per lead invocation and one per sub-agent execution, discarded at its end; None outside a run.
    """
    return _current_store.get()


def set_task_store(store: ExtensionData | None) -> contextvars.Token[ExtensionData | None]:
    return _current_store.set(store)


def reset_task_store(token: contextvars.Token[ExtensionData | None]) -> None:
    try:
        _current_store.reset(token)
    except ValueError:  # reset from another context (a generator finalized elsewhere): nothing to undo here
        pass
