"""``ray-harness dashboard install``: the ray_harness Grafana dashboard where the head's Grafana loads it."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ray_harness.cli._options import Commands

__all__ = ("add_dashboard",)


def add_dashboard(commands: Commands) -> None:
    dashboard = commands.add_parser("dashboard", help="the ray_harness Grafana dashboard",
                                    description="The ray_harness Grafana dashboard (the harness metrics: runs, "
                                                "tokens, cost, tool calls, latencies): 'ray-harness dashboard install' "
                                                "puts it where the Grafana of the Ray head loads dashboards.")
    dashboard_commands = dashboard.add_subparsers(dest="dashboard_command", metavar="ACTION", required=True)
    install = dashboard_commands.add_parser("install", help="copy it where the Grafana of the Ray head loads dashboards",
                                            description="Copies the dashboard where the Grafana of the Ray head "
                                                        "loads dashboards. Run it on the head node (Grafana reads "
                                                        "the head's session dir).")
    where = install.add_mutually_exclusive_group()
    where.add_argument("--session-dir", help="the Ray session dir (default <temp dir>/session_latest)")
    where.add_argument("--temp-dir", default="/tmp/ray", help="Ray's temp dir on this node (default /tmp/ray; "
                                                               "cluster/local.sh: $RAY_HARNESS_CLUSTER_DIR/node0)")
    install.set_defaults(handler=_dashboard_install)


def _dashboard_install(args: argparse.Namespace) -> int:
    from ray_harness.telemetry import grafana

    session = Path(args.session_dir) if args.session_dir else Path(args.temp_dir) / "session_latest"
    installed = grafana.install(session)
    grafana_host = os.environ.get("RAY_GRAFANA_HOST", "http://localhost:3000").rstrip("/")
    print(f"installed the ray_harness dashboard: {installed}")
    print(f"open it at {grafana_host}/d/{grafana.DASHBOARD_UID} (folder 'Ray' of a Grafana started with "
          f"--config {session.resolve() / 'metrics/grafana/grafana.ini'}); a running Grafana picks it up within "
          "seconds")
    print("no Prometheus/Grafana yet? `ray metrics launch-prometheus`, then `grafana-server --config <that "
          "grafana.ini> --homepath <grafana dir> web`; see https://docs.ray.io/en/latest/cluster/metrics.html")
    return 0
