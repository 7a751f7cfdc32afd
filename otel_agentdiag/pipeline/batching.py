"""``AccountingBatchSpanProcessor``: batching where no span is lost silently.

It replaces the SDK's ``BatchSpanProcessor`` in the pipeline ``configure()`` builds. Every span that reaches
it ends in exactly one of these, counted per session in a :class:`Ledger` (and, with the SQLite exporter, in
the store, in the same transaction as the spans):

- *accepted*: the exporter took it (a tombstone from a failed redaction counts as *rejected*
  ``redactor_error`` instead, as the store counts it);
- *rejected*: a stage rejected it (the redactor, for a span it could not rebuild with ``on_error="drop"``);
- *dropped* ``queue_full``: the queue was at its bound (in spans or estimated bytes) when the span ended;
- *dropped* ``export_failure``: the exporter failed it ``1 + max_retries`` times (exponential backoff);
- *dropped* ``shutdown``: still queued, or still in a stuck exporter, when ``shutdown()``'s deadline passed,
  or ended after shutdown.

Rejections a :class:`~otel_agentdiag.redaction.RedactingSpanProcessor` in front of it reports through
:meth:`AccountingBatchSpanProcessor.record_rejected` are counted too. So, per session,
``observed = accepted + rejected + dropped + pending`` where *pending* are spans queued or being exported.

``on_end`` costs a size estimate from string lengths and one short critical section (two comparisons and
an append); the stages (adapters, redaction, metrics), finding the session, counting it, conversion and JSON
encoding happen on the worker thread (or, for a refused span, on the rare refusal path). The worker never dies
on an exception, and exports run with instrumentation suppressed.

This module holds the processor and the agent's side (queueing, flush, shutdown, stats); the worker thread is
:mod:`otel_agentdiag.pipeline.worker` and the counts are :mod:`otel_agentdiag.pipeline.ledger`.
"""

from __future__ import annotations

import inspect
import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter

from otel_agentdiag import environment_variables as env
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag._internal.fork import reinit_after_fork
from otel_agentdiag._internal.sdk import attribute_dict, span_attributes, span_events
from otel_agentdiag.pipeline.ledger import (
    CLEARED,
    DEFAULT_MAX_DROP_SESSIONS,
    DEFAULT_MAX_LEDGER_SESSIONS,
    DROP_CAUSES,
    EXPORT_FAILURE,
    QUEUE_FULL,
    REDACTOR_ERROR,
    SHUTDOWN,
    Ledger,
    LedgerCounts,
    PipelineStats,
    copy_deltas,
)
from otel_agentdiag.pipeline.worker import BatchWorker, Rejection, Stage, span_session
from otel_agentdiag.redaction.processor import RedactionStage

_logger = logging.getLogger(__name__)

__all__ = [
    "CLEARED",
    "DEFAULT_MAX_EXPORT_BATCH",
    "DEFAULT_MAX_QUEUE_SPANS",
    "DEFAULT_SCHEDULE_DELAY_S",
    "DROP_CAUSES",
    "EXPORT_FAILURE",
    "QUEUE_FULL",
    "REDACTOR_ERROR",
    "SHUTDOWN",
    "AccountingBatchSpanProcessor",
    "Ledger",
    "LedgerCounts",
    "PipelineStats",
    "Rejection",
    "Stage",
    "estimate_size",
]

DEFAULT_MAX_QUEUE_SPANS = 2048
DEFAULT_MAX_QUEUE_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_EXPORT_BATCH = 512
DEFAULT_SCHEDULE_DELAY_S = 0.5
DEFAULT_MAX_RETRIES = 3
DEFAULT_RETRY_BACKOFF_S = 0.05
DEFAULT_SHUTDOWN_TIMEOUT_S = 5.0

_SPAN_OVERHEAD = 512
"""Estimated bytes of a span besides its string values: ids, times, names, numbers, JSON punctuation."""
_ITEM_OVERHEAD = 48
"""Estimated bytes per attribute (its key, JSON punctuation, a number) besides its string value."""
_EVENT_OVERHEAD = 96
_RETRY_MARGIN_S = 0.2
"""How long before shutdown's deadline the last retry must start (see :meth:`begin_shutdown`)."""


def _tuple_size(value: tuple[Any, ...]) -> int:
    return sum([len(item) if item.__class__ is str else 8 for item in value])


def estimate_size(attributes: Mapping[str, Any], events: Sequence[Any] | None = None) -> int:
    """A cheap estimate of a span's stored size: string lengths plus a constant per value and per span.

    Only string values are measured (by characters); keys, numbers, booleans and ids count as a constant
    each. Events count as a constant each, plus one per attribute: events are rare on agent spans and the
    SDK bounds them.
    """
    values = attribute_dict(attributes).values()  # a live span's BoundedAttributes: skip a lock per value
    size = _SPAN_OVERHEAD + _ITEM_OVERHEAD * len(values)
    # One comprehension (no per-value branches in bytecode): strings by length, tuples item by item.
    size += sum([len(v) if v.__class__ is str else _tuple_size(v) if v.__class__ is tuple else 0 for v in values])
    if events:
        for event in events:
            size += _EVENT_OVERHEAD + _ITEM_OVERHEAD * len(event.attributes or ())
    return size


