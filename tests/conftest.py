"""Shared fixtures.

``RAY_HARNESS_REQUIRE_SERVICES=1`` (set by ``.ci/run``) turns a missing real
service (dockerd, sshd, moto server, Ray) into a test failure instead of a skip.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from ray_harness.testing import ScriptedModel


def services_required() -> bool:
    return os.environ.get("RAY_HARNESS_REQUIRE_SERVICES") == "1"


def missing_service(reason: str) -> None:
    """Skip locally, fail in CI: a test that needs a real service must not silently pass."""
    if services_required():
        pytest.fail(f"required service unavailable: {reason}")
    pytest.skip(reason)


@pytest.fixture
def script() -> Iterator[Callable[..., ScriptedModel]]:
    """Factory for ScriptedModels that are all checked for unused steps after the test."""
    made: list[ScriptedModel] = []

    def make(*steps: object, **kwargs: object) -> ScriptedModel:
        model = ScriptedModel(*steps, **kwargs)  # type: ignore[arg-type]
        made.append(model)
        return model

    yield make
    for model in made:
        model.assert_complete()


def _telemetry_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key.startswith("OTEL_")}


@pytest.fixture(autouse=True)
def _telemetry_env_unchanged() -> Iterator[None]:
    """A test that leaves OTEL_* variables behind sends the spans of every later process (subprocesses,
    new actors, Serve replicas) to an endpoint that is gone; their exits then hang on export retries."""
    before = _telemetry_env()
    yield
    after = _telemetry_env()
    assert after == before, f"the test changed OTEL_* environment variables: {before} -> {after}"
