"""The OTLP-JSON fast path gives exactly what the SDK encoder and protobuf's JSON mapping give, or refuses.

Every comparison is against the reference path on the same spans: ``encode_spans`` from the OpenTelemetry
exporter, then ``request_to_otlp_json`` + ``json.dumps``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind, Status, StatusCode

from otel_agentdiag.interchange.otlp_json import _chunks, otlp_json_line, write_otlp_json
from otel_agentdiag.interchange.otlp_json_fast import JsonEncoder, Unsupported, otlp_json_object
from otel_agentdiag.interchange.otlp_request import request_to_otlp_json, span_encoder

_SAMPLED = trace.TraceFlags(trace.TraceFlags.SAMPLED)
RESOURCE = Resource({"service.name": "fast", "n": 3, "ok": True, "ratio": 0.5, "tags": ("a", "b")})
OTHER_RESOURCE = Resource({"service.name": "other"}, "https://opentelemetry.io/schemas/1.30.0")
SCOPE = InstrumentationScope("scope-a", "1.2", "https://example.invalid/schema", {"scope.attr": "x"})
BARE_SCOPE = InstrumentationScope("scope-b")

VALUES: dict[str, Any] = {
    "s": "plain",
    "s.empty": "",
    "s.unicode": "héllo wörld ✓ 日本 \U0001f600",
    "s.escape": 'quote " backslash \\ newline \n tab \t nul \x00',
    "b.true": True,
    "b.false": False,
    "i.zero": 0,
    "i.neg": -42,
    "i.max": (1 << 63) - 1,
    "i.min": -(1 << 63),
    "f": 1.5,
    "f.int": 2.0,
    "f.negzero": -0.0,
    "f.tiny": 5e-324,
    "f.nan": float("nan"),
    "f.inf": float("inf"),
    "f.ninf": float("-inf"),
    "bytes": b"\x00\xffraw",
    "t.str": ("a", "", "ü"),
    "t.int": (1, -2, 3),
    "t.bool": (True, False),
    "t.float": (0.25, -0.0),
    "t.empty": (),
    "l.mixed": ["x", 1, 2.5, True, None],
    "none": None,
    "d": {"inner": "v", "n": 1, "deeper": {"x": (1, 2)}},
    "d.empty": {},
    "": "the empty key",
}


def _context(trace_id: int, span_id: int, *, remote: bool = False, state: trace.TraceState | None = None) -> Any:
    return trace.SpanContext(trace_id, span_id, is_remote=remote, trace_flags=_SAMPLED, trace_state=state)


def _spans() -> list[ReadableSpan]:
    spans = []
    for n in range(12):
        trace_id = (0xABC << 100) + n // 3
        parent = None
        if n % 3:
            parent = _context(trace_id, 0x1000 + n - 1, remote=n % 4 == 1)
        attributes: dict[str, Any] = {"k.index": n, "gen_ai.operation.name": "chat" if n % 2 else "execute_tool"}
        if n == 1:
            attributes.update(VALUES)
        events = []
        if n % 5 == 0:
            events = [Event("exception", {"exception.type": "ValueError", "n": n}, 1_700_000_000_000_000_000 + n)]
            events.append(Event("", {}, 1_700_000_000_000_000_500))
        links = []
        if n % 4 == 0:
            links = [
                trace.Link(_context(0x77, 0x88, remote=True), {"link.n": n}),
                trace.Link(_context(0x79, 0x89, state=trace.TraceState([("vendor", "v1")])), None),
            ]
        status = [Status(StatusCode.UNSET), Status(StatusCode.OK), Status(StatusCode.ERROR, "it broke")][n % 3]
        spans.append(
            ReadableSpan(
                name="" if n == 7 else f"span {n} ✓",
                context=_context(
                    trace_id, 0x1000 + n, state=trace.TraceState([("k", "v"), ("z", "1")]) if n == 2 else None
                ),
                parent=parent,
                resource=RESOURCE if n < 9 else OTHER_RESOURCE,
                attributes=attributes,
                events=events,
                links=links,
                kind=list(SpanKind)[n % 5],
                status=status,
                start_time=1_700_000_000_000_000_000 + n,
                end_time=None if n == 10 else 1_700_000_000_000_001_000 + n,
                instrumentation_scope=[SCOPE, BARE_SCOPE, None][n % 3],
            )
        )
    return spans


def _reference_json(spans: list[ReadableSpan]) -> str:
    return json.dumps(request_to_otlp_json(span_encoder()(spans)), separators=(",", ":"), ensure_ascii=False)


def _fast_json(spans: list[ReadableSpan], encoder: JsonEncoder | None = None) -> str:
    return json.dumps(otlp_json_object(spans, encoder), separators=(",", ":"), ensure_ascii=False)


def test_the_json_object_is_the_reference_paths_key_order_included() -> None:
    spans = _spans()
    assert _fast_json(spans) == _reference_json(spans)
    encoder = JsonEncoder()  # a shared encoder (its memo) gives the same again, chunk after chunk
    for chunk in _chunks(spans):
        assert _fast_json(chunk, encoder) == _reference_json(chunk)
        assert _fast_json(chunk, encoder) == _reference_json(chunk)


def test_an_empty_batch() -> None:
    assert otlp_json_object([]) == request_to_otlp_json(span_encoder()([]))


class _Text(str):
    def __str__(self) -> str:
        return "changed"


@pytest.mark.parametrize(
    "value",
    [1 << 63, -(1 << 63) - 1, "lone \ud800 surrogate", _Text("subclass"), object(), {1: "non-str key"}, {"x"}],
    ids=["int-too-big", "int-too-small", "surrogate", "str-subclass", "object", "int-key", "set"],
)
def test_what_the_fast_path_cannot_reproduce_is_refused(value: Any) -> None:
    span = _spans()[3]
    odd = ReadableSpan(
        name=span.name,
        context=span.context,
        resource=span.resource,
        attributes={"odd": value},
        kind=span.kind,
        start_time=span.start_time,
        end_time=span.end_time,
    )
    with pytest.raises(Unsupported):
        otlp_json_object([odd])
    assert otlp_json_line([odd]) == _reference_json([odd])  # the line takes the reference path


def test_a_name_that_is_not_utf8_is_refused() -> None:
    span = _spans()[0]
    odd = ReadableSpan(name="bad \udcff", context=span.context, resource=span.resource, start_time=1, end_time=2)
    with pytest.raises(Unsupported):
        otlp_json_object([odd])


def test_write_otlp_json_takes_the_reference_path_per_line(tmp_path: Path) -> None:
    spans = _spans()
    base = spans[4]
    odd = ReadableSpan(
        name="odd",
        context=_context(0xDEF, 0x42),
        resource=base.resource,
        attributes={"too.big": 1 << 64, "kept": "yes"},  # the SDK encoder drops the one it cannot encode
        kind=SpanKind.INTERNAL,
        start_time=5,
        end_time=6,
    )
    out = tmp_path / "spans.jsonl"
    write_otlp_json([*spans, odd], out)
    expected = [_reference_json(chunk) for chunk in _chunks([*spans, odd])]
    assert out.read_text(encoding="utf-8").splitlines() == expected
    assert '"kept"' in expected[-1] and "too.big" not in expected[-1]


def test_a_json_line_is_the_reference_paths_line() -> None:
    spans = _spans()
    encoder = JsonEncoder()
    assert otlp_json_line(spans) == _reference_json(spans)
    for chunk in _chunks(spans):
        assert otlp_json_line(chunk, encoder) == _reference_json(chunk)
    assert otlp_json_line([]) == _reference_json([]) == "{}"
