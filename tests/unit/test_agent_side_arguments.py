"""``Agent(aux_model=..., storage=..., baggage_attributes=...)`` as Strands' (no Ray here).

``aux_model`` answers the side calls (summary, memory extraction, HITL classifier, goal judge) after the
subsystem's own model and before the agent's; ``storage`` is the default of a ``ContextOffloader`` without its
own; ``baggage_attributes`` is OpenTelemetry baggage current for each invocation and carried to the processes it
calls. Left at their defaults, the three cost an agent nothing: no attribute, no import.
"""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys
from typing import Any

import cloudpickle
import pytest
from opentelemetry import baggage, context, trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from ray_harness import Agent, tool
from ray_harness.agent.conversation_manager import SummarizingConversationManager
from ray_harness.memory import MemoryManager
from ray_harness.models.routing import ModelRouter
from ray_harness.storage import InMemoryStorage, LocalFileStorage
from ray_harness.telemetry.propagation import attached, current_carrier
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.types.content import Message
from ray_harness.types.exceptions import ContextWindowOverflowException, ModelConfigurationError
from ray_harness.vended_interventions.hitl import HumanInTheLoop, LLMClassifierConfig
from ray_harness.vended_plugins.context_offloader import ContextOffloader
from ray_harness.vended_plugins.goal import GoalLoop, JudgeConfig

# -- defaults cost nothing ----------------------------------------------------------------------------------------


def test_an_agent_without_them_keeps_no_attribute_and_follows_its_model() -> None:
    agent = Agent(ScriptedModel(text("hi")))
    assert not {"_aux_model", "_storage", "_baggage_attributes"} & set(agent.__dict__)
    assert agent.aux_model is agent.model and agent.storage is None
    agent.model = ScriptedModel(text("other"))
    assert agent.aux_model is agent.model  # follows the model, not a copy of it taken at construction


def test_an_agent_without_them_imports_nothing_for_them() -> None:
    code = ("import sys\nfrom ray_harness import Agent\nfrom ray_harness.testing import ScriptedModel\n"
            "Agent(ScriptedModel('hi'))('go')\n"
            "print(' '.join(m for m in ('ray_harness.telemetry.baggage', 'ray_harness.models.routing.router',"
            " 'ray_harness.storage') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


# -- aux_model ----------------------------------------------------------------------------------------------------


def _history(turns: int) -> list[Message]:
    messages: list[Message] = []
    for index in range(turns):
        messages.append({"role": "user", "content": [{"text": f"question {index}"}]})
        messages.append({"role": "assistant", "content": [{"text": f"answer {index}"}]})
    return messages


def test_the_summarizing_manager_summarizes_with_the_aux_model() -> None:
    main = ScriptedModel(ContextWindowOverflowException("too long"), text("the answer"))
    aux = ScriptedModel(text("- the user asked questions 0 to 3"))
    agent = Agent(main, aux_model=aux, messages=_history(6),
                  conversation_manager=SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2))
    assert str(agent("go")) == "the answer\n"
    assert "question 0" in aux.calls[0].last_text and len(main.calls) == 2
    assert agent.messages[0]["content"][0]["text"] == "- the user asked questions 0 to 3"
    aux.assert_complete()


def test_a_summarization_agent_comes_before_the_aux_model() -> None:
    helper = Agent(ScriptedModel(text("- summary by the helper")))
    aux = ScriptedModel()
    agent = Agent(ScriptedModel(ContextWindowOverflowException("too long"), text("ok")), aux_model=aux,
                  messages=_history(6),
                  conversation_manager=SummarizingConversationManager(summarization_agent=helper,
                                                                      preserve_recent_messages=2))
    agent("go")
    assert agent.messages[0]["content"][0]["text"] == "- summary by the helper" and aux.calls == []


class _NoteStore:
    name, description, writable, max_search_results = "notes", None, True, None
    extraction: Any = True

    def __init__(self) -> None:
        self.entries: list[str] = []

    async def search(self, query: str, options: Any = None) -> list[Any]:
        return []

    async def add(self, content: str, metadata: Any = None) -> None:
        self.entries.append(content)


def test_memory_extraction_asks_the_aux_model() -> None:
    store = _NoteStore()
    main = ScriptedModel(*[text(f"answer {index}") for index in range(5)])
    aux = ScriptedModel(text('[{"content": "User likes tea"}]'))
    agent = Agent(main, aux_model=aux, memory_manager=MemoryManager(stores=[store], injection=False))
    for index in range(5):  # the default trigger: every 5 turns
        agent(f"question {index}")
    assert store.entries == ["User likes tea"]
    assert "question 4" in aux.calls[0].last_text
    main.assert_complete()


