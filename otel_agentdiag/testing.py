"""Public test helpers: capture the spans the wrappers make, raw or redacted, in memory.

::

    from otel_agentdiag.testing import capture_spans

    with capture_spans(redact=True) as captured:
        with agentdiag.tool_call("get_weather"):
            ...
    assert captured.spans()[0].name == "execute_tool get_weather"
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agentdiag._internal.names import NameRegistry
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.policy import STRICT, Policy
from otel_agentdiag.redaction.processor import RedactingSpanProcessor

TEST_HASH_KEY = bytes.fromhex("85f395ac2a57e06fb7ea8afc0587d1cd59c4f2a73b2cba6cd54eb7b9da9013d2")
"""A fixed key for tests: 32 random bytes (a chosen key would be refused), public, so never for real data."""


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

    ``redact=False`` captures spans as instrumentation made them (raw IDs included); ``redact=True`` puts a
    :class:`RedactingSpanProcessor` in front, as ``configure()`` does.
    """
    provider = TracerProvider(resource=resource or Resource.create({}), shutdown_on_exit=False)
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
