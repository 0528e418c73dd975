"""``from_string``: a model from a short spec such as ``"anthropic:claude-sonnet-4-5"``.

Specs (``Agent(model="...")``, ``RAY_HARNESS_MODEL`` and the CLI's ``--model`` use the same forms):

* ``anthropic:<model id>`` — :class:`AnthropicModel`, key from ``ANTHROPIC_API_KEY``;
* ``openai:<model id>`` — :class:`OpenAIModel`, key from ``OPENAI_API_KEY``;
* ``bedrock:<model id>`` — :class:`BedrockModel`, the usual AWS credential chain and region;
* ``openai-compatible:<base_url>#<model id>`` — :class:`OpenAIModel` on any OpenAI-compatible server (vLLM,
  llama.cpp server, Ollama, ``transformers serve``); key from ``OPENAI_API_KEY`` when set, else the
  placeholder ``"EMPTY"`` that key-less local servers accept.

Any spec may end in a query of request parameters, ``?key=value&key=value``, for example
``"openai-compatible:http://localhost:8000/v1#my-model?max_tokens=64&temperature=0.2"`` or
``"anthropic:claude-sonnet-4-5?max_tokens=512"``. Values are read as JSON scalars when they parse as one
(``64``, ``0.2``, ``true``) and as strings otherwise; percent-encode ``&``, ``=``, ``#`` and ``%`` inside a
value. The keys, and the request field each one fills:

* ``max_tokens`` — the provider's output cap: ``AnthropicModel(max_tokens=)``; ``max_completion_tokens`` for
  ``openai:`` (the field OpenAI reads today); ``max_tokens`` for ``openai-compatible:`` (the field every
  compatible server reads); ``inferenceConfig.maxTokens`` for ``bedrock:``;
* ``temperature``, ``top_p`` — request params of the same name (Bedrock: ``inferenceConfig.temperature`` /
  ``inferenceConfig.topP``);
* ``top_k`` — ``anthropic:`` and ``openai-compatible:`` only; ``seed`` — ``openai:`` and
  ``openai-compatible:`` only;
* ``stop`` — one stop sequence: ``stop_sequences`` (Anthropic), ``stop`` (OpenAI and compatible),
  ``inferenceConfig.stopSequences`` (Bedrock);
* ``context_window`` — the model's ``context_window=`` (proactive compression), every provider.

A key the provider does not take, a repeated key, or a value of the wrong type raises
``ModelConfigurationError`` naming the key; other request fields go in ``params=`` on the model object.

Keys are read by the provider clients when the first call is made (inside the Ray actor, for a remote agent),
never stored in the spec.
"""

from __future__ import annotations

import os
from typing import Any

from ray_harness.models._spec_query import Scalar, parse_query, split_query, with_defaults
from ray_harness.models.base import Model
from ray_harness.types.exceptions import ModelConfigurationError

__all__ = ("SPEC_FORMS", "from_string", "spec_with_defaults")

SPEC_FORMS = ("'anthropic:<model id>'", "'openai:<model id>'", "'bedrock:<model id>'",
              "'openai-compatible:<base_url>#<model id>'")