@tool
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    return f"deleted {path}"


def _risk(requires: bool) -> Any:
    return tool_call("_RiskDecision", {"requires_approval": requires, "reason": "checked"})


def test_the_hitl_classifier_asks_the_aux_model_unless_it_has_its_own() -> None:
    aux = ScriptedModel(_risk(False))
    agent = Agent(ScriptedModel(tool_call("delete_file", {"path": "a"}), text("done")), aux_model=aux,
                  tools=[delete_file], interventions=[HumanInTheLoop(classifier=True)])
    assert agent("go").stop_reason == "end_turn"
    assert "Tool: delete_file" in aux.calls[0].last_text
    own = ScriptedModel(_risk(False))
    unused = ScriptedModel()
    agent = Agent(ScriptedModel(tool_call("delete_file", {"path": "a"}), text("done")), aux_model=unused,
                  tools=[delete_file], interventions=[HumanInTheLoop(classifier=LLMClassifierConfig(model=own))])
    agent("go")
    assert len(own.calls) == 1 and unused.calls == []


def test_the_goal_judge_uses_the_aux_model_unless_the_judge_has_its_own() -> None:
    verdict = tool_call("JudgeOutcome", {"passed": True})
    main, aux = ScriptedModel(text("done")), ScriptedModel(verdict)
    Agent(main, aux_model=aux, plugins=[GoalLoop("say done", max_attempts=2)])("go")
    assert len(main.calls) == 1 and "say done" in aux.calls[0].last_text
    judge, unused = ScriptedModel(verdict), ScriptedModel()
    Agent(ScriptedModel(text("done")), aux_model=unused,
          plugins=[GoalLoop("say done", max_attempts=2, judge=JudgeConfig(model=judge))])("go")
    assert len(judge.calls) == 1 and unused.calls == []


def test_aux_model_is_assigned_like_model_and_none_follows_the_model_again() -> None:
    agent = Agent(ScriptedModel(), aux_model=ScriptedModel(model_id="small"))
    assert agent.aux_model.get_config()["model_id"] == "small"
    agent.aux_model = "openai-compatible:http://localhost:1/v1#tiny"  # a ray_harness model string, as model=
    assert agent.aux_model.get_config()["model_id"] == "tiny"
    agent.aux_model = None
    assert agent.aux_model is agent.model


