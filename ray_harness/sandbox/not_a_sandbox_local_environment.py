"""Strands' import path ``strands.sandbox.not_a_sandbox_local_environment``.

The same objects as :mod:`ray_harness.sandbox` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.sandbox import NotASandboxLocalEnvironment

__all__ = ("NotASandboxLocalEnvironment",)
