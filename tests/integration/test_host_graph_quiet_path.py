"""A Graph built and invoked in a host's own process (every evaluation row of a graph factory): its quiet node runs.

On a host the graph's node runner is ``RayNodeRunner`` and its agent nodes run in-process; a quiet invocation
(``invoke_async``) must not put a generator around each agent's run there, as ``runtime="local"`` does not.
"""

from __future__ import annotations

from typing import Any

import pytest

from ray_harness import Status
from ray_harness.runtime._placement import placed
from tests.multiagent import test_graph_quiet_path as quiet

pytestmark = pytest.mark.ray


async def test_a_quiet_chain_in_a_hosts_process_costs_the_node_runner_no_generator_per_node(
        monkeypatch: pytest.MonkeyPatch, ray_session: dict[str, Any]) -> None:
    monkeypatch.setattr(quiet, "_LOOP_FILES", (*quiet._LOOP_FILES, "runtime/multiagent.py"))
    with placed("in_process"):  # as the host running the row states it
        short_result, short = await quiet._loop_generators(quiet._chain(2, "ray"))
        long_result, long = await quiet._loop_generators(quiet._chain(5, "ray"))
    assert short_result.status == long_result.status == Status.COMPLETED
    assert [node.node_id for node in long_result.execution_order] == ["n0", "n1", "n2", "n3", "n4"]
    assert long == short  # nothing per node (was one run_node generator per node)
