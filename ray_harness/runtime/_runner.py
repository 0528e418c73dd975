"""``AgentRunner``: one agent inside an actor process (dedicated actor or a slot of a host).

It adds to the core agent what an actor needs and the agent does not do itself:

* **Ordered invocations.** Calls queue in the order their caller made them (a
  call's :class:`~ray_harness.runtime._order.Ticket` passes the
  :class:`~ray_harness.runtime._order.ArrivalGate`, then an ``asyncio.Lock``,
  which is FIFO); ``mode="throw"`` raises ``ConcurrencyException`` instead,
  like an in-process ``Agent``.
* **Cancel by invocation id**, accepted before the invocation starts (a cancel
  that overtakes its run still lands) and from another thread (Ray runs the
  ``cancel`` method in its own concurrency group).
* **Snapshots and idempotent retries** (when given a store). After every message
  added to the history and every completed tool result the runner writes the
  agent's :class:`~ray_harness.agent.AgentSnapshot`, the tool results of the
  running batch and a journal of invocation ids. A restarted actor loads it;
  when Ray retries the interrupted call (same invocation id) the runner continues
  that invocation instead of starting it again: completed tools are not re-run,
  only the tool that was running when the process died (at-least-once for that
  one), and a finished invocation returns its stored result.
* **Journal policy.** ``journal="every_step"`` (a dedicated agent) writes all of the above from the start of
  each invocation. ``journal="side_effects"`` (a Graph/Swarm node slot, whose caller keeps the state it had
  before the run) writes nothing until the invocation's first tool result, then every step of that invocation
  as above: a run without tools costs no write, and re-running it after a crash re-runs only its model call,
  which is at-least-once anyway. A re-sent invocation finds its journal with :meth:`AgentRunner.adopt`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable
from typing import Any, Literal

from ray_harness._runtimes import EventFilter
from ray_harness.agent.agent import Agent
from ray_harness.agent.result import AgentResult
from ray_harness.agent.snapshot import AgentSnapshot, SnapshotDelta, take_delta, take_snapshot
from ray_harness.hooks.events import MessageAddedEvent
from ray_harness.hooks.registry import HookOrder
from ray_harness.interrupts import Interrupt
from ray_harness.runtime import _asyncgens as asyncgens
from ray_harness.runtime._early import EarlyCancels
from ray_harness.runtime._idle_gc import idle_collector
from ray_harness.runtime._order import ArrivalGate
from ray_harness.runtime._placement import placed
from ray_harness.runtime._signal import CancelSignal
from ray_harness.runtime._store import FileAgentStore
from ray_harness.runtime._telemetry import prepare_actor_process
from ray_harness.runtime._wire import (
    EventItem,
    InvokeRequest,
    ResultItem,
    SlotMissItem,
    SnapshotItem,
    node_state_fields,
    wanted,
)
from ray_harness.telemetry.propagation import attached
from ray_harness.telemetry.runs import current_tags, scoped
from ray_harness.types.content import ToolResult
from ray_harness.types.exceptions import ConcurrencyException, RayHarnessError

__all__ = ("RESTORE_INTERRUPT_ID", "AgentRunner", "ConcurrentInvocationMode", "JournalPolicy", "SlotMiss")

logger = logging.getLogger(__name__)

ConcurrentInvocationMode = Literal["queue", "throw"]
JournalPolicy = Literal["every_step", "side_effects"]
RESTORE_INTERRUPT_ID = "v1:ray_harness_restore:actor_restart"
_JOURNAL_VERSION = 2  # 2: the agent's state is an AgentSnapshot
_KEPT_RESULTS = 16  # finished invocations remembered for idempotent retries
_KEPT_CANCELS = 4096


_UNSCOPED = contextlib.nullcontext()


def _run_scope(invocation_id: str) -> contextlib.AbstractContextManager[None]:
    """``scoped({"run": invocation_id})``: the invocation is its own run unless its call brought one.

    A brought run tag wins over it (an evaluation row's: the evaluation), so then the scope would change nothing.
    """
    return _UNSCOPED if current_tags().get("run") else scoped({"run": invocation_id})


class SlotMiss(RayHarnessError):
    """Raised by a host's ``prepare``: the slot cannot run the request as sent; ``item`` says why."""

    def __init__(self, item: SlotMissItem) -> None:
        super().__init__(f"{item.reason} slot {item.agent_key!r}")
        self.item = item


class AgentRunner:
    """Runs invocations of one agent: ordering, cancel, snapshots and retries (see module docstring)."""

    def __init__(self, agent: Agent, *, mode: str = "queue", store: FileAgentStore | None = None,
                 key: str | None = None, journal: JournalPolicy = "every_step") -> None:
        if mode not in ("queue", "throw"):
            raise ValueError(f"concurrent_invocation_mode must be 'queue' or 'throw', got {mode!r}")
        if journal not in ("every_step", "side_effects"):
            raise ValueError(f"journal must be 'every_step' or 'side_effects', got {journal!r}")
        if store is not None and not key:
            raise ValueError("a runner with a store needs a key")
        self.agent = agent
        self.mode = mode
        self._store = store
        self._key = key or ""
        self._every_step = journal == "every_step"
        self._journaling = False  # the running invocation writes its steps (always, with "every_step")
        self._lock = asyncio.Lock()
        self._gate = ArrivalGate()
        self._journal: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._batch_results: dict[str, ToolResult] = {}
        self._running: str | None = None
        self._signals: dict[str, threading.Event] = {}
        self._early_cancels = EarlyCancels(_KEPT_CANCELS)
        self._guard = threading.Lock()  # cancel() arrives on another thread
        if store is not None:
            agent.hooks.add_callback(MessageAddedEvent, self._on_message_added, HookOrder.SDK_LAST)

    # -- invocations --------------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    async def invoke(self, request: InvokeRequest) -> AgentResult:
        """Run ``request`` for its result only (the agent runs quiet)."""
        result: AgentResult | None = None
        async for event in self.stream(request, events="result"):
            if event.get("type") == "result":
                result = event["result"]
        if result is None:  # pragma: no cover - the agent loop always ends with a result event
            raise RuntimeError("agent invocation ended without a result")
        return result

    async def stream(self, request: InvokeRequest, *, events: EventFilter | None = None,
                     prepare: Callable[[], None] | None = None) -> AsyncGenerator[dict[str, Any], None]:
        """Run (or continue, or replay) ``request``'s invocation; yields the agent's events the request wants.

        ``events`` overrides the request's event filter (:meth:`invoke` wants the result only); with
        ``"result"`` the agent runs quiet and produces no per-chunk events at all. ``prepare`` is called when the
        invocation's turn comes (in call order, before it runs): a host brings a node slot in line there, and may
        raise :class:`SlotMiss` instead.
        """
        prepare_actor_process()
        asyncgens.untrack_here()
        idle_collector.begin()
        try:
            # The caller's span is the parent of this invocation's spans; its metrics carry the caller's run tags;
            # a Graph/Swarm the agent runs (a pooled row, a tool) runs in this process.
            with attached(request.trace_context), _run_scope(request.invocation_id), placed("in_process"):
                run = self._stream(request, events or request.events, prepare)
                try:
                    async for event in run:
                        yield event
                finally:
                    await run.aclose()  # closed by its caller: the invocation ends before this returns (_stream)
        finally:
            idle_collector.end()  # the process's last invocation in flight ended: a cheap young collection

    async def wire_stream(self, request: InvokeRequest, prepare: Callable[[], None] | None = None,
                          state: Callable[[], AgentSnapshot | SnapshotDelta] | None = None
                          ) -> AsyncGenerator[EventItem | ResultItem | SnapshotItem | SlotMissItem, None]:
        """:meth:`stream` as wire items; with ``request.snapshot`` the agent's snapshot rides beside the result.

        A failed run sends its snapshot alone just before the exception (the run advanced the model and rolled
        the history back). Items are built unvalidated: they hold this agent's own events. A :class:`SlotMiss`
        raised by ``prepare`` is sent as its item instead of a run. ``state()`` (default: ``agent.snapshot()``)
        is what travels as the agent's state: a node slot sends a ``SnapshotDelta`` when it can.
        """
        take = state or self.agent.snapshot
        events = self.stream(request, prepare=prepare)
        try:
            async for event in events:
                if event.get("type") == "result":
                    # Control data beside the event, never inside it; one Ray object for both (a streamed item
                    # costs a round trip per node).
                    fields = node_state_fields(take()) if request.snapshot else {}
                    yield ResultItem.model_construct(result=event["result"], **fields)
                else:
                    yield EventItem.model_construct(event=event)
        except SlotMiss as miss:
            yield miss.item
        except Exception:
            if request.snapshot:
                yield SnapshotItem.model_construct(**node_state_fields(take()))
            raise
        finally:
            await events.aclose()

    async def _stream(self, request: InvokeRequest, events: EventFilter, prepare: Callable[[], None] | None = None
                      ) -> AsyncGenerator[dict[str, Any], None]:
        invocation_id, prompt = request.invocation_id, request.prompt
        await self._gate.admit(request.ticket)  # then straight to the lock, without yielding: it queues in order
        if self.mode == "throw" and self._lock.locked():
            raise ConcurrencyException(
                f"agent {self.agent.name!r} is already running an invocation "
                "(concurrent_invocation_mode='throw'); wait for it or use another agent"
            )
        async with self._lock:
            if prepare is not None:
                prepare()  # may raise SlotMiss: nothing ran
            signal = self._start(invocation_id)
            try:
                entry = self._journal.get(invocation_id)
                if entry is not None and entry["status"] == "done":
                    yield {"type": "result", "result": entry["result"]}
                    return
                # A continued invocation already wrote its journal: it goes on writing every step.
                self._journaling = self._every_step or entry is not None
                if entry is None:
                    self._journal[invocation_id] = {"status": "running", "start": len(self.agent.messages)}
                    self._step()
                else:
                    prompt, finished = self._continuation(entry, prompt)
                    if finished is not None:
                        self._finish(invocation_id, finished)
                        yield {"type": "result", "result": finished}
                        return
                run = self._run(invocation_id, prompt, request.agent_options(), signal, events)
                try:
                    async for event in run:
                        yield event
                finally:
                    # A caller that stops reading closes this generator only: the run must end before the lock
                    # is free (left to the loop's finalizer, it ended after the next invocation's turn began).
                    await run.aclose()
            finally:
                with self._guard:
                    self._running = None
                    self._signals.pop(invocation_id, None)

    async def _run(self, invocation_id: str, prompt: Any, options: dict[str, Any], signal: threading.Event,
                   events: EventFilter) -> AsyncGenerator[dict[str, Any], None]:
        try:
            source = getattr(self.agent, "_quiet_stream", None) if events == "result" else None
            stream = (source or self.agent.stream_async)(prompt, cancel_signal=signal, **options)
            try:
                async for event in stream:
                    kind = event.get("type")
                    if kind == "tool_result" and self._store is not None:
                        result = event["tool_result"]
                        self._batch_results[result["toolUseId"]] = result
                        self._journaling = True  # a side effect happened: from here every step is kept
                        self._step()
                    elif kind == "result":
                        self._finish(invocation_id, event["result"])
                    if wanted(event, events):
                        yield event
            finally:
                await stream.aclose()
        except BaseException:
            # The agent rolled its history back (or kept a max_tokens partial answer, as Strands); forget the
            # invocation so a new call starts from that history.
            if self._journal.pop(invocation_id, None) is not None:
                self._step()
            raise

    def drop_result(self, invocation_id: str) -> None:
        """Drop ``invocation_id``'s journal entry: a request under that id runs again (the agent was restored)."""
        self._journal.pop(invocation_id, None)

    def _start(self, invocation_id: str) -> threading.Event:
        with self._guard:
            signal = CancelSignal()
            if self._early_cancels.take(invocation_id):
                signal.set()
            self._running = invocation_id
            self._signals[invocation_id] = signal
            return signal

    def _finish(self, invocation_id: str, result: AgentResult) -> None:
        start = self._journal.get(invocation_id, {}).get("start")
        self._journal[invocation_id] = {"status": "done", "result": result, "start": start}
        self._journal.move_to_end(invocation_id)
        done = [key for key, entry in self._journal.items() if entry["status"] == "done"]
        for key in done[:-_KEPT_RESULTS]:
            del self._journal[key]
        self._step()

    # -- cancel -----------------------------------------------------------------------------------------

    def cancel(self, invocation_id: str | None = None, *, message: str | None = None,
               after_current_tools: bool = False) -> bool:
        """Cancel the running invocation (or ``invocation_id``, even before it starts). Thread-safe.

        Returns whether an invocation was running (or is now marked to stop when it starts).
        """
        with self._guard:
            running = self._running
            if invocation_id is not None and invocation_id != running:
                if invocation_id not in self._signals:
                    self._early_cancels.remember(invocation_id)
                return False
            if running is None:
                return False
            if not after_current_tools:
                self._signals[running].set()  # covers the moment before the agent registers its invocation
        self.agent.cancel(message=message, after_current_tools=after_current_tools)
        return True

    # -- snapshots --------------------------------------------------------------------------------------

    def _on_message_added(self, event: MessageAddedEvent) -> None:
        # The message now holds the batch's results (or starts a new batch): the side list is obsolete.
        self._batch_results = {}
        self._step()

    def journal_entry(self) -> dict[str, Any]:
        """Return what the store keeps: the agent's state, the running batch's results, the journal.

        The state is the agent's :class:`AgentSnapshot`; a node slot (``journal="side_effects"``) keeps a
        :class:`SnapshotDelta` over the messages its running invocation started from instead (``"base"`` names
        that invocation), so a write costs what the run added, not the whole history: the slot it is adopted
        into was built from the caller's copy, which holds those messages.

        The entry holds the agent's own messages and model state, not copies: serialize it before the agent
        runs on (``persist`` does).
        """
        state: AgentSnapshot | SnapshotDelta
        base = None if self._every_step else self._running
        start = self._journal.get(base, {}).get("start") if base is not None else None
        # Not copies of the agent's messages and model state: persist() pickles the entry before the agent
        # runs on, and copying them at every step cost more than the write (the history and a recording
        # model's state grow with every call).
        if start is not None and start <= len(self.agent.messages):
            state = take_delta(self.agent, start, copy=False)
        else:
            state, base = take_snapshot(self.agent, copy=False), None
        return {"version": _JOURNAL_VERSION, "agent": state, "base": base, "batch_results": self._batch_results,
                "journal": self._journal, "order": self._gate.positions()}

    def _step(self) -> None:
        """Journal a step of the running invocation, when its policy keeps this one (see the module docstring)."""
        if self._journaling:
            self.persist()

    def persist(self) -> None:
        if self._store is None:
            return
        try:
            self._store.save(self._key, self.journal_entry())
        except Exception:
            # A failed snapshot must not fail the run: the cost is a longer replay after a crash.
            logger.exception("key=<%s> | could not write the agent snapshot", self._key)

    def restore(self) -> bool:
        """Load the last snapshot into the agent; ``False`` when there is none (or of an older layout)."""
        entry = self._load()
        if entry is None:
            return False
        self._apply(entry)
        return True

    def adopt(self, invocation_id: str) -> bool:
        """Load the journal a dead process left when it names ``invocation_id`` (a re-sent invocation).

        A journal of other invocations is left alone (``False``): the caller's copy the runner was built from is
        newer, and the next write replaces it.
        """
        entry = self._load()
        if entry is None or invocation_id not in entry["journal"]:
            return False
        if entry.get("base") not in (None, invocation_id):  # a delta over another invocation's start
            return False
        try:
            self._apply(entry)
        except ValueError as error:  # the copy it was built from is not the one the run started from
            logger.warning("key=<%s>, run=<%s>, error=<%s> | journal not adopted: the run starts again", self._key,
                           invocation_id, error)
            return False
        return True

    def _load(self) -> dict[str, Any] | None:
        if self._store is None:
            return None
        entry = self._store.load(self._key)
        if entry is None:
            return None
        if entry.get("version") != _JOURNAL_VERSION:
            logger.warning("key=<%s>, version=<%s> | agent snapshot of another layout ignored", self._key,
                           entry.get("version"))
            return None
        return entry

    def _apply(self, entry: dict[str, Any]) -> None:
        self.agent.restore(entry["agent"])
        self._batch_results = dict(entry["batch_results"])
        self._journal = OrderedDict(entry["journal"])
        self._gate.restore(entry.get("order", {}))

    def restarted_without_journal(self) -> None:
        """Note that this process replaces one that died and there was nothing to restore (see ``ArrivalGate.lost``)."""
        self._gate.lost()

    def journal_path(self) -> str | None:
        """Where the journal is (``None``: no store, or nothing written yet)."""
        if self._store is None:
            return None
        path = self._store.path(self._key)
        return str(path) if path.exists() else None

    def forget(self) -> None:
        """Delete the journal and write no more.

        A run still in flight (its actor is about to be killed, or its slot was dropped) must not write it back
        between the delete and the kill.
        """
        store, self._store = self._store, None
        if store is not None:
            store.delete(self._key)

    def _continuation(self, entry: dict[str, Any], prompt: Any) -> tuple[Any, AgentResult | None]:
        """Decide what to run for an invocation that a dead process left half done.

        Returns ``(prompt, None)`` to run, or ``(None, result)`` when the invocation had already
        finished its last turn.
        """
        agent = self.agent
        if len(agent.messages) <= entry["start"]:
            return prompt, None  # nothing of it reached the history: run it as asked
        last = agent.messages[-1]
        if last["role"] != "assistant":
            return None, None  # the prompt or a tool-result message is last: the model answers next
        use_ids = [block["toolUse"]["toolUseId"] for block in last["content"] if "toolUse" in block]
        if not use_ids:
            return None, AgentResult(stop_reason="end_turn", message=last, metrics=agent.event_loop_metrics,
                                     state=agent.state)
        # A tool batch was running. Resume it through the core's interrupt-resume path, which runs only the
        # tools that have no result yet and keeps the completed ones in place.
        state = agent.interrupt_state
        done = {r["toolUseId"]: r for r in state.context.get("tool_results", [])} if state.activated else {}
        done.update({key: value for key, value in self._batch_results.items() if key in use_ids})
        state.interrupts[RESTORE_INTERRUPT_ID] = Interrupt(
            id=RESTORE_INTERRUPT_ID, name="ray_harness_restore", reason="actor restarted", response=True
        )
        # Other keys of an interrupted batch's context stay (agent-as-tool keeps paused child turns there).
        kept = {key: value for key, value in state.context.items()
                if key not in ("tool_use_message", "tool_results")} if state.activated else {}
        state.context = {**kept, "tool_use_message": last, "tool_results": list(done.values())}
        state.activate()
        return [{"interruptResponse": {"interruptId": RESTORE_INTERRUPT_ID, "response": True}}], None
