"""The cluster side of ``ray-harness cancel``: connect as ``status`` does, read the runs, send and follow requests.

The decisions (which run an id names, what to answer) are the CLI's (:mod:`ray_harness.cli`, Ray-free); how a
request reaches the process that holds the run is :mod:`ray_harness.runtime._runs`'s.
"""

from __future__ import annotations

import logging
from typing import Any

import ray

from ray_harness.runtime._cluster import TOKEN_HELP
from ray_harness.runtime._runs import cancel_pending, request_cancel, runs_snapshot, withdraw_cancel

__all__ = ("ClusterRuns",)


class ClusterRuns:
    """The runs of the cluster at ``address`` (``"auto"``, ``host:port``, ``ray://...``), connected on creation.

    Raises:
        ConnectionError: No cluster there (or a missing token, with how to give it).
    """

    def __init__(self, address: str) -> None:
        if not ray.is_initialized():
            try:
                ray.init(address=address, namespace="ray_harness", logging_level=logging.ERROR, log_to_driver=False)
            except ConnectionError as error:  # most often a missing token: say how to give it, as status does
                raise ConnectionError(f"{error}. {TOKEN_HELP}") from None

    def snapshot(self) -> list[dict[str, Any]]:
        """The runs as ``ray-harness status --json`` lists them."""
        return runs_snapshot()

    def request(self, run: str) -> None:
        """Ask the process that holds ``run`` to cancel it."""
        request_cancel(run)

    def pending(self, run: str) -> bool:
        """Whether the request for ``run`` still waits to be taken."""
        return cancel_pending(run)

    def withdraw(self, run: str) -> bool:
        """Withdraw the request for ``run`` (nobody took it)."""
        return withdraw_cancel(run)
