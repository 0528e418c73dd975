"""The runtime's cloudpickle with a plain-dict dispatch table (ray_harness.runtime._pickling): same bytes, same reducers."""

from __future__ import annotations

import copyreg
import logging
import pickle
from typing import Any

from ray import cloudpickle

from ray_harness import Agent
from ray_harness.runtime._pickling import dispatch_table, dumps
from ray_harness.testing import ScriptedModel, text


class _Registered:
    def __init__(self, value: int) -> None:
        self.value = value


def _rebuild(value: int) -> _Registered:
    return _Registered(value * 10)  # visibly not the default reduction


def test_the_table_resolves_every_type_as_cloudpickles_chain_does() -> None:
    chain: Any = cloudpickle.CloudPickler.dispatch_table
    merged = dispatch_table()
    assert set(merged) == set(chain)
    assert all(merged[kind] is chain[kind] for kind in chain)


def test_an_agent_pickles_to_the_same_bytes_as_with_cloudpickle() -> None:
    agent = Agent(ScriptedModel(text("hi"), loop=True), name="same", retry_strategy=None)
    value = {"agent": agent, "logger": logging.getLogger("ray_harness.test")}  # one of cloudpickle's own reducers
    assert dumps(value) == cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    restored = pickle.loads(dumps(value))
    assert restored["agent"].name == "same" and restored["logger"] is logging.getLogger("ray_harness.test")


def test_a_reducer_registered_later_with_copyreg_applies() -> None:
    copyreg.pickle(_Registered, lambda obj: (_rebuild, (obj.value,)))
    try:
        assert pickle.loads(dumps(_Registered(4))).value == 40
    finally:
        del copyreg.dispatch_table[_Registered]


def test_plain_data_pickles_to_cloudpickles_bytes_without_a_cloudpickler(monkeypatch: Any) -> None:
    from ray_harness.runtime import _pickling

    fields = {"output": "final ok", "structured_output": None, "status": "completed", "stop_reason": None,
              "usage": {"inputTokens": 60, "outputTokens": 15}, "cost_usd": 0.5, "more": [(1, b"x", True)]}
    expected = cloudpickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL)
    monkeypatch.setattr(_pickling, "FastPickler", None)  # plain data must not need it
    assert _pickling.dumps_plain(fields) == expected


class _Tagged(dict[str, int]):  # a dict subclass is not plain data: its class travels too
    pass


def test_values_that_are_not_plain_data_go_through_cloudpickle() -> None:
    from ray_harness.runtime._pickling import dumps_plain

    values: list[Any] = [{"x": _Registered(2)}, [_Tagged(a=1)], {(1, 2): "a tuple key"}, {"deep": [[[[[[[[[[1]]]]]]]]]]}]
    for value in values:
        assert dumps_plain(value) == dumps(value)
    assert type(pickle.loads(dumps_plain(values[1]))[0]) is _Tagged
