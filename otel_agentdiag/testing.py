"""Public test helpers: capture the spans the wrappers make, raw or redacted, in memory.

::

    from otel_agentdiag.testing import capture_spans, correlation_ids

    with capture_spans(redact=True) as captured:
        with agentdiag.tool_call("get_weather"):
            ...
    assert captured.spans()[0].name == "execute_tool get_weather"

Correlation ids (conversation, user, agent, tool call, response) are never attributes of a raw span: they
travel beside it to otel-agentdiag's redactors. :func:`correlation_ids` reads them for a test.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.context import current_conversation_id
from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.presets import STRICT
from otel_agentdiag.redaction.processor import RedactingSpanProcessor

__all__ = [
    "TEST_HASH_KEY",
    "CorrelationIdsProcessor",
    "SpanCapture",
    "capture_spans",
    "correlation_ids",
    "span_numbers",
]

TEST_HASH_KEY = bytes.fromhex("85f395ac2a57e06fb7ea8afc0587d1cd59c4f2a73b2cba6cd54eb7b9da9013d2")
"""A fixed key for tests: 32 random bytes (a chosen key would be refused), public, so never for real data."""


def correlation_ids(span: ReadableSpan) -> dict[str, Any]:
    """The raw correlation ids otel-agentdiag's instrumentation kept beside ``span`` (attribute key -> raw value),
    never on it; ``{}`` when it has none. For an ended span, once a processor of otel-agentdiag has seen it end
    (the pipeline of ``configure()``, a :class:`RedactingSpanProcessor`, or :func:`capture_spans`), for as long
    as the span object is alive."""
    found = _ids.TABLE.ids_of(span)
    return dict(found) if found else {}


def span_numbers(span: ReadableSpan) -> dict[str, Any]:
    """The numbers otel-agentdiag's sequencer gave ``span`` (``agentdiag.observer.id``, ``agentdiag.sequence``),
    kept beside it, as :func:`correlation_ids` are (and read as long); ``{}`` when it has none."""
    found = _ids.TABLE.numbers_of(span)
    return dict(found) if found else {}


class CorrelationIdsProcessor(SpanProcessor):
    """What the first processor of ``configure()``'s pipeline does with correlation ids, and nothing else: at
    start, records the enclosing agent run's conversation id beside each span that has none of its own; at end,
    hands the span's ids over to the ended span object every processor receives. Add it first to a provider of
    your own (without otel-agentdiag's pipeline) to read them with :func:`correlation_ids` on the spans your
    exporter got."""

    exports_only_redacted = True  # it exports nothing

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        attributes = span.attributes or {}
        conversation = current_conversation_id(parent_context)
        if conversation is not None and sc.GEN_AI_CONVERSATION_ID not in attributes and sc.SESSION_ID not in attributes:
            _ids.TABLE.record_conversation(span, conversation)  # on_end pins it

    def on_end(self, span: ReadableSpan) -> None:
        _ids.TABLE.pin(span)


@dataclass
class SpanCapture:
    tracer_provider: TracerProvider
    exporter: InMemorySpanExporter
    processor: SpanProcessor

    def spans(self) -> list[ReadableSpan]:
        """Finished spans, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def by_name(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]


@contextmanager
def capture_spans(
    *,
    redact: bool = False,
    policy: Policy = STRICT,
    hash_key: bytes = TEST_HASH_KEY,
    names: NameRegistry | None = None,
    resource: Resource | None = None,
) -> Iterator[SpanCapture]:
    """A fresh provider that the wrappers use for the duration of the block.

    ``redact=False`` captures spans as instrumentation made them (their raw correlation ids beside them, read
    with :func:`correlation_ids`, never among their attributes); ``redact=True`` puts a
    :class:`RedactingSpanProcessor` in front, as ``configure()`` does.
    """
    provider = TracerProvider(resource=resource or Resource.create({}), shutdown_on_exit=False)
    provider.add_span_processor(CorrelationIdsProcessor())
    exporter = InMemorySpanExporter()
    processor: SpanProcessor = SimpleSpanProcessor(exporter)
    if redact:
        processor = RedactingSpanProcessor(processor, policy=policy, hasher=IdHasher(hash_key), names=names)
    provider.add_span_processor(processor)
    previous = manual._tracer_provider_in_use()
    manual.use_tracer_provider(provider)
    try:
        yield SpanCapture(provider, exporter, processor)
    finally:
        manual.use_tracer_provider(previous)
        provider.shutdown()
