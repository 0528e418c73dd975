"""Large parallel evaluations of agents, graphs and swarms over datasets.

``evaluate(target, dataset)`` builds a fresh target per row with the factory
``target`` (a callable or ``"module:function"``), runs the rows with a bounded
number in flight — on a pool of warm Ray host actors (``runtime="ray"``, the
default) or in this process (``runtime="local"``) — and streams one record per
finished row to ``output`` (JSONL, or Parquet parts when the path ends in
``.parquet``). A crashed or cancelled evaluation continues where it stopped
with ``resume=True``: rows already in the output are skipped, so nothing
finished is lost or duplicated. Throttled rows (``ModelThrottledException``)
halve the concurrency and go back in the queue; it grows again as rows succeed.

Each record: ``index``, ``input`` (the row), ``output`` (``str(result)``),
``structured_output``, ``status`` and ``stop_reason`` (``"failed"`` and ``None`` for a
failed row), ``usage`` and ``cost_usd`` (spent, also by a failed row), ``latency_s``,
``error`` (``None`` or ``{"type", "message"}``), ``scores``. The summary has per-scorer means keyed by
the scorer's function name plus ``rows``, ``errors``, ``interrupted`` (rows stopped for a human, not
errors), ``tokens``, ``cost_usd`` and ``rows_per_s``, over the rows of this dataset only (an output reused with another dataset keeps
the records of rows this one does not have; they are not summarized). A row whose host actor dies (``RemoteActorError``) runs again
on the restarted host, up to five times, instead of being recorded as an error.

With a ``ray.data.Dataset`` (and ``runtime="ray"``) the rows go through Ray Data instead
(``_data``): ``map_batches`` on a pool of host actors, Parquet records written by Ray
Data to a directory or ``s3://`` prefix, resume by ``id_key``, and a summary computed on
the cluster; nothing row-sized passes through the driver; ``cancel_event`` / Ctrl-C work there too
(finished rows written, rows in flight cancelled, resume completes the rest). ``rate_limits`` (or
``model.rate_limit``) are cluster-wide token buckets (:mod:`ray_harness.models.rate_limit`), registered in
every process that makes a row's model calls.
``grade(results, scorers, output=None)`` scores recorded results again without the target.
Record errors carry a ``kind``: ``"target"``, ``"infrastructure"``, ``"scorer"`` (the output
is kept; counted in ``scorer_errors``) or ``"input"`` (a missing or null prompt, or a number or boolean).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import random
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ray_harness.evaluation._backends import Backend, LocalBackend, RayBackend, resolve_factory
from ray_harness.evaluation._dataset import iter_rows, prompt_problem
from ray_harness.evaluation._grade import grade
from ray_harness.evaluation._interrupt import SigintTrap
from ray_harness.evaluation._records import SPENT_ATTRIBUTE, RecordWriter, ResultFields, open_writer, result_fields
from ray_harness.evaluation._scoring import Scorer, checked_scorers, score_row
from ray_harness.evaluation._summary import summarize
from ray_harness.models.rate_limit import RateLimit, register_rate_limits
from ray_harness.telemetry.runs import eval_row_finished, row_scope, run_scope
from ray_harness.types.exceptions import ModelThrottledException, RayHarnessError, RemoteActorError

__all__ = ["RateLimit", "evaluate", "evaluate_async", "grade"]

logger = logging.getLogger("ray_harness.evaluation")


@dataclass
class _Row:
    index: int
    data: dict[str, Any]
    attempt: int = 0
    not_before: float = 0.0
    infra_attempts: int = 0


class _Concurrency:
    """Additive-increase / multiplicative-decrease limit on rows in flight (rate-limit aware)."""

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.limit = maximum
        self._streak = 0

    def throttled(self) -> None:
        self.limit = max(1, self.limit // 2)
        self._streak = 0

    def succeeded(self) -> None:
        self._streak += 1
        if self.limit < self.maximum and self._streak >= self.limit:
            self.limit += 1
            self._streak = 0


def evaluate(target: Any, dataset: Any, *, scorers: Iterable[Scorer] = (), concurrency: int | None = None,
             output: str | None = None, resume: bool = True, limits: dict[str, Any] | None = None,
             prompt_key: str = "prompt", runtime: str = "ray", pool: Any = None, pool_size: int | None = None,
             progress: bool | None = None, max_throttle_retries: int = 8,
             cancel_event: threading.Event | None = None, id_key: str | None = None,
             rate_limits: Mapping[str, RateLimit] | None = None, max_pool_size: int | None = None,
             filesystem: Any = None) -> dict[str, Any]:
    """Run ``target`` over ``dataset`` and return the summary (see the module docstring).

    Args:
        target: Zero-argument factory building an Agent, Graph or Swarm (callable or ``"module:function"``).
        dataset: JSONL/CSV path (``.json``: JSON Lines or one array), list of dicts, or a ``ray.data.Dataset``.
        scorers: ``f(row, result) -> float | bool | dict`` (sync or async); dict keys become ``<name>.<key>``.
        concurrency: Maximum rows in flight (default 32).
        output: Record file (``.jsonl`` or ``.parquet``); None keeps records in memory only. With a Ray
            Dataset: a directory or ``s3://`` prefix of Parquet parts (a ``.jsonl``/``.json``/``.csv`` name is refused).
        resume: Skip rows already recorded in ``output``.
        limits: ``Limits`` applied to every agent row.
        prompt_key: The row key holding the prompt.
        runtime: ``"ray"`` (pool of host actors; starts an embedded local Ray if none) or ``"local"``.
        pool: An existing ``ray_harness.runtime.AgentPool`` to use.
        pool_size: Host actors to start when no pool is given (default 2).
        progress: Show a progress bar (default: when stderr is a terminal).
        max_throttle_retries: Throttled attempts per row before it is recorded as an error.
        cancel_event: Set it (from any thread) to stop: in-flight rows are cancelled, finished ones kept.
            Ctrl-C (in the main thread) sets it too, and ``evaluate()`` then raises ``KeyboardInterrupt``.
        id_key: A row column identifying rows for resume (default: the row's position); every row needs one.
        rate_limits: ``{"<provider>:<model_id>": RateLimit(...)}`` enforced cluster-wide on every model call.
        max_pool_size: With a Ray Dataset: the host pool may grow from ``pool_size`` up to this.
        filesystem: A ``pyarrow.fs`` filesystem for a Ray Dataset's ``output`` (e.g. S3 with an endpoint).

    Raises:
        KeyboardInterrupt: After a Ctrl-C, once the rows in flight were cancelled and finished rows written.
    """
    from ray_harness.agent.agent import run_sync

    scorers = checked_scorers(scorers)
    summary: dict[str, Any]
    with SigintTrap(cancel_event) as trap:
        if runtime == "ray" and _is_ray_dataset(dataset):
            # In this thread, not under an event loop: Ray Data's execution is driven from here.
            summary = _evaluate_dataset(target, dataset, scorers=scorers, concurrency=concurrency, output=output,
                                        resume=resume, limits=limits, prompt_key=prompt_key, pool_size=pool_size,
                                        progress=progress, max_throttle_retries=max_throttle_retries,
                                        cancel_event=trap.event, id_key=id_key, rate_limits=rate_limits,
                                        max_pool_size=max_pool_size, filesystem=filesystem)
            if trap.fired:
                raise KeyboardInterrupt
            return summary
        summary = run_sync(evaluate_async(
            target, dataset, scorers=scorers, concurrency=concurrency, output=output, resume=resume, limits=limits,
            prompt_key=prompt_key, runtime=runtime, pool=pool, pool_size=pool_size, progress=progress,
            max_throttle_retries=max_throttle_retries, cancel_event=trap.event, id_key=id_key,
            rate_limits=rate_limits, max_pool_size=max_pool_size, filesystem=filesystem))
    if trap.fired:
        raise KeyboardInterrupt
    return summary


async def evaluate_async(target: Any, dataset: Any, *, scorers: Iterable[Scorer] = (),
                         concurrency: int | None = None, output: str | None = None, resume: bool = True,
                         limits: dict[str, Any] | None = None, prompt_key: str = "prompt", runtime: str = "ray",
                         pool: Any = None, pool_size: int | None = None, progress: bool | None = None,
                         max_throttle_retries: int = 8, cancel_event: threading.Event | None = None,
                         id_key: str | None = None, rate_limits: Mapping[str, RateLimit] | None = None,
                         max_pool_size: int | None = None, filesystem: Any = None) -> dict[str, Any]:
    """The async form of :func:`evaluate`."""
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)
                                    or concurrency < 1):
        raise ValueError(f"concurrency must be a positive int, got {concurrency!r}")
    if runtime not in ("ray", "local"):
        raise ValueError(f"runtime must be 'ray' or 'local', got {runtime!r}")
    scorers = checked_scorers(scorers)
    if limits is not None:
        from ray_harness.agent.limits import validate_limits

        validate_limits(limits)
    if runtime == "ray" and _is_ray_dataset(dataset):
        event = cancel_event if cancel_event is not None else threading.Event()
        running = asyncio.ensure_future(asyncio.to_thread(
            _evaluate_dataset, target, dataset, scorers=scorers, concurrency=concurrency, output=output,
            resume=resume, limits=limits, prompt_key=prompt_key, pool_size=pool_size, progress=progress,
            max_throttle_retries=max_throttle_retries, cancel_event=event, id_key=id_key,
            rate_limits=rate_limits, max_pool_size=max_pool_size, filesystem=filesystem))
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            event.set()  # the thread cannot be cancelled: it stops the run, and is waited for
            with contextlib.suppress(Exception):
                await running
            raise
    factory = resolve_factory(target)
    limits_by_key = dict(rate_limits or {})
    if limits_by_key:
        register_rate_limits(limits_by_key)  # checks them; rows of runtime="local" run in this process
    backend: Backend = LocalBackend(factory) if runtime == "local" else RayBackend(
        target if isinstance(target, str) else factory, pool=pool, pool_size=pool_size, results_needed=bool(scorers),
        rate_limits=limits_by_key)
    rows = _peeked(iter_rows(dataset))  # a missing or unreadable dataset fails before any output is created
    writer = open_writer(output, resume)
    # `ray-harness cancel <run>` stops the evaluation through it, as Ctrl-C does.
    stop = cancel_event if cancel_event is not None else threading.Event()
    run = _Evaluation(backend, writer, list(scorers), concurrency or 32, limits, prompt_key, max_throttle_retries,
                      stop, id_key)
    summary: dict[str, Any] = {}
    try:
        await backend.start()
        with run_scope("eval", target if isinstance(target, str) else getattr(factory, "__name__", "evaluation"),
                       cancel=stop.set, outcome=lambda: "cancelled" if summary.get("cancelled") else None):
            summary = await run.execute(rows, progress, output)
            return summary
    finally:
        writer.close()
        await backend.close()


def _is_ray_dataset(dataset: Any) -> bool:
    data = sys.modules.get("ray.data")  # a Ray Dataset exists only once ray.data was imported: no import here
    return data is not None and isinstance(dataset, data.Dataset)


def _evaluate_dataset(target: Any, dataset: Any, *, scorers: Iterable[Scorer], concurrency: int | None,
                      output: str | None, resume: bool, limits: Any, prompt_key: str, pool_size: int | None,
                      progress: bool | None, max_throttle_retries: int, cancel_event: threading.Event | None,
                      id_key: str | None, rate_limits: Mapping[str, RateLimit] | None, max_pool_size: int | None,
                      filesystem: Any) -> dict[str, Any]:
    """A Ray Dataset on the cluster (``_data``): checked here like the driver path's arguments."""
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)
                                    or concurrency < 1):
        raise ValueError(f"concurrency must be a positive int, got {concurrency!r}")
    if limits is not None:
        from ray_harness.agent.limits import validate_limits

        validate_limits(limits)
    factory = resolve_factory(target)  # checked (and imported) here; called only in the hosts
    limits_by_key = dict(rate_limits or {})
    register_rate_limits(limits_by_key)
    from ray_harness.runtime._evaluation_data import evaluate_dataset

    return evaluate_dataset(target if isinstance(target, str) else factory, dataset, scorers=list(scorers),
                            output=output, resume=resume, limits=limits, prompt_key=prompt_key, id_key=id_key,
                            pool_size=pool_size, max_pool_size=max_pool_size, concurrency=concurrency,
                            rate_limits=limits_by_key, max_throttle_retries=max_throttle_retries, progress=progress,
                            filesystem=filesystem, cancel_event=cancel_event)


