"""Connect to Ray, or start an embedded local Ray sized for a small machine."""

from __future__ import annotations

import os
import socket
from typing import Any

import ray

__all__ = ("DEFAULT_NAMESPACE", "TOKEN_HELP", "current_namespace", "ensure_initialized", "init", "is_initialized",
           "shutdown")

DEFAULT_NAMESPACE = "ray_harness"
_CONNECT_TIMEOUT_S = 5.0
TOKEN_HELP = ("If the cluster uses token authentication (the default in Ray >= 2.60), set RAY_AUTH_MODE=token "
              "and put the token from `ray get-auth-token` into ~/.ray/auth_token (or RAY_AUTH_TOKEN).")


def is_initialized() -> bool:
    return bool(ray.is_initialized())


def init(address: str | None = None, **ray_init_kwargs: Any) -> dict[str, Any]:
    """Connect to ``address`` (or ``RAY_ADDRESS``), else to Ray's default: a local Ray. Idempotent.

    With neither, Ray's own rule applies: a cluster started on this machine with ``ray start`` (for
    example by ``cluster/local.sh``) is joined, otherwise an embedded Ray starts in this process.
    Pass ``address="local"`` to always start an embedded one.

    Defaults: namespace ``"ray_harness"`` (shared by every driver that uses it) and, for the
    embedded Ray, no dashboard (it costs ≈4 s of start-up and ≈1 GB; pass
    ``include_dashboard=True`` to get it). Returns a small description of the connection.

    Raises:
        ConnectionError: ``address`` names a host:port that does not answer (checked with a
            short TCP probe first, so an unreachable cluster fails in seconds, not minutes).

    """
    if ray.is_initialized():
        return _describe()
    address = address or os.environ.get("RAY_ADDRESS") or None
    ray_init_kwargs.setdefault("namespace", DEFAULT_NAMESPACE)
    ray_init_kwargs.setdefault("log_to_driver", True)
    if address is None:
        ray_init_kwargs.setdefault("include_dashboard", False)
    else:
        _probe(address)
    try:
        ray.init(address=address, **ray_init_kwargs)
    except ConnectionError as error:
        raise ConnectionError(f"could not connect to Ray at {address!r}: {error}. {TOKEN_HELP}") from error
    from ray_harness.runtime._telemetry import prepare_driver_process

    prepare_driver_process()  # the driver's own metrics (evaluation rows) reach Ray's Prometheus endpoint too
    return _describe()


def ensure_initialized() -> None:
    """Start (or join, with ``RAY_ADDRESS``) Ray when nothing did yet: handles work without an explicit init."""
    if not ray.is_initialized():
        init()


def shutdown() -> None:
    """Disconnect this driver (an embedded Ray stops with it; a cluster keeps running)."""
    if ray.is_initialized():
        ray.shutdown()


def current_namespace() -> str:
    return str(ray.get_runtime_context().namespace)


def _describe() -> dict[str, Any]:
    context = ray.get_runtime_context()
    return {"namespace": context.namespace, "node_id": context.get_node_id(), "gcs_address": context.gcs_address}


def _probe(address: str) -> None:
    """Fail fast and clearly on an unreachable ``host:port`` (Ray itself retries for a long time)."""
    if address in ("auto", "local"):
        return
    target = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        return  # not host:port; let ray.init judge it
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=_CONNECT_TIMEOUT_S):
            pass
    except OSError as error:
        raise ConnectionError(
            f"cannot reach the Ray cluster at {address!r} ({error}); check the address, that the head node is "
            f"running (`ray start --head`) and that the port is open. {TOKEN_HELP}"
        ) from None
