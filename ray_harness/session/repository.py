"""Where session records live: the ``SessionRepository`` interface and a key/value base for stores.

Layout (the same keys for files and S3 objects)::

    session_<session_id>/session.json
    session_<session_id>/agents/agent_<agent_id>/agent.json
    session_<session_id>/agents/agent_<agent_id>/messages/message_<n>.json     n = 0, 1, 2, ...
    session_<session_id>/multi_agents/multi_agent_<id>/multi_agent.json

Adding a store: implement :class:`SessionRepository` directly (e.g. over a database table), or, for
anything that can get/put/list/delete blobs by key, subclass :class:`BlobSessionRepository` and
implement its five primitives (``_read``, ``_write``, ``_list_dir``, ``_delete``, ``_delete_tree``)
plus ``_location`` for error messages; record validation, the layout and the message numbering come
for free. Then wrap it: ``RepositorySessionManager(session_id, MyRepository(...))``.

**One writer per agent.** A message is appended with ``new=True``: it must not exist yet. A second process
writing the same agent of the same session at the same time would otherwise overwrite the first one's messages
by index; it gets a :class:`~ray_harness.types.exceptions.SessionException` instead, and nothing stored is lost.
Override ``_create`` with the store's atomic create-if-absent (the files' ``link``, S3's ``If-None-Match``); the
default reads first, which catches writers that interleave turn by turn but not two writes of the same instant.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod

from typing_extensions import override

from ray_harness.session.records import (
    AgentRecord,
    MessageRecord,
    MultiAgentRecord,
    SessionRecord,
    dump_record,
    parse_record,
    validate_id,
)
from ray_harness.types.exceptions import SessionException

__all__ = ("BlobSessionRepository", "SessionRepository")

_MESSAGE_FILE = re.compile(r"message_(0|[1-9][0-9]*)\.json")


class SessionRepository(ABC):
    """Read/write/list/delete of session, agent, message and multi-agent records."""

    @abstractmethod
    def read_session(self, session_id: str) -> SessionRecord | None:
        """The session record, or ``None`` if the session does not exist."""

    @abstractmethod
    def write_session(self, record: SessionRecord) -> None:
        """Create or replace the session record."""

    @abstractmethod
    def delete_session(self, session_id: str) -> None:
        """Delete the session and everything in it."""

    @abstractmethod
    def read_agent(self, session_id: str, agent_id: str) -> AgentRecord | None:
        """The agent record, or ``None`` if the agent is not in the session."""

    @abstractmethod
    def write_agent(self, session_id: str, record: AgentRecord) -> None:
        """Create or replace an agent record."""

    @abstractmethod
    def list_agents(self, session_id: str) -> list[str]:
        """The ids of the agents stored in the session."""

    @abstractmethod
    def delete_agent(self, session_id: str, agent_id: str) -> None:
        """Delete an agent record and its messages."""

    @abstractmethod
    def read_message(self, session_id: str, agent_id: str, message_id: int) -> MessageRecord | None:
        """One message record, or ``None``."""

    @abstractmethod
    def write_message(self, session_id: str, agent_id: str, record: MessageRecord, *, new: bool = False) -> None:
        """Create or replace one message record (keyed by its ``message_id``).

        ``new=True`` (an appended message): the record must not exist yet; ``SessionException`` if it does
        (another writer appended to the same agent).
        """

    @abstractmethod
    def list_messages(self, session_id: str, agent_id: str) -> list[MessageRecord]:
        """All messages of an agent, ordered by ``message_id`` (which must run 0..n-1 without gaps)."""

    @abstractmethod
    def delete_messages(self, session_id: str, agent_id: str, from_id: int) -> None:
        """Delete every message whose ``message_id >= from_id``."""

    @abstractmethod
    def read_multi_agent(self, session_id: str, multi_agent_id: str) -> MultiAgentRecord | None:
        """The Graph/Swarm record, or ``None``."""

    @abstractmethod
    def write_multi_agent(self, session_id: str, record: MultiAgentRecord) -> None:
        """Create or replace a Graph/Swarm record."""

    def agent_location(self, session_id: str, agent_id: str) -> str:
        """Where the agent record lives, for error messages."""
        return f"session {session_id!r}, agent {agent_id!r}"


def _session_dir(session_id: str) -> str:
    return f"session_{validate_id(session_id, 'session_id')}"


def _agent_dir(session_id: str, agent_id: str) -> str:
    return f"{_session_dir(session_id)}/agents/agent_{validate_id(agent_id, 'agent_id')}"


def _messages_dir(session_id: str, agent_id: str) -> str:
    return f"{_agent_dir(session_id, agent_id)}/messages"


def _multi_agent_key(session_id: str, multi_agent_id: str) -> str:
    return (f"{_session_dir(session_id)}/multi_agents/multi_agent_{validate_id(multi_agent_id, 'multi_agent_id')}"
            "/multi_agent.json")


class BlobSessionRepository(SessionRepository):
    """A repository over a key/value blob store (keys use ``/``); see the module docstring."""

    @abstractmethod
    def _read(self, key: str) -> bytes | None:
        """The blob at ``key``, or None when absent."""

    @abstractmethod
    def _write(self, key: str, data: bytes) -> None:
        """Store ``data`` at ``key`` atomically (readers see the old or the new blob, never a mix)."""

    @abstractmethod
    def _list_dir(self, key: str) -> list[str]:
        """Names of the blobs and sub-directories directly under ``key``."""

    @abstractmethod
    def _delete(self, key: str) -> None:
        """Remove one blob (no error when absent)."""

    @abstractmethod
    def _delete_tree(self, key: str) -> None:
        """Remove everything under ``key``."""

    @abstractmethod
    def _location(self, key: str) -> str:
        """Human-readable location of ``key`` (path or URL) for error messages."""

    # -- sessions -------------------------------------------------------------------------------------

    @override
    def read_session(self, session_id: str) -> SessionRecord | None:
        key = f"{_session_dir(session_id)}/session.json"
        raw = self._read(key)
        return None if raw is None else parse_record(raw, SessionRecord, self._location(key))

    @override
    def write_session(self, record: SessionRecord) -> None:
        key = f"{_session_dir(record.session_id)}/session.json"
        self._write(key, dump_record(record, self._location(key)))

    @override
    def delete_session(self, session_id: str) -> None:
        self._delete_tree(_session_dir(session_id))

    # -- agents ---------------------------------------------------------------------------------------

    @override
    def read_agent(self, session_id: str, agent_id: str) -> AgentRecord | None:
        key = f"{_agent_dir(session_id, agent_id)}/agent.json"
        raw = self._read(key)
        if raw is None:
            return None
        record = parse_record(raw, AgentRecord, self._location(key))
        if record.agent_id != agent_id:
            raise SessionException(f"session file {self._location(key)} is for agent_id {record.agent_id!r}, "
                                   f"not {agent_id!r}")
        return record

    @override
    def agent_location(self, session_id: str, agent_id: str) -> str:
        return self._location(f"{_agent_dir(session_id, agent_id)}/agent.json")

    @override
    def write_agent(self, session_id: str, record: AgentRecord) -> None:
        key = f"{_agent_dir(session_id, record.agent_id)}/agent.json"
        self._write(key, dump_record(record, self._location(key)))

    @override
    def list_agents(self, session_id: str) -> list[str]:
        names = self._list_dir(f"{_session_dir(session_id)}/agents")
        return sorted(name.removeprefix("agent_") for name in names if name.startswith("agent_"))

    @override
    def delete_agent(self, session_id: str, agent_id: str) -> None:
        self._delete_tree(_agent_dir(session_id, agent_id))

    # -- messages -------------------------------------------------------------------------------------

    def _message_key(self, session_id: str, agent_id: str, message_id: int) -> str:
        return f"{_messages_dir(session_id, agent_id)}/message_{message_id}.json"

    @override
    def read_message(self, session_id: str, agent_id: str, message_id: int) -> MessageRecord | None:
        key = self._message_key(session_id, agent_id, message_id)
        raw = self._read(key)
        if raw is None:
            return None
        record = parse_record(raw, MessageRecord, self._location(key))
        if record.message_id != message_id:
            raise SessionException(f"corrupted session file {self._location(key)}: it holds message_id "
                                   f"{record.message_id}, expected {message_id}")
        return record

    @override
    def write_message(self, session_id: str, agent_id: str, record: MessageRecord, *, new: bool = False) -> None:
        key = self._message_key(session_id, agent_id, record.message_id)
        data = dump_record(record, self._location(key))
        if not new:
            self._write(key, data)
        elif not self._create(key, data):
            raise SessionException(
                f"session {session_id!r}, agent {agent_id!r}: message {record.message_id} was already written "
                f"({self._location(key)}) by another writer of this agent; one process at a time may write an "
                "agent of a session (use another agent_id or session_id). Nothing stored was changed")

    def _create(self, key: str, data: bytes) -> bool:
        """Store ``data`` at ``key`` only if nothing is there; False if something is.

        Stores override this with an atomic create-if-absent; this default reads first (a write of the same
        instant can still slip through).
        """
        if self._read(key) is not None:
            return False
        self._write(key, data)
        return True

    def _message_ids(self, session_id: str, agent_id: str) -> list[int]:
        ids = []
        for name in self._list_dir(_messages_dir(session_id, agent_id)):
            match = _MESSAGE_FILE.fullmatch(name)
            if match:  # anything else (a temp file left by a crash) is not a message
                ids.append(int(match.group(1)))
        return sorted(ids)

    @override
    def list_messages(self, session_id: str, agent_id: str) -> list[MessageRecord]:
        ids = self._message_ids(session_id, agent_id)
        if ids != list(range(len(ids))):
            missing = sorted(set(range(max(ids) + 1)) - set(ids))
            raise SessionException(
                f"inconsistent session {self._location(_messages_dir(session_id, agent_id))}: "
                f"message file(s) {', '.join(f'message_{i}.json' for i in missing[:5])} missing")
        records = []
        for message_id in ids:
            record = self.read_message(session_id, agent_id, message_id)
            if record is None:  # deleted between the listing and the read
                raise SessionException(f"session file {self._location(self._message_key(session_id, agent_id, message_id))} "
                                       "disappeared while it was being read")
            records.append(record)
        return records

    @override
    def delete_messages(self, session_id: str, agent_id: str, from_id: int) -> None:
        # Highest first: a crash midway leaves a contiguous prefix, which still lists cleanly.
        for message_id in reversed(self._message_ids(session_id, agent_id)):
            if message_id >= from_id:
                self._delete(self._message_key(session_id, agent_id, message_id))

    # -- multi-agent ----------------------------------------------------------------------------------

    @override
    def read_multi_agent(self, session_id: str, multi_agent_id: str) -> MultiAgentRecord | None:
        key = _multi_agent_key(session_id, multi_agent_id)
        raw = self._read(key)
        return None if raw is None else parse_record(raw, MultiAgentRecord, self._location(key))

    @override
    def write_multi_agent(self, session_id: str, record: MultiAgentRecord) -> None:
        key = _multi_agent_key(session_id, record.multi_agent_id)
        self._write(key, dump_record(record, self._location(key)))
