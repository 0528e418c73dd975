"""Multi-agent state in a session: any object with ``write_multi_agent_json(dict)`` / ``read_multi_agent_json()``.

Stores that take a ``multi_agent_id`` keyword (``ray_harness.session`` managers) get the
orchestrator's id, so several graphs and swarms can share one session.
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol, runtime_checkable

__all__ = ("MultiAgentSessionStore", "load_state", "save_state")


@runtime_checkable
class MultiAgentSessionStore(Protocol):
    def write_multi_agent_json(self, data: dict[str, Any]) -> None: ...

    def read_multi_agent_json(self) -> dict[str, Any] | None: ...


def _id_kwargs(method: Any, orchestrator: Any) -> dict[str, Any]:
    try:
        accepts = "multi_agent_id" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        accepts = False
    return {"multi_agent_id": orchestrator.id} if accepts else {}


def save_state(orchestrator: Any, store: Any) -> None:
    if store is not None:
        method = store.write_multi_agent_json
        method(orchestrator.serialize_state(), **_id_kwargs(method, orchestrator))


def load_state(orchestrator: Any, store: Any) -> None:
    """Restore what the store holds (nothing happens for an empty store)."""
    method = store.read_multi_agent_json
    data = method(**_id_kwargs(method, orchestrator))
    if data:
        orchestrator.deserialize_state(data)
