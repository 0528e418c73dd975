"""Cross-session memory (Strands' ``strands.memory``): tools, injection, extraction and ``Agent(memory_manager=)``."""

from __future__ import annotations

import asyncio
import json
import logging
import pickle
import subprocess
import sys
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent
from ray_harness.memory import (
    AddMessagesContext,
    AggregateMemoryError,
    ExtractionConfig,
    ExtractionResult,
    ExtractionTrigger,
    ExtractionTriggerContext,
    ExtractorContext,
    InjectionFormatContext,
    IntervalTrigger,
    InvocationTrigger,
    MemoryEntry,
    MemoryManager,
    MemoryMessageFilter,
    MemoryStore,
    ModelExtractor,
)
from ray_harness.plugins import Plugin
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.types.content import Message


class NoteStore:
    """A store recording what it is given; ``search`` returns entries sharing a word with the query."""

    def __init__(self, name: str = "notes", *, writable: bool = True, extraction: Any = None,
                 description: str | None = None, fail: bool = False) -> None:
        self.name, self.writable, self.extraction, self.description = name, writable, extraction, description
        self.max_search_results: int | None = None
        self.fail = fail
        self.entries: list[str] = []
        self.searches: list[tuple[str, Any]] = []

    async def search(self, query: str, options: Any = None) -> list[MemoryEntry]:
        self.searches.append((query, options))
        if self.fail:
            raise OSError(f"{self.name} is down")
        words = set(query.lower().split())
        return [MemoryEntry(content=entry) for entry in self.entries if words & set(entry.lower().split())]

    async def add(self, content: str, metadata: Any = None) -> None:
        if self.fail:
            raise OSError(f"{self.name} is down")
        self.entries.append(content)


