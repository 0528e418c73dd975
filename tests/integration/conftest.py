"""One Ray instance for the whole integration session (``ray.init`` costs 8-14 s; actors ≈1 s each).

Tests that need Ray take the ``ray_session`` fixture (or ``pytestmark = pytest.mark.ray`` plus
``pytest.mark.usefixtures("ray_session")``). The embedded Ray runs with 2 CPUs, no dashboard, in
namespace ``ray_harness_tests``; agent snapshots go to a temporary ``RAY_HARNESS_STATE_DIR``.
Only what this session started is stopped at the end (``ray.shutdown()`` of our own instance).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import missing_service

RAY_NAMESPACE = "ray_harness_tests"


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
