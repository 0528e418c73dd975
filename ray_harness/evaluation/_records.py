"""Per-row result records, written as rows finish (JSONL lines or Parquet parts) and read back on resume."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

__all__ = ("SPENT_ATTRIBUTE", "RecordWriter", "ResultFields", "mark_spent", "open_writer", "result_fields", "spent_by")

SPENT_ATTRIBUTE = "ray_harness_spent"
"""Set on the exception of a failed row: ``{"usage", "cost_usd"}`` the row spent before it failed."""


def result_fields(result: Any) -> dict[str, Any]:
    """What a record keeps of a row's result: output text, structured output, status, stop reason, usage, cost.

    Every record has both ``status`` and ``stop_reason`` (agents: ``"completed"`` and their stop reason;
    graphs and swarms: their status and ``None``), so completed and failed records have the same keys.
    """
    fields: dict[str, Any] = {"output": str(result), "structured_output": None}
    structured = getattr(result, "structured_output", None)
    if structured is not None:
        fields["structured_output"] = structured.model_dump(mode="json") if hasattr(structured, "model_dump") \
            else structured
    if hasattr(result, "stop_reason"):
        fields["status"] = "completed"
        fields["stop_reason"] = result.stop_reason
        metrics = getattr(result, "metrics", None)
        fields["usage"] = dict(getattr(metrics, "accumulated_usage", {}) or {})
        fields["cost_usd"] = float(getattr(metrics, "accumulated_cost_usd", 0.0) or 0.0)
    else:
        status = getattr(result, "status", None)
        fields["status"] = getattr(status, "value", status)
        fields["stop_reason"] = None
        fields["usage"] = dict(getattr(result, "accumulated_usage", {}) or {})
        fields["cost_usd"] = float(getattr(result, "accumulated_cost_usd", 0.0) or 0.0)
    return fields


def spent_by(target: Any) -> dict[str, Any] | None:
    """What a target built for one row spent in its (failed) invocation: the provider billed it all the same."""
    metrics = getattr(target, "event_loop_metrics", None)
    if metrics is not None:  # an Agent: its invocation counters are not rolled back with its messages
        usage = dict(getattr(metrics, "invocation_usage", {}) or {})
        cost = float(getattr(metrics, "invocation_cost_usd", 0.0) or 0.0)
    else:  # a Graph or Swarm keeps what its finished nodes used in its state
        state = getattr(target, "state", None)
        usage = dict(getattr(state, "accumulated_usage", {}) or {})
        cost = float(getattr(state, "accumulated_cost_usd", 0.0) or 0.0)
    if not any(isinstance(v, int | float) and v for v in usage.values()) and not cost:
        return None
    return {"usage": usage, "cost_usd": cost}


def mark_spent(error: BaseException, target: Any) -> None:
    """Attach what ``target`` spent to the exception of its failed run (best effort: never hides ``error``)."""
    try:
        spent = spent_by(target)
        if spent is not None:
            setattr(error, SPENT_ATTRIBUTE, spent)
    except Exception:  # an exception type that refuses attributes: the row's record just lacks the usage
        pass


class ResultFields:
    """A row's :func:`result_fields`, computed where the row ran (its result did not travel: no scorer needs it)."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields


