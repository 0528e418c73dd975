"""How an agent crosses into an actor: by value (cloudpickle) or as a factory built inside it.

Accepted sources: an ``Agent`` (pickled by value; ``Agent.__getstate__`` drops its
lock and events), ``bytes`` from :func:`pack_agent` / ``cloudpickle.dumps(agent)``,
a ``"module:function"`` string, or a zero-argument callable returning an Agent
(cloudpickled; a factory keeps unpicklable things such as provider clients out
of the payload: they are created in the actor's process). An ``A2AAgent`` is
callable but no factory, and no Agent to run in an actor: it is refused.
"""

from __future__ import annotations

import functools
import importlib
import sys
from dataclasses import dataclass
from typing import Any, Literal

from ray_harness.agent.agent import Agent
from ray_harness.runtime import _pickling
from ray_harness.sandbox._binding import pickled_identities

__all__ = ("AgentSpec", "agent_spec", "build_agent", "load_factory")


@dataclass(frozen=True)
class AgentSpec:
    """A picklable recipe for one agent.

    ``sandbox_ids``: the identities of the sandboxes pickled into it (in order), so a pool can place agents
    that share a sandbox on one host (:meth:`~ray_harness.runtime.AgentPool._pick`).
    """

    kind: Literal["pickled", "factory_path", "factory"]
    payload: bytes | str
    label: str
    sandbox_ids: tuple[str, ...] = ()

    def build(self) -> Agent:
        return build_agent(self)


def agent_spec(source: Any) -> AgentSpec:
    """Normalize an Agent, pickled agent bytes, ``"module:function"`` or a factory into an :class:`AgentSpec`."""
    if isinstance(source, AgentSpec):
        return source
    if isinstance(source, Agent):
        with pickled_identities() as sandbox_ids:
            payload = _dumps(source, f"agent {source.name!r}")
        return AgentSpec("pickled", payload, source.name, tuple(sandbox_ids))
    if isinstance(source, bytes | bytearray):
        return AgentSpec("pickled", bytes(source), "agent")
    if isinstance(source, str):
        module, sep, function = source.partition(":")
        if not sep or not module or not function:
            raise ValueError(f"agent factory string must look like 'package.module:function', got {source!r}")
        return AgentSpec("factory_path", source, function)
    if _is_a2a_agent(source):  # callable, but an agent rather than a factory: refused before it is called
        raise TypeError(
            f"an A2AAgent ({source.url}) cannot be the agent of a RemoteAgent, an AgentPool or a runtime='ray' "
            "evaluation: it is a client of its server, not an Agent to build in an actor. Call it from this "
            "process (runtime='local'), or use it as a tool or as a Graph/Swarm node (any runtime)"
        )
    if callable(source):
        with pickled_identities() as sandbox_ids:  # a factory closing over a sandbox object shares it
            payload = _dumps(source, f"factory {getattr(source, '__qualname__', type(source).__name__)!r}")
        return AgentSpec("factory", payload, getattr(source, "__name__", "factory"), tuple(sandbox_ids))
    raise TypeError(
        f"expected an Agent, pickled agent bytes, a 'module:function' factory string or a factory callable, "
        f"got {type(source).__name__}"
    )


def _is_a2a_agent(source: Any) -> bool:
    """Whether ``source`` is an ``A2AAgent``, without importing :mod:`ray_harness.serve.client`.

    Every host process imports this module, and the A2A client (≈30 ms of imports) is needed by none of them: an
    A2AAgent exists only in a process that imported its module, so where it is not imported nothing is one.
    """
    client = sys.modules.get("ray_harness.serve.client")
    return client is not None and isinstance(source, client.A2AAgent)


def _dumps(source: Agent | Any, what: str) -> bytes:
    """Pickle ``source``, or raise a TypeError naming what does not pickle.

    Ray's bare ``cannot pickle '_thread.lock' object`` said neither which agent nor which of its parts.
    """
    try:
        return _pickling.dumps(source)
    except Exception as error:
        culprits = _unpicklable_parts(source) if isinstance(source, Agent) else []
        named = "; ".join(culprits) if culprits else f"{type(error).__name__}: {error}"
        raise TypeError(
            f"{what} cannot be shipped to an actor (RemoteAgent, AgentPool, runtime='ray'): {named}. Pass a "
            "factory instead ('package.module:function', or a function that builds the agent), so clients, locks "
            "and connections are created in the actor's process"
        ) from error


def _unpicklable_parts(agent: Agent) -> list[str]:
    culprits: list[str] = []
    for key, value in agent.__getstate__().items():
        failure = _failure(value)
        if not failure:
            continue
        tools = getattr(value, "_tools", None) if key == "tool_registry" else None
        if isinstance(tools, dict):  # name the tool, not the registry holding it
            parts = [*((f"tool {name!r}", tool) for name, tool in tools.items()),
                     *((f"tool provider {type(p).__name__}", p) for p in getattr(value, "_providers", ()))]
            culprits += [f"{label} ({failed})" for label, part in parts if (failed := _failure(part))]
        else:
            culprits.append(f"{key.lstrip('_')} ({failure})")
    return culprits


def _failure(value: Any) -> str:
    try:
        _pickling.dumps(value)
    except Exception as error:
        return f"{type(value).__name__}: {error}"
    return ""


def load_factory(path: str) -> Any:
    module_name, _, attribute = path.partition(":")
    module = importlib.import_module(module_name)
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


@functools.lru_cache(maxsize=256)
def _loaded_factory(path: str) -> Any:
    """:func:`load_factory`, once per path and process: a host builds every evaluation row from the same path."""
    return load_factory(path)


def build_agent(spec: AgentSpec) -> Agent:
    if spec.kind == "factory_path":
        agent = _loaded_factory(str(spec.payload))()
    elif spec.kind == "factory":
        agent = _pickling.loads(spec.payload)()
    else:
        agent = _pickling.loads(spec.payload)
    if not isinstance(agent, Agent):
        from ray_harness.runtime._targets import MultiAgentTarget, is_multi_agent

        if is_multi_agent(agent):
            return MultiAgentTarget(agent)  # type: ignore[return-value]  # a Graph/Swarm row of an evaluation
        raise TypeError(f"agent source {spec.label!r} produced {type(agent).__name__}, not an Agent, Graph or Swarm")
    return agent
