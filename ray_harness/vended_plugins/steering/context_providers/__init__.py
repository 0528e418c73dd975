"""Strands' ``strands.vended_plugins.steering.context_providers``: nothing of it is provided.

``LedgerBeforeToolCall``, ``LedgerAfterToolCall`` and ``LedgerProvider`` (a tool-call ledger written into the
steering context) raise ``ImportError`` saying what to use: ray_harness's ``SteeringHandler`` takes no context
providers; it keeps what it needs in ``self.steering_context.data`` itself.
"""

from __future__ import annotations

from ray_harness._strands_paths import not_provided
from ray_harness.vended_plugins.steering._left_out import REASONS

__all__: tuple[str, ...] = ()

__getattr__ = not_provided(__name__, {name: REASONS[name] for name in
                                      ("LedgerAfterToolCall", "LedgerBeforeToolCall", "LedgerProvider")})
