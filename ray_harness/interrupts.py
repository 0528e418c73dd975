"""Human-in-the-loop interrupts.

A hook, tool or middleware calls ``interrupt(name, reason)``. The first call
raises :class:`InterruptException`; the loop collects every interrupt raised in
one pass, stops with ``stop_reason="interrupt"`` and returns them in
``result.interrupts``. The caller answers with a list of
``{"interruptResponse": {"interruptId", "response"}}`` blocks; the second call
of ``interrupt()`` with the same (deterministic) id returns the response.

The state serializes (``to_dict``/``from_dict``), so a different process can
resume hours later from a session.
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from ray_harness.types.exceptions import RayHarnessError

__all__ = ("Interrupt", "InterruptException", "InterruptState", "interrupt_id")


def interrupt_id(kind: str, key: str, name: str) -> str:
    """Deterministic id ``v1:<kind>:<key>:<uuid5(name)>`` so a resumed run finds its answer."""
    return f"v1:{kind}:{key}:{uuid.uuid5(uuid.NAMESPACE_OID, name)}"


@dataclass
class Interrupt:
    """One request for human input."""

    id: str
    name: str
    reason: Any = None
    response: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The interrupt as a JSON-ready dict (``id``, ``name``, ``reason``, ``response``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Interrupt:
        """Rebuild an interrupt from :meth:`to_dict` output.

        Raises:
            TypeError: ``data`` is not a dict with ``id`` and ``name``.
        """
        if not isinstance(data, dict) or "id" not in data or "name" not in data:
            raise TypeError(f"interrupt must be a dict with 'id' and 'name', got {data!r}")
        return cls(id=data["id"], name=data["name"], reason=data.get("reason"), response=data.get("response"))


class InterruptException(RayHarnessError):
    """Raised by ``interrupt()`` when no response is known yet; the loop turns it into a pause.

    A control-flow signal rather than a failure: the agent loop (or the graph) catches it and
    returns ``stop_reason="interrupt"``. Code that wraps ``interrupt()`` calls in a broad
    ``except`` must re-raise it.
    """

    def __init__(self, interrupt: Interrupt) -> None:
        super().__init__(interrupt.name)
        self.interrupt = interrupt

    def __reduce__(self) -> tuple[Any, ...]:
        return (InterruptException, (self.interrupt,))


@dataclass
class InterruptState:
    """Interrupts of one agent (or graph/swarm) and the context needed to resume them."""

    interrupts: dict[str, Interrupt] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)
    activated: bool = False

    def activate(self) -> None:
        """Mark the owner as interrupted (the next call must carry the responses)."""
        self.activated = True

    def deactivate(self) -> None:
        """Forget every interrupt and its context (the run resumed to the end)."""
        self.interrupts = {}
        self.context = {}
        self.activated = False

    def pending(self) -> list[Interrupt]:
        """The interrupts still waiting for a response."""
        return [item for item in self.interrupts.values() if item.response is None]

    def resume(self, prompt: Any) -> None:
        """Store the responses in ``prompt`` (a list of ``interruptResponse`` blocks)."""
        if not self.activated:
            if _is_response_list(prompt):
                raise ValueError("received interrupt responses but the agent is not interrupted")
            return
        if not isinstance(prompt, list):
            raise TypeError(
                f"prompt_type=<{type(prompt).__name__}> | must resume from interrupt with a list of interruptResponse blocks"
            )
        invalid = [key for block in prompt for key in (block if isinstance(block, dict) else {"<non-dict>": 0})]
        invalid = [key for key in invalid if key != "interruptResponse"]
        if invalid or not prompt:
            raise TypeError(
                f"content_types=<{invalid}> | must resume from interrupt with a list of interruptResponse blocks"
            )
        answers: list[tuple[str, Any]] = []
        for index, block in enumerate(prompt):  # all checked before any is applied: a bad block changes nothing
            response = block["interruptResponse"]
            where = f"prompt[{index}]['interruptResponse']"
            if not isinstance(response, dict):
                raise TypeError(f"{where} must be a dict {{'interruptId': str, 'response': value}}, "
                                f"got {type(response).__name__}")
            missing = [name for name in ("interruptId", "response") if name not in response]
            if missing:
                raise TypeError(f"{where} is missing {' and '.join(map(repr, missing))}; "
                                "expected {'interruptId': str, 'response': value}")
            key = response["interruptId"]
            if not isinstance(key, str):
                raise TypeError(f"{where}['interruptId'] must be a str, got {type(key).__name__}")
            if key not in self.interrupts:
                raise KeyError(f"interrupt_id=<{key}> | no interrupt found")
            answers.append((key, response["response"]))
        for key, value in answers:
            self.interrupts[key].response = value

    def to_dict(self) -> dict[str, Any]:
        """The state as a JSON-ready dict (stored in sessions and snapshots)."""
        return {
            "interrupts": {key: item.to_dict() for key, item in self.interrupts.items()},
            "context": copy.deepcopy(self.context) if self.context else {},
            "activated": self.activated,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InterruptState:
        """Rebuild the state from :meth:`to_dict` output.

        Raises:
            RayHarnessError: ``data`` is malformed; the message names the field.
        """
        if not isinstance(data, dict):
            raise RayHarnessError(f"interrupt state must be a dict, got {type(data).__name__}")
        raw = data.get("interrupts", {})
        if not isinstance(raw, dict):
            raise RayHarnessError("interrupt state field 'interrupts' must be a dict")
        interrupts = {}
        for key, item in raw.items():
            if not isinstance(item, dict) or "id" not in item or "name" not in item:
                raise RayHarnessError(f"interrupt state field 'interrupts.{key}' must have 'id' and 'name'")
            interrupts[key] = Interrupt(
                id=item["id"], name=item["name"], reason=item.get("reason"), response=item.get("response")
            )
        return cls(interrupts=interrupts, context=dict(data.get("context") or {}), activated=bool(data.get("activated")))


def _is_response_list(prompt: Any) -> bool:
    return (
        isinstance(prompt, list)
        and bool(prompt)
        and all(isinstance(block, dict) and "interruptResponse" in block for block in prompt)
    )
