"""Serving tests. Most run the real A2A app under uvicorn on loopback (no Ray): several "replicas" in this
process share one task store, which is what makes a task movable between them. ``test_serve_ray.py``
runs the same app on Ray Serve (it takes the session-wide ``ray_session`` fixture of tests/conftest.py)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from ray_harness.serve._server import AppSettings, build_asgi_app
from ray_harness.serve._store import TaskRecords, open_repository
from tests.serve.targets import REFUND_LOG_ENV, build_support_agent
from tests.session.conftest import moto_endpoint  # noqa: F401  (a real moto_server for the S3 store)

TOKEN = "s3cret-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Replica:
    url: str
    records: TaskRecords
    server: Any
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


def start_replica(factory: Callable[[], Any], store: str | None, *, name: str = "support", token: str | None = None,
                  lease_seconds: float = 30.0, max_request_bytes: int = 1 << 20,
                  store_options: dict[str, Any] | None = None, max_contexts: int = 1000) -> Replica:
    records = TaskRecords(open_repository(store, store_options), owner=f"test-{name}-{time.monotonic_ns()}",
                          lease_seconds=lease_seconds)
    app = build_asgi_app(AppSettings(name=name, description=None, version="9.9", auth_token=token,
                                     max_request_bytes=max_request_bytes, max_contexts=max_contexts), factory,
                         records)
    url, server, thread = serve_asgi(app)
    return Replica(url=url, records=records, server=server, thread=thread)


def serve_asgi(app: Any) -> tuple[str, Any, threading.Thread]:
    """Run ``app`` under uvicorn on a free loopback port in a thread; stop with ``server.should_exit = True``."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    return f"http://127.0.0.1:{port}", server, thread


@pytest.fixture
def refund_log(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Where the ``refund`` tool of ``tests.serve.targets`` records each refund it makes."""
    log = tmp_path / "refunds.log"
    monkeypatch.setenv(REFUND_LOG_ENV, str(log))
    return log


def s3_bucket(endpoint: str, bucket: str) -> dict[str, Any]:
    """Create ``bucket`` on the moto server at ``endpoint``; the task store options that reach it."""
    import boto3

    options = {"endpoint_url": endpoint, "region_name": "us-east-1", "aws_access_key_id": "test",
               "aws_secret_access_key": "test"}
    boto3.client("s3", **options).create_bucket(Bucket=bucket)
    return options


@pytest.fixture
def replicas(tmp_path: Any) -> Iterator[Callable[..., Replica]]:
    started: list[Replica] = []

    def make(factory: Callable[[], Any], store: str | None = "default", **kwargs: Any) -> Replica:
        url = f"file://{tmp_path / 'tasks'}" if store == "default" else store
        replica = start_replica(factory, url, **kwargs)
        started.append(replica)
        return replica

    yield make
    for replica in started:
        replica.stop()


def rpc(url: str, method: str, params: Any, *, token: str | None = None,
        headers: dict[str, str] | None = None) -> httpx.Response:
    sent = {"A2A-Version": "1.0", **({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(url + "/", json=body, headers=sent, timeout=60)


@pytest.fixture
def support_url(replicas: Any) -> str:
    """One replica of the support agent (a refund tool a human approves), behind ``TOKEN``."""
    return str(replicas(build_support_agent, token=TOKEN).url)

