"""Fast OTLP encoders of SDK spans: the same JSON object and protobuf bytes as the SDK encoder, without protobuf.

The slow path builds an ``ExportTraceServiceRequest`` with the OpenTelemetry exporter's own encoder
(``encode_spans``: a protobuf message per attribute) and then, for OTLP-JSON, protobuf's JSON mapping
(``MessageToDict``, a Python walk over every field). Both cost more per span than reading and re-validating it.
:func:`otlp_json_object` builds the OTLP-JSON object of a request directly (what
:func:`~otel_agentdiag.interchange.otlp_request.request_to_otlp_json` returns for ``encode_spans(spans)``, key
order included) and :func:`request_bytes` the protobuf wire bytes (what ``encode_spans(spans)`` serialises to).

They only handle what they can reproduce exactly: plain ``str``/``bool``/``int``/``float``/``bytes`` values and
sequences and mappings of them, ids and times in range, strings that are valid UTF-8. Anything else raises
:class:`Unsupported` and the caller uses the slow path for the whole batch, so the output never depends on which
path ran (tests compare both on the same spans). Nothing here decides what may leave: the spans are written as
given (the strict-policy projection).
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from otel_agentdiag.interchange.encoded import EncodedSpan, dump_json

__all__ = [
    "EncodedSpan",
    "JsonEncoder",
    "Unsupported",
    "WireEncoder",
    "dump_json",
    "otlp_json_object",
    "request_bytes",
]

_KINDS = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
_INT64 = (-(1 << 63), (1 << 63) - 1)
_UINT64 = 1 << 64
_MAX_TRACE_ID = (1 << 128) - 1
_MAX_SPAN_ID = (1 << 64) - 1
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200
_MEMO_LIMIT = 65_536


class Unsupported(Exception):
    """A span holds something the fast encoders do not reproduce exactly: use the SDK encoder."""


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


def _ids(trace_id: Any, span_id: Any) -> tuple[int, int]:
    if type(trace_id) is not int or type(span_id) is not int:
        raise Unsupported("id not an int")
    if not (0 <= trace_id <= _MAX_TRACE_ID and 0 <= span_id <= _MAX_SPAN_ID):
        raise Unsupported("id out of range")
    return trace_id, span_id


def _trace_state(context: Any) -> str:
    state = context.trace_state
    if not state:
        return ""
    return _text(",".join(f"{key}={value}" for key, value in state.items()))


def _groups(spans: Sequence[Any]) -> list[tuple[Any, list[tuple[Any, list[Any]]]]]:
    """The spans grouped as ``encode_spans`` groups them: by resource (equality, first seen first), then by
    instrumentation scope (None for none). Each distinct object is hashed once."""
    by_resource: dict[Any, dict[Any, list[Any]]] = {}
    resource_ids: dict[int, dict[Any, list[Any]]] = {}
    scope_ids: dict[tuple[int, int], list[Any]] = {}
    for span in spans:
        resource = span.resource
        scopes = resource_ids.get(id(resource))
        if scopes is None:
            scopes = resource_ids[id(resource)] = by_resource.setdefault(resource, {})
        scope = span.instrumentation_scope or None
        members = scope_ids.get((id(resource), id(scope)))
        if members is None:
            members = scope_ids[(id(resource), id(scope))] = scopes.setdefault(scope, [])
        members.append(span)
    return [(resource, list(scopes.items())) for resource, scopes in by_resource.items()]


# -- OTLP-JSON ------------------------------------------------------------------------------------------------


def _json_value(value: Any) -> dict[str, Any]:
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
        values = [_json_value(v) for v in value]
        return {"arrayValue": {"values": values} if values else {}}
    if kind is dict:
        pairs = [_json_key_value(_text(k), v) for k, v in value.items()]
        return {"kvlistValue": {"values": pairs} if pairs else {}}
    raise Unsupported("value type")


def _json_key_value(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": _json_value(value)} if key else {"value": _json_value(value)}


class JsonEncoder:
    """One encoder per file: remembers the encodings of repeated attributes, resources and scopes."""

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
                    pair = _json_key_value(_text(key), value)
                    if len(pairs) >= _MEMO_LIMIT:
                        pairs.clear()
                    pairs[memo] = pair
            else:
                pair = _json_key_value(_text(key), value)
            out.append(pair)
        return out

    def span(self, span: ReadableSpan) -> dict[str, Any]:
        context = span.context
        if context is None:
            raise Unsupported("no context")
        trace_id, span_id = _ids(context.trace_id, context.span_id)
        out: dict[str, Any] = {"traceId": format(trace_id, "032x"), "spanId": format(span_id, "016x")}
        state = _trace_state(context)
        if state:
            out["traceState"] = state
        parent = span.parent
        if parent:
            out["parentSpanId"] = format(_ids(0, parent.span_id)[1], "016x")
        name = _text(span.name)
        if name:
            out["name"] = name
        kind = _KINDS.get(span.kind)
        if kind is None:
            raise Unsupported("span kind")
        out["kind"] = kind
        if span.start_time:
            out["startTimeUnixNano"] = str(_uint64(span.start_time))
        if span.end_time:
            out["endTimeUnixNano"] = str(_uint64(span.end_time))
        attributes = self.attributes(span.attributes)
        if attributes:
            out["attributes"] = attributes
        if span.dropped_attributes:
            out["droppedAttributesCount"] = span.dropped_attributes
        events = [self._event(event) for event in span.events]
        if events:
            out["events"] = events
        if span.dropped_events:
            out["droppedEventsCount"] = span.dropped_events
        links = [self._link(link) for link in span.links]
        if links:
            out["links"] = links
        if span.dropped_links:
            out["droppedLinksCount"] = span.dropped_links
        status: dict[str, Any] = {}
        if span.status is not None:
            if span.status.description:
                status["message"] = _text(span.status.description)
            if span.status.status_code.value:
                status["code"] = span.status.status_code.value
        out["status"] = status
        out["flags"] = _HAS_IS_REMOTE | (_IS_REMOTE if parent and parent.is_remote else 0)
        return out

    def _event(self, event: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if event.timestamp:
            out["timeUnixNano"] = str(_uint64(event.timestamp))
        name = _text(event.name)
        if name:
            out["name"] = name
        attributes = self.attributes(event.attributes)
        if attributes:
            out["attributes"] = attributes
        if event.dropped_attributes:
            out["droppedAttributesCount"] = event.dropped_attributes
        return out

    def _link(self, link: Any) -> dict[str, Any]:
        trace_id, span_id = _ids(link.context.trace_id, link.context.span_id)
        out: dict[str, Any] = {"traceId": format(trace_id, "032x"), "spanId": format(span_id, "016x")}
        attributes = self.attributes(link.attributes)  # the SDK encoder leaves a link's trace state out
        if attributes:
            out["attributes"] = attributes
        if link.dropped_attributes:
            out["droppedAttributesCount"] = link.dropped_attributes
        out["flags"] = _HAS_IS_REMOTE | (_IS_REMOTE if link.context.is_remote else 0)
        return out

    def scope(self, scope: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if scope is None:
            return out
        name = _text(scope.name)
        if name:
            out["name"] = name
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
                entry: dict[str, Any] = {"scope": self.scope(scope)}
                encoded = [self.span(span) for span in members]
                if encoded:
                    entry["spans"] = encoded
                if scope is not None and scope.schema_url:
                    entry["schemaUrl"] = _text(scope.schema_url)
                scope_spans.append(entry)
            attributes = self.attributes(resource.attributes)
            item: dict[str, Any] = {"resource": {"attributes": attributes} if attributes else {}}
            if scope_spans:
                item["scopeSpans"] = scope_spans
            if resource.schema_url:
                item["schemaUrl"] = _text(resource.schema_url)
            resource_spans.append(item)
        return {"resourceSpans": resource_spans} if resource_spans else {}


def otlp_json_object(spans: Sequence[ReadableSpan], encoder: JsonEncoder | None = None) -> dict[str, Any]:
    """The OTLP-JSON object of ``encode_spans(spans)`` (hex ids, integer enums, 64-bit integers as strings),
    equal to :func:`~otel_agentdiag.interchange.otlp_request.request_to_otlp_json` of it, key order included.
    Raises :class:`Unsupported` for spans it does not reproduce exactly (then use that slow path)."""
    return (encoder or JsonEncoder()).request(spans)


# -- protobuf wire bytes ---------------------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field (``tag`` is the field number shifted, with wire type 2)."""
    return _varint(tag) + _varint(len(payload)) + payload


