"""``ray_harness.vended_interventions.hitl.HumanInTheLoop``: Strands' human-in-the-loop intervention."""

from __future__ import annotations

import builtins
import pickle
from typing import Any

import cloudpickle
import pytest

from ray_harness import Agent, tool
from ray_harness.interventions import Confirm, InterventionHandler
from ray_harness.session import FileSessionManager
from ray_harness.testing import ScriptedModel, text, tool_call, tool_calls
from ray_harness.vended_interventions.hitl import ClassifierResult, HumanInTheLoop, LLMClassifierConfig

HITL = "strands:human-in-the-loop"
ran: list[str] = []


@tool
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    ran.append(f"delete {path}")
    return f"deleted {path}"


@tool
def read_file(path: str) -> str:
    """Read the file ``path``."""
    ran.append(f"read {path}")
    return "contents"


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    ran.clear()


def _agent(handler: HumanInTheLoop, *steps: Any, **kwargs: Any) -> Agent:
    steps = steps or (tool_call("delete_file", {"path": "a.txt"}, tool_use_id="t1"), text("done"))
    return Agent(ScriptedModel(*steps), tools=[delete_file, read_file], interventions=[handler], **kwargs)


def _answer(result: Any, response: Any) -> list[dict[str, Any]]:
    return [{"interruptResponse": {"interruptId": i.id, "response": response}} for i in result.interrupts]


def _tool_results(agent: Agent) -> list[str]:
    return [block["toolResult"]["content"][0]["text"] for message in agent.messages for block in message["content"]
            if "toolResult" in block]


PROMPT = 'Approve "delete_file"?\n  Input: {"path": "a.txt"}'


# -- interrupt / resume (the default) --------------------------------------------------------------------------


def test_a_tool_not_allowed_pauses_the_agent_and_an_approval_runs_it() -> None:
    agent = _agent(HumanInTheLoop(allowed_tools=["read_file"]))
    first = agent("delete a.txt")
    assert first.stop_reason == "interrupt"
    assert [(i.name, i.reason) for i in first.interrupts] == [(HITL, PROMPT)]
    assert ran == []
    second = agent(_answer(first, "y"))
    assert second.stop_reason == "end_turn"
    assert ran == ["delete a.txt"]
    assert _tool_results(agent) == ["deleted a.txt"]


@pytest.mark.parametrize("response", ["n", "no", False, "maybe"])
def test_a_refusal_cancels_the_call_with_the_prompt(response: Any) -> None:
    agent = _agent(HumanInTheLoop())
    agent(_answer(agent("delete a.txt"), response))
    assert ran == []
    assert _tool_results(agent) == [f"CONFIRMATION_FAILED: {PROMPT}"]


def test_allowed_tools_run_without_asking_and_a_negation_excludes_one_from_the_wildcard() -> None:
    handler = HumanInTheLoop(allowed_tools=["*", "!delete_file"])
    agent = _agent(handler, tool_calls(("read_file", {"path": "r"}, "t0"), ("delete_file", {"path": "a.txt"}, "t1")),
                   text("done"))
    result = agent("go")
    assert [i.reason for i in result.interrupts] == [PROMPT]
    assert ran == ["read r"]


def test_a_custom_evaluate_decides_what_approves() -> None:
    agent = _agent(HumanInTheLoop(evaluate=lambda response: response == "ship it"))
    agent(_answer(agent("delete a.txt"), "ship it"))
    assert ran == ["delete a.txt"]


# -- trust -----------------------------------------------------------------------------------------------------


def test_a_trust_answer_runs_the_tool_and_stops_asking_for_the_session() -> None:
    agent = _agent(HumanInTheLoop(enable_trust=True), tool_call("delete_file", {"path": "a.txt"}), text("one"),
                   tool_call("delete_file", {"path": "b.txt"}), text("two"))
    agent(_answer(agent("delete a"), "t"))
    assert agent.state.get("hitl:trusted_tools") == ["delete_file"]
    assert agent("delete b").stop_reason == "end_turn"  # no second interrupt
    assert ran == ["delete a.txt", "delete b.txt"]


def test_trust_is_off_by_default_and_a_negated_tool_cannot_be_trusted() -> None:
    for handler in (HumanInTheLoop(), HumanInTheLoop(allowed_tools=["!delete_file"], enable_trust=True)):
        agent = _agent(handler)
        agent(_answer(agent("delete a"), "t"))
        assert ran == []
        assert agent.state.get("hitl:trusted_tools") is None


# -- inline ask --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("answer", "ran_after", "result"), [
    ("y", ["delete a.txt"], "deleted a.txt"),
    ("n", [], f"CONFIRMATION_FAILED: {PROMPT}"),
    (None, [], 'DENIED: Tool "delete_file" denied: approval callback returned no response.'),
])
def test_a_sync_ask_callable_answers_inline(answer: Any, ran_after: list[str], result: str) -> None:
    prompts: list[str] = []

    def ask(prompt: str) -> Any:
        prompts.append(prompt)
        return answer

    agent = _agent(HumanInTheLoop(ask=ask))
    assert agent("delete a.txt").stop_reason == "end_turn"
    assert (prompts, ran, _tool_results(agent)) == ([PROMPT], ran_after, [result])


