"""Host loops leave async generators unregistered, and still close the ones dropped while suspended."""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import AsyncGenerator, Callable

import pytest

from ray_harness.runtime import _asyncgens


@pytest.fixture
def host_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_asyncgens, "_enabled", False)  # put back after the test
    _asyncgens.enable()


async def _drop_a_suspended_generator(closed: list[str]) -> None:
    async def numbers() -> AsyncGenerator[int, None]:
        try:
            yield 1
            yield 2
        finally:
            closed.append("closed")

    agen = numbers()
    assert await agen.__anext__() == 1
    registry = getattr(asyncio.get_running_loop(), "_asyncgens", None)  # uvloop keeps its registry out of sight
    if registry is not None:
        closed.append(f"registered={agen in registry}")
    del agen  # dropped while suspended: the finalizer hook schedules its aclose() on this loop
    gc.collect()
    for _ in range(3):
        await asyncio.sleep(0)


def _loop_factory(kind: str) -> Callable[[], asyncio.AbstractEventLoop]:
    if kind == "uvloop":  # what Ray runs an async actor's loops on when it is installed (it comes with ray[serve])
        return pytest.importorskip("uvloop").new_event_loop  # type: ignore[no-any-return]
    return asyncio.new_event_loop


def _run(kind: str = "asyncio") -> tuple[list[str], object, object]:
    """Run a loop that calls ``untrack_here()`` and drops a suspended generator; what happened, and its hooks."""
    closed: list[str] = []

    async def main() -> tuple[object, object]:
        _asyncgens.untrack_here()
        await _drop_a_suspended_generator(closed)
        hooks = sys.get_asyncgen_hooks()
        return hooks.firstiter, hooks.finalizer

    with asyncio.Runner(loop_factory=_loop_factory(kind)) as runner:
        firstiter, finalizer = runner.run(main())
    return closed, firstiter, finalizer


@pytest.mark.usefixtures("host_process")
@pytest.mark.parametrize("kind", ["asyncio", "uvloop"])
def test_a_host_loop_registers_no_generator_and_still_closes_a_dropped_one(kind: str) -> None:
    closed, firstiter, finalizer = _run(kind)
    assert firstiter is None
    assert finalizer is not None
    assert closed == (["registered=False", "closed"] if kind == "asyncio" else ["closed"])


def test_outside_a_host_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_asyncgens, "_enabled", False)
    closed, firstiter, _ = _run()
    assert firstiter is not None
    assert closed == ["registered=True", "closed"]
