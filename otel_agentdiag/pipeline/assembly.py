"""``TraceAssembler``: hold the trace another instrumentation started until its root ends, then make it true to the run.

Pipeline (design.md §2): sequencer → **assembler** → each destination's batch processor (adapters → redact →
export). The batch processors stay on the provider; the spans of the traces the assembler holds or has handed on
(:attr:`TraceAssembler.routes`) do not queue there when they end: the first branch hands them to the assembler,
which gives them back to every branch (``enqueue``) when their trace is handed on.

- A trace whose local root is ours (it carries ``agentdiag.kind`` when it starts), or any span of such a trace,
  queues at once: one dict lookup per span in the sequencer and in each batch processor, no call, nothing held.
- A trace whose local root another instrumentation started (OpenInference, OpenLLMetry, a framework's own
  output) is *assembled*: the sequencer numbers none of its spans when they start (it tells the assembler their
  order); the assembler holds them as they end, and when the root ends:

  1. **its session** is the first conversation id any of its spans names, in start order (its own
     ``gen_ai.conversation.id`` or ``session.id``, set at start or later, or the conversation of a run of ours it
     started in). Every span of the trace without one of its own is filed there (recorded beside it, as
     ``_internal/ids.py`` does for runs of ours), so one run is never split between its conversation and "(no
     session)", and an id an instrumentation sets only when a span ends never leaves a gap;
  2. **its loop** is rebuilt (:mod:`otel_agentdiag.pipeline.loop`): duplicate model and tool calls and wrapper
     runs become steps, iterations are added where the instrumentation reports none;
  3. **its numbers** are given now, per session, in start order (``agentdiag.observer.id``,
     ``agentdiag.sequence``), the added iterations included; a span of the trace that started but has not ended
     keeps a number reserved for it, so it leaves a gap until it ends, as a span numbered at start would.

  A span of the trace that ends after its root (AutoGen closes an async generator's span after its caller's) is
  waited for, at most :data:`DEFAULT_GRACE_S`, so the rebuild sees the whole trace.

  Then the spans, copies where anything changed, go to every destination in one go. Both destinations see the
  same trace (same ids, numbers and iterations): the assembly runs once, before the fan-out.

Why here, and not on each destination's worker or in the store: the numbers are taken from the sequencer, once
for every destination (two workers would number an added iteration twice), and what is rebuilt must reach OTLP as
well as the store (``show``, ``status``, the viewer, the Jaeger API, exports and Jaeger or Tempo behind the
Collector all read the same spans). The cost on the thread that ends a span: a dict lookup for spans of our own
traces; an append under a lock for held ones. The rebuild (linear in the trace's spans) runs on the assembler's
own worker thread, started on first use: a process that only ever sees its own traces never starts it.

Bounds: at most :data:`DEFAULT_MAX_TRACES` traces held and :data:`DEFAULT_MAX_SPANS` spans per trace; beyond either,
or :data:`DEFAULT_MAX_AGE_S` after a held trace's first span ended, that trace is handed on as it stands (numbered
and filed, its loop rebuilt from what has ended); the spans of it that end later go on one by one, numbered under
its session. ``force_flush`` and ``shutdown`` hand on every held trace first. Nothing is dropped here, so nothing
here needs counting: every span reaches the batch processors, which count their own drops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag._internal.fork import reinit_after_fork
from otel_agentdiag._internal.sdk import span_attributes
from otel_agentdiag._internal.spans import with_attributes
from otel_agentdiag.pipeline.adapters.hints import note_step
from otel_agentdiag.pipeline.batching import AccountingBatchSpanProcessor
from otel_agentdiag.pipeline.loop import Plan, plan_trace
from otel_agentdiag.pipeline.sequence import SessionSequencer, session_key

if TYPE_CHECKING:
    from otel_agentdiag.content.recorder import ContentRecorder

__all__ = ["DEFAULT_GRACE_S", "DEFAULT_MAX_AGE_S", "DEFAULT_MAX_SPANS", "DEFAULT_MAX_TRACES", "TraceAssembler"]

_logger = logging.getLogger(__name__)

DEFAULT_MAX_TRACES = 256
DEFAULT_MAX_SPANS = 4_096
DEFAULT_MAX_AGE_S = 300.0
DEFAULT_GRACE_S = 2.0
"""Seconds a trace whose root ended waits for a span of it still open (a child that ends after its parent)."""
_MAX_CLOSED = 4_096
"""Traces handed on, remembered (their session and reserved numbers) for their spans that end later."""


@dataclass
class _Held:
    """One trace being assembled."""

    roots: set[int] = field(default_factory=set)
    """Span ids of its local roots still open (usually one)."""
    order: dict[int, int] = field(default_factory=dict)
    """Span id → the order it started in (0, 1, ...): its number's place, once the trace is numbered."""
    session: str | None = None
    """The first session a span of the trace named when it started (its own id, or a run of ours around it)."""
    spans: list[ReadableSpan] = field(default_factory=list)
    first_end: float = 0.0
    rooted_end: float = 0.0
    """When its (last) root ended while a span of it was still open (monotonic seconds), else 0."""


