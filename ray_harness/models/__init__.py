"""Model providers.

``Model`` is the protocol; providers (``AnthropicModel``, ``OpenAIModel``,
``BedrockModel``) import their client libraries lazily, so importing this
package stays cheap; so is ``ModelRouter`` (and the rest of :mod:`ray_harness.models.routing`).
"""

from __future__ import annotations

from ray_harness._lazy import lazy_attributes
from ray_harness.models.base import CacheConfig, CacheToolsConfig, Model, ModelPrices, estimate_tokens

__all__ = ["AnthropicModel", "BedrockModel", "CacheConfig", "CacheToolsConfig", "CandidateInput", "ClassifierStrategy",
           "FallbackStrategy", "Model", "ModelPrices", "ModelRouter", "OpenAIModel", "RateLimit", "RoutingAttempt",
           "RoutingCandidate", "RoutingContext", "RoutingStrategy", "estimate_tokens", "from_string"]

_LAZY = {
    "AnthropicModel": "ray_harness.models.anthropic",
    "OpenAIModel": "ray_harness.models.openai",
    "BedrockModel": "ray_harness.models.bedrock",
    "from_string": "ray_harness.models.selection",
    "RateLimit": "ray_harness.models.rate_limit",
    "CandidateInput": "ray_harness.models.routing",
    "ClassifierStrategy": "ray_harness.models.routing",
    "FallbackStrategy": "ray_harness.models.routing",
    "ModelRouter": "ray_harness.models.routing",
    "RoutingAttempt": "ray_harness.models.routing",
    "RoutingCandidate": "ray_harness.models.routing",
    "RoutingContext": "ray_harness.models.routing",
    "RoutingStrategy": "ray_harness.models.routing",
}


__getattr__ = lazy_attributes(__name__, _LAZY)