# The query keys each provider takes (see the table in the module docstring).
_ALLOWED = {
    "anthropic": ("max_tokens", "temperature", "top_p", "top_k", "stop", "context_window"),
    "openai": ("max_tokens", "temperature", "top_p", "seed", "stop", "context_window"),
    "openai-compatible": ("max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "context_window"),
    "bedrock": ("max_tokens", "temperature", "top_p", "stop", "context_window"),
}


def from_string(spec: str) -> Model:
    """Build the model ``spec`` names, or raise ``ModelConfigurationError`` (a ``ValueError``) saying why not."""
    if not isinstance(spec, str):
        raise ModelConfigurationError(f"model spec must be a string, got {type(spec).__name__}")
    head, query = split_query(spec.strip())
    prefix, sep, rest = head.partition(":")
    prefix = prefix.strip().lower()
    rest = rest.strip()
    if not sep or not rest:
        raise ModelConfigurationError(f"malformed model spec {spec!r}: expected one of {', '.join(SPEC_FORMS)}"
                                      f"{_hint(head)}")
    if prefix not in _ALLOWED:
        raise ModelConfigurationError(f"unknown model provider {prefix!r} in {spec!r}: expected one of "
                                      f"{', '.join(SPEC_FORMS)}{_hint(head)}")
    params = parse_query(spec, query, _ALLOWED[prefix])
    context_window = params.pop("context_window", None)
    if prefix == "anthropic":
        from ray_harness.models.anthropic import AnthropicModel

        model = AnthropicModel(rest, context_window=_int_or_none(context_window))
        if "max_tokens" in params:  # else the class default stays the one source of it
            model.update_config(max_tokens=params.pop("max_tokens"))
        model.update_config(params=_renamed(params, {"stop": "stop_sequences"}))
        return model
    if prefix == "openai":
        from ray_harness.models.openai import OpenAIModel

        return OpenAIModel(rest, params=_renamed(params, {"max_tokens": "max_completion_tokens"}),
                           context_window=_int_or_none(context_window))
    if prefix == "bedrock":
        from ray_harness.models.bedrock import BedrockModel

        return BedrockModel(rest, params=_bedrock_params(params), context_window=_int_or_none(context_window))
    return _openai_compatible(spec, rest, params, context_window)


def spec_with_defaults(spec: str, **defaults: Scalar) -> str:
    """``spec`` with each of ``defaults`` added to its query unless the spec sets that key itself.

    >>> spec_with_defaults("openai-compatible:http://localhost:8000/v1#m", max_tokens=256)
    'openai-compatible:http://localhost:8000/v1#m?max_tokens=256'
    >>> spec_with_defaults("anthropic:claude-sonnet-4-5?max_tokens=64", max_tokens=256)
    'anthropic:claude-sonnet-4-5?max_tokens=64'
    """
    return with_defaults(spec, defaults)


def _openai_compatible(spec: str, rest: str, params: dict[str, Scalar], context_window: Scalar | None) -> Model:
    from ray_harness.models.openai import OpenAIModel

    base_url, sep, model_id = rest.rpartition("#")
    base_url, model_id = base_url.strip(), model_id.strip()
    if not sep or not base_url or not model_id:
        raise ModelConfigurationError(f"malformed model spec {spec!r}: expected "
                                      "'openai-compatible:<base_url>#<model id>', e.g. "
                                      "'openai-compatible:http://localhost:8000/v1#my-model'")
    if not base_url.startswith(("http://", "https://")):
        raise ModelConfigurationError(f"malformed model spec {spec!r}: base_url {base_url!r} must start with "
                                      "http:// or https://")
    api_key = os.environ.get("OPENAI_API_KEY") or "EMPTY"
    return OpenAIModel(model_id, params=_renamed(params, {}),
                       client_args={"base_url": base_url, "api_key": api_key},
                       context_window=_int_or_none(context_window))


def _hint(head: str) -> str:
    """A pointer for two habits: a bare Bedrock model id (Strands' model string) or a bare server URL."""
    model_id = head.strip()
    provider_part = model_id.partition(":")[0].lower()
    if provider_part in ("http", "https"):
        return f" (an OpenAI-compatible server? write 'openai-compatible:{model_id}' with '#<model id>' at the end)" \
            if "#" not in model_id else f" (an OpenAI-compatible server? write 'openai-compatible:{model_id}')"
    if "." in provider_part and "/" not in model_id and " " not in model_id:
        return f" (a Bedrock model id? write 'bedrock:{model_id}')"
    return ""


def _renamed(params: dict[str, Scalar], names: dict[str, str]) -> dict[str, Any] | None:
    """Request params from query params: renamed per ``names``; ``stop`` becomes a one-item list."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        out[names.get(key, key)] = [value] if key == "stop" else value
    return out or None


def _bedrock_params(params: dict[str, Scalar]) -> dict[str, Any] | None:
    names = {"max_tokens": "maxTokens", "temperature": "temperature", "top_p": "topP", "stop": "stopSequences"}
    inference = {names[key]: [value] if key == "stop" else value for key, value in params.items()}
    return {"inferenceConfig": inference} if inference else None


def _int_or_none(value: Scalar | None) -> int | None:
    return None if value is None else int(value)
