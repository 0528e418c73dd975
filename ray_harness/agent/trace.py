"""``Trace``: one node of the per-cycle trace trees of ``EventLoopMetrics.traces`` (as Strands' ``Trace``).

Not OpenTelemetry (that is :mod:`ray_harness.telemetry`): a small in-memory record of what each event-loop
cycle did and how long it took — ``Cycle <n>`` with the children ``stream_messages`` (the model call),
``Tool: <name>`` (each tool that ran, in the order they finished) and ``Recursive call`` (from the end of the
cycle's tools to the end of the invocation, as Strands' recursive loop records it). Times are ``time.time()``
seconds.

The loop keeps a *note* per cycle — one list (:data:`CycleNote`) made of the clock reads it takes anyway (the
cycle's start and end, which also time ``cycle_durations``; the model call's end; each tool's start and end) —
and the ``Trace`` objects are built when ``traces`` is first read: building two trees per one-turn call cost
about 5 % of that call, and a record object with its own clock reads per cycle about 6 % (≈3 µs of 47 µs).
The model call starts when its cycle does, and the ``Recursive call`` when the cycle ends: the same reads.

The reads are ``time.perf_counter()``; a trace shows them as ``time.time()`` seconds, placed on the epoch once
per process (:data:`EPOCH_OFFSET`), so durations never jump with the wall clock.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray_harness.types.content import Message

__all__ = ("EPOCH_OFFSET", "CycleNote", "CycleRecord", "Trace")

_now = time.time
_clock = time.perf_counter

EPOCH_OFFSET = time.time() - time.perf_counter()
"""``time.time() - time.perf_counter()`` when the process started: a note's clock read plus this is its epoch time."""

CycleNote = list[Any]
"""What the loop notes about one cycle, as one list (a list literal costs a fraction of an object's ``__init__``):

``[number, start, model_called, stream_end, message, tools, end, recursing, recursion_end, built, built_tools]``
— the cycle's number over the agent's life; ``perf_counter()`` at its start (the model call's start too); whether
it called the model (a resumed tool batch does not); the model call's end and message (None while running,
cancelled or failed); the tools as ``(name, toolUseId, start, end, result message)``, in the order they
finished (None: none yet); the cycle's end; whether the invocation went on to another cycle (the ``Recursive
call``, from the cycle's end to the invocation's); its end; the ``Trace`` tree once built (then kept up to date by
each later note) and how many tools it holds.
"""
_NUMBER, _START, _MODEL, _STREAM_END, _MESSAGE, _TOOLS, _END, _RECURSING, _RECURSION_END, _BUILT, _BUILT_TOOLS = \
    range(11)


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


def new_note(number: int, start: float) -> CycleNote:
    """The note of cycle ``number``, which started at ``start`` (``perf_counter()``) and calls the model."""
    return [number, start, True, None, None, None, None, False, None, None, 0]


def note_no_model_call(note: CycleNote) -> None:
    """The cycle runs a resumed tool batch without calling the model (no ``stream_messages`` child)."""
    note[_MODEL] = False
    if note[_BUILT] is not None:
        _sync(note)


def note_model_end(note: CycleNote, message: Message) -> None:
    """The model call produced ``message`` (now)."""
    note[_STREAM_END] = _clock()
    note[_MESSAGE] = message
    if note[_BUILT] is not None:
        _sync(note)


def note_tool(note: CycleNote, name: str, tool_use_id: str, started: float, message: Message | None) -> None:
    """A tool that started at ``started`` (``perf_counter()``) finished now.

    ``message``: its result message; None when it paused on an interrupt.
    """
    tools = note[_TOOLS]
    if tools is None:
        note[_TOOLS] = tools = []
    tools.append((name, tool_use_id, started, _clock(), message))
    if note[_BUILT] is not None:
        _sync(note)


def note_cycle_end(note: CycleNote, ended: float, recursing: bool) -> None:
    """The cycle ended at ``ended`` (``perf_counter()``); ``recursing``: the invocation goes on to the next cycle."""
    note[_END] = ended
    note[_RECURSING] = recursing
    if note[_BUILT] is not None:
        _sync(note)


def note_recursion_end(note: CycleNote, ended: float) -> None:
    """The invocation ended at ``ended`` (``perf_counter()``), and the cycle's ``Recursive call`` with it."""
    if note[_RECURSING] and note[_RECURSION_END] is None:
        note[_RECURSION_END] = ended
        if note[_BUILT] is not None:
            _sync(note)


def note_trace(note: CycleNote) -> Trace:
    """The cycle's ``Trace`` tree (built on first call, then kept up to date by the notes)."""
    built: Trace | None = note[_BUILT]
    if built is None:
        note[_BUILT] = built = Trace(f"Cycle {note[_NUMBER]}", None, note[_START] + EPOCH_OFFSET)
        _sync(note)
    return built


