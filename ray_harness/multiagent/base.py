"""The common base of Graph and Swarm: ``Status``, ``NodeResult``, ``MultiAgentResult``, ``MultiAgentBase``.

Results nest: a ``NodeResult.result`` is an ``AgentResult`` (agent node), a
``MultiAgentResult`` (nested graph or swarm) or an ``Exception`` (failed node).
``get_agent_results()`` flattens the tree; ``to_dict``/``from_dict`` round-trip
it through JSON so orchestration state can live in a session.
"""

from __future__ import annotations

import time
from abc import ABC
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, ClassVar

from ray_harness.agent.result import AgentResult
from ray_harness.hooks.registry import (
    BaseHookEvent,
    HookOrder,
    HookRegistry,
    infer_event_type,
    is_hook_provider,
)
from ray_harness.interrupts import Interrupt, InterruptState

__all__ = (
    "MultiAgentBase",
    "MultiAgentResult",
    "NodeResult",
    "RunState",
    "Status",
    "add_usage",
    "agent_result_from_dict",
    "agent_result_to_dict",
    "zero_usage",
)


class Status(Enum):
    """Execution status of a graph, a swarm or one of their nodes.

    ``DISPATCHED`` (nodes only, as in Strands): the graph picked the node for its batch and has not started it
    yet; like ``EXECUTING`` it is in flight, so a state saved then re-runs it on resume.
    """

    PENDING = "pending"
    DISPATCHED = "dispatched"
    EXECUTING = "executing"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"


def zero_usage() -> dict[str, int]:
    """A usage dict with every token count at zero."""
    return {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}


def add_usage(target: dict[str, int], source: dict[str, Any]) -> None:
    """Add every integer counter of ``source`` into ``target`` (cache counters included)."""
    for key, value in source.items():
        # An exact int (every counter in practice) passes the first test alone: three per node of a row.
        if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
            target[key] = target.get(key, 0) + value


def agent_result_to_dict(result: AgentResult) -> dict[str, Any]:
    """An ``AgentResult`` as the JSON dict stored in a ``NodeResult`` (``AgentResult.to_dict``, tagged)."""
    return result.to_dict()


def agent_result_from_dict(data: dict[str, Any]) -> AgentResult:
    """Rebuild an ``AgentResult`` from :func:`agent_result_to_dict` output (``AgentResult.from_dict``)."""
    return AgentResult.from_dict(data)