class RecordWriter:
    """Appends records; ``done_indices()`` tells a resumed evaluation what already finished."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def done(self) -> dict[int, dict[str, Any]]:
        return {}

    def write(self, record: dict[str, Any]) -> None:
        return None

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self.flush()


_RECORD_START = b'{"index": '  # every record line starts so (json.dumps keeps the first key first)
RECORD_KEYS = frozenset({"index", "input", "output", "status", "error"})
"""Fields every result record has (of an agent, a graph, a failed row; JSONL and Parquet alike)."""
_FIRST_LINE_LIMIT = 64 << 20


def not_results_error(path: Any, why: str) -> ValueError:
    return ValueError(f"output {path} is not a results file of an evaluation ({why}); it was left untouched: "
                      "choose another output path")


def check_jsonl_output(path: Path) -> None:
    """Refuse (before touching it) an output that exists and is not a JSONL results file."""
    if not path.exists():
        return
    if not path.is_file():
        raise not_results_error(path, "not a regular file")
    with path.open("rb") as handle:
        first = handle.readline(_FIRST_LINE_LIMIT)
    if not first.strip():
        return  # empty: nothing to lose
    try:
        record = json.loads(first)
    except ValueError:
        # A crash in the very first write leaves a cut record: ours if it starts as one and has no line end.
        if first.endswith(b"\n") or not first.startswith(_RECORD_START[:len(first)]):
            raise not_results_error(path, "its first line is not a result record") from None
        return
    # A user's data can start with {"index": ...} too: a record has every field an evaluation writes.
    if not (isinstance(record, dict) and record.keys() >= RECORD_KEYS):
        missing = sorted(RECORD_KEYS - record.keys()) if isinstance(record, dict) else ["(not an object)"]
        raise not_results_error(path, f"its first line is not a result record: no {', '.join(missing)}")


class JsonlWriter(RecordWriter):
    def __init__(self, path: Path, resume: bool) -> None:
        super().__init__(path)
        check_jsonl_output(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not resume and path.exists():
            path.unlink()
        self._repair_tail(path)
        self._handle = path.open("a", encoding="utf-8")

    @staticmethod
    def _repair_tail(path: Path) -> None:
        """A crash mid-write can leave a partial last line: drop it (that row simply runs again)."""
        if not path.exists() or path.stat().st_size == 0:
            return
        data = path.read_bytes()
        if data.endswith(b"\n"):
            return
        cut = data.rfind(b"\n") + 1
        with path.open("r+b") as handle:
            handle.truncate(cut)

    def done(self) -> dict[int, dict[str, Any]]:
        assert self.path is not None
        records: dict[int, dict[str, Any]] = {}
        with self.path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{self.path}:{number}: corrupt result record ({error.msg}); "
                                     "fix or move the file, or pass resume=False") from None
                if isinstance(record, dict) and isinstance(record.get("index"), int):
                    records[record["index"]] = record
        return records

    def write(self, record: dict[str, Any]) -> None:
        self._handle.write(json.dumps(record, default=str) + "\n")
        self._handle.flush()  # a finished row is on disk before the next one is reported

    def flush(self) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        if not self._handle.closed:
            self.flush()
            self._handle.close()


class ParquetWriter(RecordWriter):
    """A directory of Parquet part files (Parquet files cannot be appended to); one part per flush."""

    def __init__(self, path: Path, resume: bool, batch: int = 256) -> None:
        super().__init__(path)
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ImportError("Parquet output needs pyarrow: pip install pyarrow (or use a .jsonl output)") from None
        check_parquet_output(path)
        if not resume and path.exists():
            for part in path.glob("part-*.parquet"):
                part.unlink()
        path.mkdir(parents=True, exist_ok=True)
        self._pending: list[dict[str, Any]] = []
        self._batch = batch
        # After the highest part, not after the count: with a part removed (its rows to run again), the count
        # would name an existing part, and replace its records.
        numbers = [int(part.name[5:11]) for part in path.glob("part-*.parquet") if _OUR_NAME.fullmatch(part.name)]
        self._parts = max(numbers, default=-1) + 1

    def done(self) -> dict[int, dict[str, Any]]:
        import pyarrow.parquet as pq

        assert self.path is not None
        records: dict[int, dict[str, Any]] = {}
        for part in sorted(self.path.glob("part-*.parquet")):
            for row in pq.read_table(part).to_pylist():
                record = {k: json.loads(v) if isinstance(v, str) and k in _JSON_COLUMNS else v for k, v in row.items()}
                records[int(record["index"])] = record
        return records

    def write(self, record: dict[str, Any]) -> None:
        self._pending.append(record)
        if len(self._pending) >= self._batch:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        assert self.path is not None
        rows = [{k: json.dumps(v, default=str) if k in _JSON_COLUMNS else v for k, v in r.items()}
                for r in self._pending]
        # Every part gets the same column types: inferred, a part whose rows all failed would type ``output``
        # as null, and the directory would no longer read as one dataset (string vs null).
        types = {"index": pa.int64(), "cost_usd": pa.float64(), "latency_s": pa.float64(),
                 **{name: pa.string() for name in (*_JSON_COLUMNS, "output", "status", "stop_reason")}}
        names = list(dict.fromkeys(key for row in rows for key in row))
        schema = pa.schema([pa.field(name, types[name] if name in types else
                                     pa.array([row.get(name) for row in rows]).type) for name in names])
        temp = self.path / f".part-{self._parts:06d}.tmp"
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), temp)
        os.replace(temp, self.path / f"part-{self._parts:06d}.parquet")
        self._parts += 1
        self._pending = []


_JSON_COLUMNS = {"input", "usage", "error", "scores", "structured_output"}



_OUR_NAME = re.compile(r"part-\d{6}\.parquet|\.part-\d{6}\.tmp")


def check_parquet_output(path: Path) -> None:
    """Refuse (before touching it) an output that exists and is not a directory of result parts."""
    if not path.exists():
        return
    if not path.is_dir():
        raise not_results_error(path, "a file where a directory of Parquet parts belongs")
    import pyarrow.parquet as pq

    others = sorted(entry.name for entry in path.iterdir() if not _OUR_NAME.fullmatch(entry.name))
    if others:  # parts are only ever written into a directory of parts (or a new one)
        raise not_results_error(path, f"it holds files that are not result parts, e.g. {others[0]}")
    for part in sorted(path.glob("part-*.parquet")):
        try:
            names = pq.read_schema(part).names
        except Exception as error:
            raise not_results_error(path, f"{part.name} is not Parquet: {error}") from None
        missing = sorted(RECORD_KEYS - set(names))
        if missing:
            raise not_results_error(path, f"{part.name} has no {', '.join(missing)} column")


def open_writer(output: str | os.PathLike[str] | None, resume: bool) -> RecordWriter:
    if output is None:
        return RecordWriter(None)
    path = Path(output)
    if path.suffix.lower() == ".parquet":
        return ParquetWriter(path, resume)
    return JsonlWriter(path, resume)
