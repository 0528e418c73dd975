"""P7: P2 and P3 on 1, 2 and 3 Ray nodes of ``cluster/local.sh`` — on ONE machine.

Every node of ``cluster/local.sh`` runs on this machine and shares its cores, so adding nodes adds
raylets, object stores and cross-node hops, never CPUs: this suite measures the **overhead** of
spreading work over nodes, not a speedup. (On real machines each node would bring its own cores.)

For each node count N (1, 2, 3) the suite starts a fresh cluster (``cluster/local.sh up N-1``: a head
and N-1 workers, each with the custom resource ``node<i>``) under a short state dir in /tmp, runs
each measurement in a **separate driver subprocess** connected with ``RAY_ADDRESS=127.0.0.1:<port>``
and ``RAY_AUTH_MODE=token`` (this process never connects to Ray), and stops the cluster in a
``finally`` — also on errors and Ctrl-C.

Placement: every measurement uses the same number of host actors (``--hosts``, default 6), spread
evenly over the N nodes (6, 3+3, 2+2+2), each pinned with ``resources={"node<i>": 0.01}``. Keeping the
host count fixed means the only thing that changes between rows is how many nodes the same hosts
are spread over. The pinned hosts are started as growing ``AgentPool``s (hosts already running
under a pool's names are reused), so the last pool — and the namespace's default pool, sized with
``RAY_HARNESS_POOL_SIZE`` — covers all of them.

* P2 (reduced): a 3-node chain (50 ms per model call) over 200 inputs with ``evaluate`` (all in flight).
* P3: CPU fan-out, 20 graph nodes each calling a pure-Python tool of 200 ms (default Ray runtime).

``--quick``: 20 inputs, 4 graph nodes × 50 ms, one repeat (a smoke test; its numbers mean nothing).

    python -m benchmarks.scaling [--quick] [--repeats 3] [--hosts 6] [--json out.json]
    python -m benchmarks run --only scaling [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LOCAL_SH = ROOT / "cluster" / "local.sh"
NODE_COUNTS = (1, 2, 3)
HOSTS = 6  # divisible by 1, 2 and 3: every node count gets an even spread
NAMESPACE = "ray_harness_p7"
NOTE = ("one machine (2 vCPU): every Ray node shares the same cores, so more nodes show overhead "
        "(raylets, cross-node hops), not speedup")


def sizes(quick: bool) -> dict[str, int]:
    if quick:
        return {"inputs": 20, "cpu_nodes": 4, "cpu_ms": 50, "repeats": 1}
    return {"inputs": 200, "cpu_nodes": 20, "cpu_ms": 200, "repeats": 3}


# -- the cluster (this process: never connected to Ray) --------------------------------------------------------


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pick_head_port() -> int:
    # Away from the integration tests' range (6390-6429) and Ray's default 6379; dashboard at +2000.
    for port in range(6440, 6500):
        if _free(port) and _free(port + 2000):
            return port
    raise RuntimeError("no free port pair for a local cluster in 6440-6499 (+2000 for the dashboard)")


@contextmanager
def local_cluster(nodes: int) -> Iterator[str]:
    """A fresh ``cluster/local.sh`` cluster of ``nodes`` nodes; yields its address; always brought down."""
    # A short path: Ray puts unix sockets under it, and socket paths are limited to 107 bytes.
    state = Path(tempfile.mkdtemp(prefix="rhs", dir="/tmp"))
    port = _pick_head_port()
    env = {**os.environ, "RAY_HARNESS_CLUSTER_DIR": str(state), "RAY_HARNESS_HEAD_PORT": str(port),
           "RAY_HARNESS_DASHBOARD_PORT": str(port + 2000), "RAY_AUTH_MODE": "token"}
    env.pop("RAY_ADDRESS", None)
    # Its own session: an interrupted ``up`` (Ctrl-C mid ``ray start``) is stopped as a whole process group.
    starter = subprocess.Popen(["bash", str(LOCAL_SH), "up", str(nodes - 1)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = starter.communicate(timeout=300)
        if starter.returncode != 0:
            logs = "".join(f"\n--- {log.name}\n{log.read_text()[-2000:]}" for log in sorted(state.glob("*.log")))
            raise RuntimeError(f"cluster/local.sh up {nodes - 1} failed: {output}{logs}")
        yield f"127.0.0.1:{port}"
    finally:
        if starter.poll() is None:
            _signal_group(starter.pid, signal.SIGTERM)
            try:
                starter.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _signal_group(starter.pid, signal.SIGKILL)
        subprocess.run(["bash", str(LOCAL_SH), "down"], env=env, capture_output=True, timeout=120, check=False)
        _stop_leftovers(state, port)
        shutil.rmtree(state, ignore_errors=True)


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def _stop_leftovers(state: Path, port: int) -> None:
    """Processes of this cluster that ``down`` did not stop (it knows only a cluster whose ``up`` finished).

    Ours by construction: their command lines name our private state dir or the head port we picked free.
    """
    pattern = f"{state}|ray start --head --port={port} |--address=127.0.0.1:{port} "
    for attempt in (signal.SIGTERM, signal.SIGKILL):
        found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False).stdout.split()
        pids = [int(pid) for pid in found if int(pid) != os.getpid()]
        if not pids:
            return
        if attempt == signal.SIGKILL:
            print(f"warning: cluster processes still running after down, killing {pids}", file=sys.stderr)
        for pid in pids:
            try:
                os.kill(pid, attempt)
            except ProcessLookupError:
                pass
        time.sleep(2)


def run_driver(address: str, scenario: str, nodes: int, hosts: int, size: dict[str, int]) -> dict[str, Any]:
    """One measurement in its own driver process connected to the cluster at ``address``."""
    env = {**os.environ, "RAY_ADDRESS": address, "RAY_AUTH_MODE": "token", "RAY_HARNESS_POOL_SIZE": str(hosts),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "benchmarks.scaling", "--driver", scenario, "--nodes", str(nodes),
               "--hosts", str(hosts), "--inputs", str(size["inputs"]), "--cpu-nodes", str(size["cpu_nodes"]),
               "--cpu-ms", str(size["cpu_ms"]), "--repeats", str(size["repeats"])]
    completed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"P7 driver {scenario} on {nodes} node(s) failed:\n{completed.stderr[-4000:]}")
    # Ray may print its own lines after ours: take the last JSON line.
    return dict(json.loads(next(line for line in reversed(completed.stdout.splitlines()) if line.startswith("{"))))


def _source() -> dict[str, Any]:
    """The code measured: this checkout and its commit (``COMMIT`` file of a ``git archive`` snapshot, or git)."""
    marker = ROOT / "COMMIT"
    if marker.exists():
        return {"root": str(ROOT), "commit": marker.read_text(encoding="utf-8").strip(), "dirty": False}
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "ray_harness", "benchmarks/*.py"], cwd=ROOT,
                           capture_output=True, text=True, check=False)
    return {"root": str(ROOT), "commit": head.stdout.strip() or None, "dirty": bool(dirty.stdout.strip())}


def measure_all(quick: bool, hosts: int = HOSTS, repeats: int | None = None) -> dict[str, Any]:
    size = sizes(quick)
    if repeats is not None:
        size["repeats"] = repeats
    report: dict[str, Any] = {"sizes": size, "hosts": hosts, "note": NOTE, "source": _source(), "runs": []}
    for nodes in NODE_COUNTS:
        print(f"-- P7: {nodes} node(s), load average {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
        with local_cluster(nodes) as address:
            for scenario in ("p2", "p3"):
                result = run_driver(address, scenario, nodes, hosts, size)
                print(f"   {scenario}: median {statistics.median(result['samples']):.2f} s "
                      f"{result['hosts_per_node']}", file=sys.stderr, flush=True)
                report["runs"].append(result)
    return report


# -- rows and table ----------------------------------------------------------------------------------------------


def _label(scenario: str, size: dict[str, int]) -> str:
    if scenario == "p2":
        return f"P2 3-node chain × {size['inputs']} inputs, 50 ms model (evaluate)"
    return f"P3 CPU fan-out, {size['cpu_nodes']} nodes × {size['cpu_ms']} ms pure-Python tool"


def rows_from(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for run in report["runs"]:
        samples = run["samples"]
        nodes = run["nodes"]
        rows.append({"benchmark": f"P7 {_label(run['scenario'], report['sizes'])}, {report['hosts']} hosts on "
                                  f"{nodes} Ray node{'s' if nodes > 1 else ''} of one machine "
                                  "(more nodes = overhead, not speedup)",
                     "unit": "s", "ray_harness_median": statistics.median(samples), "ray_harness_min": min(samples),
                     "ray_harness_max": max(samples), "strands_median": None, "ratio": None})
    return rows


def table(report: dict[str, Any]) -> str:
    lines = [f"P7 scaling on {NOTE}.",
             f"{report['hosts']} host actors spread evenly over the nodes; seconds per run, median (min–max) of "
             f"{report['sizes']['repeats']}; 'vs 1 node' > 1 means slower.", "",
             "| scenario | Ray nodes | hosts per node | seconds | vs 1 node | load avg (start→end) |",
             "|---|---|---|---|---|---|"]
    base: dict[str, float] = {}
    for run in report["runs"]:
        samples = run["samples"]
        median = statistics.median(samples)
        base.setdefault(run["scenario"], median)
        spread = "+".join(str(count) for count in run["hosts_per_node"].values())
        lines.append(f"| {_label(run['scenario'], report['sizes'])} | {run['nodes']} | {spread} | {median:.2f} "
                     f"({min(samples):.2f}–{max(samples):.2f}) | {median / base[run['scenario']]:.2f}× "
                     f"| {run['load'][0]:.1f}→{run['load'][1]:.1f} |")
    return "\n".join(lines)


def run_suite(*, quick: bool = False) -> list[dict[str, Any]]:
    """Rows for ``python -m benchmarks run --only scaling`` (starts and stops three local clusters)."""
    return rows_from(measure_all(quick))


# -- the driver (a subprocess connected to one cluster) ----------------------------------------------------------


# Every pool stays referenced: a host actor dies with the last handle of the pool that created it.
_pools: list[Any] = []


def _spread_pool(nodes: int, hosts: int) -> Any:
    """``hosts`` host actors, ``hosts // nodes`` pinned to each of node0..node<nodes-1>."""
    from ray_harness.runtime import AgentPool

    per_node = hosts // nodes
    for i in range(nodes):
        # Hosts 0..i*per_node-1 already run (pinned to earlier nodes) and are reused by name; the new ones
        # of this pool are pinned to node i.
        _pools.append(AgentPool(size=per_node * (i + 1), resources={f"node{i}": 0.01}))
    return _pools[-1]


