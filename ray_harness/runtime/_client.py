"""The caller's side of the runtime protocol: one helper for every call into a runtime actor.

:class:`ActorClient` wraps one actor handle and its name. Dedicated agents
(:class:`~ray_harness.runtime.RemoteAgent`), pooled hosts (:class:`~ray_harness.runtime.AgentPool`), Graph/Swarm
nodes (:mod:`ray_harness.runtime.multiagent`), orchestrators (:mod:`ray_harness.runtime._orchestrator`) and
sandbox actors (:class:`~ray_harness.runtime.RemoteSandbox`) all call through it, so each of these holds once:

* **Trace context.** Every request (:mod:`ray_harness.runtime._wire`) leaves with the caller's OpenTelemetry
  carrier in ``trace_context`` (:meth:`ActorClient.traced`); the actor attaches it around the call.
* **Errors.** Ray's wrappers become the error the caller would see in-process; a dead actor is
  ``RemoteActorError`` naming it (:mod:`ray_harness.runtime._errors`).
* **Streams.** :meth:`ActorClient.stream` yields a Ray streaming generator's items in order. A stream that ends
  without its terminal item (the actor's process died) is sent again when the callee journals its state
  (``resend=True``: a dedicated agent continues the invocation by id), or fails with ``RemoteActorError``
  (``ActorStoppedError`` when the actor was stopped on purpose: such a stream is never sent again).
* **Cancel.** A consumer that stops before the end (or a failed stream) sends the request's cancel at once;
  not when the actor's process died (nothing runs there, and a restarted actor would keep the cancel for the
  run's re-sent request).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any, TypeVar

import ray
from ray.exceptions import RayError

from ray_harness.runtime._errors import await_ref, call_sync, translate
from ray_harness.runtime._telemetry import task_name
from ray_harness.runtime._wire import Request, is_terminal
from ray_harness.telemetry.propagation import current_carrier
from ray_harness.types.exceptions import ActorStoppedError, RemoteActorError

__all__ = ("ActorClient",)

R = TypeVar("R", bound=Request)

_RESENDS = 3  # restarts survived by one streamed call (the actor's max_restarts bounds them too)


class ActorClient:
    """Calls into one actor: requests carry the trace context, errors arrive translated.

    Args:
        actor: The Ray actor handle.
        name: The actor's name (named in errors).

    """

    __slots__ = ("actor", "name")

    def __init__(self, actor: Any, name: str) -> None:
        self.actor = actor
        self.name = name

    @staticmethod
    def traced(request: R) -> R:
        """``request`` with the caller's trace context (unchanged when it already has one or there is none)."""
        if request.trace_context is not None:
            return request
        carrier = current_carrier()
        return request if carrier is None else request.model_copy(update={"trace_context": carrier})

    def submit(self, method: str, *args: Any) -> Any:
        """Send one call (requests among ``args`` traced); the ``ObjectRef`` (or streaming generator) it returns."""
        traced = [self.traced(arg) if isinstance(arg, Request) else arg for arg in args]
        return self._method(method, traced).remote(*traced)

    async def call(self, method: str, *args: Any) -> Any:
        """One call, awaited; Ray's errors translated."""
        return await await_ref(self.submit(method, *args), self.name)

    def call_sync(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        """One call from synchronous code (``ray.get``); Ray's errors translated."""
        return call_sync(self.submit(method, *args), self.name, timeout=timeout)

    def stream(self, method: str, *args: Any, cancel: Callable[[], Any] | None = None, cancel_call: bool = False,
               resend: bool = False, done: Callable[[Any], bool] = is_terminal, what: str = "the call"
               ) -> AsyncGenerator[Any, None]:
        """Send one streamed call now; its items, in order, Ray's errors translated.

        Args:
            method: The actor's streaming method.
            *args: Its arguments (requests among them traced once, so a re-sent call keeps its place).
            cancel: Sent when the stream does not reach its end (the consumer stopped, the call failed).
            cancel_call: Then cancel the streaming call itself instead (``ray.cancel``: ``CancelledError`` in the
                actor's generator; for callees without a cancel message, e.g. a sandbox command).
            resend: The callee journals its state and continues a re-sent call by id: after its process died
                mid-stream (or a restart cut the stream short), send the same call again (up to three times)
                instead of failing. Ray does not retry such a call itself (see :meth:`stream`).
            done: Whether an item is the stream's last one (default: a wire item marked terminal).
            what: Names the call in the error for a stream cut short.

        Returns:
            The items (raises ``RemoteActorError`` when the stream ends before its last item and is not re-sent).

        """
        traced = list(args)
        for index, arg in enumerate(traced):
            if isinstance(arg, Request):
                traced[index] = self.traced(arg)
        # Named once: a re-sent call is the same task. With ``resend`` this client re-sends, never Ray: Ray's retry
        # of a streamed call skips as many items as the lost attempt had sent, and a continued invocation's first
        # items (the re-run step's events) are not those.
        bound = self._method(method, traced, **({"max_task_retries": 0} if resend else {}))
        first = bound.remote(*traced)  # submitted now: the caller's order is kept
        if cancel_call:
            cancel = None
        return self._consume(first, bound, traced, cancel, cancel_call, resend, done, what)

    async def _consume(self, first: Any, bound: Any, args: list[Any], cancel: Callable[[], Any] | None,
                       cancel_call: bool, resend: bool, done: Callable[[Any], bool],
                       what: str) -> AsyncGenerator[Any, None]:
        generator, finished, lost = first, False, False
        try:
            for attempt in range(_RESENDS + 1):
                if attempt:
                    generator, lost = bound.remote(*args), False
                while True:  # each item in order, Ray's errors translated (the one such loop of the runtime)
                    try:
                        item = await (await generator.__anext__())
                    except StopAsyncIteration:
                        break
                    except RayError as error:
                        translated = translate(error, self.name)
                        # A dead callee, not a nested actor's error it raised: no cancel to send.
                        lost = isinstance(translated, RemoteActorError) and translated.actor_name == self.name
                        # Stopped on purpose (shutdown(), kill()): nothing would answer a re-sent call.
                        if lost and resend and attempt < _RESENDS and not isinstance(translated, ActorStoppedError):
                            break  # its process died mid-stream: send the call again (below)
                        if translated is error:
                            raise
                        raise translated from error
                    if done(item):
                        finished = True
                    yield item
                if finished:
                    return
                if not resend or attempt == _RESENDS:
                    lost = True
                    raise RemoteActorError(f"actor {self.name!r} stopped streaming {what} before its end (its "
                                           "process died or restarted)", actor_name=self.name)
        finally:
            if not finished and not lost:
                _stop(generator, cancel, cancel_call)

    def _method(self, method: str, args: list[Any], **options: Any) -> Any:
        """The actor method, named for the dashboard's task view (:func:`_task_of`), with these call options."""
        bound = getattr(self.actor, method)
        name = _task_of(args)
        if name:
            options["name"] = name
        return bound.options(**options) if options else bound

    def __repr__(self) -> str:
        return f"ActorClient({self.name!r})"


def _stop(generator: Any, cancel: Callable[[], Any] | None, cancel_call: bool) -> None:
    """Stop the run of a stream that did not reach its end (the callee is alive): its cancel, or the call's."""
    if cancel_call:
        ray.cancel(generator)
    elif cancel is not None:
        cancel()


def _task_of(args: list[Any]) -> str:
    """The task name the requests among ``args`` (a list among them: a batch of runs) carry, else ``""``.

    A request's own :meth:`~ray_harness.runtime._wire.Request.task_label` (an orchestrator's invocation), else the node(s) or row(s) its requests run (their
    trace context, see :func:`~ray_harness.runtime._telemetry.task_name`); ``""`` leaves Ray's default (the
    method's name).
    """
    requests = [arg for arg in args if isinstance(arg, Request)]
    for request in requests:
        label = request.task_label()
        if label:
            return label
    for arg in args:
        if isinstance(arg, list):
            requests.extend(item for item in arg if isinstance(item, Request))
    return task_name(*({"trace_context": request.trace_context} for request in requests))
