"""W3C trace context across process boundaries (Ray actor calls).

The caller puts :func:`current_carrier` into the call's options; the actor wraps the call in
:func:`attached`, so spans created in the actor are children of the caller's current span and one
trace shows a whole distributed run. Both cost nothing when tracing is off.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ray_harness.telemetry.config import tracing_enabled

__all__ = ("attached", "current_carrier")


def current_carrier() -> dict[str, str] | None:
    """The current span context as W3C ``traceparent``/``tracestate`` headers (None when tracing is off)."""
    if not tracing_enabled():
        return None
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier or None


@contextlib.contextmanager
def attached(carrier: dict[str, str] | None) -> Iterator[Any]:
    """Make ``carrier``'s span context current for the duration of the block."""
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