class BatchStore(NoteStore):
    """A store extracting server-side: it takes message batches."""

    def __init__(self, name: str = "batches", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.batches: list[tuple[list[Message], AddMessagesContext | None]] = []

    async def add_messages(self, messages: list[Message], context: AddMessagesContext | None = None) -> None:
        if self.fail:
            raise OSError(f"{self.name} is down")
        self.batches.append((messages, context))


def _texts(messages: list[Message]) -> list[str]:
    return [block["text"] for message in messages for block in message["content"] if "text" in block]


# -- tools ------------------------------------------------------------------------------------------------


def test_the_search_tool_finds_entries_with_their_store() -> None:
    store = NoteStore(description="what the user told us")
    store.entries.append("user likes green tea")
    model = ScriptedModel(tool_call("search_memory", {"query": "tea"}), text("green tea"))
    agent = Agent(model, memory_manager=MemoryManager(stores=[store], injection=False))
    assert agent.tool_names == ["search_memory"]
    spec = next(spec for spec in model_specs(agent) if spec["name"] == "search_memory")
    assert "- notes: what the user told us" in spec["description"]
    agent("what do I drink?")
    result = agent.messages[2]["content"][0]["toolResult"]
    assert result["content"] == [{"json": [{"content": "user likes green tea", "store_name": "notes"}]}]


def model_specs(agent: Agent) -> list[dict[str, Any]]:
    return [tool.tool_spec for tool in agent.tool_registry.registry.values()]


def test_the_add_tool_is_opt_in_scoped_and_renamed() -> None:
    first, second = NoteStore("first"), NoteStore("second")
    config: Any = {"name": "remember", "stores": ["second"]}
    model = ScriptedModel(tool_call("remember", {"entries": ["likes tea", "lives in Oslo"]}), text("noted"))
    agent = Agent(model, memory_manager=MemoryManager(stores=[first, second], add_tool_config=config,
                                                      injection=False))
    assert agent.tool_names == ["search_memory", "remember"]
    agent("remember this")
    assert first.entries == [] and second.entries == ["likes tea", "lives in Oslo"]
    assert agent.messages[2]["content"][0]["toolResult"]["content"] == [{"json": {"stored": 2}}]


def test_an_add_tool_whose_store_fails_reports_an_error_to_the_model() -> None:
    store = NoteStore(fail=True)
    model = ScriptedModel(tool_call("add_memory", {"entries": ["x"]}), text("sorry"))
    agent = Agent(model, memory_manager=MemoryManager(stores=[store], add_tool_config=True, injection=False))
    agent("remember x")
    result = agent.messages[2]["content"][0]["toolResult"]
    assert result["status"] == "error" and "notes is down" in json.dumps(result)


async def test_fire_and_forget_adds_answer_accepted() -> None:
    store = NoteStore()
    manager = MemoryManager(stores=[store], add_tool_config={"wait_for_writes": False}, injection=False)
    assert await manager._add_memory(["a", "b"]) == {"accepted": 2}
    await asyncio.gather(*manager._background_tasks)
    assert sorted(store.entries) == ["a", "b"]


async def test_search_and_add_programmatically() -> None:
    up, down, read_only = NoteStore("up"), NoteStore("down", fail=True), NoteStore("ro", writable=False)
    up.entries.append("tea time")
    manager = MemoryManager(stores=[up, down, read_only])
    found = await manager.search("tea", {"max_search_results": 2})
    assert found == [MemoryEntry(content="tea time", store_name="up")]  # the failing store is left out
    assert up.searches[-1][1] == {"max_search_results": 2}
    with pytest.raises(ValueError, match="'nope' not found"):
        await manager.search("tea", {"stores": ["nope"]})
    with pytest.raises(ValueError, match="'ro' is read-only"):
        await manager.add("x", {"stores": ["ro"]})
    with pytest.raises(AggregateMemoryError, match="down") as caught:
        await manager.add("more tea")
    assert up.entries[-1] == "more tea" and [str(error) for error in caught.value.errors] == ["down is down"]


def test_aggregate_memory_error_pickles_with_its_errors() -> None:
    error = pickle.loads(pickle.dumps(AggregateMemoryError("writes failed", [OSError("disk")])))
    assert str(error) == "writes failed" and [str(reason) for reason in error.errors] == ["disk"]


# -- injection ---------------------------------------------------------------------------------------------


def test_memory_is_folded_into_user_turns_only_and_never_into_the_history() -> None:
    store = NoteStore()
    store.entries += ["user <likes> tea & cake", "unrelated"]
    model = ScriptedModel(tool_call("search_memory", {"query": "cake"}), text("done"))
    agent = Agent(model, memory_manager=MemoryManager(stores=[store]))
    agent("tea please")
    first, second = model.calls
    assert first.messages[-1]["content"][-1] == {
        "text": '\n\n<memory>\n<entry source="notes">user &lt;likes&gt; tea &amp; cake</entry>\n</memory>'}
    assert "<memory>" not in json.dumps(second.messages)  # a tool-result turn is no user turn
    assert "<memory>" not in json.dumps(agent.messages)


def test_injection_query_format_trigger_and_cap_are_configurable() -> None:
    store = NoteStore()
    store.entries += ["alpha one", "alpha two", "alpha three"]
    queries: list[int] = []

    def query(context: Any) -> str:
        queries.append(len(context.messages))
        return "alpha"

    def render(context: InjectionFormatContext) -> str:
        return "|".join(entry.content for entry in context.entries)

    model = ScriptedModel(tool_call("search_memory", {"query": "x"}), text("done"))
    config: Any = {"query": query, "format": render, "max_entries": 2, "trigger": "everyTurn"}
    agent = Agent(model, memory_manager=MemoryManager(stores=[store], injection=config))
    agent("hi")
    assert [call.messages[-1]["content"][-1]["text"].strip() for call in model.calls] == ["alpha one|alpha two"] * 2
    assert queries == [1, 3]


@pytest.mark.parametrize("broken", ["query", "format"])
def test_a_raising_injection_callback_skips_the_injection(broken: str, caplog: pytest.LogCaptureFixture) -> None:
    store = NoteStore()
    store.entries.append("tea")

    def boom(context: Any) -> str:
        raise RuntimeError("boom")

    model = ScriptedModel(text("ok"))
    agent = Agent(model, memory_manager=MemoryManager(stores=[store], injection={broken: boom}))  # type: ignore[misc]
    with caplog.at_level(logging.WARNING):
        agent("tea")
    assert model.calls[0].messages[-1]["content"] == [{"text": "tea"}]
    assert f"injection {broken} raised" in caplog.text


# -- extraction --------------------------------------------------------------------------------------------


def test_an_interval_trigger_saves_the_skipped_turns_when_it_fires() -> None:
    store = BatchStore(extraction={"trigger": IntervalTrigger(turns=2)})
    agent = Agent(ScriptedModel(text("one"), text("two"), text("three")),
                  memory_manager=MemoryManager(stores=[store], search_tool_config=False, injection=False))
    agent("first")
    assert store.batches == []
    agent("second")
    [(messages, context)] = store.batches
    assert _texts(messages) == ["first", "one", "second", "two"]
    assert context is not None and context.sequence_numbers == [0, 1, 2, 3]
    agent("third")  # no fire: left for the next one, or for a flush
    assert len(store.batches) == 1
    agent.shutdown()
    assert _texts(store.batches[1][0]) == ["third", "three"]


def test_an_invocation_trigger_saves_every_turn_without_tool_traffic() -> None:
    store = BatchStore(extraction=ExtractionConfig(trigger=InvocationTrigger()))
    model = ScriptedModel(tool_call("search_memory", {"query": "x"}), text("done"), text("again"))
    agent = Agent(model, memory_manager=MemoryManager(stores=[store], injection=False))
    agent("hi")
    agent("more")
    assert [_texts(messages) for messages, _ in store.batches] == [["hi", "done"], ["more", "again"]]
    assert store.batches[0][1] is not None and store.batches[0][1].sequence_numbers == [0, 3]


def test_a_filter_keeping_tool_blocks_passes_them() -> None:
    store = BatchStore(extraction={"trigger": InvocationTrigger(), "filter": MemoryMessageFilter(exclude=[])})
    model = ScriptedModel(tool_call("search_memory", {"query": "x"}), text("done"))
    Agent(model, memory_manager=MemoryManager(stores=[store], injection=False))("hi")
    assert len(store.batches[0][0]) == 4


def test_a_store_with_only_add_gets_facts_from_the_agents_model() -> None:
    store = NoteStore(extraction=True)  # defaults: every 5 turns, a ModelExtractor
    answers = [text(f"answer {index}") for index in range(5)]
    facts = text('Here you go: [{"content": "User likes tea"}, {"content": "  "}, {"content": "Lives in Oslo"}]')
    model = ScriptedModel(*answers, facts)
    agent = Agent(model, memory_manager=MemoryManager(stores=[store], injection=False))
    for index in range(5):
        agent(f"question {index}")
    assert store.entries == ["User likes tea", "Lives in Oslo"]
    extraction_call = model.calls[-1]
    assert "question 4" in extraction_call.messages[0]["content"][0]["text"]
    assert extraction_call.tool_specs == () and "JSON array" in str(extraction_call.system_prompt)


async def test_a_failed_save_is_retried_with_the_next_one() -> None:
    store = BatchStore(extraction={"trigger": InvocationTrigger()}, fail=True)
    agent = Agent(ScriptedModel(text("one"), text("two")),
                  memory_manager=MemoryManager(stores=[store], search_tool_config=False, injection=False))
    await agent.invoke_async("first")
    await agent.memory_manager.flush()
    assert store.batches == []
    store.fail = False
    await agent.invoke_async("second")
    await agent.memory_manager.flush()
    assert [_texts(messages) for messages, _ in store.batches] == [["first", "one", "second", "two"]]


async def test_the_async_path_saves_in_the_background_and_flush_waits() -> None:
    release = asyncio.Event()

    class SlowStore(BatchStore):
        async def add_messages(self, messages: list[Message], context: AddMessagesContext | None = None) -> None:
            await release.wait()
            await super().add_messages(messages, context)

    store = SlowStore(extraction={"trigger": InvocationTrigger()})
    agent = Agent(ScriptedModel(text("one")),
                  memory_manager=MemoryManager(stores=[store], search_tool_config=False, injection=False))
    await agent.invoke_async("first")  # returns while the save waits
    coordinator = agent.memory_manager._coordinator
    assert coordinator.pending == 1 and store.batches == []
    waiting = asyncio.ensure_future(agent.shutdown_async())
    await asyncio.sleep(0)
    assert not waiting.done()
    release.set()
    await waiting
    assert coordinator.pending == 0 and len(store.batches) == 1


async def test_a_custom_trigger_and_extractor() -> None:
    class OnSecondMessage(ExtractionTrigger):
        name = "second-message"

        def attach(self, context: ExtractionTriggerContext) -> None:
            self.fire = context.fire

    class Shouting:
        async def extract(self, messages: list[Message], context: ExtractorContext | None = None
                          ) -> list[ExtractionResult]:
            assert context is not None and context.default_model is not None
            return [ExtractionResult(content=text_.upper()) for text_ in _texts(messages)]

    trigger = OnSecondMessage()
    store = NoteStore(extraction={"trigger": [trigger], "extractor": Shouting()})
    agent = Agent(ScriptedModel(text("one")),
                  memory_manager=MemoryManager(stores=[store], search_tool_config=False, injection=False))
    await agent.invoke_async("hi")
    trigger.fire()
    await agent.memory_manager.flush()
    assert store.entries == ["HI", "ONE"]


async def test_model_extractor_with_its_own_model_and_bad_output() -> None:
    extractor = ModelExtractor(model=ScriptedModel(text("no json here"), text('[{"content": "fact"}]')),
                               system_prompt="Only preferences.")
    assert extractor.system_prompt.startswith("Only preferences.")
    message: Message = {"role": "user", "content": [{"text": "hi"}]}
    assert await extractor.extract([message]) == []
    assert await extractor.extract([message]) == [ExtractionResult(content="fact")]
    assert await extractor.extract([]) == []
    with pytest.raises(ValueError, match="no model"):
        await ModelExtractor().extract([message])


def test_interval_trigger_rejects_what_is_no_positive_integer() -> None:
    for turns in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="positive integer"):
            IntervalTrigger(turns=turns)  # type: ignore[arg-type]


