"""Run a Graph or Swarm where the runtime expects an Agent (a pooled evaluation row, for example).

The host runner drives ``stream_async(prompt, cancel_signal=..., limits=..., ...)`` and waits for a
``{"type": "result"}`` event; :class:`MultiAgentTarget` gives a ``MultiAgentBase`` that surface: setting
the cancel signal calls ``graph.cancel()`` on the loop, and the final ``multiagent_result``
event is also reported as the run's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Callable
from typing import Any

from ray_harness.runtime._signal import CancelSignal
from ray_harness.tools.base import until_set

__all__ = ("MultiAgentTarget", "is_multi_agent")

_POLL_S = 0.02


def _nothing() -> None:
    return None


def is_multi_agent(target: Any) -> bool:
    from ray_harness.multiagent.base import MultiAgentBase

    return isinstance(target, MultiAgentBase)


class MultiAgentTarget:
    """An Agent-shaped view of a Graph/Swarm for one host slot."""

    def __init__(self, orchestrator: Any) -> None:
        self.orchestrator = orchestrator
        self.name = str(getattr(orchestrator, "id", None) or type(orchestrator).__name__)
        self.agent_id = self.name
        self.messages: list[Any] = []

    def cancel(self, *args: Any, **kwargs: Any) -> None:
        self.orchestrator.cancel()

    async def invoke_async(self, prompt: Any, **kwargs: Any) -> Any:
        result = None
        async for event in self.stream_async(prompt, **kwargs):
            if event.get("type") == "result":
                result = event["result"]
        return result

    def stream_async(self, prompt: Any, *, cancel_signal: threading.Event | None = None,
                     invocation_state: dict[str, Any] | None = None, limits: Any = None,
                     structured_output_model: Any = None, **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
        return self._events(prompt, cancel_signal, invocation_state, limits, structured_output_model, quiet=False)

    def _quiet_stream(self, prompt: Any, *, cancel_signal: threading.Event | None = None,
                      invocation_state: dict[str, Any] | None = None, limits: Any = None,
                      structured_output_model: Any = None, **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
        """For the runner's invoke path: the orchestrator leaves out the events nobody reads."""
        return self._events(prompt, cancel_signal, invocation_state, limits, structured_output_model, quiet=True)

    async def _events(self, prompt: Any, cancel_signal: threading.Event | None,
                      invocation_state: dict[str, Any] | None, limits: Any, structured_output_model: Any, *,
                      quiet: bool) -> AsyncGenerator[dict[str, Any], None]:
        if limits is not None or structured_output_model is not None:
            raise TypeError("limits and structured_output_model apply to agents, not to graphs or swarms")
        remove: Callable[[], None] = _nothing
        watcher: asyncio.Future[None] | None = None
        if isinstance(cancel_signal, CancelSignal):
            remove = cancel_signal.on_set(asyncio.get_running_loop(), self.orchestrator.cancel)
        elif cancel_signal is not None:
            watcher = asyncio.ensure_future(self._watch(cancel_signal))
        try:
            orchestrator = self.orchestrator
            source = orchestrator._quiet_stream if quiet else orchestrator.stream_async
            async for event in source(prompt, invocation_state):
                yield event
                if event.get("type") == "multiagent_result":
                    yield {"type": "result", "result": event["result"]}
        finally:
            remove()
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher

    async def _watch(self, signal: threading.Event) -> None:
        # A plain threading.Event (not the runner's CancelSignal) cannot call back: poll it.
        await until_set(signal, _POLL_S)
        self.orchestrator.cancel()
