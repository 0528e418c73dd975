"""Datasets for evaluations: JSONL / CSV files, lists of dicts, or a Ray Dataset.

A ``.json`` file is JSON Lines or one array of objects.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ("iter_rows", "prompt_problem")


def prompt_problem(row: dict[str, Any], index: int, prompt_key: str) -> str | None:
    """Why ``row`` cannot run (an error of kind ``"input"``: the dataset's fault), or None.

    A missing or null prompt would run the target on no message at all; a number or boolean (a CSV/Parquet
    column of ids, a NaN) is no prompt either: the target would fail on it as if it were the target's fault.
    """
    prompt = row.get(prompt_key)
    if prompt is None:
        return f"row {index} has no {prompt_key!r} value (prompt_key={prompt_key!r})"
    if isinstance(prompt, bool | int | float):
        return (f"row {index}: {prompt_key!r} is {prompt!r} ({type(prompt).__name__}); a prompt is a string or "
                f"a list of content blocks or messages (prompt_key={prompt_key!r})")
    return None


def iter_rows(dataset: Any) -> Iterator[dict[str, Any]]:
    """Yield rows as dicts, lazily where the source allows it (files and Ray Datasets stream)."""
    if isinstance(dataset, str | Path):
        yield from _from_file(Path(dataset))
    elif isinstance(dataset, list | tuple):
        for index, row in enumerate(dataset):
            yield _as_row(row, f"dataset[{index}]")
    elif hasattr(dataset, "iter_rows"):  # ray.data.Dataset
        for index, row in enumerate(dataset.iter_rows()):
            yield _as_row(dict(row), f"dataset row {index}")
    else:
        raise TypeError(f"dataset must be a JSONL/CSV path, a list of dicts or a ray.data.Dataset, "
                        f"got {type(dataset).__name__}")


def _from_file(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        raise FileNotFoundError(f"dataset file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".json" and _starts_with(path, "["):
        yield from _from_json_array(path)
    elif suffix in (".jsonl", ".ndjson", ".json"):
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{path}:{number}: not valid JSON ({error.msg})") from None
                yield _as_row(row, f"{path}:{number}")
    elif suffix in (".csv", ".tsv"):
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle, delimiter="\t" if suffix == ".tsv" else ",")
            for row in reader:
                yield dict(row)
    else:
        raise ValueError(f"dataset file {path}: unsupported extension {suffix!r} (use .jsonl or .csv)")


def _starts_with(path: Path, char: str) -> bool:
    """Whether the file's first non-blank character is ``char`` (a ``.json`` file is JSON Lines or one array)."""
    with path.open(encoding="utf-8") as handle:
        while chunk := handle.read(4096):
            stripped = chunk.lstrip()
            if stripped:
                return stripped.startswith(char)
    return False


def _from_json_array(path: Path) -> Iterator[dict[str, Any]]:
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None
    for index, row in enumerate(rows):
        yield _as_row(row, f"{path}[{index}]")


def _as_row(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise ValueError(f"{where}: each row must be an object/dict, got {type(row).__name__}")
    return row
