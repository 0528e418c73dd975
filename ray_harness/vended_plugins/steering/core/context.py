"""Strands' ``steering.core.context``: ``SteeringContext`` is :class:`ray_harness.steering.SteeringContext`.

Its ``data`` is a plain JSON-serializable ``dict`` (Strands' has ``get``/``set``/``delete`` methods; a ``dict``
has ``get``, use ``data[key] = value`` and ``del data[key]``). Strands' ``SteeringContextCallback`` and
``SteeringContextProvider`` are not provided: importing them raises ``ImportError`` saying what to use.
"""

from __future__ import annotations

from ray_harness._strands_paths import not_provided
from ray_harness.steering import SteeringContext
from ray_harness.vended_plugins.steering._left_out import REASONS

__all__ = ("SteeringContext",)

__getattr__ = not_provided(__name__, {name: REASONS[name] for name in
                                      ("SteeringContextCallback", "SteeringContextProvider")})
