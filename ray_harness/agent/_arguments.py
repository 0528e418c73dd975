"""``Agent(...)``'s arguments checked at construction, each error naming its argument; the defaults it fills in.

A wrong object given to an agent otherwise fails far from the mistake: a string as
``conversation_manager`` raised ``AttributeError`` at the first invocation, a session manager *class*
(not an instance) was silently ignored and nothing was persisted. Checks are ``isinstance`` tests and
protocol attributes only (agents are built per dataset row; this stays in the microseconds).
"""

from __future__ import annotations

import copy
import os
from typing import Any

from ray_harness.agent.conversation_manager.base import ConversationManager
from ray_harness.agent.conversation_manager.sliding_window import SlidingWindowConversationManager
from ray_harness.agent.limits import Limits, validate_limits
from ray_harness.hooks.registry import is_hook_provider
from ray_harness.models.base import Model
from ray_harness.session.manager import SessionManager
from ray_harness.tools.executors import ToolExecutor
from ray_harness.types.content import SystemContentBlock
from ray_harness.types.exceptions import ModelConfigurationError

__all__ = ("check_arguments", "check_identity", "check_invocation", "check_system_prompt", "checked_baggage",
           "checked_sandbox", "checked_storage", "default_conversation_manager", "default_sandbox", "resolve_aux_model",
           "resolve_model")


def check_arguments(*, description: Any, conversation_manager: Any, session_manager: Any, tool_executor: Any,
                    retry_strategy: Any, checkpointing: Any, max_guide_retries: Any, tools: Any,
                    callback_handler: Any, structured_output_model: Any, structured_output_prompt: Any = None,
                    concurrent_invocation_mode: Any = "throw") -> None:
    """Raise ``TypeError``/``ValueError`` naming the first argument that cannot work."""
    if description is not None and not isinstance(description, str):
        raise TypeError(f"description must be a string or None, got {_kind(description)}")
    _check_components(conversation_manager, session_manager, tool_executor)
    if retry_strategy is not None and not (callable(getattr(retry_strategy, "delay", None))
                                           and hasattr(retry_strategy, "clock")):
        raise TypeError(f"retry_strategy must be a ModelRetryStrategy (or None for no retries), got "
                        f"{_kind(retry_strategy)}")
    if not isinstance(checkpointing, bool):
        raise TypeError(f"checkpointing must be True or False, got {_kind(checkpointing)}")
    if isinstance(max_guide_retries, bool) or not isinstance(max_guide_retries, int) or max_guide_retries < 0:
        raise ValueError(f"max_guide_retries must be an int >= 0, got {max_guide_retries!r}")
    if tools is not None and (isinstance(tools, str | bytes | dict) or not hasattr(tools, "__iter__")):
        raise TypeError(f"tools must be a list of tools (functions decorated with @tool, tool objects, MCP "
                        f"clients or modules), got {_kind(tools)}")
    if callback_handler is not None and not callable(callback_handler):
        raise TypeError(f"callback_handler must be a callable taking the stream events as keyword arguments, "
                        f"or None, got {_kind(callback_handler)}")
    if structured_output_model is not None and not (isinstance(structured_output_model, type)
                                                    and hasattr(structured_output_model, "model_json_schema")):
        raise TypeError(f"structured_output_model must be a pydantic model class, got {_kind(structured_output_model)}")
    if structured_output_prompt is not None and (not isinstance(structured_output_prompt, str)
                                                 or not structured_output_prompt.strip()):
        raise ValueError(f"structured_output_prompt must be a non-empty string or None, got "
                         f"{structured_output_prompt!r}")
    if concurrent_invocation_mode != "throw":
        # Strands' "unsafe_reentrant" runs two invocations of one agent over one history; here one agent runs
        # one invocation at a time (cancel, snapshots and the runtime address the one running).
        raise ValueError(f"concurrent_invocation_mode must be 'throw' (a second concurrent invocation raises "
                         f"ConcurrencyException), got {concurrent_invocation_mode!r}; for concurrent work use one "
                         "Agent per invocation")


def _check_components(conversation_manager: Any, session_manager: Any, tool_executor: Any) -> None:
    # The defaults (None) are passed over without a call: agents are built per dataset row.
    if conversation_manager is not None:
        _instance("conversation_manager", conversation_manager, ConversationManager,
                  "e.g. SlidingWindowConversationManager()")
    if session_manager is not None and (not is_hook_provider(session_manager) or _from_strands(session_manager)):
        # A user's own HookProvider may persist.
        _instance("session_manager", session_manager, SessionManager, "e.g. FileSessionManager(session_id=...)")
    if tool_executor is not None and (isinstance(tool_executor, type)
                                      or not callable(getattr(tool_executor, "execute", None))):
        _instance("tool_executor", tool_executor, ToolExecutor, "ConcurrentToolExecutor() or SequentialToolExecutor()")


