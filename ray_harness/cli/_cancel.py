"""``ray-harness cancel``: which run an id names, what is sent, what the user is told (Ray-free)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Protocol

from ray_harness.cli._options import CLUSTER_ADDRESS_HELP, Commands

__all__ = ("add_cancel", "cancel_runs")


def add_cancel(commands: Commands) -> None:
    cancel = commands.add_parser("cancel", help="cancel runs in progress on a Ray cluster (graph, swarm, evaluation)",
                                 description="Stops a run as graph.cancel() / swarm.cancel() does in the driver that "
                                             "started it: every running node is cancelled at once, the run ends "
                                             "CANCELLED and the driver's call returns its CANCELLED result. An "
                                             "evaluation stops as on Ctrl-C: rows in flight are cancelled, finished "
                                             "rows stay written (running it again resumes). Example: "
                                             "ray-harness cancel 3f2a9c0d1e4b5a6c")
    which = cancel.add_mutually_exclusive_group(required=True)
    which.add_argument("runs", nargs="*", default=[], metavar="RUN",
                       help="a run id as 'ray-harness status' prints it (or a unique prefix of one)")
    which.add_argument("--all", action="store_true", help="every run in progress")
    cancel.add_argument("--address", default=None, help=CLUSTER_ADDRESS_HELP)
    cancel.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="how long to wait for the runs to end (default 60)")
    cancel.add_argument("--no-wait", action="store_true", help="send the cancel and return")
    cancel.set_defaults(handler=_cancel)


class _Runs(Protocol):
    """The cluster's runs, as ``cancel`` uses them (:class:`ray_harness.runtime._cancel_runs.ClusterRuns`)."""

    def snapshot(self) -> list[dict[str, Any]]: ...

    def request(self, run: str) -> None: ...

    def pending(self, run: str) -> bool: ...

    def withdraw(self, run: str) -> bool: ...


def _cancel(args: argparse.Namespace) -> int:
    if not args.timeout > 0:  # NaN too: a deadline never reached
        raise ValueError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    from ray_harness.runtime._cancel_runs import ClusterRuns

    address = args.address or os.environ.get("RAY_ADDRESS") or "auto"
    return cancel_runs(ClusterRuns(address), args.runs, every=args.all, wait_s=0.0 if args.no_wait else args.timeout)


def cancel_runs(cluster: _Runs, ids: list[str], *, every: bool, wait_s: float, poll_s: float = 0.25) -> int:
    """Cancel the runs ``ids`` names (``every``: all in progress); print what came of each. Returns the exit code.

    0: every run asked for was cancelled (with ``wait_s`` 0: its cancel was sent). 1: some run was not (no such
    run, ended already, not cancellable, ended otherwise, not ended within ``wait_s``).
    """
    runs = cluster.snapshot()
    if every:
        targets = [run for run in runs if run["status"] == "running"]
        if not targets:
            print("no run in progress: nothing to cancel")
            return 0
        failed = False
    else:
        targets, failed = _named_runs(runs, ids)
    cancellable = []
    for run in targets:
        if run["status"] != "running":
            ended = run.get("ended_at")
            when = f", {max(0.0, time.time() - ended):.0f}s ago" if ended else ""
            print(f"run {_label(run)} already ended: {run['status']}{when}", file=sys.stderr)
            failed = True
        elif not run.get("cancellable"):
            print(f"run {_label(run)} cannot be cancelled from here: the process running it takes no cancel "
                  "requests (a ray_harness older than this command)", file=sys.stderr)
            failed = True
        else:
            cancellable.append(run)
    for run in cancellable:  # all sent before any is waited for: they stop together
        cluster.request(run["run"])
    if not wait_s:
        for run in cancellable:
            print(f"cancel sent to run {_label(run)} ('ray-harness status' shows when it ends)")
        return 1 if failed else 0
    ended = _wait_for_end(cluster, [run["run"] for run in cancellable], wait_s, poll_s)
    for run in cancellable:
        line, ok = _cancel_outcome(cluster, run, ended.get(run["run"]), wait_s)
        print(line, file=sys.stdout if ok else sys.stderr)
        failed = failed or not ok
    return 1 if failed else 0


