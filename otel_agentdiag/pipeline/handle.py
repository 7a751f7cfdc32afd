"""The handle ``configure()`` returns: flush, shut down, stats, and where the traces go.

It owns the pipeline it is given (the provider when ``configure()`` built it, the batch processors), shuts it
down once (at exit, on ``with`` exit, or when a ``multiprocessing`` worker ends) within one deadline, and
answers what became of every span (:meth:`AgentDiag.stats`).
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import TracerProvider

from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.errors import handle_internal_errors
from otel_agentdiag._internal.fork import reinit_after_fork
from otel_agentdiag.destinations import LOCAL_DESTINATION, Destination
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.options import AgentDiagOptions
from otel_agentdiag.pipeline.audit import ForeignProcessor, foreign_processors
from otel_agentdiag.pipeline.batching import AccountingBatchSpanProcessor
from otel_agentdiag.pipeline.sequence import SessionSequencer
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.processor import RedactionStage
from otel_agentdiag.redaction.redactor import SpanRedactor

if TYPE_CHECKING:
    from otel_agentdiag.content.recorder import ContentRecorder
    from otel_agentdiag.pipeline.assembly import TraceAssembler
    from otel_agentdiag.pipeline.metrics_setup import Metrics

__all__ = ["AgentDiag", "DestinationRedaction"]

_logger = logging.getLogger("otel_agentdiag")
_LIVE: weakref.WeakSet[AgentDiag] = weakref.WeakSet()
"""The handles whose pipeline is running: a second ``configure()`` while one runs is worth a warning."""
_LIVE_LOCK = threading.Lock()


class DestinationRedaction:
    """One destination's redaction as :attr:`AgentDiag.processors` shows it: the policy, redactor, counters and
    drift report of the :class:`RedactionStage` its batch processor runs, and that batch processor's flush."""

    def __init__(self, stage: RedactionStage, batching: AccountingBatchSpanProcessor) -> None:
        self.stage = stage
        self.batching = batching

    @property
    def policy(self) -> Policy:
        return self.stage.policy

    @property
    def redactor(self) -> SpanRedactor:
        return self.stage.redactor

    @property
    def redacted(self) -> int:
        return self.stage.redacted

    @property
    def failed(self) -> int:
        return self.stage.failed

    @property
    def tombstoned(self) -> int:
        return self.stage.tombstoned

    @property
    def dropped(self) -> int:
        return self.stage.dropped

    def drift_report(self, candidates: Iterable[str] = ()) -> dict[str, Any]:
        return self.stage.drift_report(candidates)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.batching.force_flush(timeout_millis)