# -- configuration -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("stores", "kwargs", "message"), [
    ([], {}, "at least one store"),
    ([NoteStore(), NoteStore()], {}, "duplicate store name"),
    ([NoteStore(writable=False)], {"add_tool_config": True}, "no writable stores implement add"),
    ([NoteStore(writable=False, extraction=True)], {}, "not writable"),
    ([NoteStore(extraction={"trigger": []})], {}, "no triggers"),
    ([BatchStore(extraction={"extractor": ModelExtractor()})], {}, "writable but has no add"),
    ([NoteStore(), NoteStore("b", writable=False)], {"add_tool_config": {"stores": ["b"]}}, "'b' is not writable"),
    ([NoteStore()], {"add_tool_config": {"stores": ["zz"]}}, "'zz' not found"),
])
def test_a_manager_that_cannot_work_is_refused(stores: list[Any], kwargs: dict[str, Any], message: str) -> None:
    if message == "writable but has no add":
        class MessagesOnly:
            name, writable, description, max_search_results = "m", True, None, None
            extraction = {"extractor": ModelExtractor()}

            async def search(self, query: str, options: Any = None) -> list[MemoryEntry]:
                return []

            async def add_messages(self, messages: Any, context: Any = None) -> None:
                return None

        stores, message = [MessagesOnly()], "has an extractor but no add method"
    with pytest.raises(ValueError, match=message):
        MemoryManager(stores=stores, **kwargs)


