"""What ``runtime.init`` asks Ray for, per address: no Ray is started (``ray.init`` records its arguments)."""

from __future__ import annotations

from typing import Any

import pytest


class _Stop(Exception):
    pass


@pytest.fixture
def init_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str | None, dict[str, Any]]]:
    import ray

    calls: list[tuple[str | None, dict[str, Any]]] = []

    def init(address: str | None = None, **kwargs: Any) -> None:
        calls.append((address, kwargs))
        raise _Stop

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return calls


@pytest.mark.parametrize("address", [None, "local"])
def test_an_embedded_ray_starts_without_the_dashboard(address: str | None,
                                                      init_calls: list[tuple[str | None, dict[str, Any]]]) -> None:
    """``runtime.init("local")`` (the examples' own Ray) started the dashboard: ≈4 s, ≈1 GB and port 8265."""
    from ray_harness import runtime

    with pytest.raises(_Stop):
        runtime.init(address)
    assert init_calls == [(address, {"namespace": "ray_harness", "log_to_driver": True, "include_dashboard": False})]


def test_the_dashboard_is_there_when_asked_for(init_calls: list[tuple[str | None, dict[str, Any]]]) -> None:
    from ray_harness import runtime

    with pytest.raises(_Stop):
        runtime.init("local", include_dashboard=True)
    assert init_calls[0][1]["include_dashboard"] is True


def test_joining_a_cluster_leaves_its_dashboard_alone(init_calls: list[tuple[str | None, dict[str, Any]]]) -> None:
    from ray_harness import runtime

    with pytest.raises(_Stop):
        runtime.init("auto")
    assert "include_dashboard" not in init_calls[0][1]
