"""A driver process for test_remote_as_tool.py (no test_ prefix): a parent Agent whose sub-agent is a RemoteAgent.

``interrupt``: the parent (with a FileSessionManager) calls the remote sub-agent, which pauses on a
confirmation; the driver exits. ``resume``: a new driver builds the parent again from code and the
session, reaches the sub-agent (``attach``: the named detached actor through ``RemoteAgent.get``;
``new``: a new actor built from the same factory) and answers.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

from ray_harness import Agent
from ray_harness.session import FileSessionManager
from ray_harness.testing import ModelCall, ScriptedModel, Step, text, tool_call, tool_calls
from tests.session._as_tool_process import confirm_wipe, echo_last_result, ops_tools


def _ops_answer(call: ModelCall) -> Step:
    """Answers from the conversation (not a cursor), so any actor built from the factory continues it."""
    results = [block["toolResult"] for block in call.messages[-1]["content"] if "toolResult" in block]
    if not results:
        return tool_calls(("check", {"target": "db"}, "c-1"), ("wipe", {"target": "db"}, "c-2"))
    return text("ops: " + " | ".join(result["content"][0]["text"].strip() for result in results))


def ops(log: str) -> Agent:
    return Agent(ScriptedModel(_ops_answer, loop=True), tools=ops_tools(Path(log)), hooks=[confirm_wipe],
                 name="ops", retry_strategy=None)


def factory(log: str) -> Any:
    return functools.partial(ops, log)


def parent(storage: str, remote: Any, preserve: bool, phase: str) -> Agent:
    """The parent; its model has the steps of ``phase``: ``"first"``, ``"resume"`` or ``"all"``."""
    steps = [tool_call("ops", {"input": "clean the db"}, tool_use_id="p-1"), echo_last_result("boss")]
    steps = {"first": steps[:1], "resume": steps[1:], "all": steps}[phase]
    return Agent(ScriptedModel(*steps), tools=[remote.as_tool(preserve_context=preserve)], name="boss",
                 session_manager=FileSessionManager("remote-astool", storage_dir=storage))


def main() -> None:
    from ray_harness import runtime
    from ray_harness.runtime import RemoteAgent

    mode, storage, log, actor, how, preserve = sys.argv[1:7]
    runtime.init(namespace="ray_harness_tests")
    if mode == "interrupt":
        remote = RemoteAgent(factory(log), name=actor, detached=how == "detached")
        result = parent(storage, remote, preserve == "1", "first")("start")
        print(json.dumps({"stop_reason": result.stop_reason, "interrupts": [i.to_dict() for i in result.interrupts]}))
        return
    remote = RemoteAgent.get(actor) if how == "attach" else RemoteAgent(factory(log), name=actor)
    boss = parent(storage, remote, preserve == "1", "resume")
    result = boss([{"interruptResponse": answer} for answer in json.loads(sys.argv[7])])
    boss.model.assert_complete()  # type: ignore[attr-defined]
    print(json.dumps({"stop_reason": result.stop_reason, "text": str(result), "messages": boss.messages,
                      "child_messages": remote.messages}))
    remote.shutdown()


if __name__ == "__main__":
    main()
