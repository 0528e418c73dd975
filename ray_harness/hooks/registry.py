"""Typed hook registry: callbacks keyed by event class, ordered by ``HookOrder``.

Callbacks run in ascending ``order``; within one order value they run in
registration order, reversed for events whose ``should_reverse_callbacks`` is
true (the ``After*`` events, so teardown mirrors setup). Sync and async
callbacks are both accepted. ``InterruptException`` raised by a callback is
collected, not propagated: the caller gets the interrupts back as data.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeGuard, TypeVar, get_type_hints, runtime_checkable

from ray_harness.interrupts import Interrupt, InterruptException

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ("BaseHookEvent", "HookCallback", "HookEvent", "HookOrder", "HookProvider", "HookRegistry", "is_hook_provider")


class HookOrder:
    """Named priorities; lower values run first."""

    SDK_FIRST = -100
    INTERVENTION_OUTPUT = -90
    DEFAULT = 0
    INTERVENTION_INPUT = 90
    SDK_LAST = 100


class BaseHookEvent:
    """Read-only event: only names in ``_writable`` may be assigned after construction."""

    _writable: ClassVar[frozenset[str]] = frozenset()
    _sealed: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "_sealed", True)

    @property
    def should_reverse_callbacks(self) -> bool:
        """Whether callbacks run in reverse registration order (``True`` for ``After*`` events)."""
        return False

    def _can_write(self, name: str) -> bool:
        return name in self._writable

    def __setattr__(self, name: str, value: Any) -> None:
        if not self._sealed or self._can_write(name):
            object.__setattr__(self, name, value)
            return
        raise AttributeError(f"Property {name} is not writable on {type(self).__name__}")


class HookEvent(BaseHookEvent):
    """Event of a single agent; subclasses carry ``agent`` and ``invocation_state``."""


E = TypeVar("E", bound=BaseHookEvent)
E_contra = TypeVar("E_contra", bound=BaseHookEvent, contravariant=True)


class HookCallback(Protocol[E_contra]):
    """A hook callback: takes the event, returns ``None`` or an awaitable (async callbacks)."""

    def __call__(self, event: E_contra, /) -> Awaitable[None] | None:
        """Handle ``event``."""


@runtime_checkable
class HookProvider(Protocol):
    """An object that registers a group of related callbacks."""

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        """Register this provider's callbacks on ``registry``.

        Args:
            registry: The agent's (or graph's) hook registry.
            **kwargs: Reserved for future use.
        """


def is_hook_provider(value: Any) -> TypeGuard[HookProvider]:
    """``isinstance(value, HookProvider)`` without the cost of a runtime-protocol check (≈20 µs)."""
    return callable(getattr(value, "register_hooks", None)) and not isinstance(value, type)


class HookRegistry:
    """Event type → ordered callbacks."""

    def __init__(self) -> None:
        self._entries: dict[type[BaseHookEvent], list[tuple[int, int, Callable[[Any], Any]]]] = {}
        self._sorted: dict[tuple[type[BaseHookEvent], bool], list[Callable[[Any], Any]]] = {}
        self._seq = itertools.count()

    def add_callback(
        self,
        event_type: type[E] | None,
        callback: Callable[[E], Any],
        order: int = HookOrder.DEFAULT,
    ) -> None:
        """Register ``callback`` for ``event_type`` (inferred from its annotation when None)."""
        resolved: type[BaseHookEvent] = infer_event_type(callback) if event_type is None else event_type
        if not (isinstance(resolved, type) and issubclass(resolved, BaseHookEvent)):
            raise TypeError(f"event_type must be a hook event class, got {resolved!r}")
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {callback!r}")
        if not isinstance(order, int):
            raise TypeError(f"order must be an int, got {order!r}")
        self._entries.setdefault(resolved, []).append((order, next(self._seq), callback))
        self._sorted = {}

    def add_hook(self, provider: HookProvider) -> None:
        """Let ``provider`` register its callbacks here.

        Args:
            provider: A ``HookProvider``.
        """
        provider.register_hooks(self)

    @property
    def callback_count(self) -> int:
        """How many callbacks are registered (a runtime that keeps a copy elsewhere tells additions by it)."""
        return sum(len(entries) for entries in self._entries.values())

    def has_callbacks(self, event_type: type[BaseHookEvent]) -> bool:
        """Whether any callback is registered for ``event_type`` (the loop skips building events nobody hears)."""
        return event_type in self._entries

    def get_callbacks_for(self, event: BaseHookEvent) -> list[Callable[[Any], Any]]:
        """The callbacks for ``event`` in the order they run (by ``HookOrder``, then registration; reversed for ``After*``)."""
        key = (type(event), event.should_reverse_callbacks)
        cached = self._sorted.get(key)
        if cached is None:
            entries = self._entries.get(key[0], [])
            if key[1]:
                ordered = sorted(entries, key=lambda entry: (entry[0], -entry[1]))
            else:
                ordered = sorted(entries, key=lambda entry: (entry[0], entry[1]))
            cached = [entry[2] for entry in ordered]
            self._sorted[key] = cached
        return cached

    async def invoke_callbacks_async(self, event: E) -> tuple[E, list[Interrupt]]:
        """Run every callback for ``event``; return it with the interrupts the callbacks raised."""
        callbacks = self.get_callbacks_for(event)
        if not callbacks:
            return event, []
        interrupts: dict[str, Interrupt] = {}
        for callback in callbacks:
            try:
                outcome = callback(event)
                if inspect.isawaitable(outcome):
                    await outcome
            except InterruptException as signal:
                _collect(interrupts, signal.interrupt)
        return event, list(interrupts.values())

    def invoke_callbacks(self, event: E) -> tuple[E, list[Interrupt]]:
        """Synchronous variant; an async callback here is an error."""
        interrupts: dict[str, Interrupt] = {}
        for callback in self.get_callbacks_for(event):
            try:
                outcome = callback(event)
                if inspect.isawaitable(outcome):
                    if inspect.iscoroutine(outcome):
                        outcome.close()
                    raise RuntimeError(f"{type(event).__name__} is dispatched synchronously; use a sync callback")
            except InterruptException as signal:
                _collect(interrupts, signal.interrupt)
        return event, list(interrupts.values())

    def event_types(self) -> Iterable[type[BaseHookEvent]]:
        """The event types that have callbacks."""
        return self._entries.keys()


def _collect(interrupts: dict[str, Interrupt], interrupt: Interrupt) -> None:
    if interrupt.id in interrupts:
        raise ValueError(f"interrupt_name=<{interrupt.name}> | interrupt name used more than once")
    interrupts[interrupt.id] = interrupt


def infer_event_type(callback: Callable[..., Any]) -> type[BaseHookEvent]:
    """The event class named by the annotation of ``callback``'s first parameter."""
    target: Any = callback if inspect.isfunction(callback) or inspect.ismethod(callback) else type(callback).__call__
    try:
        hints = get_type_hints(target)
    except Exception as error:  # unresolvable forward references
        raise ValueError(f"cannot infer the event type of {callback!r}: {error}") from None
    params = [p for p in inspect.signature(callback).parameters.values() if p.name != "self"]
    if not params or params[0].name not in hints:
        raise ValueError(f"cannot infer the event type of {callback!r}: annotate its first parameter")
    hint = hints[params[0].name]
    if isinstance(hint, type) and issubclass(hint, BaseHookEvent):
        return hint
    raise ValueError(f"cannot infer the event type of {callback!r}: {hint!r} is not a hook event class")
