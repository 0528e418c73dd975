"""``ServeHandle.shutdown()`` with several apps on one Ray Serve: each handle deletes only its own app, Serve
stops with the last app when ``run()`` in this process started it (whichever handle shuts down last), a Serve
started by someone else stays up, a handle outliving Serve shuts down quietly, and stopping Serve leaves no
"failed" line on the driver's terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ray_harness import serve as rh_serve
from tests.serve.conftest import free_port

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session"), pytest.mark.timeout(600)]


def _serve_client() -> Any:
    from ray.serve.context import _get_global_client

    return _get_global_client(raise_if_no_controller_running=False)


def _apps() -> set[str]:
    from ray import serve

    return set(serve.status().applications)


@pytest.fixture
def no_serve() -> Iterator[None]:
    """Start with no Ray Serve on the session's Ray (so ``run()`` starts it) and leave none behind."""
    from ray import serve

    if _serve_client() is not None:
        assert not _apps(), f"an earlier test left Serve apps running: {_apps()}"
        serve.shutdown()  # type: ignore[no-untyped-call]
    yield
    if _serve_client() is not None:
        serve.shutdown()  # type: ignore[no-untyped-call]


def _run(name: str, port: int) -> rh_serve.ServeHandle:
    application = rh_serve.app("tests.serve.targets:build_plain_agent", name=name)
    return rh_serve.run(application, host="127.0.0.1", port=port, route_prefix=f"/{name}")


def _answers(handle: rh_serve.ServeHandle) -> str:
    return str(rh_serve.A2AAgent(handle.url)("still there?").text)


@pytest.mark.usefixtures("no_serve")
def test_the_first_apps_shutdown_leaves_later_apps_serving() -> None:
    port = free_port()
    first = _run("first", port)
    second = _run("second", port)
    assert (first._owns_serve, second._owns_serve) == (True, False)
    first.shutdown()
    assert _apps() == {"second"}
    assert _answers(second) == "echo: still there?"
    first.shutdown()  # idempotent
    second.shutdown()  # its app is still there to delete: no "There is no Serve instance running"
    assert _serve_client() is None  # the last app is gone: the Serve this process started goes with it
    second.shutdown()


@pytest.mark.usefixtures("no_serve")
def test_a_serve_started_elsewhere_stays_up_after_the_last_app() -> None:
    from ray import serve

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    only = _run("only", port)
    assert not only._owns_serve
    only.shutdown()
    assert _serve_client() is not None and _apps() == set()


@pytest.mark.usefixtures("no_serve")
def test_serve_stops_with_its_starter_once_no_app_is_left_and_a_late_shutdown_is_a_no_op() -> None:
    from ray import serve

    port = free_port()
    first = _run("first", port)
    second = _run("second", port)
    second.shutdown()
    assert _apps() == {"first"}
    assert _answers(first) == "echo: still there?"
    first.shutdown()
    assert _serve_client() is None  # it started Serve and left nothing: Serve is gone

    again = _run("again", free_port())
    assert again._owns_serve
    serve.shutdown()  # type: ignore[no-untyped-call]  # Serve stopped under the handle (e.g. by someone else)
    again.shutdown()  # no-op
    assert _serve_client() is None


_RUN_AND_SHUT_DOWN = """
import sys, time
from ray_harness import serve
handle = serve.run(serve.app("tests.serve.targets:build_plain_agent", name="quiet"), port=int(sys.argv[1]))
assert handle._owns_serve, "Serve was already running: this driver would not stop it"
handle.shutdown()
time.sleep(2)  # Ray prints a failed call's error line from a background thread: give a late one time to land
print("stopped", flush=True)
"""


@pytest.mark.usefixtures("no_serve")
def test_stopping_serve_prints_no_failed_controller_call(ray_session: dict[str, Any]) -> None:
    # serve.shutdown() left "Task ServeController.graceful_shutdown failed ... killed by `ray.kill`" on the
    # terminal of the driver that stopped Serve (`ray-harness serve`, the example's demo): its call waits until
    # the controller kills itself, and Ray reports the controller's retried-forever call as failed.
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "RAY_ADDRESS": str(ray_session["gcs_address"])}
    done = subprocess.run([sys.executable, "-c", _RUN_AND_SHUT_DOWN, str(free_port())], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and done.stdout.endswith("stopped\n"), done.stderr[-3000:]
    output = done.stdout + done.stderr
    assert "failed" not in output and "(raylet)" not in output, output[-3000:]
    assert _serve_client() is None  # it stopped the Serve it started
