"""The harness metrics sinks' cost per P2 row on a host, without the row's own work (issue 20).

Drives, in one process, exactly the metric reports a P2 row (a 3-node chain graph per evaluation row) makes on
the host that runs it, through the real scopes of :mod:`ray_harness.telemetry.runs` and the fan-out of
:mod:`ray_harness.telemetry.metrics`, into the two sinks a Ray host installs (``RayMetricsSink`` and
``RunReporter``): the row's tags arrive with the call (``scoped``: run, eval, job), the row's graph is a nested
run, and per node ``node_started``, the agent's ``active_agents`` +1, ``model_call``, ``active_agents`` -1,
``interrupts_pending``, ``node_finished``. ``--driver`` adds the driver's ``eval_row`` per row.

The sinks' background threads are not started (their intervals are made infinite): both sinks are flushed from
the main thread every ``--flush-every`` rows (a host's 1 s flush covers hundreds of rows), so an instruction count
does not depend on timing. Count it for N and 2N rows; the difference over N is the per-row cost::

    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        python3 -m benchmarks.metrics_sinks --rows 2000

``--ray`` connects to a Ray started for the script (its own temp dir; Ray's histogram ``record`` is then the
connected worker's). Without it the metric objects record into Ray's in-process metric library unconnected, and
the run reporter publishes nothing to the GCS (it encodes its records all the same). ``--sinks none`` measures
the scopes with no sink installed (what a process without sinks pays).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import threading
import time
from typing import Any
from unittest import mock

from ray_harness.telemetry import metrics
from ray_harness.telemetry.runs import node_scope, run_scope, scoped

_USAGE = {"inputTokens": 12, "outputTokens": 7, "totalTokens": 19}
_NODES = ("a", "b", "c")


def row(agents: tuple[str, ...], tags: dict[str, str], *, driver: bool) -> None:
    """The metric reports of one P2 row on its host (and the driver's ``eval_row`` with ``driver``)."""
    with scoped(tags), run_scope("graph", "chain", nodes=len(_NODES)):
        for node, agent in zip(_NODES, agents, strict=True):
            with node_scope(node):
                metrics.active_agents(agent, 1)
                metrics.model_call(agent, _USAGE, 0.001, 0.0)
                metrics.active_agents(agent, -1)
                metrics.interrupts_pending(agent, 0)
    if driver:
        metrics.eval_row(tags["run"], tags["eval"], "completed", 0)


def install(kind: str) -> list[Any]:
    """Install the sinks of a Ray host (``both``), one of them, or none; their threads never fire."""
    import ray

    from ray_harness.runtime import _runs
    from ray_harness.runtime._telemetry import RayMetricsSink

    installed: list[Any] = []
    if kind in ("both", "ray"):
        installed.append(metrics.add_sink(RayMetricsSink(flush_interval_s=1e9)))
    if kind in ("both", "runs"):
        _runs._FLUSH_INTERVAL_S = 1e9
        # RunReporter names its GCS key after the worker: unconnected, any name (asking Ray would start one).
        context = contextlib.nullcontext() if ray.is_initialized() else \
            mock.patch.object(ray, "get_runtime_context", _FakeContext)
        with context:
            installed.append(metrics.add_sink(_runs.RunReporter()))
    return installed


class _FakeContext:
    def get_worker_id(self) -> str:
        return "benchmark"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--flush-every", type=int, default=200, help="rows between two flushes of both sinks")
    parser.add_argument("--sinks", choices=("both", "ray", "runs", "none"), default="both")
    parser.add_argument("--ray", action="store_true", help="connect to a Ray started for this script")
    parser.add_argument("--driver", action="store_true", help="add the driver's eval_row per row")
    parser.add_argument("--time", action="store_true", help="print the wall time per row")
    args = parser.parse_args(argv)
    if args.ray:
        import ray

        ray.init(include_dashboard=False, num_cpus=1, _temp_dir=tempfile.mkdtemp(prefix="rh_bench_"),
                 log_to_driver=False)
    installed = install(args.sinks) if args.sinks != "none" else []
    agents = ("chain_a", "chain_b", "chain_c")
    tags = {"run": "0123456789abcdef", "eval": "benchmarks.graph:chain_graph", "job": "01000000"}
    started = time.perf_counter()
    for index in range(args.rows):
        row(agents, tags, driver=args.driver)
        if (index + 1) % args.flush_every == 0:
            for sink in installed:
                sink.flush()
    for sink in installed:
        sink.flush()
    if args.time:
        print(f"{(time.perf_counter() - started) / args.rows * 1e6:.2f} µs per row, "
              f"{threading.active_count()} threads", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
