"""A host's side of sandboxes that follow agents: bind at build, label what it creates, clean up after a death.

* :func:`build` builds an agent from its spec while :func:`ray_harness.sandbox._binding.collecting`, and binds
  the sandboxes found (copies of one sandbox object resolve to the host's one live sandbox) to a holder: an
  ephemeral run (:func:`run_holder`, released when the run ends) or a resident agent
  (:func:`resident_holder`, released by ``AgentHost.release``). The last holder's release closes the sandbox:
  a created container is removed.
* :func:`claim` labels every container the host process creates with its actor id (``ray_harness.owner``)
  and records in Ray's internal KV which engines it created containers on. A restarted host (same actor id,
  new process) and ``AgentPool.shutdown()`` call :func:`reap`, which removes the containers the dead process
  left behind.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import TYPE_CHECKING, Any

from ray.experimental import internal_kv

from ray_harness.sandbox import _binding

if TYPE_CHECKING:
    from ray_harness.agent.agent import Agent
    from ray_harness.runtime._spec import AgentSpec

__all__ = ("OWNER_LABEL", "build", "claim", "reap", "resident_holder", "run_holder", "sandbox_affinity")

logger = logging.getLogger(__name__)

OWNER_LABEL = "ray_harness.owner"
"""The label carrying the Ray actor id of the host process that created a container."""
_KV_NAMESPACE = "ray_harness_sandboxes"


def run_holder(run_id: str) -> str:
    """The holder key of an ephemeral run (its sandboxes are held while it runs)."""
    return f"run:{run_id}"


def resident_holder(agent_key: str) -> str:
    """The holder key of a resident agent (its sandboxes are held until the agent is released)."""
    return f"resident:{agent_key}"


def build(spec: AgentSpec, holder: str) -> Agent:
    """Build the agent of ``spec`` and bind its sandboxes to ``holder``."""
    with _binding.collecting() as found:
        agent = spec.build()
    _binding.bind(holder, found)
    return agent


def sandbox_affinity(spec: Any) -> str | None:
    """The identity of the first sandbox pickled into an agent spec (``None``: none, or not a spec).

    A pool places resident agents whose specs share it on one host, where that sandbox is one live sandbox.
    """
    identities = getattr(spec, "sandbox_ids", ())
    return str(identities[0]) if identities else None


def _key(actor_id: str) -> str:
    return f"engines/{actor_id}"


def claim(actor_id: str | None, *, reconstructed: bool) -> None:
    """Label this process's containers with ``actor_id``; a restarted actor first removes its predecessor's."""
    if actor_id is None:
        return
    if reconstructed:
        reap(actor_id, forget=False)
    _binding.set_owner_labels({OWNER_LABEL: actor_id})

    def record(engines: list[str]) -> None:
        try:
            internal_kv._internal_kv_put(_key(actor_id), json.dumps(engines), overwrite=True,
                                         namespace=_KV_NAMESPACE)
        except Exception:  # recording is for cleanup after a crash; the sandbox itself must work
            logger.warning("could not record the Docker engines of host %s", actor_id, exc_info=True)

    docker = sys.modules.get("ray_harness.sandbox.docker")
    if docker is not None:  # it may have created containers already: it reports their engines to the listener
        docker.set_engine_listener(record)
    else:  # not imported at start (most hosts never run a DockerSandbox): no container yet, it finds the listener
        _binding.set_engine_listener(record)


def recorded_engines(actor_id: str) -> list[str] | None:
    """The engines the host ``actor_id`` created containers on (``None``: none recorded)."""
    try:
        value = internal_kv._internal_kv_get(_key(actor_id), namespace=_KV_NAMESPACE)
    except Exception:
        return None
    if not value:
        return None
    engines: Any = json.loads(value)
    return [str(engine) for engine in engines] if isinstance(engines, list) else None


def reap(actor_id: str, *, forget: bool = True) -> int:
    """Remove the containers host ``actor_id`` created (its process is gone); return how many.

    Args:
        actor_id: The host's Ray actor id.
        forget: Also delete the host's record (it will not come back).
    """
    engines = recorded_engines(actor_id)
    removed = 0
    if engines:
        try:
            from ray_harness.sandbox.docker import remove_owned_containers

            removed = remove_owned_containers({OWNER_LABEL: actor_id}, engines)
        except Exception:  # best effort: a shutdown or a restart must not fail on cleanup
            logger.warning("removing the containers of host %s failed", actor_id, exc_info=True)
    if forget and engines is not None:
        try:
            internal_kv._internal_kv_del(_key(actor_id), namespace=_KV_NAMESPACE)
        except Exception:
            logger.debug("could not delete the engine record of host %s", actor_id, exc_info=True)
    return removed
