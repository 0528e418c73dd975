"""Strands' import path ``strands.tools.executors.sequential``.

The same objects as :mod:`ray_harness.tools.executors` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.tools.executors import SequentialToolExecutor

__all__ = ("SequentialToolExecutor",)
