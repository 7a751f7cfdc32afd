"""``AccountingBatchSpanProcessor``: batching where no span is lost silently.

It replaces the SDK's ``BatchSpanProcessor`` in the pipeline ``configure()`` builds. Every span that reaches
it ends in exactly one of these, counted per session in a :class:`Ledger` (and, with the SQLite exporter, in
the store, in the same transaction as the spans):

- *accepted*: the exporter took it (a tombstone from a failed redaction counts as *rejected*
  ``redactor_error`` instead, as the store counts it);
- *dropped* ``queue_full``: the queue was at its bound (in spans or estimated bytes) when the span ended;
- *dropped* ``export_failure``: the exporter failed it ``1 + max_retries`` times (exponential backoff);
- *dropped* ``shutdown``: still queued, or still in a stuck exporter, when ``shutdown()``'s deadline passed,
  or ended after shutdown.

Rejections the redacting processor reports through :meth:`AccountingBatchSpanProcessor.record_rejected`
(spans dropped with ``on_error="drop"``) are counted too. So, per session,
``observed = accepted + rejected + dropped + pending`` where *pending* are spans queued or being exported.

``on_end`` costs a size estimate from string lengths and one short critical section (two comparisons and
an append); finding the session, counting it, conversion and JSON encoding happen on the worker thread
(or, for a refused span, on the rare refusal path). The worker never dies on an exception, and exports run
with instrumentation suppressed.
"""

from __future__ import annotations

import inspect
import logging
import os
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, Context, attach, detach, set_value
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag._internal.fork import reinit_after_fork
from otel_agentdiag._internal.spans import span_attributes
from otel_agentdiag.exporters.sqlite import row_session
from otel_agentdiag.storage import Accounting

_logger = logging.getLogger(__name__)

QUEUE_FULL = "queue_full"
EXPORT_FAILURE = "export_failure"
SHUTDOWN = "shutdown"
CLEARED = "cleared"
DROP_CAUSES = (QUEUE_FULL, EXPORT_FAILURE, SHUTDOWN, CLEARED)
REDACTOR_ERROR = "redactor_error"

DEFAULT_MAX_QUEUE_SPANS = 2048
DEFAULT_MAX_QUEUE_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_EXPORT_BATCH = 512
DEFAULT_SCHEDULE_DELAY_S = 0.5
DEFAULT_MAX_RETRIES = 3
DEFAULT_RETRY_BACKOFF_S = 0.05
DEFAULT_SHUTDOWN_TIMEOUT_S = 5.0
DEFAULT_MAX_LEDGER_SESSIONS = 10_000

_SPAN_OVERHEAD = 512
"""Estimated bytes of a span besides its string values: ids, times, names, numbers, JSON punctuation."""
_ITEM_OVERHEAD = 48
"""Estimated bytes per attribute (its key, JSON punctuation, a number) besides its string value."""
_EVENT_OVERHEAD = 96
_TOMBSTONE_KEY = sc.AGENTDIAG_REDACTION_PREFIX + REDACTOR_ERROR

Deltas = dict[str | None, dict[str, int]]
"""session -> reason or cause -> n (None: spans outside any session)."""


def _tuple_size(value: tuple[Any, ...]) -> int:
    return sum([len(item) if item.__class__ is str else 8 for item in value])


def estimate_size(attributes: Mapping[str, Any], events: Sequence[Any] | None = None) -> int:
    """A cheap estimate of a span's stored size: string lengths plus a constant per value and per span.

    Only string values are measured (by characters); keys, numbers, booleans and ids count as a constant
    each. Events count as a constant each, plus one per attribute: events are rare on agent spans and the
    SDK bounds them.
    """
    backing = getattr(attributes, "_dict", None)  # a live span's BoundedAttributes: skip a lock per value
    values = (backing if backing.__class__ is dict else attributes).values()
    size = _SPAN_OVERHEAD + _ITEM_OVERHEAD * len(values)
    # One comprehension (no per-value branches in bytecode): strings by length, tuples item by item.
    size += sum([len(v) if v.__class__ is str else _tuple_size(v) if v.__class__ is tuple else 0 for v in values])
    if events:
        for event in events:
            size += _EVENT_OVERHEAD + _ITEM_OVERHEAD * len(event.attributes or ())
    return size


def _add(deltas: Deltas, session: str | None, reason: str, n: int = 1) -> None:
    by_reason = deltas.get(session)
    if by_reason is None:
        deltas[session] = {reason: n}
    else:
        by_reason[reason] = by_reason.get(reason, 0) + n


