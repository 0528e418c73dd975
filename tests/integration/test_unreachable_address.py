"""``status``, ``cancel``, ``jobs`` and ``submit`` given an address where nothing answers, or where something that
is not Ray answers (a web server, the dashboard's port given as the GCS): an error line naming it.

They hung for a minute or more inside ``ray.init`` / the Jobs client (Ray retries), then printed Ray's own error
or a traceback. No Ray is started here: Ray is imported, and told to refuse if it is reached at all.
"""

from __future__ import annotations

import os
import socket
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from ray_harness.cli import main

ROOT = Path(__file__).resolve().parents[2]

_COMMANDS = [["status"], ["status", "--json"], ["cancel", "--all"], ["cancel", "3f2a9c0d"],
             ["jobs", "logs", "raysubmit_rh_x"], ["jobs", "download", "raysubmit_rh_x", "results.jsonl"],
             ["submit", "--no-wait", "--", "eval", "m:f", "d.jsonl"]]


def _with_address(command: list[str], address: str) -> list[str]:
    """``command`` with ``--address`` among its options (after ``jobs ACTION``; before ``--`` for ``submit``)."""
    words = 2 if command[0] == "jobs" else 1
    return [*command[:words], "--address", address, *command[words:]]


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port bound here but not listening: a connect to it is refused (and no other process can take it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def grpc_port() -> Iterator[int]:
    """A gRPC server with no services: it answers the check as a GCS or a Ray Client server does."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(grace=None)


@pytest.fixture
def web_port() -> Iterator[int]:
    """An HTTP server (as the Ray dashboard is one) that answers every connection with a 400, as aiohttp does."""
    yield from _http_server(b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


def _http_server(reply: bytes) -> Iterator[int]:
    class Reply(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.recv(4096)
            self.request.sendall(reply)

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Reply) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield server.server_address[1]
        server.shutdown()
        thread.join()


@pytest.fixture
def ray_never_reached(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Ray's connect calls record the address and refuse: an address the check let through shows up here."""
    import ray

    import ray_harness.runtime.jobs as jobs

    reached: list[str] = []

    def init(address: str | None = None, **_: Any) -> None:
        reached.append(f"ray.init {address}")
        raise ConnectionError(f"ray.init was called with {address}")

    def client(address: str, *_: Any, **__: Any) -> None:
        reached.append(f"JobSubmissionClient {address}")
        raise ConnectionError(f"the job client was made for {address}")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(jobs, "JobSubmissionClient", client)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return reached


@pytest.mark.parametrize("there", ["nothing", "a web server"])
@pytest.mark.parametrize("command", _COMMANDS, ids=" ".join)
def test_an_address_where_no_ray_answers_is_an_error_line_naming_it(
        command: list[str], there: str, refused_port: int, web_port: int, ray_never_reached: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    """A web server there (the dashboard's port given as the GCS's): Ray waited minutes for a GCS answer."""
    address = f"127.0.0.1:{refused_port if there == 'nothing' else web_port}"
    assert main(_with_address(command, address)) == 2
    err = capsys.readouterr().err
    if there == "nothing":
        assert err.startswith(f"error: cannot reach the Ray cluster at {address!r}: connection refused"), err
    else:
        assert err.startswith(f"error: {address!r} is not a Ray GCS: {address} answers HTTP/1 "
                              "('HTTP/1.0 400 Bad Request'): a web server, such as the Ray dashboard, not gRPC; "), err
        dashboard_hint = f"if it is the dashboard, give it as a URL: http://{address}"
        assert (dashboard_hint in err) == (command[0] in ("jobs", "submit")), err
    assert ray_never_reached == []


@pytest.mark.parametrize("command", [c for c in _COMMANDS if c[0] in ("jobs", "submit")], ids=" ".join)
def test_a_refused_dashboard_url_is_an_error_line_naming_it(command: list[str], refused_port: int,
                                                            ray_never_reached: list[str],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{refused_port}"
    assert main(_with_address(command, url)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot reach the Ray dashboard at {url!r}: connection refused"), err
    assert "http://<head>:8265" in err and ray_never_reached == []


@pytest.mark.parametrize("command", [["status"], ["cancel", "--all"], ["jobs", "logs", "raysubmit_rh_x"]],
                         ids=" ".join)
def test_an_unreachable_ray_address_says_it_came_from_there(command: list[str], refused_port: int,
                                                            ray_never_reached: list[str],
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{refused_port}")
    assert main(command) == 2
    assert f"'127.0.0.1:{refused_port}' (from RAY_ADDRESS): connection refused" in capsys.readouterr().err
    assert ray_never_reached == []


def test_a_host_that_drops_packets_is_given_up_on_after_one_short_connect(ray_never_reached: list[str],
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from ray_harness.runtime import _reach

    def silent(target: Any, timeout: Any = None) -> socket.socket:
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", silent)
    assert main(["status", "--address", "192.0.2.1:6379"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach the Ray cluster at '192.0.2.1:6379': no answer from 192.0.2.1:6379 "
                          f"within {_reach.CONNECT_TIMEOUT_S:g} s"), err
    assert ray_never_reached == []


@pytest.mark.parametrize(("command", "called"), [
    (["status", "--address", "auto"], "ray.init auto"),
    (["cancel", "--all"], "ray.init auto"),  # no --address, no RAY_ADDRESS
    (["jobs", "logs", "raysubmit_rh_x", "--address", "auto"], "JobSubmissionClient auto"),
])
def test_auto_still_goes_to_ray_unchecked(command: list[str], called: str, ray_never_reached: list[str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(command) == 2
    assert ray_never_reached == [called]


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_a_grpc_address_goes_to_ray_as_given(scheme: str, grpc_port: int, ray_never_reached: list[str]) -> None:
    address = f"{scheme}127.0.0.1:{grpc_port}"
    assert main(["status", "--address", address]) == 2
    assert ray_never_reached == [f"ray.init {address}"]


def test_a_reachable_dashboard_url_goes_to_the_job_client_as_given(ray_never_reached: list[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        address = f"http://127.0.0.1:{sock.getsockname()[1]}"
        assert main(["jobs", "logs", "raysubmit_rh_x", "--address", address]) == 2
    assert ray_never_reached == [f"JobSubmissionClient {address}"]


def test_a_ray_client_address_at_a_web_server_is_an_error_line(web_port: int, ray_never_reached: list[str],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    address = f"ray://127.0.0.1:{web_port}"
    assert main(["status", "--address", address]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {address!r} is not a Ray Client server: "), err
    assert "ray://<head>:10001" in err and ray_never_reached == []


@pytest.mark.parametrize("command", [["status"], ["cancel", "--all"]], ids=" ".join)
def test_a_dashboard_url_for_a_command_that_joins_the_cluster_says_to_give_the_gcs(
        command: list[str], ray_never_reached: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """RAY_ADDRESS=http://...:8265, as Ray's Jobs docs say to set it, then ``ray-harness status``."""
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:8265")
    assert main(command) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 'http://127.0.0.1:8265' (from RAY_ADDRESS) is a dashboard URL: joining the "
                          "cluster needs its GCS address"), err
    assert ray_never_reached == []


@pytest.mark.parametrize("reply", [b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n",
                                   b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
                                   b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi"],
                         ids=["404", "400", "not json"])
def test_a_web_server_given_as_the_dashboard_is_an_error_line(reply: bytes, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``--address http://host:8000`` (a Serve app, any web server): Ray's version check ended in a traceback."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for port in _http_server(reply):
        url = f"http://127.0.0.1:{port}"
        assert main(["jobs", "logs", "raysubmit_rh_x", "--address", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {url!r} answers, but not as the Ray dashboard's Jobs API ("), err
    assert "give the dashboard URL http://<head>:8265" in err and "Traceback" not in err


def test_the_real_command_fails_with_the_error_line(refused_port: int) -> None:
    """End to end, as a user runs it: Ray really imported, nothing patched."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    shown = subprocess.run([sys.executable, "-m", "ray_harness.cli", "status", "--address",
                            f"127.0.0.1:{refused_port}"], env=env, capture_output=True, text=True, timeout=300,
                           check=False)
    assert shown.returncode == 2, shown.stderr[-3000:]
    assert shown.stderr.startswith(f"error: cannot reach the Ray cluster at '127.0.0.1:{refused_port}'"), \
        shown.stderr[-3000:]


@pytest.mark.parametrize("there", ["nothing", "a web server"])
def test_serve_given_an_address_where_no_ray_answers_is_an_error_line_naming_it(
        there: str, refused_port: int, web_port: int, ray_never_reached: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    """``serve`` had no ``--address`` (only ``RAY_ADDRESS``); given one, it is checked as the other commands' are."""
    address = f"127.0.0.1:{refused_port if there == 'nothing' else web_port}"
    assert main(["serve", "tests.serve.targets:build_plain_agent", "--address", address]) == 2
    err = capsys.readouterr().err
    expected = "error: cannot reach the Ray cluster at" if there == "nothing" else f"error: {address!r} is not a Ray GCS"
    assert err.startswith(expected) and address in err, err
    assert ray_never_reached == []
