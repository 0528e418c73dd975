"""``RemoteAgent``: one agent in a dedicated, named async Ray actor.

The agent, its hooks, middleware, interventions and interrupt state live in the
actor (``ray_harness:agent:<name>``); the handle has the ``Agent`` surface:
``remote(prompt)``, ``await remote.invoke_async(...)``, ``async for event in
remote.stream_async(...)``, ``remote.cancel()``, ``remote.messages``,
``remote.state``. Tools run in the actor's process.

Fault tolerance: the actor restarts (``max_restarts``) and Ray retries the call
that was running; the actor restores the agent from its last snapshot (see
:mod:`ray_harness.runtime._runner`), so completed model turns and tool results
are not lost and completed tools do not run again. The tool that was running
when the process died runs again (at-least-once): make such tools idempotent.
"""

from __future__ import annotations

import functools
import os
import uuid
import warnings
from collections.abc import AsyncGenerator
from typing import Any

import ray
from ray.exceptions import RayError

from ray_harness.agent.limits import Limits, validate_limits
from ray_harness.agent.result import AgentResult
from ray_harness.agent.snapshot import AgentSnapshot
from ray_harness.agent.state import AgentState
from ray_harness.runtime._cluster import current_namespace, ensure_initialized
from ray_harness.runtime._errors import await_ref, call_sync, stream_items
from ray_harness.runtime._order import Tickets
from ray_harness.runtime._runner import AgentRunner
from ray_harness.runtime._spec import AgentSpec, agent_spec
from ray_harness.runtime._store import FileAgentStore
from ray_harness.runtime._telemetry import flush_metrics, task_name, with_actor_env
from ray_harness.telemetry.propagation import current_carrier
from ray_harness.types.content import Message

__all__ = ("AGENT_ACTOR_PREFIX", "AgentActor", "RemoteAgent", "agent_actor_name")

AGENT_ACTOR_PREFIX = "ray_harness:agent:"
_CONTROL_GROUP = "control"
# cancel (and stats) run in their own group: never queued behind invocations that fill the default group.
_ACTOR_OPTIONS: dict[str, Any] = {"concurrency_groups": {_CONTROL_GROUP: 4}}


def agent_actor_name(name: str) -> str:
    return AGENT_ACTOR_PREFIX + name


def was_reconstructed() -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Ray flags an internal deprecated call inside this property
        return bool(ray.get_runtime_context().was_current_actor_reconstructed)


class AgentActor:
    """The actor class (plain; ``ray.remote`` is applied in :func:`_actor_class`)."""

    def __init__(self, spec: AgentSpec, mode: str, store_dir: str | None, persist: bool) -> None:
        context = ray.get_runtime_context()
        self._key = f"{context.namespace}/{context.get_actor_name()}"
        store = FileAgentStore(store_dir) if persist else None
        self._runner = AgentRunner(spec.build(), mode=mode, store=store, key=self._key)
        self._restored = False
        reconstructed = was_reconstructed()
        if store is not None:
            if reconstructed:
                self._restored = self._runner.restore()
            else:
                self._runner.forget()  # a new actor under an old name must not inherit its snapshot
        if reconstructed and not self._restored:
            self._runner.restarted_without_journal()

    async def info(self) -> dict[str, Any]:
        agent = self._runner.agent
        return {"agent_name": agent.name, "agent_id": agent.agent_id, "pid": os.getpid(),
                "restored": self._restored, "tool_names": agent.tool_names, "busy": self._runner.busy}

    async def invoke(self, invocation_id: str, prompt: Any, options: dict[str, Any]) -> AgentResult:
        return await self._runner.invoke(invocation_id, prompt, options)

    async def stream(self, invocation_id: str, prompt: Any, options: dict[str, Any], include_model_events: bool
                     ) -> AsyncGenerator[dict[str, Any], None]:
        async for event in self._runner.stream(invocation_id, prompt, options):
            if include_model_events or event.get("type") != "model_event":
                yield event

    @ray.method(concurrency_group=_CONTROL_GROUP)
    async def cancel(self, invocation_id: str | None = None, message: str | None = None,
                     after_current_tools: bool = False) -> bool:
        return self._runner.cancel(invocation_id, message=message, after_current_tools=after_current_tools)

    async def get_messages(self) -> list[Message]:
        return self._runner.agent.messages

    async def get_state(self) -> dict[str, Any]:
        return self._runner.agent.state.to_dict()

    async def snapshot(self) -> AgentSnapshot:
        return self._runner.agent.snapshot()

    async def forget(self) -> None:
        self._runner.forget()
        flush_metrics()  # the actor is about to be killed

    async def invoke_as_tool(self, invocation_id: str, prompt: Any, options: dict[str, Any], preserve_context: bool,
                             call_key: str, turn: dict[str, Any] | None = None) -> dict[str, Any]:
        """One call of this agent as a tool of another (see :func:`ray_harness.runtime.remote_tool.invoke_in_actor`):
        busy → refused; an interrupted call returns its turn; the context is reset unless ``preserve_context``."""
        from ray_harness.runtime.remote_tool import invoke_in_actor

        return await invoke_in_actor(self._runner, invocation_id, prompt, options, preserve_context, turn)


