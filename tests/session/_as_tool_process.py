"""Agent-as-tool scenarios, run in separate processes by test_as_tool_processes.py (no test_ prefix).

``build(scenario, resume=...)`` makes the parent and its sub-agents from code, as a new process would.
With ``resume=True`` each model only has the steps left after the first (interrupted) invocation, so an
extra model call fails the run (``ScriptedModel`` raises on unscripted calls; ``assert_complete`` on
unused ones). The sub-agents have no session manager of their own: their interrupted turn travels in the
parent's interrupt state.

Scenarios: ``basic`` (the child checks, then asks before wiping), ``preserve`` (the same with
``preserve_context=True``), ``delegate`` (``delegate=True``: the child's answer ends the parent's turn),
``nested`` (parent → manager → ops: the grandchild's interrupt crosses two levels), ``pair`` (two calls of
two children in one parent batch, each interrupted).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ray_harness import Agent, ToolContext, tool
from ray_harness.hooks.events import BeforeToolCallEvent
from ray_harness.session import FileSessionManager
from ray_harness.testing import ModelCall, ScriptedModel, Step, text, tool_call, tool_calls

SESSION_ID = "astool"


def _log(path: Path, line: str) -> None:
    with path.open("a") as stream:
        stream.write(line + "\n")


def ops_tools(log: Path, who: str = "ops") -> list[Any]:
    @tool(context=True)
    def check(target: str, tool_context: ToolContext) -> str:
        """Check a target."""
        _log(log, f"{who} check {target}")
        tool_context.agent.state.set("checked", target)
        return f"{target} healthy"

    @tool(context=True)
    def wipe(target: str, tool_context: ToolContext) -> str:
        """Wipe a target."""
        _log(log, f"{who} wipe {target}")
        return f"wiped {target} (checked: {tool_context.agent.state.get('checked')})"

    return [check, wipe]


def confirm_wipe(event: BeforeToolCallEvent) -> None:
    if event.tool_use["name"] == "wipe":
        answer = event.interrupt("confirm-wipe", reason={"target": event.tool_use["input"]["target"]})
        if answer != "yes":
            event.cancel_tool = f"wipe refused: {answer}"


def echo_last_result(prefix: str) -> Any:
    def respond(call: ModelCall) -> Step:
        texts = [block["toolResult"]["content"][0]["text"].strip() for block in call.messages[-1]["content"]
                 if "toolResult" in block]
        return text(f"{prefix}: {' | '.join(texts)}")

    return respond


def _model(steps: list[Any], resume: bool, used_first: int) -> ScriptedModel:
    return ScriptedModel(*(steps[used_first:] if resume else steps))


def _ops(name: str, resume: bool, log: Path, target: str = "db", **kwargs: Any) -> Agent:
    steps = [tool_calls(("check", {"target": target}, f"{name}-c1"), ("wipe", {"target": target}, f"{name}-c2")),
             echo_last_result(name)]
    return Agent(_model(steps, resume, 1), tools=ops_tools(log, name), hooks=[confirm_wipe], name=name,
                 state={"role": name}, **kwargs)


def build(scenario: str, *, resume: bool, log: Path, sessions: Any = None) -> tuple[Agent, dict[str, Agent]]:
    """The parent agent and its sub-agents by name."""
    children: dict[str, Agent] = {}
    if scenario in ("basic", "preserve", "delegate"):
        ops = children["ops"] = _ops("ops", resume, log, messages=[{"role": "user", "content": [{"text": "hi"}]},
                                                                   {"role": "assistant", "content": [{"text": "ready"}]}])
        tool_obj = ops.as_tool(preserve_context=scenario == "preserve", delegate=scenario == "delegate")
        steps: list[Any] = [tool_call("ops", {"input": "clean the db"}, tool_use_id="p-1")]
        if scenario != "delegate":
            steps.append(echo_last_result("boss"))
        parent = Agent(_model(steps, resume, 1), tools=[tool_obj], name="boss", session_manager=sessions)
    elif scenario == "nested":
        ops = children["ops"] = _ops("ops", resume, log)
        manager_steps = [tool_call("ops", {"input": "clean"}, tool_use_id="m-1"), echo_last_result("manager")]
        manager = children["manager"] = Agent(_model(manager_steps, resume, 1), tools=[ops], name="manager")
        parent = Agent(_model([tool_call("manager", {"input": "tidy up"}, tool_use_id="p-1"),
                               echo_last_result("boss")], resume, 1),
                       tools=[manager], name="boss", session_manager=sessions)
    elif scenario == "pair":
        first = children["ops"] = _ops("ops", resume, log, target="db")
        second = children["ops2"] = _ops("ops2", resume, log, target="cache")
        parent = Agent(_model([tool_calls(("ops", {"input": "db"}, "p-1"), ("ops2", {"input": "cache"}, "p-2")),
                               echo_last_result("boss")], resume, 1),
                       tools=[first, second], name="boss", session_manager=sessions)
    else:
        raise ValueError(f"unknown scenario {scenario}")
    return parent, children


def snapshot(parent: Agent, children: dict[str, Agent], result: Any) -> dict[str, Any]:
    return {
        "stop_reason": result.stop_reason,
        "text": str(result),
        "interrupts": [item.to_dict() for item in result.interrupts],
        "messages": parent.messages,
        "children": {name: child.messages for name, child in children.items()},
        "child_states": {name: child.state.get() for name, child in children.items()},
        "model_calls": {"boss": len(parent.model.calls),  # type: ignore[attr-defined]
                        **{name: len(child.model.calls) for name, child in children.items()}},  # type: ignore[attr-defined]
    }


def main() -> None:
    mode, scenario, storage, log = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
    sessions = FileSessionManager(SESSION_ID, storage_dir=storage)
    parent, children = build(scenario, resume=mode == "resume", log=log, sessions=sessions)
    if mode == "interrupt":
        result = parent("start")
    elif mode == "resume":
        try:
            result = parent([{"interruptResponse": answer} for answer in json.loads(sys.argv[5])])
        except KeyError as error:
            print(json.dumps({"error": f"KeyError: {error}"}))
            return
        for agent in (parent, *children.values()):
            agent.model.assert_complete()  # type: ignore[attr-defined]
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(snapshot(parent, children, result)))


if __name__ == "__main__":
    main()
