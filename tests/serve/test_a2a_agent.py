"""``A2AAgent`` against our server and against a minimal server built only from a2a-sdk's own classes."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from ray_harness import Agent
from ray_harness.multiagent import GraphBuilder, Status
from ray_harness.serve import A2AAgent, A2AError
from ray_harness.testing import ScriptedModel, text, tool_call
from tests.serve.a2a_client import answers
from tests.serve.conftest import TOKEN, free_port, serve_asgi
from tests.serve.targets import build_failing_agent, build_support_agent

pytestmark = pytest.mark.timeout(240)


def test_invoke_stream_and_the_agent_surface(support_url: str) -> None:
    remote = A2AAgent(support_url, auth_token=TOKEN)
    assert remote.name == "support"
    result = remote("hello")
    assert (result.stop_reason, result.text) == ("end_turn", "echo: hello")

    async def stream() -> list[dict[str, Any]]:
        return [event async for event in remote.stream_async("and streamed")]

    events = asyncio.run(stream())
    deltas = "".join(event["data"] for event in events if event["type"] == "text_delta")
    assert deltas == "echo: and streamed"
    assert events[-1]["result"].text == "echo: and streamed"
    assert [m["role"] for m in remote.messages] == ["user", "assistant", "user", "assistant"]
    with pytest.raises(A2AError, match="HTTP 404"):
        _ = A2AAgent(support_url + "/nope").card
    with pytest.raises(A2AError, match="401"):  # the card is public, the call is not
        A2AAgent(support_url)("no token")


def test_remote_interrupt_is_answered_the_usual_way(support_url: str) -> None:
    remote = A2AAgent(support_url, auth_token=TOKEN)
    paused = remote("refund order Z9")
    assert paused.stop_reason == "interrupt"
    (item,) = paused.interrupts
    assert item.id.startswith("v1:a2a:") and item.id.count(":") >= 3
    assert (item.name, item.reason) == ("approve_refund", "Refund order Z9?")
    task_id = remote._interrupt_state.context["task_id"]
    assert item.id.startswith(f"v1:a2a:{task_id}:v1:before_tool_call:")
    with pytest.raises(TypeError):
        remote("a new question while interrupted")
    done = remote(answers(paused))
    assert (done.stop_reason, done.text) == ("end_turn", "Done: refunded Z9.")


def test_as_a_tool_with_a_remote_interrupt(support_url: str) -> None:
    def parent_model(call: Any) -> Any:
        results = [b["toolResult"] for b in call.messages[-1]["content"] if "toolResult" in b]
        if results:
            return text(f"the remote said: {results[0]['content'][0]['text']}")
        return tool_call("support", {"input": "refund order P4"})

    parent = Agent(ScriptedModel(parent_model, loop=True), tools=[A2AAgent(support_url, auth_token=TOKEN)])
    assert parent.tool_names == ["support"]
    assert parent.tool_registry.get("support").tool_spec["inputSchema"]["json"]["required"] == ["input"]
    paused = parent("please refund P4")
    assert paused.stop_reason == "interrupt"
    assert paused.interrupts[0].id.startswith("v1:a2a:")
    assert paused.interrupts[0].reason == "Refund order P4?"
    done = parent(answers(paused))
    assert done.text == "the remote said: Done: refunded P4."


def test_as_a_graph_node_with_a_remote_interrupt(support_url: str) -> None:
    builder = GraphBuilder()
    builder.add_node(A2AAgent(support_url, auth_token=TOKEN), "remote")
    builder.add_node(Agent(ScriptedModel(lambda call: text("summarized"), loop=True), name="summary"), "summary")
    builder.add_edge("remote", "summary")
    graph = builder.build(runtime="local")
    simple = graph("hello graph")
    assert simple.status == Status.COMPLETED
    assert simple.results["remote"].result.text == "echo: hello graph"
    graph = builder.build(runtime="local")
    paused = graph("refund order G1")
    assert paused.status == Status.INTERRUPTED
    done = graph(answers(paused))
    assert done.status == Status.COMPLETED
    assert done.results["remote"].result.text == "Done: refunded G1."


def test_it_pickles_with_its_card_and_a_fresh_lock(replicas: Any) -> None:
    from ray import cloudpickle

    replica = replicas(build_support_agent, token=TOKEN)
    remote = A2AAgent(replica.url, auth_token=TOKEN)
    assert remote("before").text == "echo: before"
    copy = cloudpickle.loads(cloudpickle.dumps(remote))  # how a Graph/Swarm or a RemoteAgent ships it
    assert (copy.context_id, copy.messages, copy._card) == (remote.context_id, remote.messages, remote._card)
    assert copy._busy is not remote._busy and not copy._busy.locked()
    assert copy("after").text == "echo: after"
    unfetched = cloudpickle.loads(cloudpickle.dumps(A2AAgent(replica.url)))
    assert unfetched.name == "support"  # fetched on first use, as in the original


def test_cancel_and_remote_failure(replicas: Any) -> None:
    remote = A2AAgent(replicas(build_support_agent).url)
    outcome: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("result", remote("slow 60")))
    thread.start()
    while not remote._busy.locked():
        time.sleep(0.02)
    time.sleep(0.5)  # let the task reach the server; cancel before that is also fine (it is re-sent)
    remote.cancel()
    thread.join(120)
    assert outcome["result"].stop_reason == "cancelled"
    failing = A2AAgent(replicas(build_failing_agent, store=None, name="failing").url)
    with pytest.raises(A2AError, match="model exploded"):
        failing("anything")


class _EchoExecutor(AgentExecutor):
    """An a2a-sdk executor written only with the SDK: asks once in prose, then echoes."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        text_in = "".join(part.text for part in (context.message or Message()).parts)
        if context.current_task is None:
            await event_queue.enqueue_event(Task(id=task_id, context_id=context_id,
                                                 status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)))
        updater = TaskUpdater(event_queue, task_id, context_id)
        if text_in == "ask me":
            await updater.requires_input(updater.new_agent_message([Part(text="Which colour?")]))
            return
        await updater.add_artifact([Part(text=f"sdk says {text_in}")], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        return None


@pytest.fixture
def sdk_server() -> Iterator[str]:
    card = AgentCard(name="sdk echo", description="Echo built from a2a-sdk", version="1",
                     supported_interfaces=[AgentInterface(url="http://placeholder/", protocol_binding="JSONRPC",
                                                          protocol_version="1.0")],
                     capabilities=AgentCapabilities(streaming=True), default_input_modes=["text/plain"],
                     default_output_modes=["text/plain"],
                     skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])])
    handler = DefaultRequestHandler(agent_executor=_EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    url, server, thread = serve_asgi(app)
    card.supported_interfaces[0].url = url + "/"
    yield url
    server.should_exit = True
    thread.join(20)


def test_against_a_minimal_a2a_sdk_server(sdk_server: str) -> None:
    remote = A2AAgent(sdk_server)
    assert remote.name == "sdk echo"
    assert remote("ping").text == "sdk says ping"
    paused = remote("ask me")
    assert paused.stop_reason == "interrupt"
    assert (paused.interrupts[0].name, paused.interrupts[0].reason) == ("input_required", "Which colour?")
    done = remote(answers(paused, "blue"))
    assert done.text == "sdk says blue"
    parent = Agent(ScriptedModel(tool_call("sdk_echo", {"input": "via tool"}), text("ok")), tools=[remote])
    parent("go")
    assert parent.messages[2]["content"][0]["toolResult"]["content"][0]["text"] == "sdk says via tool"
    assert parent.tool_registry.get("sdk_echo").get_display_properties() == {"Name": "sdk_echo", "Type": "agent",
                                                                               "Agent": "sdk echo"}


def test_as_a_swarm_member_it_answers(replicas: Any) -> None:
    from ray_harness.multiagent import Swarm
    from tests.serve.targets import build_plain_agent

    swarm = Swarm([A2AAgent(replicas(build_plain_agent, store=None, name="plain").url)], runtime="local")
    result = swarm("hello swarm")
    assert result.status == Status.COMPLETED
    assert "User Request: hello swarm" in str(result.results["plain"].result)


UNSENDABLE = [
    (123, "type int"),
    (b"bytes", "type bytes"),
    ({"text": "a bare block"}, "type dict"),
    ({"checkpointResume": {"checkpoint": {}}}, "type dict"),
    (["a bare string"], "block 'a bare string'"),
    ([{"text": "hi"}, {"image": {"format": "png", "source": {"bytes": b"x"}}}], "block {'image'"),
    ([{"role": "user", "content": [{"text": "hi"}]}], "block {'role'"),
    (None, "nothing to send in the prompt None"),  # no local history to continue: an empty A2A message
    ("", "nothing to send in the prompt ''"),
    ([], "nothing to send in the prompt []"),
]


def test_a_prompt_it_cannot_send_is_refused_before_any_call(support_url: str) -> None:
    nowhere = A2AAgent(f"http://127.0.0.1:{free_port()}")  # nothing listens: any call would be an A2AError
    for prompt, named in UNSENDABLE:
        with pytest.raises(ValueError, match=re.escape(named)):
            nowhere(prompt)
    assert (nowhere.messages, nowhere._busy.locked()) == ([], False)
    remote = A2AAgent(support_url, auth_token=TOKEN)
    assert remote([{"text": "two"}, {"text": "blocks"}]).text == "echo: two blocks"
    with pytest.raises(ValueError, match="type int"):
        remote(7)
    assert remote("still usable").text == "echo: still usable"


def test_an_unreachable_or_broken_card_is_an_a2a_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    nowhere = A2AAgent(url)
    with pytest.raises(A2AError, match=re.escape(f"{url}/.well-known/agent-card.json")) as caught:
        _ = nowhere.card
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    with pytest.raises(A2AError, match=re.escape(url)):
        nowhere("hello")
    with pytest.raises(A2AError, match=re.escape(url)):
        nowhere.as_tool()  # named from the card
    assert not nowhere._busy.locked()

    async def not_a_card(request: Any) -> PlainTextResponse:
        return PlainTextResponse("not json")

    broken, server, thread = serve_asgi(Starlette(routes=[Route("/.well-known/agent-card.json", not_a_card)]))
    try:
        with pytest.raises(A2AError, match=re.escape(broken) + ".*not an A2A agent card"):
            _ = A2AAgent(broken).card
    finally:
        server.should_exit = True
        thread.join(20)
