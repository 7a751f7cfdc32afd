"""``span_to_row`` builds its ``SpanRow`` without the dataclass ``__init__``: the row must be the same row."""

from __future__ import annotations

import dataclasses

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from otel_agentdiag import semconv as sc
from otel_agentdiag.exporters.sqlite import span_to_row
from otel_agentdiag.storage import SpanRow


def _span() -> ReadableSpan:
    return ReadableSpan(
        name="chat gpt-4o-mini",
        context=SpanContext(0xABC, 0x123, False, TraceFlags(1)),
        parent=SpanContext(0xABC, 0x456, False, TraceFlags(1)),
        resource=Resource({"service.name": "svc"}),
        attributes={
            sc.AGENTDIAG_KIND: "llm",
            sc.GEN_AI_CONVERSATION_ID: "conv",
            sc.AGENTDIAG_OBSERVER_ID: "0123456789abcdef",
            sc.AGENTDIAG_SEQUENCE: 3,
        },
        events=[Event("e", {"a": 1}, 5)],
        links=[Link(SpanContext(0xDEF, 0x789, False, TraceFlags(1)), {"b": "c"})],
        kind=SpanKind.CLIENT,
        status=Status(StatusCode.ERROR),
        start_time=10,
        end_time=20,
        instrumentation_scope=InstrumentationScope("lib", "1.0"),
    )


def test_the_row_equals_the_dataclass_built_one_field_by_field() -> None:
    row = span_to_row(_span())
    assert type(row) is SpanRow
    fields = {f.name: getattr(row, f.name) for f in dataclasses.fields(SpanRow)}
    assert SpanRow(**fields) == row
    assert fields["trace_id"] == f"{0xABC:032x}" and fields["span_id"] == f"{0x123:016x}"
    assert fields["parent_span_id"] == f"{0x456:016x}"
    assert (fields["kind"], fields["span_kind"], fields["status"]) == ("llm", "client", "error")
    assert (fields["session"], fields["observer"], fields["sequence"]) == ("conv", "0123456789abcdef", 3)
    assert (fields["start_ns"], fields["end_ns"]) == (10, 20)
    assert fields["events"] == [{"name": "e", "time_ns": 5, "attributes": {"a": 1}}]
    assert fields["links"] == [{"trace_id": f"{0xDEF:032x}", "span_id": f"{0x789:016x}", "attributes": {"b": "c"}}]
    assert fields["scope"] == {"name": "lib", "version": "1.0"}
    assert dict(fields["resource"]) == {"service.name": "svc"}


def test_the_row_is_replaceable() -> None:
    row = span_to_row(_span())
    other = dataclasses.replace(row, name="other")
    assert (other.name, row.name) == ("other", _span().name)
    assert repr(row).startswith("SpanRow(trace_id=")
