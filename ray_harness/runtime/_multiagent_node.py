"""An agent node's round trip to a pooled host: shipped with its state, run there, its state shipped back.

The Ray executor keeps the driver's ``Agent`` objects authoritative (the same
objects a ``runtime="local"`` graph mutates in place). Each node execution ships
the agent by value to a host; :class:`NodeAgentSource` (the factory the host
builds it with) wraps the agent's ``stream_async`` so that what the run changed
comes back with it: messages, agent state, interrupt state, metrics, and the
model and conversation manager objects (a scripted model's cursor, a sliding
window's ``removed_message_count``). It rides on the final ``result`` event
under :data:`NODE_STATE_KEY`, or, when the run raises, in one
:data:`NODE_STATE_EVENT` just before the exception.
:func:`apply_node_state` writes that back into the driver's agent.

Why ship state rather than keep the agent resident on a host: revisits,
``reset_on_revisit`` / ``reset_members``, interrupt resume from a session in a
new process and ``graph.nodes[...].executor.messages`` then behave exactly as
in-process, with the same code; any host can run any node (no affinity to a
host that might die). The cost is the agent's pickled size twice per node
execution, small next to a model call.

What does not come back: side effects inside tool or hook objects (they ran in
the host's process), and changes the agent made to ``invocation_state``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from typing import Any

from ray import cloudpickle as _cloudpickle

from ray_harness.agent.agent import Agent
from ray_harness.agent.state import AgentState
from ray_harness.interrupts import InterruptState
from ray_harness.runtime._spec import AgentSpec

__all__ = ("NODE_STATE_EVENT", "NODE_STATE_KEY", "NodeAgentSource", "apply_node_state", "node_spec", "pack_node_state")

logger = logging.getLogger(__name__)

cloudpickle: Any = _cloudpickle

NODE_STATE_EVENT = "ray_harness_node_state"
"""Internal stream event type (after a failed run); the executor consumes it and never forwards it."""
NODE_STATE_KEY = "ray_harness_node_state"
"""The key of the packed state on the final ``result`` event; the executor removes it before forwarding."""

# Replaced in place (same object, new contents) so references held elsewhere stay valid: the hook registry
# holds bound methods of the conversation manager, users hold the model.
_IN_PLACE = ("model", "conversation_manager")


class NodeAgentSource:
    """A picklable zero-argument factory: the driver's agent, reporting its state at the end of each run."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def __call__(self) -> Agent:
        agent = self.agent
        # Instance attributes shadow the methods for the runner that drives this agent in the host.
        agent.__dict__["stream_async"] = _reporting(agent, agent.stream_async)
        agent.__dict__["_quiet_stream"] = _reporting(agent, agent._quiet_stream)
        return agent


def _reporting(agent: Agent, original: Any) -> Any:
    """``original`` (a stream method of ``agent``) with the agent's state added at the end of the run."""

    async def stream(prompt: Any = None, **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
        try:
            async for event in original(prompt, **kwargs):
                if event.get("type") == "result":
                    # Carried on the result event: every streamed item is one Ray object.
                    event = {**event, NODE_STATE_KEY: pack_node_state(agent)}
                yield event
        except Exception:
            # In-process the failed run still advanced the model and rolled the history back; mirror both.
            yield {"type": NODE_STATE_EVENT, "state": pack_node_state(agent)}
            raise

    return stream


def node_spec(agent: Agent) -> AgentSpec:
    """The spec a host builds the node's agent from: the agent as it is now on the driver."""
    return AgentSpec("factory", cloudpickle.dumps(NodeAgentSource(agent)), agent.name)


def pack_node_state(agent: Agent) -> bytes:
    """The agent's state as bytes (pickled here, so a part that does not pickle is dropped, not fatal)."""
    state: dict[str, Any] = {
        "messages": agent.messages,
        "state": agent.state.to_dict(),
        "interrupt_state": agent._interrupt_state.to_dict(),
        "metrics": agent.event_loop_metrics,
    }
    for attribute in _IN_PLACE:
        value = getattr(agent, attribute, None)
        try:
            state[attribute] = cloudpickle.dumps(value)
        except Exception as error:  # e.g. a provider model holding a live client without __getstate__
            logger.debug("agent=<%s>, attribute=<%s>, error=<%s> | not shipped back", agent.name, attribute, error)
    return bytes(cloudpickle.dumps(state))


def apply_node_state(agent: Agent, payload: bytes) -> None:
    """Write a state packed by :func:`pack_node_state` into the driver's ``agent``."""
    state = cloudpickle.loads(payload)
    agent.messages = list(state["messages"])
    agent.state = AgentState(state["state"])
    agent._interrupt_state = InterruptState.from_dict(state["interrupt_state"])
    agent.event_loop_metrics = state["metrics"]
    for attribute in _IN_PLACE:
        if attribute not in state:
            continue
        incoming = cloudpickle.loads(state[attribute])
        current = getattr(agent, attribute, None)
        if type(current) is type(incoming) and hasattr(current, "__dict__") and hasattr(incoming, "__dict__"):
            vars(current).clear()
            vars(current).update(vars(incoming))
        else:
            setattr(agent, attribute, incoming)
