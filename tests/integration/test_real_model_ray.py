"""Ray paths against a real OpenAI-compatible server: a ``RemoteAgent`` call and a graph evaluation.

The model server is the one of ``scripts/ci/model_server.sh`` (see ``tests/realmodel/server.py``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ray_harness import Agent
from ray_harness.evaluation import evaluate
from tests.realmodel.server import FORMS, QUESTIONS, RealServer, real_server, two_node_graph

pytestmark = [pytest.mark.ray, pytest.mark.services, pytest.mark.usefixtures("ray_session"),
              pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def server() -> RealServer:
    return real_server()


@pytest.fixture(scope="module")
def pool(ray_session: dict[str, Any]) -> Iterator[Any]:
    from ray_harness.runtime import AgentPool

    created = AgentPool(size=1)
    yield created
    created.shutdown()  # now, not at garbage collection: its hosts carry the shared host names


@pytest.mark.parametrize("form", FORMS)
def test_remote_agent_call(server: RealServer, form: str) -> None:
    from ray_harness.runtime import RemoteAgent

    remote = RemoteAgent(Agent(server.build(form), name=f"real-{form}"))
    try:
        result = remote(QUESTIONS[0])
    finally:
        remote.shutdown()

    assert result.stop_reason == "end_turn"
    assert result.text.strip()
    usage = result.metrics.accumulated_usage
    assert usage["inputTokens"] > 0 and usage["outputTokens"] > 0


def test_evaluate_a_two_node_graph(server: RealServer, pool: Any, tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    rows = [{"prompt": question} for question in QUESTIONS]

    summary = evaluate(functools.partial(two_node_graph, server), rows, output=str(out), pool=pool, concurrency=3)

    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary["rows"] == 3 and summary["errors"] == 0, [record.get("error") for record in records]
    assert sorted(record["index"] for record in records) == [0, 1, 2]
    assert all(record["output"].strip() for record in records)
    # Both nodes of every row spent tokens on the server.
    assert summary["tokens"]["input"] > 0 and summary["tokens"]["output"] >= 2 * 3
    assert summary["tokens"]["total"] == summary["tokens"]["input"] + summary["tokens"]["output"]
