"""Where evaluation rows run: in this process (``runtime="local"``) or on a pool of Ray host actors."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from ray_harness.evaluation._gc import GcTuning
from ray_harness.evaluation._records import ResultFields, mark_spent, result_fields

__all__ = ("Backend", "LocalBackend", "RayBackend", "resolve_factory")


def import_named(spec: str, what: str) -> Any:
    """The object a ``"module:function"`` string names; ``ValueError`` naming ``what`` (target, scorer) if none."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{what} {spec!r} must look like 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"{what} {spec!r}: cannot import {module_name!r} ({error})") from None
    named = getattr(module, attribute, None)
    if named is None:
        raise ValueError(f"{what} {spec!r}: module {module_name!r} has no attribute {attribute!r}")
    return named


def resolve_factory(target: Any) -> Callable[[], Any]:
    """A zero-argument factory from a callable or a ``"module:function"`` string."""
    if isinstance(target, str):
        target = import_named(target, "target")
    if not callable(target):
        raise TypeError(f"target must be a zero-argument factory (callable or 'module:function'), got {target!r}")
    if hasattr(target, "invoke_async") and not inspect.isfunction(target):
        raise TypeError("target must build a fresh Agent/Graph/Swarm per row: pass a factory, not an instance")
    return target  # type: ignore[no-any-return]


class Backend:
    async def start(self) -> None:
        return None

    async def run(self, run_id: str, prompt: Any, limits: Any) -> Any:
        raise NotImplementedError

    async def cancel(self, run_ids: list[str]) -> None:
        return None

    async def close(self) -> None:
        return None


class LocalBackend(Backend):
    """Rows run as asyncio tasks in this process: notebooks, tests, small jobs."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._running: dict[str, Any] = {}
        self._gc = GcTuning()

    async def start(self) -> None:
        self._gc.enter()  # rows in flight would set off full collections at the default threshold (see _gc)

    async def close(self) -> None:
        self._gc.leave()

    async def run(self, run_id: str, prompt: Any, limits: Any) -> Any:
        target = self._factory()
        if not hasattr(target, "invoke_async"):  # the Ray hosts say the same (runtime._spec.build_agent)
            name = getattr(self._factory, "__name__", repr(self._factory))
            raise TypeError(f"target {name!r} produced {type(target).__name__}, not an Agent, Graph or Swarm")
        self._running[run_id] = target
        try:
            if limits is not None and _accepts_limits(target):
                return await target.invoke_async(prompt, limits=limits)
            return await target.invoke_async(prompt)
        except Exception as error:
            mark_spent(error, target)
            raise
        finally:
            self._running.pop(run_id, None)

    def running(self) -> list[str]:
        """The run ids of the rows running now."""
        return list(self._running)

    async def cancel(self, run_ids: list[str]) -> None:
        for run_id in run_ids:
            target = self._running.get(run_id)
            if target is not None:
                target.cancel()


class RayBackend(Backend):
    """Rows run on a pool of warm async host actors (never an actor per row)."""

    def __init__(self, factory: Callable[[], Any] | str, *, pool: Any = None, pool_size: int | None = None,
                 pool_options: dict[str, Any] | None = None, results_needed: bool = True,
                 rate_limits: dict[str, Any] | None = None) -> None:
        self._factory = factory
        self._rate_limits = rate_limits or {}
        self._results_needed = results_needed
        self._pool = pool
        self._pool_size = pool_size
        self._pool_options = pool_options or {}
        self._spec: Any = None
        self._owns_pool = pool is None

    async def start(self) -> None:
        from ray_harness.runtime import AgentPool
        from ray_harness.runtime._telemetry import prepare_driver_process

        if self._pool is None:
            options = {"max_restarts": -1, **self._pool_options}  # hosts come back after a crash
            self._pool = AgentPool(size=self._pool_size or 2, **options)
        # The evaluation's run and its rows are reported from this process (ray-harness status, the eval metrics),
        # also when the script started Ray with ray.init() rather than ray_harness.runtime.init().
        prepare_driver_process()
        self._spec = self._pool.prepare(self._factory)  # pickled once, shared by every row
        if self._rate_limits:
            await self._pool.register_rate_limits(self._rate_limits)

    async def run(self, run_id: str, prompt: Any, limits: Any) -> Any:
        # Rows started together share one host call per host (one Ray round trip per batch, not per row).
        if self._results_needed:
            return await self._pool.run_batched(self._spec, prompt, run_id=run_id, limits=limits)
        # Without scorers only the record's fields are used: the host computes them, the result stays there.
        fields = await self._pool.run_batched(self._spec, prompt, run_id=run_id, limits=limits, digest=result_fields)
        return ResultFields(fields)

    async def cancel(self, run_ids: list[str]) -> None:
        if self._pool is not None and run_ids:
            await self._pool.cancel_all(run_ids)

    async def close(self) -> None:
        # The rows' tokens and cost are counted in the hosts, which publish them a second later, or never when they
        # die first (with a Ray Job's driver, right after this evaluation): publish them now, one call per host.
        if self._pool is not None and self._spec is not None:
            from ray_harness.runtime._telemetry import flush_hosts

            await flush_hosts(self._pool.hosts, self._pool.host_names)

    @property
    def pool(self) -> Any:
        return self._pool


def _accepts_limits(target: Any) -> bool:
    try:
        return "limits" in inspect.signature(target.invoke_async).parameters
    except (TypeError, ValueError):
        return False
