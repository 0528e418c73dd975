"""The agent passes ``agent_metadata=`` to ``model.stream(...)``, as Strands' event loop does."""

from __future__ import annotations

import pickle
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.agent import AgentMetadata
from ray_harness.middleware import InvokeModelStage
from ray_harness.models import Model
from ray_harness.session import FileSessionManager
from ray_harness.testing import ScriptedModel, text
from ray_harness.types.streaming import StreamEvent

ANSWER: list[StreamEvent] = [
    {"messageStart": {"role": "assistant"}},
    {"contentBlockDelta": {"delta": {"text": "ok"}, "contentBlockIndex": 0}},
    {"contentBlockStop": {"contentBlockIndex": 0}},
    {"messageStop": {"stopReason": "end_turn"}},
]


class Answering(Model):
    """A model that answers "ok"; subclasses record what ``stream`` was given."""

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> dict[str, Any]:
        return {"model_id": type(self).__name__}


class Recording(Answering):
    """Keeps the keyword arguments of every ``stream`` call."""

    def __init__(self) -> None:
        self.kwargs: list[dict[str, Any]] = []

    async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, *,
                     tool_choice: Any = None, **kwargs: Any) -> AsyncGenerator[StreamEvent, None]:
        self.kwargs.append(kwargs)
        for event in ANSWER:
            yield event


class Named(Answering):
    """Strands' signature: ``agent_metadata`` is a keyword of its own, no ``**kwargs``."""

    def __init__(self) -> None:
        self.seen: list[AgentMetadata | None] = []

    async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, *,  # type: ignore[override]
                     tool_choice: Any = None,
                     agent_metadata: AgentMetadata | None = None) -> AsyncGenerator[StreamEvent, None]:
        self.seen.append(agent_metadata)
        for event in ANSWER:
            yield event


class Older(Answering):
    """A custom model written before ``agent_metadata`` existed: neither the keyword nor ``**kwargs``."""

    async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, *,  # type: ignore[override]
                     tool_choice: Any = None) -> AsyncGenerator[StreamEvent, None]:
        for event in ANSWER:
            yield event


def test_an_agent_without_a_session_passes_metadata_without_a_session_id() -> None:
    model = Recording()
    Agent(model)("hi")

    assert model.kwargs == [{"agent_metadata": AgentMetadata(session_id=None)}]


def test_the_session_managers_id_reaches_the_model(tmp_path: Path) -> None:
    model = Recording()
    agent = Agent(model, session_manager=FileSessionManager("tenant-7", storage_dir=str(tmp_path)))
    agent("hi")

    assert model.kwargs[-1]["agent_metadata"] == AgentMetadata(session_id="tenant-7")
    assert agent.session_id == "tenant-7"


async def test_the_streamed_and_the_middleware_paths_pass_it_too(tmp_path: Path) -> None:
    model = Recording()
    agent = Agent(model, session_manager=FileSessionManager("s1", storage_dir=str(tmp_path)))
    async for _ in agent.stream_async("hi"):
        pass

    async def passthrough(ctx: Any, next_fn: Any) -> AsyncGenerator[Any, None]:
        async for event in next_fn(ctx):
            yield event

    agent.add_middleware(InvokeModelStage, passthrough)
    agent("again")

    assert [kwargs["agent_metadata"].session_id for kwargs in model.kwargs] == ["s1", "s1"]


def test_a_model_naming_the_keyword_gets_it_and_an_older_signature_keeps_working(tmp_path: Path) -> None:
    named = Named()
    Agent(named, session_manager=FileSessionManager("s2", storage_dir=str(tmp_path)))("hi")
    assert named.seen == [AgentMetadata(session_id="s2")]

    older = Older()
    assert str(Agent(older)("hi")).strip() == "ok"


def test_the_metadata_is_read_only_and_pickles() -> None:
    metadata = AgentMetadata(session_id="s")
    with pytest.raises(AttributeError):
        metadata.session_id = "other"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(metadata)) == metadata


def test_the_scripted_model_takes_it_and_an_agent_still_pickles(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel(text("a"), text("b")))
    agent("hi")
    clone = pickle.loads(pickle.dumps(agent))
    assert str(clone("again")).strip() == "b"