def _hosts_per_node(pool: Any) -> dict[str, int]:
    """Where the hosts really are: node resource name -> host count (checks the pinning worked)."""
    import ray

    resource_of = {n["NodeID"]: next(k for k in n["Resources"] if k.startswith("node") and not k.startswith("node:"))
                   for n in ray.nodes() if n["Alive"]}
    counts: dict[str, int] = {}
    for host in pool.hosts:
        node = ray.get(host.__ray_call__.remote(lambda actor: ray.get_runtime_context().get_node_id()))
        counts[resource_of[node]] = counts.get(resource_of[node], 0) + 1
    return dict(sorted(counts.items()))


async def _driver_p2(pool: Any, inputs: int, repeats: int) -> list[float]:
    from ray_harness.evaluation import evaluate_async

    async def once(count: int) -> float:
        rows = [{"prompt": f"input {i}"} for i in range(count)]
        started = time.perf_counter()
        summary = await evaluate_async("benchmarks.graph:chain_graph", rows, concurrency=count, pool=pool,
                                       progress=False)
        elapsed = time.perf_counter() - started
        if summary["errors"]:
            raise RuntimeError(f"evaluation had {summary['errors']} errors")
        return elapsed

    await once(inputs)  # warm-up: imports in every host, first pickles
    return [await once(inputs) for _ in range(repeats)]


