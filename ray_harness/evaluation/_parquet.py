"""Result records as Parquet: the schema, Arrow tables of records, and the parts of an output directory.

Plain pyarrow (no Ray): the Ray Data path (:mod:`ray_harness.runtime._evaluation_data`) writes and resumes with these.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from ray_harness.evaluation._records import RECORD_KEYS, not_results_error

__all__ = ("USAGE_FIELDS", "existing_parts", "read_records", "record_schema", "records_table",
           "set_aside_partial_parts")

logger = logging.getLogger("ray_harness.evaluation")

USAGE_FIELDS = ("inputTokens", "outputTokens", "totalTokens", "cacheReadInputTokens", "cacheWriteInputTokens")


def record_schema(input_type: Any, scorers: list[str]) -> Any:
    """The Parquet schema of result records (``scores`` only when there are scorers: Parquet has no empty struct)."""
    import pyarrow as pa

    fields = [
        pa.field("index", pa.int64()),
        pa.field("input", input_type),
        pa.field("output", pa.string()),
        pa.field("structured_output", pa.string()),  # JSON text: its shape is the user's model
        pa.field("status", pa.string()),
        pa.field("stop_reason", pa.string()),
        pa.field("usage", pa.struct([pa.field(name, pa.int64()) for name in USAGE_FIELDS])),
        pa.field("cost_usd", pa.float64()),
        pa.field("latency_s", pa.float64()),
        pa.field("error", pa.struct([pa.field("type", pa.string()), pa.field("message", pa.string()),
                                     pa.field("kind", pa.string())])),
        pa.field("pid", pa.int64()),
    ]
    if scorers:
        fields.append(pa.field("scores", pa.struct([pa.field(name, pa.float64()) for name in scorers])))
    return pa.schema(fields)


def records_table(records: list[dict[str, Any]], input_array: Any, schema: Any) -> Any:
    """Records (dicts without ``input``) and their inputs (an Arrow struct array) as one table of ``schema``."""
    import pyarrow as pa

    columns: dict[str, Any] = {}
    for field in schema:
        if field.name == "input":
            columns["input"] = input_array
        elif field.name == "usage":
            columns["usage"] = pa.array([_usage(r.get("usage")) for r in records], field.type)
        elif field.name == "scores":
            names = [f.name for f in field.type]
            columns["scores"] = pa.array([{n: _number((r.get("scores") or {}).get(n)) for n in names}
                                          for r in records], field.type)
        elif field.name == "structured_output":
            columns[field.name] = pa.array([None if r.get(field.name) is None else json.dumps(r[field.name], default=str)
                                            for r in records], field.type)
        else:
            columns[field.name] = pa.array([r.get(field.name) for r in records], field.type)
    return pa.Table.from_pydict(columns, schema=schema)


def _usage(usage: Any) -> dict[str, int] | None:
    if not usage:
        return None
    return {name: int(usage.get(name, 0) or 0) for name in USAGE_FIELDS}


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    return None


def _filesystem_and_path(output: str, filesystem: Any) -> tuple[Any, str]:
    import pyarrow.fs as pafs

    if filesystem is not None:
        return filesystem, output.removeprefix("s3://") if output.startswith("s3://") else output
    fs, path = pafs.FileSystem.from_uri(output if "://" in output else f"file://{_absolute(output)}")
    return fs, path


def _absolute(path: str) -> str:
    import os

    return os.path.abspath(path)


def existing_parts(output: str, filesystem: Any) -> list[str]:
    """The Parquet files already in ``output``; refuses an output that is not a directory of records."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    fs, path = _filesystem_and_path(output, filesystem)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return []
    if info.type != pafs.FileType.Directory:
        raise not_results_error(output, "a file where a directory of Parquet records belongs")
    # Hidden names (".partial-...", "_SUCCESS") are not records: Parquet readers skip them too.
    files = [i for i in fs.get_file_info(pafs.FileSelector(path, recursive=True))
             if i.type == pafs.FileType.File and not i.base_name.startswith((".", "_"))]
    parts = sorted(i.path for i in files if i.path.endswith(".parquet"))
    others = [i.path for i in files if not i.path.endswith(".parquet")]
    if others:
        raise not_results_error(output, f"it holds files that are not Parquet records, e.g. {others[0]}")
    readable = []
    for part in parts:
        try:
            with fs.open_input_file(part) as handle:
                names = pq.read_schema(handle).names
        except Exception as error:
            if not _RAY_PART.search(part):
                raise not_results_error(output, f"{part} is not Parquet: {error}") from None
            continue  # a part Ray Data was writing when its run was killed or cancelled: see set_aside
        missing = sorted(RECORD_KEYS - set(names))
        if missing:  # a user's data can have an "index" and an "input" column too
            raise not_results_error(output, f"{part} has no {', '.join(missing)} column")
        readable.append(part)
    return readable


_RAY_PART = re.compile(r"/[0-9A-Za-z]+_[0-9a-f]{32}_\d{6}-\d+\.parquet$")
"""The name Ray Data's Parquet writer gives a part: ``<dataset id>_<write uuid>_<task index>-<n>.parquet``."""


def set_aside_partial_parts(output: str, filesystem: Any) -> list[str]:
    """Rename parts cut short by a killed or cancelled run to hidden names (their rows run again).

    Only files named like Ray Data's parts in a directory whose readable parts are records: nothing else is
    touched. Hidden names (``.partial-...``) are skipped by Parquet readers, so the output stays readable.
    """
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    fs, path = _filesystem_and_path(output, filesystem)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return []
    moved = []
    for info in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
        if info.type != pafs.FileType.File or not _RAY_PART.search(info.path):
            continue
        try:
            with fs.open_input_file(info.path) as handle:
                pq.read_schema(handle)
        except Exception:
            target = info.path[: -len(info.base_name)] + ".partial-" + info.base_name
            fs.move(info.path, target)
            moved.append(info.path)
    return moved


def read_records(output: str, filesystem: Any, columns: list[str] | None = None) -> Any:
    """All records in ``output`` as one Arrow table (in a task or a host: never called in the driver)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fs, _ = _filesystem_and_path(output, filesystem)
    tables = []
    for part in existing_parts(output, filesystem):
        with fs.open_input_file(part) as handle:
            tables.append(pq.read_table(handle, columns=columns))
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="permissive")
