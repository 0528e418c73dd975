"""``serve.app()`` and ``serve.run()``: a target as a Ray Serve application speaking A2A 1.0."""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ray_harness._version import __version__
from ray_harness.evaluation._backends import resolve_factory
from ray_harness.runtime._telemetry import with_actor_env
from ray_harness.serve._contexts import DEFAULT_MAX_CONTEXTS, check_max_contexts
from ray_harness.serve._server import DEFAULT_MAX_REQUEST_BYTES, AppSettings
from ray_harness.serve._store import open_repository

__all__ = ("ServeHandle", "app", "run", "serve_until_stopped")

_APP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SDK_TRACING = "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"
_MAX_ONGOING = 256
"""Requests one replica takes at once: agent calls wait on models and humans, not on its CPU."""
_SERVE_STOP_SECONDS = 60.0
"""How long the Serve controller gets to stop its proxies and itself before ``serve.shutdown()`` takes over."""

logger = logging.getLogger(__name__)


def app(target: Any, *, name: str, num_replicas: int | None = None, autoscaling_config: dict[str, Any] | None = None,
        task_store: str | None = None, task_store_options: dict[str, Any] | None = None,
        auth_token: str | None = None, description: str | None = None, version: str | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, lease_seconds: float = 30.0,
        ray_actor_options: dict[str, Any] | None = None, max_ongoing_requests: int = _MAX_ONGOING,
        max_contexts: int = DEFAULT_MAX_CONTEXTS) -> Any:
    """A Ray Serve application serving ``target`` over A2A 1.0 (JSON-RPC at ``/``, card at ``/.well-known/...``).

    Args:
        target: ``"module:function"`` or a callable building a fresh Agent, Graph or Swarm per task.
        name: The Serve app name and the card's name.
        num_replicas: Fixed replica count (default 1); exclusive with ``autoscaling_config``.
        autoscaling_config: Ray Serve autoscaling settings.
        task_store: ``file:///abs/dir`` or ``s3://bucket/prefix``; ``None`` keeps tasks in each replica's
            memory (one replica only: an interrupted task cannot resume elsewhere).
        task_store_options: For S3: ``endpoint_url``, ``region_name`` and credentials.
        auth_token: Require ``Authorization: Bearer <token>`` on every call but the card.
        description: The card's description (default: the first line of the target's system prompt).
        version: The card's version (default: the ray_harness version).
        max_request_bytes: Larger request bodies get HTTP 413.
        lease_seconds: A running task whose replica sent no heartbeat for this long is reported FAILED.
        ray_actor_options: Replica resources (default ``{"num_cpus": 0}``).
        max_ongoing_requests: Concurrent requests per replica.
        max_contexts: Context conversations kept in the task store; beyond it the least recently used ones
            without a task in flight are evicted (a later message in one starts afresh). Strands keeps 1,000.

    Returns:
        A bound Ray Serve application, for :func:`run` or ``serve.run``.
    """
    from ray import serve

    from ray_harness.runtime._serve_replica import A2AReplica

    if not isinstance(name, str) or not _APP_NAME.fullmatch(name):
        raise ValueError(f"name {name!r} must match {_APP_NAME.pattern}")
    if num_replicas is not None and autoscaling_config is not None:
        raise ValueError("pass num_replicas or autoscaling_config, not both")
    if num_replicas is not None and (isinstance(num_replicas, bool) or not isinstance(num_replicas, int)
                                     or num_replicas < 1):
        raise ValueError(f"num_replicas must be a positive int, got {num_replicas!r}")
    if isinstance(max_request_bytes, bool) or not isinstance(max_request_bytes, int) or max_request_bytes < 1:
        raise ValueError(f"max_request_bytes must be a positive int, got {max_request_bytes!r}")
    if auth_token is not None and (not isinstance(auth_token, str) or not auth_token.strip()):
        raise ValueError("auth_token must be a non-empty string or None")
    if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, int | float) or not lease_seconds > 0:
        raise ValueError(f"lease_seconds must be a positive number, got {lease_seconds!r}")
    if isinstance(max_ongoing_requests, bool) or not isinstance(max_ongoing_requests, int) \
            or max_ongoing_requests < 1:
        raise ValueError(f"max_ongoing_requests must be a positive int, got {max_ongoing_requests!r}")
    check_max_contexts(max_contexts)
    resolve_factory(target)  # fails here, with the target named, rather than in every replica
    open_repository(task_store, task_store_options)  # validates the URL and options; touches nothing
    settings = AppSettings(name=name, description=description, version=version or __version__,
                           auth_token=auth_token, max_request_bytes=max_request_bytes, max_contexts=max_contexts)
    actor_options: dict[str, Any] = {"num_cpus": 0, **(ray_actor_options or {})}
    runtime_env = dict(actor_options.get("runtime_env") or {})
    env_vars = dict(runtime_env.get("env_vars") or {})
    # a2a-sdk opens an OpenTelemetry span around most of its internal calls (~100 per request, a third of the
    # A2A layer's CPU); off unless asked for. ray_harness's own spans are unaffected.
    env_vars.setdefault(_SDK_TRACING, os.environ.get(_SDK_TRACING, "false"))
    actor_options["runtime_env"] = {**runtime_env, "env_vars": env_vars}
    # Replicas build agents too: they get the driver's extension list and telemetry settings, like every actor.
    actor_options = with_actor_env(actor_options)
    options: dict[str, Any] = {"name": name, "ray_actor_options": actor_options,
                               "max_ongoing_requests": max_ongoing_requests}
    if autoscaling_config is not None:
        options["autoscaling_config"] = autoscaling_config
    else:
        options["num_replicas"] = num_replicas or 1
    deployment: Any = serve.deployment(**options)(A2AReplica)
    return deployment.bind(settings, target, task_store, task_store_options, float(lease_seconds))