async def _driver_p3(pool: Any, cpu_nodes: int, cpu_ms: int, repeats: int) -> list[float]:
    from benchmarks import graph as graph_bench
    from ray_harness.runtime._multiagent_pool import default_pool

    # runtime="ray" graphs run on the namespace's default pool: RAY_HARNESS_POOL_SIZE makes it the pinned hosts.
    if [h._actor_id for h in default_pool().hosts] != [h._actor_id for h in pool.hosts]:
        raise RuntimeError("the default pool is not the spread pool; is RAY_HARNESS_POOL_SIZE set to --hosts?")

    graph_bench.CPU_BURN_MS = cpu_ms
    graph = graph_bench.ours_fanout(cpu_nodes, graph_bench._cpu_steps, "ray", tools=[graph_bench.burn])
    await graph_bench._timed_graph(graph, cpu_nodes)  # warm-up
    return [await graph_bench._timed_graph(graph, cpu_nodes) for _ in range(repeats)]


def driver_main(args: argparse.Namespace) -> None:
    import logging

    from ray_harness import runtime

    logging.disable(logging.WARNING)
    load_start = os.getloadavg()[0]
    runtime.init(namespace=NAMESPACE)
    pool = _spread_pool(args.nodes, args.hosts)
    placement = _hosts_per_node(pool)
    if args.driver == "p2":
        samples = asyncio.run(_driver_p2(pool, args.inputs, args.repeats))
    else:
        samples = asyncio.run(_driver_p3(pool, args.cpu_nodes, args.cpu_ms, args.repeats))
    import ray

    import ray_harness

    # The tree is shared with other engineers: record which ray_harness the driver and a host really ran.
    host_source = ray.get(pool.hosts[-1].__ray_call__.remote(lambda actor: __import__("ray_harness").__file__))
    print(json.dumps({"scenario": args.driver, "nodes": args.nodes, "hosts_per_node": placement,
                      "source": {"driver": ray_harness.__file__, "host": host_source},
                      "samples": samples, "load": [load_start, os.getloadavg()[0]]}), flush=True)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke-test sizes")
    parser.add_argument("--repeats", type=int, default=None, help="runs per measurement after a warm-up")
    parser.add_argument("--hosts", type=int, default=HOSTS, help="host actors, spread evenly over the nodes")
    parser.add_argument("--json", help="also write the report here")
    # Internal: the per-measurement driver subprocess.
    parser.add_argument("--driver", choices=("p2", "p3"), help=argparse.SUPPRESS)
    parser.add_argument("--nodes", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--inputs", type=int, default=200, help=argparse.SUPPRESS)
    parser.add_argument("--cpu-nodes", type=int, default=20, help=argparse.SUPPRESS)
    parser.add_argument("--cpu-ms", type=int, default=200, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.driver:
        args.repeats = args.repeats or 3
        driver_main(args)
        return
    if any(args.hosts % nodes for nodes in NODE_COUNTS):
        parser.error(f"--hosts must be divisible by {', '.join(map(str, NODE_COUNTS))}")
    # SIGTERM ends the run like Ctrl-C, so the clusters' ``finally: down`` still runs.
    signal.signal(signal.SIGTERM, _interrupt)
    report = measure_all(args.quick, hosts=args.hosts, repeats=args.repeats)
    print(table(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