def _named_runs(runs: list[dict[str, Any]], ids: list[str]) -> tuple[list[dict[str, Any]], bool]:
    """The runs ``ids`` name, each once, and whether some id named none (said on stderr)."""
    targets: dict[str, dict[str, Any]] = {}
    failed = False
    for wanted in dict.fromkeys(ids):
        found, problem = _find_run(runs, wanted)
        if found is None:
            print(problem, file=sys.stderr)
            failed = True
        else:
            targets.setdefault(found["run"], found)
    return list(targets.values()), failed


def _find_run(runs: list[dict[str, Any]], wanted: str) -> tuple[dict[str, Any] | None, str]:
    """The run ``wanted`` names (its id, or a unique prefix of one), or what is wrong with it."""
    exact = [run for run in runs if run["run"] == wanted]
    matches = exact or [run for run in runs if wanted and run["run"].startswith(wanted)]
    if len(matches) == 1:
        return matches[0], ""
    if matches:
        return None, (f"run id {wanted!r} is ambiguous: it begins {', '.join(_label(run) for run in matches)}; "
                      "give more of it")
    if not runs:
        return None, f"no run {wanted!r} on this cluster: no run in progress or ended in the last 10 minutes"
    listed = "\n".join(f"  {run['run']}  {run['kind']:5s} {run['name']:24s} {run['status']}" for run in runs[:20])
    more = f"\n  ... and {len(runs) - 20} more ('ray-harness status')" if len(runs) > 20 else ""
    return None, f"no run {wanted!r} on this cluster; the runs it knows:\n{listed}{more}"


def _label(run: dict[str, Any]) -> str:
    return f"{run['run']} ({run['kind']} {run['name']!r})"


def _wait_for_end(cluster: _Runs, ids: list[str], wait_s: float, poll_s: float) -> dict[str, dict[str, Any]]:
    """The runs of ``ids`` that ended within ``wait_s`` seconds, by id, as last seen."""
    ended: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + wait_s
    while ids and len(ended) < len(ids):
        for run in cluster.snapshot():
            if run["run"] in ids and run["status"] != "running":
                ended[run["run"]] = run
        if len(ended) == len(ids) or time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    return ended


def _cancel_outcome(cluster: _Runs, run: dict[str, Any], ended: dict[str, Any] | None, wait_s: float
                    ) -> tuple[str, bool]:
    """The line to print for a run the cancel was sent to, and whether it was cancelled."""
    if ended is None:
        if cluster.pending(run["run"]) and cluster.withdraw(run["run"]):
            return (f"run {_label(run)} was not cancelled: nothing took the request within {wait_s:g}s (the process "
                    "running it — an orchestration host, an evaluation's driver — is gone or stuck); request "
                    "withdrawn", False)
        return (f"the cancel reached run {_label(run)}, but it had not ended within {wait_s:g}s (a node in a tool "
                "that blocks stops when the tool returns); 'ray-harness status' shows when it ends", False)
    if ended["status"] != "cancelled":
        return f"run {_label(run)} ended {ended['status']} before the cancel reached it", False
    if ended["kind"] == "eval":
        return (f"cancelled run {_label(run)}: {ended['rows_completed']} row(s) done, {ended['rows_failed']} failed "
                "(their records stay in its output; running the evaluation again resumes)", True)
    done = ended["nodes_done"]
    counts = {how: [node for node, status in done.items() if status == how] for how in dict.fromkeys(done.values())}
    parts = [f"{how} {', '.join(nodes)}" for how, nodes in counts.items()]
    return f"cancelled run {_label(run)}" + (f": nodes {'; '.join(parts)}" if parts else ""), True
