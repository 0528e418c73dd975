"""Agents, graphs and swarms as Ray Serve applications speaking A2A 1.0, and ``A2AAgent`` to call any A2A server.

``app(target, name=..., num_replicas=..., task_store="file:///..." | "s3://...", auth_token=...)`` builds
the Serve application; ``run(app, host=, port=)`` deploys it and returns a handle with ``.url`` and
``.shutdown()``. Tasks, interrupted agents and each ``contextId``'s conversation live in the task store, so
an ``INPUT_REQUIRED`` task is answered, and a conversation continued, on any replica. See
:mod:`ray_harness.serve._server` (protocol), :mod:`ray_harness.serve._store` (durability, leases),
:mod:`ray_harness.serve._blobs` (store backends, compare-and-swap), :mod:`ray_harness.serve._updates`
(subscriptions served from the store), :mod:`ray_harness.serve._contexts` (conversations) and
:mod:`ray_harness.serve.client` (``A2AAgent``).

Importing this package does not import Ray; :func:`app` and :func:`run` do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ray_harness.serve.client import A2AAgent, A2AError

if TYPE_CHECKING:
    from ray_harness.runtime._serve_deploy import ServeHandle

__all__ = ["A2AAgent", "A2AError", "ServeHandle", "app", "run", "serve_until_stopped"]


def app(target: Any, *, name: str, num_replicas: int | None = None, autoscaling_config: dict[str, Any] | None = None,
        task_store: str | None = None, task_store_options: dict[str, Any] | None = None,
        auth_token: str | None = None, description: str | None = None, version: str | None = None,
        max_request_bytes: int = 1 << 20, lease_seconds: float = 30.0,
        ray_actor_options: dict[str, Any] | None = None, max_ongoing_requests: int = 256,
        max_contexts: int = 1000) -> Any:
    """A Ray Serve application serving ``target`` over A2A 1.0 (JSON-RPC at ``/``, card at ``/.well-known/...``).

    Every argument is checked here, before anything is deployed: a bad one is a ``ValueError`` naming it.

    Args:
        target: ``"module:function"`` or a callable building a fresh Agent, Graph or Swarm per task.
        name: The Serve app name and the card's name (letters, digits, ``_.-``; up to 64).
        num_replicas: Fixed replica count (default 1); exclusive with ``autoscaling_config``.
        autoscaling_config: Ray Serve autoscaling settings.
        task_store: ``file:///abs/dir`` or ``s3://bucket/prefix``; ``None`` keeps tasks in each replica's
            memory (one replica only: an interrupted task cannot resume elsewhere).
        task_store_options: For S3: ``endpoint_url``, ``region_name``, ``aws_access_key_id``,
            ``aws_secret_access_key``, ``aws_session_token``, ``profile_name``.
        auth_token: Require ``Authorization: Bearer <token>`` on every call but the card.
        description: The card's description (default: the first line of the target's system prompt).
        version: The card's version (default: the ray_harness version).
        max_request_bytes: Larger request bodies get HTTP 413 (default 1 MiB).
        lease_seconds: A running task whose replica sent no heartbeat for this long is reported ``FAILED``.
        ray_actor_options: Replica resources (default ``{"num_cpus": 0}``: replicas wait on models and people).
        max_ongoing_requests: Concurrent requests per replica.
        max_contexts: Context conversations kept in the task store; beyond it the least recently used ones
            without a task in flight are evicted, and a later message in one starts afresh (Strands' A2A
            server keeps 1,000 too).

    Returns:
        A bound Ray Serve application, for :func:`run` (or Ray Serve's own ``serve.run``).
    """
    from ray_harness.runtime._serve_deploy import app as build

    return build(target, name=name, num_replicas=num_replicas, autoscaling_config=autoscaling_config,
                 task_store=task_store, task_store_options=task_store_options, auth_token=auth_token,
                 description=description, version=version, max_request_bytes=max_request_bytes,
                 lease_seconds=lease_seconds, ray_actor_options=ray_actor_options,
                 max_ongoing_requests=max_ongoing_requests, max_contexts=max_contexts)


def run(application: Any, *, host: str = "127.0.0.1", port: int = 8000, blocking: bool = False,
        route_prefix: str = "/", name: str | None = None) -> ServeHandle:
    """Deploy ``application`` (from :func:`app`) on Ray Serve and return its handle (``.url``, ``.shutdown()``).

    Joins the connected Ray, else ``RAY_ADDRESS`` when set, else starts an embedded local Ray. Starts Ray
    Serve's HTTP proxy on ``host:port`` unless Serve already runs (then that port must match: one HTTP proxy
    per Ray cluster; serve several apps under different ``route_prefix`` values).

    Args:
        application: The bound application.
        host: Interface of the HTTP proxy.
        port: Its port.
        blocking: Serve until Ctrl-C / SIGTERM, then shut down.
        route_prefix: Where the app is mounted (default ``/``); the card's URL includes it.
        name: Serve app name (default: the ``name=`` given to :func:`app`).
    """
    from ray_harness.runtime._serve_deploy import run as deploy

    return deploy(application, host=host, port=port, blocking=blocking, route_prefix=route_prefix, name=name)


def serve_until_stopped(handle: ServeHandle) -> None:
    """Block until Ctrl-C or SIGTERM, then ``handle.shutdown()`` (what ``ray-harness serve`` does)."""
    from ray_harness.runtime._serve_deploy import serve_until_stopped as wait

    wait(handle)


def __getattr__(name: str) -> Any:
    if name == "ServeHandle":
        from ray_harness.runtime._serve_deploy import ServeHandle

        return ServeHandle
    raise AttributeError(f"module 'ray_harness.serve' has no attribute {name!r}")
