"""Is a Ray address reachable? A short TCP connect before Ray gets the address (Ray-free).

Ray retries an address that does not answer for a minute or more (``ray.init`` waits for the GCS, the Jobs
client for the GCS that tells it the dashboard's URL); a host that drops packets hangs longer. One TCP connect
with a short timeout turns that into an error naming the address within seconds. Only addresses that name a
host and port are checked: ``auto``, ``local`` and anything else Ray resolves itself go to Ray as they are.
"""

from __future__ import annotations

import os
import socket
from typing import Literal
from urllib.parse import urlsplit

__all__ = ("CONNECT_TIMEOUT_S", "check_reachable", "endpoint")

CONNECT_TIMEOUT_S = 5.0
"""How long the TCP connect may take: a cluster across a VPN answers in far less; a dropped packet never does."""

_DEFAULT_PORTS = {"ray": 10001, "http": 80, "https": 443}

_FIX = {
    "gcs": ("give the head's GCS address <head>:6379 (the --port of `ray start --head`), or 'auto' on a node of "
            "the cluster"),
    "jobs": ("give the dashboard URL http://<head>:8265 (reachable from other machines only if the head "
                  "started with --dashboard-host=0.0.0.0; else tunnel it: `ssh -L 8265:localhost:8265 <head>`), "
                  "or the head's GCS address <head>:6379"),
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
    """Connect to ``address``'s host and port once (then close); a failure is a ``ConnectionError`` saying why.

    Args:
        address: A Ray address (see :func:`endpoint`); those Ray resolves itself are not checked.
        service: What ``address`` is for, for the hint: joining the cluster (``ray.init``: its GCS), or the
            Jobs API (its dashboard, or the GCS that tells where the dashboard is).
        timeout_s: How long the connect may take.

    Raises:
        ConnectionError: Nothing answers there: the message names the address (and ``RAY_ADDRESS`` when it
            came from there), what went wrong, and which address to give instead.
    """
    target = endpoint(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout_s):
            pass
    except OSError as error:
        web = urlsplit(address.strip()).scheme.lower() in ("http", "https")
        what = "the Ray dashboard" if web else "the Ray cluster"
        source = " (from RAY_ADDRESS)" if address == os.environ.get("RAY_ADDRESS") else ""
        raise ConnectionError(
            f"cannot reach {what} at {address!r}{source}: {_reason(error, target, timeout_s)}. Check that the head "
            f"node is up (`ray status` on it) and that this machine can reach that host and port (firewall, "
            f"security group, VPN); {_FIX[service]}") from None


def _reason(error: OSError, target: tuple[str, int], timeout_s: float) -> str:
    host, port = target
    if isinstance(error, socket.gaierror):
        return f"unknown host {host!r}"
    if isinstance(error, TimeoutError):  # socket.timeout is TimeoutError
        return f"no answer from {host}:{port} within {timeout_s:g} s (the host is down, or a firewall drops packets)"
    if isinstance(error, ConnectionRefusedError):
        return f"connection refused by {host}:{port} (nothing listens on that port)"
    return f"{host}:{port}: {error.strerror or error}"
