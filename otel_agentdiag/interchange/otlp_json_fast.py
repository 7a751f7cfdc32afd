"""The OTLP-JSON object of SDK spans built directly: what the SDK encoder plus protobuf's JSON mapping give, faster.

The reference path (:func:`~otel_agentdiag.interchange.otlp_request.request_to_otlp_json` of the OpenTelemetry
exporter's ``encode_spans``) makes a protobuf message per attribute and then walks every field in Python
(``MessageToDict``): alone about 1.5 times the cost of reading and re-validating a span, so
``export --format otlp-json`` missed its 10,000 spans/s goal by half with it (``benchmarks/push_throughput.py``,
see benchmarks/README.md). This is the one fast path ``push`` and ``export`` keep: :func:`otlp_json_object`
returns the same object, key order included, for what it reproduces exactly (plain ``str``/``bool``/``int``/
``float``/``bytes`` values and sequences and mappings of them, ids and times in range, valid UTF-8). Anything else
raises :class:`Unsupported` and the caller takes the reference path for that line, so the output never depends
on which path ran (tests compare both). Nothing here decides what may leave: spans are written as given.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

__all__ = ["JsonEncoder", "Unsupported", "otlp_json_object"]

_KINDS = {SpanKind.INTERNAL: 1, SpanKind.SERVER: 2, SpanKind.CLIENT: 3, SpanKind.PRODUCER: 4, SpanKind.CONSUMER: 5}
_INT64 = (-(1 << 63), (1 << 63) - 1)
_UINT64 = 1 << 64
_MAX_TRACE_ID = (1 << 128) - 1
_MAX_SPAN_ID = (1 << 64) - 1
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200
_MEMO_LIMIT = 65_536


class Unsupported(Exception):
    """A span holds something this encoder does not reproduce exactly: use the reference path."""


def _text(value: Any) -> str:
    """A ``str`` protobuf accepts (valid UTF-8: no lone surrogate), else :class:`Unsupported`."""
    if type(value) is not str:
        raise Unsupported("not a str")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise Unsupported("not UTF-8") from None
    return value


def _uint64(value: Any) -> int:
    if type(value) is not int or not 0 <= value < _UINT64:
        raise Unsupported("not a uint64")
    return value


def _ids(trace_id: Any, span_id: Any) -> tuple[str, str]:
    """The hex trace and span ids (``encode_spans`` writes them big-endian; OTLP-JSON as lowercase hex)."""
    if type(trace_id) is not int or type(span_id) is not int:
        raise Unsupported("id not an int")
    if not (0 <= trace_id <= _MAX_TRACE_ID and 0 <= span_id <= _MAX_SPAN_ID):
        raise Unsupported("id out of range")
    return format(trace_id, "032x"), format(span_id, "016x")


def _groups(spans: Sequence[ReadableSpan]) -> list[tuple[Any, list[tuple[Any, list[ReadableSpan]]]]]:
    """The spans grouped as ``encode_spans`` groups them: by resource (equality), then by instrumentation scope
    (None for none), each first seen first. Each distinct object is hashed once (a ``Resource`` hashes its JSON)."""
    by_resource: dict[Any, dict[Any, list[ReadableSpan]]] = {}
    by_id: dict[tuple[int, int], list[ReadableSpan]] = {}
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope or None
        members = by_id.get((id(resource), id(scope)))
        if members is None:
            members = by_id[(id(resource), id(scope))] = by_resource.setdefault(resource, {}).setdefault(scope, [])
        members.append(span)
    return [(resource, list(scopes.items())) for resource, scopes in by_resource.items()]


def _value(value: Any) -> dict[str, Any]:
    """An ``AnyValue`` as protobuf's JSON mapping writes it."""
    kind = type(value)
    if kind is str:
        return {"stringValue": _text(value)}
    if kind is bool:
        return {"boolValue": value}
    if kind is int:
        if not _INT64[0] <= value <= _INT64[1]:
            raise Unsupported("int out of range")
        return {"intValue": str(value)}
    if kind is float:
        if math.isfinite(value):
            return {"doubleValue": value}
        return {"doubleValue": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if value is None:
        return {}
    if kind is bytes:
        return {"bytesValue": base64.b64encode(value).decode("ascii")}
    if kind is tuple or kind is list:
        values = [_value(v) for v in value]
        return {"arrayValue": {"values": values} if values else {}}
    if kind is dict:
        pairs = [_key_value(_text(k), v) for k, v in value.items()]
        return {"kvlistValue": {"values": pairs} if pairs else {}}
    raise Unsupported("value type")


def _key_value(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": _value(value)} if key else {"value": _value(value)}


class JsonEncoder:
    """One encoder per file: remembers the objects of repeated scalar attributes (shared, never changed)."""

    def __init__(self) -> None:
        self._pairs: dict[tuple[str, type, Any], dict[str, Any]] = {}

    def attributes(self, attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
        if not attributes:
            return []
        out = []
        pairs = self._pairs
        for key, value in attributes.items():
            kind = type(value)
            if kind is str or kind is int or kind is bool:
                memo = (key, kind, value)
                pair = pairs.get(memo)
                if pair is None:
                    if len(pairs) >= _MEMO_LIMIT:
                        pairs.clear()
                    pair = pairs[memo] = _key_value(_text(key), value)
            else:
                pair = _key_value(_text(key), value)
            out.append(pair)
        return out

    def span(self, span: ReadableSpan) -> dict[str, Any]:
        context = span.context
        if context is None:
            raise Unsupported("no context")
        trace_id, span_id = _ids(context.trace_id, context.span_id)
        out: dict[str, Any] = {"traceId": trace_id, "spanId": span_id}
        if context.trace_state:
            out["traceState"] = _text(",".join(f"{key}={value}" for key, value in context.trace_state.items()))
        parent = span.parent
        if parent:
            out["parentSpanId"] = _ids(0, parent.span_id)[1]
        if _text(span.name):
            out["name"] = span.name
        kind = _KINDS.get(span.kind)
        if kind is None:
            raise Unsupported("span kind")
        out["kind"] = kind
        if span.start_time:
            out["startTimeUnixNano"] = str(_uint64(span.start_time))
        if span.end_time:
            out["endTimeUnixNano"] = str(_uint64(span.end_time))
        self._counted(out, "attributes", self.attributes(span.attributes), span.dropped_attributes)
        self._counted(out, "events", [self._event(e) for e in span.events], span.dropped_events, "droppedEventsCount")
        self._counted(out, "links", [self._link(link) for link in span.links], span.dropped_links, "droppedLinksCount")
        status: dict[str, Any] = {}
        if span.status is not None:
            if span.status.description:
                status["message"] = _text(span.status.description)
            if span.status.status_code.value:
                status["code"] = span.status.status_code.value
        out["status"] = status
        out["flags"] = _HAS_IS_REMOTE | (_IS_REMOTE if parent and parent.is_remote else 0)
        return out

    @staticmethod
    def _counted(
        out: dict[str, Any], key: str, items: list[Any], dropped: int, dropped_key: str = "droppedAttributesCount"
    ) -> None:
        """``items`` under ``key`` and ``dropped`` under ``dropped_key``, each only when not empty (proto3 JSON)."""
        if items:
            out[key] = items
        if dropped:
            out[dropped_key] = dropped

    def _event(self, event: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if event.timestamp:
            out["timeUnixNano"] = str(_uint64(event.timestamp))
        if _text(event.name):
            out["name"] = event.name
        self._counted(out, "attributes", self.attributes(event.attributes), event.dropped_attributes)
        return out

    def _link(self, link: Any) -> dict[str, Any]:
        trace_id, span_id = _ids(link.context.trace_id, link.context.span_id)
        out: dict[str, Any] = {"traceId": trace_id, "spanId": span_id}
        # The SDK encoder leaves a link's trace state out.
        self._counted(out, "attributes", self.attributes(link.attributes), link.dropped_attributes)
        out["flags"] = _HAS_IS_REMOTE | (_IS_REMOTE if link.context.is_remote else 0)
        return out

    def _scope(self, scope: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if scope is None:
            return out
        if _text(scope.name):
            out["name"] = scope.name
        if scope.version is not None and _text(scope.version):
            out["version"] = scope.version
        attributes = self.attributes(scope.attributes)
        if attributes:
            out["attributes"] = attributes
        return out

    def request(self, spans: Sequence[ReadableSpan]) -> dict[str, Any]:
        resource_spans = []
        for resource, scopes in _groups(spans):
            scope_spans = []
            for scope, members in scopes:
                entry: dict[str, Any] = {"scope": self._scope(scope), "spans": [self.span(s) for s in members]}
                if scope is not None and scope.schema_url:
                    entry["schemaUrl"] = _text(scope.schema_url)
                scope_spans.append(entry)
            attributes = self.attributes(resource.attributes)
            item: dict[str, Any] = {"resource": {"attributes": attributes} if attributes else {}}
            item["scopeSpans"] = scope_spans
            if resource.schema_url:
                item["schemaUrl"] = _text(resource.schema_url)
            resource_spans.append(item)
        return {"resourceSpans": resource_spans} if resource_spans else {}


def otlp_json_object(spans: Sequence[ReadableSpan], encoder: JsonEncoder | None = None) -> dict[str, Any]:
    """The OTLP-JSON object of ``encode_spans(spans)`` (hex ids, integer enums, 64-bit integers as strings),
    equal to :func:`~otel_agentdiag.interchange.otlp_request.request_to_otlp_json` of it, key order included.
    Raises :class:`Unsupported` for spans it does not reproduce exactly (then take that reference path)."""
    return (encoder or JsonEncoder()).request(spans)
