"""``RedactingSpanProcessor``: rebuilds every ended span under a policy and forwards only the rebuilt span.

It *wraps* the processor it feeds (a batching processor in front of an exporter) instead of sitting beside
it on the provider: sibling processors all see the same frozen span, so a sibling could never redact for its
neighbour. The original span is never forwarded. If redaction itself fails, the span is dropped and counted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.context import current_conversation_id
from otel_agentdiag._internal.errors import handle_internal_errors, log_internal_error
from otel_agentdiag._internal.fork import reinit_after_fork
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag._internal.spans import span_attributes
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.presets import STRICT
from otel_agentdiag.redaction.reasons import REDACTOR_ERROR
from otel_agentdiag.redaction.redactor import _DRIFT_LIMIT as _DRIFT_LIMIT  # read by tests
from otel_agentdiag.redaction.redactor import SpanRedactor, attributes_with_ids
from otel_agentdiag.redaction.undeclared import note_undeclared

__all__ = ["RedactingSpanProcessor", "SpanRedactor", "attributes_with_ids"]

if TYPE_CHECKING:
    from otel_agentdiag.content.recorder import ContentRecorder

_logger = logging.getLogger(__name__)


class RedactingSpanProcessor(SpanProcessor):
    """Apply ``policy`` to every ended span and hand the rebuilt span to ``span_processor``.

    Fail closed: when the redactor cannot rebuild a span (a rule or callback raised), the original is never
    forwarded; per ``policy.on_error`` a tombstone (ids, timing, kind, status code and
    ``agentdiag.redaction.redactor_error``) goes in its place, or nothing. Either way it is counted.

    ``redact_in_worker=True`` (what ``configure()`` uses) moves the redaction off the thread that ends the span:
    ``span_processor`` must be an :class:`~otel_agentdiag.pipeline.AccountingBatchSpanProcessor`, which then
    queues spans as they ended and passes every one through :meth:`finish_span` on its worker thread before any
    exporter sees it. Same policy, same fail-closed outcome, same counts; the agent's thread pays only for
    queueing. The raw spans wait in the queue in process memory (bounded, as the SDK's own batching does).

    ``content`` (the local store's branch only, from ``configure(capture_content=True)``): content captured
    for a span moves onto its redacted copy, where the SQLite exporter finds it. It never becomes an attribute,
    so the policy never sees it and no other branch carries it.

    Correlation ids our instrumentation kept beside the span (``_internal/ids.py``, never on it) are laid over
    its attributes before the policy applies, so they leave as this destination's digests and nowhere raw.

    ``on_start`` is not forwarded (the wrapped processor would see a raw, mutable span); it only records the
    enclosing agent run's conversation id beside spans that lack one, so spans from other instrumentations
    inside a run are filed under its session (as a digest, at ``on_end``), while no other processor on the
    provider sees the raw id.

    Counters (monotonic, read without a lock): ``redacted`` spans rebuilt and forwarded; ``failed`` spans
    the redactor could not rebuild (of which ``tombstoned`` were replaced by a tombstone); ``dropped`` spans
    nothing was forwarded for (a failure with ``on_error="drop"``, or the wrapped processor raised).
    """

    def __init__(
        self,
        span_processor: SpanProcessor,
        *,
        policy: Policy | None = None,
        hasher: IdHasher,
        names: NameRegistry | None = None,
        propagate_conversation: bool = True,
        redact_in_worker: bool = False,
        content: ContentRecorder | None = None,
        warn_undeclared: bool = False,
    ) -> None:
        self._next = span_processor
        self._warn_undeclared = warn_undeclared
        """The user's pipeline (``configure()``, :func:`otel_agentdiag.redacting`): warn once per kind when a name no
        code declared leaves as ``_OTHER`` (:mod:`~otel_agentdiag.redaction.undeclared`). Off for the redactions
        of stored or test data (ingest, the canary), whose names are not the running agent's."""
        self._content = content
        """The local store's branch only: captured content moves from each ended span onto its redacted copy."""
        self._propagate = propagate_conversation
        """``False`` when something before it on the provider (``configure()``'s sequencer) already records the
        run's conversation id beside spans at start and pins their ids at end: one on_start and one pin less per
        span and destination."""
        self.redactor = SpanRedactor(policy or STRICT, hasher, names)
        self._lock = threading.Lock()
        self._shutdown = False
        self.redacted = 0
        """Spans rebuilt and forwarded."""
        self.failed = 0
        """Spans the redactor could not rebuild (never forwarded as they were)."""
        self.tombstoned = 0
        """Failed spans replaced by a tombstone."""
        self.dropped = 0
        """Spans for which nothing was forwarded."""
        self._in_worker = False
        reinit_after_fork(self._at_fork_reinit)
        if redact_in_worker:
            attach = getattr(span_processor, "set_finisher", None)
            if attach is None:
                raise TypeError(
                    "redact_in_worker=True needs a span processor that redacts on its export thread "
                    f"(AccountingBatchSpanProcessor); {type(span_processor).__name__} cannot"
                )
            attach(self)
            self._in_worker = True

    def _at_fork_reinit(self) -> None:
        """The counters' lock is taken on the batch worker: one held there at the fork is replaced in the child."""
        self._lock = threading.Lock()

    exports_only_redacted = True
    """It forwards only the spans it rebuilt (see :func:`otel_agentdiag.pipeline.audit.foreign_processors`)."""

    @property
    def policy(self) -> Policy:
        return self.redactor.policy

    @property
    def redacts_in_worker(self) -> bool:
        """Whether the wrapped batch processor redacts every span on its worker (``redact_in_worker=True``)."""
        return self._in_worker

    def drift_report(self, candidates: Iterable[str] = ()) -> dict[str, Any]:
        """See :meth:`SpanRedactor.drift_report`."""
        return self.redactor.drift_report(candidates)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if not self._propagate:
            return
        try:
            conversation = current_conversation_id(parent_context)
            if conversation is not None and sc.GEN_AI_CONVERSATION_ID not in span_attributes(span):
                _ids.TABLE.record_conversation(span, conversation)  # beside the span, never on it
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            log_internal_error("propagating the conversation id", exc)

    def _count(self, counter: str) -> None:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + 1)

    def on_end(self, span: ReadableSpan) -> None:
        if self._shutdown:
            return
        if self._propagate:
            # The span's raw ids are tied to the ended span: found there by finish_span() on the worker, and
            # released with it. Without propagation the processor that recorded them at start (configure()'s
            # sequencer, first on the provider) has pinned them already.
            try:
                _ids.TABLE.pin(span)
            except Exception as exc:  # noqa: BLE001
                log_internal_error("handing a span's ids over", exc)
        if self._in_worker:
            # Queued as it ended; the batch processor's worker calls finish_span() before export.
            self._forward(span)
            return
        clean, tombstone = self._redact_or_tombstone(span)
        if clean is None:
            self._report_rejected(span)
        elif self._forward(clean):
            self._count("tombstoned" if tombstone else "redacted")

    def _redact_or_tombstone(self, span: ReadableSpan) -> tuple[ReadableSpan | None, bool]:
        """The redacted span; on failure the tombstone (``on_error="tombstone"``) or None (nothing may go on);
        and whether it is a tombstone. Counts ``failed`` and, for None, ``dropped``.
        """
        try:
            clean = self.redactor.redact(span)
            if self._content is not None:
                self._content.transfer(span, clean)
            if self._warn_undeclared:
                note_undeclared(clean)
            return clean, False
        except Exception as exc:  # noqa: BLE001 - fail closed: never export the original
            return self._fail_closed(span, exc)

    def _fail_closed(self, span: ReadableSpan, exc: Exception) -> tuple[ReadableSpan | None, bool]:
        """After redacting ``span`` raised ``exc``: the tombstone or None, as :meth:`_redact_or_tombstone`."""
        self._count("failed")
        _logger.warning(
            "otel-agentdiag: a span could not be redacted (%s); %s",
            type(exc).__name__,
            "a tombstone was exported instead" if self.policy.on_error == "tombstone" else "it was dropped",
        )
        if self._content is not None:
            self._content.discard(span)  # a tombstone carries nothing of the span
        if self.policy.on_error == "tombstone":
            try:
                return self.redactor.tombstone(span), True
            except Exception:  # noqa: BLE001
                pass
        self._count("dropped")
        return None, False

    # -- finishing on the batch processor's worker (redact_in_worker=True) ---------------------------------
    def finish_span(self, span: ReadableSpan) -> ReadableSpan | None:
        """:class:`~otel_agentdiag.pipeline.batching.SpanFinisher`: the span to export, or None (rejected: the
        batch processor counts it as ``redactor_error``). Runs on the worker thread; never raises. One span of
        :meth:`finish_batch`, which the worker calls."""
        return self.finish_batch((span,))[0]

    def finish_batch(self, spans: Sequence[ReadableSpan]) -> list[ReadableSpan | None]:
        """Each span redacted, in order, with one lock for the counters: a span that cannot be redacted fails
        closed (its tombstone, or None: rejected) and is counted as on the ending thread. Never raises."""
        out: list[ReadableSpan | None] = []
        redact = self.redactor.redact
        content = self._content
        warn = self._warn_undeclared
        redacted = 0
        for span in spans:
            clean: ReadableSpan | None
            try:
                clean = done = redact(span)
                if content is not None:
                    content.transfer(span, done)
                if warn:
                    note_undeclared(done)
                redacted += 1
            except Exception as exc:  # noqa: BLE001 - fail closed and count
                clean = self._finish_failed(span, exc)
            out.append(clean)
        if redacted:
            with self._lock:
                self.redacted += redacted
        return out

    def _finish_failed(self, span: ReadableSpan, exc: Exception) -> ReadableSpan | None:
        """The outcome for a span whose redaction raised ``exc``: the tombstone or None."""
        try:
            clean, tombstone = self._fail_closed(span, exc)
            if tombstone:
                self._count("tombstoned")
            return clean
        except Exception as error:  # noqa: BLE001 - counted as rejected by the caller
            log_internal_error("redacting a span", error)
            return None

    def session_of(self, span: ReadableSpan) -> str | None:
        """:class:`~otel_agentdiag.pipeline.batching.SpanFinisher`: the session digest of an unfinished span."""
        try:
            kept = self.redactor.accounting_attributes(span)
            found = kept.get(sc.GEN_AI_CONVERSATION_ID, kept.get(sc.SESSION_ID))
            return found if isinstance(found, str) else None
        except Exception:  # noqa: BLE001 - the span is still counted, without its session
            return None

    def _report_rejected(self, span: ReadableSpan) -> None:
        """Tell the wrapped processor, if it keeps accounts (``record_rejected``), that a span was rejected.

        It is filed under the session digest the store would have used, when that can still be computed.
        """
        record = getattr(self._next, "record_rejected", None)
        if record is None:
            return
        try:
            record(self.session_of(span), REDACTOR_ERROR)
        except Exception as exc:  # noqa: BLE001
            log_internal_error("counting a rejected span", exc)

    def _forward(self, span: ReadableSpan) -> bool:
        try:
            self._next.on_end(span)
        except Exception as exc:  # noqa: BLE001 - a downstream failure must not reach the agent
            self._count("dropped")
            _logger.warning("otel-agentdiag: the span pipeline failed (%s); span dropped", type(exc).__name__)
            return False
        return True

    def shutdown(self) -> None:
        if self._shutdown:
            return
        self._shutdown = True
        with handle_internal_errors("shutting down the span pipeline"):
            self._next.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with handle_internal_errors("flushing the span pipeline"):
            return self._next.force_flush(timeout_millis)
        return False
