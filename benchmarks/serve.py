"""S1–S3: serving a one-turn agent over A2A on Ray Serve, next to a bare Ray Serve FastAPI endpoint.

    python -m benchmarks.serve [--requests 512] [--clients 64] [--quick]

S1: requests per second and p50/p99 latency with 64 concurrent loopback clients, for the A2A endpoint
(JSON-RPC, a2a-sdk task bookkeeping, file task store) and for a bare FastAPI deployment that builds and
calls the same agent, each with 1 and 2 replicas, in one run (one app deployed at a time).
S2: the task store's cost per request: sequential SendMessage with a file store and with none (memory).
S3: CancelTask → CANCELED: a task whose model waits 60 s is cancelled; time until GetTask says CANCELED.
The agent's model is scripted with zero latency, so every number is serving overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request

from ray_harness import Agent
from ray_harness.testing import ScriptedModel, text

ROOT = Path(__file__).resolve().parents[1]


def one_turn() -> Agent:
    return Agent(ScriptedModel(text("ok"), loop=True, record_calls=False), name="one_turn", retry_strategy=None)


def waits_a_minute() -> Agent:
    return Agent(ScriptedModel(text("late", delay=60), loop=True), name="waits", retry_strategy=None)


def _actor_options() -> dict[str, Any]:
    return {"num_cpus": 0, "runtime_env": {"env_vars": {"PYTHONPATH": str(ROOT)}}}


def _bare_api() -> Any:
    """A FastAPI app built in the replica: one POST route that builds the agent and calls it."""
    api = FastAPI()

    async def ask(request: Request) -> dict[str, Any]:
        body = await request.json()
        result = await one_turn().invoke_async(body["prompt"])
        return {"text": str(result).strip()}

    # Real classes, not the strings `from __future__ import annotations` leaves: the function is pickled by
    # value into the replica, where FastAPI could not resolve "Request" and would read it as a query parameter.
    ask.__annotations__ = {"request": Request, "return": dict}
    api.add_api_route("/", ask, methods=["POST"])
    return api


def _bare_app(name: str, replicas: int) -> Any:
    from ray import serve

    deployment = serve.deployment(name=name, num_replicas=replicas, ray_actor_options=_actor_options(),
                                  max_ongoing_requests=256)(serve.ingress(_bare_api)())
    return deployment.bind()


def _a2a_body(prompt: str, **configuration: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": prompt}]}}
    if configuration:
        params["configuration"] = configuration
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}


def _stats(latencies: list[float], elapsed: float) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {"n": len(ordered), "rps": len(ordered) / elapsed, "p50_ms": statistics.median(ordered) * 1000,
            "p99_ms": ordered[max(0, int(len(ordered) * 0.99) - 1)] * 1000, "max_ms": ordered[-1] * 1000}


async def _load(url: str, kind: str, requests: int, clients: int) -> dict[str, Any]:
    import httpx

    latencies: list[float] = []
    counter = iter(range(requests))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=120, limits=limits, headers={"A2A-Version": "1.0"}) as http:
        async def one(body: dict[str, Any]) -> None:
            started = time.perf_counter()
            response = await http.post(url, json=body)
            response.raise_for_status()
            payload = response.json()
            if kind == "a2a" and payload["result"]["task"]["status"]["state"] != "TASK_STATE_COMPLETED":
                raise RuntimeError(f"unexpected answer: {payload}")
            latencies.append(time.perf_counter() - started)

        async def client() -> None:
            for _ in counter:
                await one(_a2a_body("hi") if kind == "a2a" else {"prompt": "hi"})

        for _ in range(min(clients, 32)):  # warm-up: connections, replicas' first agents
            await one(_a2a_body("warm") if kind == "a2a" else {"prompt": "warm"})
        latencies.clear()
        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return _stats(latencies, time.perf_counter() - started)


async def _cancel_times(url: str, repeats: int) -> dict[str, Any]:
    import httpx

    times = []
    async with httpx.AsyncClient(timeout=120, headers={"A2A-Version": "1.0"}) as http:
        for _ in range(repeats):
            sent = (await http.post(url, json=_a2a_body("wait", returnImmediately=True))).json()
            task_id = sent["result"]["task"]["id"]
            while True:  # until it runs (returnImmediately answers at SUBMITTED)
                got = (await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "GetTask",
                                                  "params": {"id": task_id}})).json()
                if got["result"]["status"]["state"] == "TASK_STATE_WORKING":
                    break
                await asyncio.sleep(0.01)
            started = time.perf_counter()
            await http.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "CancelTask", "params": {"id": task_id}})
            while True:
                got = (await http.post(url, json={"jsonrpc": "2.0", "id": 4, "method": "GetTask",
                                                  "params": {"id": task_id}})).json()
                if got["result"]["status"]["state"] == "TASK_STATE_CANCELED":
                    break
                await asyncio.sleep(0.005)
            times.append(time.perf_counter() - started)
    return _stats(times, sum(times))


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _deploy(application: Any, name: str) -> str:
    from ray import serve

    serve.run(application, name=name, route_prefix=f"/{name}", blocking=False)
    return f"/{name}/"


def run(requests: int, clients: int, sequential: int, cancels: int) -> dict[str, Any]:
    from ray import serve

    from ray_harness import runtime, serve as rh_serve

    runtime.init(address="local", num_cpus=2, include_dashboard=False)
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    base = f"http://127.0.0.1:{port}"
    results: dict[str, Any] = {"requests": requests, "clients": clients}
    store = f"file://{tempfile.mkdtemp(prefix='rh_bench_tasks_')}"
    try:
        for replicas in (1, 2):
            for kind in ("a2a", "bare"):
                name = f"{kind}{replicas}"
                app = rh_serve.app(one_turn, name=name, num_replicas=replicas, task_store=store,
                                   ray_actor_options=_actor_options()) if kind == "a2a" else _bare_app(name, replicas)
                path = _deploy(app, name)
                results[f"S1 {kind} {replicas} replica(s)"] = asyncio.run(_load(base + path, kind, requests, clients))
                print(name, results[f"S1 {kind} {replicas} replica(s)"], file=sys.stderr, flush=True)
                serve.delete(name)
        for label, task_store in (("file store", store), ("no store (memory)", None)):
            name = "store_file" if task_store else "store_none"
            path = _deploy(rh_serve.app(one_turn, name=name, task_store=task_store,
                                        ray_actor_options=_actor_options()), name)
            results[f"S2 sequential, {label}"] = asyncio.run(_load(base + path, "a2a", sequential, 1))
            print(name, results[f"S2 sequential, {label}"], file=sys.stderr, flush=True)
            serve.delete(name)
        path = _deploy(rh_serve.app(waits_a_minute, name="cancel", num_replicas=2, task_store=store,
                                    ray_actor_options=_actor_options()), "cancel")
        results["S3 CancelTask → CANCELED, 2 replicas"] = asyncio.run(_cancel_times(base + path, cancels))
        serve.delete("cancel")
    finally:
        serve.shutdown()
        runtime.shutdown()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=512)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--sequential", type=int, default=100)
    parser.add_argument("--cancels", type=int, default=10)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "serve.json"))
    args = parser.parse_args()
    if args.quick:
        args.requests, args.clients, args.sequential, args.cancels = 64, 16, 10, 2
    import logging

    logging.disable(logging.WARNING)
    results = run(args.requests, args.clients, args.sequential, args.cancels)
    print("| benchmark | req/s | p50 | p99 | n |\n|---|---|---|---|---|")
    for key, value in results.items():
        if isinstance(value, dict):
            print(f"| {key} | {value['rps']:.1f} | {value['p50_ms']:.1f} ms | {value['p99_ms']:.1f} ms | {value['n']} |")
    Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
