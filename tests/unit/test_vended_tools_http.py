"""ray_harness.vended_tools.http_request against a local http.server (no internet)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import cloudpickle
import httpx
import pytest

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, text, tool_calls
from ray_harness.tools.base import ToolContext
from ray_harness.vended_tools import http_request, make_http_request
from ray_harness.vended_tools.http_request import HttpRequestError
from tests.unit.test_vended_tools import run_tools as run_vended, tool_results


class _Server(ThreadingHTTPServer):
    arrived: threading.Event
    release: threading.Event


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        if self.path == "/hang":  # answers only once the test releases it
            self.server.arrived.set()
            self.server.release.wait()
        if self.path == "/missing":
            self.send_error(404)
            return
        self._answer(b"hello \xe2\x9c\x93", extra=(("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")))

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(self.headers.get("X-Token", "").encode() + b":" + body)

    def _answer(self, body: bytes, extra: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[_Server, str]]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.arrived, httpd.release = threading.Event(), threading.Event()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.release.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def run_tools(tools: list[Any], *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    return tool_results(run_vended(tools, *calls))


def test_get_and_post(server: tuple[_Server, str]) -> None:
    _, base = server
    got, posted = run_tools([http_request], ("http_request", {"method": "GET", "url": f"{base}/hello"}),
                            ("http_request", {"method": "POST", "url": f"{base}/echo", "body": "payload",
                                              "headers": {"X-Token": "t0k"}}))
    status, output = got
    assert (status, output["status"], output["status_text"], output["body"]) == ("success", 200, "OK", "hello ✓")
    assert output["headers"]["set-cookie"] == "a=1\nb=2"  # both cookies, lower-case name
    assert posted[1]["body"] == "t0k:payload"


def test_failures_are_error_results(server: tuple[_Server, str]) -> None:
    httpd, base = server
    httpd.release.set()
    unused_port = f"http://127.0.0.1:{_free_port()}"
    missing, refused, bad_method, bad_timeout = run_tools(
        [http_request],
        ("http_request", {"method": "GET", "url": f"{base}/missing"}),
        ("http_request", {"method": "GET", "url": unused_port}),
        ("http_request", {"method": "FETCH", "url": base}),
        ("http_request", {"method": "GET", "url": base, "timeout": 0}),
    )
    assert missing == ("error", f"Error: HTTP 404 Not Found: GET {base}/missing")
    assert refused[0] == "error" and refused[1].startswith("Error: Request failed: ")
    assert bad_method[0] == "error" and "input.method" in bad_method[1]
    assert bad_timeout[0] == "error" and "input.timeout" in bad_timeout[1]


def test_a_timeout_is_an_error_result(server: tuple[_Server, str]) -> None:
    _, base = server
    ((status, message),) = run_tools([http_request],
                                     ("http_request", {"method": "GET", "url": f"{base}/hang", "timeout": 0.2}))
    assert status == "error" and message.startswith("Error: Request timed out")


def test_a_given_client_is_used_and_caps_the_timeout(server: tuple[_Server, str]) -> None:
    _, base = server
    seen: list[float | None] = []

    async def note_timeout(request: httpx.Request) -> None:
        seen.append(request.extensions["timeout"]["read"])

    client = httpx.AsyncClient(headers={"X-Token": "from-client"}, timeout=3.0,
                               event_hooks={"request": [note_timeout]})
    tool = make_http_request(client=client)
    results = run_tools([tool], ("http_request", {"method": "POST", "url": base, "body": "b", "timeout": 60}),
                        ("http_request", {"method": "POST", "url": base, "body": "c", "timeout": 1}))
    assert [output["body"] for _, output in results] == ["from-client:b", "from-client:c"]
    assert seen == [3.0, 1.0]  # the model may ask for less than the client's timeout, never more
    assert not client.is_closed  # the caller's client stays open
    asyncio.run(client.aclose())


async def test_a_cancel_aborts_a_request_in_flight(server: tuple[_Server, str]) -> None:
    httpd, base = server
    signal = threading.Event()
    # Not cancellable, it would end in "Request timed out" after 30 s: the server holds /hang until the teardown.
    use: Any = {"toolUseId": "t-1", "name": "http_request",
                "input": {"method": "GET", "url": f"{base}/hang", "timeout": 30}}
    context = ToolContext(tool_use=use, agent=None, cancel_signal=signal)
    running = asyncio.ensure_future(_drain(http_request.stream(use, context)))
    await asyncio.to_thread(httpd.arrived.wait)  # the server holds the request: it is in flight
    signal.set()
    with pytest.raises(HttpRequestError, match="Request cancelled"):  # the loop turns it into an error result
        await running


def test_the_default_tool_ships_and_runs_on_the_copy(server: tuple[_Server, str]) -> None:
    _, base = server
    model = ScriptedModel(tool_calls(("http_request", {"method": "GET", "url": f"{base}/hello"})), text("done"))
    copy = cloudpickle.loads(cloudpickle.dumps(Agent(model, tools=[http_request])))
    copy("go")
    assert tool_results(copy)[0][1]["body"] == "hello ✓"


async def _drain(events: Any) -> list[Any]:
    return [event async for event in events]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
