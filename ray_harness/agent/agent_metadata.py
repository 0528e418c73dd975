"""``AgentMetadata``: what an agent tells its model about itself on every request (Strands' ``agent_metadata``).

The loop builds it per request and passes it to ``model.stream(..., agent_metadata=...)``, as Strands' event loop
does, so one model object shared by several agents sees each agent's own identity. ``OpenAIModel`` derives its
prompt-cache key from ``session_id`` (``CacheConfig(cache_key=None)``).

A model whose ``stream`` takes neither ``agent_metadata`` nor ``**kwargs`` (a custom model written against an older
signature) is not given it: Strands would fail such a model with a ``TypeError`` on its first request.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ("AgentMetadata", "agent_metadata_kwargs")


@dataclass(frozen=True, kw_only=True)
class AgentMetadata:
    """A read-only view of the invoking agent, passed to the model with every request.

    Attributes:
        session_id: The id of the agent's session manager; ``None`` when the agent has none (an ephemeral agent),
            as in Strands.
    """

    session_id: str | None = None


def agent_metadata_kwargs(model: Any, session_manager: Any) -> dict[str, Any]:
    """The ``agent_metadata=`` keyword for ``model.stream(...)``, or nothing when that ``stream`` cannot take it."""
    stream = getattr(model, "stream", None)
    function = getattr(stream, "__func__", None)  # a method: its signature is the class's, so it is cached
    accepts = _accepts(function) if function is not None else _accepts_uncached(stream)
    if not accepts:
        return {}
    session_id = getattr(session_manager, "session_id", None)
    if not isinstance(session_id, str) or not session_id:
        return _NO_SESSION
    return {"agent_metadata": AgentMetadata(session_id=session_id)}


_NO_SESSION: dict[str, Any] = {"agent_metadata": AgentMetadata()}  # the common case, built once (it is frozen)


@functools.lru_cache(maxsize=256)
def _accepts(function: Callable[..., Any]) -> bool:
    return _accepts_uncached(function)


def _accepts_uncached(stream: Any) -> bool:
    try:
        parameters = inspect.signature(stream).parameters.values()
    except (TypeError, ValueError):  # not introspectable (a builtin, a C extension): do not risk a TypeError
        return False
    return any(parameter.kind is inspect.Parameter.VAR_KEYWORD
               or (parameter.name == "agent_metadata" and parameter.kind is not inspect.Parameter.POSITIONAL_ONLY
                   and parameter.kind is not inspect.Parameter.VAR_POSITIONAL)
               for parameter in parameters)
