"""The ray_harness Grafana dashboard (``ray_harness.json``) and its installation into a Ray session.

Ray's Grafana provisioning (``<session dir>/metrics/grafana/provisioning``, written by the head node when
it starts with the dashboard) loads every dashboard file of ``<session dir>/metrics/grafana/dashboards``
and rescans that directory while Grafana runs; :func:`install` copies ours there. The panels' PromQL uses
the names Ray's Prometheus endpoint exports: ``ray_`` + the metric name, ``_total`` for counters,
``_bucket`` for histograms.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

__all__ = ("DASHBOARD_FILE", "DASHBOARD_UID", "expressions", "install", "load")

DASHBOARD_FILE = Path(__file__).with_name("ray_harness.json")
DASHBOARD_UID = "ray-harness"
_INSTALLED_NAME = "ray_harness_grafana_dashboard.json"  # Ray's own files are named *_grafana_dashboard.json


def load() -> dict[str, Any]:
    """The dashboard as a dict (Grafana's JSON model)."""
    return json.loads(DASHBOARD_FILE.read_text())  # type: ignore[no-any-return]


def expressions(dashboard: dict[str, Any] | None = None) -> list[str]:
    """Every PromQL expression of the dashboard: panel targets and template variable queries."""
    dashboard = dashboard or load()
    found = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    found += [variable["definition"] for variable in dashboard["templating"]["list"] if variable["type"] == "query"]
    return found


def install(session_dir: str | Path) -> Path:
    """Copy the dashboard into the Grafana dashboards directory of Ray session ``session_dir``.

    Raises:
        FileNotFoundError: ``session_dir`` has no Grafana configuration (not a session dir, or a Ray
            started without the dashboard).
    """
    target = Path(session_dir) / "metrics" / "grafana" / "dashboards"
    if not target.is_dir():
        raise FileNotFoundError(f"{target} does not exist: give the session dir of a Ray head started with the "
                                "dashboard (--session-dir), or its --temp-dir (default /tmp/ray)")
    destination = target / _INSTALLED_NAME
    shutil.copyfile(DASHBOARD_FILE, destination)
    return destination
