"""Host loops leave async generators unregistered, and still close the ones dropped while suspended."""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import AsyncGenerator

import pytest

from ray_harness.runtime import _asyncgens


@pytest.fixture
def host_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_asyncgens, "_enabled", False)  # put back after the test
    _asyncgens.enable()


async def _suspended_twice(closed: list[str]) -> None:
    async def numbers() -> AsyncGenerator[int, None]:
        try:
            yield 1
            yield 2
        finally:
            closed.append("closed")

    agen = numbers()
    assert await agen.__anext__() == 1
    loop = asyncio.get_running_loop()
    registered = agen in loop._asyncgens  # type: ignore[attr-defined]
    closed.append(f"registered={registered}")
    del agen  # dropped while suspended: the finalizer hook schedules its aclose() on this loop
    gc.collect()
    for _ in range(3):
        await asyncio.sleep(0)


def _run(untrack: bool) -> tuple[list[str], object, object]:
    closed: list[str] = []

    async def main() -> tuple[object, object]:
        if untrack:
            _asyncgens.untrack_here()
        await _suspended_twice(closed)
        hooks = sys.get_asyncgen_hooks()
        return hooks.firstiter, hooks.finalizer

    firstiter, finalizer = asyncio.run(main())
    return closed, firstiter, finalizer


@pytest.mark.usefixtures("host_process")
def test_a_host_loop_registers_no_generator_and_still_closes_a_dropped_one() -> None:
    closed, firstiter, finalizer = _run(untrack=True)
    assert firstiter is None
    assert finalizer is not None
    assert closed == ["registered=False", "closed"]


def test_outside_a_host_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_asyncgens, "_enabled", False)
    closed, firstiter, _ = _run(untrack=True)
    assert firstiter is not None
    assert closed == ["registered=True", "closed"]
