"""Fixtures for the MCP tests: a real MCP server (``server_app.py``) over stdio and streamable HTTP.

These tests run in-process without Ray, so ``import ray`` is blocked here as in ``tests/unit``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ray_harness.tools.mcp import MCPClient

SERVER_APP = str(Path(__file__).with_name("server_app.py"))
STDIO_COMMAND = [sys.executable, SERVER_APP, "stdio"]


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(sys.modules, "ray", None)
    yield


@pytest.fixture(scope="module")
def shared_stdio() -> Iterator[MCPClient]:
    """One stdio client shared by the module's tests (each runs on its own event loop)."""
    client = MCPClient(command=STDIO_COMMAND, prefix="srv")
    yield client
    client.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class HttpServer:
    """``server_app.py`` serving streamable HTTP on 127.0.0.1 in its own process."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process = subprocess.Popen([sys.executable, SERVER_APP, "http", str(self.port)])
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"the MCP test server did not come up on port {self.port}")
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    server = HttpServer()
    yield server
    server.stop()


@pytest.fixture
def own_http_server() -> Iterator[HttpServer]:
    """A server for one test (for tests that kill it)."""
    server = HttpServer()
    yield server
    server.stop()
