"""Strands' import path ``strands.tools.executors.concurrent``.

The same objects as :mod:`ray_harness.tools.executors` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.tools.executors import ConcurrentToolExecutor

__all__ = ("ConcurrentToolExecutor",)
