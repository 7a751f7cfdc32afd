"""Spans already encoded for OTLP (protobuf bytes and OTLP-JSON text), which the fast encoders emit unchanged.

:class:`EncodedSpan` is what a reused strict-projection verdict (:mod:`otel_agentdiag.diagnostics.verdicts`)
becomes: :mod:`~otel_agentdiag.interchange.otlp_fast` takes it in place of a ``ReadableSpan``.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["EncodedSpan", "SpanIds", "dump_json"]


class SpanIds:
    """The ids of an :class:`EncodedSpan` where a span has its ``context`` (``trace_id``, ``span_id``)."""

    __slots__ = ("span_id", "trace_id")

    def __init__(self, trace_id: int, span_id: int) -> None:
        self.trace_id = trace_id
        self.span_id = span_id


class EncodedSpan:
    """A span already encoded by these encoders: its ``Span`` message bytes (``wire``, what
    :meth:`WireEncoder.span` returned) and its OTLP-JSON object as compact text (``json``, :func:`dump_json` of
    what :meth:`JsonEncoder.span` returned), with the ids, resource and scope that place it in a request.

    The encoders take it in place of a ``ReadableSpan`` and emit the stored encoding unchanged; nothing else
    does (it is not a span: never hand it to an SDK exporter or encoder). What it holds is written as given.
    """

    __slots__ = ("context", "instrumentation_scope", "json", "resource", "wire")

    def __init__(self, trace_id: int, span_id: int, resource: Any, scope: Any, wire: bytes, json_text: str) -> None:
        self.context = SpanIds(trace_id, span_id)
        self.resource = resource
        self.instrumentation_scope = scope
        self.wire = wire
        self.json = json_text


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def dump_json(value: Any) -> str:
    """Compact JSON as OTLP-JSON files are written (``json.dumps`` with ``separators=(",", ":")``,
    ``ensure_ascii=False``, ``allow_nan=False``)."""
    return _dumps(value)
