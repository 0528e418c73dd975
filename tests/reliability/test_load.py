"""Load: 500 concurrent agent invocations on pooled hosts with random latency and random tool failures."""

from __future__ import annotations

import asyncio
import os
import statistics
import time

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.reliability, pytest.mark.usefixtures("ray_session")]

INVOCATIONS = int(os.environ.get("RAY_HARNESS_LOAD_INVOCATIONS", "500"))


async def test_500_concurrent_invocations_on_pooled_hosts() -> None:
    from ray_harness.runtime import AgentPool

    pool = AgentPool(size=2, namespace="ray_harness_load")
    try:
        spec = pool.prepare("tests.reliability.fault_targets:load_agent")
        before = await pool.stats()
        latencies: list[float] = []

        async def one(i: int) -> str:
            started = time.perf_counter()
            result = await pool.run(spec, f"id{i}", run_id=f"load-{i}")
            latencies.append(time.perf_counter() - started)
            return str(result).strip()

        started = time.perf_counter()
        outputs = await asyncio.gather(*(one(i) for i in range(INVOCATIONS)))
        elapsed = time.perf_counter() - started
        after = await pool.stats()
    finally:
        pool.shutdown()
    ids = [output.split(":")[0] for output in outputs]
    assert ids == [f"id{i}" for i in range(INVOCATIONS)]  # one result per input, in input order
    statuses = {output.split(":")[1] for output in outputs}
    assert statuses <= {"success", "error"} and "error" in statuses  # tool failures happened and were survived
    p99 = statistics.quantiles(latencies, n=100)[98]
    peak_rss = max(host["rss_bytes"] for host in after)
    growth = max(a["rss_bytes"] - b["rss_bytes"] for a, b in zip(after, before, strict=True))
    print(f"\nload: {INVOCATIONS} invocations in {elapsed:.2f}s, p50 {statistics.median(latencies):.3f}s, "
          f"p99 {p99:.3f}s, peak host RSS {peak_rss / 2**20:.0f} MiB, growth {growth / 2**20:.0f} MiB")
    assert peak_rss < 1.5 * 2**30  # bounded: a host does not hold on to finished runs
    assert all(host["running"] == 0 for host in after)
