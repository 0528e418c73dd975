"""``Swarm``: a team of agents that pass control to each other with the ``handoff_to_agent`` tool.

One member runs at a time. Each gets the task, the handoff message, who worked
on it so far, the shared context and the other members (Strands' text). A
member that ends its turn without handing off completes the swarm. Limits,
timeouts and ping-pong detection end it FAILED; failures never raise out of
``invoke_async``. Members keep their conversation across handoffs unless
``reset_members=True``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncGenerator
from typing import Any

from ray_harness.hooks.events import (
    AfterMultiAgentInvocationEvent,
    AfterNodeCallEvent,
    BeforeMultiAgentInvocationEvent,
    BeforeNodeCallEvent,
    MultiAgentInitializedEvent,
)
from ray_harness.hooks.registry import HookRegistry
from ray_harness.interrupts import Interrupt, InterruptState
from ray_harness.multiagent._handoff import Handoff, HandoffTracker, build_swarm_node_text, make_handoff_tool
from ray_harness.multiagent._persistence import load_state, restore_swarm, save_state, swarm_snapshot
from ray_harness.multiagent.base import MultiAgentBase, NodeResult, Status, add_usage
from ray_harness.multiagent.events import (
    handoff_event,
    node_cancel_event,
    node_interrupt_event,
    node_start_event,
    node_stop_event,
    node_stream_event,
    result_event,
)
from ray_harness.multiagent.node_runner import DEFAULT_RUNTIME, make_node_runner
from ray_harness.multiagent.swarm_model import (
    SharedContext,
    SwarmNode,
    SwarmResult,
    SwarmState,
    entry_member,
    swarm_members,
)
from ray_harness.plugins.multiagent_registry import check_multi_agent_plugins, register_multi_agent_plugins
from ray_harness.telemetry.runs import node_scope, run_scope
from ray_harness.telemetry.tracing import span_scope
from ray_harness.types.exceptions import ConcurrencyException

__all__ = ("SharedContext", "Swarm", "SwarmNode", "SwarmResult", "SwarmState")

logger = logging.getLogger(__name__)


class Swarm(MultiAgentBase):
    """Self-organizing agents that hand work to each other."""

    RUN_FIELDS = ("state", "shared_context", "_interrupt_state", "_resume_pending", "_cancel_requested")

    def __init__(self, nodes: list[Any], *, entry_point: Any = None, max_handoffs: int = 20,
                 max_iterations: int = 20, execution_timeout: float = 900.0, node_timeout: float = 300.0,
                 repetitive_handoff_detection_window: int = 0, repetitive_handoff_min_unique_agents: int = 0,
                 hooks: list[Any] | None = None, session_manager: Any = None, reset_members: bool = False,
                 runtime: str = DEFAULT_RUNTIME, id: str = "default_swarm",
                 trace_attributes: dict[str, Any] | None = None,
                 plugins: list[Any] | None = None) -> None:
        plugin_list = check_multi_agent_plugins(plugins)  # named before the members get the handoff tool
        for name, value in (("max_handoffs", max_handoffs), ("max_iterations", max_iterations),
                            ("execution_timeout", execution_timeout), ("node_timeout", node_timeout)):
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        for name, value in (("repetitive_handoff_detection_window", repetitive_handoff_detection_window),
                            ("repetitive_handoff_min_unique_agents", repetitive_handoff_min_unique_agents)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        self.id = id
        self.max_handoffs = max_handoffs
        self.max_iterations = max_iterations
        self.execution_timeout = execution_timeout
        self.node_timeout = node_timeout
        self.repetitive_handoff_detection_window = repetitive_handoff_detection_window
        self.repetitive_handoff_min_unique_agents = repetitive_handoff_min_unique_agents
        self.reset_members = reset_members
        self.session_manager = session_manager
        self.runtime = runtime
        self.trace_attributes = dict(trace_attributes or {})  # on the invoke_swarm span, as Strands' Swarm
        self.nodes = swarm_members(nodes)
        self.entry_point = entry_member(self.nodes, entry_point)
        handoff = make_handoff_tool(list(self.nodes))
        for node in self.nodes.values():
            node.executor.tool_registry.register(handoff)
        self.hooks = HookRegistry()
        self._register_hook_providers(hooks)
        self.shared_context = SharedContext()
        self.state = SwarmState()
        self._interrupt_state = InterruptState()
        self._lock = threading.Lock()
        self._cancel_requested = False
        self._resume_pending = False
        self._node_runner = make_node_runner(runtime)
        self._node_runner.bind({node_id: node.executor for node_id, node in self.nodes.items()})
        for member in self.nodes.values():
            member._runner = self._node_runner  # its reset_executor_state() resets through it
        # After hooks= (as in Strands) and the rest of the set-up: init_multi_agent sees a configured swarm, and a
        # plugin's hooks get its MultiAgentInitializedEvent.
        if plugins is not None:  # as Agent(plugins=): most orchestrators (one per evaluation row) have none
            self._plugin_registry = register_multi_agent_plugins(self, plugin_list)
        if self.hooks.has_callbacks(MultiAgentInitializedEvent):
            from ray_harness.agent.agent import run_sync

            run_sync(self.hooks.invoke_callbacks_async(MultiAgentInitializedEvent(source=self)))
        if session_manager is not None:
            load_state(self, session_manager)

    def cancel(self) -> None:
        """Stop the running invocation: the running member is cancelled and the result is CANCELLED."""
        if not self._lock.locked():
            return
        self._cancel_requested = True
        self._node_runner.cancel()

    # -- invocation ---------------------------------------------------------------------------------------

    async def stream_async(self, task: Any, invocation_state: dict[str, Any] | None = None,
                           **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
        """Run the swarm on ``task``, yielding member and handoff events; the last one carries the result.

        Raises:
            ConcurrencyException: This swarm is already running an invocation.
        """
        if not self._lock.acquire(blocking=False):
            raise ConcurrencyException(f"swarm {self.id!r} is already running an invocation")
        try:
            state = invocation_state if invocation_state is not None else {}
            if kwargs:  # a new dict, as the Agent does: the caller's invocation_state is not ours to change
                state = {**state, **kwargs}
            # A node runner may run the whole orchestration elsewhere (runtime="ray": on an orchestration host).
            elsewhere = getattr(self._node_runner, "stream_orchestrator", None)
            delegated = None if elsewhere is None else elsewhere(self, task, state, events="all")
            # Closed by its caller, each layer closes the one it reads: the running member has stopped (its agent
            # idle) when aclose() returns and the swarm is free, not at the GC's next pass.
            if delegated is not None:
                try:
                    async for event in delegated:
                        yield event
                finally:
                    await delegated.aclose()
                return
            with span_scope("invoke_swarm", {"gen_ai.operation.name": "invoke_swarm", "ray_harness.swarm.id": self.id,
                                             **self.trace_attributes}, outcome=lambda: self.state.completion_status), \
                    run_scope("swarm", self.id, nodes=len(self.nodes), outcome=lambda: self.state.completion_status,
                              cancel=self.cancel):
                run = self._invoke(task, state)
                try:
                    async for event in run:
                        yield event
                finally:
                    await run.aclose()
        finally:
            self._lock.release()

    async def _invoke(self, task: Any, invocation_state: dict[str, Any]) -> AsyncGenerator[dict[str, Any], None]:
        self._cancel_requested = False
        self._node_runner.start_invocation()
        await self.hooks.invoke_callbacks_async(BeforeMultiAgentInvocationEvent(source=self,
                                                                               invocation_state=invocation_state))
        resume_input, resumed_handoff = self._prepare(task)
        self.state.completion_status = Status.EXECUTING
        self.state.start_time = time.monotonic()
        interrupts: list[Interrupt] = []
        loop = self._loop(resume_input, resumed_handoff, invocation_state)
        try:
            async for event in loop:
                if event["type"] == "multiagent_node_interrupt":
                    interrupts = list(event["interrupts"])
                yield event
        except Exception:
            logger.exception("swarm_id=<%s> | swarm execution failed", self.id)
            self.state.completion_status = Status.FAILED
        except BaseException:  # closed mid-run (aclose(), the caller's task cancelled): it ends FAILED, as a Graph
            self.state.completion_status = Status.FAILED
            raise
        finally:
            await loop.aclose()
            self.state.execution_time += round((time.monotonic() - self.state.start_time) * 1000)
            self._resume_pending = False
            await self.hooks.invoke_callbacks_async(AfterMultiAgentInvocationEvent(source=self,
                                                                                  invocation_state=invocation_state))
            save_state(self, self.session_manager)
        yield result_event(self._build_result(interrupts))

    def _prepare(self, task: Any) -> tuple[Any, Handoff | None]:
        """Start a new run, or pick up the interrupted one: the member's resume input and its pending handoff."""
        resuming = self._interrupt_state.activated
        if not resuming and not isinstance(task, str | list):
            raise ValueError(f"task must be a string or a list of content blocks, got {type(task).__name__}")
        self._interrupt_state.resume(task)
        if resuming:
            node = self.state.current_node
            context = self._interrupt_state.context.get(node.node_id, {}) if node is not None else {}
            self._interrupt_state.context = {}
            self._interrupt_state.activated = False
            if context.get("from_hook", True):
                return None, None
            responses = [{"interruptResponse": {"interruptId": key,
                                                "response": self._interrupt_state.interrupts[key].response}}
                         for key in context.get("interrupt_ids", []) if key in self._interrupt_state.interrupts]
            handoff = Handoff.from_dict(context.get("handoff"))
            # A session restored into a swarm without that member: the handoff has nowhere to go.
            return responses, handoff if handoff is not None and handoff.target in self.nodes else None
        if self._resume_pending:
            return None, None
        self._interrupt_state.deactivate()
        self.shared_context = SharedContext()
        self.state = SwarmState(current_node=self.entry_point, task=task, shared_context=self.shared_context)
        return None, None

    async def _loop(self, resume_input: Any, resumed_handoff: Handoff | None,
                    invocation_state: dict[str, Any]) -> AsyncGenerator[dict[str, Any], None]:
        while True:
            node = self.state.current_node
            assert node is not None
            if self._cancel_requested:
                self.state.completion_status = Status.CANCELLED
                return
            go, reason = self.state.should_continue(
                max_handoffs=self.max_handoffs, max_iterations=self.max_iterations,
                execution_timeout=self.execution_timeout,
                repetitive_handoff_detection_window=self.repetitive_handoff_detection_window,
                repetitive_handoff_min_unique_agents=self.repetitive_handoff_min_unique_agents)
            if not go:
                logger.debug("reason=<%s> | stopping swarm", reason)
                self.state.stop_reason = reason
                self.state.completion_status = Status.FAILED
                return
            before, interrupts = await self.hooks.invoke_callbacks_async(
                BeforeNodeCallEvent(source=self, node_id=node.node_id, invocation_state=invocation_state))
            # As in Strands' Swarm, a member the hook stops never starts: no node start event for it.
            if interrupts:
                yield self._suspend(node, interrupts, from_hook=True)
                return
            if before.cancel_node:
                message = before.cancel_node if isinstance(before.cancel_node, str) else "node cancelled by user"
                yield node_cancel_event(node.node_id, message)
                self._store(node, NodeResult(result=RuntimeError(message), status=Status.CANCELLED), ran=False)
                self.state.completion_status = Status.FAILED
                await self._after_node(node, invocation_state)
                return
            tracker = HandoffTracker()
            # A handoff the member made before its interrupt stands (its tool already answered the model).
            tracker.handoff, resumed_handoff = resumed_handoff, None
            result: NodeResult | None = None
            member = self._run_member(node, resume_input, tracker, invocation_state)
            try:
                async for event in member:
                    if isinstance(event, NodeResult):
                        result = event
                    else:
                        yield event
            finally:
                await member.aclose()
            resume_input = None
            assert result is not None
            if result.status == Status.INTERRUPTED:
                # Kept (as in Strands) so the tokens spent before the interrupt count; the resumed turn's result
                # replaces it and adds only its own usage.
                self._store(node, result, ran=False)
                yield node_stop_event(node.node_id, result)
                yield self._suspend(node, result.interrupts, from_hook=False, handoff=tracker.handoff)
                return
            self._store(node, result, ran=result.status == Status.COMPLETED)
            self.state.handoff_node = self._next_member(tracker, result)  # for AfterNodeCallEvent hooks
            try:
                yield node_stop_event(node.node_id, result)
                await self._after_node(node, invocation_state)
            finally:
                self.state.handoff_node = None  # applied below (or dropped with the run's end)
            if result.status != Status.COMPLETED:
                self.state.completion_status = (Status.CANCELLED if result.status == Status.CANCELLED
                                                else Status.FAILED)
                return
            if tracker.handoff is None or self._cancel_requested:
                self.state.completion_status = Status.CANCELLED if self._cancel_requested else Status.COMPLETED
                return
            for key, value in tracker.handoff.context.items():
                self.shared_context.add_context(node, key, value)
            self.state.current_node = self.nodes[tracker.handoff.target]
            self.state.handoff_message = tracker.handoff.message
            save_state(self, self.session_manager)
            yield handoff_event([node.node_id], [tracker.handoff.target],
                                tracker.handoff.message or "Agent handoff occurred")

    def _next_member(self, tracker: HandoffTracker, result: NodeResult) -> SwarmNode | None:
        """The member a completed member's handoff names (``None``: no handoff, or the member did not complete)."""
        if tracker.handoff is None or result.status != Status.COMPLETED:
            return None
        member: SwarmNode = self.nodes[tracker.handoff.target]
        return member

    async def _run_member(self, node: SwarmNode, resume_input: Any, tracker: HandoffTracker,
                          invocation_state: dict[str, Any]) -> AsyncGenerator[dict[str, Any] | NodeResult, None]:
        """Run one member under the node and execution timeouts; yields its start and events, then its ``NodeResult``.

        Closed before its result (the caller stopped reading), the member is recorded ``CANCELLED``, as a Graph's
        running node is, and its ``AfterNodeCallEvent`` fires (as in Strands).
        """
        if resume_input is not None:
            node_input = resume_input
        else:
            node_input = self._node_input(node)
            if self.reset_members:
                node.reset_executor_state()
        started = time.monotonic()
        remaining = max(self.execution_timeout - self._elapsed(), 0.0)
        timeout = min(self.node_timeout, remaining)
        result: NodeResult | None = None
        error: Exception | None = None
        try:
            yield node_start_event(node.node_id, "agent")
            async with asyncio.timeout(timeout):
                with span_scope(f"execute_node {node.node_id}", {"ray_harness.node.id": node.node_id},
                                outcome=lambda: result and result.status), \
                        node_scope(node.node_id, outcome=lambda: result and result.status):
                    items = self._node_runner.run_node(node.node_id, node_input, invocation_state)
                    try:
                        async for item in items:
                            if isinstance(item, NodeResult):
                                result = item
                            else:
                                tracker.observe(item)
                                yield node_stream_event(node.node_id, item)
                    finally:
                        await items.aclose()
        except TimeoutError:
            self._node_runner.cancel_node(node.node_id)
            # The run's deadline, when it came first, is what stopped the member (Strands' text for it).
            error = Exception(f"Execution timed out: {self.execution_timeout}s" if remaining < self.node_timeout
                              else f"Node '{node.node_id}' execution timed out after {self.node_timeout}s")
        except Exception as failure:
            logger.warning("node_id=<%s>, error=<%s> | swarm member failed", node.node_id, failure)
            error = failure
        except BaseException:
            stopped = Exception(f"Node '{node.node_id}' was cancelled")
            self._store(node, NodeResult(result=stopped, status=Status.CANCELLED, execution_count=1), ran=False)
            await self._after_node(node, invocation_state)  # its BeforeNodeCallEvent ran: hooks stay paired
            raise
        if result is None:
            elapsed = round((time.monotonic() - started) * 1000)
            result = NodeResult(result=error or RuntimeError(f"Node '{node.node_id}' produced no result"),
                                execution_time=elapsed, status=Status.FAILED,
                                accumulated_metrics={"latencyMs": elapsed}, execution_count=1)
        yield result

    def _node_input(self, node: SwarmNode) -> list[dict[str, Any]]:
        members = {name: getattr(member.executor, "description", None) for name, member in self.nodes.items()}
        text = build_swarm_node_text(node_id=node.node_id, task=self.state.task,
                                     handoff_message=self.state.handoff_message,
                                     history=[n.node_id for n in self.state.node_history],
                                     shared_context=self.shared_context.context, members=members)
        self.state.handoff_message = None
        blocks: list[dict[str, Any]] = [{"text": f"Context:\n{text}\n\n"}]
        if isinstance(self.state.task, list):
            blocks.extend(self.state.task)
        return blocks

    def _elapsed(self) -> float:
        return self.state.execution_time / 1000 + time.monotonic() - self.state.start_time

    def _store(self, node: SwarmNode, result: NodeResult, *, ran: bool) -> None:
        self.state.results[node.node_id] = result
        if ran:
            self.state.node_history.append(node)
        add_usage(self.state.accumulated_usage, result.accumulated_usage)
        add_usage(self.state.accumulated_metrics, result.accumulated_metrics)
        self.state.accumulated_cost_usd += result.accumulated_cost_usd

    async def _after_node(self, node: SwarmNode, invocation_state: dict[str, Any]) -> None:
        await self.hooks.invoke_callbacks_async(AfterNodeCallEvent(source=self, node_id=node.node_id,
                                                                   invocation_state=invocation_state))

    def _suspend(self, node: SwarmNode, interrupts: list[Interrupt], *, from_hook: bool,
                 handoff: Handoff | None = None) -> dict[str, Any]:
        self.state.completion_status = Status.INTERRUPTED
        for item in interrupts:
            self._interrupt_state.interrupts[item.id] = item
        context: dict[str, Any] = {"from_hook": from_hook, "interrupt_ids": [item.id for item in interrupts]}
        if not from_hook:
            context["node_state"] = self._node_runner.export_node_state(node.node_id)
        if handoff is not None:
            context["handoff"] = handoff.to_dict()
        self._interrupt_state.context[node.node_id] = context
        self._interrupt_state.activate()
        return node_interrupt_event(node.node_id, interrupts)

    def _build_result(self, interrupts: list[Interrupt]) -> SwarmResult:
        return SwarmResult(status=self.state.completion_status, results=dict(self.state.results),
                           accumulated_usage=dict(self.state.accumulated_usage),
                           accumulated_metrics=dict(self.state.accumulated_metrics),
                           execution_count=len(self.state.node_history), execution_time=self.state.execution_time,
                           interrupts=list(interrupts), accumulated_cost_usd=self.state.accumulated_cost_usd,
                           node_history=list(self.state.node_history))

    # -- persistence --------------------------------------------------------------------------------------

    def serialize_state(self) -> dict[str, Any]:
        """The swarm's state as JSON (status, task, current member, handoff message, context, history, results).

        A session manager persists it after each member; :meth:`deserialize_state` resumes from it.
        """
        return swarm_snapshot(self)

    def deserialize_state(self, payload: dict[str, Any]) -> None:
        """Restore a snapshot: an interrupted or unfinished run resumes, a finished one starts over."""
        restore_swarm(self, payload)
