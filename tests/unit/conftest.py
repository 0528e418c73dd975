"""Unit tests run without Ray: any ``import ray`` here fails."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