def _wire_text(tag: int, value: Any) -> bytes:
    return _field(tag, _text(value).encode("utf-8"))


_FIXED64 = struct.Struct("<Q")
_DOUBLE = struct.Struct("<d")
_FIXED32 = struct.Struct("<I")
_KIND_BYTES = {kind: bytes((0x30, kind)) for kind in range(1, 6)}
_LOCAL_FLAGS = b"\x85\x01" + _FIXED32.pack(_HAS_IS_REMOTE)
_REMOTE_FLAGS = b"\x85\x01" + _FIXED32.pack(_HAS_IS_REMOTE | _IS_REMOTE)


def _wire_value(value: Any) -> bytes:
    """An ``AnyValue`` message body."""
    kind = type(value)
    if kind is str:
        return _wire_text(0x0A, value)
    if kind is bool:
        return b"\x10\x01" if value else b"\x10\x00"
    if kind is int:
        if not _INT64[0] <= value <= _INT64[1]:
            raise Unsupported("int out of range")
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)
    if kind is float:
        return b"\x21" + _DOUBLE.pack(value)
    if value is None:
        return b""
    if kind is bytes:
        return _field(0x3A, value)
    if kind is tuple or kind is list:
        return _field(0x2A, b"".join(_field(0x0A, _wire_value(v)) for v in value))
    if kind is dict:
        return _field(0x32, b"".join(_field(0x0A, _wire_key_value(_text(k), v)) for k, v in value.items()))
    raise Unsupported("value type")


