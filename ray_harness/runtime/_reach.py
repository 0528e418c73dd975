"""Is a Ray address reachable, and is it Ray? A short connect and hello before Ray gets the address (Ray-free).

Ray retries an address that does not answer for a minute or more (``ray.init`` waits for the GCS, the Jobs
client for the GCS that tells it the dashboard's URL, Ray Client for its server); a host that drops packets
hangs longer. So does a port that answers but is not Ray (a dashboard or web server, Redis, SSH): Ray waits for
a gRPC answer that never comes. One TCP connect with a short timeout, then, for the gRPC servers (the GCS at
``host:port``, Ray Client at ``ray://host:port``), the opening of an HTTP/2 connection: every gRPC server,
Ray's included, answers it at once with a SETTINGS frame; anything else answers something else, or nothing.
That turns both into an error naming the address within seconds. Only addresses that name a host and port are
checked: ``auto``, ``local`` and anything else Ray resolves itself go to Ray as they are. With ``RAY_USE_TLS``
set the gRPC servers speak TLS first, so only the TCP connect is made.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Literal
from urllib.parse import urlsplit

__all__ = ("CONNECT_TIMEOUT_S", "check_reachable", "endpoint")

CONNECT_TIMEOUT_S = 5.0
"""How long the TCP connect (and then the gRPC server's first answer) may take: a cluster across a VPN answers
in far less; a dropped packet never does."""

_DEFAULT_PORTS = {"ray": 10001, "http": 80, "https": 443}

# The HTTP/2 client connection preface, then an empty SETTINGS frame (length 0, type 0x4, no flags, stream 0).
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_FRAME_HEADER = 9  # bytes: length (3), type (1), flags (1), stream id (4)
_SETTINGS = 0x4

_FIX = {
    "gcs": ("give the head's GCS address <head>:6379 (the --port of `ray start --head`), or 'auto' on a node of "
            "the cluster"),
    "jobs": ("give the dashboard URL http://<head>:8265 (reachable from other machines only if the head "
                  "started with --dashboard-host=0.0.0.0; else tunnel it: `ssh -L 8265:localhost:8265 <head>`), "
                  "or the head's GCS address <head>:6379"),
    "client": ("give the head's Ray Client address ray://<head>:10001 (the --ray-client-server-port of `ray start "
               "--head`), or its GCS address <head>:6379"),
}


def endpoint(address: str) -> tuple[str, int] | None:
    """The ``(host, port)`` that ``address`` connects to first, or ``None`` when Ray resolves it itself.

    ``host:port`` and ``[v6]:port`` (a GCS), ``ray://host[:port]`` (Ray Client, port 10001 by default),
    ``http(s)://host[:port][/path]`` (a dashboard, ports 80 / 443 by default). ``auto``, ``local``, a bare host
    and other schemes: ``None``.
    """
    text = address.strip()
    if "://" in text:
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS or not parts.hostname:
            return None
        try:
            port = parts.port
        except ValueError:  # not a number: Ray says what is wrong with it
            return None
        return parts.hostname, port or _DEFAULT_PORTS[scheme]
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        return None
    return host.strip("[]"), int(port_text)


def check_reachable(address: str, service: Literal["gcs", "jobs"], *,
                    timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Connect to ``address``'s host and port once and, for a gRPC server, say hello (then close).

    Args:
        address: A Ray address (see :func:`endpoint`); those Ray resolves itself are not checked.
        service: What ``address`` is for, for the hint: joining the cluster (``ray.init``: its GCS), or the
            Jobs API (its dashboard, or the GCS that tells where the dashboard is).
        timeout_s: How long the connect may take, and then the gRPC server's first answer.

    Raises:
        ConnectionError: Nothing answers there, or something that is not Ray's gRPC server (the GCS at
            ``host:port``, Ray Client at ``ray://``) does, or ``service`` is ``"gcs"`` and ``address`` is a
            dashboard URL (Ray joins a cluster through its GCS only): the message names the address (and
            ``RAY_ADDRESS`` when it came from there), what went wrong, and which address to give instead.
    """
    target = endpoint(address)
    if target is None:
        return
    scheme = urlsplit(address.strip()).scheme.lower() if "://" in address else ""
    source = " (from RAY_ADDRESS)" if address == os.environ.get("RAY_ADDRESS") else ""
    if service == "gcs" and scheme in ("http", "https"):
        raise ConnectionError(f"{address!r}{source} is a dashboard URL: joining the cluster needs its GCS address, "
                              f"not the dashboard's; {_FIX['gcs']}")
    grpc = scheme in ("", "ray") and os.environ.get("RAY_USE_TLS", "0").lower() not in ("1", "true")
    try:
        with socket.create_connection(target, timeout=timeout_s) as connection:
            answer = _hello(connection, timeout_s) if grpc else b""
    except OSError as error:
        what = "the Ray dashboard" if scheme in ("http", "https") else "the Ray cluster"
        raise ConnectionError(
            f"cannot reach {what} at {address!r}{source}: {_reason(error, target, timeout_s)}. Check that the head "
            f"node is up (`ray status` on it) and that this machine can reach that host and port (firewall, "
            f"security group, VPN); {_FIX[service]}") from None
    if grpc and not _is_settings(answer):
        host, port = target
        server = "Ray Client server" if scheme == "ray" else "Ray GCS"
        raise ConnectionError(f"{address!r}{source} is not a {server}: {host}:{port} {_said(answer, timeout_s)}; "
                              f"{_hint(answer, service, scheme, target)}")


def _hello(connection: socket.socket, timeout_s: float) -> bytes | None:
    """Send the HTTP/2 opening; what came back before a frame header's worth (``None``: nothing in time)."""
    deadline = time.monotonic() + timeout_s
    answer = b""
    try:
        connection.sendall(_H2_HELLO)
        while len(answer) < _FRAME_HEADER:
            connection.settimeout(max(0.0, deadline - time.monotonic()) or 1e-3)
            chunk = connection.recv(256)
            if not chunk:
                break
            answer += chunk
    except TimeoutError:
        return answer or None
    except OSError:  # reset after our hello: it is not HTTP/2, and had its say (or not) in `answer`
        pass
    return answer


def _is_settings(answer: bytes | None) -> bool:
    """Whether ``answer`` opens with a server's SETTINGS frame (type 0x4, not an ACK, stream 0)."""
    return (answer is not None and len(answer) >= _FRAME_HEADER and answer[3] == _SETTINGS
            and not answer[4] & 0x1 and answer[5:9] == b"\x00\x00\x00\x00")


def _said(answer: bytes | None, timeout_s: float) -> str:
    if answer is None:
        return f"accepted the connection but answered nothing within {timeout_s:g} s (a gRPC server answers at once)"
    if not answer:
        return "accepted the connection and closed it without answering (a gRPC server answers)"
    first = answer.split(b"\r\n", 1)[0].split(b"\n", 1)[0][:80].decode("ascii", "replace")
    if _is_web(answer):
        return f"answers HTTP/1 ({first!r}): a web server, such as the Ray dashboard, not gRPC"
    return f"answered {first!r}, not the gRPC (HTTP/2) a Ray server answers"


def _is_web(answer: bytes | None) -> bool:
    """An HTTP/1 status line, or the HTML page some servers send to a request line they cannot parse."""
    return answer is not None and answer.lstrip().startswith((b"HTTP/", b"<"))


def _hint(answer: bytes | None, service: Literal["gcs", "jobs"], scheme: str, target: tuple[str, int]) -> str:
    host, port = target
    if scheme == "ray":
        return _FIX["client"]
    if service == "jobs" and _is_web(answer):
        return f"if it is the dashboard, give it as a URL: http://{host}:{port}; else {_FIX['jobs']}"
    return _FIX[service]


def _reason(error: OSError, target: tuple[str, int], timeout_s: float) -> str:
    host, port = target
    if isinstance(error, socket.gaierror):
        return f"unknown host {host!r}"
    if isinstance(error, TimeoutError):  # socket.timeout is TimeoutError
        return f"no answer from {host}:{port} within {timeout_s:g} s (the host is down, or a firewall drops packets)"
    if isinstance(error, ConnectionRefusedError):
        return f"connection refused by {host}:{port} (nothing listens on that port)"
    return f"{host}:{port}: {error.strerror or error}"
