"""Several runs' streams in one: tagged groups on the sender's side, each run's own stream on the receiver's."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from ray_harness.runtime._multiplex import END, ERROR, ITEM, Demultiplexer, Entry, multiplex


async def _items(*items: Any, pause: asyncio.Event | None = None, fail: BaseException | None = None
                 ) -> AsyncGenerator[Any, None]:
    for item in items:
        if pause is not None:
            await pause.wait()
        yield item
    if fail is not None:
        raise fail


async def _groups(streams: dict[str, Any]) -> list[list[Entry]]:
    return [group async for group in multiplex(streams, pickle.dumps)]


async def test_each_stream_s_items_come_tagged_in_order_and_end_once() -> None:
    groups = await _groups({"a": _items(1, 2, 3), "b": _items("x")})
    entries = [entry for group in groups for entry in group]
    assert [payload for run_id, kind, payload in entries if run_id == "a" and kind == ITEM] == [1, 2, 3]
    assert [payload for run_id, kind, payload in entries if run_id == "b" and kind == ITEM] == ["x"]
    assert sorted((run_id, kind) for run_id, kind, _ in entries if kind != ITEM) == [("a", END), ("b", END)]
    assert entries[-1][1] == END  # nothing after the last stream's end
    assert len(groups) < len(entries)  # items that piled up travel together


async def test_an_error_ends_only_its_own_stream_encoded() -> None:
    gate = asyncio.Event()
    streams = {"bad": _items(1, fail=ValueError("boom")), "good": _items(1, 2, pause=gate)}
    collected: list[Entry] = []
    async for group in multiplex(streams, pickle.dumps):
        collected.extend(group)
        gate.set()
    errors = [(run_id, payload) for run_id, kind, payload in collected if kind == ERROR]
    assert len(errors) == 1 and errors[0][0] == "bad"
    assert str(pickle.loads(errors[0][1])) == "boom"
    assert [p for run_id, kind, p in collected if run_id == "good" and kind == ITEM] == [1, 2]
    assert ("good", END, None) in collected


async def test_closing_the_multiplexed_stream_cancels_the_streams_still_going() -> None:
    stopped: list[str] = []

    async def endless(name: str) -> AsyncGenerator[int, None]:
        try:
            while True:
                yield 1
                await asyncio.sleep(0)
        finally:
            stopped.append(name)

    groups = multiplex({"a": endless("a"), "b": endless("b")}, pickle.dumps)
    await anext(groups)
    await groups.aclose()
    for _ in range(3):
        await asyncio.sleep(0)
    assert sorted(stopped) == ["a", "b"]


def _demux(run_ids: list[str], abandoned: list[str]) -> Demultiplexer:
    return Demultiplexer(run_ids, abandoned.append, pickle.loads)


async def _read(demux: Demultiplexer, run_id: str) -> list[Any]:
    return [item async for item in demux.items(run_id)]


async def test_each_run_reads_its_own_items_and_error() -> None:
    abandoned: list[str] = []
    demux = _demux(["a", "b", "c"], abandoned)
    readers = {run_id: asyncio.ensure_future(_read(demux, run_id)) for run_id in "abc"}
    first = [("a", ITEM, 1), ("b", ITEM, "x"), ("a", ITEM, 2)]
    assert not demux.ends_all(first)
    demux.dispatch(first)
    last = [("a", END, None), ("b", ERROR, pickle.dumps(KeyError("gone"))), ("c", END, None)]
    assert demux.ends_all(last)
    demux.dispatch(last)
    assert await readers["a"] == [1, 2]
    assert await readers["c"] == []
    with pytest.raises(KeyError, match="gone"):
        await readers["b"]
    assert not abandoned and not demux.open


async def test_a_consumer_that_stops_early_abandons_only_its_run() -> None:
    abandoned: list[str] = []
    idle: list[bool] = []
    demux = _demux(["a", "b"], abandoned)
    demux.on_idle = lambda: idle.append(True)
    demux.dispatch([("a", ITEM, 1), ("b", ITEM, 2)])
    stream = demux.items("a")
    assert await anext(stream) == 1
    await stream.aclose()
    assert abandoned == ["a"] and demux.open == {"b"} and not idle
    assert demux.ends_all([("b", END, None)])  # the abandoned run no longer holds the stream open
    demux.dispatch([("a", ITEM, 3), ("b", END, None)])  # late items of an abandoned run are dropped
    assert await _read(demux, "b") == [2]
    assert abandoned == ["a"] and idle == [True]


async def test_a_consumer_that_never_read_can_leave() -> None:
    abandoned: list[str] = []
    demux = _demux(["a", "b"], abandoned)
    demux.leave("a")
    demux.leave("a")  # once
    assert abandoned == ["a"] and demux.open == {"b"}


async def test_a_failed_stream_fails_every_open_run_with_its_own_copy() -> None:
    demux = _demux(["a", "b", "c"], [])
    demux.dispatch([("a", END, None)])
    demux.fail(ConnectionError("host died"))
    assert await _read(demux, "a") == []
    errors = []
    for run_id in "bc":
        with pytest.raises(ConnectionError, match="host died") as caught:
            await _read(demux, run_id)
        errors.append(caught.value)
    assert errors[0] is not errors[1]


async def test_a_round_trip_hands_every_run_its_stream() -> None:
    streams = {f"r{i}": _items(*(f"{i}.{n}" for n in range(i)), fail=RuntimeError(f"r{i}") if i == 2 else None)
               for i in range(4)}
    demux = _demux(list(streams), [])
    readers = {run_id: asyncio.ensure_future(_read(demux, run_id)) for run_id in streams}
    async for group in multiplex(streams, pickle.dumps):
        demux.dispatch(group)
    assert await readers["r0"] == [] and await readers["r3"] == ["3.0", "3.1", "3.2"]
    assert await readers["r1"] == ["1.0"]
    with pytest.raises(RuntimeError, match="r2"):
        await readers["r2"]