@pytest.mark.parametrize(("value", "error", "match"), [
    (3, TypeError, "aux_model must be a ray_harness Model, a model string or None, got int 3"),
    ("gpt-4o", ModelConfigurationError, "aux_model: malformed model spec 'gpt-4o'"),
    (ModelRouter([ScriptedModel(), ScriptedModel()]), TypeError, "aux_model must not be a ModelRouter"),
])
def test_a_wrong_aux_model_is_named(value: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        Agent(ScriptedModel(), aux_model=value)
    agent = Agent(ScriptedModel())
    with pytest.raises(error, match=match):
        agent.aux_model = value


# -- storage ------------------------------------------------------------------------------------------------------


@tool
def big() -> str:
    """Return a lot."""
    return "word " * 400


def test_a_context_offloader_without_storage_keeps_blocks_in_the_agents() -> None:
    storage = InMemoryStorage()
    offloader = ContextOffloader(max_result_tokens=100, preview_tokens=10)
    agent = Agent(ScriptedModel(tool_call("big", {}), text("done")), tools=[big], plugins=[offloader],
                  storage=storage)
    assert agent.storage is storage
    agent("go")
    keys = asyncio.run(storage.list(""))
    assert keys and all(key.startswith("offloader/") for key in keys)


def test_a_context_offloaders_own_storage_comes_first() -> None:
    shared, own = InMemoryStorage(), InMemoryStorage()
    agent = Agent(ScriptedModel(tool_call("big", {}), text("done")), tools=[big], storage=shared,
                  plugins=[ContextOffloader(storage=own, max_result_tokens=100, preview_tokens=10)])
    agent("go")
    assert asyncio.run(own.list("")) and not asyncio.run(shared.list(""))


@pytest.mark.parametrize(("value", "match"), [
    ("./data", "storage must be a ray_harness.storage Storage instance .* got str './data'"),
    (InMemoryStorage, "got the class InMemoryStorage"),
])
def test_a_wrong_storage_is_named(value: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        Agent(ScriptedModel(), storage=value)


def test_storage_is_read_only_as_in_strands() -> None:
    with pytest.raises(AttributeError):
        Agent(ScriptedModel()).storage = InMemoryStorage()  # type: ignore[misc]


# -- baggage_attributes -------------------------------------------------------------------------------------------


seen: list[dict[str, object]] = []


@tool
def read_baggage() -> str:
    """Record the baggage current in the tool."""
    seen.append(dict(baggage.get_all()))
    carrier = current_carrier() or {}
    seen.append({"carried": carrier.get("baggage", "")})
    return "ok"


@pytest.fixture(autouse=True)
def _clear_seen() -> None:
    seen.clear()


def test_baggage_is_current_during_each_invocation_and_only_then() -> None:
    agent = Agent(ScriptedModel(tool_call("read_baggage", {}), text("done")), tools=[read_baggage],
                  baggage_attributes={"session.id": "s-1", "user.id": "u 7"})
    agent("go")
    assert seen[0] == {"session.id": "s-1", "user.id": "u 7"}
    assert dict(baggage.get_all()) == {}  # detached after the invocation


async def test_baggage_reaches_the_streamed_path_and_adds_to_the_callers() -> None:
    agent = Agent(ScriptedModel(tool_call("read_baggage", {}), text("done")), tools=[read_baggage],
                  baggage_attributes={"session.id": "s-2"})
    token = context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        async for _ in agent.stream_async("go"):
            pass
        assert dict(baggage.get_all()) == {"tenant": "acme"}
    finally:
        context.detach(token)
    assert seen[0] == {"tenant": "acme", "session.id": "s-2"}


def test_baggage_is_carried_to_other_processes_even_with_tracing_off() -> None:
    agent = Agent(ScriptedModel(tool_call("read_baggage", {}), text("done")), tools=[read_baggage],
                  baggage_attributes={"session.id": "s 3"})
    agent("go")
    carried = str(seen[1]["carried"])
    assert carried.startswith("session.id=s")  # W3C-encoded
    with attached({"baggage": carried}):  # what a Ray host does with the call's carrier
        assert baggage.get_baggage("session.id") == "s 3"


def test_baggage_attributes_change_between_invocations() -> None:
    agent = Agent(ScriptedModel(tool_call("read_baggage", {}), text("one"), tool_call("read_baggage", {}),
                                text("two")), tools=[read_baggage])
    assert agent.baggage_attributes == {}
    agent.baggage_attributes["run"] = "1"
    agent("go")
    agent.baggage_attributes = {"run": "2"}
    agent("again")
    assert [entry for entry in seen if "run" in entry] == [{"run": "1"}, {"run": "2"}]


class _BaggageOnStart(SpanProcessor):
    """Records the baggage each span starts under, as a baggage span processor copying it onto spans would."""

    def __init__(self) -> None:
        self.started: list[tuple[str, dict[str, object]]] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.started.append((span.name, dict(baggage.get_all(parent_context))))


def test_span_processors_see_the_baggage_at_the_start_of_every_span(monkeypatch: pytest.MonkeyPatch) -> None:
    processor = _BaggageOnStart()
    provider = TracerProvider()
    provider.add_span_processor(processor)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    agent = Agent(ScriptedModel(tool_call("read_baggage", {}), text("done")), tools=[read_baggage],
                  baggage_attributes={"session.id": "s-5"})
    agent("go")
    names = [name for name, _ in processor.started]
    assert names[0] == "invoke_agent agent" and "execute_tool read_baggage" in names
    assert all(entries == {"session.id": "s-5"} for _, entries in processor.started)
    assert "session.id=s-5" in str(seen[1]["carried"])  # with the trace context: the global W3C propagator
    provider.shutdown()


@pytest.mark.parametrize(("value", "match"), [
    (["a"], "baggage_attributes must be a mapping of strings to strings or None, got builtins.list"),
    ({"a": 1}, "baggage_attributes must map non-empty strings to strings, got 'a': 1"),
    ({"": "x"}, "baggage_attributes must map non-empty strings to strings"),
])
def test_wrong_baggage_attributes_are_named(value: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        Agent(ScriptedModel(), baggage_attributes=value)


# -- shipping to a Ray host ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
def test_the_three_pickle_with_the_agent(tmp_path: Any, dumps: Any) -> None:
    agent = Agent(ScriptedModel(tool_call("read_baggage", {}), text("done")), tools=[read_baggage],
                  aux_model=ScriptedModel(model_id="small"), storage=LocalFileStorage(str(tmp_path)),
                  baggage_attributes={"session.id": "s-4"})
    copy = pickle.loads(dumps(agent))
    assert copy.aux_model.get_config()["model_id"] == "small"
    assert isinstance(copy.storage, LocalFileStorage)
    copy("go")  # the copy sets its baggage where it runs
    assert seen[0] == {"session.id": "s-4"}
