"""``Trace``: one node of the per-cycle trace trees of ``EventLoopMetrics.traces`` (as Strands' ``Trace``).

Not OpenTelemetry (that is :mod:`ray_harness.telemetry`): a small in-memory record of what each event-loop
cycle did and how long it took — ``Cycle <n>`` with the children ``stream_messages`` (the model call),
``Tool: <name>`` (each tool that ran, in the order they finished) and ``Recursive call`` (from the end of the
cycle's tools to the end of the invocation, as Strands' recursive loop records it). Times are ``time.time()``
seconds.

The loop writes a :class:`CycleRecord` per cycle — a few floats — and the ``Trace`` objects are built when
``traces`` is first read: building two trees per one-turn call cost about 5 % of that call.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray_harness.types.content import Message

__all__ = ("CycleRecord", "Trace")

_now = time.time


class Trace:
    """One traced step: a name, start and end time, child steps, metadata and the message it produced.

    Args:
        name: What the step is (``"Cycle 3"``, ``"stream_messages"``, ``"Tool: search"``).
        parent_id: The parent trace's id (or the parent ``Trace``, whose id is then drawn only when read), if this
            is a child step.
        start_time: Start (``time.time()``); now when omitted.
        raw_name: A system-level name (a tool's ``"<name> - <toolUseId>"``).
        metadata: More context (a tool's ``toolUseId`` and ``tool_name``).
        message: The message the step produced.
    """

    # A lazily drawn id: a uuid4 per trace costs more than the rest of the trace.
    __slots__ = ("_id", "_parent", "children", "end_time", "message", "metadata", "name", "raw_name", "start_time")

    def __init__(
        self,
        name: str,
        parent_id: str | Trace | None = None,
        start_time: float | None = None,
        raw_name: str | None = None,
        metadata: dict[str, Any] | None = None,
        message: Message | None = None,
    ) -> None:
        self._id: str | None = None
        self.name = name
        self.raw_name = raw_name
        self._parent: Trace | str | None = parent_id
        self.start_time: float = start_time if start_time is not None else _now()
        self.end_time: float | None = None
        self.children: list[Trace] = []
        self.metadata: dict[str, Any] = metadata if metadata is not None else {}
        self.message = message

    @property
    def id(self) -> str:
        """A uuid4 string, drawn when first read."""
        if self._id is None:
            self._id = str(uuid.uuid4())
        return self._id

    @id.setter
    def id(self, value: str) -> None:
        self._id = value

    @property
    def parent_id(self) -> str | None:
        """The parent trace's id; None for a cycle."""
        parent = self._parent
        return parent.id if isinstance(parent, Trace) else parent

    @parent_id.setter
    def parent_id(self, value: str | None) -> None:
        self._parent = value

    def end(self, end_time: float | None = None) -> None:
        """Mark the step done at ``end_time`` (now when omitted)."""
        self.end_time = end_time if end_time is not None else time.time()

    def add_child(self, child: Trace) -> None:
        """Append ``child`` to ``children``."""
        self.children.append(child)

    def duration(self) -> float | None:
        """Seconds from start to end; None while the step has not ended."""
        return None if self.end_time is None else self.end_time - self.start_time

    def add_message(self, message: Message) -> None:
        """Set the message the step produced."""
        self.message = message

    def to_dict(self) -> dict[str, Any]:
        """The trace and its children as a dict (Strands' keys: ``id``, ``name``, ..., ``duration``, ``children``)."""
        return {
            "id": self.id,
            "name": self.name,
            "raw_name": self.raw_name,
            "parent_id": self.parent_id,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "duration": self.duration(),
            "children": [child.to_dict() for child in self.children],
            "metadata": self.metadata,
            "message": self.message,
        }

    def __repr__(self) -> str:
        return f"Trace(name={self.name!r}, duration={self.duration()!r}, children={len(self.children)})"

    def __getstate__(self) -> dict[str, Any]:
        # The id is drawn before the trace leaves the process, so both sides name it alike.
        return {"id": self.id, **{name: getattr(self, name) for name in self.__slots__ if name != "_id"}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._id = state.pop("id")
        for name, value in state.items():
            setattr(self, name, value)


class CycleRecord:
    """What the loop notes about one cycle; :meth:`trace` turns it into the cycle's ``Trace`` tree.

    Once built, the tree is kept and follows later notes (a tool finishing, the invocation ending), so a trace
    read mid-run is the same object when read again.
    """

    __slots__ = (
        "_built",
        "_built_tools",
        "end_time",
        "message",
        "number",
        "recursion",
        "start_time",
        "stream",
        "tools",
    )

    def __init__(self, number: int) -> None:
        self.number = number
        self.start_time = _now()
        self.end_time: float | None = None
        self.stream: list[float | None] | None = None  # [start, end] of the model call
        self.message: Message | None = None
        self.tools: list[tuple[str, str, float, float, Message | None]] | None = None
        self.recursion: list[float | None] | None = None  # [start, end] of the "Recursive call"
        self._built: Trace | None = None
        self._built_tools = 0

    def stream_started(self) -> None:
        """The model call starts."""
        self.stream = [_now(), None]
        if self._built is not None:
            self._sync()

    def stream_ended(self, message: Message) -> None:
        """The model call produced ``message``."""
        if self.stream is not None:
            self.stream[1] = _now()
            self.message = message
            if self._built is not None:
                self._sync()

    def tool_done(self, name: str, tool_use_id: str, seconds: float, message: Message | None) -> None:
        """A tool finished after ``seconds`` (``message``: its result message; None when it paused on an interrupt)."""
        end = _now()
        if self.tools is None:
            self.tools = []
        self.tools.append((name, tool_use_id, end - seconds, end, message))
        if self._built is not None:
            self._sync()

    def end(self, end_time: float | None = None) -> None:
        """The cycle's tools are done (or it stopped)."""
        self.end_time = _now() if end_time is None else end_time
        if self._built is not None:
            self._sync()

    def recurse(self) -> None:
        """The invocation goes on to the next cycle."""
        self.recursion = [_now(), None]
        if self._built is not None:
            self._sync()

    def end_recursion(self) -> None:
        """The invocation ended (its ``Recursive call`` with it)."""
        if self.recursion is not None and self.recursion[1] is None:
            self.recursion[1] = _now()
            if self._built is not None:
                self._sync()

    def trace(self) -> Trace:
        """The cycle's ``Trace`` tree (built on first call, then kept up to date)."""
        if self._built is None:
            self._built = Trace(f"Cycle {self.number}", None, self.start_time)
            self._sync()
        return self._built

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The notes only, as one tuple: the tree is built where it is read (building it here cost ≈20 µs per
        # pickled result, paid by every node result crossing processes), so trace ids are drawn per process. Tool
        # results stay behind: they are the agent's history, which travels on its own where it is needed.
        tools = [(name, use_id, start, end, None) for name, use_id, start, end, _ in self.tools] if self.tools else None
        return _shipped_record, (self.number, self.start_time, self.end_time, self.stream, self.message, tools,
                                 self.recursion)

    def _sync(self) -> None:
        cycle = self._built
        assert cycle is not None
        cycle.end_time = self.end_time
        children = cycle.children
        stream = self.stream
        if stream is not None:
            if not children or children[0].name != "stream_messages":
                children.insert(0, Trace("stream_messages", cycle, stream[0]))
            children[0].end_time, children[0].message = stream[1], self.message
        for name, use_id, start, end, message in (self.tools or [])[self._built_tools :]:
            tool = Trace(
                f"Tool: {name}", cycle, start, f"{name} - {use_id}", {"toolUseId": use_id, "tool_name": name}, message
            )
            tool.end_time = end
            children.append(tool)
            self._built_tools += 1
        recursion = self.recursion
        if recursion is not None:
            if not children or children[-1].name != "Recursive call":
                children.append(Trace("Recursive call", cycle, recursion[0]))
            children[-1].end_time = recursion[1]


def _shipped_record(number: int, start_time: float, end_time: float | None, stream: list[float | None] | None,
                    message: Message | None, tools: list[tuple[str, str, float, float, Message | None]] | None,
                    recursion: list[float | None] | None) -> CycleRecord:
    """A :class:`CycleRecord` unpickled in another process (see ``CycleRecord.__reduce__``)."""
    record = CycleRecord.__new__(CycleRecord)
    record.number, record.start_time, record.end_time, record.stream = number, start_time, end_time, stream
    record.message, record.tools, record.recursion = message, tools, recursion
    record._built, record._built_tools = None, 0
    return record
