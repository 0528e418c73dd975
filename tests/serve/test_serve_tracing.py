"""Traces of tasks served by Ray Serve replicas, received by a real OTLP receiver through the official a2a-sdk
client: a request with a W3C ``traceparent`` continues the caller's trace, one without starts one trace per
task, and every span's parent arrives (the replica exports to the endpoint configured in the driver)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from ray_harness import serve as rh_serve
from tests.integration._otlp import Receiver, receiving
from tests.serve.conftest import free_port
from tests.serve.test_a2a_tracing import assert_task_traces

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session"), pytest.mark.timeout(600)]


@pytest.fixture
def traced_app(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Receiver, str]]:
    from ray.serve.context import _get_global_client

    with receiving(monkeypatch) as receiver:  # before serve.app(): the replica's runtime_env takes OTEL_* from here
        running = _get_global_client(raise_if_no_controller_running=False)
        port = int(running.http_config.port) if running is not None else free_port()
        name = f"traced-{uuid.uuid4().hex[:6]}"
        handle = rh_serve.run(rh_serve.app("tests.serve.targets:build_graph", name=name), port=port,
                              route_prefix=f"/{name}")
        try:
            yield receiver, handle.url.rstrip("/")
        finally:
            handle.shutdown()


def test_replica_spans_continue_the_callers_trace_or_start_one_per_task(traced_app: tuple[Receiver, str]) -> None:
    assert_task_traces(*traced_app)