def _subtract(deltas: Deltas, sent: Deltas) -> None:
    for session, by_reason in sent.items():
        mine = deltas.get(session)
        if mine is None:
            continue
        for reason, n in by_reason.items():
            left = mine.get(reason, 0) - n
            if left > 0:
                mine[reason] = left
            else:
                mine.pop(reason, None)
        if not mine:
            del deltas[session]


def _copy(deltas: Deltas) -> Deltas:
    return {session: dict(by_reason) for session, by_reason in deltas.items()}


@dataclass
class LedgerCounts:
    """Cumulative counts of one session (or of all of them)."""

    observed: int = 0
    accepted: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def pending(self) -> int:
        """Spans observed whose fate is not known yet (queued or being exported)."""
        return self.observed - self.accepted - sum(self.rejected.values()) - sum(self.dropped.values())

    def copy(self) -> LedgerCounts:
        return LedgerCounts(self.observed, self.accepted, dict(self.rejected), dict(self.dropped))

    def as_dict(self) -> dict[str, Any]:
        return {
            "observed": self.observed,
            "accepted": self.accepted,
            "rejected": dict(sorted(self.rejected.items())),
            "dropped": dict(sorted(self.dropped.items())),
            "pending": self.pending,
        }


class Ledger:
    """Cumulative in-memory counts per session and in total; not thread-safe (the processor's lock guards it).

    ``totals`` are exact for the life of the processor. Per-session counts are kept for the
    ``max_sessions`` sessions touched most recently; older ones are folded away (``evicted_sessions``).
    """

    def __init__(self, max_sessions: int = DEFAULT_MAX_LEDGER_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self.totals = LedgerCounts()
        self.sessions: OrderedDict[str | None, LedgerCounts] = OrderedDict()
        self.evicted_sessions = 0

    def _session(self, session: str | None) -> LedgerCounts:
        sessions = self.sessions
        counts = sessions.get(session)
        if counts is None:
            if len(sessions) >= self.max_sessions:
                sessions.popitem(last=False)
                self.evicted_sessions += 1
            counts = sessions[session] = LedgerCounts()
        else:
            sessions.move_to_end(session)
        return counts

    def observe(self, session: str | None, n: int = 1) -> None:
        self._session(session).observed += n
        self.totals.observed += n

    def accept(self, session: str | None, n: int = 1) -> None:
        self._session(session).accepted += n
        self.totals.accepted += n

    def reject(self, session: str | None, reason: str, n: int = 1) -> None:
        counts = self._session(session)
        counts.rejected[reason] = counts.rejected.get(reason, 0) + n
        self.totals.rejected[reason] = self.totals.rejected.get(reason, 0) + n

    def drop(self, session: str | None, cause: str, n: int = 1) -> None:
        counts = self._session(session)
        counts.dropped[cause] = counts.dropped.get(cause, 0) + n
        self.totals.dropped[cause] = self.totals.dropped.get(cause, 0) + n


@dataclass(frozen=True)
class PipelineStats:
    """A snapshot of :meth:`AccountingBatchSpanProcessor.stats`."""

    observer: str
    queue_depth: int
    queue_bytes: int
    peak_queue: int
    max_queue_spans: int
    max_queue_bytes: int
    in_flight: int
    flush_attempts: int
    flush_failures: int
    totals: LedgerCounts
    sessions: dict[str | None, LedgerCounts]
    evicted_sessions: int
    unpersisted_rejected: Deltas
    """Rejections not yet written to the store (they go with the next successful write)."""
    unpersisted_dropped: Deltas
    """Drops not yet written to the store."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the no-session bucket is keyed ``""``)."""
        return {
            "observer": self.observer,
            "queue": {
                "depth": self.queue_depth,
                "bytes": self.queue_bytes,
                "peak": self.peak_queue,
                "max_spans": self.max_queue_spans,
                "max_bytes": self.max_queue_bytes,
                "in_flight": self.in_flight,
            },
            "flush_attempts": self.flush_attempts,
            "flush_failures": self.flush_failures,
            "totals": self.totals.as_dict(),
            "sessions": {session or "": counts.as_dict() for session, counts in self.sessions.items()},
            "evicted_sessions": self.evicted_sessions,
            "unpersisted": {
                "rejected": {s or "": dict(r) for s, r in self.unpersisted_rejected.items()},
                "dropped": {s or "": dict(d) for s, d in self.unpersisted_dropped.items()},
            },
        }


class _HasObserverId(Protocol):
    observer_id: str


_Item = tuple[ReadableSpan, int]
"""A queued span and its estimated size."""


def _session_of(span: ReadableSpan) -> str | None:
    return row_session(span_attributes(span))


class SpanFinisher(Protocol):
    """What turns a queued span into the span the exporter gets, on the worker thread: a redactor.

    With a finisher attached (:meth:`AccountingBatchSpanProcessor.set_finisher`), the queue holds the spans as
    they ended, and *every* span goes through :meth:`finish_span` before any exporter sees it.
    """

    def finish_span(self, span: ReadableSpan) -> ReadableSpan | None:
        """The span to export, or None: the span is rejected (counted as ``redactor_error``). Never raises."""
        ...

    def session_of(self, span: ReadableSpan) -> str | None:
        """The session digest a span that was never finished is filed under (drops, stats). Never raises."""
        ...


class AccountingBatchSpanProcessor(SpanProcessor):
    """Batch ended spans to ``exporter`` on a worker thread, counting every span's fate (see the module doc).

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
    """

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        observer: _HasObserverId | str | None = None,
        max_queue_spans: int = DEFAULT_MAX_QUEUE_SPANS,
        max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
        max_export_batch: int = DEFAULT_MAX_EXPORT_BATCH,
        schedule_delay_s: float = DEFAULT_SCHEDULE_DELAY_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_S,
        shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S,
        max_ledger_sessions: int = DEFAULT_MAX_LEDGER_SESSIONS,
    ) -> None:
        if max_queue_spans < 1 or max_queue_bytes < 1 or max_export_batch < 1:
            raise ValueError("max_queue_spans, max_queue_bytes and max_export_batch must be positive")
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
        self._observer_source: _HasObserverId | None = None
        if observer is None:
            self._observer = secrets.token_hex(8)
        elif isinstance(observer, str):
            self._observer = observer
        else:
            self._observer_source = observer
            self._observer = observer.observer_id
        self._export_with_accounting: Callable[[Sequence[ReadableSpan], Accounting], Any] | None = getattr(
            exporter, "export_with_accounting", None
        )
        self._record_accounting: Callable[[Accounting], Any] | None = getattr(exporter, "record_accounting", None)
        self._persists_counts = self._export_with_accounting is not None
        """Whether drops and rejections are kept as deltas for the exporter to persist."""
        try:
            self._shutdown_takes_timeout = "timeout_millis" in inspect.signature(exporter.shutdown).parameters
        except (TypeError, ValueError):
            self._shutdown_takes_timeout = False
        self._max_ledger_sessions = max_ledger_sessions
        self._finisher: SpanFinisher | None = None
        self._reset_state()
        reinit_after_fork(self._at_fork_reinit)
        self._start_worker()

    # -- state --------------------------------------------------------------------------------------------
    def _reset_state(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        """Signals the worker: a batch is ready, a flush is asked, or shutdown."""
        self._settled = threading.Condition(self._lock)
        """Signals flushers: the worker finished a flush round."""
        self._abandon = threading.Event()
        """Set when shutdown's deadline passed: the worker stops waiting and retrying."""
        self._queue: deque[_Item] = deque()
        self._queue_bytes = 0
        self._enqueued = 0
        self._taken = 0
        self._drain_to = 0
        self._flush_asked = 0
        self._flush_done = 0
        self._in_flight: list[_Item] = []
        self._in_flight_finished = False
        """Whether the batch in flight was finished already (its spans are redacted, filed as stored)."""
        self._ledger = Ledger(self._max_ledger_sessions)
        self._rejected: Deltas = {}
        self._dropped: Deltas = {}
        self._dirty = False
        """Pending deltas changed since the last attempt to write them alone."""
        self.peak_queue = 0
        self.flush_attempts = 0
        """Calls to the exporter with a batch (every retry counts)."""
        self.flush_failures = 0
        """Of those, the calls that failed."""
        self._started_ns = time.time_ns()
        self._shutdown = False
        """No new spans are taken."""
        self._shut_down = False
        """``shutdown()`` was called."""
        self._stopping = False
        self._abandoned = False
        self._full_warned = False

    def _start_worker(self) -> None:
        self._worker = threading.Thread(target=self._run, name="AgentDiagBatchSpanProcessor", daemon=True)
        self._worker.start()

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
        """Whether a redactor finishes every span before its exporter sees it (:meth:`set_finisher`): without
        one, it exports spans as they ended (see :func:`otel_agentdiag.pipeline.audit.foreign_processors`)."""
        return self._finisher is not None

    def set_finisher(self, finisher: SpanFinisher) -> None:
        """Finish (redact) every span on the worker thread, just before export, instead of before ``on_end``.

        This takes the redaction's cost off the thread that ends the span (the agent's). The queue then holds
        spans as they ended; none reaches the exporter without passing through ``finisher``. Call it before any
        span arrives; a processor takes one finisher only.
        """
        with self._lock:
            if self._finisher is not None and self._finisher is not finisher:
                raise ValueError("this batch processor already has a finisher: give each redactor its own")
            if self._enqueued:
                raise ValueError("set_finisher() must be called before the first span is queued")
            self._finisher = finisher

    def _queued_session(self, span: ReadableSpan) -> str | None:
        """The session of a span that was queued (and so not finished yet)."""
        finisher = self._finisher
        return _session_of(span) if finisher is None else finisher.session_of(span)

    # -- the agent's side ---------------------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        try:
            ctx = span.context
            if ctx is None or not ctx.trace_flags.sampled:
                return
            size = estimate_size(span_attributes(span), getattr(span, "_events", None))
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

    def _refuse_locked(self, span: ReadableSpan) -> bool:
        """Count a span the queue does not take; True on the first ``queue_full`` drop (to be logged)."""
        session = self._queued_session(span)
        self._ledger.observe(session)
        if self._shutdown:
            self._drop_locked(session, SHUTDOWN)
            return False
        self._drop_locked(session, QUEUE_FULL)
        if self._full_warned:
            return False
        self._full_warned = True
        return True

    def _drop_locked(self, session: str | None, cause: str, n: int = 1) -> None:
        self._ledger.drop(session, cause, n)
        if self._persists_counts:
            _add(self._dropped, session, cause, n)
            self._dirty = True

    def record_rejected(self, session: str | None, reason: str) -> None:
        """Count a span an earlier processor rejected (the redactor dropped it): observed and rejected."""
        try:
            with self._lock:
                self._reject_locked(session, reason)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("counting a rejected span", exc)

    def _reject_locked(self, session: str | None, reason: str) -> None:
        self._ledger.observe(session)
        self._ledger.reject(session, reason)
        if self._persists_counts:
            _add(self._rejected, session, reason)
            self._dirty = True

    # -- the worker ---------------------------------------------------------------------------------------
    def _run(self) -> None:
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            while True:
                try:
                    if self._step():
                        return
                except Exception as exc:  # noqa: BLE001 - the worker must outlive any failure
                    log_internal_error("exporting spans", exc)
                    self._abandon.wait(self.schedule_delay_s)  # never spin on a persistent failure
        finally:
            detach(token)

    def _step(self) -> bool:
        """One round of the worker: wait for work, then export one batch or write counts. True: stop."""
        batch: list[_Item] | None = None
        flush: int | None = None
        final = False
        with self._lock:
            deadline = time.monotonic() + self.schedule_delay_s
            while True:
                if self._abandoned:
                    return True
                queue = self._queue
                if queue and (len(queue) >= self.max_export_batch or self._taken < self._drain_to or self._stopping):
                    break
                if self._flush_done < self._flush_asked:
                    flush = self._flush_asked
                    break
                if self._stopping:
                    final = True
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if queue:
                        break
                    if self._dirty:
                        flush = self._flush_done  # write pending counts; answers no flush
                        break
                    deadline = time.monotonic() + self.schedule_delay_s
                    remaining = self.schedule_delay_s
                self._wake.wait(remaining)
            if flush is None and not final:
                count = min(self.max_export_batch, len(self._queue))
                batch = [self._queue.popleft() for _ in range(count)]
                self._queue_bytes -= sum(item[1] for item in batch)
                self._taken += count
                self._in_flight = batch
                self._in_flight_finished = False
        if batch is not None:
            self._export_batch(batch)
            return False
        if self._dirty or (final and self.flush_attempts):
            self._write_counts()
        with self._lock:
            if final:
                self._flush_done = self._flush_asked
            elif flush is not None and flush > self._flush_done:
                self._flush_done = flush
            self._settled.notify_all()
        return final

    def _accounting_locked(self) -> Accounting:
        return Accounting(
            observer=self._observer,
            rejected=_copy(self._rejected),
            dropped=_copy(self._dropped),
            peak_queue=self.peak_queue,
            queue_limit=self.max_queue_spans,
            flush_attempts=self.flush_attempts,
            flush_failures=self.flush_failures,
            pid=os.getpid(),
            started_ns=self._started_ns,
        )

    def _call_exporter(self, spans: list[ReadableSpan], accounting: Accounting | None) -> bool:
        try:
            if accounting is not None and self._export_with_accounting is not None:
                return self._export_with_accounting(spans, accounting) is True
            return self.exporter.export(spans) is SpanExportResult.SUCCESS
        except Exception as exc:  # noqa: BLE001 - an exporter's failure is a failed batch, nothing more
            log_internal_error("exporting a batch of spans", exc)
            return False

    def _finish(self, batch: list[_Item], finisher: SpanFinisher) -> list[_Item] | None:
        """Finish a taken batch; the spans to export (None: shutdown abandoned the batch meanwhile)."""
        finished: list[_Item] = []
        rejected: list[str | None] = []
        for span, size in batch:
            try:
                clean = finisher.finish_span(span)
            except Exception as exc:  # noqa: BLE001 - a finisher that breaks its contract still fails closed
                log_internal_error("finishing a span", exc)
                clean = None
            if clean is not None:
                finished.append((clean, size))
                continue
            try:
                rejected.append(finisher.session_of(span))
            except Exception:  # noqa: BLE001 - counted without its session
                rejected.append(None)
        with self._lock:
            if self._abandoned:
                return None  # shutdown counted the whole batch as dropped
            for session in rejected:
                self._reject_locked(session, REDACTOR_ERROR)
            self._in_flight = finished
            self._in_flight_finished = True
        return finished

    def _export_batch(self, batch: list[_Item]) -> None:
        if self._finisher is not None:
            finished = self._finish(batch, self._finisher)
            if not finished:  # all rejected (counted), or abandoned by shutdown (counted there)
                return
            batch = finished
        spans = [item[0] for item in batch]
        sessions = [_session_of(span) for span in spans]
        attempt = 0
        while True:
            with self._lock:
                if self._abandoned:
                    return  # counted as shutdown drops
                self.flush_attempts += 1
                accounting = self._accounting_locked() if self._export_with_accounting is not None else None
            ok = self._call_exporter(spans, accounting)
            with self._lock:
                if self._abandoned:
                    return
                if ok:
                    if accounting is not None:
                        _subtract(self._rejected, accounting.rejected)
                        _subtract(self._dropped, accounting.dropped)
                        self._dirty = bool(self._rejected or self._dropped)
                    ledger = self._ledger
                    for span, session in zip(spans, sessions, strict=True):
                        ledger.observe(session)
                        if _TOMBSTONE_KEY in span_attributes(span):
                            ledger.reject(session, REDACTOR_ERROR)
                        else:
                            ledger.accept(session)
                    self._in_flight = []
                    return
                self.flush_failures += 1
                if attempt >= self.max_retries:
                    for session in sessions:
                        self._ledger.observe(session)
                        self._drop_locked(session, EXPORT_FAILURE)
                    self._in_flight = []
                    break
            delay = self.retry_backoff_s * (2**attempt)
            attempt += 1
            if self._abandon.wait(delay):
                return
        _logger.warning(
            "otel-agentdiag: %d spans could not be exported after %d attempts; counted as %s",
            len(batch),
            attempt + 1,
            EXPORT_FAILURE,
        )

    def _write_counts(self) -> None:
        """Write pending deltas (and the observer's figures) alone, when the exporter can."""
        with self._lock:
            if self._record_accounting is None:
                self._dirty = False
                return
            accounting = self._accounting_locked()
            self._dirty = False
        try:
            ok = self._record_accounting(accounting) is True
        except Exception as exc:  # noqa: BLE001
            log_internal_error("recording pipeline counts", exc)
            ok = False
        if ok:
            with self._lock:
                _subtract(self._rejected, accounting.rejected)
                _subtract(self._dropped, accounting.dropped)
                self._dirty = bool(self._rejected or self._dropped)

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

    def begin_shutdown(self) -> None:
        """Refuse new spans (counted as ``shutdown`` drops) and let the worker drain; returns at once.

        :meth:`shutdown` then waits for the drain. Lets several processors drain in parallel.
        """
        with self._lock:
            self._shutdown = True
            self._stopping = True
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
            self.begin_shutdown()
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
        in_flight = self._in_flight
        if self._in_flight_finished or self._finisher is None:
            sessions = [_session_of(span) for span, _ in in_flight]
        else:
            sessions = [self._queued_session(span) for span, _ in in_flight]
        sessions.extend(self._queued_session(span) for span, _ in self._queue)
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
                unpersisted_rejected=_copy(self._rejected),
                unpersisted_dropped=_copy(self._dropped),
            )
