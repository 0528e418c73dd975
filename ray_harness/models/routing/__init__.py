"""Model routing, as Strands' ``strands.models.routing``: a ``ModelRouter`` serves each request on one of its models.

Its ``RoutingStrategy`` picks the candidate when a request opens and again after a candidate failed; the default
``FallbackStrategy`` is ordered failover that prefers the candidates failing least, ``ClassifierStrategy`` asks a
classifier model. ``ModelRouter`` is a ``Model``: pass it as ``Agent(model=...)``.
"""

from __future__ import annotations

from ray_harness.models.routing.classifier_strategy import ClassifierStrategy
from ray_harness.models.routing.fallback_strategy import FallbackStrategy
from ray_harness.models.routing.router import CandidateInput, ModelRouter, RoutingCandidate
from ray_harness.models.routing.strategy import RoutingAttempt, RoutingContext, RoutingStrategy

__all__ = ["CandidateInput", "ClassifierStrategy", "FallbackStrategy", "ModelRouter", "RoutingAttempt",
           "RoutingCandidate", "RoutingContext", "RoutingStrategy"]