@functools.cache
def _actor_class() -> Any:
    return ray.remote(**_ACTOR_OPTIONS)(AgentActor)


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
        resources: Custom Ray resources, e.g. ``{"gpu_box": 1}`` to pin the agent to a node.
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
        if concurrent_invocation_mode not in ("queue", "throw"):
            raise ValueError(f"concurrent_invocation_mode must be 'queue' or 'throw', got {concurrent_invocation_mode!r}")
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < -1:
            raise ValueError(f"max_restarts must be an int >= -1, got {max_restarts!r}")
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        spec = agent_spec(agent_or_factory)
        ensure_initialized()
        name = name or f"{spec.label}-{uuid.uuid4().hex[:8]}"
        namespace = namespace or current_namespace()
        actor_name = agent_actor_name(name)
        options: dict[str, Any] = {
            "name": actor_name,
            "namespace": namespace,
            "max_restarts": max_restarts,
            "max_task_retries": max_restarts,
            "num_cpus": num_cpus,
            "max_concurrency": max_concurrency,
        }
        if resources:
            options["resources"] = dict(resources)
        if detached:
            options["lifetime"] = "detached"
        store_dir = os.fspath(state_dir) if state_dir is not None else None
        try:
            actor = _actor_class().options(**with_actor_env(options)).remote(spec, concurrent_invocation_mode,
                                                                            store_dir, persist)
        except ValueError as error:
            if "already" not in str(error):
                raise
            raise ValueError(f"cannot create RemoteAgent {name!r} in namespace {namespace!r}: {error} "
                             f"(use RemoteAgent.get({name!r}) to attach to an existing one)") from None
        self._attach(actor, name, namespace)
        try:
            self._info: dict[str, Any] | None = call_sync(actor.info.remote(), actor_name)  # waits for the actor: errors surface here
        except BaseException:
            self._kill_quietly()
            raise

    def _attach(self, actor: Any, name: str, namespace: str) -> None:
        self._info = None
        self._tickets = Tickets()
        self._actor = actor
        self.name = name
        self.namespace = namespace
        self.actor_name = agent_actor_name(name)

    # -- lookup and lifetime ------------------------------------------------------------------------------

    @classmethod
    def get(cls, name: str, namespace: str | None = None) -> RemoteAgent:
        """Attach to the named agent (possibly created by another driver process)."""
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
        """Stop the actor (no restart) and delete its snapshot."""
        try:
            call_sync(self._actor.forget.remote(), self.actor_name)
        finally:
            self._kill_quietly()

    def _kill_quietly(self) -> None:
        try:
            ray.kill(self._actor, no_restart=True)
        except (RayError, ValueError):
            pass

    # -- invocation -------------------------------------------------------------------------------------

    @staticmethod
    def _options(invocation_state: dict[str, Any] | None, limits: Limits | None,
                 structured_output_model: type | None) -> dict[str, Any]:
        options: dict[str, Any] = {"limits": validate_limits(limits),
                                   "structured_output_model": structured_output_model,
                                   "trace_context": current_carrier()}
        if invocation_state is not None:
            options["invocation_state"] = dict(invocation_state)
        return options

    def __call__(self, prompt: Any = None, *, invocation_state: dict[str, Any] | None = None,
                 limits: Limits | None = None, structured_output_model: type | None = None) -> AgentResult:
        options = self._options(invocation_state, limits, structured_output_model)
        with self._tickets.submitting() as ticket:
            ref = self._actor.invoke.options(name=task_name(options)).remote(uuid.uuid4().hex, prompt,
                                                                       {**options, "ticket": ticket})
        try:
            return call_sync(ref, self.actor_name)  # type: ignore[no-any-return]
        finally:
            self._tickets.answered(ticket)

    async def invoke_async(self, prompt: Any = None, *, invocation_state: dict[str, Any] | None = None,
                           limits: Limits | None = None, structured_output_model: type | None = None
                           ) -> AgentResult:
        options = self._options(invocation_state, limits, structured_output_model)
        with self._tickets.submitting() as ticket:
            ref = self._actor.invoke.options(name=task_name(options)).remote(uuid.uuid4().hex, prompt,
                                                                       {**options, "ticket": ticket})
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
        options = self._options(invocation_state, limits, structured_output_model)
        async for event in self._stream_invocation(uuid.uuid4().hex, prompt, options, include_model_events):
            yield event

    async def _stream_invocation(self, invocation_id: str, prompt: Any, options: dict[str, Any],
                                 include_model_events: bool = False) -> AsyncGenerator[dict[str, Any], None]:
        """One invocation's events under the caller's id (a cancel for that id lands even before it starts);
        sent again after a restart; cancelled in the actor when the consumer stops early."""
        with self._tickets.submitting() as ticket:
            options = {**options, "ticket": ticket}  # a re-invoke after a restart keeps its place
            generator = self._actor.stream.options(name=task_name(options)).remote(invocation_id, prompt, options,
                                                                                include_model_events)
        finished = False
        try:
            async for event in stream_items(generator, self.actor_name):
                if event.get("type") == "result":
                    finished = True
                yield event
            if not finished:
                # The actor died mid-stream and Ray restarted it: the stream ends early. The invocation is
                # idempotent by id, so ask for it again: the restored actor continues it (completed tools are
                # not re-run) or returns its stored result, and the caller still gets its result event.
                result = await await_ref(self._actor.invoke.remote(invocation_id, prompt, options), self.actor_name)
                finished = True
                yield {"type": "result", "result": result}
        finally:
            self._tickets.answered(ticket)
            if not finished:
                self._actor.cancel.remote(invocation_id)

    # -- control and inspection -------------------------------------------------------------------------

    def cancel(self, *, message: str | None = None, after_current_tools: bool = False) -> None:
        """Stop the running invocation at its next safe point (handled at once, even mid-call)."""
        call_sync(self._actor.cancel.remote(None, message, after_current_tools), self.actor_name)

    async def cancel_async(self, *, message: str | None = None, after_current_tools: bool = False) -> None:
        await await_ref(self._actor.cancel.remote(None, message, after_current_tools), self.actor_name)

    @property
    def messages(self) -> list[Message]:
        return call_sync(self._actor.get_messages.remote(), self.actor_name)  # type: ignore[no-any-return]

    @property
    def state(self) -> AgentState:
        """A snapshot of the actor's agent state (``.get(key)``); writes to it stay local."""
        return AgentState(call_sync(self._actor.get_state.remote(), self.actor_name))

    async def get_messages_async(self) -> list[Message]:
        return await await_ref(self._actor.get_messages.remote(), self.actor_name)

    async def get_state_async(self) -> AgentState:
        return AgentState(await await_ref(self._actor.get_state.remote(), self.actor_name))

    def snapshot(self) -> AgentSnapshot:
        """The actor's agent state now, as an :class:`~ray_harness.agent.AgentSnapshot`."""
        return call_sync(self._actor.snapshot.remote(), self.actor_name)  # type: ignore[no-any-return]

    async def snapshot_async(self) -> AgentSnapshot:
        return await await_ref(self._actor.snapshot.remote(), self.actor_name)

    def info(self) -> dict[str, Any]:
        """The actor's view: agent name and id, process id, whether it restored a snapshot, busy."""
        return call_sync(self._actor.info.remote(), self.actor_name)  # type: ignore[no-any-return]

    @property
    def actor(self) -> Any:
        """The underlying Ray actor handle."""
        return self._actor

    def _static_info(self) -> dict[str, Any]:
        info = self._info if self._info is not None else self.info()
        self._info = info
        return info

    @property
    def agent_name(self) -> str:
        return str(self._static_info()["agent_name"])

    def as_tool(self, name: str | None = None, description: str | None = None, preserve_context: bool = False,
                delegate: bool = False) -> Any:
        """This remote agent as a tool of another agent (the sub-agent runs in its own actor)."""
        from ray_harness.runtime.remote_tool import RemoteAgentAsTool

        return RemoteAgentAsTool(self, name=name, description=description, preserve_context=preserve_context,
                                 delegate=delegate)

    @property
    def tool_names(self) -> list[str]:
        return list(self._static_info()["tool_names"])

    def __repr__(self) -> str:
        return f"RemoteAgent(name={self.name!r}, namespace={self.namespace!r}, actor={self.actor_name!r})"