class _HasObserverId(Protocol):
    observer_id: str


class AccountingBatchSpanProcessor(BatchWorker, SpanProcessor):
    """Batch ended spans to ``exporter`` on a worker thread, counting every span's fate (see the module doc).

    ``stages``: what each taken batch goes through on the worker, in this order, before export (pipeline/build.py:
    the convention adapters, the destination's :class:`~otel_agentdiag.redaction.processor.RedactionStage`, the
    metrics); the queue then holds spans as they ended. ``session_of``: the session a span that has not been
    through the stages is filed under (queued, refused, dropped at shutdown): the redaction stage's, so raw ids
    are counted as the store's digests; None: the span's own attributes.

    ``observer`` names the pipeline in the accounting: the :class:`~otel_agentdiag.pipeline.SessionSequencer`
    that numbers the spans (its current ``observer_id`` is used, also after a fork), a fixed 16-hex-digit id,
    or None for a fresh one. For an exporter with ``export_with_accounting(spans, accounting) -> bool`` (the
    SQLite one), the drops and rejections since its last successful write go with each batch as a
    :class:`~otel_agentdiag.storage.Accounting`; deltas that could not be written stay pending for the next
    write, are written alone (``record_accounting``) when the queue is idle or on ``force_flush``, and once
    more when the worker stops.

    Bounds: ``max_queue_spans`` spans and ``max_queue_bytes`` estimated bytes queued (:func:`estimate_size`);
    a span beyond either is dropped as ``queue_full``. Batches of up to ``max_export_batch`` spans go out when
    that many are queued, when ``schedule_delay_s`` passed since the last export, or on ``force_flush``.
    ``shutdown()`` exports what it can within ``shutdown_timeout_s`` (even if the exporter hangs), then counts
    the rest as ``shutdown`` drops.

    Memory does not grow with the number of sessions: drop and rejection counts that wait for a write are kept for
    at most ``max_drop_sessions`` sessions (None: ``AGENTDIAG_MAX_DROP_SESSIONS``, else 1,024), and those of any
    further session are counted under :data:`~otel_agentdiag.pipeline.ledger.OVERFLOW` (one ``session_stats`` row
    per observer, by cause), exactly; the per-session ledger of :meth:`stats` keeps the ``max_ledger_sessions``
    sessions touched most recently.

    A failed batch is retried ``max_retries`` times with exponential backoff from ``retry_backoff_s``; a retry
    that would start more than ``retry_budget_s`` after the batch's first attempt (the OTLP branch: the export
    timeout, retries included, as the SDK exporters define it), or after shutdown's deadline, is not made, so a
    dead collector costs an ``export_failure`` and one summary line, not the whole backoff.
    """

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        stages: Sequence[Stage] = (),
        session_of: Callable[[ReadableSpan], str | None] | None = None,
        observer: _HasObserverId | str | None = None,
        max_queue_spans: int = DEFAULT_MAX_QUEUE_SPANS,
        max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
        max_export_batch: int = DEFAULT_MAX_EXPORT_BATCH,
        schedule_delay_s: float = DEFAULT_SCHEDULE_DELAY_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_S,
        shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S,
        retry_budget_s: float | None = None,
        max_ledger_sessions: int = DEFAULT_MAX_LEDGER_SESSIONS,
        max_drop_sessions: int | None = None,
    ) -> None:
        if max_queue_spans < 1 or max_queue_bytes < 1 or max_export_batch < 1:
            raise ValueError("max_queue_spans, max_queue_bytes and max_export_batch must be positive")
        if max_drop_sessions is None:
            max_drop_sessions = env.parse_positive_int(
                env.AGENTDIAG_MAX_DROP_SESSIONS,
                os.environ.get(env.AGENTDIAG_MAX_DROP_SESSIONS),
                default=DEFAULT_MAX_DROP_SESSIONS,
            )
        elif max_drop_sessions < 1:
            raise ValueError("max_drop_sessions must be positive")
        if schedule_delay_s <= 0 or retry_backoff_s < 0 or shutdown_timeout_s < 0 or max_retries < 0:
            raise ValueError("schedule_delay_s must be positive; retries, backoff and timeout not negative")
        self.exporter = exporter
        self.max_queue_spans = max_queue_spans
        self.max_queue_bytes = max_queue_bytes
        self.max_export_batch = max_export_batch
        self.schedule_delay_s = schedule_delay_s
        self.max_retries = max_retries
        self.retry_backoff_s = retry_backoff_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self.retry_budget_s = retry_budget_s
        self._stages = tuple(stages)
        self._session_of = span_session if session_of is None else session_of
        self._observer_source: _HasObserverId | None = None
        if observer is None:
            self._observer = secrets.token_hex(8)
        elif isinstance(observer, str):
            self._observer = observer
        else:
            self._observer_source = observer
            self._observer = observer.observer_id
        self._export_with_accounting = getattr(exporter, "export_with_accounting", None)
        self._record_accounting = getattr(exporter, "record_accounting", None)
        self._persists_counts = self._export_with_accounting is not None
        """Whether drops and rejections are kept as deltas for the exporter to persist."""
        try:
            self._shutdown_takes_timeout = "timeout_millis" in inspect.signature(exporter.shutdown).parameters
        except (TypeError, ValueError):
            self._shutdown_takes_timeout = False
        self._max_ledger_sessions = max_ledger_sessions
        self._max_drop_sessions = max_drop_sessions
        self._routed: Mapping[int, Any] = {}
        """Trace ids whose spans do not queue here on ``on_end`` (:meth:`route`)."""
        self._intake: Callable[[ReadableSpan], None] | None = None
        self._reset_state()
        # The spans this queue holds keep their numbers beside them (``_internal/ids.py``): room for all of them.
        _ids.TABLE.reserve(max_queue_spans)
        reinit_after_fork(self._at_fork_reinit)
        self._start_worker()

    def _at_fork_reinit(self) -> None:
        # The parent's queue, counts and pending deltas belong to the parent; the child starts afresh.
        self._reset_state()
        if self._observer_source is not None:
            self._observer = self._observer_source.observer_id
        else:
            self._observer = secrets.token_hex(8)
        self._start_worker()

    @property
    def observer_id(self) -> str:
        return self._observer

    @property
    def exports_only_redacted(self) -> bool:
        """Whether a redaction stage rebuilds every span before its exporter sees it: without one, it exports spans
        as they ended (see :func:`otel_agentdiag.pipeline.audit.foreign_processors`)."""
        return any(isinstance(stage, RedactionStage) for stage in self._stages)

    # -- the agent's side ---------------------------------------------------------------------------------
    def route(self, routed: Mapping[int, Any], intake: Callable[[ReadableSpan], None] | None) -> None:
        """The spans of the traces in ``routed`` (a live mapping, by trace id) do not queue here when they end:
        they go to ``intake`` (or nowhere, when it is None: another branch's processor hands them on), which hands
        them back through :meth:`enqueue` (the trace assembler: pipeline/assembly.py). Spans of other traces pay
        one lookup. Call it before the first span ends."""
        self._routed = routed
        self._intake = intake

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan, route: bool = True) -> None:
        """Queue the ended span (or refuse it, counted). A span of a routed trace (:meth:`route`) goes to the
        intake instead, unless ``route`` is False (the intake handing it back: :meth:`enqueue`)."""
        try:
            ctx = span.context
            if ctx is None or not ctx.trace_flags.sampled:
                return
            routed = self._routed
            if route and routed and ctx[0] in routed:  # SpanContext is a tuple: [0] is its trace id
                intake = self._intake
                if intake is not None:
                    intake(span)
                return
            size = estimate_size(span_attributes(span), span_events(span))
            with self._lock:
                queue = self._queue
                if (
                    self._shutdown
                    or len(queue) >= self.max_queue_spans
                    or self._queue_bytes + size > self.max_queue_bytes
                ):
                    first_overflow = self._refuse_locked(span)
                else:
                    first_overflow = False
                    queue.append((span, size))
                    self._queue_bytes += size
                    self._enqueued += 1
                    depth = len(queue)
                    if depth > self.peak_queue:
                        self.peak_queue = depth
                    if depth >= self.max_export_batch:
                        self._wake.notify()
            if first_overflow:  # logged outside the lock: a logging handler may well end spans itself
                _logger.warning("otel-agentdiag: the span queue is full; dropping spans (each is counted)")
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            log_internal_error("queueing a span", exc)

    def enqueue(self, span: ReadableSpan) -> None:
        """Queue an ended span whatever its trace (the trace assembler hands its spans on through here)."""
        self.on_end(span, route=False)

    def _refuse_locked(self, span: ReadableSpan) -> bool:
        """Count a span the queue does not take; True on the first ``queue_full`` drop (to be logged)."""
        session = self._session_of(span)
        self._ledger.observe(session)
        if self._shutdown:
            self._drop_locked(session, SHUTDOWN)
            return False
        self._drop_locked(session, QUEUE_FULL)
        if self._full_warned:
            return False
        self._full_warned = True
        return True

    def record_rejected(self, session: str | None, reason: str) -> None:
        """Count a span an earlier processor rejected (a redacting processor dropped it): observed and rejected."""
        try:
            with self._lock:
                self._reject_locked(session, reason)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("counting a rejected span", exc)

    # -- flush, shutdown, stats -----------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export every span queued before the call (and pending counts); True when done within the timeout."""
        try:
            deadline = time.monotonic() + max(timeout_millis, 0) / 1000
            with self._lock:
                if self._stopping or not self._worker.is_alive():
                    return not self._queue and not self._in_flight
                self._drain_to = self._enqueued
                self._flush_asked += 1
                ticket = self._flush_asked
                self._wake.notify()
                while self._flush_done < ticket:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._abandoned:
                        return False
                    self._settled.wait(remaining)
                return True
        except Exception as exc:  # noqa: BLE001
            log_internal_error("flushing spans", exc)
            return False

    def begin_shutdown(self, deadline: float | None = None) -> None:
        """Refuse new spans (counted as ``shutdown`` drops) and let the worker drain; returns at once.

        :meth:`shutdown` then waits for the drain. Lets several processors drain in parallel. ``deadline``
        (``time.monotonic()``): when shutdown gives up; no retry starts that late.
        """
        with self._lock:
            self._shutdown = True
            self._stopping = True
            if deadline is not None:
                # Leave the worker time to count the batch it gives up, before shutdown abandons it.
                cut = deadline - _RETRY_MARGIN_S
                self._retry_deadline = cut if self._retry_deadline is None else min(cut, self._retry_deadline)
            self._wake.notify()

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Flush and stop (idempotent), within ``timeout_s`` (default ``shutdown_timeout_s``) even if the exporter
        hangs; whatever could not be exported by then is counted as ``shutdown`` drops."""
        try:
            timeout = self.shutdown_timeout_s if timeout_s is None else max(timeout_s, 0.0)
            deadline = time.monotonic() + timeout
            with self._lock:
                if self._shut_down:
                    return
                self._shut_down = True
            _ids.TABLE.reserve(-self.max_queue_spans)
            self.begin_shutdown(deadline)
            self._worker.join(timeout)
            if self._worker.is_alive():
                with self._lock:
                    self._abandoned = True
                    left = list(self._in_flight) + list(self._queue)
                    for session in self._pending_sessions_locked():
                        self._ledger.observe(session)
                        self._drop_locked(session, SHUTDOWN)
                    self._queue.clear()
                    self._queue_bytes = 0
                    self._in_flight = []
                    self._wake.notify()
                    self._settled.notify_all()
                self._abandon.set()
                _logger.warning(
                    "otel-agentdiag: %d spans were not exported within the %.1f s shutdown timeout; counted as %s",
                    len(left),
                    timeout,
                    SHUTDOWN,
                )
            remaining_ms = max(deadline - time.monotonic(), 0.0) * 1000
            if self._shutdown_takes_timeout:
                self.exporter.shutdown(timeout_millis=remaining_ms)  # type: ignore[call-arg]
            else:
                self.exporter.shutdown()
        except Exception as exc:  # noqa: BLE001
            log_internal_error("shutting down the span pipeline", exc)

    def _pending_sessions_locked(self) -> list[str | None]:
        """The session of every span queued or in flight."""
        queued = self._session_of
        in_flight = span_session if self._in_flight_finished else queued
        sessions = [in_flight(span) for span in self._in_flight]
        sessions.extend(queued(span) for span, _ in self._queue)
        return sessions

    def stats(self) -> PipelineStats:
        """Cumulative counts so far (a consistent snapshot). Spans queued or being exported count as observed
        and pending (found by scanning the queue: meant for occasional calls, not per span)."""
        with self._lock:
            ledger = self._ledger
            totals = ledger.totals.copy()
            sessions = {session: counts.copy() for session, counts in ledger.sessions.items()}
            for session in self._pending_sessions_locked():
                counts = sessions.get(session)
                if counts is None:
                    counts = sessions[session] = LedgerCounts()
                counts.observed += 1
                totals.observed += 1
            return PipelineStats(
                observer=self._observer,
                queue_depth=len(self._queue),
                queue_bytes=self._queue_bytes,
                peak_queue=self.peak_queue,
                max_queue_spans=self.max_queue_spans,
                max_queue_bytes=self.max_queue_bytes,
                in_flight=len(self._in_flight),
                flush_attempts=self.flush_attempts,
                flush_failures=self.flush_failures,
                totals=totals,
                sessions=sessions,
                evicted_sessions=ledger.evicted_sessions,
                unpersisted_rejected=copy_deltas(self._rejected),
                unpersisted_dropped=copy_deltas(self._dropped),
                max_drop_sessions=self._max_drop_sessions,
                folded_spans=self.folded_spans,
            )
