"""``from_string``: a model from a short spec such as ``"anthropic:claude-sonnet-4-5"``.

Specs (``Agent(model="...")`` and ``RAY_HARNESS_MODEL`` use the same forms):

* ``anthropic:<model id>`` — :class:`AnthropicModel`, key from ``ANTHROPIC_API_KEY``;
* ``openai:<model id>`` — :class:`OpenAIModel`, key from ``OPENAI_API_KEY``;
* ``bedrock:<model id>`` — :class:`BedrockModel`, the usual AWS credential chain and region;
* ``openai-compatible:<base_url>#<model id>`` — :class:`OpenAIModel` on any OpenAI-compatible server (vLLM,
  llama.cpp server, Ollama); key from ``OPENAI_API_KEY`` when set, else the placeholder ``"EMPTY"`` that
  key-less local servers accept.

Keys are read by the provider clients when the first call is made (inside the Ray actor, for a remote agent),
never stored in the spec.
"""

from __future__ import annotations

import os

from ray_harness.models.base import Model
from ray_harness.types.exceptions import ModelConfigurationError

__all__ = ("SPEC_FORMS", "from_string")

SPEC_FORMS = ("'anthropic:<model id>'", "'openai:<model id>'", "'bedrock:<model id>'",
              "'openai-compatible:<base_url>#<model id>'")


def from_string(spec: str) -> Model:
    """Build the model ``spec`` names, or raise ``ModelConfigurationError`` (a ``ValueError``) saying why not."""
    if not isinstance(spec, str):
        raise ModelConfigurationError(f"model spec must be a string, got {type(spec).__name__}")
    prefix, sep, rest = spec.strip().partition(":")
    prefix = prefix.strip().lower()
    rest = rest.strip()
    if not sep or not rest:
        raise ModelConfigurationError(f"malformed model spec {spec!r}: expected one of {', '.join(SPEC_FORMS)}")
    if prefix == "anthropic":
        from ray_harness.models.anthropic import AnthropicModel

        return AnthropicModel(rest)
    if prefix == "openai":
        from ray_harness.models.openai import OpenAIModel

        return OpenAIModel(rest)
    if prefix == "bedrock":
        from ray_harness.models.bedrock import BedrockModel

        return BedrockModel(rest)
    if prefix == "openai-compatible":
        return _openai_compatible(spec, rest)
    raise ModelConfigurationError(f"unknown model provider {prefix!r} in {spec!r}: expected one of "
                                  f"{', '.join(SPEC_FORMS)}")


def _openai_compatible(spec: str, rest: str) -> Model:
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
    return OpenAIModel(model_id, client_args={"base_url": base_url, "api_key": api_key})
