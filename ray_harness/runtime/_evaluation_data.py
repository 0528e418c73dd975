"""Evaluations at cluster scale: a Ray Dataset through ``map_batches`` on a pool of host actors, into Parquet.

The driver builds a plan and watches counters; it never holds a row or a record. Each host actor builds the
target per row from the factory (never in the driver), runs the rows of its batch concurrently on its own
event loop, scores them, and returns a Parquet-ready Arrow table; Ray Data's writers stream the tables to
``output`` (a local directory or ``s3://``). A host that dies mid-batch has that batch run again on
another host by Ray Data, and the writer receives each batch once: every row is recorded exactly once.
Resume reads the keys already in ``output`` in a task (a set in the object store, filtered in the hosts).
The summary is computed by a task over what ``output`` holds; progress comes from a counters actor that
the hosts update after each batch.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import ray

from ray_harness.evaluation._backends import LocalBackend
from ray_harness.evaluation._dataset import prompt_problem
from ray_harness.evaluation._parquet import (
    _number,
    existing_parts,
    read_records,
    record_schema,
    records_table,
    set_aside_partial_parts,
)
from ray_harness.evaluation._records import SPENT_ATTRIBUTE, not_results_error, result_fields
from ray_harness.evaluation._scoring import Scorer, score_names, score_row
from ray_harness.evaluation._summary import summarize_columns
from ray_harness.models.rate_limit import RateLimit, register_rate_limits
from ray_harness.runtime import _pickling
from ray_harness.runtime._placement import placed
from ray_harness.runtime._spec import agent_spec
from ray_harness.runtime._telemetry import with_actor_env
from ray_harness.telemetry.propagation import attached, current_carrier
from ray_harness.types.exceptions import ModelThrottledException

__all__ = ("evaluate_dataset", "grade_dataset", "is_ray_dataset")

logger = logging.getLogger("ray_harness.evaluation")

INDEX_COLUMN = "__ray_harness_index"


def is_ray_dataset(dataset: Any) -> bool:
    data = sys.modules.get("ray.data")
    return data is not None and isinstance(dataset, data.Dataset)


class _Counters:
    """Cluster-side state of one evaluation: progress the hosts add after each batch, and the cancel flag.

    A host asks :meth:`begin` before it runs a batch: once the run is cancelled no batch starts (it is
    passed through empty, so Ray Data drains the plan without a model call and writes nothing for it).
    Batches already running see the flag by polling :meth:`cancelled`, cancel their unfinished rows and
    return the finished ones, which Ray Data's writer records: a cancelled run leaves only whole parts.
    """

    def __init__(self) -> None:
        self._values = {"rows": 0, "errors": 0, "tokens": 0, "cost_usd": 0.0, "throttled": 0, "skipped": 0,
                        "cancelled_rows": 0}
        self._cancelled = False

    def add(self, values: dict[str, Any]) -> None:
        for key, value in values.items():
            self._values[key] = self._values.get(key, 0) + value

    def snapshot(self) -> dict[str, Any]:
        return dict(self._values)

    def cancel(self) -> None:
        self._cancelled = True

    def begin(self) -> bool:
        """Whether a batch may start (False once the run is cancelled)."""
        return not self._cancelled

    def cancelled(self) -> bool:
        return self._cancelled


class EvaluationHost:
    """A Ray Data ``map_batches`` actor: runs, scores and records the rows of each batch it is given."""

    def __init__(self, spec: Any, options: dict[str, Any]) -> None:
        self._spec = spec
        self._prompt_key: str = options["prompt_key"]
        self._id_key: str | None = options["id_key"]
        self._limits = options["limits"]
        self._scorers: list[Scorer] = _pickling.loads(options["scorers"])
        self._score_names: list[str] = options["score_names"]
        self._schema = options["schema"]
        self._counters = options["counters"]
        self._max_throttle_retries: int = options["max_throttle_retries"]
        self._done: set[Any] = ray.get(options["done"]) if options["done"] is not None else set()
        if options["rate_limits"]:
            register_rate_limits(options["rate_limits"])
        self._backend = LocalBackend(spec.build)  # the factory runs here, never in the driver
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, name="ray_harness-eval-host", daemon=True).start()
        self._prefix = uuid.uuid4().hex[:8]
        self._cancelled = False
        self._trace = options.get("trace_context")  # the driver's span: rows are its children (else a trace each)

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        indexes = batch.column(INDEX_COLUMN).to_pylist()
        inputs = batch.drop_columns([INDEX_COLUMN])
        if self._cancelled or not ray.get(self._counters.begin.remote()):
            self._cancelled = True  # the run was cancelled: this batch passes through empty
            return records_table([], _struct_of(inputs.slice(0, 0)), self._schema)
        rows = inputs.to_pylist()
        keep = [i for i, (index, row) in enumerate(zip(indexes, rows, strict=True))
                if self._key(index, row) not in self._done]
        records, throttled, kept = asyncio.run_coroutine_threadsafe(
            self._run_all([(indexes[i], rows[i]) for i in keep]), self._loop).result()
        cancelled = len(keep) - len(kept)
        keep = [keep[i] for i in kept]  # the rows cut short by a cancel are not recorded: a resume runs them
        if len(keep) < len(rows):
            inputs = inputs.take(pa.array(keep, pa.int64()))
        self._counters.add.remote({
            "rows": len(records), "skipped": len(rows) - len(records) - cancelled, "throttled": throttled,
            "cancelled_rows": cancelled,
            "errors": sum(1 for r in records if r["error"] and r["error"]["kind"] != "scorer"),
            "tokens": sum(int((r.get("usage") or {}).get("totalTokens", 0) or 0) for r in records),
            "cost_usd": sum(float(r.get("cost_usd") or 0.0) for r in records)})
        return records_table(records, _struct_of(inputs), self._schema)

    def _key(self, index: int, row: dict[str, Any]) -> Any:
        return row.get(self._id_key) if self._id_key is not None else index

    async def _run_all(self, rows: list[tuple[int, dict[str, Any]]]
                       ) -> tuple[list[dict[str, Any]], int, list[int]]:
        """The records of the rows that finished, the throttled attempts, and which rows they are."""
        # A row's Graph/Swarm runs here, in this Ray Data worker: no orchestrator actor per row.
        with placed("in_process"), attached(self._trace):
            tasks = [asyncio.ensure_future(self._run_row(index, row)) for index, row in rows]
        pending: set[asyncio.Future[Any]] = set(tasks)
        while pending:
            _, pending = await asyncio.wait(pending, timeout=_CANCEL_POLL_S)
            if pending and await self._counters.cancelled.remote():
                self._cancelled = True
                break
        finished = [i for i, task in enumerate(tasks) if task.done()]  # before cancelling: nothing after counts
        if pending:
            await self._backend.cancel(self._backend.running())  # agents stop at their next safe point
            _, late = await asyncio.wait(pending, timeout=_CANCEL_GRACE_S)
            for task in late:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        outcomes = [tasks[i].result() for i in finished]
        return [record for record, _ in outcomes], sum(throttled for _, throttled in outcomes), finished

    async def _run_row(self, index: int, row: dict[str, Any]) -> tuple[dict[str, Any], int]:
        import os

        base: dict[str, Any] = {"index": index, "output": None, "structured_output": None, "status": "failed",
                                "stop_reason": None, "usage": None, "cost_usd": 0.0, "latency_s": None,
                                "error": None, "pid": os.getpid(), "scores": {}}
        problem = prompt_problem(row, index, self._prompt_key)
        if problem is not None:  # as the list path records it
            base["error"] = {"type": "KeyError", "kind": "input", "message": problem}
            return base, 0
        prompt = row[self._prompt_key]
        throttled = 0
        while True:
            started = time.perf_counter()
            try:
                result = await self._backend.run(f"eval-{self._prefix}-{index}-{throttled}", prompt, self._limits)
            except ModelThrottledException as error:
                if throttled < self._max_throttle_retries:
                    throttled += 1  # re-queued: the provider's quota, not the row, is at fault
                    await asyncio.sleep(min(30.0, error.retry_after or 0.5 * 2 ** throttled) * random.uniform(0.8, 1.2))
                    continue
                return _failed(base, error, time.perf_counter() - started), throttled
            except Exception as error:
                return _failed(base, error, time.perf_counter() - started), throttled
            break
        base["latency_s"] = time.perf_counter() - started
        base.update(result_fields(result))
        if self._scorers:
            base["scores"], failure = score_row(self._scorers, row, result, base)
            if failure is not None:  # the output is kept; the record says which scorer failed
                base["error"] = failure
        return base, throttled


_CANCEL_POLL_S = 0.25
"""How often a running batch asks whether the run was cancelled (one tiny actor call per host)."""
_CANCEL_GRACE_S = 10.0
"""How long cancelled rows get to stop at a safe point before their tasks are cancelled outright."""


def _struct_of(inputs: Any) -> Any:
    import pyarrow as pa

    return pa.StructArray.from_arrays([inputs.column(n).combine_chunks() for n in inputs.column_names],
                                      fields=list(inputs.schema))


def _failed(record: dict[str, Any], error: BaseException, latency: float) -> dict[str, Any]:
    record["latency_s"] = latency
    record["error"] = {"type": type(error).__name__, "message": str(error), "kind": "target"}
    spent = getattr(error, SPENT_ATTRIBUTE, None)
    if spent is not None:
        record["usage"], record["cost_usd"] = spent["usage"], spent["cost_usd"]
    return record


def _done_keys(output: str, filesystem: Any, id_key: str | None) -> set[Any]:
    table = read_records(output, filesystem, ["index", "input"])
    if table is None:
        return set()
    if id_key is None:
        return set(table.column("index").to_pylist())
    return {row.get(id_key) if row else None for row in table.column("input").to_pylist()}


def _summary_of(output: str | None, filesystem: Any, tables: list[Any] | None,
                dataset: tuple[int, str | None, list[Any]] | None = None) -> dict[str, Any]:
    """The summary of the records (a task on the cluster); ``dataset`` = (rows, id_key, refs of id lists).

    An output reused with another dataset (shorter, or other ids) also holds records of rows this dataset does
    not have: they stay in the output, untouched, but out of this summary (``left_out`` counts them).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if tables is not None:
        parts = [t for t in ray.get(tables) if t.num_rows]
        table = pa.concat_tables(parts) if parts else None
    else:
        assert output is not None
        table = read_records(output, filesystem)
    left_out = 0
    if table is not None and dataset is not None:
        rows, id_key, id_refs = dataset
        if id_key is None:
            keep = pc.less(table.column("index"), rows)
        else:
            ids: set[Any] = set()
            for chunk in ray.get(id_refs):
                ids.update(chunk)
            keep = pa.array([row is not None and row.get(id_key) in ids for row in table.column("input").to_pylist()])
        kept = table.filter(keep)
        left_out = table.num_rows - kept.num_rows
        table = kept
    summary = summarize_columns(table)
    summary["left_out"] = left_out
    return summary


