"""Strands' ``strands.experimental.checkpoint``: ray_harness's checkpoints (:mod:`ray_harness.checkpoint`).

``Checkpoint``, ``CheckpointPosition`` and ``CHECKPOINT_SCHEMA_VERSION`` are the very objects of
:mod:`ray_harness.checkpoint`; pause with ``Agent(checkpointing=True)`` and resume with
``{"checkpointResume": {"checkpoint": checkpoint.to_dict()}}`` as in Strands.
"""

from __future__ import annotations

from ray_harness.checkpoint import CHECKPOINT_SCHEMA_VERSION, Checkpoint, CheckpointPosition

__all__ = ("CHECKPOINT_SCHEMA_VERSION", "Checkpoint", "CheckpointPosition")
