"""The shipped Grafana dashboard: valid JSON whose variables are defined and filter every panel.

Whether its metric and label names are what Ray exports is checked against a real scrape in
tests/integration/test_grafana_dashboard.py.
"""

from __future__ import annotations

import json
import re

from ray_harness.telemetry import grafana

# What ray_harness records on each metric (runtime/_telemetry.py RayMetricsSink), as Prometheus names it.
_SCOPE = {"agent", "run", "graph", "swarm", "eval", "node", "job"}
_BUCKETED = _SCOPE - {"run"}
_LABELS = {
    "ray_ray_harness_model_calls_total": _SCOPE,
    "ray_ray_harness_tokens_total": _SCOPE | {"direction"},
    "ray_ray_harness_cost_usd_total": _SCOPE,
    "ray_ray_harness_model_latency_s_bucket": _BUCKETED | {"le"},
    "ray_ray_harness_tool_calls_total": _SCOPE | {"tool", "status"},
    "ray_ray_harness_tool_latency_s_bucket": _BUCKETED | {"tool", "le"},
    "ray_ray_harness_active_agents": {"agent", "job"},
    "ray_ray_harness_interrupts_pending": {"agent", "job"},
    "ray_ray_harness_runs_active": {"kind", "name", "job"},
    "ray_ray_harness_node_duration_s_bucket": {"graph", "swarm", "node", "status", "job", "le"},
    "ray_ray_harness_eval_rows_total": {"run", "eval", "status", "job"},
    "ray_ray_harness_rate_limit_wait_s_bucket": {"limiter", "job", "le"},
}
_SELECTOR = re.compile(r"(ray_ray_harness_\w+)(?:\{([^}]*)\})?")


def _variables() -> dict[str, dict[str, object]]:
    return {variable["name"]: variable for variable in grafana.load()["templating"]["list"]}


def test_the_dashboard_file_is_valid_json_with_unique_panel_ids() -> None:
    dashboard = json.loads(grafana.DASHBOARD_FILE.read_text(encoding="utf-8"))
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and dashboard["uid"] == grafana.DASHBOARD_UID


def test_there_is_a_variable_per_run_kind_and_for_the_job() -> None:
    variables = _variables()
    assert list(variables) == ["datasource", "job", "graph", "swarm", "eval", "agent"]
    for name in ("job", "graph", "swarm", "eval", "agent"):
        variable = variables[name]
        # "All" must also match series without the label (a graph's tokens have no swarm): a regex, not a list.
        assert variable["includeAll"] is True and variable["multi"] is True and variable["allValue"] == ".*"
        assert variable["definition"] == variable["query"]["query"]  # type: ignore[index]
        if name != "job":  # each list offers the names of the jobs selected
            assert '{job=~"$job"}' in str(variable["definition"]), variable["definition"]


def test_every_expression_uses_only_defined_variables_and_every_panel_filters_by_job() -> None:
    defined = set(_variables()) | {"__rate_interval"}
    for expr in grafana.expressions():
        used = set(re.findall(r"\$(\w+)", expr))
        assert used <= defined, (used - defined, expr)
    panels = [target["expr"] for panel in grafana.load()["panels"] for target in panel.get("targets", [])]
    for expr in panels:
        for metric, selector in _SELECTOR.findall(expr):
            assert 'job=~"$job"' in selector, f"{metric} is not filtered by job in: {expr}"


def test_every_label_an_expression_uses_is_one_ray_harness_records_on_that_metric() -> None:
    for expr in grafana.expressions():
        for metric, selector in _SELECTOR.findall(expr):
            assert metric in _LABELS, f"unknown metric {metric} in: {expr}"
            used = set(re.findall(r"(\w+)\s*=~?", re.sub(r'"[^"]*"', '""', selector)))
            assert used <= _LABELS[metric], (metric, used - _LABELS[metric])
        grouped = {name.strip() for group in re.findall(r"\bby\s*\(([^)]*)\)", expr) for name in group.split(",")}
        recorded = set().union(*(_LABELS[metric] for metric, _ in _SELECTOR.findall(expr)))
        assert grouped <= recorded, (grouped - recorded, expr)