@dataclass
class NodeResult:
    """What one node produced: an agent result, a nested multi-agent result, or the exception it raised."""

    result: AgentResult | MultiAgentResult | Exception
    execution_time: int = 0
    status: Status = Status.PENDING
    accumulated_usage: dict[str, int] = field(default_factory=zero_usage)
    accumulated_metrics: dict[str, int] = field(default_factory=lambda: {"latencyMs": 0})
    execution_count: int = 0
    interrupts: list[Interrupt] = field(default_factory=list)
    accumulated_cost_usd: float = 0.0

    def __str__(self) -> str:
        return str(self.result)

    def get_agent_results(self) -> list[AgentResult]:
        """Every ``AgentResult`` under this node, flattened through nested graphs and swarms."""
        if isinstance(self.result, AgentResult):
            return [self.result]
        if isinstance(self.result, MultiAgentResult):
            return [item for nested in self.result.results.values() for item in nested.get_agent_results()]
        return []

    def to_dict(self) -> dict[str, Any]:
        """This node result as JSON: an agent or nested result, or an exception as its type and message."""
        if isinstance(self.result, AgentResult):
            payload = agent_result_to_dict(self.result)
        elif isinstance(self.result, MultiAgentResult):
            payload = self.result.to_dict()
        else:
            payload = {"type": "exception", "exception_type": type(self.result).__name__, "message": str(self.result)}
        return {
            "result": payload,
            "execution_time": self.execution_time,
            "status": self.status.value,
            "accumulated_usage": dict(self.accumulated_usage),
            "accumulated_metrics": dict(self.accumulated_metrics),
            "execution_count": self.execution_count,
            "interrupts": [item.to_dict() for item in self.interrupts],
            "accumulated_cost_usd": self.accumulated_cost_usd,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeResult:
        """Rebuild a node result written by :meth:`to_dict`; an exception comes back as a plain ``Exception``.

        Raises:
            TypeError: ``data`` is not such a dict; the message names the missing or bad field.
        """
        if not isinstance(data, dict) or "result" not in data:
            raise TypeError("NodeResult.from_dict: field 'result' is missing")
        raw = data["result"]
        kind = raw.get("type") if isinstance(raw, dict) else None
        result: AgentResult | MultiAgentResult | Exception
        if kind == "agent_result":
            result = agent_result_from_dict(raw)
        elif kind == "multiagent_result":
            result = MultiAgentResult.from_dict(raw)
        elif kind == "exception":
            result = Exception(str(raw.get("message", "node failed")))
        else:
            raise TypeError(f"NodeResult.from_dict: field 'result' has unsupported type {kind!r}")
        return cls(
            result=result,
            execution_time=int(data.get("execution_time") or 0),
            status=Status(data.get("status", "pending")),
            accumulated_usage={**zero_usage(), **(data.get("accumulated_usage") or {})},
            accumulated_metrics={"latencyMs": 0, **(data.get("accumulated_metrics") or {})},
            execution_count=int(data.get("execution_count") or 0),
            interrupts=[Interrupt.from_dict(item) for item in data.get("interrupts") or []],
            accumulated_cost_usd=float(data.get("accumulated_cost_usd") or 0.0),
        )


@dataclass
class MultiAgentResult:
    """The outcome of one graph or swarm invocation; usage and cost are summed over its nodes."""

    status: Status = Status.PENDING
    results: dict[str, NodeResult] = field(default_factory=dict)
    accumulated_usage: dict[str, int] = field(default_factory=zero_usage)
    accumulated_metrics: dict[str, int] = field(default_factory=lambda: {"latencyMs": 0})
    execution_count: int = 0
    execution_time: int = 0
    interrupts: list[Interrupt] = field(default_factory=list)
    accumulated_cost_usd: float = 0.0

    def __str__(self) -> str:
        if self.interrupts:
            return str([item.to_dict() for item in self.interrupts])
        parts = []
        for node_id, node_result in self.results.items():
            text = str(node_result).removesuffix("\n")
            if text:
                parts.append(f"{node_id}: {text}")
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """This result as JSON, node results included (tagged ``"type": "multiagent_result"``)."""
        return {
            "type": "multiagent_result",
            "status": self.status.value,
            "results": {key: value.to_dict() for key, value in self.results.items()},
            "accumulated_usage": dict(self.accumulated_usage),
            "accumulated_metrics": dict(self.accumulated_metrics),
            "execution_count": self.execution_count,
            "execution_time": self.execution_time,
            "interrupts": [item.to_dict() for item in self.interrupts],
            "accumulated_cost_usd": self.accumulated_cost_usd,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MultiAgentResult:
        """Rebuild a result written by :meth:`to_dict`.

        Raises:
            TypeError: ``data`` is not such a dict; the message names the missing or bad field.
        """
        if not isinstance(data, dict) or data.get("type") != "multiagent_result":
            raise TypeError(f"MultiAgentResult.from_dict: field 'type' must be 'multiagent_result', got "
                            f"{data.get('type') if isinstance(data, dict) else data!r}")
        if "status" not in data:
            raise TypeError("MultiAgentResult.from_dict: field 'status' is missing")
        return cls(
            status=Status(data["status"]),
            results={key: NodeResult.from_dict(value) for key, value in (data.get("results") or {}).items()},
            accumulated_usage={**zero_usage(), **(data.get("accumulated_usage") or {})},
            accumulated_metrics={"latencyMs": 0, **(data.get("accumulated_metrics") or {})},
            execution_count=int(data.get("execution_count") or 0),
            execution_time=int(data.get("execution_time") or 0),
            interrupts=[Interrupt.from_dict(item) for item in data.get("interrupts") or []],
            accumulated_cost_usd=float(data.get("accumulated_cost_usd") or 0.0),
        )


@dataclass(frozen=True)
class RunState:
    """What an invocation changed in an orchestrator, by name.

    The fields its class lists in ``RUN_FIELDS`` and, per node, the node fields in ``NODE_RUN_FIELDS``. An
    orchestration host sends it back to the driver, which applies it with :meth:`MultiAgentBase.apply_run_state`.
    """

    fields: dict[str, Any]
    nodes: dict[str, dict[str, Any]]
    runner: Any = None
    """The node runner's own bookkeeping of the run (its ``run_state()``, when it has one), e.g. which slot
    revision each node's state matches on ``runtime="ray"``."""


class MultiAgentBase(ABC):
    """The Agent surface for orchestrators, so graphs and swarms nest in each other and in graphs.

    Subclasses implement :meth:`stream_async`, whose last event is
    ``{"type": "multiagent_result", "result": MultiAgentResult}``, or only :meth:`invoke_async`, as a custom
    node written for Strands does (the default :meth:`stream_async` then yields its result as that one event).
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> MultiAgentBase:
        """Refuse a subclass with neither ``invoke_async`` nor ``stream_async`` of its own.

        Each default of the pair runs the other, so such a node's first call would never end.
        """
        if cls.stream_async is MultiAgentBase.stream_async and cls.invoke_async is MultiAgentBase.invoke_async:
            raise TypeError(f"{cls.__name__} must implement invoke_async or stream_async")
        return super().__new__(cls)

    id: str
    hooks: HookRegistry
    nodes: Mapping[str, Any] = MappingProxyType({})
    """The orchestrator's nodes by id (a Graph's ``GraphNode``s, a Swarm's members); none for a custom node."""
    RUN_FIELDS: ClassVar[tuple[str, ...]] = ()
    """The attributes an invocation changes (results, scheduler, interrupt state, ...); configuration is not."""
    NODE_RUN_FIELDS: ClassVar[tuple[str, ...]] = ()
    """The attributes of a node object that an invocation changes."""

    def local_parts(self) -> dict[str, Any]:
        """The parts of this orchestrator that belong to its process, by role.

        ``"hooks"`` (the hook registry), ``"node_runner"``, ``"lock"`` (the invocation lock) and
        ``"session_manager"``: a runtime that ships the orchestrator to another process sends these as
        references (each side keeps its own) instead of copying them, and rebuilds the lock and the session
        manager there (a relay). Roles an orchestrator does not have are left out.
        """
        parts: dict[str, Any] = {}
        for role, name in (("hooks", "hooks"), ("node_runner", "_node_runner"), ("lock", "_lock"),
                           ("session_manager", "session_manager")):
            part = getattr(self, name, None)
            if part is not None:
                parts[role] = part
        return parts

    @property
    def node_runner(self) -> Any:
        """What runs this orchestrator's nodes (``None`` for an orchestrator that has none)."""
        return getattr(self, "_node_runner", None)

    def run_state(self) -> RunState:
        """The run's state of this orchestrator (its agents' state travels as their ``AgentSnapshot``)."""
        nodes: dict[str, Any] = getattr(self, "nodes", {})
        runner_state = getattr(self.node_runner, "run_state", None)
        return RunState(fields={name: getattr(self, name) for name in self.RUN_FIELDS},
                        nodes={node_id: {name: getattr(node, name) for name in self.NODE_RUN_FIELDS}
                               for node_id, node in nodes.items()},
                        runner=runner_state() if callable(runner_state) else None)

    def apply_run_state(self, state: RunState) -> None:
        """Take over a run's state produced by :meth:`run_state` of a copy of this orchestrator."""
        nodes: dict[str, Any] = getattr(self, "nodes", {})
        unknown = set(state.fields) - set(self.RUN_FIELDS)
        if unknown or set(state.nodes) - set(nodes):
            raise ValueError(f"run state of {type(self).__name__} {self.id!r} names unknown fields {sorted(unknown)} "
                             f"or nodes {sorted(set(state.nodes) - set(nodes))}")
        for name, value in state.fields.items():
            setattr(self, name, value)
        for node_id, fields in state.nodes.items():
            node = nodes[node_id]
            for name in self.NODE_RUN_FIELDS:
                if name in fields:
                    setattr(node, name, fields[name])
        apply_runner = getattr(getattr(self, "_node_runner", None), "apply_run_state", None)
        if state.runner is not None and callable(apply_runner):
            apply_runner(state.runner)

    async def stream_async(self, task: Any, invocation_state: dict[str, Any] | None = None,
                           **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
        """Run the task, yielding stream events; the last one carries the result.

        The default, for a subclass that implements only :meth:`invoke_async` (as Strands' base class allows),
        runs it and yields its result as the one event.
        """
        result = await self.invoke_async(task, invocation_state, **kwargs)
        yield {"type": "multiagent_result", "result": result}

    async def invoke_async(self, task: Any, invocation_state: dict[str, Any] | None = None,
                           **kwargs: Any) -> MultiAgentResult:
        """Run the task to the end and return its result (the stream's last event)."""
        result: MultiAgentResult | None = None
        async for event in self._quiet_stream(task, invocation_state, **kwargs):
            if event.get("type") == "multiagent_result":
                result = event["result"]
        if result is None:  # pragma: no cover - stream_async always ends with a result
            raise RuntimeError(f"{type(self).__name__} ended without a result")
        return result

    def _quiet_stream(self, task: Any, invocation_state: dict[str, Any] | None = None,
                      **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
        """``stream_async`` for callers that want only the result (``invoke_async``, a pooled row).

        An orchestrator may leave out the events nobody reads — node stream events, node start/stop,
        handoffs — as long as ``multiagent_node_interrupt`` and the final ``multiagent_result`` still
        come; hooks run exactly as with ``stream_async``. The default streams everything.
        """
        return self.stream_async(task, invocation_state, **kwargs)

    def __call__(self, task: Any, invocation_state: dict[str, Any] | None = None, **kwargs: Any) -> MultiAgentResult:
        """Run the task synchronously (from code that is not in an event loop) and return its result."""
        from ray_harness.agent.agent import run_sync

        return run_sync(self.invoke_async(task, invocation_state, **kwargs))  # type: ignore[no-any-return]

    def cancel(self) -> None:
        """Stop the running invocation; it returns a result with ``Status.CANCELLED``.

        The default does nothing: a custom node that does not implement it runs to its end.
        """

    def shutdown(self) -> None:
        """Release what the runtime holds for this orchestrator; idempotent.

        With ``runtime="ray"`` this releases its agent nodes' host slots (the next invocation ships the agents
        again); it also happens when the object is garbage collected and at ``ray_harness.runtime.shutdown()``.
        """
        release = getattr(self.node_runner, "shutdown", None)
        if callable(release):
            release()

    @property
    def interrupt_state(self) -> InterruptState:
        """The interrupts raised by this orchestrator's hooks and nodes, and their resume context."""
        return self._interrupt_state  # type: ignore[attr-defined,no-any-return]

    def serialize_state(self) -> dict[str, Any]:
        """A JSON-serializable snapshot of the orchestration state (the default: ``{}``, a node without state)."""
        return {}

    def deserialize_state(self, payload: dict[str, Any]) -> None:
        """Restore a snapshot made by :meth:`serialize_state` (possibly in another process).

        Raises:
            NotImplementedError: The default, for a node without state, got a non-empty ``payload``.
        """
        if payload:
            raise NotImplementedError(f"{type(self).__name__} keeps no state: implement serialize_state and "
                                      "deserialize_state to restore one")

    def add_hook(self, callback: Callable[..., Any],
                 event_type: type[BaseHookEvent] | list[type[BaseHookEvent]] | None = None,
                 order: float = HookOrder.DEFAULT) -> None:
        """Register a multi-agent hook callback (event type inferred from the annotation when not given)."""
        if is_hook_provider(callback) and event_type is None:
            callback.register_hooks(self.hooks)
            return
        self.hooks.add_callback(event_type or infer_event_type(callback), callback, order)

    def _register_hook_providers(self, hooks: list[Any] | None) -> None:
        for hook in hooks or []:
            if is_hook_provider(hook):
                hook.register_hooks(self.hooks)
            elif callable(hook):
                self.add_hook(hook)
            else:
                raise TypeError(f"hooks entries must be HookProviders or callbacks, got {hook!r}")


def elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
