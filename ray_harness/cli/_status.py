"""``ray-harness status``: runs in progress, ray_harness actors and jobs on a Ray cluster."""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from ray_harness.cli._options import CLUSTER_ADDRESS_HELP, Commands

__all__ = ("add_status", "status_text")


def add_status(commands: Commands) -> None:
    status = commands.add_parser("status", help="runs in progress, ray_harness actors and jobs on a Ray cluster",
                                 description="Lists the graph, swarm and evaluation runs in progress on the cluster "
                                             "(and those that ended in the last 10 minutes) with their progress, "
                                             "tokens, cost and run id (for 'ray-harness cancel'), then the live "
                                             "ray_harness actors and the cluster's jobs.")
    status.add_argument("--address", default=None, help=CLUSTER_ADDRESS_HELP)
    status.add_argument("--json", action="store_true",
                        help="print one JSON object (runs, actors, jobs; one per refresh with --watch)")
    status.add_argument("--watch", action="store_true", help="refresh until Ctrl-C")
    status.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                        help="between refreshes with --watch (default 2)")
    status.set_defaults(handler=_status)


def _status(args: argparse.Namespace) -> int:
    if not args.interval > 0:
        raise ValueError(f"--interval must be a positive number of seconds, got {args.interval}")
    from ray_harness.runtime.jobs import cluster_status

    address = args.address or os.environ.get("RAY_ADDRESS") or "auto"
    while True:
        status = cluster_status(address)
        if args.json:
            print(json.dumps(status, default=str), flush=True)
        else:
            if args.watch:
                print("\033[2J\033[H", end="")  # clear the terminal, cursor home
            print(status_text(status), flush=True)
        if not args.watch:
            return 0
        try:
            time.sleep(max(0.2, args.interval))
        except KeyboardInterrupt:
            return 0


def status_text(status: dict[str, Any]) -> str:
    running = [run for run in status["runs"] if run["status"] == "running"]
    lines = [f"{len(running)} run(s) in progress"]
    for run in status["runs"]:
        if run["kind"] == "eval":
            progress = f"rows {run['rows_completed']} done, {run['rows_failed']} failed"
        else:
            active = f" ({', '.join(run['nodes_running'])})" if run["nodes_running"] else ""
            # Nodes that did not complete say how they ended: a cancelled run's text looked like a completed one's.
            not_completed = [f"{node} {how}" for node, how in run["nodes_done"].items() if how != "completed"]
            unusual = f" ({', '.join(not_completed)})" if not_completed else ""
            progress = (f"nodes {len(run['nodes_done'])} done{unusual}, {len(run['nodes_running'])} running{active}, "
                        f"{run['nodes_pending']} pending")
        tokens = run["input_tokens"] + run["output_tokens"]
        # A run that ended: its age_s is how long it took (an "age 0s" read as "just started").
        ended = run.get("ended_at") if run["status"] != "running" else None
        age = f"took {run['age_s']:.0f}s, ended {max(0.0, time.time() - ended):.0f}s ago" if ended \
            else f"age {run['age_s']:.0f}s"
        lines.append(f"  {run['kind']:5s} {run['name']:24s} {run['status']:11s} {progress}  tokens {tokens}  "
                     f"${run['cost_usd']:.4f}  {age}  run {run['run']}")
    if status.get("unavailable"):
        lines.append(f"({status['unavailable']})")
    # Ray keeps dead actors listed (every driver's ended hosts, each a row): the text shows those that still run.
    actors = [actor for actor in status["actors"] if actor["state"] != "DEAD"]
    dead = len(status["actors"]) - len(actors)
    lines.append(f"{len(actors)} ray_harness actor(s)" + (f" ({dead} dead not shown; --json lists them)" if dead else ""))
    for actor in actors:
        lines.append(f"  {actor['name']:40s} {actor['state']:10s} pid={actor['pid']} node={actor['node_id'][:12]}")
    lines.append(f"{len(status['jobs'])} job(s)")
    for job in status["jobs"]:
        lines.append(f"  {job['id']}  {job['status']}  {job['entrypoint']}")
    return "\n".join(lines)
