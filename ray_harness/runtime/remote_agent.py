"""``RemoteAgent``: one agent in a dedicated, named async Ray actor.

The agent, its hooks, middleware, interventions and interrupt state live in the
actor (``ray_harness:agent:<name>``); the handle has the ``Agent`` surface:
``remote(prompt)``, ``await remote.invoke_async(...)``, ``async for event in
remote.stream_async(...)``, ``remote.cancel()``, ``remote.messages``,
``remote.state``. Tools run in the actor's process. The actor is an
:class:`~ray_harness.runtime._host.AgentHost` with one slot (the same class and
protocol as the pooled hosts); the agent is resident in it under
:data:`~ray_harness.runtime._host.DEDICATED_KEY`.

Fault tolerance: the actor restarts (``max_restarts``) and Ray retries the call
that was running; the actor restores the agent from its last snapshot (see
:mod:`ray_harness.runtime._runner`), so completed model turns and tool results
are not lost and completed tools do not run again. The tool that was running
when the process died runs again (at-least-once): make such tools idempotent.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncGenerator
from typing import Any

import ray
from ray.exceptions import RayError

from ray_harness.agent.limits import Limits
from ray_harness.agent.result import AgentResult
from ray_harness.agent.snapshot import AgentSnapshot
from ray_harness.agent.state import AgentState
from ray_harness.multiagent.node_runner import EventFilter
from ray_harness.runtime._client import ActorClient
from ray_harness.runtime._cluster import actor_resources, current_namespace, ensure_initialized
from ray_harness.runtime._errors import await_ref, call_sync, mark_stopped
from ray_harness.runtime._host import DEDICATED_KEY, Slot, host_class
from ray_harness.runtime._order import Tickets
from ray_harness.runtime._spec import agent_spec
from ray_harness.runtime._telemetry import with_actor_env
from ray_harness.runtime._wire import (
    CancelRequest,
    EventItem,
    InvokeRequest,
    ResultItem,
    SnapshotRequest,
    invoke_request,
)
from ray_harness.types.content import Message
from ray_harness.types.exceptions import ActorStoppedError

__all__ = ("AGENT_ACTOR_PREFIX", "RemoteAgent", "agent_actor_name")

AGENT_ACTOR_PREFIX = "ray_harness:agent:"
def agent_actor_name(name: str) -> str:
    """Return the actor name of the RemoteAgent ``name`` (``ray_harness:agent:<name>``)."""
    return AGENT_ACTOR_PREFIX + name


class RemoteAgent:
    """An agent in its own named async actor, with the ``Agent`` call/stream/cancel surface.

    Args:
        agent_or_factory: An ``Agent`` (shipped by value), pickled agent bytes, a
            ``"module:function"`` factory string or a zero-argument factory callable (built in the actor).
        name: Actor name suffix (``ray_harness:agent:<name>``); default ``<agent name>-<8 hex>``.
        namespace: Ray namespace (default: the driver's, ``"ray_harness"`` after :func:`runtime.init`).
        detached: Outlive this driver (stop it with :meth:`shutdown` or :meth:`kill`).
        max_restarts: Restarts after the actor's process dies; the running call is retried as often.
        num_cpus: CPUs reserved for the actor (0: agents are I/O-bound; the actor still runs).
        resources: Custom Ray resources, e.g. ``{"gpu_box": 1}`` to pin the agent to a node (``"GPU"``: GPUs).
            When no node has them and no autoscaler could add one, ``ValueError`` names them (Ray would wait
            forever); with an autoscaler the actor waits for its node.
        concurrent_invocation_mode: ``"queue"`` (calls run one after another in arrival order) or
            ``"throw"`` (a call while another runs raises ``ConcurrencyException``).
        max_concurrency: Calls the actor accepts at once (queued invocations count).
        persist: Snapshot the agent after every message and tool result so a restart restores it.
        state_dir: Snapshot directory (default ``RAY_HARNESS_STATE_DIR`` or ``~/.ray_harness/runtime``).

    """

    def __init__(
        self,
        agent_or_factory: Any,
        *,
        name: str | None = None,
        namespace: str | None = None,
        detached: bool = False,
        max_restarts: int = 3,
        num_cpus: float = 0,
        resources: dict[str, float] | None = None,
        concurrent_invocation_mode: str = "queue",
        max_concurrency: int = 1000,
        persist: bool = True,
        state_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        _check_options(name=name, namespace=namespace, detached=detached, max_restarts=max_restarts,
                       concurrent_invocation_mode=concurrent_invocation_mode, max_concurrency=max_concurrency,
                       persist=persist, state_dir=state_dir)
        spec = agent_spec(agent_or_factory)
        ensure_initialized()
        placement = actor_resources(num_cpus, resources, f"RemoteAgent {name or spec.label!r}")
        name = name or f"{spec.label}-{uuid.uuid4().hex[:8]}"
        namespace = namespace or current_namespace()
        actor_name = agent_actor_name(name)
        options: dict[str, Any] = {
            "name": actor_name,
            "namespace": namespace,
            "max_restarts": max_restarts,
            "max_task_retries": max_restarts,
            "max_concurrency": max_concurrency,
            **placement,
        }
        if detached:
            options["lifetime"] = "detached"
        store_dir = os.fspath(state_dir) if state_dir is not None else None
        try:
            # A dedicated agent is a host with one slot.
            actor = host_class().options(**with_actor_env(options)).remote(
                0, Slot(spec, concurrent_invocation_mode, store_dir, persist))
        except ValueError as error:
            if "already" not in str(error):
                raise
            raise ValueError(f"cannot create RemoteAgent {name!r} in namespace {namespace!r}: {error} "
                             f"(use RemoteAgent.get({name!r}) to attach to an existing one)") from None
        self._attach(actor, name, namespace)
        try:
            self._info: dict[str, Any] | None = self._client.call_sync("slot_info")  # waits for the actor: errors surface here
        except BaseException:
            self._kill_quietly()
            raise

    def _attach(self, actor: Any, name: str, namespace: str) -> None:
        self._info = None
        self._tickets = Tickets()
        self._actor = actor
        self._client = ActorClient(actor, agent_actor_name(name))
        self.name = name
        self.namespace = namespace
        self.actor_name = agent_actor_name(name)

    # -- lookup and lifetime ------------------------------------------------------------------------------

    @classmethod
    def get(cls, name: str, namespace: str | None = None) -> RemoteAgent:
        """Attach to the named agent (possibly created by another driver process)."""
        _check_options(name=name, namespace=namespace)
        ensure_initialized()
        namespace = namespace or current_namespace()
        try:
            actor = ray.get_actor(agent_actor_name(name), namespace=namespace)
        except ValueError:
            raise ValueError(f"no RemoteAgent named {name!r} in namespace {namespace!r}") from None
        handle = cls.__new__(cls)
        handle._attach(actor, name, namespace)  # no call into the actor: get() is safe inside async code
        return handle

    @classmethod
    def kill(cls, name: str, namespace: str | None = None) -> None:
        """Stop the named (possibly detached) agent and delete its snapshot."""
        cls.get(name, namespace=namespace).shutdown()

    def shutdown(self) -> None:
        """Stop the actor (no restart) and delete its snapshot; a second call does nothing.

        Calls running or queued in it, and calls made afterwards (from any process), raise
        :class:`~ray_harness.types.exceptions.ActorStoppedError` (a ``RemoteActorError``).
        """
        try:
            self._client.call_sync("forget")
        except ActorStoppedError:
            return  # already stopped (by this handle, another one or another process)
        finally:
            self._kill_quietly()

    def _kill_quietly(self) -> None:
        mark_stopped(self._actor)  # calls still in it fail with ActorStoppedError, not as a crash
        try:
            ray.kill(self._actor, no_restart=True)
        except (RayError, ValueError):
            pass

    # -- invocation -------------------------------------------------------------------------------------

    @staticmethod
    def _request(prompt: Any, invocation_state: dict[str, Any] | None, limits: Limits | None,
                 structured_output_model: type | None, *, invocation_id: str | None = None,
                 events: EventFilter = "agent") -> InvokeRequest:
        return invoke_request(invocation_id or uuid.uuid4().hex, prompt, invocation_state=invocation_state,
                              limits=limits, structured_output_model=structured_output_model, events=events,
                              agent_key=DEDICATED_KEY)

    def __call__(self, prompt: Any = None, *, invocation_state: dict[str, Any] | None = None,
                 limits: Limits | None = None, structured_output_model: type | None = None) -> AgentResult:
        """Run one invocation and wait for its result (``Agent.__call__``)."""
        request = self._request(prompt, invocation_state, limits, structured_output_model, events="result")
        with self._tickets.submitting() as ticket:
            ref = self._client.submit("run", request.model_copy(update={"ticket": ticket}))
        try:
            return call_sync(ref, self.actor_name)  # type: ignore[no-any-return]
        finally:
            self._tickets.answered(ticket)

    async def invoke_async(self, prompt: Any = None, *, invocation_state: dict[str, Any] | None = None,
                           limits: Limits | None = None, structured_output_model: type | None = None
                           ) -> AgentResult:
        """Run one invocation and return its result (``Agent.invoke_async``)."""
        request = self._request(prompt, invocation_state, limits, structured_output_model, events="result")
        with self._tickets.submitting() as ticket:
            ref = self._client.submit("run", request.model_copy(update={"ticket": ticket}))
        try:
            return await await_ref(ref, self.actor_name)
        finally:
            self._tickets.answered(ticket)

    async def stream_async(self, prompt: Any = None, *, invocation_state: dict[str, Any] | None = None,
                           limits: Limits | None = None, structured_output_model: type | None = None,
                           include_model_events: bool = False) -> AsyncGenerator[dict[str, Any], None]:
        """Events as the actor produces them (a Ray streaming generator); the last is ``{"type": "result"}``.

        Raw provider chunks (``model_event``) stay in the actor unless ``include_model_events=True``:
        every streamed item is one Ray object, and ``text_delta`` events already carry the text.
        Closing the iteration early cancels the invocation.
        """
        request = self._request(prompt, invocation_state, limits, structured_output_model,
                                events="all" if include_model_events else "agent")
        events = self.stream_request(request)
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()  # closed early: the cancel goes out now, not when the GC finalizes the layers

    async def stream_request(self, request: InvokeRequest) -> AsyncGenerator[dict[str, Any], None]:
        """One invocation's events, as ``request`` asks (its id, its event filter).

        A cancel for the request's id lands even before the invocation starts; the request is sent again after
        a restart (the restored actor continues it by id: completed tools are not re-run, or it returns its
        stored result); the invocation is cancelled in the actor when the consumer stops early.
        """
        with self._tickets.submitting() as ticket:
            # One ticket for the call and its re-sends: a re-invoke after a restart keeps its place.
            items = self._client.stream("stream", request.model_copy(update={"ticket": ticket,
                                                                              "agent_key": DEDICATED_KEY}),
                                        resend=True,
                                        cancel=lambda: self._client.submit(
                                            "cancel", CancelRequest(invocation_ids=(request.invocation_id,))),
                                        what=f"invocation {request.invocation_id!r}")
        try:
            async for item in items:
                if isinstance(item, ResultItem):
                    yield item.event()
                elif isinstance(item, EventItem):
                    yield item.event
        finally:
            await items.aclose()
            self._tickets.answered(ticket)

    # -- control and inspection -------------------------------------------------------------------------

    def cancel(self, *, message: str | None = None, after_current_tools: bool = False) -> None:
        """Stop the running invocation at its next safe point (handled at once, even mid-call)."""
        self._client.call_sync("cancel", CancelRequest(message=message, after_current_tools=after_current_tools))

    async def cancel_async(self, *, message: str | None = None, after_current_tools: bool = False) -> None:
        """:meth:`cancel` from async code."""
        await self._client.call("cancel", CancelRequest(message=message, after_current_tools=after_current_tools))

    def cancel_invocation(self, invocation_id: str) -> Any:
        """Send a cancel for one invocation (fire and forget; it lands even before the invocation starts)."""
        return self._client.submit("cancel", CancelRequest(invocation_ids=(invocation_id,)))

    @property
    def messages(self) -> list[Message]:
        """Return the actor's agent history (one call into the actor)."""
        return self._client.call_sync("resident_messages")  # type: ignore[no-any-return]

    @property
    def state(self) -> AgentState:
        """A snapshot of the actor's agent state (``.get(key)``); writes to it stay local."""
        return AgentState(self._client.call_sync("resident_state"))

    async def get_messages_async(self) -> list[Message]:
        """Return the actor's agent history from async code."""
        return await self._client.call("resident_messages")  # type: ignore[no-any-return]

    async def get_state_async(self) -> AgentState:
        """Return a copy of the actor's agent state from async code."""
        return AgentState(await self._client.call("resident_state"))

    def snapshot(self) -> AgentSnapshot:
        """Return the actor's agent state now, as an :class:`~ray_harness.agent.AgentSnapshot`."""
        return self._client.call_sync("snapshot", SnapshotRequest())  # type: ignore[no-any-return]

    async def snapshot_async(self) -> AgentSnapshot:
        """:meth:`snapshot` from async code."""
        return await self._client.call("snapshot", SnapshotRequest())  # type: ignore[no-any-return]

    def info(self) -> dict[str, Any]:
        """Return the actor's view: agent name and id, process id, whether it restored a snapshot, busy."""
        return self._client.call_sync("slot_info")  # type: ignore[no-any-return]

    @property
    def actor(self) -> Any:
        """The underlying Ray actor handle."""
        return self._actor

    @property
    def client(self) -> ActorClient:
        """The protocol client of this agent's actor (typed requests, trace context, translated errors)."""
        return self._client

    def _static_info(self) -> dict[str, Any]:
        info = self._info if self._info is not None else self.info()
        self._info = info
        return info

    @property
    def agent_name(self) -> str:
        """Return the name of the agent in the actor."""
        return str(self._static_info()["agent_name"])

    @property
    def description(self) -> str | None:
        """Return the description of the agent in the actor (what it is good at, as a tool)."""
        description = self._static_info().get("description")
        return None if description is None else str(description)

    def as_tool(self, name: str | None = None, description: str | None = None, preserve_context: bool = False,
                delegate: bool = False) -> Any:
        """Wrap this remote agent as a tool of another agent (the sub-agent runs in its own actor)."""
        from ray_harness.runtime.remote_tool import RemoteAgentAsTool

        return RemoteAgentAsTool(self, name=name, description=description, preserve_context=preserve_context,
                                 delegate=delegate)

    @property
    def tool_names(self) -> list[str]:
        """Return the names of the agent's tools."""
        return list(self._static_info()["tool_names"])

    def __repr__(self) -> str:
        return f"RemoteAgent(name={self.name!r}, namespace={self.namespace!r}, actor={self.actor_name!r})"


def _check_options(*, name: Any, namespace: Any, detached: Any = False, max_restarts: Any = 0,
                   concurrent_invocation_mode: Any = "queue", max_concurrency: Any = 1, persist: Any = True,
                   state_dir: Any = None) -> None:
    """Name a bad argument here, before Ray reads it otherwise (``detached="no"`` is truthy; 0 calls never run)."""
    for field, value in (("name", name), ("namespace", namespace)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{field} must be a non-empty string, got {value!r}")
    for field, value in (("detached", detached), ("persist", persist)):
        if not isinstance(value, bool):
            raise ValueError(f"{field} must be a bool, got {value!r}")
    if concurrent_invocation_mode not in ("queue", "throw"):
        raise ValueError(f"concurrent_invocation_mode must be 'queue' or 'throw', got {concurrent_invocation_mode!r}")
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < -1:
        raise ValueError(f"max_restarts must be an int >= -1, got {max_restarts!r}")
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
        raise ValueError(f"max_concurrency must be an int >= 1, got {max_concurrency!r}")
    if state_dir is not None and not isinstance(state_dir, str | os.PathLike):
        raise ValueError(f"state_dir must be a path (str or os.PathLike), got {state_dir!r}")
