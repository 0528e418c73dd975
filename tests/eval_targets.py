"""Factories used by evaluation tests (importable by name, so they also work inside Ray actors)."""

from __future__ import annotations

import os
import threading
from typing import Any

from ray_harness import Agent, GraphBuilder, tool
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.types.exceptions import ModelThrottledException

USAGE = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}


def _echo(call: Any) -> Any:
    return text(f"echo: {call.last_text}", usage=USAGE)


def echo_agent() -> Agent:
    """Answers ``echo: <prompt>``; prompts containing 'boom' make the model fail."""

    def answer(call: Any) -> Any:
        if "boom" in call.last_text:
            raise RuntimeError(f"model failed on {call.last_text!r}")
        return _echo(call)

    return Agent(ScriptedModel(answer, record_calls=False), name="echo")


@tool
def shout(word: str) -> str:
    """Upper-case a word."""
    return word.upper()


def tool_agent() -> Agent:
    def finish(call: Any) -> Any:
        result = call.messages[-1]["content"][0]["toolResult"]["content"][0]["text"]
        return text(f"tool said {result}", usage=USAGE)

    def start(call: Any) -> Any:
        return tool_call("shout", {"word": call.last_text}, usage=USAGE)

    return Agent(ScriptedModel(start, finish, record_calls=False), tools=[shout], name="shouter")


def chain_graph() -> Any:
    """A 3-node chain: each node echoes what it received."""
    builder = GraphBuilder()
    for name in ("research", "analyze", "write"):
        builder.add_node(Agent(ScriptedModel(lambda call, name=name: text(f"{name} done", usage=USAGE),
                                             record_calls=False), name=name), name)
    builder.add_edge("research", "analyze")
    builder.add_edge("analyze", "write")
    return builder.build(runtime="local")


_THROTTLE_LOCK = threading.Lock()
_THROTTLED: dict[str, int] = {}


def throttled_agent() -> Agent:
    """Every prompt is throttled twice (counted per process), then answered."""

    def answer(call: Any) -> Any:
        with _THROTTLE_LOCK:
            seen = _THROTTLED.get(call.last_text, 0)
            _THROTTLED[call.last_text] = seen + 1
        if seen < 2:
            raise ModelThrottledException("slow down", retry_after=0.01)
        return _echo(call)

    return Agent(ScriptedModel(answer, record_calls=False), retry_strategy=None, name="throttled")


def slow_agent() -> Agent:
    delay = float(os.environ.get("RAY_HARNESS_TEST_DELAY", "0.05"))
    return Agent(ScriptedModel(lambda call: text(f"slow {call.last_text}", usage=USAGE, delay=delay),
                               record_calls=False), name="slow")


def gated_agent() -> Agent:
    """Prompts ``q0``..``q7`` answer at once; later ones wait (cancellably) until the file named by
    ``RAY_HARNESS_TEST_GATE`` exists: a run can be caught in a known state, with no timing involved."""
    import asyncio
    from pathlib import Path

    gate = Path(os.environ["RAY_HARNESS_TEST_GATE"])

    async def answer(call: Any) -> Any:
        if int(call.last_text.lstrip("q")) >= 8:
            while not await asyncio.to_thread(gate.exists):  # noqa: ASYNC110 - another process opens the gate
                await asyncio.sleep(0.02)
        return text(f"gated {call.last_text}", usage=USAGE)

    return Agent(ScriptedModel(answer, record_calls=False), name="gated")


def node_agent() -> Agent:
    """Answers with the Ray node id of the process it runs in (where a pooled row really ran)."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    return Agent(ScriptedModel(lambda call: text(node_id, usage=USAGE), record_calls=False), name="where")


def slow_node_agent() -> Agent:
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    delay = float(os.environ.get("RAY_HARNESS_TEST_DELAY", "0.2"))
    return Agent(ScriptedModel(lambda call: text(node_id, usage=USAGE, delay=delay), record_calls=False),
                 name="where-slow")


def pid_agent() -> Agent:
    """Answers with the id of the process it runs in (where a row really ran)."""
    pid = str(os.getpid())
    return Agent(ScriptedModel(lambda call: text(pid, usage=USAGE), record_calls=False), name="pid")


def long_agent() -> Agent:
    """Spends tokens, then stops at max_tokens: the row fails with MaxTokensReachedException."""
    return Agent(ScriptedModel(lambda call: text("and so on", usage=USAGE, stop_reason="max_tokens"),
                               record_calls=False), name="long")


def stamp_agent() -> Agent:
    """Answers ``<time of the model call> <pid>``; its model is rate-limited by key ``scriptedmodel:stamp``."""
    import time

    def answer(call: Any) -> Any:
        return text(f"{time.time()} {os.getpid()}", usage=USAGE)

    return Agent(ScriptedModel(answer, model_id="stamp", record_calls=False), name="stamp")


def always_throttled_agent() -> Agent:
    """Its model (key ``scriptedmodel:aimd``) throttles prompts starting with 't' and answers the others."""

    def answer(call: Any) -> Any:
        if call.last_text.startswith("t"):
            raise ModelThrottledException("quota exceeded")
        return _echo(call)

    return Agent(ScriptedModel(answer, model_id="aimd", record_calls=False), retry_strategy=None, name="aimd")


def marking_agent() -> Agent:
    """Prompts ``<dir>|<n>``: each model call leaves this process's pid in ``<dir>`` and takes 0.2 s."""

    def answer(call: Any) -> Any:
        folder = call.last_text.split("|", 1)[0]
        with open(os.path.join(folder, str(os.getpid())), "a", encoding="utf-8") as handle:
            handle.write("x")
        return text(f"done {call.last_text}", usage=USAGE, delay=0.2)

    return Agent(ScriptedModel(answer, record_calls=False), name="marking")