def check_invocation(agent: Any, invocation_state: Any, limits: Any, structured_output_model: Any,
                     kwargs: dict[str, Any]) -> tuple[Limits | None, str | None, type | None]:
    """An invocation's arguments checked: its limits, structured output prompt and model (the agent's by default).

    Pops ``structured_output_prompt`` (Strands' per-call override) from ``kwargs``, so it does not land in the
    invocation state with the other keyword arguments.

    Raises:
        TypeError: A wrong argument (named), or a cost limit on a model without prices.
        ValueError: The structured output model has the name of one of the agent's tools.
    """
    checked_limits = validate_limits(limits) if limits is not None else None  # one call less for most invocations
    output_prompt = kwargs.pop("structured_output_prompt", None)
    if output_prompt is not None and not isinstance(output_prompt, str):
        raise TypeError(f"structured_output_prompt must be a str or None, got {type(output_prompt).__name__}")
    if invocation_state is not None and not isinstance(invocation_state, dict):
        raise TypeError(f"invocation_state must be a dict or None, got {type(invocation_state).__name__}")
    if checked_limits is not None and "cost_usd" in checked_limits and getattr(agent.model, "prices", None) is None:
        # Without prices every call costs 0: the budget would silently never stop the run.
        raise TypeError("limits['cost_usd'] needs prices on the model: pass prices=ModelPrices(...) to it")
    output_model = structured_output_model or agent.structured_output_model
    if output_model is not None and agent.tool_registry.get(output_model.__name__) is not None:
        # Two tool specs of one name: every provider refuses the request (Strands refuses it here too).
        raise ValueError(f"Tool {output_model.__name__!r} already exists: the structured output model "
                         "is offered to the model as a tool of its name; rename the model or the tool")
    return checked_limits, output_prompt, output_model


def check_identity(name: Any, agent_id: Any) -> tuple[str, str]:
    """``name`` and ``agent_id`` as the agent keeps them: ``None`` is the default, as in Strands.

    ``agent_id`` names the agent's files and keys in a session, so path separators are refused here (as Strands
    does), not at the first session write.
    """
    name = "agent" if name is None else name
    agent_id = "default" if agent_id is None else agent_id
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if not isinstance(agent_id, str) or not agent_id:
        raise ValueError(f"agent_id must be a non-empty string, got {agent_id!r}")
    if "/" in agent_id or "\\" in agent_id or "\x00" in agent_id:  # no generator: agents are built per row
        raise ValueError(f"agent_id {agent_id!r} must not contain path separators ('/' or '\\\\') or NUL")
    return name, agent_id


def check_system_prompt(system_prompt: Any) -> str | list[SystemContentBlock] | None:
    """A system prompt is a string or a list of ``{"text": ...}`` / ``{"cachePoint": {...}}`` blocks (as in Strands).

    Returns the value to keep (a list is copied, so later edits of the caller's list do not reach the agent).
    """
    if system_prompt is None or isinstance(system_prompt, str):
        return system_prompt
    if isinstance(system_prompt, list | tuple):
        for index, block in enumerate(system_prompt):
            if not (isinstance(block, dict) and len(block) == 1 and (
                    isinstance(block.get("text"), str) or isinstance(block.get("cachePoint"), dict))):
                raise ValueError(f"system_prompt[{index}] must be {{'text': str}} or {{'cachePoint': {{...}}}}, "
                                 f"got {block!r}")
        return copy.deepcopy(list(system_prompt))
    raise TypeError(f"system_prompt must be a string, a list of system content blocks, or None, got "
                    f"{_kind(system_prompt)}")


def _instance(name: str, value: Any, expected: type, example: str) -> None:
    if value is None or isinstance(value, expected):
        return
    if isinstance(value, type):
        raise TypeError(f"{name} must be an instance ({example}), got the class {value.__qualname__}")
    hint = f" (a Strands object: use ray_harness's {type(value).__name__})" if _from_strands(value) else ""
    raise TypeError(f"{name} must be a {expected.__name__} ({example}), got {_kind(value)}{hint}")


def _from_strands(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "strands"


def _kind(value: Any) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}" if not isinstance(value, str | int | float) \
        else f"{type(value).__name__} {value!r}"


