"""``AgentPool.stream_slot``'s client side: node runs started together go to each host in one streamed call.

The nodes of a Graph's ready batch start in the same event-loop iteration. Their requests are queued per host
and flushed at the next iteration: a host with one request gets its own ``stream`` call (as before); a host with
several gets one ``AgentHost.stream_many`` call, whose multiplexed items are handed back to each node's stream
(:mod:`ray_harness.runtime._multiplex`). Per run everything stays as with its own call: its items in order, its
error raised in its stream (a host that died: ``RemoteActorError`` in every run still open), a consumer that
stops early cancels its run (one cancel message naming it), trace context and task name from its request.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import AsyncGenerator, Callable
from typing import Any

from ray_harness.runtime import _pickling
from ray_harness.runtime._client import ActorClient
from ray_harness.runtime._multiplex import Demultiplexer, Entry
from ray_harness.runtime._spec import AgentSpec
from ray_harness.runtime._wire import CancelRequest, InvokeRequest
from ray_harness.types.exceptions import RemoteActorError

__all__ = ("StreamBatcher",)


_Source = tuple[AsyncGenerator[Any, None], Callable[[], Any]]
"""What a sent run's stream reads, and what cancels its run when the stream is never read."""


class _Queued:
    """A run waiting for its host's call: its request and spec, and what its stream reads once the call is sent."""

    __slots__ = ("request", "source", "spec")

    def __init__(self, request: InvokeRequest, spec: AgentSpec | None) -> None:
        self.request = request
        self.spec = spec
        self.source: asyncio.Future[_Source] = asyncio.get_running_loop().create_future()


class StreamBatcher:
    """Queues streamed runs per event loop and host; sends each loop iteration's runs to a host in one call.

    Args:
        hosts: The pool's host clients, by index.

    """

    def __init__(self, hosts: list[ActorClient]) -> None:
        self._hosts = hosts
        self._pending: dict[asyncio.AbstractEventLoop, dict[int, list[_Queued]]] = {}
        self._pumps: set[asyncio.Task[None]] = set()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its pool (a Graph shipped to its orchestration host): the hosts, none of this process's runs."""
        return StreamBatcher, (self._hosts,)

    async def stream(self, index: int, request: InvokeRequest, spec: AgentSpec | None) -> AsyncGenerator[Any, None]:
        """The run's wire items from host ``index``, sent with the runs queued in this loop iteration."""
        loop = asyncio.get_running_loop()
        queued = _Queued(ActorClient.traced(request), spec)  # traced here: the node's own context
        pending = self._pending.get(loop)
        if pending is None:
            pending = self._pending[loop] = {}
            loop.call_soon(self._flush, loop, context=contextvars.Context())  # the call carries no node's context
        pending.setdefault(index, []).append(queued)
        try:
            source, _ = await queued.source
        except asyncio.CancelledError:
            if not queued.source.done():
                queued.source.cancel()  # not sent yet: the flush leaves it out
            elif not queued.source.cancelled():
                queued.source.result()[1]()  # sent, not read: its run is cancelled
            raise
        try:
            async for item in source:
                yield item
        finally:
            await source.aclose()  # a stream stopped early cancels its run

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        for index, queued in self._pending.pop(loop, {}).items():
            runs = [run for run in queued if not run.source.done()]
            if len(runs) == 1:
                run = runs[0]
                run.source.set_result(self._single(self._hosts[index], run.request, run.spec))
            elif runs:
                self._send(loop, self._hosts[index], runs)

    @staticmethod
    def _single(host: ActorClient, request: InvokeRequest, spec: AgentSpec | None) -> _Source:
        run_id = request.invocation_id

        def cancel() -> Any:
            return host.submit("cancel", CancelRequest(invocation_ids=(run_id,)))

        return host.stream("stream", request, spec, what=f"run {run_id!r}", cancel=cancel), cancel

    def _send(self, loop: asyncio.AbstractEventLoop, host: ActorClient, runs: list[_Queued]) -> None:
        requests = [run.request for run in runs]
        demux = Demultiplexer([request.invocation_id for request in requests],
                              lambda run_id: host.submit("cancel", CancelRequest(invocation_ids=(run_id,))),
                              _unpickled_error)
        groups = host.stream("stream_many", requests, [run.spec for run in runs], done=demux.ends_all,
                             what=f"a batch of {len(runs)} runs")
        pump = loop.create_task(_pump(host, groups, demux), name=f"ray_harness-stream-many-{host.name}")
        self._pumps.add(pump)
        pump.add_done_callback(self._pumps.discard)
        demux.on_idle = pump.cancel  # every run's consumer is gone: stop reading (their runs got their cancels)
        for run in runs:
            run_id = run.request.invocation_id
            run.source.set_result((demux.items(run_id), functools.partial(demux.leave, run_id)))


async def _pump(host: ActorClient, groups: AsyncGenerator[list[Entry], None], demux: Demultiplexer) -> None:
    try:
        async for group in groups:
            demux.dispatch(group)
            if not demux.open:
                return
    except asyncio.CancelledError:
        raise
    except Exception as error:  # the host died or the call failed (translated by the client)
        demux.fail(error)
        return
    finally:
        await groups.aclose()
    demux.fail(RemoteActorError(f"actor {host.name!r} ended a batch of runs before their ends", actor_name=host.name))


def _unpickled_error(payload: Any) -> BaseException:
    try:
        error = _pickling.loads(payload)
    except Exception as failure:  # e.g. the exception's class cannot be imported here
        return failure
    return error if isinstance(error, BaseException) else TypeError(f"a run's error arrived as {type(error).__name__}")

