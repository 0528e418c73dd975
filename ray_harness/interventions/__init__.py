"""Interventions: policies that return Proceed / Deny / Guide / Confirm / Transform."""

from ray_harness.interventions.actions import Confirm, Deny, Guide, InterventionAction, Proceed, Transform
from ray_harness.interventions.handler import InterventionHandler, OnError
from ray_harness.interventions.registry import InterventionRegistry

__all__ = [
    "Confirm",
    "Deny",
    "Guide",
    "InterventionAction",
    "InterventionHandler",
    "InterventionRegistry",
    "OnError",
    "Proceed",
    "Transform",
]
