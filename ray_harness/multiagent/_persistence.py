"""Multi-agent state in a session: any object with ``write_multi_agent_json(dict)`` / ``read_multi_agent_json()``."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ("MultiAgentSessionStore", "load_state", "save_state")


@runtime_checkable
class MultiAgentSessionStore(Protocol):
    def write_multi_agent_json(self, data: dict[str, Any]) -> None: ...

    def read_multi_agent_json(self) -> dict[str, Any] | None: ...


def save_state(orchestrator: Any, store: Any) -> None:
    if store is not None:
        store.write_multi_agent_json(orchestrator.serialize_state())


def load_state(orchestrator: Any, store: Any) -> None:
    """Restore what the store holds (nothing happens for an empty store)."""
    data = store.read_multi_agent_json()
    if data:
        orchestrator.deserialize_state(data)