_NO_MODEL_HELP = (
    "Agent needs a model and none is configured (ray_harness never calls a cloud API by default). "
    "Pass model= one of: a Model instance (ray_harness.models.AnthropicModel, OpenAIModel, BedrockModel), "
    "a string 'anthropic:<model id>', 'openai:<model id>', 'bedrock:<model id>' or "
    "'openai-compatible:<base_url>#<model id>', or set the RAY_HARNESS_MODEL environment variable to such a "
    "string. For tests and offline runs use ray_harness.testing.ScriptedModel."
)


def resolve_model(model: Model | str | None) -> Model:
    if model is None:
        configured = os.environ.get("RAY_HARNESS_MODEL")
        if not configured:
            raise ModelConfigurationError(_NO_MODEL_HELP)
        model = configured
    if isinstance(model, str):
        from ray_harness.models import from_string

        return from_string(model)  # type: ignore[no-any-return]
    # A Model subclass is found in its MRO without ABCMeta's Python-level __instancecheck__ (agents are built per
    # row); a class registered as a virtual subclass still passes the isinstance.
    if Model not in type(model).__mro__ and not isinstance(model, Model):
        raise ModelConfigurationError(f"model must be a ray_harness Model or a model string, got {model!r}. "
                                      + _NO_MODEL_HELP)
    return model


def resolve_aux_model(aux_model: Any) -> Model | None:
    """``aux_model`` as the agent keeps it: ``None``, or a model (a string is resolved as ``model=``'s is).

    A string is a ray_harness model string (``"anthropic:<id>"``, ...), not Strands' Bedrock model id: the same
    string means the same model for ``model=`` and ``aux_model=``. A ``ModelRouter`` is refused, as in Strands.
    """
    if aux_model is None:
        return None
    if isinstance(aux_model, str):
        from ray_harness.models import from_string

        try:
            return from_string(aux_model)  # type: ignore[no-any-return]
        except ModelConfigurationError as error:
            raise ModelConfigurationError(f"aux_model: {error}") from error
    if not isinstance(aux_model, Model):
        raise TypeError(f"aux_model must be a ray_harness Model, a model string or None, got {_kind(aux_model)}")
    from ray_harness.models.routing.router import ModelRouter  # only for agents given an aux_model

    if isinstance(aux_model, ModelRouter):
        # As in Strands: side calls (summaries, judges, classifiers) are single requests, not the agent's turns a
        # router spreads over its candidates; give one concrete model.
        raise TypeError("aux_model must not be a ModelRouter: side calls take one concrete model (e.g. one of the "
                        "router's candidates)")
    return aux_model


def checked_storage(storage: Any) -> Any:
    """``storage`` given to ``Agent(storage=...)``: a :mod:`ray_harness.storage` ``Storage`` instance."""
    if isinstance(storage, type) or not all(callable(getattr(storage, name, None))
                                            for name in ("write", "read", "delete", "list")):
        what = f"the class {storage.__qualname__}" if isinstance(storage, type) else _kind(storage)
        raise TypeError(f"storage must be a ray_harness.storage Storage instance (InMemoryStorage(), "
                        f"LocalFileStorage(...), S3Storage(...)) or None, got {what}")
    return storage


def checked_baggage(baggage_attributes: Any) -> dict[str, str]:
    """``baggage_attributes`` as the agent keeps them: a new dict of string keys and values (OTel baggage is text)."""
    if not hasattr(baggage_attributes, "items") or isinstance(baggage_attributes, type):
        raise TypeError(f"baggage_attributes must be a mapping of strings to strings or None, got "
                        f"{_kind(baggage_attributes)}")
    checked = dict(baggage_attributes.items())
    for key, value in checked.items():
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise TypeError(f"baggage_attributes must map non-empty strings to strings, got {key!r}: {value!r}")
    return checked


def checked_sandbox(sandbox: Any) -> Any:
    if sandbox is None:
        return None
    from ray_harness.sandbox.base import Sandbox

    if not isinstance(sandbox, Sandbox):
        raise TypeError(f"sandbox must be a Sandbox instance (LocalEnvironment, DockerSandbox, SshSandbox, ...) or "
                        f"None, got {type(sandbox).__name__}")
    return sandbox


def default_sandbox() -> Any:
    from ray_harness.sandbox.local import LocalEnvironment

    return LocalEnvironment()


def default_conversation_manager() -> ConversationManager:
    return SlidingWindowConversationManager()