@dataclass
class _Started:
    """What :func:`run` in this process started: the last app's ``shutdown()`` stops it, whichever handle that is.

    Each is recorded by identity (the Serve controller's actor id, this driver's Ray node and job), so a Serve or
    Ray that someone else started after ours went away is never stopped from here.
    """

    serve: str | None = None
    ray: str | None = None


_started = _Started()


def _serve_controller_id() -> str | None:
    from ray.serve.context import _get_global_client

    client = _get_global_client(raise_if_no_controller_running=False)
    return None if client is None else client._controller._actor_id.hex()


def _ray_id() -> str | None:
    """This driver's connection: its node (new with every local Ray) and job (new with every ``ray.init``)."""
    import ray

    if not ray.is_initialized():
        return None
    context = ray.get_runtime_context()
    return f"{context.get_node_id()}:{context.get_job_id()}"


@dataclass
class ServeHandle:
    """A running app: its ``url`` (the A2A endpoint; the card is under ``.well-known/``) and ``shutdown()``."""

    url: str
    name: str
    _owns_serve: bool = False
    _owns_ray: bool = False
    _closed: bool = field(default=False, repr=False)

    @property
    def card_url(self) -> str:
        return self.url + ".well-known/agent-card.json"

    def shutdown(self) -> None:
        """Delete this app only; idempotent, and a no-op once Ray Serve (or Ray) is gone.

        Ray Serve (and then Ray) stop too when :func:`run` in this process started them and no application is
        left, whichever app was deployed first: the others keep serving until the last ``shutdown()``.
        """
        if self._closed:
            return
        self._closed = True
        if self._delete_app() and _started.ray is not None and _started.ray == _ray_id():
            from ray_harness import runtime

            _started.ray = None
            runtime.shutdown()

    def _delete_app(self) -> bool:
        """Delete the app; True when no application is left (Serve, if this process started it, is stopped)."""
        import ray
        from ray import serve
        from ray.exceptions import RayActorError
        from ray.serve.context import _get_global_client

        if not ray.is_initialized() or _get_global_client(raise_if_no_controller_running=False) is None:
            return True  # Serve is already gone (and with it the app)
        try:
            serve.delete(self.name)
            if serve.status().applications:
                return False  # other apps still serve: Serve (and the Ray under it) stay up for them
        except RayActorError:  # the controller died (Serve shut down by another process) since it was cached
            return True
        if _started.serve is not None and _started.serve == _serve_controller_id():
            _started.serve = None
            _stop_serve()
        return True