@dataclass
class _Closed:
    """A trace handed on: where its later spans are filed and numbered."""

    session: str | None
    reserved: list[int]


class TraceAssembler:
    """See the module doc. ``branches``: the destinations' batch processors, in order: the first hands the spans
    of held traces in (:meth:`intake`), and every one takes them back when their trace is handed on. Never raises
    into the thread that ends a span."""

    def __init__(
        self,
        branches: Sequence[AccountingBatchSpanProcessor],
        sequencer: SessionSequencer,
        *,
        content: ContentRecorder | None = None,
        max_traces: int = DEFAULT_MAX_TRACES,
        max_spans: int = DEFAULT_MAX_SPANS,
        max_age_s: float = DEFAULT_MAX_AGE_S,
        grace_s: float = DEFAULT_GRACE_S,
    ) -> None:
        if max_traces < 1 or max_spans < 1 or not max_age_s > 0 or not grace_s > 0:
            raise ValueError("max_traces and max_spans must be at least 1, max_age_s and grace_s positive")
        self.grace_s = grace_s
        self.branches = tuple(branches)
        self.sequencer = sequencer
        self.content = content
        self.max_traces = max_traces
        self.max_spans = max_spans
        self.max_age_s = max_age_s
        self.held: dict[int, _Held] = {}
        """Traces being held, by trace id (the sequencer reads it: their spans are numbered here)."""
        self._closed: dict[int, _Closed] = {}
        self.routes: dict[int, bool] = {}
        """Trace ids held or handed on: the batch processors route their ended spans to :meth:`intake`."""
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._queue: deque[tuple[int, _Held | None, ReadableSpan | None]] = deque()
        """What the worker hands on, in order: a trace (its id and what was held) or one later span of one."""
        self._pending = 0
        self._waiting: dict[int, float] = {}
        """Traces whose roots ended with a span of theirs still open: trace id → when the grace ends."""
        self._worker: threading.Thread | None = None
        self._stopped = False
        self.assembled = 0
        """Traces handed on after assembly."""
        self.rebuilt = 0
        """Of those, traces whose loop the rebuild changed."""
        self.early = 0
        """Traces handed on before their root ended (a bound, ``force_flush`` or ``shutdown``)."""
        self.failed = 0
        """Traces whose rebuild raised: handed on numbered and filed, unchanged otherwise."""
        reinit_after_fork(self._at_fork_reinit)
        sequencer.assembler = self
        for index, branch in enumerate(self.branches):  # the first hands the routed spans in; the others skip them
            branch.route(self.routes, self.intake if index == 0 else None)

    def _at_fork_reinit(self) -> None:
        """In a forked child: fresh state (the parent's traces are the parent's) and no worker until needed."""
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self.held = {}
        self._closed = {}
        self.routes.clear()  # the batch processors keep this very mapping
        self._queue = deque()
        self._pending = 0
        self._waiting = {}
        self._worker = None

    # -- the sequencer's side (on_start, on the thread that starts the span) -----------------------------------
    def started(self, context: Any, *, root: bool, session: str | None) -> None:
        """A span started in a held trace, or (``root``) another instrumentation's local root, whose trace is then
        held: its place in the start order is kept, and the first ``session`` named at a start is the trace's
        until an ended span says otherwise. A span of a trace handed on meanwhile is numbered when it ends."""
        trace_id, span_id = context.trace_id, context.span_id
        with self._lock:
            held = self.held.get(trace_id)
            if held is None:
                if not root:
                    return
                if len(self.held) >= self.max_traces:
                    self._hand_on(next(iter(self.held)), early=True)
                held = self.held[trace_id] = _Held()
                self.routes[trace_id] = True
            if root:
                held.roots.add(span_id)
            held.order[span_id] = len(held.order)
            if held.session is None:
                held.session = session

    def intake(self, span: ReadableSpan) -> None:
        """An ended span of a routed trace (held, or handed on already), from the first branch's ``on_end``."""
        ctx = span.context
        trace_id = ctx.trace_id if ctx is not None else 0
        try:
            with self._lock:
                held = self.held.get(trace_id)
                if held is None:
                    self._enqueue(trace_id, None, span)  # a later span of a trace handed on: after it, in order
                    return
                if not held.spans:
                    held.first_end = time.monotonic()
                held.spans.append(span)
                held.roots.discard(ctx.span_id)  # type: ignore[union-attr]
                if len(held.spans) >= self.max_spans:
                    self._hand_on(trace_id, early=True)
                elif not held.roots:
                    if len(held.spans) >= len(held.order):
                        self._hand_on(trace_id, early=False)  # complete: every span it started has ended
                    elif held.rooted_end == 0.0:
                        # A span of it still open although its root ended (an async generator closed after its
                        # caller's block): its loop is rebuilt with it when it ends, or after a short grace.
                        held.rooted_end = time.monotonic()
                        self._waiting[trace_id] = held.rooted_end + self.grace_s
                        self._wake_worker()
                else:
                    oldest = next(iter(self.held))
                    first = self.held[oldest]
                    if first.spans and time.monotonic() - first.first_end > self.max_age_s:
                        self._hand_on(oldest, early=True)
        except Exception as exc:  # noqa: BLE001 - never raise into the agent; the span still goes on
            log_internal_error("holding a span", exc)
            self._forward(span)

    # -- handing on ----------------------------------------------------------------------------------------
    def _hand_on(self, trace_id: int, *, early: bool) -> None:
        """Queue the held trace for the worker (called under the lock): from now on its later spans queue
        behind it, so they reach the branches after it, numbered in its session."""
        held = self.held.pop(trace_id)
        self._waiting.pop(trace_id, None)
        if early:
            self.early += 1
        self._closed.pop(trace_id, None)
        self._closed[trace_id] = _Closed(held.session, [])
        if len(self._closed) > _MAX_CLOSED:
            forgotten = next(iter(self._closed))
            del self._closed[forgotten]
            if forgotten not in self.held:
                self.routes.pop(forgotten, None)  # its spans queue directly again (numbered at start)
        if held.session is not None:  # the spans the trace starts from now on: numbered there at start
            self.sequencer.file_trace(trace_id, held.session)
        self._enqueue(trace_id, held, None)

    def _enqueue(self, trace_id: int, held: _Held | None, span: ReadableSpan | None) -> None:
        """(Under the lock.) One item for the worker, started on first use."""
        self._queue.append((trace_id, held, span))
        self._pending += 1
        self._wake_worker()

    def _wake_worker(self) -> None:
        """(Under the lock.) Wake the worker, started on first use."""
        self._work.notify()
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._run, name="otel-agentdiag-assembly", daemon=True)
            self._worker.start()

    def _run(self) -> None:
        while True:
            with self._work:
                while not self._queue:
                    if self._stopped:
                        return
                    if self._waiting:
                        # Traces whose root ended with a span of theirs still open: handed on when their grace ends.
                        now = time.monotonic()
                        for waiting, deadline in list(self._waiting.items()):
                            if deadline <= now and waiting in self.held:
                                self._hand_on(waiting, early=True)
                        if self._queue:
                            break
                        self._work.wait(max(min(self._waiting.values(), default=now) - now, 0.001))
                    else:
                        self._work.wait()
                trace_id, held, span = self._queue.popleft()
            try:
                if held is not None:
                    self._assemble_held(trace_id, held)
                elif span is not None:
                    self._forward(self._late(span, trace_id))
            except Exception as exc:  # noqa: BLE001 - the worker goes on; what it held was handed on as it could
                log_internal_error("assembling a trace", exc)
            finally:
                with self._work:
                    self._pending -= 1
                    if not self._pending:
                        self._work.notify_all()

    def flush_held(self, timeout_s: float = 30.0) -> bool:
        """Hand on every held trace as it stands and wait (at most ``timeout_s``) until the worker has given
        everything to the branches (``force_flush``, ``shutdown``). True when it has."""
        deadline = time.monotonic() + timeout_s
        with self._work:
            for trace_id in list(self.held):
                self._hand_on(trace_id, early=True)
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._work.wait(left)
        return True

    def _assemble_held(self, trace_id: int, held: _Held) -> None:
        """On the worker: assemble the trace and give its spans to every branch."""
        spans = held.spans
        self.assembled += 1
        try:
            out, session, reserved = self._assemble(spans, held)
        except Exception as exc:  # noqa: BLE001 - the spans still go on, numbered as they can be
            self.failed += 1
            log_internal_error("rebuilding a trace", exc)
            out, session, reserved = [self._numbered(s, held.session) for s in spans], held.session, []
        with self._lock:
            closed = self._closed.get(trace_id)
            if closed is not None:
                closed.session, closed.reserved = session, reserved
        if session is not None:
            self.sequencer.file_trace(trace_id, session)  # spans it starts from now on: numbered there at start
        for span in out:
            self._forward(span)

    def _assemble(self, spans: list[ReadableSpan], held: _Held) -> tuple[list[ReadableSpan], str | None, list[int]]:
        order = held.order
        last = len(order)
        spans = sorted(spans, key=lambda s: order.get(s.context.span_id, last) if s.context else last)
        session = held.session
        if session is None:
            for span in spans:
                session = _own_session(span) or _recorded_session(span)
                if session is not None:
                    break
        plan = plan_trace(spans) if spans else None
        if plan:
            self.rebuilt += 1
        # Numbers in start order, a span that has not ended keeping its place (a gap until it ends); the added
        # iterations after the spans they hold.
        ended = {s.context.span_id: s for s in spans if s.context is not None}
        numbered: dict[int, ReadableSpan] = {}
        reserved: list[int] = []
        for span_id, _place in sorted(order.items(), key=lambda item: item[1]):
            found = ended.pop(span_id, None)
            if found is None:
                reserved.append(self.sequencer.next_sequence(session))
            else:
                numbered[id(found)] = self._numbered(found, session, plan)
        rest = list(ended.values()) + (plan.iterations if plan else [])  # not seen starting (evicted), added ones
        for span in sorted(rest, key=lambda s: (s.start_time or 0, s.context.span_id if s.context else 0)):
            numbered[id(span)] = self._numbered(span, session, plan)
        # Handed on in the order the spans ended (an added iteration after its last call), as if never held: the
        # adapters find a peer's model call around one of ours because ours ended first.
        everything = [*spans, *(plan.iterations if plan else [])]
        everything.sort(key=lambda s: (s.end_time or 0, s.start_time or 0))
        return [numbered[id(span)] for span in everything], session, reserved

    def _late(self, span: ReadableSpan, trace_id: int) -> ReadableSpan:
        """A span of a trace handed on already: numbered under the trace's session (a reserved number first),
        unless it started after the hand-on (the sequencer numbered it then, in the trace's session)."""
        if sc.AGENTDIAG_SEQUENCE in span_attributes(span) or _ids.TABLE.numbers_of(span) is not None:
            return span
        closed = self._closed.get(trace_id) or _Closed(None, [])
        key = _own_session(span) or _recorded_session(span) or closed.session
        number = closed.reserved.pop(0) if key == closed.session and closed.reserved else None
        return self._numbered(span, closed.session, None, number)

    def _numbered(
        self, span: ReadableSpan, session: str | None, plan: Plan | None = None, number: int | None = None
    ) -> ReadableSpan:
        """A copy of ``span`` with its number (and, from ``plan``, its new parent or index), filed in ``session``
        when it names none of its own."""
        attributes = dict(span_attributes(span))
        beside = _ids.TABLE.numbers_of(span) is not None  # numbered at start, by the sequencer
        numbered = beside or (sc.AGENTDIAG_OBSERVER_ID in attributes and sc.AGENTDIAG_SEQUENCE in attributes)
        if numbered and plan is None:
            return span  # numbered already (by a sequencer on the provider)
        own = _own_session(span)
        recorded = None if own is not None else _recorded_session(span)
        key = own or recorded or session
        if not beside and sc.AGENTDIAG_OBSERVER_ID not in attributes:
            attributes[sc.AGENTDIAG_OBSERVER_ID] = self.sequencer.observer_id
            attributes[sc.AGENTDIAG_SEQUENCE] = number if number is not None else self.sequencer.next_sequence(key)
        parent: Any = ...
        ctx = span.context
        span_id = ctx.span_id if ctx is not None else 0
        if plan is not None:
            index = plan.indexes.get(span_id)
            if index is not None:
                attributes[sc.AGENTDIAG_ITERATION_INDEX] = index
            agent = plan.runs.get(span_id)
            if agent is not None:
                attributes[sc.GEN_AI_OPERATION_NAME] = sc.OP_INVOKE_AGENT
                attributes[sc.GEN_AI_AGENT_NAME] = agent
            parent = plan.parents.get(span_id, ...)
        copy = with_attributes(span, attributes) if parent is ... else with_attributes(span, attributes, parent=parent)
        if plan is not None:
            step = plan.demoted.get(span_id)
            if step is not None:
                note_step(copy, step)  # the adapters map it as that step, on every destination
        if own is None and recorded is None and session is not None:
            _ids.TABLE.record_conversation(copy, session)
        _ids.TABLE.pin(copy)  # the raw ids beside the span now follow the copy the destinations queue
        if self.content is not None:
            self.content.transfer(span, copy)
        return copy

    def _forward(self, span: ReadableSpan) -> None:
        for branch in self.branches:
            branch.enqueue(span)

    def stop(self) -> None:
        """Hand on what is held, then stop the worker (the handle's ``shutdown``, before the batch processors')."""
        try:
            self.flush_held()
        except Exception as exc:  # noqa: BLE001
            log_internal_error("handing on held traces", exc)
        with self._work:
            self._stopped = True
            self._work.notify_all()

    def stats(self) -> dict[str, int]:
        return {
            "held": len(self.held),
            "assembled": self.assembled,
            "rebuilt": self.rebuilt,
            "early": self.early,
            "failed": self.failed,
        }


def _own_session(span: ReadableSpan) -> str | None:
    attributes = span_attributes(span)
    value = attributes.get(sc.GEN_AI_CONVERSATION_ID)
    if value is None:
        value = attributes.get(sc.SESSION_ID)
    return None if value is None else session_key(value)


def _recorded_session(span: ReadableSpan) -> str | None:
    ids = _ids.TABLE.ids_of(span)
    return None if not ids else session_key(ids.get(sc.GEN_AI_CONVERSATION_ID))
