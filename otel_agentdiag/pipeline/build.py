"""Build the redacting pipeline ``configure()`` installs: exporters, batching, redactors, provider, handle.

Pipeline (design.md §2; docs/architecture.md says where the code departs from it)::

    TracerProvider ─┬─ SessionSequencer (on_start: agentdiag.observer.id, agentdiag.sequence, our LLM calls)
                    ├─ ContentRecorder (only with capture_content: content onto the ended span, for the store)
                    ├─ AccountingBatchSpanProcessor, its worker: ConventionAdapter ─ RedactionStage(local)
                    │                                            [─ MetricsRecorder] ─ SQLiteSpanExporter
                    └─ AccountingBatchSpanProcessor, its worker: ConventionAdapter ─ RedactionStage(strict)
                                                                 [─ MetricsRecorder] ─ OTLPSpanExporter
                    TraceAssembler: the spans of a trace another instrumentation started go from the first batch
                    processor to it, and back to every one once the trace is filed, numbered and its loop rebuilt

The provider hands ended spans to the batch processors; each runs its stages on its worker thread, in the order
listed (metrics on one branch only), then exports, so the agent's thread only queues the span and no exporter
ever receives anything but the redacted copy. The code below builds them in that order.
What to build comes resolved (:mod:`otel_agentdiag.options`, :mod:`otel_agentdiag.destinations`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from otel_agentdiag._internal.trust import UntrustedPathError
from otel_agentdiag.destinations import LOCAL_DESTINATION, OTLP_DESTINATION, Destination
from otel_agentdiag.exporters.otlp import export_timeout_s
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.options import AgentDiagOptions, batch_settings_from_env
from otel_agentdiag.pipeline.adapters import ConventionAdapter
from otel_agentdiag.pipeline.assembly import TraceAssembler
from otel_agentdiag.pipeline.audit import warn_about_foreign_processors
from otel_agentdiag.pipeline.batching import DEFAULT_RETRY_BACKOFF_S, AccountingBatchSpanProcessor
from otel_agentdiag.pipeline.handle import AgentDiag, DestinationRedaction
from otel_agentdiag.pipeline.sequence import SessionSequencer
from otel_agentdiag.pipeline.worker import Stage
from otel_agentdiag.redaction.processor import RedactionStage
from otel_agentdiag.storage import RetentionLimits

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider

    from otel_agentdiag.content.recorder import ContentRecorder
    from otel_agentdiag.pipeline.metrics_setup import Metrics

_logger = logging.getLogger(__name__)

__all__ = ["build_pipeline"]

_OTLP_RETRY_BACKOFF_S = 1.0
"""The OTLP branch's first retry waits 1 s, then 2 and 4 (3 retries), as the SDK's own backoff would, within the
export timeout (``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s by default), which bounds a batch's export, retries
included, as it bounds one SDK ``export()`` call."""


@dataclass
class _Branches:
    """What was built per destination, in the order of the destinations that got an exporter."""

    redactions: list[DestinationRedaction] = field(default_factory=list)
    batch_processors: list[AccountingBatchSpanProcessor] = field(default_factory=list)
    installed: list[Destination] = field(default_factory=list)
    metrics: Metrics | None = None


def build_pipeline(
    options: AgentDiagOptions,
    destinations: tuple[Destination, ...],
    *,
    tracer_provider: TracerProvider | None,
    set_global: bool | None,
    retention: RetentionLimits | None,
    meter_provider: MeterProvider | None = None,
) -> AgentDiag:
    """Build every destination's branch, put them on the provider (built here when none is given) and return
    the handle. Raises only for what an argument asked for (an OTLP endpoint argument without the extra)."""
    owns_provider = tracer_provider is None
    provider = tracer_provider if tracer_provider is not None else _new_provider(options.service_name)
    sequencer = SessionSequencer()
    content: ContentRecorder | None = None
    if options.capture_content:
        from otel_agentdiag.content.recorder import ContentRecorder

        content = ContentRecorder()
    exporters = _exporters(destinations, options, retention)
    branches = _branches(destinations, exporters, options, sequencer, content, provider, meter_provider)
    installed = bool(branches.batch_processors)
    assembler = TraceAssembler(branches.batch_processors, sequencer, content=content) if installed else None
    if installed:
        _install(provider, sequencer, content, assembler, options)
    if not owns_provider and installed:
        warn_about_foreign_processors(provider)  # the user's own processors see spans before redaction
    _maybe_set_global(provider, set_global)
    manual.use_tracer_provider(provider)
    return AgentDiag(
        options,
        tracer_provider=provider,
        processors=tuple(branches.redactions),
        owns_provider=owns_provider,
        destinations=tuple(branches.installed),
        sequencer=sequencer if installed else None,
        batch_processors=tuple(branches.batch_processors),
        content=content if installed else None,
        metrics=branches.metrics,
        assembler=assembler,
    )


def _new_provider(service_name: str | None) -> TracerProvider:
    attributes = {SERVICE_NAME: service_name} if service_name else {}
    return TracerProvider(resource=Resource.create(attributes), shutdown_on_exit=False)


def _exporters(
    destinations: tuple[Destination, ...], options: AgentDiagOptions, retention: RetentionLimits | None
) -> dict[str, SpanExporter | None]:
    """Every exporter before any thread or processor: the OTLP one first, since a missing extra raises (and
    then the ones already built are shut down)."""
    exporters: dict[str, SpanExporter | None] = {}
    try:
        for destination in sorted(destinations, key=lambda d: d.name != OTLP_DESTINATION):
            if destination.name == LOCAL_DESTINATION:
                exporters[destination.name] = _local_exporter(options, retention)
            else:
                exporters[destination.name] = _otlp_exporter(options)
    except BaseException:
        for built in exporters.values():
            if built is not None:
                built.shutdown()
        raise
    return exporters


def _branches(
    destinations: tuple[Destination, ...],
    exporters: dict[str, SpanExporter | None],
    options: AgentDiagOptions,
    sequencer: SessionSequencer,
    content: ContentRecorder | None,
    provider: TracerProvider,
    meter_provider: MeterProvider | None,
) -> _Branches:
    """A batch processor and its stages for each destination that has an exporter, in the order they run."""
    batch = batch_settings_from_env()
    branches = _Branches()
    installed = [(d, exporter) for d in destinations if (exporter := exporters[d.name]) is not None]
    names = [d.name for d, _ in installed]
    # The GenAI metrics are recorded once, from one branch's redacted spans: the OTLP one when there is one.
    metered = (OTLP_DESTINATION if OTLP_DESTINATION in names else names[0]) if names and options.metrics else None
    if options.metrics and not names:
        _logger.warning("otel-agentdiag: no destination is installed, so no metrics are recorded")
    for destination, exporter in installed:
        local = destination.name == LOCAL_DESTINATION
        if local and content is not None:
            exporter.content = content  # type: ignore[attr-defined]
        # 1. Convention adapters: foreign spans (OpenInference, OpenLLMetry, the GenAI conventions) onto our kinds
        # and keys, one owner per model call.
        adapter = ConventionAdapter(sequencer.llm_calls, content=content if local else None)
        # 2. The destination's policy. The sequencer, first on the provider, already put the run's conversation id
        # beside each span and pinned its ids at end.
        redaction = RedactionStage(
            destination.policy,
            hasher=destination.hasher,
            content=content if local else None,
            warn_undeclared=True,
        )
        stages: list[Stage] = [adapter, redaction]
        # 3. The metrics, from the redacted spans, on one branch.
        if destination.name == metered:
            branches.metrics = _metrics(options, redaction, provider, meter_provider, destination.name)
            if branches.metrics is not None:
                stages.append(branches.metrics.recorder)
        # 4. The exporter. The SDK's OTLP exporter makes one attempt per call (exporters/otlp.py); the batch
        # processor retries it, counting every attempt, as it retries a locked store.
        otlp = destination.name == OTLP_DESTINATION
        batching = AccountingBatchSpanProcessor(
            exporter,
            stages=stages,
            session_of=redaction.session_of,
            observer=sequencer,
            retry_backoff_s=_OTLP_RETRY_BACKOFF_S if otlp else DEFAULT_RETRY_BACKOFF_S,
            retry_budget_s=export_timeout_s() if otlp else None,
            **batch,
        )
        branches.redactions.append(DestinationRedaction(redaction, batching))
        branches.batch_processors.append(batching)
        branches.installed.append(destination)
    return branches


def _metrics(
    options: AgentDiagOptions,
    redaction: RedactionStage,
    provider: TracerProvider,
    meter_provider: MeterProvider | None,
    branch: str,
) -> Metrics | None:
    """The GenAI metrics stage of ``branch`` (pipeline/metrics.py); its resource as that branch's policy lets it
    out (its resource_keys), never raw."""
    from otel_agentdiag.pipeline.metrics_setup import build_metrics

    resource = redaction.redactor.clean_resource(provider.resource)
    return build_metrics(options, meter_provider=meter_provider, branch=branch, resource=resource)


def _install(
    provider: TracerProvider,
    sequencer: SessionSequencer,
    content: ContentRecorder | None,
    assembler: TraceAssembler | None,
    options: AgentDiagOptions,
) -> None:
    """Put the built processors on the provider, in the order the pipeline needs them."""
    # First: the numbers must be on the span before any destination sees it.
    provider.add_span_processor(sequencer)
    if content is not None:
        # Before the batch processors: content moves onto each ended span before any branch queues it.
        provider.add_span_processor(content)
        content.install()
        _logger.info("otel-agentdiag: content capture is on; content is kept in %s only", options.store_path)
    assert assembler is not None  # it routes the spans of other instrumentations' traces through itself
    for batching in assembler.branches:
        # Each runs its stages (adapters, redaction, metrics) on its worker: the provider hands it the span as it ended.
        provider.add_span_processor(batching)


def _local_exporter(options: AgentDiagOptions, retention: RetentionLimits | None) -> SpanExporter | None:
    from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter
    from otel_agentdiag.storage import SpanStore, StoreError

    assert options.store_path is not None
    try:
        # Opened now, so a bad store is reported at once; the exporter closes it on shutdown.
        return SQLiteSpanExporter(SpanStore(options.store_path, retention=retention), owns_store=True)
    except UntrustedPathError as exc:
        # Not ours (changed since resolve_destinations looked): fail closed, the local branch is off.
        _logger.error("otel-agentdiag: %s; the local store is off", exc)
        return None
    except (StoreError, OSError) as exc:
        # Never hurt the agent: keep the pipeline; the exporter retries opening on each batch and counts
        # what it cannot write.
        _logger.error("otel-agentdiag: cannot open the trace store %s: %s", options.store_path, exc)
        return SQLiteSpanExporter(options.store_path, retention=retention)


def _otlp_exporter(options: AgentDiagOptions) -> SpanExporter | None:
    from otel_agentdiag.exporters.otlp import (
        DEFAULT_PROTOCOL,
        endpoint_variable,
        one_attempt_timeout_s,
        otlp_span_exporter,
        quiet_worker_attempts,
    )

    quiet_worker_attempts()
    try:
        return otlp_span_exporter(
            options.otlp_endpoint, options.otlp_protocol or DEFAULT_PROTOCOL, timeout=one_attempt_timeout_s()
        )
    except ImportError:
        if options.otlp_endpoint is not None:
            raise
        _logger.warning(
            "otel-agentdiag: %s is set but the 'otlp' extra is missing (from a checkout of "
            "otel-agentdiag: pip install -e '.[otlp]'); the OTLP export is off",
            endpoint_variable() or "OTEL_EXPORTER_OTLP_ENDPOINT",
        )
        return None


def _maybe_set_global(provider: TracerProvider, set_global: bool | None) -> None:
    current = trace.get_tracer_provider()
    if current is provider or set_global is False:
        return
    no_global = isinstance(current, trace.ProxyTracerProvider)
    if set_global or no_global:
        if not no_global:
            _logger.warning("otel-agentdiag: a global TracerProvider is already set and cannot be replaced")
            return
        trace.set_tracer_provider(provider)