def _wire_key_value(key: str, value: Any) -> bytes:
    return (_wire_text(0x0A, key) if key else b"") + _field(0x12, _wire_value(value))


class WireEncoder:
    """One encoder per push: remembers the bytes of repeated attributes, resources and scopes."""

    def __init__(self) -> None:
        self._pairs: dict[tuple[str, type, Any, int], bytes] = {}

    def attributes(self, tag: int, attributes: Mapping[str, Any] | None) -> bytes:
        """Each attribute as a repeated ``KeyValue`` field ``tag``."""
        if not attributes:
            return b""
        out = []
        pairs = self._pairs
        for key, value in attributes.items():
            kind = type(value)
            if kind is str or kind is int or kind is bool:
                memo = (key, kind, value, tag)
                pair = pairs.get(memo)
                if pair is None:
                    pair = _field(tag, _wire_key_value(_text(key), value))
                    if len(pairs) >= _MEMO_LIMIT:
                        pairs.clear()
                    pairs[memo] = pair
            else:
                pair = _field(tag, _wire_key_value(_text(key), value))
            out.append(pair)
        return b"".join(out)

    def span(self, span: ReadableSpan | EncodedSpan) -> bytes:
        if isinstance(span, EncodedSpan):
            return span.wire
        context = span.context
        if context is None:
            raise Unsupported("no context")
        trace_id, span_id = context.trace_id, context.span_id
        if type(trace_id) is not int or type(span_id) is not int:
            raise Unsupported("id not an int")
        if not (0 <= trace_id <= _MAX_TRACE_ID and 0 <= span_id <= _MAX_SPAN_ID):
            raise Unsupported("id out of range")
        parts = [b"\x0a\x10", trace_id.to_bytes(16, "big"), b"\x12\x08", span_id.to_bytes(8, "big")]
        if context.trace_state:
            parts.append(_wire_text(0x1A, _trace_state(context)))
        parent = span.parent
        if parent:
            parts += (b"\x22\x08", _ids(0, parent.span_id)[1].to_bytes(8, "big"))
        name = span.name
        if type(name) is str and name.isascii():
            if name:
                parts += (b"\x2a", _varint(len(name)), name.encode("ascii"))
        elif _text(name):
            parts.append(_wire_text(0x2A, name))
        kind = _KINDS.get(span.kind)
        if kind is None:
            raise Unsupported("span kind")
        parts.append(_KIND_BYTES[kind])
        start, end = span.start_time, span.end_time
        if start:
            parts += (b"\x39", _FIXED64.pack(_uint64(start)))
        if end:
            parts += (b"\x41", _FIXED64.pack(_uint64(end)))
        parts.append(self.attributes(0x4A, span.attributes))
        if span.dropped_attributes:
            parts += (b"\x50", _varint(_uint64(span.dropped_attributes)))
        events = span.events
        if events:
            parts += [_field(0x5A, self._event(event)) for event in events]
        if span.dropped_events:
            parts += (b"\x60", _varint(_uint64(span.dropped_events)))
        links = span.links
        if links:
            parts += [_field(0x6A, self._link(link)) for link in links]
        if span.dropped_links:
            parts += (b"\x70", _varint(_uint64(span.dropped_links)))
        status = span.status
        if status is None or (not status.description and not status.status_code.value):
            parts.append(b"\x7a\x00")
        else:
            body = _wire_text(0x12, status.description) if status.description else b""
            if status.status_code.value:
                body += bytes((0x18, status.status_code.value))
            parts += (b"\x7a", _varint(len(body)), body)
        parts.append(_REMOTE_FLAGS if parent and parent.is_remote else _LOCAL_FLAGS)
        return b"".join(parts)

    def _event(self, event: Any) -> bytes:
        parts: list[bytes] = []
        if event.timestamp:
            parts += (b"\x09", _FIXED64.pack(_uint64(event.timestamp)))
        if _text(event.name):
            parts.append(_wire_text(0x12, event.name))
        parts.append(self.attributes(0x1A, event.attributes))
        if event.dropped_attributes:
            parts += (b"\x20", _varint(_uint64(event.dropped_attributes)))
        return b"".join(parts)

    def _link(self, link: Any) -> bytes:
        trace_id, span_id = _ids(link.context.trace_id, link.context.span_id)
        parts = [b"\x0a\x10", trace_id.to_bytes(16, "big"), b"\x12\x08", span_id.to_bytes(8, "big")]
        parts.append(self.attributes(0x22, link.attributes))  # the SDK encoder leaves a link's trace state out
        if link.dropped_attributes:
            parts += (b"\x28", _varint(_uint64(link.dropped_attributes)))
        flags = _HAS_IS_REMOTE | (_IS_REMOTE if link.context.is_remote else 0)
        parts += (b"\x35", _FIXED32.pack(flags))
        return b"".join(parts)

    def scope(self, scope: Any) -> bytes:
        if scope is None:
            return b""
        parts: list[bytes] = []
        if _text(scope.name):
            parts.append(_wire_text(0x0A, scope.name))
        if scope.version is not None and _text(scope.version):
            parts.append(_wire_text(0x12, scope.version))
        parts.append(self.attributes(0x1A, scope.attributes))
        return b"".join(parts)

    def request(self, spans: Sequence[ReadableSpan | EncodedSpan]) -> bytes:
        out = []
        for resource, scopes in _groups(spans):
            body = [_field(0x0A, self.attributes(0x0A, resource.attributes))]
            for scope, members in scopes:
                entry = [_field(0x0A, self.scope(scope))]
                entry += [_field(0x12, self.span(span)) for span in members]
                if scope is not None and scope.schema_url:
                    entry.append(_wire_text(0x1A, scope.schema_url))
                body.append(_field(0x12, b"".join(entry)))
            if resource.schema_url:
                body.append(_wire_text(0x1A, resource.schema_url))
            out.append(_field(0x0A, b"".join(body)))
        return b"".join(out)


def request_bytes(spans: Sequence[ReadableSpan | EncodedSpan], encoder: WireEncoder | None = None) -> bytes:
    """The protobuf bytes of ``encode_spans(spans)`` (an ``ExportTraceServiceRequest``), with
    :class:`EncodedSpan` items taken as encoded. Raises :class:`Unsupported` for spans it does not reproduce
    exactly (then use the SDK encoder)."""
    return (encoder or WireEncoder()).request(spans)