def _stop_serve() -> None:
    """``serve.shutdown()`` without the "Task ServeController.graceful_shutdown failed" line it prints.

    ``serve.shutdown()`` waits in a ``graceful_shutdown`` call that ends only when the controller kills itself;
    the controller retries its tasks forever, so Ray reports that call on this driver's terminal as failed and
    to be retried. Asking with ``wait=False`` and then waiting for the controller's name to go stops the same
    things in the same order (apps, proxies, controller) with no call of ours in flight when it dies.
    """
    import ray
    from ray import serve
    from ray.exceptions import RayActorError
    from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE
    from ray.serve.context import _disconnect, _get_global_client

    client: Any = _get_global_client(raise_if_no_controller_running=False)
    if client is None:
        return
    client.shutdown_cached_handles()
    try:
        ray.get(client._controller.graceful_shutdown.remote(wait=False))
    except RayActorError:  # the controller is already gone
        _disconnect()  # type: ignore[no-untyped-call]
        return
    deadline = time.monotonic() + _SERVE_STOP_SECONDS
    while time.monotonic() < deadline:
        try:
            ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)
        except ValueError:  # no such actor: the controller stopped everything and then itself
            client._shutdown = True
            _disconnect()  # type: ignore[no-untyped-call]
            return
        time.sleep(0.1)
    logger.warning("Ray Serve's controller did not stop within %.0f s; calling serve.shutdown()",
                   _SERVE_STOP_SECONDS)
    serve.shutdown()  # type: ignore[no-untyped-call]


def run(application: Any, *, host: str = "127.0.0.1", port: int = 8000, blocking: bool = False,
        route_prefix: str = "/", name: str | None = None) -> ServeHandle:
    """Deploy ``application`` (from :func:`app`) on Ray Serve and return its handle.

    Joins the connected Ray, else ``RAY_ADDRESS`` when set, else starts an embedded local Ray. Starts Ray
    Serve's HTTP proxy on ``host:port`` unless Serve already runs (then that port must match); a Serve started
    here logs its controller's and proxy's INFO lines to Ray's log files only (``logs/serve/``), not to stderr.

    Args:
        application: The bound application.
        host: Interface of the HTTP proxy.
        port: Its port.
        blocking: Serve until Ctrl-C / SIGTERM, then shut down.
        route_prefix: Where the app is mounted (default ``/``).
        name: Serve app name (default: the ``name=`` given to :func:`app`).
    """
    import ray
    from ray import serve
    from ray.serve.context import _get_global_client

    from ray_harness import runtime

    owns_ray = False
    if not ray.is_initialized():
        address = os.environ.get("RAY_ADDRESS") or None
        owns_ray = address is None
        # "local", not None: ray.init() without an address would join any `ray start` cluster on this machine.
        runtime.init(address=address) if address else runtime.init(address="local", include_dashboard=False)
        if owns_ray:
            _started.ray = _ray_id()
    running = _get_global_client(raise_if_no_controller_running=False)
    if running is not None and int(running.http_config.port) != int(port):
        raise ValueError(f"Ray Serve already serves HTTP on port {running.http_config.port}; pass port="
                         f"{running.http_config.port} (one HTTP proxy per Ray cluster)")
    if running is None:
        # Serve's own components (controller, HTTP proxy) log at WARNING: their INFO lines (deploying, replicas
        # added, endpoints updated) stay in Ray's log files (logs/serve/ of the session) instead of burying the
        # app's own output. The app's replicas keep Serve's default (INFO, with access logs).
        serve.start(http_options={"host": host, "port": int(port)}, logging_config={"log_level": "WARNING"})
        _started.serve = _serve_controller_id()
    app_name = name or application._bound_deployment.name
    prefix = "/" + route_prefix.strip("/") if route_prefix.strip("/") else "/"
    serve.run(application, name=app_name, route_prefix=prefix, blocking=False)
    shown_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    handle = ServeHandle(url=f"http://{shown_host}:{int(port)}{prefix.rstrip('/')}/", name=app_name,
                         _owns_serve=running is None, _owns_ray=owns_ray)
    if blocking:
        serve_until_stopped(handle)
    return handle


def serve_until_stopped(handle: ServeHandle) -> None:
    """Block until Ctrl-C or SIGTERM, then ``handle.shutdown()``."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        handle.shutdown()
