"""The vended memory stores (Strands' ``strands.vended_memory_stores``): TestMemoryStore and FileMemoryStore."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent
from ray_harness.memory import InvocationTrigger, MemoryManager
from ray_harness.storage import InMemoryStorage, LocalFileStorage
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.vended_memory_stores import FileMemoryStore, TestMemoryStore
from ray_harness.vended_memory_stores.test_memory_store import TestMemoryAddResult


async def test_the_json_store_ranks_by_shared_words_and_dedups(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    store = TestMemoryStore(name="notes", path=str(path), max_search_results=2)
    first = await store.add("user likes green tea", {"source": "chat"})
    assert isinstance(first, TestMemoryAddResult)
    await store.add("user lives in Oslo")
    assert (await store.add("  user likes green tea ")).id == first.id
    records = json.loads(path.read_text())
    assert [record["content"] for record in records] == ["user likes green tea", "user lives in Oslo"]
    assert set(records[0]) == {"id", "content", "metadata", "createdAt"} and records[0]["createdAt"].endswith("Z")
    hits = await TestMemoryStore(name="notes", path=str(path)).search("green tea for the user")
    assert [hit.content for hit in hits] == ["user likes green tea", "user lives in Oslo"]
    assert hits[0].metadata == {"source": "chat", "_relevanceScore": 3}
    assert await store.search("!!!") == []


async def test_the_json_store_refuses_bad_input_and_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="name must not be empty"):
        TestMemoryStore(name=" ")
    with pytest.raises(ValueError, match="at least 1"):
        TestMemoryStore(name="n", max_search_results=0)
    read_only = TestMemoryStore(name="n", persist=False, writable=False)
    with pytest.raises(ValueError, match="not writable"):
        await read_only.add("x")
    path = tmp_path / "bad.json"
    path.write_text('{"not": "a list"}')
    with pytest.raises(ValueError, match="expected a JSON array"):
        await TestMemoryStore(name="n", path=str(path)).search("x")


async def test_the_default_file_is_named_after_the_store_in_the_home_directory(monkeypatch: Any,
                                                                               tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    await TestMemoryStore(name="../team/notes").add("hello")
    assert (tmp_path / ".ray_harness" / "memory" / "__team_notes.json").exists()


def test_an_agent_remembers_across_sessions_through_the_json_store(tmp_path: Path) -> None:
    path = str(tmp_path / "memory.json")
    writer = Agent(ScriptedModel(tool_call("add_memory", {"entries": ["user's cat is called Miso"]}), text("noted")),
                   memory_manager=MemoryManager(stores=[TestMemoryStore(name="notes", path=path)],
                                                add_tool_config=True))
    writer("my cat is Miso")
    model = ScriptedModel(text("Miso"))
    reader = Agent(model, memory_manager={"stores": [TestMemoryStore(name="notes", path=path)]})
    reader("what is my cat called?")
    assert "user's cat is called Miso" in json.dumps(model.calls[0].messages)  # injected from the file


async def test_the_markdown_store_files_facts_by_topic() -> None:
    storage = InMemoryStorage()
    store = FileMemoryStore(name="team", storage=storage, max_search_results=1)
    assert await store.add("# User preferences\nlikes tea") == "user-preferences.md"
    await store.add("# User preferences\nhates coffee")
    await store.add("# Project setup\nuses uv")
    assert sorted(await storage.list("")) == ["memory/team/project-setup.md", "memory/team/user-preferences.md"]
    [hit] = await store.search("coffee")
    assert hit.content == "# User preferences\nlikes tea\nhates coffee"
    assert hit.metadata is not None and hit.metadata["path"] == "user-preferences.md"
    with pytest.raises(ValueError, match=">= 1"):
        await store.search("x", {"max_search_results": 0})


def test_markdown_extraction_tells_the_model_the_topics_and_pickles(tmp_path: Path) -> None:
    store = FileMemoryStore(name="m", storage=LocalFileStorage(tmp_path),
                            extraction={"trigger": InvocationTrigger()})
    extracted = text('[{"content": "# User preferences\\nlikes tea"}]')
    model = ScriptedModel(text("hello"), extracted, text("again"), text("[]"))
    agent = Agent(model, memory_manager=MemoryManager(stores=[store], injection=False))
    agent("I like tea")
    assert (tmp_path / "memory" / "m" / "user-preferences.md").read_text() == "# User preferences\nlikes tea"
    copy = pickle.loads(cloudpickle.dumps(agent))
    copy("more")
    assert "Existing topics: user preferences" in str(copy.model.calls[-1].system_prompt)
