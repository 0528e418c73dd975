"""The TCP check before Ray gets an address: which addresses are checked, and what an unreachable one says."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from ray_harness.runtime._reach import CONNECT_TIMEOUT_S, check_reachable, endpoint


@pytest.fixture
def refused_address() -> Iterator[str]:
    """A port bound here but not listening: a connect to it is refused (and no other process can take it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def listening_address() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize(("address", "target"), [
    ("10.0.0.5:6379", ("10.0.0.5", 6379)),
    (" head.example:6379 ", ("head.example", 6379)),
    ("[::1]:6379", ("::1", 6379)),
    ("ray://head:10002", ("head", 10002)),
    ("ray://head", ("head", 10001)),
    ("http://head:8265", ("head", 8265)),
    ("http://head:8265/", ("head", 8265)),
    ("https://ray.example/prefix", ("ray.example", 443)),
    ("http://ray.example", ("ray.example", 80)),
    ("HTTP://Head:8265", ("head", 8265)),
    ("auto", None),
    ("local", None),
    ("head", None),
    ("anyscale://my-cluster", None),
    ("http://head:port", None),
    ("", None),
])
def test_only_a_host_and_port_are_checked(address: str, target: tuple[str, int] | None) -> None:
    assert endpoint(address) == target


def test_a_refused_port_names_the_address_and_what_to_give(refused_address: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ConnectionError) as raised:
        check_reachable(refused_address, "gcs")
    message = str(raised.value)
    assert message.startswith(f"cannot reach the Ray cluster at {refused_address!r}: connection refused by ")
    assert "<head>:6379" in message and "'auto'" in message
    assert "RAY_ADDRESS" not in message


def test_a_dashboard_url_is_called_a_dashboard_and_the_hint_is_for_jobs(refused_address: str) -> None:
    url = f"http://{refused_address}"
    with pytest.raises(ConnectionError) as raised:
        check_reachable(url, "jobs")
    message = str(raised.value)
    assert message.startswith(f"cannot reach the Ray dashboard at {url!r}: connection refused")
    assert "http://<head>:8265" in message and "--dashboard-host=0.0.0.0" in message


def test_an_address_from_ray_address_says_so(refused_address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", refused_address)
    with pytest.raises(ConnectionError, match=r"\(from RAY_ADDRESS\)"):
        check_reachable(refused_address, "gcs")


def test_a_host_that_drops_packets_fails_after_the_short_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """No answer at all (a firewall dropping packets): one connect with a short timeout, not Ray's retries."""
    calls: list[tuple[Any, Any]] = []

    def silent(target: Any, timeout: Any = None) -> socket.socket:
        calls.append((target, timeout))
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", silent)
    with pytest.raises(ConnectionError) as raised:
        check_reachable("192.0.2.1:6379", "gcs")
    assert calls == [(("192.0.2.1", 6379), CONNECT_TIMEOUT_S)]
    assert f"no answer from 192.0.2.1:6379 within {CONNECT_TIMEOUT_S:g} s" in str(raised.value)


def test_an_unknown_host_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown(target: Any, timeout: Any = None) -> socket.socket:
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "create_connection", unknown)
    with pytest.raises(ConnectionError, match=r"unknown host 'no-such-head\.invalid'"):
        check_reachable("no-such-head.invalid:6379", "gcs")


def test_a_listening_port_passes(listening_address: str) -> None:
    check_reachable(listening_address, "gcs")
    check_reachable(f"http://{listening_address}", "jobs")


@pytest.mark.parametrize("address", ["auto", "local", "head", "anyscale://my-cluster"])
def test_addresses_ray_resolves_itself_are_not_contacted(address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def contacted(*_: Any, **__: Any) -> socket.socket:
        raise AssertionError("contacted")

    monkeypatch.setattr(socket, "create_connection", contacted)
    check_reachable(address, "gcs")
