"""Serve a support agent over A2A on Ray Serve; a human approves refunds from another process.

    python examples/serve_support_agent.py demo                 # all three steps below, offline
    python examples/serve_support_agent.py serve --port 8000    # 2 replicas, tasks in a file store
    python examples/serve_support_agent.py ask http://127.0.0.1:8000 "refund order 42"
    python examples/serve_support_agent.py approve http://127.0.0.1:8000 <task id> yes

``demo`` prints only its own lines: the server's output goes to a file in its work directory (shown if the
server fails; removed with the directory otherwise), and Ray Serve logs to Ray's log files only
(``RAY_SERVE_LOG_TO_STDERR=0``: ``logs/serve/`` of the Ray session). ``ask`` and ``approve`` use only the
official a2a-sdk client. The approval may reach either replica (or a replica started after the one that asked
was killed): the interrupted agent waits in the task store.
The model is scripted unless RAY_HARNESS_MODEL names a real one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from ray_harness import Agent, tool
from ray_harness.interventions import Confirm, InterventionHandler, Proceed
from ray_harness.testing import ScriptedModel, text, tool_call


@tool
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order id.
    """
    return f"refunded order {order}"


class ApproveRefunds(InterventionHandler):
    name = "approve_refund"

    def before_tool_call(self, event: Any) -> Any:
        if event.tool_use["name"] == "refund":
            return Confirm(f"Refund order {event.tool_use['input']['order']}?")
        return Proceed()


def _offline(call: Any) -> Any:
    last = call.messages[-1]["content"]
    results = [block["toolResult"] for block in last if "toolResult" in block]
    if results:
        return text(f"Done: {results[0]['content'][0]['text']}.")
    words = next((block["text"] for block in last if "text" in block), "").split()
    return tool_call("refund", {"order": words[-1]}) if "refund" in words else text("How can I help?")


def build_support_agent() -> Agent:
    model: Any = os.environ.get("RAY_HARNESS_MODEL") or ScriptedModel(_offline, loop=True)
    return Agent(model, tools=[refund], interventions=[ApproveRefunds()], name="support",
                 system_prompt="Support agent of the example shop: refunds need a human's approval.")


def serve_forever(port: int, store: str) -> None:
    from ray_harness import serve

    app = serve.app(build_support_agent, name="support", num_replicas=2, task_store=store)
    handle = serve.run(app, host="127.0.0.1", port=port)
    print(f"serving at {handle.url}", flush=True)
    serve.serve_until_stopped(handle)


async def _client(http: Any, url: str) -> Any:
    """An a2a-sdk client for the agent at ``url``, built from its card."""
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

    card = await A2ACardResolver(http, url).get_agent_card()
    return ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)


async def _send(url: str, parts: list[Any], task_id: str = "") -> Any:
    import httpx
    from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest

    async with httpx.AsyncClient(timeout=120) as http:
        client = await _client(http, url)
        message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, task_id=task_id, parts=parts)
        async for event in client.send_message(SendMessageRequest(message=message)):
            return event.task


def ask(url: str, question: str) -> None:
    from a2a.types.a2a_pb2 import Part, TaskState
    from google.protobuf.json_format import MessageToDict

    task = asyncio.run(_send(url, [Part(text=question)]))
    print(f"task {task.id}: {TaskState.Name(task.status.state)}")
    for part in task.status.message.parts:
        print(" ", part.text or MessageToDict(part.data))


def approve(url: str, task_id: str, answer: str) -> None:
    from a2a.types.a2a_pb2 import Part, TaskState
    from google.protobuf.json_format import MessageToDict, ParseDict
    from google.protobuf.struct_pb2 import Value

    async def run() -> Any:
        import httpx
        from a2a.types.a2a_pb2 import GetTaskRequest

        async with httpx.AsyncClient(timeout=60) as http:
            task = await (await _client(http, url)).get_task(GetTaskRequest(id=task_id))
        pending = [item["interruptId"] for part in task.status.message.parts if part.HasField("data")
                   for item in MessageToDict(part.data).get("interrupts", [])]
        data = {"interruptResponses": [{"interruptId": key, "response": answer} for key in pending]}
        return await _send(url, [Part(data=ParseDict(data, Value()))], task_id=task_id)

    task = asyncio.run(run())
    print(f"task {task.id}: {TaskState.Name(task.status.state)}: {task.status.message.parts[0].text}")


def _wait_for_server(server: subprocess.Popen[bytes], log: Path) -> str:
    """The URL the server prints once its app is running (both replicas), read from its log file."""
    import time

    while True:
        lines = log.read_text(errors="replace").splitlines()
        url = next((line.split()[-1] for line in lines if line.startswith("serving at ")), None)
        if url:
            return url
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}; its log:\n" + "\n".join(lines[-40:]))
        time.sleep(0.2)


def demo() -> None:
    port = 18000 + os.getpid() % 1000
    work = Path(tempfile.mkdtemp(prefix="rh_support_"))
    log = work / "server.log"
    # The server's own output (Ray's start-up lines) goes to a file; Ray Serve's components log to Ray's log
    # files only (logs/serve/ of the Ray session), not to the terminal. A loaded machine can take long to start
    # Ray's raylet: allow it more than the default 30 s.
    env = {**os.environ, "RAY_raylet_start_wait_time_s": "180", "RAY_SERVE_LOG_TO_STDERR": "0"}
    with log.open("wb") as sink:
        server = subprocess.Popen([sys.executable, __file__, "serve", "--port", str(port),
                                   "--store", f"file://{work / 'tasks'}"], env=env, stdout=sink, stderr=sink)
    ok = False
    try:
        url = _wait_for_server(server, log)
        print(f"serving at {url} (2 replicas, tasks in {work / 'tasks'})", flush=True)
        out = subprocess.run([sys.executable, __file__, "ask", url, "please refund order 42"], check=True,
                             capture_output=True, text=True).stdout
        print(out, end="", flush=True)
        task_id = out.split()[1].rstrip(":")
        subprocess.run([sys.executable, __file__, "approve", url, task_id, "yes"], check=True)  # a second process
        ok = True
    finally:
        server.terminate()  # SIGTERM: the server deletes its app, stops Ray Serve and its Ray
        ok = server.wait(120) == 0 and ok
        if ok:
            shutil.rmtree(work, ignore_errors=True)
            print("server stopped", flush=True)
        else:
            print(f"the server's log: {log}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a real model for the served agent, e.g. 'openai-compatible:<url>#<id>' "
                                        "(default: the offline scripted model)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo")
    serve = commands.add_parser("serve")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--store", default=f"file://{tempfile.gettempdir()}/rh_support_tasks")
    ask_cmd = commands.add_parser("ask")
    ask_cmd.add_argument("url")
    ask_cmd.add_argument("question")
    approve_cmd = commands.add_parser("approve")
    approve_cmd.add_argument("url")
    approve_cmd.add_argument("task_id")
    approve_cmd.add_argument("answer")
    args = parser.parse_args()
    if args.model:
        # Read by build_support_agent() in every replica: set before Ray starts, so its workers inherit it.
        os.environ["RAY_HARNESS_MODEL"] = args.model
    if args.command == "demo":
        demo()
    elif args.command == "serve":
        serve_forever(args.port, args.store)
    elif args.command == "ask":
        ask(args.url, args.question)
    else:
        approve(args.url, args.task_id, args.answer)


if __name__ == "__main__":
    main()
