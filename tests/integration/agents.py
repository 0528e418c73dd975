"""Agents, tools and scripted models for the runtime tests.

Everything here is importable by module path, so actors build the same agents
with factories (``"tests.integration.agents:calculator"``) or unpickle them by
reference. Scripts that must survive an actor restart use responders that
answer from the conversation, not from a cursor (a restarted actor rebuilds its
model from the factory).
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ray_harness import Agent, ToolContext, tool
from ray_harness.hooks.events import AfterToolCallEvent, BeforeInvocationEvent, BeforeModelCallEvent
from ray_harness.interventions import Deny, InterventionHandler, Proceed
from ray_harness.testing import ModelCall, ScriptedModel, step, text, tool_call, tool_calls

# -- tools -----------------------------------------------------------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(context=True)
def approve_transfer(amount: int, tool_context: ToolContext) -> str:
    """Transfer money after a human approves."""
    answer = tool_context.interrupt("approval", reason=f"transfer {amount}?")
    return f"transferred {amount}" if answer == "yes" else "transfer refused"


@tool(context=True)
async def wait_for_cancel(seconds: float, tool_context: ToolContext) -> str:
    """Wait up to ``seconds``, returning early when the agent is cancelled."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if tool_context.cancel_signal.is_set():
            return "stopped by cancel"
        await asyncio.sleep(0.02)
    return "waited"


class Answer(BaseModel):
    """The final answer."""

    value: int


# -- factories for the shared behaviour suite ----------------------------------------------------------------


def calculator() -> Agent:
    return Agent(ScriptedModel(tool_call("add", {"a": 2, "b": 3}), text("5")), tools=[add], name="calculator",
                 description="Adds numbers exactly", retry_strategy=None)


def _record(name: str) -> Any:
    def callback(event: Any) -> None:
        seen = event.agent.state.get("seen") or []
        event.agent.state.set("seen", [*seen, name])

    return callback


def hooked() -> Agent:
    agent = Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 1}), text("2")), tools=[add], name="hooked",
                  retry_strategy=None)
    agent.add_hook(_record("before_invocation"), BeforeInvocationEvent)
    agent.add_hook(_record("before_model"), BeforeModelCallEvent)
    agent.add_hook(_record("after_tool"), AfterToolCallEvent)
    return agent


class NoAdding(InterventionHandler):
    @property
    def name(self) -> str:
        return "no_adding"

    def before_tool_call(self, event: Any) -> Any:
        return Deny("adding is not allowed") if event.tool_use["name"] == "add" else Proceed()


def guarded() -> Agent:
    return Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 2}), text("denied")), tools=[add], name="guarded",
                 interventions=[NoAdding()], retry_strategy=None)


class BrokenPolicy(InterventionHandler):
    on_error = "throw"

    @property
    def name(self) -> str:
        return "broken"

    def before_model_call(self, event: Any) -> Any:
        raise RuntimeError("policy store is down")


def broken_policy() -> Agent:
    return Agent(ScriptedModel(text("never")), name="broken", interventions=[BrokenPolicy()], retry_strategy=None)


def approvals() -> Agent:
    return Agent(ScriptedModel(tool_call("approve_transfer", {"amount": 10}, tool_use_id="t-1"), text("done")),
                 tools=[approve_transfer], name="approvals", retry_strategy=None)


def looping() -> Agent:
    return Agent(ScriptedModel(tool_call("add", {"a": 1, "b": 1}), loop=True), tools=[add], name="looping",
                 retry_strategy=None)


def checkpointing() -> Agent:
    return Agent(ScriptedModel(tool_call("add", {"a": 4, "b": 4}), text("8")), tools=[add], name="checkpointing",
                 checkpointing=True, retry_strategy=None)


def structured() -> Agent:
    return Agent(ScriptedModel(tool_call("Answer", {"value": 42})), name="structured", retry_strategy=None)


def streaming() -> Agent:
    model = ScriptedModel(tool_call("add", {"a": 2, "b": 2}), step({"text": "four"}, chunk_delay=0.05),
                          chunk_size=1)
    return Agent(model, tools=[add], name="streaming", retry_strategy=None)


# -- cancel --------------------------------------------------------------------------------------------------


def slow_model() -> Agent:
    """Every call answers after 300 s: in a test only a cancel ends it (a test that waits less proves the cancel)."""
    return Agent(ScriptedModel(text("too late", delay=300), loop=True), name="slow_model", retry_strategy=None)


def slow_tool() -> Agent:
    model = ScriptedModel(tool_call("wait_for_cancel", {"seconds": 300}), text("finished"), loop=True)
    return Agent(model, tools=[wait_for_cancel], name="slow_tool", retry_strategy=None)