def test_an_async_ask_callable_is_awaited_and_a_trust_answer_is_remembered() -> None:
    async def ask(prompt: str) -> str:
        return "trust"

    agent = _agent(HumanInTheLoop(ask=ask, enable_trust=True))
    agent("delete a.txt")
    assert ran == ["delete a.txt"]
    assert agent.state.get("hitl:trusted_tools") == ["delete_file"]


def test_an_ask_callable_that_raises_ends_the_run() -> None:
    def ask(prompt: str) -> str:
        raise RuntimeError("ui is down")

    with pytest.raises(RuntimeError, match="ui is down"):
        _agent(HumanInTheLoop(ask=ask))("delete a.txt")
    assert ran == []


@pytest.mark.parametrize(("enable_trust", "options"), [(False, "(y/n)"), (True, "(y/n/t)")])
def test_stdio_asks_on_the_terminal(monkeypatch: pytest.MonkeyPatch, enable_trust: bool, options: str) -> None:
    asked: list[str] = []

    def answer(prompt: str) -> str:
        asked.append(prompt)
        return "  yes "

    monkeypatch.setattr(builtins, "input", answer)
    agent = _agent(HumanInTheLoop(ask="stdio", enable_trust=enable_trust))
    assert agent("delete a.txt").stop_reason == "end_turn"
    assert asked == [f"{PROMPT} {options}: "]
    assert ran == ["delete a.txt"]


# -- classifiers -------------------------------------------------------------------------------------------------


class CountingClassifier:
    def __init__(self, *verdicts: Any) -> None:
        self.verdicts = list(verdicts)
        self.calls = 0

    def __call__(self, event: Any, **kwargs: Any) -> Any:
        self.calls += 1
        verdict = self.verdicts.pop(0)
        if isinstance(verdict, Exception):
            raise verdict
        return verdict


def test_a_classifier_lets_safe_calls_run_and_its_reason_reaches_the_prompt() -> None:
    classifier = CountingClassifier(ClassifierResult(False), ClassifierResult(True, "deletes data"))
    agent = _agent(HumanInTheLoop(allowed_tools=["read_file"], classifier=classifier),
                   tool_calls(("delete_file", {"path": "tmp"}, "t0"), ("delete_file", {"path": "a.txt"}, "t1")),
                   text("done"))
    result = agent("go")
    assert [i.reason for i in result.interrupts] == ['Approve "delete_file" — deletes data?\n  Input: {"path": "a.txt"}']
    assert ran == ["delete tmp"]
    agent(_answer(result, "y"))
    assert classifier.calls == 2  # the resumed call is not classified again
    assert ran == ["delete tmp", "delete a.txt"]


@pytest.mark.parametrize("verdict", [RuntimeError("down"), None, ClassifierResult("no")])  # type: ignore[arg-type]
def test_a_failing_or_malformed_classifier_asks_the_human(verdict: Any) -> None:
    agent = _agent(HumanInTheLoop(classifier=CountingClassifier(verdict)))
    assert agent("go").stop_reason == "interrupt"


def test_allowed_tools_are_settled_before_the_classifier_is_asked() -> None:
    classifier = CountingClassifier()
    agent = _agent(HumanInTheLoop(allowed_tools=["delete_file"], classifier=classifier))
    agent("go")
    assert (classifier.calls, ran) == (0, ["delete a.txt"])


class AskAfterHitl(InterventionHandler):
    name = "second-opinion"

    def before_tool_call(self, event: Any, **kwargs: Any) -> Any:
        return Confirm(prompt="really?")


def test_a_call_that_passed_and_is_rerun_after_another_handlers_interrupt_does_not_pause_again() -> None:
    # Strands marks every classified call "ask" for good, so this resume would stop on a second interrupt.
    classifier = CountingClassifier(ClassifierResult(False), ClassifierResult(False))
    agent = Agent(ScriptedModel(tool_call("delete_file", {"path": "a.txt"}), text("done")), tools=[delete_file],
                  interventions=[HumanInTheLoop(classifier=classifier), AskAfterHitl()])
    first = agent("go")
    assert [i.name for i in first.interrupts] == ["second-opinion"]
    assert agent(_answer(first, "y")).stop_reason == "end_turn"
    assert (classifier.calls, ran) == (2, ["delete a.txt"])


def _risk(requires: bool, reason: str) -> Any:
    return tool_call("_RiskDecision", {"requires_approval": requires, "reason": reason})


