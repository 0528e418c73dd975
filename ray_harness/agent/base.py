"""``AgentBase``: what every agent kind answers to, as Strands' protocol of that name (for annotations and checks).

An ``Agent``, a ``RemoteAgent``, an ``A2AAgent`` and a Graph or Swarm all have it: ``agent(prompt)``,
``await agent.invoke_async(prompt)`` and ``agent.stream_async(prompt)``. ``isinstance(x, AgentBase)`` checks that
the three methods are there (a runtime-checkable protocol checks names, not signatures).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ray_harness.agent.result import AgentResult

__all__ = ("AgentBase",)


@runtime_checkable
class AgentBase(Protocol):
    """The minimal interface of an agent: a sync call, an async call and an event stream."""

    async def invoke_async(self, prompt: Any = None, **kwargs: Any) -> AgentResult:
        """Run one invocation on ``prompt`` and return its result."""
        ...

    def __call__(self, prompt: Any = None, **kwargs: Any) -> AgentResult:
        """:meth:`invoke_async` from sync code."""
        ...

    def stream_async(self, prompt: Any = None, **kwargs: Any) -> AsyncIterator[Any]:
        """Run one invocation on ``prompt``, yielding its events (the last one carries the result)."""
        ...
