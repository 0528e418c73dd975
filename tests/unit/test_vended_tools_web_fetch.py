"""ray_harness.vended_tools.web_fetch against a local http.server (no internet)."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import cloudpickle
import httpx
import pytest

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, text, tool_call
from ray_harness.tools.base import ToolContext
from ray_harness.vended_tools import make_web_fetch, web_fetch
from ray_harness.vended_tools.web_fetch import (
    WEB_FETCH_DESCRIPTION_AGENTIC,
    WEB_FETCH_DESCRIPTION_MARKDOWN,
    WebFetchError,
)
from tests.unit.test_vended_tools import run_tools, tool_results

PAGE = """<!doctype html><html><head><title>Shop  News</title><style>body { color: red }</style>
<script>var secret = "SCRIPT-BODY";</script></head><body>
<nav><a href="/">Home</a> <a href="/about">About</a></nav>
<h1>Spring sale</h1>
<p>Prices drop by <strong>20%</strong> on <a href="/items?page=2">all items</a>.
<a href="javascript:alert(1)">Tracking</a></p>
<ul><li>Tea</li><li>Coffee</li></ul>
<img src="data:image/png;base64,AAAAAAAA" alt="a banner"><img src="/logo.png" alt="logo">
<form><input name="q"><button>Search</button></form>
</body></html>"""


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
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/shop/page.html")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/plain":
            self._answer(b"<b>not html</b> caf\xe9", "text/plain; charset=latin-1")
            return
        if self.path == "/big":
            self._answer(b"x" * 5000, "text/plain")
            return
        self._answer(PAGE.encode(), "text/html; charset=utf-8")

    def _answer(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
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


markdown_fetch = make_web_fetch(mode="markdown")


def test_markdown_mode_returns_the_readable_page(server: tuple[_Server, str]) -> None:
    _, base = server
    ((status, page),) = tool_results(run_tools([markdown_fetch], ("web_fetch", {"url": f"{base}/moved"})))
    assert status == "success"
    assert page.startswith("# Shop News\n\n# Spring sale\n\n")
    # Links resolve against the page's URL after the redirect; a javascript: link keeps only its text.
    assert f"Prices drop by **20%** on [all items]({base}/items?page=2). Tracking" in page
    assert "- Tea\n- Coffee" in page
    assert f"a banner![logo]({base}/logo.png)" in page  # a data: image leaves its alt text
    for dropped in ("SCRIPT-BODY", "color: red", "Home", "About", "Search", "javascript", "base64"):
        assert dropped not in page, dropped


def test_other_content_types_come_as_they_are_and_long_content_is_cut(server: tuple[_Server, str]) -> None:
    _, base = server
    short = make_web_fetch(mode="markdown", max_content_chars=100)
    small = make_web_fetch(mode="markdown", max_bytes=1000, name="small_fetch")
    plain, cut, refused = tool_results(run_tools([short, small], ("web_fetch", {"url": f"{base}/plain"}),
                                                 ("web_fetch", {"url": f"{base}/big"}),
                                                 ("small_fetch", {"url": f"{base}/big"})))
    assert plain == ("success", "<b>not html</b> café")  # not markup: untouched, decoded with its charset
    assert cut == ("success", "x" * 100 + "\n\n[content truncated]")
    assert refused == ("error", "Error: Response body exceeded 1000 bytes; refusing to read more")


def test_failures_are_error_results(server: tuple[_Server, str]) -> None:
    _, base = server
    missing, not_http, no_host = tool_results(run_tools(
        [markdown_fetch], ("web_fetch", {"url": f"{base}/missing"}), ("web_fetch", {"url": "file:///etc/passwd"}),
        ("web_fetch", {"url": "http://"})))
    assert missing == ("error", f"Error: HTTP 404 Not Found: {base}/missing")
    assert not_http == ("error", "Error: Fetch failed: 'file:///etc/passwd' is not an http:// or https:// URL")
    assert no_host[0] == "error" and no_host[1].startswith("Error: Fetch failed: http://")


def test_agentic_mode_hands_the_page_to_an_analyst_on_the_callers_model(server: tuple[_Server, str]) -> None:
    _, base = server
    model = ScriptedModel(tool_call("web_fetch", {"url": f"{base}/page", "prompt": "How big is the discount?"}),
                          text("20% off everything."), text("The sale takes 20% off."))
    agent = Agent(model, tools=[web_fetch], system_prompt="You shop.")
    assert agent("what is on sale?").text == "The sale takes 20% off."
    assert tool_results(agent) == [("success", "20% off everything.")]
    _lead, analyst, _back = model.calls
    # The analyst is a fresh agent: its own system prompt, no tools, only the request holding the page.
    assert analyst.system_prompt != "You shop." and analyst.tool_specs == ()
    (request,) = analyst.messages
    asked = request["content"][0]["text"]
    assert asked.startswith(f"URL: {base}/page\n\nRequest: How big is the discount?\n\n--- Content ---\n# Shop News")
    assert "Prices drop by **20%**" in asked
    assert all("Spring sale" not in str(message) for message in agent.messages)  # the page stayed out


def test_agentic_mode_uses_the_given_model_and_needs_a_prompt(server: tuple[_Server, str]) -> None:
    _, base = server
    analyst_model = ScriptedModel(text("from the analyst model"))
    tool = make_web_fetch(model=analyst_model)
    answered, empty = tool_results(run_tools([tool], ("web_fetch", {"url": f"{base}/page", "prompt": "Sum up"}),
                                             ("web_fetch", {"url": f"{base}/page", "prompt": "  "})))
    assert answered == ("success", "from the analyst model")
    assert empty == ("error", "Error: web_fetch: agentic mode needs a non-empty prompt")
    assert len(analyst_model.calls) == 1


async def test_a_cancel_aborts_a_fetch_in_flight(server: tuple[_Server, str]) -> None:
    httpd, base = server
    signal = threading.Event()
    # Not cancellable, it would hang until the teardown: the server holds /hang (a given client waits 60 s).
    client = httpx.AsyncClient(timeout=60)
    tool = make_web_fetch(mode="markdown", client=client)
    use: Any = {"toolUseId": "t-1", "name": "web_fetch", "input": {"url": f"{base}/hang"}}
    running = asyncio.ensure_future(_drain(tool.stream(use, ToolContext(tool_use=use, agent=None,
                                                                        cancel_signal=signal))))
    await asyncio.to_thread(httpd.arrived.wait)  # the server holds the request: it is in flight
    signal.set()
    with pytest.raises(WebFetchError, match="web_fetch cancelled"):  # the loop turns it into an error result
        await running
    assert not client.is_closed  # the caller's client stays open
    await client.aclose()


def test_a_cancel_stops_the_analyst(server: tuple[_Server, str]) -> None:
    _, base = server
    agent: Agent

    def cancel_in_the_analyst(call: Any) -> Any:
        agent.cancel()  # during the analyst's model call: the cancel reaches the analyst, its answer is dropped
        return text("never read")

    tool = make_web_fetch(model=ScriptedModel(cancel_in_the_analyst))
    agent = Agent(ScriptedModel(tool_call("web_fetch", {"url": f"{base}/page", "prompt": "?"}), text("unused")),
                  tools=[tool])
    assert agent("go").stop_reason == "cancelled"
    assert tool_results(agent) == [("error", "Error: web_fetch cancelled")]


def test_bad_factory_arguments_are_named() -> None:
    for arguments, named in (({"max_bytes": 0}, "max_bytes"), ({"max_bytes": True}, "max_bytes"),
                             ({"max_content_chars": -1}, "max_content_chars"), ({"mode": "html"}, "mode"),
                             ({"client": "http://proxy"}, "client"), ({"model": "gpt"}, "model"),
                             ({"description": ""}, "description"), ({"name": "no spaces"}, "no spaces")):
        with pytest.raises(ValueError, match=named):
            make_web_fetch(**arguments)


def test_the_tools_ship_and_run_on_the_copy(server: tuple[_Server, str]) -> None:
    _, base = server
    model = ScriptedModel(tool_call("web_fetch", {"url": f"{base}/plain"}), text("done"))
    copy = cloudpickle.loads(cloudpickle.dumps(Agent(model, tools=[make_web_fetch(mode="markdown")])))
    copy("go")
    assert tool_results(copy) == [("success", "<b>not html</b> café")]
    shipped = cloudpickle.loads(cloudpickle.dumps(make_web_fetch(model=ScriptedModel(text("analysed")))))
    assert tool_results(run_tools([shipped], ("web_fetch", {"url": f"{base}/plain", "prompt": "?"}))) == \
        [("success", "analysed")]
    assert cloudpickle.loads(cloudpickle.dumps(web_fetch)).tool_spec == web_fetch.tool_spec


def test_strands_names_factory_and_tool_specs() -> None:
    try:  # Strands' web_fetch needs its web-fetch extra (markdownify, beautifulsoup4); ray_harness needs none
        from strands.vended_tools.web_fetch import make_web_fetch as strands_make, web_fetch as strands_web_fetch
    except ImportError:
        pytest.skip("Strands or its web-fetch extra is not installed")
    mine = [(p.name, p.kind, p.default) for p in inspect.signature(make_web_fetch).parameters.values()]
    assert mine == [(p.name, p.kind, p.default) for p in inspect.signature(strands_make).parameters.values()]
    for ours, theirs in ((web_fetch, strands_web_fetch), (markdown_fetch, strands_make(mode="markdown"))):
        spec, their_spec = ours.tool_spec, theirs.tool_spec
        assert (spec["name"], spec["description"]) == (their_spec["name"], their_spec["description"])
        assert spec["inputSchema"]["json"]["required"] == their_spec["inputSchema"]["json"]["required"]
    theirs = (strands_web_fetch.tool_spec["description"], strands_make(mode="markdown").tool_spec["description"])
    assert theirs == (WEB_FETCH_DESCRIPTION_AGENTIC, WEB_FETCH_DESCRIPTION_MARKDOWN)


async def _drain(events: Any) -> list[Any]:
    return [event async for event in events]
