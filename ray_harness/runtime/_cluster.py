"""Connect to Ray, or start an embedded local Ray sized for a small machine; check that an actor can be placed."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

import ray

from ray_harness.runtime._reach import check_reachable

__all__ = ("DEFAULT_NAMESPACE", "TOKEN_HELP", "actor_resources", "check_placeable", "current_namespace", "ensure_initialized", "init",
           "is_initialized", "join_quietly", "shutdown")

DEFAULT_NAMESPACE = "ray_harness"
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
    ``include_dashboard=True`` to get it). Ray's token authentication stays as Ray sets it (on for a new local
    Ray since Ray 2.60); Ray's warning that it is on is left out (see :class:`_DropTokenNotice`). Returns a
    small description of the connection.

    Raises:
        ConnectionError: ``address`` names a host:port that does not answer, or where something
            other than a Ray GCS (or Ray Client server, for ``ray://``) answers, or is a dashboard URL
            (checked with a short TCP connect and gRPC hello first, so such an address fails in
            seconds, not minutes).

    """
    if ray.is_initialized():
        return _describe()
    address = address or os.environ.get("RAY_ADDRESS") or None
    ray_init_kwargs.setdefault("namespace", DEFAULT_NAMESPACE)
    ray_init_kwargs.setdefault("log_to_driver", True)
    if address is None or address == "local":  # both may start an embedded Ray ("local" always does)
        ray_init_kwargs.setdefault("include_dashboard", False)
    if address is not None:
        check_reachable(address, "gcs")
    try:
        with _token_notice_dropped():
            ray.init(address=address, **ray_init_kwargs)
    except ConnectionError as error:
        raise ConnectionError(f"could not connect to Ray at {address!r}: {error}. {TOKEN_HELP}") from error
    from ray_harness.runtime._telemetry import prepare_driver_process

    prepare_driver_process()  # the driver's own metrics (evaluation rows) reach Ray's Prometheus endpoint too
    return _describe()


_TOKEN_SETUP_LOGGER = "ray._private.authentication.authentication_token_setup"
_TOKEN_NOTICE = "Token authentication is enabled for this Ray cluster"