def limited_agent() -> Agent:
    """Its model carries ``RateLimit(requests_per_minute=600, key="remote-agent-bucket")``."""
    from ray_harness.models import RateLimit

    model = ScriptedModel(lambda call: text("limited", usage=USAGE), record_calls=False, loop=True)
    model.rate_limit = RateLimit(requests_per_minute=600, key="remote-agent-bucket")
    return Agent(model, name="limited")


def gate_path_agent() -> Agent:
    """Prompts ``<dir>|<n>``: rows with ``n % 8 < 4`` answer at once (leaving ``<dir>/answered-<n>``), the
    others leave ``<dir>/waiting-<n>`` and wait (cancellably) until ``<dir>/gate`` exists. So every batch of 8
    has finished and waiting rows, whatever order Ray Data runs the batches in. The directory travels in the
    prompt, so hosts in any process see it: a run is caught in a known state, with no timing involved."""
    import asyncio
    from pathlib import Path

    async def answer(call: Any) -> Any:
        folder, _, number = call.last_text.rpartition("|")
        if int(number) % 8 >= 4:
            await asyncio.to_thread(Path(folder, f"waiting-{number}").touch)
            while not await asyncio.to_thread(Path(folder, "gate").exists):  # noqa: ASYNC110 - the test opens it
                await asyncio.sleep(0.02)
        else:
            await asyncio.to_thread(Path(folder, f"answered-{number}").touch)
        return text(f"gated {number}", usage=USAGE)

    return Agent(ScriptedModel(answer, record_calls=False), name="gated-path")


def sub_stamp_agent() -> Agent:
    """Answers ``<time of the model call> <pid>``; its model's key is ``scriptedmodel:substamp``."""
    import time

    def answer(call: Any) -> Any:
        return text(f"{time.time()} {os.getpid()}", usage=USAGE)

    return Agent(ScriptedModel(answer, model_id="substamp", record_calls=False, loop=True), name="substamp")


_DELEGATE: dict[str, Any] = {}


@tool
async def ask_sub(question: str) -> str:
    """Ask this process's RemoteAgent (one per process, reused: an actor per row would cost more than the test)."""
    from ray_harness.runtime import RemoteAgent

    remote = _DELEGATE.get("remote")
    if remote is None:
        remote = _DELEGATE["remote"] = RemoteAgent("tests.eval_targets:sub_stamp_agent")
    return str(await remote.invoke_async(question)).strip()


def delegating_target() -> Agent:
    """Asks a ``RemoteAgent`` running :func:`sub_stamp_agent` and answers with its reply: the row's limited
    model calls happen in another actor than the row's host."""

    def finish(call: Any) -> Any:
        return text(call.messages[-1]["content"][0]["toolResult"]["content"][0]["text"], usage=USAGE)

    def start(call: Any) -> Any:
        return tool_call("ask_sub", {"question": call.last_text}, usage=USAGE)

    return Agent(ScriptedModel(start, finish, record_calls=False), tools=[ask_sub], name="delegating")


def approval_agent() -> Agent:
    """Calls ``shout`` after asking a human (``event.interrupt``) on prompts containing 'ask': it stops there."""
    from ray_harness.hooks.events import BeforeToolCallEvent

    def ask(event: BeforeToolCallEvent) -> None:
        event.interrupt("approve", reason={"word": event.tool_use["input"]["word"]})

    def answer(call: Any) -> Any:
        if "ask" in call.last_text:
            return tool_call("shout", {"word": call.last_text}, usage=USAGE)
        return _echo(call)

    agent = Agent(ScriptedModel(answer, loop=True, record_calls=False), tools=[shout], name="approval")
    agent.add_hook(ask, BeforeToolCallEvent)
    return agent
