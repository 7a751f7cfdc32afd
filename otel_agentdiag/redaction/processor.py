"""``RedactingSpanProcessor``: rebuilds every ended span under a policy and forwards only the rebuilt span.

The work is a :class:`RedactionStage`: a batch in, the redacted batch and the rejected spans out. ``configure()``
runs it as one stage of each destination's batch worker (pipeline/build.py), off the agent's thread; the
processor is the same stage run on the thread that ends the span, for a chain of the user's own. It *wraps* the
processor it feeds instead of sitting beside it on the provider: sibling processors all see the same frozen span,
so a sibling could never redact for its neighbour. The original span is never forwarded. If redaction itself
fails, the span is dropped or tombstoned, and counted.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.context import current_conversation_id
from otel_agentdiag._internal.errors import handle_internal_errors, log_internal_error
from otel_agentdiag._internal.fork import reinit_after_fork
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag._internal.sdk import span_attributes
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.presets import STRICT
from otel_agentdiag.redaction.reasons import REDACTOR_ERROR
from otel_agentdiag.redaction.redactor import _DRIFT_LIMIT as _DRIFT_LIMIT  # read by tests
from otel_agentdiag.redaction.redactor import SpanRedactor
from otel_agentdiag.redaction.undeclared import note_undeclared

__all__ = ["RedactingSpanProcessor", "RedactionStage", "SpanRedactor"]

if TYPE_CHECKING:
    from otel_agentdiag.content.recorder import ContentRecorder

_logger = logging.getLogger(__name__)


class RedactionStage:
    """Apply ``policy`` to a batch of ended spans: a stage of a batch worker (``process``), never raising.

    Fail closed: when the redactor cannot rebuild a span (a rule or callback raised), the original never goes on;
    per ``policy.on_error`` a tombstone (ids, timing, kind, status code and ``agentdiag.redaction.redactor_error``)
    goes in its place, or the span is rejected (``redactor_error``, filed under :meth:`session_of`).

    ``content`` (the local store's branch only, from ``configure(capture_content=True)``): content captured for a
    span moves onto its redacted copy, where the SQLite exporter finds it. It never becomes an attribute, so the
    policy never sees it and no other branch carries it. ``warn_undeclared``: warn once per kind when a name no
    code declared leaves as ``_OTHER`` (:mod:`~otel_agentdiag.redaction.undeclared`); off for the redactions of
    stored or test data, whose names are not the running agent's.

    Correlation ids our instrumentation kept beside the span (``_internal/ids.py``, never on it) are laid over its
    attributes before the policy applies, so they leave as this destination's digests and nowhere raw.

    Counters (monotonic, read without a lock): ``redacted`` spans rebuilt and passed on; ``failed`` spans the
    redactor could not rebuild (of which ``tombstoned`` were replaced by a tombstone); ``dropped`` spans nothing
    was passed on for.
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        hasher: IdHasher,
        names: NameRegistry | None = None,
        content: ContentRecorder | None = None,
        warn_undeclared: bool = False,
    ) -> None:
        self.redactor = SpanRedactor(policy or STRICT, hasher, names)
        self._content = content
        self._warn_undeclared = warn_undeclared
        self._lock = threading.Lock()
        self.redacted = 0
        self.failed = 0
        self.tombstoned = 0
        self.dropped = 0
        reinit_after_fork(self._at_fork_reinit)

    def _at_fork_reinit(self) -> None:
        """The counters' lock is taken on a batch worker: one held there at the fork is replaced in the child."""
        self._lock = threading.Lock()

    @property
    def policy(self) -> Policy:
        return self.redactor.policy

    def drift_report(self, candidates: Iterable[str] = ()) -> dict[str, Any]:
        """See :meth:`SpanRedactor.drift_report`."""
        return self.redactor.drift_report(candidates)

    def _count(self, counter: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + n)

    def process(self, spans: list[ReadableSpan]) -> tuple[list[ReadableSpan], list[tuple[str | None, str]]]:
        """The stage: each span redacted (or its tombstone), in order, and the rejected ones as (session,
        ``redactor_error``). One counter lock per batch. Never raises."""
        kept: list[ReadableSpan] = []
        rejected: list[tuple[str | None, str]] = []
        redacted = tombstoned = 0
        for span in spans:
            clean, tombstone = self.redact(span)
            if clean is None:
                rejected.append((self.session_of(span), REDACTOR_ERROR))
                continue
            kept.append(clean)
            if tombstone:
                tombstoned += 1
            else:
                redacted += 1
        if redacted or tombstoned:
            with self._lock:
                self.redacted += redacted
                self.tombstoned += tombstoned
        return kept, rejected

    def redact(self, span: ReadableSpan) -> tuple[ReadableSpan | None, bool]:
        """The redacted span; on failure its tombstone (``on_error="tombstone"``) or None (nothing may go on); and
        whether it is a tombstone. Counts ``failed`` and, for None, ``dropped``; never raises."""
        try:
            clean = self.redactor.redact(span)
            if self._content is not None:
                self._content.transfer(span, clean)
            if self._warn_undeclared:
                note_undeclared(clean)
            return clean, False
        except Exception as exc:  # noqa: BLE001 - fail closed: never pass the original on
            try:
                return self._fail_closed(span, exc)
            except Exception as error:  # noqa: BLE001 - even the fallback failed: nothing goes on
                log_internal_error("redacting a span", error)
                return None, False

    def _fail_closed(self, span: ReadableSpan, exc: Exception) -> tuple[ReadableSpan | None, bool]:
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

    def session_of(self, span: ReadableSpan) -> str | None:
        """The session digest a span not redacted (yet) is filed under: queued, dropped or rejected. Never raises."""
        try:
            kept = self.redactor.accounting_attributes(span)
            found = kept.get(sc.GEN_AI_CONVERSATION_ID, kept.get(sc.SESSION_ID))
            return found if isinstance(found, str) else None
        except Exception:  # noqa: BLE001 - the span is still counted, without its session
            return None


