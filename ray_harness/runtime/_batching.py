"""``AgentPool.run_batched``'s client side: runs started together go to each host in one call.

Runs queued in the same event-loop iteration with the same agent source and digest are flushed as one
``AgentHost.run_batch`` call per host; its groups of finished runs settle each run's future. A host that
dies fails the runs still open with its ``RemoteActorError`` (a copy per run).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from ray_harness.runtime import _pickling
from ray_harness.runtime._client import ActorClient
from ray_harness.runtime._multiplex import fresh_error as _fresh
from ray_harness.runtime._wire import InvokeRequest
from ray_harness.types.exceptions import RemoteActorError

__all__ = ("Batcher",)

_Queued = tuple[InvokeRequest, "asyncio.Future[Any]"]
"""A run waiting for its batch: its request, the future its caller awaits."""
_Batch = tuple[Any, "Callable[[Any], Any] | None", list[_Queued]]
"""The runs of one host call: agent source, digest, runs."""


class Batcher:
    """Queues runs per event loop and sends each loop iteration's runs to their hosts in one call each.

    Args:
        hosts: The pool's host clients, by index.

    """

    def __init__(self, hosts: list[ActorClient]) -> None:
        self._hosts = hosts
        self._pending: dict[asyncio.AbstractEventLoop, dict[tuple[int, int, int], _Batch]] = {}
        self._senders: set[asyncio.Task[None]] = set()

    def submit(self, index: int, spec: Any, digest: Callable[[Any], Any] | None,
               request: InvokeRequest) -> asyncio.Future[Any]:
        """Queue a run for this loop iteration's flush (scheduled by the first run queued); its future."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        pending = self._pending.get(loop)
        if pending is None:
            pending = self._pending[loop] = {}
            loop.call_soon(self._flush, loop)
        pending.setdefault((index, id(spec), id(digest)), (spec, digest, []))[2].append(
            (ActorClient.traced(request), future))
        return future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        for (index, _, _), (spec, digest, queued) in self._pending.pop(loop, {}).items():
            sender = loop.create_task(self._send(self._hosts[index], spec, digest, queued))
            self._senders.add(sender)
            sender.add_done_callback(self._senders.discard)

    @staticmethod
    async def _send(host: ActorClient, spec: Any, digest: Callable[[Any], Any] | None,
                    queued: list[_Queued]) -> None:
        futures = {request.invocation_id: future for request, future in queued}
        failure: BaseException | None = None
        try:
            groups = host.stream("run_batch", spec, [request for request, _ in queued], digest,
                                 done=lambda _: not futures, what="a batch")
            async for group in groups:
                for run_id, ok, payload, spent in group:
                    future = futures.pop(run_id, None)
                    if future is not None and not future.done():
                        _settle(future, ok, payload, spent)
                if not futures:
                    break
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the host died (translated by the client)
            failure = error
        finally:
            for future in futures.values():
                if future.done():
                    continue
                if failure is None and not asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    failure = RemoteActorError(f"host {host.name!r} ended a batch without a run's result",
                                               actor_name=host.name)
                if failure is None:
                    future.cancel()
                else:
                    future.set_exception(_fresh(failure))


def _settle(future: asyncio.Future[Any], ok: bool, payload: bytes, spent: Any) -> None:
    try:
        value = _pickling.loads(payload)
    except Exception as error:  # e.g. the result's class cannot be imported here
        future.set_exception(error)
        return
    if ok:
        future.set_result(value)
    else:
        if spent is not None:
            # Imported here: ray_harness.evaluation is ≈30 ms of imports every process importing the pool would pay.
            from ray_harness.evaluation._records import SPENT_ATTRIBUTE

            with contextlib.suppress(Exception):
                setattr(value, SPENT_ATTRIBUTE, spent)
        future.set_exception(value)