def test_a_subclass_inheriting_the_protocol_defaults_implements_neither_sink() -> None:
    class Bare(MemoryStore):
        def __init__(self) -> None:
            self.name, self.description, self.max_search_results = "bare", None, None
            self.writable, self.extraction = True, None

        async def search(self, query: str, options: Any = None) -> list[MemoryEntry]:
            return []

    with pytest.raises(ValueError, match="no add or add_messages"):
        MemoryManager(stores=[Bare()])


def test_agent_takes_a_config_dict_and_refuses_other_values_and_a_duplicate() -> None:
    store = NoteStore()
    agent = Agent(ScriptedModel(text("ok")), memory_manager={"stores": [store], "injection": False})
    assert isinstance(agent.memory_manager, MemoryManager) and agent.tool_names == ["search_memory"]
    assert agent._plugin_registry.plugins == {"strands:memory-manager": agent.memory_manager}
    with pytest.raises(ValueError, match="MemoryManager or MemoryManagerConfig"):
        Agent(ScriptedModel(), memory_manager=[store])
    manager = MemoryManager(stores=[store])
    with pytest.raises(ValueError, match="already registered via plugins"):
        Agent(ScriptedModel(), plugins=[manager], memory_manager=manager)
    assert Agent(ScriptedModel()).memory_manager is None


def test_store_initialize_runs_and_its_tools_join_the_agent() -> None:
    from ray_harness import tool

    @tool
    def forget(entry: str) -> str:
        """Forget an entry."""
        return entry

    class Initialized(NoteStore):
        ready = False

        async def initialize(self) -> None:
            self.ready = True

        def get_tools(self) -> list[Any]:
            return [forget]

    store = Initialized()
    agent = Agent(ScriptedModel(), memory_manager=MemoryManager(stores=[store]))
    assert store.ready and agent.tool_names == ["search_memory", "forget"]


def test_an_agent_with_memory_pickles_and_its_copy_remembers(tmp_path: Any) -> None:
    store = BatchStore(extraction={"trigger": InvocationTrigger()})
    store.entries.append("tea is nice")
    agent = Agent(ScriptedModel(text("one"), text("two"), loop=True), memory_manager=MemoryManager(stores=[store]))
    agent("tea")
    copy = pickle.loads(cloudpickle.dumps(agent))  # as runtime="ray" ships agents to hosts
    copy("more tea")
    copied_store = copy.memory_manager.stores[0]
    assert len(copied_store.batches) == 2 and len(store.batches) == 1  # the copy saves into its own store
    assert "<memory>" in json.dumps(copy.model.calls[-1].messages)


def test_an_agent_without_memory_does_not_import_the_memory_package() -> None:
    code = ("import sys; from ray_harness import Agent; from ray_harness.testing import ScriptedModel; "
            "Agent(ScriptedModel()); print(any(name.startswith('ray_harness.memory') for name in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_plugin_subclass_and_names() -> None:
    assert issubclass(MemoryManager, Plugin) and MemoryManager.name == "strands:memory-manager"
