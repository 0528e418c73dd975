"""Evaluate a Graph over a dataset on a Ray cluster, directly or as a Ray Job with ``ray-harness submit``.

Directly (joins ``RAY_ADDRESS``, else starts an embedded local Ray):

    python examples/graph_eval_on_cluster.py --output results.jsonl
    python examples/graph_eval_on_cluster.py --model openai:gpt-4o --rows 3

As a Ray Job on a cluster (here the one-machine cluster of ``cluster/local.sh``), from the repository root;
``--working-dir examples`` ships this directory, so the job and every host actor can import
``graph_eval_on_cluster``; the job runs in its own copy of it on the head, and ``--download`` brings the
results file the job wrote there back from the cluster:

    cluster/local.sh up 2
    export RAY_AUTH_MODE=token                     # the cluster keeps Ray's token authentication on
    ray-harness submit --working-dir examples --download graph_eval_results.jsonl -- \\
        eval graph_eval_on_cluster:build_graph graph_eval_questions.jsonl \\
        --scorer graph_eval_on_cluster:names_the_product --output graph_eval_results.jsonl
    cluster/local.sh down

The job prints ``rows 6  errors 0  tokens 2400 ...`` and ``score names_the_product: mean 1.000 ...``; CI
runs exactly this on a fresh ``cluster/local.sh`` cluster (``tests/integration/test_first_job.py``).

What it shows:

* a Graph (``classify → (answer ∥ check_policy) → reply`` with an AND-join) as the evaluation target: a
  zero-argument factory builds a fresh graph per row, inside pooled Ray host actors (never an actor per row);
* ``evaluate(target, dataset, scorers=[...], output=...)``: per-row records (input, output, status, usage,
  latency, error) appended to ``output``; a second run with the same ``output`` resumes;
* the summary: rows, errors, rows/s, tokens, scores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from ray_harness import Agent, Graph, GraphBuilder
from ray_harness.testing import ScriptedModel, text
from ray_harness.types import Usage

DATASET = Path(__file__).with_name("graph_eval_questions.jsonl")


def _product(call: Any) -> str:
    found = re.search(r"\b(router|camera|speaker|thermostat)\b", json.dumps(call.messages), re.IGNORECASE)
    return found.group(1).lower() if found else "product"


def _offline(kind: str) -> ScriptedModel:
    """A scripted stand-in for node ``kind``: it answers every call (``loop=True``), naming the product."""
    replies = {
        "classify": "Category: {} support.",
        "answer": "Restart the {} and update its firmware.",
        "check_policy": "The {} is under warranty for 2 years.",
        "reply": "Your {}: restart it and update the firmware; it is covered by a 2-year warranty.",
    }
    usage: Usage = {"inputTokens": 80, "outputTokens": 20, "totalTokens": 100}
    return ScriptedModel(lambda call: text(replies[kind].format(_product(call)), usage=usage), loop=True,
                         model_id="offline")


def build_graph() -> Graph:
    """The evaluation target: one fresh graph per row. ``EXAMPLE_MODEL`` picks a real model."""
    model = os.environ.get("EXAMPLE_MODEL")
    builder = GraphBuilder()
    for node_id, prompt in [("classify", "Name the product and the kind of problem."),
                            ("answer", "Give the fix in one sentence."),
                            ("check_policy", "State the warranty that applies in one sentence."),
                            ("reply", "Write the reply to the customer in two sentences.")]:
        builder.add_node(Agent(model or _offline(node_id), name=node_id, system_prompt=prompt), node_id)
    builder.add_edge("classify", "answer")
    builder.add_edge("classify", "check_policy")
    builder.add_edge("answer", "reply")
    builder.add_edge("check_policy", "reply")
    builder.set_join("all")  # reply runs once, with both inputs
    # The graph runs inside the host actor that picked the row up: no orchestrator actor per row.
    return builder.build(runtime="local")


def names_the_product(row: dict[str, Any], result: Any) -> float:
    """1.0 when the final reply names the row's product."""
    return float(row["product"] in str(result).lower())


def _positive(value: str) -> int:
    """An argparse type: checked before Ray starts (``--rows -1`` silently dropped the last row)."""
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a provider model, e.g. openai:gpt-4o (default: offline ScriptedModel)")
    parser.add_argument("--rows", type=_positive, default=None, help="only the first N rows")
    parser.add_argument("--output", default=None, help="record file (.jsonl or .parquet); default: none")
    parser.add_argument("--concurrency", type=_positive, default=8, help="rows in flight (default 8)")
    args = parser.parse_args()
    if args.model:
        os.environ["EXAMPLE_MODEL"] = args.model  # inherited by the host actors this driver starts

    from ray_harness import runtime
    from ray_harness.evaluation import evaluate

    runtime.init(os.environ.get("RAY_ADDRESS") or "local")
    rows = [json.loads(line) for line in DATASET.read_text().splitlines() if line.strip()][: args.rows]
    summary = evaluate(build_graph, rows, scorers=[names_the_product], concurrency=args.concurrency,
                       output=args.output, resume=False, pool_size=2)
    print(f"rows {summary['rows']}  errors {summary['errors']}  tokens {summary['tokens']['total']}  "
          f"{summary['rows_per_s']:.1f} rows/s")
    for name, stats in summary["scores"].items():
        print(f"score {name}: mean {stats['mean']:.2f} over {stats['count']} rows")
    sys.exit(0 if summary["errors"] == 0 else 1)


if __name__ == "__main__":
    main()
