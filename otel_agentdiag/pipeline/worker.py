"""The batch processor's worker thread: wait for work, run the stages, export batches, write counts.

:class:`BatchWorker` holds the state the agent's side (:class:`~otel_agentdiag.pipeline.AccountingBatchSpanProcessor`,
which subclasses it) shares with the worker under one lock, and runs the worker's loop: take a batch when enough
spans are queued, the schedule delay passed, or a flush or shutdown asks; pass it through the stages in order (the
convention adapters, the redactor, the metrics: each a :class:`Stage`); export with bounded retries; count every
span's fate in the ledger; write pending counts alone when the queue is idle. The worker never dies on an
exception, and exports run with instrumentation suppressed.
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
from otel_agentdiag._internal.sdk import span_attributes
from otel_agentdiag.exporters.otlp import WORKER_THREAD
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

__all__ = ["BatchWorker", "Rejection", "Stage", "span_session"]

_TOMBSTONE_KEY = sc.AGENTDIAG_REDACTION_PREFIX + REDACTOR_ERROR

_Item = tuple[ReadableSpan, int]
"""A queued span and its estimated size."""

Rejection = tuple[str | None, str]
"""A span a stage rejected: the session it is filed under, and the reason (``redactor_error``)."""


def span_session(span: ReadableSpan) -> str | None:
    return row_session(span_attributes(span))


class Stage(Protocol):
    """One step a taken batch goes through on the worker thread, before export, in the order the batch processor
    was given its stages: the convention adapters, the redactor, the metrics."""

    def process(self, spans: list[ReadableSpan]) -> tuple[list[ReadableSpan], list[Rejection]]:
        """The spans that go on (the same, mapped or redacted copies, in order) and the ones rejected: together,
        one entry per span. Never raises (a stage that does, or miscounts, has its whole batch rejected)."""
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


class BatchWorker:
    """The worker side of a batch processor, and the state both sides share (guarded by ``_lock``)."""

    exporter: SpanExporter
    max_export_batch: int
    schedule_delay_s: float
    max_retries: int
    retry_backoff_s: float
    retry_budget_s: float | None
    max_queue_spans: int
    _observer: str
    _max_ledger_sessions: int
    _max_drop_sessions: int
    _stages: tuple[Stage, ...]
    _session_of: Callable[[ReadableSpan], str | None]
    _persists_counts: bool
    _export_with_accounting: Callable[[Sequence[ReadableSpan], Accounting], Any] | None
    _record_accounting: Callable[[Accounting], Any] | None

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
        self._in_flight: list[ReadableSpan] = []
        self._in_flight_finished = False
        """Whether the batch in flight went through the stages (its spans are redacted, filed as stored)."""
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
        self._worker = threading.Thread(target=self._run, name=WORKER_THREAD, daemon=True)
        self._worker.start()

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
                self._in_flight = [item[0] for item in batch]
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

    def _call_exporter(self, spans: list[ReadableSpan], accounting: Accounting | None) -> bool:
        """One call to the exporter (one attempt: see exporters/otlp.py for the SDK's OTLP ones); success."""
        try:
            if accounting is not None and self._export_with_accounting is not None:
                return self._export_with_accounting(spans, accounting) is True
            return self.exporter.export(spans) is SpanExportResult.SUCCESS
        except Exception as exc:  # noqa: BLE001 - an exporter's failure is a failed batch, nothing more
            log_internal_error("exporting a batch of spans", exc)
            return False

    def _run_stages(self, spans: list[ReadableSpan]) -> list[ReadableSpan] | None:
        """A taken batch through every stage, in order; the spans to export (None: shutdown abandoned the batch
        meanwhile). A stage that raises or miscounts has the whole batch rejected: nothing it may have left
        unredacted goes on."""
        taken = spans
        rejected: list[Rejection] = []
        for stage in self._stages:
            try:
                kept, out = stage.process(spans)
                if type(kept) is not list or len(kept) + len(out) != len(spans):
                    raise ValueError(f"{type(stage).__name__}.process() did not account for every span")
            except Exception as exc:  # noqa: BLE001 - fail closed, counted
                log_internal_error("running a stage of the span pipeline", exc)
                spans, rejected = [], [(self._session_of(span), REDACTOR_ERROR) for span in taken]
                break
            spans = kept
            rejected.extend(out)
            if not spans:
                break
        with self._lock:
            if self._abandoned:
                return None  # shutdown counted the whole batch as dropped
            for session, reason in rejected:
                self._reject_locked(session, reason)
            self._in_flight = spans
            self._in_flight_finished = True
        return spans

    def _export_batch(self, batch: list[_Item]) -> None:
        spans = [item[0] for item in batch]
        if self._stages:
            staged = self._run_stages(spans)
            if not staged:  # all rejected (counted), or abandoned by shutdown (counted there)
                return
            spans = staged
        sessions, tombstones = _sessions_of(spans)
        attempt = 0
        started = time.monotonic()
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
                    self._settle_locked(sessions, tombstones, accounting)
                    return
                self.flush_failures += 1
            delay = self._retry_delay(attempt, started)
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
            len(spans),
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

    def _retry_delay(self, attempt: int, started: float) -> float | None:
        """How long to wait before retrying a failed batch after ``attempt`` retries; None: give up."""
        delay: float = self.retry_backoff_s * 2.0**attempt
        budget = self.retry_budget_s
        if attempt >= self.max_retries or (budget is not None and time.monotonic() - started + delay > budget):
            return None
        return delay

    def _wait_to_retry(self, delay: float) -> bool:
        """Wait ``delay`` s; False when shutdown abandoned the batch, or when the retry would start after
        shutdown's deadline (then the wait ends as soon as shutdown begins: a dead collector costs an
        ``export_failure`` and one summary line, not the whole backoff)."""
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
