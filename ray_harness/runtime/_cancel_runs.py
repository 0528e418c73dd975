"""The cluster side of ``ray-harness cancel``: connect as ``status`` does, read the runs, send and follow requests.

The decisions (which run an id names, what to answer) are the CLI's (:mod:`ray_harness.cli._cancel`, Ray-free); how a
request reaches the process that holds the run is :mod:`ray_harness.runtime._runs`'s.
"""

from __future__ import annotations

from typing import Any

from ray_harness.runtime._cluster import join_quietly
from ray_harness.runtime._runs import cancel_pending, request_cancel, runs_snapshot, withdraw_cancel

__all__ = ("ClusterRuns",)


class ClusterRuns:
    """The runs of the cluster at ``address`` (``"auto"``, ``host:port``, ``ray://...``), connected on creation.

    Raises:
        ConnectionError: Nothing answers at ``address``, or Ray refused (a missing token: the message says how
            to give it); see :func:`ray_harness.runtime._cluster.join_quietly`.
    """

    def __init__(self, address: str) -> None:
        join_quietly(address)

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
