"""Strands' import path ``strands.models.model``.

The same objects as :mod:`ray_harness.models` holds: a program written for Strands runs with its imports switched.
"""

from ray_harness.models import CacheConfig, CacheToolsConfig, Model

__all__ = ("CacheConfig", "CacheToolsConfig", "Model")
