"""A real OTLP/HTTP trace receiver on loopback, and the checks of the trace-completeness tests."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class Receiver:
    """A minimal OTLP/HTTP trace receiver on 127.0.0.1 (protobuf, as the real exporter sends it)."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        self.spans: list[Any] = []
        self.pids: dict[bytes, int] = {}  # span id -> the exporting process (resource attribute process.pid)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource_spans in request.resource_spans:
                    pid = next((a.value.int_value for a in resource_spans.resource.attributes
                                if a.key == "process.pid"), 0)
                    for scope in resource_spans.scope_spans:
                        receiver.pids.update({span.span_id: pid for span in scope.spans})
                        receiver.spans.extend(scope.spans)
                payload = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def in_trace(self, trace_id: bytes) -> list[Any]:
        return [s for s in list(self.spans) if s.trace_id == trace_id]

    def orphans(self, trace_id: bytes, *outside: bytes) -> list[str]:
        """Names of the spans of ``trace_id`` whose parent never arrived (``outside``: parents known elsewhere)."""
        spans = self.in_trace(trace_id)
        ids = {s.span_id for s in spans} | set(outside)
        return [s.name for s in spans if s.parent_span_id and s.parent_span_id not in ids]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class GrpcReceiver:
    """A minimal OTLP/gRPC trace receiver on 127.0.0.1 (plaintext, as a local collector listens on 4317)."""

    def __init__(self) -> None:
        from concurrent import futures

        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

        self.spans: list[Any] = []
        receiver = self

        class Service(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
            def Export(self, request: Any, context: Any) -> Any:
                for resource_spans in request.resource_spans:
                    for scope in resource_spans.scope_spans:
                        receiver.spans.extend(scope.spans)
                return trace_service_pb2.ExportTraceServiceResponse()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    in_trace = Receiver.in_trace  # the same questions about the spans received
    orphans = Receiver.orphans

    def close(self) -> None:
        self.server.stop(0)


@contextlib.contextmanager
def receiving(monkeypatch: pytest.MonkeyPatch, protocol: str = "http") -> Iterator[Any]:
    """A receiver (``protocol`` ``"http"`` or ``"grpc"``) this process and every actor started from now on export
    their spans to."""
    from opentelemetry import trace

    from ray_harness import telemetry
    from ray_harness.telemetry import config

    receiver: Any = GrpcReceiver() if protocol == "grpc" else Receiver()
    previous_provider = trace._TRACER_PROVIDER
    monkeypatch.setattr(config, "_state", {"capture_content": None, "env_checked": False, "provider": None})
    # Set (not delete) before setup(), which exports them for actors: monkeypatch records nothing for deleting
    # an absent variable, so the value setup() wrote would outlive the test and send every later process's
    # spans to this receiver once it is gone (their exit then hangs on export retries).
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    if protocol == "grpc":
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    else:
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)  # setup("otlp-http") does not set it
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")  # actors flush their batches every 100 ms
    monkeypatch.setenv("OTEL_EXPERIMENTAL_RESOURCE_DETECTORS", "process")  # process.pid: which process sent a span
    provider = telemetry.setup(f"otlp-{protocol}", endpoint=receiver.endpoint, simple=True)
    try:
        yield receiver
    finally:
        provider.shutdown()
        trace._TRACER_PROVIDER = previous_provider
        receiver.close()


def wait(predicate: Any, timeout: float = 120.0, what: str = "telemetry") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def span_id(span: Any) -> bytes:
    """A driver span's id as the receiver stores it."""
    return int(span.get_span_context().span_id).to_bytes(8, "big")


def trace_id(span: Any) -> bytes:
    return int(span.get_span_context().trace_id).to_bytes(16, "big")