def quick() -> Agent:
    return Agent(ScriptedModel(text("quick", delay=0.2), loop=True), name="quick", retry_strategy=None)


def sleepy(seconds: float = 0.5) -> Agent:
    return Agent(ScriptedModel(text("rested", delay=seconds), loop=True), name="sleepy", retry_strategy=None)


# -- rendezvous: concurrency proven by state, not by elapsed time ----------------------------------------------


async def meet(directory: str, party: str, count: int, timeout: float = 120) -> str:
    """Mark ``party`` as arrived in ``directory`` (with this process id), then wait until ``count`` parties have.

    Returns ``"met"``, or ``"alone"`` after ``timeout``: parties run one after the other never meet.
    """
    Path(directory, party).write_text(str(os.getpid()), encoding="utf-8")  # noqa: ASYNC240 - tiny marker write
    deadline = time.monotonic() + timeout
    while len(await asyncio.to_thread(os.listdir, directory)) < count:
        if time.monotonic() > deadline:
            return "alone"
        await asyncio.sleep(0.02)
    return "met"


def party_pids(directory: str) -> dict[str, int]:
    """The process id each party of a rendezvous ran in."""
    return {path.name: int(path.read_text(encoding="utf-8")) for path in Path(directory).iterdir()}


@tool
async def rendezvous(directory: str, party: str, count: int) -> str:
    """Wait until ``count`` parties are inside this tool at once (see :func:`meet`)."""
    return await meet(directory, party, count)


def meeting() -> Agent:
    """Answers ``met`` once every party of the prompt ``"<dir>|<party>|<count>"`` has started its call."""

    async def answer(call: ModelCall) -> Any:
        directory, party, count = call.last_text.rsplit("|", 2)
        return text(await meet(directory, party, int(count)))

    return Agent(ScriptedModel(answer, loop=True), name="meeting", retry_strategy=None)


# -- crash and restart ---------------------------------------------------------------------------------------


def _append(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def _batch_responder(call: ModelCall) -> Any:
    last = call.messages[-1]
    results = [block["toolResult"] for block in last["content"] if "toolResult" in block]
    if not results:
        return tool_calls(("record", {"tag": "a"}, "use-a"), ("record", {"tag": "b"}, "use-b"),
                          ("crash_once", {"tag": "c"}, "use-c"))
    texts = [item["content"][0].get("text", "") for item in results]
    return text("results: " + ", ".join(texts))


def crashing(workdir: str) -> Agent:
    """Three tools in one batch; ``crash_once`` blocks the first time so that the test can kill the process."""
    directory = Path(workdir)

    @tool
    def record(tag: str) -> str:
        """Record that this tool ran."""
        _append(directory / "runs.txt", tag)
        return f"recorded {tag}"

    @tool
    def crash_once(tag: str) -> str:
        """Record the run; the first process to run it blocks until the test kills it."""
        _append(directory / "runs.txt", tag)
        pids = directory / "pids.txt"
        earlier = pids.read_text(encoding="utf-8").split() if pids.exists() else []
        _append(pids, str(os.getpid()))
        if not earlier:
            time.sleep(60)  # killed by the test long before this ends
        return f"recorded {tag}"

    return Agent(ScriptedModel(_batch_responder, loop=True), tools=[record, crash_once], name="crashing",
                 retry_strategy=None)


def crashing_factory(workdir: str) -> Any:
    return functools.partial(crashing, workdir)


# -- sandboxes -----------------------------------------------------------------------------------------------


def shell_agent(sandbox: Any) -> Agent:
    model = ScriptedModel(tool_call("sandbox_shell", {"command": "echo from-the-sandbox"}), text("ran"))
    return Agent(model, name="shell_agent", sandbox=sandbox, retry_strategy=None)


def mcp_agent() -> Agent:
    """An agent whose tools come from a real stdio MCP server; the server starts inside the actor process."""
    import sys

    from ray_harness.tools.mcp import MCPClient

    server = str(Path(__file__).resolve().parents[1] / "mcp" / "server_app.py")
    client = MCPClient(command=[sys.executable, server, "stdio"], prefix="srv")

    def answer(call: ModelCall) -> Any:
        result = call.messages[-1]["content"][0]["toolResult"]
        return text(f"server pid {result['content'][0]['text']}")

    return Agent(ScriptedModel(tool_call("srv_pid", {}, tool_use_id="m1"), answer), tools=[client], name="mcp-user",
                 retry_strategy=None)
