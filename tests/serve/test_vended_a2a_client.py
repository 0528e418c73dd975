"""``make_a2a_client`` against our A2A server running under uvicorn (no Ray), through the official a2a-sdk client."""

from __future__ import annotations

import threading
import time
from typing import Any

import cloudpickle
import httpx
import pytest
from a2a.client import ClientConfig

from ray_harness import Agent
from ray_harness.serve import A2AAgent
from ray_harness.testing import ScriptedModel, text, tool_call, tool_calls
from ray_harness.vended_tools import make_a2a_client
from ray_harness.vended_tools.a2a_client import DEFAULT_A2A_CLIENT_DESCRIPTION
from tests.serve.conftest import TOKEN, free_port
from tests.serve.targets import build_failing_agent, build_support_agent

pytestmark = pytest.mark.timeout(240)


def results(agent: Agent) -> list[tuple[str, Any]]:
    """Each tool result's status and its one block's text or JSON, in history order."""
    return [(block["toolResult"]["status"], *block["toolResult"]["content"][0].values())
            for message in agent.messages for block in message["content"] if "toolResult" in block]


def run(tool: Any, *calls: tuple[str, dict[str, Any]]) -> list[tuple[str, Any]]:
    agent = Agent(ScriptedModel(tool_calls(*calls), text("done")), tools=[tool])
    agent("go")
    return results(agent)


def test_discover_and_send_message(replicas: Any) -> None:
    url = replicas(build_support_agent).url
    tool = make_a2a_client(allowed_endpoints=[url])
    assert tool.tool_spec["description"] == f"{DEFAULT_A2A_CLIENT_DESCRIPTION} Permitted endpoints: {url}."
    card, answer = run(tool, ("a2a_client", {"operation": "discover", "endpoint": url}),
                       ("a2a_client", {"operation": "send_message", "endpoint": url, "message": "hello"}))
    assert card[0] == "success"
    assert (card[1]["name"], card[1]["version"]) == ("support", "9.9")
    assert {skill["name"] for skill in card[1]["skills"]} == {"refund", "wait_for"}
    assert answer == ("success", {"message": {"role": "assistant", "content": [{"text": "echo: hello"}]}})


async def test_an_endpoint_with_its_own_client_config(replicas: Any) -> None:
    url = replicas(build_support_agent, token=TOKEN).url
    open_url = replicas(build_support_agent).url
    # The caller's client: its connections belong to this test's event loop, where the agent runs too.
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
        tool = make_a2a_client(allowed_endpoints=[(url, ClientConfig(httpx_client=http)), open_url])
        calls = tool_calls(("a2a_client", {"operation": "send_message", "endpoint": url, "message": "hi"}),
                           ("a2a_client", {"operation": "send_message", "endpoint": url + "/", "message": "hi"}),
                           ("a2a_client", {"operation": "discover", "endpoint": url}))
        agent = Agent(ScriptedModel(calls, text("done")), tools=[tool])
        await agent.invoke_async("go")
        authed, refused, card = results(agent)
        assert authed[1]["message"]["content"] == [{"text": "echo: hi"}]
        assert refused[0] == "error" and f"Endpoint '{url}/' is not in the allowed endpoints list" in refused[1]
        assert card[1]["name"] == "support"
        assert not http.is_closed  # the caller's client is never closed
        with pytest.raises(TypeError, match="holds a live httpx_client"):
            cloudpickle.dumps(tool)


def test_what_the_model_gets_wrong_and_remote_failures_are_error_results(replicas: Any) -> None:
    url = replicas(build_support_agent).url
    failing = replicas(build_failing_agent, store=None, name="failing").url
    nowhere = f"http://127.0.0.1:{free_port()}"
    tool = make_a2a_client(allowed_endpoints=[url, failing, nowhere])
    no_message, asks, failed, unreachable, bad_op = run(
        tool, ("a2a_client", {"operation": "send_message", "endpoint": url}),
        ("a2a_client", {"operation": "send_message", "endpoint": url, "message": "refund order Z9"}),
        ("a2a_client", {"operation": "send_message", "endpoint": failing, "message": "anything"}),
        ("a2a_client", {"operation": "discover", "endpoint": nowhere}),
        ("a2a_client", {"operation": "delete", "endpoint": url}))
    assert no_message == ("error", "Error: 'message' is required for operation 'send_message'")
    assert asks == ("error", f"Error: Remote agent at {url!r} did not complete: its task is input required. "
                             "approve_refund: Refund order Z9?")
    assert failed[0] == "error" and "model exploded" in failed[1]
    assert unreachable[0] == "error" and unreachable[1].startswith(
        f"Error: Failed to discover the agent card at {nowhere!r}")
    assert bad_op[0] == "error" and "input.operation" in bad_op[1]


def test_a_cancel_cancels_the_remote_task(replicas: Any) -> None:
    url = replicas(build_support_agent).url
    tool = make_a2a_client(allowed_endpoints=[url])
    agent = Agent(ScriptedModel(tool_call("a2a_client", {"operation": "send_message", "endpoint": url,
                                                         "message": "slow 60"}), text("unused")), tools=[tool])
    outcome: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("result", agent("go")))
    thread.start()
    observer = A2AAgent(url)
    deadline = time.monotonic() + 60
    while not _working_tasks(observer) and time.monotonic() < deadline:  # the remote task is running
        time.sleep(0.05)
    agent.cancel()
    thread.join(120)
    assert outcome["result"].stop_reason == "cancelled"
    ((status, message),) = results(agent)
    assert status == "error" and "canceled" in message


def _working_tasks(observer: A2AAgent) -> bool:
    response = httpx.post(observer.url + "/", json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
                          headers={"A2A-Version": "1.0"}, timeout=30)
    return any(task["status"]["state"] == "TASK_STATE_WORKING" for task in response.json()["result"].get("tasks", []))


def test_the_tool_ships_and_runs_on_the_copy(replicas: Any) -> None:
    url = replicas(build_support_agent).url
    model = ScriptedModel(tool_call("ask", {"operation": "send_message", "endpoint": url, "message": "shipped"}),
                          text("done"))
    copy = cloudpickle.loads(cloudpickle.dumps(Agent(model, tools=[make_a2a_client(name="ask",
                                                                                   allowed_endpoints=[url])])))
    copy("go")
    assert results(copy)[0][1]["message"]["content"] == [{"text": "echo: shipped"}]


def test_bad_factory_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="allowed_endpoints must be a non-empty list"):
        make_a2a_client(allowed_endpoints=[])
    with pytest.raises(ValueError, match=r"allowed_endpoints\[1\] must be an http\(s\) URL"):
        make_a2a_client(allowed_endpoints=["http://a", "ftp://b"])
    with pytest.raises(TypeError, match=r"allowed_endpoints\[0\] must be a URL string or a \(url, "):
        make_a2a_client(allowed_endpoints=[("http://a", {"httpx_client": None})])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="description"):
        make_a2a_client(allowed_endpoints=["http://a"], description="")
    with pytest.raises(ValueError, match=r"client_config must be an a2a\.client\.ClientConfig"):
        A2AAgent("http://a", client_config={"streaming": True})
    with pytest.raises(ValueError, match="auth_token or a client_config with an httpx_client"):
        A2AAgent("http://a", auth_token="t", client_config=ClientConfig(httpx_client=httpx.AsyncClient()))
