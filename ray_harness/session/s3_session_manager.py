"""Strands' import path ``strands.session.s3_session_manager``.

The same objects as :mod:`ray_harness.session` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.session import S3SessionManager

__all__ = ("S3SessionManager",)
