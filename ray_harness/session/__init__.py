"""Durable sessions: persist an agent's messages, state, conversation manager and interrupts.

``Agent(..., session_manager=FileSessionManager("my-session"))`` restores the agent when it is
constructed again with the same ``session_id`` and ``agent_id`` — in this process or another one,
so an interrupted run can be resumed hours later. ``S3SessionManager`` stores the same layout in S3.
See :mod:`ray_harness.session.manager` (what is written when),
:mod:`ray_harness.session.repository` (layout; adding a store) and
:mod:`ray_harness.session.records` (schema, corruption handling).
"""

from ray_harness.session.file import FileSessionManager, FileSessionRepository
from ray_harness.session.manager import RepositorySessionManager, SessionManager
from ray_harness.session.records import SCHEMA_VERSION, AgentRecord, MessageRecord, MultiAgentRecord, SessionRecord
from ray_harness.session.repository import BlobSessionRepository, SessionRepository
from ray_harness.session.s3 import S3SessionManager, S3SessionRepository

__all__ = [
    "SCHEMA_VERSION",
    "AgentRecord",
    "BlobSessionRepository",
    "FileSessionManager",
    "FileSessionRepository",
    "MessageRecord",
    "MultiAgentRecord",
    "RepositorySessionManager",
    "S3SessionManager",
    "S3SessionRepository",
    "SessionManager",
    "SessionRecord",
    "SessionRepository",
]
