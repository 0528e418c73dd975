"""Strands' import path ``strands.types.interrupt``.

The same objects as :mod:`ray_harness.types.content` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.types.content import InterruptResponse, InterruptResponseContent

__all__ = ("InterruptResponse", "InterruptResponseContent")
