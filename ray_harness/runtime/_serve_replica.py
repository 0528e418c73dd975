"""The Ray Serve deployment class: one replica builds the A2A app of :mod:`ray_harness.serve._server`.

The app is built inside the replica (``__serve_build_asgi_app__``): the target factory, the task store
client and the a2a-sdk handler are per-process objects and are never pickled.
"""

from __future__ import annotations

from typing import Any

from ray import serve

from ray_harness.evaluation._backends import resolve_factory
from ray_harness.runtime._telemetry import prepare_actor_process
from ray_harness.serve._server import AppSettings, build_asgi_app
from ray_harness.serve._store import TaskRecords, open_repository, replica_id

__all__ = ("A2AReplica",)


@serve.ingress()
class A2AReplica:
    """Serves one target over A2A; every replica of an app opens the same task store."""

    def __init__(self, settings: AppSettings, target: Any, task_store: str | None,
                 task_store_options: dict[str, Any] | None, lease_seconds: float) -> None:
        self._settings = settings
        self._target = target
        self._store = (task_store, task_store_options)
        self._lease_seconds = lease_seconds

    def __serve_build_asgi_app__(self) -> Any:
        # Spans to the driver's OTLP endpoint (its OTEL_* variables reached us through the runtime_env of
        # serve.app()) and the harness metrics to Ray's Prometheus endpoint, before the first task.
        prepare_actor_process()
        factory = resolve_factory(self._target)
        records = TaskRecords(open_repository(*self._store), owner=replica_id(), lease_seconds=self._lease_seconds)
        return build_asgi_app(self._settings, factory, records)