def _ids_of(table: Any, id_key: str) -> list[Any]:
    return list(table.column(id_key).to_pylist())


def _indexed_block(table: Any, offset: int) -> Any:
    import pyarrow as pa

    return table.append_column(INDEX_COLUMN, pa.array(range(offset, offset + table.num_rows), pa.int64()))


def _rows_of(table: Any) -> int:
    return int(table.num_rows)


def _with_index(dataset: Any) -> tuple[Any, int, list[Any]]:
    """The dataset with each row's position in a column, its row count and its blocks' references.

    Positions come from block order and block sizes (the driver sees block references and row counts,
    never rows), so they are the same on every run over the same input: resume relies on that.
    """
    tables = dataset.to_arrow_refs()
    counts = ray.get([ray.remote(num_cpus=0)(_rows_of).remote(t) for t in tables])
    indexer = ray.remote(num_cpus=0)(_indexed_block)
    refs: list[Any] = []
    offset = 0
    for table, rows in zip(tables, counts, strict=True):
        refs.append(indexer.remote(table, offset))
        offset += rows
    return ray.data.from_arrow_refs(refs), offset, tables


def evaluate_dataset(target: Any, dataset: Any, *, scorers: list[Scorer], output: str | None, resume: bool,
                     limits: Any, prompt_key: str, id_key: str | None, pool_size: int | None,
                     max_pool_size: int | None, concurrency: int | None, rate_limits: dict[str, RateLimit] | None,
                     max_throttle_retries: int, progress: bool | None, filesystem: Any,
                     cancel_event: threading.Event | None = None, progress_interval_s: float = 30.0
                     ) -> dict[str, Any]:
    """The Ray Data path of :func:`ray_harness.evaluation.evaluate` (see the module docstring).

    Setting ``cancel_event`` stops the run: rows in flight are cancelled and not recorded, finished rows
    are written, batches not started pass through empty; a later run with the same ``output`` resumes.
    """
    import pyarrow as pa

    started = time.perf_counter()
    names = score_names(scorers)
    input_schema = dataset.schema()
    if input_schema is None:
        raise ValueError("the dataset has no rows")
    arrow_schema = pa.schema([pa.field(n, t) for n, t in zip(input_schema.names, input_schema.types, strict=True)])
    if prompt_key not in arrow_schema.names:
        raise ValueError(f"dataset has no {prompt_key!r} column (prompt_key={prompt_key!r}); its columns: "
                         f"{arrow_schema.names}")
    if id_key is not None and id_key not in arrow_schema.names:
        raise ValueError(f"dataset has no {id_key!r} column (id_key={id_key!r}); its columns: {arrow_schema.names}")
    done_ref = None
    if output is not None and str(output).rstrip("/").lower().endswith((".jsonl", ".json", ".csv")):
        # Ray Data writes Parquet parts into a directory: a "results.jsonl" directory of Parquet files is a trap.
        raise ValueError(f"output {output!r}: with a ray.data.Dataset the records are Parquet parts in a "
                         "directory (or s3:// prefix), e.g. 'results.parquet'; for one JSONL file pass the "
                         "dataset as a path or a list of dicts")
    if output is not None:
        parts = existing_parts(output, filesystem)  # refuses an output that is not ours, before anything runs
        if resume:
            for moved in set_aside_partial_parts(output, filesystem):
                logger.warning("evaluate: %s was cut short by an earlier run; set aside, its rows run again", moved)
        if parts and not resume:
            raise ValueError(f"output {output} already holds records; pass resume=True to continue it or choose "
                             "another output (records are never deleted by an evaluation)")
        if parts:
            done_ref = ray.remote(num_cpus=0)(_done_keys).remote(output, filesystem, id_key)
    schema = record_schema(pa.struct(list(arrow_schema)), names)
    counters: Any = ray.remote(num_cpus=0)(_Counters).remote()
    options = {"prompt_key": prompt_key, "id_key": id_key, "limits": limits, "scorers": _pickling.dumps(scorers),
               "score_names": names, "schema": schema, "counters": counters, "done": done_ref,
               "rate_limits": rate_limits or {}, "max_throttle_retries": max_throttle_retries,
               "trace_context": current_carrier()}
    size = pool_size or 2
    compute = ray.data.ActorPoolStrategy(min_size=size, max_size=max(size, max_pool_size or size))
    indexed, total, blocks = _with_index(dataset)
    results = indexed.map_batches(
        EvaluationHost, fn_constructor_args=(agent_spec(target), options), batch_size=concurrency or 32,
        batch_format="pyarrow", compute=compute, num_cpus=0.25, zero_copy_batch=True,  # I/O-bound hosts
        **with_actor_env({}))  # the driver's OTEL_* settings: hosts export spans where the driver does
    watcher = _Watcher(counters, progress, progress_interval_s, total, cancel_event)
    watcher.start()
    tables = None
    try:
        if output is not None:
            results.write_parquet(output, filesystem=filesystem, schema=schema)
        else:
            tables = results.to_arrow_refs()  # object-store references: the tables stay on the cluster
    finally:
        watcher.stop()
    counted: dict[str, Any] = ray.get(counters.snapshot.remote())
    id_refs = [] if id_key is None else [ray.remote(num_cpus=0)(_ids_of).remote(block, id_key) for block in blocks]
    summary: dict[str, Any] = ray.get(ray.remote(num_cpus=0)(_summary_of).remote(
        output, filesystem, tables, (total, id_key, id_refs)))
    left_out = summary.pop("left_out")
    if left_out:
        logger.warning("%s holds %d record(s) of rows this dataset (%d rows) does not have: they are not in the "
                       "summary", output, left_out, total)
    elapsed = time.perf_counter() - started
    summary.update(elapsed_s=elapsed, rows_this_run=counted["rows"], rows_per_s=counted["rows"] / elapsed,
                   throttled=counted["throttled"], cancelled=watcher.cancelled, output=output)
    return summary