def test_the_llm_classifier_asks_its_model_and_only_escalates_risky_calls() -> None:
    judge = ScriptedModel(_risk(False, "temp file"), _risk(True, "irreversible delete"))
    config = LLMClassifierConfig(model=judge, system_prompt="Only deletes outside /tmp are risky.")
    agent = _agent(HumanInTheLoop(classifier=config),
                   tool_calls(("delete_file", {"path": "/tmp/x"}, "t0"), ("delete_file", {"path": "a.txt"}, "t1")),
                   text("done"))
    result = agent("go")
    assert [i.reason for i in result.interrupts] == [
        'Approve "delete_file" — irreversible delete?\n  Input: {"path": "a.txt"}']
    assert ran == ["delete /tmp/x"]
    first = judge.calls[0]
    assert first.system_prompt == "Only deletes outside /tmp are risky."
    assert "Tool: delete_file" in first.last_text and '"path": "/tmp/x"' in first.last_text
    agent(_answer(result, "yes"))
    assert ran == ["delete /tmp/x", "delete a.txt"]
    judge.assert_complete()


def test_classifier_true_uses_the_agents_own_model() -> None:
    agent = _agent(HumanInTheLoop(classifier=True), tool_call("delete_file", {"path": "a.txt"}),
                   _risk(False, "harmless"), text("done"))
    assert agent("go").stop_reason == "end_turn"
    assert ran == ["delete a.txt"]


def test_a_call_a_human_was_asked_about_is_not_reclassified_after_a_restart(tmp_path: Any) -> None:
    # A new process (new handler, state from the session) must not let a refused call through on a new verdict.
    first_agent = _agent(HumanInTheLoop(classifier=CountingClassifier(ClassifierResult(True, "risky"))),
                         session_manager=FileSessionManager("s1", storage_dir=tmp_path))
    result = first_agent("go")
    classifier = CountingClassifier(ClassifierResult(False))
    restarted = Agent(ScriptedModel(text("done")), tools=[delete_file, read_file],
                      interventions=[HumanInTheLoop(classifier=classifier)],
                      session_manager=FileSessionManager("s1", storage_dir=tmp_path))
    restarted(_answer(result, "n"))
    assert (classifier.calls, ran) == (0, [])
    assert _tool_results(restarted)[0].startswith("CONFIRMATION_FAILED:")


# -- shipping to a Ray host ---------------------------------------------------------------------------------------


def test_the_agent_pickles_with_cloudpickle_and_the_copy_interrupts_and_resumes() -> None:
    judge = ScriptedModel(_risk(True, "deletes"))
    agent = _agent(HumanInTheLoop(classifier=LLMClassifierConfig(model=judge), enable_trust=True))
    copy = pickle.loads(cloudpickle.dumps(agent))
    result = copy("go")
    assert [i.reason for i in result.interrupts] == ['Approve "delete_file" — deletes?\n  Input: {"path": "a.txt"}']
    copy = pickle.loads(cloudpickle.dumps(copy))  # paused on one host, resumed on another
    assert copy(_answer(result, "t")).stop_reason == "end_turn"
    assert ran == ["delete a.txt"]
    assert copy.state.get("hitl:trusted_tools") == ["delete_file"]
    assert agent.messages == []  # the original was not touched


def test_a_stdio_handler_pickles_and_its_copy_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builtins, "input", lambda prompt: "y")
    copy = pickle.loads(pickle.dumps(HumanInTheLoop(ask="stdio")))
    _agent(copy)("go")
    assert ran == ["delete a.txt"]


# -- arguments ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"allowed_tools": "read_file"}, ValueError, "allowed_tools must be a list"),
    ({"allowed_tools": ["read_file", 3]}, TypeError, r"allowed_tools\[1\] must be a str"),
    ({"allowed_tools": 3}, TypeError, "allowed_tools must be a list"),
    ({"ask": "stdin"}, ValueError, "ask must be 'stdio'"),
    ({"ask": 3}, TypeError, "ask must be 'stdio'"),
    ({"classifier": "yes"}, TypeError, "classifier must be"),
    ({"evaluate": "y"}, TypeError, "evaluate must be a callable"),
    ({"evaluate_trust": 1}, TypeError, "evaluate_trust must be a callable"),
    ({"enable_trust": "yes"}, TypeError, "enable_trust must be a bool"),
])
def test_wrong_arguments_are_named(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        HumanInTheLoop(**kwargs)


@pytest.mark.parametrize(("kwargs", "match"), [({"model": 3}, "LLMClassifierConfig.model"),
                                               ({"system_prompt": 3}, "LLMClassifierConfig.system_prompt")])
def test_llm_classifier_config_names_a_wrong_field(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(TypeError, match=match):
        LLMClassifierConfig(**kwargs)


def test_a_wildcard_with_a_classifier_warns(caplog: pytest.LogCaptureFixture) -> None:
    HumanInTheLoop(allowed_tools=["*"], classifier=CountingClassifier())
    assert "classifier has no effect" in caplog.text
