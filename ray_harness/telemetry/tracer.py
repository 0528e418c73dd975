"""Strands' import path ``strands.telemetry.tracer``.

The same objects as :mod:`ray_harness.telemetry` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.telemetry import Tracer, get_tracer

__all__ = ("Tracer", "get_tracer")
