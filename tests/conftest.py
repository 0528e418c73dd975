"""Shared fixtures.

``RAY_HARNESS_REQUIRE_SERVICES=1`` (set by ``.ci/run``) turns a missing real
service (dockerd, sshd, moto server, Ray) into a test failure instead of a skip.

One Ray instance for the whole test session (``ray.init`` costs 8-14 s; actors ≈1 s each): tests that need
Ray, in any directory, take the ``ray_session`` fixture (or ``pytestmark = pytest.mark.ray`` plus
``pytest.mark.usefixtures("ray_session")``). It is defined here only, and no module or conftest imports it:
an imported fixture is a separate fixture per importing module, so a second instance would set another
temporary ``RAY_HARNESS_STATE_DIR`` in the driver after Ray (and with it every actor's state dir) started.
The embedded Ray runs with 2 CPUs, no dashboard, in namespace ``ray_harness_tests``; agent snapshots go to a
temporary ``RAY_HARNESS_STATE_DIR``. Only what this session started is stopped at the end
(``ray.shutdown()`` of our own instance).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ray_harness.testing import ScriptedModel

RAY_NAMESPACE = "ray_harness_tests"


def services_required() -> bool:
    return os.environ.get("RAY_HARNESS_REQUIRE_SERVICES") == "1"


def missing_service(reason: str) -> None:
    """Skip locally, fail in CI: a test that needs a real service must not silently pass."""
    if services_required():
        pytest.fail(f"required service unavailable: {reason}")
    pytest.skip(reason)


@pytest.fixture
def script() -> Iterator[Callable[..., ScriptedModel]]:
    """Factory for ScriptedModels that are all checked for unused steps after the test."""
    made: list[ScriptedModel] = []

    def make(*steps: object, **kwargs: object) -> ScriptedModel:
        model = ScriptedModel(*steps, **kwargs)  # type: ignore[arg-type]
        made.append(model)
        return model

    yield make
    for model in made:
        model.assert_complete()


def _telemetry_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key.startswith("OTEL_")}


@pytest.fixture(autouse=True)
def _telemetry_env_unchanged() -> Iterator[None]:
    """A test that leaves OTEL_* variables behind sends the spans of every later process (subprocesses,
    new actors, Serve replicas) to an endpoint that is gone; their exits then hang on export retries."""
    before = _telemetry_env()
    yield
    after = _telemetry_env()
    assert after == before, f"the test changed OTEL_* environment variables: {before} -> {after}"


def _start_ray(runtime: Any) -> dict[str, Any]:
    # address="local": always our own instance, never a `ray start` cluster that happens to run on this
    # machine (ray.init() with no address joins the one recorded in /tmp/ray/ray_current_cluster).
    # Ray gives its raylet a fixed 30 s to register; on a heavily loaded 2-core machine that can pass, so a
    # failed start is retried (after cleaning up) before the service counts as missing.
    import ray

    error: Exception | None = None
    for _ in range(3):
        try:
            return dict(runtime.init(address="local", num_cpus=2, include_dashboard=False, namespace=RAY_NAMESPACE))
        except Exception as failure:  # pragma: no cover - depends on the machine
            error = failure
            ray.shutdown()
    missing_service(f"cannot start a local Ray: {error}")
    raise AssertionError("unreachable")  # missing_service raises


@pytest.fixture(scope="session")
def ray_session() -> Iterator[dict[str, Any]]:
    try:
        import ray  # noqa: F401
    except ImportError:
        missing_service("ray is not installed")
    from ray_harness import runtime

    state_dir = tempfile.mkdtemp(prefix="ray_harness_state_")
    previous = os.environ.get("RAY_HARNESS_STATE_DIR")
    os.environ["RAY_HARNESS_STATE_DIR"] = state_dir  # inherited by the raylet, so by every actor
    started_here = not runtime.is_initialized()
    info = _start_ray(runtime)
    yield {**info, "state_dir": state_dir}
    if started_here:
        runtime.shutdown()
    if previous is None:
        os.environ.pop("RAY_HARNESS_STATE_DIR", None)
    else:
        os.environ["RAY_HARNESS_STATE_DIR"] = previous
