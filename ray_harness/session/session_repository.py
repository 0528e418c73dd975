"""Strands' import path ``strands.session.session_repository``.

The same objects as :mod:`ray_harness.session` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.session import SessionRepository

__all__ = ("SessionRepository",)