class _Watcher:
    """Progress from the counters actor, and the driver's ``cancel_event`` passed on to the hosts through it.

    Progress is a tqdm bar in a terminal, a log line every N seconds otherwise.
    """

    def __init__(self, counters: Any, progress: bool | None, interval_s: float, total: int,
                 cancel_event: threading.Event | None = None) -> None:
        self._counters = counters
        self._bar = _bar(progress, total)
        self._interval = 1.0 if self._bar is not None else interval_s
        self._cancel_event = cancel_event
        self.cancelled = False
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ray_harness-eval-progress", daemon=True)
        self._started = time.perf_counter()

    def start(self) -> None:
        self._forward_cancel()  # set before the run: no batch starts
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        self._report()
        if self._bar is not None:
            self._bar.close()

    def _run(self) -> None:
        reported = time.monotonic()
        while not self._stopped.wait(min(self._interval, _CANCEL_POLL_S)):
            self._forward_cancel()
            if time.monotonic() - reported >= self._interval:
                self._report()
                reported = time.monotonic()

    def _forward_cancel(self) -> None:
        if self.cancelled or self._cancel_event is None or not self._cancel_event.is_set():
            return
        logger.info("evaluate: cancelled; finishing the rows done, the others run again on resume")
        ray.get(self._counters.cancel.remote())
        self.cancelled = True

    def _report(self) -> None:
        try:
            values = ray.get(self._counters.snapshot.remote(), timeout=10)
        except Exception:  # progress is best effort
            return
        rate = values["rows"] / max(1e-9, time.perf_counter() - self._started)
        if self._bar is not None:
            self._bar.n = values["rows"] + values["skipped"]
            self._bar.set_postfix(errors=values["errors"], tokens=values["tokens"],
                                  cost=f"${values['cost_usd']:.4f}", refresh=True)
        else:
            logger.info("evaluate: %d rows done (%.1f rows/s), %d errors, %d tokens, $%.4f, %d throttled",
                        values["rows"], rate, values["errors"], values["tokens"], values["cost_usd"],
                        values["throttled"])


