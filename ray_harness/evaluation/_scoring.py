"""Scorers: ``f(row, result) -> float | bool | dict`` (sync or async), inline or by ``grade()``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ("GradedRecord", "Scorer", "score_names", "score_row")

Scorer = Callable[[dict[str, Any], Any], Any]


class GradedRecord(dict[str, Any]):
    """A recorded row as ``grade()`` hands it to scorers: the record, whose ``str()`` is the output text.

    So a scorer written for inline scoring (``str(result)``) gives the same score on the record.
    """

    def __str__(self) -> str:
        output = self.get("output")
        return "" if output is None else str(output)


def checked_scorers(scorers: Iterable[Scorer]) -> list[Scorer]:
    """The scorers as a list; ``TypeError`` naming the first that cannot be called (before any row runs)."""
    if isinstance(scorers, str) or callable(scorers):
        raise TypeError(f"scorers must be a list of callables f(row, result), got {scorers!r}")
    checked = list(scorers)
    for index, scorer in enumerate(checked):
        if not callable(scorer):
            raise TypeError(f"scorers[{index}] must be a callable f(row, result) -> float | bool | dict, "
                            f"got {scorer!r}")
    return checked


def scorer_name(scorer: Scorer) -> str:
    return str(getattr(scorer, "__name__", type(scorer).__name__))


def score_names(scorers: list[Scorer]) -> list[str]:
    """The score fields of Parquet records: a scorer's name, or ``<name>.<key>`` for the ``keys`` it declares."""
    names: list[str] = []
    for scorer in scorers:
        keys = getattr(scorer, "keys", None)
        names.extend(f"{scorer_name(scorer)}.{key}" for key in keys) if isinstance(keys, list | tuple) \
            else names.append(scorer_name(scorer))
    return names


def score_row(scorers: list[Scorer], row: dict[str, Any], result: Any, record: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Scores of one row and the first scorer failure (``{"type", "message", "kind": "scorer"}``) or None."""
    scores: dict[str, Any] = {}
    failure: dict[str, Any] | None = None
    for scorer in scorers:
        name = scorer_name(scorer)
        try:
            value = scorer(row, result)
            if inspect.isawaitable(value):
                value = _await_now(value)
        except Exception as error:
            if failure is None:
                failure = {"type": type(error).__name__, "message": f"scorer {name!r}: {error}", "kind": "scorer"}
            continue
        if isinstance(value, dict):
            for key, item in value.items():
                scores[f"{name}.{key}"] = item
        else:
            scores[name] = value
    return scores, failure


def _await_now(awaitable: Any) -> Any:
    """Async scorers run to completion in a private loop on a helper thread (the caller's loop keeps going)."""
    from ray_harness.agent.agent import run_sync

    async def wrapper() -> Any:
        return await awaitable

    return run_sync(wrapper())