class AgentDiag:
    """The handle ``configure()`` returns: flush, shut down, and where the traces go.

    Usable as a context manager (``with configure(...) as diag:``) that shuts the pipeline down on exit.
    A clean interpreter exit also shuts it down, which flushes every pending span.
    """

    def __init__(
        self,
        options: AgentDiagOptions,
        tracer_provider: TracerProvider | None = None,
        processors: tuple[DestinationRedaction, ...] = (),
        owns_provider: bool = False,
        destinations: tuple[Destination, ...] = (),
        sequencer: SessionSequencer | None = None,
        batch_processors: tuple[AccountingBatchSpanProcessor, ...] = (),
        content: ContentRecorder | None = None,
        metrics: Metrics | None = None,
        assembler: TraceAssembler | None = None,
    ) -> None:
        self.options = options
        self.assembler = assembler
        """Holds the traces other instrumentations start until their root ends (pipeline/assembly.py)."""
        self.metrics = metrics
        """The GenAI metrics stage when metrics are on (``None`` otherwise): its recorder, provider and branch."""
        self.content = content
        """The content recorder when ``capture_content`` is on (``None`` otherwise)."""
        self.tracer_provider = tracer_provider
        self.processors = processors
        """One destination's redaction per destination, in the order of :attr:`destinations`."""
        self.batch_processors = batch_processors
        """Each destination's batch processor, which runs its redaction (same order): queue bounds and counts."""
        self.sequencer = sequencer
        """Numbers every span per session (``agentdiag.sequence``); ``None`` when nothing is installed."""
        self.destinations = destinations
        self.key_ids = {d.name: d.hasher.key_id for d in destinations}
        """Destination → id of its hash key (it appears in every digest: ``hmac-sha256:<key id>:...``)."""
        self.key_id = destinations[0].hasher.key_id if destinations else None
        """The key id of the first destination (the local store when there is one)."""
        self._owns_provider = owns_provider
        self._lock = threading.Lock()
        self._is_shutdown = not options.enabled
        if options.enabled:
            with _LIVE_LOCK:
                running = any(not other._is_shutdown for other in _LIVE)
                _LIVE.add(self)
            if running:
                _logger.warning(
                    "otel-agentdiag: configure() was called again while an earlier call's pipeline still runs: the"
                    " wrappers and instrumentors now use the new one; shut the earlier one down first"
                    " (diag.shutdown(), or `with configure(...) as diag:`)"
                )
            atexit.register(self.shutdown)
            _shutdown_when_worker_exits(self, forked=False)
            reinit_after_fork(self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        if not self._is_shutdown:
            _shutdown_when_worker_exits(self, forked=True)

    @property
    def enabled(self) -> bool:
        return self.options.enabled

    @property
    def store_path(self) -> Path | None:
        """Absolute path of the SQLite store (``None`` when disabled or when the local branch is off, e.g.
        because the store or its key was refused)."""
        if not self.enabled or not any(d.name == LOCAL_DESTINATION for d in self.destinations):
            return None
        return self.options.store_path

    def drift_report(self, candidates: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
        """Per destination, the attribute keys its policy dropped as unknown and how often, value-free.

        Keys are shown as keyed digests unless the policy's summary is ``debug`` or the key is one of
        ``candidates`` (names you suspect and may want to allow). See ``docs/policy.md``. Covers every span ended
        before the call: redaction runs on the export thread, so this flushes the pipeline first.
        """
        self.force_flush()
        candidates = tuple(candidates)
        return {d.name: p.drift_report(candidates) for d, p in zip(self.destinations, self.processors, strict=True)}

    def foreign_processors(self) -> list[ForeignProcessor]:
        """The span processors on this pipeline's provider that are not otel-agentdiag's, so see every span
        before redaction and export it under none of our policies (by class name; never their configuration).
        ``configure()`` logs a warning for each one present when it runs; this also finds those added later.
        The fix for each: :func:`otel_agentdiag.redacting_processor` around its exporter (docs/policy.md)."""
        return [] if self.tracer_provider is None else foreign_processors(self.tracer_provider)

    @property
    def observer_id(self) -> str | None:
        """``agentdiag.observer.id`` of this pipeline (16 hex digits; ``None`` when nothing is installed)."""
        return None if self.sequencer is None else self.sequencer.observer_id

    def stats(self) -> dict[str, Any]:
        """Per destination, what became of every span so far, JSON-ready (value-free: counts and digests).

        ``{"observer": id, "destinations": {name: {"redaction": {redacted, failed, tombstoned, dropped},
        "pipeline": AccountingBatchSpanProcessor.stats().as_dict()}}}``. Per session (keyed by session digest,
        ``""`` for spans outside any session) ``observed = accepted + rejected + dropped + pending``.
        ``correlation_ids``: the side channel that carries raw ids beside spans to the redactors (process-wide):
        ``spans`` with an entry now, ``evicted`` entries (their spans went out without their ids).
        """
        destinations: dict[str, Any] = {}
        for destination, redacting, batching in zip(
            self.destinations, self.processors, self.batch_processors, strict=False
        ):
            destinations[destination.name] = {
                "redaction": {
                    "redacted": redacting.redacted,
                    "failed": redacting.failed,
                    "tombstoned": redacting.tombstoned,
                    "dropped": redacting.dropped,
                },
                "pipeline": batching.stats().as_dict(),
            }
        found: dict[str, Any] = {
            "observer": self.observer_id,
            "destinations": destinations,
            "correlation_ids": _ids.TABLE.stats(),
        }
        if self.content is not None:
            found["content"] = self.content.stats()
        if self.assembler is not None:
            found["assembly"] = self.assembler.stats()
        if self.metrics is not None:
            # where (meter_provider, otlp, global), branch, spans, measurements, failed, folded_values
            found["metrics"] = self.metrics.stats()
        return found

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything pending now; True when every branch finished within the timeout."""
        if self._is_shutdown:
            return True  # nothing pending
        ok = True
        if self.assembler is not None:  # the traces it holds first: then they are pending in the branches too
            with handle_internal_errors("handing on held traces"):
                self.assembler.flush_held()
        for processor in self.batch_processors:
            ok = processor.force_flush(timeout_millis) and ok
        if self.metrics is not None:  # after the spans: what they recorded goes out too (our own provider only)
            with handle_internal_errors("flushing metrics"):
                ok = self.metrics.force_flush(timeout_millis) and ok
        return ok

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Flush and stop the pipeline (idempotent). The wrappers fall back to the global provider.

        Bounded in time: all destinations flush in parallel within ``timeout_s`` (default 5 s), even if an
        exporter hangs; spans not exported by then are counted as dropped (``shutdown``).
        """
        with self._lock:
            if self._is_shutdown:
                return
            self._is_shutdown = True
        atexit.unregister(self.shutdown)
        if self.content is not None:
            self.content.uninstall()  # nothing more is captured; what was captured still goes out below
        started = time.monotonic()
        if self.assembler is not None:
            with handle_internal_errors("handing on held traces"):
                self.assembler.stop()
        with handle_internal_errors("shutting down"):
            self._shutdown_batching(timeout_s)
        if self.metrics is not None:  # after the batch workers recorded their last spans
            with handle_internal_errors("shutting down metrics"):
                left = (5.0 if timeout_s is None else max(timeout_s, 0.0)) - (time.monotonic() - started)
                self.metrics.shutdown(max(left, 1.0) * 1000)
        with handle_internal_errors("shutting down"):
            if self._owns_provider and self.tracer_provider is not None:
                self.tracer_provider.shutdown()
            else:
                for processor in self.batch_processors:
                    processor.shutdown()
        if manual._tracer_provider_in_use() is self.tracer_provider:
            manual.use_tracer_provider(None)

    def _shutdown_batching(self, timeout_s: float | None) -> None:
        """Stop every batch processor against one deadline (each drains while the others do)."""
        if not self.batch_processors:
            return
        timeout = max(p.shutdown_timeout_s for p in self.batch_processors) if timeout_s is None else max(timeout_s, 0.0)
        deadline = time.monotonic() + timeout
        for processor in self.batch_processors:
            processor.begin_shutdown(deadline)
        for processor in self.batch_processors:
            processor.shutdown(max(deadline - time.monotonic(), 0.0))

    def __enter__(self) -> AgentDiag:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"AgentDiag(enabled={self.enabled}, store={str(self.store_path) if self.store_path else None!r})"


def _shutdown_when_worker_exits(diag: AgentDiag, *, forked: bool) -> None:
    """Make a ``multiprocessing`` worker's clean exit flush, as the interpreter's exit does.

    multiprocessing ends fork and forkserver workers with ``os._exit()``: its own finalizers run, ``atexit``
    does not. So the handle's shutdown joins those finalizers: in a worker forked from a configured process
    (registered right after the fork, once multiprocessing has cleared the finalizers it inherited), and in a
    worker that calls ``configure()`` itself. Without multiprocessing loaded, nothing is done.
    """
    util = sys.modules.get("multiprocessing.util")
    if util is None:
        return
    if forked:
        util.register_after_fork(diag, _finalize_in_worker)
        return
    process = sys.modules.get("multiprocessing.process")
    if process is not None and process.parent_process() is not None:
        _finalize_in_worker(diag)


def _finalize_in_worker(diag: AgentDiag) -> None:
    util = sys.modules["multiprocessing.util"]
    util.Finalize(None, diag.shutdown, exitpriority=10)
