"""Where the GenAI metrics go: the user's ``MeterProvider``, one built for OTLP beside the traces, or the global one.

``configure(meter_provider=...)`` records on the user's provider (never flushed or shut down by us).
Otherwise, with an OTLP trace branch, a ``MeterProvider`` of our own exports over OTLP to the same collector with
the same protocol (:func:`otel_agentdiag.exporters.otlp.otlp_metric_exporter`), its resource the tracer
provider's as the recording branch's policy lets it out (the strict preset's ``resource_keys``: never raw); the
handle flushes and shuts it down. Without an OTLP branch (local store only), the global ``MeterProvider``: what
the application set up (a Prometheus reader, say), or the API's no-op until it sets one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from otel_agentdiag.destinations import OTLP_DESTINATION
from otel_agentdiag.pipeline.metrics import MetricsRecorder

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource

    from otel_agentdiag.options import AgentDiagOptions

_logger = logging.getLogger(__name__)

__all__ = ["USER_PROVIDER", "GLOBAL_PROVIDER", "OTLP_PROVIDER", "Metrics", "build_metrics", "describe_metrics"]

USER_PROVIDER = "meter_provider"
"""``Metrics.where``: the provider the ``meter_provider`` argument gave."""
OTLP_PROVIDER = "otlp"
"""``Metrics.where``: a provider of ours with an OTLP metric exporter, beside the OTLP trace branch."""
GLOBAL_PROVIDER = "global"
"""``Metrics.where``: the global ``MeterProvider`` (no OTLP branch)."""


@dataclass(frozen=True)
class Metrics:
    """The metrics stage ``configure()`` built: the recorder, its provider and whose it is."""

    recorder: MetricsRecorder
    provider: MeterProvider
    owns_provider: bool
    where: str
    """:data:`USER_PROVIDER`, :data:`OTLP_PROVIDER` or :data:`GLOBAL_PROVIDER`."""
    branch: str
    """The destination whose redacted spans are recorded."""

    def stats(self) -> dict[str, Any]:
        return {"where": self.where, "branch": self.branch, **self.recorder.stats()}

    def force_flush(self, timeout_millis: int) -> bool:
        """Export what was recorded (our own provider only); True when done."""
        if not self.owns_provider:
            return True
        return bool(self.provider.force_flush(timeout_millis))  # type: ignore[attr-defined]

    def shutdown(self, timeout_millis: float) -> None:
        """Export the last measurements and stop (our own provider only)."""
        if self.owns_provider:
            self.provider.shutdown(timeout_millis=timeout_millis)  # type: ignore[attr-defined]


def build_metrics(
    options: AgentDiagOptions, *, meter_provider: MeterProvider | None, branch: str, resource: Resource
) -> Metrics | None:
    """The metrics stage recording ``branch``'s redacted spans (the OTLP one when there is one: the caller chooses).
    ``resource``: the tracer provider's, already cleaned by that branch's policy. None when the OTLP extra is
    missing (logged)."""
    if meter_provider is not None:
        provider, owns, where = meter_provider, False, USER_PROVIDER
    elif branch == OTLP_DESTINATION:
        built = _otlp_provider(options, resource)
        if built is None:
            return None
        provider, owns, where = built, True, OTLP_PROVIDER
    else:
        from opentelemetry import metrics

        provider, owns, where = metrics.get_meter_provider(), False, GLOBAL_PROVIDER
    return Metrics(MetricsRecorder(provider), provider, owns, where, branch)


def _otlp_provider(options: AgentDiagOptions, resource: Resource) -> MeterProvider | None:
    from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    from otel_agentdiag.exporters.otlp import DEFAULT_PROTOCOL, otlp_metric_exporter

    try:
        exporter = otlp_metric_exporter(options.otlp_endpoint, options.otlp_protocol or DEFAULT_PROTOCOL)
    except ImportError:
        _logger.warning("otel-agentdiag: the OTLP metric exporter cannot be imported; metrics are off")
        return None
    # The reader's interval comes from OTEL_METRIC_EXPORT_INTERVAL (the SDK's default: 60 s).
    return SdkMeterProvider(
        metric_readers=[PeriodicExportingMetricReader(exporter)], resource=resource, shutdown_on_exit=False
    )


def describe_metrics(options: AgentDiagOptions) -> str:
    """One line for ``agentdiag doctor``: whether metrics are on and where they go."""
    if not options.metrics:
        return "off (configure(metrics=True) or AGENTDIAG_METRICS=true turns them on)"
    if options.otlp_endpoint is not None or options.otlp_from_env:
        return f"on: OTLP {options.otlp_protocol}, beside the traces (from the OTLP branch's redacted spans)"
    return "on: the global MeterProvider (no OTLP branch; from the local branch's redacted spans)"
