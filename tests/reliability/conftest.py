"""Reliability suite: fuzzing here runs without Ray; fault injection lives in tests/integration."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# CI runs the full 1,000 examples per property; RAY_HARNESS_FUZZ_EXAMPLES shortens local runs.
settings.register_profile("ray_harness", max_examples=int(os.environ.get("RAY_HARNESS_FUZZ_EXAMPLES", "1000")),
                          deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=False)
settings.load_profile("ray_harness")
