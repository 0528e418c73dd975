"""An agent with a MemoryManager ships to a Ray host and keeps working there: injection, add and search tools."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.memory import MemoryManager
from ray_harness.testing import ModelCall, ScriptedModel, Step, text, tool_call
from ray_harness.vended_memory_stores import TestMemoryStore

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


def echo_injected(call: ModelCall) -> Step:
    """Answer with the text folded into the latest user message (what memory injection added)."""
    return text(call.messages[-1]["content"][-1]["text"].strip())


def test_an_agent_with_memory_works_on_a_ray_host() -> None:
    from ray_harness.runtime import RemoteAgent

    store = TestMemoryStore(name="notes", persist=False)
    asyncio.run(store.add("user likes green tea"))  # in the store object: it travels with the agent
    model = ScriptedModel(echo_injected, tool_call("add_memory", {"entries": ["user lives in Oslo"]}), text("noted"),
                          tool_call("search_memory", {"query": "Oslo"}), text("found"))
    agent = Agent(model, memory_manager=MemoryManager(stores=[store], add_tool_config=True))
    remote = RemoteAgent(agent, name="memory-host-agent")
    try:
        first = remote("what tea do I like?")
        assert str(first).strip() == '<memory>\n<entry source="notes">user likes green tea</entry>\n</memory>'
        assert str(remote("I moved to Oslo")).strip() == "noted"
        assert str(remote("where do I live?")).strip() == "found"
        messages: Any = remote.messages
        found = messages[-2]["content"][0]["toolResult"]["content"][0]["json"]
        assert found[0]["content"] == "user lives in Oslo" and found[0]["store_name"] == "notes"
        asked = [message for message in messages if message["role"] == "user"]
        assert "<memory>" not in json.dumps(asked)  # injected per call, never kept in the host's history
    finally:
        remote.shutdown()
    assert asyncio.run(store.search("Oslo")) == []  # the driver's store is not the host's copy