def _peeked(rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    first = next(rows, None)
    if first is None:
        return iter(())
    return itertools.chain([first], rows)


class _Evaluation:
    def __init__(self, backend: Backend, writer: RecordWriter, scorers: list[Scorer], concurrency: int,
                 limits: Any, prompt_key: str, max_throttle_retries: int, cancel_event: threading.Event | None,
                 id_key: str | None = None) -> None:
        self.backend = backend
        self.writer = writer
        self.scorers = scorers
        self.gate = _Concurrency(concurrency)
        self.limits = limits
        self.prompt_key = prompt_key
        self.max_throttle_retries = max_throttle_retries
        self.max_infra_retries = 5
        self.cancel_event = cancel_event
        self.run_prefix = uuid.uuid4().hex[:8]
        self.id_key = id_key
        self.records: dict[Any, dict[str, Any]] = {}  # by row key: the row's index, or its id_key value
        self.dataset_rows = 0
        self.dataset_ids: set[Any] = set()
        self.new_rows = 0
        self.bar_errors = 0
        self.throttled = 0

    async def execute(self, rows: Iterator[dict[str, Any]], progress: bool | None, output: str | None
                      ) -> dict[str, Any]:
        self.records = {self._key(record["index"], record.get("input") or {}): record
                        for record in self.writer.done().values()}
        self.bar_errors = sum(1 for record in self.records.values() if record.get("error"))
        started = time.perf_counter()
        bar = _progress_bar(progress, initial=len(self.records))
        counted = self._counted(rows)
        cancelled = False
        try:
            cancelled = await self._loop(counted, bar)
        finally:
            if bar is not None:
                bar.close()
        elapsed = time.perf_counter() - started
        if cancelled:
            _drain(counted)  # counted, not run: which recorded rows are this dataset's
        summary = summarize(self._dataset_records(output), elapsed_s=elapsed, new_rows=self.new_rows,
                            cancelled=cancelled, output=output)
        summary["throttled"] = self.throttled
        return summary

    def _key(self, index: int, row: dict[str, Any]) -> Any:
        """What identifies a row across runs (resume): its ``id_key`` value, else its position."""
        return index if self.id_key is None else row.get(self.id_key)

    def _counted(self, rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for index, row in enumerate(rows):
            if self.id_key is not None:
                if row.get(self.id_key) is None:  # it could not be told apart from other rows on resume
                    raise ValueError(f"dataset row {index} has no {self.id_key!r} value (id_key={self.id_key!r})")
                self.dataset_ids.add(row[self.id_key])
            self.dataset_rows += 1
            yield row

    def _in_dataset(self, key: Any) -> bool:
        return key in self.dataset_ids if self.id_key is not None else key < self.dataset_rows

    def _dataset_records(self, output: str | None) -> list[dict[str, Any]]:
        """The records of this dataset's rows, by index.

        An output reused with another dataset (a shorter one, or other ids) also holds records of rows this
        dataset does not have: they are not this evaluation's results, so they stay out of its summary (and stay
        in the file, untouched).
        """
        ours = [record for key, record in self.records.items() if self._in_dataset(key)]
        if len(ours) < len(self.records):
            logger.warning("%s holds %d record(s) of rows this dataset (%d rows) does not have: they are not in "
                           "the summary", output, len(self.records) - len(ours), self.dataset_rows)
        return sorted(ours, key=lambda record: int(record["index"]))

    async def _loop(self, rows: Iterator[dict[str, Any]], bar: Any) -> bool:
        source = enumerate(rows)
        retries: collections.deque[_Row] = collections.deque()
        in_flight: dict[asyncio.Task[Any], _Row] = {}
        # Finished tasks arrive through their done callbacks: asyncio.wait() over every task in flight
        # would add and remove a callback on each of them per wake-up (quadratic at high concurrency).
        finished: collections.deque[asyncio.Task[Any]] = collections.deque()
        wakeup = asyncio.Event()

        def on_done(task: asyncio.Task[Any]) -> None:
            finished.append(task)
            wakeup.set()

        exhausted = False
        try:
            while True:
                if self.cancel_event is not None and self.cancel_event.is_set():
                    await self._cancel(in_flight)
                    return True
                while len(in_flight) < self.gate.limit:
                    row = self._next_row(retries, source) if not exhausted else self._next_retry(retries)
                    if row is None:
                        if not exhausted and not retries:
                            exhausted = True
                        break
                    task = asyncio.ensure_future(self._run_row(row))
                    task.add_done_callback(on_done)
                    in_flight[task] = row
                if not in_flight:
                    if exhausted and not retries:
                        return False
                    await asyncio.sleep(min(0.05, max(0.0, retries[0].not_before - time.monotonic())))
                    continue
                if not finished:
                    # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation (Ctrl-C).
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(0.25):
                            await wakeup.wait()
                wakeup.clear()
                while finished:
                    task = finished.popleft()
                    row = in_flight.pop(task)
                    self._finish(row, task.result(), retries, bar)
        except BaseException:  # also a dataset row that cannot be read: rows in flight on hosts would run on
            await self._cancel(in_flight)
            raise

    def _next_row(self, retries: collections.deque[_Row], source: Iterator[tuple[int, dict[str, Any]]]
                  ) -> _Row | None:
        ready = self._next_retry(retries)
        if ready is not None:
            return ready
        for index, data in source:
            if self._key(index, data) not in self.records:
                return _Row(index, data)
        return None

    @staticmethod
    def _next_retry(retries: collections.deque[_Row]) -> _Row | None:
        if retries and retries[0].not_before <= time.monotonic():
            return retries.popleft()
        return None

    async def _cancel(self, in_flight: dict[asyncio.Task[Any], _Row]) -> None:
        if not in_flight:
            return
        run_ids = [self._run_id(row) for row in in_flight.values()]
        try:
            await asyncio.wait_for(self.backend.cancel(run_ids), timeout=10)
        except Exception:  # cancelling is best effort; the tasks are cancelled below either way
            pass
        for task in in_flight:
            task.cancel()
        await asyncio.gather(*in_flight, return_exceptions=True)
        self.writer.flush()

    def _run_id(self, row: _Row) -> str:
        return f"eval-{self.run_prefix}-{row.index}-{row.attempt}"

    async def _run_row(self, row: _Row) -> tuple[Any, BaseException | None, float | None]:
        problem = prompt_problem(row.data, row.index, self.prompt_key)
        if problem is not None:
            return None, _NoPrompt(problem), None
        started = time.perf_counter()
        try:
            with row_scope(str(row.index)):  # names the host call that runs it: ray_harness.row:<eval>/<index>
                result = await self.backend.run(self._run_id(row), row.data[self.prompt_key], self.limits)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            return None, error, time.perf_counter() - started
        latency = time.perf_counter() - started
        return result, None, latency

    def _finish(self, row: _Row, outcome: tuple[Any, BaseException | None, float | None], retries: collections.deque[_Row],
                bar: Any) -> None:
        result, error, latency = outcome
        if isinstance(error, ModelThrottledException) and row.attempt < self.max_throttle_retries:
            self.gate.throttled()
            self.throttled += 1
            row.attempt += 1
            delay = min(30.0, (error.retry_after or 0.5 * 2 ** row.attempt)) * random.uniform(0.8, 1.2)
            row.not_before = time.monotonic() + delay
            retries.append(row)
            return
        if isinstance(error, RemoteActorError) and row.infra_attempts < self.max_infra_retries:
            # The host process died under this row (a crash, a lost node): not the row's fault. Ray restarts
            # the host; the row runs again from scratch (at-least-once for side effects of its tools).
            row.infra_attempts += 1
            row.not_before = time.monotonic() + 0.5 * row.infra_attempts
            retries.append(row)
            return
        if error is None:
            self.gate.succeeded()
        record = _record(row, result, error, latency)
        self.records[self._key(row.index, row.data)] = record
        self.new_rows += 1
        if self.scorers and error is None:
            record["scores"], failure = score_row(self.scorers, row.data, result)
            if failure is not None:  # the output is kept; the record says which scorer failed
                record["error"] = failure
        self.writer.write(record)
        eval_row_finished("failed" if record.get("error") else "completed")
        if bar is not None:
            if record.get("error"):
                self.bar_errors += 1
            bar.set_postfix(errors=self.bar_errors, concurrency=self.gate.limit, refresh=False)
            bar.update(1)


def _drain(rows: Iterator[dict[str, Any]]) -> None:
    """Read the rest of ``rows``; a row that cannot be read ends it (no evaluation gets past it either)."""
    with contextlib.suppress(Exception):
        for _ in rows:
            pass


class _NoPrompt(RayHarnessError, KeyError):
    """A row without a usable prompt: the dataset's fault (error kind ``"input"``), recorded as a ``KeyError``."""

    def __str__(self) -> str:
        return str(self.args[0])  # KeyError's own str() quotes its message


def _record(row: _Row, result: Any, error: BaseException | None, latency: float | None) -> dict[str, Any]:
    record: dict[str, Any] = {"index": row.index, "input": row.data, "output": None, "structured_output": None,
                              "status": "failed", "stop_reason": None, "usage": None, "cost_usd": 0.0,
                              "latency_s": latency, "error": None, "scores": {}}
    if isinstance(error, _NoPrompt):  # as the Ray Dataset path records it
        record["error"] = {"type": "KeyError", "message": str(error), "kind": "input"}
        return record
    if error is not None:
        # A host that died under the row more often than it is retried: the cluster's fault, not the target's.
        kind = "infrastructure" if isinstance(error, RemoteActorError) else "target"
        record["error"] = {"type": type(error).__name__, "message": str(error), "kind": kind}
        spent = getattr(error, SPENT_ATTRIBUTE, None)  # the provider billed a failed row too
        if spent is not None:
            record["usage"], record["cost_usd"] = spent["usage"], spent["cost_usd"]
        return record
    # A row without scorers comes back from its host as these fields already (see RayBackend).
    record.update(result.fields if isinstance(result, ResultFields) else result_fields(result))
    return record


def _progress_bar(progress: bool | None, initial: int) -> Any:
    show = progress if progress is not None else sys.stderr.isatty()
    if not show:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(initial=initial, unit="row", desc="evaluate", dynamic_ncols=True)
