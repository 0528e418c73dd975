"""``status``, ``cancel``, ``jobs`` and ``submit`` given an address where nothing answers: an error line naming it.

They hung for a minute or more inside ``ray.init`` / the Jobs client (Ray retries), then printed Ray's own error
or a traceback. No Ray is started here: Ray is imported, and told to refuse if it is reached at all.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


@pytest.mark.parametrize("command", _COMMANDS, ids=" ".join)
def test_a_refused_address_is_an_error_line_naming_it(command: list[str], refused_port: int,
                                                      ray_never_reached: list[str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{refused_port}"
    assert main(_with_address(command, address)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot reach the Ray cluster at {address!r}: connection refused"), err
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


@pytest.mark.parametrize("scheme", ["ray://", "http://"])
def test_a_reachable_address_goes_to_ray_as_given(scheme: str, ray_never_reached: list[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        address = f"{scheme}127.0.0.1:{sock.getsockname()[1]}"
        command = ["status"] if scheme == "ray://" else ["jobs", "logs", "raysubmit_rh_x"]
        assert main([*command, "--address", address]) == 2
    assert ray_never_reached == [f"{'ray.init' if scheme == 'ray://' else 'JobSubmissionClient'} {address}"]


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
