"""``RecordingHooks``: subscribes to every hook event and records what it saw."""

from __future__ import annotations

from typing import Any, TypeVar

from ray_harness.hooks import events as _events
from ray_harness.hooks.registry import BaseHookEvent, HookRegistry

__all__ = ("RecordingHooks",)

E = TypeVar("E", bound=BaseHookEvent)

ALL_EVENTS: tuple[type[BaseHookEvent], ...] = tuple(
    getattr(_events, name) for name in _events.__all__ if name.endswith("Event")
)


class RecordingHooks:
    """A ``HookProvider`` that records every event it receives, in order."""

    def __init__(self) -> None:
        self.events: list[BaseHookEvent] = []

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        """Subscribe to every hook event type.

        Args:
            registry: The agent's (or graph's) hook registry.
            **kwargs: Reserved for future use.
        """
        for event_type in ALL_EVENTS:
            registry.add_callback(event_type, self.events.append)

    def names(self) -> list[str]:
        """The class names of the recorded events, in order."""
        return [type(event).__name__ for event in self.events]

    def of(self, event_type: type[E]) -> list[E]:
        """The recorded events of exactly ``event_type``, in order."""
        return [event for event in self.events if type(event) is event_type]

    def clear(self) -> None:
        """Forget every recorded event."""
        self.events.clear()
