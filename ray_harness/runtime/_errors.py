"""Turn Ray's exception wrappers back into the errors the caller would see in-process.

``RayTaskError`` wraps whatever an actor method raised; the driver gets the
original (``.cause``: our ``RayHarnessError`` types or the built-in type), with
Ray's remote traceback kept as ``__cause__`` for debugging. A dead or
unreachable actor becomes :class:`~ray_harness.types.exceptions.RemoteActorError`
naming the actor; one stopped on purpose (``shutdown()``, ``kill()``, ``ray.kill``, from any process) becomes its
subclass :class:`~ray_harness.types.exceptions.ActorStoppedError`, so a call cut short by a shutdown does not
read as a crash.

On the actor's side, :func:`raise_portable` and :func:`pickled_error` make sure what an actor raises can be
unpickled by its caller: an exception that pickles but does not unpickle travels as a ``RuntimeError`` naming it.
"""

from __future__ import annotations

import asyncio
import pickle
import traceback
from collections.abc import Awaitable
from typing import Any, NoReturn, TypeVar

import ray
from ray import cloudpickle as _ray_pickler, exceptions as ray_exceptions

from ray_harness.runtime import _pickling
from ray_harness.types.exceptions import ActorStoppedError, RemoteActorError

__all__ = ("await_ref", "call_sync", "mark_stopped", "pickled_error", "raise_portable", "raise_translated", "translate")

T = TypeVar("T")

_RAY_CLOUDPICKLE: Any = _ray_pickler  # Ray's own copy (the cloudpickle package is a dev dependency only)

_KILLED = "killed by `ray.kill`"
"""How Ray's GCS states, in an ``ActorDiedError``, that the actor was killed on purpose (any process)."""
_STOPPED_HERE: set[str] = set()
"""Actor ids this process stopped on purpose (also known when Ray words its death cause differently)."""


def mark_stopped(actor: Any) -> None:
    """Record that ``actor`` is being stopped on purpose: its calls then fail with ``ActorStoppedError``."""
    _STOPPED_HERE.add(actor._actor_id.hex())


def translate(error: BaseException, actor_name: str) -> BaseException:
    """Return the exception the caller should see for ``error`` raised by a call into ``actor_name``."""
    if isinstance(error, ray_exceptions.TaskCancelledError):
        return asyncio.CancelledError(f"call into actor {actor_name!r} was cancelled")
    if isinstance(error, ray_exceptions.RayTaskError):
        cause = error.cause
        if isinstance(cause, BaseException) and not isinstance(cause, ray_exceptions.RayError):
            if isinstance(cause, asyncio.CancelledError):
                return asyncio.CancelledError(f"call into actor {actor_name!r} was cancelled")
            return cause
        if isinstance(cause, ray_exceptions.RayError):
            return translate(cause, actor_name)
        return RemoteActorError(f"actor {actor_name!r} failed: {error}", actor_name=actor_name)
    if isinstance(error, ray_exceptions.RayActorError) and _stopped_on_purpose(error):
        return ActorStoppedError(f"actor {actor_name!r} was stopped on purpose (shutdown(), kill() or ray.kill), "
                                 "not by a crash; this call did not run to its end", actor_name=actor_name)
    if isinstance(error, ray_exceptions.ActorUnavailableError | ray_exceptions.RayActorError):
        kind = "is unavailable (restarting or unreachable)" if isinstance(
            error, ray_exceptions.ActorUnavailableError) else "died"
        return RemoteActorError(f"actor {actor_name!r} {kind}: {_summary(error)}", actor_name=actor_name)
    if isinstance(error, ray_exceptions.RayError):
        return RemoteActorError(f"call into actor {actor_name!r} failed: {_first_line(error)}", actor_name=actor_name)
    return error


def raise_translated(error: BaseException, actor_name: str) -> NoReturn:
    translated = translate(error, actor_name)
    if translated is error:
        raise error
    raise translated from error


async def await_ref(ref: Awaitable[T], actor_name: str) -> T:
    try:
        return await ref
    except ray_exceptions.RayError as error:
        raise_translated(error, actor_name)


def call_sync(ref: Any, actor_name: str, *, timeout: float | None = None) -> Any:
    """``ray.get`` with translated errors (for the sync surface: ``remote(prompt)``, properties)."""
    try:
        return ray.get(ref, timeout=timeout)
    except ray_exceptions.RayError as error:
        raise_translated(error, actor_name)


def _stopped_on_purpose(error: ray_exceptions.RayActorError) -> bool:
    if isinstance(error, ray_exceptions.ActorUnavailableError):
        return False  # restarting: it was not stopped for good
    return error.actor_id in _STOPPED_HERE or _KILLED in str(error)


def _summary(error: BaseException) -> str:
    """Ray's first line and, for an actor's death, its last: the cause (its process died, its node died, ...)."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if len(lines) > 1 and lines[-1].startswith("The actor"):
        return f"{lines[0]} {lines[-1]}"
    return _first_line(error)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# -- on the actor's side: what an actor raises must reach its caller -------------------------------------


def pickled_error(error: BaseException) -> bytes:
    """A run's exception for the wire: as the run's own call would raise it, or its text when it cannot travel."""
    try:
        data = bytes(_pickling.dumps(error))
        _pickling.loads(data)  # some exceptions pickle but do not unpickle (pydantic's PydanticUserError)
        return data
    except Exception:
        return bytes(_pickling.dumps(_stand_in(error)))


def _portable(error: BaseException) -> BaseException:
    """``error`` when its caller can unpickle it, else :func:`_stand_in`.

    Ray pickles what an actor method raised for its caller; an exception that pickles but does not unpickle
    would reach the caller as Ray's "Failed to deserialize exception", hiding what went wrong.
    """
    try:
        pickle.loads(_RAY_CLOUDPICKLE.dumps(error))  # as Ray sends it
        return error
    except Exception:
        return _stand_in(error)


def raise_portable(error: BaseException) -> None:
    """Raise :func:`_stand_in` of ``error`` when its caller could not unpickle it; else return (re-raise it)."""
    portable = _portable(error)
    if portable is not error:
        raise portable from None


def _stand_in(error: BaseException) -> RuntimeError:
    """A ``RuntimeError`` naming ``error``'s type and message, with where it was raised (the host's traceback)."""
    where = "".join(traceback.format_exception(error)[-6:]).rstrip()
    return RuntimeError(f"{type(error).__name__}: {error}\n\nRaised on the host:\n{where}")
