"""Cluster-scale evaluation: Ray Data path vs. the driver-iterating path (rows/s, driver RSS growth).

    python -m benchmarks.eval_cluster --rows 2000,20000 [--address HOST:PORT] [--kill-every 10]

A one-turn agent whose model answers after 20 ms. The Ray Data path reads a generated Ray Dataset and
writes Parquet; the driver path iterates the same dataset in the driver and writes JSONL (what
``evaluate`` did with a Ray Dataset before). ``--rows`` is the scale knob: a comma-separated list of row
counts, each run in both modes, so the growth can be read against the dataset's size. Before the measured
runs each mode runs once on a few hundred rows (imports, worker processes, Ray Data's first plan are not
counted). Driver RSS (psutil) is sampled every 0.2 s; the growth is the largest sample minus the one
before the run. ``--kill-every N`` SIGKILLs one evaluation host every N seconds (Ray Data path) and checks
that every row is recorded once.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, text


def latency_agent() -> Agent:
    usage = {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
    return Agent(ScriptedModel(lambda call: text(f"ok {os.getpid()}", usage=usage, delay=0.02),
                               record_calls=False), name="bench")


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


class _Sampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.start_rss = _rss()
        self.peak = self.start_rss
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.2):
            self.peak = max(self.peak, _rss())


class _DriverIterated:
    """A Ray Dataset seen as rows iterated in the driver (the old path)."""

    def __init__(self, dataset: Any) -> None:
        self._dataset = dataset

    def iter_rows(self) -> Any:
        return self._dataset.iter_rows()


class _Killer(threading.Thread):
    """SIGKILLs one evaluation host (a Ray Data map worker of this cluster) every ``every`` seconds."""

    def __init__(self, every: float) -> None:
        super().__init__(daemon=True)
        self.every = every
        self.kills = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            for pid in _host_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                    self.kills += 1
                    break
                except ProcessLookupError:
                    continue


def _host_pids() -> list[int]:
    """The evaluation hosts of this driver's job (never another job's or another Ray's processes)."""
    import ray
    from ray.util.state import list_actors

    try:  # by this cluster's address: with several Rays on the machine the state API would refuse to guess
        context = ray.get_runtime_context()
        actors = list_actors(address=context.gcs_address, limit=1000,
                             filters=[("state", "=", "ALIVE"), ("job_id", "=", context.get_job_id())])
    except Exception:  # the state API is best effort under load: no kill this round
        return []
    # Ray Data's actor class is _MapWorker; its repr names the UDF: "MapWorker(MapBatches(EvaluationHost))".
    return [int(a.pid) for a in actors if a.pid and "EvaluationHost" in f"{a.class_name} {a.repr_name}"]


def run(rows: int, mode: str, pool_size: int, kill_every: float | None, block_rows: int | None = None
        ) -> dict[str, Any]:
    import ray

    from ray_harness.evaluation import evaluate

    # The rows are made on the cluster: the driver holds none of them before the run.
    # A host task runs one block: with kills every N s a block must take less than N s, or it never finishes.
    blocks = None if block_rows is None else max(1, rows // block_rows)
    dataset = ray.data.range(rows, override_num_blocks=blocks).map(lambda r: {"prompt": f"q{r['id']}"})
    out = Path(tempfile.mkdtemp(prefix="rh_bench_")) / ("records" if mode == "data" else "records.jsonl")
    sampler = _Sampler()
    sampler.start()
    killer = _Killer(kill_every) if kill_every else None
    if killer is not None:
        killer.start()
    started = time.perf_counter()
    source = dataset if mode == "data" else _DriverIterated(dataset)
    summary = evaluate("benchmarks.eval_cluster:latency_agent", source, output=str(out), pool_size=pool_size,
                       concurrency=64, progress=False)
    elapsed = time.perf_counter() - started
    sampler.stopped.set()
    if killer is not None:
        killer.stopped.set()
    growth = sampler.peak - sampler.start_rss
    after = _rss()
    # Checked in a task, not here: reading the records back would grow (and then pad) the driver's heap.
    exactly_once = ray.get(ray.remote(num_cpus=0)(_recorded_once).remote(str(out), mode, rows))
    shutil.rmtree(out.parent, ignore_errors=True)
    return {"mode": mode, "rows": rows, "rows_per_s": round(rows / elapsed, 1), "elapsed_s": round(elapsed, 1),
            "driver_rss_growth_mb": round(growth / 2**20, 1), "driver_rss_after_mb": round(after / 2**20, 1),
            "exactly_once": exactly_once, "errors": summary["errors"],
            "kills": killer.kills if killer is not None else 0}


def _recorded_once(out: str, mode: str, rows: int) -> bool:
    import pyarrow.parquet as pq

    if mode == "data":
        indexes = pq.read_table(out, columns=["index"]).column("index").to_pylist()
    else:
        indexes = [json.loads(line)["index"] for line in Path(out).read_text().splitlines()]
    return sorted(indexes) == list(range(rows))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="20000", help="comma-separated row counts (the scale knob)")
    parser.add_argument("--address", default=None)
    parser.add_argument("--pool-size", type=int, default=6)
    parser.add_argument("--modes", default="data,driver")
    parser.add_argument("--kill-every", type=float, default=None)
    parser.add_argument("--warmup-rows", type=int, default=300)
    parser.add_argument("--block-rows", type=int, default=None, help="rows per input block (default: Ray's)")
    args = parser.parse_args()
    from ray_harness import runtime

    runtime.init(address=args.address)
    if args.kill_every:
        import ray.util.state  # noqa: F401  (imported by the killer: not counted in a run's RSS growth)
    modes = args.modes.split(",")
    for mode in modes:
        if args.warmup_rows:
            warm = run(args.warmup_rows, mode, args.pool_size, None, args.block_rows)
            print(json.dumps({"warmup": True, **warm}), flush=True)
    for rows in (int(n) for n in args.rows.split(",")):
        for mode in modes:
            result = run(rows, mode, args.pool_size, args.kill_every if mode == "data" else None, args.block_rows)
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
