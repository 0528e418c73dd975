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
