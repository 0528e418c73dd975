"""Model providers.

``Model`` is the protocol; providers (``AnthropicModel``, ``OpenAIModel``,
``BedrockModel``) import their client libraries lazily, so importing this
package stays cheap.
"""

from __future__ import annotations

from ray_harness._lazy import lazy_attributes
from ray_harness.models.base import CacheConfig, CacheToolsConfig, Model, ModelPrices, estimate_tokens

__all__ = ["AnthropicModel", "BedrockModel", "CacheConfig", "CacheToolsConfig", "Model", "ModelPrices", "OpenAIModel",
           "RateLimit", "estimate_tokens", "from_string"]

_LAZY = {
    "AnthropicModel": "ray_harness.models.anthropic",
    "OpenAIModel": "ray_harness.models.openai",
    "BedrockModel": "ray_harness.models.bedrock",
    "from_string": "ray_harness.models.selection",
    "RateLimit": "ray_harness.models.rate_limit",
}


__getattr__ = lazy_attributes(__name__, _LAZY)
