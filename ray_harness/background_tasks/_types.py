"""The configuration, its checks, and the task records the model and the plugin see."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NotRequired, TypeAlias

from typing_extensions import TypedDict

from ray_harness.types.content import ToolResultContent

__all__ = ("BackgroundTask", "BackgroundTaskError", "BackgroundTaskStatus", "BackgroundTasksConfig", "Mode",
           "Settings", "is_terminal", "resolve_settings", "timestamp")


class BackgroundTasksConfig(TypedDict, total=False):
    """Configure background tool execution (Strands' ``BackgroundTasksConfig``; every key is optional).

    Attributes:
        wait_for_completion: Wait for background work before an invocation returns, then let the model answer
            the results. Defaults to True.
        agentic: Tools or registered tool names whose execution mode the model selects (through a
            ``_background_execution`` flag added to their schema). Defaults to ``["*"]`` (every tool), unless
            ``always`` or ``never`` names ``"*"``.
        always: Tools or registered tool names that always execute in the background.
        never: Tools or registered tool names that never execute in the background.
        max_concurrency: Maximum number of background tasks executing at once; the others wait queued.
            Defaults to 4.
        timeout: Per-task timeout in seconds; a task that runs longer fails (``"timeout"``). Defaults to
            infinity.
    """

    wait_for_completion: bool
    agentic: Sequence[Any | str]
    always: Sequence[Any | str]
    never: Sequence[Any | str]
    max_concurrency: int
    timeout: float


BackgroundTaskStatus: TypeAlias = Literal["queued", "working", "completed", "failed", "cancelled"]
Mode: TypeAlias = Literal["agentic", "always", "never"]
_TERMINAL = frozenset({"completed", "failed", "cancelled"})
_KEYS = ("wait_for_completion", "agentic", "always", "never", "max_concurrency", "timeout")


class BackgroundTaskError(TypedDict):
    """Why a task failed: ``type`` is ``"tool_error"``, ``"execution_error"`` or ``"timeout"``."""

    type: Literal["tool_error", "execution_error", "timeout"]
    message: str


class BackgroundTaskResult(TypedDict):
    """The content of the tool's result."""

    content: list[ToolResultContent]


class BackgroundTask(TypedDict):
    """One task as the model sees it (the JSON of a ``get``), with Strands' keys."""

    task_id: str
    tool_use_id: str
    tool_name: str
    status: BackgroundTaskStatus
    created_at: str
    last_updated_at: str
    result: NotRequired[BackgroundTaskResult]
    error: NotRequired[BackgroundTaskError]


def is_terminal(status: str) -> bool:
    """Whether a task in ``status`` is finished (completed, failed or cancelled)."""
    return status in _TERMINAL


def timestamp() -> str:
    """Now, as an ISO-8601 UTC time ending in ``Z`` (the form of the records' times)."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Settings:
    """A checked configuration: the policy by tool name (``"*"``: every other tool) and the limits."""

    wait_for_completion: bool
    policy: dict[str, Mode]
    max_concurrency: int
    timeout: float


def resolve_settings(config: Any) -> Settings:
    """Check ``Agent(background_tasks=...)`` (True or a config dict) and resolve its policy.

    Raises:
        TypeError: Not True nor a mapping, an unknown key, a value of the wrong type or range (the error names the
            key), or a tool given two modes.
    """
    if config is True:
        config = {}
    if not isinstance(config, Mapping):
        raise TypeError(f"background_tasks must be True, False, None or a BackgroundTasksConfig dict, got {config!r}")
    unknown = sorted(str(key) for key in config if key not in _KEYS)
    if unknown:
        raise TypeError(f"background_tasks has unknown key(s) {unknown}; expected some of {list(_KEYS)}")
    wait = config.get("wait_for_completion", True)
    if not isinstance(wait, bool):
        raise TypeError(f"background_tasks['wait_for_completion'] must be a bool, got {wait!r}")
    limit = config.get("max_concurrency", 4)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise TypeError(f"background_tasks['max_concurrency'] must be a positive integer, got {limit!r}")
    timeout = config.get("timeout", math.inf)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or math.isnan(timeout) or timeout <= 0:
        raise TypeError(f"background_tasks['timeout'] must be a positive number of seconds or math.inf, "
                        f"got {timeout!r}")
    return Settings(wait_for_completion=wait, policy=_policy(config), max_concurrency=limit, timeout=timeout)


def _policy(config: Mapping[str, Any]) -> dict[str, Mode]:
    """Tool name → mode; ``agentic`` defaults to every tool unless ``always`` or ``never`` claims ``"*"``."""
    selectors = {mode: _names(config, mode) for mode in ("always", "never")}
    claims_all = "*" in selectors["always"] or "*" in selectors["never"]
    agentic = _names(config, "agentic") if "agentic" in config else ([] if claims_all else ["*"])
    policy: dict[str, Mode] = {}
    modes: list[tuple[Mode, list[str]]] = [("agentic", agentic), ("always", selectors["always"]),
                                           ("never", selectors["never"])]
    for mode, names in modes:
        for name in names:
            known = policy.get(name)
            if known is not None and known != mode:
                raise TypeError(f"Tool '{name}' cannot be configured as both '{known}' and '{mode}'")
            policy[name] = mode
    return policy


def _names(config: Mapping[str, Any], key: str) -> list[str]:
    value = config.get(key, [])
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"background_tasks['{key}'] must be a list of tool names or tools, got {value!r}")
    names: list[str] = []
    for index, selector in enumerate(value):
        name = selector if isinstance(selector, str) else getattr(selector, "tool_name", None)
        if not isinstance(name, str) or not name:
            raise TypeError(f"background_tasks['{key}'][{index}] must be a tool name or a tool, got {selector!r}")
        names.append(name)
    return names
