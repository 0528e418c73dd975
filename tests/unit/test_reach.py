"""The check before Ray gets an address: which addresses are checked, what an unreachable one says, and what a
port that answers but is not Ray's gRPC server (a web server, Redis, a silent one) says."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
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


@pytest.fixture
def grpc_address() -> Iterator[str]:
    """A gRPC server with no services: what the GCS and Ray Client server are to the check (both are gRPC)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(grace=None)


@pytest.fixture
def answering() -> Iterator[Callable[[bytes | None], str]]:
    """``answering(reply)``: the address of a server that reads the hello, sends ``reply`` (``None``: closes at
    once), then closes; the test's server thread is joined at the end."""
    threads: list[threading.Thread] = []
    sockets: list[socket.socket] = []

    def serve(sock: socket.socket, reply: bytes | None) -> None:
        sock.settimeout(30.0)  # a check that never connects fails its test instead of hanging the join below
        try:
            connection, _ = sock.accept()
        except TimeoutError:
            return
        with connection:
            if reply is not None:
                connection.recv(1024)
                connection.sendall(reply)

    def start(reply: bytes | None) -> str:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        sockets.append(sock)
        threads.append(threading.Thread(target=serve, args=(sock, reply), daemon=True))
        threads[-1].start()
        return f"127.0.0.1:{sock.getsockname()[1]}"

    yield start
    for thread in threads:
        thread.join()
    for sock in sockets:
        sock.close()


def test_a_grpc_server_passes_as_a_gcs_and_as_ray_client(grpc_address: str) -> None:
    check_reachable(grpc_address, "gcs")
    check_reachable(grpc_address, "jobs")
    check_reachable(f"ray://{grpc_address}", "gcs")


def test_a_listening_dashboard_port_passes(listening_address: str) -> None:
    """A dashboard URL gets the TCP connect only (it is HTTP/1; the Jobs client checks its version itself)."""
    check_reachable(f"http://{listening_address}", "jobs")


def test_a_web_server_given_as_a_gcs_is_named_as_one(answering: Callable[[bytes | None], str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard's port given as the GCS address: Ray waited for its gRPC answer for minutes."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    address = answering(b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\n\r\nPause on PRI/Upgrade")
    with pytest.raises(ConnectionError) as raised:
        check_reachable(address, "gcs")
    message = str(raised.value)
    assert message.startswith(f"{address!r} is not a Ray GCS: {address} answers HTTP/1 ('HTTP/1.0 400 Bad Request'): "
                              "a web server, such as the Ray dashboard, not gRPC; give the head's GCS address "
                              "<head>:6379"), message


def test_a_web_server_given_to_jobs_as_host_port_is_told_to_be_a_url(answering: Callable[[bytes | None], str]) -> None:
    address = answering(b"<!DOCTYPE HTML>\n<html>")  # http.server's page for a request line it cannot parse
    with pytest.raises(ConnectionError, match=rf"answers HTTP/1 .*; if it is the dashboard, give it as a URL: "
                                              rf"http://{address}; else give the dashboard URL"):
        check_reachable(address, "jobs")


def test_another_protocol_is_quoted(answering: Callable[[bytes | None], str]) -> None:
    address = answering(b"-ERR unknown command 'PRI'\r\n")  # Redis, on 6379 where a GCS often is
    with pytest.raises(ConnectionError, match=r"is not a Ray GCS: .* answered \"-ERR unknown command 'PRI'\", not "
                                              r"the gRPC \(HTTP/2\) a Ray server answers"):
        check_reachable(address, "gcs")


def test_a_server_that_closes_at_once_is_not_a_gcs(answering: Callable[[bytes | None], str]) -> None:
    address = answering(None)
    with pytest.raises(ConnectionError, match=r"accepted the connection and closed it without answering"):
        check_reachable(address, "gcs")


def test_a_silent_server_is_given_up_on_after_the_timeout(listening_address: str) -> None:
    """It accepts (the kernel does) and never answers: after ``timeout_s``, not Ray's minutes."""
    with pytest.raises(ConnectionError, match=r"accepted the connection but answered nothing within 0.05 s"):
        check_reachable(listening_address, "gcs", timeout_s=0.05)


def test_a_ray_client_address_that_is_not_ray_client_says_which_port_to_give(
        answering: Callable[[bytes | None], str]) -> None:
    """``ray://`` to a port that is not a Ray Client server: Ray Client waited 30 s and blamed the token."""
    address = f"ray://{answering(b'HTTP/1.1 404 Not Found' + bytes(16))}"
    with pytest.raises(ConnectionError) as raised:
        check_reachable(address, "gcs")
    message = str(raised.value)
    assert message.startswith(f"{address!r} is not a Ray Client server: "), message
    assert "ray://<head>:10001" in message and "--ray-client-server-port" in message


def test_with_tls_only_the_connect_is_made(listening_address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A TLS GCS answers a plain HTTP/2 hello with nothing it could parse: RAY_USE_TLS leaves the hello out."""
    monkeypatch.setenv("RAY_USE_TLS", "1")
    check_reachable(listening_address, "gcs", timeout_s=0.05)
    check_reachable(f"ray://{listening_address}", "gcs", timeout_s=0.05)


@pytest.mark.parametrize("url", ["http://head:8265", "https://ray.example/prefix"])
def test_a_dashboard_url_to_join_the_cluster_is_refused_without_contacting_it(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``status``/``cancel``/``runtime.init`` join through the GCS; Ray itself refuses an HTTP address, later."""
    def contacted(*_: Any, **__: Any) -> socket.socket:
        raise AssertionError("contacted")

    monkeypatch.setattr(socket, "create_connection", contacted)
    monkeypatch.setenv("RAY_ADDRESS", url)
    with pytest.raises(ConnectionError) as raised:
        check_reachable(url, "gcs")
    assert str(raised.value).startswith(f"{url!r} (from RAY_ADDRESS) is a dashboard URL: joining the cluster needs "
                                        "its GCS address"), raised.value


@pytest.mark.parametrize("address", ["auto", "local", "head", "anyscale://my-cluster"])
def test_addresses_ray_resolves_itself_are_not_contacted(address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def contacted(*_: Any, **__: Any) -> socket.socket:
        raise AssertionError("contacted")

    monkeypatch.setattr(socket, "create_connection", contacted)
    check_reachable(address, "gcs")
