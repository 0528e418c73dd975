"""How a driver's first ``runtime="ray"`` call starts its hosts: every host asked for before any is waited for.

A newcomer's first Graph waited for the node hosts' processes to start, and only then asked for the
orchestration host and waited for its process as well: two process start-ups one after the other, where Ray
starts them side by side. Asserted on the order of the asks and waits, not on time.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """``("ask", name)`` per host asked for, ``("wait", name)`` per host waited for, in order; no pool cached."""
    from ray_harness.runtime import _multiagent_pool, pool

    recorded: list[tuple[str, str]] = []
    acquire, wait = pool.acquire_host, pool.call_sync

    def asked(namespace: str, name: str, index: int, options: dict[str, Any]) -> Any:
        recorded.append(("ask", name))
        return acquire(namespace, name, index, options)

    def waited(ref: Any, actor_name: str, **kwargs: Any) -> Any:
        recorded.append(("wait", actor_name))
        return wait(ref, actor_name, **kwargs)

    monkeypatch.setattr(pool, "acquire_host", asked)
    monkeypatch.setattr(pool, "call_sync", waited)
    # This process's pools are kept per namespace: start as a fresh driver does (the hosts may be reused).
    monkeypatch.setattr(_multiagent_pool, "_pools", {})
    monkeypatch.setattr(_multiagent_pool, "_orchestration_pools", {})
    return recorded


def test_the_first_pool_asks_for_the_orchestration_and_node_hosts_before_waiting_for_any(
        calls: list[tuple[str, str]]) -> None:
    from ray_harness.runtime import _multiagent_pool

    node_pool = _multiagent_pool.default_pool()
    orchestration = _multiagent_pool._orchestration_pools[node_pool.namespace]
    hosts = orchestration.host_names + node_pool.host_names
    assert hosts[0].startswith("ray_harness:orchestrator:")  # the first call goes there: it gets the first process
    assert calls == [("ask", name) for name in hosts] + [("wait", name) for name in hosts]
    assert _multiagent_pool.orchestration_pool() is orchestration  # started once, with the node pool


def test_a_node_pool_started_again_keeps_a_live_orchestration_pool(calls: list[tuple[str, str]]) -> None:
    from ray_harness.runtime import _multiagent_pool

    orchestration = _multiagent_pool.orchestration_pool()
    calls.clear()
    node_pool = _multiagent_pool.default_pool()
    assert _multiagent_pool._orchestration_pools[node_pool.namespace] is orchestration
    assert calls == [("ask", name) for name in node_pool.host_names] + [("wait", name) for name in node_pool.host_names]
