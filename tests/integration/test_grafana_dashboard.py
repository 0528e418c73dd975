"""The shipped Grafana dashboard queries only metric and label names that Ray's Prometheus endpoint exports.

A real graph, swarm and evaluation run on Ray; then every PromQL expression of the dashboard's panels
and variables is checked against a scrape of Ray's metrics endpoint (Ray exports custom metrics ≈10 s
after they are recorded).
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections import defaultdict
from typing import Any

import pytest

from ray_harness.telemetry import grafana

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]

_SERIES = re.compile(r"^(\w+)\{(.*)\}\s")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _scrape(port: int) -> dict[str, set[str]]:
    """metric name -> the label names it has with a non-empty value in some series."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    labels: dict[str, set[str]] = defaultdict(set)
    for line in text.splitlines():
        match = _SERIES.match(line)
        if match and match.group(1).startswith("ray_ray_harness_"):
            labels[match.group(1)] |= {name for name, value in _LABEL.findall(match.group(2)) if value}
    return labels


def _references(expr: str) -> tuple[set[str], set[str]]:
    """The metric names and label names a PromQL expression uses."""
    bare = re.sub(r'"[^"]*"', '""', expr)  # label values may contain anything
    found = set(re.findall(r"\bray_ray_harness_\w+", bare))
    labels = {name.strip() for group in re.findall(r"\bby\s*\(([^)]*)\)", bare) for name in group.split(",")}
    labels |= {name for group in re.findall(r"\{([^}]*)\}", bare) for name in re.findall(r"(\w+)\s*=~?", group)}
    labels |= set(re.findall(r"label_values\(\s*\w+\s*(?:\{[^}]*\})?\s*,\s*(\w+)\s*\)", bare))
    return found, labels - {""}


def test_the_expression_parser_sees_metrics_and_labels() -> None:
    metrics_used, labels = _references(
        'histogram_quantile(0.95, sum by (le, agent) (rate(ray_ray_harness_x_bucket{graph=~"$g", status="a,b"}[5m])))')
    assert metrics_used == {"ray_ray_harness_x_bucket"} and labels == {"le", "agent", "graph", "status"}
    assert _references('label_values(ray_ray_harness_tokens_total{job=~"$job"}, swarm)') == (
        {"ray_ray_harness_tokens_total"}, {"job", "swarm"})


def test_every_dashboard_expression_refers_to_exported_metrics_and_labels() -> None:
    import ray

    from ray_harness.evaluation import evaluate
    from tests.integration import observed_agents

    port = getattr(ray._private.worker.global_worker.node, "metrics_export_port", None)
    assert port, "this Ray exposes no metrics export port"
    graph = observed_agents.observed_graph()
    swarm = observed_agents.observed_swarm()
    try:
        graph("observe the graph")
        swarm("observe the swarm")
        summary = evaluate("tests.integration.observed_agents:metered", [{"prompt": f"row {i}"} for i in range(3)],
                           runtime="ray", progress=False)
        assert summary["rows"] == 3
    finally:
        graph.shutdown()
        swarm.shutdown()

    expressions = grafana.expressions()
    wanted: set[str] = set()
    for expr in expressions:
        wanted |= _references(expr)[0]
    # Series from different processes reach the endpoint at different moments: scrape until complete.
    scraped: dict[str, set[str]] = {}
    problems: list[str] = ["not scraped yet"]
    deadline = time.monotonic() + 120
    while problems and time.monotonic() < deadline:
        time.sleep(2)
        scraped = _scrape(port)
        problems = _problems(expressions, wanted, scraped)
    assert not problems, "\n".join(problems)


def _problems(expressions: list[str], wanted: set[str], scraped: dict[str, set[str]]) -> list[str]:
    if not wanted <= set(scraped):
        return [f"not exported: {sorted(wanted - set(scraped))}"]
    problems: list[str] = []
    for expr in expressions:
        metrics_used, labels = _references(expr)
        assert metrics_used, f"an expression without a ray_harness metric: {expr}"
        for metric in metrics_used:
            missing = labels - scraped[metric] - ({"le"} if metric.endswith("_bucket") else set())
            if missing:
                problems.append(f"{metric} has no label(s) {sorted(missing)} (has {sorted(scraped[metric])}) "
                                f"in: {expr}")
    return problems


def _panel_titles(dashboard: dict[str, Any]) -> list[str]:
    return [panel["title"] for panel in dashboard["panels"]]


def test_the_dashboard_covers_the_issue_panels() -> None:
    titles = " | ".join(_panel_titles(grafana.load())).lower()
    for topic in ("tokens", "cost", "latency percentiles", "tool error rate", "active runs", "evaluation throughput"):
        assert topic in titles
