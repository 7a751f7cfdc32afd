"""The batch processor's worker thread: wait for work, finish (redact) and export batches, write counts.

:class:`BatchWorker` holds the state the agent's side (:class:`~otel_agentdiag.pipeline.AccountingBatchSpanProcessor`,
which subclasses it) shares with the worker under one lock, and runs the worker's loop: take a batch when enough
spans are queued, the schedule delay passed, or a flush or shutdown asks; finish each span (the redactor); export
with bounded retries; count every span's fate in the ledger; write pending counts alone when the queue is idle.
The worker never dies on an exception, and exports run with instrumentation suppressed.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag._internal.spans import span_attributes
from otel_agentdiag.exporters.sqlite import row_session
from otel_agentdiag.pipeline.ledger import (
    EXPORT_FAILURE,
    REDACTOR_ERROR,
    Deltas,
    Ledger,
    add_delta,
    copy_deltas,
    subtract_deltas,
)
from otel_agentdiag.storage import Accounting

_logger = logging.getLogger(__name__)

__all__ = ["BatchWorker", "SpanAdapter", "SpanFinisher", "SpanRecorder", "span_session"]

_TOMBSTONE_KEY = sc.AGENTDIAG_REDACTION_PREFIX + REDACTOR_ERROR

_Item = tuple[ReadableSpan, int]
"""A queued span and its estimated size."""


def span_session(span: ReadableSpan) -> str | None:
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


class SpanAdapter(Protocol):
    """What maps a taken batch onto our span model before the finisher redacts it, on the worker thread: the
    convention adapters (:class:`~otel_agentdiag.pipeline.adapters.ConventionAdapter`)."""

    def adapt_batch(self, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
        """One span per span, in order: the span itself, or a mapped copy. Never raises."""
        ...


class SpanRecorder(Protocol):
    """What sees each batch once it is finished (redacted), before its export, on the worker thread: the GenAI
    metrics (:class:`~otel_agentdiag.pipeline.metrics.MetricsRecorder`). Once per span, whatever the export does."""

    def record_batch(self, spans: Sequence[ReadableSpan]) -> None:
        """Record the finished spans. Never raises."""
        ...


class RetryPolicy(Protocol):
    """For an exporter that retries in place (the SDK's OTLP ones): make it try once per call and say when to
    retry, so the worker retries instead, counts every attempt, and a shutdown deadline can cut a wait short
    (:class:`otel_agentdiag.exporters.otlp_attempts.OneAttempt`)."""

    budget_s: float
    """How long a batch may keep being retried, from its first attempt."""
    max_attempts: int

    def call(self, export: Callable[[], SpanExportResult]) -> tuple[bool, float | None]:
        """Call ``export`` once: success, and the delay before a retry the exporter asked for (None: no retry)."""
        ...


def _sessions_of(spans: list[ReadableSpan]) -> tuple[list[str | None], list[bool] | None]:
    """Per span, :func:`span_session` and whether it is a redaction tombstone (None: no span is), in one pass."""
    sessions: list[str | None] = []
    tombstones: list[bool] | None = None
    conversation, session_key = sc.GEN_AI_CONVERSATION_ID, sc.SESSION_ID
    for index, span in enumerate(spans):
        attributes = span_attributes(span)
        session = attributes.get(conversation, attributes.get(session_key))
        sessions.append(session if isinstance(session, str) else None)
        if _TOMBSTONE_KEY in attributes:
            if tombstones is None:
                tombstones = [False] * len(spans)
            tombstones[index] = True
    return sessions, tombstones


def _adapted(adapter: SpanAdapter | None, batch: list[_Item]) -> list[ReadableSpan]:
    """The spans of ``batch`` through ``adapter``; as they are when there is none, or when it breaks its
    contract (raises, or returns a list of another length): unmapped spans still meet the whole policy."""
    spans = [item[0] for item in batch]
    if adapter is None:
        return spans
    try:
        out = adapter.adapt_batch(spans)
        if type(out) is list and len(out) == len(spans):
            return out
    except Exception as exc:  # noqa: BLE001 - the spans go on unmapped
        log_internal_error("mapping a batch of spans", exc)
    return spans


def _finished_spans(
    finisher: SpanFinisher, batch: list[_Item], adapter: SpanAdapter | None = None
) -> list[ReadableSpan | None]:
    """What ``finisher`` makes of each span of ``batch`` (mapped by ``adapter`` first, when given), in order: one
    ``finish_batch`` call when it has one (a redactor does), else one ``finish_span`` per span. A finisher that
    breaks its contract (raises, or returns a list of another length) still fails closed: the batch goes span by
    span, a span that raises is rejected."""
    spans = _adapted(adapter, batch)
    finish_batch = getattr(finisher, "finish_batch", None)
    if finish_batch is not None:
        try:
            out = finish_batch(spans)
            if type(out) is list and len(out) == len(batch):
                return out
        except Exception as exc:  # noqa: BLE001 - then span by span: every span still finished or rejected
            log_internal_error("finishing a batch of spans", exc)
    finished: list[ReadableSpan | None] = []
    for span in spans:
        try:
            finished.append(finisher.finish_span(span))
        except Exception as exc:  # noqa: BLE001 - a finisher that breaks its contract still fails closed
            log_internal_error("finishing a span", exc)
            finished.append(None)
    return finished


class BatchWorker:
    """The worker side of a batch processor, and the state both sides share (guarded by ``_lock``)."""

    exporter: SpanExporter
    max_export_batch: int
    schedule_delay_s: float
    max_retries: int
    retry_backoff_s: float
    max_queue_spans: int
    _observer: str
    _max_ledger_sessions: int
    _max_drop_sessions: int
    _finisher: SpanFinisher | None
    _adapter: SpanAdapter | None
    _recorder: SpanRecorder | None
    _persists_counts: bool
    _export_with_accounting: Callable[[Sequence[ReadableSpan], Accounting], Any] | None
    _record_accounting: Callable[[Accounting], Any] | None
    _retry_policy: RetryPolicy | None

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
        self.folded_spans = 0
        """Drops and rejections counted under ``OVERFLOW`` (the deltas held ``max_drop_sessions`` sessions)."""
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
        self._retry_deadline: float | None = None
        """Set by shutdown: a retry that would start after it is not made (the batch is an export failure)."""
        self._full_warned = False

    def _start_worker(self) -> None:
        self._worker = threading.Thread(target=self._run, name="AgentDiagBatchSpanProcessor", daemon=True)
        self._worker.start()

    def _queued_session(self, span: ReadableSpan) -> str | None:
        """The session of a span that was queued (and so not finished yet)."""
        finisher = self._finisher
        return span_session(span) if finisher is None else finisher.session_of(span)

    def _drop_locked(self, session: str | None, cause: str, n: int = 1) -> None:
        self._ledger.drop(session, cause, n)
        if self._persists_counts:
            # Bounded: beyond max_drop_sessions sessions waiting for a write, counts go under OVERFLOW.
            if add_delta(self._dropped, session, cause, n, self._max_drop_sessions):
                self.folded_spans += n
            self._dirty = True

    def _reject_locked(self, session: str | None, reason: str) -> None:
        self._ledger.observe(session)
        self._ledger.reject(session, reason)
        if self._persists_counts:
            if add_delta(self._rejected, session, reason, 1, self._max_drop_sessions):
                self.folded_spans += 1
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
            rejected=copy_deltas(self._rejected),
            dropped=copy_deltas(self._dropped),
            peak_queue=self.peak_queue,
            queue_limit=self.max_queue_spans,
            flush_attempts=self.flush_attempts,
            flush_failures=self.flush_failures,
            pid=os.getpid(),
            started_ns=self._started_ns,
        )

    def _call_exporter(self, spans: list[ReadableSpan], accounting: Accounting | None) -> tuple[bool, float | None]:
        """One call to the exporter: success, and the delay before a retry a retry policy was asked for."""
        try:
            if accounting is not None and self._export_with_accounting is not None:
                return self._export_with_accounting(spans, accounting) is True, None
            if self._retry_policy is not None:
                return self._retry_policy.call(lambda: self.exporter.export(spans))
            return self.exporter.export(spans) is SpanExportResult.SUCCESS, None
        except Exception as exc:  # noqa: BLE001 - an exporter's failure is a failed batch, nothing more
            log_internal_error("exporting a batch of spans", exc)
            return False, None

    def _finish(self, batch: list[_Item], finisher: SpanFinisher) -> list[_Item] | None:
        """Finish a taken batch; the spans to export (None: shutdown abandoned the batch meanwhile)."""
        finished: list[_Item] = []
        rejected: list[str | None] = []
        for (span, size), clean in zip(batch, _finished_spans(finisher, batch, self._adapter), strict=True):
            if clean is not None:
                finished.append((clean, size))
                continue
            try:
                rejected.append(finisher.session_of(span))
            except Exception:  # noqa: BLE001 - counted without its session
                rejected.append(None)
        if self._recorder is not None and finished:
            try:
                self._recorder.record_batch([item[0] for item in finished])
            except Exception as exc:  # noqa: BLE001 - the spans go on to the exporter
                log_internal_error("recording metrics", exc)
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
        sessions, tombstones = _sessions_of(spans)
        attempt = 0
        started = time.monotonic()
        while True:
            with self._lock:
                if self._abandoned:
                    return  # counted as shutdown drops
                self.flush_attempts += 1
                accounting = self._accounting_locked() if self._export_with_accounting is not None else None
            ok, retry_in = self._call_exporter(spans, accounting)
            with self._lock:
                if self._abandoned:
                    return
                if ok:
                    self._settle_locked(sessions, tombstones, accounting)
                    return
                self.flush_failures += 1
                delay = self._retry_delay(attempt, retry_in, started)
            if delay is not None and self._wait_to_retry(delay):
                attempt += 1
                continue
            with self._lock:
                if self._abandoned:
                    return
                for session in sessions:
                    self._ledger.observe(session)
                    self._drop_locked(session, EXPORT_FAILURE)
                self._in_flight = []
            break
        _logger.warning(
            "otel-agentdiag: %d spans could not be exported after %d attempts; counted as %s",
            len(batch),
            attempt + 1,
            EXPORT_FAILURE,
        )

    def _settle_locked(
        self, sessions: list[str | None], tombstones: list[bool] | None, accounting: Accounting | None
    ) -> None:
        """Count an exported batch: accepted (or rejected, for a tombstone), and the deltas that went with it.

        ``sessions`` and ``tombstones`` per span, from :func:`_sessions_of`."""
        if accounting is not None:
            subtract_deltas(self._rejected, accounting.rejected)
            subtract_deltas(self._dropped, accounting.dropped)
            self._dirty = bool(self._rejected or self._dropped)
        ledger = self._ledger
        if tombstones is None:
            # Per session, in the order of its last span; counted at once when no session can be evicted meanwhile
            # (then the counts and the ledger's session order are those of one span at a time).
            per_session: dict[str | None, int] = {}
            for session in reversed(sessions):
                per_session[session] = per_session.get(session, 0) + 1
            known = ledger.sessions
            if len(known) + sum(1 for s in per_session if s not in known) <= ledger.max_sessions:
                for session, n in reversed(per_session.items()):
                    ledger.observe(session, n)
                    ledger.accept(session, n)
                self._in_flight = []
                return
        for index, session in enumerate(sessions):
            ledger.observe(session)
            if tombstones is not None and tombstones[index]:
                ledger.reject(session, REDACTOR_ERROR)
            else:
                ledger.accept(session)
        self._in_flight = []

    def _retry_delay(self, attempt: int, retry_in: float | None, started: float) -> float | None:
        """How long to wait before retrying a failed batch after ``attempt`` retries; None: give up."""
        policy = self._retry_policy
        if policy is None:
            return None if attempt >= self.max_retries else self.retry_backoff_s * (2**attempt)
        if retry_in is None or attempt + 1 >= policy.max_attempts:
            return None
        if time.monotonic() - started + retry_in > policy.budget_s:
            return None
        return retry_in

    def _wait_to_retry(self, delay: float) -> bool:
        """Wait ``delay`` s; False when shutdown abandoned the batch, or (with a retry policy) when the retry would
        start after shutdown's deadline (then the wait ends as soon as shutdown begins)."""
        if self._retry_policy is None:
            return not self._abandon.wait(delay)
        end = time.monotonic() + delay
        with self._lock:
            while True:
                deadline = self._retry_deadline
                if self._abandoned or (deadline is not None and end > deadline):
                    return False
                remaining = end - time.monotonic()
                if remaining <= 0:
                    return True
                self._wake.wait(remaining)

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
                subtract_deltas(self._rejected, accounting.rejected)
                subtract_deltas(self._dropped, accounting.dropped)
                self._dirty = bool(self._rejected or self._dropped)
