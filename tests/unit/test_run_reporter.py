from __future__ import annotations

import json
from typing import Any

from ray_harness.runtime._runs import published


def _record(run: str, status: str = "completed") -> dict[str, Any]:
    return {"run": run, "nodes_started": ["a", "b"], "nodes_finished": {"a": "completed"}, "input_tokens": 3,
            "cost_usd": 0.5, "status": status, "name": "g\u00e9", "updated_at": 12.5}


def test_published_is_the_json_of_every_record() -> None:
    runs = {f"r{i}": _record(f"r{i}") for i in range(3)}
    encoded: dict[str, str] = {}
    text = published(1700000000.123, runs, encoded)
    assert text == json.dumps({"updated_at": 1700000000.123, "runs": list(runs.values())})
    assert set(encoded) == set(runs)
    assert published(2.0, {}, {}) == json.dumps({"updated_at": 2.0, "runs": []})


def test_published_reuses_the_encoding_of_an_unchanged_record() -> None:
    runs = {"old": _record("old"), "new": _record("new", "running")}
    encoded = {"old": json.dumps({"run": "old", "status": "as published before"})}
    text = published(3.0, runs, encoded)
    assert json.loads(text)["runs"] == [{"run": "old", "status": "as published before"}, runs["new"]]
    runs["new"]["status"] = "completed"
    encoded.pop("new")  # what RunReporter does when a record changes
    assert json.loads(published(4.0, runs, encoded))["runs"][1]["status"] == "completed"
