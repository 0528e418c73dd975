"""Agents, graphs and swarms as Ray Serve applications speaking A2A 1.0, and ``A2AAgent`` to call any A2A server.

``app(target, name=..., num_replicas=..., task_store="file:///..." | "s3://...", auth_token=...)`` builds
the Serve application; ``run(app, host=, port=)`` deploys it and returns a handle with ``.url`` and
``.shutdown()``. Tasks, interrupted agents and each ``contextId``'s conversation live in the task store, so
an ``INPUT_REQUIRED`` task is answered, and a conversation continued, on any replica. See
:mod:`ray_harness.serve._server` (protocol), :mod:`ray_harness.serve._store` (durability, leases),
:mod:`ray_harness.serve._contexts` (conversations) and :mod:`ray_harness.serve.client` (``A2AAgent``).

Importing this package does not import Ray; :func:`app` and :func:`run` do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ray_harness.serve.client import A2AAgent, A2AError

if TYPE_CHECKING:
    from ray_harness.runtime._serve_deploy import ServeHandle

__all__ = ["A2AAgent", "A2AError", "ServeHandle", "app", "run", "serve_until_stopped"]


def app(target: Any, **kwargs: Any) -> Any:
    """A Ray Serve application serving ``target`` over A2A 1.0; see :func:`ray_harness.runtime._serve_deploy.app`."""
    from ray_harness.runtime._serve_deploy import app as build

    return build(target, **kwargs)


def run(application: Any, **kwargs: Any) -> ServeHandle:
    """Deploy ``application`` on Ray Serve; see :func:`ray_harness.runtime._serve_deploy.run`."""
    from ray_harness.runtime._serve_deploy import run as deploy

    return deploy(application, **kwargs)


def serve_until_stopped(handle: ServeHandle) -> None:
    """Block until Ctrl-C or SIGTERM, then ``handle.shutdown()`` (what ``ray-harness serve`` does)."""
    from ray_harness.runtime._serve_deploy import serve_until_stopped as wait

    wait(handle)


def __getattr__(name: str) -> Any:
    if name == "ServeHandle":
        from ray_harness.runtime._serve_deploy import ServeHandle

        return ServeHandle
    raise AttributeError(f"module 'ray_harness.serve' has no attribute {name!r}")
