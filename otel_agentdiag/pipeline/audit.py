"""Which span processors on a provider see spans before redaction: every one that is not otel-agentdiag's.

A TracerProvider hands every span to every processor on it, in the order they were added; otel-agentdiag's
redactors rebuild the span for *their* exporters only (a sibling can never redact for its neighbour). So a
processor someone else added (a ``BatchSpanProcessor`` with the SDK's console or OTLP exporter, a vendor
SDK's) exports whatever the instrumentation put on the span, under no policy of ours. Our raw correlation ids
never are on it (``_internal/ids.py``); prompts other libraries record, exception messages, URLs may be.

:func:`foreign_processors` walks the SDK provider's processors (through ``SynchronousMultiSpanProcessor`` and
``ConcurrentMultiSpanProcessor``, read only: the SDK has no public API for it, so ``_internal/sdk.py`` reads its
fields) and names each foreign one by class, never by configuration: an endpoint or a header may hold a
credential. The fix for each is :func:`otel_agentdiag.redacting_processor` around its exporter.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

from otel_agentdiag._internal.sdk import active_span_processor, child_processors, span_exporter_of

__all__ = ["FIX", "ForeignProcessor", "foreign_processors", "span_processors", "warn_about_foreign_processors"]

_logger = logging.getLogger(__name__)

FIX = (
    "add otel_agentdiag.redacting_processor(<its exporter>) to the provider in its place, which exports only "
    "what the strict policy lets through (docs/policy.md)"
)
"""What to do about a foreign processor, in one sentence (``configure()``'s warning, ``agentdiag doctor``)."""

_MAX_DEPTH = 8
"""Multi-processors nest rarely; the walk stops there (a cycle cannot make it loop)."""


@dataclass(frozen=True)
class ForeignProcessor:
    """A processor that sees spans before redaction, named by its class (and its exporter's, when known)."""

    processor: str
    """``module.QualifiedName`` of the processor's class."""
    exporter: str | None
    """``module.QualifiedName`` of the exporter it feeds, when it exposes one (the SDK's batch and simple
    processors do), else None."""

    def __str__(self) -> str:
        name = self.processor.rpartition(".")[2]
        return f"{name}({self.exporter.rpartition('.')[2]})" if self.exporter else name

    def as_dict(self) -> dict[str, str | None]:
        return {"processor": self.processor, "exporter": self.exporter}


def _class_name(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _walk(processor: object, depth: int) -> Iterator[Any]:
    children = child_processors(processor)
    if children is None:
        yield processor
        return
    if depth >= _MAX_DEPTH:
        return
    for child in children:
        yield from _walk(child, depth + 1)


def span_processors(tracer_provider: Any = None) -> list[Any]:
    """Every span processor on an SDK ``tracer_provider`` (default: the global one), in the order the provider
    calls them; ``[]`` for a provider that is not the SDK's (the API's proxy before one is set, a vendor's)."""
    provider = trace.get_tracer_provider() if tracer_provider is None else tracer_provider
    active = active_span_processor(provider)
    if active is None:
        return []
    return list(_walk(active, 0))


def redacts_before_export(processor: object) -> bool:
    """Whether ``processor`` is otel-agentdiag's and lets nothing out unredacted: it says so through
    ``exports_only_redacted`` (the sequencer and the content recorder export nothing; a
    ``RedactingSpanProcessor`` forwards only what it rebuilt; an ``AccountingBatchSpanProcessor`` only when one of
    its stages is a redaction)."""
    return getattr(processor, "exports_only_redacted", False) is True


def foreign_processors(tracer_provider: Any = None) -> list[ForeignProcessor]:
    """The processors on ``tracer_provider`` (default: the global one) that see spans before redaction and are
    not otel-agentdiag's, in the provider's order, by class name. ``[]`` when there are none, and for a
    provider that is not the SDK's. Never raises."""
    try:
        processors = span_processors(tracer_provider)
    except Exception:  # noqa: BLE001 - an audit must not fail the caller (configure(), doctor)
        return []
    out = []
    for processor in processors:
        if redacts_before_export(processor):
            continue
        exporter = span_exporter_of(processor)
        out.append(ForeignProcessor(_class_name(processor), None if exporter is None else _class_name(exporter)))
    return out


def warn_about_foreign_processors(tracer_provider: Any) -> list[ForeignProcessor]:
    """Log one warning per foreign processor on ``tracer_provider`` (what ``configure()`` does with the provider
    it attaches to) and return them. Processors added later are found by calling :func:`foreign_processors`."""
    found = foreign_processors(tracer_provider)
    for processor in found:
        _logger.warning(
            "otel-agentdiag: span processor %s on this TracerProvider sees every span before redaction and "
            "exports it under no otel-agentdiag policy; %s",
            processor,
            FIX,
        )
    return found
