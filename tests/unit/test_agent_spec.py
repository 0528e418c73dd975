"""What crosses into an actor: an agent or factory that does not pickle is named, with the part that does not."""

from __future__ import annotations

import threading

import pytest

from ray_harness import Agent, tool
from ray_harness.runtime._spec import agent_spec
from ray_harness.testing import ScriptedModel, text


class _Ledger:
    """A tool object holding a lock, as a database or client wrapper would."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @tool
    def record(self, entry: str) -> str:
        """Record an entry.

        Args:
            entry: What to record.
        """
        return entry


def test_an_agent_whose_tool_does_not_pickle_names_the_agent_and_the_tool() -> None:
    agent = Agent(ScriptedModel(text("ok")), name="bookkeeper", tools=[_Ledger().record])

    with pytest.raises(TypeError) as raised:
        agent_spec(agent)

    message = str(raised.value)
    assert "agent 'bookkeeper'" in message
    assert "tool 'record'" in message and "lock" in message
    assert "factory" in message  # the way out


def test_an_agent_attribute_that_does_not_pickle_is_named() -> None:
    agent = Agent(ScriptedModel(text("ok")), name="holder")
    agent.state.set("n", 1)
    agent.connection = threading.Lock()  # type: ignore[attr-defined]

    with pytest.raises(TypeError, match=r"agent 'holder' .*connection \(lock"):
        agent_spec(agent)


def test_a_factory_closing_over_a_lock_names_the_factory() -> None:
    guard = threading.Lock()

    def build_guarded() -> Agent:
        with guard:
            return Agent(ScriptedModel(text("ok")))

    with pytest.raises(TypeError, match=r"factory '.*build_guarded'.*cannot be shipped"):
        agent_spec(build_guarded)


def test_a_picklable_agent_still_becomes_a_spec() -> None:
    spec = agent_spec(Agent(ScriptedModel(text("ok")), name="fine"))

    assert spec.kind == "pickled" and spec.label == "fine" and spec.build().name == "fine"


def made_here() -> Agent:
    return Agent(ScriptedModel(text("row")), name="row", retry_strategy=None)


def test_a_factory_path_is_imported_once_per_process_and_builds_a_new_agent_each_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ray_harness.runtime import _spec

    looked_up: list[str] = []
    load = _spec.load_factory
    monkeypatch.setattr(_spec, "load_factory", lambda path: (looked_up.append(path), load(path))[1])
    _spec._loaded_factory.cache_clear()
    spec = agent_spec(f"{__name__}:made_here")
    first, second = spec.build(), spec.build()
    assert first is not second and first.name == second.name == "row"
    assert looked_up == [f"{__name__}:made_here"]
    _spec._loaded_factory.cache_clear()
