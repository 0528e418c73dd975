"""Strands' ``cache_config`` on ``OpenAIModel``: OpenAI's prompt-cache routing key and retention.

OpenAI caches prompt prefixes by itself; a request can only say which cache to route to (``prompt_cache_key``)
and how long to keep it (``prompt_cache_retention``, ``"in_memory"`` or ``"24h"``). So of a ``CacheConfig`` only
``cache_key`` and such a ``ttl`` reach the request, as in Strands; the other fields are warned about once, when
the model is configured, and a value the user put in ``params`` is never overwritten.
"""

from __future__ import annotations

import warnings
from typing import Any

from ray_harness.models.base import CacheConfig

__all__ = ("apply_cache_config", "warn_unused_fields")

_RETENTIONS = frozenset({"in_memory", "24h"})


def warn_unused_fields(config: CacheConfig | None) -> None:
    """A ``UserWarning`` for each setting of ``config`` OpenAI cannot act on (Strands warns for the same ones)."""
    if config is None:
        return
    unused = [name for name, is_set in (("strategy", config.strategy != "auto"),
                                        ("system_prompt_ttl", config.system_prompt_ttl is not True),
                                        ("tools_ttl", config.tools_ttl is not None)) if is_set]
    if unused:
        warnings.warn(f"cache_config fields {unused} have no effect on OpenAI (it places no cache points); "
                      "they are ignored", UserWarning, stacklevel=3)
    if config.ttl is not None and config.ttl not in _RETENTIONS:
        warnings.warn(f"cache_config.ttl={config.ttl!r} is not an OpenAI retention ('in_memory' or '24h') and is "
                      "ignored", UserWarning, stacklevel=3)


def apply_cache_config(body: dict[str, Any], config: CacheConfig | None, session_id: str | None) -> None:
    """Add ``prompt_cache_key`` / ``prompt_cache_retention`` to the request ``body`` unless ``params`` set them.

    The key is ``config.cache_key``; unset, ``strands-<session_id>`` when the caller names a session (the prefix is
    Strands', so a session shares its cache with a Strands program); ``False``, none at all.
    """
    if config is None:
        return
    key = config.cache_key
    if key is None and session_id is not None:
        key = f"strands-{session_id}"
    if key and "prompt_cache_key" not in body:
        body["prompt_cache_key"] = key
    if config.ttl in _RETENTIONS and "prompt_cache_retention" not in body:
        body["prompt_cache_retention"] = config.ttl