def _bar(progress: bool | None, total: int) -> Any:
    show: Callable[[], bool] = sys.stderr.isatty
    if not (progress if progress is not None else show()):
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="row", desc="evaluate", dynamic_ncols=True)


def _grade_batch(table: Any, scorers: Any, schema: Any) -> Any:
    import pyarrow as pa

    from ray_harness.evaluation._grade import grade_record

    loaded = _pickling.loads(scorers)
    graded = [grade_record(loaded, record) for record in table.to_pylist()]
    kept = table.drop_columns([name for name in ("scores", "error") if name in table.column_names])
    error_type = schema.field("error").type
    kept = kept.append_column(pa.field("error", error_type), pa.array([r["error"] for r in graded], error_type))
    if "scores" in schema.names:
        score_type = schema.field("scores").type
        names = [f.name for f in score_type]
        kept = kept.append_column(pa.field("scores", score_type), pa.array(
            [{n: _number((r.get("scores") or {}).get(n)) for n in names} for r in graded], score_type))
    return kept.select(schema.names).cast(schema)


def grade_dataset(results: Any, scorers: list[Scorer], output: str | None, *, filesystem: Any) -> dict[str, Any]:
    """:func:`ray_harness.evaluation.grade` over Parquet records or a Ray Dataset of them, on the cluster."""
    import pyarrow as pa

    from ray_harness.runtime._cluster import ensure_initialized

    started = time.perf_counter()
    ensure_initialized()
    if isinstance(results, str):
        if not existing_parts(results, filesystem):
            raise FileNotFoundError(f"no result records in {results}")
        dataset = ray.data.read_parquet(results, filesystem=filesystem)
    elif is_ray_dataset(results):
        dataset = results
    else:
        raise TypeError(f"results must be a JSONL file, a directory of Parquet records, a ray.data.Dataset or a "
                        f"list of records, got {type(results).__name__}")
    if output is not None and existing_parts(output, filesystem):
        raise ValueError(f"output {output} already holds records; grade() writes new records (choose another path)")
    found = dataset.schema()
    if found is None or "index" not in found.names or "input" not in found.names:
        raise not_results_error(results, "no 'index'/'input' columns")
    base = pa.schema([pa.field(n, t) for n, t in zip(found.names, found.types, strict=True)
                      if n not in ("scores", "error")])
    names = score_names(scorers)
    wanted = record_schema(pa.null(), names)
    schema = pa.schema([*base, wanted.field("error"), *([wanted.field("scores")] if names else [])])
    grader: Any = _grade_batch  # Ray's stubs allow only one-argument functions here, fn_kwargs aside
    graded = dataset.map_batches(grader, fn_kwargs={"scorers": _pickling.dumps(scorers), "schema": schema},
                                 batch_format="pyarrow")
    tables = None
    if output is not None:
        graded.write_parquet(output, filesystem=filesystem, schema=schema)
    else:
        tables = graded.to_arrow_refs()
    summary: dict[str, Any] = ray.get(ray.remote(num_cpus=0)(_summary_of).remote(output, filesystem, tables))
    summary.pop("left_out")
    elapsed = time.perf_counter() - started
    summary.update(elapsed_s=elapsed, rows_this_run=summary["rows"], rows_per_s=summary["rows"] / elapsed,
                   output=output, score_names=names)
    return summary