class RedactingSpanProcessor(RedactionStage, SpanProcessor):
    """Apply ``policy`` to every ended span and hand the rebuilt span to ``span_processor``, synchronously.

    The :class:`RedactionStage` on the thread that ends the span, for a chain of your own (``configure()`` runs
    the stage on its batch workers instead). A rejected span is reported to ``span_processor`` when it keeps
    accounts (``record_rejected``: an :class:`~otel_agentdiag.pipeline.AccountingBatchSpanProcessor`), filed
    under the session digest the store would have used. ``redact_in_worker`` is deprecated and ignored: the
    redaction runs here.

    ``on_start`` is not forwarded (the wrapped processor would see a raw, mutable span); it only records the
    enclosing agent run's conversation id beside spans that lack one (``propagate_conversation``), so spans from
    other instrumentations inside a run are filed under its session (as a digest, at ``on_end``), while no other
    processor on the provider sees the raw id.

    Counters as the stage's; ``dropped`` also counts spans the wrapped processor raised for.
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
        super().__init__(policy, hasher=hasher, names=names, content=content, warn_undeclared=warn_undeclared)
        if redact_in_worker:
            warnings.warn(
                "redact_in_worker is deprecated and ignored: RedactingSpanProcessor redacts as spans end",
                DeprecationWarning,
                stacklevel=2,
            )
        self._next = span_processor
        self._propagate = propagate_conversation
        self._shutdown = False

    exports_only_redacted = True
    """It forwards only the spans it rebuilt (see :func:`otel_agentdiag.pipeline.audit.foreign_processors`)."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if not self._propagate:
            return
        try:
            conversation = current_conversation_id(parent_context)
            if conversation is not None and sc.GEN_AI_CONVERSATION_ID not in span_attributes(span):
                _ids.TABLE.record_conversation(span, conversation)  # beside the span, never on it
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            log_internal_error("propagating the conversation id", exc)

    def on_end(self, span: ReadableSpan) -> None:
        if self._shutdown:
            return
        if self._propagate:
            try:
                _ids.TABLE.pin(span)  # the raw ids the policy lays over the span, tied to the ended span
            except Exception as exc:  # noqa: BLE001
                log_internal_error("handing a span's ids over", exc)
        clean, tombstone = self.redact(span)
        if clean is None:
            self._report_rejected(span)
        elif self._forward(clean):
            self._count("tombstoned" if tombstone else "redacted")

    def _report_rejected(self, span: ReadableSpan) -> None:
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