class _DropTokenNotice(logging.Filter):
    """Drops Ray's notice that token authentication is on (Ray >= 2.60, ``RAY_AUTH_MODE`` unset).

    Ray logs it as a warning whenever ``ray.init()`` starts a local Ray, or joins one found on this machine while
    a token is there, without ``RAY_AUTH_MODE``: it is Ray's default, nothing is wrong and nothing needs doing. It
    cannot be avoided by setting ``RAY_AUTH_MODE=token`` here, since Ray reads its configuration when it is
    imported. Ray's other notices (token authentication *disabled*, a token missing) are kept.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_TOKEN_NOTICE)


@contextlib.contextmanager
def _token_notice_dropped() -> Iterator[None]:
    logger = logging.getLogger(_TOKEN_SETUP_LOGGER)
    notice_filter = _DropTokenNotice()
    logger.addFilter(notice_filter)
    try:
        yield
    finally:
        logger.removeFilter(notice_filter)


def join_quietly(address: str) -> None:
    """Join the cluster at ``address`` to look at it (``ray-harness status`` and ``cancel``); idempotent.

    Unlike :func:`init`: no address falls back to an embedded Ray, no worker logs are streamed here, and Ray
    logs only errors.

    Raises:
        ConnectionError: Nothing answers at ``address``, or something other than Ray does (checked with a short
            TCP connect and gRPC hello first, so in seconds), or Ray refused the connection (most often a missing
            token: the message says how to give it).
    """
    if ray.is_initialized():
        return
    check_reachable(address, "gcs")
    try:
        ray.init(address=address, namespace=DEFAULT_NAMESPACE, logging_level=logging.ERROR, log_to_driver=False)
    except ConnectionError as error:
        raise ConnectionError(f"{error}. {TOKEN_HELP}") from None


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


_AUTOSCALER_STATUS_KEY = "__autoscaling_status"  # ray._private.ray_constants.DEBUG_AUTOSCALING_STATUS
_AUTOSCALER_STATUS_WAIT_S = 15.0  # Ray's monitor reports every 5 s; a fresh cluster may not have reported yet


def actor_resources(num_cpus: float, resources: Mapping[str, float] | None, what: str) -> dict[str, Any]:
    """Ray actor options for ``num_cpus`` and ``resources`` (``"GPU"`` among them is Ray's ``num_gpus``), checked.

    Raises:
        ValueError: A bad amount or name (the field named), or an actor no node can ever hold
            (:func:`check_placeable`).

    """
    check_placeable(num_cpus, resources, what)
    custom = {name: float(amount) for name, amount in (resources or {}).items() if name != "GPU"}
    options: dict[str, Any] = {"num_cpus": num_cpus}
    if resources and resources.get("GPU"):
        options["num_gpus"] = float(resources["GPU"])
    if custom:
        options["resources"] = custom
    return options


def check_placeable(num_cpus: float, resources: Mapping[str, float] | None, what: str) -> None:
    """Raise ``ValueError`` when no node can ever hold an actor that asks for ``num_cpus`` and ``resources``.

    Ray would wait for such an actor forever, printing only an autoscaler warning. A node that has them all (in
    total; busy now is fine: the actor waits for them) passes. When none has, the request is refused unless an
    autoscaler could add such a node (autoscaler v2, as KubeRay runs it, or a v1 autoscaler with a cluster
    config): then Ray's wait is kept, since a node may be on its way. Without an autoscaler (an embedded Ray,
    ``ray start`` clusters), a node joining later would not help this call.
    """
    demand = _demand(num_cpus, resources)
    if not demand:
        return
    nodes = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]  # type: ignore[no-untyped-call]
    if any(all(node.get(name, 0.0) >= amount for name, amount in demand.items()) for node in nodes):
        return
    if _may_autoscale():
        return
    raise ValueError(f"{what}: {_unplaceable(demand, nodes)}; the cluster has no autoscaler to add such a node, so "
                     "the actor would wait forever. Ask for less, or start a node that has them "
                     "(`ray start --resources='{...}'`) before creating it")


def _demand(num_cpus: float, resources: Mapping[str, float] | None) -> dict[str, float]:
    """The resources asked for (the nonzero ones), checked: bad values are named here, not deep in Ray."""
    if isinstance(num_cpus, bool) or not isinstance(num_cpus, int | float) or not num_cpus >= 0:
        raise ValueError(f"num_cpus must be a number >= 0, got {num_cpus!r}")
    if resources is not None and not isinstance(resources, Mapping):
        raise ValueError(f"resources must be a dict of resource name to amount, got {resources!r}")
    demand = {}
    for name, amount in (resources or {}).items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"resources: names must be non-empty strings, got {name!r}")
        if name == "CPU":
            raise ValueError("resources['CPU']: ask for CPUs with num_cpus=")
        if isinstance(amount, bool) or not isinstance(amount, int | float) or not amount >= 0:
            raise ValueError(f"resources[{name!r}] must be a number >= 0, got {amount!r}")
        if amount:
            demand[name] = float(amount)
    if num_cpus:
        demand["CPU"] = float(num_cpus)
    return demand


def _unplaceable(demand: dict[str, float], nodes: list[dict[str, float]]) -> str:
    short = []
    for name, amount in demand.items():
        largest = max((node.get(name, 0.0) for node in nodes), default=0.0)
        if largest < amount:
            field = "num_cpus" if name == "CPU" else f"resources[{name!r}]"
            has = f"the largest node has {largest:g}" if largest else "no node has it"
            short.append(f"{field}={amount:g} ({has})")
    if short:
        return "no node of the cluster can hold " + ", ".join(short)
    asked = ", ".join(f"{name}={amount:g}" for name, amount in demand.items())
    return f"no single node of the cluster has all of {asked} (each one alone fits some node)"


def _autoscaler_report(status: bytes | None) -> dict[str, Any] | None:
    report = json.loads(status).get("autoscaler_report") if status else None
    return report if isinstance(report, dict) else None


def _may_autoscale() -> bool:
    """Whether an autoscaler could add nodes; ``True`` when it cannot be told (then Ray's wait is kept)."""
    try:
        from ray.autoscaler.v2.utils import is_autoscaler_v2

        if is_autoscaler_v2(fetch_from_server=True):
            return True
        from ray.experimental import internal_kv

        deadline = time.monotonic() + _AUTOSCALER_STATUS_WAIT_S
        # The monitor's first status of a fresh cluster has no "autoscaler_report" yet (its next, 5 s later, has):
        # wait for the report, or an embedded Ray's first seconds would read as "may autoscale" and wait forever.
        while (report := _autoscaler_report(internal_kv._internal_kv_get(_AUTOSCALER_STATUS_KEY))) is None:
            if time.monotonic() > deadline:
                return True
            time.sleep(0.25)
        mapping = report.get("node_type_mapping") or {}
    except Exception:  # an older or newer Ray that reports differently: keep Ray's behaviour
        return True
    # Without a cluster config Ray's monitor runs read-only: every node is its own type, "node_<node id>".
    return not (mapping and all(kind == f"node_{key}" for key, kind in mapping.items()))
