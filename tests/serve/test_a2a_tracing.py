"""Traces of served tasks with the A2A app under uvicorn in this process (no Ray), received by a real OTLP
receiver through the official a2a-sdk client; ``test_serve_tracing.py`` checks the same on Ray Serve replicas."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types.a2a_pb2 import TaskState

from tests.integration._otlp import Receiver, receiving, span_id, trace_id, wait
from tests.serve.a2a_client import official_client, send, task_id_of, user
from tests.serve.targets import build_graph


def _task_spans(receiver: Receiver, task: str) -> list[Any]:
    return [s for s in list(receiver.spans) if s.name.startswith("a2a_task")
            and any(a.key == "a2a.task.id" and a.value.string_value == task for a in s.attributes)]


def assert_task_traces(receiver: Receiver, url: str) -> None:
    """Through the official client: a traceparent continues the caller's trace; without, one trace per task."""
    from opentelemetry import trace
    from opentelemetry.propagate import inject

    async def ask(prompt: str, headers: dict[str, str], streaming: bool) -> str:
        async with official_client(url, headers=headers, streaming=streaming, timeout=120) as client:
            events = await send(client, user(prompt))
        final = events[-1]
        state = final.task.status.state if final.WhichOneof("payload") == "task" else \
            final.status_update.status.state
        assert state == TaskState.TASK_STATE_COMPLETED, events
        return task_id_of(events)

    with trace.get_tracer("test").start_as_current_span("client") as caller:
        headers: dict[str, str] = {}
        inject(headers)  # the W3C traceparent of the caller's span
    assert "traceparent" in headers
    traced = asyncio.run(ask("with a traceparent", headers, streaming=False))
    untraced = [asyncio.run(ask(f"on its own {i}", {}, streaming=i == 1)) for i in range(2)]

    # The caller's trace: the replica's task span is a child of the caller's span, and everything closes up.
    def caller_complete() -> bool:
        spans = receiver.in_trace(trace_id(caller))
        return sum(s.name == "chat" for s in spans) >= 2 and not receiver.orphans(trace_id(caller))

    wait(caller_complete, what=f"the caller's trace to close up: orphans {receiver.orphans(trace_id(caller))}")
    task_span = _task_spans(receiver, traced)
    assert len(task_span) == 1 and task_span[0].trace_id == trace_id(caller)
    assert task_span[0].parent_span_id == span_id(caller)
    names = {s.name for s in receiver.in_trace(trace_id(caller))}
    assert {"invoke_graph", "execute_node draft", "execute_node review", "chat"} <= names, names

    # Without a traceparent: one trace per task, rooted at its task span, every parent present.
    roots: list[bytes] = []
    for task in untraced:
        wait(lambda task=task: len(_task_spans(receiver, task)) == 1, what=f"the span of task {task}")
        (root,) = _task_spans(receiver, task)
        assert not root.parent_span_id, "a task without a traceparent starts its own trace"

        def complete(trace: bytes = root.trace_id) -> bool:
            return sum(s.name == "chat" for s in receiver.in_trace(trace)) >= 2 and not receiver.orphans(trace)

        wait(complete, what=f"task {task}'s trace to close up: orphans {receiver.orphans(root.trace_id)}")
        tasks_in_trace = [s for s in receiver.in_trace(root.trace_id) if s.name.startswith("a2a_task")]
        assert tasks_in_trace == [root]  # no other task shares it
        roots.append(root.trace_id)
    assert len(set(roots)) == 2 and trace_id(caller) not in roots


def test_task_spans_continue_the_callers_trace_or_start_one_per_task(replicas: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with receiving(monkeypatch) as receiver:
        replica = replicas(build_graph, name="graph")
        assert_task_traces(receiver, replica.url.rstrip("/"))
