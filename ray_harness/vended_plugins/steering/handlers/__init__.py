"""Strands' ``strands.vended_plugins.steering.handlers`` (which exports nothing itself).

Its ``llm`` subpackage (``LLMSteeringHandler``, ``LLMPromptMapper``, ``DefaultPromptMapper``) is not provided:
``from ray_harness.vended_plugins.steering.handlers import llm`` raises ``ImportError`` saying what to use.
"""

from __future__ import annotations

from ray_harness._strands_paths import not_provided
from ray_harness.vended_plugins.steering._left_out import REASONS

__all__: tuple[str, ...] = ()

__getattr__ = not_provided(__name__, {"llm": REASONS["llm"]})
