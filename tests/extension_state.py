"""The autouse fixture that gives each extension test a process without extensions (import it into a module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ray_harness.extensions import loading


@pytest.fixture(autouse=True)
def clean_extensions(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No ``RAY_HARNESS_EXTENSIONS`` and nothing installed, before and after the test."""
    monkeypatch.delenv(loading.ENV_VAR, raising=False)
    loading.reset()
    yield
    loading.reset()