def shipped_notes(notes: list[CycleNote]) -> list[tuple[Any, ...]]:
    """``notes`` as they cross to another process: epoch times (the clocks differ there), no tool results.

    Tool results stay behind: they are the agent's history, which travels on its own where it is needed; the
    trees are built where they are read (building them here cost ≈20 µs per pickled result).
    """
    return [(n[_NUMBER], _epoch(n[_START]), n[_MODEL], _epoch(n[_STREAM_END]), n[_MESSAGE],
             [(name, use_id, start + EPOCH_OFFSET, end + EPOCH_OFFSET, None) for name, use_id, start, end, _ in
              n[_TOOLS]] if n[_TOOLS] else None,
             _epoch(n[_END]), n[_RECURSING], _epoch(n[_RECURSION_END])) for n in notes]


def received_notes(shipped: list[tuple[Any, ...]]) -> list[CycleNote]:
    """The notes :func:`shipped_notes` sent, on this process's clock."""
    return [[number, _local(start), model, _local(stream_end), message,
             [(name, use_id, start_ - EPOCH_OFFSET, end - EPOCH_OFFSET, None) for name, use_id, start_, end, _ in
              tools] if tools else None,
             _local(end_), recursing, _local(recursion_end), None, 0]
            for number, start, model, stream_end, message, tools, end_, recursing, recursion_end in shipped]


def _epoch(value: float | None) -> float | None:
    return None if value is None else value + EPOCH_OFFSET


def _local(value: float | None) -> float | None:
    return None if value is None else value - EPOCH_OFFSET


class CycleRecord:
    """A cycle's note behind methods (``EventLoopMetrics.start_cycle_trace``); the loop writes the note directly.

    Times given and read are ``time.time()`` seconds.
    """

    __slots__ = ("note",)

    def __init__(self, note: CycleNote) -> None:
        self.note = note

    def stream_started(self) -> None:
        """The model call starts (the cycle's notes count it from the cycle's start)."""
        self.note[_MODEL] = True

    def stream_ended(self, message: Message) -> None:
        """The model call produced ``message``."""
        note_model_end(self.note, message)

    def tool_done(self, name: str, tool_use_id: str, seconds: float, message: Message | None) -> None:
        """A tool finished after ``seconds`` (``message``: its result message; None when it paused on an interrupt)."""
        note_tool(self.note, name, tool_use_id, _clock() - seconds, message)

    def end(self, end_time: float | None = None) -> None:
        """The cycle's tools are done (or it stopped); ``end_time``: when (``time.time()``), now when omitted."""
        note_cycle_end(self.note, _clock() if end_time is None else end_time - EPOCH_OFFSET, self.note[_RECURSING])

    def recurse(self) -> None:
        """The invocation goes on to the next cycle."""
        self.note[_RECURSING] = True
        if self.note[_BUILT] is not None:
            _sync(self.note)

    def end_recursion(self) -> None:
        """The invocation ended (its ``Recursive call`` with it)."""
        note_recursion_end(self.note, _clock())

    def trace(self) -> Trace:
        """The cycle's ``Trace`` tree (built on first call, then kept up to date)."""
        return note_trace(self.note)


def _sync(note: CycleNote) -> None:
    cycle: Trace = note[_BUILT]
    end = note[_END]
    cycle.end_time = None if end is None else end + EPOCH_OFFSET
    children = cycle.children
    if note[_MODEL]:
        if not children or children[0].name != "stream_messages":
            children.insert(0, Trace("stream_messages", cycle, note[_START] + EPOCH_OFFSET))
        stream_end = note[_STREAM_END]
        children[0].end_time = None if stream_end is None else stream_end + EPOCH_OFFSET
        children[0].message = note[_MESSAGE]
    elif children and children[0].name == "stream_messages":
        del children[0]
    tools = note[_TOOLS]
    if tools:
        for name, use_id, start, end_, message in tools[note[_BUILT_TOOLS]:]:
            tool = Trace(f"Tool: {name}", cycle, start + EPOCH_OFFSET, f"{name} - {use_id}",
                         {"toolUseId": use_id, "tool_name": name}, message)
            tool.end_time = end_ + EPOCH_OFFSET
            if children and children[-1].name == "Recursive call":
                children.insert(len(children) - 1, tool)
            else:
                children.append(tool)
        note[_BUILT_TOOLS] = len(tools)
    if note[_RECURSING] and end is not None:
        if not children or children[-1].name != "Recursive call":
            children.append(Trace("Recursive call", cycle, end + EPOCH_OFFSET))
        recursion_end = note[_RECURSION_END]
        children[-1].end_time = None if recursion_end is None else recursion_end + EPOCH_OFFSET
