"""W3C trace context across process boundaries (Ray actor calls), and the metric tags of the current run.

The caller puts :func:`current_carrier` into the call's options; the actor wraps the call in
:func:`attached`, so spans created in the actor are children of the caller's current span and one
trace shows a whole distributed run. The carrier also holds the scope of
:mod:`ray_harness.telemetry.runs` (run, graph/swarm, node) and the job of the caller's work (the job it
received, else the caller's own: on Ray the driver's) as ``ray-harness-tags``, so metrics recorded in the
actor carry the caller's tags and count for the driver that caused them. The trace context costs nothing
when tracing is off; the tags are one small JSON string. It also carries the caller's entry-point
extensions (``ray-harness-extensions``), which :func:`attached` adopts, so chains an actor assembles follow
the caller's ``use()`` at the time of the call.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Iterator
from typing import Any

from ray_harness.extensions.loading import adopt, carried_names
from ray_harness.telemetry.config import tracing_enabled
from ray_harness.telemetry.runs import current_tags, own_job, scoped, task_label

_TAGS_KEY = "ray-harness-tags"  # carried as one JSON string: carriers are str -> str
TASK_KEY = "ray-harness-task"  # the node or row the call runs (see runs.task_label): names the Ray task
_EXTENSIONS_KEY = "ray-harness-extensions"  # a JSON list of entry-point names
_BAGGAGE_MODULE = "ray_harness.telemetry.baggage"  # loaded by the first agent given baggage_attributes

__all__ = ("TASK_KEY", "attached", "current_carrier")


def current_carrier() -> dict[str, str] | None:
    """The current span context as W3C ``traceparent``/``tracestate`` headers, the metric tags and the task.

    The task is the node or row being run. The tags always hold the job when there is one (see
    :func:`~ray_harness.telemetry.runs.current_job`). OpenTelemetry baggage (``Agent(baggage_attributes=...)``)
    goes with the trace context, and without it when tracing is off but an agent of this process set baggage
    (see :mod:`ray_harness.telemetry.baggage`). None when tracing is off, no run scope is open and there is
    no job (no runtime).
    """
    carrier: dict[str, str] = {}
    tags = current_tags()
    # Work that came with no job is the caller's own: it is for the caller's job (the driver's, at the outermost call).
    job = tags.get("job") or own_job()
    if tags:
        label = task_label()
        if label:
            carrier[TASK_KEY] = label
        carrier[_TAGS_KEY] = json.dumps({**tags, "job": job} if job else tags)
    elif job:
        carrier[_TAGS_KEY] = _job_only(job)  # a driver's plain calls: the same string every time
    extensions = carried_names()
    if extensions is not None:
        carrier[_EXTENSIONS_KEY] = json.dumps(extensions)
    if tracing_enabled():
        from opentelemetry.propagate import inject

        inject(carrier)  # the global propagator: W3C trace context and baggage unless OTEL_PROPAGATORS says otherwise
    elif (baggage := sys.modules.get(_BAGGAGE_MODULE)) is not None and baggage.baggage_set_here():
        # Tracing off, but an agent here set Agent(baggage_attributes=...): the baggage still crosses.
        from opentelemetry.baggage.propagation import W3CBaggagePropagator

        W3CBaggagePropagator().inject(carrier)
    return carrier or None


@functools.lru_cache(maxsize=8)
def _job_only(job: str) -> str:
    return json.dumps({"job": job})


@contextlib.contextmanager
def attached(carrier: dict[str, str] | None) -> Iterator[Any]:
    """Make ``carrier``'s span context current for the duration of the block."""
    if not carrier:
        yield None
        return
    extensions = carrier.get(_EXTENSIONS_KEY)
    if extensions is not None:
        adopt(json.loads(extensions))  # before the call builds any agent chain in this process
        carrier = {key: value for key, value in carrier.items() if key != _EXTENSIONS_KEY}
    packed = carrier.get(_TAGS_KEY)
    trace_carrier = {key: value for key, value in carrier.items() if key not in (_TAGS_KEY, TASK_KEY)}
    if packed is None:
        with _trace_attached(trace_carrier) as token:
            yield token
        return
    tags = json.loads(packed)
    with scoped(tags), _trace_attached(trace_carrier) as token:
        yield token


@contextlib.contextmanager
def _trace_attached(carrier: dict[str, str]) -> Iterator[Any]:
    if not carrier:
        yield None
        return
    from opentelemetry import context
    from opentelemetry.propagate import extract

    token = context.attach(extract(carrier))
    try:
        yield token
    finally:
        with contextlib.suppress(ValueError):  # detached from a different context (generator closed elsewhere)
            context.detach(token)
