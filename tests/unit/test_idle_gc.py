from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from ray_harness.runtime._idle_gc import MIN_YOUNG, IdleCollector


@pytest.fixture(autouse=True)
def host_threshold() -> Iterator[None]:
    """A host's young threshold (``_host._tune_gc``): the allocations below trigger no collection themselves."""
    before = gc.get_threshold()
    gc.set_threshold(1_000_000, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


@pytest.fixture
def young_collections() -> Iterator[list[int]]:
    seen: list[int] = []

    def record(phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info["generation"] == 0:
            seen.append(info["collected"])

    gc.callbacks.append(record)
    try:
        yield seen
    finally:
        gc.callbacks.remove(record)


def _allocate() -> list[list[int]]:
    return [[i] for i in range(MIN_YOUNG * 2)]  # enough net new containers to be worth a collection


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_the_young_generation_is_collected_when_the_last_invocation_ends(young_collections: list[int]
                                                                              ) -> None:
    collector = IdleCollector(delay_s=0)
    collector.enable()
    collector.begin()
    collector.begin()
    kept = _allocate()
    collector.end()
    await _settle()
    assert collector.collections == 0  # one invocation still runs: no collection under load
    collector.end()
    await _settle()
    assert collector.collections == 1
    assert young_collections
    assert gc.get_count()[0] < MIN_YOUNG
    del kept


async def test_a_new_invocation_before_the_delay_cancels_the_idle_collection() -> None:
    collector = IdleCollector(delay_s=0)
    collector.enable()
    collector.begin()
    kept = _allocate()
    collector.end()
    collector.begin()  # in the same loop iteration: the process was never idle
    await _settle()
    assert collector.collections == 0
    collector.end()
    del kept


async def test_a_process_that_is_not_a_host_never_collects() -> None:
    collector = IdleCollector(delay_s=0)  # not enabled: a driver, a test, a local tool
    collector.begin()
    kept = _allocate()
    collector.end()
    await _settle()
    assert collector.collections == 0
    del kept
