"""``Agent(baggage_attributes=...)``: OpenTelemetry baggage current for the length of each invocation (as in Strands).

Baggage is attached before the invocation's span starts, so span processors (a baggage span processor copying
entries onto spans, for instance) see it at the start of every span of the invocation, and it is detached after
that span ends. Processes the invocation calls receive it with the trace context: :func:`current_carrier
<ray_harness.telemetry.propagation.current_carrier>` injects it with the global propagator (W3C ``baggage`` by
default) when tracing is on, and with the W3C baggage propagator alone when tracing is off but an agent of this
process set baggage, so a tool on another Ray process still reads it. This module is imported only by agents
given baggage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import baggage, context

__all__ = ("attach_baggage", "baggage_set_here", "detach_baggage")

_state = {"set_here": False}


def attach_baggage(entries: Mapping[str, str]) -> Any:
    """Make the current context's baggage plus ``entries`` current; the token for :func:`detach_baggage`."""
    current = context.get_current()
    for key, value in entries.items():
        current = baggage.set_baggage(key, value, context=current)
    _state["set_here"] = True
    return context.attach(current)


def detach_baggage(token: Any) -> None:
    """Restore the context :func:`attach_baggage` replaced."""
    try:
        context.detach(token)
    except ValueError:  # detached from another context (a generator finished elsewhere)
        pass


def baggage_set_here() -> bool:
    """Whether an agent of this process ever set baggage (then carriers hold it even with tracing off)."""
    return _state["set_here"]
